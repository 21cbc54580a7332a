/*
 * The XLA-style scheduler on the seed scenario (docs/reference/seed.md): what stays async, what turns
 * synchronous and why, saved bytes and collective bytes computed by hand; scenario errors.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "remora/scenario.h"
#include "remora/schedule.h"
#include "remora/sim.h"
#include "scenario_run.h"


static const char *seed_path(void)
{
	static char path[1024];
	const char *dir = getenv("REMORA_DATA_DIR");
	cr_assert_not_null(dir);
	snprintf(path, sizeof(path), "%s/scenarios/seed-llama2-7b-fsdp8-h100.yaml", dir);
	return path;
}

/* Loads the seed scenario, applies the overrides (NULL-terminated), schedules and simulates. */
static void run_seed(run *r, const char *const *sets)
{
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_load(seed_path(), &sc, &err), RM_OK, "%s", err.msg);
	for (int i = 0; sets && sets[i]; i++)
		cr_assert_eq(rm_scenario_set(&sc, sets[i], &err), RM_OK, "%s: %s", sets[i], err.msg);
	resolve_and_run(r, &sc);
}


/* Collectives of the decoder layers ("layerNN/...") that run synchronously, by reason. */
static int layer_sync(const rm_program *p, const char *reason)
{
	int n = 0;
	for (int32_t i = 0; i < p->n_ops; i++) {
		const rm_program_op *op = &p->ops[i];
		if (op->cost.kind != RM_COST_COLLECTIVE || !op->sync_reason || strncmp(op->name, "layer", 5) != 0)
			continue;
		/* the pipeliner's prologue and epilogue sit outside the loop, next to nothing */
		if (!reason || strcmp(op->sync_reason, reason) == 0)
			n++;
	}
	return n;
}

static int layer_collectives(const rm_program *p)
{
	int n = 0;
	for (int32_t i = 0; i < p->n_ops; i++)
		if (p->ops[i].cost.kind == RM_COST_COLLECTIVE && strncmp(p->ops[i].name, "layer", 5) == 0)
			n++;
	return n;
}

/* Collectives of the loop bodies made synchronous by either memory rule of ReadySetLt. */
static int layer_memory_sync(const rm_program *p)
{
	return layer_sync(p, "memory_peak_over_limit") + layer_sync(p, "decrease_memory_over_limit");
}

#define NOTHING "remat.policy=nothing_saveable", "remat.names=[]"

Test(schedule, nothing_saveable_keeps_layer_collectives_async)
{
	/* Every micro-batch up to 12: the loop bodies' gathers and reduce-scatters all overlap
	 * compute. (The pipeliner's prologue gathers layer 0 alone, one iteration ahead; its
	 * epilogue reduce-scatter and all-reduce of layer 0, outside the loop, share the one
	 * in-flight slot with the embedding's: overlap_limit.) */
	const char *mbs[] = {"training.micro_batch=1", "training.micro_batch=2", "training.micro_batch=4",
			     "training.micro_batch=8", "training.micro_batch=12"};
	for (size_t i = 0; i < sizeof(mbs) / sizeof(mbs[0]); i++) {
		const char *sets[] = {NOTHING, mbs[i], NULL};
		run r;
		run_seed(&r, sets);
		cr_assert(r.m.fits, "%s fits", mbs[i]);
		cr_assert_eq(layer_memory_sync(r.prog), 0, "%s", mbs[i]);
		cr_assert_eq(layer_sync(r.prog, "nothing_to_overlap"), 0,
			     "%s: the prologue gathers one layer, with the embedding to overlap", mbs[i]);
		cr_assert_eq(layer_sync(r.prog, NULL), 2, "%s: the epilogue's reduce-scatter and all-reduce", mbs[i]);
		run_finish(&r);
	}
}

