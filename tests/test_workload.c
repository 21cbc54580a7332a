/*
 * Workload model: exact parameter counts (docs/reference/models.csv), activation bytes
 * (docs/reference/activation-memory.md), FLOPs and static memory, each computed by hand.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>

#include "remora/cost.h"
#include "remora/remat.h"
#include "remora/workload.h"

static rm_model_config preset(const char *name)
{
	rm_model_config m;
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_model_config_resolve(name, &m, &err), RM_OK, "%s: %s", name, err.msg);
	return m;
}

static rm_workload *build(const rm_model_config *m, rm_train_config t)
{
	rm_error err;
	rm_error_clear(&err);
	rm_workload *wl = rm_workload_create(m, &t, &err);
	cr_assert_not_null(wl, "%s", err.msg);
	return wl;
}

/* docs/reference/models.csv, column params, every row. */
Test(workload, parameter_counts_match_models_csv)
{
	static const struct {
		const char *name;
		long long params;
	} rows[] = {
		{"llama-2-7b", 6738415616LL},  {"llama-2-13b", 13015864320LL}, {"llama-30b", 32528943616LL},
		{"llama-2-70b", 68976648192LL}, {"llama-3-8b", 8030261248LL},
		{"llama-3-70b", 70553706496LL}, {"llama-3.1-405b", 405853388800LL}, {"mistral-7b", 7241732096LL},
		{"qwen2-7b", 7615616512LL},    {"gpt-2", 124439808LL},
		/* mixture of experts: the bf16 checkpoints' safetensors total_size / 2, and
		 * DeepSeek-V3's 671B main model (docs/reference/models.csv) */
		{"mixtral-8x7b", 46702792704LL}, {"qwen2-moe-a2.7b", 14315784192LL},
		{"qwen3-30b-a3b", 30532122624LL}, {"deepseek-v3", 671026419200LL},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		rm_model_config m = preset(rows[i].name);
		rm_param_count p = rm_model_param_count(&m);
		cr_assert_eq(p.total, rows[i].params, "%s: %lld, want %lld", rows[i].name,
			     (long long)p.total, rows[i].params);
		cr_assert_eq(p.total, p.embedding + p.layers + p.final_norm + p.lm_head);
	}
}

/*
 * Active parameters per token: the total minus, in every MoE layer, the routed experts a token
 * is not sent to (each 3 x h x expert_ffn). By hand:
 *   Mixtral 8x7B: 32 x (8 - 2) x 3 x 4096 x 14336 = 33,822,867,456 unchosen -> 12,879,925,248
 *   Qwen1.5-MoE-A2.7B: 24 x 56 x 3 x 2048 x 1408 = 11,626,610,688 -> 2,689,173,504 ("2.7B")
 *   Qwen3-30B-A3B: 48 x 120 x 3 x 2048 x 768 = 27,179,089,920 -> 3,353,032,704 ("3.3B")
 *   DeepSeek-V3: 58 x 248 x 3 x 7168 x 2048 = 633,474,121,728 -> 37,552,297,472 ("37B")
 */
Test(workload, moe_active_parameters_by_hand)
{
	static const struct {
		const char *name;
		long long active, routed;
	} rows[] = {
		{"mixtral-8x7b", 12879925248LL, 32LL * 8 * 3 * 4096 * 14336},
		{"qwen2-moe-a2.7b", 2689173504LL, 24LL * 60 * 3 * 2048 * 1408},
		{"qwen3-30b-a3b", 3353032704LL, 48LL * 128 * 3 * 2048 * 768},
		{"deepseek-v3", 37552297472LL, 58LL * 256 * 3 * 7168 * 2048},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		rm_model_config m = preset(rows[i].name);
		rm_param_count p = rm_model_param_count(&m);
		cr_assert_eq(p.active, rows[i].active, "%s: active %lld, want %lld", rows[i].name,
			     (long long)p.active, rows[i].active);
		cr_assert_eq(p.routed_experts, rows[i].routed, "%s", rows[i].name);
		cr_assert_eq(p.nonembedding - p.active_nonembedding, p.total - p.active);
	}
	/* dense models: everything is active, nothing is an expert */
	rm_model_config l = preset("llama-2-7b");
	rm_param_count p = rm_model_param_count(&l);
	cr_assert_eq(p.active, p.total);
	cr_assert_eq(p.active_nonembedding, p.nonembedding);
	cr_assert_eq(p.per_dense_layer, p.per_layer);
	cr_assert_eq(p.routed_experts, 0);
	cr_assert_eq(p.mtp, 0);
}

/*
 * DeepSeek-V3 layer by layer (DeepseekV3Attention, DeepseekV3MoE), h = 7168:
 *   MLA: q_a 7168x1536 + 1536 + q_b 1536x(128x192) + kv_a 7168x(512+64) + 512 + kv_b 512x(128x256)
 *        + o (128x128)x7168 = 187,107,328
 *   dense layer: 187,107,328 + 2 x 7168 + 3 x 7168 x 18432 = 583,483,392
 *   MoE layer: 187,107,328 + 2 x 7168 + 257 x 3 x 7168 x 2048 + router 256 x 7168 + bias 256
 *        = 11,507,286,272
 *   MTP module: 11,507,286,272 + 3 x 7168 + 2 x 7168^2 = 11,610,068,224, not in the total.
 */
Test(workload, deepseek_v3_layers_by_hand)
{
	rm_model_config m = preset("deepseek-v3");
	rm_param_count p = rm_model_param_count(&m);
	cr_assert_eq(p.per_dense_layer, 583483392LL);
	cr_assert_eq(p.per_layer, 11507286272LL);
	cr_assert_eq(p.layers, 3 * 583483392LL + 58 * 11507286272LL);
	cr_assert_eq(p.mtp, 11610068224LL);
	cr_assert_eq(p.total, 2 * 129280LL * 7168 + p.layers + 7168);
}

/* The op graphs run the dense layers of a mixture of experts first (DeepSeek's moe_layer_freq 1);
 * dense layers between MoE ones (moe_layer_freq 2, Qwen's decoder_sparse_step) are refused with a
 * sentence, not placed where they are not. */
Test(workload, interleaved_dense_layers_are_refused_not_guessed)
{
	rm_model_config m = preset("deepseek-v3");
	rm_train_config t = rm_train_config_default(&m);
	m.dense_first = false;
	m.dense_layers = 31; /* first_k_dense_replace 3, moe_layer_freq 2 */
	rm_error err;
	rm_error_clear(&err);
	cr_assert_null(rm_workload_create(&m, &t, &err));
	cr_assert_eq(err.status, RM_UNSUPPORTED);
	cr_assert(strstr(err.msg, "dense layers between the mixture-of-experts ones") &&
			  strstr(err.msg, "`remora describe` counts its parameters"),
		  "%s", err.msg);
}

