#include "runtime/serve/chat_request.h"

#include "runtime/serve/openai_protocol.h"

namespace layerstream::serve {
namespace {

using nlohmann::json;

ApiError bad(std::string param, std::string message) {
  ApiError e;
  e.param = std::move(param);
  e.message = std::move(message);
  return e;
}

// `content`: a string, an array of text parts, or null (an assistant that only calls).
std::optional<ApiError> parse_content(const json& m, const std::string& where, std::string& out) {
  const json& c = m.contains("content") ? m["content"] : json();
  if (c.is_string()) {
    out = c.get<std::string>();
  } else if (c.is_array()) {  // [{type: text, text: ...}]
    for (const json& part : c) {
      if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
          !part["text"].is_string())
        return bad(where + ".content",
                   where + ".content parts must be {\"type\": \"text\", \"text\": string}");
      out += part["text"].get<std::string>();
    }
  } else if (!c.is_null()) {
    return bad(where + ".content", where + ".content must be a string or an array of text parts, not " +
                                       std::string(c.type_name()));
  }
  return std::nullopt;
}

// An assistant's `tool_calls`: [{id, type: "function", function: {name, arguments}}].
std::optional<ApiError> parse_tool_calls_field(const json& m, const std::string& where, ChatMessage& msg) {
  if (!m.contains("tool_calls") || m["tool_calls"].is_null()) return std::nullopt;
  const json& calls = m["tool_calls"];
  const std::string field = where + ".tool_calls";
  if (msg.role != "assistant") return bad(field, field + " is only allowed on assistant messages");
  if (!calls.is_array()) return bad(field, field + " must be an array");
  for (size_t k = 0; k < calls.size(); ++k) {
    const json& c = calls[k];
    const std::string at = field + "[" + std::to_string(k) + "]";
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
      return bad(at,
                 at + " must be {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}");
    const json& f = c["function"];
    if (!f.contains("name") || !f["name"].is_string())
      return bad(at + ".function.name", at + ".function.name must be a string");
    ToolCall call{.id = c.value("id", ""), .name = f["name"].get<std::string>()};
    if (c.contains("id") && !c["id"].is_string()) return bad(at + ".id", at + ".id must be a string");
    const json& args = f.contains("arguments") ? f["arguments"] : json::object();
    if (args.is_string())
      call.arguments = args.get<std::string>();
    else if (args.is_object())  // some clients send the object itself
      call.arguments = args.dump();
    else
      return bad(at + ".function.arguments", at + ".function.arguments must be a JSON string");
    msg.tool_calls.push_back(std::move(call));
  }
  return std::nullopt;
}

std::optional<ApiError> parse_message(const json& m, const std::string& where, ChatMessage& msg) {
  if (!m.is_object()) return bad(where, where + " must be an object, not " + std::string(m.type_name()));
  if (!m.contains("role") || !m["role"].is_string())
    return bad(where + ".role", where + ".role must be a string");
  msg.role = m["role"].get<std::string>();
  if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "developer" &&
      msg.role != "tool")
    return bad(where + ".role",
               where + ".role '" + msg.role + "' is not system, user, assistant, developer or tool");
  if (msg.role == "developer") msg.role = "system";
  if (auto e = parse_content(m, where, msg.content)) return e;
  if (auto e = parse_tool_calls_field(m, where, msg)) return e;
  for (auto [key, field] : {std::pair{"tool_call_id", &msg.tool_call_id}, std::pair{"name", &msg.name}}) {
    if (!m.contains(key) || m[key].is_null()) continue;
    if (!m[key].is_string()) return bad(where + "." + key, where + "." + key + " must be a string");
    *field = m[key].get<std::string>();
  }
  return std::nullopt;
}

// `tools`: a non-empty array of function tools (the template checks the rest).
std::optional<ApiError> parse_tools(const json& j, ChatRequest& out) {
  if (!j.contains("tools") || j["tools"].is_null()) return std::nullopt;
  const json& tools = j["tools"];
  if (!tools.is_array() || tools.empty())
    return bad("tools", "'tools' must be a non-empty array of function tools");
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || t.value("type", "") != "function" || !t.contains("function") ||
        !t["function"].is_object())
      return bad(where, where + " must be {\"type\": \"function\", \"function\": {\"name\", ...}}");
    if (!t["function"].contains("name") || !t["function"]["name"].is_string())
      return bad(where + ".function.name", where + ".function.name must be a string");
  }
  out.tools_json = tools.dump();
  return std::nullopt;
}

bool has_tool(const json& tools, const std::string& name) {
  for (const json& t : tools)
    if (t["function"]["name"] == name) return true;
  return false;
}

// `tool_choice`: "none", "auto", "required" or {"type": "function",
// "function": {"name"}} naming one of the tools.
std::optional<ApiError> parse_tool_choice(const json& j, ChatRequest& out) {
  const bool has_tools = !out.tools_json.empty();
  out.tool_choice = has_tools ? ToolChoice::kAuto : ToolChoice::kNone;
  if (!j.contains("tool_choice") || j["tool_choice"].is_null()) return std::nullopt;
  const json& c = j["tool_choice"];
  if (c.is_string()) {
    const std::string s = c.get<std::string>();
    if (s == "none") {
      out.tool_choice = ToolChoice::kNone;  // the tools stay in the prompt, as OpenAI's do
      return std::nullopt;
    }
    if (s != "auto" && s != "required")
      return bad("tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or a named function");
    if (!has_tools) return bad("tool_choice", "'tool_choice' is only allowed when 'tools' are given");
    if (s == "required") out.tool_choice = ToolChoice::kRequired;
    return std::nullopt;
  }
  if (!c.is_object() || c.value("type", "") != "function" || !c.contains("function") ||
      !c["function"].is_object() || !c["function"].contains("name") || !c["function"]["name"].is_string())
    return bad("tool_choice",
               "'tool_choice' must be a string or {\"type\": \"function\", \"function\": {\"name\"}}");
  if (!has_tools) return bad("tool_choice", "'tool_choice' is only allowed when 'tools' are given");
  const std::string name = c["function"]["name"].get<std::string>();
  if (!has_tool(j["tools"], name))
    return bad("tool_choice", "'tool_choice' names '" + name + "', which is not in 'tools'");
  out.tool_choice = ToolChoice::kNamed;
  out.tool_name = name;
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_chat_request(const json& j, ChatRequest& out) {
  if (!j.contains("messages")) return bad("messages", "'messages' is required");
  const json& v = j["messages"];
  if (!v.is_array() || v.empty())
    return bad("messages", "'messages' must be a non-empty array of {role, content}");
  for (size_t i = 0; i < v.size(); ++i) {
    ChatMessage msg;
    if (auto e = parse_message(v[i], "messages[" + std::to_string(i) + "]", msg)) return e;
    out.messages.push_back(std::move(msg));
  }
  if (auto e = parse_tools(j, out)) return e;
  if (auto e = parse_tool_choice(j, out)) return e;
  if (j.contains("parallel_tool_calls") && !j["parallel_tool_calls"].is_null()) {
    if (!j["parallel_tool_calls"].is_boolean())
      return bad("parallel_tool_calls", "'parallel_tool_calls' must be a boolean, not " +
                                            std::string(j["parallel_tool_calls"].type_name()));
    out.parallel_tool_calls = j["parallel_tool_calls"].get<bool>();
  }
  return std::nullopt;
}

}  // namespace layerstream::serve
