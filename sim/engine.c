/*
 * The discrete-event engine (remora/sim.h; design in docs/sim.md).
 *
 * Events are op completions in a binary min-heap ordered by (time, priority rank, sequence).
 * Starts need no events: when ops end at time t, every op they release starts at t, in order of
 * (priority rank, launch index). After each batch, the rate of every running op is recomputed
 * from the shared resources; an op whose rate changed has its remaining work brought up to date
 * and a new completion scheduled, its generation bumped so the old one is skipped when popped.
 * Remaining work is an integer (ps * SIM_WORK_SCALE), rates are fractions of small integers, so
 * the whole run is integer arithmetic: exact and bit-reproducible.
 *
 * SM grants: a collective launched while GEMM CTAs fill the SMs it needs does not take them at
 * once (the block scheduler does not preempt resident CTAs): it waits, holding nothing, and a
 * grant event in the same heap gives it its SMs at the running GEMMs' next wave boundary, or at
 * the first end of a GEMM before that (docs/sim.md "SM grants").
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "sim_internal.h"


rm_time_ps rm_time_from_s(double s)
{
	if (!(s > 0))
		return 0;
	double ps = s * RM_PS_PER_S;
	if (ps >= 1.8e19)
		return UINT64_MAX;
	/* llround's result past LLONG_MAX is unspecified; doubles that large are whole numbers */
	if (ps >= 9.2e18)
		return (rm_time_ps)ps;
	/* llround(ps), half away from zero, without the libm call: ps - its integer part is exact
	 * (both below 2^63, the difference below 1 and representable), so the test is too */
	rm_time_ps whole = (rm_time_ps)ps;
	return ps - (double)whole >= 0.5 ? whole + 1 : whole;
}

/* ---- storage kept between simulations (rm_sim_storage) -------------------------------- */

/* The arrays a simulation takes from its storage: the run's and rm_sim_create's scratch. */
enum {
	SB_OPS, SB_SUCC, SB_MEM, SB_TENSOR_BYTES, SB_TENSOR_HOST, SB_TENSOR_CONSUMERS, SB_STREAM_QUEUE, SB_ST,
	SB_OP_START, SB_OP_END, SB_OP_GRANT, SB_SM_WAITERS, SB_TENSOR_LEFT, SB_TENSOR_STATE, SB_HEAP, SB_READY,
	SB_RUNNING, SB_STREAM_BUSY, SB_TENSOR_BLOCK, SB_NET_SHARE, SB_RECORDER, SB_STREAM_PREV, SB_EST, SB_PEND,
	SB_QUEUE, SB_COUNT
};

struct rm_sim_storage {
	void *buf[SB_COUNT];  /* NULL while lent (or never grown) */
	size_t cap[SB_COUNT]; /* bytes of buf[k], or of the block lent */
	bool busy;            /* a simulation holds the arrays */
};

rm_sim_storage *rm_sim_storage_create(void)
{
	return rm_new(rm_sim_storage, 1);
}

void rm_sim_storage_destroy(rm_sim_storage *st)
{
	if (!st)
		return;
	for (int k = 0; k < SB_COUNT; k++)
		free(st->buf[k]);
	free(st);
}

/* An array of at least bytes (zeroed if zero) for slot k: the storage's block when it has one
 * large enough, else a new one (a simulation without storage: plain malloc or calloc). */
static void *sim_take(rm_sim *sim, int k, size_t bytes, bool zero)
{
	rm_sim_storage *st = sim->storage;
	if (!st)
		return zero ? rm_xcalloc(bytes ? bytes : 1, 1) : rm_xmalloc(bytes ? bytes : 1);
	if (bytes == 0)
		bytes = 1;
	void *p = st->buf[k];
	if (!p || st->cap[k] < bytes) {
		free(p);
		p = rm_xmalloc(bytes);
		st->cap[k] = bytes;
	}
	st->buf[k] = NULL;
	if (zero)
		memset(p, 0, bytes);
	return p;
}

/* Hands slot k's array back (to the storage, or to free). */
static void sim_give(rm_sim *sim, int k, void *p)
{
	if (!sim->storage) {
		free(p);
		return;
	}
	if (!p)
		return;
	sim->storage->buf[k] = p;
}

/* The event heap, which the run grows: the storage's, at its capacity, or 64 events. */
static sim_event *sim_take_heap(rm_sim *sim)
{
	rm_sim_storage *st = sim->storage;
	size_t cap = st && st->buf[SB_HEAP] ? st->cap[SB_HEAP] / sizeof(sim_event) : 64;
	sim->heap_cap = cap >= 64 ? cap : 64;
	return sim_take(sim, SB_HEAP, sim->heap_cap * sizeof(sim_event), false);
}

static void sim_give_heap(rm_sim *sim)
{
	if (sim->storage && sim->heap)
		sim->storage->cap[SB_HEAP] = sim->heap_cap * sizeof(sim_event);
	sim_give(sim, SB_HEAP, sim->heap);
}

/* ---- creation --------------------------------------------------------------------------- */

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return (x > y) - (x < y);
}

