/* Unit tests of the default cost model (models/cost.c) against shared/reference figures. */
#include <criterion/criterion.h>
#include <math.h>

#include "remora/cost.h"
#include "remora/hw.h"

static const rm_hw_profile *h100(void)
{
	const rm_hw_profile *hw = rm_hw_profile_find("h100-sxm", NULL);
	cr_assert_not_null(hw);
	return hw;
}

/* reference/gemm-h100.csv, bf16 rows (xla and mamf), K >= 512: within 10%. */
Test(cost, gemm_matches_reference_table)
{
	static const struct {
		int64_t b, m, n, k;
		double tflops;
	} rows[] = {
		{1, 512, 256, 512, 21.8},     {1, 1024, 1024, 2048, 350},  {1, 1024, 2048, 2048, 524},
		{1, 4096, 512, 1024, 371},    {1, 2048, 2048, 2048, 632},  {1, 4096, 4096, 4096, 783},
		{4, 4096, 4096, 4096, 794},   {4, 2048, 4096, 4096, 802},  {1, 2048, 2048, 13312, 794.5},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		rm_gemm_shape g = {.batch = rows[i].b, .m = rows[i].m, .n = rows[i].n, .k = rows[i].k,
				   .dtype = RM_DTYPE_BF16};
		double t = rm_cost_gemm_s(&g, h100(), 0);
		double tflops = rm_cost_gemm_flops(&g) / t / 1e12;
		double rel = fabs(tflops - rows[i].tflops) / rows[i].tflops;
		cr_expect(rel <= 0.10, "row %zu (%lldx%lldx%lld b%lld): model %.1f vs measured %.1f",
			  i, (long long)g.m, (long long)g.n, (long long)g.k, (long long)g.batch, tflops,
			  rows[i].tflops);
	}
}

Test(cost, gemm_formula_by_hand)
{
	/* 2048^3: 128 tiles <= 132 SMs, one wave: t = 6 us + 2*2048^3 / 790e12. */
	rm_gemm_shape g = {.batch = 1, .m = 2048, .n = 2048, .k = 2048, .dtype = RM_DTYPE_BF16};
	double expect = 6e-6 + 2.0 * 2048.0 * 2048.0 * 2048.0 / 790e12;
	cr_assert_float_eq(rm_cost_gemm_s(&g, h100(), 0), expect, 1e-15);
	/* 4096^3: 512 tiles, 4 waves of 132: q = 528/512. */
	g.m = g.n = g.k = 4096;
	expect = 6e-6 + 2.0 * 4096.0 * 4096.0 * 4096.0 / 790e12 * 528.0 / 512.0;
	cr_assert_float_eq(rm_cost_gemm_s(&g, h100(), 0), expect, 1e-15);
	/* On 108 SMs: 5 waves of 108 over 512 tiles, at 108/132 of the rate. */
	expect = 6e-6 + 2.0 * 4096.0 * 4096.0 * 4096.0 / (790e12 * 108.0 / 132.0) * 540.0 / 512.0;
	cr_assert_float_eq(rm_cost_gemm_s(&g, h100(), 108), expect, 1e-15);
}

Test(cost, memory_bound_and_copies)
{
	const rm_hw_profile *hw = h100();
	/* hardware.md: HBM achievable 2.90 TB/s: 2.9 MB read + 2.9 MB written take 2 us. */
	rm_elementwise_cost e = {.bytes_read = 2900000, .bytes_written = 2900000};
	cr_assert_float_eq(rm_cost_elementwise_s(&e, hw), 2e-6, 1e-18);
	/* Pinned copies: H2D 51 GB/s, D2H 52 GB/s; D2D reads and writes every byte. */
	rm_copy_cost c = {.dir = RM_COPY_H2D, .bytes = 51000000};
	cr_assert_float_eq(rm_cost_copy_s(&c, hw), 1e-3, 1e-15);
	c = (rm_copy_cost){.dir = RM_COPY_D2H, .bytes = 52000000};
	cr_assert_float_eq(rm_cost_copy_s(&c, hw), 1e-3, 1e-15);
	c = (rm_copy_cost){.dir = RM_COPY_D2D, .bytes = 1450000000};
	cr_assert_float_eq(rm_cost_copy_s(&c, hw), 1e-3, 1e-15);
}

