/*
 * A measurement of `remora exec`: its trace (the simulator's format), its comparison with the
 * engine's prediction and its calibration rows (remora/exec.h). Plain C: no CUDA header.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/fy_util.h"
#include "remora/exec.h"
#include "remora/json.h"
#include "remora/sim.h"
#include "remora/workload.h"

void rm_exec_measurement_init(rm_exec_measurement *m, int32_t n_ops)
{
	memset(m, 0, sizeof(*m));
	m->n_ops = n_ops;
	m->op_start_s = rm_new(double, (size_t)n_ops + 1);
	m->op_end_s = rm_new(double, (size_t)n_ops + 1);
	m->op_mean_s = rm_new(double, (size_t)n_ops + 1);
	m->world = 1;
}

void rm_exec_measurement_finish(rm_exec_measurement *m)
{
	if (!m)
		return;
	free(m->op_start_s);
	free(m->op_end_s);
	free(m->op_mean_s);
	free(m->graph_op_mean_s);
	m->op_start_s = m->op_end_s = m->op_mean_s = m->graph_op_mean_s = NULL;
}

/* ---- trace -------------------------------------------------------------------------------- */

static rm_time_ps ps_of(double s)
{
	return s > 0 ? rm_time_from_s(s) : 0;
}

bool rm_exec_write_trace(const rm_program *prog, const rm_exec_measurement *m, FILE *out, rm_error *err)
{
	int32_t n = prog->n_ops < m->n_ops ? prog->n_ops : m->n_ops;
	rm_time_ps *start = rm_new(rm_time_ps, (size_t)n + 1);
	rm_time_ps *end = rm_new(rm_time_ps, (size_t)n + 1);
	rm_time_ps *mean = rm_new(rm_time_ps, (size_t)n + 1);
	for (int32_t i = 0; i < n; i++) {
		start[i] = ps_of(m->op_start_s[i]);
		end[i] = ps_of(m->op_end_s[i]);
		if (end[i] < start[i])
			end[i] = start[i];
		mean[i] = ps_of(m->op_mean_s[i]);
	}
	char pname[300];
	snprintf(pname, sizeof(pname), "%s (measured)", prog->name && *prog->name ? prog->name : "remora");
	/* the executor allocates its whole plan up front: one counter point */
	rm_mem_point memory = {.time = 0, .bytes = m->device_used_bytes > 0 ? m->device_used_bytes : m->device_bytes};
	rm_trace_view v = {
		.process_name = pname,
		.hardware = m->device[0] ? m->device : "measured",
		.measured = true,
		.note_key = "attention_kernel",
		.note = m->attention_kernel,
		.n_ops = n,
		.start = start,
		.end = end,
		.time_arg = "mean_us",
		.time_arg_ps = mean,
		.memory = &memory,
		.n_memory = 1,
	};
	bool ok = rm_trace_write(prog, &v, out, err);
	free(start);
	free(end);
	free(mean);
	return ok;
}

/* ---- comparison --------------------------------------------------------------------------- */

/* A mutable copy of prog (through its JSON form, the one format every reader shares). */
static rm_program *copy_program(const rm_program *prog, rm_error *err)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f) {
		rm_error_set(err, RM_NOMEM, NULL, 0, 0, "cannot copy the program");
		return NULL;
	}
	bool ok = rm_program_write(prog, f, err);
	if (fclose(f) != 0)
		ok = false;
	rm_program *copy = ok ? rm_program_parse(buf, len, prog->name, err) : NULL;
	free(buf);
	return copy;
}

static double rel_error(double predicted, double measured)
{
	return measured > 0 ? (predicted - measured) / measured : 0.0;
}

static json_t *error_json(double predicted, double measured)
{
	return measured > 0 ? json_real(rel_error(predicted, measured)) : json_null();
}

typedef struct op_err {
	int32_t op;
	double predicted_s, measured_s;
} op_err;

static int by_abs_error(const void *a, const void *b)
{
	const op_err *x = a, *y = b;
	double ex = fabs(x->predicted_s - x->measured_s), ey = fabs(y->predicted_s - y->measured_s);
	if (ex != ey)
		return ex > ey ? -1 : 1;
	return x->op - y->op;
}

