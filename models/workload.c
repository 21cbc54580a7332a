/*
 * The transformer workload model (remora/workload.h): parameter counts, the per-GPU op graphs of
 * one micro-batch (embedding, one decoder layer, head), FLOPs and static memory.
 *
 * Conventions, with sources:
 * - A GEMM C[m,n] = A[m,k] B[k,n] executes 2*m*n*k FLOPs (multiply-add = 2); its backward is a
 *   data-gradient GEMM dA = dC B^T and a weight-gradient GEMM dB = A^T dC of the same FLOPs.
 * - Fused (flash) attention forward executes 4*b*a*d FLOPs per attended (query, key) pair (QK^T
 *   and PV); its backward 2.5x that (five matmuls instead of two: recomputed QK^T, dV, dP, dQ, dK;
 *   Dao 2023, FlashAttention-2, section 3). Causal attention attends s*(s+1)/2 pairs, a sliding
 *   window w attends min(i+1, w) keys at query i. Unfused attention computes all s*s scores.
 * - What the backward pass keeps follows Korthikanti et al. 2022 (docs/reference/activation-memory.md):
 *   a norm keeps its input, a projection its input (for the weight gradient), QK^T its two inputs,
 *   softmax its output, dropout its 1-byte mask, PV its two inputs, an activation its input,
 *   flash attention q, k, v, its output and the fp32 log-sum-exp per (row, head).
 * - FLOPs of memory-bound ops are per-element operation counts (below); their time comes from
 *   bytes, so these only feed FLOP totals, never MFU.
 */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "remora/workload.h"

/* Per-element FLOPs of memory-bound ops (operation counts, forward; backward about double). */
#define FLOPS_RMSNORM 4.0   /* square, accumulate, scale by rstd, scale by weight */
#define FLOPS_LAYERNORM 7.0 /* mean, centre, square, accumulate, rstd, weight, bias */
#define FLOPS_ROTARY 3.0    /* two multiplies and an add per element */
#define FLOPS_SOFTMAX 5.0   /* scale, mask, max, exp, normalise */
#define FLOPS_SILU 4.0
#define FLOPS_GELU 8.0 /* tanh approximation (gelu_new) */
#define FLOPS_RELU 1.0 /* max(x, 0) */
#define FLOPS_ADD 1.0
#define FLOPS_DROPOUT 2.0
#define FLOPS_LOSS 4.0 /* max, exp, accumulate, log per logit */

/* Ops a graph may hold (forward and backward: DeepSeek-V3's MoE layer with fp8 GEMMs, context
 * and expert parallelism has 98), and values (forward outputs, about 50 at most): the size
 * bounds below multiply one tensor by the value count. */
#define GRAPH_CAP 128
#define GRAPH_VALUES 96

static const struct {
	rm_dtype dtype;
	const char *name;
	int size;
} dtype_table[] = {
	{RM_DTYPE_FP32, "fp32", 4},         {RM_DTYPE_BF16, "bf16", 2},
	{RM_DTYPE_FP16, "fp16", 2},         {RM_DTYPE_FP8_E4M3, "fp8_e4m3", 1},
	{RM_DTYPE_FP8_E5M2, "fp8_e5m2", 1}, {RM_DTYPE_INT32, "int32", 4},
	{RM_DTYPE_UINT8, "uint8", 1},
};

int rm_dtype_size(rm_dtype dtype)
{
	assert((unsigned)dtype < RM_DTYPE_COUNT);
	return dtype_table[dtype].size;
}

const char *rm_dtype_name(rm_dtype dtype)
{
	return (unsigned)dtype < RM_DTYPE_COUNT ? dtype_table[dtype].name : "unknown";
}

bool rm_dtype_parse(const char *name, rm_dtype *out)
{
	static const struct {
		const char *alias;
		rm_dtype dtype;
	} aliases[] = {{"float32", RM_DTYPE_FP32}, {"bfloat16", RM_DTYPE_BF16},
		       {"float16", RM_DTYPE_FP16}};
	for (size_t i = 0; i < RM_ARRAY_SIZE(dtype_table); i++)
		if (strcasecmp(name, dtype_table[i].name) == 0) {
			*out = dtype_table[i].dtype;
			return true;
		}
	for (size_t i = 0; i < RM_ARRAY_SIZE(aliases); i++)
		if (strcasecmp(name, aliases[i].alias) == 0) {
			*out = aliases[i].dtype;
			return true;
		}
	return false;
}

static const char *const optimizer_names[RM_OPT_COUNT] = {
	[RM_OPT_ADAMW] = "adamw",
	[RM_OPT_SGD_MOMENTUM] = "sgd_momentum",
	[RM_OPT_SGD] = "sgd",
};

const char *rm_optimizer_name(rm_optimizer opt)
{
	return (unsigned)opt < RM_OPT_COUNT ? optimizer_names[opt] : "unknown";
}

bool rm_optimizer_parse(const char *name, rm_optimizer *out)
{
	if (strcasecmp(name, "adam") == 0) {
		*out = RM_OPT_ADAMW;
		return true;
	}
	for (int i = 0; i < RM_OPT_COUNT; i++)
		if (strcasecmp(name, optimizer_names[i]) == 0) {
			*out = (rm_optimizer)i;
			return true;
		}
	return false;
}

static const char *const membound_names[RM_MB_CLASS_COUNT] = {
	[RM_MB_POINTWISE] = "pointwise", [RM_MB_NORM] = "norm", [RM_MB_NORM_BWD] = "norm_bwd",
	[RM_MB_SOFTMAX] = "softmax",     [RM_MB_GATHER] = "gather", [RM_MB_OPTIMIZER] = "optimizer",
};

static const char *const loss_names[RM_LOSS_COUNT] = {"plain", "chunked", "fused"};

const char *rm_loss_kind_name(rm_loss_kind k)
{
	return (unsigned)k < RM_LOSS_COUNT ? loss_names[k] : "unknown";
}

bool rm_loss_kind_parse(const char *name, rm_loss_kind *out)
{
	for (int i = 0; i < RM_LOSS_COUNT; i++)
		if (strcasecmp(loss_names[i], name) == 0) {
			*out = (rm_loss_kind)i;
			return true;
		}
	return false;
}

static const char *const rope_names[RM_ROPE_COUNT] = {"complex", "real"};

const char *rm_rope_impl_name(rm_rope_impl r)
{
	return (unsigned)r < RM_ROPE_COUNT ? rope_names[r] : "unknown";
}

bool rm_rope_impl_parse(const char *name, rm_rope_impl *out)
{
	for (int i = 0; i < RM_ROPE_COUNT; i++)
		if (strcasecmp(rope_names[i], name) == 0) {
			*out = (rm_rope_impl)i;
			return true;
		}
	return false;
}

const char *rm_membound_class_name(rm_membound_class c)
{
	return (unsigned)c < RM_MB_CLASS_COUNT ? membound_names[c] : "unknown";
}

bool rm_membound_class_parse(const char *name, rm_membound_class *out)
{
	for (int i = 0; i < RM_MB_CLASS_COUNT; i++)
		if (strcmp(membound_names[i], name) == 0) {
			*out = (rm_membound_class)i;
			return true;
		}
	return false;
}

const char *rm_op_kind_name(rm_op_kind kind)
{
	static const char *const names[RM_OP_KIND_COUNT] = {"gemm", "attention", "elementwise", "collective"};
	return (unsigned)kind < RM_OP_KIND_COUNT ? names[kind] : "unknown";
}

const char *rm_phase_name(rm_phase phase)
{
	static const char *const names[RM_PHASE_COUNT] = {"fwd", "bwd_dgrad", "bwd_wgrad"};
	return (unsigned)phase < RM_PHASE_COUNT ? names[phase] : "unknown";
}

/* ---- checkpoint names ---- */

static const char *const canonical_names[] = {
	"layer_input",        "pre_attention_norm",  "dot_attention_query",
	"dot_attention_key",  "dot_attention_value", "rotary_query",
	"rotary_key",         "attention_scores",    "attention_probs",
	"attention_probs_dropout", "attention_probs_dropout_mask", "attention_context",
	"attention_lse",      "dot_attention_out",   "attention_out_dropout",
	"attention_out_dropout_mask", "attention_residual", "pre_mlp_norm",
	"dot_mlp_gate",       "dot_mlp_up",          "mlp_activation",
	"mlp_hidden",         "dot_mlp_out",         "mlp_out_dropout",
	"mlp_out_dropout_mask", "layer_output",
	/* tensor parallelism's collectives (docs/parallelism.md) */
	"attention_input_gathered", "attention_out_reduced", "mlp_input_gathered", "mlp_out_reduced",
	/* multi-head latent attention's down-projections and latent norms (DeepSeek-V3; its up-
	 * projections are dot_attention_query, _key, _value) */
	"dot_attention_query_a", "attention_query_a_norm", "dot_attention_kv_a", "attention_kv_a_norm",
	/* mixture-of-experts blocks (build_moe): the router, the dispatched tokens, the experts'
	 * grouped GEMMs, the combine and the shared expert */
	"moe_router", "moe_routing", "moe_dispatched", "moe_dispatched_a2a", "moe_gate", "moe_up",
	"moe_activation", "moe_hidden", "moe_down", "moe_combined_a2a", "moe_combined", "dot_shared_gate",
	"dot_shared_up", "shared_activation", "shared_hidden", "dot_shared_out", "dot_shared_expert_gate",
	"shared_gated", "moe_output",
};

static const struct {
	const char *alias;
	const char *canonical;
} checkpoint_aliases[] = {
	/* MaxText layers' checkpoint_name tags (docs/reference/remat-policies.md, MaxText section). */
	{"query_proj", "dot_attention_query"}, {"key_proj", "dot_attention_key"},
	{"value_proj", "dot_attention_value"}, {"out_proj", "dot_attention_out"},
	{"context", "attention_context"},      {"mlpwi_0", "dot_mlp_gate"},
	{"mlpwi_1", "dot_mlp_up"},             {"mlpwi", "dot_mlp_up"},
	{"mlpwo", "dot_mlp_out"},
};

const char *rm_checkpoint_canonical(const char *name)
{
	for (size_t i = 0; i < RM_ARRAY_SIZE(canonical_names); i++)
		if (strcmp(name, canonical_names[i]) == 0)
			return canonical_names[i];
	for (size_t i = 0; i < RM_ARRAY_SIZE(checkpoint_aliases); i++)
		if (strcmp(name, checkpoint_aliases[i].alias) == 0)
			return checkpoint_aliases[i].canonical;
	return NULL;
}

int rm_checkpoint_expand(const char *name, const char **out, int max)
{
	if (strcmp(name, "qkv_proj") == 0) {
		static const char *const qkv[] = {"dot_attention_query", "dot_attention_key",
						  "dot_attention_value"};
		int n = 0;
		for (; n < 3 && n < max; n++)
			out[n] = qkv[n];
		return n;
	}
	const char *c = rm_checkpoint_canonical(name);
	if (!c || max < 1)
		return 0;
	out[0] = c;
	return 1;
}

/* ---- parameter counts ---- */

bool rm_model_config_is_moe(const rm_model_config *m)
{
	return m->experts > 0;
}

/*
 * Attention of one layer. MLA (DeepSeek-V2/V3 modelling code): q_a_proj h x q_lora_rank, its
 * RMSNorm, q_b_proj q_lora_rank x heads*(nope + rope) (or q_proj h x heads*(nope + rope) without
 * q compression); kv_a_proj_with_mqa h x (kv_lora_rank + rope), its RMSNorm over kv_lora_rank,
 * kv_b_proj kv_lora_rank x heads*(nope + v); o_proj heads*v x h. Qwen3's q_norm and k_norm weigh
 * head_dim each.
 */
static int64_t attention_params(const rm_model_config *m)
{
	int64_t h = m->hidden;
	if (m->mla) {
		int64_t qk = m->qk_nope_head_dim + m->qk_rope_head_dim;
		int64_t q = m->q_lora_rank > 0
				    ? h * m->q_lora_rank + m->q_lora_rank + m->q_lora_rank * m->heads * qk
				    : h * m->heads * qk;
		int64_t kv = h * (m->kv_lora_rank + m->qk_rope_head_dim) + m->kv_lora_rank +
			     m->kv_lora_rank * m->heads * (m->qk_nope_head_dim + m->v_head_dim);
		return q + kv + m->heads * m->v_head_dim * h;
	}
	int64_t qd = m->heads * m->head_dim, kvd = m->kv_heads * m->head_dim;
	int64_t attn = h * qd + 2 * h * kvd + qd * h;
	if (m->qkv_bias)
		attn += qd + 2 * kvd;
	if (m->out_bias)
		attn += h;
	if (m->qk_norm)
		attn += 2 * m->head_dim;
	return attn;
}