/* The cost model's collectives are NCCL's model (remora/nccl.h), calibrated: the same time and
 * channels as rm_nccl_estimate, and the large rows of reference/nccl-h100-8gpu.csv within 5%. */
Test(cost, collectives_follow_the_nccl_model)
{
	const rm_hw_profile *hw = h100();
	static const struct {
		rm_collective op;
		int64_t bytes;
		double us;
	} rows[] = {
		/* reference/nccl-h100-8gpu.csv (all_gather/reduce_scatter ring, all_reduce default) */
		{RM_COLL_ALL_GATHER, 16777216, 70.7},
		{RM_COLL_ALL_GATHER, 1073741824, 2727},
		{RM_COLL_ALL_GATHER, 8589934592, 20935},
		{RM_COLL_REDUCE_SCATTER, 268435456, 720},
		{RM_COLL_REDUCE_SCATTER, 8589934592, 20754},
		{RM_COLL_ALL_REDUCE, 16777216, 123.8},
		{RM_COLL_ALL_REDUCE, 1073741824, 4029},
	};
	rm_nccl_model m;
	cr_assert_eq(rm_nccl_model_init(&m, hw, NULL, NULL), RM_OK);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		rm_collective_cost c = {.op = rows[i].op, .bytes = rows[i].bytes, .group_size = 8,
					.span = 1};
		double us = rm_cost_collective_s(&c, hw) * 1e6;
		cr_expect(fabs(us - rows[i].us) / rows[i].us < 0.05, "row %zu: %.1f vs %.1f", i, us, rows[i].us);
		rm_coll_query q = rm_coll_query_make(rows[i].op, rows[i].bytes, 8, 1);
		rm_coll_estimate e;
		cr_assert_eq(rm_nccl_estimate(&m, &q, &e, NULL), RM_OK);
		cr_assert_float_eq(us, e.time_us, 1e-9);
		cr_assert_eq(rm_cost_collective_channels(&c, hw), e.channels);
	}
	/* 16 GPUs in "one node" of 8: spread over 2 nodes rather than fail */
	rm_collective_cost c = {.op = RM_COLL_ALL_GATHER, .bytes = 1 << 30, .group_size = 16, .span = 1};
	rm_coll_query q = rm_coll_query_make(RM_COLL_ALL_GATHER, 1 << 30, 16, 2);
	rm_coll_estimate e;
	cr_assert_eq(rm_nccl_estimate(&m, &q, &e, NULL), RM_OK);
	cr_assert_float_eq(rm_cost_collective_s(&c, hw) * 1e6, e.time_us, 1e-9);
	c.group_size = 1;
	cr_assert_eq(rm_cost_collective_s(&c, hw), 0.0, "XLA drops trivial collectives");
}

