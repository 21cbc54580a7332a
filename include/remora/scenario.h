/*
 * remora/scenario.h — scenario files (docs/design.md contract 1; schedules/scenario.c).
 *
 * A scenario is YAML (JSON accepted) with these keys; every one can be overridden on the command
 * line with --set KEY=VALUE (VALUE is YAML: 4, true, bf16, [a, b], "--xla_...").
 *
 *   model: llama-2-7b              # preset, or a path to a config.json (relative to the file)
 *   hardware: h100-sxm             # profile, or CALIB.db:NAME, or {profile: NAME, power_w: W, hbm_gib: G}
 *   cluster: {gpus_per_node: 8, nodes: 1}
 *   training: {seq_len: 4096, micro_batch: 1, grad_accum: 1, dtype: bf16, grad_dtype: bf16,
 *              optimizer: adamw, master_weights: true, fused_attention: true, causal: true,
 *              attention_kernel: auto|flash2|flash3|cudnn, compile: true|false,
 *              loss: plain|chunked|fused, grad_clip: true, gemm_dtype: bf16|fp8,
 *              fp8_all_gather: false}
 *   parallelism: {fsdp: 8}          # default: all GPUs of the cluster
 *   remat: {scan: true, policy: save_only_these_names, names: [...], offload_names: [...],
 *           recompute_num_layers: 0, prevent_cse: true}
 *   xla_flags: "--xla_gpu_... --xla_gpu_..."   # exactly as XLA_FLAGS
 *   xla: {version: "0.4.30", mem_fraction: 0.75, allocator: bfc|platform, donate: true}
 *        # version: the JAX release whose XLA defaults apply (docs/xla-versions.md)
 *   scheduler: {mode: xla|ideal|fsdp2, prefetch_depth: 1, cost_model: xla_default|remora,
 *               hw_queues: 8, nccl_version: "2.28", device_memory_gib: 0,
 *               allocator: auto|pytorch|pytorch_expandable|jax|exact,
 *               collective_engine: sm|copy_engine,
 *               nccl_cta_policy: default|efficiency|zero, nccl_registration: none|buffer|symmetric}
 *   memory_headroom_gib: 1.0      # HBM the job cannot use; default derived (rm_memory_budget)
 *   search: {names: [...], policies: [...], micro_batches: [...], flag_variants: [...],
 *            offload: true, include_ideal: true, max_candidates: 100000}
 *
 * remat.policy is either a policy expression (see remora/remat.h, e.g.
 * "save_only_these_names('dot_mlp_out')", "maxtext:minimal") or the bare name of a JAX policy
 * that takes names, completed by remat.names and remat.offload_names.
 *
 * Errors: malformed YAML, unknown keys, wrong types and bad values are reported as
 * FILE:LINE:COLUMN with what was expected; --set errors name the override.
 */
#ifndef REMORA_SCENARIO_H
#define REMORA_SCENARIO_H

#include <stdbool.h>
#include <stdint.h>

#include "remora/common.h"
#include "remora/cost.h"
#include "remora/digest.h"
#include "remora/hw.h"
#include "remora/nccl.h"
#include "remora/remat.h"
#include "remora/schedule.h"
#include "remora/sim.h"
#include "remora/workload.h"
#include "remora/xla_flags.h"

#define RM_SCENARIO_MAX_LIST 64
#define RM_SCENARIO_MAX_KEYS 64
/* layers x grad_accum of one simulated step (4096 layers x 4, 32 x 512): ~0.6 GB and a few
 * seconds for the whole program (docs/scenarios.md) */
#define RM_SCENARIO_MAX_LAYER_STEPS 16384

typedef struct rm_scenario_pos {
	char key[48];
	int line, column;
	/* > 0 when the value is a one-line string that stands in the file character for character
	 * (plain, or quoted without escapes): the column of its first character, so that column c of
	 * the string is text_column + c - 1 in the file */
	int text_column;
} rm_scenario_pos;

