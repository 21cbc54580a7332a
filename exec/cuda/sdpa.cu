/*
 * Fused attention through cuDNN's backend API (exec/cuda/sdpa.h). The operation graphs are the
 * ones cudnn-frontend's sdpa and sdpa_backward nodes lower to on cuDNN 9 with no dropout, bias,
 * padding or deterministic dP workspace (NVIDIA/cudnn-frontend,
 * include/cudnn_frontend/node/scaled_dot_product_flash_attention.h, softmax.h,
 * diagonal_band_mask.h), which cuDNN's runtime-compiled flash engine recognises:
 *
 *   forward   S = Q KT (matmul; K given transposed, [b,hk,d,s]); S *= scale (pointwise MUL);
 *             causal: keep = GEN_INDEX(row) >= GEN_INDEX(col) (CMP_GE), S = keep ? S : -inf
 *             (BINARY_SELECT); a window w also keeps col + w > row (ADD, CMP_GT, BINARY_SELECT);
 *             M = max(S) (reduction); E = exp(S - M); Z = sum(E); stats = M + log(Z); P = E / Z;
 *             O = P V (matmul)
 *   backward  softmax_sum = rowsum(dO * O) * 1 (MUL, reduction ADD, MUL: non-virtual, fp32);
 *             S as forward; P = exp(S - stats); dV = reshape(P)^T dO; dP = dO VT;
 *             dS = (dP - softmax_sum) * P * scale; dK = reshape(dS)^T Q; dQ_accum = dS K
 *             (K a reshape of KT; fp32, non-virtual) and dQ = IDENTITY(dQ_accum); with fewer kv
 *             heads, dK and dV are full-head matmuls reduced (ADD) onto the kv heads
 *
 * Every tensor is [b, heads, s, d] row-major (strides h*s*d, s*d, d, 1; 16-byte aligned because
 * d is a multiple of 8, rm_exec_attention_fusable); stats and softmax_sum are [b, h, s, 1].
 * Intermediates are virtual fp32 (the frontend's intermediate type), the transposed P and dS of
 * the dV and dK matmuls in the I/O type as the frontend sets them.
 *
 * Compile-checked only: no GPU has run this file yet (docs/exec.md).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/cuda/sdpa.h"

#if RMX_HAVE_CUDNN

#include <cudnn_graph.h>

#define RMX_SDPA_MAX_GRAPHS 32
#define RMX_SDPA_MAX_DESCS 96
#define RMX_SDPA_MAX_OPS 48

/* Unique ids of the graph's real tensors: the rm_attn_fused_operand index + 1; scalars after. */
enum { UID_SCALE = 32, UID_NEG_INF, UID_ONE, UID_WINDOW, UID_VIRTUAL = 64 };

typedef struct sdpa_key {
	int64_t b, h, hk, s, d, window;
	bool causal, backward;
	rm_dtype dtype;
} sdpa_key;

typedef struct builder builder;

typedef struct sdpa_graph {
	sdpa_key key;
	builder *descs; /* the graph's descriptors, kept while its plan lives */
	cudnnBackendDescriptor_t plan;
	int64_t workspace_bytes;
	float scale, neg_inf, one, window; /* the by-value scalars, read at execute time */
} sdpa_graph;

struct rmx_sdpa {
	cudnnHandle_t handle;
	sdpa_graph graphs[RMX_SDPA_MAX_GRAPHS];
	int n_graphs;
	cudnnBackendDescriptor_t *packs; /* per op: its variant pack, built on first run */
	int *pack_graph;                 /* per op: the graph its pack was built for */
	int32_t n_ops;
	size_t version;
};

/* A graph under construction: every descriptor made (destroyed with the graph), its operations. */
struct builder {
	cudnnHandle_t handle;
	cudnnBackendDescriptor_t descs[RMX_SDPA_MAX_DESCS];
	int n_descs;
	cudnnBackendDescriptor_t ops[RMX_SDPA_MAX_OPS];
	int n_ops;
	int64_t next_uid;
	char *msg;
	size_t n;
	bool failed;
};

static void builder_destroy(builder *g)
{
	if (!g)
		return;
	for (int i = 0; i < g->n_descs; i++)
		cudnnBackendDestroyDescriptor(g->descs[i]);
	free(g);
}

static bool check(builder *g, cudnnStatus_t st, const char *expr, const char *what)
{
	if (st == CUDNN_STATUS_SUCCESS || g->failed)
		return st == CUDNN_STATUS_SUCCESS;
	snprintf(g->msg, g->n, "%s: %s (%s)", expr, cudnnGetErrorString(st), what);
	g->failed = true;
	return false;
}