/* docs/reference/activation-memory.md row 1: s*b*h*(34 + 5*a*s/h) with unfused attention and dropout. */
static void check_gpt2_unfused(int64_t s, int64_t b)
{
	rm_model_config m = preset("gpt-2");
	rm_train_config t = rm_train_config_default(&m);
	t.seq_len = s;
	t.micro_batch = b;
	t.fused_attention = false;
	t.dropout = 1;
	rm_workload *wl = build(&m, t);
	int64_t h = 768, a = 12;
	int64_t want = 34 * s * b * h + 5 * a * s * s * b; /* = s*b*h*(34 + 5*a*s/h) */
	cr_assert_eq(rm_graph_residual_bytes(&wl->layer), want, "s=%lld b=%lld: %lld, want %lld",
		     (long long)s, (long long)b, (long long)rm_graph_residual_bytes(&wl->layer),
		     (long long)want);
	rm_workload_destroy(wl);
}

Test(workload, gpt2_unfused_dropout_activation_bytes_korthikanti)
{
	check_gpt2_unfused(1024, 1);
	check_gpt2_unfused(512, 4);
	check_gpt2_unfused(128, 3);
}

Test(workload, gpt2_fused_attention_drops_the_s_squared_term)
{
	rm_model_config m = preset("gpt-2");
	rm_train_config t = rm_train_config_default(&m);
	t.seq_len = 1024;
	t.micro_batch = 2;
	t.dropout = 1;
	rm_workload *wl = build(&m, t);
	int64_t s = 1024, b = 2, h = 768, a = 12;
	/* 34sbh, with the flash kernel's fp32 log-sum-exp (4 bytes per row and head) instead of
	 * the 5as^2b scores, probabilities and dropout mask */
	cr_assert_eq(rm_graph_residual_bytes(&wl->layer), 34 * s * b * h + 4 * a * s * b);
	cr_assert_eq(rm_graph_find_value(&wl->layer, "attention_probs"), -1);
	rm_workload_destroy(wl);
}

Test(workload, gpt2_without_dropout_keeps_no_masks)
{
	rm_model_config m = preset("gpt-2");
	rm_train_config t = rm_train_config_default(&m);
	t.dropout = 0;
	t.fused_attention = false;
	rm_workload *wl = build(&m, t);
	int64_t s = 1024, b = 1, h = 768, a = 12;
	/* 34 - 2 (two 1-byte residual masks) per sbh; 5 - 3 (the dropout output and mask) per as^2b */
	cr_assert_eq(rm_graph_residual_bytes(&wl->layer), 32 * s * b * h + 2 * a * s * s * b);
	rm_workload_destroy(wl);
}

Test(workload, llama2_7b_layer_by_hand)
{
	rm_model_config m = preset("llama-2-7b");
	rm_train_config t = rm_train_config_default(&m);
	cr_assert_eq(t.seq_len, 4096);
	rm_workload *wl = build(&m, t);
	const rm_graph *g = &wl->layer;
	double T = 4096, h = 4096, ffn = 11008;
	/* forward GEMMs: 2*T*(4h^2 + 3h*ffn) */
	double fwd_gemm = 0, bwd_gemm = 0;
	for (int i = 0; i < g->n_ops; i++) {
		if (g->ops[i].kind != RM_OP_GEMM)
			continue;
		if (g->ops[i].phase == RM_PHASE_FWD)
			fwd_gemm += g->ops[i].flops;
		else
			bwd_gemm += g->ops[i].flops;
	}
	cr_assert_float_eq(fwd_gemm, 2 * T * (4 * h * h + 3 * h * ffn), 1.0);
	cr_assert_float_eq(bwd_gemm, 2 * fwd_gemm, 1.0, "dgrad + wgrad = 2x forward");
	/* fused causal attention: 4*b*a*d * s(s+1)/2; backward 2.5x (FlashAttention-2) */
	int att = rm_graph_find_op(g, "attention_context");
	cr_assert_geq(att, 0);
	double pairs = 4096.0 * 4097.0 / 2.0;
	cr_assert_float_eq(g->ops[att].flops, 4 * 1 * 32 * 128 * pairs, 1.0);
	int attb = rm_graph_find_op(g, "attention_context.bwd");
	cr_assert_float_eq(g->ops[attb].flops, 2.5 * g->ops[att].flops, 1.0);
	/* kept for backward, nothing recomputed: 8 tensors of 2sbh (input, norms, rotated q and k,
	 * v, context, residual), 4 of 2sb*ffn (gate, up, silu, product), the fp32 lse */
	int64_t want = 8 * 2 * 4096LL * 4096 + 4 * 2 * 4096LL * 11008 + 4 * 32 * 4096LL;
	cr_assert_eq(rm_graph_residual_bytes(g), want, "%lld vs %lld",
		     (long long)rm_graph_residual_bytes(g), (long long)want);
	/* the projection's weight gradient needs the norm output; dgrad needs no activation */
	int wq = rm_graph_find_op(g, "dot_attention_query.wgrad");
	int dq = rm_graph_find_op(g, "dot_attention_query.dgrad");
	cr_assert(wq > dq, "dgrad runs before wgrad");
	cr_assert_eq(g->ops[wq].n_residuals, 1);
	cr_assert_str_eq(g->values[g->ops[wq].residuals[0]].name, "pre_attention_norm");
	cr_assert_eq(g->ops[dq].n_residuals, 0);
	/* the pre-rotary q is not needed by the backward pass, the rotated one is */
	cr_assert_not(rm_graph_value_is_residual(g, rm_graph_find_value(g, "dot_attention_query")));
	cr_assert(rm_graph_value_is_residual(g, rm_graph_find_value(g, "rotary_query")));
	/* dot_mlp_out feeds only the residual add, whose backward needs nothing */
	cr_assert_not(rm_graph_value_is_residual(g, rm_graph_find_value(g, "dot_mlp_out")));
	rm_workload_destroy(wl);
}

Test(workload, layer_weights_add_up_to_layer_params)
{
	const char *names[] = {"llama-2-7b", "llama-3-70b", "qwen2-7b", "gpt-2"};
	for (size_t i = 0; i < 4; i++) {
		rm_model_config m = preset(names[i]);
		rm_workload *wl = build(&m, rm_train_config_default(&m));
		int64_t sum = 0;
		for (int k = 0; k < wl->layer.n_fwd_ops; k++)
			sum += wl->layer.ops[k].weight_elems;
		cr_assert_eq(sum, wl->params.per_layer, "%s", names[i]);
		cr_assert_eq(wl->layer.params, wl->params.per_layer);
		rm_workload_destroy(wl);
	}
}

