/* Remat policies: parsing as users write them, and the per-layer plans computed by hand. */
#include <criterion/criterion.h>
#include <string.h>

#include "remora/remat.h"

static rm_workload *llama(const char *name, bool fused)
{
	rm_model_config m;
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_model_config_resolve(name, &m, &err), RM_OK, "%s", err.msg);
	rm_train_config t = rm_train_config_default(&m);
	t.fused_attention = fused;
	rm_workload *wl = rm_workload_create(&m, &t, &err);
	cr_assert_not_null(wl, "%s", err.msg);
	return wl;
}

static rm_remat_plan plan_of(const rm_graph *g, const char *expr)
{
	rm_error err;
	rm_error_clear(&err);
	rm_remat_policy *p = rm_remat_policy_parse(expr, &err);
	cr_assert_not_null(p, "%s: col %d: %s", expr, err.column, err.msg);
	rm_remat_plan plan;
	cr_assert_eq(rm_remat_plan_build(g, p, &plan, &err), RM_OK, "%s", err.msg);
	rm_remat_policy_destroy(p);
	return plan;
}

static rm_value_fate fate(const rm_graph *g, const rm_remat_plan *plan, const char *value)
{
	int v = rm_graph_find_value(g, value);
	cr_assert_geq(v, 0, "no value %s", value);
	return plan->fate[v];
}

static bool recomputed(const rm_graph *g, const rm_remat_plan *plan, const char *op)
{
	int o = rm_graph_find_op(g, op);
	cr_assert_geq(o, 0, "no op %s", op);
	return plan->recompute[o];
}

#define SBH2 (2LL * 4096 * 4096) /* one [1, 4096, 4096] bf16 activation of Llama-2-7B */

Test(remat, nothing_saveable_recomputes_the_forward)
{
	rm_workload *wl = llama("llama-2-7b", true);
	const rm_graph *g = &wl->layer;
	rm_remat_plan plan = plan_of(g, "jax.checkpoint_policies.nothing_saveable");
	cr_assert_eq(plan.saved_bytes, 0);
	cr_assert_eq(plan.offloaded_bytes, 0);
	cr_assert_eq(plan.carry_bytes, SBH2, "the scan carry is kept whatever the policy");
	cr_assert_eq(fate(g, &plan, "layer_input"), RM_FATE_CARRY);
	/* every forward op but the two whose outputs the backward never reads: the down projection
	 * and the final residual add (JAX dead-code eliminates them from the remat forward) */
	double want_flops = 0;
	for (int o = 0; o < g->n_fwd_ops; o++) {
		bool dead = strcmp(g->ops[o].name, "dot_mlp_out") == 0 || strcmp(g->ops[o].name, "layer_output") == 0;
		cr_assert_eq(plan.recompute[o], !dead, "%s", g->ops[o].name);
		if (!dead)
			want_flops += g->ops[o].flops;
	}
	cr_assert_eq(plan.n_recompute_ops, g->n_fwd_ops - 2);
	cr_assert_float_eq(plan.recompute_flops, want_flops, 1.0);
	rm_remat_plan_finish(&plan);
	rm_workload_destroy(wl);
}

Test(remat, dots_saveable_recomputes_no_dot)
{
	rm_workload *wl = llama("llama-2-7b", true);
	const rm_graph *g = &wl->layer;
	rm_remat_plan plan = plan_of(g, "dots_saveable");
	for (int o = 0; o < g->n_fwd_ops; o++)
		if (g->ops[o].kind == RM_OP_GEMM)
			cr_assert_not(plan.recompute[o], "%s recomputed", g->ops[o].name);
	/* the flash kernel is a custom call, not a dot: recomputed, with the rotations it needs */
	cr_assert(recomputed(g, &plan, "attention_context"));
	cr_assert(recomputed(g, &plan, "rotary_query"));
	cr_assert_eq(fate(g, &plan, "dot_attention_query"), RM_FATE_SAVED);
	cr_assert_eq(fate(g, &plan, "dot_mlp_gate"), RM_FATE_SAVED);
	cr_assert_eq(fate(g, &plan, "dot_mlp_out"), RM_FATE_UNUSED, "nothing in the backward reads it");
	rm_remat_plan_finish(&plan);
	/* the alias checkpoint_dots is the same policy */
	rm_remat_plan alias = plan_of(g, "checkpoint_dots");
	rm_remat_plan again = plan_of(g, "dots_saveable");
	cr_assert_eq(alias.saved_bytes, again.saved_bytes);
	rm_remat_plan_finish(&alias);
	rm_remat_plan_finish(&again);
	rm_workload_destroy(wl);
}

