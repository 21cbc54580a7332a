/*
 * Hugging Face config.json reader (remora/workload.h): libfyaml parses the JSON and keeps the
 * line and column of every node, so each error points at the offending value.
 *
 * Keys read, by architecture (transformers' configuration classes; defaults are theirs):
 *   Llama/Mistral/Qwen2: vocab_size, hidden_size, num_hidden_layers, num_attention_heads,
 *     num_key_value_heads (= heads), head_dim (= hidden/heads), intermediate_size,
 *     max_position_embeddings, tie_word_embeddings (false), attention_bias (false; Qwen2 always
 *     has q/k/v biases), mlp_bias (false), attention_dropout (0), sliding_window,
 *     use_sliding_window (Qwen2), hidden_act (silu).
 *   GPT-2: vocab_size, n_embd, n_layer, n_head, n_positions (1024), n_inner (4*n_embd),
 *     tie_word_embeddings (true), attn_pdrop, resid_pdrop, embd_pdrop (0.1).
 *   Mixture of experts, on top of the Llama keys (intermediate_size is the dense MLP's size):
 *     Mixtral: num_local_experts, num_experts_per_tok (intermediate_size is each expert's).
 *     Qwen2-MoE / Qwen3-MoE: num_experts, num_experts_per_tok, moe_intermediate_size,
 *       shared_expert_intermediate_size (Qwen2-MoE only), decoder_sparse_step (1),
 *       mlp_only_layers ([]); Qwen3-MoE adds q/k norms and no q/k/v biases.
 *     DeepSeek-V3: n_routed_experts, num_experts_per_tok, moe_intermediate_size,
 *       n_shared_experts (1; null: none), first_k_dense_replace (3), moe_layer_freq (1),
 *       topk_method (noaux_tc: a selection bias per expert), num_nextn_predict_layers (0),
 *       and MLA: q_lora_rank (1536; null: no query compression), kv_lora_rank,
 *       qk_nope_head_dim, qk_rope_head_dim, v_head_dim.
 *     The expert counts and sizes and the MLA ranks and head sizes are required although
 *     transformers' classes default them: a config without them is not the model it names.
 * Other keys are ignored: config.json files carry many that do not change the workload.
 */
#include <errno.h>
#include <libfyaml.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/fy_util.h"
#include "remora/workload.h"

static const char *const preset_names[] = {
	"llama-2-7b", "llama-2-13b", "llama-30b", "llama-2-70b", "llama-3-8b", "llama-3-70b", "llama-3.1-405b",
	"mistral-7b", "qwen2-7b",    "gpt-2",     "mixtral-8x7b", "qwen2-moe-a2.7b", "qwen3-30b-a3b",
	"deepseek-v3", NULL,
};

const char *const *rm_model_preset_names(void)
{
	return preset_names;
}

static const struct {
	rm_arch arch;
	const char *hf_name;
	const char *model_type;
} arch_table[] = {
	{RM_ARCH_LLAMA, "LlamaForCausalLM", "llama"},
	{RM_ARCH_MISTRAL, "MistralForCausalLM", "mistral"},
	{RM_ARCH_QWEN2, "Qwen2ForCausalLM", "qwen2"},
	{RM_ARCH_GPT2, "GPT2LMHeadModel", "gpt2"},
	{RM_ARCH_MIXTRAL, "MixtralForCausalLM", "mixtral"},
	{RM_ARCH_QWEN2_MOE, "Qwen2MoeForCausalLM", "qwen2_moe"},
	{RM_ARCH_QWEN3_MOE, "Qwen3MoeForCausalLM", "qwen3_moe"},
	{RM_ARCH_DEEPSEEK_V3, "DeepseekV3ForCausalLM", "deepseek_v3"},
	{RM_ARCH_RESIDUAL_MLP, "ResidualMLP", "residual_mlp"},
};

const char *rm_arch_hf_name(rm_arch arch)
{
	for (size_t i = 0; i < RM_ARRAY_SIZE(arch_table); i++)
		if (arch_table[i].arch == arch)
			return arch_table[i].hf_name;
	return "unknown";
}

#define MAX_DIMENSION (INT64_C(1) << 24) /* 16,777,216: vocab, hidden, ffn, positions, heads */
#define MAX_LAYERS 4096

/* Parsing context: the document, the file name for errors, and the first error. */
typedef struct cfg_reader {
	const char *path;
	const char *text; /* the input, for the position of the top-level object */
	size_t len;
	struct fy_node *root;
	rm_error *err;
} cfg_reader;

