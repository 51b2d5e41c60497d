use std::ptr;

use tether_sys as sys;

use crate::error::{check, Result};
use crate::Resource;

/// Options of a binning resource (`tether_binning_options_t`): start with
/// [`Resource::binning`], then [`BinningBuilder::build`]; add bins later with
/// [`Resource::binning_add_bin`].
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until build() is called"]
pub struct BinningBuilder<'a> {
    upstream: &'a Resource,
    fallback: Option<&'a Resource>,
    options: sys::tether_binning_options_t,
}

/// What a binning resource routes (`tether_binning_info_t`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BinningInfo {
    /// Bins added so far.
    pub bin_count: u64,
    /// The smallest bin's size (0 without bins).
    pub smallest_bin: u64,
    /// The largest bin's size: larger requests go to the fallback (0 without bins).
    pub largest_bin: u64,
}

impl Resource {
    /// A resource that routes requests by size to bins (`tether_binning_resource_create`);
    /// requests no bin takes go to the fallback (by default `upstream`). Retains
    /// `upstream`, the fallback and every bin resource.
    pub fn binning(upstream: &Resource) -> BinningBuilder<'_> {
        BinningBuilder {
            upstream,
            fallback: None,
            options: super::defaults(sys::tether_binning_options_init, "tether_binning_options_init"),
        }
    }

    /// Add a bin of a binning resource for requests up to `size` bytes
    /// (`tether_binning_resource_add_bin`), served by `bin_resource` (retained)
    /// or, with `None`, by a new fixed-size resource of `size` over the upstream.
    /// `NotSupported` if `self` is not a binning resource.
    pub fn binning_add_bin(&self, size: usize, bin_resource: Option<&Resource>) -> Result<()> {
        let bin = bin_resource.map_or(ptr::null_mut(), Resource::as_raw);
        // SAFETY: live handles (or NULL for the bin).
        check(unsafe { sys::tether_binning_resource_add_bin(self.as_raw(), size, bin) })
    }

    /// What a binning resource routes (`tether_binning_get_info`); `NotSupported` for other kinds.
    pub fn binning_info(&self) -> Result<BinningInfo> {
        let mut i = sys::tether_binning_info_t {
            struct_size: std::mem::size_of::<sys::tether_binning_info_t>() as u32,
            bin_count: 0,
            smallest_bin: 0,
            largest_bin: 0,
        };
        // SAFETY: live handle; sized out-struct.
        check(unsafe { sys::tether_binning_get_info(self.as_raw(), &mut i) })?;
        Ok(BinningInfo {
            bin_count: i.bin_count,
            smallest_bin: i.smallest_bin,
            largest_bin: i.largest_bin,
        })
    }

    /// The bin sizes of a binning resource in ascending order (`tether_binning_get_bin_sizes`).
    pub fn binning_bin_sizes(&self) -> Result<Vec<usize>> {
        loop {
            let mut count = 0usize;
            // SAFETY: count query (NULL, 0).
            check(unsafe { sys::tether_binning_get_bin_sizes(self.as_raw(), ptr::null_mut(), 0, &mut count) })?;
            let mut sizes = vec![0usize; count];
            let mut got = 0usize;
            // SAFETY: `sizes` holds `count` elements.
            check(unsafe { sys::tether_binning_get_bin_sizes(self.as_raw(), sizes.as_mut_ptr(), count, &mut got) })?;
            if got <= count {
                sizes.truncate(got);
                return Ok(sizes);
            }
        }
    }
}

impl<'a> BinningBuilder<'a> {
    /// Fixed-size bins of 2^`min_size_exponent` .. 2^`max_size_exponent` bytes
    /// (both 0, the default: no bins).
    pub fn min_size_exponent(mut self, exponent: u32) -> Self {
        self.options.min_size_exponent = exponent;
        self
    }

    /// See [`BinningBuilder::min_size_exponent`] (at most 40).
    pub fn max_size_exponent(mut self, exponent: u32) -> Self {
        self.options.max_size_exponent = exponent;
        self
    }

    /// Blocks per upstream chunk of the fixed-size bins this resource creates (default 0: 128).
    pub fn blocks_to_preallocate(mut self, blocks: usize) -> Self {
        self.options.blocks_to_preallocate = blocks;
        self
    }

    /// Serves requests above every bin (retained by the binning resource; default: the upstream).
    pub fn fallback(mut self, fallback: &'a Resource) -> Self {
        self.fallback = Some(fallback);
        self
    }

    /// Create the resource. `InvalidArgument` for `min_size_exponent > max_size_exponent`,
    /// `max_size_exponent > 40`, or a fallback whose memory differs from the upstream's.
    pub fn build(self) -> Result<Resource> {
        let mut options = self.options;
        options.fallback = self.fallback.map_or(ptr::null_mut(), Resource::as_raw);
        let mut out = ptr::null_mut();
        // SAFETY: live upstream and fallback; options initialised; valid out-pointer.
        let status = unsafe { sys::tether_binning_resource_create(self.upstream.as_raw(), &options, &mut out) };
        Resource::created(status, out)
    }
}