/*
 * Whether attention a ran as a fused kernel in m: with cuDNN's SDPA (RM_EXEC_ATTN_FUSED_KERNEL,
 * or "mixed") the ops rm_exec_attention_fusable takes, the others unfused; with the unfused
 * kernels (or no name: a measurement before the fused path) none; any other name (a measurement
 * made by another tool) is taken as the simulator's fused kernel.
 */
static bool ran_fused(const rm_exec_measurement *m, const rm_attention_cost *a)
{
	const char *k = m->attention_kernel;
	if (strcmp(k, RM_EXEC_ATTN_FUSED_KERNEL) == 0 || strcmp(k, "mixed") == 0)
		return rm_exec_attention_fusable(a);
	return !(strcmp(k, RM_EXEC_ATTN_UNFUSED_KERNEL) == 0 || !k[0]);
}

json_t *rm_exec_compare(const rm_program *prog, const rm_exec_plan *plan, const rm_hw_profile *hw, int hw_queues,
			const rm_exec_measurement *m, rm_error *err)
{
	rm_program *pred = copy_program(prog, err);
	if (!pred)
		return NULL;
	/* price attention as the kernels that ran: the simulator's own (fused kernel) figure where
	 * cuDNN's SDPA ran, the unfused lowering's elsewhere */
	int32_t priced_fused = 0, priced_unfused = 0;
	for (int32_t i = 0; i < pred->n_ops; i++) {
		if (pred->ops[i].cost.kind != RM_COST_ATTENTION || pred->ops[i].time_s >= 0)
			continue;
		if (ran_fused(m, &pred->ops[i].cost.attention)) {
			priced_fused++;
		} else {
			pred->ops[i].time_s = rm_exec_attention_unfused_s(&pred->ops[i].cost.attention, hw);
			priced_unfused++;
		}
	}
	rm_sim_options opt = {.hw_queues = hw_queues};
	rm_sim *sim = rm_sim_create(pred, hw, &opt, err);
	if (!sim) {
		rm_program_destroy(pred);
		return NULL;
	}
	if (rm_sim_run(sim, err) != RM_OK) {
		rm_sim_destroy(sim);
		rm_program_destroy(pred);
		return NULL;
	}
	const rm_sim_metrics *met = rm_sim_get_metrics(sim);
	double kp[RM_COST_KIND_COUNT] = {0}, km[RM_COST_KIND_COUNT] = {0}, kg[RM_COST_KIND_COUNT] = {0};
	int kn[RM_COST_KIND_COUNT] = {0};
	op_err *errs = rm_new(op_err, (size_t)prog->n_ops + 1);
	int32_t n = prog->n_ops < m->n_ops ? prog->n_ops : m->n_ops;
	for (int32_t i = 0; i < n; i++) {
		rm_cost_kind k = prog->ops[i].cost.kind;
		double p = rm_time_to_s(rm_sim_op_solo(sim, i));
		kp[k] += p;
		km[k] += m->op_mean_s[i];
		if (m->graph_op_mean_s)
			kg[k] += m->graph_op_mean_s[i];
		kn[k]++;
		errs[i] = (op_err){i, p, m->op_mean_s[i]};
	}
	json_t *o = json_object();
	json_object_set_new(o, "schema", json_string(RM_EXEC_COMPARE_SCHEMA));
	json_object_set_new(o, "program", rm_json_string(prog->name));
	json_object_set_new(o, "hardware", json_string(hw->name));
	json_object_set_new(o, "device", json_string(m->device));
	json_object_set_new(o, "attention_kernel", json_string(m->attention_kernel));
	json_object_set_new(o, "attention_priced",
			    json_pack("{s:i, s:i}", "fused", (int)priced_fused, "unfused", (int)priced_unfused));
	json_object_set_new(o, "iterations", json_integer(m->iterations));
	json_object_set_new(o, "world", json_integer(m->world));
	json_t *kinds = json_object();
	for (int k = 0; k < RM_COST_KIND_COUNT; k++) {
		if (!kn[k])
			continue;
		json_t *row = json_pack("{s:i, s:f, s:f, s:o}", "ops", kn[k], "predicted_s", kp[k], "measured_s", km[k],
					"error", error_json(kp[k], km[k]));
		if (m->graph_op_mean_s) { /* the same ops timed by events captured in the graph */
			json_object_set_new(row, "measured_graph_s", json_real(kg[k]));
			json_object_set_new(row, "error_graph", error_json(kp[k], kg[k]));
		}
		json_object_set_new(kinds, rm_cost_kind_name((rm_cost_kind)k), row);
	}
	json_object_set_new(o, "kinds", kinds);
	double ps = rm_time_to_s(met->step_time);
	json_object_set_new(o, "step", json_pack("{s:f, s:f, s:o}", "predicted_s", ps, "measured_s", m->step_s,
						  "error", error_json(ps, m->step_s)));
	if (m->graph_step_s > 0)
		json_object_set_new(o, "step_graph",
				    json_pack("{s:f, s:f, s:o, s:f}", "predicted_s", ps, "measured_s", m->graph_step_s,
					      "error", error_json(ps, m->graph_step_s), "launch_host_s",
					      m->graph_launch_host_s));
	int64_t measured_mem = m->device_used_bytes > 0 ? m->device_used_bytes : m->device_bytes;
	json_object_set_new(o, "memory",
			    json_pack("{s:I, s:I, s:I, s:I, s:o}", "predicted_peak_bytes",
				      (json_int_t)met->peak_memory_bytes, "planned_tensor_bytes",
				      (json_int_t)(plan->region_bytes[RM_EXEC_POOL] + plan->region_bytes[RM_EXEC_PERSISTENT]),
				      "allocated_bytes", (json_int_t)m->device_bytes, "measured_bytes",
				      (json_int_t)measured_mem, "error",
				      error_json((double)met->peak_memory_bytes, (double)measured_mem)));
	qsort(errs, (size_t)n, sizeof(*errs), by_abs_error);
	json_t *worst = json_array();
	for (int32_t i = 0; i < n && i < 5; i++)
		json_array_append_new(worst, json_pack("{s:i, s:s, s:s, s:f, s:f, s:o}", "op", (int)errs[i].op, "name",
						       prog->ops[errs[i].op].name, "kind",
						       rm_cost_kind_name(prog->ops[errs[i].op].cost.kind),
						       "predicted_s", errs[i].predicted_s, "measured_s",
						       errs[i].measured_s,
						       "error", error_json(errs[i].predicted_s, errs[i].measured_s)));
	json_object_set_new(o, "worst_ops", worst);
	free(errs);
	rm_sim_destroy(sim);
	rm_program_destroy(pred);
	return o;
}

