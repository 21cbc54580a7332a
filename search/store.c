/*
 * The sweep store (remora/search.h): one SQLite row per candidate, keyed by the SHA-256 of the
 * resolved scenario's digest and the candidate's configuration, with a SHA-256 checksum of the
 * row's own values. A row whose checksum fails (edited, torn, or written by another program) is
 * deleted and recomputed, never reused.
 *
 * The file is marked PRAGMA application_id = RM_APP_ID_SWEEP ('RMSW'); a calibration database
 * ('RMCA') or another program's file is refused before anything is written. Schema version in
 * PRAGMA user_version: version 1 stores (64-bit FNV keys over the scenario's text) hold rows that
 * cannot be verified, and version 2 stores lack the parallelism variant, so their table is
 * dropped and rebuilt; a newer schema is refused.
 * Concurrency: WAL journal, a busy timeout, and write transactions taken with BEGIN IMMEDIATE, so
 * two searches on one database both finish (the second waits for the first's batch commits).
 * Every SQLite call is checked; a damaged database is refused with SQLite's reason.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "search_internal.h"

#define STORE_SCHEMA_VERSION 3
/* How long a search waits for another one's write transaction before giving up. */
#define STORE_BUSY_TIMEOUT_MS 60000

static const char *const schema_sql =
	"CREATE TABLE IF NOT EXISTS candidates ("
	" key TEXT PRIMARY KEY,"
	" scenario TEXT NOT NULL,"
	" idx INTEGER NOT NULL,"
	" label TEXT NOT NULL,"
	" policy TEXT NOT NULL,"
	" micro_batch INTEGER NOT NULL,"
	" flags TEXT NOT NULL,"
	" parallelism TEXT NOT NULL,"
	" mode TEXT NOT NULL,"
	" as_written INTEGER NOT NULL,"
	" ok INTEGER NOT NULL,"
	" error TEXT NOT NULL,"
	" step_time_s REAL, tokens_per_s_per_gpu REAL, mfu REAL,"
	" peak_memory_bytes INTEGER, memory_capacity_bytes INTEGER, fits INTEGER,"
	" compute_busy_s REAL, comm_total_s REAL, exposed_comm_s REAL, recompute_s REAL, lower_bound_s REAL,"
	" collectives INTEGER, async INTEGER, sync INTEGER,"
	" sync_memory_limit INTEGER, sync_disabled INTEGER, sync_nothing_to_overlap INTEGER,"
	" sync_overlap_limit INTEGER, sync_no_lhs INTEGER, saved_bytes_step INTEGER,"
	" checksum TEXT NOT NULL);"
	"CREATE INDEX IF NOT EXISTS candidates_rank ON candidates(scenario, fits, tokens_per_s_per_gpu);";

#define STORE_COLUMNS 33

/* This search's rows: the scenario's, joined with the keys of its space (load_space); the
 * candidate's current index is the column after the stored ones. */
#define SPACE_ROWS "SELECT c.*, sp.idx FROM candidates c JOIN space sp ON sp.key = c.key WHERE c.scenario = ? AND sp.idx >= 0"

static const char *db_name(const rm_search *s)
{
	const char *f = s->db ? sqlite3_db_filename(s->db, "main") : NULL;
	return f && *f ? f : "sweep database (in memory)";
}

static rm_status db_error(rm_search *s, rm_error *err, const char *what)
{
	return rm_error_set(err, RM_IO, db_name(s), 0, 0, "%s: %s", what, s->db ? sqlite3_errmsg(s->db) : "not open");
}

static rm_status exec_sql(rm_search *s, const char *sql, rm_error *err)
{
	char *msg = NULL;
	if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		rm_status st = rm_error_set(err, RM_IO, db_name(s), 0, 0, "%s: %s", sql, msg ? msg : sqlite3_errmsg(s->db));
		sqlite3_free(msg);
		return st;
	}
	return RM_OK;
}

/* One integer from a query with no parameters (a PRAGMA); false with err on any failure. */
static bool query_int(rm_search *s, const char *sql, int64_t *out, rm_error *err)
{
	sqlite3_stmt *q = NULL;
	if (sqlite3_prepare_v2(s->db, sql, -1, &q, NULL) != SQLITE_OK) {
		db_error(s, err, sql);
		return false;
	}
	int rc = sqlite3_step(q);
	*out = rc == SQLITE_ROW ? sqlite3_column_int64(q, 0) : 0;
	sqlite3_finalize(q);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		db_error(s, err, sql);
		return false;
	}
	return true;
}

/* ---- row checksums ---- */

