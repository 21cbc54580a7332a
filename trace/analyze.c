/*
 * The analysis of a step from the trace alone (remora/trace.h): per-stream busy time, compute and
 * communication busy time, exposed communication, idle time and time by class, each the measure of
 * a union of integer-nanosecond intervals clipped to the window.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trace_private.h"

/* One event clipped to a window. */
typedef struct clip {
	int64_t s, e;
	const rm_trace__event *ev;
} clip;

typedef struct span {
	int64_t s, e;
} span;

typedef bool (*clip_pred)(const clip *c, const rm_trace *t, int arg);

/*
 * The measure of the union of the clips that pass pred; clips are sorted by start. When out is
 * given, the merged (disjoint, sorted) spans are written there (capacity n) and *n_out counts them.
 */
static int64_t union_measure(const clip *c, int64_t n, const rm_trace *t, clip_pred pred, int arg, span *out,
			     int64_t *n_out)
{
	int64_t total = 0, cs = 0, ce = 0, k = 0;
	bool open = false;
	for (int64_t i = 0; i < n; i++) {
		if (c[i].e <= c[i].s || !pred(&c[i], t, arg))
			continue;
		if (open && c[i].s <= ce) {
			if (c[i].e > ce)
				ce = c[i].e;
			continue;
		}
		if (open) {
			total += ce - cs;
			if (out)
				out[k++] = (span){cs, ce};
		}
		cs = c[i].s;
		ce = c[i].e;
		open = true;
	}
	if (open) {
		total += ce - cs;
		if (out)
			out[k++] = (span){cs, ce};
	}
	if (n_out)
		*n_out = k;
	return total;
}

/* The measure of a minus b (both disjoint and sorted). */
static int64_t difference_measure(const span *a, int64_t na, const span *b, int64_t nb)
{
	int64_t total = 0, j = 0;
	for (int64_t i = 0; i < na; i++) {
		while (j < nb && b[j].e <= a[i].s)
			j++;
		int64_t overlap = 0;
		for (int64_t k = j; k < nb && b[k].s < a[i].e; k++) {
			int64_t s = b[k].s > a[i].s ? b[k].s : a[i].s;
			int64_t e = b[k].e < a[i].e ? b[k].e : a[i].e;
			if (e > s)
				overlap += e - s;
		}
		total += a[i].e - a[i].s - overlap;
	}
	return total;
}

static bool pred_all(const clip *c, const rm_trace *t, int arg)
{
	(void)c, (void)t, (void)arg;
	return true;
}

static bool pred_compute(const clip *c, const rm_trace *t, int arg)
{
	(void)t, (void)arg;
	return rm_trace_class_is_compute((rm_trace_class)c->ev->cls);
}

static bool pred_class(const clip *c, const rm_trace *t, int arg)
{
	(void)t;
	return c->ev->cls == arg;
}

static bool pred_stream(const clip *c, const rm_trace *t, int arg)
{
	(void)t;
	return c->ev->stream == arg;
}

static bool pred_nccl_kind(const clip *c, const rm_trace *t, int arg)
{
	(void)t;
	return c->ev->nccl == arg;
}

static bool pred_coll_on_compute(const clip *c, const rm_trace *t, int arg)
{
	(void)arg;
	return c->ev->cls == RM_TRACE_NCCL && t->streams[c->ev->stream].compute;
}

static const double NS = 1e-9; /* seconds per nanosecond */

/* The figures of [a, b) for the device's events dev_ev (sorted by start); max_dur bounds the
 * search for events that started before a. */
