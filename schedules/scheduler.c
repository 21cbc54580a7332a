/*
 * The XLA-style scheduler (remora/schedule.h): computations as chains of compute slots with
 * collective windows, a bottom-up latency-hiding sweep per computation, and the emission of the
 * whole step as a schedule program.
 */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "remora/schedule.h"
#include "schedules/sched_internal.h"
#include "schedules/fusion.h"

/* XLA's default LHS cost units when no profile is given (docs/reference/seed.md mechanism 6;
 * ApproximateLatencyEstimator and GpuLatencyEstimator in xla/service/latency_hiding_scheduler.cc
 * and xla/service/gpu/gpu_latency_hiding_scheduler.cc: kLowCost 1, kMediumCost 1000, kHighCost
 * and kHighLatency 5000). */
#define UNITS_ASYNC_COLLECTIVE 5000.0
#define UNITS_LIBRARY_CALL 1000.0 /* cuBLAS / cuDNN custom calls */
#define UNITS_LOOP_FUSION 1000.0
#define UNITS_LOW 1.0 /* reduction (input) fusions, the while op, anything else */
/* The base of XLA's memory limit (docs/reference/seed.md mechanism 4): JAX passes the BFC
 * allocator's limit, XLA_PYTHON_CLIENT_MEM_FRACTION (default 0.75) of device memory, as the
 * module's device_memory_size (xla/python/py_client.cc); with XLA_PYTHON_CLIENT_ALLOCATOR=platform
 * nothing is passed and GetSchedulerMemoryLimit takes 80% of device memory
 * (xla/service/gpu/gpu_hlo_schedule.cc). */
#define JAX_MEM_FRACTION 0.75
#define XLA_DEVICE_MEMORY_FRACTION 0.8

static const char *const reason_names[RM_SYNC_REASON_COUNT] = {
	[RM_SYNC_NONE] = "none",
	[RM_SYNC_DISABLED] = "disabled",
	[RM_SYNC_MEMORY_PEAK_OVER_LIMIT] = "memory_peak_over_limit",
	[RM_SYNC_DECREASE_MEMORY_OVER_LIMIT] = "decrease_memory_over_limit",
	[RM_SYNC_NOTHING_TO_OVERLAP] = "nothing_to_overlap",
	[RM_SYNC_NO_LHS] = "no_latency_hiding_scheduler",
	[RM_SYNC_OVERLAP_LIMIT] = "overlap_limit",
};

const char *rm_sched_mode_name(rm_sched_mode mode)
{
	return mode == RM_SCHED_XLA ? "xla" : mode == RM_SCHED_IDEAL ? "ideal" : mode == RM_SCHED_FSDP2 ? "fsdp2" : "unknown";
}

const char *rm_sync_reason_name(rm_sync_reason reason)
{
	return (unsigned)reason < RM_SYNC_REASON_COUNT ? reason_names[reason] : "unknown";
}

rm_schedule_config rm_schedule_config_default(const rm_workload *wl, const rm_remat_policy *policy,
					      const rm_hw_profile *hw)
{
	rm_schedule_config c = {
		.wl = wl,
		.policy = policy,
		.flags = rm_xla_flags_default(),
		.hw = hw,
		.fsdp_nodes = 1,
		.scan = true,
		.mode = RM_SCHED_XLA,
		.prefetch_depth = 1,
		.lhs_cost = RM_LHS_COST_XLA_DEFAULT,
		.reshard_after_forward = true,
		.prevent_cse = true,
	};
	return c;
}

void rm_schedule_report_finish(rm_schedule_report *rep)
{
	if (rep)
		rm_remat_plan_finish(&rep->plan);
}

/* ---- computations (the types are in sched_internal.h) ----------------------------------- */

static const rm_coll ckind_coll[CK_COUNT] = {RM_COLL_ALL_GATHER, RM_COLL_REDUCE_SCATTER,
					     RM_COLL_ALL_REDUCE};
static const rm_xla_coll_kind ckind_xla[CK_COUNT] = {RM_XLA_ALLGATHER, RM_XLA_REDUCESCATTER,
						     RM_XLA_ALLREDUCE};

static void comp_finish(comp *c)
{
	free(c->slots);
	free(c->colls);
	free(c->temps);
	free(c->at_first);
	free(c->at_list);
	free(c->lx_first);
	free(c->lx_list);
	memset(c, 0, sizeof(*c));
}

/*
 * The positions of the op slots of layer bl, micro-batch mb of a chain, ascending, in *n. The
 * index is rebuilt when slots were added since the last call (counting sort by layer and
 * micro-batch: O(slots)), so the per-layer passes below visit a layer's own slots instead of the
 * whole chain and building an unrolled step stays linear in its layers.
 */
static const int *comp_layer_slots(comp *c, int bl, int mb, int *n)
{
	if (c->lx_n != c->n || !c->lx_first) {
		int layers = 0, mbs = 0;
		for (int j = 0; j < c->n; j++)
			if (c->slots[j].kind == SLOT_OP && c->slots[j].part == PART_LAYER) {
				if (c->slots[j].body_layer >= layers)
					layers = c->slots[j].body_layer + 1;
				if (c->slots[j].mb >= mbs)
					mbs = c->slots[j].mb + 1;
			}
		free(c->lx_first);
		free(c->lx_list);
		size_t keys = (size_t)layers * (size_t)mbs;
		c->lx_first = rm_new(int, keys + 1);
		c->lx_list = rm_new(int, (size_t)c->n + 1);
		for (int j = 0; j < c->n; j++)
			if (c->slots[j].kind == SLOT_OP && c->slots[j].part == PART_LAYER)
				c->lx_first[(size_t)c->slots[j].body_layer * (size_t)mbs + (size_t)c->slots[j].mb + 1]++;
		for (size_t k = 0; k < keys; k++)
			c->lx_first[k + 1] += c->lx_first[k];
		int *fill = rm_new(int, keys + 1);
		memcpy(fill, c->lx_first, (keys + 1) * sizeof(int));
		for (int j = 0; j < c->n; j++)
			if (c->slots[j].kind == SLOT_OP && c->slots[j].part == PART_LAYER)
				c->lx_list[fill[(size_t)c->slots[j].body_layer * (size_t)mbs + (size_t)c->slots[j].mb]++] = j;
		free(fill);
		c->lx_n = c->n;
		c->lx_layers = layers;
		c->lx_mbs = mbs;
	}
	if (bl < 0 || bl >= c->lx_layers || mb < 0 || mb >= c->lx_mbs) {
		*n = 0;
		return c->lx_list;
	}
	size_t key = (size_t)bl * (size_t)c->lx_mbs + (size_t)mb;
	*n = c->lx_first[key + 1] - c->lx_first[key];
	return c->lx_list + c->lx_first[key];
}

static int comp_add_slot(comp *c, slot s)
{
	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 64;
		c->slots = rm_xrealloc(c->slots, (size_t)c->cap * sizeof(slot));
	}
	c->slots[c->n] = s;
	return c->n++;
}

static coll *comp_add_coll(comp *c)
{
	if (c->nc == c->ccap) {
		c->ccap = c->ccap ? 2 * c->ccap : 32;
		c->colls = rm_xrealloc(c->colls, (size_t)c->ccap * sizeof(coll));
	}
	coll *k = &c->colls[c->nc++];
	memset(k, 0, sizeof(*k));
	k->start_pos = k->done_pos = -1;
	return k;
}

/* ---- context ----------------------------------------------------------------------------- */

#define MAX_GROUPS 16

typedef struct weight_groups {
	int n;
	int64_t elems[MAX_GROUPS];
	int of_op[96]; /* group of each op of the layer graph, -1 if none */
} weight_groups;

/* ---- the backward's gradient flow --------------------------------------------------------- */

/*
 * The gradients of one graph's backward (reverse-mode differentiation over its values): a
 * backward op of forward op f reads the gradient of f's output and writes those of f's inputs.
 * A value several forward ops read (the residual stream; a norm's output feeding three
 * projections) gets the sum of their gradients: each backward op that adds to it reads the
 * partial sum so far and leaves the new one (XLA's and autograd's out-of-place accumulation),
 * so a gradient lives until the last op that reads it, not only until the next op.
 * - f has one data-gradient op (a projection's dgrad, a norm's or an elementwise op's bwd, the
 *   fused attention backward): it writes the gradients of all of f's inputs, one tensor (the
 *   combined dQ, dK, dV; a residual add's two).
 * - f has several (the unfused attention's dgrad_query, dgrad_key; dgrad_probs, dgrad_value):
 *   the k-th writes the gradient of f's k-th input.
 * - A weight gradient (dW = X^T dY) reads the dY its data gradient reads and writes none.
 * - Transformer Engine's cast of dY to FP8 (".grad_fp8") reads dY; f's dgrad and wgrad then read
 *   the cast.
 * - A gradient of a value an FP8 cast of the forward wrote (no_grad) is that of the cast's input.
 * Resolved once in graph order, by op; the emitter, the scheduler's memory tracking and the
 * backward's dependency graph all read that resolution (every op follows what it reads: the
 * unrolled backward's list schedule keeps these edges).
 */
typedef struct grad_flow {
	const rm_graph *g;
	/* by op, resolved in graph order: the backward op whose output b reads as dY ([n_ops]; -1:
	 * the gradient entering the graph), the ops whose partial sums b adds to ([n_ops *
	 * RM_OP_MAX_INPUTS], -1 ends), and the op whose output is the graph input's gradient (what
	 * the layer below reads; -1 none) */
	int *dy_src, *acc_src;
	int input_writer;
} grad_flow;

/* Whether backward op op is Transformer Engine's cast of dY to FP8 (emit_backward's ".grad_fp8"). */
static bool is_grad_cast(const rm_op *op)
{
	size_t n = strlen(op->name);
	return n > 9 && strcmp(op->name + n - 9, ".grad_fp8") == 0;
}

/* Value v, or the input of the forward FP8 cast (no_grad) that wrote it, through such casts. */
static int grad_target(const rm_graph *g, const int *producer, int v)
{
	for (int hop = 0; hop < g->n_ops && v >= 0 && producer[v] >= 0; hop++) {
		const rm_op *p = &g->ops[producer[v]];
		if (!p->no_grad || p->n_inputs == 0)
			break;
		v = p->inputs[0];
	}
	return v;
}

/* g's gradient flow (grad_flow): which gradient each backward op reads and which it writes. */
static void grad_flow_build(grad_flow *fl, const rm_graph *g)
{
	int n = g->n_ops;
	fl->g = g;
	/* per backward op b: the value whose gradient it reads, the FP8 cast of that gradient (an
	 * op of the same forward op) it reads instead, the values whose gradients it writes */
	int *dy = rm_new(int, (size_t)n + 1), *dy_cast = rm_new(int, (size_t)n + 1);
	int *dx_all = rm_new(int, (size_t)n * RM_OP_MAX_INPUTS + 1);
	int *producer = rm_new(int, (size_t)g->n_values + 1);
	for (int v = 0; v < g->n_values; v++)
		producer[v] = -1;
	for (int i = 0; i < g->n_fwd_ops; i++)
		for (int k = 0; k < g->ops[i].n_outputs; k++)
			if (g->ops[i].outputs[k] >= 0 && g->ops[i].outputs[k] < g->n_values)
				producer[g->ops[i].outputs[k]] = i;
	for (int b = 0; b < n; b++) {
		dy[b] = dy_cast[b] = -1;
		int *dx = &dx_all[(size_t)b * RM_OP_MAX_INPUTS];
		for (int k = 0; k < RM_OP_MAX_INPUTS; k++)
			dx[k] = -1;
		const rm_op *op = &g->ops[b];
		int f = op->fwd_op;
		if (b < g->n_fwd_ops || f < 0 || f >= g->n_fwd_ops)
			continue;
		const rm_op *fo = &g->ops[f];
		dy[b] = fo->n_outputs > 0 ? fo->outputs[0] : -1;
		bool cast = is_grad_cast(op);
		/* f's data-gradient ops other than the cast: how many, and b's place among them */
		int n_dg = 0, k_dg = -1;
		for (int c = g->n_fwd_ops; c < n; c++) {
			const rm_op *co = &g->ops[c];
			if (co->fwd_op != f)
				continue;
			if (is_grad_cast(co)) {
				if (c < b && !cast)
					dy_cast[b] = c;
				continue;
			}
			if (co->phase == RM_PHASE_BWD_WGRAD)
				continue;
			if (c == b)
				k_dg = n_dg;
			n_dg++;
		}
		if (cast || op->phase == RM_PHASE_BWD_WGRAD || k_dg < 0)
			continue;
		int nd = 0;
		for (int i = 0; i < fo->n_inputs; i++) {
			if (n_dg > 1 && i != k_dg)
				continue;
			int v = fo->inputs[i] >= 0 && fo->inputs[i] < g->n_values ? grad_target(g, producer, fo->inputs[i]) : -1;
			bool seen = v < 0;
			for (int j = 0; j < nd && !seen; j++)
				seen = dx[j] == v;
			if (!seen)
				dx[nd++] = v;
		}
	}
	/* graph order: who last wrote each value's gradient */
	fl->dy_src = rm_new(int, (size_t)n + 1);
	fl->acc_src = rm_new(int, (size_t)n * RM_OP_MAX_INPUTS + 1);
	int *writer = producer; /* reused: per value, the op holding its gradient so far, -1 */
	for (int v = 0; v < g->n_values; v++)
		writer[v] = -1;
	for (int b = 0; b < n; b++) {
		fl->dy_src[b] = -1;
		int *acc = &fl->acc_src[(size_t)b * RM_OP_MAX_INPUTS];
		for (int k = 0; k < RM_OP_MAX_INPUTS; k++)
			acc[k] = -1;
		if (b < g->n_fwd_ops)
			continue;
		fl->dy_src[b] = dy_cast[b] >= 0 ? dy_cast[b] : dy[b] >= 0 ? writer[dy[b]] : -1;
		const int *dx = &dx_all[(size_t)b * RM_OP_MAX_INPUTS];
		int na = 0;
		for (int k = 0; k < RM_OP_MAX_INPUTS && dx[k] >= 0; k++) {
			int w = writer[dx[k]];
			bool seen = w < 0;
			for (int q = 0; q < na && !seen; q++)
				seen = acc[q] == w;
			if (!seen)
				acc[na++] = w;
		}
		for (int k = 0; k < RM_OP_MAX_INPUTS && dx[k] >= 0; k++)
			writer[dx[k]] = b;
	}
	fl->input_writer = g->input >= 0 && g->input < g->n_values ? writer[g->input] : -1;
	free(producer);
	free(dy);
	free(dy_cast);
	free(dx_all);
}

static void grad_flow_finish(grad_flow *fl)
{
	free(fl->dy_src);
	free(fl->acc_src);
	memset(fl, 0, sizeof(*fl));
}

typedef struct ctx {
	const rm_schedule_config *cfg;
	const rm_workload *wl;
	const rm_graph *layer, *embed, *head;
	rm_remat_plan plan;
	rm_remat_plan head_plan, embed_plan; /* everything saved */
	int L, A, k; /* layers, micro-batches, layers per scan body */
	int ag_ahead; /* layers a pipelined gather runs ahead: k (XLA), the prefetch depth (ideal) */
	int psize, gsize;
	int lpsize; /* bytes per layer weight as gathered: psize, 1 with fp8_all_gather */
	int recompute_layers;   /* layers 0 .. n-1 follow the policy, the others keep everything; 0: all */
	rm_remat_plan plan_keep; /* the plan of the layers that keep everything (recompute_layers > 0) */
	int64_t limit;
	int64_t remat_limit; /* HloRematerialization's: limit less the entry's outputs (bytes) */
	int64_t stacks;  /* per micro-batch: L x (saved + carry) */
	int64_t grad_live; /* gradient shards, live from the backward to the optimizer (bytes) */
	weight_groups ag, rs;
	int64_t norm_elems; /* replicated norm weights per layer (all-reduced) */
	int last_wgrad;     /* the layer graph's last weight-gradient op (data parallelism without
			     * FSDP all-reduces a layer's gradients after it) */
	/* XLA under data parallelism without FSDP: SPMD all-reduces each weight gradient and
	 * AllReduceCombiner merges them up to xla_gpu_all_reduce_combine_threshold_bytes, so a
	 * layer's gradients are all-reduced in these groups (in the backward's order), each once
	 * its last weight gradient has run; ar_nops counts the group's weight gradients; the group
	 * of the last weight gradient (ar_last_group) also carries the layer's other parameters
	 * (norms). ar.n 0: one all-reduce of the layer after last_wgrad. */
	weight_groups ar;
	int ar_nops[MAX_GROUPS];
	int ar_last_group;
	grad_flow gflow;    /* the layer graph's (built once the contexts are complete) */
	grad_flow embed_flow, head_flow; /* the embedding's and the head's (x itself only) */
	bool pipe_ag, pipe_rs, pipe_ar;
	bool barrier; /* prevent_cse's optimization barrier fences the backward's gathers */
	/* data parallelism across FSDP groups (HSDP, ZeRO-1/2, DDP): each gradient reduction over
	 * the FSDP group is followed by one over the replica group of R GPUs on rep_nodes nodes, an
	 * all-reduce (zero 3: the optimizer state is replicated across replicas) or a
	 * reduce-scatter to the optimizer's slice (zero 1, 2), and with zero 1, 2 the updated
	 * slices are all-gathered across the replicas after the optimizer step */
	int R, rep_nodes;
	bool rep_rs;
	const rm_cost_model *cost;
	rm_schedule_report *rep;
	/* fused memory-bound kernels (schedules/fusion.h), once per plan: the layer's forward and
	 * backward and its recompute pass under plan [0] and plan_keep [1]; embedding and head */
	bool fuse;
	sched_fusion fu_layer[2], fu_rec[2], fu_embed, fu_head;
	/* async tensor parallelism (train.async_tp): each layer-graph op's part in a
	 * micro-pipelined collective (ATP_*), and for a user of a fused all-gather the gather */
	int atp_n;      /* steps: the tensor-parallel degree; 0: off */
	int *atp_role;  /* [layer->n_ops] ATP_*, NULL when off */
	int *atp_src;   /* [layer->n_ops] ATP_AG_USER: its all-gather op; else -1 */
	/* a mixture of experts whose first n_dense layers are dense (DeepSeek-V3's
	 * first_k_dense_replace): those run the workload's dense_layer graph, whose own fields above
	 * (layer, plan, plan_keep, ag, rs, norm_elems, last_wgrad, the fusions) live in a copy of this
	 * context; kinds[0] is the MoE layers' context, kinds[1] the dense layers' (layer_ctx) */
	int n_dense;
	const struct ctx *kinds[2];
} ctx;

/* The context whose layer graph layer l runs (x itself when every layer is alike). A scan body's
 * layers are the MoE ones: build_body works on a view of x with n_dense 0. */
static const ctx *layer_ctx(const ctx *x, int l)
{
	if (x->n_dense <= 0)
		return x;
	return x->kinds[l >= 0 && l < x->n_dense ? 1 : 0];
}

/* The first layer a scan runs: with dense first layers they run unrolled before the scan over
 * the MoE layers (MaxText scans the two kinds apart); 0 when unrolled or all alike. */
static int first_scanned(const ctx *x)
{
	return x->cfg->scan ? x->n_dense : 0;
}

/*
 * Parts of async TP (PyTorch's micro-pipelined TP: torch/distributed/_symmetric_memory
 * fused_all_gather_matmul and fused_matmul_reduce_scatter, which torch._inductor's
 * micro_pipeline_tp pass substitutes for all-gather -> matmul and matmul -> reduce-scatter):
 * - ATP_AG: a forward sequence-parallel all-gather feeding projections: tp - 1 copy-engine
 *   copies of one peer's shard each, in turn, on their own stream;
 * - ATP_AG_USER: a projection reading it: tp chunk GEMMs of tokens / tp rows, chunk i after copy
 *   i (chunk 0 is the local shard); consecutive users run chunk by chunk together, as the fused
 *   op takes them as one list of weights;
 * - ATP_RS_SRC: a projection whose output is reduce-scattered: tp chunk GEMMs, one per
 *   destination's tokens, each remote chunk copied to its owner as soon as it is done, the
 *   local chunk last;
 * - ATP_RS: that reduce-scatter: the sum of the local chunk and the tp - 1 received ones;
 * - ATP_BAG, ATP_BAG_USER: in the backward, the all-gather of the output gradient of an
 *   ATP_RS_SRC projection (the reduce-scatter's conjugate) and the projection's dgrad reading it.
 * The other tensor-parallel collectives (the backward's reduce-scatters of summed dgrads, the
 * regathers the weight gradients read, recomputed passes) stay NCCL calls.
 */
enum { ATP_NONE, ATP_AG, ATP_AG_USER, ATP_RS_SRC, ATP_RS, ATP_BAG, ATP_BAG_USER };

/* The remat plan of layer l: the policy's, or keep-everything past recompute_layers (NeMo's
 * recompute_num_layers with the block method). */
static const rm_remat_plan *plan_of(const ctx *x, int l)
{
	return x->recompute_layers > 0 && l >= x->recompute_layers ? &x->plan_keep : &x->plan;
}

static bool is_norm_op(const rm_op *op)
{
	return op->kind == RM_OP_ELEMENTWISE && op->weight_elems > 0 && op->phase == RM_PHASE_FWD &&
	       strcmp(op->name, "embedding") != 0;
}

/* The dimension of a layer weight that FSDP shards and the collective gathers or scatters: the
 * hidden (embed) axis, dim 0 of a projection that reads the residual stream through a norm (q,
 * k, v, gate, up: [embed, out]) and the last dim of one that writes back to it (out, down:
 * [in, embed]). */
static int weight_shard_dim(const rm_graph *g, const rm_op *op)
{
	int in = op->n_inputs > 0 ? op->inputs[0] : -1;
	int prod = in >= 0 && in < g->n_values ? g->values[in].producer : -1;
	/* through an FP8 cast (no gradient of its own) to the op that made the value */
	for (int hops = 0; prod >= 0 && g->ops[prod].no_grad && g->ops[prod].n_inputs > 0 && hops < 4; hops++) {
		in = g->ops[prod].inputs[0];
		prod = in >= 0 && in < g->n_values ? g->values[in].producer : -1;
	}
	return prod >= 0 && g->ops[prod].kind == RM_OP_ELEMENTWISE && g->ops[prod].weight_elems > 0 ? 0 : 1;
}

/* Weighted GEMMs of a graph, grouped greedily in first-use order up to a threshold (XLA's
 * AllGatherCombiner / ReduceScatterCombiner merge same-kind collectives while their combined
 * output stays within xla_gpu_*_combine_threshold_bytes: the output of an all-gather is the full
 * buffer, that of a reduce-scatter the shard, out_div = the FSDP degree). With by_dim
 * (--xla_gpu_enable_*_combine_by_dim) only collectives along the same dimension combine. */
static void group_weights(const rm_graph *g, int64_t threshold, int elem_bytes, int64_t out_div, bool by_dim,
			  bool grads, bool local_experts, weight_groups *wg)
{
	memset(wg, 0, sizeof(*wg));
	for (int i = 0; i < g->n_ops && i < 96; i++)
		wg->of_op[i] = -1;
	int64_t cur[2] = {0, 0};
	int open[2] = {-1, -1}; /* the group being filled, per dimension class */
	wg->n = 0;
	if (out_div < 1)
		out_div = 1;
	/* forward order for gathers; the backward produces gradients in reverse order */
	for (int t = 0; t < g->n_fwd_ops; t++) {
		int i = grads ? g->n_fwd_ops - 1 - t : t;
		const rm_op *op = &g->ops[i];
		if (op->kind != RM_OP_GEMM || op->weight_elems == 0 || (local_experts && op->expert))
			continue; /* expert parallelism: the GPU's experts are whole, nothing to gather */
		int d = by_dim ? weight_shard_dim(g, op) : 0;
		int64_t b = op->weight_elems * elem_bytes / out_div;
		if (open[d] < 0 || (cur[d] + b > threshold && cur[d] > 0)) {
			if (wg->n == MAX_GROUPS) {
				int last = open[d] >= 0 ? open[d] : wg->n - 1;
				wg->elems[last] += op->weight_elems;
				wg->of_op[i] = last;
				cur[d] += b;
				continue;
			}
			open[d] = wg->n++;
			cur[d] = 0;
		}
		wg->elems[open[d]] += op->weight_elems;
		wg->of_op[i] = open[d];
		cur[d] += b;
	}
}

static rm_cost_op op_cost(const ctx *x, const rm_op *op, int l, rm_program_phase ph);

/*
 * Whether the LHS prices ops by time: scheduler.cost_model remora, or XLA's speed-of-light
 * estimator (--xla_gpu_enable_analytical_sol_latency_estimator; xla/service/gpu/model/
 * sol_latency_estimator.cc), which prices collectives from NCCL measurements (its
 * CollectiveInterpolator) and compute from its GPU performance model and matmul tables. remora
 * stands its own kernel and NCCL models, fitted to measurements too, in for those tables.
 */
static bool timed_costs(const ctx *x)
{
	return x->cfg->lhs_cost == RM_LHS_COST_REMORA ||
	       (x->cfg->mode == RM_SCHED_XLA && x->cfg->flags.analytical_sol_latency_estimator);
}

