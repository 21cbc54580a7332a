/*
 * Capacity planning (remora/plan.h): layouts per GPU count, one search per (hardware, GPU
 * count), the constraint that picks the answer.
 */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "remora/pipeline.h"
#include "remora/plan.h"

/* ---- parsing ---- */

bool rm_plan_parse_tokens(const char *text, double *tokens, rm_error *err)
{
	char *end = NULL;
	/* decimal only: strtod would also read hex ("0x10"), "inf" and "nan" */
	size_t digits = text ? strspn(text, "0123456789.eE+-") : 0;
	double v = text && digits > 0 ? strtod(text, &end) : NAN;
	if (end && end > text + digits)
		end = NULL;
	double scale = 1;
	if (end && *end) {
		static const struct {
			char c;
			double scale;
		} si[] = {{'K', 1e3}, {'M', 1e6}, {'B', 1e9}, {'G', 1e9}, {'T', 1e12}, {'P', 1e15}};
		scale = 0;
		for (size_t i = 0; i < RM_ARRAY_SIZE(si) && end[1] == '\0'; i++)
			if (toupper((unsigned char)end[0]) == si[i].c)
				scale = si[i].scale;
	}
	if (!end || end == text || scale == 0 || !(v * scale >= 1) || !(v * scale <= 1e18)) {
		rm_error_set(err, RM_INVALID, NULL, 0, 0,
			     "'%s' is not a token count: a number of 1 to 10^18 with an optional SI suffix (K, M, "
			     "B or G, T, P: 15T = 15 x 10^12)",
			     text ? text : "");
		return false;
	}
	*tokens = v * scale;
	return true;
}

bool rm_plan_parse_duration(const char *text, double *seconds, rm_error *err)
{
	char *end = NULL;
	/* decimal only, as token counts: strtod would read "0x10d" as 0x10d seconds, "infd" as inf */
	size_t digits = text ? strspn(text, "0123456789.eE+-") : 0;
	double v = text && digits > 0 ? strtod(text, &end) : NAN;
	if (end && end > text + digits)
		end = NULL;
	double scale = 0;
	if (end && end != text) {
		static const struct {
			const char *unit;
			double s;
		} units[] = {{"", 1},	     {"s", 1},	      {"m", 60},     {"min", 60}, {"h", 3600},
			     {"d", 86400}, {"w", 604800}, {"day", 86400}, {"days", 86400}};
		for (size_t i = 0; i < RM_ARRAY_SIZE(units); i++)
			if (strcasecmp(end, units[i].unit) == 0)
				scale = units[i].s;
	}
	if (scale == 0 || !(v > 0) || !isfinite(v * scale)) {
		rm_error_set(err, RM_INVALID, NULL, 0, 0,
			     "'%s' is not a duration: a positive number with s, m, h, d or w (30d, 36h)", text ? text : "");
		return false;
	}
	*seconds = v * scale;
	return true;
}

rm_plan_request rm_plan_request_default(void)
{
	rm_plan_request r;
	memset(&r, 0, sizeof(r));
	for (int i = 0; i < RM_PLAN_MAX_HW; i++)
		r.price[i] = -1;
	snprintf(r.runtime, sizeof(r.runtime), "fsdp2");
	return r;
}

int rm_plan_default_policies(const char *runtime, char (*out)[256], int cap)
{
	/* fsdp2: full AC, torchtitan's op-level SAC (every second matmul and SDPA's output saved:
	 * torchtitan/models/llama3/parallelize_llama.py _save_list), no AC; xla: JAX's built-ins
	 * MaxText users pick from; megatron: its two recompute granularities, and none */
	static const char torchtitan_sac[] = "save_only_these_names('dot_attention_query', 'dot_attention_value', "
					     "'dot_mlp_gate', 'dot_mlp_out', 'attention_context')";
	static const char *const fsdp2[] = {"nothing_saveable", torchtitan_sac, "everything_saveable"};
	static const char *const xla[] = {"nothing_saveable", "dots_with_no_batch_dims_saveable", "everything_saveable"};
	static const char *const megatron[] = {"megatron:full", "megatron:selective", "everything_saveable"};
	const char *const *list = fsdp2;
	if (runtime && strcasecmp(runtime, "xla") == 0)
		list = xla;
	else if (runtime && strcasecmp(runtime, "megatron") == 0)
		list = megatron;
	int n = 0;
	for (int i = 0; i < 3 && n < cap; i++)
		snprintf(out[n++], 256, "%s", list[i]);
	return n;
}

/* ---- layouts ---- */

static bool divides(int64_t d, int64_t n)
{
	return d > 0 && n % d == 0;
}

static bool listed(const int64_t *list, int n, int64_t v)
{
	if (n <= 0)
		return true;
	for (int i = 0; i < n; i++)
		if (list[i] == v)
			return true;
	return false;
}

