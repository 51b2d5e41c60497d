//! [`Resource`]: one owned reference to a `tether_resource_t`.

use std::ffi::CStr;
use std::fmt;
use std::os::raw::c_int;
use std::ptr::{self, NonNull};

use tether_sys as sys;

use crate::error::{check, Error, Result};
use crate::kinds::ResourceKind;
use crate::types::{Device, Stream};
use crate::Buffer;

/// Properties of a resource (`tether_resource_properties_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Properties {
    /// What the resource is.
    pub kind: ResourceKind,
    /// Where its memory lives.
    pub device: Device,
    /// Kernels on `device` may access the memory.
    pub device_accessible: bool,
    /// Host code may access the memory.
    pub host_accessible: bool,
}

/// Counters of a statistics adaptor (`tether_statistics_t`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Statistics {
    /// Bytes allocated and not yet freed.
    pub current_bytes: u64,
    /// Highest value `current_bytes` has had.
    pub peak_bytes: u64,
    /// Bytes ever allocated.
    pub total_bytes: u64,
    /// Allocations not yet freed.
    pub current_count: u64,
    /// Highest value `current_count` has had.
    pub peak_count: u64,
    /// Allocations ever made.
    pub total_count: u64,
}

/// What a pool holds (`tether_pool_info_t`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolInfo {
    /// Bytes the pool holds from its upstream.
    pub pool_size: u64,
    /// Bytes of `pool_size` not allocated to anyone.
    pub free_bytes: u64,
    /// The largest block that could be handed out without growing.
    pub largest_free_block: u64,
    /// Chunks held from upstream.
    pub chunk_count: u64,
    /// Free blocks: the pieces `free_bytes` is split into (1 for an unfragmented
    /// pool used from one stream, 0 when nothing is free).
    pub free_blocks: u64,
}

/// A memory resource: owns exactly one reference to a `tether_resource_t`.
///
/// `Clone` adds a reference (`tether_resource_retain`), `Drop` gives one back
/// (`tether_resource_release`). Dependents keep what they depend on alive inside
/// the library (a pool its upstream, a buffer its resource, the current-resource
/// table what is installed), so values may be dropped in any order, from any
/// thread, in any language that shares the process.
///
/// Constructors for each type live next to their builders: [`Resource::host`],
/// [`Resource::pool`], [`Resource::statistics_adaptor`], [`Resource::cuda`],
/// [`Resource::cuda_async`], [`Resource::managed`], [`Resource::pinned_host`],
/// [`Resource::system`], [`Resource::sam_headroom`], [`Resource::managed_async`],
/// [`Resource::arena`], [`Resource::binning`], [`Resource::fixed_size`],
/// [`Resource::limiting_adaptor`], [`Resource::tracking_adaptor`],
/// [`Resource::logging_adaptor`], [`Resource::failure_callback_adaptor`],
/// [`Resource::aligned_adaptor`], [`Resource::prefetch_adaptor`],
/// [`Resource::callback`]; a whole stack from a spec string with [`Resource::from_spec`].
pub struct Resource {
    raw: NonNull<sys::tether_resource_t>,
}

// SAFETY: the C contract (DESIGN.md §2.8, resource.h) makes every call thread-safe
// and every resource of the catalogue thread-safe ("unless its name says
// otherwise"; none does). The reference this value owns may be retained,
// released and used from any thread, and the library never ties a handle to the
// thread that created it, so moving it (Send) and sharing `&Resource` between
// threads (Sync) is exactly what C allows. A future resource whose name marks it
// as not thread-safe must get its own wrapper type without these impls.
unsafe impl Send for Resource {}
// SAFETY: see `Send` above: all methods take `&self` and call thread-safe C functions.
unsafe impl Sync for Resource {}

impl Resource {
    /// Take ownership of one reference (`+1`) to `raw`. Returns `None` for NULL.
    ///
    /// # Safety
    /// The caller must own the reference it hands over (e.g. from a `*_create`
    /// call or `tether_resource_retain`) and not release it elsewhere. (A stale
    /// or forged handle is not undefined behaviour in tether: calls on it fail
    /// with [`crate::ErrorKind::InvalidHandle`]; but releasing a reference one
    /// does not own drops someone else's.)
    pub unsafe fn from_raw(raw: *mut sys::tether_resource_t) -> Option<Resource> {
        NonNull::new(raw).map(|raw| Resource { raw })
    }

