// Tool calls in OpenAI's chat responses: a model's reply split by the chat
// template's tool-call format (layerstream/chat.h), written into a
// chat.completion body or streamed as tool_calls deltas.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "layerstream/chat.h"

namespace layerstream::serve {

struct ResponseIds;

// Rules a request set for the reply's tool calls; absent: none parsed.
struct ToolCallRules {
  ToolCallFormat format = ToolCallFormat::kNone;
  bool parallel = true;  // false: only the first call is kept (parallel_tool_calls)
};

// `out`'s calls cut to what `rules` allow.
void apply_rules(const ToolCallRules& rules, ChatOutput& out);

// Choice `index` of a chat.completion `response` with `out`'s text and
// calls: message.content null when the reply is only calls,
// message.tool_calls, and finish_reason "tool_calls" where the model stopped
// by itself.
void set_chat_output(nlohmann::json& response, size_t index, const ChatOutput& out);

// A stream chunk (one choice) whose delta carries `calls` as OpenAI's
// tool_calls deltas: {index, id, type: "function", function: {name, arguments}}.
void set_tool_calls_delta(nlohmann::json& chunk, const std::vector<ToolCall>& calls);

// The end of choice `index`'s streamed chat reply: what `stream` held, as
// chunks (its text as a content delta, its calls, cut to `rules`, as one
// tool_calls delta).
struct HeldReply {
  std::vector<nlohmann::json> chunks;
  bool has_calls = false;
};
HeldReply finish_streamed_reply(ToolCallStream& stream, const ToolCallRules& rules, const ResponseIds& ids,
                                int index);

// finish_reason "stop" becomes "tool_calls" in choice `index` (of the chunk
// or response that ends a reply holding calls; a chunk has one choice).
void finish_with_tool_calls(nlohmann::json& chunk_or_response, size_t index = 0);

}  // namespace layerstream::serve
