/*
 * gpudist (gpudist/dist.h) in one process: rank detection from each launcher's variables, the
 * device mapping, the timeout's sources and the poll loop's outcomes with a fake device. The
 * same code under mpirun -np 2: tests/dist_mpi.sh.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpudist/dist.h"

/* A stand-in environment: NAME=VALUE pairs, NULL-terminated. */
static const char *const *fake_env;

static const char *fake_getenv(const char *name)
{
	size_t n = strlen(name);
	for (const char *const *e = fake_env; *e; e++)
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}

static rm_dist_env detect(const char *const *env)
{
	fake_env = env;
	return rm_dist_env_detect(fake_getenv);
}

Test(dist, no_launcher_is_one_process)
{
	static const char *const env[] = {"HOME=/root", NULL};
	rm_dist_env e = detect(env);
	cr_assert_eq(e.size, 1);
	cr_assert_eq(e.rank, 0);
	cr_assert_eq(e.local_rank, -1);
	cr_assert_str_eq(e.source, "none");
}

Test(dist, open_mpi)
{
	static const char *const env[] = {"OMPI_COMM_WORLD_SIZE=16", "OMPI_COMM_WORLD_RANK=11",
					  "OMPI_COMM_WORLD_LOCAL_RANK=3", "SLURM_PROCID=0", NULL};
	rm_dist_env e = detect(env);
	cr_assert_eq(e.size, 16);
	cr_assert_eq(e.rank, 11);
	cr_assert_eq(e.local_rank, 3);
	cr_assert_str_eq(e.source, "ompi"); /* before Slurm's */
}

Test(dist, pmix_takes_its_size_from_the_launcher)
{
	static const char *const env[] = {"PMIX_RANK=5", "SLURM_NTASKS=8", "SLURM_LOCALID=1", NULL};
	rm_dist_env e = detect(env);
	cr_assert_eq(e.size, 8);
	cr_assert_eq(e.rank, 5);
	cr_assert_eq(e.local_rank, 1);
	cr_assert_str_eq(e.source, "pmix");
}

Test(dist, pmi_hydra)
{
	static const char *const env[] = {"PMI_SIZE=4", "PMI_RANK=2", "MPI_LOCALRANKID=2", NULL};
	rm_dist_env e = detect(env);
	cr_assert_eq(e.size, 4);
	cr_assert_eq(e.rank, 2);
	cr_assert_eq(e.local_rank, 2);
	cr_assert_str_eq(e.source, "pmi");
}

Test(dist, slurm)
{
	static const char *const env[] = {"SLURM_NTASKS=32", "SLURM_STEP_NUM_TASKS=32", "SLURM_PROCID=17",
					  "SLURM_LOCALID=1", NULL};
	rm_dist_env e = detect(env);
	cr_assert_eq(e.size, 32);
	cr_assert_eq(e.rank, 17);
	cr_assert_eq(e.local_rank, 1);
	cr_assert_str_eq(e.source, "slurm");
}

Test(dist, bad_values_count_as_absent)
{
	/* a signed, a trailing byte, an empty value: Open MPI's rank is unusable, Slurm's is taken */
	static const char *const env[] = {"OMPI_COMM_WORLD_RANK=-1", "PMIX_RANK=3x", "PMI_RANK=",
					  "SLURM_PROCID=2", "SLURM_STEP_NUM_TASKS=1", NULL};
	rm_dist_env e = detect(env);
	cr_assert_str_eq(e.source, "slurm");
	cr_assert_eq(e.rank, 2);
	cr_assert_eq(e.size, 3, "a size below rank + 1 is raised to it");
	cr_assert_eq(e.local_rank, -1);
}

Test(dist, device_is_the_local_rank_modulo_devices)
{
	rm_dist d = {.world = 16, .rank = 11, .local_rank = 3};
	cr_assert_eq(rm_dist_device(&d, 8), 3);
	cr_assert_eq(rm_dist_device(&d, 2), 1);
	cr_assert_eq(rm_dist_device(&d, 1), 0);
	d.local_rank = -1; /* unknown: the rank */
	cr_assert_eq(rm_dist_device(&d, 8), 3);
}

