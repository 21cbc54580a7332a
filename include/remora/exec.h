/*
 * remora/exec.h — the executor's plan, comparison and trace (exec/, plain C, always built).
 * docs/exec.md has the design.
 *
 * `remora exec` runs a schedule program (remora/program.h) on real GPUs. Everything that needs
 * no GPU lives here, so it builds and is tested on any machine:
 * - the execution plan: where every tensor lives (one device pool for the non-persistent
 *   tensors, a persistent region, pinned host memory, a scratch region for operands the
 *   program's tensors do not cover), what every op reads and writes, per-stream and per-kind
 *   counts, the device bytes the run will allocate;
 * - the checks that fail before anything launches (memory against the device, dtypes the GEMM
 *   path cannot run, collective groups that do not match the launch);
 * - how attention runs: fused by default (cuDNN's flash SDPA through its graph API: forward
 *   output and softmax stats, backward dQ, dK, dV and its fp32 workspace, no s x s scores), or
 *   unfused (batched GEMMs and softmax kernels over chunked s x s scores, with their cost);
 * - the comparison of a measurement with the engine's prediction, the measured trace (the
 *   simulator's Chrome/Perfetto format) and the calibration rows of a measurement.
 * The CUDA runner (exec/cuda/, only where nvcc and NCCL are found) fills an rm_exec_measurement.
 *
 * Memory plan: ops are taken in launch order (the program's op order, except where a wait comes
 * before its event's record: rm_exec_launch_order). A non-persistent device tensor is live from
 * its producer's launch position to its last consumer's (inclusive; an unread output only at its
 * producer). Tensors are placed greedily by size, largest first (ties by id),
 * each at the lowest offset aligned to RM_EXEC_ALIGN that overlaps no placed tensor whose
 * lifetime intersects its own (the TensorFlow Lite arena planner's "greedy by size"). The pool is
 * the highest end. Host tensors are planned the same way in pinned host memory; persistent
 * device tensors are laid out one after another. Deterministic: same program, same plan.
 *
 * Units: bytes, seconds (_s), FLOPs.
 */
#ifndef REMORA_EXEC_H
#define REMORA_EXEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "remora/common.h"
#include "remora/cost.h"
#include "remora/hw.h"
#include "remora/program.h"

#define RM_EXEC_ALIGN 256                       /* bytes, cudaMalloc's alignment */
#define RM_EXEC_WORKSPACE_BYTES (32 * RM_MiB)   /* cuBLASLt workspace per compute stream */
#define RM_EXEC_MAX_OPERANDS 12
#define RM_EXEC_STREAM_SCRATCH (256 * RM_MiB) /* elementwise operands without a tensor */
#define RM_EXEC_SCORES_BYTES RM_GiB           /* unfused attention's scores per chunk */
#define RM_EXEC_ATTN_FUSED_KERNEL "cudnn-sdpa"      /* measurement/plan attention_kernel names */
#define RM_EXEC_ATTN_UNFUSED_KERNEL "cublaslt-unfused"
#define RM_EXEC_BYTES_MAX (INT64_MAX / 4)       /* the plan's byte counts saturate here (2^61 B) */
#define RM_EXEC_PLAN_SCHEMA "remora.exec-plan/1"
#define RM_EXEC_COMPARE_SCHEMA "remora.exec-compare/1"

typedef enum rm_exec_region {
	RM_EXEC_POOL,       /* non-persistent device tensors, reused over their lifetimes */
	RM_EXEC_PERSISTENT, /* persistent device tensors */
	RM_EXEC_HOST,       /* host tensors (pinned) */
	RM_EXEC_SCRATCH,    /* operands no program tensor covers (shared: values are not kept) */
	RM_EXEC_REGION_COUNT
} rm_exec_region;

/*
 * How the executor runs attention ops (`remora exec --attention fused|unfused`):
 * - FUSED (the default): an op whose program shape says fused (rm_attention_shape.fused, the
 *   kernel the simulator priced) runs cuDNN's flash SDPA; an op the model prices unfused runs
 *   unfused either way;
 * - UNFUSED: every attention op runs rm_exec_attention_steps (GEMMs + softmax kernels).
 */
