/*
 * The execution plan of a schedule program (remora/exec.h): memory plan, operands, counts and
 * the checks that run before anything launches. Plain C: no CUDA header.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "remora/exec.h"
#include "remora/workload.h"

static const char *const region_names[RM_EXEC_REGION_COUNT] = {"pool", "persistent", "host", "scratch"};

const char *rm_exec_region_name(rm_exec_region r)
{
	return (unsigned)r < RM_EXEC_REGION_COUNT ? region_names[r] : "unknown";
}

static const char *const attention_mode_names[] = {"fused", "unfused"};

const char *rm_exec_attention_mode_name(rm_exec_attention_mode m)
{
	return (unsigned)m < 2 ? attention_mode_names[m] : "unknown";
}

bool rm_exec_attention_mode_parse(const char *name, rm_exec_attention_mode *out)
{
	for (unsigned i = 0; i < 2; i++)
		if (strcmp(name, attention_mode_names[i]) == 0) {
			*out = (rm_exec_attention_mode)i;
			return true;
		}
	return false;
}

/*
 * Byte arithmetic of the plan saturates at RM_EXEC_BYTES_MAX instead of overflowing int64: a
 * program may give sizes up to 2^61 each (program_json.c), and their products (a GEMM's batch x m
 * x k x element size) or sums (a region) can pass 2^63. A saturated count is larger than any
 * device, and rm_exec_plan_check refuses the op that reached it (plan->oversized_op).
 */
static int64_t sat_add(int64_t a, int64_t b)
{
	int64_t r;
	return __builtin_add_overflow(a, b, &r) || r > RM_EXEC_BYTES_MAX ? RM_EXEC_BYTES_MAX : r;
}

static int64_t sat_mul(int64_t a, int64_t b)
{
	int64_t r;
	return __builtin_mul_overflow(a, b, &r) || r > RM_EXEC_BYTES_MAX ? RM_EXEC_BYTES_MAX : r;
}

static int64_t sat_mul4(int64_t a, int64_t b, int64_t c, int64_t d)
{
	return sat_mul(sat_mul(a, b), sat_mul(c, d));
}

static int64_t align_up(int64_t bytes)
{
	if (bytes >= RM_EXEC_BYTES_MAX)
		return RM_EXEC_BYTES_MAX;
	return (bytes + RM_EXEC_ALIGN - 1) / RM_EXEC_ALIGN * RM_EXEC_ALIGN;
}

/* ---- attention lowering ------------------------------------------------------------------- */

static rm_gemm_shape batched(int64_t batch, int64_t m, int64_t n, int64_t k, rm_dtype dtype)
{
	return (rm_gemm_shape){.batch = batch, .m = m, .n = n, .k = k, .dtype = dtype, .has_batch_dims = true};
}

int rm_exec_attention_lowering(const rm_attention_cost *a, rm_gemm_shape gemms[5], rm_elementwise_cost *softmax)
{
	const rm_attention_shape *sh = &a->shape;
	int64_t bh = sat_mul(sh->batch, sh->heads), s = sh->seq, d = sh->head_dim;
	int64_t es = rm_dtype_size(sh->dtype);
	int64_t scores = sat_mul4(bh, s, s, es);
	double pairs = (double)bh * (double)s * (double)s;
	int n = 0;
	gemms[n++] = batched(bh, s, s, d, sh->dtype); /* S = Q K^T (recomputed in the backward) */
	if (!a->backward) {
		gemms[n++] = batched(bh, s, d, s, sh->dtype); /* O = P V */
		*softmax = (rm_elementwise_cost){.bytes_read = scores, .bytes_written = scores,
						 .flops = 5.0 * pairs};
		return n;
	}
	gemms[n++] = batched(bh, s, d, s, sh->dtype); /* dV = P^T dO */
	gemms[n++] = batched(bh, s, s, d, sh->dtype); /* dP = dO V^T */
	gemms[n++] = batched(bh, s, d, s, sh->dtype); /* dQ = dS K */
	gemms[n++] = batched(bh, s, d, s, sh->dtype); /* dK = dS^T Q */
	/* the recomputed softmax (read S, write P) and its backward (read P, dP; write dS) */
	*softmax = (rm_elementwise_cost){.bytes_read = sat_mul(scores, 3), .bytes_written = sat_add(scores, scores),
					 .flops = 9.0 * pairs};
	return n;
}

int64_t rm_exec_attention_chunk(const rm_attention_cost *a)
{
	const rm_attention_shape *sh = &a->shape;
	int64_t per = sat_mul(sat_mul(sh->seq, sh->seq), rm_dtype_size(sh->dtype));
	int64_t bh = sat_mul(sh->batch, sh->heads);
	int64_t chunk = per > 0 ? RM_EXEC_SCORES_BYTES / per : bh;
	return chunk < 1 ? 1 : chunk > bh ? bh : chunk;
}

int rm_exec_attention_fused_bytes(const rm_attention_cost *a, int64_t bytes[RM_ATTN_F_COUNT])
{
	const rm_attention_shape *sh = &a->shape;
	int64_t es = rm_dtype_size(sh->dtype);
	int64_t kvh = sh->kv_heads > 0 ? sh->kv_heads : sh->heads;
	int64_t rows = sat_mul(sat_mul(sh->batch, sh->heads), sh->seq); /* query rows, b*h*s */
	int64_t q = sat_mul(sat_mul(rows, sh->head_dim), es);
	int64_t kv = sat_mul(sat_mul4(sh->batch, kvh, sh->seq, sh->head_dim), es);
	int64_t stats = sat_mul(rows, 4); /* fp32 */
	bytes[RM_ATTN_F_Q] = q;
	bytes[RM_ATTN_F_K] = bytes[RM_ATTN_F_V] = kv;
	bytes[RM_ATTN_F_O] = q;
	bytes[RM_ATTN_F_STATS] = stats;
	if (!a->backward)
		return RM_ATTN_F_DO;
	bytes[RM_ATTN_F_DO] = bytes[RM_ATTN_F_DQ] = q;
	bytes[RM_ATTN_F_DK] = bytes[RM_ATTN_F_DV] = kv;
	bytes[RM_ATTN_F_DQ_ACCUM] = sat_mul(sat_mul(rows, sh->head_dim), 4); /* fp32 */
	bytes[RM_ATTN_F_SOFTMAX_SUM] = stats;
	return RM_ATTN_F_COUNT;
}

