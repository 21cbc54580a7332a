/*
 * remora/trace.h — measured profiler traces: a streaming reader of Chrome Trace Event JSON
 * (PyTorch profiler / Kineto traces, JAX profiles exported as Perfetto/Chrome JSON), the class of
 * each GPU kernel, and the analysis of one training step from the trace alone (docs/trace.md).
 *
 * Invariants
 * - The reader never holds the whole file: it scans to the "traceEvents" array itself and decodes
 *   one event object at a time with jansson; what it keeps is one compact record per GPU event
 *   (kernel, memcpy, memset), per step annotation and per GEMM operator with shapes, and the
 *   kernel names once each. Memory grows with the GPU events, not with the CPU side of the trace.
 * - Times are integer nanoseconds (int64) from the trace's microsecond "ts"/"dur" (Chrome Trace
 *   Event Format, "ts: the tracing clock timestamp of the event ... in microseconds"), rounded to
 *   the nearest nanosecond; every busy time is the measure of a UNION of intervals, computed
 *   exactly on those integers, never a sum of durations. Figures are reported in seconds.
 * - Same input, same output bit for bit: events are ordered by (start, end, stream, file order)
 *   before any figure is taken.
 *
 * Units: seconds (_s), nanoseconds (_ns), bytes, FLOPs; rates in TFLOP/s (1e12) and GB/s (1e9).
 */
#ifndef REMORA_TRACE_H
#define REMORA_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "remora/calib.h"
#include "remora/common.h"

/*
 * X(NAME, key, compute): the kernel classes (trace/classify.c holds the name patterns). compute:
 * counted in the compute union (everything a collective can hide behind). Copies are GPU work but
 * not compute; NCCL kernels are the communication.
 */
#define RM_TRACE_CLASS_MAP(X)                                                  \
	X(GEMM, "gemm", true)                                                  \
	X(ATTENTION, "attention", true)                                        \
	X(MEMORY_BOUND, "memory_bound", true)                                  \
	X(NCCL, "nccl", false)                                                 \
	X(MEMCPY, "memcpy", false)                                             \
	X(MEMSET, "memset", false)

typedef enum rm_trace_class {
#define RM_TRACE_CLASS_ENUM(name, key, compute) RM_TRACE_##name,
	RM_TRACE_CLASS_MAP(RM_TRACE_CLASS_ENUM)
#undef RM_TRACE_CLASS_ENUM
	RM_TRACE_CLASS_COUNT
} rm_trace_class;

/* The class's key ("gemm", ...); "unknown" outside the table. */
const char *rm_trace_class_key(rm_trace_class cls);
/* Whether the class counts as compute (GEMM, attention, memory-bound). */
bool rm_trace_class_is_compute(rm_trace_class cls);

/*
 * The class of a GPU event from its name, its trace category (Kineto's "cat": "kernel",
 * "gpu_memcpy", "gpu_memset"; may be NULL) and, for JAX traces, the XLA op (args "hlo_op" or
 * "long_name"; may be NULL), by the first matching row of the table in trace/classify.c.
 * Unrecognised kernels are RM_TRACE_MEMORY_BOUND (the rest of a step's kernels are elementwise,
 * reductions, norms, copies by kernel); never fails.
 */
rm_trace_class rm_trace_classify(const char *name, const char *cat, const char *xla_op);

/* What an NCCL kernel's name says. Empty strings for parts the name does not carry. */
typedef struct rm_trace_nccl_name {
	char op[24];    /* "AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce",
			   "SendRecv", "AllGatherV", "Generic" ... as NCCL spells it */
	char algo[24];  /* "RING", "TREE", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT" */
	char proto[8];  /* "LL", "LL128", "SIMPLE" */
	char redop[16]; /* "Sum", "Prod", "MinMax", "PreMulSum", "SumPostDiv" (and Min, Max of old names) */
	char type[16];  /* "f32", "bf16", "float", "int8_t" ... as the name spells it */
} rm_trace_nccl_name;

/*
 * Parses an NCCL kernel name: "ncclDevKernel_AllGather_RING_LL(...)" (NCCL >= 2.19:
 * coll[_redop_type]_algo_proto, src/device/generate.py), "ncclKernel_AllReduce_RING_LL_Sum_float(...)"
 * (NCCL <= 2.18: coll_algo_proto_redop_type), "ncclSymkDevKernel_..." (2.27 symmetric kernels), with
 * or without a leading "void ". Note: since 2.19 one kernel per collective serves every algorithm
 * and protocol (best_kernel in generate.py), so the name's algo/proto is its specialisation, not
 * always the one that ran. false (out cleared) when name is not an NCCL kernel.
 */
