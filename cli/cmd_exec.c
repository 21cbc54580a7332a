/*
 * `remora exec PROGRAM.json [--dry-run] [--hardware NAME] [--world N] [--iterations N]
 *  [--warmup N] [--trace OUT] [--compare] [--calib DB] [--queues N] [--json] [--tensors]
 *  [--replay FILE] [--attention fused|unfused] [--timeout S] [--init-timeout S] [--graph]`.
 * The plan and its checks come from remora/exec.h (always built); the run from the CUDA runner
 * (exec/runner.h), linked only into remora-gpu (REMORA_EXEC_RUNNER), which `remora` execs.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "remora/calib.h"
#include "remora/exec.h"
#include "remora/file.h"
#include "remora/hw.h"
#include "remora/program.h"

#if REMORA_EXEC_RUNNER
#include "exec/runner.h"
#endif

static void exec_usage(FILE *out)
{
	fprintf(out,
		"usage: remora exec PROGRAM.json [--dry-run] [--hardware NAME] [--world N]\n"
		"                   [--iterations N] [--warmup N] [--trace OUT] [--compare] [--calib DB]\n"
		"                   [--queues N] [--json] [--tensors] [--replay FILE] [--timeout S]\n"
		"                   [--attention fused|unfused] [--init-timeout S] [--graph]\n\n"
		"Runs a schedule program (written by `remora schedule` or `remora search`) on this\n"
		"machine's GPU(s): tensors from one pool sized by the program's memory plan, its streams\n"
		"with their priorities, every op on its stream in program order with its events. One\n"
		"process per GPU under mpirun, or a single GPU. See docs/exec.md.\n\n"
		"options:\n"
		"  -n, --dry-run        validate and print the plan (streams, memory, op counts); no GPU\n"
		"  -H, --hardware NAME  profile for the checks and --compare: NAME or CALIB.db:NAME\n"
		"                       (default h100-sxm)\n"
		"  -w, --world N        ranks of the launch for --dry-run (default: the largest group)\n"
		"  -i, --iterations N   timed iterations (default 10)\n"
		"  -W, --warmup N       untimed iterations first (default 3)\n"
		"  -t, --trace OUT      write the measured iteration as a Chrome/Perfetto trace\n"
		"  -c, --compare        predicted vs measured per op kind and step; stores the\n"
		"                       measurement in the calibration database (--calib, or the\n"
		"                       database of --hardware DB:NAME)\n"
		"  -C, --calib DB       calibration database for --compare's rows\n"
		"  -Q, --queues N       hardware queues of the prediction (default 8)\n"
		"  -j, --json           machine-readable output\n"
		"  -T, --tensors        with --dry-run --json: every tensor's placement\n"
		"  -R, --replay FILE    report a measurement saved with --json (from a GPU machine)\n"
		"                       instead of running: --trace, --compare work without a GPU\n"
		"  -O, --timeout S      seconds one iteration may wait on the GPU and its peers before\n"
		"                       the NCCL communicator is aborted (default REMORA_NCCL_TIMEOUT_S,\n"
		"                       else 120)\n"
		"  -I, --init-timeout S seconds the NCCL communicator's non-blocking set-up may take\n"
		"                       before it is aborted (default REMORA_NCCL_INIT_TIMEOUT_S, else\n"
		"                       the --timeout default)\n"
		"  -G, --graph          also capture one iteration as a CUDA graph and replay it: the\n"
		"                       step of back-to-back replays and per-op times from events\n"
		"                       captured in the graph, beside the eager (launched) ones\n"
		"  -a, --attention M    fused (default): attention the model prices fused runs cuDNN's\n"
		"                       flash SDPA (unfused where cuDNN refuses it); unfused: every\n"
		"                       attention op runs as cuBLASLt GEMMs + softmax kernels\n"
		"  -h, --help           this help\n");
}

typedef struct exec_opts {
	const char *path, *hw_name, *trace, *calib, *replay;
	bool dry_run, compare, json, tensors, graph;
	rm_exec_attention_mode attention;
	int64_t world, iterations, warmup, queues, timeout_s, init_timeout_s;
} exec_opts;

/* Stores the measurement's calibration rows in db (through the JSONL importer). */
static bool store_rows(const exec_opts *o, const rm_program *prog, const rm_exec_measurement *m, int *rows,
		       rm_error *err)
{
	char tmp[] = "/tmp/remora-exec-XXXXXX";
	int fd = mkstemp(tmp);
	if (fd < 0)
		return rm_error_set(err, RM_IO, tmp, 0, 0, "cannot create a temporary file: %s", strerror(errno)),
		       false;
	FILE *f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		unlink(tmp);
		return rm_error_set(err, RM_IO, tmp, 0, 0, "cannot open a temporary file"), false;
	}
	char host[96] = "";
	gethostname(host, sizeof(host) - 1);
	*rows = rm_exec_write_calib_rows(prog, m, host, f, err);
	bool ok = fclose(f) == 0 && *rows >= 0;
	if (ok && *rows > 0) {
		rm_calib_db *db = rm_calib_db_open(o->calib, true, err);
		rm_calib_import_stats st;
		ok = db && rm_calib_import_jsonl(db, tmp, &st, err) == RM_OK;
		rm_calib_db_close(db);
	}
	unlink(tmp);
	return ok;
}

