/*
 * remora-calibrate: the microbenchmark harness (private to calibrate/cuda/).
 *
 * One harness, one descriptor per benchmark (after nccl-tests' struct testColl in
 * src/common.h and its TimeTest/BenchTime in src/common.cu): a benchmark lists its cases, sets
 * one up, runs one iteration on a stream, and tears it down; the harness warms up, times the
 * iterations with CUDA events and writes one JSON line per case in the format
 * `remora calib import` reads (remora/calib.h, rm_calib_import_jsonl):
 *   {"benchmark": B, "params": {...}, "value": microseconds, "unit": "us",
 *    "machine": ..., "gpu": ..., "driver": ..., "cuda": ..., "nccl": ..., "started_at": ...}
 * Benchmarks whose timing does not fit that loop (graphs, concurrent streams, collectives over
 * several GPUs) provide measure() and use the same helpers.
 *
 * Errors: every CUDA, cuBLAS and NCCL call goes through RMC_CUDA / RMC_CUBLAS / RMC_NCCL, which
 * record the expression, file:line and the library's error string in the context and make the
 * calling function return -1. No globals: everything lives in rmc_ctx.
 *
 * NCCL: the communicators are non-blocking (ncclConfig_t.blocking = 0, as the executor's,
 * exec/cuda/runner.cu): their set-up is polled under ctx->init_timeout_s and aborted past it, and
 * a call that returns ncclInProgress is settled by RMC_NCCL (rmc_nccl_settle) before the next.
 */
#ifndef REMORA_CALIBRATE_HARNESS_H
#define REMORA_CALIBRATE_HARNESS_H

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#if RMC_HAVE_NCCL
#include <nccl.h>
#endif

#include "gpudist/dist.h"

#define RMC_MAX_GPUS 16

typedef struct rmc_ctx {
	FILE *out;               /* JSON lines */
	/* the run's keys, the same on every line: machine, gpu, driver, cuda, nccl, started_at */
	char machine[256], gpu[256], driver[64], cuda[32], nccl[32], started_at[40];
	int n_gpus;              /* GPUs driven by this process (single-process mode) or 1 (MPI) */
	int devices[RMC_MAX_GPUS];
	int world;               /* ranks in the NCCL communicator: n_gpus, or the MPI size */
	int rank;                /* MPI rank (0 in single-process mode) */
	bool mpi;                /* one process per GPU under mpirun */
	rm_dist dist;            /* the job (gpudist/dist.h): agreement, id broadcast */
	int nodes;               /* distinct hosts among the ranks */
	double timeout_s;        /* of one wait on device work (rm_dist_timeout_s) */
	double init_timeout_s;   /* of the communicators' non-blocking set-up (rm_dist_init_timeout_s) */
	bool quick;              /* fewer cases and iterations (the gpu test suite) */
	bool no_graph;           /* NCCL sweep: time host-launched iterations (events) instead of a graph */
	int warmup, iters;       /* defaults; benchmarks may scale them by size */
	const char *only;        /* run only benchmarks whose name contains this */
	cudaStream_t stream[RMC_MAX_GPUS];
	cublasLtHandle_t lt;
	void *workspace;         /* cuBLASLt workspace on device 0 */
	size_t workspace_bytes;
	int sm_count;
	size_t l2_bytes;         /* device 0's L2 (cudaDeviceProp.l2CacheSize) */
#if RMC_HAVE_NCCL
	ncclComm_t comms[RMC_MAX_GPUS];
	bool have_comms;
	bool comms_aborted;      /* a wait failed or timed out: ncclCommAbort ran, no NCCL work after */
#endif
	char error[512];         /* the first failure: "file:line: expr: message" */
	int cases_written;
} rmc_ctx;

/* Records a failure "file:line: expr: msg" (the first one wins) and returns -1. */
int rmc_fail(rmc_ctx *ctx, const char *file, int line, const char *expr, const char *msg);