Test(schedule, the_pipeliner_gathers_one_layer_ahead_and_reduces_one_behind)
{
	/* XLA's collective pipeliner runs before double buffering: in the body of two copies, copy
	 * 0 gathers the weights of copy 1, copy 1 those of the next iteration's copy 0, so the
	 * prologue gathers layer 0 alone and at most the running layer and the next are gathered:
	 * at the seed's memory peak, in the backward loop at layer 30 (the loss's fp32 buffers, which
	 * set it before with the LM head's 262,144,000 B gathered, are fused away), one layer's
	 * matrices (4 x 4096^2 + 3 x 4096 x 11008 bf16 = 404,750,336 B) */
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_load(seed_path(), &sc, &err), RM_OK, "%s", err.msg);
	rm_scenario_resolved res;
	cr_assert_eq(rm_scenario_resolve(&sc, NULL, &res, &err), RM_OK, "%s", err.msg);
	rm_schedule_report rep;
	rm_program *prog = rm_schedule_build(&res.sched, &rep, &err);
	cr_assert_not_null(prog, "%s", err.msg);
	int prologue = 0, epilogue = 0;
	for (int32_t i = 0; i < prog->n_ops; i++) {
		const rm_program_op *op = &prog->ops[i];
		if (op->cost.kind != RM_COST_COLLECTIVE)
			continue;
		if (strstr(op->name, "/fwd/all-gather") && strncmp(op->name, "layer01/", 8) == 0 &&
		    op->sync_reason)
			prologue++; /* the spurious second prologue gather of two-ahead pipelining */
		if (strncmp(op->name, "layer00/bwd/reduce-scatter", 26) == 0 ||
		    strncmp(op->name, "layer00/bwd/all-reduce", 22) == 0)
			epilogue++;
	}
	cr_assert_eq(prologue, 0);
	cr_assert_eq(epilogue, 2, "layer 0's reduce-scatter and all-reduce, after the loop");
	/* the forward loop holds the collective resource: the LM head's gather starts after it */
	int32_t head_ag = -1, last_fwd = -1;
	for (int32_t i = 0; i < prog->n_ops; i++) {
		if (strcmp(prog->ops[i].name, "head/all-gather") == 0)
			head_ag = i;
		if (strcmp(prog->ops[i].name, "layer31/fwd/layer_output") == 0)
			last_fwd = i;
	}
	cr_assert_gt(head_ag, last_fwd, "head/all-gather at op %d, the loop's last op at %d", head_ag, last_fwd);
	rm_sim_options opt = {.hw_queues = res.hw_queues};
	rm_sim *sim = rm_sim_create(prog, &res.hw, &opt, &err);
	cr_assert_not_null(sim, "%s", err.msg);
	cr_assert_eq(rm_sim_run(sim, &err), RM_OK, "%s", err.msg);
	rm_breakdown bd;
	cr_assert_eq(rm_sim_breakdown(sim, &res.memory, &bd, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(bd.role_bytes[RM_ROLE_GATHERED_PARAM], 404750336LL, "%lld",
		     (long long)bd.role_bytes[RM_ROLE_GATHERED_PARAM]);
	rm_sim_destroy(sim);
	rm_program_destroy(prog);
	rm_schedule_report_finish(&rep);
	rm_scenario_resolved_finish(&res);
}

Test(schedule, seed_names_turn_synchronous_where_tracked_memory_reaches_the_limit)
{
	/* XLA's limit on the seed: (0.75 x 79.65 GiB - 10.98 GiB of donated train state and tokens)
	 * x 0.95 = 46.32 GiB. The four saved names stack 4 x 2sbh per layer per sequence; at
	 * micro-batch 8 the loop bodies' tracked memory is above half the limit but stays under it,
	 * and every loop collective overlaps; at 12 it reaches the limit and kDecreaseMemoryOverLimit
	 * puts them on the compute stream. (The old half-the-limit trigger fired at 6.) */
	const char *b8[] = {"training.micro_batch=8", NULL};
	const char *b12[] = {"training.micro_batch=12", NULL};
	const char *b12_nothing[] = {NOTHING, "training.micro_batch=12", NULL};
	run r8, r12, n12;
	run_seed(&r8, b8);
	run_seed(&r12, b12);
	run_seed(&n12, b12_nothing);
	cr_assert_eq(layer_memory_sync(r8.prog), 0);
	cr_assert_gt(r8.rep.tracked_peak_bytes, r8.rep.memory_limit_bytes / 2);
	cr_assert_lt(r8.rep.tracked_peak_bytes, r8.rep.memory_limit_bytes);
	cr_assert_eq(r8.rep.first_memory_sync_tracked_bytes, 0);
	int layer_total = layer_collectives(r12.prog);
	cr_assert_gt(layer_sync(r12.prog, "decrease_memory_over_limit"), layer_total * 8 / 10, "%d of %d",
		     layer_sync(r12.prog, "decrease_memory_over_limit"), layer_total);
	cr_assert_geq(r12.rep.tracked_peak_bytes, r12.rep.memory_limit_bytes);
	/* the first memory rule fired above half the limit */
	cr_assert_gt(r12.rep.first_memory_sync_tracked_bytes, r12.rep.memory_limit_bytes / 2);
	cr_assert_eq(layer_memory_sync(n12.prog), 0, "nothing_saveable stays async at 12");
	/* the switch costs step time: communication is no longer hidden */
	cr_assert_gt(r12.m.exposed_comm, 10 * n12.m.exposed_comm);
	run_finish(&r8);
	run_finish(&r12);
	run_finish(&n12);
}

Test(schedule, donation_and_the_mem_fraction_set_the_limit)
{
	/* donated: 10.98 GiB of I/O (bf16 params, fp32 master, AdamW m and v over 8: 14 B x
	 * 842.3M, + tokens); not donated the new state counts again: 21.96 GiB. The base is 0.75 x
	 * HBM (BFC), 0.8 x HBM with the platform allocator, or the given fraction */
	const char *don[] = {NULL};
	const char *nodon[] = {"xla.donate=false", NULL};
	const char *plat[] = {"xla.allocator=platform", NULL};
	const char *frac[] = {"xla.mem_fraction=0.9", NULL};
	run a, b, c, d;
	run_seed(&a, don);
	run_seed(&b, nodon);
	run_seed(&c, plat);
	run_seed(&d, frac);
	int64_t tokens = 4096 * 4;
	int64_t state = 14LL * (6738415616LL / 8);
	cr_assert_eq(a.rep.io_bytes, state + tokens);
	cr_assert_eq(b.rep.io_bytes, 2 * state + tokens);
	int64_t hbm = a.res.hw.hbm_bytes;
	cr_assert_eq(a.rep.memory_base_bytes, (int64_t)(0.75 * (double)hbm));
	cr_assert_eq(c.rep.memory_base_bytes, (int64_t)(0.8 * (double)hbm));
	cr_assert_eq(d.rep.memory_base_bytes, (int64_t)(0.9 * (double)hbm));
	cr_assert_eq(a.rep.memory_limit_bytes, (int64_t)((double)(a.rep.memory_base_bytes - a.rep.io_bytes) * 0.95));
	cr_assert_eq(b.rep.memory_limit_bytes, (int64_t)((double)(b.rep.memory_base_bytes - b.rep.io_bytes) * 0.95));
	/* issue figures: 46.3 vs ~35.9 GiB */
	cr_assert_float_eq((double)a.rep.memory_limit_bytes / (double)RM_GiB, 46.32, 0.01);
	cr_assert_float_eq((double)b.rep.memory_limit_bytes / (double)RM_GiB, 35.89, 0.01);
	run_finish(&a);
	run_finish(&b);
	run_finish(&c);
	run_finish(&d);
}

Test(schedule, slop_factor_or_offloading_turns_them_async_again)
{
	const char *slop[] = {"training.micro_batch=11", "xla_flags=--xla_gpu_enable_pipelined_all_gather=true "
							"--xla_gpu_enable_pipelined_reduce_scatter=true "
							"--xla_gpu_enable_pipelined_all_reduce=true "
							"--xla_gpu_enable_while_loop_double_buffering=true "
							"--xla_gpu_all_gather_combine_threshold_bytes=2147483648 "
							"--xla_gpu_reduce_scatter_combine_threshold_bytes=2147483648 "
							"--xla_gpu_memory_limit_slop_factor=120",
			      NULL};
	const char *offload[] = {"training.micro_batch=11", "remat.policy=save_and_offload_only_these_names",
				 "remat.names=[]",
				 "remat.offload_names=[dot_mlp_out, dot_attention_value, dot_attention_query, dot_attention_key]",
				 NULL};
	run a, b;
	run_seed(&a, slop);
	run_seed(&b, offload);
	cr_assert_eq(layer_memory_sync(a.prog), 0);
	cr_assert_eq(layer_memory_sync(b.prog), 0);
	cr_assert_gt(b.rep.offloaded_bytes_step, 0);
	/* offloading keeps only the carry on device: L x 2sbh x 11 */
	cr_assert_eq(b.rep.saved_bytes_step, 32LL * 11 * 2 * 4096 * 4096);
	run_finish(&a);
	run_finish(&b);
}

Test(schedule, offloaded_values_reload_one_iteration_ahead)
{
	/* the reloads of iteration i are issued in iteration i - 1: beside what nothing_saveable
	 * holds, at most three layers' reloaded q, k, v are resident (3 x 2sbh at micro-batch 6 =
	 * 603,979,776 B a layer; the double-buffered body runs two layers an iteration, so the
	 * running iteration's and the next one's overlap: at the peak, in the backward of layer 29,
	 * layer 26's are arriving), not every layer the copy engine could fetch early. (Two while the
	 * loss's fp32 buffers, before fusion, set the peak at the head.) */
	const char *off[] = {"training.micro_batch=6", "remat.policy=save_and_offload_only_these_names", "remat.names=[]",
			     "remat.offload_names=[dot_mlp_out, dot_attention_value, dot_attention_query, dot_attention_key]",
			     NULL};
	const char *none[] = {NOTHING, "training.micro_batch=6", NULL};
	run a, b;
	run_seed(&a, off);
	run_seed(&b, none);
	int64_t layer = 3LL * 2 * 4096 * 4096 * 6;
	cr_assert_leq(a.m.peak_memory_bytes - b.m.peak_memory_bytes, 3 * layer, "%lld over nothing_saveable",
		      (long long)(a.m.peak_memory_bytes - b.m.peak_memory_bytes));
	/* and the copies stay hidden: no slower than recomputing everything */
	cr_assert_lt(a.m.step_time, b.m.step_time);
	run_finish(&a);
	run_finish(&b);
}

/* Collectives of layer 5's pass (fwd or bwd) of one kind in the program of a llama-2-7b FSDP-8
 * scenario with XLA's default flags plus `flags`. */
static int layer5_colls(const char *flags, const char *what)
{
	char text[512];
	snprintf(text, sizeof(text), "model: llama-2-7b\nxla_flags: \"%s\"\n", flags);
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_parse(text, strlen(text), "combine.yaml", &sc, &err), RM_OK, "%s", err.msg);
	rm_scenario_resolved res;
	cr_assert_eq(rm_scenario_resolve(&sc, NULL, &res, &err), RM_OK, "%s", err.msg);
	rm_schedule_report rep;
	rm_program *prog = rm_schedule_build(&res.sched, &rep, &err);
	cr_assert_not_null(prog, "%s", err.msg);
	int n = 0;
	for (int32_t i = 0; i < prog->n_ops; i++)
		if (strncmp(prog->ops[i].name, what, strlen(what)) == 0)
			n++;
	rm_program_destroy(prog);
	rm_schedule_report_finish(&rep);
	rm_scenario_resolved_finish(&res);
	return n;
}

Test(schedule, combiners_size_by_output_and_split_by_dimension)
{
	/* 30 MiB thresholds (XLA's defaults). All-gathers combine by their output, the full
	 * weight: every projection (32 or 86 MiB in bf16) is its own. Reduce-scatters by theirs,
	 * the shard (4 and 10.75 MiB): in gradient order down, up, gate, out, v, k, q; combine_by_dim
	 * keeps the projections sharded on their input dim (q, k, v, gate, up) apart from those on
	 * their output dim (out, down): {up, gate, v, k} (29.5 MiB), then {q}, and {down, out}: 3.
	 * Without it: {down, up} (21.5; gate would make 32.25), {gate, out, v, k, q} (26.75): 2. */
	cr_assert_eq(layer5_colls("", "layer05/fwd/all-gather"), 7);
	cr_assert_eq(layer5_colls("", "layer05/bwd/reduce-scatter"), 3);
	cr_assert_eq(layer5_colls("--xla_gpu_enable_reduce_scatter_combine_by_dim=false", "layer05/bwd/reduce-scatter"), 2);
	cr_assert_eq(layer5_colls("--xla_gpu_all_gather_combine_threshold_bytes=1073741824", "layer05/fwd/all-gather"), 2,
		     "by dimension: {q, k, v, gate, up} and {out, down}");
}

static int32_t op_index(const rm_program *p, const char *name)
{
	for (int32_t i = 0; i < p->n_ops; i++)
		if (strcmp(p->ops[i].name, name) == 0)
			return i;
	return -1;
}

/* 1 when op reads tensor t. */
static bool op_reads(const rm_program *p, int32_t op, int32_t t)
{
	const int32_t *in = rm_program_refs(p, p->ops[op].inputs);
	for (uint32_t i = 0; i < p->ops[op].inputs.count; i++)
		if (in[i] == t)
			return true;
	return false;
}

/* The output-gradient input of op (a tensor named ".../grad/..."), -1. */
static int32_t grad_input(const rm_program *p, int32_t op)
{
	const int32_t *in = rm_program_refs(p, p->ops[op].inputs);
	for (uint32_t i = 0; i < p->ops[op].inputs.count; i++)
		if (in[i] >= 0 && strstr(p->tensors[in[i]].name, "/grad/"))
			return in[i];
	return -1;
}

