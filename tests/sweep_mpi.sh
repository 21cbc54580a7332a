#!/usr/bin/env bash
# mpirun -np 2 and -np 4 of remora search give one process's rows and output, byte for byte; a
# rank killed with SIGKILL mid-sweep and a rerun lose nothing and duplicate nothing (TAP).
# Usage: sweep_mpi.sh REMORA MPIRUN
set -uo pipefail
remora=$1
mpirun=("$2" --allow-run-as-root --oversubscribe)
data=${REMORA_DATA_DIR:?}
work=$(mktemp -d /tmp/remora-sweep-mpi-XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
sc=$data/scenarios/seed-llama2-7b-fsdp8-h100.yaml
small=(--set 'search.names=[dot_attention_query,dot_attention_key,dot_mlp_out]'
       --set 'search.micro_batches=[1,2]'
       --set 'search.flag_variants=["","--xla_gpu_enable_while_loop_double_buffering=false"]')
# 6 names (64 subsets, 63 offloaded) + 7 policies, 3 micro-batches, 4 variants + ideal: 2011
large=(--set 'search.names=[dot_attention_query,dot_attention_key,dot_attention_value,dot_mlp_out,dot_mlp_gate,dot_mlp_up]'
       --set 'search.micro_batches=[1,2,4]')
n=0 failed=0
check() { # check DESCRIPTION COMMAND...
	n=$((n + 1))
	if "${@:2}" > "check$n.log" 2>&1; then echo "ok $n - $1"; else echo "not ok $n - $1"; sed 's/^/# /' "check$n.log"; failed=1; fi
}
echo "1..23"
"$remora" search "$sc" "${small[@]}" > one.txt
"$remora" search "$sc" "${small[@]}" --db one.db --rows > one.rows
"$remora" search "$sc" "${small[@]}" --json > one.json
for np in 2 4; do
	"${mpirun[@]}" -np $np "$remora" search "$sc" "${small[@]}" > np$np.txt 2> np$np.err
	check "-np $np without --db prints one process's output" cmp np$np.txt one.txt
	"${mpirun[@]}" -np $np "$remora" search "$sc" "${small[@]}" --db np$np.db --rows > np$np.rows 2>> np$np.err
	check "-np $np stores one process's rows, bit for bit" cmp np$np.rows one.rows
	check "-np $np leaves no rank files" sh -c "! ls np$np.db.rank* .remora-sweep-* 2>/dev/null | grep -q ."
done
"${mpirun[@]}" -np 2 "$remora" search "$sc" "${small[@]}" --json > np2.json
check "-np 2 --json is one process's" cmp np2.json one.json

# rows that fail their checksum: rank 0 counts them as one process would, the shards recompute them
damage() { # damage DB: two rows edited behind the store's back
	python3 -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('UPDATE candidates SET mfu = 0.5 WHERE idx IN (3, 7)'); c.commit()" "$1"
}
cp one.db d1.db && cp one.db d2.db && damage d1.db && damage d2.db
"$remora" search "$sc" "${small[@]}" --db d1.db 2> /dev/null | sed 1s/d1.db/DB/ > damaged-one.txt
"${mpirun[@]}" -np 2 "$remora" search "$sc" "${small[@]}" --db d2.db 2> /dev/null | sed 1s/d2.db/DB/ > damaged-np2.txt
check "damaged rows: -np 2 prints one process's output" cmp damaged-np2.txt damaged-one.txt
"${mpirun[@]}" -np 2 "$remora" search "$sc" "${small[@]}" --db d2.db --rows > damaged-np2.rows 2> /dev/null
check "damaged rows: recomputed to one process's rows" cmp damaged-np2.rows one.rows

# a rank killed with SIGKILL once it has committed rows; the rerun redoes only the rest
"$remora" search "$sc" "${large[@]}" --db big.db > big-fresh.txt
"$remora" search "$sc" "${large[@]}" --db big.db > big.txt
"$remora" search "$sc" "${large[@]}" --db big.db --rows > big.rows
"${mpirun[@]}" -np 2 "$remora" search "$sc" "${large[@]}" --db k.db > killed.txt 2> killed.err &
mpipid=$!
victim=
for _ in $(seq 1 600); do
	# rank 1's first commit lands in its write-ahead log
	if [ -s k.db.rank1-wal ] || [ -s k.db.rank1 ]; then
		for p in $(pgrep -P "$mpipid"); do
			if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1'; then victim=$p; fi
		done
		[ -n "$victim" ] && break
	fi
	sleep 0.02
done
[ -n "$victim" ] && kill -KILL "$victim"
wait "$mpipid"
killed_rc=$?
check "the killed job failed (a rank was killed mid-sweep)" test -n "$victim" -a "$killed_rc" -ne 0
check "the killed job printed nothing" test ! -s killed.txt
"${mpirun[@]}" -np 2 "$remora" search "$sc" "${large[@]}" --db k.db > resumed.txt 2> resumed.err
check "the rerun simulated only what no rank had committed" \
	grep -Eq '2011 candidates in the space, [0-9]+ simulated now \(the rest were already in the database\)' resumed.txt
check "after the rerun the output is one process's (from the second line)" cmp <(tail -n +2 resumed.txt) <(tail -n +2 big.txt)
"${mpirun[@]}" -np 2 "$remora" search "$sc" "${large[@]}" --db k.db --rows > resumed.rows 2>> resumed.err
check "after the rerun the rows are one process's: none lost or duplicated" cmp resumed.rows big.rows
# remora links no MPI: without remora-mpi.so beside it, ranks refuse rather than each run everything
cp "$remora" ./remora-alone
"${mpirun[@]}" -np 2 ./remora-alone search "$sc" "${small[@]}" > alone.txt 2> alone.err
alone_rc=$?
check "without remora-mpi.so, -np 2 refuses (exit 2) and prints nothing" \
	sh -c "test $alone_rc -eq 2 && test ! -s alone.txt && grep -q 'remora-mpi.so' alone.err"

# plan: every search of the plan split across the ranks
plan=(plan llama-3-8b --tokens 1T --gpus 8 --tp 1,2 --pp 1,2)
"$remora" "${plan[@]}" > plan-one.txt
"$remora" "${plan[@]}" --json > plan-one.json
"${mpirun[@]}" -np 2 "$remora" "${plan[@]}" > plan-np2.txt 2> plan-np2.err
check "plan under -np 2 prints one process's plan" cmp plan-np2.txt plan-one.txt
"${mpirun[@]}" -np 4 "$remora" "${plan[@]}" --json --db plan.db > plan-np4.json 2> plan-np4.err
check "plan under -np 4 with --db gives one process's --json" cmp plan-np4.json plan-one.json
# a folder a killed run without --db left: named once, kept (another sweep may be using it)
mkdir .remora-sweep-killed
"${mpirun[@]}" -np 2 "$remora" search "$sc" "${small[@]}" > stale.txt 2> stale.err
check "a stale .remora-sweep-* folder is named and kept" \
	sh -c "cmp stale.txt one.txt && test \$(grep -c '1 folder .remora-sweep-\* (.remora-sweep-killed)' stale.err) -eq 1 && test -d .remora-sweep-killed"
# a rank killed while it opened its file leaves one with nothing committed: an empty file, or an
# SQLite file whose first transaction never committed; the rerun drops them rather than refuse
: > plan.db.rank1
python3 -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('PRAGMA journal_mode=WAL'); c.execute('BEGIN'); c.execute('CREATE TABLE candidates (x)')" plan.db.rank3
"${mpirun[@]}" -np 2 "$remora" "${plan[@]}" --json --db plan.db > plan-empty.json 2> plan-empty.err
check "rank files that hold nothing are dropped, the plan is one process's" \
	sh -c "cmp plan-empty.json plan-one.json && ! ls plan.db.rank* 2>/dev/null | grep -q ."
# one mpirun sweep per --db: while another holds DB.lock, a second is refused and touches nothing
cp one.db locked.db
(exec 9> locked.db.lock && flock 9 && exec sleep 30) &
holder=$! # sleep itself, the lock's one holder: killing it frees the lock
for _ in $(seq 50); do flock -n locked.db.lock true 2> /dev/null || break; sleep 0.1; done
"${mpirun[@]}" -np 2 "$remora" search "$sc" "${small[@]}" --db locked.db > locked.txt 2> locked.err
locked_rc=$?
kill "$holder" 2> /dev/null
wait "$holder" 2> /dev/null
check "a second mpirun sweep on a --db in use is refused, the database untouched" \
	sh -c "test $locked_rc -ne 0 && test ! -s locked.txt && grep -q 'another mpirun sweep is using this database' locked.err && cmp locked.db one.db && ! ls locked.db.rank* 2>/dev/null | grep -q ."
"${mpirun[@]}" -np 2 "$remora" search "$sc" "${small[@]}" --db locked.db --rows > locked.rows 2> /dev/null
check "once it is free the sweep runs, gives one process's rows and removes its lock" \
	sh -c "cmp locked.rows one.rows && test ! -e locked.db.lock"
# Slurm: a batch script's own process (the allocation's SLURM_NTASKS, SLURM_PROCID=0, no srun step)
# is a plain run; an srun step whose processes are MPI worlds of one (no --mpi=pmix) is refused
env SLURM_NTASKS=4 SLURM_PROCID=0 SLURM_LOCALID=0 "$remora" search "$sc" "${small[@]}" > batch.txt 2> batch.err
check "a Slurm batch script's process is one plain run" cmp batch.txt one.txt
env SLURM_STEP_NUM_TASKS=2 SLURM_PROCID=0 SLURM_LOCALID=0 "$remora" search "$sc" "${small[@]}" --db step.db > step.txt 2> step.err
step_rc=$?
check "an srun step of 2 whose MPI world is 1 is refused before it sweeps" \
	sh -c "test $step_rc -eq 2 && test ! -s step.txt && grep -q 'srun started 2 processes but MPI_COMM_WORLD has 1' step.err && test ! -e step.db"
exit $failed
