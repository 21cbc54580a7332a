/*
 * remora/schedule.h — from a workload, a remat policy and XLA flags to the schedule program of a
 * whole training step (schedules/scheduler.c), predicting what XLA's GPU compiler would run.
 *
 * What it models (docs/reference/seed.md 'The mechanism'):
 * 1. FSDP collectives per layer: an all-gather of the layer's bf16 weights before its forward,
 *    again before its backward (and recompute); a reduce-scatter of its weight gradients; an
 *    all-reduce of the replicated norm weights' gradients; the embedding and head likewise; the
 *    optimizer update on the shards. Every micro-batch of gradient accumulation re-gathers.
 * 2. Async conversion: every collective becomes a start/done pair except the kinds in
 *    --xla_gpu_disable_async_collectives. Collective pipelining moves all-gathers one layer
 *    ahead (prologue before the loop) and reduce-scatters/all-reduces one layer behind
 *    (epilogue after it); while-loop double buffering unrolls the scan body by 2; combining
 *    merges a layer's collectives of one kind up to the combine threshold (pipelined and
 *    non-pipelined collectives are never combined).
 * 3. The latency-hiding scheduler (LHS), bottom-up over each computation (the scan body, or the
 *    whole unrolled forward/backward): a done is placed as late as its users allow; its start
 *    rises until the collective's estimated latency is covered by compute (XLA's default cost
 *    units: async collective 5000, cuBLAS/cuDNN call and loop fusion 1000; or remora's own
 *    seconds), one collective of each kind in flight and at most overlap_limit in flight at
 *    all. Memory enters as in XLA's ReadySetLt: above half the memory limit the scheduler
 *    tracks each candidate's memory change, and kMemoryPeakOverLimit keeps a window closed
 *    when its buffer (or the next compute's peak) would carry usage past the limit; at or over
 *    the limit kDecreaseMemoryOverLimit takes the start that frees the most first. The limit
 *    is a preference: compute goes on above it. Memory limit (GetSchedulerMemoryLimit,
 *    xla/service/gpu/gpu_hlo_schedule.cc) = (base - entry parameter and output bytes, aliased
 *    outputs once) * slop_factor/100; base = the device_memory_size JAX passes: the BFC
 *    allocator's XLA_PYTHON_CLIENT_MEM_FRACTION (0.75) of HBM, or 0.8 of HBM with the platform
 *    allocator, unless given.
 * 4. Start/done pairs with nothing between them become synchronous collectives on the compute
 *    stream, each with its reason: disabled (by flag), memory_peak_over_limit,
 *    decrease_memory_over_limit, nothing_to_overlap, overlap_limit (other collectives held the
 *    in-flight slots over its whole window), or no_latency_hiding_scheduler.
 * An "ideal" mode, not XLA: collectives on their own stream with a fixed prefetch depth, as a
 * hand-tuned FSDP runtime issues them, never synchronous.
 *
 * Units: bytes, seconds.
 */
#ifndef REMORA_SCHEDULE_H
#define REMORA_SCHEDULE_H

#include <stdbool.h>
#include <stdint.h>

#include "remora/common.h"
#include "remora/cost.h"
#include "remora/hw.h"
#include "remora/program.h"
#include "remora/remat.h"
#include "remora/workload.h"
#include "remora/xla_flags.h"

/* Periodic stretches a report can describe (remora/sim.h RM_SIM_MAX_LOOPS). */
#define RM_SCHED_MAX_LOOPS 4

/*
 * xla: XLA's GPU compiler (above). ideal: a bound, not a runtime. fsdp2: PyTorch FSDP2
 * (torch.distributed.fsdp.fully_shard): layers unrolled (no scan), each block's all-gather issued
 * one block ahead in forward and backward on its own stream, parameters resharded after forward
 * and gathered again for backward, each block's reduce-scatter on a second stream of its own (so
 * an all-gather and a reduce-scatter can run at once), never synchronous.
 */
typedef enum rm_sched_mode { RM_SCHED_XLA, RM_SCHED_IDEAL, RM_SCHED_FSDP2 } rm_sched_mode;

/* "xla", "ideal", "fsdp2". */
const char *rm_sched_mode_name(rm_sched_mode mode);
/*
 * Which memory-bound ops run as one kernel (schedules/fusion.c, docs/sim.md "Fusion"). auto: as
 * the runtime fuses: XLA's fusion under xla and ideal, Inductor's inside each transformer block
 * under fsdp2 with training.compile, none in eager fsdp2 (its ops run as decompositions). off:
 * one kernel per graph op everywhere (for comparisons).
 */
typedef enum rm_fusion_mode { RM_FUSION_AUTO, RM_FUSION_OFF } rm_fusion_mode;

typedef enum rm_lhs_cost { RM_LHS_COST_XLA_DEFAULT, RM_LHS_COST_REMORA } rm_lhs_cost;

