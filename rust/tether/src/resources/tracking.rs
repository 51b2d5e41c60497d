use std::ptr;

use tether_sys as sys;

use crate::error::{check, Result};
use crate::types::Stream;
use crate::Resource;

/// Options of a tracking adaptor (`tether_tracking_options_t`): start with
/// [`Resource::tracking_adaptor`], then [`TrackingBuilder::build`].
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until build() is called"]
pub struct TrackingBuilder<'a> {
    upstream: &'a Resource,
    options: sys::tether_tracking_options_t,
}

/// One outstanding allocation of a tracking adaptor (`tether_tracking_record_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrackingRecord {
    /// The allocation's address.
    pub ptr: *mut u8,
    /// Bytes asked for.
    pub size: usize,
    /// Alignment asked for.
    pub alignment: usize,
    /// The stream the allocation was ordered on.
    pub stream: Stream,
    /// The allocating thread's id (`gettid()`).
    pub thread_id: u64,
    /// 1 for the adaptor's first allocation, 2 for the next, ...: allocation order.
    pub sequence: u64,
    /// Frames captured (0 without stack capture).
    pub stack_depth: u32,
}

impl Resource {
    /// An adaptor over `upstream` (which it retains) that records every
    /// outstanding allocation (`tether_tracking_adaptor_create`); read them with
    /// [`Resource::tracking_outstanding`] and [`Resource::tracking_report`].
    pub fn tracking_adaptor(upstream: &Resource) -> TrackingBuilder<'_> {
        TrackingBuilder {
            upstream,
            options: super::defaults(sys::tether_tracking_options_init, "tether_tracking_options_init"),
        }
    }

    /// The outstanding allocations of a tracking adaptor, oldest first
    /// (`tether_tracking_adaptor_get_outstanding`); `NotSupported` for other kinds.
    pub fn tracking_outstanding(&self) -> Result<Vec<TrackingRecord>> {
        let stride = std::mem::size_of::<sys::tether_tracking_record_t>();
        loop {
            let mut count = 0usize;
            // SAFETY: count query (NULL, 0).
            check(unsafe {
                sys::tether_tracking_adaptor_get_outstanding(self.as_raw(), ptr::null_mut(), 0, &mut count)
            })?;
            // SAFETY: plain C data; all-zero is valid.
            let mut records: Vec<sys::tether_tracking_record_t> = vec![unsafe { std::mem::zeroed() }; count.max(1)];
            records[0].struct_size = stride as u32;
            let mut got = 0usize;
            // SAFETY: `records` holds `count` elements of the stride named in records[0].
            check(unsafe {
                sys::tether_tracking_adaptor_get_outstanding(self.as_raw(), records.as_mut_ptr(), count, &mut got)
            })?;
            if got <= count {
                records.truncate(got);
                return Ok(records
                    .iter()
                    .map(|r| TrackingRecord {
                        ptr: r.ptr.cast(),
                        size: r.size,
                        alignment: r.alignment,
                        stream: Stream::from_raw(r.stream),
                        thread_id: r.thread_id,
                        sequence: r.sequence,
                        stack_depth: r.stack_depth,
                    })
                    .collect());
            }
        }
    }

    /// A tracking adaptor's leak report, oldest allocation first
    /// (`tether_tracking_adaptor_report`); `NotSupported` for other kinds.
    pub fn tracking_report(&self) -> Result<String> {
        // SAFETY: live handle; `buf` holds `cap` bytes (or is NULL with 0).
        super::read_text(|buf, cap, needed| unsafe {
            sys::tether_tracking_adaptor_report(self.as_raw(), buf, cap, needed)
        })
    }

    /// The call stack captured for the outstanding allocation at `ptr`
    /// (`tether_tracking_adaptor_get_stack`): `""` without stack capture;
    /// `InvalidArgument` if `ptr` is not outstanding.
    pub fn tracking_stack(&self, ptr: *const u8) -> Result<String> {
        // SAFETY: live handle; `buf` holds `cap` bytes (or is NULL with 0); `ptr` is only compared.
        super::read_text(|buf, cap, needed| unsafe {
            sys::tether_tracking_adaptor_get_stack(self.as_raw(), ptr.cast(), buf, cap, needed)
        })
    }
}

impl TrackingBuilder<'_> {
    /// Capture each allocation's call stack (costs a backtrace per allocation; default false).
    pub fn capture_stacks(mut self, yes: bool) -> Self {
        self.options.capture_stacks = i32::from(yes);
        self
    }

    /// Create the adaptor.
    pub fn build(self) -> Result<Resource> {
        let mut out = ptr::null_mut();
        // SAFETY: live upstream; options initialised; valid out-pointer.
        let status = unsafe { sys::tether_tracking_adaptor_create(self.upstream.as_raw(), &self.options, &mut out) };
        Resource::created(status, out)
    }
}
