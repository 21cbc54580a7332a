/*
 * Step breakdown of a run (remora/sim.h rm_sim_breakdown; docs/sim.md "Breakdown").
 *
 * Works after the run from what the engine keeps anyway (op start and end times, the program's
 * tensors), so the engine's hot loop is untouched. Two sweeps:
 * - time: the 2n start/end edges of the ops with a positive duration, sorted; between two
 *   consecutive edge times the set of running ops is fixed and the interval is attributed to
 *   one tier (compute, else collectives, else copies, else idle), split equally between the
 *   running ops of that tier, in integer picoseconds;
 * - memory: the alloc/free edges of every non-persistent device tensor, the level read after all
 *   the changes at one time (the engine frees before it allocates at equal times), to find the
 *   first instant of the peak; then the tensors live at that instant are summed by role.
 */
#include <stdlib.h>
#include <string.h>

#include "remora/json.h"
#include "sim_internal.h"

#define BD_CLASS_NAME(name, str) [RM_BD_##name] = str,
static const char *const class_names[RM_BD_COUNT] = {RM_BREAKDOWN_CLASS_MAP(BD_CLASS_NAME)};
#undef BD_CLASS_NAME

const char *rm_breakdown_class_name(rm_breakdown_class c)
{
	return (unsigned)c < RM_BD_COUNT ? class_names[c] : NULL;
}

/* Which ops hold an instant: compute kernels first, then collectives, then copies. */
enum bd_tier { BD_TIER_COMPUTE, BD_TIER_COLL, BD_TIER_COPY, BD_TIER_COUNT, BD_TIER_NONE = BD_TIER_COUNT };

static enum bd_tier op_tier(const rm_program_op *op)
{
	switch (op->cost.kind) {
	case RM_COST_GEMM:
	case RM_COST_ATTENTION:
	case RM_COST_ELEMENTWISE:
		return BD_TIER_COMPUTE;
	case RM_COST_COLLECTIVE:
		return BD_TIER_COLL;
	case RM_COST_COPY:
		return BD_TIER_COPY;
	default:
		return BD_TIER_NONE;
	}
}

static rm_breakdown_class op_class(const rm_program_op *op)
{
	if (op->phase == RM_PPHASE_RECOMPUTE)
		return RM_BD_RECOMPUTE;
	switch (op->cost.kind) {
	case RM_COST_GEMM:
		return RM_BD_GEMM;
	case RM_COST_ATTENTION:
		return op->cost.attention.backward ? RM_BD_ATTENTION_BWD : RM_BD_ATTENTION_FWD;
	case RM_COST_ELEMENTWISE:
		return op->phase == RM_PPHASE_OPTIMIZER ? RM_BD_OPTIMIZER : RM_BD_MEMORY_BOUND;
	case RM_COST_COLLECTIVE:
		return RM_BD_EXPOSED_COMM;
	case RM_COST_COPY:
		return RM_BD_COPIES;
	default:
		return RM_BD_IDLE;
	}
}

/* Dense tensor-core peak for a dtype, FLOP/s (remora/hw.h datasheet values); 0 if unknown. */
static double tensor_peak(rm_dtype dtype, const rm_hw_profile *hw)
{
	switch (dtype) {
	case RM_DTYPE_FP8_E4M3:
	case RM_DTYPE_FP8_E5M2:
		return (hw->fp8_TFLOPs > 0 ? hw->fp8_TFLOPs : hw->bf16_TFLOPs) * RM_TB;
	case RM_DTYPE_FP32:
	case RM_DTYPE_INT32:
		return hw->tf32_TFLOPs * RM_TB;
	default:
		return hw->bf16_TFLOPs * RM_TB;
	}
}

static double ratio(double x, double rate)
{
	return rate > 0 ? x / rate : 0;
}

static double max2(double a, double b)
{
	return a > b ? a : b;
}

