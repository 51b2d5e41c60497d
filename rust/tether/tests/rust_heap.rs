//! Handing references across the FFI boundary leaks nothing on the Rust heap
//! (a counting global allocator; found first by ASan: `Buffer::into_raw` once
//! forgot the Rust-side alias count).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use tether::{Buffer, Resource, Stream};

struct Counting;

static OUTSTANDING: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator and only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        OUTSTANDING.fetch_add(layout.size() as isize, Ordering::SeqCst);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        OUTSTANDING.fetch_sub(layout.size() as isize, Ordering::SeqCst);
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn into_raw_and_from_raw_leave_no_rust_allocation_behind() {
    let host = Resource::host().unwrap();
    let before = OUTSTANDING.load(Ordering::SeqCst);
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
    assert_eq!(OUTSTANDING.load(Ordering::SeqCst), before);
}