/* The canonical text of a row's values, hashed into its checksum. */
static void row_checksum(const char *scenario, const rm_candidate_result *r, char hex[RM_SHA256_HEX])
{
	rm_canon c;
	rm_canon_init(&c);
	rm_canon_str(&c, "key", r->c.key);
	rm_canon_str(&c, "scenario", scenario);
	rm_canon_int(&c, "idx", r->c.index);
	rm_canon_str(&c, "label", r->c.label);
	rm_canon_str(&c, "policy", r->c.policy);
	rm_canon_int(&c, "micro_batch", r->c.micro_batch);
	rm_canon_str(&c, "flags", r->c.flags);
	rm_canon_str(&c, "parallelism", r->c.parallelism);
	rm_canon_int(&c, "ideal", r->c.ideal);
	rm_canon_int(&c, "as_written", r->c.as_written);
	rm_canon_int(&c, "ok", r->ok);
	rm_canon_str(&c, "error", r->error);
	rm_canon_real(&c, "step_time_s", r->step_time_s);
	rm_canon_real(&c, "tokens_per_s_per_gpu", r->tokens_per_s_per_gpu);
	rm_canon_real(&c, "mfu", r->mfu);
	rm_canon_int(&c, "peak_memory_bytes", r->peak_memory_bytes);
	rm_canon_int(&c, "memory_capacity_bytes", r->memory_capacity_bytes);
	rm_canon_int(&c, "fits", r->fits);
	rm_canon_real(&c, "compute_busy_s", r->compute_busy_s);
	rm_canon_real(&c, "comm_total_s", r->comm_total_s);
	rm_canon_real(&c, "exposed_comm_s", r->exposed_comm_s);
	rm_canon_real(&c, "recompute_s", r->recompute_s);
	rm_canon_real(&c, "lower_bound_s", r->lower_bound_s);
	rm_canon_int(&c, "collectives", r->collectives);
	rm_canon_int(&c, "async", r->async);
	rm_canon_int(&c, "sync", r->sync);
	rm_canon_int(&c, "sync_memory_limit", r->sync_memory_limit);
	rm_canon_int(&c, "sync_disabled", r->sync_disabled);
	rm_canon_int(&c, "sync_nothing", r->sync_nothing);
	rm_canon_int(&c, "sync_overlap", r->sync_overlap);
	rm_canon_int(&c, "sync_no_lhs", r->sync_no_lhs);
	rm_canon_int(&c, "saved_bytes_step", r->saved_bytes_step);
	uint8_t d[RM_SHA256_BYTES];
	rm_canon_digest(&c, d);
	rm_sha256_hex(d, hex);
	rm_canon_finish(&c);
}

static const char *col_text(sqlite3_stmt *q, int i)
{
	const unsigned char *t = sqlite3_column_text(q, i);
	return t ? (const char *)t : "";
}

/* A row read back; false when its checksum does not match its values (or a column is missing). */
static bool row_to_result(sqlite3_stmt *q, rm_candidate_result *r)
{
	memset(r, 0, sizeof(*r));
	/* the stored columns, and for a space query (SPACE_ROWS) the candidate's index after them */
	if (sqlite3_column_count(q) != STORE_COLUMNS && sqlite3_column_count(q) != STORE_COLUMNS + 1)
		return false;
	int i = 0;
	snprintf(r->c.key, sizeof(r->c.key), "%s", col_text(q, i++));
	char scenario[RM_SHA256_HEX];
	snprintf(scenario, sizeof(scenario), "%s", col_text(q, i++));
	r->c.index = sqlite3_column_int64(q, i++);
	snprintf(r->c.label, sizeof(r->c.label), "%s", col_text(q, i++));
	snprintf(r->c.policy, sizeof(r->c.policy), "%s", col_text(q, i++));
	r->c.micro_batch = sqlite3_column_int64(q, i++);
	snprintf(r->c.flags, sizeof(r->c.flags), "%s", col_text(q, i++));
	snprintf(r->c.parallelism, sizeof(r->c.parallelism), "%s", col_text(q, i++));
	r->c.ideal = strcmp(col_text(q, i++), "ideal") == 0;
	r->c.as_written = sqlite3_column_int(q, i++);
	r->ok = sqlite3_column_int(q, i++);
	snprintf(r->error, sizeof(r->error), "%s", col_text(q, i++));
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
	char want[RM_SHA256_HEX];
	row_checksum(scenario, r, want);
	return strcmp(want, col_text(q, i)) == 0;
}

/* ---- the resume set ---- */

static bool key_parse(const char *hex, search_key *k)
{
	char part[17];
	if (strlen(hex) != RM_SHA256_HEX - 1)
		return false;
	memcpy(part, hex, 16);
	part[16] = '\0';
	k->hi = strtoull(part, NULL, 16);
	memcpy(part, hex + 16, 16);
	k->lo = strtoull(part, NULL, 16);
	return true;
}

static int cmp_key(const void *a, const void *b)
{
	const search_key *x = a, *y = b;
	if (x->hi != y->hi)
		return x->hi < y->hi ? -1 : 1;
	return (x->lo > y->lo) - (x->lo < y->lo);
}

bool search_store_has(const rm_search *s, const char *key_hex)
{
	search_key k;
	return s->n_keys > 0 && key_parse(key_hex, &k) &&
	       bsearch(&k, s->keys, (size_t)s->n_keys, sizeof(search_key), cmp_key) != NULL;
}

/* ---- opening ---- */

/* Whose file this is: refuses calibration databases and other programs' files, adopts an
 * unmarked file that holds nothing or only a sweep table. */
