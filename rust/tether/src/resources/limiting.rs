use tether_sys as sys;

use crate::error::{check, Result};
use crate::Resource;

impl Resource {
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
