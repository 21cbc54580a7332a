/*
 * Fits of the cost models' parameters to measurements (GSL), on arrays and from the database.
 * Formulas: remora/calib.h; sources: docs/reference/hardware.md ("Compute efficiency") and
 * docs/reference/nccl-model.md ("Time of one collective": time = latency + bytes / bandwidth).
 */
#include <gsl/gsl_errno.h>
#include <gsl/gsl_fit.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "calib_internal.h"


static double sq(double x)
{
	return x * x;
}

rm_status rm_calib_fit_line(const double *x, const double *y, int n, double *c0, double *c1,
			    double *rel_rms, rm_error *err)
{
	if (n < 2)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0,
				    "%d point%s: a line needs at least 2 points", n, n == 1 ? "" : "s");
	bool distinct = false;
	for (int i = 0; i < n; i++) {
		if (!(y[i] > 0) || !isfinite(y[i]) || !isfinite(x[i]))
			return rm_error_set(err, RM_INVALID, NULL, 0, 0,
					    "point %d has a non-positive or non-finite time (%g)", i + 1, y[i]);
		distinct = distinct || x[i] != x[0];
	}
	if (!distinct)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0,
				    "all %d points have the same size (%g): the data is singular, a line "
				    "needs at least 2 different sizes",
				    n, x[0]);
	double *w = rm_new(double, (size_t)n);
	for (int i = 0; i < n; i++)
		w[i] = 1.0 / (y[i] * y[i]);
	double a = 0, b = 0, cov00, cov01, cov11, chisq;
	gsl_error_handler_t *old = gsl_set_error_handler_off();
	int rc = gsl_fit_wlinear(x, 1, w, 1, y, 1, (size_t)n, &a, &b, &cov00, &cov01, &cov11, &chisq);
	if (rc == GSL_SUCCESS && a < 0) {
		a = 0;
		rc = gsl_fit_wmul(x, 1, w, 1, y, 1, (size_t)n, &b, &cov11, &chisq);
	}
	gsl_set_error_handler(old);
	free(w);
	if (rc != GSL_SUCCESS || !isfinite(a) || !isfinite(b))
		return rm_error_set(err, RM_INVALID, NULL, 0, 0, "least squares failed: %s", gsl_strerror(rc));
	if (b <= 0)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0,
				    "the times do not grow with the size (slope %g): the sizes are too small "
				    "to see a rate, or the measurements are noise",
				    b);
	double s = 0;
	for (int i = 0; i < n; i++)
		s += sq((a + b * x[i] - y[i]) / y[i]);
	*c0 = a;
	*c1 = b;
	if (rel_rms)
		*rel_rms = sqrt(s / n);
	return RM_OK;
}

/* ---- collectives: piecewise lines ---------------------------------------------------------- */

typedef struct seg_fit {
	double lat_us, algbw;
	double cost;    /* sum of squared relative errors */
	double max_rel; /* worst point */
} seg_fit;

typedef struct cpoint {
	int64_t bytes;
	double us;
} cpoint;

static int cpoint_cmp(const void *a, const void *b)
{
	const cpoint *x = a, *y = b;
	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? -1 : 1;
	return x->us < y->us ? -1 : x->us > y->us;
}

/* Fits points [lo, hi) as one regime: the weighted line, or a constant when it does not rise. */
static seg_fit fit_segment(const cpoint *p, int lo, int hi)
{
	int n = hi - lo;
	double *x = rm_new(double, (size_t)n), *y = rm_new(double, (size_t)n);
	for (int i = 0; i < n; i++) {
		x[i] = (double)p[lo + i].bytes;
		y[i] = p[lo + i].us;
	}
	seg_fit f = {0};
	double c0, c1;
	if (rm_calib_fit_line(x, y, n, &c0, &c1, NULL, NULL) == RM_OK) {
		f.lat_us = c0;
		f.algbw = 1.0 / (c1 * 1e3);
	} else {
		/* relative least squares of a constant: c = sum(1/y) / sum(1/y^2) */
		double s1 = 0, s2 = 0;
		for (int i = 0; i < n; i++) {
			s1 += 1.0 / y[i];
			s2 += 1.0 / (y[i] * y[i]);
		}
		f.lat_us = s1 / s2;
		f.algbw = RM_CALIB_FLAT_ALGBW_GBps;
	}
	for (int i = 0; i < n; i++) {
		double model = f.lat_us + x[i] / (f.algbw * 1e3);
		double r = (model - y[i]) / y[i];
		f.cost += r * r;
		if (fabs(r) > f.max_rel)
			f.max_rel = fabs(r);
	}
	free(x);
	free(y);
	return f;
}

