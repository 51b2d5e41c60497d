//! [`Buffer`]: one owned reference to a `tether_buffer_t`, and slices of host memory.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::ptr::{self, NonNull};
use std::sync::Arc;

use tether_sys as sys;

use crate::error::{check, Error, Result};
use crate::types::{Device, Stream};
use crate::Resource;

/// What a buffer is (`tether_buffer_info_t`). The pointer is only valid while the
/// buffer is alive and not resized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferInfo {
    /// Start of the memory (null for a 0-byte buffer).
    pub ptr: *mut u8,
    /// Size in bytes.
    pub size: usize,
    /// The stream the memory is ordered on (and will be freed on).
    pub stream: Stream,
    /// The device of the memory, or [`Device::Host`].
    pub device: Device,
    /// Kernels may access the memory.
    pub device_accessible: bool,
    /// Host code may access the memory.
    pub host_accessible: bool,
}

/// An allocation that owns its memory: exactly one reference to a `tether_buffer_t`.
///
/// The buffer retains the resource it came from and, when the last reference
/// (in any language) goes, frees its memory into that resource on its stream.
/// `Clone` adds a reference (`tether_buffer_retain`), `Drop` gives one back.
///
/// # Slices of host memory
/// Host-accessible memory can be read as `&[u8]` ([`Buffer::as_slice`]) and
/// written as `&mut [u8]` ([`Buffer::as_mut_slice`]). Both return a guard that
/// *pins* the buffer (`tether_buffer_pin`) while it lives, so no one - no clone,
/// no other language - can resize it and free the memory under the slice.
/// Because clones share memory, mutable access ([`Buffer::as_mut_slice`],
/// [`Buffer::copy_from_host`] on host memory, [`Buffer::copy_from`]) needs
/// `&mut self` *and* that this value has no live Rust clones; otherwise it fails
/// with `InvalidArgument`. Code in another language (or a GPU kernel, for managed
/// and pinned memory) that writes the memory while
/// a Rust slice of it is alive is outside what Rust can check (as with any memory
/// shared through FFI): synchronise such use yourself. Slices do not wait for
/// the buffer's stream either: after GPU work on the memory, call
/// [`crate::cuda::stream_synchronize`] first.
///
/// ```compile_fail,E0502
/// # let r = tether::Resource::host().unwrap();
/// let mut buf = r.buffer(16, tether::Stream::DEFAULT).unwrap();
/// let read = buf.as_slice().unwrap();
/// let write = buf.as_mut_slice().unwrap(); // error: `buf` is borrowed by `read`
/// # drop((read, write));
/// ```
pub struct Buffer {
    raw: NonNull<sys::tether_buffer_t>,
    /// Shared by this value and its Rust clones: the strong count says how many
    /// Rust values alias the memory (what `&mut` access must exclude).
    aliases: Arc<()>,
}

// SAFETY: tether_buffer_retain/release/get_*/copy_*/set_stream/resize/pin/unpin
// are thread-safe (DESIGN.md §2.8), and a buffer may be released from any
// thread ("Buffers may be released before or after their resource, from any
// thread", buffer.h). The Rust-side aliasing rules (shared slices through `&self`,
// mutable ones through `&mut self` and no clones) hold across threads as within
// one, so Send and Sync are both what the C contract allows.
unsafe impl Send for Buffer {}
// SAFETY: see `Send` above; `&Buffer` only reads memory or calls thread-safe C functions.
unsafe impl Sync for Buffer {}

/// Panic message for a failure that an owned (hence live) handle cannot have.
const LIVE: &str = "tether: a call on a live buffer handle failed (a bug in tether)";

/// Length of a CUDA IPC handle in bytes (`TETHER_IPC_HANDLE_SIZE`).
pub const IPC_HANDLE_SIZE: usize = sys::TETHER_IPC_HANDLE_SIZE as usize;

