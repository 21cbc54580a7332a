/* Hugging Face config.json reader: presets, defaults, and every error with its line:column. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remora/workload.h"

static rm_status load(const char *file, rm_model_config *m, rm_error *err)
{
	const char *dir = getenv("REMORA_TEST_DATA");
	cr_assert_not_null(dir, "REMORA_TEST_DATA must point at tests/data");
	char path[1024];
	snprintf(path, sizeof(path), "%s/configs/%s", dir, file);
	rm_error_clear(err);
	return rm_model_config_load(path, m, err);
}

/* Asserts the status and position of the error a malformed file gives. */
static void expect_error(const char *file, rm_status st, int line, int col, const char *needle)
{
	rm_model_config m;
	rm_error err;
	rm_status got = load(file, &m, &err);
	cr_assert_eq(got, st, "%s: status %s, want %s (%s)", file, rm_status_name(got),
		     rm_status_name(st), err.msg);
	cr_assert_eq(err.line, line, "%s: line %d, want %d (%s)", file, err.line, line, err.msg);
	cr_assert_eq(err.column, col, "%s: column %d, want %d (%s)", file, err.column, col, err.msg);
	cr_assert(strstr(err.msg, needle), "%s: message '%s' lacks '%s'", file, err.msg, needle);
	cr_assert(strstr(err.file, file), "%s: error names file '%s'", file, err.file);
}

Test(hfconfig, truncated_file_points_at_its_end)
{
	expect_error("truncated.json", RM_PARSE, 5, 1, "truncated");
}

Test(hfconfig, heads_not_dividing_hidden_points_at_heads)
{
	/* line 6 is `  "num_attention_heads": 30,`: the value starts in column 26 */
	expect_error("heads-not-dividing.json", RM_INVALID, 6, 26, "does not divide hidden_size");
}

Test(hfconfig, missing_key_points_at_the_object)
{
	expect_error("missing-ffn.json", RM_MISSING, 1, 1, "\"intermediate_size\"");
}

Test(hfconfig, non_positive_size)
{
	expect_error("zero-layers.json", RM_INVALID, 5, 24, "must be positive");
}

Test(hfconfig, unsupported_architecture_lists_supported)
{
	expect_error("unsupported-arch.json", RM_UNSUPPORTED, 2, 21, "GPT2LMHeadModel");
}

Test(hfconfig, quoted_number_is_not_an_integer)
{
	expect_error("string-size.json", RM_INVALID, 3, 17, "must be an integer");
}

Test(hfconfig, kv_heads_must_divide_heads)
{
	expect_error("kv-heads.json", RM_INVALID, 7, 26, "num_key_value_heads");
}

Test(hfconfig, duplicate_key_is_a_parse_error)
{
	expect_error("duplicate-key.json", RM_PARSE, 1, 63, "duplicate key");
}

Test(hfconfig, top_level_must_be_an_object)
{
	expect_error("top-level-array.json", RM_PARSE, 1, 1, "JSON object");
}

Test(hfconfig, empty_file)
{
	expect_error("empty.json", RM_PARSE, 1, 1, "empty file");
}

Test(hfconfig, missing_file_is_an_io_error)
{
	rm_model_config m;
	rm_error err;
	cr_assert_eq(load("no-such-file.json", &m, &err), RM_IO);
	cr_assert(strstr(err.msg, "cannot open"));
}

