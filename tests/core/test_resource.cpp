// Resource::allocate/deallocate: the checks and counters every resource inherits.
#include <gtest/gtest.h>

#include <cstdlib>

#include "tether_core/resource.hpp"
#include "test_util.hpp"

namespace {

using namespace tether;
using test::fails_with;

// Records what reaches the subclass; can be told to fail.
class Recorder : public core::Resource {
 public:
  Recorder() : Resource(core::Properties{TETHER_RESOURCE_KIND_HOST, TETHER_DEVICE_HOST, false, true}) {}
  const char* name() const noexcept override { return "recorder"; }
  int allocs = 0, frees = 0;
  std::size_t last_alignment = 0;
  bool fail = false;

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment, core::stream_t) override {
    ++allocs;
    last_alignment = alignment;
    if (fail) throw core::OutOfMemory("recorder: told to fail");
    return std::malloc(bytes);
  }
  void do_deallocate(void* p, std::size_t, std::size_t, core::stream_t) override {
    ++frees;
    if (fail) core::throw_invalid_argument("recorder: told to fail");
    std::free(p);
  }
};

TEST(Resource, NormalizesAlignment) {
  EXPECT_EQ(core::Resource::normalize_alignment(0), core::kDefaultAlignment);
  EXPECT_EQ(core::kDefaultAlignment, std::size_t{TETHER_DEFAULT_ALIGNMENT});
  for (std::size_t a = 1; a <= core::kMaxAlignment; a *= 2) EXPECT_EQ(core::Resource::normalize_alignment(a), a);
  for (std::size_t bad : {std::size_t{3}, std::size_t{6}, std::size_t{1000}, core::kMaxAlignment * 2, SIZE_MAX}) {
    EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { core::Resource::normalize_alignment(bad); })) << bad;
  }
}

TEST(Resource, PassesNormalizedAlignmentOn) {
  Recorder r;
  void* p = r.allocate(10, 0, 0);
  EXPECT_EQ(r.last_alignment, core::kDefaultAlignment);
  r.deallocate(p, 10, 0, 0);
  p = r.allocate(10, 16, 0);
  EXPECT_EQ(r.last_alignment, 16u);
  r.deallocate(p, 10, 16, 0);
}

TEST(Resource, ZeroSizeNeverReachesTheSubclass) {
  Recorder r;
  EXPECT_EQ(r.allocate(0, 0, 0), nullptr);
  EXPECT_EQ(r.allocs, 0);
  r.deallocate(nullptr, 0, 0, 0);
  EXPECT_EQ(r.frees, 0);
  EXPECT_EQ(r.outstanding_count(), 0u);
}

TEST(Resource, MalformedFreesAreRejectedBeforeTheSubclass) {
  Recorder r;
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { r.deallocate(nullptr, 8, 0, 0); }));
  void* p = r.allocate(8, 0, 0);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { r.deallocate(p, 0, 0, 0); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { r.deallocate(p, 8, 3, 0); }));
  EXPECT_EQ(r.frees, 0);
  EXPECT_EQ(r.outstanding_count(), 1u);
  r.deallocate(p, 8, 0, 0);
  EXPECT_EQ(r.frees, 1);
}

TEST(Resource, CountersChangeOnlyOnSuccess) {
  Recorder r;
  void* p = r.allocate(100, 0, 0);
  EXPECT_EQ(r.outstanding_count(), 1u);
  EXPECT_EQ(r.outstanding_bytes(), 100u);
  r.fail = true;
  EXPECT_THROW(r.allocate(50, 0, 0), core::OutOfMemory);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { r.deallocate(p, 100, 0, 0); }));
  EXPECT_EQ(r.outstanding_count(), 1u);
  EXPECT_EQ(r.outstanding_bytes(), 100u);
  r.fail = false;
  r.deallocate(p, 100, 0, 0);
  EXPECT_EQ(r.outstanding_count(), 0u);
  EXPECT_EQ(r.outstanding_bytes(), 0u);
}

TEST(Resource, AbsurdSizesAreOutOfMemoryWithoutReachingTheSubclass) {
  Recorder r;
  EXPECT_THROW(r.allocate(SIZE_MAX, 0, 0), core::OutOfMemory);
  EXPECT_THROW(r.allocate(SIZE_MAX - core::kMaxAlignment, 0, 0), core::OutOfMemory);
  EXPECT_EQ(r.allocs, 0);
  EXPECT_TRUE(fails_with(TETHER_ERROR_OUT_OF_MEMORY, [&] { r.allocate(SIZE_MAX, 0, 0); }));
}

}  // namespace
