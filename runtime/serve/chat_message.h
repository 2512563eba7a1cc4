// One message of a chat conversation (OpenAI's {role, content}).
#pragma once

#include <string>

namespace layerstream::serve {

struct ChatMessage {
  std::string role, content;
};

}  // namespace layerstream::serve
