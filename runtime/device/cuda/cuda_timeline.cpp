#include "runtime/device/cuda/cuda_timeline.h"

#include <vector>

#include "runtime/core/log.h"
#include "runtime/core/status_macros.h"

namespace layerstream::cuda {

Result<std::shared_ptr<CudaTimeline>> CudaTimeline::create(std::chrono::nanoseconds period) {
  LS_ASSIGN_OR_RETURN(UniqueStream stream, create_stream(cudaStreamNonBlocking, "cudaStreamCreate(timeline)"));
  std::shared_ptr<CudaTimeline> t(new CudaTimeline(std::move(stream), period));
  auto first = std::make_shared<Anchor>();
  LS_ASSIGN_OR_RETURN(first->event, create_event(cudaEventDefault, "cudaEventCreate(timeline anchor)"));
  LS_CUDA_RETURN_IF_ERROR(cudaEventRecord(first->event.get(), t->stream_.get()));
  first->resolved = true;  // the origin: offset 0
  t->newest_ = std::move(first);
  t->newest_at_ = std::chrono::steady_clock::now();
  t->anchors_ = 1;
  return t;
}

std::shared_ptr<CudaTimeline::Anchor> CudaTimeline::anchor_for_record() {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  if (now - newest_at_ < period_) return newest_;
  // The newest anchor was recorded a period ago on an idle stream: it is
  // complete, so resolving it now is cheap and keeps the chain two long.
  if (Status s = resolve(*newest_); !s.ok()) {
    LS_LOG_WARN("cuda timeline: {}", s.message());
    return newest_;
  }
  auto next = std::make_shared<Anchor>();
  auto ev = create_event(cudaEventDefault, "cudaEventCreate(timeline anchor)");
  if (!ev.ok()) {
    LS_LOG_WARN("cuda timeline: {}", ev.status().message());
    return newest_;
  }
  next->event = std::move(ev).value();
  const cudaError_t err = cudaEventRecord(next->event.get(), stream_.get());
  if (err != cudaSuccess) {
    LS_LOG_WARN("cuda timeline: {}", cuda_error(err, "cudaEventRecord(anchor)", __FILE__, __LINE__).message());
    return newest_;
  }
  next->prev = newest_;
  newest_ = std::move(next);
  newest_at_ = now;
  ++anchors_;
  return newest_;
}

Status CudaTimeline::resolve(Anchor& a) {
  if (a.resolved) return Status::OK();
  std::vector<Anchor*> chain;  // newest first
  for (Anchor* x = &a; x != nullptr && !x->resolved; x = x->prev.get()) chain.push_back(x);
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    Anchor& x = **it;
    if (!x.prev) return Status::Internal("cuda timeline: an anchor lost its predecessor before it was resolved");
    LS_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(x.event.get()));
    float ms = 0;
    LS_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, x.prev->event.get(), x.event.get()));
    x.offset_ms = x.prev->offset_ms + static_cast<double>(ms);
    x.resolved = true;
    x.prev.reset();
  }
  return Status::OK();
}

Result<double> CudaTimeline::elapsed_ms(cudaEvent_t start, const std::shared_ptr<Anchor>& start_anchor,
                                        cudaEvent_t end, const std::shared_ptr<Anchor>& end_anchor) {
  float direct = 0;
  if (!start_anchor || !end_anchor || start_anchor == end_anchor) {
    LS_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&direct, start, end));
    return static_cast<double>(direct);
  }
  double a0 = 0, a1 = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    LS_RETURN_IF_ERROR(resolve(*start_anchor));
    LS_RETURN_IF_ERROR(resolve(*end_anchor));
    a0 = start_anchor->offset_ms;
    a1 = end_anchor->offset_ms;
  }
  float d0 = 0, d1 = 0;
  LS_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&d0, start_anchor->event.get(), start));
  LS_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&d1, end_anchor->event.get(), end));
  return (a1 - a0) + (static_cast<double>(d1) - static_cast<double>(d0));
}

int CudaTimeline::anchors_recorded() const {
  std::lock_guard<std::mutex> lock(mu_);
  return anchors_;
}

}  // namespace layerstream::cuda