static void print_row_keys(FILE *out, const char *name, const json_t *row, const char *measured, const char *error,
			   double scale, const char *unit)
{
	double p = json_number_value(json_object_get(row, "predicted_s"));
	double mm = json_number_value(json_object_get(row, measured));
	const json_t *e = json_object_get(row, error);
	fprintf(out, "  %-19s %12.3f %s %12.3f %s", name, p * scale, unit, mm * scale, unit);
	if (json_is_number(e))
		fprintf(out, "  %+7.1f %%\n", json_number_value(e) * 100);
	else
		fprintf(out, "        -\n");
}

static void print_row(FILE *out, const char *name, const json_t *row, double scale, const char *unit)
{
	print_row_keys(out, name, row, "measured_s", "error", scale, unit);
}

void rm_exec_compare_print(const json_t *cmp, FILE *out)
{
	fprintf(out, "predicted (%s) vs measured (%s), attention: %s, %d iterations, %d rank%s\n",
		json_string_value(json_object_get(cmp, "hardware")), json_string_value(json_object_get(cmp, "device")),
		json_string_value(json_object_get(cmp, "attention_kernel")),
		(int)json_integer_value(json_object_get(cmp, "iterations")),
		(int)json_integer_value(json_object_get(cmp, "world")),
		json_integer_value(json_object_get(cmp, "world")) == 1 ? "" : "s");
	const json_t *ap = json_object_get(cmp, "attention_priced");
	if (ap && (json_integer_value(json_object_get(ap, "fused")) || json_integer_value(json_object_get(ap, "unfused"))))
		fprintf(out, "  attention priced: %d ops as the fused kernel (the simulator's figure), %d as the unfused "
			     "GEMMs + softmax\n",
			(int)json_integer_value(json_object_get(ap, "fused")),
			(int)json_integer_value(json_object_get(ap, "unfused")));
	fprintf(out, "  %-19s %15s %15s %9s\n", "kind (sum)", "predicted", "measured", "error");
	const char *key;
	const json_t *row;
	json_object_foreach((json_t *)json_object_get(cmp, "kinds"), key, row) {
		print_row(out, key, row, 1e3, "ms");
	}
	print_row(out, "step", json_object_get(cmp, "step"), 1e3, "ms");
	const json_t *sg = json_object_get(cmp, "step_graph");
	if (sg) {
		/* graph mode: the same kinds timed by events captured in the graph, then its replays */
		json_object_foreach((json_t *)json_object_get(cmp, "kinds"), key, row) {
			if (!json_object_get(row, "measured_graph_s"))
				continue;
			char label[48];
			snprintf(label, sizeof(label), "%s (graph)", key);
			print_row_keys(out, label, row, "measured_graph_s", "error_graph", 1e3, "ms");
		}
		print_row(out, "step (graph)", sg, 1e3, "ms");
	}
	const json_t *mem = json_object_get(cmp, "memory");
	char b[3][32];
	const json_t *e = json_object_get(mem, "error");
	fprintf(out, "  %-19s %15s %15s", "peak memory",
		rm_format_bytes((int64_t)json_integer_value(json_object_get(mem, "predicted_peak_bytes")), b[0], sizeof(b[0])),
		rm_format_bytes((int64_t)json_integer_value(json_object_get(mem, "measured_bytes")), b[1], sizeof(b[1])));
	if (json_is_number(e))
		fprintf(out, "  %+7.1f %%", json_number_value(e) * 100);
	fprintf(out, "  (planned tensors %s)\n",
		rm_format_bytes((int64_t)json_integer_value(json_object_get(mem, "planned_tensor_bytes")), b[2], sizeof(b[2])));
	const json_t *worst = json_object_get(cmp, "worst_ops");
	if (json_array_size(worst))
		fprintf(out, "largest per-op differences\n");
	size_t i;
	json_array_foreach(worst, i, row) {
		char label[96];
		snprintf(label, sizeof(label), "%s", json_string_value(json_object_get(row, "name")));
		fprintf(out, "  %-40s %10.1f us %10.1f us\n", label,
			json_number_value(json_object_get(row, "predicted_s")) * 1e6,
			json_number_value(json_object_get(row, "measured_s")) * 1e6);
	}
}

