/*
 * The executor's CUDA runner (exec/runner.h): runs a planned schedule program on this process's
 * GPU with CUDA streams and events, cuBLASLt, NCCL and pinned copies, timing every op with CUDA
 * events. docs/exec.md.
 *
 * - Memory: the plan's regions, each one allocation (device pool, persistent, scratch; pinned
 *   host), plus one cuBLASLt workspace per stream that runs GEMMs. Values are synthetic: the
 *   regions are zeroed once; only time and memory are measured.
 * - Streams: cudaStreamCreateWithPriority with the program's priorities, clamped to the device's
 *   range. Events: one cudaEvent per program event (no timing), recorded after its op, waited
 *   with cudaStreamWaitEvent before the waiting op. Every op is bracketed by two timing events.
 * - Each iteration records an origin event on stream 0 that every stream waits for, then
 *   enqueues every op in the plan's launch order (program order, except that no wait is enqueued
 *   before its event's record: rm_exec_launch_order), joins every stream into an event on
 *   stream 0, then polls it. The step is timed on iterations without per-op events, the ops on
 *   iterations with them (see rmx_measure). Eager timing starts at an event the host enqueues
 *   first, so a step of small ops measures how fast the host enqueues them.
 * - Graph mode (rm_exec_run_opts.graph, after the eager iterations): the same iteration captured
 *   as a CUDA graph (stream capture on stream 0, the other streams forked from it by an event
 *   wait and joined back), replayed back to back for the step, and captured once more with
 *   per-op timing events recorded as event-record nodes (cudaEventRecordExternal) for per-op
 *   times (rmx_measure_graph).
 * - NCCL: one non-blocking communicator (ncclCommInitRankConfig, blocking = 0), its set-up
 *   polled with a timeout and aborted past it; calls that return ncclInProgress are settled by
 *   polling ncclCommGetAsyncError (rmx_nccl_settle).
 * - GEMMs: cuBLASLt, "TN" (D[m,n] = A^T[m,k] B[k,n]) as FP8 requires, FP32 accumulation, one
 *   prepared descriptor per distinct shape, batched with strided layouts. fp8_e5m2 runs as
 *   E5M2 x E4M3 (cuBLASLt has no E5M2 x E5M2).
 * - Attention planned fused (the default, rm_exec_op_plan.fused): cuDNN's flash SDPA through the
 *   graph API (exec/cuda/sdpa.cu), every graph built and finalized before anything is allocated;
 *   the engine's own workspace is the stream's cuBLASLt workspace (the stream runs one kernel at
 *   a time). If cuDNN is missing, or refuses a graph, or wants more workspace, one warning names
 *   the cuDNN call and status and the run uses the unfused plan instead (rmx_setup_attention).
 * - Attention unfused: the steps of rm_exec_attention_steps (row-major [s,d] slices, scores
 *   [s,s] with query rows; backward recomputes P with its softmax), chunk by chunk over batch x
 *   heads: batched cuBLASLt GEMMs in TN, NN and NT layouts and the row softmax /
 *   softmax-backward kernels, as the comparison prices it (rm_exec_attention_lowering) and as
 *   exec/attention.c computes it on the CPU.
 * - Elementwise: a kernel that streams bytes_read from its source and bytes_written to its
 *   destination in 16-byte words, wrapping around each buffer's extent.
 * - Copies: cudaMemcpyAsync (pinned host memory). Collectives: NCCL on the op's stream over the
 *   world communicator (a group of 1 with one GPU); a group of 1 inside a larger world is skipped
 *   (XLA drops trivial collectives).
 *
 * Errors: every CUDA, cuBLAS and NCCL call goes through RMX_CUDA / RMX_CUBLAS / RMX_NCCL, which
 * record the expression, file:line and the library's message (as calibrate/cuda/harness.h).
 */
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern "C" {
#include "remora/exec.h"
#include "remora/workload.h"
}
#include "exec/cuda/sdpa.h"
#include "exec/runner.h"
#include "gpudist/dist.h"

#define RMX_MAX_GEMMS 256

/* What a prepared GEMM is for: cuBLAS's column-major D[m,n] = op(A)[m,k] op(B)[k,n], leading
 * dimensions and batch strides in elements, and the operands' alignments. */
typedef struct rmx_gemm_key {
	int64_t batch, m, n, k, lda, ldb, ldd, stride_a, stride_b, stride_d;
	bool trans_a, trans_b;
	rm_dtype dtype;
	uint32_t align_a, align_b, align_d; /* bytes the chosen algorithm may assume (rm_exec_alignment) */
} rmx_gemm_key;

typedef struct rmx_gemm {
	rmx_gemm_key key;
	cublasLtMatmulDesc_t op;
	cublasLtMatrixLayout_t la, lb, ld;
	cublasLtMatmulAlgo_t algo;
} rmx_gemm;

typedef struct rmx_ctx {
	const rm_exec_plan *plan;  /* the caller's, or own_plan after a fallback to unfused attention */
	rm_exec_plan *own_plan;
	rmx_sdpa *sdpa;            /* cuDNN's fused attention, NULL when no op runs fused */
	const rm_program *prog;
	int device, world, rank, sm_count;
	bool mpi;
	rm_dist dist;     /* the job (gpudist/dist.h) */
	double timeout_s; /* of one wait on an iteration (rm_dist_timeout_s) */
	char *base[RM_EXEC_REGION_COUNT];
	cudaStream_t *streams;
	void **workspace; /* per stream, NULL where no GEMM runs */
	cudaEvent_t *events, *op_start, *op_end, *tails, origin, done;
	cudaEvent_t fork;            /* the origin inside a capture (no timing: an internal node) */
	cudaEvent_t *replay;         /* graph mode: replay_n + 1 timing events between replays */
	int replay_n;
	cudaGraphExec_t graph_step;  /* graph mode: one iteration; with per-op timing events */
	cudaGraphExec_t graph_ops;
	double init_timeout_s;       /* of the communicator's non-blocking set-up (rm_dist_init_timeout_s) */
	cublasLtHandle_t lt;
	rmx_gemm gemms[RMX_MAX_GEMMS];
	int n_gemms;
	ncclComm_t comm;
	bool have_comm, comm_aborted;
	rm_status status; /* of the first failure */
	char error[768];
} rmx_ctx;

static int rmx_fail(rmx_ctx *ctx, const char *file, int line, const char *expr, const char *msg)
{
	if (!ctx->error[0])
		snprintf(ctx->error, sizeof(ctx->error), "%s:%d: %s: %s", file, line, expr, msg);
	if (ctx->status == RM_OK)
		ctx->status = RM_IO;
	return -1;
}

