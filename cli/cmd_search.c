/*
 * `remora search SCENARIO [--db FILE] [--jobs N] [--top K] [--json] [--trace OUT] [--plot DIR]`:
 * sweeps remat policies, micro-batches and XLA flag variants, ranks the scenario's runtime's
 * candidates that fit by tokens/s per GPU (the ideal runtime is a column, "ideal gap"), and prints
 * what to paste: the policy call, XLA_FLAGS, micro-batch; then that runtime's Pareto front.
 */
#define _GNU_SOURCE /* posix_spawn_file_actions_addchdir_np (glibc 2.29) */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "remora/calib.h"
#include "remora/file.h"
#include "remora/json.h"
#include "remora/search.h"
#include "remora/sim.h"

static void search_usage(FILE *out)
{
	fprintf(out,
		"usage: remora search SCENARIO [options]\n\n"
		"Simulates every candidate of the scenario's search space (subsets of search.names saved or\n"
		"offloaded, search.policies, search.micro_batches, search.flag_variants, and the ideal\n"
		"runtime), ranks the scenario's runtime's candidates that fit by tokens/s per GPU (with the\n"
		"ideal runtime's gap at the same policy and micro-batch as a column), and prints the winner's\n"
		"JAX policy, XLA_FLAGS and micro-batch, with that runtime's Pareto front of throughput\n"
		"against peak memory. Flag variants are named vN for search.flag_variants[N].\n\n"
		"options:\n"
		"  -s, --set KEY=VALUE  override a scenario key (e.g. --set search.micro_batches=[1,2])\n"
		"  -d, --db FILE        keep the sweep in this SQLite file; a killed sweep resumes from it\n"
		"  -J, --jobs N         simulate on N threads (same results for any N; default 1)\n"
		"  -k, --top K          show the best K rows, same schedules folded into one (default 10,\n"
		"                       at most 1000)\n"
		"  -j, --json           machine-readable output\n"
		"  -t, --trace OUT      write the winner's Perfetto trace\n"
		"  -p, --plot DIR       write the Pareto fronts and the winner's memory timeline (gnuplot: SVG,\n"
		"                       and PNG where gnuplot has pngcairo)\n"
		"      --shard K/N      sweep only the K-th of N shards into --db (array jobs without MPI;\n"
		"                       then remora merge OUT.db the shards' files and search --db OUT.db)\n"
		"      --rows           print every stored row of the space (index order, exact figures)\n"
		"                       instead of the ranking\n"
		"  -h, --help           this help\n\n"
		"Under mpirun -np N each rank sweeps its shard and rank 0 prints what one process would.\n"
		"When no candidate fits, the report (and --json's closest and hint) names the closest one\n"
		"and what would fit it; the exit status is still 0 (docs/search.md).\n");
}

static void progress_line(const rm_search_progress *p, void *user)
{
	(void)user;
	double rate = p->elapsed_s > 0 ? (double)(p->done - p->skipped) / p->elapsed_s : 0;
	double eta = rate > 0 ? (double)(p->total - p->done) / rate : 0;
	/* the first second's rate is mostly set-up (the workloads, the store): no ETA from it */
	if (p->elapsed_s < 1.0 && p->done < p->total)
		fprintf(stderr, "\rremora: search %lld/%lld candidates, ETA after the first second   ", (long long)p->done,
			(long long)p->total);
	else
		fprintf(stderr, "\rremora: search %lld/%lld candidates, %.0f/s, ETA %.0f s   ", (long long)p->done,
			(long long)p->total, rate, eta);
	if (p->done == p->total)
		fputc('\n', stderr);
	fflush(stderr);
}

static void variant_name(const rm_scenario *sc, const rm_candidate *c, char *buf, size_t size);

/*
 * -vv: one line on stderr per candidate simulated now, in index order: its place in the sweep,
 * label, micro-batch, flag variant (and the runtime when it is the ideal bound), then its step
 * time (ms), tokens/s per GPU and peak (GiB), or its error. user: the scenario (variant names).
 */
static void row_line(const rm_candidate_result *r, int64_t done, int64_t total, void *user)
{
	const rm_scenario *sc = user;
	char vn[32], what[48];
	variant_name(sc, &r->c, vn, sizeof(vn));
	snprintf(what, sizeof(what), r->c.ideal ? "ideal runtime" : "flags %s", vn);
	if (!r->ok)
		fprintf(stderr, "remora: candidate %lld/%lld: %s, mb %lld, %s: error: %s\n", (long long)done, (long long)total,
			r->c.label, (long long)r->c.micro_batch, what, r->error);
	else
		fprintf(stderr, "remora: candidate %lld/%lld: %s, mb %lld, %s: step %.2f ms, %.0f tok/s/GPU, peak %.2f GiB%s\n",
			(long long)done, (long long)total, r->c.label, (long long)r->c.micro_batch, what, r->step_time_s * 1e3,
			r->tokens_per_s_per_gpu, (double)r->peak_memory_bytes / (double)RM_GiB, r->fits ? "" : ", does not fit");
}

/*
 * The name of a candidate's XLA flag variant, the same in the table, the best plan, the Pareto
 * front and the plots: "as given" (the scenario's flags alone), "vN" for search.flag_variants[N]
 * (the first entry that reads the same), "-" for the ideal runtime (no XLA flags).
 */
static void variant_name(const rm_scenario *sc, const rm_candidate *c, char *buf, size_t size)
{
	if (c->ideal) {
		snprintf(buf, size, "-");
		return;
	}
	if (!c->flags[0]) {
		snprintf(buf, size, "as given");
		return;
	}
	for (int i = 0; i < sc->n_search_flag_variants; i++)
		if (strcmp(sc->search_flag_variants[i], c->flags) == 0) {
			snprintf(buf, size, "v%d", i);
			return;
		}
	snprintf(buf, size, "variant");
}

