#include "runtime/tokenizer/tokenizer.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <cstdio>
#include <unordered_set>

#include "runtime/core/status_macros.h"
#include "runtime/tokenizer/tokenizer_impl.h"
#include "runtime/tokenizer/utf8.h"

namespace layerstream {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";          // U+2581
constexpr std::string_view kUnknownText = " \xE2\x81\x87 ";  // " ⁇ " (SentencePiece's unk surface)

std::string id_str(int32_t id) { return std::to_string(id); }

Status check_special(const char* what, const std::optional<int32_t>& id, size_t n) {
  if (id && (*id < 0 || static_cast<size_t>(*id) >= n)) {
    return Status::Corruption(std::string("tokenizer ") + what + " id " + id_str(*id) +
                              " is outside the vocabulary of " + std::to_string(n) + " tokens");
  }
  return Status::OK();
}

// "<0x4A>" -> 0x4A; -1 when the text is not of that form.
int parse_byte_token(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  int value = 0;
  for (char c : t.substr(3, 2)) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else return -1;
    value = value * 16 + d;
  }
  return value;
}

// llama: "▁" -> " ".
std::string unescape_spaces(std::string_view t) {
  std::string out;
  out.reserve(t.size());
  for (size_t pos = 0; pos < t.size();) {
    if (t.substr(pos, kSpace.size()) == kSpace) {
      out.push_back(' ');
      pos += kSpace.size();
    } else {
      out.push_back(t[pos++]);
    }
  }
  return out;
}

// gpt2: each GPT-2 character back to its byte; other characters kept as they are.
std::string unmap_bytes(std::string_view t) {
  static const std::unordered_map<uint32_t, uint8_t> inverse = [] {
    std::unordered_map<uint32_t, uint8_t> m;
    for (int b = 0; b < 256; ++b) m[gpt2_byte_to_code_point()[b]] = static_cast<uint8_t>(b);
    return m;
  }();
  std::string out;
  out.reserve(t.size());
  for (size_t pos = 0; pos < t.size();) {
    utf8::ScanResult r = utf8::scan(t, pos);
    if (r.kind == utf8::Scan::kValid) {
      auto it = inverse.find(r.cp);
      if (it != inverse.end()) {
        out.push_back(static_cast<char>(it->second));
      } else {
        out.append(t.substr(pos, r.len));
      }
      pos += r.len;
    } else {
      out.push_back(t[pos++]);
    }
  }
  return out;
}

// Tokens that end a turn by their text, as llama.cpp's vocabulary loader
// marks them (whatever their type in the file): <|eot_id|>, <|im_end|>,
// <end_of_turn>, ...
bool named_like_end_of_turn(std::string_view t) {
  static const std::unordered_set<std::string_view> names = {
      "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
      "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
      "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<|END_OF_TURN_TOKEN|>"};
  return names.count(t) > 0;
}