bool rm_trace_nccl_parse(const char *name, rm_trace_nccl_name *out);

/* One rank's (one file's) trace, opaque. */
typedef struct rm_trace rm_trace;

/*
 * Reads a trace file, plain JSON or gzip (zlib reads both), streaming. The document is either an
 * object with a "traceEvents" array (other members: "distributedInfo" gives the rank; the rest is
 * skipped) or an array of events (the format's "JSON Array Format"; its closing "]" may be missing,
 * as the format allows). NULL with err on failure, positioned as "FILE:LINE:COLUMN" in the
 * (decompressed) text, the message saying so for gzip input and giving the compressed byte offset:
 * cannot open; truncated or corrupt gzip; malformed or truncated JSON; no "traceEvents"; an event
 * that is not an object or a GPU event without a numeric ts/dur or with a negative dur; no GPU
 * events at all (RM_NOT_FOUND).
 */
rm_trace *rm_trace_read(const char *path, rm_error *err);
/* The same from memory (plain JSON only); name is used in error positions. */
rm_trace *rm_trace_read_mem(const char *data, size_t len, const char *name, rm_error *err);
/* Frees t; NULL ok. */
void rm_trace_destroy(rm_trace *t);

/* What the reader found. */
typedef struct rm_trace_summary {
	int64_t events;        /* every element of traceEvents */
	int64_t gpu_events;    /* kernels + memcpy + memset kept */
	int64_t kernels;       /* of which kernels (not memcpy/memset) */
	int64_t nccl_kernels;
	int64_t steps;         /* ProfilerStep#N annotations (or JAX "Steps" events) */
	int64_t gemm_shapes;   /* GEMM operators with shapes (record_shapes) */
	int devices;           /* GPU devices with events */
	int streams;           /* (device, stream) pairs with events */
	int rank;              /* distributedInfo.rank; -1 when absent */
	const char *format;    /* "kineto" or "jax" (GPU events found on /device:GPU streams) */
	int64_t text_bytes;    /* JSON bytes read (after decompression) */
} rm_trace_summary;

void rm_trace_summary_get(const rm_trace *t, rm_trace_summary *out);

/* One stream's figures in a window. */
typedef struct rm_trace_stream_fig {
	int device;
	int64_t stream;
	int64_t kernels;   /* events starting in the window */
	double busy_s;     /* union of its events, clipped to the window */
	bool compute;      /* runs compute kernels anywhere in the trace */
	bool comm;         /* runs NCCL kernels anywhere in the trace */
} rm_trace_stream_fig;

/* One NCCL kernel kind (op, algo, proto from the name) in a window. */
typedef struct rm_trace_nccl_fig {
	char op[24], algo[24], proto[8];
	int64_t count;
	double busy_s;
} rm_trace_nccl_fig;

/* The figures of one window (a step, or the span of the GPU events). */
typedef struct rm_trace_fig {
	double step_s;            /* the window's length */
	double gpu_busy_s;        /* union of all GPU events */
	double compute_busy_s;    /* union of compute-class kernels on all streams */
	double comm_busy_s;       /* union of NCCL kernels */
	double exposed_comm_s;    /* measure of (comm union minus compute union) */
	double idle_s;            /* step_s - gpu_busy_s */
	int64_t coll_on_compute_count; /* NCCL kernels on a stream that also runs compute kernels */
	double coll_on_compute_s;      /* their union */
	double class_s[RM_TRACE_CLASS_COUNT];     /* union per class */
	int64_t class_count[RM_TRACE_CLASS_COUNT];
	double gemm_flops;        /* FLOPs of GEMM kernels whose operator had shapes (2*M*N*K) */
	double gemm_shaped_s;     /* sum of those kernels' durations (a rate's denominator) */
	double copy_bytes;        /* bytes of memcpy/memset events that give them (args "bytes") */
	double copy_bytes_s;      /* sum of those events' durations */
	rm_trace_stream_fig *streams; /* n_streams, in (device, stream) order */
	rm_trace_nccl_fig *nccl;      /* n_nccl, in (op, algo, proto) order */
} rm_trace_fig;

