/*
 * NCCL all-gather, reduce-scatter and all-reduce from 1 KiB to 4 GiB (x2 steps), out-of-place,
 * float sum, as nccl-tests runs them (src/all_gather.cu ...): bytes is the full buffer (the
 * all-gather output, the reduce-scatter input), the time the mean over iterations after warm-up,
 * measured on the host around stream synchronisation like nccl-tests' BenchTime.
 * Rows "all_gather" | "reduce_scatter" | "all_reduce", params {bytes, ranks, nodes, inplace,
 * algo (NCCL_ALGO or "default"), type}. With one GPU NCCL copies locally; the row is still written.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

enum { COLL_AG, COLL_RS, COLL_AR, N_COLL };
static const char *const coll_names[N_COLL] = {"all_gather", "reduce_scatter", "all_reduce"};

typedef struct nccl_state {
	int coll;
	size_t bytes;
	size_t count; /* floats per rank's share: bytes / 4 / world for AG and RS */
	int local;    /* buffers on this many local GPUs */
	void *send[RMC_MAX_GPUS], *recv[RMC_MAX_GPUS];
} nccl_state;

static int size_steps(const rmc_ctx *ctx)
{
	return ctx->quick ? 3 : 23; /* quick: 1 KiB, 1 MiB, 1 GiB (x1024); full: 1 KiB .. 4 GiB (x2) */
}

static size_t size_of(const rmc_ctx *ctx, int step)
{
	return ctx->quick ? (size_t)1024 << (10 * step) : (size_t)1024 << step;
}

static int nccl_cases(const rmc_ctx *ctx)
{
	return N_COLL * size_steps(ctx);
}

static int nccl_init(rmc_ctx *ctx, int i, void **state, const char **benchmark, rmc_params *p)
{
	int steps = size_steps(ctx);
	nccl_state *st = (nccl_state *)calloc(1, sizeof(nccl_state));
	*state = st;
	st->coll = i / steps;
	st->bytes = size_of(ctx, i % steps);
	st->local = ctx->mpi ? 1 : ctx->n_gpus;
	size_t share = st->bytes / (size_t)ctx->world; /* one rank's part of AG/RS */
	share -= share % 4;
	st->count = st->coll == COLL_AR ? st->bytes / 4 : share / 4;
	if (st->count == 0)
		st->count = 1;
	size_t full = st->coll == COLL_AR ? st->count * 4 : st->count * 4 * (size_t)ctx->world;
	size_t send = st->coll == COLL_AG ? st->count * 4 : full;
	size_t recv = st->coll == COLL_RS ? st->count * 4 : full;
	*benchmark = coll_names[st->coll];
	rmc_param_int(p, "bytes", (long long)full);
	rmc_param_int(p, "ranks", ctx->world);
	rmc_param_int(p, "nodes", ctx->nodes);
	rmc_param_bool(p, "inplace", false);
	char algo[32] = "default";
	const char *env = getenv("NCCL_ALGO");
	if (env && *env) {
		snprintf(algo, sizeof(algo), "%s", env);
		for (char *c = algo; *c; c++)
			*c = (char)tolower((unsigned char)*c);
	}
	rmc_param_str(p, "algo", algo);
	rmc_param_str(p, "type", "float");
	for (int d = 0; d < st->local; d++) {
		RMC_CUDA(ctx, cudaSetDevice(ctx->devices[d]));
		RMC_CUDA(ctx, cudaMalloc(&st->send[d], send));
		RMC_CUDA(ctx, cudaMalloc(&st->recv[d], recv));
		RMC_CUDA(ctx, cudaMemset(st->send[d], 0, send));
	}
	RMC_CUDA(ctx, cudaSetDevice(ctx->devices[0]));
	return 0;
}

