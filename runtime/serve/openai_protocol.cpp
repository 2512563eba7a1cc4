#include "runtime/serve/openai_protocol.h"

#include <algorithm>
#include <cmath>

#include "runtime/serve/request_fields.h"

namespace layerstream::serve {
namespace {

using nlohmann::json;

ApiError bad(std::string param, std::string message) {
  ApiError e;
  e.http_status = 400;
  e.param = std::move(param);
  e.message = std::move(message);
  return e;
}

std::string type_name(const json& v) { return v.type_name(); }

}  // namespace

json ApiError::body() const {
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? json() : json(param)},
            {"code", code.empty() ? json() : json(code)}}}};
}

namespace {

// `model`: absent, empty or the served one (404 naming it otherwise).
std::optional<ApiError> parse_model(const json& j, const std::string& served_model, CompletionParams& out) {
  if (j.contains("model")) {
    if (!j["model"].is_string()) return bad("model", "'model' must be a string");
    const std::string asked = j["model"].get<std::string>();
    if (!asked.empty() && asked != served_model) {
      ApiError e;
      e.http_status = 404;
      e.param = "model";
      e.code = "model_not_found";
      e.message = "the model '" + asked + "' does not exist; this server serves '" + served_model + "'";
      return e;
    }
  }
  out.model = served_model;
  return std::nullopt;
}

// `messages` (chat) or `prompt` (completions).
std::optional<ApiError> parse_input(const json& j, bool chat, CompletionParams& out) {
  if (chat) {
    return parse_chat_request(j, out.conversation);
  }
  if (!j.contains("prompt")) return bad("prompt", "'prompt' is required");
  const json& p = j["prompt"];
  if (p.is_string())
    out.prompt = p.get<std::string>();
  else if (p.is_array() && p.size() == 1 && p[0].is_string())
    out.prompt = p[0].get<std::string>();
  else
    return bad("prompt", "'prompt' must be a string (or an array of one string), not " + type_name(p));
  return std::nullopt;
}

// A number field: absent or null leaves `value`; the type, then the range.
std::optional<ApiError> parse_number(const json& j, const char* key, double lo, double hi, double& value) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  if (!j[key].is_number()) return bad(key, std::string("'") + key + "' must be a number, not " + type_name(j[key]));
  value = j[key].get<double>();
  if (!(value >= lo && value <= hi))
    return bad(key, std::string("'") + key + "' is " + j[key].dump(-1, ' ', false, json::error_handler_t::replace) +
                        "; it must be in [" + json(lo).dump() + ", " + json(hi).dump() + "]");
  return std::nullopt;
}

// An integer field: absent or null leaves `value`; the type, then the range.
std::optional<ApiError> parse_integer(const json& j, const char* key, int64_t lo, int64_t hi, int& value) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  if (!j[key].is_number_integer())
    return bad(key, std::string("'") + key + "' must be an integer, not " + type_name(j[key]));
  double v = 0;
  if (auto e = parse_number(j, key, double(lo), double(hi), v)) return e;
  value = static_cast<int>(v);
  return std::nullopt;
}

// A float field of SamplingOptions.
std::optional<ApiError> parse_float(const json& j, const char* key, double lo, double hi, float& value) {
  double v = value;
  if (auto e = parse_number(j, key, lo, hi, v)) return e;
  value = static_cast<float>(v);
  return std::nullopt;
}

// max_tokens, temperature, top_p, seed (random when not given), n, best_of.
std::optional<ApiError> parse_sampling(const json& j, CompletionParams& out) {
  for (const char* key : {"max_tokens", "max_completion_tokens"})
    if (auto e = parse_integer(j, key, 0, 1 << 30, out.max_tokens)) return e;
  // OpenAI's defaults: every filter off.
  out.sampling.temperature = 1.0f;
  out.sampling.top_p = 1.0f;
  out.sampling.top_k = 0;
  out.sampling.min_p = 0;
  if (auto e = parse_float(j, "temperature", 0, 2, out.sampling.temperature)) return e;
  if (auto e = parse_float(j, "top_p", 0, 1, out.sampling.top_p)) return e;
  if (j.contains("seed") && !j["seed"].is_null()) {
    if (!j["seed"].is_number_integer()) return bad("seed", "'seed' must be an integer, not " + type_name(j["seed"]));
    out.sampling.seed = static_cast<uint64_t>(j["seed"].get<int64_t>());
  }
  if (auto e = parse_integer(j, "n", 1, 128, out.n)) return e;
  int best_of = out.n;
  if (auto e = parse_integer(j, "best_of", 1, 128, best_of)) return e;
  if (best_of != out.n)
    return bad("best_of", "'best_of' must equal n (" + std::to_string(out.n) + "): choices are not ranked");
  return std::nullopt;
}

