/*
 * The unfused attention's kernels (include/remora/exec.h rm_exec_attention_steps) and their CPU
 * reference, which tests/test_exec.c checks against attention computed directly on a tiny case.
 * exec/cuda/runner.cu launches the same steps with cuBLASLt and its softmax kernels.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "remora/exec.h"

/*
 * A row-major C[M,N] = alpha X Y, X [M,K] (or [K,M] stored, when tx), Y [K,N] (or [N,K], ty),
 * as the column-major cuBLAS call C^T[N,M] = alpha op(Y^T) op(X^T): A = Y, B = X.
 * Per-slice element counts give the strides.
 */
static rm_attn_step rowmajor_gemm(const char *what, rm_attn_buf c, rm_attn_buf x, bool tx, rm_attn_buf y, bool ty,
				  int64_t M, int64_t N, int64_t K, double alpha, int64_t s, int64_t d)
{
	/* per-slice sizes: [s,d] tensors and [s,s] scores */
	int64_t sz[RM_ATTN_BUF_COUNT];
	for (int i = 0; i < RM_ATTN_BUF_COUNT; i++)
		sz[i] = i == RM_ATTN_P || i == RM_ATTN_DP ? s * s : s * d;
	rm_attn_step st = {.kind = RM_ATTN_GEMM, .what = what, .alpha = alpha, .a = y, .b = x, .d = c};
	st.m = N, st.n = M, st.k = K;
	/* A = Y: row-major [K,N] is column-major N x K (ld N), used as is; row-major [N,K] is
	 * column-major K x N (ld K), transposed */
	st.trans_a = ty;
	st.lda = ty ? K : N;
	/* B = X: row-major [M,K] is column-major K x M (ld K), as is; [K,M] is M x K (ld M), transposed */
	st.trans_b = tx;
	st.ldb = tx ? M : K;
	st.ldd = N; /* C row-major [M,N] = column-major N x M */
	st.stride_a = sz[y], st.stride_b = sz[x], st.stride_d = sz[c];
	return st;
}

int rm_exec_attention_steps(int64_t s, int64_t d, bool backward, rm_attn_step steps[7])
{
	double scale = d > 0 ? 1.0 / sqrt((double)d) : 1.0;
	int n = 0;
	steps[n++] = rowmajor_gemm("S = scale Q K^T", RM_ATTN_P, RM_ATTN_Q, false, RM_ATTN_K, true, s, s, d, scale, s, d);
	steps[n++] = (rm_attn_step){.kind = RM_ATTN_SOFTMAX, .d = RM_ATTN_P, .what = "P = softmax(S)"};
	if (!backward) {
		steps[n++] = rowmajor_gemm("O = P V", RM_ATTN_O, RM_ATTN_P, false, RM_ATTN_V, false, s, d, s, 1.0, s, d);
		return n;
	}
	steps[n++] = rowmajor_gemm("dV = P^T dO", RM_ATTN_DV, RM_ATTN_P, true, RM_ATTN_DO, false, s, d, s, 1.0, s, d);
	steps[n++] = rowmajor_gemm("dP = dO V^T", RM_ATTN_DP, RM_ATTN_DO, false, RM_ATTN_V, true, s, s, d, 1.0, s, d);
	steps[n++] = (rm_attn_step){.kind = RM_ATTN_SOFTMAX_BWD, .a = RM_ATTN_P, .d = RM_ATTN_DP,
				    .what = "dS = P * (dP - rowsum(P * dP))"};
	steps[n++] = rowmajor_gemm("dQ = scale dS K", RM_ATTN_DQ, RM_ATTN_DP, false, RM_ATTN_K, false, s, d, s, scale, s, d);
	steps[n++] = rowmajor_gemm("dK = scale dS^T Q", RM_ATTN_DK, RM_ATTN_DP, true, RM_ATTN_Q, false, s, d, s, scale, s,
				   d);
	return n;
}

/* cuBLAS's column-major GEMM, one slice: D[m,n] = alpha op(A) op(B) (beta = 0). */
static void ref_gemm(const rm_attn_step *st, const float *a, const float *b, float *dst)
{
	for (int64_t i = 0; i < st->m; i++)
		for (int64_t j = 0; j < st->n; j++) {
			double acc = 0;
			for (int64_t l = 0; l < st->k; l++) {
				float x = st->trans_a ? a[l + i * st->lda] : a[i + l * st->lda];
				float y = st->trans_b ? b[j + l * st->ldb] : b[l + j * st->ldb];
				acc += (double)x * (double)y;
			}
			dst[i + j * st->ldd] = (float)(st->alpha * acc);
		}
}

void rm_exec_attention_reference(const rm_attn_step *steps, int n_steps, int64_t s, int64_t d, int64_t nb,
				 bool causal, float *const buf[RM_ATTN_BUF_COUNT])
{
	(void)d;
	for (int k = 0; k < n_steps; k++) {
		const rm_attn_step *st = &steps[k];
		if (st->kind == RM_ATTN_GEMM) {
			for (int64_t z = 0; z < nb; z++)
				ref_gemm(st, buf[st->a] + z * st->stride_a, buf[st->b] + z * st->stride_b,
					 buf[st->d] + z * st->stride_d);
			continue;
		}
		/* the runner's kernels: row r of nb * s, query r % s, keys 0..limit-1 */
		for (int64_t r = 0; r < nb * s; r++) {
			int64_t limit = causal ? r % s + 1 : s;
			float *row = buf[st->d] + r * s;
			if (st->kind == RM_ATTN_SOFTMAX) {
				float mx = -INFINITY;
				for (int64_t c = 0; c < limit; c++)
					mx = fmaxf(mx, row[c]);
				double sum = 0;
				for (int64_t c = 0; c < limit; c++)
					sum += exp((double)row[c] - mx);
				for (int64_t c = 0; c < s; c++)
					row[c] = c < limit ? (float)(exp((double)row[c] - mx) / sum) : 0.0f;
			} else {
				const float *p = buf[st->a] + r * s;
				double dot = 0;
				for (int64_t c = 0; c < s; c++)
					dot += (double)p[c] * row[c];
				for (int64_t c = 0; c < s; c++)
					row[c] = (float)(p[c] * (row[c] - dot));
			}
		}
	}
}
