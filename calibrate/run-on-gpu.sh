#!/usr/bin/env bash
# Builds remora-calibrate and runs the whole microbenchmark sweep on this machine's GPUs, then
# (when the remora CLI builds here too) imports and fits the results.
#
# Usage: calibrate/run-on-gpu.sh OUT_DIR [BUILD_DIR]
# Writes into OUT_DIR: calibrate.jsonl (the measurements, `remora calib import` format),
# calibrate.log (the harness's progress and errors), nvidia-smi.txt, and when the CLI is
# available calib.db, fit.txt and show.json. Designed to finish in well under 8 minutes on one
# H200 (the sweep itself is bounded by `timeout`, RMC_TIMEOUT seconds, default 420).
# Exit status: the harness's (0 ok, 1 a benchmark failed, 77 no GPU).
set -uo pipefail

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
  # gpudist/dist.c (plain C, compiled by nvcc's host compiler) without MPI: one process
  srcs+=(gpudist/dist.c)
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

echo "run-on-gpu: running $exe (results in $out)" >&2
start=$(date +%s)
timeout "${RMC_TIMEOUT:-420}" "$exe" --out "$out/calibrate.jsonl" 2>"$out/calibrate.log"
rc=$?
echo "run-on-gpu: harness exit status $rc after $(( $(date +%s) - start )) s" >&2
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
