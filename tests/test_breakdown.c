/*
 * Unit tests of the step breakdown (sim/breakdown.c): tiny hand-built programs whose op times are
 * fixed (time_s), so every wall share, solo sum, roofline bound and live byte count below is
 * derived by hand in a comment and compared exactly (times to the picosecond). The last cases
 * run `remora simulate --breakdown` and check only the section's presence and that its classes
 * add up to the step time (the numbers themselves move with the cost model).
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "remora/hw.h"
#include "remora/sim.h"

#define US UINT64_C(1000000) /* ps per microsecond */

static const rm_hw_profile *h100(void)
{
	const rm_hw_profile *hw = rm_hw_profile_find("h100-sxm", NULL);
	cr_assert_not_null(hw);
	return hw;
}

/* The default cost model but no op holds SMs: a collective beside a GEMM leaves its rate alone,
 * so overlapped op times are exactly their fixed time_s. */
static double plain_time(const rm_cost_model *self, const rm_cost_op *op, const rm_hw_profile *hw)
{
	(void)self;
	return rm_cost_model_default()->op_time_s(rm_cost_model_default(), op, hw);
}
static int no_sms(const rm_cost_model *self, const rm_cost_op *op, const rm_hw_profile *hw)
{
	(void)self, (void)op, (void)hw;
	return 0;
}
static const rm_cost_model no_sm_model = {.name = "test-no-sms", .op_time_s = plain_time, .sms_held = no_sms};

typedef struct op_spec {
	const char *name;
	rm_cost_kind kind;
	int32_t stream;
	rm_program_phase phase;
	double us;
} op_spec;

/* Adds an op with a fixed duration; waits/records/inputs/outputs as given (may be NULL). */
static int32_t add(rm_program *p, op_spec s, const int32_t *in, uint32_t n_in, const int32_t *out,
		   uint32_t n_out, const int32_t *waits, uint32_t n_waits, const int32_t *rec, uint32_t n_rec)
{
	rm_program_op_desc d = rm_program_op_desc_init(s.name, s.kind, s.stream);
	d.phase = s.phase;
	d.time_s = s.us * 1e-6;
	switch (s.kind) {
	case RM_COST_GEMM:
		/* 1024^3 bf16: 2 * 1024^3 = 2147483648 FLOPs, 3 * 1024^2 * 2 = 6291456 bytes */
		d.cost.gemm = (rm_gemm_shape){.batch = 1, .m = 1024, .n = 1024, .k = 1024, .dtype = RM_DTYPE_BF16};
		break;
	case RM_COST_COLLECTIVE:
		d.cost.collective = (rm_collective_cost){.op = RM_COLL_ALL_GATHER, .bytes = 1 << 30, .group_size = 8, .span = 1};
		break;
	case RM_COST_ELEMENTWISE:
		d.cost.elementwise = (rm_elementwise_cost){.bytes_read = 1 << 20, .bytes_written = 1 << 20};
		break;
	case RM_COST_COPY:
		d.cost.copy = (rm_copy_cost){.dir = RM_COPY_D2H, .bytes = 1 << 20};
		break;
	case RM_COST_ATTENTION:
		d.cost.attention.shape = (rm_attention_shape){.batch = 1, .heads = 32, .kv_heads = 8, .seq = 4096,
							      .head_dim = 128, .causal = true, .fused = true,
							      .dtype = RM_DTYPE_BF16};
		break;
	default:
		break;
	}
	d.inputs = in;
	d.n_inputs = n_in;
	d.outputs = out;
	d.n_outputs = n_out;
	d.waits = waits;
	d.n_waits = n_waits;
	d.records = rec;
	d.n_records = n_rec;
	return rm_program_add_op(p, &d);
}

static int32_t add_op(rm_program *p, op_spec s)
{
	return add(p, s, NULL, 0, NULL, 0, NULL, 0, NULL, 0);
}

static rm_sim *run(const rm_program *p, const rm_cost_model *cost)
{
	rm_error err;
	rm_error_clear(&err);
	rm_sim_options opt = {.hw_queues = 8, .cost = cost};
	rm_sim *sim = rm_sim_create(p, h100(), &opt, &err);
	cr_assert_not_null(sim, "create: %s", err.msg);
	cr_assert_eq(rm_sim_run(sim, &err), RM_OK, "run: %s", err.msg);
	return sim;
}

