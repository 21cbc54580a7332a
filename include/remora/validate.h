/*
 * remora/validate.h — validation cases: public end-to-end measurements of real training runs
 * checked against remora's predictions (search/validate.c; docs/validate.md has the file format).
 *
 * A case is one YAML file: the run's scenario (a scenario file or an inline mapping in the scenario
 * format, remora/scenario.h), optional --set style overrides, what was measured (tokens/s per GPU,
 * MFU in a stated convention, peak memory of a stated kind), the source, and what had to be
 * assumed. Running a case resolves, schedules and simulates its scenario exactly as `remora
 * simulate` does, then compares.
 *
 * Errors: signed, 100 * (predicted - measured) / measured percent, against the midpoint of a
 * measured range. MFU differences are in percentage points.
 *
 * Units: tokens per second per GPU; MFU a fraction (0-1); memory in bytes (GiB = 2^30 in files).
 */
#ifndef REMORA_VALIDATE_H
#define REMORA_VALIDATE_H

#include <stdbool.h>
#include <stdint.h>

#include "remora/common.h"
#include "remora/scenario.h"

#define RM_VALIDATE_SCHEMA "remora.validate/1"
/* items of a case's `assumed` and `set` lists */
#define RM_VALIDATION_MAX_ITEMS 32
/* the acceptance bars: no case worse than 20%, MFU no higher than measured + 5 points */
#define RM_VALIDATION_BAD_ERROR_PCT 20.0
#define RM_VALIDATION_MFU_MARGIN_POINTS 5.0

/* X(NAME, name in files). palm_noncausal: 6 N_nonembedding + 12 L h s FLOPs per token, attention
 * counted over every (query, key) pair, as torchtitan and PaLM appendix B count it
 * (rm_workload_model_flops_per_token); remora: the causal-aware figure `remora simulate` prints
 * (rm_workload_mfu_flops_per_token). */
#define RM_MFU_CONVENTIONS(X) \
	X(PALM_NONCAUSAL, "palm_noncausal") \
	X(REMORA, "remora")

typedef enum rm_mfu_convention {
#define RM_MFU_CONVENTION_ENUM(name, text) RM_MFU_##name,
	RM_MFU_CONVENTIONS(RM_MFU_CONVENTION_ENUM)
#undef RM_MFU_CONVENTION_ENUM
	RM_MFU_CONVENTION_COUNT
} rm_mfu_convention;

/* X(NAME, name in files). reserved: PyTorch's peak reserved (the caching allocator's segments);
 * allocated: peak allocated (live tensors); active_fraction: peak active memory as a fraction of
 * the device's memory, as torchtitan prints "23.9% of memory peak active". */
#define RM_MEMORY_KINDS(X) \
	X(NONE, "none") \
	X(RESERVED, "reserved") \
	X(ALLOCATED, "allocated") \
	X(ACTIVE_FRACTION, "active_fraction")

typedef enum rm_memory_kind {
#define RM_MEMORY_KIND_ENUM(name, text) RM_MEMORY_##name,
	RM_MEMORY_KINDS(RM_MEMORY_KIND_ENUM)
#undef RM_MEMORY_KIND_ENUM
	RM_MEMORY_KIND_COUNT
} rm_memory_kind;

/* The names in files ("palm_noncausal", "reserved"); "?" outside the tables. */
const char *rm_mfu_convention_name(rm_mfu_convention c);
const char *rm_memory_kind_name(rm_memory_kind k);

/* A measured figure: one value (low == high) or a range [low, high]; set false when absent. */
typedef struct rm_measured {
	bool set;
	double low, high;
} rm_measured;

/* The midpoint of a measured figure, what predictions are compared with. */
double rm_measured_mid(rm_measured m);