Test(remat, unfused_attention_dots_have_batch_dims)
{
	rm_workload *wl = llama("llama-2-7b", false);
	const rm_graph *g = &wl->layer;
	rm_remat_plan all_dots = plan_of(g, "dots_saveable");
	rm_remat_plan no_batch = plan_of(g, "dots_with_no_batch_dims_saveable");
	/* QK^T has batch dims: saved by dots_saveable only (softmax needs its output, not QK^T's,
	 * so what decides is PV's output, the context) */
	cr_assert_eq(fate(g, &all_dots, "attention_context"), RM_FATE_SAVED);
	cr_assert_eq(fate(g, &no_batch, "attention_context"), RM_FATE_RECOMPUTED);
	cr_assert(recomputed(g, &no_batch, "attention_scores"));
	cr_assert_not(recomputed(g, &all_dots, "attention_scores"));
	rm_remat_plan_finish(&all_dots);
	rm_remat_plan_finish(&no_batch);
	rm_workload_destroy(wl);
}

Test(remat, everything_saveable_keeps_every_residual)
{
	rm_workload *wl = llama("llama-2-7b", true);
	const rm_graph *g = &wl->layer;
	rm_remat_plan plan = plan_of(g, "everything_saveable");
	cr_assert_eq(plan.n_recompute_ops, 0);
	cr_assert_eq(plan.saved_bytes + plan.carry_bytes, rm_graph_residual_bytes(g));
	rm_remat_plan_finish(&plan);
	rm_workload_destroy(wl);
}

Test(remat, seed_report_names)
{
	/* docs/reference/seed.md: save_only_these_names with the four names of the report */
	rm_workload *wl = llama("llama-2-7b", true);
	const rm_graph *g = &wl->layer;
	rm_remat_plan plan = plan_of(g, "save_only_these_names('dot_mlp_out', 'dot_attention_value', "
					"'dot_attention_query', 'dot_attention_key')");
	/* v is read by the attention backward; q and k (before rotation) rebuild the rotated q
	 * and k cheaply; dot_mlp_out is never read by the backward, so naming it saves nothing */
	cr_assert_eq(fate(g, &plan, "dot_attention_value"), RM_FATE_SAVED);
	cr_assert_eq(fate(g, &plan, "dot_attention_query"), RM_FATE_SAVED);
	cr_assert_eq(fate(g, &plan, "dot_attention_key"), RM_FATE_SAVED);
	cr_assert_eq(fate(g, &plan, "dot_mlp_out"), RM_FATE_UNUSED);
	cr_assert_eq(plan.saved_bytes, 3 * SBH2);
	cr_assert(recomputed(g, &plan, "rotary_query"));
	cr_assert_not(recomputed(g, &plan, "dot_attention_query"));
	cr_assert(recomputed(g, &plan, "dot_mlp_gate"), "MLP dots are not named: recomputed");
	rm_remat_plan_finish(&plan);
	rm_workload_destroy(wl);
}

