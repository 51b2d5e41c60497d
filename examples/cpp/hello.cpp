// hello.cpp - tether from C++ (tether/tether.hpp).
//
// The same program as examples/c/hello.c, with RAII: handles are values that
// retain on copy and release on destruction, errors are exceptions, and
// scoped_resource makes a resource current for one scope. Objects are
// destroyed in an awkward order on purpose - the buffer outlives every
// resource it depends on.
#include <cstdio>
#include <exception>
#include <string>

#include <tether/tether.hpp>

int main() {
  try {
    std::printf("tether %s (ABI %u)\n", tether::version_string(), tether::abi_version());
    tether::check_abi_version();
    // The host slot's default lives as long as the table (scoped_resource reads
    // the slot, which creates it): count it in the baseline, it is not a leak.
    (void)tether::current_resource(tether::device_host);
    const std::size_t live_before = tether::live_objects();

    tether::buffer buffer;  // declared first, so it is destroyed last
    {
      // host -> pool (1 MiB up front) -> statistics
      tether::resource pool = tether::pool_resource(tether::host_resource(), {1 << 20, 0, 0});
      tether::resource stats = tether::statistics_adaptor(pool);

      // Current for the host slot, on this thread, until the end of this scope.
      tether::scoped_resource use(stats, tether::device_host);
      buffer = tether::buffer::from_current(tether::device_host, 64);

      const std::string greeting = "hello from a tether buffer";
      buffer.copy_from_host(greeting.c_str(), greeting.size() + 1);

      const tether_statistics_t counters = stats.statistics();
      std::printf("%s: %llu bytes in %llu allocation(s), pool holds %llu bytes\n", stats.name(),
                  static_cast<unsigned long long>(counters.current_bytes),
                  static_cast<unsigned long long>(counters.current_count),
                  static_cast<unsigned long long>(pool.pool_info().pool_size));
    }  // the guard pops its override; pool and stats references are released here

    char back[64] = {};
    buffer.copy_to_host(back, sizeof back);  // still works: the buffer keeps its resources
    std::printf("buffer says: \"%s\" (from a %s resource)\n", back, buffer.resource().name());
    buffer.reset();  // the last reference: memory goes back to the pool, the chain goes away

    if (tether::live_objects() != live_before) {
      std::fprintf(stderr, "handles leaked: %zu live, %zu before\n", tether::live_objects(), live_before);
      return 1;
    }
    std::printf("all handles released: %zu live\n", tether::live_objects());
    return 0;
  } catch (const tether::error& e) {
    std::fprintf(stderr, "tether error %s: %s\n", e.status_name(), e.what());
    return 1;
  }
}