typedef struct trace_args {
	const rm_program *prog;
	const rm_exec_measurement *m;
} trace_args;

static bool trace_fn(FILE *out, void *user, rm_error *err)
{
	const trace_args *a = user;
	return rm_exec_write_trace(a->prog, a->m, out, err);
}

/* Trace, comparison, calibration rows and the report of a measurement (rank 0). */
static int report(const exec_opts *o, const rm_program *prog, const rm_exec_plan *plan, const rm_hw_profile *hw,
		  const rm_exec_measurement *m)
{
	rm_error err;
	rm_error_clear(&err);
	int rc = CLI_EXIT_OK;
	json_t *cmp = NULL;
	/* atomically onto a regular file, straight through to a device or FIFO (remora/file.h) */
	if (o->trace && !rm_file_write(o->trace, trace_fn, &(trace_args){prog, m}, &err)) {
		rc = cli_fail(&err);
		goto out;
	}
	if (o->compare) {
		cmp = rm_exec_compare(prog, plan, hw, (int)o->queues, m, &err);
		if (!cmp) {
			rc = cli_fail(&err);
			goto out;
		}
		if (o->calib) {
			int rows = 0;
			if (!store_rows(o, prog, m, &rows, &err)) {
				rc = cli_fail(&err);
				goto out;
			}
			json_object_set_new(cmp, "calibration_rows", json_integer(rows));
			if (!o->json)
				fprintf(stderr, "remora: stored %d measurements (ops that ran alone) in %s\n", rows,
					o->calib);
		}
	}
	if (o->json) {
		json_t *doc = json_object();
		json_object_set_new(doc, "measurement", rm_exec_measurement_json(prog, m));
		if (cmp)
			json_object_set(doc, "compare", cmp);
		rc = cli_print_json(doc);
	} else {
		char b[32];
		printf("device         %s, %d rank%s, attention: %s\n", m->device, m->world, m->world == 1 ? "" : "s",
		       m->attention_kernel);
		printf("step time      %.3f ms (median of %d iterations)\n", m->step_s * 1e3, m->iterations);
		if (m->step_op_events_s > 0)
			printf("               %.3f ms with per-op timing events\n", m->step_op_events_s * 1e3);
		if (m->graph_step_s > 0) {
			printf("graph step     %.3f ms (median of back-to-back replays of the captured iteration; "
			       "%.1f us host per launch)\n",
			       m->graph_step_s * 1e3, m->graph_launch_host_s * 1e6);
			if (m->graph_step_op_events_s > 0)
				printf("               %.3f ms with per-op timing events in the graph\n",
				       m->graph_step_op_events_s * 1e3);
			if (!m->graph_op_mean_s)
				printf("               (no per-op times from the graph)\n");
		}
		printf("device memory  %s allocated\n", rm_format_bytes(m->device_bytes, b, sizeof(b)));
		if (cmp)
			rm_exec_compare_print(cmp, stdout);
	}
out:
	json_decref(cmp);
	return rc;
}