/* LHS cost of an op of layer l (0 for the embedding and head) in a phase; a memory-bound op fused
 * into an earlier op's kernel is no instruction of its own. */
static double slot_units_at(const ctx *x, const rm_op *op, int l, rm_program_phase ph)
{
	rm_cost_op c = op_cost(x, op, l, ph);
	if (timed_costs(x))
		return x->cost->op_time_s(x->cost, &c, x->cfg->hw) * 1e6;
	if (op->kind != RM_OP_ELEMENTWISE)
		return UNITS_LIBRARY_CALL;
	if (x->fuse && c.elementwise.kernels == 0)
		return 0;
	/* a row reduction (norms, softmax, the loss) is an input fusion: kLowCost; a fusion holding
	 * one is priced by its class, the reduction's */
	rm_membound_class cls = x->fuse ? c.elementwise.cls : op->mclass;
	return cls == RM_MB_NORM || cls == RM_MB_NORM_BWD || cls == RM_MB_SOFTMAX ? UNITS_LOW : UNITS_LOOP_FUSION;
}

static double slot_units(const ctx *x, const rm_op *op)
{
	return slot_units_at(x, op, 0, op->phase == RM_PHASE_FWD ? RM_PPHASE_FWD : RM_PPHASE_BWD);
}

/* The cross-replica collective that follows a gradient reduction of `bytes` (the full input of
 * the FSDP group's reduce-scatter, or an all-reduce's buffer) over the FSDP group: its kind and
 * its full buffer (the reduce-scatter's output, the all-reduce's buffer). */
static rm_collective_cost replica_coll(const ctx *x, rm_coll kind, int64_t bytes)
{
	int64_t buf = kind == RM_COLL_REDUCE_SCATTER ? bytes / x->wl->train.fsdp : bytes;
	return (rm_collective_cost){.op = x->rep_rs && kind == RM_COLL_REDUCE_SCATTER ? RM_COLL_REDUCE_SCATTER
										       : RM_COLL_ALL_REDUCE,
				    .bytes = buf,
				    .group_size = x->R,
				    .span = x->rep_nodes};
}

static double coll_latency(const ctx *x, ckind kind, int64_t bytes)
{
	if (timed_costs(x)) {
		/* the run's own cost model, the one the engine prices the emitted collective with (the
		 * calibrated NCCL model of the resolved hardware), not the embedded default */
		rm_cost_op c = {.kind = RM_COST_COLLECTIVE,
				.collective = {.op = ckind_coll[kind],
					       .bytes = bytes,
					       .group_size = (int32_t)x->cfg->wl->train.fsdp,
					       .span = x->cfg->fsdp_nodes}};
		double t = x->cost->op_time_s(x->cost, &c, x->cfg->hw) * 1e6;
		if (x->R > 1 && kind != CK_AG) {
			/* the cross-replica reduction runs behind it on the same stream */
			c.collective = replica_coll(x, ckind_coll[kind], bytes);
			t += x->cost->op_time_s(x->cost, &c, x->cfg->hw) * 1e6;
		}
		return t;
	}
	return UNITS_ASYNC_COLLECTIVE;
}

/* ---- building the computations ---------------------------------------------------------- */

/* Position of the first slot of graph op `op` of body layer bl, micro-batch mb in a phase, or
 * -1. An unrolled chain holds a layer's forward and its recompute: the phase tells them apart. */
static int find_slot(comp *c, int op, int bl, int mb, rm_program_phase phase)
{
	int n;
	const int *js = comp_layer_slots(c, bl, mb, &n);
	for (int i = 0; i < n; i++) {
		const slot *s = &c->slots[js[i]];
		if (s->op == op && s->phase == phase)
			return js[i];
	}
	return -1;
}

/*
 * The live span of value v of body layer bl, micro-batch mb, in one pass of a chain: forward
 * values from their producer to their last consumer in the forward, saved and carried values
 * excluded (they are in the stacks); in the backward the recomputed values from their recompute
 * and the offloaded ones from their reload (the pass's first backward slot), to their last
 * reader. Returns false when v has no span there; else *prod is its producer's slot and
 * readers[0 .. *n_readers) the slots that read it (at most as many as the layer's slots
 * for mb, comp_layer_slots).
 */
static bool value_span(const ctx *x, comp *c, int bl, int mb, bool bwd, int v, int *prod_out, int *readers,
		       int *n_readers)
{
	x = layer_ctx(x, bl);
	const rm_graph *g = x->layer;
	const rm_value *val = &g->values[v];
	*n_readers = 0;
	if (val->producer < 0)
		return false;
	int nl;
	const int *ls = comp_layer_slots(c, bl, mb, &nl);
	rm_value_fate fate = plan_of(x, bl)->fate[v];
	int prod;
	if (!bwd) {
		if (fate == RM_FATE_SAVED || fate == RM_FATE_CARRY)
			return false;
		prod = find_slot(c, val->producer, bl, mb, RM_PPHASE_FWD);
		if (prod < 0)
			return false;
		for (int q = 0; q < nl; q++) {
			int j = ls[q];
			const slot *s = &c->slots[j];
			if (j <= prod || s->phase != RM_PPHASE_FWD)
				continue;
			const rm_op *op = &g->ops[s->op];
			for (int i = 0; i < op->n_inputs; i++)
				if (op->inputs[i] == v) {
					readers[(*n_readers)++] = j;
					break;
				}
		}
	} else {
		if (fate != RM_FATE_RECOMPUTED && fate != RM_FATE_OFFLOADED)
			return false;
		prod = fate == RM_FATE_OFFLOADED ? find_slot(c, g->n_fwd_ops, bl, mb, RM_PPHASE_BWD)
						 : find_slot(c, val->producer, bl, mb, RM_PPHASE_RECOMPUTE);
		if (prod < 0)
			return false;
		for (int q = 0; q < nl; q++) {
			int j = ls[q];
			const slot *s = &c->slots[j];
			if (j < prod || s->phase == RM_PPHASE_FWD)
				continue;
			const rm_op *op = &g->ops[s->op];
			bool reads = false;
			for (int i = 0; i < op->n_residuals && !reads; i++)
				reads = op->residuals[i] == v && op->phase != RM_PHASE_FWD;
			if (s->phase == RM_PPHASE_RECOMPUTE)
				for (int i = 0; i < op->n_inputs && !reads; i++)
					reads = op->inputs[i] == v;
			if (reads)
				readers[(*n_readers)++] = j;
		}
	}
	*prod_out = prod;
	return true;
}

/* Live bytes of one layer's activations in a chain: each value over its span (value_span);
 * gradients as a rolling pair of the largest values. */
static void add_layer_temps(const ctx *x, comp *c, int bl, int mb, bool bwd, int64_t *delta)
{
	x = layer_ctx(x, bl);
	const rm_graph *g = x->layer;
	int nl;
	const int *ls = comp_layer_slots(c, bl, mb, &nl);
	/* a value's readers are slots of this layer and micro-batch (value_span) */
	int *readers = rm_new(int, (size_t)nl + 1);
	for (int v = 0; v < g->n_values; v++) {
		int prod, nr;
		if (!value_span(x, c, bl, mb, bwd, v, &prod, readers, &nr))
			continue;
		int last = prod + 1;
		for (int r = 0; r < nr; r++)
			if (readers[r] + 1 > last)
				last = readers[r] + 1;
		delta[prod] += g->values[v].bytes;
		delta[last] -= g->values[v].bytes;
	}
	free(readers);
	if (bwd) {
		/* the gradients (grad_flow): a data-gradient op's output lives until the last slot
		 * that reads it (its value's readers, the weight gradients that read it as dY, the
		 * op that adds to it), at least to the next slot; the graph input's gradient until the
		 * next slot (the layer below's first op). A weight gradient's own output (dW) as
		 * before: to the next slot, the accumulation it lands in is counted with the
		 * reduce-scatter. */
		const grad_flow *fl = &x->gflow;
		int *pos = rm_new(int, (size_t)g->n_ops + 1), *end = rm_new(int, (size_t)g->n_ops + 1);
		for (int o = 0; o < g->n_ops; o++)
			pos[o] = end[o] = -1;
		for (int q = 0; q < nl; q++)
			if (c->slots[ls[q]].phase == RM_PPHASE_BWD)
				pos[c->slots[ls[q]].op] = ls[q];
		for (int q = 0; q < nl; q++) {
			const slot *r = &c->slots[ls[q]];
			if (r->phase != RM_PPHASE_BWD)
				continue;
			int src[RM_OP_MAX_INPUTS + 1], ns = 0;
			src[ns++] = fl->dy_src[r->op];
			for (int k = 0; k < RM_OP_MAX_INPUTS && fl->acc_src[(size_t)r->op * RM_OP_MAX_INPUTS + k] >= 0; k++)
				src[ns++] = fl->acc_src[(size_t)r->op * RM_OP_MAX_INPUTS + k];
			for (int k = 0; k < ns; k++)
				if (src[k] >= 0 && pos[src[k]] >= 0 && ls[q] + 1 > end[src[k]])
					end[src[k]] = ls[q] + 1;
		}
		for (int q = 0; q < nl; q++) {
			int j = ls[q];
			const slot *s = &c->slots[j];
			if (s->phase != RM_PPHASE_BWD)
				continue;
			int64_t b = g->ops[s->op].bytes_written;
			int e = j + 2 <= c->n ? j + 2 : c->n;
			bool wgrad = g->ops[s->op].phase == RM_PHASE_BWD_WGRAD;
			if (!wgrad && s->op != fl->input_writer)
				e = end[s->op] > j + 1 ? end[s->op] : j + 1;
			delta[j] += b;
			delta[e] -= b;
		}
		free(pos);
		free(end);
	}
}

/* Gathered weights of group grp live from their first to their last user in the chain. */
/* The first slot of body layer bl's pass (forward, or recompute + backward), or -1. */
static int layer_pass_first_slot(comp *c, int bl, int mb, bool bwd)
{
	int nl;
	const int *ls = comp_layer_slots(c, bl, mb, &nl);
	for (int q = 0; q < nl; q++)
		if ((c->slots[ls[q]].phase != RM_PPHASE_FWD) == bwd)
			return ls[q];
	return -1;
}

/* The first slot of body layer bl in a body (one pass only), or -1. */
static int layer_first_slot(comp *c, int bl, int mb)
{
	int nl;
	const int *ls = comp_layer_slots(c, bl, mb, &nl);
	return nl > 0 ? ls[0] : -1;
}

/* The gathered weights of group grp of body layer bl, live from first to last use; with
 * pipelining (live_from >= 0) from live_from: the body's start for the layer whose gather the
 * previous iteration issued (loop carry), the layer's first slot for one gathered in this body. */
static void add_gathered_temps(const ctx *x, comp *c, int bl, int mb, bool bwd, int grp, int64_t bytes,
			       int64_t *delta, int *first_user, int live_from)
{
	x = layer_ctx(x, bl);
	const rm_graph *g = x->layer;
	int first = -1, last = -1, nl;
	const int *ls = comp_layer_slots(c, bl, mb, &nl);
	for (int q = 0; q < nl; q++) {
		int j = ls[q];
		const slot *s = &c->slots[j];
		const rm_op *op = &g->ops[s->op];
		int fwd = op->phase == RM_PHASE_FWD ? s->op : op->fwd_op;
		bool uses = x->ag.of_op[fwd] == grp &&
			    (bwd ? (s->phase == RM_PPHASE_RECOMPUTE ||
				    (op->phase == RM_PHASE_BWD_DGRAD && op->kind == RM_OP_GEMM))
				 : s->phase == RM_PPHASE_FWD);
		if (!uses)
			continue;
		if (first < 0)
			first = j;
		last = j;
	}
	*first_user = first;
	if (first < 0)
		return;
	delta[live_from >= 0 && live_from < first ? live_from : first] += bytes;
	delta[last + 1] -= bytes;
}

static void finish_temps(comp *c, int64_t *delta)
{
	c->temps = rm_new(int64_t, (size_t)c->n + 1);
	int64_t cur = 0;
	for (int j = 0; j <= c->n; j++) {
		cur += delta[j];
		c->temps[j] = cur;
	}
}

/* Layer slots of one pass of body layer bl (fwd, or recompute + bwd). */
static void add_layer_slots(const ctx *x, comp *c, int bl, int mb, bool bwd)
{
	x = layer_ctx(x, bl);
	const rm_graph *g = x->layer;
	if (!bwd) {
		for (int i = 0; i < g->n_fwd_ops; i++)
			comp_add_slot(c, (slot){SLOT_OP, PART_LAYER, i, bl, mb, RM_PPHASE_FWD,
						slot_units_at(x, &g->ops[i], bl, RM_PPHASE_FWD), false, false});
		return;
	}
	for (int i = 0; i < g->n_fwd_ops; i++)
		if (plan_of(x, bl)->recompute[i])
			comp_add_slot(c, (slot){SLOT_OP, PART_LAYER, i, bl, mb, RM_PPHASE_RECOMPUTE,
						slot_units_at(x, &g->ops[i], bl, RM_PPHASE_RECOMPUTE), false, false});
	for (int i = g->n_fwd_ops; i < g->n_ops; i++)
		comp_add_slot(c, (slot){SLOT_OP, PART_LAYER, i, bl, mb, RM_PPHASE_BWD,
					slot_units_at(x, &g->ops[i], bl, RM_PPHASE_BWD), false, false});
}

/* The collectives of one pass of body layer bl. off: target layer offset for pipelined ones. */
/*
 * The collectives of one pass (forward, or recompute + backward) of body layer bl.
 * Pipelined (XLA's collective pipeliner, then double buffering: the body holds k copies of the
 * layer; docs/schedules.md): the gather issued in copy bl fetches layer bl + ag_off, the
 * reduce-scatter and all-reduce in copy bl reduce layer bl + rs_off (-1: the copy before, or the
 * previous iteration's last copy through the loop carry). A collective whose result feeds copy
 * bl's outputs must be done before copy bl + 1 starts (loop_double_buffer_transformer's control
 * edges from one copy's roots to the next copy's consumers; collectives are exempt from them, so
 * a copy's collectives may start during the copy before). Not pipelined: gather before first
 * use, reduction after the last weight gradient.
 */
static void add_layer_colls(const ctx *x, comp *c, int bl, int mb, bool bwd, int64_t *delta,
			    bool pipelined_ag, int ag_off, bool pipelined_rs, int rs_off)
{
	x = layer_ctx(x, bl);
	const rm_graph *g = x->layer;
	/* in a scan body (not a dense first layer, which runs unrolled in the entry before it) */
	bool body = x->cfg->scan && !(x->n_dense > 0 && bl < x->n_dense);
	bool pipe_ar = body && x->pipe_ar;
	/* FSDP2 with reshard_after_forward false (and torchtitan's last block, which is never
	 * resharded): the forward's gather stays for the backward, nothing is gathered again */
	bool keep = x->cfg->mode == RM_SCHED_FSDP2 && !body &&
		    (!x->cfg->reshard_after_forward || bl == x->L - 1);
	/* in a body, the first slot of the next copy: where this copy's results are due */
	int next_copy = body && bl + 1 < x->k ? layer_first_slot(c, bl + 1, mb) : -1;
	int copy_due = next_copy >= 0 ? next_copy : c->n;
	/* the backward's gathers read the optimization barrier's output (jax.checkpoint's
	 * prevent_cse): not pipelined, and not before the barrier at the start of the pass */
	bool fenced = bwd && x->barrier;
	if (fenced)
		pipelined_ag = false;
	for (int grp = 0; grp < x->ag.n && !(bwd && keep); grp++) {
		int64_t bytes = x->ag.elems[grp] * x->lpsize;
		int first_user;
		int live_from = pipelined_ag ? (bl == 0 ? 0 : layer_first_slot(c, bl, mb)) : -1;
		add_gathered_temps(x, c, bl, mb, bwd, grp, bytes, delta, &first_user, live_from);
		if (first_user < 0)
			continue;
		coll *k = comp_add_coll(c);
		k->kind = CK_AG;
		k->what = WHAT_LAYER;
		k->group = grp;
		k->body_layer = bl;
		k->mb = mb;
		k->bwd_pass = bwd;
		k->bytes = bytes;
		k->mem_bytes = bytes;
		k->s_min = fenced ? layer_pass_first_slot(c, bl, mb, true) : 0;
		k->layer_off = pipelined_ag ? ag_off : 0;
		/* the target inside this body (bl + ag_off < k) is the next copy, due at its start */
		k->deadline = !pipelined_ag ? first_user : bl + ag_off < x->k && next_copy >= 0 ? next_copy : c->n;
		k->latency = coll_latency(x, CK_AG, bytes);
	}
	if (!bwd)
		return;
	/* gradient sync on the last micro-batch only: the others accumulate unreduced */
	if (x->cfg->grad_sync_last && mb < x->A - 1)
		return;
	/* gradients: reduce-scatter per group after its last wgrad; all-reduce of the norm grads */
	int src = pipelined_rs ? bl + rs_off : bl; /* the body layer whose gradients are reduced here */
	for (int grp = 0; grp < x->rs.n; grp++) {
		int last = -1, own_last = -1, nl;
		const int *ls = comp_layer_slots(c, bl, mb, &nl);
		for (int q = 0; q < nl; q++) {
			int j = ls[q];
			const slot *s = &c->slots[j];
			const rm_op *op = &g->ops[s->op];
			if (op->phase == RM_PHASE_BWD_WGRAD && x->rs.of_op[op->fwd_op] == grp)
				own_last = j;
		}
		if (own_last < 0)
			continue;
		if (src >= 0 && src != bl) {
			const int *ss = comp_layer_slots(c, src, mb, &nl);
			for (int q = 0; q < nl; q++) {
				const rm_op *op = &g->ops[c->slots[ss[q]].op];
				if (op->phase == RM_PHASE_BWD_WGRAD && x->rs.of_op[op->fwd_op] == grp)
					last = ss[q];
			}
		} else if (src == bl) {
			last = own_last;
		}
		int64_t bytes = x->rs.elems[grp] * x->gsize;
		/* the full gradients live from their producer until the reduce-scatter is done (a
		 * body's last copy carries them into the next iteration: build_body) */
		delta[own_last] += bytes;
		delta[c->n] -= bytes;
		coll *k = comp_add_coll(c);
		k->kind = CK_RS;
		k->what = WHAT_LAYER;
		k->group = grp;
		k->body_layer = bl;
		k->mb = mb;
		k->bytes = bytes;
		k->layer_off = pipelined_rs ? rs_off : 0;
		k->s_min = last >= 0 ? last + 1 : 0; /* src < 0: the previous iteration's, carried */
		k->deadline = pipelined_rs ? copy_due : c->n;
		k->latency = coll_latency(x, CK_RS, bytes);
	}
	if (x->norm_elems > 0) {
		int last = -1, nl;
		int from = pipe_ar ? src : bl;
		const int *ls = from >= 0 ? comp_layer_slots(c, from, mb, &nl) : NULL;
		for (int q = 0; ls && q < nl; q++) {
			const slot *s = &c->slots[ls[q]];
			if (g->ops[s->op].phase != RM_PHASE_FWD && is_norm_op(&g->ops[g->ops[s->op].fwd_op]))
				last = ls[q];
		}
		coll *k = comp_add_coll(c);
		k->kind = CK_AR;
		k->what = WHAT_LAYER;
		k->body_layer = bl;
		k->mb = mb;
		k->bytes = x->norm_elems * x->gsize;
		k->layer_off = pipe_ar ? rs_off : 0;
		k->s_min = pipe_ar ? (last >= 0 ? last + 1 : 0) : (last >= 0 ? last + 1 : c->n);
		k->deadline = pipe_ar ? copy_due : c->n;
		k->latency = coll_latency(x, CK_AR, k->bytes);
	}
}

/* ---- emission ---------------------------------------------------------------------------- */

#define RM_ATP_MAX 64 /* tensor-parallel steps async TP emits at most (tp <= gpus per node) */
/* inputs of an emitted graph op: a backward op's residuals, its gradients (the one it reads and
 * those it adds to), the gathered weight, the gradient it accumulates into */
#define RM_EMIT_MAX_INPUTS (RM_OP_MAX_RESIDUALS + RM_OP_MAX_INPUTS + 4)


typedef struct layer_tensors {
	int32_t *fwd, *rec, *reload, *host;
	int32_t ag_fwd[MAX_GROUPS], ag_bwd[MAX_GROUPS], grads[MAX_GROUPS], norm_grads;
	int32_t grad_out; /* gradient of the layer input, handed to the layer below */
	int32_t *bgrad;   /* per op of the layer graph: the gradient its backward op left, -1 */
	int16_t ar_done[MAX_GROUPS]; /* XLA's DDP: weight gradients emitted of each all-reduce group */
} layer_tensors;

typedef struct emitter {
	const ctx *x;
	rm_program *p;
	int32_t s_compute, s_coll, s_d2h, s_h2d;
	int32_t s_rs; /* fsdp2: the reduce-scatter stream (else s_coll) */
	int32_t last_event;          /* event of the last compute-stream op */
	int32_t *tensor_event;       /* per tensor: event recorded by its producer, -1 */
	int32_t *tensor_stream;      /* per tensor: producer stream, -1 */
	int32_t n_tmeta, cap_tmeta;
	layer_tensors *lt;           /* [mb * L + l] */
	int32_t param_shard, master, opt_state, grad_shard;
	int32_t embed_ag, head_ag, embed_grads, head_grads, final_norm_grads;
	int32_t *embed_fwd, *head_fwd;
	/* the embedding's and the head's per micro-batch: the gradient each backward op left
	 * ([mb * n_ops + op]), -1 */
	int32_t *embed_bgrad, *head_bgrad;
	int32_t chain;               /* the gradient flowing back (tensor), -1 */
	int32_t replica_last;        /* event of the last async cross-replica reduction, -1: the
				      * optimizer waits for it (they run in order on one stream) */
	int32_t *pending;            /* waits for the next compute op */
	int n_pending, cap_pending;
	int32_t s_tpce;              /* async TP: the copy-engine stream of its peer copies, -1 */
	int32_t atp_ev[RM_ATP_MAX + 1]; /* async TP: event of the copy bringing shard i (i >= 1) */
	int32_t atp_recv;            /* async TP: the received reduce-scatter chunks, -1 */
	/* per (layer context, plan, phase, graph op): 1 + the program op that first emitted it
	 * plainly (emit_plain), 0 none; [((kind * 2 + plan) * RM_PPHASE_COUNT + phase) * twin_ops + op] */
	int32_t *twin;
	int twin_ops;
	char name[160];
	int32_t *mb_first; /* each micro-batch's first op (launch order); -1 until emitted */
	rm_schedule_report mb_rep[2]; /* the report's counts when micro-batches 1 and 2 began */
	/* A scan's loops. Le: the layers emitted, L unless cfg->emit_loop_iters shortened the
	 * loops to E trips each: the program then is the one of a model of Le layers (the first E - 1
	 * trips and the last one), the residual stacks the whole step's. stack, cstack, hstack: per
	 * micro-batch, the forward loop's stacked saved values and carries on the device and its
	 * offloaded values on the host (the loop's [L, ...] output buffers, live until the backward
	 * loop's last read), -1 none; stack_out: those the next compute op allocates (the forward
	 * loop's first). */
	int Le, E;
	int32_t *stack, *cstack, *hstack;
	int32_t stack_out[3];
	int n_stack_out;
	int32_t last_d2h_ev; /* the last offload copy's event, -1 */
	/* per loop (forward, backward; per micro-batch): the op each emitted trip began with, and
	 * the report's counts when trips 1 and 2 began */
	int32_t *trip_first; /* [(mb * 2 + bwd) * (E + 1) + trip] */
	rm_schedule_report trip_rep[2];
	rm_schedule_report loop_add; /* the trips not emitted: their collectives' counts */
} emitter;

static bool param_gather_ahead(const ctx *x);
static void emit_replica_reduce(emitter *e, const char *name, int64_t elems, int layer);
static int64_t ar_group_elems(const ctx *x, int grp);
static void emit_param_gather(emitter *e, const char *name, int64_t elems, int layer);

/* Names of ops and tensors; a search (cfg->lean) skips formatting them. */
#define TNAME(e, buf, ...)                                                                       \
	((e)->x->cfg->lean ? (void)((buf)[0] = '\0') : (void)snprintf((buf), sizeof(buf), __VA_ARGS__))

static void meta_grow(emitter *e)
{
	while (e->p->n_tensors > e->cap_tmeta) {
		int32_t old = e->cap_tmeta;
		e->cap_tmeta = e->cap_tmeta ? 2 * e->cap_tmeta : 1024;
		e->tensor_event = rm_xrealloc(e->tensor_event, (size_t)e->cap_tmeta * sizeof(int32_t));
		e->tensor_stream = rm_xrealloc(e->tensor_stream, (size_t)e->cap_tmeta * sizeof(int32_t));
		for (int32_t i = old; i < e->cap_tmeta; i++)
			e->tensor_event[i] = e->tensor_stream[i] = -1;
	}
}

static int32_t new_tensor(emitter *e, const char *name, int64_t bytes, rm_tensor_role role, rm_location loc,
			  bool persistent)
{
	int32_t t = rm_program_add_tensor(e->p, name, bytes, role, loc, persistent);
	meta_grow(e);
	return t;
}