static json_t *result_json(const rm_scenario *sc, const rm_candidate_result *r, rm_sched_mode runtime)
{
	json_t *o = json_object();
	json_object_set_new(o, "label", rm_json_string(r->c.label));
	json_object_set_new(o, "policy", rm_json_string(r->c.policy));
	json_object_set_new(o, "micro_batch", json_integer(r->c.micro_batch));
	json_object_set_new(o, "flags_variant", rm_json_string(r->c.flags));
	char vn[32];
	variant_name(sc, &r->c, vn, sizeof(vn));
	json_object_set_new(o, "flags_variant_name", json_string(vn));
	if (r->c.parallelism[0])
		json_object_set_new(o, "parallelism", rm_json_string(r->c.parallelism));
	json_object_set_new(o, "mode", json_string(r->c.ideal ? "ideal" : rm_sched_mode_name(runtime)));
	json_object_set_new(o, "as_written", json_boolean(r->c.as_written));
	if (!r->ok) {
		json_object_set_new(o, "error", rm_json_string(r->error));
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

/* The full XLA_FLAGS of a candidate: the scenario's flags with its variant applied; every flag
 * the scenario or the variant gives is kept, the rest only where it differs from the defaults. */
static void candidate_flags(const rm_scenario *sc, const rm_candidate_result *r, char *buf, size_t size)
{
	int version = rm_xla_version_find(sc->xla_version);
	rm_xla_flags f = rm_xla_flags_for_version(version > 0 ? version : 0, true);
	rm_xla_flags_parse(sc->xla_flags, &f, NULL);
	rm_xla_flags_parse(r->c.flags, &f, NULL);
	rm_xla_flags_format_keep(&f, f.given, buf, size);
}

/* What the plot files are made of: the search's own figures, in GiB and ms. */
typedef struct plot_ctx {
	rm_search *s;
	const rm_scenario *sc;
	const char *rt; /* the scenario's runtime as the table names it: "XLA", "PyTorch FSDP2" */
	const rm_candidate_result *pareto, *pareto_ideal;
	int n_pareto, n_pareto_ideal;
	const rm_candidate_result *winner; /* the best plan of the runtime; NULL: none fits */
	const rm_candidate_result *base;   /* the scenario as written; NULL: not simulated */
	const rm_mem_point *pts;
	size_t n_pts;
	double hbm_gib, usable_gib, pool_gib; /* pool 0: no BFC pool (candidates fit in usable) */
	double limit_gib, tracked_gib;        /* XLA's scheduler memory limit and the LHS-tracked
					       * peak of the winner; limit 0: none drawn */
	double backward_ms;                   /* the winner's first backward op start; < 0: none */
	FILE *all;
	double max_tok, max_gib;              /* over the simulated candidates (write_candidates) */
} plot_ctx;

/* The label of candidate r on the plots: the table's label, micro-batch and variant name, with no
 * double quote or newline (a gnuplot string ends at a double quote). */
static void plot_label(const plot_ctx *p, const rm_candidate_result *r, char *buf, size_t size)
{
	char vn[32];
	variant_name(p->sc, &r->c, vn, sizeof(vn));
	snprintf(buf, size, "%s, mb %lld, flags %s", r->c.label, (long long)r->c.micro_batch, vn);
	for (char *q = buf; *q; q++)
		if (*q == '"' || *q == '\n' || *q == '\\')
			*q = '\'';
}

static void plot_row(const rm_candidate_result *r, void *user)
{
	plot_ctx *p = user;
	if (r->ok && r->tokens_per_s_per_gpu > p->max_tok)
		p->max_tok = r->tokens_per_s_per_gpu;
	if (r->ok && (double)r->peak_memory_bytes / (double)RM_GiB > p->max_gib)
		p->max_gib = (double)r->peak_memory_bytes / (double)RM_GiB;
	if (r->ok)
		fprintf(p->all, "%.3f %.4f %d %s\n", r->tokens_per_s_per_gpu, (double)r->peak_memory_bytes / (double)RM_GiB,
			r->fits, r->c.ideal ? "ideal" : rm_sched_mode_name(rm_search_runtime(p->s)));
}

static bool write_candidates(FILE *f, void *user, rm_error *err)
{
	plot_ctx *p = user;
	p->all = f;
	fprintf(f, "# tokens_per_s_per_gpu peak_memory_GiB fits runtime (ideal: the ideal bound)\n");
	return rm_search_each(p->s, plot_row, p, err) == RM_OK;
}

/* Whether a label at (tok, gib) would sit clear of the one at (x, y): apart by 4.5% of the memory
 * axis, or by 35% of the throughput axis (a label runs about that far to the right). */
static bool label_clear(const plot_ctx *p, double tok, double gib, double x, double y)
{
	return fabs(gib - y) > 0.045 * p->max_gib || fabs(tok - x) > 0.35 * p->max_tok;
}

/* One front: tokens/s, GiB, 1 when the plot labels the point, the label. Labelled: from the
 * fastest end, each point whose label keeps clear of those already placed, the winner's and the
 * as-written one (they carry their own); the rest are named in the file. */
static void write_front(FILE *f, const plot_ctx *p, const rm_candidate_result *front, int n, bool labels)
{
	fprintf(f, "# tokens_per_s_per_gpu peak_memory_GiB labelled label\n");
	double placed[2 * 16 + 2][2];
	int n_placed = 0;
	if (p->winner) {
		placed[n_placed][0] = p->winner->tokens_per_s_per_gpu;
		placed[n_placed++][1] = (double)p->winner->peak_memory_bytes / (double)RM_GiB;
	}
	if (p->base) {
		placed[n_placed][0] = p->base->tokens_per_s_per_gpu;
		placed[n_placed++][1] = (double)p->base->peak_memory_bytes / (double)RM_GiB;
	}
	for (int i = 0; i < n; i++) {
		const rm_candidate_result *r = &front[i];
		char label[200];
		plot_label(p, r, label, sizeof(label));
		double tok = r->tokens_per_s_per_gpu, gib = (double)r->peak_memory_bytes / (double)RM_GiB;
		bool shown = labels && n_placed < (int)(sizeof(placed) / sizeof(placed[0])) &&
			     !(p->winner && r->c.index == p->winner->c.index);
		for (int k = 0; shown && k < n_placed; k++)
			shown = label_clear(p, tok, gib, placed[k][0], placed[k][1]);
		if (shown) {
			placed[n_placed][0] = tok;
			placed[n_placed++][1] = gib;
		}
		fprintf(f, "%.3f %.4f %d \"%s\"\n", tok, gib, shown, label);
	}
}

static bool write_pareto(FILE *f, void *user, rm_error *err)
{
	(void)err;
	const plot_ctx *p = user;
	write_front(f, p, p->pareto, p->n_pareto, true);
	return true;
}

static bool write_pareto_ideal(FILE *f, void *user, rm_error *err)
{
	(void)err;
	const plot_ctx *p = user;
	write_front(f, p, p->pareto_ideal, p->n_pareto_ideal, false);
	return true;
}

static bool write_memory(FILE *f, void *user, rm_error *err)
{
	(void)err;
	const plot_ctx *p = user;
	fprintf(f, "# time_ms device_memory_GiB\n");
	for (size_t i = 0; i < p->n_pts; i++)
		fprintf(f, "%.6f %.4f\n", rm_time_to_s(p->pts[i].time) * 1e3, (double)p->pts[i].bytes / (double)RM_GiB);
	return true;
}

void cli_gnuplot_png(FILE *f, const char *name)
{
	fprintf(f,
		"if (png) {\n"
		"  set terminal pngcairo size 1200,800 noenhanced font 'sans,10' background '#ffffff'\n"
		"  set output '%s.png'\n  replot\n"
		"  set terminal svg size 1200,800 dynamic noenhanced font 'sans,12' background '#ffffff'\n"
		"}\n",
		name);
}

static bool write_script(FILE *f, void *user, rm_error *err)
{
	(void)err;
	const plot_ctx *p = user;
	const char *mode = rm_sched_mode_name(rm_search_runtime(p->s));
	double fit_gib = p->pool_gib > 0 ? p->pool_gib : p->usable_gib;
	char label[200];
	fprintf(f, "# gnuplot script written by remora search; run: gnuplot plots.gp\n"
		   "# the search's own figures (GiB = 2^30 bytes, tokens/s per GPU, ms)\n");
	if (p->winner)
		fprintf(f, "winner_tok = %.3f\nwinner_gib = %.4f\n", p->winner->tokens_per_s_per_gpu,
			(double)p->winner->peak_memory_bytes / (double)RM_GiB);
	if (p->base)
		fprintf(f, "as_written_tok = %.3f\nas_written_gib = %.4f\n", p->base->tokens_per_s_per_gpu,
			(double)p->base->peak_memory_bytes / (double)RM_GiB);
	fprintf(f, "hbm_gib = %.4f\nusable_gib = %.4f\n", p->hbm_gib, p->usable_gib);
	if (p->pool_gib > 0)
		fprintf(f, "bfc_pool_gib = %.4f\n", p->pool_gib);
	if (p->limit_gib > 0)
		fprintf(f, "xla_limit_gib = %.4f\ntracked_peak_gib = %.4f\n", p->limit_gib, p->tracked_gib);
	if (p->backward_ms >= 0)
		fprintf(f, "backward_ms = %.6f\n", p->backward_ms);
	fprintf(f, "fit_gib = %.4f\n", fit_gib);
	/* the marked points: their labels, two lines each (a double-quoted gnuplot string reads \\n) */
	fprintf(f, "$marks << EOD\n");
	if (p->winner)
		fprintf(f, "%.3f %.4f\n", p->winner->tokens_per_s_per_gpu, (double)p->winner->peak_memory_bytes / (double)RM_GiB);
	fprintf(f, "EOD\n$as_written << EOD\n");
	if (p->base)
		fprintf(f, "%.3f %.4f\n", p->base->tokens_per_s_per_gpu, (double)p->base->peak_memory_bytes / (double)RM_GiB);
	fprintf(f, "EOD\n");
	if (p->winner) {
		plot_label(p, p->winner, label, sizeof(label));
		fprintf(f,
			"set label 10 \"best plan: %s\\n%.0f tok/s/GPU, %.2f GiB\" at winner_tok, winner_gib left offset "
			"1.5,-1.5 boxed front font ',10' tc rgb '#000000'\n",
			label, p->winner->tokens_per_s_per_gpu, (double)p->winner->peak_memory_bytes / (double)RM_GiB);
	}
	if (p->base) {
		char vn[32];
		variant_name(p->sc, &p->base->c, vn, sizeof(vn));
		fprintf(f,
			"set label 11 \"the scenario as written: mb %lld, flags %s\\n%.0f tok/s/GPU, %.2f GiB%s\" at "
			"as_written_tok, as_written_gib left offset 1.5,-1.5 boxed front font ',10' tc rgb '#106010'\n",
			(long long)p->base->c.micro_batch, vn, p->base->tokens_per_s_per_gpu,
			(double)p->base->peak_memory_bytes / (double)RM_GiB, p->base->fits ? "" : ", does not fit");
	}
	fprintf(f,
		"png = strstrt(GPVAL_TERMINALS, 'pngcairo') > 0\n"
		"set terminal svg size 1200,800 dynamic noenhanced font 'sans,12' background '#ffffff'\n"
		"set style textbox opaque noborder\n"
		"set output 'pareto.svg'\n"
		"set title 'Candidates: throughput against peak memory, one Pareto front per runtime'\n"
		"set xlabel 'tokens/s per GPU'\nset ylabel 'peak device memory (GiB)'\nset grid\n"
		"set key outside below center horizontal maxcols 2 width -8\n"
		"set offsets 0, graph 0.45, graph 0.08, 0\nset yrange [0:*]\n"
		"plot 'candidates.dat' using 1:($3==1 && strcol(4) eq '%s' ? $2 : 1/0) with points pt 7 ps 0.4 lc rgb '#8080c0' "
		"title '%s: fits', \\\n"
		"     'candidates.dat' using 1:($3==1 && strcol(4) eq 'ideal' ? $2 : 1/0) with points pt 9 ps 0.4 lc rgb "
		"'#e0b070' title 'ideal bound: fits', \\\n"
		"     'candidates.dat' using 1:($3==0 ? $2 : 1/0) with points pt 6 ps 0.4 lc rgb '#c8c8c8' title 'does not fit "
		"(either runtime)', \\\n"
		"     'pareto-ideal.dat' using 1:2 with linespoints dt 2 pt 8 ps 0.8 lc rgb '#d08000' title 'ideal bound: its "
		"Pareto front', \\\n"
		"     'pareto.dat' using 1:2 with linespoints pt 7 ps 0.8 lc rgb '#d02020' title '%s: Pareto front', \\\n"
		"     'pareto.dat' using 1:($3==1 ? $2 : 1/0):4 with labels left offset 1,0 boxed font ',9' tc rgb '#a01010' "
		"notitle, \\\n"
		"     fit_gib with lines dt 2 lw 1.5 lc rgb '#404040' title sprintf('%s %%.2f GiB: a candidate fits below', "
		"fit_gib)",
		mode, p->rt, p->rt, p->pool_gib > 0 ? "BFC pool (xla.mem_fraction of HBM)" : "usable memory (HBM less context, NCCL buffers, workspace)");
	if (p->base)
		fprintf(f, ", \\\n     $as_written using 1:2 with points pt 5 ps 2 lc rgb '#208020' title 'the scenario as written'");
	if (p->winner)
		fprintf(f, ", \\\n     $marks using 1:2 with points pt 3 ps 3 lw 2 lc rgb '#000000' title 'best plan'");
	fprintf(f, "\n");
	cli_gnuplot_png(f, "pareto");
	if (!p->winner || p->n_pts == 0)
		return true;
	plot_label(p, p->winner, label, sizeof(label));
	fprintf(f,
		"set output 'winner-memory.svg'\nunset offsets\nunset label\nset key outside below center horizontal maxcols 2 width -8\n"
		"set title 'Best plan (%s): device memory over one step'\n"
		"set xlabel 'time (ms)'\nset ylabel 'device memory (GiB)'\nset yrange [0:hbm_gib * 1.08]\nset autoscale xfix\n",
		label);
	if (p->backward_ms >= 0)
		fprintf(f, "set arrow 1 from backward_ms, graph 0 to backward_ms, graph 1 nohead dt 3 lw 2 lc rgb '#208020'\n"
			   "set label 1 sprintf('forward | backward (first backward op at %%.2f ms)', backward_ms) at "
			   "backward_ms, graph 0.96 center boxed tc rgb '#106010'\n");
	fprintf(f, "plot 'winner-memory.dat' using 1:2 with steps lw 2 lc rgb '#2060c0' title 'allocated', \\\n"
		   "     hbm_gib with lines lw 1.5 lc rgb '#000000' title sprintf('HBM %%.2f GiB', hbm_gib), \\\n"
		   "     usable_gib with lines dt 2 lw 1.5 lc rgb '#404040' title sprintf('usable %%.2f GiB (HBM less CUDA "
		   "context, NCCL buffers, workspace)', usable_gib)");
	if (p->pool_gib > 0)
		fprintf(f, ", \\\n     bfc_pool_gib with lines dt 4 lw 1.5 lc rgb '#c06000' title sprintf('BFC pool %%.2f GiB "
			   "(xla.mem_fraction of HBM): the winner fits below', bfc_pool_gib)");
	if (p->limit_gib > 0)
		fprintf(f, ", \\\n     xla_limit_gib with lines dt 5 lw 1.5 lc rgb '#a000a0' title sprintf('XLA scheduler memory "
			   "limit %%.2f GiB, on LHS-tracked memory (I/O excluded; tracked peak %%.2f GiB)', xla_limit_gib, "
			   "tracked_peak_gib)");
	fprintf(f, "\n");
	cli_gnuplot_png(f, "winner-memory");
	return true;
}

/*
 * Runs `gnuplot plots.gp` in dir without a shell: the folder's name is never parsed by anything,
 * so quotes or $(...) in it run nothing. gnuplot is looked up on PATH by posix_spawnp; its output
 * goes to stderr (stdout may carry --json). Returns 0 when it ran and succeeded, ENOENT when there
 * is no gnuplot, another errno when it could not start, -1 when it failed (status in *status).
 */
int cli_run_gnuplot(const char *dir, int *status)
{
	posix_spawn_file_actions_t fa;
	if (posix_spawn_file_actions_init(&fa) != 0)
		return ENOMEM;
	int rc = posix_spawn_file_actions_addchdir_np(&fa, dir);
	if (rc == 0)
		rc = posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO);
	char *argv[] = {"gnuplot", "plots.gp", NULL};
	pid_t pid;
	if (rc == 0)
		rc = posix_spawnp(&pid, "gnuplot", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0)
		return rc;
	while (waitpid(pid, status, 0) < 0)
		if (errno != EINTR)
			return errno;
	return WIFEXITED(*status) && WEXITSTATUS(*status) == 0 ? 0 : -1;
}

int cli_render_plots(const char *dir, const char *const *png, int n_png, const char *run_for, const char *wrote_png,
		     const char *wrote_svg)
{
	rm_error err;
	rm_error_clear(&err);
	/* a PNG of an earlier run must not pass for this one's: gnuplot writes them anew or not at all */
	char path[1200];
	for (int i = 0; i < n_png; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, png[i]);
		if (unlink(path) != 0 && errno != ENOENT) {
			rm_error_set(&err, RM_IO, path, 0, 0, "cannot replace the earlier plot: %s", strerror(errno));
			return cli_fail(&err);
		}
	}
	int status = 0;
	int rc = cli_run_gnuplot(dir, &status);
	if (rc == ENOENT) {
		rm_log_warn("gnuplot not found on PATH: wrote the data and %s/plots.gp; install gnuplot (apt-get install "
			    "gnuplot-nox) and run it there for %s",
			    dir, run_for);
		return CLI_EXIT_OK;
	}
	if (rc > 0) {
		rm_error_set(&err, RM_IO, dir, 0, 0, "cannot run gnuplot: %s", strerror(rc));
		return cli_fail(&err);
	}
	if (rc < 0) {
		if (WIFEXITED(status))
			rm_error_set(&err, RM_IO, dir, 0, 0, "gnuplot failed on plots.gp (exit %d)", WEXITSTATUS(status));
		else
			rm_error_set(&err, RM_IO, dir, 0, 0, "gnuplot failed on plots.gp (signal %d)",
				     WIFSIGNALED(status) ? WTERMSIG(status) : 0);
		return cli_fail(&err);
	}
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s", dir, png[0]);
	if (stat(path, &st) != 0)
		rm_log_warn("this gnuplot has no pngcairo terminal: wrote the SVGs only (a gnuplot built with cairo, e.g. "
			    "Debian's gnuplot-nox, writes the PNGs too)");
	else
		fprintf(stderr, "remora: wrote %s/%s\n", dir, wrote_png);
	fprintf(stderr, "remora: wrote %s/%s\n", dir, wrote_svg);
	return CLI_EXIT_OK;
}