/* One op's FLOPs, bytes and roofline seconds (the rules in remora/sim.h rm_breakdown_time). */
static void op_work(const rm_program_op *op, const rm_hw_profile *hw, double *flops, double *bytes,
		    double *roof_s)
{
	double hbm = hw->hbm_peak_GBps * RM_GB;
	*flops = *bytes = *roof_s = 0;
	switch (op->cost.kind) {
	case RM_COST_GEMM: {
		const rm_gemm_shape *g = &op->cost.gemm;
		/* A[m,k], B[k,n] read once, C[m,n] written once: the least traffic of a GEMM */
		*flops = rm_cost_gemm_flops(g);
		*bytes = (double)g->batch *
			 ((double)g->m * (double)g->k + (double)g->k * (double)g->n + (double)g->m * (double)g->n) *
			 rm_dtype_size(g->dtype);
		*roof_s = max2(ratio(*flops, tensor_peak(g->dtype, hw)), ratio(*bytes, hbm));
		break;
	}
	case RM_COST_ATTENTION: {
		const rm_attention_cost *a = &op->cost.attention;
		const rm_attention_shape *s = &a->shape;
		/* q and o over heads, k and v over kv_heads, once each (and their gradients in the
		 * backward pass); an unfused kernel also writes and reads the s x s scores. The same
		 * traffic models/cost.c prices attention's memory side with. */
		double es = rm_dtype_size(s->dtype);
		double dqv = (double)s->head_dim + (double)(s->v_head_dim > 0 ? s->v_head_dim : s->head_dim);
		double qo = (double)s->batch * (double)s->heads * (double)s->seq * dqv;
		double kv = (double)s->batch * (double)s->kv_heads * (double)s->seq * dqv;
		double pass = a->backward ? 2.0 : 1.0;
		*bytes = (qo + kv) * es * pass;
		if (!s->fused)
			*bytes += 2.0 * (double)s->batch * (double)s->heads * (double)s->seq * (double)s->seq * es * pass;
		*flops = rm_cost_attention_flops(a);
		*roof_s = max2(ratio(*flops, tensor_peak(s->dtype, hw)), ratio(*bytes, hbm));
		break;
	}
	case RM_COST_ELEMENTWISE: {
		const rm_elementwise_cost *e = &op->cost.elementwise;
		*bytes = (double)e->bytes_read + (double)e->bytes_written;
		*roof_s = max2(ratio(*bytes, hbm), ratio(e->flops, hw->fp32_TFLOPs * RM_TB));
		break;
	}
	case RM_COST_COLLECTIVE: {
		const rm_collective_cost *c = &op->cost.collective;
		/* bus bytes: what each GPU sends per direction (nccl-tests busBW definition) */
		*bytes = (double)c->bytes * rm_coll_busbw_factor(c->op, c->group_size);
		double link = hw->nvlink_GBps;
		if (c->span > 1 && hw->nic_GBps > 0 && hw->nic_GBps < link)
			link = hw->nic_GBps; /* a group across nodes crosses the NIC at least once */
		*roof_s = ratio(*bytes, link * RM_GB);
		break;
	}
	case RM_COST_COPY: {
		const rm_copy_cost *c = &op->cost.copy;
		*bytes = (double)c->bytes;
		*roof_s = c->dir == RM_COPY_D2D   ? ratio(2.0 * *bytes, hbm)
			  : c->dir == RM_COPY_P2P ? ratio(*bytes, hw->nvlink_GBps * RM_GB)
						  : ratio(*bytes, hw->pcie_GBps * RM_GB);
		break;
	}
	default:
		break;
	}
}

/* ---- sweep edges ------------------------------------------------------------------------ */

/* A time and what happens then: id * 2 + 1 for a start (an allocation), id * 2 for an end (a
 * free). Both sweeps read the state only after every edge at one time, so edges need ordering
 * by time alone. */
typedef struct bd_edge {
	rm_time_ps time;
	uint64_t what;
} bd_edge;

