// The tokenizers of the two real models (SmolLM2-135M-Instruct: byte-level
// BPE "smollm", add_bos_token = false; gemma-3-270m: SentencePiece with 262k
// pieces, add_bos_token = true, add_space_prefix = false) give exactly the
// ids llama.cpp's llama-tokenize gives, on varied prompts (unicode, digits,
// code, whitespace, special tokens written in the text). The expected ids are
// in data/real_model_tokens.json (bench/peer/tokenize-expected.py). The model
// files come from $LAYERSTREAM_MODELS: unset, the suite skips with a message
// (a developer's ad-hoc run); set but a file missing, it fails (CI: the fetch
// failed).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/model/gguf_file.h"
#include "runtime/model/tokenizer_gguf.h"
#include "runtime/tokenizer/tokenizer.h"

namespace layerstream {
namespace {

nlohmann::json expected() {
  std::ifstream in(std::string(LS_TOKENIZER_DATA_DIR) + "/real_model_tokens.json");
  EXPECT_TRUE(in.good()) << "cannot open " << LS_TOKENIZER_DATA_DIR << "/real_model_tokens.json";
  return in.good() ? nlohmann::json::parse(in) : nlohmann::json();
}

class RealModelTokenizer : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const char* dir = std::getenv("LAYERSTREAM_MODELS");
    if (!dir || !*dir) {
      GTEST_SKIP()
          << "LAYERSTREAM_MODELS is not set: fetch the real models with bench/peer/fetch-models.sh DIR and "
             "set LAYERSTREAM_MODELS=DIR to run this suite (tests/run.sh does both)";
    }
    data_ = expected()["models"][GetParam()];
    ASSERT_TRUE(data_.is_object()) << "no expected ids for " << GetParam();
    path_ = std::string(dir) + "/" + data_["file"].get<std::string>();
    ASSERT_TRUE(std::filesystem::exists(path_))
        << path_
        << " is missing (LAYERSTREAM_MODELS is set, so the fetch by bench/peer/fetch-models.sh failed)";
    auto f = read_gguf_file(path_);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    auto v = read_tokenizer_vocab(*f);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    auto t = Tokenizer::create(std::move(*v));
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    tok_ = std::move(*t);
  }
  nlohmann::json data_;
  std::string path_;
  std::unique_ptr<Tokenizer> tok_;
};

TEST_P(RealModelTokenizer, SameIdsAsLlamaTokenize) {
  ASSERT_GE(data_["cases"].size(), 10u);
  for (const auto& c : data_["cases"]) {
    const std::string text = c["text"].get<std::string>();
    const std::vector<int32_t> want = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok_->encode(text, /*add_special=*/true, /*parse_special=*/true), want) << "text: " << text;
  }
}

TEST_P(RealModelTokenizer, ObeysTheFilesFlagsAndEndOfGeneration) {
  const TokenizerVocab& v = tok_->vocab();
  const std::vector<int32_t> ids = tok_->encode("Hello", true, true);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front() == *tok_->bos(), v.add_bos) << "BOS must follow tokenizer.ggml.add_bos_token";
  EXPECT_NE(ids.back(), *tok_->eos()) << "add_eos_token is false in both files";
  auto id_of = [&](const std::string& piece) {
    for (int32_t i = 0; i < tok_->vocab_size(); ++i)
      if (v.tokens[i] == piece) return i;
    return -1;
  };
  if (GetParam() == "smollm2") {
    EXPECT_FALSE(v.add_bos);
    EXPECT_TRUE(tok_->is_eog(id_of("<|im_end|>")));
    EXPECT_TRUE(tok_->is_eog(id_of("<|endoftext|>")));
    EXPECT_FALSE(tok_->is_eog(id_of("<|im_start|>")));
    // Without parse_special the marker is plain text.
    EXPECT_GT(tok_->encode("<|im_start|>", false, false).size(), 1u);
  } else {
    EXPECT_TRUE(v.add_bos);
    EXPECT_FALSE(v.add_space_prefix);
    EXPECT_EQ(tok_->vocab_size(), 262144);
    EXPECT_TRUE(tok_->is_eog(id_of("<end_of_turn>")));
    EXPECT_TRUE(tok_->is_eog(*tok_->eos()));
    EXPECT_FALSE(tok_->is_eog(id_of("<start_of_turn>")));
  }
  EXPECT_FALSE(tok_->is_eog(ids.back()));
  // Plain text round-trips.
  const std::string text = "Grüße, 日本語 and code: x += 1;\n";
  EXPECT_EQ(tok_->decode(tok_->encode(text, false, false)), text);
}

INSTANTIATE_TEST_SUITE_P(Models, RealModelTokenizer, ::testing::Values("smollm2", "gemma3"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace layerstream
