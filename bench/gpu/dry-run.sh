#!/usr/bin/env bash
# Dry run HERE of the exact device call of the GPU check (issue 20, must-show 1):
#   1. an empty folder gets only what the device tool sends: the git working
#      tree (tracked and untracked-not-ignored files) and the carried gpu-carry/;
#   2. PATH is a folder of links to the few tools the check uses: no apt-get,
#      no pip, no compiler, no cmake;
#   3. `bash bench/gpu-check.sh` runs there with OUT set, as on the device; on
#      this machine (CUDA runtime, no driver) it must stop at "no CUDA device",
#      exit non-zero and finish within its deadline;
#   4. ldd of every carried binary must resolve only to carried libraries, the
#      C/C++ runtime and CUDA's libraries (bench/gpu/lib-policy.sh);
#   5. the carried size must be under the device tool's 64 MiB.
# Prints PASS/FAIL per point; exit 0 when all pass. Run bench/gpu/prepare.sh first.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
[ -f gpu-carry/MANIFEST.txt ] || { echo "dry-run: no gpu-carry/ (run bench/gpu/prepare.sh first)" >&2; exit 1; }
D=$(mktemp -d "${TMPDIR:-/tmp}/layerstream-gpu-dry.XXXXXX")
trap 'rm -rf "$D"' EXIT
mkdir -p "$D/repo" "$D/bin" "$D/out"
bad=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; bad=1; }

# 1. what the device call sends
git ls-files -z --cached --others --exclude-standard | (cd "$ROOT" && xargs -0 cp --parents -t "$D/repo" 2>/dev/null)
cp -a gpu-carry "$D/repo/gpu-carry"
echo "folder: $D/repo holds $(find "$D/repo" -type f | wc -l) files ($(du -sh "$D/repo" | cut -f1))"

# 2. a PATH without package managers
tools=(bash sh env timeout tee mktemp mkdir rm mv cp cat head tail sed awk grep tr cut ls find dirname basename
  uname nproc date tar gzip ldd ldconfig sleep wc sort xargs)
for t in "${tools[@]}"; do
  p=$(PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin command -v "$t") && ln -s "$p" "$D/bin/$t"
done
for t in apt-get apt dpkg pip pip3 python3 nvcc cmake gcc; do
  if PATH="$D/bin" command -v "$t" >/dev/null 2>&1; then fail "$t is on the dry run's PATH"; fi
done
echo "PATH=$D/bin: $(ls "$D/bin" | tr '\n' ' ')"

# 3. the exact command, as the device tool runs it
deadline=$(sed -n 's/^DEADLINE_S=\${LS_GPU_CHECK_DEADLINE_S:-\([0-9]*\)}.*/\1/p' bench/gpu-check.sh)
echo "== running: cd <folder> && OUT=<empty folder> bash bench/gpu-check.sh   (deadline ${deadline}s)"
t0=$(date +%s.%N)
(cd "$D/repo" && env -i HOME="$D" PATH="$D/bin" OUT="$D/out" bash bench/gpu-check.sh) > "$D/console.txt" 2>&1
rc=$?
t1=$(date +%s.%N)
secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
sed 's/^/  | /' "$D/console.txt"
if [ "$rc" -ne 0 ]; then pass "exit status $rc (non-zero)"; else fail "exit status 0 without a GPU"; fi
if grep -q "FAIL: no CUDA device" "$D/console.txt"; then pass "stopped at: $(grep -m1 'FAIL: no CUDA device' "$D/console.txt")"
else fail "did not stop at \"no CUDA device\""; fi
if awk -v s="$secs" -v d="$deadline" 'BEGIN { exit !(s < d) }'; then pass "took ${secs}s, within the ${deadline}s deadline"
else fail "took ${secs}s, over the ${deadline}s deadline"; fi
n_out=$(find "$D/out" -type f | wc -l)
echo "OUT holds: $(cd "$D/out" && find . -type f -printf '%p (%s B) ' )"
if [ "$n_out" -le 8 ]; then pass "$n_out file(s) under OUT (cap 8)"; else fail "$n_out files under OUT (cap 8)"; fi
grep -q '"device_gate": "no CUDA device' "$D/out/summary.json" && pass "summary.json records the gate" || fail "summary.json lacks the gate"

