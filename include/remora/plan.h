/*
 * remora/plan.h — capacity planning (search/plan.c): how many GPUs of which kind, laid out how,
 * for how long and at what cost, to train a model on a token budget.
 *
 * For each hardware profile and each GPU count, the planner enumerates the layouts a user would
 * try (rm_plan_layouts: tensor parallelism inside a node with sequence parallelism, pipeline
 * stages, context parallelism for long sequences, FSDP over the data-parallel GPUs or HSDP with
 * the shard group inside a node, expert parallelism over the shard group for MoE models) and
 * runs remora's search over them (remora/search.h: every layout x remat policy x micro-batch,
 * simulated), so that a plan is a simulated step, never an extrapolation. Each (hardware, GPU
 * count) is one search; with a database the whole plan resumes like a search.
 *
 * Arithmetic (hand-checkable): time_to_train = tokens / (tokens_per_s_per_gpu x gpus);
 * gpu_hours = gpus x time_to_train / 3600; cost = gpu_hours x price per GPU-hour. A candidate
 * that does not fit is never a plan.
 *
 * Units: seconds, bytes, tokens; prices in the user's currency per GPU-hour.
 */
#ifndef REMORA_PLAN_H
#define REMORA_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "remora/common.h"
#include "remora/scenario.h"
#include "remora/search.h"

#define RM_PLAN_MAX_HW 8
#define RM_PLAN_MAX_GPUS 32
#define RM_PLAN_MAX_LAYOUTS RM_SCENARIO_MAX_LIST
#define RM_PLAN_MAX_LADDER (1 << 20) /* GPUs a plan goes up to */

/*
 * Parses a token count with an optional SI suffix (K = 10^3, M = 10^6, B or G = 10^9, T =
 * 10^12, P = 10^15; "15T", "1.5e12", "300B"). False (err names the text) for anything else, a
 * count below 1 or above 10^18.
 */
bool rm_plan_parse_tokens(const char *text, double *tokens, rm_error *err);
/*
 * Parses a duration: a decimal number with s, m(in), h, d or w ("30d", "36h", "90m"); a bare
 * number is seconds. False (err names the text) for anything else (hex, inf, nan) or a duration
 * <= 0.
 */
bool rm_plan_parse_duration(const char *text, double *seconds, rm_error *err);

/* What the user asks. */
typedef struct rm_plan_request {
	char model[1024];   /* preset name or config.json path, as the scenario's model key */
	double tokens;      /* the token budget; 0: "what fits" (no time to train) */
	int n_hardware;
	char hardware[RM_PLAN_MAX_HW][256];   /* profile names or calibrated "calib.db:NAME" */
	double price[RM_PLAN_MAX_HW];         /* per GPU-hour; < 0: not given */
	int n_gpus;
	int64_t gpus[RM_PLAN_MAX_GPUS];       /* the GPU counts to plan; 0 counts: the ladder */
	double deadline_s;  /* > 0: the fewest GPUs that train within it */
	double budget;      /* > 0: the fastest plan whose cost stays within it (needs prices) */
	int64_t seq_len;    /* 0: 8192 */
	int64_t global_batch_min, global_batch_max; /* sequences per step; 0: 4 Mi tokens' worth */
	int64_t weak_base_gpus; /* > 0: weak scaling: the global batch is for this many GPUs and
				 * grows in proportion to each count planned (the batch per GPU fixed) */
	char runtime[16];   /* scheduler.mode: fsdp2 (default), xla, megatron */
	int n_policies;
	char policies[16][256]; /* 0: the runtime's usual three (rm_plan_default_policies) */
	int n_tp, n_pp;     /* > 0: only these degrees (--tp 8, --pp 1,2,4) */
	int64_t tp[8], pp[16];
	int n_pp_schedules; /* > 0: each pipelined layout under each of these: 1f1b, interleaved (2
			     * chunks a stage), gpipe, zero_bubble (ZB-H1), zbv (zero_bubble with 2
			     * chunks); 0: 1f1b */
	char pp_schedules[5][16];
	bool async_tp;      /* each TP layout also with parallelism.async_tp (PyTorch's) */
	int n_zero;         /* > 0: each HSDP layout under each of these ZeRO stages (1, 2, 3) */
	int zero[3];
	int gpus_per_node;  /* 0: the profile's (or nvlink_mesh's) */
	int nvlink_mesh;    /* > 0: nodes are boards of this many GPUs joined NVLink to NVLink
			     * without NVSwitch (cluster.nvlink_mesh; an HGX 4-GPU board: 4) */
	int64_t max_gpus;   /* the ladder's top; 0: 16384 */
} rm_plan_request;

/* A request with the defaults above (no model, no hardware). */
rm_plan_request rm_plan_request_default(void);

