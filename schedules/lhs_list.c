/*
 * The list scheduler of XLA's latency-hiding scheduler over a dependency graph
 * (schedules/sched_internal.h, rm__lhs_list). It follows DefaultSchedulerCore and ReadySetLt in
 * xla/service/latency_hiding_scheduler.cc (openxla/xla as of commit 1e203b53, 2025-11-05):
 * ScheduleComputation walks the graph bottom-up, FindAndExtractBestNodeAvailable keeps the best
 * ready candidate under ReadySetLt::AIsBetterThanB, ScheduleNode advances the time and releases
 * the operands; HloScheduleGraph::InitializeGraphAnalysis gives the async depth and
 * HloGraphNode::UpdateReadyNodesIfScheduled the ready-node counts. Only the rules the GPU
 * configuration reaches (gpu_hlo_schedule.cc MakeGPUSchedulerConfig) on graphs without
 * force-delay/force-early custom calls, selective resources, annotations or target rules are
 * implemented; docs/schedules.md "Compute order".
 */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "schedules/sched_internal.h"

static const char *const ln_rule_names[] = {
#define LN_RULE_STR(name, str) str,
	LN_RULE_MAP(LN_RULE_STR)
#undef LN_RULE_STR
};

const char *rm__ln_rule_name(ln_rule r)
{
	return r >= 0 && r < LN_RULE_COUNT ? ln_rule_names[r] : "?";
}

void rm__ln_graph_finish(ln_graph *g)
{
	if (!g)
		return;
	free(g->nodes);
	free(g->operands);
	memset(g, 0, sizeof(*g));
}

int rm__ln_add_node(ln_graph *g, ln_kind kind, int resource, double cost, double latency, int64_t out_bytes)
{
	if (g->n == g->cap) {
		g->cap = g->cap ? 2 * g->cap : 64;
		g->nodes = rm_xrealloc(g->nodes, (size_t)g->cap * sizeof(ln_node));
	}
	g->nodes[g->n] = (ln_node){kind, resource, cost, latency, out_bytes, false, g->n_operands, 0};
	return g->n++;
}

void rm__ln_add_operand(ln_graph *g, int op)
{
	assert(g->n > 0 && op >= 0);
	ln_node *nd = &g->nodes[g->n - 1];
	for (int i = 0; i < nd->n_operands; i++)
		if (g->operands[nd->first_operand + i] == op)
			return;
	if (g->n_operands == g->cap_operands) {
		g->cap_operands = g->cap_operands ? 2 * g->cap_operands : 128;
		g->operands = rm_xrealloc(g->operands, (size_t)g->cap_operands * sizeof(int));
	}
	g->operands[g->n_operands++] = op;
	nd->n_operands++;
}

typedef struct ls_state {
	const rm__lhs_params *p;
	const ln_graph *g;
	int *ufirst, *ulist; /* users of each node (CSR) */
	int *outdeg;         /* users not scheduled yet */
	bool *live, *done_;
	bool *pending; /* released with a ready time in the future (next_ready_stack) */
	double *ready_time, *sched_time, *depth;
	int *ready, n_ready;
	int in_flight[CK_COUNT], total_in_flight, limit_open;
	int queue[CK_COUNT]; /* ready dones waiting, per kind (resource_users_in_queue) */
	double now;
	int64_t usage, limit;
} ls_state;

static const int *operands_of(const ls_state *s, int i, int *n)
{
	*n = s->g->nodes[i].n_operands;
	return s->g->operands + s->g->nodes[i].first_operand;
}

/* GetMemoryPressureChanges: (change of usage, peak over usage while it runs). Bottom-up, the
 * node ends its own buffer and starts those of operands not live yet. */
static void memory_change(const ls_state *s, int i, int64_t *increase, int64_t *peak)
{
	int n;
	const int *ops = operands_of(s, i, &n);
	int64_t in = 0;
	for (int q = 0; q < n; q++)
		if (!s->live[ops[q]])
			in += s->g->nodes[ops[q]].out_bytes;
	*peak = in;
	*increase = in - (s->live[i] && !s->g->nodes[i].external ? s->g->nodes[i].out_bytes : 0);
}

static bool resource_full(const ls_state *s, int k)
{
	return s->in_flight[k] >= 1 || s->total_in_flight >= s->limit_open;
}

/* IsResourceConstrained for a start: its resource has no capacity left and dones wait for it. */
static bool constrained(const ls_state *s, int i)
{
	const ln_node *nd = &s->g->nodes[i];
	if (nd->kind != LN_START)
		return false;
	if (s->queue[nd->resource] > 0)
		return true;
	if (s->total_in_flight >= s->limit_open)
		for (int k = 0; k < CK_COUNT; k++)
			if (s->queue[k] > 0)
				return true;
	return false;
}

static bool unlocks_done(const ls_state *s, int i)
{
	int n;
	const int *ops = operands_of(s, i, &n);
	for (int q = 0; q < n; q++)
		if (s->g->nodes[ops[q]].kind == LN_DONE)
			return true;
	return false;
}

