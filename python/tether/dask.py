"""Dask: configure tether on every worker from one resource spec.

``tether.dask`` is what dask-cuda's ``RMMSetup`` plugin and ``--rmm-*`` flags
are for RMM: each worker process builds its own resource stack from a spec
(:doc:`/specs`), installs it in its current-resource table, optionally routes
PyTorch/CuPy/Numba through it, logs and tracks its allocations, and reports
its figures to the client and the scheduler.

As a worker plugin, from the client::

    from distributed import Client
    import tether.dask

    client = Client(cluster)
    client.register_plugin(tether.dask.TetherSetup("pool(cuda(), initial_size=80%)"))
    client.run(tether.dask.worker_metrics)     # {worker address: figures}

As a preload, from the command line (no client code)::

    dask worker SCHEDULER --preload tether.dask --tether-spec 'pool(cuda(), initial_size=80%)'

Importing this module needs ``distributed`` (``pip install distributed``).
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import re
import threading
import warnings
from collections.abc import Iterable
from typing import Any

import click
from distributed import WorkerPlugin

import tether
from ._convert import HOST
from ._resources import PoolResource, Resource, StatisticsAdaptor

__all__ = ["TetherSetup", "worker_metrics", "dask_setup", "dask_teardown"]

logger = logging.getLogger("tether.dask")

#: The hooks TetherSetup enables unless told otherwise (each only if its library is installed).
DEFAULT_LIBRARIES: tuple[str, ...] = ("torch", "cupy", "numba")

#: The key of tether's entry in the worker's metrics (``Worker.metrics``), which the
#: scheduler receives with each heartbeat: ``client.scheduler_info()["workers"][addr]["metrics"]["tether"]``.
METRIC_NAME = "tether"

# The hook module of each library, and the module whose presence decides whether it is installed.
_HOOKS = {"torch": ("tether.torch", "torch"), "cupy": ("tether.cupy", "cupy"),
          "numba": ("tether.numba", "numba")}

# The TetherSetup active in this process (one current-resource table per process, so at most one).
_active: TetherSetup | None = None
_active_lock = threading.Lock()


def _libraries_argument(libraries: Iterable[str] | str | None) -> tuple[str, ...]:
    """The libraries argument as a tuple of known names (a str is a comma-separated list)."""
    if libraries is None:
        return ()
    if isinstance(libraries, str):
        items: Iterable[str] = libraries.split(",")
    else:
        try:
            items = list(libraries)
        except TypeError:
            raise TypeError(f"libraries must be an iterable of names or a comma-separated str, "
                            f"not {type(libraries).__name__}") from None
    names: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"libraries: each entry must be a str, not {type(item).__name__}")
        name = item.strip().lower()
        if not name:
            continue
        if name not in _HOOKS:
            raise ValueError(f"libraries: unknown library {item.strip()!r} (known: {', '.join(_HOOKS)})")
        if name not in names:
            names.append(name)
    return tuple(names)


def _file_name_part(name: object) -> str:
    """A worker's name or address made safe for a file name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(name)).strip("_") or "worker"


