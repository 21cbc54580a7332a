/*
 * A periodic stretch of a program (remora/sim.h rm_sim_loop, docs/sim.md "Periodic steps").
 *
 * Why adding periods is exact. The engine is deterministic and invariant under a shift of time:
 * its future depends only on its state (running ops with their remaining work, rates and start
 * times, pending completions in their order, collectives waiting for SMs, each unstarted op's
 * count of unmet dependencies, live memory) and on the ops still to run. Take the state at the
 * instant the first op of iteration j starts (after every start of that instant). If it equals
 * the state at the start of iteration j - 1 with every op moved by one iteration and every time
 * by lambda, and the iterations' structure repeats, then iteration j + 1 starts lambda later in
 * the same state again, and so on. A program of `trips` iterations therefore runs exactly like
 * this one of `iters`, with trips - iters periods of lambda spliced in before the last
 * iterations; the ops after the stretch wait for its last iteration (checked), so they see the
 * same state, lambda x (trips - iters) later. Time-integrated metrics gain trips - iters times
 * their increase over one period; memory repeats, so its peak is the run's.
 *
 * Several stretches (a scan's forward loop, then its backward loop) are proven and extended one
 * after the other, in launch order: once one is proven, the ops after it (the next stretch
 * among them) run as they would in the longer program, later by its periods, so the next one's
 * proof and periods hold there too and the extensions add up.
 *
 * What is checked, and where: the structure (every op's duration, resources, stream, dependency
 * counts, successors moved by one iteration, tensor sizes) between consecutive iterations, here
 * at creation; at each iteration's start, the state above, compared with the snapshot of the
 * previous iteration's. The lower bound's longest paths repeat the same way (an iteration's
 * earliest starts those of the previous one plus a constant, successors at most one iteration
 * ahead).
 */
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

/* A pending completion (or grant) in canonical form: time after the cut, op relative to the
 * lowest op not ended, and whether it is still valid (stale ones are popped too). */
typedef struct canon_event {
	rm_time_ps dt;
	int32_t op;
	int32_t valid;
} canon_event;

/* One stretch: its extent, its structure's analysis, its run and its snapshot's scalars. */
typedef struct stretch {
	int32_t first, ops, iters, end;
	int64_t extra;         /* trips - iters */
	int32_t s0;            /* the structure repeats from iteration s0 on */
	int32_t colls, sync_colls; /* per iteration */
	/* the run */
	int32_t next;          /* the iteration whose first op is watched; iters: given up */
	bool have;             /* a snapshot of the previous iteration's start */
	bool proven;
	int32_t from;          /* the iteration that repeated its predecessor */
	/* the snapshot (its arrays are the set's) */
	rm_time_ps t;
	int32_t s_lo, s_hi, n_running, n_wait, n_wait_sched;
	size_t n_ev;
	int64_t mem_device, mem_host;
	rm_sim_metrics m;
} stretch;

struct sim_loop {
	int32_t n, cur;        /* stretches; the one watched (n: none) */
	stretch s[RM_SIM_MAX_LOOPS];
	bool ok;               /* every stretch's structure and epilogue checked; lower bound repeats */
	int32_t bad;           /* the stretch that is not ok, or was not proven */
	const char *why;       /* when not ok */
	int32_t init_hi;       /* the highest op of the first stretch with no dependency, or first - 1 */
	int32_t lo;            /* every op below has ended */
	/* the snapshot's arrays, for the stretch watched */
	sim_state *st;
	rm_time_ps *st_start;
	size_t cap_st;
	int32_t *running, *waiters;
	canon_event *ev, *ev_now;
	size_t cap_ev;
	sim_event *sorted;
	size_t cap_sorted;
	rm_time_ps *busy;
	/* the periods of the stretches proven so far */
	rm_sim_metrics add;
	rm_time_ps *busy_add;
};

static int32_t iter_first(const stretch *l, int32_t j)
{
	return l->first + j * l->ops;
}

