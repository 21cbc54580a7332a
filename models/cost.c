/*
 * Default cost model (remora/cost.h). Every constant cites its row in shared/reference/.
 */
#include <math.h>
#include <string.h>

#include "remora/cost.h"

static const char *const kind_names[RM_COST_KIND_COUNT] = {
	[RM_COST_GEMM] = "gemm",
	[RM_COST_ATTENTION] = "attention",
	[RM_COST_ELEMENTWISE] = "elementwise",
	[RM_COST_COLLECTIVE] = "collective",
	[RM_COST_COPY] = "copy",
};
static const char *const coll_names[RM_COLL_COUNT] = {
	[RM_COLL_ALL_GATHER] = "all_gather",   [RM_COLL_REDUCE_SCATTER] = "reduce_scatter",
	[RM_COLL_ALL_REDUCE] = "all_reduce",   [RM_COLL_ALL_TO_ALL] = "all_to_all",
	[RM_COLL_SEND_RECV] = "permute",
};
static const char *const copy_names[RM_COPY_DIR_COUNT] = {
	[RM_COPY_H2D] = "h2d",
	[RM_COPY_D2H] = "d2h",
	[RM_COPY_D2D] = "d2d",
};

static int find_name(const char *const *names, int count, const char *name)
{
	for (int i = 0; i < count; i++)
		if (strcmp(names[i], name) == 0)
			return i;
	return -1;
}

const char *rm_cost_kind_name(rm_cost_kind kind)
{
	return (unsigned)kind < RM_COST_KIND_COUNT ? kind_names[kind] : "unknown";
}
const char *rm_collective_name(rm_collective coll)
{
	return (unsigned)coll < RM_COLL_COUNT ? coll_names[coll] : "unknown";
}
const char *rm_copy_dir_name(rm_copy_dir dir)
{
	return (unsigned)dir < RM_COPY_DIR_COUNT ? copy_names[dir] : "unknown";
}
bool rm_cost_kind_parse(const char *name, rm_cost_kind *out)
{
	int i = find_name(kind_names, RM_COST_KIND_COUNT, name);
	if (i >= 0)
		*out = (rm_cost_kind)i;
	return i >= 0;
}
bool rm_collective_parse(const char *name, rm_collective *out)
{
	int i = find_name(coll_names, RM_COLL_COUNT, name);
	if (i >= 0)
		*out = (rm_collective)i;
	return i >= 0;
}
bool rm_copy_dir_parse(const char *name, rm_copy_dir *out)
{
	int i = find_name(copy_names, RM_COPY_DIR_COUNT, name);
	if (i >= 0)
		*out = (rm_copy_dir)i;
	return i >= 0;
}

rm_cost_resource rm_cost_op_resource(const rm_cost_op *op)
{
	switch (op->kind) {
	case RM_COST_GEMM:
	case RM_COST_ATTENTION:
		return RM_RES_SM;
	case RM_COST_ELEMENTWISE:
		return RM_RES_HBM;
	case RM_COST_COLLECTIVE:
		return RM_RES_NVLINK;
	case RM_COST_COPY:
		return op->copy.dir == RM_COPY_H2D   ? RM_RES_PCIE_H2D
		       : op->copy.dir == RM_COPY_D2H ? RM_RES_PCIE_D2H
						     : RM_RES_HBM;
	default:
		return RM_RES_SM;
	}
}

/* ---- compute ---------------------------------------------------------------------------- */

double rm_cost_gemm_flops(const rm_gemm_shape *g)
{
	return 2.0 * (double)g->batch * (double)g->m * (double)g->n * (double)g->k;
}

/* Achievable GEMM rate in FLOP/s for a dtype on the whole GPU. */
static double gemm_rate(rm_dtype dtype, const rm_hw_profile *hw)
{
	switch (dtype) {
	case RM_DTYPE_FP8_E4M3:
	case RM_DTYPE_FP8_E5M2:
		if (hw->gemm_fp8_TFLOPs > 0)
			return hw->gemm_fp8_TFLOPs * RM_TB;
		return hw->gemm_bf16_TFLOPs * RM_TB;
	case RM_DTYPE_FP32:
	case RM_DTYPE_INT32:
		/* TF32 tensor cores at the same efficiency as BF16 (hardware.md peaks). */
		return hw->gemm_bf16_TFLOPs * RM_TB * hw->tf32_TFLOPs / hw->bf16_TFLOPs;
	default:
		return hw->gemm_bf16_TFLOPs * RM_TB;
	}
}

