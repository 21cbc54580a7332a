/*
 * The schedule program: builders and validation (remora/program.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <math.h>

#include "remora/program.h"

static const char *const stream_kind_names[RM_STREAM_KIND_COUNT] = {"compute", "collective",
								     "copy"};
static const char *const role_names[RM_ROLE_COUNT] = {
	"param_shard", "gathered_param", "activation", "residual",
	"gradient",    "optimizer_state", "workspace",
};
static const char *const location_names[RM_LOC_COUNT] = {"device", "host"};
static const char *const phase_names[RM_PPHASE_COUNT] = {"fwd", "bwd", "recompute", "optimizer"};

static bool parse_name(const char *const *names, int count, const char *s, int *out)
{
	for (int i = 0; i < count; i++) {
		if (strcmp(names[i], s) == 0) {
			*out = i;
			return true;
		}
	}
	return false;
}

#define NAME_FUNCS(fn, type, names, count)                                                       \
	const char *rm_##fn##_name(type v)                                                       \
	{                                                                                        \
		return (unsigned)v < (unsigned)(count) ? names[v] : "unknown";                   \
	}                                                                                        \
	bool rm_##fn##_parse(const char *s, type *out)                                           \
	{                                                                                        \
		int i;                                                                           \
		if (!parse_name(names, count, s, &i))                                            \
			return false;                                                            \
		*out = (type)i;                                                                  \
		return true;                                                                     \
	}

NAME_FUNCS(stream_kind, rm_stream_kind, stream_kind_names, RM_STREAM_KIND_COUNT)
NAME_FUNCS(tensor_role, rm_tensor_role, role_names, RM_ROLE_COUNT)
NAME_FUNCS(location, rm_location, location_names, RM_LOC_COUNT)
NAME_FUNCS(program_phase, rm_program_phase, phase_names, RM_PPHASE_COUNT)

/* ---- name arena: chunks of 64 KiB, each starting with a link to the previous ------------- */

typedef struct arena_chunk {
	struct arena_chunk *prev;
	size_t used, size;
	char data[];
} arena_chunk;

static const char *arena_strdup(rm_program *prog, const char *s)
{
	if (!s)
		return NULL;
	/* a search's programs name nothing (rm_schedule_config.lean): one shared empty name */
	if (!s[0])
		return "";
	size_t len = strlen(s) + 1;
	arena_chunk *c = prog->arena;
	if (!c || c->size - c->used < len) {
		size_t size = len > 65536 ? len : 65536;
		arena_chunk *n = rm_xmalloc(sizeof(*n) + size);
		n->prev = c;
		n->used = 0;
		n->size = size;
		prog->arena = n;
		c = n;
	}
	char *p = c->data + c->used;
	memcpy(p, s, len);
	c->used += len;
	return p;
}

rm_program *rm_program_create(const char *name)
{
	rm_program *prog = rm_new(rm_program, 1);
	prog->name = rm_xstrdup(name ? name : "");
	prog->model_flops = -1;
	/* The reference pool is never NULL, so rm_program_refs() of an empty list is a valid
	 * pointer (NULL + 0 is undefined behaviour in C). */
	prog->cap_refs = 64;
	prog->refs = rm_new(int32_t, prog->cap_refs);
	return prog;
}

void rm_program_reset(rm_program *prog)
{
	arena_chunk *c = prog->arena;
	if (c) {
		/* keep the newest chunk, the largest the arena grew to in the last program */
		arena_chunk *prev = c->prev;
		while (prev) {
			arena_chunk *pp = prev->prev;
			free(prev);
			prev = pp;
		}
		c->prev = NULL;
		c->used = 0;
	}
	free(prog->name);
	prog->name = rm_xstrdup("");
	memset(&prog->runtime, 0, sizeof(prog->runtime));
	prog->tokens = 0;
	prog->model_flops = -1;
	prog->n_streams = prog->n_tensors = prog->n_events = prog->n_ops = 0;
	prog->n_refs = 0;
}

