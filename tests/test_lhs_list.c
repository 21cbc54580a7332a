/*
 * The list scheduler (schedules/lhs_list.c) on hand-built graphs of a few nodes, one ReadySetLt
 * rule at a time (xla/service/latency_hiding_scheduler.cc, AIsBetterThanB). The schedule is
 * built bottom-up: the node chosen first ends up last in program order. Compute costs 1000 units
 * and a collective's latency is 5000 (XLA's default estimator). Each expected order is traced by
 * hand in the comment above it.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "schedules/sched_internal.h"

static const rm__lhs_params no_limit = {.limit = 0, .enabled = true, .overlap_limit = 1};

static int compute(ln_graph *g, int64_t out_bytes)
{
	return rm__ln_add_node(g, LN_COMPUTE, -1, 1000, 0, out_bytes);
}

static void expect_order(const int *got, const int *want, int n)
{
	for (int i = 0; i < n; i++)
		cr_expect_eq(got[i], want[i], "position %d: node %d, expected %d", i, got[i], want[i]);
}

/* All else equal, kOriginalOrder keeps the program order: bottom-up the later node goes first. */
Test(lhs_list, ties_keep_the_original_order)
{
	ln_graph g = {0};
	int a = compute(&g, 10);
	int b = compute(&g, 10);
	compute(&g, 0);
	rm__ln_add_operand(&g, a);
	rm__ln_add_operand(&g, b);
	int order[3];
	ln_rule rule[3];
	cr_assert(rm__lhs_list(&no_limit, 0, &g, order, rule));
	expect_order(order, (int[]){0, 1, 2}, 3);
	cr_expect_eq(rule[1], LN_RULE_ORIGINAL_ORDER);
	cr_expect_eq(rule[2], LN_RULE_ONLY_READY);
	rm__ln_graph_finish(&g);
}

/*
 * 0 X (compute), 1 S (all-gather start), 2 D (done of S), 3 P (uses D), 4 Q (uses X), 5 R (P, Q).
 * Bottom-up: R; then P (async depth 5000) beats Q (0) by kAsyncDepth; D by kScheduleDone; S is
 * ready only 5000 units after D, so Q and then X go first by kLessStall; S last. Program order:
 * S X Q D P R: Q moved after the all-gather's consumer's producer, the start to the top.
 */
Test(lhs_list, async_depth_moves_compute_that_feeds_a_collective_later)
{
	ln_graph g = {0};
	int x = compute(&g, 10);
	int s = rm__ln_add_node(&g, LN_START, CK_AG, 0, 0, 40);
	int d = rm__ln_add_node(&g, LN_DONE, CK_AG, 0, 5000, 40);
	rm__ln_add_operand(&g, s);
	int p = compute(&g, 10);
	rm__ln_add_operand(&g, d);
	int q = compute(&g, 10);
	rm__ln_add_operand(&g, x);
	compute(&g, 0);
	rm__ln_add_operand(&g, p);
	rm__ln_add_operand(&g, q);
	int order[6];
	ln_rule rule[6];
	cr_assert(rm__lhs_list(&no_limit, 0, &g, order, rule));
	expect_order(order, (int[]){1, 0, 4, 2, 3, 5}, 6);
	cr_expect_eq(rule[p], LN_RULE_ASYNC_DEPTH);
	cr_expect_eq(rule[d], LN_RULE_SCHEDULE_DONE);
	cr_expect_eq(rule[x], LN_RULE_LESS_STALL); /* over S, the later node */
	cr_expect_eq(rule[q], LN_RULE_ORIGINAL_ORDER);
	rm__ln_graph_finish(&g);
}

