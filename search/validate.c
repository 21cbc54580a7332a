/* Validation cases (remora/validate.h): the case reader, the run of one case, the summary. */
#include <errno.h>
#include <libfyaml.h>
#include <libgen.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fy_util.h"
#include "remora/schedule.h"
#include "remora/sim.h"
#include "remora/pipeline.h"
#include "remora/validate.h"
#include "remora/workload.h"

static const char *const mfu_names[] = {
#define RM_MFU_CONVENTION_NAME(name, text) text,
	RM_MFU_CONVENTIONS(RM_MFU_CONVENTION_NAME)
#undef RM_MFU_CONVENTION_NAME
};

static const char *const memory_names[] = {
#define RM_MEMORY_KIND_NAME(name, text) text,
	RM_MEMORY_KINDS(RM_MEMORY_KIND_NAME)
#undef RM_MEMORY_KIND_NAME
};

const char *rm_mfu_convention_name(rm_mfu_convention c)
{
	return (unsigned)c < RM_ARRAY_SIZE(mfu_names) ? mfu_names[c] : "?";
}

const char *rm_memory_kind_name(rm_memory_kind k)
{
	return (unsigned)k < RM_ARRAY_SIZE(memory_names) ? memory_names[k] : "?";
}

double rm_measured_mid(rm_measured m)
{
	return m.set ? 0.5 * (m.low + m.high) : NAN;
}

/* ---- the case reader ---- */

typedef struct creader {
	const char *path, *text;
	size_t len;
	bool json;
	rm_error *err;
} creader;

/* Where a node starts: a scalar by its token, a mapping or list by its '{', '[' or first entry. */
static void pos_of(const creader *r, struct fy_node *n, int *line, int *col)
{
	rm__fy_node_start(r->text, r->len, r->json, n, line, col);
}

static rm_status fail(const creader *r, struct fy_node *n, rm_status st, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static rm_status fail(const creader *r, struct fy_node *n, rm_status st, const char *fmt, ...)
{
	char msg[700];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	int line = 1, col = 1;
	if (n)
		pos_of(r, n, &line, &col);
	return rm_error_set(r->err, st, r->path, line, col, "%s", msg);
}

static const char *scalar(struct fy_node *n)
{
	return n && fy_node_is_scalar(n) ? fy_node_get_scalar0(n) : NULL;
}

static rm_status get_string(const creader *r, struct fy_node *n, const char *key, char *dst, size_t size)
{
	const char *t = scalar(n);
	if (!t || !*t)
		return fail(r, n, RM_INVALID, "%s: expected a non-empty string", key);
	if (strlen(t) >= size)
		return fail(r, n, RM_RANGE, "%s: longer than %zu characters", key, size - 1);
	snprintf(dst, size, "%s", t);
	return RM_OK;
}

static rm_status get_strings(const creader *r, struct fy_node *n, const char *key, char *dst, size_t item_size,
			     int *count)
{
	if (!n || !fy_node_is_sequence(n))
		return fail(r, n, RM_INVALID, "%s: expected a list of strings", key);
	int items = fy_node_sequence_item_count(n);
	if (items > RM_VALIDATION_MAX_ITEMS)
		return fail(r, n, RM_RANGE, "%s: more than %d items", key, RM_VALIDATION_MAX_ITEMS);
	for (int i = 0; i < items; i++) {
		char what[64];
		snprintf(what, sizeof(what), "%s[%d]", key, i);
		RM_CHECK(get_string(r, fy_node_sequence_get_by_index(n, i), what, dst + (size_t)i * item_size, item_size));
	}
	*count = items;
	return RM_OK;
}

/* A positive finite number written as a plain scalar. */
static bool to_number(struct fy_node *n, double *out)
{
	const char *t = n && fy_node_is_scalar(n) && fy_node_get_style(n) == FYNS_PLAIN ? scalar(n) : NULL;
	if (!t || !*t)
		return false;
	errno = 0;
	char *end = NULL;
	double v = strtod(t, &end);
	if (errno == ERANGE || *end || !isfinite(v))
		return false;
	*out = v;
	return true;
}

/* A measured figure: a number, or [low, high] with min <= low <= high <= max. */
static rm_status get_measured(const creader *r, struct fy_node *n, const char *key, double min, double max,
			      rm_measured *out)
{
	char bound[64];
	snprintf(bound, sizeof(bound), " from %g to %g", min, max);
	double lo, hi;
	if (n && fy_node_is_sequence(n)) {
		if (fy_node_sequence_item_count(n) != 2)
			return fail(r, n, RM_INVALID, "%s: a range is written [low, high], two numbers", key);
		struct fy_node *a = fy_node_sequence_get_by_index(n, 0), *b = fy_node_sequence_get_by_index(n, 1);
		if (!to_number(a, &lo) || !(lo >= min) || !(lo > 0) || lo > max)
			return fail(r, a, RM_INVALID, "%s: expected a number%s", key, bound);
		if (!to_number(b, &hi) || !(hi >= min) || !(hi > 0) || hi > max)
			return fail(r, b, RM_INVALID, "%s: expected a number%s", key, bound);
		if (hi < lo)
			return fail(r, a, RM_INVALID, "%s: the range [%g, %g] has its low end above its high end", key, lo,
				    hi);
	} else {
		if (!to_number(n, &lo) || !(lo >= min) || !(lo > 0) || lo > max)
			return fail(r, n, RM_INVALID, "%s: expected a number%s or a range [low, high]", key, bound);
		hi = lo;
	}
	out->set = true;
	out->low = lo;
	out->high = hi;
	return RM_OK;
}

static rm_status unknown_key(const creader *r, struct fy_node *k, const char *prefix, const char *name,
			     const char *const *known, size_t n)
{
	char list[512] = "";
	for (size_t i = 0; i < n; i++) {
		size_t used = strlen(list);
		snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "", known[i]);
	}
	return fail(r, k, RM_UNKNOWN_KEY, "unknown key \"%s%s\" (known here: %s)", prefix, name, list);
}

