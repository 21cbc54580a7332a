#!/usr/bin/env bash
# Runs remora's whole test suite on a fresh machine, as CI does:
#   1. installs missing Debian packages and builds with -Dwerror=true (build/; the test builds
#      are debugoptimized, with asserts and the scheduler's self-checks, whatever setup.sh's
#      release default),
#   2. builds again with -Db_sanitize=address,undefined (build-asan/),
#   3. builds with clang, its address and undefined sanitizers (NULL + 0 and float-to-int
#      overflow included, every report fatal) and the libFuzzer harnesses (build-clang/,
#      scripts/fuzz.sh --build; CUDA and NCCL off: nvcc needs gcc as host compiler),
#   4. runs every suite (unit, golden; gpu tests skip without a GPU) in the three builds,
#   5. runs each fuzz harness for REMORA_FUZZ_SECONDS (default 20) over its corpus,
#   6. ends with one line "N passed, N failed, N skipped" counted per Criterion test case, each
#      fuzz harness counting as one test.
# Exit status: 0 when everything passed in all builds.
set -uo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh build -Dbuildtype=debugoptimized -Dwerror=true || { echo "build failed"; echo "0 passed, 1 failed"; exit 1; }
scripts/setup.sh build-asan -Dbuildtype=debugoptimized -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false \
  || { echo "sanitizer build failed"; echo "0 passed, 1 failed"; exit 1; }
scripts/fuzz.sh --build || { echo "clang build failed"; echo "0 passed, 1 failed"; exit 1; }

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

status=0
passed=0 failed=0 skipped=0
for b in build build-asan build-clang; do
  meson test -C "$b" --print-errorlogs --num-processes 2 || status=1
  # Count Criterion cases from the TAP each test printed; a test that died before printing
  # its TAP counts as one failure.
  counts=$(jq -r '
      (.stdout // "") as $o
      | ([$o | scan("(?m)^ok [^\n]*")] | map(select(test("# SKIP") | not)) | length) as $ok
      | ([$o | scan("(?m)^not ok [^\n]*")] | length) as $nok
      | ([$o | scan("(?m)^ok [^\n]*# SKIP")] | length) as $skip
      | if .result == "SKIP" then "0 0 1"
        elif (.result != "OK" and $nok == 0) then "\($ok) 1 \($skip)"
        else "\($ok) \($nok) \($skip)" end' "$b/meson-logs/testlog.json")
  p=0 f=0 s=0
  while read -r a c d; do
    p=$((p + a)); f=$((f + c)); s=$((s + d))
  done <<< "$counts"
  echo "$b: $p passed, $f failed, $s skipped"
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
done
# Fuzzing: one test per harness ("fuzz NAME: ok ..." or "... FAILED ...").
fuzz_out=$(scripts/fuzz.sh "${REMORA_FUZZ_SECONDS:-20}") || status=1
echo "$fuzz_out"
fp=$(grep -c '^fuzz .* ok ' <<< "$fuzz_out" || true)
ff=$(grep -c '^fuzz .* FAILED ' <<< "$fuzz_out" || true)
[ $((fp + ff)) -gt 0 ] || ff=1 # nothing ran: the fuzz step itself failed
echo "fuzz: $fp passed, $ff failed, 0 skipped"
passed=$((passed + fp)); failed=$((failed + ff))
[ "$failed" -eq 0 ] || status=1
echo "$passed passed, $failed failed, $skipped skipped"
exit $status