/* A window: a step (number >= 0) or the GPU span (number -1). */
typedef struct rm_trace_window {
	int64_t number;
	int64_t start_ns, end_ns;
	rm_trace_fig fig;
} rm_trace_window;

/* The analysis of one device of one trace. */
typedef struct rm_trace_report {
	int rank;                 /* distributedInfo.rank, else the file's index in the input */
	int device;
	bool from_steps;          /* windows are ProfilerStep annotations; else one GPU span */
	int n_windows;
	rm_trace_window *windows; /* by start time */
	rm_trace_fig median;      /* each figure's median over the windows (the mean of the two middle
				     ones for an even count); one window: its figures */
	int n_streams, n_nccl;
} rm_trace_report;

/*
 * Analyses every device of t: one report per device with GPU events, in device order, appended to
 * *reports (grown with realloc; *n counts them). rank_default is used when the trace carries no
 * distributedInfo.rank. Window rules (docs/trace.md): events are clipped to the window for every
 * time; counts take the events that start in it; a stream is a compute (comm) stream when it runs a
 * compute (NCCL) kernel anywhere in the trace. Never fails on a trace rm_trace_read returned.
 */
void rm_trace_analyze(const rm_trace *t, int rank_default, rm_trace_report **reports, int *n);
/* Frees what rm_trace_analyze allocated for n reports, and the array. */
void rm_trace_reports_free(rm_trace_report *reports, int n);

/* ---- calibration rows from a trace (trace/calib.c) --------------------------------------- */

/* The kinds of kernel that become calibration rows. */
enum { RM_TRACE_CALIB_GEMM, RM_TRACE_CALIB_ATTENTION, RM_TRACE_CALIB_NCCL, RM_TRACE_CALIB_KINDS };

typedef struct rm_trace_calib_stats {
	int files, runs;
	int64_t first_run_id;
	int64_t rows[RM_TRACE_CALIB_KINDS];    /* measurement rows written (identical shapes aggregated) */
	int64_t kernels[RM_TRACE_CALIB_KINDS]; /* kernels linked to the operators of those rows */
	int64_t skipped[RM_TRACE_CALIB_KINDS]; /* kernels of the class (by name: GEMM, attention, NCCL)
						  linked to no operator with shapes: not stored */
} rm_trace_calib_stats;

/*
 * Imports the kernels of n_paths traces (rm_trace_read: plain or gzip Kineto JSON) whose operator
 * shapes are known as calibration measurements (docs/calibrate.md "From a profiler trace"), one
 * run per (file, device), all in one transaction after every file is read:
 *   gemm       {m, n, k, batch, dtype, layout, op, count, device[, rank]}  us  (remora-calibrate's)
 *   attention  {batch, heads, kv_heads, seq_q, seq_kv, head_dim, pass, dtype, op, count, device
 *               [, causal][, rank]}                                         us  (no fit reads it yet)
 *   all_gather, reduce_scatter, all_reduce, all_to_all, send_recv {bytes, ranks, dtype, algo
 *               "default", count, device[, nodes][, rank][, kernel_algo, kernel_proto]}     us
 * An operator's time is the sum of the durations of the GPU kernels linked to it by Kineto's
 * "External id" (a split-K GEMM's reduction included); identical params (count aside) aggregate to
 * the median of those times, count keeping how many. nodes is the number of distinct rank /
 * gpus_per_node over the group's ranks ("Process Group Ranks", else "Global rank start"/"stride")
 * when gpus_per_node > 0; without it the collective rows carry no node count and the fit leaves
 * them out. The run: source "trace: PATH", gpu from deviceProperties[device].name, cuda and driver
 * from cuda_runtime_version/cuda_driver_version, nccl from distributedInfo.nccl_version, each
 * "unknown" when absent. Errors: those of rm_trace_read (FILE:LINE:COL) and of
 * rm_calib_import_rows; RM_MISSING when no kernel of any file has shapes. Nothing is written then.
 * stats may be NULL.
 */
rm_status rm_trace_calib_import(rm_calib_db *db, const char *const *paths, int n_paths, int gpus_per_node,
				rm_trace_calib_stats *stats, rm_error *err);

#endif /* REMORA_TRACE_H */