static void add_pending(emitter *e, int32_t ev)
{
	if (ev < 0)
		return;
	for (int i = 0; i < e->n_pending; i++)
		if (e->pending[i] == ev)
			return;
	if (e->n_pending == e->cap_pending) {
		e->cap_pending = e->cap_pending ? 2 * e->cap_pending : 16;
		e->pending = rm_xrealloc(e->pending, (size_t)e->cap_pending * sizeof(int32_t));
	}
	e->pending[e->n_pending++] = ev;
}

/* Adds an op; every input produced on another stream is waited for (no data race). */
static int32_t emit(emitter *e, rm_program_op_desc *d, const int32_t *in, uint32_t n_in, const int32_t *out,
		    uint32_t n_out, int32_t extra_wait, int32_t *event_out)
{
	int32_t waits[64];
	uint32_t nw = 0;
	if (extra_wait >= 0)
		waits[nw++] = extra_wait;
	if (d->stream == e->s_compute) {
		for (int i = 0; i < e->n_pending && nw < 48; i++)
			waits[nw++] = e->pending[i];
		e->n_pending = 0;
	}
	for (uint32_t i = 0; i < n_in; i++) {
		int32_t t = in[i];
		if (t < 0 || e->tensor_stream[t] < 0 || e->tensor_stream[t] == d->stream)
			continue;
		bool dup = false;
		for (uint32_t w = 0; w < nw; w++)
			dup |= waits[w] == e->tensor_event[t];
		if (!dup && nw < 64)
			waits[nw++] = e->tensor_event[t];
	}
	int32_t ev = rm_program_add_event(e->p, d->name);
	int32_t ins[RM_OP_MAX_INPUTS + 16], outs[8];
	uint32_t ni = 0, no = 0;
	for (uint32_t i = 0; i < n_in; i++)
		if (in[i] >= 0 && ni < RM_ARRAY_SIZE(ins))
			ins[ni++] = in[i];
	for (uint32_t i = 0; i < n_out; i++)
		if (out[i] >= 0 && no < RM_ARRAY_SIZE(outs))
			outs[no++] = out[i];
	if (e->n_stack_out > 0 && d->stream == e->s_compute) {
		/* a scan's stacked residuals, allocated with the forward loop's first op */
		for (int i = 0; i < e->n_stack_out && no < RM_ARRAY_SIZE(outs); i++)
			outs[no++] = e->stack_out[i];
		e->n_stack_out = 0;
	}
	d->inputs = ins;
	d->n_inputs = ni;
	d->outputs = outs;
	d->n_outputs = no;
	d->waits = waits;
	d->n_waits = nw;
	d->records = &ev;
	d->n_records = ev >= 0;
	int32_t op = rm_program_add_op(e->p, d);
	for (uint32_t i = 0; i < no; i++) {
		e->tensor_event[outs[i]] = ev;
		e->tensor_stream[outs[i]] = d->stream;
	}
	if (d->stream == e->s_compute)
		e->last_event = ev;
	if (event_out)
		*event_out = ev;
	return op;
}

/*
 * The cost-twin slot of layer op s of layer l (context x = layer_ctx(e->x, l)): 1 + the program
 * op that first emitted the same (layer context, plan, phase, graph op) plainly, 0 none yet;
 * NULL outside the table. op_cost is a function of exactly that key (the context's graph and
 * fusions, the plan's fusions, the phase), so the ops of one slot cost the same.
 */
static int32_t *twin_slot(emitter *e, const ctx *x, int l, const slot *s)
{
	if (!e->twin || s->op < 0 || s->op >= e->twin_ops || (unsigned)s->phase >= RM_PPHASE_COUNT)
		return NULL;
	int kind = e->x->n_dense > 0 && x == e->x->kinds[1] ? 1 : 0;
	int plan = plan_of(x, l) == &x->plan ? 0 : 1;
	return &e->twin[((size_t)(kind * 2 + plan) * RM_PPHASE_COUNT + (size_t)s->phase) * (size_t)e->twin_ops +
			(size_t)s->op];
}

/*
 * emit() for a layer op whose cost is op_cost's for its twin slot tw (twin_slot), unchanged: the
 * op names the slot's first op as its cost twin (rm_program_op.same_cost_as; the simulator
 * prices the layers' copies of one op once, after checking the costs are equal byte for byte),
 * or becomes the slot's first op.
 */
static void emit_plain(emitter *e, int32_t *tw, rm_program_op_desc *d, const int32_t *in, uint32_t n_in,
		       const int32_t *out, uint32_t n_out)
{
	d->same_cost_as = tw && *tw > 0 ? *tw : 0;
	int32_t op = emit(e, d, in, n_in, out, n_out, -1, NULL);
	if (tw && *tw == 0)
		*tw = op + 1;
}

/*
 * Whether a layer collective pays PyTorch DTensor's layout copy (emit_layer_plain): a
 * sequence-parallel all-gather or reduce-scatter of the tensor-parallel group under the PyTorch
 * runtime (scheduler.mode fsdp2; not Megatron). PyTorch keeps activations [b, s, h] and shards
 * them on the sequence, Shard(1) (torchtitan's and KempnerForge's SequenceParallel and
 * RowwiseParallel(output_layouts=Shard(1))); NCCL gathers and scatters along dim 0, so the
 * functional collectives of torch/distributed/_functional_collectives.py reorder the buffer with
 * one copy of the whole of it: all_gather_tensor with gather_dim != 0 returns
 * torch.cat(torch.chunk(out, group_size, dim=0), dim=gather_dim), reduce_scatter_tensor with
 * scatter_dim != 0 first makes torch.cat(torch.chunk(x, group_size, dim=scatter_dim)). The
 * copy's neighbours are library calls (NCCL, cuBLAS), so Inductor fuses it with nothing.
 * Megatron-LM keeps [s, b, h] and gathers along the first dimension (no copy); XLA gathers in
 * the layout it assigns; async TP's fused ops (emit_atp_*) move only the shards and are not
 * emitted through here.
 */
static bool layout_copy(const ctx *x, const rm_op *op, const rm_program_op_desc *d)
{
	return op->kind == RM_OP_COLLECTIVE && op->coll_group == RM_GROUP_TP && x->wl->train.sp &&
	       x->wl->train.tp > 1 && x->cfg->mode == RM_SCHED_FSDP2 && !x->cfg->megatron &&
	       d->cost.kind == RM_COST_COLLECTIVE &&
	       (d->cost.collective.op == RM_COLL_ALL_GATHER || d->cost.collective.op == RM_COLL_REDUCE_SCATTER);
}

/*
 * emit_plain for an op of the layer, embedding or head graph (tw NULL: no cost twin), with DTensor's layout copy around a sequence-parallel collective
 * (layout_copy): an all-gather writes a buffer in rank order that one memory-bound kernel
 * copies into the output (reads and writes the whole [b, s, h]); a reduce-scatter reads the
 * copy of its input in rank order. The copy runs on the compute stream, one kernel; the
 * buffer in rank order is a tensor of its own, live from the collective to the copy (or from
 * the copy to the reduce-scatter).
 */
static void emit_layer_plain(emitter *e, const rm_op *op, int32_t *tw, rm_program_op_desc *d, const int32_t *in,
			     uint32_t ni, const int32_t *out, uint32_t no)
{
	const ctx *x = e->x;
	if (!layout_copy(x, op, d) || ni == 0 || no == 0 || out[0] < 0) {
		emit_plain(e, tw, d, in, ni, out, no);
		return;
	}
	bool gather = d->cost.collective.op == RM_COLL_ALL_GATHER;
	int64_t full = d->cost.collective.bytes; /* the whole [b, s, h] buffer, nccl-tests' size */
	char cn[192], tn[192];
	TNAME(e, cn, "%s/chunk-cat", d->name);
	TNAME(e, tn, "%s/rank-order", d->name);
	int32_t buf = new_tensor(e, tn, full, RM_ROLE_ACTIVATION, RM_LOC_DEVICE, false);
	rm_program_op_desc c = rm_program_op_desc_init(cn, RM_COST_ELEMENTWISE, e->s_compute);
	c.cost.elementwise = (rm_elementwise_cost){.bytes_read = full, .bytes_written = full, .cls = RM_MB_POINTWISE,
						   .kernels = 1, .eager = x->cfg->eager};
	c.layer = d->layer;
	c.phase = d->phase;
	if (gather) {
		int32_t o[RM_OP_MAX_OUTPUTS + 1];
		memcpy(o, out, no * sizeof(int32_t));
		o[0] = buf;
		emit_plain(e, tw, d, in, ni, o, no);
		emit(e, &c, &buf, 1, out, 1, -1, NULL);
	} else {
		emit(e, &c, in, ni, &buf, 1, -1, NULL);
		emit_plain(e, tw, d, &buf, 1, out, no);
	}
}

static rm_cost_op graph_op_cost(const rm_op *op, bool eager)
{
	/* an op eager PyTorch runs as its decomposition stays a decomposition under Inductor when
	 * it computes in complex numbers (the caller passes eager for those) */
	rm_cost_op c;
	memset(&c, 0, sizeof(c));
	if (op->kind == RM_OP_GEMM) {
		c.kind = RM_COST_GEMM;
		c.gemm = op->gemm;
	} else if (op->kind == RM_OP_ATTENTION) {
		c.kind = RM_COST_ATTENTION;
		c.attention.shape = op->attention;
		c.attention.backward = op->phase != RM_PHASE_FWD;
	} else if (op->kind == RM_OP_COLLECTIVE) {
		/* the group is the scenario's (op_cost fills it) */
		c.kind = RM_COST_COLLECTIVE;
		c.collective = (rm_collective_cost){.op = op->coll, .bytes = op->coll_bytes, .group_size = 1, .span = 1};
	} else {
		c.kind = RM_COST_ELEMENTWISE;
		c.elementwise = (rm_elementwise_cost){.bytes_read = op->bytes_read, .bytes_written = op->bytes_written, .flops = op->flops, .cls = op->mclass, .kernels = 1};
		if (eager && op->eager_bytes > 0) {
			/* PyTorch eager: the op's decomposition, its bytes split as the fused op's */
			int64_t fused = op->bytes_read + op->bytes_written;
			c.elementwise.bytes_read = fused > 0 ? (int64_t)((double)op->eager_bytes * (double)op->bytes_read / (double)fused)
							     : op->eager_bytes;
			c.elementwise.bytes_written = op->eager_bytes - c.elementwise.bytes_read;
			c.elementwise.kernels = op->eager_kernels > 1 ? op->eager_kernels : 1;
			c.elementwise.eager = true;
		}
	}
	return c;
}

/* The fusion pass that prices op `op` of layer l in phase ph, and the op's index in its graph. */
static const sched_fusion *fusion_of(const ctx *x, const rm_op *op, int l, rm_program_phase ph, int *idx)
{
	if (!x->fuse)
		return NULL;
	x = layer_ctx(x, l);
	const rm_graph *gs[3] = {x->layer, x->embed, x->head};
	for (int k = 0; k < 3; k++) {
		if (op < gs[k]->ops || op >= gs[k]->ops + gs[k]->n_ops)
			continue;
		*idx = (int)(op - gs[k]->ops);
		int p = plan_of(x, l) == &x->plan ? 0 : 1;
		const sched_fusion *f = k == 1 ? &x->fu_embed : k == 2 ? &x->fu_head
				      : ph == RM_PPHASE_RECOMPUTE ? &x->fu_rec[p] : &x->fu_layer[p];
		return f->ops ? f : NULL;
	}
	return NULL;
}

/* graph_op_cost with the memory-bound ops as their fused kernels (fusing runtimes). */
static rm_cost_op op_cost(const ctx *x, const rm_op *op, int l, rm_program_phase ph)
{
	/* Inductor leaves complex arithmetic to ATen: such an op runs as its eager decomposition and
	 * joins no fusion (sched_fusion_opts no_complex) */
	bool inductor_fallback = x->fuse && x->cfg->mode == RM_SCHED_FSDP2 && op->complex_arith;
	rm_cost_op c = graph_op_cost(op, x->cfg->eager || inductor_fallback);
	if (c.kind == RM_COST_COLLECTIVE) {
		const rm_train_config *t = &x->wl->train;
		c.collective.group_size = (int32_t)(op->coll_group == RM_GROUP_CP ? t->cp : op->coll_group == RM_GROUP_EP ? t->ep : t->tp);
		int span = op->coll_group == RM_GROUP_CP ? x->cfg->cp_nodes
			   : op->coll_group == RM_GROUP_EP ? x->cfg->ep_nodes
							   : x->cfg->tp_nodes;
		c.collective.span = span > 0 ? span : 1;
		return c;
	}
	int i;
	const sched_fusion *f = c.kind == RM_COST_ELEMENTWISE ? fusion_of(x, op, l, ph, &i) : NULL;
	if (f)
		sched_fusion_cost(f, i, &c.elementwise);
	return c;
}

/* Bytes of the tensor holding forward value v of layer l (phase ph) or of the embedding or head
 * (l < 0): 0 when the value lives only inside a fused kernel. */
static int64_t value_bytes(const ctx *x, const rm_graph *g, int v, int l, rm_program_phase ph)
{
	int i;
	const rm_op *prod = g->values[v].producer >= 0 ? &g->ops[g->values[v].producer] : NULL;
	const sched_fusion *f = prod ? fusion_of(x, prod, l < 0 ? 0 : l, ph, &i) : NULL;
	return f && !f->written[v] ? 0 : g->values[v].bytes;
}

/* Bytes of the gradient tensor backward op `op` leaves live (def without fusion). */
static int64_t grad_tensor_bytes(const ctx *x, const rm_graph *g, const rm_op *op, int l, int64_t def)
{
	int i;
	const sched_fusion *f = fusion_of(x, op, l, RM_PPHASE_BWD, &i);
	return f ? sched_fusion_grad_bytes(f, g, i, def) : def;
}

static layer_tensors *lt_of(emitter *e, int mb, int l)
{
	return &e->lt[mb * e->x->L + l];
}

/* Where layer l's unreduced gradients of micro-batch mb accumulate: its own, or with gradient
 * sync on the last micro-batch only (FSDP2's set_requires_gradient_sync(False) before the
 * others) one buffer for all of them, micro-batch 0's. */
static layer_tensors *grads_lt(emitter *e, int mb, int l)
{
	return lt_of(e, e->x->cfg->grad_sync_last ? 0 : mb, l);
}

/* Layer l runs in a scan's loops (not unrolled, not a dense layer before the scan). */
static bool in_scan(const ctx *x, int l)
{
	return x->cfg->scan && l >= first_scanned(x);
}

/* The tensor holding forward value v of layer l as the backward (or recompute) reads it: under a
 * scan a saved value or carry is a slice of the forward loop's stacked output (e->stack). */
static int32_t residual_tensor(emitter *e, int mb, int l, int v)
{
	const ctx *x = layer_ctx(e->x, l);
	layer_tensors *t = lt_of(e, mb, l);
	switch (plan_of(x, l)->fate[v]) {
	case RM_FATE_RECOMPUTED:
		return t->rec[v];
	case RM_FATE_OFFLOADED:
		return t->reload[v];
	case RM_FATE_SAVED:
		if (in_scan(e->x, l) && e->stack[mb] >= 0)
			return e->stack[mb];
		return t->fwd[v];
	case RM_FATE_CARRY:
		if (in_scan(e->x, l) && e->cstack[mb] >= 0)
			return e->cstack[mb];
		return t->fwd[v];
	default:
		return t->fwd[v];
	}
}

/* ---- async tensor parallelism (ATP_*) ---- */

/* A layer op as built for emission, kept to be emitted in chunks. */
typedef struct atp_op {
	rm_program_op_desc d;
	char name[160];
	int32_t in[RM_EMIT_MAX_INPUTS], out[RM_OP_MAX_OUTPUTS + 1];
	uint32_t ni, no;
} atp_op;

/* Slot s's part in async TP: the op's role in the forward or backward it runs in; recomputed
 * passes run plain. */
static int atp_role_of(const ctx *x, const slot *s)
{
	if (!x->atp_n || s->phase == RM_PPHASE_RECOMPUTE || s->op < 0 || s->op >= x->layer->n_ops)
		return ATP_NONE;
	return x->atp_role[s->op];
}

static void atp_keep(atp_op *k, const rm_program_op_desc *d, const char *name, const int32_t *in, uint32_t ni,
		     const int32_t *out, uint32_t no)
{
	k->d = *d;
	snprintf(k->name, sizeof(k->name), "%s", name);
	k->d.name = k->name;
	memcpy(k->in, in, ni * sizeof(int32_t));
	memcpy(k->out, out, no * sizeof(int32_t));
	k->ni = ni;
	k->no = no;
}

/*
 * A micro-pipelined all-gather (op d: input the local shard, output the gathered tensor): tp - 1
 * copy-engine copies of one peer's shard of coll_bytes / tp each, one after the other on the
 * copy stream (fused_all_gather_matmul pulls the peers' shards from symmetric memory in turn);
 * e->atp_ev[i] is the event of shard i's arrival. The gathered tensor counts as written by the
 * last copy.
 */
static void emit_atp_gather(emitter *e, const rm_program_op_desc *d, const int32_t *in, uint32_t ni,
			    const int32_t *out, uint32_t no, int64_t coll_bytes)
{
	int n = e->x->atp_n;
	e->x->rep->async_tp_collectives++;
	int32_t ins[RM_OP_MAX_INPUTS + 8];
	uint32_t k = 0;
	for (uint32_t i = 0; i < ni && k + 2 < RM_ARRAY_SIZE(ins); i++)
		ins[k++] = in[i];
	e->atp_ev[0] = -1;
	for (int i = 1; i < n; i++) {
		char cn[192];
		TNAME(e, cn, "%s/p2p%d", d->name, i);
		rm_program_op_desc c = rm_program_op_desc_init(cn, RM_COST_COPY, e->s_tpce);
		c.cost.copy = (rm_copy_cost){.dir = RM_COPY_P2P, .bytes = coll_bytes / n};
		c.layer = d->layer;
		c.phase = d->phase;
		if (i == 1) {
			emit(e, &c, ins, k, out, no, -1, &e->atp_ev[i]);
			for (uint32_t o = 0; o < no && k < RM_ARRAY_SIZE(ins); o++)
				ins[k++] = out[o]; /* the later copies write into the same buffer */
		} else {
			emit(e, &c, ins, k, NULL, 0, -1, &e->atp_ev[i]);
		}
	}
	for (uint32_t o = 0; o < no; o++)
		if (out[o] >= 0)
			e->tensor_event[out[o]] = e->atp_ev[n - 1];
}

/*
 * The projections reading a micro-pipelined all-gather, as the fused op runs them: for each of
 * the tp shards in turn, every projection's GEMM over that shard's tokens (m / tp rows), shard 0
 * the local one, shard i after its copy (e->atp_ev[i]). `gathered` (the all-gather's output) is
 * an input of the last chunks only: the earlier ones wait for their own shard, not the whole.
 */
static void emit_atp_users(emitter *e, atp_op *ops, int n_ops, int32_t gathered)
{
	int n = e->x->atp_n;
	for (int i = 0; i < n; i++)
		for (int u = 0; u < n_ops; u++) {
			atp_op *k = &ops[u];
			rm_program_op_desc d = k->d;
			char cn[192];
			TNAME(e, cn, "%s/chunk%d", k->name, i);
			d.name = cn;
			d.cost.gemm.m = (d.cost.gemm.m + n - 1) / n;
			int32_t ins[RM_EMIT_MAX_INPUTS + RM_OP_MAX_OUTPUTS + 1];
			uint32_t ni = 0;
			for (uint32_t j = 0; j < k->ni && ni < RM_ARRAY_SIZE(ins); j++)
				if (k->in[j] != gathered || i == n - 1)
					ins[ni++] = k->in[j];
			if (i > 0)
				for (uint32_t o = 0; o < k->no && ni < RM_ARRAY_SIZE(ins); o++)
					if (k->out[o] >= 0)
						ins[ni++] = k->out[o];
			emit(e, &d, ins, ni, i == 0 ? k->out : NULL, i == 0 ? k->no : 0, i > 0 && u == 0 ? e->atp_ev[i] : -1,
			     NULL);
		}
	for (int u = 0; u < n_ops; u++)
		for (uint32_t o = 0; o < ops[u].no; o++)
			if (ops[u].out[o] >= 0)
				e->tensor_event[ops[u].out[o]] = e->last_event;
}

/*
 * A projection whose output is reduce-scattered, micro-pipelined (fused_matmul_reduce_scatter):
 * tp chunk GEMMs of m / tp rows, one per destination's tokens, the remote ones first, each copied
 * to its owner on the copy stream (out_bytes / tp) as soon as it is done; the local chunk last.
 * The received chunks land in e->atp_recv ((tp - 1) / tp of out_bytes), which the reduction
 * (emit_atp_reduce) reads.
 */
static void emit_atp_scatter_chunks(emitter *e, const rm_program_op_desc *d0, const int32_t *in, uint32_t ni0,
				    const int32_t *out, uint32_t no, int64_t out_bytes)
{
	int n = e->x->atp_n;
	int32_t res = no > 0 ? out[0] : -1;
	int32_t recv_ev = -1;
	e->atp_recv = -1;
	for (int i = 0; i < n; i++) {
		rm_program_op_desc d = *d0;
		char cn[192];
		TNAME(e, cn, "%s/chunk%d", d0->name, i);
		d.name = cn;
		d.cost.gemm.m = (d.cost.gemm.m + n - 1) / n;
		int32_t ins[RM_OP_MAX_INPUTS + 8];
		uint32_t ni = 0;
		for (uint32_t j = 0; j < ni0 && ni < RM_ARRAY_SIZE(ins) - 1; j++)
			ins[ni++] = in[j];
		if (i > 0 && res >= 0)
			ins[ni++] = res;
		int32_t ev = -1;
		emit(e, &d, ins, ni, i == 0 ? out : NULL, i == 0 ? no : 0, -1, &ev);
		if (res >= 0)
			e->tensor_event[res] = ev;
		if (i == n - 1 || res < 0)
			continue;
		char tn[192];
		TNAME(e, tn, "%s/p2p%d", d0->name, i + 1);
		rm_program_op_desc c = rm_program_op_desc_init(tn, RM_COST_COPY, e->s_tpce);
		c.cost.copy = (rm_copy_cost){.dir = RM_COPY_P2P, .bytes = out_bytes / n};
		c.layer = d0->layer;
		c.phase = d0->phase;
		int32_t cin[2] = {res, e->atp_recv};
		if (e->atp_recv < 0) {
			char rn[192];
			TNAME(e, rn, "%s/received", d0->name);
			e->atp_recv = new_tensor(e, rn, out_bytes / n * (n - 1), RM_ROLE_ACTIVATION, RM_LOC_DEVICE, false);
			emit(e, &c, cin, 1, &e->atp_recv, 1, -1, &recv_ev);
		} else {
			emit(e, &c, cin, 2, NULL, 0, -1, &recv_ev);
		}
	}
	if (e->atp_recv >= 0)
		e->tensor_event[e->atp_recv] = recv_ev;
}

/*
 * The reduce-scatter of a micro-pipelined projection: the local chunk plus the tp - 1 received
 * ones summed into the shard (one memory-bound kernel reading coll_bytes, writing coll_bytes /
 * tp, tp - 1 additions a shard element), once the last copy has landed.
 */
static void emit_atp_reduce(emitter *e, const rm_program_op_desc *d0, const int32_t *in, uint32_t ni0,
			    const int32_t *out, uint32_t no, int64_t coll_bytes)
{
	int n = e->x->atp_n;
	e->x->rep->async_tp_collectives++;
	rm_program_op_desc d = *d0;
	d.stream = e->s_compute;
	d.cost = (rm_cost_op){.kind = RM_COST_ELEMENTWISE};
	int64_t es = rm_dtype_size(e->x->wl->train.param_dtype);
	d.cost.elementwise = (rm_elementwise_cost){.bytes_read = coll_bytes,
						   .bytes_written = coll_bytes / n,
						   .flops = (double)(n - 1) * (double)(coll_bytes / n / (es > 0 ? es : 2)),
						   .kernels = 1};
	int32_t ins[RM_OP_MAX_INPUTS + 8];
	uint32_t ni = 0;
	for (uint32_t j = 0; j < ni0 && ni < RM_ARRAY_SIZE(ins) - 1; j++)
		ins[ni++] = in[j];
	if (e->atp_recv >= 0)
		ins[ni++] = e->atp_recv;
	emit(e, &d, ins, ni, out, no, -1, NULL);
	e->atp_recv = -1;
}