/* One routed expert: a SwiGLU MLP without biases. */
static int64_t expert_params(const rm_model_config *m)
{
	return 3 * m->hidden * m->expert_ffn;
}

/* The MoE block of one layer: routed and shared experts, the router (h -> experts, no bias),
 * Qwen2-MoE's shared-expert gate (h -> 1) and DeepSeek-V3's per-expert selection bias. */
static int64_t moe_params(const rm_model_config *m)
{
	int64_t h = m->hidden;
	return m->experts * expert_params(m) + m->shared_experts * 3 * h * m->shared_ffn +
	       h * m->experts + (m->shared_gate ? h : 0) + (m->router_bias ? m->experts : 0);
}

/* A decoder layer with a dense MLP (every layer of a dense model). */
static int64_t layer_params(const rm_model_config *m)
{
	int64_t h = m->hidden;
	if (m->arch == RM_ARCH_RESIDUAL_MLP)
		return 2 * h * m->ffn; /* W1, W2: no norm, no attention, no biases */
	int64_t norm = m->norm == RM_NORM_LAYERNORM ? 2 * h : h;
	int64_t mlp = m->mlp == RM_MLP_SWIGLU ? 3 * h * m->ffn : 2 * h * m->ffn;
	if (m->out_bias)
		mlp += m->ffn + h;
	return 2 * norm + attention_params(m) + mlp;
}

rm_param_count rm_model_param_count(const rm_model_config *m)
{
	rm_param_count p = {0};
	int64_t h = m->hidden;
	p.embedding = m->vocab * h + (m->learned_pos ? m->max_pos * h : 0);
	p.per_dense_layer = layer_params(m);
	p.per_layer = p.per_dense_layer;
	p.layers = m->layers * p.per_layer;
	int64_t unchosen = 0; /* routed expert parameters a token does not use */
	if (rm_model_config_is_moe(m)) {
		int64_t moe_layers = m->layers - m->dense_layers;
		p.per_layer = 2 * h + attention_params(m) + moe_params(m); /* two RMSNorms */
		p.layers = m->dense_layers * p.per_dense_layer + moe_layers * p.per_layer;
		p.routed_experts = moe_layers * m->experts * expert_params(m);
		/* Mixtral 8x7B: 32 layers x (8 - 2) x 3 x 4096 x 14336 = 33,822,867,456 */
		unchosen = moe_layers * (m->experts - m->experts_per_tok) * expert_params(m);
		/* each module: a MoE layer, enorm and hnorm, eh_proj 2h -> h, its final norm */
		p.mtp = m->mtp_layers * (p.per_layer + 3 * h + 2 * h * h);
	}
	p.final_norm = m->arch == RM_ARCH_RESIDUAL_MLP ? 0 : m->norm == RM_NORM_LAYERNORM ? 2 * h : h;
	p.lm_head = m->tied ? 0 : m->vocab * h;
	p.total = p.embedding + p.layers + p.final_norm + p.lm_head;
	p.nonembedding = p.layers + p.final_norm + m->vocab * h;
	p.active = p.total - unchosen;
	p.active_nonembedding = p.nonembedding - unchosen;
	return p;
}

/* ---- training setup ---- */

rm_train_config rm_train_config_default(const rm_model_config *model)
{
	rm_train_config t = {
		.seq_len = model->max_pos < 4096 ? model->max_pos : 4096,
		.micro_batch = 1,
		.grad_accum = 1,
		.fsdp = 1,
		.dp_replicate = 1,
		.tp = 1,
		.ep = 1,
		.moe_imbalance = 1.0,
		.cp = 1,
		.pp = 1,
		.virtual_stages = 1,
		.loss_parallel = true,
		.zero = 3,
		.dtype = RM_DTYPE_BF16,
		.param_dtype = RM_DTYPE_BF16,
		.grad_dtype = RM_DTYPE_BF16,
		.optimizer_dtype = RM_DTYPE_FP32,
		.optimizer = RM_OPT_ADAMW,
		.master_weights = true,
		.fused_attention = true,
		.causal = true,
		.dropout = -1,
		.loss = RM_LOSS_PLAIN,
		.grad_clip = true,
		.gemm_dtype = RM_DTYPE_BF16,
	};
	return t;
}

static bool compute_dtype(rm_dtype d)
{
	return d == RM_DTYPE_BF16 || d == RM_DTYPE_FP16 || d == RM_DTYPE_FP32;
}

/*
 * Byte counts are int64 everywhere (tensors, graphs, training state, activations of all layers,
 * memory peaks that add several of them). Each derived count stays at or below 2^62 B (4 EiB),
 * so a sum of a few still fits; a model or setup beyond that is refused, not wrapped around.
 * The dimension caps of config.json (2^24 per dimension, 4096 layers) do not imply this bound:
 * hidden = ffn = vocab = 2^24 at 4096 layers is 8.07e18 parameters, 1.6e20 B of AdamW state.
 */
#define BYTES_LIMIT 4611686018427387904.0 /* 2^62 */
/* Most bytes of training state per parameter: fp32 weights, fp32 master copy, fp32 gradients and
 * AdamW's two fp32 moments (4 + 4 + 4 + 8). */
#define MAX_STATE_BYTES_PER_PARAM 20.0

static double max_d(double a, double b)
{
	return a > b ? a : b;
}

/* An upper bound of layer_params() in double (every bias and both norms counted). */
static double layer_params_bound(const rm_model_config *m)
{
	double h = (double)m->hidden, f = (double)m->ffn;
	double qd = (double)m->heads * (double)m->head_dim, kvd = (double)m->kv_heads * (double)m->head_dim;
	return h * (2.0 * qd + 2.0 * kvd) + 3.0 * h * f + qd + 2.0 * kvd + f + 6.0 * h;
}

/* Checks in double, before any int64 product is formed, that the setup stays within BYTES_LIMIT:
 * one tensor (times the GRAPH_VALUES values a graph may hold), the training state of all parameters. */
static rm_status check_size_bounds(const rm_model_config *m, const rm_train_config *t, rm_error *err)
{
	double h = (double)m->hidden;
	double qd = (double)m->heads * (double)m->head_dim, kvd = (double)m->kv_heads * (double)m->head_dim;
	double width = max_d(max_d(h, (double)m->ffn), max_d((double)m->vocab, max_d(qd, kvd)));
	double tokens = (double)t->seq_len * (double)t->micro_batch;
	double act = tokens * width * 4.0;                                   /* [b, s, width] fp32 */
	double scores = tokens * (double)m->heads * (double)t->seq_len * 4.0; /* [b, heads, s, s] fp32 */
	double weight = h * width * 4.0;                                     /* [hidden, width] fp32 */
	if (max_d(act, scores) * GRAPH_VALUES > BYTES_LIMIT)
		return rm_error_set(err, RM_RANGE, NULL, 0, 0,
				    "seq_len %lld x micro_batch %lld is too large to represent: one activation "
				    "of %s would take %.3g B (remora counts bytes up to 2^62 per graph)",
				    (long long)t->seq_len, (long long)t->micro_batch, m->name,
				    max_d(act, scores));
	double params = (double)m->layers * layer_params_bound(m) +
			(double)m->vocab * h * 2.0 + (double)m->max_pos * h + 2.0 * h;
	if (weight * GRAPH_VALUES > BYTES_LIMIT || params * MAX_STATE_BYTES_PER_PARAM > BYTES_LIMIT)
		return rm_error_set(err, RM_RANGE, NULL, 0, 0,
				    "%s is too large to represent: about %.3g parameters, whose training state "
				    "takes up to %.3g B (remora counts bytes up to 2^62 = 4 EiB)",
				    m->name, params, params * MAX_STATE_BYTES_PER_PARAM);
	return RM_OK;
}

rm_status rm_train_config_check(const rm_model_config *m, const rm_train_config *t, rm_error *err)
{
	if (t->seq_len <= 0 || t->micro_batch <= 0 || t->grad_accum <= 0 || t->fsdp <= 0 || t->dp_replicate <= 0)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0,
				    "seq_len, micro_batch, grad_accum, fsdp and dp_replicate must be positive (got %lld, "
				    "%lld, %lld, %lld, %lld)",
				    (long long)t->seq_len, (long long)t->micro_batch, (long long)t->grad_accum,
				    (long long)t->fsdp, (long long)t->dp_replicate);
	if (t->tp < 1)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0, "tp must be positive (got %lld)", (long long)t->tp);
	if (t->embed_one_hot && (t->tp > 1 || m->learned_pos))
		return rm_error_set(err, RM_UNSUPPORTED, NULL, 0, 0,
				    "the one-hot embedding is modelled for a token table alone without tensor parallelism "
				    "(tp %lld%s)",
				    (long long)t->tp, m->learned_pos ? ", learned positions" : "");
	if (m->arch == RM_ARCH_RESIDUAL_MLP && (t->tp > 1 || t->cp > 1))
		return rm_error_set(err, RM_UNSUPPORTED, NULL, 0, 0,
				    "%s is a ResidualMLP, which remora models without tensor or context parallelism "
				    "(tp %lld, cp %lld)",
				    m->name, (long long)t->tp, (long long)t->cp);
	if (t->tp > 1) {
		/* Megatron-LM's column/row split: whole heads and key/value groups per GPU */
		if (m->heads % t->tp != 0 || m->kv_heads % t->tp != 0)
			return rm_error_set(err, RM_INVALID, NULL, 0, 0,
					    "tp %lld must divide the %lld attention heads and %lld key/value heads of %s",
					    (long long)t->tp, (long long)m->heads, (long long)m->kv_heads, m->name);
		if (m->ffn % t->tp != 0)
			return rm_error_set(err, RM_INVALID, NULL, 0, 0, "tp %lld must divide the MLP's inner size %lld of %s",
					    (long long)t->tp, (long long)m->ffn, m->name);
		if (t->seq_len % t->tp != 0)
			return rm_error_set(err, RM_INVALID, NULL, 0, 0,
					    "tp %lld must divide seq_len %lld (each GPU of the group counts 1/tp of the "
					    "tokens, and sequence parallelism splits the sequence)",
					    (long long)t->tp, (long long)t->seq_len);
	}
	if (t->ep < 1)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0, "ep must be positive (got %lld)", (long long)t->ep);
	if (t->ep > 1 && !rm_model_config_is_moe(m))
		return rm_error_set(err, RM_INVALID, NULL, 0, 0, "ep %lld: %s has no experts to split", (long long)t->ep, m->name);
	if (rm_model_config_is_moe(m)) {
		if (m->experts % t->ep != 0)
			return rm_error_set(err, RM_INVALID, NULL, 0, 0, "ep %lld must divide the %lld routed experts of %s",
					    (long long)t->ep, (long long)m->experts, m->name);
		if (t->tp > 1)
			return rm_error_set(err, RM_UNSUPPORTED, NULL, 0, 0,
					    "tensor parallelism of mixture-of-experts layers (expert tensor parallelism) is "
					    "not modelled yet");
		if (!(t->moe_imbalance >= 1.0) || !(t->moe_capacity_factor == 0 || t->moe_capacity_factor >= 1.0))
			return rm_error_set(err, RM_INVALID, NULL, 0, 0,
					    "moe_imbalance must be at least 1 and moe_capacity_factor 0 (dropless) or at "
					    "least 1 (got %g, %g)",
					    t->moe_imbalance, t->moe_capacity_factor);
	}
	if (t->cp < 1)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0, "cp must be positive (got %lld)", (long long)t->cp);
	if (t->cp > 1) {
		if (!t->fused_attention)
			return rm_error_set(err, RM_UNSUPPORTED, NULL, 0, 0,
					    "context parallelism runs a fused attention kernel over the gathered keys: "
					    "unfused attention is not modelled with it");
		if (t->seq_len % (2 * t->cp * t->tp) != 0)
			return rm_error_set(err, RM_INVALID, NULL, 0, 0,
					    "seq_len %lld must be a multiple of 2 x cp %lld x tp %lld (the load-balanced "
					    "causal split gives each GPU two chunks of the sequence)",
					    (long long)t->seq_len, (long long)t->cp, (long long)t->tp);
		if ((m->heads / t->tp) % t->cp != 0)
			return rm_error_set(err, RM_INVALID, NULL, 0, 0,
					    "cp %lld must divide the %lld attention heads per tensor-parallel GPU (remora "
					    "prices a GPU's share of the attention as heads / cp over the whole sequence)",
					    (long long)t->cp, (long long)(m->heads / t->tp));
	}
	if (t->zero < 1 || t->zero > 3)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0, "zero must be 1, 2 or 3 (got %d)", t->zero);
	if (t->zero < 3 && t->master_shards)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0,
				    "zero %d shards the optimizer over more GPUs than the parameters, but with "
				    "master_shards the fp32 parameter shard is the master itself (FSDP2 runs zero 3)",
				    t->zero);
	if (m->learned_pos && t->seq_len > m->max_pos)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0,
				    "seq_len %lld exceeds the %lld learned positions of %s",
				    (long long)t->seq_len, (long long)m->max_pos, m->name);
	if (t->gemm_dtype != RM_DTYPE_BF16 && t->gemm_dtype != RM_DTYPE_FP8_E4M3)
		return rm_error_set(err, RM_UNSUPPORTED, NULL, 0, 0, "gemm_dtype must be bf16 or fp8 (got %s)",
				    rm_dtype_name(t->gemm_dtype));
	if (t->fp8_all_gather && t->gemm_dtype != RM_DTYPE_FP8_E4M3)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0, "fp8_all_gather needs gemm_dtype fp8");
	if (!compute_dtype(t->dtype) || !compute_dtype(t->param_dtype) || !compute_dtype(t->grad_dtype))
		return rm_error_set(err, RM_UNSUPPORTED, NULL, 0, 0,
				    "activation, parameter and gradient dtypes must be bf16, fp16 or fp32 (got %s, %s, %s)",
				    rm_dtype_name(t->dtype), rm_dtype_name(t->param_dtype),
				    rm_dtype_name(t->grad_dtype));
	if ((unsigned)t->optimizer >= RM_OPT_COUNT)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0, "unknown optimizer");
	if (!compute_dtype(t->optimizer_dtype))
		return rm_error_set(err, RM_UNSUPPORTED, NULL, 0, 0, "optimizer_dtype must be fp32, bf16 or fp16 (got %s)",
				    rm_dtype_name(t->optimizer_dtype));
	RM_CHECK(check_size_bounds(m, t, err));
	/* a step beyond 2^32 tokens per GPU would run for days: refuse it rather than overflow the
	 * simulated clock (picoseconds in 64 bits last 213 days) */
	if ((double)t->seq_len * (double)t->micro_batch * (double)t->grad_accum > 4294967296.0)
		return rm_error_set(err, RM_RANGE, NULL, 0, 0,
				    "seq_len %lld x micro_batch %lld x grad_accum %lld tokens per GPU per step is too "
				    "large to simulate (at most 2^32)",
				    (long long)t->seq_len, (long long)t->micro_batch, (long long)t->grad_accum);
	if (!m->learned_pos && m->arch != RM_ARCH_RESIDUAL_MLP && t->seq_len > m->max_pos)
		rm_log_warn("seq_len %lld exceeds max_position_embeddings %lld of %s",
			    (long long)t->seq_len, (long long)m->max_pos, m->name);
	return RM_OK;
}

