// ChatTemplate (layerstream/chat.h): which template (the file's, a built-in
// one, a Jinja file), and a conversation turned into its variables.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "layerstream/chat.h"
#include "layerstream/model.h"
#include "runtime/chat/builtin_templates.h"
#include "runtime/chat/jinja.h"
#include "runtime/chat/jinja_json.h"
#include "runtime/core/log.h"
#include "runtime/core/status_macros.h"
#include "runtime/model/gguf_file.h"

namespace layerstream {

using nlohmann::ordered_json;
namespace jinja = chat::jinja;

struct ChatTemplate::Impl {
  std::shared_ptr<const jinja::Template> tmpl;
  std::string bos, eos;
  std::vector<std::string> turn_ends;
  ToolCallFormat format = ToolCallFormat::kNone;
  // The template says nothing of tools: tools and tool turns are written
  // into the messages in the Hermes format (chat.h).
  bool hermes_polyfill = false;
};

namespace {

const char* builtin_source(const std::string& name) {
  for (const chat::BuiltinTemplate& b : chat::builtin_templates())
    if (name == b.name) return b.source;
  return nullptr;
}

// The format the template's text shows its model was taught.
ToolCallFormat format_of(const std::string& source) {
  if (source.find("<tool_call>") != std::string::npos) return ToolCallFormat::kHermes;
  if (source.find("[TOOL_CALLS]") != std::string::npos) return ToolCallFormat::kMistral;
  if (source.find("<|python_tag|>") != std::string::npos ||
      (source.find("<|start_header_id|>") != std::string::npos && source.find("tools") != std::string::npos))
    return ToolCallFormat::kLlama3;
  return ToolCallFormat::kNone;
}

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::FromErrno("cannot open the chat template " + path, errno);
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::IOError("cannot read the chat template " + path);
  return ss.str();
}

// `spec`: a built-in name, else a file. NotFound names both readings.
Result<std::string> source_of_spec(const std::string& spec) {
  if (const char* src = builtin_source(spec)) return std::string(src);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(spec, ec)) {
    std::string names;
    for (const std::string& n : ChatTemplate::builtin_names()) names += (names.empty() ? "" : ", ") + n;
    return Status::NotFound("chat template '" + spec + "' is neither a built-in name (" + names +
                            ") nor a readable file");
  }
  return read_text_file(spec);
}

// json.dumps(j), as Hermes-trained models saw their tools and calls written.
std::string python_json(const ordered_json& j) { return jinja::value_from_json(j).to_json(); }

// The tool instructions Qwen 2.5's template writes (the Hermes format).
std::string hermes_tool_prompt(const ordered_json& tools) {
  std::string out =
      "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
  for (const ordered_json& t : tools) out += "\n" + python_json(t);
  out +=
      "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
      "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
      "<args-json-object>}\n</tool_call>";
  return out;
}

// A call's arguments as the template sees them: a dict when they are a JSON
// object (templates write `arguments | tojson`), else the text as it is.
ordered_json arguments_json(const std::string& text) {
  ordered_json j = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return ordered_json(text);
  return j;
}

// Hermes polyfill: tools into the system message, calls into the assistant's
// text, tool results (consecutive ones together) into one user turn.
std::vector<ChatMessage> with_hermes_tools(const std::vector<ChatMessage>& messages,
                                           const ordered_json* tools) {
  std::vector<ChatMessage> out;
  if (tools) {
    const std::string prompt = hermes_tool_prompt(*tools);
    if (!messages.empty() && messages[0].role == "system")
      out.push_back({.role = "system", .content = messages[0].content + "\n\n" + prompt});
    else
      out.push_back({.role = "system", .content = prompt});
  }
  for (size_t i = tools && !messages.empty() && messages[0].role == "system" ? 1 : 0; i < messages.size();
       ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "tool") {
      const std::string block = "<tool_response>\n" + m.content + "\n</tool_response>";
      if (i > 0 && messages[i - 1].role == "tool")
        out.back().content += "\n" + block;
      else
        out.push_back({.role = "user", .content = block});
      continue;
    }
    ChatMessage copy{.role = m.role, .content = m.content};
    for (const ToolCall& call : m.tool_calls) {
      ordered_json body = {{"name", call.name}, {"arguments", arguments_json(call.arguments)}};
      if (!copy.content.empty()) copy.content += "\n";
      copy.content += "<tool_call>\n" + python_json(body) + "\n</tool_call>";
    }
    out.push_back(std::move(copy));
  }
  return out;
}

// One message as Hugging Face passes it: keys only where they have a value
// (templates test `'tool_calls' in message`).
jinja::Value message_value(const ChatMessage& m) {
  jinja::Value::Object o;
  o["role"] = jinja::Value(m.role);
  o["content"] = jinja::Value(m.content);
  if (!m.tool_calls.empty()) {
    jinja::Value::Array calls;
    for (const ToolCall& c : m.tool_calls) {
      ordered_json call = {{"id", c.id},
                           {"type", "function"},
                           {"function", {{"name", c.name}, {"arguments", arguments_json(c.arguments)}}}};
      calls.push_back(jinja::value_from_json(call));
    }
    o["tool_calls"] = jinja::Value(std::move(calls));
  }
  if (!m.tool_call_id.empty()) o["tool_call_id"] = jinja::Value(m.tool_call_id);
  if (!m.name.empty()) o["name"] = jinja::Value(m.name);
  return jinja::Value(std::move(o));
}