/* Writes one plot file dir/name through the atomic writer (remora/file.h). */
static bool plot_file(const char *dir, const char *name, rm_file_write_fn fn, plot_ctx *p, rm_error *err)
{
	char path[1200];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return rm_file_write(path, fn, p, err);
}

/*
 * Writes the plot folder: candidates.dat (every simulated candidate, its runtime), pareto.dat and
 * pareto-ideal.dat (one front per runtime, labelled), winner-memory.dat and plots.gp, then runs
 * gnuplot there for pareto.svg and winner-memory.svg, and the same as PNG where gnuplot has the
 * pngcairo terminal (a warning says when it has not). p carries the figures; returns the exit code.
 */
static int write_plots(const char *dir, plot_ctx *p)
{
	rm_error err;
	rm_error_clear(&err);
	int rc = cli_plot_dir_create(dir);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (!plot_file(dir, "candidates.dat", write_candidates, p, &err) ||
	    !plot_file(dir, "pareto.dat", write_pareto, p, &err) ||
	    !plot_file(dir, "pareto-ideal.dat", write_pareto_ideal, p, &err) ||
	    !plot_file(dir, "winner-memory.dat", write_memory, p, &err) || !plot_file(dir, "plots.gp", write_script, p, &err))
		return cli_fail(&err);
	bool memory = p->winner && p->n_pts > 0;
	const char *const png[] = {"pareto.png", "winner-memory.png"};
	return cli_render_plots(dir, png, 2, "pareto.svg, winner-memory.svg and their PNGs",
				memory ? "pareto.png and winner-memory.png" : "pareto.png",
				memory ? "pareto.svg and winner-memory.svg" : "pareto.svg");
}

