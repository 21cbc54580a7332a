/*
 * Memory and launch benchmarks:
 * - hbm: BabelStream's copy (c = a) and triad (a = b + s*c) over doubles; params.bytes = bytes
 *   moved (2 or 3 arrays), rows "hbm_copy" / "hbm_triad" (docs/reference/hardware.md: H200 copy 4.01 TB/s);
 * - launch: N empty kernels back to back, without and with a CUDA graph; rows "launch",
 *   params {kernels, graph}, value = all N (the fit's slope is the time per kernel);
 * - host copies: pinned host memory, one direction at a time and both at once on two streams;
 *   rows "h2d", "d2h", "bidir", params.bytes per direction.
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* ---- HBM ------------------------------------------------------------------------------------ */

__global__ void rmc_copy(const double *__restrict__ a, double *__restrict__ c, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n)
		c[i] = a[i];
}

__global__ void rmc_triad(double *__restrict__ a, const double *__restrict__ b, const double *__restrict__ c,
			  double s, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n)
		a[i] = b[i] + s * c[i];
}

typedef struct hbm_state {
	double *a, *b, *c;
	size_t n;
	bool triad;
} hbm_state;

static const size_t hbm_array_mib[] = {64, 256, 1024};

static int hbm_cases(const rmc_ctx *ctx)
{
	return 2 * (ctx->quick ? 2 : 3);
}

static int hbm_init(rmc_ctx *ctx, int i, void **state, const char **benchmark, rmc_params *p)
{
	int sizes = hbm_cases(ctx) / 2;
	hbm_state *st = (hbm_state *)calloc(1, sizeof(hbm_state));
	*state = st;
	st->triad = i >= sizes;
	st->n = hbm_array_mib[i % sizes] * ((size_t)1 << 20) / sizeof(double);
	*benchmark = st->triad ? "hbm_triad" : "hbm_copy";
	rmc_param_int(p, "bytes", (long long)(st->n * sizeof(double) * (st->triad ? 3 : 2)));
	rmc_param_int(p, "array_bytes", (long long)(st->n * sizeof(double)));
	RMC_CUDA(ctx, cudaMalloc(&st->a, st->n * sizeof(double)));
	RMC_CUDA(ctx, cudaMalloc(&st->b, st->n * sizeof(double)));
	RMC_CUDA(ctx, cudaMalloc(&st->c, st->n * sizeof(double)));
	RMC_CUDA(ctx, cudaMemset(st->a, 0, st->n * sizeof(double)));
	RMC_CUDA(ctx, cudaMemset(st->b, 0, st->n * sizeof(double)));
	RMC_CUDA(ctx, cudaMemset(st->c, 0, st->n * sizeof(double)));
	return 0;
}

static int hbm_run(rmc_ctx *ctx, void *state, cudaStream_t stream)
{
	hbm_state *st = (hbm_state *)state;
	unsigned blocks = (unsigned)((st->n + 1023) / 1024);
	if (st->triad)
		rmc_triad<<<blocks, 1024, 0, stream>>>(st->a, st->b, st->c, 0.4, st->n);
	else
		rmc_copy<<<blocks, 1024, 0, stream>>>(st->a, st->c, st->n);
	RMC_CUDA(ctx, cudaGetLastError());
	return 0;
}

static void hbm_fini(rmc_ctx *ctx, void *state)
{
	(void)ctx;
	hbm_state *st = (hbm_state *)state;
	if (st) {
		cudaFree(st->a);
		cudaFree(st->b);
		cudaFree(st->c);
	}
	free(st);
}

const rmc_bench rmc_bench_hbm = {"hbm", hbm_cases, hbm_init, hbm_run, NULL, hbm_fini, false};

/* ---- launch overhead -------------------------------------------------------------------------- */

__global__ void rmc_empty(void)
{
}

typedef struct launch_state {
	int kernels;
	bool graph;
} launch_state;

