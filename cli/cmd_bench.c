/* `remora bench engine|search|plan [OPTIONS]`. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "remora/plan.h"
#include "remora/search.h"
#include "remora/sim.h"
#include <sys/resource.h>
#include <unistd.h>

static void bench_usage(FILE *out)
{
	fprintf(out, "usage: remora bench engine [--ops N] [--min-time S] [--json]\n"
		     "       remora bench search [--candidates N] [--model NAME] [--json]\n"
		     "       [mpirun -np N] remora bench plan [--model NAME] [--gpus LIST] [--json]\n\n"
		     "engine: the simulation engine on synthetic FSDP-like programs (10^5 and 10^6 ops\n"
		     "unless --ops is given) on one thread: events per second (an event is an op start\n"
		     "or an op end) and nanoseconds per event.\n"
		     "  -n, --ops N          one program of about N ops\n"
		     "  -m, --min-time S     repeat each program for at least S seconds (default 1)\n\n"
		     "search: candidates per second on one thread over the seed scenario's space with\n"
		     "MODEL, N and then 4N candidates, and the peak RSS after each (it must stay flat).\n"
		     "  -c, --candidates N   candidates of the first run (default 500)\n"
		     "  -M, --model NAME     the model (default llama-3-8b)\n\n"
		     "plan: candidates per second of the plan search for MODEL at 1T tokens on H100s, TP\n"
		     "1,2 x PP 1,2, in wall time and per CPU-second; under mpirun each rank sweeps its\n"
		     "shard and rank 0 prints the totals.\n"
		     "  -M, --model NAME     the model (default llama-3-8b)\n"
		     "  -g, --gpus LIST      the GPU counts, one search each (default 8,16)\n\n"
		     "every benchmark:\n"
		     "  -j, --json           machine-readable output (engine: key events_per_s, the slowest)\n"
		     "  -h, --help           this help\n");
}

/*
 * `remora bench search [--candidates N] [--model NAME] [--json]`: candidates per second on one
 * thread over the seed scenario's space (by default with Llama-3-8B, docs/design.md's target model),
 * rows into an in-memory SQLite store as in a real sweep, and the peak RSS after N and 4N
 * candidates (memory must stay flat).
 */
static int bench_search(int64_t n, const char *model, bool json)
{
	rm_error err;
	rm_error_clear(&err);
	char path[1024];
	if (!rm_data_path("scenarios/seed-llama2-7b-fsdp8-h100.yaml", path, sizeof(path), &err))
		return cli_fail(&err);
	rm_scenario sc;
	rm_scenario_init(&sc);
	if (rm_scenario_load(path, &sc, &err) != RM_OK)
		return cli_fail(&err);
	snprintf(sc.model, sizeof(sc.model), "%s", model);
	sc.search_max_candidates = 100000000;
	double rate[2] = {0, 0};
	long rss[2] = {0, 0};
	int64_t extended[2] = {0, 0}, simulated[2] = {0, 0};
	int64_t counts[2] = {n, 4 * n};
	for (int k = 0; k < 2; k++) {
		rm_search *s = rm_search_create(&sc, NULL, &err);
		if (!s)
			return cli_fail(&err);
		int64_t want = counts[k] < rm_search_count(s) ? counts[k] : rm_search_count(s);
		counts[k] = want;
		/* a file store, as in a real sweep: rows leave memory when committed */
		char db[] = "/tmp/remora-bench-XXXXXX";
		int fd = mkstemp(db);
		if (fd >= 0)
			close(fd);
		unlink(db);
		rm_search_options opt = {.db_path = fd >= 0 ? db : NULL, .jobs = 1, .stop_after = want};
		rm_search_progress p;
		if (rm_search_run(s, &opt, &p, &err) != RM_OK) {
			rm_search_destroy(s);
			return cli_fail(&err);
		}
		rate[k] = p.elapsed_s > 0 ? (double)(p.done - p.skipped) / p.elapsed_s : 0;
		extended[k] = p.extended;
		simulated[k] = p.done - p.skipped - p.reused;
		struct rusage ru;
		getrusage(RUSAGE_SELF, &ru);
		rss[k] = ru.ru_maxrss;
		rm_search_destroy(s);
		if (fd >= 0) {
			char side[64];
			unlink(db);
			snprintf(side, sizeof(side), "%s-wal", db);
			unlink(side);
			snprintf(side, sizeof(side), "%s-shm", db);
			unlink(side);
		}
	}
	if (json) {
		json_t *doc = json_object();
		json_object_set_new(doc, "schema", json_string("remora.bench.search/1"));
		json_object_set_new(doc, "model", json_string(model));
		json_object_set_new(doc, "candidates", json_integer(counts[1]));
		json_object_set_new(doc, "candidates_per_s", json_real(rate[1]));
		json_object_set_new(doc, "max_rss_kib_after_n", json_integer(rss[0]));
		json_object_set_new(doc, "max_rss_kib_after_4n", json_integer(rss[1]));
		json_object_set_new(doc, "extended", json_integer(extended[1]));
		json_object_set_new(doc, "simulated", json_integer(simulated[1]));
		return cli_print_json(doc);
	}
	printf("search on %s (seed scenario space), one thread, SQLite file store:\n", model);
	for (int k = 0; k < 2; k++)
		printf("  %lld candidates: %.0f candidates/s; peak RSS %ld KiB; %lld simulated, %lld of the rows "
		       "extended by a period\n",
		       (long long)counts[k], rate[k], rss[k], (long long)simulated[k], (long long)extended[k]);
	return CLI_EXIT_OK;
}

