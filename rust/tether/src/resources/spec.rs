use std::ffi::CString;
use std::ptr;

use tether_sys as sys;

use crate::error::{check, Error, Result};
use crate::{Device, Resource};

impl Resource {
    /// Build the resource stack that `spec` names (`tether_resource_create_from_spec`),
    /// e.g. `"statistics(pool(host, initial_size=1MiB))"` (syntax: docs/specs.rst).
    /// The result retains its upstreams. `InvalidArgument` for a spec that does
    /// not parse; the message names the position and the token.
    pub fn from_spec(spec: &str) -> Result<Resource> {
        let c = CString::new(spec)
            .map_err(|_| Error::new(sys::TETHER_ERROR_INVALID_ARGUMENT, "spec: contains a NUL byte"))?;
        let mut out = ptr::null_mut();
        // SAFETY: NUL-terminated string; valid out-pointer.
        let status = unsafe { sys::tether_resource_create_from_spec(c.as_ptr(), &mut out) };
        Resource::created(status, out)
    }

    /// A spec naming this resource's whole stack (`tether_resource_get_spec`):
    /// [`Resource::from_spec`] on it builds an equivalent new stack.
    pub fn spec(&self) -> Result<String> {
        super::read_text(|buf, cap, needed| {
            // SAFETY: live handle; `buf` holds `cap` bytes (or is NULL with 0).
            let status = unsafe { sys::tether_resource_get_spec(self.as_raw(), buf, cap, needed) };
            // get_spec reports the length without the NUL; read_text counts it.
            *needed += 1;
            status
        })
    }
}

/// Read `text` as a size, in the grammar of a spec's sizes (`tether_parse_size`): `"4096"`,
/// `"64 MiB"`, `"1.5GiB"`, `"100 MB"`, or `"80%"` of `device`'s total memory, rounded down
/// ([`Device::Host`] refuses a percentage). `InvalidArgument` for text that is not a size (the
/// message quotes it and says why); `NoDevice` for a percentage without a GPU.
pub fn parse_size(text: &str, device: Device) -> Result<usize> {
    let c =
        CString::new(text).map_err(|_| Error::new(sys::TETHER_ERROR_INVALID_ARGUMENT, "text: contains a NUL byte"))?;
    let mut out = 0usize;
    // SAFETY: NUL-terminated string; valid out-pointer.
    check(unsafe { sys::tether_parse_size(c.as_ptr(), device.as_raw(), &mut out) })?;
    Ok(out)
}