static const int launch_counts[] = {256, 1024, 4096};

static int launch_cases(const rmc_ctx *ctx)
{
	(void)ctx;
	return 6;
}

static int launch_init(rmc_ctx *ctx, int i, void **state, const char **benchmark, rmc_params *p)
{
	(void)ctx;
	launch_state *st = (launch_state *)calloc(1, sizeof(launch_state));
	*state = st;
	st->kernels = launch_counts[i % 3];
	st->graph = i >= 3;
	*benchmark = "launch";
	rmc_param_int(p, "kernels", st->kernels);
	rmc_param_bool(p, "graph", st->graph);
	return 0;
}

static int launch_some(rmc_ctx *ctx, int n, cudaStream_t s)
{
	for (int k = 0; k < n; k++)
		rmc_empty<<<1, 32, 0, s>>>();
	RMC_CUDA(ctx, cudaGetLastError());
	return 0;
}

/* Median of several repetitions of: N launches between two events. */
static int launch_measure(rmc_ctx *ctx, void *state, int i, double *us)
{
	(void)i;
	launch_state *st = (launch_state *)state;
	cudaStream_t s = ctx->stream[0];
	cudaGraph_t graph = NULL;
	cudaGraphExec_t exec = NULL;
	if (st->graph) {
		RMC_CUDA(ctx, cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
		RMC_TRY(launch_some(ctx, st->kernels, s));
		RMC_CUDA(ctx, cudaStreamEndCapture(s, &graph));
		RMC_CUDA(ctx, cudaGraphInstantiate(&exec, graph, 0));
	}
	cudaEvent_t a, b;
	RMC_CUDA(ctx, cudaEventCreate(&a));
	RMC_CUDA(ctx, cudaEventCreate(&b));
	enum { REPS = 7 };
	double t[REPS];
	for (int r = -1; r < REPS; r++) { /* r = -1 warms up */
		RMC_CUDA(ctx, cudaEventRecord(a, s));
		if (st->graph)
			RMC_CUDA(ctx, cudaGraphLaunch(exec, s));
		else
			RMC_TRY(launch_some(ctx, st->kernels, s));
		RMC_CUDA(ctx, cudaEventRecord(b, s));
		RMC_CUDA(ctx, cudaEventSynchronize(b));
		float ms = 0;
		RMC_CUDA(ctx, cudaEventElapsedTime(&ms, a, b));
		if (r >= 0)
			t[r] = 1e3 * ms;
	}
	for (int x = 1; x < REPS; x++) /* insertion sort: the median */
		for (int y = x; y > 0 && t[y] < t[y - 1]; y--) {
			double tmp = t[y];
			t[y] = t[y - 1];
			t[y - 1] = tmp;
		}
	*us = t[REPS / 2];
	RMC_CUDA(ctx, cudaEventDestroy(a));
	RMC_CUDA(ctx, cudaEventDestroy(b));
	if (exec)
		RMC_CUDA(ctx, cudaGraphExecDestroy(exec));
	if (graph)
		RMC_CUDA(ctx, cudaGraphDestroy(graph));
	return 0;
}

static void plain_fini(rmc_ctx *ctx, void *state)
{
	(void)ctx;
	free(state);
}

const rmc_bench rmc_bench_launch = {"launch", launch_cases, launch_init, NULL, launch_measure, plain_fini, false};

/* ---- pinned host copies ----------------------------------------------------------------------- */

typedef struct copy_state {
	void *host_in, *host_out, *dev_in, *dev_out;
	size_t bytes;
	int dir; /* 0 h2d, 1 d2h, 2 both */
	cudaStream_t second;
} copy_state;

static const size_t copy_mib[] = {1, 16, 256, 1024};
static const char *const copy_names[] = {"h2d", "d2h", "bidir"};

static int copy_cases(const rmc_ctx *ctx)
{
	return 3 * (ctx->quick ? 2 : 4);
}

static int copy_init(rmc_ctx *ctx, int i, void **state, const char **benchmark, rmc_params *p)
{
	int sizes = copy_cases(ctx) / 3;
	copy_state *st = (copy_state *)calloc(1, sizeof(copy_state));
	*state = st;
	st->dir = i / sizes;
	st->bytes = copy_mib[i % sizes] << 20;
	*benchmark = copy_names[st->dir];
	rmc_param_int(p, "bytes", (long long)st->bytes);
	RMC_CUDA(ctx, cudaHostAlloc(&st->host_in, st->bytes, cudaHostAllocDefault));
	RMC_CUDA(ctx, cudaHostAlloc(&st->host_out, st->bytes, cudaHostAllocDefault));
	RMC_CUDA(ctx, cudaMalloc(&st->dev_in, st->bytes));
	RMC_CUDA(ctx, cudaMalloc(&st->dev_out, st->bytes));
	memset(st->host_in, 1, st->bytes);
	RMC_CUDA(ctx, cudaStreamCreateWithFlags(&st->second, cudaStreamNonBlocking));
	return 0;
}

static int copy_measure(rmc_ctx *ctx, void *state, int i, double *us)
{
	(void)i;
	copy_state *st = (copy_state *)state;
	cudaStream_t s = ctx->stream[0];
	cudaEvent_t a, b, joined;
	RMC_CUDA(ctx, cudaEventCreate(&a));
	RMC_CUDA(ctx, cudaEventCreate(&b));
	RMC_CUDA(ctx, cudaEventCreateWithFlags(&joined, cudaEventDisableTiming));
	int iters = st->bytes >= ((size_t)256 << 20) ? 5 : 20;
	for (int r = 0; r < 2; r++) { /* r = 0 warms up */
		RMC_CUDA(ctx, cudaEventRecord(a, s));
		if (st->dir == 2)
			RMC_CUDA(ctx, cudaStreamWaitEvent(st->second, a, 0));
		for (int k = 0; k < iters; k++) {
			if (st->dir != 1)
				RMC_CUDA(ctx, cudaMemcpyAsync(st->dev_in, st->host_in, st->bytes, cudaMemcpyHostToDevice, s));
			if (st->dir == 1)
				RMC_CUDA(ctx, cudaMemcpyAsync(st->host_out, st->dev_out, st->bytes, cudaMemcpyDeviceToHost, s));
			if (st->dir == 2)
				RMC_CUDA(ctx, cudaMemcpyAsync(st->host_out, st->dev_out, st->bytes, cudaMemcpyDeviceToHost,
							      st->second));
		}
		if (st->dir == 2) {
			RMC_CUDA(ctx, cudaEventRecord(joined, st->second));
			RMC_CUDA(ctx, cudaStreamWaitEvent(s, joined, 0));
		}
		RMC_CUDA(ctx, cudaEventRecord(b, s));
		RMC_CUDA(ctx, cudaEventSynchronize(b));
	}
	float ms = 0;
	RMC_CUDA(ctx, cudaEventElapsedTime(&ms, a, b));
	*us = 1e3 * ms / iters;
	RMC_CUDA(ctx, cudaEventDestroy(a));
	RMC_CUDA(ctx, cudaEventDestroy(b));
	RMC_CUDA(ctx, cudaEventDestroy(joined));
	return 0;
}

static void copy_fini(rmc_ctx *ctx, void *state)
{
	(void)ctx;
	copy_state *st = (copy_state *)state;
	if (st) {
		cudaFreeHost(st->host_in);
		cudaFreeHost(st->host_out);
		cudaFree(st->dev_in);
		cudaFree(st->dev_out);
		if (st->second)
			cudaStreamDestroy(st->second);
	}
	free(st);
}

const rmc_bench rmc_bench_host_copy = {"host_copy", copy_cases, copy_init, NULL, copy_measure, copy_fini, false};
