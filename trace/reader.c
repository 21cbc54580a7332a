/*
 * The streaming reader of Chrome Trace Event JSON (remora/trace.h).
 *
 * The document is scanned here, byte by byte, to the "traceEvents" array; each element's extent
 * is found with a small scanner (strings, escapes, brace depth) and only that slice is decoded by
 * jansson (json_loadb). Position (line, column in bytes, 1-based) is kept for the decompressed
 * text so every error points into it.
 */
#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>
#include <zlib.h>

#include "remora/file.h"
#include "trace_private.h"

/* An event larger than this is refused: no profiler writes one (the largest Kineto events are
 * kernels with long template names, a few KiB), and it bounds the reader's memory. */
#define RM_TRACE__MAX_EVENT_BYTES ((size_t)64 << 20)

typedef struct src {
	gzFile gz;               /* NULL: reading from memory */
	const unsigned char *mem;
	size_t mem_len;
	unsigned char buf[1 << 16];
	const unsigned char *p, *end; /* the unread bytes of buf (or of mem) */
	bool eof, gzip;
	int64_t line, col, offset;    /* position of the next byte */
	const char *name;
	rm_error *err;
	bool failed;
	/* the slice of one value */
	unsigned char *val;
	size_t val_len, val_cap;
} src;

static void pos_error(src *s, rm_status st, int64_t line, int64_t col, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* Records the first failure at (line, col) of the text; gzip input says so and adds the
 * compressed byte offset reached. */
static void pos_error(src *s, rm_status st, int64_t line, int64_t col, const char *fmt, ...)
{
	if (s->failed)
		return;
	s->failed = true;
	char msg[600];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	char extra[160] = "";
	if (s->gzip)
		snprintf(extra, sizeof(extra), " (line:column in the decompressed text; compressed byte offset %lld)",
			 (long long)(s->gz ? gzoffset(s->gz) : 0));
	rm_error_set(s->err, st, s->name, (int)line, (int)col, "%s%s", msg, extra);
}

/* Refills; false at the end of the input or on a read error (then s->failed). */
static bool src_fill(src *s)
{
	if (s->eof || s->failed)
		return false;
	if (!s->gz) {
		s->eof = true;
		return false;
	}
	int n = gzread(s->gz, s->buf, sizeof(s->buf));
	if (n > 0) {
		s->p = s->buf;
		s->end = s->buf + n;
		return true;
	}
	int errnum = Z_OK;
	const char *msg = gzerror(s->gz, &errnum);
	if (n < 0 || (errnum != Z_OK && errnum != Z_STREAM_END)) {
		const char *why = errnum == Z_ERRNO ? strerror(errno) : msg;
		/* zlib's message starts with the path it was opened with */
		size_t nl = strlen(s->name);
		if (why && strncmp(why, s->name, nl) == 0 && strncmp(why + nl, ": ", 2) == 0)
			why += nl + 2;
		pos_error(s, s->gzip ? RM_PARSE : RM_IO, s->line, s->col,
			  "%s: the gzip stream is truncated or corrupt, the text stops here",
			  why && why[0] ? why : "read error");
		return false;
	}
	s->eof = true;
	return false;
}

static inline int src_peek(src *s)
{
	if (s->p == s->end && !src_fill(s))
		return -1;
	return *s->p;
}

static inline void src_advance(src *s, int c)
{
	s->p++;
	s->offset++;
	if (c == '\n') {
		s->line++;
		s->col = 1;
	} else {
		s->col++;
	}
}

/* Consumes the buffered bytes up to q, keeping line and column. */
static void advance_range(src *s, const unsigned char *q)
{
	const unsigned char *p = s->p;
	s->offset += q - p;
	for (;;) {
		const unsigned char *nl = memchr(p, '\n', (size_t)(q - p));
		if (!nl)
			break;
		s->line++;
		s->col = 1;
		p = nl + 1;
	}
	s->col += q - p;
	s->p = q;
}

static int skip_ws(src *s)
{
	for (;;) {
		int c = src_peek(s);
		if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
			src_advance(s, c);
		else
			return c;
	}
}

static void val_push(src *s, const unsigned char *from, size_t n)
{
	if (s->val_len + n + 1 > s->val_cap) {
		size_t cap = s->val_cap ? s->val_cap : 4096;
		while (cap < s->val_len + n + 1)
			cap *= 2;
		s->val = rm_xrealloc(s->val, cap);
		s->val_cap = cap;
	}
	if (n > 0)
		memcpy(s->val + s->val_len, from, n);
	s->val_len += n;
	s->val[s->val_len] = '\0';
}

/*
 * Copies the JSON value that starts at the next byte into s->val (a container, a string or a
 * scalar); its syntax inside is left to jansson. false on end of input inside it (truncated JSON)
 * or when it is too large.
 */
static bool capture_value(src *s, const char *what)
{
	s->val_len = 0;
	int64_t line = s->line, col = s->col;
	int c = src_peek(s);
	if (c < 0) {
		pos_error(s, RM_PARSE, s->line, s->col, "the trace ends where %s should be (truncated JSON?)", what);
		return false;
	}
	int depth = 0;
	bool in_str = false, esc = false, scalar = c != '{' && c != '[' && c != '"';
	for (;;) {
		if (s->p == s->end && !src_fill(s)) {
			if (scalar && !s->failed && s->val_len > 0)
				return true;
			pos_error(s, RM_PARSE, s->line, s->col,
				  "the trace ends inside %s (truncated JSON?)", what);
			return false;
		}
		const unsigned char *start = s->p, *q = s->p, *end = s->end;
		bool done = false;
		/* the position is brought up to date once per chunk (advance_range), not per byte */
		while (q < end) {
			unsigned char ch = *q;
			if (scalar) {
				if (ch == ',' || ch == '}' || ch == ']' || ch == ' ' || ch == '\t' || ch == '\n' ||
				    ch == '\r') {
					done = true;
					break;
				}
			} else if (in_str) {
				if (esc)
					esc = false;
				else if (ch == '\\')
					esc = true;
				else if (ch == '"') {
					in_str = false;
					if (depth == 0) {
						q++;
						done = true;
						break;
					}
				}
			} else if (ch == '"') {
				in_str = true;
			} else if (ch == '{' || ch == '[') {
				depth++;
			} else if (ch == '}' || ch == ']') {
				depth--;
				if (depth <= 0) {
					q++;
					done = true;
					break;
				}
			}
			q++;
		}
		advance_range(s, q);
		val_push(s, start, (size_t)(s->p - start));
		if (done)
			return true;
		if (s->val_len > RM_TRACE__MAX_EVENT_BYTES) {
			pos_error(s, RM_RANGE, line, col, "%s is larger than 64 MiB: not a profiler trace?", what);
			return false;
		}
	}
}

/* The position of byte `at` of the slice that started at (line, col). */
static void slice_pos(const src *s, int64_t line, int64_t col, size_t at, int64_t *oline, int64_t *ocol)
{
	for (size_t i = 0; i < at && i < s->val_len; i++) {
		if (s->val[i] == '\n') {
			line++;
			col = 1;
		} else {
			col++;
		}
	}
	*oline = line;
	*ocol = col;
}

/* Decodes s->val (captured at line, col) with jansson; NULL with the error positioned. */
static json_t *decode_value(src *s, int64_t line, int64_t col)
{
	json_error_t jerr;
	json_t *v = json_loadb((const char *)s->val, s->val_len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
	if (v)
		return v;
	int64_t l, c;
	size_t at = jerr.position > 0 ? (size_t)jerr.position - 1 : 0;
	slice_pos(s, line, col, at, &l, &c);
	char msg[300];
	snprintf(msg, sizeof(msg), "malformed JSON: %s", jerr.text);
	pos_error(s, RM_PARSE, l, c, "%s", msg);
	return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* What is kept. */

typedef struct kv_name {
	int64_t pid, tid; /* tid INT64_MIN: a process name */
	char *name;
} kv_name;

typedef struct pending {
	int64_t ts_ns, dur_ns, pid, tid;
	int32_t name;
	uint8_t cls;
	uint32_t seq;
} pending;

/* A CUDA/HIP runtime or driver launch: its "External id" (the kernel's in older Kineto traces),
 * the CPU thread it ran on and when. */
typedef struct launch_rec {
	int64_t ext, pid, tid, ts_ns;
} launch_rec;

/* A kept operator with shapes on its CPU thread: [ts_ns, end_ns). */
typedef struct op_span {
	int64_t ext, pid, tid, ts_ns, end_ns;
} op_span;

/* A "B" event waiting for its "E" (the format's Duration Events, nested per thread). */
typedef struct open_span {
	int64_t pid, tid, ts_ns;
	json_t *ev; /* the B event (a reference) */
	int64_t line, col;
	uint32_t seq;
} open_span;

typedef struct builder {
	rm_trace *t;
	/* name interning: open addressing on FNV-1a */
	int32_t *slots;
	uint32_t n_slots;
	uint8_t *name_cls; /* per name: its class by name alone (0xFF: not yet), for Kineto kernels */
	int32_t cap_cls;
	kv_name *meta;
	int n_meta, cap_meta;
	pending *pend;
	int64_t n_pend, cap_pend;
	open_span *open;
	int n_open, cap_open;
	/* older Kineto (2022-23 traces): a kernel's "External id" is its launch's, not its operator's;
	 * the launch's runtime event and the operators with shapes, to link them by time (finish) */
	launch_rec *launch;
	int64_t n_launch, cap_launch;
	op_span *spans;
	int64_t n_spans, cap_spans;
	int last_stream;
	uint32_t seq;
} builder;

#define GROW(ptr, n, cap)                                                      \
	do {                                                                   \
		if ((n) >= (cap)) {                                            \
			(cap) = (cap) ? (cap) * 2 : 64;                        \
			(ptr) = rm_xrealloc((ptr), (size_t)(cap) * sizeof(*(ptr))); \
		}                                                              \
	} while (0)

static int32_t intern(builder *b, const char *s)
{
	rm_trace *t = b->t;
	if ((uint32_t)t->n_names * 2 >= b->n_slots) {
		uint32_t n = b->n_slots ? b->n_slots * 2 : 1024;
		int32_t *slots = rm_xmalloc(n * sizeof(*slots));
		for (uint32_t i = 0; i < n; i++)
			slots[i] = -1;
		for (int32_t k = 0; k < t->n_names; k++) {
			uint32_t h = (uint32_t)rm_hash_fnv1a(t->names[k], strlen(t->names[k]), RM_FNV1A_SEED) & (n - 1);
			while (slots[h] >= 0)
				h = (h + 1) & (n - 1);
			slots[h] = k;
		}
		free(b->slots);
		b->slots = slots;
		b->n_slots = n;
	}
	uint32_t h = (uint32_t)rm_hash_fnv1a(s, strlen(s), RM_FNV1A_SEED) & (b->n_slots - 1);
	while (b->slots[h] >= 0) {
		if (strcmp(t->names[b->slots[h]], s) == 0)
			return b->slots[h];
		h = (h + 1) & (b->n_slots - 1);
	}
	GROW(t->names, t->n_names, t->cap_names);
	t->names[t->n_names] = rm_xstrdup(s);
	b->slots[h] = t->n_names;
	return t->n_names++;
}

static int stream_index(builder *b, int device, int64_t stream)
{
	rm_trace *t = b->t;
	if (b->last_stream >= 0 && t->streams[b->last_stream].device == device &&
	    t->streams[b->last_stream].stream == stream)
		return b->last_stream;
	for (int i = 0; i < t->n_streams; i++)
		if (t->streams[i].device == device && t->streams[i].stream == stream)
			return b->last_stream = i;
	GROW(t->streams, t->n_streams, t->cap_streams);
	t->streams[t->n_streams] = (rm_trace__stream){.device = device, .stream = stream};
	return b->last_stream = t->n_streams++;
}

/* An integer id from a JSON number or string (pid/tid may be either in the format); false when
 * absent. Strings that are not numbers are hashed. */
static bool json_id(json_t *v, int64_t *out)
{
	if (json_is_integer(v)) {
		*out = json_integer_value(v);
		return true;
	}
	if (json_is_real(v)) {
		double x = json_real_value(v);
		/* out of int64 the conversion is undefined: such an id is hashed like a string */
		if (!isfinite(x) || fabs(x) >= 9.2e18)
			return false;
		*out = (int64_t)x;
		return true;
	}
	if (json_is_string(v)) {
		const char *str = json_string_value(v);
		char *end;
		errno = 0;
		long long x = strtoll(str, &end, 10);
		if (*str && !*end && errno == 0)
			*out = x;
		else
			*out = (int64_t)(rm_hash_fnv1a(str, strlen(str), RM_FNV1A_SEED) >> 1);
		return true;
	}
	return false;
}

/* |ts| and dur at most 4e15 us (127 years) each, so ts + dur and any difference of two event
 * times stay inside int64 nanoseconds */
#define TRACE_MAX_US INT64_C(4000000000000000)

/* Microseconds (a JSON number) to nanoseconds, rounded; false when not a finite number or past
 * TRACE_MAX_US in magnitude. */
static bool json_us_to_ns(json_t *v, int64_t *ns)
{
	if (json_is_integer(v)) {
		json_int_t x = json_integer_value(v);
		if (x > TRACE_MAX_US || x < -TRACE_MAX_US)
			return false;
		*ns = (int64_t)x * 1000;
		return true;
	}
	if (json_is_real(v)) {
		double x = json_real_value(v) * 1000.0;
		if (!isfinite(x) || fabs(x) > (double)TRACE_MAX_US * 1000.0)
			return false;
		*ns = llround(x);
		return true;
	}
	return false;
}

static const char *json_str(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

static const char *meta_name(const builder *b, int64_t pid, int64_t tid)
{
	for (int i = b->n_meta - 1; i >= 0; i--)
		if (b->meta[i].pid == pid && b->meta[i].tid == tid)
			return b->meta[i].name;
	return NULL;
}

static void meta_set(builder *b, int64_t pid, int64_t tid, const char *name)
{
	for (int i = 0; i < b->n_meta; i++)
		if (b->meta[i].pid == pid && b->meta[i].tid == tid) {
			free(b->meta[i].name);
			b->meta[i].name = rm_xstrdup(name);
			return;
		}
	GROW(b->meta, b->n_meta, b->cap_meta);
	b->meta[b->n_meta++] = (kv_name){pid, tid, rm_xstrdup(name)};
}

/* The device number of a JAX process name ("/device:GPU:3", "/device:GPU:3 (pid 3)"); -1 when
 * it names no GPU. */
static int jax_gpu_device(const char *pname)
{
	const char *p = pname ? strstr(pname, "/device:GPU:") : NULL;
	if (!p)
		return -1;
	p += strlen("/device:GPU:");
	if (*p < '0' || *p > '9')
		return -1;
	errno = 0;
	char *end;
	long d = strtol(p, &end, 10);
	/* a device ordinal past 65535 is no GPU of one process (and would not fit the event's index) */
	if (errno != 0 || d > 65535) {
		rm_log_warn("trace: process name \"%.80s\": device %.20s is out of range (0-65535); its events are not a GPU's",
			    pname, p);
		return -1;
	}
	return (int)d;
}

/* Kineto's categories of GPU activities (libkineto output_json.cpp; older traces capitalised). */
static bool kineto_gpu_cat(const char *cat)
{
	static const char *const cats[] = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"};
	for (size_t i = 0; i < RM_ARRAY_SIZE(cats); i++)
		if (strcmp(cat, cats[i]) == 0)
			return true;
	return false;
}

/* "ProfilerStep#N" (torch.profiler's step annotation; HTA ProfilerStepGroupingPattern
 * ^ProfilerStep#(\d+)): N, or -1. */
static int64_t profiler_step(const char *name)
{
	static const char prefix[] = "ProfilerStep#";
	if (strncmp(name, prefix, sizeof(prefix) - 1) != 0)
		return -1;
	const char *d = name + sizeof(prefix) - 1;
	if (*d < '0' || *d > '9')
		return -1;
	return strtoll(d, NULL, 10);
}

/* A PyTorch dtype name ("c10::BFloat16" of "Input type", "BFloat16" of record_param_comms'
 * "dtype", "float") as remora spells it ("bf16"), with its size in bytes; "unknown" and 0 when
 * not one of c10's ScalarTypes below (c10/core/ScalarType.h). */
static const char *torch_dtype(const char *s, int *size)
{
	static const struct {
		const char *torch, *ours;
		int size;
	} map[] = {
		{"BFloat16", "bf16", 2}, {"Half", "fp16", 2},   {"Float", "fp32", 4},  {"Double", "fp64", 8},
		{"Float8_e4m3fn", "fp8", 1}, {"Float8_e4m3fnuz", "fp8", 1}, {"Float8_e5m2", "fp8_e5m2", 1},
		{"Float8_e5m2fnuz", "fp8_e5m2", 1}, {"Byte", "uint8", 1}, {"Char", "int8", 1},
		{"Short", "int16", 2}, {"Int", "int32", 4},     {"Long", "int64", 8},  {"Bool", "bool", 1},
	};
	*size = 0;
	if (!s)
		return "unknown";
	if (strncmp(s, "c10::", 5) == 0)
		s += 5;
	for (size_t i = 0; i < RM_ARRAY_SIZE(map); i++)
		if (strcasecmp(s, map[i].torch) == 0) {
			*size = map[i].size;
			return map[i].ours;
		}
	return "unknown";
}

/* Element i of a JSON array of positive integers (record_shapes' dims); 0 when not one. */
static int64_t dim_at(json_t *dims, size_t i)
{
	json_t *x = json_array_get(dims, i);
	return json_is_integer(x) && json_integer_value(x) > 0 ? (int64_t)json_integer_value(x) : 0;
}

/* 'n' when the last two dims [r, c] with strides [sr, sc] are row-major contiguous, 't' when they
 * are a transposed view (sr == 1), '?' otherwise or when the strides are unknown. */
static char operand_layout(json_t *dims, json_t *strides)
{
	size_t nd = json_array_size(dims);
	if (nd < 2 || json_array_size(strides) != nd)
		return '?';
	int64_t r = dim_at(dims, nd - 2), c = dim_at(dims, nd - 1);
	json_t *jr = json_array_get(strides, nd - 2), *jc = json_array_get(strides, nd - 1);
	if (!json_is_integer(jr) || !json_is_integer(jc))
		return '?';
	int64_t sr = json_integer_value(jr), sc = json_integer_value(jc);
	if (sc == 1 && (sr >= c || r == 1))
		return 'n';
	if (sr == 1 && (sc >= r || c == 1))
		return 't';
	return '?';
}

/*
 * A GEMM operator from record_shapes' "Input Dims" (and "Input type", "Input Strides" when
 * present): mm(A[M,K], B[K,N]), addmm(bias, A, B): batch 1; bmm(A[b,M,K], B[b,K,N]), baddbmm(self,
 * A, B). m, n, k are the output's rows, columns and the contraction, as remora-calibrate's rows
 * (C[batch, m, n] = A . B). Layout (remora-calibrate's names, harness.h): "tn" = B a transposed
 * view (the forward X . W^T), "nn" = both contiguous (dgrad), "nt" = A transposed (wgrad dY^T . X),
 * "tt" both, "unknown" without strides. false when not a GEMM or the shapes do not agree.
 */
static bool aten_gemm(const char *name, json_t *args, rm_trace__op *op)
{
	int first;
	int rank;
	if (strcmp(name, "aten::mm") == 0)
		first = 0, rank = 2;
	else if (strcmp(name, "aten::addmm") == 0)
		first = 1, rank = 2;
	else if (strcmp(name, "aten::bmm") == 0)
		first = 0, rank = 3;
	else if (strcmp(name, "aten::baddbmm") == 0)
		first = 1, rank = 3;
	else
		return false;
	json_t *dims = json_object_get(args, "Input Dims");
	json_t *a = json_array_get(dims, (size_t)first), *bm = json_array_get(dims, (size_t)first + 1);
	if (!json_is_array(a) || !json_is_array(bm) || json_array_size(a) != (size_t)rank ||
	    json_array_size(bm) != (size_t)rank)
		return false;
	int64_t d[2][3];
	for (int i = 0; i < rank; i++) {
		d[0][i] = dim_at(a, (size_t)i);
		d[1][i] = dim_at(bm, (size_t)i);
		if (d[0][i] <= 0 || d[1][i] <= 0)
			return false;
	}
	int off = rank - 2;
	if (d[0][off + 1] != d[1][off] || (rank == 3 && d[0][0] != d[1][0]))
		return false;
	op->kind = RM_TRACE__OP_GEMM;
	op->d[0] = rank == 3 ? d[0][0] : 1;
	op->d[1] = d[0][off];
	op->d[2] = d[1][off + 1];
	op->d[3] = d[0][off + 1];
	int size;
	json_t *types = json_object_get(args, "Input type");
	snprintf(op->dtype, sizeof(op->dtype), "%s",
		 torch_dtype(json_string_value(json_array_get(types, (size_t)first)), &size));
	json_t *strides = json_object_get(args, "Input Strides");
	char la = operand_layout(a, json_array_get(strides, (size_t)first));
	char lb = operand_layout(bm, json_array_get(strides, (size_t)first + 1));
	if (la == '?' || lb == '?')
		snprintf(op->layout, sizeof(op->layout), "unknown");
	else
		snprintf(op->layout, sizeof(op->layout), "%c%c", lb, la);
	snprintf(op->name, sizeof(op->name), "%s", name);
	return true;
}

/*
 * The attention operators of PyTorch's scaled_dot_product_attention (their schemas in
 * aten/src/ATen/native/native_functions.yaml): the index of query (key follows it), whether the
 * tensors are [batch, heads, seq, dim] (the _scaled_dot_product_* ops) or [batch, seq, heads, dim]
 * (_flash_attention_*, _efficient_attention_*), and the index of is_causal in "Concrete Inputs"
 * (-1: the op has none, e.g. the mask-type int of _efficient_attention_forward).
 */
static const struct attn_schema {
	const char *name;
	int query;
	bool bshd;
	int causal;
	bool bwd;
} attn_schemas[] = {
	{"aten::_scaled_dot_product_flash_attention", 0, false, 4, false},
	{"aten::_scaled_dot_product_efficient_attention", 0, false, 6, false},
	{"aten::_scaled_dot_product_cudnn_attention", 0, false, 6, false},
	{"aten::_flash_attention_forward", 0, true, 8, false},
	{"aten::_efficient_attention_forward", 0, true, -1, false},
	{"aten::_scaled_dot_product_flash_attention_backward", 1, false, 11, true},
	{"aten::_scaled_dot_product_efficient_attention_backward", 1, false, 11, true},
	{"aten::_scaled_dot_product_cudnn_attention_backward", 1, false, 14, true},
	{"aten::_flash_attention_backward", 1, true, 11, true},
	{"aten::_efficient_attention_backward", 1, true, -1, true},
};

/* An attention operator's shapes; false when not one or its query/key are not 4-D. causal is
 * read only where "Concrete Inputs" holds "True" or "False" at the schema's index. */
static bool aten_attention(const char *name, json_t *args, rm_trace__op *op)
{
	const struct attn_schema *sc = NULL;
	for (size_t i = 0; i < RM_ARRAY_SIZE(attn_schemas) && !sc; i++)
		if (strcmp(name, attn_schemas[i].name) == 0)
			sc = &attn_schemas[i];
	if (!sc)
		return false;
	json_t *dims = json_object_get(args, "Input Dims");
	json_t *q = json_array_get(dims, (size_t)sc->query), *k = json_array_get(dims, (size_t)sc->query + 1);
	if (json_array_size(q) != 4 || json_array_size(k) != 4)
		return false;
	int s_ax = sc->bshd ? 1 : 2, h_ax = sc->bshd ? 2 : 1;
	op->kind = RM_TRACE__OP_ATTENTION;
	op->d[0] = dim_at(q, 0);
	op->d[1] = dim_at(q, (size_t)h_ax);
	op->d[2] = dim_at(k, (size_t)h_ax);
	op->d[3] = dim_at(q, (size_t)s_ax);
	op->d[4] = dim_at(k, (size_t)s_ax);
	op->d[5] = dim_at(q, 3);
	for (int i = 0; i < 6; i++)
		if (op->d[i] <= 0)
			return false;
	op->bwd = sc->bwd;
	op->causal = -1;
	json_t *conc = sc->causal >= 0 ? json_array_get(json_object_get(args, "Concrete Inputs"), (size_t)sc->causal) : NULL;
	if (json_is_string(conc) && strcmp(json_string_value(conc), "True") == 0)
		op->causal = 1;
	else if (json_is_string(conc) && strcmp(json_string_value(conc), "False") == 0)
		op->causal = 0;
	int size;
	json_t *types = json_object_get(args, "Input type");
	snprintf(op->dtype, sizeof(op->dtype), "%s",
		 torch_dtype(json_string_value(json_array_get(types, (size_t)sc->query)), &size));
	snprintf(op->name, sizeof(op->name), "%s", name);
	return true;
}

/* The calibration benchmark of a c10d collective name ("allreduce", "_allgather_base",
 * "reduce_scatter_tensor_coalesced", "all_to_all", "send"... as record_param_comms writes them,
 * torch/csrc/distributed/c10d/ParamCommsUtils.hpp), or NULL for one remora does not model. */
static const char *comm_benchmark(const char *coll)
{
	while (*coll == '_')
		coll++;
	static const struct {
		const char *prefix, *bench;
	} map[] = {
		{"allreduce", "all_reduce"},         {"all_reduce", "all_reduce"},
		{"allgather", "all_gather"},         {"all_gather", "all_gather"},
		{"reduce_scatter", "reduce_scatter"}, {"reducescatter", "reduce_scatter"},
		{"alltoall", "all_to_all"},          {"all_to_all", "all_to_all"},
		{"send", "send_recv"},               {"recv", "send_recv"},
	};
	for (size_t i = 0; i < RM_ARRAY_SIZE(map); i++)
		if (strncasecmp(coll, map[i].prefix, strlen(map[i].prefix)) == 0)
			return map[i].bench;
	return NULL;
}

/*
 * A collective from the arguments Kineto writes on record_param_comms (and, in newer traces, on
 * the NCCL kernel itself): "Collective name", "In msg nelems", "Out msg nelems", "dtype", "Group
 * size", and where present "Global rank start"/"Global rank stride" and "Process Group Ranks".
 * bytes is nccl-tests' size column (the full buffer): the output for all_gather, the input for
 * reduce_scatter, all_reduce and all_to_all, the larger of the two for send/recv. false when the
 * collective is not one remora models or a size is missing.
 */
static bool comm_op(builder *b, json_t *args, rm_trace__op *op)
{
	const char *coll = json_str(args, "Collective name");
	const char *bench = coll ? comm_benchmark(coll) : NULL;
	if (!bench)
		return false;
	json_t *in = json_object_get(args, "In msg nelems"), *out = json_object_get(args, "Out msg nelems");
	json_t *group = json_object_get(args, "Group size");
	int size = 0;
	const char *dt = torch_dtype(json_str(args, "dtype"), &size);
	if (!json_is_integer(in) || !json_is_integer(out) || !json_is_integer(group) || size == 0 ||
	    json_integer_value(group) < 1 || json_integer_value(in) < 0 || json_integer_value(out) < 0)
		return false;
	int64_t ni = (int64_t)json_integer_value(in), no = (int64_t)json_integer_value(out);
	int64_t n = !strcmp(bench, "all_gather") ? no : !strcmp(bench, "send_recv") ? (ni > no ? ni : no) : ni;
	if (n <= 0 || n > INT64_MAX / 8)
		return false;
	op->kind = RM_TRACE__OP_COMM;
	op->d[0] = n * size;
	op->d[1] = (int64_t)json_integer_value(group);
	json_t *start = json_object_get(args, "Global rank start"), *stride = json_object_get(args, "Global rank stride");
	op->d[2] = json_is_integer(start) ? (int64_t)json_integer_value(start) : -1;
	op->d[3] = json_is_integer(stride) ? (int64_t)json_integer_value(stride) : -1;
	const char *ranks = json_str(args, "Process Group Ranks");
	op->ranks = ranks ? intern(b, ranks) : -1;
	snprintf(op->dtype, sizeof(op->dtype), "%s", dt);
	snprintf(op->name, sizeof(op->name), "%s", bench);
	snprintf(op->layout, sizeof(op->layout), "%s", "");
	return true;
}

static void add_op(builder *b, const rm_trace__op *op)
{
	rm_trace *t = b->t;
	GROW(t->ops, t->n_ops, t->cap_ops);
	t->ops[t->n_ops++] = *op;
}

static int nccl_kind(rm_trace *t, const char *name)
{
	rm_trace_nccl_name nn;
	if (!rm_trace_nccl_parse(name, &nn))
		snprintf(nn.op, sizeof(nn.op), "%s", "other");
	for (int i = 0; i < t->n_nccl_kinds; i++)
		if (strcmp(t->nccl_kinds[i].op, nn.op) == 0 && strcmp(t->nccl_kinds[i].algo, nn.algo) == 0 &&
		    strcmp(t->nccl_kinds[i].proto, nn.proto) == 0)
			return i;
	if (t->n_nccl_kinds >= INT16_MAX)
		return 0;
	t->nccl_kinds = rm_xrealloc(t->nccl_kinds, (size_t)(t->n_nccl_kinds + 1) * sizeof(*t->nccl_kinds));
	rm_trace__nccl_kind *k = &t->nccl_kinds[t->n_nccl_kinds];
	memcpy(k->op, nn.op, sizeof(k->op));
	memcpy(k->algo, nn.algo, sizeof(k->algo));
	memcpy(k->proto, nn.proto, sizeof(k->proto));
	return t->n_nccl_kinds++;
}

static void add_event(builder *b, int device, int64_t stream, int64_t ts, int64_t dur, int32_t name,
		      rm_trace_class cls, int64_t ext, int64_t bytes, uint32_t seq)
{
	rm_trace *t = b->t;
	GROW(t->ev, t->n_ev, t->cap_ev);
	rm_trace__event *e = &t->ev[t->n_ev++];
	*e = (rm_trace__event){.ts_ns = ts, .dur_ns = dur, .ext_id = ext, .stream = stream_index(b, device, stream),
			       .name = name, .nccl = -1, .cls = (uint8_t)cls, .seq = seq};
	if (bytes >= 0 && (cls == RM_TRACE_MEMCPY || cls == RM_TRACE_MEMSET)) {
		e->work = bytes;
		e->flags |= RM_TRACE__BYTES;
	}
	if (cls == RM_TRACE_NCCL)
		e->nccl = (int16_t)nccl_kind(t, t->names[name]);
	rm_trace__stream *st = &t->streams[e->stream];
	if (rm_trace_class_is_compute(cls))
		st->compute = true;
	if (cls == RM_TRACE_NCCL)
		st->comm = true;
}

static void add_step(builder *b, int64_t number, int64_t ts, int64_t dur, int device)
{
	rm_trace *t = b->t;
	GROW(t->steps, t->n_steps, t->cap_steps);
	t->steps[t->n_steps++] = (rm_trace__step){number, ts, dur, device};
}

/* A kernel launch of the CUDA runtime or driver API (or HIP's), by name: cudaLaunchKernel,
 * cudaLaunchKernelExC, cudaLaunchCooperativeKernel, cuLaunchKernel(Ex), hipLaunchKernel,
 * hipExtLaunchKernel, hipModuleLaunchKernel, hipExtModuleLaunchKernel. */
static bool is_launch(const char *name)
{
	return strncmp(name, "cudaLaunch", 10) == 0 || strncmp(name, "cuLaunch", 8) == 0 ||
	       strncmp(name, "hipLaunch", 9) == 0 || strncmp(name, "hipExtLaunch", 12) == 0 ||
	       strncmp(name, "hipModuleLaunch", 15) == 0 || strncmp(name, "hipExtModuleLaunch", 18) == 0;
}

static bool process_span(src *s, builder *b, const char *name, const char *cat, json_t *args,
			 int64_t pid, int64_t tid, bool have_ts, int64_t ts, bool have_dur, int64_t dur, int64_t line,
			 int64_t col, uint32_t seq);

/* A "B" event: kept (a reference) until its "E". */
static bool open_span_push(src *s, builder *b, json_t *ev, const char *name, int64_t pid, int64_t tid,
			   int64_t line, int64_t col, uint32_t seq)
{
	int64_t ts;
	if (!json_us_to_ns(json_object_get(ev, "ts"), &ts)) {
		pos_error(s, RM_PARSE, line, col, "B event '%s' needs a numeric ts (microseconds, at most 4e15 in magnitude)",
			  name ? name : "");
		return false;
	}
	GROW(b->open, b->n_open, b->cap_open);
	b->open[b->n_open++] = (open_span){pid, tid, ts, json_incref(ev), line, col, seq};
	return true;
}

/*
 * An "E" event closes the innermost open "B" of its pid/tid (the format: "Duration events ...
 * must be properly nested" per thread); the pair becomes the complete event B describes, with
 * dur = E.ts - B.ts and E's args merged into B's. An E with no open B, or one before its B, is
 * an error at the E.
 */
static bool close_span(src *s, builder *b, json_t *ev, int64_t pid, int64_t tid, int64_t line, int64_t col)
{
	int64_t ts;
	if (!json_us_to_ns(json_object_get(ev, "ts"), &ts)) {
		pos_error(s, RM_PARSE, line, col, "E event needs a numeric ts (microseconds, at most 4e15 in magnitude)%s",
			  "");
		return false;
	}
	int i = b->n_open - 1;
	while (i >= 0 && !(b->open[i].pid == pid && b->open[i].tid == tid))
		i--;
	if (i < 0) {
		pos_error(s, RM_PARSE, line, col,
			  "E event on pid %lld tid %lld closes no B event (B/E pairs nest per thread)", (long long)pid,
			  (long long)tid);
		return false;
	}
	open_span o = b->open[i];
	memmove(&b->open[i], &b->open[i + 1], (size_t)(b->n_open - i - 1) * sizeof(*b->open));
	b->n_open--;
	bool ok = false;
	if (ts < o.ts_ns) {
		pos_error(s, RM_PARSE, line, col, "E event at ts %.3f us is before its B event (line %lld) at %.3f us",
			  (double)ts / 1e3, (long long)o.line, (double)o.ts_ns / 1e3);
		goto done;
	}
	json_t *args = json_object_get(o.ev, "args"), *eargs = json_object_get(ev, "args");
	if (json_is_object(eargs)) {
		if (!json_is_object(args)) {
			json_object_set(o.ev, "args", eargs);
		} else {
			json_object_update(args, eargs);
		}
		args = json_object_get(o.ev, "args");
	}
	ok = process_span(s, b, json_str(o.ev, "name"), json_str(o.ev, "cat"), args, o.pid, o.tid, true,
			  o.ts_ns, true, ts - o.ts_ns, o.line, o.col, o.seq);
done:
	json_decref(o.ev);
	return ok;
}

/* One element of traceEvents (at line, col). false with the error on bad input. */
static bool process_event(src *s, builder *b, json_t *ev, int64_t line, int64_t col)
{
	uint32_t seq = b->seq++;
	b->t->events++;
	if (!json_is_object(ev)) {
		pos_error(s, RM_PARSE, line, col, "an element of traceEvents is not an object%s", "");
		return false;
	}
	const char *ph = json_str(ev, "ph");
	const char *name = json_str(ev, "name");
	const char *cat = json_str(ev, "cat");
	json_t *args = json_object_get(ev, "args");
	int64_t pid = 0, tid = 0;
	json_id(json_object_get(ev, "pid"), &pid);
	json_id(json_object_get(ev, "tid"), &tid);
	if (ph && strcmp(ph, "E") == 0)
		return close_span(s, b, ev, pid, tid, line, col); /* E need not repeat the name */
	if (!ph || !name)
		return true;
	if (strcmp(ph, "M") == 0) {
		/* metadata (the format's "Metadata Events"): process_name and thread_name */
		const char *v = json_is_object(args) ? json_str(args, "name") : NULL;
		if (v && strcmp(name, "process_name") == 0)
			meta_set(b, pid, INT64_MIN, v);
		else if (v && strcmp(name, "thread_name") == 0)
			meta_set(b, pid, tid, v);
		return true;
	}
	if (strcmp(ph, "B") == 0)
		return open_span_push(s, b, ev, name, pid, tid, line, col, seq);
	if (strcmp(ph, "X") != 0)
		return true; /* complete events and B/E pairs only: Kineto and xprof write every span as "X" */
	int64_t ts = 0, dur = 0;
	bool have_ts = json_us_to_ns(json_object_get(ev, "ts"), &ts);
	bool have_dur = json_us_to_ns(json_object_get(ev, "dur"), &dur);
	return process_span(s, b, name, cat, args, pid, tid, have_ts, ts, have_dur, dur, line, col, seq);
}

/* A complete event ("X", or a B/E pair): a GPU event, a step, an operator with shapes, or a JAX
 * event placed later. */
static bool process_span(src *s, builder *b, const char *name, const char *cat, json_t *args,
			 int64_t pid, int64_t tid, bool have_ts, int64_t ts, bool have_dur, int64_t dur, int64_t line,
			 int64_t col, uint32_t seq)
{
	if (!name)
		return true;
	bool gpu = cat && kineto_gpu_cat(cat);
	if (gpu && (!have_ts || !have_dur || dur < 0)) {
		pos_error(s, RM_PARSE, line, col,
			  "GPU event '%s' needs numeric ts and dur >= 0 (microseconds, at most 4e15 in magnitude)",
			  name);
		return false;
	}
	if (!have_ts || !have_dur || dur < 0)
		return true;
	if (gpu) {
		int64_t device = pid, stream = tid, ext = -1, bytes = -1;
		if (json_is_object(args)) {
			json_t *dv = json_object_get(args, "device");
			if (dv && !json_is_integer(dv)) {
				/* a device is an ordinal: a name or a real would be hashed or cut into one */
				const char *str = json_is_string(dv) ? json_string_value(dv) : NULL;
				char *end = NULL;
				if (!str || !*str || (strtoll(str, &end, 10), *end != '\0')) {
					pos_error(s, RM_PARSE, line, col,
						  "GPU event '%s': args.device is %s%s%s, not an integer device ordinal", name,
						  str ? "\"" : "a ", str ? str : (json_is_real(dv) ? "real number" : "non-number"),
						  str ? "\"" : "");
					return false;
				}
			}
			json_id(dv, &device);
			json_id(json_object_get(args, "stream"), &stream);
			json_id(json_object_get(args, "External id"), &ext);
			json_id(json_object_get(args, "bytes"), &bytes);
		}
		if (device < 0 || device > 65535) {
			pos_error(s, RM_PARSE, line, col,
				  "GPU event '%s': device %lld (args.device, else pid) is not a device ordinal (0-65535)", name,
				  (long long)device);
			return false;
		}
		int32_t id = intern(b, name);
		rm_trace_class cls;
		if (strstr(cat, "emcpy") || strstr(cat, "emset")) {
			cls = rm_trace_classify(name, cat, NULL);
		} else {
			/* a kernel: its class depends on its name alone, worked out once per name */
			if (id >= b->cap_cls) {
				int32_t cap = b->cap_cls ? b->cap_cls : 256;
				while (cap <= id)
					cap *= 2;
				b->name_cls = rm_xrealloc(b->name_cls, (size_t)cap);
				memset(b->name_cls + b->cap_cls, 0xFF, (size_t)(cap - b->cap_cls));
				b->cap_cls = cap;
			}
			if (b->name_cls[id] == 0xFF)
				b->name_cls[id] = (uint8_t)rm_trace_classify(name, cat, NULL);
			cls = (rm_trace_class)b->name_cls[id];
		}
		/* newer Kineto writes the collective's arguments on the NCCL kernel itself */
		rm_trace__op op = {.ext_id = ext, .seq = seq};
		if (cls == RM_TRACE_NCCL && ext >= 0 && json_is_object(args) && comm_op(b, args, &op))
			add_op(b, &op);
		add_event(b, (int)device, stream, ts, dur, id, cls, ext, bytes, seq);
		return true;
	}
	int64_t step = profiler_step(name);
	if (step >= 0 && !(cat && strcmp(cat, "gpu_user_annotation") == 0)) {
		add_step(b, step, ts, dur, -1);
		return true;
	}
	if (cat) {
		/* a Kineto CPU-side event: only operators with shapes (GEMM, attention, collective) are kept */
		int64_t ext;
		if (strcmp(cat, "cpu_op") == 0 && json_is_object(args) &&
		    json_id(json_object_get(args, "External id"), &ext) && ext >= 0) {
			rm_trace__op op = {.ext_id = ext, .seq = seq, .ranks = -1};
			bool ok = false;
			if (strcmp(name, "record_param_comms") == 0)
				ok = comm_op(b, args, &op);
			else if (strncmp(name, "aten::", 6) == 0)
				ok = aten_gemm(name, args, &op) || aten_attention(name, args, &op);
			if (ok) {
				add_op(b, &op);
				GROW(b->spans, b->n_spans, b->cap_spans);
				b->spans[b->n_spans++] = (op_span){ext, pid, tid, ts, ts + dur};
			}
		} else if ((strcmp(cat, "cuda_runtime") == 0 || strcmp(cat, "cuda_driver") == 0) && is_launch(name) &&
			   json_is_object(args) && json_id(json_object_get(args, "External id"), &ext) && ext >= 0) {
			GROW(b->launch, b->n_launch, b->cap_launch);
			b->launch[b->n_launch++] = (launch_rec){ext, pid, tid, ts};
		}
		return true;
	}
	/* no category: an xprof (JAX) event, placed by its process and thread names; those seen
	 * already decide now, the rest wait for the end of the file */
	const char *pname = meta_name(b, pid, INT64_MIN);
	const char *tname = meta_name(b, pid, tid);
	if (pname && jax_gpu_device(pname) < 0)
		return true;
	if (tname && strncmp(tname, "Stream", 6) != 0 && strcmp(tname, "Steps") != 0)
		return true;
	const char *xla_op = NULL;
	if (json_is_object(args)) {
		xla_op = json_str(args, "hlo_op");
		if (!xla_op)
			xla_op = json_str(args, "long_name");
	}
	GROW(b->pend, b->n_pend, b->cap_pend);
	b->pend[b->n_pend++] = (pending){ts, dur, pid, tid, intern(b, name),
					 (uint8_t)rm_trace_classify(name, NULL, xla_op), seq};
	return true;
}

/* A CUDA version integer (1000 * major + 10 * minor, as cudaRuntimeGetVersion gives it) as "12.4". */
static void cuda_version(json_t *v, char *out, size_t size)
{
	if (json_is_integer(v) && json_integer_value(v) > 0 && json_integer_value(v) < 1000000)
		snprintf(out, size, "%d.%d", (int)(json_integer_value(v) / 1000), (int)(json_integer_value(v) % 1000 / 10));
}

/* Top-level members other than traceEvents: distributedInfo.rank and nccl_version, the names of
 * deviceProperties by id, cuda_runtime_version and cuda_driver_version are kept. */
static void process_member(builder *b, const char *key, json_t *v)
{
	rm_trace *t = b->t;
	if (strcmp(key, "distributedInfo") == 0 && json_is_object(v)) {
		json_t *r = json_object_get(v, "rank");
		if (json_is_integer(r) && json_integer_value(r) >= 0 && json_integer_value(r) < INT32_MAX)
			t->rank = (int)json_integer_value(r);
		const char *nv = json_str(v, "nccl_version");
		if (nv)
			snprintf(t->nccl, sizeof(t->nccl), "%s", nv);
	} else if (strcmp(key, "deviceProperties") == 0 && json_is_array(v)) {
		size_t i;
		json_t *d;
		json_array_foreach(v, i, d) {
			json_t *id = json_object_get(d, "id");
			const char *name = json_str(d, "name");
			if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) > 65535 || !name)
				continue;
			int k = (int)json_integer_value(id);
			if (k >= t->n_device_names) {
				t->device_names = rm_xrealloc(t->device_names, (size_t)(k + 1) * sizeof(char *));
				for (int j = t->n_device_names; j <= k; j++)
					t->device_names[j] = NULL;
				t->n_device_names = k + 1;
			}
			free(t->device_names[k]);
			t->device_names[k] = rm_xstrdup(name);
		}
	} else if (strcmp(key, "cuda_runtime_version") == 0) {
		cuda_version(v, t->cuda, sizeof(t->cuda));
	} else if (strcmp(key, "cuda_driver_version") == 0) {
		cuda_version(v, t->driver, sizeof(t->driver));
	}
}

/* A string member of an event's top level, found without decoding: the raw bytes between the
 * quotes (escapes left as they are), or NULL. */
typedef struct raw_str {
	const char *p;
	size_t len;
} raw_str;

static bool raw_is(raw_str r, const char *lit)
{
	size_t n = strlen(lit);
	return r.p && r.len == n && memcmp(r.p, lit, n) == 0;
}

static bool raw_starts(raw_str r, const char *lit)
{
	size_t n = strlen(lit);
	return r.p && r.len >= n && memcmp(r.p, lit, n) == 0;
}

/* Finds the top-level string members ph, cat and name of an event object's text. */
static void raw_members(const unsigned char *v, size_t len, raw_str *ph, raw_str *cat, raw_str *name)
{
	*ph = *cat = *name = (raw_str){NULL, 0};
	int depth = 0;
	const unsigned char *key = NULL;
	size_t key_len = 0;
	bool expect_value = false;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = v[i];
		if (c == '"') {
			size_t j = i + 1;
			while (j < len && v[j] != '"')
				j += v[j] == '\\' ? 2 : 1;
			if (j >= len)
				return;
			if (depth == 1 && expect_value && key) {
				raw_str r = {(const char *)v + i + 1, j - i - 1};
				if (key_len == 2 && memcmp(key, "ph", 2) == 0)
					*ph = r;
				else if (key_len == 3 && memcmp(key, "cat", 3) == 0)
					*cat = r;
				else if (key_len == 4 && memcmp(key, "name", 4) == 0)
					*name = r;
				key = NULL;
				expect_value = false;
				if (ph->p && cat->p && name->p)
					return; /* Kineto writes them first: the rest need not be looked at */
			} else if (depth == 1 && !expect_value) {
				key = v + i + 1;
				key_len = j - i - 1;
			}
			i = j;
		} else if (c == ':' && depth == 1) {
			expect_value = true;
		} else if (c == ',' && depth == 1) {
			expect_value = false;
			key = NULL;
		} else if (c == '{' || c == '[') {
			depth++;
			expect_value = false;
		} else if (c == '}' || c == ']') {
			depth--;
		}
	}
}

/* A JSON number at v[0..len) (no surrounding space): an integer into *i (is_int), or a real into *x.
 * false when it is not a plain number (a string, null, an object...). */
static bool raw_number(const unsigned char *v, size_t len, bool *is_int, long long *i, double *x)
{
	char buf[40];
	if (len == 0 || len >= sizeof(buf) || !(v[0] == '-' || (v[0] >= '0' && v[0] <= '9')))
		return false;
	memcpy(buf, v, len);
	buf[len] = '\0';
	bool integral = true;
	for (size_t k = 0; k < len; k++)
		if (buf[k] == '.' || buf[k] == 'e' || buf[k] == 'E')
			integral = false;
	char *end;
	errno = 0;
	if (integral) {
		*i = strtoll(buf, &end, 10);
		*is_int = true;
		/* out of long long: jansson reads it as an error too; let it say so */
		return *end == '\0' && errno == 0;
	}
	*x = strtod(buf, &end);
	*is_int = false;
	return *end == '\0';
}

/* A number value's extent from v[i] (the first byte after ':' and blanks). */
static size_t raw_number_len(const unsigned char *v, size_t len, size_t i)
{
	size_t j = i;
	while (j < len && (v[j] == '-' || v[j] == '+' || v[j] == '.' || v[j] == 'e' || v[j] == 'E' ||
			   (v[j] >= '0' && v[j] <= '9')))
		j++;
	return j - i;
}

/* The microseconds of a raw number in nanoseconds, as json_us_to_ns reads them. */
static bool raw_us_to_ns(bool is_int, long long i, double x, int64_t *ns)
{
	if (is_int) {
		if (i > TRACE_MAX_US || i < -TRACE_MAX_US)
			return false;
		*ns = (int64_t)i * 1000;
		return true;
	}
	double y = x * 1000.0;
	if (!isfinite(y) || fabs(y) > (double)TRACE_MAX_US * 1000.0)
		return false;
	*ns = llround(y);
	return true;
}

/*
 * A kernel launch of a CUDA/HIP runtime or driver "X" event read from its text without decoding
 * it (older traces have one per kernel, and decoding each costs a third of the import): its
 * integer "pid", "tid", "ts", "dur" (>= 0) and args."External id" (>= 0). false when any is absent
 * or not a plain integer (ts and dur may be reals, in microseconds), so that the event is decoded
 * and read the usual way instead. The caller checked ph, cat and name.
 */
static bool raw_launch(const unsigned char *v, size_t len, launch_rec *out)
{
	bool got_pid = false, got_tid = false, got_ts = false, got_dur = false, got_ext = false;
	int64_t dur = -1;
	int depth = 0;
	bool in_args = false;
	const unsigned char *key = NULL;
	size_t key_len = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = v[i];
		if (c == '"') {
			size_t j = i + 1;
			while (j < len && v[j] != '"')
				j += v[j] == '\\' ? 2 : 1;
			if (j >= len)
				return false;
			key = v + i + 1;
			key_len = j - i - 1;
			i = j;
			/* a key: its ':' and then its value */
			size_t k = i + 1;
			while (k < len && (v[k] == ' ' || v[k] == '\t' || v[k] == '\n' || v[k] == '\r'))
				k++;
			if (k >= len || v[k] != ':')
				continue; /* a string value */
			k++;
			while (k < len && (v[k] == ' ' || v[k] == '\t' || v[k] == '\n' || v[k] == '\r'))
				k++;
			if (k >= len)
				return false;
			if (depth == 1 && key_len == 4 && memcmp(key, "args", 4) == 0 && v[k] == '{') {
				in_args = true;
				i = k - 1;
				continue;
			}
			bool want = (depth == 1 && ((key_len == 3 && (memcmp(key, "pid", 3) == 0 || memcmp(key, "tid", 3) == 0 ||
								     memcmp(key, "dur", 3) == 0)) ||
						    (key_len == 2 && memcmp(key, "ts", 2) == 0))) ||
				    (depth == 2 && in_args && key_len == 11 && memcmp(key, "External id", 11) == 0);
			if (!want) {
				i = k - 1;
				continue;
			}
			size_t n = raw_number_len(v, len, k);
			bool is_int;
			long long iv = 0;
			double xv = 0;
			if (!raw_number(v + k, n, &is_int, &iv, &xv))
				return false;
			if (depth == 2) {
				if (!is_int || iv < 0)
					return false;
				out->ext = iv;
				got_ext = true;
			} else if (key_len == 2) {
				if (!raw_us_to_ns(is_int, iv, xv, &out->ts_ns))
					return false;
				got_ts = true;
			} else if (memcmp(key, "dur", 3) == 0) {
				if (!raw_us_to_ns(is_int, iv, xv, &dur) || dur < 0)
					return false;
				got_dur = true;
			} else {
				if (!is_int)
					return false;
				if (memcmp(key, "pid", 3) == 0) {
					out->pid = iv;
					got_pid = true;
				} else {
					out->tid = iv;
					got_tid = true;
				}
			}
			i = k + n - 1;
		} else if (c == '{' || c == '[') {
			depth++;
		} else if (c == '}' || c == ']') {
			depth--;
			if (depth == 1)
				in_args = false;
		}
	}
	return got_pid && got_tid && got_ts && got_dur && got_ext;
}

