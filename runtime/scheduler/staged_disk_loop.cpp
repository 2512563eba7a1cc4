// DiskLoader's staged path (disk_loader.h): reads into the pinned staging
// ring run ahead over every layer handed over; each chunk's H2D copy is
// issued on the disk-copy stream as it lands, in layer order, and a buffer
// is reused only after the event recorded behind its copy completes. No
// stream ever runs a blocking host function.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>

#include "runtime/core/status_macros.h"
#include "runtime/scheduler/disk_loader.h"
#include "runtime/scheduler/plan.h"

namespace layerstream::sched {

using Clock = std::chrono::steady_clock;

namespace {
uint64_t aligned_begin(const LayerSpec& l) { return l.file_offset / kSlotAlignment * kSlotAlignment; }
}  // namespace

// Staged path: reads into the staging buffers run ahead over every layer
// handed over; copies are issued in layer order, each chunk as it lands.
// The loop's state lives on the disk thread (StagedLoop); each turn:
// take the new jobs (drop abandoned ones, sleep when idle), free the buffers
// whose copies finished, submit reads into free buffers, issue the copies of
// landed chunks, and when none of that made progress wait for a completion.
class DiskLoader::StagedLoop {
 public:
  explicit StagedLoop(DiskLoader& d) : d_(d) {}

  void run() {
    for (;;) {
      if (!take_jobs()) return;
      if (idle()) {
        wait_for_work();
        continue;
      }
      init_buffers();
      bool progress = false;
      Status st = free_copied_buffers(progress);
      if (st.ok()) st = submit_reads(progress);
      if (st.ok()) st = issue_copies(progress);
      if (st.ok() && !progress) st = wait_for_completion();
      if (!st.ok()) return fail(st);
    }
  }

 private:
  // One disk job being read and copied.
  struct Active {
    DiskJob job;
    uint64_t chunks = 0, next_read = 0, landed_count = 0, copied = 0;
    std::deque<std::pair<uint64_t, unsigned>> landed;  // (chunk, buffer) waiting for their copy
    bool started = false;
    bool dropped = false;    // abandoned by finish_or_drop_jobs(): no more reads, no copies
    uint64_t reading = 0;    // reads in flight
    Clock::time_point t0{}, t_last{};
  };
  // One read in flight, by staging buffer.
  struct InFlight {
    uint64_t g = 0, chunk = 0, offset = 0, bytes = 0;
    io::Reader* reader = nullptr;
    Clock::time_point t0{};
  };

  double us(Clock::time_point t) const { return d_.trace_us(t); }
  bool idle() const { return active_.empty() && inflight_.empty() && busy_bufs_.empty(); }
  // A failure and the layer it is about (front of the queue by default).
  Status failed(const Status& st, int layer) {
    fail_layer_ = layer;
    return st;
  }
  int front_layer() const { return active_.empty() ? 0 : active_.front().job.layer; }

  // The new jobs; under finish_or_drop_jobs(), drops the jobs whose copies wait for a
  // compute that was never enqueued. False when the loader stops.
  bool take_jobs() LS_EXCLUDES(d_.mu_) {
    MutexLock l(d_.mu_);
    if (d_.stop_) return false;
    while (!d_.jobs_.empty()) {
      Active a;
      a.job = d_.jobs_.front();
      d_.jobs_.pop_front();
      active_.push_back(a);
    }
    done_rec_ = d_.done_recorded_;
    if (d_.abandon_) {
      // need is non-decreasing in g, so the dropped jobs are a tail of the list.
      for (Active& a : active_)
        if (!a.started && a.job.need >= 0 && static_cast<uint64_t>(a.job.need) >= done_rec_) a.dropped = true;
    }
    while (!active_.empty() && active_.back().dropped) {
      Active& a = active_.back();
      for (auto& [c, b] : a.landed) free_bufs_.push_back(b);
      a.landed.clear();
      if (a.reading > 0) break;  // its reads must land first (they write staging buffers)
      active_.pop_back();
      ++d_.finished_;
      d_.cv_.notify_all();
    }
    return true;
  }

  // Nothing in flight: sleeps until a job, a stop or finish_or_drop_jobs().
  void wait_for_work() LS_EXCLUDES(d_.mu_) {
    MutexLock l(d_.mu_);
    while (!(d_.stop_ || !d_.jobs_.empty() || d_.abandon_)) d_.cv_.wait(d_.mu_);
    if (d_.jobs_.empty() && !d_.stop_) {  // abandon_ with nothing to drop: let finish_or_drop_jobs() see it
      d_.cv_.notify_all();
      while (!(d_.stop_ || !d_.jobs_.empty() || !d_.abandon_)) d_.cv_.wait(d_.mu_);
    }
  }

