/*
 * Sweeps split across processes (remora/search.h "Shards", rm_search_merge): every candidate in
 * exactly one shard, the assignment a pure function of the space, the predicted work balanced
 * within the bound the header states; shards merged give the rows of one sweep; merging is
 * idempotent and refuses damaged or foreign files without writing.
 */
#include <criterion/criterion.h>
#include <sqlite3.h>
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

/*
 * 3 names (8 subsets and 7 offloaded ones) + 2 policies = 17 policies, micro-batches 1, 2, 4 of a
 * global batch of 32 sequences on FSDP-8 (accumulating 4, 2 and 1 micro-batches), 2 flag variants
 * + ideal: 1 + 17 x 3 x 3 = 154 candidates.
 */
static const char *const small[] = {
	"search.names=[dot_attention_query, dot_attention_value, dot_mlp_gate]",
	"search.policies=[nothing_saveable, dots_saveable]",
	"search.micro_batches=[1, 2, 4]",
	"search.flag_variants=['', '--xla_gpu_memory_limit_slop_factor=120']",
	"training.grad_accum=4",
	"training.global_batch=32",
	NULL,
};

static rm_search *create(void)
{
	rm_scenario sc;
	seed(&sc, small);
	rm_error err;
	rm_error_clear(&err);
	rm_search *s = rm_search_create(&sc, NULL, &err);
	cr_assert_not_null(s, "%s", err.msg);
	return s;
}

static void temp_db(char *buf, size_t size, const char *name)
{
	char dir[] = "/tmp/remora-shard-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	snprintf(buf, size, "%s/%s", dir, name);
}

/* Sweeps shard k of n (n 0: all) into db, with resume_from. */
static rm_search_progress run(rm_search *s, const char *db, int k, int n, int jobs, const char *resume_from)
{
	rm_search_options opt = {.db_path = db, .jobs = jobs, .shard_index = k, .shard_count = n, .resume_from = resume_from};
	rm_search_progress p;
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_search_run(s, &opt, &p, &err), RM_OK, "%s", err.msg);
	return p;
}

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
	fprintf(d->f, "%s %lld %s|%lld|%s|%d|%d|%a|%a|%a|%lld|%d|%d|%d\n", r->c.key, (long long)r->c.index, r->c.policy,
		(long long)r->c.micro_batch, r->c.flags, r->c.ideal, r->ok, r->step_time_s, r->tokens_per_s_per_gpu,
		r->exposed_comm_s, (long long)r->peak_memory_bytes, r->fits, r->async, r->sync);
}

/* Every row of the space in db, as text (rm_search_each after reopening on db). */
static dump dump_of(rm_search *s, const char *db)
{
	dump d;
	memset(&d, 0, sizeof(d));
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_search_reopen(s, db, &err), RM_OK, "%s", err.msg);
	d.f = open_memstream(&d.text, &d.len);
	cr_assert_eq(rm_search_each(s, dump_row, &d, &err), RM_OK, "%s", err.msg);
	fclose(d.f);
	return d;
}

static void sql(const char *path, const char *stmt)
{
	sqlite3 *db = NULL;
	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	char *msg = NULL;
	cr_assert_eq(sqlite3_exec(db, stmt, NULL, NULL, &msg), SQLITE_OK, "%s: %s", stmt, msg ? msg : "");
	sqlite3_close(db);
}

static int64_t rows_in(const char *path)
{
	sqlite3 *db = NULL;
	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	sqlite3_stmt *q = NULL;
	cr_assert_eq(sqlite3_prepare_v2(db, "SELECT count(*) FROM candidates", -1, &q, NULL), SQLITE_OK);
	cr_assert_eq(sqlite3_step(q), SQLITE_ROW);
	int64_t v = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	sqlite3_close(db);
	return v;
}

