/*
 * NCCL all-gather, reduce-scatter and all-reduce from 1 KiB to 4 GiB (x2 steps), out-of-place,
 * float sum, as nccl-tests runs them (src/all_gather.cu ...): bytes is the full buffer (the
 * all-gather output, the reduce-scatter input).
 *
 * Timing: one untimed call first, whatever --warmup says (NCCL connects its peers lazily, on the
 * first collective), then the warm-up, then `iters` iterations captured in a CUDA graph per local
 * GPU and replayed once between two events on each stream, as nccl-tests -G does: host launches
 * (about 35 us per grouped call in single-process mode) would otherwise be what every size below
 * a few MiB measures. The figure is the longest stream's elapsed time over every rank / iters.
 * With --no-graph the iterations are launched from the host between the same events (a row with
 * "timing": "stream" and gpus_per_thread, whose small sizes `calib fit` treats as a launch floor).
 *
 * Rows "all_gather" | "reduce_scatter" | "all_reduce", params {bytes, ranks, nodes, inplace,
 * algo, proto, tuning (rm_dist_nccl_env: NCCL_ALGO, NCCL_PROTO and the channel/CTA/NVLS/CTA-policy
 * variables), type, timing: "graph" | "stream" [, gpus_per_thread]}. With one GPU NCCL copies
 * locally; the row is still written.
 */
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
	char algo[64], proto[64], tuning[160];
	rm_dist_nccl_env(NULL, algo, sizeof(algo), proto, sizeof(proto), tuning, sizeof(tuning));
	rmc_param_str(p, "algo", algo);
	rmc_param_str(p, "proto", proto);
	rmc_param_str(p, "tuning", tuning);
	rmc_param_str(p, "type", "float");
	rmc_param_str(p, "timing", ctx->no_graph ? "stream" : "graph");
	if (ctx->no_graph)
		rmc_param_int(p, "gpus_per_thread", st->local);
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
	return 0;
}

/* The events and graphs of one timed run, per local GPU. */
typedef struct nccl_timing {
	cudaEvent_t start[RMC_MAX_GPUS], stop[RMC_MAX_GPUS];
	cudaGraph_t graph[RMC_MAX_GPUS];
	cudaGraphExec_t exec[RMC_MAX_GPUS];
} nccl_timing;

static void timing_free(nccl_timing *t, int local)
{
	for (int d = 0; d < local; d++) {
		if (t->exec[d])
			cudaGraphExecDestroy(t->exec[d]);
		if (t->graph[d])
			cudaGraphDestroy(t->graph[d]);
		if (t->start[d])
			cudaEventDestroy(t->start[d]);
		if (t->stop[d])
			cudaEventDestroy(t->stop[d]);
	}
}

/*
 * iters collectives captured into one graph per local GPU (thread-local capture mode, so NCCL's
 * own threads are not restricted; nccl-tests src/common.cu does the same), instantiated and
 * uploaded, so that the timed replay launches nothing from the host per iteration.
 */
static int capture(rmc_ctx *ctx, nccl_state *st, int iters, nccl_timing *t)
{
	for (int d = 0; d < st->local; d++)
		RMC_CUDA(ctx, cudaStreamBeginCapture(ctx->stream[d], cudaStreamCaptureModeThreadLocal));
	int rc = 0;
	for (int k = 0; k < iters && rc == 0; k++)
		rc = nccl_once(ctx, st, ctx->stream);
	for (int d = 0; d < st->local; d++) { /* end every capture, also after a failure */
		cudaError_t e = cudaStreamEndCapture(ctx->stream[d], &t->graph[d]);
		if (e != cudaSuccess && rc == 0)
			rc = rmc_fail(ctx, __FILE__, __LINE__, "cudaStreamEndCapture(ctx->stream[d], &t->graph[d])",
				      cudaGetErrorString(e));
	}
	RMC_TRY(rc);
	for (int d = 0; d < st->local; d++) {
		RMC_CUDA(ctx, cudaSetDevice(ctx->devices[d]));
		RMC_CUDA(ctx, cudaGraphInstantiate(&t->exec[d], t->graph[d], 0));
		RMC_CUDA(ctx, cudaGraphUpload(t->exec[d], ctx->stream[d]));
	}
	RMC_CUDA(ctx, cudaSetDevice(ctx->devices[0]));
	return 0;
}

/* Everything before the timed replay: the untimed first call, the warm-up, the events and the
 * graphs, all finished. No MPI call (see nccl_measure). */
static int prepare(rmc_ctx *ctx, nccl_state *st, int iters, nccl_timing *t)
{
	/* untimed, even with --warmup 0: the first call sets up NCCL's connections */
	RMC_TRY(nccl_once(ctx, st, ctx->stream));
	RMC_TRY(sync_all(ctx, st->local, ctx->stream));
	for (int w = 0; w < ctx->warmup; w++)
		RMC_TRY(nccl_once(ctx, st, ctx->stream));
	for (int d = 0; d < st->local; d++) {
		RMC_CUDA(ctx, cudaSetDevice(ctx->devices[d]));
		RMC_CUDA(ctx, cudaEventCreate(&t->start[d]));
		RMC_CUDA(ctx, cudaEventCreate(&t->stop[d]));
	}
	if (!ctx->no_graph)
		RMC_TRY(capture(ctx, st, iters, t));
	return sync_all(ctx, st->local, ctx->stream); /* warm-up and uploads done */
}

