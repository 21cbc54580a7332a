/*
 * The command line's files end to end: every output (simulate --trace, schedule -o,
 * run-program --trace, search --trace and --plot) onto a symlink, a FIFO and a full device;
 * inputs that are FIFOs refused at once; `search --plot` into a folder whose name would run a
 * command in a shell; JSON documents naming a file whose name needs escaping.
 * remora runs with an argv (fork + exec, no shell), so the test's own quoting is not in the way.
 */
#define _DEFAULT_SOURCE /* mknod, makedev */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];

static void rm_tree(const char *path)
{
	struct stat st;
	if (lstat(path, &st) != 0)
		return;
	if (S_ISDIR(st.st_mode)) {
		DIR *d = opendir(path);
		struct dirent *e;
		char p[1200];
		while (d && (e = readdir(d)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
				snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
				rm_tree(p);
			}
		if (d)
			closedir(d);
		rmdir(path);
	} else {
		unlink(path);
	}
}

static void make_dir(void)
{
	snprintf(dir, sizeof(dir), "/tmp/remora-test-files-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void remove_dir(void)
{
	rm_tree(dir);
}

TestSuite(files, .init = make_dir, .fini = remove_dir);

static char *in_dir(const char *name)
{
	static char bufs[8][1200];
	static int k;
	char *b = bufs[k++ % 8];
	snprintf(b, 1200, "%s/%s", dir, name);
	return b;
}

static const char *env(const char *name)
{
	const char *v = getenv(name);
	cr_assert_not_null(v, "%s must be set (meson test sets it)", name);
	return v;
}

static const char *seed(void)
{
	static char buf[1200];
	snprintf(buf, sizeof(buf), "%s/scenarios/seed-llama2-7b-fsdp8-h100.yaml", env("REMORA_DATA_DIR"));
	return buf;
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 1 << 16, n = 0, got;
	char *buf = malloc(cap);
	while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
		n += got;
		if (cap - n < 4096)
			buf = realloc(buf, cap *= 2);
	}
	fclose(f);
	buf[n] = '\0';
	if (len)
		*len = n;
	return buf;
}

typedef struct run_result {
	int exit_code;
	char *out, *err; /* stdout, stderr */
} run_result;

/* Runs remora with args (NULL-terminated) in cwd (NULL: the test folder), no shell. */
static run_result run(const char *cwd, const char *const *args)
{
	const char *bin = env("REMORA_BIN");
	char *argv[32];
	int n = 0;
	argv[n++] = (char *)bin;
	for (; *args && n < 31; args++)
		argv[n++] = (char *)*args;
	argv[n] = NULL;
	const char *out = in_dir(".stdout"), *err = in_dir(".stderr");
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0 || chdir(cwd ? cwd : dir) != 0)
			_exit(126);
		execv(bin, argv);
		_exit(127);
	}
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	run_result r = {.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1};
	r.out = slurp(out, NULL);
	r.err = slurp(err, NULL);
	unlink(out);
	unlink(err);
	return r;
}

static void run_free(run_result *r)
{
	free(r->out);
	free(r->err);
}

/* Entries of the test folder other than the named ones: must be none (no temporary files). */
static int others(const char *folder, const char *const *allowed)
{
	DIR *d = opendir(folder);
	cr_assert_not_null(d);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		bool ok = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
		for (const char *const *a = allowed; *a && !ok; a++)
			ok = strcmp(e->d_name, *a) == 0;
		if (!ok) {
			cr_log_error("unexpected file %s/%s", folder, e->d_name);
			n++;
		}
	}
	closedir(d);
	return n;
}

static void assert_json_file(const char *path)
{
	json_error_t jerr;
	json_t *doc = json_load_file(path, 0, &jerr);
	cr_assert_not_null(doc, "%s is not JSON: %s", path, jerr.text);
	json_decref(doc);
}

static const char *const quick[] = {"--set", "search.names=[]", "--set", "search.micro_batches=[1]", "--set",
				    "search.flag_variants=[]"};
#define QUICK quick[0], quick[1], quick[2], quick[3], quick[4], quick[5]

/* ---- outputs onto a full device ---------------------------------------------------------- */