int rm_plan_layouts(const rm_scenario_resolved *res, int64_t gpus, int gpn, const rm_plan_request *req,
		    char (*out)[256], int cap)
{
	const rm_model_config *m = &res->model;
	int64_t seq = res->train.seq_len;
	bool moe = m->experts > 0;
	int n = 0;
	static const int64_t tps[] = {1, 2, 4, 8};
	static const int64_t pps[] = {1, 2, 3, 4, 6, 7, 8, 9, 12, 14, 16};
	static const int64_t cps[] = {1, 2, 4, 8};
	for (size_t a = 0; a < RM_ARRAY_SIZE(tps); a++) {
		int64_t tp = tps[a];
		if ((req && !listed(req->tp, req->n_tp, tp)) || tp > gpn || !divides(tp, gpus) || !divides(tp, m->heads) || !divides(tp, m->kv_heads) ||
		    (m->ffn > 0 && !divides(tp, m->ffn)) || (m->arch == RM_ARCH_RESIDUAL_MLP && tp > 1))
			continue;
		for (size_t b = 0; b < RM_ARRAY_SIZE(pps); b++) {
			int64_t pp = pps[b];
			if ((req && !listed(req->pp, req->n_pp, pp)) || !divides(pp, m->layers) || !divides(tp * pp, gpus))
				continue;
			for (size_t c = 0; c < RM_ARRAY_SIZE(cps); c++) {
				int64_t cp = cps[c];
				/* context parallelism pays for long sequences only (torchtitan and
				 * Megatron-LM use it from 32k tokens) */
				if ((cp > 1 && seq < 32768) || !divides(cp, seq) || !divides(tp * pp * cp, gpus) ||
				    tp * cp > gpn || (m->arch == RM_ARCH_RESIDUAL_MLP && cp > 1))
					continue;
				int64_t dp = gpus / (tp * pp * cp);
				/* the FSDP group: every data-parallel GPU, or (HSDP) the data-parallel
				 * GPUs of one node, replicated over the others */
				int64_t in_node = gpn / (tp * cp);
				int64_t shards[2] = {dp, in_node >= 1 && in_node < dp && dp % in_node == 0 ? in_node : 0};
				/* Megatron-LM has no FSDP: its data-parallel GPUs are replicas with the
				 * distributed optimizer (ZeRO-1: --use-distributed-optimizer) */
				bool megatron = res->sched.megatron;
				if (megatron) {
					shards[0] = 1;
					shards[1] = 0;
				}
				for (int d = 0; d < 2; d++) {
					int64_t fsdp = shards[d];
					if (fsdp < 1)
						continue;
					int64_t rep = dp / fsdp;
					/* MoE: experts split over the shard group (EP = the FSDP group) when it
					 * divides them, else sharded by FSDP like the other weights */
					bool ep_on = moe && divides(fsdp, m->experts) && fsdp > 1;
					/* the pipeline schedules asked for (1f1b unless --pp-schedule), and
					 * with --async-tp each TP layout also with async TP */
					int ns = pp > 1 && req && req->n_pp_schedules > 0 ? req->n_pp_schedules : 1;
					int na = tp > 1 && req && req->async_tp ? 2 : 1;
					/* --zero: the ZeRO stages of an HSDP layout's replicas (3, the default:
					 * the shard group's FSDP only; 1, 2: optimizer state, and gradients,
					 * sharded over the replicas too) */
					int nz = !megatron && rep > 1 && req && req->n_zero > 0 ? req->n_zero : 1;
					for (int z = 0; z < nz; z++)
					for (int k = 0; k < ns; k++)
						for (int a2 = 0; a2 < na; a2++) {
							if (n >= cap)
								return n;
							int u = snprintf(out[n], 256,
									 "parallelism.tp=%lld parallelism.sp=%s parallelism.pp=%lld "
									 "parallelism.cp=%lld parallelism.fsdp=%lld "
									 "parallelism.dp_replicate=%lld",
									 (long long)tp, tp > 1 ? "true" : "false", (long long)pp,
									 (long long)cp, (long long)fsdp, (long long)rep);
							if (ep_on && u > 0 && u < 256)
								u += snprintf(out[n] + u, (size_t)(256 - u), " parallelism.ep=%lld",
									      (long long)fsdp);
							if (pp > 1 && req && req->n_pp_schedules > 0 && u > 0 && u < 256) {
								const char *sch = req->pp_schedules[k];
								bool two = strcmp(sch, "interleaved") == 0 || strcmp(sch, "zbv") == 0;
								u += snprintf(out[n] + u, (size_t)(256 - u),
									      " parallelism.pp_schedule=%s parallelism.virtual_stages=%d",
									      strcmp(sch, "zbv") == 0 ? "zero_bubble" : sch, two ? 2 : 1);
							}
							if (megatron && rep > 1 && u > 0 && u < 256)
								u += snprintf(out[n] + u, (size_t)(256 - u), " parallelism.zero=1");
							else if (nz > 1 || (req && req->n_zero == 1 && req->zero[0] != 3 && rep > 1))
								if (u > 0 && u < 256 && req->zero[z] != 3)
									u += snprintf(out[n] + u, (size_t)(256 - u), " parallelism.zero=%d",
										      req->zero[z]);
							if (a2 == 1 && u > 0 && u < 256)
								snprintf(out[n] + u, (size_t)(256 - u), " parallelism.async_tp=true");
							n++;
						}
				}
			}
		}
	}
	return n;
}

