use std::mem::{self, MaybeUninit};
use std::ptr;

use tether_sys as sys;

use crate::error::Result;
use crate::Resource;

impl Resource {
    /// Stream-ordered device memory of `device` from a CUDA memory pool someone else owns
    /// (`tether_async_view_resource_create`): `pool` is its `CUmemoryPool` / `cudaMemPool_t`
    /// as an address, `None` for the device's current pool.
    ///
    /// # Safety
    /// `pool` must be a live CUDA memory pool whose memory is on `device`, and must outlive the
    /// resource and every allocation from it (CUDA cannot check a handle that is not one).
    pub unsafe fn async_view(device: i32, pool: Option<usize>) -> Result<Resource> {
        let options = sys::tether_async_view_options_t {
            struct_size: mem::size_of::<sys::tether_async_view_options_t>() as u32,
            pool: pool.unwrap_or(0) as *mut std::ffi::c_void,
        };
        let mut out = ptr::null_mut();
        // SAFETY: valid options and out-pointer; the pool is the caller's promise.
        let status = unsafe { sys::tether_async_view_resource_create(device, &options, &mut out) };
        Resource::created(status, out)
    }

    /// Stream-ordered device memory from a CUDA memory pool
    /// (`tether_async_resource_create`); configure with the returned builder.
    pub fn cuda_async(device: i32) -> AsyncBuilder {
        let mut o = MaybeUninit::<sys::tether_async_options_t>::zeroed();
        // SAFETY: valid out-struct of our size; fills the library's defaults.
        let status =
            unsafe { sys::tether_async_options_init(o.as_mut_ptr(), mem::size_of::<sys::tether_async_options_t>()) };
        assert_eq!(
            status,
            sys::TETHER_OK,
            "tether_async_options_init rejected this crate's layout"
        );
        // SAFETY: initialised above.
        AsyncBuilder {
            device,
            options: unsafe { o.assume_init() },
        }
    }
}

/// Options of an async resource (`tether_async_options_t`), from [`Resource::cuda_async`].
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until build() is called"]
pub struct AsyncBuilder {
    device: i32,
    options: sys::tether_async_options_t,
}

impl AsyncBuilder {
    /// Allocate from the device's default memory pool (the other options are then ignored).
    pub fn use_default_pool(mut self, yes: bool) -> Self {
        self.options.use_default_pool = i32::from(yes);
        self
    }

    /// Bytes the owned pool reserves at creation and keeps (default 0).
    pub fn initial_pool_size(mut self, bytes: usize) -> Self {
        self.options.initial_pool_size = bytes;
        self
    }

    /// Bytes the owned pool keeps when idle (`CU_MEMPOOL_ATTR_RELEASE_THRESHOLD`).
    pub fn release_threshold(mut self, bytes: usize) -> Self {
        self.options.release_threshold = bytes;
        self
    }

    /// Upper bound of the owned pool (default 0: no limit).
    pub fn maximum_pool_size(mut self, bytes: usize) -> Self {
        self.options.maximum_pool_size = bytes;
        self
    }

    /// IPC handle type of the owned pool: `TETHER_IPC_HANDLE_NONE` (default) or
    /// `TETHER_IPC_HANDLE_POSIX_FD` (see [`tether_sys`]).
    pub fn ipc_handle_type(mut self, handle_type: u32) -> Self {
        self.options.ipc_handle_type = handle_type;
        self
    }

    /// Create the resource. `NoDevice` without a usable driver or device.
    pub fn build(self) -> Result<Resource> {
        let mut out = ptr::null_mut();
        // SAFETY: options fully initialised; valid out-pointer.
        let status = unsafe { sys::tether_async_resource_create(self.device, &self.options, &mut out) };
        Resource::created(status, out)
    }
}