bool rm_exec_attention_fusable(const rm_attention_cost *a)
{
	const rm_attention_shape *sh = &a->shape;
	int64_t kvh = sh->kv_heads > 0 ? sh->kv_heads : sh->heads;
	bool one_dim = sh->v_head_dim <= 0 || sh->v_head_dim == sh->head_dim;
	return sh->fused && (sh->dtype == RM_DTYPE_BF16 || sh->dtype == RM_DTYPE_FP16) && one_dim &&
	       sh->head_dim > 0 && sh->head_dim % 8 == 0 && sh->head_dim <= 256 && kvh > 0 && sh->heads % kvh == 0;
}

uint32_t rm_exec_alignment(uint64_t address)
{
	uint32_t al = 256;
	while (al > 1 && address % al != 0)
		al >>= 1;
	return al;
}

double rm_exec_attention_unfused_s(const rm_attention_cost *a, const rm_hw_profile *hw)
{
	rm_gemm_shape g[5];
	rm_elementwise_cost sm;
	int n = rm_exec_attention_lowering(a, g, &sm);
	double t = rm_cost_elementwise_s(&sm, hw, NULL);
	for (int i = 0; i < n; i++)
		t += rm_cost_gemm_s(&g[i], hw, 0);
	/* chunks x (GEMMs + softmax) kernels; the first is the op's own launch, the model's t0
	 * covers it; the others launch back to back on the stream */
	int64_t bh = sat_mul(a->shape.batch, a->shape.heads), chunk = rm_exec_attention_chunk(a);
	int64_t kernels = (bh + chunk - 1) / chunk * (n + (a->backward ? 2 : 1)); /* 2 softmax kernels */
	return t + (double)(kernels - 1) * hw->launch_us * 1e-6;
}

/* ---- operands ----------------------------------------------------------------------------- */

typedef struct operand_builder {
	const rm_program *prog;
	const rm_exec_placement *place;
	rm_exec_op_plan *op;
	const int32_t *in, *out;
	uint32_t n_in, n_out, next_in, next_out;
	int64_t scratch; /* scratch bytes used by this op so far */
} operand_builder;

/* Adds an operand of bytes: the next input (source) or output (destination) tensor if it is in
 * the wanted memory and large enough, else device scratch (a copy's host side is moved to the
 * pinned host scratch by the caller). */
static void add_operand(operand_builder *b, int64_t bytes, bool source, rm_location loc)
{
	rm_exec_operand *o = &b->op->operand[b->op->n_operands++];
	const int32_t *list = source ? b->in : b->out;
	uint32_t n = source ? b->n_in : b->n_out;
	uint32_t *next = source ? &b->next_in : &b->next_out;
	if (*next < n) {
		int32_t t = list[(*next)++];
		const rm_program_tensor *pt = &b->prog->tensors[t];
		if (pt->location == loc && pt->bytes >= bytes && b->place[t].first_op >= 0) {
			*o = (rm_exec_operand){.region = b->place[t].region, .offset = b->place[t].offset,
					       .bytes = bytes, .extent = bytes, .tensor = t};
			return;
		}
	}
	*o = (rm_exec_operand){.region = RM_EXEC_SCRATCH, .offset = b->scratch, .bytes = bytes, .extent = bytes,
			       .tensor = -1};
	b->scratch = sat_add(b->scratch, align_up(bytes));
}

/*
 * The D operand of a GEMM that writes no tensor of its own: a weight gradient that accumulates
 * into a gradient buffer it lists as an input (the scheduler's grads of a weight group, or the
 * persistent gradient shards without FSDP: dW += X^T dY, cuBLASLt's beta = 1) writes there, in
 * place; else the next output or scratch (add_operand).
 */
static void add_gemm_output(operand_builder *b, int64_t bytes)
{
	if (b->next_out >= b->n_out)
		for (uint32_t k = b->next_in; k < b->n_in; k++) {
			int32_t t = b->in[k];
			const rm_program_tensor *pt = &b->prog->tensors[t];
			if (pt->role == RM_ROLE_GRADIENT && pt->location == RM_LOC_DEVICE && pt->bytes >= bytes &&
			    b->place[t].first_op >= 0) {
				rm_exec_operand *o = &b->op->operand[b->op->n_operands++];
				*o = (rm_exec_operand){.region = b->place[t].region, .offset = b->place[t].offset,
						       .bytes = bytes, .extent = bytes, .tensor = t};
				return;
			}
		}
	add_operand(b, bytes, false, RM_LOC_DEVICE);
}

/* The largest device tensor of list that takes memory, or -1. */
static int32_t stream_target(const operand_builder *b, const int32_t *list, uint32_t n)
{
	int32_t best = -1;
	for (uint32_t k = 0; k < n; k++) {
		int32_t t = list[k];
		const rm_program_tensor *pt = &b->prog->tensors[t];
		if (pt->location != RM_LOC_DEVICE || b->place[t].first_op < 0 || pt->bytes <= 0)
			continue;
		if (best < 0 || pt->bytes > b->prog->tensors[best].bytes)
			best = t;
	}
	return best;
}

/* A streamed operand of an elementwise kernel: bytes over the largest device tensor of list
 * (wrapping around it), else over at most RM_EXEC_STREAM_SCRATCH of scratch. */
static void add_stream_operand(operand_builder *b, int64_t bytes, const int32_t *list, uint32_t n)
{
	rm_exec_operand *o = &b->op->operand[b->op->n_operands++];
	int32_t best = stream_target(b, list, n);
	if (best >= 0 && bytes > 0) {
		int64_t have = b->prog->tensors[best].bytes;
		*o = (rm_exec_operand){.region = b->place[best].region, .offset = b->place[best].offset,
				       .bytes = bytes, .extent = bytes < have ? bytes : have, .tensor = best};
		return;
	}
	int64_t extent = bytes < RM_EXEC_STREAM_SCRATCH ? bytes : RM_EXEC_STREAM_SCRATCH;
	*o = (rm_exec_operand){.region = RM_EXEC_SCRATCH, .offset = b->scratch, .bytes = bytes, .extent = extent,
			       .tensor = -1};
	b->scratch = sat_add(b->scratch, align_up(extent));
}

