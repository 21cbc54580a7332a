/*
 * The sweep store and the resolved run it is keyed on: rows never served for another model, an
 * other calibration or another build; tampered and damaged rows recomputed or refused; two
 * searches on one database; each database refusing the other's file.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "remora/calib.h"
#include "remora/search.h"

/* ---- helpers ---- */

/* A small space: 2 policies at micro-batch 1, no variants, no ideal: 3 candidates. */
static const char tiny_search[] = "search:\n"
				  "  names: []\n"
				  "  policies: [nothing_saveable, dots_saveable]\n"
				  "  micro_batches: [1]\n"
				  "  flag_variants: ['']\n"
				  "  offload: false\n"
				  "  include_ideal: false\n";

static void temp_dir(char *buf, size_t size)
{
	snprintf(buf, size, "/tmp/remora-store-XXXXXX");
	cr_assert_not_null(mkdtemp(buf));
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	cr_assert_eq(fputs(text, f) >= 0, true);
	cr_assert_eq(fclose(f), 0);
}

static void copy_file(const char *from, const char *to)
{
	FILE *in = fopen(from, "rb");
	cr_assert_not_null(in, "%s", from);
	FILE *out = fopen(to, "wb");
	cr_assert_not_null(out, "%s", to);
	char buf[4096];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		cr_assert_eq(fwrite(buf, 1, n, out), n);
	fclose(in);
	cr_assert_eq(fclose(out), 0);
}

/* A scenario folder holding config.json (a copy of preset) and a scenario naming it. */
static void model_dir(const char *preset, char *scenario, size_t size)
{
	char dir[64], from[1024], cfg[128];
	temp_dir(dir, sizeof(dir));
	snprintf(from, sizeof(from), "%s/models/%s.json", getenv("REMORA_DATA_DIR"), preset);
	snprintf(cfg, sizeof(cfg), "%s/config.json", dir);
	copy_file(from, cfg);
	snprintf(scenario, size, "%s/scenario.yaml", dir);
	char text[1024];
	snprintf(text, sizeof(text), "model: config.json\nhardware: h100-sxm\ntraining: {seq_len: 2048}\n%s",
		 tiny_search);
	write_file(scenario, text);
}

static void load(const char *path, rm_scenario *sc)
{
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(sc);
	cr_assert_eq(rm_scenario_load(path, sc, &err), RM_OK, "%s", err.msg);
}

/* Runs a sweep of sc on db; returns the search (caller destroys) and the progress. */
static rm_search *run(const rm_scenario *sc, rm_hw_resolver resolver, const char *db, rm_search_progress *p)
{
	rm_error err;
	rm_error_clear(&err);
	rm_search *s = rm_search_create(sc, resolver, &err);
	cr_assert_not_null(s, "%s", err.msg);
	rm_search_options opt = {.db_path = db, .jobs = 1};
	cr_assert_eq(rm_search_run(s, &opt, p, &err), RM_OK, "%s", err.msg);
	return s;
}

/* A folder (dir) holding s.yaml = head + the tiny search space, loaded into sc. */
static void tiny_scenario(const char *head, char *dir, size_t dir_size, rm_scenario *sc)
{
	temp_dir(dir, dir_size);
	char path[128], text[1024];
	snprintf(path, sizeof(path), "%s/s.yaml", dir);
	snprintf(text, sizeof(text), "%s%s", head, tiny_search);
	write_file(path, text);
	load(path, sc);
}

static double as_written_step(rm_search *s)
{
	rm_candidate_result r;
	rm_error err;
	cr_assert(rm_search_as_written(s, &r, &err));
	return r.step_time_s;
}

static void db_path(char *buf, size_t size)
{
	char dir[64];
	temp_dir(dir, sizeof(dir));
	snprintf(buf, size, "%s/sweep.db", dir);
}

static void sql(const char *path, const char *stmt)
{
	sqlite3 *db = NULL;
	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	char *msg = NULL;
	cr_assert_eq(sqlite3_exec(db, stmt, NULL, NULL, &msg), SQLITE_OK, "%s: %s", stmt, msg ? msg : "");
	sqlite3_close(db);
}

static int64_t sql_int(const char *path, const char *stmt)
{
	sqlite3 *db = NULL;
	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	sqlite3_stmt *q = NULL;
	cr_assert_eq(sqlite3_prepare_v2(db, stmt, -1, &q, NULL), SQLITE_OK, "%s", stmt);
	cr_assert_eq(sqlite3_step(q), SQLITE_ROW);
	int64_t v = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	sqlite3_close(db);
	return v;
}

