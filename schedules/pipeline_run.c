/*
 * A scenario's pipelined step (remora/pipeline.h): the engine prices one micro-batch through a
 * stage, the pipeline schedule orders the micro-batches over the stages.
 */
#include <stdlib.h>
#include <string.h>

#include "remora/pipeline.h"
#include "remora/scenario.h"
#include "remora/schedule.h"
#include "remora/sim.h"

static double span_s(rm_time_ps a, rm_time_ps b)
{
	return b > a ? rm_time_to_s(b - a) : 0.0;
}

/*
 * Whether a program op is a weight gradient (zero_bubble's W): the scheduler names an op
 * "[mbN/]layerNN/bwd/<graph op>" or "[mbN/]{embedding,head}/bwd/<graph op>", and the workload's
 * weight-gradient ops (RM_PHASE_BWD_WGRAD, models/workload.c emit_backward) are a projection's
 * "<name>.wgrad" GEMM and the embedding table's scatter-add "embedding.bwd".
 */
static bool is_wgrad_op(const char *name)
{
	const char *leaf = strrchr(name, '/');
	leaf = leaf ? leaf + 1 : name;
	size_t n = strlen(leaf), k = strlen(".wgrad");
	return (n > k && strcmp(leaf + n - k, ".wgrad") == 0) || strcmp(leaf, "embedding.bwd") == 0;
}

static double clamp_s(double x, double hi)
{
	return x < hi ? x : hi;
}

/*
 * Bytes one micro-batch's deferred W holds on a graph between its B and its W: what each
 * weight-gradient op reads, the forward values it keeps (a projection's input X, the token ids;
 * a sequence-parallel gather counted as its shard, gathered again, as rm_graph_residual_bytes
 * counts it) and the output gradient dY its B computed (the bytes of the forward op's output).
 * dW = X^T dY needs both (Qi et al. 2024, section 2). The paper's Megatron-LM fork keeps them
 * per linear layer until W runs (sail-sg/zero-bubble-pipeline-parallelism,
 * megatron/core/zbpp_utils.py, WeightGradStore: a closure per weight, its pre_func gathering the
 * input again).
 */
static int64_t wgrad_hold_bytes(const rm_graph *g)
{
	int64_t sum = 0;
	bool *kept = rm_new(bool, (size_t)g->n_values + 1);
	for (int i = 0; i < g->n_ops; i++) {
		const rm_op *op = &g->ops[i];
		if (op->phase != RM_PHASE_BWD_WGRAD || op->fwd_op < 0)
			continue;
		for (int r = 0; r < op->n_residuals; r++) {
			int v = op->residuals[r], pr = g->values[v].producer;
			if (pr >= 0 && g->ops[pr].kind == RM_OP_COLLECTIVE && g->ops[pr].coll == RM_COLL_ALL_GATHER)
				v = g->ops[pr].inputs[0];
			if (!kept[v])
				sum += g->values[v].bytes;
			kept[v] = true;
		}
		const rm_op *f = &g->ops[op->fwd_op];
		if (f->n_outputs > 0)
			sum += g->values[f->outputs[0]].bytes;
	}
	free(kept);
	return sum;
}

/*
 * zero_bubble's activations per stage beyond the one-micro-batch peak, from the stage's passes
 * in order: a forward adds act bytes, a B frees them but keeps what its W reads (wb), the W frees
 * that. The most held, less the one micro-batch the engine's peak already holds.
 */
static int64_t zb_extra_bytes(const rm_pp_pass *ps, int per, int64_t act, int64_t wb)
{
	int64_t cur = 0, top = 0;
	for (int k = 0; k < per; k++) {
		cur += ps[k].kind == RM_PP_PASS_FWD ? act : ps[k].kind == RM_PP_PASS_BWD ? wb - act : -wb;
		if (cur > top)
			top = cur;
	}
	return top > act ? top - act : 0;
}