#define RMC_CUDA(ctx, expr)                                                                    \
	do {                                                                                   \
		cudaError_t rmc__e = (expr);                                                   \
		if (rmc__e != cudaSuccess)                                                     \
			return rmc_fail((ctx), __FILE__, __LINE__, #expr, cudaGetErrorString(rmc__e)); \
	} while (0)

#define RMC_CUBLAS(ctx, expr)                                                                  \
	do {                                                                                   \
		cublasStatus_t rmc__s = (expr);                                                \
		if (rmc__s != CUBLAS_STATUS_SUCCESS)                                           \
			return rmc_fail((ctx), __FILE__, __LINE__, #expr, cublasGetStatusString(rmc__s)); \
	} while (0)

#if RMC_HAVE_NCCL
/*
 * The result r of the NCCL call expr: 0 for ncclSuccess; for ncclInProgress (a non-blocking
 * communicator still issuing the call's kernels in the background) polls ncclCommGetAsyncError on
 * this process's communicators until every one is ready, for at most ctx->timeout_s, and on an
 * error or the timeout aborts them (rm_dist_wait); any other result fails with its string.
 */
int rmc_nccl_settle(rmc_ctx *ctx, ncclResult_t r, const char *file, int line, const char *expr);

#define RMC_NCCL(ctx, expr)                                                                    \
	do {                                                                                   \
		if (rmc_nccl_settle((ctx), (expr), __FILE__, __LINE__, #expr) != 0)            \
			return -1;                                                             \
	} while (0)
#endif

/*
 * Waits for an event / a stream by polling (cudaEventQuery / cudaStreamQuery) together with
 * ncclCommGetAsyncError on this process's communicators, for at most ctx->timeout_s; on an error
 * or the timeout aborts the communicators (ncclCommAbort) and fails with what and the reason
 * (gpudist/dist.h rm_dist_wait). Never a blocking synchronise on work that may wait for peers.
 */
int rmc_wait_event(rmc_ctx *ctx, cudaEvent_t ev, const char *what);
int rmc_wait_stream(rmc_ctx *ctx, cudaStream_t stream, const char *what);

/*
 * Under MPI, agreement on a step (rm_dist_agree): ok is this rank's status, ctx->error its
 * message; on failure every rank's ctx->error becomes "rank R: MESSAGE" of the failing rank.
 * Returns 0 when all were ok. Without MPI: ok ? 0 : -1.
 */
int rmc_agree(rmc_ctx *ctx, bool ok);

/* Propagates a -1 from a helper. */
#define RMC_TRY(expr)                                                                          \
	do {                                                                                   \
		if ((expr) != 0)                                                               \
			return -1;                                                             \
	} while (0)

/* A benchmark's parameters, written as the "params" object: up to 12 key/value pairs. */
typedef struct rmc_params {
	int n;
	const char *key[12];
	char kind[12]; /* 'i' integer, 'r' real, 'b' boolean, 's' string */
	long long i[12];
	double r[12];
	char s[12][160];
} rmc_params;

void rmc_param_int(rmc_params *p, const char *key, long long v);
void rmc_param_str(rmc_params *p, const char *key, const char *v);
void rmc_param_bool(rmc_params *p, const char *key, bool v);
void rmc_param_real(rmc_params *p, const char *key, double v);

/* One benchmark. A case is an index in [0, cases()). */
typedef struct rmc_bench {
	const char *name;                                      /* "gemm", "hbm", ... */
	int (*cases)(const rmc_ctx *ctx);                       /* how many cases */
	/* Sets up case i: allocates *state, fills the benchmark name and params of its row. */
	int (*init)(rmc_ctx *ctx, int i, void **state, const char **benchmark, rmc_params *params);
	/* One timed iteration on stream (device 0). NULL when measure is given. */
	int (*run)(rmc_ctx *ctx, void *state, cudaStream_t stream);
	/* Custom measurement: fills *us (NULL when the standard loop applies). */
	int (*measure)(rmc_ctx *ctx, void *state, int i, double *us);
	void (*fini)(rmc_ctx *ctx, void *state);               /* frees state */
	bool needs_nccl;
} rmc_bench;

/*
 * The standard loop (nccl-tests' BenchTime): warmup iterations, then iters iterations between
 * two CUDA events on the stream; *us = elapsed / iters.
 */
int rmc_time_loop(rmc_ctx *ctx, const rmc_bench *b, void *state, cudaStream_t stream, int warmup,
		  int iters, double *us);
/* Writes one JSON line (built and serialised by jansson). */
void rmc_write_row(rmc_ctx *ctx, const char *benchmark, const rmc_params *p, double us);

/* The benchmarks (one file each). */
extern const rmc_bench rmc_bench_gemm;
extern const rmc_bench rmc_bench_hbm;
extern const rmc_bench rmc_bench_launch;
extern const rmc_bench rmc_bench_host_copy;
extern const rmc_bench rmc_bench_interference;
#if RMC_HAVE_NCCL
extern const rmc_bench rmc_bench_nccl;
#endif

/*
 * GEMM helper shared by gemm and interference: a cuBLASLt matmul D[m,n] = op(A) op(B) in one of
 * three layouts (column-major, as cuBLASLt names them):
 *   RMC_TN  A stored k x m, transposed; B k x n       (the forward; the only one FP8 allows)
 *   RMC_NN  A stored m x k;             B k x n       (dgrad: dX = dY W)
 *   RMC_NT  A m x k;                    B stored n x k, transposed  (wgrad: dW = dY^T X)
 * With `rotate`, enough copies of A, B and D that one pass over them is at least twice the L2
 * (ctx->l2_bytes), at most 2 GiB: each call then reads operands that are not L2-resident (a cold
 * figure, as in a training step where the GEMM's inputs come from HBM).
 */
enum { RMC_TN, RMC_NN, RMC_NT };

typedef struct rmc_gemm {
	int64_t m, n, k;
	bool fp8, fast_accum;
	int layout;       /* RMC_TN, RMC_NN, RMC_NT */
	int n_rot, next;  /* operand sets, the one the next call uses */
	void *mem;        /* the sets, each A | B | D at 256-byte-aligned offsets */
	size_t set_bytes, off_b, off_d;
	void *a, *b, *d;  /* set 0 */
	cublasLtMatmulDesc_t op;
	cublasLtMatrixLayout_t la, lb, ld;
	cublasLtMatmulAlgo_t algo;
	float alpha, beta;
	bool unsupported; /* cuBLASLt has no algorithm for it: measure nothing */
} rmc_gemm;

/* TN, no fast accumulation, no rotation (the interference benchmark's GEMM). */
int rmc_gemm_init(rmc_ctx *ctx, rmc_gemm *g, int64_t m, int64_t n, int64_t k, bool fp8);
/* Any layout (FP8: TN only), FP8 fast accumulation (CUBLASLT_MATMUL_DESC_FAST_ACCUM), rotation. */
int rmc_gemm_init_ex(rmc_ctx *ctx, rmc_gemm *g, int64_t m, int64_t n, int64_t k, bool fp8, int layout,
		     bool fast_accum, bool rotate);
/* One call on the next operand set. */
int rmc_gemm_run(rmc_ctx *ctx, rmc_gemm *g, cudaStream_t stream);
void rmc_gemm_fini(rmc_gemm *g);

#endif /* REMORA_CALIBRATE_HARNESS_H */