void rm_program_destroy(rm_program *prog)
{
	if (!prog)
		return;
	arena_chunk *c = prog->arena;
	while (c) {
		arena_chunk *prev = c->prev;
		free(c);
		c = prev;
	}
	free(prog->name);
	free(prog->streams);
	free(prog->tensors);
	free(prog->events);
	free(prog->ops);
	free(prog->refs);
	free(prog);
}

#define GROW(prog, arr, n, cap)                                                                  \
	do {                                                                                     \
		if ((prog)->n == (prog)->cap) {                                                  \
			(prog)->cap = (prog)->cap ? (prog)->cap * 2 : 16;                        \
			(prog)->arr = rm_xrealloc((prog)->arr,                                   \
						  (size_t)(prog)->cap * sizeof(*(prog)->arr));   \
		}                                                                                \
	} while (0)

int32_t rm_program_add_stream(rm_program *prog, const char *name, rm_stream_kind kind,
			      int32_t priority)
{
	GROW(prog, streams, n_streams, cap_streams);
	prog->streams[prog->n_streams] = (rm_program_stream){
		.name = arena_strdup(prog, name ? name : ""), .kind = kind, .priority = priority};
	return prog->n_streams++;
}

int32_t rm_program_add_tensor(rm_program *prog, const char *name, int64_t bytes,
			      rm_tensor_role role, rm_location location, bool persistent)
{
	GROW(prog, tensors, n_tensors, cap_tensors);
	prog->tensors[prog->n_tensors] = (rm_program_tensor){
		.name = arena_strdup(prog, name ? name : ""),
		.bytes = bytes,
		.role = role,
		.location = location,
		.persistent = persistent,
	};
	return prog->n_tensors++;
}

int32_t rm_program_add_event(rm_program *prog, const char *name)
{
	GROW(prog, events, n_events, cap_events);
	prog->events[prog->n_events] =
		(rm_program_event){.name = arena_strdup(prog, name ? name : "")};
	return prog->n_events++;
}

/* Copies a list into the reference pool, which the caller has made room in. */
static inline rm_program_list put_list(rm_program *prog, const int32_t *v, uint32_t n)
{
	rm_program_list l = {.at = prog->n_refs, .count = n};
	int32_t *dst = prog->refs + prog->n_refs;
	for (uint32_t i = 0; i < n; i++)
		dst[i] = v[i];
	prog->n_refs += n;
	return l;
}

/* The four lists hold a handful of references each: a plain loop copies them in fewer
 * instructions than a vectorised one, whose set-up and checks cost more than the copy. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-loop-vectorize")))
#endif
int32_t rm_program_add_op(rm_program *prog, const rm_program_op_desc *d)
{
	GROW(prog, ops, n_ops, cap_ops);
	/* one capacity check for the op's four lists (a search's ops hold a handful each) */
	uint64_t need = (uint64_t)prog->n_refs + d->n_inputs + d->n_outputs + d->n_waits + d->n_records;
	if (need > prog->cap_refs) {
		uint64_t cap = prog->cap_refs ? prog->cap_refs : 64;
		while (cap < need)
			cap *= 2;
		if (cap > UINT32_MAX) {
			fprintf(stderr, "remora: fatal: a program of more than 2^32 op references\n");
			abort();
		}
		prog->refs = rm_xrealloc(prog->refs, (size_t)cap * sizeof(int32_t));
		prog->cap_refs = (uint32_t)cap;
	}
	rm_program_op *op = &prog->ops[prog->n_ops];
	op->name = arena_strdup(prog, d->name ? d->name : "");
	op->cost = d->cost;
	op->stream = d->stream;
	op->layer = d->layer;
	op->phase = d->phase;
	op->time_s = d->time_s;
	op->sync_reason = arena_strdup(prog, d->sync_reason);
	op->same_cost_as = d->same_cost_as;
	op->inputs = put_list(prog, d->inputs, d->n_inputs);
	op->outputs = put_list(prog, d->outputs, d->n_outputs);
	op->waits = put_list(prog, d->waits, d->n_waits);
	op->records = put_list(prog, d->records, d->n_records);
	return prog->n_ops++;
}

