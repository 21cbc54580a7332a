/*
 * The data-parallel family (docs/parallelism.md): HSDP replicas of the FSDP group, ZeRO stages
 * 1-3, data parallelism without FSDP, training.global_batch, and the parallelism keys remora
 * refuses by name. Every figure below is computed by hand from Llama-2-7B's shapes
 * (docs/reference/models.csv): 6,738,415,616 parameters; a layer holds 4 x 4096^2 (attention) +
 * 3 x 4096 x 11008 (MLP) = 202,375,168 matrix elements and 2 x 4096 = 8,192 norm weights; the
 * embedding and the untied head 32,000 x 4096 = 131,072,000 each; the final norm 4,096.
 */
#include <criterion/criterion.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remora/scenario.h"
#include "remora/schedule.h"
#include "remora/sim.h"
#include "remora/pipeline.h"
#include "remora/remat.h"
#include "remora/workload.h"
#include "scenario_run.h"

#define P7B 6738415616LL




/* Bytes (full buffers) of the collectives of a group size and kind; count in *n. */
static int64_t coll_bytes(const rm_program *p, int group, rm_coll kind, int *n)
{
	int64_t b = 0;
	*n = 0;
	for (int32_t i = 0; i < p->n_ops; i++) {
		const rm_program_op *op = &p->ops[i];
		if (op->cost.kind == RM_COST_COLLECTIVE && op->cost.collective.group_size == group &&
		    op->cost.collective.op == kind) {
			b += op->cost.collective.bytes;
			(*n)++;
		}
	}
	return b;
}

static const rm_program_op *op_named(const rm_program *p, const char *name)
{
	for (int32_t i = 0; i < p->n_ops; i++)
		if (strcmp(p->ops[i].name, name) == 0)
			return &p->ops[i];
	return NULL;
}

Test(parallel, zero_stages_shard_the_optimizer_over_all_data_parallel_gpus)
{
	rm_model_config m;
	rm_error err;
	cr_assert_eq(rm_model_config_resolve("llama-2-7b", &m, &err), RM_OK, "%s", err.msg);
	rm_train_config t = rm_train_config_default(&m);
	t.fsdp = 8;
	t.dp_replicate = 32;
	/* zero 3 (HSDP): everything over the 8 of the FSDP group: 842,301,952 elements each */
	rm_workload *wl = rm_workload_create(&m, &t, &err);
	cr_assert_not_null(wl, "%s", err.msg);
	rm_static_memory s = rm_workload_static_memory(wl);
	cr_assert_eq(s.shard_elems, P7B / 8);
	cr_assert_eq(s.opt_group, 8);
	cr_assert_eq(s.master, 4 * (P7B / 8));
	cr_assert_eq(s.optimizer, 8 * (P7B / 8));
	rm_workload_destroy(wl);
	/* zero 1 over 8 x 32 = 256 (the seed report's job): 6,738,415,616 / 256 = 26,321,936 exactly;
	 * bf16 parameters and gradients stay over 8 */
	t.zero = 1;
	wl = rm_workload_create(&m, &t, &err);
	s = rm_workload_static_memory(wl);
	cr_assert_eq(s.opt_group, 256);
	cr_assert_eq(s.opt_elems, 26321936);
	cr_assert_eq(s.params, 1684603904);
	cr_assert_eq(s.grads, 1684603904);
	cr_assert_eq(s.master, 105287744);
	cr_assert_eq(s.optimizer, 210575488);
	cr_assert_eq(s.update_params, 52643872);
	cr_assert_eq(s.total, 1684603904LL * 2 + 105287744 + 210575488);
	rm_workload_destroy(wl);
	/* zero 2 keeps only the optimizer's slice of the reduced gradients */
	t.zero = 2;
	wl = rm_workload_create(&m, &t, &err);
	s = rm_workload_static_memory(wl);
	cr_assert_eq(s.grads, 52643872);
	rm_workload_destroy(wl);
	/* out of range */
	t.zero = 4;
	cr_assert_null(rm_workload_create(&m, &t, &err));
	cr_assert(strstr(err.msg, "zero must be 1, 2 or 3"), "%s", err.msg);
}

#define HSDP "model: llama-2-7b\ncluster: {gpus_per_node: 8, nodes: 2}\ntraining: {seq_len: 1024}\n" \
	     "remat: {policy: nothing_saveable}\n"

Test(parallel, an_hsdp_step_reduces_one_gradient_across_the_replicas)
{
	/* fsdp 8 x dp_replicate 2: after each reduction over the node, the same bytes cross the
	 * 2 replicas: per layer the reduce-scatter's output 202,375,168 / 8 x 2 B = 50,593,792 and the
	 * norms' all-reduce 8,192 x 2 = 16,384; the embedding's and head's 131,072,000 / 8 x 2 =
	 * 32,768,000 each; the final norm's 8,192. 32 x 50,610,176 + 65,536,000 + 8,192 =
	 * 1,685,069,824 B: the gradient shard (P / 8 x 2 = 1,684,603,904) plus the 7/8 of the
	 * replicated norms' (266,240 x 2 x 7/8 = 465,920) */
	run a;
	run_text(&a, HSDP "parallelism: {fsdp: 8, dp_replicate: 2}\n");
	int n_ar, n_rs, n_ag;
	int64_t ar = coll_bytes(a.prog, 2, RM_COLL_ALL_REDUCE, &n_ar);
	coll_bytes(a.prog, 2, RM_COLL_REDUCE_SCATTER, &n_rs);
	coll_bytes(a.prog, 2, RM_COLL_ALL_GATHER, &n_ag);
	cr_assert_eq(ar, 1685069824LL, "%lld", (long long)ar);
	cr_assert_eq(n_rs + n_ag, 0);
	cr_assert_eq(a.rep.replica_collectives, n_ar);
	/* the replica group has one GPU in each node */
	const rm_program_op *r = op_named(a.prog, "layer05/bwd/reduce-scatter0/replicas");
	cr_assert_not_null(r);
	cr_assert_eq(r->cost.collective.span, 2);
	const rm_program_op *rs = op_named(a.prog, "layer05/bwd/reduce-scatter0");
	cr_assert_not_null(rs);
	cr_assert_eq(r->cost.collective.bytes * 8, rs->cost.collective.bytes);
	cr_assert_eq(a.res.train.dp_replicate, 2);
	run_finish(&a);
	/* without replicas: none, and the step is no slower */
	run b;
	run_text(&b, "model: llama-2-7b\ntraining: {seq_len: 1024}\nremat: {policy: nothing_saveable}\n");
	cr_assert_eq(b.rep.replica_collectives, 0);
	run_finish(&b);
}

Test(parallel, zero1_reduce_scatters_across_replicas_and_gathers_the_updated_slices)
{
	run a;
	run_text(&a, HSDP "parallelism: {fsdp: 8, dp_replicate: 2, zero: 1}\n");
	int n;
	/* the same bytes as HSDP's all-reduces, now reduce-scatters (the norms' stay all-reduces) */
	int64_t rs = coll_bytes(a.prog, 2, RM_COLL_REDUCE_SCATTER, &n);
	int64_t ar = coll_bytes(a.prog, 2, RM_COLL_ALL_REDUCE, &n);
	cr_assert_eq(rs + ar, 1685069824LL);
	cr_assert_eq(ar, 32 * 16384 + 8192);
	/* after the step, the parameter shard (P / 8 x 2 B) gathered from the two slices */
	int64_t ag = coll_bytes(a.prog, 2, RM_COLL_ALL_GATHER, &n);
	cr_assert_eq(n, 1);
	cr_assert_eq(ag, 1684603904LL);
	/* the optimizer updates P / 16 = 421,150,976 elements: reads bf16 parameters 2, fp32
	 * master 4, two fp32 moments 8 and the bf16 gradient 2 B of each, writes all but the
	 * gradient */
	const rm_program_op *u = op_named(a.prog, "optimizer/update");
	cr_assert_not_null(u);
	cr_assert_eq(u->cost.elementwise.bytes_read, 421150976LL * 16);
	cr_assert_eq(u->cost.elementwise.bytes_written, 421150976LL * 14);
	run_finish(&a);
}