/* ---- graph builder ---- */

typedef struct graph_builder {
	rm_graph *g;
	const rm_model_config *m;
	const rm_train_config *t;
	int64_t b, s, T; /* micro-batch, sequence, tokens = b*s */
	int64_t tp;      /* tensor-parallel degree (1: none) */
	int64_t cp;      /* context-parallel degree: s is the GPU's seq_len / cp */
	bool sp;         /* sequence parallelism (with tp > 1) */
	int64_t s_act;   /* sequence length of the activations being built: s, or s / tp in the
			  * sequence-parallel regions (norms, dropouts, residual adds) */
	rm_dtype dt;
	rm_dtype gemm_dt; /* projections of the layer being built (fp8 training: fp8_e4m3) */
	int es; /* bytes per activation element */
	bool dense_mlp; /* the layer being built has a dense MLP in a mixture of experts (DeepSeek's
			 * first_k_dense_replace layers) */
} graph_builder;

/*
 * HBM bytes per rotated element of the rotary's eager decomposition, and its kernels:
 * - complex: x.float() (es + 4), the complex multiply by freqs_cis (4 + 4), type_as(x) (4 + es):
 *   2 es + 16 bytes in 3 kernels;
 * - real: four half-width multiplies by cos or sin (4 x es), the subtract and the add of two
 *   halves each (2 x 1.5 es), torch.cat of the halves (2 es): 9 es bytes in 7 kernels (the
 *   seq x head_dim/2 cos and sin tables are read from L2 and not counted).
 */
static int64_t rope_eager_bytes(const graph_builder *gb, int *kernels)
{
	if (gb->t->rope == RM_ROPE_REAL) {
		*kernels = 7;
		return 9 * (int64_t)gb->es;
	}
	*kernels = 3;
	return 2 * (int64_t)gb->es + 16;
}

static void graph_init(rm_graph *g, const char *name)
{
	memset(g, 0, sizeof(*g));
	snprintf(g->name, sizeof(g->name), "%s", name);
	g->values = rm_new(rm_value, GRAPH_VALUES);
	g->ops = rm_new(rm_op, GRAPH_CAP);
	g->input = -1;
}

static void graph_finish(rm_graph *g)
{
	free(g->values);
	free(g->ops);
	memset(g, 0, sizeof(*g));
}

static int add_value(graph_builder *gb, const char *name, rm_dtype dt, int rank, const int64_t *shape)
{
	rm_graph *g = gb->g;
	assert(g->n_values < GRAPH_VALUES && rank <= RM_MAX_RANK);
	assert(rm_graph_find_value(g, name) < 0);
	rm_value *v = &g->values[g->n_values];
	snprintf(v->name, sizeof(v->name), "%s", name);
	v->dtype = dt;
	v->rank = rank;
	int64_t elems = 1;
	for (int i = 0; i < rank; i++) {
		v->shape[i] = shape[i];
		elems *= shape[i];
	}
	v->bytes = elems * rm_dtype_size(dt);
	v->producer = -1;
	return g->n_values++;
}

/* A [b, s, width] activation. */
static int add_act(graph_builder *gb, const char *name, int64_t width, rm_dtype dt)
{
	int64_t shape[3] = {gb->b, gb->s_act, width};
	return add_value(gb, name, dt, 3, shape);
}

/* A [b, heads, s, s] score-like tensor. */
static int add_scores(graph_builder *gb, const char *name, rm_dtype dt)
{
	int64_t shape[4] = {gb->b, gb->m->heads / gb->tp, gb->s, gb->s};
	return add_value(gb, name, dt, 4, shape);
}

static rm_op *new_op(graph_builder *gb, const char *name, rm_op_kind kind, rm_phase phase, int fwd)
{
	rm_graph *g = gb->g;
	assert(g->n_ops < GRAPH_CAP);
	rm_op *op = &g->ops[g->n_ops++];
	memset(op, 0, sizeof(*op));
	snprintf(op->name, sizeof(op->name), "%s", name);
	op->kind = kind;
	op->phase = phase;
	op->fwd_op = fwd;
	return op;
}

static int op_index(graph_builder *gb, const rm_op *op)
{
	return (int)(op - gb->g->ops);
}

static void op_in(graph_builder *gb, rm_op *op, int v)
{
	assert(op->n_inputs < RM_OP_MAX_INPUTS);
	op->inputs[op->n_inputs++] = v;
	(void)gb;
}

static void op_out(graph_builder *gb, rm_op *op, int v)
{
	assert(op->n_outputs < RM_OP_MAX_OUTPUTS);
	op->outputs[op->n_outputs++] = v;
	gb->g->values[v].producer = op_index(gb, op);
}

static void op_residual(rm_op *op, int v)
{
	assert(op->n_residuals < RM_OP_MAX_RESIDUALS && v >= 0);
	op->residuals[op->n_residuals++] = v;
}

static int64_t vbytes(graph_builder *gb, int v)
{
	return gb->g->values[v].bytes;
}

/* Forward memory-bound op over its inputs; output of width `width` named like the op. */
static int fwd_elementwise(graph_builder *gb, const char *name, const int *in, int n_in,
			   int64_t width, double flops_per_elem, int64_t weight_elems)
{
	rm_op *op = new_op(gb, name, RM_OP_ELEMENTWISE, RM_PHASE_FWD, -1);
	for (int i = 0; i < n_in; i++) {
		op_in(gb, op, in[i]);
		op->bytes_read += vbytes(gb, in[i]);
	}
	int out = add_act(gb, name, width, gb->dt);
	op_out(gb, op, out);
	op->weight_elems = weight_elems;
	op->bytes_read += weight_elems * rm_dtype_size(gb->t->param_dtype);
	op->bytes_written = vbytes(gb, out);
	op->flops = flops_per_elem * (double)(gb->b * gb->s_act) * (double)width;
	return out;
}

/*
 * A tensor-parallel collective over value `in` (Megatron-LM's mappings; Korthikanti et al. 2022
 * section 4.2.2): all-gather of a sequence-parallel activation to the whole sequence, or the
 * reduction of a row-parallel projection's partial sums, by all-reduce or (sequence parallel)
 * reduce-scatter to s / tp. The output is [b, s_act, width] at the builder's s_act after the call
 * (set by the caller). Bytes: the full [b, s, width] buffer, as nccl-tests counts it.
 */
static int fwd_tp_collective(graph_builder *gb, const char *name, rm_coll coll, int in, int64_t width)
{
	rm_op *op = new_op(gb, name, RM_OP_COLLECTIVE, RM_PHASE_FWD, -1);
	op->coll = coll;
	op->coll_bytes = gb->T * width * gb->es;
	op_in(gb, op, in);
	int out = add_act(gb, name, width, gb->dt);
	op_out(gb, op, out);
	op->bytes_read = vbytes(gb, in);
	op->bytes_written = vbytes(gb, out);
	return out;
}

/* Forward projection: [T, k] x [k, n] (+ bias n) -> [b, s, n]. */
static int fwd_projection(graph_builder *gb, const char *name, int in, int64_t k, int64_t n, bool bias)
{
	rm_op *op = new_op(gb, name, RM_OP_GEMM, RM_PHASE_FWD, -1);
	op->gemm = (rm_gemm_shape){.batch = 1, .m = gb->T, .n = n, .k = k, .dtype = gb->gemm_dt};
	op_in(gb, op, in);
	int out = add_act(gb, name, n, gb->dt);
	op_out(gb, op, out);
	op->weight_elems = k * n + (bias ? n : 0);
	op->flops = 2.0 * (double)gb->T * (double)n * (double)k;
	op->bytes_read = vbytes(gb, in) + op->weight_elems * rm_dtype_size(gb->t->param_dtype);
	op->bytes_written = vbytes(gb, out);
	return out;
}

/* Dropout over value v: outputs the dropped tensor and its 1-byte mask. */
static int fwd_dropout(graph_builder *gb, const char *name, int v)
{
	rm_op *op = new_op(gb, name, RM_OP_ELEMENTWISE, RM_PHASE_FWD, -1);
	op_in(gb, op, v);
	char mask_name[64];
	snprintf(mask_name, sizeof(mask_name), "%s_mask", name);
	const rm_value *src = &gb->g->values[v];
	int out = add_value(gb, name, src->dtype, src->rank, src->shape);
	int mask = add_value(gb, mask_name, RM_DTYPE_UINT8, src->rank, src->shape);
	op_out(gb, op, out);
	op_out(gb, op, mask);
	op->bytes_read = vbytes(gb, v);
	op->bytes_written = vbytes(gb, out) + vbytes(gb, mask);
	op->flops = FLOPS_DROPOUT * (double)(vbytes(gb, v) / rm_dtype_size(src->dtype));
	return out;
}