static double ceil_div(double a, double b)
{
	return ceil(a / b);
}

double rm_cost_gemm_s(const rm_gemm_shape *g, const rm_hw_profile *hw, int sms)
{
	double sm_count = hw->sm_count;
	double avail = sms > 0 && sms < sm_count ? sms : sm_count;
	double flops = rm_cost_gemm_flops(g);
	if (flops <= 0)
		return 0;
	double tiles = (double)g->batch * ceil_div((double)g->m, hw->gemm_tile_m) *
		       ceil_div((double)g->n, hw->gemm_tile_n);
	double q = 1.0;
	if (tiles > avail)
		q = ceil(tiles / avail) * avail / tiles;
	double rate = gemm_rate(g->dtype, hw) * avail / sm_count;
	return hw->gemm_overhead_us * 1e-6 + flops / rate * q;
}

double rm_cost_attention_flops(const rm_attention_cost *a)
{
	const rm_attention_shape *s = &a->shape;
	/* QK^T and PV: 2 matmuls of 2*s*s*d FLOPs per head (FlashAttention paper convention). */
	double f = 4.0 * (double)s->batch * (double)s->heads * (double)s->seq * (double)s->seq *
		   (double)s->head_dim;
	if (s->causal && s->fused && s->window > 0 && s->window < s->seq) {
		/* a fused kernel skips the key blocks outside the window: query i attends min(i+1, w)
		 * keys, w(w+1)/2 + (s-w)w pairs instead of ~s^2/2 (FlashAttention-2 window_size) */
		double w = (double)s->window, n = (double)s->seq;
		f = 4.0 * (double)s->batch * (double)s->heads * (double)s->head_dim * (w * (w + 1.0) / 2.0 + (n - w) * w);
	} else if (s->causal) {
		f *= 0.5;
	}
	if (a->backward)
		f *= 2.5;
	return f;
}

double rm_cost_attention_s(const rm_attention_cost *a, const rm_hw_profile *hw)
{
	const rm_attention_shape *s = &a->shape;
	double flops = rm_cost_attention_flops(a);
	if (flops <= 0)
		return 0;
	double t_flops = hw->gemm_overhead_us * 1e-6 + flops / gemm_rate(s->dtype, hw);
	/* HBM traffic: q, o (and their gradients) over heads, k, v over kv_heads; the unfused
	 * kernel also writes and reads the s x s score matrix per head. */
	double es = rm_dtype_size(s->dtype);
	double qo = 2.0 * (double)s->batch * (double)s->heads * (double)s->seq * (double)s->head_dim;
	double kv = 2.0 * (double)s->batch * (double)s->kv_heads * (double)s->seq *
		    (double)s->head_dim;
	double bytes = (qo + kv) * es * (a->backward ? 2.0 : 1.0);
	if (!s->fused)
		bytes += 2.0 * (double)s->batch * (double)s->heads * (double)s->seq *
			 (double)s->seq * es * (a->backward ? 2.0 : 1.0);
	double t_bytes = bytes / (hw->hbm_achievable_GBps * RM_GB);
	return t_flops > t_bytes ? t_flops : t_bytes;
}

double rm_cost_elementwise_s(const rm_elementwise_cost *e, const rm_hw_profile *hw)
{
	double t = (double)(e->bytes_read + e->bytes_written) / (hw->hbm_achievable_GBps * RM_GB);
	double tf = e->flops / (hw->fp32_TFLOPs * RM_TB);
	return tf > t ? tf : t;
}

double rm_cost_copy_s(const rm_copy_cost *c, const rm_hw_profile *hw)
{
	switch (c->dir) {
	case RM_COPY_H2D:
		return (double)c->bytes / (hw->h2d_GBps * RM_GB);
	case RM_COPY_D2H:
		return (double)c->bytes / (hw->d2h_GBps * RM_GB);
	default:
		/* A copy reads and writes every byte; BabelStream's copy figure counts both. */
		return 2.0 * (double)c->bytes / (hw->hbm_achievable_GBps * RM_GB);
	}
}

/* The NCCL query of a collective op; a group too large for span nodes spreads over as many
 * nodes as it needs (the program format cannot know the node size). */