/* The plot context of a search: its figures in GiB, the winner's memory timeline, XLA's limit and
 * the forward/backward boundary from wsim and wrep (NULL: a pipelined winner, none drawn). */
static plot_ctx plot_context(rm_search *s, const rm_scenario *sc, const char *rt, const rm_candidate_result *pareto,
			     int n_pareto, const rm_candidate_result *pareto_ideal, int n_pareto_ideal,
			     const rm_candidate_result *winner, const rm_candidate_result *base, const rm_sim *wsim,
			     const rm_schedule_report *wrep)
{
	const rm_memory_budget *mb = rm_search_memory_budget(s);
	plot_ctx p = {.s = s,
		      .sc = sc,
		      .rt = rt,
		      .pareto = pareto,
		      .n_pareto = n_pareto,
		      .pareto_ideal = pareto_ideal,
		      .n_pareto_ideal = n_pareto_ideal,
		      .winner = winner,
		      .base = base && base->ok ? base : NULL,
		      .hbm_gib = (double)mb->hbm_bytes / (double)RM_GiB,
		      .usable_gib = (double)mb->usable_bytes / (double)RM_GiB,
		      .pool_gib = (double)rm_search_jax_pool_bytes(s) / (double)RM_GiB,
		      .backward_ms = -1};
	if (wsim) {
		p.pts = rm_sim_memory_timeline(wsim, &p.n_pts);
		rm_time_ps bwd = 0, rec = 0;
		bool have_bwd = rm_sim_phase_start(wsim, RM_PPHASE_BWD, &bwd);
		/* a recomputation runs inside the backward: the earlier of the two starts it */
		if (rm_sim_phase_start(wsim, RM_PPHASE_RECOMPUTE, &rec) && (!have_bwd || rec < bwd)) {
			bwd = rec;
			have_bwd = true;
		}
		if (have_bwd)
			p.backward_ms = rm_time_to_s(bwd) * 1e3;
	}
	if (wrep && rm_search_runtime(s) == RM_SCHED_XLA && wrep->memory_limit_bytes > 0) {
		p.limit_gib = (double)wrep->memory_limit_bytes / (double)RM_GiB;
		p.tracked_gib = (double)wrep->tracked_peak_bytes / (double)RM_GiB;
	}
	return p;
}

/* Whether b folds into a's row of the table: candidates whose schedules are the same (a name
 * the backward never reads, a policy spelled two ways) give the same figures. */
static bool same_schedule(const rm_candidate_result *a, const rm_candidate_result *b)
{
	return a->step_time_s == b->step_time_s && a->peak_memory_bytes == b->peak_memory_bytes &&
	       a->c.micro_batch == b->c.micro_batch && a->c.ideal == b->c.ideal;
}

/*
 * The best rows of the scenario's runtime (fastest first; the ideal bound is a column, not rows), as many as the table needs to show top folded rows with each
 * row's count of same candidates complete: from 4 per row, doubled while the rows read end inside
 * a run of same candidates and more are stored. NULL with err when the store fails; *n rows.
 */
static rm_candidate_result *top_rows(rm_search *s, int64_t top, int *n, rm_error *err)
{
	int64_t stored = rm_search_rows(s), k = top * 4;
	for (;;) {
		rm_candidate_result *rows = rm_new(rm_candidate_result, (size_t)k);
		int got = rm_search_top(s, RM_SEARCH_XLA_ONLY, rows, (int)k, err);
		if (got < 0) {
			free(rows);
			return NULL;
		}
		int64_t lines = 0;
		int i = 0;
		while (i < got && lines < top) {
			int j = i + 1;
			while (j < got && same_schedule(&rows[i], &rows[j]))
				j++;
			lines++;
			i = j;
		}
		/* complete when every row was read, or a row past the last shown one proves it ended */
		if (got < k || k >= stored || k > INT32_MAX / 2 || (lines == top && i < got)) {
			*n = got;
			return rows;
		}
		free(rows);
		k *= 2;
	}
}

/* Marks variant "vN" as named in a report (print_variants gives its flags). */
static void note_variant(const char *vn, bool *shown)
{
	if (vn[0] == 'v' && vn[1] >= '0' && vn[1] <= '9')
		shown[atoi(vn + 1)] = true;
}

/* The flags of each variant a report named. */
static void print_variants(const rm_scenario *sc, const bool *shown)
{
	for (int v = 0; v < sc->n_search_flag_variants; v++)
		if (shown[v])
			printf("  flags v%d = search.flag_variants[%d], on top of the scenario's: %s\n", v, v,
			       sc->search_flag_variants[v]);
}

/* The ideal gap of r in percent: the share of tokens/s r's runtime gives up against the ideal
 * runtime at the same policy, micro-batch and layout (negative: faster), into *gap. 1 when there
 * is one, 0 when the ideal runtime's row is not in the space or did not run, -1 with err when the
 * store fails. */
static int ideal_gap(rm_search *s, const rm_candidate_result *r, double *gap, rm_error *err)
{
	int64_t ideal = rm_search_ideal_of(s, r->c.index);
	rm_candidate_result ir;
	int got = ideal >= 0 ? rm_search_result(s, ideal, &ir, err) : 0;
	if (got != 1)
		return got;
	if (!ir.ok || !(ir.tokens_per_s_per_gpu > 0))
		return 0;
	*gap = 100.0 * (1.0 - r->tokens_per_s_per_gpu / ir.tokens_per_s_per_gpu);
	return 1;
}

/*
 * The ranking table: the first top rows of best (the runtime's candidates, fastest first) with
 * runs of same schedules folded into "(+N same)", each with its ideal gap: the share of tokens/s
 * the runtime gives up against the ideal runtime (hand-tuned overlap, remora/schedule.h) at the
 * same policy, micro-batch and layout (negative: the runtime is faster there), then the flag
 * variants the rows name. Returns CLI_EXIT_OK, or the failure's exit code (a store error).
 */
