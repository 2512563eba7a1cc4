#include "runtime/serve/request_fields.h"

namespace layerstream::serve {
namespace {

using nlohmann::json;
using H = FieldHandling;

bool has_type(const json& v, const std::string& types) {
  const auto says = [&](const char* t) { return types.find(t) != std::string::npos; };
  return (says("integer") && v.is_number_integer()) || (says("number") && v.is_number()) ||
         (says("string") && v.is_string()) || (says("boolean") && v.is_boolean()) ||
         (says("object") && v.is_object()) || (says("array") && v.is_array());
}

// A refused field's values that ask for nothing beyond what is done anyway.
bool harmless(const std::string& name, const json& v) {
  if (name == "functions") return v.is_array() && v.empty();
  if (name == "function_call") return v == "none";
  if (name == "modalities") return v == json::array({"text"});
  // SGLang's router (sglang-router) sends its extension fields at their defaults.
  if (name == "no_stop_trim" || name == "ignore_eos" || name == "continue_final_message" ||
      name == "return_hidden_states")
    return v == false;
  if (name == "skip_special_tokens" || name == "separate_reasoning" || name == "stream_reasoning") return v == true;
  return false;
}

ApiError field_error(const std::string& name, std::string message) {
  ApiError e;
  e.param = name;
  e.message = std::move(message);
  return e;
}

}  // namespace

const std::vector<RequestField>& request_fields() {
  static const std::vector<RequestField> fields = {
      {"model", true, true, H::kHonoured, "string", "the served model's id, or empty"},
      {"messages", true, false, H::kHonoured, "array", "through the model's chat template"},
      {"prompt", false, true, H::kHonoured, "string or array", "a string, or an array of one string"},
      {"max_tokens", true, true, H::kHonoured, "integer", "past the context: 400"},
      {"max_completion_tokens", true, false, H::kHonoured, "integer", "as max_tokens"},
      {"temperature", true, true, H::kHonoured, "number", "[0, 2]"},
      {"top_p", true, true, H::kHonoured, "number", "(0, 1]"},
      {"n", true, true, H::kHonoured, "integer", "[1, --parallel]; choices share the prompt's KV"},
      {"best_of", false, true, H::kHonoured, "integer", "must equal n (choices are not ranked): 400 otherwise"},
      {"stream", true, true, H::kHonoured, "boolean", ""},
      {"stream_options", true, true, H::kHonoured, "object", "include_usage"},
      {"stop", true, true, H::kHonoured, "string or array", "up to 4 strings"},
      {"seed", true, true, H::kHonoured, "integer", "random when absent; choice i uses seed + i"},
      {"presence_penalty", true, true, H::kHonoured, "number", "[-2, 2]"},
      {"frequency_penalty", true, true, H::kHonoured, "number", "[-2, 2]"},
      {"logit_bias", true, true, H::kHonoured, "object", "token id -> [-100, 100]"},
      {"logprobs", true, true, H::kHonoured, "boolean or integer",
       "chat: boolean; completions: integer [0, 20]"},
      {"top_logprobs", true, false, H::kHonoured, "integer", "[0, 20], with logprobs: true"},
      {"echo", false, true, H::kHonoured, "boolean", "with logprobs: the prompt's logprobs too"},
      {"top_k", true, true, H::kHonoured, "integer", "extension (vLLM); 0 or -1: off"},
      {"min_p", true, true, H::kHonoured, "number", "extension (vLLM); [0, 1]"},
      {"typical_p", true, true, H::kHonoured, "number", "extension (vLLM); (0, 1]"},
      {"repetition_penalty", true, true, H::kHonoured, "number", "extension (vLLM); > 0, window 64 tokens"},
      {"guided_json", true, true, H::kHonoured, "object or string", "extension (vLLM); a JSON schema, as response_format"},
      {"guided_regex", true, true, H::kHonoured, "string", "extension (vLLM); the whole output matches it"},
      {"guided_grammar", true, true, H::kHonoured, "string", "extension (vLLM); a GBNF grammar, start rule root"},
      {"user", true, true, H::kIgnored, "string", "an end-user id for abuse tracking; nothing is tracked"},
      {"metadata", true, false, H::kIgnored, "object", "tags for stored completions; nothing is stored"},
      {"store", true, false, H::kIgnored, "boolean", "nothing is stored"},
      {"service_tier", true, false, H::kIgnored, "string", "one tier"},
      {"safety_identifier", true, false, H::kIgnored, "string", "nothing is tracked"},
      {"prompt_cache_key", true, false, H::kIgnored, "string",
       "the prefix cache matches prompts by their tokens without a key"},
      {"tools", true, false, H::kHonoured, "array", "through the chat template; replies parsed into tool_calls"},
      {"tool_choice", true, false, H::kHonoured, "string or object",
       "\"none\", \"auto\"; \"required\" and a named function forced by a grammar over the tools' schemas"},
      {"parallel_tool_calls", true, false, H::kHonoured, "boolean", "false keeps the first call"},
      {"functions", true, false, H::kRefused, "array", "the deprecated form of tools: send tools"},
      {"function_call", true, false, H::kRefused, "string or object", "the deprecated form of tool_choice: send tool_choice"},
      {"response_format", true, false, H::kHonoured, "object",
       "text, json_object, json_schema (a token mask; a schema that does not compile, or a build "
       "without structured output: 400)"},
      {"modalities", true, false, H::kRefused, "array", "text only ([\"text\"] is accepted)"},
      {"audio", true, false, H::kRefused, "object", "text only"},
      {"prediction", true, false, H::kRefused, "object", "predicted outputs are not supported"},
      {"web_search_options", true, false, H::kRefused, "object", "no web search"},
      {"reasoning_effort", true, false, H::kRefused, "string", "no reasoning control"},
      {"verbosity", true, false, H::kRefused, "string", "no verbosity control"},
      {"suffix", false, true, H::kRefused, "string", "no fill-in-the-middle"},
      {"no_stop_trim", true, true, H::kRefused, "boolean", "SGLang's extension (its router sends false, accepted)"},
      {"ignore_eos", true, true, H::kRefused, "boolean", "SGLang's extension (its router sends false, accepted)"},
      {"continue_final_message", true, false, H::kRefused, "boolean", "SGLang's extension (its router sends false, accepted)"},
      {"return_hidden_states", true, true, H::kRefused, "boolean", "SGLang's extension (its router sends false, accepted)"},
      {"skip_special_tokens", true, true, H::kRefused, "boolean", "SGLang's extension (its router sends true, accepted)"},
      {"separate_reasoning", true, false, H::kRefused, "boolean", "SGLang's extension (its router sends true, accepted)"},
      {"stream_reasoning", true, false, H::kRefused, "boolean", "SGLang's extension (its router sends true, accepted)"},
  };
  return fields;
}

std::optional<ApiError> check_request_fields(const json& body, bool chat) {
  const char* endpoint = chat ? "/v1/chat/completions" : "/v1/completions";
  for (const auto& [key, value] : body.items()) {
    const RequestField* f = nullptr;
    for (const RequestField& x : request_fields())
      if (key == x.name) f = &x;
    if (!f) return field_error(key, "unknown field '" + key + "' (" + endpoint + " takes the OpenAI fields; see the README)");
    if (!(chat ? f->chat : f->completions))
      return field_error(key, "'" + key + "' is not a field of " + endpoint);
    if (value.is_null()) continue;
    const std::string types = key == "logprobs" ? (chat ? "boolean" : "integer") : f->types;
    if (!has_type(value, types))
      return field_error(key, "'" + key + "' must be a " + types + ", not " + value.type_name());
    if (f->handling == H::kRefused && !harmless(key, value))
      return field_error(key, "'" + key + "' is not supported: " + f->note);
  }
  return std::nullopt;
}

}  // namespace layerstream::serve
