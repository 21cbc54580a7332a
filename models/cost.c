/*
 * Default cost model (remora/cost.h). Every constant cites its row in docs/reference/.
 */
#include <math.h>
#include <string.h>
#include <strings.h>

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
	[RM_COPY_P2P] = "p2p",
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
		/* a group across nodes is bound by its NICs: it shares them with the other groups
		 * across nodes, not NVLink with the groups inside one */
		return op->collective.span > 1 ? RM_RES_NET : RM_RES_NVLINK;
	case RM_COST_COPY:
		return op->copy.dir == RM_COPY_H2D   ? RM_RES_PCIE_H2D
		       : op->copy.dir == RM_COPY_D2H ? RM_RES_PCIE_D2H
		       : op->copy.dir == RM_COPY_P2P ? RM_RES_NVLINK
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

double rm_cost_power_factor(const rm_hw_profile *hw)
{
	if (hw->power_W > 0 && hw->tdp_W > 0 && hw->power_W < hw->tdp_W)
		return hw->power_W / hw->tdp_W;
	return 1.0;
}

/* Achievable GEMM rate in FLOP/s for a dtype on the whole GPU, at the TDP. */
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
		/* TF32 tensor cores at the same efficiency as BF16 (docs/reference/hardware.md peaks). */
		return hw->gemm_bf16_TFLOPs * RM_TB * hw->tf32_TFLOPs / hw->bf16_TFLOPs;
	default:
		return hw->gemm_bf16_TFLOPs * RM_TB;
	}
}

static double ceil_div(double a, double b)
{
	return ceil(a / b);
}

double rm_cost_gemm_tiles(const rm_gemm_shape *g, const rm_hw_profile *hw)
{
	if (hw->gemm_tile_m <= 0 || hw->gemm_tile_n <= 0)
		return 0;
	return (double)g->batch * ceil_div((double)g->m, hw->gemm_tile_m) * ceil_div((double)g->n, hw->gemm_tile_n);
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
	double fill = hw->gemm_k_overhead > 0 ? ((double)g->k + hw->gemm_k_overhead) / (double)g->k : 1.0;
	double rate = gemm_rate(g->dtype, hw) * rm_cost_power_factor(hw) * avail / sm_count;
	double t = flops / rate * q * fill;
	double t_mem = rm_cost_gemm_min_bytes(g) / (hw->hbm_achievable_GBps * RM_GB);
	return hw->gemm_overhead_us * 1e-6 + (t_mem > t ? t_mem : t);
}

double rm_cost_gemm_min_bytes(const rm_gemm_shape *g)
{
	double in = rm_dtype_size(g->dtype), out = in < 2 ? 2 : in; /* fp8 GEMMs write bf16 */
	double b = (double)g->batch;
	return b * ((double)g->m * (double)g->k + (double)g->k * (double)g->n) * in + b * (double)g->m * (double)g->n * out;
}

/* The head dim of the values and the output: v_head_dim, or head_dim when unset. */
static double value_head_dim(const rm_attention_shape *s)
{
	return (double)(s->v_head_dim > 0 ? s->v_head_dim : s->head_dim);
}

double rm_cost_attention_flops(const rm_attention_cost *a)
{
	const rm_attention_shape *s = &a->shape;
	/* QK^T and PV: 2*s*s*d and 2*s*s*d_v FLOPs per head (FlashAttention paper convention);
	 * the backward's recomputed QK^T, dQ and dK contract d, dP and dV d_v */
	double d = (double)s->head_dim, dv = value_head_dim(s);
	double per_pair = a->backward ? 2.0 * (3.0 * d + 2.0 * dv) : 2.0 * (d + dv);
	double pairs = (double)s->seq * (double)s->seq;
	if (s->causal && s->fused && s->window > 0 && s->window < s->seq) {
		/* a fused kernel skips the key blocks outside the window: query i attends min(i+1, w)
		 * keys, w(w+1)/2 + (s-w)w pairs instead of ~s^2/2 (FlashAttention-2 window_size) */
		double w = (double)s->window, n = (double)s->seq;
		pairs = w * (w + 1.0) / 2.0 + (n - w) * w;
	} else if (s->causal) {
		pairs *= 0.5;
	}
	return (double)s->batch * (double)s->heads * per_pair * pairs;
}

