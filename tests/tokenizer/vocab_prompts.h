// The expected ids of data/vocab_prompt_tokens.json (llama-tokenize with
// llama.cpp's vocabulary files on varied text; bench/peer/tokenize-vocab-expected.py).
#pragma once

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace layerstream::testing {

struct VocabPromptCase {
  std::string text;  // exact bytes (may be invalid UTF-8)
  std::vector<int32_t> ids;
};

inline std::string unhex(const std::string& h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) out.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
  return out;
}

// The cases of vocabulary `name` ("qwen2"); empty (and a test failure) when
// the file or the vocabulary is missing.
inline std::vector<VocabPromptCase> vocab_prompt_cases(const std::string& name) {
  std::ifstream in(std::string(LS_TOKENIZER_DATA_DIR) + "/vocab_prompt_tokens.json");
  EXPECT_TRUE(in.good()) << "cannot open " << LS_TOKENIZER_DATA_DIR << "/vocab_prompt_tokens.json";
  if (!in.good()) return {};
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_TRUE(j["vocabs"].contains(name)) << "no cases for " << name;
  std::vector<VocabPromptCase> out;
  if (!j["vocabs"].contains(name)) return out;
  for (const auto& c : j["vocabs"][name]) {
    VocabPromptCase v;
    v.text = c.contains("hex") ? unhex(c["hex"].get<std::string>()) : c["text"].get<std::string>();
    v.ids = c["ids"].get<std::vector<int32_t>>();
    out.push_back(std::move(v));
  }
  return out;
}

// The vocabularies the file has cases for.
inline std::vector<std::string> vocab_prompt_names() {
  std::ifstream in(std::string(LS_TOKENIZER_DATA_DIR) + "/vocab_prompt_tokens.json");
  std::vector<std::string> out;
  if (!in.good()) return out;
  const nlohmann::json j = nlohmann::json::parse(in);
  for (const auto& [k, v] : j["vocabs"].items()) out.push_back(k);
  return out;
}

}  // namespace layerstream::testing
