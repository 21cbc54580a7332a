/*
 * remora/sim.h — the discrete-event engine that executes a schedule program on a hardware model
 * (sim/engine.c, sim/result.c, sim/trace.c, sim/bench.c). docs/sim.md has the design.
 *
 * Semantics
 * - Ops start when the previous op of their stream has ended and every event they wait on has
 *   been recorded (the recording op has ended). Streams map to hardware queues round-robin by
 *   index (CUDA_DEVICE_MAX_CONNECTIONS, default 8). Within a queue ops start in launch order: an
 *   op starts only after the previous op of its queue has started, and, when that op is a
 *   compute kernel (gemm, attention, elementwise) of another stream, after it has ended (its
 *   blocks occupy every free SM until its last wave is dispatched). With 1 queue, kernels of all
 *   streams start in launch order.
 * - Shared resources, shared fluidly; rates are recomputed whenever the set of running ops
 *   changes. SMs: a running collective holds its NCCL channels' SMs; compute-bound kernels
 *   (gemm, attention) of the highest stream priority present share the rest equally, each at
 *   rate free_sms / (sm_count * n); lower-priority ones wait (rate 0). HBM: memory-bound kernels
 *   and device-to-device copies share it equally. NVLink: collectives of groups inside a node
 *   share it equally; the network: collectives of groups across nodes share it equally. PCIe:
 *   host-to-device and device-to-host copies each share their direction.
 * - Memory: persistent tensors live throughout; others are allocated when their producer starts
 *   and freed when their last consumer ends (or, unread, when the producer ends). At equal times
 *   frees come before allocations. An op that reads a non-persistent tensor before its producer
 *   has ended is a data race (a missing event) and fails the run (checked for a program the
 *   scheduler built, rm_sim_options.scheduler_built, only in REMORA_SELF_CHECK builds).
 * - Time is an integer number of picoseconds. Ties are broken by time, then stream priority,
 *   then a monotonic sequence number: the same program gives bit-identical results.
 *
 * Lifecycle: rm_sim_create() prepares a program (costs, dependency lists) for one hardware
 * profile; rm_sim_run() may be called any number of times; no globals, so a search can run many
 * simulations per thread. The program and the profile must outlive the sim.
 */
#ifndef REMORA_SIM_H
#define REMORA_SIM_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "remora/common.h"
#include "remora/cost.h"
#include "remora/hw.h"
#include "remora/program.h"

typedef uint64_t rm_time_ps;
#define RM_PS_PER_S 1000000000000.0
#define RM_RESULT_SCHEMA "remora.result/1"

/* Seconds to picoseconds, rounded to nearest (cost formulas give seconds). */
rm_time_ps rm_time_from_s(double s);
static inline double rm_time_to_s(rm_time_ps t)
{
	return (double)t / RM_PS_PER_S;
}

/*
 * The device allocator between tensors and the driver, for reserved memory (docs/sim.md
 * "Reserved memory"). X(NAME, name, what): the name is the scenario's scheduler.allocator value.
 */
#define RM_SIM_ALLOCATOR_MAP(X)                                                                  \
	X(EXACT, "exact", "exact: reserved = allocated")                            \
	X(PYTORCH, "pytorch", "PyTorch caching allocator")                                       \
	X(PYTORCH_EXPANDABLE, "pytorch_expandable", "PyTorch caching allocator, expandable segments") \
	X(JAX_PREALLOC, "jax", "XLA BFC allocator, preallocated fraction")                      \
	X(PLATFORM, "platform", "XLA platform allocator: reserved = allocated")

typedef enum rm_sim_allocator {
#define RM_SIM_ALLOCATOR_ENUM(id, name, what) RM_SIM_ALLOC_##id,
	RM_SIM_ALLOCATOR_MAP(RM_SIM_ALLOCATOR_ENUM)
#undef RM_SIM_ALLOCATOR_ENUM
	RM_SIM_ALLOC_COUNT
} rm_sim_allocator;

/* The scenario name of an allocator ("pytorch"), and what it is in words; "?" outside the table. */
const char *rm_sim_allocator_name(rm_sim_allocator a);
const char *rm_sim_allocator_describe(rm_sim_allocator a);
/* The allocator named name (case-insensitive); false if none is. */
bool rm_sim_allocator_from_name(const char *name, rm_sim_allocator *out);