/* ---- calibration rows ---------------------------------------------------------------------- */

typedef struct span {
	double start, end;
	int32_t op;
} span;

static int by_start(const void *a, const void *b)
{
	const span *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->op - y->op;
}

/* The members every calibration row ends with: unit and the run's machine and versions. */
static void set_run_keys(json_t *row, const rm_exec_measurement *m, const char *machine)
{
	json_object_set_new(row, "unit", json_string("us"));
	json_object_set_new(row, "machine", rm_json_string(machine));
	json_object_set_new(row, "gpu", json_string(m->device));
	json_object_set_new(row, "driver", json_string(m->driver));
	json_object_set_new(row, "cuda", json_string(m->cuda));
	json_object_set_new(row, "nccl", json_string(m->nccl));
}

/* The benchmark and parameters a calibration row of op has, or NULL (params then untouched). */
static const char *row_params(const rm_program_op *op, json_t *params)
{
	switch (op->cost.kind) {
	case RM_COST_GEMM: {
		const rm_gemm_shape *g = &op->cost.gemm;
		const char *dt = g->dtype == RM_DTYPE_BF16					? "bf16"
				 : g->dtype == RM_DTYPE_FP8_E4M3 || g->dtype == RM_DTYPE_FP8_E5M2 ? "fp8"
												  : NULL;
		if (!dt)
			return NULL;
		json_object_set_new(params, "dtype", json_string(dt));
		json_object_set_new(params, "m", json_integer(g->m));
		json_object_set_new(params, "n", json_integer(g->n));
		json_object_set_new(params, "k", json_integer(g->k));
		json_object_set_new(params, "batch", json_integer(g->batch));
		return "gemm";
	}
	case RM_COST_ELEMENTWISE:
		json_object_set_new(params, "bytes",
				    json_integer(op->cost.elementwise.bytes_read + op->cost.elementwise.bytes_written));
		return "hbm_copy";
	case RM_COST_COPY:
		if (op->cost.copy.dir == RM_COPY_D2D || op->cost.copy.dir == RM_COPY_P2P)
			return NULL;
		json_object_set_new(params, "bytes", json_integer(op->cost.copy.bytes));
		return op->cost.copy.dir == RM_COPY_H2D ? "h2d" : "d2h";
	case RM_COST_COLLECTIVE: {
		const rm_collective_cost *c = &op->cost.collective;
		const char *bench = c->op == RM_COLL_ALL_GATHER	      ? "all_gather"
				    : c->op == RM_COLL_REDUCE_SCATTER ? "reduce_scatter"
				    : c->op == RM_COLL_ALL_REDUCE     ? "all_reduce"
								      : NULL;
		if (c->group_size < 2 || !bench)
			return NULL;
		json_object_set_new(params, "bytes", json_integer(c->bytes));
		json_object_set_new(params, "ranks", json_integer(c->group_size));
		json_object_set_new(params, "nodes", json_integer(c->span));
		return bench;
	}
	default:
		return NULL;
	}
}