static void window_figures(const rm_trace *t, const rm_trace__event *const *dev_ev, int64_t n_dev,
			   int64_t max_dur, int64_t a, int64_t b, int s_first, int s_count, rm_trace_fig *f,
			   clip *buf, span *sp1, span *sp2)
{
	memset(f, 0, sizeof(*f));
	f->streams = rm_new(rm_trace_stream_fig, (size_t)s_count + 1);
	f->nccl = rm_new(rm_trace_nccl_fig, (size_t)t->n_nccl_kinds + 1);
	/* the first event that can reach a */
	int64_t lo = 0, hi = n_dev;
	while (lo < hi) {
		int64_t mid = lo + (hi - lo) / 2;
		if (dev_ev[mid]->ts_ns < a - max_dur)
			lo = mid + 1;
		else
			hi = mid;
	}
	int64_t n = 0;
	for (int64_t i = lo; i < n_dev && dev_ev[i]->ts_ns < b; i++) {
		const rm_trace__event *e = dev_ev[i];
		int64_t s = e->ts_ns, end = e->ts_ns + e->dur_ns;
		bool starts_in = s >= a;
		if (end <= a && !starts_in)
			continue;
		if (starts_in) {
			f->class_count[e->cls]++;
			f->streams[e->stream - s_first].kernels++;
			if (e->nccl >= 0)
				f->nccl[e->nccl].count++;
			if (e->cls == RM_TRACE_NCCL && t->streams[e->stream].compute)
				f->coll_on_compute_count++;
			if (e->flags & RM_TRACE__SHAPED) {
				f->gemm_flops += (double)e->work;
				f->gemm_shaped_s += (double)e->dur_ns * NS;
			}
			if (e->flags & RM_TRACE__BYTES) {
				f->copy_bytes += (double)e->work;
				f->copy_bytes_s += (double)e->dur_ns * NS;
			}
		}
		buf[n++] = (clip){s < a ? a : s, end > b ? b : end, e};
	}
	f->step_s = (double)(b - a) * NS;
	f->gpu_busy_s = (double)union_measure(buf, n, t, pred_all, 0, NULL, NULL) * NS;
	int64_t n_comp = 0, n_comm = 0;
	int64_t compute = union_measure(buf, n, t, pred_compute, 0, sp1, &n_comp);
	int64_t comm = union_measure(buf, n, t, pred_class, RM_TRACE_NCCL, sp2, &n_comm);
	f->compute_busy_s = (double)compute * NS;
	f->comm_busy_s = (double)comm * NS;
	f->exposed_comm_s = (double)difference_measure(sp2, n_comm, sp1, n_comp) * NS;
	f->idle_s = f->step_s - f->gpu_busy_s;
	f->coll_on_compute_s = (double)union_measure(buf, n, t, pred_coll_on_compute, 0, NULL, NULL) * NS;
	for (int c = 0; c < RM_TRACE_CLASS_COUNT; c++)
		f->class_s[c] = (double)union_measure(buf, n, t, pred_class, c, NULL, NULL) * NS;
	for (int i = 0; i < s_count; i++) {
		const rm_trace__stream *st = &t->streams[s_first + i];
		f->streams[i].device = st->device;
		f->streams[i].stream = st->stream;
		f->streams[i].compute = st->compute;
		f->streams[i].comm = st->comm;
		f->streams[i].busy_s = (double)union_measure(buf, n, t, pred_stream, s_first + i, NULL, NULL) * NS;
	}
	for (int k = 0; k < t->n_nccl_kinds; k++) {
		const rm_trace__nccl_kind *kd = &t->nccl_kinds[k];
		memcpy(f->nccl[k].op, kd->op, sizeof(kd->op));
		memcpy(f->nccl[k].algo, kd->algo, sizeof(kd->algo));
		memcpy(f->nccl[k].proto, kd->proto, sizeof(kd->proto));
		f->nccl[k].busy_s = (double)union_measure(buf, n, t, pred_nccl_kind, k, NULL, NULL) * NS;
	}
}

static int cmp_double(const void *pa, const void *pb)
{
	double a = *(const double *)pa, b = *(const double *)pb;
	return a < b ? -1 : a > b;
}

/* The median of n values (the mean of the two middle ones for an even n); tmp holds n. */
static double median(double *tmp, int n)
{
	if (n <= 0)
		return 0;
	qsort(tmp, (size_t)n, sizeof(*tmp), cmp_double);
	return n % 2 ? tmp[n / 2] : 0.5 * (tmp[n / 2 - 1] + tmp[n / 2]);
}

static void median_figures(rm_trace_report *r)
{
	rm_trace_fig *m = &r->median;
	memset(m, 0, sizeof(*m));
	m->streams = rm_new(rm_trace_stream_fig, (size_t)r->n_streams + 1);
	m->nccl = rm_new(rm_trace_nccl_fig, (size_t)r->n_nccl + 1);
	double *tmp = rm_new(double, (size_t)r->n_windows + 1);
	int n = r->n_windows;
	const rm_trace_fig *w0 = &r->windows[0].fig;
#define MED(field)                                                             \
	do {                                                                   \
		for (int w = 0; w < n; w++)                                    \
			tmp[w] = (double)r->windows[w].fig.field;              \
		m->field = median(tmp, n);                                     \
	} while (0)
#define MED_COUNT(field)                                                       \
	do {                                                                   \
		for (int w = 0; w < n; w++)                                    \
			tmp[w] = (double)r->windows[w].fig.field;              \
		m->field = llround(median(tmp, n));                            \
	} while (0)
	MED(step_s);
	MED(gpu_busy_s);
	MED(compute_busy_s);
	MED(comm_busy_s);
	MED(exposed_comm_s);
	MED(idle_s);
	MED_COUNT(coll_on_compute_count);
	MED(coll_on_compute_s);
	for (int c = 0; c < RM_TRACE_CLASS_COUNT; c++) {
		MED(class_s[c]);
		MED_COUNT(class_count[c]);
	}
	MED(gemm_flops);
	MED(gemm_shaped_s);
	MED(copy_bytes);
	MED(copy_bytes_s);
	for (int i = 0; i < r->n_streams; i++) {
		m->streams[i] = w0->streams[i];
		MED(streams[i].busy_s);
		MED_COUNT(streams[i].kernels);
	}
	for (int k = 0; k < r->n_nccl; k++) {
		m->nccl[k] = w0->nccl[k];
		MED(nccl[k].busy_s);
		MED_COUNT(nccl[k].count);
	}
#undef MED
#undef MED_COUNT
	free(tmp);
}

