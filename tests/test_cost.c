/* Unit tests of the default cost model (models/cost.c) against docs/reference figures. */
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

/* The 45 measured BF16 shapes the GEMM constants were fitted to (docs/reference/gemm-h100.csv and
 * kernels-h100-gemm.csv, H100 SXM at 700 W): every training-size shape (all dims >= 1024, K >= 1024)
 * within 10%, and the rms error over all rows below the 11% of the fit (docs/sim.md lists each). */
Test(cost, gemm_matches_measured_shapes)
{
	static const struct {
		int64_t b, m, n, k;
		double tflops;
	} rows[] = {
		{1, 1024, 1024, 2048, 350},  {1, 1024, 2048, 2048, 524},  {1, 2048, 2048, 2048, 632},
		{1, 4096, 4096, 4096, 783},  {4, 4096, 4096, 4096, 794},  {4, 2048, 4096, 4096, 802},
		{1, 2048, 2048, 13312, 794.5}, {1, 8192, 8192, 1024, 628}, {1, 8192, 8192, 4096, 736},
		{1, 8192, 8192, 16384, 766}, {1, 2048, 1024, 4096, 659.1}, {1, 4096, 4096, 1024, 681.1},
		{1, 4096, 2048, 4096, 764.1}, {1, 1024, 1024, 1024, 246.7}, {4, 4096, 1024, 1024, 673.2},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		rm_gemm_shape g = {.batch = rows[i].b, .m = rows[i].m, .n = rows[i].n, .k = rows[i].k,
				   .dtype = RM_DTYPE_BF16};
		double tflops = rm_cost_gemm_flops(&g) / rm_cost_gemm_s(&g, h100(), 0) / 1e12;
		double rel = fabs(tflops - rows[i].tflops) / rows[i].tflops;
		cr_expect(rel <= 0.10, "row %zu (%lldx%lldx%lld b%lld): model %.1f vs measured %.1f", i, (long long)g.m,
			  (long long)g.n, (long long)g.k, (long long)g.batch, tflops, rows[i].tflops);
	}
}

/* A skinny shape (one dim 256-512) costs many times a flat rate: XLA's sm_90 table measures
 * 4096x4096x256 at 392 TFLOP/s and 1024x256x512 at 41.8 (docs/reference/kernels-h100.md 1.1):
 * within 10%, where one flat 790 TFLOP/s would be 2x and 19x too fast. */
Test(cost, skinny_gemm_is_slow)
{
	rm_gemm_shape g = {.batch = 1, .m = 4096, .n = 4096, .k = 256, .dtype = RM_DTYPE_BF16};
	double tf = rm_cost_gemm_flops(&g) / rm_cost_gemm_s(&g, h100(), 0) / 1e12;
	cr_assert_float_eq(tf, 392, 0.10 * 392, "%.1f", tf);
	g = (rm_gemm_shape){.batch = 1, .m = 1024, .n = 256, .k = 512, .dtype = RM_DTYPE_BF16};
	tf = rm_cost_gemm_flops(&g) / rm_cost_gemm_s(&g, h100(), 0) / 1e12;
	cr_assert_float_eq(tf, 41.8, 0.10 * 41.8, "%.1f", tf);
}

Test(cost, gemm_formula_by_hand)
{
	/* 2048^3: 128 tiles <= 132 SMs, one wave: t = 6.5 us + 2*2048^3 / 840e12 * (2048 + 152)/2048. */
	rm_gemm_shape g = {.batch = 1, .m = 2048, .n = 2048, .k = 2048, .dtype = RM_DTYPE_BF16};
	double expect = 6.5e-6 + 2.0 * 2048.0 * 2048.0 * 2048.0 / 840e12 * 2200.0 / 2048.0;
	cr_assert_float_eq(rm_cost_gemm_s(&g, h100(), 0), expect, 1e-15);
	/* 4096^3: 512 tiles, 4 waves of 132: q = 528/512. */
	g.m = g.n = g.k = 4096;
	expect = 6.5e-6 + 2.0 * 4096.0 * 4096.0 * 4096.0 / 840e12 * 528.0 / 512.0 * 4248.0 / 4096.0;
	cr_assert_float_eq(rm_cost_gemm_s(&g, h100(), 0), expect, 1e-15);
	/* On 108 SMs: 5 waves of 108 over 512 tiles, at 108/132 of the rate. */
	expect = 6.5e-6 + 2.0 * 4096.0 * 4096.0 * 4096.0 / (840e12 * 108.0 / 132.0) * 540.0 / 512.0 * 4248.0 / 4096.0;
	cr_assert_float_eq(rm_cost_gemm_s(&g, h100(), 108), expect, 1e-15);
}