#if REMORA_EXEC_RUNNER
static int run(const exec_opts *o, const rm_program *prog, const rm_exec_plan *plan, const rm_hw_profile *hw)
{
	rm_error err;
	rm_error_clear(&err);
	rm_exec_run_opts ro = {.hw = hw, .iterations = (int)o->iterations, .warmup = (int)o->warmup,
			       .timeout_s = (double)o->timeout_s, .init_timeout_s = (double)o->init_timeout_s,
			       .graph = o->graph};
	rm_exec_measurement m;
	int rank = 0;
	memset(&m, 0, sizeof(m));
	if (rm_exec_run(plan, &ro, &m, &rank, &err) != RM_OK) {
		rm_exec_measurement_finish(&m);
		return cli_fail(&err);
	}
	int rc = rank == 0 ? report(o, prog, plan, hw, &m) : CLI_EXIT_OK;
	rm_exec_measurement_finish(&m);
	return rc;
}
#endif

/* The database named by a "PATH:NAME" hardware spec, or NULL. */
static char *spec_db(const char *spec)
{
	const char *colon = strrchr(spec, ':');
	if (!colon || colon == spec)
		return NULL;
	size_t n = (size_t)(colon - spec);
	char *db = rm_xmalloc(n + 1);
	memcpy(db, spec, n);
	db[n] = '\0';
	return db;
}

