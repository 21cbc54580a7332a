#!/usr/bin/env bash
# Builds remora-calibrate and runs the whole microbenchmark sweep on this machine's GPUs, then
# (when the remora CLI builds here too) imports and fits the results; before the sweep, the
# executor's comparison (`remora exec --compare`) on two small programs, eager and in graph mode.
#
# Usage: calibrate/run-on-gpu.sh OUT_DIR [BUILD_DIR]
# Writes into OUT_DIR: calibrate.jsonl (the measurements, `remora calib import` format),
# calibrate.log (the harness's progress and errors), nvidia-smi.txt, and when the CLI is
# available calib.db, fit.txt and show.json, and the executor's runs: for NAME in small (tests/
# data/exec/gpu_small.json: every op kind, collectives in a group of 1) and llama3-8b-2l (two
# layers of Llama-3 8B on one GPU, calibrate/exec/), eager and graph: exec-NAME-MODE.json (the
# measurement and comparison), exec-NAME-MODE.txt (the table, re-read with --replay),
# exec-NAME-MODE.err, exec-NAME-MODE-trace.json; exec-summary.txt (every run's step times).
# Sized for one H200 in at most 8 minutes: the whole script runs within RMC_BUDGET_S seconds
# (default 480) of its start: each executor run gets at most 75 s, the sweep what is left less
# 20 s (at most RMC_TIMEOUT seconds, default 420), each bounded by `timeout`.
# Exit status: the harness's (0 ok, 1 a benchmark failed, 77 no GPU).
set -uo pipefail
t_start=$(date +%s)
budget=${RMC_BUDGET_S:-480}
left() { echo $(( budget - ($(date +%s) - t_start) )); }

out=${1:?usage: calibrate/run-on-gpu.sh OUT_DIR [BUILD_DIR]}
cd "$(dirname "$0")/.."
root=$(pwd)
build=${2:-build-gpu}
cudatk=${CUDATK_ROOT:-/usr/local/cuda}
export PATH="$cudatk/bin:$PATH"
mkdir -p "$out"
out=$(cd "$out" && pwd)

nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || true

exe=""
cli=""
# 1. the project's own build, when meson and the core's libraries are here
if command -v meson >/dev/null 2>&1 && command -v ninja >/dev/null 2>&1; then
  if [ -f "$build/build.ninja" ] || meson setup "$build" -Dcuda=enabled -Dtests=disabled \
       -Dcudatk_root="$cudatk" >"$out/meson-setup.log" 2>&1; then
    if ninja -C "$build" >"$out/ninja.log" 2>&1; then
      [ -x "$build/calibrate/remora-calibrate" ] && exe="$build/calibrate/remora-calibrate"
      [ -x "$build/cli/remora" ] && cli="$build/cli/remora"
    fi
  fi
fi
# 2. otherwise nvcc alone: the harness needs nothing but CUDA, cuBLASLt and NCCL
if [ -z "$exe" ]; then
  echo "run-on-gpu: meson build unavailable (see $out/meson-setup.log); compiling the harness with nvcc" >&2
  mkdir -p "$build"
  nccl=1
  [ -f "$cudatk/include/nccl.h" ] || nccl=0
  srcs=(calibrate/cuda/harness.cu calibrate/cuda/bench_gemm.cu calibrate/cuda/bench_mem.cu
        calibrate/cuda/bench_interference.cu)
  # gpudist/dist.c and env.c (plain C, compiled by nvcc's host compiler) without MPI: one process
  srcs+=(gpudist/dist.c gpudist/env.c)
  libs=(-lcublasLt -lcublas -ljansson)
  if [ $nccl = 1 ]; then srcs+=(calibrate/cuda/bench_nccl.cu); libs+=(-lnccl); fi
  if ! nvcc -std=c++17 -O2 -lineinfo \
      -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
      -DRMC_HAVE_NCCL=$nccl -DRMC_HAVE_MPI=0 -DREMORA_DIST_MPI=0 -I"$cudatk/include" -I"$root" "${srcs[@]}" \
      -L"$cudatk/lib64" -L"$cudatk/lib" -Xlinker -rpath="$cudatk/lib64:$cudatk/lib" "${libs[@]}" \
      -o "$build/remora-calibrate" >"$out/nvcc.log" 2>&1; then
    echo "run-on-gpu: nvcc failed, see $out/nvcc.log" >&2
    exit 1
  fi
  exe="$build/remora-calibrate"
