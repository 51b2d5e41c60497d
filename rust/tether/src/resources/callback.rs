use std::ffi::{c_void, CString};
use std::fmt;
use std::ptr;

use tether_sys as sys;

use crate::error::{Error, Result};
use crate::types::{Device, Stream};
use crate::Resource;

/// Memory written in Rust, served through a callback resource
/// ([`Resource::callback`], `tether_callback_resource_create`).
///
/// Both methods may be called from any thread, several at once, with no tether
/// lock held; a pool over this resource may call `allocate` while holding the
/// pool's lock, so they must not use a resource built over this one. A panic
/// is caught at the C boundary and reported as `TETHER_ERROR_INTERNAL`. The
/// resource owns the value and drops it (on whichever thread) after its last
/// reference and last allocation are gone.
pub trait CallbackMemory: Send + Sync + 'static {
    /// Memory of at least `size` bytes (never 0) aligned to `alignment` (a power
    /// of two, never 0), usable by work ordered after `stream`. Return
    /// [`crate::ErrorKind::OutOfMemory`] when there is none (pools over this
    /// resource then try to recover); the error's message becomes the end of
    /// the caller's error message.
    fn allocate(&self, size: usize, alignment: usize, stream: Stream) -> Result<*mut u8>;

    /// Give back `ptr` from [`CallbackMemory::allocate`], with the size and
    /// alignment it was allocated with (tether has checked that: pointers it
    /// did not hand out, double frees and wrong sizes never reach this). An
    /// error refuses the free: the allocation stays live.
    fn deallocate(&self, ptr: *mut u8, size: usize, alignment: usize, stream: Stream) -> Result<()>;
}

/// The context handed to C: the user's trait object, boxed.
type Context = Box<dyn CallbackMemory>;

/// Report `e` to the library as the reason of the failing callback; its status.
fn report(e: &Error) -> sys::tether_status_t {
    let msg = CString::new(e.message().replace('\0', " ")).unwrap_or_default();
    // SAFETY: NUL-terminated message (copied by C).
    unsafe { sys::tether_callback_set_error(e.code(), msg.as_ptr()) }
}

fn panicked(what: &str) -> sys::tether_status_t {
    report(&Error::new(
        sys::TETHER_ERROR_INTERNAL,
        format!("the Rust CallbackMemory::{what} panicked"),
    ))
}

unsafe extern "C" fn cb_allocate(
    context: *mut c_void,
    size: usize,
    alignment: usize,
    stream: sys::tether_stream_t,
    out: *mut *mut c_void,
) -> sys::tether_status_t {
    // SAFETY: `context` is the Context box the resource owns.
    let m = unsafe { &*(context as *const Context) };
    match super::guarded(|| m.allocate(size, alignment, Stream::from_raw(stream))) {
        Ok(Ok(p)) => {
            // SAFETY: valid out-pointer from the library.
            unsafe { *out = p.cast() };
            sys::TETHER_OK
        }
        Ok(Err(e)) => report(&e),
        Err(()) => panicked("allocate"),
    }
}

unsafe extern "C" fn cb_deallocate(
    context: *mut c_void,
    ptr: *mut c_void,
    size: usize,
    alignment: usize,
    stream: sys::tether_stream_t,
) -> sys::tether_status_t {
    // SAFETY: `context` is the Context box the resource owns.
    let m = unsafe { &*(context as *const Context) };
    match super::guarded(|| m.deallocate(ptr.cast(), size, alignment, Stream::from_raw(stream))) {
        Ok(Ok(())) => sys::TETHER_OK,
        Ok(Err(e)) => report(&e),
        Err(()) => panicked("deallocate"),
    }
}

unsafe extern "C" fn cb_destroy(context: *mut c_void) {
    // SAFETY: called exactly once, with the box handed over at creation.
    let _ = super::guarded(|| drop(unsafe { Box::from_raw(context as *mut Context) }));
}

/// Options of a callback resource (`tether_callback_options_t`): start with
/// [`Resource::callback`], say what the memory is, then [`CallbackBuilder::build`].
#[must_use = "a builder does nothing until build() is called"]
pub struct CallbackBuilder {
    memory: Context,
    options: sys::tether_callback_options_t,
}

impl fmt::Debug for CallbackBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallbackBuilder")
            .field("options", &self.options)
            .finish()
    }
}

impl Resource {
    /// A resource whose allocate and deallocate are `memory`'s methods
    /// (`tether_callback_resource_create`, kind `"callback"`). tether records
    /// every allocation, so frees are checked as for every resource. By default
    /// the memory is host memory, host-accessible.
    ///
    /// ```
    /// use tether::{CallbackMemory, Resource, Stream};
    ///
    /// struct Heap;
    /// impl CallbackMemory for Heap {
    ///     fn allocate(&self, size: usize, alignment: usize, _: Stream) -> tether::Result<*mut u8> {
    ///         let layout = std::alloc::Layout::from_size_align(size, alignment).unwrap();
    ///         // SAFETY: size is never 0.
    ///         Ok(unsafe { std::alloc::alloc(layout) })
    ///     }
    ///     fn deallocate(&self, p: *mut u8, size: usize, alignment: usize, _: Stream) -> tether::Result<()> {
    ///         let layout = std::alloc::Layout::from_size_align(size, alignment).unwrap();
    ///         // SAFETY: tether passes back only what allocate handed out, with its layout.
    ///         unsafe { std::alloc::dealloc(p, layout) };
    ///         Ok(())
    ///     }
    /// }
    ///
    /// # fn main() -> tether::Result<()> {
    /// let r = Resource::callback(Heap).build()?;
    /// let buf = r.buffer(100, Stream::DEFAULT)?;
    /// assert_eq!(buf.as_slice()?.len(), 100);
    /// # Ok(()) }
    /// ```
    pub fn callback(memory: impl CallbackMemory) -> CallbackBuilder {
        CallbackBuilder {
            memory: Box::new(memory),
            options: super::defaults(sys::tether_callback_options_init, "tether_callback_options_init"),
        }
    }
}

impl CallbackBuilder {
    /// The device whose memory `allocate` hands out (default [`Device::Host`]).
    pub fn device(mut self, device: Device) -> Self {
        self.options.device = device.as_raw();
        self
    }

    /// Kernels on `device` may access the memory (default false).
    pub fn device_accessible(mut self, yes: bool) -> Self {
        self.options.device_accessible = i32::from(yes);
        self
    }

    /// Host code may access the memory (default true).
    pub fn host_accessible(mut self, yes: bool) -> Self {
        self.options.host_accessible = i32::from(yes);
        self
    }

    /// Create the resource, which then owns the [`CallbackMemory`] value.
    pub fn build(self) -> Result<Resource> {
        let vtable = sys::tether_callback_vtable_t {
            allocate: Some(cb_allocate),
            deallocate: Some(cb_deallocate),
            destroy: Some(cb_destroy),
            ..super::defaults(sys::tether_callback_vtable_init, "tether_callback_vtable_init")
        };
        let context: *mut Context = Box::into_raw(Box::new(self.memory));
        let mut out = ptr::null_mut();
        // SAFETY: vtable and options initialised; on success the resource owns
        // `context` and calls cb_destroy on it exactly once.
        let status = unsafe { sys::tether_callback_resource_create(&vtable, context.cast(), &self.options, &mut out) };
        if status != sys::TETHER_OK {
            // SAFETY: on failure nothing was called and the caller keeps `context`.
            drop(unsafe { Box::from_raw(context) });
        }
        Resource::created(status, out)
    }
}