rm_program_op_desc rm_program_op_desc_init(const char *name, rm_cost_kind kind, int32_t stream)
{
	rm_program_op_desc d;
	memset(&d, 0, sizeof(d));
	d.name = name;
	d.cost.kind = kind;
	d.stream = stream;
	d.layer = -1;
	d.phase = RM_PPHASE_FWD;
	d.time_s = -1;
	if (kind == RM_COST_GEMM)
		d.cost.gemm = (rm_gemm_shape){.batch = 1, .m = 1, .n = 1, .k = 1, .dtype = RM_DTYPE_BF16};
	if (kind == RM_COST_COLLECTIVE) {
		d.cost.collective.group_size = 1;
		d.cost.collective.span = 1;
	}
	return d;
}

/* ---- validation ------------------------------------------------------------------------ */

#define INVALID(...) rm_error_set(err, RM_INVALID, file, 0, 0, __VA_ARGS__)

static rm_status check_cost(const rm_cost_op *c, int32_t i, const char *file, rm_error *err)
{
	switch (c->kind) {
	case RM_COST_GEMM: {
		const rm_gemm_shape *g = &c->gemm;
		if (g->batch <= 0 || g->m <= 0 || g->n <= 0 || g->k <= 0)
			return INVALID("ops[%d].gemm: batch, m, n, k must be positive (got %lld, "
				       "%lld, %lld, %lld)",
				       i, (long long)g->batch, (long long)g->m, (long long)g->n,
				       (long long)g->k);
		if ((unsigned)g->dtype >= RM_DTYPE_COUNT)
			return INVALID("ops[%d].gemm.dtype: unknown dtype", i);
		break;
	}
	case RM_COST_ATTENTION: {
		const rm_attention_shape *a = &c->attention.shape;
		if (a->batch <= 0 || a->heads <= 0 || a->kv_heads <= 0 || a->seq <= 0 ||
		    a->head_dim <= 0)
			return INVALID("ops[%d].attention: b, heads, kv_heads, s, d must be positive",
				       i);
		if ((unsigned)a->dtype >= RM_DTYPE_COUNT)
			return INVALID("ops[%d].attention.dtype: unknown dtype", i);
		if (a->heads % a->kv_heads != 0)
			return INVALID("ops[%d].attention: kv_heads (%lld) must divide heads (%lld)", i,
				       (long long)a->kv_heads, (long long)a->heads);
		break;
	}
	case RM_COST_ELEMENTWISE:
		if (c->elementwise.bytes_read < 0 || c->elementwise.bytes_written < 0 ||
		    !(c->elementwise.flops >= 0))
			return INVALID("ops[%d].elementwise: bytes and flops must be non-negative", i);
		break;
	case RM_COST_COLLECTIVE:
		if ((unsigned)c->collective.op >= RM_COLL_COUNT)
			return INVALID("ops[%d].collective.op: unknown collective", i);
		if (c->collective.bytes < 0)
			return INVALID("ops[%d].collective.bytes: must be non-negative (got %lld)", i,
				       (long long)c->collective.bytes);
		if (c->collective.group_size < 1 || c->collective.span < 1)
			return INVALID("ops[%d].collective: group_size and span must be >= 1", i);
		if (c->collective.span > c->collective.group_size ||
		    c->collective.group_size % c->collective.span != 0)
			return INVALID("ops[%d].collective: a group of %d GPUs cannot spread evenly over %d nodes", i,
				       (int)c->collective.group_size, (int)c->collective.span);
		break;
	case RM_COST_COPY:
		if ((unsigned)c->copy.dir >= RM_COPY_DIR_COUNT)
			return INVALID("ops[%d].copy.direction: unknown direction", i);
		if (c->copy.bytes < 0)
			return INVALID("ops[%d].copy.bytes: must be non-negative (got %lld)", i,
				       (long long)c->copy.bytes);
		break;
	default:
		return INVALID("ops[%d].kind: unknown kind", i);
	}
	return RM_OK;
}

