/*
 * Golden end-to-end tests of `remora validate`: a tiny synthetic case set (tests/data/validation,
 * GPT-2 at sequence 256) diffed byte for byte against data/golden/, the shipped cases run and
 * listed (their figures are not golden: they move with the cost model), and the exit codes of
 * bad cases, a missing folder and --max-error. Regenerate after an intended change with
 *   REMORA_UPDATE_GOLDEN=1 meson test -C build --suite golden
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct run_result {
	char *out;
	size_t len;
	int exit_code;
} run_result;

/* Runs `remora ARGS` in folder cwd (stderr merged into stdout when merge is set). */
static run_result run_remora_in(const char *cwd, const char *args, bool merge)
{
	const char *bin = getenv("REMORA_BIN");
	cr_assert_not_null(bin, "REMORA_BIN must name the remora executable");
	char cmd[4096];
	snprintf(cmd, sizeof(cmd), "cd '%s' && '%s' %s%s", cwd, bin, args, merge ? " 2>&1" : " 2>/dev/null");
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	run_result r = {0};
	size_t cap = 1 << 16;
	r.out = malloc(cap);
	size_t got;
	while ((got = fread(r.out + r.len, 1, cap - r.len - 1, p)) > 0) {
		r.len += got;
		if (cap - r.len < 4096) {
			cap *= 2;
			r.out = realloc(r.out, cap);
		}
	}
	r.out[r.len] = '\0';
	int status = pclose(p);
	r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
	return r;
}

static const char *test_data(void)
{
	const char *d = getenv("REMORA_TEST_DATA");
	cr_assert_not_null(d, "REMORA_TEST_DATA must point at tests/data");
	return d;
}

/* Compares stdout of `remora ARGS`, run in tests/data, with data/golden/NAME. */
static void golden(const char *name, const char *args)
{
	const char *dir = getenv("REMORA_GOLDEN_DIR");
	cr_assert_not_null(dir, "REMORA_GOLDEN_DIR must point at data/golden");
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	run_result r = run_remora_in(test_data(), args, false);
	cr_assert_eq(r.exit_code, 0, "remora %s exited %d", args, r.exit_code);
	const char *update = getenv("REMORA_UPDATE_GOLDEN");
	if (update && strcmp(update, "1") == 0) {
		FILE *f = fopen(path, "wb");
		cr_assert_not_null(f, "cannot write %s", path);
		fwrite(r.out, 1, r.len, f);
		fclose(f);
		free(r.out);
		return;
	}
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "missing golden file %s (run with REMORA_UPDATE_GOLDEN=1)", path);
	char *want = malloc(r.len + 2);
	size_t n = fread(want, 1, r.len + 1, f);
	fclose(f);
	size_t at = 0;
	while (at < n && at < r.len && want[at] == r.out[at])
		at++;
	cr_assert(n == r.len && at == n, "remora %s differs from %s at byte %zu (got %zu bytes, golden %zu)", args, path,
		  at, r.len, n);
	free(want);
	free(r.out);
}

Test(golden_validate, tiny_cases_text)
{
	golden("validate-tiny.txt", "validate validation");
}

Test(golden_validate, tiny_cases_json)
{
	golden("validate-tiny.json", "validate validation --json");
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every case file of data/validation runs and is listed, by file name, with a prediction. */
Test(golden_validate, shipped_cases_run_and_are_listed, .timeout = 120)
{
	const char *data = getenv("REMORA_DATA_DIR");
	cr_assert_not_null(data);
	char dir[1024];
	snprintf(dir, sizeof(dir), "%s/validation", data);
	DIR *d = opendir(dir);
	cr_assert_not_null(d, "%s", dir);
	char *ids[64];
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		size_t len = strlen(e->d_name);
		if (e->d_name[0] == '.' || len < 6 || strcmp(e->d_name + len - 5, ".yaml") != 0)
			continue;
		cr_assert_lt(n, 64);
		ids[n] = strdup(e->d_name);
		n++;
	}
	closedir(d);
	cr_assert_geq(n, 21, "V1 six rows, V2 two, V3 four, V4 two, V5 one, V6 six");
	/* validate runs the cases in file-name order: sort the names with their extension
	 * ("a-b.yaml" before "a.yaml"), then drop it */
	qsort(ids, (size_t)n, sizeof(ids[0]), cmp_str);
	for (int i = 0; i < n; i++)
		ids[i][strlen(ids[i]) - 5] = '\0';
	char args[1200];
	snprintf(args, sizeof(args), "validate '%s' --json", dir);
	run_result r = run_remora_in(".", args, false);
	cr_assert_eq(r.exit_code, 0, "remora %s exited %d", args, r.exit_code);
	json_error_t jerr;
	json_t *doc = json_loads(r.out, 0, &jerr);
	cr_assert_not_null(doc, "%s", jerr.text);
	cr_assert_str_eq(json_string_value(json_object_get(doc, "schema")), "remora.validate/1");
	json_t *cases = json_object_get(doc, "cases");
	cr_assert_eq((int)json_array_size(cases), n);
	for (int i = 0; i < n; i++) {
		json_t *c = json_array_get(cases, (size_t)i);
		cr_expect_str_eq(json_string_value(json_object_get(c, "id")), ids[i]);
		cr_expect(json_string_length(json_object_get(c, "source")) > 0, "%s has a source", ids[i]);
		cr_expect(json_array_size(json_object_get(c, "assumed")) > 0, "%s says what it assumed", ids[i]);
		double tok = json_real_value(json_object_get(json_object_get(c, "predicted"), "tokens_per_s_per_gpu"));
		cr_expect_gt(tok, 0, "%s has a prediction", ids[i]);
		cr_expect(json_is_real(json_object_get(json_object_get(c, "error"), "tokens_per_s_per_gpu_pct")));
		free(ids[i]);
	}
	json_t *s = json_object_get(doc, "summary");
	cr_expect_eq(json_integer_value(json_object_get(s, "cases")), n);
	cr_expect_eq(json_integer_value(json_object_get(s, "tokens_cases")), n);
	json_decref(doc);
	free(r.out);
}

