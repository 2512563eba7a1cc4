// The OpenAI wire format: request bodies of /v1/completions and
// /v1/chat/completions parsed into GenerationRequest inputs (with a specific
// error for each wrong field), and the response and stream-chunk bodies.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "layerstream/sampler.h"
#include "layerstream/status.h"
#include "runtime/serve/chat_request.h"
#include "runtime/serve/request.h"

namespace layerstream::serve {

// A client-visible failure: HTTP status and OpenAI's error object.
struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending field, or empty
  std::string code;   // e.g. model_not_found
  nlohmann::json body() const;
};

// What both endpoints take.
struct CompletionParams {
  std::string model;
  bool chat = false;
  std::string prompt;                 // completions
  ChatRequest conversation;           // chat: messages, tools, tool_choice
  int max_tokens = -1;                // -1: not given
  SamplingOptions sampling;
  std::vector<std::string> stop;
  bool stream = false, include_usage = false;
  int n = 1;          // choices
  int logprobs = -1;  // >= 0: logprobs with this many alternatives (chat: top_logprobs)
  bool echo = false;  // completions: the prompt before the text (and its logprobs)
  StructuredOutput structured;  // chat: response_format; both: vLLM's guided_json / guided_regex / guided_grammar
  std::string structured_field;  // the field `structured` came from (errors name it)
};

// The sampling values the library refuses (validate_sampling), as a 400
// naming the request field; `n_vocab` checks logit_bias token ids.
std::optional<ApiError> check_sampling(const SamplingOptions& sampling, int n_vocab);

// Parses a request body. `served_model` is the only model id accepted.
std::optional<ApiError> parse_completion_request(const std::string& body, bool chat,
                                                 const std::string& served_model, CompletionParams& out);

// Response bodies. `id` like "cmpl-1", `created` in seconds since the epoch.
struct ResponseIds {
  std::string id, model;
  int64_t created = 0;
};
// One choice of a response: its text (after the prompt with echo), why it
// ended, and its logprobs object (null when not asked).
struct Choice {
  std::string text;
  FinishReason reason = FinishReason::kNone;
  nlohmann::json logprobs;
};
// `usage`: the request's token counts (completion tokens of every choice).
nlohmann::json completion_response(const ResponseIds& ids, bool chat, const std::vector<Choice>& choices,
                                   const RequestState::Chunk& usage);
// One SSE chunk of choice `index`: `text` (may be empty), the finish reason
// when it ends, its tokens' logprobs; `first` (chat) adds the assistant role.
nlohmann::json stream_chunk(const ResponseIds& ids, bool chat, int index, const std::string& text, bool first,
                            FinishReason reason, nlohmann::json logprobs = nullptr);
// A token's text as the logprobs show it.
using TokenText = std::function<std::string(int32_t)>;
// completions with echo: the prompt's first token and the logprobs of the rest.
struct EchoedPrompt {
  int32_t first_token = 0;
  const std::vector<TokenLogprob>* logprobs = nullptr;
};
// The logprobs object of a choice: chat {"content": [{token, logprob, bytes,
// top_logprobs}]}, completions {tokens, token_logprobs, top_logprobs,
// text_offset} (with `echo`, the prompt's tokens first, the first with null;
// offsets count from `text_offset`).
nlohmann::json logprobs_json(bool chat, const std::vector<TokenLogprob>& logprobs, const TokenText& text_of,
                             const EchoedPrompt* echo = nullptr, size_t text_offset = 0);
// OpenAI's usage object; prompt_tokens_details.cached_tokens: the prompt
// tokens the prefix cache supplied (not prefilled).
nlohmann::json usage_json(const RequestState::Chunk& c);

}  // namespace layerstream::serve
