/*
 * A prediction next to a measurement (remora/compare.h): the simulated run becomes a trace, both
 * are analysed by trace/analyze.c, and the two reports are set side by side.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "remora/compare.h"
#include "remora/json.h"
#include "remora/program.h"
#include "remora/schedule.h"
#include "trace_private.h"

static const char *const group_keys[] = {
#define RM_COMPARE_GROUP_KEY(name, key) key,
	RM_COMPARE_GROUP_MAP(RM_COMPARE_GROUP_KEY)
#undef RM_COMPARE_GROUP_KEY
};

const char *rm_compare_group_key(rm_compare_group g)
{
	return g >= 0 && g < RM_COMPARE_GROUP_COUNT ? group_keys[g] : "unknown";
}

double rm_compare_row_error_pct(const rm_compare_row *r)
{
	return r->measured_s != 0 ? 100.0 * (r->predicted_s - r->measured_s) / r->measured_s : NAN;
}

rm_status rm_compare_simulate(const rm_scenario_resolved *res, rm_program **prog, rm_sim **sim, rm_error *err)
{
	*prog = NULL;
	*sim = NULL;
	if (res->train.pp > 1)
		return rm_error_set(err, RM_UNSUPPORTED, NULL, 0, 0,
				    "a pipelined scenario (parallelism.pp > 1) is simulated stage by stage, with no "
				    "one program to compare with a trace");
	rm_schedule_report rep;
	rm_program *p = rm_schedule_build(&res->sched, &rep, err);
	if (!p)
		return err->status != RM_OK ? err->status : RM_INVALID;
	rm_schedule_report_finish(&rep);
	/* the options `remora simulate` runs with */
	rm_sim_options opt = {.scheduler_built = true,
			      .hw_queues = res->hw_queues,
			      .memory_timeline = true,
			      .cost = res->sched.cost,
			      .memory_headroom_bytes = res->memory.headroom_bytes,
			      .allocator = res->allocator,
			      .alloc_fraction = res->alloc_fraction};
	rm_sim *s = rm_sim_create(p, &res->hw, &opt, err);
	if (!s || rm_sim_run(s, err) != RM_OK) {
		rm_sim_destroy(s);
		rm_program_destroy(p);
		return err->status != RM_OK ? err->status : RM_INVALID;
	}
	*prog = p;
	*sim = s;
	return RM_OK;
}

/* ---- the predicted run as a trace ---- */

/* The trace class of an op's cost kind (the mapping in remora/compare.h). */
static rm_trace_class kind_class(rm_cost_kind k)
{
	switch (k) {
	case RM_COST_GEMM:
		return RM_TRACE_GEMM;
	case RM_COST_ATTENTION:
		return RM_TRACE_ATTENTION;
	case RM_COST_COLLECTIVE:
		return RM_TRACE_NCCL;
	case RM_COST_COPY:
		return RM_TRACE_MEMCPY;
	case RM_COST_ELEMENTWISE:
	default:
		return RM_TRACE_MEMORY_BOUND;
	}
}

/* NCCL's name of a collective's operation (its kernel's, nccl src/device/generate.py). */
static const char *coll_nccl_op(rm_coll c)
{
	switch (c) {
	case RM_COLL_ALL_GATHER:
		return "AllGather";
	case RM_COLL_REDUCE_SCATTER:
		return "ReduceScatter";
	case RM_COLL_ALL_REDUCE:
		return "AllReduce";
	case RM_COLL_ALL_TO_ALL: /* grouped ncclSend/ncclRecv */
	case RM_COLL_SEND_RECV:
	default:
		return "SendRecv";
	}
}

