/* The `remora` command: dispatches to one subcommand per file in cli/. */
/* realpath (XSI) */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "config.h"

static const cli_command commands[] = {
	{"collective", "one NCCL collective's time, bandwidth, algorithm and protocol; --table vs measurements",
	 cli_cmd_collective},
	{"describe", "per-op table of one training step of a model (FLOPs, bytes, checkpoint names)",
	 cli_cmd_describe},
	{"hw", "hardware profiles: list, show NAME", cli_cmd_hw},
	{"search", "find the fastest remat policy, flags and micro-batch that fit (the main job)", cli_cmd_search},
	{"merge", "merge sweep databases (shards of search or plan --shard) into one", cli_cmd_merge},
	{"plan", "capacity planning: how many GPUs, which GPU, which layout, how long and how much", cli_cmd_plan},
	{"schedule", "write the schedule program XLA would run for a scenario", cli_cmd_schedule},
	{"simulate", "simulate a scenario's training step: time, memory, collectives and why", cli_cmd_simulate},
	{"calib", "calibration database: import measurements, fit, show", cli_cmd_calib},
	{"run-program", "simulate a schedule program: step time, memory, overlap, trace",
	 cli_cmd_run_program},
	{"bench", "benchmarks: engine (events per second), search and plan (candidates per second)", cli_cmd_bench},
	{"exec", "run a schedule program on GPUs and compare with the prediction; --dry-run plans it", cli_cmd_exec},
	{"trace", "profiler traces (PyTorch/Kineto, JAX): import, report the step, overlap and exposed comm",
	 cli_cmd_trace},
	{"compare", "a scenario's predicted step next to a profiler trace: per class, per collective, the step",
	 cli_cmd_compare},
	{"validate", "predicted vs measured on the shipped end-to-end cases (data/validation)", cli_cmd_validate},
};

static void usage(FILE *out)
{
	fprintf(out, "usage: remora [-v|-vv|-q] COMMAND [ARGS...]\n\n"
		     "remora predicts the step time and memory of transformer training on H100/H200 "
		     "GPUs.\n\ncommands:\n");
	for (size_t i = 0; i < RM_ARRAY_SIZE(commands); i++)
		fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "\noptions:\n"
		     "  -v, --verbose   on stderr, the inputs a run resolved: simulate logs the hardware\n"
		     "                  profile's figures and their sources, the memory budget's terms,\n"
		     "                  XLA's memory limit and NCCL's choice per collective shape\n"
		     "  -vv             also debug lines: search and plan print a line per candidate\n"
		     "                  (instead of the progress line); simulate adds nothing more\n"
		     "  -q, --quiet     errors only\n"
		     "  -V, --version   print the version\n"
		     "  -h, --help      this help; `remora COMMAND --help` for a command\n"
		     "-v, -vv, -q, --verbose and --quiet may also follow COMMAND (`remora simulate S -v`).\n");
}

int cli_fail(const rm_error *err)
{
	rm_log_error_record(err);
	return CLI_EXIT_FAIL;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "remora: error: %s\n", msg);
	fprintf(stderr, "remora: see `remora %s%s--help`\n", cmd ? cmd : "", cmd ? " " : "");
	return CLI_EXIT_USAGE;
}

int cli_option_error(const char *cmd, int argc, char **argv, const char *shortopts, const struct option *longopts)
{
	/* the argument getopt_long stepped past: "--name", "--name=value", "-x" or a cluster "-bx" */
	const char *arg = optind > 0 && optind <= argc ? argv[optind - 1] : NULL;
	if (arg && strncmp(arg, "--", 2) == 0) {
		for (const struct option *p = longopts; optopt != 0 && p && p->name; p++) {
			if (p->val != optopt)
				continue;
			if (p->has_arg == required_argument)
				return cli_usage_error(cmd, "option --%s needs a value", p->name);
			if (p->has_arg == no_argument)
				return cli_usage_error(cmd, "option --%s takes no value", p->name);
			break;
		}
		/* unknown, or an ambiguous abbreviation */
		return cli_usage_error(cmd, "unrecognised option '%s'", arg);
	}
	const char *known = optopt > 0 && optopt < 256 && optopt != ':' ? strchr(shortopts, optopt) : NULL;
	if (known && known[1] == ':')
		return cli_usage_error(cmd, "option -%c needs a value", optopt);
	if (optopt > 0 && optopt < 256)
		return cli_usage_error(cmd, "unrecognised option '-%c'", optopt);
	return cli_usage_error(cmd, "unrecognised option");
}

