/*
 * Interference: a BF16 GEMM timed alone, next to a kernel that holds k SMs (k = 8, 16, 24, 32)
 * on a high-priority stream, and, with 2 or more GPUs, next to a running NCCL all-gather
 * (docs/reference/hardware.md "Compute/communication interference": NCCL's CTAs each hold an SM).
 * The SM holder launches k blocks that each ask for the whole opt-in shared memory, so exactly
 * one fits per SM and no GEMM block can share it; the blocks signal through mapped host memory
 * that they run, and spin until the host says stop (or 10 s pass).
 * Rows "interference", params {m, n, k, dtype, held_sms, concurrent: none|sms|nccl}.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

#if RMC_HAVE_NCCL
int rmc_nccl_background(rmc_ctx *ctx, size_t bytes, int n, cudaStream_t *streams, void ***bufs);
int rmc_nccl_time_all_gather(rmc_ctx *ctx, size_t bytes, cudaStream_t *streams, double *us);
#endif

/* flags[0]: stop (host -> GPU); flags[1 + b]: block b runs (GPU -> host; no host atomics needed) */
__global__ void rmc_hold_sms(volatile int *flags, long long max_cycles)
{
	extern __shared__ char smem[];
	if (threadIdx.x != 0)
		return;
	smem[0] = 1;
	flags[1 + blockIdx.x] = 1;
	__threadfence_system();
	volatile int *stop = flags;
	long long t0 = clock64();
	while (!*stop && clock64() - t0 < max_cycles)
		__nanosleep(2000);
}

static const int held_counts[] = {0, 8, 16, 24, 32};
enum { N_HELD = 5, N_FLAGS = 1 + 32 };

typedef struct shape3 {
	int64_t m, n, k;
} shape3;

/* 8192^3: many waves; 1536 x 2816 x 8192: about one wave of 128x256 tiles on 132 SMs */
static const shape3 shapes[] = {{8192, 8192, 8192}, {1536, 2816, 8192}};

typedef struct interf_state {
	rmc_gemm g;
	int held;    /* SMs held */
	bool nccl;   /* next to an all-gather instead */
	int *host_flags; /* N_FLAGS ints, mapped */
	int *dev_flags;
	cudaStream_t high[RMC_MAX_GPUS];
} interf_state;

static int per_shape(const rmc_ctx *ctx)
{
	int n = N_HELD;
#if RMC_HAVE_NCCL
	if (ctx->world >= 2 && ctx->have_comms)
		n++;
#else
	(void)ctx;
#endif
	return n;
}

static int interf_cases(const rmc_ctx *ctx)
{
	return (ctx->quick ? 1 : 2) * per_shape(ctx);
}

static int interf_init(rmc_ctx *ctx, int i, void **state, const char **benchmark, rmc_params *p)
{
	int per = per_shape(ctx);
	const shape3 *s = &shapes[i / per];
	int j = i % per;
	interf_state *st = (interf_state *)calloc(1, sizeof(interf_state));
	*state = st;
	st->nccl = j == N_HELD;
	st->held = st->nccl ? 0 : held_counts[j];
	*benchmark = "interference";
	rmc_param_int(p, "m", s->m);
	rmc_param_int(p, "n", s->n);
	rmc_param_int(p, "k", s->k);
	rmc_param_str(p, "dtype", "bf16");
	rmc_param_int(p, "held_sms", st->held);
	rmc_param_str(p, "concurrent", st->nccl ? "nccl" : st->held ? "sms" : "none");
	RMC_CUDA(ctx, cudaHostAlloc((void **)&st->host_flags, N_FLAGS * sizeof(int), cudaHostAllocMapped));
	memset(st->host_flags, 0, N_FLAGS * sizeof(int));
	RMC_CUDA(ctx, cudaHostGetDevicePointer((void **)&st->dev_flags, st->host_flags, 0));
	int local = ctx->mpi ? 1 : ctx->n_gpus;
	for (int d = 0; d < local; d++) {
		int lo = 0, hi = 0;
		RMC_CUDA(ctx, cudaSetDevice(ctx->devices[d]));
		RMC_CUDA(ctx, cudaDeviceGetStreamPriorityRange(&lo, &hi));
		RMC_CUDA(ctx, cudaStreamCreateWithPriority(&st->high[d], cudaStreamNonBlocking, hi));
	}
	RMC_CUDA(ctx, cudaSetDevice(ctx->devices[0]));
	return rmc_gemm_init(ctx, &st->g, s->m, s->n, s->k, false);
}

static int interf_run(rmc_ctx *ctx, void *state, cudaStream_t stream)
{
	return rmc_gemm_run(ctx, &((interf_state *)state)->g, stream);
}

static int gemm_iters(const rmc_gemm *g)
{
	double us = 2.0 * (double)g->m * (double)g->n * (double)g->k / 700e6;
	int n = (int)(100e3 / us);
	return n < 10 ? 10 : n > 500 ? 500 : n;
}