/*
 * Two all-gathers (one in flight at a time) and a compute C0 that both dones' user U also reads:
 * 0 S1, 1 S2, 2 C0, 3 D1, 4 D2, 5 U (D1, D2, C0). Bottom-up at t=0: U (now 1000); D2 beats D1 by
 * kOriginalOrder and takes the resource, D1 waits; S2 is ready at 1000 + 5000, so C0 goes first
 * by kLessStall (now 2000); S2 (stalls to 6000), D1, S1. Program: S1 D1 S2 C0 D2 U: the second
 * gather overlaps C0, the first has nothing left to overlap.
 */
Test(lhs_list, one_collective_of_a_kind_in_flight)
{
	ln_graph g = {0};
	int s1 = rm__ln_add_node(&g, LN_START, CK_AG, 0, 0, 40);
	int s2 = rm__ln_add_node(&g, LN_START, CK_AG, 0, 0, 40);
	int c0 = compute(&g, 10);
	int d1 = rm__ln_add_node(&g, LN_DONE, CK_AG, 0, 5000, 40);
	rm__ln_add_operand(&g, s1);
	int d2 = rm__ln_add_node(&g, LN_DONE, CK_AG, 0, 5000, 40);
	rm__ln_add_operand(&g, s2);
	compute(&g, 0);
	rm__ln_add_operand(&g, d1);
	rm__ln_add_operand(&g, d2);
	rm__ln_add_operand(&g, c0);
	int order[6];
	ln_rule rule[6];
	cr_assert(rm__lhs_list(&no_limit, 0, &g, order, rule));
	expect_order(order, (int[]){0, 3, 1, 2, 4, 5}, 6);
	cr_expect_eq(rule[d2], LN_RULE_ORIGINAL_ORDER);
	cr_expect_eq(rule[c0], LN_RULE_ORIGINAL_ORDER); /* it is later than S2 anyway */
	rm__ln_graph_finish(&g);
}

/*
 * 0 A, 1 B, 2 P (A), 3 Q (B), 4 Z (B), 5 R (P, Q, Z). After R, P is A's last user (it makes one
 * node ready), Q and Z are not B's: P goes first by kCreatesMoreReadyNodes though Z is later;
 * then Z (kOriginalOrder over A), Q (now B's last user), B, A. Program: A B Q Z P R.
 */
Test(lhs_list, creates_more_ready_nodes)
{
	ln_graph g = {0};
	int a = compute(&g, 10);
	int b = compute(&g, 10);
	int p = compute(&g, 10);
	rm__ln_add_operand(&g, a);
	int q = compute(&g, 10);
	rm__ln_add_operand(&g, b);
	int z = compute(&g, 10);
	rm__ln_add_operand(&g, b);
	compute(&g, 0);
	rm__ln_add_operand(&g, p);
	rm__ln_add_operand(&g, q);
	rm__ln_add_operand(&g, z);
	int order[6];
	ln_rule rule[6];
	cr_assert(rm__lhs_list(&no_limit, 0, &g, order, rule));
	expect_order(order, (int[]){0, 1, 3, 4, 2, 5}, 6);
	cr_expect_eq(rule[p], LN_RULE_CREATES_MORE_READY_NODES);
	rm__ln_graph_finish(&g);
}

/*
 * The memory rules. 0 Y (40 bytes), 1 P (60 bytes, no operands), 2 Q (10 bytes, reads Y),
 * 3 R (P, Q). After R, P and Q are live (70 bytes over the baseline): scheduling P frees 60,
 * scheduling Q frees 10 but makes Y live (+40, a peak of usage + 40).
 */
static void memory_graph(ln_graph *g)
{
	memset(g, 0, sizeof(*g));
	int y = compute(g, 40);
	int p = compute(g, 60);
	int q = compute(g, 10);
	rm__ln_add_operand(g, y);
	compute(g, 0);
	rm__ln_add_operand(g, p);
	rm__ln_add_operand(g, q);
}