#define CK(g, expr, what) check((g), (expr), #expr, (what))

static cudnnBackendDescriptor_t make(builder *g, cudnnBackendDescriptorType_t type, const char *what)
{
	cudnnBackendDescriptor_t d = NULL;
	if (g->failed)
		return NULL;
	if (g->n_descs == RMX_SDPA_MAX_DESCS) {
		snprintf(g->msg, g->n, "the SDPA graph needs more than %d descriptors (%s)", RMX_SDPA_MAX_DESCS, what);
		g->failed = true;
		return NULL;
	}
	if (!CK(g, cudnnBackendCreateDescriptor(type, &d), what))
		return NULL;
	g->descs[g->n_descs++] = d;
	return d;
}

static void set(builder *g, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
		int64_t count, const void *value, const char *what)
{
	if (!g->failed && d)
		CK(g, cudnnBackendSetAttribute(d, name, type, count, value), what);
}

static void finalize(builder *g, cudnnBackendDescriptor_t d, const char *what)
{
	if (!g->failed && d)
		CK(g, cudnnBackendFinalize(d), what);
}

static cudnnDataType_t data_type(rm_dtype t)
{
	return t == RM_DTYPE_FP16 ? CUDNN_DATA_HALF : t == RM_DTYPE_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

/* A 4-d tensor: uid > 0 a real one (in the variant pack), 0 a new virtual one. */
static cudnnBackendDescriptor_t tensor(builder *g, cudnnDataType_t type, const int64_t dim[4], const int64_t stride[4],
				       int64_t uid, bool by_value, const char *what)
{
	cudnnBackendDescriptor_t t = make(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR, what);
	bool virt = uid == 0;
	if (virt)
		uid = g->next_uid++;
	int64_t align = 16;
	set(g, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, what);
	set(g, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dim, what);
	set(g, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, stride, what);
	set(g, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, what);
	set(g, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, what);
	set(g, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt, what);
	if (by_value)
		set(g, t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value, what);
	finalize(g, t, what);
	return t;
}

static cudnnBackendDescriptor_t scalar(builder *g, int64_t uid, const char *what)
{
	static const int64_t one[4] = {1, 1, 1, 1};
	return tensor(g, CUDNN_DATA_FLOAT, one, one, uid, true, what);
}

static void add_op(builder *g, cudnnBackendDescriptor_t op, const char *what)
{
	finalize(g, op, what);
	if (g->failed)
		return;
	if (g->n_ops == RMX_SDPA_MAX_OPS) {
		snprintf(g->msg, g->n, "the SDPA graph needs more than %d operations (%s)", RMX_SDPA_MAX_OPS, what);
		g->failed = true;
		return;
	}
	g->ops[g->n_ops++] = op;
}

/* y = mode(x[, b[, t]]) computed in prec; axis >= 0 for GEN_INDEX. */
static void pointwise(builder *g, cudnnPointwiseMode_t mode, cudnnDataType_t prec, int64_t axis,
		      cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t,
		      cudnnBackendDescriptor_t y, const char *what)
{
	cudnnBackendDescriptor_t pw = make(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, what);
	set(g, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, what);
	set(g, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, what);
	if (axis >= 0)
		set(g, pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, what);
	finalize(g, pw, what);
	cudnnBackendDescriptor_t op = make(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, what);
	set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw, what);
	set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, what);
	if (b)
		set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, what);
	if (t)
		set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t, what);
	set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, what);
	add_op(g, op, what);
}

/* c = a b over the last two dims, fp32 accumulation. */
static void matmul(builder *g, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c,
		   const char *what)
{
	cudnnDataType_t comp = CUDNN_DATA_FLOAT;
	cudnnBackendDescriptor_t mm = make(g, CUDNN_BACKEND_MATMUL_DESCRIPTOR, what);
	set(g, mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, what);
	finalize(g, mm, what);
	cudnnBackendDescriptor_t op = make(g, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, what);
	set(g, op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a, what);
	set(g, op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, what);
	set(g, op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c, what);
	set(g, op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm, what);
	add_op(g, op, what);
}

/* y = reduce(x) over the dims where y has 1 (or fewer heads), fp32. */
static void reduction(builder *g, cudnnReduceTensorOp_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y,
		      const char *what)
{
	cudnnDataType_t comp = CUDNN_DATA_FLOAT;
	cudnnBackendDescriptor_t r = make(g, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, what);
	set(g, r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode, what);
	set(g, r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, what);
	finalize(g, r, what);
	cudnnBackendDescriptor_t op = make(g, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, what);
	set(g, op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, what);
	set(g, op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, what);
	set(g, op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &r, what);
	add_op(g, op, what);
}

