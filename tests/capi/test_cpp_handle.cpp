// Every C++ handle class gets its ownership semantics from one template
// (tether::detail::handle, tether/cpp/handle.hpp). The same typed test runs
// for each handle class, so a class that drifts from the others fails here.
#include <gtest/gtest.h>

#include <string>
#include <type_traits>
#include <utility>

#include "tether/tether.hpp"

namespace {

// How to make a live object of each handle class, and its C retain.
template <class T>
struct Make;
template <>
struct Make<tether::resource> {
  static tether::resource live() { return tether::host_resource(); }
  static tether_object_type_t type() { return TETHER_OBJECT_RESOURCE; }
  static const char* name() { return "tether::resource"; }
};
template <>
struct Make<tether::buffer> {
  static tether::buffer live() { return tether::buffer(tether::host_resource(), 64); }
  static tether_object_type_t type() { return TETHER_OBJECT_BUFFER; }
  static const char* name() { return "tether::buffer"; }
};

template <class T>
class HandleClass : public ::testing::Test {};
using HandleClasses = ::testing::Types<tether::resource, tether::buffer>;
TYPED_TEST_SUITE(HandleClass, HandleClasses);

TYPED_TEST(HandleClass, HasValueSemanticsThatNeverThrowOnMove) {
  static_assert(std::is_nothrow_default_constructible_v<TypeParam>);
  static_assert(std::is_copy_constructible_v<TypeParam> && std::is_copy_assignable_v<TypeParam>);
  static_assert(std::is_nothrow_move_constructible_v<TypeParam>);
  static_assert(std::is_nothrow_move_assignable_v<TypeParam>);
  static_assert(std::is_nothrow_destructible_v<TypeParam>);
  static_assert(std::is_nothrow_swappable_v<TypeParam>);
  SUCCEED();
}

TYPED_TEST(HandleClass, CopyRetainsMoveTransfersDestructorReleases) {
  using M = Make<TypeParam>;
  const std::size_t before = tether_debug_live_objects(M::type());
  {
    TypeParam a = M::live();
    ASSERT_TRUE(a);
    TypeParam b = a;  // retain: same handle, both usable
    EXPECT_EQ(b.get(), a.get());
    TypeParam c = std::move(b);  // transfer
    EXPECT_FALSE(b);
    EXPECT_EQ(c.get(), a.get());
    a.reset();
    EXPECT_FALSE(a);
    EXPECT_EQ(tether_debug_live_objects(M::type()), before + 1);  // c still holds it
    c = c;  // self-assignment changes nothing
    EXPECT_TRUE(c);
    TypeParam d;
    d = std::move(c);
    EXPECT_FALSE(c);
    EXPECT_TRUE(d);
  }
  EXPECT_EQ(tether_debug_live_objects(M::type()), before);
}

TYPED_TEST(HandleClass, AdoptBorrowAndReleaseHandTheReferenceOver) {
  using M = Make<TypeParam>;
  const std::size_t before = tether_debug_live_objects(M::type());
  TypeParam a = M::live();
  auto* raw = a.release();  // the caller now owns the +1
  EXPECT_FALSE(a);
  {
    TypeParam borrowed = TypeParam::borrow(raw);  // its own +1
    EXPECT_EQ(borrowed.get(), raw);
  }
  TypeParam adopted = TypeParam::adopt(raw);  // takes the caller's +1 back
  EXPECT_EQ(adopted.get(), raw);
  EXPECT_FALSE(TypeParam::adopt(nullptr));
  EXPECT_FALSE(TypeParam::borrow(nullptr));
  TypeParam other;
  swap(adopted, other);
  EXPECT_FALSE(adopted);
  EXPECT_EQ(other.get(), raw);
  other.reset();
  EXPECT_EQ(tether_debug_live_objects(M::type()), before);
  // raw is stale now: borrowing it throws, naming the class.
  try {
    (void)TypeParam::borrow(raw);
    ADD_FAILURE() << "borrow of a stale handle did not throw";
  } catch (const tether::invalid_handle_error& e) {
    EXPECT_NE(std::string(e.what()).find(std::string(M::name()) + "::borrow"), std::string::npos) << e.what();
  }
}

}  // namespace
