// Structured output on the real vocabularies of SmolLM2 (byte-level BPE) and
// gemma-3 (SentencePiece, byte fallback): a JSON document tokenized by our
// tokenizer passes the mask token by token and then ends; what cannot follow
// is masked out and refused; random walks that draw only allowed tokens (the
// mask applied to random logits) end in text that satisfies the JSON schema,
// regex or GBNF grammar, checked here independently of the engine. The
// models come from $LAYERSTREAM_MODELS (tests/run.sh fetches them); unset,
// the suite skips with a message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "runtime/grammar/grammar_matcher.h"
#include "tests/common/testing.h"
#include "tests/grammar/real_vocab.h"

namespace layerstream::grammar {
namespace {

using layerstream::testing::contains_all;

class GrammarOnRealVocab : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!structured_output_available()) GTEST_SKIP() << "this build has no grammar engine (xgrammar)";
    std::string skip, error;
    vocab_ = testing::real_vocab(GetParam(), &skip, &error);
    if (!skip.empty()) GTEST_SKIP() << skip;
    ASSERT_NE(vocab_, nullptr) << error;
  }
  const Tokenizer& tok() const { return *vocab_->tokenizer; }
  GrammarCompiler& compiler() const { return *vocab_->compiler; }

  std::unique_ptr<GrammarMatcher> matcher_for(const Constraint& c) {
    auto compiled = compiler().compile(c);
    EXPECT_TRUE(compiled.ok()) << compiled.status().ToString();
    if (!compiled.ok()) return nullptr;
    auto m = GrammarMatcher::create(*compiled);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? std::move(*m) : nullptr;
  }

  // The one token our tokenizer makes of `text`.
  int32_t single_token(const std::string& text) const {
    const std::vector<int32_t> ids = tok().encode(text, /*add_special=*/false);
    EXPECT_EQ(ids.size(), 1u) << "\"" << text << "\" is not one token";
    return ids.empty() ? -1 : ids[0];
  }

  // Draws tokens by argmax of random logits under the mask (so uniformly
  // among the allowed ones) until the grammar terminates or max_steps pass.
  // Returns the text of the drawn tokens; `terminated` says how it ended.
  std::string random_walk(GrammarMatcher& m, uint64_t seed, int max_steps, bool* terminated) {
    uint64_t state = seed | 1;  // xorshift64: cheap enough for gemma's 262k logits per step
    TokenBitmask mask(compiler().logits_size());
    std::vector<float> logits(compiler().logits_size());
    std::vector<int32_t> drawn;
    for (int step = 0; step < max_steps && !m.is_terminated(); ++step) {
      auto ruled_out = m.fill_next_token_mask(mask);
      EXPECT_TRUE(ruled_out.ok()) << ruled_out.status().ToString();
      if (!ruled_out.ok()) break;
      for (float& x : logits) {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        x = static_cast<float>(state >> 40) * 0x1p-24f;  // uniform in [0, 1)
      }
      apply_token_bitmask(mask, logits);
      const auto id = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      EXPECT_TRUE(mask.allows(id)) << "drew a masked token";
      const Status s = m.accept_token(id);
      EXPECT_TRUE(s.ok()) << s.ToString();
      if (!s.ok()) break;
      if (!tok().is_eog(id)) drawn.push_back(id);
    }
    *terminated = m.is_terminated();
    return tok().decode(drawn);
  }

  // Four random walks under `c` each end within 100 tokens in text that
  // the regular expression `language` matches.
  void expect_walks_in_language(const Constraint& c, const std::string& language) {
    auto m = matcher_for(c);
    ASSERT_NE(m, nullptr);
    const uint64_t seed = layerstream::testing::fresh_seed();
    SCOPED_TRACE(seed);
    for (int walk = 0; walk < 4; ++walk) {
      m->reset();
      bool terminated = false;
      const std::string text = random_walk(*m, seed + walk, 100, &terminated);
      ASSERT_TRUE(terminated) << text;
      EXPECT_TRUE(std::regex_match(text, std::regex(language))) << text;
    }
  }

  const testing::RealVocab* vocab_ = nullptr;
};