rm_sim *rm_sim_create(const rm_program *prog, const rm_hw_profile *hw, const rm_sim_options *opt,
		      rm_error *err)
{
	if (!(opt && opt->scheduler_built) && rm_program_validate(prog, NULL, err) != RM_OK)
		return NULL;
	if (opt && (unsigned)opt->allocator >= RM_SIM_ALLOC_COUNT) {
		rm_error_set(err, RM_INVALID, NULL, 0, 0, "rm_sim_options.allocator: %d is not an allocator",
			     (int)opt->allocator);
		return NULL;
	}
	rm_sim *sim = rm_new(rm_sim, 1);
	if (opt && opt->storage && !opt->storage->busy) {
		sim->storage = opt->storage;
		sim->storage->busy = true;
	}
	sim->prog = prog;
	sim->hw = hw;
	if (opt)
		sim->opt = *opt;
	/* the scheduler's programs are race-free by construction; builds that check themselves
	 * (REMORA_SELF_CHECK) still look */
	sim->check_races = REMORA_SELF_CHECK || !sim->opt.scheduler_built;
	if (sim->opt.hw_queues <= 0)
		sim->opt.hw_queues = 8;
	if (!sim->opt.cost)
		sim->opt.cost = rm_cost_model_default();
	const rm_cost_model *cm = sim->opt.cost;
	int32_t n = prog->n_ops;
	sim->n_ops = n;
	sim->n_streams = prog->n_streams;
	sim->n_tensors = prog->n_tensors;
	sim->sm_count = hw->sm_count >= 1 ? (uint32_t)hw->sm_count : 1;
	sim->slow_ppm = hw->gemm_slowdown_per_sm > 0 && hw->gemm_slowdown_per_sm < 1 ? (uint32_t)llround(hw->gemm_slowdown_per_sm * 1e6) : 0;
	sim->hbm_GBps = hw->hbm_peak_GBps >= 1 && hw->hbm_peak_GBps < 1e6 ? (uint32_t)hw->hbm_peak_GBps : 1;
	size_t nn = (size_t)n + 1;

	/* Priority ranks: distinct stream priorities, most urgent (lowest number) first. */
	int32_t *prios = rm_xmalloc(((size_t)prog->n_streams + 1) * sizeof(int32_t));
	for (int32_t s = 0; s < prog->n_streams; s++)
		prios[s] = prog->streams[s].priority;
	qsort(prios, (size_t)prog->n_streams, sizeof(int32_t), cmp_i32);
	uint32_t *stream_rank = rm_xmalloc(((size_t)prog->n_streams + 1) * sizeof(uint32_t));
	for (int32_t s = 0; s < prog->n_streams; s++) {
		uint32_t rank = 0;
		for (int32_t k = 0; k < prog->n_streams && prios[k] < prog->streams[s].priority; k++)
			if (k == 0 || prios[k] != prios[k - 1])
				rank++;
		stream_rank[s] = rank;
		if (rank + 1 > sim->n_prio)
			sim->n_prio = rank + 1;
	}
	free(prios);

	sim->stream_queue = sim_take(sim, SB_STREAM_QUEUE, ((size_t)prog->n_streams + 1) * sizeof(int32_t), false);
	for (int32_t s = 0; s < prog->n_streams; s++)
		sim->stream_queue[s] = s % sim->opt.hw_queues;

	/* Tensors. */
	size_t nt = (size_t)prog->n_tensors + 1;
	sim->tensor_bytes = sim_take(sim, SB_TENSOR_BYTES, nt * sizeof(int64_t), false);
	sim->tensor_host = sim_take(sim, SB_TENSOR_HOST, nt, false); /* every tensor's set below */
	sim->tensor_consumers = sim_take(sim, SB_TENSOR_CONSUMERS, nt * sizeof(int32_t), true);
	for (int32_t t = 0; t < prog->n_tensors; t++) {
		const rm_program_tensor *tn = &prog->tensors[t];
		sim->tensor_bytes[t] = tn->bytes;
		sim->tensor_host[t] = tn->location == RM_LOC_HOST;
		if (tn->persistent) {
			if (tn->location == RM_LOC_HOST)
				sim->persistent_host += tn->bytes;
			else
				sim->persistent_device += tn->bytes;
		}
	}

	/* Ops: costs, stream and queue predecessors, event recorders. */
	/* not zeroed: the loop below sets every field of each op (succ_n, flags and tiles to 0
	 * first), the successor and memory passes the rest */
	sim->ops = sim_take(sim, SB_OPS, nn * sizeof(sim_op), false);
	int32_t *recorder = sim_take(sim, SB_RECORDER, ((size_t)prog->n_events + 1) * sizeof(int32_t), false);
	int32_t *last_in_stream = rm_xmalloc(((size_t)prog->n_streams + 1) * sizeof(int32_t));
	/* Queues beyond the number of streams stay empty: allocate only those in use. */
	int n_queues = sim->opt.hw_queues < prog->n_streams ? sim->opt.hw_queues : prog->n_streams;
	int32_t *last_in_queue = rm_xmalloc(((size_t)n_queues + 1) * sizeof(int32_t));
	int32_t *stream_prev = sim_take(sim, SB_STREAM_PREV, nn * sizeof(int32_t), false);
	for (int32_t s = 0; s < prog->n_streams; s++)
		last_in_stream[s] = -1;
	for (int q = 0; q < n_queues; q++)
		last_in_queue[q] = -1;
	uint32_t n_succ = 0;
	/* Memory lists, filled in the same pass: each op's non-persistent outputs (allocated at its
	 * start; those no op reads are released at its end) then its non-persistent inputs (checked
	 * produced at its start, released at its end). */
	size_t n_mem = 1;
	for (int32_t i = 0; i < n; i++)
		n_mem += (size_t)prog->ops[i].inputs.count + prog->ops[i].outputs.count;
	sim->mem = sim_take(sim, SB_MEM, n_mem * sizeof(int32_t), false);
	uint32_t m = 0;
	/* collectives are priced once per shape: in the caller's cache, or in one of this call */
	rm_sim_prices *prices = sim->opt.prices, *own_prices = NULL;
	int32_t price_ctx = -1;
	for (int32_t i = 0; i < n; i++) {
		const rm_program_op *op = &prog->ops[i];
		sim_op *so = &sim->ops[i];
		so->succ_n = 0;
		so->flags = 0;
		so->tiles = 0;
		/* a cost twin the program names (rm_program_op.same_cost_as), priced by the model too
		 * and equal byte for byte: its figures are this op's */
		const rm_program_op *twin =
			op->same_cost_as > 0 && op->same_cost_as <= i && op->time_s < 0 && !sim->opt.unpriced_cache
				? &prog->ops[op->same_cost_as - 1]
				: NULL;
		/* the scheduler names as twins only ops whose cost it copied: a release build takes
		 * its word, the others check it (a difference is the scheduler's bug) */
		bool same = twin && twin->time_s < 0 &&
			    ((sim->opt.scheduler_built && !REMORA_SELF_CHECK) ||
			     memcmp(&twin->cost, &op->cost, sizeof(op->cost)) == 0);
#if REMORA_SELF_CHECK
		assert(same || !twin || twin->time_s >= 0 || !sim->opt.scheduler_built);
#endif
		if (same) {
			const sim_op *tw = &sim->ops[op->same_cost_as - 1];
			so->solo = tw->solo;
			so->sms = tw->sms;
			so->res = tw->res;
			so->tiles = tw->tiles; /* or hbm_GBps: the union's one word */
			if (sim->net_share)
				memcpy(sim->net_share + (size_t)i * RM_NET_LEVELS,
				       sim->net_share + (size_t)(op->same_cost_as - 1) * RM_NET_LEVELS,
				       RM_NET_LEVELS * sizeof(uint32_t));
		} else {
			const rm_sim_price *pr = NULL;
			rm_sim_price scratch;
			if (op->cost.kind == RM_COST_COLLECTIVE && op->time_s < 0 && !sim->opt.unpriced_cache) {
				if (!prices)
					prices = own_prices = rm_sim_prices_create();
				if (price_ctx < 0)
					price_ctx = sim_prices_context(prices, cm, hw);
				pr = sim_prices_get(prices, price_ctx, cm, &op->cost, hw, &scratch);
			}
			double t_s = op->time_s >= 0 ? op->time_s : pr ? pr->time_s : cm->op_time_s(cm, &op->cost, hw);
			rm_time_ps solo = isfinite(t_s) && t_s >= 0 ? rm_time_from_s(t_s) : 0;
			if (!isfinite(t_s) || t_s < 0 || solo > SIM_MAX_SOLO_PS) {
				rm_error_set(err, RM_INVALID, NULL, 0, 0,
					     "ops[%d] '%s': the cost model gives %g s (expected 0 to 1e4 s)", i,
					     op->name, t_s);
				sim_give(sim, SB_RECORDER, recorder);
				free(last_in_stream);
				free(last_in_queue);
				sim_give(sim, SB_STREAM_PREV, stream_prev);
				free(stream_rank);
				rm_sim_prices_destroy(own_prices);
				rm_sim_destroy(sim);
				return NULL;
			}
			so->solo = solo;
			int sms = pr ? pr->sms : cm->sms_held(cm, &op->cost, hw);
			so->sms = (uint16_t)(sms < 0 ? 0 : sms > 65535 ? 65535 : sms);
			so->res = (uint8_t)rm_cost_op_resource(&op->cost);
			if (op->cost.kind == RM_COST_GEMM) {
				double tiles = rm_cost_gemm_tiles(&op->cost.gemm, hw);
				so->tiles = tiles >= 1 && tiles < 4e9 ? (uint32_t)tiles : 0;
			} else if (op->cost.kind == RM_COST_COLLECTIVE && t_s > 0) {
				double gbps = rm_cost_collective_hbm_GBps(&op->cost.collective, t_s);
				so->hbm_GBps = gbps < 4e9 ? (uint32_t)llround(gbps) : UINT32_MAX;
			}
			rm_net_load load;
			const rm_net_load *ld = NULL;
			if (so->res == RM_RES_NET && cm->net_load && t_s > 0) {
				if (pr)
					ld = pr->has_net ? &pr->net : NULL;
				else if (cm->net_load(cm, &op->cost, hw, t_s, &load))
					ld = &load;
			}
			if (ld) {
				if (!sim->net_share)
					sim->net_share = sim_take(sim, SB_NET_SHARE, nn * RM_NET_LEVELS * sizeof(uint32_t), true);
				for (int l = 0; l < RM_NET_LEVELS; l++) {
					double ppm = ld->share[l] * 1e6;
					sim->net_share[(size_t)i * RM_NET_LEVELS + l] =
						ppm > 0 ? (uint32_t)llround(fmin(fmax(ppm, 1.0), 1e6)) : 0;
				}
			}
		}
		so->stream = op->stream;
		so->prio = stream_rank[op->stream];
		so->qnext = -1;
		if (op->cost.kind == RM_COST_COLLECTIVE)
			so->flags |= SIM_F_COLL;
		if (op->cost.kind == RM_COST_GEMM || op->cost.kind == RM_COST_ATTENTION ||
		    op->cost.kind == RM_COST_ELEMENTWISE)
			so->flags |= SIM_F_COMPUTE | SIM_F_QBLOCK;
		if (op->phase == RM_PPHASE_RECOMPUTE)
			so->flags |= SIM_F_RECOMPUTE;
		if (so->res == RM_RES_SM && op->cost.kind == RM_COST_GEMM && so->tiles > 0)
			so->flags |= SIM_F_TILED;
		stream_prev[i] = last_in_stream[op->stream];
		last_in_stream[op->stream] = i;
		so->init_pending = (stream_prev[i] >= 0) + (int32_t)op->waits.count;
		if (stream_prev[i] >= 0)
			n_succ++;
		n_succ += op->waits.count;
		int q = sim->stream_queue[op->stream];
		int32_t qp = last_in_queue[q];
		if (qp >= 0 && prog->ops[qp].stream != op->stream) {
			sim->ops[qp].qnext = i;
			so->init_pending++;
		}
		last_in_queue[q] = i;
		const int32_t *r = rm_program_refs(prog, op->records);
		for (uint32_t j = 0; j < op->records.count; j++)
			recorder[r[j]] = i;
		so->mem_at = m;
		const int32_t *o = rm_program_refs(prog, op->outputs);
		for (uint32_t j = 0; j < op->outputs.count; j++)
			if (!prog->tensors[o[j]].persistent)
				sim->mem[m++] = o[j];
		so->n_alloc = m - so->mem_at;
		const int32_t *in = rm_program_refs(prog, op->inputs);
		for (uint32_t j = 0; j < op->inputs.count; j++)
			if (!prog->tensors[in[j]].persistent) {
				sim->tensor_consumers[in[j]]++;
				sim->mem[m++] = in[j];
			}
		so->n_race = m - so->mem_at - so->n_alloc;
	}
	free(stream_rank);
	free(last_in_queue);
	rm_sim_prices_destroy(own_prices);

	/* Successor lists (CSR): stream successor and the waiters of each event recorded. */
	bool forward = true; /* every edge from an earlier op to a later one: launch order is a
			      * topological order */
	for (int32_t i = 0; i < n; i++) {
		const rm_program_op *op = &prog->ops[i];
		if (stream_prev[i] >= 0)
			sim->ops[stream_prev[i]].succ_n++;
		const int32_t *w = rm_program_refs(prog, op->waits);
		for (uint32_t j = 0; j < op->waits.count; j++) {
			sim->ops[recorder[w[j]]].succ_n++;
			forward &= recorder[w[j]] < i;
		}
	}
	uint32_t at = 0;
	for (int32_t i = 0; i < n; i++) {
		sim->ops[i].succ_at = at;
		at += sim->ops[i].succ_n;
		sim->ops[i].succ_n = 0;
	}
	sim->succ = sim_take(sim, SB_SUCC, ((size_t)n_succ + 1) * sizeof(int32_t), false);
	for (int32_t i = 0; i < n; i++) {
		const rm_program_op *op = &prog->ops[i];
		if (stream_prev[i] >= 0) {
			sim_op *p = &sim->ops[stream_prev[i]];
			sim->succ[p->succ_at + p->succ_n++] = i;
		}
		const int32_t *w = rm_program_refs(prog, op->waits);
		for (uint32_t j = 0; j < op->waits.count; j++) {
			sim_op *p = &sim->ops[recorder[w[j]]];
			sim->succ[p->succ_at + p->succ_n++] = i;
		}
	}
	sim_give(sim, SB_RECORDER, recorder);
	sim_give(sim, SB_STREAM_PREV, stream_prev);
	sim->loop = sim_loop_create(sim, last_in_stream);
	free(last_in_stream);


	/* Lower bound: work per shared resource alone, and the critical path: in launch order when
	 * that is a topological order (the same longest paths, without the in-degrees), else in
	 * Kahn order. */
	rm_time_ps res_work[RM_RES_COUNT] = {0};
	rm_time_ps *est = sim_take(sim, SB_EST, nn * sizeof(rm_time_ps), false); /* zeroed with pend below */
	int32_t *pend = forward ? NULL : sim_take(sim, SB_PEND, nn * sizeof(int32_t), false);
	int32_t *queue = forward ? NULL : sim_take(sim, SB_QUEUE, nn * sizeof(int32_t), false);
	int32_t head = 0, tail = 0;
	/* with a fabric the network's work is weighted by each collective's share of the most
	 * drawn level (shares of one level add up to at most 1 at every instant) */
	sim_u128 net_work[RM_NET_LEVELS] = {0}; /* ps x ppm: exact, whatever the order */
	for (int32_t i = 0; i < n; i++) {
		if (sim->ops[i].res == RM_RES_NET && sim->net_share) {
			for (int l = 0; l < RM_NET_LEVELS; l++)
				net_work[l] += (sim_u128)sim->ops[i].solo * sim_net_ppm(sim->net_share, i, l);
		} else {
			res_work[sim->ops[i].res] += sim->ops[i].solo;
		}
		est[i] = 0;
		if (!forward)
			pend[i] = 0;
	}
	if (sim->net_share)
		for (int l = 0; l < RM_NET_LEVELS; l++)
			if ((rm_time_ps)(net_work[l] / 1000000u) > res_work[RM_RES_NET])
				res_work[RM_RES_NET] = (rm_time_ps)(net_work[l] / 1000000u);
	rm_time_ps cp = 0;
	/* In-degree over stream and event edges: how often an op appears in successor lists. */
	for (uint32_t k = 0; !forward && k < n_succ; k++)
		pend[sim->succ[k]]++;
	for (int32_t i = 0; !forward && i < n; i++)
		if (pend[i] == 0)
			queue[tail++] = i;
	/* ops in launch order (forward), or as Kahn's queue releases them */
	for (int32_t step = 0;; step++) {
		int32_t u;
		if (forward) {
			if (step >= n)
				break;
			u = step;
		} else {
			if (head >= tail)
				break;
			u = queue[head++];
		}
		rm_time_ps fin = est[u] + sim->ops[u].solo;
		if (fin > cp)
			cp = fin;
		for (uint32_t k = 0; k < sim->ops[u].succ_n; k++) {
			int32_t v = sim->succ[sim->ops[u].succ_at + k];
			if (est[v] < fin)
				est[v] = fin;
			if (!forward && --pend[v] == 0)
				queue[tail++] = v;
		}
	}
	/* a periodic stretch: the whole step's bound (its paths and work repeat; launch order) */
	rm_time_ps loop_bound = 0;
	bool loop_lb = sim->loop && forward && sim_loop_lower_bound(sim, est, res_work, net_work, &loop_bound);
	if (sim->loop && !loop_lb)
		sim_loop_disable(sim);
	sim_give(sim, SB_EST, est);
	if (!forward) {
		sim_give(sim, SB_PEND, pend);
		sim_give(sim, SB_QUEUE, queue);
	}
	sim->lower_bound = cp;
	for (int r = 0; r < RM_RES_COUNT; r++)
		if (res_work[r] > sim->lower_bound)
			sim->lower_bound = res_work[r];
	if (loop_lb)
		sim->lower_bound = loop_bound;
	sim->loop_end = sim_loop_reach(sim);

	/* Reserved memory: a replay through the allocator model for PyTorch's modes. Persistent
	 * tensors are allocated first, on the first compute stream (PyTorch's default stream). */
	sim->alloc = sim_alloc_create(sim->opt.allocator, prog->n_streams);
	if (sim->alloc) {
		sim->tensor_block = sim_take(sim, SB_TENSOR_BLOCK, nt * sizeof(int32_t), false);
		for (int32_t s = prog->n_streams - 1; s >= 0; s--)
			if (prog->streams[s].kind == RM_STREAM_COMPUTE)
				sim->param_stream = s;
	}

	/* Run state. */
	sim->st = sim_take(sim, SB_ST, nn * sizeof(sim_state), false);
	/* set by the run's reset; read only once it ran (rm_sim_op_start and the others) */
	sim->op_start = sim_take(sim, SB_OP_START, nn * sizeof(rm_time_ps), false);
	sim->op_end = sim_take(sim, SB_OP_END, nn * sizeof(rm_time_ps), false);
	sim->op_grant = sim_take(sim, SB_OP_GRANT, nn * sizeof(rm_time_ps), false);
	sim->tensor_left = sim_take(sim, SB_TENSOR_LEFT, nt * sizeof(int32_t), false);
	sim->tensor_state = sim_take(sim, SB_TENSOR_STATE, nt, false);
	sim->heap = sim_take_heap(sim);
	sim->ready = sim_take(sim, SB_READY, nn * sizeof(uint64_t), false);
	sim->running = sim_take(sim, SB_RUNNING, ((size_t)prog->n_streams + 1) * sizeof(int32_t), false);
	sim->sm_waiters = sim_take(sim, SB_SM_WAITERS, ((size_t)prog->n_streams + 1) * sizeof(int32_t), false);
	sim->stream_busy = sim_take(sim, SB_STREAM_BUSY, ((size_t)prog->n_streams + 1) * sizeof(rm_time_ps), true);
	return sim;
}

