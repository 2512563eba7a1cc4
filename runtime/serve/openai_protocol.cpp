#include "runtime/serve/openai_protocol.h"

#include <cmath>

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

// max_tokens, temperature, top_p, seed (random when not given), n.
std::optional<ApiError> parse_sampling(const json& j, CompletionParams& out) {
  double v = -1;
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (!j.contains(key) || j[key].is_null()) continue;
    if (!j[key].is_number_integer())
      return bad(key, std::string("'") + key + "' must be an integer, not " + type_name(j[key]));
    if (auto e = parse_number(j, key, 0, 1 << 30, v)) return e;
    out.max_tokens = static_cast<int>(v);
  }
  double t = 1.0, p = 1.0;
  if (auto e = parse_number(j, "temperature", 0, 2, t)) return e;
  if (auto e = parse_number(j, "top_p", 0, 1, p)) return e;
  out.sampling.temperature = static_cast<float>(t);
  out.sampling.top_p = static_cast<float>(p);
  out.sampling.top_k = 0;  // OpenAI has no top-k or min-p
  out.sampling.min_p = 0;
  if (j.contains("seed") && !j["seed"].is_null()) {
    if (!j["seed"].is_number_integer()) return bad("seed", "'seed' must be an integer, not " + type_name(j["seed"]));
    out.sampling.seed = static_cast<uint64_t>(j["seed"].get<int64_t>());
  } else {
    static std::atomic<uint64_t> counter{0x5eed};
    out.sampling.seed = counter.fetch_add(0x9E3779B97F4A7C15ull);
  }
  if (j.contains("n") && !j["n"].is_null()) {
    if (!j["n"].is_number_integer() || j["n"].get<int64_t>() != 1) return bad("n", "only 'n': 1 is supported");
  }
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
  if (auto e = parse_model(j, served_model, out)) return e;
  if (auto e = parse_input(j, chat, out)) return e;
  if (auto e = parse_sampling(j, out)) return e;
  if (auto e = parse_stop(j, out)) return e;
  return parse_stream(j, out);
}

json usage_json(const RequestState::Chunk& c) {
  return {{"prompt_tokens", c.prompt_tokens},
          {"completion_tokens", c.completion_tokens},
          {"total_tokens", c.prompt_tokens + c.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", c.cached_tokens}}}};
}

namespace {
const char* wire_reason(FinishReason r) { return r == FinishReason::kLength ? "length" : "stop"; }
}  // namespace

json completion_response(const ResponseIds& ids, bool chat, const RequestState::Chunk& all) {
  json choice = {{"index", 0}, {"finish_reason", wire_reason(all.reason)}, {"logprobs", nullptr}};
  if (chat)
    choice["message"] = {{"role", "assistant"}, {"content", all.text}};
  else
    choice["text"] = all.text;
  return {{"id", ids.id},
          {"object", chat ? "chat.completion" : "text_completion"},
          {"created", ids.created},
          {"model", ids.model},
          {"choices", json::array({choice})},
          {"usage", usage_json(all)}};
}

json stream_chunk(const ResponseIds& ids, bool chat, const std::string& text, bool first,
                  FinishReason reason) {
  json choice = {{"index", 0},
                 {"finish_reason", reason == FinishReason::kNone ? json() : json(wire_reason(reason))},
                 {"logprobs", nullptr}};
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