// What does not depend on the vocabulary's kind runs on SmolLM2's alone: each
// test is a process of its own under ctest, and gemma's 262k-token compiler
// takes seconds to build under the sanitizers.
class GrammarOnSmolLM2 : public GrammarOnRealVocab {};

// Nested values, escapes, unicode, numbers of every shape, indentation.
constexpr const char* kDocument = R"({
  "name": "Ada Lovelace",
  "born": 1815, "ratio": -0.5e-3, "score": 12.75,
  "tags": ["math", "café ✓", "tab\tq\"uote\\", "\u00e9"],
  "alive": false, "spouse": null,
  "nested": {"list": [1, 2.5, {"deep": true}], "empty": {}, "arr": []}
})";

TEST_P(GrammarOnRealVocab, JsonDocumentPassesTheMaskTokenByTokenThenEnds) {
  ASSERT_TRUE(nlohmann::json::accept(kDocument));
  const std::vector<int32_t> ids = tok().encode(kDocument, /*add_special=*/false);
  ASSERT_EQ(tok().decode(ids), kDocument);
  auto m = matcher_for(Constraint::json_object());
  ASSERT_NE(m, nullptr);
  TokenBitmask mask(compiler().logits_size());
  for (size_t i = 0; i < ids.size(); ++i) {
    auto ruled_out = m->fill_next_token_mask(mask);
    ASSERT_TRUE(ruled_out.ok()) << ruled_out.status().ToString();
    EXPECT_TRUE(*ruled_out) << "JSON never allows every token";
    ASSERT_TRUE(mask.allows(ids[i])) << "token " << i << " \"" << tok().token_to_piece(ids[i]) << "\" masked out";
    EXPECT_FALSE(mask.allows(*tok().eos())) << "the document cannot end at token " << i;
    LS_ASSERT_OK(m->accept_token(ids[i]));
    ASSERT_FALSE(m->is_terminated());
  }
  auto ruled_out = m->fill_next_token_mask(mask);
  ASSERT_TRUE(ruled_out.ok());
  EXPECT_TRUE(mask.allows(*tok().eos())) << "the document is complete: EOS must be allowed";
  LS_ASSERT_OK(m->accept_token(*tok().eos()));
  EXPECT_TRUE(m->is_terminated());
  EXPECT_TRUE(m->fill_next_token_mask(mask).status().IsInvalidArgument()) << "nothing follows the end";
  EXPECT_TRUE(m->accept_token(ids[0]).IsInvalidArgument());
}

TEST_P(GrammarOnSmolLM2, JsonModeMasksAndRefusesWhatCannotFollow) {
  auto m = matcher_for(Constraint::json_object());
  ASSERT_NE(m, nullptr);
  TokenBitmask mask(compiler().logits_size());
  ASSERT_TRUE(m->fill_next_token_mask(mask).ok());
  EXPECT_FALSE(mask.allows(single_token("["))) << "JSON mode is an object, not an array";
  EXPECT_FALSE(mask.allows(single_token("a")));
  EXPECT_TRUE(mask.allows(single_token("{")));
  for (int32_t id = 0; id < tok().vocab_size(); ++id) {
    if (tok().is_control(id) && !tok().is_eog(id)) ASSERT_FALSE(mask.allows(id)) << "control token " << id;
  }
  EXPECT_TRUE(m->accept_token(single_token("[")).IsInvalidArgument());

  for (int32_t id : tok().encode(R"({"a": [1, 2)", false)) LS_ASSERT_OK(m->accept_token(id));
  ASSERT_TRUE(m->fill_next_token_mask(mask).ok());
  const int32_t close_brace = single_token("}"), close_bracket = single_token("]");
  EXPECT_FALSE(mask.allows(close_brace)) << "an array is open";
  EXPECT_TRUE(mask.allows(close_bracket));
  EXPECT_TRUE(mask.allows(single_token(",")));
  EXPECT_FALSE(mask.allows(*tok().eos()));
  EXPECT_LT(mask.count_allowed(), tok().vocab_size() / 2);
  // A refused token leaves the state as it was: the right one still fits.
  const Status refused = m->accept_token(close_brace);
  EXPECT_TRUE(refused.IsInvalidArgument());
  EXPECT_TRUE(contains_all(refused.message(), {"not allowed", "}"}));
  LS_EXPECT_OK(m->accept_token(close_bracket));
  LS_EXPECT_OK(m->accept_token(close_brace));
  ASSERT_TRUE(m->fill_next_token_mask(mask).ok());
  EXPECT_TRUE(mask.allows(*tok().eos()));
}