static rm_breakdown breakdown(const rm_sim *sim, const rm_memory_budget *budget)
{
	rm_error err;
	rm_error_clear(&err);
	rm_breakdown bd;
	cr_assert_eq(rm_sim_breakdown(sim, budget, &bd, &err), RM_OK, "%s", err.msg);
	return bd;
}

/* The walls add up to the step time to the picosecond. */
static void assert_sums(const rm_breakdown *bd)
{
	rm_time_ps sum = 0;
	for (int c = 0; c < RM_BD_COUNT; c++)
		sum += bd->time[c].wall;
	cr_assert_eq(sum, bd->step_time, "classes sum to %llu ps, step %llu ps", (unsigned long long)sum,
		     (unsigned long long)bd->step_time);
}

static void assert_rel(double got, double want, const char *what)
{
	double d = got - want;
	cr_assert(d <= 1e-12 * (want < 0 ? -want : want) && -d <= 1e-12 * (want < 0 ? -want : want),
		  "%s: got %.17g, want %.17g", what, got, want);
}

Test(breakdown, class_names_follow_the_map)
{
	cr_assert_str_eq(rm_breakdown_class_name(RM_BD_GEMM), "gemm");
	cr_assert_str_eq(rm_breakdown_class_name(RM_BD_EXPOSED_COMM), "exposed_comm");
	cr_assert_str_eq(rm_breakdown_class_name(RM_BD_IDLE), "idle");
	cr_assert_null(rm_breakdown_class_name(RM_BD_COUNT));
}

