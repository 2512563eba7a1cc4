// bench_speculative: evidence for speculative decoding on real models, each
// model opened once (bench/speculative-identity.sh and
// bench/speculative-draft-length.sh run it).
//
//   bench_speculative identity MODEL [--kinds lookup,chain] [--draft FILE]
//       [--vram BYTES] [--ram BYTES] [--ctx 256] [--prompts 64] [--tokens 32] [--threads 2] [--json FILE]
//     Greedy tokens with each draft kind equal plain greedy tokens over
//     --prompts prompts (exit 1 otherwise); decode time against plain.
//   bench_speculative lengths MODEL --draft FILE [--vram BYTES] [--ram BYTES]
//       [--sim-link GBPS] [--lengths 1,2,4,7] [--rounds 3] [--tokens 32]
//       [--prompt TEXT] [--json FILE]
//     Decode tokens/s at each fixed draft length and with the length chosen
//     from measured costs, rounds interleaved.
#include <iostream>

#include "bench/speculative/bench_args.h"

int main(int argc, char** argv) {
  using namespace layerstream::bench_speculative;
  Args a;
  if (!parse(argc, argv, a)) return 2;
  if (a.mode == "identity") return run_identity(a);
  if (a.mode == "lengths") return run_lengths(a);
  std::cerr << "bench_speculative: the first argument is identity or lengths\n";
  return 2;
}
