/*
 * NCCL's symmetric-memory kernels (2.27+), copy-engine collectives (2.28+, NCCL_CTA_POLICY_ZERO)
 * and NCCL_CTA_POLICY_EFFICIENCY (models/nccl.c, docs/collectives.md 'Symmetric kernels and copy
 * engines'). Every expected value is derived by hand in its comment, from NVIDIA/nccl
 * src/sym_kernels.cc, src/ce_coll.cc, src/enqueue.cc and src/transport/nvls.cc at v2.28.9-1 and
 * the measurements of docs/reference/kernels-h100.md section 7.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "remora/cost.h"
#include "remora/nccl.h"
#include "remora/scenario.h"
#include "remora/schedule.h"
#include "remora/sim.h"
#include "scenario_run.h"

#define US UINT64_C(1000000) /* ps per microsecond */

static const rm_hw_profile *h100(void)
{
	const rm_hw_profile *hw = rm_hw_profile_find("h100-sxm", NULL);
	cr_assert_not_null(hw);
	return hw;
}

/* The default 2.28 model of an H100 node with the given policy and registration. */
static rm_nccl_model model_with(rm_nccl_cta_policy policy, rm_nccl_registration reg)
{
	rm_nccl_model m;
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_nccl_model_init(&m, h100(), NULL, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(rm_nccl_model_set_buffers(&m, policy, reg, &err), RM_OK, "%s", err.msg);
	return m;
}

static rm_coll_estimate estimate(const rm_nccl_model *m, rm_coll coll, int64_t bytes, int ranks, int nodes)
{
	rm_coll_query q = rm_coll_query_make(coll, bytes, ranks, nodes);
	rm_coll_estimate e;
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_nccl_estimate(m, &q, &e, &err), RM_OK, "%s", err.msg);
	return e;
}

Test(nccl_ce, names_parse)
{
	rm_nccl_cta_policy p;
	cr_assert(rm_nccl_cta_policy_parse("Zero", &p) && p == RM_NCCL_CTA_ZERO);
	cr_assert(rm_nccl_cta_policy_parse("NCCL_CTA_POLICY_EFFICIENCY", &p) && p == RM_NCCL_CTA_EFFICIENCY);
	cr_assert(rm_nccl_cta_policy_parse("0", &p) && p == RM_NCCL_CTA_DEFAULT);
	cr_assert(rm_nccl_cta_policy_parse("2", &p) && p == RM_NCCL_CTA_ZERO);
	cr_assert(!rm_nccl_cta_policy_parse("3", &p));
	cr_assert(!rm_nccl_cta_policy_parse("none", &p));
	rm_nccl_registration r;
	cr_assert(rm_nccl_registration_parse("SYMMETRIC", &r) && r == RM_NCCL_REG_SYMMETRIC);
	cr_assert(rm_nccl_registration_parse("buffer", &r) && r == RM_NCCL_REG_BUFFER);
	cr_assert(!rm_nccl_registration_parse("window", &r));
	cr_assert_str_eq(rm_nccl_cta_policy_name(RM_NCCL_CTA_EFFICIENCY), "efficiency");
	cr_assert_str_eq(rm_nccl_registration_name(RM_NCCL_REG_NONE), "none");
	cr_assert_str_eq(rm_nccl_symk_name(RM_NCCL_SYMK_AR_RSxLDMC_AGxSTMC), "AllReduce_RSxLDMC_AGxSTMC");
	cr_assert_str_eq(rm_nccl_algo_name(RM_NCCL_ALGO_CE), "CopyEngine");
	cr_assert_str_eq(rm_nccl_algo_name(RM_NCCL_ALGO_SYMMETRIC), "Symmetric");
}

/* The policies and windows exist from NCCL 2.27 (EFFICIENCY, ncclCommWindowRegister) and 2.28
 * (ZERO, src/ce_coll.cc); an older release is refused, naming it. */