/* XLA_PYTHON_CLIENT_MEM_FRACTION's default: 75% of the GPU's memory (docs.jax.dev,
 * gpu_memory_allocation). */
#define RM_SIM_JAX_MEM_FRACTION 0.75

/*
 * A cache of collective prices (sim/prices.c): the cost model's time alone, SMs held and network
 * shares of each collective shape (kind, bytes, group size, node span) in each context (cost
 * model, hardware profile compared byte for byte), asked once and kept across rm_sim_create calls
 * that pass it. The cost model's functions are pure (remora/cost.h), so the prices are the same
 * as asked again; a cost model's data must not change while a cache holds its prices. Not
 * thread-safe: one cache per thread. Holds at most 65536 shapes (a search sees tens); past them
 * collectives are priced by the model.
 */
typedef struct rm_sim_prices rm_sim_prices;
rm_sim_prices *rm_sim_prices_create(void);
void rm_sim_prices_destroy(rm_sim_prices *p);

/*
 * Arrays kept between simulations (a search worker's): rm_sim_destroy of a simulation made with
 * it hands its arrays back, and the next rm_sim_create takes them (grown where a program needs
 * more), so a sweep stops allocating and faulting in fresh pages for every candidate. One
 * simulation at a time: while one holds it, another made with it allocates its own. Not
 * thread-safe: one per thread. Results are the same with or without it.
 */
typedef struct rm_sim_storage rm_sim_storage;
rm_sim_storage *rm_sim_storage_create(void);
void rm_sim_storage_destroy(rm_sim_storage *st);

/*
 * A periodic stretch of a program (docs/sim.md "Periodic steps"): ops [first_op, first_op +
 * ops * iters) are iters iterations of ops ops each (a step's middle micro-batches, or a scan's
 * loop iterations), op i of iteration j the same as op i of iteration j - 1 (cost, stream,
 * tensors' sizes) with its dependencies inside the stretch moved by one iteration; the program
 * stands for a step that runs `trips` (>= iters) of them, the ops after the stretch waiting for
 * the last one. The engine simulates the iterations it has; once the whole state of the run
 * (running ops, their remaining work and rates, pending completions, waiting ops, live memory)
 * at the start of an iteration is the state at the start of the previous one moved by one
 * iteration, every later iteration repeats it exactly (a deterministic, time-invariant engine),
 * and the metrics of the step of `trips` iterations are those of the run plus trips - iters
 * periods: bit for bit what the full program gives. When no such state is reached, rm_sim_run
 * fails with RM_UNSUPPORTED and the caller builds the whole step. ops 0: no stretch.
 *
 * rm_sim_options.loops holds up to RM_SIM_MAX_LOOPS stretches in launch order, disjoint (a
 * scan's forward loop, then its backward loop); the first with ops 0 ends the list. Each is
 * proven and extended on its own: the ops after one (the next stretch among them) run the same,
 * later by its periods, so the extensions add up.
 */
typedef struct rm_sim_loop {
	int32_t first_op; /* the first op of iteration 0, in launch order */
	int32_t ops;      /* ops per iteration; 0: none */
	int32_t iters;    /* iterations the program holds */
	int64_t trips;    /* iterations of the step it stands for */
} rm_sim_loop;

#define RM_SIM_MAX_LOOPS 4