Test(parallel, data_parallelism_without_fsdp_all_reduces_every_gradient)
{
	/* fsdp 1 x 8 replicas (DDP): every layer's 202,383,360 parameters x 2 B after its backward,
	 * the embedding, head and final norm's 262,148,096 x 2 B before the step: P x 2 B in all.
	 * Under XLA (the default mode) each weight gradient keeps its own all-reduce: q, k, v, o of
	 * 4096 x 4096 x 2 B = 32 MiB and gate, up, down of 4096 x 11008 x 2 B = 86 MiB are each past
	 * the combiner's 30 MiB, so 7 a layer (the norms ride with the last), and one more */
	run a;
	run_text(&a, "model: llama-2-7b\ntraining: {seq_len: 1024}\nremat: {policy: nothing_saveable}\n"
		     "parallelism: {fsdp: 1}\n");
	int n;
	int64_t ar = coll_bytes(a.prog, 8, RM_COLL_ALL_REDUCE, &n);
	cr_assert_eq(ar, P7B * 2, "%lld", (long long)ar);
	cr_assert_eq(n, 32 * 7 + 1);
	cr_assert_eq(a.res.train.dp_replicate, 8);
	/* no FSDP gathers */
	coll_bytes(a.prog, 8, RM_COLL_ALL_GATHER, &n);
	cr_assert_eq(n, 0);
	run_finish(&a);
	/* the distributed optimizer (zero 1): the same bytes reduce-scattered, and after the step
	 * the updated slices all-gathered back into the whole parameters, P x 2 B */
	run b;
	run_text(&b, "model: llama-2-7b\ntraining: {seq_len: 1024}\nremat: {policy: nothing_saveable}\n"
		     "parallelism: {fsdp: 1, zero: 1}\n");
	cr_assert_eq(coll_bytes(b.prog, 8, RM_COLL_REDUCE_SCATTER, &n), P7B * 2);
	cr_assert_eq(n, 32 * 7 + 1);
	cr_assert_eq(coll_bytes(b.prog, 8, RM_COLL_ALL_GATHER, &n), P7B * 2);
	cr_assert_eq(n, 1);
	cr_assert_eq(coll_bytes(b.prog, 8, RM_COLL_ALL_REDUCE, &n), 0);
	run_finish(&b);
}

Test(parallel, global_batch_sets_the_micro_batches)
{
	/* 16 GPUs x micro_batch 2 = 32 sequences per micro-batch step: 128 sequences are 4 */
	run a;
	run_text(&a, "model: llama-2-7b\ncluster: {gpus_per_node: 8, nodes: 2}\nparallelism: {fsdp: 8}\n"
		     "training: {seq_len: 1024, micro_batch: 2, global_batch: 128}\n");
	cr_assert_eq(a.res.train.grad_accum, 4);
	cr_assert_eq(a.res.train.dp_replicate, 2);
	run_finish(&a);
}


Test(parallel, bad_combinations_name_the_key)
{
	expect_scenario_error("model: llama-2-7b\ncluster: {nodes: 2}\nparallelism:\n  fsdp: 8\n  dp_replicate: 4\n", RM_INVALID, 5,
		     17, "fsdp 8 x dp_replicate 4 = 32 GPUs, but the cluster has 16 GPUs");
	expect_scenario_error("model: llama-2-7b\nparallelism:\n  dp_replicate: 3\n", RM_INVALID, 3, 17, "must divide the cluster's 8 GPUs");
	expect_scenario_error("model: llama-2-7b\ncluster: {nodes: 3}\nparallelism:\n  fsdp: 3\n", RM_INVALID, 4, 9,
		     "straddle two nodes");
	expect_scenario_error("model: llama-2-7b\nparallelism:\n  zero: 1\nscheduler: {mode: fsdp2}\n", RM_INVALID, 3, 9,
		     "PyTorch FSDP2 shards the optimizer state over the FSDP group");
	expect_scenario_error("model: llama-2-7b\nparallelism:\n  zero: 0\n", RM_RANGE, 3, 9, "outside [1, 3]");
	expect_scenario_error("model: llama-2-7b\ntraining:\n  micro_batch: 2\n  global_batch: 20\n", RM_INVALID, 4, 17,
		     "not a multiple of micro_batch 2 x 8 data-parallel GPUs = 16");
	expect_scenario_error("model: llama-2-7b\ntraining:\n  grad_accum: 2\n  global_batch: 32\n", RM_INVALID, 4, 17,
		     "but training.grad_accum says 2");
	/* tensor parallelism: whole heads per GPU, groups that tile the node */
	expect_scenario_error("model: llama-2-7b\nparallelism:\n  tp: 3\n", RM_INVALID, 3, 7, "tp 3 must divide the 8 GPUs");
	expect_scenario_error("model: llama-2-7b\ncluster: {gpus_per_node: 6, nodes: 2}\nparallelism:\n  tp: 4\n", RM_INVALID, 4, 7,
		     "do not tile nodes of 6 GPUs");
	expect_scenario_error("model: qwen2-7b\nparallelism:\n  tp: 8\n", RM_INVALID, 3, 7, "must divide the 28 attention heads");
	expect_scenario_error("model: llama-2-7b\ncluster: {nodes: 2}\nparallelism:\n  tp: 2\n  fsdp: 4\n  dp_replicate: 4\n", RM_INVALID,
		     6, 17, "but the cluster has 8 data-parallel GPUs (16 / tp 2)");
	/* async TP without a tensor-parallel group (tests/test_async_tp.c has the others) */
	expect_scenario_error("model: llama-2-7b\nparallelism:\n  async_tp: true\n", RM_INVALID, 3, 13,
		     "needs parallelism.tp > 1");
	/* degree 1 is fine */
	run a;
	run_text(&a, "model: llama-2-7b\ntraining: {seq_len: 1024}\nparallelism: {tp: 1, pp: 1, cp: 1, ep: 1}\n");
	run_finish(&a);
}

/* The seed report's 70B job (data/scenarios/seed-llama2-70b-hsdp8x32-h100.yaml): with the four
 * names the layers' collectives stay async at micro-batch 1 and go to the compute stream at 2,
 * by XLA's memory rules (docs/parallelism.md); without names, at 4. */