Test(workload, grouped_query_attention_shapes)
{
	rm_model_config m = preset("llama-3-8b");
	rm_train_config t = rm_train_config_default(&m);
	t.micro_batch = 2;
	rm_workload *wl = build(&m, t);
	const rm_op *k = &wl->layer.ops[rm_graph_find_op(&wl->layer, "dot_attention_key")];
	cr_assert_eq(k->gemm.m, 2 * 4096);
	cr_assert_eq(k->gemm.n, 8 * 128, "8 kv heads of 128");
	cr_assert_eq(k->gemm.k, 4096);
	cr_assert_not(k->gemm.has_batch_dims);
	const rm_op *att = &wl->layer.ops[rm_graph_find_op(&wl->layer, "attention_context")];
	cr_assert_eq(att->attention.kv_heads, 8);
	rm_workload_destroy(wl);
}

Test(workload, unfused_attention_dots_have_batch_dims)
{
	rm_model_config m = preset("llama-2-7b");
	rm_train_config t = rm_train_config_default(&m);
	t.seq_len = 2048;
	t.fused_attention = false;
	rm_workload *wl = build(&m, t);
	const rm_op *qk = &wl->layer.ops[rm_graph_find_op(&wl->layer, "attention_scores")];
	cr_assert(qk->gemm.has_batch_dims);
	cr_assert_eq(qk->gemm.batch, 32);
	cr_assert_eq(qk->gemm.m, 2048);
	cr_assert_eq(qk->gemm.n, 2048);
	cr_assert_eq(qk->gemm.k, 128);
	cr_assert_float_eq(qk->flops, 2.0 * 32 * 2048 * 2048 * 128, 1.0);
	rm_workload_destroy(wl);
}

Test(workload, sliding_window_attention_pairs)
{
	rm_model_config m = preset("mistral-7b");
	m.sliding_window = 1024;
	rm_train_config t = rm_train_config_default(&m);
	rm_workload *wl = build(&m, t);
	const rm_op *att = &wl->layer.ops[rm_graph_find_op(&wl->layer, "attention_context")];
	/* 4096 queries; query i attends min(i+1, 1024) keys: 1024*1025/2 + 3072*1024 */
	double pairs = 1024.0 * 1025.0 / 2.0 + 3072.0 * 1024.0;
	cr_assert_float_eq(att->flops, 4.0 * 32 * 128 * pairs, 1.0);
	rm_workload_destroy(wl);
}

Test(workload, model_flops_per_token_palm_convention)
{
	rm_model_config m = preset("llama-2-7b");
	rm_workload *wl = build(&m, rm_train_config_default(&m));
	/* N_nonembedding = 32 layers * 202,383,360 + final norm 4096 + head 32000*4096 */
	cr_assert_eq(wl->params.nonembedding, 6607343616LL);
	double want = 6.0 * 6607343616.0 + 12.0 * 32 * 4096 * 4096;
	cr_assert_float_eq(rm_workload_model_flops_per_token(wl), want, 1.0);
	rm_workload_destroy(wl);
}

Test(workload, static_memory_zero3_sixteen_bytes_per_param)
{
	rm_model_config m = preset("llama-2-7b");
	rm_train_config t = rm_train_config_default(&m);
	t.fsdp = 8;
	rm_workload *wl = build(&m, t);
	rm_static_memory s = rm_workload_static_memory(wl);
	cr_assert_eq(s.shard_elems, 842301952LL, "6,738,415,616 / 8");
	cr_assert_eq(s.params, 2 * 842301952LL);
	cr_assert_eq(s.master, 4 * 842301952LL);
	cr_assert_eq(s.grads, 2 * 842301952LL);
	cr_assert_eq(s.optimizer, 8 * 842301952LL);
	cr_assert_eq(s.total, 16 * 842301952LL);
	rm_workload_destroy(wl);

	t.fsdp = 3; /* uneven shards round up */
	t.grad_dtype = RM_DTYPE_FP32;
	t.optimizer = RM_OPT_SGD;
	t.master_weights = false;
	wl = build(&m, t);
	s = rm_workload_static_memory(wl);
	cr_assert_eq(s.shard_elems, 2246138539LL, "ceil(6,738,415,616 / 3)");
	cr_assert_eq(s.total, (2 + 4) * 2246138539LL);
	rm_workload_destroy(wl);

	/* a model cast to bf16: AdamW's moments in bf16, 2 + 2 + 2 x 2 = 8 bytes a parameter */
	t = rm_train_config_default(&m);
	t.fsdp = 8;
	t.master_weights = false;
	t.optimizer_dtype = RM_DTYPE_BF16;
	wl = build(&m, t);
	s = rm_workload_static_memory(wl);
	cr_assert_eq(s.optimizer, 4 * 842301952LL);
	cr_assert_eq(s.total, 8 * 842301952LL);
	rm_workload_destroy(wl);
}

Test(workload, invalid_setups_are_refused)
{
	rm_model_config m = preset("gpt-2");
	rm_train_config t = rm_train_config_default(&m);
	rm_error err;
	t.seq_len = 2048;
	rm_error_clear(&err);
	cr_assert_null(rm_workload_create(&m, &t, &err));
	cr_assert(strstr(err.msg, "1024 learned positions"), "%s", err.msg);
	t = rm_train_config_default(&m);
	t.micro_batch = 0;
	cr_assert_null(rm_workload_create(&m, &t, &err));
	cr_assert_eq(err.status, RM_INVALID);
	t = rm_train_config_default(&m);
	t.dtype = RM_DTYPE_FP8_E4M3;
	cr_assert_null(rm_workload_create(&m, &t, &err));
	cr_assert_eq(err.status, RM_UNSUPPORTED);
	t = rm_train_config_default(&m);
	t.seq_len = 1024;
	t.micro_batch = INT64_C(1) << 40;
	cr_assert_null(rm_workload_create(&m, &t, &err));
	cr_assert_eq(err.status, RM_RANGE);
}

Test(workload, every_backward_op_differentiates_a_forward_op)
{
	rm_model_config m = preset("gpt-2");
	rm_train_config t = rm_train_config_default(&m);
	t.fused_attention = false;
	rm_workload *wl = build(&m, t);
	const rm_graph *gs[3] = {&wl->embedding, &wl->layer, &wl->head};
	for (int gi = 0; gi < 3; gi++) {
		const rm_graph *g = gs[gi];
		for (int i = 0; i < g->n_ops; i++) {
			const rm_op *op = &g->ops[i];
			if (i < g->n_fwd_ops) {
				cr_assert_eq(op->phase, RM_PHASE_FWD);
				cr_assert_eq(op->fwd_op, -1);
			} else {
				cr_assert_neq(op->phase, RM_PHASE_FWD, "%s", op->name);
				cr_assert(op->fwd_op >= 0 && op->fwd_op < g->n_fwd_ops, "%s", op->name);
				cr_assert(strncmp(op->name, g->ops[op->fwd_op].name,
						  strlen(g->ops[op->fwd_op].name)) == 0);
			}
			for (int r = 0; r < op->n_residuals; r++)
				cr_assert(g->values[op->residuals[r]].producer < g->n_fwd_ops);
		}
	}
	rm_workload_destroy(wl);
}