typedef struct rm_sim_options {
	int hw_queues;              /* CUDA_DEVICE_MAX_CONNECTIONS; <= 0: 8 */
	const rm_cost_model *cost;  /* NULL: rm_cost_model_default() */
	bool memory_timeline;       /* keep every memory change (for the trace) */
	int64_t memory_headroom_bytes; /* HBM the program cannot use (CUDA context, NCCL buffers,
					* workspaces: rm_memory_budget); 0: all of it */
	rm_sim_allocator allocator; /* reserved memory model; EXACT (0) costs nothing */
	double alloc_fraction;      /* JAX_PREALLOC: of HBM preallocated; <= 0: 0.75 */
	bool scheduler_built;       /* the program is rm_schedule_build's own, in memory: skip
				     * rm_program_validate (the scheduler checks its own output in
				     * every build but release, REMORA_SELF_CHECK, unless lean) and,
				     * in a release build, the run's data-race check and the cost
				     * twins' comparison; a program read from a file or made by hand
				     * is always validated */
	rm_sim_prices *prices;      /* collective prices kept between calls (one thread's); NULL:
				     * each shape is still priced once, for this call only */
	bool unpriced_cache;        /* ask the cost model for every op, no cache (the reference
				     * path tests compare the cache with) */
	rm_sim_storage *storage;    /* arrays kept between calls (one thread's); NULL: allocated
				     * for this simulation and freed with it */
	rm_sim_loop loops[RM_SIM_MAX_LOOPS]; /* periodic stretches (above); with trips > iters the
				     * metrics are the whole step's, the op times (rm_sim_op_start,
				     * the timeline) the program's own; not with a PyTorch allocator */
} rm_sim_options;

typedef struct rm_sim_metrics {
	rm_time_ps step_time;      /* end of the last op */
	rm_time_ps compute_busy;   /* time any gemm/attention/elementwise op runs */
	rm_time_ps comm_total;     /* time any collective runs */
	rm_time_ps exposed_comm;   /* time a collective runs and no compute op runs */
	rm_time_ps recompute;      /* time any recompute-phase op runs */
	rm_time_ps sm_wait;        /* collectives launched but waiting for SMs a running GEMM's CTAs
				    * hold, summed over collectives (docs/sim.md "SM grants") */
	rm_time_ps lower_bound;    /* max(compute work alone, collective work alone, critical path) */
	int64_t peak_memory_bytes; /* device */
	int64_t peak_host_bytes;
	int64_t memory_capacity_bytes; /* HBM */
	int64_t memory_usable_bytes;   /* HBM less the headroom: what fits is judged against */
	bool fits;                     /* peak_memory_bytes <= memory_usable_bytes */
	int32_t first_oom_op;      /* the op whose allocation first exceeded capacity, or -1 */
	/* Reserved memory (options.allocator): what the allocator holds from the driver, which is
	 * what nvidia-smi and torch.cuda.memory_reserved() show. EXACT: the peak above; PYTORCH*:
	 * the replay's peak of segments (or mapped pages); JAX_PREALLOC: max(fraction x HBM, peak). */
	int64_t peak_reserved_bytes;
	int64_t reserved_at_peak_bytes; /* reserved when peak_memory_bytes was reached */
	int64_t num_alloc_retries;      /* PYTORCH*: cache freed and cudaMalloc retried */
	int64_t num_ooms;               /* PYTORCH*: allocations failing even after the retry; JAX_PREALLOC:
					 * 1 when the live buffers pass the pool */
	int32_t collectives, sync_collectives; /* sync: on a compute stream */
	double model_flops;        /* for MFU: the program's, or gemm+attention FLOPs minus recompute */
	double mfu;                /* model_flops / (step time * bf16 peak) */
	double tokens_per_s;       /* per GPU; 0 when the program has no token count */
	uint64_t events;           /* op starts + op ends */
	uint64_t heap_pops;        /* completion events popped, stale ones included */
	int64_t periods_added;     /* rm_sim_options.loops: iterations added to the run's (trips -
				    * iters, summed over the stretches; 0 without one) */
	int32_t periodic_from;     /* rm_sim_options.loops: the iteration of the first stretch whose
				    * start state repeated the previous one's; -1 without a stretch */
} rm_sim_metrics;

typedef struct rm_sim rm_sim;

/*
 * Prepares a simulation of prog (validated: rm_program_validate) on hw. Computes every op's
 * duration alone with the cost model (ps, rounded to nearest) unless the op fixes time_s.
 * Returns NULL with err (RM_INVALID) if the program is invalid or a cost is not finite.
 */
rm_sim *rm_sim_create(const rm_program *prog, const rm_hw_profile *hw, const rm_sim_options *opt,
		      rm_error *err);
void rm_sim_destroy(rm_sim *sim);