void rm_sim_destroy(rm_sim *sim)
{
	if (!sim)
		return;
	sim_give(sim, SB_OPS, sim->ops);
	sim_give(sim, SB_SUCC, sim->succ);
	sim_give(sim, SB_MEM, sim->mem);
	sim_give(sim, SB_TENSOR_BYTES, sim->tensor_bytes);
	sim_give(sim, SB_TENSOR_HOST, sim->tensor_host);
	sim_give(sim, SB_TENSOR_CONSUMERS, sim->tensor_consumers);
	sim_give(sim, SB_STREAM_QUEUE, sim->stream_queue);
	sim_give(sim, SB_ST, sim->st);
	sim_give(sim, SB_OP_START, sim->op_start);
	sim_give(sim, SB_OP_END, sim->op_end);
	sim_give(sim, SB_OP_GRANT, sim->op_grant);
	sim_give(sim, SB_SM_WAITERS, sim->sm_waiters);
	sim_give(sim, SB_TENSOR_LEFT, sim->tensor_left);
	sim_give(sim, SB_TENSOR_STATE, sim->tensor_state);
	sim_give_heap(sim);
	sim_give(sim, SB_READY, sim->ready);
	sim_give(sim, SB_RUNNING, sim->running);
	sim_give(sim, SB_STREAM_BUSY, sim->stream_busy);
	free(sim->timeline);
	sim_alloc_destroy(sim->alloc);
	sim_give(sim, SB_TENSOR_BLOCK, sim->tensor_block);
	sim_give(sim, SB_NET_SHARE, sim->net_share);
	sim_loop_destroy(sim->loop);
	if (sim->storage)
		sim->storage->busy = false;
	free(sim);
}

