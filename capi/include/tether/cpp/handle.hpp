// tether/cpp/handle.hpp - the one handle-wrapper template behind every C++ handle class.
// Part of the header-only C++ wrapper: include tether/tether.hpp (this file
// includes what it needs, so it also compiles alone).
#ifndef TETHER_CPP_HANDLE_HPP
#define TETHER_CPP_HANDLE_HPP

#include <utility>

#include "tether/cpp/error.hpp"
#include "tether/tether.h"

namespace tether {

namespace detail {

// The one implementation of an owning handle wrapper (tether::resource,
// tether::buffer, and every handle type to come): one +1 reference on a C
// handle, or none ("empty").
//   copy = retain (throws invalid_handle_error if the handle went stale),
//   move = transfer (the source becomes empty), destructor = release,
//   adopt(h) = take over the caller's reference, borrow(h) = retain a borrowed
//   handle, release() = hand the reference back to the caller.
// Derived is the wrapper class (CRTP, so adopt/borrow/swap speak its type);
// Traits gives the C handle type, its retain/release functions and the names
// used in the messages of failed retains:
//   struct Traits {
//     using type = tether_x_t;
//     static tether_status_t retain(type*) noexcept;
//     static tether_status_t release(type*) noexcept;
//     static constexpr const char* copy_what = "tether::x copy";
//     static constexpr const char* borrow_what = "tether::x::borrow";
//   };
// The members are documented on the wrapper classes (cpp_api).
template <class Derived, class Traits>
class handle {
 public:
  using c_type = typename Traits::type;

  static Derived adopt(c_type* h) noexcept {
    Derived d;
    static_cast<handle&>(d).handle_ = h;
    return d;
  }
  static Derived borrow(c_type* h) {
    if (h != nullptr) check_refcount(Traits::retain(h), Traits::borrow_what);
    return adopt(h);
  }

  void swap(Derived& other) noexcept { std::swap(handle_, static_cast<handle&>(other).handle_); }
  void reset() noexcept {
    if (handle_ != nullptr) (void)Traits::release(std::exchange(handle_, nullptr));
  }
  c_type* get() const noexcept { return handle_; }
  c_type* release() noexcept { return std::exchange(handle_, nullptr); }
  explicit operator bool() const noexcept { return handle_ != nullptr; }

  friend void swap(Derived& a, Derived& b) noexcept { a.swap(b); }

 protected:
  handle() noexcept = default;
  handle(const handle& other) : handle_(other.handle_) {
    if (handle_ != nullptr) check_refcount(Traits::retain(handle_), Traits::copy_what);
  }
  handle(handle&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  handle& operator=(const handle& other) {
    if (this != &other) {
      handle copy(other);
      std::swap(handle_, copy.handle_);
    }
    return *this;
  }
  handle& operator=(handle&& other) noexcept {
    if (this != &other) {
      handle moved(std::move(other));
      std::swap(handle_, moved.handle_);
    }
    return *this;
  }
  ~handle() { reset(); }

  c_type* handle_ = nullptr;
};

}  // namespace detail

}  // namespace tether

#endif  // TETHER_CPP_HANDLE_HPP
