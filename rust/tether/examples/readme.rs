// The example of rust/README.md (tests/readme.rs keeps the two identical).
use tether::{Buffer, Device, Resource, Stream};

fn main() -> tether::Result<()> {
    let pool = Resource::pool(&Resource::host()?).initial_size(64 << 20).build()?;
    let _previous = tether::set_current_resource(Device::Host, Some(&pool))?; // Python and C++ see it too
    let mut buf = Buffer::from_current(Device::Host, 4096, Stream::DEFAULT)?;
    buf.as_mut_slice()?.fill(1); // host memory as &mut [u8], pinned while borrowed
    println!("{} bytes from the {}", buf.len(), buf.resource().name());
    assert!(pool.pool_info()?.pool_size >= 64 << 20);
    Ok(())
}
