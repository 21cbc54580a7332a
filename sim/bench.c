/*
 * Synthetic programs and the engine benchmark (remora/sim.h rm_sim_synthetic_program,
 * rm_sim_bench_engine). Used by `remora bench engine` and bench/bench_engine.
 */
#include <stdio.h>
#include <time.h>

#include "remora/hw.h"
#include "remora/sim.h"

/* Llama-3-8B-like sizes for one micro-batch of 4096 tokens (shapes only matter for costs). */
enum { SYN_TOKENS = 4096, SYN_H = 4096, SYN_FFN = 14336, SYN_HEADS = 32, SYN_KV = 8 };

static int32_t add_gemm(rm_program *p, const char *name, int32_t layer, rm_program_phase ph,
			int64_t m, int64_t n, int64_t k, const int32_t *in, uint32_t n_in,
			int32_t out, const int32_t *waits, uint32_t n_waits, const int32_t *records,
			uint32_t n_records)
{
	rm_program_op_desc d = rm_program_op_desc_init(name, RM_COST_GEMM, 0);
	d.layer = layer;
	d.phase = ph;
	d.cost.gemm = (rm_gemm_shape){.batch = 1, .m = m, .n = n, .k = k, .dtype = RM_DTYPE_BF16};
	d.inputs = in;
	d.n_inputs = n_in;
	d.outputs = &out;
	d.n_outputs = out >= 0;
	d.waits = waits;
	d.n_waits = n_waits;
	d.records = records;
	d.n_records = n_records;
	return rm_program_add_op(p, &d);
}

static int32_t add_elem(rm_program *p, const char *name, int32_t layer, rm_program_phase ph,
			int64_t bytes, const int32_t *in, uint32_t n_in, int32_t out,
			const int32_t *records, uint32_t n_records)
{
	rm_program_op_desc d = rm_program_op_desc_init(name, RM_COST_ELEMENTWISE, 0);
	d.layer = layer;
	d.phase = ph;
	d.cost.elementwise = (rm_elementwise_cost){.bytes_read = bytes, .bytes_written = bytes};
	d.inputs = in;
	d.n_inputs = n_in;
	d.outputs = &out;
	d.n_outputs = out >= 0;
	d.records = records;
	d.n_records = n_records;
	return rm_program_add_op(p, &d);
}

static int32_t add_coll(rm_program *p, const char *name, int32_t layer, rm_program_phase ph,
			rm_collective kind, int64_t bytes, int32_t in, int32_t out,
			const int32_t *waits, uint32_t n_waits, int32_t record)
{
	rm_program_op_desc d = rm_program_op_desc_init(name, RM_COST_COLLECTIVE, 1);
	d.layer = layer;
	d.phase = ph;
	d.cost.collective =
		(rm_collective_cost){.op = kind, .bytes = bytes, .group_size = 8, .span = 1};
	d.inputs = &in;
	d.n_inputs = 1;
	d.outputs = &out;
	d.n_outputs = out >= 0;
	d.waits = waits;
	d.n_waits = n_waits;
	d.records = &record;
	d.n_records = record >= 0;
	return rm_program_add_op(p, &d);
}