int cli_cmd_exec(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"dry-run", no_argument, NULL, 'n'},
		{"hardware", required_argument, NULL, 'H'},
		{"world", required_argument, NULL, 'w'},
		{"iterations", required_argument, NULL, 'i'},
		{"warmup", required_argument, NULL, 'W'},
		{"trace", required_argument, NULL, 't'},
		{"compare", no_argument, NULL, 'c'},
		{"calib", required_argument, NULL, 'C'},
		{"queues", required_argument, NULL, 'Q'},
		{"json", no_argument, NULL, 'j'},
		{"tensors", no_argument, NULL, 'T'},
		{"replay", required_argument, NULL, 'R'},
		{"timeout", required_argument, NULL, 'O'},
		{"attention", required_argument, NULL, 'a'},
		{"init-timeout", required_argument, NULL, 'I'},
		{"graph", no_argument, NULL, 'G'},
		{"help", no_argument, NULL, 'h'},
		{0, 0, 0, 0},
	};
	exec_opts o = {.hw_name = "h100-sxm", .iterations = 10, .warmup = 3, .queues = 8};
	int c;
	const char *shortopts = "nH:w:i:W:t:cC:Q:jTR:O:a:I:Gh";
	while ((c = cli_getopt(argc, argv, shortopts, longopts)) != -1) {
		switch (c) {
		case 'n':
			o.dry_run = true;
			break;
		case 'H':
			o.hw_name = optarg;
			break;
		case 'w':
			if (!cli_parse_positive("exec", "--world", optarg, &o.world))
				return CLI_EXIT_USAGE;
			break;
		case 'i':
			if (!cli_parse_positive("exec", "--iterations", optarg, &o.iterations))
				return CLI_EXIT_USAGE;
			break;
		case 'W':
			if (strcmp(optarg, "0") == 0)
				o.warmup = 0;
			else if (!cli_parse_positive("exec", "--warmup", optarg, &o.warmup))
				return CLI_EXIT_USAGE;
			break;
		case 't':
			o.trace = optarg;
			break;
		case 'c':
			o.compare = true;
			break;
		case 'C':
			o.calib = optarg;
			break;
		case 'Q':
			if (!cli_parse_positive("exec", "--queues", optarg, &o.queues))
				return CLI_EXIT_USAGE;
			break;
		case 'j':
			o.json = true;
			break;
		case 'T':
			o.tensors = true;
			break;
		case 'R':
			o.replay = optarg;
			break;
		case 'O':
			if (!cli_parse_positive("exec", "--timeout", optarg, &o.timeout_s))
				return CLI_EXIT_USAGE;
			break;
		case 'I':
			if (!cli_parse_positive("exec", "--init-timeout", optarg, &o.init_timeout_s))
				return CLI_EXIT_USAGE;
			break;
		case 'G':
			o.graph = true;
			break;
		case 'a':
			if (!rm_exec_attention_mode_parse(optarg, &o.attention))
				return cli_usage_error("exec", "--attention: expected fused or unfused, got '%s'", optarg);
			break;
		case 'h':
			exec_usage(stdout);
			return CLI_EXIT_OK;
		default:
			return cli_option_error("exec", argc, argv, shortopts, longopts);
		}
	}
	if (optind >= argc)
		return cli_usage_error("exec", "missing the PROGRAM.json");
	if (optind + 1 != argc)
		return cli_usage_error("exec", "unexpected argument '%s'", argv[optind + 1]);
	if (o.iterations > 100000 || o.warmup > 100000)
		return cli_usage_error("exec", "--iterations and --warmup: at most 100000");
	if (o.world > 65536)
		return cli_usage_error("exec", "--world: at most 65536");
	o.path = argv[optind];
	{
		const char *outs[] = {o.trace};
		const char *ins[] = {o.path, o.replay, o.calib};
		int crc = cli_check_outputs("exec", outs, 1, ins, 3);
		if (crc != CLI_EXIT_OK)
			return crc;
	}

	rm_error err;
	rm_error_clear(&err);
	rm_hw_profile hw;
	if (rm_calib_resolve_hw(o.hw_name, NULL, &hw, NULL, &err) != RM_OK)
		return cli_fail(&err);
	rm_program *prog = rm_program_load(o.path, &err);
	if (!prog)
		return cli_fail(&err);
	int rc = CLI_EXIT_FAIL;
	char *db = NULL;
	rm_exec_plan *plan = rm_exec_plan_create(prog, o.path, o.attention, &err);
	if (!plan) {
		rc = cli_fail(&err);
		goto out_program;
	}
	if (o.dry_run) {
		rm_exec_limits lim = {.hw = &hw, .world = (int)o.world};
		rm_status st = rm_exec_plan_check(plan, &lim, &err);
		if (o.json) {
			json_t *doc = rm_exec_plan_json(plan, o.tensors);
			json_object_set_new(doc, "hardware", json_string(hw.name));
			json_object_set_new(doc, "capacity_bytes", json_integer((json_int_t)hw.hbm_bytes));
			json_object_set_new(doc, "ok", json_boolean(st == RM_OK));
			if (st != RM_OK)
				json_object_set_new(doc, "error", json_string(err.msg));
			rc = cli_print_json(doc);
		} else {
			char b[32];
			rm_exec_plan_print(plan, stdout);
			printf("check          %s on %s (%s)\n", st == RM_OK ? "ok" : "FAILED", hw.name,
			       rm_format_bytes((int64_t)hw.hbm_bytes, b, sizeof(b)));
			rc = CLI_EXIT_OK;
		}
		if (st != RM_OK) {
			snprintf(err.file, sizeof(err.file), "%s", o.path);
			rc = cli_fail(&err);
		}
		goto out_plan;
	}
	if (o.compare && !o.calib)
		o.calib = db = spec_db(o.hw_name);
	if (o.replay) {
		rm_exec_measurement m;
		if (rm_exec_measurement_load(o.replay, prog, &m, &err) != RM_OK) {
			rc = cli_fail(&err);
			goto out_plan;
		}
		rc = report(&o, prog, plan, &hw, &m);
		rm_exec_measurement_finish(&m);
		goto out_plan;
	}
#if REMORA_EXEC_RUNNER
	rc = run(&o, prog, plan, &hw);
#else
	rc = cli_exec_on_gpu(argc, argv); /* returns only when remora-gpu cannot be started */
#endif
out_plan:
	free(db);
	rm_exec_plan_destroy(plan);
out_program:
	rm_program_destroy(prog);
	return rc;
}