static int cmp_event(const void *pa, const void *pb)
{
	const rm_trace__event *a = pa, *b = pb;
	if (a->ts_ns != b->ts_ns)
		return a->ts_ns < b->ts_ns ? -1 : 1;
	int64_t ea = a->ts_ns + a->dur_ns, eb = b->ts_ns + b->dur_ns;
	if (ea != eb)
		return ea < eb ? -1 : 1;
	if (a->stream != b->stream)
		return a->stream < b->stream ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static int cmp_kind_op(const void *pa, const void *pb)
{
	const rm_trace__nccl_kind *a = pa, *b = pb;
	return strcmp(a->op, b->op);
}

/* The index of op in kinds (sorted by op, n of them), -1 when absent. */
static int kind_index(const rm_trace__nccl_kind *kinds, int n, const char *op)
{
	for (int i = 0; i < n; i++)
		if (strcmp(kinds[i].op, op) == 0)
			return i;
	return -1;
}

/* Picoseconds to the nearest nanosecond (times are >= 0). */
static int64_t ps_to_ns(rm_time_ps t)
{
	return (int64_t)((t + 500) / 1000);
}

rm_trace *rm_compare_sim_trace(const rm_sim *sim, rm_error *err)
{
	const rm_program *prog = rm_sim_program(sim);
	const rm_sim_metrics *m = rm_sim_get_metrics(sim);
	if (m->events == 0 && prog->n_ops > 0)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0, "the simulation has not run"), NULL;
	rm_trace *t = rm_new(rm_trace, 1);
	t->rank = 0;
	t->n_streams = t->cap_streams = prog->n_streams;
	t->streams = rm_new(rm_trace__stream, (size_t)prog->n_streams + 1);
	for (int32_t s = 0; s < prog->n_streams; s++)
		t->streams[s] = (rm_trace__stream){.device = 0, .stream = s};
	/* the NCCL kinds: the ops the program's collectives are, in name order */
	t->nccl_kinds = rm_new(rm_trace__nccl_kind, RM_COLL_COUNT + 1);
	for (int32_t i = 0; i < prog->n_ops; i++) {
		const rm_program_op *op = &prog->ops[i];
		const char *name = coll_nccl_op(op->cost.collective.op);
		if (op->cost.kind != RM_COST_COLLECTIVE || kind_index(t->nccl_kinds, t->n_nccl_kinds, name) >= 0)
			continue;
		snprintf(t->nccl_kinds[t->n_nccl_kinds++].op, sizeof(t->nccl_kinds[0].op), "%s", name);
	}
	qsort(t->nccl_kinds, (size_t)t->n_nccl_kinds, sizeof(*t->nccl_kinds), cmp_kind_op);
	t->ev = rm_new(rm_trace__event, (size_t)prog->n_ops + 1);
	t->names = rm_new(char *, (size_t)prog->n_ops + 1);
	for (int32_t i = 0; i < prog->n_ops; i++) {
		const rm_program_op *op = &prog->ops[i];
		int64_t s = ps_to_ns(rm_sim_op_start(sim, i)), e = ps_to_ns(rm_sim_op_end(sim, i));
		t->events++;
		if (e <= s) /* no time: no kernel to see (a collective of one rank, an empty op) */
			continue;
		rm_trace_class cls = kind_class(op->cost.kind);
		t->names[t->n_names] = rm_xstrdup(op->name ? op->name : "");
		t->ev[t->n_ev] = (rm_trace__event){
			.ts_ns = s,
			.dur_ns = e - s,
			.ext_id = -1,
			.stream = op->stream,
			.name = t->n_names++,
			.nccl = (int16_t)(cls == RM_TRACE_NCCL
						  ? kind_index(t->nccl_kinds, t->n_nccl_kinds, coll_nccl_op(op->cost.collective.op))
						  : -1),
			.cls = (uint8_t)cls,
			.seq = (uint32_t)i,
		};
		t->streams[op->stream].compute |= rm_trace_class_is_compute(cls);
		t->streams[op->stream].comm |= cls == RM_TRACE_NCCL;
		t->n_ev++;
	}
	/* the step: [0, the simulated step time), as `remora simulate` reports it */
	t->steps = rm_new(rm_trace__step, 1);
	t->steps[0] = (rm_trace__step){.number = 0, .ts_ns = 0, .dur_ns = ps_to_ns(m->step_time), .device = -1};
	t->n_steps = t->cap_steps = 1;
	t->cap_ev = t->n_ev;
	t->cap_names = t->n_names;
	if (t->n_ev > 0)
		qsort(t->ev, (size_t)t->n_ev, sizeof(*t->ev), cmp_event);
	return t;
}