static int print_table(rm_search *s, const rm_scenario *sc, const rm_candidate_result *best, int n_best, int64_t top,
		       const char *rt, rm_error *err)
{
	/* the # column as wide as the last row's number (at least 3), the policy's narrower by as
	 * much, so the columns after them stay where they are */
	int64_t rows = 0;
	for (int i = 0; i < n_best && rows < top; i++, rows++)
		while (i + 1 < n_best && same_schedule(&best[i], &best[i + 1]))
			i++;
	int nw = rows >= 1000 ? 4 : 3, pw = 47 - nw;
	printf("  %-*s %-*s %4s %-8s %10s %10s %6s %9s %10s %6s %9s\n", nw, "#", pw, "policy", "mb", "flags", "step ms",
	       "tok/s/GPU", "MFU", "peak GiB", "exposed ms", "sync", "ideal gap");
	bool shown_variant[RM_SCENARIO_MAX_LIST] = {false}, any_gap = false;
	int shown = 0;
	for (int i = 0; i < n_best && shown < top; i++) {
		const rm_candidate_result *r = &best[i];
		/* candidates whose schedules are the same (a name the backward never reads, policies
		 * spelled two ways) give the same numbers: fold them into the row above */
		int same = 0;
		while (i + same + 1 < n_best && same_schedule(r, &best[i + same + 1]))
			same++;
		char vn[32], label[64], gap[16] = "-";
		variant_name(sc, &r->c, vn, sizeof(vn));
		note_variant(vn, shown_variant);
		if (same)
			snprintf(label, sizeof(label), "%.34s (+%d same)", r->c.label, same);
		else
			snprintf(label, sizeof(label), "%s", r->c.label);
		double g;
		int got = ideal_gap(s, r, &g, err);
		if (got < 0)
			return cli_fail(err);
		if (got == 1) {
			snprintf(gap, sizeof(gap), "%+.1f%%", g);
			any_gap = true;
		}
		printf("  %-*d %-*.*s %4lld %-8s %10.2f %10.0f %5.1f%% %9.2f %10.2f %6d %9s\n", nw, ++shown, pw, pw, label,
		       (long long)r->c.micro_batch, vn, r->step_time_s * 1e3, r->tokens_per_s_per_gpu, 100 * r->mfu,
		       (double)r->peak_memory_bytes / (double)RM_GiB, r->exposed_comm_s * 1e3, r->sync, gap);
		i += same;
	}
	if (shown == 0)
		printf("  (no candidate of %s fits)\n", rt);
	print_variants(sc, shown_variant);
	if (any_gap)
		printf("  ideal gap: tokens/s %s gives up against the ideal runtime (hand-tuned overlap) at the same "
		       "policy and micro-batch\n",
		       rt);
	return CLI_EXIT_OK;
}

/* The runtime's candidate of least peak memory among those simulated (rm_search_each). */
typedef struct least_peak {
	rm_candidate_result best;
	bool have;
} least_peak;

static void least_peak_row(const rm_candidate_result *r, void *user)
{
	least_peak *lp = user;
	if (r->ok && !r->c.ideal && (!lp->have || r->peak_memory_bytes < lp->best.peak_memory_bytes)) {
		lp->best = *r;
		lp->have = true;
	}
}

/*
 * When no candidate of the runtime fits: the one closest to fitting (least peak), simulated again
 * for what takes its memory at the peak, and the changes that would fit it (cli_print_fit_hint).
 * doc NULL: printed; else set on doc as "closest" (the candidate, null when none ran without an
 * error) and "hint" (cli_print_fit_hint's object; null when its memory cannot be broken down).
 * Returns CLI_EXIT_OK, or the failure's exit code.
 */
static int explain_no_fit(rm_search *s, const rm_scenario *sc, const char *rt, json_t *doc, rm_error *err)
{
	least_peak lp = {.have = false};
	if (rm_search_each(s, least_peak_row, &lp, err) != RM_OK)
		return cli_fail(err);
	int64_t pool = rm_search_jax_pool_bytes(s);
	int64_t cap = pool > 0 ? pool : rm_search_memory_budget(s)->usable_bytes;
	char b1[32], b2[32];
	if (!lp.have) {
		if (doc) {
			json_object_set_new(doc, "closest", json_null());
			json_object_set_new(doc, "hint", json_null());
		} else
			printf("\n  no %s candidate fits in memory (none simulated without an error)\n", rt);
		return CLI_EXIT_OK;
	}
	const rm_candidate_result *c = &lp.best;
	json_t *hint = NULL;
	if (doc) {
		json_t *cj = result_json(sc, c, rm_search_runtime(s));
		json_object_set_new(cj, "memory_limit_bytes", json_integer(cap));
		json_object_set_new(cj, "memory_limit", json_string(pool > 0 ? "the BFC pool" : "usable"));
		json_object_set_new(doc, "closest", cj);
	} else
		printf("\nbest plan for %s: DOES NOT FIT. Closest: %s, mb %lld, peak %s of %s %s\n", rt, c->c.label,
		       (long long)c->c.micro_batch, rm_format_bytes(c->peak_memory_bytes, b1, sizeof(b1)),
		       rm_format_bytes(cap, b2, sizeof(b2)), pool > 0 ? "in the BFC pool" : "usable");
	rm_scenario_resolved res;
	rm_schedule_report rep;
	memset(&res, 0, sizeof(res));
	memset(&rep, 0, sizeof(rep));
	rm_program *prog = NULL;
	rm_sim *sim = NULL;
	rm_breakdown bd;
	if (rm_search_resolve_candidate(s, &c->c, &res, err) == RM_OK && res.train.pp <= 1 &&
	    (prog = rm_schedule_build(&res.sched, &rep, err)) != NULL) {
		rm_sim_options so = {.scheduler_built = true,
				     .hw_queues = res.hw_queues,
				     .cost = res.sched.cost,
				     .memory_headroom_bytes = res.memory.headroom_bytes};
		sim = rm_sim_create(prog, &res.hw, &so, err);
		if (sim && rm_sim_run(sim, err) == RM_OK && rm_sim_breakdown(sim, &res.memory, &bd, err) == RM_OK) {
			hint = doc ? json_object() : NULL;
			cli_print_fit_hint(&bd, c->peak_memory_bytes, cap, &res.train, res.gpus,
					   sc->gpus_per_node ? sc->gpus_per_node : (int64_t)res.hw.gpus_per_node, NULL, 0,
					   true, hint);
		} else
			rm_log_warn("cannot break the closest candidate's memory down: %s", err->msg);
	}
	if (doc)
		json_object_set_new(doc, "hint", hint ? hint : json_null());
	rm_sim_destroy(sim);
	rm_program_destroy(prog);
	rm_schedule_report_finish(&rep);
	rm_scenario_resolved_finish(&res);
	return CLI_EXIT_OK;
}

/* Prints every stored row of the space in index order, reals exactly (C99 hex floats), so two
 * sweeps' databases compare with diff (the tests' dump of what rank files and merges hold). */
static void print_row(const rm_candidate_result *r, void *user)
{
	(void)user;
	printf("%lld\t%s\t%s\tmb=%lld\t%s\tok=%d\tfits=%d\tstep=%a\ttok=%a\tmfu=%a\tpeak=%lld\texposed=%a\tsync=%d\t%s\n",
	       (long long)r->c.index, r->c.key, r->c.label, (long long)r->c.micro_batch, r->c.ideal ? "ideal" : "xla", r->ok,
	       r->fits, r->step_time_s, r->tokens_per_s_per_gpu, r->mfu, (long long)r->peak_memory_bytes, r->exposed_comm_s,
	       r->sync, r->error);
}

enum { SWEEP_PRINT = -1 };

/* Set by SIGINT during a sweep into a --db (the sweep then stops after its next row). */
static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
	(void)sig;
	interrupted = 1;
}