#define RMX_CUDA(ctx, expr)                                                                        \
	do {                                                                                       \
		cudaError_t rmx__e = (expr);                                                       \
		if (rmx__e != cudaSuccess)                                                         \
			return rmx_fail((ctx), __FILE__, __LINE__, #expr, cudaGetErrorString(rmx__e)); \
	} while (0)

#define RMX_CUBLAS(ctx, expr)                                                                      \
	do {                                                                                       \
		cublasStatus_t rmx__s = (expr);                                                    \
		if (rmx__s != CUBLAS_STATUS_SUCCESS)                                               \
			return rmx_fail((ctx), __FILE__, __LINE__, #expr, cublasGetStatusString(rmx__s)); \
	} while (0)

/* A call on the non-blocking communicator may return ncclInProgress (its kernels are still being
 * issued in the background): rmx_nccl_settle polls until they are on the stream, or fails. */
static int rmx_nccl_settle(struct rmx_ctx *ctx, ncclResult_t r, const char *file, int line, const char *expr);

#define RMX_NCCL(ctx, expr)                                                                        \
	do {                                                                                       \
		if (rmx_nccl_settle((ctx), (expr), __FILE__, __LINE__, #expr) != 0)                \
			return -1;                                                                 \
	} while (0)

#define RMX_TRY(expr)                                                                              \
	do {                                                                                       \
		if ((expr) != 0)                                                                   \
			return -1;                                                                 \
	} while (0)

/* ---- waits and agreement (gpudist/dist.h) ------------------------------------------------- */

static int rmx_query_done(void *arg, char *msg, size_t n)
{
	rmx_ctx *ctx = (rmx_ctx *)arg;
	cudaError_t e = cudaEventQuery(ctx->done);
	if (e == cudaSuccess)
		return 1;
	if (e == cudaErrorNotReady)
		return 0;
	snprintf(msg, n, "cudaEventQuery(done): %s", cudaGetErrorString(e));
	return -1;
}

static int rmx_async_error(void *arg, char *msg, size_t n)
{
	rmx_ctx *ctx = (rmx_ctx *)arg;
	if (!ctx->have_comm)
		return 0;
	ncclResult_t r = ncclSuccess, q = ncclCommGetAsyncError(ctx->comm, &r);
	if (q != ncclSuccess)
		r = q;
	if (r == ncclSuccess || r == ncclInProgress)
		return 0;
	snprintf(msg, n, "ncclCommGetAsyncError: %s", ncclGetErrorString(r));
	return -1;
}

static void rmx_abort(void *arg)
{
	rmx_ctx *ctx = (rmx_ctx *)arg;
	if (ctx->have_comm) {
		ncclCommAbort(ctx->comm);
		ctx->have_comm = false;
		ctx->comm_aborted = true;
	}
}

/* The communicator's state as a wait's query: 1 ready, 0 still in progress, -1 failed. */
static int rmx_comm_ready(void *arg, char *msg, size_t n)
{
	rmx_ctx *ctx = (rmx_ctx *)arg;
	if (!ctx->have_comm) {
		snprintf(msg, n, "the communicator was aborted");
		return -1;
	}
	ncclResult_t r = ncclSuccess, q = ncclCommGetAsyncError(ctx->comm, &r);
	if (q != ncclSuccess)
		r = q;
	if (r == ncclSuccess)
		return 1;
	if (r == ncclInProgress)
		return 0;
	snprintf(msg, n, "ncclCommGetAsyncError: %s (%s)", ncclGetErrorString(r), ncclGetLastError(ctx->comm));
	return -1;
}

static int rmx_nccl_settle(rmx_ctx *ctx, ncclResult_t r, const char *file, int line, const char *expr)
{
	if (r == ncclSuccess)
		return 0;
	if (r != ncclInProgress)
		return rmx_fail(ctx, file, line, expr, ncclGetErrorString(r));
	rm_dist_waiter w = {rmx_comm_ready, NULL, rmx_abort, ctx, NULL};
	char msg[RM_DIST_MSG];
	if (rm_dist_wait(&w, ctx->timeout_s, expr, msg, sizeof(msg)) != 0)
		return rmx_fail(ctx, file, line, "ncclInProgress", msg);
	return 0;
}

/* Waits for the iteration's `done` event by polling it and the communicator (never a blocking
 * synchronise: a dead peer would hold it for ever); aborts the communicator on error/timeout. */
static int rmx_wait_done(rmx_ctx *ctx)
{
	rm_dist_waiter w = {rmx_query_done, rmx_async_error, rmx_abort, ctx, NULL};
	char msg[RM_DIST_MSG];
	if (rm_dist_wait(&w, ctx->timeout_s, "iteration", msg, sizeof(msg)) != 0)
		return rmx_fail(ctx, __FILE__, __LINE__, "rm_dist_wait(done)", msg);
	return 0;
}

/* Agreement on a step across ranks (rm_dist_agree): every rank returns -1 with the failing rank's
 * status and "rank R: message" when one failed. */
static int rmx_agree(rmx_ctx *ctx, bool ok)
{
	if (!ok && !ctx->error[0])
		snprintf(ctx->error, sizeof(ctx->error), "failed");
	int code = ok ? RM_OK : (ctx->status != RM_OK ? ctx->status : RM_IO);
	char msg[sizeof(ctx->error)];
	snprintf(msg, sizeof(msg), "%s", ctx->error);
	if (rm_dist_agree(&ctx->dist, ok, &code, msg, sizeof(msg)) == 0)
		return 0;
	snprintf(ctx->error, sizeof(ctx->error), "%s", msg);
	ctx->status = code != RM_OK ? (rm_status)code : RM_IO;
	return -1;
}

/* ---- kernels ------------------------------------------------------------------------------- */

/* Streams nr words from src (wrapping at er words) and nw words to dst (wrapping at ew). */
__global__ void rmx_stream(const uint4 *src, size_t nr, size_t er, uint4 *dst, size_t nw, size_t ew)
{
	size_t n = nr > nw ? nr : nw;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		uint4 v = make_uint4((unsigned)i, 0u, 0u, 0u);
		if (i < nr)
			v = src[i % er];
		if (i < nw)
			dst[i % ew] = v;
		else if (v.x == 0x9e3779b9u && v.y == 0x7f4a7c15u)
			dst[0] = v; /* never true for zeroed data; keeps the read */
	}
}

template <typename T> __device__ float rmx_f(T x);
template <> __device__ float rmx_f(float x) { return x; }
template <> __device__ float rmx_f(__half x) { return __half2float(x); }
template <> __device__ float rmx_f(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ T rmx_t(float x);
template <> __device__ float rmx_t(float x) { return x; }
template <> __device__ __half rmx_t(float x) { return __float2half(x); }
template <> __device__ __nv_bfloat16 rmx_t(float x) { return __float2bfloat16(x); }

/* Row softmax in place over rows x cols, causal mask when causal (one block per row). */
template <typename T> __global__ void rmx_softmax(T *s, int64_t rows, int64_t cols, bool causal)
{
	__shared__ float red[32];
	for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
		T *row = s + r * cols;
		int64_t limit = causal ? (r % cols) + 1 : cols;
		float mx = -INFINITY;
		for (int64_t c = threadIdx.x; c < limit; c += blockDim.x)
			mx = fmaxf(mx, rmx_f(row[c]));
		for (int o = 16; o; o >>= 1)
			mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
		if ((threadIdx.x & 31) == 0)
			red[threadIdx.x >> 5] = mx;
		__syncthreads();
		mx = red[0];
		for (int w = 1; w < (int)(blockDim.x >> 5); w++)
			mx = fmaxf(mx, red[w]);
		__syncthreads();
		float sum = 0;
		for (int64_t c = threadIdx.x; c < limit; c += blockDim.x)
			sum += __expf(rmx_f(row[c]) - mx);
		for (int o = 16; o; o >>= 1)
			sum += __shfl_xor_sync(0xffffffffu, sum, o);
		if ((threadIdx.x & 31) == 0)
			red[threadIdx.x >> 5] = sum;
		__syncthreads();
		sum = 0;
		for (int w = 0; w < (int)(blockDim.x >> 5); w++)
			sum += red[w];
		__syncthreads();
		float inv = sum > 0 ? 1.0f / sum : 0.0f;
		for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
			row[c] = rmx_t<T>(c < limit ? __expf(rmx_f(row[c]) - mx) * inv : 0.0f);
	}
}

/* Softmax backward in place: dS = P * (dP - sum(P * dP)) per row (one block per row). */
template <typename T> __global__ void rmx_softmax_bwd(const T *p, T *dp, int64_t rows, int64_t cols)
{
	__shared__ float red[32];
	for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
		const T *pr = p + r * cols;
		T *dr = dp + r * cols;
		float dot = 0;
		for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
			dot += rmx_f(pr[c]) * rmx_f(dr[c]);
		for (int o = 16; o; o >>= 1)
			dot += __shfl_xor_sync(0xffffffffu, dot, o);
		if ((threadIdx.x & 31) == 0)
			red[threadIdx.x >> 5] = dot;
		__syncthreads();
		dot = 0;
		for (int w = 0; w < (int)(blockDim.x >> 5); w++)
			dot += red[w];
		__syncthreads();
		for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
			dr[c] = rmx_t<T>(rmx_f(pr[c]) * (rmx_f(dr[c]) - dot));
	}
}

/* ---- GEMMs ----------------------------------------------------------------------------------- */

static cudaDataType_t cuda_type(rm_dtype d)
{
	switch (d) {
	case RM_DTYPE_FP32:
		return CUDA_R_32F;
	case RM_DTYPE_FP16:
		return CUDA_R_16F;
	case RM_DTYPE_FP8_E4M3:
		return CUDA_R_8F_E4M3;
	case RM_DTYPE_FP8_E5M2:
		return CUDA_R_8F_E5M2;
	default:
		return CUDA_R_16BF;
	}
}

static int rmx_layout(rmx_ctx *ctx, cublasLtMatrixLayout_t *l, cudaDataType_t t, int64_t rows, int64_t cols,
		      int64_t ld, int64_t batch, int64_t stride)
{
	RMX_CUBLAS(ctx, cublasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, ld));
	if (batch > 1) {
		int32_t b = (int32_t)batch;
		RMX_CUBLAS(ctx, cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof(b)));
		RMX_CUBLAS(ctx, cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
								 sizeof(stride)));
	}
	return 0;
}

