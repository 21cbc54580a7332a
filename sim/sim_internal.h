/*
 * Private to sim/: the engine's records, shared by engine.c, result.c and trace.c.
 */
#ifndef REMORA_SIM_INTERNAL_H
#define REMORA_SIM_INTERNAL_H

#include <assert.h>

#include "remora/sim.h"
#include "allocator.h"

__extension__ typedef unsigned __int128 sim_u128;

/* Remaining work is kept in 1/SIM_WORK_SCALE picoseconds at full rate. */
#define SIM_WORK_SCALE 256u
/* Longest op duration accepted (10^4 s), so that work * SCALE fits in 64 bits. */
#define SIM_MAX_SOLO_PS UINT64_C(10000000000000000)

enum sim_op_flags {
	SIM_F_COMPUTE = 1u << 0,   /* gemm, attention, elementwise: counts as compute */
	SIM_F_COLL = 1u << 1,      /* collective */
	SIM_F_RECOMPUTE = 1u << 2, /* phase recompute */
	SIM_F_QBLOCK = 1u << 3,    /* holds its hardware queue until it ends (compute kernels) */
	SIM_F_TILED = 1u << 4,     /* an SM kernel with tiles: its CTAs hold the SMs wave by wave */
};

/* What never changes between runs. */
typedef struct sim_op {
	rm_time_ps solo;      /* duration alone, ps */
	uint32_t succ_at;     /* stream and event successors: sim->succ[succ_at .. +succ_n) */
	uint32_t succ_n;
	uint32_t mem_at;      /* tensors: n_alloc outputs (allocated at the start; those no op
			       * reads released at the end), then n_race inputs (checked produced
			       * at the start, released at the end by their last reader) */
	uint32_t n_alloc, n_race;
	int32_t qnext;        /* next op of the same hardware queue on another stream, or -1 */
	int32_t stream;
	int32_t init_pending; /* stream predecessor + waits + queue predecessor */
	uint16_t sms;         /* SMs held while running */
	uint8_t res;          /* rm_cost_resource */
	uint8_t flags;        /* sim_op_flags */
	uint32_t prio;        /* rank of the stream priority: 0 is the highest */
	union {
		uint32_t tiles;    /* GEMMs: output tiles, for waves on the SMs left; 0: fluid */
		uint32_t hbm_GBps; /* collectives: HBM bandwidth drawn while running, GB/s */
	};
} sim_op;
static_assert(sizeof(sim_op) == 56, "sim_op is a hot record: keep it at 56 bytes");

/* Per op state of a run. */
typedef struct sim_state {
	uint64_t work;    /* remaining, ps * SIM_WORK_SCALE at full rate */
	rm_time_ps last;  /* time work was last brought up to date */
	uint32_t num, den; /* current rate num/den of full speed */
	uint32_t gen;     /* bumps invalidate scheduled completions */
	int32_t pending;  /* unmet dependencies */
	int32_t slot;     /* index in sim->running while running, else -1 */
	uint32_t sm_wait; /* 1 while launched but waiting for SMs a GEMM's CTAs hold (a collective) */
} sim_state;
static_assert(sizeof(sim_state) == 40, "sim_state is a hot record: keep it at 40 bytes");

/* A scheduled completion, or the grant of SMs to a waiting collective (its sim_state.sm_wait
 * set when popped). Ordered by time, then seq (priority rank << 40 | push counter). */
typedef struct sim_event {
	rm_time_ps time;
	uint64_t seq;
	int32_t op;
	uint32_t gen;
} sim_event;
static_assert(sizeof(sim_event) == 24, "sim_event is a hot record: keep it at 24 bytes");

/* One collective shape's price (sim/prices.c). */
typedef struct rm_sim_price {
	double time_s; /* cm->op_time_s */
	int sms;       /* cm->sms_held */
	bool has_net;  /* cm->net_load returned true (net is then its shares) */
	rm_net_load net;
} rm_sim_price;
/* The context index of (cm, hw) in p, added when new. */
int32_t sim_prices_context(rm_sim_prices *p, const rm_cost_model *cm, const rm_hw_profile *hw);
/* The price of a model-priced collective op (op->kind RM_COST_COLLECTIVE) in context ctx, asked
 * of cm on hw (the context's) the first time, or into scratch when the cache is full; valid
 * until the next call. */
const rm_sim_price *sim_prices_get(rm_sim_prices *p, int32_t ctx, const rm_cost_model *cm, const rm_cost_op *op,
				   const rm_hw_profile *hw, rm_sim_price *scratch);

/* The lower bound's share of network level lv that op i fills, ppm (net_share set): its own,
 * or the whole NIC for an op without shares (it is slowed by the NIC's load). The engine's
 * bound and a periodic stretch's extension of it weigh the network's work alike with it. */
static inline uint32_t sim_net_ppm(const uint32_t *net_share, int32_t i, int lv)
{
	uint32_t ppm = net_share[(size_t)i * RM_NET_LEVELS + lv];
	return ppm ? ppm : lv == 0 ? 1000000u : 0u;
}

