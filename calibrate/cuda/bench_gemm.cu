/*
 * cuBLASLt GEMM, BF16 and FP8 (E4M3 inputs, BF16 output), "TN" layout as FP8 requires:
 * D[m,n] = A^T[m,k] . B[k,n], FP32 accumulation. The shape grid holds squares for the fit of
 * t = t0 + FLOPs/R (docs/reference/hardware.md "Compute efficiency") and the GEMMs of the shipped models
 * (data/models/NAME.json) at 4096 tokens: fused QKV, attention output, gate+up, down, LM head.
 * Row: {"benchmark":"gemm","params":{"dtype","m","n","k","batch":1},"value":us}.
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

int rmc_gemm_init(rmc_ctx *ctx, rmc_gemm *g, int64_t m, int64_t n, int64_t k, bool fp8)
{
	memset(g, 0, sizeof(*g));
	g->m = m, g->n = n, g->k = k, g->fp8 = fp8;
	g->alpha = 1.0f, g->beta = 0.0f;
	size_t in_size = fp8 ? 1 : 2;
	cudaDataType_t in_type = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
	RMC_CUDA(ctx, cudaMalloc(&g->a, (size_t)(m * k) * in_size));
	RMC_CUDA(ctx, cudaMalloc(&g->b, (size_t)(k * n) * in_size));
	RMC_CUDA(ctx, cudaMalloc(&g->d, (size_t)(m * n) * 2));
	RMC_TRY(fill(ctx, g->a, (size_t)(m * k), fp8));
	RMC_TRY(fill(ctx, g->b, (size_t)(k * n), fp8));
	RMC_CUBLAS(ctx, cublasLtMatmulDescCreate(&g->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
	cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
	RMC_CUBLAS(ctx, cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
	RMC_CUBLAS(ctx, cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
	RMC_CUBLAS(ctx, cublasLtMatrixLayoutCreate(&g->la, in_type, (uint64_t)k, (uint64_t)m, k));
	RMC_CUBLAS(ctx, cublasLtMatrixLayoutCreate(&g->lb, in_type, (uint64_t)k, (uint64_t)n, k));
	RMC_CUBLAS(ctx, cublasLtMatrixLayoutCreate(&g->ld, CUDA_R_16BF, (uint64_t)m, (uint64_t)n, m));
	cublasLtMatmulPreference_t pref;
	RMC_CUBLAS(ctx, cublasLtMatmulPreferenceCreate(&pref));
	RMC_CUBLAS(ctx, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
							     &ctx->workspace_bytes, sizeof(ctx->workspace_bytes)));
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
		fprintf(stderr, "remora-calibrate: gemm %s %lldx%lldx%lld: no cuBLASLt algorithm, skipped\n",
			fp8 ? "fp8" : "bf16", (long long)m, (long long)n, (long long)k);
		g->unsupported = true;
		return 0;
	}
	RMC_CUBLAS(ctx, st);
	g->algo = res.algo;
	RMC_CUDA(ctx, cudaDeviceSynchronize());
	return 0;
}

int rmc_gemm_run(rmc_ctx *ctx, rmc_gemm *g, cudaStream_t stream)
{
	RMC_CUBLAS(ctx, cublasLtMatmul(ctx->lt, g->op, &g->alpha, g->a, g->la, g->b, g->lb, &g->beta, g->d, g->ld,
				       g->d, g->ld, &g->algo, ctx->workspace, ctx->workspace_bytes, stream));
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
	cudaFree(g->a);
	cudaFree(g->b);
	cudaFree(g->d);
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

static int gemm_cases(const rmc_ctx *ctx)
{
	shape s[MAX_SHAPES];
	return 2 * shape_grid(ctx, s);
}

static int gemm_init(rmc_ctx *ctx, int i, void **state, const char **benchmark, rmc_params *p)
{
	shape s[MAX_SHAPES];
	int n = shape_grid(ctx, s);
	bool fp8 = i >= n;
	const shape *sh = &s[i % n];
	gemm_state *st = (gemm_state *)calloc(1, sizeof(gemm_state));
	*state = st;
	*benchmark = "gemm";
	rmc_param_str(p, "dtype", fp8 ? "fp8" : "bf16");
	rmc_param_int(p, "m", sh->m);
	rmc_param_int(p, "n", sh->n);
	rmc_param_int(p, "k", sh->k);
	rmc_param_int(p, "batch", 1);
	return rmc_gemm_init(ctx, &st->g, sh->m, sh->n, sh->k, fp8);
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
