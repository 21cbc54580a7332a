/*
 * Fusion of memory-bound ops (schedules/fusion.c): hand-built graphs for each rule, the Llama-2-7B
 * layer and head with bytes computed by hand, and the schedule program that uses it (fused-away
 * values take no memory, fewer launches, no higher peak).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remora/remat.h"
#include "remora/scenario.h"
#include "remora/schedule.h"
#include "remora/sim.h"
#include "remora/workload.h"
#include "schedules/fusion.h"

/* ---- hand-built graphs ---- */

typedef struct tiny {
	rm_value values[16];
	rm_op ops[16];
	rm_graph g;
} tiny;

static void tiny_init(tiny *t, int n_values)
{
	memset(t, 0, sizeof(*t));
	t->g.values = t->values;
	t->g.ops = t->ops;
	t->g.n_values = n_values;
	t->g.input = 0;
	for (int v = 0; v < n_values; v++) {
		snprintf(t->values[v].name, sizeof(t->values[v].name), "v%d", v);
		t->values[v].dtype = RM_DTYPE_BF16;
		t->values[v].rank = 2;
		t->values[v].shape[0] = 1;
		t->values[v].shape[1] = 50;
		t->values[v].bytes = 100;
		t->values[v].producer = -1;
	}
}

/* A forward op reading in[0..n_in) and writing value out (bytes from the values; extra read bytes
 * stand for weights). */
static void tiny_op(tiny *t, rm_op_kind kind, rm_membound_class cls, const int *in, int n_in, int out,
		    int64_t extra_read)
{
	rm_op *op = &t->ops[t->g.n_ops];
	snprintf(op->name, sizeof(op->name), "op%d", t->g.n_ops);
	op->kind = kind;
	op->mclass = cls;
	op->phase = RM_PHASE_FWD;
	op->fwd_op = -1;
	for (int i = 0; i < n_in; i++) {
		op->inputs[op->n_inputs++] = in[i];
		op->bytes_read += t->values[in[i]].bytes;
	}
	op->bytes_read += extra_read;
	op->outputs[op->n_outputs++] = out;
	op->bytes_written = t->values[out].bytes;
	op->flops = 10;
	t->values[out].producer = t->g.n_ops;
	t->g.n_ops++;
	t->g.n_fwd_ops = t->g.n_ops;
}

static const sched_fusion_opts xla_opts = {.horizontal = true, .gemm_epilogue = true};
static const sched_fusion_opts inductor_opts = {.horizontal = false, .gemm_epilogue = false};

Test(fusion, pointwise_producer_fuses_into_a_norm_and_its_value_is_not_written)
{
	tiny t;
	tiny_init(&t, 3);
	tiny_op(&t, RM_OP_ELEMENTWISE, RM_MB_POINTWISE, (int[]){0}, 1, 1, 0);
	tiny_op(&t, RM_OP_ELEMENTWISE, RM_MB_NORM, (int[]){1}, 1, 2, 10);
	sched_fusion f;
	sched_fusion_build(&t.g, NULL, NULL, xla_opts, &f);
	cr_assert_eq(f.unfused_kernels, 2);
	cr_assert_eq(f.kernels, 1);
	rm_elementwise_cost c0, c1;
	cr_assert(sched_fusion_cost(&f, 0, &c0));
	cr_assert(sched_fusion_cost(&f, 1, &c1));
	/* reads x (100) and the weight (10); writes only the norm's output (100) */
	cr_assert_eq(c0.bytes_read, 110);
	cr_assert_eq(c0.bytes_written, 100);
	cr_assert_eq(c0.kernels, 1);
	cr_assert_eq(c0.cls, RM_MB_NORM, "the kernel runs at its reduction's rate");
	cr_assert_float_eq(c0.flops, 20.0, 1e-12);
	cr_assert_eq(c1.bytes_read + c1.bytes_written, 0);
	cr_assert_eq(c1.kernels, 0);
	cr_assert_not(f.written[1]);
	cr_assert(f.written[2], "nothing inside reads the graph's output: it is written");
	sched_fusion_finish(&f);

	/* the remat plan saves the intermediate: multi-output fusion writes it */
	bool keep[3] = {false, true, false};
	sched_fusion_build(&t.g, NULL, keep, xla_opts, &f);
	cr_assert(sched_fusion_cost(&f, 0, &c0));
	cr_assert_eq(c0.bytes_written, 200);
	cr_assert_eq(c0.bytes_read, 110);
	cr_assert(f.written[1]);
	sched_fusion_finish(&f);
}

