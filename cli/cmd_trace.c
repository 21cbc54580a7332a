/* `remora trace import FILE|DIR...` and `remora trace report FILE|DIR... [--json]` (docs/trace.md). */
#include <dirent.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "remora/json.h"
#include "remora/trace.h"

static void trace_usage(FILE *out)
{
	fprintf(out, "usage: remora trace import FILE|DIR...\n"
		     "       remora trace report FILE|DIR... [--json]\n\n"
		     "Reads profiler traces in Chrome Trace Event JSON, plain or gzip: PyTorch profiler "
		     "(Kineto)\ntraces and JAX profiles exported as Perfetto/Chrome JSON. One file per rank; "
		     "a directory\nstands for its *.json and *.json.gz files in name order.\n\n"
		     "  import   one line per file: events read, GPU kernels, streams, devices, rank\n"
		     "  report   per rank and device: the step (each ProfilerStep#N and their median, else "
		     "the span\n           of the GPU events), busy time per stream, compute and "
		     "communication busy time,\n           exposed communication, idle time, collectives "
		     "on the compute stream, time\n           by kernel class and by NCCL kernel; every "
		     "time a union of intervals\n\n"
		     "options:\n"
		     "  -j, --json   machine-readable output (report)\n"
		     "  -h, --help   this help\n");
}

static bool is_trace_name(const char *n)
{
	size_t l = strlen(n);
	return n[0] != '.' && ((l > 5 && strcmp(n + l - 5, ".json") == 0) || (l > 8 && strcmp(n + l - 8, ".json.gz") == 0));
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

bool cli_trace_files(int argc, char **argv, char ***files, int *n)
{
	*files = NULL;
	*n = 0;
	for (int i = 0; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
			DIR *d = opendir(argv[i]);
			if (!d) {
				fprintf(stderr, "remora: %s: error: cannot read the directory\n", argv[i]);
				goto fail;
			}
			int first = *n;
			struct dirent *de;
			while ((de = readdir(d)) != NULL) {
				if (!is_trace_name(de->d_name))
					continue;
				size_t len = strlen(argv[i]) + strlen(de->d_name) + 2;
				char *p = rm_xmalloc(len);
				snprintf(p, len, "%s/%s", argv[i], de->d_name);
				*files = rm_xrealloc(*files, (size_t)(*n + 1) * sizeof(char *));
				(*files)[(*n)++] = p;
			}
			closedir(d);
			if (*n == first) {
				fprintf(stderr, "remora: %s: error: no *.json or *.json.gz trace in this directory\n",
					argv[i]);
				goto fail;
			}
			qsort(*files + first, (size_t)(*n - first), sizeof(char *), cmp_str);
		} else {
			*files = rm_xrealloc(*files, (size_t)(*n + 1) * sizeof(char *));
			(*files)[(*n)++] = rm_xstrdup(argv[i]);
		}
	}
	return true;
fail:
	for (int i = 0; i < *n; i++)
		free((*files)[i]);
	free(*files);
	*files = NULL;
	*n = 0;
	return false;
}

static json_t *fig_json(const rm_trace_fig *f, int n_streams, int n_nccl)
{
	json_t *o = json_object();
	json_object_set_new(o, "step_s", json_real(f->step_s));
	json_object_set_new(o, "gpu_busy_s", json_real(f->gpu_busy_s));
	json_object_set_new(o, "compute_busy_s", json_real(f->compute_busy_s));
	json_object_set_new(o, "comm_busy_s", json_real(f->comm_busy_s));
	json_object_set_new(o, "exposed_comm_s", json_real(f->exposed_comm_s));
	json_object_set_new(o, "idle_s", json_real(f->idle_s));
	json_t *coc = json_object();
	json_object_set_new(coc, "count", json_integer(f->coll_on_compute_count));
	json_object_set_new(coc, "seconds", json_real(f->coll_on_compute_s));
	json_object_set_new(o, "collectives_on_compute_stream", coc);
	json_t *cls = json_object();
	for (int c = 0; c < RM_TRACE_CLASS_COUNT; c++) {
		json_t *e = json_object();
		json_object_set_new(e, "seconds", json_real(f->class_s[c]));
		json_object_set_new(e, "count", json_integer(f->class_count[c]));
		if (c == RM_TRACE_GEMM && f->gemm_shaped_s > 0)
			json_object_set_new(e, "achieved_tflops", json_real(f->gemm_flops / f->gemm_shaped_s / RM_TB));
		if ((c == RM_TRACE_MEMCPY || c == RM_TRACE_MEMSET) && f->copy_bytes_s > 0 && c == RM_TRACE_MEMCPY)
			json_object_set_new(e, "achieved_GBps", json_real(f->copy_bytes / f->copy_bytes_s / RM_GB));
		json_object_set_new(cls, rm_trace_class_key((rm_trace_class)c), e);
	}
	json_object_set_new(o, "classes", cls);
	json_t *streams = json_array();
	for (int i = 0; i < n_streams; i++) {
		const rm_trace_stream_fig *s = &f->streams[i];
		json_t *e = json_object();
		json_object_set_new(e, "stream", json_integer(s->stream));
		json_object_set_new(e, "busy_s", json_real(s->busy_s));
		json_object_set_new(e, "events", json_integer(s->kernels));
		json_object_set_new(e, "compute", json_boolean(s->compute));
		json_object_set_new(e, "comm", json_boolean(s->comm));
		json_array_append_new(streams, e);
	}
	json_object_set_new(o, "streams", streams);
	json_t *nccl = json_array();
	for (int k = 0; k < n_nccl; k++) {
		const rm_trace_nccl_fig *c = &f->nccl[k];
		json_t *e = json_object();
		json_object_set_new(e, "op", rm_json_string(c->op));
		json_object_set_new(e, "algo", rm_json_string(c->algo));
		json_object_set_new(e, "proto", rm_json_string(c->proto));
		json_object_set_new(e, "count", json_integer(c->count));
		json_object_set_new(e, "busy_s", json_real(c->busy_s));
		json_array_append_new(nccl, e);
	}
	json_object_set_new(o, "nccl", nccl);
	return o;
}