class TetherSetup(WorkerPlugin):
    """A ``distributed.WorkerPlugin`` that gives each worker its own tether resource stack.

    On each worker (``setup``), in this order:

    1. builds ``spec`` with :py:func:`tether.from_spec` in the worker process.
       A CUDA resource that names no device takes the current device: on a
       dask-cuda worker (``CUDA_VISIBLE_DEVICES`` lists the worker's GPU first)
       that is the worker's GPU, device 0. A host spec configures the host slot;
    2. when ``log_directory`` is given, wraps it in a ``tether.LoggingAdaptor``
       writing ``<log_directory>/tether_<worker name>.csv`` (one file per worker;
       the directory is created);
    3. when ``track_allocations``, wraps that in a
       ``tether.TrackingAdaptor(capture_stacks=False)``;
    4. always wraps the top in a :py:class:`tether.StatisticsAdaptor`, whose
       figures :py:func:`worker_metrics` reports;
    5. installs the stack in the slot its memory belongs to
       (:py:func:`tether.set_current_resource`), or with ``set_if_unset=True``
       only if no one set that slot yet
       (:py:func:`tether.set_current_resource_if_unset`; the existing resource
       is kept and logged otherwise);
    6. enables the hooks of ``libraries`` with ``resource=None``, so PyTorch,
       CuPy and Numba allocate from the current resource of their device.
       A library that is not installed on the worker is skipped with a
       warning (logged on the logger ``tether.dask`` and issued as a
       ``RuntimeWarning``): the default names all three, and a worker without
       CuPy should still start. A hook that is installed but cannot be enabled
       (PyTorch's allocator already initialised, ...) raises, and the plugin's
       setup fails: a configuration that silently did not apply would be worse;
    7. adds :py:data:`METRIC_NAME` to the worker's metrics, which the scheduler
       receives with each heartbeat.

    ``teardown`` (when the worker closes, or the plugin is unregistered)
    removes the metric, puts back the resource the slot had before if the
    stack is still installed there, and disables the CuPy hook. PyTorch and
    Numba cannot switch their allocator back: their hooks stay, and follow the
    restored resource from then on. Memory still allocated keeps its stack
    alive until it is freed.

    Arguments:

    * ``spec`` - the resource spec (:doc:`/specs`), e.g. ``"pool(host, initial_size=64MiB)"``;
      it is built on each worker, so an error in it surfaces when the plugin is registered.
    * ``libraries`` - the hooks to enable: names among ``"torch"``, ``"cupy"``,
      ``"numba"``, or a comma-separated str; ``()`` or None for none.
    * ``log_directory`` - where each worker writes its allocation log (None: no log).
      Needs ``tether.LoggingAdaptor``.
    * ``track_allocations`` - add a tracking adaptor (needs ``tether.TrackingAdaptor``).
    * ``set_if_unset`` - install only if the worker's slot is not set yet.

    One TetherSetup is active per worker process at a time (the table is per
    process): a second raises RuntimeError in its setup.
    """

    idempotent = False
    name = "tether-setup"

    def __init__(self, spec: str, libraries: Iterable[str] | str | None = DEFAULT_LIBRARIES,
                 log_directory: str | os.PathLike[str] | None = None, track_allocations: bool = False,
                 set_if_unset: bool = False) -> None:
        if not isinstance(spec, str):
            raise TypeError(f"spec must be a str (a resource spec), not {type(spec).__name__}")
        if not spec.strip():
            raise ValueError("spec must not be empty (a resource spec, e.g. 'pool(host)')")
        self.spec = spec
        self.libraries = _libraries_argument(libraries)
        if log_directory is not None:
            if not isinstance(log_directory, (str, os.PathLike)):
                raise TypeError(f"log_directory must be a str or path-like, not {type(log_directory).__name__}")
            log_directory = os.fspath(log_directory)
            if not getattr(tether, "LoggingAdaptor", None):
                raise RuntimeError("log_directory needs tether.LoggingAdaptor, which this build of tether "
                                   "does not have")
        self.log_directory: str | None = log_directory
        if not isinstance(track_allocations, bool):
            raise TypeError(f"track_allocations must be a bool, not {type(track_allocations).__name__}")
        if track_allocations and not getattr(tether, "TrackingAdaptor", None):
            raise RuntimeError("track_allocations=True needs tether.TrackingAdaptor, which this build of "
                               "tether does not have")
        self.track_allocations = track_allocations
        if not isinstance(set_if_unset, bool):
            raise TypeError(f"set_if_unset must be a bool, not {type(set_if_unset).__name__}")
        self.set_if_unset = set_if_unset
        # Per worker process (set in setup; a pickled plugin arrives without them):
        self._state: dict[str, Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_state"] = None  # resources stay in the process that made them
        return state

    def __repr__(self) -> str:
        return (f"TetherSetup(spec={self.spec!r}, libraries={self.libraries!r}, "
                f"log_directory={self.log_directory!r}, track_allocations={self.track_allocations!r}, "
                f"set_if_unset={self.set_if_unset!r})")

    # ---- the stack ---------------------------------------------------------

    def _build(self, worker_name: object) -> tuple[Resource, StatisticsAdaptor, str | None]:
        """The stack for one worker: (base, statistics adaptor on top, log path or None)."""
        base = tether.from_spec(self.spec)
        made: list[Resource] = [base]
        log_path = None
        try:
            if self.log_directory is not None:
                logging_adaptor = getattr(tether, "LoggingAdaptor", None)
                if logging_adaptor is None:
                    raise RuntimeError("log_directory needs tether.LoggingAdaptor, which the worker's tether "
                                       "does not have")
                os.makedirs(self.log_directory, exist_ok=True)
                log_path = os.path.join(self.log_directory, f"tether_{_file_name_part(worker_name)}.csv")
                made.append(logging_adaptor(made[-1], path=log_path))
            if self.track_allocations:
                tracking_adaptor = getattr(tether, "TrackingAdaptor", None)
                if tracking_adaptor is None:
                    raise RuntimeError("track_allocations=True needs tether.TrackingAdaptor, which the "
                                       "worker's tether does not have")
                made.append(tracking_adaptor(made[-1], capture_stacks=False))
            top = StatisticsAdaptor(made[-1])
        except BaseException:
            for resource in made:
                resource.close()
            raise
        for resource in made[1:]:
            resource.close()  # the statistics adaptor keeps them alive
        return base, top, log_path

    def _enable_hooks(self) -> list[str]:
        enabled: list[str] = []
        for name in self.libraries:
            module, library = _HOOKS[name]
            if importlib.util.find_spec(library) is None:
                message = (f"tether.dask.TetherSetup: {library} is not installed on this worker; "
                           f"its hook is skipped (libraries={self.libraries!r})")
                logger.warning(message)
                warnings.warn(message, RuntimeWarning, stacklevel=2)
                continue
            importlib.import_module(module).enable()
            enabled.append(name)
        return enabled

    # ---- WorkerPlugin --------------------------------------------------------

    def setup(self, worker: Any) -> None:
        """Build, install and hook up this worker's stack (see the class description)."""
        global _active
        name = getattr(worker, "name", None)
        if name is None:
            name = getattr(worker, "address", None) or os.getpid()
        with _active_lock:
            if _active is not None:
                raise RuntimeError("tether.dask.TetherSetup: another TetherSetup is already active in this "
                                   f"worker process ({_active!r}); unregister it first")
            base, top, log_path = self._build(name)
            slot = top.device
            installed = True
            previous: Resource | None = None
            try:
                if self.set_if_unset:
                    installed = tether.set_current_resource_if_unset(top)
                    if not installed:
                        logger.info("tether.dask: the worker's slot %s was already set; keeping its resource",
                                    "host" if slot == HOST else slot)
                else:
                    previous = tether.set_current_resource(top)
                try:
                    hooks = self._enable_hooks()
                except BaseException:
                    if installed:
                        replaced = tether.set_current_resource(previous, slot)
                        if replaced is not None:
                            replaced.close()
                    raise
            except BaseException:
                for resource in (previous, top, base):
                    if resource is not None:
                        resource.close()
                raise
            self._state = {"base": base, "top": top, "slot": slot, "installed": installed,
                           "previous": previous, "hooks": hooks, "log_path": log_path,
                           "worker": str(name)}
            _active = self
        metrics = getattr(worker, "metrics", None)
        if isinstance(metrics, dict):
            metrics[METRIC_NAME] = _heartbeat_metric

    def teardown(self, worker: Any) -> None:
        """Remove the metric, put back the slot's previous resource, disable the CuPy hook."""
        global _active
        metrics = getattr(worker, "metrics", None)
        if isinstance(metrics, dict) and metrics.get(METRIC_NAME) is _heartbeat_metric:
            del metrics[METRIC_NAME]
        with _active_lock:
            state, self._state = self._state, None
            if _active is self:
                _active = None
        if state is None:
            return
        if "cupy" in state["hooks"]:
            try:
                importlib.import_module("tether.cupy").disable()
            except Exception as e:  # teardown goes on
                logger.warning("tether.dask: cannot disable the CuPy hook: %s", e)
        top = state["top"]
        if state["installed"]:
            slot = state["slot"]
            current = tether.get_current_resource(slot)
            try:
                if current == top:
                    replaced = tether.set_current_resource(state["previous"], slot)
                    if replaced is not None:
                        replaced.close()
                else:
                    logger.warning("tether.dask: the worker's slot no longer holds TetherSetup's resource; "
                                   "leaving it as it is")
            finally:
                current.close()
        if state["log_path"] is not None:
            _flush_logs(top)
        for key in ("top", "base", "previous"):
            resource = state.get(key)
            if resource is not None:
                resource.close()

    # ---- figures -------------------------------------------------------------

    def metrics(self) -> dict[str, Any]:
        """This worker's figures (see :py:func:`worker_metrics`); {} before setup."""
        state = self._state
        if state is None:
            return {}
        top: StatisticsAdaptor = state["top"]
        stats = top.statistics()
        result: dict[str, Any] = {
            "pid": os.getpid(),
            "worker": state["worker"],
            "spec": state["base"].spec,
            "slot": "host" if state["slot"] == HOST else state["slot"],
            "installed": state["installed"],
            "hooks": list(state["hooks"]),
            "log_path": state["log_path"],
            "statistics": dict(stats._asdict()),
            "pools": [],
        }
        resource: Resource | None = top.upstream
        while resource is not None:
            if isinstance(resource, PoolResource):
                result["pools"].append(dict(resource.pool_info()._asdict()))
            if hasattr(resource, "outstanding"):
                result["outstanding_allocations"] = len(resource.outstanding())
            up = resource.upstream
            resource.close()
            resource = up
        return result


def _flush_logs(top: Resource) -> None:
    """Flush every logging adaptor below ``top`` (so the worker's log file is complete)."""
    resource: Resource | None = top.upstream
    while resource is not None:
        flush = getattr(resource, "flush", None)
        if callable(flush):
            try:
                flush()
            except Exception as e:  # teardown goes on
                logger.warning("tether.dask: cannot flush the allocation log: %s", e)
        up = resource.upstream
        resource.close()
        resource = up


def _heartbeat_metric(worker: Any) -> dict[str, Any]:
    """The metric the worker sends with each heartbeat: numbers only (msgpack-friendly)."""
    plugin = _active
    figures = plugin.metrics() if plugin is not None else {}
    if not figures:
        return {}
    out: dict[str, Any] = dict(figures["statistics"])
    pools = figures["pools"]
    if pools:
        out["pool_size"] = sum(p["pool_size"] for p in pools)
        out["pool_free_bytes"] = sum(p["free_bytes"] for p in pools)
        out["pool_free_blocks"] = sum(p.get("free_blocks", 0) for p in pools)
    if "outstanding_allocations" in figures:
        out["outstanding_allocations"] = figures["outstanding_allocations"]
    return out


def worker_metrics(dask_worker: Any = None) -> dict[str, Any]:
    """The calling worker's tether figures, for ``client.run(tether.dask.worker_metrics)``.

    A dict with ``pid``, ``worker`` (its name), ``spec`` (the spec of the
    stack TetherSetup built, without the adaptors it added), ``slot`` ("host"
    or the device), ``installed`` (False if ``set_if_unset`` kept an existing
    resource), ``hooks`` (the hooks enabled), ``log_path``, ``statistics`` (the
    :py:class:`tether.Statistics` fields of the statistics adaptor on top) and
    ``pools`` (the :py:class:`tether.PoolInfo` fields of each pool in the stack,
    outermost first), plus ``outstanding_allocations`` with
    ``track_allocations``. An empty dict where no TetherSetup is active.
    ``dask_worker`` is filled in by ``client.run`` and not needed.
    """
    plugin = _active
    return plugin.metrics() if plugin is not None else {}


# ---- preload: dask worker --preload tether.dask --tether-spec SPEC ----------------

_preloaded: TetherSetup | None = None


@click.command()
@click.option("--tether-spec", required=True,
              help="The resource spec each worker builds, e.g. 'pool(cuda(), initial_size=80%%)'.")
@click.option("--tether-libraries", default=",".join(DEFAULT_LIBRARIES), show_default=True,
              help="Comma-separated hooks to enable (torch, cupy, numba); '' for none.")
@click.option("--tether-log-directory", default=None, help="Write one allocation log per worker here.")
@click.option("--tether-track-allocations", is_flag=True, default=False, help="Add a tracking adaptor.")
@click.option("--tether-set-if-unset", is_flag=True, default=False,
              help="Install only if the worker's slot is not set yet.")
def dask_setup(worker: Any, tether_spec: str, tether_libraries: str = "torch,cupy,numba",
               tether_log_directory: str | None = None, tether_track_allocations: bool = False,
               tether_set_if_unset: bool = False) -> None:
    """The preload entry point: ``dask worker --preload tether.dask --tether-spec SPEC``.

    Runs :py:class:`TetherSetup` (with the options' values) on the worker;
    :py:func:`dask_teardown` undoes it when the worker closes.
    """
    global _preloaded
    plugin = TetherSetup(tether_spec, libraries=tether_libraries, log_directory=tether_log_directory,
                         track_allocations=tether_track_allocations, set_if_unset=tether_set_if_unset)
    plugin.setup(worker)
    _preloaded = plugin


def dask_teardown(worker: Any) -> None:
    """The preload's exit point: tears down what :py:func:`dask_setup` set up."""
    global _preloaded
    plugin, _preloaded = _preloaded, None
    if plugin is not None:
        plugin.teardown(worker)