Test(hfconfig, gpt2_defaults)
{
	rm_model_config m;
	rm_error err;
	cr_assert_eq(load("gpt2-minimal.json", &m, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(m.arch, RM_ARCH_GPT2);
	cr_assert_eq(m.ffn, 4 * 768, "n_inner null means 4*n_embd");
	cr_assert(m.tied, "GPT-2 ties its head by default");
	cr_assert_float_eq(m.attn_dropout, 0.1, 1e-12);
	cr_assert_eq(m.head_dim, 64);
	cr_assert_str_eq(m.name, "gpt2-minimal");
}

Test(hfconfig, model_type_without_architectures)
{
	rm_model_config m;
	rm_error err;
	cr_assert_eq(load("mistral-window.json", &m, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(m.arch, RM_ARCH_MISTRAL);
	cr_assert_eq(m.sliding_window, 4096);
	cr_assert_eq(m.kv_heads, 8);
}

Test(hfconfig, presets_resolve_and_unknown_lists_them)
{
	rm_model_config m;
	rm_error err;
	rm_error_clear(&err);
	for (const char *const *p = rm_model_preset_names(); *p; p++) {
		cr_assert_eq(rm_model_config_resolve(*p, &m, &err), RM_OK, "%s: %s", *p, err.msg);
		cr_assert_str_eq(m.name, *p);
	}
	cr_assert_eq(rm_model_config_resolve("llama-9", &m, &err), RM_NOT_FOUND);
	cr_assert(strstr(err.msg, "llama-2-7b") && strstr(err.msg, "gpt-2"), "%s", err.msg);
}

Test(hfconfig, parse_from_memory)
{
	const char *text = "{\"architectures\": [\"Qwen2ForCausalLM\"], \"vocab_size\": 151936,"
			   " \"hidden_size\": 896, \"num_hidden_layers\": 24, \"num_attention_heads\": 14,"
			   " \"num_key_value_heads\": 2, \"intermediate_size\": 4864,"
			   " \"tie_word_embeddings\": true}";
	rm_model_config m;
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_model_config_parse(text, strlen(text), "mem.json", &m, &err), RM_OK, "%s",
		     err.msg);
	cr_assert(m.qkv_bias && m.tied);
	/* Qwen2-0.5B (its published config): 494,032,768 parameters, by hand with head_dim 64:
	 * 151936*896 + 24*(2*896 + 2*896*896 + 896 + 2*(896*128 + 128) + 3*896*4864) + 896. */
	cr_assert_eq(rm_model_param_count(&m).total, 494032768LL);
}

/* Asserts the error of config text parsed from memory (positions counted by hand in text). */
static void expect_text_error(const char *text, rm_status st, int line, int col, const char *needle)
{
	rm_model_config m;
	rm_error err;
	rm_error_clear(&err);
	rm_status got = rm_model_config_parse(text, strlen(text), "mem.json", &m, &err);
	cr_assert_eq(got, st, "%s: status %s, want %s (%s)", text, rm_status_name(got), rm_status_name(st),
		     err.msg);
	cr_assert_eq(err.line, line, "%s: line %d, want %d (%s)", text, err.line, line, err.msg);
	cr_assert_eq(err.column, col, "%s: column %d, want %d (%s)", text, err.column, col, err.msg);
	cr_assert(strstr(err.msg, needle), "'%s' lacks '%s'", err.msg, needle);
	cr_assert_str_eq(err.file, "mem.json");
}

/* Objects and lists (empty ones too) are pointed at by their '{' or '[', not by their first item. */
Test(hfconfig, collections_point_at_their_bracket)
{
	/* line 2: ` "architectures": []` -> '[' is column 19 */
	expect_text_error("{\"vocab_size\": 1,\n \"architectures\": []}", RM_INVALID, 2, 19,
			  "\"architectures\" must be a non-empty list");
	/* `{"architectures": ["LlamaForCausalLM"], "vocab_size": {}}`: '{' of {} is column 55 */
	expect_text_error("{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": {}}", RM_INVALID, 1, 55,
			  "\"vocab_size\" must be an integer");
	/* the same with [7, 8]: '[' at column 55, not the 7 at 56 */
	expect_text_error("{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": [7, 8]}", RM_INVALID, 1, 55,
			  "\"vocab_size\" must be an integer");
	/* the object itself, after two blank lines and two spaces: line 3, column 3 */
	expect_text_error("\n\n  {\"architectures\": [\"LlamaForCausalLM\"]}", RM_MISSING, 3, 3,
			  "missing required key \"vocab_size\"");
}

/* libfyaml 0.7.12 scans "%\xd0" for ever; the reader refuses a directive line before parsing. */
Test(hfconfig, directive_line_is_refused_not_scanned, .timeout = 5)
{
	expect_text_error("%\xd0", RM_PARSE, 1, 1, "'%'");
	expect_text_error("{\"vocab_size\": 1,\n%\xd0}", RM_PARSE, 2, 1, "YAML directive");
}

/* JSON holds no NUL byte: refused at its position before libfyaml sees it. */
Test(hfconfig, nul_byte_is_refused_before_parsing)
{
	static const char text[] = "{\"architectures\": [\"LlamaForCausalLM\"],\n \"a\": \"\0\"}";
	rm_model_config m;
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_model_config_parse(text, sizeof(text) - 1, "nul.json", &m, &err), RM_PARSE);
	cr_assert_eq(err.line, 2);
	cr_assert_eq(err.column, 8);
	cr_assert(strstr(err.msg, "control character 0x00"), "%s", err.msg);
}

