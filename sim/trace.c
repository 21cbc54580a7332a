/*
 * Chrome JSON trace of a run (remora/sim.h rm_sim_write_trace), for ui.perfetto.dev.
 *
 * Format: https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU
 * ("Trace Event Format"): {"traceEvents": [...], "displayTimeUnit": "ns"}. Timestamps are in
 * microseconds; we print picoseconds exactly as "us.pppppp" (integer arithmetic, no rounding),
 * so the output is deterministic. Written by hand with fprintf: the trace of a 10^6-op run is
 * large and a DOM would double the memory.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

/* Prints t (ps) as microseconds with 6 decimals. */
static void put_us(FILE *out, rm_time_ps t)
{
	fprintf(out, "%" PRIu64 ".%06" PRIu64, t / 1000000u, t % 1000000u);
}

/* The middle of op i's slice: flow events bind to the slice enclosing their timestamp, and a
 * slice's start may coincide with the end of the previous slice on the same track. */
static rm_time_ps mid(const rm_trace_view *v, int32_t i)
{
	return v->start[i] + (v->end[i] - v->start[i]) / 2;
}

/* Prints s as a JSON string (quotes, backslashes and control characters escaped). */
static void put_str(FILE *out, const char *s)
{
	fputc('"', out);
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(out, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(out, "\\u%04x", *p);
		else
			fputc(*p, out);
	}
	fputc('"', out);
}

bool rm_trace_write(const rm_program *prog, const rm_trace_view *v, FILE *out, rm_error *err)
{
	const int pid = 1;
	fprintf(out, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"program\":");
	put_str(out, prog->name);
	fprintf(out, ",\"hardware\":");
	put_str(out, v->hardware);
	if (v->measured)
		fprintf(out, ",\"measured\":true");
	if (v->note_key) {
		fprintf(out, ",");
		put_str(out, v->note_key);
		fprintf(out, ":");
		put_str(out, v->note);
	}
	fprintf(out, "},\"traceEvents\":[\n");
	fprintf(out, "{\"ph\":\"M\",\"pid\":%d,\"name\":\"process_name\",\"args\":{\"name\":", pid);
	put_str(out, v->process_name);
	fprintf(out, "}}");
	/* One track per stream (tid = stream index + 1), sorted by index. */
	for (int32_t s = 0; s < prog->n_streams; s++) {
		fprintf(out, ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_name\",\"args\":"
			     "{\"name\":",
			pid, s + 1);
		char label[160];
		snprintf(label, sizeof(label), "%s (%s)", prog->streams[s].name,
			 rm_stream_kind_name(prog->streams[s].kind));
		put_str(out, label);
		fprintf(out, "}},\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_sort_index\","
			     "\"args\":{\"sort_index\":%d}}",
			pid, s + 1, s);
	}
	int32_t n = v->n_ops < prog->n_ops ? v->n_ops : prog->n_ops;
	for (int32_t i = 0; i < n; i++) {
		const rm_program_op *op = &prog->ops[i];
		fprintf(out, ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"name\":", pid, op->stream + 1);
		put_str(out, op->name);
		fprintf(out, ",\"cat\":\"%s\",\"ts\":", rm_cost_kind_name(op->cost.kind));
		put_us(out, v->start[i]);
		fprintf(out, ",\"dur\":");
		put_us(out, v->end[i] - v->start[i]);
		fprintf(out, ",\"args\":{\"op\":%d,\"phase\":\"%s\",\"layer\":%d,\"%s\":", i,
			rm_program_phase_name(op->phase), op->layer, v->time_arg);
		put_us(out, v->time_arg_ps[i]);
		if (v->sms_held)
			fprintf(out, ",\"sms_held\":%u", (unsigned)v->sms_held[i]);
		if (op->cost.kind == RM_COST_COLLECTIVE) {
			fprintf(out, ",\"collective\":\"%s\",\"bytes\":%" PRId64,
				rm_collective_name(op->cost.collective.op), op->cost.collective.bytes);
			if (op->sync_reason) {
				fprintf(out, ",\"sync_reason\":");
				put_str(out, op->sync_reason);
			}
		}
		fprintf(out, "}}");
	}
	/* Flow arrows: from the op recording an event to every op on another stream waiting on
	 * it, each end at the middle of its slice. One id per wait edge: the waiting op's index and its position in its wait list. */
	int32_t *recorder = rm_xmalloc(((size_t)prog->n_events + 1) * sizeof(int32_t));
	for (int32_t e = 0; e < prog->n_events; e++)
		recorder[e] = -1;
	for (int32_t p = 0; p < prog->n_ops; p++) {
		const int32_t *r = rm_program_refs(prog, prog->ops[p].records);
		for (uint32_t q = 0; q < prog->ops[p].records.count; q++)
			recorder[r[q]] = p;
	}
	for (int32_t i = 0; i < n; i++) {
		const rm_program_op *op = &prog->ops[i];
		const int32_t *w = rm_program_refs(prog, op->waits);
		for (uint32_t j = 0; j < op->waits.count; j++) {
			int32_t rec = recorder[w[j]];
			if (rec < 0 || rec >= n || prog->ops[rec].stream == op->stream)
				continue;
			uint64_t id = (uint64_t)i * 4096u + j;
			fprintf(out, ",\n{\"ph\":\"s\",\"pid\":%d,\"tid\":%d,\"id\":%" PRIu64
				     ",\"name\":",
				pid, prog->ops[rec].stream + 1, id);
			put_str(out, prog->events[w[j]].name);
			fprintf(out, ",\"cat\":\"event\",\"ts\":");
			put_us(out, mid(v, rec));
			fprintf(out, "},\n{\"ph\":\"f\",\"bp\":\"e\",\"pid\":%d,\"tid\":%d,\"id\":%" PRIu64
				     ",\"name\":",
				pid, op->stream + 1, id);
			put_str(out, prog->events[w[j]].name);
			fprintf(out, ",\"cat\":\"event\",\"ts\":");
			put_us(out, mid(v, i));
			fprintf(out, "}");
		}
	}
	free(recorder);
	/* Device memory counter. */
	for (size_t k = 0; k < v->n_memory; k++) {
		fprintf(out, ",\n{\"ph\":\"C\",\"pid\":%d,\"name\":\"device memory\",\"ts\":", pid);
		put_us(out, v->memory[k].time);
		fprintf(out, ",\"args\":{\"bytes\":%" PRId64 "}}", v->memory[k].bytes);
	}
	fprintf(out, "\n]}\n");
	if (ferror(out) || fflush(out) != 0)
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