Test(nccl_ce, releases_without_the_feature_are_refused)
{
	rm_nccl_model m;
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_nccl_model_init(&m, h100(), "2.27.7", &err), RM_OK);
	cr_assert_eq(rm_nccl_model_set_buffers(&m, RM_NCCL_CTA_ZERO, RM_NCCL_REG_SYMMETRIC, &err), RM_INVALID);
	cr_assert(strstr(err.msg, "CTA policy zero") && strstr(err.msg, "2.28 or later") && strstr(err.msg, "2.27.7"),
		  "%s", err.msg);
	cr_assert_eq(rm_nccl_model_set_buffers(&m, RM_NCCL_CTA_EFFICIENCY, RM_NCCL_REG_SYMMETRIC, &err), RM_OK);
	cr_assert_eq(rm_nccl_model_init(&m, h100(), "2.26.2", &err), RM_OK);
	cr_assert_eq(rm_nccl_model_set_buffers(&m, RM_NCCL_CTA_DEFAULT, RM_NCCL_REG_SYMMETRIC, &err), RM_INVALID);
	cr_assert(strstr(err.msg, "symmetric registration") && strstr(err.msg, "2.27"), "%s", err.msg);
	cr_assert_eq(rm_nccl_model_set_buffers(&m, RM_NCCL_CTA_EFFICIENCY, RM_NCCL_REG_BUFFER, &err), RM_INVALID);
	/* buffer registration alone is older than windows: allowed */
	cr_assert_eq(rm_nccl_model_set_buffers(&m, RM_NCCL_CTA_DEFAULT, RM_NCCL_REG_BUFFER, &err), RM_OK);
}

/*
 * Copy-engine all-gather, 8x H100, shards of 1 / 4 / 16 MiB (buffers of 8 / 32 / 128 MiB) under
 * NCCL_CTA_POLICY_ZERO with symmetric windows: 0 SMs against the ring's 24.
 * Raw (the mechanism of ncclCeAllGather): 5 stream operations x 3 us launch + 2 NVLink flag hops x
 * 0.6 us = 16.2 us, then 7/8 of the buffer at 371.2 GB/s: 8 MiB: 16.2 + 0.875 x 8388608 / 371200 =
 * 16.2 + 19.7737 = 35.974 us, algBW 8388608 / 35.974e3 = 233.19 GB/s.
 * Calibrated (the default): the bytes term over the measured efficiency 0.403 / 0.490 / 0.553, which
 * reproduces pull/182850's copy-engine : NCCL time ratios 12.4/9.4 = 1.3191, 57.2/37.7 = 1.5172,
 * 229.4/149.1 = 1.5386 against the calibrated NCCL model (49.46 / 117.02 / 382.41 us); e.g.
 * 8 MiB: 16.2 + 19.7737 / 0.403 = 65.266 us, algBW 128.53 GB/s, 1.3195x NCCL's 49.46.
 * At 512 MiB (64 MiB shards) the efficiency is 1.0: 16.2 + 0.875 x 536870912 / 371200 = 1281.72 us
 * against NCCL's 1398.6 (pull/182850 measured NCCL at 382.7 GB/s = 1402.9 us).
 */