rm_program *rm_sim_synthetic_program(int32_t n_layers)
{
	if (n_layers < 1)
		n_layers = 1;
	rm_program *p = rm_program_create("synthetic-fsdp");
	p->tokens = SYN_TOKENS;
	rm_program_add_stream(p, "compute", RM_STREAM_COMPUTE, 0);
	rm_program_add_stream(p, "collective", RM_STREAM_COLLECTIVE, -1);
	rm_program_add_stream(p, "copy", RM_STREAM_COPY, 0);
	const int64_t act = (int64_t)SYN_TOKENS * SYN_H * 2;
	const int64_t wbytes = ((int64_t)4 * SYN_H * SYN_H + (int64_t)3 * SYN_H * SYN_FFN) * 2;
	char name[96];
	int32_t *shard = rm_xmalloc((size_t)n_layers * sizeof(int32_t));
	int32_t *grad = rm_xmalloc((size_t)n_layers * sizeof(int32_t));
	int32_t *x = rm_xmalloc(((size_t)n_layers + 1) * sizeof(int32_t));
	int32_t *fwd_done = rm_xmalloc((size_t)n_layers * sizeof(int32_t));
	int32_t *bwd_done = rm_xmalloc((size_t)n_layers * sizeof(int32_t));
	for (int32_t l = 0; l < n_layers; l++) {
		snprintf(name, sizeof(name), "layer%02d/param_shard", l);
		shard[l] = rm_program_add_tensor(p, name, wbytes / 8, RM_ROLE_PARAM_SHARD, RM_LOC_DEVICE,
						 true);
		snprintf(name, sizeof(name), "layer%02d/grad_shard", l);
		grad[l] = rm_program_add_tensor(p, name, wbytes / 8, RM_ROLE_GRADIENT, RM_LOC_DEVICE,
						true);
	}
	x[0] = rm_program_add_tensor(p, "embed/x", act, RM_ROLE_RESIDUAL, RM_LOC_DEVICE, true);

	/* Forward: all-gather (at most two layers in flight), then the layer's kernels. */
	for (int32_t l = 0; l < n_layers; l++) {
		snprintf(name, sizeof(name), "layer%02d/fwd/w", l);
		int32_t w = rm_program_add_tensor(p, name, wbytes, RM_ROLE_GATHERED_PARAM, RM_LOC_DEVICE,
						  false);
		snprintf(name, sizeof(name), "layer%02d/fwd/ag.done", l);
		int32_t ev_ag = rm_program_add_event(p, name);
		snprintf(name, sizeof(name), "layer%02d/fwd/done", l);
		fwd_done[l] = rm_program_add_event(p, name);
		snprintf(name, sizeof(name), "layer%02d/fwd/all_gather", l);
		add_coll(p, name, l, RM_PPHASE_FWD, RM_COLL_ALL_GATHER, wbytes, shard[l], w,
			 l >= 2 ? &fwd_done[l - 2] : NULL, l >= 2, ev_ag);
		int32_t t[8];
		static const char *const tn[8] = {"qkv", "context", "attn_out", "norm",
						  "mlp_up", "mlp_act", "mlp_out", "x"};
		for (int k = 0; k < 8; k++) {
			snprintf(name, sizeof(name), "layer%02d/fwd/%s", l, tn[k]);
			t[k] = rm_program_add_tensor(p, name, k == 4 || k == 5 ? act * 7 / 2 : act,
						     k == 7 ? RM_ROLE_RESIDUAL : RM_ROLE_ACTIVATION,
						     RM_LOC_DEVICE, false);
		}
		x[l + 1] = t[7];
		int32_t in2[2];
		in2[0] = x[l];
		in2[1] = w;
		snprintf(name, sizeof(name), "layer%02d/fwd/dot_qkv", l);
		add_gemm(p, name, l, RM_PPHASE_FWD, SYN_TOKENS, SYN_H * 3 / 2, SYN_H, in2, 2, t[0],
			 &ev_ag, 1, NULL, 0);
		rm_program_op_desc d = rm_program_op_desc_init("", RM_COST_ATTENTION, 0);
		snprintf(name, sizeof(name), "layer%02d/fwd/attention", l);
		d.name = name;
		d.layer = l;
		d.cost.attention.shape = (rm_attention_shape){
			.batch = 1, .heads = SYN_HEADS, .kv_heads = SYN_KV, .seq = SYN_TOKENS,
			.head_dim = SYN_H / SYN_HEADS, .causal = true, .fused = true,
			.dtype = RM_DTYPE_BF16};
		d.inputs = &t[0];
		d.n_inputs = 1;
		d.outputs = &t[1];
		d.n_outputs = 1;
		rm_program_add_op(p, &d);
		in2[0] = t[1];
		snprintf(name, sizeof(name), "layer%02d/fwd/dot_attention_out", l);
		add_gemm(p, name, l, RM_PPHASE_FWD, SYN_TOKENS, SYN_H, SYN_H, in2, 2, t[2], NULL, 0,
			 NULL, 0);
		snprintf(name, sizeof(name), "layer%02d/fwd/norm", l);
		add_elem(p, name, l, RM_PPHASE_FWD, act, &t[2], 1, t[3], NULL, 0);
		in2[0] = t[3];
		snprintf(name, sizeof(name), "layer%02d/fwd/dot_mlp_up", l);
		add_gemm(p, name, l, RM_PPHASE_FWD, SYN_TOKENS, SYN_FFN * 2, SYN_H, in2, 2, t[4],
			 NULL, 0, NULL, 0);
		snprintf(name, sizeof(name), "layer%02d/fwd/mlp_act", l);
		add_elem(p, name, l, RM_PPHASE_FWD, act * 7, &t[4], 1, t[5], NULL, 0);
		in2[0] = t[5];
		snprintf(name, sizeof(name), "layer%02d/fwd/dot_mlp_out", l);
		add_gemm(p, name, l, RM_PPHASE_FWD, SYN_TOKENS, SYN_H, SYN_FFN, in2, 2, t[6], NULL, 0,
			 NULL, 0);
		int32_t in3[2] = {t[6], x[l]};
		snprintf(name, sizeof(name), "layer%02d/fwd/residual_add", l);
		add_elem(p, name, l, RM_PPHASE_FWD, act * 2, in3, 2, t[7], &fwd_done[l], 1);
	}

	/* Backward: re-gather, data and weight gradients, reduce-scatter of the gradient. */
	int32_t dx = rm_program_add_tensor(p, "head/dx", act, RM_ROLE_ACTIVATION, RM_LOC_DEVICE,
					   false);
	{
		rm_program_op_desc d = rm_program_op_desc_init("head/loss", RM_COST_ELEMENTWISE, 0);
		d.cost.elementwise = (rm_elementwise_cost){.bytes_read = act, .bytes_written = act};
		d.inputs = &x[n_layers];
		d.n_inputs = 1;
		d.outputs = &dx;
		d.n_outputs = 1;
		d.phase = RM_PPHASE_BWD;
		rm_program_add_op(p, &d);
	}
	for (int32_t l = n_layers - 1; l >= 0; l--) {
		int32_t k = n_layers - 1 - l; /* position in backward order */
		snprintf(name, sizeof(name), "layer%02d/bwd/w", l);
		int32_t w = rm_program_add_tensor(p, name, wbytes, RM_ROLE_GATHERED_PARAM, RM_LOC_DEVICE,
						  false);
		snprintf(name, sizeof(name), "layer%02d/bwd/ag.done", l);
		int32_t ev_ag = rm_program_add_event(p, name);
		snprintf(name, sizeof(name), "layer%02d/bwd/done", l);
		bwd_done[l] = rm_program_add_event(p, name);
		snprintf(name, sizeof(name), "layer%02d/bwd/all_gather", l);
		add_coll(p, name, l, RM_PPHASE_BWD, RM_COLL_ALL_GATHER, wbytes, shard[l], w,
			 k >= 2 ? &bwd_done[l + 2] : NULL, k >= 2, ev_ag);
		snprintf(name, sizeof(name), "layer%02d/bwd/wgrad", l);
		int32_t g = rm_program_add_tensor(p, name, wbytes, RM_ROLE_GRADIENT, RM_LOC_DEVICE,
						  false);
		int32_t t[6];
		for (int q = 0; q < 6; q++) {
			snprintf(name, sizeof(name), "layer%02d/bwd/d%d", l, q);
			t[q] = rm_program_add_tensor(p, name, q == 1 ? act * 7 / 2 : act,
						     RM_ROLE_ACTIVATION, RM_LOC_DEVICE, false);
		}
		int32_t in3[3] = {dx, w, x[l]};
		snprintf(name, sizeof(name), "layer%02d/bwd/dot_mlp_out.dgrad", l);
		add_gemm(p, name, l, RM_PPHASE_BWD, SYN_TOKENS, SYN_FFN, SYN_H, in3, 3, t[0], &ev_ag, 1,
			 NULL, 0);
		snprintf(name, sizeof(name), "layer%02d/bwd/dot_mlp_out.wgrad", l);
		add_gemm(p, name, l, RM_PPHASE_BWD, SYN_H, SYN_FFN, SYN_TOKENS, in3, 1, -1, NULL, 0,
			 NULL, 0);
		snprintf(name, sizeof(name), "layer%02d/bwd/mlp_act.bwd", l);
		add_elem(p, name, l, RM_PPHASE_BWD, act * 7, &t[0], 1, t[1], NULL, 0);
		int32_t in2[2] = {t[1], w};
		snprintf(name, sizeof(name), "layer%02d/bwd/dot_mlp_up.dgrad", l);
		add_gemm(p, name, l, RM_PPHASE_BWD, SYN_TOKENS, SYN_H, SYN_FFN * 2, in2, 2, t[2], NULL,
			 0, NULL, 0);
		snprintf(name, sizeof(name), "layer%02d/bwd/dot_mlp_up.wgrad", l);
		add_gemm(p, name, l, RM_PPHASE_BWD, SYN_H, SYN_FFN * 2, SYN_TOKENS, in2, 1, -1, NULL,
			 0, NULL, 0);
		snprintf(name, sizeof(name), "layer%02d/bwd/norm.bwd", l);
		add_elem(p, name, l, RM_PPHASE_BWD, act * 2, &t[2], 1, t[3], NULL, 0);
		int32_t in4[2] = {t[3], w};
		snprintf(name, sizeof(name), "layer%02d/bwd/dot_attention_out.dgrad", l);
		add_gemm(p, name, l, RM_PPHASE_BWD, SYN_TOKENS, SYN_H, SYN_H, in4, 2, t[4], NULL, 0,
			 NULL, 0);
		rm_program_op_desc d = rm_program_op_desc_init("", RM_COST_ATTENTION, 0);
		snprintf(name, sizeof(name), "layer%02d/bwd/attention.bwd", l);
		d.name = name;
		d.layer = l;
		d.phase = RM_PPHASE_BWD;
		d.cost.attention.backward = true;
		d.cost.attention.shape = (rm_attention_shape){
			.batch = 1, .heads = SYN_HEADS, .kv_heads = SYN_KV, .seq = SYN_TOKENS,
			.head_dim = SYN_H / SYN_HEADS, .causal = true, .fused = true,
			.dtype = RM_DTYPE_BF16};
		d.inputs = &t[4];
		d.n_inputs = 1;
		d.outputs = &t[5];
		d.n_outputs = 1;
		rm_program_add_op(p, &d);
		int32_t in5[2] = {t[5], w};
		snprintf(name, sizeof(name), "layer%02d/bwd/grad.ready", l);
		int32_t ev_g = rm_program_add_event(p, name);
		snprintf(name, sizeof(name), "layer%02d/bwd/dot_qkv.wgrad", l);
		add_gemm(p, name, l, RM_PPHASE_BWD, SYN_H * 3 / 2, SYN_H, SYN_TOKENS, in5, 2, g, NULL,
			 0, NULL, 0);
		snprintf(name, sizeof(name), "layer%02d/bwd/dot_qkv.dgrad", l);
		int32_t ndx = rm_program_add_tensor(p, name, act, RM_ROLE_ACTIVATION, RM_LOC_DEVICE,
						    false);
		int32_t recs[2] = {ev_g, bwd_done[l]};
		add_gemm(p, name, l, RM_PPHASE_BWD, SYN_TOKENS, SYN_H, SYN_H * 3 / 2, in5, 2, ndx, NULL,
			 0, recs, 2);
		dx = ndx;
		snprintf(name, sizeof(name), "layer%02d/bwd/reduce_scatter", l);
		add_coll(p, name, l, RM_PPHASE_BWD, RM_COLL_REDUCE_SCATTER, wbytes, g, grad[l],
			 &ev_g, 1, -1);
	}
	/* The last data gradient is unused: a sink keeps the program well-formed. */
	{
		rm_program_op_desc d = rm_program_op_desc_init("embed/bwd", RM_COST_ELEMENTWISE, 0);
		d.cost.elementwise = (rm_elementwise_cost){.bytes_read = act, .bytes_written = 0};
		d.inputs = &dx;
		d.n_inputs = 1;
		d.phase = RM_PPHASE_BWD;
		rm_program_add_op(p, &d);
	}
	free(shard);
	free(grad);
	free(x);
	free(fwd_done);
	free(bwd_done);
	return p;
}

