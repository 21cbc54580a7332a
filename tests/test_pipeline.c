/*
 * Pipeline schedules (remora/pipeline.h) against their closed forms (Narayanan et al. 2021,
 * section 2.2): with equal stages and free transfers, 1F1B and GPipe take (m + p - 1)(t_f + t_b)
 * and leave stage 0 idle (p - 1) / (m + p - 1) of it; the interleaved schedule with v chunks,
 * (m v + p - 1)(t_f + t_b) / v and (p - 1) / (v m + p - 1). 1F1B's stage s holds min(p - s, m)
 * micro-batches of activations, GPipe's all m, the interleaved schedule's stage 0
 * 2 (p - 1) + (v - 1) p + 1 chunk passes.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "remora/pipeline.h"

static rm_pp_result run(rm_pp_schedule s, int p, int m, int v, double tf, double tb, double p2p)
{
	rm_pp_stage_cost st[RM_PP_MAX_STAGES];
	for (int i = 0; i < p; i++)
		st[i] = (rm_pp_stage_cost){tf, tb, 0};
	rm_pp_result r;
	rm_error err;
	cr_assert_eq(rm_pp_simulate(s, p, m, v, st, p2p, &r, &err), RM_OK, "%s", err.msg);
	return r;
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
	rm_pp_stage_cost st[2] = {{1, 2, 0.25}, {1, 3, 0}};
	rm_pp_result r;
	rm_error err;
	cr_assert_eq(rm_pp_simulate(RM_PP_1F1B, 2, 4, 1, st, 0, &r, &err), RM_OK, "%s", err.msg);
	/* stage 1 runs F0 at 1, then B F B F B F B: 1 + 4 x 4 = 17; stage 0's last backward at
	 * 17 + 2 = 19, its tail 0.25 */
	cr_assert_float_eq(r.step_s, 19.25, 1e-9);
}

Test(pipeline, bad_inputs)
{
	rm_pp_stage_cost st[4] = {{1, 1, 0}, {1, 1, 0}, {1, 1, 0}, {1, 1, 0}};
	rm_pp_result r;
	rm_error err;
	cr_assert_eq(rm_pp_simulate(RM_PP_INTERLEAVED, 4, 6, 2, st, 0, &r, &err), RM_INVALID);
	cr_assert(strstr(err.msg, "not a multiple"), "%s", err.msg);
	cr_assert_eq(rm_pp_simulate(RM_PP_1F1B, 4, 4, 2, st, 0, &r, &err), RM_INVALID);
	cr_assert_eq(rm_pp_simulate(RM_PP_ZERO_BUBBLE, 4, 4, 1, st, 0, &r, &err), RM_INVALID);
	cr_assert_eq(rm_pp_simulate(RM_PP_1F1B, 0, 4, 1, st, 0, &r, &err), RM_INVALID);
	st[2].bwd_s = -1;
	cr_assert_eq(rm_pp_simulate(RM_PP_1F1B, 4, 4, 1, st, 0, &r, &err), RM_INVALID);
	rm_pp_schedule s;
	cr_assert(rm_pp_schedule_parse("1F1B", &s) && s == RM_PP_1F1B);
	cr_assert(!rm_pp_schedule_parse("1f2b", &s));
}
