// The C++ half of the consumer: tether.hpp over the installed library.
#include <cstdio>
#include <cstring>
#include <exception>

#include <tether/tether.hpp>

extern "C" int consumer_c_part(void);

int main() {
  try {
    if (std::strcmp(tether::version_string(), EXPECTED_VERSION) != 0) {
      std::fprintf(stderr, "library %s, package config says %s\n", tether::version_string(), EXPECTED_VERSION);
      return 1;
    }
    tether::check_abi_version();
    (void)tether::current_resource(tether::device_host);  // the slot's default is no leak
    const std::size_t base = tether::live_objects();
    {
      tether::resource stats = tether::statistics_adaptor(tether::host_resource());
      tether::scoped_resource use(stats, tether::device_host);
      tether::buffer b = tether::buffer::from_current(tether::device_host, 1000);
      if (stats.statistics().current_bytes != 1000) return 2;
    }
    if (const int rc = consumer_c_part()) {
      std::fprintf(stderr, "C part failed: %d (%s)\n", rc, tether_last_error_message());
      return 10 + rc;
    }
    if (tether::live_objects() != base) return 3;
    std::printf("C++: ok, %zu live handles\n", base);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 4;
  }
}