/*
 * Whether an event can be left undecoded because the analysis keeps nothing of it: flow and
 * instant events, and Kineto's CPU-side categories other than a GEMM operator (its shapes) or a
 * ProfilerStep annotation. Such an event is checked for its extent only (strings and brackets
 * balanced), not decoded: that is most of a trace's bytes (docs/trace.md "Speed").
 */
static bool skippable(const unsigned char *v, size_t len)
{
	raw_str ph, cat, name;
	raw_members(v, len, &ph, &cat, &name);
	if (!ph.p || !name.p || raw_is(ph, "B") || raw_is(ph, "E"))
		return false; /* a B is decoded, and so is every E: it need not name its category */
	if (!raw_is(ph, "X") && !raw_is(ph, "M") && !raw_is(ph, "B") && !raw_is(ph, "E"))
		return true;
	if (!raw_is(ph, "X") || !cat.p || raw_starts(name, "ProfilerStep#"))
		return false;
	if ((raw_is(cat, "cuda_runtime") || raw_is(cat, "cuda_driver")) &&
	    (raw_starts(name, "cudaLaunch") || raw_starts(name, "cuLaunch") || raw_starts(name, "hipLaunch") ||
	     raw_starts(name, "hipExtLaunch") || raw_starts(name, "hipModuleLaunch") ||
	     raw_starts(name, "hipExtModuleLaunch")))
		return false; /* a launch: it may link an older trace's kernel to its operator */
	static const char *const drop[] = {"cuda_runtime", "cuda_driver", "python_function", "user_annotation",
					   "gpu_user_annotation", "Trace", "overhead", "cpu_instant_event"};
	for (size_t i = 0; i < RM_ARRAY_SIZE(drop); i++)
		if (raw_is(cat, drop[i]))
			return true;
	if (raw_is(cat, "cpu_op"))
		return !(raw_is(name, "aten::mm") || raw_is(name, "aten::addmm") || raw_is(name, "aten::bmm") ||
			 raw_is(name, "aten::baddbmm") || raw_is(name, "record_param_comms") ||
			 raw_starts(name, "aten::_scaled_dot_product_") || raw_starts(name, "aten::_flash_attention_") ||
			 raw_starts(name, "aten::_efficient_attention_"));
	return false;
}

