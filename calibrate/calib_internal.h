/*
 * Private to calibrate/: the database handle and the statements the importers, fits and the
 * resolver share. Names carry the second prefix rm_calib__ (as libuv's uv__).
 */
#ifndef REMORA_CALIB_INTERNAL_H
#define REMORA_CALIB_INTERNAL_H

#include <jansson.h>
#include <sqlite3.h>

#include "remora/calib.h"
#include "remora/nccl.h"

struct rm_calib_db {
	sqlite3 *sql;
	char path[512];
	int version;
};

/* The run a group of measurements belongs to (empty strings are stored as NULL). */
typedef struct rm_calib__run {
	char machine[96], gpu[96], driver[32], cuda[32], nccl[32], started_at[40], source[256];
} rm_calib__run;

/* Records a database failure in err with the SQLite message; returns RM_IO. */
rm_status rm_calib__sql_error(rm_calib_db *db, rm_error *err, const char *what);
/* sqlite3_prepare_v2 of sql into *st; a failure is an RM_IO naming the database and what. */
rm_status rm_calib__prepare(rm_calib_db *db, const char *sql, sqlite3_stmt **st, const char *what, rm_error *err);
/* sqlite3_exec of constant SQL; a failure is an RM_IO naming the database and what. */
rm_status rm_calib__exec(rm_calib_db *db, const char *sql, const char *what, rm_error *err);
/* Binds of one statement are checked together: keeps the first failing return code. */
static inline int rm_calib__bind_rc(int acc, int rc)
{
	return acc != SQLITE_OK ? acc : rc;
}
/* BEGIN IMMEDIATE / COMMIT / ROLLBACK. A failed rollback is logged as a warning. */
rm_status rm_calib__begin(rm_calib_db *db, rm_error *err);
rm_status rm_calib__commit(rm_calib_db *db, rm_error *err);
void rm_calib__rollback(rm_calib_db *db);
/* Inserts a run; *id receives its rowid. */
rm_status rm_calib__insert_run(rm_calib_db *db, const rm_calib__run *run, int64_t *id, rm_error *err);
/* Inserts a measurement; params is serialised (compact, keys sorted) and not stolen. */
rm_status rm_calib__insert_measurement(rm_calib_db *db, int64_t run_id, const char *benchmark,
				       json_t *params, double value, const char *unit, rm_error *err);
/* Replaces the fit (profile, model) with params (not stolen). */
rm_status rm_calib__store_fit(rm_calib_db *db, const char *profile, const char *model, json_t *params,
			      double fit_error, int n_points, rm_error *err);
/* Appends to out (a JSON array) one string per implausible value of a stored fit against hw's
 * physical peaks: a collective busBW above the per-direction NVLink bandwidth (x 2(n-1)/n for
 * NVLS all-reduce), a GEMM rate above the dense tensor peak, an HBM bandwidth above the HBM peak,
 * a host copy above PCIe; and a collective fit without a topology (not applied). */
void rm_calib__fit_warnings(const char *model, json_t *params, const rm_hw_profile *hw, json_t *out);
/* Normalised GPU name -> embedded profile name ("NVIDIA H100 80GB HBM3" -> "h100-sxm"), or NULL. */
const char *rm_calib__base_for_gpu(const char *gpu);

#endif /* REMORA_CALIB_INTERNAL_H */
