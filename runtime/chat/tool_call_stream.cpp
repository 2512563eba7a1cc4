// ToolCallStream (layerstream/chat.h): what of a streamed reply may be shown
// before the reply ends. Text is released until a call may begin: the
// format's marker anywhere (<tool_call>, [TOOL_CALLS], <|python_tag|>), or,
// for Llama 3 and Mistral, a reply whose first non-blank character opens
// JSON. From there on everything is held, and finish() parses it.
#include <algorithm>
#include <utility>

#include "layerstream/chat.h"
#include "runtime/chat/tool_call_markers.h"

namespace layerstream {
namespace {

std::string_view marker_of(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return kHermesOpen;
    case ToolCallFormat::kLlama3:
      return kLlamaPythonTag;
    case ToolCallFormat::kMistral:
      return kMistralCalls;
    case ToolCallFormat::kNone:
      break;
  }
  return {};
}

// The length of the longest end of `text` that is a proper start of `marker`.
size_t partial_marker_tail(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

}  // namespace

std::string ToolCallStream::feed(std::string_view delta) {
  held_.append(delta);
  const std::string_view marker = marker_of(format_);
  if (holding_ || marker.empty()) {
    if (marker.empty()) return std::exchange(held_, {});
    return {};
  }
  // Llama 3 and Mistral write a call as the whole reply: hold a reply that
  // opens with JSON ('{' or '[') or '<' (a tag), release one that opens otherwise.
  if (!seen_text_ && format_ != ToolCallFormat::kHermes) {
    const size_t first = held_.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) return {};
    const std::string_view start = std::string_view(held_).substr(first);
    if (start[0] == '{' || start[0] == '[' || start.substr(0, marker.size()) == marker) {
      holding_ = true;
      return {};
    }
    if (start.size() < marker.size() && marker.substr(0, start.size()) == start) return {};  // may be the tag
    seen_text_ = true;
  }
  const size_t at = held_.find(marker);
  if (at != std::string::npos) {
    holding_ = true;
    std::string shown = held_.substr(0, at);
    held_.erase(0, at);
    return shown;
  }
  const size_t keep = partial_marker_tail(held_, marker);
  std::string shown = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return shown;
}

ChatOutput ToolCallStream::finish() {
  ChatOutput out = parse_tool_calls(format_, held_);
  held_.clear();
  holding_ = false;
  return out;
}

}  // namespace layerstream
