// Every field of an OpenAI /v1/chat/completions and /v1/completions request
// body, and what the server does with it: honoured, refused with a 400 that
// names it (where its value asks for something the server does not do), or
// accepted and ignored on purpose (with the reason). Unknown fields are
// refused too: nothing is dropped silently. The README's table is this one.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runtime/serve/openai_protocol.h"

namespace layerstream::serve {

enum class FieldHandling { kHonoured, kRefused, kIgnored };

struct RequestField {
  const char* name;
  bool chat, completions;  // the endpoints that know it
  FieldHandling handling;
  const char* types;       // the JSON types it takes, in words ("boolean", "string or array")
  const char* note;        // refused / ignored: why
};
const std::vector<RequestField>& request_fields();

// The body's keys against the table: an unknown key, a key of the other
// endpoint, a value of the wrong type, or a refused field with a value that
// asks for what is not done: a 400 naming the field. null is always accepted
// (as absent).
std::optional<ApiError> check_request_fields(const nlohmann::json& body, bool chat);

}  // namespace layerstream::serve
