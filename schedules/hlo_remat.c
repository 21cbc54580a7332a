/*
 * XLA's rematerialization pass as the GPU compiler runs it after scheduling
 * (schedules/sched_internal.h, rm__hlo_remat): RematerializeComputation, MemoryUsageTracker,
 * PickRematerializationCandidates and RematerializeInstructions of
 * xla/service/hlo_rematerialization.cc (openxla/xla), with a block size of one instruction.
 * Memory follows MemoryUsageTracker: BeginInstruction allocates an instruction's outputs,
 * EndInstruction frees the buffers whose last reader it was (and outputs nobody reads).
 */
#include <stdlib.h>
#include <string.h>

#include "schedules/sched_internal.h"

void rm__rseq_init(rm__rseq *s, int n)
{
	memset(s, 0, sizeof(*s));
	s->n = n;
	s->other = rm_new(int64_t, (size_t)n + 1);
	s->flops = rm_new(double, (size_t)n + 1);
}

void rm__rseq_finish(rm__rseq *s)
{
	if (!s)
		return;
	free(s->other);
	free(s->flops);
	free(s->bufs);
	free(s->use_item);
	free(s->use_buf);
	memset(s, 0, sizeof(*s));
}

int rm__rseq_add_buf(rm__rseq *s, int def, int64_t bytes, bool remat)
{
	if (s->nb == s->bcap) {
		s->bcap = s->bcap ? 2 * s->bcap : 64;
		s->bufs = rm_xrealloc(s->bufs, (size_t)s->bcap * sizeof(rm__rbuf));
	}
	s->bufs[s->nb] = (rm__rbuf){bytes, def, remat};
	return s->nb++;
}

void rm__rseq_add_use(rm__rseq *s, int item, int buf)
{
	for (int i = s->nu - 1; i >= 0 && i >= s->nu - 16; i--)
		if (s->use_item[i] == item && s->use_buf[i] == buf)
			return;
	if (s->nu == s->ucap) {
		s->ucap = s->ucap ? 2 * s->ucap : 128;
		s->use_item = rm_xrealloc(s->use_item, (size_t)s->ucap * sizeof(int));
		s->use_buf = rm_xrealloc(s->use_buf, (size_t)s->ucap * sizeof(int));
	}
	s->use_item[s->nu] = item;
	s->use_buf[s->nu] = buf;
	s->nu++;
}

/* ---- the pass's working state ---------------------------------------------------------------- */

typedef struct ilist {
	int *v;
	int n, cap;
} ilist;

static void il_push(ilist *l, int x)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 4;
		l->v = rm_xrealloc(l->v, (size_t)l->cap * sizeof(int));
	}
	l->v[l->n++] = x;
}

static bool il_has(const ilist *l, int x)
{
	for (int i = 0; i < l->n; i++)
		if (l->v[i] == x)
			return true;
	return false;
}

typedef struct ritem {
	int src;    /* the original instruction it is (a clone: that of its original) */
	int64_t other;
	double flops;
	bool placed;
	bool denylisted;
	bool move;  /* a clone that made its original dead (remat_move_instructions) */
	bool dead;  /* moved: no reader left, HloDCE removes it after the pass */
	ilist defs; /* buffers it defines */
	ilist uses; /* buffers it reads */
} ritem;

typedef struct rbuf {
	int64_t bytes;
	int def;
	bool remat;
	ilist users;    /* instructions reading it */
	int unfinished; /* readers not yet finished (Buffer::unfinished_user_count) */
} rbuf;

typedef struct rstate {
	ritem *it;
	int n_it, it_cap;
	rbuf *b;
	int nb, b_cap;
	int *order, *pos; /* program order of the instructions, and each one's place in it */
	int n_order;
	int current;      /* the instruction in progress, or -1 */
	int64_t usage;    /* bytes of live buffers (MemoryUsageTracker::memory_usage) */
	/* the finished instructions that define a live buffer, in program order: the only ones
	 * whose rematerialization can reduce memory (memory_reduced), so pick_candidate scans
	 * these instead of the whole sequence before the current instruction (the same pick, in
	 * the same order); in_cand[i] marks them */
	int *cand, n_cand, cand_cap;
	bool *in_cand;
	bool track;       /* the list is kept (the rematerializing walk) */
} rstate;

