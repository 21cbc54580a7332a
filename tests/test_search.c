/* The search: a killed sweep resumes to the same rows, threads change nothing, bad spaces. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "remora/search.h"

static void seed(rm_scenario *sc, const char *const *sets)
{
	const char *dir = getenv("REMORA_DATA_DIR");
	cr_assert_not_null(dir);
	char path[1024];
	snprintf(path, sizeof(path), "%s/scenarios/seed-llama2-7b-fsdp8-h100.yaml", dir);
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(sc);
	cr_assert_eq(rm_scenario_load(path, sc, &err), RM_OK, "%s", err.msg);
	for (int i = 0; sets && sets[i]; i++)
		cr_assert_eq(rm_scenario_set(sc, sets[i], &err), RM_OK, "%s: %s", sets[i], err.msg);
}

/* A small space: 3 names (8 subsets, offloaded too), 2 policies, 3 micro-batches, 2 variants. */
static const char *const small[] = {
	"search.names=[dot_attention_query, dot_attention_value, dot_mlp_gate]",
	"search.policies=[nothing_saveable, dots_saveable]",
	"search.micro_batches=[1, 4, 6]",
	"search.flag_variants=['', '--xla_gpu_memory_limit_slop_factor=120']",
	NULL,
};

typedef struct dump {
	char *text;
	size_t len;
	FILE *f;
	int rows;
} dump;

static void dump_row(const rm_candidate_result *r, void *user)
{
	dump *d = user;
	d->rows++;
	fprintf(d->f, "%s %lld %s|%lld|%s|%d|%d|%.12g|%.12g|%lld|%d|%d|%d|%d\n", r->c.key,
		(long long)r->c.index, r->c.policy, (long long)r->c.micro_batch, r->c.flags, r->c.ideal, r->ok,
		r->step_time_s, r->exposed_comm_s, (long long)r->peak_memory_bytes, r->fits, r->async, r->sync,
		r->sync_memory_limit);
}

static void dump_db(rm_search *s, dump *d)
{
	memset(d, 0, sizeof(*d));
	d->f = open_memstream(&d->text, &d->len);
	rm_error err;
	cr_assert_eq(rm_search_each(s, dump_row, d, &err), RM_OK);
	fclose(d->f);
}

static rm_search *sweep(const char *db, int jobs, int64_t stop_after)
{
	rm_scenario sc;
	seed(&sc, small);
	rm_error err;
	rm_error_clear(&err);
	rm_search *s = rm_search_create(&sc, NULL, &err);
	cr_assert_not_null(s, "%s", err.msg);
	rm_search_options opt = {.db_path = db, .jobs = jobs, .stop_after = stop_after};
	rm_search_progress p;
	cr_assert_eq(rm_search_run(s, &opt, &p, &err), RM_OK, "%s", err.msg);
	return s;
}

Test(search, killed_sweep_resumes_to_the_same_rows)
{
	char a[] = "/tmp/remora-test-XXXXXX", b[] = "/tmp/remora-test-XXXXXX";
	int fa = mkstemp(a), fb = mkstemp(b);
	close(fa);
	close(fb);
	unlink(a);
	unlink(b);
	rm_search *full = sweep(a, 1, 0);
	int64_t total = rm_search_count(full);
	cr_assert_eq(total, 1 + (8 + 7 + 2) * 3 * (2 + 1), "as written + 17 policies x 3 mbs x (2 variants + ideal)");
	cr_assert_eq(rm_search_rows(full), total);
	/* killed after 37 rows, then after 50 more, then finished */
	rm_search *part = sweep(b, 2, 37);
	cr_assert_eq(rm_search_rows(part), 37);
	rm_search_destroy(part);
	part = sweep(b, 1, 50);
	cr_assert_eq(rm_search_rows(part), 87);
	rm_search_destroy(part);
	part = sweep(b, 2, 0);
	cr_assert_eq(rm_search_rows(part), total, "no row lost or duplicated");
	dump da, db;
	dump_db(full, &da);
	dump_db(part, &db);
	cr_assert_eq(da.rows, db.rows);
	cr_assert_eq(da.len, db.len);
	cr_assert_eq(memcmp(da.text, db.text, da.len), 0, "the same database content");
	free(da.text);
	free(db.text);
	rm_search_destroy(full);
	rm_search_destroy(part);
	unlink(a);
	unlink(b);
	char wal[64];
	snprintf(wal, sizeof(wal), "%s-wal", a);
	unlink(wal);
	snprintf(wal, sizeof(wal), "%s-shm", a);
	unlink(wal);
	snprintf(wal, sizeof(wal), "%s-wal", b);
	unlink(wal);
	snprintf(wal, sizeof(wal), "%s-shm", b);
	unlink(wal);
}

