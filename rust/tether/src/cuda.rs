//! The CUDA driver, as tether sees it (`tether/cuda.h`). tether links nothing
//! from CUDA: without a driver or device these return `NoDevice` with the reason.

use std::os::raw::c_int;

use tether_sys as sys;

use crate::error::{check, Result};
use crate::types::Stream;

/// Number of CUDA devices.
pub fn device_count() -> Result<i32> {
    let mut n: c_int = 0;
    // SAFETY: valid out-pointer.
    check(unsafe { sys::tether_cuda_get_device_count(&mut n) })?;
    Ok(n)
}

/// The driver's CUDA version (e.g. 13000).
pub fn driver_version() -> Result<i32> {
    let mut v: c_int = 0;
    // SAFETY: valid out-pointer.
    check(unsafe { sys::tether_cuda_get_driver_version(&mut v) })?;
    Ok(v)
}

/// The calling thread's current device (its current context's device, else 0).
pub fn current_device() -> Result<i32> {
    let mut d: c_int = 0;
    // SAFETY: valid out-pointer.
    check(unsafe { sys::tether_cuda_get_current_device(&mut d) })?;
    Ok(d)
}

/// Wait until all work on `stream` of `device`'s primary context is done.
pub fn stream_synchronize(device: i32, stream: Stream) -> Result<()> {
    // SAFETY: plain values.
    check(unsafe { sys::tether_cuda_stream_synchronize(device, stream.as_raw()) })
}