/* y = x seen through y's dims and strides (a transpose without a copy). */
static void reshape(builder *g, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y, const char *what)
{
	cudnnBackendDescriptor_t op = make(g, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, what);
	set(g, op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, what);
	set(g, op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, what);
	add_op(g, op, what);
}

/* Shapes of one graph: [b,h,s,d] and friends with their row-major strides. */
typedef struct shapes {
	int64_t q[4], q_st[4];       /* Q, O, dO, dQ: [b,h,s,d] */
	int64_t kv[4], kv_st[4];     /* K, V, dK, dV: [b,hk,s,d] */
	int64_t kvt[4], kvt_st[4];   /* KT, VT: [b,hk,d,s] (K, V's memory, transposed) */
	int64_t ss[4], ss_st[4];     /* scores [b,h,s,s] */
	int64_t sst_st[4];           /* scores transposed (dims as ss) */
	int64_t row[4], row_st[4];   /* stats, softmax_sum [b,h,s,1] */
	int64_t full[4];             /* full-head dK, dV [b,h,s,d] (strides q_st) */
} shapes;

static void make_shapes(const sdpa_key *k, shapes *sh)
{
	int64_t b = k->b, h = k->h, hk = k->hk, s = k->s, d = k->d;
	int64_t q[4] = {b, h, s, d}, q_st[4] = {h * s * d, s * d, d, 1};
	int64_t kv[4] = {b, hk, s, d}, kv_st[4] = {hk * s * d, s * d, d, 1};
	int64_t kvt[4] = {b, hk, d, s}, kvt_st[4] = {hk * s * d, s * d, 1, d};
	int64_t ss[4] = {b, h, s, s}, ss_st[4] = {h * s * s, s * s, s, 1}, sst_st[4] = {h * s * s, s * s, 1, s};
	int64_t row[4] = {b, h, s, 1}, row_st[4] = {h * s, s, 1, 1};
	memcpy(sh->q, q, sizeof(q)), memcpy(sh->q_st, q_st, sizeof(q_st));
	memcpy(sh->kv, kv, sizeof(kv)), memcpy(sh->kv_st, kv_st, sizeof(kv_st));
	memcpy(sh->kvt, kvt, sizeof(kvt)), memcpy(sh->kvt_st, kvt_st, sizeof(kvt_st));
	memcpy(sh->ss, ss, sizeof(ss)), memcpy(sh->ss_st, ss_st, sizeof(ss_st)), memcpy(sh->sst_st, sst_st, sizeof(sst_st));
	memcpy(sh->row, row, sizeof(row)), memcpy(sh->row_st, row_st, sizeof(row_st));
	memcpy(sh->full, q, sizeof(q));
}

/* S = scale * Q KT with the causal (and window) mask: the scores both passes start from. */
static cudnnBackendDescriptor_t masked_scores(builder *g, const sdpa_key *k, const shapes *sh,
					      cudnnBackendDescriptor_t q, cudnnBackendDescriptor_t kt)
{
	const cudnnDataType_t f = CUDNN_DATA_FLOAT;
	cudnnBackendDescriptor_t s = tensor(g, f, sh->ss, sh->ss_st, 0, false, "S = Q KT");
	matmul(g, q, kt, s, "S = Q KT");
	cudnnBackendDescriptor_t s1 = tensor(g, f, sh->ss, sh->ss_st, 0, false, "S * scale");
	pointwise(g, CUDNN_POINTWISE_MUL, f, -1, s, scalar(g, UID_SCALE, "scale"), NULL, s1, "S * scale");
	if (!k->causal)
		return s1;
	cudnnBackendDescriptor_t neg_inf = scalar(g, UID_NEG_INF, "-inf");
	cudnnBackendDescriptor_t row = tensor(g, f, sh->ss, sh->ss_st, 0, false, "row index");
	pointwise(g, CUDNN_POINTWISE_GEN_INDEX, f, 2, s1, NULL, NULL, row, "row index");
	cudnnBackendDescriptor_t col = tensor(g, f, sh->ss, sh->ss_st, 0, false, "column index");
	pointwise(g, CUDNN_POINTWISE_GEN_INDEX, f, 3, s1, NULL, NULL, col, "column index");
	cudnnBackendDescriptor_t keep = tensor(g, CUDNN_DATA_BOOLEAN, sh->ss, sh->ss_st, 0, false, "row >= col");
	pointwise(g, CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, -1, row, col, NULL, keep, "row >= col");
	cudnnBackendDescriptor_t s2 = tensor(g, f, sh->ss, sh->ss_st, 0, false, "causal mask");
	pointwise(g, CUDNN_POINTWISE_BINARY_SELECT, f, -1, s1, neg_inf, keep, s2, "causal mask");
	if (k->window <= 0 || k->window >= k->s)
		return s2;
	/* the left bound, top-left aligned: keep col + window > row */
	cudnnBackendDescriptor_t colw = tensor(g, f, sh->ss, sh->ss_st, 0, false, "col + window");
	pointwise(g, CUDNN_POINTWISE_ADD, f, -1, col, scalar(g, UID_WINDOW, "window"), NULL, colw, "col + window");
	cudnnBackendDescriptor_t keepw = tensor(g, CUDNN_DATA_BOOLEAN, sh->ss, sh->ss_st, 0, false, "col + w > row");
	pointwise(g, CUDNN_POINTWISE_CMP_GT, CUDNN_DATA_BOOLEAN, -1, colw, row, NULL, keepw, "col + w > row");
	cudnnBackendDescriptor_t s3 = tensor(g, f, sh->ss, sh->ss_st, 0, false, "window mask");
	pointwise(g, CUDNN_POINTWISE_BINARY_SELECT, f, -1, s2, neg_inf, keepw, s3, "window mask");
	return s3;
}