/// Map device memory that another process exported with [`Buffer::export_ipc`]
/// (`tether_buffer_import_ipc`): a new buffer of the exported size whose drop
/// (of the last reference) unmaps it; the exporter's memory is not freed.
/// `device`: [`Device::Current`] maps it on the GPU that holds it (found by
/// UUID), a device id on that device. `InvalidArgument` for bytes that are no
/// tether IPC handle, `NoDevice` without CUDA, `Cuda` when the driver cannot map
/// the memory (the exporter is gone, or this is the exporting process).
pub fn import_ipc(handle: &[u8; IPC_HANDLE_SIZE], device: Device) -> Result<Buffer> {
    let h = sys::tether_ipc_handle_t { data: *handle };
    let mut out = ptr::null_mut();
    // SAFETY: valid handle bytes (only read) and out-pointer.
    let status = unsafe { sys::tether_buffer_import_ipc(&h, device.as_raw(), &mut out) };
    Buffer::created(status, out)
}

/// [`import_ipc`] with the exporter's pool descriptor (`tether_buffer_import_ipc_fd`):
/// `fd` (-1: none) is a descriptor in this process of the `posix_fd` pool the
/// memory comes from; borrowed (not closed), used only while that pool is not
/// imported here yet. `InvalidArgument` for `fd < -1`.
pub fn import_ipc_fd(handle: &[u8; IPC_HANDLE_SIZE], fd: i32, device: Device) -> Result<Buffer> {
    let h = sys::tether_ipc_handle_t { data: *handle };
    let mut out = ptr::null_mut();
    // SAFETY: valid handle bytes (only read) and out-pointer; fd is only borrowed.
    let status = unsafe { sys::tether_buffer_import_ipc_fd(&h, fd, device.as_raw(), &mut out) };
    Buffer::created(status, out)
}

impl Buffer {
    /// Allocate `size` bytes from `resource` (which the buffer retains), ordered on `stream`.
    pub fn new(resource: &Resource, size: usize, stream: Stream) -> Result<Buffer> {
        let mut out = ptr::null_mut();
        // SAFETY: live resource handle, valid out-pointer.
        let status = unsafe { sys::tether_buffer_create(resource.as_raw(), 0, size, stream.as_raw(), &mut out) };
        Buffer::created(status, out)
    }

    /// Allocate `size` bytes from the resource current for `device` now (see
    /// [`crate::current_resource`]); the buffer keeps that resource, whatever is
    /// installed later.
    pub fn from_current(device: Device, size: usize, stream: Stream) -> Result<Buffer> {
        let mut out = ptr::null_mut();
        // SAFETY: NULL resource means "current for device"; valid out-pointer.
        let status =
            unsafe { sys::tether_buffer_create(ptr::null_mut(), device.as_raw(), size, stream.as_raw(), &mut out) };
        Buffer::created(status, out)
    }

    fn created(status: sys::tether_status_t, out: *mut sys::tether_buffer_t) -> Result<Buffer> {
        check(status)?;
        // SAFETY: on TETHER_OK the create call handed us +1.
        unsafe { Buffer::from_raw(out) }.ok_or_else(|| {
            Error::new(
                sys::TETHER_ERROR_INTERNAL,
                "tether_buffer_create returned TETHER_OK and no handle",
            )
        })
    }

    /// Take ownership of one reference (`+1`) to `raw`. `None` for NULL.
    ///
    /// # Safety
    /// The caller must own the reference it hands over, and must make sure that
    /// no other `Buffer` made from the same handle (by another `from_raw` or
    /// [`Buffer::from_handle`]) is used for mutable access while this one is, since
    /// the alias count of [`Buffer::as_mut_slice`] only knows this value's clones.
    pub unsafe fn from_raw(raw: *mut sys::tether_buffer_t) -> Option<Buffer> {
        NonNull::new(raw).map(|raw| Buffer {
            raw,
            aliases: Arc::new(()),
        })
    }

    /// A new reference to the buffer whose handle is `raw` (retained; the caller
    /// keeps its own), e.g. from Python's `Buffer.handle`.
    ///
    /// # Safety
    /// As for [`Buffer::from_raw`] regarding other `Buffer` values of the same
    /// handle. A stale or forged handle is not unsafe: it gives `InvalidHandle`.
    pub unsafe fn from_handle(raw: *mut sys::tether_buffer_t) -> Result<Buffer> {
        let status = sys::tether_buffer_retain(raw);
        if status != sys::TETHER_OK {
            return Err(Error::new(
                status,
                format!("from_handle: buffer {raw:p} is not a live tether buffer handle"),
            ));
        }
        Ok(Buffer::from_raw(raw).expect("retained handle is not NULL"))
    }