static json_t *report_json(const rm_trace_report *r, const char *file)
{
	json_t *o = fig_json(&r->median, r->n_streams, r->n_nccl);
	json_t *head = json_object();
	json_object_set_new(head, "rank", json_integer(r->rank));
	json_object_set_new(head, "device", json_integer(r->device));
	json_object_set_new(head, "file", rm_json_string(file));
	json_object_set_new(head, "window", json_string(r->from_steps ? "steps_median" : "gpu_span"));
	json_object_update(head, o);
	json_decref(o);
	json_t *steps = json_array();
	for (int w = 0; w < r->n_windows && r->from_steps; w++) {
		const rm_trace_window *win = &r->windows[w];
		json_t *e = json_object();
		json_object_set_new(e, "number", json_integer(win->number));
		json_object_set_new(e, "start_us", json_real((double)win->start_ns * 1e-3));
		json_t *f = fig_json(&win->fig, r->n_streams, r->n_nccl);
		json_object_update(e, f);
		json_decref(f);
		json_array_append_new(steps, e);
	}
	json_object_set_new(head, "steps", steps);
	return head;
}

static void print_fig_row(const char *label, const rm_trace_fig *f)
{
	printf("  %-12s %10.3f %10.3f %10.3f %10.3f %10.3f %7lld %10.3f\n", label, f->step_s * 1e3,
	       f->compute_busy_s * 1e3, f->comm_busy_s * 1e3, f->exposed_comm_s * 1e3, f->idle_s * 1e3,
	       (long long)f->coll_on_compute_count, f->coll_on_compute_s * 1e3);
}

static void report_text(const rm_trace_report *r, const char *file)
{
	printf("rank %d, device %d (%s): %s\n", r->rank, r->device, file,
	       r->from_steps ? "step windows (ProfilerStep#N or JAX Steps)" : "no step annotation: the span of the GPU events");
	printf("  %-12s %10s %10s %10s %10s %10s %7s %10s\n", "step", "step_ms", "compute_ms", "comm_ms",
	       "exposed_ms", "idle_ms", "coll@cs", "coll@cs_ms");
	for (int w = 0; w < r->n_windows && r->from_steps; w++) {
		char label[32];
		snprintf(label, sizeof(label), "#%lld", (long long)r->windows[w].number);
		print_fig_row(label, &r->windows[w].fig);
	}
	print_fig_row(r->from_steps ? "median" : "span", &r->median);
	const rm_trace_fig *m = &r->median;
	printf("  time by class (%s, union per class):\n", r->from_steps ? "median" : "span");
	for (int c = 0; c < RM_TRACE_CLASS_COUNT; c++) {
		if (m->class_count[c] == 0 && m->class_s[c] == 0)
			continue;
		printf("    %-13s %10.3f ms %7lld events", rm_trace_class_key((rm_trace_class)c), m->class_s[c] * 1e3,
		       (long long)m->class_count[c]);
		if (c == RM_TRACE_GEMM && m->gemm_shaped_s > 0)
			printf("  %.1f TFLOP/s achieved (kernels with shapes: %.3f ms)", m->gemm_flops / m->gemm_shaped_s / RM_TB,
			       m->gemm_shaped_s * 1e3);
		if (c == RM_TRACE_MEMCPY && m->copy_bytes_s > 0)
			printf("  %.1f GB/s achieved", m->copy_bytes / m->copy_bytes_s / RM_GB);
		printf("\n");
	}
	printf("  streams (busy = union of its events):\n");
	for (int i = 0; i < r->n_streams; i++) {
		const rm_trace_stream_fig *s = &m->streams[i];
		printf("    stream %-6lld %10.3f ms %7lld events%s%s\n", (long long)s->stream, s->busy_s * 1e3,
		       (long long)s->kernels, s->compute ? "  compute" : "", s->comm ? "  nccl" : "");
	}
	if (r->n_nccl > 0)
		printf("  NCCL kernels (op algo proto as the kernel name says):\n");
	for (int k = 0; k < r->n_nccl; k++) {
		const rm_trace_nccl_fig *c = &m->nccl[k];
		printf("    %-14s %-14s %-7s %10.3f ms %7lld\n", c->op, c->algo[0] ? c->algo : "-",
		       c->proto[0] ? c->proto : "-", c->busy_s * 1e3, (long long)c->count);
	}
}

