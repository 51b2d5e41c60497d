// LoggingAdaptor: forwards to its upstream in the name of whoever asked (as
// the statistics adaptor does, so the upstream's records refuse foreign
// frees) and logs every allocate/free, whether it succeeded or not.
#include "tether_core/logging.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <sys/syscall.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdint>
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

// The log file, opened as fopen(path, "w") would: created, or truncated.
int open_log(const std::string& path, bool have_sink) {
  if (path.empty()) {
    if (!have_sink) throw_invalid_argument("logging adaptor: give a path or a callback (both are empty)");
    return -1;
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0)
    throw_invalid_argument("logging adaptor: cannot open path '" + path + "': " + std::strerror(errno));
  return fd;
}

// Lines are buffered here and written with write(2) when this much is pending
// (and by flush), so a failed write is known to have lost exactly the lines it
// carried: stdio would keep or drop them silently.
constexpr std::size_t kFlushAt = 1 << 16;

class LoggingAdaptor final : public Resource {
 public:
  LoggingAdaptor(ResourcePtr upstream, LoggingOptions o)
      : Resource(adapted(upstream)),
        upstream_(std::move(upstream)),
        start_(std::chrono::steady_clock::now()),
        path_(o.path),
        fd_(open_log(o.path, static_cast<bool>(o.sink))),
        sink_(std::move(o.sink)),
        destroy_(std::move(o.destroy)) {
    emit(kLogHeader, std::strlen(kLogHeader));
  }

  ~LoggingAdaptor() override {
    if (fd_ >= 0) {
      // The last flush. No one is left to report a failure to, so a log that
      // lost lines says so on stderr (once, here) rather than in silence.
      {
        std::lock_guard<std::mutex> lock(file_mutex_);
        write_pending();
        if (lost_lines_ != 0 && !reported_)
          std::fprintf(stderr, "tether: %s\n", error_message().c_str());
      }
      ::close(fd_);
    }
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

  // Write the pending lines. A write error is never forgotten: after one,
  // every flush throws (naming the path, the reason and the lines lost so
  // far) until a flush writes pending lines successfully again.
  void flush() {
    if (fd_ < 0) return;
    std::lock_guard<std::mutex> lock(file_mutex_);
    const bool had_lines = !pending_.empty();
    write_pending();
    if (failed_ && !(had_lines && write_ok_)) {
      reported_ = true;
      throw Error(TETHER_ERROR_INTERNAL, error_message());
    }
    failed_ = false;
  }

  LogInfo info() const {
    std::lock_guard<std::mutex> lock(file_mutex_);
    LogInfo i;
    i.lines = lines_;
    i.lost_lines = lost_lines_;
    i.error = failed_ ? last_errno_ : 0;
    return i;
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
    if (fd_ >= 0) {
      std::lock_guard<std::mutex> lock(file_mutex_);
      ++lines_;
      try {
        pending_.append(line, length);
        pending_.push_back('\n');
        ++pending_lines_;
      } catch (const std::bad_alloc&) {
        lose(1, ENOMEM);  // logging never fails an allocation
      }
      if (pending_.size() >= kFlushAt) write_pending();
    }
    if (sink_) {
      try {
        sink_(line, length);
      } catch (...) {  // a sink must not throw; logging never fails an allocation
      }
    }
  }

  // Under file_mutex_. Writes everything pending; on an error the lines not
  // yet written are dropped and counted. write_ok_ says whether this call
  // wrote all it had.
  void write_pending() noexcept {
    std::size_t done = 0;
    write_ok_ = true;
    while (done < pending_.size()) {
      const ssize_t n = ::write(fd_, pending_.data() + done, pending_.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int err = n < 0 ? errno : EIO;
        // The lines wholly written stay written; the rest (a partial one included) are lost.
        std::size_t written_lines = 0;
        for (std::size_t k = 0; k < done; ++k) written_lines += pending_[k] == '\n';
        lose(pending_lines_ - written_lines, err);
        write_ok_ = false;
        break;
      }
      done += static_cast<std::size_t>(n);
    }
    pending_.clear();
    pending_lines_ = 0;
  }

  void lose(std::uint64_t lines, int err) noexcept {
    lost_lines_ += lines;
    last_errno_ = err;
    failed_ = true;
    reported_ = false;
  }

  std::string error_message() const {
    return "logging adaptor: cannot write the log '" + path_ + "': " + std::strerror(last_errno_) + "; " +
           std::to_string(lost_lines_) + " of " + std::to_string(lines_) + " lines lost";
  }

  ResourcePtr upstream_;
  const std::chrono::steady_clock::time_point start_;
  const std::string path_;
  const int fd_;  // -1: no file
  mutable std::mutex file_mutex_;  // guards what follows
  std::string pending_;            // lines not yet written
  std::uint64_t pending_lines_ = 0;
  std::uint64_t lines_ = 0;       // lines logged to the file, the header included
  std::uint64_t lost_lines_ = 0;  // lines a failed write dropped
  int last_errno_ = 0;
  bool failed_ = false;    // a write failed since the last successful flush
  bool write_ok_ = true;   // the last write_pending() wrote everything
  bool reported_ = false;  // the current failure was thrown by a flush
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

LogInfo log_info(const Resource& r) {
  const auto* a = dynamic_cast<const LoggingAdaptor*>(&r);
  if (a == nullptr)
    throw Error(TETHER_ERROR_NOT_SUPPORTED, std::string("resource '") + r.name() + "' is not a logging adaptor");
  return a->info();
}

}  // namespace tether::core
