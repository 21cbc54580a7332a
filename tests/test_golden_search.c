/*
 * The optimised search against the unoptimised one (rm_search_options.reference: every candidate
 * simulated on its own, no memo of equal plans, no collective price cache, no reused program):
 * over a whole space, row by row, every field equal bit for bit, for one thread, three threads
 * and two shards (the optimised rows' scan loops built as 6 trips each, the reference's whole, remora/sim.h
 * rm_sim_loop). And a PyTorch FSDP2 space of long steps (16 to 32 micro-batches), whose
 * optimised rows come from 5 micro-batches extended by the engine's period (remora/sim.h
 * rm_sim_loop), against the reference's full steps, on one node and on two.
 */
#include <criterion/criterion.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remora/search.h"

/* 4 names, dot_mlp_out among them: the seed's backward never reads it, so half the subsets
 * resolve to the plan of another (the memo's hits), 2 policies, 2 micro-batches, 2 flag variants
 * and the ideal runtime: 1 + (16 saved + 15 offloaded + 2) x 2 x 3 = 199 candidates. */
static const char *const space[] = {
	"search.names=[dot_attention_query, dot_mlp_out, dot_mlp_gate, attention_context]",
	"search.policies=[nothing_saveable, dots_saveable]",
	"search.micro_batches=[1, 4]",
	"search.flag_variants=['', '--xla_gpu_enable_while_loop_double_buffering=false']",
	NULL,
};
#define SPACE_COUNT 199

static rm_search *make(void)
{
	const char *dir = getenv("REMORA_DATA_DIR");
	cr_assert_not_null(dir);
	char path[1024];
	snprintf(path, sizeof(path), "%s/scenarios/seed-llama2-7b-fsdp8-h100.yaml", dir);
	rm_error err;
	rm_error_clear(&err);
	rm_scenario sc;
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_load(path, &sc, &err), RM_OK, "%s", err.msg);
	for (int i = 0; space[i]; i++)
		cr_assert_eq(rm_scenario_set(&sc, space[i], &err), RM_OK, "%s: %s", space[i], err.msg);
	rm_search *s = rm_search_create(&sc, NULL, &err);
	cr_assert_not_null(s, "%s", err.msg);
	cr_assert_eq(rm_search_count(s), SPACE_COUNT);
	return s;
}

typedef struct rows {
	rm_candidate_result r[SPACE_COUNT];
	bool have[SPACE_COUNT];
	int n;
} rows;

static void collect(const rm_candidate_result *r, void *user)
{
	rows *t = user;
	cr_assert(r->c.index >= 0 && r->c.index < SPACE_COUNT);
	cr_assert(!t->have[r->c.index], "row %lld twice", (long long)r->c.index);
	t->r[r->c.index] = *r;
	t->have[r->c.index] = true;
	t->n++;
}

