//! The Rust half of the Python cross-language test (rust/xlang/python/scenario.py).
//!
//! Exported as plain C functions for ctypes. Handles cross as integers
//! (`usize`); a function that hands out a reference says so (`+1`). On failure
//! a function returns 0 and `xlang_last_error()` says why.

use std::cell::RefCell;
use std::ffi::CString;
use std::os::raw::c_char;
use std::sync::Mutex;

use tether::{Buffer, Device, Resource, Stream};

/// What Rust holds between calls.
struct State {
    /// The pool Rust created and installed.
    pool: Option<Resource>,
    /// What the host slot held before Rust installed the pool.
    previous: Option<Resource>,
    /// Buffers Rust allocated from whatever was current.
    buffers: Vec<Buffer>,
}

static STATE: Mutex<State> = Mutex::new(State {
    pool: None,
    previous: None,
    buffers: Vec::new(),
});

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn state() -> std::sync::MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Run `f`; on error record it and return 0.
fn guarded(f: impl FnOnce() -> tether::Result<usize>) -> usize {
    match f() {
        Ok(v) => v,
        Err(e) => {
            let text = CString::new(e.to_string().replace('\0', " ")).unwrap_or_default();
            LAST_ERROR.with(|m| *m.borrow_mut() = text);
            0
        }
    }
}

/// The message of this thread's last failed xlang call ("" if none). Borrowed.
#[no_mangle]
pub extern "C" fn xlang_last_error() -> *const c_char {
    LAST_ERROR.with(|m| m.borrow().as_ptr())
}

/// Create a host resource and a pool over it in Rust, install the pool as the
/// current host resource, keep Rust's references. Returns the pool's handle value.
#[no_mangle]
pub extern "C" fn xlang_install_pool() -> usize {
    guarded(|| {
        tether::check_library()?;
        let pool = Resource::pool(&Resource::host()?).initial_size(1 << 20).build()?;
        let previous = tether::set_current_resource(Device::Host, Some(&pool))?;
        let handle = pool.as_raw() as usize;
        let mut s = state();
        s.pool = Some(pool);
        s.previous = previous;
        Ok(handle)
    })
}

/// A buffer of `size` bytes, every byte `fill`, from the current host resource.
/// Returns its handle with +1 for the caller (Python adopts it with
/// `tether.Buffer.from_handle(h, owned=True)`).
#[no_mangle]
pub extern "C" fn xlang_make_buffer(size: usize, fill: u8) -> usize {
    guarded(|| {
        let mut b = Buffer::from_current(Device::Host, size, Stream::DEFAULT)?;
        b.as_mut_slice()?.fill(fill);
        Ok(b.into_raw() as usize)
    })
}

/// The handle value of the resource current for the host slot, as Rust sees it.
#[no_mangle]
pub extern "C" fn xlang_current_host_handle() -> usize {
    guarded(|| Ok(tether::current_resource(Device::Host)?.as_raw() as usize))
}

/// Allocate a buffer of `size` bytes from the current host resource and keep
/// it in Rust. Returns its resource's handle value.
#[no_mangle]
pub extern "C" fn xlang_keep_buffer_from_current(size: usize) -> usize {
    guarded(|| {
        let b = Buffer::from_current(Device::Host, size, Stream::DEFAULT)?;
        let handle = b.resource().as_raw() as usize;
        state().buffers.push(b);
        Ok(handle)
    })
}

/// Drop Rust's reference to its pool. Returns 1.
#[no_mangle]
pub extern "C" fn xlang_drop_pool() -> usize {
    state().pool = None;
    1
}

/// Drop the buffers Rust keeps. Returns how many there were (+1, so never 0).
#[no_mangle]
pub extern "C" fn xlang_drop_buffers() -> usize {
    let n = std::mem::take(&mut state().buffers).len();
    n + 1
}

/// Put back what the host slot held before `xlang_install_pool` and drop
/// Rust's reference to it. Returns 1.
#[no_mangle]
pub extern "C" fn xlang_restore_host_slot() -> usize {
    guarded(|| {
        let previous = state().previous.take();
        tether::set_current_resource(Device::Host, previous.as_ref())?;
        Ok(1)
    })
}

/// Live tether handles of the process, counted by Rust (the same census Python reads).
#[no_mangle]
pub extern "C" fn xlang_live_objects() -> usize {
    tether::debug::live_objects(tether::debug::ObjectType::Any)
}
