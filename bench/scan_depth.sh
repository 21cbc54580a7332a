#!/bin/sh
# Instructions per search candidate against the depth of a scanned step (docs/search.md
# "Performance", issue 17): Llama-3-8B with L layers at FSDP L/4 over L/32 nodes (the same
# memory per GPU), the seed scenario's search over 4 names and micro-batches 1 and 2 (381
# candidates), under valgrind --tool=callgrind, for the optimised search and, with --reference,
# the unoptimised one (REMORA_SEARCH_REFERENCE=1: every loop trip built).
#
#   bench/scan_depth.sh [--reference] [BUILD_DIR]   (default build; needs valgrind and python3)
set -eu
ref=0
if [ "${1:-}" = "--reference" ]; then
	ref=1
	shift
fi
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/$build/cli/remora"
[ -x "$bin" ] || { echo "scan_depth.sh: no $bin (build first: scripts/setup.sh)" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "scan_depth.sh: valgrind is not installed" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "layers  candidates  instructions  per candidate"
for L in 32 64 96 128 160; do
	python3 - "$root/data/models/llama-3-8b.json" "$tmp/llama-L$L.json" "$L" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
d["name"] = "llama-3-8b-%s-layers" % sys.argv[3]
d["num_hidden_layers"] = int(sys.argv[3])
json.dump(d, open(sys.argv[2], "w"))
EOF
	REMORA_SEARCH_REFERENCE=$ref valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$L" "$bin" search \
		"$root/data/scenarios/seed-llama2-7b-fsdp8-h100.yaml" --set "model=$tmp/llama-L$L.json" \
		--set "parallelism.fsdp=$((L / 4))" --set "cluster.nodes=$((L / 32))" \
		--set "search.names=[dot_attention_query, dot_attention_key, dot_mlp_gate, attention_context]" \
		--set "search.micro_batches=[1, 2]" --jobs 1 --json >"$tmp/out.json" 2>"$tmp/err"
	n=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['candidates_evaluated'])" "$tmp/out.json")
	ir=$(sed -n 's/.*I *refs: *//p' "$tmp/err" | tr -d ',')
	python3 -c "import sys; L,n,ir=sys.argv[1:]; print('%6s  %10s  %12s  %.2f M' % (L, n, ir, int(ir)/int(n)/1e6))" "$L" "$n" "$ir"
done