Test(golden_validate, bad_case_stops_the_run_with_its_position)
{
	run_result r = run_remora_in(test_data(), "validate validation-bad", true);
	cr_assert_eq(r.exit_code, 1, "exit %d: %s", r.exit_code, r.out);
	cr_assert(strstr(r.out, "validation-bad/b-unknown-key.yaml:6:3: error: unknown key \"measured.memory_gb\""),
		  "%s", r.out);
	/* no table of the good case before it */
	cr_assert_null(strstr(r.out, "validation cases in"), "%s", r.out);
	free(r.out);
}

Test(golden_validate, missing_folder_is_an_error)
{
	/* the default folder is data/validation under the current one: tests/data has none */
	run_result r = run_remora_in(test_data(), "validate", true);
	cr_assert_eq(r.exit_code, 1);
	cr_assert(strstr(r.out, "'data/validation' does not exist"), "%s", r.out);
	free(r.out);
	r = run_remora_in(test_data(), "validate configs", true);
	cr_assert_eq(r.exit_code, 1);
	cr_assert(strstr(r.out, "no validation cases (*.yaml) in 'configs'"), "%s", r.out);
	free(r.out);
}

/* The larger of the tiny set's two medians (throughput, memory), read from its JSON report. */
static double tiny_max_median(void)
{
	run_result r = run_remora_in(test_data(), "validate validation --json", false);
	cr_assert_eq(r.exit_code, 0);
	json_error_t jerr;
	json_t *doc = json_loads(r.out, 0, &jerr);
	cr_assert_not_null(doc, "%s", jerr.text);
	json_t *s = json_object_get(doc, "summary");
	double t = json_real_value(json_object_get(s, "tokens_median_abs_error_pct"));
	double m = json_real_value(json_object_get(s, "memory_median_abs_error_pct"));
	json_decref(doc);
	free(r.out);
	return t > m ? t : m;
}

Test(golden_validate, max_error_sets_exit_3)
{
	double worst = tiny_max_median();
	cr_assert_gt(worst, 2.0, "the tiny set's figures are chosen to be off by more than 2%%");
	char above[96], below[96];
	snprintf(above, sizeof(above), "validate validation --max-error %.3f", worst + 1);
	snprintf(below, sizeof(below), "validate validation --max-error %.3f", worst - 1);
	const struct {
		const char *args;
		int exit_code;
	} cases[] = {
		{above, 0},
		{below, 3},
		{"validate validation -m 0", 3},
		{"validate validation --max-error abc", 2},
		{"validate validation --max-error -1", 2},
		{"validate validation extra", 2},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		run_result r = run_remora_in(test_data(), cases[i].args, true);
		cr_expect_eq(r.exit_code, cases[i].exit_code, "remora %s exited %d: %s", cases[i].args, r.exit_code, r.out);
		free(r.out);
	}
}

/* A set with no memory figure: the --max-error warning says memory was not measured (it printed
 * "nan%"), and the one-case header is singular. */
Test(golden_validate, max_error_without_memory_cases)
{
	run_result r = run_remora_in(test_data(), "validate validation-throughput --max-error 0", true);
	cr_assert_eq(r.exit_code, 3, "exit %d: %s", r.exit_code, r.out);
	cr_expect(strstr(r.out, "1 validation case in validation-throughput:"), "%s", r.out);
	cr_expect(strstr(r.out, "memory:     median |error| - over 0 cases"), "%s", r.out);
	cr_expect(strstr(r.out, ", memory not measured) exceeds --max-error 0%"), "%s", r.out);
	cr_expect_null(strstr(r.out, "nan"), "%s", r.out);
	free(r.out);
}

/* A case file whose path does not fit a case's path field is refused with the reason: cut short,
 * it named another file (and its scenario file was looked for next to that one). */