/* ---- mixture of experts ---- */

/* Small configs, one key a line, so that every value's line and column is plain to see. */
#define QWEN2_MOE \
	"{\n" \
	" \"architectures\": [\"Qwen2MoeForCausalLM\"],\n" \
	" \"vocab_size\": 1000,\n" \
	" \"hidden_size\": 64,\n" \
	" \"num_hidden_layers\": 4,\n" \
	" \"num_attention_heads\": 4,\n" \
	" \"num_key_value_heads\": 2,\n" \
	" \"intermediate_size\": 256,\n" \
	" \"moe_intermediate_size\": 32,\n" \
	" \"shared_expert_intermediate_size\": 128,\n" \
	" \"num_experts\": 8,\n" \
	" \"num_experts_per_tok\": 2,\n" \
	" \"decoder_sparse_step\": 2,\n" \
	" \"mlp_only_layers\": [1]\n" \
	"}\n"

#define DEEPSEEK \
	"{\n" \
	" \"architectures\": [\"DeepseekV3ForCausalLM\"],\n" \
	" \"vocab_size\": 1000,\n" \
	" \"hidden_size\": 64,\n" \
	" \"num_hidden_layers\": 3,\n" \
	" \"num_attention_heads\": 4,\n" \
	" \"intermediate_size\": 256,\n" \
	" \"moe_intermediate_size\": 32,\n" \
	" \"n_routed_experts\": 8,\n" \
	" \"num_experts_per_tok\": 2,\n" \
	" \"n_shared_experts\": null,\n" \
	" \"first_k_dense_replace\": 1,\n" \
	" \"q_lora_rank\": null,\n" \
	" \"kv_lora_rank\": 16,\n" \
	" \"qk_nope_head_dim\": 8,\n" \
	" \"qk_rope_head_dim\": 4,\n" \
	" \"v_head_dim\": 8,\n" \
	" \"topk_method\": \"greedy\"\n" \
	"}\n"

/* text with the first occurrence of from replaced by to (static buffer; one use at a time) */
static const char *with(const char *text, const char *from, const char *to)
{
	static char buf[2048];
	const char *at = strstr(text, from);
	cr_assert_not_null(at, "'%s' not in the base text", from);
	snprintf(buf, sizeof(buf), "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
	return buf;
}

static rm_model_config parse_ok(const char *text)
{
	rm_model_config m;
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_model_config_parse(text, strlen(text), "mem.json", &m, &err), RM_OK, "%s", err.msg);
	return m;
}

/*
 * Qwen2-MoE, h = 64, 4 layers, decoder_sparse_step 2 and mlp_only_layers [1]: only layer 3 is MoE
 * ((i + 1) % 2 == 0 for layers 1 and 3; layer 1 is listed dense). By hand:
 *   attention 64x64 + 2 x 64x32 + 64x64 + biases 64 + 2 x 32 = 12,416; norms 2 x 64
 *   dense layer 12,416 + 128 + 3 x 64 x 256 = 61,696
 *   MoE layer 12,416 + 128 + 8 x 3 x 64 x 32 + shared 3 x 64 x 128 + router 8 x 64 + gate 64 = 86,848
 *   total 3 x 61,696 + 86,848 + 2 x 1000 x 64 + 64 = 400,000; active 400,000 - 6 x 3 x 64 x 32
 */
