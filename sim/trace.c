/*
 * Chrome JSON trace of a run (remora/sim.h rm_sim_write_trace), for ui.perfetto.dev.
 *
 * Format: https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU
 * ("Trace Event Format"): {"traceEvents": [...], "displayTimeUnit": "ns"}. Timestamps are in
 * microseconds. Every value goes through jansson, one event object at a time (TRACE_FLAGS), so
 * strings are always escaped right while the trace of a 10^6-op run streams out without a
 * document in memory; only the envelope's fixed keys and separators are literal text.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "remora/file.h"
#include "remora/json.h"
#include "sim_internal.h"

/*
 * Compact, keys in insertion order, reals as %.15g: a picosecond time in microseconds has at most
 * 15 significant digits below 10^9 us (1000 s), and %.15g of the double nearest such a decimal
 * prints that decimal exactly (15 = DBL_DIG, C17 5.2.4.2.2), so the times are exact and the
 * output deterministic. Longer runs keep 15 digits (10 ps at 1000 s).
 */
#define TRACE_FLAGS (JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15))

/* The middle of op i's slice: flow events bind to the slice enclosing their timestamp, and a
 * slice's start may coincide with the end of the previous slice on the same track. */
static rm_time_ps mid(const rm_trace_view *v, int32_t i)
{
	return v->start[i] + (v->end[i] - v->start[i]) / 2;
}

/* Names may be any bytes (a model's file name): rm_json_string never drops one. */
static json_t *str(const char *s)
{
	return rm_json_string(s);
}

/* Writes one JSON value (not stolen) after `sep`; false when jansson or the stream failed. */
static bool put_keep(FILE *out, const char *sep, const json_t *value)
{
	/* through a buffer: json_dumpf calls fwrite once per token */
	char buf[2048];
	size_t n = value ? json_dumpb(value, buf, sizeof(buf), TRACE_FLAGS) : 0;
	return value && fputs(sep, out) != EOF &&
	       (n > 0 && n <= sizeof(buf) ? fwrite(buf, 1, n, out) == n : json_dumpf(value, out, TRACE_FLAGS) == 0);
}

/* put_keep, then drops the value. */
static bool put(FILE *out, const char *sep, json_t *value)
{
	bool ok = put_keep(out, sep, value);
	json_decref(value);
	return ok;
}

/* An event object with its fixed leading members ph, pid (and tid when tid > 0). */
static json_t *event(const char *ph, int pid, int tid)
{
	json_t *e = json_object();
	json_object_set_new(e, "ph", json_string(ph));
	json_object_set_new(e, "pid", json_integer(pid));
	if (tid > 0)
		json_object_set_new(e, "tid", json_integer(tid));
	return e;
}

/*
 * The events that repeat per op (slices, flows, counter points) reuse one object per shape and
 * change their values in place (json_integer_set, json_real_set, json_string_set): same bytes
 * as a fresh object per event, without allocating and hashing every member every time.
 */
static json_t *member(json_t *obj, const char *key, json_t *value)
{
	json_object_set_new(obj, key, value);
	return value; /* borrowed */
}

static void set_str(json_t *node, const char *s)
{
	s = s ? s : "";
	if (strcmp(json_string_value(node), s) == 0)
		return;
	if (json_string_set(node, s) != 0) { /* not UTF-8: as rm_json_string repairs it */
		json_t *fixed = rm_json_string(s);
		json_string_set(node, json_string_value(fixed));
		json_decref(fixed);
	}
}

/* An "X" slice: shape 0 any op, 1 a collective, 2 a collective with its sync reason. */
typedef struct slice_tpl {
	json_t *e, *tid, *name, *cat, *ts, *dur, *op, *phase, *layer, *time, *sms, *coll, *bytes, *why;
	json_t *wait;
} slice_tpl;

static void slice_tpl_init(slice_tpl *t, int pid, const rm_trace_view *v, int shape)
{
	memset(t, 0, sizeof(*t));
	t->e = event("X", pid, 0);
	t->tid = member(t->e, "tid", json_integer(0));
	t->name = member(t->e, "name", json_string(""));
	t->cat = member(t->e, "cat", json_string(""));
	t->ts = member(t->e, "ts", json_real(0));
	t->dur = member(t->e, "dur", json_real(0));
	json_t *a = member(t->e, "args", json_object());
	t->op = member(a, "op", json_integer(0));
	t->phase = member(a, "phase", json_string(""));
	t->layer = member(a, "layer", json_integer(0));
	t->time = member(a, v->time_arg, json_real(0));
	if (v->sms_held)
		t->sms = member(a, "sms_held", json_integer(0));
	if (shape >= 1) {
		t->coll = member(a, "collective", json_string(""));
		t->bytes = member(a, "bytes", json_integer(0));
		if (v->granted)
			t->wait = member(a, "sm_wait_us", json_real(0));
	}
	if (shape == 2)
		t->why = member(a, "sync_reason", json_string(""));
}