int cli_cmd_trace(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{0, 0, 0, 0},
	};
	bool json = false;
	int c;
	const char *shortopts = "jh";
	while ((c = cli_getopt(argc, argv, shortopts, longopts)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'h':
			trace_usage(stdout);
			return CLI_EXIT_OK;
		default:
			return cli_option_error("trace", argc, argv, shortopts, longopts);
		}
	}
	if (optind >= argc)
		return cli_usage_error("trace", "missing action: import or report");
	const char *action = argv[optind++];
	bool report = strcmp(action, "report") == 0;
	if (!report && strcmp(action, "import") != 0)
		return cli_usage_error("trace", "unknown action '%s' (expected import or report)", action);
	if (optind >= argc)
		return cli_usage_error("trace", "trace %s needs a FILE or DIR", action);
	if (json && !report)
		return cli_usage_error("trace", "--json applies to trace report");
	char **files;
	int n_files;
	if (!cli_trace_files(argc - optind, argv + optind, &files, &n_files))
		return CLI_EXIT_FAIL;
	int rc = CLI_EXIT_OK;
	json_t *ranks = json_array();
	/* everything is read before anything is printed: a bad file prints nothing partial */
	rm_trace_report *reports = NULL;
	int n_rep = 0;
	int *rep_file = NULL;
	char **lines = rm_new(char *, (size_t)n_files + 1);
	for (int i = 0; i < n_files; i++) {
		rm_error err;
		rm_error_clear(&err);
		rm_trace *t = rm_trace_read(files[i], &err);
		if (!t) {
			rc = cli_fail(&err);
			break;
		}
		rm_trace_summary s;
		rm_trace_summary_get(t, &s);
		char line[1024];
		snprintf(line, sizeof(line),
			 "%s: %lld events, %lld GPU events (%lld kernels, %lld NCCL), %d streams on %d devices, rank %d%s, "
			 "%lld steps, %lld GEMM shapes, %s format, %lld bytes of JSON",
			 files[i], (long long)s.events, (long long)s.gpu_events, (long long)s.kernels,
			 (long long)s.nccl_kernels, s.streams, s.devices, s.rank >= 0 ? s.rank : i,
			 s.rank >= 0 ? "" : " (file order)", (long long)s.steps, (long long)s.gemm_shapes, s.format,
			 (long long)s.text_bytes);
		lines[i] = rm_xstrdup(line);
		if (report) {
			int before = n_rep;
			rm_trace_analyze(t, i, &reports, &n_rep);
			rep_file = rm_xrealloc(rep_file, (size_t)n_rep * sizeof(int));
			for (int k = before; k < n_rep; k++)
				rep_file[k] = i;
		}
		rm_trace_destroy(t);
	}
	if (rc == CLI_EXIT_OK && !report)
		for (int i = 0; i < n_files; i++)
			printf("%s\n", lines[i]);
	if (rc == CLI_EXIT_OK && report) {
		/* by rank, then device, then file order (a stable insertion sort: few entries) */
		int *ord = rm_new(int, (size_t)n_rep + 1);
		for (int k = 0; k < n_rep; k++) {
			int j = k;
			while (j > 0 && (reports[ord[j - 1]].rank > reports[k].rank ||
					 (reports[ord[j - 1]].rank == reports[k].rank &&
					  reports[ord[j - 1]].device > reports[k].device))) {
				ord[j] = ord[j - 1];
				j--;
			}
			ord[j] = k;
		}
		for (int k = 0; k < n_rep; k++) {
			const rm_trace_report *r = &reports[ord[k]];
			if (json)
				json_array_append_new(ranks, report_json(r, files[rep_file[ord[k]]]));
			else
				report_text(r, files[rep_file[ord[k]]]);
		}
		free(ord);
	}
	if (rc == CLI_EXIT_OK && json) {
		json_t *doc = json_object();
		json_object_set_new(doc, "schema", json_string("remora.trace_report/1"));
		json_object_set_new(doc, "ranks", ranks);
		ranks = NULL;
		rc = cli_print_json(doc);
	}
	json_decref(ranks);
	rm_trace_reports_free(reports, n_rep);
	free(rep_file);
	for (int i = 0; i < n_files; i++) {
		free(lines[i]);
		free(files[i]);
	}
	free(lines);
	free(files);
	return rc;
}
