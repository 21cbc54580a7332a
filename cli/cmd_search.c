/*
 * `remora search SCENARIO [--db FILE] [--jobs N] [--top K] [--json] [--trace OUT] [--plot DIR]`:
 * sweeps remat policies, micro-batches and XLA flag variants, ranks by tokens/s per GPU among
 * the candidates that fit, and prints what to paste: the policy call, XLA_FLAGS, micro-batch.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "remora/calib.h"
#include "remora/search.h"
#include "remora/sim.h"

static void search_usage(FILE *out)
{
	fprintf(out,
		"usage: remora search SCENARIO [options]\n\n"
		"Simulates every candidate of the scenario's search space (subsets of search.names saved or\n"
		"offloaded, search.policies, search.micro_batches, search.flag_variants, and the ideal\n"
		"runtime), ranks those that fit by tokens/s per GPU, and prints the winner's JAX policy,\n"
		"XLA_FLAGS and micro-batch, with the Pareto front of step time against peak memory.\n\n"
		"options:\n"
		"  -s, --set KEY=VALUE  override a scenario key (e.g. --set search.micro_batches=[1,2])\n"
		"  -d, --db FILE        keep the sweep in this SQLite file; a killed sweep resumes from it\n"
		"  -J, --jobs N         simulate on N threads (same results for any N; default 1)\n"
		"  -k, --top K          show the best K candidates (default 10)\n"
		"  -j, --json           machine-readable output\n"
		"  -t, --trace OUT      write the winner's Perfetto trace\n"
		"  -p, --plot DIR       write the Pareto front and the winner's memory timeline (SVG, gnuplot)\n"
		"  -h, --help           this help\n");
}

static void progress_line(const rm_search_progress *p, void *user)
{
	(void)user;
	double rate = p->elapsed_s > 0 ? (double)(p->done - p->skipped) / p->elapsed_s : 0;
	double eta = rate > 0 ? (double)(p->total - p->done) / rate : 0;
	fprintf(stderr, "\rremora: search %lld/%lld candidates, %.0f/s, ETA %.0f s   ", (long long)p->done,
		(long long)p->total, rate, eta);
	if (p->done == p->total)
		fputc('\n', stderr);
	fflush(stderr);
}

static json_t *result_json(const rm_candidate_result *r)
{
	json_t *o = json_object();
	json_object_set_new(o, "label", json_string(r->c.label));
	json_object_set_new(o, "policy", json_string(r->c.policy));
	json_object_set_new(o, "micro_batch", json_integer(r->c.micro_batch));
	json_object_set_new(o, "flags_variant", json_string(r->c.flags));
	json_object_set_new(o, "mode", json_string(r->c.ideal ? "ideal" : "xla"));
	json_object_set_new(o, "as_written", json_boolean(r->c.as_written));
	if (!r->ok) {
		json_object_set_new(o, "error", json_string(r->error));
		return o;
	}
	json_object_set_new(o, "step_time_s", json_real(r->step_time_s));
	json_object_set_new(o, "tokens_per_s_per_gpu", json_real(r->tokens_per_s_per_gpu));
	json_object_set_new(o, "mfu", json_real(r->mfu));
	json_object_set_new(o, "peak_memory_bytes", json_integer(r->peak_memory_bytes));
	json_object_set_new(o, "memory_capacity_bytes", json_integer(r->memory_capacity_bytes));
	json_object_set_new(o, "fits", json_boolean(r->fits));
	json_object_set_new(o, "compute_busy_s", json_real(r->compute_busy_s));
	json_object_set_new(o, "comm_total_s", json_real(r->comm_total_s));
	json_object_set_new(o, "exposed_comm_s", json_real(r->exposed_comm_s));
	json_object_set_new(o, "recompute_s", json_real(r->recompute_s));
	json_object_set_new(o, "lower_bound_s", json_real(r->lower_bound_s));
	json_t *c = json_object();
	json_object_set_new(c, "total", json_integer(r->collectives));
	json_object_set_new(c, "async", json_integer(r->async));
	json_object_set_new(c, "sync", json_integer(r->sync));
	json_t *reasons = json_object();
	if (r->sync_disabled)
		json_object_set_new(reasons, "disabled", json_integer(r->sync_disabled));
	if (r->sync_memory_limit)
		json_object_set_new(reasons, "memory_limit", json_integer(r->sync_memory_limit));
	if (r->sync_nothing)
		json_object_set_new(reasons, "nothing_to_overlap", json_integer(r->sync_nothing));
	if (r->sync_overlap)
		json_object_set_new(reasons, "overlap_limit", json_integer(r->sync_overlap));
	if (r->sync_no_lhs)
		json_object_set_new(reasons, "no_latency_hiding_scheduler", json_integer(r->sync_no_lhs));
	json_object_set_new(c, "sync_reasons", reasons);
	json_object_set_new(o, "collectives", c);
	return o;
}

/* The full XLA_FLAGS of a candidate: the scenario's flags with its variant applied. */
static void candidate_flags(const rm_scenario *sc, const rm_candidate_result *r, char *buf, size_t size)
{
	rm_xla_flags f = rm_xla_flags_default();
	rm_xla_flags_parse(sc->xla_flags, &f, NULL);
	rm_xla_flags_parse(r->c.flags, &f, NULL);
	rm_xla_flags_format(&f, buf, size);
}