  // apply_plan creates the ring before posting the first disk job.
  void init_buffers() {
    if (have_ring_) return;
    for (unsigned b = 0; b < d_.ring_->buffer_count(); ++b) free_bufs_.push_back(d_.ring_->buffer_count() - 1 - b);
    have_ring_ = true;
  }

  // 1. Buffers whose copy finished are free again.
  Status free_copied_buffers(bool& progress) {
    while (!busy_bufs_.empty()) {
      auto q = d_.buf_done_[busy_bufs_.front()]->query();
      if (!q.ok()) return failed(q.status(), front_layer());
      if (!*q) break;
      free_bufs_.push_back(busy_bufs_.front());
      busy_bufs_.pop_front();
      progress = true;
    }
    return Status::OK();
  }

  // 2. Reads into every free buffer, layers in order.
  Status submit_reads(bool& progress) LS_EXCLUDES(d_.mu_) {
    const uint64_t cb = d_.ring_->buffer_bytes();
    for (Active& a : active_) {
      if (a.dropped) break;
      const LayerSpec& l = d_.layers_[a.job.layer];
      const uint64_t span = d_.spans_[a.job.layer];
      if (a.chunks == 0) a.chunks = (span + cb - 1) / cb;
      while (a.next_read < a.chunks && !free_bufs_.empty()) {
        const unsigned b = free_bufs_.back();
        const uint64_t off = aligned_begin(l) + a.next_read * cb, n = std::min(cb, span - a.next_read * cb);
        io::Reader* rd = d_.readers_.at(l.file).get();
        if (a.next_read == 0) a.t0 = Clock::now();
        if (Status st = rd->submit({off, n, d_.ring_->iovecs()[b].iov_base, b}); !st.ok()) return failed(st, a.job.layer);
        free_bufs_.pop_back();
        inflight_[b] = {a.job.g, a.next_read, off, n, rd, Clock::now()};
        ++a.next_read;
        ++a.reading;
        progress = true;
      }
      if (free_bufs_.empty()) break;
    }
    MutexLock lk(d_.mu_);
    d_.reads_.max_in_flight = std::max<int>(d_.reads_.max_in_flight, static_cast<int>(inflight_.size()));
    return Status::OK();
  }

  // 3. Copies of landed chunks, in layer order; a layer whose chunks are all
  // copied records its events and is handed back.
  Status issue_copies(bool& progress) LS_EXCLUDES(d_.mu_) {
    while (!active_.empty()) {
      Active& a = active_.front();
      if (!a.started) {
        if (a.landed.empty() || a.dropped) break;
        // Its region is free once the compute it overwrites is done; that
        // "done" must be recorded before the copy stream can wait on it.
        if (a.job.need >= 0 && static_cast<uint64_t>(a.job.need) >= done_rec_) break;
        Status st;
        if (a.job.need_done) st = d_.opt_.disk_copy->wait(*a.job.need_done);
        if (st.ok()) st = d_.opt_.disk_copy->record(*a.job.k_start);
        if (!st.ok()) return failed(st, a.job.layer);
        d_.opt_.disk_copy->range_push(d_.layers_[a.job.layer].name.c_str());
        a.started = true;
      }
      LS_RETURN_IF_ERROR(copy_landed_chunks(a, progress));
      if (a.copied < a.chunks) break;
      LS_RETURN_IF_ERROR(finish_layer(a));
      active_.pop_front();
    }
    return Status::OK();
  }

  Status copy_landed_chunks(Active& a, bool& progress) {
    const uint64_t cb = d_.ring_->buffer_bytes(), span = d_.spans_[a.job.layer];
    while (!a.landed.empty()) {
      auto [c, b] = a.landed.front();
      a.landed.pop_front();
      Status st = d_.opt_.disk_copy->copy_h2d(a.job.dst + c * cb, d_.ring_->iovecs()[b].iov_base, std::min(cb, span - c * cb));
      if (st.ok()) st = d_.opt_.disk_copy->record(*d_.buf_done_[b]);
      if (!st.ok()) return failed(st, a.job.layer);
      busy_bufs_.push_back(b);
      ++a.copied;
      progress = true;
    }
    return Status::OK();
  }

