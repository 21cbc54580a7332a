#!/usr/bin/env bash
# The multi-process plumbing of remora-calibrate and remora-gpu (gpudist/dist.h) under mpirun
# -np 2 on the CPU, through tests/dist_fake.c's fake device (TAP): rank/device mapping, the id
# broadcast, one rank's failure ending both ranks with the same message, a communicator set-up
# and a wait that time out.
# Every run is bounded by `timeout 60`: a hang fails the check (exit 124) instead of the suite.
# With the CUDA parts built, remora-calibrate and remora-gpu under -np 2 too, on a machine without
# a GPU (skipped where one is visible): both ranks leave with rank 0's "no GPU", no hang, and
# remora-calibrate takes --init-timeout (its communicator set-up itself needs a GPU; the
# fake's set-up runs the same rm_dist_wait sequence).
# Usage: dist_mpi.sh DIST_FAKE MPIRUN [REMORA_CALIBRATE REMORA_GPU PROGRAM.json]
set -uo pipefail
fake=$1
mpirun=("$2" --allow-run-as-root --oversubscribe)
calibrate=${3:-} gpu=${4:-} program=${5:-}
work=$(mktemp -d /tmp/remora-dist-mpi-XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; for f in out err; do sed "s/^/# $f: /" "$f"; done; failed=1; }
check() { if eval "$2"; then ok "$1"; else notok "$1"; fi; }
run() { # run ENV... : mpirun -np 2 of dist_fake, stdout to out, stderr to err, status in rc
	env "$@" timeout 60 "${mpirun[@]}" -np 2 "$fake" > out 2> err
	rc=$?
}
errors() { grep -c "^dist_fake: error: $1" err || true; }
echo "1..23"

run REMORA_FAKE_DEVICES=2
check "-np 2: both ranks finish" '[ $rc -eq 0 ] && [ "$(grep -c "step 2 done" out)" = 2 ]'
check "rank and local rank from the launcher, device = local rank % 2" \
	'grep -q "^rank 0/2 local 0 device 0 source ompi" out && grep -q "^rank 1/2 local 1 device 1 source ompi" out'
check "both ranks hold rank 0's id" \
	'[ "$(grep " id " out | sed "s/^rank [01] //" | sort -u | wc -l)" = 1 ] && grep -q "id fake-id-" out'
run REMORA_FAKE_DEVICES=1
check "one device per node: both ranks on device 0" '[ "$(grep -c "device 0 source" out)" = 2 ]'

run REMORA_FAKE_FAIL_SETUP=1
check "rank 1 fails its set-up: both exit non-zero, no hang" '[ $rc -ne 0 ] && [ $rc -ne 124 ]'
check "both ranks report rank 1's message" '[ "$(errors "rank 1: plan check: needs 20.91 GiB")" = 2 ]'
check "nobody reached the id" '! grep -q " id " out'

run REMORA_FAKE_FAIL_ID=1
check "rank 0 cannot make the id: both exit non-zero, no hang" '[ $rc -ne 0 ] && [ $rc -ne 124 ]'
check "both ranks report rank 0's ncclGetUniqueId" '[ "$(errors "rank 0: ncclGetUniqueId")" = 2 ]'

t0=$(date +%s)
run REMORA_FAKE_HANG=1 REMORA_NCCL_TIMEOUT_S=1
t1=$(date +%s)
check "rank 1 hangs: the wait times out, both exit non-zero within 30 s" \
	'[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $((t1 - t0)) -lt 30 ]'
check "both ranks report rank 1's timeout" '[ "$(errors "rank 1: step 0: no progress in 1.* s (timeout")" = 2 ]'
check "the hung rank aborted its communicator, the other did not" \
	'grep -q "^rank 1 aborted" out && ! grep -q "^rank 0 aborted" out'

t0=$(date +%s)
run REMORA_FAKE_INIT_HANG=1 REMORA_NCCL_INIT_TIMEOUT_S=1
t1=$(date +%s)
check "rank 1's communicator set-up never completes: both exit non-zero within 30 s" \
	'[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $((t1 - t0)) -lt 30 ]'
check "both ranks report rank 1's set-up timeout, naming its variable" \
	'[ "$(errors "rank 1: communicator init: no progress in 1.* s (timeout; REMORA_NCCL_INIT_TIMEOUT_S or --init-timeout)")" = 2 ]'
check "the late rank aborted its communicator, the other did not; neither went on" \
	'grep -q "^rank 1 aborted" out && ! grep -q "^rank 0 aborted" out && ! grep -q "communicator ready" out'
run REMORA_FAKE_INIT_HANG=all REMORA_NCCL_TIMEOUT_S=1
check "every set-up hangs, no init timeout set: the wait timeout bounds it, both report rank 0's" \
	'[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$(errors "rank 0: communicator init: no progress in 1.* s")" = 2 ]'
check "every rank aborted its communicator" '[ "$(grep -c " aborted" out)" = 2 ]'

run REMORA_FAKE_ASYNC=0
check "an asynchronous NCCL error on rank 0 ends both ranks with its message" \
	'[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$(errors "rank 0: step 0: ncclCommGetAsyncError")" = 2 ]'

env -u OMPI_COMM_WORLD_SIZE "$fake" > out 2> err
rc=$?
check "without a launcher: one rank, no MPI" '[ $rc -eq 0 ] && grep -q "^rank 0/1 local 0 device 0 source none" out'
if [ -z "$calibrate" ] || nvidia-smi -L > /dev/null 2>&1; then
	n=$((n + 4)); echo "ok $((n - 3)) # SKIP no CUDA build, or a GPU is visible"
	echo "ok $((n - 2)) # SKIP"; echo "ok $((n - 1)) # SKIP"; echo "ok $n # SKIP"
else
	timeout 60 "${mpirun[@]}" -np 2 "$calibrate" --quick > out 2> err
	rc=$?
	check "remora-calibrate -np 2 without a GPU: every rank skips (77), no hang" \
		'[ $rc -eq 77 ] && grep -q "rank 0: no CUDA GPU here" err'
	REMORA_NCCL_INIT_TIMEOUT_S=1 timeout 60 "${mpirun[@]}" -np 2 "$calibrate" --quick --init-timeout 1 > out 2> err
	rc=$?
	check "remora-calibrate -np 2 --init-timeout 1 (and its variable) without a GPU: skips (77), no hang" \
		'[ $rc -eq 77 ] && grep -q "rank 0: no CUDA GPU here" err'
	"$calibrate" --init-timeout 0 > out 2> err
	rc=$?
	check "remora-calibrate --init-timeout 0: refused as usage (2)" \
		'[ $rc -eq 2 ] && grep -q -- "--init-timeout 0: a positive number of seconds" err'
	timeout 60 "${mpirun[@]}" -np 2 "$gpu" exec "$program" > out 2> err
	rc=$?
	check "remora-gpu exec -np 2 without a GPU: both ranks report rank 0's error, no hang" \
		'[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$(grep -c "error: rank 0: no CUDA GPU is visible" err)" = 2 ]'
fi
exit $failed