rm_status rm_calib_fit_collective(const int64_t *bytes, const double *time_us, int n, double tolerance,
				  rm_calib_regime *regimes, int *n_regimes, double *rel_rms, rm_error *err)
{
	cpoint *p = rm_new(cpoint, (size_t)(n > 0 ? n : 1));
	int m = 0;
	for (int i = 0; i < n; i++) {
		if (bytes[i] <= 0)
			continue;
		if (!(time_us[i] > 0) || !isfinite(time_us[i])) {
			free(p);
			return rm_error_set(err, RM_INVALID, NULL, 0, 0, "a non-positive time (%g us) at %lld bytes",
					    time_us[i], (long long)bytes[i]);
		}
		p[m++] = (cpoint){bytes[i], time_us[i]};
	}
	qsort(p, (size_t)m, sizeof(*p), cpoint_cmp);
	/* groups of equal sizes: a regime boundary falls between groups */
	int *gstart = rm_new(int, (size_t)m + 1);
	int G = 0;
	for (int i = 0; i < m; i++)
		if (i == 0 || p[i].bytes != p[i - 1].bytes)
			gstart[G++] = i;
	gstart[G] = m;
	/* bound the O(G^3) segmentation: beyond MAX_GROUPS sizes, neighbouring sizes share a group */
	enum { MAX_GROUPS = 128 };
	if (G > MAX_GROUPS) {
		int step = (G + MAX_GROUPS - 1) / MAX_GROUPS, g2 = 0;
		for (int g = 0; g < G; g += step)
			gstart[g2++] = gstart[g];
		gstart[g2] = m;
		G = g2;
	}
	if (G < 2) {
		free(p);
		free(gstart);
		return rm_error_set(err, RM_INVALID, NULL, 0, 0,
				    "%d non-empty size%s measured: a latency/bandwidth fit needs at least 2 "
				    "different sizes above 0 bytes",
				    G, G == 1 ? "" : "s");
	}
	if (tolerance <= 0)
		tolerance = 0.03;
	int K = RM_CALIB_MAX_REGIMES < G / 2 ? RM_CALIB_MAX_REGIMES : G / 2;
	/* seg[a][b]: groups a..b-1 as one regime (>= 2 groups) */
	seg_fit *seg = rm_new(seg_fit, (size_t)(G + 1) * (size_t)(G + 1));
#define SEG(a, b) seg[(size_t)(a) * (size_t)(G + 1) + (size_t)(b)]
	for (int a = 0; a < G; a++)
		for (int b = a + 2; b <= G; b++)
			SEG(a, b) = fit_segment(p, gstart[a], gstart[b]);
	/* best[k][j]: covering groups 0..j-1 with k regimes; pass 0 with the tolerance, 1 without */
	double *best = rm_new(double, (size_t)(K + 1) * (size_t)(G + 1));
	int *from = rm_new(int, (size_t)(K + 1) * (size_t)(G + 1));
#define BEST(k, j) best[(size_t)(k) * (size_t)(G + 1) + (size_t)(j)]
#define FROM(k, j) from[(size_t)(k) * (size_t)(G + 1) + (size_t)(j)]
	int chosen_k = -1;
	for (int pass = 0; pass < 2 && chosen_k < 0; pass++) {
		for (int k = 0; k <= K; k++)
			for (int j = 0; j <= G; j++)
				BEST(k, j) = INFINITY;
		BEST(0, 0) = 0;
		for (int k = 1; k <= K; k++)
			for (int j = 2; j <= G; j++)
				for (int a = 0; a + 2 <= j; a++) {
					if (!isfinite(BEST(k - 1, a)))
						continue;
					const seg_fit *s = &SEG(a, j);
					if (pass == 0 && s->max_rel > tolerance)
						continue;
					double c = BEST(k - 1, a) + s->cost;
					if (c < BEST(k, j)) {
						BEST(k, j) = c;
						FROM(k, j) = a;
					}
				}
		if (pass == 0) {
			for (int k = 1; k <= K && chosen_k < 0; k++)
				if (isfinite(BEST(k, G)))
					chosen_k = k;
		} else {
			double c = INFINITY;
			for (int k = 1; k <= K; k++)
				if (BEST(k, G) < c * (1 - 1e-9)) {
					c = BEST(k, G);
					chosen_k = k;
				}
		}
	}
	int k = chosen_k;
	int j = G;
	double total = BEST(k, G);
	*n_regimes = k;
	for (int r = k - 1; r >= 0; r--) {
		int a = FROM(r + 1, j);
		const seg_fit *s = &SEG(a, j);
		rm_calib_regime *g = &regimes[r];
		g->latency_us = s->lat_us;
		g->algbw_GBps = s->algbw;
		g->n_points = gstart[j] - gstart[a];
		g->max_rel_error = s->max_rel;
		g->min_bytes = a == 0 ? 0
				      : (int64_t)floor(sqrt((double)p[gstart[a] - 1].bytes * (double)p[gstart[a]].bytes)) + 1;
		g->max_bytes = j == G ? p[m - 1].bytes /* beyond what was measured the model applies */
				      : (int64_t)floor(sqrt((double)p[gstart[j] - 1].bytes * (double)p[gstart[j]].bytes));
		j = a;
	}
	if (rel_rms)
		*rel_rms = sqrt(total / m);
#undef SEG
#undef BEST
#undef FROM
	free(best);
	free(from);
	free(seg);
	free(gstart);
	free(p);
	return RM_OK;
}

/* ---- GEMM and interference ----------------------------------------------------------------- */

static double wave_quantization(const rm_calib_gemm_point *g, double sms, double tile_m, double tile_n)
{
	double tiles = (double)g->batch * ceil((double)g->m / tile_m) * ceil((double)g->n / tile_n);
	return tiles > sms ? ceil(tiles / sms) * sms / tiles : 1.0;
}

rm_status rm_calib_fit_gemm(const rm_calib_gemm_point *pts, int n, double sm_count, double tile_m,
			    double tile_n, double *t0_us, double *rate_TFLOPs, double *rel_rms, rm_error *err)
{
	if (n < 2)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0,
				    "%d GEMM shape%s measured: t0 and R need at least 2 shapes of different "
				    "FLOP counts",
				    n, n == 1 ? "" : "s");
	double *x = rm_new(double, (size_t)n), *y = rm_new(double, (size_t)n);
	for (int i = 0; i < n; i++) {
		const rm_calib_gemm_point *g = &pts[i];
		double flops = 2.0 * (double)(g->batch > 0 ? g->batch : 1) * (double)g->m * (double)g->n * (double)g->k;
		rm_calib_gemm_point gg = *g;
		if (gg.batch <= 0)
			gg.batch = 1;
		/* t_us = t0 + FLOPs * q / (R[TFLOP/s] * 1e6): x in MFLOP so that the slope is 1/R */
		x[i] = flops * wave_quantization(&gg, sm_count, tile_m, tile_n) / 1e6;
		y[i] = g->time_us;
	}
	double c0, c1;
	rm_status st = rm_calib_fit_line(x, y, n, &c0, &c1, rel_rms, err);
	free(x);
	free(y);
	if (st != RM_OK) {
		rm_error_prefix(err, "GEMM fit: ");
		return st;
	}
	*t0_us = c0;
	*rate_TFLOPs = 1.0 / c1;
	return RM_OK;
}

rm_status rm_calib_fit_interference(const double *held_sms, const double *slowdown, int n, double *per_sm,
				    double *rel_rms, rm_error *err)
{
	double *x = rm_new(double, (size_t)(n > 0 ? n : 1)), *y = rm_new(double, (size_t)(n > 0 ? n : 1));
	int m = 0;
	for (int i = 0; i < n; i++) {
		if (held_sms[i] <= 0)
			continue;
		x[m] = held_sms[i];
		y[m] = slowdown[i] - 1.0;
		m++;
	}
	rm_status st = RM_OK;
	if (m == 0) {
		st = rm_error_set(err, RM_INVALID, NULL, 0, 0,
				  "no measurement with SMs held (k > 0): the slowdown per SM needs the GEMM "
				  "timed both alone and next to a kernel holding SMs");
		goto done;
	}
	double c1, cov11, sumsq;
	gsl_error_handler_t *old = gsl_set_error_handler_off();
	int rc = gsl_fit_mul(x, 1, y, 1, (size_t)m, &c1, &cov11, &sumsq);
	gsl_set_error_handler(old);
	if (rc != GSL_SUCCESS || !isfinite(c1)) {
		st = rm_error_set(err, RM_INVALID, NULL, 0, 0, "least squares failed: %s", gsl_strerror(rc));
		goto done;
	}
	double s = 0;
	for (int i = 0; i < m; i++)
		s += sq((1.0 + c1 * x[i] - (1.0 + y[i])) / (1.0 + y[i]));
	*per_sm = c1;
	if (rel_rms)
		*rel_rms = sqrt(s / m);
done:
	free(x);
	free(y);
	return st;
}

/* ---- fits from the database ------------------------------------------------------------------ */

/* Growable arrays of the measurements one model fits. */
typedef struct series {
	int n, cap;
	double *x, *y;
} series;

static void series_add(series *s, double x, double y)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 32;
		s->x = rm_xrealloc(s->x, (size_t)s->cap * sizeof(double));
		s->y = rm_xrealloc(s->y, (size_t)s->cap * sizeof(double));
	}
	s->x[s->n] = x;
	s->y[s->n] = y;
	s->n++;
}