Test(hfconfig, qwen2_moe_dense_layers_and_count)
{
	rm_model_config m = parse_ok(QWEN2_MOE);
	cr_assert_eq(m.arch, RM_ARCH_QWEN2_MOE);
	cr_assert(rm_model_config_is_moe(&m) && m.shared_gate && m.qkv_bias);
	cr_assert_eq(m.experts, 8);
	cr_assert_eq(m.experts_per_tok, 2);
	cr_assert_eq(m.expert_ffn, 32);
	cr_assert_eq(m.shared_experts, 1);
	cr_assert_eq(m.shared_ffn, 128);
	cr_assert_eq(m.dense_layers, 3);
	rm_param_count p = rm_model_param_count(&m);
	cr_assert_eq(p.per_dense_layer, 61696);
	cr_assert_eq(p.per_layer, 86848);
	cr_assert_eq(p.total, 400000);
	cr_assert_eq(p.active, 400000 - 6 * 3 * 64 * 32);
	/* the dense layers 0-2 come first: the op graphs hold them (the dense one and the MoE one) */
	cr_assert(m.dense_first);
	rm_train_config t = rm_train_config_default(&m);
	t.seq_len = 64;
	rm_error err;
	rm_workload *wl = rm_workload_create(&m, &t, &err);
	cr_assert_not_null(wl, "%s", err.msg);
	cr_assert_eq(wl->dense_layer.params, 61696);
	cr_assert_eq(wl->layer.params, 86848);
	rm_workload_destroy(wl);
	/* step 1 with mlp_only_layers [1]: layer 1 dense between MoE layers, which is refused */
	rm_model_config q = parse_ok(with(QWEN2_MOE, " \"decoder_sparse_step\": 2,\n", ""));
	cr_assert_eq(q.dense_layers, 1);
	cr_assert(!q.dense_first);
	cr_assert_null(rm_workload_create(&q, &t, &err));
	cr_assert(strstr(err.msg, "dense layers between the mixture-of-experts ones"), "%s", err.msg);
}

/*
 * DeepSeek-V3 shape without query compression (q_lora_rank null), without shared experts
 * (n_shared_experts null) and without the selection bias (topk_method greedy), first layer dense:
 *   MLA q 64 x 4 x (8 + 4) = 3,072; kv_a 64 x (16 + 4) + 16 = 1,296; kv_b 16 x 4 x (8 + 8) = 1,024;
 *   o 4 x 8 x 64 = 2,048: 7,440
 *   dense layer 7,440 + 128 + 3 x 64 x 256 = 56,720; MoE layer 7,440 + 128 + 8 x 6,144 + 512 = 57,232
 *   total 56,720 + 2 x 57,232 + 128,000 + 64 = 299,248
 */
Test(hfconfig, deepseek_without_q_compression_or_shared_experts)
{
	rm_model_config m = parse_ok(DEEPSEEK);
	cr_assert(m.mla && !m.router_bias);
	cr_assert_eq(m.q_lora_rank, 0);
	cr_assert_eq(m.shared_experts, 0);
	cr_assert_eq(m.dense_layers, 1);
	cr_assert_eq(m.head_dim, 12);
	cr_assert_eq(m.kv_heads, 4);
	cr_assert_eq(m.mtp_layers, 0);
	rm_param_count p = rm_model_param_count(&m);
	cr_assert_eq(p.per_dense_layer, 56720);
	cr_assert_eq(p.per_layer, 57232);
	cr_assert_eq(p.total, 299248);
	cr_assert_eq(p.active, 299248 - 2 * 6 * 3 * 64 * 32);
	/* null switches the shared experts off; an absent key takes transformers' default, one
	 * shared expert as wide as a routed one */
	rm_model_config d = parse_ok(with(DEEPSEEK, " \"n_shared_experts\": null,\n", ""));
	cr_assert_eq(d.shared_experts, 1);
	cr_assert_eq(d.shared_ffn, 32);
	/* moe_layer_freq 1 (the default): the dense layer comes first. Layer i is dense when i <
	 * first_k_dense_replace or i % moe_layer_freq != 0: with 1 and 2, layers 0 and 1 (still the
	 * first ones); with 0 and 2, layer 1 alone, between two MoE layers */
	cr_assert(m.dense_first);
	rm_model_config f = parse_ok(with(DEEPSEEK, " \"first_k_dense_replace\": 1,\n",
					  " \"first_k_dense_replace\": 1,\n \"moe_layer_freq\": 2,\n"));
	cr_assert_eq(f.dense_layers, 2);
	cr_assert(f.dense_first);
	f = parse_ok(with(DEEPSEEK, " \"first_k_dense_replace\": 1,\n",
			  " \"first_k_dense_replace\": 0,\n \"moe_layer_freq\": 2,\n"));
	cr_assert_eq(f.dense_layers, 1);
	cr_assert(!f.dense_first);
	/* the op graphs hold the same counts: queries projected from h directly, no shared expert */
	rm_train_config t = rm_train_config_default(&m);
	t.seq_len = 64;
	rm_error err;
	rm_workload *wl = rm_workload_create(&m, &t, &err);
	cr_assert_not_null(wl, "%s", err.msg);
	cr_assert_eq(wl->dense_layer.params, 56720);
	cr_assert_eq(wl->layer.params, 57232);
	cr_assert_eq(rm_graph_find_op(&wl->layer, "dot_attention_query_a"), -1);
	cr_assert_eq(rm_graph_find_op(&wl->layer, "dot_shared_gate"), -1);
	cr_assert_eq(wl->layer.ops[rm_graph_find_op(&wl->layer, "dot_attention_query")].gemm.k, 64);
	rm_workload_destroy(wl);
	cr_assert_null(rm_workload_create(&f, &t, &err));
	cr_assert_eq(err.status, RM_UNSUPPORTED);
}

