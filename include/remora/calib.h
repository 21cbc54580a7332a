/*
 * remora/calib.h — the calibration database, its importers and fits (calibrate/).
 *
 * What it does: stores what a real machine measured (the microbenchmarks of calibrate/cuda/ as
 * JSON lines, or nccl-tests logs) in an SQLite database (docs/design.md contract 4), fits the cost
 * models' parameters to those measurements with GSL, and resolves a hardware specification such
 * as "h100-sxm" (an embedded default) or "calib.db:NAME" (that default overridden by the fitted
 * values of profile NAME, plus per-size-regime collective overrides for the NCCL model).
 *
 * Invariants
 * - Every write happens inside one transaction: an import or fit that fails rolls back and
 *   leaves the database exactly as it was. Input files are parsed completely before anything is
 *   written. No SQL is built from user data (prepared statements only).
 * - The schema is versioned with PRAGMA user_version (RM_CALIB_SCHEMA_VERSION). Older databases
 *   are migrated in one transaction when opened for writing; a newer one is refused before
 *   anything is written.
 * - Nothing here needs a GPU or a CUDA header.
 *
 * Units: bytes as nccl-tests counts them (the full buffer), times in microseconds (us),
 * bandwidths in GB/s (10^9 B/s), rates in TFLOP/s (10^12 FLOP/s). Fit errors are relative RMS
 * errors: sqrt(mean(((model - measured) / measured)^2)).
 */
#ifndef REMORA_CALIB_H
#define REMORA_CALIB_H

#include <stdbool.h>
#include <stdint.h>

#include "remora/common.h"
#include "remora/hw.h"

/* remora/nccl.h's model; declared here only so this header can be included next to nccl.h
 * (whose reference-row section sits outside its include guard). */
struct rm_nccl_model;

/* Schema of this code: 1 = runs, measurements, fits; 2 = runs.source and the lookup indexes;
 * 3 = fits.op/ranks/ranks_per_node/nodes, the topology a collective fit applies to. */
#define RM_CALIB_SCHEMA_VERSION 3

typedef struct rm_calib_db rm_calib_db;

/*
 * Opens (create: creating if absent) the database at path and migrates an older schema to
 * RM_CALIB_SCHEMA_VERSION in one transaction, stamping PRAGMA application_id RM_APP_ID_CALIB
 * (a calibration database from before the id is adopted). Returns NULL with err (naming path)
 * on: a file that is not an SQLite database (RM_IO), a missing file when !create (RM_NOT_FOUND),
 * the sweep store's file ("is a remora sweep database, not a calibration database") or another
 * non-zero application_id (RM_INVALID), an SQLite file of someone else's tables (RM_INVALID), a
 * schema newer than this code's (RM_UNSUPPORTED); none of these is changed. A failed migration
 * is RM_IO, rolled back.
 */
rm_calib_db *rm_calib_db_open(const char *path, bool create, rm_error *err);
/* Closes the database; NULL is accepted. */
void rm_calib_db_close(rm_calib_db *db);
/* PRAGMA user_version of the open database (RM_CALIB_SCHEMA_VERSION after a successful open). */
int rm_calib_db_schema_version(const rm_calib_db *db);

/* ---- nccl-tests logs -------------------------------------------------------------------- */

/* One row of an nccl-tests table. Index 0 is out-of-place, 1 in-place. */
typedef struct rm_nccl_tests_row {
	int coll;         /* an rm_coll of remora/nccl.h */
	int64_t bytes;    /* size column (B) */
	int64_t count;    /* elements */
	char type[16];    /* float, half, bfloat16, ... */
	char redop[16];   /* sum, none, ... */
	int root;         /* -1 when the test has none */
	bool has[2];      /* false when the columns read N/A (or the log has no in-place group) */
	double time_us[2];
	double algbw_GBps[2];
	double busbw_GBps[2];
	int64_t wrong[2]; /* #wrong (or the older 'error' column, rounded); -1 when N/A */
	int ranks;        /* GPUs of the test that printed the row (distinct rank lines) */
	int nodes;        /* distinct hosts among those rank lines */
	int gpus_per_thread; /* G of "# nThread T nGpus G": > 1 is a single-process (-g G) run whose
			      * host thread launches on G GPUs in turn (~35 us floor on 8 H100s);
			      * 0 when the header does not say */
	int processes;    /* distinct Pids among the rank lines (0: none printed) */
	int line;         /* 1-based line in the log */
} rm_nccl_tests_row;