Test(cost, collective_channels)
{
	const rm_hw_profile *hw = h100();
	rm_collective_cost c = {.op = RM_COLL_ALL_GATHER, .bytes = 1 << 30, .group_size = 8, .span = 1};
	cr_assert_eq(rm_cost_collective_channels(&c, hw), 24); /* hardware.md: 24 of 132 */
	c.op = RM_COLL_ALL_REDUCE;
	cr_assert_eq(rm_cost_collective_channels(&c, hw), 16); /* NVLS */
	c.op = RM_COLL_REDUCE_SCATTER;
	c.bytes = 65536;
	cr_assert_eq(rm_cost_collective_channels(&c, hw), 2); /* ring LL: 64 KiB / 32 KiB per channel */
	c.group_size = 1;
	cr_assert_eq(rm_cost_collective_channels(&c, hw), 0);
	const rm_cost_model *m = rm_cost_model_default();
	rm_cost_op op = {.kind = RM_COST_COLLECTIVE,
			 .collective = {.op = RM_COLL_ALL_GATHER, .bytes = 1 << 30, .group_size = 8,
					.span = 1}};
	cr_assert_eq(m->sms_held(m, &op, hw), 24);
	cr_assert(fabs(m->op_time_s(m, &op, hw) - 2727e-6) / 2727e-6 < 0.01);
	op = (rm_cost_op){.kind = RM_COST_GEMM,
			  .gemm = {.batch = 1, .m = 64, .n = 64, .k = 64, .dtype = RM_DTYPE_BF16}};
	cr_assert_eq(m->sms_held(m, &op, hw), 0);
}

Test(cost, names_round_trip)
{
	for (int k = 0; k < RM_COST_KIND_COUNT; k++) {
		rm_cost_kind out;
		cr_assert(rm_cost_kind_parse(rm_cost_kind_name((rm_cost_kind)k), &out));
		cr_assert_eq((int)out, k);
	}
	for (int k = 0; k < RM_COLL_COUNT; k++) {
		rm_collective out;
		cr_assert(rm_collective_parse(rm_collective_name((rm_collective)k), &out));
		cr_assert_eq((int)out, k);
	}
	rm_copy_dir d;
	cr_assert(rm_copy_dir_parse("d2h", &d) && d == RM_COPY_D2H);
	cr_assert_not(rm_copy_dir_parse("sideways", &d));
}

Test(cost, attention_flops)
{
	rm_attention_cost a = {.shape = {.batch = 1, .heads = 32, .kv_heads = 8, .seq = 4096,
					 .head_dim = 128, .causal = false, .fused = true,
					 .dtype = RM_DTYPE_BF16}};
	double f = 4.0 * 32 * 4096.0 * 4096.0 * 128;
	cr_assert_float_eq(rm_cost_attention_flops(&a), f, 1);
	a.shape.causal = true;
	cr_assert_float_eq(rm_cost_attention_flops(&a), f / 2, 1);
	a.backward = true;
	cr_assert_float_eq(rm_cost_attention_flops(&a), f / 2 * 2.5, 1);
	cr_assert(rm_cost_attention_s(&a, h100()) > 0);
}

Test(cost, sliding_window_attention_executes_only_the_window)
{
	/* Mistral-7B shape at 32k, window 4096: pairs = 4096*4097/2 + (32768-4096)*4096
	 * = 8,390,656 + 117,440,512 = 125,831,168 per (batch, head); FLOPs = 4*32*128*pairs */
	rm_attention_cost a = {.shape = {.batch = 1, .heads = 32, .kv_heads = 8, .seq = 32768, .head_dim = 128,
					 .window = 4096, .causal = true, .fused = true, .dtype = RM_DTYPE_BF16}};
	cr_assert_float_eq(rm_cost_attention_flops(&a), 16384.0 * 125831168.0, 1.0);
	a.backward = true;
	cr_assert_float_eq(rm_cost_attention_flops(&a), 2.5 * 16384.0 * 125831168.0, 1.0);
	/* the time follows the FLOPs: 4.27x less than full causal attention */
	rm_attention_cost full = a;
	full.shape.window = 0;
	double ratio = rm_cost_attention_s(&full, h100()) / rm_cost_attention_s(&a, h100());
	cr_assert_float_eq(ratio, (32768.0 * 32768.0 / 2.0) / 125831168.0, 0.01, "%f", ratio);
	/* a window at least as long as the sequence changes nothing */
	a.shape.window = 32768;
	cr_assert_float_eq(rm_cost_attention_s(&a, h100()), rm_cost_attention_s(&full, h100()), 1e-15);
}
