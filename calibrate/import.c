/*
 * Importers into the calibration database: nccl-tests logs and the JSON lines of
 * remora-calibrate. Each parses its whole input first, then writes in one transaction.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib_internal.h"

/* ---- nccl-tests --------------------------------------------------------------------------- */

static const char *coll_benchmark(rm_coll coll)
{
	static const char *const names[RM_COLL_COUNT] = {"all_gather", "reduce_scatter", "all_reduce",
							 "all_to_all", "send_recv"};
	return names[coll];
}

rm_status rm_calib_import_nccl_tests(rm_calib_db *db, const char *path, const char *algo, int gpus_hint,
				     rm_calib_import_stats *stats, rm_error *err)
{
	rm_calib_import_stats s = {0};
	char *text = NULL;
	size_t len = 0;
	if (!rm_read_file(path, &text, &len, err))
		return err ? err->status : RM_IO;
	rm_nccl_tests_log log;
	rm_status st = rm_nccl_tests_parse(path, text, len, gpus_hint, &log, err);
	free(text);
	if (st != RM_OK)
		return st;
	/* a log of which nothing can be stored is an error, not an empty import */
	int storable = 0, wrong = 0, zero = 0, na = 0;
	for (int i = 0; i < log.n_rows; i++) {
		const rm_nccl_tests_row *r = &log.rows[i];
		for (int g = 0; g < 2; g++) {
			if (!r->has[g])
				na++;
			else if (r->wrong[g] > 0)
				wrong++;
			else if (!(r->time_us[g] > 0))
				zero++;
			else
				storable++;
		}
	}
	if (storable == 0) {
		st = rm_error_set(err, RM_MISSING, path, 0, 0,
				  "none of the %d rows can be stored (placements: %d with #wrong > 0, %d with a zero "
				  "time, %d N/A); nothing was imported",
				  log.n_rows, wrong, zero, na);
		rm_nccl_tests_log_finish(&log);
		return st;
	}
	rm_calib__run run = {0};
	snprintf(run.machine, sizeof(run.machine), "%s", log.host);
	snprintf(run.gpu, sizeof(run.gpu), "%s", log.gpu);
	snprintf(run.nccl, sizeof(run.nccl), "%s", log.nccl_version);
	snprintf(run.source, sizeof(run.source), "nccl-tests %s: %s",
		 log.tests_version[0] ? log.tests_version : "(version not printed)", path);
	const char *algo_label = algo && algo[0] ? algo : "default";
	st = rm_calib__begin(db, err);
	if (st != RM_OK)
		goto done_log;
	int64_t run_id = 0;
	st = rm_calib__insert_run(db, &run, &run_id, err);
	if (st != RM_OK)
		goto rollback;
	s.first_run_id = run_id;
	s.runs = 1;
	s.duplicates = log.duplicates;
	s.gpus_per_thread = log.gpus_per_thread;
	for (int i = 0; i < log.n_rows; i++) {
		const rm_nccl_tests_row *r = &log.rows[i];
		bool stored = false;
		for (int g = 0; g < 2; g++) {
			if (!r->has[g] || r->wrong[g] > 0 || !(r->time_us[g] > 0))
				continue;
			json_t *params = json_pack("{s:I, s:i, s:i, s:b, s:s, s:s, s:i}", "bytes", (json_int_t)r->bytes,
						   "ranks", r->ranks, "nodes", r->nodes, "inplace", g == 1, "algo",
						   algo_label, "type", r->type, "line", r->line);
			/* the launch mode: how many GPUs one host thread drove (the fit keeps a
			 * single-process run's launch floor out of the latency) */
			if (r->gpus_per_thread > 0)
				json_object_set_new(params, "gpus_per_thread", json_integer(r->gpus_per_thread));
			if (r->processes > 0)
				json_object_set_new(params, "processes", json_integer(r->processes));
			st = rm_calib__insert_measurement(db, run_id, coll_benchmark(r->coll), params, r->time_us[g],
							  "us", err);
			json_decref(params);
			if (st != RM_OK)
				goto rollback;
			s.measurements++;
			stored = true;
		}
		if (!stored)
			s.skipped++;
	}
	st = rm_calib__commit(db, err);
	if (st == RM_OK && stats)
		*stats = s;
	goto done_log;
rollback:
	rm_calib__rollback(db);
done_log:
	rm_nccl_tests_log_finish(&log);
	return st;
}

/* ---- JSON lines --------------------------------------------------------------------------- */

typedef struct bench_spec {
	const char *name;
	const char *unit;
	const char *ints[5];       /* required non-negative integer params */
	const char *enum_key;      /* a required string param, or NULL */
	const char *enum_values[4];
} bench_spec;