static void series_free(series *s)
{
	free(s->x);
	free(s->y);
}

typedef struct coll_group {
	/* the key: benchmark, NCCL settings (rows' algo, proto, tuning; "default" when absent), ranks,
	 * nodes. Rows under different NCCL settings are different collectives to fit. */
	char bench[32], algo[32], proto[32], tuning[160];
	int ranks, nodes;
	int n, cap;
	int64_t *bytes;
	double *us;
	int *gpus_per_thread; /* of each point's run: > 1 single-process (launch floor) */
} coll_group;

/* One measured row, for finding conflicting duplicates. */
typedef struct crow {
	char *key; /* benchmark + params without "line" (owned) */
	double value;
	int64_t run;
	int line;
} crow;

typedef struct gemm_set {
	int n, cap;
	rm_calib_gemm_point *p;
} gemm_set;

/*
 * The GEMM fits, one per variant of remora-calibrate's rows (params dtype, layout, fast_accum;
 * rows without layout are "tn", without fast_accum false, as before those keys existed). The
 * profile takes gemm.bf16 and gemm.fp8 (TN, FP8 with cuBLASLt's default split accumulation); the
 * dgrad (NN), wgrad (NT) and fast-accumulation fits are stored beside them for comparison.
 */
enum { GEMM_BF16, GEMM_FP8, GEMM_BF16_NN, GEMM_BF16_NT, GEMM_FP8_FAST, GEMM_VARIANTS };
static const char *const gemm_names[GEMM_VARIANTS] = {"gemm.bf16", "gemm.fp8", "gemm.bf16.nn", "gemm.bf16.nt",
						      "gemm.fp8.fast_accum"};

/* The variant of a gemm row, or -1 (a combination no fit covers: FP8 NN/NT; a dtype other than
 * bf16 and fp8, or a layout "unknown", as `calib import-trace` stores an FP32 GEMM or one without
 * strides). */
static int gemm_variant(const char *dtype, const char *layout, bool fast)
{
	if (strcmp(dtype, "bf16") != 0 && strcmp(dtype, "fp8") != 0)
		return -1;
	bool fp8 = !strcmp(dtype, "fp8");
	if (!strcmp(layout, "tn"))
		return fp8 ? (fast ? GEMM_FP8_FAST : GEMM_FP8) : GEMM_BF16;
	if (fp8)
		return -1;
	return !strcmp(layout, "nn") ? GEMM_BF16_NN : !strcmp(layout, "nt") ? GEMM_BF16_NT : -1;
}

typedef struct interf_row {
	int64_t m, n, k;
	char dtype[8], concurrent[8];
	double held, us;
} interf_row;

typedef struct collected {
	gemm_set gemm[GEMM_VARIANTS]; /* gemm_names */
	series hbm[2];    /* copy, triad: bytes, us */
	series launch[2]; /* no graph, graph: kernels, us */
	series copy[3];   /* h2d, d2h, bidir */
	int n_groups;
	coll_group *groups;
	int n_interf, cap_interf;
	interf_row *interf;
	char gpu[96], nccl[32];
	int total;
	int no_topology; /* collective rows without ranks or nodes: not fitted */
	int n_runs;
	int64_t runs[64]; /* distinct run ids used (the first 64) */
	int n_rows, cap_rows;
	crow *rows;
} collected;

static void collected_free(collected *c)
{
	for (int i = 0; i < GEMM_VARIANTS; i++)
		free(c->gemm[i].p);
	for (int i = 0; i < 2; i++) {
		series_free(&c->hbm[i]);
		series_free(&c->launch[i]);
	}
	for (int i = 0; i < 3; i++)
		series_free(&c->copy[i]);
	for (int i = 0; i < c->n_groups; i++) {
		free(c->groups[i].bytes);
		free(c->groups[i].us);
		free(c->groups[i].gpus_per_thread);
	}
	free(c->groups);
	free(c->interf);
	for (int i = 0; i < c->n_rows; i++)
		free(c->rows[i].key);
	free(c->rows);
}