Test(workload, checkpoint_names_and_maxtext_aliases)
{
	cr_assert_str_eq(rm_checkpoint_canonical("dot_mlp_out"), "dot_mlp_out");
	cr_assert_str_eq(rm_checkpoint_canonical("query_proj"), "dot_attention_query");
	cr_assert_str_eq(rm_checkpoint_canonical("key_proj"), "dot_attention_key");
	cr_assert_str_eq(rm_checkpoint_canonical("value_proj"), "dot_attention_value");
	cr_assert_str_eq(rm_checkpoint_canonical("out_proj"), "dot_attention_out");
	cr_assert_str_eq(rm_checkpoint_canonical("context"), "attention_context");
	cr_assert_str_eq(rm_checkpoint_canonical("mlpwi_0"), "dot_mlp_gate");
	cr_assert_str_eq(rm_checkpoint_canonical("mlpwi_1"), "dot_mlp_up");
	cr_assert_str_eq(rm_checkpoint_canonical("mlpwo"), "dot_mlp_out");
	cr_assert_null(rm_checkpoint_canonical("dot_mlp_outt"));
	const char *out[4];
	cr_assert_eq(rm_checkpoint_expand("qkv_proj", out, 4), 3);
	cr_assert_str_eq(out[2], "dot_attention_value");
	/* every forward value of a llama layer is a known checkpoint name */
	rm_model_config m = preset("llama-2-7b");
	rm_workload *wl = build(&m, rm_train_config_default(&m));
	for (int v = 0; v < wl->layer.n_values; v++)
		cr_assert_not_null(rm_checkpoint_canonical(wl->layer.values[v].name), "%s",
				   wl->layer.values[v].name);
	rm_workload_destroy(wl);
}

Test(workload, dtype_and_optimizer_names)
{
	rm_dtype d;
	cr_assert(rm_dtype_parse("bfloat16", &d) && d == RM_DTYPE_BF16);
	cr_assert(rm_dtype_parse("FP32", &d) && d == RM_DTYPE_FP32);
	cr_assert_not(rm_dtype_parse("bf17", &d));
	cr_assert_eq(rm_dtype_size(RM_DTYPE_FP8_E4M3), 1);
	rm_optimizer o;
	cr_assert(rm_optimizer_parse("adam", &o) && o == RM_OPT_ADAMW);
	cr_assert_not(rm_optimizer_parse("lion", &o));
}

Test(workload, mfu_flops_count_attention_as_executed)
{
	/* causal attention attends s(s+1)/2 of s^2 pairs: the MFU numerator counts those, so MFU
	 * cannot pass 100% at long sequences where attention dominates */
	rm_model_config m = preset("llama-2-7b");
	rm_train_config t = rm_train_config_default(&m);
	t.seq_len = 1 << 19;
	rm_workload *wl = build(&m, t);
	double s = (double)(1 << 19);
	double attn_palm = 12.0 * 32 * 4096 * s;
	double want = 6.0 * 6607343616.0 + attn_palm * (s + 1.0) / (2.0 * s);
	cr_assert_float_eq(rm_workload_mfu_flops_per_token(wl), want, 1.0);
	cr_assert_lt(rm_workload_mfu_flops_per_token(wl), rm_workload_model_flops_per_token(wl));
	/* and never more than the kernels execute per token */
	cr_assert_leq(rm_workload_mfu_flops_per_token(wl), rm_workload_executed_flops(wl) / s);
	rm_workload_destroy(wl);
}

/* The dimension caps of config.json (2^24 per dimension, 4096 layers) allow a model whose byte
 * counts pass int64: hidden = ffn = vocab = 2^24 at 4096 layers has 7 * 2^60 + 2^49 parameters
 * (8.07e18, just inside int64), and their bf16 weights alone take 1.6e19 B > 2^63. It is refused
 * (RM_RANGE), not reported with a wrapped-around negative size. */
Test(workload, models_past_64_bit_byte_counts_are_refused)
{
	rm_model_config m = preset("llama-2-7b");
	m.hidden = m.ffn = m.vocab = INT64_C(1) << 24;
	m.layers = 4096;
	m.heads = m.kv_heads = INT64_C(1) << 17;
	m.head_dim = 128;
	rm_param_count p = rm_model_param_count(&m);
	/* per layer 4 * 2^48 attention + 3 * 2^48 SwiGLU + 2 * 2^24 norms; embedding and head 2^48
	 * each; the final norm 2^24 */
	cr_assert_eq(p.total, 7 * (INT64_C(1) << 60) + (INT64_C(1) << 37) + (INT64_C(1) << 49) + (INT64_C(1) << 24));
	rm_train_config t = rm_train_config_default(&m);
	rm_error err;
	rm_error_clear(&err);
	cr_assert_null(rm_workload_create(&m, &t, &err));
	cr_assert_eq(err.status, RM_RANGE);
	cr_assert(strstr(err.msg, "too large to represent") && strstr(err.msg, "8.07e+18 parameters"), "%s",
		  err.msg);
	/* an explicit head_dim multiplies past hidden: 2^24 heads x 2^24 head_dim */
	m = preset("llama-2-7b");
	m.heads = m.kv_heads = INT64_C(1) << 24;
	m.head_dim = INT64_C(1) << 24;
	t = rm_train_config_default(&m);
	cr_assert_null(rm_workload_create(&m, &t, &err));
	cr_assert_eq(err.status, RM_RANGE);
}

/* The activations of all layers fit as well. 2^20 hidden, ffn and vocab, 8 heads of 2^17, 4096
 * layers: 4096 tokens keep about 2^36.5 B per layer; 2^26 tokens (seq_len 2^20 x micro_batch
 * 64) keep 2^14 times as much, about 2^62.5 B over 4096 layers, past the 2^62 B bound. */