/* The benchmarks remora-calibrate writes (calibrate/cuda/), with their unit and params. */
static const bench_spec specs[] = {
	{"gemm", "us", {"m", "n", "k"}, "dtype", {"bf16", "fp8"}},
	{"hbm_copy", "us", {"bytes"}, NULL, {NULL}},
	{"hbm_triad", "us", {"bytes"}, NULL, {NULL}},
	{"launch", "us", {"kernels"}, NULL, {NULL}},
	{"h2d", "us", {"bytes"}, NULL, {NULL}},
	{"d2h", "us", {"bytes"}, NULL, {NULL}},
	{"bidir", "us", {"bytes"}, NULL, {NULL}},
	{"all_gather", "us", {"bytes", "ranks"}, NULL, {NULL}},
	{"reduce_scatter", "us", {"bytes", "ranks"}, NULL, {NULL}},
	{"all_reduce", "us", {"bytes", "ranks"}, NULL, {NULL}},
	{"interference", "us", {"m", "n", "k", "held_sms"}, "concurrent", {"none", "sms", "nccl"}},
};

static const char *const run_keys[] = {"machine", "gpu", "driver", "cuda", "nccl", "started_at"};

typedef struct pending {
	int run;          /* index into the runs of this file */
	const bench_spec *spec;
	json_t *params;   /* owned */
	double value;
} pending;

static void run_field(rm_calib__run *run, int i, const char *v)
{
	char *dst[] = {run->machine, run->gpu, run->driver, run->cuda, run->nccl, run->started_at};
	size_t size[] = {sizeof(run->machine), sizeof(run->gpu), sizeof(run->driver),
			 sizeof(run->cuda), sizeof(run->nccl), sizeof(run->started_at)};
	snprintf(dst[i], size[i], "%s", v);
}

static rm_status check_line(const char *path, int line, json_t *o, const bench_spec **spec_out,
			    rm_calib__run *run, rm_error *err)
{
	if (!json_is_object(o))
		return rm_error_set(err, RM_PARSE, path, line, 1, "expected a JSON object per line");
	const char *key;
	json_t *v;
	json_object_foreach(o, key, v) {
		bool known = !strcmp(key, "benchmark") || !strcmp(key, "params") || !strcmp(key, "value") ||
			     !strcmp(key, "unit");
		for (size_t i = 0; i < RM_ARRAY_SIZE(run_keys) && !known; i++)
			if (!strcmp(key, run_keys[i])) {
				known = true;
				if (!json_is_string(v))
					return rm_error_set(err, RM_PARSE, path, line, 1,
							    "\"%s\" must be a string", key);
				run_field(run, (int)i, json_string_value(v));
			}
		if (!known)
			return rm_error_set(err, RM_UNKNOWN_KEY, path, line, 1,
					    "unknown key \"%s\" (expected benchmark, params, value, unit, "
					    "machine, gpu, driver, cuda, nccl, started_at)",
					    key);
	}
	json_t *b = json_object_get(o, "benchmark");
	if (!json_is_string(b))
		return rm_error_set(err, RM_MISSING, path, line, 1, "missing \"benchmark\" (a string)");
	const bench_spec *spec = NULL;
	for (size_t i = 0; i < RM_ARRAY_SIZE(specs); i++)
		if (!strcmp(json_string_value(b), specs[i].name))
			spec = &specs[i];
	if (!spec)
		return rm_error_set(err, RM_UNSUPPORTED, path, line, 1,
				    "unknown benchmark \"%s\" (known: gemm, hbm_copy, hbm_triad, launch, h2d, "
				    "d2h, bidir, all_gather, reduce_scatter, all_reduce, interference)",
				    json_string_value(b));
	json_t *unit = json_object_get(o, "unit");
	if (!json_is_string(unit))
		return rm_error_set(err, RM_MISSING, path, line, 1, "missing \"unit\" (a string)");
	if (strcmp(json_string_value(unit), spec->unit) != 0)
		return rm_error_set(err, RM_INVALID, path, line, 1,
				    "wrong unit \"%s\" for benchmark %s: expected \"%s\"",
				    json_string_value(unit), spec->name, spec->unit);
	json_t *value = json_object_get(o, "value");
	if (!json_is_number(value))
		return rm_error_set(err, RM_MISSING, path, line, 1, "missing \"value\" (a number)");
	double x = json_number_value(value);
	if (!isfinite(x) || x <= 0)
		return rm_error_set(err, RM_RANGE, path, line, 1, "\"value\" must be a positive time, got %g", x);
	json_t *params = json_object_get(o, "params");
	if (!json_is_object(params))
		return rm_error_set(err, RM_MISSING, path, line, 1, "missing \"params\" (an object)");
	for (int i = 0; i < 5 && spec->ints[i]; i++) {
		json_t *p = json_object_get(params, spec->ints[i]);
		if (!json_is_integer(p) || json_integer_value(p) < 0)
			return rm_error_set(err, RM_MISSING, path, line, 1,
					    "benchmark %s needs params.%s, a non-negative integer", spec->name,
					    spec->ints[i]);
	}
	if (spec->enum_key) {
		json_t *p = json_object_get(params, spec->enum_key);
		bool ok = false;
		for (int i = 0; json_is_string(p) && i < 4 && spec->enum_values[i]; i++)
			ok = ok || !strcmp(json_string_value(p), spec->enum_values[i]);
		if (!ok)
			return rm_error_set(err, RM_INVALID, path, line, 1,
					    "benchmark %s needs params.%s, one of \"%s\"%s%s%s%s", spec->name,
					    spec->enum_key, spec->enum_values[0], spec->enum_values[1] ? ", \"" : "",
					    spec->enum_values[1] ? spec->enum_values[1] : "",
					    spec->enum_values[1] ? "\"" : "", spec->enum_values[2] ? ", ..." : "");
	}
	*spec_out = spec;
	return RM_OK;
}