/* Op v (a successor of an op of iteration j - 1) and w (the same successor of iteration j): the
 * same op moved by one iteration inside the stretch, or the same op after it. */
static bool succ_moves(const stretch *l, int32_t v, int32_t w)
{
	if (v >= l->first && v < l->end)
		return w == v + l->ops;
	return v >= l->end && w == v;
}

/* Ops a (iteration j - 1) and b = a + ops (iteration j) alike; with_succ: their successors and
 * their outputs' readers too (not for the last iteration, whose successors follow the stretch). */
static bool ops_alike(const rm_sim *sim, const stretch *l, int32_t a, bool with_succ)
{
	int32_t b = a + l->ops;
	const sim_op *x = &sim->ops[a], *y = &sim->ops[b];
	if (x->solo != y->solo || x->sms != y->sms || x->res != y->res || x->flags != y->flags || x->prio != y->prio ||
	    x->tiles != y->tiles || x->stream != y->stream || x->init_pending != y->init_pending ||
	    x->n_alloc != y->n_alloc || x->n_race != y->n_race)
		return false;
	if (sim->net_share &&
	    memcmp(sim->net_share + (size_t)a * RM_NET_LEVELS, sim->net_share + (size_t)b * RM_NET_LEVELS,
		   RM_NET_LEVELS * sizeof(uint32_t)) != 0)
		return false;
	const int32_t *ma = sim->mem + x->mem_at, *mb = sim->mem + y->mem_at;
	for (uint32_t k = 0; k < x->n_alloc + x->n_race; k++)
		if (sim->tensor_bytes[ma[k]] != sim->tensor_bytes[mb[k]] || sim->tensor_host[ma[k]] != sim->tensor_host[mb[k]])
			return false;
	if (!with_succ)
		return true;
	for (uint32_t k = 0; k < x->n_alloc; k++)
		if (sim->tensor_consumers[ma[k]] != sim->tensor_consumers[mb[k]])
			return false;
	if (x->succ_n != y->succ_n)
		return false;
	for (uint32_t k = 0; k < x->succ_n; k++) {
		int32_t v = sim->succ[x->succ_at + k], w = sim->succ[y->succ_at + k];
		if (!succ_moves(l, v, w))
			return false;
		/* a successor at most one iteration ahead (the longest paths' induction) */
		if (v < l->end && v >= a + 2 * l->ops)
			return false;
	}
	if ((x->qnext < 0) != (y->qnext < 0) || (x->qnext >= 0 && !succ_moves(l, x->qnext, y->qnext)))
		return false;
	return true;
}

/* Stretch l's structure (s0) and epilogue; false with *why when they do not repeat. */
static bool check_stretch(const rm_sim *sim, const int32_t *stream_last, stretch *l, const char **why)
{
	*why = "do not repeat one another";
	/* the structure: the last pair that differs sets s0 */
	l->s0 = 0;
	for (int32_t j = 1; j < l->iters; j++) {
		bool last = j == l->iters - 1;
		for (int32_t i = 0; i < l->ops; i++)
			if (!ops_alike(sim, l, iter_first(l, j - 1) + i, !last)) {
				if (last)
					return false;
				l->s0 = j;
				break;
			}
	}
	/* the ops after the stretch wait for its last iteration: each has a predecessor there or
	 * among those that do. Once the latest op of every stream with ops still to come does, so
	 * does every later op (its stream predecessor): the scan stops there. */
	int32_t last0 = iter_first(l, l->iters - 1), n_after = sim->n_ops - l->end;
	uint8_t *anch = rm_new(uint8_t, (size_t)n_after + (size_t)sim->n_streams + 1);
	uint8_t *s_anch = anch + n_after; /* per stream: its latest op so far waits for the last iteration */
	int32_t open = 0;
	for (int32_t st = 0; st < sim->n_streams; st++)
		open += stream_last[st] >= last0;
	bool ok = true;
	for (int32_t u = last0; u < sim->n_ops && ok && open > 0; u++) {
		if (u >= l->end && !anch[u - l->end]) {
			ok = false;
			*why = "are followed by ops that do not wait for the last one";
			break;
		}
		const sim_op *so = &sim->ops[u];
		if (!s_anch[so->stream]) {
			s_anch[so->stream] = 1;
			open--;
		}
		for (uint32_t k = 0; k < so->succ_n; k++) {
			int32_t v = sim->succ[so->succ_at + k];
			if (v >= l->end)
				anch[v - l->end] = 1;
		}
		if (so->qnext >= l->end)
			anch[so->qnext - l->end] = 1;
	}
	free(anch);
	if (!ok)
		return false;
	/* collectives per iteration (finish_metrics counts the program's) */
	const rm_program *prog = sim->prog;
	for (int32_t i = last0; i < l->end; i++)
		if (prog->ops[i].cost.kind == RM_COST_COLLECTIVE) {
			l->colls++;
			if (prog->streams[prog->ops[i].stream].kind == RM_STREAM_COMPUTE)
				l->sync_colls++;
		}
	return true;
}

