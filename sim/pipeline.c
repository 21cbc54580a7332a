/*
 * Pipeline schedules as dependency graphs (remora/pipeline.h): each stage's order of forward and
 * backward passes, each pass started when its stage is free and its input has arrived.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "remora/pipeline.h"

static const char *const sched_names[RM_PP_COUNT] = {
	[RM_PP_1F1B] = "1f1b", [RM_PP_INTERLEAVED] = "interleaved", [RM_PP_GPIPE] = "gpipe",
	[RM_PP_ZERO_BUBBLE] = "zero_bubble"};

const char *rm_pp_schedule_name(rm_pp_schedule s)
{
	return (unsigned)s < RM_PP_COUNT ? sched_names[s] : "unknown";
}

bool rm_pp_schedule_parse(const char *name, rm_pp_schedule *out)
{
	for (int i = 0; i < RM_PP_COUNT; i++)
		if (strcasecmp(name, sched_names[i]) == 0) {
			*out = (rm_pp_schedule)i;
			return true;
		}
	return false;
}

typedef struct unit {
	rm_pp_pass_kind kind;
	int chunk, mb;
} unit;

/*
 * The chunk and micro-batch of stage-local pass k in Megatron-LM's interleaved order
 * (megatron/core/pipeline_parallel/schedules.py, get_model_chunk_id and the micro-batch id of
 * forward_backward_pipelining_with_interleaving): groups of p micro-batches go through chunk 0,
 * then chunk 1, ...; backwards run the chunks in reverse.
 */
static unit interleaved_unit(int k, int p, int v, bool fwd)
{
	int in_group = k % (p * v);
	int chunk = in_group / p;
	if (!fwd)
		chunk = v - 1 - chunk;
	return (unit){fwd ? RM_PP_PASS_FWD : RM_PP_PASS_BWD, chunk, (k / (p * v)) * p + k % p};
}

static unit plain_unit(rm_pp_pass_kind kind, int mb)
{
	return (unit){kind, 0, mb};
}

/*
 * ZB-H1 (Qi et al. 2024, section 3.1, Figure 3 top): 1F1B's warm-up of min(p - s - 1, m)
 * forwards and its F-B steady state and B cool-down, with B the input gradient alone; stage s
 * owes its first s weight gradients, so after B j it runs W j - s when j >= s, and the W passes
 * still owed close the stage. The first W on stage s comes after forward min(p, m) - 1: every
 * stage holds min(p, m) micro-batches, 1F1B's stage 0 count.
 */
static void zero_bubble_order(int p, int m, int s, unit *u)
{
	int n = 0, warm = p - s - 1 < m ? p - s - 1 : m, nb = 0, nw = 0;
	for (int k = 0; k < warm; k++)
		u[n++] = plain_unit(RM_PP_PASS_FWD, k);
	for (int i = 0; i < m; i++) {
		if (warm + i < m)
			u[n++] = plain_unit(RM_PP_PASS_FWD, warm + i);
		u[n++] = plain_unit(RM_PP_PASS_BWD, i);
		if (++nb > s)
			u[n++] = plain_unit(RM_PP_PASS_WGRAD, nw++);
	}
	while (nw < m)
		u[n++] = plain_unit(RM_PP_PASS_WGRAD, nw++);
}

/* Appends a pass of micro-batch mb unless mb is one of ZB-V's padding micro-batches (>= m). */
static void push_pass(unit *u, int *n, int m, rm_pp_pass_kind kind, int chunk, int mb)
{
	if (mb < m)
		u[(*n)++] = (unit){kind, chunk, mb};
}

