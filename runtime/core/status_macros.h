// The error-propagation and programmer-error macros the runtime's own code
// uses. Internal: apps see Status and Result<T> (layerstream/status.h) and
// handle them as they like; these names stay out of their namespace.
#pragma once

#include <string_view>
#include <utility>

#include "layerstream/status.h"

namespace layerstream::detail {
[[noreturn]] void check_failed(const char* cond, const char* file, int line, std::string_view msg);
}  // namespace layerstream::detail

// Propagate a non-OK Status to the caller.
#define LS_RETURN_IF_ERROR(expr)                              \
  do {                                                        \
    ::layerstream::Status _ls_status = (expr);                \
    if (!_ls_status.ok()) return _ls_status;                  \
  } while (0)

#define LS_CONCAT_INNER(a, b) a##b
#define LS_CONCAT(a, b) LS_CONCAT_INNER(a, b)
// LS_ASSIGN_OR_RETURN(auto x, MakeX()); declares x from a Result or returns its error.
#define LS_ASSIGN_OR_RETURN(lhs, expr) LS_ASSIGN_OR_RETURN_IMPL(LS_CONCAT(_ls_result_, __LINE__), lhs, expr)
#define LS_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()

// Programmer-error check: aborts with the condition, file and line.
#define LS_CHECK(cond)                                                          \
  do {                                                                          \
    if (!(cond)) ::layerstream::detail::check_failed(#cond, __FILE__, __LINE__, {}); \
  } while (0)
#define LS_CHECK_MSG(cond, msg)                                                     \
  do {                                                                              \
    if (!(cond)) ::layerstream::detail::check_failed(#cond, __FILE__, __LINE__, msg); \
  } while (0)