void rm_trace_analyze(const rm_trace *t, int rank_default, rm_trace_report **reports, int *n)
{
	const rm_trace__event **dev_ev = rm_new(const rm_trace__event *, (size_t)t->n_ev + 1);
	clip *buf = rm_new(clip, (size_t)t->n_ev + 1);
	span *sp1 = rm_new(span, (size_t)t->n_ev + 1), *sp2 = rm_new(span, (size_t)t->n_ev + 1);
	for (int s_first = 0; s_first < t->n_streams;) {
		int device = t->streams[s_first].device;
		int s_count = 0;
		while (s_first + s_count < t->n_streams && t->streams[s_first + s_count].device == device)
			s_count++;
		/* the device's events, in the trace's (start, end, stream, file) order */
		int64_t nd = 0, max_dur = 0, lo = INT64_MAX, hi = INT64_MIN;
		for (int64_t i = 0; i < t->n_ev; i++) {
			const rm_trace__event *e = &t->ev[i];
			if (e->stream < s_first || e->stream >= s_first + s_count)
				continue;
			dev_ev[nd++] = e;
			if (e->dur_ns > max_dur)
				max_dur = e->dur_ns;
			if (e->ts_ns < lo)
				lo = e->ts_ns;
			if (e->ts_ns + e->dur_ns > hi)
				hi = e->ts_ns + e->dur_ns;
		}
		/* the windows: this device's JAX steps, else the CPU ProfilerStep annotations, else
		 * the span of its events */
		int64_t n_dev_steps = 0, n_cpu_steps = 0;
		for (int64_t i = 0; i < t->n_steps; i++) {
			n_dev_steps += t->steps[i].device == device;
			n_cpu_steps += t->steps[i].device == -1;
		}
		int want = n_dev_steps > 0 ? device : -1;
		int64_t n_win = n_dev_steps > 0 ? n_dev_steps : n_cpu_steps;
		*reports = rm_xrealloc(*reports, (size_t)(*n + 1) * sizeof(**reports));
		rm_trace_report *r = &(*reports)[(*n)++];
		memset(r, 0, sizeof(*r));
		r->rank = t->rank >= 0 ? t->rank : rank_default;
		r->device = device;
		r->n_streams = s_count;
		r->n_nccl = t->n_nccl_kinds;
		r->from_steps = n_win > 0;
		r->n_windows = n_win > 0 ? (int)n_win : 1;
		r->windows = rm_new(rm_trace_window, (size_t)r->n_windows);
		if (n_win > 0) {
			int w = 0;
			for (int64_t i = 0; i < t->n_steps; i++) {
				const rm_trace__step *st = &t->steps[i];
				if (st->device != want)
					continue;
				r->windows[w++] = (rm_trace_window){.number = st->number, .start_ns = st->ts_ns,
								   .end_ns = st->ts_ns + st->dur_ns};
			}
		} else {
			r->windows[0] = (rm_trace_window){.number = -1, .start_ns = lo, .end_ns = hi};
		}
		for (int w = 0; w < r->n_windows; w++)
			window_figures(t, dev_ev, nd, max_dur, r->windows[w].start_ns, r->windows[w].end_ns, s_first,
				       s_count, &r->windows[w].fig, buf, sp1, sp2);
		median_figures(r);
		s_first += s_count;
	}
	free(dev_ev);
	free(buf);
	free(sp1);
	free(sp2);
}

static void fig_free(rm_trace_fig *f)
{
	free(f->streams);
	free(f->nccl);
}

void rm_trace_reports_free(rm_trace_report *reports, int n)
{
	for (int i = 0; i < n; i++) {
		for (int w = 0; w < reports[i].n_windows; w++)
			fig_free(&reports[i].windows[w].fig);
		free(reports[i].windows);
		fig_free(&reports[i].median);
	}
	free(reports);
}
