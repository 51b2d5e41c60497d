//! CUDA IPC without a GPU: what export refuses and why, foreign bytes refused by import.
//! (Two-process GPU tests: tests/gpu/test_gpu_ipc.c and tests/python/test_gpu_ipc.py.)

use tether::{import_ipc, Device, ErrorKind, Resource, Stream, IPC_HANDLE_SIZE};

#[test]
fn host_memory_export_is_not_supported_with_the_reason() {
    let r = Resource::host().unwrap();
    let mut b = r.buffer(4096, Stream::DEFAULT).unwrap();
    let e = b.export_ipc(Stream::DEFAULT).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotSupported);
    assert!(e.message().contains("host memory"), "{}", e.message());
    b.resize(8192).unwrap(); // a refused export is no export
}

#[test]
fn foreign_bytes_are_invalid_arguments_naming_the_handle() {
    assert_eq!(IPC_HANDLE_SIZE, 192);
    for bytes in [[0u8; IPC_HANDLE_SIZE], [0xffu8; IPC_HANDLE_SIZE]] {
        let e = import_ipc(&bytes, Device::Current).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.message().contains("handle"), "{}", e.message());
    }
}