static int new_item(rstate *st)
{
	if (st->n_it == st->it_cap) {
		st->it_cap = st->it_cap ? 2 * st->it_cap : 64;
		st->it = rm_xrealloc(st->it, (size_t)st->it_cap * sizeof(ritem));
		st->pos = rm_xrealloc(st->pos, (size_t)st->it_cap * sizeof(int));
		st->order = rm_xrealloc(st->order, (size_t)st->it_cap * sizeof(int));
		st->in_cand = rm_xrealloc(st->in_cand, (size_t)st->it_cap * sizeof(bool));
	}
	st->in_cand[st->n_it] = false;
	memset(&st->it[st->n_it], 0, sizeof(ritem));
	return st->n_it++;
}

static int new_buf(rstate *st, int def, int64_t bytes, bool remat)
{
	if (st->nb == st->b_cap) {
		st->b_cap = st->b_cap ? 2 * st->b_cap : 64;
		st->b = rm_xrealloc(st->b, (size_t)st->b_cap * sizeof(rbuf));
	}
	memset(&st->b[st->nb], 0, sizeof(rbuf));
	st->b[st->nb].bytes = bytes;
	st->b[st->nb].def = def;
	st->b[st->nb].remat = remat;
	return st->nb++;
}

static void state_init(rstate *st, const rm__rseq *s)
{
	memset(st, 0, sizeof(*st));
	st->current = -1;
	for (int i = 0; i < s->n; i++) {
		int k = new_item(st);
		st->it[k].src = i;
		st->it[k].other = s->other[i];
		st->it[k].flops = s->flops[i];
		st->order[st->n_order] = k;
		st->pos[k] = st->n_order++;
	}
	for (int b = 0; b < s->nb; b++) {
		int k = new_buf(st, s->bufs[b].def, s->bufs[b].bytes, s->bufs[b].remat);
		il_push(&st->it[s->bufs[b].def].defs, k);
	}
	for (int u = 0; u < s->nu; u++) {
		int i = s->use_item[u], b = s->use_buf[u];
		if (i <= st->b[b].def || il_has(&st->it[i].uses, b))
			continue; /* a reader before its definer is no reader */
		il_push(&st->it[i].uses, b);
		il_push(&st->b[b].users, i);
		st->b[b].unfinished++;
	}
}

static void state_finish(rstate *st)
{
	for (int i = 0; i < st->n_it; i++) {
		free(st->it[i].defs.v);
		free(st->it[i].uses.v);
	}
	for (int b = 0; b < st->nb; b++)
		free(st->b[b].users.v);
	free(st->it);
	free(st->b);
	free(st->order);
	free(st->pos);
	free(st->cand);
	free(st->in_cand);
}

static bool live(const rstate *st, int b)
{
	return st->it[st->b[b].def].placed && st->b[b].unfinished > 0;
}

static bool finished(const rstate *st, int i)
{
	return st->it[i].placed && i != st->current;
}

static bool defines_live(const rstate *st, int i)
{
	for (int d = 0; d < st->it[i].defs.n; d++)
		if (live(st, st->it[i].defs.v[d]))
			return true;
	return false;
}

/* Puts instruction i in the candidate list or takes it out, as it now is. */
static void cand_refresh(rstate *st, int i)
{
	if (!st->track)
		return;
	bool want = finished(st, i) && defines_live(st, i);
	if (want == st->in_cand[i])
		return;
	/* the first place whose instruction comes after i in program order */
	int lo = 0, hi = st->n_cand;
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (st->pos[st->cand[mid]] < st->pos[i])
			lo = mid + 1;
		else
			hi = mid;
	}
	if (want) {
		if (st->n_cand == st->cand_cap) {
			st->cand_cap = st->cand_cap ? 2 * st->cand_cap : 64;
			st->cand = rm_xrealloc(st->cand, (size_t)st->cand_cap * sizeof(int));
		}
		memmove(&st->cand[lo + 1], &st->cand[lo], (size_t)(st->n_cand - lo) * sizeof(int));
		st->cand[lo] = i;
		st->n_cand++;
	} else {
		memmove(&st->cand[lo], &st->cand[lo + 1], (size_t)(st->n_cand - lo - 1) * sizeof(int));
		st->n_cand--;
	}
	st->in_cand[i] = want;
}

static void begin_instruction(rstate *st, int i)
{
	st->current = i;
	st->it[i].placed = true;
	for (int d = 0; d < st->it[i].defs.n; d++)
		st->usage += st->b[st->it[i].defs.v[d]].bytes;
}