/* Sorts by time: LSD radix sort, 11-bit digits, only as many passes as the largest time needs
 * (5 for a step under 2^55 ps, ~10 h): linear, and half qsort's time on the 1.7 million edges
 * of an 840k-op program (290-330 ms against 690 ms here). tmp holds n edges. */
static void sort_edges(bd_edge *a, bd_edge *tmp, size_t n)
{
	enum { BITS = 11, BUCKETS = 1 << BITS };
	rm_time_ps all = 0;
	for (size_t i = 0; i < n; i++)
		all |= a[i].time;
	bd_edge *src = a, *dst = tmp;
	size_t *count = rm_xmalloc(BUCKETS * sizeof(size_t));
	for (unsigned shift = 0; shift < 64 && (all >> shift) != 0; shift += BITS) {
		memset(count, 0, BUCKETS * sizeof(size_t));
		for (size_t i = 0; i < n; i++)
			count[(src[i].time >> shift) & (BUCKETS - 1)]++;
		size_t at = 0;
		for (size_t b = 0; b < BUCKETS; b++) {
			size_t c = count[b];
			count[b] = at;
			at += c;
		}
		for (size_t i = 0; i < n; i++)
			dst[count[(src[i].time >> shift) & (BUCKETS - 1)]++] = src[i];
		bd_edge *t = src;
		src = dst;
		dst = t;
	}
	if (src != a)
		memcpy(a, src, n * sizeof(bd_edge));
	free(count);
}

/* ---- time ------------------------------------------------------------------------------- */

typedef struct bd_sweep {
	uint32_t tier_n[BD_TIER_COUNT];              /* running ops per tier */
	uint32_t cnt[BD_TIER_COUNT][RM_BD_COUNT];    /* running ops per tier and class */
	uint32_t class_n[RM_BD_COUNT];               /* running ops per class, all tiers */
} bd_sweep;

/* Gives the interval [t, t + dt) to the classes holding it (see remora/sim.h). */
static void attribute(const bd_sweep *sw, rm_time_ps dt, rm_breakdown *out)
{
	for (int c = 0; c < RM_BD_COUNT; c++)
		if (sw->class_n[c])
			out->time[c].busy += dt;
	int tier = 0;
	while (tier < BD_TIER_COUNT && sw->tier_n[tier] == 0)
		tier++;
	if (tier == BD_TIER_COUNT) {
		out->time[RM_BD_IDLE].wall += dt;
		return;
	}
	/* dt / n to each running op of the tier; the dt % n picoseconds left over go one each to the
	 * first ops in class order, so the shares add up to dt exactly */
	uint64_t n = sw->tier_n[tier], q = dt / n, r = dt % n;
	for (int c = 0; c < RM_BD_COUNT; c++) {
		uint64_t k = sw->cnt[tier][c];
		if (!k)
			continue;
		uint64_t extra = r < k ? r : k;
		r -= extra;
		out->time[c].wall += q * k + extra;
	}
}