static rm_status check_list(const rm_program *prog, rm_program_list l, int32_t limit, int32_t i,
			    const char *what, const char *entity, const char *file, rm_error *err)
{
	if ((uint64_t)l.at + l.count > prog->n_refs)
		return INVALID("ops[%d].%s: list out of the reference pool", i, what);
	const int32_t *v = rm_program_refs(prog, l);
	for (uint32_t j = 0; j < l.count; j++)
		if (v[j] < 0 || v[j] >= limit)
			return INVALID("ops[%d].%s[%u]: unknown %s %d (the program has %d)", i, what,
				       j, entity, v[j], limit);
	return RM_OK;
}

/* Blocked predecessor of op k (stream order first, then events), or -1. */
static int32_t blocked_pred(const rm_program *prog, const int32_t *indeg, const int32_t *stream_prev,
			    const int32_t *recorder, int32_t k)
{
	if (stream_prev[k] >= 0 && indeg[stream_prev[k]] > 0)
		return stream_prev[k];
	const rm_program_op *op = &prog->ops[k];
	const int32_t *w = rm_program_refs(prog, op->waits);
	for (uint32_t j = 0; j < op->waits.count; j++)
		if (indeg[recorder[w[j]]] > 0)
			return recorder[w[j]];
	return -1;
}

/* Reports a cycle among the ops Kahn's algorithm could not order (in-degree left > 0). */
static rm_status report_cycle(const rm_program *prog, const int32_t *indeg, const int32_t *stream_prev,
			      const int32_t *recorder, const char *file, rm_error *err)
{
	/* Every blocked op has a blocked predecessor: walking them must repeat an op, which is on
	 * a cycle. */
	int32_t n = prog->n_ops;
	bool *seen = rm_xcalloc((size_t)n + 1, sizeof(bool));
	int32_t cur = -1;
	for (int32_t i = 0; i < n && cur < 0; i++)
		if (indeg[i] > 0)
			cur = i;
	while (cur >= 0 && !seen[cur]) {
		seen[cur] = true;
		cur = blocked_pred(prog, indeg, stream_prev, recorder, cur);
	}
	free(seen);
	char path[512] = "";
	size_t len = 0;
	if (cur >= 0) {
		int32_t k = cur, hops = 0;
		do {
			if (hops == 8) {
				snprintf(path + len, sizeof(path) - len, " <- ...");
				break;
			}
			int w = snprintf(path + len, sizeof(path) - len, "%sops[%d] '%s'",
					 hops ? " <- " : "", k, prog->ops[k].name);
			if (w < 0 || (size_t)w >= sizeof(path) - len)
				break;
			len += (size_t)w;
			k = blocked_pred(prog, indeg, stream_prev, recorder, k);
			hops++;
		} while (k >= 0 && k != cur);
	}
	return INVALID("dependency cycle (deadlock): %s, each waiting for the next (stream order "
		       "or event)",
		       path);
}

