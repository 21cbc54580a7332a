/*
 * remora/hlo.h — XLA's scheduled HLO text read into a module and lowered to a schedule program
 * (hlo/parse.c, hlo/lower.c; docs/hlo.md).
 *
 * The text is what XLA writes with --xla_dump_hlo_as_text (the *.after_optimizations.txt file
 * of a GPU compile): `HloModule NAME, is_scheduled=true, ...`, then computations
 * (`[ENTRY] %name (params) -> shape { instructions }`), each instruction
 * `[ROOT] %x = SHAPE opcode(OPERANDS), attr=value, ...` in the order the scheduler chose. The
 * grammar is that of openxla/xla xla/hlo/parser/hlo_parser.cc, read by a recursive descent of
 * our own; attribute values are kept as their text and interpreted where the lowering needs them
 * (backend_config through jansson, replica_groups in both the list and the iota form).
 *
 * Lowering (rm_hlo_lower): the ENTRY computation in its scheduled order, while loops unrolled by
 * their trip count, calls inlined; fusions as memory-bound ops (bytes in + bytes out) unless they
 * hold a dot (a GEMM), cuBLAS GEMM custom calls as GEMMs, cuDNN fused attention custom calls as
 * attention, async collectives (start/done pairs) on a collective stream and synchronous ones on
 * the compute stream, copy-start/done as host<->device copies on copy streams. A start waits for
 * the compute work scheduled before it; the compute op after a done waits for it (XLA's stream
 * synchronisation at the start and done of an async op).
 *
 * Units: bytes, elements. Errors carry FILE:LINE:COL of the offending text.
 */
#ifndef REMORA_HLO_H
#define REMORA_HLO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "remora/common.h"
#include "remora/nccl.h"
#include "remora/program.h"

typedef struct rm_hlo_module rm_hlo_module;

/*
 * Parses HLO module text (len bytes; no NUL needed at the end). file names the text in errors
 * (may be NULL). Errors: RM_PARSE with the
 * line:column of the first token that does not fit ("expected '=' after the instruction name"),
 * RM_INVALID for an operand or computation name that is not defined. NULL on error.
 */
rm_hlo_module *rm_hlo_parse(const char *text, size_t len, const char *file, rm_error *err);
/* Reads a file (rm_read_file) and parses it. NULL with err on error. */
rm_hlo_module *rm_hlo_load(const char *path, rm_error *err);
void rm_hlo_destroy(rm_hlo_module *m);

/* What the parser read: the module's name, whether is_scheduled=true, its computations and
 * instructions (over all computations), num_partitions and replica_count (1 when absent). */
typedef struct rm_hlo_module_info {
	const char *name;
	bool scheduled;
	int32_t computations, instructions;
	int64_t num_partitions, replica_count;
	const char *entry; /* the ENTRY computation's name; NULL if none */
} rm_hlo_module_info;
void rm_hlo_module_get_info(const rm_hlo_module *m, rm_hlo_module_info *info);

/* The bytes of a shape text such as "bf16[8,128]{1,0}" or "(f32[], s32[4])" (tuples summed,
 * bounded dynamic dimensions "<=N" at N, sub-byte types rounded up per array); -1 if it is not a
 * shape. For tests and tools. */
int64_t rm_hlo_shape_bytes(const char *text);

typedef struct rm_hlo_lower_options {
	const char *hardware;  /* the program's runtime.hardware; NULL: "h100-sxm" */
	int32_t gpus_per_node; /* to count the nodes a replica group spans; 0: 8 (HGX H100/H200) */
	int64_t max_ops;       /* unrolling limit; 0: 20 million ops */
} rm_hlo_lower_options;

/* One collective XLA left synchronous (on the compute stream). */
typedef struct rm_hlo_sync_collective {
	char name[128];   /* the instruction, with the loop iteration in unrolled bodies */
	rm_coll op;
	int64_t bytes;    /* nccl-tests convention (remora/cost.h rm_collective_cost) */
	int32_t group_size;
	bool is_sync_attr; /* a start marked is_sync (frontend attribute, or backend_config
			    * collective_backend_config.is_sync); false: no start/done pair */
	int line;          /* of the instruction in the HLO text */
} rm_hlo_sync_collective;

/* Counts of the lowered ops by kind. */
typedef struct rm_hlo_report {
	int64_t gemm, attention, memory_bound, copies, no_cost;
	int64_t coll_async[RM_COLL_COUNT], coll_sync[RM_COLL_COUNT];
	int64_t whiles, iterations; /* while loops met (each time) and body iterations unrolled */
	int64_t unknown;            /* instructions of an opcode or custom-call target not modelled,
				     * priced as memory-bound by their bytes */
	int64_t unknown_in_fusions; /* instructions of an opcode not modelled inside a fusion (the
				     * fusion is priced as a whole; counted apart from unknown, whose
				     * instructions are ops of the program) */
	char unknown_names[16][64]; /* the first distinct ones ("send", "custom-call:foo") ... */
	int64_t unknown_counts[16]; /* ... and how often each was met */
	int32_t n_unknown_names;
	int64_t unmatched_done;     /* done ops whose start was not found */
	int64_t stream_annotated;   /* instructions with frontend attribute _xla_stream_annotation
				     * (an explicit stream in XLA; on the one compute stream here) */
	rm_hlo_sync_collective *sync; /* XLA's synchronous collectives, in program order */
	int64_t n_sync, cap_sync;
} rm_hlo_report;

/* Frees the report's list; accepts NULL. */
void rm_hlo_report_finish(rm_hlo_report *rep);

/*
 * Lowers the module's ENTRY computation to a program (streams "compute", "collective",
 * "copy_h2d", "copy_d2h"; no tensors: memory is not modelled from HLO) and fills rep (may be
 * NULL). Errors (NULL returned, err set with the instruction's line:column): no ENTRY, a while
 * loop without a trip count (no backend_config known_trip_count and a condition that is not
 * `i < constant`), a called computation that is missing, more ops than opt->max_ops, an
 * unreadable backend_config of a GEMM or attention custom call.
 */
rm_program *rm_hlo_lower(const rm_hlo_module *m, const rm_hlo_lower_options *opt, rm_hlo_report *rep,
			 rm_error *err);

#endif /* REMORA_HLO_H */