typedef enum rm_exec_attention_mode { RM_EXEC_ATTN_FUSED, RM_EXEC_ATTN_UNFUSED } rm_exec_attention_mode;

/* "fused", "unfused"; parse returns false on anything else. */
const char *rm_exec_attention_mode_name(rm_exec_attention_mode m);
bool rm_exec_attention_mode_parse(const char *name, rm_exec_attention_mode *out);

/* "pool", "persistent", "host", "scratch". */
const char *rm_exec_region_name(rm_exec_region r);

/* Where a tensor lives. first_op/last_op: its lifetime as positions in the launch order
 * (plan->launch_order; op indices when no op is reordered; -1: never used). */
typedef struct rm_exec_placement {
	rm_exec_region region;
	int64_t offset, bytes;
	int32_t first_op, last_op;
} rm_exec_placement;

/* One operand of an op's kernel: bytes at offset of a region; tensor is the program tensor it
 * came from, or -1 for scratch. */
typedef struct rm_exec_operand {
	rm_exec_region region;
	int64_t offset, bytes;
	int64_t extent; /* the buffer's bytes (<= bytes): elementwise kernels stream bytes over it */
	int32_t tensor;
} rm_exec_operand;

/*
 * The operands of each kind, in this order:
 *   gemm        A [batch,m,k], B [batch,k,n], D [batch,m,n] (fp8: D in bf16)
 *   attention   fused (op plan's fused): rm_exec_attention_fused_operands' list;
 *               unfused: Q, K, V, O [b,heads,s,d] (K, V expanded to heads), S [chunk,s,s] with
 *               chunk rm_exec_attention_chunk(a) of the b*heads (the lowering runs chunk by
 *               chunk); backward adds dO, dS (dQ, dK, dV reuse Q, K, V's shapes in scratch: 3 more)
 *   elementwise the bytes read (over the largest input), the bytes written (over the largest
 *               output, else the largest input: updates in place); bytes beyond the tensor wrap
 *               around it; without a tensor, scratch of at most RM_EXEC_STREAM_SCRATCH
 *   copy        source, destination (h2d: host then device; d2h: device then host)
 *   collective  send, receive (nccl-tests' sizes: all_gather send bytes/group, receive bytes...)
 * An operand is the op's first input (sources) or output (destinations) tensor when that tensor is
 * at least as large and in the right memory; otherwise scratch.
 */
typedef struct rm_exec_op_plan {
	bool fused; /* attention: runs cuDNN's fused SDPA (operands as rm_exec_attention_fused_operands) */
	int n_operands;
	rm_exec_operand operand[RM_EXEC_MAX_OPERANDS];
} rm_exec_op_plan;

typedef struct rm_exec_plan {
	const rm_program *prog;    /* not owned; must outlive the plan */
	rm_exec_placement *tensors; /* n_tensors */
	rm_exec_op_plan *ops;       /* n_ops */
	int64_t region_bytes[RM_EXEC_REGION_COUNT];
	int64_t pool_live_peak_bytes; /* max over launch order of live pool bytes (pool >= this) */
	int64_t workspace_bytes;      /* cuBLASLt workspaces (one per stream running GEMMs) */
	int64_t device_bytes;         /* pool + persistent + scratch + workspaces */
	int32_t *stream_ops;          /* ops per stream, n_streams */
	int32_t kind_ops[RM_COST_KIND_COUNT];
	int64_t kind_bytes[RM_COST_KIND_COUNT]; /* gemm/attention: operand bytes; others: moved */
	double kind_flops[RM_COST_KIND_COUNT];
	int32_t max_group;            /* largest collective group (1 when none) */
	rm_exec_attention_mode attention_mode; /* as asked of rm_exec_plan_create */
	int32_t attention_fused;      /* attention ops run as cuDNN's fused SDPA */
	int32_t attention_unfused;    /* attention ops run as GEMMs + softmax */
	int32_t oversized_op;         /* first op whose operands reach RM_EXEC_BYTES_MAX, or -1 */
	int32_t early_waits;          /* waits on an event recorded by an op later in program order */
	int32_t *launch_order;        /* n_ops: the op the runner enqueues k-th (rm_exec_launch_order) */
	int32_t reordered_ops;        /* ops whose launch position is not their program index */
} rm_exec_plan;

