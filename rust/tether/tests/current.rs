//! The current-resource table: get/set, if-unset, per-thread overrides (guards).
//! The table is process-wide, so these tests share one lock; `lock` is
//! irreversible and has its own test binary (tests/lock.rs).

use std::sync::Mutex;

use tether::{
    current_resource, push_current_resource, set_current_resource, set_current_resource_if_unset,
    with_current_resource, Buffer, Device, ErrorKind, Resource, Stream,
};

static TABLE: Mutex<()> = Mutex::new(());

fn table() -> std::sync::MutexGuard<'static, ()> {
    TABLE.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn set_returns_the_previous_resource_and_get_is_owned() {
    let _t = table();
    let pool = Resource::pool(&Resource::host().unwrap()).build().unwrap();
    let previous = set_current_resource(Device::Host, Some(&pool)).unwrap();
    let current = current_resource(Device::Host).unwrap();
    assert!(current.same_handle(&pool));
    let b = Buffer::from_current(Device::Host, 8, Stream::DEFAULT).unwrap();
    // Replacing the slot frees nothing under the holders of references.
    let back = set_current_resource(Device::Host, previous.as_ref()).unwrap().unwrap();
    assert!(back.same_handle(&pool));
    assert_eq!(current.name(), "pool");
    assert!(b.resource().same_handle(&pool));
    assert!(!current_resource(Device::Host).unwrap().same_handle(&pool));
}

#[test]
fn set_if_unset_never_overrides_the_application() {
    let _t = table();
    let app = Resource::host().unwrap();
    let lib = Resource::statistics_adaptor(&app).unwrap();
    let previous = set_current_resource(Device::Host, None).unwrap(); // unset
    assert!(set_current_resource_if_unset(Device::Host, &lib).unwrap());
    assert!(current_resource(Device::Host).unwrap().same_handle(&lib));
    set_current_resource(Device::Host, Some(&app)).unwrap();
    assert!(!set_current_resource_if_unset(Device::Host, &lib).unwrap());
    assert!(current_resource(Device::Host).unwrap().same_handle(&app));
    set_current_resource(Device::Host, previous.as_ref()).unwrap();
}

#[test]
fn a_pushed_override_is_seen_by_its_thread_only_and_popped_by_the_guard() {
    let _t = table();
    let process = current_resource(Device::Host).unwrap();
    let mine = Resource::pool(&Resource::host().unwrap()).build().unwrap();
    {
        let guard = push_current_resource(Device::Host, &mine).unwrap();
        assert_eq!(guard.device(), Device::Host);
        assert!(current_resource(Device::Host).unwrap().same_handle(&mine));
        let other = std::thread::spawn(|| current_resource(Device::Host).unwrap().as_raw() as usize)
            .join()
            .unwrap();
        assert_eq!(other, process.as_raw() as usize);
        // nested
        let inner = Resource::host().unwrap();
        let r = with_current_resource(Device::Host, &inner, || current_resource(Device::Host).unwrap()).unwrap();
        assert!(r.same_handle(&inner));
        assert!(current_resource(Device::Host).unwrap().same_handle(&mine));
    }
    assert!(current_resource(Device::Host).unwrap().same_handle(&process));
    // popping with nothing pushed is an error from C (the guard never does it twice)
    let e = unsafe { tether::sys::tether_current_resource_pop(tether::sys::TETHER_DEVICE_HOST) };
    assert_eq!(e, tether::sys::TETHER_ERROR_INVALID_ARGUMENT);
}

#[test]
fn the_override_is_popped_when_the_closure_panics() {
    let _t = table();
    let process = current_resource(Device::Host).unwrap();
    let mine = Resource::host().unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        with_current_resource(Device::Host, &mine, || panic!("boom")).unwrap()
    }));
    assert!(r.is_err());
    assert!(current_resource(Device::Host).unwrap().same_handle(&process));
}

#[test]
fn bad_devices_and_unusable_memory_are_refused() {
    let _t = table();
    let e = current_resource(Device::Cuda(-7)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    if let Ok(dev) = Resource::cuda(0) {
        // device-only memory in the host slot
        let e = set_current_resource(Device::Host, Some(&dev)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    }
}

#[test]
fn the_current_device_slot_without_a_gpu_says_why() {
    let _t = table();
    let host = Resource::host().unwrap();
    match tether::cuda::device_count() {
        Ok(n) => {
            let name = tether::cuda::device_name(0).unwrap();
            assert!(!name.is_empty() && !name.contains('\0'), "{name:?}");
            let e = tether::cuda::device_name(n).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
            // With a GPU: host memory does not suit a device slot.
            let e = push_current_resource(Device::Current, &host).err().unwrap();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        }
        Err(no_device) => {
            assert_eq!(no_device.kind(), ErrorKind::NoDevice);
            assert!(!no_device.message().is_empty());
            let e = tether::cuda::device_name(0).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::NoDevice, "{e}");
            let e = Buffer::from_current(Device::Current, 16, Stream::DEFAULT).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::NoDevice, "{e}");
            assert!(push_current_resource(Device::Current, &host).is_err());
            // The host slot is untouched by all of that.
            assert_eq!(current_resource(Device::Host).unwrap().name(), "host");
        }
    }
}