/* ---- heaps ------------------------------------------------------------------------------ */

static inline bool ev_less(const sim_event *a, const sim_event *b)
{
	return a->time < b->time || (a->time == b->time && a->seq < b->seq);
}

/* The event heap's push and pop, inlined at their few call sites (about two of each an op:
 * the call cost more than the work). */
static inline __attribute__((always_inline)) void heap_push(rm_sim *sim, rm_time_ps time, int32_t op)
{
	if (sim->heap_n == sim->heap_cap) {
		sim->heap_cap *= 2;
		sim->heap = rm_xrealloc(sim->heap, sim->heap_cap * sizeof(sim_event));
	}
	sim_event e = {.time = time,
		       .seq = ((uint64_t)sim->ops[op].prio << 40) | sim->seq++,
		       .op = op,
		       .gen = sim->st[op].gen};
	sim_event *h = sim->heap;
	size_t i = sim->heap_n++;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!ev_less(&e, &h[p]))
			break;
		h[i] = h[p];
		i = p;
	}
	h[i] = e;
}

static inline __attribute__((always_inline)) sim_event heap_pop(rm_sim *sim)
{
	sim_event *h = sim->heap;
	sim_event top = h[0];
	sim_event last = h[--sim->heap_n];
	size_t n = sim->heap_n, i = 0;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && ev_less(&h[c + 1], &h[c]))
			c++;
		if (!ev_less(&h[c], &last))
			break;
		h[i] = h[c];
		i = c;
	}
	if (n > 0)
		h[i] = last;
	return top;
}

static void ready_push(rm_sim *sim, int32_t op)
{
	uint64_t key = ((uint64_t)sim->ops[op].prio << 32) | (uint32_t)op;
	uint64_t *h = sim->ready;
	size_t i = sim->ready_n++;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (h[p] <= key)
			break;
		h[i] = h[p];
		i = p;
	}
	h[i] = key;
}

static int32_t ready_pop(rm_sim *sim)
{
	uint64_t *h = sim->ready;
	uint64_t top = h[0], last = h[--sim->ready_n];
	size_t n = sim->ready_n, i = 0;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && h[c + 1] < h[c])
			c++;
		if (h[c] >= last)
			break;
		h[i] = h[c];
		i = c;
	}
	if (n > 0)
		h[i] = last;
	return (int32_t)(uint32_t)top;
}

/* ---- memory ------------------------------------------------------------------------------ */

/* Out of line: a search asks for no timeline, and pays one test an op for it. */
static __attribute__((noinline)) void mem_point(rm_sim *sim, rm_time_ps t)
{
	if (sim->tl_n > 0 && sim->timeline[sim->tl_n - 1].time == t) {
		sim->timeline[sim->tl_n - 1].bytes = sim->mem_device;
		return;
	}
	if (sim->tl_n == sim->tl_cap) {
		sim->tl_cap = sim->tl_cap ? sim->tl_cap * 2 : 256;
		sim->timeline = rm_xrealloc(sim->timeline, sim->tl_cap * sizeof(rm_mem_point));
	}
	sim->timeline[sim->tl_n++] = (rm_mem_point){t, sim->mem_device};
}

/* Notes the device memory at t in the timeline, when one is kept (options.memory_timeline). */
static inline void mem_note(rm_sim *sim, rm_time_ps t)
{
	if (sim->opt.memory_timeline)
		mem_point(sim, t);
}

static void mem_add(rm_sim *sim, int32_t t, int64_t sign)
{
	int64_t b = sim->tensor_bytes[t] * sign;
	if (sim->tensor_host[t]) {
		sim->mem_host += b;
		if (sim->mem_host > sim->m.peak_host_bytes)
			sim->m.peak_host_bytes = sim->mem_host;
	} else {
		sim->mem_device += b;
		if (sim->mem_device > sim->m.peak_memory_bytes)
			sim->m.peak_memory_bytes = sim->mem_device;
	}
}