    /// Give up this value's reference as a raw `+1` handle (for
    /// `tether_buffer_release` in C or `tether.Buffer.from_handle(h, owned=True)` in Python).
    pub fn into_raw(self) -> *mut sys::tether_buffer_t {
        // Skip Drop (the reference goes to the caller) but not the Rust-side
        // alias count, which would otherwise leak (ASan found it).
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again; the Arc is moved out once.
        drop(unsafe { ptr::read(&this.aliases) });
        this.raw.as_ptr()
    }

    /// The raw handle, borrowed: valid while `self` is alive.
    pub fn as_raw(&self) -> *mut sys::tether_buffer_t {
        self.raw.as_ptr()
    }

    /// Everything about the buffer at once.
    pub fn info(&self) -> BufferInfo {
        let mut i = sys::tether_buffer_info_t {
            struct_size: std::mem::size_of::<sys::tether_buffer_info_t>() as u32,
            ptr: ptr::null_mut(),
            size: 0,
            stream: 0,
            device: 0,
            device_accessible: 0,
            host_accessible: 0,
        };
        // SAFETY: live handle; sized out-struct.
        let status = unsafe { sys::tether_buffer_get_info(self.as_raw(), &mut i) };
        assert_eq!(status, sys::TETHER_OK, "{LIVE}");
        BufferInfo {
            ptr: i.ptr.cast(),
            size: i.size,
            stream: Stream::from_raw(i.stream),
            device: Device::from_raw(i.device),
            device_accessible: i.device_accessible != 0,
            host_accessible: i.host_accessible != 0,
        }
    }

    /// Start of the memory (null for 0 bytes). Valid until the buffer is dropped
    /// or resized; dereferencing it is up to the caller (`unsafe`).
    pub fn as_ptr(&self) -> *mut u8 {
        let mut p = ptr::null_mut();
        // SAFETY: live handle.
        let status = unsafe { sys::tether_buffer_get_ptr(self.as_raw(), &mut p) };
        assert_eq!(status, sys::TETHER_OK, "{LIVE}");
        p.cast()
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        let mut n = 0;
        // SAFETY: live handle.
        let status = unsafe { sys::tether_buffer_get_size(self.as_raw(), &mut n) };
        assert_eq!(status, sys::TETHER_OK, "{LIVE}");
        n
    }

    /// True for a 0-byte buffer.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The resource the buffer came from (a new reference).
    pub fn resource(&self) -> Resource {
        let mut r = ptr::null_mut();
        // SAFETY: live handle; `r` is borrowed while the buffer lives, retained at once.
        let status = unsafe { sys::tether_buffer_get_resource(self.as_raw(), &mut r) };
        assert_eq!(status, sys::TETHER_OK, "{LIVE}");
        Resource::from_handle(r).expect(LIVE)
    }

    /// Order the buffer on `stream` from now on (later frees and copies). The
    /// caller orders `stream` after work on the old stream.
    pub fn set_stream(&self, stream: Stream) -> Result<()> {
        // SAFETY: live handle.
        check(unsafe { sys::tether_buffer_set_stream(self.as_raw(), stream.as_raw()) })
    }

    /// Mark the memory as used on `stream` too (PyTorch's `record_stream`): once
    /// the buffer is freed, its memory is handed out again, on any stream, only
    /// after `stream` has finished the work enqueued on it before the free. The
    /// free never blocks the host. `stream` must still exist when the buffer is
    /// freed. Recording the buffer's own stream, the default stream or a stream
    /// twice is allowed; a no-op for host memory. See `tether_buffer_record_stream`.
    pub fn record_stream(&self, stream: Stream) -> Result<()> {
        // SAFETY: live handle.
        check(unsafe { sys::tether_buffer_record_stream(self.as_raw(), stream.as_raw()) })
    }