/* Usage 70 of a limit of 1000: at most half, no memory rule; kOriginalOrder keeps Y P Q R. */
Test(lhs_list, below_half_the_limit_memory_does_not_count)
{
	ln_graph g;
	memory_graph(&g);
	rm__lhs_params p = {.limit = 1000, .enabled = true, .overlap_limit = 1};
	int order[4];
	ln_rule rule[4];
	cr_assert(rm__lhs_list(&p, 0, &g, order, rule));
	expect_order(order, (int[]){0, 1, 2, 3}, 4);
	cr_expect_eq(rule[2], LN_RULE_ORIGINAL_ORDER);
	rm__ln_graph_finish(&g);
}

/* Usage 70 of 100: above half, under the limit. Q's peak would be 110 > 100, P's 70:
 * kMemoryPeakOverLimit takes P first (bottom-up), so the program runs Q before P: Y Q P R. */
Test(lhs_list, above_half_a_peak_over_the_limit_is_avoided)
{
	ln_graph g;
	memory_graph(&g);
	rm__lhs_params p = {.limit = 100, .enabled = true, .overlap_limit = 1};
	int order[4];
	ln_rule rule[4];
	cr_assert(rm__lhs_list(&p, 0, &g, order, rule));
	expect_order(order, (int[]){0, 2, 1, 3}, 4);
	cr_expect_eq(rule[1], LN_RULE_MEMORY_PEAK_OVER_LIMIT);
	rm__ln_graph_finish(&g);
}

/* Baseline 30 + 70 = 100 = the limit: kDecreaseMemoryOverLimit takes the freeing P (-60 against
 * Q's +30) before any later rule; a limit of 300 with the same baseline leaves the original order. */
Test(lhs_list, at_the_limit_the_freeing_node_wins)
{
	ln_graph g;
	memory_graph(&g);
	rm__lhs_params p = {.limit = 100, .enabled = true, .overlap_limit = 1};
	int order[4];
	ln_rule rule[4];
	cr_assert(rm__lhs_list(&p, 30, &g, order, rule));
	expect_order(order, (int[]){0, 2, 1, 3}, 4);
	cr_expect_eq(rule[1], LN_RULE_DECREASE_MEMORY_OVER_LIMIT);
	p.limit = 300;
	cr_assert(rm__lhs_list(&p, 30, &g, order, rule));
	expect_order(order, (int[]){0, 1, 2, 3}, 4);
	rm__ln_graph_finish(&g);
}

static int start(ln_graph *g, ckind k)
{
	return rm__ln_add_node(g, LN_START, k, 0, 0, 0);
}

static int done(ln_graph *g, ckind k, double latency, int s)
{
	int d = rm__ln_add_node(g, LN_DONE, k, 0, latency, 0);
	rm__ln_add_operand(g, s);
	return d;
}

/*
 * kUnlockDone. 0 S1, 1 D1 (all-gather), 2 S2, 3 D2 (reduce-scatter; an overlap limit of 2),
 * 4 C (D2), 5 A (D1), 6 B (C), 7 R (A, B). A and B have the same async depth (5000) and make one
 * node ready each; A reads a done: it goes first though B is later. Then D1 (kScheduleDone), B
 * and C (kLessStall over the pending S1), D2, S1 (ready at 7000) before S2 (9000).
 * Program: S2 S1 D2 C B D1 A R.
 */
Test(lhs_list, unlock_done)
{
	ln_graph g = {0};
	int s1 = start(&g, CK_AG), d1 = done(&g, CK_AG, 5000, s1);
	int s2 = start(&g, CK_RS), d2 = done(&g, CK_RS, 5000, s2);
	int c = compute(&g, 10);
	rm__ln_add_operand(&g, d2);
	int a = compute(&g, 10);
	rm__ln_add_operand(&g, d1);
	int b = compute(&g, 10);
	rm__ln_add_operand(&g, c);
	compute(&g, 0);
	rm__ln_add_operand(&g, a);
	rm__ln_add_operand(&g, b);
	int order[8];
	ln_rule rule[8];
	rm__lhs_params two = {.limit = 0, .enabled = true, .overlap_limit = 2};
	cr_assert(rm__lhs_list(&two, 0, &g, order, rule));
	expect_order(order, (int[]){2, 0, 3, 4, 6, 1, 5, 7}, 8);
	cr_expect_eq(rule[a], LN_RULE_UNLOCK_DONE);
	cr_expect_eq(rule[s1], LN_RULE_LESS_STALL);
	/* with one collective in flight in all, D2 waits for S1: S2 D2 S1 C B D1 A R */
	cr_assert(rm__lhs_list(&no_limit, 0, &g, order, rule));
	expect_order(order, (int[]){2, 3, 0, 4, 6, 1, 5, 7}, 8);
	cr_expect_eq(rule[s1], LN_RULE_ONLY_READY);
	rm__ln_graph_finish(&g);
}

