/*
 * Hardware specifications: "NAME" (embedded) or "PATH:NAME" (a calibrated profile of the
 * database at PATH), rm_calib_resolve_hw. See remora/calib.h.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib_internal.h"

/* Sources of fitted fields (static: rm_hw_profile keeps the pointer). */
static const char SRC_GEMM[] = "calibration: gemm.bf16 fit, t = t0 + FLOPs/R wave-quantized (remora calib fit)";
static const char SRC_GEMM_FP8[] = "calibration: gemm.fp8 fit (remora calib fit)";
static const char SRC_INTERF[] = "calibration: interference.sms fit, GEMM slowdown per SM held (remora calib fit)";
static const char SRC_HBM[] = "calibration: hbm.copy fit, bytes moved / time (remora calib fit)";
static const char SRC_LAUNCH[] = "calibration: launch fit, time per kernel without CUDA graph (remora calib fit)";
static const char SRC_H2D[] = "calibration: copy.h2d fit, pinned (remora calib fit)";
static const char SRC_D2H[] = "calibration: copy.d2h fit, pinned (remora calib fit)";

typedef struct fit_row {
	char model[64];
	json_t *params;
	/* the topology columns of a collective fit (schema 3); ranks 0 when not recorded */
	int ranks, ranks_per_node, nodes;
	char op[32];
} fit_row;

static double jreal(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_number(v) ? json_number_value(v) : NAN;
}

static void set_if(rm_hw_profile *hw, rm_hw_field f, double v, const char *src)
{
	if (isfinite(v) && v > 0)
		rm_hw_profile_set(hw, f, v, src);
}

/* Lists the profiles in the database into buf, for a "not found" message. */
static void list_profiles(rm_calib_db *db, char *buf, size_t size)
{
	buf[0] = '\0';
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db->sql, "SELECT DISTINCT profile FROM fits ORDER BY profile", -1, &st, NULL) != SQLITE_OK) {
		snprintf(buf, size, "unreadable: %s", sqlite3_errmsg(db->sql));
		sqlite3_finalize(st);
		return;
	}
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		size_t l = strlen(buf);
		const char *p = (const char *)sqlite3_column_text(st, 0);
		snprintf(buf + l, size - l, "%s%s", l ? ", " : "", p ? p : "?");
	}
	if (rc != SQLITE_DONE)
		snprintf(buf, size, "unreadable: %s", sqlite3_errmsg(db->sql));
	sqlite3_finalize(st);
}

/* Fitted time of a regime at bytes. */
static double regime_us(double lat, double bw, double bytes)
{
	return lat + bytes / (bw * 1e3);
}

static rm_status add_override(rm_nccl_model *m, const rm_nccl_override *ov, rm_error *err)
{
	if (m->n_overrides >= RM_NCCL_MAX_OVERRIDES || !rm_nccl_model_add_override(m, ov))
		return rm_error_set(err, RM_RANGE, NULL, 0, 0,
				    "the calibrated profile needs more than %d collective overrides; "
				    "ask for one group size (--gpus) at a time",
				    RM_NCCL_MAX_OVERRIDES);
	return RM_OK;
}

/*
 * One regime of a fitted collective: an override on the pair the model picks at the regime's
 * middle size (among the algorithms the run allowed), and slower copies on every other pair that
 * would beat the measured time somewhere in the range, so the model returns what was measured.
 */
