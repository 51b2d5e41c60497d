use std::ptr;

use tether_sys as sys;

use crate::error::{check, Result};
use crate::Resource;

/// Options of an arena resource (`tether_arena_options_t`): start with
/// [`Resource::arena`], then [`ArenaBuilder::build`].
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until build() is called"]
pub struct ArenaBuilder<'a> {
    upstream: &'a Resource,
    options: sys::tether_arena_options_t,
}

/// What an arena resource holds (`tether_arena_info_t`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArenaInfo {
    /// Bytes held from the upstream.
    pub arena_size: u64,
    /// Bytes of one superblock.
    pub superblock_size: u64,
    /// Bytes in free superblocks of the global arena.
    pub global_free_bytes: u64,
    /// Per-thread or per-stream arenas created so far.
    pub arena_count: u64,
    /// Superblocks held by those arenas (in use or cached).
    pub arena_superblocks: u64,
    /// Bytes of superblocks serving large requests.
    pub large_bytes: u64,
    /// Chunks held from upstream.
    pub chunk_count: u64,
}

impl Resource {
    /// An arena suballocator over `upstream` (`tether_arena_resource_create`),
    /// which it retains: per-stream arenas of superblocks carved from one global arena.
    pub fn arena(upstream: &Resource) -> ArenaBuilder<'_> {
        ArenaBuilder {
            upstream,
            options: super::defaults(sys::tether_arena_options_init, "tether_arena_options_init"),
        }
    }

    /// What an arena resource holds (`tether_arena_get_info`); `NotSupported` for other kinds.
    pub fn arena_info(&self) -> Result<ArenaInfo> {
        // SAFETY: plain C data; all-zero is valid.
        let mut i: sys::tether_arena_info_t = unsafe { std::mem::zeroed() };
        i.struct_size = std::mem::size_of::<sys::tether_arena_info_t>() as u32;
        // SAFETY: live handle; sized out-struct.
        check(unsafe { sys::tether_arena_get_info(self.as_raw(), &mut i) })?;
        Ok(ArenaInfo {
            arena_size: i.arena_size,
            superblock_size: i.superblock_size,
            global_free_bytes: i.global_free_bytes,
            arena_count: i.arena_count,
            arena_superblocks: i.arena_superblocks,
            large_bytes: i.large_bytes,
            chunk_count: i.chunk_count,
        })
    }
}

impl ArenaBuilder<'_> {
    /// Bytes of the global arena, all taken from upstream at creation; it never grows beyond.
    /// 0 (default): nothing up front, grow on demand, no limit.
    pub fn arena_size(mut self, bytes: usize) -> Self {
        self.options.arena_size = bytes;
        self
    }

    /// Superblock size: a power of two from 64 KiB to 1 GiB (default 0: 1 MiB).
    pub fn superblock_size(mut self, bytes: usize) -> Self {
        self.options.superblock_size = bytes;
        self
    }

    /// Create the arena. `InvalidArgument` for a bad `superblock_size`;
    /// `OutOfMemory` if `arena_size` cannot be obtained.
    pub fn build(self) -> Result<Resource> {
        let mut out = ptr::null_mut();
        // SAFETY: live upstream; options initialised; valid out-pointer.
        let status = unsafe { sys::tether_arena_resource_create(self.upstream.as_raw(), &self.options, &mut out) };
        Resource::created(status, out)
    }
}