/* the level main's own options set, before any the subcommand takes (cli_getopt) */
static rm_log_level global_level = RM_LOG_WARN;

rm_log_level cli_global_log_level(void)
{
	return global_level;
}

int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts)
{
	/* the command's letters and names, then the global ones it does not have itself */
	static char opts[160];
	static struct option lo[128];
	bool has_v = strchr(shortopts, 'v') != NULL, has_q = strchr(shortopts, 'q') != NULL;
	bool has_verbose = false, has_quiet = false;
	size_t n = 0;
	for (const struct option *p = longopts; p && p->name && n + 3 < RM_ARRAY_SIZE(lo); p++) {
		has_verbose |= strcmp(p->name, "verbose") == 0 || p->val == 'v';
		has_quiet |= strcmp(p->name, "quiet") == 0 || p->val == 'q';
		lo[n++] = *p;
	}
	if (!has_verbose && !has_v)
		lo[n++] = (struct option){"verbose", no_argument, NULL, 'v'};
	if (!has_quiet && !has_q)
		lo[n++] = (struct option){"quiet", no_argument, NULL, 'q'};
	lo[n] = (struct option){0, 0, 0, 0};
	snprintf(opts, sizeof(opts), "%s%s%s", shortopts, has_v || has_verbose ? "" : "v",
		 has_q || has_quiet ? "" : "q");
	for (;;) {
		int c = getopt_long(argc, argv, opts, lo, NULL);
		if (c == 'v' && !has_v && !has_verbose) {
			rm_log_level l = rm_log_get_level();
			rm_log_set_level(l < RM_LOG_DEBUG ? (rm_log_level)(l + 1) : RM_LOG_DEBUG);
		} else if (c == 'q' && !has_q && !has_quiet)
			rm_log_set_level(RM_LOG_ERROR);
		else
			return c;
	}
}

const char *cli_jobs_hint(int argc, char **argv, int from)
{
	bool number = false, j = false;
	for (int i = from; i < argc; i++)
		number |= argv[i][0] && argv[i][strspn(argv[i], "0123456789")] == '\0';
	for (int i = 1; i < from && i < argc; i++) {
		const char *a = argv[i];
		j |= a[0] == '-' && a[1] && a[1] != '-' && a[strlen(a) - 1] == 'j';
	}
	return number && j ? " (-j is --json; --jobs N or -J N sets the jobs)" : "";
}

/* The absolute path of path's folder (links resolved) joined with its last component, for paths
 * that may not exist yet; false when its folder does not exist. */
static bool folder_real(const char *path, char *out, size_t size)
{
	char copy[PATH_MAX];
	snprintf(copy, sizeof(copy), "%s", path);
	char *slash = strrchr(copy, '/');
	const char *base = slash ? slash + 1 : copy;
	char dirbuf[PATH_MAX];
	if (slash == copy)
		snprintf(dirbuf, sizeof(dirbuf), "/");
	else if (slash) {
		*slash = '\0';
		snprintf(dirbuf, sizeof(dirbuf), "%s", copy);
	} else
		snprintf(dirbuf, sizeof(dirbuf), ".");
	char real[PATH_MAX];
	if (!realpath(dirbuf, real))
		return false;
	snprintf(out, size, "%s/%s", real, base);
	return true;
}

/* Whether a and b name one file: the same device and inode when both exist, else the same path
 * once their folders are resolved (an output not written yet onto an input not made yet). */
static bool same_file(const char *a, const char *b)
{
	struct stat sa, sb;
	bool ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
	if (ea && eb)
		return S_ISREG(sa.st_mode) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
	char ra[PATH_MAX], rb[PATH_MAX];
	return !ea && !eb && folder_real(a, ra, sizeof(ra)) && folder_real(b, rb, sizeof(rb)) && strcmp(ra, rb) == 0;
}