/*
 * A full device at path: a node of /dev/full's own device (char 1:7) where the test may make one
 * (root), else a symlink to /dev/full. Never /dev/full itself: a writer that renames over its
 * target (as remora once did) would replace the machine's /dev/full with a regular file.
 */
static void make_full_device(const char *path)
{
	if (mknod(path, S_IFCHR | 0666, makedev(1, 7)) != 0)
		cr_assert_eq(symlink("/dev/full", path), 0);
}

Test(files, every_output_onto_a_full_device_fails_naming_the_path_and_enospc, .timeout = 60)
{
	char program[1200];
	snprintf(program, sizeof(program), "%s/programs/example.json", env("REMORA_TEST_DATA"));
	make_full_device(in_dir("full"));
	cr_assert_eq(symlink("full", in_dir("full.json")), 0);
	struct stat before;
	cr_assert_eq(lstat(in_dir("full"), &before), 0);
	const char *const cases[][12] = {
		{"simulate", seed(), "--trace", "full", NULL},
		{"schedule", seed(), "-o", "full", NULL},
		{"run-program", program, "--trace", "full", NULL},
		{"search", seed(), QUICK, "--trace", "full", NULL},
		{"simulate", seed(), "--trace", "full.json", NULL},
	};
	char want[200];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		run_result r = run(NULL, cases[i]);
		const char *path = i == 4 ? "full.json" : "full";
		snprintf(want, sizeof(want), "remora: %s: error: write failed: %s", path, strerror(ENOSPC));
		cr_assert_eq(r.exit_code, 1, "remora %s exited %d: %s", cases[i][0], r.exit_code, r.err);
		cr_assert(strstr(r.err, want), "remora %s said: %s", cases[i][0], r.err);
		run_free(&r);
		/* the device is still the device, the link still a link, nothing left beside them */
		struct stat st;
		cr_assert_eq(lstat(in_dir("full"), &st), 0);
		cr_assert_eq(st.st_mode, before.st_mode, "remora %s replaced the device", cases[i][0]);
		cr_assert_eq(lstat(in_dir("full.json"), &st), 0);
		cr_assert(S_ISLNK(st.st_mode));
		cr_assert_eq(others(dir, (const char *const[]){"full", "full.json", NULL}), 0);
	}
}

/* ---- outputs through a symlink ------------------------------------------------------------ */

Test(files, outputs_through_a_symlink_replace_the_target_and_keep_the_link, .timeout = 60)
{
	FILE *f = fopen(in_dir("real.json"), "w");
	fputs("old", f);
	fclose(f);
	cr_assert_eq(symlink("real.json", in_dir("link.json")), 0);
	const char *const cases[][12] = {
		{"simulate", seed(), "--trace", "link.json", NULL},
		{"schedule", seed(), "-o", "link.json", NULL},
		{"search", seed(), QUICK, "--trace", "link.json", NULL},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		run_result r = run(NULL, cases[i]);
		cr_assert_eq(r.exit_code, 0, "remora %s: %s", cases[i][0], r.err);
		run_free(&r);
		struct stat st;
		cr_assert_eq(lstat(in_dir("link.json"), &st), 0);
		cr_assert(S_ISLNK(st.st_mode), "remora %s replaced the link", cases[i][0]);
		assert_json_file(in_dir("real.json"));
		cr_assert_eq(others(dir, (const char *const[]){"real.json", "link.json", NULL}), 0);
	}
}

/* ---- outputs into a FIFO ------------------------------------------------------------------ */

typedef struct fifo_reader {
	const char *path;
	char *text;
	size_t len;
} fifo_reader;

static void *read_fifo(void *p)
{
	fifo_reader *a = p;
	int fd = open(a->path, O_RDONLY);
	size_t cap = 1 << 20;
	a->text = malloc(cap);
	ssize_t n;
	while (fd >= 0 && (n = read(fd, a->text + a->len, cap - a->len - 1)) > 0)
		if ((a->len += (size_t)n) + 4096 > cap)
			a->text = realloc(a->text, cap *= 2);
	a->text[a->len] = '\0';
	if (fd >= 0)
		close(fd);
	return NULL;
}