static void end_instruction(rstate *st)
{
	int cur = st->current;
	ritem *it = &st->it[cur];
	for (int u = 0; u < it->uses.n; u++) {
		rbuf *b = &st->b[it->uses.v[u]];
		if (--b->unfinished == 0) {
			st->usage -= b->bytes;
			cand_refresh(st, b->def);
		}
	}
	for (int d = 0; d < it->defs.n; d++)
		if (st->b[it->defs.v[d]].unfinished == 0)
			st->usage -= st->b[it->defs.v[d]].bytes;
	st->current = -1;
	cand_refresh(st, cur);
}

/* MemoryReducedIfRematerialized for a block of one instruction; 0 when it is no candidate. */
static int64_t memory_reduced(const rstate *st, int i)
{
	const ritem *it = &st->it[i];
	const ritem *cur = &st->it[st->current];
	int64_t reduced = 0;
	for (int d = 0; d < it->defs.n; d++) {
		int b = it->defs.v[d];
		if (il_has(&cur->uses, b))
			return 0; /* IsInUse: the current instruction reads it */
		if (live(st, b))
			reduced += st->b[b].bytes;
	}
	for (int u = 0; u < it->uses.n; u++)
		if (!live(st, it->uses.v[u]))
			reduced -= st->b[it->uses.v[u]].bytes; /* its live range would be extended */
	return reduced;
}

static bool rematerializable(const rstate *st, int i)
{
	const ritem *it = &st->it[i];
	if (it->denylisted || it->defs.n == 0 || !finished(st, i))
		return false;
	for (int d = 0; d < it->defs.n; d++)
		if (!st->b[it->defs.v[d]].remat)
			return false;
	return true;
}

/* PickRematerializationCandidates with min = max block size 1: the lowest-cost instruction in
 * program order, or -1. */
static int pick_candidate(const rstate *st, int64_t limit)
{
	int best = -1;
	int64_t best_cost = INT64_MAX;
	/* the whole sequence before the in-progress instruction, where GetInitialBlock stops, less
	 * what defines no live buffer (memory_reduced <= 0 there) */
	for (int q = 0; q < st->n_cand; q++) {
		int i = st->cand[q];
		if (!rematerializable(st, i))
			continue;
		int64_t reduced = memory_reduced(st, i);
		if (reduced <= 0)
			continue;
		bool zero_cost_move = true;
		const ritem *it = &st->it[i];
		for (int d = 0; d < it->defs.n && zero_cost_move; d++) {
			const rbuf *b = &st->b[it->defs.v[d]];
			for (int r = 0; r < b->users.n; r++)
				if (st->it[b->users.v[r]].placed) {
					zero_cost_move = false;
					break;
				}
		}
		int64_t cost = zero_cost_move ? 0 : limit / reduced;
		if (cost < best_cost) {
			best_cost = cost;
			best = i;
		}
	}
	return best;
}

static void insert_before(rstate *st, int item, int before)
{
	int p = st->pos[before];
	memmove(&st->order[p + 1], &st->order[p], (size_t)(st->n_order - p) * sizeof(int));
	st->order[p] = item;
	st->n_order++;
	for (int q = p; q < st->n_order; q++)
		st->pos[st->order[q]] = q;
}