sim_loop *sim_loop_create(rm_sim *sim, const int32_t *stream_last)
{
	sim_loop *L = NULL;
	for (int k = 0; k < RM_SIM_MAX_LOOPS && sim->opt.loops[k].ops > 0; k++) {
		const rm_sim_loop *o = &sim->opt.loops[k];
		if (o->iters <= 0 || o->trips <= o->iters)
			continue; /* nothing to extend */
		if (!L)
			L = rm_new(sim_loop, 1);
		stretch *l = &L->s[L->n++];
		l->first = o->first_op;
		l->ops = o->ops;
		l->iters = o->iters;
		l->extra = o->trips - o->iters;
		int64_t end = (int64_t)o->first_op + (int64_t)o->ops * o->iters;
		l->end = end <= sim->n_ops ? (int32_t)end : 0;
	}
	if (!L)
		return NULL;
	L->ok = true;
	L->cur = L->n;
	for (int32_t k = 0; k < L->n && L->ok; k++) {
		stretch *l = &L->s[k];
		/* three iterations at least (two starts to compare, the last untouched), after the
		 * stretch before; no PyTorch replay (its segments are not part of the compared
		 * state); model FLOPs given by the program */
		L->bad = k;
		if (!(l->first >= 0 && l->end > l->first && l->iters >= 3 && (k == 0 || l->first >= L->s[k - 1].end) &&
		      sim->opt.allocator != RM_SIM_ALLOC_PYTORCH && sim->opt.allocator != RM_SIM_ALLOC_PYTORCH_EXPANDABLE &&
		      sim->prog->model_flops >= 0)) {
			L->ok = false;
			L->why = "are not a stretch the engine extends (fewer than 3, outside the program or before "
				 "the stretch before, a PyTorch allocator's replay, no model FLOPs given)";
			break;
		}
		L->ok = check_stretch(sim, stream_last, l, &L->why);
	}
	if (!L->ok)
		return L;
	L->init_hi = L->s[0].first - 1;
	for (int32_t i = L->s[0].first; i < L->s[0].end; i++)
		if (sim->ops[i].init_pending == 0)
			L->init_hi = i;
	return L;
}

void sim_loop_destroy(sim_loop *L)
{
	if (!L)
		return;
	free(L->st);
	free(L->st_start);
	free(L->running);
	free(L->waiters);
	free(L->ev);
	free(L->ev_now);
	free(L->sorted);
	free(L->busy);
	free(L->busy_add);
	free(L);
}

/* The longest paths of the step from those of the program (cur, in place; launch order) for
 * stretch l: iteration j's earliest starts iteration j - 1's plus c > 0, so the ops from there
 * (the stretch's and those after it) move by extra x c; those after it are relaxed again from
 * their predecessors' moved finishes. No path shrinks, so an op's earlier value stays a lower
 * bound and only the moved ops' successors need relaxing. False when the paths grow
 * unevenly. */