static int key_index(const char *name, const char *const *known, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(name, known[i]) == 0)
			return (int)i;
	return -1;
}

enum { M_TOKENS, M_MFU, M_MFU_CONVENTION, M_MEMORY_GIB, M_MEMORY_FRACTION, M_MEMORY_KIND, M_DEVICE_MEMORY };
static const char *const measured_keys[] = {"tokens_per_s_per_gpu", "mfu", "mfu_convention", "memory_gib",
					    "memory_fraction", "memory_kind", "device_memory_gib"};

static rm_status parse_measured(const creader *r, struct fy_node *map, rm_validation_case *c)
{
	if (!fy_node_is_mapping(map))
		return fail(r, map, RM_INVALID, "measured: expected a mapping (tokens_per_s_per_gpu, ...)");
	struct fy_node *at[RM_ARRAY_SIZE(measured_keys)] = {0};
	void *iter = NULL;
	struct fy_node_pair *pair;
	while ((pair = fy_node_mapping_iterate(map, &iter)) != NULL) {
		struct fy_node *kn = fy_node_pair_key(pair), *vn = fy_node_pair_value(pair);
		const char *k = scalar(kn);
		int i = k ? key_index(k, measured_keys, RM_ARRAY_SIZE(measured_keys)) : -1;
		if (i < 0)
			return unknown_key(r, kn, "measured.", k ? k : "", measured_keys, RM_ARRAY_SIZE(measured_keys));
		if (!vn)
			return fail(r, kn, RM_INVALID, "measured.%s: missing value", k);
		at[i] = vn;
	}
	if (!at[M_TOKENS])
		return fail(r, map, RM_MISSING, "measured: missing required key \"tokens_per_s_per_gpu\" (a number or "
						"a range [low, high])");
	/* a GPU trains between 1 and 10^8 tokens per second (an H100 peaks near 10^6 for 100M models) */
	RM_CHECK(get_measured(r, at[M_TOKENS], "measured.tokens_per_s_per_gpu", 1, 1e8, &c->tokens_per_s_per_gpu));
	if (at[M_MFU]) {
		RM_CHECK(get_measured(r, at[M_MFU], "measured.mfu", 1e-4, 1.0, &c->mfu));
		if (!at[M_MFU_CONVENTION])
			return fail(r, at[M_MFU], RM_MISSING,
				    "measured.mfu: say how it was counted with measured.mfu_convention (palm_noncausal "
				    "or remora)");
	}
	if (at[M_MFU_CONVENTION]) {
		const char *t = scalar(at[M_MFU_CONVENTION]);
		int i = t ? key_index(t, mfu_names, RM_ARRAY_SIZE(mfu_names)) : -1;
		if (i < 0)
			return fail(r, at[M_MFU_CONVENTION], RM_INVALID,
				    "measured.mfu_convention: expected palm_noncausal or remora");
		if (!at[M_MFU])
			return fail(r, at[M_MFU_CONVENTION], RM_INVALID, "measured.mfu_convention: given without measured.mfu");
		c->mfu_convention = (rm_mfu_convention)i;
	}
	struct fy_node *kind = at[M_MEMORY_KIND];
	struct fy_node *value = at[M_MEMORY_GIB] ? at[M_MEMORY_GIB] : at[M_MEMORY_FRACTION];
	if (at[M_MEMORY_GIB] && at[M_MEMORY_FRACTION])
		return fail(r, at[M_MEMORY_FRACTION], RM_INVALID,
			    "measured: memory_gib and memory_fraction both given; one figure per case");
	if (value && !kind)
		return fail(r, value, RM_MISSING,
			    "measured: say what the memory figure is with measured.memory_kind (reserved, allocated "
			    "or active_fraction)");
	if (kind) {
		const char *t = scalar(kind);
		int i = t ? key_index(t, memory_names, RM_ARRAY_SIZE(memory_names)) : -1;
		if (i <= RM_MEMORY_NONE)
			return fail(r, kind, RM_INVALID, "measured.memory_kind: expected reserved, allocated or active_fraction");
		c->memory_kind = (rm_memory_kind)i;
		bool fraction = c->memory_kind == RM_MEMORY_ACTIVE_FRACTION;
		if (!value)
			return fail(r, kind, RM_MISSING, "measured.memory_kind: given without measured.%s",
				    fraction ? "memory_fraction" : "memory_gib");
		if (fraction && !at[M_MEMORY_FRACTION])
			return fail(r, value, RM_INVALID,
				    "measured.memory_gib: memory_kind active_fraction is a fraction of the device's "
				    "memory: write it as measured.memory_fraction (0-1)");
		if (!fraction && !at[M_MEMORY_GIB])
			return fail(r, value, RM_INVALID,
				    "measured.memory_fraction: only memory_kind active_fraction is a fraction; write "
				    "%s memory as measured.memory_gib",
				    t);
		RM_CHECK(get_measured(r, value, fraction ? "measured.memory_fraction" : "measured.memory_gib",
				      fraction ? 1e-4 : 1e-3, fraction ? 1.0 : 1 << 20, &c->memory));
	}
	if (at[M_DEVICE_MEMORY]) {
		if (c->memory_kind != RM_MEMORY_ACTIVE_FRACTION)
			return fail(r, at[M_DEVICE_MEMORY], RM_INVALID,
				    "measured.device_memory_gib: only a memory_kind active_fraction figure needs it");
		double v;
		if (!to_number(at[M_DEVICE_MEMORY], &v) || !(v >= 1) || v > 1 << 20)
			return fail(r, at[M_DEVICE_MEMORY], RM_INVALID,
				    "measured.device_memory_gib: expected a number of GiB from 1 to 1048576");
		c->device_memory_gib = v;
	}
	return RM_OK;
}