Test(files, trace_into_a_fifo_is_written_through, .timeout = 30)
{
	const char *fifo = in_dir("trace.fifo");
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	fifo_reader a = {.path = fifo};
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, read_fifo, &a), 0);
	run_result r = run(NULL, (const char *const[]){"simulate", seed(), "--trace", "trace.fifo", NULL});
	cr_assert_eq(r.exit_code, 0, "%s", r.err);
	run_free(&r);
	pthread_join(t, NULL);
	json_error_t jerr;
	json_t *doc = json_loadb(a.text, a.len, 0, &jerr);
	cr_assert_not_null(doc, "what came through the FIFO is not the trace: %s", jerr.text);
	cr_assert_gt(json_array_size(json_object_get(doc, "traceEvents")), 1000);
	json_decref(doc);
	free(a.text);
	struct stat st;
	cr_assert_eq(lstat(fifo, &st), 0);
	cr_assert(S_ISFIFO(st.st_mode), "the FIFO was replaced by a file");
	cr_assert_eq(others(dir, (const char *const[]){"trace.fifo", NULL}), 0);
}

/* ---- inputs that are FIFOs ----------------------------------------------------------------- */

/* Before, each of these waited for ever for a writer to open the FIFO. */
Test(files, fifo_inputs_are_refused_at_once, .timeout = 10)
{
	cr_assert_eq(mkfifo(in_dir("in.yaml"), 0600), 0);
	cr_assert_eq(mkdir(in_dir("model"), 0700), 0);
	cr_assert_eq(mkfifo(in_dir("model/config.json"), 0600), 0);
	char program[1200];
	snprintf(program, sizeof(program), "%s/programs/example.json", env("REMORA_TEST_DATA"));
	const char *const cases[][8] = {
		{"simulate", "in.yaml", NULL},
		{"search", "in.yaml", NULL},
		{"run-program", "in.yaml", NULL},
		{"describe", "model/config.json", NULL},
		{"exec", program, "--replay", "in.yaml", NULL},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		run_result r = run(NULL, cases[i]);
		cr_assert_eq(r.exit_code, 1, "remora %s exited %d: %s", cases[i][0], r.exit_code, r.err);
		cr_assert(strstr(r.err, "not a regular file (a FIFO)"), "remora %s said: %s", cases[i][0], r.err);
		run_free(&r);
	}
}

/* ---- search --plot ------------------------------------------------------------------------- */

static bool gnuplot_on_path(void)
{
	const char *path = getenv("PATH");
	char buf[4096], p[4200];
	snprintf(buf, sizeof(buf), "%s", path ? path : "");
	for (char *save = NULL, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		snprintf(p, sizeof(p), "%s/gnuplot", d);
		if (access(p, X_OK) == 0)
			return true;
	}
	return false;
}

/* The folder name closes the old `cd '%s'` quote and runs $(touch x): nothing may run. */
Test(files, plot_folder_with_a_quote_runs_no_command, .timeout = 60)
{
	const char *plot = "p'$(touch x)'q\"`touch y`";
	run_result r = run(NULL, (const char *const[]){"search", seed(), QUICK, "--plot", plot, NULL});
	struct stat st;
	cr_assert_neq(stat(in_dir("x"), &st), 0, "the folder's name ran `touch x`");
	cr_assert_neq(stat(in_dir("y"), &st), 0, "the folder's name ran `touch y`");
	cr_assert_eq(r.exit_code, 0, "%s", r.err);
	char r_err[4096];
	snprintf(r_err, sizeof(r_err), "%s", r.err ? r.err : "");
	run_free(&r);
	char folder[1200];
	snprintf(folder, sizeof(folder), "%s/%s", dir, plot);
	static const char *const data[] = {"candidates.dat", "pareto.dat", "pareto-ideal.dat", "winner-memory.dat",
					   "plots.gp", NULL};
	char p[1300];
	for (const char *const *d = data; *d; d++) {
		snprintf(p, sizeof(p), "%s/%s", folder, *d);
		cr_assert_eq(stat(p, &st), 0, "%s missing", p);
		cr_assert_gt(st.st_size, 20);
	}
	if (gnuplot_on_path()) {
		/* the plots were drawn in that folder */
		snprintf(p, sizeof(p), "%s/pareto.svg", folder);
		size_t len;
		char *svg = slurp(p, &len);
		cr_assert_not_null(svg, "gnuplot is on PATH but drew no %s", p);
		cr_assert(strstr(svg, "<svg"), "%s is not an SVG", p);
		free(svg);
		snprintf(p, sizeof(p), "%s/winner-memory.svg", folder);
		cr_assert_eq(stat(p, &st), 0, "%s missing", p);
		/* and as PNG, where this gnuplot has pngcairo (else a warning said so) */
		snprintf(p, sizeof(p), "%s/pareto.png", folder);
		bool png = stat(p, &st) == 0;
		if (png) {
			snprintf(p, sizeof(p), "%s/winner-memory.png", folder);
			cr_assert_eq(stat(p, &st), 0, "%s missing", p);
		} else {
			cr_assert(strstr(r_err, "no pngcairo terminal"), "no PNG and no warning: %s", r_err);
		}
		cr_assert_eq(others(folder, png ? (const char *const[]){"candidates.dat", "pareto.dat", "pareto-ideal.dat",
								      "winner-memory.dat", "plots.gp", "pareto.svg",
								      "winner-memory.svg", "pareto.png",
								      "winner-memory.png", NULL}
						: (const char *const[]){"candidates.dat", "pareto.dat", "pareto-ideal.dat",
									"winner-memory.dat", "plots.gp", "pareto.svg",
									"winner-memory.svg", NULL}),
			     0);
	} else {
		cr_log_warn("gnuplot is not installed: checked only that nothing ran");
	}
	cr_assert_eq(others(dir, (const char *const[]){plot, NULL}), 0);
}