typedef struct rm_scenario {
	char path[512]; /* the file, for messages ("" for built-in) */
	char dir[512];  /* its folder, for relative model paths */
	char model[512];
	char hardware[256];
	int64_t gpus_per_node; /* 0: the hardware's */
	int64_t nodes;
	int64_t nics_per_node; /* scale-out NICs per node; 0: one per GPU */
	int64_t nvlink_mesh;   /* GPUs of a board NVLinked without NVSwitch (HGX 4-GPU); 0: NVSwitch */
	double nic_gbps;       /* each NIC's line rate, Gb/s; 0: the profile's */
	/* cluster.topology (docs/collectives.md "Topology"); kind "": none */
	char topology_kind[24];
	int topology_pxn; /* -1: default (true) */
	int n_topology_tiers;
	struct rm_scenario_tier {
		int64_t nodes, ports;    /* 0: unset (ports: the leaf only) */
		double oversubscription; /* 0: unset (1) */
		double latency_us;
	} topology_tiers[RM_FABRIC_MAX_TIERS];
	int64_t seq_len, micro_batch, grad_accum; /* 0: defaults */
	char dtype[16], grad_dtype[16], optimizer[24], optimizer_dtype[16];
	int master_weights, fused_attention, causal; /* -1: default */
	double power_w, hbm_gib;                     /* hardware: {power_w, hbm_gib}; 0: the profile's */
	char attention_kernel[16], loss[16];         /* "": auto / plain */
	char embedding[16];                          /* training.embedding: gather (""), one_hot */
	char rope[16];                               /* "": complex */
	char gemm_dtype[16];                         /* "": bf16 */
	int fp8_all_gather;                          /* -1: default (false) */
	int compile, grad_clip;                      /* -1: default */
	int reshard_after_forward;                   /* scheduler.reshard_after_forward; -1: default (true) */
	int overlap_grad_reduce, overlap_param_gather; /* scheduler.mode megatron; -1: default (true) */
	int64_t fsdp; /* 0: all GPUs (over dp_replicate when that is set) */
	int64_t dp_replicate; /* HSDP replicas of the FSDP group; 0: the GPUs the FSDP group leaves */
	int64_t zero;         /* 1, 2 or 3; 0: 3 */
	int64_t global_batch; /* sequences per step; 0: micro_batch x grad_accum x data-parallel GPUs */
	double moe_imbalance, moe_capacity_factor; /* 0: defaults (1, dropless) */
	/* accepted so that scenarios written for other tools parse; only 1 / unset is modelled */
	int64_t tp, pp, virtual_stages, cp, ep;
	int sp, async_tp, loss_parallel; /* -1: unset */
	char tp_embedding[24];            /* "vocab_parallel" (default) or "replicated" */
	char pp_schedule[16];
	bool scan;
	int64_t recompute_num_layers; /* 0: every layer follows the policy */
	char recompute_method[16];    /* Megatron-LM's: "block" (the first n layers) or "uniform" */
	int prevent_cse;              /* jax.checkpoint(prevent_cse=...): -1 default (true), 0, 1 */
	char policy[1024];
	int n_names, n_offload;
	char names[RM_SCENARIO_MAX_LIST][48];
	char offload_names[RM_SCENARIO_MAX_LIST][48];
	char xla_flags[4096];
	char xla_version[16]; /* xla.version: a JAX release (docs/xla-versions.md); "": unversioned */
	char mode[16];
	int64_t prefetch_depth;
	char cost_model[16];
	int64_t hw_queues;
	char nccl_version[16];
	double device_memory_gib;
	char allocator[24]; /* "auto": jax under mode xla, pytorch otherwise */
	char gradient_sync[24]; /* fsdp2: "every_micro_batch" (default) or "last_micro_batch" */
	double xla_mem_fraction; /* XLA_PYTHON_CLIENT_MEM_FRACTION; -1: JAX's default (0.75) */
	char xla_allocator[16];  /* XLA_PYTHON_CLIENT_ALLOCATOR: "bfc" (default) or "platform" */
	int xla_donate;          /* train state donated (donate_argnums): -1 default (yes), 0, 1 */
	char collective_engine[16]; /* "sm" (NCCL kernels) or "copy_engine" (all-gathers) */
	char nccl_cta_policy[24];   /* NCCL_CTA_POLICY: "default" / "", "efficiency", "zero" */
	char nccl_registration[16]; /* "none" / "", "buffer", "symmetric" (NCCL windows) */
	double memory_headroom_gib; /* used when set; otherwise derived (rm_memory_budget_default) */
	/* search space */
	int n_search_names, n_search_policies, n_search_micro_batches, n_search_flag_variants;
	char search_names[RM_SCENARIO_MAX_LIST][48];
	char search_policies[RM_SCENARIO_MAX_LIST][256];
	int64_t search_micro_batches[RM_SCENARIO_MAX_LIST];
	char search_flag_variants[RM_SCENARIO_MAX_LIST][512];
	/* parallelism variants: each a space-separated list of KEY=VALUE overrides (--set syntax,
	 * e.g. "parallelism.tp=2 parallelism.sp=true"); "" is the scenario's own */
	int n_search_parallelism;
	char search_parallelism[RM_SCENARIO_MAX_LIST][256];
	bool search_offload, search_include_ideal;
	int64_t search_max_candidates;
	/* where each key was set (for messages about values) */
	int n_pos;
	rm_scenario_pos pos[RM_SCENARIO_MAX_KEYS];
} rm_scenario;

/* Defaults (no model: required). */
void rm_scenario_init(rm_scenario *sc);
/* Reads a scenario file over the defaults. */
rm_status rm_scenario_load(const char *path, rm_scenario *sc, rm_error *err);
/* Parses scenario text; path names it in errors. */
rm_status rm_scenario_parse(const char *text, size_t len, const char *path, rm_scenario *sc, rm_error *err);
/*
 * Parses the scenario that is the mapping at node_path (libfyaml's node path, e.g. "/scenario")
 * inside a larger YAML document (a validation case, docs/validate.md) over what sc holds. The
 * keys and checks are rm_scenario_parse's; errors carry path:LINE:COLUMN of the larger document,
 * and a relative model path is taken from path's folder. RM_MISSING when there is no such node.
 */
