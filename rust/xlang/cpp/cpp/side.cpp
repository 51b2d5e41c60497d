// The C++ half of the Rust <-> C++ proof (src/main.rs): one translation unit
// written against the header-only wrapper tether/tether.hpp, linked into a Rust
// program together with libtether. Every function is extern "C" and noexcept:
// a C++ exception never crosses into Rust (failures return 0 / NULL).
#include <tether/tether.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

namespace {
tether::resource g_statistics;            // what C++ installed
std::vector<tether::buffer> g_buffers;    // buffers C++ keeps
}  // namespace

extern "C" {

// The handle value of the resource current for the host slot, as C++ sees it.
std::uintptr_t side_current_host_handle() noexcept {
  try {
    return reinterpret_cast<std::uintptr_t>(tether::current_resource(TETHER_DEVICE_HOST).get());
  } catch (...) {
    return 0;
  }
}

// A buffer of `size` bytes from the current host resource, filled with `fill`.
// Returns +1 for the caller (Rust adopts it).
tether_buffer_t* side_make_buffer(std::size_t size, unsigned char fill) noexcept {
  try {
    tether::buffer b = tether::buffer::from_current(TETHER_DEVICE_HOST, size);
    std::vector<unsigned char> bytes(size, fill);
    b.copy_from_host(bytes.data(), size);
    return b.release();
  } catch (...) {
    return nullptr;
  }
}

// Take over a buffer Rust made (+1 taken), check every byte is `fill`, keep it.
int side_take_buffer(tether_buffer_t* handle, unsigned char fill) noexcept {
  try {
    tether::buffer b = tether::buffer::adopt(handle);
    std::vector<unsigned char> bytes(b.size());
    b.copy_to_host(bytes.data(), bytes.size());
    for (unsigned char x : bytes)
      if (x != fill) return 0;
    g_buffers.push_back(std::move(b));
    return 1;
  } catch (...) {
    return 0;
  }
}

// Install a statistics adaptor over a new host resource as the current host
// resource; C++ keeps its own reference. Returns the adaptor's handle value.
std::uintptr_t side_install_statistics() noexcept {
  try {
    g_statistics = tether::statistics_adaptor(tether::host_resource());
    (void)tether::set_current_resource(g_statistics, TETHER_DEVICE_HOST);
    return reinterpret_cast<std::uintptr_t>(g_statistics.get());
  } catch (...) {
    return 0;
  }
}

// Allocations outstanding in the adaptor C++ installed (-1 if there is none).
long long side_statistics_count() noexcept {
  try {
    if (!g_statistics) return -1;
    return static_cast<long long>(g_statistics.statistics().current_count);
  } catch (...) {
    return -1;
  }
}

// Push a new pool over the host resource on this thread's override stack for
// the host slot (tether::scoped_resource), call back into Rust while it is
// pushed, pop. Returns the callback's result, or 0 if C++ failed.
int side_with_scoped_pool(int (*callback)(std::uintptr_t pool_handle)) noexcept {
  try {
    tether::resource pool = tether::pool_resource(tether::host_resource());
    tether::scoped_resource guard(pool, TETHER_DEVICE_HOST);
    return callback(reinterpret_cast<std::uintptr_t>(pool.get()));
  } catch (...) {
    return 0;
  }
}

void side_drop_statistics() noexcept { g_statistics.reset(); }
void side_drop_buffers() noexcept { g_buffers.clear(); }

}  // extern "C"