/* Without gnuplot on PATH the data is written and a warning says so; nothing else runs. */
Test(files, plot_without_gnuplot_warns_and_keeps_the_data, .timeout = 60)
{
	const char *saved = getenv("PATH");
	char *keep = saved ? strdup(saved) : NULL;
	setenv("PATH", in_dir("empty-bin"), 1);
	run_result r = run(NULL, (const char *const[]){"search", seed(), QUICK, "--plot", "plots", NULL});
	if (keep) {
		setenv("PATH", keep, 1);
		free(keep);
	}
	cr_assert_eq(r.exit_code, 0, "%s", r.err);
	cr_assert(strstr(r.err, "gnuplot not found on PATH"), "%s", r.err);
	run_free(&r);
	struct stat st;
	cr_assert_eq(stat(in_dir("plots/plots.gp"), &st), 0);
	cr_assert_neq(stat(in_dir("plots/pareto.svg"), &st), 0);
}

/* A plot file that cannot be written: the error names it and its errno, no temporary is left. */
Test(files, plot_write_error_names_the_file_and_errno, .timeout = 60)
{
	cr_assert_eq(mkdir(in_dir("plots"), 0700), 0);
	make_full_device(in_dir("plots/pareto.dat"));
	run_result r = run(NULL, (const char *const[]){"search", seed(), QUICK, "--plot", "plots", NULL});
	cr_assert_eq(r.exit_code, 1, "%s", r.err);
	char want[200];
	snprintf(want, sizeof(want), "plots/pareto.dat: error: write failed: %s", strerror(ENOSPC));
	cr_assert(strstr(r.err, want), "%s", r.err);
	run_free(&r);
	cr_assert_eq(others(in_dir("plots"), (const char *const[]){"candidates.dat", "pareto.dat", NULL}), 0);
}

/* ---- JSON escaping ------------------------------------------------------------------------- */

static json_t *stdout_json(run_result *r)
{
	json_error_t jerr;
	json_t *doc = json_loads(r->out, 0, &jerr);
	cr_assert_not_null(doc, "not JSON (%s): %s", jerr.text, r->out);
	return doc;
}

/* The value of `name = VALUE` in a plots.gp (a line of its own); fails the test when absent. */
static double gp_value(const char *script, const char *name)
{
	char key[64];
	snprintf(key, sizeof(key), "\n%s = ", name);
	const char *at = strstr(script, key);
	cr_assert_not_null(at, "plots.gp has no %s", name);
	return strtod(at + strlen(key), NULL);
}

static double json_num(json_t *o, const char *path)
{
	char buf[200];
	snprintf(buf, sizeof(buf), "%s", path);
	json_t *v = o;
	for (char *save = NULL, *k = strtok_r(buf, ".", &save); k; k = strtok_r(NULL, ".", &save))
		v = json_object_get(v, k);
	cr_assert(json_is_number(v), "no number at %s", path);
	return json_number_value(v);
}