static int64_t jint(json_t *o, const char *k, int64_t dflt)
{
	json_t *v = json_object_get(o, k);
	return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

static const char *jstr(json_t *o, const char *k, const char *dflt)
{
	json_t *v = json_object_get(o, k);
	return json_is_string(v) ? json_string_value(v) : dflt;
}

static void collect_row(collected *c, const char *bench, json_t *params, double value)
{
	c->total++;
	if (!strcmp(bench, "gemm")) {
		int v = gemm_variant(jstr(params, "dtype", "bf16"), jstr(params, "layout", "tn"),
				     json_is_true(json_object_get(params, "fast_accum")));
		if (v < 0)
			return;
		gemm_set *g = &c->gemm[v];
		if (g->n == g->cap) {
			g->cap = g->cap ? 2 * g->cap : 32;
			g->p = rm_xrealloc(g->p, (size_t)g->cap * sizeof(*g->p));
		}
		g->p[g->n++] = (rm_calib_gemm_point){jint(params, "batch", 1), jint(params, "m", 0),
						      jint(params, "n", 0), jint(params, "k", 0), value};
	} else if (!strcmp(bench, "hbm_copy") || !strcmp(bench, "hbm_triad")) {
		series_add(&c->hbm[bench[4] == 't'], (double)jint(params, "bytes", 0), value);
	} else if (!strcmp(bench, "launch")) {
		json_t *g = json_object_get(params, "graph");
		series_add(&c->launch[json_is_true(g)], (double)jint(params, "kernels", 0), value);
	} else if (!strcmp(bench, "h2d") || !strcmp(bench, "d2h") || !strcmp(bench, "bidir")) {
		int i = !strcmp(bench, "h2d") ? 0 : !strcmp(bench, "d2h") ? 1 : 2;
		series_add(&c->copy[i], (double)jint(params, "bytes", 0), value);
	} else if (!strcmp(bench, "interference")) {
		if (c->n_interf == c->cap_interf) {
			c->cap_interf = c->cap_interf ? 2 * c->cap_interf : 32;
			c->interf = rm_xrealloc(c->interf, (size_t)c->cap_interf * sizeof(*c->interf));
		}
		interf_row *r = &c->interf[c->n_interf++];
		*r = (interf_row){.m = jint(params, "m", 0), .n = jint(params, "n", 0), .k = jint(params, "k", 0),
				  .held = (double)jint(params, "held_sms", 0), .us = value};
		snprintf(r->dtype, sizeof(r->dtype), "%s", jstr(params, "dtype", "bf16"));
		snprintf(r->concurrent, sizeof(r->concurrent), "%s", jstr(params, "concurrent", "none"));
	} else {
		rm_coll coll;
		if (!rm_coll_parse(bench, &coll))
			return;
		if (json_is_true(json_object_get(params, "inplace")))
			return; /* out-of-place rows only: the placement the reference tables use */
		int ranks = (int)jint(params, "ranks", 0), nodes = (int)jint(params, "nodes", 0);
		if (ranks < 1 || nodes < 1 || ranks % nodes != 0) {
			/* no known topology (an older database's row): fitting it would key a fit by a
			 * guess */
			c->no_topology++;
			return;
		}
		const char *algo = jstr(params, "algo", "default");
		const char *proto = jstr(params, "proto", "default"), *tuning = jstr(params, "tuning", "default");
		coll_group *g = NULL;
		for (int i = 0; i < c->n_groups && !g; i++)
			if (!strcmp(c->groups[i].bench, bench) && !strcmp(c->groups[i].algo, algo) &&
			    !strcmp(c->groups[i].proto, proto) && !strcmp(c->groups[i].tuning, tuning) &&
			    c->groups[i].ranks == ranks && c->groups[i].nodes == nodes)
				g = &c->groups[i];
		if (!g) {
			c->groups = rm_xrealloc(c->groups, (size_t)(c->n_groups + 1) * sizeof(*c->groups));
			g = &c->groups[c->n_groups++];
			memset(g, 0, sizeof(*g));
			snprintf(g->bench, sizeof(g->bench), "%s", bench);
			snprintf(g->algo, sizeof(g->algo), "%s", algo);
			snprintf(g->proto, sizeof(g->proto), "%s", proto);
			snprintf(g->tuning, sizeof(g->tuning), "%s", tuning);
			g->ranks = ranks;
			g->nodes = nodes;
		}
		if (g->n == g->cap) {
			g->cap = g->cap ? 2 * g->cap : 32;
			g->bytes = rm_xrealloc(g->bytes, (size_t)g->cap * sizeof(int64_t));
			g->us = rm_xrealloc(g->us, (size_t)g->cap * sizeof(double));
			g->gpus_per_thread = rm_xrealloc(g->gpus_per_thread, (size_t)g->cap * sizeof(int));
		}
		g->bytes[g->n] = jint(params, "bytes", 0);
		g->us[g->n] = value;
		g->gpus_per_thread[g->n] = (int)jint(params, "gpus_per_thread", 0);
		g->n++;
	}
}

static void add_note(rm_calib_fit_report *rep, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add_note(rm_calib_fit_report *rep, const char *fmt, ...)
{
	rep->notes = rm_xrealloc(rep->notes, (size_t)(rep->n_notes + 1) * sizeof(*rep->notes));
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rep->notes[rep->n_notes], sizeof(rep->notes[0]), fmt, ap);
	va_end(ap);
	rep->n_notes++;
}

/* The selected runs as a JSON array text for json_each (NULL: every run). Caller frees. */
static char *selected_runs(const rm_calib_fit_opts *opts)
{
	if (!opts->runs || opts->n_runs <= 0)
		return NULL;
	json_t *a = json_array();
	for (int i = 0; i < opts->n_runs; i++)
		json_array_append_new(a, json_integer(opts->runs[i]));
	char *ids = json_dumps(a, JSON_COMPACT);
	json_decref(a);
	return ids;
}

static bool contains_nocase(const char *hay, const char *needle)
{
	size_t n = strlen(needle);
	for (const char *p = hay; *p; p++)
		if (!strncasecmp(p, needle, n))
			return true;
	return n == 0;
}

/*
 * Picks the device (GPU model) of the selected runs that the profile describes, into device:
 * the only one, or the one opts->device names, or the one whose embedded profile is opts->base.
 * The runs of the others are left out with a note.
 */
static rm_status pick_device(rm_calib_db *db, const rm_calib_fit_opts *opts, const char *ids, char *device,
			     size_t size, rm_calib_fit_report *rep, rm_error *err)
{
	sqlite3_stmt *st = NULL;
	RM_CHECK(rm_calib__prepare(db,
				   "SELECT coalesce(r.gpu, ''), group_concat(r.id, ', ') FROM "
				   "(SELECT * FROM runs ORDER BY id) r "
				   "WHERE (?1 IS NULL OR r.id IN (SELECT value FROM json_each(?1))) "
				   "AND EXISTS (SELECT 1 FROM measurements m WHERE m.run_id = r.id) "
				   "GROUP BY coalesce(r.gpu, '') ORDER BY min(r.id)",
				   &st, "reading runs", err));
	int rc = ids ? sqlite3_bind_text(st, 1, ids, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, 1);
	if (rc != SQLITE_OK) {
		sqlite3_finalize(st);
		return rm_calib__sql_error(db, err, "reading runs");
	}
	enum { MAX_DEVICES = 16 };
	char names[MAX_DEVICES][96], runs[MAX_DEVICES][160];
	int n = 0;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (n == MAX_DEVICES) {
			sqlite3_finalize(st);
			return rm_error_set(err, RM_INVALID, db->path, 0, 0,
					    "the selected runs come from more than %d GPU models: pick runs with --run ID",
					    MAX_DEVICES);
		}
		const char *g = (const char *)sqlite3_column_text(st, 0), *r = (const char *)sqlite3_column_text(st, 1);
		snprintf(names[n], sizeof(names[n]), "%s", g ? g : "");
		snprintf(runs[n], sizeof(runs[n]), "%s", r ? r : "");
		n++;
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return rm_calib__sql_error(db, err, "reading runs");
	device[0] = '\0';
	if (n == 0)
		return RM_OK; /* no measurement: the caller says so */
	int pick = -1, matches = 0;
	if (opts->device) {
		for (int i = 0; i < n; i++)
			if (contains_nocase(names[i], opts->device))
				pick = i, matches++;
	} else if (n == 1) {
		pick = 0, matches = 1;
	} else if (opts->base) {
		const rm_hw_profile *want = rm_hw_profile_find(opts->base, NULL);
		for (int i = 0; i < n; i++) {
			const char *b = rm_calib__base_for_gpu(names[i]);
			const rm_hw_profile *hb = b ? rm_hw_profile_find(b, NULL) : NULL;
			if (want && hb == want)
				pick = i, matches++;
		}
	}
	if (matches != 1) {
		char list[1024] = "";
		for (int i = 0; i < n; i++) {
			size_t l = strlen(list);
			snprintf(list + l, sizeof(list) - l, "%s%s: run%s %s", i ? "; " : "",
				 names[i][0] ? names[i] : "(no GPU recorded)", strchr(runs[i], ',') ? "s" : "", runs[i]);
		}
		if (opts->device && matches == 0)
			return rm_error_set(err, RM_NOT_FOUND, db->path, 0, 0,
					    "no selected run is of a GPU matching '%s' (devices: %s)", opts->device, list);
		return rm_error_set(err, RM_INVALID, db->path, 0, 0,
				    "the selected runs come from %d GPU models (%s) and a profile describes one: "
				    "pick one with --device NAME (or --base, or --run ID)",
				    matches > 1 ? matches : n, list);
	}
	snprintf(device, size, "%s", names[pick]);
	for (int i = 0; i < n; i++)
		if (i != pick)
			add_note(rep, "run%s %s left out: measured on %s, not %s", strchr(runs[i], ',') ? "s" : "",
				 runs[i], names[i][0] ? names[i] : "an unrecorded GPU", names[pick][0] ? names[pick] : "?");
	return RM_OK;
}

static void remember_row(collected *c, const char *bench, json_t *params, double value, int64_t run)
{
	rm_coll coll;
	if (rm_coll_parse(bench, &coll) && jint(params, "bytes", -1) == 0)
		return; /* an empty buffer returns at once: sub-microsecond noise, never fitted */
	json_t *p = json_deep_copy(params);
	int line = (int)jint(p, "line", 0);
	json_object_del(p, "line");
	char *text = json_dumps(p, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
	json_decref(p);
	if (!text)
		return;
	size_t need = strlen(bench) + strlen(text) + 2;
	char *key = rm_xmalloc(need);
	snprintf(key, need, "%s %s", bench, text);
	free(text);
	if (c->n_rows == c->cap_rows) {
		c->cap_rows = c->cap_rows ? 2 * c->cap_rows : 64;
		c->rows = rm_xrealloc(c->rows, (size_t)c->cap_rows * sizeof(*c->rows));
	}
	c->rows[c->n_rows++] = (crow){.key = key, .value = value, .run = run, .line = line};
}

static int crow_cmp(const void *x, const void *y)
{
	const crow *a = x, *b = y;
	int k = strcmp(a->key, b->key);
	if (k)
		return k;
	if (a->value != b->value)
		return a->value < b->value ? -1 : 1;
	if (a->run != b->run)
		return a->run < b->run ? -1 : 1;
	return a->line - b->line;
}

/* Groups of rows with one key whose values spread beyond RM_CALIB_CONFLICT_SPREAD. */
static void find_conflicts(collected *c, rm_calib_fit_report *rep)
{
	qsort(c->rows, (size_t)c->n_rows, sizeof(*c->rows), crow_cmp);
	for (int i = 0; i < c->n_rows;) {
		int j = i;
		while (j < c->n_rows && !strcmp(c->rows[j].key, c->rows[i].key))
			j++;
		const crow *lo = &c->rows[i], *hi = &c->rows[j - 1];
		if (j - i >= 2 && lo->value > 0 && hi->value > lo->value * (1.0 + RM_CALIB_CONFLICT_SPREAD)) {
			rep->conflicts = rm_xrealloc(rep->conflicts, (size_t)(rep->n_conflicts + 1) * sizeof(*rep->conflicts));
			rm_calib_conflict *k = &rep->conflicts[rep->n_conflicts++];
			memset(k, 0, sizeof(*k));
			const char *sp = strchr(lo->key, ' ');
			size_t bl = sp ? (size_t)(sp - lo->key) : strlen(lo->key);
			snprintf(k->benchmark, sizeof(k->benchmark), "%.*s", (int)bl, lo->key);
			snprintf(k->params, sizeof(k->params), "%s", sp ? sp + 1 : "");
			k->n_rows = j - i;
			k->run[0] = lo->run, k->run[1] = hi->run;
			k->line[0] = lo->line, k->line[1] = hi->line;
			k->value[0] = lo->value, k->value[1] = hi->value;
		}
		i = j;
	}
}

static rm_status collect(rm_calib_db *db, const rm_calib_fit_opts *opts, collected *c, rm_calib_fit_report *rep,
			 rm_error *err)
{
	char *ids = selected_runs(opts);
	rm_status status = pick_device(db, opts, ids, c->gpu, sizeof(c->gpu), rep, err);
	if (status != RM_OK) {
		free(ids);
		return status;
	}
	snprintf(rep->device, sizeof(rep->device), "%s", c->gpu);
	sqlite3_stmt *st = NULL;
	const char *sql = "SELECT m.benchmark, m.params, m.value, r.nccl, m.run_id, m.rowid FROM measurements m "
			  "JOIN runs r ON r.id = m.run_id "
			  "WHERE (?1 IS NULL OR m.run_id IN (SELECT value FROM json_each(?1))) "
			  "AND coalesce(r.gpu, '') = ?2 "
			  "ORDER BY m.rowid";
	status = rm_calib__prepare(db, sql, &st, "reading measurements", err);
	if (status != RM_OK) {
		free(ids);
		return status;
	}
	int rc = SQLITE_OK;
	rc = rm_calib__bind_rc(rc, ids ? sqlite3_bind_text(st, 1, ids, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, 1));
	rc = rm_calib__bind_rc(rc, sqlite3_bind_text(st, 2, c->gpu, -1, SQLITE_TRANSIENT));
	if (rc != SQLITE_OK) {
		status = rm_calib__sql_error(db, err, "reading measurements");
		goto done;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *bench = (const char *)sqlite3_column_text(st, 0);
		const char *text = (const char *)sqlite3_column_text(st, 1);
		json_t *params = text ? json_loads(text, 0, NULL) : NULL;
		if (!bench || !json_is_object(params)) {
			json_decref(params);
			status = rm_error_set(err, RM_PARSE, db->path, 0, 0,
					      "measurement #%lld of run #%lld has unreadable parameters (a damaged "
					      "database?)",
					      (long long)sqlite3_column_int64(st, 5), (long long)sqlite3_column_int64(st, 4));
			goto done;
		}
		double value = sqlite3_column_double(st, 2);
		int64_t run = sqlite3_column_int64(st, 4);
		collect_row(c, bench, params, value);
		remember_row(c, bench, params, value, run);
		json_decref(params);
		const char *nccl = (const char *)sqlite3_column_text(st, 3);
		/* a trace without distributedInfo.nccl_version stores "unknown": another run may know */
		if (nccl && !c->nccl[0] && strcmp(nccl, "unknown") != 0)
			snprintf(c->nccl, sizeof(c->nccl), "%s", nccl);
		bool seen = false;
		for (int i = 0; i < c->n_runs && !seen; i++)
			seen = c->runs[i] == run;
		if (!seen && c->n_runs < (int)RM_ARRAY_SIZE(c->runs))
			c->runs[c->n_runs++] = run;
	}
	if (rc != SQLITE_DONE)
		status = rm_calib__sql_error(db, err, "reading measurements");
done:
	sqlite3_finalize(st);
	free(ids);
	if (status == RM_OK) {
		find_conflicts(c, rep);
		if (c->no_topology)
			add_note(rep,
				 "%d collective measurement%s without a group size or node count (stored by an older "
				 "remora, or imported from a trace without --gpus-per-node) not fitted",
				 c->no_topology, c->no_topology == 1 ? "" : "s");
	}
	return status;
}

static rm_calib_fit_result *add_result(rm_calib_fit_report *rep, const char *model)
{
	rep->results = rm_xrealloc(rep->results, (size_t)(rep->n_results + 1) * sizeof(*rep->results));
	rm_calib_fit_result *r = &rep->results[rep->n_results++];
	memset(r, 0, sizeof(*r));
	snprintf(r->model, sizeof(r->model), "%s", model);
	return r;
}

static void fail_result(rm_calib_fit_result *r, const rm_error *e)
{
	r->ok = false;
	snprintf(r->why, sizeof(r->why), "%s", e->msg);
}

/* Stores a successful fit; on a database failure returns it (the caller rolls back). */
static rm_status store(rm_calib_db *db, const char *profile, rm_calib_fit_result *r, json_t *params,
		       double fit_error, int n, rm_error *err)
{
	r->ok = true;
	r->fit_error = fit_error;
	r->n_points = n;
	rm_status st = rm_calib__store_fit(db, profile, r->model, params, fit_error, n, err);
	json_decref(params);
	return st;
}

static bool profile_name_ok(const char *s)
{
	if (!s || !*s || strlen(s) > 48)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      *s == '.' || *s == '_' || *s == '-'))
			return false;
	return true;
}