int cli_check_outputs(const char *cmd, const char *const *outputs, int n_out, const char *const *inputs, int n_in)
{
	for (int o = 0; o < n_out; o++)
		for (int i = 0; outputs[o] && i < n_in; i++)
			if (inputs[i] && same_file(outputs[o], inputs[i]))
				return cli_usage_error(cmd, "'%s' is also this command's input '%s': writing it would "
							    "replace the input; give another output path",
						       outputs[o], inputs[i]);
	return CLI_EXIT_OK;
}

int cli_plot_dir_check(const char *cmd, const char *dir)
{
	struct stat st;
	if (!dir[0])
		return cli_usage_error(cmd, "--plot: an empty folder name");
	if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode))
		return cli_usage_error(cmd, "--plot %s: not a folder", dir);
	return CLI_EXIT_OK;
}

int cli_plot_dir_create(const char *dir)
{
	if (mkdir(dir, 0777) == 0 || errno == EEXIST)
		return CLI_EXIT_OK;
	rm_error err;
	rm_error_clear(&err);
	rm_error_set(&err, RM_IO, dir, 0, 0, "cannot create the plot folder: %s", strerror(errno));
	return cli_fail(&err);
}

bool cli_parse_positive(const char *cmd, const char *option, const char *text, int64_t *out)
{
	if (rm_parse_positive_int(text, out))
		return true;
	cli_usage_error(cmd, "%s expects a positive integer, got '%s'", option, text);
	return false;
}

int cli_print_json(json_t *doc)
{
	if (!doc) {
		fprintf(stderr, "remora: error: could not build the JSON output\n");
		return CLI_EXIT_FAIL;
	}
	int rc = json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
	json_decref(doc);
	if (rc != 0 || fputc('\n', stdout) == EOF || fflush(stdout) != 0) {
		fprintf(stderr, "remora: error: writing JSON to stdout failed\n");
		return CLI_EXIT_FAIL;
	}
	return CLI_EXIT_OK;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"verbose", no_argument, NULL, 'v'},
		{"quiet", no_argument, NULL, 'q'},
		{"version", no_argument, NULL, 'V'},
		{"help", no_argument, NULL, 'h'},
		{0, 0, 0, 0},
	};
	int verbosity = RM_LOG_WARN;
	int c;
	/* "+" stops at the first non-option: the subcommand parses the rest. */
	while ((c = getopt_long(argc, argv, "+vqVh", longopts, NULL)) != -1) {
		switch (c) {
		case 'v':
			verbosity++;
			break;
		case 'q':
			verbosity = RM_LOG_ERROR;
			break;
		case 'V':
			printf("remora %s\n", REMORA_VERSION);
			return CLI_EXIT_OK;
		case 'h':
			usage(stdout);
			return CLI_EXIT_OK;
		default:
			usage(stderr);
			return CLI_EXIT_USAGE;
		}
	}
	if (verbosity > RM_LOG_DEBUG)
		verbosity = RM_LOG_DEBUG;
	rm_log_set_level((rm_log_level)verbosity);
	global_level = (rm_log_level)verbosity;
	if (optind >= argc) {
		usage(stderr);
		return CLI_EXIT_USAGE;
	}
	const char *name = argv[optind];
	for (size_t i = 0; i < RM_ARRAY_SIZE(commands); i++) {
		if (strcmp(name, commands[i].name) == 0) {
			int sub_argc = argc - optind;
			char **sub_argv = argv + optind;
			optind = 0; /* glibc: full reinitialisation for the subcommand's getopt_long */
			opterr = 0; /* the subcommand reports a bad option itself (cli_option_error) */
			int rc = commands[i].run(sub_argc, sub_argv);
			/* text written to a full disk or a closed pipe is an error, not a success */
			if (fflush(stdout) != 0 || ferror(stdout)) {
				/* a command that failed has said why (cli_print_json: writing JSON failed) */
				if (rc == CLI_EXIT_OK)
					fprintf(stderr, "remora: error: writing the output failed\n");
				return rc == CLI_EXIT_OK ? CLI_EXIT_FAIL : rc;
			}
			return rc;
		}
	}
	fprintf(stderr, "remora: error: unknown command '%s'\n", name);
	usage(stderr);
	return CLI_EXIT_USAGE;
}
