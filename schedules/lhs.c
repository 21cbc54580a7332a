/*
 * The bottom-up latency-hiding sweep (schedules/sched_internal.h): where XLA's latency-hiding
 * scheduler puts each collective's start and done inside a computation whose compute order is
 * fixed. The memory rules follow ReadySetLt in xla/service/latency_hiding_scheduler.cc.
 */
#include <stdlib.h>
#include <string.h>

#include "schedules/sched_internal.h"

static void close_window(coll *k, int pos, rm_sync_reason why, int64_t tracked)
{
	k->start_pos = pos;
	if (k->start_pos == k->done_pos) {
		k->sync = true;
		k->reason = why;
		k->sync_tracked = why == RM_SYNC_NOTHING_TO_OVERLAP || why == RM_SYNC_OVERLAP_LIMIT ? 0 : tracked;
	}
}

static void note_memory_rule(comp *c, int64_t tracked)
{
	if (c->first_memory_sync_tracked < 0)
		c->first_memory_sync_tracked = tracked;
}

/* The open window with the largest buffer (the start that frees the most), lowest index on ties. */
static int largest_open(const comp *c, const int *open, int n_open)
{
	int best = 0;
	for (int o = 1; o < n_open; o++) {
		const coll *a = &c->colls[open[o]], *b = &c->colls[open[best]];
		if (a->mem_bytes > b->mem_bytes || (a->mem_bytes == b->mem_bytes && open[o] < open[best]))
			best = o;
	}
	return best;
}

