#include "runtime/model/tokenizer_gguf.h"

#include <fmt/format.h>

#include "runtime/core/status_macros.h"
#include "runtime/tokenizer/pretokenizer.h"

namespace layerstream {

namespace {
Result<std::optional<int32_t>> token_id(const GgufFile& f, const char* key, uint64_t n_vocab) {
  if (!f.has(key)) return std::optional<int32_t>();
  LS_ASSIGN_OR_RETURN(int64_t id, f.get_int(key));
  if (id < 0 || static_cast<uint64_t>(id) >= n_vocab) {
    return Status::Corruption(
        fmt::format("{}: {} = {} is outside the vocabulary (0..{})", f.path(), key, id, n_vocab - 1));
  }
  return std::optional<int32_t>(static_cast<int32_t>(id));
}

// An optional array with one entry per token: null when the file has none,
// Corruption when its length is not the vocabulary's.
Result<const GgufValue*> per_token_array(const GgufFile& f, const char* key, GgufType type, uint64_t n_vocab) {
  if (!f.has(key)) return static_cast<const GgufValue*>(nullptr);
  LS_ASSIGN_OR_RETURN(const GgufValue* a, f.get_array(key, type));
  if (a->array_size() != n_vocab)
    return Status::Corruption(fmt::format("{}: {} has {} entries for {} tokens", f.path(), key, a->array_size(), n_vocab));
  return a;
}
}  // namespace

Result<TokenizerVocab> read_tokenizer_vocab(const GgufFile& f) {
  if (!f.has("tokenizer.ggml.model")) {
    return Status::NotFound(f.path() + ": model has no tokenizer (tokenizer.ggml.model missing)");
  }
  TokenizerVocab v;
  LS_ASSIGN_OR_RETURN(v.model, f.get_string("tokenizer.ggml.model"));
  if (v.model != "llama" && v.model != "gpt2") {
    return Status::Unsupported(fmt::format("{}: tokenizer model '{}' is not supported (supported: llama, gpt2)",
                                           f.path(), v.model));
  }
  LS_ASSIGN_OR_RETURN(v.pre, f.get_string_or("tokenizer.ggml.pre", ""));
  LS_ASSIGN_OR_RETURN(v.model_name, f.get_string_or("general.name", ""));
  // Without add_bos_token, llama.cpp adds BOS for SentencePiece and for the
  // byte-level BPE families that ask for it (Llama 3, Tekken), not for others.
  if (v.model == "gpt2") v.add_bos = bpe_adds_bos_by_default(v.pre);
  LS_ASSIGN_OR_RETURN(const GgufValue* tokens, f.get_array("tokenizer.ggml.tokens", GgufType::kString));
  v.tokens = tokens->array_strings();
  const uint64_t n = v.tokens.size();
  if (n == 0) return Status::Corruption(f.path() + ": tokenizer.ggml.tokens is empty");
  LS_ASSIGN_OR_RETURN(const GgufValue* scores, per_token_array(f, "tokenizer.ggml.scores", GgufType::kFloat32, n));
  if (scores) {
    v.scores.resize(n);
    for (uint64_t i = 0; i < n; ++i) v.scores[i] = static_cast<float>(scores->array_double(i));
  }
  LS_ASSIGN_OR_RETURN(const GgufValue* types, per_token_array(f, "tokenizer.ggml.token_type", GgufType::kInt32, n));
  if (types) {
    v.token_types.resize(n);
    for (uint64_t i = 0; i < n; ++i) v.token_types[i] = static_cast<int32_t>(types->array_int(i));
  }
  if (f.has("tokenizer.ggml.merges")) {
    LS_ASSIGN_OR_RETURN(const GgufValue* a, f.get_array("tokenizer.ggml.merges", GgufType::kString));
    v.merges = a->array_strings();
  }
  LS_ASSIGN_OR_RETURN(v.bos_id, token_id(f, "tokenizer.ggml.bos_token_id", n));
  LS_ASSIGN_OR_RETURN(v.eos_id, token_id(f, "tokenizer.ggml.eos_token_id", n));
  LS_ASSIGN_OR_RETURN(v.unk_id, token_id(f, "tokenizer.ggml.unknown_token_id", n));
  LS_ASSIGN_OR_RETURN(v.pad_id, token_id(f, "tokenizer.ggml.padding_token_id", n));
  LS_ASSIGN_OR_RETURN(v.eot_id, token_id(f, "tokenizer.ggml.eot_token_id", n));
  LS_ASSIGN_OR_RETURN(v.add_bos, f.get_bool_or("tokenizer.ggml.add_bos_token", v.add_bos));
  LS_ASSIGN_OR_RETURN(v.add_eos, f.get_bool_or("tokenizer.ggml.add_eos_token", v.add_eos));
  LS_ASSIGN_OR_RETURN(v.add_space_prefix, f.get_bool_or("tokenizer.ggml.add_space_prefix", v.add_space_prefix));
  return v;
}

Status add_tokenizer_metadata(GgufWriter& w, const TokenizerVocab& v) {
  LS_RETURN_IF_ERROR(w.add("tokenizer.ggml.model", GgufValue::string(v.model)));
  if (!v.pre.empty()) LS_RETURN_IF_ERROR(w.add("tokenizer.ggml.pre", GgufValue::string(v.pre)));
  LS_RETURN_IF_ERROR(w.add("tokenizer.ggml.tokens", GgufValue::string_array(v.tokens)));
  if (!v.scores.empty()) LS_RETURN_IF_ERROR(w.add("tokenizer.ggml.scores", GgufValue::f32_array(v.scores)));
  if (!v.token_types.empty()) {
    LS_RETURN_IF_ERROR(w.add("tokenizer.ggml.token_type", GgufValue::i32_array(v.token_types)));
  }
  if (!v.merges.empty()) LS_RETURN_IF_ERROR(w.add("tokenizer.ggml.merges", GgufValue::string_array(v.merges)));
  auto id = [&](const char* key, const std::optional<int32_t>& x) -> Status {
    return x ? w.add(key, GgufValue::u32(static_cast<uint32_t>(*x))) : Status::OK();
  };
  LS_RETURN_IF_ERROR(id("tokenizer.ggml.bos_token_id", v.bos_id));
  LS_RETURN_IF_ERROR(id("tokenizer.ggml.eos_token_id", v.eos_id));
  LS_RETURN_IF_ERROR(id("tokenizer.ggml.unknown_token_id", v.unk_id));
  LS_RETURN_IF_ERROR(id("tokenizer.ggml.padding_token_id", v.pad_id));
  LS_RETURN_IF_ERROR(id("tokenizer.ggml.eot_token_id", v.eot_id));
  LS_RETURN_IF_ERROR(w.add("tokenizer.ggml.add_bos_token", GgufValue::boolean(v.add_bos)));
  LS_RETURN_IF_ERROR(w.add("tokenizer.ggml.add_eos_token", GgufValue::boolean(v.add_eos)));
  if (v.model == "llama") {
    LS_RETURN_IF_ERROR(w.add("tokenizer.ggml.add_space_prefix", GgufValue::boolean(v.add_space_prefix)));
  }
  return Status::OK();
}

}  // namespace layerstream
