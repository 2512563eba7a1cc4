// Status and Result<T>: the one way layerstream reports recoverable errors
// (bad input files, I/O errors, budgets too small, device errors).
//
// A Status is cheap to pass around: OK holds no allocation. Every function
// that can fail on input or environment returns [[nodiscard]] Status or
// Result<T>. Programmer errors (broken invariants) abort through LS_CHECK
// instead, printing the condition.
//
// Thread safety: Status and Result are values; distinct objects may be used
// from different threads freely.
#pragma once

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace layerstream {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,   // a caller- or user-supplied value is wrong (flag, size, prompt)
  kCorruption,        // a file's contents break its format (bad magic, overflowing count, ...)
  kUnsupported,       // valid input we do not handle (tensor type, architecture)
  kNotFound,          // a file, tensor or key that must exist does not
  kIOError,           // the OS failed a read/write/open (errno carried in the message)
  kOutOfBudget,       // a memory budget cannot hold what was asked
  kDeviceError,       // the CUDA runtime or another device API failed
  kCancelled,         // the operation was cancelled (shutdown, SIGINT)
  kInternal,          // a bug: an invariant that should hold did not
};

// Name of a code, e.g. "Corruption".
std::string_view status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string msg) { return {StatusCode::kInvalidArgument, std::move(msg)}; }
  static Status Corruption(std::string msg) { return {StatusCode::kCorruption, std::move(msg)}; }
  static Status Unsupported(std::string msg) { return {StatusCode::kUnsupported, std::move(msg)}; }
  static Status NotFound(std::string msg) { return {StatusCode::kNotFound, std::move(msg)}; }
  static Status IOError(std::string msg) { return {StatusCode::kIOError, std::move(msg)}; }
  // An IOError built from an errno value: "<context>: <strerror> (errno N)".
  static Status FromErrno(std::string_view context, int err);
  static Status OutOfBudget(std::string msg) { return {StatusCode::kOutOfBudget, std::move(msg)}; }
  static Status DeviceError(std::string msg) { return {StatusCode::kDeviceError, std::move(msg)}; }
  static Status Cancelled(std::string msg) { return {StatusCode::kCancelled, std::move(msg)}; }
  static Status Internal(std::string msg) { return {StatusCode::kInternal, std::move(msg)}; }

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  // The message alone ("" when OK).
  const std::string& message() const;
  // "Corruption: <message>", or "OK".
  std::string ToString() const;

  bool IsCorruption() const { return code() == StatusCode::kCorruption; }
  bool IsIOError() const { return code() == StatusCode::kIOError; }
  bool IsOutOfBudget() const { return code() == StatusCode::kOutOfBudget; }
  bool IsUnsupported() const { return code() == StatusCode::kUnsupported; }
  bool IsNotFound() const { return code() == StatusCode::kNotFound; }
  bool IsInvalidArgument() const { return code() == StatusCode::kInvalidArgument; }
  bool IsCancelled() const { return code() == StatusCode::kCancelled; }
  bool IsDeviceError() const { return code() == StatusCode::kDeviceError; }

  // Returns a copy whose message is "<context>: <message>" (same code).
  Status WithContext(std::string_view context) const;

 private:
  struct Rep {
    StatusCode code;
    std::string message;
  };
  std::shared_ptr<const Rep> rep_;  // null when OK
};

// Result<T>: a T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    if (std::get<Status>(v_).ok()) v_ = Status::Internal("Result constructed from an OK Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  // REQUIRES: ok(). Aborts with the error otherwise.
  T& value() & { check_ok(); return std::get<T>(v_); }
  const T& value() const& { check_ok(); return std::get<T>(v_); }
  T&& value() && { check_ok(); return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void check_ok() const;
  std::variant<T, Status> v_;
};

namespace detail {
[[noreturn]] void die_on_bad_result(const Status& s);
}  // namespace detail

template <typename T>
void Result<T>::check_ok() const {
  if (!ok()) detail::die_on_bad_result(std::get<Status>(v_));
}

}  // namespace layerstream
