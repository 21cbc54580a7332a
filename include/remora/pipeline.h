/*
 * remora/pipeline.h — pipeline parallelism (sim/pipeline.c, schedules/pipeline_run.c).
 *
 * A pipeline of p stages runs m micro-batches per step in one of four orders (docs/parallelism.md
 * "Pipeline parallelism"):
 * - gpipe: every forward, then every backward (Huang et al. 2019);
 * - 1f1b: stage s runs min(p - s - 1, m) warm-up forwards, then one forward and one backward in
 *   turn, then the remaining backwards (PipeDream-Flush; Narayanan et al. 2021, Megatron-LM's
 *   forward_backward_pipelining_without_interleaving);
 * - interleaved: each stage holds v model chunks, virtual stage c * p + s on stage s; Megatron-LM's
 *   interleaved 1F1B order, warm-up (p - s - 1) * 2 + (v - 1) * p chunk passes, m a multiple of
 *   p (Narayanan et al. 2021, section 2.2);
 * - zero_bubble: ZB-H1 of Qi et al., "Zero Bubble Pipeline Parallelism" (ICLR 2024, arXiv
 *   2401.10241, section 3.1 and Figure 3 top). The backward of a micro-batch splits into B, the
 *   input gradient the previous stage waits for, and W, the weight gradient nothing waits for.
 *   Stage s runs 1F1B's warm-up and steady state with B in place of the whole backward, but
 *   defers its first s W passes: after B j it runs W j - s (from j = s on), and the W passes owed
 *   fill the cool-down. Every stage then holds min(p, m) micro-batches in flight (1F1B's stage 0
 *   holds as many). With equal stages (t_b the B, t_w the W), free transfers, m >= p and
 *   t_w <= t_f + t_b, the step is m (t_f + t_b + t_w) + (p - 1)(t_f + t_b - t_w), against
 *   1F1B's (m + p - 1)(t_f + t_b + t_w) (the paper's bubbles (p - 1)(T_F + T_B - T_W) and
 *   (p - 1)(T_F + T_B + T_W)).
 *   With v = 2 it is the paper's ZB-V: chunk 0 of stage s is virtual stage s and chunk 1 virtual
 *   stage 2p - 1 - s, so the last virtual stage (the head) sits on stage 0 and the turn at stage
 *   p - 1 needs no transfer; the order is torch.distributed.pipelining's ScheduleZBVZeroBubble
 *   (torch/distributed/pipelining/schedules.py), planned for max(2p - 1, m) micro-batches.
 *
 * The schedule is simulated as the dependency graph it is: a pass starts when its stage is free
 * and its input has arrived (the previous virtual stage's forward of the same micro-batch, or the
 * next one's backward, plus the point-to-point transfer; a W, its own stage's B). With equal
 * stages and free transfers the step is (m + p - 1) (t_f + t_b) for 1f1b and gpipe, and
 * (m v + p - 1) (t_f + t_b) / v interleaved: the bubble fractions (p - 1) / (m + p - 1) and
 * (p - 1) / (v m + p - 1).
 */
#ifndef REMORA_PIPELINE_H
#define REMORA_PIPELINE_H

#include <stdbool.h>
#include <stdint.h>

#include "remora/common.h"

typedef enum rm_pp_schedule { RM_PP_1F1B, RM_PP_INTERLEAVED, RM_PP_GPIPE, RM_PP_ZERO_BUBBLE, RM_PP_COUNT } rm_pp_schedule;

/* "1f1b", "interleaved", "gpipe", "zero_bubble". */
const char *rm_pp_schedule_name(rm_pp_schedule s);
bool rm_pp_schedule_parse(const char *name, rm_pp_schedule *out);

#define RM_PP_MAX_STAGES 256

/* What one stage's passes cost, seconds: a whole stage's forward and backward of one
 * micro-batch (an interleaved stage's v chunks take 1/v each). */
typedef struct rm_pp_stage_cost {
	double fwd_s, bwd_s;
	double tail_s; /* after its last backward: gradient reductions and the optimizer step */
	double wgrad_s; /* the weight-gradient share of bwd_s, in [0, bwd_s]: zero_bubble's W; its B
			 * (the input gradient) is bwd_s - wgrad_s. The other schedules run bwd_s
			 * whole and ignore it. */
} rm_pp_stage_cost;

typedef enum rm_pp_pass_kind { RM_PP_PASS_FWD, RM_PP_PASS_BWD, RM_PP_PASS_WGRAD } rm_pp_pass_kind;

/* One pass of the simulated schedule: the whole backward (RM_PP_PASS_BWD) under 1f1b,
 * interleaved and gpipe; under zero_bubble RM_PP_PASS_BWD is the input gradient B alone and
 * RM_PP_PASS_WGRAD the weight gradient W. */
typedef struct rm_pp_pass {
	rm_pp_pass_kind kind;
	int stage, chunk, micro_batch;
	double start_s, end_s;
} rm_pp_pass;