// Inside a JSON string the engine's rule would let raw control bytes in
// (0x1c came out of a random walk); JSON allows none, so strict parsers
// refuse the text. The mask and accept_token rule out every token holding one.
TEST_P(GrammarOnSmolLM2, JsonStringsAdmitNoRawControlBytes) {
  auto m = matcher_for(Constraint::json_object());
  ASSERT_NE(m, nullptr);
  for (int32_t id : tok().encode(R"({"a": "x)", false)) LS_ASSERT_OK(m->accept_token(id));
  TokenBitmask mask(compiler().logits_size());
  ASSERT_TRUE(m->fill_next_token_mask(mask).ok());
  int with_control = 0;
  for (int32_t id = 0; id < tok().vocab_size(); ++id) {
    const std::string piece = tok().token_to_piece(id);
    const bool control = std::any_of(piece.begin(), piece.end(), [](char c) {
      const auto b = static_cast<unsigned char>(c);
      return b < 0x20 && b != '\t' && b != '\n' && b != '\r';
    });
    if (!control) continue;
    ++with_control;
    EXPECT_FALSE(mask.allows(id)) << "token " << id << " holds a raw control byte";
    EXPECT_TRUE(m->accept_token(id).IsInvalidArgument()) << "token " << id;
  }
  EXPECT_GT(with_control, 0) << "the vocabulary has byte tokens for control characters";
  EXPECT_TRUE(mask.allows(single_token("a"))) << "ordinary text still fits in the string";
}

// UTF-8 characters in s (JSON schema lengths count characters, not bytes).
size_t utf8_length(const std::string& s) {
  return std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
}

constexpr const char* kSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 12},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "color": {"enum": ["red", "green", "blue"]},
    "tags": {"type": "array", "items": {"type": "boolean"}, "maxItems": 3}
  },
  "required": ["name", "age", "color"]
})";

// The schema's constraints, checked on the parsed output.
::testing::AssertionResult satisfies_schema(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return ::testing::AssertionFailure() << "not JSON: " << text;
  if (!j.is_object()) return ::testing::AssertionFailure() << "not an object: " << text;
  for (const char* key : {"name", "age", "color"})
    if (!j.contains(key)) return ::testing::AssertionFailure() << "no required \"" << key << "\": " << text;
  for (const auto& [key, value] : j.items())
    if (key != "name" && key != "age" && key != "color" && key != "tags")
      return ::testing::AssertionFailure() << "extra key \"" << key << "\": " << text;
  if (!j["name"].is_string() || utf8_length(j["name"].get<std::string>()) > 12)
    return ::testing::AssertionFailure() << "bad name: " << text;
  if (!j["age"].is_number_integer() || j["age"].get<int64_t>() < 0 || j["age"].get<int64_t>() > 150)
    return ::testing::AssertionFailure() << "bad age: " << text;
  static const std::set<std::string> colors = {"red", "green", "blue"};
  if (!j["color"].is_string() || !colors.count(j["color"].get<std::string>()))
    return ::testing::AssertionFailure() << "bad color: " << text;
  if (j.contains("tags")) {
    const auto& tags = j["tags"];
    if (!tags.is_array() || tags.size() > 3) return ::testing::AssertionFailure() << "bad tags: " << text;
    for (const auto& t : tags)
      if (!t.is_boolean()) return ::testing::AssertionFailure() << "a tag is not a boolean: " << text;
  }
  return ::testing::AssertionSuccess();
}

