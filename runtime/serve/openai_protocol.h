// The OpenAI wire format: request bodies of /v1/completions and
// /v1/chat/completions parsed into GenerationRequest inputs (with a specific
// error for each wrong field), and the response and stream-chunk bodies.
#pragma once

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
};

// Parses a request body. `served_model` is the only model id accepted.
std::optional<ApiError> parse_completion_request(const std::string& body, bool chat,
                                                 const std::string& served_model, CompletionParams& out);

// Response bodies. `id` like "cmpl-1", `created` in seconds since the epoch.
struct ResponseIds {
  std::string id, model;
  int64_t created = 0;
};
nlohmann::json completion_response(const ResponseIds& ids, bool chat, const RequestState::Chunk& all);
// One SSE chunk: `text` (may be empty), the finish reason when it ends;
// `first` (chat) adds the assistant role to the delta.
nlohmann::json stream_chunk(const ResponseIds& ids, bool chat, const std::string& text, bool first,
                            FinishReason reason);
// OpenAI's usage object; prompt_tokens_details.cached_tokens: the prompt
// tokens the prefix cache supplied (not prefilled).
nlohmann::json usage_json(const RequestState::Chunk& c);

}  // namespace layerstream::serve
