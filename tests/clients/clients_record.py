"""pytest plugin: record each test's outcome as it happens (``-p clients_record``).

Writes one JSON line per test phase report to the file named by
``TETHER_CLIENTS_RECORD`` (appending, flushed at once, so a run stopped by a
timeout still leaves everything it ran). Under pytest-xdist only the
controller writes (workers' reports reach it). ``summarize.py`` reduces the
lines to one outcome per test and compares two runs.

Used by ci/gpu_clients.sh for the peers' test suites, baseline and tether
runs alike; it installs nothing and changes no allocator.
"""

from __future__ import annotations

import json
import os

_out = None


def pytest_configure(config):
    global _out
    path = os.environ.get("TETHER_CLIENTS_RECORD")
    if path and not hasattr(config, "workerinput"):
        _out = open(path, "a", buffering=1)


def pytest_runtest_logreport(report):
    if _out is None:
        return
    line = {"id": report.nodeid, "when": report.when, "outcome": report.outcome}
    if hasattr(report, "wasxfail"):
        line["xfail"] = True
    if report.outcome == "failed":
        crash = getattr(report.longrepr, "reprcrash", None)
        text = crash.message if crash is not None else (getattr(report, "longreprtext", "") or "")
        line["why"] = " ".join(text.split())[:300]
    _out.write(json.dumps(line) + "\n")


def pytest_unconfigure(config):
    global _out
    if _out is not None:
        _out.close()
        _out = None
