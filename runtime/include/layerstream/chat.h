// Chat: a conversation (messages, tool calls, tool results, the tools on
// offer) rendered into the prompt text a model was trained on, with the
// Jinja template of its file (`tokenizer.chat_template`), and the model's
// tool-call output parsed back into calls.
//
//   auto tmpl = layerstream::ChatTemplate::for_model(*model);
//   auto prompt = tmpl->apply({{.role = "user", .content = "Weather in Paris?"}},
//                             {.tools_json = R"([{"type": "function", "function": {...}}])"});
//   ... generate ...
//   layerstream::ChatOutput out = layerstream::parse_tool_calls(tmpl->tool_call_format(), text);
//
// Rendering follows Hugging Face's apply_chat_template: the variables are
// messages, tools, add_generation_prompt, bos_token and eos_token; a tool
// call's arguments reach the template as a dict (templates write them with
// `| tojson`). A template that knows nothing of tools (it never says "tool")
// still gets them: the tool list goes into the system message with the
// Hermes instructions (<tool_call>{"name": ..., "arguments": ...}</tool_call>),
// earlier calls into the assistant's text and tool results into user turns
// as <tool_response>, so such a model answers in the Hermes format.
//
// Thread safety: a ChatTemplate is immutable after creation; apply may run
// on several threads at once. ToolCallStream is for one thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "layerstream/status.h"
#include "layerstream/structured_output.h"

namespace layerstream {

class Model;

// One call of a function, as OpenAI's tool_calls[i] carries it.
// (Members default to empty, so designated initializers may leave any out.)
struct ToolCall {
  std::string id = {};         // "call_..." (unique per process), or the client's
  std::string name = {};       // the function's name
  std::string arguments = {};  // a JSON object, as text
};

// One message of a conversation (OpenAI's chat message).
struct ChatMessage {
  std::string role = {};  // system, user, assistant or tool
  std::string content = {};
  std::vector<ToolCall> tool_calls = {};  // assistant: the calls it made
  std::string tool_call_id = {};          // tool: the call this is the result of
  std::string name = {};                  // tool: the function's name (optional)
};

// How a model family writes tool calls.
enum class ToolCallFormat {
  kNone,     // the template writes tools in a format we do not parse
  kHermes,   // Hermes / Qwen: <tool_call>{"name": f, "arguments": {...}}</tool_call>, one or more
  kLlama3,   // Llama 3.x: [<|python_tag|>]{"name": f, "parameters": {...}} as the whole reply
  kMistral,  // Mistral: [TOOL_CALLS][{"name": f, "arguments": {...}}, ...] (or [TOOL_CALLS]f[ARGS]{...})
};
const char* tool_call_format_name(ToolCallFormat format);

struct ChatRenderOptions {
  // OpenAI's `tools`: a JSON array of {"type": "function", "function":
  // {"name", "description", "parameters"}}, as text; empty: no tools.
  std::string tools_json = {};
  bool add_generation_prompt = true;  // end with the assistant's turn header
  // Drop the bos_token the template writes first: for text that goes to
  // Model::tokenize(text, add_special = true), which adds BOS itself.
  bool leave_bos_to_tokenizer = false;
};

class ChatTemplate {
 public:
  // Parses a Jinja template (Corruption naming the line on a syntax error);
  // empty source: ChatML. bos/eos: the text of those tokens (the template's
  // bos_token, eos_token).
  static Result<ChatTemplate> create(const std::string& source, std::string bos_token, std::string eos_token);
  // The names `from_spec` knows without a file (chatml, llama3, gemma, ...).
  static std::vector<std::string> builtin_names();
  // The template of a GGUF file and its BOS/EOS token texts. `spec`, when
  // not empty, replaces the file's template: a built-in name or the path of
  // a Jinja file (NotFound naming both readings when it is neither). A file
  // without a template gets ChatML, with a warning in the log.
  static Result<ChatTemplate> for_file(const std::string& gguf_path, const std::string& spec = {});
  static Result<ChatTemplate> for_model(const Model& model, const std::string& spec = {});

  ChatTemplate(const ChatTemplate&);
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(const ChatTemplate&);
  ChatTemplate& operator=(ChatTemplate&&) noexcept;
  ~ChatTemplate();

  // The prompt text. InvalidArgument for tools_json that is not an array of
  // function tools, and with the template's own message when it refuses the
  // conversation (raise_exception).
  Result<std::string> apply(const std::vector<ChatMessage>& messages,
                            const ChatRenderOptions& options = {}) const;

  // How replies to this template write tool calls (from its text).
  ToolCallFormat tool_call_format() const;
  const std::string& bos_token() const;
  // Stop strings the template's turn end suggests ("<|im_end|>" for ChatML).
  const std::vector<std::string>& turn_ends() const;

  struct Impl;

 private:
  explicit ChatTemplate(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

// A reply split into its text and its tool calls. A call whose JSON does not
// parse (or lacks a name) is no call: its text stays in `content`.
struct ChatOutput {
  std::string content;
  std::vector<ToolCall> tool_calls;
};
ChatOutput parse_tool_calls(ToolCallFormat format, std::string_view text);

// OpenAI's tool_choice "required" (function empty: any of the tools) or a
// named function: the reply must be tool calls.
struct ToolCallForcing {
  std::string function = {};  // the one function to call; empty: any
  bool parallel = true;       // false: exactly one call
};
// The constraint (for GenerateOptions::structured or Model::constrain) under
// which a reply is only tool calls written in `format`, each naming a tool of
// `tools_json` (OpenAI's `tools`) with arguments valid under that tool's
// "parameters" schema ({} when it has none), so that
// parse_tool_calls finds them. InvalidArgument for kNone, tools_json that is
// not an array of function tools, or a function not among them.
Result<StructuredOutput> forced_tool_calls(ToolCallFormat format, const std::string& tools_json,
                                           const ToolCallForcing& forcing = {});

// The same, incrementally, for streaming: text that cannot be part of a
// tool call is released as it comes; from where a call may begin, text is
// held until the end. feed() takes the new text and returns what may be
// shown now; finish() parses what was held (and returns its content).
class ToolCallStream {
 public:
  explicit ToolCallStream(ToolCallFormat format) : format_(format) {}
  std::string feed(std::string_view delta);
  ChatOutput finish();

 private:
  ToolCallFormat format_;
  std::string held_;  // text from a possible call start on
  bool holding_ = false;
  bool seen_text_ = false;  // Llama 3 / Mistral calls only open the reply
};

}  // namespace layerstream