Test(search, threads_give_identical_results)
{
	rm_search *one = sweep(NULL, 1, 0), *two = sweep(NULL, 3, 0);
	dump d1, d2;
	dump_db(one, &d1);
	dump_db(two, &d2);
	cr_assert_eq(d1.len, d2.len);
	cr_assert_eq(memcmp(d1.text, d2.text, d1.len), 0);
	free(d1.text);
	free(d2.text);
	rm_search_destroy(one);
	rm_search_destroy(two);
}

Test(search, winner_fits_and_beats_the_scenario)
{
	rm_search *s = sweep(NULL, 2, 0);
	rm_candidate_result best, base;
	rm_error err;
	cr_assert_eq(rm_search_top(s, RM_SEARCH_XLA_ONLY, &best, 1, &err), 1);
	cr_assert(best.fits);
	/* in this small space the fastest XLA plan is dots_saveable at micro-batch 4: with XLA's
	 * fusion of the memory-bound ops (intermediates such as the SiLU output and the fp32 logits
	 * never written) its peak, about 57 GiB, is inside JAX's BFC pool (0.75 x 79.65 = 59.74 GiB); 61
	 * GiB without fusion passed it and a plan saving q, v and gate at 6 won */
	cr_assert_eq(best.c.micro_batch, 4, "mb %d sync %d policy %s", (int)best.c.micro_batch, best.sync_memory_limit,
		     best.c.policy);
	cr_assert_str_eq(best.c.policy, "dots_saveable");
	cr_assert_eq(best.sync_memory_limit, 0);
	cr_assert_leq(best.peak_memory_bytes, (int64_t)(0.75 * 79.65 * RM_GiB));
	cr_assert(rm_search_as_written(s, &base, &err));
	cr_assert(base.c.as_written);
	cr_assert_geq(best.tokens_per_s_per_gpu, base.tokens_per_s_per_gpu);
	/* candidates over capacity are kept and marked, never dropped */
	rm_candidate_result pareto[64];
	int n = rm_search_pareto(s, pareto, 64, &err);
	cr_assert_gt(n, 1);
	for (int i = 1; i < n; i++) {
		cr_assert_leq(pareto[i].tokens_per_s_per_gpu, pareto[i - 1].tokens_per_s_per_gpu);
		cr_assert_lt(pareto[i].peak_memory_bytes, pareto[i - 1].peak_memory_bytes);
	}
	rm_search_destroy(s);
}

/* One front per runtime: the XLA front holds XLA rows only and starts with the XLA winner (the
 * mixed front of every runtime missed it when an ideal row was faster at the same memory); the
 * ideal counterpart of a candidate is the ideal row of its policy and micro-batch; same-figure
 * candidates are named by one row in the ranking and on the front. */
