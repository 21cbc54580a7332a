/*
 * The calibration database (docs/design.md contract 4): schema, migrations, transactions and the
 * shared inserts. See remora/calib.h for the invariants.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "calib_internal.h"

/*
 * Migrations: migrations[v] takes a database from schema v to v + 1. Append, never edit: a
 * database written by an older remora replays the steps it lacks, in one transaction.
 */
static const char *const migrations[RM_CALIB_SCHEMA_VERSION] = {
	/* 0 -> 1: the three tables of contract 4 */
	"CREATE TABLE runs ("
	"  id INTEGER PRIMARY KEY,"
	"  machine TEXT, gpu TEXT, driver TEXT, cuda TEXT, nccl TEXT,"
	"  started_at TEXT"
	");"
	"CREATE TABLE measurements ("
	"  run_id INTEGER NOT NULL REFERENCES runs(id),"
	"  benchmark TEXT NOT NULL,"
	"  params TEXT NOT NULL," /* JSON object */
	"  value REAL NOT NULL,"
	"  unit TEXT NOT NULL"
	");"
	"CREATE TABLE fits ("
	"  profile TEXT NOT NULL,"
	"  model TEXT NOT NULL,"
	"  params TEXT NOT NULL," /* JSON object */
	"  fit_error REAL,"
	"  n_points INTEGER NOT NULL,"
	"  created_at TEXT NOT NULL"
	");",
	/* 1 -> 2: where a run was imported from, and lookup indexes */
	"ALTER TABLE runs ADD COLUMN source TEXT;"
	"CREATE INDEX measurements_by_run ON measurements(run_id, benchmark);"
	"CREATE UNIQUE INDEX fits_by_model ON fits(profile, model);",
	/* 2 -> 3: collective fits keyed by topology (operation, ranks, ranks per node, nodes) in
	 * columns, read from the fit's params or else from its model name "collective.OP.RxN[.algo]"
	 * (left NULL when neither has them: such a fit is not applied). Collective measurements
	 * without a node count take the one of the other collective rows of their run when those
	 * agree; the rest stay without one and are not fitted (`calib show` says so). */
	"ALTER TABLE fits ADD COLUMN op TEXT;"
	"ALTER TABLE fits ADD COLUMN ranks INTEGER;"
	"ALTER TABLE fits ADD COLUMN ranks_per_node INTEGER;"
	"ALTER TABLE fits ADD COLUMN nodes INTEGER;"
	"UPDATE fits SET"
	"  op = CASE WHEN json_valid(params) THEN json_extract(params, '$.collective') END,"
	"  ranks = CASE WHEN json_valid(params) AND json_type(params, '$.ranks') = 'integer'"
	"               THEN json_extract(params, '$.ranks') END,"
	"  nodes = CASE WHEN json_valid(params) AND json_type(params, '$.nodes') = 'integer'"
	"               THEN json_extract(params, '$.nodes') END "
	"WHERE model LIKE 'collective.%';"
	"UPDATE fits SET op = substr(model, 12, instr(substr(model, 12), '.') - 1) "
	"WHERE model LIKE 'collective.%' AND op IS NULL AND instr(substr(model, 12), '.') > 1;"
	"UPDATE fits SET"
	"  ranks = coalesce(ranks, CAST(substr(t, 1, instr(t, 'x') - 1) AS INTEGER)),"
	"  nodes = coalesce(nodes, CAST(substr(t, instr(t, 'x') + 1) AS INTEGER)) "
	"FROM (SELECT rowid AS id, substr(substr(model, 12), instr(substr(model, 12), '.') + 1) AS t FROM fits) AS n "
	"WHERE fits.rowid = n.id AND fits.model LIKE 'collective.%' AND (fits.ranks IS NULL OR fits.nodes IS NULL)"
	"  AND instr(n.t, 'x') > 1 AND substr(n.t, 1, instr(n.t, 'x') - 1) GLOB '[0-9]*'"
	"  AND substr(n.t, instr(n.t, 'x') + 1, 1) GLOB '[0-9]';"
	"UPDATE fits SET ranks = NULL, nodes = NULL WHERE model LIKE 'collective.%' AND (ranks IS NULL OR nodes IS NULL"
	"  OR ranks < 1 OR nodes < 1 OR ranks % nodes != 0);"
	"UPDATE fits SET ranks_per_node = ranks / nodes WHERE ranks IS NOT NULL AND nodes IS NOT NULL;"
	"UPDATE measurements SET params = json_set(params, '$.nodes', ("
	"    SELECT max(json_extract(m2.params, '$.nodes')) FROM measurements m2"
	"    WHERE m2.run_id = measurements.run_id AND json_valid(m2.params)"
	"      AND json_type(m2.params, '$.nodes') = 'integer'"
	"    GROUP BY m2.run_id HAVING count(DISTINCT json_extract(m2.params, '$.nodes')) = 1)) "
	"WHERE benchmark IN ('all_gather', 'reduce_scatter', 'all_reduce', 'all_to_all', 'send_recv')"
	"  AND json_valid(params) AND json_type(params, '$.nodes') IS NULL"
	"  AND EXISTS (SELECT 1 FROM measurements m2 WHERE m2.run_id = measurements.run_id AND json_valid(m2.params)"
	"      AND json_type(m2.params, '$.nodes') = 'integer'"
	"    GROUP BY m2.run_id HAVING count(DISTINCT json_extract(m2.params, '$.nodes')) = 1);"
	"CREATE INDEX fits_by_topology ON fits(profile, op, ranks, ranks_per_node, nodes);",
};