Test(shard, the_cost_estimate_is_layers_times_accumulation)
{
	rm_search *s = create();
	cr_assert_eq(rm_search_count(s), 154);
	/* Llama-2-7B: 32 layers. 32 sequences over 8 GPUs: micro-batch 1 accumulates 4, 2 two, 4 one. */
	for (int64_t i = 1; i < rm_search_count(s); i++) {
		rm_candidate c;
		rm_search_candidate(s, i, &c);
		double want = c.micro_batch == 1 ? 128 : c.micro_batch == 2 ? 64 : 32;
		cr_assert_eq(rm_search_cost_estimate(s, i), want, "candidate %lld mb %lld", (long long)i,
			     (long long)c.micro_batch);
	}
	/* as written: micro-batch 1 of the same global batch, 4 micro-batches */
	cr_assert_eq(rm_search_cost_estimate(s, 0), 128);
	rm_search_destroy(s);
}

Test(shard, every_candidate_is_in_exactly_one_shard_and_balanced)
{
	rm_search *s = create();
	int64_t n_cand = rm_search_count(s);
	double heaviest = 0;
	for (int64_t i = 0; i < n_cand; i++)
		if (rm_search_cost_estimate(s, i) > heaviest)
			heaviest = rm_search_cost_estimate(s, i);
	cr_assert_eq(heaviest, 128);
	static const int ns[] = {1, 2, 3, 4, 7, 16, 154, 200};
	for (size_t t = 0; t < sizeof(ns) / sizeof(ns[0]); t++) {
		int n = ns[t];
		int64_t count[200] = {0};
		double work[200] = {0};
		for (int64_t i = 0; i < n_cand; i++) {
			int k = rm_search_shard_of(s, i, n);
			cr_assert(k >= 0 && k < n, "candidate %lld: shard %d of %d", (long long)i, k, n);
			count[k]++;
			work[k] += rm_search_cost_estimate(s, i);
		}
		int64_t total = 0, lo = INT64_MAX, hi = 0;
		double wlo = 1e300, whi = 0;
		for (int k = 0; k < n; k++) {
			cr_assert_eq(count[k], rm_search_shard_size(s, k, n), "n %d shard %d", n, k);
			total += count[k];
			lo = count[k] < lo ? count[k] : lo;
			hi = count[k] > hi ? count[k] : hi;
			wlo = work[k] < wlo ? work[k] : wlo;
			whi = work[k] > whi ? work[k] : whi;
		}
		cr_assert_eq(total, n_cand, "n %d", n);
		cr_assert_leq(hi - lo, 1, "n %d: sizes %lld..%lld", n, (long long)lo, (long long)hi);
		/* the header's bound: at most the heaviest candidate's cost apart */
		cr_assert_leq(whi - wlo, heaviest, "n %d: work %g..%g", n, wlo, whi);
	}
	/* by hand for 2 shards: 52 candidates of cost 128 (as written, then the 51 of micro-batch 1),
	 * 51 of 64, 51 of 32: 6656 + 3264 + 1632 = 11552 in all. The snake deals positions in blocks
	 * of four to shards 0, 1, 1, 0. Cost 128 at positions 0..51: 13 blocks, 26 each. Cost 64 at
	 * 52..102: 12 blocks and 100, 101, 102 (shards 0, 1, 1): 25 to shard 0, 26 to shard 1. Cost 32
	 * at 103..153: 103 (shard 0), 12 blocks, 152 and 153 (0, 1): 26 to shard 0, 25 to shard 1.
	 * Shard 0: 26 x 128 + 25 x 64 + 26 x 32 = 5760; shard 1: 26 x 128 + 26 x 64 + 25 x 32 = 5792. */
	double w0 = 0, w1 = 0;
	for (int64_t i = 0; i < n_cand; i++)
		*(rm_search_shard_of(s, i, 2) == 0 ? &w0 : &w1) += rm_search_cost_estimate(s, i);
	cr_assert_eq(w0 + w1, 11552);
	cr_assert_eq(w0, 5760, "%g", w0);
	cr_assert_eq(w1, 5792, "%g", w1);
	rm_search_destroy(s);
}

Test(shard, the_assignment_is_a_pure_function_of_the_space)
{
	rm_search *a = create(), *b = create();
	for (int64_t i = 0; i < rm_search_count(a); i++)
		for (int n = 2; n <= 5; n++)
			cr_assert_eq(rm_search_shard_of(a, i, n), rm_search_shard_of(b, i, n));
	rm_search_destroy(a);
	rm_search_destroy(b);
}

