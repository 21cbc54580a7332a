/*
 * A scenario's pipelined step (remora/pipeline.h): the engine prices one micro-batch through a
 * stage, the pipeline schedule orders the micro-batches over the stages.
 */
#include <string.h>

#include "remora/pipeline.h"
#include "remora/scenario.h"
#include "remora/schedule.h"
#include "remora/sim.h"

static double span_s(rm_time_ps a, rm_time_ps b)
{
	return b > a ? rm_time_to_s(b - a) : 0.0;
}

/* One stage program, priced by the engine on one micro-batch. */
typedef struct stage_price {
	int64_t dense;                   /* its dense layers (a mixture of experts' first ones) */
	rm_pp_stage_cost first, middle, last; /* its costs as the first, a middle or the last stage */
	int64_t peak_bytes;              /* the one-micro-batch peak */
	int64_t static_bytes;            /* its persistent tensors */
	int64_t saved_bytes;             /* the activations one micro-batch leaves */
	int64_t embed_state, head_state; /* the embedding's and head's share of the persistent state */
} stage_price;

/* Prices a stage of layers / pp decoder layers whose first `dense` layers are dense. */
static rm_status price_stage(const rm_scenario_resolved *res, int64_t dense, stage_price *sp, rm_error *err)
{
	const rm_train_config *t = &res->train;
	memset(sp, 0, sizeof(*sp));
	sp->dense = dense;
	/* one stage: layers / pp decoder layers, one micro-batch */
	rm_model_config sm = res->model;
	sm.layers = res->model.layers / t->pp;
	if (rm_model_config_is_moe(&sm) && sm.dense_layers > 0) {
		sm.dense_layers = dense;
		sm.dense_first = true;
	}
	rm_train_config st = *t;
	st.grad_accum = 1;
	st.pp = 1; /* the stage itself is not pipelined */
	st.virtual_stages = 1;
	rm_workload *wl = rm_workload_create(&sm, &st, err);
	if (!wl)
		return err ? err->status : RM_INVALID;
	rm_schedule_config cfg = res->sched;
	cfg.wl = wl;
	rm_schedule_report rep;
	rm_program *prog = rm_schedule_build(&cfg, &rep, err);
	if (!prog) {
		rm_workload_destroy(wl);
		return err ? err->status : RM_INVALID;
	}
	rm_sim_options opt = {.hw_queues = res->hw_queues,
			      .cost = res->sched.cost,
			      .memory_headroom_bytes = res->memory.headroom_bytes,
			      .allocator = res->allocator,
			      .alloc_fraction = res->alloc_fraction};
	rm_sim *sim = rm_sim_create(prog, &res->hw, &opt, err);
	rm_status status = sim ? rm_sim_run(sim, err) : (err ? err->status : RM_INVALID);
	if (status != RM_OK)
		goto done;
	const rm_sim_metrics *mt = rm_sim_get_metrics(sim);
	/* the compute stream's spans in launch order: embedding forward, layers forward, head
	 * (forward and backward), layers backward (recompute included), embedding backward, the
	 * optimizer */
	rm_time_ps t_ef = 0, t_lf = 0, t_h = 0, t_lb = 0, t_eb = 0;
	bool seen_lf = false, seen_lb = false;
	for (int32_t i = 0; i < prog->n_ops; i++) {
		const rm_program_op *op = &prog->ops[i];
		if (prog->streams[op->stream].kind != RM_STREAM_COMPUTE || op->phase == RM_PPHASE_OPTIMIZER)
			continue;
		rm_time_ps e = rm_sim_op_end(sim, i);
		if (op->layer >= 0 && op->phase == RM_PPHASE_FWD) {
			seen_lf = true;
			if (e > t_lf)
				t_lf = e;
		} else if (op->layer >= 0) {
			seen_lb = true;
			if (e > t_lb)
				t_lb = e;
		} else if (!seen_lf) {
			if (e > t_ef)
				t_ef = e;
		} else if (!seen_lb) {
			if (e > t_h)
				t_h = e;
		} else if (e > t_eb) {
			t_eb = e;
		}
	}
	if (t_h < t_lf)
		t_h = t_lf;
	if (t_lb < t_h)
		t_lb = t_h;
	if (t_eb < t_lb)
		t_eb = t_lb;
	double tail = span_s(t_eb, mt->step_time);
	sp->first = (rm_pp_stage_cost){span_s(0, t_lf), span_s(t_h, t_eb), tail};
	sp->middle = (rm_pp_stage_cost){span_s(t_ef, t_lf), span_s(t_h, t_lb), tail};
	sp->last = (rm_pp_stage_cost){span_s(t_ef, t_lf), span_s(t_lf, t_lb), tail};
	sp->peak_bytes = mt->peak_memory_bytes;
	sp->saved_bytes = rep.saved_bytes_step;
	rm_static_memory smem = rm_workload_static_memory(wl);
	int64_t rank = rm_workload_rank_params(wl);
	double per_param = rank > 0 ? (double)smem.total / (double)rank : 0;
	sp->embed_state = (int64_t)(per_param * (double)wl->embedding.params);
	sp->head_state = (int64_t)(per_param * (double)wl->head.params);
	sp->static_bytes = smem.total;
done:
	rm_sim_destroy(sim);
	rm_program_destroy(prog);
	rm_schedule_report_finish(&rep);
	rm_workload_destroy(wl);
	return status;
}

