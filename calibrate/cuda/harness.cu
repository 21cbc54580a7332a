/*
 * remora-calibrate: runs the microbenchmarks of calibrate/cuda/ and writes JSON lines
 * (harness.h). Exit status: 0 done, 1 a benchmark failed (the message names the call,
 * file:line and the error string), 2 bad usage, 77 no GPU (meson's SKIP).
 *
 * NCCL: one process per GPU under mpirun when built with MPI (rank 0 writes), otherwise one
 * process driving every visible GPU (one ncclCommInitRankConfig per GPU in a group, as
 * ncclCommInitAll does); one GPU works in both modes. The communicators are non-blocking, their
 * set-up bounded by --init-timeout (setup_nccl).
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "harness.h"

int rmc_fail(rmc_ctx *ctx, const char *file, int line, const char *expr, const char *msg)
{
	if (!ctx->error[0])
		snprintf(ctx->error, sizeof(ctx->error), "%s:%d: %s: %s", file, line, expr, msg);
	return -1;
}

/* ---- waits on device work and agreement across ranks (gpudist/dist.h) ---------------------- */

typedef struct rmc_waited {
	rmc_ctx *ctx;
	cudaEvent_t ev;     /* or */
	cudaStream_t stream;
} rmc_waited;

static int rmc_wait_query(void *arg, char *msg, size_t n)
{
	rmc_waited *w = (rmc_waited *)arg;
	cudaError_t e = w->ev ? cudaEventQuery(w->ev) : cudaStreamQuery(w->stream);
	if (e == cudaSuccess)
		return 1;
	if (e == cudaErrorNotReady)
		return 0;
	snprintf(msg, n, "%s: %s", w->ev ? "cudaEventQuery" : "cudaStreamQuery", cudaGetErrorString(e));
	return -1;
}

#if RMC_HAVE_NCCL
static int rmc_local_comms(const rmc_ctx *ctx)
{
	return ctx->have_comms ? (ctx->mpi ? 1 : ctx->n_gpus) : 0;
}
#endif

static int rmc_wait_async(void *arg, char *msg, size_t n)
{
#if RMC_HAVE_NCCL
	rmc_waited *w = (rmc_waited *)arg;
	for (int i = 0; i < rmc_local_comms(w->ctx); i++) {
		if (!w->ctx->comms[i])
			continue;
		ncclResult_t r = ncclSuccess;
		ncclResult_t q = ncclCommGetAsyncError(w->ctx->comms[i], &r);
		if (q != ncclSuccess)
			r = q;
		if (r != ncclSuccess && r != ncclInProgress) {
			snprintf(msg, n, "ncclCommGetAsyncError (communicator %d): %s", i, ncclGetErrorString(r));
			return -1;
		}
	}
#else
	(void)arg, (void)msg, (void)n;
#endif
	return 0;
}

static void rmc_wait_abort(void *arg)
{
#if RMC_HAVE_NCCL
	rmc_waited *w = (rmc_waited *)arg;
	for (int i = 0; i < rmc_local_comms(w->ctx); i++)
		if (w->ctx->comms[i])
			ncclCommAbort(w->ctx->comms[i]);
	if (w->ctx->have_comms)
		w->ctx->comms_aborted = true;
	w->ctx->have_comms = false;
#else
	(void)arg;
#endif
}

#if RMC_HAVE_NCCL
/*
 * This process's communicators as a wait's query (exec/cuda/runner.cu rmx_comm_ready, over every
 * local communicator): 1 when every one reports ncclSuccess, 0 while one is still in progress (its
 * set-up, or a call that returned ncclInProgress), -1 when one failed or they were aborted.
 */
static int rmc_comms_ready(void *arg, char *msg, size_t n)
{
	rmc_waited *w = (rmc_waited *)arg;
	if (!w->ctx->have_comms) {
		snprintf(msg, n, "the communicators were aborted");
		return -1;
	}
	int ready = 1;
	for (int i = 0; i < rmc_local_comms(w->ctx); i++) {
		ncclComm_t c = w->ctx->comms[i];
		if (!c) {
			snprintf(msg, n, "communicator %d was not created", i);
			return -1;
		}
		ncclResult_t r = ncclSuccess, q = ncclCommGetAsyncError(c, &r);
		if (q != ncclSuccess)
			r = q;
		if (r == ncclInProgress) {
			ready = 0;
		} else if (r != ncclSuccess) {
			snprintf(msg, n, "ncclCommGetAsyncError (communicator %d): %s (%s)", i, ncclGetErrorString(r),
				 ncclGetLastError(c));
			return -1;
		}
	}
	return ready;
}