int rm_exec_write_calib_rows(const rm_program *prog, const rm_exec_measurement *m, const char *machine, FILE *out,
			     rm_error *err)
{
	int32_t n = prog->n_ops < m->n_ops ? prog->n_ops : m->n_ops;
	span *s = rm_new(span, (size_t)n + 1);
	for (int32_t i = 0; i < n; i++)
		s[i] = (span){m->op_start_s[i], m->op_end_s[i], i};
	qsort(s, (size_t)n, sizeof(*s), by_start);
	int rows = 0;
	bool ok = true;
	double max_end = -1.0;
	for (int32_t q = 0; q < n && ok; q++) {
		bool alone = s[q].start >= max_end && (q + 1 >= n || s[q].end <= s[q + 1].start);
		if (s[q].end > max_end)
			max_end = s[q].end;
		const rm_program_op *op = &prog->ops[s[q].op];
		double us = m->op_mean_s[s[q].op] * 1e6;
		if (!alone || !(us > 0))
			continue;
		json_t *params = json_object();
		const char *bench = row_params(op, params);
		if (!bench) {
			json_decref(params);
			continue;
		}
		json_object_set_new(params, "source", json_string("remora exec"));
		json_object_set_new(params, "op", rm_json_string(op->name));
		json_t *row = json_object();
		json_object_set_new(row, "benchmark", json_string(bench));
		json_object_set_new(row, "params", params);
		json_object_set_new(row, "value", json_real(us));
		set_run_keys(row, m, machine);
		/* one JSONL row per line; %.17g keeps the measured double exactly */
		ok = json_dumpf(row, out, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17)) == 0 &&
		     fputc('\n', out) != EOF;
		json_decref(row);
		rows++;
	}
	free(s);
	if (!ok || ferror(out) || fflush(out) != 0) {
		rm_error_set(err, RM_IO, NULL, 0, 0, "writing the calibration rows failed");
		return -1;
	}
	return rows;
}

/* ---- measurement JSON ---------------------------------------------------------------------- */

