// TextStream: turns a growing generated text into the pieces a client may
// see: never a partial UTF-8 character, never text that may be the start of
// a stop string, and nothing from the first stop string on.
#pragma once

#include <string>
#include <vector>

namespace layerstream {

class TextStream {
 public:
  explicit TextStream(std::vector<std::string> stop) : stop_(std::move(stop)) {}
  // `text` is the whole generated text so far (it only grows). Returns what
  // may be released now; sets stopped() once a stop string appears.
  std::string update(const std::string& text);
  // The rest at the end of generation (held-back text that was no stop).
  std::string finish(const std::string& text);
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stop_;
  size_t released_ = 0;
  bool stopped_ = false;
};

}  // namespace layerstream