/*
 * The order the runner enqueues prog's ops in (order[k]: the op launched k-th, n_ops entries):
 * program order, except that an op never launches before the op recording an event it waits
 * on. cudaStreamWaitEvent waits on the event's most recent record at the time of the call: a wait
 * enqueued before its record would wait on the previous iteration's record (or on nothing in the
 * first), and inside a stream capture it is an error. The order is the topological order of the
 * program's dependencies (each op after the previous op of its stream and after the recorder of
 * every event it waits on) that takes the smallest ready op index first (Kahn's algorithm with a
 * min-heap, O((ops + waits) log ops)), so it is the identity when no wait precedes its record,
 * and every stream keeps its program order. prog must be valid (rm_program_validate: no cycle).
 * Returns the waits that precede their record in program order; *reordered (may be NULL): the
 * ops whose position differs from their index. Deterministic.
 */
int32_t rm_exec_launch_order(const rm_program *prog, int32_t *order, int32_t *reordered);

/*
 * Plans prog (validated with rm_program_validate first; its errors are returned as they are),
 * attention as mode says (rm_exec_attention_mode). Never fails on sizes or dtypes: those are
 * rm_exec_plan_check's. NULL with err when invalid.
 */
rm_exec_plan *rm_exec_plan_create(const rm_program *prog, const char *file, rm_exec_attention_mode mode,
				  rm_error *err);
void rm_exec_plan_destroy(rm_exec_plan *plan);

typedef struct rm_exec_limits {
	const rm_hw_profile *hw;   /* capacity (hbm_bytes) and FP8 support; required */
	int64_t device_free_bytes; /* free device memory seen by the runner (cudaMemGetInfo); 0: unknown */
	int world;                 /* ranks of the launch; 0: the program's largest group */
} rm_exec_limits;

/*
 * The checks that must pass before anything launches, first failure reported (RM_UNSUPPORTED
 * for a dtype, RM_RANGE for memory, RM_INVALID for a group), naming the op or the sizes:
 * - a GEMM in int32 or uint8 (cuBLASLt's integer GEMMs are not a training path), or in fp8 on a
 *   profile with no FP8 tensor cores (fp8_TFLOPs == 0, e.g. A100); attention in fp8 or an
 *   integer type;
 * - device_bytes above hw->hbm_bytes, or above device_free_bytes when known;
 * - a collective whose group is neither 1 nor the world (one process per GPU: mpirun -np N).
 */
rm_status rm_exec_plan_check(const rm_exec_plan *plan, const rm_exec_limits *lim, rm_error *err);

/* The plan as JSON (schema remora.exec-plan/1): streams with their ops, regions, kinds,
 * device bytes, per-tensor placements only when with_tensors. New reference. */
json_t *rm_exec_plan_json(const rm_exec_plan *plan, bool with_tensors);
/* The plan as text: streams, regions, op counts per kind, device bytes. */
void rm_exec_plan_print(const rm_exec_plan *plan, FILE *out);

/*
 * Attention as the executor runs it without a fused kernel: batched GEMMs over b*heads (K and V
 * expanded to heads) and a memory-bound softmax pass over the full s x s scores (the causal mask
 * is applied in the softmax, so the GEMMs do the non-causal FLOPs).
 * Forward: S = Q K^T (s,s,d), softmax(S) read + write, O = P V (s,d,s).
 * Backward: S recomputed (s,s,d) and its softmax (read + write), dV = P^T dO (s,d,s),
 * dP = dO V^T (s,s,d), softmax backward (read P, dP; write dS), dQ = dS K (s,d,s),
 * dK = dS^T Q (s,d,s): the softmax cost covers both passes (rm_exec_attention_steps).
 * Fills gemms (up to 5) and softmax; returns the number of GEMMs.
 */
int rm_exec_attention_lowering(const rm_attention_cost *a, rm_gemm_shape gemms[5],
			       rm_elementwise_cost *softmax);