/* With the allocator model: replays the frees among the n tensors an op released (those now
 * freed whose block is still held; a tensor read twice by the op appears twice). */
__attribute__((noinline)) static void mem_replay_free(rm_sim *sim, const int32_t *tensors, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++) {
		int32_t t = tensors[k];
		if (sim->tensor_state[t] == 3 && sim->tensor_block[t] >= 0) {
			sim_alloc_free(sim->alloc, sim->tensor_block[t]);
			sim->tensor_block[t] = -1;
		}
	}
}

/* With the allocator model: replays the allocation of the n tensors of an op on stream (their
 * bytes already counted), and notes the reserved bytes when they raised the peak above
 * peak_before. Out of line so that the engine without a model runs the code it always did. */
__attribute__((noinline)) static void mem_replay_alloc(rm_sim *sim, const int32_t *tensors, uint32_t n,
							int32_t stream, int64_t peak_before)
{
	for (uint32_t k = 0; k < n; k++) {
		int32_t t = tensors[k];
		sim->tensor_block[t] = sim->tensor_host[t] ? -1
							   : sim_alloc_malloc(sim->alloc, stream, sim->tensor_bytes[t]);
	}
	if (sim->m.peak_memory_bytes > peak_before)
		sim->m.reserved_at_peak_bytes = sim_alloc_get_stats(sim->alloc)->reserved_bytes;
}

/* ---- the run ---------------------------------------------------------------------------- */

static inline void release(rm_sim *sim, int32_t v)
{
	if (v < sim->loop_end && v > sim->loop_hi)
		sim->loop_hi = v; /* a periodic stretch's reach (sim/loop.c) */
	if (--sim->st[v].pending == 0)
		ready_push(sim, v);
}

/* A GEMM that runs in waves of one CTA (output tile) per SM; other SM kernels are fluid. */
static inline bool is_tiled(const sim_op *so)
{
	return (so->flags & SIM_F_TILED) != 0;
}

/* SMs no running collective holds. */
static inline uint32_t free_sms(const rm_sim *sim)
{
	return sim->held_sms < sim->sm_count ? sim->sm_count - sim->held_sms : 0;
}

/* Remaining work of a running op at t >= s->last, at its current rate (as the rate pass counts). */
static uint64_t work_at(const sim_state *s, rm_time_ps t)
{
	if (s->den == 0 || s->num == 0 || t <= s->last)
		return s->work;
	sim_u128 done = (sim_u128)(t - s->last) * SIM_WORK_SCALE * s->num / s->den;
	return done >= s->work ? 0 : s->work - (uint64_t)done;
}

/* Waves of tiled kernel so on f SMs, and how many of them are not complete with `work` left:
 * the k-th wave boundary is where the completed fraction of its work crosses k / waves. */
static uint64_t kernel_waves(const sim_op *so, uint32_t f)
{
	return ((uint64_t)so->tiles + (f ? f : 1) - 1) / (f ? f : 1);
}
static uint64_t waves_left(const sim_op *so, uint64_t work, uint64_t waves)
{
	uint64_t total = so->solo * SIM_WORK_SCALE;
	if (total == 0 || work == 0)
		return 0;
	return (uint64_t)(((sim_u128)work * waves + total - 1) / total);
}

/* SMs the CTAs of the running tiled kernels hold at t, of the f free ones: a full wave each (f),
 * the tiles of the last one in its last wave; a kernel stalled by a more urgent stream (rate 0)
 * holds none, as the rate pass has it. Scans the running ops (one per stream at most). */
static uint32_t tiled_sms(const rm_sim *sim, rm_time_ps t, uint32_t f)
{
	uint64_t busy = 0;
	for (int32_t k = 0; k < sim->n_running && busy < f; k++) {
		int32_t j = sim->running[k];
		const sim_op *so = &sim->ops[j];
		const sim_state *s = &sim->st[j];
		if (!is_tiled(so) || (s->den != 0 && s->num == 0))
			continue;
		uint64_t waves = kernel_waves(so, f), left = waves_left(so, work_at(s, t), waves);
		if (left > 0)
			busy += left == 1 ? so->tiles - (waves - 1) * f : f;
	}
	return busy < f ? (uint32_t)busy : f;
}

/* The earliest next wave boundary after t among the running tiled kernels, from their remaining
 * work and current rates (just set by the rate pass); t if none is making progress. */
static rm_time_ps next_wave_boundary(const rm_sim *sim, rm_time_ps t)
{
	uint32_t f = free_sms(sim);
	rm_time_ps best = UINT64_MAX;
	for (int32_t k = 0; k < sim->n_running; k++) {
		int32_t j = sim->running[k];
		const sim_op *so = &sim->ops[j];
		const sim_state *s = &sim->st[j];
		if (!is_tiled(so) || s->num == 0 || s->den == 0)
			continue;
		uint64_t total = so->solo * SIM_WORK_SCALE;
		uint64_t waves = kernel_waves(so, f), left = waves_left(so, work_at(s, t), waves);
		/* work left at the boundary ending the current wave: total x (left - 1) / waves */
		uint64_t at = left > 0 ? (uint64_t)((sim_u128)total * (left - 1) / waves) : 0;
		rm_time_ps tb = t;
		if (s->work > at) {
			/* measured from s->last, like its completion, so a kernel's last boundary is
			 * its scheduled end to the picosecond */
			sim_u128 w = (sim_u128)(s->work - at) * s->den;
			sim_u128 q = (sim_u128)SIM_WORK_SCALE * s->num;
			tb = s->last + (rm_time_ps)((w + q - 1) / q);
		}
		if (tb < t)
			tb = t;
		if (tb < best)
			best = tb;
	}
	return best == UINT64_MAX ? t : best;
}

/* Schedules the grant of every collective that began waiting since the last call. */
static void schedule_grants(rm_sim *sim, rm_time_ps t)
{
	rm_time_ps tb = next_wave_boundary(sim, t);
	for (; sim->n_sm_wait_sched < sim->n_sm_wait; sim->n_sm_wait_sched++)
		heap_push(sim, tb, sim->sm_waiters[sim->n_sm_wait_sched]);
}

/* Op i enters the running set at t: it holds its SMs and draws its HBM from now; the next rate
 * pass schedules its completion. */
static inline __attribute__((always_inline)) void occupy(rm_sim *sim, int32_t i, rm_time_ps t)
{
	const sim_op *so = &sim->ops[i];
	sim_state *s = &sim->st[i];
	s->last = t;
	s->num = 0;
	s->den = 0; /* marks "never scheduled": the rate pass always schedules it */
	s->slot = sim->n_running;
	sim->running[sim->n_running++] = i;
	sim->run_count[so->res]++;
	sim->held_sms += so->sms;
	if (so->flags & SIM_F_COLL)
		sim->drawn_hbm += so->hbm_GBps;
	sim->n_run_tiles += is_tiled(so);
	sim->n_run_compute += (so->flags & SIM_F_COMPUTE) != 0;
	sim->n_run_coll += (so->flags & SIM_F_COLL) != 0;
	sim->n_run_recompute += (so->flags & SIM_F_RECOMPUTE) != 0;
}

