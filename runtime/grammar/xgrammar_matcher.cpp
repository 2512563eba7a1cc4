// GrammarMatcher over xgrammar::GrammarMatcher. Requests the engine would
// refuse with a warning on stderr (a token it never allows, anything after
// termination) are answered here first, as a Status.
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include "runtime/grammar/grammar_matcher.h"
#include "runtime/grammar/xgrammar_impl.h"

namespace layerstream::grammar {
namespace {

// A token's bytes for an error message: printable ASCII as is, others as \xNN.
std::string printable(const std::string& piece) {
  std::string out;
  for (unsigned char c : piece.substr(0, 24)) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return piece.size() > 24 ? out + "..." : out;
}

}  // namespace

struct GrammarMatcher::Impl {
  std::shared_ptr<const CompiledGrammar> grammar;  // keeps the compiled tables alive
  xgrammar::TokenizerInfo info;
  xgrammar::GrammarMatcher matcher;
  int accepted = 0;  // tokens accepted since create()/reset(): how far rollback() may go

  bool is_stop(int32_t id) const {
    const std::vector<int32_t>& stops = info.GetStopTokenIds();
    return std::find(stops.begin(), stops.end(), id) != stops.end();
  }
  // Never allowed: padding rows past the vocabulary, tokens that add no
  // text, and those the output format rules out.
  bool never_allowed(int32_t id) const {
    const std::vector<std::string>& pieces = info.GetDecodedVocab();
    if (id >= static_cast<int32_t>(pieces.size()) || (pieces[id].empty() && !is_stop(id))) return true;
    const auto& out = grammar->impl().ruled_out;
    return out && std::binary_search(out->begin(), out->end(), id);
  }
};

GrammarMatcher::GrammarMatcher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GrammarMatcher::~GrammarMatcher() = default;

Result<std::unique_ptr<GrammarMatcher>> GrammarMatcher::create(std::shared_ptr<const CompiledGrammar> grammar) {
  if (!grammar) return Status::InvalidArgument("grammar matcher: no compiled grammar");
  try {
    const xgrammar::CompiledGrammar& compiled = grammar->impl().compiled;
    xgrammar::TokenizerInfo info = compiled.GetTokenizerInfo();
    xgrammar::GrammarMatcher matcher(compiled);
    return std::unique_ptr<GrammarMatcher>(
        new GrammarMatcher(std::make_unique<Impl>(Impl{std::move(grammar), std::move(info), std::move(matcher)})));
  } catch (const std::exception& e) {
    return engine_error("grammar matcher", e);
  }
}

Result<bool> GrammarMatcher::fill_next_token_mask(TokenBitmask& mask) {
  const int32_t size = impl_->grammar->logits_size();
  if (mask.vocab_size() != size) {
    return Status::InvalidArgument("grammar matcher: the mask covers " + std::to_string(mask.vocab_size()) +
                                   " tokens, the grammar's vocabulary " + std::to_string(size));
  }
  if (is_terminated()) return Status::InvalidArgument("grammar matcher: the grammar has terminated");
  int64_t shape[1] = {static_cast<int64_t>(mask.words().size())};
  DLTensor tensor{};
  tensor.data = mask.words().data();
  tensor.device = DLDevice{kDLCPU, 0};
  tensor.ndim = 1;
  tensor.dtype = xgrammar::GetBitmaskDLType();
  tensor.shape = shape;
  bool filled = false;
  try {
    filled = impl_->matcher.FillNextTokenBitmask(&tensor);
  } catch (const std::exception& e) {
    return engine_error("grammar matcher", e);
  }
  const auto& out = impl_->grammar->impl().ruled_out;
  if (!out || out->empty()) return filled;
  for (int32_t id : *out) mask.words()[id / 32] &= ~static_cast<int32_t>(1u << (id % 32));
  return true;
}

Status GrammarMatcher::accept_token(int32_t id) {
  const int32_t size = impl_->grammar->logits_size();
  if (id < 0 || id >= size) {
    return Status::InvalidArgument("grammar matcher: token " + std::to_string(id) + " is outside the vocabulary [0, " +
                                   std::to_string(size) + ")");
  }
  if (is_terminated()) {
    return Status::InvalidArgument("grammar matcher: the grammar has terminated; token " + std::to_string(id) +
                                   " cannot follow");
  }
  const bool accepted = !impl_->never_allowed(id) && impl_->matcher.AcceptToken(id);
  if (!accepted) {
    const std::vector<std::string>& pieces = impl_->info.GetDecodedVocab();
    const std::string piece = id < static_cast<int32_t>(pieces.size()) ? printable(pieces[id]) : "<padding>";
    return Status::InvalidArgument("grammar matcher: token " + std::to_string(id) + " \"" + piece +
                                   "\" is not allowed here by the grammar");
  }
  ++impl_->accepted;
  return Status::OK();
}

bool GrammarMatcher::is_terminated() const { return impl_->matcher.IsTerminated(); }

Status GrammarMatcher::rollback(int n) {
  if (n < 0 || n > impl_->accepted) {
    return Status::InvalidArgument("grammar matcher: cannot roll back " + std::to_string(n) + " tokens; " +
                                   std::to_string(impl_->accepted) + " were accepted");
  }
  impl_->matcher.Rollback(n);
  impl_->accepted -= n;
  return Status::OK();
}

void GrammarMatcher::reset() {
  impl_->matcher.Reset();
  impl_->accepted = 0;
}

}  // namespace layerstream::grammar