static rm_status apply_regime(rm_nccl_model *m, rm_coll coll, int ranks, int nodes, unsigned algo_mask,
			      unsigned proto_mask, json_t *reg, const char *label, rm_error *err)
{
	json_t *jmin = json_object_get(reg, "min_bytes"), *jmax = json_object_get(reg, "max_bytes");
	double lat = jreal(reg, "latency_us"), bw = jreal(reg, "algbw_GBps");
	if (!json_is_integer(jmin) || !json_is_integer(jmax) || !isfinite(lat) || !(bw > 0))
		return rm_error_set(err, RM_PARSE, NULL, 0, 0, "fit %s: a regime lacks min_bytes, max_bytes, "
				    "latency_us or algbw_GBps", label);
	int64_t lo = json_integer_value(jmin), hi = json_integer_value(jmax);
	double a = lo > 1 ? (double)lo : 1.0, b = hi < (INT64_C(1) << 40) ? (double)hi : (double)(INT64_C(1) << 40);
	int64_t mid = (int64_t)sqrt(a * b);
	rm_coll_query q = rm_coll_query_make(coll, mid, ranks, nodes);
	int best_a = -1, best_p = -1;
	double best = INFINITY;
	for (int al = 0; al < RM_NCCL_ALGO_COUNT; al++) {
		if (!(algo_mask & (1u << al)))
			continue;
		for (int p = 0; p < RM_NCCL_PROTO_COUNT; p++) {
			if (!(proto_mask & (1u << p)))
				continue;
			double t = rm_nccl_pair_time(m, &q, (rm_nccl_algo)al, (rm_nccl_proto)p, NULL);
			if (t >= 0 && t < best) {
				best = t;
				best_a = al;
				best_p = p;
			}
		}
	}
	if (best_a < 0) {
		rm_log_warn("fit %s: no NCCL algorithm/protocol runs it on %d GPUs over %d node(s); regime skipped",
			    label, ranks, nodes);
		return RM_OK;
	}
	rm_nccl_override ov = {.coll = coll, .algo = (rm_nccl_algo)best_a, .proto = (rm_nccl_proto)best_p,
			       .ranks = ranks, .ranks_per_node = ranks / nodes, .nodes = nodes,
			       .min_bytes = lo, .max_bytes = hi, .latency_us = lat, .algbw_GBps = bw};
	snprintf(ov.source, sizeof(ov.source), "%s", label);
	/* shadows first decided on the model without this regime's override */
	bool shadow[RM_NCCL_ALGO_COUNT][RM_NCCL_PROTO_COUNT] = {{false}};
	for (int al = 0; al < RM_NCCL_ALGO_COUNT; al++)
		for (int p = 0; p < RM_NCCL_PROTO_COUNT; p++) {
			if (al == best_a && p == best_p)
				continue;
			for (double s = a;; s *= 1.4142135623730951) {
				double size = s < b ? s : b;
				rm_coll_query qs = rm_coll_query_make(coll, (int64_t)size, ranks, nodes);
				double t = rm_nccl_pair_time(m, &qs, (rm_nccl_algo)al, (rm_nccl_proto)p, NULL);
				if (t < 0)
					break; /* not available for this collective and topology */
				if (t <= regime_us(lat, bw, size)) {
					shadow[al][p] = true;
					break;
				}
				if (size >= b)
					break;
			}
		}
	RM_CHECK(add_override(m, &ov, err));
	for (int al = 0; al < RM_NCCL_ALGO_COUNT; al++)
		for (int p = 0; p < RM_NCCL_PROTO_COUNT; p++) {
			if (!shadow[al][p])
				continue;
			rm_nccl_override sh = ov;
			sh.algo = (rm_nccl_algo)al;
			sh.proto = (rm_nccl_proto)p;
			sh.latency_us = lat * 1.001 + 0.01;
			sh.algbw_GBps = bw * 0.999;
			snprintf(sh.source, sizeof(sh.source), "%s (not faster than measured)", label);
			RM_CHECK(add_override(m, &sh, err));
		}
	return RM_OK;
}

/* Bytes the fit covers: the last regime's upper bound. */
static json_int_t fit_reach(const fit_row *r)
{
	json_t *regs = json_object_get(r->params, "regimes");
	size_t n = json_array_size(regs);
	return n ? json_integer_value(json_object_get(json_array_get(regs, n - 1), "max_bytes")) : 0;
}

/* NCCL chose the algorithm and the protocol itself (neither NCCL_ALGO nor NCCL_PROTO forced). */
static bool is_default_algo(const fit_row *r)
{
	const char *a = json_string_value(json_object_get(r->params, "algo"));
	const char *p = json_string_value(json_object_get(r->params, "proto"));
	return (!a || !strcmp(a, "default")) && (!p || !strcmp(p, "default"));
}

/*
 * rm_nccl_model uses the first override that matches a size, so the order decides between fits
 * of the same collective: larger groups first, then runs where NCCL chose the algorithm (what it
 * does unforced) before forced ones, then the fit that reaches the larger sizes.
 */
static int fit_row_cmp(const void *x, const void *y)
{
	const fit_row *a = x, *b = y;
	if (a->ranks != b->ranks)
		return b->ranks - a->ranks;
	if (a->nodes != b->nodes)
		return b->nodes - a->nodes;
	if (is_default_algo(a) != is_default_algo(b))
		return is_default_algo(a) ? -1 : 1;
	json_int_t ea = fit_reach(a), eb = fit_reach(b);
	if (ea != eb)
		return ea > eb ? -1 : 1;
	return strcmp(a->model, b->model);
}