    /// A new reference to the resource whose handle is `raw` (retained here; the
    /// caller keeps its own). This is how a handle that another language passed
    /// as an integer (Python's `Resource.handle`) becomes a `Resource`.
    /// Safe: tether checks handles, so a stale or forged value is an
    /// `InvalidHandle` error.
    // tether never dereferences a handle it has not validated (DESIGN.md §2.5),
    // so passing an arbitrary pointer value here is safe, unlike what clippy assumes.
    #[allow(clippy::not_unsafe_ptr_arg_deref)]
    pub fn from_handle(raw: *mut sys::tether_resource_t) -> Result<Resource> {
        // SAFETY: retain validates the handle (index + generation); it never
        // dereferences a forged pointer.
        let status = unsafe { sys::tether_resource_retain(raw) };
        if status != sys::TETHER_OK {
            return Err(Error::new(
                status,
                format!("from_handle: resource {raw:p} is not a live tether resource handle"),
            ));
        }
        // SAFETY: retain succeeded, so raw is non-NULL and we own +1.
        Ok(unsafe { Resource::from_raw(raw) }.expect("retained handle is not NULL"))
    }

    /// Give up this value's reference as a raw `+1` handle (for C, or another
    /// language, to release with `tether_resource_release`).
    pub fn into_raw(self) -> *mut sys::tether_resource_t {
        let raw = self.raw.as_ptr();
        std::mem::forget(self);
        raw
    }

    /// The raw handle, borrowed: valid while `self` is alive.
    pub fn as_raw(&self) -> *mut sys::tether_resource_t {
        self.raw.as_ptr()
    }

    /// Wrap the `+1` handle a successful `*_create` call wrote into `out`.
    pub(crate) fn created(status: sys::tether_status_t, out: *mut sys::tether_resource_t) -> Result<Resource> {
        check(status)?;
        // SAFETY: on TETHER_OK the create call handed us +1 in `out`.
        unsafe { Resource::from_raw(out) }.ok_or_else(|| {
            Error::new(
                sys::TETHER_ERROR_INTERNAL,
                "a create call returned TETHER_OK and no handle",
            )
        })
    }

    /// The resource's properties: kind, device, accessibility.
    pub fn properties(&self) -> Result<Properties> {
        let mut p = sys::tether_resource_properties_t {
            struct_size: std::mem::size_of::<sys::tether_resource_properties_t>() as u32,
            kind: 0,
            device: 0,
            device_accessible: 0,
            host_accessible: 0,
        };
        // SAFETY: live handle; `p` is a valid, sized out-struct.
        check(unsafe { sys::tether_resource_get_properties(self.as_raw(), &mut p) })?;
        Ok(Properties {
            kind: ResourceKind::from_raw(p.kind),
            device: Device::from_raw(p.device),
            device_accessible: p.device_accessible != 0,
            host_accessible: p.host_accessible != 0,
        })
    }

    /// What the resource is.
    pub fn kind(&self) -> Result<ResourceKind> {
        self.properties().map(|p| p.kind)
    }