static void build_forward(builder *g, const sdpa_key *k)
{
	const cudnnDataType_t f = CUDNN_DATA_FLOAT, io = data_type(k->dtype);
	shapes sh;
	make_shapes(k, &sh);
	cudnnBackendDescriptor_t q = tensor(g, io, sh.q, sh.q_st, 1 + RM_ATTN_F_Q, false, "Q");
	cudnnBackendDescriptor_t kt = tensor(g, io, sh.kvt, sh.kvt_st, 1 + RM_ATTN_F_K, false, "KT");
	cudnnBackendDescriptor_t v = tensor(g, io, sh.kv, sh.kv_st, 1 + RM_ATTN_F_V, false, "V");
	cudnnBackendDescriptor_t o = tensor(g, io, sh.q, sh.q_st, 1 + RM_ATTN_F_O, false, "O");
	cudnnBackendDescriptor_t stats = tensor(g, f, sh.row, sh.row_st, 1 + RM_ATTN_F_STATS, false, "stats");
	cudnnBackendDescriptor_t s = masked_scores(g, k, &sh, q, kt);
	/* the softmax as cudnn-frontend's composite softmax node with stats */
	cudnnBackendDescriptor_t m = tensor(g, f, sh.row, sh.row_st, 0, false, "max");
	reduction(g, CUDNN_REDUCE_TENSOR_MAX, s, m, "max");
	cudnnBackendDescriptor_t sub = tensor(g, f, sh.ss, sh.ss_st, 0, false, "S - max");
	pointwise(g, CUDNN_POINTWISE_SUB, f, -1, s, m, NULL, sub, "S - max");
	cudnnBackendDescriptor_t e = tensor(g, f, sh.ss, sh.ss_st, 0, false, "exp");
	pointwise(g, CUDNN_POINTWISE_EXP, f, -1, sub, NULL, NULL, e, "exp");
	cudnnBackendDescriptor_t z = tensor(g, f, sh.row, sh.row_st, 0, false, "sum");
	reduction(g, CUDNN_REDUCE_TENSOR_ADD, e, z, "sum");
	cudnnBackendDescriptor_t lz = tensor(g, f, sh.row, sh.row_st, 0, false, "log");
	pointwise(g, CUDNN_POINTWISE_LOG, f, -1, z, NULL, NULL, lz, "log");
	pointwise(g, CUDNN_POINTWISE_ADD, f, -1, m, lz, NULL, stats, "stats = max + log(sum)");
	cudnnBackendDescriptor_t p = tensor(g, f, sh.ss, sh.ss_st, 0, false, "P = exp / sum");
	pointwise(g, CUDNN_POINTWISE_DIV, f, -1, e, z, NULL, p, "P = exp / sum");
	matmul(g, p, v, o, "O = P V");
}

/* Full-head gradient c = a b reduced onto the kv heads when they are fewer (GQA). */
static void grad_matmul(builder *g, const sdpa_key *k, const shapes *sh, cudnnBackendDescriptor_t a,
			cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t out, const char *what)
{
	/* the frontend's dK_fullhead / dV_fullhead: [b,h,s,d] in the I/O type */
	if (k->h == k->hk) {
		matmul(g, a, b, out, what);
		return;
	}
	cudnnBackendDescriptor_t full = tensor(g, data_type(k->dtype), sh->full, sh->q_st, 0, false, what);
	matmul(g, a, b, full, what);
	reduction(g, CUDNN_REDUCE_TENSOR_ADD, full, out, what);
}