Test(remat, maxtext_names_and_offload)
{
	rm_workload *wl = llama("llama-3-8b", true);
	const rm_graph *g = &wl->layer;
	/* minimal: q, k, v, out, mlpwi_0, mlpwi_1, mlpwo (GQA: k and v are [b, s, 8*128]) */
	rm_remat_plan minimal = plan_of(g, "maxtext:minimal");
	int64_t q = 2LL * 4096 * 4096, kv = 2LL * 4096 * 1024, ffn = 2LL * 4096 * 14336;
	/* the output projection's result rebuilds the residual stream the MLP norm's backward
	 * reads; dot_mlp_out feeds only the layer output, which nothing in the backward reads */
	cr_assert_eq(fate(g, &minimal, "dot_attention_out"), RM_FATE_SAVED);
	cr_assert_eq(fate(g, &minimal, "dot_mlp_out"), RM_FATE_UNUSED);
	cr_assert_eq(minimal.saved_bytes, 2 * q + 2 * kv + 2 * ffn);
	rm_remat_plan bare = plan_of(g, "minimal");
	cr_assert_eq(bare.saved_bytes, minimal.saved_bytes, "a bare MaxText name is accepted");
	rm_remat_plan off = plan_of(g, "maxtext:qkv_proj_offloaded");
	cr_assert_eq(off.saved_bytes, 0);
	cr_assert_eq(off.offloaded_bytes, q + 2 * kv);
	cr_assert_eq(fate(g, &off, "dot_attention_key"), RM_FATE_OFFLOADED);
	rm_remat_plan jax_off = plan_of(g, "save_and_offload_only_these_names(names_which_can_be_saved=[], "
					   "names_which_can_be_offloaded=['query_proj', 'key_proj', 'value_proj'], "
					   "offload_src='device', offload_dst='pinned_host')");
	cr_assert_eq(jax_off.offloaded_bytes, off.offloaded_bytes);
	rm_remat_plan ctx = plan_of(g, "maxtext:minimal_with_context");
	cr_assert_eq(fate(g, &ctx, "attention_lse"), RM_FATE_SAVED, "the lse follows the context");
	cr_assert_not(recomputed(g, &ctx, "attention_context"));
	rm_remat_plan full = plan_of(g, "maxtext:full");
	rm_remat_plan nothing = plan_of(g, "nothing_saveable");
	cr_assert_eq(full.n_recompute_ops, nothing.n_recompute_ops);
	rm_remat_plan_finish(&minimal);
	rm_remat_plan_finish(&bare);
	rm_remat_plan_finish(&off);
	rm_remat_plan_finish(&jax_off);
	rm_remat_plan_finish(&ctx);
	rm_remat_plan_finish(&full);
	rm_remat_plan_finish(&nothing);
	rm_workload_destroy(wl);
}

Test(remat, torch_modes_and_save_from_both)
{
	rm_workload *wl = llama("llama-2-7b", true);
	const rm_graph *g = &wl->layer;
	rm_remat_plan sel = plan_of(g, "torch:selective");
	cr_assert_not(recomputed(g, &sel, "attention_context"), "SAC keeps attention");
	for (int o = 0; o < g->n_fwd_ops; o++)
		if (g->ops[o].kind == RM_OP_GEMM)
			cr_assert_not(sel.recompute[o]);
	cr_assert(recomputed(g, &sel, "mlp_activation"), "cheap ops are recomputed");
	rm_remat_plan both = plan_of(g, "save_from_both_policies(dots_saveable, save_only_these_names('context'))");
	cr_assert_eq(both.saved_bytes, sel.saved_bytes);
	rm_remat_plan full = plan_of(g, "torch:full");
	cr_assert_eq(full.saved_bytes, 0);
	rm_remat_plan_finish(&sel);
	rm_remat_plan_finish(&both);
	rm_remat_plan_finish(&full);
	rm_workload_destroy(wl);
}

Test(remat, format_gives_the_line_to_paste)
{
	rm_error err;
	rm_remat_policy *p = rm_remat_policy_parse("save_only_these_names('mlpwo', \"query_proj\")", &err);
	cr_assert_not_null(p);
	char buf[512];
	cr_assert_str_eq(rm_remat_policy_format(p, buf, sizeof(buf)),
			 "jax.checkpoint_policies.save_only_these_names(\"dot_mlp_out\", \"dot_attention_query\")");
	rm_remat_policy *again = rm_remat_policy_parse(buf, &err);
	cr_assert_not_null(again, "%s", err.msg);
	cr_assert_eq(again->n_names, 2);
	rm_remat_policy_destroy(p);
	rm_remat_policy_destroy(again);
	p = rm_remat_policy_parse("maxtext:qkv_proj_offloaded", &err);
	cr_assert_str_eq(rm_remat_policy_format(p, buf, sizeof(buf)),
			 "jax.checkpoint_policies.save_and_offload_only_these_names(names_which_can_be_saved=[], "
			 "names_which_can_be_offloaded=[\"dot_attention_query\", \"dot_attention_key\", "
			 "\"dot_attention_value\"], offload_src=\"device\", offload_dst=\"pinned_host\")");
	rm_remat_policy_destroy(p);
}

static void expect_parse_error(const char *expr, int column, const char *needle)
{
	rm_error err;
	rm_error_clear(&err);
	rm_remat_policy *p = rm_remat_policy_parse(expr, &err);
	cr_assert_null(p, "%s parsed", expr);
	cr_assert_eq(err.column, column, "%s: column %d, want %d (%s)", expr, err.column, column, err.msg);
	cr_assert(strstr(err.msg, needle), "%s: '%s' lacks '%s'", expr, err.msg, needle);
}

