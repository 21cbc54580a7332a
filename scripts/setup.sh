#!/usr/bin/env bash
# Installs the Debian packages remora needs (only those missing), then configures and builds.
# Usage: [CC=clang] scripts/setup.sh [BUILD_DIR] [extra meson args...]
# A new build directory is a release build (-Dbuildtype=release: -O3, no self-checks of the
# scheduler's programs, the fastest search) unless the arguments name a build type; scripts/test.sh
# names its own (debugoptimized). An existing directory keeps its configuration unless arguments
# change it. Idempotent: a second run installs nothing and rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(meson ninja-build pkg-config gcc g++ libgsl-dev libsqlite3-dev libcriterion-dev
      libfyaml-dev libjansson-dev libssl-dev zlib1g-dev jq gnuplot-nox
      openmpi-bin libopenmpi-dev)
# the clang sanitizer build and the libFuzzer harnesses (CC=clang scripts/setup.sh build-clang ...)
[ "${CC:-}" = clang ] && pkgs+=(clang libclang-rt-14-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

build=${1:-build}
shift || true
typed=false
for a in "$@"; do
  case "$a" in -Dbuildtype=* | --buildtype | --buildtype=*) typed=true ;; esac
done
if [ ! -f "$build/build.ninja" ]; then
  $typed || set -- -Dbuildtype=release "$@"
  echo "setup: configuring $build ($*)" >&2
  meson setup "$build" "$@" >/dev/null
elif [ $# -gt 0 ]; then
  meson configure "$build" "$@" >/dev/null
elif ! $typed; then
  type=$(meson introspect --buildoptions "$build" 2>/dev/null | jq -r '.[] | select(.name == "buildtype") | .value' 2>/dev/null || true)
  [ -n "$type" ] && [ "$type" != release ] &&
    echo "setup: $build is a $type build; scripts/setup.sh $build -Dbuildtype=release makes the faster one" >&2
fi
# progress every tenth of ninja's steps; the compiler's own words when it fails. A bash loop, not
# awk: mawk (Debian's awk) reads a pipe in blocks, so its lines came in bursts at the end.
progress() {
  local line n m p nx=0 t0=$SECONDS
  while IFS= read -r line; do
    [[ $line =~ ^\[([0-9]+)/([0-9]+)\] ]] || continue
    n=${BASH_REMATCH[1]} m=${BASH_REMATCH[2]}
    ((m > 0)) || continue
    p=$((100 * n / m))
    if ((p >= nx)); then
      printf 'setup: %3d%% (%d of %d steps, %d s)\n' "$p" "$n" "$m" $((SECONDS - t0)) >&2
      nx=$((p - p % 10 + 10))
    fi
  done
}
log=$(mktemp)
echo "setup: building $build on ${NINJA_JOBS:-2} jobs" >&2
if ! ninja -C "$build" -j "${NINJA_JOBS:-2}" 2>&1 | tee "$log" | progress; then
  grep -E -B2 -A6 'error|FAILED' "$log" | tail -60 >&2
  rm -f "$log"
  echo "setup: the build in $build failed (the errors above)" >&2
  exit 1
fi
rm -f "$log"