static rm_status fit_rate(rm_calib_db *db, const char *profile, rm_calib_fit_report *rep, const char *model,
			  const series *s, bool time_per_unit, rm_error *err)
{
	if (s->n == 0)
		return RM_OK;
	rm_calib_fit_result *r = add_result(rep, model);
	rm_error e;
	rm_error_clear(&e);
	double c0, c1, rms;
	if (rm_calib_fit_line(s->x, s->y, s->n, &c0, &c1, &rms, &e) != RM_OK) {
		r->n_points = s->n;
		fail_result(r, &e);
		return RM_OK;
	}
	json_t *p;
	if (time_per_unit) {
		/* launch: x = kernels, slope = us per kernel */
		p = json_pack("{s:f, s:f}", "per_kernel_us", c1, "fixed_us", c0);
		snprintf(r->summary, sizeof(r->summary), "%.3f us per kernel (+%.2f us fixed)", c1, c0);
	} else {
		double bw = 1.0 / (c1 * 1e3);
		p = json_pack("{s:f, s:f}", "GBps", bw, "latency_us", c0);
		snprintf(r->summary, sizeof(r->summary), "%.1f GB/s, latency %.2f us", bw, c0);
	}
	return store(db, profile, r, p, rms, s->n, err);
}

/*
 * The launch floor of a group's single-process points: the largest size at which a point of a
 * run with gpus_per_thread > 1 is at the floor (rm_nccl_is_launch_floor against the base's model
 * of that group, algorithm as forced), or -1 when none is. Every point of such runs up to that
 * size is the floor (the host's serial launches, not the collective).
 */
