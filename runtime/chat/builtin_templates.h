// The chat templates compiled into the library (runtime/chat/templates/*.jinja,
// turned into a table by runtime/chat/CMakeLists.txt), for
// `--chat-template NAME` and the ChatML fallback of files without one.
#pragma once

#include <string>
#include <vector>

namespace layerstream::chat {

struct BuiltinTemplate {
  const char* name;    // the file's name without .jinja
  const char* source;  // Jinja text
};

const std::vector<BuiltinTemplate>& builtin_templates();

}  // namespace layerstream::chat