Test(nccl_ce, copy_engine_all_gather_by_shard)
{
	rm_nccl_model def = model_with(RM_NCCL_CTA_DEFAULT, RM_NCCL_REG_NONE);
	rm_nccl_model zero = model_with(RM_NCCL_CTA_ZERO, RM_NCCL_REG_SYMMETRIC);
	const int64_t shard[3] = {1 << 20, 4 << 20, 16 << 20};
	const double ratio[3] = {12.4 / 9.4, 57.2 / 37.7, 229.4 / 149.1};
	const double eff[3] = {0.403, 0.490, 0.553};
	for (int i = 0; i < 3; i++) {
		int64_t bytes = 8 * shard[i];
		rm_coll_estimate n = estimate(&def, RM_COLL_ALL_GATHER, bytes, 8, 1);
		rm_coll_estimate c = estimate(&zero, RM_COLL_ALL_GATHER, bytes, 8, 1);
		cr_assert_eq(n.algo, RM_NCCL_ALGO_RING);
		cr_assert_eq(n.channels, 24);
		cr_assert_eq(c.algo, RM_NCCL_ALGO_CE);
		cr_assert_eq(c.channels, 0);
		double term = 0.875 * (double)bytes / 371200.0;
		cr_assert_float_eq(c.latency_us, 16.2, 1e-6); /* 15 + 2 x 0.6f */
		cr_assert_float_eq(c.time_us, 16.2 + term / eff[i], 1e-6, "%d: %.6f", i, c.time_us);
		cr_assert_float_eq(c.algbw_GBps, (double)bytes / (c.time_us * 1e3), 1e-9);
		cr_assert_float_eq(c.efficiency, eff[i], 1e-12);
		/* slower than NCCL's kernels by the measured ratio, to 0.1% */
		cr_assert(fabs(c.time_us / n.time_us / ratio[i] - 1.0) < 1e-3, "%d: %.4f vs %.4f", i,
			  c.time_us / n.time_us, ratio[i]);
		zero.calibrated = false;
		rm_coll_estimate r = estimate(&zero, RM_COLL_ALL_GATHER, bytes, 8, 1);
		zero.calibrated = true;
		cr_assert_float_eq(r.time_us, 16.2 + term, 1e-6);
	}
	rm_coll_estimate c8 = estimate(&zero, RM_COLL_ALL_GATHER, 8 << 20, 8, 1);
	cr_assert_float_eq(c8.time_us, 65.266, 1e-3);
	cr_assert_float_eq(c8.algbw_GBps, 128.53, 0.01);
	rm_coll_estimate big = estimate(&zero, RM_COLL_ALL_GATHER, INT64_C(512) << 20, 8, 1);
	cr_assert_float_eq(big.time_us, 16.2 + 0.875 * 536870912.0 / 371200.0, 1e-6);
	cr_assert_float_eq(big.time_us, 1281.72, 0.01);
	cr_assert(big.time_us < estimate(&def, RM_COLL_ALL_GATHER, INT64_C(512) << 20, 8, 1).time_us);
}

/*
 * What the copy engines cannot take stays on NCCL's kernels: reduce-scatter and all-reduce run the
 * symmetric kernels (ZERO does not change them: enqueue.cc only sends ncclCeImplemented
 * collectives to the copy engines); across nodes (nNodes > 1) neither path exists, so the tuned
 * ring of the 2-node group runs with its 16 channels; without symmetric windows ZERO changes
 * nothing (24 channels). All-to-all goes to the copy engines too: 7/8 x 64 MiB at 371.2 GB/s after
 * 16.2 us = 16.2 + 158.07 = 174.27 us (no measured efficiency for all-to-all).
 */
Test(nccl_ce, what_stays_on_the_sms)
{
	rm_nccl_model zero = model_with(RM_NCCL_CTA_ZERO, RM_NCCL_REG_SYMMETRIC);
	rm_coll_estimate rs = estimate(&zero, RM_COLL_REDUCE_SCATTER, 8 << 20, 8, 1);
	cr_assert_eq(rs.algo, RM_NCCL_ALGO_SYMMETRIC);
	cr_assert_eq(rs.symk, RM_NCCL_SYMK_RS_LDMC);
	cr_assert_eq(rs.channels, 2);
	rm_coll_estimate two = estimate(&zero, RM_COLL_ALL_GATHER, 16 << 20, 16, 2);
	cr_assert_eq(two.algo, RM_NCCL_ALGO_RING);
	cr_assert_eq(two.channels, 16);
	rm_nccl_model plain = model_with(RM_NCCL_CTA_ZERO, RM_NCCL_REG_NONE);
	rm_coll_estimate p = estimate(&plain, RM_COLL_ALL_GATHER, 8 << 20, 8, 1);
	cr_assert_eq(p.algo, RM_NCCL_ALGO_RING);
	cr_assert_eq(p.channels, 24);
	rm_coll_estimate a2a = estimate(&zero, RM_COLL_ALL_TO_ALL, 64 << 20, 8, 1);
	cr_assert_eq(a2a.algo, RM_NCCL_ALGO_CE);
	cr_assert_eq(a2a.channels, 0);
	cr_assert_float_eq(a2a.time_us, 16.2 + 0.875 * 67108864.0 / 371200.0, 1e-6);
}