enum { C_NAME, C_SOURCE, C_ASSUMED, C_NOTES, C_SCENARIO, C_SET, C_MEASURED };
static const char *const case_keys[] = {"name", "source", "assumed", "notes", "scenario", "set", "measured"};

/* Applies the case's overrides; a bad one is reported at its item. */
static rm_status apply_sets(const creader *r, struct fy_node *list, rm_validation_case *c)
{
	for (int i = 0; i < c->n_sets; i++) {
		struct fy_node *item = fy_node_sequence_get_by_index(list, i);
		pos_of(r, item, &c->set_line[i], &c->set_column[i]);
		rm_error e;
		rm_error_clear(&e);
		if (rm_scenario_set(&c->scenario, c->sets[i], &e) != RM_OK) {
			/* "--set K=V: msg" or "--set: ..." reads as the case's set[i] */
			const char *msg = strncmp(e.msg, "--set ", 6) == 0 ? e.msg + 6
					  : strncmp(e.msg, "--set", 5) == 0 ? e.msg + 5 : e.msg;
			while (*msg == ':' || *msg == ' ')
				msg++;
			return fail(r, item, e.status, "set[%d]: %s", i, msg);
		}
	}
	return RM_OK;
}

/*
 * A resolution error about a key an override set has no position in the scenario ("KEY (from
 * --set KEY): ...", remora/scenario.h): it is re-anchored at the override's item in the case.
 */
