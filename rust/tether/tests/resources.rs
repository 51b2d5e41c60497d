//! Resources: construction, properties, errors with code and message, refcounting.

use std::sync::Mutex;

use tether::debug::{live_objects, ObjectType};
use tether::{Device, ErrorKind, Resource, ResourceKind, Stream};

/// The census is process-wide; tests that read it run one at a time.
static CENSUS: Mutex<()> = Mutex::new(());

fn census() -> std::sync::MutexGuard<'static, ()> {
    CENSUS.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn library_matches_bindings() {
    let _g = census();
    tether::check_library().unwrap();
    assert_eq!(tether::abi_version(), tether::sys::TETHER_ABI_VERSION);
    assert_eq!(tether::version_string().split('.').count(), 3);
}

#[test]
fn host_pool_statistics_have_their_kinds_and_upstreams() {
    let _g = census();
    let host = Resource::host().unwrap();
    let pool = Resource::pool(&host).initial_size(1 << 20).build().unwrap();
    let stats = Resource::statistics_adaptor(&pool).unwrap();

    let p = host.properties().unwrap();
    assert_eq!(p.kind, ResourceKind::Host);
    assert_eq!(p.device, Device::Host);
    assert!(p.host_accessible);
    assert!(!p.device_accessible);
    assert_eq!(pool.kind().unwrap(), ResourceKind::Pool);
    assert_eq!(stats.kind().unwrap(), ResourceKind::Statistics);
    assert_eq!((host.name(), pool.name(), stats.name()), ("host", "pool", "statistics"));

    assert!(host.upstream().unwrap().is_none());
    assert!(pool.upstream().unwrap().unwrap().same_handle(&host));
    assert!(stats.upstream().unwrap().unwrap().same_handle(&pool));
    assert!(pool.pool_info().unwrap().pool_size >= 1 << 20);
}

#[test]
fn builder_errors_carry_code_and_message() {
    let _g = census();
    let host = Resource::host().unwrap();
    let e = Resource::pool(&host)
        .initial_size(2 << 20)
        .maximum_size(1 << 20)
        .build()
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert_eq!(e.code(), tether::sys::TETHER_ERROR_INVALID_ARGUMENT);
    assert_eq!(e.code_name(), "TETHER_ERROR_INVALID_ARGUMENT");
    assert!(e.message().contains("initial_size"), "message names the argument: {e}");
    assert!(e.to_string().starts_with("TETHER_ERROR_INVALID_ARGUMENT: "), "{e}");
}

#[test]
fn kind_specific_queries_refuse_other_kinds() {
    let _g = census();
    let host = Resource::host().unwrap();
    assert_eq!(host.statistics().unwrap_err().kind(), ErrorKind::NotSupported);
    assert_eq!(host.pool_info().unwrap_err().kind(), ErrorKind::NotSupported);
    assert_eq!(
        host.reset_peak_statistics().unwrap_err().kind(),
        ErrorKind::NotSupported
    );
    host.trim().unwrap(); // a no-op for resources that hold nothing
}

#[test]
fn statistics_count_what_passes_through() {
    let _g = census();
    let host = Resource::host().unwrap();
    let stats = Resource::statistics_adaptor(&host).unwrap();
    let a = stats.buffer(1000, Stream::DEFAULT).unwrap();
    let b = stats.buffer(24, Stream::DEFAULT).unwrap();
    let s = stats.statistics().unwrap();
    assert_eq!((s.current_bytes, s.current_count, s.total_count), (1024, 2, 2));
    drop(a);
    let s = stats.statistics().unwrap();
    assert_eq!((s.current_bytes, s.peak_bytes, s.current_count), (24, 1024, 1));
    stats.reset_peak_statistics().unwrap();
    assert_eq!(stats.statistics().unwrap().peak_bytes, 24);
    drop(b);
}