void rm_compare_analyze(const rm_trace *t, int rank_default, rm_trace_report **reports, int *n)
{
	/* a copy of t sharing its names and steps, with kinds merged by op: t's kinds are sorted by
	 * (op, algo, proto), so equal ops are neighbours */
	rm_trace m = *t;
	int *remap = rm_new(int, (size_t)t->n_nccl_kinds + 1);
	m.nccl_kinds = rm_new(rm_trace__nccl_kind, (size_t)t->n_nccl_kinds + 1);
	m.n_nccl_kinds = 0;
	for (int k = 0; k < t->n_nccl_kinds; k++) {
		if (m.n_nccl_kinds == 0 || strcmp(m.nccl_kinds[m.n_nccl_kinds - 1].op, t->nccl_kinds[k].op) != 0)
			memcpy(m.nccl_kinds[m.n_nccl_kinds++].op, t->nccl_kinds[k].op, sizeof(t->nccl_kinds[k].op));
		remap[k] = m.n_nccl_kinds - 1;
	}
	m.ev = rm_new(rm_trace__event, (size_t)t->n_ev + 1);
	if (t->n_ev > 0)
		memcpy(m.ev, t->ev, (size_t)t->n_ev * sizeof(*t->ev));
	for (int64_t i = 0; i < t->n_ev; i++)
		if (m.ev[i].nccl >= 0)
			m.ev[i].nccl = (int16_t)remap[m.ev[i].nccl];
	rm_trace_analyze(&m, rank_default, reports, n);
	free(m.ev);
	free(m.nccl_kinds);
	free(remap);
}

const rm_trace_report *rm_compare_pick(const rm_trace_report *reports, int n, int rank, rm_error *err)
{
	int want = rank < 0 ? 0 : rank;
	for (int i = 0; i < n; i++)
		if (reports[i].rank == want)
			return &reports[i];
	if (rank < 0 && n > 0)
		return &reports[0];
	char have[256] = "";
	size_t len = 0;
	for (int i = 0; i < n && len + 16 < sizeof(have); i++)
		if (i == 0 || reports[i].rank != reports[i - 1].rank)
			len += (size_t)snprintf(have + len, sizeof(have) - len, "%s%d", len ? ", " : "", reports[i].rank);
	rm_error_set(err, RM_NOT_FOUND, NULL, 0, 0, "no rank %d in the trace (ranks: %s)", rank, n ? have : "none");
	return NULL;
}

/* ---- the rows ---- */

static rm_compare_row *add_row(rm_compare *c, rm_compare_group g, const char *key, double pred, double meas)
{
	c->rows = rm_xrealloc(c->rows, (size_t)(c->n_rows + 1) * sizeof(*c->rows));
	rm_compare_row *r = &c->rows[c->n_rows++];
	memset(r, 0, sizeof(*r));
	r->group = g;
	snprintf(r->key, sizeof(r->key), "%s", key);
	r->predicted_s = pred;
	r->measured_s = meas;
	r->modelled = true;
	return r;
}

static void set_counts(rm_compare_row *r, int64_t pred, int64_t meas)
{
	r->counted = true;
	r->predicted_count = pred;
	r->measured_count = meas;
}

/* The figure of op in a report's nccl list (0 when absent). */
static const rm_trace_nccl_fig *find_op(const rm_trace_report *r, const char *op)
{
	for (int k = 0; k < r->n_nccl; k++)
		if (strcmp(r->median.nccl[k].op, op) == 0)
			return &r->median.nccl[k];
	return NULL;
}

/* The collective rows: every op either side has, in name order. */
static void collective_rows(rm_compare *c, const rm_trace_report *p, const rm_trace_report *m)
{
	int n = p->n_nccl + m->n_nccl;
	const char **ops = rm_new(const char *, (size_t)n + 1);
	int k = 0;
	for (int i = 0; i < p->n_nccl; i++)
		ops[k++] = p->median.nccl[i].op;
	for (int i = 0; i < m->n_nccl; i++)
		ops[k++] = m->median.nccl[i].op;
	for (int i = 1; i < k; i++) /* insertion sort: a handful of names */
		for (int j = i; j > 0 && strcmp(ops[j - 1], ops[j]) > 0; j--) {
			const char *tmp = ops[j];
			ops[j] = ops[j - 1];
			ops[j - 1] = tmp;
		}
	for (int i = 0; i < k; i++) {
		if (i > 0 && strcmp(ops[i], ops[i - 1]) == 0)
			continue;
		const rm_trace_nccl_fig *pf = find_op(p, ops[i]), *mf = find_op(m, ops[i]);
		rm_compare_row *r = add_row(c, RM_COMPARE_COLLECTIVE, ops[i][0] ? ops[i] : "(unnamed)",
					    pf ? pf->busy_s : 0, mf ? mf->busy_s : 0);
		set_counts(r, pf ? pf->count : 0, mf ? mf->count : 0);
	}
	free(ops);
}