typedef struct rm_validation_case {
	char path[512];
	char name[128];
	char source[512];
	char notes[2048];
	int n_assumed;
	char assumed[RM_VALIDATION_MAX_ITEMS][512];
	int n_sets;
	char sets[RM_VALIDATION_MAX_ITEMS][1024];
	int set_line[RM_VALIDATION_MAX_ITEMS], set_column[RM_VALIDATION_MAX_ITEMS]; /* in the case file */
	char scenario_file[1100]; /* the scenario file the case names, "" when inline */
	rm_scenario scenario;     /* parsed, overrides applied */
	rm_measured tokens_per_s_per_gpu; /* required */
	rm_measured mfu;                  /* fraction 0-1 */
	rm_mfu_convention mfu_convention;
	rm_measured memory;               /* GiB; a fraction for active_fraction */
	rm_memory_kind memory_kind;
	double device_memory_gib; /* active_fraction: memory the fraction is of; 0: the hardware's HBM */
} rm_validation_case;

/*
 * Parses a case file's text (path names it in errors, and relative scenario and model paths are
 * taken from its folder) into c. Errors: malformed YAML, unknown keys, a missing name, source or
 * measured.tokens_per_s_per_gpu, a bad value or range, and any error of the scenario and of the
 * overrides, each as path:LINE:COLUMN (the scenario file's own position when the case names one).
 */
rm_status rm_validation_case_parse(const char *text, size_t len, const char *path, rm_validation_case *c,
				   rm_error *err);
/* Reads and parses a case file. */
rm_status rm_validation_case_load(const char *path, rm_validation_case *c, rm_error *err);

/* One case's predictions beside its measurements (predicted_* and measured_*; NAN where the case
 * measured nothing). */
typedef struct rm_validation_result {
	double step_time_s;
	double tokens_per_s_per_gpu, measured_tokens_per_s_per_gpu;
	double tokens_error_pct;
	double mfu, measured_mfu;        /* in the case's convention */
	double mfu_remora, mfu_palm_noncausal;
	double mfu_excess_points;        /* 100 * (mfu - measured_mfu) */
	int64_t memory_bytes;            /* the predicted figure the measured kind compares with */
	const char *memory_metric;       /* which engine metric that is ("peak_memory_bytes") */
	double measured_memory_bytes;    /* a fraction converted with the device's memory */
	double memory_error_pct;
	double device_memory_bytes;      /* active_fraction: what the fraction is of */
	int64_t peak_memory_bytes, memory_usable_bytes;
	bool fits;
} rm_validation_result;

/*
 * Runs a case: resolves its scenario with resolver (NULL: embedded profiles; the command line
 * passes rm_calib_hw_resolver), builds the schedule and simulates it as `remora simulate` does,
 * and compares. Errors: the scenario's resolution and scheduling errors, at their keys (a key
 * one of the case's overrides set: at that override in the case file).
 */
rm_status rm_validation_run(const rm_validation_case *c, rm_hw_resolver resolver, rm_validation_result *out,
			    rm_error *err);

/* The median of |v[i]| over the entries that are not NAN (mean of the two middle ones for an
 * even count); NAN when there are none. */
double rm_validation_median_abs(const double *v, int n);

typedef struct rm_validation_summary {
	int cases;
	int tokens_cases, memory_cases;          /* cases with that figure measured */
	double tokens_median_abs_pct, memory_median_abs_pct; /* NAN when no case */
	int worst;                               /* index of the case with the largest |error|, -1 none */
	const char *worst_metric;                /* "tokens_per_s_per_gpu" or "memory" */
	double worst_error_pct;                  /* signed */
	int over_bad_error;   /* cases with |error| > RM_VALIDATION_BAD_ERROR_PCT in either figure */
	int mfu_over_margin;  /* cases whose MFU exceeds measured + RM_VALIDATION_MFU_MARGIN_POINTS */
} rm_validation_summary;

/* Summarises n results (ties for the worst case go to the first). */
void rm_validation_summarize(const rm_validation_result *r, int n, rm_validation_summary *out);

#endif /* REMORA_VALIDATE_H */