rm_status rm_calib_import_jsonl(rm_calib_db *db, const char *path, rm_calib_import_stats *stats,
				rm_error *err)
{
	rm_calib_import_stats s = {0};
	char *text = NULL;
	size_t len = 0;
	if (!rm_read_file(path, &text, &len, err))
		return err ? err->status : RM_IO;
	rm_status st = RM_OK;
	int n = 0, cap = 0, n_runs = 0, runs_cap = 0;
	pending *rows = NULL;
	rm_calib__run *runs = NULL;
	int line = 0;
	char *next = text, *end = text + len;
	while (next < end) {
		char *start = next;
		char *nl = memchr(start, '\n', (size_t)(end - start));
		size_t l = nl ? (size_t)(nl - start) : (size_t)(end - start);
		next = nl ? nl + 1 : end;
		line++;
		bool blank = true;
		for (size_t i = 0; i < l && blank; i++)
			blank = start[i] == ' ' || start[i] == '\t' || start[i] == '\r';
		if (blank)
			continue;
		json_error_t jerr;
		json_t *o = json_loadb(start, l, JSON_REJECT_DUPLICATES, &jerr);
		if (!o) {
			st = rm_error_set(err, RM_PARSE, path, line, jerr.column > 0 ? jerr.column : 1, "%s%s",
					  jerr.text, nl ? "" : " (is the file truncated?)");
			goto fail;
		}
		const bench_spec *spec = NULL;
		rm_calib__run run = {0};
		st = check_line(path, line, o, &spec, &run, err);
		if (st != RM_OK) {
			json_decref(o);
			goto fail;
		}
		int ri = -1;
		for (int i = 0; i < n_runs && ri < 0; i++)
			if (!memcmp(&runs[i], &run, sizeof(run)))
				ri = i;
		if (ri < 0) {
			if (n_runs == runs_cap) {
				runs_cap = runs_cap ? 2 * runs_cap : 4;
				runs = rm_xrealloc(runs, (size_t)runs_cap * sizeof(*runs));
			}
			snprintf(run.source, sizeof(run.source), "jsonl: %s", path);
			/* compare without source: it is the same for every line */
			rm_calib__run cmp = run;
			memset(cmp.source, 0, sizeof(cmp.source));
			runs[n_runs] = cmp;
			ri = n_runs++;
		}
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			rows = rm_xrealloc(rows, (size_t)cap * sizeof(*rows));
		}
		json_t *params = json_deep_copy(json_object_get(o, "params"));
		json_object_set_new(params, "line", json_integer(line));
		if (!strcmp(spec->ints[1] ? spec->ints[1] : "", "ranks")) {
			/* a collective's topology is stored whole: nodes defaults to 1 (documented) */
			json_t *nodes = json_object_get(params, "nodes");
			if (!nodes)
				json_object_set_new(params, "nodes", json_integer(1));
			else if (!json_is_integer(nodes) || json_integer_value(nodes) < 1 ||
				 json_integer_value(json_object_get(params, "ranks")) % json_integer_value(nodes) != 0) {
				st = rm_error_set(err, RM_INVALID, path, line, 1,
						  "params.nodes must be a positive integer that divides params.ranks");
				json_decref(params);
				json_decref(o);
				goto fail;
			}
		}
		rows[n++] = (pending){.run = ri, .spec = spec, .params = params,
				      .value = json_number_value(json_object_get(o, "value"))};
		json_decref(o);
	}
	if (n == 0) {
		st = rm_error_set(err, RM_MISSING, path, 0, 0, "no measurements in this file");
		goto fail;
	}
	st = rm_calib__begin(db, err);
	if (st != RM_OK)
		goto fail;
	int64_t *ids = rm_new(int64_t, (size_t)n_runs);
	for (int i = 0; i < n_runs && st == RM_OK; i++) {
		snprintf(runs[i].source, sizeof(runs[i].source), "jsonl: %s", path);
		st = rm_calib__insert_run(db, &runs[i], &ids[i], err);
	}
	for (int i = 0; i < n && st == RM_OK; i++)
		st = rm_calib__insert_measurement(db, ids[rows[i].run], rows[i].spec->name, rows[i].params,
						  rows[i].value, rows[i].spec->unit, err);
	if (st == RM_OK)
		st = rm_calib__commit(db, err);
	else
		rm_calib__rollback(db);
	if (st == RM_OK) {
		s.first_run_id = ids[0];
		s.runs = n_runs;
		s.measurements = n;
		if (stats)
			*stats = s;
	}
	free(ids);