// Corruption for a vocabulary whose parts disagree (counts, special ids).
Status check_vocab(const TokenizerVocab& vocab) {
  const size_t n = vocab.tokens.size();
  if (n == 0) return Status::Corruption("tokenizer has no tokens");
  if (n > static_cast<size_t>(INT32_MAX)) return Status::Corruption("tokenizer has too many tokens: " + std::to_string(n));
  if (!vocab.scores.empty() && vocab.scores.size() != n) {
    return Status::Corruption("tokenizer has " + std::to_string(vocab.scores.size()) + " scores for " +
                              std::to_string(n) + " tokens");
  }
  if (!vocab.token_types.empty() && vocab.token_types.size() != n) {
    return Status::Corruption("tokenizer has " + std::to_string(vocab.token_types.size()) + " token types for " +
                              std::to_string(n) + " tokens");
  }
  LS_RETURN_IF_ERROR(check_special("BOS", vocab.bos_id, n));
  LS_RETURN_IF_ERROR(check_special("EOS", vocab.eos_id, n));
  LS_RETURN_IF_ERROR(check_special("UNK", vocab.unk_id, n));
  LS_RETURN_IF_ERROR(check_special("PAD", vocab.pad_id, n));
  LS_RETURN_IF_ERROR(check_special("EOT", vocab.eot_id, n));
  if (vocab.add_bos && !vocab.bos_id) return Status::Corruption("tokenizer asks to add BOS but has no BOS id");
  if (vocab.add_eos && !vocab.eos_id) return Status::Corruption("tokenizer asks to add EOS but has no EOS id");
  return Status::OK();
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

// The algorithm, the vocabulary's consistency, token types, the lookup
// tables (pieces, byte fallback, specials), BPE merges, then each token's
// rendered bytes and end-of-generation flag.
Result<std::unique_ptr<Tokenizer>> Tokenizer::create(TokenizerVocab vocab) {
  auto impl = std::make_unique<Impl>();
  Impl& m = *impl;
  LS_RETURN_IF_ERROR(m.choose_model(vocab));
  LS_RETURN_IF_ERROR(check_vocab(vocab));
  LS_RETURN_IF_ERROR(m.read_token_types(vocab));
  LS_RETURN_IF_ERROR(m.index_tokens(vocab));
  LS_RETURN_IF_ERROR(m.read_merges(vocab));
  m.render_tokens(vocab);
  m.v = std::move(vocab);
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

// SentencePiece ("llama") or byte-level BPE ("gpt2", with its pre-tokenizer).
Status Tokenizer::Impl::choose_model(const TokenizerVocab& vocab) {
  if (vocab.model == "llama") {
    model = Model::kSpm;
  } else if (vocab.model == "gpt2") {
    model = Model::kBpe;
    LS_ASSIGN_OR_RETURN(pre, find_pre_tokenizer(vocab.pre));
  } else {
    return Status::Unsupported("tokenizer model '" + vocab.model + "' is not supported (supported: llama, gpt2)");
  }
  return Status::OK();
}

// Per-token type: from the file (0..6), with llama.cpp's end-of-turn override.
Status Tokenizer::Impl::read_token_types(const TokenizerVocab& vocab) {
  const size_t n = vocab.tokens.size();
  types.resize(n, TokenType::kNormal);
  for (size_t i = 0; i < vocab.token_types.size(); ++i) {
    const int32_t t = vocab.token_types[i];
    if (t < 0 || t > 6) {
      return Status::Corruption("tokenizer token " + std::to_string(i) + " has type " + std::to_string(t) +
                                " (valid: 0..6)");
    }
    types[i] = static_cast<TokenType>(t);
  }
  // llama.cpp overrides the type of a token named like an end of turn to
  // control (a file that marks <|im_end|> normal still stops on it and never
  // produces it from plain text).
  for (size_t i = 0; i < n; ++i) {
    if ((types[i] == TokenType::kNormal || types[i] == TokenType::kUndefined) &&
        named_like_end_of_turn(vocab.tokens[i])) {
      types[i] = TokenType::kControl;
    }
  }
  return Status::OK();
}

// piece_to_id, the byte fallback (byte_to_id: every byte needs a token
// unless there is an unknown token) and the specials split out before the
// model runs (longest first, indexed by first byte).
Status Tokenizer::Impl::index_tokens(const TokenizerVocab& vocab) {
  const size_t n = vocab.tokens.size();
  byte_to_id.fill(-1);
  const auto& b2cp = gpt2_byte_to_code_point();
  StringMap<int> bpe_char_to_byte;
  if (model == Impl::Model::kBpe) {
    for (int b = 0; b < 256; ++b) {
      std::string c;
      utf8::append(c, b2cp[b]);
      bpe_char_to_byte.emplace(std::move(c), b);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const int32_t id = static_cast<int32_t>(i);
    const std::string& t = vocab.tokens[i];
    const TokenType type = types[i];
    switch (type) {
      case TokenType::kNormal:
      case TokenType::kUndefined:
      case TokenType::kUserDefined:
        if (!t.empty()) piece_to_id.emplace(t, id);  // first occurrence wins
        break;
      default:
        break;
    }
    if (model == Impl::Model::kSpm && type == TokenType::kByte) {
      const int b = parse_byte_token(t);
      if (b < 0) return Status::Corruption("tokenizer byte token " + std::to_string(i) + " is '" + t + "', not <0xXX>");
      if (byte_to_id[b] < 0) byte_to_id[b] = id;
    }
    if (model == Impl::Model::kBpe && type != TokenType::kControl && type != TokenType::kUnused) {
      auto it = bpe_char_to_byte.find(t);
      if (it != bpe_char_to_byte.end() && byte_to_id[it->second] < 0) byte_to_id[it->second] = id;
    }
    // Split out of the text before the model's algorithm runs: user-defined
    // tokens always; control and unknown tokens with parse_special (llama.cpp's
    // tokenizer_st_partition).
    if (!t.empty() &&
        (type == TokenType::kControl || type == TokenType::kUserDefined || type == TokenType::kUnknown)) {
      specials.push_back({t, id, type != TokenType::kUserDefined, false, false});
    }
  }
  // Every byte needs a token (or <unk>): for SentencePiece its <0xXX>
  // fallback; for byte-level BPE only printable ASCII is required, as some
  // real vocabularies (Falcon: control bytes, a few UTF-8 lead bytes) lack
  // others and llama.cpp loads them. Such a byte in the text is dropped
  // where llama.cpp throws.
  for (int b = 0; b < 256; ++b) {
    const bool required = model == Impl::Model::kSpm || (b >= 0x20 && b < 0x7F);
    if (required && byte_to_id[b] < 0 && !vocab.unk_id) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", b);
      return Status::Unsupported(std::string("tokenizer (") + vocab.model + ") has no token for byte " + hex +
                                 " and no unknown token, so some text cannot be encoded");
    }
  }
  std::stable_sort(specials.begin(), specials.end(),
                   [](const Impl::Special& a, const Impl::Special& b) { return a.text.size() > b.text.size(); });
  for (size_t i = 0; i < specials.size(); ++i) {
    specials_by_byte[static_cast<uint8_t>(specials[i].text[0])].push_back(static_cast<uint32_t>(i));
  }
  set_strip_attributes(vocab);
  return Status::OK();
}

// GGUF files do not store the lstrip/rstrip attributes of special tokens;
// llama.cpp sets them for a few models by name, and so do we: Phi-3 (every
// special token but <unk>, <s> and <|endoftext|> eats the whitespace after
// it) and the <mask> / [MASK] token of Jina v2 and ModernBERT (eats the
// whitespace before it).
void Tokenizer::Impl::set_strip_attributes(const TokenizerVocab& vocab) {
  std::string name = vocab.model_name;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  auto has = [](const std::string& s, std::initializer_list<std::string_view> parts) {
    for (std::string_view p : parts) {
      if (s.find(p) != std::string::npos) return true;
    }
    return false;
  };
  for (Special& s : specials) {
    if (has(vocab.pre, {"jina-v2-de", "jina-v2-es", "jina-v2-code"})) {
      s.lstrip = s.text == "<mask>";
    } else if (has(name, {"phi-3", "phi3"})) {
      s.rstrip = s.text != "<unk>" && s.text != "<s>" && s.text != "<|endoftext|>";
    } else if (has(name, {"modern-bert"})) {
      s.lstrip = s.text == "[MASK]";
    }
  }
}

// BPE: "left right" -> rank (first, lowest rank wins).
Status Tokenizer::Impl::read_merges(const TokenizerVocab& vocab) {
  if (model == Impl::Model::kBpe) {
    merge_rank.reserve(vocab.merges.size());
    for (size_t r = 0; r < vocab.merges.size(); ++r) {
      const std::string& mg = vocab.merges[r];
      const size_t sp = mg.find(' ', 1);
      if (sp == std::string::npos || sp + 1 >= mg.size()) {
        return Status::Corruption("tokenizer merge " + std::to_string(r) + " '" + mg + "' is not 'left right'");
      }
      merge_rank.emplace(mg, static_cast<int32_t>(r));  // first (lowest) rank wins
    }
  }
  return Status::OK();
}

// The bytes decode() writes per token, and which tokens end generation.
void Tokenizer::Impl::render_tokens(const TokenizerVocab& vocab) {
  const size_t n = vocab.tokens.size();
  rendered.resize(n);
  eog.resize(n, false);
  for (size_t i = 0; i < n; ++i) {
    const std::string& t = vocab.tokens[i];
    switch (types[i]) {
      case TokenType::kControl:
      case TokenType::kUnused:
        break;
      case TokenType::kUnknown:
        rendered[i] = kUnknownText;
        break;
      case TokenType::kByte:
        if (model == Impl::Model::kSpm) {
          rendered[i] = std::string(1, static_cast<char>(parse_byte_token(t)));
          break;
        }
        [[fallthrough]];
      default:
        if (model == Impl::Model::kSpm) {
          rendered[i] = unescape_spaces(t);
        } else {
          rendered[i] = types[i] == TokenType::kUserDefined ? t : unmap_bytes(t);
        }
    }
    eog[i] = named_like_end_of_turn(t);
  }
  if (vocab.eos_id) eog[*vocab.eos_id] = true;
  if (vocab.eot_id) eog[*vocab.eot_id] = true;
}

// As llama.cpp's tokenizer_st_partition: each special token in turn, longest
// first, is cut out of every plain fragment wherever it occurs (so a longer
// token wins over a shorter one it overlaps). Only the specials that occur
// in the text take part, found in one pass.
std::vector<Tokenizer::Impl::Fragment> Tokenizer::Impl::partition_specials(std::string_view text,
                                                                           bool parse_special) const {
  if (text.empty()) return {};
  std::vector<Fragment> frags = {{-1, 0, text.size()}};
  std::vector<bool> present(specials.size(), false);
  bool any = false;
  for (size_t pos = 0; pos < text.size(); ++pos) {
    for (uint32_t si : specials_by_byte[static_cast<uint8_t>(text[pos])]) {
      const Special& s = specials[si];
      if (!present[si] && (parse_special || !s.control) && text.compare(pos, s.text.size(), s.text) == 0) {
        present[si] = any = true;
      }
    }
  }
  if (!any) return frags;
  auto is_space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  std::vector<Fragment> next;
  for (size_t si = 0; si < specials.size(); ++si) {
    if (!present[si]) continue;
    const Special& s = specials[si];
    next.clear();
    for (const Fragment& f : frags) {
      if (f.id >= 0) {
        next.push_back(f);
        continue;
      }
      size_t begin = f.offset, end = f.offset + f.size;
      for (;;) {
        const size_t hit = text.substr(0, end).find(s.text, begin);
        if (hit == std::string_view::npos) break;
        size_t left_end = hit;
        if (s.lstrip) {
          while (left_end > begin && is_space(text[left_end - 1])) --left_end;
        }
        if (left_end > begin) next.push_back({-1, begin, left_end - begin});
        next.push_back({s.id, hit, s.text.size()});
        begin = hit + s.text.size();
        if (s.rstrip) {
          while (begin < end && is_space(text[begin])) ++begin;
        }
      }
      if (begin < end) next.push_back({-1, begin, end - begin});
    }
    frags.swap(next);
  }
  return frags;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const Impl& m = *impl_;
  std::vector<int32_t> out;
  out.reserve(text.size() / 2 + 2);
  if (add_special && m.v.add_bos) out.push_back(*m.v.bos_id);

  bool prev_special = true;  // llama: a text fragment at the start or after a special gets the "▁" prefix
  for (const Impl::Fragment& f : m.partition_specials(text, parse_special)) {
    if (f.id >= 0) {
      out.push_back(f.id);
      prev_special = true;
      continue;
    }
    const std::string_view frag = text.substr(f.offset, f.size);
    if (m.model == Impl::Model::kSpm) {
      m.encode_spm(frag, m.v.add_space_prefix && prev_special, out);
    } else {
      m.encode_bpe(frag, out);
    }
    prev_special = false;
  }

  if (add_special && m.v.add_eos) out.push_back(*m.v.eos_id);
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return std::string(utf8::kReplacement);
  return impl_->rendered[id];
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  bool at_start = strips_leading_space();
  for (int32_t id : ids) {
    std::string piece = token_to_piece(id);
    if (piece.empty()) continue;
    if (at_start && piece[0] == ' ') piece.erase(0, 1);
    at_start = false;
    out += piece;
  }
  return out;
}

Status Tokenizer::check_ids(std::span<const int32_t> ids) const {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size()) {
      return Status::InvalidArgument("token id " + id_str(ids[i]) + " at position " + std::to_string(i) +
                                     " is outside the vocabulary of " + std::to_string(vocab_size()) + " tokens");
    }
  }
  return Status::OK();
}

bool Tokenizer::is_eog(int32_t id) const { return id >= 0 && id < vocab_size() && impl_->eog[id]; }
bool Tokenizer::is_control(int32_t id) const {
  return id >= 0 && id < vocab_size() && impl_->types[id] == TokenType::kControl;
}
int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->v.tokens.size()); }
std::optional<int32_t> Tokenizer::bos() const { return impl_->v.bos_id; }
std::optional<int32_t> Tokenizer::eos() const { return impl_->v.eos_id; }
const TokenizerVocab& Tokenizer::vocab() const { return impl_->v; }
bool Tokenizer::strips_leading_space() const {
  return impl_->model == Impl::Model::kSpm && impl_->v.add_space_prefix;
}

}  // namespace layerstream