/* Under a 500 W limit tensor-core kernels run at 500/700 of their 700 W rate (rm_cost_power_factor,
 * docs/reference/kernels-h100.md section 4); memory-bound kernels keep theirs. */
Test(cost, power_limit_scales_tensor_work_only)
{
	rm_hw_profile hw = *h100();
	rm_gemm_shape g = {.batch = 1, .m = 8192, .n = 8192, .k = 8192, .dtype = RM_DTYPE_BF16};
	double t700 = rm_cost_gemm_s(&g, &hw, 0) - hw.gemm_overhead_us * 1e-6;
	rm_elementwise_cost e = {.bytes_read = 1000000000};
	double m700 = rm_cost_elementwise_s(&e, &hw, NULL);
	hw.power_W = 500;
	cr_assert_float_eq(rm_cost_power_factor(&hw), 500.0 / 700.0, 1e-15);
	cr_assert_float_eq(rm_cost_gemm_s(&g, &hw, 0) - hw.gemm_overhead_us * 1e-6, t700 * 700.0 / 500.0, 1e-12);
	cr_assert_float_eq(rm_cost_elementwise_s(&e, &hw, NULL), m700, 1e-15);
	hw.power_W = 900; /* above the TDP: no faster than measured */
	cr_assert_float_eq(rm_cost_power_factor(&hw), 1.0, 0);
}

/* Flash-attention forward and backward at two lengths against the cited kernel figures
 * (docs/reference/kernels-h100.md 2.2-2.4): a Llama-style layer, hdim 128, causal. */
Test(cost, attention_kernels_match_their_figures)
{
	/* FA2 causal forward 298 at 2k, 333 at 8k (FA3 paper figure, H100) */
	cr_assert_float_eq(rm_cost_attention_tflops(RM_ATTN_FLASH2, false, true, 128, 2048), 298, 1e-9);
	cr_assert_float_eq(rm_cost_attention_tflops(RM_ATTN_FLASH2, false, true, 128, 8192), 333, 1e-9);
	/* FA3 non-causal backward 501 at 2k, 559 at 8k (FA3 paper) */
	cr_assert_float_eq(rm_cost_attention_tflops(RM_ATTN_FLASH3, true, false, 128, 2048), 501, 1e-9);
	cr_assert_float_eq(rm_cost_attention_tflops(RM_ATTN_FLASH3, true, false, 128, 8192), 559, 1e-9);
	/* cuDNN 9.19 causal: forward 644 / backward 541 at 8k; backward = 2.98x the forward time */
	cr_assert_float_eq(rm_cost_attention_tflops(RM_ATTN_CUDNN, false, true, 128, 8192), 644, 1e-9);
	cr_assert_float_eq(rm_cost_attention_tflops(RM_ATTN_CUDNN, true, true, 128, 8192), 541, 1e-9);
	/* 6k lies between 4k and 8k in log2: 591 + 0.585 x (644 - 591) */
	double x = log2(6144.0) - 12.0;
	cr_assert_float_eq(rm_cost_attention_tflops(RM_ATTN_CUDNN, false, true, 128, 6144), 591 + x * 53, 1e-9);
	/* outside the measured lengths: clamped */
	cr_assert_float_eq(rm_cost_attention_tflops(RM_ATTN_FLASH2, false, true, 128, 128), 191, 1e-9);
	cr_assert_float_eq(rm_cost_attention_tflops(RM_ATTN_FLASH2, false, true, 128, 1 << 20), 335, 1e-9);
	/* a whole kernel: Llama-3-8B at 8k (b1, 32 heads): FLOPs 4*32*8192^2*128/2 = 5.50e11, t = t0 +
	 * FLOPs / 644e12 forward, x2.5 / 541e12 backward: 2.98x the forward time, as cuDNN measured */
	rm_attention_cost a = {.shape = {.batch = 1, .heads = 32, .kv_heads = 8, .seq = 8192, .head_dim = 128,
					 .causal = true, .fused = true, .dtype = RM_DTYPE_BF16}};
	rm_kernel_config k = rm_kernel_config_default();
	double f = 4.0 * 32 * 8192.0 * 8192.0 * 128 / 2;
	cr_assert_float_eq(rm_cost_attention_s(&a, h100(), &k), 6.5e-6 + f / 644e12, 1e-12);
	a.backward = true;
	cr_assert_float_eq(rm_cost_attention_s(&a, h100(), &k), 6.5e-6 + 2.5 * f / 541e12, 1e-12);
	/* FA2 on the same shape is slower in both passes */
	k.attention = RM_ATTN_FLASH2;
	cr_assert_gt(rm_cost_attention_s(&a, h100(), &k), 6.5e-6 + 2.5 * f / 541e12 * 1.5);
}