/* Whether the event's text is an "X" kernel launch of the CUDA/HIP runtime or driver (is_launch). */
static bool launch_text(const unsigned char *v, size_t len)
{
	raw_str ph, cat, name;
	raw_members(v, len, &ph, &cat, &name);
	return ph.p && raw_is(ph, "X") && cat.p && (raw_is(cat, "cuda_runtime") || raw_is(cat, "cuda_driver")) && name.p &&
	       (raw_starts(name, "cudaLaunch") || raw_starts(name, "cuLaunch") || raw_starts(name, "hipLaunch") ||
		raw_starts(name, "hipExtLaunch") || raw_starts(name, "hipModuleLaunch") ||
		raw_starts(name, "hipExtModuleLaunch"));
}

/* Reads the array whose '[' is next. top: the document itself (its "]" may be missing). */
static bool read_events(src *s, builder *b, bool top)
{
	int c = src_peek(s);
	src_advance(s, c); /* '[' */
	c = skip_ws(s);
	if (c == ']') {
		src_advance(s, c);
		return true;
	}
	for (;;) {
		int64_t line = s->line, col = s->col;
		if (c < 0 && top && !s->failed)
			return true; /* "[ {...}, {...}," then the end: the format allows it */
		if (!capture_value(s, "an element of traceEvents"))
			return false;
		if (skippable(s->val, s->val_len)) {
			b->t->events++;
			b->seq++;
			goto next;
		}
		if (launch_text(s->val, s->val_len)) {
			launch_rec l;
			if (raw_launch(s->val, s->val_len, &l)) {
				GROW(b->launch, b->n_launch, b->cap_launch);
				b->launch[b->n_launch++] = l;
				b->t->events++;
				b->seq++;
				goto next;
			}
		}
		json_t *ev = decode_value(s, line, col);
		if (!ev)
			return false;
		bool ok = process_event(s, b, ev, line, col);
		json_decref(ev);
		if (!ok)
			return false;
next:
		c = skip_ws(s);
		if (c == ',') {
			src_advance(s, c);
			c = skip_ws(s);
			continue;
		}
		if (c == ']') {
			src_advance(s, c);
			return true;
		}
		if (c < 0 && top && !s->failed)
			return true;
		if (c < 0)
			pos_error(s, RM_PARSE, s->line, s->col,
				  "the trace ends inside the traceEvents array (truncated JSON?)%s", "");
		else
			pos_error(s, RM_PARSE, s->line, s->col, "expected ',' or ']' after an event, found '%s'",
				  (char[]){(char)c, 0});
		return false;
	}
}

