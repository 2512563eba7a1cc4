#include "runtime/llama/text_stream.h"

#include <algorithm>

namespace layerstream {
namespace {

// The end of the last complete UTF-8 character in text[0, end).
size_t complete_utf8(const std::string& text, size_t end) {
  size_t i = end;
  int back = 0;
  while (i > 0 && back < 4) {
    const unsigned char c = static_cast<unsigned char>(text[i - 1]);
    if ((c & 0xC0) != 0x80) {  // a lead byte or ASCII at i-1
      const int need = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
      return (end - (i - 1)) >= static_cast<size_t>(need) ? end : i - 1;
    }
    --i;
    ++back;
  }
  return end;
}

}  // namespace

std::string TextStream::update(const std::string& text) {
  if (stopped_) return {};
  size_t limit = text.size();
  // A stop string anywhere in the unreleased tail (it may start before
  // released_ only if it was held back, which we never release).
  const size_t search_from = released_;
  size_t first_stop = std::string::npos;
  for (const std::string& s : stop_) {
    if (s.empty()) continue;
    const size_t at = text.find(s, search_from >= s.size() ? search_from - s.size() + 1 : 0);
    if (at != std::string::npos && at >= released_) first_stop = std::min(first_stop, at);
  }
  if (first_stop != std::string::npos) {
    stopped_ = true;
    limit = first_stop;
  } else {
    // Hold back the longest suffix that is a proper prefix of a stop string.
    for (const std::string& s : stop_) {
      for (size_t n = std::min(s.size() - (s.empty() ? 0 : 1), text.size() - released_); n > 0; --n) {
        if (text.compare(text.size() - n, n, s, 0, n) == 0) {
          limit = std::min(limit, text.size() - n);
          break;
        }
      }
    }
    limit = complete_utf8(text, limit);
  }
  if (limit <= released_) return {};
  std::string out = text.substr(released_, limit - released_);
  released_ = limit;
  return out;
}

std::string TextStream::finish(const std::string& text) {
  std::string out = update(text);
  if (stopped_ || released_ >= text.size()) return out;
  out += text.substr(released_);
  released_ = text.size();
  return out;
}

}  // namespace layerstream
