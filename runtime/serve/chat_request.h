// The chat-only fields of a /v1/chat/completions request: `messages` (with
// tool calls and tool results), `tools`, `tool_choice` and
// `parallel_tool_calls`, checked field by field (400 naming the field).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "layerstream/chat.h"

namespace layerstream::serve {

struct ApiError;

// What the client lets the model do with its tools. kRequired and kNamed
// are enforced by a grammar (forced_tool_calls in layerstream/chat.h).
enum class ToolChoice {
  kNone,      // no calls (the tools stay in the prompt)
  kAuto,      // the model may call
  kRequired,  // the reply is one or more calls
  kNamed,     // the reply calls ChatRequest::tool_name
};

struct ChatRequest {
  std::vector<ChatMessage> messages;
  std::string tools_json;  // OpenAI's `tools` as JSON text; empty: none
  ToolChoice tool_choice = ToolChoice::kNone;
  std::string tool_name;  // kNamed: the function to call
  bool parallel_tool_calls = true;  // false: the first call only
};

std::optional<ApiError> parse_chat_request(const nlohmann::json& body, ChatRequest& out);

}  // namespace layerstream::serve