Test(search, one_front_per_runtime_and_ideal_counterparts)
{
	rm_search *s = sweep(NULL, 2, 0);
	rm_error err;
	rm_candidate_result best, top[4], front[64], ideal_front[64];
	cr_assert_eq(rm_search_top(s, RM_SEARCH_XLA_ONLY, &best, 1, &err), 1);
	int n = rm_search_pareto_of(s, RM_SEARCH_XLA_ONLY, front, 64, &err);
	cr_assert_gt(n, 1);
	cr_assert_eq(front[0].c.index, best.c.index, "front starts at %s, the winner is %s", front[0].c.label,
		     best.c.label);
	for (int i = 0; i < n; i++)
		cr_assert_not(front[i].c.ideal, "%s", front[i].c.label);
	int ni = rm_search_pareto_of(s, RM_SEARCH_IDEAL_ONLY, ideal_front, 64, &err);
	cr_assert_gt(ni, 0);
	for (int i = 0; i < ni; i++)
		cr_assert(ideal_front[i].c.ideal, "%s", ideal_front[i].c.label);
	/* the mixed front's first row is the best of any runtime, which rm_search_top agrees on */
	cr_assert_eq(rm_search_top(s, RM_SEARCH_ANY, top, 1, &err), 1);
	int nm = rm_search_pareto(s, front, 64, &err);
	cr_assert_gt(nm, 0);
	cr_assert_eq(front[0].c.index, top[0].c.index);
	/* index = 1 + ((policy x mbs + mb) x (2 variants + ideal)) + variant: the variant is the
	 * fastest digit, so candidates 1 and 2 (variants 0, 1) have ideal 3, candidate 4 has 6 */
	cr_assert_eq(rm_search_ideal_of(s, 0), -1);
	cr_assert_eq(rm_search_ideal_of(s, 1), 3);
	cr_assert_eq(rm_search_ideal_of(s, 2), 3);
	cr_assert_eq(rm_search_ideal_of(s, 3), 3);
	cr_assert_eq(rm_search_ideal_of(s, 4), 6);
	cr_assert_eq(rm_search_ideal_of(s, rm_search_count(s)), -1);
	rm_candidate c1, c3;
	rm_search_candidate(s, 1, &c1);
	rm_search_candidate(s, 3, &c3);
	cr_assert(c3.ideal);
	cr_assert_not(c1.ideal);
	cr_assert_str_eq(c1.policy, c3.policy);
	cr_assert_eq(c1.micro_batch, c3.micro_batch);
	rm_candidate_result r;
	cr_assert_eq(rm_search_result(s, 3, &r, &err), 1);
	cr_assert_eq(r.c.index, 3);
	cr_assert(r.c.ideal);
	cr_assert_eq(rm_search_result(s, rm_search_count(s) + 5, &r, &err), 0);
	rm_search_destroy(s);
}

Test(search, empty_or_oversized_spaces_say_how_to_fix_them)
{
	rm_scenario sc;
	const char *empty[] = {"search.names=[]", "search.policies=[]", NULL};
	seed(&sc, empty);
	rm_error err;
	rm_error_clear(&err);
	cr_assert_null(rm_search_create(&sc, NULL, &err));
	cr_assert_eq(err.status, RM_INVALID);
	cr_assert(strstr(err.msg, "search space is empty"), "%s", err.msg);
	const char *large[] = {"search.max_candidates=100", NULL};
	seed(&sc, large);
	cr_assert_null(rm_search_create(&sc, NULL, &err));
	cr_assert_eq(err.status, RM_RANGE);
	cr_assert(strstr(err.msg, "narrow search.names (8 names give 256 subsets"), "%s", err.msg);
	/* a bad policy is refused where it is written (here: the override) */
	cr_assert_eq(rm_scenario_set(&sc, "search.policies=[dots_saveabl]", &err), RM_INVALID);
	cr_assert(strstr(err.msg, "search.policies[0]"), "%s", err.msg);
}

Test(search, beyond_twelve_names_nested_prefixes)
{
	const char *sets[] = {"search.names=[dot_attention_query, dot_attention_key, dot_attention_value, "
			      "dot_attention_out, dot_mlp_gate, dot_mlp_up, dot_mlp_out, attention_context, "
			      "pre_attention_norm, pre_mlp_norm, rotary_query, rotary_key, mlp_activation]",
			      "search.policies=[]", "search.micro_batches=[1]", "search.flag_variants=['']",
			      "search.offload=false", "search.include_ideal=false", NULL};
	rm_scenario sc;
	seed(&sc, sets);
	rm_error err;
	rm_search *s = rm_search_create(&sc, NULL, &err);
	cr_assert_not_null(s, "%s", err.msg);
	/* 13 names: the 14 nested prefixes instead of 8192 subsets, plus the scenario */
	cr_assert_eq(rm_search_count(s), 1 + 14);
	rm_search_destroy(s);
}

