#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/utf8.h"

namespace layerstream {

TokenStreamDecoder::TokenStreamDecoder(const Tokenizer& tokenizer)
    : tok_(tokenizer), at_start_(tokenizer.strips_leading_space()) {}

std::string TokenStreamDecoder::push(int32_t id) {
  std::string piece = tok_.token_to_piece(id);
  if (piece.empty()) return {};
  if (at_start_ && piece[0] == ' ') piece.erase(0, 1);
  at_start_ = false;
  pending_ += piece;
  return drain(/*final=*/false);
}

std::string TokenStreamDecoder::finish() {
  std::string out = drain(/*final=*/true);
  reset();
  return out;
}

void TokenStreamDecoder::reset() {
  pending_.clear();
  at_start_ = tok_.strips_leading_space();
}

std::string TokenStreamDecoder::drain(bool final) {
  std::string out;
  size_t pos = 0;
  while (pos < pending_.size()) {
    const utf8::ScanResult r = utf8::scan(pending_, pos);
    if (r.kind == utf8::Scan::kValid) {
      out.append(pending_, pos, r.len);
      pos += r.len;
    } else if (r.kind == utf8::Scan::kInvalid) {
      out.append(utf8::kReplacement);
      pos += 1;
    } else if (!final) {
      break;  // hold the incomplete tail until more bytes arrive
    } else {
      for (size_t k = pos; k < pending_.size(); ++k) out.append(utf8::kReplacement);
      pos = pending_.size();
    }
  }
  pending_.erase(0, pos);
  return out;
}

}  // namespace layerstream