Test(fusion, two_reductions_stay_two_kernels_and_a_norm_takes_an_epilogue)
{
	tiny t;
	tiny_init(&t, 4);
	tiny_op(&t, RM_OP_ELEMENTWISE, RM_MB_NORM, (int[]){0}, 1, 1, 0);
	tiny_op(&t, RM_OP_ELEMENTWISE, RM_MB_SOFTMAX, (int[]){1}, 1, 2, 0);
	tiny_op(&t, RM_OP_ELEMENTWISE, RM_MB_POINTWISE, (int[]){2}, 1, 3, 0);
	sched_fusion f;
	sched_fusion_build(&t.g, NULL, NULL, xla_opts, &f);
	/* norm | softmax + its pointwise epilogue */
	cr_assert_eq(f.kernels, 2);
	cr_assert_eq(f.ops[0].fusion, 0);
	cr_assert_eq(f.ops[1].fusion, 1);
	cr_assert_eq(f.ops[2].fusion, 1);
	cr_assert(f.written[1], "read by the other kernel");
	cr_assert_not(f.written[2]);
	rm_elementwise_cost c;
	cr_assert(sched_fusion_cost(&f, 1, &c));
	cr_assert_eq(c.cls, RM_MB_SOFTMAX);
	cr_assert_eq(c.bytes_read, 100);
	cr_assert_eq(c.bytes_written, 100);
	sched_fusion_finish(&f);
}

Test(fusion, no_fusion_around_a_library_call_that_sits_between_producer_and_consumer)
{
	/* a = f(x); g = GEMM(a); y = a + g: one kernel for f and the add would need g before it
	 * starts, which needs a: a cycle, so XLA keeps two kernels */
	tiny t;
	tiny_init(&t, 4);
	tiny_op(&t, RM_OP_ELEMENTWISE, RM_MB_POINTWISE, (int[]){0}, 1, 1, 0);
	tiny_op(&t, RM_OP_GEMM, RM_MB_POINTWISE, (int[]){1}, 1, 2, 0);
	tiny_op(&t, RM_OP_ELEMENTWISE, RM_MB_POINTWISE, (int[]){1, 2}, 2, 3, 0);
	sched_fusion f;
	sched_fusion_build(&t.g, NULL, NULL, xla_opts, &f);
	cr_assert_eq(f.kernels, 2);
	cr_assert_eq(f.ops[1].fusion, -1, "a GEMM is no fusion's");
	rm_elementwise_cost c;
	cr_assert_not(sched_fusion_cost(&f, 1, &c));
	cr_assert(f.written[1]);
	cr_assert(sched_fusion_cost(&f, 2, &c));
	cr_assert_eq(c.bytes_read, 200);
	sched_fusion_finish(&f);
}

Test(fusion, siblings_feeding_one_consumer_fuse_horizontally_under_xla_only)
{
	/* q = GEMM(x); k = GEMM(x); rq = f(q); rk = f(k); o = attention(rq, rk) */
	tiny t;
	tiny_init(&t, 6);
	tiny_op(&t, RM_OP_GEMM, RM_MB_POINTWISE, (int[]){0}, 1, 1, 0);
	tiny_op(&t, RM_OP_GEMM, RM_MB_POINTWISE, (int[]){0}, 1, 2, 0);
	tiny_op(&t, RM_OP_ELEMENTWISE, RM_MB_POINTWISE, (int[]){1}, 1, 3, 0);
	tiny_op(&t, RM_OP_ELEMENTWISE, RM_MB_POINTWISE, (int[]){2}, 1, 4, 0);
	tiny_op(&t, RM_OP_ATTENTION, RM_MB_POINTWISE, (int[]){3, 4}, 2, 5, 0);
	sched_fusion f;
	sched_fusion_build(&t.g, NULL, NULL, xla_opts, &f);
	cr_assert_eq(f.kernels, 1);
	rm_elementwise_cost c;
	cr_assert(sched_fusion_cost(&f, 2, &c));
	cr_assert_eq(c.bytes_read, 200, "one launch, the same bytes");
	cr_assert_eq(c.bytes_written, 200);
	cr_assert(f.written[3] && f.written[4]);
	sched_fusion_finish(&f);

	sched_fusion_build(&t.g, NULL, NULL, (sched_fusion_opts){.horizontal = false}, &f);
	cr_assert_eq(f.kernels, 2, "Inductor: no horizontal fusion");
	sched_fusion_finish(&f);

	/* over 8192 x 8192 elements a kernel is not launch-bound: XLA leaves it alone */
	t.values[3].shape[0] = 8193;
	t.values[3].shape[1] = 8192;
	sched_fusion_build(&t.g, NULL, NULL, xla_opts, &f);
	cr_assert_eq(f.kernels, 2);
	sched_fusion_finish(&f);
}

