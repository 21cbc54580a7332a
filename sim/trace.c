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

/* t (ps) in microseconds. */
static json_t *us(rm_time_ps t)
{
	return json_real((double)t / 1e6);
}

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

/* Writes one JSON value (stolen) after `sep`; false when jansson or the stream failed. */
static bool put(FILE *out, const char *sep, json_t *value)
{
	bool ok = value && fputs(sep, out) != EOF && json_dumpf(value, out, TRACE_FLAGS) == 0;
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

static bool put_slices(FILE *out, const rm_program *prog, const rm_trace_view *v, int pid, int32_t n)
{
	bool ok = true;
	for (int32_t i = 0; i < n && ok; i++) {
		const rm_program_op *op = &prog->ops[i];
		json_t *e = event("X", pid, op->stream + 1);
		json_object_set_new(e, "name", str(op->name));
		json_object_set_new(e, "cat", json_string(rm_cost_kind_name(op->cost.kind)));
		json_object_set_new(e, "ts", us(v->start[i]));
		json_object_set_new(e, "dur", us(v->end[i] - v->start[i]));
		json_t *a = json_object();
		json_object_set_new(a, "op", json_integer(i));
		json_object_set_new(a, "phase", json_string(rm_program_phase_name(op->phase)));
		json_object_set_new(a, "layer", json_integer(op->layer));
		json_object_set_new(a, v->time_arg, us(v->time_arg_ps[i]));
		if (v->sms_held)
			json_object_set_new(a, "sms_held", json_integer(v->sms_held[i]));
		if (op->cost.kind == RM_COST_COLLECTIVE) {
			json_object_set_new(a, "collective", json_string(rm_collective_name(op->cost.collective.op)));
			json_object_set_new(a, "bytes", json_integer(op->cost.collective.bytes));
			if (op->sync_reason)
				json_object_set_new(a, "sync_reason", str(op->sync_reason));
		}
		json_object_set_new(e, "args", a);
		ok = put(out, ",\n", e);
	}
	return ok;
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
	bool ok = true;
	for (int32_t i = 0; i < n && ok; i++) {
		const rm_program_op *op = &prog->ops[i];
		const int32_t *w = rm_program_refs(prog, op->waits);
		for (uint32_t j = 0; j < op->waits.count && ok; j++) {
			int32_t rec = recorder[w[j]];
			if (rec < 0 || rec >= n || prog->ops[rec].stream == op->stream)
				continue;
			json_int_t id = (json_int_t)i * 4096 + (json_int_t)j;
			json_t *s = event("s", pid, prog->ops[rec].stream + 1);
			json_object_set_new(s, "id", json_integer(id));
			json_object_set_new(s, "name", str(prog->events[w[j]].name));
			json_object_set_new(s, "cat", json_string("event"));
			json_object_set_new(s, "ts", us(mid(v, rec)));
			json_t *f = json_object();
			json_object_set_new(f, "ph", json_string("f"));
			json_object_set_new(f, "bp", json_string("e"));
			json_object_set_new(f, "pid", json_integer(pid));
			json_object_set_new(f, "tid", json_integer(op->stream + 1));
			json_object_set_new(f, "id", json_integer(id));
			json_object_set_new(f, "name", str(prog->events[w[j]].name));
			json_object_set_new(f, "cat", json_string("event"));
			json_object_set_new(f, "ts", us(mid(v, i)));
			ok = put(out, ",\n", s) && put(out, ",\n", f);
		}
	}
	free(recorder);
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
	/* Device memory counter. */
	for (size_t k = 0; k < v->n_memory && ok; k++) {
		json_t *c = event("C", pid, 0);
		json_object_set_new(c, "name", json_string("device memory"));
		json_object_set_new(c, "ts", us(v->memory[k].time));
		json_object_set_new(c, "args", json_pack("{s:I}", "bytes", (json_int_t)v->memory[k].bytes));
		ok = put(out, ",\n", c);
	}
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
	for (int32_t i = 0; i < n; i++) {
		solo[i] = sim->ops[i].solo;
		sms[i] = sim->ops[i].sms;
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
		.memory = sim->ran ? sim->timeline : NULL,
		.n_memory = sim->ran ? sim->tl_n : 0,
	};
	bool ok = rm_trace_write(prog, &v, out, err);
	free(solo);
	free(sms);
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