/*
 * `search --plot`: plots.gp carries the figures it draws, and they are the search's own: the
 * winner and the scenario as written at their tokens/s per GPU and peak GiB (search --json), the
 * HBM, usable, BFC pool and XLA limit lines and the first backward op of the winner (simulate
 * --json of the winner's policy and micro-batch: the same program); the winner heads its
 * runtime's front; candidates.dat names each row's runtime.
 */
Test(files, plot_carries_the_winner_the_scenario_and_the_memory_lines, .timeout = 60)
{
	run_result r = run(NULL, (const char *const[]){"search", seed(), QUICK, "--json", "--plot", "plots", NULL});
	cr_assert_eq(r.exit_code, 0, "%s", r.err);
	json_t *doc = stdout_json(&r);
	run_free(&r);
	json_t *best = json_object_get(doc, "best");
	const char *policy = json_string_value(json_object_get(best, "policy"));
	cr_assert_not_null(policy);
	cr_assert_str_eq(json_string_value(json_object_get(best, "flags_variant_name")), "as given");
	char pol[600], mb[64];
	snprintf(pol, sizeof(pol), "remat.policy=%s", policy);
	snprintf(mb, sizeof(mb), "training.micro_batch=%lld", (long long)json_integer_value(json_object_get(best, "micro_batch")));
	/* the search's policy is complete (a names policy carries its names): the scenario's names cleared */
	run_result sim = run(NULL, (const char *const[]){"simulate", seed(), "--set", pol, "--set", mb, "--set", "remat.names=[]",
						       "--set", "remat.offload_names=[]", "--json", NULL});
	cr_assert_eq(sim.exit_code, 0, "%s", sim.err);
	json_t *sd = stdout_json(&sim);
	run_free(&sim);
	/* the same program: simulate's figures are the winner's row */
	double tok = json_num(best, "tokens_per_s_per_gpu");
	cr_assert_float_eq(json_num(sd, "tokens_per_s_per_gpu"), tok, 1e-6 * tok);

	size_t len;
	char *gp = slurp(in_dir("plots/plots.gp"), &len);
	cr_assert_not_null(gp);
	const double gib = 1024.0 * 1024.0 * 1024.0;
	/* printed to 3 decimals (tokens/s) and 4 (GiB): half a unit of the last digit */
	cr_assert_float_eq(gp_value(gp, "winner_tok"), tok, 5e-4);
	cr_assert_float_eq(gp_value(gp, "winner_gib"), json_num(best, "peak_memory_bytes") / gib, 5e-5);
	cr_assert_float_eq(gp_value(gp, "as_written_tok"), json_num(doc, "as_written.tokens_per_s_per_gpu"), 5e-4);
	cr_assert_float_eq(gp_value(gp, "as_written_gib"), json_num(doc, "as_written.peak_memory_bytes") / gib, 5e-5);
	cr_assert_float_eq(gp_value(gp, "hbm_gib"), json_num(sd, "memory_budget.hbm_bytes") / gib, 5e-5);
	cr_assert_float_eq(gp_value(gp, "usable_gib"), json_num(sd, "memory_budget.usable_bytes") / gib, 5e-5);
	/* the seed reports JAX's allocator: the pool XLA starts from is what a candidate fits in */
	cr_assert_float_eq(gp_value(gp, "bfc_pool_gib"), json_num(sd, "schedule.memory_base_bytes") / gib, 5e-5);
	cr_assert_float_eq(gp_value(gp, "fit_gib"), gp_value(gp, "bfc_pool_gib"), 1e-9);
	cr_assert_float_eq(gp_value(gp, "xla_limit_gib"), json_num(sd, "schedule.memory_limit_bytes") / gib, 5e-5);
	cr_assert_float_eq(gp_value(gp, "tracked_peak_gib"), json_num(sd, "schedule.tracked_peak_bytes") / gib, 5e-5);
	double bwd = gp_value(gp, "backward_ms"), step_ms = json_num(sd, "step_time_s") * 1e3;
	cr_assert(bwd > 0 && bwd < step_ms, "the backward starts at %g ms of a %g ms step", bwd, step_ms);
	/* the marks, their labels, the lines and the PNG terminal */
	char want[300];
	snprintf(want, sizeof(want), "set label 10 \"best plan: %s, mb %lld, flags as given\\n%.0f tok/s/GPU",
		 json_string_value(json_object_get(best, "label")), (long long)json_integer_value(json_object_get(best, "micro_batch")),
		 tok);
	cr_assert_not_null(strstr(gp, want), "no %s in:\n%s", want, gp);
	cr_assert_not_null(strstr(gp, "set label 11 \"the scenario as written: mb 1, flags as given\\n"), "%s", gp);
	cr_assert_not_null(strstr(gp, "title 'best plan'"));
	cr_assert_not_null(strstr(gp, "title 'the scenario as written'"));
	cr_assert_not_null(strstr(gp, "xla_limit_gib with lines"));
	cr_assert_not_null(strstr(gp, "bfc_pool_gib with lines"));
	cr_assert_not_null(strstr(gp, "hbm_gib with lines"));
	cr_assert_not_null(strstr(gp, "set arrow 1 from backward_ms"));
	cr_assert_not_null(strstr(gp, "set terminal pngcairo"));
	free(gp);
	/* the winner heads its front (fastest first) */
	char *front = slurp(in_dir("plots/pareto.dat"), &len);
	cr_assert_not_null(front);
	const char *row = strchr(front, '\n');
	cr_assert_not_null(row);
	cr_assert_float_eq(strtod(row + 1, NULL), tok, 5e-4);
	free(front);
	/* each candidate's runtime: the scenario's (xla) and the ideal bound */
	char *all = slurp(in_dir("plots/candidates.dat"), &len);
	cr_assert_not_null(all);
	cr_assert_not_null(strstr(all, " xla\n"));
	cr_assert_not_null(strstr(all, " ideal\n"));
	free(all);
	json_decref(sd);
	json_decref(doc);
}