static int interf_measure(rmc_ctx *ctx, void *state, int i, double *us)
{
	(void)i;
	interf_state *st = (interf_state *)state;
	rmc_bench b = rmc_bench_interference;
	int iters = gemm_iters(&st->g);
	*us = 0;
	if (st->g.unsupported)
		return 0;
	if (st->held > 0) {
		int dev = ctx->devices[0], smem = 0;
		RMC_CUDA(ctx, cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
		RMC_CUDA(ctx, cudaFuncSetAttribute(rmc_hold_sms, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
		volatile int *flags = st->host_flags;
		rmc_hold_sms<<<st->held, 32, (size_t)smem, st->high[0]>>>(st->dev_flags, 20000000000LL);
		RMC_CUDA(ctx, cudaGetLastError());
		time_t t0 = time(NULL);
		for (;;) {
			int running = 0;
			for (int k = 0; k < st->held; k++)
				running += flags[1 + k];
			if (running == st->held)
				break;
			if (time(NULL) - t0 > 5) {
				flags[0] = 1;
				return rmc_fail(ctx, __FILE__, __LINE__, "rmc_hold_sms",
						"the SM-holding blocks did not all start within 5 s");
			}
		}
		int rc = rmc_time_loop(ctx, &b, state, ctx->stream[0], ctx->warmup, iters, us);
		flags[0] = 1;
		if (rmc_wait_stream(ctx, st->high[0], "interference: SM holder") != 0)
			rc = -1;
		return rc;
	}
#if RMC_HAVE_NCCL
	if (st->nccl) {
		/*
		 * Enough 256 MiB all-gathers to outlast the timed GEMMs: sized from one timed
		 * all-gather (0.7 ms on 8 H100s, several ms on 2), the slowest rank's, so that every
		 * rank enqueues the same count (the MPI call is made whatever happened here), with a
		 * factor 3 for GEMMs slower than 700 TFLOP/s or slowed by the collective; an event
		 * after the last one checks that they were still running when the GEMMs ended.
		 */
		const size_t ag_bytes = (size_t)256 << 20;
		double gemm_us = 2.0 * (double)st->g.m * (double)st->g.n * (double)st->g.k / 700e6;
		double ag_us = 0;
		int rc = rmc_nccl_time_all_gather(ctx, ag_bytes, st->high, &ag_us);
		double ag = rm_dist_max(&ctx->dist, rc == 0 ? ag_us : 0);
		int n = (int)(3.0 * (ctx->warmup + iters) * gemm_us / (ag > 1.0 ? ag : 500.0)) + 2;
		void **bufs = NULL;
		cudaEvent_t bg_end = NULL;
		if (rc == 0)
			rc = rmc_nccl_background(ctx, ag_bytes, n, st->high, &bufs);
		if (rc == 0 && (cudaEventCreateWithFlags(&bg_end, cudaEventDisableTiming) != cudaSuccess ||
				cudaEventRecord(bg_end, st->high[0]) != cudaSuccess))
			rc = rmc_fail(ctx, __FILE__, __LINE__, "cudaEventRecord(bg_end, st->high[0])", "failed");
		if (rc == 0)
			rc = rmc_time_loop(ctx, &b, state, ctx->stream[0], ctx->warmup, iters, us);
		if (rc == 0 && cudaEventQuery(bg_end) == cudaSuccess) {
			/* the collectives ended before the GEMMs: not an interference figure */
			if (ctx->rank == 0)
				fprintf(stderr, "remora-calibrate: interference %lldx%lldx%lld: the %d background "
						"all-gathers (%.0f us each) ended before the timed GEMMs; no row\n",
					(long long)st->g.m, (long long)st->g.n, (long long)st->g.k, n, ag);
			*us = 0;
		}
		if (bg_end)
			cudaEventDestroy(bg_end);
		/* the background all-gathers end (or fail, or time out) before their buffers go */
		int local = ctx->mpi ? 1 : ctx->n_gpus;
		for (int d = 0; d < local; d++) {
			if (cudaSetDevice(ctx->devices[d]) != cudaSuccess && rc == 0)
				rc = rmc_fail(ctx, __FILE__, __LINE__, "cudaSetDevice(ctx->devices[d])", "failed");
			if (rmc_wait_stream(ctx, st->high[d], "interference: background all-gathers") != 0)
				rc = -1;
			if (bufs) {
				cudaError_t e1 = cudaFree(bufs[2 * d]), e2 = cudaFree(bufs[2 * d + 1]);
				if ((e1 != cudaSuccess || e2 != cudaSuccess) && rc == 0)
					rc = rmc_fail(ctx, __FILE__, __LINE__, "cudaFree(background buffers)",
						      cudaGetErrorString(e1 != cudaSuccess ? e1 : e2));
			}
		}
		free(bufs);
		RMC_CUDA(ctx, cudaSetDevice(ctx->devices[0]));
		return rc;
	}
#endif
	return rmc_time_loop(ctx, &b, state, ctx->stream[0], ctx->warmup, iters, us);
}

static void interf_fini(rmc_ctx *ctx, void *state)
{
	interf_state *st = (interf_state *)state;
	if (st) {
		rmc_gemm_fini(&st->g);
		if (st->host_flags)
			cudaFreeHost(st->host_flags);
		for (int d = 0; d < RMC_MAX_GPUS; d++)
			if (st->high[d]) {
				cudaSetDevice(ctx->devices[d]);
				cudaStreamDestroy(st->high[d]);
			}
		cudaSetDevice(ctx->devices[0]);
	}
	free(st);
}

/* Every rank runs it under MPI, so that the background collectives have all their peers. */
const rmc_bench rmc_bench_interference = {
	"interference", interf_cases, interf_init, interf_run, interf_measure, interf_fini, true,
};