/* g = GEMM(x); y = g + x with a backward that reads nothing (an add); z = f(g) optional */
static void gemm_add(tiny *t, bool second_user)
{
	tiny_init(t, 4);
	tiny_op(t, RM_OP_GEMM, RM_MB_POINTWISE, (int[]){0}, 1, 1, 0);
	tiny_op(t, RM_OP_ELEMENTWISE, RM_MB_POINTWISE, (int[]){1, 0}, 2, 2, 0);
	if (second_user)
		tiny_op(t, RM_OP_ELEMENTWISE, RM_MB_POINTWISE, (int[]){1}, 1, 3, 0);
	rm_op *b = &t->ops[t->g.n_ops];
	snprintf(b->name, sizeof(b->name), "op1.bwd");
	b->kind = RM_OP_ELEMENTWISE;
	b->phase = RM_PHASE_BWD_DGRAD;
	b->fwd_op = 1;
	b->bytes_read = 100;
	b->bytes_written = 200;
	t->g.n_ops++;
}

Test(fusion, an_add_of_a_gemms_only_use_runs_in_the_gemm_unless_its_output_is_needed)
{
	tiny t;
	gemm_add(&t, false);
	sched_fusion f;
	sched_fusion_build(&t.g, NULL, NULL, xla_opts, &f);
	cr_assert_eq(f.ops[1].epilogue_of, 0);
	rm_elementwise_cost c;
	cr_assert(sched_fusion_cost(&f, 1, &c));
	cr_assert_eq(c.kernels + c.bytes_read + c.bytes_written, 0);
	cr_assert_not(f.written[1], "cuBLAS writes the sum, not the product");
	cr_assert(f.written[2]);
	cr_assert_eq(f.kernels, 1, "the backward add is still a kernel");
	sched_fusion_finish(&f);

	/* saved for the backward: the GEMM's output must exist, the add stays a kernel */
	bool keep[4] = {false, true, false, false};
	sched_fusion_build(&t.g, NULL, keep, xla_opts, &f);
	cr_assert_eq(f.ops[1].epilogue_of, -1);
	cr_assert(sched_fusion_cost(&f, 1, &c));
	cr_assert_eq(c.kernels, 1);
	sched_fusion_finish(&f);

	/* Inductor leaves it alone */
	sched_fusion_build(&t.g, NULL, NULL, inductor_opts, &f);
	cr_assert_eq(f.ops[1].epilogue_of, -1);
	sched_fusion_finish(&f);

	/* a second user of the GEMM's output: not its only use */
	gemm_add(&t, true);
	sched_fusion_build(&t.g, NULL, NULL, xla_opts, &f);
	cr_assert_eq(f.ops[1].epilogue_of, -1);
	cr_assert(f.written[1]);
	sched_fusion_finish(&f);
}