static rm_status check_identity(rm_search *s, const char *path, int64_t *version, rm_error *err)
{
	int64_t app = 0, others = 0;
	if (!query_int(s, "PRAGMA application_id", &app, err))
		return rm_error_set(err, RM_IO, path, 0, 0, "not a usable SQLite database: %s", sqlite3_errmsg(s->db));
	if (!query_int(s, "PRAGMA user_version", version, err) ||
	    !query_int(s, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name<>'candidates'", &others, err))
		return err->status;
	if ((uint32_t)app == RM_APP_ID_CALIB)
		return rm_error_set(err, RM_INVALID, path, 0, 0,
				    "is a remora calibration database, not a sweep database: give another --db "
				    "(calibrated hardware is named as hardware: %s:PROFILE)",
				    path);
	if (app != 0 && (uint32_t)app != RM_APP_ID_SWEEP)
		return rm_error_set(err, RM_INVALID, path, 0, 0,
				    "not a remora sweep database (application_id 0x%08" PRIx32 "): give another --db",
				    (uint32_t)app);
	if (app == 0 && others > 0)
		return rm_error_set(err, RM_INVALID, path, 0, 0,
				    "this database has tables of another program (or a calibration database of an "
				    "older remora): it is not a remora sweep store; give another --db");
	if (*version > STORE_SCHEMA_VERSION)
		return rm_error_set(err, RM_UNSUPPORTED, path, 0, 0,
				    "the sweep database has schema version %lld, newer than this remora's %d; use a "
				    "newer remora or another --db",
				    (long long)*version, STORE_SCHEMA_VERSION);
	return RM_OK;
}

/* Creates or upgrades the schema inside one write transaction (two searches opening one new
 * file at once must not both create it). */
static rm_status prepare_schema(rm_search *s, const char *path, rm_error *err)
{
	RM_CHECK(search_store_begin(s, err));
	int64_t version = 0;
	rm_status st = check_identity(s, path, &version, err);
	if (st == RM_OK && version > 0 && version < STORE_SCHEMA_VERSION) {
		rm_log_info("%s: rows of sweep schema %lld lack what this remora keys candidates by; they are dropped "
			    "and recomputed",
			    path, (long long)version);
		st = exec_sql(s, "DROP TABLE IF EXISTS candidates", err);
	}
	if (st == RM_OK)
		st = exec_sql(s, schema_sql, err);
	if (st == RM_OK) {
		char pragma[96];
		snprintf(pragma, sizeof(pragma), "PRAGMA application_id=%" PRId32 "; PRAGMA user_version=%d",
			 (int32_t)RM_APP_ID_SWEEP, STORE_SCHEMA_VERSION);
		st = exec_sql(s, pragma, err);
	}
	if (st != RM_OK) {
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
		return st;
	}
	return search_store_commit(s, err);
}

/*
 * The keys of this search's space with their index in it, in a temporary table the queries join
 * with: a database kept from another search of the same scenario holds rows of other spaces too
 * (other policies, micro-batches, flag variants), and only this space's rows may be ranked.
 * The table holds only keys the database has: a row this search stores adds its own
 * (search_store_put), and space_sync maps the scenario's other rows to this space's index by
 * their configuration columns (or to -1, another space's row) before a query, so opening a store
 * hashes no candidate of the space. A join only ever needs the keys of stored rows, so the
 * queries read what a table of every candidate's key would give them.
 */
static rm_status load_space(rm_search *s, rm_error *err)
{
	s->space_version = -1;
	return exec_sql(s, "CREATE TEMP TABLE IF NOT EXISTS space (key TEXT PRIMARY KEY, idx INTEGER NOT NULL) "
			   "WITHOUT ROWID; DELETE FROM space;",
			err);
}

/* The first position of row's value among n strings of stride bytes at base; -1: none. */
static int first_str(const char *base, size_t stride, int n, const char *row)
{
	for (int i = 0; i < n; i++)
		if (strcmp(base + (size_t)i * stride, row) == 0)
			return i;
	return -1;
}

/*
 * The index in s's space of the candidate a stored row's configuration names, or -1 when it
 * names none. The first match of each digit gives the least index of that configuration, as
 * decode's order is (parallelism, policy, micro-batch, variant) with the variant fastest; the
 * candidate's own key is computed and must equal the row's, so the mapping is the key's.
 */
static int64_t space_index(const rm_search *s, const char *key, const char *policy, int64_t mb, const char *flags,
			   const char *parallelism, bool ideal, bool as_written)
{
	int64_t i = -1;
	if (as_written) {
		i = 0;
	} else if (s->n_policies > 0 && s->n_mbs > 0) {
		int par = s->n_par > 0 ? first_str(s->par[0], sizeof(s->par[0]), s->n_par, parallelism) : -1;
		int p = -1, m = -1, v = -1;
		for (int k = 0; k < s->n_policies && p < 0; k++)
			if (strcmp(s->policies[k].expr, policy) == 0)
				p = k;
		for (int k = 0; k < s->n_mbs && m < 0; k++)
			if (s->mbs[k] == mb)
				m = k;
		if (ideal)
			v = s->include_ideal && flags[0] == '\0' ? s->n_variants : -1;
		else
			v = first_str(s->variants[0], sizeof(s->variants[0]), s->n_variants, flags);
		if (par >= 0 && p >= 0 && m >= 0 && v >= 0) {
			int64_t vv = s->n_variants + (s->include_ideal ? 1 : 0);
			i = 1 + (((int64_t)par * s->n_policies + p) * s->n_mbs + m) * vv + v;
		}
	}
	if (i < 0 || i >= s->count)
		return -1;
	rm_candidate c;
	rm_search_candidate(s, i, &c);
	return strcmp(c.key, key) == 0 ? i : -1;
}

/*
 * Adds to the space table the rows of this scenario it lacks, each with its index in this space
 * or -1. PRAGMA data_version changes when another connection commits; this connection's own rows
 * enter the table as they are stored, so a sync with no other writer since the last reads nothing.
 */
static rm_status space_sync(rm_search *s, rm_error *err)
{
	int64_t version = -1;
	if (!query_int(s, "PRAGMA data_version", &version, err))
		return RM_IO;
	if (s->space_version >= 0 && version == s->space_version)
		return RM_OK;
	sqlite3_stmt *q = NULL, *ins = NULL;
	rm_status st = RM_OK;
	if (sqlite3_prepare_v2(s->db,
			       "SELECT key, policy, micro_batch, flags, parallelism, mode, as_written FROM candidates "
			       "WHERE scenario = ? AND key NOT IN (SELECT key FROM space)",
			       -1, &q, NULL) != SQLITE_OK ||
	    sqlite3_bind_text(q, 1, s->scenario_hash, -1, SQLITE_STATIC) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->db, "INSERT OR IGNORE INTO space VALUES (?, ?)", -1, &ins, NULL) != SQLITE_OK)
		st = db_error(s, err, "recording the search space");
	/* the rows first, then the inserts: the table is not written while the scan reads it */
	typedef struct {
		char key[RM_SHA256_HEX];
		int64_t idx;
	} mapped;
	mapped *rows = NULL;
	int64_t n = 0, cap = 0;
	int rc = SQLITE_DONE;
	while (st == RM_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
		if (n == cap) {
			cap = cap ? 2 * cap : 256;
			rows = rm_xrealloc(rows, (size_t)cap * sizeof(*rows));
		}
		snprintf(rows[n].key, sizeof(rows[n].key), "%s", col_text(q, 0));
		rows[n].idx = space_index(s, col_text(q, 0), col_text(q, 1), sqlite3_column_int64(q, 2), col_text(q, 3),
					  col_text(q, 4), strcmp(col_text(q, 5), "ideal") == 0,
					  sqlite3_column_int(q, 6) != 0);
		n++;
	}
	if (st == RM_OK && rc != SQLITE_DONE)
		st = db_error(s, err, "recording the search space");
	sqlite3_finalize(q);
	for (int64_t i = 0; i < n && st == RM_OK; i++) {
		sqlite3_reset(ins);
		if (sqlite3_bind_text(ins, 1, rows[i].key, -1, SQLITE_STATIC) != SQLITE_OK ||
		    sqlite3_bind_int64(ins, 2, rows[i].idx) != SQLITE_OK || sqlite3_step(ins) != SQLITE_DONE)
			st = db_error(s, err, "recording the search space");
	}
	sqlite3_finalize(ins);
	free(rows);
	if (st == RM_OK)
		s->space_version = version;
	return st;
}

/* Loads the verified keys of this scenario and deletes the rows that fail their checksum. */
static rm_status load_keys(rm_search *s, rm_error *err)
{
	sqlite3_stmt *q = NULL;
	if (sqlite3_prepare_v2(s->db, "SELECT * FROM candidates WHERE scenario = ?", -1, &q, NULL) != SQLITE_OK)
		return db_error(s, err, "reading the stored rows");
	if (sqlite3_bind_text(q, 1, s->scenario_hash, -1, SQLITE_STATIC) != SQLITE_OK) {
		sqlite3_finalize(q);
		return db_error(s, err, "reading the stored rows");
	}
	int64_t cap = 1024, n_bad = 0, cap_bad = 16;
	s->keys = rm_new(search_key, (size_t)cap);
	typedef char key_hex[RM_SHA256_HEX];
	key_hex *bad = rm_new(key_hex, (size_t)cap_bad);
	int rc;
	rm_candidate_result r;
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		search_key k;
		if (!row_to_result(q, &r) || !key_parse(r.c.key, &k)) {
			if (n_bad == cap_bad) {
				cap_bad *= 2;
				bad = rm_xrealloc(bad, (size_t)cap_bad * sizeof(*bad));
			}
			snprintf(bad[n_bad++], RM_SHA256_HEX, "%s", col_text(q, 0));
			continue;
		}
		if (s->n_keys == cap) {
			cap *= 2;
			s->keys = rm_xrealloc(s->keys, (size_t)cap * sizeof(search_key));
		}
		s->keys[s->n_keys++] = k;
	}
	sqlite3_finalize(q);
	rm_status st = RM_OK;
	if (rc != SQLITE_DONE)
		st = rm_error_set(err, RM_IO, db_name(s), 0, 0,
				  "the sweep database is damaged (%s): delete it or give another --db",
				  sqlite3_errmsg(s->db));
	if (st == RM_OK && n_bad > 0) {
		rm_log_warn("%s: %lld stored row%s failed %s checksum (edited or damaged); recomputing %s", db_name(s),
			    (long long)n_bad, n_bad == 1 ? "" : "s", n_bad == 1 ? "its" : "their",
			    n_bad == 1 ? "it" : "them");
		sqlite3_stmt *del = NULL;
		st = search_store_begin(s, err);
		if (st == RM_OK && sqlite3_prepare_v2(s->db, "DELETE FROM candidates WHERE key = ?", -1, &del, NULL) != SQLITE_OK)
			st = db_error(s, err, "deleting damaged rows");
		for (int64_t i = 0; st == RM_OK && i < n_bad; i++) {
			sqlite3_reset(del);
			if (sqlite3_bind_text(del, 1, bad[i], -1, SQLITE_STATIC) != SQLITE_OK || sqlite3_step(del) != SQLITE_DONE)
				st = db_error(s, err, "deleting damaged rows");
		}
		sqlite3_finalize(del);
		if (st == RM_OK)
			st = search_store_commit(s, err);
		else
			sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	}
	s->damaged = n_bad;
	free(bad);
	if (st == RM_OK)
		qsort(s->keys, (size_t)s->n_keys, sizeof(search_key), cmp_key);
	return st;
}