Test(cost, memory_bound_and_copies)
{
	const rm_hw_profile *hw = h100();
	/* fused pointwise: 0.87 x 3350 GB/s = 2914.5 GB/s: 14.5725 MB read + written take 10 us */
	rm_elementwise_cost e = {.bytes_read = 14572500, .bytes_written = 14572500};
	cr_assert_float_eq(rm_cost_elementwise_s(&e, hw, NULL), 10e-6, 1e-15);
	/* an eager PyTorch kernel runs at 0.54 x 3350 = 1809 GB/s (torch eager SwiGLU, 1.80 TB/s per
	 * kernel); an eager RMSNorm backward of 8192 x 4096 bf16 is its decomposition, 64 B per element
	 * in 10 kernels: 2.147 GB / 1809 GB/s = 1.187 ms */
	rm_kernel_config eager = {.attention = RM_ATTN_FLASH2, .fused = false, .host_us = 6};
	e = (rm_elementwise_cost){.bytes_read = 8192LL * 4096 * 64, .cls = RM_MB_NORM_BWD, .kernels = 10};
	cr_assert_float_eq(rm_cost_elementwise_s(&e, hw, &eager), 8192.0 * 4096 * 64 / 1809e9, 1e-12);
	/* ten tiny kernels cost ten host floors */
	e = (rm_elementwise_cost){.bytes_read = 1000, .kernels = 10};
	cr_assert_float_eq(rm_cost_elementwise_s(&e, hw, &eager), 60e-6, 1e-18);
	/* a tiny kernel costs the floor: the launch (3 us), or eager's 6 us of host time per op */
	e = (rm_elementwise_cost){.bytes_read = 1000};
	cr_assert_float_eq(rm_cost_elementwise_s(&e, hw, NULL), 3e-6, 1e-18);
	cr_assert_float_eq(rm_cost_elementwise_s(&e, hw, &eager), 6e-6, 1e-18);
	/* fused AdamW over a 1/8 shard of Llama-2-7B (842 M parameters, fp32 master and moments: 26 B
	 * per parameter read + written) at 0.86 x 3350: 7.6 ms (section 3: ~9.1 ms per 1e9 parameters) */
	e = (rm_elementwise_cost){.bytes_read = 842000000LL * 14, .bytes_written = 842000000LL * 12, .cls = RM_MB_OPTIMIZER};
	cr_assert_float_eq(rm_cost_elementwise_s(&e, hw, NULL), 842e6 * 26 / (0.86 * 3350e9), 1e-12);
	cr_assert_float_eq(rm_cost_elementwise_s(&e, hw, NULL) / 0.842, 9.0e-3, 0.1e-3);
	/* Pinned copies: H2D 51 GB/s, D2H 52 GB/s; D2D reads and writes every byte. */
	rm_copy_cost c = {.dir = RM_COPY_H2D, .bytes = 51000000};
	cr_assert_float_eq(rm_cost_copy_s(&c, hw), 1e-3, 1e-15);
	c = (rm_copy_cost){.dir = RM_COPY_D2H, .bytes = 52000000};
	cr_assert_float_eq(rm_cost_copy_s(&c, hw), 1e-3, 1e-15);
	c = (rm_copy_cost){.dir = RM_COPY_D2D, .bytes = 1450000000};
	cr_assert_float_eq(rm_cost_copy_s(&c, hw), 1e-3, 1e-15);
}

/* The cost model's collectives are NCCL's model (remora/nccl.h), calibrated: the same time and
 * channels as rm_nccl_estimate, and the large rows of data/reference/nccl-h100-8gpu.csv within 5%. */