static void time_breakdown(const rm_breakdown_input *in, rm_breakdown *out)
{
	const rm_program *prog = in->prog;
	int32_t n = prog->n_ops;
	bd_edge *edges = rm_xmalloc(((size_t)n * 2 + 1) * sizeof(bd_edge));
	bd_edge *tmp = rm_xmalloc(((size_t)n * 2 + 1) * sizeof(bd_edge));
	uint8_t *tier = rm_xmalloc((size_t)n + 1);
	uint8_t *cls = rm_xmalloc((size_t)n + 1);
	size_t ne = 0;
	for (int32_t i = 0; i < n; i++) {
		const rm_program_op *op = &prog->ops[i];
		rm_breakdown_class c = op_class(op);
		tier[i] = (uint8_t)op_tier(op);
		cls[i] = (uint8_t)c;
		rm_breakdown_time *bt = &out->time[c];
		double flops, bytes, roof;
		op_work(op, in->hw, &flops, &bytes, &roof);
		bt->ops++;
		bt->solo += in->solo ? in->solo[i] : 0;
		bt->flops += flops;
		bt->bytes += bytes;
		bt->roofline_s += roof;
		if (in->end[i] > in->start[i] && tier[i] != BD_TIER_NONE) {
			edges[ne++] = (bd_edge){in->start[i], (uint64_t)i * 2 + 1};
			edges[ne++] = (bd_edge){in->end[i], (uint64_t)i * 2};
		}
	}
	sort_edges(edges, tmp, ne);
	free(tmp);
	bd_sweep sw;
	memset(&sw, 0, sizeof(sw));
	rm_time_ps t = 0;
	for (size_t k = 0; k < ne;) {
		if (edges[k].time > t) {
			attribute(&sw, edges[k].time - t, out);
			t = edges[k].time;
		}
		for (; k < ne && edges[k].time == t; k++) {
			int32_t i = (int32_t)(edges[k].what >> 1);
			uint32_t d = edges[k].what & 1 ? 1u : UINT32_MAX; /* UINT32_MAX wraps to subtract 1 */
			sw.tier_n[tier[i]] += d;
			sw.cnt[tier[i]][cls[i]] += d;
			sw.class_n[cls[i]] += d;
		}
	}
	/* after the last edge nothing runs; step_time is the last op's end, so this is only the
	 * span of ops outside every tier at the end of the step */
	if (out->step_time > t)
		out->time[RM_BD_IDLE].wall += out->step_time - t;
	free(edges);
	free(tier);
	free(cls);
}

/* ---- memory ----------------------------------------------------------------------------- */

static void memory_breakdown(const rm_breakdown_input *in, rm_breakdown *out)
{
	const rm_program *prog = in->prog;
	int32_t nt = prog->n_tensors;
	size_t cap = (size_t)nt + 1;
	rm_time_ps *alloc = rm_xcalloc(cap, sizeof(rm_time_ps));
	rm_time_ps *release = rm_xcalloc(cap, sizeof(rm_time_ps));
	int32_t *producer = rm_xmalloc(cap * sizeof(int32_t));
	uint8_t *read = rm_xcalloc(cap, 1);
	for (int32_t t = 0; t < nt; t++)
		producer[t] = -1;
	for (int32_t i = 0; i < prog->n_ops; i++) {
		const rm_program_op *op = &prog->ops[i];
		const int32_t *o = rm_program_refs(prog, op->outputs);
		for (uint32_t j = 0; j < op->outputs.count; j++)
			producer[o[j]] = i;
		const int32_t *ins = rm_program_refs(prog, op->inputs);
		for (uint32_t j = 0; j < op->inputs.count; j++) {
			int32_t t = ins[j];
			if (!read[t] || in->end[i] > release[t])
				release[t] = in->end[i];
			read[t] = 1;
		}
	}
	int64_t base = 0;
	bd_edge *edges = rm_xmalloc((cap * 2) * sizeof(bd_edge));
	size_t ne = 0;
	uint8_t *counted = rm_xcalloc(cap, 1); /* 1: persistent device; 2: lifetime of positive length */
	for (int32_t t = 0; t < nt; t++) {
		const rm_program_tensor *tn = &prog->tensors[t];
		if (tn->location != RM_LOC_DEVICE)
			continue;
		if (tn->persistent) {
			base += tn->bytes;
			counted[t] = 1;
			continue;
		}
		if (producer[t] < 0)
			continue; /* never allocated (validation: nothing reads it) */
		alloc[t] = in->start[producer[t]];
		if (!read[t])
			release[t] = in->end[producer[t]];
		if (release[t] <= alloc[t])
			continue;
		counted[t] = 2;
		edges[ne++] = (bd_edge){alloc[t], (uint64_t)t * 2 + 1};
		edges[ne++] = (bd_edge){release[t], (uint64_t)t * 2};
	}
	bd_edge *tmp = rm_xmalloc((cap * 2) * sizeof(bd_edge));
	sort_edges(edges, tmp, ne);
	free(tmp);
	int64_t cur = base, best = base;
	rm_time_ps best_t = 0;
	for (size_t k = 0; k < ne;) {
		rm_time_ps t = edges[k].time;
		/* the level is read only after every change at one time: the engine frees before it
		 * allocates at equal times */
		for (; k < ne && edges[k].time == t; k++) {
			int64_t b = prog->tensors[edges[k].what >> 1].bytes;
			cur += edges[k].what & 1 ? b : -b;
		}
		if (cur > best) {
			best = cur;
			best_t = t;
		}
	}
	out->peak_time = best_t;
	for (int32_t t = 0; t < nt; t++) {
		const rm_program_tensor *tn = &prog->tensors[t];
		if (counted[t] == 1 || (counted[t] == 2 && alloc[t] <= best_t && best_t < release[t]))
			out->role_bytes[tn->role] += tn->bytes;
	}
	for (int r = 0; r < RM_ROLE_COUNT; r++)
		out->peak_tensor_bytes += out->role_bytes[r];
	assert(out->peak_tensor_bytes == best);
	free(alloc);
	free(release);
	free(producer);
	free(read);
	free(edges);
	free(counted);
}