Test(hfconfig, moe_missing_expert_keys)
{
	expect_text_error(with(QWEN2_MOE, " \"num_experts\": 8,\n", ""), RM_MISSING, 1, 1,
			  "missing required key \"num_experts\"");
	expect_text_error(with(QWEN2_MOE, " \"shared_expert_intermediate_size\": 128,\n", ""), RM_MISSING, 1,
			  1, "\"shared_expert_intermediate_size\"");
	expect_text_error(with(DEEPSEEK, " \"v_head_dim\": 8,\n", ""), RM_MISSING, 1, 1, "\"v_head_dim\"");
	expect_text_error("{\"architectures\": [\"MixtralForCausalLM\"], \"vocab_size\": 1000, \"hidden_size\": 64,"
			  " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"intermediate_size\": 256,"
			  " \"num_experts_per_tok\": 2}",
			  RM_MISSING, 1, 1, "\"num_local_experts\"");
}

Test(hfconfig, moe_top_k_above_expert_count_points_at_it)
{
	/* line 12 is ` "num_experts_per_tok": 9,`: the value starts in column 25 */
	expect_text_error(with(QWEN2_MOE, "\"num_experts_per_tok\": 2", "\"num_experts_per_tok\": 9"), RM_INVALID,
			  12, 25, "exceeds \"num_experts\" (8)");
}

Test(hfconfig, moe_non_positive_sizes_point_at_the_value)
{
	expect_text_error(with(QWEN2_MOE, "\"moe_intermediate_size\": 32", "\"moe_intermediate_size\": 0"),
			  RM_INVALID, 9, 27, "\"moe_intermediate_size\" must be positive");
	expect_text_error(with(DEEPSEEK, "\"n_routed_experts\": 8", "\"n_routed_experts\": 0"), RM_INVALID, 9,
			  22, "\"n_routed_experts\" must be positive");
	expect_text_error(with(DEEPSEEK, "\"kv_lora_rank\": 16", "\"kv_lora_rank\": -16"), RM_INVALID, 14, 18,
			  "must be positive, got -16");
	expect_text_error(with(DEEPSEEK, "\"num_experts_per_tok\": 2", "\"num_experts_per_tok\": 0"),
			  RM_INVALID, 10, 25, "\"num_experts_per_tok\" must be positive");
}

Test(hfconfig, moe_layer_indices_are_checked)
{
	/* `[1, 4]` starts in column 21: the 4 is column 25; the model has layers 0..3 */
	expect_text_error(with(QWEN2_MOE, "[1]", "[1, 4]"), RM_INVALID, 14, 25, "from 0 to 3");
	expect_text_error(with(QWEN2_MOE, "[1]", "{}"), RM_INVALID, 14, 21, "list of layer indices");
	expect_text_error(with(DEEPSEEK, "\"first_k_dense_replace\": 1", "\"first_k_dense_replace\": 4"),
			  RM_INVALID, 12, 27, "between 0 and 3");
}

