use std::ptr;

use tether_sys as sys;

use crate::error::Result;
use crate::Resource;

impl Resource {
    /// An adaptor over `upstream` (which it retains) that prefetches every
    /// allocation to its device on the allocation's stream (`tether_prefetch_adaptor_create`),
    /// for managed memory. `InvalidArgument` if `upstream` does not give managed
    /// memory; `NotSupported` if its device cannot prefetch; `NoDevice` without CUDA.
    pub fn prefetch_adaptor(upstream: &Resource) -> Result<Resource> {
        let mut out = ptr::null_mut();
        // SAFETY: live upstream; valid out-pointer.
        let status = unsafe { sys::tether_prefetch_adaptor_create(upstream.as_raw(), &mut out) };
        Resource::created(status, out)
    }
}