static int ready_if_scheduled(const ls_state *s, int i)
{
	int n, c = 0;
	const int *ops = operands_of(s, i, &n);
	for (int q = 0; q < n; q++)
		c += s->outdeg[ops[q]] == 1;
	return c;
}

/* Three-way comparisons in the order of AIsBetterThanB: > 0 when a is better. */
#define CMP_BOOL(pa, pb, r)                       \
	do {                                      \
		bool pa_ = (pa), pb_ = (pb);      \
		if (pa_ != pb_) {                 \
			*why = (r);               \
			return pa_;               \
		}                                 \
	} while (0)
#define CMP_NUM(va, vb, r)                        \
	do {                                      \
		if ((va) != (vb)) {               \
			*why = (r);               \
			return (va) > (vb);       \
		}                                 \
	} while (0)

static bool a_better(const ls_state *s, int a, int b, double next_ready, ln_rule *why)
{
	const ln_node *an = &s->g->nodes[a], *bn = &s->g->nodes[b];
	int64_t ai = 0, ap = 0, bi = 0, bp = 0;
	bool computed = false;
	if (s->limit > 0 && s->usage > s->limit / 2) {
		memory_change(s, a, &ai, &ap);
		memory_change(s, b, &bi, &bp);
		computed = true;
		/* MemoryPressurePolicy */
		if (s->usage >= s->limit && ai != bi)
			CMP_BOOL(ai < bi, bi < ai, LN_RULE_DECREASE_MEMORY_OVER_LIMIT);
		CMP_BOOL(ap + s->usage <= s->limit, bp + s->usage <= s->limit, LN_RULE_MEMORY_PEAK_OVER_LIMIT);
	}
	CMP_BOOL(an->kind == LN_DONE, bn->kind == LN_DONE, LN_RULE_SCHEDULE_DONE);
	if (s->ready_time[a] != s->ready_time[b]) {
		double ia = fmax(s->ready_time[a] - s->now, 0), ib = fmax(s->ready_time[b] - s->now, 0);
		CMP_BOOL(ia < ib, ib < ia, LN_RULE_LESS_STALL);
	}
	/* AsyncDepth0CandidateCondition: a start with nothing above it is delayed (bottom-up) */
	CMP_BOOL(!(an->kind == LN_START && s->depth[a] == 0 && !constrained(s, a)),
		 !(bn->kind == LN_START && s->depth[b] == 0 && !constrained(s, b)), LN_RULE_START_AT_ZERO_DEPTH);
	CMP_BOOL(constrained(s, a), constrained(s, b), LN_RULE_FREE_BACKEDUP_RESOURCE);
	CMP_NUM(s->depth[a], s->depth[b], LN_RULE_ASYNC_DEPTH);
	if (next_ready >= 0) {
		double da = fabs(next_ready - s->now - an->cost), db = fabs(next_ready - s->now - bn->cost);
		CMP_BOOL(an->kind != LN_START && da < db, bn->kind != LN_START && db < da, LN_RULE_AVOID_WASTE);
	}
	CMP_BOOL(unlocks_done(s, a), unlocks_done(s, b), LN_RULE_UNLOCK_DONE);
	CMP_NUM(ready_if_scheduled(s, a), ready_if_scheduled(s, b), LN_RULE_CREATES_MORE_READY_NODES);
	if (computed)
		CMP_BOOL(ai < 0, bi < 0, LN_RULE_DECREASE_MEMORY);
	*why = LN_RULE_ORIGINAL_ORDER;
	return a > b;
}

#undef CMP_BOOL
#undef CMP_NUM

static void make_ready(ls_state *s, int i)
{
	s->ready[s->n_ready++] = i;
	s->pending[i] = s->ready_time[i] > s->now;
	if (s->g->nodes[i].kind == LN_DONE)
		s->queue[s->g->nodes[i].resource]++;
}

