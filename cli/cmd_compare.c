/*
 * `remora compare SCENARIO --measured TRACE|DIR [--set KEY=VALUE]... [--rank N] [--json]
 * [--trace OUT]` (docs/trace.md "compare"): the predicted step next to a measured one, per
 * kernel class, per collective and for the step, the largest discrepancies named, and one
 * Perfetto trace holding both. The numbers come from remora/compare.h; this file parses and
 * formats.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "remora/compare.h"
#include "remora/file.h"
#include "remora/json.h"

static void compare_usage(FILE *out)
{
	fprintf(out,
		"usage: remora compare SCENARIO --measured TRACE|DIR [--set KEY=VALUE]... [--rank N] [--json]\n"
		"                      [--trace OUT]\n\n"
		"Simulates the scenario (as `remora simulate` does) and analyses the measured profiler trace\n"
		"(as `remora trace report` does), then sets them side by side by the same rules (unions of\n"
		"intervals): the step, time per kernel class, compute and communication busy time, exposed\n"
		"communication, idle time, collectives on the compute stream, and count and time per\n"
		"collective; then the five largest discrepancies. Predicted is one step; measured is the\n"
		"median over the trace's steps (ProfilerStep#N, JAX Steps), or the span of its GPU events\n"
		"when it has no step annotations.\n\n"
		"options:\n"
		"  -m, --measured TRACE  the trace: Chrome Trace Event JSON, plain or gzip; a directory stands\n"
		"                        for its *.json and *.json.gz files (one per rank)\n"
		"  -s, --set KEY=VALUE   override a scenario value (repeatable), as simulate takes it\n"
		"  -r, --rank N          the measured rank (distributedInfo.rank, else the file's index in\n"
		"                        the directory); default rank 0, else the first; its first device\n"
		"  -t, --trace OUT       one Perfetto/Chrome trace: process \"predicted\" and process\n"
		"                        \"measured\" (the median step), both starting at t = 0\n"
		"  -j, --json            machine-readable output (schema remora.compare/1)\n"
		"  -h, --help            this help\n");
}

typedef struct compare_opts {
	char **sets;
	int n_sets;
	const char *scenario, *measured, *trace;
	int rank; /* -1: the default */
	bool json;
} compare_opts;

/* Parses argv into o; CLI_EXIT_OK, or the exit code (help printed: -1). */
static int parse(int argc, char **argv, compare_opts *o)
{
	static const struct option longopts[] = {
		{"set", required_argument, NULL, 's'},   {"measured", required_argument, NULL, 'm'},
		{"rank", required_argument, NULL, 'r'},  {"trace", required_argument, NULL, 't'},
		{"json", no_argument, NULL, 'j'},        {"help", no_argument, NULL, 'h'},
		{0, 0, 0, 0},
	};
	const char *shortopts = "s:m:r:t:jh";
	int c;
	o->rank = -1;
	while ((c = cli_getopt(argc, argv, shortopts, longopts)) != -1) {
		switch (c) {
		case 's':
			o->sets[o->n_sets++] = optarg;
			break;
		case 'm':
			o->measured = optarg;
			break;
		case 'r': {
			char *end;
			long v = strtol(optarg, &end, 10);
			if (!*optarg || *end || v < 0 || v > 1000000)
				return cli_usage_error("compare", "--rank needs a rank number >= 0, not '%s'", optarg);
			o->rank = (int)v;
			break;
		}
		case 't':
			o->trace = optarg;
			break;
		case 'j':
			o->json = true;
			break;
		case 'h':
			compare_usage(stdout);
			return -1;
		default:
			return cli_option_error("compare", argc, argv, shortopts, longopts);
		}
	}
	if (optind >= argc)
		return cli_usage_error("compare", "missing SCENARIO (a YAML file, e.g. data/scenarios/seed-llama2-7b-fsdp8-h100.yaml)");
	if (optind + 1 != argc)
		return cli_usage_error("compare", "unexpected argument '%s'", argv[optind + 1]);
	o->scenario = argv[optind];
	if (!o->measured)
		return cli_usage_error("compare", "missing --measured TRACE (a profiler trace, or a directory of them)");
	return CLI_EXIT_OK;
}

/* The measured traces, read and analysed (everything before anything is printed). */
typedef struct measured_set {
	char **files;
	int n_files;
	rm_trace **traces;       /* per file */
	rm_trace_report *reports;
	int n_reports;
	int *report_file;        /* per report */
} measured_set;

static void measured_free(measured_set *m)
{
	for (int i = 0; i < m->n_files; i++) {
		rm_trace_destroy(m->traces ? m->traces[i] : NULL);
		free(m->files[i]);
	}
	free(m->files);
	free(m->traces);
	rm_trace_reports_free(m->reports, m->n_reports);
	free(m->report_file);
}