    /// Export the memory for another process (CUDA IPC, `tether_buffer_export_ipc`):
    /// send the returned [`IPC_HANDLE_SIZE`] bytes there and map them with
    /// [`import_ipc`]. Nothing is transferred: keep this buffer alive until every
    /// importer has dropped its import; resize is refused from now on. A non-default
    /// `stream` records an event on it that the importer waits for. `NotSupported`
    /// (with the reason) for host, pinned-host, managed and async memory.
    pub fn export_ipc(&self, stream: Stream) -> Result<[u8; IPC_HANDLE_SIZE]> {
        let mut h = sys::tether_ipc_handle_t {
            data: [0; IPC_HANDLE_SIZE],
        };
        // SAFETY: live handle, valid out-pointer.
        check(unsafe { sys::tether_buffer_export_ipc(self.as_raw(), stream.as_raw(), &mut h) })?;
        Ok(h.data)
    }

    /// Pins held on the buffer now (by slices, DLPack exports, any language); 0 allows resize.
    pub fn pin_count(&self) -> usize {
        let mut n = 0;
        // SAFETY: live handle.
        let status = unsafe { sys::tether_buffer_get_pin_count(self.as_raw(), &mut n) };
        assert_eq!(status, sys::TETHER_OK, "{LIVE}");
        n
    }

    /// Number of Rust values (this one and its clones) sharing this reference group.
    fn rust_aliases(&self) -> usize {
        Arc::strong_count(&self.aliases)
    }

    /// Fail unless no Rust clone of this value exists (for writes to host memory).
    fn exclusive(&mut self, what: &str) -> Result<()> {
        if Arc::get_mut(&mut self.aliases).is_some() {
            Ok(())
        } else {
            Err(Error::new(
                sys::TETHER_ERROR_INVALID_ARGUMENT,
                format!(
                    "{what}: the buffer is shared by {} Rust clones; drop the others (or copy) before writing",
                    self.rust_aliases()
                ),
            ))
        }
    }

    /// Copy `src` into the buffer at `offset`; returns when complete.
    /// For host-accessible memory this needs no live Rust clones (see the type docs).
    pub fn copy_from_host(&mut self, offset: usize, src: &[u8]) -> Result<()> {
        if self.info().host_accessible {
            self.exclusive("copy_from_host")?;
        }
        // SAFETY: live handle; src is valid for src.len() bytes; the library checks the range.
        check(unsafe { sys::tether_buffer_copy_from_host(self.as_raw(), offset, src.as_ptr().cast(), src.len()) })
    }

    /// Copy `dst.len()` bytes at `offset` of the buffer into `dst`; returns when complete.
    pub fn copy_to_host(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        // SAFETY: live handle; dst is valid for writes of dst.len() bytes; range checked.
        check(unsafe { sys::tether_buffer_copy_to_host(self.as_raw(), offset, dst.as_mut_ptr().cast(), dst.len()) })
    }

    /// The whole buffer copied into a `Vec` (any memory kind).
    pub fn to_vec(&self) -> Result<Vec<u8>> {
        let mut v = vec![0u8; self.len()];
        self.copy_to_host(0, &mut v)?;
        Ok(v)
    }

    /// Copy `size` bytes of `src` (from `src_offset`) into this buffer at
    /// `dst_offset`, ordered on this buffer's stream (asynchronous for device memory).
    pub fn copy_from(&mut self, dst_offset: usize, src: &Buffer, src_offset: usize, size: usize) -> Result<()> {
        if self.info().host_accessible {
            self.exclusive("copy_from")?;
        }
        // SAFETY: both handles are live; the library checks both ranges.
        check(unsafe { sys::tether_buffer_copy(self.as_raw(), dst_offset, src.as_raw(), src_offset, size) })
    }

    /// Change the size: new memory from the same resource, `min(old, new)` bytes
    /// copied, the old memory freed. Fails with `InvalidArgument` while any pin is
    /// held (a live slice, in any language). Earlier pointers become invalid.
    pub fn resize(&mut self, new_size: usize) -> Result<()> {
        // SAFETY: live handle; `&mut self` means no slice of this value is alive,
        // and slices of clones pin the buffer, which makes the library refuse.
        check(unsafe { sys::tether_buffer_resize(self.as_raw(), new_size) })
    }