Test(dist, timeout_sources)
{
	unsetenv("REMORA_NCCL_TIMEOUT_S");
	cr_assert_float_eq(rm_dist_timeout_s(0), RM_DIST_TIMEOUT_S, 1e-12);
	setenv("REMORA_NCCL_TIMEOUT_S", "2.5", 1);
	cr_assert_float_eq(rm_dist_timeout_s(0), 2.5, 1e-12);
	cr_assert_float_eq(rm_dist_timeout_s(7), 7.0, 1e-12, "the flag wins");
	setenv("REMORA_NCCL_TIMEOUT_S", "soon", 1);
	cr_assert_float_eq(rm_dist_timeout_s(0), RM_DIST_TIMEOUT_S, 1e-12, "not a number: the default");
	setenv("REMORA_NCCL_TIMEOUT_S", "-3", 1);
	cr_assert_float_eq(rm_dist_timeout_s(0), RM_DIST_TIMEOUT_S, 1e-12);
	unsetenv("REMORA_NCCL_TIMEOUT_S");
}

/* The communicator set-up's timeout: its flag, its own variable, else the wait's timeout. */
Test(dist, init_timeout_sources)
{
	unsetenv("REMORA_NCCL_TIMEOUT_S");
	unsetenv("REMORA_NCCL_INIT_TIMEOUT_S");
	cr_assert_float_eq(rm_dist_init_timeout_s(0), RM_DIST_TIMEOUT_S, 1e-12);
	setenv("REMORA_NCCL_TIMEOUT_S", "30", 1);
	cr_assert_float_eq(rm_dist_init_timeout_s(0), 30.0, 1e-12, "the wait's variable when its own is unset");
	setenv("REMORA_NCCL_INIT_TIMEOUT_S", "4.5", 1);
	cr_assert_float_eq(rm_dist_init_timeout_s(0), 4.5, 1e-12, "its own variable first");
	cr_assert_float_eq(rm_dist_init_timeout_s(9), 9.0, 1e-12, "the flag wins");
	cr_assert_float_eq(rm_dist_timeout_s(0), 30.0, 1e-12, "the wait's timeout does not read the init's");
	setenv("REMORA_NCCL_INIT_TIMEOUT_S", "0", 1);
	cr_assert_float_eq(rm_dist_init_timeout_s(0), 30.0, 1e-12, "0 is not a timeout");
	setenv("REMORA_NCCL_INIT_TIMEOUT_S", "1e99", 1);
	cr_assert_float_eq(rm_dist_init_timeout_s(0), 30.0, 1e-12, "out of range");
	unsetenv("REMORA_NCCL_TIMEOUT_S");
	unsetenv("REMORA_NCCL_INIT_TIMEOUT_S");
}

typedef struct work {
	int polls_left; /* < 0: never done */
	int fail_at;    /* query fails when polls_left reaches it (-1: never) */
	bool async_error;
	int aborts, polls;
} work;

static int q(void *arg, char *msg, size_t n)
{
	work *w = (work *)arg;
	w->polls++;
	if (w->fail_at >= 0 && w->polls_left == w->fail_at) {
		snprintf(msg, n, "cudaEventQuery: an illegal memory access was encountered");
		return -1;
	}
	if (w->polls_left < 0)
		return 0;
	return w->polls_left-- == 0;
}

static int a(void *arg, char *msg, size_t n)
{
	work *w = (work *)arg;
	if (!w->async_error)
		return 0;
	snprintf(msg, n, "ncclCommGetAsyncError: remote process exited");
	return -1;
}

static void ab(void *arg)
{
	((work *)arg)->aborts++;
}

Test(dist, wait_done_after_polls)
{
	work w = {4, -1, false, 0, 0};
	rm_dist_waiter wt = {q, a, ab, &w, NULL};
	char msg[256] = "";
	cr_assert_eq(rm_dist_wait(&wt, 10, "step", msg, sizeof(msg)), 0);
	cr_assert_eq(w.polls, 5);
	cr_assert_eq(w.aborts, 0);
}

Test(dist, wait_query_error_aborts)
{
	work w = {4, 2, false, 0, 0};
	rm_dist_waiter wt = {q, a, ab, &w, NULL};
	char msg[256] = "";
	cr_assert_eq(rm_dist_wait(&wt, 10, "step 3", msg, sizeof(msg)), -1);
	cr_assert_str_eq(msg, "step 3: cudaEventQuery: an illegal memory access was encountered");
	cr_assert_eq(w.aborts, 1);
}

