// libFuzzer target: arbitrary bytes through the example-vocabulary tokenizer
// and a small byte-level BPE tokenizer under each pre-tokenizer family. Must
// never crash; for well-formed UTF-8 input decode(encode(x)) == x, and the
// streaming decoder only ever emits well-formed UTF-8.
#include <array>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "runtime/tokenizer/example_vocab.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/utf8.h"

namespace {

using layerstream::Tokenizer;

const Tokenizer& spm() {
  static const std::unique_ptr<Tokenizer> t = std::move(Tokenizer::create(layerstream::make_example_vocab(1024))).value();
  return *t;
}

// One of each pre-tokenizer family (pretokenizer.cpp).
constexpr std::array<const char*, 17> kPres = {
    "default",      "gpt-2",          "llama3",      "dbrx",   "glm4",   "qwen2",   "qwen35",  "smollm",  "falcon",
    "deepseek-llm", "deepseek-coder", "deepseek-v3", "tekken", "gpt-4o", "kimi-k2", "bloom",   "viking"};

const Tokenizer& bpe(size_t which) {
  static const std::array<std::unique_ptr<Tokenizer>, kPres.size()> ts = [] {
    std::array<std::unique_ptr<Tokenizer>, kPres.size()> out;
    for (size_t k = 0; k < kPres.size(); ++k) {
      layerstream::TokenizerVocab v;
      v.model = "gpt2";
      v.pre = kPres[k];
      v.add_bos = false;
      // The 256 GPT-2 byte characters.
      for (uint32_t b = 0, next = 256; b < 256; ++b) {
        const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        std::string s;
        layerstream::utf8::append(s, printable ? b : next++);
        v.tokens.push_back(s);
      }
      v.tokens.push_back("th");
      v.tokens.push_back("the");
      v.tokens.push_back("<|eot_id|>");
      v.token_types.assign(v.tokens.size(), 1);
      v.token_types.back() = 3;
      v.merges = {"t h", "th e"};
      out[k] = std::move(Tokenizer::create(std::move(v))).value();
    }
    return out;
  }();
  return *ts[which];
}

void check(const Tokenizer& t, std::string_view text, bool valid, bool parse_special) {
  const std::vector<int32_t> ids = t.encode(text, /*add_special=*/true, parse_special);
  for (int32_t id : ids) {
    if (id < 0 || id >= t.vocab_size()) std::abort();
  }
  const std::string back = t.decode(ids);
  if (valid && !parse_special && back != text) std::abort();
  layerstream::TokenStreamDecoder d(t);
  for (int32_t id : ids) {
    if (!layerstream::utf8::is_valid(d.push(id))) std::abort();
  }
  if (!layerstream::utf8::is_valid(d.finish())) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const bool valid = layerstream::utf8::is_valid(text);
  const bool parse_special = size > 0 && (data[0] & 1);
  check(spm(), text, valid, parse_special);
  check(bpe(size % kPres.size()), text, valid, parse_special);
  return 0;
}
