/*
 * `remora calib`: import measurements into a calibration database, fit the cost models to them,
 * show what is stored. Every number comes from calibrate/ (remora/calib.h).
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli.h"
#include "remora/calib.h"
#include "remora/nccl.h"
#include "remora/trace.h"

#define MAX_RUN_ARGS 64

static void calib_usage(FILE *out)
{
	fprintf(out,
		"usage: remora calib import FILE.jsonl --db DB\n"
		"       remora calib import-nccl-tests LOG --db DB [--algo ALGO] [--gpus N]\n"
		"       remora calib import-trace TRACE|DIR... --db DB [--gpus-per-node N]\n"
		"       remora calib fit --db DB --profile NAME [--base HW] [--device GPU] [--run ID]...\n"
		"                        [--tolerance X]\n"
		"       remora calib show --db DB [--profile NAME] [--json]\n\n"
		"Stores measurements of a real machine (remora-calibrate's JSON lines, nccl-tests logs,\n"
		"the GEMM, attention and NCCL kernels of PyTorch profiler traces recorded with shapes)\n"
		"in an SQLite database, fits the cost models to them, and names the result so that\n"
		"--hardware DB:NAME makes a command use the fitted profile.\n\n"
		"options:\n"
		"  -d, --db DB           the calibration database (created by an import)\n"
		"  -p, --profile NAME    calibrated profile to fit or show\n"
		"      --base HW         embedded profile the fit overrides (default: from the GPU name)\n"
		"      --device GPU      fit the runs of this GPU model (a name or part of it, e.g. H200)\n"
		"                        when the runs come from several; a profile describes one\n"
		"      --run ID          fit only these runs (repeat; default: every run)\n"
		"      --tolerance X     collective regimes keep every point within X (default 0.03)\n"
		"      --algo ALGO       what an nccl-tests run forced (NCCL_ALGO), e.g. ring; default:\n"
		"                        NCCL's own choice ('ring' in the file name is taken as ring)\n"
		"      --gpus N          GPU count when a log has no '#  Rank' lines\n"
		"      --gpus-per-node N import-trace: GPUs per node, so a collective's group gets its\n"
		"                        node count (rank / N); without it NCCL rows are not fitted\n"
		"  -j, --json            machine-readable output\n"
		"  -h, --help            this help\n");
}

typedef struct calib_opts {
	const char *db, *profile, *base, *algo, *device;
	int64_t runs[MAX_RUN_ARGS];
	int n_runs;
	double tolerance;
	int64_t gpus, gpus_per_node;
	bool json;
} calib_opts;

static int need_db(const calib_opts *o)
{
	if (!o->db)
		return cli_usage_error("calib", "missing --db DB");
	return CLI_EXIT_OK;
}

static void print_stats(const char *what, const char *path, const char *db, const rm_calib_import_stats *s)
{
	printf("imported %s %s into %s: %d run%s (first id %lld), %d measurement%s", what, path, db, s->runs,
	       s->runs == 1 ? "" : "s", (long long)s->first_run_id, s->measurements, s->measurements == 1 ? "" : "s");
	if (s->duplicates)
		printf(", %d duplicate row%s dropped", s->duplicates, s->duplicates == 1 ? "" : "s");
	if (s->skipped)
		printf(", %d row%s skipped (#wrong > 0 or N/A)", s->skipped, s->skipped == 1 ? "" : "s");
	printf("\n");
	if (s->gpus_per_thread > 1)
		printf("single-process log (nGpus %d: one host thread launches on %d GPUs in turn): rows at its "
		       "host launch floor are kept out of the fit\n",
		       s->gpus_per_thread, s->gpus_per_thread);
}

static json_t *stats_json(const rm_calib_import_stats *s)
{
	return json_pack("{s:s, s:I, s:i, s:i, s:i, s:i, s:i}", "schema", "remora.calib-import/1", "first_run_id",
			 (json_int_t)s->first_run_id, "runs", s->runs, "measurements", s->measurements, "duplicates",
			 s->duplicates, "skipped", s->skipped, "gpus_per_thread", s->gpus_per_thread);
}

static int do_import(const calib_opts *o, const char *file, bool nccl_tests)
{
	int rc = need_db(o);
	if (rc)
		return rc;
	rm_error err;
	rm_error_clear(&err);
	if (o->algo) {
		/* what NCCL_ALGO may force; "default" means NCCL's own choice */
		static const char *const algos[] = {"ring", "tree", "nvls", "nvlstree", "default"};
		bool known = false;
		for (size_t i = 0; i < sizeof(algos) / sizeof(algos[0]); i++)
			known |= strcasecmp(o->algo, algos[i]) == 0;
		if (!known)
			return cli_usage_error("calib", "--algo: unknown algorithm '%s' (ring, tree, nvls, nvlstree, default)",
					       o->algo);
	}
	/* a database this import creates is removed again if the import fails */
	bool existed = access(o->db, F_OK) == 0;
	rm_calib_db *db = rm_calib_db_open(o->db, true, &err);
	if (!db)
		return cli_fail(&err);
	rm_calib_import_stats s;
	rm_status st;
	if (nccl_tests) {
		const char *algo = o->algo;
		const char *base = strrchr(file, '/');
		base = base ? base + 1 : file;
		if (!algo && strstr(base, "_ring"))
			algo = "ring";
		st = rm_calib_import_nccl_tests(db, file, algo, (int)o->gpus, &s, &err);
	} else {
		st = rm_calib_import_jsonl(db, file, &s, &err);
	}
	rm_calib_db_close(db);
	if (st != RM_OK) {
		if (!existed) {
			char side[1100];
			remove(o->db);
			snprintf(side, sizeof(side), "%s-wal", o->db);
			remove(side);
			snprintf(side, sizeof(side), "%s-shm", o->db);
			remove(side);
			snprintf(side, sizeof(side), "%s-journal", o->db);
			remove(side);
		}
		return cli_fail(&err);
	}
	if (o->json)
		return cli_print_json(stats_json(&s));
	print_stats(nccl_tests ? "nccl-tests log" : "measurements", file, o->db, &s);
	return CLI_EXIT_OK;
}