Test(fusion, ops_that_do_not_run_in_the_pass_are_left_out)
{
	tiny t;
	tiny_init(&t, 3);
	tiny_op(&t, RM_OP_ELEMENTWISE, RM_MB_POINTWISE, (int[]){0}, 1, 1, 0);
	tiny_op(&t, RM_OP_ELEMENTWISE, RM_MB_POINTWISE, (int[]){1}, 1, 2, 0);
	bool run[2] = {false, true};
	sched_fusion f;
	sched_fusion_build(&t.g, run, NULL, xla_opts, &f);
	cr_assert_eq(f.unfused_kernels, 1);
	cr_assert_eq(f.kernels, 1);
	rm_elementwise_cost c;
	cr_assert_not(sched_fusion_cost(&f, 0, &c));
	cr_assert(sched_fusion_cost(&f, 1, &c));
	cr_assert_eq(c.bytes_read, 100, "the saved input is read from HBM");
	sched_fusion_finish(&f);
}

/* ---- the Llama-2-7B layer and head (b 1, s 4096, bf16) ---- */

#define FFN_BYTES INT64_C(90177536) /* 4096 x 11008 x 2 */
#define H_BYTES INT64_C(33554432)   /* 4096 x 4096 x 2 */

static rm_workload *llama(void)
{
	rm_model_config m;
	rm_error err;
	cr_assert_eq(rm_model_config_resolve("llama-2-7b", &m, &err), RM_OK, "%s", err.msg);
	rm_train_config t = rm_train_config_default(&m);
	cr_assert_eq(t.seq_len, 4096);
	cr_assert_eq(t.micro_batch, 1);
	rm_workload *wl = rm_workload_create(&m, &t, &err);
	cr_assert_not_null(wl, "%s", err.msg);
	return wl;
}

/* The layer fused under a policy: the plan's saved, carried and offloaded values are kept. */
static void fuse_layer(const rm_workload *wl, const char *policy, sched_fusion_opts opts, sched_fusion *f)
{
	rm_error err;
	rm_remat_policy *p = rm_remat_policy_parse(policy, &err);
	cr_assert_not_null(p, "%s", err.msg);
	rm_remat_plan plan;
	cr_assert_eq(rm_remat_plan_build(&wl->layer, p, &plan, &err), RM_OK, "%s", err.msg);
	bool keep[128] = {false};
	cr_assert_lt(wl->layer.n_values, 128);
	for (int v = 0; v < wl->layer.n_values; v++)
		keep[v] = plan.fate[v] == RM_FATE_SAVED || plan.fate[v] == RM_FATE_CARRY || plan.fate[v] == RM_FATE_OFFLOADED;
	sched_fusion_build(&wl->layer, NULL, keep, opts, f);
	rm_remat_plan_finish(&plan);
	rm_remat_policy_destroy(p);
}

static rm_elementwise_cost cost_of(const sched_fusion *f, const rm_graph *g, const char *op)
{
	int i = rm_graph_find_op(g, op);
	cr_assert_geq(i, 0, "%s", op);
	rm_elementwise_cost c;
	cr_assert(sched_fusion_cost(f, i, &c), "%s", op);
	return c;
}

Test(fusion, llama_swiglu_reads_gate_and_up_once_and_writes_only_the_hidden)
{
	rm_workload *wl = llama();
	const rm_graph *g = &wl->layer;
	sched_fusion f;
	fuse_layer(wl, "nothing_saveable", xla_opts, &f);
	int act = rm_graph_find_op(g, "mlp_activation"), hid = rm_graph_find_op(g, "mlp_hidden");
	cr_assert_eq(f.ops[hid].fusion, act);
	rm_elementwise_cost c = cost_of(&f, g, "mlp_activation");
	cr_assert_eq(c.bytes_read, 2 * FFN_BYTES, "gate and up: 2 x 90.18 MB");
	cr_assert_eq(c.bytes_written, FFN_BYTES, "the hidden only: 90.18 MB");
	cr_assert_eq(c.kernels, 1);
	rm_elementwise_cost h = cost_of(&f, g, "mlp_hidden");
	cr_assert_eq(h.kernels + h.bytes_read + h.bytes_written, 0);
	cr_assert_not(f.written[rm_graph_find_value(g, "mlp_activation")]);
	sched_fusion_finish(&f);

	/* saved for the backward: written as a second output of the same kernel */
	fuse_layer(wl, "everything_saveable", xla_opts, &f);
	c = cost_of(&f, g, "mlp_activation");
	cr_assert_eq(c.bytes_read, 2 * FFN_BYTES);
	cr_assert_eq(c.bytes_written, 2 * FFN_BYTES);
	cr_assert(f.written[rm_graph_find_value(g, "mlp_activation")]);
	sched_fusion_finish(&f);
	rm_workload_destroy(wl);
}