Test(breakdown, gemm_alone_is_all_gemm)
{
	rm_program *p = rm_program_create("gemm");
	rm_program_add_stream(p, "compute", RM_STREAM_COMPUTE, 0);
	add_op(p, (op_spec){"gemm", RM_COST_GEMM, 0, RM_PPHASE_FWD, 10});
	const rm_hw_profile *hw = h100();
	rm_sim *sim = run(p, NULL);
	rm_breakdown bd = breakdown(sim, NULL);
	/* one op of 10 us from 0: the step is 10 us, every picosecond of it gemm */
	cr_assert_eq(bd.step_time, 10 * US);
	cr_assert_eq(bd.time[RM_BD_GEMM].wall, 10 * US);
	cr_assert_eq(bd.time[RM_BD_GEMM].busy, 10 * US);
	cr_assert_eq(bd.time[RM_BD_GEMM].solo, 10 * US);
	cr_assert_eq(bd.time[RM_BD_GEMM].ops, 1);
	cr_assert_eq(bd.time[RM_BD_IDLE].wall, 0);
	assert_sums(&bd);
	/* FLOPs 2 * 1024^3 = 2147483648; bytes (A + B + C) 3 * 1024^2 * 2 B = 6291456 */
	cr_assert_eq(bd.time[RM_BD_GEMM].flops, 2147483648.0);
	cr_assert_eq(bd.time[RM_BD_GEMM].bytes, 6291456.0);
	/* roofline: max(2147483648 / 989.4e12 = 2.170 us, 6291456 / 3350e9 = 1.878 us) = the FLOPs */
	assert_rel(bd.time[RM_BD_GEMM].roofline_s, 2147483648.0 / (hw->bf16_TFLOPs * 1e12), "roofline");
	/* achieved: 2147483648 FLOPs in 10 us = 214.7483648 TFLOP/s */
	double v;
	const char *unit;
	cr_assert(rm_breakdown_achieved(&bd, RM_BD_GEMM, &v, &unit));
	cr_assert_str_eq(unit, "TFLOP/s");
	assert_rel(v, 214.7483648, "achieved");
	cr_assert_not(rm_breakdown_achieved(&bd, RM_BD_IDLE, &v, &unit));
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

Test(breakdown, gemm_overlapping_a_collective_splits_the_step)
{
	rm_program *p = rm_program_create("overlap");
	rm_program_add_stream(p, "compute", RM_STREAM_COMPUTE, 0);
	rm_program_add_stream(p, "collective", RM_STREAM_COLLECTIVE, 0);
	add_op(p, (op_spec){"gemm", RM_COST_GEMM, 0, RM_PPHASE_FWD, 10});
	add_op(p, (op_spec){"all_gather", RM_COST_COLLECTIVE, 1, RM_PPHASE_FWD, 14});
	rm_sim *sim = run(p, &no_sm_model);
	rm_breakdown bd = breakdown(sim, NULL);
	/* both start at 0; [0, 10) the gemm runs: gemm; [10, 14) only the collective: exposed */
	cr_assert_eq(bd.step_time, 14 * US);
	cr_assert_eq(bd.time[RM_BD_GEMM].wall, 10 * US);
	cr_assert_eq(bd.time[RM_BD_EXPOSED_COMM].wall, 4 * US);
	/* the collective runs the whole 14 us (busy and solo) though only 4 are exposed */
	cr_assert_eq(bd.time[RM_BD_EXPOSED_COMM].busy, 14 * US);
	cr_assert_eq(bd.time[RM_BD_EXPOSED_COMM].solo, 14 * US);
	cr_assert_eq(bd.time[RM_BD_EXPOSED_COMM].wall, rm_sim_get_metrics(sim)->exposed_comm);
	assert_sums(&bd);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

Test(breakdown, gemm_slowed_by_a_collective_holding_sms_gets_its_stretched_time)
{
	rm_program *p = rm_program_create("overlap-sms");
	rm_program_add_stream(p, "compute", RM_STREAM_COMPUTE, 0);
	/* the more urgent stream: the all-gather launches first and takes its SMs before the gemm's
	 * CTAs fill them (launched second at equal priority, it would wait for them) */
	rm_program_add_stream(p, "collective", RM_STREAM_COLLECTIVE, -1);
	/* 1536 x 2816 output: ceil(1536/128) * ceil(2816/256) = 12 * 11 = 132 tiles, one wave on
	 * the 132 SMs */
	rm_program_op_desc d = rm_program_op_desc_init("gemm", RM_COST_GEMM, 0);
	d.time_s = 10e-6;
	d.cost.gemm = (rm_gemm_shape){.batch = 1, .m = 1536, .n = 2816, .k = 1024, .dtype = RM_DTYPE_BF16};
	rm_program_add_op(p, &d);
	add_op(p, (op_spec){"all_gather", RM_COST_COLLECTIVE, 1, RM_PPHASE_FWD, 6});
	rm_sim *sim = run(p, NULL);
	rm_breakdown bd = breakdown(sim, NULL);
	/* the 1 GiB all-gather holds 24 of the 132 SMs for 6 us: 132 tiles on the 108 left take 2
	 * waves, half speed (the engine's wave model): 3 us of the gemm's 10 us of work are done at
	 * 6 us, the other 7 us run at full speed: it ends at 13 us, all of it gemm */
	cr_assert_eq(rm_sim_op_end(sim, 0), 13 * US);
	cr_assert_eq(bd.step_time, 13 * US);
	cr_assert_eq(bd.time[RM_BD_GEMM].wall, 13 * US);
	cr_assert_eq(bd.time[RM_BD_GEMM].solo, 10 * US);
	cr_assert_eq(bd.time[RM_BD_EXPOSED_COMM].wall, 0);
	cr_assert_eq(bd.time[RM_BD_EXPOSED_COMM].busy, 6 * US);
	assert_sums(&bd);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

Test(breakdown, collective_alone_is_exposed_communication)
{
	rm_program *p = rm_program_create("coll");
	rm_program_add_stream(p, "collective", RM_STREAM_COLLECTIVE, 0);
	add_op(p, (op_spec){"all_gather", RM_COST_COLLECTIVE, 0, RM_PPHASE_BWD, 2500});
	const rm_hw_profile *hw = h100();
	rm_sim *sim = run(p, NULL);
	rm_breakdown bd = breakdown(sim, NULL);
	cr_assert_eq(bd.time[RM_BD_EXPOSED_COMM].wall, 2500 * US);
	assert_sums(&bd);
	/* bus bytes: 2^30 * (8 - 1) / 8 = 939524096 (nccl-tests all-gather busBW factor) */
	cr_assert_eq(bd.time[RM_BD_EXPOSED_COMM].bytes, 939524096.0);
	/* roofline 939524096 / 450e9 = 2.0878 ms */
	assert_rel(bd.time[RM_BD_EXPOSED_COMM].roofline_s, 939524096.0 / (hw->nvlink_GBps * 1e9), "roofline");
	/* achieved busBW 939524096 B / 2.5 ms = 375.8096384 GB/s */
	double v;
	const char *unit;
	cr_assert(rm_breakdown_achieved(&bd, RM_BD_EXPOSED_COMM, &v, &unit));
	cr_assert_str_eq(unit, "GB/s");
	assert_rel(v, 375.8096384, "busBW");
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

Test(breakdown, a_gap_with_nothing_running_is_idle)
{
	/* The engine starts an op as soon as it may, so a gap comes from measured or host-delayed
	 * times: feed them straight to rm_breakdown_compute. gemm [2, 5) us, elementwise [9, 10) us. */
	rm_program *p = rm_program_create("gap");
	rm_program_add_stream(p, "compute", RM_STREAM_COMPUTE, 0);
	add_op(p, (op_spec){"gemm", RM_COST_GEMM, 0, RM_PPHASE_FWD, 3});
	add_op(p, (op_spec){"add", RM_COST_ELEMENTWISE, 0, RM_PPHASE_FWD, 1});
	rm_time_ps start[] = {2 * US, 9 * US}, end[] = {5 * US, 10 * US}, solo[] = {3 * US, 1 * US};
	rm_breakdown_input in = {.prog = p, .hw = h100(), .start = start, .end = end, .solo = solo};
	rm_breakdown bd;
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_breakdown_compute(&in, &bd, &err), RM_OK, "%s", err.msg);
	/* step 10 us: gemm 3, memory_bound 1, idle [0, 2) + [5, 9) = 6 */
	cr_assert_eq(bd.step_time, 10 * US);
	cr_assert_eq(bd.time[RM_BD_GEMM].wall, 3 * US);
	cr_assert_eq(bd.time[RM_BD_MEMORY_BOUND].wall, 1 * US);
	cr_assert_eq(bd.time[RM_BD_IDLE].wall, 6 * US);
	assert_sums(&bd);
	/* memory_bound: 2 MiB read + written = 2097152 B in 1 us = 2.097152 TB/s */
	double v;
	const char *unit;
	cr_assert(rm_breakdown_achieved(&bd, RM_BD_MEMORY_BOUND, &v, &unit));
	cr_assert_str_eq(unit, "TB/s");
	assert_rel(v, 2.097152, "achieved");
	/* an op ending before it starts is refused, naming it */
	end[1] = 8 * US;
	cr_assert_eq(rm_breakdown_compute(&in, &bd, &err), RM_INVALID);
	cr_assert(strstr(err.msg, "ops[1] 'add'"), "%s", err.msg);
	rm_program_destroy(p);
}

Test(breakdown, two_compute_ops_at_once_split_equally)
{
	rm_program *p = rm_program_create("two");
	rm_program_add_stream(p, "a", RM_STREAM_COMPUTE, 0);
	rm_program_add_stream(p, "b", RM_STREAM_COMPUTE, 0);
	add_op(p, (op_spec){"gemm", RM_COST_GEMM, 0, RM_PPHASE_FWD, 10});
	/* 5.000001 us: an odd number of picoseconds to split in two */
	add_op(p, (op_spec){"norm", RM_COST_ELEMENTWISE, 1, RM_PPHASE_FWD, 5.000001});
	rm_sim *sim = run(p, NULL);
	rm_breakdown bd = breakdown(sim, NULL);
	/* gemm (SMs) and norm (HBM) share nothing: both run at full rate from 0. [0, 5000001) ps
	 * has two compute ops: 2500000 ps each and the odd picosecond to the first class in class
	 * order, gemm; [5000001, 10000000) gemm alone: gemm 2500001 + 4999999 = 7500000 ps,
	 * memory_bound 2500000 ps */
	cr_assert_eq(rm_sim_op_end(sim, 1), UINT64_C(5000001));
	cr_assert_eq(bd.time[RM_BD_GEMM].wall, UINT64_C(7500000));
	cr_assert_eq(bd.time[RM_BD_MEMORY_BOUND].wall, UINT64_C(2500000));
	cr_assert_eq(bd.time[RM_BD_MEMORY_BOUND].busy, UINT64_C(5000001));
	assert_sums(&bd);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

Test(breakdown, two_gemms_sharing_the_sms_split_equally)
{
	rm_program *p = rm_program_create("two-gemms");
	rm_program_add_stream(p, "a", RM_STREAM_COMPUTE, 0);
	rm_program_add_stream(p, "b", RM_STREAM_COMPUTE, 0);
	add_op(p, (op_spec){"gemm", RM_COST_GEMM, 0, RM_PPHASE_FWD, 10});
	add_op(p, (op_spec){"gemm.recompute", RM_COST_GEMM, 1, RM_PPHASE_RECOMPUTE, 10});
	rm_sim *sim = run(p, NULL);
	rm_breakdown bd = breakdown(sim, NULL);
	/* same priority: each gets half the SMs, both end at 20 us; every instant is split 1:1 */
	cr_assert_eq(bd.step_time, 20 * US);
	cr_assert_eq(bd.time[RM_BD_GEMM].wall, 10 * US);
	cr_assert_eq(bd.time[RM_BD_RECOMPUTE].wall, 10 * US);
	cr_assert_eq(bd.time[RM_BD_GEMM].busy, 20 * US);
	/* achieved over the attributed wall: 2147483648 FLOPs / 10 us = 214.7 TFLOP/s, what the
	 * gemm alone reaches: the split charges each op its share of the device */
	double v;
	const char *unit;
	cr_assert(rm_breakdown_achieved(&bd, RM_BD_GEMM, &v, &unit));
	assert_rel(v, 214.7483648, "achieved");
	assert_sums(&bd);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

Test(breakdown, phases_pick_the_class)
{
	/* one stream, one op after another: attention fwd 1, attention bwd 2, norm 3, recompute
	 * gemm 4, recompute norm 5, optimizer 6, recompute all-gather 7, copy 8 us */
	rm_program *p = rm_program_create("phases");
	rm_program_add_stream(p, "compute", RM_STREAM_COMPUTE, 0);
	add_op(p, (op_spec){"attn", RM_COST_ATTENTION, 0, RM_PPHASE_FWD, 1});
	rm_program_op_desc d = rm_program_op_desc_init("attn.bwd", RM_COST_ATTENTION, 0);
	d.phase = RM_PPHASE_BWD;
	d.time_s = 2e-6;
	d.cost.attention.shape = (rm_attention_shape){.batch = 1, .heads = 32, .kv_heads = 8, .seq = 4096,
						      .head_dim = 128, .causal = true, .fused = true, .dtype = RM_DTYPE_BF16};
	d.cost.attention.backward = true;
	rm_program_add_op(p, &d);
	add_op(p, (op_spec){"norm", RM_COST_ELEMENTWISE, 0, RM_PPHASE_BWD, 3});
	add_op(p, (op_spec){"gemm.remat", RM_COST_GEMM, 0, RM_PPHASE_RECOMPUTE, 4});
	add_op(p, (op_spec){"norm.remat", RM_COST_ELEMENTWISE, 0, RM_PPHASE_RECOMPUTE, 5});
	add_op(p, (op_spec){"adamw", RM_COST_ELEMENTWISE, 0, RM_PPHASE_OPTIMIZER, 6});
	add_op(p, (op_spec){"all_gather.remat", RM_COST_COLLECTIVE, 0, RM_PPHASE_RECOMPUTE, 7});
	add_op(p, (op_spec){"offload", RM_COST_COPY, 0, RM_PPHASE_FWD, 8});
	rm_sim *sim = run(p, NULL);
	rm_breakdown bd = breakdown(sim, NULL);
	cr_assert_eq(bd.step_time, 36 * US);
	cr_assert_eq(bd.time[RM_BD_ATTENTION_FWD].wall, 1 * US);
	cr_assert_eq(bd.time[RM_BD_ATTENTION_BWD].wall, 2 * US);
	cr_assert_eq(bd.time[RM_BD_MEMORY_BOUND].wall, 3 * US);
	/* recompute: any kind in phase recompute, 4 + 5 + 7 = 16 us, 3 ops */
	cr_assert_eq(bd.time[RM_BD_RECOMPUTE].wall, 16 * US);
	cr_assert_eq(bd.time[RM_BD_RECOMPUTE].ops, 3);
	cr_assert_eq(bd.time[RM_BD_RECOMPUTE].wall, rm_sim_get_metrics(sim)->recompute);
	cr_assert_eq(bd.time[RM_BD_OPTIMIZER].wall, 6 * US);
	cr_assert_eq(bd.time[RM_BD_EXPOSED_COMM].wall, 0);
	cr_assert_eq(bd.time[RM_BD_COPIES].wall, 8 * US);
	assert_sums(&bd);
	/* attention FLOPs: forward 4 * 32 * 4096^2 * 128 / 2 (causal) = 137438953472, backward 2.5x
	 * = 343597383680; fwd bytes: (q, o: 2 * 32 + k, v: 2 * 8) * 4096 * 128 * 2 B = 83886080 */
	cr_assert_eq(bd.time[RM_BD_ATTENTION_FWD].flops, 137438953472.0);
	cr_assert_eq(bd.time[RM_BD_ATTENTION_BWD].flops, 343597383680.0);
	cr_assert_eq(bd.time[RM_BD_ATTENTION_FWD].bytes, 83886080.0);
	/* copy: 1 MiB d2h, roofline 1048576 / 64e9 (PCIe) */
	assert_rel(bd.time[RM_BD_COPIES].roofline_s, 1048576.0 / (h100()->pcie_GBps * 1e9), "copy roofline");
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

Test(breakdown, fp8_gemm_against_the_fp8_peak)
{
	rm_program *p = rm_program_create("fp8");
	rm_program_add_stream(p, "compute", RM_STREAM_COMPUTE, 0);
	rm_program_op_desc d = rm_program_op_desc_init("gemm.fp8", RM_COST_GEMM, 0);
	d.time_s = 10e-6;
	d.cost.gemm = (rm_gemm_shape){.batch = 1, .m = 8192, .n = 8192, .k = 8192, .dtype = RM_DTYPE_FP8_E4M3};
	rm_program_add_op(p, &d);
	const rm_hw_profile *hw = h100();
	rm_sim *sim = run(p, NULL);
	rm_breakdown bd = breakdown(sim, NULL);
	/* 2 * 8192^3 = 1099511627776 FLOPs / 1978.9e12 = 0.5556 ms (bytes 3 * 8192^2 * 1 B / 3350e9
	 * = 0.06 ms are not the bound) */
	assert_rel(bd.time[RM_BD_GEMM].roofline_s, 1099511627776.0 / (hw->fp8_TFLOPs * 1e12), "fp8 roofline");
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

/*
 * Memory by role at the peak. Persistent: param_shard 1000 B, optimizer_state 2000 B, gradient
 * 500 B (3500 B). fwd (elementwise, [0, 10) us) makes act (activation, 300 B, read by bwd) and
 * ws (workspace, 50 B, unread: freed when fwd ends); gather (a PCIe copy, [0, 4) us,
 * sharing nothing with fwd) makes gp (gathered_param, 400 B, read by bwd); bwd ([10, 15) us,
 * after fwd and gather's event) makes
 * dg (gradient, 600 B, read by apply [15, 18) us).
 *   t = 0:  3500 + 300 + 50 + 400 = 4250
 *   t = 10: ws freed first (-50), then dg allocated (+600): 4800  <- the peak
 *   t = 15: act, gp freed: 4100; t = 18: dg freed: 3500
 * At t = 10: param_shard 1000, optimizer_state 2000, gradient 500 + 600 = 1100, activation
 * 300, gathered_param 400, workspace 0 (freed before dg is allocated), residual 0.
 */
Test(breakdown, memory_by_role_at_the_peak)
{
	rm_program *p = rm_program_create("memory");
	rm_program_add_stream(p, "compute", RM_STREAM_COMPUTE, 0);
	rm_program_add_stream(p, "copy", RM_STREAM_COPY, 0);
	rm_program_add_tensor(p, "w", 1000, RM_ROLE_PARAM_SHARD, RM_LOC_DEVICE, true);
	rm_program_add_tensor(p, "adam", 2000, RM_ROLE_OPTIMIZER_STATE, RM_LOC_DEVICE, true);
	rm_program_add_tensor(p, "grad", 500, RM_ROLE_GRADIENT, RM_LOC_DEVICE, true);
	int32_t act = rm_program_add_tensor(p, "act", 300, RM_ROLE_ACTIVATION, RM_LOC_DEVICE, false);
	int32_t ws = rm_program_add_tensor(p, "ws", 50, RM_ROLE_WORKSPACE, RM_LOC_DEVICE, false);
	int32_t gp = rm_program_add_tensor(p, "gp", 400, RM_ROLE_GATHERED_PARAM, RM_LOC_DEVICE, false);
	int32_t dg = rm_program_add_tensor(p, "dg", 600, RM_ROLE_GRADIENT, RM_LOC_DEVICE, false);
	/* a host tensor is not device memory: it never counts */
	int32_t host = rm_program_add_tensor(p, "host", 1 << 20, RM_ROLE_RESIDUAL, RM_LOC_HOST, false);
	int32_t ev = rm_program_add_event(p, "gathered");
	int32_t fwd_out[] = {act, ws, host};
	add(p, (op_spec){"fwd", RM_COST_ELEMENTWISE, 0, RM_PPHASE_FWD, 10}, NULL, 0, fwd_out, 3, NULL, 0, NULL, 0);
	add(p, (op_spec){"gather", RM_COST_COPY, 1, RM_PPHASE_FWD, 4}, NULL, 0, &gp, 1, NULL, 0, &ev, 1);
	int32_t bwd_in[] = {act, gp, host};
	add(p, (op_spec){"bwd", RM_COST_ELEMENTWISE, 0, RM_PPHASE_BWD, 5}, bwd_in, 3, &dg, 1, &ev, 1, NULL, 0);
	add(p, (op_spec){"apply", RM_COST_ELEMENTWISE, 0, RM_PPHASE_OPTIMIZER, 3}, &dg, 1, NULL, 0, NULL, 0, NULL, 0);
	rm_sim *sim = run(p, NULL);
	const rm_hw_profile *hw = h100();
	rm_memory_budget budget = rm_memory_budget_default(hw, 8, 1);
	rm_breakdown bd = breakdown(sim, &budget);
	cr_assert_eq(bd.peak_time, 10 * US);
	cr_assert_eq(bd.role_bytes[RM_ROLE_PARAM_SHARD], 1000);
	cr_assert_eq(bd.role_bytes[RM_ROLE_OPTIMIZER_STATE], 2000);
	cr_assert_eq(bd.role_bytes[RM_ROLE_GRADIENT], 1100);
	cr_assert_eq(bd.role_bytes[RM_ROLE_ACTIVATION], 300);
	cr_assert_eq(bd.role_bytes[RM_ROLE_GATHERED_PARAM], 400);
	cr_assert_eq(bd.role_bytes[RM_ROLE_WORKSPACE], 0);
	cr_assert_eq(bd.role_bytes[RM_ROLE_RESIDUAL], 0);
	cr_assert_eq(bd.peak_tensor_bytes, 4800);
	/* the engine's own peak agrees */
	cr_assert_eq(rm_sim_get_metrics(sim)->peak_memory_bytes, 4800);
	/* fixed costs: the budget's CUDA context + NCCL buffers + cuBLASLt workspace on top */
	cr_assert(budget.headroom_bytes > 0);
	cr_assert_eq(budget.headroom_bytes,
		     budget.cuda_context_bytes + budget.nccl_buffer_bytes + budget.cublas_workspace_bytes);
	cr_assert_eq(bd.fixed_bytes, budget.headroom_bytes);
	cr_assert_eq(bd.peak_total_bytes, 4800 + budget.headroom_bytes);
	/* the JSON carries the same figures */
	json_t *j = rm_breakdown_json(&bd);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(j, "memory"), "tensor_bytes")), 4800);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(json_object_get(j, "memory"), "by_role"),
							"gradient")),
		     1100);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(json_object_get(j, "time"), "optimizer"),
							"wall_ps")),
		     3 * US);
	json_decref(j);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