/* The window whose step is the median one (the lower middle for an even count). */
static int median_window(const rm_trace_report *m)
{
	int n = m->n_windows;
	int *idx = rm_new(int, (size_t)n + 1);
	for (int i = 0; i < n; i++)
		idx[i] = i;
	for (int i = 1; i < n; i++) /* stable insertion sort by step_s: equal steps keep time order */
		for (int j = i; j > 0 && m->windows[idx[j - 1]].fig.step_s > m->windows[idx[j]].fig.step_s; j--) {
			int tmp = idx[j];
			idx[j] = idx[j - 1];
			idx[j - 1] = tmp;
		}
	int w = idx[(n - 1) / 2];
	free(idx);
	return w;
}

/* |predicted - measured| of row i in whole picoseconds: every figure is a whole nanosecond (a
 * median of an even count, half of one), so equal differences compare equal, not by the last bit
 * of two subtractions of doubles. */
static int64_t row_diff(const rm_compare *c, int i)
{
	return llround(fabs(c->rows[i].predicted_s - c->rows[i].measured_s) * 1e12);
}

/* The RM_COMPARE_TOP rows of largest |predicted - measured|, ties in row order. */
static void largest(rm_compare *c)
{
	int *idx = rm_new(int, (size_t)c->n_rows + 1);
	int n = 0;
	for (int i = 0; i < c->n_rows; i++)
		if (c->rows[i].predicted_s != 0 || c->rows[i].measured_s != 0)
			idx[n++] = i;
	for (int i = 1; i < n; i++) /* stable insertion sort, descending: a few dozen rows */
		for (int j = i; j > 0 && row_diff(c, idx[j - 1]) < row_diff(c, idx[j]); j--) {
			int tmp = idx[j];
			idx[j] = idx[j - 1];
			idx[j - 1] = tmp;
		}
	c->n_largest = n < RM_COMPARE_TOP ? n : RM_COMPARE_TOP;
	for (int i = 0; i < c->n_largest; i++)
		c->largest[i] = idx[i];
	free(idx);
}

void rm_compare_build(const rm_trace_report *predicted, const rm_trace_report *measured, rm_compare *out)
{
	memset(out, 0, sizeof(*out));
	const rm_trace_fig *p = &predicted->median, *m = &measured->median;
	out->rank = measured->rank;
	out->device = measured->device;
	out->from_steps = measured->from_steps;
	out->n_windows = measured->n_windows;
	out->shown_window = median_window(measured);
	const rm_trace_window *w = &measured->windows[out->shown_window];
	out->shown_number = w->number;
	out->shown_start_ns = w->start_ns;
	out->shown_end_ns = w->end_ns;
	add_row(out, RM_COMPARE_STEP, "step_s", p->step_s, m->step_s);
	for (int k = 0; k < RM_TRACE_CLASS_COUNT; k++) {
		rm_compare_row *r = add_row(out, RM_COMPARE_CLASS, rm_trace_class_key((rm_trace_class)k), p->class_s[k],
					    m->class_s[k]);
		set_counts(r, p->class_count[k], m->class_count[k]);
		r->modelled = k != RM_TRACE_MEMSET;
	}
	add_row(out, RM_COMPARE_FIGURE, "compute_busy_s", p->compute_busy_s, m->compute_busy_s);
	add_row(out, RM_COMPARE_FIGURE, "comm_busy_s", p->comm_busy_s, m->comm_busy_s);
	add_row(out, RM_COMPARE_FIGURE, "exposed_comm_s", p->exposed_comm_s, m->exposed_comm_s);
	add_row(out, RM_COMPARE_FIGURE, "idle_s", p->idle_s, m->idle_s);
	rm_compare_row *coc = add_row(out, RM_COMPARE_FIGURE, "collectives_on_compute_stream", p->coll_on_compute_s,
				      m->coll_on_compute_s);
	set_counts(coc, p->coll_on_compute_count, m->coll_on_compute_count);
	collective_rows(out, predicted, measured);
	largest(out);
}

void rm_compare_finish(rm_compare *c)
{
	if (!c)
		return;
	free(c->rows);
	c->rows = NULL;
	c->n_rows = c->n_largest = 0;
}

/* ---- JSON ---- */