static void build_backward(builder *g, const sdpa_key *k)
{
	const cudnnDataType_t f = CUDNN_DATA_FLOAT, io = data_type(k->dtype);
	shapes sh;
	make_shapes(k, &sh);
	cudnnBackendDescriptor_t q = tensor(g, io, sh.q, sh.q_st, 1 + RM_ATTN_F_Q, false, "Q");
	cudnnBackendDescriptor_t kt = tensor(g, io, sh.kvt, sh.kvt_st, 1 + RM_ATTN_F_K, false, "KT");
	cudnnBackendDescriptor_t vt = tensor(g, io, sh.kvt, sh.kvt_st, 1 + RM_ATTN_F_V, false, "VT");
	cudnnBackendDescriptor_t o = tensor(g, io, sh.q, sh.q_st, 1 + RM_ATTN_F_O, false, "O");
	cudnnBackendDescriptor_t stats = tensor(g, f, sh.row, sh.row_st, 1 + RM_ATTN_F_STATS, false, "stats");
	cudnnBackendDescriptor_t d_o = tensor(g, io, sh.q, sh.q_st, 1 + RM_ATTN_F_DO, false, "dO");
	cudnnBackendDescriptor_t dq = tensor(g, io, sh.q, sh.q_st, 1 + RM_ATTN_F_DQ, false, "dQ");
	cudnnBackendDescriptor_t dk = tensor(g, io, sh.kv, sh.kv_st, 1 + RM_ATTN_F_DK, false, "dK");
	cudnnBackendDescriptor_t dv = tensor(g, io, sh.kv, sh.kv_st, 1 + RM_ATTN_F_DV, false, "dV");
	cudnnBackendDescriptor_t dq_acc = tensor(g, f, sh.q, sh.q_st, 1 + RM_ATTN_F_DQ_ACCUM, false, "dQ_accum");
	cudnnBackendDescriptor_t ssum = tensor(g, f, sh.row, sh.row_st, 1 + RM_ATTN_F_SOFTMAX_SUM, false, "softmax_sum");
	/* softmax_sum = rowsum(dO * O) (times the dropout scale's inverse: 1) */
	cudnnBackendDescriptor_t doo = tensor(g, f, sh.q, sh.q_st, 0, false, "dO * O");
	pointwise(g, CUDNN_POINTWISE_MUL, f, -1, d_o, o, NULL, doo, "dO * O");
	cudnnBackendDescriptor_t rs = tensor(g, f, sh.row, sh.row_st, 0, false, "rowsum(dO * O)");
	reduction(g, CUDNN_REDUCE_TENSOR_ADD, doo, rs, "rowsum(dO * O)");
	pointwise(g, CUDNN_POINTWISE_MUL, f, -1, rs, scalar(g, UID_ONE, "1"), NULL, ssum, "softmax_sum");
	/* P = exp(S - stats), recomputed */
	cudnnBackendDescriptor_t s = masked_scores(g, k, &sh, q, kt);
	cudnnBackendDescriptor_t sub = tensor(g, f, sh.ss, sh.ss_st, 0, false, "S - stats");
	pointwise(g, CUDNN_POINTWISE_SUB, f, -1, s, stats, NULL, sub, "S - stats");
	cudnnBackendDescriptor_t p = tensor(g, f, sh.ss, sh.ss_st, 0, false, "P");
	pointwise(g, CUDNN_POINTWISE_EXP, f, -1, sub, NULL, NULL, p, "P");
	/* dV = P^T dO */
	cudnnBackendDescriptor_t pt = tensor(g, io, sh.ss, sh.sst_st, 0, false, "P^T");
	reshape(g, p, pt, "P^T");
	grad_matmul(g, k, &sh, pt, d_o, dv, "dV = P^T dO");
	/* dS = (dO VT - softmax_sum) * P * scale */
	cudnnBackendDescriptor_t dp = tensor(g, f, sh.ss, sh.ss_st, 0, false, "dP = dO VT");
	matmul(g, d_o, vt, dp, "dP = dO VT");
	cudnnBackendDescriptor_t dps = tensor(g, f, sh.ss, sh.ss_st, 0, false, "dP - softmax_sum");
	pointwise(g, CUDNN_POINTWISE_SUB, f, -1, dp, ssum, NULL, dps, "dP - softmax_sum");
	cudnnBackendDescriptor_t ds0 = tensor(g, f, sh.ss, sh.ss_st, 0, false, "(dP - sum) * P");
	pointwise(g, CUDNN_POINTWISE_MUL, f, -1, dps, p, NULL, ds0, "(dP - sum) * P");
	cudnnBackendDescriptor_t ds = tensor(g, f, sh.ss, sh.ss_st, 0, false, "dS");
	pointwise(g, CUDNN_POINTWISE_MUL, f, -1, ds0, scalar(g, UID_SCALE, "scale"), NULL, ds, "dS");
	/* dK = dS^T Q */
	cudnnBackendDescriptor_t dst = tensor(g, io, sh.ss, sh.sst_st, 0, false, "dS^T");
	reshape(g, ds, dst, "dS^T");
	grad_matmul(g, k, &sh, dst, q, dk, "dK = dS^T Q");
	/* dQ = dS K, accumulated in fp32, then written in the I/O type */
	cudnnBackendDescriptor_t kk = tensor(g, io, sh.kv, sh.kv_st, 0, false, "K = reshape(KT)");
	reshape(g, kt, kk, "K = reshape(KT)");
	matmul(g, ds, kk, dq_acc, "dQ_accum = dS K");
	pointwise(g, CUDNN_POINTWISE_IDENTITY, f, -1, dq_acc, NULL, NULL, dq, "dQ = dQ_accum");
}