/* ---- the run ---- */

static rm_status set_all(rm_scenario *sc, rm_error *err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static rm_status set_all(rm_scenario *sc, rm_error *err, const char *fmt, ...)
{
	char buf[1400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return rm_scenario_set(sc, buf, err);
}

/* Applies an override string ("KEY=VALUE KEY=VALUE") to sc. */
static rm_status apply_layout(rm_scenario *sc, const char *layout, rm_error *err)
{
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", layout);
	for (char *save = NULL, *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
		rm_status st = rm_scenario_set(sc, t, err);
		if (st != RM_OK)
			return st;
	}
	return RM_OK;
}

/* The base scenario of one (hardware, GPU count): model, hardware, cluster, training, runtime. */
static rm_status base_scenario(const rm_plan_request *req, int hw, int64_t gpus, int gpn, rm_scenario *sc,
			       rm_error *err)
{
	rm_scenario_init(sc);
	int64_t per_node = gpus < gpn ? gpus : gpn;
	int64_t seq = req->seq_len > 0 ? req->seq_len : 8192;
	rm_status st = set_all(sc, err, "model=%s", req->model);
	if (st == RM_OK)
		st = set_all(sc, err, "hardware=%s", req->hardware[hw]);
	if (st == RM_OK)
		st = set_all(sc, err, "cluster.gpus_per_node=%lld", (long long)per_node);
	if (st == RM_OK)
		st = set_all(sc, err, "cluster.nodes=%lld", (long long)(gpus / per_node));
	if (st == RM_OK)
		st = set_all(sc, err, "training.seq_len=%lld", (long long)seq);
	if (st == RM_OK)
		st = set_all(sc, err, "scheduler.mode=%s", req->runtime[0] ? req->runtime : "fsdp2");
	if (st == RM_OK && strcasecmp(req->runtime, "xla") != 0)
		st = set_all(sc, err, "remat.scan=false");
	if (st == RM_OK && req->nvlink_mesh > 0)
		st = set_all(sc, err, "cluster.nvlink_mesh=%d", req->nvlink_mesh);
	return st;
}

/* The global batch a request asks for at gpus GPUs, in sequences: the given one, or 4 Mi
 * tokens' worth (Llama 3's initial batch: 4M tokens; Dubey et al. 2024, section 3.4.1); under
 * weak scaling, that batch times gpus / weak_base_gpus. */
static int64_t global_batch_of(const rm_plan_request *req, int64_t gpus)
{
	int64_t seq = req->seq_len > 0 ? req->seq_len : 8192;
	int64_t gb = req->global_batch_min > 0 ? req->global_batch_min : (INT64_C(4) << 20) / seq;
	if (gb < 1)
		gb = 1;
	if (req->weak_base_gpus > 0)
		gb = gb * gpus / req->weak_base_gpus > 0 ? gb * gpus / req->weak_base_gpus : 1;
	return gb;
}

typedef struct layout_acc {
	const rm_plan_point *pt;
	rm_plan_row *rows;
	bool *have;
} layout_acc;

/* Best candidate per layout: the fastest that fits, else the one with the least peak memory. */
static void take_row(const rm_candidate_result *r, void *user)
{
	layout_acc *a = user;
	for (int i = 0; i < a->pt->n_layouts; i++) {
		rm_plan_row *row = &a->rows[i];
		if (strcmp(row->layout, r->c.parallelism) != 0 || !r->ok)
			continue;
		bool better;
		if (!a->have[i])
			better = true;
		else if (r->fits != row->r.fits)
			better = r->fits;
		else if (r->fits)
			better = r->tokens_per_s_per_gpu > row->r.tokens_per_s_per_gpu;
		else
			better = r->peak_memory_bytes < row->r.peak_memory_bytes;
		if (better) {
			row->r = *r;
			a->have[i] = true;
		}
	}
}

static void derive(const rm_plan_request *req, rm_plan_row *row)
{
	double tps = row->r.tokens_per_s_per_gpu;
	row->time_to_train_s = req->tokens > 0 && tps > 0 ? req->tokens / (tps * (double)row->gpus) : 0;
	row->gpu_hours = (double)row->gpus * row->time_to_train_s / 3600.0;
	row->cost = req->price[row->hw] >= 0 ? row->gpu_hours * req->price[row->hw] : -1;
}

/* Reads the degrees back from a resolved layout. */
static void fill_degrees(rm_plan_row *row, const rm_scenario_resolved *res)
{
	const rm_train_config *t = &res->train;
	row->tp = t->tp;
	row->sp = t->sp;
	row->pp = t->pp;
	row->pp_schedule = t->pp_schedule;
	row->zero = (int)t->zero;
	row->virtual_stages = t->virtual_stages;
	row->async_tp = t->async_tp;
	row->cp = t->cp;
	row->ep = t->ep;
	row->fsdp = t->fsdp;
	row->dp_replicate = t->dp_replicate;
	row->grad_accum = t->grad_accum;
	int64_t dp = t->fsdp * (t->dp_replicate > 0 ? t->dp_replicate : 1);
	row->global_batch = t->micro_batch * t->grad_accum * dp;
}

/* The request's own words for a scenario key in an error: plan builds its scenarios with
 * rm_scenario_set, whose errors say "(from --set KEY)"; a plan user gave flags. */
static void plan_rewrite(char *msg, size_t size);

static rm_status plan_error(rm_status st, rm_error *err)
{
	if (st != RM_OK && err)
		plan_rewrite(err->msg, sizeof(err->msg));
	return st;
}

static void plan_rewrite(char *msg_io, size_t size)
{
	static const struct {
		const char *key, *flag;
	} flags[] = {{"model", "MODEL"},
		     {"hardware", "--hardware"},
		     {"training.seq_len", "--seq-len, default 8192"},
		     {"training.global_batch", "--global-batch, default 4 Mi tokens' worth"},
		     {"remat.policy", "--policy"},
		     {"scheduler.mode", "--runtime"},
		     {"cluster.gpus_per_node", "--gpus"},
		     {"cluster.nodes", "--gpus"},
		     {"cluster.nvlink_mesh", "--nvlink-mesh"}};
	/* rm_scenario_set's own prefix for a value it refuses */
	if (strncmp(msg_io, "--set remat.policy=", 19) == 0) {
		const char *colon = strstr(msg_io, ": remat.policy: ");
		char msg[512];
		if (colon)
			snprintf(msg, sizeof(msg), "--policy %.*s: %s", (int)(colon - msg_io - 19), msg_io + 19,
				 colon + strlen(": remat.policy: "));
		else
			snprintf(msg, sizeof(msg), "--policy %s", msg_io + 19);
		snprintf(msg_io, size, "%s", msg);
	}
	/* a --policy is one of the search's policies */
	char *sp = strstr(msg_io, "search.policies[");
	if (sp) {
		char *close = strchr(sp, ']');
		if (close) {
			char msg[512];
			snprintf(msg, sizeof(msg), "%.*s--policy%s", (int)(sp - msg_io), msg_io, close + 1);
			snprintf(msg_io, size, "%s", msg);
		}
	}
	for (size_t i = 0; i < RM_ARRAY_SIZE(flags); i++) {
		char from[96];
		snprintf(from, sizeof(from), " (from --set %s)", flags[i].key);
		char *at = strstr(msg_io, from);
		if (!at)
			continue;
		char msg[512];
		snprintf(msg, sizeof(msg), "%.*s (from %s)%s%s", (int)(at - msg_io), msg_io, flags[i].flag, at + strlen(from),
			 strcmp(flags[i].key, "training.seq_len") == 0 ? "; give --seq-len" : "");

		snprintf(msg_io, size, "%s", msg);
		break;
	}
}

static rm_status plan_point(const rm_plan_request *req, rm_hw_resolver resolver, const rm_plan_options *opt, int hw,
			    int64_t gpus, int gpn, rm_plan_point *pt, rm_error *err)
{
	memset(pt, 0, sizeof(*pt));
	pt->hw = hw;
	pt->gpus = gpus;
	rm_scenario *sc = rm_new(rm_scenario, 1);
	rm_status st = base_scenario(req, hw, gpus, gpn, sc, err);
	int64_t gb = global_batch_of(req, gpus);
	/* the model's shape for the layouts: the base as FSDP over every GPU, without the global
	 * batch (resolving only reads the model and the sequence here; the degrees come from each
	 * layout) */
	rm_scenario_resolved probe;
	if (st == RM_OK) {
		bool q = rm_log_thread_quiet(true);
		st = rm_scenario_resolve(sc, resolver, &probe, err);
		rm_log_thread_quiet(q);
	}
	if (st == RM_OK) {
		st = set_all(sc, err, "training.global_batch=%lld", (long long)gb);
		if (st != RM_OK)
			rm_scenario_resolved_finish(&probe);
	}
	if (st != RM_OK) {
		free(sc);
		return plan_error(st, err);
	}
	char(*layouts)[256] = rm_xcalloc(RM_PLAN_MAX_LAYOUTS, 256);
	char(*more)[256] = rm_xcalloc(RM_PLAN_MAX_LAYOUTS + 1, 256);
	int total = rm_plan_layouts(&probe, gpus, gpn, req, more, RM_PLAN_MAX_LAYOUTS + 1);
	free(more);
	if (total > RM_PLAN_MAX_LAYOUTS) {
		rm_scenario_resolved_finish(&probe);
		free(layouts);
		free(sc);
		return rm_error_set(err, RM_RANGE, NULL, 0, 0,
				    "plan: %s on %lld GPUs has more than %d layouts to try: narrow --tp, --pp, "
				    "--pp-schedule, --zero or --async-tp",
				    req->hardware[hw], (long long)gpus, RM_PLAN_MAX_LAYOUTS);
	}
	int n = rm_plan_layouts(&probe, gpus, gpn, req, layouts, RM_PLAN_MAX_LAYOUTS);
	/* ResidualMLP blocks run data-parallel only: a --tp without 1 leaves it no layout */
	bool mlp_tp_only = n == 0 && probe.model.arch == RM_ARCH_RESIDUAL_MLP && req->n_tp > 0 &&
			   !listed(req->tp, req->n_tp, 1);
	rm_scenario_resolved_finish(&probe);
	/* a global batch range: each layout at each power-of-two multiple of the smallest batch in
	 * it (the search's layout key training.global_batch) */
	int64_t gb_top = gb;
	if (req->global_batch_max > req->global_batch_min && req->global_batch_min > 0) {
		/* saturated: a range's top near INT64_MAX must not wrap (nor its doublings below) */
		int64_t ratio = req->global_batch_max / req->global_batch_min;
		gb_top = gb > 0 && ratio > INT64_MAX / gb ? INT64_MAX : gb * ratio;
	}
	if (gb_top > gb) {
		char(*ranged)[256] = rm_xcalloc(RM_PLAN_MAX_LAYOUTS, 256);
		int m = 0;
		int want = 0;
		for (int64_t g = gb; want <= RM_PLAN_MAX_LAYOUTS; g *= 2) {
			want += n;
			if (g > gb_top / 2)
				break;
		}
		if (want > RM_PLAN_MAX_LAYOUTS) {
			free(ranged);
			free(layouts);
			free(sc);
			return rm_error_set(err, RM_RANGE, NULL, 0, 0,
					    "plan: %d layouts x the global batches of --global-batch %lld:%lld are more than %d "
					    "to try on %lld GPUs: narrow the range, --tp or --pp",
					    n, (long long)req->global_batch_min, (long long)req->global_batch_max,
					    RM_PLAN_MAX_LAYOUTS, (long long)gpus);
		}
		for (int i = 0; i < n; i++)
			for (int64_t g = gb; m < RM_PLAN_MAX_LAYOUTS; g *= 2) {
				snprintf(ranged[m++], 256, "%.200s training.global_batch=%lld", layouts[i], (long long)g);
				if (g > gb_top / 2)
					break;
			}
		free(layouts);
		layouts = ranged;
		n = m;
	}
	/* which layouts resolve (the scenario's own checks: degrees against heads, layers, batch) at
	 * one of the micro-batches the search tries: a large global batch can make the smallest's
	 * accumulation too long to simulate (RM_SCENARIO_MAX_LAYER_STEPS) where a larger one is fine;
	 * the search gives the micro-batches a layout refuses their own error rows */
	static const int64_t mbs[] = {1, 2, 4, 8};
	int64_t base_mb = 0;
	pt->layouts = rm_new(rm_plan_row, (size_t)(n > 0 ? n : 1));
	pt->rejected = rm_xcalloc((size_t)(n > 0 ? n : 1), 256);
	pt->rejected_why = rm_xcalloc((size_t)(n > 0 ? n : 1), 256);
	if (mlp_tp_only) {
		snprintf(pt->rejected[0], 256, "parallelism.tp=%lld", (long long)req->tp[0]);
		snprintf(pt->rejected_why[0], 256,
			 "a ResidualMLP model is planned data-parallel only (remora splits no block of it "
			 "across GPUs): --tp 1");
		pt->n_rejected = 1;
	}
	bool was_quiet = rm_log_thread_quiet(true);
	for (int i = 0; i < n; i++) {
		rm_scenario v = *sc;
		rm_error e;
		rm_error_clear(&e);
		rm_scenario_resolved r;
		rm_status vs = apply_layout(&v, layouts[i], &e);
		int64_t mb = 0;
		for (size_t k = 0; vs == RM_OK && k < RM_ARRAY_SIZE(mbs); k++) {
			rm_error ek;
			rm_error_clear(&ek);
			v.micro_batch = mbs[k];
			if (rm_scenario_resolve(&v, resolver, &r, &ek) == RM_OK) {
				mb = mbs[k];
				break;
			}
			if (k == 0)
				e = ek; /* the smallest micro-batch's reason */
		}
		if (vs == RM_OK && mb == 0)
			vs = e.status != RM_OK ? e.status : RM_INVALID;
		if (vs == RM_OK && pt->n_layouts == 0)
			base_mb = mb;
		if (vs != RM_OK) {
			snprintf(pt->rejected[pt->n_rejected], 256, "%s", layouts[i]);
			plan_rewrite(e.msg, sizeof(e.msg));
			snprintf(pt->rejected_why[pt->n_rejected], 256, "%s", e.msg);
			pt->n_rejected++;
			continue;
		}
		rm_plan_row *row = &pt->layouts[pt->n_layouts++];
		memset(row, 0, sizeof(*row));
		row->hw = hw;
		row->gpus = gpus;
		row->nodes = (gpus + gpn - 1) / gpn;
		snprintf(row->layout, sizeof(row->layout), "%s", layouts[i]);
		fill_degrees(row, &r);
		row->global_batch = v.global_batch;
		rm_scenario_resolved_finish(&r);
	}
	rm_log_thread_quiet(was_quiet);
	free(layouts);
	if (pt->n_layouts == 0) {
		free(sc);
		return RM_OK;
	}
	/* one search: the first layout as the base, all of them as its parallelism variants */
	st = apply_layout(sc, pt->layouts[0].layout, err);
	char pol[16][256];
	int np = req->n_policies > 0 ? req->n_policies : rm_plan_default_policies(req->runtime, pol, 16);
	for (int i = 0; i < np; i++)
		snprintf(sc->search_policies[i], sizeof(sc->search_policies[0]), "%s",
			 req->n_policies > 0 ? req->policies[i] : pol[i]);
	sc->n_search_policies = np;
	if (st == RM_OK)
		st = set_all(sc, err, "remat.policy=%s", sc->search_policies[0]);
	sc->micro_batch = base_mb; /* the first layout's smallest micro-batch that resolves */
	sc->n_search_micro_batches = 0;
	for (size_t i = 0; i < RM_ARRAY_SIZE(mbs); i++)
		sc->search_micro_batches[sc->n_search_micro_batches++] = mbs[i];
	sc->search_include_ideal = false; /* plans run on real runtimes only */
	sc->n_search_parallelism = 0;
	for (int i = 0; i < pt->n_layouts; i++)
		snprintf(sc->search_parallelism[sc->n_search_parallelism++], sizeof(sc->search_parallelism[0]), "%s",
			 pt->layouts[i].layout);
	if (st != RM_OK) {
		free(sc);
		return plan_error(st, err);
	}
	if (opt && opt->progress) {
		char what[256];
		snprintf(what, sizeof(what), "%s, %lld GPUs: %d layouts x %d policies x %d micro-batches", req->hardware[hw],
			 (long long)gpus, pt->n_layouts, np, sc->n_search_micro_batches);
		opt->progress(what, opt->user);
	}
	was_quiet = rm_log_thread_quiet(true);
	rm_search *s = rm_search_create(sc, resolver, err);
	rm_log_thread_quiet(was_quiet);
	free(sc);
	if (!s)
		return plan_error(err->status, err);
	rm_search_options so = {.db_path = opt ? opt->db_path : NULL,
				.jobs = opt && opt->jobs > 0 ? opt->jobs : 1,
				.progress = opt ? opt->search_progress : NULL,
				.on_row = opt ? opt->on_row : NULL,
				.progress_user = opt ? opt->user : NULL};
	if (opt && opt->shard_count > 1) {
		so.shard_index = opt->shard_index;
		so.shard_count = opt->shard_count;
		so.resume_from = opt->merged_db;
	}
	rm_search_progress prog = {0};
	/* the candidates' warnings (a policy name a layer kind lacks, say) would repeat once per
	 * candidate and thread: the rows carry what matters, their errors */
	rm_log_level level = rm_log_get_level();
	if (level > RM_LOG_ERROR)
		rm_log_set_level(RM_LOG_ERROR);
	st = rm_search_run(s, &so, &prog, err);
	rm_log_set_level(level);
	pt->candidates = prog.total;
	pt->simulated = prog.done - prog.skipped;
	if (opt && opt->gather) {
		/* the shard's file closed, joined with the others', and the joint rows read back */
		rm_error closing;
		rm_error_clear(&closing);
		rm_search_reopen(s, NULL, &closing);
		st = opt->gather(opt->gather_user, st, err);
		if (st == RM_OK)
			st = rm_search_reopen(s, opt->merged_db, err);
	}
	if (st == RM_OK) {
		bool *have = rm_new(bool, (size_t)pt->n_layouts);
		layout_acc acc = {pt, pt->layouts, have};
		st = rm_search_each(s, take_row, &acc, err);
		for (int i = 0; i < pt->n_layouts; i++) {
			rm_plan_row *row = &pt->layouts[i];
			if (!have[i])
				row->r.ok = false;
			row->r.c.parallelism[0] = '\0';
			snprintf(row->r.c.parallelism, sizeof(row->r.c.parallelism), "%s", row->layout);
			if (row->r.ok) {
				/* the winner's micro-batch sets the accumulation of the fixed global batch */
				int64_t dp = row->fsdp / (row->cp > 1 ? row->cp : 1) * (row->dp_replicate > 0 ? row->dp_replicate : 1);
				row->grad_accum = row->r.c.micro_batch > 0 && dp > 0
							  ? row->global_batch / (row->r.c.micro_batch * dp)
							  : 0;
			}
			derive(req, row);
			if (have[i] && row->r.fits &&
			    (!pt->have_best || row->r.tokens_per_s_per_gpu > pt->best.r.tokens_per_s_per_gpu)) {
				pt->best = *row;
				pt->have_best = true;
			}
		}
		free(have);
		/* pipelined layouts: the bubble and each stage's peak, from the winner's pipeline */
		for (int i = 0; i < pt->n_layouts; i++) {
			rm_plan_row *row = &pt->layouts[i];
			if (!row->r.ok || row->pp < 2)
				continue;
			rm_scenario_resolved res;
			rm_error e;
			rm_error_clear(&e);
			bool q = rm_log_thread_quiet(true);
			if (rm_search_resolve_candidate(s, &row->r.c, &res, &e) == RM_OK) {
				rm_pp_run *pr = rm_new(rm_pp_run, 1);
				if (rm_pp_run_scenario(&res, pr, &e) == RM_OK) {
					row->bubble_fraction = pr->sched.bubble_fraction;
					row->n_stages = pr->stages < 16 ? pr->stages : 16;
					for (int k = 0; k < row->n_stages; k++)
						row->stage_peak_bytes[k] = pr->peak_bytes[k];
				}
				free(pr);
				rm_scenario_resolved_finish(&res);
			}
			rm_log_thread_quiet(q);
			if (pt->have_best && strcmp(pt->best.layout, row->layout) == 0)
				pt->best = *row;
		}
	}
	rm_search_destroy(s);
	return st;
}

/* GPUs per node of hardware hw: the request's, or its profile's. */
static int64_t gpn_of(const rm_plan_request *req, rm_hw_resolver resolver, int hw, rm_error *err)
{
	if (req->gpus_per_node > 0)
		return req->gpus_per_node;
	if (req->nvlink_mesh > 0)
		return req->nvlink_mesh; /* a node is one board */
	rm_hw_profile p;
	if (resolver) {
		if (resolver(req->hardware[hw], NULL, 1, 1, &p, NULL, err) != RM_OK)
			return -1;
	} else {
		const rm_hw_profile *f = rm_hw_profile_find(req->hardware[hw], err);
		if (!f)
			return -1;
		p = *f;
	}
	return p.gpus_per_node > 0 ? p.gpus_per_node : 8;
}

/* Why no GPU count of hardware h has a plan: every layout refused (the scenario's reason for
 * the first), or none fits (the least peak memory of any layout against what is usable). */
static void why_nothing(const rm_plan_request *req, int h, const rm_plan_result *out, int first, char *buf, size_t n)
{
	const rm_plan_row *least = NULL;
	const char *refused = NULL;
	int64_t top = 0;
	for (int i = first; i < out->n_points; i++) {
		const rm_plan_point *pt = &out->points[i];
		top = pt->gpus;
		for (int k = 0; k < pt->n_layouts; k++)
			if (pt->layouts[k].r.ok && (!least || pt->layouts[k].r.peak_memory_bytes < least->r.peak_memory_bytes))
				least = &pt->layouts[k];
		if (!refused && pt->n_rejected > 0)
			refused = pt->rejected_why[0];
	}
	if (least)
		snprintf(buf, n, "no layout fits on %s up to %lld GPUs: the least peak is %.1f GiB of %.1f GiB usable (%lld GPUs)",
			 req->hardware[h], (long long)top, (double)least->r.peak_memory_bytes / (1024.0 * 1024 * 1024),
			 (double)least->r.memory_capacity_bytes / (1024.0 * 1024 * 1024), (long long)least->gpus);
	else if (refused)
		snprintf(buf, n, "no layout of %s up to %lld GPUs is possible: %s", req->hardware[h], (long long)top, refused);
	else
		snprintf(buf, n, "no layout of %s up to %lld GPUs: the degrees tried (--tp, --pp) divide nothing",
			 req->hardware[h], (long long)top);
}

rm_status rm_plan_run(const rm_plan_request *req, rm_hw_resolver resolver, const rm_plan_options *opt,
		      rm_plan_result *out, rm_error *err)
{
	memset(out, 0, sizeof(*out));
	for (int i = 0; i < RM_PLAN_MAX_HW; i++)
		out->chosen[i] = -1;
	if (!req->model[0])
		return rm_error_set(err, RM_INVALID, NULL, 0, 0, "plan: no model (a preset name or a config.json)");
	if (req->n_hardware < 1)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0, "plan: no hardware (e.g. h100-sxm,h200-sxm)");
	if (req->budget > 0)
		for (int h = 0; h < req->n_hardware; h++)
			if (req->price[h] < 0)
				return rm_error_set(err, RM_INVALID, NULL, 0, 0,
						    "plan: a budget needs a price per GPU-hour for every hardware; %s has "
						    "none (--price %s=2.5)",
						    req->hardware[h], req->hardware[h]);
	if ((req->deadline_s > 0 || req->budget > 0) && req->tokens <= 0)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0,
				    "plan: a deadline or a budget needs a token budget (--tokens 15T)");
	int cap = req->n_hardware * RM_PLAN_MAX_GPUS;
	out->points = rm_new(rm_plan_point, (size_t)cap);
	for (int h = 0; h < req->n_hardware; h++) {
		int64_t gpn = gpn_of(req, resolver, h, err);
		if (gpn < 1)
			return err->status ? err->status : RM_INVALID;
		out->gpn[h] = gpn;
		int64_t ladder[RM_PLAN_MAX_GPUS];
		int nl = 0;
		if (req->n_gpus > 0) {
			for (int i = 0; i < req->n_gpus; i++) {
				int64_t g = req->gpus[i];
				if (g > RM_PLAN_MAX_LADDER)
					return rm_error_set(err, RM_INVALID, NULL, 0, 0, "plan: %lld GPUs: at most %d",
							    (long long)g, RM_PLAN_MAX_LADDER);
				if (g < 1 || (g > gpn && g % gpn != 0))
					return rm_error_set(err, RM_INVALID, NULL, 0, 0,
							    "plan: %lld GPUs is not a whole number of %s nodes of %lld",
							    (long long)g, req->hardware[h], (long long)gpn);
				ladder[nl++] = g;
			}
		} else {
			int64_t top = req->max_gpus > 0 ? req->max_gpus : (req->deadline_s > 0 || req->budget > 0 ? 16384 : 4096);
			if (top < gpn)
				return rm_error_set(err, RM_INVALID, NULL, 0, 0,
						    "plan: --max-gpus %lld is below one %s node of %lld GPUs", (long long)top,
						    req->hardware[h], (long long)gpn);
			if (top > RM_PLAN_MAX_LADDER)
				return rm_error_set(err, RM_INVALID, NULL, 0, 0,
						    "plan: --max-gpus %lld: the ladder goes up to %d GPUs", (long long)top,
						    RM_PLAN_MAX_LADDER);
			for (int64_t g = gpn; g <= top && nl < RM_PLAN_MAX_GPUS; g *= 2)
				ladder[nl++] = g;
		}
		int first = out->n_points;
		for (int i = 0; i < nl; i++) {
			rm_plan_point *pt = &out->points[out->n_points];
			rm_status st = plan_point(req, resolver, opt, h, ladder[i], (int)gpn, pt, err);
			out->n_points++;
			if (st != RM_OK)
				return st;
			/* the ladder stops once the constraint is answered (a shard alone cannot tell) */
			bool sees_all = !(opt && opt->shard_count > 1 && !opt->gather);
			if (req->n_gpus == 0 && pt->have_best && sees_all) {
				if (req->deadline_s > 0 && pt->best.time_to_train_s <= req->deadline_s)
					break;
				if (req->budget > 0 && pt->best.cost > req->budget && i > 0 &&
				    out->points[out->n_points - 2].have_best &&
				    out->points[out->n_points - 2].best.cost > req->budget)
					break;
			}
		}
		/* the answer per hardware */
		int chosen = -1;
		for (int i = first; i < out->n_points; i++) {
			const rm_plan_point *pt = &out->points[i];
			if (!pt->have_best)
				continue;
			const rm_plan_row *b = &pt->best;
			const rm_plan_row *c = chosen >= 0 ? &out->points[chosen].best : NULL;
			if (req->deadline_s > 0) {
				if (b->time_to_train_s <= req->deadline_s && !c)
					chosen = i; /* the fewest GPUs that make it */
			} else if (req->budget > 0) {
				if (b->cost <= req->budget && (!c || b->time_to_train_s < c->time_to_train_s))
					chosen = i; /* the fastest within the budget */
			} else if (req->tokens > 0) {
				if (!c || b->gpu_hours < c->gpu_hours)
					chosen = i; /* the least GPU-hours */
			} else if (!c || b->r.tokens_per_s_per_gpu * (double)b->gpus >
						 c->r.tokens_per_s_per_gpu * (double)c->gpus) {
				chosen = i; /* the most tokens per second */
			}
		}
		out->chosen[h] = chosen;
		if (chosen < 0) {
			const rm_plan_point *last = out->n_points > first ? &out->points[out->n_points - 1] : NULL;
			const rm_plan_point *fastest = NULL;
			for (int i = first; i < out->n_points; i++)
				if (out->points[i].have_best &&
				    (!fastest || out->points[i].best.time_to_train_s < fastest->best.time_to_train_s))
					fastest = &out->points[i];
			if (!fastest)
				why_nothing(req, h, out, first, out->why_none[h], sizeof(out->why_none[h]));
			else if (req->deadline_s > 0)
				snprintf(out->why_none[h], sizeof(out->why_none[h]),
					 "no plan within the deadline up to %lld GPUs: the fastest takes %.1f days on %lld",
					 (long long)(last ? last->gpus : 0), fastest->best.time_to_train_s / 86400.0,
					 (long long)fastest->gpus);
			else
				snprintf(out->why_none[h], sizeof(out->why_none[h]),
					 "no plan within the budget: the cheapest costs %.0f on %lld GPUs", fastest->best.cost,
					 (long long)fastest->gpus);
		}
	}
	return RM_OK;
}

void rm_plan_result_finish(rm_plan_result *r)
{
	for (int i = 0; i < r->n_points; i++) {
		free(r->points[i].layouts);
		free(r->points[i].rejected);
		free(r->points[i].rejected_why);
	}
	free(r->points);
	memset(r, 0, sizeof(*r));
}