/* Offloads of slot s's outputs (RM_FATE_OFFLOADED), right after their producer. */
static void emit_offloads(emitter *e, const slot *s, int l, int mb)
{
	const ctx *x = layer_ctx(e->x, l);
	const rm_graph *g = x->layer;
	const rm_op *op = &g->ops[s->op];
	layer_tensors *t = lt_of(e, mb, l);
	char mbs[16] = "";
	if (x->A > 1 && !x->cfg->lean)
		snprintf(mbs, sizeof(mbs), "mb%d/", mb);
	for (int i = 0; i < op->n_outputs; i++) {
		int v = op->outputs[i];
		if (plan_of(x, l)->fate[v] != RM_FATE_OFFLOADED)
			continue;
		char tn[160];
		TNAME(e, tn, "%slayer%02d/offload/%s", mbs, l, g->values[v].name);
		rm_program_op_desc c = rm_program_op_desc_init(tn, RM_COST_COPY, e->s_d2h);
		c.cost.copy = (rm_copy_cost){.dir = RM_COPY_D2H, .bytes = g->values[v].bytes};
		c.layer = l;
		if (in_scan(e->x, l) && e->hstack[mb] >= 0) {
			/* into its slice of the loop's host stack (allocated before the loop: the copy
			 * waits for its value only, not for the stack's allocation, which would make
			 * one op before the loop a predecessor of every copy in it) */
			t->host[v] = e->hstack[mb];
			int32_t cin = t->fwd[v];
			emit(e, &c, &cin, 1, NULL, 0, -1, &e->last_d2h_ev);
			continue;
		}
		t->host[v] = new_tensor(e, tn, g->values[v].bytes, RM_ROLE_RESIDUAL, RM_LOC_HOST, false);
		int32_t cin = t->fwd[v];
		emit(e, &c, &cin, 1, &t->host[v], 1, -1, NULL);
	}
}

/* The gradient flow of graph g, one of the step's: a layer kind's, the embedding's, the head's. */
static const grad_flow *flow_of(const emitter *e, const rm_graph *g)
{
	const ctx *x = e->x;
	if (g == x->embed)
		return &x->embed_flow;
	if (g == x->head)
		return &x->head_flow;
	return x->n_dense > 0 && g == x->kinds[1]->layer ? &x->kinds[1]->gflow : &x->gflow;
}

/*
 * The gradient backward op b reads (grad_flow): what its dY's producer left (bgrad: per op), else
 * chain, the gradient entering the graph (from the layer above; -1 at the loss).
 */
static int32_t grad_read(const grad_flow *fl, int b, const int32_t *bgrad, int32_t chain)
{
	int p = fl->dy_src[b];
	return p >= 0 && bgrad[p] >= 0 ? bgrad[p] : chain;
}

/* Appends to in (ni of cap) the partial sums of the gradients b adds to, once each; returns ni. */
static uint32_t grad_accumulate(const grad_flow *fl, int b, const int32_t *bgrad, int32_t *in, uint32_t ni, uint32_t cap)
{
	const int *acc = &fl->acc_src[(size_t)b * RM_OP_MAX_INPUTS];
	for (int k = 0; k < RM_OP_MAX_INPUTS && acc[k] >= 0; k++) {
		int32_t t = bgrad[acc[k]];
		bool seen = t < 0;
		for (uint32_t j = 0; j < ni && !seen; j++)
			seen = in[j] == t;
		if (!seen && ni < cap)
			in[ni++] = t;
	}
	return ni;
}

static void emit_layer_op(emitter *e, const slot *s, int l, int mb, atp_op *collect)
{
	const ctx *x = layer_ctx(e->x, l);
	const rm_graph *g = x->layer;
	const rm_op *op = &g->ops[s->op];
	layer_tensors *t = lt_of(e, mb, l);
	const char *phase = s->phase == RM_PPHASE_FWD ? "fwd" : s->phase == RM_PPHASE_RECOMPUTE ? "recompute" : "bwd";
	char mbs[16] = "";
	if (x->A > 1 && !x->cfg->lean)
		snprintf(mbs, sizeof(mbs), "mb%d/", mb);
	TNAME(e, e->name, "%slayer%02d/%s/%s", mbs, l, phase, op->name);
	/* rm_program_op_desc_init's defaults, the cost op_cost's: the slot's first op's when it has
	 * one (twin_slot: the same key, so the same cost) */
	rm_program_op_desc d = {.name = e->name, .stream = e->s_compute, .layer = l, .phase = s->phase, .time_s = -1};
	int32_t *tw = twin_slot(e, x, l, s);
	if (tw && *tw > 0)
		d.cost = e->p->ops[*tw - 1].cost;
	else
		d.cost = op_cost(x, op, l, s->phase);
	int32_t in[RM_EMIT_MAX_INPUTS], out[RM_OP_MAX_OUTPUTS + 1];
	uint32_t ni = 0, no = 0;
	int fwd = op->phase == RM_PHASE_FWD ? s->op : op->fwd_op;
	int grp = x->ag.of_op[fwd];
	if (s->phase == RM_PPHASE_FWD || s->phase == RM_PPHASE_RECOMPUTE) {
		bool rec = s->phase == RM_PPHASE_RECOMPUTE;
		for (int i = 0; i < op->n_inputs; i++) {
			int v = op->inputs[i];
			in[ni++] = rec ? residual_tensor(e, mb, l, v) : t->fwd[v];
		}
		if (grp >= 0 && op->kind == RM_OP_GEMM)
			in[ni++] = rec && t->ag_bwd[grp] >= 0 ? t->ag_bwd[grp] : t->ag_fwd[grp];
		for (int i = 0; i < op->n_outputs; i++) {
			int v = op->outputs[i];
			const rm_value *val = &g->values[v];
			char tn[160];
			TNAME(e, tn, "%slayer%02d/%s%s", mbs, l, rec ? "recompute/" : "", val->name);
			rm_value_fate fate = plan_of(x, l)->fate[v];
			/* under a scan the residual is the stack's slice, this the op's own output */
			rm_tensor_role role = !rec && (fate == RM_FATE_SAVED || fate == RM_FATE_CARRY) && !in_scan(e->x, l)
						      ? RM_ROLE_RESIDUAL
						      : RM_ROLE_ACTIVATION;
			if (rec) {
				if (fate != RM_FATE_RECOMPUTED) {
					out[no++] = -1;
					continue;
				}
				t->rec[v] = new_tensor(e, tn, val->bytes, role, RM_LOC_DEVICE, false);
				out[no++] = t->rec[v];
			} else {
				t->fwd[v] = new_tensor(e, tn, value_bytes(x, g, v, l, RM_PPHASE_FWD), role, RM_LOC_DEVICE, false);
				out[no++] = t->fwd[v];
			}
		}
		if (!rec && mb == 0 && s->op == 0 && param_gather_ahead(x)) {
			char gn[160];
			TNAME(e, gn, "layer%02d/fwd/param-all-gather-replicas", l);
			emit_param_gather(e, gn, x->layer->params, l);
		}
		int role = rec ? ATP_NONE : atp_role_of(x, s);
		if (collect) {
			atp_keep(collect, &d, e->name, in, ni, out, no);
			return;
		}
		if (role == ATP_AG)
			emit_atp_gather(e, &d, in, ni, out, no, op->coll_bytes);
		else if (role == ATP_RS_SRC)
			emit_atp_scatter_chunks(e, &d, in, ni, out, no, g->values[op->outputs[0]].bytes);
		else if (role == ATP_RS)
			emit_atp_reduce(e, &d, in, ni, out, no, op->coll_bytes);
		else
			emit_layer_plain(e, op, tw, &d, in, ni, out, no);
		if (!rec)
			emit_offloads(e, s, l, mb);
		return;
	}
	/* backward */
	for (int i = 0; i < op->n_residuals; i++)
		in[ni++] = residual_tensor(e, mb, l, op->residuals[i]);
	const grad_flow *fl = flow_of(e, g);
	int32_t dy = grad_read(fl, s->op, t->bgrad, e->chain);
	in[ni++] = dy;
	if (op->phase == RM_PHASE_BWD_DGRAD && op->kind == RM_OP_GEMM && grp >= 0)
		in[ni++] = t->ag_bwd[grp] >= 0 ? t->ag_bwd[grp] : t->ag_fwd[grp];
	layer_tensors *gt = grads_lt(e, mb, l);
	if (op->phase == RM_PHASE_BWD_WGRAD) {
		int rg = x->rs.of_op[fwd];
		if (rg < 0 && g->ops[fwd].expert && x->cfg->wl->train.ep > 1) {
			/* the GPU's own experts: their gradients accumulate where the optimizer reads */
			in[ni++] = e->grad_shard;
		} else if (rg >= 0 && x->cfg->wl->train.fsdp == 1) {
			/* nothing to reduce: the weight gradient accumulates into the gradients kept
			 * for the optimizer */
			in[ni++] = e->grad_shard;
		} else if (rg >= 0) {
			if (gt->grads[rg] < 0) {
				char tn[160];
				TNAME(e, tn, "%slayer%02d/grads%d", mbs, l, rg);
				gt->grads[rg] = new_tensor(e, tn, x->rs.elems[rg] * x->gsize, RM_ROLE_GRADIENT, RM_LOC_DEVICE,
							  false);
				out[no++] = gt->grads[rg];
			} else {
				in[ni++] = gt->grads[rg];
			}
		}
		emit_plain(e, tw, &d, in, ni, out, no);
		int arg = x->ar.n > 0 ? x->ar.of_op[fwd] : -1;
		if (x->R > 1 && x->cfg->wl->train.fsdp == 1 && x->ar.n > 0 && arg >= 0 && mb == x->A - 1 &&
		    ++lt_of(e, mb, l)->ar_done[arg] == x->ar_nops[arg]) {
			/* XLA: the combined all-reduce of this group, once its last weight gradient ran */
			char rn[192];
			TNAME(e, rn, "%slayer%02d/bwd/all-reduce-replicas.%d", mbs, l, arg);
			emit_replica_reduce(e, rn, ar_group_elems(x, arg), l);
		} else if (x->R > 1 && x->cfg->wl->train.fsdp == 1 && x->ar.n == 0 && s->op == x->last_wgrad &&
			   mb == x->A - 1 && (!x->cfg->megatron || x->cfg->overlap_grad_reduce)) {
			/* data parallelism without FSDP: the layer's gradients, complete after its last
			 * weight gradient of the last micro-batch, all-reduced across the replicas while
			 * the layers below run their backward (DDP's buckets, XLA's per-layer
			 * all-reduce after the accumulation) */
			char rn[192];
			TNAME(e, rn, "%slayer%02d/bwd/all-reduce-replicas", mbs, l);
			emit_replica_reduce(e, rn, x->layer->params, l);
		}
		return;
	}
	if (is_norm_op(&g->ops[fwd]) && op->kind != RM_OP_COLLECTIVE && x->norm_elems > 0 && x->cfg->wl->train.fsdp > 1) {
		if (gt->norm_grads < 0) {
			char tn[160];
			TNAME(e, tn, "%slayer%02d/norm_grads", mbs, l);
			gt->norm_grads = new_tensor(e, tn, x->norm_elems * x->gsize, RM_ROLE_GRADIENT, RM_LOC_DEVICE, false);
			out[no++] = gt->norm_grads;
		} else {
			in[ni++] = gt->norm_grads;
		}
	}
	ni = grad_accumulate(fl, s->op, t->bgrad, in, ni, RM_EMIT_MAX_INPUTS);
	char tn[160];
	TNAME(e, tn, "%slayer%02d/grad/%s", mbs, l, op->name);
	int32_t gout = new_tensor(e, tn, grad_tensor_bytes(x, g, op, l, op->bytes_written > 0 ? op->bytes_written : 1),
				  RM_ROLE_ACTIVATION, RM_LOC_DEVICE, false);
	out[no++] = gout;
	int role = atp_role_of(x, s);
	if (role == ATP_BAG) {
		emit_atp_gather(e, &d, in, ni, out, no, op->coll_bytes);
	} else if (role == ATP_BAG_USER) {
		atp_op u;
		atp_keep(&u, &d, e->name, in, ni, out, no);
		emit_atp_users(e, &u, 1, dy);
	} else {
		emit_layer_plain(e, op, tw, &d, in, ni, out, no);
	}
	t->bgrad[s->op] = gout;
	/* the gradient entering the graph below: this layer's input's, once its last writer ran */
	if (g->input < 0 || s->op == fl->input_writer)
		e->chain = gout;
}

/*
 * Emits a clone XLA's rematerialization pass added (SLOT_REMAT): the op of a forward or
 * recompute slot run again on the compute stream from the tensors its inputs are now (a clone
 * of a clone reads the first clone's), writing new tensors for the values the pass tracks; the
 * readers still to come read those. A moved op is the op itself, run here instead.
 */
static void emit_remat(emitter *e, const slot *s, int l, int mb)
{
	const ctx *x = layer_ctx(e->x, l);
	const rm_graph *g = x->layer;
	const rm_op *op = &g->ops[s->op];
	layer_tensors *t = lt_of(e, mb, l);
	/* which pass's values: a clone of a forward slot replaces forward tensors */
	bool rec = s->phase == RM_PPHASE_RECOMPUTE;
	char mbs[16] = "";
	if (x->A > 1 && !x->cfg->lean)
		snprintf(mbs, sizeof(mbs), "mb%d/", mb);
	TNAME(e, e->name, "%slayer%02d/%s/%s", mbs, l, s->moved ? (rec ? "recompute" : "fwd") : "remat", op->name);
	rm_program_op_desc d = {.name = e->name, .stream = e->s_compute, .layer = l,
				.phase = s->moved ? s->phase : RM_PPHASE_RECOMPUTE, .time_s = -1};
	/* moved: the op as it was priced; a clone: a kernel of its own, outside any fusion */
	d.cost = s->moved ? op_cost(x, op, l, s->phase) : graph_op_cost(op, x->cfg->eager);
	int32_t in[RM_OP_MAX_INPUTS], out[RM_OP_MAX_OUTPUTS];
	uint32_t ni = 0, no = 0;
	for (int i = 0; i < op->n_inputs; i++)
		in[ni++] = rec ? residual_tensor(e, mb, l, op->inputs[i]) : t->fwd[op->inputs[i]];
	for (int i = 0; i < op->n_outputs; i++) {
		int v = op->outputs[i];
		rm_value_fate fate = plan_of(x, l)->fate[v];
		bool tracked = rec ? fate == RM_FATE_RECOMPUTED : fate != RM_FATE_SAVED && fate != RM_FATE_CARRY;
		if (!tracked)
			continue;
		char tn[160];
		TNAME(e, tn, "%slayer%02d/remat/%s", mbs, l, g->values[v].name);
		int32_t tt = new_tensor(e, tn, rec ? g->values[v].bytes : value_bytes(x, g, v, l, RM_PPHASE_FWD),
					RM_ROLE_ACTIVATION, RM_LOC_DEVICE, false);
		out[no++] = tt;
		if (rec)
			t->rec[v] = tt;
		else
			t->fwd[v] = tt;
	}
	emit_plain(e, NULL, &d, in, ni, out, no);
}

/* Emits one collective (async on the collective stream, or sync on the compute stream). */
static void emit_coll(emitter *e, const coll *k, int l, int mb, bool sync, int32_t *event_out)
{
	const ctx *x = e->x;
	layer_tensors *t = k->what == WHAT_LAYER ? lt_of(e, mb, l) : NULL;
	char mbs[16] = "";
	if (x->A > 1 && !x->cfg->lean)
		snprintf(mbs, sizeof(mbs), "mb%d/", mb);
	int32_t in[2] = {-1, -1}, out = -1;
	rm_program_phase phase = RM_PPHASE_FWD;
	char tn[160];
	switch (k->what) {
	case WHAT_LAYER:
		if (k->kind == CK_AG) {
			TNAME(e, e->name, "%slayer%02d/%s/all-gather%d", mbs, l, k->bwd_pass ? "bwd" : "fwd",
				 k->group);
			TNAME(e, tn, "%slayer%02d/%s/gathered%d", mbs, l, k->bwd_pass ? "bwd" : "fwd", k->group);
			out = new_tensor(e, tn, k->bytes, RM_ROLE_GATHERED_PARAM, RM_LOC_DEVICE, false);
			if (k->bwd_pass)
				t->ag_bwd[k->group] = out;
			else
				t->ag_fwd[k->group] = out;
			in[0] = e->param_shard;
			phase = k->bwd_pass ? RM_PPHASE_BWD : RM_PPHASE_FWD;
		} else if (k->kind == CK_RS) {
			TNAME(e, e->name, "%slayer%02d/bwd/reduce-scatter%d", mbs, l, k->group);
			in[0] = grads_lt(e, mb, l)->grads[k->group];
			in[1] = e->grad_shard;
			phase = RM_PPHASE_BWD;
		} else {
			TNAME(e, e->name, "%slayer%02d/bwd/all-reduce", mbs, l);
			in[0] = grads_lt(e, mb, l)->norm_grads;
			in[1] = e->grad_shard;
			phase = RM_PPHASE_BWD;
		}
		break;
	case WHAT_EMBED:
	case WHAT_HEAD: {
		bool emb = k->what == WHAT_EMBED;
		if (k->kind == CK_AG) {
			TNAME(e, e->name, "%s%s/all-gather", mbs, emb ? "embedding" : "head");
			TNAME(e, tn, "%s%s/gathered", mbs, emb ? "embedding" : "head");
			out = new_tensor(e, tn, k->bytes, RM_ROLE_GATHERED_PARAM, RM_LOC_DEVICE, false);
			if (emb)
				e->embed_ag = out;
			else
				e->head_ag = out;
			in[0] = e->param_shard;
		} else {
			TNAME(e, e->name, "%s%s/reduce-scatter", mbs, emb ? "embedding" : "head");
			in[0] = emb ? e->embed_grads : e->head_grads;
			in[1] = e->grad_shard;
			phase = RM_PPHASE_BWD;
		}
		break;
	}
	case WHAT_FINAL_NORM:
		TNAME(e, e->name, "%shead/all-reduce", mbs);
		in[0] = e->final_norm_grads;
		in[1] = e->grad_shard;
		phase = RM_PPHASE_BWD;
		break;
	}
	int32_t async_stream = ckind_coll[k->kind] == RM_COLL_ALL_GATHER ? e->s_coll : e->s_rs;
	if (x->cfg->mode == RM_SCHED_FSDP2 && k->what == WHAT_LAYER && k->kind == CK_RS && !sync && in[0] >= 0) {
		/* FSDP2's foreach_reduce: the block's unsharded gradients (param dtype) copied into
		 * the reduce-scatter input, cast to the reduce dtype, on the reduce-scatter stream */
		char cn[192];
		TNAME(e, cn, "%s/copy-in", e->name);
		rm_program_op_desc ci = rm_program_op_desc_init(cn, RM_COST_ELEMENTWISE, e->s_rs);
		int64_t elems = k->bytes / x->gsize;
		ci.cost.elementwise = (rm_elementwise_cost){.bytes_read = elems * x->psize, .bytes_written = k->bytes};
		ci.layer = l;
		ci.phase = RM_PPHASE_BWD;
		int32_t cin[1] = {in[0]};
		emit(e, &ci, cin, 1, NULL, 0, -1, NULL); /* e->name still names the reduce-scatter */
	}
	rm_program_op_desc d = rm_program_op_desc_init(e->name, RM_COST_COLLECTIVE, sync ? e->s_compute : async_stream);
	d.cost.collective = (rm_collective_cost){.op = ckind_coll[k->kind], .bytes = k->bytes,
						 .group_size = x->cfg->wl->train.fsdp, .span = x->cfg->fsdp_nodes};
	d.layer = k->what == WHAT_LAYER ? l : -1;
	d.phase = phase;
	if (sync)
		d.sync_reason = rm_sync_reason_name(k->reason);
	int32_t ins[2];
	uint32_t ni = 0;
	for (int i = 0; i < 2; i++)
		if (in[i] >= 0)
			ins[ni++] = in[i];
	/* an async start waits for its position on the compute stream: the op just before it */
	int32_t ev = -1;
	emit(e, &d, ins, ni, &out, out >= 0, sync ? -1 : e->last_event, &ev);
	*event_out = ev;
	if (k->kind != CK_AG && x->R > 1) {
		/* the cross-replica reduction of what the FSDP group reduced, in place in the
		 * gradient shard, behind it on the same stream; the optimizer waits for it */
		char rn[192];
		TNAME(e, rn, "%s/replicas", e->name);
		rm_program_op_desc r = rm_program_op_desc_init(rn, RM_COST_COLLECTIVE, d.stream);
		r.cost.collective = replica_coll(x, ckind_coll[k->kind], k->bytes);
		r.layer = d.layer;
		r.phase = d.phase;
		int32_t rin[1] = {e->grad_shard}, rev = -1;
		emit(e, &r, rin, 1, NULL, 0, -1, &rev);
		if (!sync)
			e->replica_last = rev;
		x->rep->replica_collectives++;
		x->rep->replica_sync += sync;
	}
	x->rep->collectives++;
	if (sync) {
		x->rep->sync++;
		x->rep->sync_by_reason[k->reason]++;
	} else {
		x->rep->async++;
	}
}

/* Ops of the embedding or the head graph (nothing rematerialized there). */
static void emit_part_op(emitter *e, part pt, const slot *s, int32_t layer_out_last)
{
	const ctx *x = e->x;
	const rm_graph *g = pt == PART_EMBED ? x->embed : x->head;
	int32_t *fwdt = pt == PART_EMBED ? e->embed_fwd : e->head_fwd;
	const rm_op *op = &g->ops[s->op];
	char mbs[16] = "";
	if (x->A > 1 && !x->cfg->lean)
		snprintf(mbs, sizeof(mbs), "mb%d/", s->mb);
	const char *gname = pt == PART_EMBED ? "embedding" : "head";
	TNAME(e, e->name, "%s%s/%s/%s", mbs, gname, op->phase == RM_PHASE_FWD ? "fwd" : "bwd", op->name);
	rm_program_op_desc d = rm_program_op_desc_init(e->name, RM_COST_GEMM, e->s_compute);
	d.phase = op->phase == RM_PHASE_FWD ? RM_PPHASE_FWD : RM_PPHASE_BWD;
	d.cost = op_cost(x, op, 0, d.phase);
	int32_t in[RM_EMIT_MAX_INPUTS], out[RM_OP_MAX_OUTPUTS + 1];
	uint32_t ni = 0, no = 0;
	bool weighted_gemm = op->kind == RM_OP_GEMM && g->ops[op->phase == RM_PHASE_FWD ? s->op : op->fwd_op].weight_elems > 0;
	if (op->phase == RM_PHASE_FWD) {
		for (int i = 0; i < op->n_inputs; i++) {
			int v = op->inputs[i];
			in[ni++] = v == g->input ? (pt == PART_HEAD ? layer_out_last : fwdt[v]) : fwdt[v];
		}
		if (weighted_gemm || strcmp(op->name, "embedding") == 0)
			in[ni++] = pt == PART_EMBED ? e->embed_ag : e->head_ag;
		for (int i = 0; i < op->n_outputs; i++) {
			int v = op->outputs[i];
			char tn[160];
			TNAME(e, tn, "%s%s/%s", mbs, gname, g->values[v].name);
			fwdt[v] = new_tensor(e, tn, value_bytes(x, g, v, -1, RM_PPHASE_FWD),
					     rm_graph_value_is_residual(g, v) ? RM_ROLE_RESIDUAL : RM_ROLE_ACTIVATION,
					     RM_LOC_DEVICE, false);
			out[no++] = fwdt[v];
		}
		if (pt == PART_EMBED && s->op == 0 && s->mb == 0 && param_gather_ahead(x))
			emit_param_gather(e, "embedding/fwd/param-all-gather-replicas", x->embed->params + x->head->params, -1);
		emit_layer_plain(e, op, NULL, &d, in, ni, out, no);
		return;
	}
	for (int i = 0; i < op->n_residuals; i++) {
		int v = op->residuals[i];
		in[ni++] = v == g->input && pt == PART_HEAD ? layer_out_last : fwdt[v];
	}
	const grad_flow *fl = flow_of(e, g);
	int32_t *bg = (pt == PART_EMBED ? e->embed_bgrad : e->head_bgrad) + (size_t)s->mb * (size_t)g->n_ops;
	in[ni++] = grad_read(fl, s->op, bg, e->chain);
	if (op->phase == RM_PHASE_BWD_DGRAD && weighted_gemm)
		in[ni++] = e->head_ag;
	int32_t *grads = NULL;
	if (op->phase == RM_PHASE_BWD_WGRAD && x->cfg->wl->train.fsdp == 1)
		in[ni++] = e->grad_shard; /* nothing to reduce: accumulated where the optimizer reads */
	else if (op->phase == RM_PHASE_BWD_WGRAD)
		grads = pt == PART_EMBED ? &e->embed_grads : &e->head_grads;
	else if (is_norm_op(&g->ops[op->fwd_op]) && op->kind != RM_OP_COLLECTIVE && x->cfg->wl->train.fsdp > 1)
		grads = &e->final_norm_grads;
	if (grads) {
		if (*grads < 0) {
			char tn[160];
			TNAME(e, tn, "%s%s/grads%s", mbs, gname, op->phase == RM_PHASE_BWD_WGRAD ? "" : "_norm");
			int64_t elems = op->phase == RM_PHASE_BWD_WGRAD ? g->ops[op->fwd_op].weight_elems : g->ops[op->fwd_op].weight_elems;
			*grads = new_tensor(e, tn, elems * x->gsize, RM_ROLE_GRADIENT, RM_LOC_DEVICE, false);
			out[no++] = *grads;
		} else {
			in[ni++] = *grads;
		}
	}
	if (op->phase != RM_PHASE_BWD_WGRAD) {
		ni = grad_accumulate(fl, s->op, bg, in, ni, RM_EMIT_MAX_INPUTS);
		char tn[160];
		TNAME(e, tn, "%s%s/grad/%s", mbs, gname, op->name);
		int64_t gbytes = op->grad_bytes > 0 ? op->grad_bytes : op->bytes_written;
		int32_t gout = new_tensor(e, tn, grad_tensor_bytes(x, g, op, 0, gbytes > 0 ? gbytes : 1), RM_ROLE_ACTIVATION,
					  RM_LOC_DEVICE, false);
		out[no++] = gout;
		emit_layer_plain(e, op, NULL, &d, in, ni, out, no);
		bg[s->op] = gout;
		if (g->input < 0 || s->op == fl->input_writer)
			e->chain = gout;
	} else {
		emit(e, &d, in, ni, out, no, -1, NULL);
	}
}

