/* Scenario files (remora/scenario.h): YAML through libfyaml, keys from one table. */
#include <ctype.h>
#include <errno.h>
#include <libfyaml.h>
#include <libgen.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/fy_util.h"
#include "remora/scenario.h"
#include "remora/pipeline.h"

typedef enum { K_STR, K_INT, K_BOOL, K_TRIBOOL, K_DOUBLE, K_NAMES, K_STRLIST, K_INTLIST, K_FLAGS, K_TIERS } ktype;

typedef struct key_desc {
	const char *path;
	ktype type;
	size_t off;       /* the value (string buffer, integer, bool, list) */
	size_t size;      /* string buffer size, or list item size */
	size_t count_off; /* lists: the int count */
	int64_t min, max; /* integers */
} key_desc;

#define S(f) offsetof(rm_scenario, f), sizeof(((rm_scenario *)0)->f)
#define L(f, n) offsetof(rm_scenario, f), sizeof(((rm_scenario *)0)->f[0]), offsetof(rm_scenario, n)

static const key_desc keys[] = {
	{"model", K_STR, S(model), 0, 0, 0},
	{"hardware", K_STR, S(hardware), 0, 0, 0},
	{"hardware.profile", K_STR, S(hardware), 0, 0, 0},
	{"hardware.power_w", K_DOUBLE, S(power_w), 0, 1, 5000},
	{"hardware.hbm_gib", K_DOUBLE, S(hbm_gib), 0, 1, 1 << 20},
	{"cluster.gpus_per_node", K_INT, S(gpus_per_node), 0, 1, 64},
	{"cluster.nodes", K_INT, S(nodes), 0, 1, 100000},
	{"cluster.nics_per_node", K_INT, S(nics_per_node), 0, 1, 64},
	{"cluster.nvlink_mesh", K_INT, S(nvlink_mesh), 0, 2, 8},
	{"cluster.nic_gbps", K_DOUBLE, S(nic_gbps), 0, 1, 1 << 20},
	{"cluster.topology.kind", K_STR, S(topology_kind), 0, 0, 0},
	{"cluster.topology.nics_per_node", K_INT, S(nics_per_node), 0, 1, 64},
	{"cluster.topology.nic_gbps", K_DOUBLE, S(nic_gbps), 0, 1, 1 << 20},
	{"cluster.topology.pxn", K_TRIBOOL, S(topology_pxn), 0, 0, 0},
	{"cluster.topology.tiers", K_TIERS, L(topology_tiers, n_topology_tiers), 0, 0},
	{"training.seq_len", K_INT, S(seq_len), 0, 1, 1 << 24},
	{"training.micro_batch", K_INT, S(micro_batch), 0, 1, 1 << 16},
	{"training.grad_accum", K_INT, S(grad_accum), 0, 1, 512},
	{"training.global_batch", K_INT, S(global_batch), 0, 1, INT64_C(1) << 40},
	{"training.moe_imbalance", K_DOUBLE, S(moe_imbalance), 0, 1, 1 << 10},
	{"training.moe_capacity_factor", K_DOUBLE, S(moe_capacity_factor), 0, 0, 1 << 10},
	{"training.dtype", K_STR, S(dtype), 0, 0, 0},
	{"training.grad_dtype", K_STR, S(grad_dtype), 0, 0, 0},
	{"training.optimizer_dtype", K_STR, S(optimizer_dtype), 0, 0, 0},
	{"training.optimizer", K_STR, S(optimizer), 0, 0, 0},
	{"training.master_weights", K_TRIBOOL, S(master_weights), 0, 0, 0},
	{"training.fused_attention", K_TRIBOOL, S(fused_attention), 0, 0, 0},
	{"training.causal", K_TRIBOOL, S(causal), 0, 0, 0},
	{"training.attention_kernel", K_STR, S(attention_kernel), 0, 0, 0},
	{"training.compile", K_TRIBOOL, S(compile), 0, 0, 0},
	{"training.loss", K_STR, S(loss), 0, 0, 0},
	{"training.embedding", K_STR, S(embedding), 0, 0, 0},
	{"training.rope", K_STR, S(rope), 0, 0, 0},
	{"training.grad_clip", K_TRIBOOL, S(grad_clip), 0, 0, 0},
	{"training.gemm_dtype", K_STR, S(gemm_dtype), 0, 0, 0},
	{"training.fp8_all_gather", K_TRIBOOL, S(fp8_all_gather), 0, 0, 0},
	{"parallelism.fsdp", K_INT, S(fsdp), 0, 1, 1 << 20},
	{"parallelism.dp_replicate", K_INT, S(dp_replicate), 0, 1, 1 << 20},
	{"parallelism.zero", K_INT, S(zero), 0, 1, 3},
	{"parallelism.tp", K_INT, S(tp), 0, 1, 1 << 20},
	{"parallelism.sp", K_TRIBOOL, S(sp), 0, 0, 0},
	{"parallelism.loss_parallel", K_TRIBOOL, S(loss_parallel), 0, 0, 0},
	{"parallelism.tp_embedding", K_STR, S(tp_embedding), 0, 0, 0},
	{"parallelism.async_tp", K_TRIBOOL, S(async_tp), 0, 0, 0},
	{"parallelism.pp", K_INT, S(pp), 0, 1, 1 << 20},
	{"parallelism.pp_schedule", K_STR, S(pp_schedule), 0, 0, 0},
	{"parallelism.virtual_stages", K_INT, S(virtual_stages), 0, 1, 1 << 20},
	{"parallelism.cp", K_INT, S(cp), 0, 1, 1 << 20},
	{"parallelism.ep", K_INT, S(ep), 0, 1, 1 << 20},
	{"remat.scan", K_BOOL, S(scan), 0, 0, 0},
	{"remat.recompute_num_layers", K_INT, S(recompute_num_layers), 0, 0, 1 << 20},
	{"remat.recompute_method", K_STR, S(recompute_method), 0, 0, 0},
	{"remat.prevent_cse", K_TRIBOOL, S(prevent_cse), 0, 0, 0},
	{"remat.policy", K_STR, S(policy), 0, 0, 0},
	{"remat.names", K_NAMES, L(names, n_names), 0, 0},
	{"remat.offload_names", K_NAMES, L(offload_names, n_offload), 0, 0},
	{"xla_flags", K_FLAGS, S(xla_flags), 0, 0, 0},
	{"xla.version", K_STR, S(xla_version), 0, 0, 0},
	{"xla.mem_fraction", K_DOUBLE, S(xla_mem_fraction), 0, 0, 1},
	{"xla.allocator", K_STR, S(xla_allocator), 0, 0, 0},
	{"xla.donate", K_TRIBOOL, S(xla_donate), 0, 0, 0},
	{"scheduler.mode", K_STR, S(mode), 0, 0, 0},
	{"scheduler.prefetch_depth", K_INT, S(prefetch_depth), 0, 1, 16},
	{"scheduler.reshard_after_forward", K_TRIBOOL, S(reshard_after_forward), 0, 0, 0},
	{"scheduler.gradient_sync", K_STR, S(gradient_sync), 0, 0, 0},
	{"scheduler.overlap_grad_reduce", K_TRIBOOL, S(overlap_grad_reduce), 0, 0, 0},
	{"scheduler.overlap_param_gather", K_TRIBOOL, S(overlap_param_gather), 0, 0, 0},
	{"scheduler.cost_model", K_STR, S(cost_model), 0, 0, 0},
	{"scheduler.hw_queues", K_INT, S(hw_queues), 0, 1, 32},
	{"scheduler.nccl_version", K_STR, S(nccl_version), 0, 0, 0},
	{"scheduler.device_memory_gib", K_DOUBLE, S(device_memory_gib), 0, 0, 1 << 20},
	{"scheduler.allocator", K_STR, S(allocator), 0, 0, 0},
	{"scheduler.collective_engine", K_STR, S(collective_engine), 0, 0, 0},
	{"scheduler.nccl_cta_policy", K_STR, S(nccl_cta_policy), 0, 0, 0},
	{"scheduler.nccl_registration", K_STR, S(nccl_registration), 0, 0, 0},
	{"memory_headroom_gib", K_DOUBLE, S(memory_headroom_gib), 0, 0, 1 << 20},
	{"search.names", K_NAMES, L(search_names, n_search_names), 0, 0},
	{"search.policies", K_STRLIST, L(search_policies, n_search_policies), 0, 0},
	{"search.micro_batches", K_INTLIST, L(search_micro_batches, n_search_micro_batches), 1, 1 << 16},
	{"search.flag_variants", K_STRLIST, L(search_flag_variants, n_search_flag_variants), 0, 0},
	{"search.parallelism", K_STRLIST, L(search_parallelism, n_search_parallelism), 0, 0},
	{"search.offload", K_BOOL, S(search_offload), 0, 0, 0},
	{"search.include_ideal", K_BOOL, S(search_include_ideal), 0, 0, 0},
	{"search.max_candidates", K_INT, S(search_max_candidates), 0, 1, 100000000},
};

static const char *const sections[] = {"cluster", "training", "parallelism", "remat", "xla", "scheduler", "search"};

void rm_scenario_init(rm_scenario *sc)
{
	memset(sc, 0, sizeof(*sc));
	snprintf(sc->hardware, sizeof(sc->hardware), "h100-sxm");
	sc->nodes = 1;
	sc->master_weights = sc->fused_attention = sc->causal = -1;
	sc->compile = sc->grad_clip = sc->fp8_all_gather = sc->reshard_after_forward = -1;
	sc->sp = sc->async_tp = sc->loss_parallel = -1;
	sc->overlap_grad_reduce = sc->overlap_param_gather = -1;
	sc->topology_pxn = -1;
	sc->scan = true;
	snprintf(sc->policy, sizeof(sc->policy), "nothing_saveable");
	snprintf(sc->mode, sizeof(sc->mode), "xla");
	sc->prefetch_depth = 1;
	snprintf(sc->cost_model, sizeof(sc->cost_model), "xla_default");
	snprintf(sc->allocator, sizeof(sc->allocator), "auto");
	sc->xla_mem_fraction = -1;
	snprintf(sc->xla_allocator, sizeof(sc->xla_allocator), "bfc");
	sc->xla_donate = -1;
	sc->prevent_cse = -1;
	snprintf(sc->collective_engine, sizeof(sc->collective_engine), "sm");
	sc->hw_queues = 8;
	sc->search_offload = true;
	sc->search_include_ideal = true;
	sc->search_max_candidates = 20000;
	sc->memory_headroom_gib = -1;
}

/* ---- node access ---- */

typedef struct reader {
	const char *path; /* file name, or NULL for --set */
	const char *set;  /* the --set text */
	const char *text; /* the file's text, for the position of mappings and lists */
	size_t len;
	bool json;
	rm_error *err;
} reader;

/* Where a node starts: a scalar by its token, a mapping or list by its '{', '[' or first entry. */
static void node_pos_in(const reader *r, struct fy_node *n, int *line, int *col)
{
	if (r && r->text)
		rm__fy_node_start(r->text, r->len, r->json, n, line, col);
	else
		rm__fy_node_start(NULL, 0, false, n, line, col);
}

static void node_pos(struct fy_node *n, int *line, int *col)
{
	node_pos_in(NULL, n, line, col);
}