Test(schedule, a_weight_gradient_reads_the_output_gradient_its_dgrad_read)
{
	/* dX = dY W^T and dW = X^T dY read the same dY; the dgrad's output dX is the gradient of
	 * the projection's input, which the weight gradient never reads. Each projection of layer
	 * 5, and the LM head (its dY: the logits' gradient, 4096 x 32000 x 2 B) */
	const char *proj[] = {"dot_attention_query", "dot_attention_key", "dot_attention_value", "dot_attention_out",
			      "dot_mlp_gate", "dot_mlp_up", "dot_mlp_out", "head:dot_logits"};
	run r;
	run_seed(&r, NULL);
	for (size_t i = 0; i < sizeof(proj) / sizeof(proj[0]); i++) {
		char dg[96], wg[96];
		bool head = strncmp(proj[i], "head:", 5) == 0;
		snprintf(dg, sizeof(dg), "%s/bwd/%s.dgrad", head ? "head" : "layer05", head ? proj[i] + 5 : proj[i]);
		snprintf(wg, sizeof(wg), "%s/bwd/%s.wgrad", head ? "head" : "layer05", head ? proj[i] + 5 : proj[i]);
		int32_t d = op_index(r.prog, dg), w = op_index(r.prog, wg);
		cr_assert(d >= 0 && w >= 0, "%s, %s", dg, wg);
		int32_t dy = grad_input(r.prog, d);
		cr_assert_geq(dy, 0, "%s reads a gradient", dg);
		cr_assert(op_reads(r.prog, w, dy), "%s reads %s", wg, r.prog->tensors[dy].name);
		const int32_t *out = rm_program_refs(r.prog, r.prog->ops[d].outputs);
		for (uint32_t k = 0; k < r.prog->ops[d].outputs.count; k++)
			cr_assert_not(op_reads(r.prog, w, out[k]), "%s reads %s's output", wg, dg);
		if (head)
			cr_assert_eq(r.prog->tensors[dy].bytes, 4096LL * 32000 * 2, "%s", r.prog->tensors[dy].name);
	}
	run_finish(&r);
}

/* 1 when op (by name) reads the tensor named t. */
static bool reads_named(const rm_program *p, const char *op, const char *t)
{
	int32_t i = op_index(p, op);
	cr_assert_geq(i, 0, "%s", op);
	const int32_t *in = rm_program_refs(p, p->ops[i].inputs);
	for (uint32_t k = 0; k < p->ops[i].inputs.count; k++)
		if (in[k] >= 0 && strcmp(p->tensors[in[k]].name, t) == 0)
			return true;
	return false;
}

Test(schedule, the_backward_gradients_flow_by_value)
{
	/* Llama's MLP: h = silu(gate(x)) * up(x), x = norm(r), r' = r + down(h). Reverse mode: up's
	 * dgrad reads dL/d up (mlp_hidden's backward), gate's reads dL/d gate (the activation's
	 * backward) and adds to the dX up's dgrad left (x feeds both); the norm's backward adds to
	 * the residual stream's gradient, which the residual add's backward left and which lives
	 * across the whole MLP backward; the layer below reads this layer's input gradient */
	run r;
	run_seed(&r, NULL);
	const rm_program *p = r.prog;
	cr_assert(reads_named(p, "layer05/bwd/dot_mlp_up.dgrad", "layer05/grad/mlp_hidden.bwd"));
	cr_assert(reads_named(p, "layer05/bwd/dot_mlp_gate.dgrad", "layer05/grad/mlp_activation.bwd"));
	cr_assert(reads_named(p, "layer05/bwd/dot_mlp_gate.dgrad", "layer05/grad/dot_mlp_up.dgrad"));
	cr_assert_not(reads_named(p, "layer05/bwd/dot_mlp_up.dgrad", "layer05/grad/mlp_activation.bwd"));
	cr_assert(reads_named(p, "layer05/bwd/pre_mlp_norm.bwd", "layer05/grad/layer_output.bwd"));
	/* attention: the fused backward's dQ, dK, dV (one tensor) feed the rotaries and V's dgrad */
	cr_assert(reads_named(p, "layer05/bwd/dot_attention_value.dgrad", "layer05/grad/attention_context.bwd"));
	cr_assert(reads_named(p, "layer05/bwd/rotary_key.bwd", "layer05/grad/attention_context.bwd"));
	cr_assert(reads_named(p, "layer05/bwd/dot_attention_key.dgrad", "layer05/grad/rotary_key.bwd"));
	cr_assert(reads_named(p, "layer05/bwd/pre_attention_norm.bwd", "layer05/grad/attention_residual.bwd"));
	/* the layer below starts from the sum the norm's backward left */
	cr_assert(reads_named(p, "layer04/bwd/layer_output.bwd", "layer05/grad/pre_attention_norm.bwd"));
	run_finish(&r);
}

Test(schedule, prevent_cse_keeps_the_backward_gathers_in_their_iteration)
{
	/* jax.checkpoint's barrier before the recompute: layer 10's backward gather reads its
	 * output, so it starts after layer 11's backward, with only the norm before its first
	 * GEMM to overlap; without it the pipeliner issues it during layer 11 */
	const char *on[] = {"remat.prevent_cse=true", NULL};
	const char *off[] = {"remat.prevent_cse=false", NULL};
	run a, b;
	run_seed(&a, on);
	run_seed(&b, off);
	cr_assert(a.rep.backward_gathers_fenced);
	cr_assert_not(b.rep.backward_gathers_fenced);
	int32_t ag_a = op_index(a.prog, "layer10/bwd/all-gather0"), end11_a = op_index(a.prog, "layer11/bwd/pre_attention_norm.bwd");
	int32_t ag_b = op_index(b.prog, "layer10/bwd/all-gather0"), end11_b = op_index(b.prog, "layer11/bwd/pre_attention_norm.bwd");
	cr_assert(ag_a >= 0 && end11_a >= 0 && ag_b >= 0 && end11_b >= 0);
	cr_assert_gt(ag_a, end11_a);
	cr_assert_lt(ag_b, end11_b);
	cr_assert_gt(a.m.exposed_comm, 3 * b.m.exposed_comm);
	run_finish(&a);
	run_finish(&b);
}

Test(schedule, the_sol_estimator_prices_the_lhs_by_time)
{
	/* --xla_gpu_enable_analytical_sol_latency_estimator: XLA prices ops by time (measured NCCL
	 * tables, its performance model), as remora's own costs do: the same schedule as
	 * scheduler.cost_model remora, and another than XLA's default units */
	const char *sol[] = {"xla.version=0.5.3", "xla_flags+=--xla_gpu_enable_analytical_sol_latency_estimator=true", NULL};
	const char *timed[] = {"xla.version=0.5.3", "scheduler.cost_model=remora", NULL};
	const char *units[] = {"xla.version=0.5.3", NULL};
	run a, b, c;
	run_seed(&a, sol);
	run_seed(&b, timed);
	run_seed(&c, units);
	cr_assert_eq(a.m.step_time, b.m.step_time);
	cr_assert_neq(a.m.step_time, c.m.step_time);
	run_finish(&a);
	run_finish(&b);
	run_finish(&c);
}



static int ops_named(const rm_program *p, const char *prefix)
{
	int n = 0;
	for (int32_t i = 0; i < p->n_ops; i++)
		n += strncmp(p->ops[i].name, prefix, strlen(prefix)) == 0;
	return n;
}

Test(schedule, gradient_sync_on_the_last_micro_batch_accumulates_unsharded_gradients)
{
	/* FSDP2 with set_requires_gradient_sync(False) on micro-batch 0 of 2: no reduce-scatter
	 * then, one after micro-batch 1, and every layer's full bf16 gradients (202,375,168
	 * matrix elements x 2 B x 32 layers = 12.95 GB) held between them */
#define GS_BASE "model: llama-2-7b\ntraining: {seq_len: 1024, grad_accum: 2}\nremat: {scan: false, policy: " \
		"nothing_saveable}\nscheduler: {mode: fsdp2, gradient_sync: "
	const char *every = GS_BASE "every_micro_batch}\n", *last = GS_BASE "last_micro_batch}\n";
#undef GS_BASE
	run a, b;
	run_text(&a, every);
	run_text(&b, last);
	cr_assert_gt(ops_named(a.prog, "mb0/layer05/bwd/reduce-scatter"), 0);
	cr_assert_eq(ops_named(b.prog, "mb0/layer05/bwd/reduce-scatter"), 0);
	cr_assert_eq(ops_named(b.prog, "mb1/layer05/bwd/reduce-scatter"), ops_named(a.prog, "mb1/layer05/bwd/reduce-scatter"));
	int64_t held = 202375168LL * 2 * 32;
	cr_assert_gt(b.m.peak_memory_bytes - a.m.peak_memory_bytes, held * 9 / 10, "%lld more",
		     (long long)(b.m.peak_memory_bytes - a.m.peak_memory_bytes));
	cr_assert_leq(b.m.peak_memory_bytes - a.m.peak_memory_bytes, held + held / 20);
	run_finish(&a);
	run_finish(&b);
	/* one GPU: nothing to reduce, the weight gradients accumulate into the optimizer's */
	run c;
	run_text(&c, "model: llama-2-7b\ncluster: {gpus_per_node: 1}\nparallelism: {fsdp: 1}\ntraining: {seq_len: 1024, "
		     "grad_accum: 2}\nremat: {scan: false, policy: nothing_saveable}\nscheduler: {mode: fsdp2}\n");
	for (int32_t i = 0; i < c.prog->n_tensors; i++)
		cr_assert_null(strstr(c.prog->tensors[i].name, "/grads"), "%s", c.prog->tensors[i].name);
	run_finish(&c);
	/* only FSDP2 has the switch */
	expect_scenario_error("model: llama-2-7b\nscheduler:\n  gradient_sync: last_micro_batch\n", RM_INVALID, 3, 18,
			      "applies to scheduler.mode fsdp2");
	expect_scenario_error("model: llama-2-7b\nscheduler:\n  mode: fsdp2\n  gradient_sync: never\n", RM_INVALID, 4, 18,
			      "expected every_micro_batch or last_micro_batch");
}