Test(breakdown, refused_before_a_run)
{
	rm_program *p = rm_program_create("none");
	rm_program_add_stream(p, "compute", RM_STREAM_COMPUTE, 0);
	add_op(p, (op_spec){"gemm", RM_COST_GEMM, 0, RM_PPHASE_FWD, 1});
	rm_error err;
	rm_error_clear(&err);
	rm_sim *sim = rm_sim_create(p, h100(), NULL, &err);
	cr_assert_not_null(sim);
	rm_breakdown bd;
	cr_assert_eq(rm_sim_breakdown(sim, NULL, &bd, &err), RM_INVALID);
	cr_assert(strstr(err.msg, "not completed a run"), "%s", err.msg);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

/* ---- the command ------------------------------------------------------------------------- */

/* stdout of `remora ARGS` (caller frees) and its exit code. */
static char *remora(const char *args, int *code)
{
	const char *bin = getenv("REMORA_BIN"), *data = getenv("REMORA_DATA_DIR");
	cr_assert(bin && data, "REMORA_BIN and REMORA_DATA_DIR must be set");
	char cmd[4096];
	snprintf(cmd, sizeof(cmd), "cd '%s/..' && '%s' %s 2>/dev/null", data, bin, args);
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	size_t cap = 1 << 16, len = 0, got;
	char *out = malloc(cap);
	while ((got = fread(out + len, 1, cap - len - 1, f)) > 0) {
		len += got;
		if (cap - len < 4096)
			out = realloc(out, cap *= 2);
	}
	out[len] = '\0';
	int st = pclose(f);
	*code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	return out;
}

#define SEED "data/scenarios/seed-llama2-7b-fsdp8-h100.yaml"

Test(breakdown, cli_json_classes_sum_to_the_step_time, .timeout = 120)
{
	int code;
	char *out = remora("simulate " SEED " --breakdown --json", &code);
	cr_assert_eq(code, 0);
	json_error_t jerr;
	json_t *doc = json_loads(out, 0, &jerr);
	cr_assert_not_null(doc, "%s", jerr.text);
	json_t *bd = json_object_get(doc, "breakdown");
	cr_assert_not_null(bd);
	json_int_t step = json_integer_value(json_object_get(doc, "step_time_ps"));
	cr_assert(step > 0);
	cr_assert_eq(json_integer_value(json_object_get(bd, "step_time_ps")), step);
	json_t *time = json_object_get(bd, "time");
	json_int_t sum = 0;
	for (int c = 0; c < RM_BD_COUNT; c++) {
		json_t *cl = json_object_get(time, rm_breakdown_class_name((rm_breakdown_class)c));
		cr_assert_not_null(cl, "class %s missing", rm_breakdown_class_name((rm_breakdown_class)c));
		sum += json_integer_value(json_object_get(cl, "wall_ps"));
	}
	cr_assert_eq(sum, step);
	/* the live tensors at the peak are the engine's peak */
	json_t *mem = json_object_get(bd, "memory");
	cr_assert_eq(json_integer_value(json_object_get(mem, "tensor_bytes")),
		     json_integer_value(json_object_get(doc, "peak_memory_bytes")));
	json_decref(doc);
	free(out);
	/* without --breakdown the result has no breakdown member */
	out = remora("simulate " SEED " --json", &code);
	cr_assert_eq(code, 0);
	doc = json_loads(out, 0, &jerr);
	cr_assert_not_null(doc);
	cr_assert_null(json_object_get(doc, "breakdown"));
	json_decref(doc);
	free(out);
}

Test(breakdown, cli_text_has_the_section, .timeout = 120)
{
	int code;
	char *out = remora("simulate " SEED " --breakdown", &code);
	cr_assert_eq(code, 0);
	cr_assert(strstr(out, "time by class"), "%s", out);
	for (int c = 0; c < RM_BD_COUNT; c++) {
		char row[64];
		snprintf(row, sizeof(row), "\n    %s ", rm_breakdown_class_name((rm_breakdown_class)c));
		cr_assert(strstr(out, row), "no row for %s", rm_breakdown_class_name((rm_breakdown_class)c));
	}
	cr_assert(strstr(out, "memory at the peak"));
	cr_assert(strstr(out, "CUDA context"));
	free(out);
	/* schedule has no breakdown */
	out = remora("schedule " SEED " --breakdown", &code);
	cr_assert_eq(code, 2);
	free(out);
}

Test(breakdown, cli_run_program_breakdown_sums_to_the_step_time, .timeout = 120)
{
	const char *tdata = getenv("REMORA_TEST_DATA");
	cr_assert_not_null(tdata, "REMORA_TEST_DATA must be set");
	char args[2048];
	snprintf(args, sizeof(args), "run-program '%s/programs/example.json' --breakdown --json", tdata);
	int code;
	char *out = remora(args, &code);
	cr_assert_eq(code, 0);
	json_error_t jerr;
	json_t *doc = json_loads(out, 0, &jerr);
	cr_assert_not_null(doc, "%s", jerr.text);
	json_t *time = json_object_get(json_object_get(doc, "breakdown"), "time");
	cr_assert_not_null(time);
	json_int_t sum = 0;
	const char *key;
	json_t *cl;
	json_object_foreach(time, key, cl)
		sum += json_integer_value(json_object_get(cl, "wall_ps"));
	cr_assert_eq(json_object_size(time), RM_BD_COUNT);
	cr_assert_eq(sum, json_integer_value(json_object_get(doc, "step_time_ps")));
	/* exposed communication is the engine's own figure, from the same timeline */
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(time, "exposed_comm"), "wall_ps")),
		     (json_int_t)(json_real_value(json_object_get(doc, "exposed_comm_s")) * 1e12 + 0.5));
	json_decref(doc);
	free(out);
	snprintf(args, sizeof(args), "run-program '%s/programs/example.json' --breakdown", tdata);
	out = remora(args, &code);
	cr_assert_eq(code, 0);
	cr_assert(strstr(out, "time by class") && strstr(out, "memory at the peak"), "%s", out);
	free(out);
}
