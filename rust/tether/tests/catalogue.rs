//! The catalogue's constructors (issue #15): each type built over host memory,
//! its behaviour a user relies on, its queries, its errors; closures and trait
//! objects handed to C are freed exactly once and never unwind into C.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tether::debug::{live_objects, ObjectType};
use tether::{CallbackMemory, Error, ErrorKind, Resource, ResourceKind, Stream};

/// The census is process-wide; tests that read it run one at a time.
static CENSUS: Mutex<()> = Mutex::new(());

fn census() -> std::sync::MutexGuard<'static, ()> {
    CENSUS.lock().unwrap_or_else(|e| e.into_inner())
}

const S: Stream = Stream::DEFAULT;

#[test]
fn arena_fixed_size_binning_allocate_and_report() {
    let _g = census();
    let host = Resource::host().unwrap();

    let arena = Resource::arena(&host)
        .arena_size(4 << 20)
        .superblock_size(1 << 20)
        .build()
        .unwrap();
    assert_eq!(arena.kind().unwrap(), ResourceKind::Arena);
    assert!(arena.upstream().unwrap().unwrap().same_handle(&host));
    let b = arena.buffer(1000, S).unwrap();
    let info = arena.arena_info().unwrap();
    assert_eq!(info.arena_size, 4 << 20);
    assert_eq!(info.superblock_size, 1 << 20);
    drop(b);
    let e = Resource::arena(&host).superblock_size(3).build().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.message().contains("superblock_size"), "{e}");

    let fixed = Resource::fixed_size(&host)
        .block_size(4096)
        .blocks_to_preallocate(4)
        .build()
        .unwrap();
    assert_eq!(fixed.kind().unwrap(), ResourceKind::FixedSize);
    let b = fixed.buffer(100, S).unwrap();
    let i = fixed.fixed_size_info().unwrap();
    assert_eq!((i.block_size, i.total_blocks, i.free_blocks), (4096, 4, 3));
    drop(b);
    assert_eq!(fixed.fixed_size_info().unwrap().free_blocks, 4);
    let e = Resource::fixed_size(&host).block_size(0).build().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.message().contains("block_size"), "{e}");

    let stats = Resource::statistics_adaptor(&host).unwrap();
    let bins = Resource::binning(&host)
        .min_size_exponent(8)
        .max_size_exponent(10)
        .fallback(&stats)
        .build()
        .unwrap();
    assert_eq!(bins.kind().unwrap(), ResourceKind::Binning);
    assert_eq!(bins.binning_bin_sizes().unwrap(), vec![256, 512, 1024]);
    bins.binning_add_bin(1 << 16, Some(&fixed)).unwrap();
    bins.binning_add_bin(1 << 12, None).unwrap();
    let info = bins.binning_info().unwrap();
    assert_eq!((info.bin_count, info.smallest_bin, info.largest_bin), (5, 256, 1 << 16));
    // Above every bin: the fallback serves it.
    let big = bins.buffer(1 << 20, S).unwrap();
    assert_eq!(stats.statistics().unwrap().current_bytes, 1 << 20);
    drop(big);
    let e = Resource::binning(&host)
        .min_size_exponent(12)
        .max_size_exponent(8)
        .build()
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    // Queries of the wrong kind say so.
    assert_eq!(host.binning_info().unwrap_err().kind(), ErrorKind::NotSupported);
    assert_eq!(host.arena_info().unwrap_err().kind(), ErrorKind::NotSupported);
    assert_eq!(host.fixed_size_info().unwrap_err().kind(), ErrorKind::NotSupported);
    assert_eq!(
        host.binning_add_bin(256, None).unwrap_err().kind(),
        ErrorKind::NotSupported
    );
}