static void anchor_at_set(const rm_validation_case *c, rm_error *err)
{
	if (!err || err->line != 0)
		return;
	for (int i = 0; i < c->n_sets; i++) {
		char key[256], prefix[600];
		snprintf(key, sizeof(key), "%s", c->sets[i]);
		char *eq = strchr(key, '=');
		if (!eq)
			continue;
		*eq = '\0';
		if (eq > key && eq[-1] == '+')
			eq[-1] = '\0';
		snprintf(prefix, sizeof(prefix), "%s (from --set %s): ", key, key);
		size_t n = strlen(prefix);
		if (strncmp(err->msg, prefix, n) != 0)
			continue;
		char msg[sizeof(err->msg)];
		snprintf(msg, sizeof(msg), "set[%d]: %s: %s", i, key, err->msg + n);
		rm_error_set(err, err->status, c->path, c->set_line[i], c->set_column[i], "%s", msg);
		return;
	}
}

static rm_status parse_scenario(const creader *r, struct fy_node *n, rm_validation_case *c)
{
	rm_scenario_init(&c->scenario);
	if (fy_node_is_mapping(n))
		return rm_scenario_parse_at(r->text, r->len, r->path, "/scenario", &c->scenario, r->err);
	const char *file = scalar(n);
	if (!file || !*file)
		return fail(r, n, RM_INVALID, "scenario: expected a scenario file (relative to this file) or a mapping "
					      "of scenario keys");
	char tmp[512];
	snprintf(tmp, sizeof(tmp), "%s", r->path);
	const char *dir = dirname(tmp);
	if (file[0] == '/')
		snprintf(c->scenario_file, sizeof(c->scenario_file), "%s", file);
	else
		snprintf(c->scenario_file, sizeof(c->scenario_file), "%s/%s", dir, file);
	rm_error e;
	rm_error_clear(&e);
	rm_status st = rm_scenario_load(c->scenario_file, &c->scenario, &e);
	if (st == RM_OK)
		return RM_OK;
	/* a file that cannot be read is reported where the case names it */
	if (e.line == 0)
		return fail(r, n, st, "scenario: %s: %s", c->scenario_file, e.msg);
	if (r->err)
		*r->err = e;
	return st;
}

static rm_status parse_case(const creader *r, struct fy_node *root, rm_validation_case *c)
{
	if (!root || !fy_node_is_mapping(root))
		return fail(r, root, RM_PARSE, "expected a mapping of case keys (name, source, scenario, measured, ...)");
	struct fy_node *at[RM_ARRAY_SIZE(case_keys)] = {0};
	void *iter = NULL;
	struct fy_node_pair *pair;
	while ((pair = fy_node_mapping_iterate(root, &iter)) != NULL) {
		struct fy_node *kn = fy_node_pair_key(pair), *vn = fy_node_pair_value(pair);
		const char *k = scalar(kn);
		int i = k ? key_index(k, case_keys, RM_ARRAY_SIZE(case_keys)) : -1;
		if (i < 0)
			return unknown_key(r, kn, "", k ? k : "", case_keys, RM_ARRAY_SIZE(case_keys));
		if (!vn)
			return fail(r, kn, RM_INVALID, "%s: missing value", k);
		at[i] = vn;
	}
	static const char *const required[] = {"name", "source", "scenario", "measured"};
	static const int required_at[] = {C_NAME, C_SOURCE, C_SCENARIO, C_MEASURED};
	for (size_t i = 0; i < RM_ARRAY_SIZE(required); i++)
		if (!at[required_at[i]])
			return fail(r, root, RM_MISSING, "missing required key \"%s\" (a case has name, source, scenario "
							 "and measured)",
				    required[i]);
	RM_CHECK(get_string(r, at[C_NAME], "name", c->name, sizeof(c->name)));
	RM_CHECK(get_string(r, at[C_SOURCE], "source", c->source, sizeof(c->source)));
	if (at[C_NOTES])
		RM_CHECK(get_string(r, at[C_NOTES], "notes", c->notes, sizeof(c->notes)));
	if (at[C_ASSUMED])
		RM_CHECK(get_strings(r, at[C_ASSUMED], "assumed", c->assumed[0], sizeof(c->assumed[0]), &c->n_assumed));
	if (at[C_SET])
		RM_CHECK(get_strings(r, at[C_SET], "set", c->sets[0], sizeof(c->sets[0]), &c->n_sets));
	RM_CHECK(parse_measured(r, at[C_MEASURED], c));
	RM_CHECK(parse_scenario(r, at[C_SCENARIO], c));
	if (at[C_SET])
		RM_CHECK(apply_sets(r, at[C_SET], c));
	return RM_OK;
}

