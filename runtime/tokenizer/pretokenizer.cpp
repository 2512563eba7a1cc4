#include "runtime/tokenizer/pretokenizer.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>

#include "runtime/tokenizer/utf8.h"

namespace layerstream {
namespace {

// llama.cpp's pre-tokenizers (llama-vocab.cpp, llm_tokenizer_bpe): the
// tokenizer.ggml.pre values of each family and its split patterns, in the
// ECMAScript form llama.cpp runs (contractions spelled '[sS] rather than
// with (?i:), as std::regex has no inline flags).
struct Family {
  std::initializer_list<const char*> names;
  std::initializer_list<const char*> patterns;
  bool ignore_merges;
  bool adds_bos = false;  // llama.cpp's add_bos when the file does not say
};

#define LS_CONTRACTIONS R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]))re"
constexpr const char* kGpt2 = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";
constexpr const char* kLlama3 = LS_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* kQwen2 = LS_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* kQwen35 = LS_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// Tekken, GPT-4o: a word is upper-then-lower or all upper (a letter that is
// not a-z, then letters that are not A-Z).
constexpr const char* kTekken =
    R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* kGpt4o =
    R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+)re" LS_CONTRACTIONS
    R"re(?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*)re" LS_CONTRACTIONS
    R"re(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// Kimi K2: Han runs apart, then words of the other letters.
constexpr const char* kKimiK2 = R"re(\p{Han}+|[^\r\n\p{L}\p{N}]?(?:(?!\p{Han})\p{L})+)re" LS_CONTRACTIONS
    R"re(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* kDeepseek3Words =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* kCjk = "[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+";
constexpr const char* kBloom = " ?[^(\\s|.,!?\u2026\u3002\uFF0C\u3001\u0964\u06D4\u060C)]+";
// DeepSeek LLM: the letters of the cased scripts, by range.
constexpr const char* kDeepseekLetters = "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+";

const Family kFamilies[] = {
    {{"default", ""}, {R"re([\p{P}\$\+<=>\^~\|]+)re", kGpt2, R"re(\p{N}+)re", "[0-9][0-9][0-9]"}, false},
    {{"gpt-2", "gpt2", "phi-2", "mpt", "olmo", "jais", "trillion", "granite-docling", "exaone4", "jina-es", "jina-de",
      "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum", "modern-bert", "jina-v1-en", "jina-v2-code",
      "roberta-bpe"},
     {kGpt2},
     false},
    {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"},
     {kLlama3},
     true,
     true},
    {{"dbrx", "smaug-bpe", "chatglm-bpe"}, {kLlama3}, false},
    {{"glm4", "glm5"}, {kLlama3}, true},
    {{"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open"}, {kQwen2}, false},
    {{"qwen35"}, {kQwen35}, false},
    {{"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b", "mellum2"},
     {R"re(\p{N})re", kGpt2},
     false},
    {{"falcon"}, {R"re([\p{P}\$\+<=>\^~\|`]+)re", kGpt2, "[0-9][0-9][0-9]"}, false},
    {{"deepseek-llm"},
     {"[\r\n]", kDeepseekLetters, "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+", "\\s+$",
      "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+", R"re(\p{N}+)re"},
     false},
    {{"deepseek-coder"},
     {"[\r\n]", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re", "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+", R"re(\p{N})re"},
     false},
    {{"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"}, {R"re(\p{N}{1,3})re", kCjk, kDeepseek3Words}, false},
    {{"tekken"}, {kTekken}, true, true},
    {{"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}, {kGpt4o}, false},
    {{"kimi-k2"}, {kKimiK2}, false},
    {{"poro-chat", "bloom", "gpt3-finnish"}, {kBloom}, false},
    {{"viking"}, {kBloom, R"re(\p{N})re"}, false},
};
#undef LS_CONTRACTIONS

struct Registry {
  std::vector<PreTokenizer> all;
  std::vector<std::pair<std::string, size_t>> by_name;  // value -> index in all, sorted
};

// Compiles every family once. The patterns are fixed, so a pattern that does
// not compile is a bug in this file: abort with the reason.
const Registry& registry() {
  static const Registry r = [] {
    Registry reg;
    for (const Family& f : kFamilies) {
      PreTokenizer p;
      p.name = *f.names.begin();
      p.ignore_merges = f.ignore_merges;
      for (const char* pat : f.patterns) {
        auto re = SplitRegex::compile(pat);
        if (!re.ok()) {
          std::fprintf(stderr, "%s\n", re.status().ToString().c_str());
          std::abort();
        }
        p.patterns.push_back(std::move(re).value());
      }
      for (const char* n : f.names) reg.by_name.emplace_back(n, reg.all.size());
      reg.all.push_back(std::move(p));
    }
    std::sort(reg.by_name.begin(), reg.by_name.end());
    return reg;
  }();
  return r;
}

// Decodes like llama.cpp's unicode_cpts_from_utf8: a lead byte with its
// continuation bytes makes a code point (overlong forms and surrogates
// included); anything else is one U+FFFD per byte.
uint32_t decode_lax(std::string_view s, size_t& pos) {
  const auto b = static_cast<uint8_t>(s[pos]);
  size_t n = 0;
  uint32_t cp = 0;
  if (b < 0x80) {
    ++pos;
    return b;
  }
  if ((b & 0xE0) == 0xC0) n = 1, cp = b & 0x1F;
  else if ((b & 0xF0) == 0xE0) n = 2, cp = b & 0x0F;
  else if ((b & 0xF8) == 0xF0) n = 3, cp = b & 0x07;
  bool ok = n > 0 && pos + n < s.size();
  for (size_t k = 1; ok && k <= n; ++k) {
    const auto c = static_cast<uint8_t>(s[pos + k]);
    ok = (c & 0xC0) == 0x80;
    cp = (cp << 6) | (c & 0x3F);
  }
  if (!ok || cp > 0x10FFFF) {
    ++pos;
    return 0xFFFD;
  }
  pos += n + 1;
  return cp;
}

// The units of `text` and the byte offset of each in `bytes` (the text
// itself when it is valid UTF-8, else its re-encoding in `scratch`), plus
// one final offset.
std::string_view decode_text(std::string_view text, std::string& scratch, std::vector<Unit>& units,
                             std::vector<uint32_t>& offsets) {
  const bool valid = utf8::is_valid(text);
  if (!valid) scratch.clear();
  for (size_t pos = 0; pos < text.size();) {
    const size_t at = pos;
    const uint32_t cp = decode_lax(text, pos);
    offsets.push_back(static_cast<uint32_t>(valid ? at : scratch.size()));
    if (!valid) utf8::append_any(scratch, cp);
    units.push_back(make_unit(cp));
  }
  const std::string_view bytes = valid ? text : std::string_view(scratch);
  offsets.push_back(static_cast<uint32_t>(bytes.size()));
  return bytes;
}

}  // namespace

Result<const PreTokenizer*> find_pre_tokenizer(std::string_view name) {
  const Registry& r = registry();
  auto it = std::lower_bound(r.by_name.begin(), r.by_name.end(), name,
                             [](const auto& e, std::string_view n) { return e.first < n; });
  if (it != r.by_name.end() && it->first == name) return &r.all[it->second];
  std::string list;
  for (const std::string& n : supported_pre_tokenizer_names()) list += (list.empty() ? "" : ", ") + n;
  return Status::Unsupported("tokenizer pre-tokenizer '" + std::string(name) + "' is not supported (supported: " +
                             list + ")");
}

bool bpe_adds_bos_by_default(std::string_view name) {
  for (const Family& f : kFamilies) {
    for (const char* n : f.names) {
      if (n == name) return f.adds_bos;
    }
  }
  return false;
}

std::vector<std::string> supported_pre_tokenizer_names() {
  std::vector<std::string> out;
  for (const auto& [n, i] : registry().by_name) {
    if (!n.empty()) out.push_back(n);
  }
  return out;
}

void pre_tokenize(const PreTokenizer& pre, std::string_view text, std::string& scratch,
                  std::vector<std::string_view>& words) {
  words.clear();
  if (text.empty()) return;
  std::vector<Unit> units;
  std::vector<uint32_t> offsets;
  units.reserve(text.size());
  offsets.reserve(text.size() + 1);
  const std::string_view bytes = decode_text(text, scratch, units, offsets);

  // Piece boundaries in units; each pattern splits every piece into its
  // matches and the runs between them.
  std::vector<size_t> cuts = {0, units.size()}, next;
  for (const SplitRegex& re : pre.patterns) {
    next.clear();
    next.push_back(0);
    for (size_t k = 0; k + 1 < cuts.size(); ++k) {
      const size_t b = cuts[k], e = cuts[k + 1];
      size_t pos = b, mb, me;
      while (pos < e && re.find(units.data(), b, e, pos, &mb, &me)) {
        if (mb > pos) next.push_back(mb);
        next.push_back(me);
        pos = me;
      }
      if (next.back() != e) next.push_back(e);
    }
    cuts.swap(next);
  }
  words.reserve(cuts.size());
  for (size_t k = 0; k + 1 < cuts.size(); ++k) {
    words.push_back(bytes.substr(offsets[cuts[k]], offsets[cuts[k + 1]] - offsets[cuts[k]]));
  }
}

}  // namespace layerstream
