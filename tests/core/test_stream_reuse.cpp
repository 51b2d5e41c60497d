// stream_reuse::Handover, settle() and EventSpares: the stream-ordering steps
// the arena and fixed-size resources share (their own stream-order tests, in
// test_arena.cpp and test_fixed_size.cpp, check them in use).
#include <gtest/gtest.h>

#include <stdexcept>
#include <utility>
#include <vector>

#include "stream_reuse.hpp"

namespace {

using namespace tether;
using core::stream_t;
using core::StreamOrder;
using core::stream_reuse::EventSpares;
using core::stream_reuse::Handover;

// Logs what the helpers ask of the device.
class LoggingOrder final : public StreamOrder {
 public:
  void synchronize(stream_t) override { ++stream_syncs; }
  void synchronize_device() override { ++device_syncs; }
  event_t create_event() override { return reinterpret_cast<event_t>(++created); }
  void destroy_event(event_t e) noexcept override { destroyed.push_back(e); }
  void record_event(event_t e, stream_t s) override {
    if (fail_records) throw std::runtime_error("record failed");
    records.emplace_back(e, s);
  }
  void wait_event(stream_t waiter, event_t e) override { waits.emplace_back(waiter, e); }
  bool event_done(event_t) override { return true; }
  void synchronize_event(event_t) override {}

  int stream_syncs = 0;
  int device_syncs = 0;
  std::uintptr_t created = 0;
  bool fail_records = false;
  std::vector<event_t> destroyed;
  std::vector<std::pair<event_t, stream_t>> records;
  std::vector<std::pair<stream_t, event_t>> waits;
};

StreamOrder::event_t ev(std::uintptr_t n) { return reinterpret_cast<StreamOrder::event_t>(n); }

TEST(StreamReuseHandover, WaitsOnEachEventOnceAndNeverForItsOwnStream) {
  LoggingOrder order;
  Handover h(&order);
  h.wait(1, 1, ev(10));  // freed on the taker's own stream: stream order suffices
  h.wait(1, 2, ev(20));
  h.wait(1, 2, ev(20));  // the same event again: already waited
  h.wait(1, 3, ev(30));
  h.wait(1, 2, ev(20));
  using W = std::vector<std::pair<stream_t, StreamOrder::event_t>>;
  EXPECT_EQ(order.waits, (W{{1, ev(20)}, {1, ev(30)}}));
  EXPECT_EQ(order.device_syncs, 0);
  EXPECT_FALSE(h.device_done());
}

TEST(StreamReuseHandover, UncoveredMemorySynchronisesTheDeviceOnceThenNothingWaits) {
  LoggingOrder order;
  Handover h(&order);
  h.wait(1, 1, nullptr);  // own stream: no event needed
  EXPECT_EQ(order.device_syncs, 0);
  h.wait(1, 2, ev(20));
  h.wait(1, 3, nullptr);
  EXPECT_EQ(order.device_syncs, 1);
  EXPECT_TRUE(h.device_done());
  h.wait(1, 4, ev(40));  // covered by the device synchronisation
  h.wait(1, 5, nullptr);
  h.device();
  EXPECT_EQ(order.device_syncs, 1);
  ASSERT_EQ(order.waits.size(), 1u);
  EXPECT_EQ(order.waits[0].second, ev(20));
  EXPECT_EQ(order.stream_syncs, 0);  // never touches a stream handle

  Handover next(&order);  // another operation orders afresh
  next.wait(1, 2, ev(20));
  next.device();
  EXPECT_EQ(order.waits.size(), 2u);
  EXPECT_EQ(order.device_syncs, 2);
}

TEST(StreamReuseHandover, WithoutAStreamOrderNothingNeedsOrdering) {
  Handover h(nullptr);
  EXPECT_TRUE(h.device_done());
  h.wait(1, 2, ev(20));
  h.wait(1, 2, nullptr);
  h.device();
  core::stream_reuse::settle(nullptr);
}

TEST(StreamReuseSettle, SynchronisesTheDeviceEachTime) {
  LoggingOrder order;
  core::stream_reuse::settle(&order);
  core::stream_reuse::settle(&order);
  EXPECT_EQ(order.device_syncs, 2);
  EXPECT_TRUE(order.waits.empty());
}

TEST(StreamReuseEventSpares, RecordsOnTheStreamAndReusesEventsPutBack) {
  LoggingOrder order;
  {
    EventSpares spares(&order);
    const auto a = spares.record(7);
    const auto b = spares.record(8);
    EXPECT_NE(a, b);
    EXPECT_EQ(order.created, 2u);
    spares.put(a);
    EXPECT_EQ(spares.size(), 1u);
    EXPECT_EQ(spares.record(9), a);  // reused, not created
    EXPECT_EQ(order.created, 2u);
    using R = std::vector<std::pair<StreamOrder::event_t, stream_t>>;
    EXPECT_EQ(order.records, (R{{a, 7}, {b, 8}, {a, 9}}));
    spares.put(a);
    spares.put(b);
    EXPECT_TRUE(order.destroyed.empty());
  }
  // The spares die with their owner; nothing else was destroyed.
  EXPECT_EQ(order.destroyed.size(), 2u);
}

TEST(StreamReuseEventSpares, AFailedRecordKeepsTheEventSpare) {
  LoggingOrder order;
  EventSpares spares(&order);
  order.fail_records = true;
  EXPECT_THROW(spares.record(7), std::runtime_error);  // a new event, kept as a spare
  EXPECT_EQ(spares.size(), 1u);
  EXPECT_THROW(spares.record(7), std::runtime_error);  // that spare again, not another new one
  EXPECT_EQ(spares.size(), 1u);
  EXPECT_EQ(order.created, 1u);
  order.fail_records = false;
  EXPECT_EQ(spares.record(7), ev(1));
  EXPECT_EQ(spares.size(), 0u);
}

}  // namespace