static bool dropout_on(const rm_model_config *m, const rm_train_config *t, double p)
{
	if (t->dropout == 0)
		return false;
	return p > 0.0;
}

/* Attended (query, key) pairs per (batch, head). */
static double attended_pairs(const rm_model_config *m, const rm_train_config *t)
{
	double s = (double)t->seq_len;
	if (!t->causal)
		return s * s;
	double w = m->sliding_window > 0 ? (double)m->sliding_window : s;
	if (w >= s)
		return s * (s + 1.0) / 2.0;
	return w * (w + 1.0) / 2.0 + (s - w) * w;
}

/* ---- backward ---- */

static rm_op *bwd_op(graph_builder *gb, int fwd, const char *suffix, rm_op_kind kind, rm_phase phase)
{
	char name[64];
	snprintf(name, sizeof(name), "%s.%s", gb->g->ops[fwd].name, suffix);
	return new_op(gb, name, kind, phase, fwd);
}

static rm_op *bwd_gemm(graph_builder *gb, int fwd, const char *suffix, rm_phase phase, int64_t batch,
		       int64_t m, int64_t n, int64_t k, bool batch_dims)
{
	rm_op *op = bwd_op(gb, fwd, suffix, RM_OP_GEMM, phase);
	int es = gb->es;
	op->gemm = (rm_gemm_shape){.batch = batch, .m = m, .n = n, .k = k, .dtype = gb->dt,
				   .has_batch_dims = batch_dims};
	op->flops = 2.0 * (double)batch * (double)m * (double)n * (double)k;
	op->bytes_read = batch * (m * k + k * n) * es;
	op->bytes_written = batch * m * n * es;
	return op;
}

/* Backward ops of forward op f, appended in execution order. */
static void emit_backward(graph_builder *gb, int f)
{
	/* Copy: new_op may not move the array (fixed capacity), but keep the code obvious. */
	const rm_op fo = gb->g->ops[f];
	const rm_value *outv = &gb->g->values[fo.outputs[0]];
	const char *name = fo.name;
	int es = gb->es;
	int64_t out_bytes = outv->bytes;

	if (fo.kind == RM_OP_GEMM && !fo.gemm.has_batch_dims) {
		/* Projection: dX = dY W^T [T, k]; dW = X^T dY [k, n]. */
		int64_t m = fo.gemm.m, n = fo.gemm.n, k = fo.gemm.k;
		bool fp8 = fo.gemm.dtype == RM_DTYPE_FP8_E4M3;
		if (fp8) {
			/* the output gradient quantized to E5M2, plain and transposed for the wgrad
			 * (Transformer Engine's cast_transpose, amax fused) */
			rm_op *q = bwd_op(gb, f, "grad_fp8", RM_OP_ELEMENTWISE, RM_PHASE_BWD_DGRAD);
			q->bytes_read = out_bytes;
			q->bytes_written = 2 * (out_bytes / es);
			q->flops = 2.0 * (double)(out_bytes / es);
		}
		/* the one-hot embedding's input derives from the token ids: no dX */
		bool input_grad = strcmp(name, "embedding") != 0;
		if (input_grad) {
			rm_op *dg = bwd_gemm(gb, f, "dgrad", RM_PHASE_BWD_DGRAD, fo.gemm.batch, m, k, n, false);
			dg->weight_elems = fo.weight_elems;
			if (fp8)
				dg->gemm.dtype = RM_DTYPE_FP8_E5M2;
		}
		rm_op *wg = bwd_gemm(gb, f, "wgrad", RM_PHASE_BWD_WGRAD, fo.gemm.batch, k, n, m, false);
		if (fp8)
			wg->gemm.dtype = RM_DTYPE_FP8_E5M2;
		wg->weight_elems = fo.weight_elems;
		op_residual(wg, fo.inputs[0]);
		return;
	}
	if (fo.kind == RM_OP_GEMM) {
		/* the head dim the matmul contracts (QK^T) or produces (PV): d_qk, d_v */
		int64_t B = fo.gemm.batch, s = gb->s;
		int64_t d = strcmp(name, "attention_scores") == 0 ? fo.gemm.k : fo.gemm.n;
		if (strcmp(name, "attention_scores") == 0) {
			/* S = Q K^T: dQ = dS K, dK = dS^T Q, each [B, s, d] contracting s. */
			rm_op *dq = bwd_gemm(gb, f, "dgrad_query", RM_PHASE_BWD_DGRAD, B, s, d, s, true);
			op_residual(dq, fo.inputs[1]);
			rm_op *dk = bwd_gemm(gb, f, "dgrad_key", RM_PHASE_BWD_DGRAD, B, s, d, s, true);
			op_residual(dk, fo.inputs[0]);
		} else {
			/* O = P V: dP = dO V^T [B, s, s] contracting d; dV = P^T dO [B, s, d]. */
			rm_op *dp = bwd_gemm(gb, f, "dgrad_probs", RM_PHASE_BWD_DGRAD, B, s, s, d, true);
			op_residual(dp, fo.inputs[1]);
			rm_op *dv = bwd_gemm(gb, f, "dgrad_value", RM_PHASE_BWD_DGRAD, B, s, d, s, true);
			op_residual(dv, fo.inputs[0]);
		}
		return;
	}
	if (fo.kind == RM_OP_ATTENTION) {
		rm_op *op = bwd_op(gb, f, "bwd", RM_OP_ATTENTION, RM_PHASE_BWD_DGRAD);
		op->attention = fo.attention;
		/* five matmuls for the forward's two: 2.5x, or (3 d + 2 d_v) / (d + d_v) when the
		 * value head dim differs (rm_cost_attention_flops) */
		double d = (double)fo.attention.head_dim, dv = (double)fo.attention.v_head_dim;
		op->flops = dv > 0 && dv != d ? fo.flops * (3.0 * d + 2.0 * dv) / (d + dv) : 2.5 * fo.flops;
		for (int i = 0; i < fo.n_inputs; i++)
			op_residual(op, fo.inputs[i]);
		op_residual(op, fo.outputs[0]); /* O */
		op_residual(op, fo.outputs[1]); /* log-sum-exp */
		/* Reads q, k, v, O, dO, lse; writes dq, dk, dv. */
		int64_t qkv = 0;
		for (int i = 0; i < fo.n_inputs; i++)
			qkv += vbytes(gb, fo.inputs[i]);
		op->bytes_read = qkv + 2 * out_bytes + vbytes(gb, fo.outputs[1]);
		op->bytes_written = qkv;
		return;
	}

	if (strcmp(name, "embedding_shard") == 0) {
		/* Shard(1) back to Replicate: the sequence shards' gradients all-gathered */
		rm_op *op = bwd_op(gb, f, "bwd", RM_OP_COLLECTIVE, RM_PHASE_BWD_DGRAD);
		op->coll = RM_COLL_ALL_GATHER;
		op->coll_bytes = vbytes(gb, fo.inputs[0]);
		op->bytes_read = out_bytes;
		op->bytes_written = vbytes(gb, fo.inputs[0]);
		return;
	}
	if (fo.kind == RM_OP_COLLECTIVE) {
		/* the conjugate collective on the gradient: an all-gather's is a reduce-scatter and
		 * the other way round; an all-reduce's gradient passes through (Megatron's g) */
		if (fo.coll == RM_COLL_ALL_REDUCE)
			return;
		rm_op *op = bwd_op(gb, f, "bwd", RM_OP_COLLECTIVE, RM_PHASE_BWD_DGRAD);
		op->coll = fo.coll == RM_COLL_ALL_TO_ALL    ? RM_COLL_ALL_TO_ALL
			   : fo.coll == RM_COLL_ALL_GATHER ? RM_COLL_REDUCE_SCATTER
							   : RM_COLL_ALL_GATHER;
		op->coll_bytes = fo.coll_bytes;
		op->coll_group = fo.coll_group;
		op->bytes_read = out_bytes;
		op->bytes_written = vbytes(gb, fo.inputs[0]);
		return;
	}
	if (fo.kind == RM_OP_ELEMENTWISE && fo.mclass == RM_MB_NORM && gb->tp > 1 && !gb->sp) {
		/* Megatron's f before the column-parallel projections the norm feeds: identity in the
		 * forward, all-reduce of the input gradient (their dgrads' partial sums) before the
		 * norm's backward */
		rm_op *ar = bwd_op(gb, f, "tp_all_reduce", RM_OP_COLLECTIVE, RM_PHASE_BWD_DGRAD);
		ar->coll = RM_COLL_ALL_REDUCE;
		ar->coll_bytes = out_bytes;
		ar->bytes_read = ar->bytes_written = out_bytes;
	}
	/* Memory-bound ops: the backward reads dY (and its residuals) and writes dX per input. */
	rm_op *op = bwd_op(gb, f, "bwd", RM_OP_ELEMENTWISE, RM_PHASE_BWD_DGRAD);
	int64_t in_bytes = 0;
	for (int i = 0; i < fo.n_inputs; i++)
		in_bytes += vbytes(gb, fo.inputs[i]);
	op->bytes_read = out_bytes;
	op->bytes_written = in_bytes;
	op->flops = 2.0 * fo.flops;
	op->weight_elems = fo.weight_elems;
	op->mclass = fo.mclass == RM_MB_NORM ? RM_MB_NORM_BWD : fo.mclass;
	if (fo.eager_bytes > 0 && fo.mclass == RM_MB_NORM) {
		/* autograd through the eager RMSNorm: g*w and the weight-gradient reduction (2 es +
		 * 2 es), the fp32 cast of g (es + 4), g*rstd (8) and sum(g*x) (8), mean's expand (4),
		 * pow's 2*x*g (12), the two input gradients added (12), the cast back (4 + es): 6 es +
		 * 52 bytes per element in 10 kernels */
		int64_t n = fo.eager_bytes / (4 * es + 28);
		op->eager_bytes = n * (6 * es + 52);
		op->eager_kernels = 10;
	} else if (fo.eager_bytes > 0) {
		/* the rotary backward is the same decomposition with the conjugate */
		op->eager_bytes = fo.eager_bytes;
		op->eager_kernels = fo.eager_kernels;
		op->complex_arith = fo.complex_arith;
	}
	const char *suffix = strrchr(name, '_');
	bool is_dropout = suffix && strcmp(suffix, "_dropout") == 0;
	if (strcmp(name, "pre_attention_norm") == 0 || strcmp(name, "pre_mlp_norm") == 0 ||
	    strcmp(name, "query_norm") == 0 || strcmp(name, "key_norm") == 0 ||
	    strcmp(name, "attention_query_a_norm") == 0 || strcmp(name, "attention_kv_a_norm") == 0 ||
	    strcmp(name, "final_norm") == 0) {
		op_residual(op, fo.inputs[0]); /* norm backward needs its input */
	} else if (strcmp(name, "attention_probs") == 0) {
		op_residual(op, fo.outputs[0]); /* softmax backward needs its output */
	} else if (is_dropout) {
		op_residual(op, fo.outputs[1]); /* the mask */
		op->bytes_written = vbytes(gb, fo.inputs[0]);
	} else if (strcmp(name, "mlp_activation") == 0) {
		op_residual(op, fo.inputs[0]); /* silu/gelu backward needs its input */
	} else if (strcmp(name, "mlp_hidden") == 0) {
		op_residual(op, fo.inputs[0]); /* d up = dY * act */
		op_residual(op, fo.inputs[1]); /* d act = dY * up */
	} else if (strcmp(name, "embedding") == 0) {
		/* Scatter-add of dY rows into the table gradient; needs the token ids. */
		op->phase = RM_PHASE_BWD_WGRAD;
		op_residual(op, fo.inputs[0]);
		op->bytes_written = out_bytes;
	} else if (strcmp(name, "loss") == 0) {
		/* log_softmax backward from its output: grad - exp(log_probs) * sum(grad); reads the
		 * (one-hot) gradient and the log-probabilities, writes the logits' gradient */
		op_residual(op, fo.outputs[0]);
		op->bytes_read = 2 * fo.bytes_written - vbytes(gb, fo.outputs[0]); /* + the residual below */
		op->bytes_written = fo.bytes_written;
	} else if (strcmp(name, "logits_float") == 0) {
		/* the cast back to the logits' dtype */
		op->bytes_read = fo.bytes_written;
		op->bytes_written = fo.bytes_read;
	}
	/* rotary (linear), residual adds: the backward needs no forward value. */
	for (int i = 0; i < op->n_residuals; i++)
		op->bytes_read += vbytes(gb, op->residuals[i]);
}