/* Whether text is nothing but blank lines and comments (an empty YAML stream). */
static bool blank_text(const char *text, size_t len)
{
	bool comment = false;
	for (size_t i = 0; i < len; i++) {
		char c = text[i];
		if (c == '\n' || c == '\r') {
			comment = false;
		} else if (!comment && c == '#') {
			comment = true;
		} else if (!comment && c != ' ' && c != '\t') {
			return false;
		}
	}
	return true;
}

static struct fy_document *parse_yaml(const creader *r)
{
	int line, col;
	unsigned ctl;
	if (rm__fy_find_control(r->text, r->len, &line, &col, &ctl)) {
		rm_error_set(r->err, RM_PARSE, r->path, line, col,
			     "invalid YAML: control character 0x%02X (YAML text holds none but tab and line breaks)", ctl);
		return NULL;
	}
	if (rm__fy_find_tab(r->text, r->len, &line, &col)) {
		rm_error_set(r->err, RM_PARSE, r->path, line, col,
			     "invalid YAML for remora: a tab (YAML indents with spaces; remora reads spaces only)");
		return NULL;
	}
	/* libfyaml 0.7.12 loops for ever on a directive line with malformed UTF-8 (common/fy_util.h) */
	if (!rm__fy_directives_are_ascii(r->text, r->len, &line, &col)) {
		rm_error_set(r->err, RM_PARSE, r->path, line, col,
			     "invalid YAML: a directive line (starting with '%%') may hold only printable ASCII");
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
		.flags = FYPCF_QUIET | FYPCF_COLLECT_DIAG | (r->json ? FYPCF_JSON_FORCE : FYPCF_DEFAULT_VERSION_AUTO),
		.diag = diag,
	};
	struct fy_document *doc = fy_document_build_from_string(&pcfg, r->text, r->len);
	if (!doc) {
		void *it = NULL;
		struct fy_diag_error *e = diag ? fy_diag_errors_iterate(diag, &it) : NULL;
		line = e ? e->line : 0;
		col = e ? e->column : 0;
		const char *what = e && e->msg ? e->msg : "syntax error";
		if ((!e || !e->msg) && rm__fy_find_bad_utf8(r->text, r->len, &line, &col))
			what = "malformed UTF-8 (YAML text is Unicode)";
		else if ((!e || !e->msg) && blank_text(r->text, r->len)) {
			line = col = 1;
			what = "the file holds no case, only blank lines or comments (docs/validate.md gives the format)";
		}
		rm_error_set(r->err, RM_PARSE, r->path, line, col, "%s: %s", r->json ? "invalid JSON" : "invalid YAML",
			     what);
	}
	struct fy_node *nul = doc ? rm__fy_find_nul_scalar(fy_document_root(doc)) : NULL;
	if (nul) {
		rm__fy_node_start(r->text, r->len, r->json, nul, &line, &col);
		rm_error_set(r->err, RM_PARSE, r->path, line, col,
			     "a string holds a NUL character (an escaped \\0 or \\u0000), which no key or value may");
		fy_document_destroy(doc);
		doc = NULL;
	}
	fy_diag_destroy(diag);
	return doc;
}

rm_status rm_validation_case_parse(const char *text, size_t len, const char *path, rm_validation_case *c,
				   rm_error *err)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->path, sizeof(c->path), "%s", path ? path : "");
	size_t plen = strlen(c->path);
	creader r = {.path = c->path, .text = text, .len = len, .json = plen > 5 && !strcmp(c->path + plen - 5, ".json"),
		     .err = err};
	struct fy_document *doc = parse_yaml(&r);
	if (!doc)
		return RM_PARSE;
	rm_status st = parse_case(&r, fy_document_root(doc), c);
	fy_document_destroy(doc);
	return st;
}

