use std::mem::{self, MaybeUninit};
use std::ptr;

use tether_sys as sys;

use crate::error::Result;
use crate::Resource;

/// Options of a pool (`tether_pool_options_t`): start with [`Resource::pool`],
/// set what differs from the defaults, then [`PoolBuilder::build`].
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until build() is called"]
pub struct PoolBuilder<'a> {
    upstream: &'a Resource,
    options: sys::tether_pool_options_t,
}

impl Resource {
    /// A coalescing pool over `upstream` (`tether_pool_resource_create`); the
    /// pool retains `upstream`. Over a CUDA resource the pool is stream-ordered.
    ///
    /// ```no_run
    /// # fn main() -> tether::Result<()> {
    /// let host = tether::Resource::host()?;
    /// let pool = tether::Resource::pool(&host).initial_size(1 << 20).maximum_size(64 << 20).build()?;
    /// # Ok(()) }
    /// ```
    pub fn pool(upstream: &Resource) -> PoolBuilder<'_> {
        let mut o = MaybeUninit::<sys::tether_pool_options_t>::zeroed();
        // SAFETY: valid out-struct of our size; fills the library's defaults.
        let status =
            unsafe { sys::tether_pool_options_init(o.as_mut_ptr(), mem::size_of::<sys::tether_pool_options_t>()) };
        assert_eq!(
            status,
            sys::TETHER_OK,
            "tether_pool_options_init rejected this crate's layout"
        );
        // SAFETY: initialised by the call above (and zeroed before).
        PoolBuilder {
            upstream,
            options: unsafe { o.assume_init() },
        }
    }
}

impl PoolBuilder<'_> {
    /// Bytes taken from upstream when the pool is created (default 0).
    pub fn initial_size(mut self, bytes: usize) -> Self {
        self.options.initial_size = bytes;
        self
    }

    /// The pool never holds more than this from upstream (default 0: no limit).
    pub fn maximum_size(mut self, bytes: usize) -> Self {
        self.options.maximum_size = bytes;
        self
    }

    /// Smallest chunk asked from upstream when growing (default 0: 1 MiB).
    pub fn growth_size(mut self, bytes: usize) -> Self {
        self.options.growth_size = bytes;
        self
    }

    /// Create the pool. `InvalidArgument` if `initial_size > maximum_size`;
    /// `OutOfMemory` if `initial_size` cannot be obtained.
    pub fn build(self) -> Result<Resource> {
        let mut out = ptr::null_mut();
        // SAFETY: live upstream; options fully initialised; valid out-pointer.
        let status = unsafe { sys::tether_pool_resource_create(self.upstream.as_raw(), &self.options, &mut out) };
        Resource::created(status, out)
    }
}
