#include "runtime/serve/chat_template.h"

#include "runtime/serve/jinja.h"

namespace layerstream::serve {

ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;
ChatTemplate::~ChatTemplate() = default;

Result<ChatTemplate> ChatTemplate::create(const std::string& source, std::string bos_token,
                                          std::string eos_token) {
  ChatTemplate t;
  t.bos_ = std::move(bos_token);
  t.eos_ = std::move(eos_token);
  if (source.empty()) {
    t.turn_ends_ = {"<|im_end|>"};
    return t;
  }
  auto parsed = jinja::Template::parse(source);
  if (!parsed.ok()) return parsed.status();
  t.tmpl_ = std::move(*parsed);
  // Turn ends of the common formats, when the template writes them.
  for (const char* end : {"<|im_end|>", "<end_of_turn>", "<|eot_id|>", "<|end|>"})
    if (source.find(end) != std::string::npos) t.turn_ends_.push_back(end);
  return t;
}

Result<std::string> ChatTemplate::apply(const std::vector<ChatMessage>& messages,
                                        bool add_generation_prompt) const {
  if (!tmpl_) {
    std::string out;
    for (const ChatMessage& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    if (add_generation_prompt) out += "<|im_start|>assistant\n";
    return out;
  }
  jinja::Value::Array list;
  for (const ChatMessage& m : messages) {
    jinja::Value::Object o;
    o["role"] = jinja::Value(m.role);
    o["content"] = jinja::Value(m.content);
    list.push_back(jinja::Value(std::move(o)));
  }
  jinja::Value::Object vars;
  vars["messages"] = jinja::Value(std::move(list));
  vars["add_generation_prompt"] = jinja::Value(add_generation_prompt);
  vars["bos_token"] = jinja::Value(bos_);
  vars["eos_token"] = jinja::Value(eos_);
  auto text = tmpl_->render(vars);
  if (!text.ok())
    return Status::InvalidArgument("the chat template failed on these messages: " + text.status().message());
  return text;
}

}  // namespace layerstream::serve
