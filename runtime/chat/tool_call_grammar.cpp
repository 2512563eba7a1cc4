// forced_tool_calls (layerstream/chat.h): tool_choice "required" or a named
// function as a structural tag (xgrammar's format: literal begin and end
// markers around JSON under a schema). Each tool is one tag whose begin
// holds the call's fixed start up to its arguments, so the name is exact and
// the arguments follow the tool's own schema; the tags are joined by the
// format's separator. The text each format writes is what parse_tool_calls
// reads back (tool_call_parser.cpp).
#include <nlohmann/json.hpp>

#include "layerstream/chat.h"
#include "runtime/chat/tool_call_markers.h"

namespace layerstream {
namespace {

using nlohmann::ordered_json;

// The longest run of whitespace inside the arguments: a small model may
// otherwise loop on newlines where JSON allows them.
constexpr int kMaxWhitespaceRun = 16;

// How one format writes a call around its arguments, and between calls.
struct CallShape {
  std::string before_name, between, after_arguments, separator;
  std::string list_open, list_close;  // around all the calls (Mistral's array)
};

CallShape shape_of(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return {std::string(kHermesOpen) + "\n{\"name\": ",
              ", \"arguments\": ",
              "}\n" + std::string(kHermesClose),
              "\n",
              "",
              ""};
    case ToolCallFormat::kLlama3:
      // [<|python_tag|>] is a control token (not text): the reply is the JSON,
      // several calls separated by ';' (Llama 3.2).
      return {"{\"name\": ", ", \"parameters\": ", "}", "; ", "", ""};
    case ToolCallFormat::kMistral:
      // [TOOL_CALLS] is a control token: the reply is the array of calls.
      return {"{\"name\": ", ", \"arguments\": ", "}", ", ", "[", "]"};
    case ToolCallFormat::kNone:
      break;
  }
  return {};
}

// One tag per tool: {"name": "f", "arguments": <args under f's schema>}.
// A function without parameters takes none: its arguments are {}.
ordered_json call_tag(const CallShape& shape, const ordered_json& function) {
  ordered_json parameters =
      function.contains("parameters") && function["parameters"].is_object()
          ? function["parameters"]
          : ordered_json{{"type", "object"}, {"properties", ordered_json::object()}, {"additionalProperties", false}};
  return {{"type", "tag"},
          {"begin", shape.before_name + function["name"].dump() + shape.between},
          {"content",
           {{"type", "json_schema"},
            {"json_schema", std::move(parameters)},
            {"max_whitespace_cnt", kMaxWhitespaceRun}}},
          {"end", shape.after_arguments}};
}

Result<ordered_json> parse_tools(const std::string& tools_json) {
  ordered_json tools = ordered_json::parse(tools_json, nullptr, /*allow_exceptions=*/false);
  if (tools.is_discarded() || !tools.is_array() || tools.empty())
    return Status::InvalidArgument("forced tool calls: the tools are not a non-empty JSON array");
  for (const ordered_json& t : tools)
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object() ||
        !t["function"].contains("name") || !t["function"]["name"].is_string())
      return Status::InvalidArgument(
          "forced tool calls: each tool must be {\"type\": \"function\", \"function\": "
          "{\"name\", \"parameters\"}}");
  return tools;
}

}  // namespace

Result<StructuredOutput> forced_tool_calls(ToolCallFormat format, const std::string& tools_json,
                                           const ToolCallForcing& forcing) {
  if (format == ToolCallFormat::kNone)
    return Status::InvalidArgument(
        "forced tool calls: the chat template writes tool calls in no format we parse");
  auto tools = parse_tools(tools_json);
  if (!tools.ok()) return tools.status();
  const CallShape shape = shape_of(format);
  ordered_json tags = ordered_json::array();
  for (const ordered_json& t : *tools)
    if (forcing.function.empty() || t["function"]["name"] == forcing.function)
      tags.push_back(call_tag(shape, t["function"]));
  if (tags.empty())
    return Status::InvalidArgument("forced tool calls: no tool is named '" + forcing.function + "'");
  ordered_json calls = {{"type", "tags_with_separator"},
                        {"tags", std::move(tags)},
                        {"separator", shape.separator},
                        {"at_least_one", true},
                        {"stop_after_first", !forcing.parallel}};
  if (!shape.list_open.empty())
    calls = {{"type", "sequence"},
             {"elements",
              {{{"type", "const_string"}, {"value", shape.list_open}},
               std::move(calls),
               {{"type", "const_string"}, {"value", shape.list_close}}}}};
  const ordered_json tag = {{"type", "structural_tag"}, {"format", std::move(calls)}};
  return StructuredOutput{StructuredOutput::Kind::kStructuralTag, tag.dump()};
}

}  // namespace layerstream