static bool extend_paths(const rm_sim *sim, const stretch *l, rm_time_ps *cur)
{
	int32_t j = -1;
	rm_time_ps c = 0;
	for (int32_t k = l->s0 + 1; k < l->iters && j < 0; k++) {
		int32_t a = iter_first(l, k - 1), b = iter_first(l, k);
		rm_time_ps d = cur[b] - cur[a];
		if (cur[b] <= cur[a])
			continue;
		bool same = true;
		for (int32_t i = 0; i < l->ops && same; i++)
			same = cur[b + i] >= cur[a + i] && cur[b + i] - cur[a + i] == d;
		if (same) {
			j = k;
			c = d;
		}
	}
	if (j < 0)
		return false;
	int32_t n = sim->n_ops, aj = iter_first(l, j);
	rm_time_ps shift = (rm_time_ps)l->extra * c;
	for (int32_t u = aj; u < l->end; u++)
		cur[u] += shift;
	for (int32_t u = aj; u < n; u++) {
		rm_time_ps fin = cur[u] + sim->ops[u].solo;
		const sim_op *so = &sim->ops[u];
		for (uint32_t k = 0; k < so->succ_n; k++) {
			int32_t v = sim->succ[so->succ_at + k];
			if (v >= l->end && cur[v] < fin)
				cur[v] = fin;
		}
	}
	return true;
}

bool sim_loop_lower_bound(rm_sim *sim, rm_time_ps *est, const rm_time_ps *res_work, const sim_u128 *net_work,
			  rm_time_ps *lower_bound)
{
	sim_loop *L = sim->loop;
	if (!L || !L->ok)
		return false;
	int32_t n = sim->n_ops;
	rm_time_ps *cur = est;
	rm_time_ps work[RM_RES_COUNT];
	memcpy(work, res_work, sizeof(work));
	sim_u128 net[RM_NET_LEVELS];
	for (int lv = 0; lv < RM_NET_LEVELS; lv++)
		net[lv] = net_work ? net_work[lv] : 0;
	for (int32_t k = 0; k < L->n && L->ok; k++) {
		const stretch *l = &L->s[k];
		if (!extend_paths(sim, l, cur)) {
			L->ok = false;
			L->bad = k;
			L->why = "have longest paths (the lower bound's) that grow unevenly";
			break;
		}
		/* work per resource: an iteration's (the last one, like every other from s0) extra
		 * times */
		for (int32_t i = iter_first(l, l->iters - 1); i < l->end; i++) {
			const sim_op *so = &sim->ops[i];
			if (so->res == RM_RES_NET && sim->net_share) {
				for (int lv = 0; lv < RM_NET_LEVELS; lv++)
					net[lv] += (sim_u128)so->solo * sim_net_ppm(sim->net_share, i, lv) * (sim_u128)l->extra;
			} else {
				work[so->res] += so->solo * (rm_time_ps)l->extra;
			}
		}
	}
	if (!L->ok)
		return false;
	rm_time_ps best = 0;
	for (int32_t u = 0; u < n; u++)
		if (cur[u] + sim->ops[u].solo > best)
			best = cur[u] + sim->ops[u].solo;
	if (sim->net_share)
		for (int lv = 0; lv < RM_NET_LEVELS; lv++)
			if ((rm_time_ps)(net[lv] / 1000000u) > work[RM_RES_NET])
				work[RM_RES_NET] = (rm_time_ps)(net[lv] / 1000000u);
	*lower_bound = best;
	for (int r = 0; r < RM_RES_COUNT; r++)
		if (work[r] > *lower_bound)
			*lower_bound = work[r];
	return true;
}

int32_t sim_loop_reach(const rm_sim *sim)
{
	return sim->loop && sim->loop->ok ? sim->loop->s[0].end : 0;
}