rm_status rm_breakdown_compute(const rm_breakdown_input *in, rm_breakdown *out, rm_error *err)
{
	memset(out, 0, sizeof(*out));
	const rm_program *prog = in->prog;
	for (int32_t i = 0; i < prog->n_ops; i++) {
		if (in->end[i] < in->start[i])
			return rm_error_set(err, RM_INVALID, NULL, 0, 0,
					    "breakdown: ops[%d] '%s' ends (%llu ps) before it starts (%llu ps)", i,
					    prog->ops[i].name, (unsigned long long)in->end[i],
					    (unsigned long long)in->start[i]);
		if (in->end[i] > out->step_time)
			out->step_time = in->end[i];
	}
	time_breakdown(in, out);
	memory_breakdown(in, out);
	if (in->budget) {
		out->has_budget = true;
		out->budget = *in->budget;
		out->fixed_bytes = in->budget->headroom_bytes;
	}
	out->peak_total_bytes = out->peak_tensor_bytes + out->fixed_bytes;
#ifndef NDEBUG
	rm_time_ps sum = 0;
	for (int c = 0; c < RM_BD_COUNT; c++)
		sum += out->time[c].wall;
	assert(sum == out->step_time);
#endif
	return RM_OK;
}

rm_status rm_sim_breakdown(const rm_sim *sim, const rm_memory_budget *budget, rm_breakdown *out,
			   rm_error *err)
{
	if (!sim->ran || sim->completed < sim->n_ops) {
		memset(out, 0, sizeof(*out));
		return rm_error_set(err, RM_INVALID, NULL, 0, 0,
				    "breakdown: the simulation has not completed a run");
	}
	rm_time_ps *solo = rm_xmalloc(((size_t)sim->n_ops + 1) * sizeof(rm_time_ps));
	for (int32_t i = 0; i < sim->n_ops; i++)
		solo[i] = sim->ops[i].solo;
	rm_breakdown_input in = {.prog = sim->prog,
				 .hw = sim->hw,
				 .start = sim->op_start,
				 .end = sim->op_end,
				 .solo = solo,
				 .budget = budget};
	rm_status st = rm_breakdown_compute(&in, out, err);
	free(solo);
	return st;
}

/* ---- output ----------------------------------------------------------------------------- */