static int64_t launch_floor_bytes(const coll_group *g, rm_coll coll, const rm_hw_profile *hw, const char *nccl)
{
	bool single = false;
	for (int i = 0; i < g->n && !single; i++)
		single = g->gpus_per_thread[i] > 1;
	if (!single)
		return -1;
	rm_nccl_model *m = rm_new(rm_nccl_model, 1);
	if (rm_nccl_model_init(m, hw, nccl && nccl[0] ? nccl : NULL, NULL) != RM_OK &&
	    rm_nccl_model_init(m, hw, NULL, NULL) != RM_OK) {
		free(m);
		return -1;
	}
	unsigned mask = RM_NCCL_ALL_ALGOS;
	if (strcmp(g->algo, "default") != 0 && !rm_nccl_parse_algos(g->algo, &mask, NULL))
		mask = RM_NCCL_ALL_ALGOS;
	int64_t floor_max = -1;
	for (int i = 0; i < g->n; i++) {
		if (g->gpus_per_thread[i] <= 1 || g->bytes[i] <= 0 || g->bytes[i] <= floor_max)
			continue;
		rm_coll_query q = rm_coll_query_make(coll, g->bytes[i], g->ranks, g->nodes);
		q.algo_mask = mask;
		rm_coll_estimate e;
		if (rm_nccl_estimate(m, &q, &e, NULL) == RM_OK && rm_nccl_is_launch_floor(g->us[i], e.time_us))
			floor_max = g->bytes[i];
	}
	free(m);
	return floor_max;
}

static rm_status fit_collectives(rm_calib_db *db, const rm_calib_fit_opts *opts, const collected *c,
				 const rm_hw_profile *hw, rm_calib_fit_report *rep, rm_error *err)
{
	for (int i = 0; i < c->n_groups; i++) {
		const coll_group *g = &c->groups[i];
		rm_coll coll;
		rm_coll_parse(g->bench, &coll);
		/* collective.OP.RxN[.ALGO][.proto-P][.tuning-T]: one fit per NCCL setting */
		char model[256];
		snprintf(model, sizeof(model), "collective.%s.%dx%d", rm_coll_name(coll), g->ranks, g->nodes);
		if (strcmp(g->algo, "default") != 0) {
			size_t l = strlen(model);
			snprintf(model + l, sizeof(model) - l, ".%s", g->algo);
		}
		if (strcmp(g->proto, "default") != 0) {
			size_t l = strlen(model);
			snprintf(model + l, sizeof(model) - l, ".proto-%s", g->proto);
		}
		if (strcmp(g->tuning, "default") != 0) {
			size_t l = strlen(model);
			snprintf(model + l, sizeof(model) - l, ".tuning-%s", g->tuning);
		}
		rm_calib_fit_result *r = add_result(rep, model);
		r->n_points = g->n;
		/* a single-process run's launch floor is the host's, not the collective's: left out */
		int64_t floor_max = launch_floor_bytes(g, coll, hw, c->nccl);
		int64_t *bytes = rm_new(int64_t, (size_t)g->n);
		double *us = rm_new(double, (size_t)g->n);
		int n = 0, excluded = 0;
		int64_t smallest_kept = -1;
		for (int k = 0; k < g->n; k++) {
			if (g->gpus_per_thread[k] > 1 && g->bytes[k] > 0 && g->bytes[k] <= floor_max) {
				excluded++;
				continue;
			}
			bytes[n] = g->bytes[k];
			us[n] = g->us[k];
			if (bytes[n] > 0 && (smallest_kept < 0 || bytes[n] < smallest_kept))
				smallest_kept = bytes[n];
			n++;
		}
		rm_calib_regime reg[RM_CALIB_MAX_REGIMES];
		int nr = 0;
		double rms = 0;
		rm_error e;
		rm_error_clear(&e);
		rm_status fst = rm_calib_fit_collective(bytes, us, n, opts->tolerance, reg, &nr, &rms, &e);
		free(bytes);
		free(us);
		if (fst != RM_OK) {
			if (excluded)
				rm_error_prefix(&e, "%d sizes up to %lld B are a single-process run's launch floor and "
						    "left out; ",
						excluded, (long long)floor_max);
			fail_result(r, &e);
			continue;
		}
		if (excluded && smallest_kept > floor_max)
			/* below the first size above the floor the model applies, not a line drawn
			 * through sizes the floor hid */
			reg[0].min_bytes = (int64_t)floor(sqrt((double)floor_max * (double)smallest_kept)) + 1;
		json_t *regimes = json_array();
		double worst = 0;
		int used = 0;
		for (int k = 0; k < nr; k++) {
			json_array_append_new(regimes,
					      json_pack("{s:I, s:I, s:f, s:f, s:i, s:f}", "min_bytes",
							(json_int_t)reg[k].min_bytes, "max_bytes", (json_int_t)reg[k].max_bytes,
							"latency_us", reg[k].latency_us, "algbw_GBps", reg[k].algbw_GBps,
							"n_points", reg[k].n_points, "max_rel_error", reg[k].max_rel_error));
			worst = fmax(worst, reg[k].max_rel_error);
			used += reg[k].n_points;
		}
		json_t *p = json_pack("{s:s, s:i, s:i, s:i, s:s, s:o, s:f}", "collective", rm_coll_name(coll), "ranks",
				      g->ranks, "ranks_per_node", g->ranks / g->nodes, "nodes", g->nodes, "algo", g->algo,
				      "regimes", regimes, "max_rel_error", worst);
		if (strcmp(g->proto, "default") != 0)
			json_object_set_new(p, "proto", json_string(g->proto));
		if (strcmp(g->tuning, "default") != 0)
			json_object_set_new(p, "tuning", json_string(g->tuning));
		if (excluded) {
			json_object_set_new(p, "launch_floor_points", json_integer(excluded));
			json_object_set_new(p, "launch_floor_max_bytes", json_integer(floor_max));
		}
		int len = snprintf(r->summary, sizeof(r->summary), "%d regime%s over %d sizes, worst point %.1f%%", nr,
				   nr == 1 ? "" : "s", used, 100 * worst);
		if (excluded && len > 0 && (size_t)len < sizeof(r->summary))
			snprintf(r->summary + len, sizeof(r->summary) - (size_t)len,
				 "; %d launch-floor size%s (<= %lld B, single process) left to the model", excluded,
				 excluded == 1 ? "" : "s", (long long)floor_max);
		RM_CHECK(store(db, opts->profile, r, p, rms, used, err));
	}
	return RM_OK;
}