static void emit_all_backward(graph_builder *gb)
{
	gb->g->n_fwd_ops = gb->g->n_ops;
	for (int f = gb->g->n_fwd_ops - 1; f >= 0; f--)
		if (!gb->g->ops[f].no_grad)
			emit_backward(gb, f);
}

static int fwd_norm(graph_builder *gb, const char *name, int in)
{
	const rm_model_config *m = gb->m;
	bool ln = m->norm == RM_NORM_LAYERNORM;
	int out = fwd_elementwise(gb, name, &in, 1, m->hidden, ln ? FLOPS_LAYERNORM : FLOPS_RMSNORM,
				  ln ? 2 * m->hidden : m->hidden);
	rm_op *op = &gb->g->ops[gb->g->values[out].producer];
	op->mclass = RM_MB_NORM;
	if (!ln) {
		/* eager RMSNorm as Llama codebases write it, x.float() -> pow(2) -> mean -> + eps ->
		 * rsqrt -> x * rstd -> type_as(x) -> * weight: per element (es + 4) + 8 + 4 + 8 +
		 * (4 + es) + 2 es = 4 es + 28 bytes in 8 kernels (F.layer_norm is one native kernel) */
		int64_t n = gb->b * gb->s_act * m->hidden;
		op->eager_bytes = n * (4 * gb->es + 28);
		op->eager_kernels = 8;
	}
	return out;
}

/* FP8 training: an activation quantized for the GEMMs that read it (E4M3, plain and transposed
 * for the weight gradient, amax fused: Transformer Engine's cast_transpose); the GEMMs keep
 * reading the 16-bit value in the graph, the cast is its traffic and launch. */
static void fwd_fp8_cast(graph_builder *gb, const char *name, int in)
{
	if (gb->gemm_dt != RM_DTYPE_FP8_E4M3)
		return;
	rm_op *op = new_op(gb, name, RM_OP_ELEMENTWISE, RM_PHASE_FWD, -1);
	op_in(gb, op, in);
	const rm_value *src = &gb->g->values[in];
	int out = add_value(gb, name, RM_DTYPE_FP8_E4M3, src->rank, src->shape);
	op_out(gb, op, out);
	op->bytes_read = vbytes(gb, in);
	op->bytes_written = 2 * vbytes(gb, out);
	op->flops = 2.0 * (double)vbytes(gb, out);
	op->no_grad = true;
}

/* ---- mixture of experts ---- */

/* A memory-bound op over `rows` x `width` elements (the dispatched tokens of a MoE block). */
static int fwd_rows_elementwise(graph_builder *gb, const char *name, const int *in, int n_in, int64_t rows,
				int64_t width, double flops_per_elem, rm_membound_class cls)
{
	rm_op *op = new_op(gb, name, RM_OP_ELEMENTWISE, RM_PHASE_FWD, -1);
	for (int i = 0; i < n_in; i++) {
		op_in(gb, op, in[i]);
		op->bytes_read += vbytes(gb, in[i]);
	}
	int64_t shape[2] = {rows, width};
	int out = add_value(gb, name, gb->dt, 2, shape);
	op_out(gb, op, out);
	op->bytes_written = vbytes(gb, out);
	op->flops = flops_per_elem * (double)rows * (double)width;
	op->mclass = cls;
	return out;
}

/* The local experts' projection as one grouped GEMM: nexp experts, rows tokens in all. */
static int fwd_expert_gemm(graph_builder *gb, const char *name, int in, int64_t rows, int64_t k, int64_t n, int64_t nexp)
{
	rm_op *op = new_op(gb, name, RM_OP_GEMM, RM_PHASE_FWD, -1);
	int64_t per = (rows + nexp - 1) / nexp;
	op->gemm = (rm_gemm_shape){.batch = nexp, .m = per, .n = n, .k = k, .dtype = gb->gemm_dt};
	op_in(gb, op, in);
	int64_t shape[2] = {rows, n};
	int out = add_value(gb, name, gb->dt, 2, shape);
	op_out(gb, op, out);
	op->weight_elems = nexp * k * n;
	op->expert = true;
	op->flops = 2.0 * (double)nexp * (double)per * (double)n * (double)k;
	op->bytes_read = vbytes(gb, in) + op->weight_elems * rm_dtype_size(gb->t->param_dtype);
	op->bytes_written = vbytes(gb, out);
	return out;
}

/* An all-to-all over the expert-parallel group: send_rows x h out, recv_rows x h in. */
static int fwd_all_to_all(graph_builder *gb, const char *name, int in, int64_t send_rows, int64_t recv_rows, int64_t h)
{
	rm_op *op = new_op(gb, name, RM_OP_COLLECTIVE, RM_PHASE_FWD, -1);
	op->coll = RM_COLL_ALL_TO_ALL;
	op->coll_group = RM_GROUP_EP;
	op->coll_bytes = send_rows * h * gb->es;
	op_in(gb, op, in);
	int64_t shape[2] = {recv_rows, h};
	int out = add_value(gb, name, gb->dt, 2, shape);
	op_out(gb, op, out);
	op->bytes_read = vbytes(gb, in);
	op->bytes_written = vbytes(gb, out);
	return out;
}

/*
 * A mixture-of-experts block over the normed input rn ([b, s, h]), as Mixtral, Qwen2-MoE and
 * Qwen3-MoE run it (transformers' *SparseMoeBlock; Megatron-LM's MoE layer with all-to-all
 * token dispatch): the router (h -> experts), softmax and top-k, the tokens permuted into
 * per-expert order (k copies of each), sent to their experts' GPUs by all-to-all when ep > 1,
 * the local experts' SwiGLU as grouped GEMMs, sent back, and summed with the routing weights;
 * shared experts (Qwen2-MoE's gated one) as a dense SwiGLU beside them. The busiest GPU
 * receives min(moe_imbalance, moe_capacity_factor) times the balanced share of T k tokens.
 */
static int build_moe(graph_builder *gb, int rn)
{
	const rm_model_config *m = gb->m;
	const rm_train_config *t = gb->t;
	int64_t h = m->hidden, k = m->experts_per_tok, ep = t->ep > 1 ? t->ep : 1;
	int64_t nexp = m->experts / ep;
	int64_t sent = gb->T * k;
	double f = 1.0;
	if (ep > 1) {
		f = t->moe_imbalance > 1.0 ? t->moe_imbalance : 1.0;
		if (t->moe_capacity_factor >= 1.0 && t->moe_capacity_factor < f)
			f = t->moe_capacity_factor;
	}
	int64_t rows = (int64_t)ceil((double)sent * f);
	int router = fwd_projection(gb, "moe_router", rn, h, m->experts, false);
	/* softmax and top-k (Mixtral, Qwen); DeepSeek-V3's sigmoid scores, plus the selection bias
	 * (noaux_tc, read here: it is the op's weight), group-limited top-k and renormalisation are
	 * the same one pass over the T x experts scores, priced alike */
	int routing = fwd_elementwise(gb, "moe_routing", &router, 1, k, FLOPS_SOFTMAX * (double)m->experts / (double)k,
				      m->router_bias ? m->experts : 0);
	gb->g->ops[gb->g->values[routing].producer].mclass = RM_MB_SOFTMAX;
	int pin[2] = {rn, routing};
	int x = fwd_rows_elementwise(gb, "moe_dispatched", pin, 2, sent, h, 0, RM_MB_GATHER);
	if (ep > 1)
		x = fwd_all_to_all(gb, "moe_dispatched_a2a", x, sent, rows, h);
	int gate = fwd_expert_gemm(gb, "moe_gate", x, rows, h, m->expert_ffn, nexp);
	int up = fwd_expert_gemm(gb, "moe_up", x, rows, h, m->expert_ffn, nexp);
	int act = fwd_rows_elementwise(gb, "moe_activation", &gate, 1, rows, m->expert_ffn, FLOPS_SILU, RM_MB_POINTWISE);
	int mul[2] = {act, up};
	int hid = fwd_rows_elementwise(gb, "moe_hidden", mul, 2, rows, m->expert_ffn, 1.0, RM_MB_POINTWISE);
	int down = fwd_expert_gemm(gb, "moe_down", hid, rows, m->expert_ffn, h, nexp);
	if (ep > 1)
		down = fwd_all_to_all(gb, "moe_combined_a2a", down, rows, sent, h);
	int cin[2] = {down, routing};
	int out = fwd_elementwise(gb, "moe_combined", cin, 2, h, 2.0 * (double)k, 0);
	if (m->shared_experts > 0) {
		int64_t sf = m->shared_experts * m->shared_ffn;
		int sg = fwd_projection(gb, "dot_shared_gate", rn, h, sf, false);
		int su = fwd_projection(gb, "dot_shared_up", rn, h, sf, false);
		int sa = fwd_elementwise(gb, "shared_activation", &sg, 1, sf, FLOPS_SILU, 0);
		int sm[2] = {sa, su};
		int sh = fwd_elementwise(gb, "shared_hidden", sm, 2, sf, 1.0, 0);
		int so = fwd_projection(gb, "dot_shared_out", sh, sf, h, false);
		if (m->shared_gate) {
			/* Qwen2-MoE: sigmoid(h -> 1) scales the shared expert */
			int g = fwd_projection(gb, "dot_shared_expert_gate", rn, h, 1, false);
			int gi[2] = {so, g};
			so = fwd_elementwise(gb, "shared_gated", gi, 2, h, 2.0, 0);
		}
		int add[2] = {out, so};
		out = fwd_elementwise(gb, "moe_output", add, 2, h, FLOPS_ADD, 0);
	}
	return out;
}

/* An RMSNorm over the first `width` elements of each row of `in` (a latent's slice), with a
 * weight of width and the eager decomposition of fwd_norm. */
static int fwd_slice_rmsnorm(graph_builder *gb, const char *name, int in, int64_t width)
{
	int out = fwd_elementwise(gb, name, &in, 1, width, FLOPS_RMSNORM, width);
	rm_op *op = &gb->g->ops[gb->g->values[out].producer];
	op->mclass = RM_MB_NORM;
	int64_t n = gb->b * gb->s_act * width;
	/* it reads its slice of the input row and the weight (fwd_elementwise counted the row) */
	op->bytes_read = n * gb->es + width * rm_dtype_size(gb->t->param_dtype);
	op->eager_bytes = n * (4 * gb->es + 28);
	op->eager_kernels = 8;
	return out;
}

/*
 * Multi-head latent attention's queries, keys and values from the normed input xn, as
 * DeepSeek-V3's modelling code runs it in training (transformers' DeepseekV3Attention.forward,
 * DeepSeek's inference/model.py MLA with attn_impl "naive"; not the absorbed inference form):
 *   q = q_b_proj(q_a_layernorm(q_a_proj(x)))            h -> q_lora -> heads * (nope + rope)
 *   kv = kv_a_proj_with_mqa(x)                          h -> kv_lora + rope
 *   k_nope, v = kv_b_proj(kv_a_layernorm(kv[:kv_lora]))  kv_lora -> heads * (nope + v)
 *   q_pe, k_pe = rope(q[..., nope:], kv[kv_lora:])      (k_pe one head, broadcast to all)
 *   query = cat(q_nope, q_pe), key = cat(k_nope, k_pe)  heads * (nope + rope) each
 * kv_b_proj is one matrix; its key and value column blocks are priced as the two GEMMs
 * dot_attention_key and dot_attention_value (the same FLOPs and bytes), so remat policies that
 * name the projections apply. q_lora_rank 0: q_proj h -> heads * (nope + rope) directly. The
 * rotary ops write the concatenated query and key (the rope of the rope slice and the copy of the
 * nope part). Outputs: the query and key (head_dim wide per head) and the value (v_head_dim).
 */