static rm_status apply_collectives(rm_nccl_model *m, fit_row *rows, int n, const rm_calib_resolve_opts *o,
				   const char *profile, rm_error *err)
{
	fit_row *colls = rm_new(fit_row, (size_t)(n > 0 ? n : 1));
	int nc = 0;
	for (int i = 0; i < n; i++)
		if (!strncmp(rows[i].model, "collective.", 11))
			colls[nc++] = rows[i];
	qsort(colls, (size_t)nc, sizeof(*colls), fit_row_cmp);
	rm_status st = RM_OK;
	for (int i = 0; i < nc && st == RM_OK; i++) {
		json_t *p = colls[i].params;
		rm_coll coll;
		int ranks = colls[i].ranks, nodes = colls[i].nodes;
		if (ranks < 1 || nodes < 1 || colls[i].ranks_per_node * nodes != ranks) {
			/* stored without a topology (an older remora, nothing to attribute it to): a fit of
			 * an unknown group is not applied to any (`calib show` says so) */
			rm_log_debug("fit %s of profile %s has no topology: not applied", colls[i].model, profile);
			continue;
		}
		if (!rm_coll_parse(colls[i].op, &coll)) {
			st = rm_error_set(err, RM_PARSE, NULL, 0, 0, "fit %s of profile %s: unknown collective '%s'",
					  colls[i].model, profile, colls[i].op);
			break;
		}
		if ((o && o->ranks > 0 && o->ranks != ranks) || (o && o->nodes > 0 && o->nodes != nodes))
			continue;
		if (ranks == 1 || coll == RM_COLL_ALL_TO_ALL || coll == RM_COLL_SEND_RECV)
			continue; /* not tuned by rm_nccl_estimate: no override applies */
		unsigned mask = RM_NCCL_ALL_ALGOS;
		const char *algo = json_string_value(json_object_get(p, "algo"));
		if (algo && strcmp(algo, "default") != 0) {
			rm_error e;
			rm_error_clear(&e);
			if (!rm_nccl_parse_algos(algo, &mask, &e))
				mask = RM_NCCL_ALL_ALGOS;
		}
		unsigned proto_mask = RM_NCCL_ALL_PROTOS;
		const char *proto = json_string_value(json_object_get(p, "proto"));
		if (proto && strcmp(proto, "default") != 0) {
			rm_error e;
			rm_error_clear(&e);
			if (!rm_nccl_parse_protos(proto, &proto_mask, &e))
				proto_mask = RM_NCCL_ALL_PROTOS;
		}
		const char *tuning = json_string_value(json_object_get(p, "tuning"));
		if (tuning && strcmp(tuning, "default") != 0) {
			/* measured with channels, CTAs, NVLS or the CTA policy changed: a setting the model
			 * does not represent, stored for comparison and not applied */
			rm_log_debug("fit %s of profile %s ran under NCCL tuning %s: not applied", colls[i].model, profile,
				     tuning);
			continue;
		}
		json_t *regs = json_object_get(p, "regimes");
		size_t k;
		json_t *reg;
		json_array_foreach(regs, k, reg) {
			char label[320];
			snprintf(label, sizeof(label), "calib %s: %s regime %zu", profile, colls[i].model, k + 1);
			st = apply_regime(m, coll, ranks, nodes, mask, proto_mask, reg, label, err);
			if (st != RM_OK)
				break;
		}
	}
	free(colls);
	return st;
}

