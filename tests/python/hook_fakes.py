"""Small stand-ins for CuPy, Numba, cuda.core and RMM, for the CPU tests of the hooks.

Each fake reproduces only the API surface a hook uses, with the real
signatures and the real ownership behaviour (who keeps what alive, who calls
the free and with which arguments) - taken from the libraries' sources:

* CuPy: ``cupy.cuda.get_device_id()``, ``get_current_stream(device_id=-1)``
  (an object with ``.ptr``), ``UnownedMemory(ptr, size, owner, device_id=-1)``
  (keeps ``owner`` as ``_owner``), ``MemoryPointer(mem, offset)``,
  ``set_allocator``/``get_allocator``, ``get_default_memory_pool().malloc``.
* CuPy's C-level hook (FakeCupyC, CuPy >= 14.1): ``cupy.cuda.memory.CFunctionAllocator(param,
  malloc_func, free_func, owner)`` whose ``malloc(size)`` calls ``malloc_func(param, size,
  device)`` with the GIL held and checks for a Python exception after it (cupy/cuda/memory.pyx:
  ``_call_malloc(...) except *``; ctypes' PYFUNCTYPE does the same check), skips size 0, and
  whose memory calls ``free_func(param, ptr, device)`` when it dies if ptr != 0; and
  ``cupy_backends.cuda.stream.__pyx_capi__`` holding Cython's capsule for
  ``get_stream_ptr`` (named by its C signature, ``intptr_t (int)``).
* Numba: ``HostOnlyCUDAMemoryManager(context=...)`` with ``reset``/
  ``defer_cleanup``; ``MemoryPointer(context, pointer, size, owner=None,
  finalizer=None)`` calls the finalizer through ``weakref.finalize`` when it
  dies; ``cudadrv.driver.binding.CUdeviceptr``.
* cuda.core: ``Buffer.from_handle(ptr, size, mr=None, owner=None, *,
  stream=None)``; closing or collecting a Buffer with an mr calls
  ``mr.deallocate(int(ptr), size, stream=<recorded stream>)``.
* RMM: ``rmm.mr.CallbackMemoryResource(allocate_func, deallocate_func)``,
  callbacks get ``(nbytes, Stream)`` / ``(ptr, nbytes, Stream)``; a ``Stream``
  implements ``__cuda_stream__``.

The machine running these has no GPU, so the fakes' "current device" is
tether.HOST - the tests then exercise the hooks' real logic against the host
slot of tether's table; the GPU tests run the same paths with the real libraries.
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
import types
import weakref

import tether


def _module(name: str, **attrs) -> types.ModuleType:
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    return m


class _Stream:
    def __init__(self, ptr: int) -> None:
        self.ptr = ptr

    def __cuda_stream__(self):
        return (0, self.ptr)


# ---- CuPy ---------------------------------------------------------------------

class FakeCupy:
    """State of the fake: the current device and stream it reports."""

    def __init__(self) -> None:
        self.device = tether.HOST
        self.stream = 0
        fake = self

        class UnownedMemory:
            def __init__(self, ptr, size, owner, device_id=-1):
                self.ptr, self.size, self._owner, self.device_id = ptr, size, owner, device_id

        class MemoryPointer:
            def __init__(self, mem, offset):
                self.mem, self.ptr = mem, mem.ptr + offset

        class MemoryPool:
            def malloc(self, size):  # pragma: no cover - only compared, never called
                raise AssertionError("the default pool must not be used")

        default_pool = MemoryPool()
        state = {"allocator": None}

        def get_current_stream(device_id=-1):
            assert device_id in (-1, fake.device)
            return _Stream(fake.stream)

        def set_allocator(allocator=None):
            state["allocator"] = allocator

        cuda = _module("cupy.cuda", get_device_id=lambda: fake.device, get_current_stream=get_current_stream,
                       UnownedMemory=UnownedMemory, MemoryPointer=MemoryPointer, set_allocator=set_allocator,
                       get_allocator=lambda: state["allocator"])
        self.default_pool_malloc = default_pool.malloc
        state["allocator"] = self.default_pool_malloc
        self.modules = {"cupy": _module("cupy", __version__="14.2.0", cuda=cuda, get_default_memory_pool=lambda: default_pool),
                        "cupy.cuda": cuda}
        self.state = state


class FakeCupyC(FakeCupy):
    """FakeCupy with CuPy's C-level hook and stream C API (see the module docs).
    ``capsules`` overrides __pyx_capi__ ({name: (signature bytes, C function)})."""

    MALLOC = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    FREE = ctypes.PYFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)
    GET_STREAM = ctypes.PYFUNCTYPE(ctypes.c_ssize_t, ctypes.c_int)

    def __init__(self, version: str = "14.2.0", capsules: dict | None = None, unchecked: bool = False) -> None:
        # unchecked: as the CuPy 14.2.0 wheel behaves (seen on the GPU machine), the exception
        # the C malloc sets is not checked inside CFunctionAllocatorMemory.__init__, so the
        # constructor returns with it set and CPython raises SystemError("<class ...>
        # returned a result with an exception set") from it.
        super().__init__()
        fake = self
        self.streams_asked: list[int] = []

        def get_stream_ptr(device_id):
            fake.streams_asked.append(device_id)
            return fake.stream

        self._getter = self.GET_STREAM(get_stream_ptr)  # kept alive with the fake
        if capsules is None:
            capsules = {"get_stream_ptr": (b"intptr_t (int)", self._getter)}
        self._names = [ctypes.create_string_buffer(sig) for sig, _ in capsules.values()]
        new_capsule = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
            ("PyCapsule_New", ctypes.pythonapi))  # our own function object: pythonapi's are shared
        capi = {name: new_capsule(ctypes.cast(fn, ctypes.c_void_p), self._names[i], None)
                for i, (name, (_, fn)) in enumerate(capsules.items())}
        malloc_t, free_t = self.MALLOC, self.FREE

        class CFunctionAllocatorMemory:
            def __init__(self, size, param, malloc_func, free_func, device_id):
                self._param, self._free_func, self.device_id, self.size, self.ptr = param, free_func, device_id, size, 0
                if size > 0:
                    try:
                        self.ptr = malloc_t(malloc_func)(param, size, device_id) or 0
                    except Exception as e:
                        if not unchecked:
                            raise
                        raise SystemError(f"{CFunctionAllocatorMemory!r} returned a result with an exception "
                                          "set") from e

            def __del__(self):
                if self.ptr:
                    free_t(self._free_func)(self._param, self.ptr, self.device_id)

        class CFunctionAllocator:
            def __init__(self, param, malloc_func, free_func, owner):
                self._param, self._malloc_func, self._free_func, self._owner = param, malloc_func, free_func, owner

            def malloc(self, size):
                mem = CFunctionAllocatorMemory(size, self._param, self._malloc_func, self._free_func, fake.device)
                return self.modules["cupy.cuda"].MemoryPointer(mem, 0)

        CFunctionAllocator.modules = self.modules
        memory = _module("cupy.cuda.memory", CFunctionAllocator=CFunctionAllocator)
        cuda = self.modules["cupy.cuda"]
        cuda.memory = memory
        self.modules["cupy"].__version__ = version
        stream = _module("cupy_backends.cuda.stream", __pyx_capi__=capi)
        self.modules.update({"cupy.cuda.memory": memory, "cupy_backends": _module("cupy_backends"),
                             "cupy_backends.cuda": _module("cupy_backends.cuda", stream=stream),
                             "cupy_backends.cuda.stream": stream})


# ---- Numba --------------------------------------------------------------------

class FakeNumba:
    def __init__(self) -> None:
        class CUdeviceptr:
            def __init__(self, value=0):
                self.value = value

            def __int__(self):
                return self.value

        class HostOnlyCUDAMemoryManager:
            def __init__(self, *args, **kwargs):
                if "context" not in kwargs:
                    raise RuntimeError("Memory manager requires a context")
                self.context = kwargs.pop("context")
                self.allocations = {}
                self.resets = 0

            def reset(self):
                self.allocations.clear()
                self.resets += 1

            @contextlib.contextmanager
            def defer_cleanup(self):
                yield

        class MemoryPointer:
            def __init__(self, context, pointer, size, owner=None, finalizer=None):
                self.context, self.device_pointer, self.size = context, pointer, size
                if finalizer is not None:
                    self._finalizer = weakref.finalize(self, finalizer)

        self.managers = []

        def set_memory_manager(cls):
            dummy = cls(context=None)
            assert dummy.interface_version == 1
            self.managers.append(cls)

        binding = _module("cuda.bindings.driver", CUdeviceptr=CUdeviceptr)
        driver = _module("numba.cuda.cudadrv.driver", binding=binding)
        cudadrv = _module("numba.cuda.cudadrv", driver=driver)
        cuda = _module("numba.cuda", HostOnlyCUDAMemoryManager=HostOnlyCUDAMemoryManager,
                       MemoryPointer=MemoryPointer, set_memory_manager=set_memory_manager, cudadrv=cudadrv)
        self.CUdeviceptr = CUdeviceptr
        self.modules = {"numba": _module("numba", cuda=cuda), "numba.cuda": cuda,
                        "numba.cuda.cudadrv": cudadrv, "numba.cuda.cudadrv.driver": driver}


class FakeContext:
    def __init__(self, device_id: int) -> None:
        self.device = types.SimpleNamespace(id=device_id)


# ---- cuda.core ------------------------------------------------------------------

class FakeCudaCore:
    def __init__(self) -> None:
        class Stream:
            def __init__(self, handle):
                self.handle = handle

            @staticmethod
            def from_handle(handle):
                return Stream(handle)

            def __cuda_stream__(self):
                return (0, self.handle)

        default = Stream(1)  # the legacy default stream token

        class MemoryResource:
            pass

        class Buffer:
            def __init__(self, *args, **kwargs):
                raise RuntimeError("Buffer objects cannot be instantiated directly")

            @staticmethod
            def from_handle(ptr, size, mr=None, owner=None, *, stream=None):
                if mr is not None and owner is not None:
                    raise ValueError("owner and memory resource cannot be both specified together")
                b = Buffer.__new__(Buffer)
                b.handle, b.size, b.memory_resource, b.owner = ptr, size, mr, owner
                b._stream = (stream if stream is not None else default) if mr is not None else None
                b._open = True
                return b

            def close(self, stream=None):
                if not self._open:
                    return
                self._open = False
                if self.memory_resource is not None:
                    self.memory_resource.deallocate(int(self.handle), self.size,
                                                    stream=stream if stream is not None else self._stream)
                self.owner = None

            def __del__(self):
                self.close()

        self.Stream, self.Buffer, self.MemoryResource = Stream, Buffer, MemoryResource
        core = _module("cuda.core", Buffer=Buffer, MemoryResource=MemoryResource, Stream=Stream)
        self.modules = {"cuda": _module("cuda", core=core), "cuda.core": core}


# ---- RMM ------------------------------------------------------------------------

class FakeRmm:
    def __init__(self) -> None:
        class DeviceMemoryResource:
            pass

        class CallbackMemoryResource(DeviceMemoryResource):
            def __init__(self, allocate_func, deallocate_func):
                self._allocate_func, self._deallocate_func = allocate_func, deallocate_func

            def allocate(self, nbytes, stream=None):
                return self._allocate_func(nbytes, stream if stream is not None else _Stream(0))

            def deallocate(self, ptr, nbytes, stream=None):
                self._deallocate_func(ptr, nbytes, stream if stream is not None else _Stream(0))

        self.Stream = _Stream
        mr = _module("rmm.mr", CallbackMemoryResource=CallbackMemoryResource,
                     DeviceMemoryResource=DeviceMemoryResource)
        self.modules = {"rmm": _module("rmm", mr=mr), "rmm.mr": mr}


def install(monkeypatch, fake) -> None:
    for name, module in fake.modules.items():
        monkeypatch.setitem(sys.modules, name, module)


class FakeTorch:
    """``torch.cuda.memory.CUDAPluggableAllocator(path, alloc_fn_name, free_fn_name)``: loads
    both functions from the library (ctypes, as PyTorch's dlopen/dlsym; a missing name raises);
    ``.allocator()`` is the allocator object whose setters take C function addresses (ints), as
    torch/csrc/cuda/Module.cpp binds them. ``missing`` names setters this fake PyTorch lacks.
    ``torch.cuda.memory.change_current_allocator`` records what it was given."""

    SETTERS = ("set_init_fn", "set_reset_fn", "set_memory_fraction_fn", "set_base_alloc_fn",
               "set_record_stream_fn", "set_begin_allocate_to_pool", "set_end_allocate_to_pool_fn",
               "set_release_pool")

    def __init__(self, version: str = "2.11.0", missing: tuple[str, ...] = ()) -> None:
        import ctypes
        fake = self
        self.installed = None

        class _AllocatorObject:
            def __init__(self) -> None:
                self.registered: dict[str, int] = {}

        for setter in self.SETTERS:
            if setter not in missing:
                def set_fn(obj, address, _name=setter):
                    if not isinstance(address, int):
                        raise TypeError(f"{_name}: incompatible function arguments (an int address)")
                    obj.registered[_name] = address
                setattr(_AllocatorObject, setter, set_fn)

        class CUDAPluggableAllocator:
            def __init__(self, path, alloc_fn_name, free_fn_name):
                lib = ctypes.CDLL(path)
                self.alloc = getattr(lib, alloc_fn_name)  # AttributeError for a missing symbol
                self.free = getattr(lib, free_fn_name)
                self._allocator = _AllocatorObject()

            def allocator(self):
                return self._allocator

        def change_current_allocator(allocator):
            fake.installed = allocator

        memory = _module("torch.cuda.memory", CUDAPluggableAllocator=CUDAPluggableAllocator,
                         change_current_allocator=change_current_allocator)
        cuda = _module("torch.cuda", memory=memory)
        self.module = _module("torch", cuda=cuda, __version__=version)

    @contextlib.contextmanager
    def installed_as_torch(self):
        saved = {k: sys.modules.get(k) for k in ("torch", "torch.cuda", "torch.cuda.memory")}
        sys.modules["torch"] = self.module
        sys.modules["torch.cuda"] = self.module.cuda
        sys.modules["torch.cuda.memory"] = self.module.cuda.memory
        try:
            yield self.module
        finally:
            for k, v in saved.items():
                if v is None:
                    sys.modules.pop(k, None)
                else:
                    sys.modules[k] = v
