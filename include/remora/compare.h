/*
 * remora/compare.h — a prediction next to a measurement (`remora compare`, docs/trace.md
 * "compare"): the simulated step of a scenario and the step of a profiler trace, analysed by the
 * SAME rules (remora/trace.h rm_trace_analyze), row by row, with the largest discrepancies and one
 * Perfetto trace holding both runs.
 *
 * Invariants
 * - The predicted run is turned into a trace (rm_compare_sim_trace: device 0, one stream per
 *   program stream, one event per op that takes time) and analysed exactly as a measured trace
 *   is, so every figure of the two columns has one definition: a union of intervals clipped to
 *   the step, never a sum of durations.
 * - Class mapping (remora's breakdown classes, remora/sim.h, onto the trace classes): an op's
 *   trace class is that of its cost kind whatever its phase: gemm -> gemm; attention (forward and
 *   backward, attention_fwd + attention_bwd) -> attention; elementwise (memory_bound + optimizer)
 *   -> memory_bound; recompute goes by its ops' kinds; collective (exposed_comm is its exposed
 *   part) -> nccl; copy (h2d, d2h, d2d: copies) -> memcpy. remora models no memset: that row has
 *   no counterpart (predicted 0, flagged).
 * - Collectives by NCCL's name of the operation: all-gather AllGather, reduce-scatter
 *   ReduceScatter, all-reduce AllReduce, all-to-all and send-recv (collective permute) SendRecv
 *   (NCCL runs both as grouped ncclSend/ncclRecv, the SendRecv kernel). Measured NCCL kernels
 *   are grouped by the op of their name over every algorithm and protocol.
 * - Predicted is one step from t = 0; measured is each figure's median over the trace's steps
 *   (remora/trace.h rm_trace_report.median), or the span of its GPU events when it has no step
 *   annotations.
 *
 * Units: seconds (_s), nanoseconds (_ns); error in percent of the measured figure.
 */
#ifndef REMORA_COMPARE_H
#define REMORA_COMPARE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "remora/common.h"
#include "remora/program.h"
#include "remora/scenario.h"
#include "remora/sim.h"
#include "remora/trace.h"

/* The number of discrepancies rm_compare_build names (the "five largest"). */
#define RM_COMPARE_TOP 5

/* Row groups: X(NAME, key). */
#define RM_COMPARE_GROUP_MAP(X)                                                \
	X(STEP, "step")                                                        \
	X(CLASS, "class")                                                      \
	X(FIGURE, "figure")                                                    \
	X(COLLECTIVE, "collective")

typedef enum rm_compare_group {
#define RM_COMPARE_GROUP_ENUM(name, key) RM_COMPARE_##name,
	RM_COMPARE_GROUP_MAP(RM_COMPARE_GROUP_ENUM)
#undef RM_COMPARE_GROUP_ENUM
	RM_COMPARE_GROUP_COUNT
} rm_compare_group;

/* "step", "class", "figure", "collective"; "unknown" outside the table. */
const char *rm_compare_group_key(rm_compare_group g);

/* One row: a figure predicted and measured. */
typedef struct rm_compare_row {
	rm_compare_group group;
	char key[40];          /* "step_s"; "gemm" ... (trace class keys); "compute_busy_s",
				  "comm_busy_s", "exposed_comm_s", "idle_s",
				  "collectives_on_compute_stream"; "AllGather" ... */
	double predicted_s, measured_s;
	bool counted;          /* the counts below are meaningful (classes, collectives, the
				  collectives on the compute stream) */
	int64_t predicted_count, measured_count; /* predicted ops / measured kernels (median) */
	bool modelled;         /* false: remora predicts no such thing (memset), predicted is 0 */
} rm_compare_row;

/* The signed error of a row in percent: 100 (predicted - measured) / measured; NAN when measured
 * is 0. */
double rm_compare_row_error_pct(const rm_compare_row *r);

