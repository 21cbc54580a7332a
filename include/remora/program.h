/*
 * remora/program.h — the schedule program: the IR that the engine (sim/) simulates and the
 * executor (exec/) runs on GPUs. docs/design.md contract 2; sim/program.c, sim/program_json.c.
 *
 * A program is four arrays, each entity referred to by its index (its "id" in JSON):
 * - streams: in-order queues of ops (CUDA streams), with a kind (compute, collective, copy) and a
 *   CUDA priority (lower number = higher priority, as cudaStreamCreateWithPriority; default 0);
 * - tensors: buffers with bytes, a role, a location (device or host) and whether they persist
 *   through the step (parameters, gradients, optimizer state) or live from their producer's start
 *   to their last consumer's end;
 * - events: each recorded by exactly one op (on completion) and waited on by any number of ops
 *   on any stream (cudaEventRecord / cudaStreamWaitEvent);
 * - ops: in host launch order; each runs on one stream, after the previous op of its stream and
 *   after the ops recording the events it waits on. The order of the ops array is the launch
 *   order the hardware queues see.
 *
 * Invariants after rm_program_validate() (rm_program_load() validates):
 * - every reference is in range; ids equal their index;
 * - a tensor has at most one producer; a non-persistent tensor that an op reads has one;
 * - every event waited on is recorded, and by exactly one op;
 * - the dependency graph (stream order + event edges) has no cycle;
 * - sizes are non-negative, shapes positive, group sizes >= 1.
 *
 * Units: bytes, seconds (_s), FLOPs. Names are copied into the program (it owns them).
 */
#ifndef REMORA_PROGRAM_H
#define REMORA_PROGRAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "remora/common.h"
#include "remora/cost.h"

#define RM_PROGRAM_SCHEMA "remora.program/1"

typedef enum rm_stream_kind {
	RM_STREAM_COMPUTE,
	RM_STREAM_COLLECTIVE,
	RM_STREAM_COPY,
	RM_STREAM_KIND_COUNT
} rm_stream_kind;

typedef enum rm_tensor_role {
	RM_ROLE_PARAM_SHARD,
	RM_ROLE_GATHERED_PARAM,
	RM_ROLE_ACTIVATION,
	RM_ROLE_RESIDUAL,
	RM_ROLE_GRADIENT,
	RM_ROLE_OPTIMIZER_STATE,
	RM_ROLE_WORKSPACE,
	RM_ROLE_COUNT
} rm_tensor_role;

typedef enum rm_location { RM_LOC_DEVICE, RM_LOC_HOST, RM_LOC_COUNT } rm_location;

typedef enum rm_program_phase {
	RM_PPHASE_FWD,
	RM_PPHASE_BWD,
	RM_PPHASE_RECOMPUTE,
	RM_PPHASE_OPTIMIZER,
	RM_PPHASE_COUNT
} rm_program_phase;

/* JSON spellings: "compute", "param_shard", "device", "fwd", ... and their parsers. */
const char *rm_stream_kind_name(rm_stream_kind k);
const char *rm_tensor_role_name(rm_tensor_role r);
const char *rm_location_name(rm_location l);
const char *rm_program_phase_name(rm_program_phase p);
bool rm_stream_kind_parse(const char *s, rm_stream_kind *out);
bool rm_tensor_role_parse(const char *s, rm_tensor_role *out);
bool rm_location_parse(const char *s, rm_location *out);
bool rm_program_phase_parse(const char *s, rm_program_phase *out);

typedef struct rm_program_stream {
	const char *name;
	rm_stream_kind kind;
	int32_t priority; /* CUDA convention: lower is higher priority */
} rm_program_stream;

typedef struct rm_program_tensor {
	const char *name;
	int64_t bytes;
	rm_tensor_role role;
	rm_location location;
	bool persistent;
} rm_program_tensor;

typedef struct rm_program_event {
	const char *name;
} rm_program_event;

/* A list of indices in the program's reference pool (see rm_program_refs()). */
typedef struct rm_program_list {
	uint32_t at, count;
} rm_program_list;

typedef struct rm_program_op {
	const char *name;  /* hierarchical, e.g. "layer07/bwd/dot_mlp_out.dgrad" */
	rm_cost_op cost;   /* kind and cost inputs */
	int32_t stream;
	int32_t layer;     /* -1: not in a layer */
	rm_program_phase phase;
	double time_s;     /* >= 0: fixed duration that overrides the cost model; < 0: model */
	const char *sync_reason; /* collectives: why it runs synchronously; NULL if none given */
	/* 1 + the index of an earlier op whose cost (kind and inputs, field for field) equals this
	 * one's, so the simulator prices it once (the scheduler marks a layer op of the same graph
	 * op, phase and plan as an earlier layer's); 0: none. A hint: the simulator checks the
	 * costs are equal byte for byte before using it, except in a release build for a program
	 * the scheduler built (rm_sim_options.scheduler_built), whose twins are copies. */
	int32_t same_cost_as;
	rm_program_list inputs, outputs; /* tensor indices */
	rm_program_list waits, records;  /* event indices */
} rm_program_op;

