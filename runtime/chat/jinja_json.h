// JSON values as Jinja values: what a chat template sees of tools, tool-call
// arguments and test variables. Object keys keep their order (templates may
// iterate a dict), hence ordered_json.
#pragma once

#include <nlohmann/json.hpp>

#include "runtime/chat/jinja.h"

namespace layerstream::chat::jinja {

Value value_from_json(const nlohmann::ordered_json& j);

}  // namespace layerstream::chat::jinja
