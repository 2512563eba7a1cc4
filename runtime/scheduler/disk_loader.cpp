#include "runtime/scheduler/disk_loader.h"

#include <fmt/format.h>

#include <algorithm>

#include "runtime/core/status_macros.h"
#include "runtime/scheduler/plan.h"

namespace layerstream::sched {

using Clock = std::chrono::steady_clock;

DiskLoader::DiskLoader(const std::vector<LayerSpec>& layers, const std::vector<uint64_t>& spans,
                       DiskLoaderOptions options)
    : layers_(layers), spans_(spans), opt_(std::move(options)) {}

DiskLoader::~DiskLoader() {
  stop();
  for (auto& [path, r] : readers_) r->cancel();
}

Result<io::Reader*> DiskLoader::reader_for(const std::string& path) {
  auto it = readers_.find(path);
  if (it != readers_.end()) return it->second.get();
  io::ReaderOptions ro = opt_.reader;
  if (!opt_.direct) {
    // One request per staging buffer, all of them in flight at once.
    ro.chunk_bytes = std::max<size_t>(ro.chunk_bytes, round_up(opt_.staging_buffer_bytes, 4096));
    ro.queue_depth = std::max(ro.queue_depth, opt_.staging_buffers);
  }
  LS_ASSIGN_OR_RETURN(auto r, io::open_reader(path, ro));
  io::Reader* raw = r.get();
  readers_.emplace(path, std::move(r));
  return raw;
}

Status DiskLoader::ensure_staging_ring(Device& dev) {
  if (opt_.direct || ring_) return Status::OK();
  // No more buffers (or bigger ones) than the file-backed layers can fill.
  uint64_t file_spans = 0, max_span = 0;
  for (size_t i = 0; i < layers_.size(); ++i)
    if (layers_[i].from_file()) {
      file_spans += spans_[i];
      max_span = std::max(max_span, spans_[i]);
    }
  io::StagingRingOptions ro;
  ro.buffer_bytes = std::min(round_up(opt_.staging_buffer_bytes, 4096), max_span);
  ro.buffer_count = static_cast<unsigned>(
      std::clamp<uint64_t>((file_spans + ro.buffer_bytes - 1) / ro.buffer_bytes, 2, opt_.staging_buffers));
  ro.pin = [&dev](void* d, size_t b) { return dev.register_host(d, b); };
  LS_ASSIGN_OR_RETURN(ring_, io::StagingRing::create(ro));
  for (auto& [path, rd] : readers_) LS_RETURN_IF_ERROR(rd->register_buffers(ring_->iovecs()));
  while (buf_done_.size() < ring_->buffer_count()) {
    LS_ASSIGN_OR_RETURN(auto e, dev.create_event());
    buf_done_.push_back(std::move(e));
  }
  return Status::OK();
}

void DiskLoader::start() {
  thread_ = std::thread([this] {
    if (opt_.direct) run_direct();
    else run_staged();
  });
}

void DiskLoader::request_stop() {
  {
    MutexLock l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
}

void DiskLoader::stop() {
  request_stop();
  if (thread_.joinable()) thread_.join();
}

void DiskLoader::post(const DiskJob& job) {
  {
    MutexLock lk(mu_);
    jobs_.push_back(job);
    ++posted_;
  }
  cv_.notify_all();
}

Status DiskLoader::wait_ready(uint64_t g) { return wait_counter(&DiskLoader::ready_, g + 1); }

void DiskLoader::set_done_recorded(uint64_t count) {
  {
    MutexLock lk(mu_);
    done_recorded_ = count;
  }
  cv_.notify_all();
}

void DiskLoader::set_computed(uint64_t count) {
  {
    MutexLock lk(mu_);
    computed_ = count;
  }
  cv_.notify_all();
}

Status DiskLoader::error() const {
  MutexLock l(mu_);
  return error_;
}

void DiskLoader::finish_or_drop_jobs() {
  MutexLock l(mu_);
  abandon_ = true;
  cv_.notify_all();
  while (!(finished_ == posted_ || !error_.ok() || stop_)) cv_.wait(mu_);
  abandon_ = false;
}

void DiskLoader::reset_counters() {
  MutexLock l(mu_);
  computed_ = ready_ = done_recorded_ = 0;
}

DiskReads DiskLoader::take_reads() {
  DiskReads r;
  MutexLock lk(mu_);
  std::swap(r, reads_);
  return r;
}

Status DiskLoader::wait_counter(uint64_t DiskLoader::*counter, uint64_t at_least) {
  MutexLock l(mu_);
  while (!(this->*counter >= at_least || stop_ || !error_.ok())) cv_.wait(mu_);
  if (!error_.ok()) return error_;
  if (this->*counter < at_least) return Status::Cancelled("executor shutting down");
  return Status::OK();
}

void DiskLoader::set_error(const Status& st, int layer) {
  {
    MutexLock lk(mu_);
    if (error_.ok() && !st.IsCancelled())
      error_ = st.WithContext(fmt::format("disk read of layer {} ({})", layer, layers_[layer].name));
  }
  cv_.notify_all();
}

double DiskLoader::trace_us(Clock::time_point t) const {
  return std::chrono::duration<double, std::micro>(t - opt_.host_ref).count();
}

// Direct path: one layer at a time, read straight into its region once the
// region is free (the compute it waits for has finished).
void DiskLoader::run_direct() {
  for (;;) {
    DiskJob job;
    {
      MutexLock l(mu_);
      while (!(stop_ || (!jobs_.empty() && error_.ok()))) cv_.wait(mu_);
      if (stop_) return;
      job = jobs_.front();
      jobs_.pop_front();
    }
    const LayerSpec& l = layers_[job.layer];
    io::Reader* rd = readers_.at(l.file).get();
    Status st;
    if (job.need >= 0) st = wait_counter(&DiskLoader::computed_, static_cast<uint64_t>(job.need) + 1);
    if (st.ok()) st = read_direct(job, *rd);
    if (!st.ok()) set_error(st, job.layer);
  }
}

// One layer's read into its region, then its sample and trace event; the
// layer is ready.
Status DiskLoader::read_direct(const DiskJob& job, io::Reader& rd) {
  const LayerSpec& l = layers_[job.layer];
  const uint64_t begin = l.file_offset / kSlotAlignment * kSlotAlignment, span = spans_[job.layer];
  const auto t0 = Clock::now();
  LS_RETURN_IF_ERROR(rd.submit({begin, span, job.dst, job.g}));
  io::ReadCompletion c;
  LS_ASSIGN_OR_RETURN(size_t got, rd.wait(std::span<io::ReadCompletion>(&c, 1)));
  if (got != 1) return Status::Internal("reader returned no completion");
  LS_RETURN_IF_ERROR(c.status);
  if (begin + c.bytes_read < l.file_offset + l.bytes)
    return Status::IOError(fmt::format("{}: short read of layer {} at offset {} ({} of {} bytes)", l.file, job.layer,
                                       begin, c.bytes_read, span));
  {
    MutexLock lk(mu_);
    const auto t1 = Clock::now();
    reads_.trace.push_back({TraceKind::kDiskRead, job.layer, job.slot_index, job.pass, trace_us(t0), trace_us(t1), span});
    reads_.max_in_flight = std::max<int>(reads_.max_in_flight, static_cast<int>(std::min<uint64_t>(
                                                                   rd.queue_depth(), (span + rd.chunk_bytes() - 1) / rd.chunk_bytes())));
    ready_ = job.g + 1;
    ++finished_;
  }
  cv_.notify_all();
  return Status::OK();
}

}  // namespace layerstream::sched