void rm__lhs_sweep(const rm__lhs_params *p, comp *c)
{
	int limit_open = p->overlap_limit > 0 ? p->overlap_limit : 1;
	int64_t limit = p->limit, half = p->limit / 2;
	int *open = rm_new(int, (size_t)c->nc + 1);
	double *covered = rm_new(double, (size_t)c->nc + 1);
	int n_open = 0;
	c->first_memory_sync_tracked = -1;
	/* collectives that never go async */
	for (int i = 0; i < c->nc; i++) {
		coll *k = &c->colls[i];
		rm_sync_reason r = RM_SYNC_NONE;
		if (p->async_disabled[k->kind])
			r = RM_SYNC_DISABLED;
		else if (!p->enabled)
			r = RM_SYNC_NO_LHS;
		if (r != RM_SYNC_NONE) {
			k->sync = true;
			k->reason = r;
			k->start_pos = k->done_pos = k->deadline;
		}
	}
	/* collectives by deadline (counting sort), and the ready list kept in index order so the
	 * choice among ready dones does not depend on when they became ready */
	int *first = rm_new(int, (size_t)c->n + 2), *by_deadline = rm_new(int, (size_t)c->nc + 1);
	int *readyl = rm_new(int, (size_t)c->nc + 1);
	int n_ready = 0;
	for (int i = 0; i < c->nc; i++)
		first[c->colls[i].deadline + 1]++;
	for (int j = 0; j <= c->n; j++)
		first[j + 1] += first[j];
	{
		int *fill = rm_new(int, (size_t)c->n + 1);
		for (int i = 0; i < c->nc; i++) {
			int d = c->colls[i].deadline;
			by_deadline[first[d] + fill[d]++] = i;
		}
		free(fill);
	}
	for (int j = c->n; j >= 0; j--) {
		for (int q = first[j]; q < first[j + 1]; q++) {
			int i = by_deadline[q];
			if (c->colls[i].sync)
				continue;
			int at = n_ready;
			while (at > 0 && readyl[at - 1] > i)
				at--;
			memmove(&readyl[at + 1], &readyl[at], (size_t)(n_ready - at) * sizeof(int));
			readyl[at] = i;
			n_ready++;
		}
		bool changed = true;
		while (changed) {
			changed = false;
			int64_t open_mem = 0;
			for (int o = 0; o < n_open; o++)
				open_mem += c->colls[open[o]].mem_bytes;
			int64_t mem = c->baseline + c->temps[j] + open_mem;
			if (mem > c->tracked_peak)
				c->tracked_peak = mem;
			/* ReadySetLt computes memory changes only above half the limit */
			bool tracking = mem > half, over = mem >= limit;
			/* windows whose compute covers the latency, or that cannot rise further, close */
			for (int o = 0; o < n_open; o++) {
				coll *k = &c->colls[open[o]];
				if (k->s_min >= j || covered[open[o]] >= k->latency) {
					close_window(k, j, RM_SYNC_NOTHING_TO_OVERLAP, mem);
					open[o--] = open[--n_open];
					changed = true;
				}
			}
			if (changed)
				continue;
			if (tracking && n_open > 0) {
				/* at the limit kDecreaseMemoryOverLimit takes the start that frees the most;
				 * above half, kMemoryPeakOverLimit prefers a start to a compute slot whose
				 * peak would carry usage past the limit */
				int64_t next = j > 0 ? c->baseline + c->temps[j - 1] + open_mem : mem;
				if (over || next > limit) {
					int o = largest_open(c, open, n_open);
					note_memory_rule(c, mem);
					close_window(&c->colls[open[o]], j,
						     over ? RM_SYNC_DECREASE_MEMORY_OVER_LIMIT : RM_SYNC_MEMORY_PEAK_OVER_LIMIT,
						     mem);
					open[o] = open[--n_open];
					changed = true;
					continue;
				}
			}
			for (int r = 0; r < n_ready; r++) {
				int i = readyl[r];
				coll *k = &c->colls[i];
				bool busy = false;
				for (int o = 0; o < n_open; o++)
					busy |= c->colls[open[o]].kind == k->kind;
				if (busy || n_open >= limit_open)
					continue;
				memmove(&readyl[r], &readyl[r + 1], (size_t)(n_ready - r - 1) * sizeof(int));
				n_ready--;
				changed = true;
				k->done_pos = j;
				rm_sync_reason why = RM_SYNC_NONE;
				if (over)
					why = RM_SYNC_DECREASE_MEMORY_OVER_LIMIT; /* its start frees the buffer */
				else if (tracking && mem + k->mem_bytes > limit)
					why = RM_SYNC_MEMORY_PEAK_OVER_LIMIT;
				if (why != RM_SYNC_NONE) {
					note_memory_rule(c, mem);
					k->start_pos = j;
					k->sync = true;
					k->reason = why;
					k->sync_tracked = mem;
				} else if (k->s_min >= j) {
					k->start_pos = j;
					k->sync = true;
					k->reason = RM_SYNC_NOTHING_TO_OVERLAP;
				} else {
					open[n_open++] = i;
					covered[i] = 0;
				}
				break; /* re-evaluate memory before the next one */
			}
		}
		/* a done still waiting for a free slot cannot rise above its operands' producer:
		 * it runs right there, synchronously */
		for (int r = 0; r < n_ready; r++) {
			int i = readyl[r];
			coll *k = &c->colls[i];
			if (k->s_min < j)
				continue;
			memmove(&readyl[r], &readyl[r + 1], (size_t)(n_ready - r - 1) * sizeof(int));
			n_ready--;
			r--;
			k->start_pos = k->done_pos = j;
			k->sync = true;
			k->reason = RM_SYNC_OVERLAP_LIMIT;
		}
		if (j > 0 && c->slots[j - 1].occupies) {
			/* the loop above holds the collective resource: every window closes here */
			for (int o = 0; o < n_open; o++)
				close_window(&c->colls[open[o]], j, RM_SYNC_OVERLAP_LIMIT, 0);
			n_open = 0;
		}
		if (j > 0)
			for (int o = 0; o < n_open; o++)
				covered[open[o]] += c->slots[j - 1].units;
	}
	free(first);
	free(by_deadline);
	free(readyl);
	for (int i = 0; i < c->nc; i++)
		if (c->colls[i].done_pos < 0) {
			coll *k = &c->colls[i];
			k->start_pos = k->done_pos = 0;
			k->sync = true;
			k->reason = RM_SYNC_OVERLAP_LIMIT;
		}
	free(open);
	free(covered);
}

void rm__ideal_windows(comp *c)
{
	for (int i = 0; i < c->nc; i++) {
		coll *k = &c->colls[i];
		k->done_pos = k->deadline;
		k->start_pos = k->s_min < k->deadline ? k->s_min : k->deadline;
		k->sync = false;
		k->reason = RM_SYNC_NONE;
	}
	c->first_memory_sync_tracked = -1;
}