/*
 * Runs the program from time 0. RM_INVALID with err on a deadlock (no event pending while ops
 * remain: names the first op that never started and what it waits for) or a data race (see
 * above). Metrics, op times and the memory timeline stay readable until the next run. With a
 * stretch of more trips than iterations (rm_sim_options.loops): RM_UNSUPPORTED when its
 * structure does not repeat or the run reached no periodic state (the caller then simulates
 * the whole step), the metrics of the whole step otherwise.
 */
rm_status rm_sim_run(rm_sim *sim, rm_error *err);

const rm_sim_metrics *rm_sim_get_metrics(const rm_sim *sim);
/* Start and end of op i in the last run (ps). */
rm_time_ps rm_sim_op_start(const rm_sim *sim, int32_t op);
rm_time_ps rm_sim_op_end(const rm_sim *sim, int32_t op);
/* When op i got its SMs and bandwidth (ps): its start, or later for a collective launched while a
 * GEMM's CTAs held the SMs it needs (docs/sim.md "SM grants"). 0 for an op out of range. */
rm_time_ps rm_sim_op_grant(const rm_sim *sim, int32_t op);
/* Duration of op i alone on the whole GPU (ps), and the SMs it holds. */
rm_time_ps rm_sim_op_solo(const rm_sim *sim, int32_t op);
int rm_sim_op_sms(const rm_sim *sim, int32_t op);
/* Busy time of stream s (sum of its ops' durations; a stream runs one op at a time). */
rm_time_ps rm_sim_stream_busy(const rm_sim *sim, int32_t stream);
/* The earliest start (ps) in the last run of an op of the program in phase, into *start (e.g.
 * RM_PPHASE_BWD: when the step's first backward op starts, the forward/backward boundary the
 * plots mark); false, *start untouched, when the program has no op in that phase. O(ops). */
bool rm_sim_phase_start(const rm_sim *sim, rm_program_phase phase, rm_time_ps *start);
/* Device memory timeline (only with options.memory_timeline): n points of (time, bytes). */
typedef struct rm_mem_point {
	rm_time_ps time;
	int64_t bytes;
} rm_mem_point;
const rm_mem_point *rm_sim_memory_timeline(const rm_sim *sim, size_t *n);

const rm_program *rm_sim_program(const rm_sim *sim);
const rm_hw_profile *rm_sim_hw(const rm_sim *sim);

/*
 * The result of the last run as JSON (docs/design.md contract 3, schema "remora.result/1"): seconds,
 * bytes, counts; sync_reasons counts the sync_reason of each collective on a compute stream
 * ("unspecified" when the program gives none). New reference; NULL never (allocation aborts).
 */
json_t *rm_sim_result_json(const rm_sim *sim);

/*
 * Writes the last run as a Chrome JSON trace (loads in ui.perfetto.dev and chrome://tracing):
 * one track (tid) per stream with an "X" slice per op (ts/dur in microseconds with picosecond
 * digits), a "C" counter track of device memory (needs options.memory_timeline), flow arrows
 * ("s"/"f") from each event's recording op to each op waiting on it, "M" metadata naming the
 * tracks. Deterministic. false with err (RM_IO) when writing fails.
 */
bool rm_sim_write_trace(const rm_sim *sim, FILE *out, rm_error *err);
/*
 * rm_sim_write_trace into the file at path through remora/file.h's writer: atomically onto a
 * regular file or a new path, straight through to a device or FIFO. false with err naming the
 * path (and the errno) when it cannot be written; the old file is then untouched.
 */
bool rm_sim_write_trace_file(const rm_sim *sim, const char *path, rm_error *err);

/*
 * What a trace shows of one run of a program: the simulated one (rm_sim_write_trace) or a
 * measured one (remora exec), so both open side by side in the same format.
 */
typedef struct rm_trace_view {
	const char *process_name;       /* name of the track group */
	const char *hardware;           /* otherData.hardware */
	bool measured;                  /* otherData.measured: true */
	const char *note_key, *note;    /* one more otherData string member, or NULL */
	int32_t n_ops;                  /* ops 0 .. n_ops-1 have a slice (0: tracks only) */
	const rm_time_ps *start, *end;  /* per op, ps */
	const char *time_arg;           /* name of a per-op duration in args ("solo_us") */
	const rm_time_ps *time_arg_ps;  /* its values, ps */
	const int *sms_held;            /* per op, or NULL to leave it out */
	const rm_time_ps *granted;      /* per op, when it got its SMs (>= start; collectives'
					 * args.sm_wait_us), or NULL to leave it out */
	const rm_mem_point *memory;     /* the device memory counter */
	size_t n_memory;
} rm_trace_view;

