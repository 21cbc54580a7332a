#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz/ (clang, address + undefined sanitizers, in
# build-clang/ configured with -Dfuzz=enabled) and runs each for SECONDS (default 20) over a
# temporary copy of its corpus, tests/fuzz/corpus/NAME/, so the committed corpus never grows.
# Usage: scripts/fuzz.sh [SECONDS] [NAME...]        (FUZZ_JOBS harnesses at once, default 2)
#        scripts/fuzz.sh --build                    (configure and build build-clang/ only)
# Prints one line per harness: "fuzz NAME: ok|FAILED  executions N  cov N  crashes N  [reason]"
# and exits non-zero on any crash, sanitizer report, timeout (-timeout=2), leak or OOM. The inputs
# that failed are kept under build-clang/fuzz-artifacts/NAME/; add the fixed ones to the corpus.
set -uo pipefail
cd "$(dirname "$0")/.."

build_only=false
[ "${1:-}" = --build ] && { build_only=true; shift; }
seconds=${1:-20}
shift || true
all=(scenario scenario_set hfconfig program xla_flags remat_policy nccl_tests calib_jsonl size validation_case trace hlo)
names=("$@")
[ ${#names[@]} -gt 0 ] || names=("${all[@]}")
jobs=${FUZZ_JOBS:-2}
build=build-clang

CC=clang scripts/setup.sh "$build" -Dbuildtype=debugoptimized -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false \
  -Dcuda=disabled -Dnccl=disabled -Dfuzz=enabled \
  "-Dc_args=-fsanitize=float-cast-overflow -fno-sanitize-recover=all" \
  "-Dc_link_args=-fsanitize=float-cast-overflow -fno-sanitize-recover=all" \
  || { echo "fuzz: build failed"; exit 1; }
$build_only && exit 0

work=$(mktemp -d "${TMPDIR:-/tmp}/remora-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
export ASAN_OPTIONS=${FUZZ_ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${FUZZ_UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# leaks inside libfyaml itself, reproduced without remora (tests/fuzz/lsan.supp)
export LSAN_OPTIONS=${FUZZ_LSAN_OPTIONS:-suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0}
export TMPDIR=$work

# One harness: fuzz, then write its summary line to $work/NAME.result.
run_one() {
  local name=$1 exe="$build/tests/fuzz/fuzz_$1" dir="$work/$1"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  rm -rf "$build/fuzz-artifacts/$name" # what a previous run left
  cp tests/fuzz/corpus/"$name"/* "$dir/corpus/" 2>/dev/null
  # a fixed seed (REMORA_FUZZ_SEED, default 1): CI replays the same mutations each run, so a
  # finding is reproducible and a green run stays green; set it to 0 for a random seed
  "$exe" -seed="${REMORA_FUZZ_SEED:-1}" -max_total_time="$seconds" -timeout=2 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$dir/artifacts/" "$dir/corpus" >"$dir/log" 2>&1
  local rc=$?
  local execs cov crashes reason=""
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
  cov=$(grep -Eo '(DONE|pulse|NEW|REDUCE|INITED) +cov: [0-9]+' "$dir/log" | tail -1 | grep -Eo '[0-9]+$')
  crashes=$(find "$dir/artifacts" -type f | wc -l)
  if [ "$rc" -ne 0 ] || [ "$crashes" -gt 0 ]; then
    reason=$(grep -Eo 'ERROR: (libFuzzer|AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer): [a-z0-9 -]+|SUMMARY: libFuzzer: [a-z0-9 -]+|runtime error: .*' "$dir/log" | head -1)
    [ -n "$reason" ] || reason="exit status $rc"
    mkdir -p "$build/fuzz-artifacts/$name"
    cp "$dir/artifacts/"* "$dir/log" "$build/fuzz-artifacts/$name/" 2>/dev/null
    [ "$crashes" -gt 0 ] || crashes=1
    printf 'fuzz %-13s FAILED  executions %s  cov %s  crashes %s  (%s; see %s/fuzz-artifacts/%s/)\n' \
      "$name:" "${execs:-?}" "${cov:-?}" "$crashes" "$reason" "$build" "$name" >"$work/$name.result"
  else
    printf 'fuzz %-13s ok      executions %s  cov %s  crashes 0\n' "$name:" "${execs:-?}" "${cov:-?}" \
      >"$work/$name.result"
  fi
}

running=0
for n in "${names[@]}"; do
  [ -x "$build/tests/fuzz/fuzz_$n" ] || { echo "fuzz: no harness '$n' (known: ${all[*]})"; exit 2; }
  run_one "$n" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
done
wait

status=0
for n in "${names[@]}"; do
  cat "$work/$n.result"
  grep -q ' ok ' "$work/$n.result" || status=1
done
exit $status