/*
 * 1-based line and column of a node. libfyaml 0.7's nodes carry marks on scalars only; an object
 * or a list (empty ones included) is found by its path in the parser's events over the text,
 * which give the position of its '{' or '['.
 */
static void node_position(cfg_reader *r, struct fy_node *node, int *line, int *col)
{
	*line = 0;
	*col = 0;
	if (node && !fy_node_is_scalar(node)) {
		char *path = fy_node_get_path(node);
		bool found = path && rm__fy_path_position(r->text, r->len, true, path, false, line, col);
		free(path);
		if (found)
			return;
	}
	rm__fy_node_position(node, line, col);
}

static rm_status at_node(cfg_reader *r, struct fy_node *node, rm_status st, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static rm_status at_node(cfg_reader *r, struct fy_node *node, rm_status st, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	int line, col;
	node_position(r, node, &line, &col);
	return rm_error_set(r->err, st, r->path, line, col, "%s", msg);
}

/* The value node of key in the root mapping, NULL if absent or JSON null. */
static struct fy_node *lookup(cfg_reader *r, const char *key)
{
	struct fy_node *v = fy_node_mapping_lookup_by_string(r->root, key, FY_NT);
	if (!v)
		return NULL;
	if (fy_node_is_scalar(v) && fy_node_get_style(v) == FYNS_PLAIN) {
		const char *t = fy_node_get_scalar0(v);
		if (t && strcmp(t, "null") == 0)
			return NULL;
	}
	return v;
}

static bool plain_scalar(struct fy_node *v)
{
	return fy_node_is_scalar(v) && fy_node_get_style(v) == FYNS_PLAIN;
}

/* Reads an integer key; absent keys take def, or fail when required. */
static rm_status read_int(cfg_reader *r, const char *key, bool required, int64_t def, int64_t *out)
{
	struct fy_node *v = lookup(r, key);
	if (!v) {
		/* null stands for the default (transformers writes "sliding_window": null); a
		 * required key has none */
		struct fy_node *nul = fy_node_mapping_lookup_by_string(r->root, key, FY_NT);
		if (required && nul)
			return at_node(r, nul, RM_INVALID, "\"%s\" is null: it needs a value", key);
		if (required)
			return at_node(r, r->root, RM_MISSING, "missing required key \"%s\"", key);
		*out = def;
		return RM_OK;
	}
	const char *t = plain_scalar(v) ? fy_node_get_scalar0(v) : NULL;
	char *end = NULL;
	errno = 0;
	long long x = t ? strtoll(t, &end, 10) : 0;
	if (!t || end == t || *end != '\0' || errno == ERANGE)
		return at_node(r, v, RM_INVALID, "\"%s\" must be an integer%s", key,
			       errno == ERANGE ? " within 64 bits" : "");
	*out = (int64_t)x;
	return RM_OK;
}

static rm_status read_positive(cfg_reader *r, const char *key, bool required, int64_t def,
			       int64_t *out)
{
	RM_CHECK(read_int(r, key, required, def, out));
	if (*out <= 0) {
		struct fy_node *v = lookup(r, key);
		return at_node(r, v ? v : r->root, RM_INVALID, "\"%s\" must be positive, got %lld", key,
			       (long long)*out);
	}
	/* Far beyond any published model, and small enough that every size below stays exact in
	 * int64 and the op graphs stay in memory. */
	if (*out > MAX_DIMENSION) {
		struct fy_node *v = lookup(r, key);
		return at_node(r, v ? v : r->root, RM_RANGE, "\"%s\" = %lld is beyond what remora models (at most %lld)",
			       key, (long long)*out, (long long)MAX_DIMENSION);
	}
	return RM_OK;
}

static rm_status read_bool(cfg_reader *r, const char *key, bool def, bool *out)
{
	struct fy_node *v = lookup(r, key);
	if (!v) {
		*out = def;
		return RM_OK;
	}
	const char *t = plain_scalar(v) ? fy_node_get_scalar0(v) : NULL;
	if (t && strcmp(t, "true") == 0)
		*out = true;
	else if (t && strcmp(t, "false") == 0)
		*out = false;
	else
		return at_node(r, v, RM_INVALID, "\"%s\" must be true or false", key);
	return RM_OK;
}

static rm_status read_prob(cfg_reader *r, const char *key, double def, double *out)
{
	struct fy_node *v = lookup(r, key);
	if (!v) {
		*out = def;
		return RM_OK;
	}
	const char *t = plain_scalar(v) ? fy_node_get_scalar0(v) : NULL;
	char *end = NULL;
	double x = t ? strtod(t, &end) : NAN;
	if (!t || end == t || *end != '\0' || !(x >= 0.0 && x < 1.0))
		return at_node(r, v, RM_INVALID, "\"%s\" must be a probability in [0, 1)", key);
	*out = x;
	return RM_OK;
}

static rm_status read_string(cfg_reader *r, const char *key, const char **out)
{
	struct fy_node *v = lookup(r, key);
	*out = NULL;
	if (!v)
		return RM_OK;
	if (!fy_node_is_scalar(v) || plain_scalar(v))
		return at_node(r, v, RM_INVALID, "\"%s\" must be a string", key);
	*out = fy_node_get_scalar0(v);
	return RM_OK;
}

static rm_status read_arch(cfg_reader *r, rm_arch *arch)
{
	struct fy_node *archs = lookup(r, "architectures");
	const char *name = NULL;
	struct fy_node *where = r->root;
	if (archs) {
		if (!fy_node_is_sequence(archs) || fy_node_sequence_item_count(archs) < 1)
			return at_node(r, archs, RM_INVALID,
				       "\"architectures\" must be a non-empty list of class names");
		struct fy_node *first = fy_node_sequence_get_by_index(archs, 0);
		if (!fy_node_is_scalar(first) || plain_scalar(first))
			return at_node(r, first, RM_INVALID, "\"architectures\" must list strings");
		name = fy_node_get_scalar0(first);
		where = first;
		for (size_t i = 0; i < RM_ARRAY_SIZE(arch_table); i++)
			if (strcmp(name, arch_table[i].hf_name) == 0) {
				*arch = arch_table[i].arch;
				return RM_OK;
			}
	} else {
		RM_CHECK(read_string(r, "model_type", &name));
		if (!name)
			return at_node(r, r->root, RM_MISSING,
				       "missing required key \"architectures\" (or \"model_type\")");
		where = lookup(r, "model_type");
		for (size_t i = 0; i < RM_ARRAY_SIZE(arch_table); i++)
			if (strcmp(name, arch_table[i].model_type) == 0) {
				*arch = arch_table[i].arch;
				return RM_OK;
			}
	}
	char known[384] = "";
	for (size_t i = 0; i < RM_ARRAY_SIZE(arch_table); i++) {
		size_t n = strlen(known);
		snprintf(known + n, sizeof(known) - n, "%s%s", i ? ", " : "", arch_table[i].hf_name);
	}
	return at_node(r, where, RM_UNSUPPORTED, "unsupported architecture \"%s\" (supported: %s)", name,
		       known);
}

/* vocab_size, hidden_size and num_hidden_layers (at most MAX_LAYERS), the keys the Llama-like
 * configs and ResidualMLP share. */
static rm_status read_sizes(cfg_reader *r, rm_model_config *m)
{
	RM_CHECK(read_positive(r, "vocab_size", true, 0, &m->vocab));
	RM_CHECK(read_positive(r, "hidden_size", true, 0, &m->hidden));
	/* the layer limit first, so that every count past it names the same one */
	RM_CHECK(read_int(r, "num_hidden_layers", true, 0, &m->layers));
	if (m->layers > MAX_LAYERS)
		return at_node(r, lookup(r, "num_hidden_layers"), RM_RANGE,
			       "\"num_hidden_layers\" = %lld is beyond what remora models (at most %d)",
			       (long long)m->layers, MAX_LAYERS);
	return read_positive(r, "num_hidden_layers", true, 0, &m->layers);
}

static rm_status read_llama_like(cfg_reader *r, rm_model_config *m)
{
	RM_CHECK(read_sizes(r, m));
	RM_CHECK(read_positive(r, "num_attention_heads", true, 0, &m->heads));
	RM_CHECK(read_positive(r, "num_key_value_heads", false, m->heads, &m->kv_heads));
	RM_CHECK(read_positive(r, "intermediate_size", true, 0, &m->ffn));
	/* transformers' defaults: Llama 2048, Mistral and Mixtral 4096*32, DeepSeek-V3 4096, Qwen 32768 */
	int64_t def_pos = m->arch == RM_ARCH_LLAMA ? 2048
			  : m->arch == RM_ARCH_MISTRAL || m->arch == RM_ARCH_MIXTRAL ? 131072
			  : m->arch == RM_ARCH_DEEPSEEK_V3 ? 4096
							   : 32768;
	RM_CHECK(read_positive(r, "max_position_embeddings", false, def_pos, &m->max_pos));
	RM_CHECK(read_bool(r, "tie_word_embeddings", false, &m->tied));
	bool attention_bias = false, mlp_bias = false;
	RM_CHECK(read_bool(r, "attention_bias", false, &attention_bias));
	RM_CHECK(read_bool(r, "mlp_bias", false, &mlp_bias));
	if (attention_bias || mlp_bias)
		return at_node(r, lookup(r, attention_bias ? "attention_bias" : "mlp_bias"),
			       RM_UNSUPPORTED,
			       "attention_bias/mlp_bias true is not modelled for %s (only Qwen2's q/k/v biases are)",
			       rm_arch_hf_name(m->arch));
	bool qwen = m->arch == RM_ARCH_QWEN2 || m->arch == RM_ARCH_QWEN2_MOE || m->arch == RM_ARCH_QWEN3_MOE;
	m->qkv_bias = m->arch == RM_ARCH_QWEN2 || m->arch == RM_ARCH_QWEN2_MOE;
	m->out_bias = false;
	m->norm = RM_NORM_RMSNORM;
	m->mlp = RM_MLP_SWIGLU;
	m->learned_pos = false;
	RM_CHECK(read_prob(r, "attention_dropout", 0.0, &m->attn_dropout));
	m->resid_dropout = 0.0;
	m->embd_dropout = 0.0;
	const char *act = NULL;
	RM_CHECK(read_string(r, "hidden_act", &act));
	if (act && strcmp(act, "silu") != 0 && strcmp(act, "swish") != 0)
		return at_node(r, lookup(r, "hidden_act"), RM_UNSUPPORTED,
			       "hidden_act \"%s\" is not modelled (the gated MLP uses silu)", act);
	/* DeepSeek-V3 attends to the whole sequence; Qwen models only with use_sliding_window */
	bool use_window = !qwen && m->arch != RM_ARCH_DEEPSEEK_V3;
	if (qwen)
		RM_CHECK(read_bool(r, "use_sliding_window", false, &use_window));
	int64_t window = 0;
	RM_CHECK(read_int(r, "sliding_window", false, 0, &window));
	if (window < 0)
		return at_node(r, lookup(r, "sliding_window"), RM_INVALID,
			       "\"sliding_window\" must be positive or null");
	m->sliding_window = use_window ? window : 0;
	struct fy_node *hd = lookup(r, "head_dim");
	if (m->arch == RM_ARCH_DEEPSEEK_V3) {
		m->head_dim = 0; /* latent attention: read_mla sets it */
	} else if (hd) {
		RM_CHECK(read_positive(r, "head_dim", false, 0, &m->head_dim));
	} else {
		if (m->hidden % m->heads != 0)
			return at_node(r, lookup(r, "num_attention_heads"), RM_INVALID,
				       "num_attention_heads (%lld) does not divide hidden_size (%lld)",
				       (long long)m->heads, (long long)m->hidden);
		m->head_dim = m->hidden / m->heads;
	}
	if (m->heads % m->kv_heads != 0)
		return at_node(r, lookup(r, "num_key_value_heads"), RM_INVALID,
			       "num_key_value_heads (%lld) does not divide num_attention_heads (%lld)",
			       (long long)m->kv_heads, (long long)m->heads);
	return RM_OK;
}

/* A non-negative integer key (first_k_dense_replace, num_nextn_predict_layers), at most max. */
static rm_status read_count(cfg_reader *r, const char *key, int64_t def, int64_t max, int64_t *out)
{
	RM_CHECK(read_int(r, key, false, def, out));
	if (*out < 0 || *out > max) {
		struct fy_node *v = lookup(r, key);
		return at_node(r, v ? v : r->root, RM_INVALID, "\"%s\" must be between 0 and %lld, got %lld",
			       key, (long long)max, (long long)*out);
	}
	return RM_OK;
}

/*
 * A positive size that JSON null switches off (*out = 0): DeepSeek's q_lora_rank and
 * n_shared_experts. An absent key takes def.
 */
static rm_status read_positive_or_null(cfg_reader *r, const char *key, int64_t def, int64_t *out)
{
	if (fy_node_mapping_lookup_by_string(r->root, key, FY_NT) && !lookup(r, key)) {
		*out = 0;
		return RM_OK;
	}
	return read_positive(r, key, false, def, out);
}

/*
 * Qwen's mlp_only_layers (layer indices with a dense MLP) and decoder_sparse_step (layer i is MoE
 * when (i + 1) % step == 0), as Qwen2MoeDecoderLayer and Qwen3MoeDecoderLayer choose: the count
 * of dense layers.
 */
static rm_status read_qwen_dense_layers(cfg_reader *r, rm_model_config *m)
{
	int64_t step = 1;
	RM_CHECK(read_positive(r, "decoder_sparse_step", false, 1, &step));
	bool dense[MAX_LAYERS] = {false};
	struct fy_node *list = lookup(r, "mlp_only_layers");
	if (list) {
		if (!fy_node_is_sequence(list))
			return at_node(r, list, RM_INVALID, "\"mlp_only_layers\" must be a list of layer indices");
		int n = fy_node_sequence_item_count(list);
		for (int i = 0; i < n; i++) {
			struct fy_node *item = fy_node_sequence_get_by_index(list, i);
			const char *t = plain_scalar(item) ? fy_node_get_scalar0(item) : NULL;
			char *end = NULL;
			errno = 0;
			long long x = t ? strtoll(t, &end, 10) : -1;
			if (!t || end == t || *end != '\0' || errno == ERANGE || x < 0 || x >= m->layers)
				return at_node(r, item, RM_INVALID,
					       "\"mlp_only_layers\" items must be layer indices from 0 to %lld",
					       (long long)m->layers - 1);
			dense[x] = true;
		}
	}
	m->dense_layers = 0;
	for (int64_t i = 0; i < m->layers; i++)
		m->dense_layers += dense[i] || (i + 1) % step != 0;
	/* whether the dense layers are the first ones (the op graphs model only that placement) */
	m->dense_first = true;
	for (int64_t i = 0; i < m->layers; i++)
		if ((dense[i] || (i + 1) % step != 0) != (i < m->dense_layers))
			m->dense_first = false;
	return RM_OK;
}

/* DeepSeek-V3's latent attention dims (DeepseekV3Attention). */
static rm_status read_mla(cfg_reader *r, rm_model_config *m)
{
	m->mla = true;
	RM_CHECK(read_positive_or_null(r, "q_lora_rank", 1536, &m->q_lora_rank));
	RM_CHECK(read_positive(r, "kv_lora_rank", true, 0, &m->kv_lora_rank));
	RM_CHECK(read_positive(r, "qk_nope_head_dim", true, 0, &m->qk_nope_head_dim));
	RM_CHECK(read_positive(r, "qk_rope_head_dim", true, 0, &m->qk_rope_head_dim));
	RM_CHECK(read_positive(r, "v_head_dim", true, 0, &m->v_head_dim));
	m->head_dim = m->qk_nope_head_dim + m->qk_rope_head_dim;
	m->kv_heads = m->heads; /* every head has its own keys and values, decompressed from the latent */
	return RM_OK;
}

/*
 * An upper bound of the parameter count in double (router, gates and biases included), so that
 * the exact int64 count of rm_model_param_count cannot overflow.
 */
static double params_bound(const rm_model_config *m)
{
	double h = (double)m->hidden, heads = (double)m->heads;
	double attn = 4.0 * h * heads * (double)m->head_dim + 4.0 * h;
	if (m->mla) {
		double qk = (double)(m->qk_nope_head_dim + m->qk_rope_head_dim);
		double ql = (double)m->q_lora_rank, kvl = (double)m->kv_lora_rank;
		attn = h * ql + ql + (ql > 0 ? ql : h) * heads * qk + h * (kvl + qk) + kvl +
		       kvl * heads * (qk + (double)m->v_head_dim) + heads * (double)m->v_head_dim * h;
	}
	double moe = 3.0 * h * ((double)m->experts * (double)m->expert_ffn +
				(double)m->shared_experts * (double)m->shared_ffn) +
		     2.0 * h * (double)m->experts + h;
	double layer = attn + moe + 3.0 * h * (double)m->ffn + 8.0 * h + 2.0 * h * h;
	return ((double)m->layers + (double)m->mtp_layers) * layer + 3.0 * (double)m->vocab * h;
}

/* The expert keys of the MoE families (see the list at the top of the file). */
static rm_status read_moe(cfg_reader *r, rm_model_config *m)
{
	const char *experts_key = m->arch == RM_ARCH_MIXTRAL	       ? "num_local_experts"
				  : m->arch == RM_ARCH_DEEPSEEK_V3 ? "n_routed_experts"
								   : "num_experts";
	RM_CHECK(read_positive(r, experts_key, true, 0, &m->experts));
	RM_CHECK(read_positive(r, "num_experts_per_tok", true, 0, &m->experts_per_tok));
	if (m->experts_per_tok > m->experts)
		return at_node(r, lookup(r, "num_experts_per_tok"), RM_INVALID,
			       "\"num_experts_per_tok\" (%lld) exceeds \"%s\" (%lld): a token cannot go to more experts than there are",
			       (long long)m->experts_per_tok, experts_key, (long long)m->experts);
	switch (m->arch) {
	case RM_ARCH_MIXTRAL:
		m->expert_ffn = m->ffn; /* MixtralBlockSparseTop2MLP is intermediate_size wide */
		break;
	case RM_ARCH_QWEN2_MOE:
		RM_CHECK(read_positive(r, "moe_intermediate_size", true, 0, &m->expert_ffn));
		RM_CHECK(read_positive(r, "shared_expert_intermediate_size", true, 0, &m->shared_ffn));
		m->shared_experts = 1;
		m->shared_gate = true;
		RM_CHECK(read_qwen_dense_layers(r, m));
		break;
	case RM_ARCH_QWEN3_MOE:
		RM_CHECK(read_positive(r, "moe_intermediate_size", true, 0, &m->expert_ffn));
		m->qk_norm = true;
		RM_CHECK(read_qwen_dense_layers(r, m));
		break;
	case RM_ARCH_DEEPSEEK_V3: {
		RM_CHECK(read_positive(r, "moe_intermediate_size", true, 0, &m->expert_ffn));
		RM_CHECK(read_positive_or_null(r, "n_shared_experts", 1, &m->shared_experts));
		m->shared_ffn = m->shared_experts ? m->expert_ffn : 0; /* DeepseekV3MoE: n_shared x moe size */
		int64_t first_dense = 0, freq = 1;
		RM_CHECK(read_count(r, "first_k_dense_replace", 3, m->layers, &first_dense));
		RM_CHECK(read_positive(r, "moe_layer_freq", false, 1, &freq));
		/* DeepSeek's modelling code: layer i is MoE when i >= first_k_dense_replace and
		 * i % moe_layer_freq == 0 */
		m->dense_layers = 0;
		for (int64_t i = 0; i < m->layers; i++)
			m->dense_layers += i < first_dense || i % freq != 0;
		/* whether the dense layers are the first ones (always with moe_layer_freq 1) */
		m->dense_first = true;
		for (int64_t i = 0; i < m->layers; i++)
			if ((i < first_dense || i % freq != 0) != (i < m->dense_layers))
				m->dense_first = false;
		const char *topk = NULL;
		RM_CHECK(read_string(r, "topk_method", &topk));
		m->router_bias = !topk || strcmp(topk, "noaux_tc") == 0;
		RM_CHECK(read_count(r, "num_nextn_predict_layers", 0, MAX_LAYERS, &m->mtp_layers));
		RM_CHECK(read_mla(r, m));
		break;
	}
	default:
		break;
	}
	double bound = params_bound(m);
	if (bound > 4611686018427387904.0) /* 2^62: every count and its sums stay exact in int64 */
		return at_node(r, r->root, RM_RANGE,
			       "the model's parameter count (about %.3g) is beyond what remora models (at most 2^62)",
			       bound);
	return RM_OK;
}

static rm_status read_gpt2(cfg_reader *r, rm_model_config *m)
{
	RM_CHECK(read_positive(r, "vocab_size", true, 0, &m->vocab));
	RM_CHECK(read_positive(r, "n_embd", true, 0, &m->hidden));
	RM_CHECK(read_positive(r, "n_layer", true, 0, &m->layers));
	if (m->layers > MAX_LAYERS)
		return at_node(r, lookup(r, "n_layer"), RM_RANGE, "\"n_layer\" = %lld is beyond what remora models (at most %d)",
			       (long long)m->layers, MAX_LAYERS);
	RM_CHECK(read_positive(r, "n_head", true, 0, &m->heads));
	RM_CHECK(read_positive(r, "n_positions", false, 1024, &m->max_pos));
	RM_CHECK(read_positive(r, "n_inner", false, 4 * m->hidden, &m->ffn));
	RM_CHECK(read_bool(r, "tie_word_embeddings", true, &m->tied));
	RM_CHECK(read_prob(r, "attn_pdrop", 0.1, &m->attn_dropout));
	RM_CHECK(read_prob(r, "resid_pdrop", 0.1, &m->resid_dropout));
	RM_CHECK(read_prob(r, "embd_pdrop", 0.1, &m->embd_dropout));
	if (m->hidden % m->heads != 0)
		return at_node(r, lookup(r, "n_head"), RM_INVALID,
			       "n_head (%lld) does not divide n_embd (%lld)", (long long)m->heads,
			       (long long)m->hidden);
	m->kv_heads = m->heads;
	m->head_dim = m->hidden / m->heads;
	m->qkv_bias = true;
	m->out_bias = true;
	m->norm = RM_NORM_LAYERNORM;
	m->mlp = RM_MLP_GELU;
	m->learned_pos = true;
	m->sliding_window = 0;
	return RM_OK;
}

/*
 * remora's ResidualMLP: an embedding, num_hidden_layers blocks x + W2 act(W1 x) (W1 hidden x
 * intermediate, W2 back, no biases, no norm, no attention) and an untied LM head. It is the toy
 * of scheduler reports (jax-ml/jax#20763: flax Dense, relu, Dense, residual), not a language
 * model: heads, kv_heads and head_dim are 0.
 */
static rm_status read_residual_mlp(cfg_reader *r, rm_model_config *m)
{
	RM_CHECK(read_sizes(r, m));
	RM_CHECK(read_positive(r, "intermediate_size", true, 0, &m->ffn));
	RM_CHECK(read_positive(r, "max_position_embeddings", false, MAX_DIMENSION, &m->max_pos));
	RM_CHECK(read_bool(r, "tie_word_embeddings", false, &m->tied));
	const char *act = NULL;
	RM_CHECK(read_string(r, "hidden_act", &act));
	if (!act || strcmp(act, "relu") == 0) {
		m->mlp = RM_MLP_RELU;
	} else if (strcmp(act, "gelu") == 0 || strcmp(act, "gelu_new") == 0) {
		m->mlp = RM_MLP_GELU;
	} else {
		return at_node(r, lookup(r, "hidden_act"), RM_UNSUPPORTED,
			       "hidden_act \"%s\" is not modelled for ResidualMLP (relu or gelu)", act);
	}
	m->heads = m->kv_heads = m->head_dim = 0;
	m->norm = RM_NORM_RMSNORM; /* unused: the blocks have none */
	/* keys of parts a ResidualMLP block does not have: read by nothing, so said once each */
	static const char *const unused[] = {"num_attention_heads", "num_key_value_heads", "head_dim",
					     "rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "rope_theta",
					     "rope_scaling", "attention_bias", "num_local_experts", "num_experts"};
	for (size_t i = 0; i < sizeof(unused) / sizeof(unused[0]); i++) {
		struct fy_node *v = lookup(r, unused[i]);
		if (!v)
			continue;
		int line, col;
		node_position(r, v, &line, &col);
		rm_log_warn("%s:%d:%d: %s has no effect: a ResidualMLP block is x + W2 act(W1 x), with no "
			    "attention, norm or experts",
			    r->path, line, col, unused[i]);
	}
	return RM_OK;
}

/*
 * First collected libfyaml diagnostic as an rm_error (diagnostics are 1-based, unlike token
 * marks). An error past the last non-blank character means the input ended early.
 */
static rm_status parse_failure(struct fy_diag *diag, const char *path, const char *text,
			       size_t len, rm_error *err)
{
	void *iter = NULL;
	struct fy_diag_error *e = diag ? fy_diag_errors_iterate(diag, &iter) : NULL;
	if (!e)
		return rm_error_set(err, RM_PARSE, path, 0, 0, "not valid JSON");
	int last_line = 1, line = 1;
	for (size_t i = 0; i < len; i++) {
		if (text[i] == '\n')
			line++;
		else if (text[i] != ' ' && text[i] != '\t' && text[i] != '\r')
			last_line = line;
	}
	bool truncated = e->line > last_line;
	return rm_error_set(err, RM_PARSE, path, e->line, e->column, "invalid JSON: %s%s",
			    e->msg ? e->msg : "syntax error",
			    truncated ? " (the file ends early: truncated?)" : "");
}

rm_status rm_model_config_parse(const char *text, size_t len, const char *path,
				rm_model_config *out, rm_error *err)
{
	rm_status st = RM_OK;
	memset(out, 0, sizeof(*out));
	struct fy_diag_cfg dcfg;
	fy_diag_cfg_default(&dcfg);
	dcfg.fp = NULL;
	dcfg.colorize = false;
	struct fy_diag *diag = fy_diag_create(&dcfg);
	if (diag)
		fy_diag_set_collect_errors(diag, true);
	struct fy_parse_cfg pcfg = {
		.flags = FYPCF_QUIET | FYPCF_JSON_FORCE | FYPCF_COLLECT_DIAG,
		.diag = diag,
	};
	int ctl_line, ctl_col;
	unsigned ctl;
	if (rm__fy_find_control(text, len, &ctl_line, &ctl_col, &ctl)) {
		st = rm_error_set(err, RM_PARSE, path, ctl_line, ctl_col,
				  "invalid JSON: control character 0x%02X (JSON text holds none but tab and line breaks; "
				  "write \\u%04X in a string)",
				  ctl, ctl);
		goto out_diag;
	}
	/* libfyaml 0.7.12 can loop for ever on a YAML directive line ("%\xd0"); JSON has none */
	int directive = rm__fy_directive_line(text, len);
	if (directive) {
		st = rm_error_set(err, RM_PARSE, path, directive, 1,
				  "invalid JSON: a line starts with '%%' (a YAML directive, not JSON)");
		goto out_diag;
	}
	struct fy_document *doc = fy_document_build_from_string(&pcfg, text, len);
	if (!doc) {
		st = parse_failure(diag, path, text, len, err);
		goto out_diag;
	}
	cfg_reader r = {.path = path, .text = text, .len = len, .root = fy_document_root(doc), .err = err};
	struct fy_node *nul = rm__fy_find_nul_scalar(r.root);
	if (nul) {
		int nl, nc;
		rm__fy_node_start(text, len, true, nul, &nl, &nc);
		st = rm_error_set(err, RM_PARSE, path, nl, nc, "a string holds a NUL character (\\u0000), which no key or value may");
		goto out_doc;
	}
	if (!r.root) {
		st = rm_error_set(err, RM_PARSE, path, 1, 1, "empty file: expected a JSON object");
		goto out_doc;
	}
	if (!fy_node_is_mapping(r.root)) {
		st = at_node(&r, r.root, RM_PARSE, "expected a JSON object at the top level");
		goto out_doc;
	}
	st = read_arch(&r, &out->arch);
	if (st != RM_OK)
		goto out_doc;
	st = out->arch == RM_ARCH_GPT2		 ? read_gpt2(&r, out)
	     : out->arch == RM_ARCH_RESIDUAL_MLP ? read_residual_mlp(&r, out)
						 : read_llama_like(&r, out);
	bool moe = out->arch == RM_ARCH_MIXTRAL || out->arch == RM_ARCH_QWEN2_MOE ||
		   out->arch == RM_ARCH_QWEN3_MOE || out->arch == RM_ARCH_DEEPSEEK_V3;
	if (st == RM_OK && moe)
		st = read_moe(&r, out);
	if (st != RM_OK)
		goto out_doc;
	/* Name: the file's base name without .json, or its folder for ".../config.json". */
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	snprintf(out->name, sizeof(out->name), "%s", base);
	char *dot = strstr(out->name, ".json");
	if (dot && dot[5] == '\0')
		*dot = '\0';
out_doc:
	fy_document_destroy(doc);
out_diag:
	fy_diag_destroy(diag);
	return st;
}

rm_status rm_model_config_load(const char *path, rm_model_config *out, rm_error *err)
{
	char *text = NULL;
	size_t len = 0;
	if (!rm_read_file(path, &text, &len, err))
		return err ? err->status : RM_IO;
	if (len == 0) {
		free(text);
		return rm_error_set(err, RM_PARSE, path, 1, 1, "empty file: expected a JSON object");
	}
	rm_status st = rm_model_config_parse(text, len, path, out, err);
	free(text);
	return st;
}

rm_status rm_model_config_resolve(const char *model, rm_model_config *out, rm_error *err)
{
	size_t n = strlen(model);
	bool is_path = strchr(model, '/') || (n > 5 && strcmp(model + n - 5, ".json") == 0);
	if (is_path)
		return rm_model_config_load(model, out, err);
	for (const char *const *p = preset_names; *p; p++) {
		if (strcasecmp(model, *p) != 0)
			continue;
		char rel[128], path[1024];
		snprintf(rel, sizeof(rel), "models/%s.json", *p);
		if (!rm_data_path(rel, path, sizeof(path), err))
			return err ? err->status : RM_NOT_FOUND;
		RM_CHECK(rm_model_config_load(path, out, err));
		snprintf(out->name, sizeof(out->name), "%s", *p);
		return RM_OK;
	}
	char known[512] = "";
	for (const char *const *p = preset_names; *p; p++) {
		size_t used = strlen(known);
		snprintf(known + used, sizeof(known) - used, "%s%s", used ? ", " : "", *p);
	}
	return rm_error_set(err, RM_NOT_FOUND, NULL, 0, 0,
			    "unknown model '%s': not a preset (%s) nor a path to a config.json", model,
			    known);
}
