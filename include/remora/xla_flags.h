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
 *   xla_gpu_enable_command_buffer, xla_gpu_pgle_profile_file_or_directory_path,
 *   xla_gpu_enable_analytical_sol_latency_estimator.
 * Of these, xla_gpu_graph_level, xla_gpu_enable_command_buffer and the PGLE profile path are
 * parsed and checked but change nothing remora computes; rm_xla_flags_warn_unmodelled says so.
 *
 * Versions (schedules/xla_versions.c, docs/xla-versions.md): XLA's defaults moved between JAX
 * releases. A flag set starts from one version's defaults (rm_xla_flags_for_version) and the
 * user's XLA_FLAGS go on top; a modelled flag that version's XLA does not define is an error, as
 * XLA aborts on unknown flags (xla/parse_flags_from_env.cc: "Unknown flag in XLA_FLAGS").
 * Version 0 is remora's unversioned defaults (every flag known; LHS on), kept for scenarios
 * that name no version.
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
	bool latency_hiding_scheduler;    /* whether the latency-hiding scheduler RUNS (below) */
	bool lhs_flag;                    /* --xla_gpu_enable_latency_hiding_scheduler; unversioned default true */
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
	bool analytical_sol_latency_estimator; /* --xla_gpu_enable_analytical_sol_latency_estimator */
	bool remat_pass_disabled;           /* --xla_disable_hlo_passes names "rematerialization":
					     * no HloRematerialization after scheduling (other
					     * passes it names are not modelled) */
	/* the context the flags are read in (not flags) */
	int version;                        /* index of the version profile; 0: unversioned */
	bool hopper;                        /* the target is Hopper or newer (SoL estimator supported) */
	uint32_t given;                     /* bit i: the i-th modelled flag appeared in a parsed string */
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

/* remora's unversioned defaults: version 0, rm_xla_flags_for_version(0, true). */
rm_xla_flags rm_xla_flags_default(void);

/*
 * One JAX release's XLA, as its debug_options_flags.cc sets the flags remora models. Whether
 * the latency-hiding scheduler runs is IsLHSEnabled (xla/service/gpu/gpu_hlo_schedule.cc): the
 * flag, or (pgle_enables_lhs) a PGLE profile, or (sol_enables_lhs) the speed-of-light estimator
 * on Hopper or newer; the optimisation effort, which also turns it on, is not a flag and is not
 * modelled.
 */
typedef struct rm_xla_version {
	const char *name;       /* the JAX release, "0.4.30"; "" for version 0 */
	const char *xla_commit; /* openxla/xla commit jaxlib pins (XLA_COMMIT in jax third_party/xla/{workspace,revision}.bzl) */
	const char *xla_date;   /* that commit's date, YYYY-MM-DD */
	bool lhs;               /* xla_gpu_enable_latency_hiding_scheduler */
	bool pipelined_all_gather, pipelined_reduce_scatter, pipelined_all_reduce;
	bool all_gather_combine_by_dim, reduce_scatter_combine_by_dim;
	bool while_loop_double_buffering;
	bool highest_priority_async_stream;
	bool analytical_sol_latency_estimator;
	int64_t combine_threshold_bytes; /* all-gather, reduce-scatter and all-reduce alike */
	int memory_limit_slop_factor;
	int parallel_collective_overlap_limit;
	const char *while_loop_unrolling; /* xla_gpu_enable_while_loop_unrolling default (not parsed) */
	bool pgle_enables_lhs, sol_enables_lhs;
	/* modelled flags this XLA does not define (bits of rm_xla_flag_bit) */
	uint32_t absent;
} rm_xla_version;

/* Bits of rm_xla_version.absent and rm_xla_flags.given: the modelled flags, in the parser's order. */
#define RM_XLA_FLAG_MAP(X)                                                                       \
	X(LATENCY_HIDING_SCHEDULER, "xla_gpu_enable_latency_hiding_scheduler")                   \
	X(PIPELINED_COLLECTIVES, "xla_gpu_enable_pipelined_collectives")                         \
	X(PIPELINED_ALL_GATHER, "xla_gpu_enable_pipelined_all_gather")                           \
	X(PIPELINED_REDUCE_SCATTER, "xla_gpu_enable_pipelined_reduce_scatter")                   \
	X(PIPELINED_ALL_REDUCE, "xla_gpu_enable_pipelined_all_reduce")                           \
	X(WHILE_LOOP_DOUBLE_BUFFERING, "xla_gpu_enable_while_loop_double_buffering")             \
	X(HIGHEST_PRIORITY_ASYNC_STREAM, "xla_gpu_enable_highest_priority_async_stream")         \
	X(ALL_GATHER_COMBINE_THRESHOLD, "xla_gpu_all_gather_combine_threshold_bytes")            \
	X(REDUCE_SCATTER_COMBINE_THRESHOLD, "xla_gpu_reduce_scatter_combine_threshold_bytes")    \
	X(ALL_REDUCE_COMBINE_THRESHOLD, "xla_gpu_all_reduce_combine_threshold_bytes")            \
	X(ALL_GATHER_COMBINE_BY_DIM, "xla_gpu_enable_all_gather_combine_by_dim")                 \
	X(REDUCE_SCATTER_COMBINE_BY_DIM, "xla_gpu_enable_reduce_scatter_combine_by_dim")         \
	X(DISABLE_ASYNC_COLLECTIVES, "xla_gpu_disable_async_collectives")                        \
	X(MEMORY_LIMIT_SLOP_FACTOR, "xla_gpu_memory_limit_slop_factor")                          \
	X(PARALLEL_COLLECTIVE_OVERLAP_LIMIT, "xla_gpu_experimental_parallel_collective_overlap_limit") \
	X(GRAPH_LEVEL, "xla_gpu_graph_level")                                                    \
	X(COMMAND_BUFFER, "xla_gpu_enable_command_buffer")                                       \
	X(PGLE_PROFILE, "xla_gpu_pgle_profile_file_or_directory_path")                           \
	X(ANALYTICAL_SOL_LATENCY_ESTIMATOR, "xla_gpu_enable_analytical_sol_latency_estimator") \
	X(DISABLE_HLO_PASSES, "xla_disable_hlo_passes")