/* One stage program, priced by the engine on one micro-batch. */
typedef struct stage_price {
	int64_t dense;                   /* its dense layers (a mixture of experts' first ones) */
	rm_pp_stage_cost first, middle, last; /* its costs as the first, a middle or the last stage */
	int64_t peak_bytes;              /* the one-micro-batch peak */
	int64_t static_bytes;            /* its persistent tensors */
	int64_t saved_bytes;             /* the activations one micro-batch leaves */
	int64_t embed_state, head_state; /* the embedding's and head's share of the persistent state */
	int64_t wgrad_layers, wgrad_embed, wgrad_head; /* zero_bubble: what a deferred W holds */
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
	/* a search's stage programs are lean (no names) except under zero_bubble, whose W the
	 * weight-gradient ops' names pick out (is_wgrad_op) */
	if (t->pp_schedule == RM_PP_ZERO_BUBBLE)
		cfg.lean = false;
	rm_schedule_report rep;
	rm_program *prog = rm_schedule_build(&cfg, &rep, err);
	if (!prog) {
		rm_workload_destroy(wl);
		return err ? err->status : RM_INVALID;
	}
	rm_sim_options opt = {.scheduler_built = true, /* rm_schedule_build's (checked there) */
			      .hw_queues = res->hw_queues,
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
	 * optimizer; the weight-gradient kernels' time of the layers, the head and the embedding
	 * apart (zero_bubble's W, the rest of the backward its B) */
	rm_time_ps t_ef = 0, t_lf = 0, t_h = 0, t_lb = 0, t_eb = 0;
	rm_time_ps w_l = 0, w_h = 0, w_e = 0;
	bool seen_lf = false, seen_lb = false;
	for (int32_t i = 0; i < prog->n_ops; i++) {
		const rm_program_op *op = &prog->ops[i];
		if (prog->streams[op->stream].kind != RM_STREAM_COMPUTE || op->phase == RM_PPHASE_OPTIMIZER)
			continue;
		rm_time_ps e = rm_sim_op_end(sim, i), b = rm_sim_op_start(sim, i);
		rm_time_ps w = is_wgrad_op(op->name) && e > b ? e - b : 0;
		if (op->layer >= 0 && op->phase == RM_PPHASE_FWD) {
			seen_lf = true;
			if (e > t_lf)
				t_lf = e;
		} else if (op->layer >= 0) {
			seen_lb = true;
			w_l += w;
			if (e > t_lb)
				t_lb = e;
		} else if (!seen_lf) {
			if (e > t_ef)
				t_ef = e;
		} else if (!seen_lb) {
			w_h += w;
			if (e > t_h)
				t_h = e;
		} else {
			w_e += w;
			if (e > t_eb)
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
	double bf = span_s(t_h, t_eb), bm = span_s(t_h, t_lb), bl = span_s(t_lf, t_lb);
	sp->first = (rm_pp_stage_cost){span_s(0, t_lf), bf, tail, clamp_s(rm_time_to_s(w_l + w_e), bf)};
	sp->middle = (rm_pp_stage_cost){span_s(t_ef, t_lf), bm, tail, clamp_s(rm_time_to_s(w_l), bm)};
	sp->last = (rm_pp_stage_cost){span_s(t_ef, t_lf), bl, tail, clamp_s(rm_time_to_s(w_l + w_h), bl)};
	sp->peak_bytes = mt->peak_memory_bytes;
	sp->saved_bytes = rep.saved_bytes_step;
	rm_static_memory smem = rm_workload_static_memory(wl);
	int64_t rank = rm_workload_rank_params(wl);
	double per_param = rank > 0 ? (double)smem.total / (double)rank : 0;
	sp->embed_state = (int64_t)(per_param * (double)wl->embedding.params);
	sp->head_state = (int64_t)(per_param * (double)wl->head.params);
	sp->static_bytes = smem.total;
	int64_t nd = rm_workload_dense_layers(wl);
	sp->wgrad_layers = wgrad_hold_bytes(&wl->layer) * (sm.layers - nd) +
			   (nd > 0 ? wgrad_hold_bytes(&wl->dense_layer) * nd : 0);
	sp->wgrad_embed = wgrad_hold_bytes(&wl->embedding);
	sp->wgrad_head = wgrad_hold_bytes(&wl->head);
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
	int64_t per_stage = res->model.layers / p;
	int64_t nd = rm_model_config_is_moe(&res->model) ? res->model.dense_layers : 0;
	if (nd > 0 && v > 1)
		return rm_error_set(err, RM_UNSUPPORTED, NULL, 0, 0,
				    "%s runs %lld dense layers before its mixture-of-experts ones: interleaved "
				    "stages (virtual_stages %d) would mix the kinds chunk by chunk, which is not "
				    "modelled yet (1f1b, gpipe and ZB-H1 stages are)",
				    res->model.name, (long long)nd, v);
	stage_price prices[3];
	int n_prices = 0, of_stage[RM_PP_MAX_STAGES];
	for (int s = 0; s < p; s++) {
		int64_t d = nd - (int64_t)s * per_stage;
		d = d < 0 ? 0 : d > per_stage ? per_stage : d;
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
	const stage_price *p_first = &prices[of_stage[0]], *p_last = &prices[of_stage[p - 1]];
	out->first = p_first->first;
	out->middle = prices[of_stage[p > 2 ? 1 : p - 1]].middle;
	out->last = p_last->last;
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
	/* ZB-V's V puts the last virtual stage, with the head, on stage 0 beside the embedding
	 * (every stage alike: dense first layers need v 1) */
	bool zbv = out->schedule == RM_PP_ZERO_BUBBLE && v == 2;
	rm_pp_stage_cost costs[RM_PP_MAX_STAGES];
	for (int s = 0; s < p; s++)
		costs[s] = s == 0 ? out->first : s == p - 1 && !zbv ? out->last : prices[of_stage[s]].middle;
	if (zbv) {
		costs[0].fwd_s += out->last.fwd_s - out->middle.fwd_s;
		costs[0].bwd_s += out->last.bwd_s - out->middle.bwd_s;
		costs[0].wgrad_s += out->last.wgrad_s - out->middle.wgrad_s;
	}
	bool zb = out->schedule == RM_PP_ZERO_BUBBLE;
	int per = rm_pp_passes_per_stage(out->schedule, m, v);
	rm_pp_pass *passes = zb ? rm_new(rm_pp_pass, (size_t)p * (size_t)(per > 0 ? per : 1)) : NULL;
	rm_status status = rm_pp_simulate_passes(out->schedule, p, m, v, costs, out->p2p_s, &out->sched, passes, err);
	if (status != RM_OK)
		goto done;
	out->step_s = out->sched.step_s;
	double tokens = (double)m * (double)t->micro_batch * (double)t->seq_len / (double)(t->tp > 1 ? t->tp : 1) /
			(double)(t->cp > 1 ? t->cp : 1) / (double)p;
	out->tokens_per_s = out->step_s > 0 ? tokens / out->step_s : 0;
	double peak = res->hw.bf16_TFLOPs * RM_TB;
	out->mfu = peak > 0 ? rm_workload_mfu_flops_per_token(res->wl) * out->tokens_per_s / peak : 0;
	/* memory per stage: its program's one-micro-batch peak, the micro-batches in flight, less
	 * the embedding's (head's) state where it is not held */
	out->usable_bytes = res->memory.usable_bytes;
	if (res->allocator == RM_SIM_ALLOC_JAX_PREALLOC) {
		/* XLA's BFC pool does not grow */
		double f = res->alloc_fraction > 0 ? res->alloc_fraction : RM_SIM_JAX_MEM_FRACTION;
		int64_t pool = (int64_t)(f * res->hw.hbm_bytes);
		if (pool < out->usable_bytes)
			out->usable_bytes = pool;
	}
	if (zb) {
		out->wgrad_bytes_first = p_first->wgrad_layers + p_first->wgrad_embed;
		out->wgrad_bytes_middle = prices[of_stage[p > 2 ? 1 : p - 1]].wgrad_layers;
		out->wgrad_bytes_last = p_last->wgrad_layers + p_last->wgrad_head;
		if (zbv) {
			out->wgrad_bytes_first += out->wgrad_bytes_last - p_last->wgrad_layers;
			out->wgrad_bytes_last = p_last->wgrad_layers;
		}
	}
	out->fits = true;
	for (int s = 0; s < p; s++) {
		const stage_price *sp = &prices[of_stage[s]];
		int64_t chunk = sp->saved_bytes / v;
		if (s == 0 || chunk > out->act_bytes_per_chunk)
			out->act_bytes_per_chunk = chunk;
		if (s == 0 || sp->static_bytes > out->stage_static_bytes)
			out->stage_static_bytes = sp->static_bytes;
		int64_t wb = s == 0 ? out->wgrad_bytes_first : s == p - 1 ? out->wgrad_bytes_last : sp->wgrad_layers;
		int64_t b = sp->peak_bytes + (zb ? zb_extra_bytes(passes + (size_t)s * (size_t)per, per, chunk, wb / v)
						 : (int64_t)(out->sched.in_flight[s] - 1) * chunk);
		if (s > 0)
			b -= sp->embed_state;
		if (zbv ? s > 0 : s < p - 1)
			b -= sp->head_state;
		out->peak_bytes[s] = b;
		if (b > out->peak_bytes[out->peak_stage])
			out->peak_stage = s;
		if (b > out->usable_bytes)
			out->fits = false;
	}
done:
	free(passes);
	return status;
}
