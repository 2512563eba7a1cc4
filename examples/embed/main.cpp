// A minimal app linking layerstream through its public API only.
#include <cstdio>
#include <cstring>

#include "layerstream/status.h"
#include "layerstream/units.h"

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--self-test") == 0) {
    layerstream::Result<uint64_t> r = layerstream::parse_size("2GiB");
    if (!r.ok() || *r != (2ull << 30)) return 1;
    std::printf("layerstream linked: 2GiB = %llu bytes\n", static_cast<unsigned long long>(*r));
    return 0;
  }
  std::printf("usage: embed --self-test\n");
  return 2;
}
