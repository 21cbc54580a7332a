/*
 * The scheduler's private model (schedules/ only; tests/test_lhs.c drives it): a computation is
 * a chain of compute slots in program order with the collectives whose start/done pairs are placed
 * between them. scheduler.c builds computations from the op graphs and emits the program;
 * lhs.c places the collectives the way XLA's latency-hiding scheduler does.
 */
#ifndef REMORA_SCHED_INTERNAL_H
#define REMORA_SCHED_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "remora/schedule.h"

typedef enum { CK_AG, CK_RS, CK_AR, CK_COUNT } ckind;

/* What a slot of a computation is. */
typedef enum {
	SLOT_OP,       /* an op of a graph (layer, embedding, head) */
	SLOT_FWD_LOOP, /* the forward scan, opaque in the entry computation */
	SLOT_BWD_LOOP,
	SLOT_OPTIMIZER,
	SLOT_REMAT,    /* a clone HloRematerialization added after scheduling: `op` of `body_layer`
			* in `phase` (forward or recompute) run again, or moved, right here */
} slot_kind;

typedef enum { PART_LAYER, PART_EMBED, PART_HEAD } part;

typedef struct slot {
	slot_kind kind;
	part part;
	int op;         /* op index in its graph */
	int body_layer; /* layer within the body (0, or 1 with double buffering); unrolled: layer */
	int mb;         /* micro-batch (entry and unrolled chains) */
	rm_program_phase phase;
	double units;   /* LHS cost of the slot (XLA's units or microseconds) */
	bool occupies;  /* a while loop whose body holds collectives: it occupies the collective
			 * resource, so no window of the enclosing computation spans it */
	bool moved;     /* SLOT_REMAT: the op moved here, not run again */
} slot;

/* What a collective moves. */
typedef enum { WHAT_LAYER, WHAT_EMBED, WHAT_HEAD, WHAT_FINAL_NORM } what;

/*
 * One collective of a computation. Positions count the gaps between slots: position p is just
 * before slot p (0 .. n). The done may sit no later than `deadline` (its first consumer) and the
 * start no earlier than `s_min` (its operand's producer).
 */
typedef struct coll {
	ckind kind;
	what what;
	int group;       /* AG/RS group of the layer's weights */
	int layer_off;   /* target layer = iteration layer + body_layer + layer_off */
	int body_layer;  /* layer within the body; entry and unrolled chains: the layer itself */
	int mb;
	bool bwd_pass;   /* all-gather for the backward (and recompute) */
	int64_t bytes;   /* full buffer */
	int64_t mem_bytes; /* bytes an open window adds (the all-gather output, the unreduced input) */
	int s_min, deadline;
	double latency;  /* LHS latency, in the slots' units */
	/* results */
	int start_pos, done_pos;
	bool sync;
	rm_sync_reason reason;
	int64_t sync_tracked; /* memory rules: the tracked memory when the rule chose, bytes */
} coll;

typedef struct comp {
	slot *slots;
	int n, cap;
	coll *colls;
	int nc, ccap;
	int64_t baseline;
	int64_t *temps; /* n + 1 positions: live temporaries at each position, bytes */
	int64_t tracked_peak;
	/* the first memory-rule decision of the sweep: tracked memory then (bytes; -1: none) */
	int64_t first_memory_sync_tracked;
	int *at_first, *at_list; /* collectives touching each position, in index order (after the sweep) */
	/* the op slots of each (layer, micro-batch) of the chain, ascending (comp_layer_slots) */
	int *lx_first, *lx_list;
	int lx_n, lx_layers, lx_mbs; /* built for the first lx_n slots */
} comp;

/* What the latency-hiding sweep needs of the XLA configuration. */
typedef struct rm__lhs_params {
	int64_t limit;              /* the scheduler's memory limit, bytes (GetSchedulerMemoryLimit) */
	bool enabled;               /* --xla_gpu_enable_latency_hiding_scheduler */
	bool async_disabled[CK_COUNT]; /* --xla_gpu_disable_async_collectives */
	int overlap_limit;          /* collectives in flight at once (parallel_collective_overlap_limit) */
} rm__lhs_params;

/*
 * Places the start and done of every collective of c the way XLA's latency-hiding scheduler
 * does (xla/service/latency_hiding_scheduler.cc), walking the computation bottom-up: a done is
 * taken at its deadline or as soon as the collective resource frees, and its window stays open
 * over compute until the compute covers its latency or the start reaches s_min. Memory enters in
 * ReadySetLt's two steps (docs/sched.md "Memory rules"):
 * - tracked memory (baseline + temps + open windows) at or below half the limit: no memory rule;
 * - above half (kMemoryPeakOverLimit): a window whose buffer would carry usage past the limit is
 *   not opened, and an open window closes when the next compute slot would carry usage past it;
 * - at or over the limit (kDecreaseMemoryOverLimit): the start that frees the largest buffer goes
 *   first, and a ready done is closed on the spot.
 * A window cannot rise past a slot that occupies the collective resource (a while loop with
 * collectives in its body): it closes there, synchronous with reason overlap_limit if nothing
 * was overlapped.
 * A window that closes where it opened is a synchronous collective, with the rule that made it so
 * in `reason` and the tracked memory in `sync_tracked`. The limit is a preference: compute goes
 * on above it. Sets c->tracked_peak and c->first_memory_sync_tracked. O(n + nc * open windows).
 */