Test(schedule, disabled_kinds_are_synchronous_with_reason_disabled)
{
	const char *sets[] = {"xla_flags=--xla_gpu_disable_async_collectives=allgather,reducescatter", NULL};
	run r;
	run_seed(&r, sets);
	int ag = 0, rs = 0;
	for (int32_t i = 0; i < r.prog->n_ops; i++) {
		const rm_program_op *op = &r.prog->ops[i];
		if (op->cost.kind != RM_COST_COLLECTIVE)
			continue;
		if (op->cost.collective.op == RM_COLL_ALL_GATHER) {
			ag++;
			cr_assert(op->sync_reason && strcmp(op->sync_reason, "disabled") == 0, "%s", op->name);
		}
		if (op->cost.collective.op == RM_COLL_REDUCE_SCATTER) {
			rs++;
			cr_assert(op->sync_reason && strcmp(op->sync_reason, "disabled") == 0, "%s", op->name);
		}
		if (op->cost.collective.op == RM_COLL_ALL_REDUCE)
			cr_assert(!op->sync_reason || strcmp(op->sync_reason, "disabled") != 0);
	}
	cr_assert_gt(ag, 0);
	cr_assert_gt(rs, 0);
	run_finish(&r);
}

Test(schedule, saved_and_collective_bytes_by_hand)
{
	run r;
	run_seed(&r, NULL);
	/* seed names: v, q, k saved (dot_mlp_out is never read by the backward) + the carry, each
	 * [1, 4096, 4096] bf16, for 32 layers */
	int64_t sbh2 = 2LL * 4096 * 4096;
	cr_assert_eq(r.rep.plan.saved_bytes, 3 * sbh2);
	cr_assert_eq(r.rep.saved_bytes_step, 32 * 4 * sbh2);
	/* one layer's collectives move its parameters: gathers of the matrices (bf16) plus the
	 * all-reduce of the replicated norms = 202,383,360 parameters x 2 bytes */
	int64_t ag = 0, rs = 0, ar = 0;
	for (int32_t i = 0; i < r.prog->n_ops; i++) {
		const rm_program_op *op = &r.prog->ops[i];
		if (op->cost.kind != RM_COST_COLLECTIVE || op->layer != 5)
			continue;
		if (op->cost.collective.op == RM_COLL_ALL_GATHER && op->phase == RM_PPHASE_FWD)
			ag += op->cost.collective.bytes;
		if (op->cost.collective.op == RM_COLL_REDUCE_SCATTER)
			rs += op->cost.collective.bytes;
		if (op->cost.collective.op == RM_COLL_ALL_REDUCE)
			ar += op->cost.collective.bytes;
		cr_assert_eq(op->cost.collective.group_size, 8);
	}
	cr_assert_eq(ag + ar, 202383360LL * 2);
	cr_assert_eq(rs + ar, 202383360LL * 2);
	cr_assert_eq(ar, 2LL * 4096 * 2, "two RMSNorm weight vectors");
	run_finish(&r);
}

Test(schedule, recompute_ops_follow_the_policy)
{
	const char *nothing[] = {NOTHING, NULL};
	const char *dots[] = {"remat.policy=dots_saveable", "remat.names=[]", NULL};
	run a, b;
	run_seed(&a, nothing);
	run_seed(&b, dots);
	int rec_a = 0, rec_gemm_b = 0, rec_b = 0;
	for (int32_t i = 0; i < a.prog->n_ops; i++)
		rec_a += a.prog->ops[i].phase == RM_PPHASE_RECOMPUTE;
	for (int32_t i = 0; i < b.prog->n_ops; i++) {
		rec_b += b.prog->ops[i].phase == RM_PPHASE_RECOMPUTE;
		rec_gemm_b += b.prog->ops[i].phase == RM_PPHASE_RECOMPUTE && b.prog->ops[i].cost.kind == RM_COST_GEMM;
	}
	cr_assert_eq(rec_a, 32 * a.rep.plan.n_recompute_ops);
	cr_assert_eq(a.rep.plan.n_recompute_ops, 14, "16 forward ops of a Llama layer minus the down projection and the last add");
	cr_assert_eq(rec_gemm_b, 0);
	cr_assert_gt(rec_b, 0);
	cr_assert_gt(a.m.recompute, b.m.recompute);
	run_finish(&a);
	run_finish(&b);
}

Test(schedule, ideal_mode_and_unrolled_layers)
{
	const char *ideal[] = {"scheduler.mode=ideal", "training.micro_batch=6", NULL};
	const char *unrolled[] = {"remat.scan=false", NOTHING, NULL};
	run a, b;
	run_seed(&a, ideal);
	run_seed(&b, unrolled);
	cr_assert_eq(a.rep.sync, 0, "the ideal runtime never runs a collective on the compute stream");
	cr_assert_gt(b.rep.async, 0);
	cr_assert(b.m.fits);
	run_finish(&a);
	run_finish(&b);
}

Test(schedule, same_scenario_same_program)
{
	run a, b;
	run_seed(&a, NULL);
	run_seed(&b, NULL);
	char *ta = NULL, *tb = NULL;
	size_t la = 0, lb = 0;
	FILE *fa = open_memstream(&ta, &la), *fb = open_memstream(&tb, &lb);
	cr_assert(rm_program_write(a.prog, fa, NULL));
	cr_assert(rm_program_write(b.prog, fb, NULL));
	fclose(fa);
	fclose(fb);
	cr_assert_eq(la, lb);
	cr_assert_eq(memcmp(ta, tb, la), 0);
	cr_assert_eq(a.m.step_time, b.m.step_time);
	free(ta);
	free(tb);
	run_finish(&a);
	run_finish(&b);
}

/* ---- bad scenarios ---- */


Test(scenario, bad_files_point_at_the_key)
{
	expect_scenario_error("model: llama-2-7b\ntraining:\n  micro_bach: 4\n", RM_UNKNOWN_KEY, 3, 3,
			      "unknown key \"training.micro_bach\"");
	expect_scenario_error("model: llama-2-7b\ntraining:\n  micro_batch: four\n", RM_INVALID, 3, 16,
			      "training.micro_batch: expected an integer");
	expect_scenario_error("model: llama-2-7b\ntraining:\n  micro_batch: 99999999999999999999\n", RM_RANGE, 3, 16,
			      "training.micro_batch: 99999999999999999999 is outside [1, 65536]");
	expect_scenario_error("model: llama-2-7b\ntraining: [1, 2\n", RM_PARSE, 3, 1, "without a closing bracket");
	expect_scenario_error("hardware: h100-sxm\n", RM_MISSING, 1, 1, "missing required key \"model\"");
	expect_scenario_error("model: llama-2-7b\nremat:\n  names: [dot_mlp_outt]\n", RM_INVALID, 3, 11,
			      "unknown checkpoint name \"dot_mlp_outt\"");
	expect_scenario_error("model: llama-2-7b\nremat:\n  policy: save_only_these_name\n", RM_INVALID, 3, 11,
			      "unknown remat policy");
	expect_scenario_error("model: llama-2-7b\nxla_flags: --xla_gpu_memory_limit_slop_factor=lots\n", RM_INVALID, 2, 12,
			      "expects an integer");
	expect_scenario_error("model: llama-3-9b\n", RM_NOT_FOUND, 1, 8, "unknown model 'llama-3-9b'");
	expect_scenario_error("model: llama-2-7b\nhardware: b200\n", RM_NOT_FOUND, 2, 11, "unknown hardware profile");
	expect_scenario_error("model: llama-2-7b\nparallelism:\n  fsdp: 16\n", RM_INVALID, 3, 9, "must divide the cluster's 8 GPUs");
	expect_scenario_error("model: llama-2-7b\nscheduler:\n  mode: fast\n", RM_INVALID, 3, 9, "expected xla, ideal, fsdp2 or megatron");
	/* JAX's client settings */
	expect_scenario_error("model: llama-2-7b\nxla:\n  allocator: cuda\n", RM_INVALID, 3, 14, "expected bfc");
	expect_scenario_error("model: llama-2-7b\nxla:\n  mem_fraction: 1.5\n", RM_RANGE, 3, 17, "1.5 is outside (0, 1]");
	expect_scenario_error("model: llama-2-7b\nxla:\n  mem_fraction: 0\n", RM_RANGE, 3, 17, "above 0");
	expect_scenario_error("model: llama-2-7b\nxla:\n  allocator: platform\n  mem_fraction: 0.9\n", RM_INVALID, 4, 17,
			      "takes no fraction");
	expect_scenario_error("model: llama-2-7b\nxla:\n  donate: maybe\n", RM_INVALID, 3, 11, "xla.donate");
	/* an escaped NUL would cut the C string short: "0.4.30\0junk" must not read as 0.4.30 */
	expect_scenario_error("model: llama-2-7b\nxla:\n  version: \"0.4.30\\0junk\"\n", RM_PARSE, 3, 12, "NUL character");
	expect_scenario_error("model: \"llama-2-7b\\u0000x\"\n", RM_PARSE, 1, 8, "NUL character");
	/* a second document would be ignored: refused where it starts */
	expect_scenario_error("model: llama-2-7b\n---\nmodel: gpt-2\n", RM_PARSE, 3, 1, "a second YAML document");
	/* a long --set value is shortened in the message so that the reason still shows; an
	 * unknown key lists its section's keys */
	{
		rm_scenario sc;
		rm_error err;
		rm_scenario_init(&sc);
		char set[2100];
		memset(set, 'x', sizeof(set) - 1);
		set[sizeof(set) - 1] = '\0';
		memcpy(set, "xla.donate=", 11);
		cr_assert_eq(rm_scenario_set(&sc, set, &err), RM_INVALID);
		cr_assert(strstr(err.msg, "...: xla.donate: expected true or false"), "%s", err.msg);
		cr_assert_eq(rm_scenario_set(&sc, "xla.bogus=1", &err), RM_UNKNOWN_KEY);
		cr_assert(strstr(err.msg, "xla.version, xla.mem_fraction, xla.allocator, xla.donate"), "%s", err.msg);
	}
}

