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
	[RM_COLL_PERMUTE] = "permute",
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
	if (s->causal)
		f *= 0.5;
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

/* ---- collectives ------------------------------------------------------------------------ */

typedef struct coll_row {
	double bytes;
	double time_us;
} coll_row;

/* reference/nccl-h100-8gpu.csv, all_gather ring rows (65536 B .. 8 GiB). */
static const coll_row all_gather_rows[] = {
	{65536, 35.5},	    {524288, 39.6},	{1048576, 40.1},    {4194304, 41.8},
	{16777216, 70.7},   {67108864, 211},	{268435456, 733},   {1073741824, 2727},
	{8589934592, 20935},
};
/* reference/nccl-h100-8gpu.csv, reduce_scatter ring rows. */
static const coll_row reduce_scatter_rows[] = {
	{65536, 34.9},	    {524288, 38.0},	{1048576, 40.8},    {4194304, 41.5},
	{16777216, 71.9},   {67108864, 207},	{268435456, 720},   {1073741824, 2717},
	{8589934592, 20754},
};
/* reference/nccl-h100-8gpu.csv, all_reduce default rows (DGX H100; NVLS at large sizes). */
static const coll_row all_reduce_rows[] = {
	{8, 13.7},	   {65536, 19.5},     {524288, 20.7},	  {1048576, 27.4},
	{4194304, 54.2},   {16777216, 123.8}, {67108864, 325},	  {268435456, 1113},
	{1073741824, 4029}, {8589934592, 31307},
};

/* Piecewise linear in bytes through the rows: each segment is latency + bytes / bandwidth. */
static double table_time_us(const coll_row *rows, size_t n, double bytes)
{
	if (bytes <= rows[0].bytes)
		return rows[0].time_us;
	size_t i = 1;
	while (i < n - 1 && bytes > rows[i].bytes)
		i++;
	const coll_row *a = &rows[i - 1], *b = &rows[i];
	double us_per_byte = (b->time_us - a->time_us) / (b->bytes - a->bytes);
	return a->time_us + (bytes - a->bytes) * us_per_byte;
}

/* nccl-tests bus factor: busBW = algBW * factor (reference/README.md). */
static double bus_factor(rm_collective op, double n)
{
	if (op == RM_COLL_ALL_REDUCE)
		return 2.0 * (n - 1.0) / n;
	return (n - 1.0) / n;
}

double rm_cost_collective_s(const rm_collective_cost *c, const rm_hw_profile *hw)
{
	if (c->group_size <= 1 || c->bytes <= 0)
		return 0;
	double bytes = (double)c->bytes;
	double us;
	switch (c->op) {
	case RM_COLL_REDUCE_SCATTER:
		us = table_time_us(reduce_scatter_rows, RM_ARRAY_SIZE(reduce_scatter_rows), bytes);
		break;
	case RM_COLL_ALL_REDUCE:
		us = table_time_us(all_reduce_rows, RM_ARRAY_SIZE(all_reduce_rows), bytes);
		break;
	case RM_COLL_PERMUTE:
		/* nccl-model.md: ring Simple base latency 8.4 us + NVLink Simple step 3.4 us; bandwidth
		 * hardware.md 'raw P2P copy, one direction'. */
		return (8.4 + 3.4) * 1e-6 + bytes / (hw->p2p_GBps * RM_GB);
	default: /* all-gather, all-to-all */
		us = table_time_us(all_gather_rows, RM_ARRAY_SIZE(all_gather_rows), bytes);
		break;
	}
	double n = c->group_size;
	if (c->group_size != 8)
		us *= bus_factor(c->op, n) / bus_factor(c->op, 8.0);
	return us * 1e-6;
}

int rm_cost_collective_channels(const rm_collective_cost *c, const rm_hw_profile *hw)
{
	if (c->group_size <= 1)
		return 0;
	int channels = (int)hw->nccl_ring_channels;
	/* nccl-model.md: NVLS all-reduce beats ring LL above ~1.1 MB; it uses 16 channels. */
	if (c->op == RM_COLL_ALL_REDUCE && c->bytes > 1100000 && hw->nccl_nvls_channels > 0)
		channels = (int)hw->nccl_nvls_channels;
	/* nccl-model.md "Channels and SMs": 512 threads * 64 B per channel before all are used. */
	int64_t by_size = (c->bytes + 32767) / 32768;
	if (by_size < 1)
		by_size = 1;
	if (by_size < channels)
		channels = (int)by_size;
	return channels;
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