Test(remat, bad_policies_fail_with_a_column)
{
	expect_parse_error("save_only_these_name('dot_mlp_out')", 1, "unknown remat policy 'save_only_these_name'");
	expect_parse_error("save_only_these_names('dot_mlp_out', 'dot_mlp_outt')", 38, "unknown checkpoint name \"dot_mlp_outt\"");
	expect_parse_error("save_only_these_names('dot_mlp_out'", 36, "expected ',' or ')'");
	expect_parse_error("save_only_these_names('dot_mlp_out)", 23, "unterminated string");
	expect_parse_error("nothing_saveable() extra", 20, "unexpected text after the policy");
	expect_parse_error("nothing_saveable('x')", 18, "takes no arguments");
	expect_parse_error("save_and_offload_only_these_names(['mlpwo'], ['dot_mlp_out'])", 1, "both saved and offloaded");
	expect_parse_error("offload_dot_with_no_batch_dims('device', 'device')", 42, "pinned_host");
	expect_parse_error("save_from_both_policies(dots_saveable)", 1, "takes two policies");
	/* an unknown name is pointed at after its qualifier or prefix */
	expect_parse_error("maxtext:minimalist", 9, "unknown MaxText remat_policy 'minimalist'");
	expect_parse_error("torch:partial", 7, "unknown PyTorch");
	expect_parse_error("jax.checkpoint_policies.save_only_these_nmes('dot_mlp_out')", 25,
			   "unknown remat policy 'save_only_these_nmes'");
	expect_parse_error("", 1, "found the end");
}

/* torch.compile with no checkpointing: the partitioner recomputes the pointwise outputs (rotary,
 * residual add, SiLU, gate x up) inside the backward and saves what they are computed from.
 * Llama-2-7B, b1 s4096: saved are the norm outputs xn and rn (reductions are not recomputed), q,
 * k, v before rotary, the attention output and its log-sum-exp, the out-projection output, gate
 * and up: 7 x 4096 x 4096 x 2 B + 2 x 4096 x 11008 x 2 B + 32 x 4096 x 4 B = 415,760,384 B, against
 * every residual as autograd keeps it. */
Test(remat, compile_partitioner_recomputes_pointwise)
{
	rm_workload *wl = llama("llama-2-7b", true);
	const rm_graph *g = &wl->layer;
	rm_remat_policy *pol = rm_remat_policy_parse("everything_saveable", NULL);
	rm_remat_plan plan;
	cr_assert_eq(rm_remat_plan_build_compiled(g, pol, true, &plan, NULL), RM_OK);
	cr_assert_eq(plan.saved_bytes, 415760384LL, "%lld", (long long)plan.saved_bytes);
	cr_assert_eq(fate(g, &plan, "mlp_activation"), RM_FATE_RECOMPUTED);
	cr_assert_eq(fate(g, &plan, "mlp_hidden"), RM_FATE_RECOMPUTED);
	cr_assert_eq(fate(g, &plan, "rotary_query"), RM_FATE_RECOMPUTED);
	cr_assert_eq(fate(g, &plan, "pre_mlp_norm"), RM_FATE_SAVED);
	cr_assert_eq(fate(g, &plan, "dot_mlp_gate"), RM_FATE_SAVED);
	cr_assert(recomputed(g, &plan, "mlp_hidden"));
	cr_assert(!recomputed(g, &plan, "dot_mlp_gate"));
	rm_remat_plan eager = plan_of(g, "everything_saveable");
	cr_assert_gt(eager.saved_bytes, plan.saved_bytes);
	cr_assert_eq(eager.n_recompute_ops, 0);
	rm_remat_plan_finish(&eager);
	rm_remat_plan_finish(&plan);
	/* a checkpointing policy is the user's: the partitioner leaves it as it is */
	rm_remat_policy *none = rm_remat_policy_parse("nothing_saveable", NULL);
	rm_remat_plan a, b;
	cr_assert_eq(rm_remat_plan_build_compiled(g, none, true, &a, NULL), RM_OK);
	cr_assert_eq(rm_remat_plan_build(g, none, &b, NULL), RM_OK);
	cr_assert_eq(a.saved_bytes, b.saved_bytes);
	cr_assert_eq(a.n_recompute_ops, b.n_recompute_ops);
	rm_remat_plan_finish(&a);
	rm_remat_plan_finish(&b);
	rm_remat_policy_destroy(none);
	rm_remat_policy_destroy(pol);
	rm_workload_destroy(wl);
}
