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

/// The name of `device` as the driver reports it (e.g. "NVIDIA H200");
/// `InvalidArgument` for a bad id, `NoDevice` without a driver.
pub fn device_name(device: i32) -> Result<String> {
    let mut needed: usize = 0;
    // SAFETY: the size query (NULL buffer, capacity 0) with a valid out-pointer.
    check(unsafe { sys::tether_cuda_get_device_name(device, std::ptr::null_mut(), 0, &mut needed) })?;
    let mut buf = vec![0u8; needed.max(1)];
    // SAFETY: `buf` holds `buf.len()` writable bytes.
    check(unsafe { sys::tether_cuda_get_device_name(device, buf.as_mut_ptr().cast(), buf.len(), &mut needed) })?;
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    buf.truncate(end);
    Ok(String::from_utf8_lossy(&buf).into_owned())
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
