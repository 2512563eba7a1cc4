#include "tests/tokenizer/tokenizer_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "runtime/tokenizer/utf8.h"

namespace layerstream::testing {

std::unique_ptr<Tokenizer> make_tokenizer(TokenizerVocab v) {
  auto t = Tokenizer::create(std::move(v));
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::move(t).value();
}

TokenizerVocab spm_vocab(const std::vector<std::pair<std::string, float>>& pieces, bool with_bytes) {
  TokenizerVocab v;
  v.model = "llama";
  auto add = [&](const std::string& t, float s, TokenType type) {
    v.tokens.push_back(t);
    v.scores.push_back(s);
    v.token_types.push_back(static_cast<int32_t>(type));
  };
  add("<unk>", 0, TokenType::kUnknown);
  add("<s>", 0, TokenType::kControl);
  add("</s>", 0, TokenType::kControl);
  if (with_bytes) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      add(name, 0, TokenType::kByte);
    }
  }
  for (const auto& [t, s] : pieces) add(t, s, TokenType::kNormal);
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  return v;
}

int32_t id_of(const TokenizerVocab& v, const std::string& text) {
  auto it = std::find(v.tokens.begin(), v.tokens.end(), text);
  EXPECT_NE(it, v.tokens.end()) << "no token '" << text << "'";
  return static_cast<int32_t>(it - v.tokens.begin());
}

std::string gpt2_char(uint8_t byte) {
  uint32_t cp = byte;
  const auto printable = [](uint32_t b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  if (!printable(byte)) {
    cp = 256;
    for (uint32_t b = 0; b < byte; ++b)
      if (!printable(b)) ++cp;
  }
  std::string s;
  utf8::append(s, cp);
  return s;
}

std::string gpt2_map(const std::string& s) {
  std::string out;
  for (unsigned char c : s) out += gpt2_char(c);
  return out;
}

TokenizerVocab bpe_vocab(const std::vector<std::string>& extra, const std::vector<std::string>& merges,
                         const std::string& pre) {
  TokenizerVocab v;
  v.model = "gpt2";
  v.pre = pre;
  for (int b = 0; b < 256; ++b) v.tokens.push_back(gpt2_char(static_cast<uint8_t>(b)));
  for (const auto& t : extra) v.tokens.push_back(t);
  v.token_types.assign(v.tokens.size(), static_cast<int32_t>(TokenType::kNormal));
  v.tokens.push_back("<|endoftext|>");
  v.token_types.push_back(static_cast<int32_t>(TokenType::kControl));
  v.tokens.push_back("<|eot_id|>");
  v.token_types.push_back(static_cast<int32_t>(TokenType::kControl));
  v.merges = merges;
  v.bos_id = static_cast<int32_t>(v.tokens.size()) - 2;
  v.eos_id = static_cast<int32_t>(v.tokens.size()) - 2;
  v.add_bos = false;
  return v;
}

std::string random_utf8(std::mt19937_64& rng, size_t max_chars) {
  static const std::vector<uint32_t> pool = {
      'a', 'e', 't', 'h', 'o', 'Z', '0', '7', ' ', ' ', ' ', '\n', '\t', '.', ',', '\'', '<', '>',
      0x2581 /* ▁ */, 0xE9 /* é */, 0x3B1 /* α */, 0x4E2D /* 中 */, 0x20AC /* € */, 0xFFFD,
      0x1F600 /* 😀 */, 0x1F44D, 0x10348, 0x200D /* ZWJ */, 0xA0, 0x3000, 0x7F, 0x0};
  std::uniform_int_distribution<size_t> len(0, max_chars);
  std::uniform_int_distribution<size_t> pick(0, pool.size() - 1);
  std::uniform_int_distribution<uint32_t> any(0x80, 0x10FFFF);
  std::string s;
  const size_t n = len(rng);
  for (size_t i = 0; i < n; ++i) {
    uint32_t cp;
    if (rng() % 8 == 0) {
      do cp = any(rng);
      while (cp >= 0xD800 && cp <= 0xDFFF);
    } else {
      cp = pool[pick(rng)];
    }
    utf8::append(s, cp);
  }
  return s;
}

}  // namespace layerstream::testing