rm_status rm_validation_case_load(const char *path, rm_validation_case *c, rm_error *err)
{
	char *text = NULL;
	size_t len = 0;
	if (!rm_read_file(path, &text, &len, err))
		return err ? err->status : RM_IO;
	rm_status st = rm_validation_case_parse(text, len, path, c, err);
	free(text);
	return st;
}

/* ---- running a case ---- */

/* The engine metric a measured memory kind is compared with, and its name. PyTorch's reserved
 * memory is the caching allocator's segments: the engine's replay through the allocator model
 * the scenario resolves (scheduler.allocator; docs/sim.md "Reserved memory"). */
#define RESERVED_METRIC peak_reserved_bytes
#define METRIC_NAME_(m) #m
#define METRIC_NAME(m) METRIC_NAME_(m)

static int64_t predicted_memory(rm_memory_kind kind, const rm_sim_metrics *m, const char **metric)
{
	switch (kind) {
	case RM_MEMORY_RESERVED:
		*metric = METRIC_NAME(RESERVED_METRIC);
		return m->RESERVED_METRIC;
	case RM_MEMORY_ALLOCATED:
	case RM_MEMORY_ACTIVE_FRACTION: /* active blocks: the live tensors, allocated */
		*metric = "peak_memory_bytes";
		return m->peak_memory_bytes;
	default:
		*metric = NULL;
		return 0;
	}
}

static double error_pct(double predicted, double measured)
{
	return isfinite(measured) && measured > 0 ? 100.0 * (predicted - measured) / measured : NAN;
}

static void compare(const rm_validation_case *c, const rm_scenario_resolved *res, const rm_sim_metrics *m,
		    rm_validation_result *out)
{
	out->step_time_s = rm_time_to_s(m->step_time);
	out->tokens_per_s_per_gpu = m->tokens_per_s;
	out->measured_tokens_per_s_per_gpu = rm_measured_mid(c->tokens_per_s_per_gpu);
	out->tokens_error_pct = error_pct(out->tokens_per_s_per_gpu, out->measured_tokens_per_s_per_gpu);
	double peak = res->hw.bf16_TFLOPs * RM_TB;
	out->mfu_remora = m->mfu;
	out->mfu_palm_noncausal = peak > 0 ? m->tokens_per_s * rm_workload_model_flops_per_token(res->wl) / peak : 0;
	out->mfu = c->mfu_convention == RM_MFU_PALM_NONCAUSAL ? out->mfu_palm_noncausal : out->mfu_remora;
	out->measured_mfu = rm_measured_mid(c->mfu);
	out->mfu_excess_points = c->mfu.set ? 100.0 * (out->mfu - out->measured_mfu) : NAN;
	out->peak_memory_bytes = m->peak_memory_bytes;
	out->memory_usable_bytes = m->memory_usable_bytes;
	out->fits = m->fits;
	out->memory_bytes = predicted_memory(c->memory_kind, m, &out->memory_metric);
	out->device_memory_bytes = NAN;
	out->measured_memory_bytes = NAN;
	if (c->memory_kind == RM_MEMORY_ACTIVE_FRACTION) {
		out->device_memory_bytes = c->device_memory_gib > 0 ? c->device_memory_gib * (double)RM_GiB
								    : (double)m->memory_capacity_bytes;
		out->measured_memory_bytes = rm_measured_mid(c->memory) * out->device_memory_bytes;
	} else if (c->memory_kind != RM_MEMORY_NONE) {
		out->measured_memory_bytes = rm_measured_mid(c->memory) * (double)RM_GiB;
	}
	out->memory_error_pct = error_pct((double)out->memory_bytes, out->measured_memory_bytes);
}