static void copy_file(const char *from, const char *to)
{
	size_t len;
	char *text = slurp(from, &len);
	cr_assert_not_null(text, "%s", from);
	FILE *f = fopen(to, "wb");
	cr_assert_not_null(f, "%s", to);
	fwrite(text, 1, len, f);
	fclose(f);
	free(text);
}

Test(files, describe_json_of_a_model_whose_name_has_a_quote_and_backslash)
{
	char cfg[1200];
	snprintf(cfg, sizeof(cfg), "%s/configs/gpt2-minimal.json", env("REMORA_TEST_DATA"));
	copy_file(cfg, in_dir("q\"b\\s.json"));
	run_result r = run(NULL, (const char *const[]){"describe", "q\"b\\s.json", "--json", NULL});
	cr_assert_eq(r.exit_code, 0, "%s", r.err);
	json_t *doc = stdout_json(&r);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(doc, "model"), "name")), "q\"b\\s");
	json_decref(doc);
	run_free(&r);
	/* a name that is not UTF-8 keeps its member (it vanished: jansson refuses such strings) */
	copy_file(cfg, in_dir("x\xff.json"));
	r = run(NULL, (const char *const[]){"describe", "x\xff.json", "--json", NULL});
	cr_assert_eq(r.exit_code, 0, "%s", r.err);
	doc = stdout_json(&r);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(doc, "model"), "name")), "x\xEF\xBF\xBD");
	json_decref(doc);
	run_free(&r);
}

Test(files, result_and_trace_json_of_a_program_whose_name_needs_escaping)
{
	char src[1200];
	snprintf(src, sizeof(src), "%s/programs/example.json", env("REMORA_TEST_DATA"));
	json_error_t jerr;
	json_t *prog = json_load_file(src, 0, &jerr);
	cr_assert_not_null(prog, "%s", jerr.text);
	const char *name = "q\"uote \\back\\slash \x01 \t";
	json_object_set_new(prog, "name", json_string(name));
	cr_assert_eq(json_dump_file(prog, in_dir("p.json"), JSON_INDENT(1)), 0);
	json_decref(prog);
	run_result r = run(NULL, (const char *const[]){"run-program", "p.json", "--json", "--trace", "t.json", NULL});
	cr_assert_eq(r.exit_code, 0, "%s", r.err);
	json_t *doc = stdout_json(&r);
	cr_assert_str_eq(json_string_value(json_object_get(doc, "program")), name);
	cr_assert_str_eq(json_string_value(json_object_get(doc, "schema")), "remora.result/1");
	json_decref(doc);
	run_free(&r);
	json_t *tr = json_load_file(in_dir("t.json"), 0, &jerr);
	cr_assert_not_null(tr, "the trace is not JSON: %s", jerr.text);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(tr, "otherData"), "program")), name);
	json_decref(tr);
}

