//! Constructors of every resource and adaptor, one file per C module.
//!
//! Each type is one small piece: an associated function on [`Resource`] named
//! after the C create call, and for types with an options struct a builder
//! whose setters carry the C field names (which Python's keywords share).
//! Adding a type is adding one file here:
//!
//! ```text
//! pub struct LimitingBuilder<'a> { upstream: &'a Resource, options: sys::tether_limiting_options_t }
//! impl Resource { pub fn limiting_adaptor(upstream: &Resource) -> LimitingBuilder<'_> { .. } }
//! impl LimitingBuilder<'_> { pub fn allocation_limit(mut self, n: usize) -> Self { .. }
//!                            pub fn build(self) -> Result<Resource> { .. } }
//! ```
//!
//! and one line in [`crate::ResourceKind`].
//!
//! [`Resource`]: crate::Resource

mod cuda;
mod host;
mod pool;
mod statistics;

pub use cuda::AsyncBuilder;
pub use pool::PoolBuilder;