/* Sweeps the space (shard k of n when n > 1) into memory and reads every row back. */
static void sweep(bool reference, int jobs, int k, int n, rows *out, rm_search_progress *p)
{
	rm_search *s = make();
	rm_error err;
	rm_error_clear(&err);
	rm_search_options opt = {.jobs = jobs, .reference = reference, .shard_index = k, .shard_count = n};
	cr_assert_eq(rm_search_run(s, &opt, p, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(rm_search_each(s, collect, out, &err), RM_OK, "%s", err.msg);
	rm_search_destroy(s);
}

#define SAME(field)                                                                                       \
	cr_assert_eq(memcmp(&a->field, &b->field, sizeof(a->field)), 0, "candidate %lld (%s): " #field " differs", \
		     (long long)a->c.index, a->c.label)

/* Every field of two rows of one candidate, bit for bit (doubles by their bytes). */
static void same_row(const rm_candidate_result *a, const rm_candidate_result *b)
{
	cr_assert_str_eq(a->c.key, b->c.key);
	cr_assert_str_eq(a->c.policy, b->c.policy);
	cr_assert_str_eq(a->c.label, b->c.label);
	cr_assert_str_eq(a->c.flags, b->c.flags);
	cr_assert_str_eq(a->c.parallelism, b->c.parallelism);
	SAME(c.micro_batch);
	SAME(c.ideal);
	SAME(c.as_written);
	SAME(ok);
	cr_assert_str_eq(a->error, b->error);
	SAME(step_time_s);
	SAME(tokens_per_s_per_gpu);
	SAME(mfu);
	SAME(peak_memory_bytes);
	SAME(memory_capacity_bytes);
	SAME(fits);
	SAME(compute_busy_s);
	SAME(comm_total_s);
	SAME(exposed_comm_s);
	SAME(recompute_s);
	SAME(lower_bound_s);
	SAME(collectives);
	SAME(async);
	SAME(sync);
	SAME(sync_memory_limit);
	SAME(sync_disabled);
	SAME(sync_nothing);
	SAME(sync_overlap);
	SAME(sync_no_lhs);
	SAME(saved_bytes_step);
	SAME(schedule_hash);
}

static rows ref, opt1, opt3, shard[2];

Test(golden_search, optimised_rows_equal_the_reference_row_by_row)
{
	rm_search_progress p;
	sweep(true, 1, 0, 1, &ref, &p);
	cr_assert_eq(ref.n, SPACE_COUNT);
	cr_assert_eq(p.reused, 0, "the reference simulates every candidate");
	sweep(false, 1, 0, 1, &opt1, &p);
	cr_assert_eq(opt1.n, SPACE_COUNT);
	/* hand count of the policies whose plan an earlier one has: the 8 saved and 8 offloaded
	 * subsets that name dot_mlp_out (the subset without it; offloading {mlp_out} alone is
	 * saving nothing) and nothing_saveable (save: (none)); dots_saveable saves the k, v, out
	 * and up projections, which no subset here names: 17 of 33 policies, each at 2
	 * micro-batches x (2 flag variants + ideal) */
	cr_assert_eq(p.reused, 17 * 2 * 3, "memo hits: %lld", (long long)p.reused);
	/* every step's scan loops (16 trips with double buffering, 32 without) were built as 6 trips
	 * each and extended by the engine: none fell back to the whole step */
	cr_assert_eq(p.extended, SPACE_COUNT, "extended: %lld", (long long)p.extended);
	sweep(false, 3, 0, 1, &opt3, &p);
	cr_assert_eq(opt3.n, SPACE_COUNT);
	for (int i = 0; i < SPACE_COUNT; i++) {
		same_row(&ref.r[i], &opt1.r[i]);
		same_row(&ref.r[i], &opt3.r[i]);
	}
}

Test(golden_search, shards_equal_the_reference)
{
	rm_search_progress p;
	sweep(true, 1, 0, 1, &ref, &p);
	/* a shard sees only its candidates: an equal one in the other shard is simulated again */
	sweep(false, 2, 0, 2, &shard[0], &p);
	sweep(false, 1, 1, 2, &shard[1], &p);
	cr_assert_eq(shard[0].n + shard[1].n, SPACE_COUNT);
	for (int i = 0; i < SPACE_COUNT; i++) {
		cr_assert(shard[0].have[i] != shard[1].have[i], "candidate %d in exactly one shard", i);
		same_row(&ref.r[i], shard[0].have[i] ? &shard[0].r[i] : &shard[1].r[i]);
	}
}

/* The seed model under PyTorch FSDP2, unrolled, at a global batch of 256 sequences: micro-batch
 * 1, 2 and 4 are 32, 16 and 8 micro-batches a step on one node (fsdp 8), 16, 8 and 4 on two
 * (fsdp 16, its collectives on the network); 2 names x (saved, offloaded) + nothing_saveable
 * + the ideal runtime. */
static const char *const fsdp2_space[] = {
	"scheduler.mode=fsdp2",
	"remat.scan=false",
	"training.global_batch=256",
	"search.names=[dot_mlp_out, attention_context]",
	"search.policies=[nothing_saveable]",
	"search.micro_batches=[1, 2, 4]",
	"search.flag_variants=['']",
	NULL,
};

static rm_search *make_fsdp2(int nodes)
{
	const char *dir = getenv("REMORA_DATA_DIR");
	cr_assert_not_null(dir);
	char path[1024];
	snprintf(path, sizeof(path), "%s/scenarios/seed-llama2-7b-fsdp8-h100.yaml", dir);
	rm_error err;
	rm_error_clear(&err);
	rm_scenario sc;
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_load(path, &sc, &err), RM_OK, "%s", err.msg);
	sc.grad_accum = 0; /* from the global batch */
	for (int i = 0; fsdp2_space[i]; i++)
		cr_assert_eq(rm_scenario_set(&sc, fsdp2_space[i], &err), RM_OK, "%s: %s", fsdp2_space[i], err.msg);
	if (nodes > 1) {
		char kv[64];
		snprintf(kv, sizeof(kv), "cluster.nodes=%d", nodes);
		cr_assert_eq(rm_scenario_set(&sc, kv, &err), RM_OK, "%s", err.msg);
		snprintf(kv, sizeof(kv), "parallelism.fsdp=%d", 8 * nodes);
		cr_assert_eq(rm_scenario_set(&sc, kv, &err), RM_OK, "%s", err.msg);
	}
	rm_search *s = rm_search_create(&sc, NULL, &err);
	cr_assert_not_null(s, "%s", err.msg);
	return s;
}

#define FSDP2_MAX 64
typedef struct frows {
	rm_candidate_result r[FSDP2_MAX];
	int n;
} frows;

static void fcollect(const rm_candidate_result *r, void *user)
{
	frows *t = user;
	cr_assert(r->c.index >= 0 && r->c.index < FSDP2_MAX);
	t->r[r->c.index] = *r;
	t->n++;
}

static void fsweep(int nodes, bool reference, frows *out, rm_search_progress *p)
{
	rm_search *s = make_fsdp2(nodes);
	rm_error err;
	rm_error_clear(&err);
	rm_search_options opt = {.jobs = 1, .reference = reference, .shard_index = 0, .shard_count = 1};
	cr_assert_eq(rm_search_run(s, &opt, p, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(rm_search_each(s, fcollect, out, &err), RM_OK, "%s", err.msg);
	rm_search_destroy(s);
}

static frows fref, fopt;

static void fsdp2_case(int nodes, int want_extended)
{
	rm_search_progress p;
	memset(&fref, 0, sizeof(fref));
	memset(&fopt, 0, sizeof(fopt));
	fsweep(nodes, true, &fref, &p);
	cr_assert_eq(p.extended, 0, "the reference builds every micro-batch");
	/* 1 + (4 saved + 3 offloaded subsets + nothing_saveable) x 3 micro-batches x (fsdp2 +
	 * ideal) = 49 rows */
	cr_assert_eq(fref.n, 49);
	fsweep(nodes, false, &fopt, &p);
	cr_assert_eq(fopt.n, fref.n);
	/* the rows of more than 5 micro-batches (the memo's copies of an equal plan with them):
	 * the scenario as written (micro-batch 1) and the 8 policies at each such micro-batch,
	 * under fsdp2 and the ideal runtime; none falls back to its full step */
	cr_assert_eq(p.extended, want_extended, "extended: %lld", (long long)p.extended);
	for (int i = 0; i < fref.n; i++) {
		cr_assert(fref.r[i].ok, "candidate %d: %s", i, fref.r[i].error);
		same_row(&fref.r[i], &fopt.r[i]);
	}
}

Test(golden_search, fsdp2_steps_extended_by_their_period_equal_the_full_ones)
{
	fsdp2_case(1, 1 + 8 * 3 * 2); /* micro-batches 1, 2 and 4: 32, 16 and 8 a step */
}

Test(golden_search, fsdp2_steps_over_two_nodes_extended_equal_the_full_ones)
{
	fsdp2_case(2, 1 + 8 * 2 * 2); /* micro-batches 1 and 2: 16 and 8 a step */
}