Test(shard, merged_shards_hold_the_rows_of_one_sweep_for_any_jobs, .timeout = 120)
{
	char one[1200], merged[1200], part[3][1200];
	temp_db(one, sizeof(one), "one.db");
	temp_db(merged, sizeof(merged), "merged.db");
	rm_search *s = create();
	run(s, one, 0, 0, 1, NULL);
	dump want = dump_of(s, one);
	cr_assert_eq(want.rows, 154);
	int64_t evaluated = 0;
	for (int k = 0; k < 3; k++) {
		temp_db(part[k], sizeof(part[k]), "part.db");
		rm_search *t = create();
		/* shards on different thread counts: the rows are the same */
		rm_search_progress p = run(t, part[k], k, 3, k + 1, NULL);
		cr_assert_eq(p.total, rm_search_shard_size(t, k, 3));
		cr_assert_eq(p.done - p.skipped, p.total);
		evaluated += p.total;
		cr_assert_eq(rows_in(part[k]), p.total);
		rm_search_destroy(t);
	}
	cr_assert_eq(evaluated, 154);
	const char *in[] = {part[0], part[1], part[2]};
	rm_search_merge_stats ms;
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_search_merge(merged, in, 3, &ms, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(ms.read, 154);
	cr_assert_eq(ms.added, 154);
	dump got = dump_of(s, merged);
	cr_assert_eq(got.rows, 154);
	cr_assert_str_eq(got.text, want.text);
	/* a shard resumed against the merged database has nothing left to do */
	char again[1200];
	temp_db(again, sizeof(again), "again.db");
	rm_search *t = create();
	rm_search_progress p = run(t, again, 1, 3, 1, merged);
	cr_assert_eq(p.skipped, p.total);
	cr_assert_eq(rows_in(again), 0);
	rm_search_destroy(t);
	free(want.text);
	free(got.text);
	rm_search_destroy(s);
}

Test(shard, a_shard_outside_the_count_is_refused)
{
	rm_search *s = create();
	rm_search_options opt = {.shard_index = 3, .shard_count = 3};
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_search_run(s, &opt, NULL, &err), RM_INVALID);
	cr_assert(strstr(err.msg, "shard 3 of 3"), "%s", err.msg);
	rm_search_destroy(s);
}

/* Two shard files of the small space (shards 0 and 1 of 2). */
static void two_shards(char a[1200], char b[1200])
{
	temp_db(a, 1200, "a.db");
	temp_db(b, 1200, "b.db");
	rm_search *s = create();
	run(s, a, 0, 2, 2, NULL);
	rm_search_destroy(s);
	s = create();
	run(s, b, 1, 2, 2, NULL);
	rm_search_destroy(s);
}