static bool read_document(src *s, builder *b)
{
	int c = skip_ws(s);
	if (c == 0xEF) { /* a UTF-8 byte order mark */
		for (int i = 0; i < 3 && src_peek(s) >= 0; i++)
			src_advance(s, src_peek(s));
		c = skip_ws(s);
	}
	if (c == '[')
		return read_events(s, b, true);
	if (c != '{') {
		if (c < 0 && !s->failed)
			pos_error(s, RM_PARSE, s->line, s->col, "empty file: no trace events%s", "");
		else if (c >= 0)
			pos_error(s, RM_PARSE, s->line, s->col,
				  "not a Chrome trace: expected '{' or '[' at the start, found '%s'", (char[]){(char)c, 0});
		return false;
	}
	int64_t oline = s->line, ocol = s->col;
	src_advance(s, c);
	bool have_events = false;
	c = skip_ws(s);
	if (c == '}') {
		src_advance(s, c);
		goto closed;
	}
	for (;;) {
		int64_t line = s->line, col = s->col;
		if (c != '"') {
			if (c < 0)
				pos_error(s, RM_PARSE, s->line, s->col, "the trace ends inside its top-level object "
									"(truncated JSON?)%s", "");
			else
				pos_error(s, RM_PARSE, line, col, "expected a member name, found '%s'",
					  (char[]){(char)c, 0});
			return false;
		}
		if (!capture_value(s, "a member name"))
			return false;
		json_t *k = decode_value(s, line, col);
		if (!k)
			return false;
		char key[64];
		snprintf(key, sizeof(key), "%s", json_is_string(k) ? json_string_value(k) : "");
		json_decref(k);
		c = skip_ws(s);
		if (c != ':') {
			pos_error(s, RM_PARSE, s->line, s->col, "expected ':' after member \"%s\"", key);
			return false;
		}
		src_advance(s, c);
		c = skip_ws(s);
		if (strcmp(key, "traceEvents") == 0 && c == '[') {
			if (!read_events(s, b, false))
				return false;
			have_events = true;
		} else if (strcmp(key, "traceEvents") == 0) {
			pos_error(s, RM_PARSE, s->line, s->col,
				  "\"traceEvents\" must be an array of events, found '%s'",
				  c < 0 ? "the end of the file" : (char[]){(char)c, 0});
			return false;
		} else {
			int64_t vl = s->line, vc = s->col;
			if (!capture_value(s, "a top-level member"))
				return false;
			json_t *v = decode_value(s, vl, vc);
			if (!v)
				return false;
			process_member(b, key, v);
			json_decref(v);
		}
		c = skip_ws(s);
		if (c == ',') {
			src_advance(s, c);
			c = skip_ws(s);
			continue;
		}
		if (c == '}') {
			src_advance(s, c);
			break;
		}
		if (c < 0)
			pos_error(s, RM_PARSE, s->line, s->col,
				  "the trace ends inside its top-level object (truncated JSON?)%s", "");
		else
			pos_error(s, RM_PARSE, s->line, s->col, "expected ',' or '}' in the top-level object, found '%s'",
				  (char[]){(char)c, 0});
		return false;
	}
closed:
	if (!have_events) {
		pos_error(s, RM_NOT_FOUND, oline, ocol, "no \"traceEvents\" array in the top-level object: not a "
							 "Chrome trace%s", "");
		return false;
	}
	c = skip_ws(s);
	if (c >= 0) {
		pos_error(s, RM_PARSE, s->line, s->col, "text after the end of the trace ('%s')", (char[]){(char)c, 0});
		return false;
	}
	return !s->failed;
}