  // The layer's last copy is issued: its "loaded" event, its read sample.
  Status finish_layer(const Active& a) LS_EXCLUDES(d_.mu_) {
    const uint64_t span = d_.spans_[a.job.layer];
    d_.opt_.disk_copy->range_pop();
    Status st = d_.opt_.disk_copy->record(*a.job.k_end);
    if (st.ok()) st = d_.opt_.disk_copy->record(*a.job.loaded);
    if (!st.ok()) return failed(st, a.job.layer);
    {
      MutexLock lk(d_.mu_);
      d_.reads_.trace.push_back(
          {TraceKind::kDiskRead, a.job.layer, a.job.slot_index, a.job.pass, us(a.t0), us(a.t_last), span});
      d_.ready_ = a.job.g + 1;
      ++d_.finished_;
    }
    d_.cv_.notify_all();
    return Status::OK();
  }

  // 4. Nothing to do until a read lands, a copy finishes, a "done" is
  // recorded, a new job comes or finish_or_drop_jobs() asks.
  Status wait_for_completion() LS_EXCLUDES(d_.mu_) {
    if (!inflight_.empty()) return land_reads();
    if (!busy_bufs_.empty()) {
      Status st = d_.buf_done_[busy_bufs_.front()]->synchronize();
      return st.ok() ? st : failed(st, front_layer());
    }
    MutexLock l(d_.mu_);
    while (!(d_.stop_ || !d_.jobs_.empty() || d_.done_recorded_ != done_rec_ || d_.abandon_)) d_.cv_.wait(d_.mu_);
    return Status::OK();
  }

  // Completed reads (waiting up to 20 ms): each chunk joins its layer's
  // landed list, or frees its buffer when the layer was dropped.
  Status land_reads() LS_EXCLUDES(d_.mu_) {
    io::Reader* rd = inflight_.begin()->second.reader;
    io::ReadCompletion done[64];
    auto got = rd->wait(std::span<io::ReadCompletion>(done, 64), std::chrono::milliseconds(20));
    if (!got.ok()) return failed(got.status(), front_layer());
    const auto now = Clock::now();
    for (size_t j = 0; j < *got; ++j) {
      const io::ReadCompletion& c = done[j];
      auto it = inflight_.find(static_cast<unsigned>(c.tag));
      if (it == inflight_.end()) continue;
      const InFlight f = it->second;
      inflight_.erase(it);
      Active* a = nullptr;
      for (Active& x : active_)
        if (x.job.g == f.g) a = &x;
      if (a == nullptr) continue;
      --a->reading;
      if (a->dropped) {
        free_bufs_.push_back(static_cast<unsigned>(c.tag));
        continue;
      }
      const LayerSpec& l = d_.layers_[a->job.layer];
      if (!c.status.ok()) return failed(c.status, a->job.layer);
      if (c.bytes_read < f.bytes && f.offset + c.bytes_read < l.file_offset + l.bytes)
        return failed(Status::IOError(fmt::format("{}: short read of layer {} at offset {} ({} of {} bytes)", l.file,
                                                  a->job.layer, f.offset, c.bytes_read, f.bytes)),
                      a->job.layer);
      a->landed.push_back({f.chunk, static_cast<unsigned>(c.tag)});
      ++a->landed_count;
      a->t_last = now;
      MutexLock lk(d_.mu_);
      d_.reads_.trace.push_back(
          {TraceKind::kDiskChunk, a->job.layer, static_cast<int>(c.tag), a->job.pass, us(f.t0), us(now), f.bytes});
    }
    return Status::OK();
  }

  // The error goes to the pass loop; nothing may touch the buffers after it:
  // the reads are cancelled, the copies finished; then wait for the stop.
  void fail(const Status& st) LS_EXCLUDES(d_.mu_) {
    d_.set_error(st, fail_layer_ >= 0 ? fail_layer_ : front_layer());
    for (auto& [path, rd] : d_.readers_) rd->cancel();
    if (d_.opt_.disk_copy) (void)d_.opt_.disk_copy->synchronize();
    MutexLock l(d_.mu_);
    while (!d_.stop_) d_.cv_.wait(d_.mu_);
  }

  DiskLoader& d_;
  std::deque<Active> active_;
  std::vector<unsigned> free_bufs_;
  std::deque<unsigned> busy_bufs_;  // copies issued, oldest first
  std::map<unsigned, InFlight> inflight_;
  bool have_ring_ = false;
  uint64_t done_rec_ = 0;  // done_recorded_ as last seen
  int fail_layer_ = -1;
};

void DiskLoader::run_staged() { StagedLoop(*this).run(); }

}  // namespace layerstream::sched