/* An output onto one of the command's own inputs (directly or through a link) is a usage error
 * and the input is left as it was: a scenario, a program, a sweep database. */
Test(files, outputs_never_replace_the_commands_inputs)
{
	/* in_dir's buffers rotate (run uses two per call): keep our own copies */
	char scen[1200], link[1200], prog[1200], db[1200];
	snprintf(scen, sizeof(scen), "%s", in_dir("s.yaml"));
	snprintf(link, sizeof(link), "%s", in_dir("link.yaml"));
	snprintf(prog, sizeof(prog), "%s", in_dir("p.json"));
	snprintf(db, sizeof(db), "%s", in_dir("sweep.db"));
	size_t n0 = 0;
	char *orig = slurp(seed(), &n0);
	FILE *f = fopen(scen, "wb");
	cr_assert_not_null(f);
	fwrite(orig, 1, n0, f);
	fclose(f);
	cr_assert_eq(symlink(scen, link), 0);
	const char *sched[] = {"schedule", scen, "-o", prog, NULL};
	run_result r = run(NULL, sched);
	cr_assert_eq(r.exit_code, 0, "%s", r.err);
	run_free(&r);
	const char *const *cases[] = {
		(const char *[]){"simulate", scen, "--trace", scen, NULL},
		(const char *[]){"simulate", scen, "--trace", link, NULL},
		(const char *[]){"schedule", scen, "-o", link, NULL},
		(const char *[]){"run-program", prog, "--trace", prog, NULL},
		(const char *[]){"search", scen, "--set", "search.names=[]", "--set", "search.policies=[dots_saveable]",
				 "--set", "search.micro_batches=[1]", "--db", db, "--trace", db, NULL},
	};
	size_t np0 = 0;
	char *prog0 = slurp(prog, &np0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		r = run(NULL, cases[i]);
		cr_assert_eq(r.exit_code, 2, "case %zu: exit %d: %s", i, r.exit_code, r.err);
		cr_assert(strstr(r.err, "is also this command's input"), "case %zu: %s", i, r.err);
		run_free(&r);
	}
	size_t n1 = 0, np1 = 0;
	char *now = slurp(scen, &n1), *prog1 = slurp(prog, &np1);
	cr_assert(n1 == n0 && memcmp(now, orig, n0) == 0, "the scenario is unchanged");
	cr_assert(np1 == np0 && memcmp(prog1, prog0, np0) == 0, "the program is unchanged");
	free(orig);
	free(now);
	free(prog0);
	free(prog1);
}

/* Input quoted in an error cannot drive the terminal or fake a log line: control characters are
 * shown as \xNN. */
Test(files, control_characters_in_messages_are_escaped)
{
	char cfg[1200];
	snprintf(cfg, sizeof(cfg), "%s", in_dir("esc.json"));
	FILE *f = fopen(cfg, "wb");
	cr_assert_not_null(f);
	fputs("{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 32000, \"hidden_size\": 4096,"
	      " \"intermediate_size\": 11008, \"num_hidden_layers\": 32, \"num_attention_heads\": 32,"
	      " \"hidden_act\": \"\\u001b[31mred\\nremora: error: fake\"}",
	      f);
	fclose(f);
	const char *args[] = {"describe", cfg, NULL};
	run_result r = run(NULL, args);
	cr_assert_eq(r.exit_code, 1, "%s", r.err);
	cr_assert_null(strchr(r.err, '\x1b'), "raw ESC in: %s", r.err);
	cr_assert(strstr(r.err, "\\x1b[31mred\\x0aremora: error: fake"), "%s", r.err);
	/* one message, one line */
	cr_assert_eq(strchr(r.err, '\n'), r.err + strlen(r.err) - 1, "%s", r.err);
	run_free(&r);
}
