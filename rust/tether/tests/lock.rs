//! Locking a slot is irreversible for the process: its own test binary.

use tether::{
    current_resource, is_current_resource_locked, lock_current_resource, push_current_resource, set_current_resource,
    set_current_resource_if_unset, Device, ErrorKind, Resource,
};

#[test]
fn a_locked_slot_refuses_set_and_push_from_everyone() {
    let pool = Resource::pool(&Resource::host().unwrap()).build().unwrap();
    set_current_resource(Device::Host, Some(&pool)).unwrap();
    assert!(!is_current_resource_locked(Device::Host).unwrap());
    lock_current_resource(Device::Host).unwrap();
    assert!(is_current_resource_locked(Device::Host).unwrap());
    let other = Resource::host().unwrap();
    let e = set_current_resource(Device::Host, Some(&other)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Locked);
    assert!(!e.message().is_empty());
    assert_eq!(
        push_current_resource(Device::Host, &other).err().unwrap().kind(),
        ErrorKind::Locked
    );
    assert!(!set_current_resource_if_unset(Device::Host, &other).unwrap());
    assert!(current_resource(Device::Host).unwrap().same_handle(&pool));
}