typedef struct rm_nccl_tests_log {
	char tests_version[32];  /* "2.17.9", empty for versions that do not print it */
	char nccl_version[32];   /* "2.26.2" from nccl-library=22602, empty when absent */
	char gpu[96];            /* device name of rank 0, e.g. "NVIDIA H100 80GB HBM3" */
	char host[96];           /* host of rank 0 */
	int threads, gpus_per_thread, processes; /* of the first table's header (0: not printed) */
	int n_rows;
	int duplicates;          /* identical rows dropped (interleaved output of several processes) */
	rm_nccl_tests_row *rows; /* owned */
} rm_nccl_tests_log;

/*
 * Parses nccl-tests output (text of len bytes, path for messages): header lines (version,
 * "Collective test starting: X_perf", nThread/nGpus, rank lines with or without "Group", column
 * header and unit lines), rows with out-of-place and in-place groups (N/A accepted), repeated
 * header blocks and rows of several processes (identical rows are counted once). The collective
 * comes from the "Collective test starting" line, else from the binary name in the path
 * (all_gather_perf...); the GPU count from the rank lines, else gpus_hint (0: none).
 * Per-iteration (-I 1) and timestamp (-S 1) tables are read (their extra columns ignored).
 * Errors (file:line:column and what was expected): a row with a wrong field count or a
 * non-numeric field (RM_PARSE), a last row cut mid-way or a table without its closing
 * "# Avg bus bandwidth" line ("truncated", RM_PARSE), a unit line whose units are not those of
 * its columns ((B), (elements), (us), (GB/s), (%)) (RM_INVALID), a log made with -C 1 (CPU time:
 * RM_UNSUPPORTED, "rerun without -C"), no rows (RM_MISSING), an unknown collective
 * (RM_UNSUPPORTED), no GPU count.
 * On success fills log (free with rm_nccl_tests_log_finish).
 */
rm_status rm_nccl_tests_parse(const char *path, const char *text, size_t len, int gpus_hint,
			      rm_nccl_tests_log *log, rm_error *err);
void rm_nccl_tests_log_finish(rm_nccl_tests_log *log);

/* ---- imports ------------------------------------------------------------------------------ */

typedef struct rm_calib_import_stats {
	int64_t first_run_id; /* id of the first run created */
	int runs;             /* runs created */
	int measurements;     /* measurement rows written */
	int duplicates;       /* identical rows dropped */
	int skipped;          /* rows not stored: #wrong > 0, a zero time, or both groups N/A */
	int gpus_per_thread;  /* nccl-tests: GPUs one host thread drove (> 1: single-process -g N); 0 unknown */
} rm_calib_import_stats;

/*
 * Imports an nccl-tests log as one run (machine = host of rank 0, gpu, nccl version from the
 * header) and one measurement per row and placement: benchmark "all_gather" | "reduce_scatter"
 * | "all_reduce" | "all_to_all" | "send_recv", unit "us", params {"bytes", "ranks", "nodes",
 * "inplace", "algo", "type"}. algo labels what the run forced ("ring", "nvls"...; NULL or
 * "default" = NCCL's own choice; the fit uses it to pick the pair the overrides attach to), and
 * the launch mode "gpus_per_thread", "processes" when the header gives them.
 * Errors: those of rm_nccl_tests_parse, RM_MISSING when no row can be stored (all #wrong > 0,
 * zero times or N/A: an import of nothing is an error), RM_IO from the database; all rolled back.
 */
rm_status rm_calib_import_nccl_tests(rm_calib_db *db, const char *path, const char *algo, int gpus_hint,
				     rm_calib_import_stats *stats, rm_error *err);

