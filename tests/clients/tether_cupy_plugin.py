"""pytest plugin for CuPy's own test suite: CuPy allocates through tether
(``-p tether_cupy_plugin``, with tests/clients on sys.path).

Before each test, unless CuPy's allocator is already a tether one, the plugin
calls ``tether.cupy.enable(stats)`` with ``stats`` a ``tether.StatisticsAdaptor``
over ``tether.PoolResource(tether.CudaResource(0))`` (once per process, again
only if a test put another allocator in). Works under pytest-xdist: each
worker has its own pool. The adaptor's totals are printed at the end of the
session and written for ci/gpu_clients.sh (see _tether_stats.py).
"""

from __future__ import annotations

import pytest

import _tether_stats


@pytest.fixture(autouse=True)
def _tether_cupy_allocator(request):
    import cupy
    import tether.cupy
    stats = _tether_stats.adaptor()
    if not getattr(cupy.cuda.get_allocator(), "_tether_allocator", False):
        tether.cupy.enable(stats)
        _tether_stats._state["installs"] += 1
    before = _tether_stats.before_test()
    yield
    _tether_stats.after_test(request.config, before)


def pytest_sessionfinish(session):
    _tether_stats.write(session.config)


def pytest_terminal_summary(terminalreporter, config):
    terminalreporter.write_line(_tether_stats.totals_line(config, "tether cupy plugin"))