/* Removes a database file this command created (and SQLite's side files) after a failure. */
static void remove_created_db(const char *path)
{
	char side[1100];
	remove(path);
	snprintf(side, sizeof(side), "%s-wal", path);
	remove(side);
	snprintf(side, sizeof(side), "%s-shm", path);
	remove(side);
	snprintf(side, sizeof(side), "%s-journal", path);
	remove(side);
}

static int do_import_trace(const calib_opts *o, int argc, char **argv)
{
	int rc = need_db(o);
	if (rc)
		return rc;
	char **files = NULL;
	int n = 0;
	if (!cli_trace_files(argc, argv, &files, &n))
		return CLI_EXIT_FAIL;
	rm_error err;
	rm_error_clear(&err);
	bool existed = access(o->db, F_OK) == 0;
	rm_calib_db *db = rm_calib_db_open(o->db, true, &err);
	rm_trace_calib_stats s;
	rm_status st = db ? rm_trace_calib_import(db, (const char *const *)files, n, (int)o->gpus_per_node, &s, &err)
			  : err.status;
	rm_calib_db_close(db);
	for (int i = 0; i < n; i++)
		free(files[i]);
	free(files);
	if (st != RM_OK) {
		if (db && !existed)
			remove_created_db(o->db);
		return cli_fail(&err);
	}
	static const char *const kinds[RM_TRACE_CALIB_KINDS] = {"gemm", "attention", "nccl"};
	if (o->json) {
		json_t *doc = json_pack("{s:s, s:i, s:i, s:I}", "schema", "remora.calib-import-trace/1", "files", s.files,
					"runs", s.runs, "first_run_id", (json_int_t)s.first_run_id);
		for (int k = 0; k < RM_TRACE_CALIB_KINDS; k++)
			json_object_set_new(doc, kinds[k],
					    json_pack("{s:I, s:I, s:I}", "rows", (json_int_t)s.rows[k], "kernels",
						      (json_int_t)s.kernels[k], "skipped_no_shapes", (json_int_t)s.skipped[k]));
		return cli_print_json(doc);
	}
	printf("imported %d trace%s into %s: %d run%s (first id %lld); rows: gemm %lld, attention %lld, nccl %lld "
	       "(from %lld, %lld, %lld kernels); kernels skipped (no shapes): gemm %lld, attention %lld, nccl %lld\n",
	       s.files, s.files == 1 ? "" : "s", o->db, s.runs, s.runs == 1 ? "" : "s", (long long)s.first_run_id,
	       (long long)s.rows[0], (long long)s.rows[1], (long long)s.rows[2], (long long)s.kernels[0],
	       (long long)s.kernels[1], (long long)s.kernels[2], (long long)s.skipped[0], (long long)s.skipped[1],
	       (long long)s.skipped[2]);
	return CLI_EXIT_OK;
}