/*
 * kStartAtZeroDepth. 0 X, 1 S, 2 D (S, no latency), 3 U (D, X). After U and D, S and X are
 * ready at the same time: a start with async depth 0 that nothing waits for is delayed, so X
 * goes first though S is later. Program: S X D U.
 */
Test(lhs_list, start_at_zero_depth_is_delayed)
{
	ln_graph g = {0};
	int x = compute(&g, 10);
	int s = start(&g, CK_AG);
	int d = done(&g, CK_AG, 0, s);
	compute(&g, 0);
	rm__ln_add_operand(&g, d);
	rm__ln_add_operand(&g, x);
	int order[4];
	ln_rule rule[4];
	cr_assert(rm__lhs_list(&no_limit, 0, &g, order, rule));
	expect_order(order, (int[]){1, 0, 2, 3}, 4);
	cr_expect_eq(rule[x], LN_RULE_START_AT_ZERO_DEPTH);
	rm__ln_graph_finish(&g);
}

/*
 * kFreeBackedupResource. 0 S2, 1 S1, 2 D2, 3 D1 (both all-gathers, no latency), 4 X, 5 U (D1, D2,
 * X). D1 takes the resource and D2 waits for it, so S1 (resource-constrained) beats X; then D2,
 * and S2, constrained no more, waits behind X (kStartAtZeroDepth). Program: S2 X D2 S1 D1 U.
 */
Test(lhs_list, a_start_that_frees_a_backed_up_resource_goes_first)
{
	ln_graph g = {0};
	int s2 = start(&g, CK_AG), s1 = start(&g, CK_AG);
	int d2 = done(&g, CK_AG, 0, s2), d1 = done(&g, CK_AG, 0, s1);
	int x = compute(&g, 10);
	compute(&g, 0);
	rm__ln_add_operand(&g, d1);
	rm__ln_add_operand(&g, d2);
	rm__ln_add_operand(&g, x);
	int order[6];
	ln_rule rule[6];
	cr_assert(rm__lhs_list(&no_limit, 0, &g, order, rule));
	expect_order(order, (int[]){0, 4, 2, 1, 3, 5}, 6);
	cr_expect_eq(rule[s1], LN_RULE_FREE_BACKEDUP_RESOURCE);
	cr_expect_eq(rule[x], LN_RULE_ORIGINAL_ORDER); /* X is the later one anyway */
	rm__ln_graph_finish(&g);
}

/*
 * kAvoidWaste. 0 S, 1 Q (cost 5000), 2 P (cost 1000), 3 D (S, latency 5000), 4 U (D, P, Q). After
 * U (t = 1000) and D, S is ready at 6000: Q's cost fills the 5000 left exactly, P's would leave
 * 4000, so Q goes first though P is later. Program: S P Q D U.
 */
Test(lhs_list, avoid_waste_fills_the_latency_left)
{
	ln_graph g = {0};
	int s = start(&g, CK_AG);
	int q = rm__ln_add_node(&g, LN_COMPUTE, -1, 5000, 0, 10);
	int p = compute(&g, 10);
	int d = done(&g, CK_AG, 5000, s);
	compute(&g, 0);
	rm__ln_add_operand(&g, d);
	rm__ln_add_operand(&g, p);
	rm__ln_add_operand(&g, q);
	int order[5];
	ln_rule rule[5];
	cr_assert(rm__lhs_list(&no_limit, 0, &g, order, rule));
	expect_order(order, (int[]){0, 2, 1, 3, 4}, 5);
	cr_expect_eq(rule[q], LN_RULE_AVOID_WASTE);
	rm__ln_graph_finish(&g);
}