/* ---- the kernel model's measured tables --------------------------------------------------- */

static const char *const attention_kernel_names[RM_ATTN_KERNEL_COUNT] = {
	[RM_ATTN_FLASH2] = "flash2", [RM_ATTN_FLASH3] = "flash3", [RM_ATTN_CUDNN] = "cudnn"};

const char *rm_attention_kernel_name(rm_attention_kernel k)
{
	return (unsigned)k < RM_ATTN_KERNEL_COUNT ? attention_kernel_names[k] : "unknown";
}

bool rm_attention_kernel_parse(const char *name, rm_attention_kernel *out)
{
	for (int i = 0; i < RM_ATTN_KERNEL_COUNT; i++)
		if (strcasecmp(attention_kernel_names[i], name) == 0) {
			*out = (rm_attention_kernel)i;
			return true;
		}
	return false;
}

rm_kernel_config rm_kernel_config_default(void)
{
	return (rm_kernel_config){.attention = RM_ATTN_CUDNN, .fused = true, .host_us = 0};
}

/*
 * TFLOP/s of fused attention kernels, 16-bit, at sequence lengths 512, 1k, 2k, 4k, 8k, 16k, 32k
 * (0: not measured), FlashAttention FLOP convention (causal counts half), H100/H200 SXM at 700 W.
 * Sources, docs/reference/kernels-h100.md (rows in kernels-h100-attention.csv):
 * - forward, FlashAttention-2 / -3 / cuDNN hdim 64 and 256, cuDNN 512-1k: the FA3 paper's forward
 *   figure (section 2.2, fa3fig, H100 80GB SXM5);
 * - backward, non-causal, hdim 64/128: the FA3 paper's backward figure (section 2.3, fa3bwd);
 * - cuDNN hdim 128 from 2k: cuDNN 9.19 on H200 (same SMs and clocks), Llama-3.1 preset, both
 *   masks and passes measured (section 2.4, cudnn919); its 512 and 1k points are the fa3fig /
 *   fa3bwd cuDNN rows scaled by the 9.19/figure ratio at 2k (633/617 forward, 504/465 backward);
 * - FlashAttention-2 causal backward: from its causal forward + backward figure (fa2fig) and the
 *   causal forward: bwd = 2.5 / (3.5 / fwd_bwd - 1 / fwd) (the 3.5x / 2.5x FLOP convention);
 * - other causal backward rows (no figure): the non-causal backward x (causal / non-causal
 *   forward) at the same length; on cuDNN 9.19, where both are measured, that rule is within 4%
 *   (2k: 504 x 484/633 = 385 against 370 measured; 8k: 541 against 541).
 * Head dim 256 backward is not measured: hdim 128's rows stand in for it.
 */
#define ATTN_POINTS 7
typedef struct attention_row {
	rm_attention_kernel kernel;
	bool backward, causal;
	int head_dim;
	double tflops[ATTN_POINTS];
} attention_row;