bool rm__lhs_list(const rm__lhs_params *p, int64_t baseline, const ln_graph *g, int *order, ln_rule *rule)
{
	int n = g->n;
	bool ok = false;
	ls_state s = {.p = p, .g = g, .limit = p->limit, .usage = baseline,
		      .limit_open = p->overlap_limit > 0 ? p->overlap_limit : 1};
	s.ufirst = rm_new(int, (size_t)n + 2);
	s.ulist = rm_new(int, (size_t)g->n_operands + 1);
	s.outdeg = rm_new(int, (size_t)n + 1);
	s.live = rm_new(bool, (size_t)n + 1);
	s.done_ = rm_new(bool, (size_t)n + 1);
	s.pending = rm_new(bool, (size_t)n + 1);
	s.ready_time = rm_new(double, (size_t)n + 1);
	s.sched_time = rm_new(double, (size_t)n + 1);
	s.depth = rm_new(double, (size_t)n + 1);
	s.ready = rm_new(int, (size_t)n + 1);
	int *seq = rm_new(int, (size_t)n + 1);
	for (int i = 0; i < n; i++) {
		const ln_node *nd = &g->nodes[i];
		for (int q = 0; q < nd->n_operands; q++) {
			int o = g->operands[nd->first_operand + q];
			if (o < 0 || o >= i)
				goto out;
			s.ufirst[o + 1]++;
		}
		if (nd->kind != LN_COMPUTE && (nd->resource < 0 || nd->resource >= CK_COUNT))
			goto out;
		if (nd->kind == LN_DONE && (nd->n_operands != 1 || g->nodes[g->operands[nd->first_operand]].kind != LN_START))
			goto out;
	}
	for (int i = 0; i < n; i++)
		s.ufirst[i + 1] += s.ufirst[i];
	{
		int *fill = rm_new(int, (size_t)n + 1);
		for (int i = 0; i < n; i++) {
			const ln_node *nd = &g->nodes[i];
			for (int q = 0; q < nd->n_operands; q++) {
				int o = g->operands[nd->first_operand + q];
				s.ulist[s.ufirst[o] + fill[o]++] = i;
			}
		}
		free(fill);
	}
	/* InitializeGraphAnalysis: operands come first, so one pass in order */
	for (int i = 0; i < n; i++) {
		const ln_node *nd = &g->nodes[i];
		for (int q = 0; q < nd->n_operands; q++) {
			int o = g->operands[nd->first_operand + q];
			double d = s.depth[o] + (nd->kind == LN_DONE ? nd->latency : 0);
			if (d > s.depth[i])
				s.depth[i] = d;
		}
	}
	for (int i = 0; i < n; i++) {
		s.outdeg[i] = s.ufirst[i + 1] - s.ufirst[i];
		if (s.outdeg[i] == 0) {
			s.live[i] = true; /* live out of the computation */
			s.usage += g->nodes[i].out_bytes;
			make_ready(&s, i);
		}
	}
	for (int done = 0; done < n; done++) {
		/* the front of next_ready_stack: the earliest ready time among the nodes released
		 * with one in the future and not yet passed (ScheduleNode pops those < now) */
		double next_ready = -1;
		for (int r = 0; r < s.n_ready; r++) {
			double t = s.ready_time[s.ready[r]];
			if (s.pending[s.ready[r]] && t >= s.now && (next_ready < 0 || t < next_ready))
				next_ready = t;
		}
		int best = -1, best_r = -1, latest = -1, n_cand = 0;
		for (int r = 0; r < s.n_ready; r++) {
			int i = s.ready[r];
			const ln_node *nd = &g->nodes[i];
			if (nd->kind == LN_DONE && resource_full(&s, nd->resource))
				continue; /* its resource is taken: not a candidate */
			n_cand++;
			if (i > latest)
				latest = i;
			ln_rule w;
			if (best < 0 || a_better(&s, i, best, next_ready, &w)) {
				best = i;
				best_r = r;
			}
		}
		if (best < 0)
			goto out; /* only dones waiting on a resource nothing will free */
		/* the rule that took it over the candidate the original order alone would take */
		ln_rule why = n_cand == 1 ? LN_RULE_ONLY_READY : LN_RULE_ORIGINAL_ORDER;
		if (best != latest)
			a_better(&s, best, latest, next_ready, &why);
		const ln_node *bn = &g->nodes[best];
		rule[best] = why;
		double t = s.now > s.ready_time[best] ? s.now : s.ready_time[best];
		s.sched_time[best] = t;
		s.now = t + bn->cost;
		if (s.live[best] && !bn->external) {
			s.usage -= bn->out_bytes;
			s.live[best] = false;
		}
		s.done_[best] = true;
		if (bn->kind == LN_DONE) {
			s.in_flight[bn->resource]++;
			s.total_in_flight++;
			s.queue[bn->resource]--;
		} else if (bn->kind == LN_START) {
			s.in_flight[bn->resource]--;
			s.total_in_flight--;
		}
		s.ready[best_r] = s.ready[--s.n_ready];
		seq[done] = best;
		for (int q = 0; q < bn->n_operands; q++) {
			int o = g->operands[bn->first_operand + q];
			if (!s.live[o]) {
				s.live[o] = true;
				s.usage += g->nodes[o].out_bytes;
			}
			if (--s.outdeg[o] > 0)
				continue;
			double rt = s.now;
			for (int u = s.ufirst[o]; u < s.ufirst[o + 1]; u++) {
				int ui = s.ulist[u];
				double e = s.sched_time[ui] + (g->nodes[ui].kind == LN_DONE ? g->nodes[ui].latency : 0);
				if (e > rt)
					rt = e;
			}
			s.ready_time[o] = rt;
			make_ready(&s, o);
		}
	}
	for (int i = 0; i < n; i++)
		order[i] = seq[n - 1 - i];
	ok = true;
out:
	free(s.ufirst);
	free(s.ulist);
	free(s.outdeg);
	free(s.live);
	free(s.done_);
	free(s.pending);
	free(s.ready_time);
	free(s.sched_time);
	free(s.depth);
	free(s.ready);
	free(seq);
	return ok;
}