rm_status search_store_open(rm_search *s, const char *path, rm_error *err)
{
	if (s->db)
		return RM_OK;
	const char *name = path ? path : ":memory:";
	/* a database is a regular file (or a new one): SQLite would put its journal beside a device */
	struct stat stt;
	if (path && stat(path, &stt) == 0 && !S_ISREG(stt.st_mode))
		return rm_error_set(err, RM_INVALID, path, 0, 0, "not a regular file: a sweep database must be a file");
	int rc = sqlite3_open_v2(name, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		rm_status st = rm_error_set(err, RM_IO, name, 0, 0, "cannot open the sweep database: %s",
					    s->db ? sqlite3_errmsg(s->db) : "out of memory");
		search_store_close(s);
		return st;
	}
	rm_status st = RM_OK;
	if (sqlite3_busy_timeout(s->db, STORE_BUSY_TIMEOUT_MS) != SQLITE_OK)
		st = db_error(s, err, "setting the busy timeout");
	if (st == RM_OK && path) {
		/* WAL: readers never block the writer, and a second search waits rather than fails */
		sqlite3_stmt *q = NULL;
		if (sqlite3_prepare_v2(s->db, "PRAGMA journal_mode=WAL", -1, &q, NULL) != SQLITE_OK) {
			st = rm_error_set(err, RM_IO, name, 0, 0, "not a usable SQLite database: %s", sqlite3_errmsg(s->db));
		} else {
			/* switching a new file to WAL needs it to itself: while another search opens the
			 * same file the switch answers busy without calling the busy handler, so wait here */
			for (int waited_ms = 0;; waited_ms += 10) {
				rc = sqlite3_step(q);
				if ((rc != SQLITE_BUSY && rc != SQLITE_LOCKED) || waited_ms >= STORE_BUSY_TIMEOUT_MS)
					break;
				sqlite3_reset(q);
				sqlite3_sleep(10);
			}
			if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED)
				st = rm_error_set(err, RM_IO, name, 0, 0,
						  "the sweep database stayed locked for %d s: another program holds it",
						  STORE_BUSY_TIMEOUT_MS / 1000);
			else if (rc != SQLITE_ROW)
				st = rm_error_set(err, RM_IO, name, 0, 0, "not a usable SQLite database: %s",
						  sqlite3_errmsg(s->db));
			else if (strcmp(col_text(q, 0), "wal") != 0)
				rm_log_warn("%s: journal mode %s, not WAL; concurrent searches wait for each other", name,
					    col_text(q, 0));
		}
		sqlite3_finalize(q);
	}
	if (st == RM_OK)
		st = exec_sql(s, "PRAGMA synchronous=NORMAL", err);
	if (st == RM_OK)
		st = prepare_schema(s, name, err);
	if (st == RM_OK &&
	    sqlite3_prepare_v2(s->db, "INSERT OR REPLACE INTO candidates VALUES "
				      "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
			       -1, &s->put, NULL) != SQLITE_OK)
		st = db_error(s, err, "preparing the insert");
	if (st == RM_OK)
		st = load_keys(s, err);
	if (st == RM_OK)
		st = load_space(s, err);
	if (st == RM_OK &&
	    sqlite3_prepare_v2(s->db, "INSERT OR IGNORE INTO space VALUES (?, ?)", -1, &s->space_put, NULL) != SQLITE_OK)
		st = db_error(s, err, "preparing the search space");
	if (st != RM_OK)
		search_store_close(s);
	return st;
}