static const attention_row attention_rows[] = {
	{RM_ATTN_FLASH2, false, true, 64, {180, 229, 262, 284, 295, 299, 0}},
	{RM_ATTN_FLASH2, false, true, 128, {191, 260, 298, 319, 333, 335, 0}},
	{RM_ATTN_FLASH2, false, true, 256, {208, 251, 278, 293, 297, 298, 0}},
	{RM_ATTN_FLASH2, false, false, 64, {282, 306, 318, 321, 322, 324, 0}},
	{RM_ATTN_FLASH2, false, false, 128, {309, 350, 362, 368, 370, 370, 0}},
	{RM_ATTN_FLASH2, false, false, 256, {275, 313, 321, 323, 324, 326, 0}},
	{RM_ATTN_FLASH2, true, true, 64, {129.8, 180.3, 221.8, 247.6, 265.1, 278.4, 0}},
	{RM_ATTN_FLASH2, true, true, 128, {154, 208.5, 253.8, 285.1, 299, 325.3, 0}},
	{RM_ATTN_FLASH2, true, false, 64, {198, 238, 264, 279, 287, 291, 0}},
	{RM_ATTN_FLASH2, true, false, 128, {214, 260, 291, 310, 318, 322, 0}},
	{RM_ATTN_FLASH3, false, true, 64, {197, 265, 371, 420, 460, 473, 0}},
	{RM_ATTN_FLASH3, false, true, 128, {292, 423, 521, 579, 602, 616, 0}},
	{RM_ATTN_FLASH3, false, true, 256, {286, 427, 537, 612, 628, 642, 0}},
	{RM_ATTN_FLASH3, false, false, 64, {333, 392, 460, 476, 496, 497, 0}},
	{RM_ATTN_FLASH3, false, false, 128, {467, 565, 625, 638, 646, 648, 0}},
	{RM_ATTN_FLASH3, false, false, 256, {482, 625, 707, 736, 746, 756, 0}},
	{RM_ATTN_FLASH3, true, true, 64, {160.9, 245.4, 340.4, 399.7, 437.7, 451.1, 0}},
	{RM_ATTN_FLASH3, true, true, 128, {197.6, 317.4, 417.6, 491.9, 520.9, 533.3, 0}},
	{RM_ATTN_FLASH3, true, false, 64, {272, 363, 422, 453, 472, 474, 0}},
	{RM_ATTN_FLASH3, true, false, 128, {316, 424, 501, 542, 559, 561, 0}},
	{RM_ATTN_CUDNN, false, true, 64, {225, 288, 334, 363, 379, 388, 0}},
	{RM_ATTN_CUDNN, false, true, 128, {315, 410, 484, 591, 644, 673, 688}},
	{RM_ATTN_CUDNN, false, true, 256, {308, 391, 450, 483, 497, 509, 0}},
	{RM_ATTN_CUDNN, false, false, 64, {335, 373, 395, 408, 412, 413, 0}},
	{RM_ATTN_CUDNN, false, false, 128, {509.9, 588.9, 633, 671, 691, 702, 693}},
	{RM_ATTN_CUDNN, false, false, 256, {470, 546, 580, 581, 580, 581, 0}},
	{RM_ATTN_CUDNN, true, true, 64, {178.7, 268.7, 334, 371, 397.4, 406.8, 0}},
	{RM_ATTN_CUDNN, true, true, 128, {204.2, 307.9, 370, 474, 541, 579, 581}},
	{RM_ATTN_CUDNN, true, false, 64, {266, 348, 395, 417, 432, 433, 0}},
	{RM_ATTN_CUDNN, true, false, 128, {330.6, 442.2, 504, 560, 594, 612, 572}},
};

static const attention_row *attention_find(rm_attention_kernel kernel, bool backward, bool causal, int head_dim)
{
	for (size_t i = 0; i < RM_ARRAY_SIZE(attention_rows); i++) {
		const attention_row *r = &attention_rows[i];
		if (r->kernel == kernel && r->backward == backward && r->causal == causal && r->head_dim == head_dim)
			return r;
	}
	return NULL;
}