static bool put_slices(FILE *out, const rm_program *prog, const rm_trace_view *v, int pid, int32_t n)
{
	slice_tpl tpl[3];
	for (int k = 0; k < 3; k++)
		slice_tpl_init(&tpl[k], pid, v, k);
	bool ok = true;
	for (int32_t i = 0; i < n && ok; i++) {
		const rm_program_op *op = &prog->ops[i];
		bool coll = op->cost.kind == RM_COST_COLLECTIVE;
		slice_tpl *t = &tpl[coll ? (op->sync_reason ? 2 : 1) : 0];
		json_integer_set(t->tid, op->stream + 1);
		set_str(t->name, op->name);
		set_str(t->cat, rm_cost_kind_name(op->cost.kind));
		json_real_set(t->ts, (double)v->start[i] / 1e6);
		json_real_set(t->dur, (double)(v->end[i] - v->start[i]) / 1e6);
		json_integer_set(t->op, i);
		set_str(t->phase, rm_program_phase_name(op->phase));
		json_integer_set(t->layer, op->layer);
		json_real_set(t->time, (double)v->time_arg_ps[i] / 1e6);
		if (t->sms)
			json_integer_set(t->sms, v->sms_held[i]);
		if (coll) {
			set_str(t->coll, rm_collective_name(op->cost.collective.op));
			json_integer_set(t->bytes, op->cost.collective.bytes);
		}
		if (t->wait)
			json_real_set(t->wait, (double)(v->granted[i] - v->start[i]) / 1e6);
		if (t->why)
			set_str(t->why, op->sync_reason);
		ok = put_keep(out, ",\n", t->e);
	}
	for (int k = 0; k < 3; k++)
		json_decref(tpl[k].e);
	return ok;
}

/* A flow end ("s" start or "f" finish, bound to the enclosing slice). */
typedef struct flow_tpl {
	json_t *e, *tid, *id, *name, *ts;
} flow_tpl;

static void flow_tpl_init(flow_tpl *t, int pid, bool finish)
{
	t->e = json_object();
	json_object_set_new(t->e, "ph", json_string(finish ? "f" : "s"));
	if (finish)
		json_object_set_new(t->e, "bp", json_string("e"));
	json_object_set_new(t->e, "pid", json_integer(pid));
	t->tid = member(t->e, "tid", json_integer(0));
	t->id = member(t->e, "id", json_integer(0));
	t->name = member(t->e, "name", json_string(""));
	json_object_set_new(t->e, "cat", json_string("event"));
	t->ts = member(t->e, "ts", json_real(0));
}

static bool put_flow(FILE *out, flow_tpl *t, int tid, json_int_t id, const char *name, rm_time_ps ts)
{
	json_integer_set(t->tid, tid);
	json_integer_set(t->id, id);
	set_str(t->name, name);
	json_real_set(t->ts, (double)ts / 1e6);
	return put_keep(out, ",\n", t->e);
}

/* Flow arrows: from the op recording an event to every op on another stream waiting on it, each
 * end at the middle of its slice. One id per wait edge: the waiting op's index and its position
 * in its wait list. */
static bool put_flows(FILE *out, const rm_program *prog, const rm_trace_view *v, int pid, int32_t n)
{
	int32_t *recorder = rm_xmalloc(((size_t)prog->n_events + 1) * sizeof(int32_t));
	for (int32_t e = 0; e < prog->n_events; e++)
		recorder[e] = -1;
	for (int32_t p = 0; p < prog->n_ops; p++) {
		const int32_t *r = rm_program_refs(prog, prog->ops[p].records);
		for (uint32_t q = 0; q < prog->ops[p].records.count; q++)
			recorder[r[q]] = p;
	}
	flow_tpl s, f;
	flow_tpl_init(&s, pid, false);
	flow_tpl_init(&f, pid, true);
	bool ok = true;
	for (int32_t i = 0; i < n && ok; i++) {
		const rm_program_op *op = &prog->ops[i];
		const int32_t *w = rm_program_refs(prog, op->waits);
		for (uint32_t j = 0; j < op->waits.count && ok; j++) {
			int32_t rec = recorder[w[j]];
			if (rec < 0 || rec >= n || prog->ops[rec].stream == op->stream)
				continue;
			json_int_t id = (json_int_t)i * 4096 + (json_int_t)j;
			const char *name = prog->events[w[j]].name;
			ok = put_flow(out, &s, prog->ops[rec].stream + 1, id, name, mid(v, rec)) &&
			     put_flow(out, &f, op->stream + 1, id, name, mid(v, i));
		}
	}
	json_decref(s.e);
	json_decref(f.e);
	free(recorder);
	return ok;
}