/*
 * A small all-reduce on symmetric windows (sym_kernels.cc queryModel, sm_90): 64 KiB on 8 H100s.
 * AllReduce_RSxLDMC_AGxSTMC: bus bytes 65536/8 + 65536 = 73728, x8 multiplier, at most
 * ceil(16/8) = 2 CTAs, 65 GiB/s per CTA (69793.2 B/us), peak 480 GiB/s (515396.1 B/us), base
 * 7.8 us. 2 CTAs: softmin(1116691, 515396, 69793) = 515383.4; 7.8 + softplus(73728/515383.4 - 1 =
 * -0.85694) = 7.8 + ln(1 + e^-0.85694) = 7.8 + 0.35378 = 8.1538 us. 1 CTA: softmin(558346, 515396,
 * 69793) = 515396 - 69793 ln(1 + 1609.5 e^-8) = 485264; 7.8 + ln(1 + e^(73728/485264 - 1)) =
 * 8.1564 us <= 1.025 x 8.1538: 1 CTA, 8.1564 us. Scored x (1 + 2.5% per CTA) = 8.360 it beats
 * RSxLD_AGxST (8.4167 us on 2 CTAs: 8.838), AGxLL_R (17.568 on 7: 20.64) and AGxLLMC_R (17.402 on
 * 7: 20.45). The tuner's choice without windows: ring LL, 15.81 us on 2 channels.
 * 8 KiB picks AllReduce_AGxLLMC_R: 5.7315 us on 5 CTAs (score 6.448 against AGxLL_R's 5.688 us on
 * 6: 6.541), 2.6x faster than the ring LL's 15.10 us.
 */
Test(nccl_ce, symmetric_small_all_reduce)
{
	rm_nccl_model def = model_with(RM_NCCL_CTA_DEFAULT, RM_NCCL_REG_NONE);
	rm_nccl_model sym = model_with(RM_NCCL_CTA_DEFAULT, RM_NCCL_REG_SYMMETRIC);
	rm_coll_estimate e = estimate(&sym, RM_COLL_ALL_REDUCE, 65536, 8, 1);
	cr_assert_eq(e.algo, RM_NCCL_ALGO_SYMMETRIC);
	cr_assert_eq(e.symk, RM_NCCL_SYMK_AR_RSxLDMC_AGxSTMC);
	cr_assert_eq(e.channels, 1);
	cr_assert_float_eq(e.time_us, 8.1564, 1e-4, "%.6f", e.time_us);
	rm_coll_estimate d = estimate(&def, RM_COLL_ALL_REDUCE, 65536, 8, 1);
	cr_assert_eq(d.algo, RM_NCCL_ALGO_RING);
	cr_assert_eq(d.proto, RM_NCCL_PROTO_LL);
	cr_assert_eq(d.channels, 2);
	cr_assert_float_eq(d.time_us, 15.81, 0.01);
	rm_coll_estimate s8 = estimate(&sym, RM_COLL_ALL_REDUCE, 8192, 8, 1);
	cr_assert_eq(s8.symk, RM_NCCL_SYMK_AR_AGxLLMC_R);
	cr_assert_eq(s8.channels, 5);
	cr_assert_float_eq(s8.time_us, 5.7315, 1e-4, "%.6f", s8.time_us);
	cr_assert_float_eq(estimate(&def, RM_COLL_ALL_REDUCE, 8192, 8, 1).time_us, 15.10, 0.01);
	/* calibration does not touch NCCL's own symmetric estimate */
	sym.calibrated = false;
	cr_assert_float_eq(estimate(&sym, RM_COLL_ALL_REDUCE, 65536, 8, 1).time_us, e.time_us, 0.0);
}