static rm_coll_query collective_query(const rm_collective_cost *c, const rm_hw_profile *hw)
{
	int gpn = hw->gpus_per_node >= 1 ? (int)hw->gpus_per_node : 8;
	int nodes = c->span >= 1 ? c->span : 1;
	if (nodes > c->group_size)
		nodes = c->group_size;
	if (c->group_size / nodes > gpn || c->group_size % nodes != 0) {
		nodes = (c->group_size + gpn - 1) / gpn;
		while (c->group_size % nodes != 0)
			nodes++;
	}
	return rm_coll_query_make(c->op, c->bytes, c->group_size, nodes);
}

static bool collective_estimate(const rm_collective_cost *c, const rm_hw_profile *hw,
				rm_coll_estimate *e)
{
	if (c->group_size <= 1 || c->bytes <= 0)
		return false;
	rm_nccl_model m;
	if (rm_nccl_model_init(&m, hw, NULL, NULL) != RM_OK)
		return false;
	rm_coll_query q = collective_query(c, hw);
	return rm_nccl_estimate(&m, &q, e, NULL) == RM_OK;
}

double rm_cost_collective_s(const rm_collective_cost *c, const rm_hw_profile *hw)
{
	rm_coll_estimate e;
	return collective_estimate(c, hw, &e) ? e.time_us * 1e-6 : 0.0;
}

int rm_cost_collective_channels(const rm_collective_cost *c, const rm_hw_profile *hw)
{
	rm_coll_estimate e;
	return collective_estimate(c, hw, &e) ? e.channels : 0;
}

/* ---- the default model ------------------------------------------------------------------ */

static double default_op_time_s(const rm_cost_model *self, const rm_cost_op *op,
				const rm_hw_profile *hw)
{
	switch (op->kind) {
	case RM_COST_GEMM:
		return rm_cost_gemm_s(&op->gemm, hw, 0);
	case RM_COST_ATTENTION:
		return rm_cost_attention_s(&op->attention, hw);
	case RM_COST_ELEMENTWISE:
		return rm_cost_elementwise_s(&op->elementwise, hw);
	case RM_COST_COLLECTIVE:
		return rm_cost_collective_s(&op->collective, hw);
	case RM_COST_COPY:
		return rm_cost_copy_s(&op->copy, hw);
	default:
		return 0;
	}
}

static int default_sms_held(const rm_cost_model *self, const rm_cost_op *op,
			    const rm_hw_profile *hw)
{
	if (op->kind == RM_COST_COLLECTIVE)
		return rm_cost_collective_channels(&op->collective, hw);
	return 0;
}

static const rm_cost_model default_model = {
	.name = "default",
	.op_time_s = default_op_time_s,
	.sms_held = default_sms_held,
	.data = NULL,
};

const rm_cost_model *rm_cost_model_default(void)
{
	return &default_model;
}

static bool nccl_estimate(const rm_cost_model *self, const rm_collective_cost *c, const rm_hw_profile *hw,
			  rm_coll_estimate *e)
{
	const rm_cost_nccl *cn = self->data;
	if (c->group_size <= 1 || c->bytes <= 0)
		return false;
	rm_coll_query q = collective_query(c, hw);
	return rm_nccl_estimate(&cn->nccl, &q, e, NULL) == RM_OK;
}

static double nccl_op_time_s(const rm_cost_model *self, const rm_cost_op *op, const rm_hw_profile *hw)
{
	if (op->kind != RM_COST_COLLECTIVE)
		return default_op_time_s(self, op, hw);
	rm_coll_estimate e;
	return nccl_estimate(self, &op->collective, hw, &e) ? e.time_us * 1e-6 : 0.0;
}

static int nccl_sms_held(const rm_cost_model *self, const rm_cost_op *op, const rm_hw_profile *hw)
{
	if (op->kind != RM_COST_COLLECTIVE)
		return 0;
	rm_coll_estimate e;
	return nccl_estimate(self, &op->collective, hw, &e) ? e.channels : 0;
}

void rm_cost_nccl_init(rm_cost_nccl *c, const rm_nccl_model *nccl)
{
	c->base = (rm_cost_model){.name = "nccl", .op_time_s = nccl_op_time_s, .sms_held = nccl_sms_held, .data = c};
	c->nccl = *nccl;
}
