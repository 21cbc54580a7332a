/*
 * XLA's rematerialization pass after scheduling (schedules/hlo_remat.c) on hand-built sequences
 * of a few instructions, checked against a walk by hand of RematerializeComputation in
 * xla/service/hlo_rematerialization.cc: usage at an instruction is its outputs plus every buffer
 * defined before it with a reader at or after it; over the limit, the candidate with the lowest
 * limit / memory_reduced (0 for a move) is cloned before its first reader still to run.
 */
#include <criterion/criterion.h>

#include "schedules/sched_internal.h"

/*
 * 0: A = fusion()        40 B, read by 1 and 4 (recomputable)
 * 1: B = gemm(A)         50 B, read by 2
 * 2: C = gemm(B)         30 B, read by 3
 * 3: D = gemm(C)         50 B, read by 4
 * 4: E = gemm(D, A)      10 B
 * Usage: 40, 90, 120 (A B C), 120 (A C D), 100 (A D E): peak 120.
 */
static void chain(rm__rseq *s, int64_t other)
{
	rm__rseq_init(s, 5);
	for (int i = 0; i < 5; i++)
		s->other[i] = other;
	int a = rm__rseq_add_buf(s, 0, 40, true);
	int b = rm__rseq_add_buf(s, 1, 50, false);
	int c = rm__rseq_add_buf(s, 2, 30, false);
	int d = rm__rseq_add_buf(s, 3, 50, false);
	rm__rseq_add_buf(s, 4, 10, false);
	rm__rseq_add_use(s, 1, a);
	rm__rseq_add_use(s, 2, b);
	rm__rseq_add_use(s, 3, c);
	rm__rseq_add_use(s, 4, d);
	rm__rseq_add_use(s, 4, a);
	s->flops[0] = 7;
}

/* Limit 100: at 2 usage is 120; A (read by 1, which ran) frees 40 at cost 100 / 40 and is
 * cloned before 4; then 80 at 2, 30 + 50 at 3, 50 + 40 at the clone, 90 + 10 at 4. */
Test(hlo_remat, over_the_limit_recomputes_and_gets_under)
{
	rm__rseq s;
	chain(&s, 0);
	rm__remat_result r;
	rm__hlo_remat(100, &s, &r);
	cr_assert_eq(r.peak_before, 120);
	cr_assert_eq(r.recomputed, 1);
	cr_assert_eq(r.moved, 0);
	cr_assert_eq(r.recomputed_bytes, 40);
	cr_assert_float_eq(r.recomputed_flops, 7.0, 1e-12);
	cr_assert_eq(r.peak_after, 100);
	cr_assert(!r.over);
	static const int src[] = {0, 1, 2, 3, 0, 4};
	static const bool clone[] = {false, false, false, false, true, false};
	cr_assert_eq(r.n_order, 6);
	for (int p = 0; p < 6; p++) {
		cr_assert_eq(r.order_src[p], src[p], "position %d", p);
		cr_assert_eq(r.order_clone[p], clone[p], "position %d", p);
		cr_assert(!r.order_move[p]);
	}
	rm__remat_result_finish(&r);
	rm__rseq_finish(&s);
}

/* Limit 120: the peak is at the limit, not over it: "already fits", nothing changes. */
Test(hlo_remat, at_or_under_the_limit_changes_nothing)
{
	rm__rseq s;
	chain(&s, 0);
	rm__remat_result r;
	rm__hlo_remat(120, &s, &r);
	cr_assert_eq(r.peak_before, 120);
	cr_assert_eq(r.peak_after, 120);
	cr_assert_eq(r.recomputed + r.moved, 0);
	cr_assert_null(r.order_src);
	cr_assert(!r.over);
	rm__remat_result_finish(&r);
	rm__rseq_finish(&s);
}

/* 100 B outside the buffers everywhere: at 2 the pass recomputes A (80 + 100 still over), then
 * has nothing left (the clone is in progress at its own point, 4 reads it): XLA's "Can't reduce
 * memory use below" case. Peak after: the clone, 100 + 50 (D) + 40. */
Test(hlo_remat, fixed_memory_over_the_limit_stays_over)
{
	rm__rseq s;
	chain(&s, 100);
	rm__remat_result r;
	rm__hlo_remat(100, &s, &r);
	cr_assert_eq(r.peak_before, 220);
	cr_assert_eq(r.recomputed, 1);
	cr_assert(r.over);
	cr_assert_eq(r.peak_after, 200);
	rm__remat_result_finish(&r);
	rm__rseq_finish(&s);
}