/*
 * Runs the sweep of this process (its shard under --shard or mpirun); under MPI gathers the
 * ranks' rows into the one database and reopens it on rank 0. Returns SWEEP_PRINT when this
 * process goes on to print the ranking, else the exit code (a rank other than 0, a shard, a
 * --stop-after that stopped, --rows, a failure). *out: the progress the output reports, every
 * rank's under MPI (cli_sweep_gather); *damaged: the rows of the database that failed their
 * checksum (recomputed).
 */
static int sweep(rm_search *s, const rm_scenario *sc, cli_sweep *sw, int jobs, int64_t stop_after, bool json,
		 bool dump_rows, rm_search_progress *out, int64_t *damaged, rm_error *err)
{
	*damaged = 0;
	if (sw->mpi && cli_sweep_is_root(sw)) {
		/* rank 0 opens the one database first, as one process would: rows that fail their
		 * checksum are counted and deleted there, and the ranks' shards recompute them */
		rm_status ost = rm_search_reopen(s, sw->db, err);
		*damaged = rm_search_damaged_rows(s);
		if (ost == RM_OK)
			ost = rm_search_reopen(s, NULL, err);
		if (ost != RM_OK)
			rm_log_warn("%s", err->msg); /* the rank's sweep reports the database's error */
	}
	/* no rank reads the database (resume_from) while rank 0 may still be creating it */
	cli_sweep_reduce(sw, 0, false);
	rm_search_options opt = {.jobs = jobs, .stop_after = stop_after};
	cli_sweep_options(sw, &opt);
	/* -vv: a line per candidate (the progress line would be torn by them); else on a terminal,
	 * one progress line with the rate and ETA, nothing on a pipe */
	if (rm_log_get_level() >= RM_LOG_DEBUG && cli_sweep_is_root(sw)) {
		opt.on_row = row_line;
		opt.progress_user = (void *)sc;
	} else if (isatty(STDERR_FILENO) && !json && cli_sweep_is_root(sw)) {
		opt.progress = progress_line;
	}
	/* Ctrl-C during a sweep into a --db (one process): the rows so far are committed and the
	 * command says how many the database holds, exit 130 as a shell gives a SIGINT; a second
	 * Ctrl-C kills at once (SA_RESETHAND) */
	struct sigaction old_int;
	bool catching = sw->final_db && !sw->mpi;
	if (catching) {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_sigint;
		sa.sa_flags = SA_RESETHAND | SA_RESTART;
		sigemptyset(&sa.sa_mask);
		interrupted = 0;
		catching = sigaction(SIGINT, &sa, &old_int) == 0;
		if (catching)
			opt.interrupt = &interrupted;
	}
	rm_search_progress prog = {0};
	rm_status st = rm_search_run(s, &opt, &prog, err);
	if (catching) {
		sigaction(SIGINT, &old_int, NULL);
		if (interrupted && st == RM_OK) {
			fprintf(stderr, "%sremora: interrupted: %lld of %lld candidates stored in %s; rerun the same command to "
					"resume\n",
				opt.progress ? "\n" : "", (long long)rm_search_rows(s), (long long)rm_search_count(s),
				sw->final_db);
			return CLI_EXIT_INTERRUPTED;
		}
	}
	if (sw->mpi) {
		rm_error e;
		rm_error_clear(&e);
		rm_search_reopen(s, NULL, &e); /* closes this rank's file for rank 0's merge */
		st = cli_sweep_gather(sw, &prog, st, err);
		if (st == RM_OK && cli_sweep_is_root(sw))
			st = rm_search_reopen(s, sw->db, err);
	}
	*out = prog;
	if (!sw->mpi)
		*damaged = rm_search_damaged_rows(s);
	if (st != RM_OK)
		return cli_fail(err);
	if (!cli_sweep_is_root(sw))
		return CLI_EXIT_OK;
	if (stop_after > 0 && prog.done < prog.total) {
		fprintf(stderr, "remora: stopped after %lld new rows (--stop-after); run again to resume\n",
			(long long)stop_after);
		return CLI_EXIT_OK;
	}
	if (sw->shards > 1 && !sw->mpi && json) {
		json_t *doc = json_object();
		json_object_set_new(doc, "schema", json_string("remora.search.shard/1"));
		json_object_set_new(doc, "db", rm_json_string(opt.db_path));
		json_object_set_new(doc, "shard", json_integer(sw->shard + 1));
		json_object_set_new(doc, "shards", json_integer(sw->shards));
		json_object_set_new(doc, "candidates_total", json_integer(rm_search_count(s)));
		json_object_set_new(doc, "candidates_in_shard", json_integer(prog.total));
		json_object_set_new(doc, "simulated_now", json_integer(prog.done - prog.skipped));
		return cli_print_json(doc);
	}
	if (sw->shards > 1 && !sw->mpi) {
		printf("%s: shard %d/%d: %lld of %lld candidates, %lld simulated now%s; merge the shards with remora "
		       "merge OUT.db and search --db OUT.db\n",
		       opt.db_path, sw->shard + 1, sw->shards, (long long)prog.total, (long long)rm_search_count(s),
		       (long long)(prog.done - prog.skipped), prog.skipped ? " (the rest were already in the database)" : "");
		return CLI_EXIT_OK;
	}
	if (dump_rows)
		return rm_search_each(s, print_row, NULL, err) == RM_OK ? CLI_EXIT_OK : cli_fail(err);
	return SWEEP_PRINT;
}

