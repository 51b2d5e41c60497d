// Stream ordering on a real device. A Gate holds stream A back (a host
// function that waits), so work enqueued on A stays pending while the test
// frees A's memory and allocates on stream B. Whenever B is handed the block
// A freed, B's work must wait for A's: B's write lands after A's, and B is
// not idle while A is held. A resource that reused the block early would
// let A's late write clobber B's pattern.
//
// Streams are created before the resource (and so destroyed after it) in
// these tests; CudaStreamLifetime below covers streams that die first.
#include <gtest/gtest.h>

#include <functional>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "cuda_test_support.hpp"
#include "tether_core/pool.hpp"
#include "test_util.hpp"

namespace {

using namespace tether;
using namespace tether::test::cuda;
using test::MiB;

constexpr std::size_t kBytes = 1536 * 1024;

struct OrderedFactory {
  std::string name;
  std::function<core::ResourcePtr()> make;
  bool must_reuse;  // bounded so that B can only get A's block
};

void PrintTo(const OrderedFactory& f, std::ostream* os) { *os << f.name; }

core::ResourcePtr pool(core::ResourcePtr up, std::size_t initial = 0, std::size_t maximum = 0) {
  core::PoolOptions o;
  o.initial_size = initial;
  o.maximum_size = maximum;
  return core::make_pool_resource(std::move(up), o);
}

core::ResourcePtr owned_async() { return cu::make_async_resource(0, cu::AsyncOptions{}); }

core::ResourcePtr default_async() {
  cu::AsyncOptions o;
  o.use_default_pool = true;
  return cu::make_async_resource(0, o);
}

class StreamOrdered : public ::testing::TestWithParam<OrderedFactory> {
 protected:
  void SetUp() override { TETHER_REQUIRE_GPU(); }
};

TEST_P(StreamOrdered, ReuseAcrossStreamsWaitsForTheFreeingStream) {
  Stream a, b;
  core::ResourcePtr mr = GetParam().make();
  Gate gate;
  gate.block(a);
  void* p = mr->allocate(kBytes, 0, a.value());
  fill_async(p, 0xAB, kBytes, a);  // pending behind the gate
  mr->deallocate(p, kBytes, 0, a.value());
  void* q = mr->allocate(kBytes, 0, b.value());
  fill_async(q, 0xCD, kBytes, b);
  if (GetParam().must_reuse) {
    EXPECT_EQ(q, p) << "a bounded pool can only hand out A's block";
  }
  if (q == p) {
    EXPECT_EQ(b.query(), CUDA_ERROR_NOT_READY) << "B uses A's block while A's work is pending";
  }
  gate.open();
  a.synchronize();
  b.synchronize();
  EXPECT_TRUE(device_holds(q, 0xCD, kBytes, b.value())) << (q == p ? "A's write landed after B's" : "");
  mr->deallocate(q, kBytes, 0, b.value());
}

TEST_P(StreamOrdered, SameStreamReuseIsImmediateAndOrdered) {
  Stream a;
  core::ResourcePtr mr = GetParam().make();
  Gate gate;
  gate.block(a);
  void* p = mr->allocate(kBytes, 0, a.value());
  fill_async(p, 0x11, kBytes, a);
  mr->deallocate(p, kBytes, 0, a.value());
  void* q = mr->allocate(kBytes, 0, a.value());  // must not block the host while A is held
  fill_async(q, 0x22, kBytes, a);
  gate.open();
  a.synchronize();
  EXPECT_TRUE(device_holds(q, 0x22, kBytes, a.value()));
  mr->deallocate(q, kBytes, 0, a.value());
}

TEST_P(StreamOrdered, BuffersLiveAcrossManyStreams) {
  std::vector<std::unique_ptr<Stream>> streams;
  for (int i = 0; i < 4; ++i) streams.push_back(std::make_unique<Stream>());
  core::ResourcePtr mr = GetParam().make();
  Gate gate;
  for (auto& s : streams) gate.block(*s);
  // Round-robin alloc/fill/free, each free's block reused by another stream.
  std::vector<std::pair<void*, int>> live;
  for (int round = 0; round < 24; ++round) {
    Stream& s = *streams[round % 4];
    void* p = mr->allocate(kBytes / 4, 0, s.value());
    fill_async(p, static_cast<unsigned char>(round + 1), kBytes / 4, s);
    live.emplace_back(p, round);
    if (live.size() > 3) {
      auto [old, r] = live.front();
      live.erase(live.begin());
      mr->deallocate(old, kBytes / 4, 0, streams[r % 4]->value());
    }
  }
  gate.open();
  for (auto& s : streams) s->synchronize();
  for (auto& [p, r] : live) {
    EXPECT_TRUE(device_holds(p, static_cast<unsigned char>(r + 1), kBytes / 4)) << "round " << r;
    mr->deallocate(p, kBytes / 4, 0, streams[r % 4]->value());
  }
}

// record_stream: memory used on a side stream (a memset held back by a gate)
// and freed on A with that use recorded is not handed to A's next allocation
// while the side stream's write is pending; a bounded resource, which has
// nothing else, waits (the out-of-memory retry) until the side stream is done.
TEST_P(StreamOrdered, RecordedStreamsHoldTheBlockUntilTheirWorkIsDone) {
  Stream a, side;
  core::ResourcePtr mr = GetParam().make();
  Gate gate;
  gate.block(side);
  void* p = mr->allocate(kBytes, 0, a.value());
  fill_async(p, 0xAB, kBytes, side);  // the use on the side stream, pending behind the gate
  const core::stream_t uses[] = {side.value()};
  mr->deallocate_after(p, kBytes, 0, a.value(), uses, 1);
  std::thread opener;
  if (GetParam().must_reuse) {
    // The allocation below can only be served once the side stream is done.
    opener = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      gate.open();
    });
  }
  void* q = mr->allocate(kBytes, 0, a.value());
  fill_async(q, 0xCD, kBytes, a);
  if (GetParam().must_reuse) {
    EXPECT_EQ(q, p) << "a bounded pool can only hand out the recorded block";
    opener.join();
  } else {
    EXPECT_NE(q, p) << "the block was handed out while the side stream still wrote to it";
  }
  gate.open();
  side.synchronize();
  a.synchronize();
  EXPECT_TRUE(device_holds(q, 0xCD, kBytes, a.value())) << "the side stream's late write clobbered the new owner's";
  // Once the side stream is done, nothing waits any more (an allocation drained it).
  mr->deallocate(q, kBytes, 0, a.value());
  void* r = mr->allocate(kBytes, 0, a.value());
  EXPECT_EQ(mr->deferred_frees(), 0u);
  mr->deallocate(r, kBytes, 0, a.value());
}

