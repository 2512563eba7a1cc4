// Which part of a sequence's KV a new prompt can keep: the one rule shared by
// Context::generate (PromptStart::kReusePrefix) and the server's PrefixCache.
//
// Reusing KV whatever pass wrote it (a prefill, or the one-token passes of an
// earlier answer) gives the logits a fresh prefill gives only because the
// CPU kernels are batch-invariant (kernels/kernels.h; docs/ARCHITECTURE.md,
// "Prefix reuse").
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

namespace layerstream::llama {

// How many leading tokens of `prompt` a sequence whose KV holds `held` (its
// tokens at positions 0, 1, ...) keeps: their common prefix, short of the
// prompt's last token, which is always decoded (its logits start the
// generation). 0 for an empty prompt.
inline int reusable_prefix(std::span<const int32_t> held, std::span<const int32_t> prompt) {
  const size_t n = std::min(held.size(), prompt.empty() ? 0 : prompt.size() - 1);
  return static_cast<int>(std::mismatch(held.begin(), held.begin() + n, prompt.begin()).first - held.begin());
}

}  // namespace layerstream::llama