/*
 * The prepared GEMM of a key (created on first use). The alignments of the actual pointers are
 * in the key and go into the heuristic's preferences (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*): an
 * attention chunk or a packed operand need not be 256-byte aligned, and an algorithm chosen for
 * 256 bytes may refuse it (CUBLAS_STATUS_NOT_SUPPORTED at cublasLtMatmul).
 */
static int rmx_gemm_get(rmx_ctx *ctx, const rmx_gemm_key *key, const char *op_name, rmx_gemm **out)
{
	for (int i = 0; i < ctx->n_gemms; i++)
		if (memcmp(&ctx->gemms[i].key, key, sizeof(*key)) == 0) {
			*out = &ctx->gemms[i];
			return 0;
		}
	if (ctx->n_gemms == RMX_MAX_GEMMS)
		return rmx_fail(ctx, __FILE__, __LINE__, op_name, "more distinct GEMM shapes than the runner holds");
	rmx_gemm *p = &ctx->gemms[ctx->n_gemms++];
	memset(p, 0, sizeof(*p));
	memcpy(&p->key, key, sizeof(*key)); /* padding included: keys are compared with memcmp */
	const rmx_gemm_key *g = key;
	bool f8 = g->dtype == RM_DTYPE_FP8_E4M3 || g->dtype == RM_DTYPE_FP8_E5M2;
	cudaDataType_t ta = cuda_type(g->dtype);
	cudaDataType_t tb = f8 ? CUDA_R_8F_E4M3 : ta;
	cudaDataType_t td = f8 ? CUDA_R_16BF : ta;
	cublasComputeType_t ct = g->dtype == RM_DTYPE_FP32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
	RMX_CUBLAS(ctx, cublasLtMatmulDescCreate(&p->op, ct, CUDA_R_32F));
	cublasOperation_t opa = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, opb = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
	RMX_CUBLAS(ctx, cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)));
	RMX_CUBLAS(ctx, cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)));
	/* stored shapes: A k x m when transposed else m x k; B n x k when transposed else k x n */
	RMX_TRY(rmx_layout(ctx, &p->la, ta, g->trans_a ? g->k : g->m, g->trans_a ? g->m : g->k, g->lda, g->batch,
			   g->stride_a));
	RMX_TRY(rmx_layout(ctx, &p->lb, tb, g->trans_b ? g->n : g->k, g->trans_b ? g->k : g->n, g->ldb, g->batch,
			   g->stride_b));
	RMX_TRY(rmx_layout(ctx, &p->ld, td, g->m, g->n, g->ldd, g->batch, g->stride_d));
	cublasLtMatmulPreference_t pref;
	size_t ws = RM_EXEC_WORKSPACE_BYTES;
	RMX_CUBLAS(ctx, cublasLtMatmulPreferenceCreate(&pref));
	cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
								 sizeof(ws));
	const struct {
		cublasLtMatmulPreferenceAttributes_t attr;
		uint32_t bytes;
	} aligns[] = {
		{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, g->align_a},
		{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, g->align_b},
		{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, g->align_d}, /* C is D (beta = 0, in place) */
		{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, g->align_d},
	};
	for (size_t i = 0; i < sizeof(aligns) / sizeof(aligns[0]) && st == CUBLAS_STATUS_SUCCESS; i++)
		st = cublasLtMatmulPreferenceSetAttribute(pref, aligns[i].attr, &aligns[i].bytes, sizeof(aligns[i].bytes));
	cublasLtMatmulHeuristicResult_t res;
	int found = 0;
	if (st == CUBLAS_STATUS_SUCCESS)
		st = cublasLtMatmulAlgoGetHeuristic(ctx->lt, p->op, p->la, p->lb, p->ld, p->ld, pref, 1, &res, &found);
	cublasLtMatmulPreferenceDestroy(pref);
	if (st == CUBLAS_STATUS_SUCCESS && found == 0)
		st = CUBLAS_STATUS_NOT_SUPPORTED;
	if (st != CUBLAS_STATUS_SUCCESS) {
		char what[320];
		snprintf(what, sizeof(what),
			 "%s: no cuBLASLt algorithm for %s %c%c %lld x %lld x %lld (batch %lld, operands aligned %u/%u/%u B)",
			 op_name, rm_dtype_name(g->dtype), g->trans_a ? 'T' : 'N', g->trans_b ? 'T' : 'N', (long long)g->m,
			 (long long)g->n, (long long)g->k, (long long)g->batch, g->align_a, g->align_b, g->align_d);
		ctx->status = RM_UNSUPPORTED;
		return rmx_fail(ctx, __FILE__, __LINE__, what, cublasGetStatusString(st));
	}
	p->algo = res.algo;
	*out = p;
	return 0;
}

static int rmx_gemm_launch(rmx_ctx *ctx, rmx_gemm_key *key, float alpha, const char *name, const void *a,
			   const void *b, void *d, int32_t stream)
{
	key->align_a = rm_exec_alignment((uint64_t)(uintptr_t)a);
	key->align_b = rm_exec_alignment((uint64_t)(uintptr_t)b);
	key->align_d = rm_exec_alignment((uint64_t)(uintptr_t)d);
	rmx_gemm *p;
	RMX_TRY(rmx_gemm_get(ctx, key, name, &p));
	float beta = 0.0f;
	RMX_CUBLAS(ctx, cublasLtMatmul(ctx->lt, p->op, &alpha, a, p->la, b, p->lb, &beta, d, p->ld, d, p->ld, &p->algo,
				       ctx->workspace[stream], RM_EXEC_WORKSPACE_BYTES, ctx->streams[stream]));
	return 0;
}

/* A program GEMM: TN, D[m,n] = A^T[m,k] B[k,n], A stored k x m, B k x n, D m x n (column-major). */
static int rmx_gemm_run(rmx_ctx *ctx, const rm_gemm_shape *g, const char *name, const void *a, const void *b,
			void *d, int32_t stream)
{
	rmx_gemm_key key;
	memset(&key, 0, sizeof(key)); /* compared with memcmp: no stray padding bytes */
	key.batch = g->batch, key.m = g->m, key.n = g->n, key.k = g->k, key.dtype = g->dtype;
	key.trans_a = true, key.trans_b = false;
	key.lda = g->k, key.ldb = g->k, key.ldd = g->m;
	key.stride_a = g->m * g->k, key.stride_b = g->k * g->n, key.stride_d = g->m * g->n;
	return rmx_gemm_launch(ctx, &key, 1.0f, name, a, b, d, stream);
}

/* ---- ops ------------------------------------------------------------------------------------- */

static char *addr(rmx_ctx *ctx, const rm_exec_operand *o)
{
	return ctx->base[o->region] ? ctx->base[o->region] + o->offset : NULL;
}

/*
 * Attention without a fused kernel: the steps of rm_exec_attention_steps (the same ones the CPU
 * reference in exec/attention.c runs in tests/test_exec.c), chunk by chunk over batch x heads:
 * batched cuBLASLt GEMMs on row-major [s,d] slices and [s,s] scores, and the row softmax (over
 * each query's keys, causal mask) and its backward.
 */