typedef struct rm_pp_result {
	double step_s;                    /* the last stage to finish, its tail included */
	double bubble_fraction;           /* stage 0: idle share of its first-forward-to-last-backward span
					   * (ZB-V: the stage that ends last, which starts last) */
	int in_flight[RM_PP_MAX_STAGES];  /* most micro-batch chunk passes whose forward has run and
					   * backward has not, per stage (activations held); under
					   * zero_bubble a micro-batch counts until its W has run,
					   * since W reads the layer inputs and output gradients
					   * (an upper bound: B frees what only it reads) */
	double stage_end_s[RM_PP_MAX_STAGES];
} rm_pp_result;

/*
 * Simulates one step's pipeline schedule. stages[p] gives each stage's costs; p2p_s is the
 * point-to-point transfer between neighbouring stages (each direction, each pass; B passes send
 * it, W passes send nothing; none between two virtual stages on one stage). v: chunks per stage
 * (1 unless interleaved; 1 or 2 for zero_bubble). Errors (RM_INVALID): p outside
 * [1, RM_PP_MAX_STAGES], m < 1, v < 1, v > 1 without interleaved or zero_bubble, zero_bubble with
 * v > 2, interleaved with m not a multiple of p, a negative cost, wgrad_s above bwd_s.
 * Deterministic; O(p m v).
 */
rm_status rm_pp_simulate(rm_pp_schedule sched, int p, int m, int v, const rm_pp_stage_cost *stages, double p2p_s,
			 rm_pp_result *out, rm_error *err);

/* Passes per stage of a schedule: 3 m v under zero_bubble (F, B, W), else 2 m v; 0 for a bad
 * schedule or count. */
int rm_pp_passes_per_stage(rm_pp_schedule sched, int m, int v);

/*
 * rm_pp_simulate that also writes every pass, stage by stage in each stage's order, into
 * passes[p * rm_pp_passes_per_stage(sched, m, v)] (NULL: none). Same errors.
 */
rm_status rm_pp_simulate_passes(rm_pp_schedule sched, int p, int m, int v, const rm_pp_stage_cost *stages,
				double p2p_s, rm_pp_result *out, rm_pp_pass *passes, rm_error *err);

/* ---- a scenario's pipelined step (schedules/pipeline_run.c) ---- */

struct rm_scenario_resolved;

/* One pipelined step of a scenario with parallelism.pp > 1. */
typedef struct rm_pp_run {
	int stages, micro_batches, chunks;
	rm_pp_schedule schedule;
	/* from the engine: one micro-batch through a stage of layers / pp layers (with the
	 * embedding and the head, whose time goes to the first and the last stage); middle: the
	 * second stage's when stages differ (dense first layers) */
	rm_pp_stage_cost first, middle, last;
	double p2p_s;            /* one activation (or its gradient) to the next stage */
	int64_t p2p_bytes;
	rm_pp_result sched;
	double step_s, tokens_per_s, mfu; /* tokens per GPU: each GPU of a stage counts 1 / (tp pp) of
					   * its data-parallel rank's tokens */
	int64_t stage_static_bytes;       /* the stage program's persistent tensors (the largest stage's) */
	int64_t act_bytes_per_chunk;      /* activations one micro-batch leaves on a chunk (the largest) */
	int64_t wgrad_bytes_first, wgrad_bytes_middle, wgrad_bytes_last; /* zero_bubble (else 0): what
					   * one micro-batch's deferred W holds on the stage from its B
					   * to its W, the wgrad ops' inputs X and output gradients dY */
	int64_t peak_bytes[RM_PP_MAX_STAGES];
	int peak_stage;                   /* the stage with the highest peak */
	int64_t usable_bytes;
	bool fits;
} rm_pp_run;

/*
 * Simulates one pipelined step: the engine runs one micro-batch of a stage's layers (the
 * scenario's schedule, FSDP and TP inside the stage, the embedding and the head included), its
 * compute-stream spans give each stage's forward, backward and tail (the embedding's to the first
 * stage, the head's to the last), the weight-gradient kernels' time within the backward gives
 * wgrad_s (the projections' ".wgrad" GEMMs and the embedding's table gradient; recompute,
 * input gradients and waits stay in B), and rm_pp_simulate orders the micro-batches. Memory per
 * stage: the one-micro-batch peak, plus (in_flight - 1) micro-batch chunks of saved activations
 * (zero_bubble: the most the stage's passes hold at once, a micro-batch counting its saved
 * activations from F to B and its wgrad bytes from B to W, less one chunk), less the
 * embedding's (head's) share of the persistent state on the stages that do not hold it. ZB-V's
 * stage 0 holds both, its costs the first stage's plus the head's (the last less the middle);
 * each stage's costs are split evenly over its 2 chunks, as the interleaved schedule's are.
 * A mixture of experts with dense first layers (DeepSeek-V3) prices each kind of stage (all
 * dense, across the boundary, all MoE) by its own layers; with virtual_stages > 1 it is
 * RM_UNSUPPORTED. RM_INVALID for a scenario without pp > 1 and the errors of rm_pp_simulate.
 */
rm_status rm_pp_run_scenario(const struct rm_scenario_resolved *res, rm_pp_run *out, rm_error *err);

#endif