TEST_P(GrammarOnRealVocab, SchemaRandomWalksEndInJsonThatValidates) {
  const uint64_t seed = layerstream::testing::fresh_seed();
  SCOPED_TRACE(seed);
  for (bool any_whitespace : {true, false}) {
    JsonFormat format;
    format.any_whitespace = any_whitespace;
    format.max_whitespace_run = 4;
    auto m = matcher_for(Constraint::json_schema(kSchema, format));
    ASSERT_NE(m, nullptr);
    // gemma's 262k logits per step make a walk cost ~10x SmolLM2's (more under the sanitizers).
    const int walks = GetParam() == "gemma3" ? 1 : 3;
    for (int walk = 0; walk < walks; ++walk) {
      m->reset();
      bool terminated = false;
      const std::string text = random_walk(*m, seed + walk, 600, &terminated);
      ASSERT_TRUE(terminated) << "no end after 600 tokens: " << text;
      EXPECT_TRUE(satisfies_schema(text));
      if (!any_whitespace) EXPECT_EQ(text.find('\n'), std::string::npos) << text;
    }
  }
}

TEST_P(GrammarOnSmolLM2, RegexRandomWalksMatchThePattern) {
  const std::string pattern = R"([A-Z]{2}-[0-9]{3}(\.[a-z]{1,5})?)";
  expect_walks_in_language(Constraint::regex(pattern), pattern);
}

TEST_P(GrammarOnSmolLM2, GbnfGrammarRandomWalksMatchTheLanguage) {
  const std::string gbnf = R"(root ::= greeting " " name ("!" | "?")
greeting ::= "hello" | "goodbye"
name ::= [a-z] [a-z]? [a-z]? [a-z]?
)";
  expect_walks_in_language(Constraint::grammar(gbnf), "(hello|goodbye) [a-z]{1,4}[!?]");
}

TEST_P(GrammarOnSmolLM2, RollbackUndoesAcceptedTokensAndTheEnd) {
  auto m = matcher_for(Constraint::json_object());
  ASSERT_NE(m, nullptr);
  const std::vector<int32_t> ids = tok().encode(R"({"k": [true]})", false);
  for (int32_t id : ids) LS_ASSERT_OK(m->accept_token(id));
  LS_ASSERT_OK(m->accept_token(*tok().eos()));
  ASSERT_TRUE(m->is_terminated());
  LS_ASSERT_OK(m->rollback(1));
  EXPECT_FALSE(m->is_terminated());
  LS_ASSERT_OK(m->rollback(static_cast<int>(ids.size())));
  TokenBitmask mask(compiler().logits_size());
  ASSERT_TRUE(m->fill_next_token_mask(mask).ok());
  EXPECT_FALSE(mask.allows(single_token("]"))) << "back at the start: nothing is open";
  EXPECT_TRUE(m->rollback(1).IsInvalidArgument()) << "nothing left to undo";
  for (int32_t id : ids) LS_ASSERT_OK(m->accept_token(id));
  LS_EXPECT_OK(m->accept_token(*tok().eos()));
}

TEST_P(GrammarOnRealVocab, VocabularyGivesTextPiecesStopIdsAndNoControlText) {
  auto v = make_grammar_vocabulary(tok());
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_EQ(static_cast<int32_t>(v->pieces.size()), tok().vocab_size());
  EXPECT_EQ(v->logits_size, tok().vocab_size());
  EXPECT_TRUE(std::find(v->stop_ids.begin(), v->stop_ids.end(), *tok().eos()) != v->stop_ids.end());
  for (int32_t id : v->stop_ids) EXPECT_TRUE(tok().is_eog(id));
  for (int32_t id = 0; id < tok().vocab_size(); ++id) {
    if (tok().is_control(id)) ASSERT_TRUE(v->pieces[id].empty()) << "control token " << id;
  }
  std::string joined;
  for (int32_t id : tok().encode(kDocument, false)) joined += v->pieces[id];
  EXPECT_EQ(joined, kDocument) << "the pieces are the bytes the tokens add";
  EXPECT_TRUE(make_grammar_vocabulary(tok(), tok().vocab_size() - 1).status().IsInvalidArgument());
  auto padded = make_grammar_vocabulary(tok(), tok().vocab_size() + 64);
  ASSERT_TRUE(padded.ok());
  EXPECT_EQ(padded->logits_size, tok().vocab_size() + 64);
}

INSTANTIATE_TEST_SUITE_P(Models, GrammarOnRealVocab, ::testing::Values("smollm2", "gemma3"),
                         [](const auto& info) { return info.param; });