Test(cost, collectives_follow_the_nccl_model)
{
	const rm_hw_profile *hw = h100();
	static const struct {
		rm_collective op;
		int64_t bytes;
		double us;
	} rows[] = {
		/* data/reference/nccl-h100-8gpu.csv (all_gather/reduce_scatter ring, all_reduce default) */
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
	cr_assert_eq(rm_cost_collective_channels(&c, hw), 24); /* docs/reference/hardware.md: 24 of 132 */
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

/* Copy-engine all-gathers (scheduler.collective_engine: copy_engine): each of 8 GPUs receives 7/8
 * of 1 GiB at the measured 371.2 GB/s (nvbandwidth device_to_device_memcpy_read_ce, 8x H100,
 * docs/reference/hardware.md) after one 3 us launch: 3 + 2531.04 us, holding no SMs. Copy
 * engines cannot reduce: a reduce-scatter stays NCCL's 24-channel ring kernel; across nodes the
 * NIC carries the all-gather, so it does too. */
Test(cost, copy_engine_all_gather)
{
	const rm_hw_profile *hw = h100();
	rm_collective_cost c = {.op = RM_COLL_ALL_GATHER, .bytes = 1 << 30, .group_size = 8, .span = 1};
	double expect = 3e-6 + 7.0 / 8.0 * 1073741824.0 / 371.2e9;
	cr_assert_float_eq(expect, 2534.04e-6, 0.01e-6);
	cr_assert_float_eq(rm_cost_ce_all_gather_s(&c, hw), expect, 1e-15);
	rm_collective_cost rs = c, two = c, one = c;
	rs.op = RM_COLL_REDUCE_SCATTER;
	two.span = 2;
	one.group_size = 1;
	cr_assert_eq(rm_cost_ce_all_gather_s(&rs, hw), -1.0);
	cr_assert_eq(rm_cost_ce_all_gather_s(&two, hw), -1.0);
	cr_assert_eq(rm_cost_ce_all_gather_s(&one, hw), 0.0);

	rm_nccl_model nm;
	cr_assert_eq(rm_nccl_model_init(&nm, hw, NULL, NULL), RM_OK);
	rm_cost_nccl cn;
	rm_cost_nccl_init(&cn, &nm);
	const rm_cost_model *m = &cn.base;
	rm_cost_op ag = {.kind = RM_COST_COLLECTIVE, .collective = c};
	rm_cost_op rsop = {.kind = RM_COST_COLLECTIVE, .collective = rs};
	cr_assert_eq(m->sms_held(m, &ag, hw), 24); /* sm: NCCL's ring kernel */
	double nccl_s = m->op_time_s(m, &ag, hw);
	cn.kernels.ce_collectives = true;
	cr_assert_eq(m->sms_held(m, &ag, hw), 0);
	cr_assert_float_eq(m->op_time_s(m, &ag, hw), expect, 1e-15);
	cr_assert(nccl_s > expect); /* NCCL's ring all-gather of 1 GiB: 2727 us measured */
	cr_assert_eq(m->sms_held(m, &rsop, hw), 24);
	cn.kernels.ce_collectives = false;
	double rs_s = m->op_time_s(m, &rsop, hw);
	cn.kernels.ce_collectives = true;
	cr_assert_float_eq(m->op_time_s(m, &rsop, hw), rs_s, 0.0);
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
	cr_assert(rm_cost_attention_s(&a, h100(), NULL) > 0);
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
	/* the time follows the FLOPs (4.27x fewer than full causal attention) at the window's rate:
	 * cuDNN's causal backward at 4k (474 TFLOP/s) instead of at 32k (581) */
	rm_attention_cost full = a;
	full.shape.window = 0;
	double ratio = rm_cost_attention_s(&full, h100(), NULL) / rm_cost_attention_s(&a, h100(), NULL);
	cr_assert_float_eq(ratio, (32768.0 * 32768.0 / 2.0) / 125831168.0 * 474.0 / 581.0, 0.01, "%f", ratio);
	/* a window at least as long as the sequence changes nothing */
	a.shape.window = 32768;
	cr_assert_float_eq(rm_cost_attention_s(&a, h100(), NULL), rm_cost_attention_s(&full, h100(), NULL), 1e-15);
}

/* A tensor-parallel key projection, Llama-3-8B at TP 8 on 98,304 tokens: 98304 x 4096 x 128 does
 * 103 GFLOP (131 us at the FLOP side) but moves 831 MB (287 us at H100's 2.9 TB/s
 * BabelStream figure): the roofline's memory side prices it, to the byte. */
Test(cost, skinny_projection_is_priced_by_its_bytes)
{
	rm_gemm_shape g = {.batch = 1, .m = 98304, .n = 128, .k = 4096, .dtype = RM_DTYPE_BF16};
	double bytes = (98304.0 * 4096 + 4096.0 * 128 + 98304.0 * 128) * 2;
	cr_assert_float_eq(rm_cost_gemm_min_bytes(&g), bytes, 0);
	cr_assert_float_eq(rm_cost_gemm_s(&g, h100(), 0), 6.5e-6 + bytes / 2900e9, 1e-15);
	/* fp8 operands write a bf16 C */
	g.dtype = RM_DTYPE_FP8_E4M3;
	cr_assert_float_eq(rm_cost_gemm_min_bytes(&g), 98304.0 * 4096 + 4096.0 * 128 + 98304.0 * 128 * 2, 0);
}