fi

# the executor: eager, then graph mode (one iteration captured as a CUDA graph and replayed), on
# the profile of the GPU that is here; each run bounded, skipped when the budget is spent
if [ -n "$cli" ] && [ -x "$build/cli/remora-gpu" ]; then
  hw=h100-sxm
  grep -q "H200" "$out/nvidia-smi.txt" 2>/dev/null && hw=h200-sxm
  : >"$out/exec-summary.txt"
  "$cli" schedule calibrate/exec/exec-llama3-8b-2l-1gpu.yaml --set hardware=$hw \
    -o "$out/exec-llama3-8b-2l.program.json" 2>"$out/exec-schedule.err"
  cp tests/data/exec/gpu_small.json "$out/exec-small.program.json"
  for name in small llama3-8b-2l; do
    [ -s "$out/exec-$name.program.json" ] || { echo "$name: no program (see exec-schedule.err)" >>"$out/exec-summary.txt"; continue; }
    for mode in eager graph; do
      t=$(( $(left) - 20 - 240 )) # keep 240 s for the sweep
      [ $t -gt 75 ] && t=75
      base="$out/exec-$name-$mode"
      if [ $t -lt 15 ]; then
        echo "$name $mode: skipped (budget spent)" >>"$out/exec-summary.txt"
        continue
      fi
      flags=(--hardware "$hw" --iterations 10 --warmup 3 --compare --json --trace "$base-trace.json" --timeout 30)
      [ $mode = graph ] && flags+=(--graph)
      echo "run-on-gpu: remora exec $name ($mode, at most $t s)" >&2
      timeout "$t" "$cli" exec "$out/exec-$name.program.json" "${flags[@]}" >"$base.json" 2>"$base.err"
      erc=$?
      if [ $erc -eq 0 ]; then
        "$cli" exec "$out/exec-$name.program.json" --hardware "$hw" --replay "$base.json" --compare >"$base.txt" 2>>"$base.err"
        { echo "== $name $mode"; grep -E "^(device|step time|graph step|  +[0-9.]+ ms with)|^  step" "$base.txt"; } >>"$out/exec-summary.txt"
      else
        echo "== $name $mode: exit $erc: $(tail -n 3 "$base.err" | tr '\n' ' ')" >>"$out/exec-summary.txt"
      fi
    done
  done
  cat "$out/exec-summary.txt" >&2
fi

sweep_t=$(( $(left) - 20 ))
[ $sweep_t -gt "${RMC_TIMEOUT:-420}" ] && sweep_t=${RMC_TIMEOUT:-420}
[ $sweep_t -lt 30 ] && sweep_t=30
echo "run-on-gpu: running $exe for at most $sweep_t s (results in $out)" >&2
start=$(date +%s)
timeout "$sweep_t" "$exe" --out "$out/calibrate.jsonl" 2>"$out/calibrate.log"
rc=$?
echo "run-on-gpu: harness exit status $rc after $(( $(date +%s) - start )) s ($(( $(date +%s) - t_start )) s in all)" >&2
if [ $rc -eq 124 ] && [ -s "$out/calibrate.jsonl" ] && [ -n "$(tail -c1 "$out/calibrate.jsonl")" ]; then
  # stopped by the timeout in the middle of a line: keep the complete rows only
  sed -i '$ d' "$out/calibrate.jsonl"
fi
cat "$out/calibrate.log" >&2

if [ -n "$cli" ] && [ -s "$out/calibrate.jsonl" ]; then
  rm -f "$out/calib.db"
  "$cli" calib import "$out/calibrate.jsonl" --db "$out/calib.db" >"$out/fit.txt" 2>&1
  "$cli" calib fit --db "$out/calib.db" --profile measured >>"$out/fit.txt" 2>&1
  "$cli" calib show --db "$out/calib.db" --profile measured --json >"$out/show.json" 2>>"$out/fit.txt"
  cat "$out/fit.txt" >&2
fi
exit $rc
