"""pytest plugin: the GPU image's workarounds, for baseline and tether runs alike (``-p clients_env``).

The image pairs numba-cuda 0.30.4 with NumPy 2.5, which changed two things it uses:
- importing numba.cuda evaluates ``np.timedelta64("nat")``, which NumPy 2.5 deprecates. RMM's
  pytest settings turn every warning into an error, so RMM's test modules that import numba
  (test_device_buffer.py, test_allocations.py) failed to import at all. numba.cuda is imported
  here once, that warning ignored, before any test module is collected.
- numba-cuda calls ``numpy.row_stack``, which NumPy 2.5 removed, when it compiles a kernel:
  it is set to ``numpy.vstack`` (what row_stack always was).
Neither touches an allocator; both runs load this plugin, so they stay comparable.
"""

from __future__ import annotations

import warnings


def pytest_configure(config):
    try:
        import numpy
    except ImportError:
        return
    if not hasattr(numpy, "row_stack"):
        numpy.row_stack = numpy.vstack
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            import numba.cuda  # noqa: F401
        except Exception:  # noqa: BLE001 - numba is optional for the suites
            pass