/* The comparison of one predicted step with one measured rank and device. */
typedef struct rm_compare {
	int rank, device;        /* the measured report's */
	bool from_steps;         /* measured windows are step annotations; else the GPU span */
	int n_windows;
	int shown_window;        /* the window of the merged trace: the one whose step_s is the median
				    (the lower middle one for an even count; the earliest among equals) */
	int64_t shown_number;    /* its step number (-1: the GPU span) */
	int64_t shown_start_ns, shown_end_ns;
	rm_compare_row *rows;    /* step; classes in trace-class order; the figures; collectives in
				    name order */
	int n_rows;
	int largest[RM_COMPARE_TOP]; /* row indices by |predicted - measured| descending (ties: row
					order); rows where both figures are 0 are left out */
	int n_largest;
} rm_compare;

/*
 * Builds the schedule of a resolved scenario (rm_schedule_build) and simulates it with the options
 * `remora simulate` runs it with (cli/cmd_simulate.c, search/validate.c), the memory timeline
 * kept for the merged trace. On success *prog and *sim are the caller's (rm_sim_destroy, then
 * rm_program_destroy). The scheduler's or the engine's error with err otherwise; RM_UNSUPPORTED
 * for a pipelined scenario (parallelism.pp > 1: simulated stage by stage, no one program).
 */
rm_status rm_compare_simulate(const rm_scenario_resolved *res, rm_program **prog, rm_sim **sim, rm_error *err);

/*
 * The predicted run of sim (after rm_sim_run) as a trace: device 0; stream i of the program is
 * stream i; one event per op of positive duration, its name the op's, its class by its cost kind
 * (mapping above), its time rounded to the nanosecond; NCCL kinds by op only (algorithm and
 * protocol empty); one step annotation, [0, the simulated step time) (rm_sim_metrics.step_time,
 * to the nanosecond), so the predicted report has one window from t = 0. rank 0. New
 * trace for rm_trace_destroy; NULL with err (RM_INVALID) when sim has not run.
 */
rm_trace *rm_compare_sim_trace(const rm_sim *sim, rm_error *err);

/*
 * rm_trace_analyze with the NCCL kinds of t merged by op (AllGather over every algorithm and
 * protocol: rm_trace_nccl_fig.algo and .proto empty), so each collective's time is one union.
 * Reports appended to *reports as rm_trace_analyze does; free with rm_trace_reports_free.
 */
void rm_compare_analyze(const rm_trace *t, int rank_default, rm_trace_report **reports, int *n);

/*
 * The report to compare: the first (lowest device) report of rank; rank < 0: rank 0 when
 * present, else the first report. NULL with err (RM_NOT_FOUND, naming the ranks there are) when
 * rank >= 0 is not among the n reports.
 */
const rm_trace_report *rm_compare_pick(const rm_trace_report *reports, int n, int rank, rm_error *err);

/*
 * Fills out from the predicted report (rm_compare_analyze of rm_compare_sim_trace: one window)
 * and the measured one (its median): the rows described above, the window the merged trace
 * shows and the largest discrepancies. Collectives: the union of the ops both sides have. Never
 * fails; free with rm_compare_finish.
 */
void rm_compare_build(const rm_trace_report *predicted, const rm_trace_report *measured, rm_compare *out);
/* Frees what rm_compare_build allocated; NULL ok. */
void rm_compare_finish(rm_compare *c);

/*
 * The comparison as JSON (schema "remora.compare/1", docs/trace.md): measured {rank, device,
 * window "steps_median"|"gpu_span", steps, shown_step}, step, classes {key: {predicted_s,
 * measured_s, error_pct, predicted_count, measured_count, modelled}}, figures {key: ...},
 * collectives [{op, ...}], largest_discrepancies [{group, key, predicted_s, measured_s, diff_s,
 * error_pct}]; error_pct null when measured is 0. New reference.
 */
json_t *rm_compare_json(const rm_compare *c);

/*
 * Writes one Chrome JSON trace holding both runs: process 1 "predicted" (remora's own trace of
 * sim, remora/sim.h rm_trace_write: streams, slices, flows, memory counter), process 2
 * "measured": the GPU events of measured's device that overlap the window c->shown_*, clipped
 * to it and shifted so that the window starts at t = 0, one track per stream ("stream N"), each
 * slice's args giving its class. Both steps start at 0. Deterministic. false with err (RM_IO)
 * when writing fails.
 */
bool rm_compare_write_trace(const rm_sim *sim, const rm_trace *measured, const rm_compare *c, FILE *out,
			    rm_error *err);

#endif /* REMORA_COMPARE_H */