int rmc_nccl_settle(rmc_ctx *ctx, ncclResult_t r, const char *file, int line, const char *expr)
{
	if (r == ncclSuccess)
		return 0;
	if (r != ncclInProgress)
		return rmc_fail(ctx, file, line, expr, ncclGetErrorString(r));
	rmc_waited w = {ctx, NULL, NULL};
	rm_dist_waiter waiter = {rmc_comms_ready, NULL, rmc_wait_abort, &w, NULL};
	char msg[RM_DIST_MSG];
	if (rm_dist_wait(&waiter, ctx->timeout_s, expr, msg, sizeof(msg)) != 0)
		return rmc_fail(ctx, file, line, "ncclInProgress", msg);
	return 0;
}
#endif

static int rmc_wait(rmc_ctx *ctx, cudaEvent_t ev, cudaStream_t stream, const char *what)
{
	rmc_waited w = {ctx, ev, stream};
	rm_dist_waiter waiter = {rmc_wait_query, rmc_wait_async, rmc_wait_abort, &w, NULL};
	char msg[RM_DIST_MSG];
	if (rm_dist_wait(&waiter, ctx->timeout_s, what, msg, sizeof(msg)) != 0)
		return rmc_fail(ctx, __FILE__, __LINE__, "rm_dist_wait", msg);
	return 0;
}

int rmc_wait_event(rmc_ctx *ctx, cudaEvent_t ev, const char *what)
{
	return rmc_wait(ctx, ev, NULL, what);
}

int rmc_wait_stream(rmc_ctx *ctx, cudaStream_t stream, const char *what)
{
	return rmc_wait(ctx, NULL, stream, what);
}

int rmc_agree(rmc_ctx *ctx, bool ok)
{
	if (!ok && !ctx->error[0])
		snprintf(ctx->error, sizeof(ctx->error), "failed");
	char msg[sizeof(ctx->error)];
	snprintf(msg, sizeof(msg), "%s", ctx->error);
	if (rm_dist_agree(&ctx->dist, ok, NULL, msg, sizeof(msg)) == 0)
		return 0;
	snprintf(ctx->error, sizeof(ctx->error), "%s", msg);
	return -1;
}

/* The next free parameter slot for key, or -1 when all 12 are used. */
static int add_param(rmc_params *p, const char *key, char kind)
{
	if (p->n >= 12)
		return -1;
	p->key[p->n] = key;
	p->kind[p->n] = kind;
	return p->n++;
}

void rmc_param_int(rmc_params *p, const char *key, long long v)
{
	int k = add_param(p, key, 'i');
	if (k >= 0)
		p->i[k] = v;
}

void rmc_param_str(rmc_params *p, const char *key, const char *v)
{
	int k = add_param(p, key, 's');
	if (k >= 0)
		snprintf(p->s[k], sizeof(p->s[k]), "%s", v);
}

void rmc_param_bool(rmc_params *p, const char *key, bool v)
{
	int k = add_param(p, key, 'b');
	if (k >= 0)
		p->i[k] = v;
}

void rmc_param_real(rmc_params *p, const char *key, double v)
{
	int k = add_param(p, key, 'r');
	if (k >= 0)
		p->r[k] = v;
}

/* A JSON string of s; bytes that are not ASCII become '?' when s is not UTF-8 (jansson refuses it). */
static json_t *str(const char *s)
{
	json_t *j = json_string(s);
	if (j)
		return j;
	char buf[256];
	size_t n = 0;
	for (; *s && n + 1 < sizeof(buf); s++)
		buf[n++] = (unsigned char)*s < 0x80 ? *s : '?';
	buf[n] = '\0';
	return json_string(buf);
}

