#include "layerstream/status.h"

#include "runtime/core/status_macros.h"

#include <cstdio>
#include <cstring>

namespace layerstream {

std::string_view status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "Invalid argument";
    case StatusCode::kCorruption: return "Corruption";
    case StatusCode::kUnsupported: return "Unsupported";
    case StatusCode::kNotFound: return "Not found";
    case StatusCode::kIOError: return "I/O error";
    case StatusCode::kOutOfBudget: return "Out of budget";
    case StatusCode::kDeviceError: return "Device error";
    case StatusCode::kCancelled: return "Cancelled";
    case StatusCode::kInternal: return "Internal error";
  }
  return "Unknown";
}

Status::Status(StatusCode code, std::string message) {
  if (code != StatusCode::kOk) rep_ = std::make_shared<Rep>(Rep{code, std::move(message)});
}

Status Status::FromErrno(std::string_view context, int err) {
  char buf[256];
  // GNU strerror_r may return a static string instead of filling buf.
  const char* text = strerror_r(err, buf, sizeof buf);
  return IOError(std::string(context) + ": " + text + " (errno " + std::to_string(err) + ")");
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return rep_ ? rep_->message : kEmpty;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(status_code_name(rep_->code)) + ": " + rep_->message;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  return Status(rep_->code, std::string(context) + ": " + rep_->message);
}

namespace detail {
void die_on_bad_result(const Status& s) {
  std::fprintf(stderr, "layerstream: value() called on a failed Result: %s\n", s.ToString().c_str());
  std::abort();
}
void check_failed(const char* cond, const char* file, int line, std::string_view msg) {
  std::fprintf(stderr, "layerstream: check failed: %s at %s:%d %.*s\n", cond, file, line,
               static_cast<int>(msg.size()), msg.data());
  std::abort();
}
}  // namespace detail

}  // namespace layerstream
