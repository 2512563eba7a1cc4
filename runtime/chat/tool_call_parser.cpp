// parse_tool_calls (layerstream/chat.h): a model's reply split into text and
// tool calls, for the Hermes, Llama 3 and Mistral formats. Special tokens
// that are control tokens in their vocabularies (<|python_tag|>,
// [TOOL_CALLS]) do not appear in detokenized text, so the Llama 3 and
// Mistral parsers also take a reply that is only the call's JSON.
#include <atomic>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "layerstream/chat.h"
#include "runtime/chat/tool_call_markers.h"

namespace layerstream {

using nlohmann::ordered_json;

namespace {

// Unique ids without a lock: a random start, then a counter through splitmix64.
std::string new_call_id(ToolCallFormat format) {
  static std::atomic<uint64_t> next{std::random_device{}()};
  uint64_t x = next.fetch_add(0x9E3779B97F4A7C15ull) + 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  static constexpr char kAlnum[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  // Mistral's templates insist on 9 alphanumerics; OpenAI's look like call_...
  const int n = format == ToolCallFormat::kMistral ? 9 : 10;
  std::string id = format == ToolCallFormat::kMistral ? "" : "call_";
  for (int i = 0; i < n; ++i, x /= 62) id += kAlnum[x % 62];
  return id;
}

std::string_view trim(std::string_view s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string_view::npos) return {};
  const size_t b = s.find_last_not_of(" \t\r\n");
  return s.substr(a, b - a + 1);
}

// {"name": "f", "arguments" | "parameters": {...} or a JSON text} as a call;
// nothing when the object lacks a name or its arguments are not an object.
std::optional<ToolCall> call_of(const ordered_json& j, ToolCallFormat format) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  ordered_json args = ordered_json::object();
  for (const char* key : {"arguments", "parameters"}) {
    if (!j.contains(key)) continue;
    args = j[key];
    if (args.is_string()) args = ordered_json::parse(args.get<std::string>(), nullptr, false);
    break;
  }
  if (!args.is_object()) return std::nullopt;
  return ToolCall{new_call_id(format), j["name"].get<std::string>(),
                  args.dump(-1, ' ', false, ordered_json::error_handler_t::replace)};
}

// A JSON object or an array of objects, each a call; nothing unless all are.
std::optional<std::vector<ToolCall>> calls_of_json(std::string_view text, ToolCallFormat format) {
  ordered_json j = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  std::vector<ToolCall> calls;
  for (const ordered_json& one : j.is_array() ? j : ordered_json::array({j})) {
    auto call = call_of(one, format);
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

// <tool_call>{json}</tool_call> blocks anywhere in the reply; a block whose
// JSON is no call stays text. An unclosed last block (the reply ended) counts.
ChatOutput parse_hermes(std::string_view text) {
  ChatOutput out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t open = text.find(kHermesOpen, pos);
    if (open == std::string_view::npos) break;
    const size_t body = open + kHermesOpen.size();
    const size_t close = text.find(kHermesClose, body);
    const size_t end = close == std::string_view::npos ? text.size() : close + kHermesClose.size();
    auto one = call_of(
        ordered_json::parse(
            trim(text.substr(body, close == std::string_view::npos ? std::string_view::npos : close - body)),
            nullptr, false),
        ToolCallFormat::kHermes);
    out.content += text.substr(pos, open - pos);
    if (one)
      out.tool_calls.push_back(std::move(*one));
    else
      out.content += text.substr(open, end - open);
    pos = end;
  }
  if (pos < text.size()) out.content += text.substr(pos);
  if (!out.tool_calls.empty()) out.content = std::string(trim(out.content));
  return out;
}

// The whole reply is the call: [<|python_tag|>]{"name": ..., "parameters": ...},
// or several separated by ';' (Llama 3.2).
ChatOutput parse_llama3(std::string_view text) {
  std::string_view body = trim(text);
  if (body.substr(0, kLlamaPythonTag.size()) == kLlamaPythonTag)
    body = trim(body.substr(kLlamaPythonTag.size()));
  if (auto whole = calls_of_json(body, ToolCallFormat::kLlama3)) return ChatOutput{"", std::move(*whole)};
  std::vector<ToolCall> calls;
  while (!body.empty()) {
    // The first ';' that ends a call (one inside a string does not).
    std::optional<std::vector<ToolCall>> parsed;
    size_t cut = body.size();
    for (size_t semi = body.find(';'); semi != std::string_view::npos && !parsed;
         semi = body.find(';', semi + 1))
      if ((parsed = calls_of_json(body.substr(0, semi), ToolCallFormat::kLlama3))) cut = semi;
    if (!parsed) parsed = calls_of_json(body, ToolCallFormat::kLlama3);
    if (!parsed) return ChatOutput{std::string(text), {}};
    for (ToolCall& c : *parsed) calls.push_back(std::move(c));
    body = cut >= body.size() ? std::string_view() : trim(body.substr(cut + 1));
  }
  if (calls.empty()) return ChatOutput{std::string(text), {}};
  return ChatOutput{"", std::move(calls)};
}

// [TOOL_CALLS] then a JSON array (v3), or name[ARGS]{...} repeated (v11);
// text before the marker is content. Without the marker, a reply that is a
// JSON array of calls.
ChatOutput parse_mistral(std::string_view text) {
  const size_t marker = text.find(kMistralCalls);
  std::string content =
      std::string(marker == std::string_view::npos ? std::string_view() : text.substr(0, marker));
  std::string_view rest =
      marker == std::string_view::npos ? trim(text) : trim(text.substr(marker + kMistralCalls.size()));
  if (marker == std::string_view::npos && (rest.empty() || rest[0] != '['))
    return ChatOutput{std::string(text), {}};
  std::vector<ToolCall> calls;
  if (!rest.empty() && rest[0] == '[') {
    auto parsed = calls_of_json(rest, ToolCallFormat::kMistral);
    if (!parsed) return ChatOutput{std::string(text), {}};
    calls = std::move(*parsed);
  } else {
    while (!rest.empty()) {  // name[ARGS]{...}[TOOL_CALLS]name[ARGS]{...}
      const size_t args = rest.find(kMistralArgs);
      if (args == std::string_view::npos) return ChatOutput{std::string(text), {}};
      const size_t next = rest.find(kMistralCalls, args);
      const std::string_view json_text = rest.substr(
          args + kMistralArgs.size(),
          next == std::string_view::npos ? std::string_view::npos : next - args - kMistralArgs.size());
      ordered_json call = {{"name", std::string(trim(rest.substr(0, args)))},
                           {"arguments", ordered_json::parse(json_text, nullptr, false)}};
      auto one = call_of(call, ToolCallFormat::kMistral);
      if (!one) return ChatOutput{std::string(text), {}};
      calls.push_back(std::move(*one));
      rest = next == std::string_view::npos ? std::string_view()
                                            : trim(rest.substr(next + kMistralCalls.size()));
    }
  }
  if (calls.empty()) return ChatOutput{std::string(text), {}};
  return ChatOutput{std::string(trim(content)), std::move(calls)};
}

}  // namespace

ChatOutput parse_tool_calls(ToolCallFormat format, std::string_view text) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return parse_hermes(text);
    case ToolCallFormat::kLlama3:
      return parse_llama3(text);
    case ToolCallFormat::kMistral:
      return parse_mistral(text);
    case ToolCallFormat::kNone:
      break;
  }
  return ChatOutput{std::string(text), {}};
}

}  // namespace layerstream
