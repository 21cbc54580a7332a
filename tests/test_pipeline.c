/*
 * Pipeline schedules (remora/pipeline.h) against their closed forms (Narayanan et al. 2021,
 * section 2.2): with equal stages and free transfers, 1F1B and GPipe take (m + p - 1)(t_f + t_b)
 * and leave stage 0 idle (p - 1) / (m + p - 1) of it; the interleaved schedule with v chunks,
 * (m v + p - 1)(t_f + t_b) / v and (p - 1) / (v m + p - 1). 1F1B's stage s holds min(p - s, m)
 * micro-batches of activations, GPipe's all m, the interleaved schedule's stage 0
 * 2 (p - 1) + (v - 1) p + 1 chunk passes. ZB-H1 (Qi et al. 2024, section 3.1) against its
 * hand-derived trace and the paper's bubble (p - 1)(t_f + t_b - t_w), and ZB-V (torch's
 * ScheduleZBVZeroBubble order) against its hand-derived trace.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "remora/pipeline.h"
#include "remora/scenario.h"

/* Equal stages: forward tf, backward tb of which tw is the weight gradient. */
static rm_pp_result run_w(rm_pp_schedule s, int p, int m, int v, double tf, double tb, double tw, double p2p)
{
	rm_pp_stage_cost st[RM_PP_MAX_STAGES];
	for (int i = 0; i < p; i++)
		st[i] = (rm_pp_stage_cost){tf, tb, 0, tw};
	rm_pp_result r;
	rm_error err;
	cr_assert_eq(rm_pp_simulate(s, p, m, v, st, p2p, &r, &err), RM_OK, "%s", err.msg);
	return r;
}

static rm_pp_result run(rm_pp_schedule s, int p, int m, int v, double tf, double tb, double p2p)
{
	return run_w(s, p, m, v, tf, tb, 0, p2p);
}

Test(pipeline, one_f_one_b_and_gpipe_bubbles)
{
	/* p 4, m 8, t_f 1, t_b 2: (8 + 3) x 3 = 33; bubble 3 / 11 */
	rm_pp_result a = run(RM_PP_1F1B, 4, 8, 1, 1.0, 2.0, 0);
	cr_assert_float_eq(a.step_s, 33.0, 1e-9);
	cr_assert_float_eq(a.bubble_fraction, 3.0 / 11.0, 1e-9);
	cr_assert_eq(a.in_flight[0], 4);
	cr_assert_eq(a.in_flight[1], 3);
	cr_assert_eq(a.in_flight[3], 1);
	rm_pp_result g = run(RM_PP_GPIPE, 4, 8, 1, 1.0, 2.0, 0);
	cr_assert_float_eq(g.step_s, 33.0, 1e-9);
	cr_assert_eq(g.in_flight[0], 8);
	cr_assert_eq(g.in_flight[3], 8);
	/* fewer micro-batches than stages: 1F1B holds m */
	rm_pp_result f = run(RM_PP_1F1B, 8, 3, 1, 1.0, 1.0, 0);
	cr_assert_float_eq(f.step_s, (3 + 7) * 2.0, 1e-9);
	cr_assert_eq(f.in_flight[0], 3);
	/* one stage: no bubble */
	rm_pp_result one = run(RM_PP_1F1B, 1, 5, 1, 1.0, 2.0, 0);
	cr_assert_float_eq(one.step_s, 15.0, 1e-9);
	cr_assert_float_eq(one.bubble_fraction, 0.0, 1e-12);
}