#[test]
fn limiting_refuses_beyond_its_limit() {
    let _g = census();
    let host = Resource::host().unwrap();
    let lim = Resource::limiting_adaptor(&host, 4096).unwrap();
    assert_eq!(lim.kind().unwrap(), ResourceKind::Limiting);
    assert_eq!(lim.limiting_limit().unwrap(), 4096);
    let a = lim.buffer(3000, S).unwrap();
    assert_eq!(lim.limiting_used_bytes().unwrap(), 3000);
    assert_eq!(lim.buffer(2000, S).unwrap_err().kind(), ErrorKind::OutOfMemory);
    drop(a);
    assert_eq!(lim.limiting_used_bytes().unwrap(), 0);
    lim.buffer(4096, S).unwrap();
    assert_eq!(host.limiting_limit().unwrap_err().kind(), ErrorKind::NotSupported);
}

#[test]
fn tracking_lists_outstanding_allocations_and_reports() {
    let _g = census();
    let host = Resource::host().unwrap();
    let t = Resource::tracking_adaptor(&host).build().unwrap();
    assert_eq!(t.kind().unwrap(), ResourceKind::Tracking);
    assert!(t.tracking_outstanding().unwrap().is_empty());
    let a = t.buffer(4096, S).unwrap();
    let b = t.buffer(1024, S).unwrap();
    let recs = t.tracking_outstanding().unwrap();
    assert_eq!(recs.len(), 2);
    assert_eq!((recs[0].size, recs[1].size), (4096, 1024));
    assert!(recs[0].sequence < recs[1].sequence);
    assert_eq!(recs[0].ptr, a.as_ptr());
    let report = t.tracking_report().unwrap();
    assert!(report.contains("2 outstanding allocations"), "{report}");
    assert!(report.contains("size=4096") && report.contains("size=1024"), "{report}");
    assert_eq!(t.tracking_stack(recs[0].ptr).unwrap(), "");
    assert_eq!(
        t.tracking_stack(std::ptr::null()).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    drop((a, b));
    assert!(t.tracking_outstanding().unwrap().is_empty());
    assert_eq!(host.tracking_report().unwrap_err().kind(), ErrorKind::NotSupported);

    let ts = Resource::tracking_adaptor(&host).capture_stacks(true).build().unwrap();
    let c = ts.buffer(64, S).unwrap();
    let rec = ts.tracking_outstanding().unwrap()[0];
    assert!(rec.stack_depth > 0);
    assert!(!ts.tracking_stack(rec.ptr).unwrap().is_empty());
    drop(c);
}

#[test]
fn logging_writes_a_file_and_calls_the_closure() {
    let _g = census();
    let host = Resource::host().unwrap();
    let path = std::env::temp_dir().join(format!("tether-rust-log-{}.csv", std::process::id()));
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = Arc::clone(&lines);
    let log = Resource::logging_adaptor(&host)
        .path(&path)
        .callback(move |l| sink.lock().unwrap().push(l.to_owned()))
        .build()
        .unwrap();
    assert_eq!(log.kind().unwrap(), ResourceKind::Logging);
    drop(log.buffer(123, S).unwrap());
    log.logging_flush().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.starts_with("time_ns,thread,action,pointer,size,stream,status"),
        "{text}"
    );
    assert!(
        text.contains(",allocate,") && text.contains(",free,") && text.contains(",123,"),
        "{text}"
    );
    {
        let got = lines.lock().unwrap();
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(
            got[1].contains(",allocate,") && got[1].ends_with("TETHER_OK"),
            "{got:?}"
        );
    }
    // The adaptor owns the closure: dropping it frees the closure (and its Arc).
    assert_eq!(Arc::strong_count(&lines), 2);
    drop(log);
    assert_eq!(Arc::strong_count(&lines), 1);
    std::fs::remove_file(&path).unwrap();

    // Neither path nor callback; an unopenable path: errors naming the argument,
    // and a closure given to a failed build is freed.
    assert_eq!(
        Resource::logging_adaptor(&host).build().unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    let e = Resource::logging_adaptor(&host)
        .path("/nonexistent-dir/x.csv")
        .callback({
            let l = Arc::clone(&lines);
            move |_| drop(l.lock())
        })
        .build()
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.message().contains("/nonexistent-dir/x.csv"), "{e}");
    assert_eq!(Arc::strong_count(&lines), 1);

    // A panicking callback never unwinds into C.
    let log = Resource::logging_adaptor(&host)
        .callback(|_| panic!("boom"))
        .build()
        .unwrap();
    drop(log.buffer(8, S).unwrap());
}