double rm_cost_attention_tflops(rm_attention_kernel kernel, bool backward, bool causal, int64_t head_dim,
				int64_t seq)
{
	if ((unsigned)kernel >= RM_ATTN_KERNEL_COUNT)
		kernel = RM_ATTN_CUDNN;
	/* the nearest measured head dim in log2 (ties to the smaller) */
	int hd = head_dim <= 90 ? 64 : head_dim <= 181 ? 128 : 256;
	const attention_row *r = attention_find(kernel, backward, causal, hd);
	if (!r)
		r = attention_find(kernel, backward, causal, 128);
	double x = seq > 1 ? log2((double)seq) - 9.0 : 0.0; /* 0 at 512, 6 at 32k */
	int first = -1, last = -1;
	for (int i = 0; i < ATTN_POINTS; i++)
		if (r->tflops[i] > 0) {
			if (first < 0)
				first = i;
			last = i;
		}
	if (x <= first)
		return r->tflops[first];
	if (x >= last)
		return r->tflops[last];
	int i = (int)floor(x);
	double f = x - i;
	return r->tflops[i] + f * (r->tflops[i + 1] - r->tflops[i]);
}

double rm_cost_attention_s(const rm_attention_cost *a, const rm_hw_profile *hw, const rm_kernel_config *k)
{
	const rm_attention_shape *s = &a->shape;
	rm_kernel_config kd = rm_kernel_config_default();
	if (!k)
		k = &kd;
	double flops = rm_cost_attention_flops(a);
	if (flops <= 0)
		return 0;
	/* fused: the kernel's measured rate at the window's length; unfused: the GEMM rate */
	int64_t len = s->causal && s->window > 0 && s->window < s->seq ? s->window : s->seq;
	double rate = s->fused ? rm_cost_attention_tflops(k->attention, a->backward, s->causal, s->head_dim, len) * RM_TB
			       : gemm_rate(s->dtype, hw);
	double t_flops = hw->gemm_overhead_us * 1e-6 + flops / (rate * rm_cost_power_factor(hw));
	/* HBM traffic: q, o (and their gradients) over heads, k, v over kv_heads; the unfused
	 * kernel also writes and reads the s x s score matrix per head. */
	double es = rm_dtype_size(s->dtype);
	double dqv = (double)s->head_dim + value_head_dim(s); /* q, k at head_dim; v, o at v_head_dim */
	double qo = (double)s->batch * (double)s->heads * (double)s->seq * dqv;
	double kv = (double)s->batch * (double)s->kv_heads * (double)s->seq * dqv;
	double bytes = (qo + kv) * es * (a->backward ? 2.0 : 1.0);
	if (!s->fused)
		bytes += 2.0 * (double)s->batch * (double)s->heads * (double)s->seq *
			 (double)s->seq * es * (a->backward ? 2.0 : 1.0);
	double t_bytes = bytes / (hw->hbm_achievable_GBps * RM_GB);
	return t_flops > t_bytes ? t_flops : t_bytes;
}

/*
 * Fraction of the HBM peak reached by memory-bound kernels, docs/reference/kernels-h100.md
 * section 3 (rows in kernels-h100-membound.csv):
 * - pointwise, fused 0.87: fused ReLU^2 forward/backward 85-88%, Liger SwiGLU 91%; eager 0.54:
 *   torch eager SwiGLU is 3 kernels at 1.08 TB/s of fused traffic, 5/3 of that per kernel = 1.80
 *   TB/s = 54% per eager kernel;
 * - norm forward, fused 0.80: torch.compile RMSNorm forward 3.4-4.2 TB/s of 4.8 on H200 (71-88%;
 *   Liger 84% on H100);
 * - norm backward, fused 0.40: torch.compile 1.6-2.3 TB/s of 4.8 (33-48%);
 * - softmax / cross-entropy over the vocabulary, fused 0.51: torch.compile cross-entropy at a 32k
 *   vocabulary ~1.7 TB/s;
 * - gather / scatter-add: as pointwise;
 * - optimizer, 0.86 either way: PyTorch fused AdamW, 2.11 TB/s on the 2.45 TB/s part (86-100%).
 * Eager PyTorch runs every op as its decomposition (the op's eager_bytes and eager_kernels in the
 * op graph: an RMSNorm is 8 kernels and 36 B per element instead of one kernel and 4 B), each
 * kernel at the eager per-kernel rate 0.54; the norm rows "torch/Megatron 1.80 TB/s" of section 3
 * are fused kernels (36 B per element in 0.149 ms would be 14 TB/s), so no eager row of a
 * decomposed norm exists to take a rate from.
 */
