// Process-wide cancellation: SIGINT/SIGTERM set one flag that long loops
// (the example-model writer, the `run` token loop) poll between steps and
// turn into Status::Cancelled, so the command unwinds normally: files are
// removed or renamed, threads joined, memory freed, and the exit code and
// message are the usual error path's.
//
// Thread/signal safety: cancel_requested() and request_cancel() are
// lock-free atomics, safe from any thread and from a signal handler.
#pragma once

#include <signal.h>

#include <atomic>

namespace layerstream {

inline std::atomic<bool> g_cancel_requested{false};
static_assert(std::atomic<bool>::is_always_lock_free);

inline bool cancel_requested() { return g_cancel_requested.load(std::memory_order_relaxed); }
inline void request_cancel() { g_cancel_requested.store(true, std::memory_order_relaxed); }
inline void clear_cancel() { g_cancel_requested.store(false, std::memory_order_relaxed); }
// The flag itself, for APIs that take a `const std::atomic<bool>*` cancel.
inline const std::atomic<bool>* cancel_flag() { return &g_cancel_requested; }

// While alive, SIGINT and SIGTERM request cancellation instead of killing the
// process; the previous handlers are restored on destruction (a second
// signal after that terminates as usual). Not nestable across threads: one
// per command, on the main thread.
class ScopedInterruptHandler {
 public:
  ScopedInterruptHandler() {
    clear_cancel();
    struct sigaction sa {};
    sa.sa_handler = &on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~ScopedInterruptHandler() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  ScopedInterruptHandler(const ScopedInterruptHandler&) = delete;
  ScopedInterruptHandler& operator=(const ScopedInterruptHandler&) = delete;

 private:
  static void on_signal(int) { request_cancel(); }
  struct sigaction old_int_ {}, old_term_{};
};

}  // namespace layerstream