/*
 * Two GPUs have no NVLS (nvls.cc: more than 2 GPUs), so no multicast kernel: 64 KiB all-reduce
 * picks AllReduce_AGxLL_R (bus 2 x 65536 x 9 = 1179648 B, 7 CTAs, 7.0946 us, score 8.336) over
 * RSxLD_AGxST (8.2667 us on 2, score 8.680). An all-gather shard of 1000 B counts as a whole
 * 1 KiB cell from 2.28 (symmetric_sched.cc): 8 x 1000 B and 8 x 1024 B cost the same.
 */
Test(nccl_ce, symmetric_without_nvls_and_cells)
{
	rm_nccl_model sym = model_with(RM_NCCL_CTA_DEFAULT, RM_NCCL_REG_SYMMETRIC);
	rm_coll_estimate e = estimate(&sym, RM_COLL_ALL_REDUCE, 65536, 2, 1);
	cr_assert_eq(e.symk, RM_NCCL_SYMK_AR_AGxLL_R);
	cr_assert_eq(e.channels, 7);
	cr_assert_float_eq(e.time_us, 7.0946, 1e-4, "%.6f", e.time_us);
	rm_coll_estimate a = estimate(&sym, RM_COLL_ALL_GATHER, 8000, 8, 1);
	rm_coll_estimate b = estimate(&sym, RM_COLL_ALL_GATHER, 8192, 8, 1);
	cr_assert_eq(a.symk, b.symk);
	cr_assert_float_eq(a.time_us, b.time_us, 0.0);
}

/*
 * NCCL_CTA_POLICY_EFFICIENCY with registered buffers on one NVLS node (enqueue.cc, nvls.cc
 * ncclNvlsRegResourcesQuery, sm_90, 8 heads): an 8 MiB all-gather leaves the ring (LL128, 24
 * channels, 49.46 us) for NVLS Simple on ceil(32/8) = 4 CTAs at NCCL's NVLS estimate, 65.28 us;
 * a reduce-scatter on ceil(40/8) = 5. A 64 KiB all-gather keeps its ring LL on 2 channels
 * (4 > 2). Forcing NCCL_ALGO (or NCCL_PROTO) turns the policy's switch off, as does having no
 * registered buffers.
 */
Test(nccl_ce, efficiency_policy_runs_nvls_on_few_ctas)
{
	rm_nccl_model eff = model_with(RM_NCCL_CTA_EFFICIENCY, RM_NCCL_REG_BUFFER);
	rm_coll_estimate ag = estimate(&eff, RM_COLL_ALL_GATHER, 8 << 20, 8, 1);
	cr_assert_eq(ag.algo, RM_NCCL_ALGO_NVLS);
	cr_assert_eq(ag.channels, 4);
	cr_assert_float_eq(ag.time_us, 65.28, 0.01);
	rm_coll_estimate rs = estimate(&eff, RM_COLL_REDUCE_SCATTER, 8 << 20, 8, 1);
	cr_assert_eq(rs.algo, RM_NCCL_ALGO_NVLS);
	cr_assert_eq(rs.channels, 5);
	rm_coll_estimate small = estimate(&eff, RM_COLL_ALL_GATHER, 65536, 8, 1);
	cr_assert_eq(small.algo, RM_NCCL_ALGO_RING);
	cr_assert_eq(small.channels, 2);
	rm_coll_query q = rm_coll_query_make(RM_COLL_ALL_GATHER, 8 << 20, 8, 1);
	q.algo_mask = (1u << RM_NCCL_ALGO_RING) | (1u << RM_NCCL_ALGO_NVLS);
	rm_coll_estimate forced;
	cr_assert_eq(rm_nccl_estimate(&eff, &q, &forced, NULL), RM_OK);
	cr_assert_eq(forced.algo, RM_NCCL_ALGO_RING);
	cr_assert_eq(forced.channels, 24);
	rm_nccl_model unreg = model_with(RM_NCCL_CTA_EFFICIENCY, RM_NCCL_REG_NONE);
	cr_assert_eq(estimate(&unreg, RM_COLL_ALL_GATHER, 8 << 20, 8, 1).channels, 24);
	/* all-reduce is not switched (NCCL checks all-gather and reduce-scatter only) */
	cr_assert_eq(estimate(&eff, RM_COLL_ALL_REDUCE, 16 << 20, 8, 1).channels, 16);
}