/* ------------------------------------------------------------------------------------------ */
/* The end of the file: JAX events placed, events ordered, GEMM FLOPs attached. */

static int cmp_event(const void *pa, const void *pb)
{
	const rm_trace__event *a = pa, *b = pb;
	if (a->ts_ns != b->ts_ns)
		return a->ts_ns < b->ts_ns ? -1 : 1;
	int64_t ea = a->ts_ns + a->dur_ns, eb = b->ts_ns + b->dur_ns;
	if (ea != eb)
		return ea < eb ? -1 : 1;
	if (a->stream != b->stream)
		return a->stream < b->stream ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static int cmp_step(const void *pa, const void *pb)
{
	const rm_trace__step *a = pa, *b = pb;
	if (a->device != b->device)
		return a->device < b->device ? -1 : 1;
	if (a->ts_ns != b->ts_ns)
		return a->ts_ns < b->ts_ns ? -1 : 1;
	return a->number < b->number ? -1 : a->number > b->number;
}

static int cmp_op(const void *pa, const void *pb)
{
	const rm_trace__op *a = pa, *b = pb;
	if (a->ext_id != b->ext_id)
		return a->ext_id < b->ext_id ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

int64_t rm_trace__op_find(const rm_trace *t, int64_t ext_id)
{
	int64_t lo = 0, hi = t->n_ops;
	while (lo < hi) {
		int64_t mid = lo + (hi - lo) / 2;
		if (t->ops[mid].ext_id < ext_id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < t->n_ops && t->ops[lo].ext_id == ext_id ? lo : -1;
}

static int cmp_stream(const void *pa, const void *pb)
{
	const rm_trace__stream *a = pa, *b = pb;
	if (a->device != b->device)
		return a->device < b->device ? -1 : 1;
	return a->stream < b->stream ? -1 : a->stream > b->stream;
}

static int cmp_kind(const rm_trace__nccl_kind *a, const rm_trace__nccl_kind *b)
{
	int c = strcmp(a->op, b->op);
	if (!c)
		c = strcmp(a->algo, b->algo);
	if (!c)
		c = strcmp(a->proto, b->proto);
	return c;
}

static int cmp_launch(const void *pa, const void *pb)
{
	const launch_rec *a = pa, *b = pb;
	if (a->ext != b->ext)
		return a->ext < b->ext ? -1 : 1;
	return (a->ts_ns > b->ts_ns) - (a->ts_ns < b->ts_ns);
}

static int cmp_span(const void *pa, const void *pb)
{
	const op_span *a = pa, *b = pb;
	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	if (a->ts_ns != b->ts_ns)
		return a->ts_ns < b->ts_ns ? -1 : 1;
	/* the outer of two operators starting together first: the inner one is then found first
	 * when scanning back */
	return (a->end_ns < b->end_ns) - (a->end_ns > b->end_ns);
}

/*
 * Older Kineto traces (HolisticTraceAnalysis' 2022-23 test traces) give a kernel and its launch
 * the launch's correlation as "External id" and the operator its own: the kernel then names no
 * operator. Kineto links them by the CPU thread's nesting: the launch runs inside the operator
 * that issued it. So a GPU event whose id matches no operator takes the id of the innermost kept
 * operator (GEMM, attention, record_param_comms) that encloses its launch on the launch's thread;
 * a launch inside none leaves the kernel unlinked. Ops are sorted (ext_id) already.
 */
static void link_launches(builder *b)
{
	rm_trace *t = b->t;
	if (b->n_launch == 0 || b->n_spans == 0 || t->n_ops == 0)
		return;
	qsort(b->launch, (size_t)b->n_launch, sizeof(*b->launch), cmp_launch);
	qsort(b->spans, (size_t)b->n_spans, sizeof(*b->spans), cmp_span);
	for (int64_t i = 0; i < t->n_ev; i++) {
		rm_trace__event *e = &t->ev[i];
		if (e->ext_id < 0 || rm_trace__op_find(t, e->ext_id) >= 0)
			continue;
		/* the launch with this id (the first in time when ids repeat) */
		int64_t lo = 0, hi = b->n_launch;
		while (lo < hi) {
			int64_t mid = lo + (hi - lo) / 2;
			if (b->launch[mid].ext < e->ext_id)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo >= b->n_launch || b->launch[lo].ext != e->ext_id)
			continue;
		const launch_rec *l = &b->launch[lo];
		/* the last span of the launch's thread starting at or before it */
		op_span key = {.pid = l->pid, .tid = l->tid, .ts_ns = l->ts_ns, .end_ns = INT64_MIN};
		int64_t a = 0, z = b->n_spans;
		while (a < z) {
			int64_t mid = a + (z - a) / 2;
			if (cmp_span(&b->spans[mid], &key) <= 0)
				a = mid + 1;
			else
				z = mid;
		}
		/* back over that thread's spans: the first that still encloses the launch is the
		 * innermost (kept operators nest a few deep at most; 64 bounds the walk) */
		for (int64_t k = a - 1, n = 0; k >= 0 && n < 64; k--, n++) {
			const op_span *sp = &b->spans[k];
			if (sp->pid != l->pid || sp->tid != l->tid)
				break;
			if (sp->ts_ns <= l->ts_ns && l->ts_ns < sp->end_ns) {
				e->ext_id = sp->ext;
				break;
			}
		}
	}
}

static void finish(builder *b)
{
	rm_trace *t = b->t;
	/* JAX: streams of /device:GPU processes are kernels, their "Steps" thread the steps */
	int64_t jax_steps = 0;
	for (int64_t i = 0; i < b->n_pend; i++) {
		const pending *p = &b->pend[i];
		int dev = jax_gpu_device(meta_name(b, p->pid, INT64_MIN));
		const char *tname = meta_name(b, p->pid, p->tid);
		if (dev < 0 || !tname)
			continue;
		if (strncmp(tname, "Stream", 6) == 0) {
			add_event(b, dev, p->tid, p->ts_ns, p->dur_ns, p->name, (rm_trace_class)p->cls, -1, -1, p->seq);
			t->jax = true;
		} else if (strcmp(tname, "Steps") == 0) {
			const char *n = t->names[p->name];
			char *end;
			long long num = strtoll(n, &end, 10);
			add_step(b, *n && !*end && num >= 0 ? num : jax_steps, p->ts_ns, p->dur_ns, dev);
			jax_steps++;
		}
	}
	/* streams in (device, stream) order, indices remapped */
	int *order = rm_new(int, (size_t)t->n_streams + 1);
	rm_trace__stream *sorted = rm_new(rm_trace__stream, (size_t)t->n_streams + 1);
	if (t->n_streams > 0) {
		memcpy(sorted, t->streams, (size_t)t->n_streams * sizeof(*sorted));
		qsort(sorted, (size_t)t->n_streams, sizeof(*sorted), cmp_stream);
	}
	for (int i = 0; i < t->n_streams; i++)
		for (int j = 0; j < t->n_streams; j++)
			if (sorted[j].device == t->streams[i].device && sorted[j].stream == t->streams[i].stream)
				order[i] = j;
	/* NCCL kinds in (op, algo, proto) order */
	int *korder = rm_new(int, (size_t)t->n_nccl_kinds + 1);
	for (int i = 0; i < t->n_nccl_kinds; i++) {
		int rank = 0;
		for (int j = 0; j < t->n_nccl_kinds; j++)
			rank += cmp_kind(&t->nccl_kinds[j], &t->nccl_kinds[i]) < 0;
		korder[i] = rank;
	}
	rm_trace__nccl_kind *ks = rm_new(rm_trace__nccl_kind, (size_t)t->n_nccl_kinds + 1);
	for (int i = 0; i < t->n_nccl_kinds; i++)
		ks[korder[i]] = t->nccl_kinds[i];
	for (int64_t i = 0; i < t->n_ev; i++) {
		t->ev[i].stream = order[t->ev[i].stream];
		if (t->ev[i].nccl >= 0)
			t->ev[i].nccl = (int16_t)korder[t->ev[i].nccl];
	}
	free(t->streams);
	t->streams = sorted;
	t->cap_streams = t->n_streams + 1;
	free(t->nccl_kinds);
	t->nccl_kinds = ks;
	free(order);
	free(korder);

	/* qsort's base must not be NULL even for 0 elements (C17 7.22.5) */
	if (t->n_ev > 0)
		qsort(t->ev, (size_t)t->n_ev, sizeof(*t->ev), cmp_event);
	if (t->n_steps > 0)
		qsort(t->steps, (size_t)t->n_steps, sizeof(*t->steps), cmp_step);
	/* FLOPs: the first GEMM kernel (in time) of each GEMM operator with shapes carries them */
	if (t->n_ops > 0)
		qsort(t->ops, (size_t)t->n_ops, sizeof(*t->ops), cmp_op);
	link_launches(b);
	bool *used = rm_new(bool, (size_t)t->n_ops + 1);
	for (int64_t i = 0; i < t->n_ops; i++)
		t->gemm_shapes += t->ops[i].kind == RM_TRACE__OP_GEMM;
	for (int64_t i = 0; i < t->n_ev && t->gemm_shapes > 0; i++) {
		rm_trace__event *e = &t->ev[i];
		if (e->cls != RM_TRACE_GEMM || e->ext_id < 0)
			continue;
		int64_t k = rm_trace__op_find(t, e->ext_id);
		if (k < 0 || t->ops[k].kind != RM_TRACE__OP_GEMM)
			continue;
		const rm_trace__op *g = &t->ops[k];
		/* 2 * batch * m * n * k: a multiply and an add per term */
		double flops = 2.0 * (double)g->d[0] * (double)g->d[1] * (double)g->d[2] * (double)g->d[3];
		e->flags |= RM_TRACE__SHAPED;
		e->work = used[k] ? 0 : (int64_t)llround(flops);
		used[k] = true;
	}
	free(used);
}

static void builder_free(builder *b)
{
	free(b->slots);
	free(b->name_cls);
	for (int i = 0; i < b->n_meta; i++)
		free(b->meta[i].name);
	free(b->meta);
	free(b->pend);
	for (int i = 0; i < b->n_open; i++)
		json_decref(b->open[i].ev);
	free(b->open);
	free(b->launch);
	free(b->spans);
}

static rm_trace *read_src(src *s, rm_error *err)
{
	rm_trace *t = rm_new(rm_trace, 1);
	t->rank = -1;
	builder b = {.t = t, .last_stream = -1};
	s->line = 1;
	s->col = 1;
	s->err = err;
	bool ok = read_document(s, &b);
	t->text_bytes = s->offset;
	/* a B without its E (a trace cut while a span was open): dropped, with a warning at the B */
	for (int i = 0; ok && i < b.n_open; i++) {
		const char *n = json_str(b.open[i].ev, "name");
		rm_log_warn("%s:%lld:%lld: B event '%.80s' (pid %lld, tid %lld) has no E event: dropped", s->name,
			    (long long)b.open[i].line, (long long)b.open[i].col, n ? n : "", (long long)b.open[i].pid,
			    (long long)b.open[i].tid);
	}
	if (ok)
		finish(&b);
	builder_free(&b);
	free(s->val);
	if (ok && t->n_ev == 0) {
		rm_error_set(err, RM_NOT_FOUND, s->name, (int)s->line, (int)s->col,
			     "no GPU events in %lld trace events (no Kineto \"kernel\"/\"gpu_memcpy\"/\"gpu_memset\" "
			     "event, no event on a /device:GPU stream): was the profiler run with CUDA activities?",
			     (long long)t->events);
		ok = false;
	}
	if (!ok) {
		rm_trace_destroy(t);
		return NULL;
	}
	return t;
}

rm_trace *rm_trace_read(const char *path, rm_error *err)
{
	FILE *f = rm_file_open_read(path, err);
	if (!f)
		return NULL;
	unsigned char magic[2] = {0, 0};
	size_t got = fread(magic, 1, 2, f);
	fclose(f);
	src *s = rm_new(src, 1);
	s->name = path;
	s->gzip = got == 2 && magic[0] == 0x1f && magic[1] == 0x8b; /* RFC 1952 ID1 ID2 */
	s->gz = gzopen(path, "rb");
	if (!s->gz) {
		rm_error_set(err, RM_IO, path, 0, 0, "cannot open: %s", strerror(errno ? errno : ENOMEM));
		free(s);
		return NULL;
	}
	gzbuffer(s->gz, 1 << 17);
	s->p = s->end = s->buf;
	rm_trace *t = read_src(s, err);
	gzclose(s->gz);
	free(s);
	return t;
}

rm_trace *rm_trace_read_mem(const char *data, size_t len, const char *name, rm_error *err)
{
	src *s = rm_new(src, 1);
	s->name = name;
	s->mem = (const unsigned char *)data;
	s->mem_len = len;
	s->p = s->mem;
	s->end = s->mem + len;
	rm_trace *t = read_src(s, err);
	free(s);
	return t;
}

void rm_trace_destroy(rm_trace *t)
{
	if (!t)
		return;
	for (int32_t i = 0; i < t->n_names; i++)
		free(t->names[i]);
	free(t->names);
	free(t->ev);
	free(t->streams);
	free(t->steps);
	free(t->nccl_kinds);
	free(t->ops);
	for (int i = 0; i < t->n_device_names; i++)
		free(t->device_names[i]);
	free(t->device_names);
	free(t);
}

void rm_trace_summary_get(const rm_trace *t, rm_trace_summary *out)
{
	memset(out, 0, sizeof(*out));
	out->events = t->events;
	out->gpu_events = t->n_ev;
	out->steps = t->n_steps;
	out->gemm_shapes = t->gemm_shapes;
	out->streams = t->n_streams;
	out->rank = t->rank;
	out->format = t->jax ? "jax" : "kineto";
	out->text_bytes = t->text_bytes;
	for (int64_t i = 0; i < t->n_ev; i++) {
		uint8_t c = t->ev[i].cls;
		if (c != RM_TRACE_MEMCPY && c != RM_TRACE_MEMSET)
			out->kernels++;
		if (c == RM_TRACE_NCCL)
			out->nccl_kernels++;
	}
	for (int i = 0; i < t->n_streams; i++)
		if (i == 0 || t->streams[i].device != t->streams[i - 1].device)
			out->devices++;
}