/*
 * kDecreaseMemory, the last rule before kOriginalOrder. 0 Y (20 bytes), 1 P (30), 2 Q (10, reads
 * Y), 3 Z (10, reads Y), 4 R (P, Q, Z). Baseline 20 + 50 live = 70 of a limit of 100: above half,
 * every peak within the limit, nothing else apart: P frees 30, Q and Z add 10 each: P goes first
 * though Z is later. Then usage is 40, half the limit or less: Z, Q, Y by the original order
 * and kCreatesMoreReadyNodes. Program: Y Q Z P R.
 */
Test(lhs_list, decrease_memory_above_half_the_limit)
{
	ln_graph g = {0};
	int y = compute(&g, 20);
	int p = compute(&g, 30);
	int q = compute(&g, 10);
	rm__ln_add_operand(&g, y);
	int z = compute(&g, 10);
	rm__ln_add_operand(&g, y);
	compute(&g, 0);
	rm__ln_add_operand(&g, p);
	rm__ln_add_operand(&g, q);
	rm__ln_add_operand(&g, z);
	rm__lhs_params lp = {.limit = 100, .enabled = true, .overlap_limit = 1};
	int order[5];
	ln_rule rule[5];
	cr_assert(rm__lhs_list(&lp, 20, &g, order, rule));
	expect_order(order, (int[]){0, 2, 3, 1, 4}, 5);
	cr_expect_eq(rule[p], LN_RULE_DECREASE_MEMORY);
	/* with no limit P waits for its turn: Y P Q Z R */
	cr_assert(rm__lhs_list(&no_limit, 20, &g, order, rule));
	expect_order(order, (int[]){0, 1, 2, 3, 4}, 5);
	rm__ln_graph_finish(&g);
}

/* An operand that is not an earlier node, and a done whose operand is not a start, are refused. */
Test(lhs_list, refuses_a_graph_out_of_order)
{
	ln_graph g = {0};
	compute(&g, 10);
	compute(&g, 10);
	rm__ln_add_operand(&g, 1);
	int order[2] = {-1, -1};
	ln_rule rule[2];
	cr_expect_not(rm__lhs_list(&no_limit, 0, &g, order, rule));
	cr_expect_eq(order[0], -1);
	rm__ln_graph_finish(&g);
	compute(&g, 10);
	rm__ln_add_node(&g, LN_DONE, CK_RS, 0, 5000, 10);
	rm__ln_add_operand(&g, 0);
	cr_expect_not(rm__lhs_list(&no_limit, 0, &g, order, rule));
	rm__ln_graph_finish(&g);
}

Test(lhs_list, rule_names_are_xla_s)
{
	cr_expect_str_eq(rm__ln_rule_name(LN_RULE_ASYNC_DEPTH), "kAsyncDepth");
	cr_expect_str_eq(rm__ln_rule_name(LN_RULE_DECREASE_MEMORY_OVER_LIMIT), "kDecreaseMemoryOverLimit");
	cr_expect_str_eq(rm__ln_rule_name(LN_RULE_ORIGINAL_ORDER), "kOriginalOrder");
}

/* ---- the compute order of an unrolled step: the jax#20763 toy ---------------------------- */

#include <stdio.h>
#include <math.h>
#include <stdlib.h>

#include "scenario_run.h"

#define MiB (1024LL * 1024)
#define GiB (1024LL * MiB)

typedef struct toy_run {
	int64_t temp;         /* peak device memory less the persistent tensors, bytes */
	rm_time_ps step;      /* the simulated step */
	rm_schedule_report rep; /* the scalar fields */
} toy_run;