Test(pipeline, interleaved_divides_the_bubble_by_the_chunks)
{
	/* p 4, m 8, v 2, t_f = t_b = 1: (16 + 3) x 2 / 2 = 19; bubble 3 / 19 */
	rm_pp_result a = run(RM_PP_INTERLEAVED, 4, 8, 2, 1.0, 1.0, 0);
	cr_assert_float_eq(a.step_s, 19.0, 1e-9);
	cr_assert_float_eq(a.bubble_fraction, 3.0 / 19.0, 1e-9);
	cr_assert_eq(a.in_flight[0], 2 * 3 + 1 * 4 + 1);
	/* t_b = 2 t_f, v 4: within 1% of (m v + p - 1)(t_f + t_b) / v = (32 + 3) x 3 / 4 = 26.25 */
	rm_pp_result b = run(RM_PP_INTERLEAVED, 4, 8, 4, 1.0, 2.0, 0);
	cr_assert(fabs(b.step_s - 26.25) <= 0.01 * 26.25, "%g", b.step_s);
	/* v 1 is 1F1B */
	rm_pp_result c = run(RM_PP_INTERLEAVED, 4, 8, 1, 1.0, 2.0, 0);
	cr_assert_float_eq(c.step_s, 33.0, 1e-9);
}

Test(pipeline, transfers_lengthen_the_critical_path)
{
	/* one micro-batch through 4 stages and back: 4 x (1 + 2) + 2 x 3 transfers of 0.5 */
	rm_pp_result a = run(RM_PP_1F1B, 4, 1, 1, 1.0, 2.0, 0.5);
	cr_assert_float_eq(a.step_s, 12.0 + 3.0, 1e-9);
	/* a slower last stage (the head) sets the steady state: 1F1B p 2, m 4, stage 1 t_f 1 t_b 3 */
	rm_pp_stage_cost st[2] = {{1, 2, 0.25, 0}, {1, 3, 0, 0}};
	rm_pp_result r;
	rm_error err;
	cr_assert_eq(rm_pp_simulate(RM_PP_1F1B, 2, 4, 1, st, 0, &r, &err), RM_OK, "%s", err.msg);
	/* stage 1 runs F0 at 1, then B F B F B F B: 1 + 4 x 4 = 17; stage 0's last backward at
	 * 17 + 2 = 19, its tail 0.25 */
	cr_assert_float_eq(r.step_s, 19.25, 1e-9);
}

Test(pipeline, bad_inputs)
{
	rm_pp_stage_cost st[4] = {{1, 1, 0, 0}, {1, 1, 0, 0}, {1, 1, 0, 0}, {1, 1, 0, 0}};
	rm_pp_result r;
	rm_error err;
	cr_assert_eq(rm_pp_simulate(RM_PP_INTERLEAVED, 4, 6, 2, st, 0, &r, &err), RM_INVALID);
	cr_assert(strstr(err.msg, "not a multiple"), "%s", err.msg);
	cr_assert_eq(rm_pp_simulate(RM_PP_1F1B, 4, 4, 2, st, 0, &r, &err), RM_INVALID);
	/* zero_bubble is ZB-H1 or ZB-V */
	cr_assert_eq(rm_pp_simulate(RM_PP_ZERO_BUBBLE, 4, 4, 3, st, 0, &r, &err), RM_INVALID);
	cr_assert(strstr(err.msg, "1 chunk per stage (ZB-H1) or 2 (ZB-V), not 3"), "%s", err.msg);
	cr_assert_eq(rm_pp_simulate(RM_PP_GPIPE, 4, 4, 2, st, 0, &r, &err), RM_INVALID);
	cr_assert(strstr(err.msg, "interleaved"), "%s", err.msg);
	/* the weight gradient is a share of the backward */
	st[1].wgrad_s = 1.5;
	cr_assert_eq(rm_pp_simulate(RM_PP_ZERO_BUBBLE, 4, 4, 1, st, 0, &r, &err), RM_INVALID);
	cr_assert(strstr(err.msg, "stage 1: weight-gradient time 1.5 s exceeds its backward 1 s"), "%s", err.msg);
	st[1].wgrad_s = -0.5;
	cr_assert_eq(rm_pp_simulate(RM_PP_ZERO_BUBBLE, 4, 4, 1, st, 0, &r, &err), RM_INVALID);
	cr_assert(strstr(err.msg, "negative"), "%s", err.msg);
	st[1].wgrad_s = 0;
	cr_assert_eq(rm_pp_simulate((rm_pp_schedule)RM_PP_COUNT, 4, 4, 1, st, 0, &r, &err), RM_INVALID);
	cr_assert_eq(rm_pp_simulate(RM_PP_1F1B, 0, 4, 1, st, 0, &r, &err), RM_INVALID);
	st[2].bwd_s = -1;
	cr_assert_eq(rm_pp_simulate(RM_PP_1F1B, 4, 4, 1, st, 0, &r, &err), RM_INVALID);
	rm_pp_schedule s;
	cr_assert(rm_pp_schedule_parse("1F1B", &s) && s == RM_PP_1F1B);
	cr_assert(!rm_pp_schedule_parse("1f2b", &s));
}

