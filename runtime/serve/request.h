// One generation request of the server and the channel its output travels
// through: the scheduler thread appends text and finishes it; the HTTP thread
// that owns the client waits for text (RequestState::next) and cancels it
// when the client goes away.
//
// Thread safety: every member of RequestState may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "layerstream/context.h"
#include "layerstream/sampler.h"
#include "layerstream/structured_output.h"

namespace layerstream::serve {

struct GenerationRequest {
  std::vector<int32_t> prompt;  // tokens, BOS included when the model wants one
  int max_tokens = 16;          // generated tokens at most (the context may stop it earlier)
  SamplingOptions sampling;
  std::vector<std::string> stop;  // stop strings: generation ends before the first match
  int logprobs = -1;              // >= 0: each token's logprob and this many top alternatives
  bool prompt_logprobs = false;   // also the prompt's (echo): its KV is prefilled, not reused
  StructuredOutput structured;    // response_format: each choice masked by its own TokenConstraint
};

// How a request ended: a generation that finished has the library's
// FinishReason (layerstream/context.h: end-of-generation token, stop
// string, max_tokens, full context; OpenAI's finish_reason from it,
// openai_protocol.cpp); the server's own ends are failures, with reason
// kNone.
enum class Failure { kNone, kCancelled, kError };

class RequestState {
 public:
  using Clock = std::chrono::steady_clock;

  // What next() hands out: new text since the last call, and whether the
  // request has ended (then reason, usage, error are final).
  struct Chunk {
    std::string text;
    bool done = false;
    FinishReason reason = FinishReason::kNone;
    Failure failure = Failure::kNone;
    std::string error;
    int prompt_tokens = 0, completion_tokens = 0;
    int cached_tokens = 0;  // prompt tokens whose KV came from the prefix cache
    // Per generated token (GenerationRequest::logprobs >= 0), in order; may
    // run ahead of `text` while text that could begin a stop is held back.
    std::vector<TokenLogprob> logprobs;
    // GenerationRequest::prompt_logprobs: of prompt tokens 1.. (in the
    // first chunk that has them).
    std::vector<TokenLogprob> prompt_logprobs;
  };

  explicit RequestState(int prompt_tokens) : prompt_tokens_(prompt_tokens), created_(Clock::now()) {}

  // Scheduler side.
  void set_cached_tokens(int n);
  void append(const std::string& text, int completion_tokens, const TokenLogprob* logprob = nullptr);
  void set_prompt_logprobs(std::vector<TokenLogprob> logprobs);
  void finish(FinishReason reason, Failure failure = Failure::kNone, std::string error = {});

  // Client side. Waits up to `timeout` for text or the end; false on timeout
  // with nothing new.
  bool next(Chunk& out, std::chrono::milliseconds timeout);
  // Waits for the end and returns everything (non-streaming responses).
  Chunk wait_all();
  void cancel();
  bool cancelled() const;
  bool done() const;
  Clock::time_point created() const { return created_; }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string unread_;
  std::vector<TokenLogprob> unread_logprobs_, prompt_logprobs_;
  bool done_ = false, cancelled_ = false;
  FinishReason reason_ = FinishReason::kNone;
  Failure failure_ = Failure::kNone;
  std::string error_;
  const int prompt_tokens_;
  int completion_tokens_ = 0, cached_tokens_ = 0;
  const Clock::time_point created_;
};

}  // namespace layerstream::serve