/* A periodic stretch's analysis and its run's snapshots (sim/loop.c). */
typedef struct sim_loop sim_loop;

struct rm_sim {
	const rm_program *prog;
	rm_sim_storage *storage; /* where the arrays come from and go back to; NULL: malloc and free */
	const rm_hw_profile *hw;
	rm_sim_options opt;
	int32_t n_ops, n_streams, n_tensors;
	uint32_t sm_count;
	uint32_t n_prio;

	/* static */
	sim_op *ops;
	int32_t *succ;
	int32_t *mem;            /* tensor lists */
	int64_t *tensor_bytes;
	uint8_t *tensor_host;    /* 1 if the tensor lives in host memory */
	int32_t *tensor_consumers;
	int64_t persistent_device, persistent_host;
	rm_time_ps lower_bound;
	int32_t *stream_queue;
	sim_alloc *alloc;        /* options.allocator PYTORCH*: the replay, else NULL */
	int32_t *tensor_block;   /* with alloc: each live device tensor's block */
	int32_t param_stream;    /* with alloc: the stream persistent tensors are allocated on */

	/* a run */
	sim_state *st;
	rm_time_ps *op_start, *op_end;
	rm_time_ps *op_grant;    /* when a collective that waited for SMs got them, else 0 */
	int32_t *tensor_left;
	uint8_t *tensor_state;   /* 0 not allocated, 1 producer running, 2 produced, 3 freed */
	sim_event *heap;
	size_t heap_n, heap_cap;
	uint64_t *ready;         /* min-heap of prio << 32 | op */
	size_t ready_n;
	int32_t *running;
	int32_t n_running;
	int32_t *sm_waiters;     /* collectives waiting for SMs, in launch order */
	int32_t n_sm_wait;
	int32_t n_sm_wait_sched; /* the first n_sm_wait_sched have their grant in the heap */
	uint32_t n_run_tiles;    /* running SM kernels with tiles (GEMMs that run in waves) */
	uint32_t run_count[RM_RES_COUNT];
	uint32_t n_run_compute, n_run_coll, n_run_recompute;
	uint32_t held_sms;
	uint32_t hbm_GBps;   /* HBM peak, GB/s (whole) */
	uint32_t drawn_hbm;  /* HBM GB/s the running collectives draw */
	uint32_t slow_ppm;   /* calibrated GEMM slowdown per SM held, x 1e6; 0: count waves */
	/* with a fabric (rm_cost_model.net_load): per op RM_NET_LEVELS shares of the NIC and the
	 * uplinks in parts per million (0: not drawn), else NULL and the network is shared equally */
	uint32_t *net_share;
	uint64_t seq;
	int64_t mem_device, mem_host;
	rm_time_ps *stream_busy;
	rm_mem_point *timeline;
	size_t tl_n, tl_cap;
	int32_t completed;
	bool ran;
	bool check_races;        /* start_op checks each input was produced (not for a program the
				  * scheduler built, in a release build: REMORA_SELF_CHECK) */
	rm_sim_metrics m;
	/* options.loops: NULL without one; loop_end the last one's end (0 without), loop_hi the
	 * highest op of the stretches whose dependencies have started to be met (release keeps
	 * it) */
	sim_loop *loop;
	int32_t loop_end, loop_hi;
	int32_t loop_watch;      /* the op whose start sim_loop_at waits for; -1: none */
};

/* sim/loop.c. sim_loop_create: after the successor lists (stream_last: each stream's last op,
 * -1 none), the stretches' structure (NULL when
 * options.loops has none with more trips than iterations). sim_loop_lower_bound: the step's
 * lower bound from the program's longest paths est (launch order; extended in place) and work per resource
 * (res_work, net_work in ps x ppm per level); false when the stretch's paths do not repeat (the
 * stretch is then not used). sim_loop_reset, sim_loop_at (after an instant's starts: snapshots
 * and compares at each iteration's first op), sim_loop_finish (adds the periods, or
 * RM_UNSUPPORTED). */
sim_loop *sim_loop_create(rm_sim *sim, const int32_t *stream_last);
void sim_loop_destroy(sim_loop *l);
bool sim_loop_lower_bound(rm_sim *sim, rm_time_ps *est, const rm_time_ps *res_work,
			  const sim_u128 *net_work, rm_time_ps *lower_bound);
/* Whether the stretches' structure and lower bounds repeat (a run is then worth trying). */
bool sim_loop_usable(const rm_sim *sim);
/* The end of the last stretch when they are usable (loop_end), else 0. */
int32_t sim_loop_reach(const rm_sim *sim);
void sim_loop_disable(rm_sim *sim);
void sim_loop_reset(rm_sim *sim);
void sim_loop_at(rm_sim *sim, rm_time_ps t);
rm_status sim_loop_finish(rm_sim *sim, rm_error *err);

#endif /* REMORA_SIM_INTERNAL_H */
