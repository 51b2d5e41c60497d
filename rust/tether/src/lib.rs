//! Safe Rust interface to tether: memory resources for CUDA and host memory,
//! shared in one process with C, C++ and Python through libtether's C ABI.
//!
//! * [`Resource`] and [`Buffer`] each own one reference to a C handle: `Clone`
//!   retains, `Drop` releases, and dependents keep what they depend on alive
//!   inside the library, so values can be dropped in any order, on any thread.
//! * Every fallible call returns [`Result`]`<T, `[`Error`]`>`, carrying the C status
//!   code and the message the library recorded for the calling thread.
//! * The current-resource table ([`current_resource`], [`set_current_resource`],
//!   [`push_current_resource`], ...) is the one table of the process: what Python
//!   or C++ installs, Rust sees, and the other way round.
//! * Streams are raw `CUstream` values ([`Stream`]); tether loads the CUDA driver
//!   at run time, and without one CUDA calls fail with [`ErrorKind::NoDevice`].
//!
//! ```
//! use tether::{Buffer, Device, Resource, Stream};
//!
//! # fn main() -> tether::Result<()> {
//! let pool = Resource::pool(&Resource::host()?).initial_size(1 << 20).build()?;
//! let previous = tether::set_current_resource(Device::Host, Some(&pool))?;
//! let mut buf = Buffer::from_current(Device::Host, 64, Stream::DEFAULT)?;
//! buf.as_mut_slice()?.fill(7);
//! assert_eq!(buf.as_slice()?[63], 7);
//! assert_eq!(buf.resource().name(), "pool");
//! tether::set_current_resource(Device::Host, previous.as_ref())?;
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

mod buffer;
pub mod cuda;
mod current;
pub mod debug;
mod error;
mod kinds;
mod resource;
mod resources;
mod types;

pub use buffer::{import_ipc, import_ipc_fd, Buffer, BufferInfo, HostSlice, HostSliceMut, IPC_HANDLE_SIZE};
pub use current::{
    current_resource, is_current_resource_locked, lock_current_resource, push_current_resource, set_current_resource,
    set_current_resource_if_unset, with_current_resource, CurrentResourceGuard,
};
pub use error::{Error, ErrorKind, Result};
pub use kinds::ResourceKind;
pub use resource::{PoolInfo, Properties, Resource, Statistics};
pub use resources::{
    parse_size, AlignedBuilder, AlignedOptions, ArenaBuilder, ArenaInfo, AsyncBuilder, BinningBuilder, BinningInfo,
    CallbackBuilder, CallbackMemory, FixedSizeBuilder, FixedSizeInfo, LoggingBuilder, PoolBuilder, TrackingBuilder,
    TrackingRecord,
};
pub use types::{Device, Stream};

/// The raw bindings this crate is built on.
pub use tether_sys as sys;

use std::ffi::CStr;

/// The loaded library's version, encoded `MAJOR * 10000 + MINOR * 100 + PATCH`.
pub fn version_number() -> u32 {
    // SAFETY: no arguments.
    unsafe { sys::tether_version_number() }
}

/// The loaded library's version as `"MAJOR.MINOR.PATCH"`.
pub fn version_string() -> &'static str {
    // SAFETY: static storage, never NULL.
    unsafe { CStr::from_ptr(sys::tether_version_string()) }
        .to_str()
        .unwrap_or("")
}

/// The loaded library's ABI version (its SOVERSION).
pub fn abi_version() -> u32 {
    // SAFETY: no arguments.
    unsafe { sys::tether_abi_version() }
}

/// `Ok` if the loaded libtether has the ABI these bindings were generated for
/// (`TETHER_ABI_VERSION`) and is not older than the headers; the Python package
/// refuses to load otherwise, and so should a program that wants to be sure.
pub fn check_library() -> Result<()> {
    if abi_version() != sys::TETHER_ABI_VERSION || version_number() < sys::TETHER_VERSION_NUMBER {
        return Err(Error::new(
            sys::TETHER_ERROR_VERSION_MISMATCH,
            format!(
                "libtether {} (ABI {}) does not match the bindings (ABI {}, version {})",
                version_string(),
                abi_version(),
                sys::TETHER_ABI_VERSION,
                sys::TETHER_VERSION_NUMBER
            ),
        ));
    }
    Ok(())
}