/* The timed replay (or host launches with --no-graph): *us the longest local stream's time per
 * iteration. No MPI call. */
static int timed(rmc_ctx *ctx, nccl_state *st, int iters, nccl_timing *t, double *us)
{
	for (int d = 0; d < st->local; d++) {
		RMC_CUDA(ctx, cudaSetDevice(ctx->devices[d]));
		RMC_CUDA(ctx, cudaEventRecord(t->start[d], ctx->stream[d]));
		if (!ctx->no_graph)
			RMC_CUDA(ctx, cudaGraphLaunch(t->exec[d], ctx->stream[d]));
	}
	if (ctx->no_graph)
		for (int k = 0; k < iters; k++)
			RMC_TRY(nccl_once(ctx, st, ctx->stream));
	double longest = 0;
	for (int d = 0; d < st->local; d++) {
		RMC_CUDA(ctx, cudaSetDevice(ctx->devices[d]));
		RMC_CUDA(ctx, cudaEventRecord(t->stop[d], ctx->stream[d]));
	}
	for (int d = 0; d < st->local; d++) {
		RMC_TRY(rmc_wait_event(ctx, t->stop[d], "nccl: timed iterations"));
		float ms = 0;
		RMC_CUDA(ctx, cudaEventElapsedTime(&ms, t->start[d], t->stop[d]));
		longest = ms > longest ? ms : longest;
	}
	RMC_CUDA(ctx, cudaSetDevice(ctx->devices[0]));
	*us = 1e3 * longest / iters;
	return 0;
}

/*
 * Under MPI the two MPI calls here (a barrier before the timed replay, the maximum over ranks
 * after it) are made by every rank whatever happened locally, so that a rank that failed does
 * not leave its peers in a different MPI collective; the failure itself is agreed after the case
 * (harness.cu run_bench).
 */
static int nccl_measure(rmc_ctx *ctx, void *state, int i, double *us)
{
	(void)i;
	nccl_state *st = (nccl_state *)state;
	int iters = st->bytes >= ((size_t)1 << 30) ? 10 : ctx->iters;
	nccl_timing t;
	memset(&t, 0, sizeof(t));
	int rc = prepare(ctx, st, iters, &t);
	rm_dist_barrier(&ctx->dist);
	double mine = 0;
	if (rc == 0)
		rc = timed(ctx, st, iters, &t, &mine);
	/* every rank times the same collectives: the slowest rank's figure is the collective's */
	double all = rm_dist_max(&ctx->dist, rc == 0 ? mine : 0);
	timing_free(&t, st->local);
	cudaSetDevice(ctx->devices[0]);
	RMC_TRY(rc);
	*us = all;
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

/*
 * Used by the interference benchmark to size its background: the time of one all-gather of
 * bytes on streams (one untimed first, then one between events on streams[0]), *us. No MPI call.
 */
int rmc_nccl_time_all_gather(rmc_ctx *ctx, size_t bytes, cudaStream_t *streams, double *us);
int rmc_nccl_time_all_gather(rmc_ctx *ctx, size_t bytes, cudaStream_t *streams, double *us)
{
	void **bufs = NULL;
	cudaEvent_t a = NULL, b = NULL;
	int local = ctx->mpi ? 1 : ctx->n_gpus;
	int rc = rmc_nccl_background(ctx, bytes, 1, streams, &bufs);
	for (int d = 0; d < local && rc == 0; d++)
		rc = rmc_wait_stream(ctx, streams[d], "interference: sizing all-gather");
	if (rc == 0 && (cudaSetDevice(ctx->devices[0]) != cudaSuccess || cudaEventCreate(&a) != cudaSuccess ||
			cudaEventCreate(&b) != cudaSuccess || cudaEventRecord(a, streams[0]) != cudaSuccess))
		rc = rmc_fail(ctx, __FILE__, __LINE__, "cudaEventCreate/Record (sizing all-gather)", "failed");
	void **bufs2 = NULL;
	if (rc == 0)
		rc = rmc_nccl_background(ctx, bytes, 1, streams, &bufs2);
	if (rc == 0 && cudaEventRecord(b, streams[0]) != cudaSuccess)
		rc = rmc_fail(ctx, __FILE__, __LINE__, "cudaEventRecord(b, streams[0])", "failed");
	for (int d = 0; d < local && rc == 0; d++)
		rc = rmc_wait_stream(ctx, streams[d], "interference: sizing all-gather");
	float ms = 0;
	if (rc == 0 && cudaEventElapsedTime(&ms, a, b) != cudaSuccess)
		rc = rmc_fail(ctx, __FILE__, __LINE__, "cudaEventElapsedTime(a, b)", "failed");
	*us = 1e3 * (double)ms;
	void **all[2] = {bufs, bufs2};
	for (int k = 0; k < 2; k++) {
		for (int d = 0; all[k] && d < local; d++) {
			cudaSetDevice(ctx->devices[d]);
			cudaFree(all[k][2 * d]);
			cudaFree(all[k][2 * d + 1]);
		}
		free(all[k]);
	}
	if (a)
		cudaEventDestroy(a);
	if (b)
		cudaEventDestroy(b);
	cudaSetDevice(ctx->devices[0]);
	return rc;
}
