// The texts that open (and close) tool calls in each format, shared by the
// parser and the streaming splitter.
#pragma once

#include <string_view>

namespace layerstream {

inline constexpr std::string_view kHermesOpen = "<tool_call>";
inline constexpr std::string_view kHermesClose = "</tool_call>";
inline constexpr std::string_view kLlamaPythonTag = "<|python_tag|>";
inline constexpr std::string_view kMistralCalls = "[TOOL_CALLS]";
inline constexpr std::string_view kMistralArgs = "[ARGS]";

}  // namespace layerstream
