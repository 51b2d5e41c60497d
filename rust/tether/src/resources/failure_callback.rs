use std::ffi::c_void;
use std::os::raw::c_int;
use std::ptr;

use tether_sys as sys;

use crate::error::Result;
use crate::Resource;

/// The user's function, boxed and owned by the C adaptor.
type FailureFn = Box<dyn Fn(usize) -> bool + Send + Sync + 'static>;

unsafe extern "C" fn on_failure(size: usize, user: *mut c_void) -> c_int {
    // SAFETY: `user` is the FailureFn box the adaptor owns.
    let f = unsafe { &*(user as *const FailureFn) };
    // A panic means "do not retry": the allocation fails with OUT_OF_MEMORY.
    c_int::from(super::guarded(|| f(size)).unwrap_or(false))
}

unsafe extern "C" fn destroy(user: *mut c_void) {
    // SAFETY: called once, with the box handed over at creation.
    let _ = super::guarded(|| drop(unsafe { Box::from_raw(user as *mut FailureFn) }));
}

impl Resource {
    /// An adaptor over `upstream` (which it retains) that calls `callback(size)`
    /// when an allocation of `size` bytes fails with out-of-memory, and retries
    /// while it returns `true` (`tether_failure_callback_adaptor_create`).
    ///
    /// `callback` runs on the allocating thread, possibly several at once, and
    /// may free memory of any resource; returning `true` without freeing
    /// anything retries forever. A panic in it counts as `false`. The adaptor
    /// owns the closure and drops it when it is destroyed.
    pub fn failure_callback_adaptor(
        upstream: &Resource,
        callback: impl Fn(usize) -> bool + Send + Sync + 'static,
    ) -> Result<Resource> {
        let user: *mut FailureFn = Box::into_raw(Box::new(Box::new(callback)));
        let mut options = super::defaults(
            sys::tether_failure_callback_options_init,
            "tether_failure_callback_options_init",
        );
        options.callback = Some(on_failure);
        options.user = user.cast();
        options.destroy = Some(destroy);
        let mut out = ptr::null_mut();
        // SAFETY: live upstream; options initialised; on success the adaptor owns `user`.
        let status = unsafe { sys::tether_failure_callback_adaptor_create(upstream.as_raw(), &options, &mut out) };
        if status != sys::TETHER_OK {
            // SAFETY: on failure the caller keeps `user`: ours to free.
            drop(unsafe { Box::from_raw(user) });
        }
        Resource::created(status, out)
    }
}