Test(fusion, llama_residual_add_is_the_norms_prologue_under_inductor)
{
	rm_workload *wl = llama();
	const rm_graph *g = &wl->layer;
	sched_fusion f;
	fuse_layer(wl, "nothing_saveable", inductor_opts, &f);
	/* attention_residual + pre_mlp_norm: reads x, the attention output and the 4096 bf16 weights;
	 * writes r1 (the final residual add reads it) and the normed value */
	rm_elementwise_cost c = cost_of(&f, g, "attention_residual");
	cr_assert_eq(c.bytes_read, 2 * H_BYTES + 4096 * 2);
	cr_assert_eq(c.bytes_written, 2 * H_BYTES);
	cr_assert_eq(c.cls, RM_MB_NORM);
	cr_assert(f.written[rm_graph_find_value(g, "attention_residual")]);
	/* no horizontal fusion: rotary q and k are two kernels */
	cr_assert_eq(cost_of(&f, g, "rotary_key").kernels, 1);
	/* 8 forward + 8 backward memory-bound ops; fused: norm | rotary q | rotary k | add+norm |
	 * silu*up | add, and add.bwd | (mul+silu).bwd | (norm+add).bwd | rotary k | rotary q | norm */
	cr_assert_eq(f.unfused_kernels, 16);
	cr_assert_eq(f.kernels, 12);
	sched_fusion_finish(&f);
	rm_workload_destroy(wl);
}

Test(fusion, llama_residual_adds_run_in_the_gemms_under_xla)
{
	rm_workload *wl = llama();
	const rm_graph *g = &wl->layer;
	sched_fusion f;
	fuse_layer(wl, "nothing_saveable", xla_opts, &f);
	/* x + attention_out: the out projection's only use, so cuBLAS adds x as its C operand; its own
	 * output is never written and the add costs nothing */
	rm_elementwise_cost c = cost_of(&f, g, "attention_residual");
	cr_assert_eq(c.kernels + c.bytes_read + c.bytes_written, 0);
	cr_assert_eq(f.ops[rm_graph_find_op(g, "attention_residual")].epilogue_of, rm_graph_find_op(g, "dot_attention_out"));
	cr_assert_not(f.written[rm_graph_find_value(g, "dot_attention_out")]);
	cr_assert(f.written[rm_graph_find_value(g, "attention_residual")]);
	cr_assert_eq(cost_of(&f, g, "layer_output").kernels, 0);
	/* the norm alone: r1 and its weights in, the normed value out */
	c = cost_of(&f, g, "pre_mlp_norm");
	cr_assert_eq(c.bytes_read, H_BYTES + 4096 * 2);
	cr_assert_eq(c.bytes_written, H_BYTES);
	cr_assert_eq(c.kernels, 1);
	/* rotary on q and k: one horizontal kernel, the same bytes */
	c = cost_of(&f, g, "rotary_query");
	cr_assert_eq(c.bytes_read, 2 * H_BYTES);
	cr_assert_eq(c.bytes_written, 2 * H_BYTES);
	cr_assert_eq(cost_of(&f, g, "rotary_key").kernels, 0);
	/* norm | rotary q+k | norm | silu*up, and the same 6 backward kernels */
	cr_assert_eq(f.unfused_kernels, 16);
	cr_assert_eq(f.kernels, 10);
	/* a multiply is no add: silu(gate) * up stays a loop fusion, not up's epilogue */
	cr_assert_eq(f.ops[rm_graph_find_op(g, "mlp_hidden")].epilogue_of, -1);
	sched_fusion_finish(&f);
	rm_workload_destroy(wl);
}