/*
 * The layouts rm_plan_run tries for gpus GPUs (gpn per node) of a resolved base scenario's model
 * and training (res: for its heads, kv_heads, ffn, layers, experts, sequence): "--set" override
 * strings ("parallelism.tp=8 parallelism.sp=true parallelism.pp=4 parallelism.fsdp=16
 * parallelism.dp_replicate=1 ..."), at most cap. tp in {1, 2, 4, 8} dividing the heads, the
 * key/value heads and the MLP width, inside a node; pp a divisor of the layers up to 16; cp in
 * {1, 2, 4, 8} from 32768 tokens; FSDP over every data-parallel GPU, and HSDP with the shard
 * group inside a node when the data-parallel GPUs span nodes; MoE: ep = the shard group when it
 * divides the experts (else FSDP shards them). req (may be NULL) narrows tp and pp to its lists and
 * adds its pipeline schedules, async TP and ZeRO stages. Deterministic order.
 * Returns the count.
 */
int rm_plan_layouts(const rm_scenario_resolved *res, int64_t gpus, int gpn, const rm_plan_request *req,
		    char (*out)[256], int cap);

/* One plan: the best candidate of one layout or of one (hardware, GPU count). */
typedef struct rm_plan_row {
	int hw;             /* index into the request's hardware */
	int64_t gpus, nodes;
	char layout[256];   /* the override string; "" the base layout (FSDP over all GPUs) */
	int64_t tp, pp, cp, ep, fsdp, dp_replicate, global_batch, grad_accum;
	bool sp, async_tp;
	int pp_schedule;     /* rm_pp_schedule (remora/pipeline.h) */
	int zero;            /* ZeRO stage of the data-parallel GPUs (3: FSDP) */
	int64_t virtual_stages;
	rm_candidate_result r; /* the search's row: policy, micro-batch, step, tokens/s, MFU, memory */
	double bubble_fraction; /* pp > 1: the first stage's idle share (remora/pipeline.h) */
	int n_stages;
	int64_t stage_peak_bytes[16]; /* pp > 1: peak memory per stage (the first 16) */
	double time_to_train_s; /* 0 without tokens */
	double gpu_hours, cost; /* cost < 0: no price */
} rm_plan_row;

/* Per hardware and GPU count: the winner, and each layout's best (fitting or not). */
typedef struct rm_plan_point {
	int hw;
	int64_t gpus;
	bool have_best;
	rm_plan_row best;
	int n_layouts;      /* layouts tried (resolved) */
	rm_plan_row *layouts; /* [n_layouts]: each layout's best candidate; fits false when none fits */
	int n_rejected;     /* layouts that do not even resolve */
	char (*rejected)[256];     /* [n_rejected] layout strings */
	char (*rejected_why)[256]; /* [n_rejected] the reason */
	int64_t candidates, simulated; /* of this point's search (this process's shard): its size, and
					* those simulated now (the rest were stored) */
} rm_plan_point;

typedef struct rm_plan_result {
	int n_points;
	rm_plan_point *points; /* in evaluation order: per hardware, GPU counts ascending */
	int chosen[RM_PLAN_MAX_HW]; /* per hardware: index into points of the plan that answers the
				     * constraint (deadline, budget, the given count); -1 none */
	char why_none[RM_PLAN_MAX_HW][256]; /* when chosen is -1 */
	int64_t gpn[RM_PLAN_MAX_HW];        /* GPUs per node of each hardware */
} rm_plan_result;

typedef struct rm_plan_options {
	const char *db_path; /* NULL: in memory */
	int jobs;
	void (*progress)(const char *what, void *user);
	void *user;
	/* with user: each search's sweep progress (rm_search_options.progress; the rate and ETA of
	 * the search under way) and each candidate it simulates (rm_search_options.on_row); NULL:
	 * none */
	rm_search_progress_fn search_progress;
	void (*on_row)(const rm_candidate_result *r, int64_t done, int64_t total, void *user);
	/* shard_count > 1: each search sweeps only shard shard_index (rm_search_options). Without
	 * gather the process sees only its shard's rows, so the GPU-count ladder is walked to its
	 * top (no early stop) and the result is not a plan: merge the shards' databases and plan
	 * again on the merged one. */
	int shard_index, shard_count;
	/* joins the shards after each search's sweep, with its database closed (under MPI: rank 0
	 * merges every rank's file into merged_db); called with the sweep's status on every
	 * process, returns the joint one. Each search then reads merged_db, so every process walks
	 * the same ladder. NULL: none. */
	rm_status (*gather)(void *user, rm_status st, rm_error *err);
	void *gather_user;
	const char *merged_db; /* with gather: the database the shards are merged into (also what
				* a shard skips: rm_search_options.resume_from) */
} rm_plan_options;

/*
 * Plans a request. Errors: RM_INVALID for a request without a model or hardware, a budget without
 * prices, a GPU count that is not a whole number of nodes (or below one node, more GPUs than one
 * node has); the base scenario's own errors (an unknown model or profile, at the key); RM_IO for
 * the database. The result is deterministic for any jobs.
 */
rm_status rm_plan_run(const rm_plan_request *req, rm_hw_resolver resolver, const rm_plan_options *opt,
		      rm_plan_result *out, rm_error *err);
void rm_plan_result_finish(rm_plan_result *r);

/* The runtime's default remat policies (JAX names; the fsdp2 SAC one as torchtitan's op-level
 * policy saves); returns the count written into out (at most cap). */
int rm_plan_default_policies(const char *runtime, char (*out)[256], int cap);

#endif /* REMORA_PLAN_H */