static int32_t layer_output_tensor(emitter *e, int mb, int l)
{
	const rm_graph *g = layer_ctx(e->x, l)->layer;
	int out_v = g->ops[g->n_fwd_ops - 1].outputs[0];
	return lt_of(e, mb, l)->fwd[out_v];
}

static int32_t embed_output_tensor(emitter *e)
{
	const rm_graph *g = e->x->embed;
	return e->embed_fwd[g->ops[g->n_fwd_ops - 1].outputs[0]];
}

/* Reload (h2d) of the offloaded values of layer l before its backward, once; after event
 * `wait` (>= 0: the compute op the issuing iteration starts after; -1: as soon as the host copy
 * is there). */
static void emit_reloads(emitter *e, int mb, int l, int32_t wait)
{
	const ctx *x = layer_ctx(e->x, l);
	const rm_graph *g = x->layer;
	if (l < 0 || l >= e->Le)
		return;
	layer_tensors *t = lt_of(e, mb, l);
	for (int v = 0; v < g->n_values; v++) {
		if (plan_of(x, l)->fate[v] != RM_FATE_OFFLOADED || t->host[v] < 0 || t->reload[v] >= 0)
			continue;
		char tn[160];
		TNAME(e, tn, "%slayer%02d/reload/%s", x->A > 1 ? "mb/" : "", l, g->values[v].name);
		t->reload[v] = new_tensor(e, tn, g->values[v].bytes, RM_ROLE_RESIDUAL, RM_LOC_DEVICE, false);
		rm_program_op_desc c = rm_program_op_desc_init(tn, RM_COST_COPY, e->s_h2d);
		c.cost.copy = (rm_copy_cost){.dir = RM_COPY_H2D, .bytes = g->values[v].bytes};
		c.layer = l;
		c.phase = RM_PPHASE_BWD;
		emit(e, &c, &t->host[v], 1, &t->reload[v], 1, wait, NULL);
		if (t->host[v] == e->hstack[mb])
			/* the first reload waits for the loop's last offload copy; the later ones follow
			 * it on the reload stream (not every one waiting on that copy: a stretch's ops
			 * wait for nothing outside it but its start) */
			e->tensor_stream[t->host[v]] = e->s_h2d;
	}
}

static int target_layer(const coll *k, int base, int dir)
{
	return base + dir * (k->body_layer + k->layer_off);
}

/*
 * Emits the collectives scheduled at position j of a computation: async starts, synchronous
 * collectives, and the waits of async dones. In the entry computation a collective names its
 * own layer and micro-batch; in a body instance its layer is relative to base and the
 * micro-batch is the instance's.
 */
/* FSDP2's all-gather copy-out (split_with_sizes_copy into the unsharded parameters), on the
 * compute stream once the gather is waited for: the gathered bytes read and written. */
static void emit_copy_out(emitter *e, const coll *k, int l, int mb)
{
	const ctx *x = e->x;
	layer_tensors *t = lt_of(e, mb, l);
	int32_t g = k->bwd_pass ? t->ag_bwd[k->group] : t->ag_fwd[k->group];
	if (g < 0)
		return;
	char mbs[16] = "";
	if (x->A > 1 && !x->cfg->lean)
		snprintf(mbs, sizeof(mbs), "mb%d/", mb);
	TNAME(e, e->name, "%slayer%02d/%s/all-gather%d/copy-out", mbs, l, k->bwd_pass ? "bwd" : "fwd", k->group);
	rm_program_op_desc d = rm_program_op_desc_init(e->name, RM_COST_ELEMENTWISE, e->s_compute);
	d.cost.elementwise = (rm_elementwise_cost){.bytes_read = k->bytes, .bytes_written = k->bytes};
	d.layer = l;
	d.phase = k->bwd_pass ? RM_PPHASE_BWD : RM_PPHASE_FWD;
	int32_t in[1] = {g};
	emit(e, &d, in, 1, NULL, 0, -1, NULL);
}

static void emit_colls_at(emitter *e, const comp *c, int j, bool entry, int base, int dir, int mb, int32_t *ev)
{
	const ctx *x = e->x;
	for (int q = c->at_first[j]; q < c->at_first[j + 1]; q++) {
		int i = c->at_list[q];
		const coll *k = &c->colls[i];
		int l = -1, kmb = entry ? k->mb : mb;
		if (k->what == WHAT_LAYER) {
			l = entry ? k->body_layer : target_layer(k, base, dir);
			/* shortened loops: the entry's collectives of the last trip (its prologue or
			 * epilogue) are the last emitted trip's */
			if (entry && e->Le < x->L && l >= x->L - x->k)
				l -= x->L - e->Le;
			if (l < (entry ? 0 : first_scanned(x)) || l >= e->Le)
				continue; /* the pipeliner's peeled iterations (or a dense layer: its own) */
			if (k->kind == CK_RS && grads_lt(e, kmb, l)->grads[k->group] < 0)
				continue;
		}
		if (!k->sync && k->start_pos == j)
			emit_coll(e, k, l, kmb, false, &ev[i]);
		if (k->sync && k->done_pos == j)
			emit_coll(e, k, l, kmb, true, &ev[i]);
		if (!k->sync && k->done_pos == j && ev[i] >= 0) {
			add_pending(e, ev[i]);
			if (x->cfg->mode == RM_SCHED_FSDP2 && k->what == WHAT_LAYER && k->kind == CK_AG)
				emit_copy_out(e, k, l, kmb);
		}
	}
}

/*
 * Emits layer slot j of computation c (layer l, micro-batch mb); returns the slots it emitted:
 * 1, or with async TP the run of consecutive slots that read the same micro-pipelined
 * all-gather (emit_atp_users runs them chunk by chunk together).
 */
static int emit_layer_slots(emitter *e, const comp *c, int j, int l, int mb)
{
	const ctx *x = layer_ctx(e->x, l);
	const slot *s = &c->slots[j];
	if (atp_role_of(x, s) != ATP_AG_USER) {
		emit_layer_op(e, s, l, mb, NULL);
		return 1;
	}
	enum { MAX_USERS = 8 };
	atp_op users[MAX_USERS];
	int n = 0;
	while (n < MAX_USERS && j + n < c->n) {
		const slot *u = &c->slots[j + n];
		if (u->kind != s->kind || u->part != s->part || u->body_layer != s->body_layer || u->mb != s->mb ||
		    u->phase != s->phase || atp_role_of(x, u) != ATP_AG_USER || x->atp_src[u->op] != x->atp_src[s->op])
			break;
		emit_layer_op(e, u, l, mb, &users[n]);
		n++;
	}
	int gathered = x->layer->ops[x->atp_src[s->op]].outputs[0];
	emit_atp_users(e, users, n, lt_of(e, mb, l)->fwd[gathered]);
	for (int u = 0; u < n; u++)
		emit_offloads(e, &c->slots[j + u], l, mb);
	return n;
}

/* Emits one instance of a body (base: layer of body layer 0; dir: +1 forward, -1 backward). */
static void emit_body(emitter *e, const comp *c, int base, int dir, int mb, bool bwd)
{
	const ctx *x = e->x;
	int32_t *ev = rm_new(int32_t, (size_t)c->nc + 1);
	for (int i = 0; i < c->nc; i++)
		ev[i] = -1;
	if (bwd) {
		/* XLA issues an offloaded value's reload in the loop iteration before the one that
		 * reads it (the host-offload passes pipeline the copy-start one iteration ahead): the
		 * first iteration's are the prologue; each iteration starts the next one's, once the
		 * compute before it is done, so at most two iterations' reloads are resident */
		for (int bl = 0; bl < x->k; bl++)
			if (base + dir * bl >= first_scanned(x))
				emit_reloads(e, mb, base + dir * bl, -1);
		for (int bl = 0; bl < x->k; bl++)
			if (base + dir * (x->k + bl) >= first_scanned(x))
				emit_reloads(e, mb, base + dir * (x->k + bl), e->last_event);
	}
	int skip_to = 0;
	for (int j = 0; j <= c->n; j++) {
		emit_colls_at(e, c, j, false, base, dir, mb, ev);
		if (j == c->n)
			break;
		const slot *s = &c->slots[j];
		int l = base + dir * s->body_layer;
		if (l < first_scanned(x) || l >= e->Le)
			continue; /* the pipeliner's peeled iterations, or a dense layer before the scan */
		if (s->kind == SLOT_REMAT) {
			emit_remat(e, s, l, mb);
			continue;
		}
		layer_tensors *t = lt_of(e, mb, l);
		if (!bwd && s->op == 0) {
			int in_v = layer_ctx(x, l)->layer->input;
			t->fwd[in_v] = l == 0 ? embed_output_tensor(e) : layer_output_tensor(e, mb, l - 1);
		}
		if (j < skip_to)
			continue; /* emitted with the async-TP group before it */
		skip_to = j + emit_layer_slots(e, c, j, l, mb);
	}
	free(ev);
}

/* The optimizer step as one multi-tensor kernel (AdamW, fused): it reads the parameters, master
 * weights, gradients and optimizer state of the shard and writes all but the gradients back,
 * 12 FLOPs a parameter (the emitted op and the LHS's price of it). */
static rm_elementwise_cost optimizer_update_cost(const rm_static_memory *sm)
{
	int64_t rw = sm->update_params + sm->master + sm->optimizer;
	return (rm_elementwise_cost){.bytes_read = rw + sm->update_grads, .bytes_written = rw,
				     .flops = 12.0 * (double)sm->opt_elems, .cls = RM_MB_OPTIMIZER};
}

/* Megatron-LM's overlap_param_gather: the distributed optimizer's updated slices all-gathered
 * per layer ahead of its forward (the previous step's update, in the steady state) */
static bool param_gather_ahead(const ctx *x)
{
	return x->cfg->megatron && x->cfg->overlap_param_gather && x->R > 1 && x->rep_rs;
}

/* The reduction of `elems` gradients across the replicas, in place in the gradient shard, on the
 * gradient stream after the last compute op: an all-reduce, or with ZeRO-1/2 (Megatron-LM's
 * distributed optimizer) a reduce-scatter to the optimizer's slices. The optimizer waits for
 * the last of them (e->replica_last). */
static void emit_replica_reduce(emitter *e, const char *name, int64_t elems, int layer)
{
	const ctx *x = e->x;
	rm_program_op_desc r = rm_program_op_desc_init(name, RM_COST_COLLECTIVE, e->s_rs);
	r.cost.collective = (rm_collective_cost){.op = x->rep_rs ? RM_COLL_REDUCE_SCATTER : RM_COLL_ALL_REDUCE,
						 .bytes = elems * x->gsize, .group_size = x->R, .span = x->rep_nodes};
	r.layer = layer;
	r.phase = RM_PPHASE_BWD;
	int32_t rin[1] = {e->grad_shard};
	emit(e, &r, rin, 1, NULL, 0, e->last_event, &e->replica_last);
	x->rep->replica_collectives++;
}

/* The all-gather of `elems` parameters over the replicas that the next compute op waits for. */
static void emit_param_gather(emitter *e, const char *name, int64_t elems, int layer)
{
	const ctx *x = e->x;
	rm_program_op_desc a = rm_program_op_desc_init(name, RM_COST_COLLECTIVE, e->s_coll);
	a.cost.collective = (rm_collective_cost){.op = RM_COLL_ALL_GATHER, .bytes = elems * x->psize,
						 .group_size = x->R, .span = x->rep_nodes};
	a.layer = layer;
	a.phase = RM_PPHASE_FWD;
	int32_t ain[1] = {e->param_shard}, ev = -1;
	emit(e, &a, ain, 1, NULL, 0, -1, &ev);
	add_pending(e, ev);
	x->rep->replica_collectives++;
}

static void emit_optimizer(emitter *e)
{
	const ctx *x = e->x;
	rm_static_memory sm = rm_workload_static_memory(x->wl);
	if (x->R > 1 && x->wl->train.fsdp == 1) {
		/* data parallelism without FSDP: the embedding's and head's gradients (and the final
		 * norm's), complete with the embedding's backward, all-reduced before the step */
		int64_t elems = x->embed->params + x->head->params;
		if (x->cfg->megatron && !x->cfg->overlap_grad_reduce)
			elems = rm_workload_rank_params(x->wl); /* every bucket after the backward */
		emit_replica_reduce(e, "optimizer/all-reduce-replicas", elems, -1);
	}
	if (x->R > 1 && x->wl->train.ep > 1) {
		/* the experts' gradients across the replicas of the expert-parallel group, after the
		 * backward */
		emit_replica_reduce(e, "optimizer/experts-all-reduce-replicas", rm_workload_rank_expert_params(x->wl), -1);
	}
	add_pending(e, e->replica_last);
	if (x->wl->train.grad_clip) {
		/* clip_grad_norm_ (foreach): the global norm reads every gradient shard once, then the
		 * scale by max_norm / norm reads and writes them; the all-reduce of the one-number norm
		 * costs NCCL's small-message floor and is left out */
		rm_program_op_desc n = rm_program_op_desc_init("optimizer/grad_norm", RM_COST_ELEMENTWISE, e->s_compute);
		n.cost.elementwise = (rm_elementwise_cost){.bytes_read = sm.update_grads, .flops = 2.0 * (double)sm.opt_elems,
							   .cls = RM_MB_OPTIMIZER};
		n.phase = RM_PPHASE_OPTIMIZER;
		int32_t gin[1] = {e->grad_shard};
		emit(e, &n, gin, 1, NULL, 0, -1, NULL);
		rm_program_op_desc c = rm_program_op_desc_init("optimizer/clip", RM_COST_ELEMENTWISE, e->s_compute);
		c.cost.elementwise = (rm_elementwise_cost){.bytes_read = sm.update_grads, .bytes_written = sm.update_grads,
							   .flops = (double)sm.opt_elems, .cls = RM_MB_OPTIMIZER};
		c.phase = RM_PPHASE_OPTIMIZER;
		emit(e, &c, gin, 1, NULL, 0, -1, NULL);
	}
	rm_program_op_desc d = rm_program_op_desc_init("optimizer/update", RM_COST_ELEMENTWISE, e->s_compute);
	d.cost.elementwise = optimizer_update_cost(&sm);
	d.phase = RM_PPHASE_OPTIMIZER;
	int32_t in[4] = {e->param_shard, e->master, e->opt_state, e->grad_shard};
	emit(e, &d, in, 4, NULL, 0, -1, NULL);
	if (x->R > 1 && x->rep_rs && !param_gather_ahead(x)) {
		/* ZeRO-1/2: each GPU updated its 1/(fsdp x R) slice; the replica group all-gathers the
		 * slices back into the parameter shard the next step's FSDP gathers read (bytes: the
		 * full output, the parameter shard) */
		rm_program_op_desc a = rm_program_op_desc_init("optimizer/all-gather-replicas", RM_COST_COLLECTIVE, e->s_coll);
		a.cost.collective = (rm_collective_cost){.op = RM_COLL_ALL_GATHER,
							 .bytes = sm.shard_elems * x->psize,
							 .group_size = x->R,
							 .span = x->rep_nodes};
		a.phase = RM_PPHASE_OPTIMIZER;
		int32_t ain[1] = {e->param_shard};
		emit(e, &a, ain, 1, NULL, 0, e->last_event, NULL);
		x->rep->replica_collectives++;
	}
}

/* to += k x (b - a): the collectives' counts of k more periods, each what was emitted from a to b */
static void rep_add_diff(rm_schedule_report *to, const rm_schedule_report *a, const rm_schedule_report *b, int k)
{
	to->collectives += k * (b->collectives - a->collectives);
	to->async += k * (b->async - a->async);
	to->sync += k * (b->sync - a->sync);
	for (int r = 0; r < RM_SYNC_REASON_COUNT; r++)
		to->sync_by_reason[r] += k * (b->sync_by_reason[r] - a->sync_by_reason[r]);
	to->replica_collectives += k * (b->replica_collectives - a->replica_collectives);
	to->replica_sync += k * (b->replica_sync - a->replica_sync);
	to->async_tp_collectives += k * (b->async_tp_collectives - a->async_tp_collectives);
}

/* The forward loop's stacked residuals of micro-batch mb (e->stack, e->hstack): every scanned
 * layer's saved values and carry on the device, its offloaded values on the host, allocated by
 * the loop's first compute op and live until the backward loop's last read. */
static void begin_stacks(emitter *e, int mb)
{
	const ctx *x = e->x;
	int64_t saved = 0, carry = 0, host = 0;
	for (int l = first_scanned(x); l < x->L; l++) {
		const ctx *xl = layer_ctx(x, l);
		const rm_remat_plan *pl = plan_of(xl, l);
		saved += pl->saved_bytes;
		carry += pl->carry_bytes;
		host += pl->offloaded_bytes;
	}
	char mbs[16] = "", tn[160];
	if (x->A > 1 && !x->cfg->lean)
		snprintf(mbs, sizeof(mbs), "mb%d/", mb);
	e->n_stack_out = 0;
	if (saved > 0) {
		TNAME(e, tn, "%sscan/residuals", mbs);
		e->stack[mb] = e->stack_out[e->n_stack_out++] = new_tensor(e, tn, saved, RM_ROLE_RESIDUAL, RM_LOC_DEVICE, false);
	}
	if (carry > 0) {
		/* the layers' inputs, activations of the forward kept for the backward */
		TNAME(e, tn, "%sscan/carries", mbs);
		e->cstack[mb] = e->stack_out[e->n_stack_out++] = new_tensor(e, tn, carry, RM_ROLE_ACTIVATION, RM_LOC_DEVICE, false);
	}
	if (host > 0) {
		TNAME(e, tn, "%sscan/offloaded", mbs);
		e->hstack[mb] = e->stack_out[e->n_stack_out++] = new_tensor(e, tn, host, RM_ROLE_RESIDUAL, RM_LOC_HOST, false);
	}
	e->last_d2h_ev = -1;
}

/* Trip i of a loop begins (i -1: the loop ended): its first op, and the report's counts at trips
 * 1 and 2 (the increase of one trip, for the trips not emitted). */
static void loop_trip(emitter *e, int mb, bool bwd, int i)
{
	if (!e->trip_first)
		return;
	int32_t *f = e->trip_first + ((size_t)mb * 2 + bwd) * (size_t)(e->E + 1);
	f[i < 0 ? e->E : i] = e->p->n_ops;
	if (i == 1 || i == 2)
		e->trip_rep[i - 1] = *e->x->rep; /* its counts only */
	if (i == 2)
		rep_add_diff(&e->loop_add, &e->trip_rep[0], &e->trip_rep[1],
			     (e->x->L - first_scanned(e->x)) / e->x->k - e->E);
}

/* Entry (or unrolled) computation: loops are single slots, layers of an unrolled step inline. */
static void emit_entry(emitter *e, const comp *c, const comp *fwd, const comp *bwd)
{
	const ctx *x = e->x;
	int32_t *ev = rm_new(int32_t, (size_t)c->nc + 1);
	for (int i = 0; i < c->nc; i++)
		ev[i] = -1;
	/* a layer's backward starts at a new (layer, micro-batch) */
	int last_bwd_layer = -1, last_bwd_mb = -1, skip_to = 0;
	for (int j = 0; j <= c->n; j++) {
		/* where each micro-batch's ops begin (a periodic stretch: rm_schedule_report.loop_*) */
		if (j < c->n && c->slots[j].kind != SLOT_OPTIMIZER && c->slots[j].mb >= 0 && c->slots[j].mb < x->A &&
		    e->mb_first[c->slots[j].mb] < 0) {
			e->mb_first[c->slots[j].mb] = e->p->n_ops;
			if (c->slots[j].mb == 1 || c->slots[j].mb == 2)
				e->mb_rep[c->slots[j].mb - 1] = *x->rep; /* its counts only */
		}
		emit_colls_at(e, c, j, true, 0, +1, 0, ev);
		if (j == c->n)
			break;
		const slot *s = &c->slots[j];
		switch (s->kind) {
		case SLOT_OP:
			if (s->part == PART_LAYER) {
				int l = s->body_layer;
				layer_tensors *t = lt_of(e, s->mb, l);
				if (s->phase == RM_PPHASE_FWD && s->op == 0)
					t->fwd[layer_ctx(x, l)->layer->input] =
						l == 0 ? embed_output_tensor(e) : layer_output_tensor(e, s->mb, l - 1);
				if (s->phase != RM_PPHASE_FWD && (l != last_bwd_layer || s->mb != last_bwd_mb)) {
					/* this layer's (the first one's: none issued them), then the next one
					 * down's, one layer ahead */
					emit_reloads(e, s->mb, l, -1);
					emit_reloads(e, s->mb, l - 1, e->last_event);
					last_bwd_layer = l;
					last_bwd_mb = s->mb;
				}
				if (j >= skip_to)
					skip_to = j + emit_layer_slots(e, c, j, l, s->mb);
			} else {
				const rm_graph *g = s->part == PART_EMBED ? x->embed : x->head;
				if (s->part == PART_EMBED && s->op == 0)
					e->embed_grads = e->head_grads = e->final_norm_grads = -1; /* a new micro-batch */
				if (s->part == PART_HEAD && s->op == g->n_fwd_ops)
					e->chain = -1; /* the loss starts the backward */
				emit_part_op(e, s->part, s, layer_output_tensor(e, s->mb, e->Le - 1));
			}
			break;
		case SLOT_FWD_LOOP:
			begin_stacks(e, s->mb);
			for (int base = first_scanned(x), i = 0; base < e->Le; base += x->k, i++) {
				loop_trip(e, s->mb, false, i);
				/* a while body's async copies are done within its iteration (the copy-done
				 * writes the loop's host-stack carry): the next one starts after them */
				add_pending(e, e->last_d2h_ev);
				emit_body(e, fwd, base, +1, s->mb, false);
			}
			add_pending(e, e->last_d2h_ev);
			loop_trip(e, s->mb, false, -1);
			if (e->hstack[s->mb] >= 0 && e->last_d2h_ev >= 0) {
				/* the backward reads the host stack once the loop's copies are done */
				e->tensor_event[e->hstack[s->mb]] = e->last_d2h_ev;
				e->tensor_stream[e->hstack[s->mb]] = e->s_d2h;
			}
			break;
		case SLOT_BWD_LOOP:
			for (int base = e->Le - 1, i = 0; base >= first_scanned(x); base -= x->k, i++) {
				loop_trip(e, s->mb, true, i);
				emit_body(e, bwd, base, -1, s->mb, true);
			}
			loop_trip(e, s->mb, true, -1);
			break;
		case SLOT_OPTIMIZER:
			emit_optimizer(e);
			break;
		case SLOT_REMAT:
			emit_remat(e, s, s->body_layer, s->mb);
			break;
		}
	}
	free(ev);
}

/* ---- building the computations ---------------------------------------------------------- */

static double comp_units(const comp *c)
{
	double u = 0;
	for (int j = 0; j < c->n; j++)
		u += c->slots[j].units;
	return u;
}

static void build_body(const ctx *xs, comp *c, bool bwd)
{
	/* the body's layers are MoE ones whatever their copy index */
	ctx view = *xs;
	view.n_dense = 0;
	const ctx *x = &view;
	for (int bl = 0; bl < x->k; bl++)
		add_layer_slots(x, c, bl, 0, bwd);
	int64_t *delta = rm_new(int64_t, (size_t)c->n + 2);
	for (int bl = 0; bl < x->k; bl++) {
		add_layer_temps(x, c, bl, 0, bwd, delta);
		if (x->cfg->wl->train.fsdp > 1)
			add_layer_colls(x, c, bl, 0, bwd, delta, x->pipe_ag, x->ag_ahead, x->pipe_rs, -1);
	}
	if (x->pipe_rs && bwd && x->cfg->wl->train.fsdp > 1) {
		/* the previous iteration's last copy's gradients wait in the loop carry for their
		 * reduce-scatter, due before the second copy starts */
		int64_t carried = 0;
		for (int g = 0; g < x->rs.n; g++)
			carried += x->rs.elems[g] * x->gsize;
		int due = x->k > 1 ? layer_first_slot(c, 1, 0) : c->n;
		delta[0] += carried;
		delta[due >= 0 ? due : c->n] -= carried;
	}
	finish_temps(c, delta);
	free(delta);
	/* the gradient shards are live through the backward, and through every pass when they
	 * accumulate over micro-batches */
	c->baseline = x->stacks + (bwd || x->A > 1 ? x->grad_live : 0);
}

/* Adds the per-micro-batch entry collectives of the embedding and the head. */
static coll *entry_coll(const ctx *x, comp *c, ckind kind, what w, int mb, int64_t elems, int s_min, int deadline)
{
	coll *k = comp_add_coll(c);
	k->kind = kind;
	k->what = w;
	k->mb = mb;
	k->bytes = elems * (kind == CK_AG ? (w == WHAT_LAYER ? x->lpsize : x->psize) : x->gsize);
	k->mem_bytes = kind == CK_AG ? k->bytes : 0;
	k->s_min = s_min;
	k->deadline = deadline;
	k->latency = coll_latency(x, kind, k->bytes);
	return k;
}