static int do_fit(const calib_opts *o)
{
	int rc = need_db(o);
	if (rc)
		return rc;
	if (!o->profile)
		return cli_usage_error("calib", "missing --profile NAME");
	rm_error err;
	rm_error_clear(&err);
	rm_calib_db *db = rm_calib_db_open(o->db, false, &err);
	if (!db)
		return cli_fail(&err);
	rm_calib_fit_opts fo = {.profile = o->profile, .base = o->base, .runs = o->runs, .n_runs = o->n_runs,
				.tolerance = o->tolerance, .device = o->device};
	rm_calib_fit_report rep;
	rm_status st = rm_calib_fit(db, &fo, &rep, &err);
	rm_calib_db_close(db);
	if (o->json && rep.n_results > 0) {
		json_t *arr = json_array();
		for (int i = 0; i < rep.n_results; i++) {
			const rm_calib_fit_result *r = &rep.results[i];
			json_t *e = json_pack("{s:s, s:b, s:f, s:i, s:s}", "model", r->model, "ok", r->ok, "fit_error",
					      r->fit_error, "n_points", r->n_points, "summary", r->summary);
			if (!r->ok)
				json_object_set_new(e, "why", json_string(r->why));
			json_array_append_new(arr, e);
		}
		json_t *conflicts = json_array(), *notes = json_array();
		for (int i = 0; i < rep.n_conflicts; i++) {
			const rm_calib_conflict *k = &rep.conflicts[i];
			json_t *params = json_loads(k->params, 0, NULL);
			json_array_append_new(conflicts,
					      json_pack("{s:s, s:o, s:i, s:[I,I], s:[i,i], s:[f,f]}", "benchmark", k->benchmark,
							"params", params ? params : json_string(k->params), "rows", k->n_rows,
							"runs", (json_int_t)k->run[0], (json_int_t)k->run[1], "lines", k->line[0],
							k->line[1], "values", k->value[0], k->value[1]));
		}
		for (int i = 0; i < rep.n_notes; i++)
			json_array_append_new(notes, json_string(rep.notes[i]));
		json_t *doc = json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:o}", "schema", "remora.calib-fit/1", "profile",
					o->profile, "base", rep.base, "device", rep.device, "fits", arr, "conflicts",
					conflicts, "notes", notes);
		if (st != RM_OK)
			json_object_set_new(doc, "error", json_string(err.msg));
		rm_calib_fit_report_finish(&rep);
		int prc = cli_print_json(doc);
		return st != RM_OK ? cli_fail(&err) : prc;
	}
	if (rep.n_results > 0) {
		printf("profile %s (base %s) in %s\n", o->profile, rep.base, o->db);
		printf("  %-34s %6s %9s  %s\n", "model", "points", "rel RMS", "result");
		for (int i = 0; i < rep.n_results; i++) {
			const rm_calib_fit_result *r = &rep.results[i];
			if (r->ok && !strcmp(r->model, "profile"))
				printf("  %-34s %6d %9s  %s\n", r->model, r->n_points, "", r->summary);
			else if (r->ok)
				printf("  %-34s %6d %8.2f%%  %s\n", r->model, r->n_points, 100 * r->fit_error, r->summary);
			else
				printf("  %-34s %6d %9s  not fitted: %s\n", r->model, r->n_points, "-", r->why);
		}
	}
	for (int i = 0; i < rep.n_notes; i++)
		printf("note: %s\n", rep.notes[i]);
	if (rep.n_conflicts > 0) {
		printf("warning: %d set%s of rows measured the same benchmark and parameters %.0f%% or more apart "
		       "(all are fitted; check the runs):\n",
		       rep.n_conflicts, rep.n_conflicts == 1 ? "" : "s", 100 * RM_CALIB_CONFLICT_SPREAD);
		for (int i = 0; i < rep.n_conflicts && i < 20; i++) {
			const rm_calib_conflict *k = &rep.conflicts[i];
			printf("  %s %s: %d rows, %.4g us (run #%lld line %d) .. %.4g us (run #%lld line %d)\n", k->benchmark,
			       k->params, k->n_rows, k->value[0], (long long)k->run[0], k->line[0], k->value[1],
			       (long long)k->run[1], k->line[1]);
		}
		if (rep.n_conflicts > 20)
			printf("  ... and %d more (--json lists them all)\n", rep.n_conflicts - 20);
	}
	rm_calib_fit_report_finish(&rep);
	if (st != RM_OK)
		return cli_fail(&err);
	printf("use it with --hardware %s:%s\n", o->db, o->profile);
	return CLI_EXIT_OK;
}