/*
 * dQ, dK, dV of a fused backward: three consecutive slices of its first output when that is one
 * device tensor large enough for all three (the program's combined q/k/v gradient), else each
 * the next output or scratch.
 */
static void add_fused_grads(operand_builder *b, const int64_t bytes[RM_ATTN_F_COUNT])
{
	int64_t total = sat_add(bytes[RM_ATTN_F_DQ], sat_add(bytes[RM_ATTN_F_DK], bytes[RM_ATTN_F_DV]));
	if (b->n_out > 0) {
		int32_t t = b->out[0];
		const rm_program_tensor *pt = &b->prog->tensors[t];
		if (pt->location == RM_LOC_DEVICE && pt->bytes >= total && b->place[t].first_op >= 0 &&
		    total < RM_EXEC_BYTES_MAX) {
			int64_t off = b->place[t].offset;
			for (int k = RM_ATTN_F_DQ; k <= RM_ATTN_F_DV; k++) {
				b->op->operand[b->op->n_operands++] = (rm_exec_operand){
					.region = b->place[t].region, .offset = off, .bytes = bytes[k],
					.extent = bytes[k], .tensor = t};
				off += bytes[k];
			}
			b->next_out = 1;
			return;
		}
	}
	for (int k = RM_ATTN_F_DQ; k <= RM_ATTN_F_DV; k++)
		add_operand(b, bytes[k], false, RM_LOC_DEVICE);
}

/* The operands of attention run fused (rm_exec_attention_fused_bytes' order). */
static void add_fused_attention(operand_builder *b, const rm_attention_cost *a)
{
	int64_t bytes[RM_ATTN_F_COUNT];
	int n = rm_exec_attention_fused_bytes(a, bytes);
	const rm_location dev = RM_LOC_DEVICE;
	b->op->fused = true;
	add_operand(b, bytes[RM_ATTN_F_Q], true, dev);
	add_operand(b, bytes[RM_ATTN_F_K], true, dev);
	add_operand(b, bytes[RM_ATTN_F_V], true, dev);
	if (n == RM_ATTN_F_DO) {
		add_operand(b, bytes[RM_ATTN_F_O], false, dev);
		add_operand(b, bytes[RM_ATTN_F_STATS], false, dev);
		return;
	}
	add_operand(b, bytes[RM_ATTN_F_O], true, dev);
	add_operand(b, bytes[RM_ATTN_F_STATS], true, dev);
	add_operand(b, bytes[RM_ATTN_F_DO], true, dev);
	add_fused_grads(b, bytes);
	b->next_out = b->n_out; /* the workspace is never a program tensor */
	add_operand(b, bytes[RM_ATTN_F_DQ_ACCUM], false, dev);
	add_operand(b, bytes[RM_ATTN_F_SOFTMAX_SUM], false, dev);
}

static int64_t plan_operands(const rm_program *prog, const rm_exec_placement *place, int32_t i,
			     rm_exec_op_plan *op, rm_exec_attention_mode mode, int64_t *host_scratch)
{
	const rm_program_op *p = &prog->ops[i];
	operand_builder b = {.prog = prog, .place = place, .op = op,
			     .in = rm_program_refs(prog, p->inputs), .out = rm_program_refs(prog, p->outputs),
			     .n_in = p->inputs.count, .n_out = p->outputs.count};
	memset(op, 0, sizeof(*op));
	const rm_location dev = RM_LOC_DEVICE;
	switch (p->cost.kind) {
	case RM_COST_GEMM: {
		const rm_gemm_shape *g = &p->cost.gemm;
		int64_t es = rm_dtype_size(g->dtype);
		int64_t out_es = es == 1 ? 2 : es; /* fp8 writes bf16 */
		add_operand(&b, sat_mul4(g->batch, g->m, g->k, es), true, dev);
		add_operand(&b, sat_mul4(g->batch, g->k, g->n, es), true, dev);
		add_gemm_output(&b, sat_mul4(g->batch, g->m, g->n, out_es));
		break;
	}
	case RM_COST_ATTENTION: {
		if (mode == RM_EXEC_ATTN_FUSED && rm_exec_attention_fusable(&p->cost.attention)) {
			add_fused_attention(&b, &p->cost.attention);
			break;
		}
		const rm_attention_shape *a = &p->cost.attention.shape;
		int64_t es = rm_dtype_size(a->dtype);
		int64_t qkv = sat_mul(sat_mul4(a->batch, a->heads, a->seq, a->head_dim), es);
		int64_t scores = sat_mul4(rm_exec_attention_chunk(&p->cost.attention), a->seq, a->seq, es);
		add_operand(&b, qkv, true, dev); /* Q */
		add_operand(&b, qkv, true, dev); /* K */
		add_operand(&b, qkv, true, dev); /* V */
		if (p->cost.attention.backward) {
			add_operand(&b, qkv, true, dev);  /* dO */
			add_operand(&b, qkv, false, dev); /* dQ */
			add_operand(&b, qkv, false, dev); /* dK */
			add_operand(&b, qkv, false, dev); /* dV */
			b.next_out = b.n_out;             /* scores are never a program tensor */
			add_operand(&b, scores, false, dev); /* S / P */
			add_operand(&b, scores, false, dev); /* dP / dS */
		} else {
			add_operand(&b, qkv, false, dev); /* O */
			b.next_out = b.n_out;
			add_operand(&b, scores, false, dev); /* S / P */
		}
		break;
	}
	case RM_COST_ELEMENTWISE:
		add_stream_operand(&b, p->cost.elementwise.bytes_read, b.in, b.n_in);
		/* writes over the largest output; with none that takes memory (no output, or only
		 * outputs fused into their consumer with 0 bytes, as a loss's gradient is) in place
		 * over the largest input, as the optimizer updates its state */
		if (stream_target(&b, b.out, b.n_out) >= 0)
			add_stream_operand(&b, p->cost.elementwise.bytes_written, b.out, b.n_out);
		else
			add_stream_operand(&b, p->cost.elementwise.bytes_written, b.in, b.n_in);
		break;
	case RM_COST_COPY: {
		rm_copy_dir dir = p->cost.copy.dir;
		int64_t bytes = p->cost.copy.bytes;
		rm_location src = dir == RM_COPY_H2D ? RM_LOC_HOST : dev;
		rm_location dst = dir == RM_COPY_D2H ? RM_LOC_HOST : dev;
		add_operand(&b, bytes, true, src);
		add_operand(&b, bytes, false, dst);
		/* a host side that no host tensor covers comes from the pinned host scratch */
		int64_t host = 0;
		for (int k = 0; k < op->n_operands; k++) {
			rm_exec_operand *o = &op->operand[k];
			bool on_host = (k == 0 && src == RM_LOC_HOST) || (k == 1 && dst == RM_LOC_HOST);
			if (on_host && o->region == RM_EXEC_SCRATCH) {
				b.scratch -= align_up(o->bytes);
				o->region = RM_EXEC_HOST;
				o->offset = -1; /* the host scratch, after the host tensors (see below) */
				host = sat_add(host, align_up(o->bytes));
			}
		}
		if (host > *host_scratch)
			*host_scratch = host;
		break;
	}
	case RM_COST_COLLECTIVE: {
		const rm_collective_cost *c = &p->cost.collective;
		int64_t g = c->group_size > 0 ? c->group_size : 1;
		int64_t send = c->bytes, recv = c->bytes;
		if (c->op == RM_COLL_ALL_GATHER)
			send = c->bytes / g;
		else if (c->op == RM_COLL_REDUCE_SCATTER)
			recv = c->bytes / g;
		add_operand(&b, send, true, dev);
		add_operand(&b, recv, false, dev);
		break;
	}
	default:
		break;
	}
	return b.scratch;
}

