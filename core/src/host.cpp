// HostResource: aligned allocations from the C heap, each preceded by a
// header that lets deallocate() reject pointers, sizes and alignments it did
// not hand out instead of corrupting the heap.
//
// Layout of one allocation (raw is what malloc returned, 16-byte aligned):
//
//   raw ... [padding] [Header, 32 bytes] [user memory: `size` bytes]
//                                        ^ returned pointer, aligned
//
// All host resources share the C heap, so the header names the family
// (plain C-heap host memory) rather than one resource object: memory from one
// host resource may be freed into any other, and is_equal() says so.
#include "tether_core/host.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace tether::core {

namespace {

struct Header {
  std::uint64_t magic;      // kMagic ^ address of the user pointer; 0 once freed
  std::uint64_t size;       // bytes requested
  std::uint32_t alignment;  // alignment requested (<= kMaxAlignment = 2^30)
  std::uint32_t offset;     // user pointer - raw pointer (< 2^31)
  const void* family;       // &kHostFamily: which kind of tether memory this is
};
static_assert(sizeof(Header) == 32, "header keeps user memory 16-byte aligned");

constexpr std::uint64_t kMagic = 0x7465746865724853ull;  // "tetherHS"
constexpr std::size_t kMallocAlignment = alignof(std::max_align_t);
const char kHostFamily = 0;

class HostResource final : public Resource {
 public:
  HostResource() noexcept : Resource(Properties{TETHER_RESOURCE_KIND_HOST, TETHER_DEVICE_HOST, false, true}) {}

  const char* name() const noexcept override { return "host"; }

  // Every host resource draws from the same C heap and accepts any pointer
  // whose header names the host family, so any two are interchangeable.
  bool is_equal(const Resource& other) const noexcept override {
    return dynamic_cast<const HostResource*>(&other) != nullptr;
  }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_t) override {
    const std::size_t slack = alignment > kMallocAlignment ? alignment - kMallocAlignment : 0;
    // malloc refuses anything above PTRDIFF_MAX; saying so here avoids the
    // overflow in `total` and sanitizer complaints about absurd sizes.
    const std::size_t limit = static_cast<std::size_t>(PTRDIFF_MAX) - sizeof(Header) - slack;
    if (bytes > limit) throw OutOfMemory(message("cannot allocate", bytes, alignment));
    void* raw = std::malloc(bytes + sizeof(Header) + slack);
    if (raw == nullptr) throw OutOfMemory(message("out of host memory allocating", bytes, alignment));

    const auto raw_addr = reinterpret_cast<std::uintptr_t>(raw);
    const std::uintptr_t user = (raw_addr + sizeof(Header) + alignment - 1) & ~(std::uintptr_t{alignment} - 1);
    Header h;
    h.magic = kMagic ^ user;
    h.size = bytes;
    h.alignment = static_cast<std::uint32_t>(alignment);
    h.offset = static_cast<std::uint32_t>(user - raw_addr);
    h.family = &kHostFamily;
    std::memcpy(reinterpret_cast<void*>(user - sizeof(Header)), &h, sizeof h);
    return reinterpret_cast<void*>(user);
  }

  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment, stream_t) override {
    const auto user = reinterpret_cast<std::uintptr_t>(ptr);
    // Every pointer handed out is at least 16-byte aligned; anything else is
    // not ours, and its header must not be read.
    if (user % kMallocAlignment != 0) throw_invalid_argument(not_ours(ptr));
    void* hp = reinterpret_cast<void*>(user - sizeof(Header));
    Header h;
    std::memcpy(&h, hp, sizeof h);
    if (h.magic != (kMagic ^ user) || h.family != &kHostFamily) throw_invalid_argument(not_ours(ptr));
    if (h.size != bytes) {
      throw_invalid_argument("size mismatch freeing " + address(ptr) + ": allocated " + std::to_string(h.size) +
                             " bytes, freed with " + std::to_string(bytes));
    }
    if (h.alignment != alignment) {
      throw_invalid_argument("alignment mismatch freeing " + address(ptr) + ": allocated with alignment " +
                             std::to_string(h.alignment) + ", freed with " + std::to_string(alignment));
    }
    // Clear the magic so that freeing the pointer again is recognised.
    const std::uint64_t cleared = 0;
    std::memcpy(hp, &cleared, sizeof cleared);
    std::free(reinterpret_cast<void*>(user - h.offset));
  }

 private:
  static std::string address(const void* p) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%p", p);
    return buf;
  }
  static std::string not_ours(const void* p) {
    return "pointer " + address(p) + " was not allocated by a host resource (or was already freed)";
  }
  static std::string message(const char* what, std::size_t bytes, std::size_t alignment) {
    return std::string("host: ") + what + " " + std::to_string(bytes) + " bytes (alignment " +
           std::to_string(alignment) + ")";
  }
};

}  // namespace

ResourcePtr make_host_resource() { return std::make_shared<HostResource>(); }

}  // namespace tether::core
