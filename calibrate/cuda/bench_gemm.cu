/*
 * cuBLASLt GEMM, BF16 and FP8 (E4M3 inputs, BF16 output), FP32 accumulation, D[m,n] =
 * op(A) op(B) (harness.h rmc_gemm): per shape five variants, BF16 TN (forward), BF16 NN (dgrad),
 * BF16 NT (wgrad), FP8 TN with cuBLASLt's default split accumulation and FP8 TN with fast
 * accumulation (CUBLASLT_MATMUL_DESC_FAST_ACCUM; FP8 on Hopper is TN only). Operands rotate over
 * enough copies that every timed call reads A and B from HBM, not from the L2 (a cold figure).
 * The shape grid holds squares for the fit of t = t0 + FLOPs/R (docs/reference/hardware.md
 * "Compute efficiency") and the GEMMs of the shipped models (data/models/NAME.json) at 4096
 * tokens: fused QKV, attention output, gate+up, down, LM head.
 * Row: {"benchmark":"gemm","params":{"dtype","m","n","k","batch":1,"layout":"tn"|"nn"|"nt",
 * "fast_accum","cold","rotations"},"value":us}.
 */
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* Fills n elements with deterministic values in [-1, 1) (zeros would flatter the tensor cores). */
__global__ void rmc_fill_bf16(__nv_bfloat16 *p, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		unsigned h = (unsigned)(i * 2654435761u);
		p[i] = __float2bfloat16((float)(h >> 8) / 8388608.0f - 1.0f);
	}
}

__global__ void rmc_fill_fp8(__nv_fp8_e4m3 *p, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		unsigned h = (unsigned)(i * 2654435761u);
		p[i] = __nv_fp8_e4m3((float)(h >> 8) / 8388608.0f - 1.0f);
	}
}

static int fill(rmc_ctx *ctx, void *p, size_t n, bool fp8)
{
	if (fp8)
		rmc_fill_fp8<<<1024, 256>>>((__nv_fp8_e4m3 *)p, n);
	else
		rmc_fill_bf16<<<1024, 256>>>((__nv_bfloat16 *)p, n);
	RMC_CUDA(ctx, cudaGetLastError());
	return 0;
}

/* The largest power of two dividing p's address, at most 256 (exec/plan.c rm_exec_alignment). */
static uint32_t rmc_alignment(const void *p)
{
	uint32_t al = 256;
	while (al > 1 && (uintptr_t)p % al != 0)
		al >>= 1;
	return al;
}

/*
 * Tells cuBLASLt's heuristic how aligned the operands are (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*,
 * 256 bytes when unset): an algorithm chosen for 256 may refuse a less aligned pointer.
 */
static int set_alignment(rmc_ctx *ctx, cublasLtMatmulPreference_t pref, uint32_t a, uint32_t b, uint32_t d)
{
	RMC_CUBLAS(ctx, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &a, sizeof(a)));
	RMC_CUBLAS(ctx, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &b, sizeof(b)));
	RMC_CUBLAS(ctx, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &d, sizeof(d)));
	RMC_CUBLAS(ctx, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &d, sizeof(d)));
	return 0;
}

static size_t round256(size_t n)
{
	return (n + 255) / 256 * 256;
}