/* A value none of whose readers has run costs 0 to rematerialize: it moves down to its reader
 * and the original goes (HloDCE). 0: A 40 B (recomputable) read by 3; 1: B 70 B read by 2;
 * 2: C 10 B read by 3. At 1 usage 110 > 100: A moves before 3; 70, 80, then 40 + 10 + 0 at the
 * clone and at 3. */
Test(hlo_remat, a_value_not_read_yet_moves_for_free)
{
	rm__rseq s;
	rm__rseq_init(&s, 4);
	int a = rm__rseq_add_buf(&s, 0, 40, true);
	int b = rm__rseq_add_buf(&s, 1, 70, false);
	int c = rm__rseq_add_buf(&s, 2, 10, false);
	rm__rseq_add_use(&s, 2, b);
	rm__rseq_add_use(&s, 3, a);
	rm__rseq_add_use(&s, 3, c);
	rm__remat_result r;
	rm__hlo_remat(100, &s, &r);
	cr_assert_eq(r.peak_before, 120);
	cr_assert_eq(r.moved, 1);
	cr_assert_eq(r.recomputed, 0);
	cr_assert_eq(r.recomputed_bytes, 0);
	cr_assert_eq(r.peak_after, 80);
	static const int src[] = {1, 2, 0, 3};
	cr_assert_eq(r.n_order, 4);
	for (int p = 0; p < 4; p++)
		cr_assert_eq(r.order_src[p], src[p], "position %d", p);
	cr_assert(r.order_clone[2] && r.order_move[2]);
	rm__remat_result_finish(&r);
	rm__rseq_finish(&s);
}

/*
 * The cost order, and an operand's live range. 0: P 30 B (a GEMM) read by 1; 1: A = fusion(P)
 * 40 B read by 2 and 7; 2: F = fusion(A) 20 B read by 3 and 6; 3 reads F; 4: G 50 B (a GEMM)
 * read by 5; 5 reads G; 6 reads F; 7 reads A. At 4 usage is 110 (A F G): A would free 40 but
 * bring P back from the dead, 10 net, cost 100 / 10 = 10; F frees 20 (A, its operand, is live),
 * cost 5: F goes although A is earlier (without P's 30 A would cost 2 and win), cloned before 6,
 * the first of F's and A's readers still to run. Then 90 at 4 and 5, 40 + 20 at the clone and
 * at 6, 40 at 7.
 */
Test(hlo_remat, lowest_cost_first_and_dead_operands_count_against)
{
	rm__rseq s;
	rm__rseq_init(&s, 8);
	int p = rm__rseq_add_buf(&s, 0, 30, false);
	int a = rm__rseq_add_buf(&s, 1, 40, true);
	int f = rm__rseq_add_buf(&s, 2, 20, true);
	int g = rm__rseq_add_buf(&s, 4, 50, false);
	rm__rseq_add_use(&s, 1, p);
	rm__rseq_add_use(&s, 2, a);
	rm__rseq_add_use(&s, 3, f);
	rm__rseq_add_use(&s, 5, g);
	rm__rseq_add_use(&s, 6, f);
	rm__rseq_add_use(&s, 7, a);
	rm__remat_result r;
	rm__hlo_remat(100, &s, &r);
	cr_assert_eq(r.peak_before, 110);
	cr_assert_eq(r.recomputed, 1);
	cr_assert_eq(r.recomputed_bytes, 20);
	cr_assert_eq(r.peak_after, 90);
	cr_assert(!r.over);
	static const int src[] = {0, 1, 2, 3, 4, 5, 2, 6, 7};
	cr_assert_eq(r.n_order, 9);
	for (int q = 0; q < 9; q++) {
		cr_assert_eq(r.order_src[q], src[q], "position %d", q);
		cr_assert_eq(r.order_clone[q], q == 6, "position %d", q);
	}
	rm__remat_result_finish(&r);
	rm__rseq_finish(&s);
}

/* What a GEMM or a custom call defines is never a candidate: over the limit with only those
 * live, nothing changes but the warning. */
Test(hlo_remat, custom_calls_are_not_candidates)
{
	rm__rseq s;
	rm__rseq_init(&s, 3);
	int a = rm__rseq_add_buf(&s, 0, 80, false);
	rm__rseq_add_buf(&s, 1, 40, false);
	rm__rseq_add_use(&s, 2, a);
	rm__remat_result r;
	rm__hlo_remat(100, &s, &r);
	cr_assert_eq(r.peak_before, 120);
	cr_assert_eq(r.peak_after, 120);
	cr_assert_eq(r.recomputed + r.moved, 0);
	cr_assert(r.over);
	cr_assert_null(r.order_src);
	rm__remat_result_finish(&r);
	rm__rseq_finish(&s);
}