/*
 * ZB-V (Qi et al. 2024; the order of torch.distributed.pipelining's
 * ScheduleZBVZeroBubble, torch/distributed/pipelining/schedules.py
 * _calculate_single_rank_operations): two chunks per stage in a V, chunk 0 of stage s the
 * virtual stage s and chunk 1 the virtual stage 2p - 1 - s. The order is planned for
 * n = max(2p - 1, m) micro-batches and the padding ones dropped:
 * - 2 (p - s) - 1 forwards of chunk 0, then s pairs of chunk 1 and chunk 0 forwards;
 * - p - s rounds of chunk 1's F, B and W;
 * - steady rounds, while chunk 1 trails chunk 0 or chunk 0 has forwards left: chunk 0's F
 *   (while any are left), B and W, then chunk 1's F, B and W;
 * - cool-down: s pairs of B (chunk 0, then chunk 1), p - s rounds of chunk 0's B and its oldest
 *   W, then the W passes still owed, chunk 1's before chunk 0's.
 */
static void zero_bubble_v_order(int p, int m, int s, unit *u)
{
	int n = 0, nm = 2 * p - 1 > m ? 2 * p - 1 : m;
	int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
	for (int k = 0; k < 2 * (p - s) - 1; k++)
		push_pass(u, &n, m, RM_PP_PASS_FWD, 0, f0++);
	for (int k = 0; k < s; k++) {
		push_pass(u, &n, m, RM_PP_PASS_FWD, 1, f1++);
		push_pass(u, &n, m, RM_PP_PASS_FWD, 0, f0++);
	}
	for (int k = 0; k < p - s; k++, b1++) {
		push_pass(u, &n, m, RM_PP_PASS_FWD, 1, f1++);
		push_pass(u, &n, m, RM_PP_PASS_BWD, 1, b1);
		push_pass(u, &n, m, RM_PP_PASS_WGRAD, 1, b1);
	}
	while (f1 < f0 || f0 < nm) {
		if (f0 < nm)
			push_pass(u, &n, m, RM_PP_PASS_FWD, 0, f0++);
		push_pass(u, &n, m, RM_PP_PASS_BWD, 0, b0);
		push_pass(u, &n, m, RM_PP_PASS_WGRAD, 0, b0++);
		push_pass(u, &n, m, RM_PP_PASS_FWD, 1, f1++);
		push_pass(u, &n, m, RM_PP_PASS_BWD, 1, b1);
		push_pass(u, &n, m, RM_PP_PASS_WGRAD, 1, b1++);
	}
	int w0 = b0, w1 = b1;
	for (int k = 0; k < s; k++) {
		push_pass(u, &n, m, RM_PP_PASS_BWD, 0, b0++);
		push_pass(u, &n, m, RM_PP_PASS_BWD, 1, b1++);
	}
	for (int k = 0; k < p - s; k++) {
		push_pass(u, &n, m, RM_PP_PASS_BWD, 0, b0++);
		push_pass(u, &n, m, RM_PP_PASS_WGRAD, 0, w0++);
	}
	while (w1 < b1)
		push_pass(u, &n, m, RM_PP_PASS_WGRAD, 1, w1++);
	while (w0 < b0)
		push_pass(u, &n, m, RM_PP_PASS_WGRAD, 0, w0++);
}

/* Stage s's passes in order, into u (rm_pp_passes_per_stage of them). */
static void stage_order(rm_pp_schedule sched, int p, int m, int v, int s, unit *u)
{
	int n = 0;
	if (sched == RM_PP_ZERO_BUBBLE) {
		if (v == 2)
			zero_bubble_v_order(p, m, s, u);
		else
			zero_bubble_order(p, m, s, u);
		return;
	}
	if (sched == RM_PP_GPIPE) {
		for (int j = 0; j < m; j++)
			u[n++] = plain_unit(RM_PP_PASS_FWD, j);
		for (int j = 0; j < m; j++)
			u[n++] = plain_unit(RM_PP_PASS_BWD, j);
		return;
	}
	int total = m * v;
	int warm = sched == RM_PP_INTERLEAVED ? (p - s - 1) * 2 + (v - 1) * p : p - s - 1;
	if (warm > total)
		warm = total;
	for (int k = 0; k < warm; k++)
		u[n++] = sched == RM_PP_INTERLEAVED ? interleaved_unit(k, p, v, true) : plain_unit(RM_PP_PASS_FWD, k);
	for (int i = 0; i < total - warm; i++) {
		int kf = warm + i;
		u[n++] = sched == RM_PP_INTERLEAVED ? interleaved_unit(kf, p, v, true) : plain_unit(RM_PP_PASS_FWD, kf);
		u[n++] = sched == RM_PP_INTERLEAVED ? interleaved_unit(i, p, v, false) : plain_unit(RM_PP_PASS_BWD, i);
	}
	for (int k = total - warm; k < total; k++)
		u[n++] = sched == RM_PP_INTERLEAVED ? interleaved_unit(k, p, v, false) : plain_unit(RM_PP_PASS_BWD, k);
}

