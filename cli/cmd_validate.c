/*
 * `remora validate [DIR] [--json] [--max-error PCT]`: every validation case in DIR (default
 * data/validation), predicted against measured (remora/validate.h, docs/validate.md).
 */
#include <dirent.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "remora/calib.h"
#include "remora/json.h"
#include "remora/validate.h"

/* Exit status when the median |error| of throughput or memory exceeds --max-error. */
enum { VALIDATE_EXIT_OVER = 3 };

#define DEFAULT_DIR "data/validation"

static void validate_usage(FILE *out)
{
	fprintf(out,
		"usage: remora validate [DIR] [--json] [--max-error PCT]\n\n"
		"Runs every validation case in DIR (*.yaml, by file name; default " DEFAULT_DIR ", relative to\n"
		"the current folder): the scenario of a measured training run, simulated as `remora simulate`\n"
		"does, printed as predicted vs measured tokens/s per GPU, MFU and peak memory with the signed\n"
		"error, then the median |error| of throughput and of memory. A bad case file stops the run\n"
		"(FILE:LINE:COLUMN, exit 1). Case format: docs/validate.md.\n\n"
		"options:\n"
		"  -j, --json            the report as JSON (schema " RM_VALIDATE_SCHEMA ")\n"
		"  -m, --max-error PCT   exit 3 when the median |error| of throughput or of memory exceeds\n"
		"                        PCT percent (default: exit 0 whatever the errors)\n"
		"  -h, --help            this help\n");
}

static bool is_case_file(const char *name)
{
	size_t n = strlen(name);
	return name[0] != '.' && ((n > 5 && strcmp(name + n - 5, ".yaml") == 0) || (n > 4 && strcmp(name + n - 4, ".yml") == 0));
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The file name without its extension: the case's id in the table. */
static void case_id(const char *file, char *buf, size_t size)
{
	snprintf(buf, size, "%s", file);
	char *dot = strrchr(buf, '.');
	if (dot)
		*dot = '\0';
}

static void free_names(char **names, int n)
{
	for (int i = 0; names && i < n; i++)
		free(names[i]);
	free(names);
}

/* The case files of dir, sorted by name (byte order); NULL with err when dir cannot be read or
 * two files give one case id. */
static char **list_cases(const char *dir, int *n, rm_error *err)
{
	*n = 0;
	struct stat st;
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		rm_error_set(err, RM_NOT_FOUND, NULL, 0, 0,
			     "no validation cases: '%s' %s (run from the source tree, or give the folder: "
			     "remora validate DIR)",
			     dir, stat(dir, &st) != 0 ? "does not exist" : "is not a folder");
		return NULL;
	}
	DIR *d = opendir(dir);
	if (!d) {
		rm_error_set(err, RM_IO, NULL, 0, 0, "cannot read the folder '%s'", dir);
		return NULL;
	}
	size_t cap = 16;
	char **names = rm_new(char *, cap);
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (!is_case_file(e->d_name))
			continue;
		if ((size_t)*n == cap) {
			cap *= 2;
			names = rm_xrealloc(names, cap * sizeof(*names));
		}
		names[(*n)++] = rm_xstrdup(e->d_name);
	}
	closedir(d);
	if (*n == 0) {
		free(names);
		rm_error_set(err, RM_NOT_FOUND, NULL, 0, 0, "no validation cases (*.yaml) in '%s'", dir);
		return NULL;
	}
	qsort(names, (size_t)*n, sizeof(*names), cmp_names);
	/* a case's id is its file name without the extension: a.yaml and a.yml would be two rows "a" */
	char **ids = rm_new(char *, (size_t)*n);
	for (int i = 0; i < *n; i++) {
		char id[256];
		case_id(names[i], id, sizeof(id));
		ids[i] = rm_xstrdup(id);
	}
	qsort(ids, (size_t)*n, sizeof(*ids), cmp_names);
	for (int i = 0; i + 1 < *n; i++)
		if (strcmp(ids[i], ids[i + 1]) == 0) {
			rm_error_set(err, RM_INVALID, NULL, 0, 0,
				     "two case files in '%s' have the id '%s' (%s.yaml and %s.yml): rename one", dir,
				     ids[i], ids[i], ids[i]);
			free_names(ids, *n);
			free_names(names, *n);
			*n = 0;
			return NULL;
		}
	free_names(ids, *n);
	return names;
}