/* An 8192^3 BF16 GEMM beside a 512 MiB all-gather (64 MiB shards) on 8 H100s, the experiment of
 * github.com/pytorch/pytorch/pull/172714. With NCCL's ring (24 SMs) the GEMM runs its waves on
 * 108 SMs while the all-gather lasts: 2048 tiles take ceil(2048/108) = 19 waves instead of 16.
 * On the copy engines (0 SMs) the GEMM ends at its solo time; the all-gather takes 1281.72 us. */
static rm_sim *gemm_beside_all_gather(const rm_cost_nccl *cn, rm_program **out)
{
	rm_program *p = rm_program_create("gemm+ag");
	rm_program_add_stream(p, "compute", RM_STREAM_COMPUTE, 0);
	rm_program_add_stream(p, "comm", RM_STREAM_COLLECTIVE, -1);
	rm_program_op_desc d = rm_program_op_desc_init("gemm", RM_COST_GEMM, 0);
	d.cost.gemm = (rm_gemm_shape){.batch = 1, .m = 8192, .n = 8192, .k = 8192, .dtype = RM_DTYPE_BF16};
	rm_program_add_op(p, &d);
	d = rm_program_op_desc_init("ag", RM_COST_COLLECTIVE, 1);
	d.cost.collective = (rm_collective_cost){.op = RM_COLL_ALL_GATHER, .bytes = INT64_C(512) << 20,
						 .group_size = 8, .span = 1};
	rm_program_add_op(p, &d);
	rm_error err;
	rm_error_clear(&err);
	rm_sim_options opt = {.hw_queues = 8, .cost = &cn->base};
	rm_sim *sim = rm_sim_create(p, h100(), &opt, &err);
	cr_assert_not_null(sim, "%s", err.msg);
	cr_assert_eq(rm_sim_run(sim, &err), RM_OK, "%s", err.msg);
	*out = p;
	return sim;
}

Test(nccl_ce, compute_keeps_its_sms_beside_copy_engine_collectives)
{
	rm_cost_nccl sm, ce;
	rm_nccl_model def = model_with(RM_NCCL_CTA_DEFAULT, RM_NCCL_REG_NONE);
	rm_nccl_model zero = model_with(RM_NCCL_CTA_ZERO, RM_NCCL_REG_SYMMETRIC);
	rm_cost_nccl_init(&sm, &def);
	rm_cost_nccl_init(&ce, &zero);
	rm_program *p1, *p2;
	rm_sim *a = gemm_beside_all_gather(&sm, &p1);
	rm_sim *b = gemm_beside_all_gather(&ce, &p2);
	cr_assert_eq(rm_sim_op_sms(a, 1), 24);
	cr_assert_eq(rm_sim_op_sms(b, 1), 0);
	rm_time_ps t = rm_sim_op_solo(b, 0);
	cr_assert_eq(rm_sim_op_solo(a, 0), t);
	/* copy engines: the GEMM is not slowed at all */
	cr_assert_eq(rm_sim_op_end(b, 0), t);
	cr_assert_eq(rm_sim_op_end(b, 1), rm_sim_op_solo(b, 1));
	cr_assert(llabs((long long)rm_sim_op_solo(b, 1) - 1281720000LL) < 1000000, "%llu",
		  (unsigned long long)rm_sim_op_solo(b, 1)); /* 1281.72 us, to 1 ns */
	/* NCCL's ring: the all-gather, on the more urgent stream, takes its 24 SMs at launch (docs/sim.md
	 * "SM grants") and runs its D = 1398.6 us while the GEMM advances at 16/19 of its rate; the
	 * GEMM then ends alone: D + (T - 16/19 D) = T + 3/19 D = 1381.4 + 220.8 = 1602.3 us (to 1 ns) */
	rm_time_ps D = rm_sim_op_solo(a, 1);
	cr_assert(llabs((long long)D - 1398580000LL) < 10000000, "%llu", (unsigned long long)D);
	cr_assert_eq(rm_sim_op_grant(a, 1), 0);
	double expect = (double)t + 3.0 / 19.0 * (double)D;
	rm_time_ps ga = rm_sim_op_end(a, 0);
	cr_assert(fabs((double)ga - expect) < 1000.0, "%llu vs %.0f", (unsigned long long)ga, expect);
	cr_assert(llabs((long long)ga - 1602250000LL) < 100000000, "%llu", (unsigned long long)ga);
	cr_assert(rm_sim_get_metrics(b)->compute_busy < rm_sim_get_metrics(a)->compute_busy);
	cr_assert(rm_sim_get_metrics(b)->step_time < rm_sim_get_metrics(a)->step_time);
	rm_sim_destroy(a);
	rm_sim_destroy(b);
	rm_program_destroy(p1);
	rm_program_destroy(p2);
}