int rm_pp_passes_per_stage(rm_pp_schedule sched, int m, int v)
{
	if ((unsigned)sched >= RM_PP_COUNT || m < 1 || v < 1)
		return 0;
	return sched == RM_PP_ZERO_BUBBLE ? 3 * m * v : 2 * m * v;
}

/* The virtual stage of chunk c on stage s, and the stage of virtual stage vs: ZB-V's V
 * (chunk 1 runs back from the last stage to the first), else Megatron-LM's c p + s. */
static int virtual_stage(rm_pp_schedule sched, int p, int v, int c, int s)
{
	if (sched == RM_PP_ZERO_BUBBLE && v == 2)
		return c == 0 ? s : 2 * p - 1 - s;
	return c * p + s;
}

static int stage_of(rm_pp_schedule sched, int p, int v, int vs)
{
	if (sched == RM_PP_ZERO_BUBBLE && v == 2)
		return vs < p ? vs : 2 * p - 1 - vs;
	return vs % p;
}

rm_status rm_pp_simulate(rm_pp_schedule sched, int p, int m, int v, const rm_pp_stage_cost *stages, double p2p_s,
			 rm_pp_result *out, rm_error *err)
{
	return rm_pp_simulate_passes(sched, p, m, v, stages, p2p_s, out, NULL, err);
}