/* Stretch k is watched from now: the engine's reach (loop_end, loop_hi) becomes its ops. The
 * ops after a stretch wait for its last iteration (checked), so their dependencies met early
 * change nothing of their run: the reach leaves them out. */
static void watch(rm_sim *sim, sim_loop *L, int32_t k)
{
	L->cur = k;
	if (k >= L->n) {
		sim->loop_end = 0;
		return;
	}
	const stretch *l = &L->s[k];
	sim->loop_end = l->end;
	sim->loop_hi = l->first - 1;
	for (int32_t i = l->end - 1; i >= l->first; i--)
		if (sim->ops[i].init_pending == 0 || sim->st[i].pending < sim->ops[i].init_pending) {
			sim->loop_hi = i;
			break;
		}
}

void sim_loop_reset(rm_sim *sim)
{
	sim_loop *L = sim->loop;
	sim->loop_hi = L ? L->init_hi : 0;
	sim->loop_watch = -1;
	if (!L)
		return;
	for (int32_t k = 0; k < L->n; k++) {
		stretch *l = &L->s[k];
		l->next = L->ok ? l->s0 : l->iters;
		l->have = l->proven = false;
		l->from = -1;
	}
	L->cur = L->ok ? 0 : L->n;
	sim->loop_end = sim_loop_reach(sim);
	L->lo = 0;
	memset(&L->add, 0, sizeof(L->add));
	if (L->busy_add)
		memset(L->busy_add, 0, (size_t)sim->n_streams * sizeof(rm_time_ps));
	sim->loop_watch = L->cur < L->n ? iter_first(&L->s[0], L->s[0].next) : -1;
}