// OpenAI's tools array, checked: [{"type": "function", "function": {"name": ...}}].
Result<ordered_json> parse_tools(const std::string& text) {
  ordered_json tools = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (tools.is_discarded()) return Status::InvalidArgument("tools are not valid JSON");
  if (!tools.is_array()) return Status::InvalidArgument("tools must be a JSON array");
  for (size_t i = 0; i < tools.size(); ++i) {
    const ordered_json& t = tools[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || t.value("type", "") != "function")
      return Status::InvalidArgument(where + " must be {\"type\": \"function\", \"function\": {...}}");
    if (!t.contains("function") || !t["function"].is_object() || !t["function"].contains("name") ||
        !t["function"]["name"].is_string())
      return Status::InvalidArgument(where + ".function must be an object with a string 'name'");
  }
  return tools;
}

}  // namespace

const char* tool_call_format_name(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return "hermes";
    case ToolCallFormat::kLlama3:
      return "llama3";
    case ToolCallFormat::kMistral:
      return "mistral";
    case ToolCallFormat::kNone:
      break;
  }
  return "none";
}

ChatTemplate::ChatTemplate(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
ChatTemplate::ChatTemplate(const ChatTemplate&) = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(const ChatTemplate&) = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;
ChatTemplate::~ChatTemplate() = default;

std::vector<std::string> ChatTemplate::builtin_names() {
  std::vector<std::string> names;
  for (const chat::BuiltinTemplate& b : chat::builtin_templates()) names.emplace_back(b.name);
  return names;
}

Result<ChatTemplate> ChatTemplate::create(const std::string& template_source, std::string bos_token,
                                          std::string eos_token) {
  const std::string source =
      template_source.empty() ? std::string(builtin_source("chatml")) : template_source;
  auto impl = std::make_shared<Impl>();
  impl->bos = std::move(bos_token);
  impl->eos = std::move(eos_token);
  LS_ASSIGN_OR_RETURN(impl->tmpl, jinja::Template::parse(source));
  // Turn ends of the common formats, when the template writes them.
  for (const char* end : {"<|im_end|>", "<end_of_turn>", "<|eot_id|>", "<|end|>"})
    if (source.find(end) != std::string::npos) impl->turn_ends.push_back(end);
  impl->format = format_of(source);
  if (impl->format == ToolCallFormat::kNone && source.find("tool") == std::string::npos) {
    impl->hermes_polyfill = true;
    impl->format = ToolCallFormat::kHermes;
  }
  return ChatTemplate(std::move(impl));
}

Result<ChatTemplate> ChatTemplate::for_file(const std::string& gguf_path, const std::string& spec) {
  LS_ASSIGN_OR_RETURN(GgufFile file, read_gguf_file(gguf_path));
  LS_ASSIGN_OR_RETURN(std::string source, file.get_string_or("tokenizer.chat_template", ""));
  std::string bos, eos;
  if (auto tokens = file.get_array("tokenizer.ggml.tokens", GgufType::kString); tokens.ok()) {
    const auto& list = (*tokens)->array_strings();
    auto text_of = [&](const char* key) -> std::string {
      auto id = file.get_uint(key);
      return id.ok() && *id < list.size() ? list[*id] : std::string();
    };
    bos = text_of("tokenizer.ggml.bos_token_id");
    eos = text_of("tokenizer.ggml.eos_token_id");
  }
  if (!spec.empty()) {
    LS_ASSIGN_OR_RETURN(source, source_of_spec(spec));
  } else if (source.empty()) {
    LS_LOG_WARN(
        "{} has no tokenizer.chat_template: chat uses ChatML (--chat-template NAME|FILE chooses another)",
        gguf_path);
  }
  auto created = create(source, std::move(bos), std::move(eos));
  if (!created.ok()) return created.status().WithContext(spec.empty() ? gguf_path : spec);
  return created;
}

Result<ChatTemplate> ChatTemplate::for_model(const Model& model, const std::string& spec) {
  return for_file(model.info().path, spec);
}

Result<std::string> ChatTemplate::apply(const std::vector<ChatMessage>& messages,
                                        const ChatRenderOptions& options) const {
  std::optional<ordered_json> tools;
  if (!options.tools_json.empty()) {
    LS_ASSIGN_OR_RETURN(tools, parse_tools(options.tools_json));
  }
  const bool polyfill = impl_->hermes_polyfill;
  const std::vector<ChatMessage> rewritten =
      polyfill ? with_hermes_tools(messages, tools ? &*tools : nullptr) : std::vector<ChatMessage>{};
  jinja::Value::Array list;
  for (const ChatMessage& m : polyfill ? rewritten : messages) list.push_back(message_value(m));
  jinja::Value::Object vars;
  vars["messages"] = jinja::Value(std::move(list));
  if (tools && !polyfill) vars["tools"] = jinja::value_from_json(*tools);
  vars["add_generation_prompt"] = jinja::Value(options.add_generation_prompt);
  vars["bos_token"] = jinja::Value(impl_->bos);
  vars["eos_token"] = jinja::Value(impl_->eos);
  auto text = impl_->tmpl->render(vars);
  if (!text.ok())
    return Status::InvalidArgument("the chat template failed on these messages: " + text.status().message());
  const std::string& bos = impl_->bos;
  if (options.leave_bos_to_tokenizer && !bos.empty() && text->rfind(bos, 0) == 0) text->erase(0, bos.size());
  return text;
}

ToolCallFormat ChatTemplate::tool_call_format() const { return impl_->format; }
const std::string& ChatTemplate::bos_token() const { return impl_->bos; }
const std::vector<std::string>& ChatTemplate::turn_ends() const { return impl_->turn_ends; }

}  // namespace layerstream
