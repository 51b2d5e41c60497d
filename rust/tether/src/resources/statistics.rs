use tether_sys as sys;

use crate::error::{check, Result};
use crate::{Resource, Statistics};

impl Resource {
    /// Push a new, zeroed counter set on a statistics adaptor's counter stack
    /// (`tether_statistics_adaptor_push_counters`): while it is on top, traffic
    /// changes only it and [`Resource::statistics`] reads it. The stack belongs
    /// to the adaptor, not to a thread. `NotSupported` for other kinds.
    pub fn push_counters(&self) -> Result<()> {
        // SAFETY: live handle.
        check(unsafe { sys::tether_statistics_adaptor_push_counters(self.as_raw()) })
    }

    /// Pop the top counter set and return it, folding it into the set below
    /// (`tether_statistics_adaptor_pop_counters`). `InvalidArgument` if nothing
    /// was pushed; `NotSupported` for other kinds.
    pub fn pop_counters(&self) -> Result<Statistics> {
        // SAFETY: plain C data; all-zero is valid.
        let mut s: sys::tether_statistics_t = unsafe { std::mem::zeroed() };
        s.struct_size = std::mem::size_of::<sys::tether_statistics_t>() as u32;
        // SAFETY: live handle; sized out-struct.
        check(unsafe { sys::tether_statistics_adaptor_pop_counters(self.as_raw(), &mut s) })?;
        Ok(Statistics {
            current_bytes: s.current_bytes,
            peak_bytes: s.peak_bytes,
            total_bytes: s.total_bytes,
            current_count: s.current_count,
            peak_count: s.peak_count,
            total_count: s.total_count,
        })
    }
}