std::vector<OrderedFactory> ordered_factories() {
  return {
      {"pool_cuda", [] { return pool(cu::make_cuda_resource(0)); }, false},
      {"pool_cuda_bounded", [] { return pool(cu::make_cuda_resource(0), 2 * MiB, 2 * MiB); }, true},
      {"pool_async", [] { return pool(owned_async()); }, false},
      {"pool_async_bounded", [] { return pool(owned_async(), 2 * MiB, 2 * MiB); }, true},
      {"async_owned", [] { return owned_async(); }, false},
      {"async_default_pool", [] { return default_async(); }, false},
      {"pool_managed_bounded", [] { return pool(cu::make_managed_resource(0), 2 * MiB, 2 * MiB); }, true},
  };
}

INSTANTIATE_TEST_SUITE_P(Cuda, StreamOrdered, ::testing::ValuesIn(ordered_factories()),
                         [](const ::testing::TestParamInfo<OrderedFactory>& i) { return i.param.name; });

// Streams die before the memory they ordered is reused or the resource goes
// away (what garbage-collected stream objects do: a CuPy or PyTorch stream
// freed by Python while tether still holds blocks freed on it). A destroyed
// stream's handle must never be used again: waiting for its work has to go
// through something recorded while it was alive (an event at free time).
class CudaStreamLifetime : public ::testing::TestWithParam<OrderedFactory> {
 protected:
  void SetUp() override { TETHER_REQUIRE_GPU(); }
};

TEST_P(CudaStreamLifetime, MemoryFreedOnADestroyedStreamIsReusedSafely) {
  core::ResourcePtr mr = GetParam().make();
  Stream b;  // made before a dies, so it cannot be handed a's recycled handle value
  void* p = nullptr;
  {
    Stream a;
    Gate gate;
    gate.block(a);
    p = mr->allocate(kBytes, 0, a.value());
    fill_async(p, 0xAB, kBytes, a);
    mr->deallocate(p, kBytes, 0, a.value());
    gate.open();
  }  // a is destroyed (its work completes on its own)
  void* q = mr->allocate(kBytes, 0, b.value());
  if (GetParam().must_reuse) {
    EXPECT_EQ(q, p);
  }
  fill_async(q, 0xCD, kBytes, b);
  b.synchronize();
  EXPECT_TRUE(device_holds(q, 0xCD, kBytes, b.value()));
  mr->deallocate(q, kBytes, 0, b.value());
  mr->trim();
}

TEST_P(CudaStreamLifetime, AResourceOutlivesTheStreamsItWasUsedWith) {
  core::ResourcePtr mr = GetParam().make();
  for (int i = 0; i < 3; ++i) {
    Stream s;
    void* p = mr->allocate(kBytes / 2, 0, s.value());
    fill_async(p, 1, kBytes / 2, s);
    mr->deallocate(p, kBytes / 2, 0, s.value());
  }
  mr->trim();
  mr.reset();  // destroyed after all its streams
}

INSTANTIATE_TEST_SUITE_P(Cuda, CudaStreamLifetime, ::testing::ValuesIn(ordered_factories()),
                         [](const ::testing::TestParamInfo<OrderedFactory>& i) { return i.param.name; });

// The stream order itself: waiting on an event recorded on A holds B behind
// A's pending work; re-recording the event on another stream later does not
// release B (the wait captured the earlier recording); the event outlives A.
TEST(CudaStreamOrder, WaitingOnAnEventHoldsTheWaiterBehindTheProducer) {
  TETHER_REQUIRE_GPU();
  auto r = cu::make_cuda_resource(0);
  core::StreamOrder* order = r->stream_order();
  ASSERT_NE(order, nullptr);
  Stream a, b, c, d;
  Gate gate;
  gate.block(a);
  core::StreamOrder::event_t e = order->create_event();
  order->record_event(e, a.value());
  order->wait_event(b.value(), e);
  order->record_event(e, d.value());  // re-records the event on an idle stream
  order->wait_event(c.value(), e);
  d.synchronize();
  c.synchronize();  // c waited only for d: done
  EXPECT_EQ(b.query(), CUDA_ERROR_NOT_READY) << "b must still wait for a";
  gate.open();
  b.synchronize();
  EXPECT_EQ(b.query(), CUDA_SUCCESS);
  order->synchronize(a.value());
  EXPECT_EQ(a.query(), CUDA_SUCCESS);
  order->destroy_event(e);
}

}  // namespace