typedef struct plot_ctx {
	FILE *all;
} plot_ctx;

static void plot_row(const rm_candidate_result *r, void *user)
{
	plot_ctx *p = user;
	if (r->ok)
		fprintf(p->all, "%.3f %.4f %d\n", r->tokens_per_s_per_gpu, (double)r->peak_memory_bytes / (double)RM_GiB,
			r->fits);
}

/* Closes a file written for the plots; false (with err) when anything failed to reach the disk. */
static bool close_written(FILE *f, const char *path, rm_error *err)
{
	bool ok = !ferror(f);
	ok = fclose(f) == 0 && ok;
	if (!ok)
		rm_error_set(err, RM_IO, path, 0, 0, "writing failed (disk full?)");
	return ok;
}

static int write_plots(rm_search *s, const char *dir, const rm_candidate_result *pareto, int n_pareto,
		       const rm_sim *winner, double capacity_gib)
{
	rm_error err;
	rm_error_clear(&err);
	if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
		rm_error_set(&err, RM_IO, dir, 0, 0, "cannot create the plot folder: %s", strerror(errno));
		return cli_fail(&err);
	}
	char path[1200];
	snprintf(path, sizeof(path), "%s/candidates.dat", dir);
	plot_ctx pc = {.all = fopen(path, "w")};
	if (!pc.all) {
		rm_error_set(&err, RM_IO, path, 0, 0, "cannot write: %s", strerror(errno));
		return cli_fail(&err);
	}
	fprintf(pc.all, "# tokens_per_s_per_gpu peak_memory_GiB fits\n");
	rm_search_each(s, plot_row, &pc, &err);
	if (!close_written(pc.all, path, &err))
		return cli_fail(&err);
	snprintf(path, sizeof(path), "%s/pareto.dat", dir);
	FILE *f = fopen(path, "w");
	if (!f)
		return CLI_EXIT_FAIL;
	fprintf(f, "# tokens_per_s_per_gpu peak_memory_GiB label\n");
	for (int i = 0; i < n_pareto; i++)
		fprintf(f, "%.3f %.4f \"%s mb%lld%s\"\n", pareto[i].tokens_per_s_per_gpu,
			(double)pareto[i].peak_memory_bytes / (double)RM_GiB, pareto[i].c.label,
			(long long)pareto[i].c.micro_batch, pareto[i].c.ideal ? " ideal" : "");
	if (!close_written(f, path, &err))
		return cli_fail(&err);
	size_t n = 0;
	const rm_mem_point *pts = winner ? rm_sim_memory_timeline(winner, &n) : NULL;
	snprintf(path, sizeof(path), "%s/winner-memory.dat", dir);
	f = fopen(path, "w");
	if (!f)
		return CLI_EXIT_FAIL;
	fprintf(f, "# time_ms device_memory_GiB\n");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%.6f %.4f\n", rm_time_to_s(pts[i].time) * 1e3, (double)pts[i].bytes / (double)RM_GiB);
	if (!close_written(f, path, &err))
		return cli_fail(&err);
	snprintf(path, sizeof(path), "%s/plots.gp", dir);
	f = fopen(path, "w");
	if (!f)
		return CLI_EXIT_FAIL;
	fprintf(f,
		"# gnuplot script written by remora search; run: gnuplot plots.gp\n"
		"set terminal svg size 900,600 dynamic font 'sans,12' background '#ffffff'\n"
		"set output 'pareto.svg'\n"
		"set title 'Candidates: throughput against peak memory (Pareto front in red)'\n"
		"set xlabel 'tokens/s per GPU (step time per token, inverted)'\nset ylabel 'peak device memory (GiB)'\nset grid\n"
		"set key top left\n"
		"capacity = %.4f\n"
		"plot 'candidates.dat' using 1:($3==1?$2:1/0) with points pt 7 ps 0.5 lc rgb '#8080c0' title 'fits', \\\n"
		"     'candidates.dat' using 1:($3==0?$2:1/0) with points pt 6 ps 0.5 lc rgb '#c0c0c0' title 'does not fit', \\\n"
		"     'pareto.dat' using 1:2 with linespoints pt 7 lc rgb '#d02020' title 'Pareto front', \\\n"
		"     capacity with lines dt 2 lc rgb '#404040' title 'HBM capacity'\n"
		"set output 'winner-memory.svg'\n"
		"set title 'Winner: device memory over one step'\n"
		"set xlabel 'time (ms)'\nset ylabel 'device memory (GiB)'\n"
		"plot 'winner-memory.dat' using 1:2 with steps lw 2 lc rgb '#2060c0' title 'allocated', \\\n"
		"     capacity with lines dt 2 lc rgb '#404040' title 'HBM capacity'\n",
		capacity_gib);
	if (!close_written(f, path, &err))
		return cli_fail(&err);
	char cmd[1400];
	snprintf(cmd, sizeof(cmd), "cd '%s' && gnuplot plots.gp 2>&1", dir);
	if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
		rm_log_warn("gnuplot not found: wrote the data and %s/plots.gp; install gnuplot (apt-get install "
			    "gnuplot-nox) and run it there for pareto.svg and winner-memory.svg",
			    dir);
		return CLI_EXIT_OK;
	}
	if (system(cmd) != 0) {
		rm_error_set(&err, RM_IO, dir, 0, 0, "gnuplot failed on plots.gp");
		return cli_fail(&err);
	}
	fprintf(stderr, "remora: wrote %s/pareto.svg and %s/winner-memory.svg\n", dir, dir);
	return CLI_EXIT_OK;
}

