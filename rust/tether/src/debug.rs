//! Census and leak reporting (`tether/debug.h`), for tests and diagnostics.

use tether_sys as sys;

/// Which handles [`live_objects`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectType {
    /// Resources and buffers.
    Any,
    /// Resources only.
    Resource,
    /// Buffers only.
    Buffer,
}

/// Live handles of `kind` in the process, held by anyone: every language, the
/// table, other objects (defaults the table created count too).
pub fn live_objects(kind: ObjectType) -> usize {
    let t = match kind {
        ObjectType::Any => sys::TETHER_OBJECT_ANY,
        ObjectType::Resource => sys::TETHER_OBJECT_RESOURCE,
        ObjectType::Buffer => sys::TETHER_OBJECT_BUFFER,
    };
    // SAFETY: plain value.
    unsafe { sys::tether_debug_live_objects(t) }
}

/// Resources kept alive after their last handle because raw allocations were outstanding.
pub fn orphaned_resources() -> usize {
    // SAFETY: no arguments.
    unsafe { sys::tether_debug_orphaned_resources() }
}

/// Bytes of raw allocations outstanding in orphaned resources.
pub fn orphaned_bytes() -> u64 {
    // SAFETY: no arguments.
    unsafe { sys::tether_debug_orphaned_bytes() }
}

/// Report orphaned resources and live buffers on stderr at process exit.
pub fn set_leak_report(enable: bool) {
    // SAFETY: plain value.
    unsafe { sys::tether_debug_set_leak_report(i32::from(enable)) }
}