/* Device memory counter: one "C" point per change. */
static bool put_memory(FILE *out, const rm_trace_view *v, int pid)
{
	json_t *c = event("C", pid, 0);
	json_object_set_new(c, "name", json_string("device memory"));
	json_t *ts = member(c, "ts", json_real(0));
	json_t *bytes = member(member(c, "args", json_object()), "bytes", json_integer(0));
	bool ok = true;
	for (size_t k = 0; k < v->n_memory && ok; k++) {
		json_real_set(ts, (double)v->memory[k].time / 1e6);
		json_integer_set(bytes, v->memory[k].bytes);
		ok = put_keep(out, ",\n", c);
	}
	json_decref(c);
	return ok;
}

bool rm_trace_write(const rm_program *prog, const rm_trace_view *v, FILE *out, rm_error *err)
{
	const int pid = 1;
	json_t *other = json_object();
	json_object_set_new(other, "program", str(prog->name));
	json_object_set_new(other, "hardware", str(v->hardware));
	if (v->measured)
		json_object_set_new(other, "measured", json_true());
	if (v->note_key)
		json_object_set_new(other, v->note_key, str(v->note));
	bool ok = put(out, "{\"displayTimeUnit\":\"ns\",\"otherData\":", other) &&
		  fputs(",\"traceEvents\":[\n", out) != EOF;
	json_t *pn = event("M", pid, 0);
	json_object_set_new(pn, "name", json_string("process_name"));
	json_object_set_new(pn, "args", json_pack("{s:o}", "name", str(v->process_name)));
	ok = ok && put(out, "", pn);
	/* One track per stream (tid = stream index + 1), sorted by index. */
	for (int32_t s = 0; s < prog->n_streams && ok; s++) {
		char label[160];
		snprintf(label, sizeof(label), "%s (%s)", prog->streams[s].name,
			 rm_stream_kind_name(prog->streams[s].kind));
		json_t *tn = event("M", pid, s + 1);
		json_object_set_new(tn, "name", json_string("thread_name"));
		json_object_set_new(tn, "args", json_pack("{s:o}", "name", str(label)));
		json_t *ts = event("M", pid, s + 1);
		json_object_set_new(ts, "name", json_string("thread_sort_index"));
		json_object_set_new(ts, "args", json_pack("{s:i}", "sort_index", (int)s));
		ok = put(out, ",\n", tn) && put(out, ",\n", ts);
	}
	int32_t n = v->n_ops < prog->n_ops ? v->n_ops : prog->n_ops;
	ok = ok && put_slices(out, prog, v, pid, n) && put_flows(out, prog, v, pid, n);
	ok = ok && put_memory(out, v, pid);
	ok = ok && fputs("\n]}\n", out) != EOF;
	if (!ok || ferror(out) || fflush(out) != 0)
		return rm_error_set(err, RM_IO, NULL, 0, 0, "writing the trace failed"), false;
	return true;
}

bool rm_sim_write_trace(const rm_sim *sim, FILE *out, rm_error *err)
{
	const rm_program *prog = sim->prog;
	int32_t n = sim->ran ? prog->n_ops : 0;
	rm_time_ps *solo = rm_new(rm_time_ps, (size_t)n + 1);
	int *sms = rm_new(int, (size_t)n + 1);
	rm_time_ps *granted = rm_new(rm_time_ps, (size_t)n + 1);
	for (int32_t i = 0; i < n; i++) {
		solo[i] = sim->ops[i].solo;
		sms[i] = sim->ops[i].sms;
		granted[i] = rm_sim_op_grant(sim, i);
	}
	rm_trace_view v = {
		.process_name = prog->name && *prog->name ? prog->name : "remora",
		.hardware = sim->hw->name,
		.n_ops = n,
		.start = sim->op_start,
		.end = sim->op_end,
		.time_arg = "solo_us",
		.time_arg_ps = solo,
		.sms_held = sms,
		.granted = granted,
		.memory = sim->ran ? sim->timeline : NULL,
		.n_memory = sim->ran ? sim->tl_n : 0,
	};
	bool ok = rm_trace_write(prog, &v, out, err);
	free(solo);
	free(sms);
	free(granted);
	return ok;
}

static bool trace_fn(FILE *out, void *user, rm_error *err)
{
	return rm_sim_write_trace(user, out, err);
}

bool rm_sim_write_trace_file(const rm_sim *sim, const char *path, rm_error *err)
{
	return rm_file_write(path, trace_fn, (void *)sim, err);
}