Test(workload, activations_past_64_bit_byte_counts_are_refused)
{
	rm_model_config m = preset("llama-2-7b");
	m.hidden = m.ffn = m.vocab = INT64_C(1) << 20;
	m.layers = 4096;
	m.heads = m.kv_heads = 8;
	m.head_dim = INT64_C(1) << 17;
	m.max_pos = INT64_C(1) << 20;
	rm_train_config t = rm_train_config_default(&m);
	rm_workload *wl = build(&m, t);
	double per_layer = (double)rm_graph_residual_bytes(&wl->layer);
	cr_assert_gt(per_layer, 0x1p36);
	cr_assert_lt(per_layer, 0x1p37);
	rm_workload_destroy(wl);
	t.seq_len = INT64_C(1) << 20;
	t.micro_batch = 64;
	rm_error err;
	rm_error_clear(&err);
	cr_assert_null(rm_workload_create(&m, &t, &err));
	cr_assert_eq(err.status, RM_RANGE);
	cr_assert(strstr(err.msg, "activations of 4096 layers"), "%s", err.msg);
}

/* FP8 training (training.gemm_dtype fp8): Llama-2-7B, b1 s4096. The projections run in E4M3
 * (gradients E5M2), each distinct GEMM input gets one cast: T x h bf16 read (33.5 MB), 2 x T x h
 * fp8 written (plain + transposed); the layer's 202 M weights are cast once per micro-batch
 * unless they are gathered in fp8. Every output gradient of a projection is cast before its
 * dgrad. Attention and the LM head keep bf16. */
Test(workload, fp8_projections_and_their_casts)
{
	rm_model_config m = preset("llama-2-7b");
	rm_train_config t = rm_train_config_default(&m);
	t.gemm_dtype = RM_DTYPE_FP8_E4M3;
	rm_workload *wl = build(&m, t);
	const rm_graph *g = &wl->layer;
	int64_t T = 4096, h = 4096;
	int q = rm_graph_find_op(g, "dot_attention_query");
	cr_assert_eq(g->ops[q].gemm.dtype, RM_DTYPE_FP8_E4M3);
	cr_assert_eq(g->ops[rm_graph_find_op(g, "dot_attention_query.dgrad")].gemm.dtype, RM_DTYPE_FP8_E5M2);
	cr_assert_eq(g->ops[rm_graph_find_op(g, "dot_mlp_out.wgrad")].gemm.dtype, RM_DTYPE_FP8_E5M2);
	int c = rm_graph_find_op(g, "attention_input_fp8");
	cr_assert_geq(c, 0);
	cr_assert_eq(g->ops[c].bytes_read, T * h * 2);
	cr_assert_eq(g->ops[c].bytes_written, 2 * T * h);
	cr_assert(g->ops[c].no_grad);
	cr_assert_eq(rm_graph_find_op(g, "attention_input_fp8.bwd"), -1, "a cast has no backward of its own");
	int hid = rm_graph_find_op(g, "mlp_hidden_fp8");
	cr_assert_eq(g->ops[hid].bytes_read, T * 11008 * 2);
	/* q, k, v, out: 4 h^2; gate, up, down: 3 h ffn = 202,375,168 weights */
	int w = rm_graph_find_op(g, "weights_fp8");
	cr_assert_eq(g->ops[w].bytes_read, (4 * h * h + 3 * h * 11008) * 2);
	cr_assert_eq(g->ops[w].bytes_written, (4 * h * h + 3 * h * 11008) * 2);
	int gq = rm_graph_find_op(g, "dot_mlp_out.grad_fp8");
	cr_assert_eq(g->ops[gq].bytes_read, T * h * 2);
	cr_assert_eq(g->ops[rm_graph_find_op(g, "attention_context")].attention.dtype, RM_DTYPE_BF16);
	cr_assert_eq(wl->head.ops[rm_graph_find_op(&wl->head, "dot_logits")].gemm.dtype, RM_DTYPE_BF16);
	rm_workload_destroy(wl);
	t.fp8_all_gather = true;
	wl = build(&m, t);
	cr_assert_eq(rm_graph_find_op(&wl->layer, "weights_fp8"), -1, "weights gathered in fp8 need no cast");
	rm_workload_destroy(wl);
	/* fp8_all_gather without fp8 GEMMs is refused */
	t.gemm_dtype = RM_DTYPE_BF16;
	rm_error err;
	rm_error_clear(&err);
	cr_assert_null(rm_workload_create(&m, &t, &err));
	cr_assert_eq(err.status, RM_INVALID);
}

/* Eager PyTorch decompositions (what fsdp2 without compile runs), Llama-2-7B b1 s4096, bf16: the
 * RMSNorm forward is x.float(), pow, mean, rsqrt, x * rstd, type_as, * weight: 4 x 2 + 28 = 36 B per
 * element in 8 kernels; its autograd backward 6 x 2 + 52 = 64 B in 10; the complex-number rotary
 * 2 x 2 + 16 = 20 B in 3, forward and backward. Fused, the norm is one kernel of 4 B per element. */
Test(workload, eager_decompositions_by_hand)
{
	rm_model_config m = preset("llama-2-7b");
	rm_workload *wl = build(&m, rm_train_config_default(&m));
	const rm_graph *g = &wl->layer;
	int64_t n = 4096LL * 4096;
	const rm_op *norm = &g->ops[rm_graph_find_op(g, "pre_attention_norm")];
	cr_assert_eq(norm->bytes_read + norm->bytes_written, n * 4 + 4096 * 2); /* + the weight */
	cr_assert_eq(norm->eager_bytes, n * 36);
	cr_assert_eq(norm->eager_kernels, 8);
	const rm_op *nb = &g->ops[rm_graph_find_op(g, "pre_attention_norm.bwd")];
	cr_assert_eq(nb->eager_bytes, n * 64);
	cr_assert_eq(nb->eager_kernels, 10);
	const rm_op *rq = &g->ops[rm_graph_find_op(g, "rotary_query")];
	cr_assert_eq(rq->eager_bytes, n * 20);
	cr_assert_eq(rq->eager_kernels, 3);
	cr_assert_eq(g->ops[rm_graph_find_op(g, "rotary_key.bwd")].eager_bytes, n * 20);
	/* SiLU and the residual add are one eager kernel already: no decomposition */
	cr_assert_eq(g->ops[rm_graph_find_op(g, "mlp_activation")].eager_bytes, 0);
	rm_workload_destroy(wl);
	/* GPT-2's LayerNorm is one native kernel in eager too */
	m = preset("gpt-2");
	wl = build(&m, rm_train_config_default(&m));
	cr_assert_eq(wl->layer.ops[rm_graph_find_op(&wl->layer, "pre_attention_norm")].eager_bytes, 0);
	rm_workload_destroy(wl);
}

/* The loss backward's live gradient (Llama-2-7B, b1 s4096, vocabulary 32000: T x V x 4 B =
 * 524,288,000 B of fp32): PyTorch's cross-entropy backward holds nll_loss_backward's zero-filled
 * gradient and _log_softmax_backward_data's output at once, 2 x 524,288,000 B; a chunked loss one
 * eighth of that; a fused kernel writes its gradient in place, one eighth of its output. */