static rm_status resolve_db(const char *spec, const char *colon, const rm_calib_resolve_opts *opts,
			    rm_hw_profile *hw, rm_nccl_model *nccl, rm_error *err)
{
	char path[512];
	const char *name = colon + 1;
	size_t plen = (size_t)(colon - spec);
	if (plen == 0 || plen >= sizeof(path) || !*name)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0,
				    "hardware '%s': expected an embedded profile name or DATABASE:PROFILE", spec);
	memcpy(path, spec, plen);
	path[plen] = '\0';
	rm_calib_db *db = rm_calib_db_open(path, false, err);
	if (!db)
		return err ? err->status : RM_IO;
	rm_status st = RM_OK;
	int n = 0, cap = 0;
	fit_row *rows = NULL;
	sqlite3_stmt *q = NULL;
	st = rm_calib__prepare(db,
			       "SELECT model, params, op, ranks, ranks_per_node, nodes FROM fits WHERE profile = ? "
			       "ORDER BY model",
			       &q, "reading fits", err);
	if (st != RM_OK)
		goto done;
	if (sqlite3_bind_text(q, 1, name, -1, SQLITE_TRANSIENT) != SQLITE_OK) {
		st = rm_calib__sql_error(db, err, "reading fits");
		sqlite3_finalize(q);
		goto done;
	}
	int rc;
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		const char *model = (const char *)sqlite3_column_text(q, 0);
		const char *text = (const char *)sqlite3_column_text(q, 1);
		json_t *p = text ? json_loads(text, 0, NULL) : NULL;
		if (!model || !p) {
			json_decref(p);
			st = rm_error_set(err, RM_PARSE, path, 0, 0,
					  "profile '%s': a stored fit%s%s has unreadable parameters (a damaged "
					  "database? re-run `remora calib fit`)",
					  name, model ? " " : "", model ? model : "");
			break;
		}
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			rows = rm_xrealloc(rows, (size_t)cap * sizeof(*rows));
		}
		memset(&rows[n], 0, sizeof(rows[n]));
		snprintf(rows[n].model, sizeof(rows[n].model), "%s", model);
		rows[n].params = p;
		const char *op = (const char *)sqlite3_column_text(q, 2);
		snprintf(rows[n].op, sizeof(rows[n].op), "%s", op ? op : "");
		rows[n].ranks = sqlite3_column_int(q, 3);
		rows[n].ranks_per_node = sqlite3_column_int(q, 4);
		rows[n].nodes = sqlite3_column_int(q, 5);
		n++;
	}
	sqlite3_finalize(q);
	if (st != RM_OK)
		goto done;
	if (rc != SQLITE_DONE) {
		st = rm_calib__sql_error(db, err, "reading fits");
		goto done;
	}
	const char *base = NULL, *version = NULL;
	for (int i = 0; i < n; i++)
		if (!strcmp(rows[i].model, "profile")) {
			base = json_string_value(json_object_get(rows[i].params, "base"));
			version = json_string_value(json_object_get(rows[i].params, "nccl_version"));
		}
	if (!base) {
		char names[512];
		list_profiles(db, names, sizeof(names));
		st = rm_error_set(err, RM_NOT_FOUND, path, 0, 0,
				  "no calibrated profile '%s' here (profiles: %s); make one with `remora calib fit "
				  "--db %s --profile %s`",
				  name, names[0] ? names : "none", path, name);
		goto done;
	}
	const rm_hw_profile *b = rm_hw_profile_find(base, err);
	if (!b) {
		st = err ? err->status : RM_NOT_FOUND;
		goto done;
	}
	*hw = *b;
	snprintf(hw->name, sizeof(hw->name), "%s", name);
	snprintf(hw->description, sizeof(hw->description), "calibrated %s (base %s)", spec, base);
	for (int i = 0; i < n; i++) {
		json_t *p = rows[i].params;
		const char *m = rows[i].model;
		if (!strcmp(m, "gemm.bf16")) {
			set_if(hw, RM_HW_gemm_overhead_us, jreal(p, "t0_us"), SRC_GEMM);
			if (jreal(p, "t0_us") == 0)
				rm_hw_profile_set(hw, RM_HW_gemm_overhead_us, 0, SRC_GEMM);
			set_if(hw, RM_HW_gemm_bf16_TFLOPs, jreal(p, "TFLOPs"), SRC_GEMM);
			/* the measured fit is t0 + waves x FLOPs / R (calibrate/fit.c): no K pipeline term,
			 * so the embedded K0 would count it twice */
			rm_hw_profile_set(hw, RM_HW_gemm_k_overhead, 0, SRC_GEMM);
		} else if (!strcmp(m, "gemm.fp8")) {
			set_if(hw, RM_HW_gemm_fp8_TFLOPs, jreal(p, "TFLOPs"), SRC_GEMM_FP8);
		} else if (!strcmp(m, "interference.sms")) {
			set_if(hw, RM_HW_gemm_slowdown_per_sm, jreal(p, "slowdown_per_sm"), SRC_INTERF);
		} else if (!strcmp(m, "hbm.copy")) {
			set_if(hw, RM_HW_hbm_achievable_GBps, jreal(p, "GBps"), SRC_HBM);
		} else if (!strcmp(m, "launch")) {
			set_if(hw, RM_HW_launch_us, jreal(p, "per_kernel_us"), SRC_LAUNCH);
		} else if (!strcmp(m, "copy.h2d")) {
			set_if(hw, RM_HW_h2d_GBps, jreal(p, "GBps"), SRC_H2D);
		} else if (!strcmp(m, "copy.d2h")) {
			set_if(hw, RM_HW_d2h_GBps, jreal(p, "GBps"), SRC_D2H);
		}
	}
	if (nccl) {
		const char *v = opts && opts->nccl_version ? opts->nccl_version : version;
		rm_error e;
		rm_error_clear(&e);
		if (rm_nccl_model_init(nccl, hw, v && v[0] ? v : NULL, &e) != RM_OK) {
			if (opts && opts->nccl_version) {
				st = rm_error_set(err, e.status, NULL, 0, 0, "%s", e.msg);
				goto done;
			}
			/* the runs' release is outside the modelled ones: the default constants, and the
			 * label says which release was measured and that it was not modelled */
			st = rm_nccl_model_init(nccl, hw, NULL, err);
			if (st != RM_OK)
				goto done;
			snprintf(nccl->version, sizeof(nccl->version), "%s", v);
		}
		st = apply_collectives(nccl, rows, n, opts, name, err);
	}