Test(merge, merging_again_adds_nothing_and_keeps_the_rows, .timeout = 120)
{
	char a[1200], b[1200], out[1200];
	two_shards(a, b);
	temp_db(out, sizeof(out), "out.db");
	const char *in[] = {a, b, a};
	rm_search_merge_stats ms;
	rm_error err;
	rm_error_clear(&err);
	/* a listed twice: its rows the second time are the same */
	cr_assert_eq(rm_search_merge(out, in, 3, &ms, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(ms.added, 154);
	cr_assert_eq(ms.same, 77);
	cr_assert_eq(rows_in(out), 154);
	cr_assert_eq(rm_search_merge(out, in, 2, &ms, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(ms.read, 154);
	cr_assert_eq(ms.added, 0);
	cr_assert_eq(ms.same, 154);
	cr_assert_eq(ms.conflicts, 0);
	cr_assert_eq(rows_in(out), 154);
}

Test(merge, a_damaged_row_stops_the_merge_with_nothing_written, .timeout = 120)
{
	char a[1200], b[1200], out[1200];
	two_shards(a, b);
	temp_db(out, sizeof(out), "out.db");
	const char *first[] = {a};
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_search_merge(out, first, 1, NULL, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(rows_in(out), 77);
	/* a figure edited after the row was written: its checksum no longer matches */
	sql(b, "UPDATE candidates SET step_time_s = step_time_s * 0.5 WHERE idx = (SELECT min(idx) FROM candidates)");
	const char *in[] = {a, b};
	rm_search_merge_stats ms;
	cr_assert_eq(rm_search_merge(out, in, 2, &ms, &err), RM_INVALID);
	cr_assert(strstr(err.msg, "fails its checksum"), "%s", err.msg);
	cr_assert_str_eq(err.file, b);
	cr_assert_eq(ms.added, 0);
	cr_assert_eq(rows_in(out), 77); /* the transaction was rolled back */
}

Test(merge, foreign_missing_or_old_files_are_refused, .timeout = 120)
{
	char a[1200], b[1200], out[1200], other[1200], missing[1200];
	two_shards(a, b);
	temp_db(out, sizeof(out), "out.db");
	temp_db(other, sizeof(other), "other.db");
	snprintf(missing, sizeof(missing), "%s.none", a);
	rm_error err;
	rm_error_clear(&err);
	/* another program's SQLite file */
	sql(other, "CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1)");
	const char *in1[] = {a, other};
	cr_assert_eq(rm_search_merge(out, in1, 2, NULL, &err), RM_INVALID);
	cr_assert(strstr(err.msg, "not a remora sweep database"), "%s", err.msg);
	cr_assert_eq(access(out, F_OK) == 0 ? rows_in(out) : 0, 0);
	/* a calibration database (application_id 'RMCA') */
	char calib[1200];
	temp_db(calib, sizeof(calib), "calib.db");
	char pragma[80];
	snprintf(pragma, sizeof(pragma), "PRAGMA application_id=%d; CREATE TABLE runs (x)", (int)RM_APP_ID_CALIB);
	sql(calib, pragma);
	const char *in2[] = {calib};
	cr_assert_eq(rm_search_merge(out, in2, 1, NULL, &err), RM_INVALID);
	cr_assert(strstr(err.msg, "calibration database"), "%s", err.msg);
	/* an input that does not exist is not created */
	const char *in3[] = {missing};
	cr_assert_eq(rm_search_merge(out, in3, 1, NULL, &err), RM_IO);
	cr_assert_eq(access(missing, F_OK), -1);
	/* an older schema's input cannot be verified */
	sql(b, "PRAGMA user_version=2");
	const char *in4[] = {a, b};
	cr_assert_eq(rm_search_merge(out, in4, 2, NULL, &err), RM_UNSUPPORTED);
	cr_assert(strstr(err.msg, "schema version 2"), "%s", err.msg);
	/* an older schema's OUT would lose its table on opening: refused, its rows kept */
	const char *in5[] = {b};
	sql(b, "PRAGMA user_version=3");
	cr_assert_eq(rm_search_merge(out, (const char *const[]){a}, 1, NULL, &err), RM_OK, "%s", err.msg);
	sql(out, "PRAGMA user_version=2");
	cr_assert_eq(rm_search_merge(out, in5, 1, NULL, &err), RM_UNSUPPORTED);
	cr_assert_eq(rows_in(out), 77);
	/* OUT as one of the inputs */
	sql(out, "PRAGMA user_version=3");
	const char *in6[] = {b, out};
	cr_assert_eq(rm_search_merge(out, in6, 2, NULL, &err), RM_INVALID);
	cr_assert(strstr(err.msg, "output of the merge"), "%s", err.msg);
	cr_assert_eq(rows_in(out), 77);
}

Test(merge, a_damaged_row_of_out_is_replaced_by_the_verified_one, .timeout = 120)
{
	char a[1200], b[1200], out[1200];
	two_shards(a, b);
	temp_db(out, sizeof(out), "out.db");
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_search_merge(out, (const char *const[]){a}, 1, NULL, &err), RM_OK, "%s", err.msg);
	sql(out, "UPDATE candidates SET mfu = 0.99 WHERE idx = (SELECT min(idx) FROM candidates)");
	rm_search_merge_stats ms;
	cr_assert_eq(rm_search_merge(out, (const char *const[]){a}, 1, &ms, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(ms.repaired, 1);
	cr_assert_eq(ms.same, 76);
	cr_assert_eq(rows_in(out), 77);
	/* every row verifies again: a search on out recomputes nothing */
	rm_search *s = create();
	rm_search_progress p = run(s, out, 0, 2, 1, NULL);
	cr_assert_eq(rm_search_damaged_rows(s), 0);
	cr_assert_eq(p.skipped, p.total);
	rm_search_destroy(s);
}
