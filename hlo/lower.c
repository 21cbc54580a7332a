/*
 * HLO module -> schedule program (remora/hlo.h rm_hlo_lower; docs/hlo.md).
 *
 * The ENTRY computation is walked in its scheduled order; `while` bodies are walked trip-count
 * times and `call`s inlined, so the program is the step as the GPU runs it. Ops land on four
 * streams: compute, collective, copy_h2d, copy_d2h. XLA's GPU runtime synchronises an async op
 * with the compute stream at its start (the async stream waits for the work issued before) and
 * at its done (the compute stream waits for the async op); the program says the same with
 * events: a start waits on an event the last compute op before it records, and the first compute
 * op after a done waits on the event the async op records.
 *
 * Which done ends which start is followed through values: each instruction's value is either an
 * async op in flight (the op's event), a tuple of values, or nothing. tuple, get-tuple-element,
 * parameters of called computations, while results and pass-through ops (bitcast,
 * opt-barrier, async-update) carry them, so a start issued in iteration i whose done sits in
 * iteration i+1 (a pipelined all-gather) is matched across the loop's back edge.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "hlo_private.h"

enum { STREAM_COMPUTE, STREAM_COLL, STREAM_H2D, STREAM_D2H, N_STREAMS };

#define HOST_MEMORY_SPACE 5 /* XLA's kHostMemorySpace: the S(5) of a layout is pinned host memory */

/* A value: an async op in flight (ev >= 0), a tuple (n elements), or nothing (ev < 0, n 0). */
typedef struct hval {
	int32_t ev;
	int32_t n;
	struct hval **elems;
} hval;

static hval NONE = {.ev = -1, .n = 0, .elems = NULL};
/* The value of a start XLA made synchronous (or an async wrapper run in place): its done waits
 * for nothing, and is no unmatched done. */
static hval SYNCED = {.ev = -1, .n = 0, .elems = NULL};

typedef struct lower {
	const rm_hlo_module *m;
	const rm_hlo_lower_options *opt;
	rm_hlo_report *rep;
	rm_error *err;
	rm_program *prog;
	void *arena; /* values: a list of malloc'd blocks */
	/* the compute op not yet added (so that a later start can have it record an event) */
	bool have_pending;
	rm_program_op_desc pending;
	char pending_name[512];
	int32_t ready_ev;       /* the event the last compute op records when a start follows it */
	int32_t *waits;         /* events the next compute op waits on */
	uint32_t n_waits, cap_waits;
	int64_t n_ops;
	int depth;
	const hlo_instr *site; /* the call or while whose computation is being entered */
} lower;

typedef struct block {
	struct block *next;
	size_t used;
	max_align_t data[];
} block;
#define BLOCK_BYTES ((size_t)1 << 20)

