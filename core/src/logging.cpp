// LoggingAdaptor: forwards to its upstream in the name of whoever asked (as
// the statistics adaptor does, so the upstream's records refuse foreign
// frees) and logs every allocate/free, whether it succeeded or not.
#include "tether_core/logging.hpp"

#include <unistd.h>
#include <sys/syscall.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <utility>

namespace tether::core {

namespace {

unsigned long long thread_id() noexcept {
  static thread_local const unsigned long long id = static_cast<unsigned long long>(::syscall(SYS_gettid));
  return id;
}

Properties adapted(const ResourcePtr& upstream) {
  if (!upstream) throw_invalid_argument("logging adaptor: upstream must not be null");
  Properties p = upstream->properties();
  p.kind = TETHER_RESOURCE_KIND_LOGGING;
  return p;
}

std::FILE* open_log(const std::string& path, bool have_sink) {
  if (path.empty()) {
    if (!have_sink) throw_invalid_argument("logging adaptor: give a path or a callback (both are empty)");
    return nullptr;
  }
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr)
    throw_invalid_argument("logging adaptor: cannot open path '" + path + "': " + std::strerror(errno));
  return f;
}

class LoggingAdaptor final : public Resource {
 public:
  LoggingAdaptor(ResourcePtr upstream, LoggingOptions o)
      : Resource(adapted(upstream)),
        upstream_(std::move(upstream)),
        start_(std::chrono::steady_clock::now()),
        file_(open_log(o.path, static_cast<bool>(o.sink))),
        sink_(std::move(o.sink)),
        destroy_(std::move(o.destroy)) {
    emit(kLogHeader, std::strlen(kLogHeader));
  }

  ~LoggingAdaptor() override {
    if (file_ != nullptr) std::fclose(file_);  // flushes
    if (destroy_) {
      try {
        destroy_();
      } catch (...) {
      }
    }
  }

  const char* name() const noexcept override { return "logging"; }
  void trim() override { upstream_->trim(); }
  const std::shared_ptr<Resource>* upstream() const noexcept override { return &upstream_; }
  StreamOrder* stream_order() noexcept override { return upstream_->stream_order(); }

  void flush() {
    if (file_ == nullptr) return;
    std::lock_guard<std::mutex> lock(file_mutex_);
    if (std::fflush(file_) != 0)
      throw Error(TETHER_ERROR_INTERNAL, std::string("logging adaptor: cannot flush the log: ") + std::strerror(errno));
  }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_t stream) override {
    return do_allocate_for(kCaller, bytes, alignment, stream);
  }
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream) override {
    do_deallocate_for(kCaller, ptr, bytes, alignment, stream);
  }

  void* do_allocate_for(owner_t owner, std::size_t bytes, std::size_t alignment, stream_t stream) override {
    void* p = nullptr;
    try {
      p = upstream_->allocate_for(tag(owner), bytes, alignment, stream);
    } catch (const Error& e) {
      log(now(), "allocate", nullptr, bytes, stream, e.status());
      throw;
    } catch (const std::bad_alloc&) {
      log(now(), "allocate", nullptr, bytes, stream, TETHER_ERROR_OUT_OF_MEMORY);
      throw;
    } catch (...) {
      log(now(), "allocate", nullptr, bytes, stream, TETHER_ERROR_INTERNAL);
      throw;
    }
    log(now(), "allocate", p, bytes, stream, TETHER_OK);
    return p;
  }

  void do_deallocate_for(owner_t owner, void* ptr, std::size_t bytes, std::size_t alignment,
                         stream_t stream) override {
    // A free is stamped when it is issued, before the upstream can hand the
    // memory to another thread; an allocation when it returned. So the time
    // column orders a free before any reuse of its memory, even when the reuse's
    // line is written first (readers sort by time: tether replay does).
    const auto issued = now();
    try {
      upstream_->deallocate_for(tag(owner), ptr, bytes, alignment, stream);
    } catch (const Error& e) {
      log(issued, "free", ptr, bytes, stream, e.status());
      throw;
    } catch (...) {
      log(issued, "free", ptr, bytes, stream, TETHER_ERROR_INTERNAL);
      throw;
    }
    log(issued, "free", ptr, bytes, stream, TETHER_OK);
  }

 private:
  owner_t tag(owner_t owner) const noexcept { return owner == kCaller ? id() : owner; }

  std::chrono::nanoseconds now() const noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_);
  }

  void log(std::chrono::nanoseconds ns, const char* action, const void* ptr, std::size_t bytes, stream_t stream,
           tether_status_t status) noexcept {
    char line[192];
    const int n = std::snprintf(line, sizeof line, "%llu,%llu,%s,0x%llx,%llu,%llu,%s",
                                static_cast<unsigned long long>(ns.count()), thread_id(), action,
                                static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(ptr)),
                                static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(stream),
                                status_name(status));
    if (n > 0) emit(line, static_cast<std::size_t>(n) < sizeof line ? static_cast<std::size_t>(n) : sizeof line - 1);
  }

  void emit(const char* line, std::size_t length) noexcept {
    if (file_ != nullptr) {
      std::lock_guard<std::mutex> lock(file_mutex_);
      std::fwrite(line, 1, length, file_);
      std::fputc('\n', file_);
    }
    if (sink_) {
      try {
        sink_(line, length);
      } catch (...) {  // a sink must not throw; logging never fails an allocation
      }
    }
  }

  ResourcePtr upstream_;
  const std::chrono::steady_clock::time_point start_;
  std::FILE* file_;
  std::mutex file_mutex_;
  std::function<void(const char*, std::size_t)> sink_;
  std::function<void()> destroy_;
};

}  // namespace

ResourcePtr make_logging_adaptor(ResourcePtr upstream, LoggingOptions options) {
  return std::make_shared<LoggingAdaptor>(std::move(upstream), std::move(options));
}

void flush_log(Resource& r) {
  auto* a = dynamic_cast<LoggingAdaptor*>(&r);
  if (a == nullptr)
    throw Error(TETHER_ERROR_NOT_SUPPORTED, std::string("resource '") + r.name() + "' is not a logging adaptor");
  a->flush();
}

}  // namespace tether::core
