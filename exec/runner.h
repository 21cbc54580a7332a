/*
 * Private to exec/ and cli/cmd_exec.c: the CUDA runner (exec/cuda/runner.cu), built only where
 * nvcc, CUDA and NCCL are found (REMORA_EXEC_RUNNER=1). A plain C interface: no CUDA type here.
 */
#ifndef REMORA_EXEC_RUNNER_H
#define REMORA_EXEC_RUNNER_H

#include <stdbool.h>

#include "remora/exec.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rm_exec_run_opts {
	const rm_hw_profile *hw; /* for rm_exec_plan_check (capacity, FP8) */
	int iterations;          /* timed iterations (>= 1) */
	int warmup;              /* untimed iterations before them (>= 0) */
	double timeout_s;        /* of one iteration's wait, s; 0: REMORA_NCCL_TIMEOUT_S or 120 */
	double init_timeout_s;   /* of the communicator's set-up, s; 0: rm_dist_init_timeout_s's default */
	bool graph;              /* also capture one iteration as a CUDA graph and time its replays */
} rm_exec_run_opts;

/*
 * Runs plan's program on this process's GPU: one process per GPU under mpirun (the local rank
 * picks the device, gpudist/dist.h; NCCL's unique id is broadcast with rank 0's status), else a
 * single GPU (an NCCL communicator of 1). Before anything launches: no GPU (RM_UNSUPPORTED), then
 * rm_exec_plan_check with the free device memory and the world size; every rank's result is
 * agreed before the first collective call, and again after each iteration, so all ranks fail
 * together with the failing rank's message ("rank R: ..."). The communicator is created
 * non-blocking (ncclCommInitRankConfig, blocking = 0) and polled until ready; past
 * opt->init_timeout_s it is aborted and every rank fails with the late rank's message. Waits poll
 * the iteration's last event and ncclCommGetAsyncError; past opt->timeout_s the communicator is
 * aborted. Ops are enqueued in plan->launch_order. With opt->graph, after the eager iterations
 * (docs/exec.md "Graph mode"): one iteration captured as a CUDA graph and replayed back to back
 * (m->graph_step_s), and one captured with per-op timing events (m->graph_op_mean_s). Fills m
 * (rm_exec_measurement_init is called here) and *rank (0 without MPI): only rank 0 should
 * report. On failure (err names the CUDA/cuBLAS/NCCL call, file:line and the library's message)
 * every allocation is released.
 */
rm_status rm_exec_run(const rm_exec_plan *plan, const rm_exec_run_opts *opt, rm_exec_measurement *m, int *rank,
		      rm_error *err);

#ifdef __cplusplus
}
#endif

#endif /* REMORA_EXEC_RUNNER_H */