/* RematerializeInstructions for one instruction: the clone takes over the readers still to run. */
static void rematerialize(rstate *st, int best, rm__remat_result *r)
{
	int c = new_item(st);
	ritem *orig = &st->it[best], *cl = &st->it[c];
	cl->flops = orig->flops;
	cl->src = orig->src;
	/* the clone reads the original's operands: a dead one is live again */
	for (int u = 0; u < orig->uses.n; u++) {
		int ob = orig->uses.v[u];
		rbuf *b = &st->b[ob];
		if (b->unfinished == 0)
			st->usage += b->bytes;
		b->unfinished++;
		il_push(&b->users, c);
		il_push(&cl->uses, ob);
		cand_refresh(st, b->def);
		orig = &st->it[best];
		cl = &st->it[c];
	}
	int64_t bytes = 0;
	bool dead = true; /* the original keeps no reader: the rematerialization is a move */
	for (int d = 0; d < orig->defs.n; d++) {
		int ob = orig->defs.v[d];
		int nbuf = new_buf(st, c, st->b[ob].bytes, st->b[ob].remat);
		orig = &st->it[best];
		cl = &st->it[c];
		il_push(&cl->defs, nbuf);
		rbuf *old = &st->b[ob], *nw = &st->b[nbuf];
		bytes += nw->bytes;
		int keep = 0;
		for (int k = 0; k < old->users.n; k++) {
			int ui = old->users.v[k];
			if (st->it[ui].placed) {
				old->users.v[keep++] = ui;
				continue;
			}
			il_push(&nw->users, ui);
			nw->unfinished++;
			ilist *uses = &st->it[ui].uses;
			for (int q = 0; q < uses->n; q++)
				if (uses->v[q] == ob)
					uses->v[q] = nbuf;
		}
		old->users.n = keep;
		if (keep > 0)
			dead = false;
		if (live(st, ob))
			st->usage -= old->bytes;
		old->unfinished = 0;
	}
	/* before the first reader still to run of the clone or of its operands */
	int before = -1;
	for (int d = 0; d < cl->defs.n; d++) {
		const rbuf *b = &st->b[cl->defs.v[d]];
		for (int k = 0; k < b->users.n; k++)
			if (before < 0 || st->pos[b->users.v[k]] < st->pos[before])
				before = b->users.v[k];
	}
	for (int u = 0; u < cl->uses.n; u++) {
		const rbuf *b = &st->b[cl->uses.v[u]];
		for (int k = 0; k < b->users.n; k++) {
			int ui = b->users.v[k];
			if (ui != c && !st->it[ui].placed && (before < 0 || st->pos[ui] < st->pos[before]))
				before = ui;
		}
	}
	cand_refresh(st, best); /* its buffers passed to the clone */
	cl = &st->it[c];
	cl->other = st->it[before].other;
	insert_before(st, c, before);
	if (dead) {
		if (st->it[best].move)
			st->it[c].denylisted = true; /* a move of a move: stop, or it would go on forever */
		st->it[c].move = true;
		st->it[best].dead = true;
		r->moved++;
	} else {
		r->recomputed++;
		r->recomputed_bytes += bytes;
		r->recomputed_flops += st->it[c].flops;
	}
}

/* Only an instruction that allocates triggers the pass: its own outputs, or (remora's buffers
 * outside the sequence's) more bytes outside than the instruction before. */
static bool allocates(const rstate *st, int p)
{
	int i = st->order[p];
	for (int d = 0; d < st->it[i].defs.n; d++)
		if (st->b[st->it[i].defs.v[d]].bytes > 0)
			return true;
	return p > 0 && st->it[i].other > st->it[st->order[p - 1]].other;
}

void rm__hlo_remat(int64_t limit, const rm__rseq *s, rm__remat_result *r)
{
	memset(r, 0, sizeof(*r));
	rstate st;
	/* ComputePeakMemory: the peak of the schedule as it is */
	state_init(&st, s);
	for (int p = 0; p < st.n_order; p++) {
		int i = st.order[p];
		begin_instruction(&st, i);
		if (st.usage + st.it[i].other > r->peak_before)
			r->peak_before = st.usage + st.it[i].other;
		end_instruction(&st);
	}
	state_finish(&st);
	r->peak_after = r->peak_before;
	if (r->peak_before <= limit)
		return; /* "already fits within the given memory limit" */
	state_init(&st, s);
	st.track = true;
	r->peak_after = 0;
	for (int p = 0; p < st.n_order; p++) {
		int i = st.order[p];
		begin_instruction(&st, i);
		if (allocates(&st, p))
			while (st.usage + st.it[i].other > limit) {
				int best = pick_candidate(&st, limit);
				if (best < 0)
					break;
				rematerialize(&st, best, r);
			}
		int64_t mem = st.usage + st.it[i].other;
		if (mem > r->peak_after)
			r->peak_after = mem;
		if (mem > limit)
			r->over = true;
		end_instruction(&st);
	}
	if (st.n_order > s->n) {
		/* the new sequence, without the moved instructions (HloDCE after the pass) */
		r->order_src = rm_new(int, (size_t)st.n_order);
		r->order_clone = rm_new(bool, (size_t)st.n_order);
		r->order_move = rm_new(bool, (size_t)st.n_order);
		for (int p = 0; p < st.n_order; p++) {
			const ritem *it = &st.it[st.order[p]];
			if (it->dead)
				continue;
			r->order_src[r->n_order] = it->src;
			r->order_clone[r->n_order] = st.order[p] >= s->n;
			r->order_move[r->n_order] = it->move;
			r->n_order++;
		}
	}
	state_finish(&st);
}

void rm__remat_result_finish(rm__remat_result *r)
{
	if (!r)
		return;
	free(r->order_src);
	free(r->order_clone);
	free(r->order_move);
	r->order_src = NULL;
	r->order_clone = NULL;
	r->order_move = NULL;
	r->n_order = 0;
}
