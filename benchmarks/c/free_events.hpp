// FreeEventsUpstream, for the C++ benchmarks: host memory that claims to be
// stream-ordered (a pool over it keeps per-stream arenas, records events and
// settles frees as over CUDA), with events that cost nothing, so that a
// benchmark or callgrind run on the CPU sees the stream-ordered pool's own
// cost without a driver.
#pragma once

#include "tether_core/host.hpp"
#include "tether_core/resource.hpp"

class FreeEventsUpstream final : public tether::core::Resource, private tether::core::StreamOrder {
 public:
  FreeEventsUpstream()
      : Resource(tether::core::Properties{TETHER_RESOURCE_KIND_CUDA, 0, true, true}),
        host_(tether::core::make_host_resource()) {}
  const char* name() const noexcept override { return "free-events"; }
  tether::core::StreamOrder* stream_order() noexcept override { return this; }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment, tether::core::stream_t s) override {
    return host_->allocate(bytes, alignment, s);
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment, tether::core::stream_t s) override {
    host_->deallocate(p, bytes, alignment, s);
  }

 private:
  void synchronize(tether::core::stream_t) override {}
  void synchronize_device() override {}
  event_t create_event() override { return this; }
  void destroy_event(event_t) noexcept override {}
  void record_event(event_t, tether::core::stream_t) override {}
  void wait_event(tether::core::stream_t, event_t) override {}
  bool event_done(event_t) override { return true; }
  void synchronize_event(event_t) override {}
  tether::core::ResourcePtr host_;
};