/* Reads and analyses every file of path; keeps the trace of a file only where the merged trace
 * may need it (a report of the wanted rank, or the first file, the fallback when rank < 0 finds
 * no rank 0), so a directory of many ranks holds one or two traces, not all. */
static int measured_read(const char *path, int rank, measured_set *m)
{
	char *arg[1] = {(char *)path};
	if (!cli_trace_files(1, arg, &m->files, &m->n_files))
		return CLI_EXIT_FAIL;
	m->traces = rm_new(rm_trace *, (size_t)m->n_files + 1);
	for (int i = 0; i < m->n_files; i++) {
		rm_error err;
		rm_error_clear(&err);
		m->traces[i] = rm_trace_read(m->files[i], &err);
		if (!m->traces[i])
			return cli_fail(&err);
		int before = m->n_reports;
		rm_compare_analyze(m->traces[i], i, &m->reports, &m->n_reports);
		m->report_file = rm_xrealloc(m->report_file, (size_t)(m->n_reports + 1) * sizeof(int));
		bool keep = i == 0;
		for (int k = before; k < m->n_reports; k++) {
			m->report_file[k] = i;
			keep |= m->reports[k].rank == (rank < 0 ? 0 : rank);
		}
		if (!keep) {
			rm_trace_destroy(m->traces[i]);
			m->traces[i] = NULL;
		}
	}
	return CLI_EXIT_OK;
}

static void print_ms(double s)
{
	printf(" %12.3f", s * 1e3);
}

static void print_err(const rm_compare_row *r)
{
	double e = rm_compare_row_error_pct(r);
	if (isnan(e))
		printf(" %11s", "n/a");
	else
		printf(" %+10.1f%%", e);
}

static void print_row(const char *label, const rm_compare_row *r)
{
	printf("  %-32s", label);
	print_ms(r->predicted_s);
	print_ms(r->measured_s);
	print_err(r);
	if (r->counted)
		printf(" %9lld %9lld", (long long)r->predicted_count, (long long)r->measured_count);
	if (!r->modelled)
		printf("  (remora models no %s)", r->key);
	printf("\n");
}

static const char *figure_label(const char *key)
{
	static const struct {
		const char *key, *label;
	} labels[] = {
		{"compute_busy_s", "compute busy"},
		{"comm_busy_s", "comm busy"},
		{"exposed_comm_s", "exposed comm"},
		{"idle_s", "idle"},
		{"collectives_on_compute_stream", "collectives on compute stream"},
	};
	for (size_t i = 0; i < RM_ARRAY_SIZE(labels); i++)
		if (strcmp(labels[i].key, key) == 0)
			return labels[i].label;
	return key;
}

static void print_text(const compare_opts *o, const char *file, const rm_compare *c)
{
	printf("remora compare: %s predicted vs %s measured\n", o->scenario, file);
	if (c->from_steps && c->n_windows == 1)
		printf("measured: rank %d, device %d: its one step, %lld\n", c->rank, c->device, (long long)c->shown_number);
	else if (c->from_steps)
		printf("measured: rank %d, device %d: the median of %d steps (each figure's own median); the "
		       "merged trace shows step %lld\n",
		       c->rank, c->device, c->n_windows, (long long)c->shown_number);
	else
		printf("measured: rank %d, device %d: no step annotation in the trace, the span of its GPU events "
		       "stands for the step\n",
		       c->rank, c->device);
	printf("predicted is one step from t = 0; times are unions of intervals (ms); error = (predicted - "
	       "measured) / measured\n\n");
	printf("  %-32s %12s %12s %11s %9s %9s\n", "", "predicted", "measured", "error", "pred_n", "meas_n");
	for (int i = 0; i < c->n_rows; i++) {
		const rm_compare_row *r = &c->rows[i];
		if (r->group == RM_COMPARE_STEP) {
			print_row("step", r);
		} else if (r->group == RM_COMPARE_CLASS) {
			if (i == 0 || c->rows[i - 1].group != RM_COMPARE_CLASS)
				printf("  by kernel class (n: predicted ops, measured kernels)\n");
			char label[48];
			snprintf(label, sizeof(label), "  %s", r->key);
			print_row(label, r);
		} else if (r->group == RM_COMPARE_FIGURE) {
			print_row(figure_label(r->key), r);
		} else {
			if (c->rows[i - 1].group != RM_COMPARE_COLLECTIVE)
				printf("  by collective (NCCL op; n: predicted collectives, measured kernels)\n");
			char label[48];
			snprintf(label, sizeof(label), "  %s", r->key);
			print_row(label, r);
		}
	}
	printf("\nlargest discrepancies (|predicted - measured|):\n");
	for (int i = 0; i < c->n_largest; i++) {
		const rm_compare_row *r = &c->rows[c->largest[i]];
		const char *name = r->group == RM_COMPARE_FIGURE ? figure_label(r->key) : r->key;
		double e = rm_compare_row_error_pct(r);
		printf("  %d. %s%s: predicted %.3f ms, measured %.3f ms, %+.3f ms", i + 1,
		       r->group == RM_COMPARE_COLLECTIVE ? "collective " : r->group == RM_COMPARE_CLASS ? "class " : "",
		       r->group == RM_COMPARE_STEP ? "step" : name, r->predicted_s * 1e3, r->measured_s * 1e3,
		       (r->predicted_s - r->measured_s) * 1e3);
		if (!isnan(e))
			printf(" (%+.1f%%)", e);
		printf("\n");
	}
	if (c->n_largest == 0)
		printf("  none: every figure is 0 on both sides\n");
}

