"""The ``tether`` command, run as a user runs it: a subprocess (console script and
``python -m tether``), including bad arguments and malformed logs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tether

HEADER = "time_ns,thread,action,pointer,size,stream,status\n"


def run(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    full = dict(os.environ)
    full.pop("TETHER_HOOKS", None)
    if env:
        full.update(env)
    return subprocess.run([sys.executable, "-m", "tether", *args], capture_output=True, text=True,
                          timeout=timeout, env=full)


def test_console_script_is_installed():
    if not os.path.dirname(tether.__file__).startswith(sys.prefix):
        # `pip install --target DIR` (ci/gpu.sh) puts the package outside the interpreter's prefix
        # and its scripts in DIR/bin: there is no console script next to the interpreter to test.
        pytest.skip(f"tether is installed outside {sys.prefix} (pip --target): no console script there")
    exe = shutil.which("tether", path=os.path.dirname(sys.executable))
    assert exe, "the 'tether' console script is not next to the interpreter"
    p = subprocess.run([exe, "info"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(f"tether {tether.__version__}")


def test_info_json_describes_the_process():
    p = run("info", "--json", env={"TETHER_RESOURCE_HOST": "pool(host, initial_size=1MiB)"})
    assert p.returncode == 0, p.stderr
    info = json.loads(p.stdout)
    assert info["package_version"] == tether.__version__
    assert info["abi_version"] == tether.abi_version()
    assert Path(info["library"]).is_file()
    assert info["cuda"]["available"] == tether.cuda_available()
    host = info["table"][0]
    assert host == {"slot": "host", "locked": False, "spec": "pool(host, initial_size=1MiB)"}
    assert info["environment"] == {"TETHER_RESOURCE_HOST": "pool(host, initial_size=1MiB)"}
    assert len(info["table"]) == 1 + len(info["cuda"]["devices"])


def test_info_reports_a_bad_environment_spec_instead_of_failing():
    p = run("info", env={"TETHER_RESOURCE_HOST": "pool(host, initial=1)"})
    assert p.returncode == 0, p.stderr
    assert "host: error:" in p.stdout and "spec:12: unknown parameter 'initial'" in p.stdout


def test_bench_compares_specs_and_thread_counts():
    p = run("bench", "pool(host)", "statistics(pool(host))", "--threads", "1,2", "--ops", "2000",
            "--repeat", "2", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    rows = out["rows"]
    assert [(r["spec"], r["threads"]) for r in rows] == [
        ("pool(host)", 1), ("statistics(pool(host))", 1), ("pool(host)", 2), ("statistics(pool(host))", 2)]
    assert all(r["ns_per_pair"] > 0 and r["failed_allocations"] == 0 for r in rows)
    assert rows[0]["vs_first_spec"] == 1.0 and rows[0]["vs_own_first_threads"] == 1.0
    p = run("bench", "pool(host)", "--sizes", "256,1MiB", "--ops", "1000", "--repeat", "1")
    assert p.returncode == 0, p.stderr
    assert "256 B,1.00 MiB" in p.stdout and "pool(host)" in p.stdout


@pytest.mark.parametrize("args, needle", [
    (["bench", "pool(hots)"], "SPEC: "),
    (["bench", "pool(host)", "--threads", "0"], "--threads"),
    (["bench", "pool(host)", "--threads", "a,b"], "--threads"),
    (["bench", "pool(host)", "--sizes", "12 parsecs"], "--sizes"),
    (["bench", "pool(host)", "--ops", "1"], "--ops"),
])
def test_bench_bad_arguments(args, needle):
    p = run(*args)
    assert p.returncode == 2
    assert needle in p.stderr and "Traceback" not in p.stderr


def test_usage_errors_from_argparse():
    assert run().returncode == 2
    assert run("frobnicate").returncode == 2
    assert run("replay", "x.csv").returncode == 2  # --spec is required


def write_log(path: Path, lines: list[str]) -> Path:
    path.write_text(HEADER + "".join(line + "\n" for line in lines))
    return path


def two_thread_log(tmp_path: Path) -> Path:
    # thread 11 allocates two blocks on stream 0 and frees one; thread 12 allocates on stream 7
    # and frees thread 11's other block; a logged failure and a free of older memory are skipped.
    return write_log(tmp_path / "log.csv", [
        "10,11,allocate,0x1000,4096,0,TETHER_OK",
        "20,11,allocate,0x2000,65536,0,TETHER_OK",
        "30,12,allocate,0x3000,1048576,7,TETHER_OK",
        "35,12,allocate,0x0,99999999999,7,TETHER_ERROR_OUT_OF_MEMORY",
        "40,11,free,0x1000,4096,0,TETHER_OK",
        "50,12,free,0x2000,65536,7,TETHER_OK",
        "55,12,free,0x9999,64,7,TETHER_OK",
        "60,12,free,0x3000,1048576,7,TETHER_OK",
    ])


def test_replay_reports_time_footprint_and_structure(tmp_path):
    log = two_thread_log(tmp_path)
    p = run("replay", str(log), "--spec", "pool(host)", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert (out["operations"], out["threads"], out["streams"]) == (6, 2, 2)
    assert out["logged_failures"] == 1 and out["unknown_frees"] == 1
    (r,) = out["results"]
    assert r["spec"] == "pool(host)"
    assert r["allocations"] == 3 and r["deallocations"] == 3 and r["failed_allocations"] == 0
    assert 1048576 <= r["peak_live_bytes"] <= 4096 + 65536 + 1048576
    assert r["peak_footprint_bytes"] >= r["peak_live_bytes"]
    assert r["fragmentation"] >= 1.0


def test_replay_fails_naming_the_log_lines_that_no_longer_fit(tmp_path):
    log = two_thread_log(tmp_path)
    p = run("replay", str(log), "--spec", "pool(host, maximum_size=1MiB, growth_size=1MiB)",
            "--compare", "pool(host)")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "FAILED: 1 allocation(s) that succeeded in the log" in p.stdout
    assert f"{log}:4: allocate 1048576 bytes" in p.stdout  # line 4: the header is line 1
    assert "pool(host)\n" in p.stdout  # the comparison ran too


@pytest.mark.parametrize("content, needle", [
    ("", "empty file"),
    ("a,b,c\n", ":1: not a tether log"),
    (HEADER + "1,2,allocate,0x10\n", ":2: expected 7 fields"),
    (HEADER + "1,2,allocate,zz,10,0,TETHER_OK\n", ":2: pointer, size or stream is not a number"),
    (HEADER + "1,2,grab,0x10,10,0,TETHER_OK\n", ":2: unknown action 'grab'"),
    (HEADER + "1,2,allocate,0x10,10,0,TETHER_OK\n1,2,allocate,0x10,10,0,TETHER_OK\n", ":3: pointer 0x10 allocated twice"),
    (HEADER + "soon,2,allocate,0x10,10,0,TETHER_OK\n", ":2: the time is not a number"),
])
def test_replay_malformed_logs(tmp_path, content, needle):
    log = tmp_path / "bad.csv"
    log.write_text(content)
    p = run("replay", str(log), "--spec", "host")
    assert p.returncode == 2
    assert needle in p.stderr and "Traceback" not in p.stderr


def test_replay_orders_events_by_time_not_by_line(tmp_path):
    # Thread 12's allocation reused 0x1000 right after thread 11 freed it, and its line was
    # written first: the time column (a free stamped when issued) puts the free first.
    log = write_log(tmp_path / "log.csv", [
        "10,11,allocate,0x1000,4096,0,TETHER_OK",
        "30,12,allocate,0x1000,4096,0,TETHER_OK",
        "20,11,free,0x1000,4096,0,TETHER_OK",
        "40,12,free,0x1000,4096,0,TETHER_OK",
    ])
    p = run("replay", str(log), "--spec", "pool(host)", "--json")
    assert p.returncode == 0, p.stderr
    (r,) = json.loads(p.stdout)["results"]
    assert r["allocations"] == 2 and r["deallocations"] == 2 and r["failed_allocations"] == 0
    assert r["peak_live_bytes"] == 4096


def test_replay_missing_log_and_bad_spec(tmp_path):
    p = run("replay", str(tmp_path / "nope.csv"), "--spec", "host")
    assert p.returncode == 2 and "cannot open" in p.stderr
    log = two_thread_log(tmp_path)
    p = run("replay", str(log), "--spec", "pool(")
    assert p.returncode == 2 and "--spec:" in p.stderr


def test_replay_plot(tmp_path):
    pytest.importorskip("matplotlib")
    log = two_thread_log(tmp_path)
    png = tmp_path / "replay.png"
    p = run("replay", str(log), "--spec", "pool(host)", "--compare", "host", "--plot", str(png))
    assert p.returncode == 0, p.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_replay_of_a_real_logging_adaptor_log(tmp_path):
    if not hasattr(tether, "LoggingAdaptor"):
        pytest.skip("tether.LoggingAdaptor is not in this build")
    path = tmp_path / "real.csv"
    log = tether.LoggingAdaptor(tether.PoolResource(tether.HostResource()), path=str(path))
    bufs = [tether.Buffer(n, resource=log) for n in (100, 5000, 70000, 300)]
    for b in bufs[::2]:
        b.close()
    log.close()
    for b in bufs[1::2]:
        b.close()
    # the adaptor is closed only when its last buffer is: the file is complete now
    p = run("replay", str(path), "--spec", "pool(host)", "--json")
    assert p.returncode == 0, p.stderr
    (r,) = json.loads(p.stdout)["results"]
    assert r["allocations"] == 4 and r["deallocations"] == 4
