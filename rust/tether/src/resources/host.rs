use std::ptr;

use tether_sys as sys;

use crate::error::Result;
use crate::Resource;

impl Resource {
    /// Aligned host allocations from the C heap (`tether_host_resource_create`).
    /// It detects frees of memory it did not allocate.
    pub fn host() -> Result<Resource> {
        let mut out = ptr::null_mut();
        // SAFETY: valid out-pointer; +1 on success.
        let status = unsafe { sys::tether_host_resource_create(&mut out) };
        Resource::created(status, out)
    }
}