#[test]
fn raw_allocate_and_checked_deallocate() {
    let _g = census();
    let host = Resource::host().unwrap();
    let p = host.allocate(100, 64, Stream::DEFAULT).unwrap();
    assert!(!p.is_null());
    assert_eq!(p as usize % 64, 0);
    // A wrong size is refused with the memory untouched; the right one frees.
    let e = unsafe { host.deallocate(p, 99, 64, Stream::DEFAULT) }.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    unsafe { host.deallocate(p, 100, 64, Stream::DEFAULT) }.unwrap();
    // A second free of the same pointer is refused.
    let e = unsafe { host.deallocate(p, 100, 64, Stream::DEFAULT) }.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(host.allocate(0, 0, Stream::DEFAULT).unwrap().is_null());
    assert_eq!(
        host.allocate(8, 3, Stream::DEFAULT).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn clone_retains_and_drop_releases_in_any_order() {
    let _g = census();
    let before = live_objects(ObjectType::Resource);
    let host = Resource::host().unwrap();
    let pool = Resource::pool(&host).build().unwrap();
    let pool2 = pool.clone();
    assert!(pool2.same_handle(&pool));
    assert_eq!(live_objects(ObjectType::Resource), before + 2);
    drop(host); // the pool keeps its upstream alive
    drop(pool);
    let buf = pool2.buffer(10, Stream::DEFAULT).unwrap();
    drop(pool2); // the buffer keeps the pool alive
    assert_eq!(live_objects(ObjectType::Resource), before + 2);
    assert_eq!(buf.resource().upstream().unwrap().unwrap().name(), "host");
    drop(buf);
    assert_eq!(live_objects(ObjectType::Resource), before);
}

#[test]
fn raw_handles_round_trip_and_stale_ones_are_errors() {
    let _g = census();
    let host = Resource::host().unwrap();
    let raw = host.clone().into_raw();
    let again = Resource::from_handle(raw).unwrap(); // +1 more
    assert!(again.same_handle(&host));
    drop(again);
    // SAFETY: `raw` carries the +1 from into_raw.
    drop(unsafe { Resource::from_raw(raw) }.unwrap());
    let raw = host.as_raw();
    drop(host);
    let e = Resource::from_handle(raw).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidHandle);
    assert!(e.message().contains("from_handle: resource 0x"), "{e}");
}

#[test]
fn cuda_resources_fail_cleanly_without_a_device() {
    let _g = census();
    // With a GPU these succeed; without one they say why, never crash.
    for r in [
        Resource::cuda(0),
        Resource::managed(0),
        Resource::pinned_host(0),
        Resource::cuda_async(0).release_threshold(1 << 20).build(),
        // SAFETY: None names the device's current pool, nothing the caller must keep alive.
        unsafe { Resource::async_view(0, None) },
    ] {
        match r {
            Ok(r) => assert!(r.properties().unwrap().device_accessible),
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::NoDevice, "{e}");
                assert!(!e.message().is_empty());
            }
        }
    }
    assert!(matches!(
        Resource::cuda(-5).map(|_| ()).unwrap_err().kind(),
        ErrorKind::InvalidArgument | ErrorKind::NoDevice
    ));
    // Kinds a GPU may lack (pageable memory access; a CUDA 13 driver): NotSupported there.
    for r in [
        Resource::system(0),
        Resource::sam_headroom(0, 1 << 30),
        Resource::managed_async(0),
    ] {
        match r {
            Ok(r) => assert!(r.properties().unwrap().host_accessible),
            Err(e) => {
                assert!(matches!(e.kind(), ErrorKind::NoDevice | ErrorKind::NotSupported), "{e}");
                assert!(!e.message().is_empty());
            }
        }
    }
}

#[test]
fn resources_are_shared_across_threads() {
    let _g = census();
    let before = live_objects(ObjectType::Any);
    let pool = Resource::pool(&Resource::host().unwrap()).build().unwrap();
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let pool = pool.clone();
            std::thread::spawn(move || {
                let bufs: Vec<_> = (0..100)
                    .map(|j| pool.buffer(16 + i * 100 + j, Stream::DEFAULT).unwrap())
                    .collect();
                bufs // dropped on the main thread
            })
        })
        .collect();
    drop(pool);
    let all: Vec<_> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
    assert_eq!(all.len(), 400);
    drop(all);
    assert_eq!(live_objects(ObjectType::Any), before);
}

#[test]
fn handles_are_send_and_sync_where_c_makes_calls_thread_safe() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Resource>();
    send_sync::<tether::Buffer>();
    send_sync::<tether::Error>();
    send_sync::<tether::HostSlice<'static>>();
}

