/* XLA_FLAGS parsing (remora/xla_flags.h). */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "remora/xla_flags.h"

static const char *const coll_kind_names[RM_XLA_COLL_KIND_COUNT] = {
	"allreduce", "allgather", "reducescatter", "collectivebroadcast",
	"alltoall",  "collectivepermute", "raggedalltoall",
};

const char *rm_xla_coll_kind_name(rm_xla_coll_kind kind)
{
	return (unsigned)kind < RM_XLA_COLL_KIND_COUNT ? coll_kind_names[kind] : "unknown";
}

rm_xla_flags rm_xla_flags_default(void)
{
	/* version 0 (schedules/xla_versions.c); its target is Hopper, which changes nothing there */
	return rm_xla_flags_for_version(0, true);
}

static const char *const flag_names[RM_XLA_FLAG_COUNT] = {
#define FLAG_NAME(id, name) name,
	RM_XLA_FLAG_MAP(FLAG_NAME)
#undef FLAG_NAME
};

const char *rm_xla_flag_name(rm_xla_flag_id id)
{
	return (unsigned)id < RM_XLA_FLAG_COUNT ? flag_names[id] : "unknown";
}

typedef enum { T_BOOL, T_INT, T_BYTES, T_KINDS, T_STRING } flag_type;

typedef struct flag_desc {
	rm_xla_flag_id id; /* its name is rm_xla_flag_name(id) */
	flag_type type;
	size_t offset; /* into rm_xla_flags */
	int64_t min, max;
} flag_desc;

#define OFF(field) offsetof(rm_xla_flags, field)

/* In RM_XLA_FLAG_MAP's order (checked by the tests through rm_xla_flag_name). */
static const flag_desc flag_table[] = {
	{RM_XLA_FLAG_LATENCY_HIDING_SCHEDULER, T_BOOL, OFF(lhs_flag), 0, 0},
	{RM_XLA_FLAG_PIPELINED_COLLECTIVES, T_BOOL, OFF(pipelined_collectives), 0, 0},
	{RM_XLA_FLAG_PIPELINED_ALL_GATHER, T_BOOL, OFF(pipelined_all_gather), 0, 0},
	{RM_XLA_FLAG_PIPELINED_REDUCE_SCATTER, T_BOOL, OFF(pipelined_reduce_scatter), 0, 0},
	{RM_XLA_FLAG_PIPELINED_ALL_REDUCE, T_BOOL, OFF(pipelined_all_reduce), 0, 0},
	{RM_XLA_FLAG_WHILE_LOOP_DOUBLE_BUFFERING, T_BOOL, OFF(while_loop_double_buffering), 0, 0},
	{RM_XLA_FLAG_HIGHEST_PRIORITY_ASYNC_STREAM, T_BOOL, OFF(highest_priority_async_stream), 0, 0},
	{RM_XLA_FLAG_ALL_GATHER_COMBINE_THRESHOLD, T_BYTES, OFF(all_gather_combine_threshold_bytes), 0, INT64_MAX},
	{RM_XLA_FLAG_REDUCE_SCATTER_COMBINE_THRESHOLD, T_BYTES, OFF(reduce_scatter_combine_threshold_bytes), 0, INT64_MAX},
	{RM_XLA_FLAG_ALL_REDUCE_COMBINE_THRESHOLD, T_BYTES, OFF(all_reduce_combine_threshold_bytes), 0, INT64_MAX},
	{RM_XLA_FLAG_ALL_GATHER_COMBINE_BY_DIM, T_BOOL, OFF(all_gather_combine_by_dim), 0, 0},
	{RM_XLA_FLAG_REDUCE_SCATTER_COMBINE_BY_DIM, T_BOOL, OFF(reduce_scatter_combine_by_dim), 0, 0},
	{RM_XLA_FLAG_DISABLE_ASYNC_COLLECTIVES, T_KINDS, OFF(async_disabled), 0, 0},
	{RM_XLA_FLAG_MEMORY_LIMIT_SLOP_FACTOR, T_INT, OFF(memory_limit_slop_factor), 1, 1000},
	{RM_XLA_FLAG_PARALLEL_COLLECTIVE_OVERLAP_LIMIT, T_INT, OFF(parallel_collective_overlap_limit), 1, 64},
	{RM_XLA_FLAG_GRAPH_LEVEL, T_INT, OFF(graph_level), 0, 3},
	{RM_XLA_FLAG_COMMAND_BUFFER, T_STRING, OFF(command_buffer_disabled), 0, 0},
	{RM_XLA_FLAG_PGLE_PROFILE, T_STRING, OFF(profile_guided), 0, 0},
	{RM_XLA_FLAG_ANALYTICAL_SOL_LATENCY_ESTIMATOR, T_BOOL, OFF(analytical_sol_latency_estimator), 0, 0},
	{RM_XLA_FLAG_DISABLE_HLO_PASSES, T_STRING, OFF(remat_pass_disabled), 0, 0},
};
_Static_assert(RM_ARRAY_SIZE(flag_table) == RM_XLA_FLAG_COUNT, "one row per modelled flag");
_Static_assert(RM_XLA_FLAG_COUNT <= 32, "rm_xla_flags.given and rm_xla_version.absent are 32-bit masks");