/*
 * Imports the JSON lines written by remora-calibrate (calibrate/cuda/): one object per line,
 * {"benchmark": B, "params": {...}, "value": V, "unit": U} plus the optional run keys
 * "machine", "gpu", "driver", "cuda", "nccl", "started_at" (one run per distinct set).
 * Benchmarks, their unit and required numeric params (docs/calibrate.md):
 *   gemm {m, n, k [, batch]} + dtype "bf16"|"fp8"           us
 *   hbm_copy, hbm_triad {bytes: bytes moved}                us
 *   launch {kernels} + graph true|false                     us (all kernels)
 *   h2d, d2h, bidir {bytes: per direction}                  us
 *   all_gather, reduce_scatter, all_reduce {bytes, ranks [, nodes]}  us
 *   interference {m, n, k, held_sms} + concurrent "none"|"sms"|"nccl"   us
 * Errors name file:line(:column): invalid JSON (jansson's position), a missing or mistyped key,
 * an unknown benchmark, a wrong unit, a negative or non-finite value. Nothing is written then.
 */
rm_status rm_calib_import_jsonl(rm_calib_db *db, const char *path, rm_calib_import_stats *stats,
				rm_error *err);

/* Where a group of prepared rows came from: one run each (NULL or "" stored as NULL). */
typedef struct rm_calib_run_desc {
	const char *machine, *gpu, *driver, *cuda, *nccl, *started_at, *source;
} rm_calib_run_desc;

/* One prepared measurement: run indexes the runs array; params a JSON object's text. */
typedef struct rm_calib_row_desc {
	int run;
	const char *benchmark; /* "gemm", "all_reduce", "attention", ... (docs/calibrate.md) */
	const char *params;    /* JSON object text, e.g. {"m":4096,"n":4096,"k":4096,"dtype":"bf16"} */
	double value;          /* > 0, finite, in unit */
	const char *unit;      /* "us" */
} rm_calib_row_desc;

/*
 * Stores rows prepared by another importer (trace/calib.c: a profiler trace's kernels) as
 * n_runs runs and n_rows measurements, in one transaction. Every row is checked before anything
 * is written: a run index out of range, an empty benchmark or unit, params that are not a JSON
 * object, a value that is not a positive finite number are RM_INVALID naming the row; no rows at
 * all is RM_MISSING. stats (may be NULL) receives the run ids and counts. RM_IO from the
 * database, rolled back.
 */
rm_status rm_calib_import_rows(rm_calib_db *db, const rm_calib_run_desc *runs, int n_runs,
			       const rm_calib_row_desc *rows, int64_t n_rows, rm_calib_import_stats *stats,
			       rm_error *err);

/* ---- fits on arrays (pure; GSL) ---------------------------------------------------------- */

/*
 * Weighted least squares of y = c0 + c1 * x with weights 1/y^2 (relative errors), GSL
 * gsl_fit_wlinear. A negative intercept is refitted through the origin (gsl_fit_wmul), so c0 >= 0.
 * rel_rms receives the relative RMS error. Fails (RM_INVALID, with the reason) with fewer than 2
 * points, fewer than 2 distinct x, a non-positive y, or a non-positive slope.
 */
rm_status rm_calib_fit_line(const double *x, const double *y, int n, double *c0, double *c1,
			    double *rel_rms, rm_error *err);

/* One fitted size regime of a collective: time_us = latency_us + bytes / (algbw_GBps * 1e3). */
typedef struct rm_calib_regime {
	int64_t min_bytes, max_bytes; /* inclusive; the first starts at 0, the last ends at the largest size measured */
	double latency_us;
	double algbw_GBps;            /* RM_CALIB_FLAT_ALGBW_GBps marks a latency-only (flat) regime */
	int n_points;
	double max_rel_error;
} rm_calib_regime;

#define RM_CALIB_MAX_REGIMES 8
/* The algBW of a regime whose times do not grow with size: a sentinel, not a bandwidth (shown as
 * "n/a (latency only)"); the bytes add nothing measurable there. */
#define RM_CALIB_FLAT_ALGBW_GBps 1e6

/*
 * Piecewise fit of a collective's times: sorts (bytes, time_us), drops bytes == 0 (nccl-tests
 * returns at once for an empty buffer), and segments the rest into the fewest contiguous regimes
 * (at most RM_CALIB_MAX_REGIMES, each of >= 2 points) that keep every point within tolerance
 * (e.g. 0.03) of its regime's weighted least-squares line, minimising the squared relative
 * error among those (dynamic programming over split points). If no segmentation meets the
 * tolerance, the best one with the most regimes is returned. Regime bounds are the geometric
 * means between the neighbouring measured sizes; above the largest measured size no regime
 * applies (the uncalibrated model does). Beyond 128 distinct sizes, neighbouring sizes are
 * grouped so that the segmentation stays bounded (a group never straddles a regime boundary). Fails (RM_INVALID, reason) with fewer than 2
 * non-empty points. rel_rms over all points used.
 */