static void build_mla_qkv(graph_builder *gb, int xn, int64_t heads, int *q_out, int *k_out, int *v_out)
{
	const rm_model_config *m = gb->m;
	int64_t h = m->hidden, nope = m->qk_nope_head_dim, rope = m->qk_rope_head_dim;
	int64_t qk = nope + rope, ql = m->q_lora_rank, kvl = m->kv_lora_rank;
	int q;
	if (ql > 0) {
		int qa = fwd_projection(gb, "dot_attention_query_a", xn, h, ql, false);
		int qan = fwd_slice_rmsnorm(gb, "attention_query_a_norm", qa, ql);
		q = fwd_projection(gb, "dot_attention_query", qan, ql, heads * qk, false);
	} else {
		q = fwd_projection(gb, "dot_attention_query", xn, h, heads * qk, false);
	}
	int kva = fwd_projection(gb, "dot_attention_kv_a", xn, h, kvl + rope, false);
	int kvn = fwd_slice_rmsnorm(gb, "attention_kv_a_norm", kva, kvl);
	int kn = fwd_projection(gb, "dot_attention_key", kvn, kvl, heads * nope, false);
	int v = fwd_projection(gb, "dot_attention_value", kvn, kvl, heads * m->v_head_dim, false);
	int64_t T = gb->b * gb->s;
	int es = gb->es;
	/* rope over heads x rope elements of the query; the nope part copied into the cat */
	int rq = fwd_elementwise(gb, "rotary_query", &q, 1, heads * qk, 0, 0);
	rm_op *op = &gb->g->ops[gb->g->values[rq].producer];
	op->flops = FLOPS_ROTARY * (double)T * (double)(heads * rope);
	/* eager: the rotary of the slice as fwd_layer's (rope_eager_bytes) and torch.cat reading
	 * both parts and writing the whole */
	int rk_kernels;
	int64_t per = rope_eager_bytes(gb, &rk_kernels);
	op->eager_bytes = T * heads * rope * per + 2 * T * heads * qk * es;
	op->eager_kernels = rk_kernels + 1;
	op->complex_arith = gb->t->rope == RM_ROPE_COMPLEX;
	/* the key: rope over the one shared rope head, broadcast to every head in the cat */
	int kin[2] = {kn, kva};
	int rk = fwd_elementwise(gb, "rotary_key", kin, 2, heads * qk, 0, 0);
	op = &gb->g->ops[gb->g->values[rk].producer];
	op->flops = FLOPS_ROTARY * (double)T * (double)rope;
	op->bytes_read = vbytes(gb, kn) + T * rope * es; /* k_nope and the rope slice of the latent */
	op->eager_bytes = T * rope * per + (vbytes(gb, kn) + T * rope * es) + vbytes(gb, rk);
	op->eager_kernels = rk_kernels + 1;
	op->complex_arith = gb->t->rope == RM_ROPE_COMPLEX;
	*q_out = rq;
	*k_out = rk;
	*v_out = v;
}

/* Parameters a graph's forward ops read (one GPU's share under tensor parallelism). */
static int64_t fwd_weight_elems(const rm_graph *g)
{
	int64_t n = 0;
	for (int i = 0; i < g->n_fwd_ops; i++)
		n += g->ops[i].weight_elems;
	return n;
}

static void build_layer(graph_builder *gb)
{
	const rm_model_config *m = gb->m;
	const rm_train_config *t = gb->t;
	/* per GPU of the tensor-parallel group: heads, key/value heads and the MLP's inner size
	 * split over tp (column-parallel q, k, v, gate, up; row-parallel out projections) */
	int64_t tp = gb->tp, heads = m->heads / tp, kv_heads = m->kv_heads / tp, ffn = m->ffn / tp;
	int64_t h = m->hidden, qd = heads * m->head_dim, kvd = kv_heads * m->head_dim;
	int64_t s_seq = gb->sp ? gb->s / tp : gb->s; /* the residual stream's sequence per GPU */
	bool gpt2 = m->arch == RM_ARCH_GPT2;
	bool attn_drop = dropout_on(m, t, m->attn_dropout);
	bool resid_drop = dropout_on(m, t, m->resid_dropout);

	gb->s_act = s_seq;
	int x = add_act(gb, "layer_input", h, gb->dt);
	gb->g->input = x;
	if (gb->gemm_dt == RM_DTYPE_FP8_E4M3 && !t->fp8_all_gather) {
		/* the gathered 16-bit weights quantized once per micro-batch (and transposed for
		 * the dgrad); latent attention: its projections without the two latent norms */
		int64_t attn_w = m->mla ? attention_params(m) - m->q_lora_rank - m->kv_lora_rank : h * (qd + 2 * kvd) + qd * h;
		int64_t mlp_w = (m->mlp == RM_MLP_SWIGLU ? 3 : 2) * h * ffn;
		if (rm_model_config_is_moe(m) && !gb->dense_mlp) {
			/* a MoE block: the router, this GPU's experts and the shared experts (and
			 * Qwen2-MoE's shared-expert gate) */
			int64_t local = m->experts / (t->ep > 1 ? t->ep : 1);
			mlp_w = h * m->experts + local * expert_params(m) + m->shared_experts * 3 * h * m->shared_ffn +
				(m->shared_gate ? h : 0);
		}
		int64_t w = attn_w + mlp_w;
		rm_op *op = new_op(gb, "weights_fp8", RM_OP_ELEMENTWISE, RM_PHASE_FWD, -1);
		op_in(gb, op, x);
		int64_t shape[1] = {w};
		int out = add_value(gb, "weights_fp8", RM_DTYPE_FP8_E4M3, 1, shape);
		op_out(gb, op, out);
		op->bytes_read = w * rm_dtype_size(t->param_dtype);
		op->bytes_written = 2 * w;
		op->no_grad = true;
	}
	if (m->arch == RM_ARCH_RESIDUAL_MLP) {
		/* x + W2 act(W1 x) (flax nn.Dense, nn.relu, nn.Dense and the residual add of the
		 * jax#20763 toy); one GPU of data parallelism: tp and cp are refused */
		fwd_fp8_cast(gb, "mlp_input_fp8", x);
		int up = fwd_projection(gb, "dot_mlp_up", x, h, ffn, false);
		int hid = fwd_elementwise(gb, "mlp_activation", &up, 1, ffn, m->mlp == RM_MLP_GELU ? FLOPS_GELU : FLOPS_RELU, 0);
		fwd_fp8_cast(gb, "mlp_hidden_fp8", hid);
		int out = fwd_projection(gb, "dot_mlp_out", hid, ffn, h, false);
		if (resid_drop)
			out = fwd_dropout(gb, "mlp_out_dropout", out);
		int add_in[2] = {x, out};
		fwd_elementwise(gb, "layer_output", add_in, 2, h, FLOPS_ADD, 0);
		emit_all_backward(gb);
		gb->g->params = layer_params(m);
		return;
	}
	int xn = fwd_norm(gb, "pre_attention_norm", x);
	gb->s_act = gb->s;
	if (gb->sp)
		xn = fwd_tp_collective(gb, "attention_input_gathered", RM_COLL_ALL_GATHER, xn, h);
	fwd_fp8_cast(gb, "attention_input_fp8", xn);
	/* the widths of q, k (head_dim per head), v and the attention's output (v_head_dim) */
	int64_t dqk = m->head_dim, dv = m->mla ? m->v_head_dim : m->head_dim;
	int64_t kw = kvd, vw = kv_heads * dv, ctxw = heads * dv;
	int q, k, v;
	if (m->mla) {
		build_mla_qkv(gb, xn, heads, &q, &k, &v);
	} else {
		q = fwd_projection(gb, "dot_attention_query", xn, h, qd, m->qkv_bias);
		k = fwd_projection(gb, "dot_attention_key", xn, h, kvd, m->qkv_bias);
		v = fwd_projection(gb, "dot_attention_value", xn, h, kvd, m->qkv_bias);
	}
	if (m->qk_norm) {
		/* Qwen3: RMSNorm over each head's head_dim on the queries and keys, one weight of
		 * head_dim each */
		q = fwd_elementwise(gb, "query_norm", &q, 1, qd, FLOPS_RMSNORM, m->head_dim);
		gb->g->ops[gb->g->values[q].producer].mclass = RM_MB_NORM;
		k = fwd_elementwise(gb, "key_norm", &k, 1, kvd, FLOPS_RMSNORM, m->head_dim);
		gb->g->ops[gb->g->values[k].producer].mclass = RM_MB_NORM;
	}
	if (!gpt2 && !m->mla) {
		q = fwd_elementwise(gb, "rotary_query", &q, 1, qd, FLOPS_ROTARY, 0);
		k = fwd_elementwise(gb, "rotary_key", &k, 1, kvd, FLOPS_ROTARY, 0);
		/* eager: the rotary's decomposition (rope_eager_bytes); the complex one is Inductor's
		 * fallback too */
		int kernels;
		int64_t per = rope_eager_bytes(gb, &kernels);
		for (int r = 0; r < 2; r++) {
			rm_op *op = &gb->g->ops[gb->g->values[r ? k : q].producer];
			op->eager_bytes = (gb->g->values[r ? k : q].bytes / gb->es) * per;
			op->eager_kernels = kernels;
			op->complex_arith = gb->t->rope == RM_ROPE_COMPLEX;
		}
	}
	int ctx;
	if (t->fused_attention && gb->cp > 1) {
		/* context parallelism: the keys and values of the whole sequence gathered over the
		 * group (kept as the local chunk, gathered again in the backward) */
		int64_t s_loc = gb->s;
		gb->s_act = t->seq_len;
		gb->T = gb->b * t->seq_len;
		k = fwd_tp_collective(gb, "attention_key_gathered", RM_COLL_ALL_GATHER, k, kw);
		gb->g->ops[gb->g->values[k].producer].coll_group = RM_GROUP_CP;
		v = fwd_tp_collective(gb, "attention_value_gathered", RM_COLL_ALL_GATHER, v, vw);
		gb->g->ops[gb->g->values[v].producer].coll_group = RM_GROUP_CP;
		gb->T = gb->b * s_loc;
		gb->s_act = s_loc;
	}
	if (t->fused_attention) {
		rm_op *op = new_op(gb, "attention_context", RM_OP_ATTENTION, RM_PHASE_FWD, -1);
		/* under context parallelism a GPU's queries are 1/cp of the sequence against all of
		 * its keys (the load-balanced causal split gives each the same share): priced as
		 * heads / cp over the whole sequence, the same FLOPs at the whole sequence's kernel
		 * efficiency */
		op->attention = (rm_attention_shape){
			.batch = gb->b, .heads = heads / gb->cp, .kv_heads = kv_heads >= gb->cp ? kv_heads / gb->cp : 1,
			.seq = t->seq_len, .head_dim = dqk, .v_head_dim = dv != dqk ? dv : 0, .causal = t->causal,
			.fused = true, .dtype = gb->dt,
			.window = t->causal && m->sliding_window > 0 && m->sliding_window < t->seq_len ? m->sliding_window : 0};
		op_in(gb, op, q);
		op_in(gb, op, k);
		op_in(gb, op, v);
		ctx = add_act(gb, "attention_context", ctxw, gb->dt);
		int64_t lse_shape[3] = {gb->b, heads, gb->s};
		int lse = add_value(gb, "attention_lse", RM_DTYPE_FP32, 3, lse_shape);
		op_out(gb, op, ctx);
		op_out(gb, op, lse);
		/* QK^T over d_qk and PV over d_v per attended pair: 4 d when they are equal */
		double per_pair = dv != dqk ? 2.0 * (double)(dqk + dv) : 4.0 * (double)m->head_dim;
		op->flops = per_pair * (double)gb->b * (double)heads * attended_pairs(m, t) / (double)gb->cp;
		op->bytes_read = vbytes(gb, q) + vbytes(gb, k) + vbytes(gb, v);
		op->bytes_written = vbytes(gb, ctx) + vbytes(gb, lse);
	} else {
		int64_t B = gb->b * heads, s = gb->s, d = m->head_dim;
		rm_op *sc = new_op(gb, "attention_scores", RM_OP_GEMM, RM_PHASE_FWD, -1);
		sc->gemm = (rm_gemm_shape){.batch = B, .m = s, .n = s, .k = d, .dtype = gb->dt,
					   .has_batch_dims = true};
		op_in(gb, sc, q);
		op_in(gb, sc, k);
		int scores = add_scores(gb, "attention_scores", gb->dt);
		op_out(gb, sc, scores);
		sc->flops = 2.0 * (double)B * (double)s * (double)s * (double)d;
		sc->bytes_read = vbytes(gb, q) + vbytes(gb, k);
		sc->bytes_written = vbytes(gb, scores);

		rm_op *sm = new_op(gb, "attention_probs", RM_OP_ELEMENTWISE, RM_PHASE_FWD, -1);
		op_in(gb, sm, scores);
		int probs = add_scores(gb, "attention_probs", gb->dt);
		op_out(gb, sm, probs);
		sm->flops = FLOPS_SOFTMAX * (double)B * (double)s * (double)s;
		sm->mclass = RM_MB_SOFTMAX;
		sm->bytes_read = vbytes(gb, scores);
		sm->bytes_written = vbytes(gb, probs);

		if (attn_drop)
			probs = fwd_dropout(gb, "attention_probs_dropout", probs);

		rm_op *pv = new_op(gb, "attention_context", RM_OP_GEMM, RM_PHASE_FWD, -1);
		pv->gemm = (rm_gemm_shape){.batch = B, .m = s, .n = dv, .k = s, .dtype = gb->dt,
					   .has_batch_dims = true};
		op_in(gb, pv, probs);
		op_in(gb, pv, v);
		ctx = add_act(gb, "attention_context", ctxw, gb->dt);
		op_out(gb, pv, ctx);
		pv->flops = 2.0 * (double)B * (double)s * (double)dv * (double)s;
		pv->bytes_read = vbytes(gb, probs) + vbytes(gb, v);
		pv->bytes_written = vbytes(gb, ctx);
	}
	fwd_fp8_cast(gb, "attention_context_fp8", ctx);
	int ao = fwd_projection(gb, "dot_attention_out", ctx, ctxw, h, m->out_bias);
	gb->s_act = s_seq;
	if (tp > 1)
		ao = fwd_tp_collective(gb, "attention_out_reduced", gb->sp ? RM_COLL_REDUCE_SCATTER : RM_COLL_ALL_REDUCE, ao, h);
	if (resid_drop)
		ao = fwd_dropout(gb, "attention_out_dropout", ao);
	int add1_in[2] = {x, ao};
	int r1 = fwd_elementwise(gb, "attention_residual", add1_in, 2, h, FLOPS_ADD, 0);
	int rn = fwd_norm(gb, "pre_mlp_norm", r1);
	gb->s_act = gb->s;
	if (gb->sp)
		rn = fwd_tp_collective(gb, "mlp_input_gathered", RM_COLL_ALL_GATHER, rn, h);
	fwd_fp8_cast(gb, "mlp_input_fp8", rn);
	int hidden = -1, mo = -1;
	if (rm_model_config_is_moe(m) && !gb->dense_mlp) {
		mo = build_moe(gb, rn);
	} else if (m->mlp == RM_MLP_SWIGLU) {
		int gate = fwd_projection(gb, "dot_mlp_gate", rn, h, ffn, false);
		int up = fwd_projection(gb, "dot_mlp_up", rn, h, ffn, false);
		int act = fwd_elementwise(gb, "mlp_activation", &gate, 1, ffn, FLOPS_SILU, 0);
		int mul_in[2] = {act, up};
		hidden = fwd_elementwise(gb, "mlp_hidden", mul_in, 2, ffn, 1.0, 0);
	} else {
		int up = fwd_projection(gb, "dot_mlp_up", rn, h, ffn, m->out_bias);
		hidden = fwd_elementwise(gb, "mlp_activation", &up, 1, ffn, FLOPS_GELU, 0);
	}
	if (hidden >= 0) {
		fwd_fp8_cast(gb, "mlp_hidden_fp8", hidden);
		mo = fwd_projection(gb, "dot_mlp_out", hidden, ffn, h, m->out_bias);
	}
	gb->s_act = s_seq;
	if (tp > 1)
		mo = fwd_tp_collective(gb, "mlp_out_reduced", gb->sp ? RM_COLL_REDUCE_SCATTER : RM_COLL_ALL_REDUCE, mo, h);
	if (resid_drop)
		mo = fwd_dropout(gb, "mlp_out_dropout", mo);
	int add2_in[2] = {r1, mo};
	fwd_elementwise(gb, "layer_output", add2_in, 2, h, FLOPS_ADD, 0);
	emit_all_backward(gb);
	gb->g->params = tp > 1 || rm_model_config_is_moe(m) ? fwd_weight_elems(gb->g) : layer_params(m);
	gb->s_act = gb->s;
}