static int rmx_attention(rmx_ctx *ctx, int32_t i)
{
	const rm_program_op *op = &ctx->prog->ops[i];
	const rm_exec_op_plan *pl = &ctx->plan->ops[i];
	const rm_attention_cost *a = &op->cost.attention;
	cudaStream_t st = ctx->streams[op->stream];
	int64_t s = a->shape.seq, d = a->shape.head_dim, es = rm_dtype_size(a->shape.dtype);
	int64_t bh = a->shape.batch * a->shape.heads, chunk = rm_exec_attention_chunk(a);
	rm_attn_step steps[7];
	int n_steps = rm_exec_attention_steps(s, d, a->backward, steps);
	/* the operands of each buffer (exec.h: Q, K, V, then O, S / dO, dQ, dK, dV, S, dP) */
	int slot[RM_ATTN_BUF_COUNT];
	for (int b = 0; b < RM_ATTN_BUF_COUNT; b++)
		slot[b] = -1;
	slot[RM_ATTN_Q] = 0, slot[RM_ATTN_K] = 1, slot[RM_ATTN_V] = 2;
	if (a->backward)
		slot[RM_ATTN_DO] = 3, slot[RM_ATTN_DQ] = 4, slot[RM_ATTN_DK] = 5, slot[RM_ATTN_DV] = 6, slot[RM_ATTN_P] = 7,
		slot[RM_ATTN_DP] = 8;
	else
		slot[RM_ATTN_O] = 3, slot[RM_ATTN_P] = 4;
	for (int64_t c0 = 0; c0 < bh; c0 += chunk) {
		int64_t nb = bh - c0 < chunk ? bh - c0 : chunk;
		char *ptr[RM_ATTN_BUF_COUNT];
		for (int b = 0; b < RM_ATTN_BUF_COUNT; b++) {
			ptr[b] = slot[b] >= 0 ? addr(ctx, &pl->operand[slot[b]]) : NULL;
			/* the [s,d] tensors hold every slice; the scores one chunk */
			if (ptr[b] && b != RM_ATTN_P && b != RM_ATTN_DP)
				ptr[b] += c0 * s * d * es;
		}
		int blocks = (int)(nb * s < 65535 ? nb * s : 65535);
		for (int k = 0; k < n_steps; k++) {
			const rm_attn_step *t = &steps[k];
			if (t->kind == RM_ATTN_GEMM) {
				rmx_gemm_key key;
				memset(&key, 0, sizeof(key));
				key.batch = nb, key.m = t->m, key.n = t->n, key.k = t->k, key.dtype = a->shape.dtype;
				key.trans_a = t->trans_a, key.trans_b = t->trans_b;
				key.lda = t->lda, key.ldb = t->ldb, key.ldd = t->ldd;
				key.stride_a = t->stride_a, key.stride_b = t->stride_b, key.stride_d = t->stride_d;
				RMX_TRY(rmx_gemm_launch(ctx, &key, (float)t->alpha, op->name, ptr[t->a], ptr[t->b], ptr[t->d],
							op->stream));
				continue;
			}
			char *x = ptr[t->d], *pp = ptr[t->a];
			bool softmax = t->kind == RM_ATTN_SOFTMAX;
			if (a->shape.dtype == RM_DTYPE_FP32) {
				if (softmax)
					rmx_softmax<float><<<blocks, 256, 0, st>>>((float *)x, nb * s, s, a->shape.causal);
				else
					rmx_softmax_bwd<float><<<blocks, 256, 0, st>>>((const float *)pp, (float *)x, nb * s, s);
			} else if (a->shape.dtype == RM_DTYPE_FP16) {
				if (softmax)
					rmx_softmax<__half><<<blocks, 256, 0, st>>>((__half *)x, nb * s, s, a->shape.causal);
				else
					rmx_softmax_bwd<__half><<<blocks, 256, 0, st>>>((const __half *)pp, (__half *)x, nb * s, s);
			} else {
				if (softmax)
					rmx_softmax<__nv_bfloat16><<<blocks, 256, 0, st>>>((__nv_bfloat16 *)x, nb * s, s,
											   a->shape.causal);
				else
					rmx_softmax_bwd<__nv_bfloat16><<<blocks, 256, 0, st>>>(
						(const __nv_bfloat16 *)pp, (__nv_bfloat16 *)x, nb * s, s);
			}
			RMX_CUDA(ctx, cudaGetLastError());
		}
	}
	return 0;
}

static ncclDataType_t nccl_type(int64_t bytes, size_t *count)
{
	if (bytes % 2 == 0) {
		*count = (size_t)(bytes / 2);
		return ncclBfloat16;
	}
	*count = (size_t)bytes;
	return ncclInt8;
}

static int rmx_collective(rmx_ctx *ctx, int32_t i)
{
	const rm_program_op *op = &ctx->prog->ops[i];
	const rm_exec_op_plan *pl = &ctx->plan->ops[i];
	const rm_collective_cost *c = &op->cost.collective;
	if (c->group_size == 1 && ctx->world > 1)
		return 0; /* a trivial collective: XLA drops it */
	cudaStream_t st = ctx->streams[op->stream];
	const void *send = addr(ctx, &pl->operand[0]);
	void *recv = addr(ctx, &pl->operand[1]);
	size_t count;
	ncclDataType_t t;
	int64_t g = ctx->world;
	switch (c->op) {
	case RM_COLL_ALL_GATHER:
		t = nccl_type(c->bytes / g, &count);
		RMX_NCCL(ctx, ncclAllGather(send, recv, count, t, ctx->comm, st));
		break;
	case RM_COLL_REDUCE_SCATTER:
		t = nccl_type(c->bytes / g, &count);
		RMX_NCCL(ctx, ncclReduceScatter(send, recv, count, t == ncclInt8 ? ncclUint8 : t, ncclSum, ctx->comm, st));
		break;
	case RM_COLL_ALL_REDUCE:
		t = nccl_type(c->bytes, &count);
		RMX_NCCL(ctx, ncclAllReduce(send, recv, count, t == ncclInt8 ? ncclUint8 : t, ncclSum, ctx->comm, st));
		break;
	case RM_COLL_ALL_TO_ALL: {
		t = nccl_type(c->bytes / g, &count);
		int64_t per = c->bytes / g;
		RMX_NCCL(ctx, ncclGroupStart());
		for (int p = 0; p < ctx->world; p++) {
			RMX_NCCL(ctx, ncclSend((const char *)send + p * per, count, t, p, ctx->comm, st));
			RMX_NCCL(ctx, ncclRecv((char *)recv + p * per, count, t, p, ctx->comm, st));
		}
		RMX_NCCL(ctx, ncclGroupEnd());
		break;
	}
	default: { /* permute: to the next rank, from the previous */
		t = nccl_type(c->bytes, &count);
		int to = (ctx->rank + 1) % ctx->world, from = (ctx->rank + ctx->world - 1) % ctx->world;
		RMX_NCCL(ctx, ncclGroupStart());
		RMX_NCCL(ctx, ncclSend(send, count, t, to, ctx->comm, st));
		RMX_NCCL(ctx, ncclRecv(recv, count, t, from, ctx->comm, st));
		RMX_NCCL(ctx, ncclGroupEnd());
		break;
	}
	}
	return 0;
}

/* Attention planned fused: cuDNN's SDPA graph prepared by rmx_setup_attention, on the op's
 * operands (rm_attn_fused_operand order) and its stream's workspace. */
static int rmx_fused_attention(rmx_ctx *ctx, int32_t i)
{
	const rm_program_op *op = &ctx->prog->ops[i];
	const rm_exec_op_plan *pl = &ctx->plan->ops[i];
	void *ptr[RM_ATTN_F_COUNT];
	memset(ptr, 0, sizeof(ptr));
	for (int k = 0; k < pl->n_operands && k < RM_ATTN_F_COUNT; k++)
		ptr[k] = addr(ctx, &pl->operand[k]);
	char msg[512];
	if (rmx_sdpa_run(ctx->sdpa, i, &op->cost.attention, ctx->streams[op->stream], ptr, ctx->workspace[op->stream],
			 msg, sizeof(msg)) != 0)
		return rmx_fail(ctx, __FILE__, __LINE__, op->name, msg);
	return 0;
}