#[test]
fn failure_callback_retries_and_is_freed() {
    let _g = census();
    let host = Resource::host().unwrap();
    let lim = Resource::limiting_adaptor(&host, 1024).unwrap();
    let held = Arc::new(Mutex::new(Some(lim.buffer(1000, S).unwrap())));
    let calls = Arc::new(AtomicUsize::new(0));
    let (h, c) = (Arc::clone(&held), Arc::clone(&calls));
    let fc = Resource::failure_callback_adaptor(&lim, move |size| {
        c.fetch_add(1, Ordering::SeqCst);
        assert_eq!(size, 500);
        // Spill: free what we hold, ask for a retry (once).
        h.lock().unwrap().take().is_some()
    })
    .unwrap();
    assert_eq!(fc.kind().unwrap(), ResourceKind::FailureCallback);
    let b = fc.buffer(500, S).unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert!(held.lock().unwrap().is_none());
    // Nothing left to spill: the callback says no, the allocation fails.
    assert_eq!(fc.buffer(1000, S).unwrap_err().kind(), ErrorKind::OutOfMemory);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    drop(b);
    drop(fc);
    assert_eq!(Arc::strong_count(&calls), 1, "the adaptor dropped the closure");

    // A panicking callback counts as "no retry" and never unwinds into C.
    let fc = Resource::failure_callback_adaptor(&lim, |_| panic!("boom")).unwrap();
    assert_eq!(fc.buffer(4096, S).unwrap_err().kind(), ErrorKind::OutOfMemory);
}

#[test]
fn aligned_and_prefetch_adaptors() {
    let _g = census();
    let host = Resource::host().unwrap();
    let al = Resource::aligned_adaptor(&host)
        .alignment(4096)
        .threshold(1024)
        .build()
        .unwrap();
    assert_eq!(al.kind().unwrap(), ResourceKind::Aligned);
    let o = al.aligned_options().unwrap();
    assert_eq!((o.alignment, o.threshold), (4096, 1024));
    for _ in 0..8 {
        let p = al.allocate(2000, 0, S).unwrap();
        assert_eq!(p as usize % 4096, 0);
        // SAFETY: allocated above with the same size and alignment.
        unsafe { al.deallocate(p, 2000, 0, S) }.unwrap();
    }
    let e = Resource::aligned_adaptor(&host).alignment(3).build().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.message().contains("alignment"), "{e}");
    assert_eq!(host.aligned_options().unwrap_err().kind(), ErrorKind::NotSupported);

    // Prefetch needs managed memory: over host memory it says so, naming the argument.
    let e = Resource::prefetch_adaptor(&host).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.message().contains("upstream"), "{e}");
    match Resource::managed(0) {
        Ok(m) => match Resource::prefetch_adaptor(&m) {
            Ok(p) => {
                assert_eq!(p.kind().unwrap(), ResourceKind::Prefetch);
                drop(p.buffer(1 << 20, S).unwrap());
            }
            // A device without concurrent managed access cannot prefetch.
            Err(e) => assert_eq!(e.kind(), ErrorKind::NotSupported, "{e}"),
        },
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::NoDevice, "{e}");
            eprintln!("skipped the managed prefetch check: {e}");
        }
    }
}

/// Rust heap memory behind the C vtable, counting calls and its own drop.
struct Heap {
    live: Arc<AtomicUsize>,
    dropped: Arc<AtomicUsize>,
    fail_above: usize,
}

impl CallbackMemory for Heap {
    fn allocate(&self, size: usize, alignment: usize, _: Stream) -> tether::Result<*mut u8> {
        if size == 13 {
            panic!("unlucky size");
        }
        if size > self.fail_above {
            return Err(Error::from_kind(ErrorKind::OutOfMemory, "heap quota reached"));
        }
        let layout = std::alloc::Layout::from_size_align(size, alignment).unwrap();
        self.live.fetch_add(1, Ordering::SeqCst);
        // SAFETY: size is never 0.
        Ok(unsafe { std::alloc::alloc(layout) })
    }

