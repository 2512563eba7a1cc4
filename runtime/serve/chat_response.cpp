#include "runtime/serve/chat_response.h"

#include "runtime/serve/openai_protocol.h"

namespace layerstream::serve {

using nlohmann::json;

void apply_rules(const ToolCallRules& rules, ChatOutput& out) {
  if (!rules.parallel && out.tool_calls.size() > 1) out.tool_calls.resize(1);
}

namespace {

json call_json(const ToolCall& c) {
  return {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
}

}  // namespace

void finish_with_tool_calls(json& chunk_or_response, size_t index) {
  json& reason = chunk_or_response["choices"][index]["finish_reason"];
  if (reason == "stop") reason = "tool_calls";
}

void set_chat_output(json& response, size_t index, const ChatOutput& out) {
  json& message = response["choices"][index]["message"];
  if (out.tool_calls.empty()) {
    message["content"] = out.content;
    return;
  }
  message["content"] = out.content.empty() ? json() : json(out.content);
  json calls = json::array();
  for (const ToolCall& c : out.tool_calls) calls.push_back(call_json(c));
  message["tool_calls"] = std::move(calls);
  finish_with_tool_calls(response, index);
}

void set_tool_calls_delta(json& chunk, const std::vector<ToolCall>& calls) {
  json deltas = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json d = call_json(calls[i]);
    d["index"] = i;
    deltas.push_back(std::move(d));
  }
  chunk["choices"][0]["delta"] = {{"tool_calls", std::move(deltas)}};
}

HeldReply finish_streamed_reply(ToolCallStream& stream, const ToolCallRules& rules, const ResponseIds& ids,
                                int index) {
  ChatOutput held = stream.finish();
  apply_rules(rules, held);
  HeldReply out;
  if (!held.content.empty())
    out.chunks.push_back(stream_chunk(ids, /*chat=*/true, index, held.content, false, FinishReason::kNone));
  if (!held.tool_calls.empty()) {
    json delta = stream_chunk(ids, /*chat=*/true, index, "", false, FinishReason::kNone);
    set_tool_calls_delta(delta, held.tool_calls);
    out.chunks.push_back(std::move(delta));
    out.has_calls = true;
  }
  return out;
}

}  // namespace layerstream::serve