void rm__lhs_sweep(const rm__lhs_params *p, comp *c);

/* Ideal runtimes: every window as wide as its bounds, always async. */
void rm__ideal_windows(comp *c);

/* ---- the list scheduler over a dependency graph (schedules/lhs_list.c) ---------------------- */

/* What a node of a dependency graph is: compute, or one half of an async collective. */
typedef enum { LN_COMPUTE, LN_START, LN_DONE } ln_kind;

/*
 * One node. Nodes are given in the original program order (their index is XLA's
 * GetOriginalPosition) and name their operands, which come before them. A done has exactly one
 * operand, its start; the start -> done edge carries the collective's latency.
 */
typedef struct ln_node {
	ln_kind kind;
	int resource;      /* start, done: the collective's kind (ckind); compute: -1 */
	double cost;       /* compute: its cost in the estimator's units; start, done: 0 */
	double latency;    /* done: the collective's latency, same units */
	int64_t out_bytes; /* the buffer it defines, bytes (a start: the buffer in flight) */
	bool external;     /* its buffer comes from before the computation (the forward's saved
			    * activations): once live it stays live up to the top */
	int first_operand, n_operands; /* into ln_graph.operands */
} ln_node;

typedef struct ln_graph {
	ln_node *nodes;
	int n, cap;
	int *operands;
	int n_operands, cap_operands;
} ln_graph;

/* The rules of ReadySetLt::AIsBetterThanB that the list scheduler applies, in XLA's order
 * (LN_ONLY_READY: the node was the only candidate). */
#define LN_RULE_MAP(X)                                              \
	X(NONE, "none")                                             \
	X(ONLY_READY, "only candidate")                             \
	X(DECREASE_MEMORY_OVER_LIMIT, "kDecreaseMemoryOverLimit")   \
	X(MEMORY_PEAK_OVER_LIMIT, "kMemoryPeakOverLimit")           \
	X(SCHEDULE_DONE, "kScheduleDone")                           \
	X(LESS_STALL, "kLessStall")                                 \
	X(START_AT_ZERO_DEPTH, "kStartAtZeroDepth")                 \
	X(FREE_BACKEDUP_RESOURCE, "kFreeBackedupResource")          \
	X(ASYNC_DEPTH, "kAsyncDepth")                               \
	X(AVOID_WASTE, "kAvoidWaste")                               \
	X(UNLOCK_DONE, "kUnlockDone")                               \
	X(CREATES_MORE_READY_NODES, "kCreatesMoreReadyNodes")       \
	X(DECREASE_MEMORY, "kDecreaseMemory")                       \
	X(ORIGINAL_ORDER, "kOriginalOrder")

typedef enum {
#define LN_RULE_ENUM(name, str) LN_RULE_##name,
	LN_RULE_MAP(LN_RULE_ENUM)
#undef LN_RULE_ENUM
	LN_RULE_COUNT
} ln_rule;

const char *rm__ln_rule_name(ln_rule r);

void rm__ln_graph_finish(ln_graph *g);
/* Appends a node (operands added with rm__ln_add_operand right after); returns its index. */
int rm__ln_add_node(ln_graph *g, ln_kind kind, int resource, double cost, double latency, int64_t out_bytes);
/* Adds operand `op` (an earlier node) to the last node added; a repeated operand is ignored. */
void rm__ln_add_operand(ln_graph *g, int op);

/*
 * Schedules g bottom-up the way XLA's DefaultSchedulerCore does
 * (xla/service/latency_hiding_scheduler.cc, ScheduleComputation / FindAndExtractBestNodeAvailable
 * / ScheduleNode): a node is ready once all its users are scheduled; the candidate chosen is the
 * best under ReadySetLt::AIsBetterThanB with the GPU configuration (MakeGPUSchedulerConfig:
 * aggressive_scheduling_policies on, prioritize_async_depth_over_stall and the release-start
 * policy off), in XLA's order:
 *   memory (only while usage > limit / 2: kDecreaseMemoryOverLimit at usage >= limit, then
 *   kMemoryPeakOverLimit), kScheduleDone, kLessStall, kStartAtZeroDepth, kFreeBackedupResource,
 *   kAsyncDepth, kAvoidWaste, kUnlockDone, kCreatesMoreReadyNodes, kDecreaseMemory,
 *   kOriginalOrder.
 * Time runs bottom-up: a node is scheduled at max(now, ready time) and takes its cost; a start
 * is ready `latency` after its done. A done occupies its kind's resource until its start is
 * scheduled: one collective of a kind in flight, p->overlap_limit of all kinds. Memory is
 * MemoryPressureTracker's: `baseline` plus the buffers live below the current point (a buffer is
 * live from its first scheduled user up to its producer). Async depth is
 * HloScheduleGraph::InitializeGraphAnalysis's: the largest sum of collective latencies on a path
 * from the graph's inputs to the node.
 * order[n] receives the program order (node indices), rule[i] the rule by which node i won over
 * the candidate that kOriginalOrder alone would have taken (LN_RULE_ORIGINAL_ORDER when it was
 * that candidate, LN_RULE_ONLY_READY when it was alone). p->enabled is ignored (the caller decides). Returns
 * false (order untouched) if the graph is not a DAG with operands before users.
 * O(n * ready nodes).
 */