static int rmx_op(rmx_ctx *ctx, int32_t i)
{
	const rm_program_op *op = &ctx->prog->ops[i];
	const rm_exec_op_plan *pl = &ctx->plan->ops[i];
	cudaStream_t st = ctx->streams[op->stream];
	switch (op->cost.kind) {
	case RM_COST_GEMM:
		return rmx_gemm_run(ctx, &op->cost.gemm, op->name, addr(ctx, &pl->operand[0]), addr(ctx, &pl->operand[1]),
				    addr(ctx, &pl->operand[2]), op->stream);
	case RM_COST_ATTENTION:
		return pl->fused ? rmx_fused_attention(ctx, i) : rmx_attention(ctx, i);
	case RM_COST_ELEMENTWISE: {
		const rm_exec_operand *r = &pl->operand[0], *w = &pl->operand[1];
		size_t nr = (size_t)(r->bytes / 16), nw = (size_t)(w->bytes / 16);
		size_t er = (size_t)(r->extent / 16), ew = (size_t)(w->extent / 16);
		if (er == 0)
			nr = 0, er = 1;
		if (ew == 0)
			nw = 0, ew = 1;
		size_t n = nr > nw ? nr : nw;
		if (n == 0)
			return 0;
		size_t blocks = (n + 255) / 256, cap = (size_t)ctx->sm_count * 8;
		rmx_stream<<<(unsigned)(blocks < cap ? blocks : cap), 256, 0, st>>>(
			(const uint4 *)addr(ctx, r), nr, er, (uint4 *)addr(ctx, w), nw, ew);
		RMX_CUDA(ctx, cudaGetLastError());
		return 0;
	}
	case RM_COST_COPY: {
		if (op->cost.copy.bytes <= 0)
			return 0;
		cudaMemcpyKind kind = op->cost.copy.dir == RM_COPY_H2D	 ? cudaMemcpyHostToDevice
				      : op->cost.copy.dir == RM_COPY_D2H ? cudaMemcpyDeviceToHost
									 : cudaMemcpyDeviceToDevice;
		RMX_CUDA(ctx, cudaMemcpyAsync(addr(ctx, &pl->operand[1]), addr(ctx, &pl->operand[0]),
					      (size_t)op->cost.copy.bytes, kind, st));
		return 0;
	}
	case RM_COST_COLLECTIVE:
		return rmx_collective(ctx, i);
	default:
		return 0;
	}
}

/*
 * Enqueues one iteration: the origin on stream 0 that every other stream waits for, then every op
 * in the plan's launch order (rm_exec_launch_order: never a wait before its record) with its
 * waits, its records and, when op_events, its two timing events, then the join of every stream
 * back into stream 0. Eager (!capture): the origin is the timing event `origin`, and `done` is
 * recorded at the end. Inside a capture on stream 0 (capture): the origin is `fork`, whose wait
 * draws the other streams into the capture; program events become the graph's internal edges;
 * the timing events are recorded with cudaEventRecordExternal, so each replay of the graph
 * records them as event-record nodes (their timestamps are read after the replay, as eager ones).
 */
static int rmx_enqueue(rmx_ctx *ctx, bool op_events, bool capture)
{
	const rm_program *prog = ctx->prog;
	cudaEvent_t origin = capture ? ctx->fork : ctx->origin;
	RMX_CUDA(ctx, cudaEventRecord(origin, ctx->streams[0]));
	for (int32_t s = 1; s < prog->n_streams; s++)
		RMX_CUDA(ctx, cudaStreamWaitEvent(ctx->streams[s], origin, 0));
	unsigned int ext = capture ? cudaEventRecordExternal : cudaEventRecordDefault;
	for (int32_t k = 0; k < prog->n_ops; k++) {
		int32_t i = ctx->plan->launch_order[k];
		const rm_program_op *op = &prog->ops[i];
		cudaStream_t st = ctx->streams[op->stream];
		const int32_t *w = rm_program_refs(prog, op->waits);
		for (uint32_t q = 0; q < op->waits.count; q++)
			RMX_CUDA(ctx, cudaStreamWaitEvent(st, ctx->events[w[q]], 0));
		if (op_events)
			RMX_CUDA(ctx, cudaEventRecordWithFlags(ctx->op_start[i], st, ext));
		RMX_TRY(rmx_op(ctx, i));
		if (op_events)
			RMX_CUDA(ctx, cudaEventRecordWithFlags(ctx->op_end[i], st, ext));
		const int32_t *r = rm_program_refs(prog, op->records);
		for (uint32_t q = 0; q < op->records.count; q++)
			RMX_CUDA(ctx, cudaEventRecord(ctx->events[r[q]], st));
	}
	for (int32_t s = 1; s < prog->n_streams; s++) {
		RMX_CUDA(ctx, cudaEventRecord(ctx->tails[s], ctx->streams[s]));
		RMX_CUDA(ctx, cudaStreamWaitEvent(ctx->streams[0], ctx->tails[s], 0));
	}
	if (!capture)
		RMX_CUDA(ctx, cudaEventRecord(ctx->done, ctx->streams[0]));
	return 0;
}

/* One eager iteration: enqueued, then waited for (polled with the timeout). */
static int rmx_iteration(rmx_ctx *ctx, bool op_events)
{
	RMX_TRY(rmx_enqueue(ctx, op_events, false));
	return rmx_wait_done(ctx);
}

/*
 * Captures one iteration (rmx_enqueue inside cudaStreamBeginCapture on stream 0) and instantiates it with the streams' priorities on its kernel nodes
 * (cudaGraphInstantiateFlagUseNodePriority), then uploads it. Runs only after eager iterations:
 * every cuBLASLt descriptor, cuDNN variant pack, workspace and NCCL connection exists by then,
 * so nothing is created or allocated inside the capture. Thread-local capture mode: a call of
 * this thread that is unsafe during capture (cudaMalloc included) fails the capture instead of
 * running, while NCCL's proxy thread may still set up what it needs (nccl-tests captures in the
 * same mode for that reason). The capture is always ended, also after a failure inside it (which
 * ends the forked streams' capture with it).
 */
static int rmx_capture(rmx_ctx *ctx, bool op_events, cudaGraphExec_t *exec)
{
	cudaGraph_t g = NULL;
	RMX_CUDA(ctx, cudaStreamBeginCapture(ctx->streams[0], cudaStreamCaptureModeThreadLocal));
	int rc = rmx_enqueue(ctx, op_events, true);
	cudaError_t e = cudaStreamEndCapture(ctx->streams[0], &g);
	if (rc != 0 || e != cudaSuccess) {
		if (g)
			cudaGraphDestroy(g);
		(void)cudaGetLastError(); /* the capture's error is reported below, not left sticky */
		if (rc != 0)
			return -1;
		return rmx_fail(ctx, __FILE__, __LINE__, "cudaStreamEndCapture(streams[0], &graph)", cudaGetErrorString(e));
	}
	e = cudaGraphInstantiateWithFlags(exec, g, cudaGraphInstantiateFlagUseNodePriority);
	cudaGraphDestroy(g);
	if (e != cudaSuccess) {
		*exec = NULL;
		return rmx_fail(ctx, __FILE__, __LINE__, "cudaGraphInstantiateWithFlags(UseNodePriority)",
				cudaGetErrorString(e));
	}
	RMX_CUDA(ctx, cudaGraphUpload(*exec, ctx->streams[0]));
	RMX_CUDA(ctx, cudaEventRecord(ctx->done, ctx->streams[0]));
	return rmx_wait_done(ctx);
}

static int rmx_elapsed(rmx_ctx *ctx, cudaEvent_t a, cudaEvent_t b, const char *what, double *s);

static double host_now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/*
 * The graph's step: one untimed replay, then `iters` replays launched back to back on stream 0
 * with a timing event between consecutive ones (replay[0] is queued behind the untimed replay, so
 * the GPU does not wait for the host at the first timed one). steps[k] = replay[k] -> replay[k+1]:
 * the replay's time on the GPU as long as the host launches faster than the GPU runs a replay;
 * *launch_s: the host's mean seconds per cudaGraphLaunch, which says whether it did. One polled
 * wait for all of them (the timeout covers the whole batch).
 */
static int rmx_graph_steps(rmx_ctx *ctx, int iters, double *steps, double *launch_s)
{
	cudaStream_t s0 = ctx->streams[0];
	RMX_CUDA(ctx, cudaGraphLaunch(ctx->graph_step, s0));
	RMX_CUDA(ctx, cudaEventRecord(ctx->replay[0], s0));
	double host = 0;
	for (int k = 0; k < iters; k++) {
		double t0 = host_now_s();
		RMX_CUDA(ctx, cudaGraphLaunch(ctx->graph_step, s0));
		host += host_now_s() - t0;
		RMX_CUDA(ctx, cudaEventRecord(ctx->replay[k + 1], s0));
	}
	RMX_CUDA(ctx, cudaEventRecord(ctx->done, s0));
	RMX_TRY(rmx_wait_done(ctx));
	*launch_s = host / iters;
	for (int k = 0; k < iters; k++)
		RMX_TRY(rmx_elapsed(ctx, ctx->replay[k], ctx->replay[k + 1], "cudaEventElapsedTime(replay k, k + 1)",
				    &steps[k]));
	return 0;
}