/*
 * `remora bench plan [--model NAME] [--json]`: candidates per second of the plan search (the
 * model at 1T tokens on 8 and 16 H100s, TP 1 or 2 x PP 1 or 2, the runtime's three policies x
 * micro-batches 1, 2, 4, 8), in wall time and per core (per CPU-second of every process). Under
 * mpirun each rank sweeps its shard and rank 0 prints the totals, so the two runs compare directly.
 */
static int bench_plan(const char *model, const int64_t *gpus, int n_gpus, bool json)
{
	rm_plan_request req = rm_plan_request_default();
	snprintf(req.model, sizeof(req.model), "%s", model);
	snprintf(req.hardware[0], sizeof(req.hardware[0]), "h100-sxm");
	req.n_hardware = 1;
	req.tokens = 1e12;
	for (int i = 0; i < n_gpus; i++)
		req.gpus[i] = gpus[i];
	req.n_gpus = n_gpus;
	req.tp[0] = 1;
	req.tp[1] = 2;
	req.n_tp = 2;
	req.pp[0] = 1;
	req.pp[1] = 2;
	req.n_pp = 2;
	cli_sweep sw;
	int rc = cli_sweep_begin("bench", &sw, NULL, 0, 0);
	if (rc != CLI_EXIT_OK) {
		cli_sweep_end(&sw);
		return rc;
	}
	rm_plan_options opt = {.jobs = 1, .shard_index = sw.shard, .shard_count = sw.shards};
	if (sw.mpi) {
		opt.db_path = sw.rank_db;
		opt.merged_db = sw.db;
		opt.gather = cli_sweep_gather_fn;
		opt.gather_user = &sw;
	}
	rm_error err;
	rm_error_clear(&err);
	struct timespec t0, t1;
	struct rusage u0, u1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	getrusage(RUSAGE_SELF, &u0);
	rm_plan_result res;
	rm_status st = rm_plan_run(&req, NULL, &opt, &res, &err);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	getrusage(RUSAGE_SELF, &u1);
	double wall = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
	double cpu = (double)(u1.ru_utime.tv_sec - u0.ru_utime.tv_sec + u1.ru_stime.tv_sec - u0.ru_stime.tv_sec) +
		     1e-6 * (double)(u1.ru_utime.tv_usec - u0.ru_utime.tv_usec + u1.ru_stime.tv_usec - u0.ru_stime.tv_usec);
	double simulated = 0;
	for (int i = 0; st == RM_OK && i < res.n_points; i++)
		simulated += (double)res.points[i].simulated;
	simulated = cli_sweep_reduce(&sw, simulated, false);
	/* the busiest process's CPU time: with a free core per process the wall time tends to it */
	double cpu_max = cli_sweep_reduce(&sw, cpu, true);
	cpu = cli_sweep_reduce(&sw, cpu, false);
	wall = cli_sweep_reduce(&sw, wall, true);
	int procs = sw.mpi ? sw.size : 1;
	rm_plan_result_finish(&res);
	if (st != RM_OK) {
		rc = cli_fail(&err);
	} else if (cli_sweep_is_root(&sw)) {
		if (json) {
			json_t *doc = json_object();
			json_object_set_new(doc, "schema", json_string("remora.bench.plan/1"));
			json_object_set_new(doc, "model", json_string(model));
			json_object_set_new(doc, "processes", json_integer(procs));
			json_t *ga = json_array();
			for (int i = 0; i < n_gpus; i++)
				json_array_append_new(ga, json_integer((json_int_t)gpus[i]));
			json_object_set_new(doc, "gpus", ga);
			json_object_set_new(doc, "candidates", json_integer((json_int_t)simulated));
			json_object_set_new(doc, "wall_s", json_real(wall));
			json_object_set_new(doc, "cpu_s", json_real(cpu));
			json_object_set_new(doc, "cpu_s_busiest_process", json_real(cpu_max));
			json_object_set_new(doc, "candidates_per_s", json_real(wall > 0 ? simulated / wall : 0));
			json_object_set_new(doc, "candidates_per_cpu_s", json_real(cpu > 0 ? simulated / cpu : 0));
			rc = cli_print_json(doc);
		} else {
			char counts[256] = "";
			size_t u = 0;
			for (int i = 0; i < n_gpus && u < sizeof(counts); i++)
				u += (size_t)snprintf(counts + u, sizeof(counts) - u, "%s%lld",
						      i == 0 ? "" : i + 1 == n_gpus ? " and " : ", ", (long long)gpus[i]);
			printf("plan search on %s (1T tokens, %s H100s, TP 1,2 x PP 1,2), %d process%s: %.0f candidates "
			       "in %.2f s: %.1f candidates/s, %.1f per core (per CPU-second, %.2f CPU-s; the busiest process "
			       "%.2f CPU-s)\n",
			       model, counts, procs, procs == 1 ? "" : "es", simulated, wall, wall > 0 ? simulated / wall : 0,
			       cpu > 0 ? simulated / cpu : 0, cpu, cpu_max);
		}
	}
	cli_sweep_end(&sw);
	return rc;
}