static rm_status fail_at(reader *r, struct fy_node *n, rm_status st, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static rm_status fail_at(reader *r, struct fy_node *n, rm_status st, const char *fmt, ...)
{
	char msg[600];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (r->set)
		return rm_error_set(r->err, st, NULL, 0, 0, "--set %s: %s", r->set, msg);
	int line, col;
	node_pos_in(r, n, &line, &col);
	return rm_error_set(r->err, st, r->path, line, col, "%s", msg);
}

static const char *scalar(struct fy_node *n)
{
	return n && fy_node_is_scalar(n) ? fy_node_get_scalar0(n) : NULL;
}

static bool plain(struct fy_node *n)
{
	return n && fy_node_is_scalar(n) && fy_node_get_style(n) == FYNS_PLAIN;
}

static bool to_int(struct fy_node *n, int64_t *out)
{
	const char *t = plain(n) ? scalar(n) : NULL;
	if (!t || !*t)
		return false;
	errno = 0;
	char *end = NULL;
	long long v = strtoll(t, &end, 10);
	if (errno == ERANGE || *end)
		return false;
	*out = v;
	return true;
}

/* Whether n is a plain integer too large for int64 (to_int refuses it as not an integer). */
static bool int_overflows(struct fy_node *n)
{
	const char *t = plain(n) ? scalar(n) : NULL;
	if (!t || !*t)
		return false;
	errno = 0;
	char *end = NULL;
	(void)strtoll(t, &end, 10);
	return errno == ERANGE && !*end;
}

static bool to_bool(struct fy_node *n, bool *out)
{
	const char *t = plain(n) ? scalar(n) : NULL;
	if (t && (strcmp(t, "true") == 0 || strcmp(t, "True") == 0 || strcmp(t, "yes") == 0)) {
		*out = true;
		return true;
	}
	if (t && (strcmp(t, "false") == 0 || strcmp(t, "False") == 0 || strcmp(t, "no") == 0)) {
		*out = false;
		return true;
	}
	return false;
}

static bool scalar_is_verbatim(struct fy_node *n, int *line, int *col);

static void record_pos(const reader *r, rm_scenario *sc, const char *path, struct fy_node *n, bool from_set)
{
	int line = 0, col = 0, text_line = 0, text_col = 0;
	if (!from_set) {
		node_pos_in(r, n, &line, &col);
		if (!scalar_is_verbatim(n, &text_line, &text_col) || text_line != line)
			text_col = 0;
	}
	rm_scenario_pos *p = NULL;
	for (int i = 0; i < sc->n_pos && !p; i++)
		if (strcmp(sc->pos[i].key, path) == 0)
			p = &sc->pos[i];
	if (!p && sc->n_pos < RM_SCENARIO_MAX_KEYS) {
		p = &sc->pos[sc->n_pos++];
		snprintf(p->key, sizeof(p->key), "%s", path);
	}
	if (p) {
		p->line = line;
		p->column = col;
		p->text_column = text_col;
	}
}

static rm_status copy_string(reader *r, struct fy_node *n, char *dst, size_t size, const char *path)
{
	const char *t = scalar(n);
	if (!t)
		return fail_at(r, n, RM_INVALID, "%s: expected a string", path);
	if (strlen(t) >= size)
		return fail_at(r, n, RM_RANGE, "%s: longer than %zu characters", path, size - 1);
	snprintf(dst, size, "%s", t);
	return RM_OK;
}

static bool policy_takes_names(const char *p);

/* A policy that build_policy_text passes on unchanged (not a bare name completed by remat.names). */
static bool policy_is_complete(const char *p)
{
	const char *bare = strrchr(p, '.');
	bare = bare && !strchr(p, '(') ? bare + 1 : p;
	return strchr(p, '(') || !policy_takes_names(bare);
}

/*
 * Where the text of scalar n starts (after a quote), when every character of its value stands at
 * its own column on one line (no escapes, no folding): then column c of the value is at
 * *col + c - 1 in the file.
 */
static bool scalar_is_verbatim(struct fy_node *n, int *line, int *col)
{
	struct fy_token *t = n ? fy_node_get_scalar_token(n) : NULL;
	const struct fy_mark *s = t ? fy_token_start_mark(t) : NULL, *e = t ? fy_token_end_mark(t) : NULL;
	size_t len = 0;
	if (!s || !e || !fy_node_get_scalar(n, &len) || s->line != e->line || e->input_pos - s->input_pos != len)
		return false;
	*line = s->line + 1;
	*col = s->column + 1;
	return true;
}

/*
 * Parses a policy expression where it is written, so that an error points into the expression:
 * FILE:LINE:COLUMN of the offending character when the scalar maps onto the file one to one,
 * else the scalar's position and the column inside the expression; --set errors name the
 * override and that column.
 */
static rm_status check_policy(reader *r, struct fy_node *n, const char *expr, const char *what)
{
	rm_error perr;
	rm_error_clear(&perr);
	rm_remat_policy *p = rm_remat_policy_parse(expr, &perr);
	if (p) {
		rm_remat_policy_destroy(p);
		return RM_OK;
	}
	int in = perr.column > 0 ? perr.column : 1;
	if (r->set)
		return rm_error_set(r->err, perr.status, NULL, 0, 0, "--set %s: %s: at column %d of the policy: %s",
				    r->set, what, in, perr.msg);
	int line, col;
	if (scalar_is_verbatim(n, &line, &col))
		return rm_error_set(r->err, perr.status, r->path, line, col + in - 1, "%s: %s", what, perr.msg);
	node_pos_in(r, n, &line, &col);
	return rm_error_set(r->err, perr.status, r->path, line, col, "%s: at column %d of the policy: %s", what, in,
			    perr.msg);
}

/* Parses one item of an xla_flags list where it is written, so that an error points at it. */
static rm_status check_flags_item(reader *r, struct fy_node *item, const char *text, const char *what)
{
	rm_xla_flags *f = rm_new(rm_xla_flags, 1);
	*f = rm_xla_flags_default();
	rm_error ferr;
	rm_error_clear(&ferr);
	rm_status st = rm_xla_flags_parse(text, f, &ferr);
	free(f);
	if (st == RM_OK || r->set)
		return st == RM_OK ? RM_OK : rm_error_set(r->err, st, NULL, 0, 0, "--set %s: %s: %s", r->set, what, ferr.msg);
	int in = ferr.column > 0 ? ferr.column : 1, line, col;
	if (scalar_is_verbatim(item, &line, &col))
		return rm_error_set(r->err, st, r->path, line, col + in - 1, "%s: %s", what, ferr.msg);
	node_pos_in(r, item, &line, &col);
	return rm_error_set(r->err, st, r->path, line, col, "%s: at column %d of the item: %s", what, in, ferr.msg);
}

/* cluster.topology.tiers: a list of mappings {nodes | ports, oversubscription, latency_us}, leaf first. */
static rm_status apply_tiers(reader *r, rm_scenario *sc, const key_desc *k, struct fy_node *n)
{
	if (!fy_node_is_sequence(n))
		return fail_at(r, n, RM_INVALID,
			       "%s: expected a list of tiers, leaf first, e.g. [{nodes: 32}, {nodes: 128, "
			       "oversubscription: 2}]",
			       k->path);
	int count = fy_node_sequence_item_count(n);
	if (count < 1 || count > RM_FABRIC_MAX_TIERS)
		return fail_at(r, n, RM_RANGE, "%s: %d tiers, expected 1 to %d", k->path, count, RM_FABRIC_MAX_TIERS);
	sc->n_topology_tiers = 0;
	for (int i = 0; i < count; i++) {
		struct fy_node *item = fy_node_sequence_get_by_index(n, i);
		if (!item || !fy_node_is_mapping(item))
			return fail_at(r, item ? item : n, RM_INVALID,
				       "%s[%d]: expected a mapping {nodes | ports, oversubscription, latency_us}", k->path, i);
		struct rm_scenario_tier t = {0};
		void *iter = NULL;
		struct fy_node_pair *pair;
		while ((pair = fy_node_mapping_iterate(item, &iter)) != NULL) {
			struct fy_node *kn = fy_node_pair_key(pair), *vn = fy_node_pair_value(pair);
			const char *name = scalar(kn);
			if (!name)
				return fail_at(r, kn ? kn : item, RM_PARSE, "%s[%d]: keys must be plain names", k->path, i);
			bool is_int = strcmp(name, "nodes") == 0 || strcmp(name, "ports") == 0;
			bool is_num = strcmp(name, "oversubscription") == 0 || strcmp(name, "latency_us") == 0;
			if (!is_int && !is_num)
				return fail_at(r, kn, RM_UNKNOWN_KEY,
					       "%s[%d]: unknown key \"%s\" (known here: nodes, ports, oversubscription, "
					       "latency_us)",
					       k->path, i, name);
			if (is_int) {
				int64_t v;
				if (!to_int(vn, &v) || v < 1 || v > 1000000)
					return fail_at(r, vn ? vn : kn, RM_INVALID, "%s[%d].%s: expected an integer in [1, 1000000]",
						       k->path, i, name);
				if (strcmp(name, "ports") == 0 && i > 0)
					return fail_at(r, kn, RM_INVALID,
						       "%s[%d].ports: only the leaf (the first tier) takes ports; give the "
						       "nodes a switch of this tier reaches",
						       k->path, i);
				*(strcmp(name, "nodes") == 0 ? &t.nodes : &t.ports) = v;
			} else {
				const char *txt = plain(vn) ? scalar(vn) : NULL;
				char *end = NULL;
				double v = txt ? strtod(txt, &end) : NAN;
				bool over = strcmp(name, "oversubscription") == 0;
				if (!txt || end == txt || *end || !isfinite(v) || v < (over ? 1.0 : 0.0) ||
				    v > (over ? RM_FABRIC_MAX_TAPER : RM_FABRIC_MAX_HOP_US))
					return fail_at(r, vn ? vn : kn, RM_INVALID, "%s[%d].%s: expected a number %s", k->path, i,
						       name,
						       over ? "from 1 to 64 (down:up bandwidth; 1: non-blocking)"
							    : "from 0 to 1000 (us a switch hop)");
				*(over ? &t.oversubscription : &t.latency_us) = v;
			}
		}
		if (t.nodes && t.ports)
			return fail_at(r, item, RM_INVALID, "%s[%d]: give nodes or ports, not both", k->path, i);
		sc->topology_tiers[i] = t;
		sc->n_topology_tiers++;
	}
	return RM_OK;
}

static rm_status apply(reader *r, rm_scenario *sc, const key_desc *k, struct fy_node *n)
{
	char *base = (char *)sc;
	switch (k->type) {
	case K_STR:
		RM_CHECK(copy_string(r, n, base + k->off, k->size, k->path));
		if (strcmp(k->path, "remat.policy") == 0 && policy_is_complete(base + k->off))
			return check_policy(r, n, base + k->off, k->path);
		return RM_OK;
	case K_INT: {
		int64_t v;
		if (!to_int(n, &v)) {
			if (int_overflows(n))
				return fail_at(r, n, RM_RANGE, "%s: %s is outside [%lld, %lld]", k->path, scalar(n),
					       (long long)k->min, (long long)k->max);
			return fail_at(r, n, RM_INVALID, "%s: expected an integer", k->path);
		}
		if (v < k->min || v > k->max)
			return fail_at(r, n, RM_RANGE, "%s: %lld is outside [%lld, %lld]", k->path, (long long)v,
				       (long long)k->min, (long long)k->max);
		*(int64_t *)(base + k->off) = v;
		return RM_OK;
	}
	case K_BOOL:
	case K_TRIBOOL: {
		bool b;
		if (!to_bool(n, &b))
			return fail_at(r, n, RM_INVALID, "%s: expected true or false (YAML 1.1's yes and no are read as "
						  "such)", k->path);
		if (k->type == K_BOOL)
			*(bool *)(base + k->off) = b;
		else
			*(int *)(base + k->off) = b ? 1 : 0;
		return RM_OK;
	}
	case K_DOUBLE: {
		const char *t = plain(n) ? scalar(n) : NULL;
		char *end = NULL;
		double v = t ? strtod(t, &end) : NAN;
		if (!t || end == t || *end || !(v >= 0) || !isfinite(v))
			return fail_at(r, n, RM_INVALID, "%s: expected a non-negative number", k->path);
		/* the range is checked here, so converting the value later cannot overflow */
		/* xla.mem_fraction refuses 0 as well (resolving says why): its range reads (0, 1] */
		if (v < (double)k->min || v > (double)k->max)
			return fail_at(r, n, RM_RANGE, "%s: %g is outside %s%lld, %lld]", k->path, v,
				       strcmp(k->path, "xla.mem_fraction") == 0 ? "(" : "[", (long long)k->min,
				       (long long)k->max);
		*(double *)(base + k->off) = v;
		return RM_OK;
	}
	case K_NAMES:
	case K_STRLIST:
	case K_INTLIST: {
		if (!fy_node_is_sequence(n))
			return fail_at(r, n, RM_INVALID, "%s: expected a list, e.g. [a, b]", k->path);
		int count = fy_node_sequence_item_count(n);
		if (count > RM_SCENARIO_MAX_LIST)
			return fail_at(r, n, RM_RANGE, "%s: more than %d items", k->path, RM_SCENARIO_MAX_LIST);
		if (count == 0 && k->type == K_INTLIST && strcmp(k->path, "search.micro_batches") == 0)
			return fail_at(r, n, RM_INVALID,
				       "%s: an empty list searches no micro-batch: give at least one, or leave the key out "
				       "to search training.micro_batch alone",
				       k->path);
		int *cnt = (int *)(base + k->count_off);
		*cnt = 0;
		for (int i = 0; i < count; i++) {
			struct fy_node *item = fy_node_sequence_get_by_index(n, i);
			char *slot = base + k->off + (size_t)i * k->size;
			if (k->type == K_INTLIST) {
				int64_t v;
				if (!to_int(item, &v) || v < k->min || v > k->max)
					return fail_at(r, item, RM_INVALID, "%s[%d]: expected an integer in [%lld, %lld]", k->path,
						       i, (long long)k->min, (long long)k->max);
				((int64_t *)(base + k->off))[i] = v;
			} else {
				RM_CHECK(copy_string(r, item, slot, k->size, k->path));
				if (strcmp(k->path, "search.policies") == 0) {
					char what[64];
					snprintf(what, sizeof(what), "%s[%d]", k->path, i);
					RM_CHECK(check_policy(r, item, slot, what));
				}
				if (k->type == K_NAMES && !rm_checkpoint_canonical(slot) && strcmp(slot, "qkv_proj") != 0)
					return fail_at(r, item, RM_INVALID,
						       "%s: unknown checkpoint name \"%s\" (see `remora describe MODEL` for the "
						       "names; MaxText aliases are accepted)",
						       k->path, slot);
			}
			(*cnt)++;
		}
		return RM_OK;
	}
	case K_TIERS:
		return apply_tiers(r, sc, k, n);
	case K_FLAGS: {
		char *dst = base + k->off;
		if (fy_node_is_scalar(n))
			return copy_string(r, n, dst, k->size, k->path);
		if (!fy_node_is_sequence(n))
			return fail_at(r, n, RM_INVALID, "%s: expected a string or a list of flags", k->path);
		dst[0] = '\0';
		for (int i = 0; i < fy_node_sequence_item_count(n); i++) {
			struct fy_node *item = fy_node_sequence_get_by_index(n, i);
			const char *t = scalar(item);
			if (!t)
				return fail_at(r, item, RM_INVALID, "%s: expected flags as strings", k->path);
			char what[64];
			snprintf(what, sizeof(what), "%s[%d]", k->path, i);
			RM_CHECK(check_flags_item(r, item, t, what));
			size_t used = strlen(dst);
			if (used + strlen(t) + 2 >= k->size)
				return fail_at(r, item, RM_RANGE, "%s: longer than %zu characters", k->path, k->size - 1);
			snprintf(dst + used, k->size - used, "%s%s", used ? " " : "", t);
		}
		return RM_OK;
	}
	}
	return RM_OK;
}

static const key_desc *find_key(const char *path)
{
	for (size_t i = 0; i < RM_ARRAY_SIZE(keys); i++)
		if (strcmp(keys[i].path, path) == 0)
			return &keys[i];
	return NULL;
}

static void empty_key_line(const char *text, size_t len, int nth, int *line, int *col);

static rm_status walk(reader *r, rm_scenario *sc, struct fy_node *map, const char *prefix)
{
	void *iter = NULL;
	struct fy_node_pair *pair;
	while ((pair = fy_node_mapping_iterate(map, &iter)) != NULL) {
		struct fy_node *kn = fy_node_pair_key(pair), *vn = fy_node_pair_value(pair);
		const char *kname = scalar(kn);
		if (!kname)
			return fail_at(r, kn, RM_PARSE, "keys must be plain names");
		if (!*kname && !r->set) {
			/* an empty key has no token to take a position from */
			int line = 0, col = 0;
			node_pos_in(r, kn, &line, &col);
			if (line == 0 && r->text)
				empty_key_line(r->text, r->len, 1, &line, &col);
			return rm_error_set(r->err, RM_PARSE, r->path, line, col,
					    "a key is empty (a line that starts with ':' or '?')");
		}
		char path[128];
		snprintf(path, sizeof(path), "%s%s%s", prefix, prefix[0] ? "." : "", kname);
		bool is_section = false;
		if (!prefix[0])
			for (size_t i = 0; i < RM_ARRAY_SIZE(sections); i++)
				is_section |= strcmp(kname, sections[i]) == 0;
		/* hardware is a profile name or a mapping {profile, power_w, hbm_gib} */
		if (!prefix[0] && strcmp(kname, "hardware") == 0 && vn && fy_node_is_mapping(vn)) {
			RM_CHECK(walk(r, sc, vn, path));
			continue;
		}
		/* cluster.topology is a mapping {kind, nics_per_node, nic_gbps, pxn, tiers} */
		if (strcmp(path, "cluster.topology") == 0) {
			if (!vn || !fy_node_is_mapping(vn))
				return fail_at(r, vn ? vn : kn, RM_INVALID,
					       "%s: expected a mapping {kind, nics_per_node, nic_gbps, pxn, tiers}", path);
			RM_CHECK(walk(r, sc, vn, path));
			record_pos(r, sc, path, vn, false);
			continue;
		}
		if (is_section) {
			if (!vn || !fy_node_is_mapping(vn))
				return fail_at(r, vn ? vn : kn, RM_INVALID, "%s: expected a mapping of keys", path);
			RM_CHECK(walk(r, sc, vn, path));
			continue;
		}
		const key_desc *k = find_key(path);
		if (!k) {
			char known[1024] = "";
			size_t plen = strlen(prefix);
			for (size_t i = 0; i < RM_ARRAY_SIZE(keys); i++) {
				bool in_section = plen ? strncmp(keys[i].path, prefix, plen) == 0 && keys[i].path[plen] == '.'
						       : strchr(keys[i].path, '.') == NULL;
				if (!in_section)
					continue;
				size_t used = strlen(known);
				snprintf(known + used, sizeof(known) - used, "%s%s", used ? ", " : "",
					 keys[i].path + (plen ? plen + 1 : 0));
			}
			if (!plen)
				for (size_t i = 0; i < RM_ARRAY_SIZE(sections); i++) {
					size_t used = strlen(known);
					snprintf(known + used, sizeof(known) - used, ", %s", sections[i]);
				}
			return fail_at(r, kn, RM_UNKNOWN_KEY, "unknown key \"%s\" (known here: %s)", path, known);
		}
		if (!vn)
			return fail_at(r, kn, RM_INVALID, "%s: missing value", path);
		RM_CHECK(apply(r, sc, k, vn));
		record_pos(r, sc, path, vn, false);
	}
	return RM_OK;
}

/*
 * The n-th (1-based) line whose first non-blank character is ':' or '?' followed by a blank or the
 * end (the last such line when there are fewer): a mapping entry with an empty key, which
 * libfyaml's nodes give no position.
 */
static void empty_key_line(const char *text, size_t len, int nth, int *line, int *col)
{
	int ln = 1, seen = 0;
	for (size_t i = 0; i < len; i++) {
		size_t j = i;
		while (j < len && (text[j] == ' ' || text[j] == '\t'))
			j++;
		if (j < len && (text[j] == ':' || text[j] == '?') && (j + 1 == len || strchr(" \t\r\n", text[j + 1]))) {
			*line = ln;
			*col = (int)(j - i) + 1;
			if (++seen == nth)
				return;
		}
		while (i < len && text[i] != '\n')
			i++;
		ln++;
	}
}

/* A duplicate key anywhere in the tree under n; *empties counts empty keys met on the way. */
static struct fy_node *find_duplicate(struct fy_node *n, int *empties)
{
	if (fy_node_is_sequence(n)) {
		for (int i = 0; i < fy_node_sequence_item_count(n); i++) {
			struct fy_node *d = find_duplicate(fy_node_sequence_get_by_index(n, i), empties);
			if (d)
				return d;
		}
		return NULL;
	}
	if (!fy_node_is_mapping(n))
		return NULL;
	int count = fy_node_mapping_item_count(n);
	for (int i = 0; i < count; i++) {
		struct fy_node_pair *p = fy_node_mapping_get_by_index(n, i);
		struct fy_node *k = fy_node_pair_key(p);
		const char *kt = scalar(k);
		if (!k || (kt && !*kt))
			(*empties)++;
		for (int j = 0; j < i; j++)
			if (fy_node_compare(fy_node_pair_key(fy_node_mapping_get_by_index(n, j)), k))
				return k ? k : n;
		struct fy_node *d = find_duplicate(fy_node_pair_value(p), empties);
		if (d)
			return d;
	}
	return NULL;
}

/*
 * libfyaml 0.7.12 rejects a document with a duplicate empty key (two lines starting with ':')
 * without a diagnostic. Rebuilt with duplicates allowed, the document shows which key it was.
 */
static void undiagnosed_failure(const char *text, size_t len, bool json, int *line, int *col, char *what,
				size_t size)
{
	*line = *col = 0;
	snprintf(what, size, "syntax error");
	if (rm__fy_find_bad_utf8(text, len, line, col)) {
		snprintf(what, size, "malformed UTF-8 (YAML text is Unicode)");
		return;
	}
	struct fy_diag_cfg dcfg;
	fy_diag_cfg_default(&dcfg);
	dcfg.fp = NULL; /* quiet: libfyaml would print "[ERR]: ..." to stderr */
	struct fy_diag *diag = fy_diag_create(&dcfg);
	struct fy_parse_cfg pcfg = {
		.flags = FYPCF_QUIET | FYPCF_ALLOW_DUPLICATE_KEYS |
			 (json ? FYPCF_JSON_FORCE : FYPCF_DEFAULT_VERSION_AUTO),
		.diag = diag,
	};
	struct fy_document *doc = fy_document_build_from_string(&pcfg, text, len);
	if (!doc) {
		fy_diag_destroy(diag);
		return;
	}
	int empties = 0;
	struct fy_node *dup = find_duplicate(fy_document_root(doc), &empties);
	if (dup) {
		const char *kt = scalar(dup);
		if (kt && *kt) {
			node_pos(dup, line, col);
			snprintf(what, size, "duplicate key \"%s\"", kt);
		} else {
			empty_key_line(text, len, empties, line, col);
			snprintf(what, size, "duplicate empty key (a line that starts with ':' or '?')");
		}
	}
	fy_document_destroy(doc);
	fy_diag_destroy(diag);
}

static struct fy_document *parse_doc(const char *text, size_t len, bool json, rm_error *err, const char *path,
				     const char *set)
{
	/* libfyaml 0.7.12 loops for ever on a directive line with malformed UTF-8 ("%\xd0"), also after
	 * a Unicode line break (NEL, LS, PS): only printable-ASCII directive lines reach it */
	int bad_line, bad_col;
	unsigned ctl;
	if (rm__fy_find_control(text, len, &bad_line, &bad_col, &ctl)) {
		if (set)
			rm_error_set(err, RM_PARSE, NULL, 0, 0, "--set %s: control character 0x%02X is not YAML text", set, ctl);
		else
			rm_error_set(err, RM_PARSE, path, bad_line, bad_col,
				     "invalid YAML: control character 0x%02X (YAML text holds none but tab and line breaks)",
				     ctl);
		return NULL;
	}
	if (rm__fy_find_tab(text, len, &bad_line, &bad_col)) {
		if (set)
			rm_error_set(err, RM_PARSE, NULL, 0, 0, "--set %s: a tab; write spaces", set);
		else
			rm_error_set(err, RM_PARSE, path, bad_line, bad_col,
				     "invalid YAML for remora: a tab (YAML indents with spaces; remora reads spaces only)");
		return NULL;
	}
	if (!rm__fy_directives_are_ascii(text, len, &bad_line, &bad_col)) {
		if (set)
			rm_error_set(err, RM_PARSE, NULL, 0, 0,
				     "--set %s: a YAML directive line (starting with '%%') may hold only printable "
				     "ASCII", set);
		else
			rm_error_set(err, RM_PARSE, path, bad_line, bad_col,
				     "invalid YAML: a directive line (starting with '%%') may hold only printable "
				     "ASCII");
		return NULL;
	}
	struct fy_diag_cfg dcfg;
	fy_diag_cfg_default(&dcfg);
	dcfg.fp = NULL;
	dcfg.colorize = false;
	struct fy_diag *diag = fy_diag_create(&dcfg);
	if (diag)
		fy_diag_set_collect_errors(diag, true);
	struct fy_parse_cfg pcfg = {
		.flags = FYPCF_QUIET | FYPCF_COLLECT_DIAG | (json ? FYPCF_JSON_FORCE : FYPCF_DEFAULT_VERSION_AUTO),
		.diag = diag,
	};
	struct fy_document *doc = fy_document_build_from_string(&pcfg, text, len);
	if (!doc) {
		void *it = NULL;
		struct fy_diag_error *e = diag ? fy_diag_errors_iterate(diag, &it) : NULL;
		int line = e ? e->line : 0, col = e ? e->column : 0;
		char what[128];
		snprintf(what, sizeof(what), "%s", e && e->msg ? e->msg : "syntax error");
		if (!e || !e->msg)
			undiagnosed_failure(text, len, json, &line, &col, what, sizeof(what));
		if (set)
			rm_error_set(err, RM_PARSE, NULL, 0, 0, "--set %s: the value is not valid YAML: %s", set, what);
		else
			rm_error_set(err, RM_PARSE, path, line, col, "%s: %s", json ? "invalid JSON" : "invalid YAML", what);
	}
	int second_line = 0;
	if (doc && !json && !set && rm__fy_has_second_document(text, len, &second_line)) {
		rm_error_set(err, RM_PARSE, path, second_line > 0 ? second_line : 1, 1,
			     "a second YAML document: a scenario is one document (remove the '---' and what follows, or "
			     "merge them)");
		fy_document_destroy(doc);
		doc = NULL;
	}
	struct fy_node *nul = doc ? rm__fy_find_nul_scalar(fy_document_root(doc)) : NULL;
	if (nul) {
		int line, col;
		rm__fy_node_start(text, len, json, nul, &line, &col);
		if (set)
			rm_error_set(err, RM_PARSE, NULL, 0, 0, "--set %.60s: the value holds a NUL character (\\0)", set);
		else
			rm_error_set(err, RM_PARSE, path, line, col,
				     "a string holds a NUL character (an escaped \\0 or \\u0000), which no key or value may");
		fy_document_destroy(doc);
		doc = NULL;
	}
	fy_diag_destroy(diag);
	return doc;
}

rm_status rm_scenario_parse(const char *text, size_t len, const char *path, rm_scenario *sc, rm_error *err)
{
	snprintf(sc->path, sizeof(sc->path), "%s", path ? path : "");
	char tmp[512];
	snprintf(tmp, sizeof(tmp), "%s", path ? path : ".");
	snprintf(sc->dir, sizeof(sc->dir), "%s", dirname(tmp));
	size_t plen = path ? strlen(path) : 0;
	bool json = plen > 5 && strcmp(path + plen - 5, ".json") == 0;
	/* nothing but blanks and comments: an empty scenario, not a syntax error */
	bool blank = true;
	for (size_t i = 0; i < len && blank; i++) {
		if (text[i] == '#') {
			while (i < len && text[i] != '\n')
				i++;
		} else if (text[i] != ' ' && text[i] != '\t' && text[i] != '\n' && text[i] != '\r') {
			blank = false;
		}
	}
	if (blank)
		return rm_error_set(err, RM_MISSING, path, 1, 1, "empty scenario: expected at least a model");
	struct fy_document *doc = parse_doc(text, len, json, err, path, NULL);
	if (!doc)
		return RM_PARSE;
	reader r = {.path = path, .text = text, .len = len, .json = json, .err = err};
	rm_status st = RM_OK;
	struct fy_node *root = fy_document_root(doc);
	if (!root || !fy_node_is_mapping(root)) {
		st = root ? fail_at(&r, root, RM_PARSE, "expected a mapping of scenario keys (model, hardware, ...)")
			  : rm_error_set(err, RM_PARSE, path, 1, 1, "empty scenario: expected at least a model");
		goto out;
	}
	st = walk(&r, sc, root, "");
	if (st == RM_OK && !sc->model[0])
		st = rm_error_set(err, RM_MISSING, path, 1, 1, "missing required key \"model\" (a preset or a config.json)");
out:
	fy_document_destroy(doc);
	return st;
}

rm_status rm_scenario_parse_at(const char *text, size_t len, const char *path, const char *node_path, rm_scenario *sc,
			       rm_error *err)
{
	snprintf(sc->path, sizeof(sc->path), "%s", path ? path : "");
	char tmp[512];
	snprintf(tmp, sizeof(tmp), "%s", path ? path : ".");
	snprintf(sc->dir, sizeof(sc->dir), "%s", dirname(tmp));
	size_t plen = path ? strlen(path) : 0;
	bool json = plen > 5 && strcmp(path + plen - 5, ".json") == 0;
	struct fy_document *doc = parse_doc(text, len, json, err, path, NULL);
	if (!doc)
		return RM_PARSE;
	reader r = {.path = path, .text = text, .len = len, .json = json, .err = err};
	rm_status st = RM_OK;
	struct fy_node *root = fy_document_root(doc);
	struct fy_node *n = root ? fy_node_by_path(root, node_path, (size_t)-1, FYNWF_DONT_FOLLOW) : NULL;
	if (!n)
		st = rm_error_set(err, RM_MISSING, path, 1, 1, "no scenario at %s", node_path);
	else if (!fy_node_is_mapping(n))
		st = fail_at(&r, n, RM_PARSE, "expected a mapping of scenario keys (model, hardware, ...)");
	else if ((st = walk(&r, sc, n, "")) == RM_OK && !sc->model[0])
		st = fail_at(&r, n, RM_MISSING, "missing required key \"model\" (a preset or a config.json)");
	fy_document_destroy(doc);
	return st;
}

rm_status rm_scenario_load(const char *path, rm_scenario *sc, rm_error *err)
{
	char *text = NULL;
	size_t len = 0;
	if (!rm_read_file(path, &text, &len, err))
		return err ? err->status : RM_IO;
	rm_status st = rm_scenario_parse(text, len, path, sc, err);
	free(text);
	return st;
}

rm_status rm_scenario_set(rm_scenario *sc, const char *assignment, rm_error *err)
{
	const char *eq = strchr(assignment, '=');
	if (!eq || eq == assignment)
		return rm_error_set(err, RM_USAGE, NULL, 0, 0, "--set expects KEY=VALUE (or xla_flags+=FLAGS), got '%s'",
				    assignment);
	char path[128];
	size_t klen = (size_t)(eq - assignment);
	/* KEY+=VALUE appends to a string key (xla_flags+=--xla_gpu_memory_limit_slop_factor=120) */
	bool append = klen > 1 && assignment[klen - 1] == '+';
	if (append)
		klen--;
	if (!append && klen == 1 && assignment[0] == '+')
		return rm_error_set(err, RM_USAGE, NULL, 0, 0, "--set expects KEY=VALUE (or xla_flags+=FLAGS), got '%s'",
				    assignment);
	if (klen >= sizeof(path))
		return rm_error_set(err, RM_USAGE, NULL, 0, 0, "--set: key too long");
	memcpy(path, assignment, klen);
	path[klen] = '\0';
	const key_desc *k = find_key(path);
	if (!k) {
		/* the keys of the same section when there are any (they fit a message), else the
		 * sections and top-level keys */
		char known[700] = "";
		const char *dot = strchr(path, '.');
		size_t sect = dot ? (size_t)(dot - path) + 1 : 0;
		bool any = false;
		for (size_t i = 0; i < RM_ARRAY_SIZE(keys) && sect; i++)
			any |= strncmp(keys[i].path, path, sect) == 0;
		for (size_t i = 0; i < RM_ARRAY_SIZE(keys); i++) {
			if (any ? strncmp(keys[i].path, path, sect) != 0 : strchr(keys[i].path, '.') != NULL)
				continue;
			size_t used = strlen(known);
			snprintf(known + used, sizeof(known) - used, "%s%s", used ? ", " : "", keys[i].path);
		}
		if (!any)
			for (size_t i = 0; i < RM_ARRAY_SIZE(sections); i++) {
				size_t used = strlen(known);
				snprintf(known + used, sizeof(known) - used, "%s%s.*", used ? ", " : "", sections[i]);
			}
		return rm_error_set(err, RM_UNKNOWN_KEY, NULL, 0, 0, "--set: unknown key \"%s\" (%s: %s; docs/scenarios.md)",
				    path, any ? "keys here" : "sections and keys", known);
	}
	const char *value = eq + 1;
	{
		/* the value is text: refuse bytes that are not UTF-8 before any parser echoes them */
		int bl = 0, bc = 0;
		if (rm__fy_find_bad_utf8(value, strlen(value), &bl, &bc))
			return rm_error_set(err, RM_PARSE, NULL, 0, 0,
					    "--set %s: malformed UTF-8 in the value at character %d (scenario text is Unicode)",
					    path, bc);
	}
	/* messages quote the override, shortened so that the reason always fits */
	char shown[112];
	if (strlen(assignment) > 96)
		snprintf(shown, sizeof(shown), "%.*s...", 93, assignment);
	else
		snprintf(shown, sizeof(shown), "%s", assignment);
	reader r = {.set = shown, .err = err};
	rm_status st;
	if (append && k->type != K_STR && k->type != K_FLAGS)
		return rm_error_set(err, RM_USAGE, NULL, 0, 0, "--set %s+=: only string keys such as xla_flags append",
				    path);
	if (strcmp(path, "hardware") == 0 && value[strspn(value, " \t")] == '{')
		return rm_error_set(err, RM_USAGE, NULL, 0, 0,
				    "--set %s: hardware takes a profile name here; set the mapping's keys one by one "
				    "(--set hardware.profile=NAME --set hardware.power_w=W --set hardware.hbm_gib=G)",
				    assignment);
	if (k->type == K_STR || k->type == K_FLAGS) {
		/* strings are taken verbatim: flag strings and policy expressions are not YAML */
		char *dst = (char *)sc + k->off;
		size_t have = append ? strlen(dst) : 0, n = strlen(value);
		if (have + n + 1 >= k->size)
			return rm_error_set(err, RM_RANGE, NULL, 0, 0, "--set %s: value longer than %zu characters", path,
					    k->size - 1);
		char *next = rm_xmalloc(k->size);
		memcpy(next, dst, have);
		if (append && have)
			next[have++] = ' ';
		memcpy(next + have, value, n + 1);
		st = strcmp(path, "remat.policy") == 0 && policy_is_complete(next) ? check_policy(&r, NULL, next, path)
										   : RM_OK;
		if (st == RM_OK)
			memcpy(dst, next, strlen(next) + 1);
		free(next);
	} else {
		struct fy_document *doc = parse_doc(value, strlen(value), false, err, NULL, shown);
		if (!doc)
			return RM_PARSE;
		struct fy_node *root = fy_document_root(doc);
		st = root ? apply(&r, sc, k, root) : rm_error_set(err, RM_INVALID, NULL, 0, 0, "--set %s: empty value", path);
		fy_document_destroy(doc);
	}
	if (st == RM_OK)
		record_pos(&r, sc, path, NULL, true);
	return st;
}

/* ---- resolution ---- */

const rm_scenario_pos *rm_scenario_key_pos(const rm_scenario *sc, const char *key)
{
	for (int i = 0; i < sc->n_pos; i++)
		if (strcmp(sc->pos[i].key, key) == 0)
			return &sc->pos[i];
	return NULL;
}

/* Where word occurs in text as a whole word (not inside a longer name), or NULL. */
static const char *find_word(const char *text, const char *word)
{
	size_t n = strlen(word);
	for (const char *at = strstr(text, word); at; at = strstr(at + 1, word)) {
		bool before = at > text && (isalnum((unsigned char)at[-1]) || at[-1] == '_');
		bool after = isalnum((unsigned char)at[n]) || at[n] == '_';
		if (!before && !after)
			return at;
	}
	return NULL;
}

/*
 * For an error about a whole section ("training": the workload checks its values together), the
 * key of that section the message names first ("seq_len 4096 exceeds ..."), if it was set.
 */
static const rm_scenario_pos *section_key_pos(const rm_scenario *sc, const char *section, const char *msg)
{
	size_t sl = strlen(section);
	const rm_scenario_pos *best = NULL;
	const char *best_at = NULL;
	for (int i = 0; i < sc->n_pos; i++) {
		const char *k = sc->pos[i].key;
		if (strncmp(k, section, sl) != 0 || k[sl] != '.')
			continue;
		const char *at = find_word(msg, k + sl + 1);
		if (at && (!best_at || at < best_at)) {
			best = &sc->pos[i];
			best_at = at;
		}
	}
	return best;
}

/* Re-anchors an error at the scenario key it came from: "FILE:LINE:COL: KEY: message". */
static rm_status at_key(const rm_scenario *sc, const char *key, rm_error *err)
{
	if (!err)
		return RM_INVALID;
	const rm_scenario_pos *p = rm_scenario_key_pos(sc, key);
	if (!p && (p = section_key_pos(sc, key, err->msg)) != NULL)
		key = p->key;
	char msg[sizeof(err->msg)];
	snprintf(msg, sizeof(msg), "%s", err->msg);
	int col_in_value = err->column;
	int line = p ? p->line : 0, col = p ? p->column : 0;
	/* a string parser's error (line 1 of the string, no file) inside a value that stands in the
	 * file character for character lands on the offending character; remat.policy is excluded:
	 * the text parsed at resolution is built from it and remat.names */
	if (p && p->line > 0 && p->text_column > 0 && err->file[0] == '\0' && err->line == 1 && col_in_value > 0 &&
	    strcmp(key, "remat.policy") != 0)
		col = p->text_column + col_in_value - 1;
	if (p && p->line == 0)
		snprintf(err->msg, sizeof(err->msg), "%s (from --set %s): %s", key, key, msg);
	else
		snprintf(err->msg, sizeof(err->msg), "%s: %s", key, msg);
	snprintf(err->file, sizeof(err->file), "%s", p && p->line ? sc->path : (sc->path[0] && !p ? sc->path : ""));
	err->line = line;
	err->column = col;
	return err->status;
}

static rm_status key_error(const rm_scenario *sc, const char *key, rm_error *err, rm_status st, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static rm_status key_error(const rm_scenario *sc, const char *key, rm_error *err, rm_status st, const char *fmt, ...)
{
	char msg[600];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	rm_error_set(err, st, NULL, 0, 0, "%s", msg);
	return at_key(sc, key, err);
}

void rm_scenario_resolved_finish(rm_scenario_resolved *r)
{
	if (!r)
		return;
	rm_workload_destroy(r->wl);
	rm_remat_policy_destroy(r->policy);
	memset(r, 0, sizeof(*r));
}

static bool policy_takes_names(const char *p)
{
	static const char *const with_names[] = {"save_only_these_names", "save_any_names_but_these",
						 "save_anything_except_these_names",
						 "save_and_offload_only_these_names"};
	for (size_t i = 0; i < RM_ARRAY_SIZE(with_names); i++)
		if (strcmp(p, with_names[i]) == 0)
			return true;
	return false;
}

/* The policy expression of a scenario: remat.policy, completed by the name lists. */
static rm_status build_policy_text(const rm_scenario *sc, char *buf, size_t size, rm_error *err)
{
	const char *p = sc->policy;
	const char *bare = strrchr(p, '.');
	bare = bare && !strchr(p, '(') ? bare + 1 : p;
	if (strchr(p, '(') || !policy_takes_names(bare)) {
		if (sc->n_names || sc->n_offload) {
			/* an unknown policy is the first thing to say */
			rm_remat_policy *probe = rm_remat_policy_parse(p, err);
			if (!probe)
				return at_key(sc, "remat.policy", err);
			rm_remat_policy_destroy(probe);
			const char *key = sc->n_names ? "remat.names" : "remat.offload_names";
			return key_error(sc, key, err, RM_INVALID,
					 "%s are given but remat.policy \"%s\" does not take them (use a policy that "
					 "takes names, e.g. save_only_these_names, or clear them with --set %s=[])",
					 key, p, key);
		}
		snprintf(buf, size, "%s", p);
		return RM_OK;
	}
	size_t u = (size_t)snprintf(buf, size, "%s(", bare);
	bool offload = strcmp(bare, "save_and_offload_only_these_names") == 0;
	if (!offload && sc->n_offload)
		return key_error(sc, "remat.offload_names", err, RM_INVALID,
				 "offload_names need policy save_and_offload_only_these_names, not %s", bare);
	if (offload)
		u += (size_t)snprintf(buf + u, u < size ? size - u : 0, "[");
	for (int i = 0; i < sc->n_names; i++)
		u += (size_t)snprintf(buf + u, u < size ? size - u : 0, "%s'%s'", i ? ", " : "", sc->names[i]);
	if (offload) {
		u += (size_t)snprintf(buf + u, u < size ? size - u : 0, "], [");
		for (int i = 0; i < sc->n_offload; i++)
			u += (size_t)snprintf(buf + u, u < size ? size - u : 0, "%s'%s'", i ? ", " : "", sc->offload_names[i]);
		u += (size_t)snprintf(buf + u, u < size ? size - u : 0, "]");
	}
	snprintf(buf + u, u < size ? size - u : 0, ")");
	return RM_OK;
}

static rm_status embedded_hw(const char *spec, const char *nccl_version, int ranks, int nodes, rm_hw_profile *out,
			     rm_nccl_model *nccl, rm_error *err)
{
	(void)ranks;
	(void)nodes;
	const rm_hw_profile *hw = rm_hw_profile_find(spec, err);
	if (!hw)
		return err ? err->status : RM_NOT_FOUND;
	*out = *hw;
	return nccl ? rm_nccl_model_init(nccl, out, nccl_version, err) : RM_OK;
}

const char *rm_scenario_model_file(const rm_scenario *sc, char *buf, size_t size)
{
	size_t ml = strlen(sc->model);
	bool is_path = strchr(sc->model, '/') || (ml > 5 && strcmp(sc->model + ml - 5, ".json") == 0);
	if (!is_path)
		return NULL;
	if (sc->model[0] != '/' && sc->dir[0])
		snprintf(buf, size, "%s/%s", sc->dir, sc->model);
	else
		snprintf(buf, size, "%s", sc->model);
	return buf;
}

/* Host time per eager PyTorch op with autograd: docs/reference/kernels-h100.md section 5
 * (pytorch/pytorch issues/41383: 5-7 us for ops with requires_grad; the midpoint). */
#define EAGER_HOST_US 6.0

const char *rm_scenario_hardware_spec(const rm_scenario *sc, char *buf, size_t size)
{
	const char *colon = strrchr(sc->hardware, ':');
	const rm_scenario_pos *p = rm_scenario_key_pos(sc, "hardware.profile");
	if (!p)
		p = rm_scenario_key_pos(sc, "hardware");
	bool from_file = p && p->line > 0; /* a --set value is relative to where remora runs */
	if (from_file && colon && colon != sc->hardware && sc->hardware[0] != '/' && sc->dir[0] && strcmp(sc->dir, ".") != 0)
		snprintf(buf, size, "%s/%s", sc->dir, sc->hardware);
	else
		snprintf(buf, size, "%s", sc->hardware);
	return buf;
}

/* scheduler.nccl_cta_policy and scheduler.nccl_registration onto the NCCL model (remora/nccl.h
 * rm_nccl_model_set_buffers; docs/collectives.md 'Symmetric kernels and copy engines'). */
static rm_status nccl_buffers(const rm_scenario *sc, rm_nccl_model *nccl, rm_error *err)
{
	rm_nccl_cta_policy policy = RM_NCCL_CTA_DEFAULT;
	rm_nccl_registration reg = RM_NCCL_REG_NONE;
	bool given_policy = sc->nccl_cta_policy[0] || rm_scenario_key_pos(sc, "scheduler.nccl_cta_policy");
	bool given_reg = sc->nccl_registration[0] || rm_scenario_key_pos(sc, "scheduler.nccl_registration");
	if (given_policy && !rm_nccl_cta_policy_parse(sc->nccl_cta_policy, &policy))
		return key_error(sc, "scheduler.nccl_cta_policy", err, RM_INVALID,
				 "expected default, efficiency or zero, got \"%s\"", sc->nccl_cta_policy);
	if (given_reg && !rm_nccl_registration_parse(sc->nccl_registration, &reg))
		return key_error(sc, "scheduler.nccl_registration", err, RM_INVALID,
				 "expected none, buffer or symmetric, got \"%s\"", sc->nccl_registration);
	if (policy == RM_NCCL_CTA_ZERO && strcasecmp(sc->collective_engine, "copy_engine") == 0)
		return key_error(sc, "scheduler.nccl_cta_policy", err, RM_INVALID,
				 "zero and scheduler.collective_engine copy_engine both put the all-gathers on the "
				 "copy engines (NCCL's path and the generic one); set one");
	if (policy == RM_NCCL_CTA_ZERO && reg != RM_NCCL_REG_SYMMETRIC)
		rm_log_warn("scheduler.nccl_cta_policy zero: NCCL's copy-engine collectives need symmetric windows "
			    "(scheduler.nccl_registration: symmetric); without them the tuner's kernels run as by default");
	else if (policy == RM_NCCL_CTA_EFFICIENCY && reg == RM_NCCL_REG_NONE)
		rm_log_warn("scheduler.nccl_cta_policy efficiency: its NVLS path needs registered buffers "
			    "(scheduler.nccl_registration: buffer or symmetric); without them the tuner's kernels run as by "
			    "default");
	if (rm_nccl_model_set_buffers(nccl, policy, reg, err) != RM_OK)
		return at_key(sc, policy != RM_NCCL_CTA_DEFAULT ? "scheduler.nccl_cta_policy" : "scheduler.nccl_registration",
			      err);
	return RM_OK;
}

/* hardware: {power_w, hbm_gib} over the resolved profile; warn: say so when hbm_gib is a what-if
 * (once per resolution: the profile is re-resolved with the NCCL model and set again). */
static rm_status apply_hardware_overrides(const rm_scenario *sc, rm_hw_profile *hw, bool warn, rm_error *err)
{
	if (sc->nvlink_mesh > 0) {
		/* a board of N GPUs joined NVLink to NVLink, no NVSwitch (HGX H100/H200 4-GPU): each
		 * pair shares nvlink_links / (N - 1) links; a node is that board */
		if (hw->nvlink_links < 1)
			return key_error(sc, "cluster.nvlink_mesh", err, RM_INVALID, "%s has no NVLink to join a board with",
					 hw->name);
		if (sc->nvlink_mesh > hw->gpus_per_node)
			return key_error(sc, "cluster.nvlink_mesh", err, RM_RANGE,
					 "a board of %lld GPUs: %s nodes hold at most %d", (long long)sc->nvlink_mesh,
					 hw->name, (int)hw->gpus_per_node);
		if ((int64_t)hw->nvlink_links % (sc->nvlink_mesh - 1) != 0)
			return key_error(sc, "cluster.nvlink_mesh", err, RM_INVALID,
					 "the %d NVLinks of a %s do not split evenly among %lld peers: no board "
					 "joins %lld GPUs directly",
					 (int)hw->nvlink_links, hw->name, (long long)(sc->nvlink_mesh - 1),
					 (long long)sc->nvlink_mesh);
		rm_hw_profile_set(hw, RM_HW_nvlink_mesh_gpus, (double)sc->nvlink_mesh, "scenario cluster.nvlink_mesh");
		rm_hw_profile_set(hw, RM_HW_gpus_per_node, (double)sc->nvlink_mesh,
				  "scenario cluster.nvlink_mesh: a node is one board");
	}
	if (sc->power_w > 0 && sc->power_w < 100)
		return key_error(sc, "hardware.power_w", err, RM_RANGE,
				 "power_w %g is below the 100 W that data-centre GPUs accept as a limit (H100 SXM: "
				 "200-700 W)",
				 sc->power_w);
	if (sc->power_w > 0) {
		if (sc->power_w > hw->tdp_W)
			return key_error(sc, "hardware.power_w", err, RM_RANGE,
					 "power_w %g is above the %g W TDP of %s (the kernel rates are measured at the TDP)",
					 sc->power_w, hw->tdp_W, hw->name);
		rm_hw_profile_set(hw, RM_HW_power_W, sc->power_w, "scenario hardware.power_w");
	}
	if (warn && (sc->nics_per_node > 0 || sc->nic_gbps > 0) && sc->nodes <= 1)
		rm_log_warn("cluster.nics_per_node and cluster.nic_gbps set the network between nodes: one node "
			    "uses none");
	if (sc->nics_per_node > 0 || sc->nic_gbps > 0) {
		/* the scale-out fabric: NICs per node x line rate, shared by the node's GPUs, at the
		 * effective share of line rate the profile's NDR figure has (47 of 50 GB/s:
		 * docs/reference/hardware.md 'scale-out NIC per GPU') */
		double gpn = sc->gpus_per_node > 0 ? (double)sc->gpus_per_node : hw->gpus_per_node;
		double nics = sc->nics_per_node > 0 ? (double)sc->nics_per_node : gpn;
		double line_GBps = sc->nic_gbps > 0 ? sc->nic_gbps / 8.0 : hw->nic_GBps / 0.94;
		rm_hw_profile_set(hw, RM_HW_nic_GBps, nics * line_GBps * 0.94 / gpn,
				  "scenario cluster.nics_per_node x cluster.nic_gbps / 8 x 0.94 (docs/reference/hardware.md "
				  "'scale-out NIC per GPU': 47 of 50 GB/s effective) / GPUs per node");
	}
	if (sc->hbm_gib > 0) {
		if (warn && sc->hbm_gib * (double)RM_GiB > hw->hbm_bytes * 1.0001)
			rm_log_warn("hardware.hbm_gib %g is more than the %.2f GiB of %s: a what-if, not that GPU",
				    sc->hbm_gib, hw->hbm_bytes / (double)RM_GiB, hw->name);
		rm_hw_profile_set(hw, RM_HW_hbm_bytes, sc->hbm_gib * (double)RM_GiB, "scenario hardware.hbm_gib");
	}
	return RM_OK;
}

/* The smallest multiple of below that reaches at least want nodes and is above below. */
static int tier_cover(int below, int64_t want)
{
	int64_t m = (want + below - 1) / below;
	if (m < 2)
		m = 2;
	return m * below > 1000000 ? 1000000 / below * below : (int)(m * below);
}

/*
 * cluster.topology into the NCCL model's fabric. Defaults (docs/reference/hardware.md "Scale-out
 * switches"): rail_optimized is a DGX SuperPOD H100 scalable unit (a rail leaf of 32 nodes,
 * non-blocking, under a spine that joins the rails); fat_tree a 64-port NDR leaf (QM9700)
 * non-blocking, 32 ports down, holding 32 / NICs per node nodes; the top tier, when its nodes are not given, reaches the whole cluster. A leaf given in
 * ports holds ports x r / (r + 1) NICs down (r the taper of the tier above), of one rail per node
 * (rail_optimized) or of all the node's NICs (fat_tree). Hop latencies default to 0: no
 * published figure is sourced (docs/reference/hardware.md "Switch latency").
 */
static rm_status build_fabric(const rm_scenario *sc, const rm_hw_profile *hw, rm_fabric *f, rm_error *err)
{
	*f = (rm_fabric){.kind = RM_FABRIC_NONE, .pxn = sc->topology_pxn != 0};
	/* the shorthands and the topology's keys are one value each: refuse both spellings */
	static const char *const same[][2] = {{"cluster.nics_per_node", "cluster.topology.nics_per_node"},
					      {"cluster.nic_gbps", "cluster.topology.nic_gbps"}};
	for (size_t i = 0; i < RM_ARRAY_SIZE(same); i++)
		if (rm_scenario_key_pos(sc, same[i][0]) && rm_scenario_key_pos(sc, same[i][1]))
			return key_error(sc, same[i][1], err, RM_INVALID,
					 "the same key as %s, written inside the topology: give it once", same[i][0]);
	bool any = sc->topology_kind[0] || sc->n_topology_tiers > 0 || sc->topology_pxn >= 0 ||
		   rm_scenario_key_pos(sc, "cluster.topology");
	if (!any)
		return RM_OK;
	if (!sc->topology_kind[0]) {
		/* at the topology's own position, or the first of its topo_keys given (a --set) */
		static const char *const topo_keys[] = {"cluster.topology", "cluster.topology.tiers", "cluster.topology.pxn",
						   "cluster.topology.nics_per_node", "cluster.topology.nic_gbps"};
		const char *at = topo_keys[0];
		for (size_t i = 0; i < RM_ARRAY_SIZE(topo_keys); i++)
			if (rm_scenario_key_pos(sc, topo_keys[i])) {
				at = topo_keys[i];
				break;
			}
		return key_error(sc, at, err, RM_INVALID,
				 "the topology's kind is missing: set cluster.topology.kind (rail_optimized or fat_tree)");
	}
	if (!rm_fabric_kind_parse(sc->topology_kind, &f->kind) || f->kind == RM_FABRIC_NONE)
		return key_error(sc, "cluster.topology.kind", err, RM_INVALID, "unknown fabric \"%s\" (rail_optimized, fat_tree)",
				 sc->topology_kind);
	bool rail = f->kind == RM_FABRIC_RAIL_OPTIMIZED;
	int64_t gpn = sc->gpus_per_node > 0 ? sc->gpus_per_node : (int64_t)hw->gpus_per_node;
	int64_t nics = sc->nics_per_node > 0 ? sc->nics_per_node : gpn;
	int64_t nodes = sc->nodes > 0 ? sc->nodes : 1;
	const char *tkey = "cluster.topology.tiers";
	if (sc->n_topology_tiers == 0) {
		/* DGX SuperPOD H100 reference architecture: 32 nodes per scalable unit, one leaf per
		 * rail; a 64-port QM9700 leaf, 32 ports down, for a fat tree */
		int leaf = rail ? 32 : (int)(32 / nics > 0 ? 32 / nics : 1);
		f->n_tiers = 2;
		f->tiers[0] = (rm_fabric_tier){.nodes = leaf, .oversubscription = 1.0};
		f->tiers[1] = (rm_fabric_tier){.nodes = tier_cover(leaf, nodes), .oversubscription = 1.0};
	} else {
		f->n_tiers = sc->n_topology_tiers;
		for (int i = 0; i < f->n_tiers; i++) {
			const struct rm_scenario_tier *t = &sc->topology_tiers[i];
			rm_fabric_tier *ft = &f->tiers[i];
			ft->oversubscription = t->oversubscription > 0 ? t->oversubscription : 1.0;
			ft->hop_latency_us = t->latency_us;
			if (t->ports) {
				/* the taper above the leaf splits its ports: r down for 1 up */
				double r = f->n_tiers > 1 && sc->topology_tiers[1].oversubscription > 0
						   ? sc->topology_tiers[1].oversubscription
						   : 1.0;
				int64_t down = (int64_t)floor((double)t->ports * r / (r + 1.0));
				int64_t held = rail ? down : down / nics;
				if (held < 1)
					return key_error(sc, tkey, err, RM_INVALID,
							 "[0].ports: %lld ports, %lld of them down, hold no node of %lld NICs",
							 (long long)t->ports, (long long)down, (long long)nics);
				ft->nodes = (int)held;
			} else if (t->nodes) {
				ft->nodes = (int)t->nodes;
			} else if (i + 1 == f->n_tiers && i > 0) {
				ft->nodes = tier_cover(f->tiers[i - 1].nodes, nodes);
			} else {
				return key_error(sc, tkey, err, RM_INVALID, "[%d]: give the nodes one switch of this tier reaches%s",
						 i, i == 0 ? " (or its ports)" : "");
			}
		}
	}
	if (rm_fabric_validate(f, err) != RM_OK) {
		char msg[sizeof(err->msg)];
		snprintf(msg, sizeof(msg), "%s", err->msg);
		return key_error(sc, tkey, err, RM_INVALID, "%s", msg);
	}
	if (f->tiers[f->n_tiers - 1].nodes < nodes)
		return key_error(sc, tkey, err, RM_INVALID,
				 "the top tier reaches %d nodes, the cluster has %lld (add a tier or raise its nodes)",
				 f->tiers[f->n_tiers - 1].nodes, (long long)nodes);
	return RM_OK;
}

rm_status rm_scenario_resolve(const rm_scenario *sc, rm_hw_resolver resolver, rm_scenario_resolved *out,
			      rm_error *err)
{
	memset(out, 0, sizeof(*out));
	/* model: a preset, or a config.json relative to the scenario */
	char model[1100];
	if (!rm_scenario_model_file(sc, model, sizeof(model)))
		snprintf(model, sizeof(model), "%s", sc->model);
	if (rm_model_config_resolve(model, &out->model, err) != RM_OK) {
		/* errors inside a config.json keep their own file:line:column */
		if (!(err && err->line > 0 && strcmp(err->file, sc->path) != 0))
			at_key(sc, "model", err);
		return err ? err->status : RM_INVALID;
	}
	if (!resolver)
		resolver = embedded_hw;
	/* a calibration database named in the scenario is relative to the scenario's folder, as
	 * the model's config.json is */
	char hw_spec[1100];
	rm_scenario_hardware_spec(sc, hw_spec, sizeof(hw_spec));
	const char *hw_key = rm_scenario_key_pos(sc, "hardware.profile") ? "hardware.profile" : "hardware";
	if (resolver(hw_spec, NULL, 0, 0, &out->hw, NULL, err) != RM_OK)
		return at_key(sc, hw_key, err);
	if (apply_hardware_overrides(sc, &out->hw, true, err) != RM_OK)
		return err ? err->status : RM_INVALID;
	int64_t gpn = sc->gpus_per_node ? sc->gpus_per_node : (int64_t)out->hw.gpus_per_node;
	if (gpn > out->hw.gpus_per_node)
		return key_error(sc, "cluster.gpus_per_node", err, RM_INVALID, "%s nodes have %d GPUs, not %lld%s",
				 out->hw.name, (int)out->hw.gpus_per_node, (long long)gpn,
				 sc->nvlink_mesh > 0 ? " (cluster.nvlink_mesh: a node is one board)" : "");
	out->gpus = (int)(gpn * sc->nodes);
	rm_train_config t = rm_train_config_default(&out->model);
	if (sc->seq_len)
		t.seq_len = sc->seq_len;
	if (sc->micro_batch)
		t.micro_batch = sc->micro_batch;
	if (sc->grad_accum)
		t.grad_accum = sc->grad_accum;
	/* pipeline parallelism: the outermost dimension (Megatron-LM's rank order) */
	int64_t pp = sc->pp ? sc->pp : 1;
	t.pp = pp;
	t.virtual_stages = sc->virtual_stages ? sc->virtual_stages : 1;
	t.pp_schedule = RM_PP_1F1B;
	if (sc->pp_schedule[0]) {
		rm_pp_schedule ps;
		if (!rm_pp_schedule_parse(sc->pp_schedule, &ps))
			return key_error(sc, "parallelism.pp_schedule", err, RM_INVALID,
					 "expected 1f1b, interleaved, gpipe or zero_bubble, got \"%s\"", sc->pp_schedule);
		if (ps == RM_PP_ZERO_BUBBLE && t.virtual_stages > 2)
			return key_error(sc, "parallelism.virtual_stages", err, RM_INVALID,
					 "zero_bubble runs 1 model chunk per stage (ZB-H1) or 2 (ZB-V), not %lld",
					 (long long)t.virtual_stages);
		t.pp_schedule = (int)ps;
	}
	if (pp > 1) {
		if (pp > out->gpus || out->gpus % pp != 0)
			return key_error(sc, "parallelism.pp", err, RM_INVALID, "pp %lld must divide the %d GPUs of the cluster",
					 (long long)pp, out->gpus);
		if (out->model.layers % (pp * t.virtual_stages) != 0)
			return key_error(sc, "parallelism.pp", err, RM_INVALID,
					 "pp %lld x %lld chunks per stage must divide the %lld layers of %s", (long long)pp,
					 (long long)t.virtual_stages, (long long)out->model.layers, out->model.name);
		if (rm_model_config_is_moe(&out->model) && out->model.dense_layers > 0 && t.virtual_stages > 1)
			return key_error(sc, "parallelism.virtual_stages", err, RM_UNSUPPORTED,
					 "%s runs %lld dense layers before its mixture-of-experts ones: interleaved "
					 "stages would mix the two kinds chunk by chunk, which is not modelled yet "
					 "(1f1b, gpipe and ZB-H1 stages are priced by their own layers)",
					 out->model.name, (long long)out->model.dense_layers);
		int64_t stage = out->gpus / pp;
		if (stage < gpn ? gpn % stage != 0 : stage % gpn != 0)
			return key_error(sc, "parallelism.pp", err, RM_INVALID,
					 "pipeline stages of %lld GPUs do not tile nodes of %lld GPUs", (long long)stage,
					 (long long)gpn);
		if (strcasecmp(sc->mode, "ideal") != 0 && !(strcasecmp(sc->mode, "xla") == 0 && !sc->scan) &&
		    strcasecmp(sc->mode, "fsdp2") != 0 && strcasecmp(sc->mode, "megatron") != 0)
			return key_error(sc, "parallelism.pp", err, RM_INVALID,
					 "pipeline parallelism runs each stage's layers unrolled: set remat.scan: false "
					 "under scheduler.mode xla");
	}
	if (pp > 1 && t.pp_schedule == RM_PP_INTERLEAVED && t.virtual_stages < 2)
		return key_error(sc, "parallelism.pp_schedule", err, RM_INVALID,
				 "the interleaved schedule runs several model chunks per stage: set "
				 "parallelism.virtual_stages to 2 or more (with 1 it is 1f1b)");
	if (t.virtual_stages > 1 &&
	    (pp <= 1 || (t.pp_schedule != RM_PP_INTERLEAVED && t.pp_schedule != RM_PP_ZERO_BUBBLE)))
		return key_error(sc, "parallelism.virtual_stages", err, RM_INVALID,
				 "model chunks per stage need parallelism.pp > 1 and pp_schedule: interleaved "
				 "(or zero_bubble, whose 2 chunks make ZB-V)");
	/* tensor parallelism: the innermost dimension, consecutive GPUs of a node (Megatron-LM's
	 * rank order tp, then data parallel) */
	int64_t tp = sc->tp ? sc->tp : 1;
	if (tp > 1) {
		if (tp > out->gpus / pp || (out->gpus / pp) % tp != 0)
			return key_error(sc, "parallelism.tp", err, RM_INVALID, "tp %lld must divide the %d GPUs of the cluster",
					 (long long)tp, out->gpus);
		if (tp <= gpn ? gpn % tp != 0 : tp % gpn != 0)
			return key_error(sc, "parallelism.tp", err, RM_INVALID,
					 "tensor-parallel groups of %lld GPUs do not tile nodes of %lld GPUs", (long long)tp,
					 (long long)gpn);
		if (tp > gpn)
			rm_log_warn("parallelism.tp %lld spans %lld nodes: every layer's tensor-parallel collectives "
				    "cross the network on the critical path (Megatron-LM keeps tp within a node)",
				    (long long)tp, (long long)(tp / gpn));
	}
	if (tp > 1 && out->model.arch == RM_ARCH_RESIDUAL_MLP)
		return key_error(sc, "parallelism.tp", err, RM_UNSUPPORTED,
				 "%s is a ResidualMLP, which remora models without tensor parallelism", out->model.name);
	if (tp > 1 && (out->model.heads % tp != 0 || out->model.kv_heads % tp != 0 || out->model.ffn % tp != 0))
		return key_error(sc, "parallelism.tp", err, RM_INVALID,
				 "tp %lld must divide the %lld attention heads, %lld key/value heads and MLP size %lld of %s "
				 "(Megatron-LM's column/row split gives each GPU whole heads)",
				 (long long)tp, (long long)out->model.heads, (long long)out->model.kv_heads,
				 (long long)out->model.ffn, out->model.name);
	if (tp > 1 && t.seq_len % tp != 0)
		return key_error(sc, "parallelism.tp", err, RM_INVALID, "tp %lld must divide seq_len %lld", (long long)tp,
				 (long long)t.seq_len);
	if (tp > 1 && rm_model_config_is_moe(&out->model))
		return key_error(sc, "parallelism.tp", err, RM_UNSUPPORTED,
				 "tensor parallelism of mixture-of-experts layers (expert tensor parallelism) is not "
				 "modelled yet: use parallelism.ep");
	if (rm_model_config_is_moe(&out->model) && out->model.dense_layers > 0 &&
	    out->model.dense_layers < out->model.layers && !out->model.dense_first)
		return key_error(sc, "model", err, RM_UNSUPPORTED,
				 "%s: dense layers between the mixture-of-experts ones (Qwen's mlp_only_layers or "
				 "decoder_sparse_step, a DeepSeek moe_layer_freq past the dense first layers) are not modelled yet; `remora "
				 "describe` counts its parameters",
				 out->model.name);
	if (sc->sp > 0 && tp == 1)
		rm_log_warn("parallelism.sp needs parallelism.tp > 1: ignored");
	t.tp = tp;
	t.sp = sc->sp > 0 && tp > 1;
	if (sc->async_tp > 0) {
		/* the micro-pipeline pass matches all-gather -> matmul and matmul -> reduce-scatter:
		 * sequence parallelism's collectives (torchtitan applies async TP to its
		 * SequenceParallel plans only) */
		if (tp == 1)
			return key_error(sc, "parallelism.async_tp", err, RM_INVALID,
					 "async tensor parallelism needs parallelism.tp > 1");
		if (!t.sp)
			return key_error(sc, "parallelism.async_tp", err, RM_INVALID,
					 "async tensor parallelism overlaps sequence parallelism's all-gathers and "
					 "reduce-scatters with the projections: set parallelism.sp: true");
		t.async_tp = true;
	}
	if (sc->loss_parallel >= 0)
		t.loss_parallel = sc->loss_parallel;
	if (sc->tp_embedding[0]) {
		if (strcasecmp(sc->tp_embedding, "replicated") == 0)
			t.tp_embedding_replicated = true;
		else if (strcasecmp(sc->tp_embedding, "vocab_parallel") != 0)
			return key_error(sc, "parallelism.tp_embedding", err, RM_INVALID,
					 "expected vocab_parallel or replicated, got \"%s\"", sc->tp_embedding);
	}
	/* data parallelism: fsdp x dp_replicate GPUs, all the tensor-parallel groups */
	/* context parallelism: after tp in the rank order (Megatron-LM's tp-cp-dp-pp); its GPUs
	 * share sequences and join the FSDP group (torchtitan's dp_shard_cp mesh) */
	int64_t cp = sc->cp ? sc->cp : 1;
	if (cp > 1 && (out->gpus / pp / tp) % cp != 0)
		return key_error(sc, "parallelism.cp", err, RM_INVALID, "cp %lld must divide the %lld GPUs tp and pp leave",
				 (long long)cp, (long long)(out->gpus / pp / tp));
	if (cp > 1 && t.seq_len % (2 * cp * tp) != 0)
		return key_error(sc, "parallelism.cp", err, RM_INVALID,
				 "seq_len %lld must be a multiple of 2 x cp %lld x tp %lld (two chunks of the sequence per "
				 "GPU, as the load-balanced causal split runs)",
				 (long long)t.seq_len, (long long)cp, (long long)tp);
	if (cp > 1 && sc->fused_attention == 0)
		return key_error(sc, "parallelism.cp", err, RM_UNSUPPORTED,
				 "context parallelism runs a fused attention kernel over the gathered keys: "
				 "training.fused_attention false is not modelled with it");
	if (cp > 1 && out->model.arch == RM_ARCH_RESIDUAL_MLP)
		return key_error(sc, "parallelism.cp", err, RM_UNSUPPORTED,
				 "%s is a ResidualMLP, which remora models without context parallelism", out->model.name);
	if (cp > 1 && (out->model.heads / tp) % cp != 0)
		return key_error(sc, "parallelism.cp", err, RM_INVALID, "cp %lld must divide the %lld attention heads per GPU",
				 (long long)cp, (long long)(out->model.heads / tp));
	t.cp = cp;
	int dp_gpus = (int)(out->gpus / tp / pp / cp);
	char dp_what[96];
	if (tp > 1 && pp > 1)
		snprintf(dp_what, sizeof(dp_what), "%d data-parallel GPUs (%d / tp %lld / pp %lld)", dp_gpus, out->gpus,
			 (long long)tp, (long long)pp);
	else if (tp > 1 || pp > 1)
		snprintf(dp_what, sizeof(dp_what), "%d data-parallel GPUs (%d / %s %lld)", dp_gpus, out->gpus,
			 tp > 1 ? "tp" : "pp", (long long)(tp > 1 ? tp : pp));
	else
		snprintf(dp_what, sizeof(dp_what), "%d GPUs", out->gpus);
	if (sc->fsdp && sc->dp_replicate) {
		if (sc->fsdp * sc->dp_replicate != dp_gpus)
			return key_error(sc, "parallelism.dp_replicate", err, RM_INVALID,
					 "fsdp %lld x dp_replicate %lld = %lld GPUs, but the cluster has %s (%lld x %lld)",
					 (long long)sc->fsdp, (long long)sc->dp_replicate,
					 (long long)(sc->fsdp * sc->dp_replicate), dp_what, (long long)gpn,
					 (long long)sc->nodes);
		t.fsdp = sc->fsdp;
	} else if (sc->dp_replicate) {
		if (sc->dp_replicate > dp_gpus || dp_gpus % sc->dp_replicate != 0)
			return key_error(sc, "parallelism.dp_replicate", err, RM_INVALID,
					 "dp_replicate %lld must divide the cluster's %s (%lld x %lld)", (long long)sc->dp_replicate,
					 dp_what, (long long)gpn, (long long)sc->nodes);
		t.fsdp = dp_gpus / sc->dp_replicate;
	} else {
		/* Megatron-LM replicates the parameters over its data-parallel GPUs */
		bool megatron = strcasecmp(sc->mode, "megatron") == 0;
		t.fsdp = sc->fsdp ? sc->fsdp : megatron ? 1 : dp_gpus;
	}
	if (strcasecmp(sc->mode, "megatron") == 0 && t.fsdp != 1)
		return key_error(sc, "parallelism.fsdp", err, RM_INVALID,
				 "scheduler.mode megatron replicates the parameters over the data-parallel GPUs (its "
				 "distributed optimizer is parallelism.zero 1); Megatron-FSDP is not modelled: set "
				 "parallelism.fsdp: 1 or leave it out");
	if (sc->dtype[0] && !rm_dtype_parse(sc->dtype, &t.dtype))
		return key_error(sc, "training.dtype", err, RM_INVALID, "unknown dtype \"%s\" (bf16, fp16, fp32)", sc->dtype);
	if (sc->grad_dtype[0] && !rm_dtype_parse(sc->grad_dtype, &t.grad_dtype))
		return key_error(sc, "training.grad_dtype", err, RM_INVALID, "unknown dtype \"%s\" (bf16, fp32)",
				 sc->grad_dtype);
	if (sc->optimizer_dtype[0] && (!rm_dtype_parse(sc->optimizer_dtype, &t.optimizer_dtype) ||
				       (t.optimizer_dtype != RM_DTYPE_FP32 && t.optimizer_dtype != RM_DTYPE_BF16 &&
					t.optimizer_dtype != RM_DTYPE_FP16)))
		return key_error(sc, "training.optimizer_dtype", err, RM_INVALID,
				 "expected fp32, bf16 or fp16 for the optimizer's moments, got \"%s\"", sc->optimizer_dtype);
	if (sc->optimizer[0] && !rm_optimizer_parse(sc->optimizer, &t.optimizer))
		return key_error(sc, "training.optimizer", err, RM_INVALID,
				 "unknown optimizer \"%s\" (adamw, sgd_momentum, sgd)", sc->optimizer);
	if (sc->master_weights >= 0)
		t.master_weights = sc->master_weights;
	if (sc->fused_attention >= 0)
		t.fused_attention = sc->fused_attention;
	if (sc->causal >= 0)
		t.causal = sc->causal;
	static const struct {
		const char *key;
		size_t off;
	} enum_keys[] = {{"training.loss", offsetof(rm_scenario, loss)},
			 {"training.rope", offsetof(rm_scenario, rope)},
			 {"training.attention_kernel", offsetof(rm_scenario, attention_kernel)},
			 {"training.gemm_dtype", offsetof(rm_scenario, gemm_dtype)},
			 {"training.embedding", offsetof(rm_scenario, embedding)}};
	for (size_t i = 0; i < RM_ARRAY_SIZE(enum_keys); i++)
		if (rm_scenario_key_pos(sc, enum_keys[i].key) && !((const char *)sc + enum_keys[i].off)[0])
			return key_error(sc, enum_keys[i].key, err, RM_INVALID, "empty value (leave the key out for the default)");
	if (sc->loss[0] && !rm_loss_kind_parse(sc->loss, &t.loss))
		return key_error(sc, "training.loss", err, RM_INVALID, "expected plain, chunked or fused, got \"%s\"",
				 sc->loss);
	if (sc->embedding[0]) {
		if (strcmp(sc->embedding, "one_hot") == 0)
			t.embed_one_hot = true;
		else if (strcmp(sc->embedding, "gather") != 0)
			return key_error(sc, "training.embedding", err, RM_INVALID, "expected gather or one_hot, got \"%s\"",
					 sc->embedding);
		if (t.embed_one_hot && t.tp > 1)
			return key_error(sc, "training.embedding", err, RM_UNSUPPORTED,
					 "one_hot is modelled without tensor parallelism only (parallelism.tp %d)", (int)t.tp);
	}
	if (sc->rope[0] && !rm_rope_impl_parse(sc->rope, &t.rope))
		return key_error(sc, "training.rope", err, RM_INVALID, "expected complex or real, got \"%s\"", sc->rope);
	if (sc->grad_clip >= 0)
		t.grad_clip = sc->grad_clip;
	if (sc->gemm_dtype[0]) {
		if (strcasecmp(sc->gemm_dtype, "bf16") == 0)
			t.gemm_dtype = RM_DTYPE_BF16;
		else if (strcasecmp(sc->gemm_dtype, "fp8") == 0)
			t.gemm_dtype = RM_DTYPE_FP8_E4M3;
		else
			return key_error(sc, "training.gemm_dtype", err, RM_INVALID, "expected bf16 or fp8, got \"%s\"",
					 sc->gemm_dtype);
	}
	if (sc->fp8_all_gather > 0 && t.gemm_dtype != RM_DTYPE_FP8_E4M3)
		return key_error(sc, "training.fp8_all_gather", err, RM_INVALID,
				 "fp8_all_gather gathers fp8 weights: it needs training.gemm_dtype: fp8");
	if (sc->fp8_all_gather >= 0)
		t.fp8_all_gather = sc->fp8_all_gather;
	if (t.fsdp > dp_gpus || dp_gpus % t.fsdp != 0)
		return key_error(sc, "parallelism.fsdp", err, RM_INVALID, "FSDP degree %lld must divide the cluster's %s (%lld x %lld)",
				 (long long)t.fsdp, dp_what, (long long)gpn, (long long)sc->nodes);
	t.dp_replicate = dp_gpus / t.fsdp;
	t.fsdp *= cp; /* the FSDP group spans the context-parallel GPUs too */
	/* expert parallelism: the experts split over ep GPUs of the FSDP group (torchtitan and
	 * Megatron-LM take the expert-parallel group out of the data-parallel one) */
	int64_t ep = sc->ep ? sc->ep : 1;
	if (ep > 1 && !rm_model_config_is_moe(&out->model))
		return key_error(sc, "parallelism.ep", err, RM_INVALID, "%s has no experts to split", out->model.name);
	if (ep > 1 && strcasecmp(sc->mode, "megatron") == 0)
		return key_error(sc, "parallelism.ep", err, RM_UNSUPPORTED,
				 "expert parallelism under scheduler.mode megatron is not modelled yet (remora splits the "
				 "experts over the FSDP group, which Megatron-LM does not use); use fsdp2");
	if (ep > 1 && out->model.experts % ep != 0)
		return key_error(sc, "parallelism.ep", err, RM_INVALID, "ep %lld must divide the %lld routed experts of %s",
				 (long long)ep, (long long)out->model.experts, out->model.name);
	if (ep > 1 && t.fsdp != ep)
		return key_error(sc, "parallelism.ep", err, RM_UNSUPPORTED,
				 "ep %lld with an FSDP group of %lld GPUs: remora models expert parallelism over the "
				 "whole FSDP group (each GPU's experts whole, the rest sharded); set parallelism.fsdp to "
				 "%lld (x cp) and dp_replicate for the remaining GPUs",
				 (long long)ep, (long long)t.fsdp, (long long)ep);
	t.ep = ep;
	if (sc->moe_imbalance > 0 && ep <= 1 && rm_model_config_is_moe(&out->model))
		rm_log_warn("training.moe_imbalance applies with parallelism.ep > 1 (every GPU runs every expert "
			    "otherwise): ignored");
	if (sc->moe_imbalance > 0) {
		/* a token's k copies go to k distinct experts: a GPU holding E / ep of them receives at
		 * most min(k, E / ep) copies of each of the group's tokens, ep x min(k, E / ep) / k times
		 * its balanced share */
		int64_t k = out->model.experts_per_tok > 0 ? out->model.experts_per_tok : 1;
		int64_t local = ep > 0 && out->model.experts > 0 ? out->model.experts / ep : 1;
		double most = (double)ep * (double)(k < local ? k : local) / (double)k;
		if (ep > 1 && sc->moe_imbalance > most)
			return key_error(sc, "training.moe_imbalance", err, RM_RANGE,
					 "moe_imbalance %g is more than a GPU can receive: ep %lld x min(top-k %lld, %lld "
					 "local experts) / %lld = %g times its share",
					 sc->moe_imbalance, (long long)ep, (long long)k, (long long)local, (long long)k, most);
		t.moe_imbalance = sc->moe_imbalance;
	}
	t.moe_capacity_factor = sc->moe_capacity_factor;
	/* the FSDP group: one GPU of each of F consecutive tensor-parallel groups; a node holds
	 * `slots` of its members */
	int64_t slots = tp < gpn ? gpn / tp : 1;
	int tp_nodes = tp > gpn ? (int)(tp / gpn) : 1;
	if (t.async_tp && tp_nodes > 1)
		return key_error(sc, "parallelism.async_tp", err, RM_INVALID,
				 "async tensor parallelism copies between the GPUs' memories over NVLink (symmetric "
				 "memory): the tensor-parallel group of %lld must fit in one node of %lld GPUs",
				 (long long)tp, (long long)gpn);
	int fsdp_nodes = t.fsdp <= slots ? 1 : (int)(t.fsdp / slots);
	if (t.fsdp > slots && t.fsdp % slots != 0)
		return key_error(sc, "parallelism.fsdp", err, RM_INVALID,
				 "an FSDP group across nodes must take whole nodes of %lld GPUs (got %lld)", (long long)gpn,
				 (long long)(t.fsdp * tp));
	if (t.dp_replicate > 1 && t.fsdp < slots && slots % t.fsdp != 0)
		return key_error(sc, "parallelism.fsdp", err, RM_INVALID,
				 "FSDP groups of %lld GPUs do not tile nodes of %lld GPUs: a group would straddle two "
				 "nodes",
				 (long long)(t.fsdp * tp), (long long)gpn);
	/* the replica group: one GPU of each tp x fsdp block, over the nodes the blocks tile */
	int64_t block_nodes = tp * t.fsdp > gpn ? tp * t.fsdp / gpn : 1;
	int64_t stage_nodes = sc->nodes / pp > 0 ? sc->nodes / pp : 1;
	int replica_nodes = (int)(stage_nodes / block_nodes > 0 ? stage_nodes / block_nodes : 1);
	if (sc->zero)
		t.zero = (int)sc->zero;
	if (t.zero < 3 && strcasecmp(sc->mode, "fsdp2") == 0)
		return key_error(sc, "parallelism.zero", err, RM_INVALID,
				 "zero %d applies to scheduler.mode xla or ideal: PyTorch FSDP2 shards the optimizer "
				 "state over the FSDP group (zero 3), replicated across dp_replicate",
				 t.zero);
	if (t.zero < 3 && t.dp_replicate == 1)
		rm_log_warn("parallelism.zero %d with one replica shards exactly as zero 3 does (over the %lld GPUs "
			    "of the FSDP group)",
			    t.zero, (long long)t.fsdp);
	int cp_nodes = tp * cp > gpn ? (int)(tp >= gpn ? cp : tp * cp / gpn) : 1;
	int ep_nodes = tp * ep > gpn ? (int)(tp >= gpn ? ep : tp * ep / gpn) : 1;
	if (sc->global_batch) {
		int64_t per_step = t.micro_batch * (t.fsdp / cp) * t.dp_replicate;
		if (sc->global_batch % per_step != 0)
			return key_error(sc, "training.global_batch", err, RM_INVALID,
					 "global_batch %lld is not a multiple of micro_batch %lld x %lld data-parallel "
					 "GPUs = %lld sequences per micro-batch step",
					 (long long)sc->global_batch, (long long)t.micro_batch,
					 (long long)(t.fsdp / cp * t.dp_replicate), (long long)per_step);
		int64_t accum = sc->global_batch / per_step;
		if (sc->grad_accum && sc->grad_accum != accum)
			return key_error(sc, "training.global_batch", err, RM_INVALID,
					 "global_batch %lld = micro_batch %lld x %lld data-parallel GPUs x %lld "
					 "micro-batches, but training.grad_accum says %lld",
					 (long long)sc->global_batch, (long long)t.micro_batch,
					 (long long)(t.fsdp / cp * t.dp_replicate), (long long)accum, (long long)sc->grad_accum);
		t.grad_accum = accum;
	}
	if (pp > 1 && t.pp_schedule == RM_PP_INTERLEAVED && t.grad_accum % pp != 0)
		return key_error(sc, sc->global_batch ? "training.global_batch" : "training.grad_accum", err, RM_INVALID,
				 "the interleaved schedule runs micro-batches in groups of the %lld stages: %lld "
				 "micro-batches are not a multiple",
				 (long long)pp, (long long)t.grad_accum);
	/* the program holds L x grad_accum copies of a layer's ops (each micro-batch has its own
	 * tensors): bound it so a scenario cannot ask for gigabytes of schedule (a pipelined step
	 * simulates one micro-batch through one stage) */
	if (t.pp <= 1 && out->model.layers * t.grad_accum > RM_SCENARIO_MAX_LAYER_STEPS)
		return key_error(sc, sc->global_batch ? "training.global_batch" : sc->grad_accum ? "training.grad_accum" : "model", err, RM_RANGE,
				 "%lld layers x grad_accum %lld = %lld layer passes per step, over the %d remora "
				 "simulates in one program; lower training.grad_accum (the step time scales "
				 "linearly with it past a few micro-batches)",
				 (long long)out->model.layers, (long long)t.grad_accum,
				 (long long)(out->model.layers * t.grad_accum), RM_SCENARIO_MAX_LAYER_STEPS);
	/* FSDP2 shards fp32 parameters and gathers bf16 copies (MixedPrecisionPolicy) */
	t.master_shards = strcasecmp(sc->mode, "fsdp2") == 0;
	out->train = t;
	/* the NCCL model of the FSDP group: calibrated fits for this topology, the scenario's version */
	{
		rm_nccl_model nccl;
		if (resolver(hw_spec, sc->nccl_version[0] ? sc->nccl_version : NULL, (int)t.fsdp, fsdp_nodes, &out->hw,
			     &nccl, err) != RM_OK)
			return at_key(sc, sc->nccl_version[0] ? "scheduler.nccl_version" : hw_key, err);
		if (apply_hardware_overrides(sc, &out->hw, false, err) != RM_OK)
			return err ? err->status : RM_INVALID;
		nccl.hw.nic_GBps = out->hw.nic_GBps; /* cluster.nics_per_node, cluster.nic_gbps */
		nccl.hw.nvlink_mesh_gpus = out->hw.nvlink_mesh_gpus; /* cluster.nvlink_mesh */
		if (nccl_buffers(sc, &nccl, err) != RM_OK)
			return err ? err->status : RM_INVALID;
		if (build_fabric(sc, &out->hw, &nccl.fabric, err) != RM_OK)
			return err ? err->status : RM_INVALID;
		rm_cost_nccl_init(&out->cost, &nccl);
	}
	if (rm_scenario_key_pos(sc, "memory_headroom_gib")) {
		double hb = sc->memory_headroom_gib * (double)RM_GiB;
		if (!(hb >= 0))
			return key_error(sc, "memory_headroom_gib", err, RM_RANGE,
					 "memory_headroom_gib must be at least 0, got %g", sc->memory_headroom_gib);
		if (!(hb < out->hw.hbm_bytes))
			return key_error(sc, "memory_headroom_gib", err, RM_RANGE,
					 "memory_headroom_gib %g is not below the %.2f GiB of HBM of %s",
					 sc->memory_headroom_gib, out->hw.hbm_bytes / (double)RM_GiB, out->hw.name);
		out->memory = rm_memory_budget_with_headroom(&out->hw, (int)t.fsdp, fsdp_nodes, (int64_t)hb);
	} else {
		out->memory = rm_memory_budget_default(&out->hw, (int)t.fsdp, fsdp_nodes);
		/* each further communicator (expert, context, tensor parallel; the replicas) holds
		 * its own NCCL buffers: a group of one holds none */
		const struct {
			int64_t ranks;
			int nodes;
		} groups[] = {{ep, ep_nodes}, {cp, cp_nodes}, {tp, tp_nodes}, {t.dp_replicate, replica_nodes}};
		for (size_t g = 0; g < RM_ARRAY_SIZE(groups); g++) {
			int64_t b = rm_memory_budget_default(&out->hw, (int)groups[g].ranks, groups[g].nodes).nccl_buffer_bytes;
			out->memory.nccl_buffer_bytes += b;
			out->memory.headroom_bytes += b;
			out->memory.usable_bytes -= b;
		}
		if (out->memory.usable_bytes <= 0)
			return key_error(sc, rm_scenario_key_pos(sc, "hardware.hbm_gib") ? "hardware.hbm_gib" : "hardware", err, RM_RANGE,
					 "%.2f GiB of HBM leave nothing for tensors: the CUDA context, NCCL buffers and "
					 "cuBLASLt workspace take %.2f GiB",
					 out->hw.hbm_bytes / (double)RM_GiB, out->memory.headroom_bytes / (double)RM_GiB);
	}
	out->wl = rm_workload_create(&out->model, &out->train, err);
	if (!out->wl)
		/* a size past what remora represents comes from the model when no training key set it */
		return at_key(sc, err->status == RM_RANGE && !section_key_pos(sc, "training", err->msg) ? "model" : "training",
			      err);
	char expr[4096];
	if (build_policy_text(sc, expr, sizeof(expr), err) != RM_OK) {
		rm_scenario_resolved_finish(out);
		return err ? err->status : RM_INVALID;
	}
	out->policy = rm_remat_policy_parse(expr, err);
	if (!out->policy) {
		rm_scenario_resolved_finish(out);
		if (err) {
			/* quote the expression, shortened around nothing: the column says where */
			char shown[96];
			size_t n = strlen(expr);
			if (n < sizeof(shown))
				snprintf(shown, sizeof(shown), "%s", expr);
			else
				snprintf(shown, sizeof(shown), "%.*s...", (int)sizeof(shown) - 4, expr);
			rm_error_prefix(err, "at column %d of \"%s\": ", err->column, shown);
		}
		return at_key(sc, "remat.policy", err);
	}
	/* the version's defaults, then the user's flags on top (docs/xla-versions.md) */
	int xla_version = sc->xla_version[0] ? rm_xla_version_find(sc->xla_version) : rm_scenario_key_pos(sc, "xla.version") ? -1 : 0;
	if (xla_version < 0) {
		char known[256];
		rm_scenario_resolved_finish(out);
		return key_error(sc, "xla.version", err, RM_INVALID, "unknown version \"%s\" (known: %s)", sc->xla_version,
				 rm_xla_version_list(known, sizeof(known)));
	}
	/* Hopper or newer: the profiles with FP8 tensor cores (A100 has none), where XLA's SoL
	 * estimator applies (SolLatencyEstimator::IsSupportedForModule) */
	out->flags = rm_xla_flags_for_version(xla_version, out->hw.fp8_TFLOPs > 0);
	if (rm_xla_flags_parse(sc->xla_flags, &out->flags, err) != RM_OK) {
		rm_scenario_resolved_finish(out);
		return at_key(sc, "xla_flags", err);
	}
	rm_schedule_config *c = &out->sched;
	*c = rm_schedule_config_default(out->wl, out->policy, &out->hw);
	c->flags = out->flags;
	c->fsdp_nodes = fsdp_nodes;
	c->replica_nodes = replica_nodes;
	c->tp_nodes = tp_nodes;
	c->cp_nodes = cp_nodes;
	c->ep_nodes = ep_nodes;
	c->scan = sc->scan;
	if (strcasecmp(sc->mode, "xla") == 0)
		c->mode = RM_SCHED_XLA;
	else if (strcasecmp(sc->mode, "ideal") == 0)
		c->mode = RM_SCHED_IDEAL;
	else if (strcasecmp(sc->mode, "fsdp2") == 0)
		c->mode = RM_SCHED_FSDP2;
	else if (strcasecmp(sc->mode, "megatron") == 0) {
		/* Megatron-LM: PyTorch with Transformer Engine's kernels, its DDP (or distributed
		 * optimizer) on a PyTorch stream of its own: the fsdp2 runtime without FSDP */
		c->mode = RM_SCHED_FSDP2;
		c->megatron = true;
		c->grad_sync_last = true; /* the gradient buckets reduce in the last micro-batch */
	} else {
		rm_scenario_resolved_finish(out);
		return key_error(sc, "scheduler.mode", err, RM_INVALID, "expected xla, ideal, fsdp2 or megatron, got \"%s\"",
				 sc->mode);
	}
	c->overlap_grad_reduce = sc->overlap_grad_reduce != 0;
	c->overlap_param_gather = sc->overlap_param_gather != 0;
	{
		static const char *const mkeys[] = {"scheduler.overlap_grad_reduce", "scheduler.overlap_param_gather"};
		for (size_t i = 0; i < RM_ARRAY_SIZE(mkeys); i++)
			if (!c->megatron && rm_scenario_key_pos(sc, mkeys[i])) {
				rm_scenario_resolved_finish(out);
				return key_error(sc, mkeys[i], err, RM_INVALID, "applies to scheduler.mode megatron (Megatron-LM's "
						 "--overlap-grad-reduce, --overlap-param-gather)");
			}
	}
	/* PyTorch runs its layers as Python code: there is no scan to keep stacked residuals */
	if (c->mode == RM_SCHED_FSDP2) {
		if (rm_scenario_key_pos(sc, "remat.scan") && sc->scan)
			rm_log_warn("remat.scan: true has no effect under scheduler.mode fsdp2 (PyTorch runs its layers "
				    "unrolled)");
		if (sc->xla_flags[0])
			rm_log_warn("xla_flags have no effect under scheduler.mode %s", c->megatron ? "megatron" : "fsdp2");
		c->scan = false;
	}
	if (c->mode != RM_SCHED_XLA) {
		/* JAX's client settings and jax.checkpoint's barrier shape XLA's schedule only */
		static const char *const xla_only[] = {"xla.mem_fraction", "xla.allocator", "xla.donate", "remat.prevent_cse"};
		for (size_t i = 0; i < RM_ARRAY_SIZE(xla_only); i++)
			if (rm_scenario_key_pos(sc, xla_only[i]))
				rm_log_warn("%s has no effect under scheduler.mode %s", xla_only[i], rm_sched_mode_name(c->mode));
	}
	c->recompute_num_layers = (int)sc->recompute_num_layers;
	/* Megatron-LM's --recompute-method: block recomputes the first recompute_num_layers layers
	 * (what remora models); uniform checkpoints the input of every group of that many layers
	 * and recomputes the group at once, which is per-layer full recompute only for groups of 1 */
	if (sc->recompute_method[0]) {
		bool uniform = strcasecmp(sc->recompute_method, "uniform") == 0;
		if (!uniform && strcasecmp(sc->recompute_method, "block") != 0) {
			rm_scenario_resolved_finish(out);
			return key_error(sc, "remat.recompute_method", err, RM_INVALID, "expected uniform or block, got \"%s\"",
					 sc->recompute_method);
		}
		if (uniform && sc->recompute_num_layers > 1) {
			rm_scenario_resolved_finish(out);
			return key_error(sc, "remat.recompute_method", err, RM_UNSUPPORTED,
					 "uniform groups of %lld layers are not modelled (each layer recomputes from its own "
					 "input); use recompute_num_layers 1, or block",
					 (long long)sc->recompute_num_layers);
		}
		if (uniform)
			c->recompute_num_layers = 0; /* every layer, from its own input */
	}
	/* jax.checkpoint's and flax nn.remat's default */
	c->prevent_cse = sc->prevent_cse != 0;
	if (sc->reshard_after_forward >= 0) {
		if (c->mode != RM_SCHED_FSDP2) {
			const char *mode = rm_sched_mode_name(c->mode);
			rm_scenario_resolved_finish(out);
			return key_error(sc, "scheduler.reshard_after_forward", err, RM_INVALID,
					 "applies to scheduler.mode fsdp2 (FSDP2's fully_shard option), not %s", mode);
		}
		c->reshard_after_forward = sc->reshard_after_forward;
	}
	if (sc->gradient_sync[0]) {
		bool last = strcasecmp(sc->gradient_sync, "last_micro_batch") == 0;
		if (!last && strcasecmp(sc->gradient_sync, "every_micro_batch") != 0) {
			rm_scenario_resolved_finish(out);
			return key_error(sc, "scheduler.gradient_sync", err, RM_INVALID,
					 "expected every_micro_batch or last_micro_batch, got \"%s\"", sc->gradient_sync);
		}
		if (last && c->mode != RM_SCHED_FSDP2) {
			const char *mode = rm_sched_mode_name(c->mode);
			rm_scenario_resolved_finish(out);
			return key_error(sc, "scheduler.gradient_sync", err, RM_INVALID,
					 "last_micro_batch applies to scheduler.mode fsdp2 (FSDP2's "
					 "set_requires_gradient_sync), not %s",
					 mode);
		}
		c->grad_sync_last = last;
	}
	if (c->recompute_num_layers > 0 && c->recompute_num_layers < out->model.layers && c->scan) {
		int64_t layers = out->model.layers;
		rm_scenario_resolved_finish(out);
		return key_error(sc, "remat.recompute_num_layers", err, RM_INVALID,
				 "recompute_num_layers %lld of %lld layers needs remat.scan: false (a scan runs one "
				 "body, with one policy, for every layer)",
				 (long long)sc->recompute_num_layers, (long long)layers);
	}
	/* the kernels the runtime launches (docs/sim.md "Kernel model") */
	rm_kernel_config *kc = &out->cost.kernels;
	*kc = rm_kernel_config_default();
	if (c->megatron) {
		/* Transformer Engine: cuDNN fused attention and fused norm, rotary, bias-activation
		 * and softmax kernels, launched from Python (no torch.compile) */
		kc->attention = RM_ATTN_CUDNN;
		if (sc->compile > 0) {
			rm_scenario_resolved_finish(out);
			return key_error(sc, "training.compile", err, RM_INVALID,
					 "scheduler.mode megatron runs Transformer Engine's fused kernels, not torch.compile");
		}
		out->compile = false;
		kc->fused = true;
		kc->host_us = EAGER_HOST_US;
		c->compile_partitioner = false;
		c->eager = false;
	} else if (c->mode == RM_SCHED_FSDP2) {
		/* PyTorch: SDPA's flash (FlashAttention-2) backend by default; eager unless compiled */
		kc->attention = RM_ATTN_FLASH2;
		out->compile = sc->compile > 0;
		kc->fused = out->compile;
		/* eager: ~6 us of host time per op with autograd (docs/reference/kernels-h100.md
		 * section 5: 5-7 us); compiled kernels: the raw launch */
		kc->host_us = out->compile ? 0 : EAGER_HOST_US;
		c->compile_partitioner = out->compile;
		c->eager = !out->compile;
	} else {
		/* XLA fuses; ideal is the bound of a fused runtime with XLA's kernels, so that a
		 * search's ideal rows price the same kernels as its XLA rows */
		out->compile = true;
		if (sc->compile == 0) {
			const char *mode = rm_sched_mode_name(c->mode);
			rm_scenario_resolved_finish(out);
			return key_error(sc, "training.compile", err, RM_INVALID,
					 "false applies to scheduler.mode fsdp2 (PyTorch eager); scheduler.mode %s "
					 "always runs fused kernels",
					 mode);
		}
	}
	if (sc->attention_kernel[0] && strcasecmp(sc->attention_kernel, "auto") != 0 &&
	    !rm_attention_kernel_parse(sc->attention_kernel, &kc->attention)) {
		rm_scenario_resolved_finish(out);
		return key_error(sc, "training.attention_kernel", err, RM_INVALID,
				 "expected auto, flash2, flash3 or cudnn, got \"%s\"", sc->attention_kernel);
	}
	/* sm: NCCL's kernels, one CTA per channel on its own SM; copy_engine: all-gathers on the
	 * copy engines, zero SMs (docs/sim.md "SM grants", docs/scenarios.md) */
	if (strcasecmp(sc->collective_engine, "copy_engine") == 0) {
		kc->ce_collectives = true;
	} else if (strcasecmp(sc->collective_engine, "sm") != 0) {
		rm_scenario_resolved_finish(out);
		return key_error(sc, "scheduler.collective_engine", err, RM_INVALID, "expected sm or copy_engine, got \"%s\"",
				 sc->collective_engine);
	}
	/* FP8 tensor cores and FlashAttention-3 are Hopper's; a profile without FP8 (A100) has neither */
	if (out->hw.fp8_TFLOPs <= 0 && (out->train.gemm_dtype == RM_DTYPE_FP8_E4M3 || kc->attention == RM_ATTN_FLASH3)) {
		bool fp8 = out->train.gemm_dtype == RM_DTYPE_FP8_E4M3;
		char name[64];
		snprintf(name, sizeof(name), "%s", out->hw.name);
		rm_scenario_resolved_finish(out);
		return key_error(sc, fp8 ? "training.gemm_dtype" : "training.attention_kernel", err, RM_UNSUPPORTED,
				 "%s needs Hopper (FP8 tensor cores, TMA); %s has none", fp8 ? "fp8" : "flash3", name);
	}
	c->prefetch_depth = (int)sc->prefetch_depth;
	if (strcasecmp(sc->cost_model, "xla_default") == 0)
		c->lhs_cost = RM_LHS_COST_XLA_DEFAULT;
	else if (strcasecmp(sc->cost_model, "remora") == 0)
		c->lhs_cost = RM_LHS_COST_REMORA;
	else {
		rm_scenario_resolved_finish(out);
		return key_error(sc, "scheduler.cost_model", err, RM_INVALID, "expected xla_default or remora, got \"%s\"",
				 sc->cost_model);
	}
	c->device_memory_bytes = (int64_t)(sc->device_memory_gib * (double)RM_GiB);
	/* JAX's device allocator: the BFC allocator's limit (XLA_PYTHON_CLIENT_MEM_FRACTION) is what
	 * JAX passes XLA as device_memory_size; the platform allocator passes none */
	if (strcasecmp(sc->xla_allocator, "platform") == 0) {
		c->platform_allocator = true;
	} else if (strcasecmp(sc->xla_allocator, "bfc") != 0) {
		rm_scenario_resolved_finish(out);
		return key_error(sc, "xla.allocator", err, RM_INVALID,
				 "expected bfc (XLA_PYTHON_CLIENT_ALLOCATOR default) or platform, got \"%s\"", sc->xla_allocator);
	}
	if (sc->xla_mem_fraction >= 0 && !(sc->xla_mem_fraction > 0)) {
		rm_scenario_resolved_finish(out);
		return key_error(sc, "xla.mem_fraction", err, RM_RANGE,
				 "expected a fraction of HBM above 0 and at most 1 (XLA_PYTHON_CLIENT_MEM_FRACTION), got 0");
	}
	if (sc->xla_mem_fraction > 0 && c->platform_allocator) {
		rm_scenario_resolved_finish(out);
		return key_error(sc, "xla.mem_fraction", err, RM_INVALID,
				 "the platform allocator (xla.allocator: platform) preallocates nothing and takes no "
				 "fraction; drop one of the two");
	}
	c->mem_fraction = sc->xla_mem_fraction > 0 ? sc->xla_mem_fraction : 0;
	c->no_donate = sc->xla_donate == 0;
	/* auto: what each runtime's users read (docs/sim.md "Reserved memory") */
	if (strcasecmp(sc->allocator, "auto") == 0)
		out->allocator = c->mode != RM_SCHED_XLA ? RM_SIM_ALLOC_PYTORCH
				 : c->platform_allocator ? RM_SIM_ALLOC_PLATFORM
							 : RM_SIM_ALLOC_JAX_PREALLOC;
	else if (!rm_sim_allocator_from_name(sc->allocator, &out->allocator)) {
		rm_scenario_resolved_finish(out);
		return key_error(sc, "scheduler.allocator", err, RM_INVALID,
				 "expected auto, pytorch, pytorch_expandable, jax, exact or platform, got \"%s\"", sc->allocator);
	}
	out->alloc_fraction = c->mem_fraction > 0 ? c->mem_fraction : RM_SIM_JAX_MEM_FRACTION;
	out->hw_queues = (int)sc->hw_queues;
	/* the pointers inside sched refer to out's own members */
	c->wl = out->wl;
	c->policy = out->policy;
	c->hw = &out->hw;
	c->cost = &out->cost.base;
	return RM_OK;
}
