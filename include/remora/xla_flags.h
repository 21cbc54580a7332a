/*
 * remora/xla_flags.h — the XLA_FLAGS string as users write it (schedules/xla_flags.c).
 *
 * What it does: parses "--xla_gpu_enable_latency_hiding_scheduler=true --xla_gpu_...=..." into
 * the settings remora's XLA-style scheduler models, with XLA's defaults for anything not given.
 * Flags XLA has but remora does not model are kept and reported (XLA has hundreds); malformed
 * ones are errors naming the flag.
 *
 * Modelled flags (openxla/xla xla/debug_options_flags.cc; docs/reference/seed.md lists the ones of the report):
 *   xla_gpu_enable_latency_hiding_scheduler, xla_gpu_enable_pipelined_collectives,
 *   xla_gpu_enable_pipelined_all_gather, xla_gpu_enable_pipelined_reduce_scatter,
 *   xla_gpu_enable_pipelined_all_reduce, xla_gpu_enable_while_loop_double_buffering,
 *   xla_gpu_enable_highest_priority_async_stream, xla_gpu_all_gather_combine_threshold_bytes,
 *   xla_gpu_reduce_scatter_combine_threshold_bytes, xla_gpu_all_reduce_combine_threshold_bytes,
 *   xla_gpu_enable_all_gather_combine_by_dim, xla_gpu_enable_reduce_scatter_combine_by_dim,
 *   xla_gpu_disable_async_collectives, xla_gpu_memory_limit_slop_factor,
 *   xla_gpu_experimental_parallel_collective_overlap_limit, xla_gpu_graph_level,
 *   xla_gpu_enable_command_buffer, xla_gpu_pgle_profile_file_or_directory_path.
 *
 * Syntax (absl flags, as XLA parses XLA_FLAGS): flags separated by white space; "--name=value"
 * or "-name=value"; a boolean may be written "--name" (true) or "--noname" (false); values may
 * be quoted with ' or ". Booleans take true/false/1/0; integers are decimal.
 */
#ifndef REMORA_XLA_FLAGS_H
#define REMORA_XLA_FLAGS_H

#include <stdbool.h>
#include <stdint.h>

#include "remora/common.h"

/* Collective kinds as --xla_gpu_disable_async_collectives names them. */
typedef enum rm_xla_coll_kind {
	RM_XLA_ALLREDUCE,
	RM_XLA_ALLGATHER,
	RM_XLA_REDUCESCATTER,
	RM_XLA_COLLECTIVEBROADCAST,
	RM_XLA_ALLTOALL,
	RM_XLA_COLLECTIVEPERMUTE,
	RM_XLA_RAGGEDALLTOALL,
	RM_XLA_COLL_KIND_COUNT
} rm_xla_coll_kind;

const char *rm_xla_coll_kind_name(rm_xla_coll_kind kind);

#define RM_XLA_MAX_UNMODELLED 32

typedef struct rm_xla_flags {
	bool latency_hiding_scheduler;    /* default true */
	bool pipelined_collectives;       /* umbrella, default false: ORed with the three below */
	bool pipelined_all_gather;        /* default false */
	bool pipelined_reduce_scatter;    /* default false */
	bool pipelined_all_reduce;        /* default false */
	bool while_loop_double_buffering; /* default false */
	bool highest_priority_async_stream; /* default true */
	int64_t all_gather_combine_threshold_bytes;     /* default 30 MiB */
	int64_t reduce_scatter_combine_threshold_bytes; /* default 30 MiB */
	int64_t all_reduce_combine_threshold_bytes;     /* default 30 MiB */
	bool all_gather_combine_by_dim;     /* default true */
	bool reduce_scatter_combine_by_dim; /* default true */
	bool async_disabled[RM_XLA_COLL_KIND_COUNT]; /* --xla_gpu_disable_async_collectives */
	int memory_limit_slop_factor;       /* percent, default 95 */
	int parallel_collective_overlap_limit; /* default 1 */
	int graph_level;                    /* deprecated; 0 disables CUDA graphs; default 1 */
	bool command_buffer_disabled;       /* --xla_gpu_enable_command_buffer= (empty) */
	bool profile_guided;                /* a PGLE profile is given: measured costs, not defaults */
	/* flags given that remora does not model (names without the leading dashes) */
	int n_unmodelled;
	char unmodelled[RM_XLA_MAX_UNMODELLED][96];
} rm_xla_flags;

/* Whether a collective kind is pipelined: XLA runs the collective pipeliner for a kind when the
 * umbrella --xla_gpu_enable_pipelined_collectives or the kind's own flag is set
 * (xla/service/gpu/gpu_compiler.cc: enable_all_pipelined || enable_pipelined_<kind>). */
static inline bool rm_xla_pipelines_all_gather(const struct rm_xla_flags *f)
{
	return f->pipelined_collectives || f->pipelined_all_gather;
}
static inline bool rm_xla_pipelines_reduce_scatter(const struct rm_xla_flags *f)
{
	return f->pipelined_collectives || f->pipelined_reduce_scatter;
}
static inline bool rm_xla_pipelines_all_reduce(const struct rm_xla_flags *f)
{
	return f->pipelined_collectives || f->pipelined_all_reduce;
}

/* XLA's defaults (as of the XLA that ships with JAX 0.4.3x-0.5, the seed report's era). */
rm_xla_flags rm_xla_flags_default(void);

/*
 * Parses an XLA_FLAGS string over the defaults in *flags (call rm_xla_flags_default first, or
 * parse several strings in turn). Errors (RM_PARSE / RM_INVALID): a word that is not a flag, a
 * value of the wrong type, an unknown collective kind; err->column is the 1-based column of the
 * offending flag in text and the message names it. Unmodelled flags are recorded, not errors.
 */
rm_status rm_xla_flags_parse(const char *text, rm_xla_flags *flags, rm_error *err);

/* Writes the flags that differ from XLA's defaults as an XLA_FLAGS string (the line users
 * paste), in a fixed order; unmodelled flags are not repeated. */
const char *rm_xla_flags_format(const rm_xla_flags *flags, char *buf, size_t size);

/* Logs one warning listing the unmodelled flags, if any. */
void rm_xla_flags_warn_unmodelled(const rm_xla_flags *flags);

#endif /* REMORA_XLA_FLAGS_H */