/*
 * ZB-H1 by hand, p 4, m 8, t_f = t_b = t_w = 1 (the backward bwd_s 2 of which wgrad_s 1), free
 * transfers. Stage s runs min(p - s - 1, m) warm-up forwards, then F B pairs, deferring its
 * first s W passes (after B j it runs W j - s, from j = s on):
 *   stage 3: F0@3 B0@4 F1@5 B1@6 F2@7 B2@8 F3@9 B3@10 W0@11 F4@12 B4@13 W1@14 ... B7@22
 *            W4@23 W5@24 W6@25 W7@26, ends 27;
 *   stage 0: F0..F3 in [0, 4); its B0 waits for F0 to climb (stage 3 ends it at 4) and B0 to
 *            come down (stages 3, 2, 1 in [4, 7)): B0@7 W0@8 F4@9 B1@10 W1@11 ... F7@18
 *            B4@19 W4@20 B5@21 W5@22 B6@23 W6@24 B7@25 W7@26, ends 27.
 * Stage 0 waits only in [4, 7) (stage 1 ends B5, B6, B7 at 21, 23, 25, just in time): its
 * 8 x 3 busy units + 3 idle = 27, the paper's m (t_f + t_b + t_w) + (p - 1)(t_f + t_b - t_w) =
 * 24 + 3. 1F1B with the whole backward: (m + p - 1)(t_f + t_b + t_w) = 11 x 3 = 33. Bubbles
 * 3 / 27 and 9 / 33.
 */
Test(pipeline, zero_bubble_h1_fills_the_cool_down_with_weight_gradients)
{
	rm_pp_result z = run_w(RM_PP_ZERO_BUBBLE, 4, 8, 1, 1.0, 2.0, 1.0, 0);
	cr_assert_float_eq(z.step_s, 27.0, 1e-9);
	cr_assert_float_eq(z.bubble_fraction, 3.0 / 27.0, 1e-9);
	for (int s = 0; s < 4; s++) {
		cr_assert_float_eq(z.stage_end_s[s], 27.0, 1e-9, "stage %d", s);
		/* every stage holds p micro-batches until their W: 1F1B's stage 0 count */
		cr_assert_eq(z.in_flight[s], 4, "stage %d", s);
	}
	rm_pp_result a = run_w(RM_PP_1F1B, 4, 8, 1, 1.0, 2.0, 1.0, 0);
	cr_assert_float_eq(a.step_s, 33.0, 1e-9);
	cr_assert_float_eq(a.bubble_fraction, 9.0 / 33.0, 1e-9);
	cr_assert_lt(z.bubble_fraction, a.bubble_fraction);
	cr_assert_eq(a.in_flight[0], 4);
	cr_assert_eq(a.in_flight[3], 1);
	/* unequal passes, p 8, m 32, t_f 1, t_b 1.2, t_w 0.8: 32 x 3 + 7 x 1.4 = 105.8 (1F1B: 39 x 3 = 117) */
	rm_pp_result u = run_w(RM_PP_ZERO_BUBBLE, 8, 32, 1, 1.0, 2.0, 0.8, 0);
	cr_assert_float_eq(u.step_s, 105.8, 1e-9);
	cr_assert_float_eq(run_w(RM_PP_1F1B, 8, 32, 1, 1.0, 2.0, 0.8, 0).step_s, 117.0, 1e-9);
	/* m = p: 4 x 3 + 3 x 1 = 15 */
	cr_assert_float_eq(run_w(RM_PP_ZERO_BUBBLE, 4, 4, 1, 1.0, 2.0, 1.0, 0).step_s, 15.0, 1e-9);
}