static rm_status fit_interference(rm_calib_db *db, const char *profile, const collected *c,
				  rm_calib_fit_report *rep, rm_error *err)
{
	if (c->n_interf == 0)
		return RM_OK;
	/* slowdown of each row against the 'none' row of its shape */
	int n = c->n_interf;
	double *held = rm_new(double, (size_t)n), *slow = rm_new(double, (size_t)n);
	int m = 0, nn = 0;
	double nccl_sum = 0, nccl_max = 0;
	for (int i = 0; i < n; i++) {
		const interf_row *r = &c->interf[i];
		if (!strcmp(r->concurrent, "none"))
			continue;
		double alone = 0;
		int count = 0;
		for (int j = 0; j < n; j++) {
			const interf_row *a = &c->interf[j];
			if (!strcmp(a->concurrent, "none") && a->m == r->m && a->n == r->n && a->k == r->k &&
			    !strcmp(a->dtype, r->dtype)) {
				alone += a->us;
				count++;
			}
		}
		if (count == 0)
			continue;
		double s = r->us / (alone / count);
		if (!strcmp(r->concurrent, "sms")) {
			held[m] = r->held;
			slow[m] = s;
			m++;
		} else {
			nccl_sum += s;
			nccl_max = fmax(nccl_max, s);
			nn++;
		}
	}
	rm_calib_fit_result *r = add_result(rep, "interference.sms");
	rm_error e;
	rm_error_clear(&e);
	double per_sm = 0, rms = 0;
	rm_status st = RM_OK;
	if (rm_calib_fit_interference(held, slow, m, &per_sm, &rms, &e) != RM_OK) {
		r->n_points = m;
		fail_result(r, &e);
	} else {
		snprintf(r->summary, sizeof(r->summary), "GEMM slowdown %.4f per SM held (%.1f%% at 24 SMs)",
			 per_sm, 100 * per_sm * 24);
		st = store(db, profile, r, json_pack("{s:f}", "slowdown_per_sm", per_sm), rms, m, err);
	}
	if (st == RM_OK && nn > 0) {
		r = add_result(rep, "interference.nccl");
		snprintf(r->summary, sizeof(r->summary), "GEMM slowdown next to an NCCL collective: mean %.3f, worst %.3f",
			 nccl_sum / nn, nccl_max);
		st = store(db, profile, r, json_pack("{s:f, s:f}", "slowdown", nccl_sum / nn, "worst", nccl_max), 0.0,
			   nn, err);
	}
	free(held);
	free(slow);
	return st;
}

rm_status rm_calib_fit(rm_calib_db *db, const rm_calib_fit_opts *opts, rm_calib_fit_report *rep, rm_error *err)
{
	memset(rep, 0, sizeof(*rep));
	if (!profile_name_ok(opts->profile))
		return rm_error_set(err, RM_INVALID, NULL, 0, 0,
				    "profile name '%s': use 1 to 48 letters, digits, '.', '_' or '-'",
				    opts->profile ? opts->profile : "");
	collected c;
	memset(&c, 0, sizeof(c));
	rm_status st = collect(db, opts, &c, rep, err);
	if (st != RM_OK)
		goto done;
	if (c.total == 0) {
		st = rm_error_set(err, RM_MISSING, db->path, 0, 0,
				  "no measurements%s to fit (import some with `remora calib import`)",
				  opts->n_runs ? " in the selected runs" : "");
		goto done;
	}
	const char *base = opts->base ? opts->base : rm_calib__base_for_gpu(c.gpu);
	if (!base) {
		st = rm_error_set(err, RM_NOT_FOUND, NULL, 0, 0,
				  "cannot tell which embedded profile GPU '%s' is; pass --base NAME (see `remora hw list`)",
				  c.gpu[0] ? c.gpu : "(unknown)");
		goto done;
	}
	const rm_hw_profile *hw = rm_hw_profile_find(base, err);
	if (!hw) {
		st = err ? err->status : RM_NOT_FOUND;
		goto done;
	}
	snprintf(rep->base, sizeof(rep->base), "%s", hw->name);
	st = rm_calib__begin(db, err);
	if (st != RM_OK)
		goto done;
	json_t *runs = json_array();
	for (int i = 0; i < c.n_runs; i++)
		json_array_append_new(runs, json_integer(c.runs[i]));
	rm_calib_fit_result *pr = add_result(rep, "profile");
	snprintf(pr->summary, sizeof(pr->summary), "base %s, GPU %s, NCCL %s%s", hw->name, c.gpu[0] ? c.gpu : "?",
		 c.nccl[0] ? c.nccl : "?", rep->n_conflicts ? " (conflicting rows: see below)" : "");
	st = store(db, opts->profile, pr,
		   json_pack("{s:s, s:s, s:s, s:o}", "base", hw->name, "gpu", c.gpu, "nccl_version", c.nccl, "runs", runs),
		   0.0, c.total, err);
	for (int i = 0; i < GEMM_VARIANTS && st == RM_OK; i++) {
		if (c.gemm[i].n == 0)
			continue;
		rm_calib_fit_result *r = add_result(rep, gemm_names[i]);
		rm_error e;
		rm_error_clear(&e);
		double t0, R, rms;
		if (rm_calib_fit_gemm(c.gemm[i].p, c.gemm[i].n, hw->sm_count, hw->gemm_tile_m, hw->gemm_tile_n, &t0,
				      &R, &rms, &e) != RM_OK) {
			r->n_points = c.gemm[i].n;
			fail_result(r, &e);
			continue;
		}
		snprintf(r->summary, sizeof(r->summary), "t0 %.2f us, R %.1f TFLOP/s (wave-quantized)", t0, R);
		st = store(db, opts->profile, r,
			   json_pack("{s:f, s:f, s:f, s:f, s:f}", "t0_us", t0, "TFLOPs", R, "sm_count", hw->sm_count,
				     "tile_m", hw->gemm_tile_m, "tile_n", hw->gemm_tile_n),
			   rms, c.gemm[i].n, err);
	}
	if (st == RM_OK)
		st = fit_rate(db, opts->profile, rep, "hbm.copy", &c.hbm[0], false, err);
	if (st == RM_OK)
		st = fit_rate(db, opts->profile, rep, "hbm.triad", &c.hbm[1], false, err);
	if (st == RM_OK)
		st = fit_rate(db, opts->profile, rep, "launch", &c.launch[0], true, err);
	if (st == RM_OK)
		st = fit_rate(db, opts->profile, rep, "launch.graph", &c.launch[1], true, err);
	static const char *const copy_names[3] = {"copy.h2d", "copy.d2h", "copy.bidir"};
	for (int i = 0; i < 3 && st == RM_OK; i++)
		st = fit_rate(db, opts->profile, rep, copy_names[i], &c.copy[i], false, err);
	if (st == RM_OK)
		st = fit_interference(db, opts->profile, &c, rep, err);
	if (st == RM_OK)
		st = fit_collectives(db, opts, &c, hw, rep, err);
	if (st != RM_OK) {
		rm_calib__rollback(db);
		goto done;
	}
	st = rm_calib__commit(db, err);
	if (st != RM_OK)
		goto done;
	int failed = 0;
	for (int i = 0; i < rep->n_results; i++)
		failed += !rep->results[i].ok;
	if (failed) {
		char first[300] = "";
		for (int i = 0; i < rep->n_results && !first[0]; i++)
			if (!rep->results[i].ok)
				snprintf(first, sizeof(first), "%s: %s", rep->results[i].model, rep->results[i].why);
		st = rm_error_set(err, RM_INVALID, NULL, 0, 0,
				  "%d fit%s failed (their earlier fits, if any, are kept): %s", failed,
				  failed == 1 ? "" : "s", first);
	}
done:
	collected_free(&c);
	return st;
}

