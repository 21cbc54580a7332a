/* `remora bench engine [--ops N] [--min-time S] [--json]`. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "remora/sim.h"

static void bench_usage(FILE *out)
{
	fprintf(out, "usage: remora bench engine [--ops N] [--min-time S] [--json]\n\n"
		     "Times the simulation engine on synthetic FSDP-like programs (10^5 and 10^6 ops\n"
		     "unless --ops is given) on one thread and prints events per second (an event is\n"
		     "an op start or an op end) and nanoseconds per event.\n\n"
		     "options:\n"
		     "  -n, --ops N          one program of about N ops\n"
		     "  -m, --min-time S     repeat each program for at least S seconds (default 1)\n"
		     "  -j, --json           machine-readable output (key events_per_s: the slowest)\n"
		     "  -h, --help           this help\n");
}

int cli_cmd_bench(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"ops", required_argument, NULL, 'n'},
		{"min-time", required_argument, NULL, 'm'},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{0, 0, 0, 0},
	};
	bool json = false;
	int64_t ops = 0;
	double min_s = 1.0;
	int c;
	while ((c = getopt_long(argc, argv, "n:m:jh", longopts, NULL)) != -1) {
		switch (c) {
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
			return cli_usage_error("bench", "unrecognised option");
		}
	}
	if (optind >= argc)
		return cli_usage_error("bench", "missing the benchmark name: engine");
	if (strcmp(argv[optind], "engine") != 0)
		return cli_usage_error("bench", "unknown benchmark '%s' (expected engine)",
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