rm_status rm_pp_run_scenario(const rm_scenario_resolved *res, rm_pp_run *out, rm_error *err)
{
	memset(out, 0, sizeof(*out));
	const rm_train_config *t = &res->train;
	if (t->pp <= 1)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0, "not a pipelined scenario (parallelism.pp 1)");
	int p = (int)t->pp, v = (int)(t->virtual_stages > 0 ? t->virtual_stages : 1), m = (int)t->grad_accum;
	if (p > RM_PP_MAX_STAGES)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0, "pp %d: at most %d stages", p, RM_PP_MAX_STAGES);
	out->stages = p;
	out->chunks = v;
	out->micro_batches = m;
	out->schedule = (rm_pp_schedule)t->pp_schedule;
	/* a mixture of experts with dense first layers (DeepSeek-V3): stage s holds layers
	 * [s L/p, (s+1) L/p), the dense ones among them priced as such; at most three kinds of
	 * stage (all dense, the one across the boundary, all MoE) */
	int64_t per = res->model.layers / p;
	int64_t nd = rm_model_config_is_moe(&res->model) ? res->model.dense_layers : 0;
	if (nd > 0 && v > 1)
		return rm_error_set(err, RM_UNSUPPORTED, NULL, 0, 0,
				    "%s runs %lld dense layers before its mixture-of-experts ones: interleaved "
				    "stages (virtual_stages %d) would mix the kinds chunk by chunk, which is not "
				    "modelled yet (1f1b and gpipe are)",
				    res->model.name, (long long)nd, v);
	stage_price prices[3];
	int n_prices = 0, of_stage[RM_PP_MAX_STAGES];
	for (int s = 0; s < p; s++) {
		int64_t d = nd - (int64_t)s * per;
		d = d < 0 ? 0 : d > per ? per : d;
		int k = 0;
		while (k < n_prices && prices[k].dense != d)
			k++;
		if (k == n_prices) {
			rm_status st = price_stage(res, d, &prices[k], err);
			if (st != RM_OK)
				return st;
			n_prices++;
		}
		of_stage[s] = k;
	}
	out->first = prices[of_stage[0]].first;
	out->middle = prices[of_stage[p > 2 ? 1 : p - 1]].middle;
	out->last = prices[of_stage[p - 1]].last;
	/* the activation (or its gradient) to the neighbouring stage: [b, s, h] split over the
	 * tensor-parallel group (Megatron-LM's scatter-gather of pipeline tensors), on NVLink
	 * when a stage is smaller than a node, else over the network */
	int es = rm_dtype_size(t->dtype);
	out->p2p_bytes = t->micro_batch * t->seq_len * res->model.hidden * es / (t->tp > 1 ? t->tp : 1) /
			 (t->cp > 1 ? t->cp : 1);
	int stage_gpus = res->gpus / p;
	rm_cost_op c = {.kind = RM_COST_COLLECTIVE,
			.collective = {.op = RM_COLL_SEND_RECV, .bytes = out->p2p_bytes, .group_size = 2,
				       .span = stage_gpus >= (int)res->hw.gpus_per_node ? 2 : 1}};
	const rm_cost_model *cm = res->sched.cost ? res->sched.cost : rm_cost_model_default();
	out->p2p_s = cm->op_time_s(cm, &c, &res->hw);
	rm_pp_stage_cost costs[RM_PP_MAX_STAGES];
	for (int s = 0; s < p; s++) {
		const stage_price *sp = &prices[of_stage[s]];
		costs[s] = s == 0 ? sp->first : s == p - 1 ? sp->last : sp->middle;
	}
	rm_status status = rm_pp_simulate(out->schedule, p, m, v, costs, out->p2p_s, &out->sched, err);
	if (status != RM_OK)
		return status;
	out->step_s = out->sched.step_s;
	double tokens = (double)m * (double)t->micro_batch * (double)t->seq_len / (double)(t->tp > 1 ? t->tp : 1) /
			(double)(t->cp > 1 ? t->cp : 1) / (double)p;
	out->tokens_per_s = out->step_s > 0 ? tokens / out->step_s : 0;
	double peak = res->hw.bf16_TFLOPs * RM_TB;
	out->mfu = peak > 0 ? rm_workload_mfu_flops_per_token(res->wl) * out->tokens_per_s / peak : 0;
	/* memory per stage: its program's one-micro-batch peak, (in_flight - 1) more micro-batch
	 * chunks of saved activations, less the embedding's (head's) state where it is not held */
	out->usable_bytes = res->memory.usable_bytes;
	if (res->allocator == RM_SIM_ALLOC_JAX_PREALLOC) {
		/* XLA's BFC pool does not grow */
		double f = res->alloc_fraction > 0 ? res->alloc_fraction : RM_SIM_JAX_MEM_FRACTION;
		int64_t pool = (int64_t)(f * res->hw.hbm_bytes);
		if (pool < out->usable_bytes)
			out->usable_bytes = pool;
	}
	out->fits = true;
	for (int s = 0; s < p; s++) {
		const stage_price *sp = &prices[of_stage[s]];
		int64_t chunk = sp->saved_bytes / v;
		if (s == 0 || chunk > out->act_bytes_per_chunk)
			out->act_bytes_per_chunk = chunk;
		if (s == 0 || sp->static_bytes > out->stage_static_bytes)
			out->stage_static_bytes = sp->static_bytes;
		int64_t b = sp->peak_bytes + (int64_t)(out->sched.in_flight[s] - 1) * chunk;
		if (s > 0)
			b -= sp->embed_state;
		if (s < p - 1)
			b -= sp->head_state;
		out->peak_bytes[s] = b;
		if (b > out->peak_bytes[out->peak_stage])
			out->peak_stage = s;
		if (b > out->usable_bytes)
			out->fits = false;
	}
	return RM_OK;
}