void search_store_close(rm_search *s)
{
	sqlite3_finalize(s->put);
	s->put = NULL;
	sqlite3_finalize(s->space_put);
	s->space_put = NULL;
	if (s->db)
		sqlite3_close(s->db);
	s->db = NULL;
	free(s->keys);
	s->keys = NULL;
	s->n_keys = 0;
}

rm_status search_store_begin(rm_search *s, rm_error *err)
{
	int rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
	if (rc == SQLITE_BUSY)
		return rm_error_set(err, RM_IO, db_name(s), 0, 0,
				    "the sweep database stayed locked for %d s: another program holds it; wait for it or "
				    "give another --db",
				    STORE_BUSY_TIMEOUT_MS / 1000);
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
	char sum[RM_SHA256_HEX];
	row_checksum(s->scenario_hash, r, sum);
	int i = 1, rc = SQLITE_OK;
	sqlite3_reset(p);
#define BIND(call)                      \
	do {                            \
		if (rc == SQLITE_OK)    \
			rc = (call);    \
	} while (0)
	BIND(sqlite3_bind_text(p, i++, r->c.key, -1, SQLITE_TRANSIENT));
	BIND(sqlite3_bind_text(p, i++, s->scenario_hash, -1, SQLITE_TRANSIENT));
	BIND(sqlite3_bind_int64(p, i++, r->c.index));
	BIND(sqlite3_bind_text(p, i++, r->c.label, -1, SQLITE_TRANSIENT));
	BIND(sqlite3_bind_text(p, i++, r->c.policy, -1, SQLITE_TRANSIENT));
	BIND(sqlite3_bind_int64(p, i++, r->c.micro_batch));
	BIND(sqlite3_bind_text(p, i++, r->c.flags, -1, SQLITE_TRANSIENT));
	BIND(sqlite3_bind_text(p, i++, r->c.parallelism, -1, SQLITE_TRANSIENT));
	BIND(sqlite3_bind_text(p, i++, r->c.ideal ? "ideal" : "xla", -1, SQLITE_STATIC));
	BIND(sqlite3_bind_int(p, i++, r->c.as_written));
	BIND(sqlite3_bind_int(p, i++, r->ok));
	BIND(sqlite3_bind_text(p, i++, r->error, -1, SQLITE_TRANSIENT));
	BIND(sqlite3_bind_double(p, i++, r->step_time_s));
	BIND(sqlite3_bind_double(p, i++, r->tokens_per_s_per_gpu));
	BIND(sqlite3_bind_double(p, i++, r->mfu));
	BIND(sqlite3_bind_int64(p, i++, r->peak_memory_bytes));
	BIND(sqlite3_bind_int64(p, i++, r->memory_capacity_bytes));
	BIND(sqlite3_bind_int(p, i++, r->fits));
	BIND(sqlite3_bind_double(p, i++, r->compute_busy_s));
	BIND(sqlite3_bind_double(p, i++, r->comm_total_s));
	BIND(sqlite3_bind_double(p, i++, r->exposed_comm_s));
	BIND(sqlite3_bind_double(p, i++, r->recompute_s));
	BIND(sqlite3_bind_double(p, i++, r->lower_bound_s));
	BIND(sqlite3_bind_int(p, i++, r->collectives));
	BIND(sqlite3_bind_int(p, i++, r->async));
	BIND(sqlite3_bind_int(p, i++, r->sync));
	BIND(sqlite3_bind_int(p, i++, r->sync_memory_limit));
	BIND(sqlite3_bind_int(p, i++, r->sync_disabled));
	BIND(sqlite3_bind_int(p, i++, r->sync_nothing));
	BIND(sqlite3_bind_int(p, i++, r->sync_overlap));
	BIND(sqlite3_bind_int(p, i++, r->sync_no_lhs));
	BIND(sqlite3_bind_int64(p, i++, r->saved_bytes_step));
	BIND(sqlite3_bind_text(p, i++, sum, -1, SQLITE_TRANSIENT));
#undef BIND
	if (rc != SQLITE_OK || sqlite3_step(p) != SQLITE_DONE)
		return db_error(s, err, "storing a row");
	/* a row of this search's space: its key joins the space table (a merge's store has none) */
	if (s->space_put && r->c.index >= 0 && r->c.index < s->count) {
		sqlite3_reset(s->space_put);
		if (sqlite3_bind_text(s->space_put, 1, r->c.key, -1, SQLITE_TRANSIENT) != SQLITE_OK ||
		    sqlite3_bind_int64(s->space_put, 2, r->c.index) != SQLITE_OK ||
		    sqlite3_step(s->space_put) != SQLITE_DONE)
			return db_error(s, err, "recording the search space");
	}
	return RM_OK;
}