/* The (batch x head) slices per chunk of the unfused attention: as many as keep each scores
 * buffer (s x s elements) within RM_EXEC_SCORES_BYTES, at least 1, at most b*heads. */
int64_t rm_exec_attention_chunk(const rm_attention_cost *a);
/*
 * Attention run fused: cuDNN's flash SDPA (graph API), as cudnn-frontend lowers its sdpa and
 * sdpa_backward nodes on cuDNN 9 without dropout, bias or the deterministic dP workspace
 * (include/cudnn_frontend/node/scaled_dot_product_flash_attention.h). Every tensor is
 * [b, heads, s, d] row-major (strides h*s*d, s*d, d, 1 elements); the operands, in this order:
 *   forward   Q [b,h,s,d], K, V [b,hkv,s,d] read; O [b,h,s,d] and the softmax stats [b,h,s,1]
 *             fp32 (the log-sum-exp of each query row's scaled, masked scores) written
 *   backward  Q, K, V, O, stats, dO read; dQ, dK, dV written (Q, K, V's shapes); then the
 *             workspace the graph's non-virtual intermediates take: dQ accumulated in fp32
 *             [b,h,s,d] and softmax_sum = rowsum(dO * O) [b,h,s,1] fp32 (the frontend's dQ_accum
 *             and softmax_sum; the GQA full-head dK, dV stay virtual without ragged offsets)
 * No s x s buffer: the scores live in the kernel's registers and shared memory.
 */
typedef enum rm_attn_fused_operand {
	RM_ATTN_F_Q, RM_ATTN_F_K, RM_ATTN_F_V, RM_ATTN_F_O, RM_ATTN_F_STATS, /* forward: these 5 */
	RM_ATTN_F_DO, RM_ATTN_F_DQ, RM_ATTN_F_DK, RM_ATTN_F_DV, RM_ATTN_F_DQ_ACCUM, RM_ATTN_F_SOFTMAX_SUM,
	RM_ATTN_F_COUNT
} rm_attn_fused_operand;

/* Bytes of each fused operand of a (saturating at RM_EXEC_BYTES_MAX); returns how many the op
 * has (5 forward, RM_ATTN_F_COUNT backward). */
int rm_exec_attention_fused_bytes(const rm_attention_cost *a, int64_t bytes[RM_ATTN_F_COUNT]);
/*
 * Whether the fused path takes a: the program's shape is fused (the kernel the model priced),
 * bf16 or fp16 (cuDNN's flash SDPA has no fp32 or fp8 path in this graph), one head dim, a
 * multiple of 8 (16-byte rows, the alignment cuDNN requires of every stride) and at most 256
 * (cuDNN 9's flash limit on Hopper), and heads a multiple of kv_heads. Otherwise it runs
 * unfused. cuDNN may still refuse it on the GPU (older version, other device): the runner then
 * falls back to the unfused plan (docs/exec.md).
 */
bool rm_exec_attention_fusable(const rm_attention_cost *a);

/*
 * The unfused attention's kernels for one chunk of nb (batch x head) slices, as the runner
 * launches them and as rm_exec_attention_reference computes them on the CPU. Every per-slice
 * tensor is row-major: Q, K, V, O, dO, dQ, dK, dV [s, d] (slice stride s*d elements), P and dP
 * [s, s] (query rows, key columns; stride s*s). A GEMM step is cuBLAS's column-major
 * D[m,n] = alpha op(A)[m,k] op(B)[k,n] (op = transpose when trans_*), batched over the slices
 * with the given strides: a row-major C = X Y is the column-major C^T = Y^T X^T, hence the
 * swapped operands. Steps (scale = 1/sqrt(d)):
 *   forward   P = scale Q K^T; P = softmax over each row's keys (causal: key <= query, the rest
 *             0); O = P V
 *   backward  P = scale Q K^T; P = softmax (recomputed, as FlashAttention-2's backward does);
 *             dV = P^T dO; dP = dO V^T; dP = P * (dP - rowsum(P * dP)) (softmax backward, in
 *             place: dS); dQ = scale dS K; dK = scale dS^T Q
 * (FlashAttention-2, Dao 2023, Algorithms 1 and 2, without the tiling.)
 */
