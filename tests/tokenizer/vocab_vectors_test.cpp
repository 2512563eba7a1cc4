// llama.cpp's tokenizer test vectors (test-tokenizer-0): each vocabulary-only
// file models/ggml-vocab-NAME.gguf of the peer source, with its test strings
// (NAME.gguf.inp, separated by "\n__ggml_vocab_test__\n") and the ids
// llama.cpp gives them (NAME.gguf.out, one line per string), tokenized
// without BOS/EOS and without parsing special tokens, as that test does.
// Every file either loads and tokenizes every string exactly, or is refused
// with the reason docs/GGUF.md lists for it (kRefused below).
// The files come from bench/peer/fetch-vocabs.sh into $LAYERSTREAM_VOCABS
// (tests/run.sh fetches and sets it): unset, the suite skips with a message;
// set, a missing file fails.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "runtime/core/status_macros.h"
#include "runtime/model/gguf_file.h"
#include "runtime/model/tokenizer_gguf.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tests/tokenizer/vocab_prompts.h"

namespace layerstream {
namespace {

// The files of the pinned peer source (llama-cpp-python 0.3.36).
const char* const kFiles[] = {"aquila",      "baichuan",  "bert-bge", "command-r", "deepseek-coder",
                              "deepseek-llm", "falcon",   "gemma-4",  "gpt-2",     "gpt-neox",
                              "llama-bpe",   "llama-spm", "mpt",      "nomic-bert-moe", "phi-3",
                              "qwen2",       "qwen35",    "refact",   "starcoder"};

// Files refused at load, with (part of) the error they must give; the same
// list, with the reasons, is in docs/GGUF.md.
const std::map<std::string, std::string> kRefused = {
    {"bert-bge", "tokenizer model 'bert' is not supported"},        // WordPiece
    {"nomic-bert-moe", "tokenizer model 't5' is not supported"},    // Unigram
    {"gemma-4", "tokenizer model 'gemma4' is not supported"},       // BPE over raw UTF-8
};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> split_inputs(const std::string& raw) {
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  for (size_t pos = 0; pos < raw.size();) {
    const size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      out.push_back(raw.substr(pos));
      break;
    }
    out.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  return out;
}

std::vector<std::vector<int32_t>> read_outputs(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::vector<int32_t>> out;
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::vector<int32_t> ids;
    for (int32_t id; ls >> id;) ids.push_back(id);
    out.push_back(std::move(ids));
  }
  return out;
}

class VocabVectors : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    const char* dir = std::getenv("LAYERSTREAM_VOCABS");
    if (!dir || !*dir) {
      GTEST_SKIP() << "LAYERSTREAM_VOCABS is not set: fetch llama.cpp's vocabularies with "
                      "bench/peer/fetch-vocabs.sh DIR and set LAYERSTREAM_VOCABS=DIR (tests/run.sh does both)";
    }
    base_ = std::string(dir) + "/ggml-vocab-" + GetParam() + ".gguf";
    ASSERT_TRUE(std::filesystem::exists(base_))
        << base_ << " is missing (LAYERSTREAM_VOCABS is set, so bench/peer/fetch-vocabs.sh failed)";
  }
  // The tokenizer of the file, or the error that refused it.
  Result<std::unique_ptr<Tokenizer>> load() const {
    LS_ASSIGN_OR_RETURN(auto f, read_gguf_file(base_));
    LS_ASSIGN_OR_RETURN(auto v, read_tokenizer_vocab(f));
    return Tokenizer::create(std::move(v));
  }
  std::string base_;
};

TEST_P(VocabVectors, TokenizesEveryTestStringAsLlamaCppOrIsRefusedAsDocumented) {
  auto tok = load();
  auto refused = kRefused.find(GetParam());
  if (refused != kRefused.end()) {
    ASSERT_FALSE(tok.ok()) << GetParam() << " loads now: remove it from kRefused and docs/GGUF.md";
    EXPECT_TRUE(tok.status().IsUnsupported()) << tok.status().ToString();
    EXPECT_NE(tok.status().message().find(refused->second), std::string::npos) << tok.status().ToString();
    return;
  }
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  if (!std::filesystem::exists(base_ + ".inp")) return;  // a vocabulary without test strings: it loads
  const auto inputs = split_inputs(read_all(base_ + ".inp"));
  const auto want = read_outputs(base_ + ".out");
  ASSERT_EQ(inputs.size(), want.size()) << base_ << ": .inp and .out disagree on the number of tests";
  ASSERT_GE(inputs.size(), 20u);
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_EQ((*tok)->encode(inputs[i], /*add_special=*/false, /*parse_special=*/false), want[i])
        << GetParam() << " test " << i << ": '" << inputs[i] << "'";
  }
}

// llama-tokenize's ids (its defaults: BOS where the file asks, special
// tokens parsed) for our own varied text, with the vocabularies that load.
const char* const kPromptVocabs[] = {"qwen2",     "qwen35", "llama-bpe", "gpt-2",    "deepseek-llm",
                                     "deepseek-coder", "falcon", "mpt", "starcoder", "refact",
                                     "command-r", "phi-3",  "llama-spm"};

class VocabPrompts : public VocabVectors {};

TEST_P(VocabPrompts, SameIdsAsLlamaTokenizeOnVariedText) {
  auto tok = load();
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const auto cases = testing::vocab_prompt_cases(GetParam());
  ASSERT_GE(cases.size(), 25u);
  for (const auto& c : cases) {
    EXPECT_EQ((*tok)->encode(c.text, /*add_special=*/true, /*parse_special=*/true), c.ids)
        << GetParam() << ": '" << c.text << "'";
  }
}

TEST(VocabVectorsFiles, EveryFileOfThePeerIsCovered) {
  const char* dir = std::getenv("LAYERSTREAM_VOCABS");
  if (!dir || !*dir) GTEST_SKIP() << "LAYERSTREAM_VOCABS is not set";
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("ggml-vocab-", 0) != 0 || e.path().extension() != ".gguf") continue;
    const std::string stem = name.substr(11, name.size() - 11 - 5);
    EXPECT_NE(std::find(std::begin(kFiles), std::end(kFiles), stem), std::end(kFiles))
        << name << " is not in kFiles: add it (and its outcome to docs/GGUF.md)";
    ++n;
  }
  EXPECT_EQ(n, std::size(kFiles));
}

std::string param_name(const ::testing::TestParamInfo<const char*>& info) {
  std::string s = info.param;
  for (char& c : s) {
    if (c == '-') c = '_';
  }
  return s;
}

INSTANTIATE_TEST_SUITE_P(Peer, VocabVectors, ::testing::ValuesIn(kFiles), param_name);
INSTANTIATE_TEST_SUITE_P(Peer, VocabPrompts, ::testing::ValuesIn(kPromptVocabs), param_name);

}  // namespace
}  // namespace layerstream