static rm_status start_op(rm_sim *sim, int32_t i, rm_time_ps t, rm_error *err)
{
	const sim_op *so = &sim->ops[i];
	sim_state *s = &sim->st[i];
	const int32_t *mem = sim->mem + so->mem_at;
	for (uint32_t k = 0; k < (sim->check_races ? so->n_race : 0); k++) {
		int32_t tn = mem[so->n_alloc + k];
		if (sim->tensor_state[tn] != 2) {
			const rm_program *prog = sim->prog;
			return rm_error_set(err, RM_INVALID, NULL, 0, 0,
					    "data race at t=%.6f us: ops[%d] '%s' reads tensor %d '%s' "
					    "before its producer has ended (missing event?)",
					    (double)t / 1e6, i, prog->ops[i].name, tn,
					    prog->tensors[tn].name);
		}
	}
	if (so->n_alloc) {
		int64_t peak_before = sim->m.peak_memory_bytes;
		for (uint32_t k = 0; k < so->n_alloc; k++) {
			sim->tensor_state[mem[k]] = 1;
			mem_add(sim, mem[k], 1);
		}
		if (sim->alloc)
			mem_replay_alloc(sim, mem, so->n_alloc, so->stream, peak_before);
		if (sim->m.first_oom_op < 0 && sim->mem_device > sim->m.memory_usable_bytes)
			sim->m.first_oom_op = i;
		mem_note(sim, t);
	}
	sim->op_start[i] = t;
	s->work = so->solo * SIM_WORK_SCALE;
	sim->m.events++;
	if (so->qnext >= 0 && !(so->flags & SIM_F_QBLOCK))
		release(sim, so->qnext);
	if (so->sms > 0 && sim->n_run_tiles > 0) {
		uint32_t f = free_sms(sim), busy = tiled_sms(sim, t, f);
		if (busy > 0 && f - busy < so->sms) {
			/* launched, holding nothing until the grant (scheduled after the rate pass) */
			s->sm_wait = 1;
			sim->sm_waiters[sim->n_sm_wait++] = i;
			return RM_OK;
		}
	}
	occupy(sim, i, t);
	return RM_OK;
}

/* Gives waiting collective i its SMs and HBM share at t (its grant event, or a GEMM's end). */
static void grant(rm_sim *sim, int32_t i, rm_time_ps t)
{
	sim_state *s = &sim->st[i];
	s->sm_wait = 0;
	s->gen++; /* a grant event still in the heap is stale */
	sim->m.sm_wait += t - sim->op_start[i];
	sim->op_grant[i] = t; /* only for those that waited: rm_sim_op_grant */
	occupy(sim, i, t);
}

/* The grant event of op i: removes it from the waiters (a handful at most), then grants. */
static void grant_event(rm_sim *sim, int32_t i, rm_time_ps t)
{
	int32_t k = 0;
	while (k < sim->n_sm_wait_sched && sim->sm_waiters[k] != i)
		k++;
	assert(k < sim->n_sm_wait_sched); /* a valid grant event has its op among the waiters */
	for (; k + 1 < sim->n_sm_wait; k++)
		sim->sm_waiters[k] = sim->sm_waiters[k + 1];
	sim->n_sm_wait--;
	sim->n_sm_wait_sched--;
	grant(sim, i, t);
}

static void end_op(rm_sim *sim, int32_t i, rm_time_ps t)
{
	const sim_op *so = &sim->ops[i];
	sim_state *s = &sim->st[i];
	s->gen++;
	int32_t last = sim->running[--sim->n_running];
	sim->running[s->slot] = last;
	sim->st[last].slot = s->slot;
	s->slot = -1;
	sim->run_count[so->res]--;
	sim->held_sms -= so->sms;
	if (so->flags & SIM_F_COLL)
		sim->drawn_hbm -= so->hbm_GBps;
	sim->n_run_compute -= (so->flags & SIM_F_COMPUTE) != 0;
	sim->n_run_coll -= (so->flags & SIM_F_COLL) != 0;
	sim->n_run_recompute -= (so->flags & SIM_F_RECOMPUTE) != 0;
	if (so->flags & SIM_F_TILED) {
		sim->n_run_tiles--;
		/* a GEMM's end is its last wave boundary: its SMs go to the waiting collectives now,
		 * whenever their grant was due */
		for (int32_t k = 0; k < sim->n_sm_wait; k++)
			grant(sim, sim->sm_waiters[k], t);
		sim->n_sm_wait = sim->n_sm_wait_sched = 0;
	}
	sim->op_end[i] = t;
	sim->stream_busy[so->stream] += t - sim->op_start[i];
	sim->completed++;
	sim->m.events++;

	/* releases: the inputs whose last reader this is, then the outputs no op reads */
	const int32_t *mem = sim->mem + so->mem_at;
	bool unread = false;
	for (uint32_t k = 0; k < so->n_alloc; k++) {
		sim->tensor_state[mem[k]] = 2;
		unread |= sim->tensor_consumers[mem[k]] == 0;
	}
	if (so->n_race || unread) {
		const int32_t *in = mem + so->n_alloc;
		bool changed = false;
		for (uint32_t k = 0; k < so->n_race; k++) {
			int32_t tn = in[k];
			if (--sim->tensor_left[tn] == 0) {
				sim->tensor_state[tn] = 3;
				mem_add(sim, tn, -1);
				changed = true;
			}
		}
		if (unread) {
			for (uint32_t k = 0; k < so->n_alloc; k++) {
				int32_t tn = mem[k];
				if (sim->tensor_consumers[tn] == 0) {
					sim->tensor_state[tn] = 3;
					mem_add(sim, tn, -1);
					changed = true;
				}
			}
		}
		if (changed && sim->alloc) {
			mem_replay_free(sim, in, so->n_race);
			if (unread)
				mem_replay_free(sim, mem, so->n_alloc);
		}
		if (changed)
			mem_note(sim, t);
	}

	for (uint32_t k = 0; k < so->succ_n; k++)
		release(sim, sim->succ[so->succ_at + k]);
	if (so->qnext >= 0 && (so->flags & SIM_F_QBLOCK))
		release(sim, so->qnext);
}

