/*
 * Unit tests of the engine (sim/engine.c, result.c, trace.c): every expected time is computed
 * by hand and compared exactly, to the picosecond.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "remora/cost.h"
#include "remora/hw.h"
#include "remora/nccl.h"
#include "remora/sim.h"

#define US UINT64_C(1000000) /* ps per microsecond */

static char *trace_of(const rm_sim *sim, size_t *len); /* the run's Chrome trace, NUL-ended */

static const rm_hw_profile *h100(void)
{
	const rm_hw_profile *hw = rm_hw_profile_find("h100-sxm", NULL);
	cr_assert_not_null(hw);
	return hw;
}

/* An op of a kind with a fixed duration (time_s) or, when us < 0, the cost model's. */
static int32_t op_add(rm_program *p, const char *name, rm_cost_kind kind, int32_t stream, double us,
		      const int32_t *in, uint32_t n_in, const int32_t *out, uint32_t n_out,
		      const int32_t *waits, uint32_t n_waits, const int32_t *records, uint32_t n_rec)
{
	rm_program_op_desc d = rm_program_op_desc_init(name, kind, stream);
	d.time_s = us >= 0 ? us * 1e-6 : -1;
	if (kind == RM_COST_COLLECTIVE)
		d.cost.collective = (rm_collective_cost){.op = RM_COLL_ALL_GATHER,
							 .bytes = 1 << 30, /* 24 channels */
							 .group_size = 8,
							 .span = 1};
	if (kind == RM_COST_COPY)
		d.cost.copy = (rm_copy_cost){.dir = RM_COPY_H2D, .bytes = 1};
	if (kind == RM_COST_ATTENTION)
		d.cost.attention.shape = (rm_attention_shape){.batch = 1, .heads = 32, .kv_heads = 32,
							      .seq = 4096, .head_dim = 128, .causal = true,
							      .dtype = RM_DTYPE_BF16};
	d.inputs = in;
	d.n_inputs = n_in;
	d.outputs = out;
	d.n_outputs = n_out;
	d.waits = waits;
	d.n_waits = n_waits;
	d.records = records;
	d.n_records = n_rec;
	return rm_program_add_op(p, &d);
}

static rm_sim *run(const rm_program *p, const rm_hw_profile *hw, int queues)
{
	rm_error err;
	rm_error_clear(&err);
	rm_sim_options opt = {.hw_queues = queues, .memory_timeline = true};
	rm_sim *sim = rm_sim_create(p, hw, &opt, &err);
	cr_assert_not_null(sim, "create: %s", err.msg);
	cr_assert_eq(rm_sim_run(sim, &err), RM_OK, "run: %s", err.msg);
	return sim;
}

