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
/* BEGIN IMMEDIATE / COMMIT / ROLLBACK. rollback never fails visibly. */
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
/* Normalised GPU name -> embedded profile name ("NVIDIA H100 80GB HBM3" -> "h100-sxm"), or NULL. */
const char *rm_calib__base_for_gpu(const char *gpu);

#endif /* REMORA_CALIB_INTERNAL_H */
