//! Small value types shared by the whole API: devices and streams.

use std::os::raw::{c_int, c_void};

use tether_sys as sys;

/// A slot of the current-resource table, and where memory lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Device {
    /// Host memory (`TETHER_DEVICE_HOST`).
    Host,
    /// The calling thread's current CUDA device (`TETHER_DEVICE_CURRENT`), resolved at each call.
    Current,
    /// CUDA device number `n` (0-based).
    Cuda(i32),
}

impl Device {
    /// The C value: `TETHER_DEVICE_HOST`, `TETHER_DEVICE_CURRENT` or the device number.
    pub fn as_raw(self) -> c_int {
        match self {
            Device::Host => sys::TETHER_DEVICE_HOST,
            Device::Current => sys::TETHER_DEVICE_CURRENT,
            Device::Cuda(n) => n,
        }
    }

    /// The device of a C value (as found in [`crate::Properties::device`]).
    /// Negative values other than the two named ones are kept as `Cuda(n)`, which
    /// every call then rejects with `InvalidArgument`.
    pub fn from_raw(raw: c_int) -> Device {
        match raw {
            sys::TETHER_DEVICE_HOST => Device::Host,
            sys::TETHER_DEVICE_CURRENT => Device::Current,
            n => Device::Cuda(n),
        }
    }
}

/// A CUDA stream: the raw value of a `CUstream` / `cudaStream_t` (tether defines
/// no stream type of its own; pass the handle your CUDA library gives you).
/// [`Stream::DEFAULT`] (0) is the legacy default stream. Host resources ignore streams.
///
/// A `Stream` is a plain value: it neither owns nor keeps the CUDA stream alive.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Stream(sys::tether_stream_t);

impl Stream {
    /// The default (legacy) stream, 0.
    pub const DEFAULT: Stream = Stream(0);

    /// The stream whose `CUstream` value is `raw`.
    pub const fn from_raw(raw: usize) -> Stream {
        Stream(raw)
    }

    /// The `CUstream` value as an integer (`tether_stream_t`).
    pub const fn as_raw(self) -> usize {
        self.0
    }
}

impl From<usize> for Stream {
    fn from(raw: usize) -> Stream {
        Stream(raw)
    }
}

/// A `CUstream` pointer (what cudarc, the CUDA driver API and the runtime use).
impl From<*mut c_void> for Stream {
    fn from(cu_stream: *mut c_void) -> Stream {
        Stream(cu_stream as usize)
    }
}
