/*
 * gpudist: the multi-process plumbing shared by remora-calibrate and remora-gpu (the executor's
 * CUDA runner), in plain C so that it is tested on the CPU with mpirun and a fake device
 * (tests/test_dist_fake.c, tests/dist_mpi.sh). docs/exec.md "Several processes".
 *
 * - Rank detection in one place (rm_dist_env_detect): Open MPI (OMPI_COMM_WORLD_*), PMIx
 *   (PMIX_RANK), PMI/Hydra (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID), Slurm (SLURM_PROCID,
 *   SLURM_LOCALID, SLURM_NTASKS). The device of a process is its local rank modulo the devices it
 *   sees (rm_dist_device).
 * - Agreement (rm_dist_agree): every rank contributes its status; when one failed, every rank
 *   learns which and its message, so all leave together with the same error instead of the healthy
 *   ones waiting in a collective that never comes.
 * - A root's status and a blob (the NCCL unique id) broadcast as one message
 *   (rm_dist_bcast_status): a root that could not make the id tells the others instead of
 *   broadcasting garbage or never broadcasting at all.
 * - A poll loop with a timeout for device work that may wait on peers (rm_dist_wait): the caller's
 *   query (cudaEventQuery / cudaStreamQuery) and async-error check (ncclCommGetAsyncError) are
 *   polled until done, error or timeout; on error or timeout the caller's abort
 *   (ncclCommAbort) runs and the message says which.
 *
 * Without MPI (REMORA_DIST_MPI=0) the same calls run with one rank: agreement is the local status.
 * Errors are returned as -1 with a message in the caller's buffer; no globals.
 */
#ifndef REMORA_GPUDIST_DIST_H
#define REMORA_GPUDIST_DIST_H

#include <stdbool.h>
#include <stddef.h>

#include "gpudist/env.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of a message carried by rm_dist_agree and rm_dist_bcast_status (longer ones are cut). */
#define RM_DIST_MSG 512

/*
 * Default timeout of one wait on device work that involves peers, seconds. The longest single
 * wait the executables enqueue is one executor iteration or one calibration loop (20 all-reduces
 * of 4 GiB on 8 H100s take about 20 x 45 ms); 120 s leaves room for NCCL's lazy connection setup
 * on the first call and still ends a hung run well inside a lent machine's minutes (PyTorch's
 * NCCL watchdog waits 10 minutes by default, sized for jobs of thousands of GPUs).
 * REMORA_NCCL_TIMEOUT_S overrides it, and a flag (--timeout) overrides that.
 */
#define RM_DIST_TIMEOUT_S 120.0

/* The job as this process sees it after rm_dist_init. */
typedef struct rm_dist {
	bool mpi;        /* MPI in use (world > 1 under a launcher, built with MPI) */
	bool owns_mpi;   /* MPI_Init ran here, so rm_dist_finish finalises */
	int rank, world; /* from MPI when mpi, else from the environment (1 process: 0, 1) */
	int local_rank;  /* among this node's processes (MPI_COMM_TYPE_SHARED when mpi) */
	const char *source; /* rm_dist_env.source */
} rm_dist;

/*
 * Detects the launch (rm_dist_env_detect) and, when it says more than one process and MPI was
 * built in, initialises MPI (MPI_Init); rank and world then come from MPI_COMM_WORLD and the
 * local rank from a split by shared memory (the node), which agrees with every launcher above.
 * Returns 0, or -1 with msg when the environment says several processes but this build has no
 * MPI (running N copies of the whole job would be wrong), or when MPI reports a world size
 * different from the launcher's.
 */
int rm_dist_init(rm_dist *d, char *msg, size_t msg_size);

/* MPI_Finalize when rm_dist_init initialised MPI; accepts NULL. */
void rm_dist_finish(rm_dist *d);

/* The device of this process: local_rank % n_devices (n_devices >= 1). */
int rm_dist_device(const rm_dist *d, int n_devices);

/*
 * Agreement on a step (MPI_Allreduce of an int with MPI_MIN over every rank, then an MPI_Bcast of
 * the failing rank's code and message). ok: this rank's status; *code (may be NULL): its error
 * code when !ok (an exit status, an rm_status), and on return the failing rank's; msg: its error
 * when !ok, and on return, on every rank, "rank R: MESSAGE" of the lowest failing rank (MESSAGE
 * alone with one rank). Returns 0 when every rank was ok, -1 otherwise: the same on every rank.
 * A collective: every rank must call it, in the same order.
 */
int rm_dist_agree(const rm_dist *d, bool ok, int *code, char *msg, size_t msg_size);

