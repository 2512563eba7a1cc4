// ChatTemplate: turns chat messages into the prompt text a model was trained
// on, from the Jinja template in the file's `tokenizer.chat_template`
// (rendered by runtime/serve/jinja.h), or ChatML when the file has none:
//
//   <|im_start|>{role}\n{content}<|im_end|>\n ... <|im_start|>assistant\n
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "layerstream/status.h"
#include "runtime/serve/chat_message.h"

namespace layerstream::serve {

namespace jinja {
class Template;
}

class ChatTemplate {
 public:
  // Parses `source` (Corruption naming the line on a syntax error). Empty
  // source: the ChatML fallback. bos/eos: the text of those tokens, given to
  // the template as bos_token / eos_token.
  static Result<ChatTemplate> create(const std::string& source, std::string bos_token, std::string eos_token);
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;
  ~ChatTemplate();

  Result<std::string> apply(const std::vector<ChatMessage>& messages,
                            bool add_generation_prompt = true) const;
  bool is_fallback() const { return !tmpl_; }
  const std::string& bos_token() const { return bos_; }
  // Extra stop strings the template's turn end suggests ("<|im_end|>" for the fallback).
  const std::vector<std::string>& turn_ends() const { return turn_ends_; }

 private:
  ChatTemplate() = default;
  std::shared_ptr<const jinja::Template> tmpl_;
  std::string bos_, eos_;
  std::vector<std::string> turn_ends_;
};

}  // namespace layerstream::serve