Test(dist, wait_async_error_aborts)
{
	work w = {-1, -1, true, 0, 0};
	rm_dist_waiter wt = {q, a, ab, &w, NULL};
	char msg[256] = "";
	cr_assert_eq(rm_dist_wait(&wt, 10, "iteration", msg, sizeof(msg)), -1);
	cr_assert_str_eq(msg, "iteration: ncclCommGetAsyncError: remote process exited");
	cr_assert_eq(w.aborts, 1);
	cr_assert_eq(w.polls, 1, "checked on the first poll");
}

Test(dist, wait_times_out)
{
	work w = {-1, -1, false, 0, 0};
	rm_dist_waiter wt = {q, NULL, ab, &w, NULL};
	char msg[256] = "";
	cr_assert_eq(rm_dist_wait(&wt, 0.05, "nccl: collectives", msg, sizeof(msg)), -1);
	cr_assert(strstr(msg, "nccl: collectives: no progress in 0.05") == msg, "%s", msg);
	cr_assert(strstr(msg, "communicators aborted"), "%s", msg);
	cr_assert_eq(w.aborts, 1);
}

Test(dist, one_rank_agreement_is_the_local_status)
{
	rm_dist d = {.world = 1};
	char msg[64] = "out of memory";
	int code = 77;
	cr_assert_eq(rm_dist_agree(&d, true, &code, msg, sizeof(msg)), 0);
	cr_assert_eq(rm_dist_agree(&d, false, &code, msg, sizeof(msg)), -1);
	cr_assert_str_eq(msg, "out of memory", "no rank prefix with one rank");
	cr_assert_eq(code, 77);
	unsigned char blob[4] = {1, 2, 3, 4};
	cr_assert_eq(rm_dist_bcast_status(&d, true, blob, sizeof(blob), msg, sizeof(msg)), 0);
	cr_assert_eq(blob[3], 4);
}

Test(dist, nccl_env_keys)
{
	char algo[32], proto[32], tuning[256];
	static const char *const none[] = {"PATH=/bin", NULL};
	fake_env = none;
	rm_dist_nccl_env(fake_getenv, algo, sizeof(algo), proto, sizeof(proto), tuning, sizeof(tuning));
	cr_assert_str_eq(algo, "default");
	cr_assert_str_eq(proto, "default");
	cr_assert_str_eq(tuning, "default");
	/* set in another order than the fixed one: the key does not depend on it */
	static const char *const env[] = {"NCCL_CTA_POLICY=1", "NCCL_ALGO=Ring,Tree", "NCCL_PROTO=Simple",
					  "NCCL_NVLS_ENABLE=0", "NCCL_MAX_NCHANNELS=8", "NCCL_MIN_CTAS=", NULL};
	fake_env = env;
	rm_dist_nccl_env(fake_getenv, algo, sizeof(algo), proto, sizeof(proto), tuning, sizeof(tuning));
	cr_assert_str_eq(algo, "ring,tree");
	cr_assert_str_eq(proto, "simple");
	cr_assert_str_eq(tuning, "max_nchannels=8,nvls_enable=0,cta_policy=1", "empty values are unset");
}

/* An sbatch script: the allocation's SLURM_NTASKS and SLURM_PROCID=0, but no srun step, so one
 * process (srun(1): SLURM_STEP_NUM_TASKS is set for the tasks srun starts). Read as 4 ranks, the
 * script's single process would wait for three peers that never come. */
Test(dist, slurm_batch_script_is_one_process)
{
	static const char *const env[] = {"SLURM_NTASKS=4", "SLURM_PROCID=0", "SLURM_LOCALID=0",
					  "SLURM_JOB_ID=200505", NULL};
	rm_dist_env e = detect(env);
	cr_assert_eq(e.size, 1);
	cr_assert_eq(e.rank, 0);
	cr_assert_str_eq(e.source, "none");
}

/* An srun step of 8 tasks inside a 32-task allocation: the step's count, not the allocation's. */
Test(dist, slurm_step_size_is_the_steps)
{
	static const char *const env[] = {"SLURM_NTASKS=32", "SLURM_STEP_NUM_TASKS=8", "SLURM_PROCID=3",
					  "SLURM_LOCALID=3", NULL};
	rm_dist_env e = detect(env);
	cr_assert_eq(e.size, 8);
	cr_assert_eq(e.rank, 3);
	cr_assert_eq(e.local_rank, 3);
	cr_assert_str_eq(e.source, "slurm");
}
