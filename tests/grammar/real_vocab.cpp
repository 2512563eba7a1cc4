#include "tests/grammar/real_vocab.h"

#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

#include "runtime/core/status_macros.h"
#include "runtime/model/gguf_file.h"
#include "runtime/model/tokenizer_gguf.h"

namespace layerstream::grammar::testing {
namespace {

Result<RealVocab> load(const std::string& path) {
  LS_ASSIGN_OR_RETURN(GgufFile file, read_gguf_file(path));
  LS_ASSIGN_OR_RETURN(TokenizerVocab vocab, read_tokenizer_vocab(file));
  RealVocab v;
  LS_ASSIGN_OR_RETURN(v.tokenizer, Tokenizer::create(std::move(vocab)));
  if (structured_output_available()) {
    LS_ASSIGN_OR_RETURN(GrammarVocabulary gv, make_grammar_vocabulary(*v.tokenizer));
    LS_ASSIGN_OR_RETURN(v.compiler, GrammarCompiler::create(gv));
  }
  return v;
}

}  // namespace

const RealVocab* real_vocab(const std::string& model, std::string* skip, std::string* error) {
  const char* dir = std::getenv("LAYERSTREAM_MODELS");
  if (!dir || !*dir) {
    *skip = "LAYERSTREAM_MODELS is not set: fetch the real models with bench/peer/fetch-models.sh DIR and set "
            "LAYERSTREAM_MODELS=DIR to run this suite (tests/run.sh does both)";
    return nullptr;
  }
  static std::mutex mu;
  static std::map<std::string, RealVocab> loaded;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = loaded.find(model); it != loaded.end()) return &it->second;
  const std::string file = model == "smollm2" ? "SmolLM2-135M-Instruct.Q4_1.gguf" : "gemma-3-270m-q4_k_m.gguf";
  const std::string path = std::string(dir) + "/" + file;
  if (!std::filesystem::exists(path)) {
    *error = path + " is missing (LAYERSTREAM_MODELS is set, so the fetch by bench/peer/fetch-models.sh failed)";
    return nullptr;
  }
  Result<RealVocab> v = load(path);
  if (!v.ok()) {
    *error = path + ": " + v.status().ToString();
    return nullptr;
  }
  return &loaded.emplace(model, std::move(*v)).first->second;
}

}  // namespace layerstream::grammar::testing