static double now_s(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

rm_status rm_sim_bench_engine(int32_t n_ops, double min_s, rm_sim_bench_result *out,
			      rm_error *err)
{
	return rm_sim_bench_engine_with(n_ops, min_s, NULL, out, err);
}

rm_status rm_sim_bench_engine_with(int32_t n_ops, double min_s, const rm_sim_options *opt,
				   rm_sim_bench_result *out, rm_error *err)
{
	const int ops_per_layer = 22;
	int32_t layers = n_ops / ops_per_layer;
	rm_program *prog = rm_sim_synthetic_program(layers < 1 ? 1 : layers);
	const rm_hw_profile *hw = rm_hw_profile_find("h100-sxm", err);
	rm_status st = RM_OK;
	if (!hw) {
		rm_program_destroy(prog);
		return RM_NOT_FOUND;
	}
	rm_sim *sim = rm_sim_create(prog, hw, opt, err);
	if (!sim) {
		rm_program_destroy(prog);
		return err ? err->status : RM_INVALID;
	}
	*out = (rm_sim_bench_result){.ops = prog->n_ops};
	double t0 = now_s(CLOCK_MONOTONIC);
	double elapsed = 0;
	do {
		if ((st = rm_sim_run(sim, err)) != RM_OK)
			goto out_destroy;
		out->runs++;
		elapsed = now_s(CLOCK_MONOTONIC) - t0;
	} while (elapsed < min_s);
	const rm_sim_metrics *m = rm_sim_get_metrics(sim);
	out->events = m->events;
	out->seconds = elapsed;
	out->events_per_s = (double)m->events * out->runs / elapsed;
	out->ns_per_event = elapsed * 1e9 / ((double)m->events * out->runs);
	out->step_time_s = rm_time_to_s(m->step_time);
out_destroy:
	rm_sim_destroy(sim);
	rm_program_destroy(prog);
	return st;
}
