//! The same checks over every host-usable resource built from Rust: many sizes
//! and alignments, zero size, concurrent threads, statistics consistency, and
//! the census back where it began.

use std::sync::Mutex;

use tether::debug::{live_objects, ObjectType};
use tether::{Resource, Stream};

static CENSUS: Mutex<()> = Mutex::new(());

fn resources() -> Vec<(&'static str, Resource)> {
    let host = Resource::host().unwrap();
    let pool = Resource::pool(&host).initial_size(1 << 20).build().unwrap();
    let stats_over_pool = Resource::statistics_adaptor(&pool).unwrap();
    let pool_over_stats = Resource::pool(&Resource::statistics_adaptor(&host).unwrap())
        .growth_size(64 << 10)
        .build()
        .unwrap();
    vec![
        ("host", host),
        ("pool", pool),
        ("statistics(pool)", stats_over_pool),
        ("pool(statistics)", pool_over_stats),
    ]
}

#[test]
fn sizes_and_alignments_round_trip() {
    let _g = CENSUS.lock().unwrap_or_else(|e| e.into_inner());
    let before = live_objects(ObjectType::Any);
    for (name, r) in resources() {
        let mut held = Vec::new();
        for (i, size) in [1usize, 7, 64, 255, 256, 4097, 1 << 16, 3 << 20]
            .into_iter()
            .enumerate()
        {
            for alignment in [0usize, 8, 256, 4096] {
                let p = r.allocate(size, alignment, Stream::DEFAULT).unwrap();
                assert!(!p.is_null(), "{name}: {size} bytes");
                let align = if alignment == 0 { 256 } else { alignment };
                assert_eq!(p as usize % align, 0, "{name}: {size} bytes aligned to {align}");
                // SAFETY: p is ours, `size` bytes of host memory.
                unsafe { p.write_bytes(i as u8, size) };
                held.push((p, size, alignment, i as u8));
            }
        }
        for (p, size, alignment, fill) in held {
            // SAFETY: reading our own allocation, then giving it back once.
            unsafe {
                assert_eq!(*p.add(size - 1), fill, "{name}: memory kept its contents");
                r.deallocate(p, size, alignment, Stream::DEFAULT).unwrap();
            }
        }
        assert!(
            r.allocate(0, 0, Stream::DEFAULT).unwrap().is_null(),
            "{name}: size 0 gives null"
        );
        // SAFETY: freeing null with size 0 is a no-op.
        unsafe { r.deallocate(std::ptr::null_mut(), 0, 0, Stream::DEFAULT) }.unwrap();
        if let Ok(s) = r.statistics() {
            assert_eq!((s.current_bytes, s.current_count), (0, 0), "{name}");
            assert_eq!(s.total_count, 32, "{name}");
        }
    }
    assert_eq!(live_objects(ObjectType::Any), before);
}

#[test]
fn concurrent_buffers_from_every_resource() {
    let _g = CENSUS.lock().unwrap_or_else(|e| e.into_inner());
    let before = live_objects(ObjectType::Any);
    for (name, r) in resources() {
        std::thread::scope(|s| {
            for t in 0..4u8 {
                let r = &r;
                s.spawn(move || {
                    for i in 0..200usize {
                        let mut b = r.buffer(1 + (i * 37) % 5000, Stream::DEFAULT).unwrap();
                        b.as_mut_slice().unwrap().fill(t);
                        assert!(b.as_slice().unwrap().iter().all(|&x| x == t), "{name}");
                    }
                });
            }
        });
        if let Ok(s) = r.statistics() {
            assert_eq!((s.current_bytes, s.total_count), (0, 800), "{name}");
        }
    }
    assert_eq!(live_objects(ObjectType::Any), before);
}
