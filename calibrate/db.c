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
};

rm_status rm_calib__sql_error(rm_calib_db *db, rm_error *err, const char *what)
{
	return rm_error_set(err, RM_IO, db->path, 0, 0, "%s: %s", what, sqlite3_errmsg(db->sql));
}

rm_status rm_calib__begin(rm_calib_db *db, rm_error *err)
{
	if (sqlite3_exec(db->sql, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		return rm_calib__sql_error(db, err, "cannot start a transaction");
	return RM_OK;
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
	if (!sqlite3_get_autocommit(db->sql))
		sqlite3_exec(db->sql, "ROLLBACK", NULL, NULL, NULL);
}

static int read_user_version(sqlite3 *sql, int *version)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(sql, "PRAGMA user_version", -1, &st, NULL);
	if (rc == SQLITE_OK) {
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW) {
			*version = sqlite3_column_int(st, 0);
			rc = SQLITE_OK;
		}
	}
	sqlite3_finalize(st);
	return rc;
}

static rm_status migrate(rm_calib_db *db, rm_error *err)
{
	RM_CHECK(rm_calib__begin(db, err));
	for (int v = db->version; v < RM_CALIB_SCHEMA_VERSION; v++) {
		if (sqlite3_exec(db->sql, migrations[v], NULL, NULL, NULL) != SQLITE_OK) {
			char what[96];
			snprintf(what, sizeof(what), "migrating the schema from version %d to %d", v, v + 1);
			rm_status st = rm_calib__sql_error(db, err, what);
			rm_calib__rollback(db);
			return st;
		}
	}
	char pragma[64];
	/* a constant, not user data */
	snprintf(pragma, sizeof(pragma), "PRAGMA user_version = %d", RM_CALIB_SCHEMA_VERSION);
	if (sqlite3_exec(db->sql, pragma, NULL, NULL, NULL) != SQLITE_OK) {
		rm_status st = rm_calib__sql_error(db, err, "setting the schema version");
		rm_calib__rollback(db);
		return st;
	}
	RM_CHECK(rm_calib__commit(db, err));
	db->version = RM_CALIB_SCHEMA_VERSION;
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
	sqlite3_busy_timeout(db->sql, 5000);
	if (read_user_version(db->sql, &db->version) != SQLITE_OK) {
		/* SQLite says "file is not a database" for anything else */
		rm_calib__sql_error(db, err, "not a calibration database");
		goto fail_open;
	}
	if (db->version > RM_CALIB_SCHEMA_VERSION) {
		rm_error_set(err, RM_UNSUPPORTED, path, 0, 0,
			     "calibration database schema version %d is newer than this remora's (%d); "
			     "use a newer remora (nothing was changed)",
			     db->version, RM_CALIB_SCHEMA_VERSION);
		goto fail_open;
	}
	if (db->version == 0) {
		/* A fresh file, or someone else's SQLite database: refuse to add tables to the latter. */
		sqlite3_stmt *st = NULL;
		int tables = 0;
		if (sqlite3_prepare_v2(db->sql, "SELECT count(*) FROM sqlite_master", -1, &st, NULL) == SQLITE_OK &&
		    sqlite3_step(st) == SQLITE_ROW)
			tables = sqlite3_column_int(st, 0);
		sqlite3_finalize(st);
		if (tables > 0) {
			rm_error_set(err, RM_INVALID, path, 0, 0,
				     "an SQLite database without a calibration schema (user_version 0 and %d "
				     "tables); refusing to change it",
				     tables);
			goto fail_open;
		}
	}
	if (db->version < RM_CALIB_SCHEMA_VERSION && migrate(db, err) != RM_OK)
		goto fail_open;
	sqlite3_exec(db->sql, "PRAGMA foreign_keys = ON", NULL, NULL, NULL);
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
	sqlite3_close(db->sql);
	free(db);
}

int rm_calib_db_schema_version(const rm_calib_db *db)
{
	return db->version;
}

static void bind_text_or_null(sqlite3_stmt *st, int i, const char *s)
{
	if (s && s[0])
		sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, i);
}

rm_status rm_calib__insert_run(rm_calib_db *db, const rm_calib__run *run, int64_t *id, rm_error *err)
{
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db->sql,
			       "INSERT INTO runs (machine, gpu, driver, cuda, nccl, started_at, source) "
			       "VALUES (?, ?, ?, ?, ?, ?, ?)",
			       -1, &st, NULL) != SQLITE_OK)
		return rm_calib__sql_error(db, err, "preparing a run");
	bind_text_or_null(st, 1, run->machine);
	bind_text_or_null(st, 2, run->gpu);
	bind_text_or_null(st, 3, run->driver);
	bind_text_or_null(st, 4, run->cuda);
	bind_text_or_null(st, 5, run->nccl);
	bind_text_or_null(st, 6, run->started_at);
	bind_text_or_null(st, 7, run->source);
	int rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return rm_calib__sql_error(db, err, "storing a run");
	*id = sqlite3_last_insert_rowid(db->sql);
	return RM_OK;
}

