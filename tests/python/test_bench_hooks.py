"""benchmarks/gpu/bench_hooks.py's command line, without a GPU: the iterations and
repetitions a user asks for are the ones timed (stop 33 found the first positional
argument dropped, so `bench_hooks.py 20000 5` had timed 5 iterations)."""

from __future__ import annotations

import pytest

from script_support import REPO, load_script


@pytest.fixture(scope="module")
def bench():
    return load_script(REPO / "benchmarks" / "gpu" / "bench_hooks.py", "bench_hooks")


def test_positional_iterations_and_repetitions(bench):
    o = bench.parse_args(["20000", "5"])
    assert (o["iters"], o["reps"], o["rounds"], o["libs"], o["json"]) == (20000, 5, 3, ["torch", "cupy"], None)


def test_defaults(bench):
    o = bench.parse_args([])
    assert (o["iters"], o["reps"], o["rounds"]) == (20000, 7, 3)


def test_options_between_positionals(bench):
    o = bench.parse_args(["--rounds", "4", "1000", "--libs", "cupy", "3", "--json", "out.json"])
    assert (o["iters"], o["reps"], o["rounds"], o["libs"], o["json"]) == (1000, 3, 4, ["cupy"], "out.json")


@pytest.mark.parametrize("argv, words", [
    (["0"], "iters"), (["10", "0"], "reps"), (["--rounds", "0"], "rounds"),
    (["--rounds"], "--rounds"), (["--bogus"], "--bogus"), (["1", "2", "3"], "positional"),
])
def test_bad_arguments_name_what_is_wrong(bench, argv, words):
    with pytest.raises(SystemExit, match=words):
        bench.parse_args(argv)


def test_every_contender_is_valid_python_and_every_lib_has_its_rows(bench):
    # Each contender runs in a child interpreter built from these strings; a syntax error there
    # would only show on the GPU machine as a "not measured" row.
    import textwrap
    for (lib, who), code in bench.SETUP.items():
        compile(textwrap.dedent(code), f"<{lib} {who}>", "exec")
    for lib, extra in bench.EXTRA.items():
        assert all((lib, who) in bench.SETUP for who in bench.WHO + extra)


def test_the_split_table_subtracts_the_floor_and_the_direct_row(bench, monkeypatch, capsys):
    # Fake per-process medians (ns) so the table's arithmetic can be checked without a GPU.
    ns = {"own": 1800.0, "tether": 2000.0, "rmm": 8000.0, "floor": 1500.0, "direct": 1950.0}
    monkeypatch.setattr(bench, "measure", lambda lib, who, iters, reps: {str(n): ns[who] for n in bench.SIZES})
    assert bench.main(["10", "1", "--rounds", "2", "--libs", "cupy"]) == 0
    out = capsys.readouterr().out
    assert "cupy: where the time goes" in out
    # size, floor, direct, tether, own, tether-floor, wrapper (tether-direct), own-floor
    assert "     256   1500.0   1950.0   2000.0   1800.0         500.0     50.0      300.0" in out
    assert "cupy      256" in out and "1.111x" in out and "MISSED" in out