/* MPI_Barrier over every rank; nothing with one rank. */
void rm_dist_barrier(const rm_dist *d);

/*
 * Broadcasts root 0's status, its message and blob[0, n) as one MPI_Bcast. On rank 0, ok and
 * msg are its status and error; on the others they are filled from rank 0. Returns 0 when rank 0
 * was ok (blob now holds rank 0's bytes everywhere), -1 with msg "rank 0: MESSAGE" otherwise.
 * A collective. n at most 4096.
 */
int rm_dist_bcast_status(const rm_dist *d, bool ok, void *blob, size_t n, char *msg, size_t msg_size);

/* Distinct host names among the ranks (MPI_Allgather of gethostname), 1 without MPI. */
int rm_dist_count_nodes(const rm_dist *d);

/*
 * The timeout of one wait, seconds: flag_s when > 0, else REMORA_NCCL_TIMEOUT_S when it is a
 * positive number, else RM_DIST_TIMEOUT_S.
 */
double rm_dist_timeout_s(double flag_s);

/*
 * The timeout of the communicator's non-blocking set-up (ncclCommInitRankConfig with
 * blocking = 0, polled until ready), seconds: flag_s when > 0, else REMORA_NCCL_INIT_TIMEOUT_S
 * when it is a positive number, else rm_dist_timeout_s(0) (REMORA_NCCL_TIMEOUT_S, else
 * RM_DIST_TIMEOUT_S: one node's set-up takes seconds; across many nodes raise it).
 */
double rm_dist_init_timeout_s(double flag_s);

/*
 * The NCCL settings a collective's time depends on, as the keys of a calibration row (read
 * through get, getenv when NULL; NCCL's environment variables, docs.nvidia.com/deeplearning/nccl
 * "Environment Variables"):
 * - algo: NCCL_ALGO lower-cased ("ring", "tree,ring", "^nvls"), or "default" when unset;
 * - proto: NCCL_PROTO the same way ("simple", "ll,ll128");
 * - tuning: the other variables that change the kernels or their resources, "name=value" lower-
 *   cased without the NCCL_ prefix, comma-separated, in this fixed order: NCCL_MIN_NCHANNELS,
 *   NCCL_MAX_NCHANNELS, NCCL_MIN_CTAS, NCCL_MAX_CTAS, NCCL_NTHREADS, NCCL_NVLS_ENABLE,
 *   NCCL_NVLSTREE_MAX_CHUNKSIZE, NCCL_CTA_POLICY, NCCL_BUFFSIZE, NCCL_P2P_LEVEL,
 *   NCCL_SHM_DISABLE, NCCL_P2P_DISABLE; "default" when none is set.
 * Each is cut to its buffer (at least 16 bytes each). Pure.
 */
void rm_dist_nccl_env(rm_dist_getenv_fn get, char *algo, size_t algo_size, char *proto, size_t proto_size,
		      char *tuning, size_t tuning_size);

/* The largest v over every rank (MPI_Allreduce MAX); v itself with one rank. */
double rm_dist_max(const rm_dist *d, double v);

/* The device side of a wait, implemented by the caller (CUDA + NCCL, or a fake). */
typedef struct rm_dist_waiter {
	/* 1 done, 0 still running, -1 failed (msg filled). */
	int (*query)(void *arg, char *msg, size_t msg_size);
	/* 0 healthy, -1 a communicator reports an asynchronous error (msg filled); may be NULL. */
	int (*async_error)(void *arg, char *msg, size_t msg_size);
	/* Aborts the communicators so that nothing waits on them (ncclCommAbort); may be NULL. */
	void (*abort)(void *arg);
	void *arg;
	/* what sets the timeout, named in its message; NULL: "REMORA_NCCL_TIMEOUT_S or --timeout" */
	const char *timeout_hint;
} rm_dist_waiter;

/*
 * Polls w->query and w->async_error (sleeping 20 us, growing to 1 ms, between polls) until the
 * work is done, fails, or timeout_s passes. On failure or timeout calls w->abort and returns -1
 * with msg "WHAT: MESSAGE" or "WHAT: no progress in T s (timeout; HINT); communicators aborted"
 * (HINT: w->timeout_hint, else "REMORA_NCCL_TIMEOUT_S or --timeout"). Returns 0 when done.
 */
int rm_dist_wait(const rm_dist_waiter *w, double timeout_s, const char *what, char *msg, size_t msg_size);

#ifdef __cplusplus
}
#endif

#endif /* REMORA_GPUDIST_DIST_H */