    fn deallocate(&self, p: *mut u8, size: usize, alignment: usize, _: Stream) -> tether::Result<()> {
        let layout = std::alloc::Layout::from_size_align(size, alignment).unwrap();
        self.live.fetch_sub(1, Ordering::SeqCst);
        // SAFETY: tether passes back only what allocate handed out, with its layout.
        unsafe { std::alloc::dealloc(p, layout) };
        Ok(())
    }
}

impl Drop for Heap {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn callback_resource_runs_rust_code_and_is_destroyed_once() {
    let _g = census();
    let before = live_objects(ObjectType::Any);
    let live = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicUsize::new(0));
    let r = Resource::callback(Heap {
        live: Arc::clone(&live),
        dropped: Arc::clone(&dropped),
        fail_above: 1 << 20,
    })
    .build()
    .unwrap();
    assert_eq!(r.kind().unwrap(), ResourceKind::Callback);
    assert_eq!(r.name(), "callback");
    assert!(r.properties().unwrap().host_accessible);

    let mut b = r.buffer(4096, S).unwrap();
    b.as_mut_slice().unwrap().fill(9);
    assert_eq!(live.load(Ordering::SeqCst), 1);
    // A pool over it works like over any resource.
    let pool = Resource::pool(&r).initial_size(1 << 16).build().unwrap();
    drop(pool.buffer(100, S).unwrap());

    // The error's kind and message reach the caller.
    let e = r.buffer(2 << 20, S).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfMemory);
    assert!(e.message().contains("heap quota reached"), "{e}");
    // A panic is caught at the boundary and reported.
    let e = r.buffer(13, S).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Internal);
    assert!(e.message().contains("panicked"), "{e}");
    // Frees tether did not hand out never reach deallocate.
    let mut x = 0u8;
    // SAFETY: refused by tether before anything is touched.
    let e = unsafe { r.deallocate(&mut x, 1, 1, S) }.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);

    // The resource lives until its last allocation is gone, then drops the value once.
    drop(r);
    drop(pool);
    assert_eq!(dropped.load(Ordering::SeqCst), 0);
    drop(b);
    assert_eq!(live.load(Ordering::SeqCst), 0);
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
    assert_eq!(live_objects(ObjectType::Any), before);

    // A device below TETHER_DEVICE_HOST is refused; the value is dropped, not leaked.
    let e = Resource::callback(Heap {
        live: Arc::clone(&live),
        dropped: Arc::clone(&dropped),
        fail_above: 0,
    })
    .device(tether::Device::Cuda(-7))
    .build()
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert_eq!(dropped.load(Ordering::SeqCst), 2);
}

#[test]
fn statistics_counter_stack_push_pop() {
    let _g = census();
    let host = Resource::host().unwrap();
    let st = Resource::statistics_adaptor(&host).unwrap();
    let a = st.buffer(1000, S).unwrap();
    st.push_counters().unwrap();
    assert_eq!(st.statistics().unwrap().current_bytes, 0);
    let b = st.buffer(300, S).unwrap();
    assert_eq!(st.statistics().unwrap().current_bytes, 300);
    let popped = st.pop_counters().unwrap();
    assert_eq!((popped.current_bytes, popped.total_count), (300, 1));
    let s = st.statistics().unwrap();
    assert_eq!((s.current_bytes, s.total_count, s.peak_bytes), (1300, 2, 1300));
    let e = st.pop_counters().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert_eq!(host.push_counters().unwrap_err().kind(), ErrorKind::NotSupported);
    drop((a, b));
}