int rmc_gemm_init_ex(rmc_ctx *ctx, rmc_gemm *g, int64_t m, int64_t n, int64_t k, bool fp8, int layout,
		     bool fast_accum, bool rotate)
{
	memset(g, 0, sizeof(*g));
	g->m = m, g->n = n, g->k = k, g->fp8 = fp8, g->layout = layout, g->fast_accum = fast_accum;
	g->alpha = 1.0f, g->beta = 0.0f;
	size_t in_size = fp8 ? 1 : 2;
	cudaDataType_t in_type = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
	size_t bytes_a = (size_t)(m * k) * in_size, bytes_b = (size_t)(k * n) * in_size, bytes_d = (size_t)(m * n) * 2;
	g->off_b = round256(bytes_a);
	g->off_d = g->off_b + round256(bytes_b);
	g->set_bytes = g->off_d + round256(bytes_d);
	g->n_rot = 1;
	if (rotate && ctx->l2_bytes > 0) {
		/* one pass over the sets at least twice the L2, at most 64 sets and 2 GiB */
		size_t want = (2 * ctx->l2_bytes + g->set_bytes - 1) / g->set_bytes + 1;
		size_t cap = ((size_t)2 << 30) / g->set_bytes;
		want = want > 64 ? 64 : want;
		want = want > cap ? cap : want;
		g->n_rot = want < 1 ? 1 : (int)want;
	}
	RMC_CUDA(ctx, cudaMalloc(&g->mem, g->set_bytes * (size_t)g->n_rot));
	g->a = g->mem;
	g->b = (char *)g->mem + g->off_b;
	g->d = (char *)g->mem + g->off_d;
	for (int r = 0; r < g->n_rot; r++) {
		char *set = (char *)g->mem + (size_t)r * g->set_bytes;
		RMC_TRY(fill(ctx, set, (size_t)(m * k), fp8));
		RMC_TRY(fill(ctx, set + g->off_b, (size_t)(k * n), fp8));
	}
	RMC_CUBLAS(ctx, cublasLtMatmulDescCreate(&g->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
	cublasOperation_t ta = layout == RMC_TN ? CUBLAS_OP_T : CUBLAS_OP_N;
	cublasOperation_t tb = layout == RMC_NT ? CUBLAS_OP_T : CUBLAS_OP_N;
	RMC_CUBLAS(ctx, cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
	RMC_CUBLAS(ctx, cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
	if (fp8) {
		int8_t fast = fast_accum ? 1 : 0;
		RMC_CUBLAS(ctx, cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast)));
	}
	/* stored shapes (rows x cols, column-major, leading dimension = rows) */
	if (layout == RMC_TN)
		RMC_CUBLAS(ctx, cublasLtMatrixLayoutCreate(&g->la, in_type, (uint64_t)k, (uint64_t)m, k));
	else
		RMC_CUBLAS(ctx, cublasLtMatrixLayoutCreate(&g->la, in_type, (uint64_t)m, (uint64_t)k, m));
	if (layout == RMC_NT)
		RMC_CUBLAS(ctx, cublasLtMatrixLayoutCreate(&g->lb, in_type, (uint64_t)n, (uint64_t)k, n));
	else
		RMC_CUBLAS(ctx, cublasLtMatrixLayoutCreate(&g->lb, in_type, (uint64_t)k, (uint64_t)n, k));
	RMC_CUBLAS(ctx, cublasLtMatrixLayoutCreate(&g->ld, CUDA_R_16BF, (uint64_t)m, (uint64_t)n, m));
	cublasLtMatmulPreference_t pref;
	RMC_CUBLAS(ctx, cublasLtMatmulPreferenceCreate(&pref));
	RMC_CUBLAS(ctx, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
							     &ctx->workspace_bytes, sizeof(ctx->workspace_bytes)));
	/* every set's operands are at the same offsets of 256-byte-aligned sets: set 0's alignment */
	if (set_alignment(ctx, pref, rmc_alignment(g->a), rmc_alignment(g->b), rmc_alignment(g->d)) != 0) {
		cublasLtMatmulPreferenceDestroy(pref);
		return -1;
	}
	cublasLtMatmulHeuristicResult_t res;
	int found = 0;
	cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(ctx->lt, g->op, g->la, g->lb, g->ld, g->ld, pref, 1, &res,
							    &found);
	cublasLtMatmulPreferenceDestroy(pref);
	if (st == CUBLAS_STATUS_NOT_SUPPORTED || (st == CUBLAS_STATUS_SUCCESS && found == 0)) {
		/* a shape this cuBLASLt cannot run (FP8 alignment): skipped, not fatal */
		static const char *const names[] = {"tn", "nn", "nt"};
		fprintf(stderr, "remora-calibrate: gemm %s %s %lldx%lldx%lld: no cuBLASLt algorithm, skipped\n",
			fp8 ? "fp8" : "bf16", names[layout], (long long)m, (long long)n, (long long)k);
		g->unsupported = true;
		return 0;
	}
	RMC_CUBLAS(ctx, st);
	g->algo = res.algo;
	RMC_CUDA(ctx, cudaDeviceSynchronize());
	return 0;
}

int rmc_gemm_init(rmc_ctx *ctx, rmc_gemm *g, int64_t m, int64_t n, int64_t k, bool fp8)
{
	return rmc_gemm_init_ex(ctx, g, m, n, k, fp8, RMC_TN, false, false);
}

int rmc_gemm_run(rmc_ctx *ctx, rmc_gemm *g, cudaStream_t stream)
{
	char *set = (char *)g->mem + (size_t)g->next * g->set_bytes;
	g->next = (g->next + 1) % g->n_rot;
	void *d = set + g->off_d;
	RMC_CUBLAS(ctx, cublasLtMatmul(ctx->lt, g->op, &g->alpha, set, g->la, set + g->off_b, g->lb, &g->beta, d, g->ld,
				       d, g->ld, &g->algo, ctx->workspace, ctx->workspace_bytes, stream));
	return 0;
}

void rmc_gemm_fini(rmc_gemm *g)
{
	if (g->la)
		cublasLtMatrixLayoutDestroy(g->la);
	if (g->lb)
		cublasLtMatrixLayoutDestroy(g->lb);
	if (g->ld)
		cublasLtMatrixLayoutDestroy(g->ld);
	if (g->op)
		cublasLtMatmulDescDestroy(g->op);
	cudaFree(g->mem);
	memset(g, 0, sizeof(*g));
}

/* ---- the shape grid ------------------------------------------------------------------------ */

typedef struct shape {
	int64_t m, n, k;
} shape;

/* hidden, FFN, KV width (kv_heads * head_dim), vocabulary: data/models/NAME.json */
static const struct {
	int64_t hidden, ffn, kv, vocab;
} models[] = {
	{768, 3072, 768, 50257},      /* gpt-2 */
	{4096, 11008, 4096, 32000},   /* llama-2-7b */
	{5120, 13824, 5120, 32000},   /* llama-2-13b */
	{8192, 28672, 1024, 32000},   /* llama-2-70b, llama-3-70b (vocab 128256 below) */
	{4096, 14336, 1024, 128256},  /* llama-3-8b, mistral-7b (vocab 32000) */
	{3584, 18944, 512, 152064},   /* qwen2-7b */
};

#define TOKENS 4096
#define MAX_SHAPES 64

static int shape_grid(const rmc_ctx *ctx, shape *out)
{
	int n = 0;
	static const int64_t squares[] = {512, 1024, 2048, 4096, 6144, 8192, 16384};
	for (size_t i = 0; i < sizeof(squares) / sizeof(squares[0]); i++) {
		if (ctx->quick && squares[i] != 1024 && squares[i] != 4096)
			continue;
		out[n++] = (shape){squares[i], squares[i], squares[i]};
	}
	if (ctx->quick)
		return n;
	/* thin K and wide K at fixed M, N: the efficiency ramp in K */
	out[n++] = (shape){8192, 8192, 256};
	out[n++] = (shape){8192, 8192, 1024};
	out[n++] = (shape){2048, 2048, 13312};
	for (size_t i = 0; i < sizeof(models) / sizeof(models[0]) && n + 5 <= MAX_SHAPES; i++) {
		int64_t h = models[i].hidden;
		out[n++] = (shape){TOKENS, h + 2 * models[i].kv, h}; /* fused QKV */
		out[n++] = (shape){TOKENS, h, h};                    /* attention output */
		out[n++] = (shape){TOKENS, 2 * models[i].ffn, h};    /* gate + up */
		out[n++] = (shape){TOKENS, h, models[i].ffn};        /* down */
		/* LM head, the vocabulary padded to a multiple of 128 as Megatron and MaxText do */
		out[n++] = (shape){TOKENS, (models[i].vocab + 127) / 128 * 128, h};
	}
	return n;
}

typedef struct gemm_state {
	rmc_gemm g;
} gemm_state;

/* The variants of each shape, in case order. */
static const struct {
	bool fp8, fast;
	int layout;
	const char *name;
} variants[] = {
	{false, false, RMC_TN, "tn"}, {false, false, RMC_NN, "nn"}, {false, false, RMC_NT, "nt"},
	{true, false, RMC_TN, "tn"},  {true, true, RMC_TN, "tn"},
};
enum { N_VARIANTS = sizeof(variants) / sizeof(variants[0]) };

static int gemm_cases(const rmc_ctx *ctx)
{
	shape s[MAX_SHAPES];
	return N_VARIANTS * shape_grid(ctx, s);
}

static int gemm_init(rmc_ctx *ctx, int i, void **state, const char **benchmark, rmc_params *p)
{
	shape s[MAX_SHAPES];
	int n = shape_grid(ctx, s);
	int v = i / n;
	const shape *sh = &s[i % n];
	gemm_state *st = (gemm_state *)calloc(1, sizeof(gemm_state));
	*state = st;
	*benchmark = "gemm";
	RMC_TRY(rmc_gemm_init_ex(ctx, &st->g, sh->m, sh->n, sh->k, variants[v].fp8, variants[v].layout, variants[v].fast,
				 true));
	rmc_param_str(p, "dtype", variants[v].fp8 ? "fp8" : "bf16");
	rmc_param_int(p, "m", sh->m);
	rmc_param_int(p, "n", sh->n);
	rmc_param_int(p, "k", sh->k);
	rmc_param_int(p, "batch", 1);
	rmc_param_str(p, "layout", variants[v].name);
	rmc_param_bool(p, "fast_accum", variants[v].fast);
	/* cold: one pass over the rotated sets is at least twice the L2 */
	rmc_param_bool(p, "cold", st->g.set_bytes * (size_t)st->g.n_rot >= 2 * ctx->l2_bytes);
	rmc_param_int(p, "rotations", st->g.n_rot);
	return 0;
}

static int gemm_run(rmc_ctx *ctx, void *state, cudaStream_t stream)
{
	return rmc_gemm_run(ctx, &((gemm_state *)state)->g, stream);
}

static int gemm_measure(rmc_ctx *ctx, void *state, int i, double *us)
{
	gemm_state *st = (gemm_state *)state;
	*us = 0;
	if (st->g.unsupported)
		return 0; /* no row */
	double flops = 2.0 * (double)st->g.m * (double)st->g.n * (double)st->g.k;
	/* about 50 ms of work per case, at least 5 iterations */
	int iters = (int)(50e-3 / (flops / 700e12));
	iters = iters < 5 ? 5 : iters > 200 ? 200 : iters;
	if (ctx->quick)
		iters = 5;
	(void)i;
	rmc_bench b = rmc_bench_gemm;
	b.run = gemm_run;
	return rmc_time_loop(ctx, &b, state, ctx->stream[0], ctx->warmup, iters, us);
}

static void gemm_fini(rmc_ctx *ctx, void *state)
{
	(void)ctx;
	if (state)
		rmc_gemm_fini(&((gemm_state *)state)->g);
	free(state);
}

const rmc_bench rmc_bench_gemm = {
	"gemm", gemm_cases, gemm_init, gemm_run, gemm_measure, gemm_fini, false,
};