/*
 * What the program was scheduled for, so that run-program prices it as simulate did (the
 * "runtime" object of the JSON; optional): the hardware spec, its power limit, and the kernels
 * the runtime launches (remora/cost.h rm_kernel_config).
 */
typedef struct rm_program_runtime {
	bool set;
	char hardware[256];       /* "h100-sxm-96gb", "calib.db:NAME"; "" unknown */
	double power_w;           /* 0: the profile's */
	double hbm_bytes;         /* 0: the profile's */
	rm_kernel_config kernels;
	int hw_queues;            /* CUDA_DEVICE_MAX_CONNECTIONS; 0: 8 */
	char allocator[24];       /* remora/sim.h rm_sim_allocator_name(); "": exact */
	double alloc_fraction;    /* jax: the preallocated fraction; 0: 0.75 */
} rm_program_runtime;

typedef struct rm_program {
	char *name;
	rm_program_runtime runtime;
	int64_t tokens;     /* tokens per GPU per step, 0 when unknown */
	double model_flops; /* model FLOPs per GPU per step for MFU; < 0: derive from the ops */
	rm_program_stream *streams;
	rm_program_tensor *tensors;
	rm_program_event *events;
	rm_program_op *ops;
	int32_t n_streams, n_tensors, n_events, n_ops;
	/* internal storage: capacities, the reference pool and the name arena */
	int32_t cap_streams, cap_tensors, cap_events, cap_ops;
	int32_t *refs;
	uint32_t n_refs, cap_refs;
	void *arena;
} rm_program;

/* An op to add: like rm_program_op but with its lists as plain arrays. */
typedef struct rm_program_op_desc {
	const char *name;
	rm_cost_op cost;
	int32_t stream;
	int32_t layer;
	rm_program_phase phase;
	double time_s; /* < 0 (set it!) to use the cost model */
	const char *sync_reason;
	int32_t same_cost_as; /* rm_program_op.same_cost_as; 0: none */
	const int32_t *inputs, *outputs, *waits, *records;
	uint32_t n_inputs, n_outputs, n_waits, n_records;
} rm_program_op_desc;

/* An empty program named name (may be NULL). Never NULL (allocation failure aborts). */
rm_program *rm_program_create(const char *name);
void rm_program_destroy(rm_program *prog);
/* Empties prog as rm_program_create(NULL) makes it, keeping the storage of its arrays, reference
 * pool and (the newest chunk of) its name arena for the next program built into it. Pointers
 * into the old program (names, rm_program_refs) are invalid afterwards. */
void rm_program_reset(rm_program *prog);

/* Builders: each returns the new entity's index. References are checked by validate, not here. */
int32_t rm_program_add_stream(rm_program *prog, const char *name, rm_stream_kind kind,
			      int32_t priority);
int32_t rm_program_add_tensor(rm_program *prog, const char *name, int64_t bytes,
			      rm_tensor_role role, rm_location location, bool persistent);
int32_t rm_program_add_event(rm_program *prog, const char *name);
int32_t rm_program_add_op(rm_program *prog, const rm_program_op_desc *desc);
/* A desc with defaults: layer -1, phase fwd, time_s -1, no lists. */
rm_program_op_desc rm_program_op_desc_init(const char *name, rm_cost_kind kind, int32_t stream);

/* The indices of a list (pointer valid until the next add). */
static inline const int32_t *rm_program_refs(const rm_program *prog, rm_program_list l)
{
	return prog->refs + l.at;
}

/*
 * Checks the invariants listed above. file names the program in errors (may be NULL); the
 * message starts with the JSON path of the offender ("ops[12].inputs[1]: unknown tensor 99").
 * RM_INVALID for bad references, sizes, duplicate producers or recorders, an event never
 * recorded, a non-persistent tensor read but never produced, and a dependency cycle (the message
 * names the ops on it).
 */
rm_status rm_program_validate(const rm_program *prog, const char *file, rm_error *err);

/*
 * Parses a program from JSON text (schema "remora.program/1", keys in docs/sim.md). Syntax errors
 * are RM_PARSE with the parser's line:column; unknown keys RM_UNKNOWN_KEY, missing keys
 * RM_MISSING, bad values RM_INVALID, each naming the JSON path and carrying the line:column of
 * the offending value (of the key, for an unknown key). The result is validated, and a
 * validation error that names a path gets its position too.
 * Returns NULL on error.
 */
rm_program *rm_program_parse(const char *text, size_t len, const char *file, rm_error *err);
/* Reads and parses a program file (see rm_program_parse). */
rm_program *rm_program_load(const char *path, rm_error *err);
/* Writes the program as JSON (the format rm_program_parse reads back). false with err on I/O. */
bool rm_program_write(const rm_program *prog, FILE *out, rm_error *err);

#endif /* REMORA_PROGRAM_H */
