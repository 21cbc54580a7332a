/*
 * The sweep store (remora/search.h): one SQLite row per candidate, keyed by the hash of its
 * configuration. Schema version in PRAGMA user_version; a database from a newer remora is
 * refused before anything is written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search_internal.h"

#define STORE_SCHEMA_VERSION 1

static const char *const schema_sql =
	"CREATE TABLE IF NOT EXISTS candidates ("
	" key TEXT PRIMARY KEY,"
	" scenario TEXT NOT NULL,"
	" idx INTEGER NOT NULL,"
	" label TEXT NOT NULL,"
	" policy TEXT NOT NULL,"
	" micro_batch INTEGER NOT NULL,"
	" flags TEXT NOT NULL,"
	" mode TEXT NOT NULL,"
	" as_written INTEGER NOT NULL,"
	" ok INTEGER NOT NULL,"
	" error TEXT NOT NULL,"
	" step_time_s REAL, tokens_per_s_per_gpu REAL, mfu REAL,"
	" peak_memory_bytes INTEGER, memory_capacity_bytes INTEGER, fits INTEGER,"
	" compute_busy_s REAL, comm_total_s REAL, exposed_comm_s REAL, recompute_s REAL, lower_bound_s REAL,"
	" collectives INTEGER, async INTEGER, sync INTEGER,"
	" sync_memory_limit INTEGER, sync_disabled INTEGER, sync_nothing_to_overlap INTEGER,"
	" sync_overlap_limit INTEGER, sync_no_lhs INTEGER, saved_bytes_step INTEGER);"
	"CREATE INDEX IF NOT EXISTS candidates_rank ON candidates(scenario, fits, tokens_per_s_per_gpu);";

static rm_status db_error(rm_search *s, rm_error *err, const char *what)
{
	return rm_error_set(err, RM_IO, NULL, 0, 0, "sweep database: %s: %s", what,
			    s->db ? sqlite3_errmsg(s->db) : "not open");
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

rm_status search_store_open(rm_search *s, const char *path, rm_error *err)
{
	if (s->db)
		return RM_OK;
	if (sqlite3_open_v2(path ? path : ":memory:", &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
			    NULL) != SQLITE_OK) {
		rm_status st = rm_error_set(err, RM_IO, path, 0, 0, "cannot open the sweep database: %s",
					    s->db ? sqlite3_errmsg(s->db) : "out of memory");
		sqlite3_close(s->db);
		s->db = NULL;
		return st;
	}
	sqlite3_busy_timeout(s->db, 5000);
	sqlite3_stmt *st = NULL;
	int version = 0;
	if (sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK)
		return rm_error_set(err, RM_IO, path, 0, 0, "not an SQLite database: %s", sqlite3_errmsg(s->db));
	if (sqlite3_step(st) == SQLITE_ROW)
		version = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	/* a calibration database or anything else is not a sweep store */
	if (sqlite3_prepare_v2(s->db, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name<>'candidates'", -1,
			       &st, NULL) != SQLITE_OK)
		return rm_error_set(err, RM_IO, path, 0, 0, "not an SQLite database: %s", sqlite3_errmsg(s->db));
	int others = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
	sqlite3_finalize(st);
	if (others > 0)
		return rm_error_set(err, RM_INVALID, path, 0, 0,
				    "this database has other tables: it is not a remora sweep store (a calibration "
				    "database?); give another --db");
	if (version > STORE_SCHEMA_VERSION)
		return rm_error_set(err, RM_UNSUPPORTED, path, 0, 0,
				    "the sweep database has schema version %d, newer than this remora's %d; use a newer "
				    "remora or another --db",
				    version, STORE_SCHEMA_VERSION);
	char *msg = NULL;
	if (sqlite3_exec(s->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", NULL, NULL, &msg) != SQLITE_OK)
		sqlite3_free(msg);
	if (sqlite3_exec(s->db, schema_sql, NULL, NULL, &msg) != SQLITE_OK) {
		rm_status r = rm_error_set(err, RM_IO, path, 0, 0, "cannot create the sweep tables: %s", msg ? msg : "?");
		sqlite3_free(msg);
		return r;
	}
	char pragma[64];
	snprintf(pragma, sizeof(pragma), "PRAGMA user_version=%d", STORE_SCHEMA_VERSION);
	sqlite3_exec(s->db, pragma, NULL, NULL, NULL);
	if (sqlite3_prepare_v2(s->db,
			       "INSERT OR IGNORE INTO candidates VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
			       -1, &s->put, NULL) != SQLITE_OK)
		return db_error(s, err, "prepare insert");
	/* the keys stored for this scenario */
	char scen[32];
	snprintf(scen, sizeof(scen), "%016llx", (unsigned long long)s->scenario_hash);
	if (sqlite3_prepare_v2(s->db, "SELECT key FROM candidates WHERE scenario = ?", -1, &st, NULL) != SQLITE_OK)
		return db_error(s, err, "prepare select");
	sqlite3_bind_text(st, 1, scen, -1, SQLITE_TRANSIENT);
	int64_t cap = 1024;
	s->keys = rm_new(uint64_t, (size_t)cap);
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *k = (const char *)sqlite3_column_text(st, 0);
		if (s->n_keys == cap) {
			cap *= 2;
			s->keys = rm_xrealloc(s->keys, (size_t)cap * sizeof(uint64_t));
		}
		s->keys[s->n_keys++] = k ? strtoull(k, NULL, 16) : 0;
	}
	sqlite3_finalize(st);
	qsort(s->keys, (size_t)s->n_keys, sizeof(uint64_t), cmp_u64);
	return RM_OK;
}