rm_status rm_validation_run(const rm_validation_case *c, rm_hw_resolver resolver, rm_validation_result *out,
			    rm_error *err)
{
	memset(out, 0, sizeof(*out));
	rm_scenario_resolved res;
	if (rm_scenario_resolve(&c->scenario, resolver, &res, err) != RM_OK) {
		anchor_at_set(c, err);
		return err ? err->status : RM_INVALID;
	}
	rm_xla_flags_warn_unmodelled(&res.flags);
	rm_status st = RM_OK;
	rm_schedule_report rep;
	if (res.train.pp > 1) {
		/* a pipelined run, stage by stage (remora/pipeline.h); no allocator replay, so only
		 * allocated memory can be compared */
		if (c->memory_kind != RM_MEMORY_NONE && c->memory_kind != RM_MEMORY_ALLOCATED) {
			rm_scenario_resolved_finish(&res);
			return rm_error_set(err, RM_UNSUPPORTED, c->path, 0, 0,
					    "a pipelined case (parallelism.pp %lld) compares allocated memory only: "
					    "remora replays no allocator for a pipelined step; give measured.memory_kind "
					    "allocated, or no memory",
					    (long long)res.train.pp);
		}
		rm_pp_run pr;
		st = rm_pp_run_scenario(&res, &pr, err);
		if (st == RM_OK) {
			rm_sim_metrics m;
			memset(&m, 0, sizeof(m));
			m.step_time = rm_time_from_s(pr.step_s);
			m.tokens_per_s = pr.tokens_per_s;
			m.mfu = pr.mfu;
			m.peak_memory_bytes = m.peak_reserved_bytes = pr.peak_bytes[pr.peak_stage];
			m.memory_usable_bytes = pr.usable_bytes;
			m.memory_capacity_bytes = (int64_t)res.hw.hbm_bytes;
			m.fits = pr.fits;
			compare(c, &res, &m, out);
		}
		rm_scenario_resolved_finish(&res);
		return st;
	}
	rm_program *prog = rm_schedule_build(&res.sched, &rep, err);
	if (!prog) {
		st = err ? err->status : RM_INVALID;
		goto resolved;
	}
	/* the options `remora simulate` runs with (cli/cmd_simulate.c) */
	rm_sim_options opt = {.scheduler_built = true, .hw_queues = res.hw_queues, .cost = res.sched.cost,
			      .memory_headroom_bytes = res.memory.headroom_bytes,
			      .allocator = res.allocator, .alloc_fraction = res.alloc_fraction};
	rm_sim *s = rm_sim_create(prog, &res.hw, &opt, err);
	if (!s || rm_sim_run(s, err) != RM_OK) {
		st = err ? err->status : RM_INVALID;
		goto sim;
	}
	compare(c, &res, rm_sim_get_metrics(s), out);
sim:
	rm_sim_destroy(s);
	rm_program_destroy(prog);
	rm_schedule_report_finish(&rep);
resolved:
	rm_scenario_resolved_finish(&res);
	return st;
}

/* ---- summary ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double rm_validation_median_abs(const double *v, int n)
{
	double *a = rm_new(double, n > 0 ? (size_t)n : 1);
	int k = 0;
	for (int i = 0; i < n; i++)
		if (!isnan(v[i]))
			a[k++] = fabs(v[i]);
	double med = NAN;
	if (k > 0) {
		qsort(a, (size_t)k, sizeof(*a), cmp_double);
		med = k % 2 ? a[k / 2] : 0.5 * (a[k / 2 - 1] + a[k / 2]);
	}
	free(a);
	return med;
}

void rm_validation_summarize(const rm_validation_result *r, int n, rm_validation_summary *out)
{
	memset(out, 0, sizeof(*out));
	out->cases = n;
	out->worst = -1;
	out->worst_error_pct = NAN;
	double *tok = rm_new(double, n > 0 ? (size_t)n : 1), *mem = rm_new(double, n > 0 ? (size_t)n : 1);
	double worst = -1;
	for (int i = 0; i < n; i++) {
		tok[i] = r[i].tokens_error_pct;
		mem[i] = r[i].memory_error_pct;
		out->tokens_cases += !isnan(tok[i]);
		out->memory_cases += !isnan(mem[i]);
		bool bad = false;
		const double e[2] = {tok[i], mem[i]};
		for (int j = 0; j < 2; j++) {
			if (isnan(e[j]))
				continue;
			bad |= fabs(e[j]) > RM_VALIDATION_BAD_ERROR_PCT;
			if (fabs(e[j]) > worst) {
				worst = fabs(e[j]);
				out->worst = i;
				out->worst_metric = j ? "memory" : "tokens_per_s_per_gpu";
				out->worst_error_pct = e[j];
			}
		}
		out->over_bad_error += bad;
		out->mfu_over_margin += r[i].mfu_excess_points > RM_VALIDATION_MFU_MARGIN_POINTS;
	}
	out->tokens_median_abs_pct = rm_validation_median_abs(tok, n);
	out->memory_median_abs_pct = rm_validation_median_abs(mem, n);
	free(tok);
	free(mem);
}
