//! Constructors of every resource and adaptor.
//!
//! Each type is one small piece: an associated function on [`Resource`] named
//! after the C create call, and for types with an options struct a builder
//! whose setters carry the C field names (which Python's keywords share).
//! A constructor that only fills the options struct from its arguments (a
//! device or an upstream, then each field) and calls the create function is
//! written by `ci/gen_kinds.py` from the kind's entry in `capi/kinds.json`
//! (`rust_fn`, `rust_doc`) into `constructors.rs`, with
//! [`crate::ResourceKind`]'s variant; a kind whose Rust glue says more (a
//! builder, closures, queries, an info struct) has `"rust"` in the entry's
//! `hand` list and its own file here, as `pool.rs` (a builder) and
//! `limiting.rs` (queries beside the generated `Resource::limiting_adaptor`)
//! do. See "Adding a resource" in the design docs.
//!
//! Functions handed to C (closures, trait objects) are `Send + Sync + 'static`,
//! boxed, owned by the C resource (freed by its destroy callback) and never
//! unwind into C: a panic becomes an error status (see [`guarded`]).
//!
//! [`Resource`]: crate::Resource

use std::mem::{self, MaybeUninit};
use std::panic::{catch_unwind, AssertUnwindSafe};

use tether_sys as sys;

mod aligned;
mod arena;
mod binning;
mod callback;
mod constructors;
mod cuda;
mod failure_callback;
mod fixed_size;
mod limiting;
mod logging;
mod pool;
mod spec;
mod statistics;
mod tracking;

pub use aligned::{AlignedBuilder, AlignedOptions};
pub use arena::{ArenaBuilder, ArenaInfo};
pub use binning::{BinningBuilder, BinningInfo};
pub use callback::{CallbackBuilder, CallbackMemory};
pub use cuda::AsyncBuilder;
pub use fixed_size::{FixedSizeBuilder, FixedSizeInfo};
pub use logging::LoggingBuilder;
pub use pool::PoolBuilder;
pub use spec::parse_size;
pub use tracking::{TrackingBuilder, TrackingRecord};

/// A C options struct filled with the library's defaults by its `*_options_init`.
pub(crate) fn defaults<T>(init: unsafe extern "C" fn(*mut T, usize) -> sys::tether_status_t, what: &str) -> T {
    let mut o = MaybeUninit::<T>::zeroed();
    // SAFETY: a valid, zeroed out-struct of our size; the call fills the defaults.
    let status = unsafe { init(o.as_mut_ptr(), mem::size_of::<T>()) };
    assert_eq!(status, sys::TETHER_OK, "{what} rejected this crate's layout");
    // SAFETY: zeroed, then initialised by the call (plain C data).
    unsafe { o.assume_init() }
}

/// Run `f` (user code called from C) so that a panic never unwinds into C:
/// `Err(())` when it panicked (the panic message has been printed by the hook).
pub(crate) fn guarded<R>(f: impl FnOnce() -> R) -> Result<R, ()> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|_| ())
}

/// A C text out-parameter (`buffer`, `capacity`, `out_needed`, NUL included)
/// read into a `String`: ask for the size, then fetch (again if it grew).
pub(crate) fn read_text(
    mut call: impl FnMut(*mut std::os::raw::c_char, usize, &mut usize) -> sys::tether_status_t,
) -> crate::Result<String> {
    let mut needed = 0usize;
    crate::error::check(call(std::ptr::null_mut(), 0, &mut needed))?;
    loop {
        let mut buf = vec![0u8; needed.max(1)];
        let cap = buf.len();
        crate::error::check(call(buf.as_mut_ptr().cast(), cap, &mut needed))?;
        if needed <= cap {
            let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            buf.truncate(end);
            return Ok(String::from_utf8_lossy(&buf).into_owned());
        }
    }
}
