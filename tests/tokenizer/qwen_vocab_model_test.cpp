// A real Qwen-tokenized file opens and runs: a tiny qwen3 model (example
// weights, 4 layers of width 64) built around llama.cpp's Qwen2 vocabulary
// file (models/ggml-vocab-qwen2.gguf: 151k tokens, pre-tokenizer "qwen2",
// chat markup tokens), opened through the public Model API, gives for varied
// text (code, CJK, emoji, numbers, whitespace runs, RTL scripts, bytes that
// are not UTF-8, chat markup) exactly the prompt tokens llama.cpp's
// llama-tokenize gives with that vocabulary (data/vocab_prompt_tokens.json,
// made by bench/peer/tokenize-vocab-expected.py), and generates.
// The vocabulary comes from $LAYERSTREAM_VOCABS (bench/peer/fetch-vocabs.sh;
// tests/run.sh fetches and sets it): unset, the suite skips with a message.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "layerstream/context.h"
#include "layerstream/model.h"
#include "runtime/core/status_macros.h"
#include "runtime/model/example_model.h"
#include "runtime/model/gguf_file.h"
#include "runtime/model/gguf_writer.h"
#include "runtime/model/tokenizer_gguf.h"
#include "tests/common/testing.h"
#include "tests/common/tiny_model.h"
#include "tests/tokenizer/vocab_prompts.h"

namespace layerstream {
namespace {

// Copies the GGUF file `src` to `dst` with its tokenizer.* keys replaced by
// `vocab`'s (tensors and every other key unchanged).
Status replace_vocabulary(const std::string& src, const std::string& dst, const TokenizerVocab& vocab) {
  LS_ASSIGN_OR_RETURN(GgufFile f, read_gguf_file(src));
  GgufWriter w(f.alignment());
  for (const GgufKeyValue& kv : f.metadata()) {
    // The writer writes general.alignment itself.
    if (kv.key.rfind("tokenizer.", 0) != 0 && kv.key != "general.alignment") {
      LS_RETURN_IF_ERROR(w.add(kv.key, kv.value));
    }
  }
  LS_RETURN_IF_ERROR(add_tokenizer_metadata(w, vocab));
  for (const GgufTensorInfo& t : f.tensors()) LS_RETURN_IF_ERROR(w.add_tensor(t.name, t.dims, t.type));
  std::ifstream in(src, std::ios::binary);
  std::vector<char> buf;
  return w.write(dst, [&](size_t i, const GgufTensorInfo&, TensorSink& sink) -> Status {
    const GgufTensorInfo& t = f.tensors()[i];
    buf.resize(t.n_bytes);
    in.seekg(static_cast<std::streamoff>(t.offset));  // absolute
    if (!in.read(buf.data(), static_cast<std::streamsize>(buf.size()))) return Status::IOError("reading " + src);
    return sink.write(buf.data(), buf.size());
  });
}

TEST(QwenVocabularyModel, OpensRunsAndTokenizesAsLlamaTokenize) {
  const char* dir = std::getenv("LAYERSTREAM_VOCABS");
  if (!dir || !*dir) {
    GTEST_SKIP() << "LAYERSTREAM_VOCABS is not set: fetch llama.cpp's vocabularies with "
                    "bench/peer/fetch-vocabs.sh DIR and set LAYERSTREAM_VOCABS=DIR (tests/run.sh does both)";
  }
  const std::string vocab_path = std::string(dir) + "/ggml-vocab-qwen2.gguf";
  ASSERT_TRUE(std::filesystem::exists(vocab_path)) << vocab_path << " is missing (bench/peer/fetch-vocabs.sh failed)";
  auto vf = read_gguf_file(vocab_path);
  ASSERT_TRUE(vf.ok()) << vf.status().ToString();
  auto vocab = read_tokenizer_vocab(*vf);
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  ASSERT_EQ(vocab->pre, "qwen2");

  testing::TempDir tmp;
  ExampleModelSpec spec = testing::tiny_llama_spec(GgmlType::F16, /*seed=*/25, /*n_ctx=*/256);
  spec.arch = "qwen3";
  spec.n_vocab = static_cast<uint32_t>(vocab->tokens.size());
  spec.tied_output = true;
  ExampleWriteOptions wo;
  wo.fsync = false;
  ASSERT_TRUE(write_example_model(tmp.file("base.gguf"), spec, wo).ok());
  const std::string path = tmp.file("qwen3-qwen2-vocab.gguf");
  const Status st = replace_vocabulary(tmp.file("base.gguf"), path, *vocab);
  ASSERT_TRUE(st.ok()) << st.ToString();

  ModelOptions mo;
  mo.backend = Backend::kHost;
  mo.host_threads = 2;
  mo.context = 256;
  auto model = Model::open(path, mo);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ((*model)->info().architecture, "qwen3");
  EXPECT_EQ((*model)->n_vocab(), static_cast<int>(vocab->tokens.size()));

  const auto cases = testing::vocab_prompt_cases("qwen2");
  ASSERT_GE(cases.size(), 25u);
  for (const auto& c : cases) {
    EXPECT_EQ((*model)->tokenize(c.text, /*add_special=*/true), c.ids) << "text: " << c.text;
  }

  auto ctx = (*model)->create_context();
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  const std::string prompt = "<|im_start|>user\n\xE4\xBD\xA0\xE5\xA5\xBD, 2+2=?<|im_end|>\n<|im_start|>assistant\n";
  GenerateOptions go;
  go.max_tokens = 4;
  go.stop_at_eog = false;
  auto r = (*ctx)->generate(prompt, go);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->prompt_tokens, (*model)->tokenize(prompt, true));
  ASSERT_EQ(r->generated.size(), 1u);
  EXPECT_EQ(r->generated[0].size(), 4u);
  for (int32_t t : r->generated[0]) EXPECT_TRUE(t >= 0 && t < (*model)->n_vocab()) << t;
}

}  // namespace
}  // namespace layerstream