/*
 * data/scenarios/jax20763-toy-fsdp8-h100.yaml (d_model 8192, MLP 8192, 32 layers, seq 4096, 4
 * sequences per GPU of 32 over FSDP 8, nothing_saveable, unrolled, LHS on) with `layers` layers
 * (tests/data/jax20763-toy-Nl.json for 8 and 16) and the overrides in sets (NULL-terminated).
 */
static toy_run run_toy_of(const char *scenario, const char *models, int layers, const char *const *sets)
{
	const char *dir = getenv("REMORA_DATA_DIR"), *tdir = getenv("REMORA_TEST_DATA");
	cr_assert(dir && tdir);
	char path[1024], set[1200];
	snprintf(path, sizeof(path), "%s/scenarios/%s", dir, scenario);
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_load(path, &sc, &err), RM_OK, "%s", err.msg);
	if (layers != 32) {
		snprintf(set, sizeof(set), "model=%s/%s-%dl.json", tdir, models, layers);
		cr_assert_eq(rm_scenario_set(&sc, set, &err), RM_OK, "%s", err.msg);
	}
	for (int i = 0; sets && sets[i]; i++)
		cr_assert_eq(rm_scenario_set(&sc, sets[i], &err), RM_OK, "%s: %s", sets[i], err.msg);
	run r;
	resolve_and_run(&r, &sc);
	int64_t persistent = 0;
	for (int32_t t = 0; t < r.prog->n_tensors; t++)
		if (r.prog->tensors[t].persistent && r.prog->tensors[t].location == RM_LOC_DEVICE)
			persistent += r.prog->tensors[t].bytes;
	toy_run out = {.temp = r.m.peak_memory_bytes - persistent, .step = r.m.step_time, .rep = r.rep};
	out.rep.plan = (rm_remat_plan){0};
	run_finish(&r);
	return out;
}

static toy_run run_toy(int layers, const char *const *sets)
{
	return run_toy_of("jax20763-toy-fsdp8-h100.yaml", "jax20763-toy", layers, sets);
}

/*
 * data/scenarios/jax20763-toy-dp8-h100.yaml, the repro as written: residual MLP blocks on an
 * 8-way data mesh, parameters replicated (tests/data/jax20763-mlp-Nl.json for 8 and 16 layers).
 */
static toy_run run_toy_dp(int layers, const char *const *sets)
{
	return run_toy_of("jax20763-toy-dp8-h100.yaml", "jax20763-mlp", layers, sets);
}

static const char *const lhs_off[] = {"xla_flags=--xla_gpu_enable_latency_hiding_scheduler=false", NULL};
static const char *const scanned[] = {"remat.scan=true", NULL};

/*
 * One layer recomputes 14 tensors of 16,384 tokens x 8192 bf16 (256 MiB: the two norms, q, k,
 * v and their rotations, the attention output, its projection and residual, gate, up, the
 * activation and its product) and the attention's fp32 log-sum-exp (4 x 64 heads x 4096 x 4 B =
 * 4 MiB); each layer saves its input (256 MiB). jax.checkpoint's prevent_cse (on: flax nn.remat
 * unscanned) puts a layer's whole backward behind one optimization barrier over its residuals
 * and the gradient entering it, so the recompute cannot run ahead of the layer above: under a
 * layer's worth is live at once, where without the barrier XLA's rules keep more than two
 * layers' worth. The temporaries still grow by half: the forward's gathers run ahead of their
 * layers. A scan holds one iteration: within +30% of the program without LHS.
 */