typedef enum rm_attn_buf {
	RM_ATTN_Q, RM_ATTN_K, RM_ATTN_V, RM_ATTN_O, RM_ATTN_DO, RM_ATTN_DQ, RM_ATTN_DK, RM_ATTN_DV,
	RM_ATTN_P, RM_ATTN_DP, RM_ATTN_BUF_COUNT
} rm_attn_buf;

typedef enum rm_attn_step_kind { RM_ATTN_GEMM, RM_ATTN_SOFTMAX, RM_ATTN_SOFTMAX_BWD } rm_attn_step_kind;

typedef struct rm_attn_step {
	rm_attn_step_kind kind;
	/* GEMM: column-major, leading dimensions and slice strides in elements */
	bool trans_a, trans_b;
	int64_t m, n, k, lda, ldb, ldd, stride_a, stride_b, stride_d;
	double alpha;
	/* GEMM: operands a, b and output d. SOFTMAX: d in place, rows of s. SOFTMAX_BWD: a = P,
	 * d = dP in place (dS). */
	rm_attn_buf a, b, d;
	const char *what; /* "S = scale Q K^T", ... */
} rm_attn_step;

/* Fills steps (at most 7) for sequence s and head_dim d; returns how many (3 forward, 7 back). */
int rm_exec_attention_steps(int64_t s, int64_t d, bool backward, rm_attn_step steps[7]);

/*
 * Runs steps on the CPU in float (naive loops with cuBLAS's semantics; the softmax and its
 * backward as the runner's kernels: one row per query, causal limit = query + 1) over nb slices.
 * buf[i]: the tensor of rm_attn_buf i (NULL when the steps do not use it), sized for nb slices.
 */
void rm_exec_attention_reference(const rm_attn_step *steps, int n_steps, int64_t s, int64_t d, int64_t nb,
				 bool causal, float *const buf[RM_ATTN_BUF_COUNT]);

/*
 * The alignment cuBLASLt may assume for an operand at address (bytes): the largest power of two
 * dividing it, at most 256 (cuBLASLt's CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_{A,B,C,D}_BYTES default
 * to 256, and an algorithm chosen under that default may refuse a less aligned pointer; cuBLAS
 * documentation, cublasLtMatmulPreferenceAttributes_t). 256 for address 0.
 */
uint32_t rm_exec_alignment(uint64_t address);
/* Seconds of that lowering on hw: the GEMMs' and the softmax's costs (rm_cost_gemm_s,
 * rm_cost_elementwise_s) plus one launch overhead per extra kernel. */
double rm_exec_attention_unfused_s(const rm_attention_cost *a, const rm_hw_profile *hw);

/* ---- measurements ------------------------------------------------------------------------ */

/* What one run measured (the runner fills it; tests build it by hand). */
typedef struct rm_exec_measurement {
	int32_t n_ops;
	double *op_start_s;  /* the traced iteration, from its first op's start; owned */
	double *op_end_s;
	double *op_mean_s;   /* mean duration over the timed iterations; owned */
	double step_s;       /* median step time over the timed iterations without per-op events */
	double step_op_events_s; /* median step of the iterations with per-op timing events (0: none) */
	/* graph mode (`remora exec --graph`, docs/exec.md "Graph mode"; 0 and NULL when not run) */
	double graph_step_s;           /* median interval between back-to-back replays of the
					* iteration captured as one CUDA graph */
	double graph_step_op_events_s; /* median replay of the capture with per-op timing events */
	double graph_launch_host_s;    /* mean host seconds of one cudaGraphLaunch: when it is not
					* below graph_step_s, the replays too were launch-bound */
	double *graph_op_mean_s;       /* n_ops: mean durations from the events captured in the
					* graph (cudaEventRecordExternal); NULL when not measured; owned */
	int iterations;
	int64_t device_bytes;      /* device memory the run allocated (pool, regions, workspaces) */
	int64_t device_used_bytes; /* cudaMemGetInfo used at the end minus at the start; 0 unknown */
	int world;
	char device[96];           /* "NVIDIA H200" */
	char attention_kernel[64]; /* RM_EXEC_ATTN_FUSED_KERNEL, RM_EXEC_ATTN_UNFUSED_KERNEL or "mixed" */
	char driver[32], cuda[32], nccl[32];
} rm_exec_measurement;