static const double membound_efficiency[RM_MB_CLASS_COUNT][2] = {
	/*                  eager, fused */
	[RM_MB_POINTWISE] = {0.54, 0.87},
	[RM_MB_NORM] = {0.54, 0.80},
	[RM_MB_NORM_BWD] = {0.54, 0.40},
	[RM_MB_SOFTMAX] = {0.54, 0.51},
	[RM_MB_GATHER] = {0.54, 0.87},
	[RM_MB_OPTIMIZER] = {0.86, 0.86},
};

double rm_cost_membound_efficiency(rm_membound_class c, bool fused)
{
	if ((unsigned)c >= RM_MB_CLASS_COUNT)
		c = RM_MB_POINTWISE;
	return membound_efficiency[c][fused ? 1 : 0];
}

double rm_cost_elementwise_s(const rm_elementwise_cost *e, const rm_hw_profile *hw, const rm_kernel_config *k)
{
	rm_kernel_config kd = rm_kernel_config_default();
	if (!k)
		k = &kd;
	double bytes = (double)(e->bytes_read + e->bytes_written);
	if (bytes <= 0 && e->flops <= 0)
		return 0;
	double bw = hw->hbm_peak_GBps * RM_GB * rm_cost_membound_efficiency(e->cls, k->fused && !e->eager);
	double t = bytes / bw;
	double tf = e->flops / (hw->fp32_TFLOPs * RM_TB);
	if (tf > t)
		t = tf;
	double floor_s = (k->host_us > 0 ? k->host_us : hw->launch_us) * 1e-6 * (e->kernels > 1 ? e->kernels : 1);
	return t > floor_s ? t : floor_s;
}

/* One copy engine's device-to-device rate to a peer over NVLink, GB/s (RM_CE_D2D_GBPS_H100 on
 * NVLink 4's 450 GB/s per direction, hardware.md; scaled by the profile's NVLink bandwidth). */
static double ce_peer_GBps(const rm_hw_profile *hw)
{
	double bw = RM_CE_D2D_GBPS_H100 * (hw->nvlink_GBps > 0 ? hw->nvlink_GBps / 450.0 : 1.0);
	/* a board without NVSwitch (cluster.nvlink_mesh): one peer over the pair's links only */
	if (hw->nvlink_mesh_gpus >= 2 && hw->nvlink_links > 0)
		bw *= floor(hw->nvlink_links / (hw->nvlink_mesh_gpus - 1)) / hw->nvlink_links;
	return bw;
}

double rm_cost_copy_s(const rm_copy_cost *c, const rm_hw_profile *hw)
{
	switch (c->dir) {
	case RM_COPY_H2D:
		return (double)c->bytes / (hw->h2d_GBps * RM_GB);
	case RM_COPY_D2H:
		return (double)c->bytes / (hw->d2h_GBps * RM_GB);
	case RM_COPY_P2P:
		return c->bytes > 0 ? hw->launch_us * 1e-6 + (double)c->bytes / (ce_peer_GBps(hw) * RM_GB) : 0.0;
	default:
		/* A copy reads and writes every byte; BabelStream's copy figure counts both. */
		return 2.0 * (double)c->bytes / (hw->hbm_achievable_GBps * RM_GB);
	}
}

rm_coll_query rm_cost_collective_query(const rm_collective_cost *c, const rm_hw_profile *hw)
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
	rm_coll_query q = rm_cost_collective_query(c, hw);
	return rm_nccl_estimate(&m, &q, e, NULL) == RM_OK;
}