rm_status rm_scenario_parse_at(const char *text, size_t len, const char *path, const char *node_path, rm_scenario *sc,
			       rm_error *err);
/*
 * Applies one --set KEY=VALUE (VALUE is YAML except for string keys, taken verbatim). Errors:
 * RM_USAGE for an assignment without '=' or key, RM_UNKNOWN_KEY for a key remora does not have
 * (both are command-line usage), other statuses for a bad value; messages quote the override.
 */
rm_status rm_scenario_set(rm_scenario *sc, const char *assignment, rm_error *err);

/* The config.json file the scenario's model names, relative to the scenario's folder, into buf;
 * NULL when the model is a preset name. */
const char *rm_scenario_model_file(const rm_scenario *sc, char *buf, size_t size);

/* The hardware spec the scenario names, into buf: a "CALIB.db:NAME" written in the file with a
 * relative path is taken from the scenario's folder (as the model's config.json is); a --set
 * value, a profile name or an absolute path is returned as written. */
const char *rm_scenario_hardware_spec(const rm_scenario *sc, char *buf, size_t size);

/* Where key (a dotted path, "search.flag_variants") was set: its 1-based line and column in
 * the file (line 0 for a --set override), or NULL when the scenario never set it. */
const rm_scenario_pos *rm_scenario_key_pos(const rm_scenario *sc, const char *key);

/*
 * The resolved run: everything a simulation's result depends on, resolved from a scenario (owns
 * what it points to). simulate, schedule, search and (through the programs they write)
 * run-program and exec all consume this one value, so every command prices a scenario the same
 * way: sched.cost is the collective cost model of the resolved hardware (calibrated when the
 * hardware is "CALIB.db:NAME"), the same one the engine uses (pass &cost.base to rm_sim_create).
 * Its digest (rm_scenario_resolved_digest) keys the sweep store. Not copyable: sched points into
 * it.
 */
typedef struct rm_scenario_resolved {
	rm_model_config model;
	rm_train_config train;
	rm_hw_profile hw;
	rm_cost_nccl cost; /* collectives priced by the resolved NCCL model (version, fitted overrides) */
	rm_workload *wl;
	rm_remat_policy *policy;
	rm_xla_flags flags;
	rm_schedule_config sched;
	int hw_queues;
	int gpus; /* gpus_per_node * nodes */
	rm_memory_budget memory; /* what of HBM a run can use, and what the rest is made of */
	bool compile;            /* training.compile as resolved (fsdp2: false unless set; xla, ideal: fused) */
	rm_sim_allocator allocator; /* reserved memory model (scheduler.allocator resolved) */
	double alloc_fraction;      /* JAX: preallocated fraction of HBM */
} rm_scenario_resolved;

/*
 * Resolves a hardware spec to a profile and, when nccl is not NULL, the NCCL model for a
 * collective group of ranks GPUs over nodes nodes with NCCL nccl_version (NULL: the default).
 * The command line passes rm_calib_hw_resolver (remora/calib.h), which also understands
 * "FILE.db:NAME" (calibrated profiles and fitted collectives); NULL means embedded profiles and
 * the embedded NCCL model only.
 */
typedef rm_status (*rm_hw_resolver)(const char *spec, const char *nccl_version, int ranks, int nodes,
				    rm_hw_profile *hw, rm_nccl_model *nccl, rm_error *err);

/*
 * Resolves model, hardware, training setup, policy and flags, checking them together (FSDP
 * degree against the cluster, the policy's names, the flags). Errors point at the key's
 * position in the file. Release with rm_scenario_resolved_finish.
 */
rm_status rm_scenario_resolve(const rm_scenario *sc, rm_hw_resolver resolver, rm_scenario_resolved *out,
			      rm_error *err);
void rm_scenario_resolved_finish(rm_scenario_resolved *r);

/*
 * The canonical text of a resolved run (schedules/run.c): one "key=value" line per value that
 * decides a result — model dimensions, training setup, every hardware field, the NCCL model's
 * version and fitted overrides, the XLA flags as parsed, the remat policy in canonical form,
 * scheduler options, hardware queues, the memory budget — and the cost-model revision (the
 * SHA-256 of remora's model sources, REMORA_MODEL_DIGEST). Names, paths and sources of values are
 * left out: two scenarios that resolve to the same values have the same text. Doubles are exact
 * (%a). Appends to c (remora/digest.h).
 */
void rm_scenario_resolved_canonical(const rm_scenario_resolved *r, rm_canon *c);
/* SHA-256 of the canonical text, as 64 hex digits. */
void rm_scenario_resolved_digest(const rm_scenario_resolved *r, char hex[RM_SHA256_HEX]);
/* The cost-model revision this build was made from (64 hex digits). */
const char *rm_model_revision(void);

#endif /* REMORA_SCENARIO_H */