/* Recomputes the rate of every running op; reschedules those whose rate changed. */
static void update_rates(rm_sim *sim, rm_time_ps t)
{
	uint32_t best = UINT32_MAX, n_best = 0;
	for (int32_t k = 0; k < sim->n_running; k++) {
		const sim_op *so = &sim->ops[sim->running[k]];
		if (so->res != RM_RES_SM)
			continue;
		if (so->prio < best) {
			best = so->prio;
			n_best = 1;
		} else if (so->prio == best) {
			n_best++;
		}
	}
	uint32_t avail = free_sms(sim);
	/* network loads (with a fabric): the running collectives' shares of each level */
	uint64_t net_load[RM_NET_LEVELS] = {0};
	if (sim->net_share && sim->run_count[RM_RES_NET] > 0)
		for (int32_t k = 0; k < sim->n_running; k++) {
			int32_t i = sim->running[k];
			if (sim->ops[i].res == RM_RES_NET)
				for (int l = 0; l < RM_NET_LEVELS; l++)
					net_load[l] += sim->net_share[(size_t)i * RM_NET_LEVELS + l];
		}
	for (int32_t k = 0; k < sim->n_running; k++) {
		int32_t i = sim->running[k];
		const sim_op *so = &sim->ops[i];
		sim_state *s = &sim->st[i];
		uint32_t num, den;
		if (so->res == RM_RES_SM && sim->slow_ppm > 0 && so->prio == best) {
			/* calibrated (remora calib fit, interference.sms): slowdown 1 + per_sm x held */
			num = 1000000;
			den = (1000000 + sim->slow_ppm * sim->held_sms) * n_best;
		} else if (so->res == RM_RES_SM && so->tiles > 0 && so->prio == best) {
			/* a GEMM runs in waves of one tile per SM: on the F SMs no collective holds it
			 * needs ceil(tiles / F) waves instead of ceil(tiles / sm_count), each as long as a
			 * wave on the whole GPU (a one-wave GEMM beside a 24-SM collective runs two
			 * waves: 2x, not 132/108; docs/reference/hardware.md); kernels of the same
			 * priority share that rate equally */
			num = avail ? (so->tiles + sim->sm_count - 1) / sim->sm_count : 0;
			den = avail ? (so->tiles + avail - 1) / avail * n_best : 1;
		} else if (so->res == RM_RES_SM) {
			num = so->prio == best ? avail : 0;
			den = sim->sm_count * n_best;
		} else if (so->res == RM_RES_HBM && sim->drawn_hbm > 0) {
			/* running collectives read and write HBM too (rm_cost_collective_hbm_GBps): the
			 * memory-bound kernels share what they leave, at least half */
			uint32_t drawn = sim->drawn_hbm < sim->hbm_GBps / 2 ? sim->drawn_hbm : sim->hbm_GBps / 2;
			num = sim->hbm_GBps - drawn;
			den = sim->hbm_GBps * sim->run_count[so->res];
		} else if (so->res == RM_RES_NET && sim->net_share) {
			/* proportional sharing (docs/sim.md "Network sharing"): a level whose running
			 * shares add up to L > 1 slows every collective on it by 1 / L; a collective
			 * runs at the slowest of the levels it draws on */
			const uint32_t *ns = sim->net_share + (size_t)i * RM_NET_LEVELS;
			uint64_t worst = 1000000u;
			for (int l = 0; l < RM_NET_LEVELS; l++)
				if ((ns[l] || l == 0) && net_load[l] > worst)
					worst = net_load[l];
			num = 1000000u;
			den = worst < UINT32_MAX ? (uint32_t)worst : UINT32_MAX;
		} else {
			num = 1;
			den = sim->run_count[so->res];
		}
		if (num == 0)
			den = 1;
		if (s->den != 0 && (uint64_t)num * s->den == (uint64_t)s->num * den)
			continue; /* same rate: the scheduled completion stands */
		if (s->den != 0 && s->num != 0 && t > s->last) {
			sim_u128 done = (sim_u128)(t - s->last) * SIM_WORK_SCALE * s->num / s->den;
			s->work = done >= s->work ? 0 : s->work - (uint64_t)done;
		}
		s->last = t;
		s->num = num;
		s->den = den;
		s->gen++;
		if (s->work == 0) {
			heap_push(sim, t, i);
		} else if (num > 0) {
			sim_u128 w = (sim_u128)s->work * den;
			sim_u128 q = (sim_u128)SIM_WORK_SCALE * num;
			sim_u128 top = w + q - 1;
			/* the same quotient in 64 bits when top fits (the common case: no __udivti3 call); work
			 * > 0 here, so top >= q and q fits too */
			rm_time_ps dt = (top >> 64) == 0 ? (rm_time_ps)((uint64_t)top / (uint64_t)q) : (rm_time_ps)(top / q);
			heap_push(sim, t + dt, i);
		}
	}
}

/* A valid event of op i at t: its grant while it waits for SMs, else its completion. */
static inline void fire(rm_sim *sim, int32_t i, rm_time_ps t)
{
	if (sim->st[i].sm_wait)
		grant_event(sim, i, t);
	else
		end_op(sim, i, t);
}

static void account(rm_sim *sim, rm_time_ps dt)
{
	if (sim->n_run_compute)
		sim->m.compute_busy += dt;
	if (sim->n_run_coll) {
		sim->m.comm_total += dt;
		if (!sim->n_run_compute)
			sim->m.exposed_comm += dt;
	}
	if (sim->n_run_recompute)
		sim->m.recompute += dt;
}

static rm_status report_deadlock(rm_sim *sim, rm_time_ps t, rm_error *err)
{
	const rm_program *prog = sim->prog;
	int32_t i = 0;
	while (i < sim->n_ops && sim->st[i].pending == 0)
		i++;
	if (i == sim->n_ops)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0,
				    "deadlock at t=%.6f us: %d ops still running with no progress",
				    (double)t / 1e6, sim->n_running);
	/* Name what the first op that never started waits for: a predecessor or recorder that has
	 * not ended (still pending, or running), else its hardware queue. */
	const rm_program_op *op = &prog->ops[i];
	char why[512] = "";
	size_t len = 0;
#define WHY(...)                                                                                 \
	do {                                                                                     \
		if (len < sizeof(why)) {                                                         \
			int w_ = snprintf(why + len, sizeof(why) - len, __VA_ARGS__);            \
			if (w_ > 0)                                                              \
				len += (size_t)w_;                                               \
		}                                                                                \
	} while (0)
	for (int32_t p = i - 1; p >= 0; p--) {
		if (prog->ops[p].stream == op->stream) {
			if (sim->st[p].pending != 0 || sim->st[p].slot >= 0)
				WHY(" stream predecessor ops[%d] '%s';", p, prog->ops[p].name);
			break;
		}
	}
	const int32_t *w = rm_program_refs(prog, op->waits);
	for (uint32_t j = 0; j < op->waits.count; j++) {
		for (int32_t p = 0; p < sim->n_ops; p++) {
			const rm_program_op *po = &prog->ops[p];
			const int32_t *r = rm_program_refs(prog, po->records);
			for (uint32_t q = 0; q < po->records.count; q++)
				if (r[q] == w[j] && (sim->st[p].pending != 0 || sim->st[p].slot >= 0))
					WHY(" event %d '%s' (recorded by ops[%d] '%s');", w[j],
					    prog->events[w[j]].name, p, po->name);
		}
	}
	if (len == 0)
		WHY(" the op launched before it on its hardware queue (CUDA_DEVICE_MAX_CONNECTIONS=%d);",
		    sim->opt.hw_queues);
#undef WHY
	if (len > 0 && why[len - 1] == ';')
		why[len - 1] = '\0';
	return rm_error_set(err, RM_INVALID, NULL, 0, 0,
			    "deadlock at t=%.6f us: %d of %d ops never ran; ops[%d] '%s' waits for%s "
			    "(hardware queues: %d)",
			    (double)t / 1e6, sim->n_ops - sim->completed, sim->n_ops, i, op->name, why,
			    sim->opt.hw_queues);
}

static void reset(rm_sim *sim)
{
	for (int32_t i = 0; i < sim->n_ops; i++) {
		sim->st[i] = (sim_state){.pending = sim->ops[i].init_pending, .slot = -1};
		sim->op_start[i] = sim->op_end[i] = sim->op_grant[i] = 0;
	}
	for (int32_t t = 0; t < sim->n_tensors; t++) {
		sim->tensor_left[t] = sim->tensor_consumers[t];
		sim->tensor_state[t] = 0;
	}
	for (int32_t s = 0; s < sim->n_streams; s++)
		sim->stream_busy[s] = 0;
	sim->heap_n = sim->ready_n = 0;
	sim->n_running = 0;
	sim->n_sm_wait = sim->n_sm_wait_sched = 0;
	sim->n_run_tiles = 0;
	memset(sim->run_count, 0, sizeof(sim->run_count));
	sim->n_run_compute = sim->n_run_coll = sim->n_run_recompute = sim->held_sms = 0;
	sim->drawn_hbm = 0;
	sim->seq = 0;
	sim->completed = 0;
	sim->tl_n = 0;
	memset(&sim->m, 0, sizeof(sim->m));
	sim->m.first_oom_op = -1;
	sim->m.periodic_from = -1;
	sim->m.memory_capacity_bytes = (int64_t)sim->hw->hbm_bytes;
	sim->m.memory_usable_bytes = sim->m.memory_capacity_bytes - sim->opt.memory_headroom_bytes;
	sim->mem_device = sim->persistent_device;
	sim->mem_host = sim->persistent_host;
	sim->m.peak_memory_bytes = sim->mem_device;
	sim->m.peak_host_bytes = sim->mem_host;
	if (sim->alloc) {
		sim_alloc_reset(sim->alloc, sim->m.memory_usable_bytes);
		const rm_program *prog = sim->prog;
		for (int32_t t = 0; t < sim->n_tensors; t++)
			sim->tensor_block[t] = prog->tensors[t].persistent && !sim->tensor_host[t]
						       ? sim_alloc_malloc(sim->alloc, sim->param_stream,
									  sim->tensor_bytes[t])
						       : -1;
		sim->m.reserved_at_peak_bytes = sim_alloc_get_stats(sim->alloc)->reserved_bytes;
	}
	mem_note(sim, 0);
}

