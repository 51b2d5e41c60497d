// Stream-ordered reuse: how a suballocator over a stream-ordered upstream
// (arena.cpp, fixed_size.cpp; pool.cpp's pool_order.hpp does the same for
// its arenas) makes memory freed on one stream safe to use on another.
//
// Memory freed on stream A may be used on A at once (stream order). On
// another stream S it is safe only once S waits for an event recorded on A at
// or after the free, or once the whole device has been synchronised. A may be
// destroyed by then (CuPy and PyTorch streams die with their Python objects),
// so nothing here touches A's handle: events are recorded while A is surely
// alive (during a free on A), and S waits on the event, never on A.
#pragma once

#include <algorithm>
#include <vector>

#include "tether_core/resource.hpp"

namespace tether::core::stream_reuse {

// One operation's hand-over of free memory to a stream. Each event is waited
// on at most once; memory that no event covers is ordered by synchronising
// the device, at most once, after which every wait is a no-op (the device
// synchronisation covered everything). With a null StreamOrder (a host
// upstream) everything is a no-op. Not thread-safe: one operation, under its
// owner's lock.
class Handover {
 public:
  explicit Handover(StreamOrder* order) noexcept : order_(order), device_done_(order == nullptr) {}

  // Memory last used on `freed_on` goes to `waiter`. `event`: recorded on
  // `freed_on` at or after that use; nullptr when no event covers it (the
  // device is synchronised instead). Same stream: nothing to do.
  void wait(stream_t waiter, stream_t freed_on, StreamOrder::event_t event) {
    if (device_done_ || freed_on == waiter) return;
    if (event == nullptr) return device();
    if (std::find(waited_.begin(), waited_.end(), event) != waited_.end()) return;
    order_->wait_event(waiter, event);
    waited_.push_back(event);
  }

  // Order everything freed so far, on every stream: synchronise the device
  // (once per Handover).
  void device() {
    if (device_done_) return;
    order_->synchronize_device();
    device_done_ = true;
  }

  // Whether this Handover synchronised the device (true with no StreamOrder:
  // then nothing needs ordering). After it, every free block is usable on
  // every stream, and the owner may forget the events that covered them.
  bool device_done() const noexcept { return device_done_; }

 private:
  StreamOrder* const order_;
  bool device_done_;
  std::vector<StreamOrder::event_t> waited_;
};

// Make everything freed so far, on every stream, usable on every stream:
// synchronise the device (a null StreamOrder, a host upstream: nothing to
// do). What suballocators call "settling" their free memory.
inline void settle(StreamOrder* order) { Handover(order).device(); }

// Events to cover frees with, reused once no free memory needs them (an
// event per free would cost a create/destroy pair each). Guarded by its
// owner's lock. The spares are destroyed with it; events handed out and not
// put back are the owner's.
class EventSpares {
 public:
  explicit EventSpares(StreamOrder* order) noexcept : order_(order) {}
  ~EventSpares() {
    for (StreamOrder::event_t e : spares_) order_->destroy_event(e);
  }
  EventSpares(const EventSpares&) = delete;
  EventSpares& operator=(const EventSpares&) = delete;

  // An event recorded now on `stream` (alive: a free on it is in progress):
  // a spare, else a new one. Throws what the StreamOrder throws; a spare
  // taken stays a spare then.
  StreamOrder::event_t record(stream_t stream) {
    StreamOrder::event_t e;
    if (!spares_.empty()) {
      e = spares_.back();
      spares_.pop_back();
    } else {
      e = order_->create_event();
    }
    try {
      order_->record_event(e, stream);
    } catch (...) {
      spares_.push_back(e);
      throw;
    }
    return e;
  }

  // No free memory waits on `event` any more: reuse it.
  void put(StreamOrder::event_t event) { spares_.push_back(event); }

  std::size_t size() const noexcept { return spares_.size(); }

 private:
  StreamOrder* const order_;
  std::vector<StreamOrder::event_t> spares_;
};

}  // namespace tether::core::stream_reuse