TEST_P(GrammarOnSmolLM2, BadConstraintTextIsAnErrorNamingTheKind) {
  struct Case {
    Constraint c;
    const char* kind;
  };
  const std::vector<Case> cases = {
      {Constraint::json_schema("{\"type\": \"object\", "), "json_schema"},
      {Constraint::json_schema(R"({"type": "no-such-type"})"), "json_schema"},
      {Constraint::json_schema(""), "json_schema"},
      {Constraint::regex("([a-z]"), "regex"},
      {Constraint::grammar("root ::= undefined_rule"), "grammar"},
      {Constraint::grammar("this is not ebnf"), "grammar"},
  };
  for (const Case& k : cases) {
    auto r = compiler().compile(k.c);
    ASSERT_FALSE(r.ok()) << k.kind << ": " << k.c.text;
    EXPECT_TRUE(r.status().IsInvalidArgument()) << r.status().ToString();
    EXPECT_TRUE(r.status().message().starts_with(std::string(k.kind) + ": ")) << r.status().ToString();
    EXPECT_GT(r.status().message().size(), std::string(k.kind).size() + 8) << "a reason follows the kind";
    EXPECT_EQ(r.status().message().find(".cc:"), std::string::npos) << "no source location: " << r.status().message();
  }
}

TEST_P(GrammarOnSmolLM2, RepeatedSchemaIsServedFromTheCache) {
  const std::string schema = R"({"type": "object", "properties": {"cache_probe": {"type": "number"}}})";
  ASSERT_TRUE(compiler().compile(Constraint::json_schema(schema)).ok());
  const int64_t after_first = compiler().cache_bytes();
  EXPECT_GT(after_first, 0);
  ASSERT_TRUE(compiler().compile(Constraint::json_schema(schema)).ok());
  EXPECT_EQ(compiler().cache_bytes(), after_first) << "the same schema again must not compile anew";
  ASSERT_TRUE(compiler().compile(Constraint::json_schema(schema + " ")).ok());
  EXPECT_GT(compiler().cache_bytes(), after_first) << "other text is another entry";
}

TEST_P(GrammarOnSmolLM2, MaskSizeAndTokenIdsAreChecked) {
  auto m = matcher_for(Constraint::json_object());
  ASSERT_NE(m, nullptr);
  TokenBitmask wrong(compiler().logits_size() - 1);
  EXPECT_TRUE(m->fill_next_token_mask(wrong).status().IsInvalidArgument());
  EXPECT_TRUE(m->accept_token(-1).IsInvalidArgument());
  EXPECT_TRUE(m->accept_token(compiler().logits_size()).IsInvalidArgument());
  EXPECT_TRUE(m->rollback(-1).IsInvalidArgument());
  EXPECT_TRUE(GrammarMatcher::create(nullptr).status().IsInvalidArgument());
}

INSTANTIATE_TEST_SUITE_P(Models, GrammarOnSmolLM2, ::testing::Values("smollm2"),
                         [](const auto& info) { return info.param; });

// Without the engine every entry point says what is missing; with it, a
// compiler is made. Runs in every build and needs no model.
TEST(GrammarEngine, AvailabilityMatchesWhatTheCompilerDoes) {
  GrammarVocabulary v;
  v.pieces = {"a", "b", "{", "}", ""};
  v.stop_ids = {4};
  v.logits_size = 5;
  auto c = GrammarCompiler::create(v);
  if (structured_output_available()) {
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    auto g = (*c)->compile(Constraint::regex("ab"));
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    auto m = GrammarMatcher::create(*g);
    ASSERT_TRUE(m.ok());
    TokenBitmask mask(5);
    ASSERT_TRUE((*m)->fill_next_token_mask(mask).ok());
    EXPECT_TRUE(mask.allows(0));
    EXPECT_EQ(mask.count_allowed(), 1);
  } else {
    ASSERT_TRUE(c.status().IsUnsupported());
    EXPECT_TRUE(contains_all(c.status().message(), {"structured output", "xgrammar", "tests/install-xgrammar.sh"}));
  }
  v.logits_size = 4;
  EXPECT_FALSE(GrammarCompiler::create(v).ok());
}

}  // namespace
}  // namespace layerstream::grammar