Test(pipeline, zero_bubble_without_weight_gradients_is_1f1b)
{
	/* W of zero time: B is the whole backward, the step 1F1B's (8 + 3) x 3 = 33 */
	rm_pp_result z = run_w(RM_PP_ZERO_BUBBLE, 4, 8, 1, 1.0, 2.0, 0.0, 0);
	cr_assert_float_eq(z.step_s, 33.0, 1e-9);
	cr_assert_float_eq(z.bubble_fraction, 3.0 / 11.0, 1e-9);
	/* fewer micro-batches than stages: every stage holds all m */
	rm_pp_result f = run_w(RM_PP_ZERO_BUBBLE, 8, 3, 1, 1.0, 2.0, 1.0, 0);
	for (int s = 0; s < 8; s++)
		cr_assert_eq(f.in_flight[s], 3, "stage %d", s);
}

Test(pipeline, zero_bubble_runs_each_w_after_its_b)
{
	enum { P = 4, M = 8 };
	rm_pp_stage_cost st[P];
	for (int s = 0; s < P; s++)
		st[s] = (rm_pp_stage_cost){1.0, 2.0 + 0.25 * s, 0.5, 0.5 + 0.25 * s};
	int per = rm_pp_passes_per_stage(RM_PP_ZERO_BUBBLE, M, 1);
	cr_assert_eq(per, 3 * M);
	cr_assert_eq(rm_pp_passes_per_stage(RM_PP_1F1B, M, 1), 2 * M);
	rm_pp_pass *ps = calloc((size_t)(P * per), sizeof(*ps));
	rm_pp_result r;
	rm_error err;
	double p2p = 0.25;
	cr_assert_eq(rm_pp_simulate_passes(RM_PP_ZERO_BUBBLE, P, M, 1, st, p2p, &r, ps, &err), RM_OK, "%s", err.msg);
	double b_end[P][M], b_start[P][M], w_start[P][M];
	int count[P][3] = {{0}};
	for (int i = 0; i < P * per; i++) {
		const rm_pp_pass *x = &ps[i];
		cr_assert_eq(x->stage, i / per);
		cr_assert_eq(x->chunk, 0);
		count[x->stage][x->kind]++;
		if (x->kind == RM_PP_PASS_BWD) {
			b_start[x->stage][x->micro_batch] = x->start_s;
			b_end[x->stage][x->micro_batch] = x->end_s;
			cr_assert_float_eq(x->end_s - x->start_s, 1.5, 1e-12, "B is the backward less W");
		} else if (x->kind == RM_PP_PASS_WGRAD) {
			w_start[x->stage][x->micro_batch] = x->start_s;
			cr_assert_float_eq(x->end_s - x->start_s, 0.5 + 0.25 * x->stage, 1e-12);
		}
		/* a stage runs one pass at a time, in its order */
		if (i % per > 0)
			cr_assert_geq(x->start_s, ps[i - 1].end_s);
	}
	for (int s = 0; s < P; s++) {
		for (int k = 0; k < 3; k++)
			cr_assert_eq(count[s][k], M);
		for (int j = 0; j < M; j++) {
			cr_assert_geq(w_start[s][j], b_end[s][j], "stage %d micro-batch %d: W before its B", s, j);
			if (s < P - 1)
				cr_assert_geq(b_start[s][j], b_end[s + 1][j] + p2p);
		}
	}
	/* each stage closes with a W, then its tail of 0.5 */
	for (int s = 0; s < P; s++) {
		const rm_pp_pass *last = &ps[s * per + per - 1];
		cr_assert_eq(last->kind, RM_PP_PASS_WGRAD);
		cr_assert_float_eq(r.stage_end_s[s], last->end_s + 0.5, 1e-12);
	}
	free(ps);
}