Test(engine, independent_ops_on_two_streams_run_in_parallel)
{
	rm_program *p = rm_program_create("parallel");
	rm_program_add_stream(p, "compute", RM_STREAM_COMPUTE, 0);
	rm_program_add_stream(p, "copy", RM_STREAM_COPY, 0);
	op_add(p, "gemm", RM_COST_GEMM, 0, 10, NULL, 0, NULL, 0, NULL, 0, NULL, 0);
	op_add(p, "h2d", RM_COST_COPY, 1, 7, NULL, 0, NULL, 0, NULL, 0, NULL, 0);
	rm_sim *sim = run(p, h100(), 8);
	cr_assert_eq(rm_sim_op_start(sim, 0), 0);
	cr_assert_eq(rm_sim_op_start(sim, 1), 0);
	cr_assert_eq(rm_sim_op_end(sim, 0), 10 * US);
	cr_assert_eq(rm_sim_op_end(sim, 1), 7 * US);
	cr_assert_eq(rm_sim_get_metrics(sim)->step_time, 10 * US);
	cr_assert_eq(rm_sim_stream_busy(sim, 1), 7 * US);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

Test(engine, in_order_stream_and_exact_event_wait)
{
	rm_program *p = rm_program_create("wait");
	rm_program_add_stream(p, "a", RM_STREAM_COMPUTE, 0);
	rm_program_add_stream(p, "b", RM_STREAM_COPY, 0);
	int32_t e = rm_program_add_event(p, "e");
	op_add(p, "a0", RM_COST_GEMM, 0, 3, NULL, 0, NULL, 0, NULL, 0, NULL, 0);
	op_add(p, "a1", RM_COST_GEMM, 0, 10, NULL, 0, NULL, 0, NULL, 0, &e, 1);
	op_add(p, "b0", RM_COST_COPY, 1, 1, NULL, 0, NULL, 0, NULL, 0, NULL, 0);
	op_add(p, "b1", RM_COST_COPY, 1, 5, NULL, 0, NULL, 0, &e, 1, NULL, 0);
	rm_sim *sim = run(p, h100(), 8);
	cr_assert_eq(rm_sim_op_start(sim, 1), 3 * US); /* in order on its stream */
	cr_assert_eq(rm_sim_op_start(sim, 3), 13 * US); /* exactly when a1 records e */
	cr_assert_eq(rm_sim_op_end(sim, 3), 18 * US);
	cr_assert_eq(rm_sim_get_metrics(sim)->step_time, 18 * US);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

/* A GEMM of duration T overlapped for its whole length by a collective holding 24 of 132 SMs runs
 * in waves on the 108 SMs left (docs/reference/hardware.md: NCCL ring on 8x H100 uses 24 channels =
 * 24 SMs): 8192^2 output in 128x256 tiles is 64 x 32 = 2048 tiles, ceil(2048/132) = 16 waves alone,
 * ceil(2048/108) = 19 beside the collective: T * 19/16. */
Test(engine, gemm_slowed_by_collective_sms)
{
	rm_program *p = rm_program_create("overlap");
	rm_program_add_stream(p, "compute", RM_STREAM_COMPUTE, 0);
	rm_program_add_stream(p, "comm", RM_STREAM_COLLECTIVE, -1);
	rm_program_op_desc d = rm_program_op_desc_init("gemm", RM_COST_GEMM, 0);
	d.cost.gemm = (rm_gemm_shape){.batch = 1, .m = 8192, .n = 8192, .k = 8192,
				      .dtype = RM_DTYPE_BF16};
	rm_program_add_op(p, &d); /* cost model: about 1.4 ms */
	op_add(p, "ag", RM_COST_COLLECTIVE, 1, 5000, NULL, 0, NULL, 0, NULL, 0, NULL, 0);
	rm_sim *sim = run(p, h100(), 8);
	cr_assert_eq(rm_sim_op_sms(sim, 1), 24);
	rm_time_ps T = rm_sim_op_solo(sim, 0);
	cr_assert(T > 1000 * US && T < 5000 * US * 108 / 132);
	rm_time_ps expect = (T * 19 + 15) / 16; /* ceil(T * 19 / 16) */
	cr_assert_eq(rm_sim_op_end(sim, 0), expect, "gemm ended at %llu ps, expected %llu",
		     (unsigned long long)rm_sim_op_end(sim, 0), (unsigned long long)expect);
	cr_assert_eq(rm_sim_op_end(sim, 1), 5000 * US); /* the collective is not slowed */
	const rm_sim_metrics *m = rm_sim_get_metrics(sim);
	cr_assert_eq(m->exposed_comm, 5000 * US - expect);
	cr_assert_eq(m->comm_total, 5000 * US);
	cr_assert_eq(m->compute_busy, expect);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

/* A one-wave GEMM (2048^2 output: 8 x 16 = 128 tiles <= 132 SMs) beside a 24-SM collective needs
 * ceil(128/108) = 2 waves: twice its time alone, the ~2x docs/reference/hardware.md reports for a
 * one-wave GEMM next to NCCL, where the fluid model would say 132/108 = 1.22x. */
Test(engine, one_wave_gemm_runs_a_second_wave_beside_a_collective)
{
	rm_program *p = rm_program_create("one-wave");
	rm_program_add_stream(p, "compute", RM_STREAM_COMPUTE, 0);
	rm_program_add_stream(p, "comm", RM_STREAM_COLLECTIVE, -1);
	rm_program_op_desc d = rm_program_op_desc_init("gemm", RM_COST_GEMM, 0);
	d.cost.gemm = (rm_gemm_shape){.batch = 1, .m = 2048, .n = 2048, .k = 8192, .dtype = RM_DTYPE_BF16};
	rm_program_add_op(p, &d);
	op_add(p, "ag", RM_COST_COLLECTIVE, 1, 5000, NULL, 0, NULL, 0, NULL, 0, NULL, 0);
	rm_sim *sim = run(p, h100(), 8);
	rm_time_ps T = rm_sim_op_solo(sim, 0);
	cr_assert_eq(rm_sim_op_end(sim, 0), 2 * T);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

/* A calibrated interference fit (remora calib fit: interference.sms) replaces the wave count: a
 * slowdown of 0.0085 per SM held makes a GEMM beside a 24-SM collective 1 + 0.0085 x 24 = 1.204x. */
Test(engine, calibrated_interference_replaces_waves)
{
	rm_program *p = rm_program_create("calibrated");
	rm_program_add_stream(p, "compute", RM_STREAM_COMPUTE, 0);
	rm_program_add_stream(p, "comm", RM_STREAM_COLLECTIVE, -1);
	rm_program_op_desc d = rm_program_op_desc_init("gemm", RM_COST_GEMM, 0);
	d.cost.gemm = (rm_gemm_shape){.batch = 1, .m = 2048, .n = 2048, .k = 8192, .dtype = RM_DTYPE_BF16};
	rm_program_add_op(p, &d);
	op_add(p, "ag", RM_COST_COLLECTIVE, 1, 5000, NULL, 0, NULL, 0, NULL, 0, NULL, 0);
	rm_hw_profile hw = *h100();
	hw.gemm_slowdown_per_sm = 0.0085;
	rm_sim *sim = run(p, &hw, 8);
	rm_time_ps T = rm_sim_op_solo(sim, 0);
	/* rate 1e6 / (1e6 + 8500 x 24) = 1e6 / 1204000: T x 1.204, rounded up */
	cr_assert_eq(rm_sim_op_end(sim, 0), (T * 1204000 + 999999) / 1000000);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

/* SM grants (docs/sim.md "SM grants"). A GEMM of `tiles` CTAs (batch x one 128 x 256 tile) with a
 * fixed duration on stream 0; a 24-SM all-gather of 1000 us on stream 1, launched at `at` us once
 * a copy on stream 2 records its event; the all-gather is ops[2] (ops[0] the GEMM, ops[1] the
 * copy). */
static rm_program *grant_program(uint32_t tiles, double gemm_us, double at)
{
	rm_program *p = rm_program_create("sm-grant");
	rm_program_add_stream(p, "compute", RM_STREAM_COMPUTE, 0);
	rm_program_add_stream(p, "comm", RM_STREAM_COLLECTIVE, -1);
	rm_program_add_stream(p, "copy", RM_STREAM_COPY, 0);
	int32_t e = rm_program_add_event(p, "launch");
	rm_program_op_desc d = rm_program_op_desc_init("gemm", RM_COST_GEMM, 0);
	d.cost.gemm = (rm_gemm_shape){.batch = tiles, .m = 128, .n = 256, .k = 4096, .dtype = RM_DTYPE_BF16};
	d.time_s = gemm_us * 1e-6;
	rm_program_add_op(p, &d);
	cr_assert_float_eq(rm_cost_gemm_tiles(&d.cost.gemm, h100()), (double)tiles, 0.0);
	op_add(p, "delay", RM_COST_COPY, 2, at, NULL, 0, NULL, 0, NULL, 0, &e, 1);
	op_add(p, "ag", RM_COST_COLLECTIVE, 1, 1000, NULL, 0, NULL, 0, &e, 1, NULL, 0);
	return p;
}

/* A one-wave GEMM (132 tiles = 132 SMs, 100 us) holds every SM when a 24-SM all-gather launches
 * at 30 us: the block scheduler does not preempt resident CTAs, so the all-gather waits, holding
 * nothing, until the GEMM's CTAs retire at 100 us, then runs its 1000 us. The GEMM is not slowed
 * (taking the SMs at launch, it would run a second wave from 30 us: 30 + 70 x 2 = 170 us). */
Test(engine, collective_waits_for_a_one_wave_gemm_to_end)
{
	rm_program *p = grant_program(132, 100, 30);
	rm_sim *sim = run(p, h100(), 8);
	cr_assert_eq(rm_sim_op_sms(sim, 2), 24);
	cr_assert_eq(rm_sim_op_end(sim, 0), 100 * US, "%llu", (unsigned long long)rm_sim_op_end(sim, 0));
	cr_assert_eq(rm_sim_op_start(sim, 2), 30 * US); /* launched */
	cr_assert_eq(rm_sim_op_grant(sim, 2), 100 * US);
	cr_assert_eq(rm_sim_op_end(sim, 2), 1100 * US, "%llu", (unsigned long long)rm_sim_op_end(sim, 2));
	const rm_sim_metrics *m = rm_sim_get_metrics(sim);
	cr_assert_eq(m->sm_wait, 70 * US);
	cr_assert_eq(m->comm_total, 1000 * US); /* the wait is not communication */
	cr_assert_eq(m->compute_busy, 100 * US);
	cr_assert_eq(m->step_time, 1100 * US);
	cr_assert_eq(rm_sim_stream_busy(sim, 1), 1070 * US); /* the stream holds the launched kernel */
	/* the trace's slice spans launch to end, with the wait in its args */
	size_t len;
	char *text = trace_of(sim, &len);
	json_t *doc = json_loadb(text, len, 0, NULL);
	cr_assert_not_null(doc);
	size_t k;
	json_t *ev;
	int found = 0;
	json_array_foreach(json_object_get(doc, "traceEvents"), k, ev) {
		const char *name = json_string_value(json_object_get(ev, "name"));
		if (strcmp(json_string_value(json_object_get(ev, "ph")), "X") != 0 || strcmp(name, "ag") != 0)
			continue;
		found++;
		cr_assert_float_eq(json_number_value(json_object_get(ev, "ts")), 30.0, 1e-9);
		cr_assert_float_eq(json_number_value(json_object_get(ev, "dur")), 1070.0, 1e-9);
		json_t *w = json_object_get(json_object_get(ev, "args"), "sm_wait_us");
		cr_assert_float_eq(json_number_value(w), 70.0, 1e-9);
	}
	cr_assert_eq(found, 1);
	json_decref(doc);
	free(text);
	rm_sim_destroy(sim);
	/* Calibrated interference (slowdown per SM held) changes the rate, not the wait: the GEMM
	 * still runs alone until it ends. */
	rm_hw_profile hw = *h100();
	hw.gemm_slowdown_per_sm = 0.0085;
	sim = run(p, &hw, 8);
	cr_assert_eq(rm_sim_op_end(sim, 0), 100 * US);
	cr_assert_eq(rm_sim_op_grant(sim, 2), 100 * US);
	cr_assert_eq(rm_sim_op_end(sim, 2), 1100 * US);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

/* A 4-wave GEMM (528 tiles = 4 x 132, 400 us: 100 us a wave) with the all-gather launched at
 * 150 us, mid-wave 2: the grant lands at the end of wave 2 (200 us); from there the two waves of
 * work left run at 4 / ceil(528 / 108) = 4/5: 200 x 5/4 = 250 us, to 450 us. The all-gather runs
 * 200 .. 1200 us. (Granted at launch: 150 + 250 x 5/4 = 462.5 us, and 1150 us.) */
Test(engine, collective_granted_at_the_next_wave_boundary)
{
	rm_program *p = grant_program(528, 400, 150);
	rm_sim *sim = run(p, h100(), 8);
	cr_assert_eq(rm_sim_op_start(sim, 2), 150 * US);
	cr_assert_eq(rm_sim_op_grant(sim, 2), 200 * US, "%llu", (unsigned long long)rm_sim_op_grant(sim, 2));
	cr_assert_eq(rm_sim_op_end(sim, 0), 450 * US, "%llu", (unsigned long long)rm_sim_op_end(sim, 0));
	cr_assert_eq(rm_sim_op_end(sim, 2), 1200 * US);
	cr_assert_eq(rm_sim_get_metrics(sim)->sm_wait, 50 * US);
	rm_sim_destroy(sim);
	/* Launched in the last wave (350 us), which fills every SM too: granted at the GEMM's end. */
	p->ops[1].time_s = 350e-6;
	sim = run(p, h100(), 8);
	cr_assert_eq(rm_sim_op_end(sim, 0), 400 * US);
	cr_assert_eq(rm_sim_op_grant(sim, 2), 400 * US);
	cr_assert_eq(rm_sim_op_end(sim, 2), 1400 * US);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

/* The grant is timed from the GEMM's rate at launch; when the GEMM speeds up and ends before that,
 * its end (its last boundary) grants. A one-wave GEMM (100 us) shares the SMs with an attention
 * kernel of 20 us at equal priority, each at half rate; the all-gather launches at 10 us, when the
 * GEMM's end is due at 200 us at half rate. The attention kernel ends at 40 us; the GEMM, 20 us
 * done, runs its 80 us left at full rate to 120 us, and the all-gather runs 120 .. 1120 us. */
Test(engine, collective_granted_when_the_gemm_ends_early)
{
	rm_program *p = grant_program(132, 100, 10);
	rm_program_add_stream(p, "compute2", RM_STREAM_COMPUTE, 0);
	op_add(p, "attn", RM_COST_ATTENTION, 3, 20, NULL, 0, NULL, 0, NULL, 0, NULL, 0);
	rm_sim *sim = run(p, h100(), 8);
	cr_assert_eq(rm_sim_op_end(sim, 3), 40 * US);
	cr_assert_eq(rm_sim_op_end(sim, 0), 120 * US, "%llu", (unsigned long long)rm_sim_op_end(sim, 0));
	cr_assert_eq(rm_sim_op_grant(sim, 2), 120 * US, "%llu", (unsigned long long)rm_sim_op_grant(sim, 2));
	cr_assert_eq(rm_sim_op_end(sim, 2), 1120 * US);
	cr_assert_eq(rm_sim_get_metrics(sim)->sm_wait, 110 * US);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

/* When the SMs are free the all-gather takes them at launch (30 us), as before: on an idle GPU;
 * beside a memory-bound kernel (100 us from 0: HBM at (3350 - 1675) / 3350 = 1/2 beside the
 * all-gather's draw, capped at half the peak: 30 + 70 x 2 = 170 us); beside attention, whose
 * CTAs are short (no wait: it runs on 108 of 132 SMs from 30 us, 30 + 70 x 132/108 us, rounded
 * up); beside a GEMM of 64 tiles, which leaves 68 SMs free (one wave on 108: not slowed). */
Test(engine, collective_granted_at_launch_when_sms_are_free)
{
	struct {
		rm_cost_kind kind;
		uint32_t tiles;
		rm_time_ps end0;
	} beside[] = {
		{RM_COST_ELEMENTWISE, 0, 170 * US},
		{RM_COST_ATTENTION, 0, 30 * US + (70 * US * 132 + 107) / 108},
		{RM_COST_GEMM, 64, 100 * US},
	};
	/* idle GPU */
	rm_program *p = rm_program_create("idle");
	rm_program_add_stream(p, "comm", RM_STREAM_COLLECTIVE, -1);
	rm_program_add_stream(p, "copy", RM_STREAM_COPY, 0);
	int32_t e = rm_program_add_event(p, "launch");
	op_add(p, "delay", RM_COST_COPY, 1, 30, NULL, 0, NULL, 0, NULL, 0, &e, 1);
	op_add(p, "ag", RM_COST_COLLECTIVE, 0, 1000, NULL, 0, NULL, 0, &e, 1, NULL, 0);
	rm_sim *sim = run(p, h100(), 8);
	cr_assert_eq(rm_sim_op_grant(sim, 1), 30 * US);
	cr_assert_eq(rm_sim_op_end(sim, 1), 1030 * US);
	cr_assert_eq(rm_sim_get_metrics(sim)->sm_wait, 0);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
	for (size_t k = 0; k < sizeof(beside) / sizeof(beside[0]); k++) {
		p = grant_program(beside[k].tiles ? beside[k].tiles : 1, 100, 30);
		p->ops[0].cost.kind = beside[k].kind;
		if (beside[k].kind == RM_COST_ATTENTION)
			p->ops[0].cost.attention.shape = (rm_attention_shape){
				.batch = 1, .heads = 32, .kv_heads = 32, .seq = 4096, .head_dim = 128,
				.causal = true, .dtype = RM_DTYPE_BF16};
		else if (beside[k].kind == RM_COST_ELEMENTWISE)
			p->ops[0].cost.elementwise = (rm_elementwise_cost){0};
		sim = run(p, h100(), 8);
		cr_assert_eq(rm_sim_op_grant(sim, 2), 30 * US, "case %zu", k);
		cr_assert_eq(rm_sim_op_end(sim, 2), 1030 * US, "case %zu", k);
		cr_assert_eq(rm_sim_op_end(sim, 0), beside[k].end0, "case %zu: %llu", k,
			     (unsigned long long)rm_sim_op_end(sim, 0));
		cr_assert_eq(rm_sim_get_metrics(sim)->sm_wait, 0, "case %zu", k);
		rm_sim_destroy(sim);
		rm_program_destroy(p);
	}
}

/* A collective draws 3x its wire bytes of HBM (docs/reference/kernels-h100.md section 7): an
 * 8-GPU all-gather of 336 MiB in 1 ms moves 7/8 x 352321536 B = 308.3 MB per GPU each way, so it
 * draws 3 x 308.28 = 924.8 GB/s (rounded to 925) of the 3350; a memory-bound kernel beside it runs
 * at (3350 - 925) / 3350 of its rate. */
Test(engine, collectives_take_hbm_bandwidth)
{
	rm_collective_cost c = {.op = RM_COLL_ALL_GATHER, .bytes = 352321536, .group_size = 8, .span = 1};
	cr_assert_float_eq(rm_cost_collective_hbm_GBps(&c, 1e-3), 3.0 * 7.0 / 8.0 * 352321536.0 / 1e-3 / 1e9, 1e-9);
	rm_program *p = rm_program_create("hbm-draw");
	rm_program_add_stream(p, "compute", RM_STREAM_COMPUTE, 0);
	rm_program_add_stream(p, "comm", RM_STREAM_COLLECTIVE, -1);
	rm_program_op_desc d = rm_program_op_desc_init("ag", RM_COST_COLLECTIVE, 1);
	d.cost.collective = c;
	d.time_s = 1e-3;
	rm_program_add_op(p, &d);
	d = rm_program_op_desc_init("ew", RM_COST_ELEMENTWISE, 0);
	d.time_s = 100e-6;
	rm_program_add_op(p, &d);
	rm_sim *sim = run(p, h100(), 8);
	/* 100 us x 3350 / 2425, rounded up to the picosecond */
	rm_time_ps expect = (100 * US * 3350 + 2424) / 2425;
	cr_assert_eq(rm_sim_op_end(sim, 1), expect, "%llu", (unsigned long long)rm_sim_op_end(sim, 1));
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

/* Two memory-bound kernels sharing HBM each run at half rate while both run. */
Test(engine, memory_bound_kernels_share_hbm)
{
	rm_program *p = rm_program_create("hbm");
	rm_program_add_stream(p, "s0", RM_STREAM_COMPUTE, 0);
	rm_program_add_stream(p, "s1", RM_STREAM_COMPUTE, 0);
	/* a fused pointwise kernel reaches 0.87 of the 3.35 TB/s peak = 2914.5 GB/s
	 * (docs/reference/kernels-h100.md section 3): 29.145 MB is 10 us alone, 87.435 MB 30 us. */
	rm_program_op_desc d = rm_program_op_desc_init("a", RM_COST_ELEMENTWISE, 0);
	d.cost.elementwise = (rm_elementwise_cost){.bytes_read = 29145000};
	rm_program_add_op(p, &d);
	d = rm_program_op_desc_init("b", RM_COST_ELEMENTWISE, 1);
	d.cost.elementwise = (rm_elementwise_cost){.bytes_read = 58290000, .bytes_written = 29145000};
	rm_program_add_op(p, &d);
	rm_sim *sim = run(p, h100(), 8);
	cr_assert_eq(rm_sim_op_solo(sim, 0), 10 * US);
	cr_assert_eq(rm_sim_op_solo(sim, 1), 30 * US);
	cr_assert_eq(rm_sim_op_end(sim, 0), 20 * US); /* half rate throughout */
	cr_assert_eq(rm_sim_op_end(sim, 1), 40 * US); /* 10 us of work done by t=20, 20 us alone */
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

/* CUDA_DEVICE_MAX_CONNECTIONS=1: a collective launched after a long GEMM on another stream
 * starts after it; with 8 queues it starts at once (docs/reference/hardware.md, Megatron-LM issue 533). */
Test(engine, one_hardware_queue_serializes_launch_order)
{
	rm_program *p = rm_program_create("queues");
	rm_program_add_stream(p, "compute", RM_STREAM_COMPUTE, 0);
	rm_program_add_stream(p, "comm", RM_STREAM_COLLECTIVE, -1);
	op_add(p, "gemm", RM_COST_GEMM, 0, 1000, NULL, 0, NULL, 0, NULL, 0, NULL, 0);
	op_add(p, "rs", RM_COST_COLLECTIVE, 1, 300, NULL, 0, NULL, 0, NULL, 0, NULL, 0);
	rm_sim *sim = run(p, h100(), 1);
	cr_assert_eq(rm_sim_op_end(sim, 0), 1000 * US);
	cr_assert_eq(rm_sim_op_start(sim, 1), 1000 * US);
	cr_assert_eq(rm_sim_get_metrics(sim)->step_time, 1300 * US);
	cr_assert_eq(rm_sim_get_metrics(sim)->exposed_comm, 300 * US);
	rm_sim_destroy(sim);
	sim = run(p, h100(), 8);
	cr_assert_eq(rm_sim_op_start(sim, 1), 0);
	/* a one-tile GEMM fits in the 108 SMs the collective leaves: one wave either way, no slower */
	cr_assert_eq(rm_sim_op_end(sim, 0), 1000 * US);
	rm_sim_destroy(sim);
	/* A collective launched first does not block a later GEMM on the same queue. */
	rm_program *q = rm_program_create("queues2");
	rm_program_add_stream(q, "compute", RM_STREAM_COMPUTE, 0);
	rm_program_add_stream(q, "comm", RM_STREAM_COLLECTIVE, -1);
	op_add(q, "ag", RM_COST_COLLECTIVE, 1, 300, NULL, 0, NULL, 0, NULL, 0, NULL, 0);
	op_add(q, "gemm", RM_COST_GEMM, 0, 1000, NULL, 0, NULL, 0, NULL, 0, NULL, 0);
	sim = run(q, h100(), 1);
	cr_assert_eq(rm_sim_op_start(sim, 1), 0);
	rm_sim_destroy(sim);
	rm_program_destroy(q);
	rm_program_destroy(p);
}

Test(engine, stream_priority_takes_the_sms)
{
	rm_program *p = rm_program_create("prio");
	rm_program_add_stream(p, "low", RM_STREAM_COMPUTE, 0);
	rm_program_add_stream(p, "high", RM_STREAM_COMPUTE, -1);
	op_add(p, "low", RM_COST_GEMM, 0, 10, NULL, 0, NULL, 0, NULL, 0, NULL, 0);
	op_add(p, "high", RM_COST_GEMM, 1, 4, NULL, 0, NULL, 0, NULL, 0, NULL, 0);
	rm_sim *sim = run(p, h100(), 8);
	cr_assert_eq(rm_sim_op_end(sim, 1), 4 * US);
	cr_assert_eq(rm_sim_op_end(sim, 0), 14 * US);
	rm_sim_destroy(sim);
	/* Equal priorities share: both at half rate until the short one ends at 8 us. */
	p->streams[1].priority = 0;
	sim = run(p, h100(), 8);
	cr_assert_eq(rm_sim_op_end(sim, 1), 8 * US);
	cr_assert_eq(rm_sim_op_end(sim, 0), 14 * US);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

/*
 * Peak memory and exposed communication by hand (times in us, bytes):
 *   persistent shard 100
 *   ag   [0,10)  comm     shard -> w (800)            records e0
 *   mm   [10,30) compute  w -> a1 (1000), waits e0
 *   ew   [30,35) compute  a1 -> a2 (500)              records e1
 *   rs   [35,43) comm     a2, waits e1
 *   tail [35,39) compute  a2 -> ws (3000, never read; an elementwise op: HBM, not SMs)
 * memory: 100 | +800 @0 = 900 | +1000 @10 = 1900 | -800 @30 +500 = 1600 | -1000 @35 = 600,
 * then +3000 = 3600 (frees before allocations at equal times) | -3000 @39 = 600 | -500 @43.
 * exposed: [0,10) and [39,43) = 14 us; comm total 18 us; compute busy [10,39) = 29 us.
 */
static rm_program *hand_program(void)
{
	rm_program *p = rm_program_create("by-hand");
	p->tokens = 1000;
	rm_program_add_stream(p, "compute", RM_STREAM_COMPUTE, 0);
	rm_program_add_stream(p, "comm", RM_STREAM_COLLECTIVE, -1);
	int32_t shard = rm_program_add_tensor(p, "shard", 100, RM_ROLE_PARAM_SHARD, RM_LOC_DEVICE, true);
	int32_t w = rm_program_add_tensor(p, "w", 800, RM_ROLE_GATHERED_PARAM, RM_LOC_DEVICE, false);
	int32_t a1 = rm_program_add_tensor(p, "a1", 1000, RM_ROLE_ACTIVATION, RM_LOC_DEVICE, false);
	int32_t a2 = rm_program_add_tensor(p, "a2", 500, RM_ROLE_ACTIVATION, RM_LOC_DEVICE, false);
	int32_t ws = rm_program_add_tensor(p, "ws", 3000, RM_ROLE_WORKSPACE, RM_LOC_DEVICE, false);
	int32_t e0 = rm_program_add_event(p, "e0"), e1 = rm_program_add_event(p, "e1");
	op_add(p, "ag", RM_COST_COLLECTIVE, 1, 10, &shard, 1, &w, 1, NULL, 0, &e0, 1);
	op_add(p, "mm", RM_COST_GEMM, 0, 20, &w, 1, &a1, 1, &e0, 1, NULL, 0);
	op_add(p, "ew", RM_COST_ELEMENTWISE, 0, 5, &a1, 1, &a2, 1, NULL, 0, &e1, 1);
	op_add(p, "rs", RM_COST_COLLECTIVE, 1, 8, &a2, 1, NULL, 0, &e1, 1, NULL, 0);
	op_add(p, "tail", RM_COST_ELEMENTWISE, 0, 4, &a2, 1, &ws, 1, NULL, 0, NULL, 0);
	return p;
}

Test(engine, peak_memory_and_exposed_comm_by_hand)
{
	rm_program *p = hand_program();
	rm_sim *sim = run(p, h100(), 8);
	const rm_sim_metrics *m = rm_sim_get_metrics(sim);
	/* ag [0,10), mm [10,30), ew [30,35); rs [35,43) beside tail, which shares HBM with it: the
	 * collective's 1 GiB in 8 us draws more than half of HBM, so the memory-bound tail gets the
	 * half left (rm_cost_collective_hbm_GBps, the engine's clamp) and its 4 us take [35,43) */
	cr_assert_eq(m->step_time, 43 * US);
	cr_assert_eq(m->peak_memory_bytes, 3600);
	cr_assert_eq(m->exposed_comm, 10 * US);
	cr_assert_eq(m->comm_total, 18 * US);
	cr_assert_eq(m->compute_busy, 33 * US);
	cr_assert(m->fits);
	cr_assert_eq(m->first_oom_op, -1);
	cr_assert_eq(m->lower_bound, 43 * US); /* the critical path is the whole chain */
	cr_assert_float_eq(m->tokens_per_s, 1000 / 43e-6, 1e-3);
	size_t n;
	const rm_mem_point *tl = rm_sim_memory_timeline(sim, &n);
	static const rm_mem_point expect[] = {
		{0, 900}, {10 * US, 1900}, {30 * US, 1600}, {35 * US, 3600}, {43 * US, 100}};
	cr_assert_eq(n, sizeof(expect) / sizeof(expect[0]));
	for (size_t i = 0; i < n; i++) {
		cr_assert_eq(tl[i].time, expect[i].time, "point %zu", i);
		cr_assert_eq(tl[i].bytes, expect[i].bytes, "point %zu", i);
	}
	rm_sim_destroy(sim);

	/* The same program on a GPU of 3000 bytes: the tail's workspace is the first too many. */
	rm_hw_profile small = *h100();
	small.hbm_bytes = 3000;
	sim = run(p, &small, 8);
	cr_assert_not(rm_sim_get_metrics(sim)->fits);
	cr_assert_eq(rm_sim_get_metrics(sim)->first_oom_op, 4);
	json_t *res = rm_sim_result_json(sim);
	cr_assert_str_eq(json_string_value(json_object_get(res, "first_oom_op")), "tail");
	cr_assert(json_is_false(json_object_get(res, "fits")));
	json_decref(res);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

static char *trace_of(const rm_sim *sim, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	cr_assert_not_null(f);
	rm_error err;
	cr_assert(rm_sim_write_trace(sim, f, &err));
	fclose(f);
	return buf;
}

Test(engine, same_program_twice_is_bit_identical)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/programs/example.json", getenv("REMORA_TEST_DATA"));
	rm_error err;
	rm_program *p1 = rm_program_load(path, &err);
	cr_assert_not_null(p1, "%s", err.msg);
	rm_program *p2 = rm_program_load(path, &err);
	cr_assert_not_null(p2, "%s", err.msg);
	rm_sim *a = run(p1, h100(), 8), *b = run(p2, h100(), 8);
	cr_assert_eq(memcmp(rm_sim_get_metrics(a), rm_sim_get_metrics(b), sizeof(rm_sim_metrics)), 0);
	size_t la, lb;
	char *ta = trace_of(a, &la), *tb = trace_of(b, &lb);
	cr_assert_eq(la, lb);
	cr_assert_eq(memcmp(ta, tb, la), 0);
	json_t *ja = rm_sim_result_json(a);
	char *ra = json_dumps(ja, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
	json_decref(ja);
	/* A second run of the same sim gives the same bytes too. */
	cr_assert_eq(rm_sim_run(a, &err), RM_OK);
	size_t la2;
	char *ta2 = trace_of(a, &la2);
	cr_assert_eq(la2, la);
	cr_assert_eq(memcmp(ta, ta2, la), 0);
	free(ra);
	free(ta);
	free(tb);
	free(ta2);
	rm_sim_destroy(a);
	rm_sim_destroy(b);
	rm_program_destroy(p1);
	rm_program_destroy(p2);
}

Test(engine, trace_is_chrome_json_with_tracks_counter_and_flows)
{
	rm_program *p = hand_program();
	rm_sim *sim = run(p, h100(), 8);
	size_t len;
	char *text = trace_of(sim, &len);
	json_error_t jerr;
	json_t *doc = json_loadb(text, len, 0, &jerr);
	cr_assert_not_null(doc, "trace is not JSON: %s at %d:%d", jerr.text, jerr.line, jerr.column);
	json_t *evs = json_object_get(doc, "traceEvents");
	cr_assert(json_is_array(evs));
	int x = 0, c = 0, s = 0, f = 0, meta = 0;
	size_t i;
	json_t *ev;
	json_array_foreach(evs, i, ev) {
		const char *ph = json_string_value(json_object_get(ev, "ph"));
		cr_assert_not_null(ph);
		x += strcmp(ph, "X") == 0;
		c += strcmp(ph, "C") == 0;
		s += strcmp(ph, "s") == 0;
		f += strcmp(ph, "f") == 0;
		meta += strcmp(ph, "M") == 0;
		if (strcmp(ph, "X") == 0 && strcmp(json_string_value(json_object_get(ev, "name")),
						   "rs") == 0) {
			cr_assert_float_eq(json_number_value(json_object_get(ev, "ts")), 35.0, 1e-9);
			cr_assert_float_eq(json_number_value(json_object_get(ev, "dur")), 8.0, 1e-9);
			cr_assert_eq(json_integer_value(json_object_get(ev, "tid")), 2);
		}
	}
	cr_assert_eq(x, 5);
	cr_assert_eq(c, 5); /* the memory points of peak_memory_and_exposed_comm_by_hand */
	cr_assert_eq(s, 2); /* ag -> mm and ew -> rs cross streams */
	cr_assert_eq(f, 2);
	cr_assert_eq(meta, 1 + 2 * 2);
	json_decref(doc);
	free(text);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

Test(engine, result_json_contract)
{
	rm_program *p = hand_program();
	/* A synchronous collective on the compute stream, with and without a reason. */
	rm_program_op_desc d = rm_program_op_desc_init("sync1", RM_COST_COLLECTIVE, 0);
	d.cost.collective = (rm_collective_cost){.op = RM_COLL_ALL_REDUCE, .bytes = 1024,
						 .group_size = 8, .span = 1};
	d.sync_reason = "remat saved name";
	rm_program_add_op(p, &d);
	d.name = "sync2";
	d.sync_reason = NULL;
	rm_program_add_op(p, &d);
	rm_sim *sim = run(p, h100(), 8);
	json_t *r = rm_sim_result_json(sim);
	static const char *const keys[] = {
		"schema",	 "step_time_s",	  "tokens_per_s_per_gpu", "mfu",
		"peak_memory_bytes", "memory_capacity_bytes", "fits", "compute_busy_s",
		"comm_total_s",	 "exposed_comm_s", "recompute_s",	   "lower_bound_s",
		"collectives",	 "streams",	   NULL};
	for (const char *const *k = keys; *k; k++)
		cr_assert_not_null(json_object_get(r, *k), "missing %s", *k);
	cr_assert_str_eq(json_string_value(json_object_get(r, "schema")), RM_RESULT_SCHEMA);
	json_t *coll = json_object_get(r, "collectives");
	cr_assert_eq(json_integer_value(json_object_get(coll, "total")), 4);
	cr_assert_eq(json_integer_value(json_object_get(coll, "sync")), 2);
	cr_assert_eq(json_integer_value(json_object_get(coll, "async")), 2);
	json_t *why = json_object_get(coll, "sync_reasons");
	cr_assert_eq(json_integer_value(json_object_get(why, "remat saved name")), 1);
	cr_assert_eq(json_integer_value(json_object_get(why, "unspecified")), 1);
	json_decref(r);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

Test(engine, deadlock_through_a_single_hardware_queue_is_reported)
{
	/* op0 waits for an event that op1 records, but op1 is launched after op0 on the only
	 * queue: a valid dependency graph that cannot run with CUDA_DEVICE_MAX_CONNECTIONS=1. */
	rm_program *p = rm_program_create("queue-deadlock");
	rm_program_add_stream(p, "a", RM_STREAM_COMPUTE, 0);
	rm_program_add_stream(p, "b", RM_STREAM_COMPUTE, 0);
	int32_t e = rm_program_add_event(p, "e");
	op_add(p, "waiter", RM_COST_GEMM, 0, 1, NULL, 0, NULL, 0, &e, 1, NULL, 0);
	op_add(p, "recorder", RM_COST_GEMM, 1, 1, NULL, 0, NULL, 0, NULL, 0, &e, 1);
	rm_error err;
	rm_sim_options opt = {.hw_queues = 1};
	rm_sim *sim = rm_sim_create(p, h100(), &opt, &err);
	cr_assert_not_null(sim);
	cr_assert_eq(rm_sim_run(sim, &err), RM_INVALID);
	cr_assert(strstr(err.msg, "deadlock") != NULL, "%s", err.msg);
	cr_assert(strstr(err.msg, "waiter") != NULL, "%s", err.msg);
	rm_sim_destroy(sim);
	opt.hw_queues = 2;
	sim = rm_sim_create(p, h100(), &opt, &err);
	cr_assert_eq(rm_sim_run(sim, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(rm_sim_op_start(sim, 0), 1 * US);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

Test(engine, data_race_is_reported)
{
	rm_program *p = rm_program_create("race");
	rm_program_add_stream(p, "a", RM_STREAM_COMPUTE, 0);
	rm_program_add_stream(p, "b", RM_STREAM_COPY, 0);
	int32_t t = rm_program_add_tensor(p, "x", 10, RM_ROLE_ACTIVATION, RM_LOC_DEVICE, false);
	op_add(p, "producer", RM_COST_GEMM, 0, 5, NULL, 0, &t, 1, NULL, 0, NULL, 0);
	op_add(p, "reader", RM_COST_COPY, 1, 5, &t, 1, NULL, 0, NULL, 0, NULL, 0);
	rm_error err;
	rm_sim *sim = rm_sim_create(p, h100(), NULL, &err);
	cr_assert_not_null(sim);
	cr_assert_eq(rm_sim_run(sim, &err), RM_INVALID);
	cr_assert(strstr(err.msg, "data race") && strstr(err.msg, "'reader'"), "%s", err.msg);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

Test(engine, synthetic_program_runs)
{
	rm_program *p = rm_sim_synthetic_program(4);
	rm_error err;
	cr_assert_eq(rm_program_validate(p, NULL, &err), RM_OK, "%s", err.msg);
	rm_sim *sim = run(p, h100(), 8);
	const rm_sim_metrics *m = rm_sim_get_metrics(sim);
	cr_assert_eq(m->events, 2 * (uint64_t)p->n_ops);
	cr_assert(m->step_time >= m->lower_bound);
	cr_assert(m->exposed_comm <= m->comm_total);
	cr_assert(m->peak_memory_bytes > 0 && m->fits);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

/* The command line end to end: run-program --json --trace, and bench engine --json. */
Test(engine, command_line)
{
	const char *bin = getenv("REMORA_BIN");
	const char *data = getenv("REMORA_TEST_DATA");
	cr_assert(bin && data, "REMORA_BIN and REMORA_TEST_DATA must be set");
	char trace[] = "/tmp/remora-trace-XXXXXX";
	int fd = mkstemp(trace);
	cr_assert(fd >= 0);
	close(fd);
	char cmd[4096];
	snprintf(cmd, sizeof(cmd), "'%s' run-program '%s/programs/example.json' --json --trace '%s'",
		 bin, data, trace);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	json_error_t jerr;
	json_t *res = json_loadf(p, 0, &jerr);
	cr_assert_eq(pclose(p), 0);
	cr_assert_not_null(res, "%s", jerr.text);
	cr_assert_str_eq(json_string_value(json_object_get(res, "schema")), RM_RESULT_SCHEMA);
	cr_assert(json_real_value(json_object_get(res, "step_time_s")) > 0);
	json_decref(res);
	json_t *tr = json_load_file(trace, 0, &jerr);
	cr_assert_not_null(tr, "trace: %s", jerr.text);
	cr_assert(json_array_size(json_object_get(tr, "traceEvents")) > 10);
	json_decref(tr);
	unlink(trace);

	snprintf(cmd, sizeof(cmd), "'%s' bench engine --ops 2000 --min-time 0 --json", bin);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	json_t *b = json_loadf(p, 0, &jerr);
	cr_assert_eq(pclose(p), 0);
	cr_assert_not_null(b, "%s", jerr.text);
	cr_assert(json_real_value(json_object_get(b, "events_per_s")) > 0);
	json_decref(b);

	snprintf(cmd, sizeof(cmd), "'%s' run-program '%s/programs/bad/cycle.json' 2>/dev/null", bin,
		 data);
	int rc = system(cmd);
	cr_assert(WIFEXITED(rc) && WEXITSTATUS(rc) == 1);
}

/* NVLink is shared by collectives, PCIe per direction by copies; recompute time is counted. */
Test(engine, links_shared_per_direction_and_recompute_time)
{
	rm_program *p = rm_program_create("links");
	for (int s = 0; s < 6; s++)
		rm_program_add_stream(p, "s", s < 2 ? RM_STREAM_COLLECTIVE : RM_STREAM_COPY, 0);
	op_add(p, "ag", RM_COST_COLLECTIVE, 0, 10, NULL, 0, NULL, 0, NULL, 0, NULL, 0);
	op_add(p, "rs", RM_COST_COLLECTIVE, 1, 10, NULL, 0, NULL, 0, NULL, 0, NULL, 0);
	rm_program_op_desc d = rm_program_op_desc_init("h2d.a", RM_COST_COPY, 2);
	d.cost.copy = (rm_copy_cost){.dir = RM_COPY_H2D, .bytes = 1};
	d.time_s = 4e-6;
	rm_program_add_op(p, &d);
	d.name = "h2d.b";
	d.stream = 3;
	rm_program_add_op(p, &d);
	d.name = "d2h";
	d.stream = 4;
	d.cost.copy.dir = RM_COPY_D2H;
	rm_program_add_op(p, &d);
	d = rm_program_op_desc_init("recompute", RM_COST_ELEMENTWISE, 5);
	d.phase = RM_PPHASE_RECOMPUTE;
	d.time_s = 3e-6;
	rm_program_add_op(p, &d);
	rm_sim *sim = run(p, h100(), 8);
	cr_assert_eq(rm_sim_op_end(sim, 0), 20 * US); /* two collectives: half rate each */
	cr_assert_eq(rm_sim_op_end(sim, 1), 20 * US);
	cr_assert_eq(rm_sim_op_end(sim, 2), 8 * US); /* two h2d copies share one direction */
	cr_assert_eq(rm_sim_op_end(sim, 3), 8 * US);
	cr_assert_eq(rm_sim_op_end(sim, 4), 4 * US); /* d2h has the other direction to itself */
	const rm_sim_metrics *m = rm_sim_get_metrics(sim);
	/* the memory-bound recompute op shares HBM with the two collectives (each 1 GiB in 20 us:
	 * together over half of HBM, clamped at half): 3 us of work at half rate */
	cr_assert_eq(m->recompute, 6 * US);
	cr_assert_eq(m->comm_total, 20 * US);
	cr_assert_eq(m->exposed_comm, 14 * US); /* the recompute op is compute for [0,6) */
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

/* A group inside the node and a group across nodes use different links: each runs at full rate
 * beside the other; two groups across nodes share the network. */
Test(engine, groups_across_nodes_share_the_network_not_nvlink)
{
	rm_program *p = rm_program_create("net");
	for (int s = 0; s < 3; s++)
		rm_program_add_stream(p, "c", RM_STREAM_COLLECTIVE, 0);
	op_add(p, "fsdp", RM_COST_COLLECTIVE, 0, 10, NULL, 0, NULL, 0, NULL, 0, NULL, 0);
	int32_t r1 = op_add(p, "replicas", RM_COST_COLLECTIVE, 1, 10, NULL, 0, NULL, 0, NULL, 0, NULL, 0);
	int32_t r2 = op_add(p, "replicas2", RM_COST_COLLECTIVE, 2, 10, NULL, 0, NULL, 0, NULL, 0, NULL, 0);
	p->ops[r1].cost.collective.span = 2;
	p->ops[r1].cost.collective.group_size = 2;
	p->ops[r2].cost.collective.span = 4;
	p->ops[r2].cost.collective.group_size = 4;
	rm_sim *sim = run(p, h100(), 8);
	cr_assert_eq(rm_sim_op_end(sim, 0), 10 * US); /* NVLink to itself */
	cr_assert_eq(rm_sim_op_end(sim, r1), 20 * US); /* the two network groups at half rate */
	cr_assert_eq(rm_sim_op_end(sim, r2), 20 * US);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

/* Seconds to picoseconds rounds to the nearest; past LLONG_MAX ps (9.2e6 s), where llround's
 * result is unspecified (it gave 2^63 on x86), the whole double is kept; past 1.8e19 ps it
 * saturates. */
Test(engine, time_conversion_is_defined_over_the_whole_range)
{
	cr_assert_eq(rm_time_from_s(1.5e-12), 2);
	cr_assert_eq(rm_time_from_s(1.0), UINT64_C(1000000000000));
	cr_assert_eq(rm_time_from_s(1e7), UINT64_C(10000000000000000000));
	cr_assert_eq(rm_time_from_s(1.7e7), UINT64_C(17000000000000000000));
	cr_assert_eq(rm_time_from_s(1e8), UINT64_MAX);
	cr_assert_eq(rm_time_from_s(-1.0), 0);
	/* halves round away from zero, as llround: 2.5 ps -> 3, 3.5 ps -> 4; just below a half down */
	cr_assert_eq(rm_time_from_s(2.5e-12), (rm_time_ps)llround(2.5e-12 * RM_PS_PER_S));
	cr_assert_eq(rm_time_from_s(0.5e-12), 1);
	cr_assert_eq(rm_time_from_s(nextafter(0.5, 0) * 1e-12), (rm_time_ps)llround(nextafter(0.5, 0) * 1e-12 * RM_PS_PER_S));
	/* 2^52 + 0.5 ps, a representable half: up */
	cr_assert_eq(rm_time_from_s((4503599627370496.0 + 0.5) / RM_PS_PER_S),
		     (rm_time_ps)llround((4503599627370496.0 + 0.5) / RM_PS_PER_S * RM_PS_PER_S));
	for (double s = 1e-13; s < 1e7; s *= 1.37)
		cr_assert_eq(rm_time_from_s(s), (rm_time_ps)llround(s * RM_PS_PER_S), "%g s", s);
}

/* ---- network sharing with a fabric (rm_cost_model.net_load) ---------------------------- */

/* A cost model whose collectives draw fixed network shares, chosen by their span (the times are
 * the ops' own): span 2 the whole NIC; 3 half the NIC and its whole uplink share (a group across
 * the spine: its bandwidth already divided by the spine's taper); 4 a tenth of the NIC (a
 * latency-bound message); 5 half the NIC. */
static bool fixed_net_load(const rm_cost_model *self, const rm_cost_op *op, const rm_hw_profile *hw, double time_s,
			   rm_net_load *out)
{
	(void)self;
	(void)hw;
	(void)time_s;
	memset(out, 0, sizeof(*out));
	switch (op->collective.span) {
	case 2:
		out->share[0] = 1.0;
		return true;
	case 3:
		out->share[0] = 0.5;
		out->share[1] = 1.0;
		return true;
	case 4:
		out->share[0] = 0.1;
		return true;
	case 5:
		out->share[0] = 0.5;
		return true;
	default:
		return false;
	}
}

static double fixed_time_s(const rm_cost_model *self, const rm_cost_op *op, const rm_hw_profile *hw)
{
	(void)self;
	(void)op;
	(void)hw;
	return 0;
}

static int no_sms(const rm_cost_model *self, const rm_cost_op *op, const rm_hw_profile *hw)
{
	(void)self;
	(void)op;
	(void)hw;
	return 0;
}

static const rm_cost_model fabric_model = {
	.name = "fabric-test", .op_time_s = fixed_time_s, .sms_held = no_sms, .net_load = fixed_net_load};

/* Two network collectives of the given spans and solo times (us) on two streams. */
static rm_sim *net_pair(int span_a, double us_a, int span_b, double us_b, const rm_cost_model *cm,
			rm_program **out)
{
	rm_program *p = rm_program_create("fabric");
	rm_program_add_stream(p, "a", RM_STREAM_COLLECTIVE, 0);
	rm_program_add_stream(p, "b", RM_STREAM_COLLECTIVE, 0);
	int32_t a = op_add(p, "a", RM_COST_COLLECTIVE, 0, us_a, NULL, 0, NULL, 0, NULL, 0, NULL, 0);
	int32_t b = op_add(p, "b", RM_COST_COLLECTIVE, 1, us_b, NULL, 0, NULL, 0, NULL, 0, NULL, 0);
	p->ops[a].cost.collective.span = span_a;
	p->ops[a].cost.collective.group_size = 8 * span_a;
	p->ops[b].cost.collective.span = span_b;
	p->ops[b].cost.collective.group_size = 8 * span_b;
	rm_error err;
	rm_error_clear(&err);
	rm_sim_options opt = {.hw_queues = 8, .cost = cm};
	rm_sim *sim = rm_sim_create(p, h100(), &opt, &err);
	cr_assert_not_null(sim, "create: %s", err.msg);
	cr_assert_eq(rm_sim_run(sim, &err), RM_OK, "run: %s", err.msg);
	*out = p;
	return sim;
}

/* Two collectives that each fill the NIC: the NIC's load is 2, each runs at 1/2 and takes twice
 * its solo time (100 us -> 200 us), as under equal sharing. */
Test(engine, two_collectives_filling_one_nic_take_twice_as_long)
{
	rm_program *p;
	rm_sim *sim = net_pair(2, 100, 2, 100, &fabric_model, &p);
	cr_assert_eq(rm_sim_op_end(sim, 0), 200 * US);
	cr_assert_eq(rm_sim_op_end(sim, 1), 200 * US);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

/* Two halves of the NIC fit beside each other: both at full rate. */
Test(engine, collectives_whose_shares_fit_the_nic_run_at_full_rate)
{
	rm_program *p;
	rm_sim *sim = net_pair(5, 100, 5, 100, &fabric_model, &p);
	cr_assert_eq(rm_sim_op_end(sim, 0), 100 * US);
	cr_assert_eq(rm_sim_op_end(sim, 1), 100 * US);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

/*
 * The defect of equal sharing: a latency-bound collective (a tenth of the NIC) halved a
 * bandwidth-bound one beside it. Proportionally the load is 1.1: both run at 1/1.1; the small
 * one (10 us) ends at 11 us, when the large one has done 10 of its 100 us; the remaining 90 at
 * full rate end it at 101 us. Equal sharing (no net_load) gives 20 and 110 us.
 */
Test(engine, latency_bound_collective_barely_slows_a_large_one)
{
	rm_program *p;
	rm_sim *sim = net_pair(2, 100, 4, 10, &fabric_model, &p);
	cr_assert_eq(rm_sim_op_end(sim, 1), 11 * US);
	cr_assert_eq(rm_sim_op_end(sim, 0), 101 * US);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
	rm_cost_model equal = fabric_model;
	equal.net_load = NULL;
	sim = net_pair(2, 100, 4, 10, &equal, &p);
	cr_assert_eq(rm_sim_op_end(sim, 1), 20 * US);
	cr_assert_eq(rm_sim_op_end(sim, 0), 110 * US);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

/* Two groups across the same oversubscribed spine: half the NIC each (load 1) but the whole
 * uplink share each (load 2): both at 1/2, 100 -> 200 us. */
Test(engine, two_groups_across_one_spine_share_its_uplinks)
{
	rm_program *p;
	rm_sim *sim = net_pair(3, 100, 3, 100, &fabric_model, &p);
	cr_assert_eq(rm_sim_op_end(sim, 0), 200 * US);
	cr_assert_eq(rm_sim_op_end(sim, 1), 200 * US);
	const rm_sim_metrics *m = rm_sim_get_metrics(sim);
	/* the uplink level holds 2 x 100 us of work: the lower bound sees it */
	cr_assert_eq(m->lower_bound, 200 * US);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

/*
 * A group inside its leaf (the whole NIC) beside one across the spine (half the NIC, the whole
 * uplink share): the NIC's load is 1.5, the uplink's 1; both run at 2/3. The 50 us one ends at
 * 75 us; the 100 us one has done 50 by then and ends at 125 us alone.
 */
Test(engine, leaf_group_and_spine_group_share_the_nic)
{
	rm_program *p;
	rm_sim *sim = net_pair(2, 100, 3, 50, &fabric_model, &p);
	cr_assert_eq(rm_sim_op_end(sim, 1), 75 * US);
	cr_assert_eq(rm_sim_op_end(sim, 0), 125 * US);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

/*
 * The NCCL cost model with a fabric (rail leaves of 32 nodes, non-blocking spine): two 1 GiB
 * all-reduces of DP groups of a TP-8 job (32 GPUs, one per node, on one rail) at once. Each alone
 * takes its NCCL time t and draws share s = 2 x 31/32 x 2^30 B / t / (47 x 300/376 GB/s) of the
 * NIC (the 32-node fabric curve); together the NIC's load is 2s > 1, so each runs at 1 / 2s and
 * both end at 2 s t (t and s from the model, to the picosecond's rounding).
 */
Test(engine, two_dp_all_reduces_on_one_nic_with_the_nccl_model)
{
	rm_error err;
	rm_error_clear(&err);
	rm_nccl_model nm;
	cr_assert_eq(rm_nccl_model_init(&nm, h100(), NULL, &err), RM_OK, "%s", err.msg);
	nm.fabric = (rm_fabric){.kind = RM_FABRIC_RAIL_OPTIMIZED, .n_tiers = 2, .pxn = true};
	nm.fabric.tiers[0] = (rm_fabric_tier){.nodes = 32, .oversubscription = 1.0};
	nm.fabric.tiers[1] = (rm_fabric_tier){.nodes = 64, .oversubscription = 1.0};
	rm_cost_nccl cn;
	rm_cost_nccl_init(&cn, &nm);
	cr_assert_not_null(cn.base.net_load);
	rm_program *p = rm_program_create("dp");
	rm_program_add_stream(p, "a", RM_STREAM_COLLECTIVE, 0);
	rm_program_add_stream(p, "b", RM_STREAM_COLLECTIVE, 0);
	for (int s = 0; s < 2; s++) {
		int32_t i = op_add(p, s ? "b" : "a", RM_COST_COLLECTIVE, s, -1, NULL, 0, NULL, 0, NULL, 0, NULL, 0);
		p->ops[i].cost.collective = (rm_collective_cost){.op = RM_COLL_ALL_REDUCE, .bytes = INT64_C(1) << 30,
								 .group_size = 32, .span = 32};
	}
	rm_coll_query q = rm_coll_query_make(RM_COLL_ALL_REDUCE, INT64_C(1) << 30, 32, 32);
	rm_coll_estimate e;
	cr_assert_eq(rm_nccl_estimate(&cn.nccl, &q, &e, &err), RM_OK, "%s", err.msg);
	double share = 2.0 * 31.0 / 32.0 * 1073741824.0 / (e.time_us * 1e3) / (47.0 * 300.0 / 376.0);
	cr_assert_gt(share, 0.5);
	cr_assert_leq(share, 1.0);
	rm_sim_options opt = {.hw_queues = 8, .cost = &cn.base};
	rm_sim *sim = rm_sim_create(p, h100(), &opt, &err);
	cr_assert_not_null(sim, "%s", err.msg);
	cr_assert_eq(rm_sim_run(sim, &err), RM_OK, "%s", err.msg);
	double solo_ps = e.time_us * 1e6, want = solo_ps * 2.0 * share;
	for (int32_t i = 0; i < 2; i++)
		cr_assert_float_eq((double)rm_sim_op_end(sim, i), want, solo_ps * 2e-6, "op %d: %llu ps, want %.0f", i,
				   (unsigned long long)rm_sim_op_end(sim, i), want);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}

/* ---- the collective price cache (rm_sim_prices) ---- */

/* The default model, counting the collectives it is asked to time. */
static int timed_collectives;
static double counting_time_s(const rm_cost_model *self, const rm_cost_op *op, const rm_hw_profile *hw)
{
	const rm_cost_model *d = rm_cost_model_default();
	if (op->kind == RM_COST_COLLECTIVE)
		timed_collectives++;
	return d->op_time_s(d, op, hw);
}
static int counting_sms_held(const rm_cost_model *self, const rm_cost_op *op, const rm_hw_profile *hw)
{
	const rm_cost_model *d = rm_cost_model_default();
	return d->sms_held(d, op, hw);
}

/* 5 model-priced collectives of 2 shapes (3 all-gathers of 1 GiB, 2 reduce-scatters of 256 MiB
 * over 8 GPUs) in a chain on one stream. */
static rm_program *five_collectives(void)
{
	rm_program *p = rm_program_create("collectives");
	rm_program_add_stream(p, "collectives", RM_STREAM_COLLECTIVE, 0);
	for (int i = 0; i < 5; i++) {
		rm_program_op_desc d = rm_program_op_desc_init("", RM_COST_COLLECTIVE, 0);
		bool ag = i % 2 == 0;
		d.cost.collective = (rm_collective_cost){.op = ag ? RM_COLL_ALL_GATHER : RM_COLL_REDUCE_SCATTER,
							 .bytes = ag ? INT64_C(1) << 30 : INT64_C(1) << 28,
							 .group_size = 8,
							 .span = 1};
		rm_program_add_op(p, &d);
	}
	return p;
}

static void run_priced(const rm_program *p, const rm_hw_profile *hw, const rm_cost_model *cm, rm_sim_prices *prices,
		       bool uncached, rm_time_ps *end)
{
	rm_error err;
	rm_error_clear(&err);
	rm_sim_options opt = {.cost = cm, .prices = prices, .unpriced_cache = uncached};
	rm_sim *sim = rm_sim_create(p, hw, &opt, &err);
	cr_assert_not_null(sim, "%s", err.msg);
	cr_assert_eq(rm_sim_run(sim, &err), RM_OK, "%s", err.msg);
	for (int32_t i = 0; i < p->n_ops; i++)
		end[i] = rm_sim_op_end(sim, i);
	rm_sim_destroy(sim);
}

/* The default model, counting the compute ops it is asked to time. */
static int timed_compute;
static double counting_compute_s(const rm_cost_model *self, const rm_cost_op *op, const rm_hw_profile *hw)
{
	const rm_cost_model *d = rm_cost_model_default();
	if (op->kind != RM_COST_COLLECTIVE)
		timed_compute++;
	return d->op_time_s(d, op, hw);
}

Test(engine, an_op_naming_an_equal_cost_twin_is_priced_once)
{
	/* 4 GEMMs of one shape in a chain: ops 1 and 2 name op 0 as their twin (same_cost_as 1),
	 * op 3 names op 0 but has another shape, so it is priced itself; the ends equal those of
	 * the program without the hints, and the reference path (unpriced_cache) asks for all 4 */
	const rm_cost_model counting = {.name = "counting", .op_time_s = counting_compute_s, .sms_held = counting_sms_held};
	rm_program *p[2];
	for (int k = 0; k < 2; k++) {
		p[k] = rm_program_create("twins");
		rm_program_add_stream(p[k], "compute", RM_STREAM_COMPUTE, 0);
		for (int i = 0; i < 4; i++) {
			rm_program_op_desc d = rm_program_op_desc_init("", RM_COST_GEMM, 0);
			d.cost.gemm = (rm_gemm_shape){.batch = 1, .m = 4096, .n = i == 3 ? 8192 : 4096, .k = 4096,
						      .dtype = RM_DTYPE_BF16};
			d.same_cost_as = k == 1 && i > 0 ? 1 : 0;
			rm_program_add_op(p[k], &d);
		}
	}
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_program_validate(p[1], NULL, &err), RM_OK, "%s", err.msg);
	rm_time_ps ref[4], got[4], unc[4];
	timed_compute = 0;
	run_priced(p[0], h100(), &counting, NULL, false, ref);
	cr_assert_eq(timed_compute, 4);
	timed_compute = 0;
	run_priced(p[1], h100(), &counting, NULL, false, got);
	cr_assert_eq(timed_compute, 2, "op 0 and op 3 (another shape) asked; ops 1 and 2 copied");
	cr_assert_eq(memcmp(got, ref, sizeof(ref)), 0);
	cr_assert_eq(got[1] - got[0], got[0], "op 1 took op 0's time");
	timed_compute = 0;
	run_priced(p[1], h100(), &counting, NULL, true, unc);
	cr_assert_eq(timed_compute, 4, "the reference path prices every op");
	cr_assert_eq(memcmp(unc, ref, sizeof(ref)), 0);
	/* a twin that is not earlier is refused */
	p[1]->ops[1].same_cost_as = 2;
	cr_assert_eq(rm_program_validate(p[1], "twins.json", &err), RM_INVALID);
	cr_assert(strstr(err.msg, "ops[1].same_cost_as"), "%s", err.msg);
	for (int k = 0; k < 2; k++)
		rm_program_destroy(p[k]);
}

/* Ends of every op of p simulated with opt (storage or not). */
static void run_with(const rm_program *p, const rm_sim_options *opt, rm_time_ps *end)
{
	rm_error err;
	rm_error_clear(&err);
	rm_sim *sim = rm_sim_create(p, h100(), opt, &err);
	cr_assert_not_null(sim, "%s", err.msg);
	cr_assert_eq(rm_sim_run(sim, &err), RM_OK, "%s", err.msg);
	for (int32_t i = 0; i < p->n_ops; i++)
		end[i] = rm_sim_op_end(sim, i);
	rm_sim_destroy(sim);
}

Test(engine, kept_storage_gives_the_same_results_for_programs_of_any_size)
{
	/* a 4-op program, a 5-op one (other kinds, other sizes), the 4-op one again: with one kept
	 * storage each ends as without it; a second simulation while the first holds the storage
	 * allocates its own and ends the same */
	rm_program *a = rm_program_create("gemms");
	rm_program_add_stream(a, "compute", RM_STREAM_COMPUTE, 0);
	for (int i = 0; i < 4; i++) {
		rm_program_op_desc d = rm_program_op_desc_init("", RM_COST_GEMM, 0);
		d.cost.gemm = (rm_gemm_shape){.batch = 1, .m = 1024 << i, .n = 4096, .k = 4096, .dtype = RM_DTYPE_BF16};
		rm_program_add_op(a, &d);
	}
	rm_program *b = five_collectives();
	rm_time_ps ref_a[4], ref_b[5], got_a[4], got_b[5];
	rm_sim_options plain = {0};
	run_with(a, &plain, ref_a);
	run_with(b, &plain, ref_b);
	rm_sim_storage *st = rm_sim_storage_create();
	rm_sim_options kept = {.storage = st};
	for (int round = 0; round < 2; round++) {
		run_with(a, &kept, got_a);
		cr_assert_eq(memcmp(got_a, ref_a, sizeof(ref_a)), 0, "round %d", round);
		run_with(b, &kept, got_b);
		cr_assert_eq(memcmp(got_b, ref_b, sizeof(ref_b)), 0, "round %d", round);
	}
	rm_error err;
	rm_error_clear(&err);
	rm_sim *holder = rm_sim_create(a, h100(), &kept, &err);
	cr_assert_not_null(holder, "%s", err.msg);
	run_with(b, &kept, got_b);
	cr_assert_eq(memcmp(got_b, ref_b, sizeof(ref_b)), 0, "while the storage is held");
	cr_assert_eq(rm_sim_run(holder, &err), RM_OK, "%s", err.msg);
	for (int32_t i = 0; i < a->n_ops; i++)
		cr_assert_eq(rm_sim_op_end(holder, i), ref_a[i]);
	rm_sim_destroy(holder);
	run_with(a, &kept, got_a);
	cr_assert_eq(memcmp(got_a, ref_a, sizeof(ref_a)), 0, "after the holder");
	rm_sim_storage_destroy(st);
	rm_program_destroy(a);
	rm_program_destroy(b);
}

Test(engine, each_collective_shape_is_priced_once_with_the_same_times)
{
	const rm_cost_model counting = {.name = "counting", .op_time_s = counting_time_s, .sms_held = counting_sms_held};
	rm_program *p = five_collectives();
	/* nodes of 4 GPUs: the group of 8 spans 2 nodes, over the network */
	rm_hw_profile slow = *h100();
	slow.gpus_per_node = 4;
	rm_time_ps ref[5], got[5], ref_slow[5], got_slow[5];
	timed_collectives = 0;
	run_priced(p, h100(), &counting, NULL, true, ref);
	cr_assert_eq(timed_collectives, 5, "uncached: every op asked");
	run_priced(p, &slow, &counting, NULL, true, ref_slow);
	cr_assert(ref_slow[4] > ref[4], "across nodes is slower");
	timed_collectives = 0;
	run_priced(p, h100(), &counting, NULL, false, got);
	cr_assert_eq(timed_collectives, 2, "a call's own cache: 2 shapes, 2 questions");
	cr_assert_eq(memcmp(got, ref, sizeof(ref)), 0);
	rm_sim_prices *prices = rm_sim_prices_create();
	timed_collectives = 0;
	for (int k = 0; k < 3; k++) {
		run_priced(p, h100(), &counting, prices, false, got);
		cr_assert_eq(memcmp(got, ref, sizeof(ref)), 0, "run %d", k);
	}
	cr_assert_eq(timed_collectives, 2, "a kept cache: asked in the first run only");
	/* another profile (same address as no other, different bytes) is another context */
	run_priced(p, &slow, &counting, prices, false, got_slow);
	cr_assert_eq(timed_collectives, 4);
	cr_assert_eq(memcmp(got_slow, ref_slow, sizeof(ref_slow)), 0);
	/* the same bytes at another address are the same context */
	rm_hw_profile copy = *h100();
	run_priced(p, &copy, &counting, prices, false, got);
	cr_assert_eq(memcmp(got, ref, sizeof(ref)), 0);
	cr_assert_eq(timed_collectives, 4, "a copy of a profile is priced from the cache");
	rm_sim_prices_destroy(prices);
	rm_program_destroy(p);
}

/*
 * A step of n iterations after a prologue op: each iteration all-gathers (10 us, comm stream),
 * runs a GEMM on it (20 us, waits for the gather), an elementwise op (5 us), and reduce-scatters
 * its output (8 us, waits for it); the optimizer (4 us) waits for the last reduce-scatter.
 * gather_waits: each all-gather is behind the previous reduce-scatter on the comm stream (a
 * chain of 43 us an iteration); false: the gathers run ahead of the compute unbounded. ops
 * [1, 1 + 4n) are the iterations.
 */
static rm_program *loop_program(int n, bool chained, double gemm_us_last)
{
	rm_program *p = rm_program_create("loop");
	p->tokens = 1000 * n;
	p->model_flops = 1e9 * n;
	rm_program_add_stream(p, "compute", RM_STREAM_COMPUTE, 0);
	rm_program_add_stream(p, chained ? "comm" : "gathers", RM_STREAM_COLLECTIVE, -1);
	int32_t rs_stream = chained ? 1 : rm_program_add_stream(p, "reduce-scatter", RM_STREAM_COLLECTIVE, -1);
	int32_t shard = rm_program_add_tensor(p, "shard", 100, RM_ROLE_PARAM_SHARD, RM_LOC_DEVICE, true);
	op_add(p, "start", RM_COST_ELEMENTWISE, 0, 3, NULL, 0, NULL, 0, NULL, 0, NULL, 0);
	int32_t last_rs = -1;
	for (int j = 0; j < n; j++) {
		int32_t w = rm_program_add_tensor(p, "w", 800, RM_ROLE_GATHERED_PARAM, RM_LOC_DEVICE, false);
		int32_t a = rm_program_add_tensor(p, "a", 1000, RM_ROLE_ACTIVATION, RM_LOC_DEVICE, false);
		int32_t g = rm_program_add_tensor(p, "g", 500, RM_ROLE_ACTIVATION, RM_LOC_DEVICE, false);
		int32_t eg = rm_program_add_event(p, "gathered"), ee = rm_program_add_event(p, "reduced-input");
		op_add(p, "ag", RM_COST_COLLECTIVE, 1, 10, &shard, 1, &w, 1, NULL, 0, &eg, 1);
		op_add(p, "mm", RM_COST_GEMM, 0, j == n - 1 ? gemm_us_last : 20, &w, 1, &a, 1, &eg, 1, NULL, 0);
		op_add(p, "ew", RM_COST_ELEMENTWISE, 0, 5, &a, 1, &g, 1, NULL, 0, &ee, 1);
		last_rs = rm_program_add_event(p, "reduced");
		op_add(p, "rs", RM_COST_COLLECTIVE, rs_stream, 8, &g, 1, NULL, 0, &ee, 1, &last_rs, 1);
	}
	op_add(p, "optimizer", RM_COST_ELEMENTWISE, 0, 4, NULL, 0, NULL, 0, &last_rs, 1, NULL, 0);
	return p;
}

static rm_sim *run_loop(const rm_program *p, int iters, int64_t trips, rm_status want, rm_error *err)
{
	rm_sim_options opt = {.hw_queues = 8, .loops = {{.first_op = 1, .ops = 4, .iters = iters, .trips = trips}}};
	rm_sim *sim = rm_sim_create(p, h100(), &opt, err);
	cr_assert_not_null(sim, "create: %s", err->msg);
	cr_assert_eq(rm_sim_run(sim, err), want, "run: %s", err->msg);
	return sim;
}

Test(engine, periodic_stretch_extended_equals_the_full_program)
{
	rm_error err;
	rm_error_clear(&err);
	rm_program *full = loop_program(12, true, 20), *part = loop_program(5, true, 20);
	part->tokens = full->tokens;
	part->model_flops = full->model_flops;
	rm_sim *a = run(full, h100(), 8), *b = run_loop(part, 5, 12, RM_OK, &err);
	const rm_sim_metrics *ma = rm_sim_get_metrics(a), *mb = rm_sim_get_metrics(b);
	/* by hand: iteration j's gather starts when reduce-scatter j - 1 ends, 43 us a link of the
	 * chain (10 + 20 + 5 + 8): the last reduce-scatter ends at 43 x 12 us, the optimizer 4 us on */
	cr_assert_eq(ma->step_time, (43 * 12 + 4) * US);
	cr_assert_eq(mb->step_time, ma->step_time);
	cr_assert_eq(mb->periods_added, 7);
	cr_assert_eq(mb->periodic_from, 2, "iteration 1 repeats iteration 0's start; 2 repeats 1");
	cr_assert_eq(ma->periodic_from, -1);
	cr_assert_eq(mb->compute_busy, ma->compute_busy);
	cr_assert_eq(mb->comm_total, ma->comm_total);
	cr_assert_eq(mb->exposed_comm, ma->exposed_comm);
	cr_assert_eq(mb->recompute, ma->recompute);
	cr_assert_eq(mb->sm_wait, ma->sm_wait);
	cr_assert_eq(mb->events, ma->events);
	cr_assert_eq(mb->heap_pops, ma->heap_pops);
	cr_assert_eq(mb->peak_memory_bytes, ma->peak_memory_bytes);
	cr_assert_eq(mb->lower_bound, ma->lower_bound);
	cr_assert_eq(mb->collectives, ma->collectives);
	cr_assert_eq(mb->collectives, 24);
	cr_assert_eq(memcmp(&mb->mfu, &ma->mfu, sizeof(double)), 0);
	cr_assert_eq(memcmp(&mb->tokens_per_s, &ma->tokens_per_s, sizeof(double)), 0);
	for (int32_t s = 0; s < full->n_streams; s++)
		cr_assert_eq(rm_sim_stream_busy(b, s), rm_sim_stream_busy(a, s), "stream %d", s);
	rm_sim_destroy(a);
	rm_sim_destroy(b);
	rm_program_destroy(full);
	rm_program_destroy(part);
}

/* Two such stretches one after the other (a scan's forward and backward loops): n1 chained
 * iterations, a 7 us op waiting for the last reduce-scatter, n2 more whose first gather waits
 * for it, the optimizer. Ops [1, 1 + 4 n1) and [2 + 4 n1, 2 + 4 (n1 + n2)) are the stretches. */
static rm_program *two_loop_program(int n1, int n2)
{
	rm_program *p = rm_program_create("two loops");
	p->tokens = 1000 * (n1 + n2);
	p->model_flops = 1e9 * (n1 + n2);
	rm_program_add_stream(p, "compute", RM_STREAM_COMPUTE, 0);
	rm_program_add_stream(p, "comm", RM_STREAM_COLLECTIVE, -1);
	int32_t shard = rm_program_add_tensor(p, "shard", 100, RM_ROLE_PARAM_SHARD, RM_LOC_DEVICE, true);
	op_add(p, "start", RM_COST_ELEMENTWISE, 0, 3, NULL, 0, NULL, 0, NULL, 0, NULL, 0);
	int32_t last_rs = -1, mid = -1;
	for (int phase = 0; phase < 2; phase++) {
		for (int j = 0; j < (phase ? n2 : n1); j++) {
			int32_t w = rm_program_add_tensor(p, "w", 800, RM_ROLE_GATHERED_PARAM, RM_LOC_DEVICE, false);
			int32_t a = rm_program_add_tensor(p, "a", 1000, RM_ROLE_ACTIVATION, RM_LOC_DEVICE, false);
			int32_t g = rm_program_add_tensor(p, "g", 500, RM_ROLE_ACTIVATION, RM_LOC_DEVICE, false);
			int32_t eg = rm_program_add_event(p, "gathered"), ee = rm_program_add_event(p, "reduced-input");
			op_add(p, "ag", RM_COST_COLLECTIVE, 1, 10, &shard, 1, &w, 1, phase && j == 0 ? &mid : NULL,
			       phase && j == 0 ? 1 : 0, &eg, 1);
			op_add(p, "mm", RM_COST_GEMM, 0, 20, &w, 1, &a, 1, &eg, 1, NULL, 0);
			op_add(p, "ew", RM_COST_ELEMENTWISE, 0, 5, &a, 1, &g, 1, NULL, 0, &ee, 1);
			last_rs = rm_program_add_event(p, "reduced");
			op_add(p, "rs", RM_COST_COLLECTIVE, 1, 8, &g, 1, NULL, 0, &ee, 1, &last_rs, 1);
		}
		if (phase == 0) {
			mid = rm_program_add_event(p, "mid");
			op_add(p, "mid", RM_COST_ELEMENTWISE, 0, 7, NULL, 0, NULL, 0, &last_rs, 1, &mid, 1);
		}
	}
	op_add(p, "optimizer", RM_COST_ELEMENTWISE, 0, 4, NULL, 0, NULL, 0, &last_rs, 1, NULL, 0);
	return p;
}

Test(engine, periodic_stretches_one_after_another_add_up)
{
	rm_error err;
	rm_error_clear(&err);
	rm_program *full = two_loop_program(12, 9), *part = two_loop_program(5, 5);
	part->tokens = full->tokens;
	part->model_flops = full->model_flops;
	rm_sim_options opt = {.hw_queues = 8,
			      .loops = {{.first_op = 1, .ops = 4, .iters = 5, .trips = 12},
					{.first_op = 2 + 4 * 5, .ops = 4, .iters = 5, .trips = 9}}};
	rm_sim *a = run(full, h100(), 8), *b = rm_sim_create(part, h100(), &opt, &err);
	cr_assert_not_null(b, "%s", err.msg);
	cr_assert_eq(rm_sim_run(b, &err), RM_OK, "%s", err.msg);
	const rm_sim_metrics *ma = rm_sim_get_metrics(a), *mb = rm_sim_get_metrics(b);
	/* by hand: 43 us an iteration, 12 of them, the 7 us op, 9 more, the optimizer */
	cr_assert_eq(ma->step_time, (43 * 12 + 7 + 43 * 9 + 4) * US);
	cr_assert_eq(mb->step_time, ma->step_time);
	cr_assert_eq(mb->periods_added, 7 + 4);
	cr_assert_eq(mb->compute_busy, ma->compute_busy);
	cr_assert_eq(mb->comm_total, ma->comm_total);
	cr_assert_eq(mb->exposed_comm, ma->exposed_comm);
	cr_assert_eq(mb->events, ma->events);
	cr_assert_eq(mb->heap_pops, ma->heap_pops);
	cr_assert_eq(mb->peak_memory_bytes, ma->peak_memory_bytes);
	cr_assert_eq(mb->lower_bound, ma->lower_bound);
	cr_assert_eq(mb->collectives, 2 * 21);
	cr_assert_eq(memcmp(&mb->mfu, &ma->mfu, sizeof(double)), 0);
	for (int32_t s = 0; s < full->n_streams; s++)
		cr_assert_eq(rm_sim_stream_busy(b, s), rm_sim_stream_busy(a, s), "stream %d", s);
	rm_sim_destroy(b);
	/* out of launch order (the second before the first): refused */
	rm_sim_options rev = opt;
	rev.loops[0] = opt.loops[1];
	rev.loops[1] = opt.loops[0];
	rm_error_clear(&err);
	b = rm_sim_create(part, h100(), &rev, &err);
	cr_assert_not_null(b, "%s", err.msg);
	cr_assert_eq(rm_sim_run(b, &err), RM_UNSUPPORTED);
	cr_assert(strstr(err.msg, "before the stretch before"), "%s", err.msg);
	rm_sim_destroy(a);
	rm_sim_destroy(b);
	rm_program_destroy(full);
	rm_program_destroy(part);
}

Test(engine, periodic_stretch_refused_when_it_does_not_repeat)
{
	rm_error err;
	rm_error_clear(&err);
	/* the last iteration's GEMM is longer: the structure differs */
	rm_program *p = loop_program(5, true, 30);
	rm_sim *sim = run_loop(p, 5, 12, RM_UNSUPPORTED, &err);
	cr_assert(strstr(err.msg, "do not repeat one another"), "%s", err.msg);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
	/* gathers 10 us an iteration on their own stream against 25 us of compute: they run ahead,
	 * further each iteration, and so do their longest paths against the GEMMs' */
	p = loop_program(6, false, 20);
	rm_error_clear(&err);
	sim = run_loop(p, 6, 40, RM_UNSUPPORTED, &err);
	cr_assert(strstr(err.msg, "longest paths"), "%s", err.msg);
	rm_sim_destroy(sim);
	/* trips == iters: no stretch, the program runs as it is */
	rm_error_clear(&err);
	sim = run_loop(p, 6, 6, RM_OK, &err);
	cr_assert_eq(rm_sim_get_metrics(sim)->periods_added, 0);
	rm_sim_destroy(sim);
	rm_program_destroy(p);
}
