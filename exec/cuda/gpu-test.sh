#!/bin/sh
# Suite gpu: runs a small program (every op kind, collectives in a group of 1) on this machine's
# GPU with --compare and --trace, eagerly and then with --graph (the same iteration captured as a
# CUDA graph and replayed: the output must say "graph step"). Exits 77 (meson SKIP) where no GPU
# is visible.
# usage: gpu-test.sh REMORA PROGRAM OUTDIR
remora=$1 program=$2 out=$3
mkdir -p "$out"
"$remora" exec "$program" --iterations 3 --warmup 1 --compare --trace "$out/exec-trace.json" \
	>"$out/exec.out" 2>"$out/exec.err"
rc=$?
cat "$out/exec.out" "$out/exec.err"
if [ $rc -ne 0 ] && grep -q "no CUDA GPU is visible" "$out/exec.err"; then
	exit 77
fi
[ $rc -ne 0 ] && exit $rc
"$remora" exec "$program" --iterations 3 --warmup 1 --compare --graph \
	>"$out/exec-graph.out" 2>"$out/exec-graph.err"
rc=$?
cat "$out/exec-graph.out" "$out/exec-graph.err"
[ $rc -ne 0 ] && exit $rc
grep -q "^graph step" "$out/exec-graph.out" && grep -q "step (graph)" "$out/exec-graph.out"