Test(lhs_list, jax20763_unrolled_blows_up_scanned_does_not, .timeout = 120)
{
	static const char *const no_barrier[] = {"remat.prevent_cse=false", NULL};
	toy_run on = run_toy(32, NULL), off = run_toy(32, lhs_off), scan = run_toy(32, scanned);
	toy_run free_ = run_toy(32, no_barrier);
	cr_assert_eq(on.rep.saved_bytes_step, 32 * 256 * MiB);
	cr_assert_eq(on.rep.lhs_recompute_layer_bytes, 14 * 256 * MiB + 4 * MiB);
	cr_assert_lt(on.rep.lhs_live_recompute_bytes, on.rep.lhs_recompute_layer_bytes);
	cr_assert_gt(free_.rep.lhs_live_recompute_bytes, 2 * free_.rep.lhs_recompute_layer_bytes);
	cr_assert_gt(on.rep.lhs_moved_slots, 0);
	cr_assert_str_eq(on.rep.lhs_move_rule, "kAsyncDepth");
	/* without LHS, or scanned, nothing moves */
	cr_assert_eq(off.rep.lhs_moved_slots, 0);
	cr_assert_eq(scan.rep.lhs_moved_slots, 0);
	/* LHS off: the saved inputs and one layer's recomputed activations at least */
	cr_assert_geq(off.temp, 32 * 256 * MiB + on.rep.lhs_recompute_layer_bytes);
	cr_assert_gt(on.temp, off.temp * 3 / 2, "unrolled %.2f GiB, LHS off %.2f GiB", (double)on.temp / GiB,
		     (double)off.temp / GiB);
	cr_assert_lt(scan.temp, off.temp * 13 / 10, "scanned %.2f GiB, LHS off %.2f GiB", (double)scan.temp / GiB,
		     (double)off.temp / GiB);
}

/* The blow-up grows with depth: the unrolled step's temporaries, and their ratio to LHS off. */
Test(lhs_list, jax20763_blow_up_grows_with_layers, .timeout = 120)
{
	int layers[3] = {8, 16, 32};
	double ratio[3];
	int64_t temp[3];
	for (int i = 0; i < 3; i++) {
		toy_run on = run_toy(layers[i], NULL), off = run_toy(layers[i], lhs_off);
		temp[i] = on.temp;
		ratio[i] = (double)on.temp / (double)off.temp;
	}
	for (int i = 1; i < 3; i++) {
		cr_expect_gt(temp[i], temp[i - 1], "%d layers: %lld bytes", layers[i], (long long)temp[i]);
		cr_expect_gt(ratio[i], ratio[i - 1], "%d layers: x%.2f of LHS off", layers[i], ratio[i]);
	}
}

/*
 * XLA's rematerialization pass after scheduling (docs/schedules.md "After scheduling") on the
 * toy: its limit is the scheduler's less the module's outputs, the new train state (the I/O less
 * the 4 x 4096 int32 tokens, 64 KiB). At 8 layers the tracked peak is within it and nothing is
 * added; at 32 the step is over it, the pass recomputes elementwise values of the backward and
 * lowers the peak, but the fixed memory (saved inputs, gradients) keeps it over.
 */
Test(lhs_list, jax20763_rematerialization_after_scheduling, .timeout = 120)
{
	toy_run small = run_toy(8, NULL), big = run_toy(32, NULL);
	int64_t tokens_bytes = 4 * 4096 * 4;
	cr_assert_eq(big.rep.remat_limit_bytes, big.rep.memory_limit_bytes - (big.rep.io_bytes - tokens_bytes));
	cr_assert_leq(small.rep.tracked_peak_bytes, small.rep.remat_limit_bytes);
	cr_assert(!small.rep.remat_applied);
	cr_assert_eq(small.rep.remat_ops + small.rep.remat_moves, 0);
	cr_assert(big.rep.remat_applied);
	cr_assert_eq(big.rep.remat_peak_before_bytes, big.rep.tracked_peak_bytes);
	cr_assert_gt(big.rep.remat_ops, 0);
	cr_assert_gt(big.rep.remat_bytes, 0);
	cr_assert_lt(big.rep.remat_peak_after_bytes, big.rep.remat_peak_before_bytes);
	cr_assert(big.rep.remat_over);
}

