use std::ptr;

use tether_sys as sys;

use crate::error::Result;
use crate::Resource;

impl Resource {
    /// An adaptor that forwards to `upstream` (which it retains) and counts bytes
    /// and allocations (`tether_statistics_adaptor_create`); read them with
    /// [`Resource::statistics`].
    pub fn statistics_adaptor(upstream: &Resource) -> Result<Resource> {
        let mut out = ptr::null_mut();
        // SAFETY: live upstream (retained by the adaptor); valid out-pointer.
        let status = unsafe { sys::tether_statistics_adaptor_create(upstream.as_raw(), &mut out) };
        Resource::created(status, out)
    }
}
