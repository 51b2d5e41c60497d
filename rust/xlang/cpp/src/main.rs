//! A Rust program that links libtether and a C++ translation unit
//! (cpp/side.cpp, written against tether/tether.hpp) and proves that both
//! languages share one current-resource table and one set of handles:
//!
//! 1. Rust installs a pool as the current host resource; C++ sees that pool;
//! 2. a buffer C++ fills is read and owned by Rust; one Rust fills is owned by C++;
//! 3. C++ installs a statistics adaptor; Rust sees it, and C++ counts Rust's buffer;
//! 4. per-thread overrides nest across the languages: a Rust guard, inside it a
//!    C++ `tether::scoped_resource`, each seen by the other while pushed;
//! 5. what both hold is released in every one of the 120 orders of 5 steps,
//!    and the census returns to where it began.
//!
//! Exits 0 with one summary line; panics (exit status 101) naming the order otherwise.

use std::os::raw::{c_int, c_longlong, c_uchar};

use tether::debug::{live_objects, ObjectType};
use tether::{Buffer, Device, Resource, Stream};
use tether_sys::tether_buffer_t;

extern "C" {
    fn side_current_host_handle() -> usize;
    fn side_make_buffer(size: usize, fill: c_uchar) -> *mut tether_buffer_t;
    fn side_take_buffer(handle: *mut tether_buffer_t, fill: c_uchar) -> c_int;
    fn side_install_statistics() -> usize;
    fn side_statistics_count() -> c_longlong;
    fn side_with_scoped_pool(callback: extern "C" fn(usize) -> c_int) -> c_int;
    fn side_drop_statistics();
    fn side_drop_buffers();
}

fn cpp_current() -> usize {
    // SAFETY: a plain extern "C" function of side.cpp; 0 means C++ failed.
    let h = unsafe { side_current_host_handle() };
    assert_ne!(h, 0, "C++ could not read the current host resource");
    h
}

/// Called by C++ while its scoped pool is pushed on this thread.
extern "C" fn inside_cpp_scope(pool_handle: usize) -> c_int {
    let seen = tether::current_resource(Device::Host).map(|r| r.as_raw() as usize);
    c_int::from(seen == Ok(pool_handle))
}

const STEPS: [&str; 5] = ["rust_pool", "rust_buffers", "cpp_buffers", "cpp_stats", "table"];

fn scenario(order: &[&str]) {
    drop(tether::current_resource(Device::Host).unwrap()); // the default exists before we count
    let baseline = live_objects(ObjectType::Any);

    // 1. Rust installs a pool; C++ sees it.
    let pool = Resource::pool(&Resource::host().unwrap())
        .initial_size(1 << 16)
        .build()
        .unwrap();
    let mut previous = tether::set_current_resource(Device::Host, Some(&pool)).unwrap();
    assert_eq!(cpp_current(), pool.as_raw() as usize);

    // 2. Buffers change hands both ways.
    // SAFETY: side_make_buffer returns +1 (or NULL on failure), which Rust takes over.
    let from_cpp = unsafe { Buffer::from_raw(side_make_buffer(100, 9)) }.expect("C++ made no buffer");
    assert!(from_cpp.as_slice().unwrap().iter().all(|&x| x == 9));
    assert!(from_cpp.resource().same_handle(&pool));
    let mut to_cpp = pool.buffer(50, Stream::DEFAULT).unwrap();
    to_cpp.as_mut_slice().unwrap().fill(4);
    // SAFETY: side_take_buffer takes the +1 that into_raw hands out.
    assert_eq!(unsafe { side_take_buffer(to_cpp.into_raw(), 4) }, 1);

    // 3. C++ installs a statistics adaptor; Rust sees it and allocates from it.
    // SAFETY: plain extern "C" calls.
    let stats_handle = unsafe { side_install_statistics() };
    assert_ne!(stats_handle, 0);
    assert_eq!(
        tether::current_resource(Device::Host).unwrap().as_raw() as usize,
        stats_handle
    );
    let from_stats = Buffer::from_current(Device::Host, 32, Stream::DEFAULT).unwrap();
    assert_eq!(unsafe { side_statistics_count() }, 1);

    // 4. Overrides nest across languages on this thread.
    {
        let mine = Resource::host().unwrap();
        let _guard = tether::push_current_resource(Device::Host, &mine).unwrap();
        assert_eq!(cpp_current(), mine.as_raw() as usize);
        assert_eq!(unsafe { side_with_scoped_pool(inside_cpp_scope) }, 1);
        assert_eq!(cpp_current(), mine.as_raw() as usize);
    }
    assert_eq!(cpp_current(), stats_handle);

    // 5. Release in the given order.
    let mut pool = Some(pool);
    let mut rust_buffers = Some((from_cpp, from_stats));
    for step in order {
        match *step {
            "rust_pool" => pool = None,
            "rust_buffers" => rust_buffers = None,
            "cpp_buffers" => unsafe { side_drop_buffers() },
            "cpp_stats" => unsafe { side_drop_statistics() },
            "table" => drop(tether::set_current_resource(Device::Host, previous.take().as_ref()).unwrap()),
            other => unreachable!("{other}"),
        }
        if let Some((b, _)) = &rust_buffers {
            assert_eq!(
                b.to_vec().unwrap(),
                vec![9; 100],
                "order {order:?}: a live buffer lost its memory"
            );
        }
    }
    assert!(pool.is_none() && rust_buffers.is_none());
    let after = live_objects(ObjectType::Any);
    assert_eq!(after, baseline, "order {order:?}: census {after}, expected {baseline}");
}

/// Every permutation of `items`.
fn permutations<'a>(items: &[&'a str]) -> Vec<Vec<&'a str>> {
    if items.len() <= 1 {
        return vec![items.to_vec()];
    }
    let mut all = Vec::new();
    for i in 0..items.len() {
        let mut rest = items.to_vec();
        let first = rest.remove(i);
        for mut tail in permutations(&rest) {
            tail.insert(0, first);
            all.push(tail);
        }
    }
    all
}

fn main() {
    tether::check_library().unwrap();
    let orders = permutations(&STEPS);
    for order in &orders {
        scenario(order);
    }
    println!(
        "rust<->c++: one table, {} release orders, census back to {} live handles",
        orders.len(),
        live_objects(ObjectType::Any)
    );
}