static const char *jstr_or(json_t *o, const char *key, const char *dflt)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : dflt;
}

/* A regime's algBW for people: the flat-regime sentinel is no bandwidth. */
static void format_algbw(double bw, char *buf, size_t size)
{
	if (bw >= RM_CALIB_FLAT_ALGBW_GBps)
		snprintf(buf, size, "n/a (latency only)");
	else
		snprintf(buf, size, "%.2f GB/s", bw);
}

/* A collective fit: its group and one line per regime. */
static void print_collective_fit(json_t *p)
{
	printf("%s on %lld GPUs (%lld per node x %lld nodes), algo %s\n", jstr_or(p, "collective", "?"),
	       (long long)json_integer_value(json_object_get(p, "ranks")),
	       (long long)json_integer_value(json_object_get(p, "ranks_per_node")),
	       (long long)json_integer_value(json_object_get(p, "nodes")), jstr_or(p, "algo", "default"));
	json_t *floor = json_object_get(p, "launch_floor_points");
	if (json_is_integer(floor))
		printf("  %14s %lld launch-floor sizes up to %lld B left to the model (single-process run)\n", "",
		       (long long)json_integer_value(floor),
		       (long long)json_integer_value(json_object_get(p, "launch_floor_max_bytes")));
	size_t k;
	json_t *reg;
	json_array_foreach(json_object_get(p, "regimes"), k, reg) {
		char bw[48];
		format_algbw(json_number_value(json_object_get(reg, "algbw_GBps")), bw, sizeof(bw));
		printf("  %14s %12lld..%-12lld lat %8.2f us  algBW %s\n", "",
		       (long long)json_integer_value(json_object_get(reg, "min_bytes")),
		       (long long)json_integer_value(json_object_get(reg, "max_bytes")),
		       json_number_value(json_object_get(reg, "latency_us")), bw);
	}
}