/*
 * libfyaml 0.7.12 loops for ever on a YAML directive line followed by malformed UTF-8 (the two
 * bytes "%\xd0"): scenarios and --set values refuse such directive lines before libfyaml sees
 * them, at the offending byte.
 */
Test(scenario, directive_line_is_refused_not_scanned, .timeout = 5)
{
	expect_scenario_error("%\xd0", RM_PARSE, 1, 2, "directive line");
	expect_scenario_error("model: llama-2-7b\n%\xd0", RM_PARSE, 2, 2, "directive line");
	expect_scenario_error("model: llama-2-7b\r%\xd0\n", RM_PARSE, 2, 2, "directive line");
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	/* as a --set value the byte is refused as text before any parser reads it */
	cr_assert_eq(rm_scenario_set(&sc, "training.micro_batch=%\xd0", &err), RM_PARSE);
	cr_assert(strstr(err.msg, "--set training.micro_batch: malformed UTF-8"), "%s", err.msg);
	cr_assert_eq(rm_scenario_set(&sc, "remat.names=[a,\n%\xd0]", &err), RM_PARSE);
}

/*
 * A policy error points into the expression: the scalar's column plus the column inside the
 * expression when the scalar maps onto the file one to one (plain, or quoted without escapes),
 * else the scalar and the column inside the expression in words.
 */
Test(scenario, policy_errors_point_into_the_expression)
{
	/* "  policy: " is 10 characters, "save_only_these_names(" 22: the name is at 3:(11 + 22) */
	expect_scenario_error("model: llama-2-7b\nremat:\n  policy: save_only_these_names(dot_mlp_outt)\n", RM_INVALID, 3,
			      33, "remat.policy: policy: expected checkpoint names as strings");
	/* quoted: the text starts after the quote at column 12, its quote ' at 12 + 22 */
	expect_scenario_error("model: llama-2-7b\nremat:\n  policy: \"save_only_these_names('dot_mlp_outt')\"\n",
			      RM_INVALID, 3, 34, "remat.policy: unknown checkpoint name \"dot_mlp_outt\"");
	/* an escape (\x27 for ') shifts the text: the scalar's quote, and the column in words */
	expect_scenario_error("model: llama-2-7b\nremat:\n  policy: \"save_only_these_names(\\x27dot_mlp_outt')\"\n",
			      RM_INVALID, 3, 11, "remat.policy: at column 23 of the policy: unknown checkpoint name");
	/* search.policies items: "  policies: [nothing_saveable, " is 31 characters, then the quote;
	 * the text starts at 33 and the unknown name after "maxtext:" (8) at 41 */
	expect_scenario_error("model: llama-2-7b\nsearch:\n  policies: [nothing_saveable, \"maxtext:minimall\"]\n",
			      RM_INVALID, 3, 41, "search.policies[1]: unknown MaxText remat_policy 'minimall'");
	/* --set names the override and the column */
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_set(&sc, "remat.policy=save_only_these_names(", &err), RM_PARSE);
	cr_assert(strstr(err.msg, "--set remat.policy=save_only_these_names(: remat.policy: at column 23 of the policy:"),
		  "%s", err.msg);
	cr_assert_str_eq(sc.policy, "nothing_saveable", "a refused policy is not stored");
	cr_assert_eq(rm_scenario_set(&sc, "search.policies=[dots_saveable, torch:ful]", &err), RM_INVALID);
	cr_assert(strstr(err.msg, "--set search.policies=[dots_saveable, torch:ful]: search.policies[1]: at column 7"),
		  "%s", err.msg);
}

/* Errors the workload finds in the training section point at the key the message names. */
Test(scenario, training_errors_point_at_the_named_key)
{
	/* "  seq_len: " is 11 characters: the value at 3:12 */
	expect_scenario_error("model: gpt-2\ntraining:\n  seq_len: 4096\n", RM_INVALID, 3, 12,
			      "training.seq_len: seq_len 4096 exceeds the 1024 learned positions of gpt-2");
	/* "training: {grad_accum: 512, micro_batch: " is 41 characters: micro_batch's value at 3:42 */
	expect_scenario_error("model: gpt-2\ncluster: {nodes: 1}\ntraining: {grad_accum: 512, micro_batch: 65536}\n",
			      RM_RANGE, 3, 42, "training.micro_batch: seq_len 1024 x micro_batch 65536");
}

/* Mappings and lists are pointed at by their '{', '[' or '-' (an empty one had no position). */
Test(scenario, collections_point_at_their_start)
{
	/* "  names: " is 9 characters: the '{' at 3:10 */
	expect_scenario_error("model: gpt-2\nremat:\n  names: {}\n", RM_INVALID, 3, 10, "remat.names: expected a list");
	/* "training: " is 10: the '[' at 2:11, not the 1 at 2:12 */
	expect_scenario_error("model: gpt-2\ntraining: [1, 2]\n", RM_INVALID, 2, 11, "training: expected a mapping");
	expect_scenario_error("model: gpt-2\ntraining:\n  - 1\n", RM_INVALID, 3, 3, "training: expected a mapping");
}

/* XLA_FLAGS errors land on the offending flag, in a one-line string and in a list. */
Test(scenario, flag_errors_point_at_the_flag)
{
	/* "xla_flags: " is 11 characters and "--xla_gpu_enable_pipelined_all_gather=true " 43: 2:(12 + 43) */
	expect_scenario_error("model: llama-2-7b\nxla_flags: --xla_gpu_enable_pipelined_all_gather=true "
			      "--xla_gpu_memory_limit_slop_factor=lots\n",
			      RM_INVALID, 2, 55, "--xla_gpu_memory_limit_slop_factor expects an integer");
	/* list items: "  - " puts the second item's flag at 4:5 */
	expect_scenario_error("model: llama-2-7b\nxla_flags:\n  - --xla_gpu_enable_pipelined_all_gather=true\n"
			      "  - --xla_gpu_memory_limit_slop_factor=lots\n",
			      RM_INVALID, 4, 5, "xla_flags[1]: XLA_FLAGS: --xla_gpu_memory_limit_slop_factor expects an integer");
}

/* A syntax error libfyaml gives no diagnostic for (duplicate empty keys) still gets a position. */
Test(scenario, undiagnosed_syntax_error_has_a_position)
{
	/* the second empty key is line 3; columns count from 1 */
	expect_scenario_error("model: llama-2-7b\n:\n:\n", RM_PARSE, 3, 1, "duplicate empty key");
	expect_scenario_error("model: llama-2-7b\ntraining:\n  seq_len: 8\n  :\n  :\n", RM_PARSE, 5, 3,
			      "duplicate empty key");
	/* malformed UTF-8 in a comment before the content: libfyaml fails without a word;
	 * "# caf" is 5 characters */
	expect_scenario_error("# caf\xc3 x\nmodel: llama-2-7b\n", RM_PARSE, 1, 6, "malformed UTF-8");
	/* an empty key gets the position of its ':' */
	expect_scenario_error("model: llama-2-7b\n: 4\n", RM_PARSE, 2, 1, "a key is empty");
	/* an empty scalar with an anchor is placed at its '&': "  names: [dot_mlp_out, " is 23 */
	expect_scenario_error("model: llama-2-7b\nremat:\n  names: [dot_mlp_out, &a]\n", RM_INVALID, 3, 24,
			      "unknown checkpoint name \"\"");
	/* libfyaml's own message and position when it has one */
	expect_scenario_error("model: llama-2-7b\ntraining: {seq_len: 4096\n", RM_PARSE, 3, 1,
			      "invalid YAML: missing comma in flow mapping");
}

Test(scenario, set_overrides_and_their_errors)
{
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_set(&sc, "training.micro_batch=4", &err), RM_OK);
	cr_assert_eq(sc.micro_batch, 4);
	cr_assert_eq(rm_scenario_set(&sc, "remat.names=[query_proj, mlpwo]", &err), RM_OK);
	cr_assert_eq(sc.n_names, 2);
	cr_assert_eq(rm_scenario_set(&sc, "search.micro_batches=[1, 2, 4]", &err), RM_OK);
	cr_assert_eq(sc.search_micro_batches[2], 4);
	cr_assert_eq(rm_scenario_set(&sc, "training.micro_batch=0", &err), RM_RANGE);
	cr_assert(strstr(err.msg, "--set training.micro_batch=0"), "%s", err.msg);
	cr_assert_eq(rm_scenario_set(&sc, "training.microbatch=4", &err), RM_UNKNOWN_KEY);
	cr_assert_eq(rm_scenario_set(&sc, "novalue", &err), RM_USAGE);
	cr_assert_eq(rm_scenario_set(&sc, "remat.names=[a, b", &err), RM_PARSE);
}