/* Every size within 2^24, but 4 layers x 2^24 experts x 3 x 2^24 x 2^24 weights pass 2^62 by far:
 * refused, not wrapped around. */
Test(hfconfig, moe_count_beyond_int64_is_refused)
{
	char a[2048], b[2048];
	snprintf(a, sizeof(a), "%s", with(QWEN2_MOE, "\"hidden_size\": 64", "\"hidden_size\": 16777216"));
	snprintf(b, sizeof(b), "%s", with(a, "\"num_experts\": 8", "\"num_experts\": 16777216"));
	expect_text_error(with(b, "\"moe_intermediate_size\": 32", "\"moe_intermediate_size\": 16777216"),
			  RM_RANGE, 1, 1, "beyond what remora models");
}

/* Past 4096 layers every count names the layer limit, the one within the dimensions' 2^24 and
 * the one past it alike; 0 is not positive. Line 5, column 23: the value. */
Test(hfconfig, layer_count_beyond_the_limit_names_it)
{
	expect_text_error(with(QWEN2_MOE, "\"num_hidden_layers\": 4", "\"num_hidden_layers\": 1000000"), RM_RANGE, 5, 23,
			  "\"num_hidden_layers\" = 1000000 is beyond what remora models (at most 4096)");
	expect_text_error(with(QWEN2_MOE, "\"num_hidden_layers\": 4", "\"num_hidden_layers\": 1099511627776"), RM_RANGE, 5,
			  23, "\"num_hidden_layers\" = 1099511627776 is beyond what remora models (at most 4096)");
	expect_text_error(with(QWEN2_MOE, "\"num_hidden_layers\": 4", "\"num_hidden_layers\": 0"), RM_INVALID, 5, 23,
			  "must be positive, got 0");
}

/* remora's ResidualMLP: no attention, no norms; relu by default, gelu accepted, others refused
 * at the value. Parameters by hand: 2 x h x ffn per block, the table and the untied head. */
Test(hfconfig, residual_mlp_blocks_by_hand)
{
	const char *text = "{\"architectures\": [\"ResidualMLP\"], \"hidden_size\": 64, \"intermediate_size\": 256,\n"
			   " \"num_hidden_layers\": 3, \"vocab_size\": 1000}";
	rm_model_config m = parse_ok(text);
	cr_assert_eq(m.arch, RM_ARCH_RESIDUAL_MLP);
	cr_assert_eq(m.mlp, RM_MLP_RELU);
	cr_assert_eq(m.heads, 0);
	cr_assert_eq(m.kv_heads, 0);
	rm_param_count p = rm_model_param_count(&m);
	cr_assert_eq(p.per_layer, 2 * 64 * 256);
	cr_assert_eq(p.final_norm, 0);
	cr_assert_eq(p.total, 3 * 2 * 64 * 256 + 2 * 1000 * 64);
	m = parse_ok(with(text, "\"vocab_size\"", "\"hidden_act\": \"gelu\", \"vocab_size\""));
	cr_assert_eq(m.mlp, RM_MLP_GELU);
	rm_model_config bad;
	rm_error err;
	rm_error_clear(&err);
	const char *silu = with(text, "\"vocab_size\"", "\"hidden_act\": \"silu\", \"vocab_size\"");
	cr_assert_eq(rm_model_config_parse(silu, strlen(silu), "mem.json", &bad, &err), RM_UNSUPPORTED);
	cr_assert_eq(err.line, 2);
	cr_assert_eq(err.column, 40, "%d: %s", err.column, err.msg);
	cr_assert(strstr(err.msg, "relu or gelu"), "%s", err.msg);
	/* a required key written null is pointed at, not called missing */
	const char *nul = with(text, "\"hidden_size\": 64", "\"hidden_size\": null");
	rm_error_clear(&err);
	cr_assert_eq(rm_model_config_parse(nul, strlen(nul), "mem.json", &bad, &err), RM_INVALID);
	cr_assert_eq(err.line, 1);
	cr_assert_eq(err.column, 51, "%d: %s", err.column, err.msg);
	cr_assert(strstr(err.msg, "\"hidden_size\" is null"), "%s", err.msg);
}