Test(golden_validate, case_path_too_long_is_an_error)
{
	char root[64], dir[1024], cmd[2400];
	snprintf(root, sizeof(root), "/tmp/remora-longpath-%d", (int)getpid());
	snprintf(dir, sizeof(dir), "%s/%0200d/%0200d/%0100d", root, 0, 0, 0);
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s' && cp '%s/validation-throughput/a-throughput-only.yaml' '%s/'", dir,
		 test_data(), dir);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	snprintf(cmd, sizeof(cmd), "validate '%s'", dir);
	run_result r = run_remora_in(".", cmd, true);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	cr_expect_eq(system(cmd), 0);
	cr_assert_eq(r.exit_code, 1, "exit %d: %s", r.exit_code, r.out);
	cr_expect(strstr(r.out, "a case file's path is longer than 511 characters"), "%s", r.out);
	free(r.out);
}

/* The tokens/s per GPU that `remora validate DIR --json` predicts for its first case. */
static double first_prediction(const char *dir)
{
	char args[1200];
	snprintf(args, sizeof(args), "validate '%s' --json", dir);
	run_result r = run_remora_in(".", args, false);
	cr_assert_eq(r.exit_code, 0, "remora %s exited %d", args, r.exit_code);
	json_error_t jerr;
	json_t *doc = json_loads(r.out, 0, &jerr);
	cr_assert_not_null(doc, "%s", jerr.text);
	json_t *c = json_array_get(json_object_get(doc, "cases"), 0);
	double tok = json_real_value(json_object_get(json_object_get(c, "predicted"), "tokens_per_s_per_gpu"));
	json_decref(doc);
	free(r.out);
	return tok;
}

/* docs/validate.md's example case is the shipped v2-bucketing-nccl case shortened: it parses and
 * predicts what that case predicts (it ran on the ideal runtime, 32% off the measured run). */
Test(golden_validate, docs_example_is_the_shipped_case, .timeout = 60)
{
	const char *data = getenv("REMORA_DATA_DIR");
	cr_assert_not_null(data);
	char doc[1024], dir[64], path[128];
	snprintf(doc, sizeof(doc), "%s/../docs/validate.md", data);
	FILE *f = fopen(doc, "r");
	cr_assert_not_null(f, "%s", doc);
	snprintf(dir, sizeof(dir), "/tmp/remora-docex-%d", (int)getpid());
	snprintf(path, sizeof(path), "%s/example.yaml", dir);
	char cmd[2400];
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", dir);
	cr_assert_eq(system(cmd), 0);
	FILE *out = fopen(path, "w");
	cr_assert_not_null(out);
	char line[1024];
	int state = 0; /* 0 before the block, 1 inside, 2 after */
	while (state < 2 && fgets(line, sizeof(line), f)) {
		if (state == 0 && strncmp(line, "```yaml", 7) == 0)
			state = 1;
		else if (state == 1 && strncmp(line, "```", 3) == 0)
			state = 2;
		else if (state == 1)
			fputs(line, out);
	}
	fclose(out);
	fclose(f);
	cr_assert_eq(state, 2, "no yaml block in %s", doc);
	double example = first_prediction(dir);
	char shipped[1100];
	snprintf(shipped, sizeof(shipped), "%s/validation/v2-bucketing-nccl.yaml", data);
	snprintf(cmd, sizeof(cmd), "rm -f '%s' && cp '%s' '%s/' && rm -f '%s'", path, shipped, dir, path);
	cr_assert_eq(system(cmd), 0);
	double v2 = first_prediction(dir);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_expect_eq(system(cmd), 0);
	cr_assert_gt(v2, 0);
	cr_expect_eq(example, v2, "the docs' example predicts %.1f tokens/s per GPU, the shipped case %.1f", example, v2);
}

/* A case's id is its file name less the extension: a.yaml beside a.yml would give two rows "a";
 * the run stops (exit 1) and names both. */
Test(golden_validate, two_files_with_one_id_are_an_error)
{
	char dir[64], cmd[2400];
	snprintf(dir, sizeof(dir), "/tmp/remora-sameid-%d", (int)getpid());
	snprintf(cmd, sizeof(cmd),
		 "mkdir -p '%s' && cp '%s/validation-throughput/a-throughput-only.yaml' '%s/a.yaml' && cp '%s/a.yaml' "
		 "'%s/a.yml'",
		 dir, test_data(), dir, dir, dir);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	snprintf(cmd, sizeof(cmd), "validate '%s'", dir);
	run_result r = run_remora_in(".", cmd, true);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_expect_eq(system(cmd), 0);
	cr_assert_eq(r.exit_code, 1, "exit %d: %s", r.exit_code, r.out);
	cr_expect(strstr(r.out, "have the id 'a' (a.yaml and a.yml)"), "%s", r.out);
	cr_expect_null(strstr(r.out, "validation cases in"), "%s", r.out);
	free(r.out);
}
