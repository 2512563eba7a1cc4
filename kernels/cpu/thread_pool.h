// A small persistent thread pool for the CPU kernels: parallel_for splits a
// range of rows into chunks run by the workers and the calling thread.
//
// Thread safety: parallel_for may be called from any thread; concurrent calls
// are serialised (one job at a time). fn must not call parallel_for on the
// same pool. Destroying the pool joins its workers; no job may be running.
//
// Latency: a decode step is hundreds of short jobs (a few microseconds
// each). Chunks shrink as the job goes (guided: each round of one chunk per
// thread halves the size, down to the grain), so the first claims are few
// and large and the threads finish within about one small chunk of each
// other: with equal chunks the caller waited up to a whole chunk (1/4 of a
// thread's share) at the end of every job. Workers spin briefly (kSpinMicros) on an atomic before sleeping on
// a condition variable, chunks are claimed with an atomic counter, and the
// caller never waits for a worker that has not joined the job: a job is
// open while the caller works through it; a worker joins only while it is
// open, and once the caller has run out of chunks it closes the job and
// waits just for the workers inside. So a worker that is asleep or
// descheduled (a loaded machine) costs nothing but its share of the work.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace layerstream::kernels {

class ThreadPool {
 public:
  // n_threads in total, counting the caller (0 = hardware concurrency).
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over disjoint chunks covering [0, n), each at least
  // `grain` long (except the last). Returns when all chunks are done.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop();
  void run_chunks();

  static constexpr int kSpinMicros = 30;

  std::vector<std::thread> workers_;
  std::mutex job_mu_;  // serialises parallel_for callers
  std::mutex mu_;      // for the condition variables only (sleeping and waking)
  std::condition_variable start_cv_, done_cv_;
  // (generation << 1) | open. A job's fields below are written while no
  // worker is inside (running_ == 0, job closed), then the new generation is
  // published open (release); a worker reads them only after joining.
  std::atomic<uint64_t> state_{0};
  std::atomic<int> running_{0};  // workers inside the current job
  std::atomic<bool> stop_{false};
  static constexpr int kMaxChunks = 128;

  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int n_chunks_ = 0;
  int64_t bounds_[kMaxChunks + 1] = {};  // chunk c is [bounds_[c], bounds_[c + 1])
  std::atomic<int> next_{0};             // first unclaimed chunk
};

// Runs fn over [0, n) on pool, or inline when pool is null.
inline void parallel_rows(ThreadPool* pool, int64_t n, int64_t grain,
                          const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (!pool || pool->size() == 1 || n <= grain) {
    fn(0, n);
  } else {
    pool->parallel_for(n, grain, fn);
  }
}

}  // namespace layerstream::kernels