/* ---- reading back ---- */

static sqlite3_stmt *query(rm_search *s, const char *sql, rm_error *err)
{
	sqlite3_stmt *q = NULL;
	if (!s->db) {
		db_error(s, err, "reading the sweep");
		return NULL;
	}
	if (space_sync(s, err) != RM_OK)
		return NULL;
	if (sqlite3_prepare_v2(s->db, sql, -1, &q, NULL) != SQLITE_OK ||
	    sqlite3_bind_text(q, 1, s->scenario_hash, -1, SQLITE_STATIC) != SQLITE_OK) {
		db_error(s, err, "reading the sweep");
		sqlite3_finalize(q);
		return NULL;
	}
	return q;
}

/* Steps a query to its next verified row; 1 for a row, 0 at the end, -1 on an error (err set).
 * Rows that fail their checksum are skipped (they were changed after this search opened). */
static int next_row(rm_search *s, sqlite3_stmt *q, rm_candidate_result *r, rm_error *err)
{
	for (;;) {
		int rc = sqlite3_step(q);
		if (rc == SQLITE_DONE)
			return 0;
		if (rc != SQLITE_ROW) {
			db_error(s, err, "reading the sweep");
			return -1;
		}
		if (row_to_result(q, r)) {
			/* the candidate's index in this search's space (a row kept from another search of
			 * the scenario was stored with its index there) */
			if (sqlite3_column_count(q) > STORE_COLUMNS)
				r->c.index = sqlite3_column_int64(q, STORE_COLUMNS);
			return 1;
		}
		rm_log_warn("%s: row %s failed its checksum while reading; left out", db_name(s), col_text(q, 0));
	}
}

/* The ranking's order: ties broken by peak memory, then the shorter policy expression (of
 * candidates with the same schedule, the one a user reads most easily), then the index, so the
 * order is total and every report (table, best plan, front) names a candidate by the same row. */
#define RANK_ORDER " ORDER BY c.tokens_per_s_per_gpu DESC, c.peak_memory_bytes ASC, length(c.policy) ASC, sp.idx ASC"

/* The rows that fit, ranked, of each rm_search_filter (all, the runtime's, the ideal bound's). */
static const char *const ranked_sql[] = {
	SPACE_ROWS " AND c.ok = 1 AND c.fits = 1" RANK_ORDER,
	SPACE_ROWS " AND c.ok = 1 AND c.fits = 1 AND c.mode = 'xla'" RANK_ORDER,
	SPACE_ROWS " AND c.ok = 1 AND c.fits = 1 AND c.mode = 'ideal'" RANK_ORDER,
};

int rm_search_top(rm_search *s, rm_search_filter filter, rm_candidate_result *out, int k, rm_error *err)
{
	sqlite3_stmt *q = query(s, ranked_sql[filter], err);
	if (!q)
		return -1;
	int n = 0, rc = 0;
	while (n < k && (rc = next_row(s, q, &out[n], err)) == 1)
		n++;
	sqlite3_finalize(q);
	return rc < 0 ? -1 : n;
}

int rm_search_pareto_of(rm_search *s, rm_search_filter filter, rm_candidate_result *out, int cap, rm_error *err)
{
	sqlite3_stmt *q = query(s, ranked_sql[filter], err);
	if (!q)
		return -1;
	int n = 0, rc;
	int64_t best_mem = INT64_MAX;
	rm_candidate_result r;
	while ((rc = next_row(s, q, &r, err)) == 1) {
		if (r.peak_memory_bytes < best_mem) {
			best_mem = r.peak_memory_bytes;
			if (n < cap)
				out[n++] = r;
		}
	}
	sqlite3_finalize(q);
	return rc < 0 ? -1 : n;
}

int rm_search_pareto(rm_search *s, rm_candidate_result *out, int cap, rm_error *err)
{
	return rm_search_pareto_of(s, RM_SEARCH_ANY, out, cap, err);
}

int rm_search_result(rm_search *s, int64_t index, rm_candidate_result *out, rm_error *err)
{
	sqlite3_stmt *q = query(s, SPACE_ROWS " AND sp.idx = ?2", err);
	if (!q)
		return -1;
	if (sqlite3_bind_int64(q, 2, index) != SQLITE_OK) {
		db_error(s, err, "reading the sweep");
		sqlite3_finalize(q);
		return -1;
	}
	int rc = next_row(s, q, out, err);
	sqlite3_finalize(q);
	return rc;
}

bool rm_search_as_written(rm_search *s, rm_candidate_result *out, rm_error *err)
{
	sqlite3_stmt *q = query(s, SPACE_ROWS " AND c.as_written = 1", err);
	if (!q)
		return false;
	bool found = next_row(s, q, out, err) == 1;
	sqlite3_finalize(q);
	return found;
}