void rmc_write_row(rmc_ctx *ctx, const char *benchmark, const rmc_params *p, double us)
{
	if (ctx->rank != 0)
		return;
	json_t *params = json_object();
	for (int i = 0; i < p->n; i++) {
		json_t *v = p->kind[i] == 'i'	? json_integer(p->i[i])
			    : p->kind[i] == 'b' ? json_boolean(p->i[i])
			    : p->kind[i] == 'r' ? json_real(p->r[i])
						: str(p->s[i]);
		json_object_set_new(params, p->key[i], v);
	}
	json_t *row = json_object();
	json_object_set_new(row, "benchmark", str(benchmark));
	json_object_set_new(row, "params", params);
	json_object_set_new(row, "value", json_real(us));
	json_object_set_new(row, "unit", json_string("us"));
	json_object_set_new(row, "machine", str(ctx->machine));
	json_object_set_new(row, "gpu", str(ctx->gpu));
	json_object_set_new(row, "driver", str(ctx->driver));
	json_object_set_new(row, "cuda", str(ctx->cuda));
	json_object_set_new(row, "nccl", str(ctx->nccl));
	json_object_set_new(row, "started_at", str(ctx->started_at));
	/* one line per row, flushed: the rows already written survive a failure later on */
	json_dumpf(row, ctx->out, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
	json_decref(row);
	fputc('\n', ctx->out);
	fflush(ctx->out);
	ctx->cases_written++;
}

int rmc_time_loop(rmc_ctx *ctx, const rmc_bench *b, void *state, cudaStream_t stream, int warmup,
		  int iters, double *us)
{
	cudaEvent_t start, stop;
	RMC_CUDA(ctx, cudaEventCreate(&start));
	RMC_CUDA(ctx, cudaEventCreate(&stop));
	for (int i = 0; i < warmup; i++)
		RMC_TRY(b->run(ctx, state, stream));
	RMC_TRY(rmc_wait_stream(ctx, stream, "warm-up"));
	RMC_CUDA(ctx, cudaEventRecord(start, stream));
	for (int i = 0; i < iters; i++)
		RMC_TRY(b->run(ctx, state, stream));
	RMC_CUDA(ctx, cudaEventRecord(stop, stream));
	RMC_TRY(rmc_wait_event(ctx, stop, "timed iterations"));
	float ms = 0;
	RMC_CUDA(ctx, cudaEventElapsedTime(&ms, start, stop));
	RMC_CUDA(ctx, cudaEventDestroy(start));
	RMC_CUDA(ctx, cudaEventDestroy(stop));
	*us = 1e3 * (double)ms / iters;
	return 0;
}

/* Driver version from the kernel module ("580.65.06"), else the CUDA driver API version. */
static void driver_version(char *buf, size_t size)
{
	buf[0] = '\0';
	FILE *f = fopen("/proc/driver/nvidia/version", "r");
	if (f) {
		char line[512];
		if (fgets(line, sizeof(line), f)) {
			const char *k = strstr(line, "Kernel Module");
			if (k && sscanf(k + strlen("Kernel Module"), " %31s", buf) != 1)
				buf[0] = '\0';
		}
		fclose(f);
	}
	if (!buf[0]) {
		int v = 0;
		if (cudaDriverGetVersion(&v) == cudaSuccess)
			snprintf(buf, size, "cuda-driver-api %d.%d", v / 1000, (v % 1000) / 10);
	}
}

static int describe_run(rmc_ctx *ctx)
{
	cudaDeviceProp prop;
	RMC_CUDA(ctx, cudaGetDeviceProperties(&prop, ctx->devices[0]));
	ctx->sm_count = prop.multiProcessorCount;
	ctx->l2_bytes = (size_t)prop.l2CacheSize;
	char host[256] = "", drv[64], cuda[32], nccl[32] = "", when[40];
	gethostname(host, sizeof(host) - 1);
	driver_version(drv, sizeof(drv));
	int rt = 0;
	RMC_CUDA(ctx, cudaRuntimeGetVersion(&rt));
	snprintf(cuda, sizeof(cuda), "%d.%d", rt / 1000, (rt % 1000) / 10);
#if RMC_HAVE_NCCL
	int nv = 0;
	RMC_NCCL(ctx, ncclGetVersion(&nv));
	snprintf(nccl, sizeof(nccl), "%d.%d.%d", nv / 10000, (nv % 10000) / 100, nv % 100);
#endif
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(ctx->machine, sizeof(ctx->machine), "%s", host);
	snprintf(ctx->gpu, sizeof(ctx->gpu), "%s", prop.name);
	snprintf(ctx->driver, sizeof(ctx->driver), "%s", drv);
	snprintf(ctx->cuda, sizeof(ctx->cuda), "%s", cuda);
	snprintf(ctx->nccl, sizeof(ctx->nccl), "%s", nccl);
	snprintf(ctx->started_at, sizeof(ctx->started_at), "%s", when);
	if (ctx->rank == 0)
		fprintf(stderr, "remora-calibrate: %s, %d GPU(s) (%s, %d SMs), driver %s, CUDA %s, NCCL %s\n", host,
			ctx->world, prop.name, ctx->sm_count, drv, cuda, nccl[0] ? nccl : "none");
	return 0;
}

static int setup(rmc_ctx *ctx)
{
	for (int i = 0; i < ctx->n_gpus; i++) {
		RMC_CUDA(ctx, cudaSetDevice(ctx->devices[i]));
		int lo = 0, hi = 0;
		RMC_CUDA(ctx, cudaDeviceGetStreamPriorityRange(&lo, &hi));
		/* the benchmark stream at the lowest priority; interference uses the highest */
		RMC_CUDA(ctx, cudaStreamCreateWithPriority(&ctx->stream[i], cudaStreamNonBlocking, lo));
	}
	RMC_CUDA(ctx, cudaSetDevice(ctx->devices[0]));
	RMC_CUBLAS(ctx, cublasLtCreate(&ctx->lt));
	ctx->workspace_bytes = (size_t)64 << 20;
	RMC_CUDA(ctx, cudaMalloc(&ctx->workspace, ctx->workspace_bytes));
	return 0;
}

#if RMC_HAVE_NCCL
/*
 * The communicators, non-blocking (ncclConfig_t.blocking = 0) as the executor's
 * (exec/cuda/runner.cu rmx_setup_comm): ncclCommInitRankConfig returns at once (ncclInProgress)
 * and the set-up is polled with ncclCommGetAsyncError until every local communicator is ready; an
 * error, or no progress within ctx->init_timeout_s, aborts them (ncclCommAbort) and fails with
 * "communicator init: no progress in T s (timeout; REMORA_NCCL_INIT_TIMEOUT_S or
 * --init-timeout)", so a peer that never joins the bootstrap ends the run instead of hanging it.
 * Then an agreement, so that no rank starts a collective that a peer without a communicator
 * never joins.
 * - Under MPI: rank 0 makes the unique id and broadcasts it with its status (a failed
 *   ncclGetUniqueId reaches every rank, which all leave), then one communicator per process.
 * - One process: ncclCommInitAll's own sequence (NCCL init.cc), one ncclCommInitRankConfig per GPU
 *   on that GPU between ncclGroupStart and ncclGroupEnd, with the config ncclCommInitAll lacks.
 * The communicators stay non-blocking: RMC_NCCL settles a later call's ncclInProgress.
 */
static int setup_nccl(rmc_ctx *ctx)
{
	ncclUniqueId id;
	memset(&id, 0, sizeof(id));
	bool ok = true;
	if (ctx->rank == 0) {
		ncclResult_t r = ncclGetUniqueId(&id);
		if (r != ncclSuccess)
			ok = rmc_fail(ctx, __FILE__, __LINE__, "ncclGetUniqueId(&id)", ncclGetErrorString(r)) == 0;
	}
	if (ctx->mpi) {
		char msg[sizeof(ctx->error)];
		snprintf(msg, sizeof(msg), "%s", ctx->error);
		if (rm_dist_bcast_status(&ctx->dist, ok, &id, sizeof(id), msg, sizeof(msg)) != 0) {
			snprintf(ctx->error, sizeof(ctx->error), "%s", msg);
			return -1;
		}
	} else if (!ok) {
		return -1;
	}
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	cfg.blocking = 0;
	int local = ctx->mpi ? 1 : ctx->n_gpus;
	bool group = local > 1; /* one process initialising several ranks must group them */
	ncclResult_t r = group ? ncclGroupStart() : ncclSuccess;
	if (r != ncclSuccess)
		ok = rmc_fail(ctx, __FILE__, __LINE__, "ncclGroupStart()", ncclGetErrorString(r)) == 0;
	for (int d = 0; ok && d < local; d++) {
		cudaError_t e = cudaSetDevice(ctx->devices[d]);
		if (e != cudaSuccess) {
			ok = rmc_fail(ctx, __FILE__, __LINE__, "cudaSetDevice(ctx->devices[d])", cudaGetErrorString(e)) == 0;
			break;
		}
		r = ncclCommInitRankConfig(&ctx->comms[d], ctx->world, id, ctx->mpi ? ctx->rank : d, &cfg);
		if (r != ncclSuccess && r != ncclInProgress)
			ok = rmc_fail(ctx, __FILE__, __LINE__,
				      "ncclCommInitRankConfig(&ctx->comms[d], ctx->world, id, rank, blocking 0)",
				      ncclGetErrorString(r)) == 0;
	}
	if (group) {
		r = ncclGroupEnd(); /* also after a failure: the group must be closed */
		if (ok && r != ncclSuccess && r != ncclInProgress)
			ok = rmc_fail(ctx, __FILE__, __LINE__, "ncclGroupEnd() (communicator init)", ncclGetErrorString(r)) == 0;
	}
	for (int d = 0; d < local; d++)
		ctx->have_comms = ctx->have_comms || ctx->comms[d] != NULL;
	rmc_waited w = {ctx, NULL, NULL};
	if (ok) {
		rm_dist_waiter waiter = {rmc_comms_ready, NULL, rmc_wait_abort, &w,
					 "REMORA_NCCL_INIT_TIMEOUT_S or --init-timeout"};
		char why[RM_DIST_MSG];
		if (rm_dist_wait(&waiter, ctx->init_timeout_s, "communicator init", why, sizeof(why)) != 0)
			ok = rmc_fail(ctx, __FILE__, __LINE__, "ncclCommInitRankConfig", why) == 0;
	} else {
		rmc_wait_abort(&w); /* whatever was created: nothing waits on it */
	}
	if (cudaSetDevice(ctx->devices[0]) != cudaSuccess && ok)
		ok = rmc_fail(ctx, __FILE__, __LINE__, "cudaSetDevice(ctx->devices[0])", "failed") == 0;
	return rmc_agree(ctx, ok);
}
#endif

/* failed: the run did not end cleanly, so the communicators are aborted rather than destroyed
 * (a peer may wait in a collective that never comes; exec/cuda/runner.cu rmx_teardown) */
static void teardown(rmc_ctx *ctx, bool failed)
{
#if RMC_HAVE_NCCL
	if (ctx->have_comms)
		for (int i = 0; i < rmc_local_comms(ctx); i++)
			if (ctx->comms[i] && failed)
				ncclCommAbort(ctx->comms[i]);
			else if (ctx->comms[i])
				ncclCommDestroy(ctx->comms[i]);
#else
	(void)failed;
#endif
	if (ctx->workspace)
		cudaFree(ctx->workspace);
	if (ctx->lt)
		cublasLtDestroy(ctx->lt);
	for (int i = 0; i < ctx->n_gpus; i++)
		if (ctx->stream[i])
			cudaStreamDestroy(ctx->stream[i]);
}

/*
 * The cases of b. collective: every rank runs them (under MPI), so each case's set-up and
 * measurement end in an agreement: one rank's failure (a cudaMalloc, a timeout) stops every rank
 * at the same case instead of leaving its peers in a collective.
 */
static int run_bench(rmc_ctx *ctx, const rmc_bench *b, bool collective)
{
	int n = b->cases(ctx);
	for (int i = 0; i < n; i++) {
		void *state = NULL;
		const char *benchmark = b->name;
		rmc_params p;
		memset(&p, 0, sizeof(p));
		int rc = cudaSetDevice(ctx->devices[0]) == cudaSuccess ? 0 : rmc_fail(ctx, __FILE__, __LINE__, "cudaSetDevice", "failed");
		if (rc == 0)
			rc = b->init(ctx, i, &state, &benchmark, &p);
		if (collective)
			rc = rmc_agree(ctx, rc == 0);
		double us = 0;
		if (rc == 0)
			rc = b->measure ? b->measure(ctx, state, i, &us)
					: rmc_time_loop(ctx, b, state, ctx->stream[0], ctx->warmup, ctx->iters, &us);
		b->fini(ctx, state);
		if (collective)
			rc = rmc_agree(ctx, rc == 0);
		if (rc != 0)
			return -1;
		if (us > 0)
			rmc_write_row(ctx, benchmark, &p, us);
	}
	return 0;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: remora-calibrate [--out FILE] [--quick] [--only NAME] [--gpus N] [--iters N] [--warmup N]\n"
		     "                        [--timeout S] [--init-timeout S] [--no-graph]\n\n"
		     "Runs remora's microbenchmarks on this machine's GPUs and writes JSON lines for\n"
		     "`remora calib import` (cuBLASLt GEMM bf16/fp8, HBM copy/triad, launch with and without\n"
		     "CUDA graphs, pinned host copies, NCCL all-gather/reduce-scatter/all-reduce 1 KiB..4 GiB,\n"
		     "GEMM interference with SMs held and with a concurrent collective).\n"
		     "  --timeout S   seconds one wait on GPU work may take before the NCCL communicators are\n"
		     "                aborted and every rank stops (default REMORA_NCCL_TIMEOUT_S, else 120)\n"
		     "  --init-timeout S\n"
		     "                seconds the NCCL communicators' non-blocking set-up may take before\n"
		     "                they are aborted and every rank stops, as when a peer never joins\n"
		     "                (default REMORA_NCCL_INIT_TIMEOUT_S, else the --timeout default)\n"
		     "  --no-graph    time the NCCL sweep's host-launched iterations with events on the stream\n"
		     "                instead of replaying them from a CUDA graph (nccl-tests -G)\n"
		     "Exit status 77 when there is no GPU.\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"out", required_argument, NULL, 'o'},   {"quick", no_argument, NULL, 'q'},
		{"only", required_argument, NULL, 'O'},  {"gpus", required_argument, NULL, 'g'},
		{"iters", required_argument, NULL, 'n'}, {"warmup", required_argument, NULL, 'w'},
		{"timeout", required_argument, NULL, 't'}, {"no-graph", no_argument, NULL, 'G'},
		{"init-timeout", required_argument, NULL, 'I'},
		{"help", no_argument, NULL, 'h'},
		{0, 0, 0, 0},
	};
	rmc_ctx *ctx = (rmc_ctx *)calloc(1, sizeof(rmc_ctx));
	if (!ctx)
		return 1;
	ctx->out = stdout;
	ctx->warmup = 5;
	ctx->iters = 20;
	const char *out_path = NULL;
	int want_gpus = 0, c;
	double timeout_flag = 0, init_timeout_flag = 0;
	while ((c = getopt_long(argc, argv, "o:qO:g:n:w:t:I:Gh", longopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			out_path = optarg;
			break;
		case 'q':
			ctx->quick = true;
			break;
		case 'O':
			ctx->only = optarg;
			break;
		case 'g':
			want_gpus = atoi(optarg);
			break;
		case 'n':
			ctx->iters = atoi(optarg);
			break;
		case 'w':
			ctx->warmup = atoi(optarg);
			break;
		case 't':
			timeout_flag = atof(optarg);
			if (!(timeout_flag > 0)) {
				fprintf(stderr, "remora-calibrate: --timeout %s: a positive number of seconds\n", optarg);
				return 2;
			}
			break;
		case 'I':
			init_timeout_flag = atof(optarg);
			if (!(init_timeout_flag > 0)) {
				fprintf(stderr, "remora-calibrate: --init-timeout %s: a positive number of seconds\n", optarg);
				return 2;
			}
			break;
		case 'G':
			ctx->no_graph = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc || ctx->iters < 1 || ctx->warmup < 0 || want_gpus < 0 || want_gpus > RMC_MAX_GPUS) {
		usage(stderr);
		return 2;
	}
	ctx->timeout_s = rm_dist_timeout_s(timeout_flag);
	ctx->init_timeout_s = rm_dist_init_timeout_s(init_timeout_flag);
	/* the job first (MPI_Init before any exit), so that every rank agrees on the way out */
	int status = 0;
	if (rm_dist_init(&ctx->dist, ctx->error, sizeof(ctx->error)) != 0) {
		fprintf(stderr, "remora-calibrate: error: %s\n", ctx->error);
		free(ctx);
		return 2;
	}
	ctx->mpi = ctx->dist.mpi;
	ctx->rank = ctx->dist.rank;
	int count = 0;
	if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
		count = 0;
		snprintf(ctx->error, sizeof(ctx->error), "no CUDA GPU here; skipping");
	}
	int code = count == 0 ? 77 : 0;
	if (rm_dist_agree(&ctx->dist, count > 0, &code, ctx->error, sizeof(ctx->error)) != 0) {
		if (ctx->rank == 0)
			fprintf(stderr, "remora-calibrate: %s\n", ctx->error);
		status = code;
		goto finish;
	}
	if (ctx->mpi) {
		ctx->world = ctx->dist.world;
		ctx->n_gpus = 1;
		ctx->devices[0] = rm_dist_device(&ctx->dist, count);
	} else {
		ctx->n_gpus = want_gpus ? (want_gpus < count ? want_gpus : count) : (count < RMC_MAX_GPUS ? count : RMC_MAX_GPUS);
		for (int i = 0; i < ctx->n_gpus; i++)
			ctx->devices[i] = i;
		ctx->world = ctx->n_gpus;
	}
	ctx->nodes = rm_dist_count_nodes(&ctx->dist);
	if (out_path && ctx->rank == 0) {
		ctx->out = fopen(out_path, "w");
		if (!ctx->out) {
			snprintf(ctx->error, sizeof(ctx->error), "%s: %s", out_path, strerror(errno));
			ctx->out = stdout;
			status = 1;
		}
	}
	{
		const rmc_bench *benches[] = {
			&rmc_bench_launch, &rmc_bench_hbm, &rmc_bench_host_copy, &rmc_bench_gemm, &rmc_bench_interference,
#if RMC_HAVE_NCCL
			&rmc_bench_nccl,
#endif
		};
		if (status == 0 && (describe_run(ctx) != 0 || setup(ctx) != 0))
			status = 1;
		/* every rank leaves together when one could not set up */
		if (rmc_agree(ctx, status == 0) != 0)
			status = 1;
#if RMC_HAVE_NCCL
		if (status == 0 && setup_nccl(ctx) != 0)
			status = 1;
#endif
		bool ready = status == 0;
		for (size_t i = 0; ready && i < sizeof(benches) / sizeof(benches[0]); i++) {
			const rmc_bench *b = benches[i];
			if (ctx->only && !strstr(b->name, ctx->only))
				continue;
#if RMC_HAVE_NCCL
			if (b->needs_nccl && ctx->comms_aborted)
				continue;
#endif
			/* under MPI only the NCCL benchmarks run on every rank; the rest on rank 0 */
			bool runs_here = !ctx->mpi || b->needs_nccl || ctx->rank == 0;
			time_t t0 = time(NULL);
			bool failed = runs_here && run_bench(ctx, b, ctx->mpi && b->needs_nccl) != 0;
			/* under MPI every rank learns how each benchmark went (a rank-0-only one included) */
			if (ctx->mpi && rmc_agree(ctx, !failed) != 0)
				failed = true;
			if (ctx->rank == 0)
				fprintf(stderr, "remora-calibrate: %-13s %s in %lds\n", b->name, failed ? "FAILED" : "done",
					(long)(time(NULL) - t0));
			if (failed) {
				/* the rows already written stay; the next benchmark runs unless the context is lost */
				if (ctx->rank == 0)
					fprintf(stderr, "remora-calibrate: error: %s\n",
						ctx->error[0] ? ctx->error : "unknown failure");
				ctx->error[0] = '\0';
				status = 1;
				cudaError_t sticky = ctx->mpi ? cudaSuccess : cudaDeviceSynchronize();
				if (sticky != cudaSuccess || ctx->mpi) {
					if (ctx->rank == 0)
						fprintf(stderr, "remora-calibrate: stopping: %s\n",
							sticky != cudaSuccess ? cudaGetErrorString(sticky)
									      : "a rank failed under MPI (all stop together)");
					ready = false;
				}
			}
		}
	}
	if (status != 0 && ctx->error[0])
		fprintf(stderr, "remora-calibrate: error: %s\n", ctx->error);
	else if (status == 0 && ctx->rank == 0)
		fprintf(stderr, "remora-calibrate: %d rows written to %s\n", ctx->cases_written,
			out_path ? out_path : "stdout");
	teardown(ctx, status != 0);
	if (ctx->out != stdout)
		fclose(ctx->out);
finish:
	rm_dist_finish(&ctx->dist);
	free(ctx);
	return status;
}