rm_status rm_program_validate(const rm_program *prog, const char *file, rm_error *err)
{
	rm_status st = RM_OK;
	int32_t n = prog->n_ops;
	if (prog->tokens < 0)
		return INVALID("tokens: must be non-negative (got %lld)", (long long)prog->tokens);
	/* no machine reaches 1e30 FLOPs in a step: a larger figure is a mistake, not a program */
	if (!(prog->model_flops < 1e30) || (prog->model_flops >= 0 && !isfinite(prog->model_flops)))
		return INVALID("model_flops: %g is not a plausible FLOP count (at most 1e30; < 0 to derive it)",
			       prog->model_flops);
	for (int32_t s = 0; s < prog->n_streams; s++)
		if ((unsigned)prog->streams[s].kind >= RM_STREAM_KIND_COUNT)
			return INVALID("streams[%d].kind: unknown kind", s);
	/* Every memory figure derived from the tensors (the engine's live bytes, the executor's
	 * regions) is at most their sum: keeping that within 2^61 B keeps every such sum in int64. */
	int64_t all_bytes = 0;
	for (int32_t t = 0; t < prog->n_tensors; t++) {
		const rm_program_tensor *tn = &prog->tensors[t];
		if (tn->bytes < 0)
			return INVALID("tensors[%d].bytes: must be non-negative (got %lld)", t,
				       (long long)tn->bytes);
		if (__builtin_add_overflow(all_bytes, tn->bytes, &all_bytes) || all_bytes > INT64_MAX / 4)
			return rm_error_set(err, RM_RANGE, file, 0, 0,
					    "tensors[%d].bytes: the tensors up to this one take more than 2^61 B "
					    "(2 EiB) in all",
					    t);
		if ((unsigned)tn->role >= RM_ROLE_COUNT || (unsigned)tn->location >= RM_LOC_COUNT)
			return INVALID("tensors[%d]: unknown role or location", t);
	}
	if (prog->tokens < 0)
		return INVALID("tokens: must be non-negative");

	int32_t *producer = rm_xmalloc(((size_t)prog->n_tensors + 1) * sizeof(int32_t));
	int32_t *recorder = rm_xmalloc(((size_t)prog->n_events + 1) * sizeof(int32_t));
	int32_t *stream_last = rm_xmalloc(((size_t)prog->n_streams + 1) * sizeof(int32_t));
	int32_t *stream_prev = rm_xmalloc(((size_t)n + 1) * sizeof(int32_t));
	int32_t *indeg = rm_xcalloc((size_t)n + 1, sizeof(int32_t));
	int32_t *queue = NULL;
	int32_t *succ_at = NULL, *succ = NULL;
	for (int32_t t = 0; t < prog->n_tensors; t++)
		producer[t] = -1;
	for (int32_t e = 0; e < prog->n_events; e++)
		recorder[e] = -1;
	for (int32_t s = 0; s < prog->n_streams; s++)
		stream_last[s] = -1;

	for (int32_t i = 0; i < n; i++) {
		const rm_program_op *op = &prog->ops[i];
		if (op->stream < 0 || op->stream >= prog->n_streams) {
			st = INVALID("ops[%d].stream: unknown stream %d (the program has %d)", i,
				     op->stream, prog->n_streams);
			goto out_free;
		}
		if (op->same_cost_as < 0 || op->same_cost_as > i) {
			st = INVALID("ops[%d].same_cost_as: %d names no earlier op (1 + its index, 0: none)", i,
				     op->same_cost_as);
			goto out_free;
		}
		if ((unsigned)op->phase >= RM_PPHASE_COUNT) {
			st = INVALID("ops[%d].phase: unknown phase", i);
			goto out_free;
		}
		if ((st = check_cost(&op->cost, i, file, err)) != RM_OK)
			goto out_free;
		if (!(op->time_s < 1e4)) { /* NaN or absurd */
			st = INVALID("ops[%d].time_s: must be a number of seconds below 1e4", i);
			goto out_free;
		}
		if ((st = check_list(prog, op->inputs, prog->n_tensors, i, "inputs", "tensor", file,
				     err)) != RM_OK ||
		    (st = check_list(prog, op->outputs, prog->n_tensors, i, "outputs", "tensor", file,
				     err)) != RM_OK ||
		    (st = check_list(prog, op->waits, prog->n_events, i, "waits", "event", file,
				     err)) != RM_OK ||
		    (st = check_list(prog, op->records, prog->n_events, i, "records", "event", file,
				     err)) != RM_OK)
			goto out_free;
		const int32_t *o = rm_program_refs(prog, op->outputs);
		for (uint32_t j = 0; j < op->outputs.count; j++) {
			if (producer[o[j]] >= 0) {
				st = INVALID("ops[%d].outputs[%u]: tensor %d '%s' is already produced by "
					     "ops[%d] '%s' (one producer per tensor)",
					     i, j, o[j], prog->tensors[o[j]].name, producer[o[j]],
					     prog->ops[producer[o[j]]].name);
				goto out_free;
			}
			producer[o[j]] = i;
		}
		const int32_t *r = rm_program_refs(prog, op->records);
		for (uint32_t j = 0; j < op->records.count; j++) {
			if (recorder[r[j]] >= 0) {
				st = INVALID("ops[%d].records[%u]: event %d '%s' is already recorded by "
					     "ops[%d] '%s' (one record per event)",
					     i, j, r[j], prog->events[r[j]].name, recorder[r[j]],
					     prog->ops[recorder[r[j]]].name);
				goto out_free;
			}
			recorder[r[j]] = i;
		}
		stream_prev[i] = stream_last[op->stream];
		stream_last[op->stream] = i;
	}
	for (int32_t i = 0; i < n; i++) {
		const rm_program_op *op = &prog->ops[i];
		const int32_t *in = rm_program_refs(prog, op->inputs);
		for (uint32_t j = 0; j < op->inputs.count; j++) {
			const rm_program_tensor *t = &prog->tensors[in[j]];
			if (!t->persistent && producer[in[j]] < 0) {
				st = INVALID("ops[%d].inputs[%u]: op '%s' reads tensor %d '%s', which no "
					     "op produces and which is not persistent",
					     i, j, op->name, in[j], t->name);
				goto out_free;
			}
		}
		const int32_t *w = rm_program_refs(prog, op->waits);
		for (uint32_t j = 0; j < op->waits.count; j++) {
			if (recorder[w[j]] < 0) {
				st = INVALID("ops[%d].waits[%u]: op '%s' waits on event %d '%s', which no "
					     "op records",
					     i, j, op->name, w[j], prog->events[w[j]].name);
				goto out_free;
			}
			if (recorder[w[j]] == i) {
				st = INVALID("ops[%d].waits[%u]: op '%s' waits on the event it records "
					     "(deadlock)",
					     i, j, op->name);
				goto out_free;
			}
		}
	}

	/* Kahn's algorithm over stream-order and event edges (successor lists in CSR form). */
	succ_at = rm_xcalloc((size_t)n + 2, sizeof(int32_t));
	for (int32_t i = 0; i < n; i++) {
		const rm_program_op *op = &prog->ops[i];
		if (stream_prev[i] >= 0) {
			succ_at[stream_prev[i] + 1]++;
			indeg[i]++;
		}
		const int32_t *w = rm_program_refs(prog, op->waits);
		for (uint32_t j = 0; j < op->waits.count; j++) {
			succ_at[recorder[w[j]] + 1]++;
			indeg[i]++;
		}
	}
	for (int32_t i = 0; i < n; i++)
		succ_at[i + 1] += succ_at[i];
	succ = rm_xmalloc(((size_t)succ_at[n] + 1) * sizeof(int32_t));
	{
		int32_t *fill = rm_xmalloc(((size_t)n + 1) * sizeof(int32_t));
		memcpy(fill, succ_at, (size_t)n * sizeof(int32_t));
		for (int32_t i = 0; i < n; i++) {
			const rm_program_op *op = &prog->ops[i];
			if (stream_prev[i] >= 0)
				succ[fill[stream_prev[i]]++] = i;
			const int32_t *w = rm_program_refs(prog, op->waits);
			for (uint32_t j = 0; j < op->waits.count; j++)
				succ[fill[recorder[w[j]]]++] = i;
		}
		free(fill);
	}
	queue = rm_xmalloc(((size_t)n + 1) * sizeof(int32_t));
	int32_t head = 0, tail = 0;
	for (int32_t i = 0; i < n; i++)
		if (indeg[i] == 0)
			queue[tail++] = i;
	while (head < tail) {
		int32_t u = queue[head++];
		for (int32_t k = succ_at[u]; k < succ_at[u + 1]; k++)
			if (--indeg[succ[k]] == 0)
				queue[tail++] = succ[k];
	}
	if (tail < n)
		st = report_cycle(prog, indeg, stream_prev, recorder, file, err);

out_free:
	free(queue);
	free(succ);
	free(succ_at);
	free(indeg);
	free(stream_prev);
	free(stream_last);
	free(recorder);
	free(producer);
	return st;
}