Test(schedule, gradient_accumulation_regathers_without_holding_memory)
{
	const char *one[] = {NULL};
	const char *two[] = {"training.grad_accum=2", NULL};
	run a, b;
	run_seed(&a, one);
	run_seed(&b, two);
	/* every micro-batch re-gathers and reduces: twice the collectives, twice the tokens */
	cr_assert_eq(b.rep.collectives, 2 * a.rep.collectives);
	cr_assert_eq(b.prog->tokens, 2 * a.prog->tokens);
	/* the first micro-batch's activations are gone before the second starts: the peak grows
	 * by less than 5% (the persistent gradient shards are the same) */
	cr_assert_lt(b.m.peak_memory_bytes, a.m.peak_memory_bytes * 105 / 100);
	cr_assert_gt(b.m.step_time, 19 * a.m.step_time / 10);
	run_finish(&a);
	run_finish(&b);
}

Test(schedule, unrolled_layers_track_their_own_memory)
{
	const char *sets[] = {"remat.scan=false", NULL};
	run r;
	run_seed(&r, sets);
	/* no stacks through loops: the tracked memory stays under the limit at b=1, though over its
	 * half (the compute order XLA's scheduler gives the unrolled backward keeps several layers'
	 * recomputed activations and gradients live: 25.6 GiB of the 46.3 GiB limit), so no
	 * collective goes to the compute stream for memory */
	cr_assert_lt(r.rep.tracked_peak_bytes, r.rep.memory_limit_bytes);
	cr_assert_gt(r.rep.tracked_peak_bytes, r.rep.memory_limit_bytes / 2);
	cr_assert_gt(r.rep.lhs_moved_slots, 0);
	cr_assert_eq(layer_memory_sync(r.prog), 0);
	run_finish(&r);
}

/* A cost model whose collectives take 20x as long as the resolved run's (a slower fabric). */
typedef struct slow_coll {
	rm_cost_model base;
	const rm_cost_model *inner;
} slow_coll;

static double slow_time(const rm_cost_model *self, const rm_cost_op *op, const rm_hw_profile *hw)
{
	const slow_coll *s = self->data;
	double t = s->inner->op_time_s(s->inner, op, hw);
	return op->kind == RM_COST_COLLECTIVE ? 20 * t : t;
}

static int slow_sms(const rm_cost_model *self, const rm_cost_op *op, const rm_hw_profile *hw)
{
	const slow_coll *s = self->data;
	return s->inner->sms_held(s->inner, op, hw);
}

/* The program of the seed with the given cost model as the run's, written as JSON. */
static char *seed_program(const char *cost_mode, const rm_cost_model *cost, size_t *len)
{
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_load(seed_path(), &sc, &err), RM_OK, "%s", err.msg);
	char set[64];
	snprintf(set, sizeof(set), "scheduler.cost_model=%s", cost_mode);
	cr_assert_eq(rm_scenario_set(&sc, set, &err), RM_OK, "%s", err.msg);
	rm_scenario_resolved res;
	cr_assert_eq(rm_scenario_resolve(&sc, NULL, &res, &err), RM_OK, "%s", err.msg);
	cr_assert_not_null(res.sched.cost, "the resolved run carries its cost model");
	slow_coll slow = {.base = {.name = "slow", .op_time_s = slow_time, .sms_held = slow_sms}, .inner = res.sched.cost};
	slow.base.data = &slow;
	if (cost)
		res.sched.cost = &slow.base;
	rm_schedule_report rep;
	rm_program *prog = rm_schedule_build(&res.sched, &rep, &err);
	cr_assert_not_null(prog, "%s", err.msg);
	char *text = NULL;
	FILE *f = open_memstream(&text, len);
	cr_assert(rm_program_write(prog, f, &err), "%s", err.msg);
	fclose(f);
	rm_program_destroy(prog);
	rm_schedule_report_finish(&rep);
	rm_scenario_resolved_finish(&res);
	return text;
}

Test(schedule, remora_costs_price_collectives_with_the_runs_cost_model)
{
	/* scheduler.cost_model: remora: the latency-hiding scheduler's collective latencies come from
	 * the run's cost model (calibrated when the hardware is), so a slower collective model moves
	 * the windows; with XLA's default cost units the schedule does not depend on it */
	size_t la, lb, lc, ld;
	char *a = seed_program("remora", NULL, &la), *b = seed_program("remora", (const rm_cost_model *)1, &lb);
	cr_assert(la != lb || memcmp(a, b, la) != 0, "remora costs ignored the run's collective model");
	char *c = seed_program("xla_default", NULL, &lc), *d = seed_program("xla_default", (const rm_cost_model *)1, &ld);
	cr_assert(lc == ld && memcmp(c, d, lc) == 0, "XLA's default units do not read the cost model");
	free(a);
	free(b);
	free(c);
	free(d);
}

static double step_of(const char *text, double attn_s[2])
{
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_parse(text, strlen(text), "test.yaml", &sc, &err), RM_OK, "%s", err.msg);
	run r;
	cr_assert_eq(rm_scenario_resolve(&sc, NULL, &r.res, &err), RM_OK, "%s", err.msg);
	r.prog = rm_schedule_build(&r.res.sched, &r.rep, &err);
	cr_assert_not_null(r.prog, "%s", err.msg);
	rm_sim_options opt = {.hw_queues = r.res.hw_queues, .cost = r.res.sched.cost};
	rm_sim *s = rm_sim_create(r.prog, &r.res.hw, &opt, &err);
	cr_assert_not_null(s, "%s", err.msg);
	cr_assert_eq(rm_sim_run(s, &err), RM_OK, "%s", err.msg);
	double t = rm_time_to_s(rm_sim_get_metrics(s)->step_time);
	const rm_graph *g = &r.res.wl->layer;
	for (int i = 0; i < g->n_ops; i++)
		if (g->ops[i].kind == RM_OP_ATTENTION) {
			rm_attention_cost a = {.shape = g->ops[i].attention, .backward = g->ops[i].phase != RM_PHASE_FWD};
			attn_s[a.backward] = rm_cost_attention_s(&a, &r.res.hw, &r.res.cost.kernels);
		}
	rm_sim_destroy(s);
	run_finish(&r);
	return t;
}

Test(schedule, sliding_window_shortens_the_step)
{
	/* Mistral-7B at 32k on 8x H100: the window (4096) is priced as the attention that runs */
	char with[1024], without[512];
	snprintf(with, sizeof(with), "model: %s/configs/mistral-window.json\ntraining: {seq_len: 32768}\n",
		 getenv("REMORA_TEST_DATA"));
	snprintf(without, sizeof(without), "model: mistral-7b\ntraining: {seq_len: 32768}\n");
	double w[2] = {0, 0}, f[2] = {0, 0};
	double tw = step_of(with, w), tf = step_of(without, f);
	/* forward attention per layer: full causal 8.80e12 FLOPs vs 2.06e12 with the window, and the
	 * windowed kernel runs at cuDNN's 4k rate (591 TFLOP/s) instead of its 32k rate (688) */
	double rate_ratio = rm_cost_attention_tflops(RM_ATTN_CUDNN, false, true, 128, 32768) /
			    rm_cost_attention_tflops(RM_ATTN_CUDNN, false, true, 128, 4096);
	cr_assert_float_eq(rate_ratio, 688.0 / 591.0, 1e-12);
	cr_assert_float_eq(f[0] / w[0], (32768.0 * 32768.0 / 2.0) / 125831168.0 / rate_ratio, 0.01, "%f", f[0] / w[0]);
	/* nothing_saveable recomputes the forward: fwd + recompute + backward per layer, 32 layers,
	 * all on the compute stream, collectives hidden */
	double expect = 32 * (2 * (f[0] - w[0]) + (f[1] - w[1]));
	cr_assert_float_eq(tf - tw, expect, 0.05 * expect, "with %.3f s, without %.3f s, saved %.3f s, expected %.3f s", tw,
			   tf, tf - tw, expect);
}

Test(schedule, fits_is_judged_against_usable_memory)
{
	run r;
	run_seed(&r, NULL);
	/* run_seed simulates without the headroom: the same peak against the budget */
	int64_t peak = r.m.peak_memory_bytes;
	rm_memory_budget b = r.res.memory;
	cr_assert_eq(b.usable_bytes, b.hbm_bytes - b.headroom_bytes);
	cr_assert_lt(peak, b.usable_bytes);
	run_finish(&r);
	/* a headroom that leaves 1 MiB less than the peak: does not fit, and the engine says so */
	char set[96];
	snprintf(set, sizeof(set), "memory_headroom_gib=%.9f", (double)(b.hbm_bytes - peak + (1 << 20)) / (double)RM_GiB);
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_load(seed_path(), &sc, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(rm_scenario_set(&sc, set, &err), RM_OK, "%s", err.msg);
	rm_scenario_resolved res;
	cr_assert_eq(rm_scenario_resolve(&sc, NULL, &res, &err), RM_OK, "%s", err.msg);
	rm_schedule_report rep;
	rm_program *prog = rm_schedule_build(&res.sched, &rep, &err);
	cr_assert_not_null(prog);
	rm_sim_options opt = {.hw_queues = res.hw_queues, .cost = res.sched.cost,
			      .memory_headroom_bytes = res.memory.headroom_bytes};
	rm_sim *s = rm_sim_create(prog, &res.hw, &opt, &err);
	cr_assert_eq(rm_sim_run(s, &err), RM_OK, "%s", err.msg);
	const rm_sim_metrics *m = rm_sim_get_metrics(s);
	cr_assert_eq(m->peak_memory_bytes, peak);
	cr_assert_not(m->fits);
	cr_assert_eq(m->memory_usable_bytes, res.memory.usable_bytes);
	cr_assert_geq(m->first_oom_op, 0);
	rm_sim_destroy(s);
	rm_program_destroy(prog);
	rm_schedule_report_finish(&rep);
	rm_scenario_resolved_finish(&res);
	/* out of range: negative at the key, not below HBM when resolved */
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_load(seed_path(), &sc, &err), RM_OK, "%s", err.msg);
	cr_assert_neq(rm_scenario_set(&sc, "memory_headroom_gib=-1", &err), RM_OK);
	cr_assert(strstr(err.msg, "memory_headroom_gib"), "%s", err.msg);
	cr_assert_eq(rm_scenario_set(&sc, "memory_headroom_gib=80", &err), RM_OK, "%s", err.msg);
	cr_assert_eq(rm_scenario_resolve(&sc, NULL, &res, &err), RM_RANGE);
	cr_assert(strstr(err.msg, "not below the 79.65 GiB of HBM"), "%s", err.msg);
}