#define RM_EXEC_MEASUREMENT_SCHEMA "remora.exec-measurement/1"

/* Allocates the per-op arrays for n_ops ops (zeroed). */
void rm_exec_measurement_init(rm_exec_measurement *m, int32_t n_ops);
void rm_exec_measurement_finish(rm_exec_measurement *m);

/*
 * A measurement as JSON (schema remora.exec-measurement/1): device, versions, world, iterations,
 * step_s, device bytes, and ops [{name, start_s, end_s, mean_s}] in program order; in graph mode
 * also "graph": {step_s, step_op_events_s, launch_host_s} and each op's graph_mean_s (when the
 * graph's per-op events were measured). New reference. rm_exec_measurement_load reads both
 * (the graph members are optional).
 */
json_t *rm_exec_measurement_json(const rm_program *prog, const rm_exec_measurement *m);
/*
 * Reads a measurement of prog back (`remora exec --json` output, or its "measurement" member):
 * the schema, one op per program op with the same names (a measurement of another program is
 * RM_INVALID naming the first difference), non-negative finite times. Errors name path and the
 * JSON path; m is initialised only on success.
 */
rm_status rm_exec_measurement_load(const char *path, const rm_program *prog, rm_exec_measurement *m,
				   rm_error *err);

/*
 * Writes the measured iteration as a Chrome JSON trace in the simulator's format (sim/trace.c:
 * one track per stream, an X slice per op, flow arrows for events, a device memory counter with
 * the run's allocation), so the two open side by side in ui.perfetto.dev. false with err on I/O.
 */
bool rm_exec_write_trace(const rm_program *prog, const rm_exec_measurement *m, FILE *out,
			 rm_error *err);

/*
 * Predicts prog on hw with the engine (attention priced as the kernel that ran: where m ran
 * cuDNN's SDPA (attention_kernel RM_EXEC_ATTN_FUSED_KERNEL or "mixed") the ops
 * rm_exec_attention_fusable takes keep the engine's fused-kernel figure; unfused attention gets
 * rm_exec_attention_unfused_s as its fixed time; "attention_priced" counts both) and compares
 * with m: per op kind
 * the summed solo prediction against the summed measured mean durations, the whole step
 * (simulated step time against the measured median) and peak memory (engine peak against the
 * run's device bytes). A graph-mode measurement adds "step_graph" (the same predicted step
 * against m->graph_step_s, with the host's launch seconds) and, where m->graph_op_mean_s is
 * set, each kind's measured_graph_s and error_graph. Errors are (predicted - measured) / measured. Returns a new JSON object
 * (schema remora.exec-compare/1) or NULL with err when the engine fails.
 */
json_t *rm_exec_compare(const rm_program *prog, const rm_exec_plan *plan, const rm_hw_profile *hw,
			int hw_queues, const rm_exec_measurement *m, rm_error *err);
/* Prints a comparison (rm_exec_compare's object) as a table. */
void rm_exec_compare_print(const json_t *cmp, FILE *out);

/*
 * Writes the calibration rows of a measurement (JSON lines that rm_calib_import_jsonl reads,
 * one run): every op that ran alone in the traced iteration (no other op overlapping it) becomes
 * a row of the matching benchmark: bf16/fp8 GEMMs "gemm", elementwise "hbm_copy" (bytes read +
 * written), h2d/d2h copies, all-gathers, reduce-scatters and all-reduces; each with the op's
 * mean duration. Other ops are left out (their times include contention). Returns the rows
 * written, -1 with err on I/O.
 */
int rm_exec_write_calib_rows(const rm_program *prog, const rm_exec_measurement *m, const char *machine,
			     FILE *out, rm_error *err);

#endif /* REMORA_EXEC_H */