#[test]
fn an_error_keeps_its_own_message_whatever_fails_later_or_elsewhere() {
    let _g = census();
    let host = Resource::host().unwrap();
    let first = Resource::pool(&host)
        .initial_size(2 << 20)
        .maximum_size(1 << 20)
        .build()
        .unwrap_err();
    let text = first.message().to_string();
    // Another failure on this thread, and failures on another thread, change nothing in `first`.
    let second = host.allocate(8, 3, Stream::DEFAULT).unwrap_err();
    let other = std::thread::spawn(|| tether::current_resource(Device::Cuda(-9)).unwrap_err())
        .join()
        .unwrap();
    assert_eq!(first.message(), text);
    assert_ne!(second.message(), text);
    assert!(second.message().contains("alignment"), "{second}");
    assert_ne!(other.message(), second.message());
}

#[test]
fn every_kind_value_maps_to_its_variant_and_unknown_ones_are_kept() {
    use tether::sys;
    // ResourceKind is generated from the registry (capi/kinds.json): every C value
    // of tether_resource_kind maps to one variant and back.
    // The C values run from 1 without a gap: each one is a known variant, the next one is not.
    let n = ResourceKind::ALL.len() as u32;
    assert!(n >= 19, "{n} kinds");
    for raw in 1..=n {
        assert!(!matches!(ResourceKind::from_raw(raw), ResourceKind::Other(_)), "{raw}");
    }
    assert_eq!(ResourceKind::from_raw(n + 1), ResourceKind::Other(n + 1));
    let mut seen = std::collections::HashSet::new();
    for &kind in ResourceKind::ALL {
        let raw = kind.to_raw();
        assert!(seen.insert(raw), "{kind:?}: value {raw} used twice");
        assert_eq!(ResourceKind::from_raw(raw), kind);
        assert!(kind.name().is_some_and(|n| !n.is_empty()), "{kind:?}");
    }
    assert_eq!(
        ResourceKind::from_raw(sys::TETHER_RESOURCE_KIND_HOST),
        ResourceKind::Host
    );
    assert_eq!(
        ResourceKind::from_raw(sys::TETHER_RESOURCE_KIND_CALLBACK),
        ResourceKind::Callback
    );
    assert_eq!(ResourceKind::from_raw(1000), ResourceKind::Other(1000));
    assert_eq!(ResourceKind::Other(1000).to_raw(), 1000);
    assert_eq!(ResourceKind::Other(1000).name(), None);
    assert_eq!(tether::ErrorKind::from_code(77), tether::ErrorKind::Other(77));
}

#[test]
fn a_resources_kind_names_what_the_library_calls_it() {
    let _g = census();
    let host = Resource::host().unwrap();
    let pool = Resource::pool(&host).build().unwrap();
    for r in [&host, &pool] {
        assert_eq!(r.kind().unwrap().name(), Some(r.name()));
    }
}

#[test]
fn pool_info_counts_free_blocks() {
    let _g = census();
    let host = Resource::host().unwrap();
    let pool = Resource::pool(&host).initial_size(1 << 20).build().unwrap();
    let a = pool.allocate(4096, 0, Stream::DEFAULT).unwrap();
    let b = pool.allocate(4096, 0, Stream::DEFAULT).unwrap();
    let c = pool.allocate(4096, 0, Stream::DEFAULT).unwrap();
    // One free block: the tail.
    assert_eq!(pool.pool_info().unwrap().free_blocks, 1);
    // SAFETY: b came from this pool with these arguments and is not used again.
    unsafe { pool.deallocate(b, 4096, 0, Stream::DEFAULT).unwrap() };
    let i = pool.pool_info().unwrap();
    // Two: the hole and the tail.
    assert_eq!((i.free_blocks, i.free_bytes), (2, (1 << 20) - 2 * 4096));
    // SAFETY: as above.
    unsafe {
        pool.deallocate(a, 4096, 0, Stream::DEFAULT).unwrap();
        pool.deallocate(c, 4096, 0, Stream::DEFAULT).unwrap();
    }
    // Coalesced into one again.
    assert_eq!(pool.pool_info().unwrap().free_blocks, 1);
}