Test(schedule, layer_passes_per_step_are_bounded)
{
	/* the program holds layers x grad_accum layer passes: 4096 layers x 8 = 32,768 is refused
	 * (bound 16,384) with the key to change; x 4 is fine */
	char dir[] = "/tmp/remora-deep-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char cfg[128];
	snprintf(cfg, sizeof(cfg), "%s/config.json", dir);
	FILE *f = fopen(cfg, "w");
	cr_assert_not_null(f);
	fputs("{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"vocab_size\": 256,"
	      " \"hidden_size\": 64, \"intermediate_size\": 128, \"num_hidden_layers\": 4096,"
	      " \"num_attention_heads\": 4, \"max_position_embeddings\": 128}",
	      f);
	fclose(f);
	const int accum[] = {4, 8};
	for (int i = 0; i < 2; i++) {
		char text[256];
		snprintf(text, sizeof(text), "model: %s\ntraining: {seq_len: 128, grad_accum: %d}\n", cfg, accum[i]);
		rm_scenario sc;
		rm_error err;
		rm_error_clear(&err);
		rm_scenario_init(&sc);
		cr_assert_eq(rm_scenario_parse(text, strlen(text), "t.yaml", &sc, &err), RM_OK, "%s", err.msg);
		rm_scenario_resolved res;
		rm_status st = rm_scenario_resolve(&sc, NULL, &res, &err);
		if (i == 0) {
			cr_assert_eq(st, RM_OK, "%s", err.msg);
			rm_scenario_resolved_finish(&res);
		} else {
			cr_assert_eq(st, RM_RANGE);
			cr_assert(strstr(err.msg, "4096 layers x grad_accum 8 = 32768"), "%s", err.msg);
			cr_assert_eq(err.line, 2, "points at training.grad_accum: %d:%d", err.line, err.column);
		}
	}
	remove(cfg);
	rmdir(dir);
}

/* A number past its range is refused with the range, not converted: (int64_t)(1e10 * 2^30) is
 * undefined behaviour and used to become the default 80% of HBM. */
Test(scenario, device_memory_out_of_range_is_refused)
{
	expect_scenario_error("model: llama-2-7b\nscheduler:\n  device_memory_gib: 1e10\n", RM_RANGE, 3, 22,
			      "scheduler.device_memory_gib: 1e+10 is outside [0, 1048576]");
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_set(&sc, "scheduler.device_memory_gib=1e10", &err), RM_RANGE);
	cr_assert(strstr(err.msg, "outside [0, 1048576]"), "%s", err.msg);
	cr_assert_eq(rm_scenario_set(&sc, "scheduler.device_memory_gib=1048576", &err), RM_OK, "%s", err.msg);
	cr_assert_float_eq(sc.device_memory_gib, 1048576.0, 0.0);
}

/* libfyaml 0.7.12 loops for ever on a directive line holding invalid UTF-8 ("%\xd0", found by
 * tests/fuzz/fuzz_scenario; also after a YAML 1.1 NEL line break): refused before parsing. The
 * timeout turns the old hang into a failure. */
Test(scenario, directive_lines_with_invalid_utf8_are_refused, .timeout = 20)
{
	static const struct {
		const char *text;
		int line, column;
	} cases[] = {
		{"%\xd0", 1, 2},
		{"model: llama-2-7b\n%\xd0\n", 2, 2},
		{"%YA]M\x85L 1.2\n---\nmodel: llama-2-7b\n", 1, 6},
		{"%YAML 1.1\n---\nmodel: a\xc2\x85%\xd0\n", 3, 2},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		rm_scenario sc;
		rm_error err;
		rm_error_clear(&err);
		rm_scenario_init(&sc);
		cr_assert_eq(rm_scenario_parse(cases[i].text, strlen(cases[i].text), "bad.yaml", &sc, &err), RM_PARSE,
			     "case %zu", i);
		cr_assert_eq(err.line, cases[i].line, "case %zu: %s", i, err.msg);
		cr_assert_eq(err.column, cases[i].column, "case %zu: %s", i, err.msg);
		cr_assert(strstr(err.msg, "directive line"), "%s", err.msg);
	}
	/* a well-formed directive still parses */
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	const char *ok = "%YAML 1.2\n---\nmodel: llama-2-7b\n";
	cr_assert_eq(rm_scenario_parse(ok, strlen(ok), "ok.yaml", &sc, &err), RM_OK, "%s", err.msg);
	cr_assert_str_eq(sc.model, "llama-2-7b");
	cr_assert_eq(rm_scenario_set(&sc, "training.seq_len=%\xd0", &err), RM_PARSE);
	cr_assert(strstr(err.msg, "--set training.seq_len: malformed UTF-8"), "%s", err.msg);
}

/* Partial recompute (remat.recompute_num_layers, NeMo's block method): Llama-2-7B under fsdp2 with
 * nothing_saveable on the first 8 of 32 layers, everything kept on the other 24. The saved bytes
 * are 8 layer inputs plus 24 whole-layer residual sets, the recompute ops 8 layers' worth, and the
 * step sits between full recompute and none. */
