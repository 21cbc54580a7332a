/*
 * remora/remat.h — rematerialization (activation checkpointing) policies (schedules/remat.c).
 *
 * What it does: parses a policy as users write it — a JAX call such as
 *   jax.checkpoint_policies.save_only_these_names("dot_mlp_out", "dot_attention_query")
 * a MaxText remat_policy ("maxtext:minimal", or a bare MaxText name such as "minimal"), or a
 * PyTorch activation-checkpointing mode ("torch:full", "torch:selective") — and decides, for one
 * decoder layer's op graph (remora/workload.h), the fate of every forward value the backward pass
 * needs: kept as the scan carry, saved on device, offloaded to pinned host memory, or recomputed.
 *
 * Semantics (docs/reference/remat-policies.md, JAX's jax.checkpoint_policies):
 * - A value the backward needs (a residual) is saved when the policy saves it, offloaded when the
 *   policy offloads it, and otherwise recomputed in the backward pass. Recomputing a value needs
 *   its producer's inputs, which are in turn saved, offloaded or recomputed by the same rule, so
 *   the recompute set is the smallest set of forward ops that rebuilds what the backward needs from
 *   saved values and the layer input. Ops whose outputs nothing in the backward needs (the down
 *   projection and the final residual add of a layer) are never recomputed: JAX dead-code
 *   eliminates them from the rematerialized forward.
 * - The layer input (the scan carry) is always kept on device, whatever the policy
 *   (github.com/jax-ml/jax/issues/23869). Under scan every saved value is stacked [L, ...].
 * - Every value of remora's layer carries a checkpoint name, so "named" policies see all values:
 *   save_any_names_but_these and save_anything_except_these_names coincide here.
 * - dots_saveable saves every dot_general output (with or without batch dimensions); the fused
 *   attention kernel is a custom call, not a dot, so it is recomputed unless named.
 * - The flash kernel's log-sum-exp follows attention_context: the kernel emits both.
 */
#ifndef REMORA_REMAT_H
#define REMORA_REMAT_H

#include <stdbool.h>
#include <stdint.h>

#include "remora/common.h"
#include "remora/workload.h"

typedef enum rm_remat_kind {
	RM_REMAT_EVERYTHING_SAVEABLE,
	RM_REMAT_NOTHING_SAVEABLE,
	RM_REMAT_DOTS_SAVEABLE,
	RM_REMAT_DOTS_WITH_NO_BATCH_DIMS_SAVEABLE,
	RM_REMAT_SAVE_ONLY_THESE_NAMES,
	RM_REMAT_SAVE_ANY_NAMES_BUT_THESE,
	RM_REMAT_SAVE_ANYTHING_EXCEPT_THESE_NAMES,
	RM_REMAT_SAVE_AND_OFFLOAD_ONLY_THESE_NAMES,
	RM_REMAT_OFFLOAD_DOT_WITH_NO_BATCH_DIMS,
	RM_REMAT_SAVE_FROM_BOTH_POLICIES,
	RM_REMAT_KIND_COUNT
} rm_remat_kind;

#define RM_REMAT_MAX_NAMES 32

typedef struct rm_remat_policy rm_remat_policy;
struct rm_remat_policy {
	rm_remat_kind kind;
	int n_names; /* canonical checkpoint names (aliases resolved) */
	const char *names[RM_REMAT_MAX_NAMES];
	int n_offload;
	const char *offload[RM_REMAT_MAX_NAMES];
	char offload_src[16]; /* "device" */
	char offload_dst[16]; /* "pinned_host" */
	rm_remat_policy *first, *second; /* save_from_both_policies */
	bool quiet; /* a built-in policy (megatron:selective) naming values some graphs lack:
		     * no warning for the absent ones */
};

/* JAX name of a kind ("save_only_these_names"). */
const char *rm_remat_kind_name(rm_remat_kind kind);

/*
 * Parses a policy expression (see the header comment). Names are checked against the canonical
 * checkpoint names and MaxText's aliases (rm_checkpoint_canonical). Errors (RM_PARSE or
 * RM_INVALID) give the 1-based column in err->column and name what was expected: unknown policy
 * (with the list), unknown checkpoint name, overlapping save and offload lists, offload
 * destinations other than pinned_host, missing arguments. Returns NULL on error.
 */
rm_remat_policy *rm_remat_policy_parse(const char *expr, rm_error *err);
/* A policy of a kind with name lists (NULL-terminated arrays of user names, may be NULL). */
rm_remat_policy *rm_remat_policy_make(rm_remat_kind kind, const char *const *save,
				      const char *const *offload, rm_error *err);
rm_remat_policy *rm_remat_policy_copy(const rm_remat_policy *p);
void rm_remat_policy_destroy(rm_remat_policy *p);
/*
 * The policy as the line a JAX user pastes, e.g.
 *   jax.checkpoint_policies.save_only_these_names("dot_mlp_out", "dot_attention_query")
 * written into buf (truncated to size).
 */
const char *rm_remat_policy_format(const rm_remat_policy *p, char *buf, size_t size);

typedef enum rm_value_fate {
	RM_FATE_UNUSED,     /* the backward pass does not need it */
	RM_FATE_CARRY,      /* the layer input: kept on device by scan */
	RM_FATE_SAVED,      /* kept on device until its backward use */
	RM_FATE_OFFLOADED,  /* copied to pinned host after its producer, back before its use */
	RM_FATE_RECOMPUTED, /* rebuilt in the backward pass */
} rm_value_fate;

const char *rm_value_fate_name(rm_value_fate fate);

/* What a policy does to one layer. Arrays are indexed like the layer graph's values and ops. */
typedef struct rm_remat_plan {
	int n_values, n_ops;
	rm_value_fate *fate;   /* per value */
	bool *recompute;       /* per op: forward ops rerun in the backward pass */
	int64_t carry_bytes;     /* the layer input */
	int64_t saved_bytes;     /* per layer, on device, excluding the carry */
	int64_t offloaded_bytes; /* per layer, on the host */
	double recompute_flops;  /* per layer */
	int n_recompute_ops;
} rm_remat_plan;

/*
 * Applies a policy to a layer graph. Names the policy lists that this model's layer lacks
 * (dot_mlp_gate on GPT-2) are reported with rm_log_warn and ignored. Free with
 * rm_remat_plan_finish.
 */
rm_status rm_remat_plan_build(const rm_graph *layer, const rm_remat_policy *policy,
			      rm_remat_plan *plan, rm_error *err);
void rm_remat_plan_finish(rm_remat_plan *plan);

/*
 * The plan torch.compile runs: with no activation checkpointing (everything_saveable) AOTAutograd's
 * min-cut partitioner (torch/_functorch/partitioners.py, min_cut_rematerialization_partition)
 * saves the inputs of fusible ops instead of their outputs and recomputes pointwise ops inside the
 * backward kernels; it never recomputes matmuls or attention, nor reductions such as the norms
 * (ban_recompute_reductions, on by default). partitioner false is rm_remat_plan_build. Other
 * policies are checkpoint regions the partitioner keeps.
 */
rm_status rm_remat_plan_build_compiled(const rm_graph *layer, const rm_remat_policy *policy, bool partitioner,
				       rm_remat_plan *plan, rm_error *err);

#endif /* REMORA_REMAT_H */