json_t *rm_exec_measurement_json(const rm_program *prog, const rm_exec_measurement *m)
{
	json_t *o = json_object();
	json_object_set_new(o, "schema", json_string(RM_EXEC_MEASUREMENT_SCHEMA));
	json_object_set_new(o, "program", rm_json_string(prog->name));
	json_object_set_new(o, "device", json_string(m->device));
	json_object_set_new(o, "attention_kernel", json_string(m->attention_kernel));
	json_object_set_new(o, "driver", json_string(m->driver));
	json_object_set_new(o, "cuda", json_string(m->cuda));
	json_object_set_new(o, "nccl", json_string(m->nccl));
	json_object_set_new(o, "world", json_integer(m->world));
	json_object_set_new(o, "iterations", json_integer(m->iterations));
	json_object_set_new(o, "step_s", json_real(m->step_s));
	json_object_set_new(o, "step_op_events_s", json_real(m->step_op_events_s));
	json_object_set_new(o, "device_bytes", json_integer(m->device_bytes));
	json_object_set_new(o, "device_used_bytes", json_integer(m->device_used_bytes));
	if (m->graph_step_s > 0)
		json_object_set_new(o, "graph",
				    json_pack("{s:f, s:f, s:f}", "step_s", m->graph_step_s, "step_op_events_s",
					      m->graph_step_op_events_s, "launch_host_s", m->graph_launch_host_s));
	json_t *ops = json_array();
	for (int32_t i = 0; i < m->n_ops && i < prog->n_ops; i++) {
		json_t *op = json_pack("{s:s, s:f, s:f, s:f}", "name", prog->ops[i].name, "start_s", m->op_start_s[i],
				       "end_s", m->op_end_s[i], "mean_s", m->op_mean_s[i]);
		if (m->graph_op_mean_s)
			json_object_set_new(op, "graph_mean_s", json_real(m->graph_op_mean_s[i]));
		json_array_append_new(ops, op);
	}
	json_object_set_new(o, "ops", ops);
	return o;
}

static bool get_string(json_t *o, const char *key, char *buf, size_t size)
{
	json_t *v = json_object_get(o, key);
	if (!v)
		return true;
	if (!json_is_string(v))
		return false;
	snprintf(buf, size, "%s", json_string_value(v));
	return true;
}

static bool get_time(json_t *o, const char *key, double *out)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_number(v))
		return false;
	*out = json_number_value(v);
	return isfinite(*out) && *out >= 0;
}

/* Gives an error whose message starts with a JSON path the line:column of that value in the file. */
static void locate_measurement_error(const char *path, bool wrapped, rm_error *err)
{
	char where[256], *text = NULL;
	size_t len = 0;
	int line, col;
	if (!err || err->line > 0 || !rm__fy_message_path(err->msg, wrapped ? "/measurement" : "", where, sizeof(where)))
		return;
	if (!rm_read_file(path, &text, &len, NULL))
		return;
	if (rm__fy_path_position(text, len, true, where, false, &line, &col)) {
		err->line = line;
		err->column = col;
	}
	free(text);
}