#[test]
fn specs_build_stacks_and_round_trip() {
    let _g = census();
    let r = Resource::from_spec("statistics(pool(host, initial_size=1MiB))").unwrap();
    assert_eq!(r.kind().unwrap(), ResourceKind::Statistics);
    let pool = r.upstream().unwrap().unwrap();
    assert_eq!(pool.pool_info().unwrap().pool_size, 1 << 20);
    let spec = r.spec().unwrap();
    assert!(spec.starts_with("statistics(pool(host"), "{spec}");
    let again = Resource::from_spec(&spec).unwrap();
    assert_eq!(again.spec().unwrap(), spec);

    let built = Resource::limiting_adaptor(&Resource::host().unwrap(), 4096).unwrap();
    let spec = built.spec().unwrap();
    assert!(
        spec.contains("limiting") && (spec.contains("4096") || spec.contains("4KiB")),
        "{spec}"
    );
    assert_eq!(Resource::from_spec(&spec).unwrap().limiting_limit().unwrap(), 4096);

    let e = Resource::from_spec("pool(host, initial=1)").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.message().contains("initial"), "{e}");
    assert_eq!(
        Resource::from_spec("ho\0st").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn catalogue_over_a_cuda_upstream() {
    let _g = census();
    let cuda = match Resource::cuda(0) {
        Ok(r) => r,
        Err(e) => {
            // No GPU here: say why and skip, as the other GPU tests do.
            assert_eq!(e.kind(), ErrorKind::NoDevice, "{e}");
            eprintln!("skipped: {e}");
            return;
        }
    };
    let stack = [
        Resource::arena(&cuda).build().unwrap(),
        Resource::binning(&cuda)
            .min_size_exponent(8)
            .max_size_exponent(12)
            .build()
            .unwrap(),
        Resource::fixed_size(&cuda).block_size(1 << 16).build().unwrap(),
        Resource::limiting_adaptor(&cuda, 1 << 30).unwrap(),
        Resource::tracking_adaptor(&cuda).build().unwrap(),
        Resource::logging_adaptor(&cuda).callback(|_| ()).build().unwrap(),
        Resource::failure_callback_adaptor(&cuda, |_| false).unwrap(),
        Resource::aligned_adaptor(&cuda).alignment(4096).build().unwrap(),
    ];
    for r in &stack {
        let p = r.properties().unwrap();
        assert!(p.device_accessible && !p.host_accessible, "{}", r.name());
        let b = r.buffer(1000, S).unwrap();
        assert!(
            b.as_slice().is_err(),
            "device memory is not a host slice ({})",
            r.name()
        );
    }
}

#[test]
fn rust_callbacks_run_on_many_threads_at_once() {
    let _g = census();
    let live = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicUsize::new(0));
    let heap = Resource::callback(Heap {
        live: Arc::clone(&live),
        dropped: Arc::clone(&dropped),
        fail_above: 1 << 20,
    })
    .build()
    .unwrap();
    let lines = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&lines);
    let log = Resource::logging_adaptor(&heap)
        .callback(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    drop(heap);
    std::thread::scope(|s| {
        for t in 0..4 {
            let log = &log;
            s.spawn(move || {
                for i in 0..200 {
                    let b = log.buffer(64 + t * 8 + i, S).unwrap();
                    drop(b);
                }
            });
        }
    });
    // The header line, then one allocate and one free line per buffer.
    assert_eq!(lines.load(Ordering::SeqCst), 1 + 2 * 4 * 200);
    assert_eq!(live.load(Ordering::SeqCst), 0);
    drop(log);
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        1,
        "the stack is gone, the Rust value dropped once"
    );
    assert_eq!(Arc::strong_count(&lines), 1);
}

#[test]
fn sizes_read_as_specs_read_them() {
    use tether::{parse_size, Device};
    assert_eq!(parse_size("64 MiB", Device::Host).unwrap(), 64 << 20);
    assert_eq!(parse_size(" 1.5GiB ", Device::Host).unwrap(), 3 << 29);
    assert_eq!(parse_size("100 MB", Device::Host).unwrap(), 100_000_000);
    let e = parse_size("12 parsecs", Device::Host).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.message().contains("unknown unit 'parsecs'"), "{e}");
    let e = parse_size("80%", Device::Host).unwrap_err();
    assert!(e.message().contains("share of a device's memory"), "{e}");
    assert_eq!(
        parse_size("1\0", Device::Host).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}