rm_status rm_search_each(rm_search *s, void (*fn)(const rm_candidate_result *r, void *user), void *user, rm_error *err)
{
	sqlite3_stmt *q = query(s, SPACE_ROWS " ORDER BY sp.idx, c.key", err);
	if (!q)
		return RM_IO;
	rm_candidate_result r;
	int rc;
	while ((rc = next_row(s, q, &r, err)) == 1)
		fn(&r, user);
	sqlite3_finalize(q);
	return rc < 0 ? RM_IO : RM_OK;
}

int64_t rm_search_rows(rm_search *s)
{
	sqlite3_stmt *q = query(s, "SELECT count(*) FROM candidates c JOIN space sp ON sp.key = c.key WHERE c.scenario = ? AND sp.idx >= 0",
				NULL);
	if (!q)
		return -1;
	int rc = sqlite3_step(q);
	int64_t n = rc == SQLITE_ROW ? sqlite3_column_int64(q, 0) : -1;
	sqlite3_finalize(q);
	return n;
}

int64_t rm_search_damaged_rows(const rm_search *s)
{
	return s->damaged;
}

/* ---- other databases: resume sets, reopening, merging ---- */

/* Opens another sweep database read only and checks it is one of this schema. *db NULL with
 * RM_OK when the file does not exist and missing_ok. */