/*
 * Writes a Chrome JSON trace of a run of prog as rm_sim_write_trace describes (tracks per stream,
 * slices, flow arrows from each event's recorder to its waiters on other streams, the memory
 * counter). Deterministic. false with err (RM_IO) when writing fails.
 */
bool rm_trace_write(const rm_program *prog, const rm_trace_view *v, FILE *out, rm_error *err);

/*
 * A synthetic FSDP-like program for benchmarks: n_layers layers of forward and backward GEMMs,
 * elementwise ops and attention on a compute stream, all-gathers (prefetched one layer ahead)
 * and reduce-scatters on a collective stream, offload copies on a copy stream, with events and
 * tensors. About 24 ops per layer.
 */
rm_program *rm_sim_synthetic_program(int32_t n_layers);

typedef struct rm_sim_bench_result {
	int32_t ops;
	uint64_t events;     /* per run */
	int runs;
	double seconds;      /* wall time of all runs (engine only, no setup) */
	double events_per_s;
	double ns_per_event;
	double step_time_s;  /* simulated, as a sanity figure */
} rm_sim_bench_result;

/* Times rm_sim_run on a synthetic program of about n_ops ops, repeated for at least min_s. */
rm_status rm_sim_bench_engine(int32_t n_ops, double min_s, rm_sim_bench_result *out,
			      rm_error *err);
/* The same with options (NULL: defaults), e.g. an allocator model to time its replay. */
rm_status rm_sim_bench_engine_with(int32_t n_ops, double min_s, const rm_sim_options *opt,
				   rm_sim_bench_result *out, rm_error *err);

/*
 * Step breakdown (sim/breakdown.c; docs/sim.md "Breakdown"): where the wall-clock time of the last
 * run went, by kernel class, and what was live at the device memory peak, by tensor role.
 *
 * Time: every instant of [0, step time) goes to exactly one class. While compute ops (gemm,
 * attention, elementwise) run, the instant is split equally between them, each share going to
 * its op's class; else, while collectives run, between them (exposed communication); else,
 * while copies run, between them (exposed copies); else it is idle (launch and host gaps,
 * waits). Shares are integer picoseconds (remainders go to the first classes present in class
 * order), so the walls sum exactly to the step time. An op's class: phase recompute ->
 * recompute (any kind); else gemm -> gemm; attention -> attention_bwd when backward, else
 * attention_fwd; elementwise -> optimizer in phase optimizer, else memory_bound; collective ->
 * exposed_comm; copy -> copies.
 */
#define RM_BREAKDOWN_CLASS_MAP(X)                                                              \
	X(GEMM, "gemm")                                                                        \
	X(ATTENTION_FWD, "attention_fwd")                                                      \
	X(ATTENTION_BWD, "attention_bwd")                                                      \
	X(MEMORY_BOUND, "memory_bound")                                                        \
	X(OPTIMIZER, "optimizer")                                                              \
	X(RECOMPUTE, "recompute")                                                              \
	X(EXPOSED_COMM, "exposed_comm")                                                        \
	X(COPIES, "copies")                                                                    \
	X(IDLE, "idle")
#define RM_BREAKDOWN_CLASS_ENUM(name, str) RM_BD_##name,
typedef enum rm_breakdown_class {
	RM_BREAKDOWN_CLASS_MAP(RM_BREAKDOWN_CLASS_ENUM) RM_BD_COUNT
} rm_breakdown_class;
#undef RM_BREAKDOWN_CLASS_ENUM
/* "gemm", "attention_fwd", ... (NULL out of range). */
const char *rm_breakdown_class_name(rm_breakdown_class c);