rm_status rm_exec_measurement_load(const char *path, const rm_program *prog, rm_exec_measurement *m, rm_error *err)
{
	/* read through rm_read_file: regular files only, a FIFO is refused instead of blocking */
	char *text = NULL;
	size_t len = 0;
	if (!rm_read_file(path, &text, &len, err))
		return err ? err->status : RM_IO;
	json_error_t jerr;
	json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	free(text);
	if (!doc)
		return rm_error_set(err, RM_PARSE, path, jerr.line > 0 ? jerr.line : 0, jerr.column > 0 ? jerr.column : 0,
				    "%s", jerr.text);
	rm_status st = RM_OK;
	json_t *o = json_object_get(doc, "measurement");
	if (!o)
		o = doc;
	const char *schema = json_string_value(json_object_get(o, "schema"));
	json_t *ops = json_object_get(o, "ops");
	if (!schema || strcmp(schema, RM_EXEC_MEASUREMENT_SCHEMA) != 0) {
		st = rm_error_set(err, RM_INVALID, path, 0, 0, "schema: expected \"%s\" (remora exec --json output)",
				  RM_EXEC_MEASUREMENT_SCHEMA);
		goto out;
	}
	if (!json_is_array(ops) || json_array_size(ops) != (size_t)prog->n_ops) {
		st = rm_error_set(err, RM_INVALID, path, 0, 0,
				  "ops: expected an array of %d ops (one per op of the program), got %zu", prog->n_ops,
				  json_array_size(ops));
		goto out;
	}
	rm_exec_measurement tmp;
	rm_exec_measurement_init(&tmp, prog->n_ops);
	json_t *v;
	if (!get_string(o, "device", tmp.device, sizeof(tmp.device)) ||
	    !get_string(o, "attention_kernel", tmp.attention_kernel, sizeof(tmp.attention_kernel)) ||
	    !get_string(o, "driver", tmp.driver, sizeof(tmp.driver)) ||
	    !get_string(o, "cuda", tmp.cuda, sizeof(tmp.cuda)) || !get_string(o, "nccl", tmp.nccl, sizeof(tmp.nccl)) ||
	    !get_time(o, "step_s", &tmp.step_s)) {
		st = rm_error_set(err, RM_INVALID, path, 0, 0,
				  "device, attention_kernel, driver, cuda, nccl: strings; step_s: a time in seconds");
		goto fail;
	}
	if (json_object_get(o, "step_op_events_s") && !get_time(o, "step_op_events_s", &tmp.step_op_events_s)) {
		st = rm_error_set(err, RM_INVALID, path, 0, 0, "step_op_events_s: a time in seconds");
		goto fail;
	}
	json_t *g = json_object_get(o, "graph");
	if (g && (!json_is_object(g) || !get_time(g, "step_s", &tmp.graph_step_s) ||
		  (json_object_get(g, "step_op_events_s") &&
		   !get_time(g, "step_op_events_s", &tmp.graph_step_op_events_s)) ||
		  (json_object_get(g, "launch_host_s") && !get_time(g, "launch_host_s", &tmp.graph_launch_host_s)))) {
		st = rm_error_set(err, RM_INVALID, path, 0, 0,
				  "graph: an object of step_s, step_op_events_s and launch_host_s in seconds");
		goto fail;
	}
	tmp.world = (int)json_integer_value(json_object_get(o, "world"));
	tmp.iterations = (int)json_integer_value(json_object_get(o, "iterations"));
	tmp.device_bytes = (int64_t)json_integer_value(json_object_get(o, "device_bytes"));
	tmp.device_used_bytes = (int64_t)json_integer_value(json_object_get(o, "device_used_bytes"));
	if (tmp.world < 1)
		tmp.world = 1;
	size_t i;
	json_array_foreach(ops, i, v) {
		const char *name = json_string_value(json_object_get(v, "name"));
		if (!name || strcmp(name, prog->ops[i].name) != 0) {
			st = rm_error_set(err, RM_INVALID, path, 0, 0,
					  "ops[%zu]: name '%s' but the program's op %zu is '%s' (a measurement of "
					  "another program?)",
					  i, name ? name : "(none)", i, prog->ops[i].name);
			goto fail;
		}
		if (!get_time(v, "start_s", &tmp.op_start_s[i]) || !get_time(v, "end_s", &tmp.op_end_s[i]) ||
		    !get_time(v, "mean_s", &tmp.op_mean_s[i])) {
			st = rm_error_set(err, RM_INVALID, path, 0, 0,
					  "ops[%zu]: start_s, end_s and mean_s must be non-negative seconds", i);
			goto fail;
		}
		/* graph_mean_s: on every op or on none */
		if (i == 0 && json_object_get(v, "graph_mean_s"))
			tmp.graph_op_mean_s = rm_new(double, (size_t)prog->n_ops + 1);
		bool has = json_object_get(v, "graph_mean_s") != NULL;
		if (has != (tmp.graph_op_mean_s != NULL) ||
		    (has && !get_time(v, "graph_mean_s", &tmp.graph_op_mean_s[i]))) {
			st = rm_error_set(err, RM_INVALID, path, 0, 0,
					  "ops[%zu]: graph_mean_s must be non-negative seconds, on every op or on none", i);
			goto fail;
		}
	}
	*m = tmp;
	goto out;
fail:
	rm_exec_measurement_finish(&tmp);
out:
	if (st != RM_OK)
		locate_measurement_error(path, o != doc, err);
	json_decref(doc);
	return st;
}
