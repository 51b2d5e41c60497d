use std::ptr;

use tether_sys as sys;

use crate::error::{check, Result};
use crate::Resource;

/// Options of an aligned adaptor (`tether_aligned_options_t`): start with
/// [`Resource::aligned_adaptor`], then [`AlignedBuilder::build`].
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until build() is called"]
pub struct AlignedBuilder<'a> {
    upstream: &'a Resource,
    options: sys::tether_aligned_options_t,
}

/// The settings of an aligned adaptor, from [`Resource::aligned_options`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlignedOptions {
    /// The alignment given to allocations of at least `threshold` bytes.
    pub alignment: usize,
    /// Allocations of at least this many bytes get `alignment`.
    pub threshold: usize,
}

impl Resource {
    /// An adaptor over `upstream` (which it retains) that aligns allocations of
    /// at least `threshold` bytes to at least `alignment` (`tether_aligned_adaptor_create`).
    /// Free with the size and alignment you allocated with.
    pub fn aligned_adaptor(upstream: &Resource) -> AlignedBuilder<'_> {
        AlignedBuilder {
            upstream,
            options: super::defaults(sys::tether_aligned_options_init, "tether_aligned_options_init"),
        }
    }

    /// The settings of an aligned adaptor (`tether_aligned_adaptor_get_options`);
    /// `NotSupported` for other kinds.
    pub fn aligned_options(&self) -> Result<AlignedOptions> {
        let mut o = sys::tether_aligned_options_t {
            struct_size: std::mem::size_of::<sys::tether_aligned_options_t>() as u32,
            alignment: 0,
            threshold: 0,
        };
        // SAFETY: live handle; sized out-struct.
        check(unsafe { sys::tether_aligned_adaptor_get_options(self.as_raw(), &mut o) })?;
        Ok(AlignedOptions {
            alignment: o.alignment,
            threshold: o.threshold,
        })
    }
}

impl AlignedBuilder<'_> {
    /// The alignment given to large allocations: a power of two up to 1 GiB (default 256).
    pub fn alignment(mut self, bytes: usize) -> Self {
        self.options.alignment = bytes;
        self
    }

    /// Allocations of at least this many bytes get `alignment` (default 0: all of them).
    pub fn threshold(mut self, bytes: usize) -> Self {
        self.options.threshold = bytes;
        self
    }

    /// Create the adaptor. `InvalidArgument` for an `alignment` that is not a
    /// power of two up to 1 GiB.
    pub fn build(self) -> Result<Resource> {
        let mut out = ptr::null_mut();
        // SAFETY: live upstream; options initialised; valid out-pointer.
        let status = unsafe { sys::tether_aligned_adaptor_create(self.upstream.as_raw(), &self.options, &mut out) };
        Resource::created(status, out)
    }
}