rm_status rm_calib_fit_collective(const int64_t *bytes, const double *time_us, int n, double tolerance,
				  rm_calib_regime *regimes, int *n_regimes, double *rel_rms, rm_error *err);

/* A measured GEMM: C[batch, m, n] = A . B in time_us. */
typedef struct rm_calib_gemm_point {
	int64_t batch, m, n, k;
	double time_us;
} rm_calib_gemm_point;

/*
 * GEMM efficiency model of models/cost.c: t_us = t0_us + FLOPs * q / (R * 1e6), FLOPs =
 * 2*batch*m*n*k, q the wave quantization ceil(tiles/sms)*sms/tiles for tiles =
 * batch*ceil(m/tile_m)*ceil(n/tile_n) (docs/reference/hardware.md "Compute efficiency"). Fitted linearly in
 * (t0, 1/R). Fails with fewer than 2 points or 2 distinct FLOP counts (message says so).
 */
rm_status rm_calib_fit_gemm(const rm_calib_gemm_point *pts, int n, double sm_count, double tile_m,
			    double tile_n, double *t0_us, double *rate_TFLOPs, double *rel_rms, rm_error *err);

/*
 * Interference: slowdown(k) = t_with_k_SMs_held / t_alone = 1 + per_sm * k, a least-squares
 * line through (0, 1) (gsl_fit_mul on slowdown - 1). Fails with no point with k > 0.
 */
rm_status rm_calib_fit_interference(const double *held_sms, const double *slowdown, int n, double *per_sm,
				    double *rel_rms, rm_error *err);

/* ---- fits in the database ----------------------------------------------------------------- */

typedef struct rm_calib_fit_opts {
	const char *profile;  /* NAME in calib.db:NAME; letters, digits, . _ - */
	const char *base;     /* embedded profile to override; NULL: from the runs' GPU name */
	const int64_t *runs;  /* run ids to use; NULL/0: every run */
	int n_runs;
	double tolerance;     /* collective regime tolerance; 0: 0.03 */
	const char *device;   /* GPU model to fit (a run's GPU name, case-insensitive substring) when
			       * the selected runs come from several; NULL: the one of --base, or
			       * the only one */
} rm_calib_fit_opts;

/* What one model's fit gave. */
typedef struct rm_calib_fit_result {
	char model[256];    /* "gemm.bf16", "collective.all-gather.8x1", "....8x1.ring.proto-simple" */
	bool ok;
	double fit_error;   /* relative RMS */
	int n_points;
	char summary[160];  /* "t0 6.1 us, R 788 TFLOP/s" */
	char why[256];      /* when !ok: why it failed */
} rm_calib_fit_result;

/* Rows of one device that measured the same benchmark and parameters and disagree. */
typedef struct rm_calib_conflict {
	char benchmark[32];
	char params[192]; /* the shared parameters (JSON, without the file line) */
	int n_rows;       /* rows with these parameters */
	int64_t run[2];   /* the runs of the lowest and the highest value */
	int line[2];      /* their lines in the imported files (0: not recorded) */
	double value[2];  /* lowest and highest value (us) */
} rm_calib_conflict;

/* Two rows of one benchmark and parameters conflict when the highest exceeds the lowest by more
 * than this: beyond the few percent that repeated nccl-tests or cuBLAS timings of one machine
 * differ by (the collective fit's default tolerance is 3%). */
#define RM_CALIB_CONFLICT_SPREAD 0.10

typedef struct rm_calib_fit_report {
	char base[64];
	char device[96];              /* the GPU model fitted (the runs' GPU name; "" if none recorded) */
	int n_results;
	rm_calib_fit_result *results; /* owned; free with rm_calib_fit_report_finish */
	int n_conflicts;
	rm_calib_conflict *conflicts; /* owned */
	int n_notes;
	char (*notes)[256];           /* owned: runs left out (other devices), rows not fitted and why */
} rm_calib_fit_report;

