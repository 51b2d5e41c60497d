"""tether: memory resources for CUDA and host memory that C, C++ and Python share.

Everything here wraps the C ABI of libtether.so (``#include <tether/tether.h>``),
so Python, C and C++ code in one process share one current-resource table and
the same ownership rules: every object holds a reference, dependents keep what
they depend on alive, and objects can be closed in any order.

>>> import tether
>>> pool = tether.PoolResource(tether.HostResource(), initial_size="1 MiB")
>>> buf = tether.Buffer("4 KiB", resource=pool)
>>> buf.size
4096
"""

from __future__ import annotations

import os

from ._ffi import __version__, lib, library_path
from ._convert import CURRENT_DEVICE, HOST, IPC_HANDLE_SIZE, parse_size
from ._errors import (CudaError, InternalError, InvalidArgumentError, InvalidHandleError, LockedError,
                      NoDeviceError, NotSupportedError, OutOfMemoryError, PinnedError, ShuttingDownError,
                      TetherError, VersionMismatchError)
from ._resources import PoolInfo, Resource, ResourceKind, Statistics, UpstreamAdaptor
from ._cuda import cuda_available, cuda_device_count, cuda_device_name, cuda_driver_version
# The class of every resource kind (written from the registry, capi/kinds.json).
from ._kind_classes import *
from . import _kind_classes
from ._buffer import Buffer, import_ipc
from ._spec import from_spec
from ._tracking import TrackingRecord
from ._arena import ArenaInfo
from ._binning import BinningInfo
from ._fixed_size import FixedSizeInfo
from ._current import (get_current_resource, is_current_resource_locked, lock_current_resource,
                       pop_current_resource, push_current_resource, set_current_resource,
                       set_current_resource_if_unset, using)
from . import debug
from . import statistics
from ._logging import LOG_HEADER, LoggingInfo
from ._convert import CudaStreamProtocol, DeviceLike, HasCudaStream, Size, StreamLike

_HERE = os.path.dirname(os.path.abspath(__file__))


def abi_version() -> int:
    """The ABI version of the loaded libtether (its SOVERSION)."""
    return int(lib.tether_abi_version())


def get_include() -> str:
    """The directory holding tether/tether.h, for C/C++ extensions: ``-I$(...)``."""
    return os.path.join(_HERE, "include")


def get_cmake_dir() -> str:
    """The directory of tetherConfig.cmake: ``-Dtether_DIR=$(...)`` for find_package(tether)."""
    return os.path.join(_HERE, "lib", "cmake", "tether")


def get_library() -> str:
    """The path of the libtether.so this package loaded.

    Link extension modules against this file (and set an RPATH to its directory)
    so that they share the package's current-resource table.
    """
    return library_path()


# TETHER_HOOKS=torch,cupy,numba: the hooks the environment opts into (none without it).
from ._env_hooks import install_from_environment as _install_hooks_from_environment

_install_hooks_from_environment()

__all__ = [
    "__version__", "abi_version", "get_include", "get_cmake_dir", "get_library",
    "HOST", "CURRENT_DEVICE", "parse_size",
    "TetherError", "OutOfMemoryError", "InvalidArgumentError", "PinnedError", "InvalidHandleError",
    "NotSupportedError", "NoDeviceError", "CudaError", "LockedError", "VersionMismatchError",
    "ShuttingDownError", "InternalError",
    "Resource", "ResourceKind", "UpstreamAdaptor", "Statistics", "PoolInfo",
    "cuda_available", "cuda_device_count", "cuda_device_name", "cuda_driver_version",
    "Buffer", "from_spec", "import_ipc", "IPC_HANDLE_SIZE",
    "ArenaInfo", "BinningInfo", "FixedSizeInfo",
    "get_current_resource", "set_current_resource", "set_current_resource_if_unset",
    "push_current_resource", "pop_current_resource", "using", "lock_current_resource",
    "is_current_resource_locked",
    "debug",
    "TrackingRecord", "LoggingInfo", "LOG_HEADER",
    "Size", "StreamLike", "DeviceLike", "CudaStreamProtocol", "HasCudaStream",
]
__all__ += _kind_classes.__all__  # HostResource, PoolResource, ...: one class per kind of the registry