/* The first engine configuration of mode whose execution plan finalizes, or NULL. */
static cudnnBackendDescriptor_t plan_with(builder *g, cudnnBackendDescriptor_t graph, cudnnBackendHeurMode_t mode,
					  char *last, size_t n)
{
	cudnnBackendDescriptor_t heur = NULL, plan = NULL;
	if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur) != CUDNN_STATUS_SUCCESS)
		return NULL;
	cudnnBackendDescriptor_t cfg[8] = {NULL};
	int64_t count = 0;
	cudnnStatus_t st = cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
						    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
	if (st == CUDNN_STATUS_SUCCESS)
		st = cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
	if (st == CUDNN_STATUS_SUCCESS)
		st = cudnnBackendFinalize(heur);
	for (int i = 0; st == CUDNN_STATUS_SUCCESS && i < 8; i++)
		st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg[i]);
	if (st == CUDNN_STATUS_SUCCESS)
		st = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 8,
					      &count, cfg);
	if (st != CUDNN_STATUS_SUCCESS)
		snprintf(last, n, "engine heuristics (mode %s): %s", mode == CUDNN_HEUR_MODE_A ? "A" : "fallback",
			 cudnnGetErrorString(st));
	for (int64_t i = 0; st == CUDNN_STATUS_SUCCESS && i < count && !plan; i++) {
		cudnnBackendDescriptor_t p = NULL;
		cudnnStatus_t ps = cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &p);
		if (ps == CUDNN_STATUS_SUCCESS)
			ps = cudnnBackendSetAttribute(p, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &g->handle);
		if (ps == CUDNN_STATUS_SUCCESS)
			ps = cudnnBackendSetAttribute(p, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
						      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg[i]);
		if (ps == CUDNN_STATUS_SUCCESS)
			ps = cudnnBackendFinalize(p);
		if (ps == CUDNN_STATUS_SUCCESS) {
			plan = p;
		} else {
			snprintf(last, n, "cudnnBackendFinalize(execution plan, engine config %lld of %lld, mode %s): %s",
				 (long long)i + 1, (long long)count, mode == CUDNN_HEUR_MODE_A ? "A" : "fallback",
				 cudnnGetErrorString(ps));
			if (p)
				cudnnBackendDestroyDescriptor(p);
		}
	}
	if (st == CUDNN_STATUS_SUCCESS && count == 0)
		snprintf(last, n, "engine heuristics (mode %s): no engine for the SDPA graph",
			 mode == CUDNN_HEUR_MODE_A ? "A" : "fallback");
	for (int i = 0; i < 8; i++)
		if (cfg[i])
			cudnnBackendDestroyDescriptor(cfg[i]);
	cudnnBackendDestroyDescriptor(heur);
	return plan;
}

static sdpa_key key_of(const rm_attention_cost *a)
{
	const rm_attention_shape *s = &a->shape;
	sdpa_key k;
	memset(&k, 0, sizeof(k));
	k.b = s->batch, k.h = s->heads, k.hk = s->kv_heads > 0 ? s->kv_heads : s->heads, k.s = s->seq;
	k.d = s->head_dim, k.window = s->window, k.causal = s->causal, k.backward = a->backward, k.dtype = s->dtype;
	return k;
}