/* Reserved memory by the allocator model (options.allocator). */
static void finish_reserved(rm_sim *sim)
{
	rm_sim_metrics *m = &sim->m;
	switch (sim->opt.allocator) {
	case RM_SIM_ALLOC_PYTORCH:
	case RM_SIM_ALLOC_PYTORCH_EXPANDABLE: {
		const sim_alloc_stats *as = sim_alloc_get_stats(sim->alloc);
		m->peak_reserved_bytes = as->peak_reserved_bytes;
		m->num_alloc_retries = as->num_alloc_retries;
		m->num_ooms = as->num_ooms;
		break;
	}
	case RM_SIM_ALLOC_JAX_PREALLOC: {
		/* The BFC pool is the preallocated fraction of HBM and does not grow: a step whose
		 * live buffers pass it fails with RESOURCE_EXHAUSTED however much HBM is left
		 * (docs/sim.md "Reserved memory"). */
		double f = sim->opt.alloc_fraction > 0 ? sim->opt.alloc_fraction : RM_SIM_JAX_MEM_FRACTION;
		int64_t pre = (int64_t)(f * (double)m->memory_capacity_bytes);
		m->peak_reserved_bytes = m->reserved_at_peak_bytes = pre;
		if (m->peak_memory_bytes > pre)
			m->num_ooms = 1;
		break;
	}
	default:
		m->peak_reserved_bytes = m->reserved_at_peak_bytes = m->peak_memory_bytes;
		break;
	}
}

static void finish_metrics(rm_sim *sim, rm_time_ps t)
{
	rm_sim_metrics *m = &sim->m;
	const rm_program *prog = sim->prog;
	m->step_time = t;
	m->lower_bound = sim->lower_bound;
	m->fits = m->peak_memory_bytes <= m->memory_usable_bytes;
	finish_reserved(sim);
	/* the caching allocator could not get a segment even with its cache freed: PyTorch raises
	 * OutOfMemoryError, whatever the live tensors add up to */
	if (m->num_ooms > 0)
		m->fits = false;
	double flops = 0;
	/* the ops' FLOPs only when the program gives no model FLOPs of its own */
	bool count_flops = !(prog->model_flops >= 0);
	for (int32_t i = 0; i < sim->n_ops; i++) {
		const rm_program_op *op = &prog->ops[i];
		if (op->cost.kind == RM_COST_COLLECTIVE) {
			m->collectives++;
			if (prog->streams[op->stream].kind == RM_STREAM_COMPUTE)
				m->sync_collectives++;
		}
		if (!count_flops || op->phase == RM_PPHASE_RECOMPUTE)
			continue;
		if (op->cost.kind == RM_COST_GEMM)
			flops += rm_cost_gemm_flops(&op->cost.gemm);
		else if (op->cost.kind == RM_COST_ATTENTION)
			flops += rm_cost_attention_flops(&op->cost.attention);
	}
	m->model_flops = prog->model_flops >= 0 ? prog->model_flops : flops;
	double step_s = rm_time_to_s(t);
	double peak = sim->hw->bf16_TFLOPs * RM_TB;
	m->mfu = step_s > 0 && peak > 0 ? m->model_flops / (step_s * peak) : 0;
	m->tokens_per_s = step_s > 0 && prog->tokens > 0 ? (double)prog->tokens / step_s : 0;
}

rm_status rm_sim_run(rm_sim *sim, rm_error *err)
{
	reset(sim);
	sim_loop_reset(sim);
	sim->ran = true;
	if (sim->loop && !sim_loop_usable(sim))
		return sim_loop_finish(sim, err); /* its structure does not repeat: nothing to run */
	rm_time_ps t = 0;
	rm_status st;
	for (int32_t i = 0; i < sim->n_ops; i++)
		if (sim->st[i].pending == 0)
			ready_push(sim, i);
	for (;;) {
		while (sim->ready_n > 0)
			if ((st = start_op(sim, ready_pop(sim), t, err)) != RM_OK)
				return st;
		if (sim->loop_watch >= 0 && sim->st[sim->loop_watch].pending == 0)
			sim_loop_at(sim, t);
		update_rates(sim, t);
		if (sim->n_sm_wait_sched < sim->n_sm_wait)
			schedule_grants(sim, t);
		/* Next valid completion (or grant). */
		sim_event e;
		for (;;) {
			if (sim->heap_n == 0)
				goto drained;
			e = heap_pop(sim);
			sim->m.heap_pops++;
			if (e.gen == sim->st[e.op].gen)
				break;
		}
		if (e.time > t) {
			account(sim, e.time - t);
			t = e.time;
		}
		fire(sim, e.op, t);
		/* Every other completion and grant at the same time, before any start. */
		while (sim->heap_n > 0 && sim->heap[0].time == t) {
			e = heap_pop(sim);
			sim->m.heap_pops++;
			if (e.gen == sim->st[e.op].gen)
				fire(sim, e.op, t);
		}
	}
drained:
	if (sim->completed < sim->n_ops)
		return report_deadlock(sim, t, err);
	finish_metrics(sim, t);
	return sim->loop ? sim_loop_finish(sim, err) : RM_OK;
}

/* ---- accessors -------------------------------------------------------------------------- */

const rm_sim_metrics *rm_sim_get_metrics(const rm_sim *sim)
{
	return &sim->m;
}
rm_time_ps rm_sim_op_start(const rm_sim *sim, int32_t op)
{
	return sim->ran && op >= 0 && op < sim->n_ops ? sim->op_start[op] : 0;
}
rm_time_ps rm_sim_op_end(const rm_sim *sim, int32_t op)
{
	return sim->ran && op >= 0 && op < sim->n_ops ? sim->op_end[op] : 0;
}
rm_time_ps rm_sim_op_grant(const rm_sim *sim, int32_t op)
{
	if (!sim->ran || op < 0 || op >= sim->n_ops)
		return 0;
	return sim->op_grant[op] > sim->op_start[op] ? sim->op_grant[op] : sim->op_start[op];
}
rm_time_ps rm_sim_op_solo(const rm_sim *sim, int32_t op)
{
	return op >= 0 && op < sim->n_ops ? sim->ops[op].solo : 0;
}
int rm_sim_op_sms(const rm_sim *sim, int32_t op)
{
	return op >= 0 && op < sim->n_ops ? sim->ops[op].sms : 0;
}
rm_time_ps rm_sim_stream_busy(const rm_sim *sim, int32_t stream)
{
	return stream >= 0 && stream < sim->n_streams ? sim->stream_busy[stream] : 0;
}
bool rm_sim_phase_start(const rm_sim *sim, rm_program_phase phase, rm_time_ps *start)
{
	bool found = false;
	for (int32_t i = 0; sim->ran && i < sim->n_ops; i++)
		if (sim->prog->ops[i].phase == phase && (!found || sim->op_start[i] < *start)) {
			*start = sim->op_start[i];
			found = true;
		}
	return found;
}
const rm_mem_point *rm_sim_memory_timeline(const rm_sim *sim, size_t *n)
{
	*n = sim->tl_n;
	return sim->timeline;
}
const rm_program *rm_sim_program(const rm_sim *sim)
{
	return sim->prog;
}
const rm_hw_profile *rm_sim_hw(const rm_sim *sim)
{
	return sim->hw;
}