// OpenAI's penalties and logit_bias, and vLLM's top_k, min_p, typical_p,
// repetition_penalty.
std::optional<ApiError> parse_penalties(const json& j, CompletionParams& out) {
  SamplingOptions& so = out.sampling;
  if (auto e = parse_float(j, "presence_penalty", -2, 2, so.presence_penalty)) return e;
  if (auto e = parse_float(j, "frequency_penalty", -2, 2, so.frequency_penalty)) return e;
  if (auto e = parse_integer(j, "top_k", -1, 1 << 30, so.top_k)) return e;
  so.top_k = std::max(so.top_k, 0);  // vLLM's -1: all
  if (auto e = parse_float(j, "min_p", 0, 1, so.min_p)) return e;
  if (auto e = parse_float(j, "typical_p", 0, 1, so.typical_p)) return e;
  if (auto e = parse_float(j, "repetition_penalty", 0, 1e6, so.repeat_penalty)) return e;
  if (!j.contains("logit_bias") || j["logit_bias"].is_null()) return std::nullopt;
  const json& lb = j["logit_bias"];
  if (!lb.is_object()) return bad("logit_bias", "'logit_bias' must be an object, not " + type_name(lb));
  for (const auto& [key, value] : lb.items()) {
    size_t used = 0;
    long id = -1;
    try {
      id = std::stol(key, &used);
    } catch (const std::exception&) {
    }
    if (used != key.size() || id < 0 || id > INT32_MAX)
      return bad("logit_bias", "'logit_bias' keys must be token ids, not '" + key + "'");
    if (!value.is_number() || !(value.get<double>() >= -100 && value.get<double>() <= 100))
      return bad("logit_bias", "'logit_bias' of token " + key + " must be a number in [-100, 100]");
    so.logit_bias[static_cast<int32_t>(id)] = value.get<float>();
  }
  return std::nullopt;
}

// chat: logprobs (boolean) and top_logprobs; completions: logprobs (the
// number of alternatives) and echo.
std::optional<ApiError> parse_logprobs(const json& j, bool chat, CompletionParams& out) {
  if (!chat) {
    if (auto e = parse_integer(j, "logprobs", 0, 20, out.logprobs)) return e;
    if (j.contains("echo") && !j["echo"].is_null()) {
      if (!j["echo"].is_boolean()) return bad("echo", "'echo' must be a boolean, not " + type_name(j["echo"]));
      out.echo = j["echo"].get<bool>();
    }
    return std::nullopt;
  }
  bool want = false;
  if (j.contains("logprobs") && !j["logprobs"].is_null()) {
    if (!j["logprobs"].is_boolean())
      return bad("logprobs", "'logprobs' must be a boolean, not " + type_name(j["logprobs"]));
    want = j["logprobs"].get<bool>();
  }
  int top = 0;
  if (auto e = parse_integer(j, "top_logprobs", 0, 20, top)) return e;
  if (j.contains("top_logprobs") && !j["top_logprobs"].is_null() && !want)
    return bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  if (want) out.logprobs = top;
  return std::nullopt;
}

// `stop`: a string or up to 4 non-empty strings.
std::optional<ApiError> parse_stop(const json& j, CompletionParams& out) {
  if (!j.contains("stop") || j["stop"].is_null()) return std::nullopt;
  const json& s = j["stop"];
  if (s.is_string()) {
    out.stop.push_back(s.get<std::string>());
  } else if (s.is_array() && s.size() <= 4) {
    for (const json& x : s) {
      if (!x.is_string()) return bad("stop", "'stop' entries must be strings");
      out.stop.push_back(x.get<std::string>());
    }
  } else {
    return bad("stop", "'stop' must be a string or an array of at most 4 strings");
  }
  for (const std::string& one : out.stop)
    if (one.empty()) return bad("stop", "'stop' strings must not be empty");
  return std::nullopt;
}