static json_t *real_or_null(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

static json_t *measured_json(rm_measured m)
{
	if (!m.set)
		return json_null();
	json_t *o = json_object();
	json_object_set_new(o, "low", json_real(m.low));
	json_object_set_new(o, "high", json_real(m.high));
	json_object_set_new(o, "mid", json_real(rm_measured_mid(m)));
	return o;
}

static json_t *strings_json(const char *first, size_t stride, int n)
{
	json_t *a = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(a, rm_json_string(first + (size_t)i * stride));
	return a;
}

static json_t *case_json(const char *id, const rm_validation_case *c, const rm_validation_result *r)
{
	json_t *o = json_object();
	json_object_set_new(o, "id", rm_json_string(id));
	json_object_set_new(o, "file", rm_json_string(c->path));
	json_object_set_new(o, "scenario_file", c->scenario_file[0] ? rm_json_string(c->scenario_file) : json_null());
	json_object_set_new(o, "name", rm_json_string(c->name));
	json_object_set_new(o, "source", rm_json_string(c->source));
	json_object_set_new(o, "assumed", strings_json(c->assumed[0], sizeof(c->assumed[0]), c->n_assumed));
	json_object_set_new(o, "notes", c->notes[0] ? rm_json_string(c->notes) : json_null());
	json_object_set_new(o, "set", strings_json(c->sets[0], sizeof(c->sets[0]), c->n_sets));
	json_t *p = json_object();
	json_object_set_new(p, "step_time_s", json_real(r->step_time_s));
	json_object_set_new(p, "tokens_per_s_per_gpu", json_real(r->tokens_per_s_per_gpu));
	json_object_set_new(p, "mfu", json_real(r->mfu));
	json_object_set_new(p, "mfu_remora", json_real(r->mfu_remora));
	json_object_set_new(p, "mfu_palm_noncausal", json_real(r->mfu_palm_noncausal));
	json_object_set_new(p, "memory_bytes", c->memory_kind != RM_MEMORY_NONE ? json_integer(r->memory_bytes) : json_null());
	json_object_set_new(p, "memory_metric", r->memory_metric ? json_string(r->memory_metric) : json_null());
	json_object_set_new(p, "peak_memory_bytes", json_integer(r->peak_memory_bytes));
	json_object_set_new(p, "memory_usable_bytes", json_integer(r->memory_usable_bytes));
	json_object_set_new(p, "fits", json_boolean(r->fits));
	json_object_set_new(o, "predicted", p);
	json_t *m = json_object();
	json_object_set_new(m, "tokens_per_s_per_gpu", measured_json(c->tokens_per_s_per_gpu));
	json_object_set_new(m, "mfu", measured_json(c->mfu));
	json_object_set_new(m, "mfu_convention", c->mfu.set ? json_string(rm_mfu_convention_name(c->mfu_convention)) : json_null());
	json_object_set_new(m, "memory", measured_json(c->memory));
	json_object_set_new(m, "memory_kind", c->memory_kind != RM_MEMORY_NONE ? json_string(rm_memory_kind_name(c->memory_kind)) : json_null());
	json_object_set_new(m, "memory_bytes", real_or_null(r->measured_memory_bytes));
	json_object_set_new(m, "device_memory_bytes", real_or_null(r->device_memory_bytes));
	json_object_set_new(o, "measured", m);
	json_t *e = json_object();
	json_object_set_new(e, "tokens_per_s_per_gpu_pct", real_or_null(r->tokens_error_pct));
	json_object_set_new(e, "memory_pct", real_or_null(r->memory_error_pct));
	json_object_set_new(e, "mfu_points", real_or_null(r->mfu_excess_points));
	json_object_set_new(o, "error", e);
	return o;
}

static json_t *summary_json(const rm_validation_summary *s, char **ids)
{
	json_t *o = json_object();
	json_object_set_new(o, "cases", json_integer(s->cases));
	json_object_set_new(o, "tokens_cases", json_integer(s->tokens_cases));
	json_object_set_new(o, "tokens_median_abs_error_pct", real_or_null(s->tokens_median_abs_pct));
	json_object_set_new(o, "memory_cases", json_integer(s->memory_cases));
	json_object_set_new(o, "memory_median_abs_error_pct", real_or_null(s->memory_median_abs_pct));
	json_t *w = json_null();
	if (s->worst >= 0) {
		w = json_object();
		json_object_set_new(w, "id", rm_json_string(ids[s->worst]));
		json_object_set_new(w, "metric", json_string(s->worst_metric));
		json_object_set_new(w, "error_pct", json_real(s->worst_error_pct));
	}
	json_object_set_new(o, "worst", w);
	json_object_set_new(o, "bad_error_pct", json_real(RM_VALIDATION_BAD_ERROR_PCT));
	json_object_set_new(o, "cases_over_bad_error", json_integer(s->over_bad_error));
	json_object_set_new(o, "mfu_margin_points", json_real(RM_VALIDATION_MFU_MARGIN_POINTS));
	json_object_set_new(o, "cases_mfu_over_margin", json_integer(s->mfu_over_margin));
	return o;
}

/* "7200-7500" or "8600": both ends times scale, with decimals digits. */
static const char *range_text(rm_measured m, double scale, int decimals, char *buf, size_t size)
{
	char lo[32], hi[32];
	snprintf(lo, sizeof(lo), "%.*f", decimals, m.low * scale);
	snprintf(hi, sizeof(hi), "%.*f", decimals, m.high * scale);
	if (strcmp(lo, hi) == 0)
		snprintf(buf, size, "%s", lo);
	else
		snprintf(buf, size, "%s-%s", lo, hi);
	return buf;
}

static const char *pct_text(double v, char *buf, size_t size)
{
	if (isnan(v))
		snprintf(buf, size, "-");
	else
		snprintf(buf, size, "%+.1f%%", v);
	return buf;
}

static const char *abs_text(double v, char *buf, size_t size)
{
	if (isnan(v))
		snprintf(buf, size, "-");
	else
		snprintf(buf, size, "%.1f%%", v);
	return buf;
}

static bool reserved_stand_in(const rm_validation_case *c, const rm_validation_result *r)
{
	return c->memory_kind == RM_MEMORY_RESERVED && r->memory_metric && strcmp(r->memory_metric, "peak_reserved_bytes") != 0;
}

/* case | tokens/s per GPU: predicted, measured, error | MFU: predicted, measured | memory in GiB:
 * predicted, measured, kind, error */
#define ROW_FORMAT "%-26s %9s %13s %8s  %6s %11s  %7s %8s  %-13s %8s\n"

static void print_row(const char *id, const rm_validation_case *c, const rm_validation_result *r)
{
	char tm[40], te[16], mp[16], mm[24], pm[24], me[24], mem[24], kind[32];
	range_text(c->tokens_per_s_per_gpu, 1, 0, tm, sizeof(tm));
	pct_text(r->tokens_error_pct, te, sizeof(te));
	snprintf(mp, sizeof(mp), "%.1f%%", 100 * r->mfu);
	if (c->mfu.set) {
		char f[20];
		snprintf(mm, sizeof(mm), "%s%%", range_text(c->mfu, 100, 1, f, sizeof(f)));
	} else
		snprintf(mm, sizeof(mm), "-");
	snprintf(pm, sizeof(pm), "-");
	snprintf(me, sizeof(me), "-");
	snprintf(mem, sizeof(mem), "-");
	snprintf(kind, sizeof(kind), "-");
	if (c->memory_kind != RM_MEMORY_NONE) {
		snprintf(pm, sizeof(pm), "%.1f%s", (double)r->memory_bytes / (double)RM_GiB, r->fits ? "" : "!");
		snprintf(mem, sizeof(mem), "%.1f", r->measured_memory_bytes / (double)RM_GiB);
		pct_text(r->memory_error_pct, me, sizeof(me));
		if (c->memory_kind == RM_MEMORY_ACTIVE_FRACTION) {
			char f[24];
			snprintf(kind, sizeof(kind), "active %s%%", range_text(c->memory, 100, 1, f, sizeof(f)));
		} else {
			snprintf(kind, sizeof(kind), "%s%s", rm_memory_kind_name(c->memory_kind), reserved_stand_in(c, r) ? "*" : "");
		}
	}
	char tp[24];
	snprintf(tp, sizeof(tp), "%.0f", r->tokens_per_s_per_gpu);
	printf(ROW_FORMAT, id, tp, tm, te, mp, mm, pm, mem, kind, me);
}

static void print_summary(const rm_validation_summary *s, char **ids, const rm_validation_case *const *cases,
			  const rm_validation_result *res, int n)
{
	bool star = false, bang = false, palm = false, rem = false;
	for (int i = 0; i < n; i++) {
		star |= reserved_stand_in(cases[i], &res[i]);
		bang |= cases[i]->memory_kind != RM_MEMORY_NONE && !res[i].fits;
		palm |= cases[i]->mfu.set && cases[i]->mfu_convention == RM_MFU_PALM_NONCAUSAL;
		rem |= cases[i]->mfu.set && cases[i]->mfu_convention == RM_MFU_REMORA;
	}
	printf("\n");
	if (palm || rem)
		printf("MFU in each case's convention:%s%s\n",
		       palm ? "\n  palm_noncausal: 6 N + 12 L h s FLOPs per token (attention non-causal), as torchtitan counts" : "",
		       rem ? "\n  remora: attention counted causally, as `remora simulate` prints" : "");
	if (star)
		printf("* reserved memory is compared with the predicted allocated peak (live tensors): remora\n"
		       "  does not model the caching allocator's reserve yet.\n");
	if (bang)
		printf("! the predicted peak exceeds the memory the run can use.\n");
	char pct[16];
	int mfu_cases = 0;
	for (int i = 0; i < n; i++)
		mfu_cases += cases[i]->mfu.set;
	printf("throughput: median |error| %s over %d case%s\n", abs_text(s->tokens_median_abs_pct, pct, sizeof(pct)),
	       s->tokens_cases, s->tokens_cases == 1 ? "" : "s");
	printf("memory:     median |error| %s over %d case%s\n", abs_text(s->memory_median_abs_pct, pct, sizeof(pct)),
	       s->memory_cases, s->memory_cases == 1 ? "" : "s");
	if (s->worst >= 0)
		printf("worst:      %s, %s %s\n", ids[s->worst], strcmp(s->worst_metric, "memory") == 0 ? "memory" : "tokens/s per GPU",
		       pct_text(s->worst_error_pct, pct, sizeof(pct)));
	printf("|error| > %.0f%%: %d of %d cases\n", RM_VALIDATION_BAD_ERROR_PCT, s->over_bad_error, s->cases);
	printf("MFU above measured + %.0f points: %d of %d cases with a measured MFU\n", RM_VALIDATION_MFU_MARGIN_POINTS,
	       s->mfu_over_margin, mfu_cases);
}

/* Loads and runs every case; CLI_EXIT_FAIL at the first bad one (message printed). */
static int run_cases(const char *dir, char **files, int n, rm_validation_case **cases, rm_validation_result *res,
		     char **ids)
{
	for (int i = 0; i < n; i++) {
		rm_error err;
		rm_error_clear(&err);
		char path[sizeof(cases[i]->path)], id[256];
		cases[i] = rm_new(rm_validation_case, 1);
		int len = snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		case_id(files[i], id, sizeof(id));
		ids[i] = rm_xstrdup(id);
		/* a case keeps its path (to find its scenario file and to name itself in errors) in
		 * path's bytes: a longer one would be cut short and name another file */
		if (len < 0 || (size_t)len >= sizeof(path)) {
			rm_error_set(&err, RM_RANGE, NULL, 0, 0,
				     "a case file's path is longer than %zu characters (run validate from a folder nearer "
				     "the cases): %s/%s",
				     sizeof(path) - 1, dir, files[i]);
			return cli_fail(&err);
		}
		if (rm_validation_case_load(path, cases[i], &err) != RM_OK)
			return cli_fail(&err);
		if (rm_validation_run(cases[i], rm_calib_hw_resolver, &res[i], &err) != RM_OK)
			return cli_fail(&err);
		rm_log_info("%s: %.0f tokens/s per GPU predicted, %.0f measured", id, res[i].tokens_per_s_per_gpu,
			    res[i].measured_tokens_per_s_per_gpu);
	}
	return CLI_EXIT_OK;
}

static int report(const char *dir, int n, rm_validation_case **cases, const rm_validation_result *res, char **ids,
		  bool json, double max_error)
{
	rm_validation_summary s;
	rm_validation_summarize(res, n, &s);
	int rc = CLI_EXIT_OK;
	if (json) {
		json_t *doc = json_object();
		json_object_set_new(doc, "schema", json_string(RM_VALIDATE_SCHEMA));
		json_object_set_new(doc, "directory", rm_json_string(dir));
		json_t *arr = json_array();
		for (int i = 0; i < n; i++)
			json_array_append_new(arr, case_json(ids[i], cases[i], &res[i]));
		json_object_set_new(doc, "cases", arr);
		json_object_set_new(doc, "summary", summary_json(&s, ids));
		rc = cli_print_json(doc);
	} else {
		printf("%d validation case%s in %s: predicted vs measured (error = (predicted - measured) / measured)\n\n", n,
		       n == 1 ? "" : "s", dir);
		printf(ROW_FORMAT, "case", "tok/s/GPU", "measured", "error", "MFU", "measured", "GiB", "measured", "memory",
		       "error");
		for (int i = 0; i < n; i++)
			print_row(ids[i], cases[i], &res[i]);
		print_summary(&s, ids, (const rm_validation_case *const *)cases, res, n);
	}
	if (rc == CLI_EXIT_OK && max_error >= 0 &&
	    (s.tokens_median_abs_pct > max_error || s.memory_median_abs_pct > max_error)) {
		char tp[16], mp[16];
		rm_log_warn("median |error| (throughput %s, memory %s) exceeds --max-error %g%%",
			    abs_text(s.tokens_median_abs_pct, tp, sizeof(tp)),
			    isnan(s.memory_median_abs_pct) ? "not measured" : abs_text(s.memory_median_abs_pct, mp, sizeof(mp)),
			    max_error);
		rc = VALIDATE_EXIT_OVER;
	}
	return rc;
}

int cli_cmd_validate(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"json", no_argument, NULL, 'j'},
		{"max-error", required_argument, NULL, 'm'},
		{"help", no_argument, NULL, 'h'},
		{0, 0, 0, 0},
	};
	bool json = false;
	double max_error = -1;
	int c;
	const char *shortopts = "jm:h";
	while ((c = cli_getopt(argc, argv, shortopts, longopts)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'm': {
			char *end = NULL;
			max_error = strtod(optarg, &end);
			if (end == optarg || *end || !(max_error >= 0) || !isfinite(max_error))
				return cli_usage_error("validate", "--max-error expects a percentage >= 0, got '%s'", optarg);
			break;
		}
		case 'h':
			validate_usage(stdout);
			return CLI_EXIT_OK;
		default:
			return cli_option_error("validate", argc, argv, shortopts, longopts);
		}
	}
	if (optind + 1 < argc)
		return cli_usage_error("validate", "unexpected argument '%s' (one folder of cases)", argv[optind + 1]);
	const char *dir = optind < argc ? argv[optind] : DEFAULT_DIR;
	rm_error err;
	rm_error_clear(&err);
	int n = 0;
	char **files = list_cases(dir, &n, &err);
	if (!files)
		return cli_fail(&err);
	rm_validation_case **cases = rm_new(rm_validation_case *, (size_t)n);
	rm_validation_result *res = rm_new(rm_validation_result, (size_t)n);
	char **ids = rm_new(char *, (size_t)n);
	int rc = run_cases(dir, files, n, cases, res, ids);
	if (rc == CLI_EXIT_OK)
		rc = report(dir, n, cases, res, ids, json, max_error);
	for (int i = 0; i < n; i++)
		free(cases[i]);
	free(cases);
	free(res);
	free_names(ids, n);
	free_names(files, n);
	return rc;
}