fail:
	for (int i = 0; i < n; i++)
		json_decref(rows[i].params);
	free(rows);
	free(runs);
	free(text);
	return st;
}

/* ---- prepared rows ------------------------------------------------------------------------ */

rm_status rm_calib_import_rows(rm_calib_db *db, const rm_calib_run_desc *runs, int n_runs,
			       const rm_calib_row_desc *rows, int64_t n_rows, rm_calib_import_stats *stats,
			       rm_error *err)
{
	if (n_rows <= 0 || n_runs <= 0)
		return rm_error_set(err, RM_MISSING, db->path, 0, 0, "no measurements to import (nothing was changed)");
	if (n_rows > INT32_MAX)
		return rm_error_set(err, RM_RANGE, db->path, 0, 0, "%lld rows in one import: too many",
				    (long long)n_rows);
	json_t **params = rm_new(json_t *, (size_t)n_rows);
	rm_status st = RM_OK;
	for (int64_t i = 0; i < n_rows && st == RM_OK; i++) {
		const rm_calib_row_desc *r = &rows[i];
		json_error_t jerr;
		params[i] = r->params ? json_loads(r->params, JSON_REJECT_DUPLICATES, &jerr) : NULL;
		if (r->run < 0 || r->run >= n_runs || !r->benchmark || !r->benchmark[0] || !r->unit || !r->unit[0] ||
		    !json_is_object(params[i]) || !isfinite(r->value) || !(r->value > 0))
			st = rm_error_set(err, RM_INVALID, db->path, 0, 0,
					  "row %lld (%s): needs a run of the import, a benchmark, a unit, params as a "
					  "JSON object and a positive value (nothing was changed)",
					  (long long)i, r->benchmark ? r->benchmark : "no benchmark");
	}
	int64_t *ids = rm_new(int64_t, (size_t)n_runs);
	if (st != RM_OK)
		goto done;
	st = rm_calib__begin(db, err);
	if (st != RM_OK)
		goto done;
	for (int i = 0; i < n_runs && st == RM_OK; i++) {
		rm_calib__run run = {0};
		const rm_calib_run_desc *d = &runs[i];
		snprintf(run.machine, sizeof(run.machine), "%s", d->machine ? d->machine : "");
		snprintf(run.gpu, sizeof(run.gpu), "%s", d->gpu ? d->gpu : "");
		snprintf(run.driver, sizeof(run.driver), "%s", d->driver ? d->driver : "");
		snprintf(run.cuda, sizeof(run.cuda), "%s", d->cuda ? d->cuda : "");
		snprintf(run.nccl, sizeof(run.nccl), "%s", d->nccl ? d->nccl : "");
		snprintf(run.started_at, sizeof(run.started_at), "%s", d->started_at ? d->started_at : "");
		snprintf(run.source, sizeof(run.source), "%s", d->source ? d->source : "");
		st = rm_calib__insert_run(db, &run, &ids[i], err);
	}
	for (int64_t i = 0; i < n_rows && st == RM_OK; i++)
		st = rm_calib__insert_measurement(db, ids[rows[i].run], rows[i].benchmark, params[i], rows[i].value,
						  rows[i].unit, err);
	if (st == RM_OK)
		st = rm_calib__commit(db, err);
	else
		rm_calib__rollback(db);
	if (st == RM_OK && stats) {
		memset(stats, 0, sizeof(*stats));
		stats->first_run_id = ids[0];
		stats->runs = n_runs;
		stats->measurements = (int)n_rows;
	}
done:
	for (int64_t i = 0; i < n_rows; i++)
		json_decref(params[i]);
	free(params);
	free(ids);
	return st;
}
