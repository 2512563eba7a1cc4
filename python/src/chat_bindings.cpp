// Chat: the library's ChatTemplate (a model's Jinja chat template rendering
// OpenAI-shaped messages and tools) and the tool-call parsers, for
// Model.create_chat_completion (layerstream/chat.py).
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "layerstream/chat.h"

namespace layerstream::python {

namespace {

// A str field of an OpenAI message dict ("" when absent or None);
// TypeError naming the field otherwise.
std::string text_field(nb::handle dict, const char* key, const char* where) {
  nb::dict d = nb::borrow<nb::dict>(dict);
  if (!d.contains(key) || d[key].is_none()) return {};
  nb::handle v = d[key];
  if (!nb::isinstance<nb::str>(v))
    throw nb::type_error((std::string(where) + "[\"" + key + "\"]: want a str").c_str());
  return nb::cast<std::string>(v);
}

nb::dict require_dict(nb::handle v, const std::string& where) {
  if (!nb::isinstance<nb::dict>(v)) throw nb::type_error((where + ": want a dict").c_str());
  return nb::borrow<nb::dict>(v);
}

// OpenAI's tool_calls[i]: {"id", "type": "function", "function": {"name",
// "arguments"}}, the arguments as JSON text or as a dict (dumped).
ToolCall tool_call_arg(nb::handle item, const std::string& where) {
  nb::dict call = require_dict(item, where);
  ToolCall out;
  out.id = text_field(call, "id", where.c_str());
  if (!call.contains("function")) throw nb::value_error((where + ": no \"function\"").c_str());
  const std::string fwhere = where + "[\"function\"]";
  nb::dict fn = require_dict(call["function"], fwhere);
  out.name = text_field(fn, "name", fwhere.c_str());
  nb::object args = fn.contains("arguments") ? nb::object(fn["arguments"]) : nb::none();
  if (args.is_none()) {
    out.arguments = "{}";
  } else if (nb::isinstance<nb::str>(args)) {
    out.arguments = nb::cast<std::string>(args);
  } else {
    out.arguments = nb::cast<std::string>(nb::module_::import_("json").attr("dumps")(args));
  }
  return out;
}

std::vector<ChatMessage> messages_arg(nb::handle messages) {
  std::vector<ChatMessage> out;
  size_t i = 0;
  for (nb::handle item : messages) {
    const std::string where = "messages[" + std::to_string(i++) + "]";
    nb::dict m = require_dict(item, where);
    ChatMessage msg;
    msg.role = text_field(m, "role", where.c_str());
    if (msg.role.empty()) throw nb::value_error((where + ": no \"role\"").c_str());
    msg.content = text_field(m, "content", where.c_str());
    msg.tool_call_id = text_field(m, "tool_call_id", where.c_str());
    msg.name = text_field(m, "name", where.c_str());
    if (m.contains("tool_calls") && !m["tool_calls"].is_none()) {
      size_t j = 0;
      for (nb::handle call : m["tool_calls"])
        msg.tool_calls.push_back(tool_call_arg(call, where + "[\"tool_calls\"][" + std::to_string(j++) + "]"));
    }
    out.push_back(std::move(msg));
  }
  return out;
}

nb::list tool_calls_list(const std::vector<ToolCall>& calls) {
  nb::list out;
  for (const ToolCall& c : calls) {
    nb::dict d;
    d["id"] = c.id;
    d["name"] = c.name;
    d["arguments"] = c.arguments;
    out.append(d);
  }
  return out;
}

nb::tuple chat_output(const ChatOutput& o) {
  return nb::make_tuple(utf8_text(o.content), tool_calls_list(o.tool_calls));
}

}  // namespace

void bind_chat(nb::module_& m) {
  nb::class_<ToolCallStream>(m, "ToolCallStream",
                             R"(Tool calls parsed while streaming (layerstream::ToolCallStream).

feed() returns the text that cannot be part of a call (shown at once);
from where a call may begin, text is held until finish().)")
      .def("feed", [](ToolCallStream& s, const std::string& delta) { return utf8_text(s.feed(delta)); },
           nb::arg("delta"), "Takes new text; returns what may be shown now.")
      .def("finish", [](ToolCallStream& s) { return chat_output(s.finish()); },
           "(content, tool_calls) of what was held: the text left, and a dict per\n"
           "call (id, name, arguments).");

  nb::class_<ChatTemplate>(m, "ChatTemplate",
                           R"(A model's chat template (Jinja), rendering OpenAI-shaped messages.

Follows Hugging Face's apply_chat_template; tools reach templates that
know none in the Hermes format.)")
      .def_static(
          "for_model",
          [](nb::handle model, const std::string& spec) {
            return unwrap(ChatTemplate::for_model(nb::cast<PyModel&>(model).open("chat template"), spec));
          },
          nb::arg("model"), nb::arg("spec") = "",
          "The template of `model`'s file (ChatML when it has none).\n\n"
          "spec: when not empty, a built-in name (builtin_names()) or a Jinja file\n"
          "that replaces it.")
      .def_static(
          "create",
          [](const std::string& source, const std::string& bos_token, const std::string& eos_token) {
            return unwrap(ChatTemplate::create(source, bos_token, eos_token));
          },
          nb::arg("source"), nb::arg("bos_token") = "", nb::arg("eos_token") = "",
          "A template from Jinja source (empty: ChatML) and the BOS/EOS texts it sees.")
      .def_static("builtin_names", &ChatTemplate::builtin_names, "The names for_model's spec knows without a file.")
      .def(
          "apply",
          [](const ChatTemplate& t, nb::handle messages, const std::string& tools_json, bool add_generation_prompt,
             bool leave_bos_to_tokenizer) {
            ChatRenderOptions o{tools_json, add_generation_prompt, leave_bos_to_tokenizer};
            return utf8_text(unwrap(t.apply(messages_arg(messages), o)));
          },
          nb::arg("messages"), nb::kw_only(), nb::arg("tools_json") = "", nb::arg("add_generation_prompt") = true,
          nb::arg("leave_bos_to_tokenizer") = false,
          R"(The prompt text of a conversation.

Args:
    messages: OpenAI chat messages: dicts with role, content, and
        tool_calls (assistant) or tool_call_id and name (tool).
    tools_json: OpenAI's tools as JSON text (an array); "": none.
    add_generation_prompt: end with the assistant's turn header.
    leave_bos_to_tokenizer: drop the BOS the template writes (for text
        tokenized with add_special=True).

Raises:
    ValueError: (InvalidArgumentError) tools that are not function tools,
        or the template's own refusal.)")
      .def_prop_ro(
          "tool_call_format",
          [](const ChatTemplate& t) { return std::string(tool_call_format_name(t.tool_call_format())); },
          "How replies write tool calls: none, hermes, llama3 or mistral.")
      .def_prop_ro("bos_token", &ChatTemplate::bos_token, "The BOS text the template sees.")
      .def_prop_ro("turn_ends", &ChatTemplate::turn_ends, "Stop strings the template's turn end suggests.")
      .def(
          "parse_tool_calls",
          [](const ChatTemplate& t, const std::string& text) {
            return chat_output(parse_tool_calls(t.tool_call_format(), text));
          },
          nb::arg("text"),
          "(content, tool_calls) of a reply: its text, and a dict per call\n"
          "(id, name, arguments as JSON text).")
      .def(
          "tool_call_stream", [](const ChatTemplate& t) { return ToolCallStream(t.tool_call_format()); },
          "A ToolCallStream for this template's tool-call format.");
}

}  // namespace layerstream::python