static void print_params(json_t *p)
{
	char *s = json_dumps(p, JSON_COMPACT | JSON_REAL_PRECISION(6));
	if (s && strlen(s) > 100)
		strcpy(s + 96, "...}");
	printf("%s", s ? s : "");
	free(s);
}

static int do_show(const calib_opts *o)
{
	int rc = need_db(o);
	if (rc)
		return rc;
	rm_error err;
	rm_error_clear(&err);
	rm_calib_db *db = rm_calib_db_open(o->db, false, &err);
	if (!db)
		return cli_fail(&err);
	json_t *doc = rm_calib_db_dump_json(db, &err);
	rm_calib_db_close(db);
	if (!doc)
		return cli_fail(&err);
	if (o->profile) {
		/* only that profile's fits, and the hardware it resolves to */
		json_t *fits = json_object_get(doc, "fits"), *keep = json_array();
		size_t i;
		json_t *f;
		json_array_foreach(fits, i, f) {
			if (!strcmp(json_string_value(json_object_get(f, "profile")), o->profile))
				json_array_append(keep, f);
		}
		json_object_set_new(doc, "fits", keep);
		char spec[1024];
		snprintf(spec, sizeof(spec), "%s:%s", o->db, o->profile);
		rm_hw_profile hw;
		rm_nccl_model *model = rm_new(rm_nccl_model, 1);
		rm_calib_resolve_opts ro = {0};
		if (rm_calib_resolve_hw(spec, &ro, &hw, model, &err) != RM_OK) {
			free(model);
			json_decref(doc);
			return cli_fail(&err);
		}
		json_t *fields = json_object();
		for (int k = 0; k < RM_HW_FIELD_COUNT; k++) {
			if (!hw.source[k] || strncmp(hw.source[k], "calibration", 11) != 0)
				continue;
			const rm_hw_field_info *info = rm_hw_field_info_at((rm_hw_field)k);
			json_object_set_new(fields, info->key,
					    json_pack("{s:f, s:s, s:s}", "value", rm_hw_profile_get(&hw, (rm_hw_field)k),
						      "unit", info->unit, "source", hw.source[k]));
		}
		json_object_set_new(doc, "calibrated_fields", fields);
		json_t *ovs = json_array();
		for (int k = 0; k < model->n_overrides; k++) {
			const rm_nccl_override *ov = &model->overrides[k];
			bool flat = ov->algbw_GBps >= RM_CALIB_FLAT_ALGBW_GBps;
			json_array_append_new(ovs, json_pack("{s:s, s:i, s:i, s:i, s:s, s:s, s:I, s:I, s:f, s:o, s:b, s:s}",
							     "collective", rm_coll_name(ov->coll), "ranks", ov->ranks,
							     "ranks_per_node", ov->ranks_per_node, "nodes", ov->nodes,
							     "algorithm", rm_nccl_algo_name(ov->algo), "protocol",
							     rm_nccl_proto_name(ov->proto), "min_bytes",
							     (json_int_t)ov->min_bytes, "max_bytes", (json_int_t)ov->max_bytes,
							     "latency_us", ov->latency_us, "algbw_GBps",
							     flat ? json_null() : json_real(ov->algbw_GBps), "latency_only", flat,
							     "source", ov->source));
		}
		json_object_set_new(doc, "collective_overrides", ovs);
		char label[96];
		json_object_set_new(doc, "nccl_release", json_string(rm_nccl_model_version_label(model, label, sizeof(label))));
		free(model);
	}
	if (o->json)
		return cli_print_json(doc);
	printf("calibration database %s, schema version %lld\n", o->db,
	       (long long)json_integer_value(json_object_get(doc, "schema_version")));
	size_t i;
	json_t *r;
	printf("\nruns:\n");
	json_array_foreach(json_object_get(doc, "runs"), i, r) {
		printf("  #%lld  %s  %s  NCCL %s  %lld measurements (%s)\n  %5s  %s\n",
		       (long long)json_integer_value(json_object_get(r, "id")),
		       jstr_or(r, "machine", "?"),
		       jstr_or(r, "gpu", "?"),
		       jstr_or(r, "nccl", "?"),
		       (long long)json_integer_value(json_object_get(r, "measurements")),
		       jstr_or(r, "benchmarks", ""),
		       "", jstr_or(r, "source", ""));
		json_t *gpt = json_object_get(r, "gpus_per_thread");
		if (json_is_integer(gpt) && json_integer_value(gpt) > 1)
			printf("  %5s  single process: one host thread launched on %lld GPUs (its launch floor is not "
			       "fitted)\n",
			       "", (long long)json_integer_value(gpt));
	}
	printf("\nfits:\n");
	int n_warnings = 0;
	json_array_foreach(json_object_get(doc, "fits"), i, r) {
		json_t *fe = json_object_get(r, "fit_error");
		const char *model = jstr_or(r, "model", "?");
		printf("  %-12s %-34s %5lld pts  rel RMS %6.2f%%  ", jstr_or(r, "profile", "?"), model,
		       (long long)json_integer_value(json_object_get(r, "n_points")),
		       json_is_number(fe) ? 100 * json_number_value(fe) : 0.0);
		json_t *params = json_object_get(r, "params");
		if (!strncmp(model, "collective.", 11) && json_is_integer(json_object_get(params, "ranks")))
			print_collective_fit(params);
		else {
			print_params(params);
			printf("\n");
		}
		size_t w;
		json_t *msg;
		json_array_foreach(json_object_get(r, "warnings"), w, msg) {
			printf("  %14s warning: %s\n", "", json_string_value(msg));
			n_warnings++;
		}
	}
	size_t nn;
	json_t *note;
	json_array_foreach(json_object_get(doc, "notes"), nn, note)
		printf("note: %s\n", json_string_value(note));
	fflush(stdout);
	if (n_warnings)
		fprintf(stderr, "remora: warning: %d stored value%s above the hardware's physical peak or not "
				"applicable (see 'warning:' above)\n",
			n_warnings, n_warnings == 1 ? " is" : "s are");
	json_t *fields = json_object_get(doc, "calibrated_fields");
	if (fields) {
		printf("\nhardware %s:%s (NCCL %s) overrides:\n", o->db, o->profile, jstr_or(doc, "nccl_release", "?"));
		const char *key;
		json_t *v;
		json_object_foreach(fields, key, v) {
			printf("  %-22s %12.4g %-8s %s\n", key, json_number_value(json_object_get(v, "value")),
			       json_string_value(json_object_get(v, "unit")),
			       json_string_value(json_object_get(v, "source")));
		}
		json_array_foreach(json_object_get(doc, "collective_overrides"), i, r) {
			char bw[48], topo[48];
			json_t *jbw = json_object_get(r, "algbw_GBps");
			format_algbw(json_is_number(jbw) ? json_number_value(jbw) : RM_CALIB_FLAT_ALGBW_GBps, bw, sizeof(bw));
			snprintf(topo, sizeof(topo), "%lldx%lld", (long long)json_integer_value(json_object_get(r, "ranks")),
				 (long long)json_integer_value(json_object_get(r, "nodes")));
			printf("  %-14s %-6s %-5s %-6s %12lld..%-12lld lat %8.2f us  algBW %-18s  %s\n",
			       jstr_or(r, "collective", "?"), topo, jstr_or(r, "algorithm", "?"), jstr_or(r, "protocol", "?"),
			       (long long)json_integer_value(json_object_get(r, "min_bytes")),
			       (long long)json_integer_value(json_object_get(r, "max_bytes")),
			       json_number_value(json_object_get(r, "latency_us")), bw, jstr_or(r, "source", ""));
		}
	}
	json_decref(doc);
	return CLI_EXIT_OK;
}

