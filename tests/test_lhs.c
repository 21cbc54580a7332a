/*
 * The latency-hiding sweep (schedules/lhs.c) on hand-built computations of a few slots, one
 * ReadySetLt memory rule at a time (xla/service/latency_hiding_scheduler.cc). Every slot costs
 * 1000 units and an all-gather's latency is 5000 (XLA's default units), so an unhindered window
 * covers five slots. Positions: p is just before slot p; the sweep runs from the end.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "schedules/sched_internal.h"

#define N 10
#define LIMIT 100

typedef struct tiny {
	comp c;
	slot slots[N];
	int64_t temps[N + 1];
	coll colls[4];
} tiny;

static void tiny_init(tiny *t, int64_t baseline)
{
	memset(t, 0, sizeof(*t));
	for (int j = 0; j < N; j++)
		t->slots[j] = (slot){.kind = SLOT_OP, .units = 1000};
	t->c.slots = t->slots;
	t->c.n = N;
	t->c.temps = t->temps;
	t->c.colls = t->colls;
	t->c.baseline = baseline;
}

static coll *tiny_coll(tiny *t, ckind kind, int deadline, int64_t mem_bytes)
{
	coll *k = &t->colls[t->c.nc++];
	*k = (coll){.kind = kind, .mem_bytes = mem_bytes, .s_min = 0, .deadline = deadline, .latency = 5000,
		    .start_pos = -1, .done_pos = -1};
	return k;
}

static void sweep(tiny *t, int overlap_limit)
{
	rm__lhs_params p = {.limit = LIMIT, .enabled = true, .overlap_limit = overlap_limit};
	rm__lhs_sweep(&p, &t->c);
}

Test(lhs, below_half_the_limit_overlap_wins)
{
	/* tracked 40 <= 50: ReadySetLt computes no memory change and the window opens; with its
	 * buffer usage is 90, above half but within the limit, and no rule closes it: it covers
	 * its latency, five slots */
	tiny t;
	tiny_init(&t, 40);
	coll *ag = tiny_coll(&t, CK_AG, 8, 50);
	sweep(&t, 1);
	cr_assert_not(ag->sync);
	cr_assert_eq(ag->done_pos, 8);
	cr_assert_eq(ag->start_pos, 3);
	cr_assert_eq(t.c.first_memory_sync_tracked, -1);
	cr_assert_eq(t.c.tracked_peak, 90);
	/* a buffer that takes usage from 40 to 110: once its consumer holds it, usage is at the
	 * limit and kDecreaseMemoryOverLimit puts the freeing start right after the done */
	tiny u;
	tiny_init(&u, 40);
	coll *big = tiny_coll(&u, CK_AG, 8, 70);
	sweep(&u, 1);
	cr_assert(big->sync);
	cr_assert_eq(big->reason, RM_SYNC_DECREASE_MEMORY_OVER_LIMIT);
	cr_assert_eq(u.c.tracked_peak, 110, "the limit is a preference: %lld", (long long)u.c.tracked_peak);
}

Test(lhs, above_half_a_window_that_would_pass_the_limit_stays_closed_and_others_open)
{
	/* tracked 60 > 50: the all-gather (60 + 30 = 90) opens; the all-reduce would take usage to
	 * 90 + 50 = 140 > 100: kMemoryPeakOverLimit, synchronous at its deadline */
	tiny t;
	tiny_init(&t, 60);
	coll *ag = tiny_coll(&t, CK_AG, 8, 30);
	coll *ar = tiny_coll(&t, CK_AR, 8, 50);
	sweep(&t, 2);
	cr_assert_not(ag->sync);
	cr_assert_eq(ag->start_pos, 3);
	cr_assert(ar->sync);
	cr_assert_eq(ar->reason, RM_SYNC_MEMORY_PEAK_OVER_LIMIT);
	cr_assert_eq(ar->start_pos, 8);
	cr_assert_eq(ar->done_pos, 8);
	cr_assert_eq(ar->sync_tracked, 90);
	cr_assert_eq(t.c.first_memory_sync_tracked, 90);
}

Test(lhs, above_half_an_open_window_closes_before_a_compute_peak_past_the_limit)
{
	/* the all-gather opens at 8 (60 + 30 = 90); slot 5 holds 20 bytes of temporaries, so
	 * scheduling it with the window open would peak at 110: the start goes first, at 6 */
	tiny t;
	tiny_init(&t, 60);
	t.temps[5] = 20;
	coll *ag = tiny_coll(&t, CK_AG, 8, 30);
	sweep(&t, 1);
	cr_assert_not(ag->sync, "two slots overlapped");
	cr_assert_eq(ag->done_pos, 8);
	cr_assert_eq(ag->start_pos, 6);
	cr_assert_eq(t.c.first_memory_sync_tracked, 90);
	/* with 9 bytes there the peak is 99: it stays open and covers its five slots */
	tiny u;
	tiny_init(&u, 60);
	u.temps[5] = 9;
	coll *ag2 = tiny_coll(&u, CK_AG, 8, 30);
	sweep(&u, 1);
	cr_assert_eq(ag2->start_pos, 3);
}