static int64_t graph_weight_elems(const rm_graph *g, bool gemm_only)
{
	int64_t n = 0;
	for (int i = 0; i < g->n_fwd_ops; i++)
		if (!gemm_only || g->ops[i].kind == RM_OP_GEMM || strcmp(g->ops[i].name, "embedding") == 0)
			if (!is_norm_op(&g->ops[i]) || !gemm_only)
				n += g->ops[i].weight_elems;
	return n;
}

/* LHS cost of a while op in the entry: XLA's default estimator gives it kLowCost; remora's
 * costs, the body's time times the trip count. */
static double loop_units(const ctx *x, const comp *body)
{
	if (timed_costs(x))
		return comp_units(body) * (x->L - first_scanned(x)) / x->k;
	return UNITS_LOW;
}

/* LHS cost of the optimizer: one loop fusion per parameter array (AdamW updates each array's
 * master weights, moments and parameter in one multi-output fusion; under scan a layer
 * parameter is one stacked array), or its time under remora's costs. */
static double optimizer_units(const ctx *x)
{
	if (timed_costs(x)) {
		rm_static_memory sm = rm_workload_static_memory(x->wl);
		rm_cost_op c = {.kind = RM_COST_ELEMENTWISE, .elementwise = optimizer_update_cost(&sm)};
		return x->cost->op_time_s(x->cost, &c, x->cfg->hw) * 1e6;
	}
	const rm_graph *gs[3] = {x->embed, x->layer, x->head};
	int arrays = 0;
	for (int g = 0; g < 3; g++)
		for (int i = 0; i < gs[g]->n_fwd_ops; i++)
			arrays += gs[g]->ops[i].weight_elems > 0;
	return UNITS_LOOP_FUSION * (arrays > 0 ? arrays : 1);
}

static rm__lhs_params lhs_params_of(const ctx *x)
{
	const rm_xla_flags *f = &x->cfg->flags;
	rm__lhs_params p = {.limit = x->limit,
			    .enabled = f->latency_hiding_scheduler,
			    .overlap_limit = f->parallel_collective_overlap_limit};
	for (int k = 0; k < CK_COUNT; k++)
		p.async_disabled[k] = f->async_disabled[ckind_xla[k]];
	return p;
}

/* Does slot s (body layer bl's backward pass) read the gathered weights of group grp? The
 * same uses as add_gathered_temps. */
static bool slot_reads_group(const ctx *x, const slot *s, int grp)
{
	const rm_op *op = &x->layer->ops[s->op];
	int fwd = op->phase == RM_PHASE_FWD ? s->op : op->fwd_op;
	return x->ag.of_op[fwd] == grp &&
	       (s->phase == RM_PPHASE_RECOMPUTE || (op->phase == RM_PHASE_BWD_DGRAD && op->kind == RM_OP_GEMM));
}

/*
 * Compute order of an unrolled backward (docs/schedules.md "Compute order"). XLA's
 * latency-hiding scheduler is a list scheduler over the whole computation: it reorders compute,
 * not only the collectives' starts. This builds the dependency graph of the backward slots
 * [from, to) of micro-batch mb, in their original (program) order, with the FSDP collectives of
 * those layers as start/done pairs where the program without LHS has them:
 * - a recompute slot reads the recompute slot before it in its layer and its group's gathered
 *   weights;
 * - a backward slot reads the recomputed values among its residuals (their recompute slots), the
 *   gradients grad_flow gives it (its dY's producer, or the layer above's input gradient, and the
 *   partial sums it adds to: a weight gradient reads its dY, not its dgrad's output), and a dgrad
 *   GEMM its gathered weights;
 * - a group's reduce-scatter reads its layer's weight gradients of that group, the norm weights'
 *   all-reduce the norm backward slots; under data parallelism without FSDP the layer's
 *   all-reduce across the replicas (last micro-batch only) reads all its weight gradients; the
 *   outputs left unread feed one exit node (the rest of the step: embedding backward, optimizer).
 * The list scheduler (rm__lhs_list) orders the graph with XLA's rules; the slots are written
 * back in that order, so the temporaries and the collectives' windows (rm__lhs_sweep) that the
 * caller builds afterwards follow it. Records on the report how many slots moved, the most
 * layers whose recomputed activations are live at once, and the rule that decided most moves.
 */
static void reorder_backward(const ctx *x, comp *c, int from, int to, int mb)
{
	int ns = to - from;
	if (ns < 2)
		return;
	bool colls = x->cfg->wl->train.fsdp > 1;
	bool reduce = colls && !(x->cfg->grad_sync_last && mb < x->A - 1);
	/* data parallelism without FSDP: each layer's gradients are all-reduced across the
	 * replicas after its last weight gradient of the last micro-batch (emit_bwd_op), an
	 * all-reduce in place on the accumulated gradients; SPMD puts it in the computation */
	bool ddp = !colls && x->R > 1 && mb == x->A - 1;
	if (!colls && !ddp)
		return; /* no collective of this micro-batch's backward: nothing to reorder around */
	ln_graph g = {0};
	int *node_of = rm_new(int, (size_t)ns + 1);
	int cap_map = 2 * ns + 64, *slot_of = rm_new(int, (size_t)cap_map);
	bool *used = NULL;
	int ag_done[MAX_GROUPS], rs_wg[MAX_GROUPS][96], n_rs_wg[MAX_GROUPS], rs_last[MAX_GROUPS];
	int norm_nodes[96], n_norm = 0, norm_last = -1;
	/* ddp: per all-reduce group (one when ar.n is 0), its weight gradients and the last */
	int ar_wg[MAX_GROUPS][96], n_ar_wg[MAX_GROUPS], ar_last[MAX_GROUPS];
	int layer = -1, last_rec = -1, saved_node = -1, bar_node = -1;
	/* the node of each backward op of the current layer (grad_flow's producers), and the node
	 * that left the gradient entering it (the layer above's input gradient), -1 */
	int max_ops = x->layer->n_ops;
	if (x->n_dense > 0 && x->kinds[1]->layer->n_ops > max_ops)
		max_ops = x->kinds[1]->layer->n_ops;
	int *grad_node = rm_new(int, (size_t)max_ops + 1);
	int chain_node = -1;
	const grad_flow *layer_fl = NULL;
#define ADD_NODE(expr, slotpos)                                                        \
	do {                                                                           \
		int id_ = (expr);                                                      \
		if (id_ >= cap_map) {                                                  \
			cap_map *= 2;                                                  \
			slot_of = rm_xrealloc(slot_of, (size_t)cap_map * sizeof(int)); \
		}                                                                      \
		slot_of[id_] = (slotpos);                                              \
	} while (0)
	/* the forward and the loss, which every backward slot reads (the gradient flows from the
	 * loss): one node with the forward's async depth, its longest gather's latency
	 * (InitializeGraphAnalysis takes the largest sum over a path, and a gather's start reads
	 * only parameters, so the forward's gathers do not add up) */
	int fwd_node = -1;
	{
		/* (no gathers without FSDP) */
		double d = colls ? coll_latency(x, CK_AG, graph_weight_elems(x->embed, true) * x->psize) : 0;
		double dh = colls ? coll_latency(x, CK_AG, graph_weight_elems(x->head, true) * x->psize) : 0;
		if (dh > d)
			d = dh;
		for (int kd = 0; colls && kd < (x->n_dense > 0 ? 2 : 1); kd++) {
			const ctx *lx = x->n_dense > 0 ? x->kinds[kd] : x;
			for (int grp = 0; grp < lx->ag.n; grp++) {
				double dl = coll_latency(lx, CK_AG, lx->ag.elems[grp] * lx->lpsize);
				if (dl > d)
					d = dl;
			}
		}
		int st = rm__ln_add_node(&g, LN_START, CK_AG, 0, 0, 0);
		ADD_NODE(st, -1);
		int dn = rm__ln_add_node(&g, LN_DONE, CK_AG, 0, d, 0);
		rm__ln_add_operand(&g, st);
		ADD_NODE(dn, -1);
		fwd_node = rm__ln_add_node(&g, LN_COMPUTE, -1, 0, 0, 0);
		rm__ln_add_operand(&g, dn);
		ADD_NODE(fwd_node, -1);
	}
	for (int j = from; j < to; j++) {
		const slot *s = &c->slots[j];
		if (s->kind != SLOT_OP || s->part != PART_LAYER || s->mb != mb || s->phase == RM_PPHASE_FWD)
			goto out; /* not a plain backward of layers: leave it as it is */
		const ctx *lx = layer_ctx(x, s->body_layer);
		const rm_graph *lg = lx->layer;
		const rm_op *op = &lg->ops[s->op];
		if (s->body_layer != layer) {
			/* a new layer: its backward gathers (before its first slot, as without LHS), and
			 * where its reductions go (after the last weight gradient of each group) */
			if (layer_fl && layer_fl->input_writer >= 0 && grad_node[layer_fl->input_writer] >= 0)
				chain_node = grad_node[layer_fl->input_writer];
			layer_fl = &lx->gflow;
			for (int o = 0; o < max_ops; o++)
				grad_node[o] = -1;
			layer = s->body_layer;
			last_rec = -1;
			/* what the forward saved for this layer: live from its last reader up */
			saved_node = rm__ln_add_node(&g, LN_COMPUTE, -1, 0, 0,
						     plan_of(lx, layer)->saved_bytes + plan_of(lx, layer)->carry_bytes);
			g.nodes[saved_node].external = true;
			rm__ln_add_operand(&g, fwd_node);
			ADD_NODE(saved_node, -1);
			/* prevent_cse's optimization barrier: JAX lowers the layer's backward (the
			 * transposed remat, recompute included) behind one opt-barrier over all its
			 * arguments, the saved residuals and the output's cotangent
			 * (jax/_src/ad_checkpoint.py: remat_transpose binds remat_p on (residuals,
			 * out_cts), remat_lowering wraps them in optimization_barrier), so nothing of
			 * the layer's backward starts before the gradient entering it is complete */
			bar_node = -1;
			if (x->barrier) {
				bar_node = rm__ln_add_node(&g, LN_COMPUTE, -1, 0, 0, 0);
				rm__ln_add_operand(&g, saved_node);
				if (chain_node >= 0)
					rm__ln_add_operand(&g, chain_node);
				ADD_NODE(bar_node, -1);
			}
			n_norm = 0;
			norm_last = -1;
			for (int grp = 0; grp < MAX_GROUPS; grp++) {
				n_ar_wg[grp] = 0;
				ar_last[grp] = -1;
			}
			int nl;
			const int *ls = comp_layer_slots(c, layer, mb, &nl);
			for (int grp = 0; grp < MAX_GROUPS; grp++) {
				ag_done[grp] = -1;
				n_rs_wg[grp] = 0;
				rs_last[grp] = -1;
			}
			for (int grp = 0; colls && grp < lx->ag.n; grp++) {
				bool any = false;
				for (int q = 0; q < nl && !any; q++)
					any = c->slots[ls[q]].phase != RM_PPHASE_FWD && slot_reads_group(lx, &c->slots[ls[q]], grp);
				if (!any)
					continue;
				int64_t bytes = lx->ag.elems[grp] * lx->lpsize;
				int st = rm__ln_add_node(&g, LN_START, CK_AG, 0, 0, bytes);
				/* the gather reads the barrier's output (the sharded parameters pass
				 * through it) */
				if (bar_node >= 0)
					rm__ln_add_operand(&g, bar_node);
				ADD_NODE(st, -1);
				ag_done[grp] = rm__ln_add_node(&g, LN_DONE, CK_AG, 0, coll_latency(lx, CK_AG, bytes), bytes);
				rm__ln_add_operand(&g, st);
				ADD_NODE(ag_done[grp], -1);
			}
			for (int q = 0; q < nl; q++) {
				const slot *u = &c->slots[ls[q]];
				const rm_op *uo = &lg->ops[u->op];
				int ag_ = lx->ar.n == 0 ? 0 : uo->fwd_op >= 0 ? lx->ar.of_op[uo->fwd_op] : -1;
				if (ddp && u->phase != RM_PPHASE_FWD && uo->phase == RM_PHASE_BWD_WGRAD && ag_ >= 0)
					ar_last[ag_] = ls[q];
				if (u->phase == RM_PPHASE_FWD || !reduce)
					continue;
				if (uo->phase == RM_PHASE_BWD_WGRAD && lx->rs.of_op[uo->fwd_op] >= 0)
					rs_last[lx->rs.of_op[uo->fwd_op]] = ls[q];
				if (uo->phase != RM_PHASE_FWD && uo->kind != RM_OP_COLLECTIVE && lx->norm_elems > 0 &&
				    is_norm_op(&lg->ops[uo->fwd_op]))
					norm_last = ls[q];
			}
		}
		int64_t out = 0;
		if (s->phase == RM_PPHASE_RECOMPUTE) {
			for (int i = 0; i < op->n_outputs; i++)
				if (plan_of(lx, layer)->fate[op->outputs[i]] == RM_FATE_RECOMPUTED)
					out += lg->values[op->outputs[i]].bytes;
		} else if (op->phase == RM_PHASE_BWD_WGRAD) {
			out = lg->ops[op->fwd_op].weight_elems * lx->gsize;
		} else {
			out = grad_tensor_bytes(lx, lg, op, layer, op->bytes_written);
		}
		int me = rm__ln_add_node(&g, LN_COMPUTE, -1, s->units, 0, out);
		ADD_NODE(me, j);
		node_of[j - from] = me;
		rm__ln_add_operand(&g, saved_node);
		if (bar_node >= 0)
			rm__ln_add_operand(&g, bar_node);
		int fwd = op->phase == RM_PHASE_FWD ? s->op : op->fwd_op;
		if (colls && lx->ag.of_op[fwd] >= 0 && ag_done[lx->ag.of_op[fwd]] >= 0 && slot_reads_group(lx, s, lx->ag.of_op[fwd]))
			rm__ln_add_operand(&g, ag_done[lx->ag.of_op[fwd]]);
		if (s->phase == RM_PPHASE_RECOMPUTE) {
			if (last_rec >= 0)
				rm__ln_add_operand(&g, last_rec);
			last_rec = me;
		} else {
			for (int i = 0; i < op->n_residuals; i++) {
				int v = op->residuals[i];
				if (plan_of(lx, layer)->fate[v] != RM_FATE_RECOMPUTED || lg->values[v].producer < 0)
					continue;
				int pj = find_slot(c, lg->values[v].producer, layer, mb, RM_PPHASE_RECOMPUTE);
				if (pj >= from && pj < j)
					rm__ln_add_operand(&g, node_of[pj - from]);
			}
			/* the gradients it reads (grad_flow): its dY's producer, or the gradient
			 * entering the layer (the layer above's input gradient), and the partial
			 * sums it adds to */
			const grad_flow *fl = &lx->gflow;
			int dys = fl->dy_src[s->op];
			int dyn = dys >= 0 ? grad_node[dys] : chain_node;
			if (dyn >= 0)
				rm__ln_add_operand(&g, dyn);
			for (int k = 0; k < RM_OP_MAX_INPUTS && fl->acc_src[(size_t)s->op * RM_OP_MAX_INPUTS + k] >= 0; k++) {
				int an = grad_node[fl->acc_src[(size_t)s->op * RM_OP_MAX_INPUTS + k]];
				if (an >= 0 && an != dyn)
					rm__ln_add_operand(&g, an);
			}
			grad_node[s->op] = me;
		}
		if (op->phase == RM_PHASE_BWD_WGRAD && lx->rs.of_op[op->fwd_op] >= 0) {
			int grp = lx->rs.of_op[op->fwd_op];
			if (n_rs_wg[grp] < 96)
				rs_wg[grp][n_rs_wg[grp]++] = me;
			if (rs_last[grp] == j) {
				int64_t bytes = lx->rs.elems[grp] * lx->gsize;
				int st = rm__ln_add_node(&g, LN_START, CK_RS, 0, 0, bytes);
				ADD_NODE(st, -1);
				for (int q = 0; q < n_rs_wg[grp]; q++)
					rm__ln_add_operand(&g, rs_wg[grp][q]);
				int dn = rm__ln_add_node(&g, LN_DONE, CK_RS, 0, coll_latency(lx, CK_RS, bytes),
							 bytes / x->cfg->wl->train.fsdp);
				rm__ln_add_operand(&g, st);
				ADD_NODE(dn, -1);
			}
		}
		int arg = lx->ar.n == 0 ? 0 : op->fwd_op >= 0 ? lx->ar.of_op[op->fwd_op] : -1;
		if (ddp && op->phase == RM_PHASE_BWD_WGRAD && arg >= 0) {
			if (n_ar_wg[arg] < 96)
				ar_wg[arg][n_ar_wg[arg]++] = me;
			if (ar_last[arg] == j) {
				/* emit_replica_reduce: the group's gradients (the layer's, ungrouped), in place */
				int64_t bytes = (lx->ar.n > 0 ? ar_group_elems(lx, arg) : lg->params) * lx->gsize;
				int st = rm__ln_add_node(&g, LN_START, CK_AR, 0, 0, 0);
				ADD_NODE(st, -1);
				for (int q = 0; q < n_ar_wg[arg]; q++)
					rm__ln_add_operand(&g, ar_wg[arg][q]);
				int dn = rm__ln_add_node(&g, LN_DONE, CK_AR, 0, coll_latency(lx, CK_AR, bytes), 0);
				rm__ln_add_operand(&g, st);
				ADD_NODE(dn, -1);
			}
		}
		if (op->phase != RM_PHASE_FWD && op->kind != RM_OP_COLLECTIVE && reduce && lx->norm_elems > 0 &&
		    is_norm_op(&lg->ops[op->fwd_op])) {
			if (n_norm < 96)
				norm_nodes[n_norm++] = me;
			if (norm_last == j) {
				int64_t bytes = lx->norm_elems * lx->gsize;
				int st = rm__ln_add_node(&g, LN_START, CK_AR, 0, 0, bytes);
				ADD_NODE(st, -1);
				for (int q = 0; q < n_norm; q++)
					rm__ln_add_operand(&g, norm_nodes[q]);
				int dn = rm__ln_add_node(&g, LN_DONE, CK_AR, 0, coll_latency(lx, CK_AR, bytes), bytes);
				rm__ln_add_operand(&g, st);
				ADD_NODE(dn, -1);
			}
		}
	}
	/* the exit: everything the segment leaves unread */
	used = rm_new(bool, (size_t)g.n + 1);
	for (int q = 0; q < g.n_operands; q++)
		used[g.operands[q]] = true;
	{
		int n_before = g.n;
		int ex = rm__ln_add_node(&g, LN_COMPUTE, -1, 0, 0, 0);
		ADD_NODE(ex, -1);
		for (int i = 0; i < n_before; i++)
			if (!used[i])
				rm__ln_add_operand(&g, i);
	}
#undef ADD_NODE
	int *order = rm_new(int, (size_t)g.n + 1);
	ln_rule *rule = rm_new(ln_rule, (size_t)g.n + 1);
	rm__lhs_params p = lhs_params_of(x);
	if (!rm__lhs_list(&p, c->baseline + x->grad_live, &g, order, rule)) {
		free(order);
		free(rule);
		goto out;
	}
	slot *seg = rm_new(slot, (size_t)ns + 1);
	int *old_pos = rm_new(int, (size_t)ns + 1);
	int w = 0, moved = 0;
	int rules[LN_RULE_COUNT] = {0};
	for (int i = 0; i < g.n; i++) {
		int j = slot_of[order[i]];
		if (j < 0)
			continue;
		old_pos[w] = j;
		seg[w++] = c->slots[j];
		if (rule[order[i]] != LN_RULE_ORIGINAL_ORDER && rule[order[i]] != LN_RULE_ONLY_READY)
			rules[rule[order[i]]]++;
	}
	assert(w == ns);
	for (int q = 0; q < ns; q++)
		moved += old_pos[q] != from + q;
	memcpy(&c->slots[from], seg, (size_t)ns * sizeof(slot));
	c->lx_n = -1; /* the layer index (comp_layer_slots) is rebuilt for the new order */
	/* recomputed activations live at once: each from its recompute slot to its last reader */
	{
		int64_t *delta = rm_new(int64_t, (size_t)c->n + 2), per_layer = 0;
		for (int l = 0; l < x->L; l++) {
			const ctx *lx = layer_ctx(x, l);
			const rm_graph *lg = lx->layer;
			int nl;
			const int *ls = comp_layer_slots(c, l, mb, &nl);
			int64_t mine = 0;
			for (int v = 0; v < lg->n_values; v++) {
				if (plan_of(lx, l)->fate[v] != RM_FATE_RECOMPUTED || lg->values[v].producer < 0)
					continue;
				int pj = find_slot(c, lg->values[v].producer, l, mb, RM_PPHASE_RECOMPUTE);
				if (pj < from || pj >= to)
					continue;
				int last = pj;
				for (int q = 0; q < nl; q++) {
					const slot *u = &c->slots[ls[q]];
					const rm_op *uo = &lg->ops[u->op];
					bool reads = false;
					if (u->phase == RM_PPHASE_RECOMPUTE)
						for (int i = 0; i < uo->n_inputs; i++)
							reads |= uo->inputs[i] == v;
					else if (u->phase == RM_PPHASE_BWD)
						for (int i = 0; i < uo->n_residuals; i++)
							reads |= uo->residuals[i] == v;
					if (reads && ls[q] > last)
						last = ls[q];
				}
				delta[pj] += lg->values[v].bytes;
				delta[last + 1] -= lg->values[v].bytes;
				mine += lg->values[v].bytes;
			}
			if (mine > per_layer)
				per_layer = mine;
		}
		int64_t cur = 0, most = 0;
		for (int j = 0; j <= c->n; j++) {
			cur += delta[j];
			if (cur > most)
				most = cur;
		}
		if (most > x->rep->lhs_live_recompute_bytes)
			x->rep->lhs_live_recompute_bytes = most;
		if (per_layer > x->rep->lhs_recompute_layer_bytes)
			x->rep->lhs_recompute_layer_bytes = per_layer;
		free(delta);
	}
	x->rep->lhs_moved_slots += moved;
	if (moved > 0) {
		int best = LN_RULE_NONE;
		for (int r = 0; r < LN_RULE_COUNT; r++)
			if (rules[r] > rules[best])
				best = r;
		if (best != LN_RULE_NONE)
			x->rep->lhs_move_rule = rm__ln_rule_name((ln_rule)best);
	}
	free(seg);
	free(old_pos);
	free(order);
	free(rule);
out:
	rm__ln_graph_finish(&g);
	free(node_of);
	free(grad_node);
	free(slot_of);
	free(used);
}