typedef struct merged_ctx {
	const rm_sim *sim;
	const rm_trace *measured;
	const rm_compare *c;
} merged_ctx;

static bool merged_fn(FILE *out, void *user, rm_error *err)
{
	const merged_ctx *m = user;
	return rm_compare_write_trace(m->sim, m->measured, m->c, out, err);
}

/* The comparison once both sides are in hand: the trace file, then stdout. */
static int report(const compare_opts *o, const rm_sim *sim, const measured_set *ms)
{
	rm_error err;
	rm_error_clear(&err);
	rm_trace *pt = rm_compare_sim_trace(sim, &err);
	if (!pt)
		return cli_fail(&err);
	rm_trace_report *pred = NULL;
	int n_pred = 0, rc = CLI_EXIT_OK;
	rm_compare_analyze(pt, 0, &pred, &n_pred);
	rm_trace_destroy(pt);
	const rm_trace_report *meas = rm_compare_pick(ms->reports, ms->n_reports, o->rank, &err);
	if (!meas) {
		rm_error_prefix(&err, "%s: ", o->measured);
		rc = cli_fail(&err);
		goto reports;
	}
	if (n_pred == 0) {
		rm_error_set(&err, RM_INVALID, o->scenario, 0, 0, "the predicted step has no op that takes time");
		rc = cli_fail(&err);
		goto reports;
	}
	rm_compare c;
	rm_compare_build(&pred[0], meas, &c);
	int fi = ms->report_file[meas - ms->reports];
	if (o->trace) {
		merged_ctx mc = {.sim = sim, .measured = ms->traces[fi], .c = &c};
		if (!rm_file_write(o->trace, merged_fn, &mc, &err)) {
			rc = cli_fail(&err);
			goto compared;
		}
	}
	if (o->json) {
		json_t *doc = rm_compare_json(&c);
		json_object_set_new(doc, "scenario", rm_json_string(o->scenario));
		json_t *m = json_object_get(doc, "measured");
		json_object_set_new(m, "file", rm_json_string(ms->files[fi]));
		rc = cli_print_json(doc);
	} else {
		print_text(o, ms->files[fi], &c);
	}
	if (o->trace)
		fprintf(stderr, "remora: wrote %s (process 1 predicted, process 2 measured, both from t = 0)\n", o->trace);
compared:
	rm_compare_finish(&c);
reports:
	rm_trace_reports_free(pred, n_pred);
	return rc;
}

int cli_cmd_compare(int argc, char **argv)
{
	compare_opts o = {.sets = rm_new(char *, (size_t)argc + 1)};
	int rc = parse(argc, argv, &o);
	if (rc != CLI_EXIT_OK) {
		free(o.sets);
		return rc < 0 ? CLI_EXIT_OK : rc;
	}
	rm_scenario sc;
	rm_scenario_resolved res;
	rc = cli_load_scenario("compare", o.scenario, o.sets, o.n_sets, &sc, &res);
	free(o.sets);
	if (rc != CLI_EXIT_OK)
		return rc;
	measured_set ms = {0};
	char model[1100];
	const char *outs[] = {o.trace};
	const char *ins[] = {o.scenario, rm_scenario_model_file(&sc, model, sizeof(model)), o.measured};
	rc = cli_check_outputs("compare", outs, 1, ins, 3);
	if (rc == CLI_EXIT_OK)
		rc = measured_read(o.measured, o.rank, &ms);
	if (rc == CLI_EXIT_OK) {
		/* a trace file of a directory is an input too */
		rc = cli_check_outputs("compare", outs, 1, (const char *const *)ms.files, ms.n_files);
	}
	rm_program *prog = NULL;
	rm_sim *sim = NULL;
	if (rc == CLI_EXIT_OK) {
		rm_error err;
		rm_error_clear(&err);
		if (rm_compare_simulate(&res, &prog, &sim, &err) != RM_OK)
			rc = err.status == RM_UNSUPPORTED ? cli_usage_error("compare", "%s", err.msg) : cli_fail(&err);
	}
	if (rc == CLI_EXIT_OK)
		rc = report(&o, sim, &ms);
	rm_sim_destroy(sim);
	rm_program_destroy(prog);
	measured_free(&ms);
	rm_scenario_resolved_finish(&res);
	return rc;
}