typedef enum rm_sync_reason {
	RM_SYNC_NONE,
	RM_SYNC_DISABLED,
	RM_SYNC_MEMORY_PEAK_OVER_LIMIT,     /* kMemoryPeakOverLimit: the window would pass the limit */
	RM_SYNC_DECREASE_MEMORY_OVER_LIMIT, /* kDecreaseMemoryOverLimit: at the limit, freeing first */
	RM_SYNC_NOTHING_TO_OVERLAP,
	RM_SYNC_NO_LHS,
	RM_SYNC_OVERLAP_LIMIT,
	RM_SYNC_REASON_COUNT
} rm_sync_reason;

/* "disabled", "memory_peak_over_limit", "decrease_memory_over_limit", "nothing_to_overlap",
 * "no_latency_hiding_scheduler", "overlap_limit" (another collective held the only in-flight
 * slot over its whole window). */
const char *rm_sync_reason_name(rm_sync_reason reason);

typedef struct rm_schedule_config {
	const rm_workload *wl;        /* model and training setup (fsdp, micro_batch, grad_accum) */
	const rm_remat_policy *policy;
	rm_xla_flags flags;
	const rm_hw_profile *hw;
	int fsdp_nodes;               /* nodes the FSDP group spans (>= 1) */
	int tp_nodes;                 /* nodes the tensor-parallel group spans; 0: 1 */
	int cp_nodes;                 /* nodes the context-parallel group spans; 0: 1 */
	int ep_nodes;                 /* nodes the expert-parallel group spans; 0: 1 */
	int replica_nodes;            /* nodes the replica group (wl->train.dp_replicate GPUs, one of
				       * each FSDP group) spans; 0: 1 */
	bool scan;                    /* layers under lax.scan (default) or unrolled */
	rm_sched_mode mode;
	int prefetch_depth;           /* ideal mode: all-gathers issued this many layers ahead */
	rm_lhs_cost lhs_cost;
	int64_t device_memory_bytes;  /* base of XLA's memory limit; 0: from the allocator below */
	double mem_fraction;          /* XLA_PYTHON_CLIENT_MEM_FRACTION (BFC allocator); 0: 0.75 */
	bool platform_allocator;      /* XLA_PYTHON_CLIENT_ALLOCATOR=platform: no limit passed, XLA
				       * takes 0.8 of HBM */
	bool no_donate;               /* the train state is not donated (no donate_argnums): its
				       * outputs do not alias the parameters and count again */
	const rm_cost_model *cost;    /* seconds for remora LHS costs; NULL: the default model */
	bool compile_partitioner;     /* fsdp2 with torch.compile: rm_remat_plan_build_compiled */
	bool grad_sync_last;          /* fsdp2: reduce-scatter the gradients after the last micro-batch
				       * only (set_requires_gradient_sync(False) before the others):
				       * unsharded gradients accumulate over the micro-batches */
	bool reshard_after_forward;   /* fsdp2: free the gathered parameters after the forward and
				       * gather again for the backward (FSDP2's default; the last layer
				       * is kept, as torchtitan applies fully_shard) */
	bool megatron;                /* scheduler.mode megatron: the fsdp2 runtime without FSDP, its
				       * gradients reduced per layer in the last micro-batch's backward
				       * on their own stream (overlap_grad_reduce) or all after the
				       * backward, the distributed optimizer's (zero 1) parameter
				       * all-gather per layer ahead of its forward (overlap_param_gather)
				       * or after the step */
	bool overlap_grad_reduce, overlap_param_gather;
	bool eager;                   /* fsdp2 without compile: memory-bound ops as their eager
				       * decompositions (rm_op eager_bytes, eager_kernels) */
	bool prevent_cse;             /* XLA: jax.checkpoint's optimization barrier before the
				       * recompute: the backward's gathers read the barrier's output,
				       * so the pipeliner cannot fetch them an iteration ahead */
	int recompute_num_layers;     /* unrolled only: layers 0..n-1 follow the policy, the rest keep
				       * everything (NeMo's recompute_num_layers, block method); 0: all */
	bool lean;                    /* searches: no tensor names, no self-validation */
	int emit_micro_batches;       /* fsdp2 (and megatron) and the unrolled ideal runtime, >= 3: a
				       * step of more micro-batches is built with this many, its
				       * middle ones a periodic stretch for the engine to extend
				       * (rm_schedule_report.loops; the tokens, FLOPs and batch are
				       * the whole step's); 0: all of them */
	int emit_loop_iters;          /* a scan's loops (XLA's while loops over the layers), >= 3: a
				       * loop of more trips is built with this many, its first ones
				       * and its last, the middle ones a periodic stretch for the
				       * engine to extend (rm_schedule_report.loops; the residual
				       * stacks, tokens and FLOPs the whole step's); at most
				       * RM_SCHED_MAX_LOOPS / 2 micro-batches; 0: every trip */
	rm_fusion_mode fusion;        /* memory-bound ops as fused kernels (docs/sim.md "Fusion") */
	rm_program *into;             /* NULL: the program is a new one; else it is into, emptied
				       * (rm_program_reset: its storage reused) and filled, still the
				       * caller's on an error (a search's worker keeps one) */
} rm_schedule_config;