/* One collective on every local GPU (a group when one process drives several). */
static int nccl_once(rmc_ctx *ctx, nccl_state *st, cudaStream_t *streams)
{
	RMC_NCCL(ctx, ncclGroupStart());
	for (int d = 0; d < st->local; d++) {
		switch (st->coll) {
		case COLL_AG:
			RMC_NCCL(ctx, ncclAllGather(st->send[d], st->recv[d], st->count, ncclFloat, ctx->comms[d], streams[d]));
			break;
		case COLL_RS:
			RMC_NCCL(ctx, ncclReduceScatter(st->send[d], st->recv[d], st->count, ncclFloat, ncclSum, ctx->comms[d],
							 streams[d]));
			break;
		default:
			RMC_NCCL(ctx, ncclAllReduce(st->send[d], st->recv[d], st->count, ncclFloat, ncclSum, ctx->comms[d],
						     streams[d]));
			break;
		}
	}
	RMC_NCCL(ctx, ncclGroupEnd());
	return 0;
}

static int sync_all(rmc_ctx *ctx, int local, cudaStream_t *streams)
{
	for (int d = 0; d < local; d++) {
		RMC_CUDA(ctx, cudaSetDevice(ctx->devices[d]));
		RMC_TRY(rmc_wait_stream(ctx, streams[d], "nccl: collectives"));
	}
	RMC_CUDA(ctx, cudaSetDevice(ctx->devices[0]));
	rm_dist_barrier(&ctx->dist);
	return 0;
}

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return 1e6 * (double)t.tv_sec + 1e-3 * (double)t.tv_nsec;
}

static int nccl_measure(rmc_ctx *ctx, void *state, int i, double *us)
{
	(void)i;
	nccl_state *st = (nccl_state *)state;
	int iters = st->bytes >= ((size_t)1 << 30) ? 10 : ctx->iters;
	for (int w = 0; w < ctx->warmup; w++)
		RMC_TRY(nccl_once(ctx, st, ctx->stream));
	RMC_TRY(sync_all(ctx, st->local, ctx->stream));
	double t0 = now_us();
	for (int k = 0; k < iters; k++)
		RMC_TRY(nccl_once(ctx, st, ctx->stream));
	RMC_TRY(sync_all(ctx, st->local, ctx->stream));
	*us = (now_us() - t0) / iters;
	return 0;
}

static void nccl_fini(rmc_ctx *ctx, void *state)
{
	nccl_state *st = (nccl_state *)state;
	if (st)
		for (int d = 0; d < st->local; d++) {
			cudaSetDevice(ctx->devices[d]);
			cudaFree(st->send[d]);
			cudaFree(st->recv[d]);
		}
	cudaSetDevice(ctx->devices[0]);
	free(st);
}

const rmc_bench rmc_bench_nccl = {"nccl", nccl_cases, nccl_init, NULL, nccl_measure, nccl_fini, true};

/* Used by the interference benchmark: enqueue n all-gathers of bytes on streams (no sync). */
int rmc_nccl_background(rmc_ctx *ctx, size_t bytes, int n, cudaStream_t *streams, void ***bufs);
int rmc_nccl_background(rmc_ctx *ctx, size_t bytes, int n, cudaStream_t *streams, void ***bufs)
{
	nccl_state st;
	memset(&st, 0, sizeof(st));
	st.coll = COLL_AG;
	st.local = ctx->mpi ? 1 : ctx->n_gpus;
	st.count = bytes / 4 / (size_t)ctx->world;
	void **keep = (void **)calloc((size_t)(2 * st.local), sizeof(void *));
	*bufs = keep;
	for (int d = 0; d < st.local; d++) {
		RMC_CUDA(ctx, cudaSetDevice(ctx->devices[d]));
		RMC_CUDA(ctx, cudaMalloc(&keep[2 * d], st.count * 4));
		RMC_CUDA(ctx, cudaMalloc(&keep[2 * d + 1], st.count * 4 * (size_t)ctx->world));
		st.send[d] = keep[2 * d];
		st.recv[d] = keep[2 * d + 1];
	}
	RMC_CUDA(ctx, cudaSetDevice(ctx->devices[0]));
	for (int k = 0; k < n; k++)
		RMC_TRY(nccl_once(ctx, &st, streams));
	return 0;
}