Test(fusion, llama_backward_pairs_pass_their_gradient_inside_the_kernel)
{
	rm_workload *wl = llama();
	const rm_graph *g = &wl->layer;
	sched_fusion f;
	fuse_layer(wl, "nothing_saveable", xla_opts, &f);
	/* mlp_hidden.bwd reads dY, act, up and writes d act, d up; mlp_activation.bwd reads d act and
	 * gate and writes d gate: fused, d act stays inside */
	rm_elementwise_cost c = cost_of(&f, g, "mlp_hidden.bwd");
	cr_assert_eq(c.bytes_read, 4 * FFN_BYTES);
	cr_assert_eq(c.bytes_written, 2 * FFN_BYTES);
	int hb = rm_graph_find_op(g, "mlp_hidden.bwd");
	cr_assert_eq(sched_fusion_grad_bytes(&f, g, hb, 2 * FFN_BYTES), FFN_BYTES, "d up only is live");
	/* pre_mlp_norm.bwd (dY, r1) + attention_residual.bwd: the norm's input gradient is the add's */
	c = cost_of(&f, g, "pre_mlp_norm.bwd");
	cr_assert_eq(c.bytes_read, 2 * H_BYTES);
	cr_assert_eq(c.bytes_written, 2 * H_BYTES);
	cr_assert_eq(c.cls, RM_MB_NORM_BWD);
	int nb = rm_graph_find_op(g, "pre_mlp_norm.bwd");
	cr_assert_eq(sched_fusion_grad_bytes(&f, g, nb, H_BYTES), 0);
	/* not adjacent to another memory-bound op: as built */
	c = cost_of(&f, g, "layer_output.bwd");
	cr_assert_eq(c.bytes_read, H_BYTES);
	cr_assert_eq(c.bytes_written, 2 * H_BYTES);
	sched_fusion_finish(&f);
	rm_workload_destroy(wl);
}

Test(fusion, llama_head_casts_and_cross_entropy_in_one_kernel_each_way)
{
	rm_workload *wl = llama();
	const rm_graph *g = &wl->head;
	bool keep[32] = {false};
	for (int v = 0; v < g->n_values; v++)
		keep[v] = rm_graph_value_is_residual(g, v);
	sched_fusion f;
	sched_fusion_build(g, NULL, keep, xla_opts, &f);
	const int64_t tv = INT64_C(4096) * 32000;
	/* logits (bf16) and the int32 labels in, the fp32 log-probabilities (saved) out; the fp32
	 * copy of the logits is never written */
	rm_elementwise_cost c = cost_of(&f, g, "logits_float");
	cr_assert_eq(c.bytes_read, 2 * tv + 4096 * 4);
	cr_assert_eq(c.bytes_written, 4 * tv);
	cr_assert_eq(c.cls, RM_MB_SOFTMAX);
	cr_assert_not(f.written[rm_graph_find_value(g, "logits_float")]);
	/* loss.bwd reads the one-hot gradient and the log-probabilities (2 x fp32), the cast back
	 * writes the bf16 logits' gradient; the fp32 gradient stays inside */
	c = cost_of(&f, g, "loss.bwd");
	cr_assert_eq(c.bytes_read, 8 * tv);
	cr_assert_eq(c.bytes_written, 2 * tv);
	int lb = rm_graph_find_op(g, "loss.bwd");
	cr_assert_eq(sched_fusion_grad_bytes(&f, g, lb, 8 * tv), 0);
	/* final_norm | cast+loss, and loss.bwd+cast | final_norm.bwd */
	cr_assert_eq(f.unfused_kernels, 6);
	cr_assert_eq(f.kernels, 4);
	sched_fusion_finish(&f);
	rm_workload_destroy(wl);
}

/* ---- in the schedule program ---- */

typedef struct run {
	rm_scenario_resolved res;
	rm_program *prog;
	rm_sim_metrics m;
} run;

static void run_seed(run *r, rm_fusion_mode mode, const char *const *sets)
{
	char path[1024];
	const char *dir = getenv("REMORA_DATA_DIR");
	cr_assert_not_null(dir);
	snprintf(path, sizeof(path), "%s/scenarios/seed-llama2-7b-fsdp8-h100.yaml", dir);
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_load(path, &sc, &err), RM_OK, "%s", err.msg);
	for (int i = 0; sets && sets[i]; i++)
		cr_assert_eq(rm_scenario_set(&sc, sets[i], &err), RM_OK, "%s: %s", sets[i], err.msg);
	cr_assert_eq(rm_scenario_resolve(&sc, NULL, &r->res, &err), RM_OK, "%s", err.msg);
	r->res.sched.fusion = mode;
	r->prog = rm_schedule_build(&r->res.sched, NULL, &err);
	cr_assert_not_null(r->prog, "%s", err.msg);
	rm_sim_options opt = {.hw_queues = r->res.hw_queues};
	rm_sim *s = rm_sim_create(r->prog, &r->res.hw, &opt, &err);
	cr_assert_not_null(s, "%s", err.msg);
	cr_assert_eq(rm_sim_run(s, &err), RM_OK, "%s", err.msg);
	r->m = *rm_sim_get_metrics(s);
	rm_sim_destroy(s);
}