static void build_embedding(graph_builder *gb)
{
	const rm_model_config *m = gb->m;
	int64_t tok_shape[2] = {gb->b, gb->s};
	int tokens = add_value(gb, "tokens", RM_DTYPE_INT32, 2, tok_shape);
	gb->g->input = tokens;
	if (gb->t->embed_one_hot) {
		/*
		 * MaxText's use_iota_embed (layers/embeddings.py Embed): one_hot = (ids[..., None] ==
		 * iota(V)) in the activation dtype, [T, V], then jnp.dot(one_hot, table): a GEMM of
		 * [T, V] x [V, h] in place of the gather. The one-hot derives from integers, so no
		 * gradient flows into it: the backward is the table's gradient one_hot^T dY alone, a
		 * [V, T] x [T, h] GEMM (emit_backward leaves out the dgrad).
		 */
		rm_op *oh = new_op(gb, "embedding_one_hot", RM_OP_ELEMENTWISE, RM_PHASE_FWD, -1);
		op_in(gb, oh, tokens);
		int ohv = add_act(gb, "embedding_one_hot", m->vocab, gb->dt);
		op_out(gb, oh, ohv);
		oh->bytes_read = vbytes(gb, tokens);
		oh->bytes_written = vbytes(gb, ohv);
		oh->flops = (double)gb->T * (double)m->vocab; /* one compare per element */
		oh->mclass = RM_MB_POINTWISE;
		oh->no_grad = true;
		rm_op *op = new_op(gb, "embedding", RM_OP_GEMM, RM_PHASE_FWD, -1);
		op->gemm = (rm_gemm_shape){.batch = 1, .m = gb->T, .n = m->hidden, .k = m->vocab, .dtype = gb->dt};
		op_in(gb, op, ohv);
		int out = add_act(gb, "embedding", m->hidden, gb->dt);
		op_out(gb, op, out);
		op->weight_elems = m->vocab * m->hidden;
		op->flops = 2.0 * (double)gb->T * (double)m->hidden * (double)m->vocab;
		op->bytes_read = vbytes(gb, ohv) + m->vocab * m->hidden * rm_dtype_size(gb->t->param_dtype);
		op->bytes_written = vbytes(gb, out);
		if (dropout_on(m, gb->t, m->embd_dropout))
			fwd_dropout(gb, "embedding_dropout", out);
		emit_all_backward(gb);
		gb->g->params = op->weight_elems;
		return;
	}
	rm_op *op = new_op(gb, "embedding", RM_OP_ELEMENTWISE, RM_PHASE_FWD, -1);
	op_in(gb, op, tokens);
	int out = add_act(gb, "embedding", m->hidden, gb->dt);
	op_out(gb, op, out);
	int tables = m->learned_pos ? 2 : 1;
	/* A gather reads only the rows it needs: T rows per table. */
	op->bytes_read = vbytes(gb, tokens) + tables * vbytes(gb, out);
	op->bytes_written = vbytes(gb, out);
	op->flops = (double)(tables - 1) * (double)gb->T * (double)m->hidden;
	op->mclass = RM_MB_GATHER;
	/* tensor parallel: Megatron's vocabulary-parallel embedding holds ceil(V / tp) rows (the
	 * learned positions replicated) and sums the partial lookups over the group */
	bool replicated = gb->t->tp_embedding_replicated;
	int64_t vocab = replicated ? m->vocab : (m->vocab + gb->tp - 1) / gb->tp;
	op->weight_elems = vocab * m->hidden + (m->learned_pos ? m->max_pos * m->hidden : 0);
	if (gb->tp > 1 && replicated && gb->sp) {
		/* the whole lookup on every GPU, its sequence shard copied out (DTensor's Replicate
		 * to Shard(1)); the backward all-gathers the shards' gradients */
		gb->s_act = gb->s / gb->tp;
		rm_op *sl = new_op(gb, "embedding_shard", RM_OP_ELEMENTWISE, RM_PHASE_FWD, -1);
		op_in(gb, sl, out);
		out = add_act(gb, "embedding_shard", m->hidden, gb->dt);
		op_out(gb, sl, out);
		sl->bytes_read = sl->bytes_written = vbytes(gb, out);
	} else if (gb->tp > 1 && !replicated) {
		gb->s_act = gb->sp ? gb->s / gb->tp : gb->s;
		out = fwd_tp_collective(gb, "embedding_reduced", gb->sp ? RM_COLL_REDUCE_SCATTER : RM_COLL_ALL_REDUCE, out,
					m->hidden);
	}
	if (dropout_on(m, gb->t, m->embd_dropout))
		fwd_dropout(gb, "embedding_dropout", out);
	emit_all_backward(gb);
	gb->g->params = op->weight_elems;
	gb->s_act = gb->s;
}

/* Tokens per chunk of the chunked loss: torchtune's chunked cross-entropy uses 8 chunks. */
#define LOSS_CHUNKS 8

static void build_head(graph_builder *gb)
{
	const rm_model_config *m = gb->m;
	rm_loss_kind lk = gb->t->loss;
	/* tensor parallel: the final norm on the sequence-parallel stream, gathered, then
	 * Megatron's column-parallel LM head and vocabulary-parallel cross-entropy over ceil(V / tp)
	 * logits per token (its max and sum-exp all-reduces move [T] floats and are left out) */
	int64_t vocab = (m->vocab + gb->tp - 1) / gb->tp;
	gb->s_act = gb->sp ? gb->s / gb->tp : gb->s;
	int x = add_act(gb, "final_input", m->hidden, gb->dt);
	gb->g->input = x;
	/* a ResidualMLP has no final norm: the head reads the last block's output */
	int xn = m->arch == RM_ARCH_RESIDUAL_MLP ? x : fwd_norm(gb, "final_norm", x);
	gb->s_act = gb->s;
	if (gb->sp)
		xn = fwd_tp_collective(gb, "final_norm_gathered", RM_COLL_ALL_GATHER, xn, m->hidden);
	int logits = fwd_projection(gb, "dot_logits", xn, m->hidden, vocab, false);
	if (gb->tp > 1 && !gb->t->loss_parallel) {
		/* the logits gathered over the vocabulary (Replicate): every GPU computes the whole
		 * loss; the gradient's own slice needs no collective */
		int g = fwd_tp_collective(gb, "logits_gathered", RM_COLL_ALL_GATHER, logits, m->vocab);
		gb->g->ops[gb->g->values[g].producer].no_grad = true;
		gb->g->ops[gb->g->values[g].producer].coll_bytes = gb->T * m->vocab * gb->es;
		logits = g;
		vocab = m->vocab;
	}
	int64_t tv = gb->T * vocab;
	int64_t chunks = lk == RM_LOSS_PLAIN ? 1 : LOSS_CHUNKS;
	if (chunks > 1)
		gb->g->values[logits].bytes = (gb->g->values[logits].bytes + chunks - 1) / chunks;
	int probs_in = logits;
	if (lk != RM_LOSS_FUSED) {
		/* logits.float(): PyTorch's cross-entropy runs in fp32 (torchtitan, HF trainers) */
		rm_op *cast = new_op(gb, "logits_float", RM_OP_ELEMENTWISE, RM_PHASE_FWD, -1);
		op_in(gb, cast, logits);
		probs_in = add_act(gb, "logits_float", vocab, RM_DTYPE_FP32);
		op_out(gb, cast, probs_in);
		cast->bytes_read = tv * rm_dtype_size(gb->dt);
		cast->bytes_written = tv * 4;
		gb->g->values[probs_in].bytes = (tv * 4 + chunks - 1) / chunks;
		cast->mclass = RM_MB_POINTWISE;
	}
	/* log_softmax + nll: the log-probabilities stay for the backward (fp32 unless fused, where
	 * the kernel computes the gradient in the forward and keeps nothing of the vocabulary) */
	rm_op *loss = new_op(gb, "loss", RM_OP_ELEMENTWISE, RM_PHASE_FWD, -1);
	op_in(gb, loss, probs_in);
	int logp = add_act(gb, "loss_log_probs", vocab, lk == RM_LOSS_FUSED ? gb->dt : RM_DTYPE_FP32);
	int64_t logp_full = gb->g->values[logp].bytes;
	gb->g->values[logp].bytes = (logp_full + chunks - 1) / chunks;
	op_out(gb, loss, logp);
	loss->bytes_read = (lk == RM_LOSS_FUSED ? tv * rm_dtype_size(gb->dt) : tv * 4) + gb->T * 4; /* and int32 labels */
	loss->bytes_written = logp_full;
	loss->flops = FLOPS_LOSS * (double)gb->T * (double)vocab;
	loss->mclass = RM_MB_SOFTMAX;
	emit_all_backward(gb);
	gb->g->params = (m->arch == RM_ARCH_RESIDUAL_MLP ? 0 : m->norm == RM_NORM_LAYERNORM ? 2 : 1) * m->hidden +
			(m->tied ? 0 : (m->vocab + gb->tp - 1) / gb->tp * m->hidden);
	/* PyTorch's cross-entropy backward is nll_loss_backward (a zero-filled fp32 gradient of the
	 * log-probabilities with -1/N at the labels) then _log_softmax_backward_data (the logits'
	 * gradient): both buffers are live at once beside the saved log-probabilities, so the loss
	 * backward leaves twice its output live until the cast back consumes it (the peak of the
	 * loss). The chunked losses do the same one chunk at a time; the fused kernel writes its
	 * gradient in place. */
	for (int i = gb->g->n_fwd_ops; i < gb->g->n_ops; i++) {
		rm_op *op = &gb->g->ops[i];
		const char *fname = gb->g->ops[op->fwd_op].name;
		bool loss_bwd = strcmp(fname, "loss") == 0;
		if (!loss_bwd && strcmp(fname, "logits_float") != 0)
			continue;
		int64_t live = (op->bytes_written + chunks - 1) / chunks;
		if (loss_bwd && lk != RM_LOSS_FUSED)
			live *= 2;
		if (live != op->bytes_written)
			op->grad_bytes = live;
	}
}