static void build_entry(const ctx *x, comp *c, const comp *fwd, const comp *bwd)
{
	bool colls = x->cfg->wl->train.fsdp > 1;
	bool unrolled = !x->cfg->scan;
	int64_t *delta = NULL;
	int opt_pos;
	int *mb_start = rm_new(int, (size_t)x->A + 1);
	int *fwd_loop = rm_new(int, (size_t)x->A + 1), *bwd_loop = rm_new(int, (size_t)x->A + 1);
	int *emb_op = rm_new(int, (size_t)x->A + 1), *logits_op = rm_new(int, (size_t)x->A + 1);
	int *head_wgrad = rm_new(int, (size_t)x->A + 1), *head_norm = rm_new(int, (size_t)x->A + 1);
	int *emb_bwd = rm_new(int, (size_t)x->A + 1);
	/* a scan with dense first layers: those run unrolled around the loops, from dense_start
	 * (forward) to dense_end (the end of their backward) */
	int l0 = first_scanned(x);
	int *dense_start = rm_new(int, (size_t)x->A + 1), *dense_end = rm_new(int, (size_t)x->A + 1);
	int grads_from = -1; /* the first backward slot: the gradient shards are live from there */
	for (int mb = 0; mb < x->A; mb++) {
		mb_start[mb] = c->n;
		for (int i = 0; i < x->embed->n_fwd_ops; i++)
			comp_add_slot(c, (slot){SLOT_OP, PART_EMBED, i, 0, mb, RM_PPHASE_FWD, slot_units(x, &x->embed->ops[i]), false, false});
		emb_op[mb] = mb_start[mb];
		dense_start[mb] = c->n;
		for (int l = 0; l < l0; l++) {
			const rm_graph *lg = layer_ctx(x, l)->layer;
			for (int i = 0; i < lg->n_fwd_ops; i++)
				comp_add_slot(c, (slot){SLOT_OP, PART_LAYER, i, l, mb, RM_PPHASE_FWD,
							slot_units_at(x, &lg->ops[i], l, RM_PPHASE_FWD), false, false});
		}
		fwd_loop[mb] = c->n;
		if (unrolled) {
			for (int l = 0; l < x->L; l++) {
				const rm_graph *lg = layer_ctx(x, l)->layer;
				for (int i = 0; i < lg->n_fwd_ops; i++)
					comp_add_slot(c, (slot){SLOT_OP, PART_LAYER, i, l, mb, RM_PPHASE_FWD,
								slot_units_at(x, &lg->ops[i], l, RM_PPHASE_FWD), false, false});
			}
		} else {
			comp_add_slot(c, (slot){SLOT_FWD_LOOP, PART_LAYER, -1, 0, mb, RM_PPHASE_FWD,
						loop_units(x, fwd), colls, false});
		}
		logits_op[mb] = -1;
		for (int i = 0; i < x->head->n_ops; i++) {
			const rm_op *op = &x->head->ops[i];
			int j = comp_add_slot(c, (slot){SLOT_OP, PART_HEAD, i, 0, mb,
							op->phase == RM_PHASE_FWD ? RM_PPHASE_FWD : RM_PPHASE_BWD, slot_units(x, op), false, false});
			if (op->kind == RM_OP_GEMM && op->phase == RM_PHASE_FWD && logits_op[mb] < 0)
				logits_op[mb] = j;
			if (op->phase != RM_PHASE_FWD && grads_from < 0)
				grads_from = j;
			if (op->phase == RM_PHASE_BWD_WGRAD)
				head_wgrad[mb] = j;
			if (op->phase != RM_PHASE_FWD && is_norm_op(&x->head->ops[op->fwd_op]))
				head_norm[mb] = j;
		}
		bwd_loop[mb] = c->n;
		if (unrolled) {
			for (int l = x->L - 1; l >= 0; l--)
				add_layer_slots(x, c, l, mb, true);
		} else {
			comp_add_slot(c, (slot){SLOT_BWD_LOOP, PART_LAYER, -1, 0, mb, RM_PPHASE_BWD,
						loop_units(x, bwd), colls, false});
			for (int l = l0 - 1; l >= 0; l--)
				add_layer_slots(x, c, l, mb, true);
		}
		dense_end[mb] = c->n;
		emb_bwd[mb] = -1;
		for (int i = x->embed->n_fwd_ops; i < x->embed->n_ops; i++) {
			int j = comp_add_slot(c, (slot){SLOT_OP, PART_EMBED, i, 0, mb, RM_PPHASE_BWD,
							slot_units(x, &x->embed->ops[i]), false, false});
			if (x->embed->ops[i].phase == RM_PHASE_BWD_WGRAD)
				emb_bwd[mb] = j;
		}
	}
	opt_pos = comp_add_slot(c, (slot){SLOT_OPTIMIZER, PART_LAYER, -1, 0, 0, RM_PPHASE_OPTIMIZER, optimizer_units(x), false, false});
	/* XLA's scheduler orders the compute of an unrolled backward too (reorder_backward) */
	if (unrolled && x->cfg->mode == RM_SCHED_XLA && x->cfg->flags.latency_hiding_scheduler)
		for (int mb = 0; mb < x->A; mb++)
			reorder_backward(x, c, bwd_loop[mb], dense_end[mb], mb);
	delta = rm_new(int64_t, (size_t)c->n + 2);
	if (grads_from >= 0) {
		delta[grads_from] += x->grad_live;
		delta[opt_pos + 1] -= x->grad_live;
	}
	for (int mb = 0; mb < x->A; mb++) {
		/* between the loops the stacked residuals are live; inside them the bodies track them */
		if (!unrolled) {
			delta[fwd_loop[mb] + 1] += x->stacks;
			delta[bwd_loop[mb]] -= x->stacks;
		}
		if (l0 > 0) {
			/* the dense layers' own temporaries, and what they keep from their forward to
			 * their backward (the stacks cover the loops) */
			int64_t kept = 0;
			for (int l = 0; l < l0; l++) {
				const rm_remat_plan *pl = plan_of(layer_ctx(x, l), l);
				kept += pl->saved_bytes + pl->carry_bytes;
				add_layer_temps(x, c, l, mb, false, delta);
				add_layer_temps(x, c, l, mb, true, delta);
			}
			delta[dense_start[mb]] += kept;
			delta[fwd_loop[mb] + 1] -= kept;
			delta[bwd_loop[mb] + 1] += kept;
			delta[dense_end[mb]] -= kept;
		}
		if (unrolled) {
			for (int l = 0; l < x->L; l++) {
				add_layer_temps(x, c, l, mb, false, delta);
				add_layer_temps(x, c, l, mb, true, delta);
			}
			delta[fwd_loop[mb]] += x->stacks;
			delta[emb_bwd[mb] >= 0 ? emb_bwd[mb] : opt_pos] -= x->stacks;
		}
		if (!colls)
			continue;
		int64_t emb_elems = graph_weight_elems(x->embed, true);
		int64_t head_elems = graph_weight_elems(x->head, true);
		int64_t fnorm = 0;
		for (int i = 0; i < x->head->n_fwd_ops; i++)
			if (is_norm_op(&x->head->ops[i]))
				fnorm += x->head->ops[i].weight_elems;
		entry_coll(x, c, CK_AG, WHAT_EMBED, mb, emb_elems, mb_start[mb], emb_op[mb]);
		delta[emb_op[mb]] += emb_elems * x->psize;
		delta[emb_op[mb] + 1] -= emb_elems * x->psize;
		/* a micro-batch's gradient reductions are due before the next micro-batch starts:
		 * they accumulate into the persistent shards, nothing waits for the optimizer */
		int mb_end = mb + 1 < x->A ? mb_start[mb + 1] : opt_pos;
		if (head_elems > 0) {
			entry_coll(x, c, CK_AG, WHAT_HEAD, mb, head_elems, mb_start[mb], logits_op[mb]);
			delta[logits_op[mb]] += head_elems * x->psize;
			delta[bwd_loop[mb]] -= head_elems * x->psize;
			entry_coll(x, c, CK_RS, WHAT_HEAD, mb, head_elems, head_wgrad[mb] + 1, mb_end);
		}
		if (fnorm > 0)
			entry_coll(x, c, CK_AR, WHAT_FINAL_NORM, mb, fnorm, head_norm[mb] + 1, mb_end);
		if (emb_bwd[mb] >= 0)
			entry_coll(x, c, CK_RS, WHAT_EMBED, mb, emb_elems, emb_bwd[mb] + 1, mb_end);
		for (int l = 0; l < l0; l++) {
			/* a dense layer beside the scan: its gathers from the micro-batch's start, its
			 * reductions due by its end (their full gradients live until then) */
			int n_before = c->nc;
			add_layer_colls(x, c, l, mb, false, delta, false, 0, false, 0);
			add_layer_colls(x, c, l, mb, true, delta, false, 0, false, 0);
			for (int i = n_before; i < c->nc; i++) {
				coll *k = &c->colls[i];
				if (k->kind == CK_AG) {
					if (!(k->bwd_pass && x->barrier))
						k->s_min = mb_start[mb];
					continue;
				}
				if (k->kind == CK_RS) {
					delta[c->n] += k->bytes;
					delta[mb_end] -= k->bytes;
				}
				k->deadline = mb_end;
			}
		}
		if (unrolled) {
			int first_coll = c->nc;
			for (int l = 0; l < x->L; l++) {
				int n_before = c->nc;
				add_layer_colls(x, c, l, mb, false, delta, false, 0, false, 0);
				add_layer_colls(x, c, l, mb, true, delta, false, 0, false, 0);
				for (int i = n_before; i < c->nc; i++)
					if (c->colls[i].kind == CK_AG && !(c->colls[i].bwd_pass && x->barrier))
						c->colls[i].s_min = mb_start[mb];
			}
			/* A runtime that prefetches (ideal, fsdp2) issues a layer's gather when the
			 * layer ag_ahead before it in execution order starts: forward l - d, backward
			 * l + d; the first backward gathers when the head starts (FSDP2's forward
			 * prefetch is the CPU issuing the next block's gather while this block runs, its
			 * backward_prefetch one block). XLA's scheduler chooses within [s_min, done]. */
			if (x->cfg->mode != RM_SCHED_XLA)
				for (int i = first_coll; i < c->nc; i++) {
					coll *k = &c->colls[i];
					if (k->kind != CK_AG || k->what != WHAT_LAYER)
						continue;
					int target = k->bwd_pass ? k->body_layer + x->ag_ahead : k->body_layer - x->ag_ahead;
					int at = k->bwd_pass ? logits_op[mb] : mb_start[mb];
					if (target >= 0 && target < x->L) {
						int nl;
						const int *ls = comp_layer_slots(c, target, mb, &nl);
						for (int q = 0; q < nl; q++)
							if ((c->slots[ls[q]].phase != RM_PPHASE_FWD) == k->bwd_pass) {
								at = ls[q];
								break;
							}
					}
					if (at > k->s_min && at <= k->deadline)
						k->s_min = at;
				}
			/* Unrolled, a layer's gradients need not wait for the end of the step: their
			 * reduction is due when the next layer down has produced its own (the order the
			 * backward runs in), which bounds the live full-size gradients to about two layers. */
			for (int i = first_coll; i < c->nc; i++) {
				coll *k = &c->colls[i];
				if (k->kind == CK_AG)
					continue;
				int due = c->n;
				for (int q = first_coll; q < c->nc; q++)
					if (c->colls[q].kind == k->kind && c->colls[q].body_layer == k->body_layer - 1 &&
					    c->colls[q].group == k->group)
						due = c->colls[q].s_min;
				if (due < k->s_min)
					due = k->s_min;
				if (k->kind == CK_RS) {
					delta[c->n] += k->bytes;
					delta[due] -= k->bytes;
				}
				k->deadline = due;
			}
			continue;
		}
		/* pipelining's prologue (the first iteration's gathers) and epilogue (the last
		 * iteration's reduce-scatters) live in the entry computation */
		for (int bl = 0; bl < x->ag_ahead && l0 + bl < x->L; bl++) {
			if (x->pipe_ag) {
				for (int g = 0; g < x->ag.n; g++) {
					coll *k = entry_coll(x, c, CK_AG, WHAT_LAYER, mb, x->ag.elems[g], mb_start[mb], fwd_loop[mb]);
					k->group = g;
					k->body_layer = l0 + bl;
					if (x->barrier)
						continue; /* the backward's gathers stay in their iteration */
					k = entry_coll(x, c, CK_AG, WHAT_LAYER, mb, x->ag.elems[g], fwd_loop[mb] + 1, bwd_loop[mb]);
					k->group = g;
					k->body_layer = x->L - 1 - bl;
					k->bwd_pass = true;
				}
			}
		}
		/* the reductions issued one layer behind leave the last layer of the backward (layer
		 * 0) to the epilogue */
		for (int bl = 0; bl < 1; bl++) {
			if (x->pipe_rs && l0 < x->L) {
				int l = l0; /* the scan's last backward layer */
				for (int g = 0; g < x->rs.n; g++) {
					coll *k = entry_coll(x, c, CK_RS, WHAT_LAYER, mb, x->rs.elems[g], bwd_loop[mb] + 1, mb_end);
					k->group = g;
					k->body_layer = l;
				}
				if (x->pipe_ar && x->norm_elems > 0) {
					coll *k = entry_coll(x, c, CK_AR, WHAT_LAYER, mb, x->norm_elems, bwd_loop[mb] + 1, mb_end);
					k->body_layer = l;
				}
			}
		}
	}
	finish_temps(c, delta);
	free(delta);
	free(mb_start);
	free(fwd_loop);
	free(bwd_loop);
	free(emb_op);
	free(logits_op);
	free(head_wgrad);
	free(head_norm);
	free(emb_bwd);
	free(dense_start);
	free(dense_end);
}

/* Indexes the collectives by the positions where they start or end (for the emission). */
static void index_positions(comp *c)
{
	c->at_first = rm_new(int, (size_t)c->n + 2);
	c->at_list = rm_new(int, (size_t)2 * c->nc + 1);
	for (int i = 0; i < c->nc; i++) {
		const coll *k = &c->colls[i];
		c->at_first[k->start_pos + 1]++;
		if (k->done_pos != k->start_pos)
			c->at_first[k->done_pos + 1]++;
	}
	for (int j = 0; j <= c->n; j++)
		c->at_first[j + 1] += c->at_first[j];
	int *fill = rm_new(int, (size_t)c->n + 1);
	for (int i = 0; i < c->nc; i++) {
		const coll *k = &c->colls[i];
		c->at_list[c->at_first[k->start_pos] + fill[k->start_pos]++] = i;
		if (k->done_pos != k->start_pos)
			c->at_list[c->at_first[k->done_pos] + fill[k->done_pos]++] = i;
	}
	free(fill);
}

/*
 * The fused kernels of the memory-bound ops, once per plan (docs/sim.md "Fusion"): XLA (and the
 * ideal bound, which prices XLA's kernels) fuses the whole step; torch.compile as torchtitan
 * applies it compiles each transformer block, so the embedding and the head (the fp32 loss)
 * stay eager graphs; PyTorch eager runs every op as its decomposition. Horizontal fusion and
 * adds folded into cuBLAS calls are XLA's; Inductor does neither.
 */
static void build_fusions(ctx *x)
{
	const rm_schedule_config *cfg = x->cfg;
	x->fuse = !cfg->eager && cfg->fusion != RM_FUSION_OFF;
	if (!x->fuse)
		return;
	sched_fusion_opts opts = {.horizontal = cfg->mode != RM_SCHED_FSDP2,
				  .gemm_epilogue = cfg->mode != RM_SCHED_FSDP2,
				  .no_complex = cfg->mode == RM_SCHED_FSDP2};
	const rm_graph *g = x->layer;
	int nv = g->n_values > x->head->n_values ? g->n_values : x->head->n_values;
	if (x->embed->n_values > nv)
		nv = x->embed->n_values;
	bool *keep = rm_new(bool, (size_t)nv + 1), *run = rm_new(bool, (size_t)g->n_ops + 1);
	for (int p = 0; p < (x->recompute_layers > 0 ? 2 : 1); p++) {
		const rm_remat_plan *pl = p == 0 ? &x->plan : &x->plan_keep;
		for (int v = 0; v < g->n_values; v++)
			keep[v] = pl->fate[v] == RM_FATE_SAVED || pl->fate[v] == RM_FATE_CARRY ||
				  pl->fate[v] == RM_FATE_OFFLOADED;
		sched_fusion_build(g, NULL, keep, opts, &x->fu_layer[p]);
		/* the recompute pass writes what the backward reads */
		for (int v = 0; v < g->n_values; v++)
			keep[v] = pl->fate[v] == RM_FATE_RECOMPUTED;
		for (int i = 0; i < g->n_ops; i++)
			run[i] = i < g->n_fwd_ops && pl->recompute[i];
		sched_fusion_build(g, run, keep, opts, &x->fu_rec[p]);
	}
	for (int k = 0; k < 2 && cfg->mode != RM_SCHED_FSDP2; k++) {
		const rm_graph *pg = k == 0 ? x->embed : x->head;
		for (int v = 0; v < pg->n_values; v++)
			keep[v] = rm_graph_value_is_residual(pg, v);
		sched_fusion_build(pg, NULL, keep, opts, k == 0 ? &x->fu_embed : &x->fu_head);
	}
	free(keep);
	free(run);
}

static void finish_fusions(ctx *x)
{
	for (int p = 0; p < 2; p++) {
		sched_fusion_finish(&x->fu_layer[p]);
		sched_fusion_finish(&x->fu_rec[p]);
	}
	sched_fusion_finish(&x->fu_embed);
	sched_fusion_finish(&x->fu_head);
}

/*
 * Lays c out in the order the rematerialization pass left (r->order_src): its clones become
 * SLOT_REMAT slots, a moved slot leaves its place. A collective's position p (just before slot
 * p) becomes the position before the clones that now precede slot p, so they run inside its
 * window and after its done; the temporaries of a clone's position are those of the slot after it.
 */
static void apply_remat(comp *c, const rm__remat_result *r)
{
	int n = r->n_order;
	slot *slots = rm_new(slot, (size_t)n + 1);
	int64_t *temps = rm_new(int64_t, (size_t)n + 2);
	int *newpos = rm_new(int, (size_t)c->n + 2), *kept_src = rm_new(int, (size_t)n + 1);
	for (int j = 0; j <= c->n; j++)
		newpos[j] = -1;
	int run_start = 0; /* where the clones before the next original slot begin */
	int q = 0;
	for (int p = 0; p < n; p++) {
		int src = r->order_src[p];
		if (src >= c->n)
			continue; /* the sequence's end (never cloned) */
		slot sl = c->slots[src];
		if (r->order_clone[p]) {
			sl.kind = SLOT_REMAT;
			sl.moved = r->order_move[p];
		} else {
			newpos[src] = run_start;
		}
		kept_src[q] = src;
		slots[q] = sl;
		if (!r->order_clone[p])
			run_start = q + 1;
		q++;
	}
	newpos[c->n] = run_start;
	/* a moved slot's position: that of the next slot kept */
	for (int j = c->n - 1; j >= 0; j--)
		if (newpos[j] < 0)
			newpos[j] = newpos[j + 1];
	/* the temporaries at each new position: those of the original slot at or after it */
	temps[q] = c->temps[c->n];
	for (int k = q - 1, next = c->n; k >= 0; k--) {
		if (slots[k].kind != SLOT_REMAT)
			next = kept_src[k];
		temps[k] = c->temps[next];
	}
	for (int i = 0; i < c->nc; i++) {
		coll *k = &c->colls[i];
		if (k->start_pos >= 0)
			k->start_pos = newpos[k->start_pos];
		if (k->done_pos >= 0)
			k->done_pos = newpos[k->done_pos];
		k->s_min = k->s_min >= 0 && k->s_min <= c->n ? newpos[k->s_min] : k->s_min;
		k->deadline = k->deadline >= 0 && k->deadline <= c->n ? newpos[k->deadline] : k->deadline;
	}
	free(c->slots);
	free(c->temps);
	c->slots = slots;
	c->temps = temps;
	c->n = q;
	c->cap = n + 1;
	c->lx_n = -1; /* the layer index is stale */
	free(newpos);
	free(kept_src);
}

/*
 * XLA's rematerialization pass on the final schedule of computation c (rm__hlo_remat): the GPU
 * compiler runs HloRematerialization after scheduling with the scheduler's memory limit
 * (gpu_compiler.cc RunPostSchedulingPipelines, "remat-pipeline"), which HloRematerialization::Run
 * lowers by the entry's output size. Its buffers are the layer activations c holds (value_span:
 * forward values, recomputed and reloaded ones in the backward); only those an elementwise op
 * (a fusion) produces can be recomputed: GEMMs and attention are cuBLAS/cuDNN custom calls,
 * reloads copies. Everything else the sweep tracks (stacks, gathered weights, open windows,
 * gradients) is fixed memory around them. A body's limit is the module's less what the entry holds
 * at the loop, which is the body's baseline here. The counts go to the report once per run of
 * c (iterations: the loop's trip count times the micro-batches; 1 for the entry).
 */
static void remat_comp(const ctx *x, comp *c, int iterations)
{
	/* the sweep's tracked peak is the sequence's peak: "already fits" needs no buffers built */
	if (x->cfg->mode != RM_SCHED_XLA || x->cfg->flags.remat_pass_disabled || c->n == 0 ||
	    c->tracked_peak <= x->remat_limit)
		return;
	rm__rseq s;
	rm__rseq_init(&s, c->n + 1);
	int64_t *wdelta = rm_new(int64_t, (size_t)c->n + 2), *bdelta = rm_new(int64_t, (size_t)c->n + 2);
	for (int i = 0; i < c->nc; i++) {
		const coll *k = &c->colls[i];
		if (!k->sync && k->start_pos >= 0 && k->start_pos < k->done_pos && k->mem_bytes > 0) {
			wdelta[k->start_pos] += k->mem_bytes;
			wdelta[k->done_pos + 1] -= k->mem_bytes;
		}
	}
	int *readers = rm_new(int, (size_t)c->n + 1);
	int n_idx;
	comp_layer_slots(c, 0, 0, &n_idx);
	int layers = c->lx_layers, mbs = c->lx_mbs;
	for (int bl = 0; bl < layers; bl++)
		for (int mb = 0; mb < mbs; mb++)
			for (int pass = 0; pass < 2; pass++) {
				const ctx *xl = layer_ctx(x, bl);
				const rm_graph *g = xl->layer;
				for (int v = 0; v < g->n_values; v++) {
					int prod, nr;
					if (!value_span(x, c, bl, mb, pass == 1, v, &prod, readers, &nr))
						continue;
					const rm_op *op = &g->ops[c->slots[prod].op];
					bool reload = pass == 1 && plan_of(xl, bl)->fate[v] == RM_FATE_OFFLOADED;
					int64_t bytes = g->values[v].bytes;
					/* a forward value that lives inside a fused kernel has no buffer of its own;
					 * an op that also writes a saved value is left alone (its stacked output is
					 * not a buffer of this sequence) */
					bool fused_away = pass == 0 && value_bytes(xl, g, v, bl, RM_PPHASE_FWD) == 0;
					for (int o = 0; pass == 0 && o < op->n_outputs; o++) {
						rm_value_fate fo = plan_of(xl, bl)->fate[op->outputs[o]];
						fused_away |= fo == RM_FATE_SAVED || fo == RM_FATE_CARRY;
					}
					int b = rm__rseq_add_buf(&s, prod, bytes,
								 op->kind == RM_OP_ELEMENTWISE && !reload && !fused_away);
					int last = prod;
					for (int r = 0; r < nr; r++) {
						rm__rseq_add_use(&s, readers[r], b);
						if (readers[r] > last)
							last = readers[r];
					}
					bdelta[prod] += bytes;
					bdelta[last + 1] -= bytes;
				}
			}
	int64_t open = 0, tracked = 0;
	for (int j = 0; j <= c->n; j++) {
		open += wdelta[j];
		tracked += bdelta[j];
		s.other[j] = c->baseline + c->temps[j] + open - tracked;
		const slot *sl = j < c->n ? &c->slots[j] : NULL;
		if (sl && sl->kind == SLOT_OP && sl->part == PART_LAYER)
			s.flops[j] = layer_ctx(x, sl->body_layer)->layer->ops[sl->op].flops;
	}
	rm__remat_result r;
	rm__hlo_remat(x->remat_limit, &s, &r);
	if (r.order_src)
		apply_remat(c, &r);
	rm__remat_result_finish(&r);
	rm_schedule_report *rep = x->rep;
	if (r.peak_before > x->remat_limit) {
		rep->remat_applied = true;
		rep->remat_over |= r.over;
		if (r.peak_before > rep->remat_peak_before_bytes)
			rep->remat_peak_before_bytes = r.peak_before;
		if (r.peak_after > rep->remat_peak_after_bytes)
			rep->remat_peak_after_bytes = r.peak_after;
		rep->remat_ops += r.recomputed * iterations;
		rep->remat_moves += r.moved * iterations;
		rep->remat_bytes += r.recomputed_bytes * iterations;
		rep->remat_flops += r.recomputed_flops * iterations;
	}
	free(readers);
	free(wdelta);
	free(bdelta);
	rm__rseq_finish(&s);
}

/* Places c's collectives, then runs XLA's rematerialization pass on it (a loop body: trips
 * runs of it a step, its layers the MoE ones as build_body's view; the entry: trips 0). */
static void schedule_comp(const ctx *x, comp *c, int trips)
{
	if (x->cfg->mode != RM_SCHED_XLA) {
		rm__ideal_windows(c);
	} else {
		rm__lhs_params p = lhs_params_of(x);
		rm__lhs_sweep(&p, c);
		if (c->first_memory_sync_tracked >= 0 && x->rep->first_memory_sync_tracked_bytes == 0)
			x->rep->first_memory_sync_tracked_bytes = c->first_memory_sync_tracked;
		ctx view = *x;
		view.n_dense = 0;
		remat_comp(trips > 0 ? &view : x, c, trips > 0 ? trips : 1);
	}
	index_positions(c);
	if (c->tracked_peak > x->rep->tracked_peak_bytes)
		x->rep->tracked_peak_bytes = c->tracked_peak;
}

/* The fields of x that follow from its layer graph: the weight groups of its gathers and
 * reductions, its replicated norm weights and its last weight gradient. */
static void init_layer_groups(ctx *x, int64_t ag_threshold, int64_t rs_threshold)
{
	const rm_schedule_config *cfg = x->cfg;
	bool xla = cfg->mode == RM_SCHED_XLA, local_experts = x->wl->train.ep > 1;
	group_weights(x->layer, ag_threshold, x->lpsize, 1, xla && cfg->flags.all_gather_combine_by_dim, false,
		      local_experts, &x->ag);
	group_weights(x->layer, rs_threshold, x->gsize, x->wl->train.fsdp, xla && cfg->flags.reduce_scatter_combine_by_dim,
		      true, local_experts, &x->rs);
	x->norm_elems = 0;
	for (int i = 0; i < x->layer->n_fwd_ops; i++)
		if (is_norm_op(&x->layer->ops[i]))
			x->norm_elems += x->layer->ops[i].weight_elems;
	x->last_wgrad = -1;
	for (int i = 0; i < x->layer->n_ops; i++)
		if (x->layer->ops[i].phase == RM_PHASE_BWD_WGRAD)
			x->last_wgrad = i;
	memset(&x->ar, 0, sizeof(x->ar));
	memset(x->ar_nops, 0, sizeof(x->ar_nops));
	x->ar_last_group = -1;
	if (xla && x->R > 1 && x->wl->train.fsdp == 1 && x->last_wgrad >= 0 && x->layer->n_ops <= 96) {
		group_weights(x->layer, cfg->flags.all_reduce_combine_threshold_bytes, x->gsize, 1, false, true,
			      local_experts, &x->ar);
		for (int i = 0; i < x->layer->n_ops; i++) {
			const rm_op *op = &x->layer->ops[i];
			if (op->phase == RM_PHASE_BWD_WGRAD && op->fwd_op >= 0 && x->ar.of_op[op->fwd_op] >= 0)
				x->ar_nops[x->ar.of_op[op->fwd_op]]++;
		}
		int lf = x->layer->ops[x->last_wgrad].fwd_op;
		x->ar_last_group = lf >= 0 ? x->ar.of_op[lf] : -1;
		if (x->ar_last_group < 0)
			x->ar.n = 0; /* the last weight gradient in no group: one all-reduce, as otherwise */
	}
}