bool rm_breakdown_achieved(const rm_breakdown *bd, rm_breakdown_class c, double *value,
			   const char **unit)
{
	const rm_breakdown_time *bt = &bd->time[c];
	double wall = rm_time_to_s(bt->wall), busy = rm_time_to_s(bt->busy);
	switch (c) {
	case RM_BD_GEMM:
	case RM_BD_ATTENTION_FWD:
	case RM_BD_ATTENTION_BWD:
	case RM_BD_RECOMPUTE:
		*unit = "TFLOP/s";
		*value = wall > 0 ? bt->flops / wall / RM_TB : 0;
		return wall > 0 && bt->flops > 0;
	case RM_BD_MEMORY_BOUND:
	case RM_BD_OPTIMIZER:
		*unit = "TB/s";
		*value = wall > 0 ? bt->bytes / wall / RM_TB : 0;
		return wall > 0 && bt->bytes > 0;
	case RM_BD_EXPOSED_COMM:
	case RM_BD_COPIES:
		*unit = "GB/s";
		*value = busy > 0 ? bt->bytes / busy / RM_GB : 0;
		return busy > 0 && bt->bytes > 0;
	default:
		*unit = NULL;
		*value = 0;
		return false;
	}
}

json_t *rm_breakdown_json(const rm_breakdown *bd)
{
	json_t *doc = json_object();
	json_object_set_new(doc, "step_time_ps", json_integer((json_int_t)bd->step_time));
	json_object_set_new(doc, "step_time_s", json_real(rm_time_to_s(bd->step_time)));
	json_t *time = json_object();
	for (int c = 0; c < RM_BD_COUNT; c++) {
		const rm_breakdown_time *bt = &bd->time[c];
		json_t *o = json_object();
		json_object_set_new(o, "wall_ps", json_integer((json_int_t)bt->wall));
		json_object_set_new(o, "wall_s", json_real(rm_time_to_s(bt->wall)));
		json_object_set_new(o, "share", json_real(bd->step_time ? (double)bt->wall / (double)bd->step_time : 0));
		json_object_set_new(o, "busy_s", json_real(rm_time_to_s(bt->busy)));
		json_object_set_new(o, "solo_s", json_real(rm_time_to_s(bt->solo)));
		json_object_set_new(o, "ops", json_integer(bt->ops));
		json_object_set_new(o, "flops", json_real(bt->flops));
		json_object_set_new(o, "bytes", json_real(bt->bytes));
		json_object_set_new(o, "roofline_s", json_real(bt->roofline_s));
		double v;
		const char *unit;
		bool has = rm_breakdown_achieved(bd, (rm_breakdown_class)c, &v, &unit);
		json_object_set_new(o, "achieved", has ? json_real(v) : json_null());
		json_object_set_new(o, "achieved_unit", unit ? json_string(unit) : json_null());
		json_object_set_new(time, class_names[c], o);
	}
	json_object_set_new(doc, "time", time);

	json_t *mem = json_object();
	json_object_set_new(mem, "at_ps", json_integer((json_int_t)bd->peak_time));
	json_object_set_new(mem, "at_s", json_real(rm_time_to_s(bd->peak_time)));
	json_object_set_new(mem, "tensor_bytes", json_integer(bd->peak_tensor_bytes));
	json_t *roles = json_object();
	for (int r = 0; r < RM_ROLE_COUNT; r++)
		json_object_set_new(roles, rm_tensor_role_name((rm_tensor_role)r), json_integer(bd->role_bytes[r]));
	json_object_set_new(mem, "by_role", roles);
	if (bd->has_budget) {
		json_t *fixed = json_object();
		if (bd->budget.headroom_set) {
			json_object_set_new(fixed, "headroom_bytes", json_integer(bd->budget.headroom_bytes));
		} else {
			json_object_set_new(fixed, "cuda_context_bytes", json_integer(bd->budget.cuda_context_bytes));
			json_object_set_new(fixed, "nccl_buffer_bytes", json_integer(bd->budget.nccl_buffer_bytes));
			json_object_set_new(fixed, "cublas_workspace_bytes",
					    json_integer(bd->budget.cublas_workspace_bytes));
		}
		json_object_set_new(mem, "fixed", fixed);
	} else {
		json_object_set_new(mem, "fixed", json_null());
	}
	json_object_set_new(mem, "fixed_bytes", json_integer(bd->fixed_bytes));
	json_object_set_new(mem, "total_bytes", json_integer(bd->peak_total_bytes));
	json_object_set_new(doc, "memory", mem);
	return doc;
}
