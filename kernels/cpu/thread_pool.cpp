#include "kernels/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LS_CPU_RELAX() _mm_pause()
#else
#define LS_CPU_RELAX() std::this_thread::yield()
#endif

namespace layerstream::kernels {
namespace {

// Spins until done() or about `micros` have passed; true when done() held.
// No sched_yield: on a machine with more runnable threads than cores a
// yielding thread gives its core away for a whole time slice, while one that
// sleeps on the condition variable is woken ahead of the busy threads (it
// has used less CPU time), so a short spin and then a sleep is both the
// fastest when idle and the least bad when loaded.
template <typename Done>
bool spin_until(Done done, int micros) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(micros);
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      LS_CPU_RELAX();
    }
    if (std::chrono::steady_clock::now() > deadline) return done();
  }
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunks() {
  const std::function<void(int64_t, int64_t)>& fn = *fn_;
  for (;;) {
    const int c = next_.fetch_add(1, std::memory_order_relaxed);
    if (c >= n_chunks_) return;
    fn(bounds_[c], bounds_[c + 1]);
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;  // last generation looked at
  for (;;) {
    const auto woken = [&] {
      return stop_.load(std::memory_order_relaxed) || (state_.load(std::memory_order_acquire) >> 1) != seen;
    };
    if (!spin_until(woken, kSpinMicros)) {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, woken);
    }
    if (stop_.load()) return;
    const uint64_t s = state_.load();
    seen = s >> 1;
    if (!(s & 1)) continue;  // closed already: the caller did it all
    // Join, then check the job is still the open one (seq_cst pairs with the
    // caller's close and its read of running_: either we see it closed, or
    // it sees us inside and waits).
    running_.fetch_add(1);
    if (state_.load() == s) run_chunks();
    if (running_.fetch_sub(1) == 1) {
      std::lock_guard<std::mutex> lock(mu_);  // the caller may be between its check and its wait
      done_cv_.notify_all();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  std::lock_guard<std::mutex> job(job_mu_);
  const int64_t threads = size();
  grain = std::max<int64_t>(grain, 1);
  // Guided: rounds of `threads` chunks, the first of n / (2 threads) each,
  // halving per round, never below the grain; the last chunk takes the rest
  // once the table is full.
  int64_t size = std::max(grain, (n + 2 * threads - 1) / (2 * threads)), pos = 0;
  int c = 0;
  bounds_[0] = 0;
  while (pos < n) {
    for (int64_t j = 0; j < threads && pos < n; ++j) {
      pos = c + 1 == kMaxChunks ? n : std::min(n, pos + size);
      bounds_[++c] = pos;
    }
    size = std::max(grain, size / 2);
  }
  fn_ = &fn;
  n_chunks_ = c;
  next_.store(0, std::memory_order_relaxed);
  const uint64_t gen = (state_.load(std::memory_order_relaxed) >> 1) + 1;
  {
    std::lock_guard<std::mutex> lock(mu_);  // a worker between its check and its wait must not miss this
    state_.store((gen << 1) | 1, std::memory_order_release);
  }
  start_cv_.notify_all();
  run_chunks();
  state_.store(gen << 1);  // closed: no new joiners
  const auto all_done = [&] { return running_.load() == 0; };
  if (!spin_until(all_done, kSpinMicros)) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, all_done);
  }
  fn_ = nullptr;
}

}  // namespace layerstream::kernels