/* A scenario's step under the cost model its resolution built (what `remora simulate` runs). */
static rm_sim_metrics simulate_text(const char *text)
{
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_parse(text, strlen(text), "t.yaml", &sc, &err), RM_OK, "%s", err.msg);
	rm_scenario_resolved res;
	cr_assert_eq(rm_scenario_resolve(&sc, NULL, &res, &err), RM_OK, "%s", err.msg);
	rm_schedule_report rep;
	rm_program *prog = rm_schedule_build(&res.sched, &rep, &err);
	cr_assert_not_null(prog, "%s", err.msg);
	rm_sim_options opt = {.hw_queues = res.hw_queues, .cost = res.sched.cost};
	rm_sim *s = rm_sim_create(prog, &res.hw, &opt, &err);
	cr_assert_not_null(s, "%s", err.msg);
	cr_assert_eq(rm_sim_run(s, &err), RM_OK, "%s", err.msg);
	rm_sim_metrics m = *rm_sim_get_metrics(s);
	rm_sim_destroy(s);
	rm_program_destroy(prog);
	rm_schedule_report_finish(&rep);
	rm_scenario_resolved_finish(&res);
	return m;
}

/*
 * LLaMA-2 7B, FSDP over one node of 8 H100s, PyTorch FSDP2: the per-layer all-gathers and
 * reduce-scatters overlap the GEMMs. With NCCL's ring kernels each holds 24 of 132 SMs; with
 * symmetric windows the symmetric kernels hold 2 (AllGather_STMC / ReduceScatter_LDMC); under
 * NCCL_CTA_POLICY_ZERO the all-gathers hold none. The compute the step runs is the same; the time
 * it is busy shrinks as the collectives give the SMs back.
 */
Test(nccl_ce, scenario_compute_is_faster_with_the_sms_free)
{
	const char *base = "model: llama-2-7b\nparallelism: {fsdp: 8}\ntraining: {seq_len: 4096, micro_batch: 1}\n"
			   "scheduler: {mode: fsdp2";
	char text[512];
	snprintf(text, sizeof(text), "%s}\n", base);
	rm_sim_metrics d = simulate_text(text);
	snprintf(text, sizeof(text), "%s, nccl_registration: symmetric}\n", base);
	rm_sim_metrics s = simulate_text(text);
	snprintf(text, sizeof(text), "%s, nccl_registration: symmetric, nccl_cta_policy: zero}\n", base);
	rm_sim_metrics z = simulate_text(text);
	cr_assert_float_eq(s.model_flops, d.model_flops, 0.0);
	cr_assert_float_eq(z.model_flops, d.model_flops, 0.0);
	cr_assert(s.compute_busy < d.compute_busy, "%llu vs %llu", (unsigned long long)s.compute_busy,
		  (unsigned long long)d.compute_busy);
	cr_assert(z.compute_busy < d.compute_busy);
	cr_assert(z.step_time < d.step_time);
	cr_assert_eq(z.collectives, d.collectives);
}