// `stream` and `stream_options.include_usage`, booleans.
std::optional<ApiError> parse_stream(const json& j, CompletionParams& out) {
  if (j.contains("stream") && !j["stream"].is_null()) {
    if (!j["stream"].is_boolean()) return bad("stream", "'stream' must be a boolean, not " + type_name(j["stream"]));
    out.stream = j["stream"].get<bool>();
  }
  if (!j.contains("stream_options") || j["stream_options"].is_null()) return std::nullopt;
  const json& so = j["stream_options"];
  if (!so.is_object())
    return bad("stream_options", "'stream_options' must be an object, not " + type_name(so));
  if (so.contains("include_usage") && !so["include_usage"].is_null()) {
    if (!so["include_usage"].is_boolean())
      return bad("stream_options", "'stream_options.include_usage' must be a boolean, not " +
                                       type_name(so["include_usage"]));
    out.include_usage = so["include_usage"].get<bool>();
  }
  return std::nullopt;
}

// `response_format`: {"type": "text"}, {"type": "json_object"} or
// {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}. The
// schema is compiled later, against the model (a 400 naming this field).
std::optional<ApiError> parse_response_format(const json& j, CompletionParams& out) {
  if (!j.contains("response_format") || j["response_format"].is_null()) return std::nullopt;
  const json& f = j["response_format"];
  const std::string type = f.contains("type") && f["type"].is_string() ? f["type"].get<std::string>() : "";
  if (type == "text") return std::nullopt;
  if (type == "json_object") {
    out.structured = {StructuredOutput::Kind::kJsonObject, ""};
    out.structured_field = "response_format";
    return std::nullopt;
  }
  if (type != "json_schema")
    return bad("response_format",
               "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\", not " +
                   (f.contains("type") ? f["type"].dump() : std::string("absent")));
  if (!f.contains("json_schema") || !f["json_schema"].is_object() || !f["json_schema"].contains("schema") ||
      !(f["json_schema"]["schema"].is_object() || f["json_schema"]["schema"].is_boolean()))
    return bad("response_format",
               "'response_format' of type json_schema needs 'json_schema': {\"schema\": {...}} (a JSON schema object)");
  out.structured = {StructuredOutput::Kind::kJsonSchema, f["json_schema"]["schema"].dump()};
  out.structured_field = "response_format";
  return std::nullopt;
}