static void run_finish(run *r)
{
	rm_program_destroy(r->prog);
	rm_scenario_resolved_finish(&r->res);
}

static int64_t tensor_bytes(const rm_program *p, const char *name)
{
	for (int32_t i = 0; i < p->n_tensors; i++)
		if (p->tensors[i].name && strcmp(p->tensors[i].name, name) == 0)
			return p->tensors[i].bytes;
	cr_assert_fail("no tensor %s", name);
	return -1;
}

/* Memory-bound kernels launched by the ops whose names start with prefix. */
static int launches(const rm_program *p, const char *prefix)
{
	int n = 0;
	for (int32_t i = 0; i < p->n_ops; i++) {
		const rm_program_op *op = &p->ops[i];
		/* graph ops only ("layer00/fwd/NAME"), not FSDP2's copies ("layer00/fwd/all-gather/...") */
		if (op->cost.kind != RM_COST_ELEMENTWISE || strncmp(op->name, prefix, strlen(prefix)) != 0 ||
		    strchr(op->name + strlen(prefix), '/'))
			continue;
		const rm_elementwise_cost *e = &op->cost.elementwise;
		n += e->kernels > 0 || e->bytes_read + e->bytes_written > 0 ? (e->kernels > 1 ? e->kernels : 1) : 0;
	}
	return n;
}

Test(fusion, the_xla_program_allocates_no_fused_away_value_and_peaks_no_higher)
{
	/* unrolled layers so that tensors carry their layer's name */
	const char *const sets[] = {"remat.scan=false", NULL};
	run fu, un;
	run_seed(&fu, RM_FUSION_AUTO, sets);
	run_seed(&un, RM_FUSION_OFF, sets);
	/* the seed's policy saves only the projections: the SiLU output is recomputed, so in the
	 * forward it lives only inside the silu*up kernel */
	cr_assert_eq(tensor_bytes(un.prog, "layer00/mlp_activation"), FFN_BYTES);
	cr_assert_eq(tensor_bytes(fu.prog, "layer00/mlp_activation"), 0);
	cr_assert_eq(tensor_bytes(fu.prog, "layer00/mlp_hidden"), FFN_BYTES);
	cr_assert_eq(launches(un.prog, "layer00/fwd/"), 8);
	/* norm | rotary q+k | norm | silu*up: both residual adds run in their GEMMs (the seed saves
	 * dot_mlp_out by name, but nothing in the backward reads it: unused, not kept) */
	cr_assert_eq(launches(fu.prog, "layer00/fwd/"), 4);
	cr_assert_eq(tensor_bytes(fu.prog, "layer00/dot_attention_out"), 0);
	cr_assert_eq(tensor_bytes(un.prog, "layer00/dot_attention_out"), H_BYTES);
	cr_assert_eq(launches(un.prog, "layer00/bwd/"), 8);
	cr_assert_eq(launches(fu.prog, "layer00/bwd/"), 6);
	cr_assert_leq(fu.m.peak_memory_bytes, un.m.peak_memory_bytes);
	cr_assert_lt(fu.m.step_time, un.m.step_time);
	run_finish(&fu);
	run_finish(&un);
}