/* Bad values fail at their key with FILE:LINE:COLUMN; ZERO and collective_engine copy_engine
 * both claim the all-gathers; a release without the policy is refused at the policy's key. */
Test(nccl_ce, scenario_keys_are_checked)
{
	expect_scenario_error("model: llama-2-7b\nscheduler:\n  nccl_cta_policy: fast\n", RM_INVALID, 3, 20,
		     "expected default, efficiency or zero, got \"fast\"");
	expect_scenario_error("model: llama-2-7b\nscheduler:\n  nccl_registration: window\n", RM_INVALID, 3, 22,
		     "expected none, buffer or symmetric");
	expect_scenario_error("model: llama-2-7b\nscheduler:\n  collective_engine: copy_engine\n  nccl_cta_policy: zero\n", RM_INVALID, 4,
		     20, "set one");
	expect_scenario_error("model: llama-2-7b\nscheduler:\n  nccl_version: \"2.27\"\n  nccl_cta_policy: zero\n", RM_INVALID, 4, 20,
		     "needs NCCL 2.28 or later");
	expect_scenario_error("model: llama-2-7b\nscheduler:\n  nccl_version: \"2.26\"\n  nccl_registration: symmetric\n", RM_INVALID, 4,
		     22, "symmetric registration");
}

/* `remora collective ARGS` with stderr merged: its exit status, and whether out holds needle. */
static int collective_cli(const char *args, const char *needle)
{
	const char *bin = getenv("REMORA_BIN");
	cr_assert_not_null(bin, "REMORA_BIN must name the remora executable");
	char cmd[1024], out[8192];
	snprintf(cmd, sizeof(cmd), "'%s' collective %s 2>&1", bin, args);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	size_t n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	int status = pclose(p);
	cr_assert(strstr(out, needle), "`remora collective %s` printed '%s', lacking '%s'", args, out, needle);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The flags show the path: the copy engines with 0 SMs, the symmetric kernel and its CTAs, why a
 * setting did not apply; bad values and releases without the feature are bad usage (2). */
Test(nccl_ce, command_line)
{
	cr_assert_eq(collective_cli("--op all-gather --bytes 8MiB --gpus 8 --cta-policy zero --registration symmetric",
				    "CopyEngine (cudaMemcpyBatchAsync), 0 channels (no SM held)"),
		     0);
	cr_assert_eq(collective_cli("--op all-gather --bytes 8MiB --gpus 8 --cta-policy zero --registration symmetric",
				    "time      65.27 us"),
		     0);
	cr_assert_eq(collective_cli("--op all-reduce --bytes 64KiB --gpus 8 --registration symmetric --json",
				    "\"kernel\": \"AllReduce_RSxLDMC_AGxSTMC\""),
		     0);
	cr_assert_eq(collective_cli("--op all-gather --bytes 8MiB --gpus 8 --cta-policy zero",
				    "the copy engines need symmetric windows"),
		     0);
	cr_assert_eq(collective_cli("--op all-gather --bytes 64MiB --gpus 16 --nodes 2 --registration symmetric",
				    "inside one node only"),
		     0);
	cr_assert_eq(collective_cli("--op all-gather --bytes 8MiB --gpus 8 --cta-policy fast",
				    "--cta-policy: unknown policy 'fast' (default, efficiency, zero)"),
		     2);
	cr_assert_eq(collective_cli("--op all-gather --bytes 8MiB --gpus 8 --registration window",
				    "unknown registration 'window'"),
		     2);
	cr_assert_eq(collective_cli("--op all-gather --bytes 8MiB --gpus 8 --cta-policy zero --nccl-version 2.27.7",
				    "needs NCCL 2.28 or later, not 2.27.7"),
		     2);
}
