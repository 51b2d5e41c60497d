// The resource conformance suite: one set of tests every tether resource and
// adaptor must pass. The tests live in conformance.cpp; a test file adds
// resources by listing factories and instantiating the suite:
//
//   static std::vector<tether::test::ResourceFactory> my_factories() { ... }
//   TETHER_INSTANTIATE_CONFORMANCE(Cuda, my_factories());
//
// A factory whose skip_reason() is non-empty is skipped with that reason
// (e.g. "no CUDA device"), so GPU factories can be listed unconditionally.
// Memory that the host cannot touch is written and read through the
// factory's `access` hooks; without them, pattern checks are skipped for it.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <functional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "tether_core/resource.hpp"

namespace tether::test {

// How to write and read a resource's memory from the host.
struct MemoryAccess {
  std::function<void(void* dst, unsigned char byte, std::size_t n)> fill;
  std::function<void(void* host_dst, const void* src, std::size_t n)> read;
};

struct ResourceFactory {
  ResourceFactory(std::string name_, std::function<core::ResourcePtr()> make_,
                  std::function<std::string()> skip_reason_ = {}, MemoryAccess access_ = {})
      : name(std::move(name_)), make(std::move(make_)), skip_reason(std::move(skip_reason_)),
        access(std::move(access_)) {}

  std::string name;  // letters, digits and '_' only (it becomes part of the test name)
  std::function<core::ResourcePtr()> make;
  // Empty, or returning "": run; otherwise skip with the reason returned.
  std::function<std::string()> skip_reason;
  // Hooks for memory that is not host-accessible (host-accessible memory is
  // accessed directly when these are empty).
  MemoryAccess access;
};

class ResourceConformance : public ::testing::TestWithParam<ResourceFactory> {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Fill n bytes at p with `byte`, and check that they still hold it. No-ops
  // when the memory cannot be reached from the host.
  void fill(void* p, unsigned char byte, std::size_t n) const;
  ::testing::AssertionResult holds(const void* p, unsigned char byte, std::size_t n) const;

  core::ResourcePtr mr;

 private:
  bool can_touch_ = false;
};

std::string factory_name(const ::testing::TestParamInfo<ResourceFactory>& info);

// Failure messages show the factory's name rather than its bytes.
inline void PrintTo(const ResourceFactory& f, std::ostream* os) { *os << f.name; }

}  // namespace tether::test

// Use at namespace scope. `prefix` names this group of instances.
#define TETHER_INSTANTIATE_CONFORMANCE(prefix, factories)           \
  using ::tether::test::ResourceConformance;                        \
  INSTANTIATE_TEST_SUITE_P(prefix, ResourceConformance,             \
                           ::testing::ValuesIn(factories), ::tether::test::factory_name)