static rm_status open_other(const char *path, bool missing_ok, sqlite3 **db, rm_error *err)
{
	*db = NULL;
	struct stat stt;
	/* an empty file is a database no one has written yet */
	if (stat(path, &stt) != 0 || (missing_ok && S_ISREG(stt.st_mode) && stt.st_size == 0)) {
		if (missing_ok)
			return RM_OK;
		return rm_error_set(err, RM_IO, path, 0, 0, "cannot read the sweep database: %s", strerror(errno));
	}
	if (!S_ISREG(stt.st_mode))
		return rm_error_set(err, RM_INVALID, path, 0, 0, "not a regular file: a sweep database is a file");
	/* read-write when allowed (nothing is written; closing then checkpoints the WAL and removes
	 * it rather than leave -wal and -shm beside a file it only read), read only otherwise */
	int rc = sqlite3_open_v2(path, db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		sqlite3_close(*db);
		*db = NULL;
		rc = sqlite3_open_v2(path, db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
	}
	if (rc != SQLITE_OK) {
		rm_status st = rm_error_set(err, RM_IO, path, 0, 0, "cannot open the sweep database: %s",
					    *db ? sqlite3_errmsg(*db) : "out of memory");
		sqlite3_close(*db);
		*db = NULL;
		return st;
	}
	sqlite3_busy_timeout(*db, STORE_BUSY_TIMEOUT_MS);
	int64_t app = 0, version = 0, tables = 0;
	static const char *const sql[] = {"PRAGMA application_id", "PRAGMA user_version",
					  "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='candidates'"};
	int64_t *vals[] = {&app, &version, &tables};
	for (size_t i = 0; i < RM_ARRAY_SIZE(sql); i++) {
		sqlite3_stmt *q = NULL;
		rc = sqlite3_prepare_v2(*db, sql[i], -1, &q, NULL);
		if (rc == SQLITE_OK)
			rc = sqlite3_step(q);
		if (rc == SQLITE_ROW)
			*vals[i] = sqlite3_column_int64(q, 0);
		sqlite3_finalize(q);
		if (rc != SQLITE_ROW) {
			rm_status st = rm_error_set(err, RM_INVALID, path, 0, 0, "not a usable SQLite database: %s",
						    sqlite3_errmsg(*db));
			sqlite3_close(*db);
			*db = NULL;
			return st;
		}
	}
	rm_status st = RM_OK;
	if ((uint32_t)app == RM_APP_ID_CALIB)
		st = rm_error_set(err, RM_INVALID, path, 0, 0, "is a remora calibration database, not a sweep database");
	else if ((uint32_t)app != RM_APP_ID_SWEEP || tables != 1)
		st = rm_error_set(err, RM_INVALID, path, 0, 0,
				  "not a remora sweep database (application_id 0x%08" PRIx32 "%s)", (uint32_t)app,
				  tables != 1 ? ", no candidates table" : "");
	else if (version != STORE_SCHEMA_VERSION)
		st = rm_error_set(err, RM_UNSUPPORTED, path, 0, 0,
				  "the sweep database has schema version %lld, this remora reads %d: %s",
				  (long long)version, STORE_SCHEMA_VERSION,
				  version < STORE_SCHEMA_VERSION ? "its rows cannot be verified; run its sweep again"
								 : "use a newer remora");
	if (st != RM_OK) {
		sqlite3_close(*db);
		*db = NULL;
	}
	return st;
}

rm_status search_store_skip_from(rm_search *s, const char *path, rm_error *err)
{
	sqlite3 *db = NULL;
	RM_CHECK(open_other(path, true, &db, err));
	if (!db)
		return RM_OK;
	sqlite3_stmt *q = NULL;
	rm_status st = RM_OK;
	if (sqlite3_prepare_v2(db, "SELECT * FROM candidates WHERE scenario = ?", -1, &q, NULL) != SQLITE_OK ||
	    sqlite3_bind_text(q, 1, s->scenario_hash, -1, SQLITE_STATIC) != SQLITE_OK)
		st = rm_error_set(err, RM_IO, path, 0, 0, "reading the stored rows: %s", sqlite3_errmsg(db));
	int64_t cap = s->n_keys > 0 ? s->n_keys : 1024;
	s->keys = rm_xrealloc(s->keys, (size_t)cap * sizeof(search_key));
	rm_candidate_result r;
	int rc = SQLITE_DONE;
	/* a row that fails its checksum is not counted as stored: the shard recomputes it */
	while (st == RM_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
		search_key k;
		if (!row_to_result(q, &r) || !key_parse(r.c.key, &k))
			continue;
		if (s->n_keys == cap) {
			cap *= 2;
			s->keys = rm_xrealloc(s->keys, (size_t)cap * sizeof(search_key));
		}
		s->keys[s->n_keys++] = k;
	}
	if (st == RM_OK && rc != SQLITE_DONE)
		st = rm_error_set(err, RM_IO, path, 0, 0, "the sweep database is damaged (%s)", sqlite3_errmsg(db));
	sqlite3_finalize(q);
	sqlite3_close(db);
	qsort(s->keys, (size_t)s->n_keys, sizeof(search_key), cmp_key);
	return st;
}

rm_status rm_search_reopen(rm_search *s, const char *db_path, rm_error *err)
{
	search_store_close(s);
	s->damaged = 0;
	return db_path ? search_store_open(s, db_path, err) : RM_OK;
}

/* The checksum column of a row read with SELECT *. */
#define CHECKSUM_COLUMN (STORE_COLUMNS - 1)

/* Merges one input's rows into t's open transaction. */
static rm_status merge_one(rm_search *t, sqlite3_stmt *find, const char *path, rm_search_merge_stats *stats,
			   rm_error *err)
{
	sqlite3 *db = NULL;
	RM_CHECK(open_other(path, false, &db, err));
	sqlite3_stmt *q = NULL;
	rm_status st = RM_OK;
	if (sqlite3_prepare_v2(db, "SELECT * FROM candidates ORDER BY key", -1, &q, NULL) != SQLITE_OK)
		st = rm_error_set(err, RM_IO, path, 0, 0, "reading the stored rows: %s", sqlite3_errmsg(db));
	rm_candidate_result r, o;
	int rc = SQLITE_DONE;
	while (st == RM_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
		if (!row_to_result(q, &r)) {
			st = rm_error_set(err, RM_INVALID, path, 0, 0,
					  "row %s fails its checksum (edited or damaged): nothing was merged; run that "
					  "sweep again on this file (it recomputes damaged rows) and merge again",
					  col_text(q, 0));
			break;
		}
		stats->read++;
		char sum[RM_SHA256_HEX];
		snprintf(sum, sizeof(sum), "%s", col_text(q, CHECKSUM_COLUMN));
		snprintf(t->scenario_hash, sizeof(t->scenario_hash), "%s", col_text(q, 1));
		sqlite3_reset(find);
		if (sqlite3_bind_text(find, 1, r.c.key, -1, SQLITE_TRANSIENT) != SQLITE_OK) {
			st = db_error(t, err, "looking a row up");
			break;
		}
		int frc = sqlite3_step(find);
		if (frc == SQLITE_ROW) {
			if (!row_to_result(find, &o)) {
				stats->repaired++; /* out's row is damaged: the verified one replaces it */
			} else if (strcmp(col_text(find, CHECKSUM_COLUMN), sum) == 0) {
				stats->same++;
				continue;
			} else {
				stats->conflicts++; /* both verified, other values: out's is kept */
				continue;
			}
		} else if (frc != SQLITE_DONE) {
			st = db_error(t, err, "looking a row up");
			break;
		} else {
			stats->added++;
		}
		sqlite3_reset(find);
		st = search_store_put(t, &r, err);
	}
	if (st == RM_OK && rc != SQLITE_DONE)
		st = rm_error_set(err, RM_IO, path, 0, 0, "the sweep database is damaged (%s)", sqlite3_errmsg(db));
	sqlite3_reset(find);
	sqlite3_finalize(q);
	sqlite3_close(db);
	return st;
}

rm_status rm_search_merge(const char *out, const char *const *in, int n_in, rm_search_merge_stats *stats,
			  rm_error *err)
{
	rm_search_merge_stats local;
	if (!stats)
		stats = &local;
	memset(stats, 0, sizeof(*stats));
	struct stat so;
	bool out_exists = stat(out, &so) == 0;
	if (out_exists) {
		/* an older schema's table would be dropped on opening: refuse it rather than lose rows */
		sqlite3 *db = NULL;
		rm_status st = open_other(out, false, &db, err);
		if (st != RM_OK) {
			int64_t size = S_ISREG(so.st_mode) ? (int64_t)so.st_size : -1;
			if (size != 0) /* an empty file is a new database */
				return st;
			rm_error_clear(err);
		}
		sqlite3_close(db);
	}
	for (int i = 0; i < n_in; i++) {
		struct stat si;
		if (out_exists && stat(in[i], &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino)
			return rm_error_set(err, RM_INVALID, in[i], 0, 0, "is the output of the merge too: give another OUT");
	}
	/* a store with no scenario of its own: it only writes rows as they are */
	rm_search *t = rm_new(rm_search, 1);
	rm_status st = search_store_open(t, out, err);
	sqlite3_stmt *find = NULL;
	if (st == RM_OK && sqlite3_prepare_v2(t->db, "SELECT * FROM candidates WHERE key = ?", -1, &find, NULL) != SQLITE_OK)
		st = db_error(t, err, "preparing the merge");
	if (st == RM_OK)
		st = search_store_begin(t, err);
	for (int i = 0; i < n_in && st == RM_OK; i++) {
		st = merge_one(t, find, in[i], stats, err);
		if (st != RM_OK)
			sqlite3_exec(t->db, "ROLLBACK", NULL, NULL, NULL);
	}
	if (st == RM_OK)
		st = search_store_commit(t, err);
	sqlite3_finalize(find);
	search_store_close(t);
	free(t);
	if (st != RM_OK)
		memset(stats, 0, sizeof(*stats));
	return st;
}