/* Parameters the XLA DDP all-reduce group grp carries: its weights, and for the group of the
 * layer's last weight gradient the rest of the layer's parameters. */
static int64_t ar_group_elems(const ctx *x, int grp)
{
	if (grp != x->ar_last_group)
		return x->ar.elems[grp];
	int64_t rest = x->layer->params;
	for (int g = 0; g < x->ar.n; g++)
		if (g != grp)
			rest -= x->ar.elems[g];
	return rest;
}

/*
 * The context of the dense first layers of a mixture of experts (x->n_dense > 0): a copy of x
 * with the workload's dense_layer graph, its own remat plans under the same policy, weight groups
 * and norms. Both contexts then fence the backward's gathers if either plan recomputes.
 */
static rm_status init_dense_kind(ctx *x, ctx *d, int64_t ag_threshold, int64_t rs_threshold, rm_error *err)
{
	const rm_schedule_config *cfg = x->cfg;
	*d = *x;
	d->layer = &x->wl->dense_layer;
	memset(&d->plan, 0, sizeof(d->plan));
	memset(&d->plan_keep, 0, sizeof(d->plan_keep));
	RM_CHECK(rm_remat_plan_build_compiled(d->layer, cfg->policy, cfg->compile_partitioner, &d->plan, err));
	if (x->recompute_layers > 0) {
		rm_remat_policy *keep = rm_remat_policy_parse("everything_saveable", err);
		rm_status kst = keep ? rm_remat_plan_build(d->layer, keep, &d->plan_keep, err) : RM_INVALID;
		rm_remat_policy_destroy(keep);
		if (kst != RM_OK) {
			rm_remat_plan_finish(&d->plan);
			return kst;
		}
	}
	init_layer_groups(d, ag_threshold, rs_threshold);
	if (cfg->mode == RM_SCHED_XLA && cfg->prevent_cse)
		for (int v = 0; v < d->plan.n_values && !d->barrier; v++)
			d->barrier = d->plan.fate[v] == RM_FATE_RECOMPUTED;
	x->barrier = d->barrier = x->barrier || d->barrier;
	return RM_OK;
}

/* A projection as async TP chunks it: a plain GEMM over the tokens (not attention's batched
 * matmuls, not a routed expert's grouped GEMM). */
static bool atp_projection(const rm_op *op)
{
	return op->kind == RM_OP_GEMM && !op->gemm.has_batch_dims && op->gemm.batch == 1 && !op->expert;
}

static bool op_reads(const rm_op *op, int v)
{
	for (int i = 0; i < op->n_inputs; i++)
		if (op->inputs[i] == v)
			return true;
	return false;
}

/* The ATP_* role of every layer-graph op under train.async_tp (see ATP_AG). */
static void build_async_tp(ctx *x)
{
	const rm_train_config *t = &x->wl->train;
	if (!t->async_tp || t->tp < 2 || !t->sp || t->tp > RM_ATP_MAX)
		return;
	const rm_graph *g = x->layer;
	x->atp_n = (int)t->tp;
	x->atp_role = rm_new(int, (size_t)g->n_ops);
	x->atp_src = rm_new(int, (size_t)g->n_ops);
	for (int i = 0; i < g->n_ops; i++) {
		x->atp_role[i] = ATP_NONE;
		x->atp_src[i] = -1;
	}
	for (int i = 0; i < g->n_fwd_ops; i++) {
		const rm_op *op = &g->ops[i];
		if (op->kind != RM_OP_COLLECTIVE || op->coll_group != RM_GROUP_TP)
			continue;
		if (op->coll == RM_COLL_ALL_GATHER) {
			int v = op->outputs[0];
			for (int j = i + 1; j < g->n_fwd_ops; j++)
				if (atp_projection(&g->ops[j]) && op_reads(&g->ops[j], v)) {
					x->atp_role[j] = ATP_AG_USER;
					x->atp_src[j] = i;
					x->atp_role[i] = ATP_AG;
				}
		} else if (op->coll == RM_COLL_REDUCE_SCATTER) {
			int v = op->inputs[0], p = g->values[v].producer, readers = 0;
			for (int j = 0; j < g->n_fwd_ops; j++)
				readers += op_reads(&g->ops[j], v);
			if (p < 0 || !atp_projection(&g->ops[p]) || readers != 1)
				continue;
			x->atp_role[p] = ATP_RS_SRC;
			x->atp_role[i] = ATP_RS;
			/* the backward: the conjugate all-gather of the output gradient, and the
			 * projection's dgrad that reads it */
			for (int j = g->n_fwd_ops; j < g->n_ops; j++) {
				const rm_op *b = &g->ops[j];
				if (b->fwd_op == i && b->kind == RM_OP_COLLECTIVE && b->coll == RM_COLL_ALL_GATHER)
					x->atp_role[j] = ATP_BAG;
				else if (b->fwd_op == p && b->kind == RM_OP_GEMM && b->phase == RM_PHASE_BWD_DGRAD)
					x->atp_role[j] = ATP_BAG_USER;
			}
		}
	}
}

rm_program *rm_schedule_build(const rm_schedule_config *cfg, rm_schedule_report *rep_out, rm_error *err)
{
	rm_schedule_report local;
	rm_schedule_report *rep = rep_out ? rep_out : &local;
	memset(rep, 0, sizeof(*rep));
	if (!cfg || !cfg->wl || !cfg->policy || !cfg->hw) {
		rm_error_set(err, RM_INVALID, NULL, 0, 0, "schedule: workload, policy and hardware are required");
		return NULL;
	}
	const rm_workload *wl = cfg->wl;
	if (wl->train.pp > 1) {
		rm_error_set(err, RM_UNSUPPORTED, NULL, 0, 0,
			     "a pipelined scenario (parallelism.pp %lld) is simulated stage by stage, as `remora "
			     "simulate`, search and validate do; one program of the whole step (`remora schedule`, "
			     "--trace, --breakdown, exec) is not built for it yet",
			     (long long)wl->train.pp);
		return NULL;
	}
	int fsdp = (int)wl->train.fsdp, nodes = cfg->fsdp_nodes > 0 ? cfg->fsdp_nodes : 1;
	int gpn = (int)cfg->hw->gpus_per_node;
	if (fsdp % nodes != 0 || fsdp / nodes > gpn) {
		rm_error_set(err, RM_INVALID, NULL, 0, 0,
			     "an FSDP group of %d GPUs over %d node(s) does not fit %s nodes of %d GPUs", fsdp, nodes,
			     cfg->hw->name, gpn);
		return NULL;
	}
	ctx x = {.cfg = cfg, .wl = wl, .layer = &wl->layer, .embed = &wl->embedding, .head = &wl->head, .rep = rep};
	if (rm_remat_plan_build_compiled(&wl->layer, cfg->policy, cfg->compile_partitioner, &x.plan, err) != RM_OK)
		return NULL;
	x.L = (int)wl->model.layers;
	x.A = (int)wl->train.grad_accum;
	/* a periodic stretch: the runtimes whose micro-batches are emitted one after another, each
	 * alike (fsdp2, megatron, the ideal runtime unrolled: no scheduler across them) */
	int A_step = x.A;
	if (cfg->emit_micro_batches >= 3 && x.A > cfg->emit_micro_batches &&
	    (cfg->mode == RM_SCHED_FSDP2 || (cfg->mode == RM_SCHED_IDEAL && !cfg->scan)))
		x.A = cfg->emit_micro_batches;
	x.n_dense = (int)rm_workload_dense_layers(wl);
	bool xla = cfg->mode == RM_SCHED_XLA;
	/* double buffering unrolls the loop body twice when the loop runs at least two layers */
	x.k = xla && cfg->scan && cfg->flags.while_loop_double_buffering && x.L - first_scanned(&x) >= 2 ? 2 : 1;
	/* XLA's pipeliner fetches one iteration ahead (before double buffering unrolls the body) */
	x.ag_ahead = xla ? 1 : (cfg->prefetch_depth > 0 ? cfg->prefetch_depth : 1);
	x.psize = rm_dtype_size(wl->train.param_dtype);
	x.lpsize = wl->train.fp8_all_gather ? 1 : x.psize;
	x.gsize = rm_dtype_size(wl->train.grad_dtype);
	x.pipe_ag = cfg->scan && (xla ? rm_xla_pipelines_all_gather(&cfg->flags) : true);
	x.pipe_rs = cfg->scan && (xla ? rm_xla_pipelines_reduce_scatter(&cfg->flags) : true);
	x.pipe_ar = cfg->scan && (xla ? rm_xla_pipelines_all_reduce(&cfg->flags) : true);
	if (xla && cfg->prevent_cse)
		for (int v = 0; v < x.plan.n_values && !x.barrier; v++)
			x.barrier = x.plan.fate[v] == RM_FATE_RECOMPUTED;
	rep->backward_gathers_fenced = x.barrier && cfg->wl->train.fsdp > 1;
	int64_t ag_threshold = xla ? cfg->flags.all_gather_combine_threshold_bytes : INT64_MAX / 4;
	int64_t rs_threshold = xla ? cfg->flags.reduce_scatter_combine_threshold_bytes : INT64_MAX / 4;
	x.R = wl->train.dp_replicate > 1 ? (int)wl->train.dp_replicate : 1;
	init_layer_groups(&x, ag_threshold, rs_threshold);
	x.rep_nodes = cfg->replica_nodes > 0 ? cfg->replica_nodes : 1;
	x.rep_rs = wl->train.zero < 3;
	x.cost = cfg->cost ? cfg->cost : rm_cost_model_default();
	rm_static_memory sm = rm_workload_static_memory(wl);
	int64_t tokens = wl->train.micro_batch * wl->train.seq_len;
	/* entry parameters and outputs (GetSchedulerMemoryLimit): the train state (parameters,
	 * master weights, optimizer state) and the token batch in, the new state out, counted once
	 * when the state is donated (outputs alias the parameters); the gradient shards are
	 * temporaries of the step (x.grad_live), not I/O */
	int64_t state = sm.total - sm.grads;
	rep->io_bytes = state * (cfg->no_donate ? 2 : 1) + tokens * 4 * A_step;
	x.grad_live = sm.grads;
	double frac = cfg->mem_fraction > 0 ? cfg->mem_fraction : JAX_MEM_FRACTION;
	int64_t base = cfg->device_memory_bytes > 0 ? cfg->device_memory_bytes
		       : cfg->platform_allocator    ? (int64_t)(XLA_DEVICE_MEMORY_FRACTION * (double)cfg->hw->hbm_bytes)
						    : (int64_t)(frac * (double)cfg->hw->hbm_bytes);
	rep->memory_base_bytes = base;
	x.limit = (int64_t)((double)(base - rep->io_bytes) * cfg->flags.memory_limit_slop_factor / 100.0);
	if (x.limit < 0)
		x.limit = 0;
	rep->memory_limit_bytes = x.limit;
	/* HloRematerialization::Run: "Adjust memory limit to account for the output of the entry
	 * computation" (the new train state, whether donated or not) */
	x.remat_limit = x.limit > state ? x.limit - state : 0;
	rep->remat_limit_bytes = x.remat_limit;
	x.recompute_layers = cfg->recompute_num_layers > 0 && cfg->recompute_num_layers < x.L ? cfg->recompute_num_layers : 0;
	if (x.recompute_layers > 0) {
		if (cfg->scan) {
			rm_remat_plan_finish(&x.plan);
			rm_error_set(err, RM_INVALID, NULL, 0, 0,
				     "recompute_num_layers %d of %d layers needs the layers unrolled (remat.scan: false): a "
				     "scan runs one body for every layer",
				     cfg->recompute_num_layers, x.L);
			return NULL;
		}
		rm_remat_policy *keep = rm_remat_policy_parse("everything_saveable", err);
		rm_status kst = keep ? rm_remat_plan_build(&wl->layer, keep, &x.plan_keep, err) : RM_INVALID;
		rm_remat_policy_destroy(keep);
		if (kst != RM_OK) {
			rm_remat_plan_finish(&x.plan);
			return NULL;
		}
	}
	ctx dense;
	if (x.n_dense > 0) {
		if (init_dense_kind(&x, &dense, ag_threshold, rs_threshold, err) != RM_OK) {
			rm_remat_plan_finish(&x.plan);
			if (x.recompute_layers > 0)
				rm_remat_plan_finish(&x.plan_keep);
			return NULL;
		}
		rep->backward_gathers_fenced = x.barrier && cfg->wl->train.fsdp > 1;
		x.kinds[0] = dense.kinds[0] = &x;
		x.kinds[1] = dense.kinds[1] = &dense;
	}
	grad_flow_build(&x.gflow, x.layer);
	grad_flow_build(&x.embed_flow, x.embed);
	grad_flow_build(&x.head_flow, x.head);
	if (x.n_dense > 0)
		grad_flow_build(&dense.gflow, dense.layer);
	x.stacks = 0;
	rep->offloaded_bytes_step = 0;
	for (int l = 0; l < x.L; l++) {
		/* what each layer keeps under its kind's plan: the policy's, or everything past
		 * recompute_layers */
		const ctx *xl = layer_ctx(&x, l);
		const rm_remat_plan *pl = plan_of(xl, l);
		x.stacks += pl->saved_bytes + pl->carry_bytes;
		if (pl == &xl->plan)
			rep->offloaded_bytes_step += pl->offloaded_bytes;
	}
	rep->saved_bytes_step = x.stacks;
	build_fusions(&x);
	if (x.n_dense > 0) {
		dense.stacks = x.stacks;
		build_fusions(&dense);
	}
	/* async TP needs tensor parallelism, which mixtures of experts do not run: the dense
	 * layers' context keeps it off */
	build_async_tp(&x);

	comp fwd = {0}, bwd = {0}, entry = {0};
	if (cfg->scan) {
		build_body(&x, &fwd, false);
		build_body(&x, &bwd, true);
		int trips = (x.L - first_scanned(&x)) / x.k * x.A;
		schedule_comp(&x, &fwd, trips);
		schedule_comp(&x, &bwd, trips);
	}
	build_entry(&x, &entry, &fwd, &bwd);
	schedule_comp(&x, &entry, 0);

	/* emission */
	rm_program *into = cfg->into;
	if (into)
		rm_program_reset(into);
	emitter e = {.x = &x, .p = into ? into : rm_program_create(NULL), .last_event = -1, .chain = -1, .replica_last = -1};
	char pname[160];
	snprintf(pname, sizeof(pname), "%s fsdp%d b%lld s%lld %s", wl->model.name, fsdp,
		 (long long)wl->train.micro_batch, (long long)wl->train.seq_len, rm_sched_mode_name(cfg->mode));
	free(e.p->name);
	e.p->name = rm_xstrdup(pname);
	/* the GPUs of a tensor-parallel group share their tokens: each counts 1/tp of them */
	e.p->tokens = tokens * A_step / (wl->train.tp > 1 ? wl->train.tp : 1) / (wl->train.cp > 1 ? wl->train.cp : 1);
	e.p->model_flops = rm_workload_mfu_flops_per_token(wl) * (double)e.p->tokens;
	e.s_compute = rm_program_add_stream(e.p, "compute", RM_STREAM_COMPUTE, 0);
	e.s_coll = rm_program_add_stream(e.p, "collectives", RM_STREAM_COLLECTIVE,
					 xla && !cfg->flags.highest_priority_async_stream ? 0 : -1);
	e.s_rs = cfg->mode == RM_SCHED_FSDP2 ? rm_program_add_stream(e.p, "reduce-scatter", RM_STREAM_COLLECTIVE, -1)
					     : e.s_coll;
	e.s_d2h = rm_program_add_stream(e.p, "offload-d2h", RM_STREAM_COPY, 0);
	e.s_h2d = rm_program_add_stream(e.p, "reload-h2d", RM_STREAM_COPY, 0);
	e.s_tpce = x.atp_n ? rm_program_add_stream(e.p, "tp-copy-engine", RM_STREAM_COPY, 0) : -1;
	e.atp_recv = -1;
	if (sm.params > 0) {
		e.param_shard = new_tensor(&e, "params/shard", sm.params, RM_ROLE_PARAM_SHARD, RM_LOC_DEVICE, true);
		e.master = new_tensor(&e, "params/master", sm.master > 0 ? sm.master : 1, RM_ROLE_OPTIMIZER_STATE,
				      RM_LOC_DEVICE, true);
	} else {
		/* FSDP2: the fp32 shard is the parameter the all-gathers read (cast to param_dtype) */
		e.param_shard = e.master = new_tensor(&e, "params/shard", sm.master, RM_ROLE_PARAM_SHARD, RM_LOC_DEVICE, true);
	}
	e.opt_state = new_tensor(&e, "optimizer/state", sm.optimizer > 0 ? sm.optimizer : 1, RM_ROLE_OPTIMIZER_STATE,
				 RM_LOC_DEVICE, true);
	e.grad_shard = new_tensor(&e, "grads/shard", sm.grads, RM_ROLE_GRADIENT, RM_LOC_DEVICE, true);
	int32_t tokens_t = new_tensor(&e, "batch/tokens", tokens * 4 * A_step, RM_ROLE_ACTIVATION, RM_LOC_DEVICE, true);
	e.mb_first = rm_new(int32_t, (size_t)x.A + 1);
	for (int mb = 0; mb < x.A; mb++)
		e.mb_first[mb] = -1;
	e.stack = rm_new(int32_t, (size_t)x.A + 1);
	e.cstack = rm_new(int32_t, (size_t)x.A + 1);
	e.hstack = rm_new(int32_t, (size_t)x.A + 1);
	for (int mb = 0; mb < x.A; mb++)
		e.stack[mb] = e.cstack[mb] = e.hstack[mb] = -1;
	e.last_d2h_ev = -1;
	/* shortened loops: the first E - 1 trips and the last; at most two loops a micro-batch in
	 * a report's stretches, trips of whole bodies only */
	int trips_T = cfg->scan ? (x.L - first_scanned(&x)) / x.k : 0;
	e.E = trips_T;
	e.Le = x.L;
	if (cfg->scan && cfg->emit_loop_iters >= 3 && trips_T > cfg->emit_loop_iters &&
	    (x.L - first_scanned(&x)) % x.k == 0 && 2 * x.A <= RM_SCHED_MAX_LOOPS) {
		e.E = cfg->emit_loop_iters;
		e.Le = first_scanned(&x) + e.E * x.k;
		e.trip_first = rm_new(int32_t, (size_t)2 * (size_t)x.A * (size_t)(e.E + 1));
	}
	e.embed_ag = e.head_ag = e.embed_grads = e.head_grads = e.final_norm_grads = -1;
	size_t nlt = (size_t)x.A * (size_t)x.L;
	e.lt = rm_new(layer_tensors, nlt);
	int nv = x.layer->n_values;
	if (x.n_dense > 0 && dense.layer->n_values > nv)
		nv = dense.layer->n_values;
	int32_t *pool = rm_new(int32_t, nlt * 4 * (size_t)nv);
	for (size_t i = 0; i < nlt * 4 * (size_t)nv; i++)
		pool[i] = -1;
	int nops = x.layer->n_ops;
	if (x.n_dense > 0 && dense.layer->n_ops > nops)
		nops = dense.layer->n_ops;
	e.twin_ops = nops;
	e.twin = rm_new(int32_t, (size_t)2 * 2 * RM_PPHASE_COUNT * (size_t)nops + 1);
	int32_t *bgrad_pool = rm_new(int32_t, nlt * (size_t)nops + 1);
	for (size_t i = 0; i < nlt * (size_t)nops; i++)
		bgrad_pool[i] = -1;
	for (size_t i = 0; i < nlt; i++) {
		layer_tensors *t = &e.lt[i];
		t->fwd = pool + (i * 4 + 0) * (size_t)nv;
		t->rec = pool + (i * 4 + 1) * (size_t)nv;
		t->reload = pool + (i * 4 + 2) * (size_t)nv;
		t->host = pool + (i * 4 + 3) * (size_t)nv;
		t->bgrad = bgrad_pool + i * (size_t)nops;
		for (int g = 0; g < MAX_GROUPS; g++)
			t->ag_fwd[g] = t->ag_bwd[g] = t->grads[g] = -1;
		t->norm_grads = -1;
	}
	e.embed_fwd = rm_new(int32_t, (size_t)x.embed->n_values);
	e.head_fwd = rm_new(int32_t, (size_t)x.head->n_values);
	for (int v = 0; v < x.embed->n_values; v++)
		e.embed_fwd[v] = -1;
	for (int v = 0; v < x.head->n_values; v++)
		e.head_fwd[v] = -1;
	e.embed_fwd[x.embed->input] = tokens_t;
	size_t nbe = (size_t)x.A * (size_t)x.embed->n_ops, nbh = (size_t)x.A * (size_t)x.head->n_ops;
	int32_t *part_pool = rm_new(int32_t, nbe + nbh + 1);
	for (size_t i = 0; i < nbe + nbh; i++)
		part_pool[i] = -1;
	e.embed_bgrad = part_pool;
	e.head_bgrad = e.embed_bgrad + nbe;
	if (fsdp == 1) {
		/* no collectives: the embedding and head weights are the persistent parameters */
		e.embed_ag = e.head_ag = e.param_shard;
	}
	emit_entry(&e, &entry, &fwd, &bwd);
	rep->micro_batches_emitted = x.A;
	if (x.A < A_step) {
		/* micro-batches 1 .. A - 2, evenly spaced in launch order (the engine checks the rest) */
		bool even = true;
		int32_t per = e.mb_first[2] - e.mb_first[1];
		for (int mb = 1; mb + 1 < x.A && even; mb++)
			even = e.mb_first[mb] >= 0 && e.mb_first[mb + 1] - e.mb_first[mb] == per;
		if (even && per > 0) {
			rep->loops[0].first_op = e.mb_first[1];
			rep->loops[0].ops = per;
			rep->loops[0].iters = x.A - 2;
			rep->loops[0].trips = A_step - 2;
			/* the step's collectives: the micro-batches not built each count as one built */
			rep_add_diff(rep, &e.mb_rep[0], &e.mb_rep[1], A_step - x.A);
		}
	}
	free(e.mb_first);
	if (e.trip_first) {
		/* shortened loops: trips 1 .. E - 2 of each, evenly spaced, stand for 1 .. T - 2 */
		int T = (x.L - first_scanned(&x)) / x.k, n = 0;
		bool even = true;
		for (int lp = 0; lp < 2 * x.A && even; lp++) {
			const int32_t *f = e.trip_first + (size_t)lp * (size_t)(e.E + 1);
			int32_t per = f[2] - f[1];
			for (int i = 1; i < e.E - 1 && even; i++)
				even = per > 0 && f[i + 1] - f[i] == per;
			if (!even)
				break;
			rep->loops[n].first_op = f[1];
			rep->loops[n].ops = per;
			rep->loops[n].iters = e.E - 2;
			rep->loops[n].trips = T - 2;
			n++;
		}
		if (even)
			rep_add_diff(rep, &(rm_schedule_report){0}, &e.loop_add, 1);
		else
			memset(rep->loops, 0, sizeof(rep->loops));
		rep->loops_partial = !even;
		free(e.trip_first);
	}
	free(e.stack);
	free(e.cstack);
	free(e.hstack);

	rm_program *prog = e.p;
	free(e.tensor_event);
	free(e.tensor_stream);
	free(e.lt);
	free(pool);
	free(bgrad_pool);
	free(e.twin);
	free(e.embed_fwd);
	free(e.head_fwd);
	free(part_pool);
	free(e.pending);
	comp_finish(&fwd);
	comp_finish(&bwd);
	comp_finish(&entry);
	finish_fusions(&x);
	grad_flow_finish(&x.gflow);
	grad_flow_finish(&x.embed_flow);
	grad_flow_finish(&x.head_flow);
	if (x.n_dense > 0) {
		finish_fusions(&dense);
		grad_flow_finish(&dense.gflow);
		rm_remat_plan_finish(&dense.plan);
		if (x.recompute_layers > 0)
			rm_remat_plan_finish(&dense.plan_keep);
	}
	free(x.atp_role);
	free(x.atp_src);
	rep->plan = x.plan;
	if (x.recompute_layers > 0)
		rm_remat_plan_finish(&x.plan_keep);
	if (rep == &local)
		rm_remat_plan_finish(&rep->plan);
#if REMORA_SELF_CHECK
	if (!cfg->lean && rm_program_validate(prog, "schedule", err) != RM_OK) {
		rm_error_prefix(err, "internal: the scheduler built an invalid program: ");
		if (prog != into)
			rm_program_destroy(prog);
		return NULL;
	}
#endif
	return prog;
}