static json_t *real_or_null(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

static json_t *row_json(const rm_compare_row *r)
{
	json_t *o = json_object();
	json_object_set_new(o, "predicted_s", json_real(r->predicted_s));
	json_object_set_new(o, "measured_s", json_real(r->measured_s));
	json_object_set_new(o, "diff_s", json_real(r->predicted_s - r->measured_s));
	json_object_set_new(o, "error_pct", real_or_null(rm_compare_row_error_pct(r)));
	if (r->counted) {
		json_object_set_new(o, "predicted_count", json_integer(r->predicted_count));
		json_object_set_new(o, "measured_count", json_integer(r->measured_count));
	}
	json_object_set_new(o, "modelled", json_boolean(r->modelled));
	return o;
}

json_t *rm_compare_json(const rm_compare *c)
{
	json_t *doc = json_object();
	json_object_set_new(doc, "schema", json_string("remora.compare/1"));
	json_t *meas = json_object();
	json_object_set_new(meas, "rank", json_integer(c->rank));
	json_object_set_new(meas, "device", json_integer(c->device));
	json_object_set_new(meas, "window", json_string(c->from_steps ? "steps_median" : "gpu_span"));
	json_object_set_new(meas, "steps", json_integer(c->from_steps ? c->n_windows : 0));
	json_t *shown = json_object();
	if (c->shown_number >= 0)
		json_object_set_new(shown, "number", json_integer(c->shown_number));
	else
		json_object_set_new(shown, "number", json_null());
	json_object_set_new(shown, "start_us", json_real((double)c->shown_start_ns * 1e-3));
	json_object_set_new(shown, "duration_s", json_real((double)(c->shown_end_ns - c->shown_start_ns) * 1e-9));
	json_object_set_new(meas, "shown_step", shown);
	json_object_set_new(doc, "measured", meas);
	json_t *classes = json_object(), *figures = json_object(), *colls = json_array();
	for (int i = 0; i < c->n_rows; i++) {
		const rm_compare_row *r = &c->rows[i];
		json_t *o = row_json(r);
		switch (r->group) {
		case RM_COMPARE_STEP:
			json_object_set_new(doc, "step", o);
			break;
		case RM_COMPARE_CLASS:
			json_object_set_new(classes, r->key, o);
			break;
		case RM_COMPARE_FIGURE:
			json_object_set_new(figures, r->key, o);
			break;
		case RM_COMPARE_COLLECTIVE:
		default:
			json_object_set_new(o, "op", rm_json_string(r->key));
			json_array_append_new(colls, o);
			break;
		}
	}
	json_object_set_new(doc, "classes", classes);
	json_object_set_new(doc, "figures", figures);
	json_object_set_new(doc, "collectives", colls);
	json_t *top = json_array();
	for (int i = 0; i < c->n_largest; i++) {
		const rm_compare_row *r = &c->rows[c->largest[i]];
		json_t *o = row_json(r);
		json_object_set_new(o, "group", json_string(rm_compare_group_key(r->group)));
		json_object_set_new(o, "key", rm_json_string(r->key));
		json_array_append_new(top, o);
	}
	json_object_set_new(doc, "largest_discrepancies", top);
	return doc;
}

/* ---- the merged trace ---- */

/* As sim/trace.c writes its trace: compact, keys in order, reals as %.15g (exact times). */
#define MERGED_FLAGS (JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15))

/* The predicted run as rm_trace_write writes it (process 1 "predicted"), parsed back. */
static json_t *predicted_doc(const rm_sim *sim, rm_error *err)
{
	const rm_program *prog = rm_sim_program(sim);
	int32_t n = prog->n_ops;
	rm_time_ps *start = rm_new(rm_time_ps, (size_t)n + 1), *end = rm_new(rm_time_ps, (size_t)n + 1);
	rm_time_ps *solo = rm_new(rm_time_ps, (size_t)n + 1);
	for (int32_t i = 0; i < n; i++) {
		start[i] = rm_sim_op_start(sim, i);
		end[i] = rm_sim_op_end(sim, i);
		solo[i] = rm_sim_op_solo(sim, i);
	}
	size_t n_mem = 0;
	const rm_mem_point *mem = rm_sim_memory_timeline(sim, &n_mem);
	rm_trace_view v = {.process_name = "predicted",
			   .hardware = rm_sim_hw(sim)->name,
			   .note_key = "compare",
			   .note = "process 1: remora's prediction; process 2: the measured step; both from t = 0",
			   .n_ops = n,
			   .start = start,
			   .end = end,
			   .time_arg = "solo_us",
			   .time_arg_ps = solo,
			   .memory = mem,
			   .n_memory = mem ? n_mem : 0};
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	json_t *doc = NULL;
	if (!f) {
		rm_error_set(err, RM_NOMEM, NULL, 0, 0, "cannot open a memory stream for the trace");
		goto arrays;
	}
	bool ok = rm_trace_write(prog, &v, f, err);
	if (fclose(f) != 0 && ok) {
		rm_error_set(err, RM_IO, NULL, 0, 0, "writing the trace failed");
		ok = false;
	}
	if (ok) {
		json_error_t je;
		doc = json_loadb(buf, len, 0, &je);
		if (!doc)
			rm_error_set(err, RM_INVALID, NULL, je.line, je.column, "the predicted trace does not parse: %s",
				     je.text);
	}
	free(buf);
arrays:
	free(start);
	free(end);
	free(solo);
	return doc;
}

static json_t *meta(int pid, int tid, const char *name, json_t *args)
{
	json_t *e = json_object();
	json_object_set_new(e, "ph", json_string("M"));
	json_object_set_new(e, "pid", json_integer(pid));
	if (tid > 0)
		json_object_set_new(e, "tid", json_integer(tid));
	json_object_set_new(e, "name", json_string(name));
	json_object_set_new(e, "args", args);
	return e;
}

/* The measured device's events overlapping [a, b), clipped and shifted by a, onto events. */
static void measured_events(const rm_trace *t, int device, int64_t a, int64_t b, json_t *events)
{
	const int pid = 2;
	json_array_append_new(events, meta(pid, 0, "process_name", json_pack("{s:s}", "name", "measured")));
	json_array_append_new(events, meta(pid, 0, "process_sort_index", json_pack("{s:i}", "sort_index", 2)));
	int first = -1;
	for (int s = 0; s < t->n_streams; s++) {
		if (t->streams[s].device != device)
			continue;
		if (first < 0)
			first = s;
		char label[64];
		snprintf(label, sizeof(label), "stream %lld", (long long)t->streams[s].stream);
		json_array_append_new(events, meta(pid, s - first + 1, "thread_name", json_pack("{s:s}", "name", label)));
		json_array_append_new(events,
				      meta(pid, s - first + 1, "thread_sort_index", json_pack("{s:i}", "sort_index", s - first)));
	}
	for (int64_t i = 0; i < t->n_ev; i++) {
		const rm_trace__event *e = &t->ev[i];
		int64_t s = e->ts_ns, end = e->ts_ns + e->dur_ns;
		if (t->streams[e->stream].device != device || s >= b || end <= a)
			continue;
		if (s < a)
			s = a;
		if (end > b)
			end = b;
		json_t *o = json_object();
		json_object_set_new(o, "ph", json_string("X"));
		json_object_set_new(o, "pid", json_integer(pid));
		json_object_set_new(o, "tid", json_integer(e->stream - first + 1));
		json_object_set_new(o, "name", rm_json_string(t->names[e->name]));
		json_object_set_new(o, "cat", json_string(rm_trace_class_key((rm_trace_class)e->cls)));
		json_object_set_new(o, "ts", json_real((double)(s - a) * 1e-3));
		json_object_set_new(o, "dur", json_real((double)(end - s) * 1e-3));
		json_object_set_new(o, "args", json_pack("{s:s}", "class", rm_trace_class_key((rm_trace_class)e->cls)));
		json_array_append_new(events, o);
	}
}

bool rm_compare_write_trace(const rm_sim *sim, const rm_trace *measured, const rm_compare *c, FILE *out,
			    rm_error *err)
{
	json_t *doc = predicted_doc(sim, err);
	if (!doc)
		return false;
	json_t *events = json_object_get(doc, "traceEvents");
	json_array_append_new(events, meta(1, 0, "process_sort_index", json_pack("{s:i}", "sort_index", 1)));
	measured_events(measured, c->device, c->shown_start_ns, c->shown_end_ns, events);
	json_t *other = json_object_get(doc, "otherData");
	if (json_is_object(other)) {
		json_object_set_new(other, "measured_rank", json_integer(c->rank));
		json_object_set_new(other, "measured_device", json_integer(c->device));
		json_object_set_new(other, "measured_step", c->shown_number >= 0 ? json_integer(c->shown_number) : json_null());
	}
	bool ok = json_dumpf(doc, out, MERGED_FLAGS) == 0 && fputc('\n', out) != EOF;
	json_decref(doc);
	if (!ok || ferror(out) || fflush(out) != 0)
		return rm_error_set(err, RM_IO, NULL, 0, 0, "writing the trace failed"), false;
	return true;
}
