#!/usr/bin/env bash
# A sweep split into --shard K/N runs and joined by remora merge gives the rows and the output
# of one process (TAP). Usage: sweep_shard.sh REMORA
set -uo pipefail
remora=$1
data=${REMORA_DATA_DIR:?}
work=$(mktemp -d /tmp/remora-sweep-shard-XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
sc=$data/scenarios/seed-llama2-7b-fsdp8-h100.yaml
set_args=(--set 'search.names=[dot_attention_query,dot_attention_key,dot_mlp_out]'
          --set 'search.micro_batches=[1,2]'
          --set 'search.flag_variants=["","--xla_gpu_enable_while_loop_double_buffering=false"]')
n=0 failed=0
check() { # check DESCRIPTION COMMAND...
	n=$((n + 1))
	if "${@:2}" > "check$n.log" 2>&1; then echo "ok $n - $1"; else echo "not ok $n - $1"; sed 's/^/# /' "check$n.log"; failed=1; fi
}
echo "1..11"
# one process, then again (the second run finds every row: what a merged database prints)
"$remora" search "$sc" "${set_args[@]}" --db one.db > one-fresh.txt
"$remora" search "$sc" "${set_args[@]}" --db one.db > one.txt
"$remora" search "$sc" "${set_args[@]}" --db one.db --rows > one.rows
check "one process stores 133 rows" test "$(wc -l < one.rows)" -eq 133
for k in 1 2 3; do
	"$remora" search "$sc" "${set_args[@]}" --shard $k/3 --db s$k.db --jobs $k > s$k.txt || echo "# shard $k failed"
done
check "each shard says its share" grep -q 'shard 2/3: 44 of 133 candidates, 44 simulated now' s2.txt
check "merge adds every row once" sh -c "'$remora' merge m.db s1.db s2.db s3.db | grep -q '133 rows read from 3 databases, 133 added, 0 already there'"
check "merging again adds nothing" sh -c "'$remora' merge m.db s1.db s2.db s3.db | grep -q '133 rows read from 3 databases, 0 added, 133 already there'"
"$remora" search "$sc" "${set_args[@]}" --db m.db > merged.txt
"$remora" search "$sc" "${set_args[@]}" --db m.db --rows > merged.rows
check "the merged rows are one process's rows, bit for bit" cmp merged.rows one.rows
check "search on the merged database prints one process's output" cmp merged.txt one.txt
check "merge refuses OUT among its inputs (exit 2)" sh -c "'$remora' merge m.db s1.db m.db; test \$? -eq 2"
check "--shard without --db is a usage error (exit 2)" sh -c "'$remora' search '$sc' --shard 1/2; test \$? -eq 2"
check "--shard 0/3 is a usage error (exit 2)" sh -c "'$remora' search '$sc' --shard 0/3 --db x.db; test \$? -eq 2 && test ! -e x.db"
# plan: each shard sweeps its part of every search; the merged database gives the plan
plan=(plan llama-3-8b --tokens 1T --gpus 8 --tp 1,2 --pp 1,2)
"$remora" "${plan[@]}" > plan-one.txt
for k in 1 2; do "$remora" "${plan[@]}" --shard $k/2 --db p$k.db > p$k.txt || echo "# plan shard $k failed"; done
check "plan shards merge into every row once" sh -c "'$remora' merge pm.db p1.db p2.db | grep -q ' 0 already there'"
"$remora" "${plan[@]}" --db pm.db > plan-merged.txt
check "plan on the merged database prints one process's plan" cmp plan-merged.txt plan-one.txt
exit $failed
