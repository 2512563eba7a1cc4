#include "runtime/serve/request.h"

namespace layerstream::serve {

void RequestState::set_cached_tokens(int n) {
  std::lock_guard lock(mu_);
  cached_tokens_ = n;
}

void RequestState::set_prompt_logprobs(std::vector<TokenLogprob> logprobs) {
  std::lock_guard lock(mu_);
  prompt_logprobs_ = std::move(logprobs);
}

void RequestState::append(const std::string& text, int completion_tokens, const TokenLogprob* logprob) {
  {
    std::lock_guard lock(mu_);
    unread_ += text;
    if (logprob) unread_logprobs_.push_back(*logprob);
    completion_tokens_ = completion_tokens;
  }
  cv_.notify_all();
}

void RequestState::finish(FinishReason reason, Failure failure, std::string error) {
  {
    std::lock_guard lock(mu_);
    if (done_) return;
    done_ = true;
    reason_ = reason;
    failure_ = failure;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

bool RequestState::next(Chunk& out, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return done_ || !unread_.empty() || !unread_logprobs_.empty(); }))
    return false;
  out.text = std::move(unread_);
  unread_.clear();
  out.logprobs = std::move(unread_logprobs_);
  unread_logprobs_.clear();
  out.prompt_logprobs = std::move(prompt_logprobs_);
  prompt_logprobs_.clear();
  out.done = done_;
  out.reason = reason_;
  out.failure = failure_;
  out.error = error_;
  out.prompt_tokens = prompt_tokens_;
  out.completion_tokens = completion_tokens_;
  out.cached_tokens = cached_tokens_;
  return true;
}

RequestState::Chunk RequestState::wait_all() {
  Chunk all;
  for (Chunk c; !all.done;) {
    if (!next(c, std::chrono::milliseconds(200))) continue;
    all.text += c.text;
    all.logprobs.insert(all.logprobs.end(), c.logprobs.begin(), c.logprobs.end());
    if (!c.prompt_logprobs.empty()) all.prompt_logprobs = std::move(c.prompt_logprobs);
    all.done = c.done;
    all.reason = c.reason;
    all.failure = c.failure;
    all.error = c.error;
    all.prompt_tokens = c.prompt_tokens;
    all.completion_tokens = c.completion_tokens;
    all.cached_tokens = c.cached_tokens;
  }
  return all;
}

void RequestState::cancel() {
  std::lock_guard lock(mu_);
  cancelled_ = true;
}

bool RequestState::cancelled() const {
  std::lock_guard lock(mu_);
  return cancelled_;
}

bool RequestState::done() const {
  std::lock_guard lock(mu_);
  return done_;
}

}  // namespace layerstream::serve