/* ---- the resolved run ---- */

static rm_status resolve_text(const char *text, rm_hw_resolver resolver, rm_scenario_resolved *res)
{
	rm_scenario sc;
	rm_scenario_init(&sc);
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_scenario_parse(text, strlen(text), "test.yaml", &sc, &err), RM_OK, "%s", err.msg);
	rm_status st = rm_scenario_resolve(&sc, resolver, res, &err);
	cr_assert_eq(st, RM_OK, "%s", err.msg);
	return st;
}

static void digest_of(const char *text, rm_hw_resolver resolver, char hex[RM_SHA256_HEX])
{
	rm_scenario_resolved res;
	resolve_text(text, resolver, &res);
	rm_scenario_resolved_digest(&res, hex);
	rm_scenario_resolved_finish(&res);
}

/* A hardware resolver standing for a calibration re-fit: the GEMM rate it returns is settable. */
static double fitted_gemm_TFLOPs = 0;
static rm_status refit_resolver(const char *spec, const char *nccl_version, int ranks, int nodes, rm_hw_profile *hw,
				rm_nccl_model *nccl, rm_error *err)
{
	rm_status st = rm_calib_hw_resolver(spec, nccl_version, ranks, nodes, hw, nccl, err);
	if (st == RM_OK && fitted_gemm_TFLOPs > 0) {
		rm_hw_profile_set(hw, RM_HW_gemm_bf16_TFLOPs, fitted_gemm_TFLOPs, "test fit");
		if (nccl)
			nccl->hw = *hw;
	}
	return st;
}

Test(store, digest_is_what_the_scenario_resolves_to)
{
	char a[RM_SHA256_HEX], b[RM_SHA256_HEX], c[RM_SHA256_HEX];
	/* the same values spelled differently (alias, explicit default) give the same run */
	digest_of("model: llama-2-7b\nhardware: h100-sxm\n", NULL, a);
	digest_of("model: llama-2-7b\nhardware: h100\ntraining: {seq_len: 4096, micro_batch: 1}\n", NULL, b);
	cr_assert_str_eq(a, b);
	cr_assert_eq(strlen(a), 64);
	/* and every kind of value changes it */
	const char *const variants[] = {
		"model: llama-2-13b\n",
		"model: llama-2-7b\nhardware: h200-sxm\n",
		"model: llama-2-7b\ntraining: {micro_batch: 2}\n",
		"model: llama-2-7b\nxla_flags: --xla_gpu_memory_limit_slop_factor=120\n",
		"model: llama-2-7b\nremat: {policy: dots_saveable}\n",
		"model: llama-2-7b\nscheduler: {nccl_version: '2.18'}\n",
		"model: llama-2-7b\nscheduler: {cost_model: remora}\n",
		"model: llama-2-7b\nscheduler: {hw_queues: 1}\n",
		"model: llama-2-7b\nmemory_headroom_gib: 4\n",
	};
	for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
		digest_of(variants[i], NULL, c);
		cr_assert_str_neq(a, c, "%s", variants[i]);
	}
	/* a re-fitted calibration is another run */
	fitted_gemm_TFLOPs = 700;
	digest_of("model: llama-2-7b\n", refit_resolver, c);
	fitted_gemm_TFLOPs = 0;
	cr_assert_str_neq(a, c);
	/* the cost-model revision is part of it */
	rm_scenario_resolved res;
	resolve_text("model: llama-2-7b\n", NULL, &res);
	rm_canon canon;
	rm_canon_init(&canon);
	rm_scenario_resolved_canonical(&res, &canon);
	char line[128];
	snprintf(line, sizeof(line), "model_revision=%s\n", rm_model_revision());
	cr_assert_not_null(strstr(canon.buf, line));
	cr_assert_null(strstr(canon.buf, "llama"), "names are not part of the run");
	rm_canon_finish(&canon);
	rm_scenario_resolved_finish(&res);
}