Test(fusion, compiled_fsdp2_fuses_as_inductor_and_eager_never)
{
	const char *const compiled[] = {"scheduler.mode=fsdp2", "remat.scan=false", "training.compile=true", NULL};
	const char *const eager[] = {"scheduler.mode=fsdp2", "remat.scan=false", "training.compile=false", NULL};
	const char *const real[] = {"scheduler.mode=fsdp2", "remat.scan=false", "training.compile=true",
				    "training.rope=real", NULL};
	run a, on, e, re;
	run_seed(&a, RM_FUSION_OFF, compiled);
	run_seed(&on, RM_FUSION_AUTO, compiled);
	run_seed(&e, RM_FUSION_AUTO, eager);
	run_seed(&re, RM_FUSION_AUTO, real);
	cr_assert_eq(launches(a.prog, "layer00/fwd/"), 8);
	/* Inductor with a real rotary: the vertical pairs, no horizontal rotary kernel, the adds
	 * stay kernels */
	cr_assert_eq(launches(re.prog, "layer00/fwd/"), 6);
	/* the complex rotary (the default) is an ATen fallback: 3 kernels each for q and k instead
	 * of one */
	cr_assert_eq(launches(on.prog, "layer00/fwd/"), 6 - 2 + 3 + 3);
	cr_assert_eq(tensor_bytes(on.prog, "layer00/dot_attention_out"), H_BYTES);
	/* eager: every op as its decomposition (RMSNorm 8 kernels, rotary 3, the rest 1) */
	cr_assert_eq(launches(e.prog, "layer00/fwd/"), 8 + 3 + 3 + 1 + 8 + 1 + 1 + 1);
	/* the head stays eager-shaped under torch.compile: the fp32 logits are a tensor */
	cr_assert_eq(tensor_bytes(on.prog, "head/logits_float"), INT64_C(4096) * 32000 * 4);
	run_finish(&a);
	run_finish(&on);
	run_finish(&e);
	run_finish(&re);
}

static const rm_program_op *program_op(const rm_program *p, const char *name)
{
	for (int32_t i = 0; i < p->n_ops; i++)
		if (p->ops[i].name && strcmp(p->ops[i].name, name) == 0)
			return &p->ops[i];
	cr_assert_fail("no op %s", name);
	return NULL;
}

Test(fusion, the_complex_rotary_is_an_inductor_fallback_and_xla_fuses_it)
{
	const char *const compiled[] = {"scheduler.mode=fsdp2", "remat.scan=false", "training.compile=true", NULL};
	const char *const xla[] = {"remat.scan=false", NULL};
	const char *const real_eager[] = {"scheduler.mode=fsdp2", "remat.scan=false", "training.compile=false",
					  "training.rope=real", NULL};
	run on, x, re;
	run_seed(&on, RM_FUSION_AUTO, compiled);
	run_seed(&x, RM_FUSION_AUTO, xla);
	run_seed(&re, RM_FUSION_AUTO, real_eager);
	/* 4096 x 4096 query elements: x.float() 2 + 4, the complex multiply 4 + 4, type_as 4 + 2 =
	 * 20 bytes each, in 3 kernels at the eager per-kernel rate, forward and backward */
	const char *const names[] = {"layer00/fwd/rotary_query", "layer00/bwd/rotary_query.bwd"};
	for (int i = 0; i < 2; i++) {
		const rm_elementwise_cost *e = &program_op(on.prog, names[i])->cost.elementwise;
		cr_assert_eq(e->bytes_read + e->bytes_written, H_BYTES / 2 * 20, "%s", names[i]);
		cr_assert_eq(e->kernels, 3, "%s", names[i]);
		cr_assert(e->eager, "%s", names[i]);
	}
	/* the same rotary under XLA: one generated kernel with the key's (horizontal fusion), each
	 * read and written once in bf16 */
	const rm_elementwise_cost *xe = &program_op(x.prog, "layer00/fwd/rotary_query")->cost.elementwise;
	cr_assert_eq(xe->bytes_read + xe->bytes_written, 2 * H_BYTES * 2);
	cr_assert_leq(xe->kernels, 1);
	cr_assert_not(xe->eager);
	/* a real rotary in eager: four half-width multiplies (4 x 2), the subtract and the add (2 x
	 * 3), the cat (4): 18 bytes per element in 7 kernels */
	const rm_elementwise_cost *r = &program_op(re.prog, "layer00/fwd/rotary_query")->cost.elementwise;
	cr_assert_eq(r->bytes_read + r->bytes_written, H_BYTES / 2 * 18);
	cr_assert_eq(r->kernels, 7);
	run_finish(&on);
	run_finish(&x);
	run_finish(&re);
}