static int find_graph(const rmx_sdpa *s, const sdpa_key *k)
{
	for (int i = 0; i < s->n_graphs; i++)
		if (memcmp(&s->graphs[i].key, k, sizeof(*k)) == 0)
			return i;
	return -1;
}

rmx_sdpa *rmx_sdpa_create(int32_t n_ops, char *msg, size_t n)
{
	rmx_sdpa *s = (rmx_sdpa *)calloc(1, sizeof(rmx_sdpa));
	cudnnStatus_t st = cudnnCreate(&s->handle);
	if (st != CUDNN_STATUS_SUCCESS) {
		snprintf(msg, n, "cudnnCreate(&handle): %s", cudnnGetErrorString(st));
		free(s);
		return NULL;
	}
	s->version = cudnnGetVersion();
	s->n_ops = n_ops;
	s->packs = (cudnnBackendDescriptor_t *)calloc((size_t)n_ops + 1, sizeof(cudnnBackendDescriptor_t));
	s->pack_graph = (int *)calloc((size_t)n_ops + 1, sizeof(int));
	return s;
}

void rmx_sdpa_destroy(rmx_sdpa *s)
{
	if (!s)
		return;
	for (int32_t i = 0; i < s->n_ops; i++)
		if (s->packs[i])
			cudnnBackendDestroyDescriptor(s->packs[i]);
	for (int i = 0; i < s->n_graphs; i++) {
		if (s->graphs[i].plan)
			cudnnBackendDestroyDescriptor(s->graphs[i].plan);
		builder_destroy(s->graphs[i].descs);
	}
	free(s->packs);
	free(s->pack_graph);
	cudnnDestroy(s->handle);
	free(s);
}

void rmx_sdpa_version(char *out, size_t n)
{
	size_t v = cudnnGetVersion(); /* 9.x: major * 10000 + minor * 100 + patch */
	snprintf(out, n, "%zu.%zu.%zu", v / 10000, v / 100 % 100, v % 100);
}

int rmx_sdpa_prepare(rmx_sdpa *s, const rm_attention_cost *a, int64_t *workspace_bytes, char *msg, size_t n)
{
	sdpa_key k = key_of(a);
	int gi = find_graph(s, &k);
	if (gi >= 0) {
		*workspace_bytes = s->graphs[gi].workspace_bytes;
		return 0;
	}
	if (s->n_graphs == RMX_SDPA_MAX_GRAPHS) {
		snprintf(msg, n, "more than %d attention shapes", RMX_SDPA_MAX_GRAPHS);
		return -1;
	}
	builder *g = (builder *)calloc(1, sizeof(builder));
	g->handle = s->handle, g->msg = msg, g->n = n, g->next_uid = UID_VIRTUAL;
	if (k.backward)
		build_backward(g, &k);
	else
		build_forward(g, &k);
	cudnnBackendDescriptor_t graph = make(g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
	set(g, graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &s->handle, "operation graph");
	set(g, graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, g->n_ops, g->ops, "operation graph");
	finalize(g, graph, "operation graph");
	cudnnBackendDescriptor_t plan = NULL;
	if (!g->failed) {
		char last[256] = "";
		plan = plan_with(g, graph, CUDNN_HEUR_MODE_A, last, sizeof(last));
		if (!plan)
			plan = plan_with(g, graph, CUDNN_HEUR_MODE_FALLBACK, last, sizeof(last));
		if (!plan) {
			snprintf(msg, n, "%s", last);
			g->failed = true;
		}
	}
	int64_t ws = 0;
	if (plan && !g->failed)
		CK(g, cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, NULL, &ws),
		   "execution plan workspace");
	if (g->failed) {
		if (plan)
			cudnnBackendDestroyDescriptor(plan);
		builder_destroy(g);
		return -1;
	}
	g->msg = NULL, g->n = 0; /* msg is the caller's buffer of this call only */
	sdpa_graph *sg = &s->graphs[s->n_graphs++];
	sg->key = k;
	sg->descs = g;
	sg->plan = plan;
	sg->workspace_bytes = ws;
	sg->scale = (float)(1.0 / sqrt((double)k.d));
	/* cudnn-frontend's mask value: the lowest float before cuDNN 9.10, -inf from it */
	sg->neg_inf = s->version < 91000 ? -3.402823466e38f : -INFINITY;
	sg->one = 1.0f;
	sg->window = (float)k.window;
	*workspace_bytes = ws;
	return 0;
}