double rm_cost_collective_hbm_GBps(const rm_collective_cost *c, double time_s)
{
	if (c->group_size <= 1 || c->bytes <= 0 || !(time_s > 0))
		return 0;
	double g = (double)c->group_size;
	/* ring all-reduce moves 2 (g-1)/g of the buffer per GPU each way; the others (g-1)/g */
	double wire = (c->op == RM_COLL_ALL_REDUCE ? 2.0 : 1.0) * (g - 1.0) / g * (double)c->bytes;
	if (c->op == RM_COLL_SEND_RECV)
		wire = (double)c->bytes;
	return 3.0 * wire / time_s / RM_GB;
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
		return rm_cost_attention_s(&op->attention, hw, NULL);
	case RM_COST_ELEMENTWISE:
		return rm_cost_elementwise_s(&op->elementwise, hw, NULL);
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
	rm_coll_query q = rm_cost_collective_query(c, hw);
	return rm_nccl_estimate(&cn->nccl, &q, e, NULL) == RM_OK;
}

double rm_cost_ce_all_gather_s(const rm_collective_cost *c, const rm_hw_profile *hw)
{
	if (c->op != RM_COLL_ALL_GATHER || c->span > 1)
		return -1;
	if (c->group_size <= 1 || c->bytes <= 0)
		return 0;
	double bw_GBps = ce_peer_GBps(hw);
	double n = c->group_size;
	return hw->launch_us * 1e-6 + (n - 1) / n * (double)c->bytes / (bw_GBps * 1e9);
}

/* The op is a collective the copy engines run under this configuration. */
static bool on_copy_engines(const rm_cost_nccl *cn, const rm_cost_op *op)
{
	return cn->kernels.ce_collectives && op->kind == RM_COST_COLLECTIVE && op->collective.op == RM_COLL_ALL_GATHER &&
	       op->collective.span <= 1;
}

static double nccl_op_time_s(const rm_cost_model *self, const rm_cost_op *op, const rm_hw_profile *hw)
{
	const rm_cost_nccl *cn = self->data;
	if (on_copy_engines(cn, op))
		return rm_cost_ce_all_gather_s(&op->collective, hw);
	if (op->kind == RM_COST_ATTENTION)
		return rm_cost_attention_s(&op->attention, hw, &cn->kernels);
	if (op->kind == RM_COST_ELEMENTWISE)
		return rm_cost_elementwise_s(&op->elementwise, hw, &cn->kernels);
	if (op->kind != RM_COST_COLLECTIVE)
		return default_op_time_s(self, op, hw);
	rm_coll_estimate e;
	return nccl_estimate(self, &op->collective, hw, &e) ? e.time_us * 1e-6 : 0.0;
}

static int nccl_sms_held(const rm_cost_model *self, const rm_cost_op *op, const rm_hw_profile *hw)
{
	if (op->kind != RM_COST_COLLECTIVE || on_copy_engines(self->data, op))
		return 0;
	rm_coll_estimate e;
	return nccl_estimate(self, &op->collective, hw, &e) ? e.channels : 0;
}

static bool nccl_net_load(const rm_cost_model *self, const rm_cost_op *op, const rm_hw_profile *hw, double time_s,
			  rm_net_load *out)
{
	const rm_cost_nccl *cn = self->data;
	if (op->kind != RM_COST_COLLECTIVE || on_copy_engines(cn, op) || op->collective.group_size <= 1 ||
	    op->collective.bytes <= 0)
		return false;
	rm_coll_query q = rm_cost_collective_query(&op->collective, hw);
	return rm_nccl_net_load(&cn->nccl, &q, time_s * 1e6, out);
}

void rm_cost_nccl_init(rm_cost_nccl *c, const rm_nccl_model *nccl)
{
	c->base = (rm_cost_model){.name = "nccl", .op_time_s = nccl_op_time_s, .sms_held = nccl_sms_held, .data = c,
				  .net_load = nccl->fabric.kind != RM_FABRIC_NONE ? nccl_net_load : NULL};
	c->nccl = *nccl;
	c->kernels = rm_kernel_config_default();
}