static void *val_alloc(lower *L, size_t size)
{
	size = (size + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
	block *b = L->arena;
	if (!b || BLOCK_BYTES - b->used < size) {
		size_t cap = size > BLOCK_BYTES ? size : BLOCK_BYTES;
		block *n = rm_xmalloc(sizeof(*n) + cap);
		n->next = b;
		n->used = 0;
		L->arena = b = n;
		if (cap > BLOCK_BYTES) {
			n->used = cap;
			return n->data;
		}
	}
	void *p = (char *)b->data + b->used;
	b->used += size;
	return p;
}

static hval *val_leaf(lower *L, int32_t ev)
{
	hval *v = val_alloc(L, sizeof(*v));
	v->ev = ev;
	v->n = 0;
	v->elems = NULL;
	return v;
}

static hval *val_tuple(lower *L, int32_t n)
{
	hval *v = val_alloc(L, sizeof(*v));
	v->ev = -1;
	v->n = n;
	v->elems = val_alloc(L, sizeof(hval *) * (size_t)(n ? n : 1));
	for (int32_t i = 0; i < n; i++)
		v->elems[i] = &NONE;
	return v;
}

static bool fail(lower *L, const hlo_instr *in, const char *msg, const char *what)
{
	rm_error_set(L->err, RM_INVALID, L->m->file[0] ? L->m->file : NULL, in ? in->line : 0, in ? in->col : 0,
		     "%s%s%s", in ? in->name : "", in ? ": " : "", msg);
	if (what)
		snprintf(L->err->msg + strlen(L->err->msg), sizeof(L->err->msg) - strlen(L->err->msg), "%s", what);
	return false;
}

/* ---- program building ---- */

static void flush_pending(lower *L, int32_t record)
{
	if (!L->have_pending)
		return;
	L->pending.records = record >= 0 ? &record : NULL;
	L->pending.n_records = record >= 0 ? 1 : 0;
	rm_program_add_op(L->prog, &L->pending);
	L->have_pending = false;
	free((void *)L->pending.waits);
	L->pending.waits = NULL;
}

static bool count_op(lower *L, const hlo_instr *in)
{
	if (++L->n_ops > L->opt->max_ops)
		return fail(L, in, "the unrolled program passes the limit on ops (a loop's trip count too large?)", NULL);
	return true;
}

/* A compute-stream op: buffered until the next op, taking the waits of the dones since the last
 * compute op. */
static bool emit_compute(lower *L, const hlo_instr *in, const char *name, const rm_cost_op *cost,
			 const char *sync_reason)
{
	if (!count_op(L, in))
		return false;
	flush_pending(L, -1);
	snprintf(L->pending_name, sizeof(L->pending_name), "%s", name);
	L->pending = rm_program_op_desc_init(L->pending_name, cost->kind, STREAM_COMPUTE);
	L->pending.cost = *cost;
	L->pending.sync_reason = sync_reason;
	if (L->n_waits) {
		int32_t *w = rm_xmalloc(sizeof(int32_t) * L->n_waits);
		memcpy(w, L->waits, sizeof(int32_t) * L->n_waits);
		L->pending.waits = w;
		L->pending.n_waits = L->n_waits;
		L->n_waits = 0;
	}
	L->ready_ev = -1;
	L->have_pending = true;
	return true;
}

/* An async op on stream, after the compute op before it; returns the event it records (< 0 on
 * error). */
static int32_t emit_async(lower *L, const hlo_instr *in, const char *name, const rm_cost_op *cost, int32_t stream)
{
	if (!count_op(L, in))
		return -2;
	if (L->have_pending) {
		char en[600];
		snprintf(en, sizeof(en), "%s.ready", L->pending_name);
		L->ready_ev = rm_program_add_event(L->prog, en);
		flush_pending(L, L->ready_ev);
	}
	char en[600];
	snprintf(en, sizeof(en), "%s.done", name);
	int32_t ev = rm_program_add_event(L->prog, en);
	int32_t wait = L->ready_ev;
	rm_program_op_desc d = rm_program_op_desc_init(name, cost->kind, stream);
	d.cost = *cost;
	d.waits = wait >= 0 ? &wait : NULL;
	d.n_waits = wait >= 0 ? 1 : 0;
	d.records = &ev;
	d.n_records = 1;
	rm_program_add_op(L->prog, &d);
	return ev;
}

/* A done: the next compute op waits for the async op of value v (its events, all of a tuple). */
static void add_done_waits(lower *L, const hval *v, bool *found)
{
	if (!v)
		return; /* an operand (or a tuple element) that lowered to nothing: no async op */
	if (v->ev >= 0) {
		for (uint32_t i = 0; i < L->n_waits; i++)
			if (L->waits[i] == v->ev) {
				*found = true;
				return;
			}
		if (L->n_waits == L->cap_waits) {
			L->cap_waits = L->cap_waits ? L->cap_waits * 2 : 8;
			L->waits = rm_xrealloc(L->waits, sizeof(int32_t) * L->cap_waits);
		}
		L->waits[L->n_waits++] = v->ev;
		*found = true;
	}
	for (int32_t i = 0; i < v->n; i++)
		add_done_waits(L, v->elems[i], found);
}

/* ---- reading attributes ---- */

static bool str_starts(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The frontend attribute key's value ("true" in is_sync="true"), copied to buf; false if absent. */
static bool frontend_attr(const hlo_instr *in, const char *key, char *buf, size_t size)
{
	const hlo_attr *a = hlo__attr(in, "frontend_attributes");
	if (!a)
		return false;
	const char *p = a->value;
	size_t kl = strlen(key);
	while ((p = strstr(p, key)) != NULL) {
		bool start = p == a->value || p[-1] == '{' || p[-1] == ',' || p[-1] == ' ';
		const char *q = p + kl;
		if (start && *q == '=') {
			q++;
			bool quoted = *q == '"';
			if (quoted)
				q++;
			size_t n = 0;
			while (q[n] && (quoted ? q[n] != '"' : (q[n] != ',' && q[n] != '}')))
				n++;
			snprintf(buf, size, "%.*s", (int)n, q);
			return true;
		}
		p = q;
	}
	return false;
}

/* backend_config as JSON ({...} or a quoted string holding it); NULL if absent or not JSON. */
static json_t *backend_config(const hlo_instr *in)
{
	const hlo_attr *a = hlo__attr(in, "backend_config");
	if (!a)
		return NULL;
	json_error_t je;
	if (a->value[0] == '"') {
		/* the older form: a string literal with the JSON escaped in it */
		json_t *s = json_loads(a->value, JSON_DECODE_ANY, &je);
		if (!s || !json_is_string(s)) {
			json_decref(s);
			return NULL;
		}
		json_t *o = json_loads(json_string_value(s), 0, &je);
		json_decref(s);
		return o;
	}
	return json_loads(a->value, 0, &je);
}

/* A JSON integer or a string holding one (protobuf's JSON writes int64 as strings). */
static bool json_int(const json_t *v, int64_t *out)
{
	if (json_is_integer(v)) {
		*out = json_integer_value(v);
		return true;
	}
	if (json_is_string(v)) {
		char *e;
		long long x = strtoll(json_string_value(v), &e, 10);
		if (e == json_string_value(v) || *e)
			return false;
		*out = x;
		return true;
	}
	return false;
}

/* A JSON array of dimension numbers into dims (at most 16); false if malformed. */
static bool json_dims(const json_t *a, int32_t *dims, int32_t *n)
{
	*n = 0;
	if (!a)
		return true; /* absent: empty (proto JSON leaves empty lists out) */
	if (!json_is_array(a) || json_array_size(a) > 16)
		return false;
	for (size_t i = 0; i < json_array_size(a); i++) {
		int64_t d;
		if (!json_int(json_array_get(a, i), &d) || d < 0 || d > 63)
			return false;
		dims[(*n)++] = (int32_t)d;
	}
	return true;
}

/* "{1,0}" -> dims; false if malformed. */
static bool brace_dims(const char *s, int32_t *dims, int32_t *n)
{
	*n = 0;
	if (!s)
		return true;
	if (*s != '{')
		return false;
	s++;
	while (*s && *s != '}') {
		char *e;
		long d = strtol(s, &e, 10);
		if (e == s || d < 0 || d > 63 || *n == 16)
			return false;
		dims[(*n)++] = (int32_t)d;
		s = e;
		while (*s == ',' || *s == ' ')
			s++;
	}
	return *s == '}';
}

static bool has_dim(const int32_t *dims, int32_t n, int32_t d)
{
	for (int32_t i = 0; i < n; i++)
		if (dims[i] == d)
			return true;
	return false;
}

static rm_dtype dtype_of(const hlo_shape *s)
{
	if (s->ptype < 0)
		return RM_DTYPE_BF16;
	const char *n = hlo__ptypes[s->ptype].name;
	if (strcmp(n, "f32") == 0 || strcmp(n, "f64") == 0)
		return RM_DTYPE_FP32;
	if (strcmp(n, "f16") == 0)
		return RM_DTYPE_FP16;
	if (str_starts(n, "f8e4m3"))
		return RM_DTYPE_FP8_E4M3;
	if (str_starts(n, "f8e5m2"))
		return RM_DTYPE_FP8_E5M2;
	if (strcmp(n, "s32") == 0)
		return RM_DTYPE_INT32;
	if (strcmp(n, "s8") == 0 || strcmp(n, "u8") == 0)
		return RM_DTYPE_UINT8;
	return RM_DTYPE_BF16;
}

/* The first array of a shape (a custom call's result tuple starts with its output). */
static const hlo_shape *first_array(const hlo_shape *s)
{
	while (s->ptype < 0 && s->rank > 0)
		s = &s->elems[0];
	return s;
}

/*
 * A dot's m, n, k and batch from its operand shapes and dimension numbers (XLA's DotGeneral:
 * batch dims shared, contracting dims summed over; the rest of lhs is m, of rhs n):
 * batch = prod(lhs batch dims), k = prod(lhs contracting dims), m = prod(other lhs dims),
 * n = prod(other rhs dims).
 */
static bool gemm_shape(const hlo_shape *lhs, const hlo_shape *rhs, const int32_t *lc, int32_t nlc,
		       const int32_t *rc, int32_t nrc, const int32_t *lb, int32_t nlb, const int32_t *rb, int32_t nrb,
		       rm_gemm_shape *g)
{
	if (lhs->ptype < 0 || rhs->ptype < 0 || nlc != nrc || nlb != nrb)
		return false;
	int64_t batch = 1, m = 1, n = 1, k = 1;
	for (int32_t i = 0; i < lhs->rank; i++) {
		if (has_dim(lb, nlb, i))
			batch *= lhs->dims[i];
		else if (has_dim(lc, nlc, i))
			k *= lhs->dims[i];
		else
			m *= lhs->dims[i];
	}
	for (int32_t i = 0; i < nlc; i++)
		if (lc[i] >= lhs->rank || rc[i] >= rhs->rank)
			return false;
	for (int32_t i = 0; i < nlb; i++)
		if (lb[i] >= lhs->rank || rb[i] >= rhs->rank)
			return false;
	for (int32_t i = 0; i < rhs->rank; i++)
		if (!has_dim(rb, nrb, i) && !has_dim(rc, nrc, i))
			n *= rhs->dims[i];
	*g = (rm_gemm_shape){.batch = batch < 1 ? 1 : batch,
			     .m = m < 1 ? 1 : m,
			     .n = n < 1 ? 1 : n,
			     .k = k < 1 ? 1 : k,
			     .dtype = dtype_of(lhs),
			     .has_batch_dims = nlb > 0};
	return true;
}

static const hlo_shape *operand_shape(const hlo_comp *c, const hlo_instr *in, int32_t k)
{
	return k < in->n_operands ? &c->instrs[in->operands[k]].shape : NULL;
}

/* A dot instruction (in a fusion or alone) as a GEMM. */
static bool dot_gemm(const hlo_comp *c, const hlo_instr *in, rm_gemm_shape *g)
{
	int32_t lc[16], rc[16], lb[16], rb[16], nlc, nrc, nlb, nrb;
	const hlo_attr *a;
	if (!brace_dims((a = hlo__attr(in, "lhs_contracting_dims")) ? a->value : NULL, lc, &nlc) ||
	    !brace_dims((a = hlo__attr(in, "rhs_contracting_dims")) ? a->value : NULL, rc, &nrc) ||
	    !brace_dims((a = hlo__attr(in, "lhs_batch_dims")) ? a->value : NULL, lb, &nlb) ||
	    !brace_dims((a = hlo__attr(in, "rhs_batch_dims")) ? a->value : NULL, rb, &nrb) || in->n_operands < 2)
		return false;
	return gemm_shape(operand_shape(c, in, 0), operand_shape(c, in, 1), lc, nlc, rc, nrc, lb, nlb, rb, nrb, g);
}

/* cuBLAS custom calls: gemm_backend_config.dot_dimension_numbers. */
static bool cublas_gemm(lower *L, const hlo_comp *c, const hlo_instr *in, rm_gemm_shape *g)
{
	json_t *bc = backend_config(in);
	json_t *gc = bc ? json_object_get(bc, "gemm_backend_config") : NULL;
	json_t *dd = gc ? json_object_get(gc, "dot_dimension_numbers") : NULL;
	int32_t lc[16], rc[16], lb[16], rb[16], nlc, nrc, nlb, nrb;
	bool ok = dd && in->n_operands >= 2 &&
		  json_dims(json_object_get(dd, "lhs_contracting_dimensions"), lc, &nlc) &&
		  json_dims(json_object_get(dd, "rhs_contracting_dimensions"), rc, &nrc) &&
		  json_dims(json_object_get(dd, "lhs_batch_dimensions"), lb, &nlb) &&
		  json_dims(json_object_get(dd, "rhs_batch_dimensions"), rb, &nrb) &&
		  gemm_shape(operand_shape(c, in, 0), operand_shape(c, in, 1), lc, nlc, rc, nrc, lb, nlb, rb, nrb, g);
	json_decref(bc);
	if (!ok)
		return fail(L, in, "a cuBLAS GEMM custom call without readable dot dimensions "
				   "(backend_config gemm_backend_config.dot_dimension_numbers)", NULL);
	return true;
}

/*
 * cuDNN fused attention (__cudnn$fmha*): Q is operand 0, K operand 1; bmm1_dot_dimension_numbers
 * names Q's batch dims (batch, heads) and its contracting dim (head_dim); the dim left is the
 * sequence. Without them, XLA's default [batch, seq, heads, head_dim] layout.
 */
static bool cudnn_attention(lower *L, const hlo_comp *c, const hlo_instr *in, rm_attention_cost *a)
{
	const hlo_shape *q = operand_shape(c, in, 0), *k = operand_shape(c, in, 1);
	if (!q || !k || q->ptype < 0 || k->ptype < 0 || q->rank != 4 || k->rank != 4)
		return fail(L, in, "a cuDNN attention custom call whose Q and K are not 4-d arrays", NULL);
	json_t *bc = backend_config(in);
	json_t *fc = bc ? json_object_get(bc, "cudnn_fmha_backend_config") : NULL;
	json_t *dd = fc ? json_object_get(fc, "bmm1_dot_dimension_numbers") : NULL;
	if (!dd && fc)
		dd = json_object_get(fc, "bmm1_grad_gemm1_dot_dimension_numbers");
	int32_t lb[16] = {0, 2}, lc[16] = {3}, rb[16] = {0, 2}, nlb = 2, nlc = 1, nrb = 2, rc[16], nrc;
	bool ok = true;
	if (dd && json_object_get(dd, "lhs_batch_dimensions")) {
		ok = json_dims(json_object_get(dd, "lhs_batch_dimensions"), lb, &nlb) &&
		     json_dims(json_object_get(dd, "lhs_contracting_dimensions"), lc, &nlc) &&
		     json_dims(json_object_get(dd, "rhs_batch_dimensions"), rb, &nrb) &&
		     json_dims(json_object_get(dd, "rhs_contracting_dimensions"), rc, &nrc) && nlb == 2 && nlc == 1 &&
		     nrb == 2 && lb[0] < 4 && lb[1] < 4 && lc[0] < 4 && rb[1] < 4;
		/* in a backward config the lhs may be dS or P rather than Q: keep the default then */
		if (!ok) {
			nlb = 2, nlc = 1, nrb = 2;
			lb[0] = rb[0] = 0, lb[1] = rb[1] = 2, lc[0] = 3;
			ok = true;
		}
	}
	int32_t seq_dim = -1;
	for (int32_t i = 0; i < 4; i++)
		if (!has_dim(lb, nlb, i) && !has_dim(lc, nlc, i))
			seq_dim = i;
	const char *mask = fc && json_is_string(json_object_get(fc, "mask_type"))
				   ? json_string_value(json_object_get(fc, "mask_type"))
				   : "";
	const hlo_attr *t = hlo__attr(in, "custom_call_target");
	memset(a, 0, sizeof(*a));
	a->shape.batch = q->dims[lb[0]];
	a->shape.heads = q->dims[lb[1]];
	a->shape.kv_heads = k->dims[rb[1]];
	a->shape.head_dim = q->dims[lc[0]];
	a->shape.seq = seq_dim >= 0 ? q->dims[seq_dim] : 1;
	a->shape.causal = strstr(mask, "CAUSAL") != NULL || (t && strstr(t->value, "Causal"));
	a->shape.fused = true;
	a->shape.dtype = dtype_of(q);
	a->backward = t && strstr(t->value, "Backward") != NULL;
	json_decref(bc);
	if (a->shape.batch < 1 || a->shape.heads < 1 || a->shape.kv_heads < 1 || a->shape.head_dim < 1 ||
	    a->shape.seq < 1 || a->shape.heads % a->shape.kv_heads != 0)
		return fail(L, in, "a cuDNN attention custom call with shapes remora cannot read", NULL);
	return ok;
}

/* ---- collectives ---- */

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

#define MAX_DEVICES (INT64_C(1) << 20)

/*
 * The first replica group's size and the nodes it spans, from replica_groups: the list form
 * {{0,1},{2,3}}, the iota form [G,S]<=[d0,d1,...] with an optional transpose T(p0,p1,...)
 * (groups: iota over d reshaped, transposed by p, flattened and cut into G rows of S), or empty
 * {} (all num_partitions x replica_count devices).
 */
static bool group_of(lower *L, const hlo_instr *in, const char *attr, int32_t *size, int32_t *span)
{
	const hlo_attr *a = hlo__attr(in, attr);
	int64_t ids[4096];
	int64_t n = 0;
	const char *v = a ? a->value : "{}";
	int64_t gpn = L->opt->gpus_per_node;
	if (v[0] == '[') {
		int64_t g[2], r[16], p[16];
		int nr = 0, np = 0;
		const char *s = v + 1;
		char *e;
		g[0] = strtoll(s, &e, 10);
		if (*e != ',')
			return fail(L, in, "replica_groups: expected [groups,size]<=[dims]", NULL);
		g[1] = strtoll(e + 1, &e, 10);
		if (strncmp(e, "]<=[", 4) != 0 || g[0] < 1 || g[1] < 1)
			return fail(L, in, "replica_groups: expected [groups,size]<=[dims]", NULL);
		/* device counts are far below 2^20 (the {} form caps there too); bounding each
		 * factor keeps the products below exact in int64 */
		if (g[0] > MAX_DEVICES || g[1] > MAX_DEVICES || g[0] * g[1] > MAX_DEVICES)
			return fail(L, in, "replica_groups: [groups,size] names more than 2^20 devices", NULL);
		s = e + 4;
		for (;;) {
			if (nr == 16)
				return fail(L, in, "replica_groups: more than 16 reshape dims", NULL);
			r[nr++] = strtoll(s, &e, 10);
			if (e == s || r[nr - 1] < 1 || r[nr - 1] > MAX_DEVICES)
				return fail(L, in, "replica_groups: a bad reshape dim", NULL);
			s = e;
			if (*s != ',')
				break;
			s++;
		}
		if (*s != ']')
			return fail(L, in, "replica_groups: expected ']' after the reshape dims", NULL);
		s++;
		if (s[0] == 'T' && s[1] == '(') {
			s += 2;
			for (;;) {
				if (np == 16)
					return fail(L, in, "replica_groups: more than 16 transpose dims", NULL);
				p[np++] = strtoll(s, &e, 10);
				if (e == s || p[np - 1] < 0 || p[np - 1] >= nr)
					return fail(L, in, "replica_groups: a bad transpose dim", NULL);
				s = e;
				if (*s != ',')
					break;
				s++;
			}
			if (*s != ')' || np != nr)
				return fail(L, in, "replica_groups: T(...) must permute every reshape dim", NULL);
		} else {
			for (int i = 0; i < nr; i++)
				p[i] = i;
		}
		int64_t total = 1;
		for (int i = 0; i < nr && total <= MAX_DEVICES; i++)
			total *= r[i]; /* each factor <= 2^20: no overflow before the bound stops it */
		if (total != g[0] * g[1])
			return fail(L, in, "replica_groups: [groups,size] does not hold the reshaped devices", NULL);
		n = g[1] < 4096 ? g[1] : 4096;
		/* element j of the transposed array: its index in each transposed dim, mapped back */
		for (int64_t j = 0; j < n; j++) {
			int64_t rem = j, idx[16];
			for (int i = nr - 1; i >= 0; i--) {
				idx[p[i]] = rem % r[p[i]];
				rem /= r[p[i]];
			}
			int64_t lin = 0;
			for (int i = 0; i < nr; i++)
				lin = lin * r[i] + idx[i];
			ids[j] = lin;
		}
		*size = (int32_t)g[1];
	} else if (strcmp(v, "{}") == 0) {
		int64_t all = L->m->num_partitions * L->m->replica_count;
		*size = (int32_t)(all > (1 << 20) ? (1 << 20) : all);
		n = *size < 4096 ? *size : 4096;
		for (int64_t j = 0; j < n; j++)
			ids[j] = j;
	} else {
		const char *s = v;
		while (*s == '{' || *s == ' ')
			s++;
		while (*s && *s != '}') {
			char *e;
			long long id = strtoll(s, &e, 10);
			if (e == s)
				return fail(L, in, "replica_groups: expected {{id,...},...}", NULL);
			if (n < 4096)
				ids[n] = id;
			n++;
			s = e;
			while (*s == ',' || *s == ' ')
				s++;
		}
		*size = (int32_t)(n > (1 << 20) ? (1 << 20) : n);
		if (n > 4096)
			n = 4096;
	}
	if (*size < 1)
		*size = 1;
	/* nodes: the distinct id / gpus_per_node among the group's ids (sorted, then counted) */
	int32_t nodes = 0;
	for (int64_t j = 0; j < n; j++)
		ids[j] /= gpn;
	qsort(ids, (size_t)n, sizeof(ids[0]), cmp_i64);
	for (int64_t j = 0; j < n; j++)
		if (j == 0 || ids[j] != ids[j - 1])
			nodes++;
	if (nodes < 1)
		nodes = 1;
	while (nodes > 1 && *size % nodes != 0)
		nodes--; /* the cost model needs equal ranks per node (sim/program.c validation) */
	*span = nodes;
	return true;
}

typedef enum coll_class { COLL_NONE, COLL_SYNC, COLL_START, COLL_DONE } coll_class;

/* The collective an opcode names and whether it is a start, a done or synchronous. */
static coll_class collective_of(const char *op, rm_coll *c)
{
	static const struct {
		const char *name;
		rm_coll coll;
	} rows[] = {
		{"all-gather", RM_COLL_ALL_GATHER},   {"reduce-scatter", RM_COLL_REDUCE_SCATTER},
		{"all-reduce", RM_COLL_ALL_REDUCE},   {"all-to-all", RM_COLL_ALL_TO_ALL},
		{"ragged-all-to-all", RM_COLL_ALL_TO_ALL}, {"collective-permute", RM_COLL_SEND_RECV},
		{"collective-broadcast", RM_COLL_ALL_GATHER},
	};
	for (size_t i = 0; i < RM_ARRAY_SIZE(rows); i++) {
		size_t n = strlen(rows[i].name);
		if (strncmp(op, rows[i].name, n) != 0)
			continue;
		*c = rows[i].coll;
		if (op[n] == '\0')
			return COLL_SYNC;
		if (strcmp(op + n, "-start") == 0)
			return COLL_START;
		if (strcmp(op + n, "-done") == 0)
			return COLL_DONE;
	}
	return COLL_NONE;
}

/* The collective's cost: operand bytes, the gathered buffer for an all-gather (operand x group). */
static bool collective_cost(lower *L, const hlo_comp *c, const hlo_instr *in, rm_coll op, rm_cost_op *cost)
{
	int64_t in_bytes = 0;
	for (int32_t k = 0; k < in->n_operands; k++)
		in_bytes += hlo__shape_bytes(&c->instrs[in->operands[k]].shape);
	int32_t size = 2, span = 1;
	if (op == RM_COLL_SEND_RECV) {
		/* a permute's peers: the devices of source_target_pairs, not a group */
		if (!group_of(L, in, "source_target_pairs", &size, &span))
			return false;
		size = 2;
		span = span > 1 ? 2 : 1;
	} else if (!group_of(L, in, "replica_groups", &size, &span)) {
		return false;
	}
	memset(cost, 0, sizeof(*cost));
	cost->kind = RM_COST_COLLECTIVE;
	cost->collective.op = op;
	cost->collective.bytes = op == RM_COLL_ALL_GATHER ? in_bytes * size : in_bytes;
	cost->collective.group_size = size;
	cost->collective.span = span;
	return true;
}

/* ---- the walk ---- */

static bool lower_comp(lower *L, int32_t ci, hval *const *params, int32_t n_params, const char *prefix,
		       hval **result);

static void note_name(lower *L, const char *what);

static void note_unknown(lower *L, const char *what)
{
	L->rep->unknown++;
	note_name(L, what);
}

/* An unknown opcode inside a fusion: named, counted apart (the fusion is one op of its own). */
static void note_unknown_fused(lower *L, const char *what)
{
	L->rep->unknown_in_fusions++;
	note_name(L, what);
}

static void note_name(lower *L, const char *what)
{
	for (int32_t i = 0; i < L->rep->n_unknown_names; i++)
		if (strcmp(L->rep->unknown_names[i], what) == 0) {
			L->rep->unknown_counts[i]++;
			return;
		}
	if (L->rep->n_unknown_names < (int32_t)RM_ARRAY_SIZE(L->rep->unknown_names)) {
		int32_t i = L->rep->n_unknown_names++;
		snprintf(L->rep->unknown_names[i], sizeof(L->rep->unknown_names[i]), "%s", what);
		L->rep->unknown_counts[i] = 1;
	}
}

static rm_cost_op membound(const hlo_comp *c, const hlo_instr *in)
{
	rm_cost_op cost;
	memset(&cost, 0, sizeof(cost));
	cost.kind = RM_COST_ELEMENTWISE;
	for (int32_t k = 0; k < in->n_operands; k++)
		cost.elementwise.bytes_read += hlo__shape_bytes(&c->instrs[in->operands[k]].shape);
	cost.elementwise.bytes_written = hlo__shape_bytes(&in->shape);
	return cost;
}

/* Opcodes that launch no kernel (buffer bookkeeping, scalars the runtime folds). */
static bool no_cost_op(const char *op)
{
	static const char *const rows[] = {"parameter", "constant", "get-tuple-element", "tuple", "bitcast",
					   "after-all", "partition-id", "replica-id", "opt-barrier",
					   "add-dependency", "domain", "get-dimension-size", "async-update"};
	for (size_t i = 0; i < RM_ARRAY_SIZE(rows); i++)
		if (strcmp(op, rows[i]) == 0)
			return true;
	return false;
}

/* Opcodes XLA GPU runs as one memory-bound kernel when left unfused. */
static bool membound_op(const char *op)
{
	static const char *const rows[] = {
		"copy", "convert", "broadcast", "reduce", "transpose", "slice", "dynamic-slice",
		"dynamic-update-slice", "concatenate", "pad", "select", "compare", "add", "subtract",
		"multiply", "divide", "maximum", "minimum", "exponential", "log", "tanh", "rsqrt", "sqrt",
		"negate", "abs", "reshape", "reverse", "gather", "scatter", "iota", "sort", "reduce-window",
		"select-and-scatter", "clamp", "power", "and", "or", "not", "xor", "rng-bit-generator",
		"rng", "logistic", "exponential-minus-one", "log-plus-one", "sign", "floor", "ceil",
		"round-nearest-even", "round-nearest-afz", "bitcast-convert", "is-finite", "erf", "cosine",
		"sine", "remainder", "shift-left", "shift-right-logical", "shift-right-arithmetic",
		"reduce-precision", "real", "imag", "atan2", "cbrt", "popcnt", "clz", "stochastic-convert",
	};
	for (size_t i = 0; i < RM_ARRAY_SIZE(rows); i++)
		if (strcmp(op, rows[i]) == 0)
			return true;
	return false;
}

static int32_t called(lower *L, const hlo_instr *in, const char *attr)
{
	const hlo_attr *a = hlo__attr(in, attr);
	if (!a)
		return -1;
	const char *v = a->value;
	if (*v == '{')
		v++; /* calls={%a} */
	char name[256];
	size_t n = 0;
	if (*v == '%')
		v++;
	while (v[n] && v[n] != '}' && v[n] != ',' && n + 1 < sizeof(name)) {
		name[n] = v[n];
		n++;
	}
	name[n] = '\0';
	return hlo__comp_find(L->m, name);
}

/* The constant an s32/s64 scalar constant instruction holds; false if it is not one. */
static bool const_int(const hlo_instr *k, int64_t *v)
{
	if (strcmp(k->opcode, "constant") != 0)
		return false;
	char *e;
	long long x = strtoll(k->args, &e, 10);
	if (e == k->args || *e)
		return false;
	*v = x;
	return true;
}

/* Where the induction variable i (get-tuple-element index k of the condition's parameter) starts:
 * element k of the tuple the while is given, when that is a constant; else 0. */
static int64_t loop_start(const hlo_comp *caller, const hlo_instr *in, const hlo_comp *cond, const hlo_instr *ivar)
{
	int64_t start = 0, k;
	if (strcmp(ivar->opcode, "get-tuple-element") != 0 || ivar->n_operands != 1 ||
	    strcmp(cond->instrs[ivar->operands[0]].opcode, "parameter") != 0 || in->n_operands != 1)
		return 0;
	const hlo_attr *ix = hlo__attr(ivar, "index");
	k = ix ? strtoll(ix->value, NULL, 10) : -1;
	const hlo_instr *init = &caller->instrs[in->operands[0]];
	if (strcmp(init->opcode, "tuple") == 0 && k >= 0 && k < init->n_operands &&
	    const_int(&caller->instrs[init->operands[k]], &start))
		return start;
	return 0;
}

/* The trip count of a while: backend_config known_trip_count.n, else a condition `i < N`
 * (compare direction=LT against a constant N; LE gives N + 1; GT/GE with the constant first),
 * i counting by one from its initial value in the while's operand tuple when that is a constant,
 * else from 0. */
static bool trip_count(lower *L, const hlo_comp *caller, const hlo_instr *in, int64_t *trips)
{
	json_t *bc = backend_config(in);
	json_t *kt = bc ? json_object_get(bc, "known_trip_count") : NULL;
	int64_t n;
	if (kt && json_int(json_object_get(kt, "n"), &n) && n >= 0) {
		*trips = n;
		json_decref(bc);
		return true;
	}
	json_decref(bc);
	int32_t ci = called(L, in, "condition");
	if (ci < 0)
		return fail(L, in, "a while loop whose condition= computation is not in the module", NULL);
	const hlo_comp *c = &L->m->comps[ci];
	const hlo_instr *root = c->root >= 0 ? &c->instrs[c->root] : NULL;
	const hlo_attr *dir = root ? hlo__attr(root, "direction") : NULL;
	if (root && strcmp(root->opcode, "compare") == 0 && dir && root->n_operands == 2) {
		const hlo_instr *rhs = &c->instrs[root->operands[1]];
		const hlo_instr *lhs = &c->instrs[root->operands[0]];
		const hlo_instr *k = strcmp(rhs->opcode, "constant") == 0 ? rhs : lhs;
		const hlo_instr *ivar = k == rhs ? lhs : rhs;
		bool lt = (k == rhs && strcmp(dir->value, "LT") == 0) || (k == lhs && strcmp(dir->value, "GT") == 0);
		bool le = (k == rhs && strcmp(dir->value, "LE") == 0) || (k == lhs && strcmp(dir->value, "GE") == 0);
		int64_t v;
		if ((lt || le) && const_int(k, &v)) {
			int64_t t = v - loop_start(caller, in, c, ivar) + (le ? 1 : 0);
			*trips = t > 0 ? t : 0;
			return true;
		}
	}
	return fail(L, in, "a while loop without a trip count: no backend_config known_trip_count, and its condition "
			   "is not `i < constant`", NULL);
}

static bool record_sync(lower *L, const hlo_instr *in, const char *name, const rm_cost_op *cost, bool is_sync_attr)
{
	rm_hlo_report *r = L->rep;
	r->coll_sync[cost->collective.op]++;
	if (r->n_sync == r->cap_sync) {
		r->cap_sync = r->cap_sync ? r->cap_sync * 2 : 16;
		r->sync = rm_xrealloc(r->sync, sizeof(*r->sync) * (size_t)r->cap_sync);
	}
	rm_hlo_sync_collective *s = &r->sync[r->n_sync++];
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->op = cost->collective.op;
	s->bytes = cost->collective.bytes;
	s->group_size = cost->collective.group_size;
	s->is_sync_attr = is_sync_attr;
	s->line = in->line;
	return emit_compute(L, in, name, cost,
			    is_sync_attr ? "XLA: is_sync on the start (frontend attribute or collective_backend_config)"
					 : "XLA: synchronous collective (no start/done pair)");
}

/* Whether XLA made an async op synchronous: frontend_attributes is_sync="true" or (what XLA's GPU
 * compiler itself writes) backend_config collective_backend_config.is_sync true. */
static bool is_sync_op(const hlo_instr *in)
{
	char v[16];
	if (frontend_attr(in, "is_sync", v, sizeof(v)) && strcmp(v, "true") == 0)
		return true;
	const hlo_attr *a = hlo__attr(in, "backend_config");
	if (!a || !strstr(a->value, "is_sync"))
		return false;
	json_t *bc = backend_config(in);
	json_t *cb = bc ? json_object_get(bc, "collective_backend_config") : NULL;
	bool sync = cb && json_is_true(json_object_get(cb, "is_sync"));
	json_decref(bc);
	return sync;
}

/* The collective an async-start wraps: the called computation's root (or its one collective). */
static const hlo_instr *async_wrapped(lower *L, const hlo_instr *in, const hlo_comp **wc)
{
	int32_t ci = called(L, in, "calls");
	if (ci < 0)
		return NULL;
	*wc = &L->m->comps[ci];
	const hlo_comp *c = *wc;
	return c->root >= 0 ? &c->instrs[c->root] : NULL;
}

/* One instruction being lowered: where it is, its values so far, its program name. */
typedef struct step {
	lower *L;
	const hlo_comp *c;
	const hlo_instr *in;
	hval **vals;
	const char *prefix;
	char name[512];
	hval **out;
} step;

/* tuple, get-tuple-element and the pass-through ops: values only, no kernel. */
static bool lower_value_op(step *s)
{
	const hlo_instr *in = s->in;
	s->L->rep->no_cost++;
	if (strcmp(in->opcode, "tuple") == 0) {
		hval *t = val_tuple(s->L, in->n_operands);
		for (int32_t k = 0; k < in->n_operands; k++)
			t->elems[k] = s->vals[in->operands[k]];
		*s->out = t;
		return true;
	}
	hval *v = in->n_operands > 0 ? s->vals[in->operands[0]] : &NONE;
	if (strcmp(in->opcode, "get-tuple-element") == 0) {
		const hlo_attr *ix = hlo__attr(in, "index");
		long k = ix ? strtol(ix->value, NULL, 10) : 0;
		if (v->n > 0)
			v = k >= 0 && k < v->n ? v->elems[k] : &NONE;
	}
	*s->out = v;
	return true;
}

/* A collective: w (in computation wc) says which and how big; sync puts it on the compute stream
 * (start_sync: a start XLA marked is_sync, else an op without start/done), else it is async. */
static bool lower_collective(step *s, const hlo_comp *wc, const hlo_instr *w, rm_coll coll, bool sync,
			     bool start_sync)
{
	rm_cost_op cost;
	if (!collective_cost(s->L, wc, w, coll, &cost))
		return false;
	if (sync) {
		if (start_sync)
			*s->out = &SYNCED;
		return record_sync(s->L, s->in, s->name, &cost, start_sync);
	}
	int32_t ev = emit_async(s->L, s->in, s->name, &cost, STREAM_COLL);
	if (ev < 0)
		return false;
	s->L->rep->coll_async[coll]++;
	*s->out = val_leaf(s->L, ev);
	return true;
}

/* Walks computation ci with the instruction's operands as its parameters, names under sub. */
static bool lower_called(step *s, int32_t ci, const char *sub, hval **result)
{
	const hlo_instr *in = s->in;
	hval **ps = rm_new(hval *, (size_t)(in->n_operands ? in->n_operands : 1));
	for (int32_t k = 0; k < in->n_operands; k++)
		ps[k] = s->vals[in->operands[k]];
	char pre[600];
	snprintf(pre, sizeof(pre), "%s%s/", s->prefix, sub);
	s->L->site = in;
	bool ok = lower_comp(s->L, ci, ps, in->n_operands, pre, result);
	free(ps);
	return ok;
}

/* async-start: a wrapped collective (async unless marked is_sync), or another op run in place. */
static bool lower_async_start(step *s, bool is_sync)
{
	const hlo_comp *wc = NULL;
	const hlo_instr *w = async_wrapped(s->L, s->in, &wc);
	if (!w)
		return fail(s->L, s->in, "an async-start whose calls= computation is not in the module", NULL);
	rm_coll coll;
	if (collective_of(w->opcode, &coll) == COLL_SYNC) {
		bool sync = is_sync || is_sync_op(w);
		return lower_collective(s, wc, w, coll, sync, sync);
	}
	hval *r;
	*s->out = &SYNCED;
	return lower_called(s, (int32_t)(wc - s->L->m->comps), s->in->name, &r);
}

/* A done: the next compute op waits for the async op its operand carries. */
static bool lower_done(step *s)
{
	const hlo_instr *in = s->in;
	bool found = false;
	if (in->n_operands > 0)
		add_done_waits(s->L, s->vals[in->operands[0]], &found);
	if (!found && !(in->n_operands > 0 && s->vals[in->operands[0]] == &SYNCED))
		s->L->rep->unmatched_done++;
	s->L->rep->no_cost++;
	return true;
}

/* copy-start: host-to-device when the source is in host memory, device-to-host when the
 * destination is, else device-to-device. */
static bool lower_copy_start(step *s)
{
	const hlo_shape *src = operand_shape(s->c, s->in, 0);
	const hlo_shape *dst = first_array(&s->in->shape);
	rm_cost_op cost;
	memset(&cost, 0, sizeof(cost));
	cost.kind = RM_COST_COPY;
	cost.copy.bytes = src ? hlo__shape_bytes(src) : 0;
	bool from_host = src && first_array(src)->mem_space == HOST_MEMORY_SPACE;
	bool to_host = dst->mem_space == HOST_MEMORY_SPACE;
	cost.copy.dir = from_host && !to_host ? RM_COPY_H2D : to_host && !from_host ? RM_COPY_D2H : RM_COPY_D2D;
	int32_t ev = emit_async(s->L, s->in, s->name, &cost, cost.copy.dir == RM_COPY_H2D ? STREAM_H2D : STREAM_D2H);
	if (ev < 0)
		return false;
	s->L->rep->copies++;
	*s->out = val_leaf(s->L, ev);
	return true;
}

/* while: the body trip-count times, each iteration's result the next one's parameter. */
static bool lower_while(step *s)
{
	const hlo_instr *in = s->in;
	int64_t trips;
	if (!trip_count(s->L, s->c, in, &trips))
		return false;
	int32_t bi = called(s->L, in, "body");
	if (bi < 0)
		return fail(s->L, in, "a while loop whose body= computation is not in the module", NULL);
	s->L->rep->whiles++;
	/* refuse a trip count the op limit cannot hold before unrolling anything: each iteration
	 * emits about one op per instruction of the body (more when it nests loops) */
	int32_t body_instrs = s->L->m->comps[bi].n_instrs > 0 ? s->L->m->comps[bi].n_instrs : 1;
	double left = (double)s->L->opt->max_ops - (double)s->L->n_ops;
	if ((double)trips * (double)body_instrs > left * 4.0) {
		char what[200];
		snprintf(what, sizeof(what), ": %lld iterations of a %d-instruction body, against at most %lld ops",
			 (long long)trips, body_instrs, (long long)s->L->opt->max_ops);
		return fail(s->L, in, "the unrolled program would pass the limit on ops", what);
	}
	hval *v = in->n_operands > 0 ? s->vals[in->operands[0]] : &NONE;
	for (int64_t t = 0; t < trips; t++) {
		s->L->site = in;
		char pre[600];
		snprintf(pre, sizeof(pre), "%s%s/i%lld/", s->prefix, in->name, (long long)t);
		hval *r;
		if (!lower_comp(s->L, bi, &v, 1, pre, &r))
			return false;
		v = r;
		s->L->rep->iterations++;
	}
	*s->out = v;
	return true;
}

static bool emit_kind(step *s, const rm_cost_op *cost, int64_t *counter)
{
	if (counter)
		(*counter)++;
	return emit_compute(s->L, s->in, s->name, cost, NULL);
}

/* A fusion: the largest dot it holds as a GEMM (cuBLAS and Triton GEMM fusions), else
 * memory-bound by its operands and result. */
static bool lower_fusion(step *s)
{
	rm_cost_op cost;
	int32_t fi = called(s->L, s->in, "calls");
	if (fi >= 0) {
		const hlo_comp *f = &s->L->m->comps[fi];
		rm_gemm_shape best = {0}, g;
		double best_flops = 0;
		/* opcodes of the fused computation remora does not know are counted as at top level */
		for (int32_t k = 0; k < f->n_instrs; k++) {
			const char *fop = f->instrs[k].opcode;
			if (strcmp(fop, "dot") != 0 && strcmp(fop, "fusion") != 0 && strcmp(fop, "custom-call") != 0 &&
			    !membound_op(fop) && !no_cost_op(fop))
				note_unknown_fused(s->L, fop);
		}
		for (int32_t k = 0; k < f->n_instrs; k++)
			if (strcmp(f->instrs[k].opcode, "dot") == 0 && dot_gemm(f, &f->instrs[k], &g)) {
				double fl = 2.0 * (double)g.batch * (double)g.m * (double)g.n * (double)g.k;
				if (fl > best_flops) {
					best_flops = fl;
					best = g;
				}
			}
		if (best_flops > 0) {
			memset(&cost, 0, sizeof(cost));
			cost.kind = RM_COST_GEMM;
			cost.gemm = best;
			return emit_kind(s, &cost, &s->L->rep->gemm);
		}
	}
	cost = membound(s->c, s->in);
	return emit_kind(s, &cost, &s->L->rep->memory_bound);
}

/* custom-call: cuBLAS GEMMs, cuDNN attention; other targets unknown, memory-bound. */
static bool lower_custom_call(step *s)
{
	const hlo_attr *t = hlo__attr(s->in, "custom_call_target");
	char target[128];
	snprintf(target, sizeof(target), "%s", t ? t->value : "");
	if (target[0] == '"') {
		memmove(target, target + 1, strlen(target));
		char *q = strchr(target, '"');
		if (q)
			*q = '\0';
	}
	rm_cost_op cost;
	memset(&cost, 0, sizeof(cost));
	if (str_starts(target, "__cublas$gemm") || str_starts(target, "__cublas$lt$matmul")) {
		cost.kind = RM_COST_GEMM;
		return cublas_gemm(s->L, s->c, s->in, &cost.gemm) && emit_kind(s, &cost, &s->L->rep->gemm);
	}
	if (str_starts(target, "__cudnn$fmha")) {
		cost.kind = RM_COST_ATTENTION;
		return cudnn_attention(s->L, s->c, s->in, &cost.attention) && emit_kind(s, &cost, &s->L->rep->attention);
	}
	char what[160];
	snprintf(what, sizeof(what), "custom-call:%s", target);
	note_unknown(s->L, what);
	cost = membound(s->c, s->in);
	return emit_kind(s, &cost, NULL);
}

/* One instruction of computation c; *out its value. */
static bool lower_instr(lower *L, const hlo_comp *c, int32_t i, hval **vals, const char *prefix, hval **out)
{
	step s = {.L = L, .c = c, .in = &c->instrs[i], .vals = vals, .prefix = prefix, .out = out};
	const char *op = s.in->opcode;
	snprintf(s.name, sizeof(s.name), "%s%s", prefix, s.in->name);
	*out = &NONE;
	char sa[32];
	if (frontend_attr(s.in, "_xla_stream_annotation", sa, sizeof(sa)))
		L->rep->stream_annotated++;
	rm_coll coll;
	coll_class cc = collective_of(op, &coll);
	if (cc == COLL_SYNC || cc == COLL_START) {
		bool start_sync = cc == COLL_START && is_sync_op(s.in);
		return lower_collective(&s, c, s.in, coll, cc == COLL_SYNC || start_sync, start_sync);
	}
	if (cc == COLL_DONE || strcmp(op, "async-done") == 0 || strcmp(op, "copy-done") == 0)
		return lower_done(&s);
	if (strcmp(op, "tuple") == 0 || strcmp(op, "get-tuple-element") == 0 || strcmp(op, "bitcast") == 0 ||
	    strcmp(op, "opt-barrier") == 0 || strcmp(op, "async-update") == 0 || strcmp(op, "add-dependency") == 0)
		return lower_value_op(&s);
	if (strcmp(op, "async-start") == 0)
		return lower_async_start(&s, is_sync_op(s.in));
	if (strcmp(op, "copy-start") == 0)
		return lower_copy_start(&s);
	if (no_cost_op(op)) {
		L->rep->no_cost++;
		return true;
	}
	if (strcmp(op, "while") == 0)
		return lower_while(&s);
	if (strcmp(op, "call") == 0) {
		int32_t ci = called(L, s.in, "to_apply");
		if (ci < 0)
			return fail(L, s.in, "a call whose to_apply= computation is not in the module", NULL);
		return lower_called(&s, ci, s.in->name, out);
	}
	if (strcmp(op, "fusion") == 0)
		return lower_fusion(&s);
	if (strcmp(op, "custom-call") == 0)
		return lower_custom_call(&s);
	rm_cost_op cost;
	if (strcmp(op, "dot") == 0) {
		memset(&cost, 0, sizeof(cost));
		cost.kind = RM_COST_GEMM;
		if (!dot_gemm(c, s.in, &cost.gemm))
			return fail(L, s.in, "a dot whose dimension numbers remora cannot read", NULL);
		return emit_kind(&s, &cost, &L->rep->gemm);
	}
	cost = membound(c, s.in);
	if (membound_op(op))
		return emit_kind(&s, &cost, &L->rep->memory_bound);
	note_unknown(L, op);
	return emit_kind(&s, &cost, NULL);
}

/* Walks computation ci with params (its parameter(k) values; one tuple for a while body). */
static bool lower_comp(lower *L, int32_t ci, hval *const *params, int32_t n_params, const char *prefix,
		       hval **result)
{
	const hlo_comp *c = &L->m->comps[ci];
	if (++L->depth > 64) {
		L->depth--;
		char what[300];
		snprintf(what, sizeof(what), " (%%%s calls itself, directly or through others?)", c->name);
		return fail(L, L->site, "computations nested more than 64 deep", what);
	}
	hval **vals = rm_new(hval *, (size_t)(c->n_instrs ? c->n_instrs : 1));
	bool ok = true;
	for (int32_t i = 0; i < c->n_instrs && ok; i++) {
		const hlo_instr *in = &c->instrs[i];
		if (strcmp(in->opcode, "parameter") == 0) {
			long k = strtol(in->args, NULL, 10);
			vals[i] = k >= 0 && k < n_params && params[k] ? params[k] : &NONE;
			L->rep->no_cost++;
			continue;
		}
		ok = lower_instr(L, c, i, vals, prefix, &vals[i]);
	}
	*result = ok && c->root >= 0 ? vals[c->root] : &NONE;
	free(vals);
	L->depth--;
	return ok;
}

void rm_hlo_report_finish(rm_hlo_report *rep)
{
	if (!rep)
		return;
	free(rep->sync);
	rep->sync = NULL;
	rep->n_sync = rep->cap_sync = 0;
}

rm_program *rm_hlo_lower(const rm_hlo_module *m, const rm_hlo_lower_options *opt, rm_hlo_report *rep,
			 rm_error *err)
{
	rm_hlo_lower_options o = opt ? *opt : (rm_hlo_lower_options){0};
	if (o.gpus_per_node < 1)
		o.gpus_per_node = 8;
	if (o.max_ops < 1)
		o.max_ops = 20000000;
	rm_hlo_report scratch;
	if (!rep)
		rep = &scratch;
	memset(rep, 0, sizeof(*rep));
	if (m->entry < 0) {
		rm_error_set(err, RM_INVALID, m->file[0] ? m->file : NULL, m->line, m->col,
			     "module %s has no ENTRY computation", m->name);
		return NULL;
	}
	lower L = {.m = m, .opt = &o, .rep = rep, .err = err, .ready_ev = -1};
	L.prog = rm_program_create(m->name);
	rm_program_add_stream(L.prog, "compute", RM_STREAM_COMPUTE, 0);
	rm_program_add_stream(L.prog, "collective", RM_STREAM_COLLECTIVE, -1);
	rm_program_add_stream(L.prog, "copy_h2d", RM_STREAM_COPY, 0);
	rm_program_add_stream(L.prog, "copy_d2h", RM_STREAM_COPY, 0);
	hval *r;
	bool ok = lower_comp(&L, m->entry, NULL, 0, "", &r);
	if (ok)
		flush_pending(&L, -1);
	else if (L.have_pending)
		free((void *)L.pending.waits);
	free(L.waits);
	for (block *b = L.arena, *n; b; b = n) {
		n = b->next;
		free(b);
	}
	L.prog->runtime.set = true;
	snprintf(L.prog->runtime.hardware, sizeof(L.prog->runtime.hardware), "%s", o.hardware ? o.hardware : "h100-sxm");
	L.prog->runtime.kernels.attention = RM_ATTN_CUDNN; /* XLA on Hopper calls cuDNN's fused SDPA */
	L.prog->runtime.kernels.fused = true;               /* XLA's fusions are generated kernels */
	L.prog->model_flops = -1;
	if (ok && rm_program_validate(L.prog, m->file[0] ? m->file : NULL, err) != RM_OK)
		ok = false;
	if (rep == &scratch)
		rm_hlo_report_finish(rep);
	if (!ok) {
		rm_program_destroy(L.prog);
		return NULL;
	}
	return L.prog;
}