static void partial_run(int n, run *r)
{
	char text[512];
	snprintf(text, sizeof(text),
		 "model: llama-2-7b\ntraining: {seq_len: 1024, grad_dtype: fp32}\nremat: {policy: nothing_saveable, "
		 "recompute_num_layers: %d}\nscheduler: {mode: fsdp2}\n",
		 n);
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_parse(text, strlen(text), "test.yaml", &sc, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(rm_scenario_resolve(&sc, NULL, &r->res, &err), RM_OK, "%s", err.msg);
	r->prog = rm_schedule_build(&r->res.sched, &r->rep, &err);
	cr_assert_not_null(r->prog, "%s", err.msg);
}

static int recompute_ops(const rm_program *p)
{
	int n = 0;
	for (int32_t i = 0; i < p->n_ops; i++)
		n += p->ops[i].phase == RM_PPHASE_RECOMPUTE;
	return n;
}

Test(schedule, recompute_num_layers_recomputes_only_the_first_layers)
{
	run all, part, none;
	partial_run(0, &all);
	partial_run(8, &part);
	partial_run(32, &none); /* >= layers: every layer follows the policy, as 0 does */
	rm_remat_policy *keep = rm_remat_policy_parse("everything_saveable", NULL);
	rm_remat_plan kp;
	cr_assert_eq(rm_remat_plan_build(&part.res.wl->layer, keep, &kp, NULL), RM_OK);
	const rm_remat_plan *np = &all.rep.plan;
	cr_assert_eq(part.rep.saved_bytes_step,
		     8 * (np->saved_bytes + np->carry_bytes) + 24 * (kp.saved_bytes + kp.carry_bytes));
	cr_assert_eq(all.rep.saved_bytes_step, 32 * (np->saved_bytes + np->carry_bytes));
	cr_assert_eq(none.rep.saved_bytes_step, all.rep.saved_bytes_step);
	cr_assert_eq(recompute_ops(all.prog), 32 * np->n_recompute_ops);
	cr_assert_eq(recompute_ops(part.prog), 8 * np->n_recompute_ops);
	rm_remat_plan_finish(&kp);
	rm_remat_policy_destroy(keep);
	run_finish(&all);
	run_finish(&part);
	run_finish(&none);
	/* under a scan every layer is one body: refused with the key's position */
	expect_scenario_error("model: llama-2-7b\nremat:\n  recompute_num_layers: 4\n", RM_INVALID, 3, 25,
			      "needs remat.scan: false");
}

/* FSDP2's own kernels: each gathered block is copied out of the all-gather buffer on the compute
 * stream (its bytes read and written), each block's gradients copied into the reduce-scatter
 * input and cast to fp32 on the reduce-scatter stream (bf16 read, fp32 written); the
 * reduce-scatters run on a stream of their own, the all-gathers on theirs. Llama-2-7B layer:
 * 202,383,360 parameters with the norms, 202,375,168 in its 7 matrices (one all-gather group). */
Test(schedule, fsdp2_copy_in_copy_out_and_streams)
{
	run r;
	partial_run(0, &r);
	const rm_program *p = r.prog;
	int copy_out = -1, copy_in = -1, rs = -1;
	for (int32_t i = 0; i < p->n_ops; i++) {
		if (strcmp(p->ops[i].name, "layer00/fwd/all-gather0/copy-out") == 0)
			copy_out = i;
		if (strcmp(p->ops[i].name, "layer00/bwd/reduce-scatter0/copy-in") == 0)
			copy_in = i;
		if (strcmp(p->ops[i].name, "layer00/bwd/reduce-scatter0") == 0)
			rs = i;
	}
	cr_assert(copy_out >= 0 && copy_in >= 0 && rs >= 0);
	int64_t w = 4 * 4096LL * 4096 + 3 * 4096LL * 11008;
	cr_assert_eq(p->ops[copy_out].cost.elementwise.bytes_read, 2 * w);
	cr_assert_eq(p->ops[copy_out].cost.elementwise.bytes_written, 2 * w);
	cr_assert_str_eq(p->streams[p->ops[copy_out].stream].name, "compute");
	cr_assert_eq(p->ops[copy_in].cost.elementwise.bytes_read, 2 * w);
	cr_assert_eq(p->ops[copy_in].cost.elementwise.bytes_written, 4 * w);
	cr_assert_str_eq(p->streams[p->ops[copy_in].stream].name, "reduce-scatter");
	cr_assert_eq(p->ops[rs].stream, p->ops[copy_in].stream);
	run_finish(&r);
}

/* The hardware mapping and the new training keys refuse what no GPU or runtime does, at the value. */
Test(scenario, hardware_mapping_and_runtime_keys_are_checked)
{
	expect_scenario_error("model: llama-2-7b\nhardware: {profile: h100-sxm, power_w: 50}\n", RM_RANGE, 2, 40,
			      "below the 100 W");
	expect_scenario_error("model: llama-2-7b\nhardware: {profile: h100-sxm, power_w: 800}\n", RM_RANGE, 2, 40,
			      "above the 700 W TDP");
	expect_scenario_error("model: llama-2-7b\nhardware: {profile: h100-sxm, hbm_gib: 1}\n", RM_RANGE, 2, 40,
			      "leave nothing for tensors");
	expect_scenario_error("model: llama-2-7b\ntraining: {loss: \"\"}\n", RM_INVALID, 2, 18, "empty value");
	expect_scenario_error("model: llama-2-7b\nhardware: {profile: nosuch.db:x}\n", RM_NOT_FOUND, 2, 21,
			      "'nosuch.db:x'");
	expect_scenario_error("model: llama-2-7b\nhardware: {profile: h100-sxm, watts: 500}\n", RM_UNKNOWN_KEY, 2, 31,
			      "unknown key \"hardware.watts\"");
	expect_scenario_error("model: llama-2-7b\nscheduler: {mode: ideal}\ntraining: {compile: false}\n", RM_INVALID, 3,
			      21, "scheduler.mode ideal always runs fused kernels");
	expect_scenario_error("model: llama-2-7b\ntraining: {gemm_dtype: bf16, fp8_all_gather: true}\n", RM_INVALID, 2,
			      46, "needs training.gemm_dtype: fp8");
	/* names are case-insensitive, as the other enumerations of a scenario */
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	const char *ok = "model: llama-2-7b\ntraining: {loss: Chunked, attention_kernel: FLASH3, gemm_dtype: FP8}\n";
	cr_assert_eq(rm_scenario_parse(ok, strlen(ok), "ok.yaml", &sc, &err), RM_OK, "%s", err.msg);
	rm_scenario_resolved r;
	cr_assert_eq(rm_scenario_resolve(&sc, NULL, &r, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(r.train.loss, RM_LOSS_CHUNKED);
	cr_assert_eq(r.cost.kernels.attention, RM_ATTN_FLASH3);
	cr_assert_eq(r.train.gemm_dtype, RM_DTYPE_FP8_E4M3);
	cr_assert(!r.cost.kernels.ce_collectives); /* scheduler.collective_engine: sm by default */
	rm_scenario_resolved_finish(&r);
}

/* scheduler.collective_engine: sm (NCCL's kernels) or copy_engine (all-gathers on the copy
 * engines, no SMs), case-insensitive; anything else is refused at the value. */
Test(schedule, collective_engine_key)
{
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	const char *ok = "model: llama-2-7b\nscheduler: {mode: fsdp2, collective_engine: Copy_Engine}\n";
	cr_assert_eq(rm_scenario_parse(ok, strlen(ok), "ok.yaml", &sc, &err), RM_OK, "%s", err.msg);
	rm_scenario_resolved r;
	cr_assert_eq(rm_scenario_resolve(&sc, NULL, &r, &err), RM_OK, "%s", err.msg);
	cr_assert(r.cost.kernels.ce_collectives);
	rm_scenario_resolved_finish(&r);
	expect_scenario_error("model: llama-2-7b\nscheduler: {collective_engine: nvls}\n", RM_INVALID, 2, 32,
			      "expected sm or copy_engine, got \"nvls\"");
}

/* FSDP2's reshard_after_forward: by default every block but the last (torchtitan keeps the last
 * one, its backward runs at once) is gathered again for the backward: 32 forward and 31 backward
 * all-gathers for Llama-2-7B; with reshard_after_forward false only the 32 forward ones, and the
 * backward GEMMs read the forward's gathered weights. Other modes refuse the key. */
static int all_gathers(const rm_program *p, const char *pass)
{
	int n = 0;
	char needle[32];
	snprintf(needle, sizeof(needle), "/%s/all-gather", pass);
	for (int32_t i = 0; i < p->n_ops; i++)
		n += strncmp(p->ops[i].name, "layer", 5) == 0 && strstr(p->ops[i].name, needle) &&
		     p->ops[i].cost.kind == RM_COST_COLLECTIVE;
	return n;
}

Test(schedule, fsdp2_reshard_after_forward)
{
	run r;
	partial_run(0, &r);
	cr_assert_eq(all_gathers(r.prog, "fwd"), 32);
	cr_assert_eq(all_gathers(r.prog, "bwd"), 31);
	run_finish(&r);
	char text[512];
	snprintf(text, sizeof(text),
		 "model: llama-2-7b\ntraining: {seq_len: 1024}\nremat: {policy: nothing_saveable}\n"
		 "scheduler: {mode: fsdp2, reshard_after_forward: false}\n");
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_parse(text, strlen(text), "test.yaml", &sc, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(rm_scenario_resolve(&sc, NULL, &r.res, &err), RM_OK, "%s", err.msg);
	r.prog = rm_schedule_build(&r.res.sched, &r.rep, &err);
	cr_assert_not_null(r.prog, "%s", err.msg);
	cr_assert_eq(all_gathers(r.prog, "fwd"), 32);
	cr_assert_eq(all_gathers(r.prog, "bwd"), 0);
	run_finish(&r);
	expect_scenario_error("model: llama-2-7b\nscheduler: {reshard_after_forward: false}\n", RM_INVALID, 2, 36,
			      "applies to scheduler.mode fsdp2");
}

/* Control characters are not YAML text; libfyaml 0.7.12 writes through a null pointer on
 * "? a: \t\0\0\0" and on "? a:  \t? a:  \t\x01", so the reader refuses them first, at their position. */
Test(scenario, nul_byte_is_refused_before_parsing)
{
	static const char text[] = "model: llama-2-7b\n? a: \t\0\0\0" "90\n";
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_parse(text, sizeof(text) - 1, "nul.yaml", &sc, &err), RM_PARSE);
	cr_assert_eq(err.line, 2);
	cr_assert_eq(err.column, 7);
	cr_assert(strstr(err.msg, "control character 0x00"), "%s", err.msg);
}

Test(scenario, control_character_is_refused_before_parsing)
{
	static const char text[] = "? a:  \t? a:  \t\x01";
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_parse(text, sizeof(text) - 1, "ctl.yaml", &sc, &err), RM_PARSE);
	cr_assert_eq(err.line, 1);
	cr_assert_eq(err.column, 15);
	cr_assert(strstr(err.msg, "control character 0x01"), "%s", err.msg);
	/* tabs too (libfyaml 0.7.12 also crashes on "a: b\nc d: \t?\tx"): spaces only */
	static const char tab[] = "model: llama-2-7b\nc d: \t?\tx\n";
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_parse(tab, sizeof(tab) - 1, "tab.yaml", &sc, &err), RM_PARSE);
	cr_assert_eq(err.line, 2);
	cr_assert_eq(err.column, 6);
	cr_assert(strstr(err.msg, "a tab"), "%s", err.msg);
}

/* At micro-batch 12 the seed's tracked peak is over HloRematerialization's limit and the pass
 * recomputes (docs/schedules.md); with --xla_disable_hlo_passes=rematerialization it does not run,
 * and the step is the schedule as the LHS left it. */
Test(schedule, disabled_rematerialization_pass_does_not_run)
{
	run on, off;
	static const char *const with[] = {"training.micro_batch=12", NULL};
	static const char *const without[] = {"training.micro_batch=12",
					      "xla_flags+=--xla_disable_hlo_passes=rematerialization", NULL};
	run_seed(&on, with);
	run_seed(&off, without);
	cr_assert(on.rep.remat_applied);
	cr_assert_not(off.rep.remat_applied);
	cr_assert_gt(off.m.peak_memory_bytes, on.m.peak_memory_bytes);
	run_finish(&on);
	run_finish(&off);
}