    fn host_view(&self, what: &str) -> Result<(*mut u8, usize)> {
        let i = self.info();
        if !i.host_accessible {
            return Err(Error::new(
                sys::TETHER_ERROR_INVALID_ARGUMENT,
                format!(
                    "{what}: the buffer's memory is not host-accessible (device {:?}); use copy_to_host",
                    i.device
                ),
            ));
        }
        Ok((i.ptr, i.size))
    }

    fn pin(&self) {
        // SAFETY: live handle; pin adds one reference and one pin, given back by unpin.
        let status = unsafe { sys::tether_buffer_pin(self.as_raw()) };
        assert_eq!(status, sys::TETHER_OK, "{LIVE}");
    }

    /// The memory as `&[u8]`, pinned (not resizable by anyone) while the guard lives.
    /// `InvalidArgument` if the memory is not host-accessible.
    pub fn as_slice(&self) -> Result<HostSlice<'_>> {
        self.pin();
        let guard = PinGuard(self);
        // The pointer is read after pinning, so no resize can slip in between.
        let (p, n) = self.host_view("as_slice")?;
        // SAFETY: host-accessible memory of n bytes, alive and not resizable while
        // pinned; no `&mut` alias: mutable access needs `&mut` to this value and no clones.
        let slice = unsafe { std::slice::from_raw_parts(nonnull_or_dangling(p), n) };
        Ok(HostSlice { slice, _pin: guard })
    }

    /// The memory as `&mut [u8]`, pinned while the guard lives. `InvalidArgument`
    /// if it is not host-accessible or Rust clones of this value are alive.
    pub fn as_mut_slice(&mut self) -> Result<HostSliceMut<'_>> {
        self.exclusive("as_mut_slice")?;
        let this: &Buffer = self;
        this.pin();
        let guard = PinGuard(this);
        let (p, n) = this.host_view("as_mut_slice")?;
        // SAFETY: as in as_slice; exclusive: `&mut self` and no Rust clones.
        let slice = unsafe { std::slice::from_raw_parts_mut(nonnull_or_dangling(p), n) };
        Ok(HostSliceMut { slice, _pin: guard })
    }
}

fn nonnull_or_dangling(p: *mut u8) -> *mut u8 {
    if p.is_null() {
        NonNull::dangling().as_ptr()
    } else {
        p
    }
}

/// Gives back one pin (and its reference) on drop.
struct PinGuard<'a>(&'a Buffer);

impl Drop for PinGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: we hold one pin taken by Buffer::pin; unpin touches no error state.
        unsafe {
            sys::tether_buffer_unpin(self.0.as_raw());
        }
    }
}

/// A pinned `&[u8]` view of a host-accessible buffer ([`Buffer::as_slice`]).
pub struct HostSlice<'a> {
    slice: &'a [u8],
    _pin: PinGuard<'a>,
}

impl Deref for HostSlice<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.slice
    }
}

/// A pinned `&mut [u8]` view of a host-accessible buffer ([`Buffer::as_mut_slice`]).
pub struct HostSliceMut<'a> {
    slice: &'a mut [u8],
    _pin: PinGuard<'a>,
}

impl Deref for HostSliceMut<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.slice
    }
}

impl DerefMut for HostSliceMut<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.slice
    }
}

impl Clone for Buffer {
    /// Another reference to the same buffer (`tether_buffer_retain`); shares the memory.
    fn clone(&self) -> Buffer {
        // SAFETY: `self` owns a reference, so the handle is live.
        let status = unsafe { sys::tether_buffer_retain(self.as_raw()) };
        assert_eq!(status, sys::TETHER_OK, "{LIVE}");
        Buffer {
            raw: self.raw,
            aliases: Arc::clone(&self.aliases),
        }
    }
}

impl Drop for Buffer {
    /// Give this value's reference back; the last one frees the memory into its resource.
    fn drop(&mut self) {
        // SAFETY: we own exactly one reference.
        unsafe {
            sys::tether_buffer_release(self.as_raw());
        }
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = self.info();
        f.debug_struct("Buffer")
            .field("size", &i.size)
            .field("device", &i.device)
            .field("stream", &i.stream)
            .field("handle", &self.raw)
            .finish()
    }
}