void search_store_close(rm_search *s)
{
	sqlite3_finalize(s->put);
	sqlite3_finalize(s->has);
	s->put = s->has = NULL;
	if (s->db)
		sqlite3_close(s->db);
	s->db = NULL;
	free(s->keys);
	s->keys = NULL;
	s->n_keys = 0;
}

bool search_store_has(rm_search *s, uint64_t key)
{
	return s->n_keys > 0 && bsearch(&key, s->keys, (size_t)s->n_keys, sizeof(uint64_t), cmp_u64) != NULL;
}

rm_status search_store_begin(rm_search *s, rm_error *err)
{
	int rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
	if (rc == SQLITE_BUSY)
		return rm_error_set(err, RM_IO, sqlite3_db_filename(s->db, "main"), 0, 0,
				    "the sweep database is locked: another remora search is writing to it; wait for it "
				    "or give another --db");
	if (rc != SQLITE_OK)
		return db_error(s, err, "begin");
	return RM_OK;
}

rm_status search_store_commit(rm_search *s, rm_error *err)
{
	if (sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		return db_error(s, err, "commit");
	return RM_OK;
}

rm_status search_store_put(rm_search *s, const rm_candidate_result *r, rm_error *err)
{
	sqlite3_stmt *p = s->put;
	char key[32], scen[32];
	snprintf(key, sizeof(key), "%016llx", (unsigned long long)r->c.key);
	snprintf(scen, sizeof(scen), "%016llx", (unsigned long long)s->scenario_hash);
	int i = 1;
	sqlite3_reset(p);
	sqlite3_bind_text(p, i++, key, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(p, i++, scen, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(p, i++, r->c.index);
	sqlite3_bind_text(p, i++, r->c.label, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(p, i++, r->c.policy, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(p, i++, r->c.micro_batch);
	sqlite3_bind_text(p, i++, r->c.flags, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(p, i++, r->c.ideal ? "ideal" : "xla", -1, SQLITE_STATIC);
	sqlite3_bind_int(p, i++, r->c.as_written);
	sqlite3_bind_int(p, i++, r->ok);
	sqlite3_bind_text(p, i++, r->error, -1, SQLITE_TRANSIENT);
	sqlite3_bind_double(p, i++, r->step_time_s);
	sqlite3_bind_double(p, i++, r->tokens_per_s_per_gpu);
	sqlite3_bind_double(p, i++, r->mfu);
	sqlite3_bind_int64(p, i++, r->peak_memory_bytes);
	sqlite3_bind_int64(p, i++, r->memory_capacity_bytes);
	sqlite3_bind_int(p, i++, r->fits);
	sqlite3_bind_double(p, i++, r->compute_busy_s);
	sqlite3_bind_double(p, i++, r->comm_total_s);
	sqlite3_bind_double(p, i++, r->exposed_comm_s);
	sqlite3_bind_double(p, i++, r->recompute_s);
	sqlite3_bind_double(p, i++, r->lower_bound_s);
	sqlite3_bind_int(p, i++, r->collectives);
	sqlite3_bind_int(p, i++, r->async);
	sqlite3_bind_int(p, i++, r->sync);
	sqlite3_bind_int(p, i++, r->sync_memory_limit);
	sqlite3_bind_int(p, i++, r->sync_disabled);
	sqlite3_bind_int(p, i++, r->sync_nothing);
	sqlite3_bind_int(p, i++, r->sync_overlap);
	sqlite3_bind_int(p, i++, r->sync_no_lhs);
	sqlite3_bind_int64(p, i++, r->saved_bytes_step);
	if (sqlite3_step(p) != SQLITE_DONE)
		return db_error(s, err, "insert");
	return RM_OK;
}

/* ---- reading back ---- */

static void row_to_result(sqlite3_stmt *q, rm_candidate_result *r)
{
	memset(r, 0, sizeof(*r));
	int i = 0;
	const char *t;
	t = (const char *)sqlite3_column_text(q, i++);
	r->c.key = t ? strtoull(t, NULL, 16) : 0;
	i++; /* scenario */
	r->c.index = sqlite3_column_int64(q, i++);
	t = (const char *)sqlite3_column_text(q, i++);
	snprintf(r->c.label, sizeof(r->c.label), "%s", t ? t : "");
	t = (const char *)sqlite3_column_text(q, i++);
	snprintf(r->c.policy, sizeof(r->c.policy), "%s", t ? t : "");
	r->c.micro_batch = sqlite3_column_int64(q, i++);
	t = (const char *)sqlite3_column_text(q, i++);
	snprintf(r->c.flags, sizeof(r->c.flags), "%s", t ? t : "");
	t = (const char *)sqlite3_column_text(q, i++);
	r->c.ideal = t && strcmp(t, "ideal") == 0;
	r->c.as_written = sqlite3_column_int(q, i++);
	r->ok = sqlite3_column_int(q, i++);
	t = (const char *)sqlite3_column_text(q, i++);
	snprintf(r->error, sizeof(r->error), "%s", t ? t : "");
	r->step_time_s = sqlite3_column_double(q, i++);
	r->tokens_per_s_per_gpu = sqlite3_column_double(q, i++);
	r->mfu = sqlite3_column_double(q, i++);
	r->peak_memory_bytes = sqlite3_column_int64(q, i++);
	r->memory_capacity_bytes = sqlite3_column_int64(q, i++);
	r->fits = sqlite3_column_int(q, i++);
	r->compute_busy_s = sqlite3_column_double(q, i++);
	r->comm_total_s = sqlite3_column_double(q, i++);
	r->exposed_comm_s = sqlite3_column_double(q, i++);
	r->recompute_s = sqlite3_column_double(q, i++);
	r->lower_bound_s = sqlite3_column_double(q, i++);
	r->collectives = sqlite3_column_int(q, i++);
	r->async = sqlite3_column_int(q, i++);
	r->sync = sqlite3_column_int(q, i++);
	r->sync_memory_limit = sqlite3_column_int(q, i++);
	r->sync_disabled = sqlite3_column_int(q, i++);
	r->sync_nothing = sqlite3_column_int(q, i++);
	r->sync_overlap = sqlite3_column_int(q, i++);
	r->sync_no_lhs = sqlite3_column_int(q, i++);
	r->saved_bytes_step = sqlite3_column_int64(q, i++);
}

static sqlite3_stmt *query(rm_search *s, const char *sql, rm_error *err)
{
	sqlite3_stmt *q = NULL;
	if (!s->db || sqlite3_prepare_v2(s->db, sql, -1, &q, NULL) != SQLITE_OK) {
		db_error(s, err, "query");
		return NULL;
	}
	char scen[32];
	snprintf(scen, sizeof(scen), "%016llx", (unsigned long long)s->scenario_hash);
	sqlite3_bind_text(q, 1, scen, -1, SQLITE_TRANSIENT);
	return q;
}

int rm_search_top(rm_search *s, rm_search_filter filter, rm_candidate_result *out, int k, rm_error *err)
{
	/* ties broken by key so the order is total and deterministic */
	static const char *const sql[] = {
		"SELECT * FROM candidates WHERE scenario = ? AND ok = 1 AND fits = 1 "
		"ORDER BY tokens_per_s_per_gpu DESC, peak_memory_bytes ASC, length(policy) ASC, key ASC LIMIT ?",
		"SELECT * FROM candidates WHERE scenario = ? AND ok = 1 AND fits = 1 AND mode = 'xla' "
		"ORDER BY tokens_per_s_per_gpu DESC, peak_memory_bytes ASC, length(policy) ASC, key ASC LIMIT ?",
		"SELECT * FROM candidates WHERE scenario = ? AND ok = 1 AND fits = 1 AND mode = 'ideal' "
		"ORDER BY tokens_per_s_per_gpu DESC, peak_memory_bytes ASC, length(policy) ASC, key ASC LIMIT ?",
	};
	sqlite3_stmt *q = query(s, sql[filter], err);
	if (!q)
		return -1;
	sqlite3_bind_int(q, 2, k);
	int n = 0;
	while (n < k && sqlite3_step(q) == SQLITE_ROW)
		row_to_result(q, &out[n++]);
	sqlite3_finalize(q);
	return n;
}

int rm_search_pareto(rm_search *s, rm_candidate_result *out, int cap, rm_error *err)
{
	sqlite3_stmt *q = query(s,
				"SELECT * FROM candidates WHERE scenario = ? AND ok = 1 AND fits = 1 "
				"ORDER BY tokens_per_s_per_gpu DESC, peak_memory_bytes ASC, key ASC",
				err);
	if (!q)
		return -1;
	int n = 0;
	int64_t best_mem = INT64_MAX;
	rm_candidate_result r;
	while (sqlite3_step(q) == SQLITE_ROW) {
		row_to_result(q, &r);
		if (r.peak_memory_bytes < best_mem) {
			best_mem = r.peak_memory_bytes;
			if (n < cap)
				out[n++] = r;
		}
	}
	sqlite3_finalize(q);
	return n;
}

bool rm_search_as_written(rm_search *s, rm_candidate_result *out, rm_error *err)
{
	sqlite3_stmt *q = query(s, "SELECT * FROM candidates WHERE scenario = ? AND as_written = 1", err);
	if (!q)
		return false;
	bool found = sqlite3_step(q) == SQLITE_ROW;
	if (found)
		row_to_result(q, out);
	sqlite3_finalize(q);
	return found;
}

rm_status rm_search_each(rm_search *s, void (*fn)(const rm_candidate_result *r, void *user), void *user, rm_error *err)
{
	sqlite3_stmt *q = query(s, "SELECT * FROM candidates WHERE scenario = ? ORDER BY key", err);
	if (!q)
		return RM_IO;
	rm_candidate_result r;
	while (sqlite3_step(q) == SQLITE_ROW) {
		row_to_result(q, &r);
		fn(&r, user);
	}
	sqlite3_finalize(q);
	return RM_OK;
}

int64_t rm_search_rows(rm_search *s)
{
	sqlite3_stmt *q = query(s, "SELECT count(*) FROM candidates WHERE scenario = ?", NULL);
	if (!q)
		return -1;
	int64_t n = sqlite3_step(q) == SQLITE_ROW ? sqlite3_column_int64(q, 0) : 0;
	sqlite3_finalize(q);
	return n;
}