rm_status rm_pp_simulate_passes(rm_pp_schedule sched, int p, int m, int v, const rm_pp_stage_cost *stages,
				double p2p_s, rm_pp_result *out, rm_pp_pass *passes, rm_error *err)
{
	memset(out, 0, sizeof(*out));
	if (p < 1 || p > RM_PP_MAX_STAGES)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0, "pipeline stages %d outside [1, %d]", p, RM_PP_MAX_STAGES);
	if (m < 1 || v < 1)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0, "micro-batches %d and chunks per stage %d must be positive",
				    m, v);
	if ((unsigned)sched >= RM_PP_COUNT)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0, "unknown pipeline schedule %d", (int)sched);
	if (sched == RM_PP_ZERO_BUBBLE && v > 2)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0,
				    "zero_bubble runs 1 chunk per stage (ZB-H1) or 2 (ZB-V), not %d", v);
	if (v > 1 && sched != RM_PP_INTERLEAVED && sched != RM_PP_ZERO_BUBBLE)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0, "%d chunks per stage need the interleaved schedule", v);
	if (sched == RM_PP_INTERLEAVED && m % p != 0)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0,
				    "the interleaved schedule runs micro-batches in groups of the %d stages: %d is not a "
				    "multiple",
				    p, m);
	if (!(p2p_s >= 0))
		return rm_error_set(err, RM_INVALID, NULL, 0, 0, "negative transfer time");
	for (int s = 0; s < p; s++) {
		if (!(stages[s].fwd_s >= 0 && stages[s].bwd_s >= 0 && stages[s].tail_s >= 0 && stages[s].wgrad_s >= 0))
			return rm_error_set(err, RM_INVALID, NULL, 0, 0, "stage %d has a negative cost", s);
		if (stages[s].wgrad_s > stages[s].bwd_s)
			return rm_error_set(err, RM_INVALID, NULL, 0, 0,
					    "stage %d: weight-gradient time %g s exceeds its backward %g s", s,
					    stages[s].wgrad_s, stages[s].bwd_s);
	}
	int V = p * v, per = rm_pp_passes_per_stage(sched, m, v);
	bool split = sched == RM_PP_ZERO_BUBBLE;
	double *fend = rm_new(double, (size_t)V * (size_t)m), *bend = rm_new(double, (size_t)V * (size_t)m);
	for (size_t i = 0; i < (size_t)V * (size_t)m; i++)
		fend[i] = bend[i] = -1.0;
	unit *order = rm_new(unit, (size_t)p * (size_t)per);
	int *next = rm_new(int, (size_t)p), *held = rm_new(int, (size_t)p);
	double *free_at = rm_new(double, (size_t)p);
	for (int s = 0; s < p; s++)
		stage_order(sched, p, m, v, s, order + (size_t)s * (size_t)per);
	int done = 0;
	rm_status st = RM_OK;
	while (done < p * per) {
		bool progress = false;
		for (int s = 0; s < p; s++) {
			while (next[s] < per) {
				const unit *u = &order[(size_t)s * (size_t)per + (size_t)next[s]];
				int vs = virtual_stage(sched, p, v, u->chunk, s);
				size_t at = (size_t)vs * (size_t)m + (size_t)u->mb;
				double ready = 0, cost = stages[s].fwd_s / (double)v;
				if (u->kind == RM_PP_PASS_FWD && vs > 0) {
					double e = fend[at - (size_t)m];
					if (e < 0)
						break;
					ready = e + (stage_of(sched, p, v, vs - 1) != s ? p2p_s : 0);
				} else if (u->kind == RM_PP_PASS_WGRAD) {
					/* the weight gradient of the B this stage ran */
					ready = bend[at];
					if (ready < 0)
						break;
					cost = stages[s].wgrad_s / (double)v;
				} else if (u->kind == RM_PP_PASS_BWD) {
					if (vs == V - 1) {
						ready = fend[at];
						if (ready < 0)
							break;
					} else {
						double e = bend[at + (size_t)m];
						if (e < 0)
							break;
						ready = e + (stage_of(sched, p, v, vs + 1) != s ? p2p_s : 0);
					}
					cost = (split ? stages[s].bwd_s - stages[s].wgrad_s : stages[s].bwd_s) / (double)v;
				}
				double start = ready > free_at[s] ? ready : free_at[s];
				double end = start + cost;
				if (u->kind == RM_PP_PASS_FWD)
					fend[at] = end;
				else if (u->kind == RM_PP_PASS_BWD)
					bend[at] = end;
				free_at[s] = end;
				if (passes)
					passes[(size_t)s * (size_t)per + (size_t)next[s]] =
						(rm_pp_pass){u->kind, s, u->chunk, u->mb, start, end};
				/* activations held from the forward to the last pass that reads them */
				if (u->kind == RM_PP_PASS_FWD)
					held[s]++;
				else if (u->kind == (split ? RM_PP_PASS_WGRAD : RM_PP_PASS_BWD))
					held[s]--;
				if (held[s] > out->in_flight[s])
					out->in_flight[s] = held[s];
				next[s]++;
				done++;
				progress = true;
			}
		}
		if (!progress) {
			st = rm_error_set(err, RM_INVALID, NULL, 0, 0, "internal: pipeline schedule %s deadlocked (p %d, m %d, v %d)",
					  rm_pp_schedule_name(sched), p, m, v);
			break;
		}
	}
	if (st == RM_OK) {
		for (int s = 0; s < p; s++) {
			out->stage_end_s[s] = free_at[s] + stages[s].tail_s;
			if (out->stage_end_s[s] > out->step_s)
				out->step_s = out->stage_end_s[s];
		}
		/* ZB-V's stage 0 starts first and ends first: the last stage to end waits longest */
		int b = 0;
		if (sched == RM_PP_ZERO_BUBBLE && v == 2)
			for (int k = 1; k < p; k++)
				if (free_at[k] > free_at[b])
					b = k;
		double busy = (double)m * (stages[b].fwd_s + stages[b].bwd_s);
		out->bubble_fraction = free_at[b] > 0 ? 1.0 - busy / free_at[b] : 0;
	}
	free(fend);
	free(bend);
	free(order);
	free(next);
	free(held);
	free(free_at);
	return st;
}