/* Defaults: scan, XLA mode, prefetch 1, XLA's default LHS costs, XLA's flags. */
rm_schedule_config rm_schedule_config_default(const rm_workload *wl, const rm_remat_policy *policy,
					      const rm_hw_profile *hw);

typedef struct rm_schedule_report {
	int64_t memory_limit_bytes;  /* XLA's scheduler memory limit: (base - io) x slop, >= 0 */
	int64_t memory_base_bytes;   /* the device memory it starts from */
	int64_t io_bytes;            /* parameter and output bytes it subtracts */
	int64_t tracked_peak_bytes;  /* highest LHS-tracked live memory of any computation */
	bool backward_gathers_fenced; /* prevent_cse's barrier kept the backward's gathers in their
				       * iteration (XLA, something recomputed) */
	int64_t first_memory_sync_tracked_bytes; /* tracked memory at the first memory-rule
						  * decision of the first computation that had one; 0: none */
	int collectives, async, sync;  /* the FSDP group's (the ones XLA's scheduler places) */
	int sync_by_reason[RM_SYNC_REASON_COUNT];
	/* across the replicas of the FSDP group (dp_replicate > 1): each gradient reduction's
	 * cross-replica all-reduce or reduce-scatter (behind it on its stream; sync when it is), the
	 * per-layer all-reduces of data parallelism without FSDP, and the all-gather of the updated
	 * parameters after a ZeRO-1/2 optimizer step */
	int replica_collectives, replica_sync;
	int async_tp_collectives; /* tensor-parallel collectives run micro-pipelined with their
				   * projections (train.async_tp), the step's */
	rm_remat_plan plan;          /* the per-layer remat plan (owned; rm_schedule_report_finish) */
	int64_t saved_bytes_step;    /* L x per-layer saved bytes (+ the scan carry), per micro-batch */
	int64_t offloaded_bytes_step;
	/* XLA, unrolled, LHS on: the compute order its list scheduler gives the backward
	 * (docs/schedules.md "Compute order"): backward slots that moved, the most bytes of
	 * recomputed activations live at once and one layer's recomputed activations (their ratio
	 * is how many layers' worth are live), and the ReadySetLt rule that decided most moves (a
	 * static string; NULL when nothing moved) */
	int lhs_moved_slots;
	int64_t lhs_live_recompute_bytes;
	int64_t lhs_recompute_layer_bytes;
	const char *lhs_move_rule;
	/* XLA: HloRematerialization after scheduling (docs/schedules.md "After scheduling"): its
	 * limit (memory_limit_bytes less the entry's outputs); whether some computation's tracked
	 * peak was over it (remat_applied), the highest such peak before and after the pass, and
	 * still over after it; per step, the instructions it recomputed (clones), those it moved,
	 * the bytes the clones define and their FLOPs. The step's program does not run the clones. */
	int64_t remat_limit_bytes;
	bool remat_applied, remat_over;
	int64_t remat_peak_before_bytes, remat_peak_after_bytes;
	int remat_ops, remat_moves;
	int64_t remat_bytes;
	double remat_flops;
	/* cfg->emit_micro_batches or cfg->emit_loop_iters took effect: the program holds periodic
	 * stretches (remora/sim.h rm_sim_loop, in launch order; the first with ops 0 ends them)
	 * standing for more iterations than it holds: its micro-batches 1 .. emitted - 2, or a
	 * scan's forward and backward loops of each micro-batch. None: the program is the whole
	 * step. */
	struct {
		int32_t first_op, ops, iters;
		int64_t trips;
	} loops[RM_SCHED_MAX_LOOPS];
	int micro_batches_emitted; /* fewer than the step's with cfg->emit_micro_batches; with no
				    * stretch then, the program is not the step's (build it again
				    * without) */
	bool loops_partial;        /* cfg->emit_loop_iters shortened a scan's loops but no stretch
				    * describes them: not the step's program (build it again without) */
} rm_schedule_report;

void rm_schedule_report_finish(rm_schedule_report *rep);

/*
 * Builds the program of one training step. Returns NULL with err on an invalid configuration
 * (fsdp group larger than the nodes hold, a policy error). rep may be NULL. Builds with
 * REMORA_SELF_CHECK (every build type but release, meson.build: the tests' builds) validate
 * the program built (rm_program_validate) unless cfg->lean; an invalid one is an internal error.
 * Callers then simulate it with rm_sim_options.scheduler_built, which validates nothing again.
 */
rm_program *rm_schedule_build(const rm_schedule_config *cfg, rm_schedule_report *rep, rm_error *err);

#endif /* REMORA_SCHEDULE_H */
