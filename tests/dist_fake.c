/*
 * dist_fake: the multi-process plumbing of remora-calibrate and remora-gpu (gpudist/dist.h) with
 * a fake device instead of CUDA and NCCL, so that tests/dist_mpi.sh checks it under
 * `mpirun -np 2` on the CPU. It runs the executables' sequence: detect the job, map the device,
 * agree on the local set-up, broadcast the "NCCL id" with rank 0's status, agree on the
 * communicator, then steps that each end in a polled wait and an agreement.
 *
 * Failures are injected by the environment (R: a rank):
 *   REMORA_FAKE_DEVICES=N    devices per node (default 1)
 *   REMORA_FAKE_FAIL_SETUP=R rank R fails its local set-up (as a per-rank memory check would)
 *   REMORA_FAKE_FAIL_ID=1    rank 0 cannot make the id (as ncclGetUniqueId failing)
 *   REMORA_FAKE_INIT_HANG=R  rank R's communicator set-up never leaves "in progress" (a peer that
 *                            never joins the bootstrap); "all": every rank's. The set-up is polled
 *                            as the runner and the calibration harness poll
 *                            ncclCommInitRankConfig with blocking = 0, under
 *                            rm_dist_init_timeout_s, then aborted and agreed
 *   REMORA_FAKE_HANG=R       rank R's first step never completes (a dead peer): the wait times out
 *   REMORA_FAKE_ASYNC=R      rank R's communicator reports an asynchronous error in its first step
 *   REMORA_FAKE_STEPS=N      steps (default 3)
 * Output (stdout, one line each): "rank R/W local L device D source S", "rank R id HEX",
 * "rank R communicator ready", "rank R step K done", "rank R aborted"; on failure "dist_fake: error: MESSAGE" (stderr) and
 * exit 1 on every rank, else exit 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpudist/dist.h"

static int env_rank(const char *name)
{
	const char *s = getenv(name);
	return s && *s ? atoi(s) : -1;
}

typedef struct fake_work {
	int polls_left; /* done after this many polls; < 0: never */
	bool async_error;
	int rank;
} fake_work;

static int fake_query(void *arg, char *msg, size_t n)
{
	(void)msg, (void)n;
	fake_work *w = (fake_work *)arg;
	if (w->polls_left < 0)
		return 0;
	return w->polls_left-- == 0;
}

static int fake_async(void *arg, char *msg, size_t n)
{
	fake_work *w = (fake_work *)arg;
	if (!w->async_error)
		return 0;
	snprintf(msg, n, "ncclCommGetAsyncError: remote process exited or there was a network error (fake)");
	return -1;
}

static void fake_abort(void *arg)
{
	fake_work *w = (fake_work *)arg;
	printf("rank %d aborted\n", w->rank);
	fflush(stdout);
}

int main(void)
{
	rm_dist d;
	char msg[RM_DIST_MSG] = "";
	if (rm_dist_init(&d, msg, sizeof(msg)) != 0) {
		fprintf(stderr, "dist_fake: error: %s\n", msg);
		return 2;
	}
	int devices = env_rank("REMORA_FAKE_DEVICES");
	printf("rank %d/%d local %d device %d source %s\n", d.rank, d.world, d.local_rank,
	       rm_dist_device(&d, devices > 0 ? devices : 1), d.source);
	fflush(stdout);
	int status = 1;

	/* the local set-up, agreed before anything collective */
	bool ok = env_rank("REMORA_FAKE_FAIL_SETUP") != d.rank;
	if (!ok)
		snprintf(msg, sizeof(msg), "plan check: needs 20.91 GiB, 18.00 GiB free (fake)");
	if (rm_dist_agree(&d, ok, NULL, msg, sizeof(msg)) != 0)
		goto fail;

	/* the id: rank 0's status travels with it */
	unsigned char id[128];
	memset(id, 0, sizeof(id));
	ok = true;
	if (d.rank == 0) {
		if (env_rank("REMORA_FAKE_FAIL_ID") == 1) {
			snprintf(msg, sizeof(msg), "ncclGetUniqueId(&id): unhandled system error (fake)");
			ok = false;
		} else {
			snprintf((char *)id, sizeof(id), "fake-id-%ld", (long)getpid());
		}
	}
	if (rm_dist_bcast_status(&d, ok, id, sizeof(id), msg, sizeof(msg)) != 0)
		goto fail;
	printf("rank %d id %s\n", d.rank, (const char *)id);
	fflush(stdout);
	/* the communicator: a non-blocking set-up polled until ready, aborted past its timeout */
	{
		const char *hang = getenv("REMORA_FAKE_INIT_HANG");
		fake_work init = {2, false, d.rank};
		if (hang && (strcmp(hang, "all") == 0 || (*hang && atoi(hang) == d.rank)))
			init.polls_left = -1;
		rm_dist_waiter iw = {fake_query, NULL, fake_abort, &init, "REMORA_NCCL_INIT_TIMEOUT_S or --init-timeout"};
		ok = rm_dist_wait(&iw, rm_dist_init_timeout_s(0), "communicator init", msg, sizeof(msg)) == 0;
	}
	if (rm_dist_agree(&d, ok, NULL, msg, sizeof(msg)) != 0)
		goto fail;
	printf("rank %d communicator ready\n", d.rank);
	fflush(stdout);

	int steps = env_rank("REMORA_FAKE_STEPS");
	steps = steps > 0 ? steps : 3;
	for (int k = 0; k < steps; k++) {
		fake_work w = {3, false, d.rank};
		if (k == 0 && env_rank("REMORA_FAKE_HANG") == d.rank)
			w.polls_left = -1;
		if (k == 0 && env_rank("REMORA_FAKE_ASYNC") == d.rank)
			w.async_error = true;
		rm_dist_waiter waiter = {fake_query, fake_async, fake_abort, &w, NULL};
		char what[32];
		snprintf(what, sizeof(what), "step %d", k);
		ok = rm_dist_wait(&waiter, rm_dist_timeout_s(0), what, msg, sizeof(msg)) == 0;
		if (rm_dist_agree(&d, ok, NULL, msg, sizeof(msg)) != 0)
			goto fail;
		printf("rank %d step %d done\n", d.rank, k);
		fflush(stdout);
	}
	status = 0;
	goto out;
fail:
	fprintf(stderr, "dist_fake: error: %s\n", msg);
out:
	rm_dist_finish(&d);
	return status;
}
