// Generation: Context.generate as a Python iterator of tokens.
//
// Context::generate reports tokens through a callback, so the generation runs
// on a worker thread that queues each TokenEvent; __next__ waits for the next
// one with the GIL released (so other Python threads run, and two threads can
// generate on two contexts at once) and, every few milliseconds and between
// tokens, takes the GIL to check for Ctrl-C (PyErr_CheckSignals). On
// KeyboardInterrupt, or when the iterator is closed or dropped, the worker is
// told to stop at the next token (the callback returns false), joined, and the
// context is left consistent and usable.
//
// The worker runs at most kLookahead tokens ahead of the reader, so a loop
// left early stops costing passes within a few tokens; the next call on the
// context from the thread that started the generation stops it for good
// (PyContext::idle), so the context is free without waiting for the
// iterator to be collected.
//
// Invariant: while the worker runs, the PyContext is marked busy (with
// `active` naming this generation), and it is only unmarked after the
// worker has been joined.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "bindings.h"

namespace layerstream::python {

using Prompt = std::variant<std::string, std::vector<int32_t>>;

class Generation {
 public:
  // Starts generating from `prompt` on `context` (owned by Python object
  // `owner`, kept alive here). REQUIRES: the GIL is held.
  Generation(nb::object owner, PyContext& context, Prompt prompt, const GenerateOptions& options);
  ~Generation();  // closes
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // The next token, or none when the generation is over. Throws the
  // library's error as its exception, KeyboardInterrupt on Ctrl-C.
  std::optional<TokenEvent> next_event();
  // next_event() for __next__: StopIteration at the end.
  TokenEvent next();
  // Stops at the next token and waits for the worker; idempotent.
  void close();
  // The whole result once finished (None before).
  const GenerateResult* result() const { return result_ ? &*result_ : nullptr; }
  bool finished() const { return finished_; }
  // True when the calling thread started this generation.
  bool started_here() const { return std::this_thread::get_id() == starter_; }
  // Stops it, dropping the library's error if any (the caller moves on to
  // another call on the context). REQUIRES: the GIL is held.
  void abandon() { (void)finish_after_stop(); }

  static constexpr size_t kLookahead = 16;  // tokens the worker may queue unread

 private:
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;        // the reader waits on it for events
    std::condition_variable room;      // the worker waits on it for room in events
    std::deque<TokenEvent> events;     // guarded by mu
    bool done = false;                 // guarded by mu
    std::optional<Result<GenerateResult>> outcome;  // guarded by mu; set with done
    std::atomic<bool> stop{false};
  };
  // Joins the worker (GIL released), frees the context and keeps the outcome.
  // Returns the library's error, if any.
  Status finish();
  // Asks the worker to stop at the next token, then finish().
  Status finish_after_stop();

  nb::object owner_;
  PyContext* context_;
  std::shared_ptr<Shared> shared_;
  std::thread worker_;
  std::thread::id starter_;
  bool finished_ = false;
  std::optional<GenerateResult> result_;
};

}  // namespace layerstream::python