typedef enum rm_xla_flag_id {
#define RM_XLA_FLAG_ENUM(id, name) RM_XLA_FLAG_##id,
	RM_XLA_FLAG_MAP(RM_XLA_FLAG_ENUM)
#undef RM_XLA_FLAG_ENUM
	RM_XLA_FLAG_COUNT
} rm_xla_flag_id;

#define RM_XLA_FLAG_BIT(id) (UINT32_C(1) << RM_XLA_FLAG_##id)

/* The XLA flag's name, without dashes ("unknown" past the end). */
const char *rm_xla_flag_name(rm_xla_flag_id id);

/* The version profiles: index 0 is the unversioned defaults, then JAX releases oldest first. */
int rm_xla_version_count(void);
const rm_xla_version *rm_xla_version_at(int index); /* NULL out of range */

/* The index of the profile named name ("0.4.30"), or -1; "" finds 0. */
int rm_xla_version_find(const char *name);

/* The known version names, comma-separated ("0.4.30, 0.4.35, ..."), into buf; returns buf. */
const char *rm_xla_version_list(char *buf, size_t size);

/* The defaults of profile index (0 when out of range) for a target that is Hopper or newer or
 * not; rm_xla_flags_parse puts a user's flags on top. */
rm_xla_flags rm_xla_flags_for_version(int index, bool hopper);

/* Whether the latency-hiding scheduler runs under flags->version's IsLHSEnabled: the flag, a
 * PGLE profile (JAX >= 0.5), or the SoL estimator on Hopper or newer (JAX >= 0.7). The last
 * assumes the module has only all-gather, reduce-scatter and all-reduce and nothing offloaded
 * to the host, as XLA's SolLatencyEstimator::IsSupportedForModule requires. */
bool rm_xla_lhs_runs(const rm_xla_flags *flags);

/* Why LHS runs or not under rm_xla_lhs_runs, as a phrase: "the flag", "a PGLE profile", "the
 * SoL estimator on Hopper", or "off: the flag is false" (static storage). */
const char *rm_xla_lhs_reason(const rm_xla_flags *flags);

/*
 * Parses an XLA_FLAGS string over the defaults in *flags (call rm_xla_flags_default or
 * rm_xla_flags_for_version first, or parse several strings in turn), then settles whether LHS
 * runs under flags->version's rule. Errors (RM_PARSE / RM_INVALID): a word that is not a flag, a
 * value of the wrong type, an unknown collective kind, a modelled flag flags->version's XLA does
 * not have (RM_UNSUPPORTED, naming the flag and the JAX release); err->column is the 1-based
 * column of the offending flag in text and the message names it. Unmodelled flags are recorded,
 * not errors.
 */
rm_status rm_xla_flags_parse(const char *text, rm_xla_flags *flags, rm_error *err);

/* Writes the flags that differ from the defaults of flags->version as an XLA_FLAGS string (the
 * line users paste), in a fixed order; unmodelled flags are not repeated. */
const char *rm_xla_flags_format(const rm_xla_flags *flags, char *buf, size_t size);
/* The same, also writing each modelled flag whose bit (RM_XLA_FLAG_BIT) is in keep even where it
 * equals the default: pass flags->given to keep every flag the user wrote (a flag that equals
 * the default in one XLA release may not in the next). A kept flag whose value remora does not
 * hold is still left out: the PGLE profile's path, --xla_gpu_enable_command_buffer= other than
 * empty. */
const char *rm_xla_flags_format_keep(const rm_xla_flags *flags, uint32_t keep, char *buf, size_t size);

/* Logs one warning listing the unmodelled flags, if any, and one listing the flags given that
 * remora parses but whose effect it does not model (graph level, command buffers, PGLE profile). */
void rm_xla_flags_warn_unmodelled(const rm_xla_flags *flags);

#endif /* REMORA_XLA_FLAGS_H */