/*
 * Llama-2-7B on one node: TP 2 x 4 stages of 8 layers, 16 micro-batches of 1 x 4096 tokens.
 * The engine's weight-gradient GEMMs of a stage (the projections' .wgrad) do the FLOPs of its
 * input-gradient GEMMs, and B also holds the attention and element-wise backwards: W is more
 * than nothing and less than half the backward. ZB-H1 over the same stage costs is faster than
 * 1F1B and holds p micro-batches on every stage, the later stages' until their W.
 */
Test(pipeline, a_zero_bubble_scenario_is_faster_than_1f1b)
{
	static const char text[] = "model: llama-2-7b\nhardware: h100-sxm\ncluster: {gpus_per_node: 8, nodes: 1}\n"
				   "training: {seq_len: 4096, micro_batch: 1, global_batch: 16}\n"
				   "remat: {scan: false}\nscheduler: {mode: fsdp2}\n"
				   "parallelism: {tp: 2, pp: 4, pp_schedule: %s}\n";
	rm_pp_run r[3];
	const char *names[3] = {"1f1b", "zero_bubble", "zero_bubble, virtual_stages: 2"};
	double peak_flops = 0;
	for (int k = 0; k < 3; k++) {
		char buf[512];
		snprintf(buf, sizeof(buf), text, names[k]);
		rm_scenario sc;
		rm_error err;
		rm_error_clear(&err);
		rm_scenario_init(&sc);
		cr_assert_eq(rm_scenario_parse(buf, strlen(buf), "t.yaml", &sc, &err), RM_OK, "%s", err.msg);
		rm_scenario_resolved res;
		cr_assert_eq(rm_scenario_resolve(&sc, NULL, &res, &err), RM_OK, "%s", err.msg);
		cr_assert_eq(rm_pp_run_scenario(&res, &r[k], &err), RM_OK, "%s", err.msg);
		peak_flops = res.hw.bf16_TFLOPs * 1e12;
		rm_scenario_resolved_finish(&res);
	}
	cr_assert_eq(r[1].schedule, RM_PP_ZERO_BUBBLE);
	cr_assert_eq(r[1].micro_batches, 16);
	/* the same stage costs either way */
	cr_assert_eq(memcmp(&r[0].middle, &r[1].middle, sizeof(r[0].middle)), 0);
	const rm_pp_stage_cost *kinds[3] = {&r[1].first, &r[1].middle, &r[1].last};
	for (int k = 0; k < 3; k++) {
		cr_assert_gt(kinds[k]->wgrad_s, 0.0, "stage kind %d", k);
		cr_assert_lt(kinds[k]->wgrad_s, 0.5 * kinds[k]->bwd_s, "stage kind %d: W %g of %g", k,
			     kinds[k]->wgrad_s, kinds[k]->bwd_s);
	}
	/* no faster than the roofline of the weight-gradient GEMMs: 2 x 4096 tokens x the layer's
	 * 202375168 weights / tp 2 (4 x 4096^2 attention, 3 x 4096 x 11008 MLP), 8 layers */
	double w_flops = 8.0 * 2.0 * 4096.0 * (202375168.0 / 2.0);
	cr_assert_geq(r[1].middle.wgrad_s, w_flops / peak_flops, "W %g s", r[1].middle.wgrad_s);
	cr_assert_lt(r[1].step_s, r[0].step_s, "zero_bubble %g s, 1f1b %g s", r[1].step_s, r[0].step_s);
	cr_assert_lt(r[1].sched.bubble_fraction, r[0].sched.bubble_fraction);
	/* no faster than stage 0's busy time: m (t_f + t_b) */
	cr_assert_geq(r[1].step_s, 16 * (r[1].first.fwd_s + r[1].first.bwd_s));
	for (int s = 0; s < 4; s++) {
		cr_assert_eq(r[1].sched.in_flight[s], 4, "stage %d", s);
		cr_assert_eq(r[0].sched.in_flight[s], 4 - s, "stage %d", s);
	}
	/*
	 * What a deferred W holds per layer (TP 2, bf16, [4096 tokens, ...] per GPU): the inputs X
	 * of its projections, the attention norm's [4096, 4096] (shared by q, k, v), the attention
	 * output [4096, 2048], the MLP norm's [4096, 4096] and the MLP hidden [4096, 5504]
	 * (11008 / 2): 32 + 16 + 32 + 43 MiB = 128974848 B; and the output gradients dY: q, k, v
	 * [4096, 2048] each, the attention output [4096, 4096], gate and up [4096, 5504], down
	 * [4096, 4096]: 48 + 32 + 86 + 32 MiB = 207618048 B. 336592896 B a layer, 8 layers.
	 * The last stage adds the head's final-norm output [4096, 4096] and logits' gradient
	 * [4096, 32000 / 2]: 33554432 + 131072000 B; the first the embedding's token ids (4096 x 4 B)
	 * and output gradient [4096, 4096]: 16384 + 33554432 B.
	 */
	cr_assert_eq(r[1].wgrad_bytes_middle, 8LL * 336592896);
	cr_assert_eq(r[1].wgrad_bytes_last, 8LL * 336592896 + 33554432 + 131072000);
	cr_assert_eq(r[1].wgrad_bytes_first, 8LL * 336592896 + 16384 + 33554432);
	cr_assert_eq(r[0].wgrad_bytes_middle, 0);
	/* the last stage runs F0 B0 ... F3 B3 before W0: four W pending, 4 wb, where 1F1B's last
	 * stage holds its one micro-batch (the engine's peak): 4 wb - a more */
	cr_assert_eq(r[1].act_bytes_per_chunk, r[0].act_bytes_per_chunk);
	cr_assert_eq(r[1].peak_bytes[3] - r[0].peak_bytes[3], 4 * r[1].wgrad_bytes_last - r[1].act_bytes_per_chunk);
	/* ZB-V: 2 chunks a stage, the head's chunk on stage 0 beside the embedding's; faster than
	 * ZB-H1, 2p = 8 half-size chunks in flight on every stage */
	cr_assert_eq(r[2].chunks, 2);
	cr_assert_lt(r[2].step_s, r[1].step_s, "ZB-V %g s, ZB-H1 %g s", r[2].step_s, r[1].step_s);
	cr_assert_eq(r[2].wgrad_bytes_first, 8LL * 336592896 + 16384 + 33554432 + 33554432 + 131072000);
	cr_assert_eq(r[2].wgrad_bytes_last, 8LL * 336592896);
	cr_assert_eq(r[2].act_bytes_per_chunk * 2, r[1].act_bytes_per_chunk);
	for (int s = 0; s < 4; s++)
		cr_assert_eq(r[2].sched.in_flight[s], 8, "stage %d", s);
}