// vLLM's guided_json (a schema, as an object or its text), guided_regex and
// guided_grammar: at most one constraint per request, response_format included.
std::optional<ApiError> parse_guided(const json& j, CompletionParams& out) {
  using K = StructuredOutput::Kind;
  for (const auto& [key, kind] : {std::pair{"guided_json", K::kJsonSchema}, std::pair{"guided_regex", K::kRegex},
                                  std::pair{"guided_grammar", K::kGrammar}}) {
    if (!j.contains(key) || j[key].is_null()) continue;
    if (out.structured.kind != K::kNone)
      return bad(key, std::string("'") + key + "': give one of response_format, guided_json, guided_regex, guided_grammar");
    out.structured = {kind, j[key].is_string() ? j[key].get<std::string>() : j[key].dump()};
    out.structured_field = key;
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_completion_request(const std::string& body, bool chat,
                                                 const std::string& served_model, CompletionParams& out) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    return bad("", std::string("the body is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) return bad("", "the body must be a JSON object, not " + type_name(j));
  out.chat = chat;
  if (auto e = check_request_fields(j, chat)) return e;
  if (auto e = parse_model(j, served_model, out)) return e;
  if (auto e = parse_input(j, chat, out)) return e;
  if (auto e = parse_sampling(j, out)) return e;
  if (auto e = parse_penalties(j, out)) return e;
  if (auto e = parse_logprobs(j, chat, out)) return e;
  if (auto e = parse_stop(j, out)) return e;
  if (auto e = parse_response_format(j, out)) return e;
  if (auto e = parse_guided(j, out)) return e;
  return parse_stream(j, out);
}

json usage_json(const RequestState::Chunk& c) {
  return {{"prompt_tokens", c.prompt_tokens},
          {"completion_tokens", c.completion_tokens},
          {"total_tokens", c.prompt_tokens + c.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", c.cached_tokens}}}};
}

namespace {
// OpenAI's finish_reason of a finished generation: its end (a token or a
// stop string) is "stop", a limit (max_tokens or the context) "length".
const char* wire_reason(FinishReason r) {
  switch (r) {
    case FinishReason::kLength:
    case FinishReason::kContextFull:
      return "length";
    case FinishReason::kNone:
    case FinishReason::kEndOfGeneration:
    case FinishReason::kStopString:
    case FinishReason::kCallback:
      break;
  }
  return "stop";
}
}  // namespace

std::optional<ApiError> check_sampling(const SamplingOptions& sampling, int n_vocab) {
  auto p = find_sampling_problem(sampling, n_vocab);
  if (!p) return std::nullopt;
  // The library's field names, as the request spells them.
  const std::string field = p->field == "repeat_penalty" ? "repetition_penalty" : p->field;
  return bad(field, p->message);
}

namespace {

std::vector<int> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

json chat_logprobs(const std::vector<TokenLogprob>& lps, const TokenText& text_of) {
  json content = json::array();
  for (const TokenLogprob& t : lps) {
    json top = json::array();
    for (auto [id, v] : t.top) {
      const std::string piece = text_of(id);
      top.push_back({{"token", piece}, {"logprob", v}, {"bytes", bytes_of(piece)}});
    }
    const std::string piece = text_of(t.token);
    content.push_back({{"token", piece}, {"logprob", t.logprob}, {"bytes", bytes_of(piece)}, {"top_logprobs", top}});
  }
  return {{"content", content}, {"refusal", nullptr}};
}

}  // namespace

json logprobs_json(bool chat, const std::vector<TokenLogprob>& lps, const TokenText& text_of, const EchoedPrompt* echo,
                   size_t text_offset) {
  if (chat) return chat_logprobs(lps, text_of);
  json tokens = json::array(), values = json::array(), tops = json::array(), offsets = json::array();
  auto add = [&](int32_t token, json value, json top) {
    const std::string piece = text_of(token);
    tokens.push_back(piece);
    values.push_back(std::move(value));
    tops.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += piece.size();
  };
  auto top_of = [&](const TokenLogprob& t) {
    json top = json::object();
    for (auto [id, v] : t.top) top[text_of(id)] = v;
    return top;
  };
  if (echo) {
    add(echo->first_token, nullptr, nullptr);  // nothing before it to predict it
    for (const TokenLogprob& t : *echo->logprobs) add(t.token, t.logprob, top_of(t));
  }
  for (const TokenLogprob& t : lps) add(t.token, t.logprob, top_of(t));
  return {{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json completion_response(const ResponseIds& ids, bool chat, const std::vector<Choice>& choices,
                         const RequestState::Chunk& usage) {
  json out = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const Choice& c = choices[i];
    json choice = {{"index", i}, {"finish_reason", wire_reason(c.reason)}, {"logprobs", c.logprobs}};
    if (chat)
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    else
      choice["text"] = c.text;
    out.push_back(std::move(choice));
  }
  return {{"id", ids.id},
          {"object", chat ? "chat.completion" : "text_completion"},
          {"created", ids.created},
          {"model", ids.model},
          {"choices", out},
          {"usage", usage_json(usage)}};
}

json stream_chunk(const ResponseIds& ids, bool chat, int index, const std::string& text, bool first,
                  FinishReason reason, json logprobs) {
  json choice = {{"index", index},
                 {"finish_reason", reason == FinishReason::kNone ? json() : json(wire_reason(reason))},
                 {"logprobs", std::move(logprobs)}};
  if (chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || first) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  return {{"id", ids.id},
          {"object", chat ? "chat.completion.chunk" : "text_completion"},
          {"created", ids.created},
          {"model", ids.model},
          {"choices", json::array({choice})}};
}

}  // namespace layerstream::serve