rm_status rm_calib__sql_error(rm_calib_db *db, rm_error *err, const char *what)
{
	return rm_error_set(err, RM_IO, db->path, 0, 0, "%s: %s", what, sqlite3_errmsg(db->sql));
}

rm_status rm_calib__prepare(rm_calib_db *db, const char *sql, sqlite3_stmt **st, const char *what, rm_error *err)
{
	*st = NULL;
	if (sqlite3_prepare_v2(db->sql, sql, -1, st, NULL) != SQLITE_OK) {
		rm_status s = rm_calib__sql_error(db, err, what);
		sqlite3_finalize(*st);
		*st = NULL;
		return s;
	}
	return RM_OK;
}

rm_status rm_calib__exec(rm_calib_db *db, const char *sql, const char *what, rm_error *err)
{
	if (sqlite3_exec(db->sql, sql, NULL, NULL, NULL) != SQLITE_OK)
		return rm_calib__sql_error(db, err, what);
	return RM_OK;
}

rm_status rm_calib__begin(rm_calib_db *db, rm_error *err)
{
	return rm_calib__exec(db, "BEGIN IMMEDIATE", "cannot start a transaction", err);
}

rm_status rm_calib__commit(rm_calib_db *db, rm_error *err)
{
	if (sqlite3_exec(db->sql, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
		rm_status st = rm_calib__sql_error(db, err, "commit failed");
		rm_calib__rollback(db);
		return st;
	}
	return RM_OK;
}

void rm_calib__rollback(rm_calib_db *db)
{
	if (!sqlite3_get_autocommit(db->sql) && sqlite3_exec(db->sql, "ROLLBACK", NULL, NULL, NULL) != SQLITE_OK)
		rm_log_warn("%s: rollback failed: %s", db->path, sqlite3_errmsg(db->sql));
}

/* One integer of a PRAGMA or a count query; false (SQLite's message in err) when it cannot be read. */
static rm_status query_int(rm_calib_db *db, const char *sql, int *value, const char *what, rm_error *err)
{
	sqlite3_stmt *st = NULL;
	RM_CHECK(rm_calib__prepare(db, sql, &st, what, err));
	rm_status s = RM_OK;
	if (sqlite3_step(st) == SQLITE_ROW)
		*value = sqlite3_column_int(st, 0);
	else
		s = rm_calib__sql_error(db, err, what);
	sqlite3_finalize(st);
	return s;
}

/* Stamps the calibration application_id (inside the caller's transaction). */
static rm_status stamp_application_id(rm_calib_db *db, rm_error *err)
{
	char pragma[64];
	/* a constant, not user data */
	snprintf(pragma, sizeof(pragma), "PRAGMA application_id = %d", (int)(int32_t)RM_APP_ID_CALIB);
	return rm_calib__exec(db, pragma, "setting the application_id", err);
}

static rm_status migrate(rm_calib_db *db, rm_error *err)
{
	RM_CHECK(rm_calib__begin(db, err));
	rm_status st = RM_OK;
	for (int v = db->version; v < RM_CALIB_SCHEMA_VERSION && st == RM_OK; v++) {
		char what[96];
		snprintf(what, sizeof(what), "migrating the schema from version %d to %d", v, v + 1);
		st = rm_calib__exec(db, migrations[v], what, err);
	}
	char pragma[64];
	/* a constant, not user data */
	snprintf(pragma, sizeof(pragma), "PRAGMA user_version = %d", RM_CALIB_SCHEMA_VERSION);
	if (st == RM_OK)
		st = rm_calib__exec(db, pragma, "setting the schema version", err);
	if (st == RM_OK)
		st = stamp_application_id(db, err);
	if (st != RM_OK) {
		rm_calib__rollback(db);
		return st;
	}
	RM_CHECK(rm_calib__commit(db, err));
	db->version = RM_CALIB_SCHEMA_VERSION;
	return RM_OK;
}

/*
 * Decides from the application_id and the schema whether the open file is a calibration
 * database this code may use, before anything is written: a sweep store or another program's
 * database (a foreign application_id, or tables without a calibration schema) is refused.
 */
static rm_status check_identity(rm_calib_db *db, int *app_id, rm_error *err)
{
	/* SQLite says "file is not a database" for anything else */
	if (query_int(db, "PRAGMA application_id", app_id, "not a calibration database", err) != RM_OK)
		return err ? err->status : RM_IO;
	if ((uint32_t)*app_id == (uint32_t)RM_APP_ID_SWEEP)
		return rm_error_set(err, RM_INVALID, db->path, 0, 0,
				    "is a remora sweep database, not a calibration database (nothing was changed)");
	if (*app_id != 0 && (uint32_t)*app_id != (uint32_t)RM_APP_ID_CALIB)
		return rm_error_set(err, RM_INVALID, db->path, 0, 0,
				    "not a remora calibration database (application_id 0x%08X; nothing was changed)",
				    (unsigned)*app_id);
	RM_CHECK(query_int(db, "PRAGMA user_version", &db->version, "not a calibration database", err));
	if (db->version > RM_CALIB_SCHEMA_VERSION)
		return rm_error_set(err, RM_UNSUPPORTED, db->path, 0, 0,
				    "calibration database schema version %d is newer than this remora's (%d); "
				    "use a newer remora (nothing was changed)",
				    db->version, RM_CALIB_SCHEMA_VERSION);
	if (db->version == 0) {
		/* A fresh file, or someone else's SQLite database: refuse to add tables to the latter. */
		int tables = 0;
		RM_CHECK(query_int(db, "SELECT count(*) FROM sqlite_master", &tables, "reading the schema", err));
		if (tables > 0)
			return rm_error_set(err, RM_INVALID, db->path, 0, 0,
					    "an SQLite database without a calibration schema (user_version 0 and %d "
					    "tables); refusing to change it",
					    tables);
	}
	return RM_OK;
}

rm_calib_db *rm_calib_db_open(const char *path, bool create, rm_error *err)
{
	struct stat sb;
	bool exists = stat(path, &sb) == 0;
	if (!exists && !create) {
		rm_error_set(err, RM_NOT_FOUND, path, 0, 0,
			     "no calibration database here (create one with `remora calib import`)");
		return NULL;
	}
	if (exists && !S_ISREG(sb.st_mode)) {
		rm_error_set(err, RM_IO, path, 0, 0, "not a regular file");
		return NULL;
	}
	rm_calib_db *db = rm_new(rm_calib_db, 1);
	snprintf(db->path, sizeof(db->path), "%s", path);
	int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
	if (sqlite3_open_v2(path, &db->sql, flags, NULL) != SQLITE_OK) {
		rm_calib__sql_error(db, err, "cannot open the calibration database");
		goto fail_open;
	}
	if (sqlite3_busy_timeout(db->sql, 5000) != SQLITE_OK) {
		rm_calib__sql_error(db, err, "setting the busy timeout");
		goto fail_open;
	}
	int app_id = 0;
	if (check_identity(db, &app_id, err) != RM_OK)
		goto fail_open;
	if (db->version < RM_CALIB_SCHEMA_VERSION) {
		if (migrate(db, err) != RM_OK)
			goto fail_open;
	} else if (app_id == 0) {
		/* a calibration database written before the application_id: adopt it */
		if (rm_calib__begin(db, err) != RM_OK)
			goto fail_open;
		if (stamp_application_id(db, err) != RM_OK) {
			rm_calib__rollback(db);
			goto fail_open;
		}
		if (rm_calib__commit(db, err) != RM_OK)
			goto fail_open;
	}
	if (rm_calib__exec(db, "PRAGMA foreign_keys = ON", "enabling foreign keys", err) != RM_OK)
		goto fail_open;
	return db;

fail_open:
	sqlite3_close(db->sql);
	free(db);
	return NULL;
}

void rm_calib_db_close(rm_calib_db *db)
{
	if (!db)
		return;
	if (sqlite3_close(db->sql) != SQLITE_OK)
		rm_log_warn("%s: closing the calibration database: %s", db->path, sqlite3_errmsg(db->sql));
	free(db);
}

int rm_calib_db_schema_version(const rm_calib_db *db)
{
	return db->version;
}

static int bind_text_or_null(sqlite3_stmt *st, int i, const char *s)
{
	if (s && s[0])
		return sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
	return sqlite3_bind_null(st, i);
}

rm_status rm_calib__insert_run(rm_calib_db *db, const rm_calib__run *run, int64_t *id, rm_error *err)
{
	sqlite3_stmt *st = NULL;
	RM_CHECK(rm_calib__prepare(db,
				   "INSERT INTO runs (machine, gpu, driver, cuda, nccl, started_at, source) "
				   "VALUES (?, ?, ?, ?, ?, ?, ?)",
				   &st, "preparing a run", err));
	int rc = SQLITE_OK;
	rc = rm_calib__bind_rc(rc, bind_text_or_null(st, 1, run->machine));
	rc = rm_calib__bind_rc(rc, bind_text_or_null(st, 2, run->gpu));
	rc = rm_calib__bind_rc(rc, bind_text_or_null(st, 3, run->driver));
	rc = rm_calib__bind_rc(rc, bind_text_or_null(st, 4, run->cuda));
	rc = rm_calib__bind_rc(rc, bind_text_or_null(st, 5, run->nccl));
	rc = rm_calib__bind_rc(rc, bind_text_or_null(st, 6, run->started_at));
	rc = rm_calib__bind_rc(rc, bind_text_or_null(st, 7, run->source));
	rm_status status = RM_OK;
	if (rc != SQLITE_OK)
		status = rm_calib__sql_error(db, err, "binding a run");
	else if (sqlite3_step(st) != SQLITE_DONE)
		status = rm_calib__sql_error(db, err, "storing a run");
	else
		*id = sqlite3_last_insert_rowid(db->sql);
	sqlite3_finalize(st);
	return status;
}

rm_status rm_calib__insert_measurement(rm_calib_db *db, int64_t run_id, const char *benchmark,
				       json_t *params, double value, const char *unit, rm_error *err)
{
	char *text = json_dumps(params, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
	if (!text)
		return rm_error_set(err, RM_NOMEM, NULL, 0, 0, "cannot serialise measurement parameters");
	sqlite3_stmt *st = NULL;
	rm_status status = rm_calib__prepare(db,
					     "INSERT INTO measurements (run_id, benchmark, params, value, unit) "
					     "VALUES (?, ?, ?, ?, ?)",
					     &st, "preparing a measurement", err);
	if (status != RM_OK)
		goto done;
	int rc = SQLITE_OK;
	rc = rm_calib__bind_rc(rc, sqlite3_bind_int64(st, 1, run_id));
	rc = rm_calib__bind_rc(rc, sqlite3_bind_text(st, 2, benchmark, -1, SQLITE_TRANSIENT));
	rc = rm_calib__bind_rc(rc, sqlite3_bind_text(st, 3, text, -1, SQLITE_TRANSIENT));
	rc = rm_calib__bind_rc(rc, sqlite3_bind_double(st, 4, value));
	rc = rm_calib__bind_rc(rc, sqlite3_bind_text(st, 5, unit, -1, SQLITE_TRANSIENT));
	if (rc != SQLITE_OK)
		status = rm_calib__sql_error(db, err, "binding a measurement");
	else if (sqlite3_step(st) != SQLITE_DONE)
		status = rm_calib__sql_error(db, err, "storing a measurement");
done:
	sqlite3_finalize(st);
	free(text);
	return status;
}

rm_status rm_calib__store_fit(rm_calib_db *db, const char *profile, const char *model, json_t *params,
			      double fit_error, int n_points, rm_error *err)
{
	char *text = json_dumps(params, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
	if (!text)
		return rm_error_set(err, RM_NOMEM, NULL, 0, 0, "cannot serialise fit parameters");
	char now[40];
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(now, sizeof(now), "%Y-%m-%dT%H:%M:%SZ", &tm);
	/* the topology a collective fit applies to, in its own columns (schema 3) */
	const char *op = json_string_value(json_object_get(params, "collective"));
	json_t *jr = json_object_get(params, "ranks"), *jn = json_object_get(params, "nodes");
	bool topo = op && json_is_integer(jr) && json_is_integer(jn) && json_integer_value(jr) >= 1 &&
		    json_integer_value(jn) >= 1 && json_integer_value(jr) % json_integer_value(jn) == 0;
	sqlite3_stmt *st = NULL;
	rm_status status = rm_calib__prepare(db,
					     "INSERT OR REPLACE INTO fits (profile, model, params, fit_error, n_points, "
					     "created_at, op, ranks, ranks_per_node, nodes) "
					     "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
					     &st, "preparing a fit", err);
	if (status != RM_OK)
		goto done;
	int rc = SQLITE_OK;
	rc = rm_calib__bind_rc(rc, sqlite3_bind_text(st, 1, profile, -1, SQLITE_TRANSIENT));
	rc = rm_calib__bind_rc(rc, sqlite3_bind_text(st, 2, model, -1, SQLITE_TRANSIENT));
	rc = rm_calib__bind_rc(rc, sqlite3_bind_text(st, 3, text, -1, SQLITE_TRANSIENT));
	rc = rm_calib__bind_rc(rc, sqlite3_bind_double(st, 4, fit_error));
	rc = rm_calib__bind_rc(rc, sqlite3_bind_int(st, 5, n_points));
	rc = rm_calib__bind_rc(rc, sqlite3_bind_text(st, 6, now, -1, SQLITE_TRANSIENT));
	if (topo) {
		int64_t r = (int64_t)json_integer_value(jr), n = (int64_t)json_integer_value(jn);
		rc = rm_calib__bind_rc(rc, sqlite3_bind_text(st, 7, op, -1, SQLITE_TRANSIENT));
		rc = rm_calib__bind_rc(rc, sqlite3_bind_int64(st, 8, r));
		rc = rm_calib__bind_rc(rc, sqlite3_bind_int64(st, 9, r / n));
		rc = rm_calib__bind_rc(rc, sqlite3_bind_int64(st, 10, n));
	} else {
		for (int i = 7; i <= 10; i++)
			rc = rm_calib__bind_rc(rc, sqlite3_bind_null(st, i));
	}
	if (rc != SQLITE_OK)
		status = rm_calib__sql_error(db, err, "binding a fit");
	else if (sqlite3_step(st) != SQLITE_DONE)
		status = rm_calib__sql_error(db, err, "storing a fit");
done:
	sqlite3_finalize(st);
	free(text);
	return status;
}

const char *rm_calib__base_for_gpu(const char *gpu)
{
	if (!gpu)
		return NULL;
	char low[128];
	size_t i = 0;
	for (; gpu[i] && i + 1 < sizeof(low); i++)
		low[i] = (char)tolower((unsigned char)gpu[i]);
	low[i] = '\0';
	if (strstr(low, "h200"))
		return "h200-sxm";
	if (strstr(low, "h100") || strstr(low, "h800"))
		return "h100-sxm";
	if (strstr(low, "a100"))
		return "a100-sxm-80gb";
	return NULL;
}

static json_t *column_json(sqlite3_stmt *st, int i)
{
	switch (sqlite3_column_type(st, i)) {
	case SQLITE_INTEGER:
		return json_integer(sqlite3_column_int64(st, i));
	case SQLITE_FLOAT:
		return json_real(sqlite3_column_double(st, i));
	case SQLITE_NULL:
		return json_null();
	default: {
		const char *t = (const char *)sqlite3_column_text(st, i);
		json_t *v = t ? json_string(t) : NULL;
		return v ? v : json_null();
	}
	}
}

/* Notes on rows that are stored but not used: collective measurements without a topology. */
static rm_status dump_notes(rm_calib_db *db, json_t *notes, rm_error *err)
{
	sqlite3_stmt *st = NULL;
	RM_CHECK(rm_calib__prepare(db,
				   "SELECT run_id, count(*) FROM measurements "
				   "WHERE benchmark IN ('all_gather', 'reduce_scatter', 'all_reduce', 'all_to_all', "
				   "'send_recv') AND (NOT json_valid(params) OR json_type(params, '$.ranks') IS NOT 'integer' "
				   "OR json_type(params, '$.nodes') IS NOT 'integer') GROUP BY run_id ORDER BY run_id",
				   &st, "reading the database", err));
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		char buf[256];
		snprintf(buf, sizeof(buf),
			 "run #%lld: %d collective measurement%s without a group size or node count (stored by an "
			 "older remora, and the run does not say): not fitted",
			 (long long)sqlite3_column_int64(st, 0), sqlite3_column_int(st, 1),
			 sqlite3_column_int(st, 1) == 1 ? "" : "s");
		json_array_append_new(notes, json_string(buf));
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return rm_calib__sql_error(db, err, "reading the database");
	return RM_OK;
}

void *rm_calib_db_dump_json(rm_calib_db *db, rm_error *err)
{
	json_t *doc = json_object();
	json_object_set_new(doc, "schema", json_string("remora.calib/1"));
	json_object_set_new(doc, "schema_version", json_integer(db->version));
	json_t *runs = json_array(), *fits = json_array(), *notes = json_array();
	json_object_set_new(doc, "runs", runs);
	json_object_set_new(doc, "fits", fits);
	json_object_set_new(doc, "notes", notes);
	sqlite3_stmt *st = NULL;
	if (rm_calib__prepare(db,
			      "SELECT r.id, r.machine, r.gpu, r.driver, r.cuda, r.nccl, r.started_at, r.source, "
			      "(SELECT count(*) FROM measurements m WHERE m.run_id = r.id), "
			      "(SELECT group_concat(DISTINCT benchmark) FROM measurements m WHERE m.run_id = r.id), "
			      "(SELECT max(json_extract(m.params, '$.gpus_per_thread')) FROM measurements m "
			      " WHERE m.run_id = r.id AND json_valid(m.params)) "
			      "FROM runs r ORDER BY r.id",
			      &st, "reading the database", err) != RM_OK)
		goto fail_reported;
	static const char *const run_keys[] = {"id", "machine", "gpu", "driver", "cuda", "nccl",
					       "started_at", "source", "measurements", "benchmarks", "gpus_per_thread"};
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		json_t *o = json_object();
		for (int i = 0; i < (int)RM_ARRAY_SIZE(run_keys); i++)
			json_object_set_new(o, run_keys[i], column_json(st, i));
		json_array_append_new(runs, o);
	}
	sqlite3_finalize(st);
	st = NULL;
	if (rc != SQLITE_DONE)
		goto fail;
	if (rm_calib__prepare(db,
			      "SELECT profile, model, params, fit_error, n_points, created_at, op, ranks, "
			      "ranks_per_node, nodes FROM fits ORDER BY profile, model",
			      &st, "reading the database", err) != RM_OK)
		goto fail_reported;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		json_t *o = json_object();
		json_object_set_new(o, "profile", column_json(st, 0));
		json_object_set_new(o, "model", column_json(st, 1));
		const char *text = (const char *)sqlite3_column_text(st, 2);
		json_t *params = text ? json_loads(text, 0, NULL) : NULL;
		json_object_set_new(o, "params", params ? params : json_null());
		json_object_set_new(o, "fit_error", column_json(st, 3));
		json_object_set_new(o, "n_points", column_json(st, 4));
		json_object_set_new(o, "created_at", column_json(st, 5));
		const char *model = (const char *)sqlite3_column_text(st, 1);
		if (model && !strncmp(model, "collective.", 11)) {
			json_t *topo = json_object();
			json_object_set_new(topo, "op", column_json(st, 6));
			json_object_set_new(topo, "ranks", column_json(st, 7));
			json_object_set_new(topo, "ranks_per_node", column_json(st, 8));
			json_object_set_new(topo, "nodes", column_json(st, 9));
			json_object_set_new(o, "topology", topo);
		}
		json_array_append_new(fits, o);
	}
	sqlite3_finalize(st);
	st = NULL;
	if (rc != SQLITE_DONE)
		goto fail;
	/* each fit checked against its profile's base: values above the hardware's physical peaks */
	size_t i;
	json_t *f;
	json_array_foreach(fits, i, f) {
		const char *profile = json_string_value(json_object_get(f, "profile"));
		const char *base = NULL;
		size_t j;
		json_t *g;
		json_array_foreach(fits, j, g) {
			if (profile && !strcmp(json_string_value(json_object_get(g, "profile")), profile) &&
			    !strcmp(json_string_value(json_object_get(g, "model")), "profile"))
				base = json_string_value(json_object_get(json_object_get(g, "params"), "base"));
		}
		const rm_hw_profile *hw = base ? rm_hw_profile_find(base, NULL) : NULL;
		json_t *warnings = json_array();
		const char *model = json_string_value(json_object_get(f, "model"));
		json_t *topo = json_object_get(f, "topology");
		if (topo && !json_is_integer(json_object_get(topo, "ranks")))
			json_array_append_new(warnings,
					      json_string("no topology (operation, ranks, ranks per node, nodes) recorded "
							  "for this fit: it is not applied to any group"));
		else if (hw)
			rm_calib__fit_warnings(model, json_object_get(f, "params"), hw, warnings);
		if (json_array_size(warnings))
			json_object_set_new(f, "warnings", warnings);
		else
			json_decref(warnings);
	}
	if (dump_notes(db, notes, err) != RM_OK)
		goto fail_reported;
	return doc;

fail:
	rm_calib__sql_error(db, err, "reading the database");
fail_reported:
	sqlite3_finalize(st);
	json_decref(doc);
	return NULL;
}