/*
 * The repro's own model: data parallelism without FSDP, so the only collectives of the backward
 * are the replicas' all-reduces, in the computation XLA schedules. SPMD all-reduces each weight
 * gradient and AllReduceCombiner merges them up to xla_gpu_all_reduce_combine_threshold_bytes:
 * at the default 30 MiB each 128 MiB gradient (8192 x 8192 bf16) keeps its own, 64 a step and
 * the embedding's and head's; from 256 MiB a block's two merge into one, 32 a step. One block
 * recomputes up = W1 x and relu(up) (2 x 16,384 tokens x 8192 bf16 = 512 MiB) and saves its
 * input (256 MiB). With a gradient's own all-reduce the reorder keeps one layer's worth live and
 * the temporaries are LHS off's; with a block's merged one, whose start waits for both weight
 * gradients, kAvoidWaste holds recompute chains of several layers live and the temporaries
 * more than double. Without LHS or scanned nothing moves.
 */
static const char *const merged[] = {"xla_flags+=--xla_gpu_all_reduce_combine_threshold_bytes=268435456", NULL};

Test(lhs_list, jax20763_repro_data_parallel_reorders_around_the_all_reduces, .timeout = 120)
{
	toy_run on = run_toy_dp(32, NULL), off = run_toy_dp(32, lhs_off), scan = run_toy_dp(32, scanned);
	toy_run big = run_toy_dp(32, merged);
	cr_assert_eq(on.rep.saved_bytes_step, 32 * 256 * MiB);
	cr_assert_eq(on.rep.lhs_recompute_layer_bytes, 2 * 256 * MiB);
	cr_assert_eq(on.rep.replica_collectives, 65);
	cr_assert_eq(big.rep.replica_collectives, 33);
	cr_assert_gt(on.rep.lhs_moved_slots, 0);
	cr_assert_leq(on.rep.lhs_live_recompute_bytes, on.rep.lhs_recompute_layer_bytes);
	cr_assert_eq(on.temp, off.temp, "unrolled %.2f GiB, LHS off %.2f GiB", (double)on.temp / GiB,
		     (double)off.temp / GiB);
	cr_assert_gt(big.rep.lhs_live_recompute_bytes, 4 * big.rep.lhs_recompute_layer_bytes);
	cr_assert_gt(big.temp, off.temp * 2, "merged %.2f GiB, LHS off %.2f GiB", (double)big.temp / GiB,
		     (double)off.temp / GiB);
	cr_assert_eq(off.rep.lhs_moved_slots, 0);
	cr_assert_eq(scan.rep.lhs_moved_slots, 0);
	cr_assert_geq(off.temp, 32 * 256 * MiB + on.rep.lhs_recompute_layer_bytes);
	cr_assert_lt(scan.temp, off.temp * 13 / 10, "scanned %.2f GiB, LHS off %.2f GiB", (double)scan.temp / GiB,
		     (double)off.temp / GiB);
	/* the step's time barely moves: the all-reduces are hidden either way */
	cr_assert_lt(fabs(rm_time_to_s(on.step) - rm_time_to_s(off.step)), 0.01);
}

/* With a block's gradients merged, what the unrolled step holds beyond LHS off grows with
 * depth: 8, 16, 32 blocks. */
Test(lhs_list, jax20763_repro_blow_up_grows_with_layers, .timeout = 120)
{
	int layers[3] = {8, 16, 32};
	int64_t excess[3];
	for (int i = 0; i < 3; i++) {
		toy_run on = run_toy_dp(layers[i], merged), off = run_toy_dp(layers[i], lhs_off);
		excess[i] = on.temp - off.temp;
	}
	cr_expect_gt(excess[0], 0);
	for (int i = 1; i < 3; i++)
		cr_expect_gt(excess[i], excess[i - 1], "%d layers: %.2f GiB over LHS off", layers[i],
			     (double)excess[i] / GiB);
}