int cli_cmd_calib(int argc, char **argv)
{
	enum { OPT_BASE = 256, OPT_RUN, OPT_TOL, OPT_ALGO, OPT_GPUS, OPT_DEVICE, OPT_GPN };
	static const struct option longopts[] = {
		{"db", required_argument, NULL, 'd'},
		{"profile", required_argument, NULL, 'p'},
		{"base", required_argument, NULL, OPT_BASE},
		{"run", required_argument, NULL, OPT_RUN},
		{"tolerance", required_argument, NULL, OPT_TOL},
		{"algo", required_argument, NULL, OPT_ALGO},
		{"gpus", required_argument, NULL, OPT_GPUS},
		{"device", required_argument, NULL, OPT_DEVICE},
		{"gpus-per-node", required_argument, NULL, OPT_GPN},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{0, 0, 0, 0},
	};
	calib_opts o = {0};
	int c;
	const char *shortopts = "d:p:jh";
	while ((c = cli_getopt(argc, argv, shortopts, longopts)) != -1) {
		switch (c) {
		case 'd':
			o.db = optarg;
			break;
		case 'p':
			o.profile = optarg;
			break;
		case OPT_BASE:
			o.base = optarg;
			break;
		case OPT_RUN:
			if (o.n_runs == MAX_RUN_ARGS)
				return cli_usage_error("calib", "at most %d --run options", MAX_RUN_ARGS);
			if (!cli_parse_positive("calib", "--run", optarg, &o.runs[o.n_runs]))
				return CLI_EXIT_USAGE;
			o.n_runs++;
			break;
		case OPT_TOL: {
			char *end = NULL;
			o.tolerance = strtod(optarg, &end);
			if (end == optarg || *end || !(o.tolerance > 0 && o.tolerance < 1))
				return cli_usage_error("calib", "--tolerance expects a fraction in (0, 1), got '%s'",
						       optarg);
			break;
		}
		case OPT_ALGO:
			o.algo = optarg;
			break;
		case OPT_DEVICE:
			o.device = optarg;
			break;
		case OPT_GPUS:
			if (!cli_parse_positive("calib", "--gpus", optarg, &o.gpus))
				return CLI_EXIT_USAGE;
			if (o.gpus > 100000)
				return cli_usage_error("calib", "--gpus must be at most 100000");
			break;
		case OPT_GPN:
			if (!cli_parse_positive("calib", "--gpus-per-node", optarg, &o.gpus_per_node))
				return CLI_EXIT_USAGE;
			if (o.gpus_per_node > 65536)
				return cli_usage_error("calib", "--gpus-per-node must be at most 65536");
			break;
		case 'j':
			o.json = true;
			break;
		case 'h':
			calib_usage(stdout);
			return CLI_EXIT_OK;
		default:
			return cli_option_error("calib", argc, argv, shortopts, longopts);
		}
	}
	if (optind >= argc)
		return cli_usage_error("calib", "missing action: import, import-nccl-tests, import-trace, fit or show");
	const char *action = argv[optind++];
	bool import = !strcmp(action, "import"), nccl = !strcmp(action, "import-nccl-tests");
	if (!strcmp(action, "import-trace")) {
		if (optind >= argc)
			return cli_usage_error("calib", "import-trace needs a TRACE or DIR");
		return do_import_trace(&o, argc - optind, argv + optind);
	}
	if (import || nccl) {
		if (optind >= argc)
			return cli_usage_error("calib", "%s needs a FILE", action);
		const char *file = argv[optind++];
		if (optind != argc)
			return cli_usage_error("calib", "unexpected argument '%s'", argv[optind]);
		return do_import(&o, file, nccl);
	}
	if (optind != argc)
		return cli_usage_error("calib", "unexpected argument '%s'", argv[optind]);
	if (!strcmp(action, "fit"))
		return do_fit(&o);
	if (!strcmp(action, "show"))
		return do_show(&o);
	return cli_usage_error("calib", "unknown action '%s' (import, import-nccl-tests, import-trace, fit, show)", action);
}
