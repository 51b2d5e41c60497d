//! The process-wide current-resource table (`tether/current.h`).
//!
//! One table lives in libtether, so Rust sees the same slots as C, C++ and
//! Python in the same process. Who uses which call:
//! - applications [`set_current_resource`] (and perhaps [`lock_current_resource`]);
//! - libraries read [`current_resource`] or install a default with
//!   [`set_current_resource_if_unset`], which never overrides the application;
//! - scoped use pushes a per-thread override with [`push_current_resource`],
//!   whose guard pops it on drop (or [`with_current_resource`] for a closure).

use std::marker::PhantomData;
use std::os::raw::c_int;
use std::ptr;

use tether_sys as sys;

use crate::error::{check, Result};
use crate::types::Device;
use crate::Resource;

/// The resource current for `device` (a new reference): the top of this
/// thread's override stack for the slot if it pushed one, else the process
/// slot (its default - a host resource, or a CUDA resource of the device - is
/// created on first use). A later set or pop anywhere cannot free it under you.
pub fn current_resource(device: Device) -> Result<Resource> {
    let mut out = ptr::null_mut();
    // SAFETY: valid out-pointer; +1 on success.
    let status = unsafe { sys::tether_current_resource_get(device.as_raw(), &mut out) };
    Resource::created(status, out)
}

/// Atomically install `resource` (retained by the table; `None` restores the
/// default) as current for `device`'s process slot. Returns the resource that
/// was installed before (a new reference; `None` if the slot held nothing).
/// `Locked` if the slot is locked; `InvalidArgument` if the memory is not
/// usable as `device`'s. Threads with a pushed override keep seeing it.
pub fn set_current_resource(device: Device, resource: Option<&Resource>) -> Result<Option<Resource>> {
    let mut previous = ptr::null_mut();
    let raw = resource.map_or(ptr::null_mut(), Resource::as_raw);
    // SAFETY: `raw` is NULL or a live handle; the table retains it; `previous` receives +1 or NULL.
    check(unsafe { sys::tether_current_resource_set(device.as_raw(), raw, &mut previous) })?;
    // SAFETY: +1 handed to us (or NULL).
    Ok(unsafe { Resource::from_raw(previous) })
}

/// Install `resource` for `device` only if no one has set that slot and it is
/// not locked (the library-safe default). Returns whether it installed.
pub fn set_current_resource_if_unset(device: Device, resource: &Resource) -> Result<bool> {
    let mut installed: c_int = 0;
    // SAFETY: live handle (retained by the table if installed); valid out-pointer.
    check(unsafe { sys::tether_current_resource_set_if_unset(device.as_raw(), resource.as_raw(), &mut installed) })?;
    Ok(installed != 0)
}

/// Lock `device`'s slot for the rest of the process: later sets (and new
/// pushes) fail with `Locked`, from every language. Irreversible.
pub fn lock_current_resource(device: Device) -> Result<()> {
    // SAFETY: plain value argument.
    check(unsafe { sys::tether_current_resource_lock(device.as_raw()) })
}

/// Whether `device`'s slot is locked.
pub fn is_current_resource_locked(device: Device) -> Result<bool> {
    let mut out: c_int = 0;
    // SAFETY: valid out-pointer.
    check(unsafe { sys::tether_current_resource_is_locked(device.as_raw(), &mut out) })?;
    Ok(out != 0)
}

/// A per-thread override of one slot, popped when the guard is dropped
/// ([`push_current_resource`]).
///
/// The guard is neither `Send` nor `Sync`: the override stack belongs to the
/// thread that pushed, and `tether_current_resource_pop` on another thread would
/// pop *that* thread's stack. Pushes and pops must nest per slot; guards dropped
/// in scope order do. Dropping guards of one slot out of order pops the wrong
/// override (no memory error: the stack holds its own references); prefer
/// [`with_current_resource`], which cannot.
///
/// ```compile_fail,E0277
/// fn needs_send<T: Send>(_: T) {}
/// let r = tether::Resource::host().unwrap();
/// let guard = tether::push_current_resource(tether::Device::Host, &r).unwrap();
/// needs_send(guard); // error: the guard must be dropped on the thread that pushed
/// ```
#[must_use = "the override is popped when the guard is dropped"]
pub struct CurrentResourceGuard {
    device: c_int,
    /// `*const ()` makes the guard !Send and !Sync (see above).
    _thread_bound: PhantomData<*const ()>,
}

impl CurrentResourceGuard {
    /// The slot this guard pops (a device number, or `Device::Host`; never `Current`).
    pub fn device(&self) -> Device {
        Device::from_raw(self.device)
    }
}

impl Drop for CurrentResourceGuard {
    fn drop(&mut self) {
        // SAFETY: plain value; on this thread, matching our push. A failure
        // (nothing pushed: someone popped our override) leaves nothing to undo.
        unsafe {
            sys::tether_current_resource_pop(self.device);
        }
    }
}

/// Push `resource` on this thread's override stack for `device`: until the
/// guard is dropped, [`current_resource`] on this thread returns it; other
/// threads keep seeing the process slot. The stack retains `resource`.
/// `Device::Current` is resolved now, so the guard pops the slot it pushed.
/// `Locked` if the slot is locked.
pub fn push_current_resource(device: Device, resource: &Resource) -> Result<CurrentResourceGuard> {
    let device = match device {
        Device::Current => crate::cuda::current_device()?,
        d => d.as_raw(),
    };
    // SAFETY: live handle, retained by the stack.
    check(unsafe { sys::tether_current_resource_push(device, resource.as_raw()) })?;
    Ok(CurrentResourceGuard {
        device,
        _thread_bound: PhantomData,
    })
}

/// Run `f` with `resource` pushed as this thread's override for `device`,
/// popped afterwards (also if `f` panics).
pub fn with_current_resource<R>(device: Device, resource: &Resource, f: impl FnOnce() -> R) -> Result<R> {
    let _guard = push_current_resource(device, resource)?;
    Ok(f())
}