rm_status rm_calib__insert_measurement(rm_calib_db *db, int64_t run_id, const char *benchmark,
				       json_t *params, double value, const char *unit, rm_error *err)
{
	char *text = json_dumps(params, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
	if (!text)
		return rm_error_set(err, RM_NOMEM, NULL, 0, 0, "cannot serialise measurement parameters");
	sqlite3_stmt *st = NULL;
	rm_status status = RM_OK;
	if (sqlite3_prepare_v2(db->sql,
			       "INSERT INTO measurements (run_id, benchmark, params, value, unit) "
			       "VALUES (?, ?, ?, ?, ?)",
			       -1, &st, NULL) != SQLITE_OK) {
		status = rm_calib__sql_error(db, err, "preparing a measurement");
		goto done;
	}
	sqlite3_bind_int64(st, 1, run_id);
	sqlite3_bind_text(st, 2, benchmark, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, text, -1, SQLITE_TRANSIENT);
	sqlite3_bind_double(st, 4, value);
	sqlite3_bind_text(st, 5, unit, -1, SQLITE_TRANSIENT);
	if (sqlite3_step(st) != SQLITE_DONE)
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
	sqlite3_stmt *st = NULL;
	rm_status status = RM_OK;
	if (sqlite3_prepare_v2(db->sql,
			       "INSERT OR REPLACE INTO fits (profile, model, params, fit_error, n_points, created_at) "
			       "VALUES (?, ?, ?, ?, ?, ?)",
			       -1, &st, NULL) != SQLITE_OK) {
		status = rm_calib__sql_error(db, err, "preparing a fit");
		goto done;
	}
	sqlite3_bind_text(st, 1, profile, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, model, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, text, -1, SQLITE_TRANSIENT);
	sqlite3_bind_double(st, 4, fit_error);
	sqlite3_bind_int(st, 5, n_points);
	sqlite3_bind_text(st, 6, now, -1, SQLITE_TRANSIENT);
	if (sqlite3_step(st) != SQLITE_DONE)
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
	default:
		return json_string((const char *)sqlite3_column_text(st, i));
	}
}

void *rm_calib_db_dump_json(rm_calib_db *db, rm_error *err)
{
	json_t *doc = json_object();
	json_object_set_new(doc, "schema", json_string("remora.calib/1"));
	json_object_set_new(doc, "schema_version", json_integer(db->version));
	json_t *runs = json_array(), *fits = json_array();
	json_object_set_new(doc, "runs", runs);
	json_object_set_new(doc, "fits", fits);
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db->sql,
			       "SELECT r.id, r.machine, r.gpu, r.driver, r.cuda, r.nccl, r.started_at, r.source, "
			       "(SELECT count(*) FROM measurements m WHERE m.run_id = r.id), "
			       "(SELECT group_concat(DISTINCT benchmark) FROM measurements m WHERE m.run_id = r.id) "
			       "FROM runs r ORDER BY r.id",
			       -1, &st, NULL) != SQLITE_OK)
		goto fail;
	static const char *const run_keys[] = {"id", "machine", "gpu", "driver", "cuda", "nccl",
					       "started_at", "source", "measurements", "benchmarks"};
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
	if (sqlite3_prepare_v2(db->sql,
			       "SELECT profile, model, params, fit_error, n_points, created_at FROM fits "
			       "ORDER BY profile, model",
			       -1, &st, NULL) != SQLITE_OK)
		goto fail;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		json_t *o = json_object();
		json_object_set_new(o, "profile", column_json(st, 0));
		json_object_set_new(o, "model", column_json(st, 1));
		json_t *params = json_loads((const char *)sqlite3_column_text(st, 2), 0, NULL);
		json_object_set_new(o, "params", params ? params : json_null());
		json_object_set_new(o, "fit_error", column_json(st, 3));
		json_object_set_new(o, "n_points", column_json(st, 4));
		json_object_set_new(o, "created_at", column_json(st, 5));
		json_array_append_new(fits, o);
	}
	sqlite3_finalize(st);
	st = NULL;
	if (rc != SQLITE_DONE)
		goto fail;
	return doc;

fail:
	rm_calib__sql_error(db, err, "reading the database");
	sqlite3_finalize(st);
	json_decref(doc);
	return NULL;
}
