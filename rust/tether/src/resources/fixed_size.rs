use std::ptr;

use tether_sys as sys;

use crate::error::{check, Result};
use crate::Resource;

/// Options of a fixed-size resource (`tether_fixed_size_options_t`): start with
/// [`Resource::fixed_size`], then [`FixedSizeBuilder::build`].
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until build() is called"]
pub struct FixedSizeBuilder<'a> {
    upstream: &'a Resource,
    options: sys::tether_fixed_size_options_t,
}

/// What a fixed-size resource holds (`tether_fixed_size_info_t`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FixedSizeInfo {
    /// Bytes of every block (after rounding).
    pub block_size: u64,
    /// Every block is aligned to this.
    pub block_alignment: u64,
    /// Blocks held from upstream.
    pub total_blocks: u64,
    /// Of those, blocks not handed out.
    pub free_blocks: u64,
    /// Chunks held from upstream.
    pub chunk_count: u64,
}

impl Resource {
    /// A suballocator of equal blocks over `upstream` (`tether_fixed_size_resource_create`),
    /// which it retains: every request of at most `block_size` bytes gets one block.
    pub fn fixed_size(upstream: &Resource) -> FixedSizeBuilder<'_> {
        FixedSizeBuilder {
            upstream,
            options: super::defaults(sys::tether_fixed_size_options_init, "tether_fixed_size_options_init"),
        }
    }

    /// What a fixed-size resource holds (`tether_fixed_size_get_info`); `NotSupported` for other kinds.
    pub fn fixed_size_info(&self) -> Result<FixedSizeInfo> {
        // SAFETY: plain C data; all-zero is valid.
        let mut i: sys::tether_fixed_size_info_t = unsafe { std::mem::zeroed() };
        i.struct_size = std::mem::size_of::<sys::tether_fixed_size_info_t>() as u32;
        // SAFETY: live handle; sized out-struct.
        check(unsafe { sys::tether_fixed_size_get_info(self.as_raw(), &mut i) })?;
        Ok(FixedSizeInfo {
            block_size: i.block_size,
            block_alignment: i.block_alignment,
            total_blocks: i.total_blocks,
            free_blocks: i.free_blocks,
            chunk_count: i.chunk_count,
        })
    }
}

impl FixedSizeBuilder<'_> {
    /// Bytes of every block, rounded up to a multiple of 256 (default 1 MiB; 0 is `InvalidArgument`).
    pub fn block_size(mut self, bytes: usize) -> Self {
        self.options.block_size = bytes;
        self
    }

    /// Blocks per chunk taken from upstream, at creation and at every refill (default 128; 0: 1).
    pub fn blocks_to_preallocate(mut self, blocks: usize) -> Self {
        self.options.blocks_to_preallocate = blocks;
        self
    }

    /// Create the resource. `InvalidArgument` for `block_size` 0.
    pub fn build(self) -> Result<Resource> {
        let mut out = ptr::null_mut();
        // SAFETY: live upstream; options initialised; valid out-pointer.
        let status = unsafe { sys::tether_fixed_size_resource_create(self.upstream.as_raw(), &self.options, &mut out) };
        Resource::created(status, out)
    }
}