static rm_status flag_error(rm_error *err, rm_status st, int column, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static rm_status flag_error(rm_error *err, rm_status st, int column, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return rm_error_set(err, st, NULL, 1, column, "XLA_FLAGS: %s", msg);
}

static bool parse_bool(const char *v, bool *out)
{
	if (strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0) {
		*out = true;
		return true;
	}
	if (strcasecmp(v, "false") == 0 || strcmp(v, "0") == 0) {
		*out = false;
		return true;
	}
	return false;
}

static bool parse_int(const char *v, int64_t *out)
{
	if (!*v)
		return false;
	errno = 0;
	char *end = NULL;
	long long x = strtoll(v, &end, 10);
	if (errno == ERANGE || *end != '\0')
		return false;
	*out = x;
	return true;
}

static rm_status apply(rm_xla_flags *f, const flag_desc *d, const char *name, const char *value,
		       bool has_value, int column, rm_error *err)
{
	char *base = (char *)f;
	switch (d->type) {
	case T_BOOL: {
		bool b = true;
		if (has_value && !parse_bool(value, &b))
			return flag_error(err, RM_INVALID, column, "--%s expects true or false, got '%s'", name, value);
		*(bool *)(base + d->offset) = b;
		return RM_OK;
	}
	case T_INT:
	case T_BYTES: {
		int64_t x;
		if (!has_value || !parse_int(value, &x))
			return flag_error(err, RM_INVALID, column, "--%s expects an integer, got '%s'", name,
					  has_value ? value : "");
		if (x < d->min || x > d->max)
			return flag_error(err, RM_RANGE, column, "--%s=%lld is outside [%lld, %lld]", name,
					  (long long)x, (long long)d->min, (long long)d->max);
		if (d->type == T_BYTES)
			*(int64_t *)(base + d->offset) = x;
		else
			*(int *)(base + d->offset) = (int)x;
		return RM_OK;
	}
	case T_KINDS: {
		if (!has_value)
			return flag_error(err, RM_INVALID, column, "--%s expects a comma-separated list of collective kinds", name);
		bool set[RM_XLA_COLL_KIND_COUNT] = {false};
		const char *p = value;
		while (*p) {
			size_t len = strcspn(p, ",");
			int found = -1;
			for (int k = 0; k < RM_XLA_COLL_KIND_COUNT; k++)
				if (strlen(coll_kind_names[k]) == len && strncasecmp(p, coll_kind_names[k], len) == 0)
					found = k;
			if (found < 0 && len > 0)
				return flag_error(err, RM_INVALID, column,
						  "--%s: unknown collective kind '%.*s' (allreduce, allgather, "
						  "reducescatter, collectivebroadcast, alltoall, collectivepermute, "
						  "raggedalltoall)",
						  name, (int)len, p);
			if (found >= 0)
				set[found] = true;
			p += len;
			if (*p == ',')
				p++;
		}
		memcpy(f->async_disabled, set, sizeof(set));
		return RM_OK;
	}
	case T_STRING:
		if (d->id == RM_XLA_FLAG_DISABLE_HLO_PASSES) {
			/* a comma-separated list of pass names (xla/debug_options_flags.cc); the one
			 * remora runs is HloRematerialization, named "rematerialization" */
			f->remat_pass_disabled = false;
			for (const char *q = has_value ? value : ""; *q;) {
				size_t len = strcspn(q, ",");
				if (len == 17 && strncmp(q, "rematerialization", 17) == 0)
					f->remat_pass_disabled = true;
				q += len;
				if (*q == ',')
					q++;
			}
			return RM_OK;
		}
		if (d->id == RM_XLA_FLAG_COMMAND_BUFFER)
			f->command_buffer_disabled = has_value && value[0] == '\0';
		else
			f->profile_guided = has_value && value[0] != '\0';
		return RM_OK;
	}
	return RM_OK;
}

rm_status rm_xla_flags_parse(const char *text, rm_xla_flags *f, rm_error *err)
{
	const char *p = text ? text : "";
	char word[1024];
	for (;;) {
		while (isspace((unsigned char)*p))
			p++;
		if (!*p)
			break;
		int column = (int)(p - text) + 1;
		/* one word, with quotes around (part of) it removed */
		size_t n = 0;
		char quote = 0;
		while (*p && (quote || !isspace((unsigned char)*p))) {
			if (!quote && (*p == '\'' || *p == '"')) {
				quote = *p++;
				continue;
			}
			if (quote && *p == quote) {
				quote = 0;
				p++;
				continue;
			}
			if (n + 1 >= sizeof(word))
				return flag_error(err, RM_INVALID, column, "flag longer than %zu characters", sizeof(word) - 1);
			word[n++] = *p++;
		}
		word[n] = '\0';
		if (quote)
			return flag_error(err, RM_PARSE, column, "unterminated quote in '%s'", word);
		const char *w = word;
		if (w[0] != '-')
			return flag_error(err, RM_PARSE, column, "'%s' is not a flag (flags start with --)", word);
		w += w[1] == '-' ? 2 : 1;
		const char *eq = strchr(w, '=');
		char name[256];
		size_t name_len = eq ? (size_t)(eq - w) : strlen(w);
		if (name_len == 0 || name_len >= sizeof(name))
			return flag_error(err, RM_PARSE, column, "'%s' has no flag name", word);
		memcpy(name, w, name_len);
		name[name_len] = '\0';
		const char *value = eq ? eq + 1 : "";
		bool has_value = eq != NULL;
		const flag_desc *d = NULL;
		for (size_t i = 0; i < RM_ARRAY_SIZE(flag_table); i++)
			if (strcmp(name, flag_names[flag_table[i].id]) == 0)
				d = &flag_table[i];
		/* absl's --noflag form for booleans */
		if (!d && !has_value && strncmp(name, "no", 2) == 0) {
			for (size_t i = 0; i < RM_ARRAY_SIZE(flag_table); i++)
				if (strcmp(name + 2, flag_names[flag_table[i].id]) == 0 && flag_table[i].type == T_BOOL) {
					d = &flag_table[i];
					has_value = true;
					value = "false";
					memmove(name, name + 2, strlen(name + 2) + 1);
				}
		}
		if (!d) {
			if (strncmp(name, "xla_", 4) != 0)
				return flag_error(err, RM_INVALID, column,
						  "--%s is not an XLA flag (XLA's flags start with --xla_)", name);
			bool seen = false;
			for (int i = 0; i < f->n_unmodelled; i++)
				seen |= strcmp(f->unmodelled[i], name) == 0;
			if (!seen && f->n_unmodelled < RM_XLA_MAX_UNMODELLED)
				snprintf(f->unmodelled[f->n_unmodelled++], sizeof(f->unmodelled[0]), "%s", name);
			continue;
		}
		const rm_xla_version *v = rm_xla_version_at(f->version);
		if (v && (v->absent & (UINT32_C(1) << d->id)))
			return flag_error(err, RM_UNSUPPORTED, column,
					  "--%s is not a flag of the XLA in JAX %s (openxla/xla %.12s, %s); XLA aborts "
					  "on it (\"Unknown flag in XLA_FLAGS\")",
					  name, v->name, v->xla_commit, v->xla_date);
		RM_CHECK(apply(f, d, name, value, has_value, column, err));
		f->given |= UINT32_C(1) << d->id;
	}
	f->latency_hiding_scheduler = rm_xla_lhs_runs(f);
	return RM_OK;
}

static void warn_not_modelled(const rm_xla_flags *f);

void rm_xla_flags_warn_unmodelled(const rm_xla_flags *f)
{
	warn_not_modelled(f);
	if (f->n_unmodelled == 0)
		return;
	char list[1024] = "";
	for (int i = 0; i < f->n_unmodelled; i++) {
		size_t n = strlen(list);
		snprintf(list + n, sizeof(list) - n, "%s--%s", i ? ", " : "", f->unmodelled[i]);
	}
	rm_log_warn("XLA_FLAGS: %d flag(s) not modelled by remora, ignored: %s", f->n_unmodelled, list);
}

/* Parsed and range-checked, but nothing remora computes reads them: remora prices kernels as
 * launched one by one whatever CUDA graphs or command buffers would batch, and prices LHS with
 * scheduler.cost_model, not a PGLE profile's measured costs. */
static const uint32_t parsed_not_modelled =
	RM_XLA_FLAG_BIT(GRAPH_LEVEL) | RM_XLA_FLAG_BIT(COMMAND_BUFFER) | RM_XLA_FLAG_BIT(PGLE_PROFILE);

static void warn_not_modelled(const rm_xla_flags *f)
{
	uint32_t given = f->given & parsed_not_modelled;
	if (!given)
		return;
	char list[512] = "";
	int n = 0;
	for (int i = 0; i < RM_XLA_FLAG_COUNT; i++)
		if (given & (UINT32_C(1) << i)) {
			size_t used = strlen(list);
			snprintf(list + used, sizeof(list) - used, "%s--%s", n++ ? ", " : "", flag_names[i]);
		}
	const rm_xla_version *v = rm_xla_version_at(f->version);
	bool pgle_lhs = (given & RM_XLA_FLAG_BIT(PGLE_PROFILE)) && v && v->pgle_enables_lhs;
	rm_log_warn("XLA_FLAGS: %d flag(s) parsed, not modelled: %s (remora models neither CUDA graphs nor "
		    "command buffers and reads no PGLE profile's costs)%s",
		    n, list, pgle_lhs ? "; the PGLE profile does turn the latency-hiding scheduler on, as this XLA does" : "");
}

static size_t put(char *buf, size_t size, size_t used, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static size_t put(char *buf, size_t size, size_t used, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(used < size ? buf + used : NULL, used < size ? size - used : 0, fmt, ap);
	va_end(ap);
	return used + (n > 0 ? (size_t)n : 0);
}

const char *rm_xla_flags_format_keep(const rm_xla_flags *f, uint32_t keep, char *buf, size_t size)
{
	rm_xla_flags d = rm_xla_flags_for_version(f->version, f->hopper);
	size_t u = 0;
	if (size)
		buf[0] = '\0';
#define FMT_BOOL(id, field, flag)                                                                \
	if (f->field != d.field || (keep & RM_XLA_FLAG_BIT(id)))                                 \
	u = put(buf, size, u, "%s--" flag "=%s", u ? " " : "", f->field ? "true" : "false")
#define FMT_INT(id, field, flag)                                                                 \
	if (f->field != d.field || (keep & RM_XLA_FLAG_BIT(id)))                                 \
	u = put(buf, size, u, "%s--" flag "=%lld", u ? " " : "", (long long)f->field)
	FMT_BOOL(LATENCY_HIDING_SCHEDULER, lhs_flag, "xla_gpu_enable_latency_hiding_scheduler");
	FMT_BOOL(PIPELINED_COLLECTIVES, pipelined_collectives, "xla_gpu_enable_pipelined_collectives");
	FMT_BOOL(PIPELINED_ALL_GATHER, pipelined_all_gather, "xla_gpu_enable_pipelined_all_gather");
	FMT_BOOL(PIPELINED_REDUCE_SCATTER, pipelined_reduce_scatter, "xla_gpu_enable_pipelined_reduce_scatter");
	FMT_BOOL(PIPELINED_ALL_REDUCE, pipelined_all_reduce, "xla_gpu_enable_pipelined_all_reduce");
	FMT_BOOL(WHILE_LOOP_DOUBLE_BUFFERING, while_loop_double_buffering, "xla_gpu_enable_while_loop_double_buffering");
	FMT_BOOL(HIGHEST_PRIORITY_ASYNC_STREAM, highest_priority_async_stream, "xla_gpu_enable_highest_priority_async_stream");
	FMT_INT(ALL_GATHER_COMBINE_THRESHOLD, all_gather_combine_threshold_bytes, "xla_gpu_all_gather_combine_threshold_bytes");
	FMT_INT(REDUCE_SCATTER_COMBINE_THRESHOLD, reduce_scatter_combine_threshold_bytes, "xla_gpu_reduce_scatter_combine_threshold_bytes");
	FMT_INT(ALL_REDUCE_COMBINE_THRESHOLD, all_reduce_combine_threshold_bytes, "xla_gpu_all_reduce_combine_threshold_bytes");
	FMT_BOOL(ALL_GATHER_COMBINE_BY_DIM, all_gather_combine_by_dim, "xla_gpu_enable_all_gather_combine_by_dim");
	FMT_BOOL(REDUCE_SCATTER_COMBINE_BY_DIM, reduce_scatter_combine_by_dim, "xla_gpu_enable_reduce_scatter_combine_by_dim");
	FMT_INT(MEMORY_LIMIT_SLOP_FACTOR, memory_limit_slop_factor, "xla_gpu_memory_limit_slop_factor");
	FMT_INT(PARALLEL_COLLECTIVE_OVERLAP_LIMIT, parallel_collective_overlap_limit, "xla_gpu_experimental_parallel_collective_overlap_limit");
	FMT_INT(GRAPH_LEVEL, graph_level, "xla_gpu_graph_level");
	FMT_BOOL(ANALYTICAL_SOL_LATENCY_ESTIMATOR, analytical_sol_latency_estimator, "xla_gpu_enable_analytical_sol_latency_estimator");
#undef FMT_BOOL
#undef FMT_INT
	bool any = false;
	for (int k = 0; k < RM_XLA_COLL_KIND_COUNT; k++)
		any |= f->async_disabled[k];
	if (any || (keep & RM_XLA_FLAG_BIT(DISABLE_ASYNC_COLLECTIVES))) {
		u = put(buf, size, u, "%s--xla_gpu_disable_async_collectives=", u ? " " : "");
		bool first = true;
		for (int k = 0; k < RM_XLA_COLL_KIND_COUNT; k++)
			if (f->async_disabled[k]) {
				u = put(buf, size, u, "%s%s", first ? "" : ",", coll_kind_names[k]);
				first = false;
			}
	}
	if (f->command_buffer_disabled)
		u = put(buf, size, u, "%s--xla_gpu_enable_command_buffer=", u ? " " : "");
	if (f->remat_pass_disabled)
		u = put(buf, size, u, "%s--xla_disable_hlo_passes=rematerialization", u ? " " : "");
	return buf;
}

const char *rm_xla_flags_format(const rm_xla_flags *f, char *buf, size_t size)
{
	return rm_xla_flags_format_keep(f, 0, buf, size);
}
