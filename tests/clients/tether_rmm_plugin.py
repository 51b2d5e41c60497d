"""pytest plugin for RMM's own test suite: RMM allocates through tether
(``-p tether_rmm_plugin``, with tests/clients on sys.path).

Before each test, wherever RMM's current device resource is RMM's default (a
plain ``rmm.mr.CudaMemoryResource``, which is also what the suite's conftest
leaves behind: it calls ``rmm.reinitialize()`` after every test), the plugin
sets ``tether.rmm.memory_resource(stats)`` with ``stats`` a
``tether.StatisticsAdaptor`` over ``tether.PoolResource(tether.CudaResource(0))``.
A test (or class fixture) that chose another RMM resource - a pool, managed
memory - keeps its choice: those tests exercise RMM's own resources. The
adaptor's totals are printed at the end of the session and written for
ci/gpu_clients.sh (see _tether_stats.py): they prove the routing.
"""

from __future__ import annotations

import pytest

import _tether_stats


@pytest.fixture(autouse=True)
def _tether_rmm_resource(request):
    import rmm.mr
    import tether.rmm
    stats = _tether_stats.adaptor()
    if "mr" not in _tether_stats._state:
        _tether_stats._state["mr"] = tether.rmm.memory_resource(stats)
    if type(rmm.mr.get_current_device_resource()) is rmm.mr.CudaMemoryResource:
        rmm.mr.set_current_device_resource(_tether_stats._state["mr"])
        _tether_stats._state["installs"] += 1
    before = _tether_stats.before_test()
    yield
    _tether_stats.after_test(request.config, before)


def pytest_sessionfinish(session):
    _tether_stats.write(session.config)


def pytest_terminal_summary(terminalreporter, config):
    terminalreporter.write_line(_tether_stats.totals_line(config, "tether rmm plugin"))