rm_workload *rm_workload_create(const rm_model_config *model, const rm_train_config *train,
				rm_error *err)
{
	if (model->dense_layers > 0 && model->dense_layers < model->layers && !model->dense_first) {
		rm_error_set(err, RM_UNSUPPORTED, NULL, 0, 0,
			     "%s: dense layers between the mixture-of-experts ones (Qwen's mlp_only_layers or "
			     "decoder_sparse_step, a DeepSeek moe_layer_freq past the dense first layers) are "
			     "not modelled yet: the op graphs run the dense layers first; `remora describe` "
			     "counts its parameters",
			     model->name[0] ? model->name : rm_arch_hf_name(model->arch));
		return NULL;
	}
	if (rm_train_config_check(model, train, err) != RM_OK)
		return NULL;
	rm_workload *wl = rm_new(rm_workload, 1);
	wl->model = *model;
	wl->train = *train;
	wl->params = rm_model_param_count(model);
	graph_builder gb = {
		.m = &wl->model,
		.t = &wl->train,
		.b = train->micro_batch,
		.s = train->seq_len / (train->cp > 1 ? train->cp : 1),
		.T = train->micro_batch * train->seq_len / (train->cp > 1 ? train->cp : 1),
		.tp = train->tp > 1 ? train->tp : 1,
		.cp = train->cp > 1 ? train->cp : 1,
		.sp = train->tp > 1 && train->sp,
		.s_act = train->seq_len / (train->cp > 1 ? train->cp : 1),
		.dt = train->dtype,
		.gemm_dt = train->dtype,
		.es = rm_dtype_size(train->dtype),
	};
	graph_init(&wl->embedding, "embedding");
	gb.g = &wl->embedding;
	build_embedding(&gb);
	graph_init(&wl->layer, "layer");
	gb.g = &wl->layer;
	gb.gemm_dt = train->gemm_dtype == RM_DTYPE_FP8_E4M3 ? RM_DTYPE_FP8_E4M3 : train->dtype;
	build_layer(&gb);
	graph_init(&wl->dense_layer, "dense_layer");
	if (rm_workload_dense_layers(wl) > 0) {
		/* the same builder with the dense MLP (intermediate_size wide) for the first layers */
		gb.g = &wl->dense_layer;
		gb.dense_mlp = true;
		build_layer(&gb);
		gb.dense_mlp = false;
	}
	gb.gemm_dt = train->dtype;
	graph_init(&wl->head, "head");
	gb.g = &wl->head;
	build_head(&gb);
	/* the activations of all layers (describe, the memory peaks) must fit as well */
	int64_t nd = rm_workload_dense_layers(wl);
	double all_layers = (double)rm_graph_residual_bytes(&wl->layer) * (double)(model->layers - nd) +
			    (nd > 0 ? (double)rm_graph_residual_bytes(&wl->dense_layer) * (double)nd : 0.0);
	if (all_layers > BYTES_LIMIT) {
		rm_error_set(err, RM_RANGE, NULL, 0, 0,
			     "seq_len %lld x micro_batch %lld is too large to represent: the activations of "
			     "%lld layers of %s take %.3g B (remora counts bytes up to 2^62 = 4 EiB)",
			     (long long)train->seq_len, (long long)train->micro_batch,
			     (long long)model->layers, model->name, all_layers);
		rm_workload_destroy(wl);
		return NULL;
	}
	return wl;
}

void rm_workload_destroy(rm_workload *wl)
{
	if (!wl)
		return;
	graph_finish(&wl->embedding);
	graph_finish(&wl->layer);
	graph_finish(&wl->dense_layer);
	graph_finish(&wl->head);
	free(wl);
}

int64_t rm_workload_dense_layers(const rm_workload *wl)
{
	const rm_model_config *m = &wl->model;
	return rm_model_config_is_moe(m) && m->dense_layers > 0 ? m->dense_layers : 0;
}

const rm_graph *rm_workload_layer_graph(const rm_workload *wl, int64_t l)
{
	return l < rm_workload_dense_layers(wl) ? &wl->dense_layer : &wl->layer;
}

int rm_graph_find_value(const rm_graph *g, const char *name)
{
	for (int i = 0; i < g->n_values; i++)
		if (strcmp(g->values[i].name, name) == 0)
			return i;
	return -1;
}

int rm_graph_find_op(const rm_graph *g, const char *name)
{
	for (int i = 0; i < g->n_ops; i++)
		if (strcmp(g->ops[i].name, name) == 0)
			return i;
	return -1;
}

double rm_graph_flops(const rm_graph *g, rm_phase phase)
{
	double sum = 0;
	for (int i = 0; i < g->n_ops; i++)
		if (phase == RM_PHASE_COUNT || g->ops[i].phase == phase)
			sum += g->ops[i].flops;
	return sum;
}

bool rm_graph_value_is_residual(const rm_graph *g, int v)
{
	for (int i = g->n_fwd_ops; i < g->n_ops; i++)
		for (int r = 0; r < g->ops[i].n_residuals; r++)
			if (g->ops[i].residuals[r] == v)
				return true;
	return false;
}

int64_t rm_graph_residual_bytes(const rm_graph *g)
{
	int64_t sum = 0;
	bool *kept = rm_new(bool, (size_t)g->n_values + 1);
	for (int v = 0; v < g->n_values; v++) {
		if (!rm_graph_value_is_residual(g, v))
			continue;
		/* a sequence-parallel gather is kept as its shard and gathered again */
		int p = g->values[v].producer, k = v;
		if (p >= 0 && g->ops[p].kind == RM_OP_COLLECTIVE && g->ops[p].coll == RM_COLL_ALL_GATHER)
			k = g->ops[p].inputs[0];
		if (!kept[k])
			sum += g->values[k].bytes;
		kept[k] = true;
	}
	free(kept);
	return sum;
}

/* The PaLM attention term per token and sequence position: 12 L a d, or 6 L a (d_qk + d_v) for
 * latent attention (three times the forward's 2 a (d_qk + d_v) per attended pair). */
static double attention_flops_coeff(const rm_model_config *m)
{
	if (m->mla)
		return 6.0 * (double)m->layers * (double)m->heads * (double)(m->head_dim + m->v_head_dim);
	return 12.0 * (double)m->layers * (double)(m->heads * m->head_dim);
}

double rm_workload_model_flops_per_token(const rm_workload *wl)
{
	const rm_model_config *m = &wl->model;
	return 6.0 * (double)wl->params.nonembedding + attention_flops_coeff(m) * (double)wl->train.seq_len;
}

double rm_workload_mfu_flops_per_token(const rm_workload *wl)
{
	const rm_model_config *m = &wl->model;
	double s = (double)wl->train.seq_len;
	double ratio = attended_pairs(m, &wl->train) / (s * s);
	/* a mixture of experts counts the parameters a token uses (6 N_active) */
	return 6.0 * (double)wl->params.active_nonembedding + attention_flops_coeff(m) * s * ratio;
}

double rm_workload_executed_flops(const rm_workload *wl)
{
	int64_t nd = rm_workload_dense_layers(wl);
	double dense = nd > 0 ? (double)nd * rm_graph_flops(&wl->dense_layer, RM_PHASE_COUNT) : 0.0;
	return rm_graph_flops(&wl->embedding, RM_PHASE_COUNT) +
	       (double)(wl->model.layers - nd) * rm_graph_flops(&wl->layer, RM_PHASE_COUNT) + dense +
	       rm_graph_flops(&wl->head, RM_PHASE_COUNT);
}

int64_t rm_workload_rank_params(const rm_workload *wl)
{
	if (wl->train.tp <= 1 && wl->train.ep <= 1)
		return wl->params.total;
	int64_t nd = rm_workload_dense_layers(wl);
	return wl->embedding.params + (wl->model.layers - nd) * wl->layer.params + nd * wl->dense_layer.params +
	       wl->head.params;
}

int64_t rm_workload_rank_expert_params(const rm_workload *wl)
{
	int64_t n = 0;
	for (int i = 0; i < wl->layer.n_fwd_ops; i++)
		if (wl->layer.ops[i].expert)
			n += wl->layer.ops[i].weight_elems;
	return n * (wl->model.layers - rm_workload_dense_layers(wl)); /* the dense layers have none */
}

rm_static_memory rm_workload_static_memory(const rm_workload *wl)
{
	rm_static_memory s = {0};
	int64_t f = wl->train.fsdp;
	int64_t psize = rm_dtype_size(wl->train.param_dtype), gsize = rm_dtype_size(wl->train.grad_dtype);
	int64_t rank = rm_workload_rank_params(wl);
	/* expert parallelism (ep = the FSDP group): each GPU holds its experts whole, the rest of
	 * the model is sharded over the group */
	int64_t expert = wl->train.ep > 1 ? rm_workload_rank_expert_params(wl) : 0;
	s.shard_elems = (rank - expert + f - 1) / f + expert;
	s.opt_group = wl->train.zero < 3 ? f * wl->train.dp_replicate : f;
	int64_t expert_group = s.opt_group / f;
	s.opt_elems = (rank - expert + s.opt_group - 1) / s.opt_group + (expert + expert_group - 1) / expert_group;
	s.params = s.shard_elems * psize;
	s.update_params = s.opt_elems * psize;
	s.master = wl->train.master_weights ? s.opt_elems * 4 : 0;
	if (wl->train.master_shards && wl->train.master_weights)
		s.params = s.update_params = 0; /* the fp32 shard is the parameter; all-gathers cast it */
	s.grads = (wl->train.zero == 2 ? s.opt_elems : s.shard_elems) * gsize;
	s.update_grads = s.opt_elems * gsize;
	int64_t moment = rm_dtype_size(wl->train.optimizer_dtype);
	switch (wl->train.optimizer) {
	case RM_OPT_ADAMW:
		s.optimizer = 2 * moment * s.opt_elems;
		break;
	case RM_OPT_SGD_MOMENTUM:
		s.optimizer = moment * s.opt_elems;
		break;
	default:
		s.optimizer = 0;
		break;
	}
	s.total = s.params + s.master + s.grads + s.optimizer;
	return s;
}