Test(search, no_candidate_is_dropped_from_a_large_space)
{
	/* 12 names, saved and offloaded, plus the 7 listed policies: 4096 + 4095 + 7 = 8198 policies
	 * (a fixed table of 8192 used to drop 6 of the listed ones without a word) */
	const char *sets[] = {"search.names=[dot_attention_query, dot_attention_key, dot_attention_value, "
			      "dot_attention_out, dot_mlp_gate, dot_mlp_up, dot_mlp_out, attention_context, "
			      "pre_attention_norm, pre_mlp_norm, rotary_query, rotary_key]",
			      "search.policies=[nothing_saveable, dots_saveable, dots_with_no_batch_dims_saveable, "
			      "everything_saveable, 'maxtext:minimal', 'torch:selective', 'torch:full']",
			      "search.micro_batches=[1]", "search.flag_variants=['']", "search.offload=true",
			      "search.include_ideal=false", "search.max_candidates=100000", NULL};
	rm_scenario sc;
	seed(&sc, sets);
	rm_error err;
	rm_search *s = rm_search_create(&sc, NULL, &err);
	cr_assert_not_null(s, "%s", err.msg);
	cr_assert_eq(rm_search_count(s), 1 + 8198);
	/* the last listed policy is the last candidate */
	rm_candidate c;
	rm_search_candidate(s, rm_search_count(s) - 1, &c);
	cr_assert_str_eq(c.policy, "torch:full");
	rm_search_destroy(s);
}

Test(search, a_name_listed_twice_counts_once)
{
	/* 3 distinct names (q listed twice): 8 subsets + 7 offloaded, not 16 + 15 */
	const char *sets[] = {"search.names=[dot_attention_query, dot_attention_value, dot_attention_query, dot_mlp_gate]",
			      "search.policies=[]", "search.micro_batches=[1]", "search.flag_variants=['']",
			      "search.include_ideal=false", NULL};
	rm_scenario sc;
	seed(&sc, sets);
	rm_error err;
	rm_search *s = rm_search_create(&sc, NULL, &err);
	cr_assert_not_null(s, "%s", err.msg);
	cr_assert_eq(rm_search_count(s), 1 + 8 + 7);
	rm_search_destroy(s);
}

/* search.parallelism multiplies the space by its variants that resolve (one left out, with the
 * reason: tp 3 does not divide 8 GPUs); each candidate carries its variant, which keys it apart,
 * and the variant's own setup runs it. */