/*
 * ZB-V by hand, p 4, m 8, a stage's t_f 1, backward 2 of which W 1, so each of its 2 chunks
 * takes 0.5 a pass; free transfers. Chunk 0 of stage s is virtual stage s, chunk 1 virtual
 * stage 7 - s. Micro-batch 0 goes down the V: virtual stages 0..3 on stages 0..3 at 0, 0.5, 1,
 * 1.5, then 4..7 on stages 3..0 at 2, 2.5, 3, 3.5 (the turn stays on stage 3). Stage 0 runs
 * its 7 warm-up forwards of chunk 0 in [0, 3.5), chunk 1's F0 at 3.5 and from then never waits:
 * its 48 passes fill [0, 24). Stage s first waits s x 0.5 for micro-batch 0's forward and then
 * never waits: it ends at 24 + s / 2, stage 3 at 25.5 = m (t_f + t_b) + (p - 1) t_f / 2. The
 * bubble is the last stage's 1.5 of 25.5, 1 / 17 (ZB-H1 over the same stages: 27, 1F1B: 33).
 * Every stage holds 2p = 8 chunks of half a stage's activations: p micro-batches' worth.
 */
Test(pipeline, zero_bubble_v_runs_two_chunks_in_a_v)
{
	rm_pp_result z = run_w(RM_PP_ZERO_BUBBLE, 4, 8, 2, 1.0, 2.0, 1.0, 0);
	cr_assert_float_eq(z.step_s, 25.5, 1e-9);
	for (int s = 0; s < 4; s++) {
		cr_assert_float_eq(z.stage_end_s[s], 24.0 + 0.5 * s, 1e-9, "stage %d", s);
		cr_assert_eq(z.in_flight[s], 8, "stage %d", s);
	}
	cr_assert_float_eq(z.bubble_fraction, 1.0 / 17.0, 1e-9);
	cr_assert_lt(z.step_s, run_w(RM_PP_ZERO_BUBBLE, 4, 8, 1, 1.0, 2.0, 1.0, 0).step_s);
	/* with transfers: every pass after its input, none on the V's turn */
	enum { P = 4, M = 8 };
	rm_pp_stage_cost st[P];
	for (int s = 0; s < P; s++)
		st[s] = (rm_pp_stage_cost){1.0, 2.0, 0, 1.0};
	int per = rm_pp_passes_per_stage(RM_PP_ZERO_BUBBLE, M, 2);
	cr_assert_eq(per, 6 * M);
	rm_pp_pass *ps = calloc((size_t)(P * per), sizeof(*ps));
	rm_pp_result r;
	rm_error err;
	double p2p = 0.25;
	cr_assert_eq(rm_pp_simulate_passes(RM_PP_ZERO_BUBBLE, P, M, 2, st, p2p, &r, ps, &err), RM_OK, "%s", err.msg);
	double fe[2 * P][M], be[2 * P][M], fs[2 * P][M], bs[2 * P][M], ws[2 * P][M];
	for (int i = 0; i < P * per; i++) {
		const rm_pp_pass *x = &ps[i];
		int vs = x->chunk == 0 ? x->stage : 2 * P - 1 - x->stage;
		double(*start)[M] = x->kind == RM_PP_PASS_FWD ? fs : x->kind == RM_PP_PASS_BWD ? bs : ws;
		start[vs][x->micro_batch] = x->start_s;
		if (x->kind == RM_PP_PASS_FWD)
			fe[vs][x->micro_batch] = x->end_s;
		else if (x->kind == RM_PP_PASS_BWD)
			be[vs][x->micro_batch] = x->end_s;
		cr_assert_float_eq(x->end_s - x->start_s, 0.5, 1e-12);
	}
	for (int vs = 0; vs < 2 * P; vs++)
		for (int j = 0; j < M; j++) {
			/* virtual stages P - 1 and P are both on stage P - 1: no transfer between them */
			if (vs > 0)
				cr_assert_geq(fs[vs][j], fe[vs - 1][j] + (vs == P ? 0 : p2p));
			if (vs < 2 * P - 1)
				cr_assert_geq(bs[vs][j], be[vs + 1][j] + (vs == P - 1 ? 0 : p2p));
			cr_assert_geq(ws[vs][j], be[vs][j], "virtual stage %d micro-batch %d: W before its B", vs, j);
		}
	/* stage 3 runs chunk 1's first forward as soon as chunk 0's ends */
	cr_assert_eq(fs[P][0], fe[P - 1][0]);
	free(ps);
}
