//! Handing references across the FFI boundary leaks nothing on the Rust heap
//! (a counting global allocator; found first by ASan: `Buffer::into_raw` once
//! forgot the Rust-side alias count).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use tether::{Buffer, Resource, Stream};

struct Counting;

// Bytes outstanding, counted per thread: the test harness's own threads
// allocate while the test runs (its output capture, its progress report), and
// a process-wide count picked those up now and then (900 bytes off, once in CI).
// A const-initialised Cell needs no allocation, so the allocator may touch it.
thread_local! {
    static OUTSTANDING: Cell<isize> = const { Cell::new(0) };
}

fn outstanding() -> isize {
    OUTSTANDING.with(Cell::get)
}

fn count(delta: isize) {
    // try_with: a thread being torn down has no slot any more; it is not ours.
    let _ = OUTSTANDING.try_with(|n| n.set(n.get() + delta));
}

// SAFETY: forwards to the system allocator and only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize));
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn into_raw_and_from_raw_leave_no_rust_allocation_behind() {
    let host = Resource::host().unwrap();
    let before = outstanding();
    let buf = host.buffer(64, Stream::DEFAULT).unwrap();
    for _ in 0..1000 {
        let raw = buf.clone().into_raw();
        // SAFETY: raw carries the +1 of into_raw.
        drop(unsafe { Buffer::from_raw(raw) }.unwrap());
        let raw = host.clone().into_raw();
        // SAFETY: as above.
        drop(unsafe { Resource::from_raw(raw) }.unwrap());
        drop(buf.as_slice().unwrap());
    }
    drop(buf);
    assert_eq!(outstanding(), before);
}