Test(workload, loss_backward_buffers_by_loss_kind)
{
	rm_model_config m = preset("llama-2-7b");
	rm_train_config t = rm_train_config_default(&m);
	static const struct {
		rm_loss_kind kind;
		int64_t live;
	} want[] = {{RM_LOSS_PLAIN, 2 * 524288000LL}, {RM_LOSS_CHUNKED, 2 * 524288000LL / 8}, {RM_LOSS_FUSED, 0}};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		t.loss = want[i].kind;
		rm_workload *wl = build(&m, t);
		const rm_op *lb = &wl->head.ops[rm_graph_find_op(&wl->head, "loss.bwd")];
		if (want[i].kind == RM_LOSS_FUSED) {
			/* the fused kernel's log-probabilities are bf16 and one chunk at a time */
			cr_assert_eq(lb->bytes_written, 4096LL * 32000 * 2);
			cr_assert_eq(lb->grad_bytes, 4096LL * 32000 * 2 / 8);
			cr_assert_eq(rm_graph_find_op(&wl->head, "logits_float"), -1);
		} else {
			cr_assert_eq(lb->bytes_written, 524288000LL);
			cr_assert_eq(lb->grad_bytes, want[i].live, "%s: %lld", rm_loss_kind_name(want[i].kind),
				     (long long)lb->grad_bytes);
		}
		rm_workload_destroy(wl);
	}
}

/* ---- DeepSeek-V3: multi-head latent attention and dense first layers ---- */

static rm_model_config deepseek_small(void)
{
	const char *dir = getenv("REMORA_TEST_DATA");
	cr_assert_not_null(dir, "REMORA_TEST_DATA must point at tests/data");
	char path[1024];
	snprintf(path, sizeof(path), "%s/configs/deepseek-v3-small.json", dir);
	rm_model_config m;
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_model_config_load(path, &m, &err), RM_OK, "%s", err.msg);
	return m;
}

/* tests/data/configs/deepseek-v3-small.json: h 256, 4 heads, q_lora 64, kv_lora 32, qk 16 + 8 =
 * 24, v 16, 4 experts of 64 (top 2), 1 shared, dense first layer of 512, vocab 1000. At s 128:
 * - projections: q_a 256x64 = 16384, q_b 64x(4x24) = 6144, kv_a 256x(32+8) = 10240, kv_b
 *   32x(4x(16+16)) = 4096, o (4x16)x256 = 16384: 53,248 weights, 2 x 128 x 53,248 = 13,631,488 FLOPs
 * - attention, causal: 128 x 129 / 2 = 8256 pairs per head; forward QK^T over 24 and PV over 16,
 *   2 x 4 x (24 + 16) x 8256 = 2,641,920; backward 2 x 4 x (3 x 24 + 2 x 16) x 8256 = 6,868,992 */