int cli_cmd_bench(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"ops", required_argument, NULL, 'n'},
		{"candidates", required_argument, NULL, 'c'},
		{"model", required_argument, NULL, 'M'},
		{"gpus", required_argument, NULL, 'g'},
		{"min-time", required_argument, NULL, 'm'},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{0, 0, 0, 0},
	};
	bool json = false;
	int64_t ops = 0, candidates = 500;
	int64_t gpus[RM_PLAN_MAX_GPUS] = {8, 16};
	int n_gpus = 2;
	const char *model = "llama-3-8b";
	double min_s = 1.0;
	int c;
	const char *shortopts = "n:c:M:g:m:jh";
	while ((c = cli_getopt(argc, argv, shortopts, longopts)) != -1) {
		switch (c) {
		case 'c':
			if (!cli_parse_positive("bench", "--candidates", optarg, &candidates))
				return CLI_EXIT_USAGE;
			break;
		case 'M':
			model = optarg;
			break;
		case 'g': {
			char buf[512];
			snprintf(buf, sizeof(buf), "%s", optarg);
			n_gpus = 0;
			for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
				if (n_gpus >= RM_PLAN_MAX_GPUS)
					return cli_usage_error("bench", "--gpus: at most %d counts", RM_PLAN_MAX_GPUS);
				if (!cli_parse_positive("bench", "--gpus", t, &gpus[n_gpus]))
					return CLI_EXIT_USAGE;
				for (int j = 0; j < n_gpus; j++)
					if (gpus[j] == gpus[n_gpus])
						return cli_usage_error("bench", "--gpus: %lld is given twice", (long long)gpus[j]);
				n_gpus++;
			}
			if (n_gpus == 0 || optarg[0] == ',' || optarg[strlen(optarg) - 1] == ',' || strstr(optarg, ",,"))
				return cli_usage_error("bench", "--gpus expects a list of GPU counts such as 8,16,32, got '%s'",
						       optarg);
			break;
		}
		case 'n':
			if (!cli_parse_positive("bench", "--ops", optarg, &ops))
				return CLI_EXIT_USAGE;
			if (ops > 20000000)
				return cli_usage_error("bench", "--ops: at most 20000000");
			break;
		case 'm': {
			char *end;
			min_s = strtod(optarg, &end);
			if (*end || !(min_s >= 0) || min_s > 600)
				return cli_usage_error("bench", "--min-time expects seconds in [0, 600]");
			break;
		}
		case 'j':
			json = true;
			break;
		case 'h':
			bench_usage(stdout);
			return CLI_EXIT_OK;
		default:
			return cli_option_error("bench", argc, argv, shortopts, longopts);
		}
	}
	if (optind >= argc)
		return cli_usage_error("bench", "missing the benchmark name: engine, search or plan");
	if (strcmp(argv[optind], "plan") == 0) {
		if (optind + 1 != argc)
			return cli_usage_error("bench", "unexpected argument '%s'", argv[optind + 1]);
		return bench_plan(model, gpus, n_gpus, json);
	}
	if (strcmp(argv[optind], "search") == 0) {
		if (optind + 1 != argc)
			return cli_usage_error("bench", "unexpected argument '%s'", argv[optind + 1]);
		return bench_search(candidates, model, json);
	}
	if (strcmp(argv[optind], "engine") != 0)
		return cli_usage_error("bench", "unknown benchmark '%s' (expected engine, search or plan)",
				       argv[optind]);
	if (optind + 1 != argc)
		return cli_usage_error("bench", "unexpected argument '%s'", argv[optind + 1]);

	int32_t sizes[2] = {100000, 1000000};
	int n_sizes = 2;
	if (ops > 0) {
		sizes[0] = (int32_t)ops;
		n_sizes = 1;
	}
	rm_error err;
	rm_error_clear(&err);
	json_t *runs = json_array();
	double slowest = 0;
	for (int k = 0; k < n_sizes; k++) {
		rm_sim_bench_result r;
		if (rm_sim_bench_engine(sizes[k], min_s, &r, &err) != RM_OK) {
			json_decref(runs);
			return cli_fail(&err);
		}
		if (k == 0 || r.events_per_s < slowest)
			slowest = r.events_per_s;
		if (json) {
			json_t *o = json_object();
			json_object_set_new(o, "ops", json_integer(r.ops));
			json_object_set_new(o, "events_per_run", json_integer((json_int_t)r.events));
			json_object_set_new(o, "runs", json_integer(r.runs));
			json_object_set_new(o, "seconds", json_real(r.seconds));
			json_object_set_new(o, "events_per_s", json_real(r.events_per_s));
			json_object_set_new(o, "ns_per_event", json_real(r.ns_per_event));
			json_object_set_new(o, "simulated_step_s", json_real(r.step_time_s));
			json_array_append_new(runs, o);
		} else {
			printf("engine: %8d ops, %9llu events/run, %4d runs in %.2f s: %.2f M events/s, "
			       "%.1f ns/event (simulated step %.3f s)\n",
			       r.ops, (unsigned long long)r.events, r.runs, r.seconds,
			       r.events_per_s / 1e6, r.ns_per_event, r.step_time_s);
		}
	}
	if (!json) {
		json_decref(runs);
		return CLI_EXIT_OK;
	}
	json_t *doc = json_object();
	json_object_set_new(doc, "schema", json_string("remora.bench.engine/1"));
	json_object_set_new(doc, "events_per_s", json_real(slowest));
	json_object_set_new(doc, "ns_per_event", json_real(slowest > 0 ? 1e9 / slowest : 0));
	json_object_set_new(doc, "runs", runs);
	return cli_print_json(doc);
}