Test(search, parallelism_variants_multiply_the_space)
{
	const char *sets[] = {"search.names=[]", "search.policies=[nothing_saveable]", "search.micro_batches=[1]",
			      "search.flag_variants=['']", "search.include_ideal=false",
			      "search.parallelism=['', 'parallelism.fsdp=4', 'parallelism.tp=3', 'parallelism.tp=2 "
			      "parallelism.sp=true parallelism.fsdp=4']",
			      "training.seq_len=1024", NULL};
	rm_scenario sc;
	seed(&sc, sets);
	rm_error err;
	rm_search *s = rm_search_create(&sc, NULL, &err);
	cr_assert_not_null(s, "%s", err.msg);
	cr_assert_eq(rm_search_count(s), 1 + 3, "%lld", (long long)rm_search_count(s));
	rm_candidate c[4];
	for (int i = 0; i < 4; i++)
		rm_search_candidate(s, i, &c[i]);
	cr_assert_str_eq(c[1].parallelism, "");
	cr_assert_str_eq(c[2].parallelism, "parallelism.fsdp=4");
	cr_assert_str_eq(c[3].parallelism, "parallelism.tp=2 parallelism.sp=true parallelism.fsdp=4");
	cr_assert(strstr(c[3].label, "[tp=2 sp fsdp=4]"), "%s", c[3].label);
	for (int i = 1; i < 4; i++)
		for (int j = i + 1; j < 4; j++)
			cr_assert_str_neq(c[i].key, c[j].key);
	/* the TP variant's tensor-parallel collectives run, and count half the tokens per GPU */
	rm_candidate_result r1, r3;
	rm_search_evaluate(s, &c[1], &r1);
	rm_search_evaluate(s, &c[3], &r3);
	cr_assert(r1.ok && r3.ok, "%s %s", r1.error, r3.error);
	cr_assert_neq(r1.step_time_s, r3.step_time_s);
	/* resolving the candidate gives its variant's setup */
	rm_scenario_resolved res;
	cr_assert_eq(rm_search_resolve_candidate(s, &c[3], &res, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(res.train.tp, 2);
	cr_assert(res.train.sp);
	rm_scenario_resolved_finish(&res);
	rm_search_destroy(s);
	/* none resolves: an error */
	const char *bad[] = {"search.policies=[nothing_saveable]", "search.parallelism=['parallelism.tp=3']", NULL};
	seed(&sc, bad);
	cr_assert_null(rm_search_create(&sc, NULL, &err));
	cr_assert(strstr(err.msg, "no variant resolves"), "%s", err.msg);
}

/* A pipelined scenario is searched stage by stage: the candidate that is the scenario as
 * written (nothing_saveable, micro-batch 1) gives the same step as the scenario itself. */
Test(search, pipelined_candidates_run_stage_by_stage)
{
	const char *dir = getenv("REMORA_DATA_DIR");
	char path[1024];
	snprintf(path, sizeof(path), "%s/scenarios/capacity-llama3-70b-tp8pp4-4x8-h100.yaml", dir);
	rm_scenario sc;
	rm_error err;
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_load(path, &sc, &err), RM_OK, "%s", err.msg);
	const char *sets[] = {"search.policies=[nothing_saveable]", "search.micro_batches=[1]", "search.include_ideal=false",
			      NULL};
	for (int i = 0; sets[i]; i++)
		cr_assert_eq(rm_scenario_set(&sc, sets[i], &err), RM_OK, "%s", err.msg);
	rm_search *s = rm_search_create(&sc, NULL, &err);
	cr_assert_not_null(s, "%s", err.msg);
	cr_assert_eq(rm_search_count(s), 2);
	rm_candidate c0, c1;
	rm_search_candidate(s, 0, &c0);
	rm_search_candidate(s, 1, &c1);
	rm_candidate_result r0, r1;
	rm_search_evaluate(s, &c0, &r0);
	rm_search_evaluate(s, &c1, &r1);
	cr_assert(r0.ok && r1.ok, "%s %s", r0.error, r1.error);
	cr_assert_float_eq(r0.step_time_s, r1.step_time_s, 1e-12);
	cr_assert_gt(r1.tokens_per_s_per_gpu, 0);
	cr_assert(r1.fits);
	rm_search_destroy(s);
}

/* A variant may set layout keys only: a policy or micro-batch in it is left out with the reason. */
Test(search, parallelism_variants_set_layout_keys_only)
{
	const char *sets[] = {"search.names=[]", "search.policies=[nothing_saveable]", "search.micro_batches=[1]",
			      "search.parallelism=['', 'training.micro_batch=2', 'parallelism.fsdp=4 remat.policy=dots_saveable']",
			      NULL};
	rm_scenario sc;
	seed(&sc, sets);
	rm_error err;
	rm_search *s = rm_search_create(&sc, NULL, &err);
	cr_assert_not_null(s, "%s", err.msg);
	rm_candidate c;
	rm_search_candidate(s, rm_search_count(s) - 1, &c);
	cr_assert_str_eq(c.parallelism, "");
	rm_search_destroy(s);
}