void rm_calib_fit_report_finish(rm_calib_fit_report *rep)
{
	if (!rep)
		return;
	free(rep->results);
	rep->results = NULL;
	rep->n_results = 0;
	free(rep->conflicts);
	rep->conflicts = NULL;
	rep->n_conflicts = 0;
	free(rep->notes);
	rep->notes = NULL;
	rep->n_notes = 0;
}

/* ---- plausibility of stored fits --------------------------------------------------------------- */

static void warn(json_t *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void warn(json_t *out, const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	json_array_append_new(out, json_string(buf));
}

static double jnum(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_number(v) ? json_number_value(v) : NAN;
}

/*
 * Physical bound on a collective's busBW for a group on hw: the per-direction NVLink bandwidth
 * (datasheet), which no ring, tree or point-to-point schedule can exceed per GPU (nccl-tests
 * doc/PERFORMANCE.md: busBW is the per-GPU link traffic rate). NVLS all-reduce reduces in the
 * switch, so each GPU moves the buffer once each way: algBW <= link, busBW <= 2(n-1)/n * link.
 */
static double busbw_bound(rm_coll coll, int ranks, int nodes, const rm_hw_profile *hw)
{
	double link = hw->nvlink_GBps;
	if (coll == RM_COLL_ALL_REDUCE && nodes == 1 && hw->nccl_nvls_bw_GBps > 0)
		return link * rm_coll_busbw_factor(coll, ranks);
	return link;
}

void rm_calib__fit_warnings(const char *model, json_t *params, const rm_hw_profile *hw, json_t *out)
{
	if (!model || !json_is_object(params) || !hw)
		return;
	if (!strncmp(model, "collective.", 11)) {
		rm_coll coll;
		const char *cname = json_string_value(json_object_get(params, "collective"));
		int ranks = (int)jint(params, "ranks", 0), nodes = (int)jint(params, "nodes", 0);
		if (!cname || !rm_coll_parse(cname, &coll) || ranks < 1 || nodes < 1) {
			warn(out, "no topology (operation, ranks, nodes) recorded: this fit is not applied");
			return;
		}
		double bound = busbw_bound(coll, ranks, nodes, hw);
		double factor = rm_coll_busbw_factor(coll, ranks);
		size_t k;
		json_t *reg;
		json_array_foreach(json_object_get(params, "regimes"), k, reg) {
			double bw = jnum(reg, "algbw_GBps");
			if (!isfinite(bw) || bw >= RM_CALIB_FLAT_ALGBW_GBps || factor <= 0)
				continue;
			if (bw * factor > bound)
				warn(out,
				     "regime %zu: busBW %.1f GB/s (algBW %.1f) is above the %s's physical peak %.1f GB/s "
				     "(NVLink per direction%s): check the log",
				     k + 1, bw * factor, bw, hw->name, bound,
				     bound > hw->nvlink_GBps ? ", x 2(n-1)/n for NVLS all-reduce" : "");
		}
		return;
	}
	static const struct {
		const char *model, *key, *what;
		rm_hw_field peak;
	} checks[] = {
		{"gemm.bf16", "TFLOPs", "BF16 dense tensor peak", RM_HW_bf16_TFLOPs},
		{"gemm.fp8", "TFLOPs", "FP8 dense tensor peak", RM_HW_fp8_TFLOPs},
		{"hbm.copy", "GBps", "HBM peak", RM_HW_hbm_peak_GBps},
		{"hbm.triad", "GBps", "HBM peak", RM_HW_hbm_peak_GBps},
		{"copy.h2d", "GBps", "PCIe peak per direction", RM_HW_pcie_GBps},
		{"copy.d2h", "GBps", "PCIe peak per direction", RM_HW_pcie_GBps},
		{"copy.bidir", "GBps", "PCIe peak per direction", RM_HW_pcie_GBps},
	};
	for (size_t i = 0; i < RM_ARRAY_SIZE(checks); i++) {
		if (strcmp(model, checks[i].model) != 0)
			continue;
		double v = jnum(params, checks[i].key);
		double peak = rm_hw_profile_get(hw, checks[i].peak);
		if (isfinite(v) && peak > 0 && v > peak)
			warn(out, "%.1f %s is above the %s's %s (%.1f): check the measurements", v,
			     !strcmp(checks[i].key, "TFLOPs") ? "TFLOP/s" : "GB/s", hw->name, checks[i].what, peak);
	}
}
