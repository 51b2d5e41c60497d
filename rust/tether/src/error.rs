//! Errors: the C status code and the calling thread's message, captured together.

use std::ffi::CStr;
use std::fmt;

use tether_sys as sys;

/// What went wrong, by the C status code (`tether_status_t`).
///
/// The C values are stable and only ever appended; a code this crate does not
/// know (from a newer libtether) is kept as [`ErrorKind::Other`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// `TETHER_ERROR_INVALID_ARGUMENT`: an argument is out of range.
    InvalidArgument,
    /// `TETHER_ERROR_INVALID_HANDLE`: a handle was NULL, released, of the wrong type or forged.
    InvalidHandle,
    /// `TETHER_ERROR_OUT_OF_MEMORY`: the resource (or its upstream) could not provide the memory.
    OutOfMemory,
    /// `TETHER_ERROR_NOT_SUPPORTED`: this resource, build or platform lacks the operation.
    NotSupported,
    /// `TETHER_ERROR_NO_DEVICE`: no usable CUDA driver or device.
    NoDevice,
    /// `TETHER_ERROR_CUDA`: a CUDA driver call failed.
    Cuda,
    /// `TETHER_ERROR_LOCKED`: the current-resource slot is locked.
    Locked,
    /// `TETHER_ERROR_VERSION_MISMATCH`: an options struct older than the library accepts.
    VersionMismatch,
    /// `TETHER_ERROR_SHUTTING_DOWN`: the process is exiting.
    ShuttingDown,
    /// `TETHER_ERROR_INTERNAL`: a bug in tether.
    Internal,
    /// A status code this version of the crate does not know.
    Other(u32),
}

impl ErrorKind {
    /// The kind of a nonzero C status code.
    pub fn from_code(code: u32) -> ErrorKind {
        match code {
            sys::TETHER_ERROR_INVALID_ARGUMENT => ErrorKind::InvalidArgument,
            sys::TETHER_ERROR_INVALID_HANDLE => ErrorKind::InvalidHandle,
            sys::TETHER_ERROR_OUT_OF_MEMORY => ErrorKind::OutOfMemory,
            sys::TETHER_ERROR_NOT_SUPPORTED => ErrorKind::NotSupported,
            sys::TETHER_ERROR_NO_DEVICE => ErrorKind::NoDevice,
            sys::TETHER_ERROR_CUDA => ErrorKind::Cuda,
            sys::TETHER_ERROR_LOCKED => ErrorKind::Locked,
            sys::TETHER_ERROR_VERSION_MISMATCH => ErrorKind::VersionMismatch,
            sys::TETHER_ERROR_SHUTTING_DOWN => ErrorKind::ShuttingDown,
            sys::TETHER_ERROR_INTERNAL => ErrorKind::Internal,
            other => ErrorKind::Other(other),
        }
    }
}

/// A failed tether call: its status code and the message the library recorded
/// for the calling thread (`tether_last_error_message()`), read right after the
/// call on the same thread, so a later failure elsewhere cannot replace it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    code: u32,
    message: String,
}

impl Error {
    /// The error of `status` (nonzero), with the thread's current message.
    pub(crate) fn last(status: sys::tether_status_t) -> Error {
        // SAFETY: never NULL; borrowed until the next failing call on this thread,
        // and we copy it before making any other call.
        let message = unsafe { CStr::from_ptr(sys::tether_last_error_message()) }
            .to_string_lossy()
            .into_owned();
        Error { code: status, message }
    }

    /// An error raised by this crate itself (no C call failed), e.g. a size that
    /// does not fit, or a slice of device memory. `message` names the argument.
    pub(crate) fn new(kind_code: sys::tether_status_t, message: impl Into<String>) -> Error {
        Error {
            code: kind_code,
            message: message.into(),
        }
    }

    /// An error of kind `kind` with `message`, e.g. for a [`crate::CallbackMemory`]
    /// implementation to report why it failed. `ErrorKind::Other(0)` (which
    /// would be `TETHER_OK`) becomes `TETHER_ERROR_INTERNAL`.
    pub fn from_kind(kind: ErrorKind, message: impl Into<String>) -> Error {
        let code = match kind {
            ErrorKind::InvalidArgument => sys::TETHER_ERROR_INVALID_ARGUMENT,
            ErrorKind::InvalidHandle => sys::TETHER_ERROR_INVALID_HANDLE,
            ErrorKind::OutOfMemory => sys::TETHER_ERROR_OUT_OF_MEMORY,
            ErrorKind::NotSupported => sys::TETHER_ERROR_NOT_SUPPORTED,
            ErrorKind::NoDevice => sys::TETHER_ERROR_NO_DEVICE,
            ErrorKind::Cuda => sys::TETHER_ERROR_CUDA,
            ErrorKind::Locked => sys::TETHER_ERROR_LOCKED,
            ErrorKind::VersionMismatch => sys::TETHER_ERROR_VERSION_MISMATCH,
            ErrorKind::ShuttingDown => sys::TETHER_ERROR_SHUTTING_DOWN,
            ErrorKind::Internal | ErrorKind::Other(sys::TETHER_OK) => sys::TETHER_ERROR_INTERNAL,
            ErrorKind::Other(code) => code,
        };
        Error::new(code, message)
    }

    /// The C status code (`tether_status_t`, never `TETHER_OK`).
    pub fn code(&self) -> u32 {
        self.code
    }

    /// The status code as an [`ErrorKind`].
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::from_code(self.code)
    }

    /// The library's message: what failed and why, naming the argument.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The enumerator's name, e.g. `"TETHER_ERROR_OUT_OF_MEMORY"` (from `tether_status_name`).
    pub fn code_name(&self) -> &'static str {
        // SAFETY: static storage, never NULL, for any value.
        let name = unsafe { CStr::from_ptr(sys::tether_status_name(self.code)) };
        name.to_str().unwrap_or("TETHER_UNKNOWN_STATUS")
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "{}", self.code_name())
        } else {
            write!(f, "{}: {}", self.code_name(), self.message)
        }
    }
}

impl std::error::Error for Error {}

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// `Ok(())` for `TETHER_OK`, else the error with this thread's message.
#[inline]
pub(crate) fn check(status: sys::tether_status_t) -> Result<()> {
    if status == sys::TETHER_OK {
        Ok(())
    } else {
        Err(Error::last(status))
    }
}