int rmx_sdpa_run(rmx_sdpa *s, int32_t op, const rm_attention_cost *a, cudaStream_t stream,
		 void *const ptr[RM_ATTN_F_COUNT], void *workspace, char *msg, size_t n)
{
	sdpa_key k = key_of(a);
	int gi = find_graph(s, &k);
	if (gi < 0 || op < 0 || op >= s->n_ops) {
		snprintf(msg, n, "attention op %d has no prepared cuDNN graph", (int)op);
		return -1;
	}
	sdpa_graph *sg = &s->graphs[gi];
	cudnnStatus_t st = cudnnSetStream(s->handle, stream);
	if (st != CUDNN_STATUS_SUCCESS) {
		snprintf(msg, n, "cudnnSetStream(handle, stream): %s", cudnnGetErrorString(st));
		return -1;
	}
	int count = k.backward ? RM_ATTN_F_COUNT : RM_ATTN_F_DO;
	if (k.backward && s->version < 90600) {
		/* before cuDNN 9.6 the caller zeroes dQ_accum (cudnn-frontend's workspace modifications) */
		int64_t bytes = k.b * k.h * k.s * k.d * 4;
		cudaError_t e = cudaMemsetAsync(ptr[RM_ATTN_F_DQ_ACCUM], 0, (size_t)bytes, stream);
		if (e != cudaSuccess) {
			snprintf(msg, n, "cudaMemsetAsync(dQ_accum): %s", cudaGetErrorString(e));
			return -1;
		}
	}
	if (!s->packs[op] || s->pack_graph[op] != gi) {
		int64_t uids[RM_ATTN_F_COUNT + 4];
		void *data[RM_ATTN_F_COUNT + 4];
		int m = 0;
		for (int i = 0; i < count; i++)
			uids[m] = 1 + i, data[m++] = ptr[i];
		uids[m] = UID_SCALE, data[m++] = &sg->scale;
		if (k.causal)
			uids[m] = UID_NEG_INF, data[m++] = &sg->neg_inf;
		if (k.causal && k.window > 0 && k.window < k.s)
			uids[m] = UID_WINDOW, data[m++] = &sg->window;
		if (k.backward)
			uids[m] = UID_ONE, data[m++] = &sg->one;
		cudnnBackendDescriptor_t vp = NULL;
		st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
		if (st == CUDNN_STATUS_SUCCESS)
			st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, m, uids);
		if (st == CUDNN_STATUS_SUCCESS)
			st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, m, data);
		if (st == CUDNN_STATUS_SUCCESS)
			st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
		if (st == CUDNN_STATUS_SUCCESS)
			st = cudnnBackendFinalize(vp);
		if (st != CUDNN_STATUS_SUCCESS) {
			snprintf(msg, n, "cudnnBackendFinalize(variant pack): %s", cudnnGetErrorString(st));
			if (vp)
				cudnnBackendDestroyDescriptor(vp);
			return -1;
		}
		if (s->packs[op])
			cudnnBackendDestroyDescriptor(s->packs[op]);
		s->packs[op] = vp;
		s->pack_graph[op] = gi;
	}
	st = cudnnBackendExecute(s->handle, sg->plan, s->packs[op]);
	if (st != CUDNN_STATUS_SUCCESS) {
		snprintf(msg, n, "cudnnBackendExecute(SDPA %s): %s", k.backward ? "backward" : "forward",
			 cudnnGetErrorString(st));
		return -1;
	}
	return 0;
}

#else /* no cuDNN in this build */

struct rmx_sdpa {
	int unused;
};

rmx_sdpa *rmx_sdpa_create(int32_t n_ops, char *msg, size_t n)
{
	(void)n_ops;
	snprintf(msg, n, "cuDNN not available (this build found no libcudnn and cudnn_graph.h under cudatk_root)");
	return NULL;
}

void rmx_sdpa_destroy(rmx_sdpa *s)
{
	free(s);
}

void rmx_sdpa_version(char *out, size_t n)
{
	snprintf(out, n, "none");
}

int rmx_sdpa_prepare(rmx_sdpa *s, const rm_attention_cost *a, int64_t *workspace_bytes, char *msg, size_t n)
{
	(void)s, (void)a, (void)workspace_bytes;
	snprintf(msg, n, "cuDNN not available");
	return -1;
}

int rmx_sdpa_run(rmx_sdpa *s, int32_t op, const rm_attention_cost *a, cudaStream_t stream,
		 void *const ptr[RM_ATTN_F_COUNT], void *workspace, char *msg, size_t n)
{
	(void)s, (void)op, (void)a, (void)stream, (void)ptr, (void)workspace;
	snprintf(msg, n, "cuDNN not available");
	return -1;
}

#endif