done:
	for (int i = 0; i < n; i++)
		json_decref(rows[i].params);
	free(rows);
	rm_calib_db_close(db);
	return st;
}

rm_status rm_calib_resolve_hw(const char *spec, const rm_calib_resolve_opts *opts, rm_hw_profile *hw,
			      rm_nccl_model *nccl, rm_error *err)
{
	if (!spec || !*spec)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0, "empty hardware specification");
	const char *colon = strrchr(spec, ':');
	if (colon)
		return resolve_db(spec, colon, opts, hw, nccl, err);
	const rm_hw_profile *p = rm_hw_profile_find(spec, err);
	if (!p)
		return err ? err->status : RM_NOT_FOUND;
	*hw = *p;
	if (nccl)
		return rm_nccl_model_init(nccl, hw, opts ? opts->nccl_version : NULL, err);
	return RM_OK;
}

rm_status rm_calib_fit_value(const char *spec, const char *model, const char *key, double *value, rm_error *err)
{
	const char *colon = spec ? strrchr(spec, ':') : NULL;
	if (!colon || colon == spec || !colon[1])
		return rm_error_set(err, RM_INVALID, NULL, 0, 0, "'%s' is not a calibrated profile (DATABASE:PROFILE)",
				    spec ? spec : "");
	char path[512];
	size_t plen = (size_t)(colon - spec);
	if (plen >= sizeof(path))
		return rm_error_set(err, RM_INVALID, NULL, 0, 0, "database path too long");
	memcpy(path, spec, plen);
	path[plen] = '\0';
	rm_calib_db *db = rm_calib_db_open(path, false, err);
	if (!db)
		return err ? err->status : RM_IO;
	sqlite3_stmt *q = NULL;
	rm_status st = RM_OK;
	st = rm_calib__prepare(db, "SELECT params FROM fits WHERE profile = ? AND model = ?", &q, "reading fits", err);
	if (st != RM_OK)
		goto done;
	int rc = SQLITE_OK;
	rc = rm_calib__bind_rc(rc, sqlite3_bind_text(q, 1, colon + 1, -1, SQLITE_TRANSIENT));
	rc = rm_calib__bind_rc(rc, sqlite3_bind_text(q, 2, model, -1, SQLITE_TRANSIENT));
	if (rc != SQLITE_OK) {
		st = rm_calib__sql_error(db, err, "reading fits");
		goto done;
	}
	rc = sqlite3_step(q);
	if (rc == SQLITE_DONE) {
		st = rm_error_set(err, RM_NOT_FOUND, path, 0, 0, "profile '%s' has no fit '%s'", colon + 1, model);
		goto done;
	}
	if (rc != SQLITE_ROW) {
		st = rm_calib__sql_error(db, err, "reading fits");
		goto done;
	}
	const char *text = (const char *)sqlite3_column_text(q, 0);
	json_t *p = text ? json_loads(text, 0, NULL) : NULL;
	double v = jreal(p, key);
	json_decref(p);
	if (!isfinite(v)) {
		st = rm_error_set(err, RM_NOT_FOUND, path, 0, 0, "fit '%s' of profile '%s' has no number '%s'", model,
				  colon + 1, key);
		goto done;
	}
	*value = v;
done:
	sqlite3_finalize(q);
	rm_calib_db_close(db);
	return st;
}

rm_status rm_calib_hw_resolver(const char *spec, const char *nccl_version, int ranks, int nodes, rm_hw_profile *hw,
			       rm_nccl_model *nccl, rm_error *err)
{
	rm_calib_resolve_opts ro = {.nccl_version = nccl_version, .ranks = ranks, .nodes = nodes};
	return rm_calib_resolve_hw(spec, &ro, hw, nccl, err);
}