bool rm__lhs_list(const rm__lhs_params *p, int64_t baseline, const ln_graph *g, int *order, ln_rule *rule);

/* ---- HloRematerialization after scheduling (schedules/hlo_remat.c) ------------------------ */

/*
 * A scheduled sequence as XLA's rematerialization pass sees it: instructions in program order,
 * the buffers they define and read, and at each instruction the bytes live outside those
 * buffers (`other`: the stacked residuals, gathered weights, open collective windows, gradients
 * and whatever else the caller does not model buffer by buffer; the pass cannot change them).
 * A buffer is live from its defining instruction to its last reader, both included.
 */
typedef struct rm__rbuf {
	int64_t bytes;
	int def;    /* defining instruction */
	bool remat; /* its producer can be recomputed: a fusion, not a cuBLAS/cuDNN custom call,
		     * a collective, a copy or a parameter (IsRematerializable) */
} rm__rbuf;

typedef struct rm__rseq {
	int n;            /* instructions */
	int64_t *other;   /* [n] bytes */
	double *flops;    /* [n] what running the instruction again costs (reported only) */
	rm__rbuf *bufs;
	int nb, bcap;
	int *use_item, *use_buf; /* reads: instruction use_item[i] reads buffer use_buf[i] */
	int nu, ucap;
} rm__rseq;

/* What the pass did to one sequence. */
typedef struct rm__remat_result {
	int64_t peak_before, peak_after; /* the sequence's peak (bytes, `other` included) */
	int recomputed;                  /* instructions cloned before a later reader */
	int moved;                       /* instructions none of whose readers had run: moved down
					  * to their first reader (XLA's zero-cost candidates) */
	int64_t recomputed_bytes;        /* bytes the clones define */
	double recomputed_flops;
	bool over;                       /* still over the limit somewhere after the pass */
	/* the sequence after the pass, the moved instructions removed (HloDCE), when it changed
	 * something (else NULL): entry p is original instruction order_src[p], or a clone of it
	 * when order_clone[p], one that moved it when also order_move[p] */
	int n_order;
	int *order_src;
	bool *order_clone, *order_move;
} rm__remat_result;

void rm__remat_result_finish(rm__remat_result *r);

/* Sets up s for n instructions, every `other` and `flops` 0. */
void rm__rseq_init(rm__rseq *s, int n);
void rm__rseq_finish(rm__rseq *s);
/* Adds a buffer of `bytes` defined by instruction def; returns its index. */
int rm__rseq_add_buf(rm__rseq *s, int def, int64_t bytes, bool remat);
/* Instruction item (after the buffer's definer) reads buffer buf; a repeated read is ignored. */
void rm__rseq_add_use(rm__rseq *s, int item, int buf);

/*
 * HloRematerialization::RematerializeComputation (xla/service/hlo_rematerialization.cc) with the
 * GPU compiler's options (gpu_compiler.cc RunPostSchedulingPipelines: recompute on, compress on
 * with the identity compact shape, so it never saves anything, host offload off by default;
 * block_size_limit 1, block_rematerialization_factor 1, min_remat_size 0). The sequence is walked
 * in program order; at an instruction that allocates, while usage exceeds `limit`, the best
 * candidate is rematerialized: an instruction already run, every output recomputable, some output
 * live across this point and not read by the current instruction, freeing
 * memory_reduced = (its live outputs) - (its operands not live here) > 0. Its cost is 0 when none
 * of its readers has run (a move), else limit / memory_reduced (integer division); the lowest
 * cost wins, the earliest on ties. The clone reads the same operands and takes over the readers
 * still to run; it is inserted before the first of them or of its operands' readers still to run.
 * A move of a move is denylisted. Stops at a point when no candidate is left: XLA then warns that
 * it cannot get under the limit and goes on. O(instructions x live buffers) plus O(instructions)
 * per clone.
 */
void rm__hlo_remat(int64_t limit, const rm__rseq *s, rm__remat_result *r);

#endif
