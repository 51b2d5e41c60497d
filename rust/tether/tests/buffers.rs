//! Buffers: host slices (pinned, exclusive for writes), copies, resize, ownership.

use tether::{Buffer, Device, ErrorKind, Resource, Stream};

fn host_buffer(size: usize) -> Buffer {
    Resource::host().unwrap().buffer(size, Stream::DEFAULT).unwrap()
}

#[test]
fn host_memory_reads_and_writes_as_slices() {
    let mut b = host_buffer(256);
    assert_eq!(b.len(), 256);
    {
        let mut s = b.as_mut_slice().unwrap();
        for (i, x) in s.iter_mut().enumerate() {
            *x = i as u8;
        }
    }
    let s = b.as_slice().unwrap();
    assert_eq!(s.len(), 256);
    assert_eq!(s[255], 255);
    assert_eq!(b.to_vec().unwrap(), (0..=255u8).collect::<Vec<_>>());
    let info = b.info();
    assert!(info.host_accessible && !info.device_accessible);
    assert_eq!(info.device, Device::Host);
    assert_eq!(info.ptr, b.as_ptr());
    assert_eq!(b.as_ptr() as usize % 256, 0);
}

#[test]
fn a_slice_pins_the_buffer_against_resize_from_any_handle() {
    let b = host_buffer(64);
    let mut other = b.clone(); // another owner, as another language would hold
    {
        let s = b.as_slice().unwrap();
        assert_eq!(b.pin_count(), 1);
        let e = other.resize(128).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert_eq!(s.len(), 64);
    }
    assert_eq!(b.pin_count(), 0);
    other.resize(128).unwrap();
    assert_eq!(b.len(), 128);
}

#[test]
fn writes_need_no_live_rust_clones() {
    let mut b = host_buffer(16);
    let c = b.clone();
    let e = b.as_mut_slice().err().unwrap();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.message().contains("as_mut_slice"), "{e}");
    assert_eq!(
        b.copy_from_host(0, &[1, 2]).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    drop(c);
    b.copy_from_host(0, &[1, 2]).unwrap();
    b.as_mut_slice().unwrap()[2] = 3;
    assert_eq!(&b.to_vec().unwrap()[..3], &[1, 2, 3]);
}

#[test]
fn copies_check_their_ranges() {
    let mut a = host_buffer(8);
    let b = host_buffer(8);
    a.copy_from_host(0, &[9; 8]).unwrap();
    let e = a.copy_from_host(4, &[0; 8]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    let mut out = [0u8; 4];
    assert_eq!(
        b.copy_to_host(6, &mut out).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    let mut b = b;
    b.copy_from(0, &a, 2, 6).unwrap();
    b.copy_to_host(0, &mut out).unwrap();
    assert_eq!(out, [9; 4]);
}

#[test]
fn zero_byte_buffers_give_empty_slices() {
    let mut b = host_buffer(0);
    assert!(b.is_empty());
    assert!(b.as_ptr().is_null());
    assert!(b.as_slice().unwrap().is_empty());
    assert!(b.as_mut_slice().unwrap().is_empty());
}

#[test]
fn buffers_keep_their_resource_whatever_is_current_later() {
    let pool = Resource::pool(&Resource::host().unwrap()).build().unwrap();
    let b = pool.buffer(32, Stream::from_raw(0)).unwrap();
    assert!(b.resource().same_handle(&pool));
    drop(pool);
    assert_eq!(b.resource().name(), "pool");
    b.set_stream(Stream::DEFAULT).unwrap();
    assert_eq!(b.info().stream, Stream::DEFAULT);
}

#[test]
fn buffers_move_and_drop_across_threads() {
    let mut b = host_buffer(1024);
    b.copy_from_host(0, &[5; 1024]).unwrap();
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let c = b.clone();
            std::thread::spawn(move || c.as_slice().unwrap().iter().map(|&x| x as u64).sum::<u64>())
        })
        .collect();
    for r in readers {
        assert_eq!(r.join().unwrap(), 5 * 1024);
    }
    std::thread::spawn(move || drop(b)).join().unwrap();
}

#[test]
fn raw_buffer_handles_round_trip() {
    let b = host_buffer(4);
    let raw = b.clone().into_raw();
    // SAFETY: raw carries the +1 of into_raw; no other Buffer writes meanwhile.
    let back = unsafe { Buffer::from_raw(raw) }.unwrap();
    assert_eq!(back.as_raw(), b.as_raw());
    drop(back);
    let raw = b.as_raw();
    drop(b);
    // SAFETY: a stale handle is an error, not undefined behaviour.
    let e = unsafe { Buffer::from_handle(raw) }.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidHandle);
}

#[test]
fn record_stream_on_host_memory_frees_at_once_and_checks_the_handle() {
    let host = Resource::host().unwrap();
    let pool = Resource::pool(&host).build().unwrap();
    let b = pool.buffer(4096, Stream::DEFAULT).unwrap();
    let p = b.as_ptr();
    for s in [0usize, 1, 7, 7] {
        b.record_stream(Stream::from_raw(s)).unwrap();
    }
    drop(b); // host memory: no stream to wait for, the pool has the block back at once
    let again = pool.buffer(4096, Stream::DEFAULT).unwrap();
    assert_eq!(again.as_ptr(), p);
}