typedef struct rm_breakdown_time {
	rm_time_ps wall;   /* attributed wall-clock (see above); the classes sum to step_time */
	rm_time_ps busy;   /* time at least one op of the class runs (overlapped or not) */
	rm_time_ps solo;   /* sum of its ops' durations alone on the whole GPU */
	int32_t ops;       /* ops of the class (zero-duration ones included) */
	double flops;      /* gemm and attention FLOPs (2mnk; attention as rm_cost_attention_flops) */
	double bytes;      /* HBM bytes (elementwise read + written; gemm A, B, C; attention q, k,
			    * v, o and gradients); collectives: bus bytes, size * nccl-tests busBW
			    * factor; copies: bytes copied */
	double roofline_s; /* sum over its ops of max(FLOPs / dense tensor peak of the dtype
			    * (bf16_TFLOPs; fp8_TFLOPs for fp8; tf32_TFLOPs for fp32), bytes /
			    * hbm_peak_GBps); collectives bus bytes / nvlink_GBps (nic_GBps across
			    * nodes); copies bytes / pcie_GBps (d2d 2 * bytes / hbm_peak_GBps) */
} rm_breakdown_time;

typedef struct rm_breakdown {
	rm_time_ps step_time;
	rm_breakdown_time time[RM_BD_COUNT];
	/* Memory: the first instant at which live device tensors peak. Tensors live as the engine
	 * keeps them (persistent ones throughout, others from their producer's start to their last
	 * consumer's end, frees before allocations at equal times); a tensor of a zero-duration
	 * lifetime is not counted. */
	rm_time_ps peak_time;
	int64_t peak_tensor_bytes;             /* sum of role_bytes */
	int64_t role_bytes[RM_ROLE_COUNT];     /* device tensors live at peak_time, by role */
	bool has_budget;                       /* the fixed costs below come from a budget */
	rm_memory_budget budget;               /* CUDA context, NCCL buffers, cuBLASLt workspace */
	int64_t fixed_bytes;                   /* budget.headroom_bytes (0 without a budget) */
	int64_t peak_total_bytes;              /* peak_tensor_bytes + fixed_bytes */
} rm_breakdown;

/* What a breakdown is computed from: one run of a program, simulated or measured. */
typedef struct rm_breakdown_input {
	const rm_program *prog;         /* validated */
	const rm_hw_profile *hw;        /* peaks for the roofline bounds */
	const rm_time_ps *start, *end;  /* per op, ps; the step is [0, latest end) */
	const rm_time_ps *solo;         /* per op duration alone, ps, or NULL (solo sums 0) */
	const rm_memory_budget *budget; /* fixed memory costs (rm_scenario_resolved.memory), or NULL */
} rm_breakdown_input;

/*
 * Fills out from in (rules above). Linear in ops and tensors (radix sorts). RM_INVALID with err
 * when an op ends before it starts (naming it).
 */
rm_status rm_breakdown_compute(const rm_breakdown_input *in, rm_breakdown *out, rm_error *err);
/*
 * rm_breakdown_compute of the last run of sim (its op times and solo durations): works after the
 * fact, so rm_sim_run pays nothing for it. RM_INVALID with err when sim has not completed a run.
 */
rm_status rm_sim_breakdown(const rm_sim *sim, const rm_memory_budget *budget, rm_breakdown *out,
			   rm_error *err);
/*
 * The breakdown as JSON (the "breakdown" member of a remora.result/1 document when asked for):
 * step_time_ps, "time": {class: {wall_ps, wall_s, share, busy_s, solo_s, ops, flops, bytes,
 * roofline_s, achieved, achieved_unit}}, "memory": {at_s, at_ps, tensor_bytes, by_role: {role:
 * bytes}, fixed: {...}, total_bytes}. achieved: FLOPs / wall in TFLOP/s for gemm, attention and
 * recompute; bytes / wall in TB/s for memory_bound and optimizer; bytes / busy in GB/s (busBW)
 * for exposed_comm and copies; null for idle or a zero denominator. New reference.
 */
json_t *rm_breakdown_json(const rm_breakdown *bd);
/* The achieved rate of class c as rm_breakdown_json defines it, and its unit; false when none. */
bool rm_breakdown_achieved(const rm_breakdown *bd, rm_breakdown_class c, double *value,
			   const char **unit);

#endif /* REMORA_SIM_H */