/*
 * Fits every model that has measurements in the selected runs and stores each success under
 * profile (replacing that model's earlier fit; a failed model keeps its earlier fit), in one
 * transaction. A profile describes one device: when the selected runs come from several GPU
 * models, opts->device (or else the GPU of opts->base) picks one and the others' runs are left
 * out (a note says so); with neither, RM_INVALID lists the devices and their runs. Collective
 * groups are fitted per (operation, ranks, nodes, algorithm); the rows of a single-process run
 * (gpus_per_thread > 1) at its host launch floor (rm_nccl_is_launch_floor against the base's
 * model) and every smaller size of that run are left out, so the fit starts above the floor
 * and the model prices what lies below. Rows of the same benchmark and parameters whose values
 * spread beyond RM_CALIB_CONFLICT_SPREAD are reported as conflicts (and still fitted).
 * The report lists each model with its fit error or why it failed. Returns RM_MISSING when no
 * measurement is selected, RM_INVALID when any fit failed (successes are stored), RM_NOT_FOUND
 * for an unknown base or device, RM_IO for the database (naming the file).
 */
rm_status rm_calib_fit(rm_calib_db *db, const rm_calib_fit_opts *opts, rm_calib_fit_report *report,
		       rm_error *err);
void rm_calib_fit_report_finish(rm_calib_fit_report *report);

/*
 * Dumps the database as JSON (caller json_decref's it; opaque pointer to keep jansson out of
 * this header): schema version, runs with their measurement counts, fits with params.
 */
void *rm_calib_db_dump_json(rm_calib_db *db, rm_error *err);

/* ---- hardware specifications --------------------------------------------------------------- */

typedef struct rm_calib_resolve_opts {
	const char *nccl_version; /* NULL: the calibrated runs' NCCL version (embedded: 2.28) */
	int ranks, nodes;         /* add only the collective overrides fitted for this group; 0: every
				   * group (each override applies to its own group only either way) */
} rm_calib_resolve_opts;

/*
 * Resolves a hardware specification into hw and, when nccl is not NULL, an initialised NCCL
 * model (rm_nccl_model_init with opts->nccl_version):
 * - "h100-sxm" (any embedded name or alias): the embedded default;
 * - "PATH:NAME": the embedded base of profile NAME in the database at PATH with every fitted
 *   field overridden (its source names the fit), and for each fitted collective regime an
 *   override on the (algorithm, protocol) pair the model picks there (restricted to the
 *   algorithm the run forced), plus slower copies on the pairs that would otherwise beat the
 *   measurement, so the model reproduces what was measured. Each override carries the group it
 *   was fitted on (ranks, ranks per node, nodes) and rm_nccl_estimate applies it to that group
 *   only; a fit stored without a topology is not applied. The model's version is opts'
 *   nccl_version, else the runs' release (a release outside the modelled ones takes the default
 *   tables and rm_nccl_model_version_label says so).
 * opts may be NULL. Errors: unknown embedded name (RM_NOT_FOUND, lists names), missing database
 * file, unknown profile (RM_NOT_FOUND, lists the database's profiles), a newer schema
 * (RM_UNSUPPORTED), more overrides than the model holds (RM_RANGE; pass ranks).
 */
rm_status rm_calib_resolve_hw(const char *spec, const rm_calib_resolve_opts *opts, rm_hw_profile *hw,
			      struct rm_nccl_model *nccl, rm_error *err);

/*
 * rm_calib_resolve_hw in the shape of a scenario's hardware resolver (remora/scenario.h
 * rm_hw_resolver): hw for spec and, when nccl is not NULL, the NCCL model (version nccl_version)
 * with the overrides fitted for groups of ranks GPUs over nodes nodes. What every command passes
 * to rm_scenario_resolve and rm_search_create.
 */
rm_status rm_calib_hw_resolver(const char *spec, const char *nccl_version, int ranks, int nodes, rm_hw_profile *hw,
			       struct rm_nccl_model *nccl, rm_error *err);

/*
 * One fitted number without a hardware field, e.g. ("interference.sms", "slowdown_per_sm"),
 * ("interference.nccl", "slowdown"), ("launch.graph", "per_kernel_us"), ("hbm.triad", "GBps"),
 * of the profile a "PATH:NAME" spec names. RM_NOT_FOUND (message names what is missing) when the
 * profile has no such fit or key; errors of rm_calib_db_open otherwise.
 */
rm_status rm_calib_fit_value(const char *spec, const char *model, const char *key, double *value, rm_error *err);

#endif /* REMORA_CALIB_H */