/* One replay of the graph with per-op timing events: origin, the replay, done, polled. */
static int rmx_graph_ops_replay(rmx_ctx *ctx)
{
	cudaStream_t s0 = ctx->streams[0];
	RMX_CUDA(ctx, cudaEventRecord(ctx->origin, s0));
	RMX_CUDA(ctx, cudaGraphLaunch(ctx->graph_ops, s0));
	RMX_CUDA(ctx, cudaEventRecord(ctx->done, s0));
	return rmx_wait_done(ctx);
}

/* ---- setup and teardown ------------------------------------------------------------------- */

/*
 * The world communicator: rank 0's ncclGetUniqueId and its status reach every rank in one
 * broadcast (a failure there ends every rank, not only rank 0), then a non-blocking
 * ncclCommInitRankConfig polled with ncclCommGetAsyncError until ready (past init_timeout_s:
 * ncclCommAbort, "communicator init: no progress in T s"), then an agreement, so that nobody
 * enqueues a collective that a peer without a communicator never joins. The communicator stays
 * non-blocking: its calls may return ncclInProgress, which RMX_NCCL settles (rmx_nccl_settle).
 */
static int rmx_setup_comm(rmx_ctx *ctx)
{
	ncclUniqueId id;
	memset(&id, 0, sizeof(id));
	bool ok = true;
	if (ctx->rank == 0) {
		ncclResult_t r = ncclGetUniqueId(&id);
		if (r != ncclSuccess)
			ok = rmx_fail(ctx, __FILE__, __LINE__, "ncclGetUniqueId(&id)", ncclGetErrorString(r)) == 0;
	}
	char msg[sizeof(ctx->error)];
	snprintf(msg, sizeof(msg), "%s", ctx->error);
	if (rm_dist_bcast_status(&ctx->dist, ok, &id, sizeof(id), msg, sizeof(msg)) != 0) {
		snprintf(ctx->error, sizeof(ctx->error), "%s", msg);
		if (ctx->status == RM_OK)
			ctx->status = RM_IO;
		return -1;
	}
	/* non-blocking: the call returns at once (ncclInProgress) and the set-up is polled, so a peer
	 * that never joins ends in a timeout and ncclCommAbort instead of a hang in the bootstrap */
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	cfg.blocking = 0;
	ncclResult_t r = ncclCommInitRankConfig(&ctx->comm, ctx->world, id, ctx->rank, &cfg);
	ok = r == ncclSuccess || r == ncclInProgress;
	if (!ok) {
		rmx_fail(ctx, __FILE__, __LINE__, "ncclCommInitRankConfig(&ctx->comm, ctx->world, id, ctx->rank, blocking 0)",
			 ncclGetErrorString(r));
	} else {
		ctx->have_comm = true;
		rm_dist_waiter w = {rmx_comm_ready, NULL, rmx_abort, ctx, "REMORA_NCCL_INIT_TIMEOUT_S or --init-timeout"};
		char why[RM_DIST_MSG];
		if (rm_dist_wait(&w, ctx->init_timeout_s, "communicator init", why, sizeof(why)) != 0) {
			rmx_fail(ctx, __FILE__, __LINE__, "ncclCommInitRankConfig", why);
			ok = false;
		}
	}
	return rmx_agree(ctx, ok);
}

/*
 * Before the plan's checks and allocations: every attention op planned fused gets its cuDNN
 * graph built and finalized, and its engine workspace must fit the stream's cuBLASLt workspace
 * (RM_EXEC_WORKSPACE_BYTES). On the first failure (cuDNN not in this build, no cuDNN engine for
 * the graph on this GPU or version, more workspace) one warning names it, and the run takes the
 * unfused plan of the same program, so a GPU without a working cuDNN still runs. Only an
 * unfused plan that cannot be made fails the set-up.
 */
static int rmx_setup_attention(rmx_ctx *ctx, rm_exec_measurement *m)
{
	const rm_program *prog = ctx->prog;
	char msg[512] = "";
	bool ok = true;
	if (ctx->plan->attention_fused > 0) {
		ctx->sdpa = rmx_sdpa_create(prog->n_ops, msg, sizeof(msg));
		ok = ctx->sdpa != NULL;
		for (int32_t i = 0; ok && i < prog->n_ops; i++) {
			if (!ctx->plan->ops[i].fused)
				continue;
			int64_t ws = 0;
			ok = rmx_sdpa_prepare(ctx->sdpa, &prog->ops[i].cost.attention, &ws, msg, sizeof(msg)) == 0;
			if (ok && ws > RM_EXEC_WORKSPACE_BYTES) {
				snprintf(msg, sizeof(msg), "ops[%d] '%s': cuDNN's plan needs %lld B of workspace, more than "
					 "the %d B the plan holds per stream", (int)i, prog->ops[i].name, (long long)ws,
					 (int)RM_EXEC_WORKSPACE_BYTES);
				ok = false;
			} else if (!ok) {
				char tmp[sizeof(msg)];
				snprintf(tmp, sizeof(tmp), "%s", msg);
				snprintf(msg, sizeof(msg), "ops[%d] '%s': %s", (int)i, prog->ops[i].name, tmp);
			}
		}
	}
	if (!ok) {
		char ver[32];
		rmx_sdpa_version(ver, sizeof(ver));
		fprintf(stderr, "remora: warning: rank %d: fused attention through cuDNN %s failed (%s); running "
				"attention unfused (cuBLASLt GEMMs + softmax kernels, as --attention unfused)\n",
			ctx->rank, ver, msg);
		rmx_sdpa_destroy(ctx->sdpa);
		ctx->sdpa = NULL;
		rm_error e;
		rm_error_clear(&e);
		ctx->own_plan = rm_exec_plan_create(prog, NULL, RM_EXEC_ATTN_UNFUSED, &e);
		if (!ctx->own_plan) {
			ctx->status = e.status != RM_OK ? e.status : RM_IO;
			snprintf(ctx->error, sizeof(ctx->error), "the unfused plan: %.*s", (int)sizeof(ctx->error) - 32, e.msg);
			return -1;
		}
		ctx->plan = ctx->own_plan;
	}
	const rm_exec_plan *p = ctx->plan;
	snprintf(m->attention_kernel, sizeof(m->attention_kernel), "%s",
		 p->attention_fused && p->attention_unfused ? "mixed"
		 : p->attention_fused			    ? RM_EXEC_ATTN_FUSED_KERNEL
							    : RM_EXEC_ATTN_UNFUSED_KERNEL);
	return 0;
}

/*
 * This rank's part of the set-up, nothing collective: the device, the plan's checks against its
 * free memory, the allocations, streams, events and cuBLASLt. *free0: free device memory before.
 */
