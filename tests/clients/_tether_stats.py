"""What the tether client plugins share: the statistics adaptor that proves the
routing, counted per test, written where ci/gpu_clients.sh collects it.

Each process that runs tests (the pytest process, or each pytest-xdist worker)
builds ``StatisticsAdaptor(PoolResource(CudaResource(0)))`` at its first test
and counts the tests during which the adaptor saw at least one allocation. It
writes ``$TETHER_CLIENTS_STATS_DIR/stats-<worker>.json`` every 100 tests and
at the end; the controller's terminal summary prints the totals.
"""

from __future__ import annotations

import glob
import json
import os

_state: dict = {}


def worker_name(config) -> str:
    winput = getattr(config, "workerinput", None)
    return winput["workerid"] if winput else "main"


def adaptor():
    """The process's StatisticsAdaptor over a pool over device 0, made on first use."""
    if "stats" not in _state:
        import tether
        pool = tether.PoolResource(tether.CudaResource(0))
        _state["pool"] = pool
        _state["stats"] = tether.StatisticsAdaptor(pool)
        _state.update(tests=0, routed=0, installs=0)
    return _state["stats"]


def before_test() -> int:
    return adaptor().statistics().total_count


def after_test(config, before: int) -> None:
    _state["tests"] += 1
    if _state["stats"].statistics().total_count > before:
        _state["routed"] += 1
    if _state["tests"] % 100 == 0:
        write(config)


def write(config) -> None:
    d = os.environ.get("TETHER_CLIENTS_STATS_DIR")
    if not d or "stats" not in _state:
        return
    s = _state["stats"].statistics()
    info = {"worker": worker_name(config), "tests": _state["tests"], "tests_routed": _state["routed"],
            "installs": _state["installs"], "total_count": s.total_count, "total_bytes": s.total_bytes,
            "peak_bytes": s.peak_bytes, "current_bytes": s.current_bytes, "current_count": s.current_count}
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, f".stats-{info['worker']}.json")
    with open(tmp, "w") as f:
        json.dump(info, f)
    os.replace(tmp, os.path.join(d, f"stats-{info['worker']}.json"))


def totals_line(config, label: str) -> str:
    """One line summing every process's file (or this process's counters without a directory)."""
    d = os.environ.get("TETHER_CLIENTS_STATS_DIR")
    rows = []
    if d:
        for p in sorted(glob.glob(os.path.join(d, "stats-*.json"))):
            with open(p) as f:
                rows.append(json.load(f))
    if not rows and "stats" in _state:          # no directory: this process's own counters
        s = _state["stats"].statistics()
        rows = [{"tests": _state["tests"], "tests_routed": _state["routed"], "installs": _state["installs"],
                 "total_count": s.total_count, "total_bytes": s.total_bytes, "current_bytes": s.current_bytes,
                 "current_count": s.current_count}]
    if not rows:
        return f"{label}: no statistics written (no test ran in a process with the plugin)"
    keys = ("tests", "tests_routed", "installs", "total_count", "total_bytes", "current_bytes", "current_count")
    tot = {k: sum(r[k] for r in rows) for k in keys}
    return (f"{label}: {tot['total_count']} allocations ({tot['total_bytes']} bytes) through "
            f"tether.StatisticsAdaptor(PoolResource(CudaResource(0))) in {len(rows)} process(es); "
            f"{tot['tests_routed']} of {tot['tests']} tests allocated through it; "
            f"{tot['installs']} installs; still held at the end: {tot['current_count']} allocations, "
            f"{tot['current_bytes']} bytes")