static rm_schedule_report seed70(const char *const *sets, int *layer_sync)
{
	rm_scenario sc;
	rm_error err;
	char path[1024];
	snprintf(path, sizeof(path), "%s/scenarios/seed-llama2-70b-hsdp8x32-h100.yaml", getenv("REMORA_DATA_DIR"));
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_load(path, &sc, &err), RM_OK, "%s", err.msg);
	for (int i = 0; sets[i]; i++)
		cr_assert_eq(rm_scenario_set(&sc, sets[i], &err), RM_OK, "%s", err.msg);
	rm_scenario_resolved res;
	cr_assert_eq(rm_scenario_resolve(&sc, NULL, &res, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(res.train.fsdp, 8);
	cr_assert_eq(res.train.dp_replicate, 32);
	cr_assert_eq(res.sched.replica_nodes, 32);
	rm_schedule_report rep;
	rm_program *p = rm_schedule_build(&res.sched, &rep, &err);
	cr_assert_not_null(p, "%s", err.msg);
	*layer_sync = rep.sync_by_reason[RM_SYNC_MEMORY_PEAK_OVER_LIMIT] + rep.sync_by_reason[RM_SYNC_DECREASE_MEMORY_OVER_LIMIT];
	rm_program_destroy(p);
	rm_scenario_resolved_finish(&res);
	return rep;
}

Test(parallel, the_seed_70b_job_goes_synchronous_at_micro_batch_2_with_names_and_4_without)
{
	static const char *const n1[] = {"training.micro_batch=1", NULL}, *const n2[] = {"training.micro_batch=2", NULL},
				 *const e3[] = {"training.micro_batch=3", "remat.names=[]", NULL},
				 *const e4[] = {"training.micro_batch=4", "remat.names=[]", NULL};
	int s1, s2, s3, s4;
	rm_schedule_report r;
	r = seed70(n1, &s1);
	rm_schedule_report_finish(&r);
	r = seed70(n2, &s2);
	rm_schedule_report_finish(&r);
	r = seed70(e3, &s3);
	rm_schedule_report_finish(&r);
	r = seed70(e4, &s4);
	cr_assert_eq(r.collectives, 325);
	rm_schedule_report_finish(&r);
	cr_assert_eq(s1, 0);
	cr_assert_eq(s2, 237);
	cr_assert_eq(s3, 0);
	cr_assert_eq(s4, 237);
}

/*
 * Korthikanti et al. 2022 (docs/reference/activation-memory.md), per layer, GPT-2 shapes with
 * unfused attention and dropout (h 768, a 12): tensor parallel t, sbh(10 + 24/t + 5as/(ht));
 * with sequence parallelism, sbh(34/t + 5as/(ht)); selective recompute of the attention core
 * drops the 5as/(ht) term; full recompute keeps the layer input, 2sbh (2sbh/t with sequence
 * parallelism). Exact to the byte.
 */
static void check_korthikanti(int64_t t, bool sp, int64_t s, int64_t b)
{
	rm_model_config m;
	rm_error err;
	cr_assert_eq(rm_model_config_resolve("gpt-2", &m, &err), RM_OK, "%s", err.msg);
	rm_train_config tc = rm_train_config_default(&m);
	tc.seq_len = s;
	tc.micro_batch = b;
	tc.fused_attention = false;
	tc.dropout = 1;
	tc.tp = t;
	tc.sp = sp;
	rm_workload *wl = rm_workload_create(&m, &tc, &err);
	cr_assert_not_null(wl, "%s", err.msg);
	int64_t h = 768, a = 12, sbh = s * b * h;
	int64_t core = 5 * a * s * s * b / t;
	int64_t want = sp ? 34 * sbh / t + core : 10 * sbh + 24 * sbh / t + core;
	int64_t got = rm_graph_residual_bytes(&wl->layer);
	cr_assert_eq(got, want, "t=%lld sp=%d s=%lld b=%lld: %lld, want %lld", (long long)t, sp, (long long)s, (long long)b,
		     (long long)got, (long long)want);
	/* selective: the scores, probabilities, their dropout and its mask recomputed from q, k */
	rm_remat_policy *sel = rm_remat_policy_parse("save_anything_except_these_names('attention_scores', "
						     "'attention_probs', 'attention_probs_dropout', "
						     "'attention_probs_dropout_mask')",
						     &err);
	cr_assert_not_null(sel, "%s", err.msg);
	rm_remat_plan plan;
	cr_assert_eq(rm_remat_plan_build(&wl->layer, sel, &plan, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(plan.saved_bytes + plan.carry_bytes, want - core, "selective t=%lld sp=%d: %lld", (long long)t, sp,
		     (long long)(plan.saved_bytes + plan.carry_bytes));
	rm_remat_plan_finish(&plan);
	rm_remat_policy_destroy(sel);
	/* full: only the layer input */
	rm_remat_policy *full = rm_remat_policy_parse("nothing_saveable", &err);
	cr_assert_eq(rm_remat_plan_build(&wl->layer, full, &plan, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(plan.saved_bytes, 0);
	cr_assert_eq(plan.carry_bytes, sp ? 2 * sbh / t : 2 * sbh);
	rm_remat_plan_finish(&plan);
	rm_remat_policy_destroy(full);
	rm_workload_destroy(wl);
}

Test(parallel, tensor_parallel_activation_bytes_korthikanti)
{
	check_korthikanti(2, false, 1024, 1);
	check_korthikanti(4, false, 512, 2);
	check_korthikanti(2, true, 1024, 1);
	check_korthikanti(4, true, 512, 2);
	check_korthikanti(12, true, 960, 1);
}

Test(parallel, tensor_parallel_parameters_and_collectives)
{
	/* Llama-2-7B at tp 8: a layer's 4 x 4096 x 512 attention and 3 x 4096 x 1376 MLP elements
	 * plus the two replicated norms (8,192) = 25,305,088; the embedding and head 4,000 x 4096 =
	 * 16,384,000 rows each, the final norm 4,096: 842,534,912 per GPU before FSDP */
	rm_model_config m;
	rm_error err;
	cr_assert_eq(rm_model_config_resolve("llama-2-7b", &m, &err), RM_OK, "%s", err.msg);
	rm_train_config tc = rm_train_config_default(&m);
	tc.tp = 8;
	rm_workload *wl = rm_workload_create(&m, &tc, &err);
	cr_assert_not_null(wl, "%s", err.msg);
	cr_assert_eq(wl->layer.params, 25305088);
	cr_assert_eq(rm_workload_rank_params(wl), 842534912LL);
	rm_workload_destroy(wl);
	/* one step at tp 2 with sequence parallelism on 8 GPUs (fsdp 4), nothing saved: per layer
	 * the forward gathers the attention and MLP inputs ([1, 1024, 4096] x 2 B = 8 MiB each) and
	 * reduce-scatters the two projections' outputs; the recompute gathers both again and
	 * reduce-scatters the attention output (the MLP's output feeds no backward); the backward
	 * runs each forward one's conjugate: 4 + 3 + 4 = 11 per layer, 4 in the embedding and head
	 * (its reduce-scatter and the final norm's gather, and their conjugates) */
	run a;
	run_text(&a, "model: llama-2-7b\ntraining: {seq_len: 1024}\nremat: {policy: nothing_saveable}\n"
		     "parallelism: {tp: 2, sp: true}\n");
	cr_assert_eq(a.res.train.fsdp, 4);
	int n_ag, n_rs, n_ar;
	int64_t ag = coll_bytes(a.prog, 2, RM_COLL_ALL_GATHER, &n_ag);
	int64_t rs = coll_bytes(a.prog, 2, RM_COLL_REDUCE_SCATTER, &n_rs);
	coll_bytes(a.prog, 2, RM_COLL_ALL_REDUCE, &n_ar);
	cr_assert_eq(n_ar, 0);
	cr_assert_eq(n_ag, 32 * 6 + 2, "%d", n_ag);
	cr_assert_eq(n_rs, 32 * 5 + 2, "%d", n_rs);
	cr_assert_eq(ag + rs, (int64_t)(32 * 11 + 4) * 8388608);
	/* each GPU counts half the tokens: 1024 / 2 per step */
	cr_assert_eq(a.prog->tokens, 512);
	run_finish(&a);
	/* without sequence parallelism: all-reduces, forward and backward (Megatron's g and f) */
	run b;
	run_text(&b, "model: llama-2-7b\ntraining: {seq_len: 1024}\nremat: {policy: nothing_saveable}\n"
		     "parallelism: {tp: 2}\n");
	int64_t ar = coll_bytes(b.prog, 2, RM_COLL_ALL_REDUCE, &n_ar);
	coll_bytes(b.prog, 2, RM_COLL_ALL_GATHER, &n_ag);
	cr_assert_eq(n_ag, 0);
	/* per layer 2 forward, 1 recomputed (the attention output's), 2 backward at the norms; the
	 * embedding's forward and the final norm's backward */
	cr_assert_eq(n_ar, 32 * 5 + 2, "%d", n_ar);
	cr_assert_eq(ar, (int64_t)(32 * 5 + 2) * 8388608);
	run_finish(&b);
}

/* A pipelined step (data/scenarios/capacity-llama3-70b-tp8pp4-4x8-h100.yaml): Llama-3-70B, TP 8
 * with SP x 4 stages of 20 layers, 1F1B over 32 micro-batches, full AC. */
Test(parallel, a_pipelined_step_holds_p_micro_batches_on_its_first_stage)
{
	rm_scenario sc;
	rm_error err;
	char path[1024];
	snprintf(path, sizeof(path), "%s/scenarios/capacity-llama3-70b-tp8pp4-4x8-h100.yaml", getenv("REMORA_DATA_DIR"));
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_load(path, &sc, &err), RM_OK, "%s", err.msg);
	rm_scenario_resolved res;
	cr_assert_eq(rm_scenario_resolve(&sc, NULL, &res, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(res.train.grad_accum, 32);
	rm_pp_run r;
	cr_assert_eq(rm_pp_run_scenario(&res, &r, &err), RM_OK, "%s", err.msg);
	/* 1F1B: stage s holds p - s micro-batches of activations */
	for (int s = 0; s < 4; s++)
		cr_assert_eq(r.sched.in_flight[s], 4 - s);
	/* full AC keeps each layer's input: [1, 4096 / 8, 8192] x 2 B = 8 MiB, 20 layers a stage */
	cr_assert_eq(r.act_bytes_per_chunk, 20LL * 8388608);
	cr_assert_eq(r.peak_stage, 0);
	cr_assert(r.fits);
	/* what goes between stages: [1, 4096, 8192] x 2 B / tp 8 */
	cr_assert_eq(r.p2p_bytes, 8388608);
	/* the middle stages are equal: the step is within 1% of the pipeline's closed form with the
	 * slower last stage's backward, (m + p - 1)(t_f + t_b) + the tail */
	double per = r.middle.fwd_s + r.last.bwd_s;
	double closed = (32 + 4 - 1) * per + r.first.tail_s;
	cr_assert(fabs(r.step_s - closed) <= 0.01 * closed, "step %g, closed form %g", r.step_s, closed);
	/* tokens per GPU: 32 x 4096 tokens per step over tp 8 x pp 4 GPUs */
	cr_assert_float_eq(r.tokens_per_s, 32.0 * 4096.0 / 32.0 / r.step_s, 1e-9);
	/* the one program of the whole step is refused */
	cr_assert_null(rm_schedule_build(&res.sched, NULL, &err));
	cr_assert(strstr(err.msg, "stage by stage"), "%s", err.msg);
	rm_scenario_resolved_finish(&res);
}

Test(parallel, bad_pipeline_combinations_name_the_key)
{
	expect_scenario_error("model: llama-2-7b\ncluster: {nodes: 3}\nparallelism:\n  pp: 3\nremat: {scan: false}\n", RM_INVALID, 4, 7,
		     "must divide the 32 layers");
	expect_scenario_error("model: llama-2-7b\ncluster: {nodes: 4}\nparallelism:\n  pp: 4\n", RM_INVALID, 4, 7, "remat.scan: false");
	expect_scenario_error("model: llama-2-7b\ncluster: {nodes: 4}\nremat: {scan: false}\nparallelism:\n  pp: 4\n  virtual_stages: 2\n",
		     RM_INVALID, 6, 19, "pp_schedule: interleaved");
	expect_scenario_error("model: llama-2-7b\ncluster: {nodes: 4}\nremat: {scan: false}\nparallelism:\n  pp: 4\n  pp_schedule: zero_bubble\n  virtual_stages: 3\n",
		     RM_INVALID, 7, 19, "or 2 (ZB-V), not 3");
	expect_scenario_error("model: llama-2-7b\nparallelism:\n  pp_schedule: 2f2b\n", RM_INVALID, 3, 16, "expected 1f1b");
}

Test(parallel, megatron_recompute_names)
{
	/* megatron:selective on a fused-attention Llama layer: only the attention kernel's output
	 * (and its log-sum-exp) is recomputed; megatron:full keeps only the layer input */
	rm_model_config m;
	rm_error err;
	cr_assert_eq(rm_model_config_resolve("llama-2-7b", &m, &err), RM_OK, "%s", err.msg);
	rm_train_config tc = rm_train_config_default(&m);
	tc.seq_len = 1024;
	rm_workload *wl = rm_workload_create(&m, &tc, &err);
	cr_assert_not_null(wl, "%s", err.msg);
	rm_remat_policy *sel = rm_remat_policy_parse("megatron:selective", &err);
	cr_assert_not_null(sel, "%s", err.msg);
	rm_remat_plan plan;
	cr_assert_eq(rm_remat_plan_build(&wl->layer, sel, &plan, &err), RM_OK, "%s", err.msg);
	int ctx = rm_graph_find_value(&wl->layer, "attention_context");
	int q = rm_graph_find_value(&wl->layer, "rotary_query"); /* the kernel reads q after rotary */
	cr_assert_eq(plan.fate[ctx], RM_FATE_RECOMPUTED);
	cr_assert_eq(plan.fate[q], RM_FATE_SAVED);
	/* ctx [1, 1024, 4096] x 2 B and the lse [1, 32, 1024] x 4 B less than keeping everything */
	cr_assert_eq(rm_graph_residual_bytes(&wl->layer) - (plan.saved_bytes + plan.carry_bytes), 8388608 + 131072);
	rm_remat_plan_finish(&plan);
	rm_remat_policy_destroy(sel);
	rm_remat_policy *full = rm_remat_policy_parse("megatron:full", &err);
	cr_assert_eq(rm_remat_plan_build(&wl->layer, full, &plan, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(plan.saved_bytes, 0);
	rm_remat_plan_finish(&plan);
	rm_remat_policy_destroy(full);
	cr_assert_null(rm_remat_policy_parse("megatron:partial", &err));
	cr_assert(strstr(err.msg, "full, selective"), "%s", err.msg);
	rm_workload_destroy(wl);
	/* recompute_method */
	expect_scenario_error("model: llama-2-7b\nremat:\n  scan: false\n  recompute_num_layers: 4\n  recompute_method: uniform\n",
		     RM_UNSUPPORTED, 5, 21, "uniform groups of 4 layers");
	expect_scenario_error("model: llama-2-7b\nremat:\n  recompute_method: stripes\n", RM_INVALID, 3, 21, "expected uniform or block");
}

Test(parallel, context_parallel_attention_gathers_the_keys_and_values)
{
	/* Llama-3-8B at seq 32768, cp 4 on 8 GPUs (FSDP over 2 x cp 4): each GPU runs 8,192 tokens of
	 * a sequence; per layer the forward gathers k and v ([1, 32768, 1024] x 2 B = 64 MiB each),
	 * the recompute gathers them again (kept as the local chunk), the backward reduce-scatters
	 * dk and dv: 4 all-gathers and 2 reduce-scatters of 64 MiB over the 4 */
	run a;
	run_text(&a, "model: llama-3-8b\ntraining: {seq_len: 32768}\nremat: {scan: false, policy: nothing_saveable}\n"
		     "parallelism: {cp: 4}\nscheduler: {mode: fsdp2}\n");
	cr_assert_eq(a.res.train.cp, 4);
	cr_assert_eq(a.res.train.fsdp, 8);
	cr_assert_eq(a.res.train.dp_replicate, 1);
	int n_ag, n_rs;
	int64_t ag = coll_bytes(a.prog, 4, RM_COLL_ALL_GATHER, &n_ag);
	int64_t rs = coll_bytes(a.prog, 4, RM_COLL_REDUCE_SCATTER, &n_rs);
	cr_assert_eq(n_ag, 32 * 4, "%d", n_ag);
	cr_assert_eq(n_rs, 32 * 2, "%d", n_rs);
	cr_assert_eq(ag + rs, 32LL * 6 * 67108864);
	cr_assert_eq(a.prog->tokens, 8192);
	/* the kernel's FLOPs: a quarter of the causal pairs, 4 x 32 heads x 128 x 32768 x 32769 / 2 / 4 */
	const rm_program_op *at = op_named(a.prog, "layer05/fwd/attention_context");
	cr_assert_not_null(at);
	cr_assert_float_eq(rm_cost_attention_flops(&at->cost.attention), 4.0 * 32 * 128 * 32768.0 * 32769.0 / 2 / 4,
			   1e-3 * 4.0 * 32 * 128 * 32768.0 * 32769.0 / 2 / 4);
	run_finish(&a);
	expect_scenario_error("model: llama-3-8b\ntraining: {seq_len: 4098}\nparallelism:\n  cp: 2\n", RM_INVALID, 4, 7,
		     "multiple of 2 x cp 2 x tp 1");
}

Test(parallel, megatron_runtime_overlaps_the_distributed_optimizer)
{
	/* Llama-2-7B on 8 GPUs, data parallel 8 with the distributed optimizer (zero 1), 2
	 * micro-batches: the gradients reduce-scattered per layer in the last micro-batch's backward
	 * (32 of 202,383,360 x 2 B, and the embedding, head and final norm's 262,148,096 x 2 B before
	 * the step), the updated parameters gathered per layer ahead of its forward (32 + 1): P x 2 B
	 * each way */
	const char *base = "model: llama-2-7b\ntraining: {seq_len: 1024, grad_accum: 2}\nremat: {policy: nothing_saveable}\n"
			   "parallelism: {zero: 1}\nscheduler:\n  mode: megatron\n";
	run a;
	run_text(&a, base);
	cr_assert(a.res.sched.megatron);
	cr_assert_eq(a.res.train.fsdp, 1);
	cr_assert_eq(a.res.train.dp_replicate, 8);
	int n;
	cr_assert_eq(coll_bytes(a.prog, 8, RM_COLL_REDUCE_SCATTER, &n), P7B * 2);
	cr_assert_eq(n, 33);
	cr_assert_eq(coll_bytes(a.prog, 8, RM_COLL_ALL_GATHER, &n), P7B * 2);
	cr_assert_eq(n, 33);
	/* the first layer's forward waits for its gather */
	cr_assert_not_null(op_named(a.prog, "layer00/fwd/param-all-gather-replicas"));
	cr_assert_eq(a.res.cost.kernels.attention, RM_ATTN_CUDNN);
	run_finish(&a);
	/* neither overlapped: one reduce-scatter after the backward, one gather after the step */
	char text[512];
	snprintf(text, sizeof(text), "%s  overlap_grad_reduce: false\n  overlap_param_gather: false\n", base);
	run b;
	run_text(&b, text);
	cr_assert_eq(coll_bytes(b.prog, 8, RM_COLL_REDUCE_SCATTER, &n), P7B * 2);
	cr_assert_eq(n, 1);
	cr_assert_eq(coll_bytes(b.prog, 8, RM_COLL_ALL_GATHER, &n), P7B * 2);
	cr_assert_eq(n, 1);
	cr_assert_gt(b.m.exposed_comm, a.m.exposed_comm);
	run_finish(&b);
	expect_scenario_error("model: llama-2-7b\nparallelism:\n  fsdp: 8\nscheduler: {mode: megatron}\n", RM_INVALID, 3, 9,
		     "Megatron-FSDP is not modelled");
	expect_scenario_error("model: llama-2-7b\nscheduler:\n  mode: fsdp2\n  overlap_grad_reduce: true\n", RM_INVALID, 4, 24,
		     "applies to scheduler.mode megatron");
	expect_scenario_error("model: llama-2-7b\ntraining:\n  compile: true\nscheduler: {mode: megatron}\n", RM_INVALID, 3, 12,
		     "not torch.compile");
}

/* Mixture of experts (Mixtral 8x7B: h 4096, 8 experts of ffn 14336, top 2; Qwen2-MoE with its
 * gated shared expert; Qwen3-MoE with q/k norms): the layer graph holds exactly the parameters
 * docs/reference/models.csv counts, and expert parallelism's all-to-all moves each token's k
 * copies both ways. */
Test(parallel, moe_layers_and_expert_parallel_all_to_all)
{
	static const char *const models[] = {"mixtral-8x7b", "qwen2-moe-a2.7b", "qwen3-30b-a3b"};
	for (size_t i = 0; i < 3; i++) {
		rm_model_config m;
		rm_error err;
		cr_assert_eq(rm_model_config_resolve(models[i], &m, &err), RM_OK, "%s", err.msg);
		rm_train_config tc = rm_train_config_default(&m);
		tc.seq_len = 1024;
		rm_workload *wl = rm_workload_create(&m, &tc, &err);
		cr_assert_not_null(wl, "%s: %s", models[i], err.msg);
		cr_assert_eq(wl->layer.params, wl->params.per_layer, "%s: %lld vs %lld", models[i], (long long)wl->layer.params,
			     (long long)wl->params.per_layer);
		rm_workload_destroy(wl);
	}
	/* Mixtral at ep 8 on one node, seq 1024: each token's 2 copies of [4096] x 2 B, 2048 x 4096
	 * x 2 B = 16 MiB per all-to-all; one expert per GPU, its gate projection 2 x 2048 x 14336 x
	 * 4096 FLOPs; 14336 x 4096 x 3 x 32 = 5,637,144,576 expert parameters per GPU, whole */
	run a;
	run_text(&a, "model: mixtral-8x7b\ntraining: {seq_len: 1024}\nremat: {scan: false, policy: nothing_saveable}\n"
		     "parallelism: {ep: 8}\nscheduler: {mode: fsdp2}\n");
	const rm_program_op *d = op_named(a.prog, "layer05/fwd/moe_dispatched_a2a");
	cr_assert_not_null(d);
	cr_assert_eq(d->cost.collective.op, RM_COLL_ALL_TO_ALL);
	cr_assert_eq(d->cost.collective.group_size, 8);
	cr_assert_eq(d->cost.collective.bytes, 16777216);
	cr_assert_not_null(op_named(a.prog, "layer05/bwd/moe_dispatched_a2a.bwd"));
	const rm_program_op *g = op_named(a.prog, "layer05/fwd/moe_gate");
	cr_assert_not_null(g);
	cr_assert_float_eq(rm_cost_gemm_flops(&g->cost.gemm), 2.0 * 2048 * 14336 * 4096, 1.0);
	cr_assert_eq(rm_workload_rank_expert_params(a.res.wl), 5637144576LL);
	run_finish(&a);
	/* the busiest GPU receives 1.5x the balanced share: 3072 tokens' copies */
	run b;
	run_text(&b, "model: mixtral-8x7b\ntraining: {seq_len: 1024, moe_imbalance: 1.5}\nremat: {scan: false, policy: "
		     "nothing_saveable}\nparallelism: {ep: 8}\nscheduler: {mode: fsdp2}\n");
	g = op_named(b.prog, "layer05/fwd/moe_gate");
	cr_assert_float_eq(rm_cost_gemm_flops(&g->cost.gemm), 2.0 * 3072 * 14336 * 4096, 1.0);
	run_finish(&b);
	expect_scenario_error("model: mixtral-8x7b\nparallelism:\n  ep: 3\n", RM_INVALID, 3, 7, "must divide the 8 routed experts");
	expect_scenario_error("model: llama-2-7b\nparallelism:\n  ep: 2\n", RM_INVALID, 3, 7, "has no experts");
	expect_scenario_error("model: mixtral-8x7b\nparallelism:\n  ep: 4\n", RM_UNSUPPORTED, 3, 7, "over the whole FSDP group");
}

/* A model too large to represent is reported at the model key when no training key set a size. */
Test(parallel, too_large_a_model_points_at_the_model_key)
{
	char text[1200];
	snprintf(text, sizeof(text), "model: %s/configs/max-dimensions.json\n", getenv("REMORA_TEST_DATA"));
	expect_scenario_error(text, RM_RANGE, 1, 8, "too large to represent");
}

/* The scale-out fabric: 4 NICs of 400 Gb/s for 8 GPUs give each GPU 4 x 50 x 0.94 / 8 = 23.5 GB/s
 * (the profile's 47 is 0.94 of NDR's 50); the cross-replica reductions take longer. */
Test(parallel, nics_per_node_and_their_rate_set_the_network)
{
	run a, b;
	run_text(&a, HSDP "parallelism: {fsdp: 8}\n");
	run_text(&b, "model: llama-2-7b\ncluster: {gpus_per_node: 8, nodes: 2, nics_per_node: 4, nic_gbps: 400}\n"
		     "training: {seq_len: 1024}\nremat: {policy: nothing_saveable}\nparallelism: {fsdp: 8}\n");
	cr_assert_float_eq(a.res.hw.nic_GBps, 47.0, 1e-9);
	cr_assert_float_eq(b.res.hw.nic_GBps, 23.5, 1e-9);
	cr_assert_gt(b.m.comm_total, a.m.comm_total);
	run_finish(&a);
	run_finish(&b);
}

/* A 4-GPU board without NVSwitch (cluster.nvlink_mesh 4): a node is the board, the resolved cost
 * model prices a 2-GPU all-gather over the pair's 6 links (a third of the switch's bandwidth,
 * tests/test_nccl.c mesh_board_pairs_ride_their_own_links; with its latency 2.5-3x the time), and
 * TP 2 exposes about twice the communication at 1024 tokens, where latency is a good part of it;
 * the key's checks name it. */
Test(parallel, nvlink_mesh_boards)
{
	run a, b;
#define TP2_ON(cluster)                                                                                \
	"model: llama-2-7b\nhardware: h200-sxm\ncluster: {gpus_per_node: 2" cluster "}\n"                  \
	"training: {seq_len: 1024}\nremat: {policy: nothing_saveable}\n"                                    \
	"parallelism: {tp: 2, sp: true, fsdp: 1}\nscheduler: {mode: fsdp2}\n"
	run_text(&a, TP2_ON(""));
	run_text(&b, TP2_ON(", nvlink_mesh: 4"));
#undef TP2_ON
	cr_assert_float_eq(b.res.hw.nvlink_mesh_gpus, 4, 0);
	cr_assert_float_eq(b.res.hw.gpus_per_node, 4, 0);
	rm_cost_op op = {.kind = RM_COST_COLLECTIVE,
			 .collective = {.op = RM_COLL_ALL_GATHER, .bytes = RM_GiB, .group_size = 2, .span = 1}};
	double ta = a.res.sched.cost->op_time_s(a.res.sched.cost, &op, &a.res.hw);
	double tb = b.res.sched.cost->op_time_s(b.res.sched.cost, &op, &b.res.hw);
	cr_assert_gt(tb, 2.5 * ta, "switch %g s, mesh %g s", ta, tb);
	cr_assert_lt(tb, 3.0 * ta, "switch %g s, mesh %g s", ta, tb);
	cr_assert_gt(b.m.exposed_comm, 1.8 * a.m.exposed_comm, "switch %g, mesh %g", (double)a.m.exposed_comm, (double)b.m.exposed_comm);
	run_finish(&a);
	run_finish(&b);
	expect_scenario_error("model: llama-2-7b\nhardware: h200-sxm\ncluster: {nvlink_mesh: 5}\n", RM_INVALID, 3, 24,
			      "the 18 NVLinks of a h200-sxm do not split evenly among 4 peers");
	expect_scenario_error("model: llama-2-7b\ncluster: {nvlink_mesh: 9}\n", RM_RANGE, 2, 24, "");
	expect_scenario_error("model: llama-2-7b\ncluster: {gpus_per_node: 8, nvlink_mesh: 4}\n", RM_INVALID, 2,
			      26, "nodes have 4 GPUs, not 8 (cluster.nvlink_mesh: a node is one board)");
}

/* --set refuses bytes that are not UTF-8 before a parser can echo them. */
Test(parallel, set_refuses_malformed_utf8)
{
	rm_scenario sc;
	rm_error err;
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_set(&sc, "remat.names=[\xff\xfe]", &err), RM_PARSE);
	cr_assert(strstr(err.msg, "malformed UTF-8 in the value at character 2"), "%s", err.msg);
	cr_assert_null(strchr(err.msg, '\xff'));
}

/* DeepSeek-V3's layout shrunk (tests/data/configs/deepseek-v3-small.json): layer 0 dense, layers 1
 * and 2 MoE. Under FSDP each layer gathers and reduce-scatters its own kind's projection weights
 * (norms and the router bias are all-reduced): dense 53,248 latent-attention weights + 3 x 256 x
 * 512 = 446,464, MoE 53,248 + router 1024 + 4 experts x 49,152 + shared 49,152 = 300,032; in
 * bf16 892,928 and 600,064 B. */
static void deepseek_small_scenario(char *buf, size_t n, const char *rest)
{
	const char *dir = getenv("REMORA_TEST_DATA");
	cr_assert_not_null(dir, "REMORA_TEST_DATA must point at tests/data");
	snprintf(buf, n, "model: %s/configs/deepseek-v3-small.json\n%s", dir, rest);
}

Test(parallel, deepseek_dense_and_moe_layers_gather_their_own_weights)
{
	char text[2048];
	deepseek_small_scenario(text, sizeof(text),
				"training: {seq_len: 128}\nremat: {scan: false, policy: nothing_saveable}\n"
				"parallelism: {fsdp: 8}\nscheduler: {mode: fsdp2}\n");
	run a;
	run_text(&a, text);
	static const struct {
		const char *name;
		int64_t bytes;
	} want[] = {
		{"layer00/fwd/all-gather0", 892928},      {"layer00/bwd/reduce-scatter0", 892928},
		{"layer01/fwd/all-gather0", 600064},      {"layer02/fwd/all-gather0", 600064},
		{"layer01/bwd/reduce-scatter0", 600064},
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const rm_program_op *op = op_named(a.prog, want[i].name);
		cr_assert_not_null(op, "%s", want[i].name);
		cr_assert_eq(op->cost.collective.bytes, want[i].bytes, "%s: %lld", want[i].name,
			     (long long)op->cost.collective.bytes);
	}
	/* the dense layer runs the dense MLP, the MoE layers the router and experts */
	cr_assert_not_null(op_named(a.prog, "layer00/fwd/dot_mlp_gate"));
	cr_assert_null(op_named(a.prog, "layer00/fwd/moe_router"));
	cr_assert_not_null(op_named(a.prog, "layer01/fwd/moe_router"));
	cr_assert_not_null(op_named(a.prog, "layer02/bwd/moe_gate.wgrad"));
	cr_assert_not_null(op_named(a.prog, "layer00/fwd/dot_attention_kv_a"));
	cr_assert(a.m.step_time > 0);
	run_finish(&a);
	/* XLA with a scan: the dense layer runs unrolled before the loop over the MoE layers (and after
	 * it in the backward), each layer with its own gathers, two micro-batches */
	deepseek_small_scenario(text, sizeof(text),
				"training: {seq_len: 128, global_batch: 16}\nremat: {scan: true, policy: nothing_saveable}\n"
				"parallelism: {fsdp: 8}\nscheduler: {mode: xla}\n");
	run_text(&a, text);
	static const struct {
		const char *prefix;
		int64_t bytes;
	} gathered[] = {{"mb0/layer00/fwd/all-gather", 892928}, {"mb1/layer00/bwd/all-gather", 892928},
			{"mb0/layer01/fwd/all-gather", 600064}, {"mb1/layer02/bwd/all-gather", 600064},
			{"mb1/layer00/bwd/reduce-scatter", 892928}, {"mb1/layer01/bwd/reduce-scatter", 600064}};
	for (size_t i = 0; i < sizeof(gathered) / sizeof(gathered[0]); i++) {
		int64_t sum = 0;
		size_t n = strlen(gathered[i].prefix);
		for (int32_t j = 0; j < a.prog->n_ops; j++)
			if (strncmp(a.prog->ops[j].name, gathered[i].prefix, n) == 0 && isdigit((unsigned char)a.prog->ops[j].name[n]) &&
			    !strstr(a.prog->ops[j].name, "/replicas"))
				sum += a.prog->ops[j].cost.collective.bytes;
		cr_assert_eq(sum, gathered[i].bytes, "%s: %lld", gathered[i].prefix, (long long)sum);
	}
	int dense_gates = 0, routers = 0;
	for (int32_t j = 0; j < a.prog->n_ops; j++) {
		dense_gates += strcmp(a.prog->ops[j].name, "mb1/layer00/fwd/dot_mlp_gate") == 0;
		routers += strncmp(a.prog->ops[j].name, "mb1/layer0", 10) == 0 && strstr(a.prog->ops[j].name, "/fwd/moe_router") != NULL;
	}
	cr_assert_eq(dense_gates, 1);
	cr_assert_eq(routers, 2); /* layers 1 and 2 */
	cr_assert_null(op_named(a.prog, "mb0/layer00/fwd/moe_router"));
	run_finish(&a);
	/* offloaded values come back before each micro-batch's backward of each layer: the dense
	 * layer's too, whose backward runs alone in the entry after the loop (6 offloads and 6
	 * reloads per micro-batch; the MoE names are checkpoint names) */
	deepseek_small_scenario(text, sizeof(text),
				"training: {seq_len: 128, global_batch: 16}\nremat: {scan: true, policy: "
				"\"save_and_offload_only_these_names(names_which_can_be_saved=[], names_which_can_be_offloaded="
				"['dot_attention_kv_a', 'dot_mlp_gate', 'moe_router'], offload_src='device', "
				"offload_dst='pinned_host')\"}\nparallelism: {fsdp: 8}\nscheduler: {mode: xla}\n");
	run_text(&a, text);
	int offloads = 0, reloads = 0, dense_reloads = 0;
	for (int32_t j = 0; j < a.prog->n_ops; j++) {
		const char *n = a.prog->ops[j].name;
		offloads += strstr(n, "/offload/") != NULL;
		reloads += strstr(n, "/reload/") != NULL;
		dense_reloads += strstr(n, "layer00/reload/dot_attention_kv_a") != NULL;
	}
	cr_assert_eq(offloads, 12);
	cr_assert_eq(reloads, 12);
	cr_assert_eq(dense_reloads, 2);
	run_finish(&a);
}

/* Pipelined, each stage is priced by its own layers: 3 stages of one layer, the first dense. The
 * middle and last stages hold a MoE layer each, so they cost what they cost when every layer is
 * MoE (the same programs); the first stage differs (a dense layer and the embedding). Interleaved
 * stages, whose chunks would mix the kinds, are refused. */
Test(parallel, deepseek_pipeline_stages_are_priced_by_their_own_layers)
{
	char text[2048];
	deepseek_small_scenario(text, sizeof(text),
				"remat: {scan: false}\ncluster: {gpus_per_node: 3, nodes: 1}\n"
				"training: {seq_len: 128, global_batch: 4}\nparallelism: {pp: 3}\nscheduler: {mode: fsdp2}\n");
	rm_scenario sc;
	rm_error err;
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_parse(text, strlen(text), "t.yaml", &sc, &err), RM_OK, "%s", err.msg);
	rm_scenario_resolved res;
	cr_assert_eq(rm_scenario_resolve(&sc, NULL, &res, &err), RM_OK, "%s", err.msg);
	rm_pp_run a, b;
	cr_assert_eq(rm_pp_run_scenario(&res, &a, &err), RM_OK, "%s", err.msg);
	res.model.dense_layers = 0; /* every layer MoE */
	cr_assert_eq(rm_pp_run_scenario(&res, &b, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(a.middle.fwd_s, b.middle.fwd_s);
	cr_assert_eq(a.last.bwd_s, b.last.bwd_s);
	cr_assert_neq(a.first.fwd_s, b.first.fwd_s);
	/* stage 0's state: the dense layer (447,072 parameters) instead of a MoE one (300,644) */
	cr_assert_gt(a.peak_bytes[0], b.peak_bytes[0]);
	cr_assert_eq(a.peak_bytes[2], b.peak_bytes[2]);
	res.model.dense_layers = 1;
	res.train.pp_schedule = RM_PP_INTERLEAVED;
	res.train.virtual_stages = 2;
	cr_assert_eq(rm_pp_run_scenario(&res, &a, &err), RM_UNSUPPORTED);
	cr_assert(strstr(err.msg, "interleaved"), "%s", err.msg);
	rm_scenario_resolved_finish(&res);
}

/* The preset at ep 64 over 8 nodes x 8 H100 does not fit: each GPU holds 4 of the 256 experts of
 * each of the 58 MoE layers whole, 4 x 3 x 7168 x 2048 x 58 = 10,217,324,544 parameters, at FSDP2's
 * 14 B each (fp32 shard 4, bf16 gradient 2, AdamW 8) 143 GB before any activation. At ep 256 over
 * 32 nodes one expert per layer, 2,554,331,136 whole + the 17,117,648,384 others / 256: it fits. */
Test(parallel, deepseek_v3_fits_at_ep256_not_ep64)
{
	run a;
	run_text(&a, "model: deepseek-v3\nhardware: h100-sxm\ncluster: {gpus_per_node: 8, nodes: 8}\n"
		     "training: {seq_len: 4096, global_batch: 64}\nremat: {scan: false, policy: nothing_saveable}\n"
		     "parallelism: {fsdp: 64, ep: 64}\nscheduler: {mode: fsdp2}\n");
	cr_assert_eq(rm_workload_rank_expert_params(a.res.wl), 10217324544LL);
	cr_assert_not(a.m.fits);
	cr_assert_gt(a.m.peak_memory_bytes, 143000000000LL);
	run_finish(&a);
	run_text(&a, "model: deepseek-v3\nhardware: h100-sxm\ncluster: {gpus_per_node: 8, nodes: 32}\n"
		     "training: {seq_len: 4096, global_batch: 256}\nremat: {scan: false, policy: nothing_saveable}\n"
		     "parallelism: {fsdp: 256, ep: 256}\nscheduler: {mode: fsdp2}\n");
	cr_assert_eq(rm_workload_rank_expert_params(a.res.wl), 2554331136LL);
	cr_assert(a.m.fits, "peak %lld of %lld", (long long)a.m.peak_memory_bytes, (long long)a.m.memory_usable_bytes);
	run_finish(&a);
}

/* ---- cluster.topology ------------------------------------------------------------------------ */

/* Resolves text and simulates it with the scenario's own cost model (its NCCL model and fabric),
 * as remora simulate does. */
static void run_with_cost(run *r, const char *text)
{
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_parse(text, strlen(text), "t.yaml", &sc, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(rm_scenario_resolve(&sc, NULL, &r->res, &err), RM_OK, "%s", err.msg);
	r->prog = rm_schedule_build(&r->res.sched, &r->rep, &err);
	cr_assert_not_null(r->prog, "%s", err.msg);
	rm_sim_options opt = {.hw_queues = r->res.hw_queues, .cost = r->res.sched.cost};
	rm_sim *s = rm_sim_create(r->prog, &r->res.hw, &opt, &err);
	cr_assert_not_null(s, "%s", err.msg);
	cr_assert_eq(rm_sim_run(s, &err), RM_OK, "%s", err.msg);
	r->m = *rm_sim_get_metrics(s);
	rm_sim_destroy(s);
}

#define TOPO_BASE "model: llama-2-7b\ntraining: {seq_len: 1024}\nremat: {policy: nothing_saveable}\n" \
		  "parallelism: {fsdp: 8, dp_replicate: 2}\n"

/* The tiers as written reach the NCCL model: a rail leaf of one node under a 2:1 spine (its nodes
 * default to the cluster's 2) makes the replicas' reduction cross the spine at half bandwidth. */
Test(parallel, topology_tiers_reach_the_nccl_model)
{
	run a, b;
	run_with_cost(&a, TOPO_BASE "cluster: {gpus_per_node: 8, nodes: 2}\n");
	run_with_cost(&b, TOPO_BASE "cluster:\n  gpus_per_node: 8\n  nodes: 2\n  topology:\n    kind: rail_optimized\n"
				    "    tiers:\n      - {nodes: 1, latency_us: 0.1}\n"
				    "      - {oversubscription: 2, latency_us: 0.5}\n");
	const rm_fabric *f = &b.res.cost.nccl.fabric;
	cr_assert_eq(a.res.cost.nccl.fabric.kind, RM_FABRIC_NONE);
	cr_assert_eq(f->kind, RM_FABRIC_RAIL_OPTIMIZED);
	cr_assert_eq(f->n_tiers, 2);
	cr_assert_eq(f->tiers[0].nodes, 1);
	cr_assert_eq(f->tiers[1].nodes, 2);
	cr_assert_float_eq(f->tiers[1].oversubscription, 2.0, 1e-12);
	cr_assert_float_eq(f->tiers[1].hop_latency_us, 0.5, 1e-12);
	cr_assert(f->pxn);
	cr_assert_gt(b.m.comm_total, a.m.comm_total);
	run_finish(&a);
	run_finish(&b);
}

/* Defaults: a fat tree's leaf is a 64-port switch with 32 ports down, 32 / 8 NICs = 4 nodes, under
 * a spine reaching the cluster (at least two leaves: 8); a leaf given in ports under a 3:1 taper
 * keeps 64 x 3/4 = 48 ports down, 6 nodes of 8 NICs; nics_per_node as a topology key is the
 * cluster's; pxn: false is NCCL_PXN_DISABLE=1. */
Test(parallel, topology_defaults_and_ports)
{
	rm_scenario sc;
	rm_error err;
	rm_scenario_resolved res;
	rm_scenario_init(&sc);
	const char *t1 = TOPO_BASE "cluster: {gpus_per_node: 8, nodes: 2, topology: {kind: fat_tree}}\n";
	cr_assert_eq(rm_scenario_parse(t1, strlen(t1), "t.yaml", &sc, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(rm_scenario_resolve(&sc, NULL, &res, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(res.cost.nccl.fabric.tiers[0].nodes, 4);
	cr_assert_eq(res.cost.nccl.fabric.tiers[1].nodes, 8);
	rm_scenario_resolved_finish(&res);
	rm_scenario_init(&sc);
	const char *t2 = TOPO_BASE "cluster:\n  gpus_per_node: 8\n  nodes: 2\n  topology:\n    kind: fat_tree\n"
				   "    nics_per_node: 8\n    pxn: false\n    tiers: [{ports: 64}, {oversubscription: 3}]\n";
	cr_assert_eq(rm_scenario_parse(t2, strlen(t2), "t.yaml", &sc, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(sc.nics_per_node, 8);
	cr_assert_eq(rm_scenario_resolve(&sc, NULL, &res, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(res.cost.nccl.fabric.tiers[0].nodes, 6);
	cr_assert_eq(res.cost.nccl.fabric.tiers[1].nodes, 12);
	cr_assert_not(res.cost.nccl.fabric.pxn);
	rm_scenario_resolved_finish(&res);
}

#define TOPO_HEAD TOPO_BASE "cluster:\n  gpus_per_node: 8\n  nodes: 2\n  topology:\n"

Test(parallel, bad_topology_fails_at_its_key)
{
	/* line 5 is "cluster:"; the topology's keys start on line 9 */
	expect_scenario_error(TOPO_HEAD "    kind: mesh\n", RM_INVALID, 9, 11, "unknown fabric \"mesh\"");
	expect_scenario_error(TOPO_HEAD "    kind: rail_optimized\n    tiers:\n      - {nodes: 32, taper: 2}\n",
			      RM_UNKNOWN_KEY, 11, 21, "unknown key \"taper\"");
	expect_scenario_error(TOPO_HEAD "    kind: rail_optimized\n    tiers: [{nodes: 1}]\n", RM_INVALID, 10, 12,
			      "needs a tier above them");
	expect_scenario_error(TOPO_HEAD "    kind: fat_tree\n    tiers: [{nodes: 1, oversubscription: 2}, {nodes: 2}]\n",
			      RM_INVALID, 10, 12, "tiers[0].oversubscription");
	expect_scenario_error(TOPO_HEAD "    kind: fat_tree\n    tiers: [{nodes: 1}, {nodes: 1}]\n", RM_INVALID, 10, 12,
			      "tiers[1].nodes: 1");
	expect_scenario_error(TOPO_HEAD "    kind: fat_tree\n    tiers: [{nodes: 1}]\n", RM_INVALID, 10, 12,
			      "the top tier reaches 1 nodes, the cluster has 2");
	expect_scenario_error(TOPO_HEAD "    tiers: [{nodes: 1}, {nodes: 2}]\n", RM_INVALID, 9, 5, "kind is missing");
	expect_scenario_error(TOPO_HEAD "    kind: fat_tree\n    tiers: [{nodes: 1}, {ports: 64}]\n", RM_INVALID, 10, 26,
			      "only the leaf");
	expect_scenario_error(TOPO_BASE "cluster: {topology: fat_tree}\n", RM_INVALID, 5, 21, "expected a mapping");
	expect_scenario_error(TOPO_BASE "cluster: {nodes: 2, topology: {}}\n", RM_INVALID, 5, 31, "kind is missing");
	expect_scenario_error(TOPO_BASE "cluster: {nodes: 2, nics_per_node: 4, topology: {nics_per_node: 8}}\n",
			      RM_INVALID, 5, 65, "give it once");
}