/* ---- memory plan -------------------------------------------------------------------------- */

typedef struct placed {
	int64_t offset, end;
	int32_t first, last;
} placed;

typedef struct size_key {
	int64_t bytes;
	int32_t id;
} size_key;

/* Largest first, then by id: the greedy-by-size order (a total order, so qsort is deterministic). */
static int by_size_desc(const void *a, const void *b)
{
	const size_key *x = a, *y = b;
	if (x->bytes != y->bytes)
		return x->bytes > y->bytes ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

static void sort_by_size(const rm_program *prog, int32_t *ids, int32_t n)
{
	size_key *k = rm_new(size_key, (size_t)n + 1);
	for (int32_t i = 0; i < n; i++)
		k[i] = (size_key){prog->tensors[ids[i]].bytes, ids[i]};
	qsort(k, (size_t)n, sizeof(*k), by_size_desc);
	for (int32_t i = 0; i < n; i++)
		ids[i] = k[i].id;
	free(k);
}

/* Greedy by size over the tensors ids[0..n) (lifetimes set); returns the region's size. */
static int64_t place_region(const rm_program *prog, rm_exec_placement *place, int32_t *ids, int32_t n)
{
	sort_by_size(prog, ids, n);
	placed *list = rm_new(placed, (size_t)n + 1); /* sorted by offset */
	int32_t n_list = 0;
	int64_t top = 0;
	for (int32_t q = 0; q < n; q++) {
		int32_t t = ids[q];
		rm_exec_placement *p = &place[t];
		int64_t size = align_up(prog->tensors[t].bytes);
		int64_t offset = 0;
		int32_t at = 0; /* insertion point in list */
		for (int32_t k = 0; k < n_list; k++) {
			const placed *o = &list[k];
			if (o->last < p->first_op || o->first > p->last_op)
				continue; /* lifetimes do not meet */
			if (o->offset >= offset + size)
				break; /* the gap before o fits */
			if (o->end > offset)
				offset = o->end;
		}
		while (at < n_list && list[at].offset <= offset)
			at++;
		memmove(&list[at + 1], &list[at], (size_t)(n_list - at) * sizeof(*list));
		int64_t end = sat_add(offset, size);
		list[at] = (placed){offset, end, p->first_op, p->last_op};
		n_list++;
		p->offset = offset;
		if (end > top)
			top = end;
	}
	free(list);
	return top;
}

/* ---- launch order ---------------------------------------------------------------------- */

/* A binary min-heap of op indices (the ready ops; the smallest launches first). */
typedef struct op_heap {
	int32_t *v;
	int32_t n;
} op_heap;

static void heap_push(op_heap *h, int32_t x)
{
	int32_t i = h->n++;
	while (i > 0 && h->v[(i - 1) / 2] > x) {
		h->v[i] = h->v[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h->v[i] = x;
}

static int32_t heap_pop(op_heap *h)
{
	int32_t top = h->v[0], x = h->v[--h->n], i = 0;
	for (;;) {
		int32_t c = 2 * i + 1;
		if (c >= h->n)
			break;
		if (c + 1 < h->n && h->v[c + 1] < h->v[c])
			c++;
		if (h->v[c] >= x)
			break;
		h->v[i] = h->v[c];
		i = c;
	}
	if (h->n > 0)
		h->v[i] = x;
	return top;
}

int32_t rm_exec_launch_order(const rm_program *prog, int32_t *order, int32_t *reordered)
{
	int32_t no = prog->n_ops, early = 0;
	int32_t *recorder = rm_new(int32_t, (size_t)prog->n_events + 1);
	for (int32_t e = 0; e < prog->n_events; e++)
		recorder[e] = -1;
	for (int32_t i = 0; i < no; i++) {
		const int32_t *r = rm_program_refs(prog, prog->ops[i].records);
		for (uint32_t k = 0; k < prog->ops[i].records.count; k++)
			recorder[r[k]] = i;
	}
	/* predecessors: the previous op of the stream, the recorder of every event waited on */
	int32_t *last = rm_new(int32_t, (size_t)prog->n_streams + 1);
	for (int32_t s = 0; s < prog->n_streams; s++)
		last[s] = -1;
	int32_t *indeg = rm_new(int32_t, (size_t)no + 1);
	int32_t *first = rm_new(int32_t, (size_t)no + 2); /* successors in CSR form */
	int64_t n_edges = 0;
	for (int pass = 0; pass < 2; pass++) {
		int32_t *succ = pass ? rm_new(int32_t, (size_t)n_edges + 1) : NULL;
		int32_t *fill = pass ? rm_new(int32_t, (size_t)no + 1) : NULL;
		for (int32_t s = 0; s < prog->n_streams; s++)
			last[s] = -1;
		for (int32_t i = 0; i < no; i++) {
			const rm_program_op *op = &prog->ops[i];
			const int32_t *w = rm_program_refs(prog, op->waits);
			int32_t preds[2] = {op->stream >= 0 && op->stream < prog->n_streams ? last[op->stream] : -1, -1};
			for (uint32_t k = 0; k <= op->waits.count; k++) {
				int32_t p = k == 0 ? preds[0] : recorder[w[k - 1]];
				if (k > 0 && pass == 0 && p > i)
					early++;
				if (p < 0 || p == i)
					continue;
				if (pass == 0) {
					first[p + 1]++;
					n_edges++;
				} else {
					succ[first[p] + fill[p]++] = i;
					indeg[i]++;
				}
			}
			if (op->stream >= 0 && op->stream < prog->n_streams)
				last[op->stream] = i;
		}
		if (pass == 0) {
			for (int32_t i = 0; i < no; i++)
				first[i + 1] += first[i];
			continue;
		}
		/* Kahn's algorithm, the smallest ready op first: program order wherever it is valid */
		op_heap h = {rm_new(int32_t, (size_t)no + 1), 0};
		for (int32_t i = 0; i < no; i++)
			if (indeg[i] == 0)
				heap_push(&h, i);
		int32_t n = 0, moved = 0;
		while (h.n > 0) {
			int32_t i = heap_pop(&h);
			moved += i != n;
			order[n++] = i;
			for (int32_t k = first[i]; k < first[i + 1]; k++)
				if (--indeg[succ[k]] == 0)
					heap_push(&h, succ[k]);
		}
		/* a cycle (never after rm_program_validate): the rest in program order */
		for (int32_t i = 0; i < no && n < no; i++)
			if (indeg[i] > 0) {
				order[n++] = i;
				moved += i != n - 1;
			}
		if (reordered)
			*reordered = moved;
		free(h.v);
		free(succ);
		free(fill);
	}
	free(first);
	free(indeg);
	free(last);
	free(recorder);
	return early;
}

rm_exec_plan *rm_exec_plan_create(const rm_program *prog, const char *file, rm_exec_attention_mode mode,
				  rm_error *err)
{
	if (rm_program_validate(prog, file, err) != RM_OK)
		return NULL;
	rm_exec_plan *plan = rm_new(rm_exec_plan, 1);
	plan->prog = prog;
	plan->attention_mode = mode;
	int32_t nt = prog->n_tensors, no = prog->n_ops;
	plan->tensors = rm_new(rm_exec_placement, (size_t)nt + 1);
	plan->ops = rm_new(rm_exec_op_plan, (size_t)no + 1);
	plan->stream_ops = rm_new(int32_t, (size_t)prog->n_streams + 1);
	plan->max_group = 1;
	plan->oversized_op = -1;

	/* lifetimes in launch order */
	for (int32_t t = 0; t < nt; t++) {
		const rm_program_tensor *pt = &prog->tensors[t];
		plan->tensors[t] = (rm_exec_placement){
			.region = pt->location == RM_LOC_HOST ? RM_EXEC_HOST
				  : pt->persistent	      ? RM_EXEC_PERSISTENT
							      : RM_EXEC_POOL,
			.bytes = pt->bytes, .first_op = -1, .last_op = -1};
	}
	/* the launch order: program order, except that a wait never precedes its record */
	plan->launch_order = rm_new(int32_t, (size_t)no + 1);
	plan->early_waits = rm_exec_launch_order(prog, plan->launch_order, &plan->reordered_ops);
	int32_t *pos = rm_new(int32_t, (size_t)no + 1);
	for (int32_t k = 0; k < no; k++)
		pos[plan->launch_order[k]] = k;
	/* lifetimes in launch order (positions) */
	for (int32_t i = 0; i < no; i++) {
		const rm_program_op *op = &prog->ops[i];
		const int32_t *lists[2] = {rm_program_refs(prog, op->outputs), rm_program_refs(prog, op->inputs)};
		uint32_t counts[2] = {op->outputs.count, op->inputs.count};
		int32_t at = pos[i];
		for (int l = 0; l < 2; l++)
			for (uint32_t k = 0; k < counts[l]; k++) {
				rm_exec_placement *p = &plan->tensors[lists[l][k]];
				if (p->first_op < 0 || at < p->first_op)
					p->first_op = at;
				if (at > p->last_op)
					p->last_op = at;
			}
	}
	free(pos);
	/* persistent (and host persistent) tensors live throughout */
	for (int32_t t = 0; t < nt; t++)
		if (prog->tensors[t].persistent) {
			plan->tensors[t].first_op = 0;
			plan->tensors[t].last_op = no > 0 ? no - 1 : 0;
		}

	int32_t *ids = rm_new(int32_t, (size_t)nt + 1);
	/* pool and host: greedy by size over lifetimes; persistent device: one after another */
	for (int r = 0; r < RM_EXEC_REGION_COUNT; r++) {
		int32_t n = 0;
		for (int32_t t = 0; t < nt; t++)
			if ((int)plan->tensors[t].region == r && plan->tensors[t].first_op >= 0)
				ids[n++] = t;
		if (r == RM_EXEC_PERSISTENT) {
			int64_t off = 0;
			for (int32_t q = 0; q < n; q++) {
				plan->tensors[ids[q]].offset = off;
				off = sat_add(off, align_up(prog->tensors[ids[q]].bytes));
			}
			plan->region_bytes[r] = off;
		} else if (r == RM_EXEC_POOL || r == RM_EXEC_HOST) {
			plan->region_bytes[r] = place_region(prog, plan->tensors, ids, n);
		}
	}
	free(ids);

	/* live peak of the pool over launch order */
	int64_t *delta = rm_new(int64_t, (size_t)no + 2);
	for (int32_t t = 0; t < nt; t++) {
		const rm_exec_placement *p = &plan->tensors[t];
		if (p->region != RM_EXEC_POOL || p->first_op < 0)
			continue;
		delta[p->first_op] = sat_add(delta[p->first_op], align_up(p->bytes));
		delta[p->last_op + 1] -= align_up(p->bytes);
	}
	int64_t live = 0;
	for (int32_t i = 0; i <= no; i++) {
		live = sat_add(live, delta[i]);
		if (live > plan->pool_live_peak_bytes)
			plan->pool_live_peak_bytes = live;
	}
	free(delta);

	/* operands, scratch, counts */
	int64_t scratch = 0, host_scratch = 0;
	bool *gemm_stream = rm_new(bool, (size_t)prog->n_streams + 1);
	for (int32_t i = 0; i < no; i++) {
		const rm_program_op *op = &prog->ops[i];
		int64_t s = plan_operands(prog, plan->tensors, i, &plan->ops[i], mode, &host_scratch);
		if (s > scratch)
			scratch = s;
		plan->stream_ops[op->stream]++;
		rm_cost_kind k = op->cost.kind;
		plan->kind_ops[k]++;
		switch (k) {
		case RM_COST_GEMM:
			plan->kind_flops[k] += rm_cost_gemm_flops(&op->cost.gemm);
			gemm_stream[op->stream] = true;
			break;
		case RM_COST_ATTENTION: {
			/* a stream running attention keeps a workspace: cuBLASLt's for the unfused
			 * GEMMs, cuDNN's engine workspace for the fused kernel (the runner shares it) */
			gemm_stream[op->stream] = true;
			if (plan->ops[i].fused) {
				plan->kind_flops[k] += rm_cost_attention_flops(&op->cost.attention);
				plan->attention_fused++;
				break;
			}
			rm_gemm_shape g[5];
			rm_elementwise_cost sm;
			int n = rm_exec_attention_lowering(&op->cost.attention, g, &sm);
			for (int q = 0; q < n; q++)
				plan->kind_flops[k] += rm_cost_gemm_flops(&g[q]);
			plan->attention_unfused++;
			break;
		}
		case RM_COST_ELEMENTWISE:
			plan->kind_flops[k] += op->cost.elementwise.flops;
			break;
		case RM_COST_COLLECTIVE:
			if (op->cost.collective.group_size > plan->max_group)
				plan->max_group = op->cost.collective.group_size;
			break;
		default:
			break;
		}
		const rm_exec_op_plan *opl = &plan->ops[i];
		if (k == RM_COST_ELEMENTWISE)
			plan->kind_bytes[k] = sat_add(plan->kind_bytes[k],
						      sat_add(op->cost.elementwise.bytes_read,
							      op->cost.elementwise.bytes_written));
		else if (k == RM_COST_COPY)
			plan->kind_bytes[k] = sat_add(plan->kind_bytes[k], op->cost.copy.bytes);
		else if (k == RM_COST_COLLECTIVE)
			plan->kind_bytes[k] = sat_add(plan->kind_bytes[k], op->cost.collective.bytes);
		else
			for (int q = 0; q < opl->n_operands; q++)
				plan->kind_bytes[k] = sat_add(plan->kind_bytes[k], opl->operand[q].bytes);
		bool oversized = s >= RM_EXEC_BYTES_MAX;
		for (int q = 0; q < opl->n_operands; q++)
			oversized = oversized || opl->operand[q].bytes >= RM_EXEC_BYTES_MAX;
		if (oversized && plan->oversized_op < 0)
			plan->oversized_op = i;
	}
	/* the host scratch sits after the host tensors */
	for (int32_t i = 0; i < no; i++) {
		int64_t off = plan->region_bytes[RM_EXEC_HOST];
		for (int q = 0; q < plan->ops[i].n_operands; q++) {
			rm_exec_operand *o = &plan->ops[i].operand[q];
			if (o->region == RM_EXEC_HOST && o->offset < 0) {
				o->offset = off;
				off = sat_add(off, align_up(o->bytes));
			}
		}
	}
	plan->region_bytes[RM_EXEC_HOST] = sat_add(plan->region_bytes[RM_EXEC_HOST], host_scratch);
	plan->region_bytes[RM_EXEC_SCRATCH] = scratch;
	for (int32_t s = 0; s < prog->n_streams; s++)
		if (gemm_stream[s])
			plan->workspace_bytes += RM_EXEC_WORKSPACE_BYTES;
	free(gemm_stream);
	plan->device_bytes = sat_add(sat_add(plan->region_bytes[RM_EXEC_POOL], plan->region_bytes[RM_EXEC_PERSISTENT]),
				     sat_add(plan->region_bytes[RM_EXEC_SCRATCH], plan->workspace_bytes));
	return plan;
}

void rm_exec_plan_destroy(rm_exec_plan *plan)
{
	if (!plan)
		return;
	free(plan->tensors);
	free(plan->ops);
	free(plan->stream_ops);
	free(plan->launch_order);
	free(plan);
}

/* ---- checks ------------------------------------------------------------------------------- */

static bool fp8(rm_dtype d)
{
	return d == RM_DTYPE_FP8_E4M3 || d == RM_DTYPE_FP8_E5M2;
}

static bool integer(rm_dtype d)
{
	return d == RM_DTYPE_INT32 || d == RM_DTYPE_UINT8;
}

rm_status rm_exec_plan_check(const rm_exec_plan *plan, const rm_exec_limits *lim, rm_error *err)
{
	const rm_program *prog = plan->prog;
	const rm_hw_profile *hw = lim->hw;
	int world = lim->world > 0 ? lim->world : plan->max_group;
	/* one communicator over every rank: a program whose collectives run in groups of several
	 * sizes (HSDP replicas, tensor parallelism) needs sub-communicators, which are not built */
	for (int32_t i = 0; i < prog->n_ops; i++) {
		const rm_program_op *op = &prog->ops[i];
		int g = op->cost.kind == RM_COST_COLLECTIVE ? op->cost.collective.group_size : 1;
		if (g > 1 && g != plan->max_group)
			return rm_error_set(err, RM_UNSUPPORTED, NULL, 0, 0,
					    "ops[%d] '%s': a %s over %d ranks beside collectives over %d: the "
					    "executor runs every collective on one communicator of all ranks and does "
					    "not build the sub-communicators of HSDP or tensor parallelism yet",
					    i, op->name, rm_collective_name(op->cost.collective.op), g, plan->max_group);
	}
	for (int32_t i = 0; i < prog->n_ops; i++) {
		const rm_program_op *op = &prog->ops[i];
		if (op->cost.kind == RM_COST_GEMM) {
			const rm_gemm_shape *g = &op->cost.gemm;
			if (integer(g->dtype))
				return rm_error_set(err, RM_UNSUPPORTED, NULL, 0, 0,
						    "ops[%d] '%s': a %s GEMM: the executor runs bf16, fp16, fp32 "
						    "and fp8 GEMMs (cuBLASLt), not integer ones",
						    i, op->name, rm_dtype_name(g->dtype));
			if (fp8(g->dtype) && !(hw->fp8_TFLOPs > 0))
				return rm_error_set(err, RM_UNSUPPORTED, NULL, 0, 0,
						    "ops[%d] '%s': an %s GEMM needs FP8 tensor cores (Hopper "
						    "or newer); %s has none",
						    i, op->name, rm_dtype_name(g->dtype), hw->name);
			if (fp8(g->dtype) && (g->m % 16 || g->n % 16 || g->k % 16))
				return rm_error_set(err, RM_UNSUPPORTED, NULL, 0, 0,
						    "ops[%d] '%s': cuBLASLt runs fp8 GEMMs only when m, n "
						    "and k are multiples of 16 (got %" PRId64 " x %" PRId64
						    " x %" PRId64 ")",
						    i, op->name, g->m, g->n, g->k);
		} else if (op->cost.kind == RM_COST_ATTENTION) {
			rm_dtype d = op->cost.attention.shape.dtype;
			if (fp8(d) || integer(d))
				return rm_error_set(err, RM_UNSUPPORTED, NULL, 0, 0,
						    "ops[%d] '%s': %s attention: the executor runs attention "
						    "in bf16, fp16 or fp32",
						    i, op->name, rm_dtype_name(d));
			const rm_attention_shape *as = &op->cost.attention.shape;
			if (as->v_head_dim > 0 && as->v_head_dim != as->head_dim)
				return rm_error_set(err, RM_UNSUPPORTED, NULL, 0, 0,
						    "ops[%d] '%s': attention with a value head dim of %" PRId64
						    " beside %" PRId64 " for queries and keys (latent attention): the "
						    "executor lowers attention with one head dim",
						    i, op->name, as->v_head_dim, as->head_dim);
		} else if (op->cost.kind == RM_COST_COLLECTIVE) {
			int g = op->cost.collective.group_size;
			if (g != 1 && g != world)
				return rm_error_set(err, RM_INVALID, NULL, 0, 0,
						    "ops[%d] '%s': a %s over %d ranks, but the launch has %d "
						    "(one process per GPU: mpirun -np %d remora exec ...)",
						    i, op->name, rm_collective_name(op->cost.collective.op), g,
						    world, g);
		}
	}
	if (plan->oversized_op >= 0) {
		const rm_program_op *op = &prog->ops[plan->oversized_op];
		return rm_error_set(err, RM_RANGE, NULL, 0, 0,
				    "ops[%d] '%s': a %s whose operands take more than 2^61 B (2 EiB), "
				    "more than any device holds",
				    plan->oversized_op, op->name, rm_cost_kind_name(op->cost.kind));
	}
	char b[6][32];
	const int64_t *r = plan->region_bytes;
	if ((double)plan->device_bytes > hw->hbm_bytes)
		return rm_error_set(err, RM_RANGE, NULL, 0, 0,
				    "the program needs %s%s of device memory (pool %s + persistent %s + "
				    "scratch %s + cuBLASLt workspaces %s) but %s has %s",
				    plan->device_bytes >= RM_EXEC_BYTES_MAX ? "at least " : "",
				    rm_format_bytes(plan->device_bytes, b[0], sizeof(b[0])),
				    rm_format_bytes(r[RM_EXEC_POOL], b[1], sizeof(b[1])),
				    rm_format_bytes(r[RM_EXEC_PERSISTENT], b[2], sizeof(b[2])),
				    rm_format_bytes(r[RM_EXEC_SCRATCH], b[3], sizeof(b[3])),
				    rm_format_bytes(plan->workspace_bytes, b[4], sizeof(b[4])), hw->name,
				    rm_format_bytes((int64_t)hw->hbm_bytes, b[5], sizeof(b[5])));
	if (lim->device_free_bytes > 0 && plan->device_bytes > lim->device_free_bytes)
		return rm_error_set(err, RM_RANGE, NULL, 0, 0,
				    "the program needs %s of device memory but the GPU has %s free",
				    rm_format_bytes(plan->device_bytes, b[0], sizeof(b[0])),
				    rm_format_bytes(lim->device_free_bytes, b[1], sizeof(b[1])));
	return RM_OK;
}

/* ---- output -------------------------------------------------------------------------------- */

json_t *rm_exec_plan_json(const rm_exec_plan *plan, bool with_tensors)
{
	const rm_program *prog = plan->prog;
	json_t *o = json_object();
	json_object_set_new(o, "schema", json_string(RM_EXEC_PLAN_SCHEMA));
	json_object_set_new(o, "program", json_string(prog->name ? prog->name : ""));
	json_object_set_new(o, "ops", json_integer(prog->n_ops));
	json_object_set_new(o, "tensors", json_integer(prog->n_tensors));
	json_object_set_new(o, "events", json_integer(prog->n_events));
	json_t *streams = json_array();
	for (int32_t s = 0; s < prog->n_streams; s++)
		json_array_append_new(streams, json_pack("{s:i, s:s, s:s, s:i, s:i}", "id", (int)s, "name",
							 prog->streams[s].name, "kind",
							 rm_stream_kind_name(prog->streams[s].kind), "priority",
							 (int)prog->streams[s].priority, "ops",
							 (int)plan->stream_ops[s]));
	json_object_set_new(o, "streams", streams);
	json_t *mem = json_object();
	for (int r = 0; r < RM_EXEC_REGION_COUNT; r++)
		json_object_set_new(mem, rm_exec_region_name((rm_exec_region)r),
				    json_integer(plan->region_bytes[r]));
	json_object_set_new(mem, "pool_live_peak", json_integer(plan->pool_live_peak_bytes));
	json_object_set_new(mem, "workspaces", json_integer(plan->workspace_bytes));
	json_object_set_new(mem, "device_total", json_integer(plan->device_bytes));
	json_object_set_new(mem, "tensors_live_peak",
			    json_integer(sat_add(plan->pool_live_peak_bytes, plan->region_bytes[RM_EXEC_PERSISTENT])));
	json_object_set_new(o, "memory_bytes", mem);
	json_t *kinds = json_object();
	for (int k = 0; k < RM_COST_KIND_COUNT; k++)
		json_object_set_new(kinds, rm_cost_kind_name((rm_cost_kind)k),
				    json_pack("{s:i, s:I, s:f}", "ops", (int)plan->kind_ops[k], "bytes",
					      (json_int_t)plan->kind_bytes[k], "flops", plan->kind_flops[k]));
	json_object_set_new(o, "kinds", kinds);
	json_object_set_new(o, "max_group", json_integer(plan->max_group));
	json_object_set_new(o, "early_waits", json_integer(plan->early_waits));
	json_object_set_new(o, "reordered_ops", json_integer(plan->reordered_ops));
	json_object_set_new(o, "attention_mode", json_string(rm_exec_attention_mode_name(plan->attention_mode)));
	json_object_set_new(o, "attention_kernel",
			    json_string(plan->attention_fused && plan->attention_unfused ? "mixed"
					: plan->attention_fused				     ? RM_EXEC_ATTN_FUSED_KERNEL
					: plan->attention_unfused			     ? RM_EXEC_ATTN_UNFUSED_KERNEL
											     : "none"));
	json_object_set_new(o, "attention_fused", json_integer(plan->attention_fused));
	json_object_set_new(o, "attention_unfused", json_integer(plan->attention_unfused));
	if (with_tensors) {
		json_t *ts = json_array();
		for (int32_t t = 0; t < prog->n_tensors; t++) {
			const rm_exec_placement *p = &plan->tensors[t];
			json_array_append_new(ts, json_pack("{s:i, s:s, s:s, s:I, s:I, s:i, s:i}", "id", (int)t,
							    "name", prog->tensors[t].name, "region",
							    rm_exec_region_name(p->region), "offset",
							    (json_int_t)p->offset, "bytes", (json_int_t)p->bytes,
							    "first_op", (int)p->first_op, "last_op",
							    (int)p->last_op));
		}
		json_object_set_new(o, "placements", ts);
	}
	return o;
}

void rm_exec_plan_print(const rm_exec_plan *plan, FILE *out)
{
	const rm_program *prog = plan->prog;
	char b[2][32];
	fprintf(out, "program        %s: %d ops, %d tensors, %d events\n", prog->name ? prog->name : "",
		prog->n_ops, prog->n_tensors, prog->n_events);
	fprintf(out, "streams\n");
	for (int32_t s = 0; s < prog->n_streams; s++)
		fprintf(out, "  %-14s %-10s priority %3d  %7d ops\n", prog->streams[s].name,
			rm_stream_kind_name(prog->streams[s].kind), prog->streams[s].priority, plan->stream_ops[s]);
	fprintf(out, "memory\n");
	fprintf(out, "  pool           %12s  (live peak over launch order %s)\n",
		rm_format_bytes(plan->region_bytes[RM_EXEC_POOL], b[0], sizeof(b[0])),
		rm_format_bytes(plan->pool_live_peak_bytes, b[1], sizeof(b[1])));
	fprintf(out, "  persistent     %12s\n", rm_format_bytes(plan->region_bytes[RM_EXEC_PERSISTENT], b[0], sizeof(b[0])));
	fprintf(out, "  scratch        %12s\n", rm_format_bytes(plan->region_bytes[RM_EXEC_SCRATCH], b[0], sizeof(b[0])));
	fprintf(out, "  workspaces     %12s  (cuBLASLt)\n", rm_format_bytes(plan->workspace_bytes, b[0], sizeof(b[0])));
	fprintf(out, "  device total   %12s\n", rm_format_bytes(plan->device_bytes, b[0], sizeof(b[0])));
	/* what the engine's peak counts: live program tensors (docs/exec.md, "The plan") */
	fprintf(out, "  tensors peak   %12s  (pool live peak + persistent: the engine's peak in launch order)\n",
		rm_format_bytes(sat_add(plan->pool_live_peak_bytes, plan->region_bytes[RM_EXEC_PERSISTENT]), b[0],
				sizeof(b[0])));
	fprintf(out, "  host (pinned)  %12s\n", rm_format_bytes(plan->region_bytes[RM_EXEC_HOST], b[0], sizeof(b[0])));
	fprintf(out, "ops by kind\n");
	for (int k = 0; k < RM_COST_KIND_COUNT; k++) {
		if (!plan->kind_ops[k])
			continue;
		fprintf(out, "  %-12s %7d ops  %12s", rm_cost_kind_name((rm_cost_kind)k), plan->kind_ops[k],
			rm_format_bytes(plan->kind_bytes[k], b[0], sizeof(b[0])));
		if (plan->kind_flops[k] > 0)
			fprintf(out, "  %.3f TFLOP", plan->kind_flops[k] / 1e12);
		fputc('\n', out);
	}
	fprintf(out, "collectives    largest group %d rank%s\n", plan->max_group, plan->max_group == 1 ? "" : "s");
	if (plan->early_waits)
		fprintf(out, "launch order   %d waits come before their event's record in program order: %d ops "
			     "launch later, after the records they wait on\n",
			plan->early_waits, plan->reordered_ops);
	if (plan->attention_fused)
		fprintf(out, "attention      %d ops run fused: cuDNN's flash SDPA (graph API; unfused if cuDNN "
			     "refuses it on the GPU)\n",
			plan->attention_fused);
	if (plan->attention_unfused)
		fprintf(out, "attention      %d ops run unfused%s: cuBLASLt batched GEMMs + a softmax kernel\n",
			plan->attention_unfused,
			plan->attention_mode == RM_EXEC_ATTN_UNFUSED ? " (--attention unfused)" : "");
}