command -v python3 >/dev/null && python3 -m json.tool "$D/out/summary.json" >/dev/null &&
  pass "summary.json is valid JSON" || fail "summary.json is not valid JSON"

# 3b. rehearsal past the gate (LS_GPU_CHECK_REHEARSE=1) under a short deadline:
# every later step runs (and fails or is cut: there is no GPU), the run must
# still end within its deadline plus the kill grace, count skipped GPU tests as
# failures and leave at most 8 files.
short=${LS_DRY_RUN_REHEARSAL_DEADLINE_S:-45}
rm -rf "$D/out2" && mkdir -p "$D/out2"
echo "== rehearsal past the gate: deadline ${short}s"
t0=$(date +%s.%N)
(cd "$D/repo" && env -i HOME="$D" PATH="$D/bin" OUT="$D/out2" LS_GPU_CHECK_REHEARSE=1 LS_GPU_CHECK_DEADLINE_S="$short" \
  bash bench/gpu-check.sh) > "$D/console2.txt" 2>&1
rc2=$?
t1=$(date +%s.%N)
secs2=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
grep -E '^(== |-- |FAIL|REHEARSAL|  )' "$D/console2.txt" | sed 's/^/  | /'
[ "$rc2" -ne 0 ] && pass "rehearsal exit status $rc2" || fail "rehearsal exit status 0"
awk -v s="$secs2" -v d="$short" 'BEGIN { exit !(s < d + 6) }' && pass "rehearsal took ${secs2}s (deadline ${short}s + 5s kill grace)" ||
  fail "rehearsal took ${secs2}s, over ${short}s + 5s"
grep -q 'GPU test(s) skipped on a GPU machine' "$D/out2/summary.json" && pass "skipped GPU tests are failures" ||
  fail "skipped GPU tests were not reported as failures"
n_out2=$(find "$D/out2" -type f | wc -l)
[ "$n_out2" -le 8 ] && pass "rehearsal left $n_out2 file(s) under OUT" || fail "rehearsal left $n_out2 files under OUT"
command -v python3 >/dev/null && python3 -m json.tool "$D/out2/summary.json" >/dev/null &&
  pass "rehearsal summary.json is valid JSON" || fail "rehearsal summary.json is not valid JSON"

# 4. ldd of every carried binary, with the carried libraries first (as on the device)
. bench/gpu/lib-policy.sh
echo "== ldd (LD_LIBRARY_PATH=gpu-carry/lib)"
bad_before_ldd=$bad
bad=0
for b in "$D"/repo/gpu-carry/bin/*; do
  line=""
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || { line+=" $name[runtime]"; continue; }
    cls=$(lib_class "$name")
    if [ "$path" = "not" ]; then fail "$(basename "$b"): $name not found"; continue; fi
    case "$path" in "$D"/repo/gpu-carry/lib/*) cls=carried ;; esac
    if [ "$cls" = carried ] && [[ "$path" != "$D"/repo/gpu-carry/lib/* ]]; then
      fail "$(basename "$b"): $name resolves outside the carry ($path)"
    fi
    line+=" $name[$cls]"
  done < <(LD_LIBRARY_PATH="$D/repo/gpu-carry/lib" ldd "$b" | awk '{ print $1, $2, $3 }')
  echo "  $(basename "$b"):$line"
done
[ "$bad" -eq 0 ] && pass "every carried binary resolves to carried libs, the C/C++ runtime or CUDA libs"
bad=$((bad | bad_before_ldd))

# 5. size
carry_bytes=$(du -sb gpu-carry | cut -f1)
tree_bytes=$(git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
total=$((carry_bytes + tree_bytes))
msg=$(awk -v c="$carry_bytes" -v t="$tree_bytes" 'BEGIN { printf "carry %.1f MiB + tree %.1f MiB = %.1f MiB", c/1048576, t/1048576, (c+t)/1048576 }')
if [ "$total" -lt $((64 * 1024 * 1024)) ]; then pass "$msg (< 64 MiB)"; else fail "$msg (>= 64 MiB)"; fi

[ "$bad" -eq 0 ] && echo "dry run: all checks passed" || echo "dry run: some checks FAILED"
exit "$bad"