int cli_cmd_search(int argc, char **argv)
{
	enum { OPT_STOP = 256, OPT_SHARD, OPT_ROWS };
	static const struct option longopts[] = {
		{"set", required_argument, NULL, 's'}, {"db", required_argument, NULL, 'd'},
		{"jobs", required_argument, NULL, 'J'}, {"top", required_argument, NULL, 'k'},
		{"json", no_argument, NULL, 'j'},       {"trace", required_argument, NULL, 't'},
		{"plot", required_argument, NULL, 'p'}, {"stop-after", required_argument, NULL, OPT_STOP},
		{"shard", required_argument, NULL, OPT_SHARD}, {"rows", no_argument, NULL, OPT_ROWS},
		{"help", no_argument, NULL, 'h'},       {0, 0, 0, 0},
	};
	char **sets = rm_new(char *, (size_t)argc + 1);
	int n_sets = 0, c;
	const char *db = NULL, *trace = NULL, *plot = NULL;
	int64_t jobs = 1, top = 10, stop_after = 0;
	bool json = false, dump_rows = false;
	int shard = 0, shards = 0;
	int rc = CLI_EXIT_OK;
	const char *shortopts = "s:d:J:k:jt:p:h";
	while ((c = cli_getopt(argc, argv, shortopts, longopts)) != -1) {
		switch (c) {
		case 's':
			sets[n_sets++] = optarg;
			break;
		case 'd':
			if (!*optarg) {
				free(sets);
				return cli_usage_error("search", "--db needs a file name (an empty one would be a temporary database)");
			}
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
		case 'p':
			if (!*optarg) {
				free(sets);
				return cli_usage_error("search", c == 't' ? "--trace needs a file name" : "--plot needs a directory");
			}
			if (c == 't')
				trace = optarg;
			else
				plot = optarg;
			break;
		case OPT_STOP:
			if (!cli_parse_positive("search", "--stop-after", optarg, &stop_after)) {
				free(sets);
				return CLI_EXIT_USAGE;
			}
			break;
		case OPT_SHARD:
			if (!cli_parse_shard("search", optarg, &shard, &shards)) {
				free(sets);
				return CLI_EXIT_USAGE;
			}
			break;
		case OPT_ROWS:
			dump_rows = true;
			break;
		case 'h':
			search_usage(stdout);
			free(sets);
			return CLI_EXIT_OK;
		default:
			free(sets);
			return cli_option_error("search", argc, argv, shortopts, longopts);
		}
	}
	if (optind >= argc || optind + 1 != argc) {
		free(sets);
		return optind >= argc ? cli_usage_error("search", "missing SCENARIO")
				      : cli_usage_error("search", "unexpected argument '%s'%s", argv[optind + 1],
								cli_jobs_hint(argc, argv, optind));
	}
	if (shards > 1 && !db) {
		free(sets);
		return cli_usage_error("search", "--shard needs --db: each shard keeps its rows in its own file for remora merge");
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
	{
		/* no output may land on what the search reads: the scenario, its model, the database */
		static const char *const plot_files[] = {"candidates.dat", "pareto.dat", "pareto-ideal.dat",
							 "winner-memory.dat", "plots.gp", "pareto.svg",
							 "winner-memory.svg", "pareto.png", "winner-memory.png"};
		enum { N_PLOT_FILES = sizeof(plot_files) / sizeof(plot_files[0]) };
		char model[1100], plot_paths[N_PLOT_FILES][1100];
		const char *outs[N_PLOT_FILES + 1] = {trace};
		int n_out = 1;
		for (int i = 0; plot && i < N_PLOT_FILES; i++) {
			snprintf(plot_paths[i], sizeof(plot_paths[i]), "%s/%s", plot, plot_files[i]);
			outs[n_out++] = plot_paths[i];
		}
		const char *ins[] = {argv[optind], rm_scenario_model_file(&sc, model, sizeof(model)), db};
		int crc = cli_check_outputs("search", outs, n_out, ins, 3);
		if (crc != CLI_EXIT_OK)
			return crc;
		/* the outputs must be writable before the sweep runs, not found unwritable after it */
		rm_error werr;
		rm_error_clear(&werr);
		if (trace && !rm_file_check_writable(trace, &werr))
			return cli_fail(&werr);
		if (plot && ((crc = cli_plot_dir_check("search", plot)) != CLI_EXIT_OK ||
			     (crc = cli_plot_dir_create(plot)) != CLI_EXIT_OK))
			return crc;
	}
	cli_sweep sw;
	rc = cli_sweep_begin("search", &sw, db, shard, shards);
	if (rc != CLI_EXIT_OK) {
		cli_sweep_end(&sw);
		return rc;
	}
	rm_search *s = rm_search_create(&sc, rm_calib_hw_resolver, &err);
	if (!s) {
		rc = cli_fail(&err);
		cli_sweep_end(&sw);
		return rc;
	}
	rm_search_progress prog_of;
	int64_t damaged = 0;
	rc = sweep(s, &sc, &sw, (int)jobs, stop_after, json, dump_rows, &prog_of, &damaged, &err);
	if (rc != SWEEP_PRINT) {
		rm_search_destroy(s);
		cli_sweep_end(&sw);
		return rc;
	}
	rc = CLI_EXIT_OK;
	/* four times as many rows as shown, so that plans equal to the row above can be folded */
	int n_best = 0;
	rm_candidate_result *best = top_rows(s, top, &n_best, &err);
	rm_candidate_result best_xla, best_ideal;
	bool have_xla = rm_search_top(s, RM_SEARCH_XLA_ONLY, &best_xla, 1, &err) == 1;
	bool have_ideal = rm_search_top(s, RM_SEARCH_IDEAL_ONLY, &best_ideal, 1, &err) == 1;
	rm_candidate_result *pareto = rm_new(rm_candidate_result, 256);
	/* one front per runtime: the scenario's (the winner is on it), the ideal bound's apart */
	int n_pareto = rm_search_pareto_of(s, RM_SEARCH_XLA_ONLY, pareto, 256, &err);
	rm_candidate_result *pareto_ideal = rm_new(rm_candidate_result, 256);
	int n_pareto_ideal = n_pareto < 0 ? 0 : rm_search_pareto_of(s, RM_SEARCH_IDEAL_ONLY, pareto_ideal, 256, &err);
	rm_candidate_result base;
	bool have_base = rm_search_as_written(s, &base, &err);
	int64_t rows = rm_search_rows(s);
	int64_t not_fitting = 0;
	(void)not_fitting;
	if (!best || n_pareto < 0 || n_pareto_ideal < 0) {
		rc = cli_fail(&err);
		goto out;
	}
	bool fsdp2 = rm_search_runtime(s) == RM_SCHED_FSDP2;
	const char *rt = fsdp2 ? "PyTorch FSDP2" : "XLA";
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
		bool resolved = rm_search_resolve_candidate(s, &wc, &wres, &err) == RM_OK;
		bool pipelined = resolved && wres.train.pp > 1;
		if (pipelined) {
			/* a pipelined step has no one program to trace yet: the rest is written */
			rm_log_warn("the winner (%s) is pipelined: no trace or memory timeline for it (a pipelined step is "
				    "simulated stage by stage)",
				    wc.label);
			if (plot) {
				plot_ctx pc = plot_context(s, &sc, rt, pareto, n_pareto, pareto_ideal, n_pareto_ideal, &best_xla,
							   have_base ? &base : NULL, NULL, NULL);
				rc = write_plots(plot, &pc);
				if (rc != CLI_EXIT_OK)
					goto out_w;
			}
		} else if (resolved && (wprog = rm_schedule_build(&wres.sched, &wrep, &err)) != NULL) {
			rm_sim_options so = {.scheduler_built = true,
					     .hw_queues = wres.hw_queues,
					     .memory_timeline = true,
					     .cost = wres.sched.cost,
					     .memory_headroom_bytes = wres.memory.headroom_bytes};
			wsim = rm_sim_create(wprog, &wres.hw, &so, &err);
			have_w = wsim && rm_sim_run(wsim, &err) == RM_OK;
		}
		if (!have_w && !pipelined) {
			rc = cli_fail(&err);
			goto out_w;
		}
		/* atomically onto a regular file, straight through to a device or FIFO (remora/file.h) */
		if (have_w && trace && !rm_sim_write_trace_file(wsim, trace, &err)) {
			rc = cli_fail(&err);
			goto out_w;
		}
		if (have_w && plot) {
			plot_ctx pc = plot_context(s, &sc, rt, pareto, n_pareto, pareto_ideal, n_pareto_ideal, &best_xla,
						   have_base ? &base : NULL, wsim, &wrep);
			rc = write_plots(plot, &pc);
			if (rc != CLI_EXIT_OK)
				goto out_w;
		}
	} else if (plot) {
		/* nothing of the runtime fits: the candidates and the as-written point, no winner */
		plot_ctx pc = plot_context(s, &sc, rt, pareto, n_pareto, pareto_ideal, n_pareto_ideal, NULL,
					   have_base ? &base : NULL, NULL, NULL);
		rc = write_plots(plot, &pc);
		if (rc != CLI_EXIT_OK)
			goto out_w;
	}
	char flags[4096];
	if (json) {
		json_t *doc = json_object();
		json_object_set_new(doc, "schema", json_string("remora.search/1"));
		json_object_set_new(doc, "scenario", rm_json_string(sc.path));
		json_object_set_new(doc, "candidates_total", json_integer(rm_search_count(s)));
		json_object_set_new(doc, "candidates_evaluated", json_integer(rows));
		if (have_xla) {
			json_t *b = result_json(&sc, &best_xla, rm_search_runtime(s));
			candidate_flags(&sc, &best_xla, flags, sizeof(flags));
			if (rm_search_runtime(s) == RM_SCHED_XLA)
				json_object_set_new(b, "xla_flags", rm_json_string(flags));
			json_object_set_new(doc, "best", b);
		} else {
			json_object_set_new(doc, "best", json_null());
		}
		if (have_ideal)
			json_object_set_new(doc, "best_ideal", result_json(&sc, &best_ideal, rm_search_runtime(s)));
		if (have_base)
			json_object_set_new(doc, "as_written", result_json(&sc, &base, rm_search_runtime(s)));
		if (have_base && have_xla && base.ok && base.fits)
			json_object_set_new(doc, "speedup_vs_as_written",
					    json_real(best_xla.tokens_per_s_per_gpu / base.tokens_per_s_per_gpu));
		/* the table's rows: same schedules folded into the first of them ("same": how many more),
		 * each with its ideal gap */
		json_t *arr = json_array();
		for (int i = 0, shown = 0; i < n_best && shown < top; i++, shown++) {
			int same = 0;
			while (i + same + 1 < n_best && same_schedule(&best[i], &best[i + same + 1]))
				same++;
			json_t *o = result_json(&sc, &best[i], rm_search_runtime(s));
			json_object_set_new(o, "same", json_integer(same));
			double g;
			int got = ideal_gap(s, &best[i], &g, &err);
			if (got < 0) {
				json_decref(o);
				json_decref(arr);
				json_decref(doc);
				rc = cli_fail(&err);
				goto out_w;
			}
			json_object_set_new(o, "ideal_gap_pct", got == 1 ? json_real(g) : json_null());
			json_array_append_new(arr, o);
			i += same;
		}
		json_object_set_new(doc, "top", arr);
		if (!have_xla) {
			rc = explain_no_fit(s, &sc, rt, doc, &err);
			if (rc != CLI_EXIT_OK) {
				json_decref(doc);
				goto out_w;
			}
		}
		arr = json_array();
		for (int i = 0; i < n_pareto; i++)
			json_array_append_new(arr, result_json(&sc, &pareto[i], rm_search_runtime(s)));
		json_object_set_new(doc, "pareto", arr);
		arr = json_array();
		for (int i = 0; i < n_pareto_ideal; i++)
			json_array_append_new(arr, result_json(&sc, &pareto_ideal[i], rm_search_runtime(s)));
		json_object_set_new(doc, "pareto_ideal", arr);
		rc = cli_print_json(doc);
		goto out_w;
	}
	if (damaged > 0)
		printf("%s: %lld stored rows failed their checksum and were recomputed\n", db ? db : "database",
		       (long long)damaged);
	printf("%s: %lld candidates in the space, %lld simulated now%s\n\n", sc.path, (long long)rm_search_count(s),
	       (long long)(prog_of.done - prog_of.skipped),
	       prog_of.skipped ? " (the rest were already in the database)" : "");
	rc = print_table(s, &sc, best, n_best, top, rt, &err);
	if (rc != CLI_EXIT_OK)
		goto out_w;
	if (!have_xla) {
		rc = explain_no_fit(s, &sc, rt, NULL, &err);
		goto out_w;
	}
	/* the best XLA candidate is what a JAX user can paste */
	const rm_candidate_result *w = &best_xla;
	candidate_flags(&sc, w, flags, sizeof(flags));
	char wvn[32];
	variant_name(&sc, &w->c, wvn, sizeof(wvn));
	if (fsdp2)
		printf("\nbest plan for %s (%s, mb %lld; the activations to keep, with JAX's policy names):\n", rt,
		       w->c.label, (long long)w->c.micro_batch);
	else
		printf("\nbest plan for %s (%s, mb %lld, flags %s; paste these):\n", rt, w->c.label,
		       (long long)w->c.micro_batch, wvn);
	{
		rm_remat_policy *p = rm_remat_policy_parse(w->c.policy, NULL);
		char pol[4096];
		if (p)
			printf("  policy=%s\n", rm_remat_policy_format(p, pol, sizeof(pol)));
		rm_remat_policy_destroy(p);
	}
	if (!fsdp2) {
		int version = rm_xla_version_find(sc.xla_version);
		if (version > 0)
			printf("  XLA_FLAGS=\"%s\"   (the flags you gave, and those that differ from the defaults of JAX %s's "
			       "XLA)\n",
			       flags, rm_xla_version_at(version)->name);
		else
			printf("  XLA_FLAGS=\"%s\"   (the flags you gave, and those that differ from remora's unversioned XLA "
			       "defaults, JAX 0.4.30's with the LHS flag true; xla.version names a release)\n",
			       flags);
	}
	printf("  micro-batch  = %lld\n", (long long)w->c.micro_batch);
	if (w->c.parallelism[0])
		printf("  parallelism  = %s   (search.parallelism; --set each)\n", w->c.parallelism);
	const rm_memory_budget *mb = rm_search_memory_budget(s);
	int64_t pool = rm_search_jax_pool_bytes(s);
	printf("  step %.2f ms, %.0f tokens/s per GPU, MFU %.1f%%, peak %.2f of %.2f GiB %s, %d of %d collectives "
	       "async\n",
	       w->step_time_s * 1e3, w->tokens_per_s_per_gpu, 100 * w->mfu, (double)w->peak_memory_bytes / (double)RM_GiB,
	       (double)(pool > 0 ? pool : mb->usable_bytes) / (double)RM_GiB, pool > 0 ? "in the BFC pool" : "usable",
	       w->async, w->collectives);
	if (rm_memory_budget_tight(w->peak_memory_bytes, mb->usable_bytes))
		printf("  WARNING: the peak is within %.2f GiB of usable memory (HBM less %.2f GiB of CUDA context, NCCL "
		       "buffers and workspaces); allocator fragmentation can take more: keep a margin or take the next "
		       "plan\n",
		       (double)(mb->usable_bytes - w->peak_memory_bytes) / (double)RM_GiB,
		       (double)mb->headroom_bytes / (double)RM_GiB);
	if (have_base && base.ok) {
		if (base.fits)
			printf("  %.2fx the scenario as written (%.0f tokens/s per GPU, %d collectives on the compute "
			       "stream, %d by the memory rules)\n",
			       w->tokens_per_s_per_gpu / base.tokens_per_s_per_gpu, base.tokens_per_s_per_gpu, base.sync,
			       base.sync_memory_limit);
		else
			printf("  the scenario as written does not fit (%.2f GiB of %.2f %s)\n",
			       (double)base.peak_memory_bytes / (double)RM_GiB,
			       (double)(pool > 0 ? pool : rm_search_memory_budget(s)->usable_bytes) / (double)RM_GiB,
			       pool > 0 ? "in the BFC pool" : "usable");
	}
	if (have_ideal) {
		/* without FSDP (fsdp 1: replicas only) the ideal runtime is a data-parallel one */
		const char *ideal_name = sc.fsdp == 1 ? "data-parallel" : "FSDP";
		double gap = 100.0 * (1.0 - w->tokens_per_s_per_gpu / best_ideal.tokens_per_s_per_gpu);
		if (gap >= 0.05)
			printf("  a hand-tuned %s runtime (ideal mode: %s, micro-batch %lld) would reach %.0f tokens/s "
			       "per GPU: %s leaves %.1f%% on the table\n",
			       ideal_name, best_ideal.c.label, (long long)best_ideal.c.micro_batch, best_ideal.tokens_per_s_per_gpu, rt, gap);
		else
			/* overlap is not free (collectives hold SMs and HBM): the ideal runtime's wider
			 * windows can cost more than they hide */
			printf("  a hand-tuned %s runtime (ideal mode: %s, micro-batch %lld) would reach %.0f tokens/s "
			       "per GPU: %s's plan is as fast (%.1f%% faster)\n",
			       ideal_name, best_ideal.c.label, (long long)best_ideal.c.micro_batch, best_ideal.tokens_per_s_per_gpu, rt,
			       -gap);
	}
	printf("\nPareto front of the %s candidates (tokens/s per GPU against peak memory):\n", rt);
	bool front_variant[RM_SCENARIO_MAX_LIST] = {false};
	for (int i = 0; i < n_pareto; i++) {
		char vn[32];
		variant_name(&sc, &pareto[i].c, vn, sizeof(vn));
		note_variant(vn, front_variant);
		printf("  %9.0f tok/s/GPU %10.2f ms %8.2f GiB  %s, mb %lld", pareto[i].tokens_per_s_per_gpu,
		       pareto[i].step_time_s * 1e3, (double)pareto[i].peak_memory_bytes / (double)RM_GiB, pareto[i].c.label,
		       (long long)pareto[i].c.micro_batch);
		if (!fsdp2)
			printf(", flags %s", vn);
		printf("%s\n", pareto[i].c.index == w->c.index ? "   <- best plan" : "");
	}
	print_variants(&sc, front_variant);
	if (n_pareto_ideal > 0)
		printf("  (the ideal runtime's own front: --json, \"pareto_ideal\")\n");
out_w:
	rm_sim_destroy(wsim);
	rm_program_destroy(wprog);
	rm_schedule_report_finish(&wrep);
	rm_scenario_resolved_finish(&wres);
out:
	free(best);
	free(pareto);
	free(pareto_ideal);
	rm_search_destroy(s);
	cli_sweep_end(&sw);
	return rc;
}