static int rmx_setup(rmx_ctx *ctx, const rm_exec_run_opts *opt, rm_exec_measurement *m, rm_error *err,
		     size_t *free0_out)
{
	const rm_program *prog = ctx->prog;
	int n_dev = 0;
	cudaError_t e = cudaGetDeviceCount(&n_dev);
	if (e != cudaSuccess || n_dev == 0) {
		ctx->status = RM_UNSUPPORTED;
		snprintf(ctx->error, sizeof(ctx->error), "no CUDA GPU is visible (%s); `remora exec --dry-run` needs none",
			 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
		return -1;
	}
	ctx->device = rm_dist_device(&ctx->dist, n_dev); /* the local rank (gpudist/dist.h) */
	RMX_CUDA(ctx, cudaSetDevice(ctx->device));
	cudaDeviceProp prop;
	RMX_CUDA(ctx, cudaGetDeviceProperties(&prop, ctx->device));
	ctx->sm_count = prop.multiProcessorCount;
	snprintf(m->device, sizeof(m->device), "%.*s", (int)sizeof(m->device) - 1, prop.name);
	int v = 0;
	cudaDriverGetVersion(&v);
	snprintf(m->driver, sizeof(m->driver), "%d.%d", v / 1000, v % 1000 / 10);
	cudaRuntimeGetVersion(&v);
	snprintf(m->cuda, sizeof(m->cuda), "%d.%d", v / 1000, v % 1000 / 10);
	ncclGetVersion(&v);
	snprintf(m->nccl, sizeof(m->nccl), "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
	m->world = ctx->world;
	RMX_TRY(rmx_setup_attention(ctx, m)); /* may switch ctx->plan to the unfused one */

	/* the checks, with what this GPU has free and this launch's world, before any allocation */
	size_t free0 = 0, total = 0;
	RMX_CUDA(ctx, cudaMemGetInfo(&free0, &total));
	*free0_out = free0;
	rm_exec_limits lim = {opt->hw, (int64_t)free0, ctx->world};
	rm_status st = rm_exec_plan_check(ctx->plan, &lim, err);
	if (st != RM_OK) {
		ctx->status = st;
		snprintf(ctx->error, sizeof(ctx->error), "%.*s", (int)sizeof(ctx->error) - 1, err->msg);
		return -1;
	}

	const int64_t *rb = ctx->plan->region_bytes;
	for (int r = 0; r < RM_EXEC_REGION_COUNT; r++) {
		if (rb[r] <= 0)
			continue;
		if (r == RM_EXEC_HOST) {
			RMX_CUDA(ctx, cudaHostAlloc((void **)&ctx->base[r], (size_t)rb[r], cudaHostAllocDefault));
			memset(ctx->base[r], 0, (size_t)rb[r]);
		} else {
			RMX_CUDA(ctx, cudaMalloc((void **)&ctx->base[r], (size_t)rb[r]));
			RMX_CUDA(ctx, cudaMemset(ctx->base[r], 0, (size_t)rb[r]));
		}
	}
	int lo = 0, hi = 0;
	RMX_CUDA(ctx, cudaDeviceGetStreamPriorityRange(&lo, &hi)); /* least, greatest (hi <= lo) */
	ctx->streams = (cudaStream_t *)calloc((size_t)prog->n_streams + 1, sizeof(cudaStream_t));
	ctx->workspace = (void **)calloc((size_t)prog->n_streams + 1, sizeof(void *));
	for (int32_t s = 0; s < prog->n_streams; s++) {
		int p = prog->streams[s].priority;
		p = p < hi ? hi : p > lo ? lo : p;
		RMX_CUDA(ctx, cudaStreamCreateWithPriority(&ctx->streams[s], cudaStreamNonBlocking, p));
	}
	for (int32_t i = 0; i < prog->n_ops; i++) {
		rm_cost_kind k = prog->ops[i].cost.kind;
		int32_t s = prog->ops[i].stream;
		if ((k == RM_COST_GEMM || k == RM_COST_ATTENTION) && !ctx->workspace[s])
			RMX_CUDA(ctx, cudaMalloc(&ctx->workspace[s], RM_EXEC_WORKSPACE_BYTES));
	}
	ctx->events = (cudaEvent_t *)calloc((size_t)prog->n_events + 1, sizeof(cudaEvent_t));
	for (int32_t e2 = 0; e2 < prog->n_events; e2++)
		RMX_CUDA(ctx, cudaEventCreateWithFlags(&ctx->events[e2], cudaEventDisableTiming));
	ctx->op_start = (cudaEvent_t *)calloc((size_t)prog->n_ops + 1, sizeof(cudaEvent_t));
	ctx->op_end = (cudaEvent_t *)calloc((size_t)prog->n_ops + 1, sizeof(cudaEvent_t));
	for (int32_t i = 0; i < prog->n_ops; i++) {
		RMX_CUDA(ctx, cudaEventCreate(&ctx->op_start[i]));
		RMX_CUDA(ctx, cudaEventCreate(&ctx->op_end[i]));
	}
	RMX_CUDA(ctx, cudaEventCreate(&ctx->origin));
	RMX_CUDA(ctx, cudaEventCreate(&ctx->done));
	RMX_CUDA(ctx, cudaEventCreateWithFlags(&ctx->fork, cudaEventDisableTiming));
	if (opt->graph) {
		int n = (opt->iterations > 0 ? opt->iterations : 1) + 1;
		ctx->replay = (cudaEvent_t *)calloc((size_t)n, sizeof(cudaEvent_t));
		ctx->replay_n = n - 1;
		for (int k = 0; k < n; k++)
			RMX_CUDA(ctx, cudaEventCreate(&ctx->replay[k]));
	}
	ctx->tails = (cudaEvent_t *)calloc((size_t)prog->n_streams + 1, sizeof(cudaEvent_t));
	for (int32_t s = 0; s < prog->n_streams; s++)
		RMX_CUDA(ctx, cudaEventCreateWithFlags(&ctx->tails[s], cudaEventDisableTiming));
	RMX_CUBLAS(ctx, cublasLtCreate(&ctx->lt));
	return 0;
}

/* What the communicator and the set-up used on this GPU (after rmx_setup_comm). */
static int rmx_setup_measure_memory(rmx_ctx *ctx, rm_exec_measurement *m, size_t free0)
{
	size_t free1 = 0, total = 0;
	m->device_bytes = ctx->plan->device_bytes;
	RMX_CUDA(ctx, cudaMemGetInfo(&free1, &total));
	m->device_used_bytes = (int64_t)free0 - (int64_t)free1;
	return 0;
}

static void rmx_teardown(rmx_ctx *ctx)
{
	const rm_program *prog = ctx->prog;
	if (ctx->have_comm) {
		if (ctx->status != RM_OK || ctx->comm_aborted)
			ncclCommAbort(ctx->comm); /* peers may wait in a collective that never comes */
		else
			ncclCommDestroy(ctx->comm);
	}
	for (int i = 0; i < ctx->n_gemms; i++) {
		rmx_gemm *g = &ctx->gemms[i];
		if (g->la)
			cublasLtMatrixLayoutDestroy(g->la);
		if (g->lb)
			cublasLtMatrixLayoutDestroy(g->lb);
		if (g->ld)
			cublasLtMatrixLayoutDestroy(g->ld);
		if (g->op)
			cublasLtMatmulDescDestroy(g->op);
	}
	if (ctx->lt)
		cublasLtDestroy(ctx->lt);
	rmx_sdpa_destroy(ctx->sdpa);
	if (ctx->graph_step)
		cudaGraphExecDestroy(ctx->graph_step);
	if (ctx->graph_ops)
		cudaGraphExecDestroy(ctx->graph_ops);
	for (int k = 0; ctx->replay && k <= ctx->replay_n; k++)
		if (ctx->replay[k])
			cudaEventDestroy(ctx->replay[k]);
	free(ctx->replay);
	if (ctx->fork)
		cudaEventDestroy(ctx->fork);
	if (ctx->origin)
		cudaEventDestroy(ctx->origin);
	if (ctx->done)
		cudaEventDestroy(ctx->done);
	for (int32_t s = 0; ctx->tails && s < prog->n_streams; s++)
		if (ctx->tails[s])
			cudaEventDestroy(ctx->tails[s]);
	free(ctx->tails);
	for (int32_t i = 0; ctx->op_start && i < prog->n_ops; i++) {
		if (ctx->op_start[i])
			cudaEventDestroy(ctx->op_start[i]);
		if (ctx->op_end[i])
			cudaEventDestroy(ctx->op_end[i]);
	}
	for (int32_t e = 0; ctx->events && e < prog->n_events; e++)
		if (ctx->events[e])
			cudaEventDestroy(ctx->events[e]);
	for (int32_t s = 0; ctx->streams && s < prog->n_streams; s++) {
		if (ctx->workspace && ctx->workspace[s])
			cudaFree(ctx->workspace[s]);
		if (ctx->streams[s])
			cudaStreamDestroy(ctx->streams[s]);
	}
	free(ctx->op_start);
	free(ctx->op_end);
	free(ctx->events);
	free(ctx->streams);
	free(ctx->workspace);
	rm_exec_plan_destroy(ctx->own_plan);
	for (int r = 0; r < RM_EXEC_REGION_COUNT; r++) {
		if (!ctx->base[r])
			continue;
		if (r == RM_EXEC_HOST)
			cudaFreeHost(ctx->base[r]);
		else
			cudaFree(ctx->base[r]);
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The elapsed seconds between two timing events, or -1 with the failure recorded. */
static int rmx_elapsed(rmx_ctx *ctx, cudaEvent_t a, cudaEvent_t b, const char *what, double *s)
{
	float ms = 0;
	cudaError_t e = cudaEventElapsedTime(&ms, a, b);
	if (e != cudaSuccess)
		return rmx_fail(ctx, __FILE__, __LINE__, what, cudaGetErrorString(e));
	*s = ms * 1e-3;
	return 0;
}

/* One timed iteration with per-op events: fills the op times (the trace from 0) and the span. */
static int rmx_op_times(rmx_ctx *ctx, rm_exec_measurement *m, int iters, double *span)
{
	const rm_program *prog = ctx->prog;
	RMX_TRY(rmx_iteration(ctx, true));
	double first = 1e30, last = 0;
	for (int32_t i = 0; i < prog->n_ops; i++) {
		double s = 0, en = 0;
		RMX_TRY(rmx_elapsed(ctx, ctx->origin, ctx->op_start[i], "cudaEventElapsedTime(origin, op start)", &s));
		RMX_TRY(rmx_elapsed(ctx, ctx->origin, ctx->op_end[i], "cudaEventElapsedTime(origin, op end)", &en));
		m->op_start_s[i] = s;
		m->op_end_s[i] = en;
		m->op_mean_s[i] += (en - s) / iters;
		first = s < first ? s : first;
		last = en > last ? en : last;
	}
	*span = prog->n_ops ? last - first : 0;
	for (int32_t i = 0; i < prog->n_ops; i++) { /* the last iteration is traced from 0 */
		m->op_start_s[i] -= first;
		m->op_end_s[i] -= first;
	}
	return 0;
}

/*
 * The per-op durations of the last graph replay with per-op events, added to means (/ iters), and
 * the span from the first op's start to the last op's end. Not fatal: a failure (an
 * event-record node whose timestamp the driver does not give) is returned in why and the graph's
 * per-op times are left out, its step kept. Nothing recorded in ctx->error.
 */
static int rmx_graph_op_times(rmx_ctx *ctx, double *means, int iters, double *span, char *why, size_t n)
{
	const rm_program *prog = ctx->prog;
	double first = 1e30, last = 0;
	for (int32_t i = 0; i < prog->n_ops; i++) {
		float a = 0, b = 0;
		cudaError_t e = cudaEventElapsedTime(&a, ctx->origin, ctx->op_start[i]);
		if (e == cudaSuccess)
			e = cudaEventElapsedTime(&b, ctx->origin, ctx->op_end[i]);
		if (e != cudaSuccess) {
			(void)cudaGetLastError();
			snprintf(why, n, "cudaEventElapsedTime on the graph's event-record nodes of ops[%d] '%s': %s", (int)i,
				 prog->ops[i].name, cudaGetErrorString(e));
			return -1;
		}
		double s0 = a * 1e-3, s1 = b * 1e-3;
		means[i] += (s1 - s0) / iters;
		first = s0 < first ? s0 : first;
		last = s1 > last ? s1 : last;
	}
	*span = prog->n_ops ? last - first : 0;
	return 0;
}

/*
 * Graph mode, after the eager measurement (which also warmed up every descriptor, plan, variant
 * pack and NCCL connection): the iteration captured twice, without and with per-op timing events
 * (rmx_capture), agreed across ranks; the step from back-to-back replays (rmx_graph_steps); then
 * `iters` replays of the per-op capture, each polled and agreed (they hold the collectives), whose
 * event-record nodes give per-op means. Every rank replays the same graphs the same number of
 * times, whatever its own timing reads said.
 */
static int rmx_measure_graph(rmx_ctx *ctx, int iters, rm_exec_measurement *m)
{
	RMX_TRY(rmx_agree(ctx, rmx_capture(ctx, false, &ctx->graph_step) == 0 &&
				       rmx_capture(ctx, true, &ctx->graph_ops) == 0));
	double *steps = (double *)calloc((size_t)iters, sizeof(double));
	double *spans = (double *)calloc((size_t)iters, sizeof(double));
	double *means = (double *)calloc((size_t)ctx->prog->n_ops + 1, sizeof(double));
	double launch = 0;
	char why[RM_DIST_MSG] = "";
	bool times_ok = true;
	int rc = -1;
	if (rmx_agree(ctx, rmx_graph_steps(ctx, iters, steps, &launch) == 0) != 0)
		goto out;
	m->graph_step_s = median(steps, iters);
	m->graph_launch_host_s = launch;
	for (int it = 0; it < iters; it++) {
		if (rmx_agree(ctx, rmx_graph_ops_replay(ctx) == 0) != 0)
			goto out;
		if (times_ok)
			times_ok = rmx_graph_op_times(ctx, means, iters, &spans[it], why, sizeof(why)) == 0;
	}
	if (times_ok) {
		m->graph_step_op_events_s = median(spans, iters);
		m->graph_op_mean_s = means;
		means = NULL;
	} else if (ctx->rank == 0) {
		fprintf(stderr, "remora: warning: graph mode: no per-op times (%s); the graph's step is measured\n", why);
	}
	rc = 0;
out:
	free(steps);
	free(spans);
	free(means);
	return rc;
}

/*
 * Warm-up, then `iterations` plain iterations (the step: origin to the join of every stream; no
 * per-op events, whose host cost could make a step of many small ops launch-bound), then
 * `iterations` with per-op timing events (per-op means; the last one is the trace). Every
 * iteration ends in an agreement across ranks, so one rank's failure stops all of them at the
 * same iteration.
 */
static int rmx_measure(rmx_ctx *ctx, const rm_exec_run_opts *opt, rm_exec_measurement *m)
{
	for (int it = 0; it < opt->warmup; it++)
		RMX_TRY(rmx_agree(ctx, rmx_iteration(ctx, false) == 0));
	int iters = opt->iterations > 0 ? opt->iterations : 1;
	double *steps = (double *)calloc((size_t)iters, sizeof(double));
	double *steps_ev = (double *)calloc((size_t)iters, sizeof(double));
	int rc = -1;
	for (int it = 0; it < iters; it++) {
		bool ok = rmx_iteration(ctx, false) == 0 &&
			  rmx_elapsed(ctx, ctx->origin, ctx->done, "cudaEventElapsedTime(origin, done)", &steps[it]) == 0;
		if (rmx_agree(ctx, ok) != 0)
			goto out;
	}
	for (int it = 0; it < iters; it++)
		if (rmx_agree(ctx, rmx_op_times(ctx, m, iters, &steps_ev[it]) == 0) != 0)
			goto out;
	m->step_s = median(steps, iters);
	m->step_op_events_s = median(steps_ev, iters);
	m->iterations = iters;
	rc = opt->graph ? rmx_measure_graph(ctx, iters, m) : 0;
out:
	free(steps);
	free(steps_ev);
	return rc;
}

extern "C" rm_status rm_exec_run(const rm_exec_plan *plan, const rm_exec_run_opts *opt, rm_exec_measurement *m,
				 int *rank, rm_error *err)
{
	rmx_ctx *ctx = (rmx_ctx *)calloc(1, sizeof(rmx_ctx));
	ctx->plan = plan;
	ctx->prog = plan->prog;
	ctx->world = 1;
	ctx->timeout_s = rm_dist_timeout_s(opt->timeout_s);
	ctx->init_timeout_s = rm_dist_init_timeout_s(opt->init_timeout_s);
	rm_exec_measurement_init(m, plan->prog->n_ops);
	rm_status st = RM_OK;
	*rank = 0;
	if (rm_dist_init(&ctx->dist, ctx->error, sizeof(ctx->error)) != 0) {
		rm_error_set(err, RM_UNSUPPORTED, NULL, 0, 0, "%s", ctx->error);
		free(ctx);
		return RM_UNSUPPORTED;
	}
	ctx->mpi = ctx->dist.mpi;
	ctx->rank = ctx->dist.rank;
	ctx->world = ctx->dist.world;
	*rank = ctx->rank;
	/* this rank's set-up, then an agreement before the first collective call (the NCCL id) */
	size_t free0 = 0;
	bool ok = rmx_agree(ctx, rmx_setup(ctx, opt, m, err, &free0) == 0) == 0;
	ok = ok && rmx_setup_comm(ctx) == 0;
	ok = ok && rmx_agree(ctx, rmx_setup_measure_memory(ctx, m, free0) == 0) == 0;
	ok = ok && rmx_measure(ctx, opt, m) == 0;
	if (!ok) {
		st = ctx->status != RM_OK ? ctx->status : RM_IO;
		rm_error_set(err, st, NULL, 0, 0, "%s", ctx->error); /* "rank R: ..." under MPI */
	}
	rmx_teardown(ctx);
	rm_dist_finish(&ctx->dist);
	free(ctx);
	return st;
}
