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

#endif