Test(workload, latent_attention_flops_by_hand)
{
	rm_model_config m = deepseek_small();
	cr_assert(m.mla && m.dense_first);
	cr_assert_eq(m.dense_layers, 1);
	rm_train_config t = rm_train_config_default(&m);
	t.seq_len = 128;
	rm_workload *wl = build(&m, t);
	const rm_graph *graphs[2] = {&wl->layer, &wl->dense_layer};
	for (int k = 0; k < 2; k++) {
		const rm_graph *g = graphs[k];
		double proj = 0;
		int64_t proj_w = 0;
		for (int i = 0; i < g->n_fwd_ops; i++)
			if (g->ops[i].kind == RM_OP_GEMM && strncmp(g->ops[i].name, "dot_attention", 13) == 0) {
				proj += g->ops[i].flops;
				proj_w += g->ops[i].weight_elems;
			}
		cr_assert_eq(proj_w, 53248);
		cr_assert_eq(proj, 13631488.0, "%.0f", proj);
		int a = rm_graph_find_op(g, "attention_context");
		cr_assert_eq(g->ops[a].attention.head_dim, 24);
		cr_assert_eq(g->ops[a].attention.v_head_dim, 16);
		cr_assert_eq(g->ops[a].flops, 2641920.0, "%.0f", g->ops[a].flops);
		int ab = rm_graph_find_op(g, "attention_context.bwd");
		cr_assert_eq(g->ops[ab].flops, 6868992.0, "%.0f", g->ops[ab].flops);
		/* the cost model prices the shape with its s^2 / 2 causal convention: 2 x 4 x 40 x
		 * 8192 = 2,621,440 forward, 2 x 4 x 104 x 8192 = 6,815,744 backward */
		rm_attention_cost c = {.shape = g->ops[a].attention};
		cr_assert_eq(rm_cost_attention_flops(&c), 2621440.0);
		c.backward = true;
		cr_assert_eq(rm_cost_attention_flops(&c), 6815744.0);
		/* q_b reads the normed query latent, kv_b's halves the normed kv latent; the value and
		 * the attention's output are 4 x 16 wide, the query and key 4 x 24 */
		int qb = rm_graph_find_op(g, "dot_attention_query");
		cr_assert_eq(g->ops[qb].gemm.k, 64);
		cr_assert_eq(g->ops[qb].gemm.n, 96);
		cr_assert_eq(g->values[rm_graph_find_value(g, "dot_attention_value")].shape[2], 64);
		cr_assert_eq(g->values[rm_graph_find_value(g, "rotary_key")].shape[2], 96);
		cr_assert_eq(g->values[rm_graph_find_value(g, "attention_context")].shape[2], 64);
		int o = rm_graph_find_op(g, "dot_attention_out");
		cr_assert_eq(g->ops[o].gemm.k, 64);
		/* the latent norms keep their inputs for the backward: q_a's 128 x 64 and kv_a's
		 * whole 128 x 40 output (the norm reads a view of it) */
		cr_assert(rm_graph_value_is_residual(g, rm_graph_find_value(g, "dot_attention_query_a")));
		cr_assert(rm_graph_value_is_residual(g, rm_graph_find_value(g, "dot_attention_kv_a")));
		cr_assert(rm_graph_value_is_residual(g, rm_graph_find_value(g, "attention_kv_a_norm")));
	}
	/* what the dense layer keeps, nothing recomputed (bf16, 128 tokens): the layer input, the
	 * normed input, the attention residual and the normed residual 4 x 128 x 256 x 2 = 262,144;
	 * q_a and its norm 2 x 128 x 64 x 2 = 32,768; kv_a 128 x 40 x 2 = 10,240 and its norm 128 x
	 * 32 x 2 = 8192; query and key 2 x 128 x 96 x 2 = 49,152; value and the attention's output
	 * 2 x 128 x 64 x 2 = 32,768; the fp32 log-sum-exp 4 x 128 x 4 = 2048; gate, up, activation
	 * and hidden 4 x 128 x 512 x 2 = 524,288: 921,600 B */
	cr_assert_eq(rm_graph_residual_bytes(&wl->dense_layer), 921600, "%lld",
		     (long long)rm_graph_residual_bytes(&wl->dense_layer));
	/* the latent attention's names are checkpoint names remat policies take */
	static const char *const names[] = {"dot_attention_query_a", "attention_query_a_norm", "dot_attention_kv_a",
					    "attention_kv_a_norm"};
	for (int i = 0; i < 4; i++)
		cr_assert_str_eq(rm_checkpoint_canonical(names[i]), names[i]);
	rm_error err;
	rm_remat_policy *pol = rm_remat_policy_parse("save_only_these_names('dot_attention_kv_a', 'attention_kv_a_norm')", &err);
	cr_assert_not_null(pol, "%s", err.msg);
	rm_remat_plan plan;
	cr_assert_eq(rm_remat_plan_build(&wl->layer, pol, &plan, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(plan.fate[rm_graph_find_value(&wl->layer, "dot_attention_kv_a")], RM_FATE_SAVED);
	cr_assert_eq(plan.fate[rm_graph_find_value(&wl->layer, "attention_kv_a_norm")], RM_FATE_SAVED);
	cr_assert_eq(plan.fate[rm_graph_find_value(&wl->layer, "dot_attention_query_a")], RM_FATE_RECOMPUTED);
	rm_remat_plan_finish(&plan);
	rm_remat_policy_destroy(pol);
	rm_workload_destroy(wl);
}

/* The two layer kinds hold exactly their parameters: dense 2 x 256 norms + 96 latent norms +
 * 53,248 + 3 x 256 x 512 = 447,072; MoE the same attention and norms + router 256 x 4 + its
 * selection bias 4 + 4 experts x 3 x 256 x 64 + shared 3 x 256 x 64 = 300,644. Total 256,000
 * embedding + 447,072 + 2 x 300,644 + 256 + 256,000 head = 1,560,616, which the graphs sum to
 * under ep (the path that adds graphs up). MFU counts 6 N_active + 6 L a (d_qk + d_v) s causal:
 * N_active = 1,304,616 non-embedding - 2 layers x 2 unchosen x 49,152 = 1,108,008; attention 6 x 3
 * x 4 x 40 x 128 x (129 / 256) = 185,760; 6,833,808 per token. */
Test(workload, deepseek_layer_kinds_by_hand)
{
	rm_model_config m = deepseek_small();
	rm_train_config t = rm_train_config_default(&m);
	t.seq_len = 128;
	rm_workload *wl = build(&m, t);
	cr_assert_eq(rm_workload_dense_layers(wl), 1);
	cr_assert_eq(wl->dense_layer.params, 447072);
	cr_assert_eq(wl->layer.params, 300644);
	cr_assert_eq(rm_workload_layer_graph(wl, 0), &wl->dense_layer);
	cr_assert_eq(rm_workload_layer_graph(wl, 1), &wl->layer);
	cr_assert_eq(rm_workload_layer_graph(wl, 2), &wl->layer);
	cr_assert_eq(wl->params.total, 1560616);
	cr_assert_eq(rm_graph_find_op(&wl->dense_layer, "moe_router"), -1);
	cr_assert_geq(rm_graph_find_op(&wl->dense_layer, "dot_mlp_gate"), 0);
	cr_assert_eq(wl->dense_layer.ops[rm_graph_find_op(&wl->dense_layer, "dot_mlp_gate")].gemm.n, 512);
	cr_assert_eq(rm_workload_mfu_flops_per_token(wl), 6833808.0, "%.1f", rm_workload_mfu_flops_per_token(wl));
	double exec = rm_graph_flops(&wl->embedding, RM_PHASE_COUNT) + rm_graph_flops(&wl->dense_layer, RM_PHASE_COUNT) +
		      2.0 * rm_graph_flops(&wl->layer, RM_PHASE_COUNT) + rm_graph_flops(&wl->head, RM_PHASE_COUNT);
	cr_assert_eq(rm_workload_executed_flops(wl), exec);
	rm_workload_destroy(wl);
	/* ep 2: the graphs are summed; each GPU holds 2 of the 4 experts of both MoE layers whole:
	 * 2 x 2 x 3 x 256 x 64 = 196,608 expert parameters, the dense layer none */
	t.ep = 2;
	t.fsdp = 2;
	wl = build(&m, t);
	cr_assert_eq(rm_workload_rank_expert_params(wl), 196608);
	cr_assert_eq(rm_workload_rank_params(wl), 1560616 - 196608);
	/* static memory: (1,364,008 - 196,608) / 2 = 583,700 sharded + 196,608 whole */
	rm_static_memory sm = rm_workload_static_memory(wl);
	cr_assert_eq(sm.shard_elems, 583700 + 196608);
	rm_workload_destroy(wl);
}

/* The preset: 671,026,419,200 parameters, and its graphs hold them: 3 dense layers of 583,483,392
 * and 58 MoE layers of 11,507,286,272 (docs/models.md). */
Test(workload, deepseek_v3_graphs_hold_the_parameters)
{
	rm_model_config m = preset("deepseek-v3");
	rm_train_config t = rm_train_config_default(&m);
	t.seq_len = 1024;
	rm_workload *wl = build(&m, t);
	cr_assert_eq(wl->dense_layer.params, 583483392LL);
	cr_assert_eq(wl->layer.params, 11507286272LL);
	cr_assert_eq(wl->embedding.params + 3 * wl->dense_layer.params + 58 * wl->layer.params + wl->head.params,
		     671026419200LL);
	rm_workload_destroy(wl);
}

/* The largest layer graph: latent attention, a MoE block with the all-to-alls of ep, the key and
 * value gathers of cp and fp8 GEMMs (a quantization per projection gradient) - 98 ops, more than
 * the 96 a graph held before. */
Test(workload, deepseek_fp8_context_and_expert_parallel_graph_fits)
{
	rm_model_config m = deepseek_small();
	rm_train_config t = rm_train_config_default(&m);
	t.seq_len = 128;
	t.gemm_dtype = RM_DTYPE_FP8_E4M3;
	t.cp = 2;
	t.ep = 2;
	t.fsdp = 2;
	rm_workload *wl = build(&m, t);
	cr_assert_eq(wl->layer.n_ops, 98, "%d ops", wl->layer.n_ops);
	cr_assert_geq(rm_graph_find_op(&wl->layer, "attention_key_gathered"), 0);
	cr_assert_geq(rm_graph_find_op(&wl->layer, "moe_combined_a2a"), 0);
	rm_workload_destroy(wl);
}

/* FP8 GEMMs quantize the layer's gathered 16-bit weights once per micro-batch: in a MoE layer the
 * router 256 x 4, the GPU's 2 of 4 experts 2 x 49,152 and the shared expert 49,152 beside the
 * 53,248 latent-attention weights = 201,728 (not one dense MLP's 3 x 256 x 512); in the dense
 * layer 53,248 + 393,216 = 446,464. */
Test(workload, fp8_weight_cast_covers_each_kind_of_layer)
{
	rm_model_config m = deepseek_small();
	rm_train_config t = rm_train_config_default(&m);
	t.seq_len = 128;
	t.gemm_dtype = RM_DTYPE_FP8_E4M3;
	t.ep = 2;
	t.fsdp = 2;
	rm_workload *wl = build(&m, t);
	int v = rm_graph_find_value(&wl->layer, "weights_fp8");
	cr_assert_eq(wl->layer.values[v].shape[0], 201728, "%lld", (long long)wl->layer.values[v].shape[0]);
	v = rm_graph_find_value(&wl->dense_layer, "weights_fp8");
	cr_assert_eq(wl->dense_layer.values[v].shape[0], 446464, "%lld", (long long)wl->dense_layer.values[v].shape[0]);
	rm_workload_destroy(wl);
}

/*
 * MaxText's use_iota_embed (training.embedding: one_hot): the lookup is a [T, V] one-hot in bf16
 * and a [T, V] x [V, h] GEMM; the backward is the table's gradient one_hot^T dY alone (no dX
 * into an integer-derived input). llama-2-7b, micro-batch 2 x 4096 tokens: T = 8192, V = 32000,
 * h = 4096; 2 T V h = 2.147 TFLOP each way, the one-hot 8192 x 32000 x 2 B = 500 MiB.
 */
Test(workload, one_hot_embedding_is_a_gemm_with_only_a_weight_gradient)
{
	rm_model_config m = preset("llama-2-7b");
	rm_train_config t = rm_train_config_default(&m);
	t.seq_len = 4096;
	t.micro_batch = 2;
	t.embed_one_hot = true;
	rm_workload *wl = build(&m, t);
	const rm_graph *g = &wl->embedding;
	int oh = rm_graph_find_op(g, "embedding_one_hot"), e = rm_graph_find_op(g, "embedding");
	int wg = rm_graph_find_op(g, "embedding.wgrad"), dg = rm_graph_find_op(g, "embedding.dgrad");
	cr_assert(oh >= 0 && e >= 0 && wg >= 0);
	cr_assert_eq(dg, -1, "no gradient into the one-hot");
	cr_assert(g->ops[oh].no_grad);
	cr_assert_eq(g->ops[oh].bytes_written, 8192LL * 32000 * 2);
	cr_assert_eq(g->ops[e].kind, RM_OP_GEMM);
	cr_assert_eq(g->ops[e].gemm.m, 8192);
	cr_assert_eq(g->ops[e].gemm.k, 32000);
	cr_assert_eq(g->ops[e].gemm.n, 4096);
	cr_assert_float_eq(g->ops[e].flops, 2.0 * 8192 * 32000 * 4096, 1.0);
	cr_assert_float_eq(g->ops[wg].flops, 2.0 * 8192 * 32000 * 4096, 1.0);
	cr_assert_eq(g->ops[wg].phase, RM_PHASE_BWD_WGRAD);
	cr_assert_eq(g->params, 32000LL * 4096);
	cr_assert_eq(g->n_ops - g->n_fwd_ops, 1, "the weight gradient alone");
	rm_workload_destroy(wl);
	/* refused where it is not modelled */
	t.tp = 2;
	rm_error err;
	rm_error_clear(&err);
	cr_assert_null(rm_workload_create(&m, &t, &err));
	cr_assert(strstr(err.msg, "one-hot embedding"), "%s", err.msg);
}

/*
 * A ResidualMLP block (the jax#20763 toy's x + W2 relu(W1 x)), h = 8192, ffn 8192, 4 x 4096
 * tokens: two forward GEMMs of 2 T h ffn FLOPs, relu at one FLOP an element, backward GEMMs twice
 * the forward; the backward keeps the block's input (W1's weight gradient), relu's output (W2's
 * weight gradient) and up (relu's backward): 3 x 2 T h bytes in bf16; no attention, no norm.
 * Tensor parallelism is refused.
 */
Test(workload, residual_mlp_block_by_hand)
{
	rm_model_config m = {.arch = RM_ARCH_RESIDUAL_MLP, .vocab = 32000, .hidden = 8192, .layers = 32,
			     .ffn = 8192, .max_pos = 4096, .mlp = RM_MLP_RELU};
	snprintf(m.name, sizeof(m.name), "toy");
	rm_train_config t = rm_train_config_default(&m);
	t.seq_len = 4096;
	t.micro_batch = 4;
	rm_workload *wl = build(&m, t);
	const rm_graph *g = &wl->layer;
	double T = 4 * 4096, h = 8192;
	double fwd_gemm = 0, bwd_gemm = 0;
	int gemms = 0;
	for (int i = 0; i < g->n_ops; i++) {
		cr_assert_neq(g->ops[i].kind, RM_OP_ATTENTION);
		if (g->ops[i].kind != RM_OP_GEMM)
			continue;
		gemms++;
		if (g->ops[i].phase == RM_PHASE_FWD)
			fwd_gemm += g->ops[i].flops;
		else
			bwd_gemm += g->ops[i].flops;
	}
	cr_assert_eq(gemms, 6);
	cr_assert_float_eq(fwd_gemm, 2 * 2 * T * h * h, 1.0);
	cr_assert_float_eq(bwd_gemm, 2 * fwd_gemm, 1.0);
	int act = rm_graph_find_op(g, "mlp_activation");
	cr_assert_geq(act, 0);
	cr_assert_float_eq(g->ops[act].flops, T * h, 1.0);
	cr_assert_eq(rm_graph_find_op(g, "pre_attention_norm"), -1);
	cr_assert_eq(rm_graph_residual_bytes(g), 3 * 2 * (int64_t)T * 8192);
	cr_assert_eq(g->params, 2 * 8192LL * 8192);
	cr_assert_eq(rm_graph_find_op(&wl->head, "final_norm"), -1);
	rm_workload_destroy(wl);
	t.tp = 2;
	rm_error err;
	rm_error_clear(&err);
	cr_assert_null(rm_workload_create(&m, &t, &err));
	cr_assert_eq(err.status, RM_UNSUPPORTED);
	cr_assert(strstr(err.msg, "ResidualMLP"), "%s", err.msg);
}