    /// A short name: `"host"`, `"pool"`, `"statistics"`, ... (static storage in the library).
    pub fn name(&self) -> &'static str {
        // SAFETY: never NULL; static storage ("" for a stale handle).
        unsafe { CStr::from_ptr(sys::tether_resource_get_name(self.as_raw())) }
            .to_str()
            .unwrap_or("")
    }

    /// The upstream of a pool or adaptor (a new reference), `None` for resources without one.
    pub fn upstream(&self) -> Result<Option<Resource>> {
        let mut up = ptr::null_mut();
        // SAFETY: live handle; `up` receives a borrowed handle, retained below
        // while `self` (which retains it) is still alive.
        check(unsafe { sys::tether_resource_get_upstream(self.as_raw(), &mut up) })?;
        if up.is_null() {
            return Ok(None);
        }
        Resource::from_handle(up).map(Some)
    }

    /// Allocate `size` bytes aligned to `alignment` (a power of two; 0 means 256),
    /// ordered on `stream`: raw memory that the caller must give back with
    /// [`Resource::deallocate`] on this resource with the same size and alignment.
    /// Size 0 gives a null pointer. Prefer [`Buffer`], which frees itself.
    pub fn allocate(&self, size: usize, alignment: usize, stream: Stream) -> Result<*mut u8> {
        let mut p = ptr::null_mut();
        // SAFETY: live handle, valid out-pointer.
        check(unsafe { sys::tether_resource_allocate(self.as_raw(), size, alignment, stream.as_raw(), &mut p) })?;
        Ok(p.cast())
    }

    /// Give back memory from [`Resource::allocate`] of this resource.
    ///
    /// tether refuses (with `InvalidArgument`, memory untouched) a pointer this
    /// resource did not hand out, a double free, and a wrong size or alignment.
    ///
    /// # Safety
    /// Nothing may use the memory after this call (other than work already
    /// ordered before `stream`): the resource may hand it out again.
    pub unsafe fn deallocate(&self, ptr: *mut u8, size: usize, alignment: usize, stream: Stream) -> Result<()> {
        check(sys::tether_resource_deallocate(
            self.as_raw(),
            ptr.cast(),
            size,
            alignment,
            stream.as_raw(),
        ))
    }

    /// A buffer of `size` bytes from this resource, ordered on `stream`
    /// (shorthand for [`Buffer::new`]).
    pub fn buffer(&self, size: usize, stream: Stream) -> Result<Buffer> {
        Buffer::new(self, size, stream)
    }

    /// True if `self` and `other` are the same resource or two of one kind that
    /// share one memory source (two host resources, ...). For comparison only:
    /// free memory into the resource that allocated it.
    pub fn is_equal(&self, other: &Resource) -> Result<bool> {
        let mut out: c_int = 0;
        // SAFETY: both handles are live.
        check(unsafe { sys::tether_resource_is_equal(self.as_raw(), other.as_raw(), &mut out) })?;
        Ok(out != 0)
    }

    /// True if both values hold a reference to the very same resource (handle identity).
    pub fn same_handle(&self, other: &Resource) -> bool {
        self.raw == other.raw
    }

    /// The counters of a statistics adaptor; `NotSupported` for other kinds.
    pub fn statistics(&self) -> Result<Statistics> {
        let mut s = sys::tether_statistics_t {
            struct_size: std::mem::size_of::<sys::tether_statistics_t>() as u32,
            current_bytes: 0,
            peak_bytes: 0,
            total_bytes: 0,
            current_count: 0,
            peak_count: 0,
            total_count: 0,
        };
        // SAFETY: live handle; sized out-struct.
        check(unsafe { sys::tether_resource_get_statistics(self.as_raw(), &mut s) })?;
        Ok(Statistics {
            current_bytes: s.current_bytes,
            peak_bytes: s.peak_bytes,
            total_bytes: s.total_bytes,
            current_count: s.current_count,
            peak_count: s.peak_count,
            total_count: s.total_count,
        })
    }

    /// Reset a statistics adaptor's peaks to the current values; `NotSupported` for other kinds.
    pub fn reset_peak_statistics(&self) -> Result<()> {
        // SAFETY: live handle.
        check(unsafe { sys::tether_resource_reset_peak_statistics(self.as_raw()) })
    }

    /// What a pool holds; `NotSupported` for other kinds.
    pub fn pool_info(&self) -> Result<PoolInfo> {
        let mut i = sys::tether_pool_info_t {
            struct_size: std::mem::size_of::<sys::tether_pool_info_t>() as u32,
            pool_size: 0,
            free_bytes: 0,
            largest_free_block: 0,
            chunk_count: 0,
            free_blocks: 0,
        };
        // SAFETY: live handle; sized out-struct.
        check(unsafe { sys::tether_resource_get_pool_info(self.as_raw(), &mut i) })?;
        Ok(PoolInfo {
            pool_size: i.pool_size,
            free_bytes: i.free_bytes,
            largest_free_block: i.largest_free_block,
            chunk_count: i.chunk_count,
            free_blocks: i.free_blocks,
        })
    }

    /// Give memory the resource holds but does not use back to its upstream (a
    /// pool's wholly free chunks). A no-op for resources that hold nothing.
    pub fn trim(&self) -> Result<()> {
        // SAFETY: live handle.
        check(unsafe { sys::tether_resource_trim(self.as_raw()) })
    }
}

impl Clone for Resource {
    /// Another reference to the same resource (`tether_resource_retain`).
    fn clone(&self) -> Resource {
        // SAFETY: `self` owns a reference, so the handle is live and retain succeeds.
        let status = unsafe { sys::tether_resource_retain(self.as_raw()) };
        assert_eq!(status, sys::TETHER_OK, "tether_resource_retain failed on a live handle");
        Resource { raw: self.raw }
    }
}

impl Drop for Resource {
    /// Give this value's reference back (`tether_resource_release`).
    fn drop(&mut self) {
        // SAFETY: we own exactly one reference; release touches no error state.
        unsafe {
            sys::tether_resource_release(self.as_raw());
        }
    }
}

impl fmt::Debug for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resource")
            .field("name", &self.name())
            .field("handle", &self.raw)
            .finish()
    }
}