int cli_cmd_search(int argc, char **argv)
{
	enum { OPT_STOP = 256 };
	static const struct option longopts[] = {
		{"set", required_argument, NULL, 's'}, {"db", required_argument, NULL, 'd'},
		{"jobs", required_argument, NULL, 'J'}, {"top", required_argument, NULL, 'k'},
		{"json", no_argument, NULL, 'j'},       {"trace", required_argument, NULL, 't'},
		{"plot", required_argument, NULL, 'p'}, {"stop-after", required_argument, NULL, OPT_STOP},
		{"help", no_argument, NULL, 'h'},       {0, 0, 0, 0},
	};
	char **sets = rm_new(char *, (size_t)argc + 1);
	int n_sets = 0, c;
	const char *db = NULL, *trace = NULL, *plot = NULL;
	int64_t jobs = 1, top = 10, stop_after = 0;
	bool json = false;
	int rc = CLI_EXIT_OK;
	while ((c = getopt_long(argc, argv, "s:d:J:k:jt:p:h", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			sets[n_sets++] = optarg;
			break;
		case 'd':
			db = optarg;
			break;
		case 'J':
			if (!cli_parse_positive("search", "--jobs", optarg, &jobs) || jobs > 256) {
				free(sets);
				return jobs > 256 ? cli_usage_error("search", "--jobs at most 256") : CLI_EXIT_USAGE;
			}
			break;
		case 'k':
			if (!cli_parse_positive("search", "--top", optarg, &top) || top > 1000) {
				free(sets);
				return top > 1000 ? cli_usage_error("search", "--top at most 1000") : CLI_EXIT_USAGE;
			}
			break;
		case 'j':
			json = true;
			break;
		case 't':
			trace = optarg;
			break;
		case 'p':
			plot = optarg;
			break;
		case OPT_STOP:
			if (!cli_parse_positive("search", "--stop-after", optarg, &stop_after)) {
				free(sets);
				return CLI_EXIT_USAGE;
			}
			break;
		case 'h':
			search_usage(stdout);
			free(sets);
			return CLI_EXIT_OK;
		default:
			free(sets);
			return cli_usage_error("search", "unrecognised option");
		}
	}
	if (optind >= argc || optind + 1 != argc) {
		free(sets);
		return optind >= argc ? cli_usage_error("search", "missing SCENARIO")
				      : cli_usage_error("search", "unexpected argument '%s'", argv[optind + 1]);
	}
	rm_error err;
	rm_error_clear(&err);
	rm_scenario sc;
	int set_rc = cli_check_sets("search", sets, n_sets);
	if (set_rc != CLI_EXIT_OK) {
		free(sets);
		return set_rc;
	}
	rm_scenario_init(&sc);
	if (rm_scenario_load(argv[optind], &sc, &err) != RM_OK) {
		free(sets);
		return cli_fail(&err);
	}
	for (int i = 0; i < n_sets; i++)
		if (rm_scenario_set(&sc, sets[i], &err) != RM_OK) {
			free(sets);
			return err.status == RM_USAGE || err.status == RM_UNKNOWN_KEY ? cli_usage_error("search", "%s", err.msg) : cli_fail(&err);
		}
	free(sets);
	rm_search *s = rm_search_create(&sc, rm_calib_hw_resolver, &err);
	if (!s)
		return cli_fail(&err);
	rm_search_options opt = {.db_path = db, .jobs = (int)jobs, .stop_after = stop_after};
	if (isatty(STDERR_FILENO) && !json)
		opt.progress = progress_line;
	rm_search_progress prog;
	if (rm_search_run(s, &opt, &prog, &err) != RM_OK) {
		rm_search_destroy(s);
		return cli_fail(&err);
	}
	if (stop_after > 0 && prog.done < prog.total) {
		fprintf(stderr, "remora: stopped after %lld new rows (--stop-after); run again to resume\n",
			(long long)stop_after);
		rm_search_destroy(s);
		return CLI_EXIT_OK;
	}
	/* four times as many rows as shown, so that plans equal to the row above can be folded */
	rm_candidate_result *best = rm_new(rm_candidate_result, (size_t)top * 4);
	int n_best = rm_search_top(s, RM_SEARCH_ANY, best, (int)top * 4, &err);
	rm_candidate_result best_xla, best_ideal;
	bool have_xla = rm_search_top(s, RM_SEARCH_XLA_ONLY, &best_xla, 1, &err) == 1;
	bool have_ideal = rm_search_top(s, RM_SEARCH_IDEAL_ONLY, &best_ideal, 1, &err) == 1;
	rm_candidate_result *pareto = rm_new(rm_candidate_result, 256);
	int n_pareto = rm_search_pareto(s, pareto, 256, &err);
	rm_candidate_result base;
	bool have_base = rm_search_as_written(s, &base, &err);
	int64_t rows = rm_search_rows(s);
	int64_t not_fitting = 0;
	(void)not_fitting;
	if (n_best < 0 || n_pareto < 0) {
		rc = cli_fail(&err);
		goto out;
	}
	/* the winner's trace and memory timeline */
	rm_sim *wsim = NULL;
	rm_program *wprog = NULL;
	rm_scenario_resolved wres;
	rm_schedule_report wrep;
	bool have_w = false;
	memset(&wres, 0, sizeof(wres));
	memset(&wrep, 0, sizeof(wrep));
	if (have_xla && (trace || plot)) {
		rm_candidate wc;
		rm_search_candidate(s, best_xla.c.index, &wc);
		if (rm_search_resolve_candidate(s, &wc, &wres, &err) == RM_OK &&
		    (wprog = rm_schedule_build(&wres.sched, &wrep, &err)) != NULL) {
			rm_sim_options so = {.hw_queues = wres.hw_queues,
					     .memory_timeline = true,
					     .cost = wres.sched.cost,
					     .memory_headroom_bytes = wres.memory.headroom_bytes};
			wsim = rm_sim_create(wprog, &wres.hw, &so, &err);
			have_w = wsim && rm_sim_run(wsim, &err) == RM_OK;
		}
		if (!have_w) {
			rc = cli_fail(&err);
			goto out_w;
		}
		if (trace) {
			FILE *f = fopen(trace, "w");
			if (!f || !rm_sim_write_trace(wsim, f, &err)) {
				if (err.status == RM_OK)
					rm_error_set(&err, RM_IO, trace, 0, 0, "cannot write the trace");
				if (f)
					fclose(f);
				rc = cli_fail(&err);
				goto out_w;
			}
			fclose(f);
		}
		if (plot) {
			rc = write_plots(s, plot, pareto, n_pareto, wsim,
					 (double)best_xla.memory_capacity_bytes / (double)RM_GiB);
			if (rc != CLI_EXIT_OK)
				goto out_w;
		}
	}
	char flags[4096];
	if (json) {
		json_t *doc = json_object();
		json_object_set_new(doc, "schema", json_string("remora.search/1"));
		json_object_set_new(doc, "scenario", json_string(sc.path));
		json_object_set_new(doc, "candidates_total", json_integer(rm_search_count(s)));
		json_object_set_new(doc, "candidates_evaluated", json_integer(rows));
		if (have_xla) {
			json_t *b = result_json(&best_xla);
			candidate_flags(&sc, &best_xla, flags, sizeof(flags));
			json_object_set_new(b, "xla_flags", json_string(flags));
			json_object_set_new(doc, "best", b);
		} else {
			json_object_set_new(doc, "best", json_null());
		}
		if (have_ideal)
			json_object_set_new(doc, "best_ideal", result_json(&best_ideal));
		if (have_base)
			json_object_set_new(doc, "as_written", result_json(&base));
		if (have_base && have_xla && base.ok && base.fits)
			json_object_set_new(doc, "speedup_vs_as_written",
					    json_real(best_xla.tokens_per_s_per_gpu / base.tokens_per_s_per_gpu));
		json_t *arr = json_array();
		for (int i = 0; i < n_best && i < top; i++)
			json_array_append_new(arr, result_json(&best[i]));
		json_object_set_new(doc, "top", arr);
		arr = json_array();
		for (int i = 0; i < n_pareto; i++)
			json_array_append_new(arr, result_json(&pareto[i]));
		json_object_set_new(doc, "pareto", arr);
		rc = cli_print_json(doc);
		goto out_w;
	}
	if (rm_search_damaged_rows(s) > 0)
		printf("%s: %lld stored rows failed their checksum and were recomputed\n", db ? db : "database",
		       (long long)rm_search_damaged_rows(s));
	printf("%s: %lld candidates in the space, %lld simulated now%s\n\n", sc.path, (long long)rm_search_count(s),
	       (long long)(prog.done - prog.skipped),
	       prog.skipped ? " (the rest were already in the database)" : "");
	printf("  %-3s %-44s %4s %-10s %10s %10s %6s %9s %10s %6s\n", "#", "policy", "mb", "flags", "step ms",
	       "tok/s/GPU", "MFU", "peak GiB", "exposed ms", "sync");
	/* candidates whose schedules are the same (a name the backward never reads, policies spelled
	 * two ways) give the same numbers: fold them into the row above */
	int shown = 0;
	for (int i = 0; i < n_best && shown < top; i++) {
		const rm_candidate_result *r = &best[i];
		int same = 0;
		while (i + same + 1 < n_best) {
			const rm_candidate_result *q = &best[i + same + 1];
			if (q->step_time_s != r->step_time_s || q->peak_memory_bytes != r->peak_memory_bytes ||
			    q->c.micro_batch != r->c.micro_batch || q->c.ideal != r->c.ideal)
				break;
			same++;
		}
		char fl[16], label[64];
		snprintf(fl, sizeof(fl), "%s", r->c.ideal ? "(ideal)" : r->c.flags[0] ? "variant" : "as given");
		if (same)
			snprintf(label, sizeof(label), "%.34s (+%d same)", r->c.label, same);
		else
			snprintf(label, sizeof(label), "%s", r->c.label);
		printf("  %-3d %-44.44s %4lld %-10s %10.2f %10.0f %5.1f%% %9.2f %10.2f %6d\n", ++shown, label,
		       (long long)r->c.micro_batch, fl, r->step_time_s * 1e3, r->tokens_per_s_per_gpu, 100 * r->mfu,
		       (double)r->peak_memory_bytes / (double)RM_GiB, r->exposed_comm_s * 1e3, r->sync);
		i += same;
	}
	if (!have_xla) {
		printf("\n  no XLA candidate fits in memory: try smaller search.micro_batches, nothing_saveable or "
		       "offloaded names\n");
		goto out_w;
	}
	/* the best XLA candidate is what a JAX user can paste */
	const rm_candidate_result *w = &best_xla;
	candidate_flags(&sc, w, flags, sizeof(flags));
	printf("\nbest plan for XLA (%s; paste these):\n", w->c.label);
	{
		rm_remat_policy *p = rm_remat_policy_parse(w->c.policy, NULL);
		char pol[4096];
		if (p)
			printf("  policy=%s\n", rm_remat_policy_format(p, pol, sizeof(pol)));
		rm_remat_policy_destroy(p);
	}
	printf("  XLA_FLAGS=\"%s\"   (the flags that differ from XLA's defaults)\n", flags);
	printf("  micro-batch  = %lld\n", (long long)w->c.micro_batch);
	const rm_memory_budget *mb = rm_search_memory_budget(s);
	printf("  step %.2f ms, %.0f tokens/s per GPU, MFU %.1f%%, peak %.2f of %.2f GiB usable, %d of %d collectives "
	       "async\n",
	       w->step_time_s * 1e3, w->tokens_per_s_per_gpu, 100 * w->mfu, (double)w->peak_memory_bytes / (double)RM_GiB,
	       (double)mb->usable_bytes / (double)RM_GiB, w->async, w->collectives);
	if (w->peak_memory_bytes > 0.95 * (double)mb->usable_bytes)
		printf("  WARNING: the peak is within %.2f GiB of usable memory (HBM less %.2f GiB of CUDA context, NCCL "
		       "buffers and workspaces); allocator fragmentation can take more: keep a margin or take the next "
		       "plan\n",
		       (double)(mb->usable_bytes - w->peak_memory_bytes) / (double)RM_GiB,
		       (double)mb->headroom_bytes / (double)RM_GiB);
	if (have_base && base.ok) {
		if (base.fits)
			printf("  %.2fx the scenario as written (%.0f tokens/s per GPU, %d collectives on the compute "
			       "stream, %d for the memory limit)\n",
			       w->tokens_per_s_per_gpu / base.tokens_per_s_per_gpu, base.tokens_per_s_per_gpu, base.sync,
			       base.sync_memory_limit);
		else
			printf("  the scenario as written does not fit (%.2f GiB of %.2f)\n",
			       (double)base.peak_memory_bytes / (double)RM_GiB,
			       (double)base.memory_capacity_bytes / (double)RM_GiB);
	}
	if (have_ideal)
		printf("  a hand-tuned FSDP runtime (ideal mode: %s, micro-batch %lld) would reach %.0f tokens/s per "
		       "GPU: XLA leaves %.1f%% on the table\n",
		       best_ideal.c.label, (long long)best_ideal.c.micro_batch, best_ideal.tokens_per_s_per_gpu,
		       100.0 * (1.0 - w->tokens_per_s_per_gpu / best_ideal.tokens_per_s_per_gpu));
	printf("\nPareto front (step time per token against peak memory):\n");
	for (int i = 0; i < n_pareto; i++)
		printf("  %9.0f tok/s/GPU %10.2f ms %8.2f GiB  %s, mb %lld%s%s\n", pareto[i].tokens_per_s_per_gpu,
		       pareto[i].step_time_s * 1e3, (double)pareto[i].peak_memory_bytes / (double)RM_GiB, pareto[i].c.label,
		       (long long)pareto[i].c.micro_batch, pareto[i].c.ideal ? ", ideal" : "",
		       pareto[i].fits ? "" : " (does not fit)");
out_w:
	rm_sim_destroy(wsim);
	rm_program_destroy(wprog);
	rm_schedule_report_finish(&wrep);
	rm_scenario_resolved_finish(&wres);
out:
	free(best);
	free(pareto);
	rm_search_destroy(s);
	return rc;
}