Test(lhs, the_largest_buffer_closes_first)
{
	/* both open below half (20 -> 50 -> 90); slot 7's 15 bytes would peak at 105: the start
	 * that frees the most (the all-reduce's 40) goes first, at 8; then usage is 50, not above
	 * half, and the all-gather keeps its five slots */
	tiny t;
	tiny_init(&t, 20);
	t.temps[7] = 15;
	coll *ag = tiny_coll(&t, CK_AG, 9, 30);
	coll *ar = tiny_coll(&t, CK_AR, 9, 40);
	sweep(&t, 2);
	cr_assert_eq(ar->start_pos, 8);
	cr_assert_not(ar->sync);
	cr_assert_eq(ag->start_pos, 4);
	cr_assert_not(ag->sync);
}

Test(lhs, at_the_limit_the_freeing_candidate_wins)
{
	/* tracked 100 >= 100: kDecreaseMemoryOverLimit takes the start that frees the gathered
	 * buffer right after its done: synchronous, whatever the buffer's size */
	tiny t;
	tiny_init(&t, 100);
	coll *ag = tiny_coll(&t, CK_AG, 8, 1);
	sweep(&t, 1);
	cr_assert(ag->sync);
	cr_assert_eq(ag->reason, RM_SYNC_DECREASE_MEMORY_OVER_LIMIT);
	cr_assert_eq(ag->start_pos, 8);
	cr_assert_eq(ag->sync_tracked, 100);
	/* two bytes lower the window keeps usage within the limit: 98 + 1 = 99 stays open */
	tiny u;
	tiny_init(&u, 98);
	coll *ag2 = tiny_coll(&u, CK_AG, 8, 1);
	sweep(&u, 1);
	cr_assert_not(ag2->sync);
	cr_assert_eq(ag2->start_pos, 3);
}

Test(lhs, memory_reaching_the_limit_inside_a_window_closes_it_there)
{
	/* the window opens at 9 (30 + 30 = 60: above half, within the limit); from position 7 down
	 * the computation holds 45 more, 105 with the window open: the peak rule closes it at 8 */
	tiny t;
	tiny_init(&t, 30);
	for (int j = 0; j <= 7; j++)
		t.temps[j] = 45;
	coll *ag = tiny_coll(&t, CK_AG, 9, 30);
	sweep(&t, 1);
	cr_assert_eq(ag->start_pos, 8);
	cr_assert_not(ag->sync);
	/* open, the peak would have been 30 + 45 + 30 = 105; closed, it is 30 + 45 = 75 */
	cr_assert_eq(t.c.tracked_peak, 75);
}

Test(lhs, disabled_kinds_and_no_lhs_are_synchronous_at_their_deadline)
{
	tiny t;
	tiny_init(&t, 0);
	coll *ag = tiny_coll(&t, CK_AG, 8, 10);
	coll *rs = tiny_coll(&t, CK_RS, 6, 0);
	rm__lhs_params p = {.limit = LIMIT, .enabled = true, .overlap_limit = 1};
	p.async_disabled[CK_RS] = true;
	rm__lhs_sweep(&p, &t.c);
	cr_assert_not(ag->sync);
	cr_assert(rs->sync);
	cr_assert_eq(rs->reason, RM_SYNC_DISABLED);
	cr_assert_eq(rs->start_pos, 6);
	tiny u;
	tiny_init(&u, 0);
	coll *ag2 = tiny_coll(&u, CK_AG, 8, 10);
	p.enabled = false;
	rm__lhs_sweep(&p, &u.c);
	cr_assert_eq(ag2->reason, RM_SYNC_NO_LHS);
}

Test(lhs, a_loop_with_collectives_holds_the_resource)
{
	/* slot 4 is a while loop whose body runs collectives: a window that would rise past it
	 * (five slots from 8 reach 3) closes right below it, at 5; one whose done sits right below
	 * the loop has nothing to overlap there: synchronous, the resource taken */
	tiny t;
	tiny_init(&t, 0);
	t.slots[4].occupies = true;
	coll *ag = tiny_coll(&t, CK_AG, 8, 10);
	coll *rs = tiny_coll(&t, CK_RS, 5, 0);
	sweep(&t, 2);
	cr_assert_eq(ag->done_pos, 8);
	cr_assert_eq(ag->start_pos, 5);
	cr_assert_not(ag->sync);
	cr_assert(rs->sync);
	cr_assert_eq(rs->start_pos, 5);
	cr_assert_eq(rs->reason, RM_SYNC_OVERLAP_LIMIT);
}