Test(store, sha256_matches_fips_180_2_example)
{
	/* FIPS 180-2 appendix B.1: SHA-256("abc") */
	char hex[RM_SHA256_HEX];
	cr_assert_str_eq(rm_sha256_hex_of("abc", hex),
			 "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

/* ---- the store ---- */

Test(store, two_models_behind_one_file_name_share_no_rows)
{
	char s7[256], s13[256], db[128];
	model_dir("llama-2-7b", s7, sizeof(s7));
	model_dir("llama-2-13b", s13, sizeof(s13));
	db_path(db, sizeof(db));
	rm_scenario a, b;
	load(s7, &a);
	load(s13, &b);
	rm_search_progress p;
	rm_search *sa = run(&a, NULL, db, &p);
	cr_assert_eq(p.skipped, 0);
	double t7 = as_written_step(sa);
	rm_search_destroy(sa);
	rm_search *sb = run(&b, NULL, db, &p);
	cr_assert_eq(p.skipped, 0, "the 13B search reused %lld rows of the 7B's", (long long)p.skipped);
	double t13 = as_written_step(sb);
	rm_search_destroy(sb);
	/* 13B: 1.93x the parameters, so clearly slower per step at the same tokens */
	cr_assert_gt(t13, 1.5 * t7, "7B %.4f s, 13B %.4f s", t7, t13);
	/* run again: now both are stored and everything is skipped */
	sb = run(&b, NULL, db, &p);
	cr_assert_eq(p.skipped, 3);
	cr_assert_float_eq(as_written_step(sb), t13, 1e-12);
	rm_search_destroy(sb);
	cr_assert_eq(sql_int(db, "SELECT count(*) FROM candidates"), 6);
}

Test(store, a_refitted_calibration_recomputes_every_row)
{
	char dir[64], db[128];
	rm_scenario sc;
	tiny_scenario("model: llama-2-7b\ntraining: {seq_len: 2048}\n", dir, sizeof(dir), &sc);
	db_path(db, sizeof(db));
	rm_search_progress p;
	fitted_gemm_TFLOPs = 800;
	rm_search *s = run(&sc, refit_resolver, db, &p);
	double before = as_written_step(s);
	rm_search_destroy(s);
	fitted_gemm_TFLOPs = 400; /* the re-fit halves the GEMM rate */
	s = run(&sc, refit_resolver, db, &p);
	fitted_gemm_TFLOPs = 0;
	cr_assert_eq(p.skipped, 0, "rows of the old fit were reused");
	double after = as_written_step(s);
	rm_search_destroy(s);
	/* GEMMs (forward, backward, recompute) are about 60% of this step and a quarter of it is
	 * exposed communication that slower GEMMs partly hide: 1.3x at least */
	cr_assert_gt(after, 1.3 * before, "800 TFLOP/s: %.4f s, 400 TFLOP/s: %.4f s", before, after);
}

Test(store, a_tampered_row_is_recomputed_not_trusted)
{
	char dir[64], db[128];
	rm_scenario sc;
	tiny_scenario("model: llama-2-7b\ntraining: {seq_len: 2048}\n", dir, sizeof(dir), &sc);
	db_path(db, sizeof(db));
	rm_search_progress p;
	rm_search *s = run(&sc, NULL, db, &p);
	rm_candidate_result best;
	rm_error err;
	cr_assert_eq(rm_search_top(s, RM_SEARCH_ANY, &best, 1, &err), 1);
	rm_search_destroy(s);
	/* someone edits the slowest row into an impossible winner */
	sql(db, "UPDATE candidates SET step_time_s = 0, tokens_per_s_per_gpu = 1e12 WHERE idx = "
		"(SELECT idx FROM candidates ORDER BY tokens_per_s_per_gpu ASC LIMIT 1)");
	s = run(&sc, NULL, db, &p);
	cr_assert_eq(rm_search_damaged_rows(s), 1);
	cr_assert_eq(p.skipped, 2, "the two intact rows are reused, the edited one recomputed");
	rm_candidate_result again;
	cr_assert_eq(rm_search_top(s, RM_SEARCH_ANY, &again, 1, &err), 1);
	cr_assert_str_eq(again.c.key, best.c.key);
	cr_assert_float_eq(again.tokens_per_s_per_gpu, best.tokens_per_s_per_gpu, 1e-9);
	rm_search_destroy(s);
	cr_assert_lt(sql_int(db, "SELECT max(tokens_per_s_per_gpu) FROM candidates"), 1e6);
}

Test(store, a_damaged_file_is_refused_with_the_reason)
{
	char dir[64], db[128];
	rm_scenario sc;
	tiny_scenario("model: llama-2-7b\ntraining: {seq_len: 2048}\n", dir, sizeof(dir), &sc);
	db_path(db, sizeof(db));
	rm_search_progress p;
	rm_search_destroy(run(&sc, NULL, db, &p));
	/* overwrite every page after the header page with 0xff */
	struct stat st;
	cr_assert_eq(stat(db, &st), 0);
	cr_assert_gt(st.st_size, 4096);
	int fd = open(db, O_WRONLY);
	cr_assert_geq(fd, 0);
	char junk[4096];
	memset(junk, 0xff, sizeof(junk));
	for (off_t o = 4096; o < st.st_size; o += 4096)
		cr_assert_eq(pwrite(fd, junk, sizeof(junk), o), (ssize_t)sizeof(junk));
	close(fd);
	rm_error err;
	rm_error_clear(&err);
	rm_search *s = rm_search_create(&sc, NULL, &err);
	cr_assert_not_null(s, "%s", err.msg);
	rm_search_options opt = {.db_path = db, .jobs = 1};
	cr_assert_neq(rm_search_run(s, &opt, &p, &err), RM_OK, "a damaged database gave a result");
	cr_assert(strstr(err.msg, "malformed") || strstr(err.msg, "damaged"), "%s", err.msg);
	cr_assert(strstr(err.file, "sweep.db"), "the message names the file: %s", err.file);
	rm_search_destroy(s);
}

Test(store, old_schema_rows_are_dropped_and_the_file_is_marked)
{
	char dir[64], db[128];
	rm_scenario sc;
	tiny_scenario("model: llama-2-7b\ntraining: {seq_len: 2048}\n", dir, sizeof(dir), &sc);
	db_path(db, sizeof(db));
	sql(db, "CREATE TABLE candidates (key TEXT PRIMARY KEY, scenario TEXT NOT NULL, idx INTEGER NOT NULL);"
		"INSERT INTO candidates VALUES ('00000000deadbeef', '0123456789abcdef', 0);"
		"PRAGMA user_version=1;");
	rm_search_progress p;
	rm_search *s = run(&sc, NULL, db, &p);
	cr_assert_eq(p.skipped, 0);
	cr_assert_eq(rm_search_rows(s), 3);
	rm_search_destroy(s);
	cr_assert_eq(sql_int(db, "PRAGMA application_id"), (int64_t)(int32_t)RM_APP_ID_SWEEP);
	cr_assert_eq(sql_int(db, "PRAGMA user_version"), 3);
	cr_assert_eq(sql_int(db, "SELECT count(*) FROM candidates"), 3);
}

Test(store, a_calibration_database_is_not_a_sweep_store)
{
	char dir[64], db[128];
	rm_scenario sc;
	tiny_scenario("model: llama-2-7b\n", dir, sizeof(dir), &sc);
	snprintf(db, sizeof(db), "%s/calib.db", dir);
	rm_error err;
	rm_error_clear(&err);
	rm_calib_db *c = rm_calib_db_open(db, true, &err);
	cr_assert_not_null(c, "%s", err.msg);
	rm_calib_db_close(c);
	int64_t tables = sql_int(db, "SELECT count(*) FROM sqlite_master");
	rm_search *s = rm_search_create(&sc, NULL, &err);
	cr_assert_not_null(s, "%s", err.msg);
	rm_search_options opt = {.db_path = db, .jobs = 1};
	rm_search_progress p;
	cr_assert_neq(rm_search_run(s, &opt, &p, &err), RM_OK);
	cr_assert(strstr(err.msg, "calibration database"), "%s", err.msg);
	rm_search_destroy(s);
	cr_assert_eq(sql_int(db, "SELECT count(*) FROM sqlite_master"), tables, "the file was not touched");
	/* another program's database, marked with its own id */
	char other[128];
	snprintf(other, sizeof(other), "%s/other.db", dir);
	sql(other, "PRAGMA application_id=1234; CREATE TABLE t(x);");
	s = rm_search_create(&sc, NULL, &err);
	opt.db_path = other;
	cr_assert_neq(rm_search_run(s, &opt, &p, &err), RM_OK);
	cr_assert(strstr(err.msg, "application_id 0x000004d2"), "%s", err.msg);
	rm_search_destroy(s);
}

typedef struct concurrent {
	const rm_scenario *sc;
	const char *db;
	rm_status st;
	char msg[512];
	int64_t rows;
} concurrent;

static void *concurrent_search(void *arg)
{
	concurrent *c = arg;
	rm_error err;
	rm_error_clear(&err);
	rm_search *s = rm_search_create(c->sc, NULL, &err);
	if (!s) {
		c->st = err.status;
		snprintf(c->msg, sizeof(c->msg), "%s", err.msg);
		return NULL;
	}
	rm_search_options opt = {.db_path = c->db, .jobs = 1};
	rm_search_progress p;
	c->st = rm_search_run(s, &opt, &p, &err);
	snprintf(c->msg, sizeof(c->msg), "%s", err.msg);
	c->rows = rm_search_rows(s);
	rm_search_destroy(s);
	return NULL;
}

Test(store, two_searches_on_one_database_both_finish)
{
	char dir[64], path[128], db[128];
	temp_dir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/s.yaml", dir);
	/* 3 names: 8 subsets + 7 offloaded + 1 policy, 2 micro-batches: 33 candidates */
	write_file(path, "model: llama-2-7b\ntraining: {seq_len: 2048}\n"
			 "search:\n"
			 "  names: [dot_attention_query, dot_attention_value, dot_mlp_gate]\n"
			 "  policies: [dots_saveable]\n"
			 "  micro_batches: [1, 2]\n"
			 "  flag_variants: ['']\n"
			 "  include_ideal: false\n");
	db_path(db, sizeof(db));
	rm_scenario sc;
	load(path, &sc);
	concurrent a = {.sc = &sc, .db = db}, b = {.sc = &sc, .db = db};
	pthread_t ta, tb;
	cr_assert_eq(pthread_create(&ta, NULL, concurrent_search, &a), 0);
	cr_assert_eq(pthread_create(&tb, NULL, concurrent_search, &b), 0);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	cr_assert_eq(a.st, RM_OK, "first: %s", a.msg);
	cr_assert_eq(b.st, RM_OK, "second: %s", b.msg);
	cr_assert_eq(a.rows, 33);
	cr_assert_eq(b.rows, 33);
	cr_assert_eq(sql_int(db, "SELECT count(*) FROM candidates"), 33);
}

Test(store, resuming_with_many_threads_finishes_with_every_row, .timeout = 60)
{
	/* 5 names: 32 subsets + 31 offloaded + 2 policies, 2 micro-batches, 2 variants + ideal: 391
	 * candidates, more than the sweep's window of 256, so candidates i and i + 256 share a slot.
	 * Resuming from a full database, workers skip as fast as they can take indices: a slot
	 * claimed by two of them lost a result and the writer waited for ever. */
	char dir[64], path[128], db[128];
	temp_dir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/s.yaml", dir);
	write_file(path, "model: llama-2-7b\ntraining: {seq_len: 1024}\n"
			 "search:\n"
			 "  names: [dot_attention_query, dot_attention_key, dot_attention_value, dot_mlp_gate, dot_mlp_up]\n"
			 "  policies: [nothing_saveable, dots_saveable]\n"
			 "  micro_batches: [1, 2]\n"
			 "  flag_variants: ['', '--xla_gpu_memory_limit_slop_factor=120']\n");
	db_path(db, sizeof(db));
	rm_scenario sc;
	load(path, &sc);
	rm_error err;
	rm_error_clear(&err);
	rm_search *s = rm_search_create(&sc, NULL, &err);
	cr_assert_not_null(s, "%s", err.msg);
	cr_assert_eq(rm_search_count(s), 391);
	rm_search_options opt = {.db_path = db, .jobs = 2};
	rm_search_progress p;
	cr_assert_eq(rm_search_run(s, &opt, &p, &err), RM_OK, "%s", err.msg);
	rm_search_destroy(s);
	/* every resume skips all 391; half deleted, it recomputes exactly those */
	for (int round = 0; round < 40; round++) {
		if (round == 20)
			sql(db, "DELETE FROM candidates WHERE idx % 2 = 1");
		s = rm_search_create(&sc, NULL, &err);
		opt.jobs = 4;
		cr_assert_eq(rm_search_run(s, &opt, &p, &err), RM_OK, "%s", err.msg);
		cr_assert_eq(p.done, 391);
		cr_assert_eq(p.skipped, round == 20 ? 196 : 391, "round %d: %lld skipped", round, (long long)p.skipped);
		cr_assert_eq(rm_search_rows(s), 391);
		rm_search_destroy(s);
	}
}

Test(store, a_database_must_be_a_regular_file)
{
	/* SQLite would otherwise create "/dev/null-journal" beside the device */
	char dir[64];
	rm_scenario sc;
	tiny_scenario("model: llama-2-7b\n", dir, sizeof(dir), &sc);
	rm_error err;
	rm_error_clear(&err);
	const char *const bad[] = {"/dev/null", dir};
	for (int i = 0; i < 2; i++) {
		rm_search *s = rm_search_create(&sc, NULL, &err);
		rm_search_options opt = {.db_path = bad[i], .jobs = 1};
		rm_search_progress p;
		cr_assert_neq(rm_search_run(s, &opt, &p, &err), RM_OK, "%s", bad[i]);
		cr_assert(strstr(err.msg, "not a regular file"), "%s", err.msg);
		cr_assert_str_eq(err.file, bad[i]);
		rm_search_destroy(s);
	}
	struct stat st;
	cr_assert_neq(stat("/dev/null-journal", &st), 0, "no journal was made beside the device");
}

Test(store, rows_of_another_search_space_are_not_ranked)
{
	/* two searches of one scenario share a database: the second asks for nothing_saveable
	 * only, so dots_saveable's row (faster, stored by the first) must not be its winner, nor
	 * appear among its rows; what it ranks is what a fresh search ranks */
	char dir[64], db[128];
	rm_scenario sc;
	tiny_scenario("model: gpt-2\ntraining: {seq_len: 1024}\n", dir, sizeof(dir), &sc);
	db_path(db, sizeof(db));
	rm_search_progress p;
	rm_search *s = run(&sc, NULL, db, &p);
	cr_assert_eq(rm_search_rows(s), 3, "as written + 2 policies");
	rm_search_destroy(s);
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_scenario_set(&sc, "search.policies=[nothing_saveable]", &err), RM_OK, "%s", err.msg);
	s = run(&sc, NULL, db, &p);
	rm_search *fresh = run(&sc, NULL, NULL, &p);
	cr_assert_eq(rm_search_rows(s), 2, "as written + nothing_saveable, not the stored dots_saveable");
	rm_candidate_result a[4], b[4];
	int na = rm_search_top(s, RM_SEARCH_ANY, a, 4, &err), nb = rm_search_top(fresh, RM_SEARCH_ANY, b, 4, &err);
	cr_assert_eq(na, nb);
	for (int i = 0; i < na; i++) {
		cr_assert_str_eq(a[i].c.key, b[i].c.key);
		cr_assert_eq(a[i].c.index, b[i].c.index);
		cr_assert_null(strstr(a[i].c.policy, "dots_saveable"), "%s", a[i].c.policy);
	}
	cr_assert_eq(sql_int(db, "SELECT count(*) FROM candidates"), 3, "the other space's row is kept, not ranked");
	rm_search_destroy(s);
	rm_search_destroy(fresh);
}

Test(store, rows_another_search_stores_later_are_ranked_at_this_spaces_index)
{
	/* this search opens the database first (empty), then a search listing the policies the
	 * other way round stores its 3 rows from its own connection: this one ranks all 3, each at
	 * its index here (nothing_saveable 1, dots_saveable 2), not the other search's */
	char dir[64], db[128];
	rm_scenario sc, swapped;
	tiny_scenario("model: gpt-2\ntraining: {seq_len: 1024}\n", dir, sizeof(dir), &sc);
	tiny_scenario("model: gpt-2\ntraining: {seq_len: 1024}\n", dir, sizeof(dir), &swapped);
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_scenario_set(&swapped, "search.policies=[dots_saveable, nothing_saveable]", &err), RM_OK, "%s",
		     err.msg);
	db_path(db, sizeof(db));
	rm_search *s = rm_search_create(&sc, NULL, &err);
	cr_assert_not_null(s, "%s", err.msg);
	cr_assert_eq(rm_search_reopen(s, db, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(rm_search_rows(s), 0);
	rm_search_progress p;
	rm_search *other = run(&swapped, NULL, db, &p);
	rm_search_destroy(other);
	cr_assert_eq(rm_search_rows(s), 3);
	const char *const want[] = {"", "nothing_saveable", "dots_saveable"};
	for (int i = 1; i < 3; i++) {
		rm_candidate_result r;
		cr_assert_eq(rm_search_result(s, i, &r, &err), 1, "%s", err.msg);
		cr_assert_eq(r.c.index, i);
		cr_assert(strstr(r.c.policy, want[i]), "index %d: %s", i, r.c.policy);
		rm_candidate c;
		rm_search_candidate(s, i, &c);
		cr_assert_str_eq(r.c.key, c.key);
	}
	rm_search_destroy(s);
}
