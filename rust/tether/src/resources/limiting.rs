use std::ptr;

use tether_sys as sys;

use crate::error::{check, Result};
use crate::Resource;

impl Resource {
    /// An adaptor over `upstream` (which it retains) that hands out at most
    /// `limit` bytes at once (`tether_limiting_adaptor_create`); beyond that an
    /// allocation fails with `OutOfMemory`. A `limit` of 0 makes every request fail.
    pub fn limiting_adaptor(upstream: &Resource, limit: usize) -> Result<Resource> {
        let mut options = super::defaults(sys::tether_limiting_options_init, "tether_limiting_options_init");
        options.limit = limit;
        let mut out = ptr::null_mut();
        // SAFETY: live upstream; options initialised; valid out-pointer.
        let status = unsafe { sys::tether_limiting_adaptor_create(upstream.as_raw(), &options, &mut out) };
        Resource::created(status, out)
    }

    /// Bytes a limiting adaptor has handed out and not yet taken back
    /// (`tether_limiting_adaptor_get_used_bytes`); `NotSupported` for other kinds.
    pub fn limiting_used_bytes(&self) -> Result<u64> {
        let mut v = 0u64;
        // SAFETY: live handle; valid out-pointer.
        check(unsafe { sys::tether_limiting_adaptor_get_used_bytes(self.as_raw(), &mut v) })?;
        Ok(v)
    }

    /// The limit of a limiting adaptor (`tether_limiting_adaptor_get_limit`);
    /// `NotSupported` for other kinds.
    pub fn limiting_limit(&self) -> Result<u64> {
        let mut v = 0u64;
        // SAFETY: live handle; valid out-pointer.
        check(unsafe { sys::tether_limiting_adaptor_get_limit(self.as_raw(), &mut v) })?;
        Ok(v)
    }
}