static int cmp_event(const void *pa, const void *pb)
{
	const sim_event *a = pa, *b = pb;
	if (a->time != b->time)
		return a->time < b->time ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static inline bool ended(const rm_sim *sim, int32_t i)
{
	const sim_state *s = &sim->st[i];
	return s->pending == 0 && s->slot < 0 && !s->sm_wait;
}

/* The pending events in canonical form, into L->ev_now (the count returned). */
static size_t canon_events(rm_sim *sim, sim_loop *L, rm_time_ps t, int32_t base)
{
	size_t n = sim->heap_n;
	if (n > L->cap_sorted) {
		L->cap_sorted = n * 2;
		L->sorted = rm_xrealloc(L->sorted, L->cap_sorted * sizeof(sim_event));
	}
	if (n > L->cap_ev) {
		L->cap_ev = n * 2;
		L->ev = rm_xrealloc(L->ev, L->cap_ev * sizeof(canon_event));
		L->ev_now = rm_xrealloc(L->ev_now, L->cap_ev * sizeof(canon_event));
	}
	if (n == 0)
		return 0;
	memcpy(L->sorted, sim->heap, n * sizeof(sim_event));
	qsort(L->sorted, n, sizeof(sim_event), cmp_event);
	for (size_t k = 0; k < n; k++) {
		const sim_event *e = &L->sorted[k];
		L->ev_now[k] = (canon_event){.dt = e->time - t, .op = e->op - base, .valid = e->gen == sim->st[e->op].gen};
	}
	return n;
}

static bool state_alike(const sim_state *a, rm_time_ps ta, rm_time_ps sa, const sim_state *b, rm_time_ps tb,
			rm_time_ps sb)
{
	if (a->pending != b->pending || (a->slot < 0) != (b->slot < 0) || a->sm_wait != b->sm_wait)
		return false;
	if (a->sm_wait)
		return a->work == b->work && ta - sa == tb - sb;
	if (a->slot < 0)
		return true;
	return a->work == b->work && ta - a->last == tb - b->last && a->num == b->num && a->den == b->den &&
	       ta - sa == tb - sb;
}

/* The state at t (iteration j's first op started) against the snapshot of iteration j - 1's. */
static bool matches(rm_sim *sim, const sim_loop *L, const stretch *l, rm_time_ps t, int32_t lo, int32_t hi,
		    size_t n_ev)
{
	if (lo != l->s_lo + l->ops || hi != l->s_hi + l->ops || n_ev != l->n_ev || sim->n_running != l->n_running ||
	    sim->n_sm_wait != l->n_wait || sim->n_sm_wait_sched != l->n_wait_sched || sim->mem_device != l->mem_device ||
	    sim->mem_host != l->mem_host)
		return false;
	for (int32_t i = lo; i <= hi; i++)
		if (!state_alike(&sim->st[i], t, sim->op_start[i], &L->st[i - lo], l->t, L->st_start[i - lo]))
			return false;
	for (int32_t k = 0; k < sim->n_running; k++)
		if (sim->running[k] - lo != L->running[k])
			return false;
	for (int32_t k = 0; k < sim->n_sm_wait; k++)
		if (sim->sm_waiters[k] - lo != L->waiters[k])
			return false;
	for (size_t k = 0; k < n_ev; k++)
		if (L->ev_now[k].dt != L->ev[k].dt || L->ev_now[k].op != L->ev[k].op || L->ev_now[k].valid != L->ev[k].valid)
			return false;
	return true;
}

static void snapshot(rm_sim *sim, sim_loop *L, stretch *l, rm_time_ps t, int32_t lo, int32_t hi, size_t n_ev)
{
	size_t w = (size_t)(hi - lo + 1);
	if (w > L->cap_st) {
		L->cap_st = w * 2;
		L->st = rm_xrealloc(L->st, L->cap_st * sizeof(sim_state));
		L->st_start = rm_xrealloc(L->st_start, L->cap_st * sizeof(rm_time_ps));
	}
	memcpy(L->st, sim->st + lo, w * sizeof(sim_state));
	memcpy(L->st_start, sim->op_start + lo, w * sizeof(rm_time_ps));
	l->n_running = sim->n_running;
	for (int32_t k = 0; k < sim->n_running; k++)
		L->running[k] = sim->running[k] - lo;
	l->n_wait = sim->n_sm_wait;
	l->n_wait_sched = sim->n_sm_wait_sched;
	for (int32_t k = 0; k < sim->n_sm_wait; k++)
		L->waiters[k] = sim->sm_waiters[k] - lo;
	canon_event *tmp = L->ev;
	L->ev = L->ev_now;
	L->ev_now = tmp;
	l->n_ev = n_ev;
	l->mem_device = sim->mem_device;
	l->mem_host = sim->mem_host;
	l->m = sim->m;
	memcpy(L->busy, sim->stream_busy, (size_t)sim->n_streams * sizeof(rm_time_ps));
	l->t = t;
	l->s_lo = lo;
	l->s_hi = hi;
	l->have = true;
}

/* Stretch l repeated from iteration j at t: its extra periods, added to the set's. */
static void prove(rm_sim *sim, sim_loop *L, stretch *l, int32_t j, rm_time_ps t)
{
	l->proven = true;
	l->from = j;
	rm_time_ps k = (rm_time_ps)l->extra;
	rm_sim_metrics *d = &L->add;
	const rm_sim_metrics *a = &l->m, *b = &sim->m;
	d->step_time += k * (t - l->t);
	d->compute_busy += k * (b->compute_busy - a->compute_busy);
	d->comm_total += k * (b->comm_total - a->comm_total);
	d->exposed_comm += k * (b->exposed_comm - a->exposed_comm);
	d->recompute += k * (b->recompute - a->recompute);
	d->sm_wait += k * (b->sm_wait - a->sm_wait);
	d->events += (uint64_t)l->extra * (b->events - a->events);
	d->heap_pops += (uint64_t)l->extra * (b->heap_pops - a->heap_pops);
	d->collectives += (int32_t)(l->extra * l->colls);
	d->sync_collectives += (int32_t)(l->extra * l->sync_colls);
	d->periods_added += l->extra;
	for (int32_t s = 0; s < sim->n_streams; s++)
		L->busy_add[s] += k * (sim->stream_busy[s] - L->busy[s]);
}

void sim_loop_at(rm_sim *sim, rm_time_ps t)
{
	sim_loop *L = sim->loop;
	if (!L->running) {
		L->running = rm_new(int32_t, (size_t)sim->n_streams + 1);
		L->waiters = rm_new(int32_t, (size_t)sim->n_streams + 1);
		L->busy = rm_new(rm_time_ps, (size_t)sim->n_streams + 1);
		L->busy_add = rm_new(rm_time_ps, (size_t)sim->n_streams + 1);
	}
	while (L->cur < L->n) {
		stretch *l = &L->s[L->cur];
		if (l->next >= l->iters) {
			watch(sim, L, L->n); /* given up: the run cannot be extended */
			break;
		}
		if (sim->st[iter_first(l, l->next)].pending != 0)
			break;
		int32_t j = l->next++;
		while (L->lo < sim->n_ops && ended(sim, L->lo))
			L->lo++;
		int32_t lo = L->lo, hi = sim->loop_hi;
		/* the state lies in iterations that repeat, short of the last one */
		if (lo < iter_first(l, l->s0) || hi >= iter_first(l, l->iters - 1)) {
			l->have = false;
			if (hi >= iter_first(l, l->iters - 1))
				l->next = l->iters;
			continue;
		}
		size_t n_ev = canon_events(sim, L, t, lo);
		if (l->have && matches(sim, L, l, t, lo, hi, n_ev)) {
			prove(sim, L, l, j, t);
			watch(sim, L, L->cur + 1);
			continue;
		}
		snapshot(sim, L, l, t, lo, hi, n_ev);
	}
	sim->loop_watch = L->cur < L->n ? iter_first(&L->s[L->cur], L->s[L->cur].next) : -1;
}

bool sim_loop_usable(const rm_sim *sim)
{
	return sim->loop->ok;
}

void sim_loop_disable(rm_sim *sim)
{
	if (sim->loop->ok) {
		sim->loop->why = "are not in launch order";
		sim->loop->bad = 0;
	}
	sim->loop->ok = false;
}

rm_status sim_loop_finish(rm_sim *sim, rm_error *err)
{
	sim_loop *L = sim->loop;
	rm_sim_metrics *m = &sim->m;
	int32_t bad = L->ok ? -1 : L->bad;
	for (int32_t k = 0; k < L->n && bad < 0; k++)
		if (!L->s[k].proven)
			bad = k;
	if (bad >= 0) {
		const stretch *l = &L->s[bad];
		return rm_error_set(err, RM_UNSUPPORTED, NULL, 0, 0,
				    "the %d iterations of ops [%d, %d) %s: simulate all %lld of them", l->iters,
				    l->first, l->first + l->ops * l->iters, !L->ok ? L->why : "reached no periodic state",
				    (long long)(l->iters + l->extra));
	}
	const rm_sim_metrics *d = &L->add;
	m->step_time += d->step_time;
	m->compute_busy += d->compute_busy;
	m->comm_total += d->comm_total;
	m->exposed_comm += d->exposed_comm;
	m->recompute += d->recompute;
	m->sm_wait += d->sm_wait;
	m->events += d->events;
	m->heap_pops += d->heap_pops;
	for (int32_t s = 0; s < sim->n_streams; s++)
		sim->stream_busy[s] += L->busy_add[s];
	m->collectives += d->collectives;
	m->sync_collectives += d->sync_collectives;
	m->periods_added = d->periods_added;
	m->periodic_from = L->s[0].from;
	double step_s = rm_time_to_s(m->step_time);
	double peak = sim->hw->bf16_TFLOPs * RM_TB;
	m->mfu = step_s > 0 && peak > 0 ? m->model_flops / (step_s * peak) : 0;
	m->tokens_per_s = step_s > 0 && sim->prog->tokens > 0 ? (double)sim->prog->tokens / step_s : 0;
	return RM_OK;
}
