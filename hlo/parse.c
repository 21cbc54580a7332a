/*
 * The HLO text parser (remora/hlo.h): a recursive descent over the module grammar of
 * openxla/xla xla/hlo/parser/hlo_parser.cc:
 *
 *   module      := 'HloModule' name (',' attr)* computation*
 *   computation := ['ENTRY'] name [signature] '{' instruction* '}' [',' attr]*
 *   signature   := '(' ... ')' '->' shape
 *   instruction := ['ROOT'] name '=' shape opcode '(' operands ')' (',' attr)*
 *   operand     := [shape] name
 *   shape       := ptype '[' dims ']' ['{' layout '}'] | '(' [shape (',' shape)*] ')'
 *   attr        := name '=' value   (value: text balanced in (), [], {} and "")
 *
 * Names may carry a leading '%' (older dumps) or not (newer ones); /.../ comments
 * ("/index=5/" in long tuples) are skipped as white space. Everything the module owns lives
 * in one arena freed by rm_hlo_destroy.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hlo_private.h"

const hlo_ptype hlo__ptypes[] = {
	{"pred", 8},    {"s2", 2},       {"s4", 4},        {"s8", 8},          {"s16", 16},
	{"s32", 32},    {"s64", 64},     {"u2", 2},        {"u4", 4},          {"u8", 8},
	{"u16", 16},    {"u32", 32},     {"u64", 64},      {"f16", 16},        {"bf16", 16},
	{"f32", 32},    {"f64", 64},     {"c64", 64},      {"c128", 128},      {"f8e5m2", 8},
	{"f8e4m3", 8},  {"f8e4m3fn", 8}, {"f8e4m3b11fnuz", 8}, {"f8e5m2fnuz", 8}, {"f8e4m3fnuz", 8},
	{"f8e3m4", 8},  {"f8e8m0fnu", 8}, {"f4e2m1fn", 4}, {"token", 0},        {"opaque", 0},
};
const int hlo__n_ptypes = (int)RM_ARRAY_SIZE(hlo__ptypes);

/* ---- arena ---- */

typedef struct arena_chunk {
	struct arena_chunk *next;
	size_t used, cap;
	max_align_t data[];
} arena_chunk;

static void *arena_alloc(void **arena, size_t size)
{
	size = (size + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
	arena_chunk *c = *arena;
	if (!c || c->cap - c->used < size) {
		size_t cap = size > (1u << 20) ? size : (1u << 20);
		arena_chunk *n = rm_xmalloc(sizeof(*n) + cap);
		n->next = c;
		n->used = 0;
		n->cap = cap;
		*arena = c = n;
	}
	void *p = (char *)c->data + c->used;
	c->used += size;
	return p;
}

static void arena_free(void *arena)
{
	for (arena_chunk *c = arena, *n; c; c = n) {
		n = c->next;
		free(c);
	}
}

static char *arena_strndup(void **arena, const char *s, size_t n)
{
	char *p = arena_alloc(arena, n + 1);
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

/* ---- lexer ---- */

typedef struct parser {
	const char *p, *end;
	const char *line_start;
	int line;
	const char *file;
	rm_error *err;
	bool failed;
	rm_hlo_module *m;
} parser;

static int col_of(const parser *ps, const char *at)
{
	return (int)(at - ps->line_start) + 1;
}

static bool fail_at(parser *ps, const char *at, const char *msg)
{
	if (!ps->failed)
		rm_error_set(ps->err, RM_PARSE, ps->file, ps->line, col_of(ps, at), "%s", msg);
	ps->failed = true;
	return false;
}

static bool expected(parser *ps, const char *at, const char *what)
{
	if (!ps->failed)
		rm_error_set(ps->err, RM_PARSE, ps->file, ps->line, col_of(ps, at), "expected %s", what);
	ps->failed = true;
	return false;
}

/* Skips white space and comments (slash-star to star-slash, and // to the end of the line). */
static void skip_ws(parser *ps)
{
	while (ps->p < ps->end) {
		char c = *ps->p;
		if (c == '\n') {
			ps->p++;
			ps->line++;
			ps->line_start = ps->p;
		} else if (c == ' ' || c == '\t' || c == '\r') {
			ps->p++;
		} else if (c == '/' && ps->p + 1 < ps->end && ps->p[1] == '*') {
			const char *q = ps->p + 2;
			while (q + 1 < ps->end && !(q[0] == '*' && q[1] == '/')) {
				if (*q == '\n') {
					ps->line++;
					ps->line_start = q + 1;
				}
				q++;
			}
			ps->p = q + 1 < ps->end ? q + 2 : ps->end;
		} else if (c == '/' && ps->p + 1 < ps->end && ps->p[1] == '/') {
			while (ps->p < ps->end && *ps->p != '\n')
				ps->p++;
		} else {
			break;
		}
	}
}

static bool is_name_char(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '.' || c == '-' || c == '$';
}

/* A name with an optional leading '%': returns its length (0 if none), *start set. */
static size_t lex_name(parser *ps, const char **start)
{
	skip_ws(ps);
	const char *q = ps->p;
	if (q < ps->end && *q == '%')
		q++;
	const char *s = q;
	while (q < ps->end && is_name_char(*q))
		q++;
	*start = s;
	if (q == s)
		return 0;
	ps->p = q;
	return (size_t)(q - s);
}

static bool peek_char(parser *ps, char c)
{
	skip_ws(ps);
	return ps->p < ps->end && *ps->p == c;
}

static bool expect_char(parser *ps, char c, const char *what)
{
	if (peek_char(ps, c)) {
		ps->p++;
		return true;
	}
	return expected(ps, ps->p, what);
}

static bool match_word(parser *ps, const char *w)
{
	skip_ws(ps);
	size_t n = strlen(w);
	if ((size_t)(ps->end - ps->p) >= n && memcmp(ps->p, w, n) == 0 &&
	    (ps->p + n == ps->end || !is_name_char(ps->p[n]))) {
		ps->p += n;
		return true;
	}
	return false;
}

/* Skips a balanced run ending before ',' ')' or a newline at depth 0 (an attribute value), or,
 * with stop_close, the text up to the ')' closing the current group. Strings are skipped whole. */
static const char *skip_balanced(parser *ps, bool stop_close)
{
	int depth = 0;
	const char *q = ps->p;
	while (q < ps->end) {
		char c = *q;
		if (c == '"') {
			const char *open = q, *open_ls = ps->line_start;
			int open_line = ps->line;
			q++;
			while (q < ps->end && *q != '"') {
				if (*q == '\\' && q + 1 < ps->end)
					q++;
				if (*q == '\n') {
					ps->line++;
					ps->line_start = q + 1;
				}
				q++;
			}
			if (q >= ps->end) {
				ps->line = open_line;
				ps->line_start = open_ls;
				expected(ps, open, "'\"' closing the string opened here");
				return NULL;
			}
			q++;
			continue;
		}
		if (c == '(' || c == '[' || c == '{') {
			depth++;
		} else if (c == ')' || c == ']' || c == '}') {
			if (depth == 0) {
				if (stop_close || c == ')' || c == '}')
					break;
				fail_at(ps, q, "unbalanced ']'");
				return NULL;
			}
			depth--;
		} else if (depth == 0 && !stop_close && (c == ',' || c == '\n')) {
			break;
		}
		if (c == '\n') {
			ps->line++;
			ps->line_start = q + 1;
		}
		q++;
	}
	if (depth > 0 || (stop_close && q >= ps->end)) {
		expected(ps, q, "a closing bracket before the end of the text");
		return NULL;
	}
	const char *start = ps->p;
	ps->p = q;
	return start;
}

/* ---- shapes ---- */

static int ptype_find(const char *s, size_t n)
{
	for (int i = 0; i < hlo__n_ptypes; i++)
		if (strlen(hlo__ptypes[i].name) == n && memcmp(hlo__ptypes[i].name, s, n) == 0)
			return i;
	return -1;
}

/* Whether a shape starts here: '(' or a primitive type followed by '['. */
static bool at_shape(parser *ps)
{
	skip_ws(ps);
	if (ps->p < ps->end && *ps->p == '(')
		return true;
	const char *q = ps->p;
	while (q < ps->end && isalnum((unsigned char)*q))
		q++;
	return q < ps->end && *q == '[' && ptype_find(ps->p, (size_t)(q - ps->p)) >= 0;
}

/* A decimal integer, read within the text (which need not end in a NUL). */
static bool parse_int(parser *ps, int64_t *out)
{
	skip_ws(ps);
	const char *q = ps->p;
	bool neg = q < ps->end && *q == '-';
	if (neg)
		q++;
	if (q >= ps->end || !isdigit((unsigned char)*q))
		return expected(ps, ps->p, "an integer");
	int64_t v = 0;
	for (; q < ps->end && isdigit((unsigned char)*q); q++) {
		if (v > (INT64_MAX - (*q - '0')) / 10)
			return fail_at(ps, ps->p, "an integer too large for 64 bits");
		v = v * 10 + (*q - '0');
	}
	ps->p = q;
	*out = neg ? -v : v;
	return true;
}

static bool parse_shape(parser *ps, hlo_shape *s, int depth);

static bool parse_tuple_shape(parser *ps, hlo_shape *s, int depth)
{
	ps->p++; /* '(' */
	hlo_shape tmp[64];
	hlo_shape *elems = tmp;
	int32_t n = 0, cap = 64;
	bool heap = false;
	if (!peek_char(ps, ')')) {
		for (;;) {
			if (n == cap) {
				hlo_shape *ne = rm_xmalloc(sizeof(*ne) * (size_t)cap * 2);
				memcpy(ne, elems, sizeof(*ne) * (size_t)n);
				if (heap)
					free(elems);
				elems = ne;
				heap = true;
				cap *= 2;
			}
			if (!parse_shape(ps, &elems[n], depth + 1))
				break;
			n++;
			if (!peek_char(ps, ','))
				break;
			ps->p++;
		}
	}
	bool ok = !ps->failed && expect_char(ps, ')', "')' closing the tuple shape");
	s->ptype = -1;
	s->mem_space = 0;
	s->rank = n;
	s->dims = NULL;
	s->elems = arena_alloc(&ps->m->arena, sizeof(hlo_shape) * (size_t)(n ? n : 1));
	memcpy(s->elems, elems, sizeof(hlo_shape) * (size_t)n);
	if (heap)
		free(elems);
	return ok;
}

/* The layout "{1,0:T(8,128)(2,1)S(5)}": only its memory space S(n) matters here. */
static bool parse_layout(parser *ps, hlo_shape *s)
{
	const char *open = ps->p;
	ps->p++;
	const char *body = skip_balanced(ps, true);
	if (!body)
		return false;
	if (ps->p >= ps->end || *ps->p != '}')
		return expected(ps, open, "'}' closing the layout");
	const char *colon = memchr(body, ':', (size_t)(ps->p - body));
	if (colon) {
		for (const char *q = colon; q + 2 < ps->p; q++)
			if (q[0] == 'S' && q[1] == '(')
				s->mem_space = (int16_t)atoi(q + 2);
	}
	ps->p++;
	return true;
}

static bool parse_shape(parser *ps, hlo_shape *s, int depth)
{
	skip_ws(ps);
	if (depth > 64)
		return fail_at(ps, ps->p, "shape nested too deeply");
	if (ps->p < ps->end && *ps->p == '(')
		return parse_tuple_shape(ps, s, depth);
	const char *t = ps->p;
	while (ps->p < ps->end && isalnum((unsigned char)*ps->p))
		ps->p++;
	int pt = ptype_find(t, (size_t)(ps->p - t));
	if (pt < 0) {
		ps->p = t;
		return expected(ps, t, "a shape (an element type such as f32, bf16, s32, pred, or a tuple)");
	}
	if (!expect_char(ps, '[', "'[' after the element type"))
		return false;
	int64_t dims[64];
	int32_t rank = 0;
	if (!peek_char(ps, ']')) {
		for (;;) {
			skip_ws(ps);
			if (rank == 64)
				return fail_at(ps, ps->p, "more than 64 dimensions");
			if (ps->p < ps->end && *ps->p == '?') {
				ps->p++;
				dims[rank++] = 0; /* unbounded dynamic: unknown, 0 */
			} else {
				if (ps->p + 1 < ps->end && ps->p[0] == '<' && ps->p[1] == '=')
					ps->p += 2;
				int64_t d;
				if (!parse_int(ps, &d))
					return false;
				if (d < 0)
					return fail_at(ps, ps->p, "a negative dimension");
				dims[rank++] = d;
			}
			if (!peek_char(ps, ','))
				break;
			ps->p++;
		}
	}
	if (!expect_char(ps, ']', "']' closing the dimensions"))
		return false;
	s->ptype = (int16_t)pt;
	s->mem_space = 0;
	s->rank = rank;
	s->elems = NULL;
	s->dims = arena_alloc(&ps->m->arena, sizeof(int64_t) * (size_t)(rank ? rank : 1));
	memcpy(s->dims, dims, sizeof(int64_t) * (size_t)rank);
	/* a layout follows directly ("{1,0}"), never after white space that ends the shape */
	if (ps->p < ps->end && *ps->p == '{')
		return parse_layout(ps, s);
	return true;
}

int64_t hlo__shape_elems(const hlo_shape *s)
{
	if (s->ptype < 0) {
		int64_t n = 0;
		for (int32_t i = 0; i < s->rank; i++)
			n += hlo__shape_elems(&s->elems[i]);
		return n;
	}
	int64_t n = 1;
	for (int32_t i = 0; i < s->rank; i++)
		n *= s->dims[i];
	return n;
}

int64_t hlo__shape_bytes(const hlo_shape *s)
{
	if (s->ptype < 0) {
		int64_t n = 0;
		for (int32_t i = 0; i < s->rank; i++)
			n += hlo__shape_bytes(&s->elems[i]);
		return n;
	}
	int64_t elems = 1;
	for (int32_t i = 0; i < s->rank; i++)
		elems *= s->dims[i];
	return (elems * hlo__ptypes[s->ptype].bits + 7) / 8;
}

int64_t rm_hlo_shape_bytes(const char *text)
{
	rm_hlo_module m = {0};
	parser ps = {.p = text, .end = text + strlen(text), .line_start = text, .line = 1, .m = &m};
	hlo_shape s;
	int64_t bytes = parse_shape(&ps, &s, 0) ? hlo__shape_bytes(&s) : -1;
	skip_ws(&ps);
	if (ps.p != ps.end)
		bytes = -1;
	arena_free(m.arena);
	return bytes;
}

/* ---- names ---- */

typedef struct name_table {
	int32_t *slots; /* index + 1 */
	uint32_t cap;
} name_table;

static uint32_t name_hash(const char *s)
{
	return (uint32_t)rm_hash_fnv1a(s, strlen(s), RM_FNV1A_SEED);
}

/* Inserts names[0..n) (their indices); false with *dup the first index whose name repeats. */
static bool table_build(name_table *t, const char *const *names, size_t stride, int32_t n, int32_t *dup)
{
	t->cap = 16;
	while (t->cap < (uint32_t)n * 2)
		t->cap *= 2;
	t->slots = rm_new(int32_t, t->cap);
	for (int32_t i = 0; i < n; i++) {
		const char *nm = *(const char *const *)((const char *)names + stride * (size_t)i);
		uint32_t h = name_hash(nm) & (t->cap - 1);
		for (;; h = (h + 1) & (t->cap - 1)) {
			int32_t s = t->slots[h];
			if (s == 0) {
				t->slots[h] = i + 1;
				break;
			}
			const char *o = *(const char *const *)((const char *)names + stride * (size_t)(s - 1));
			if (strcmp(o, nm) == 0) {
				*dup = i;
				return false;
			}
		}
	}
	return true;
}

static int32_t table_find(const name_table *t, const char *const *names, size_t stride, const char *nm)
{
	uint32_t h = name_hash(nm) & (t->cap - 1);
	for (;; h = (h + 1) & (t->cap - 1)) {
		int32_t s = t->slots[h];
		if (s == 0)
			return -1;
		const char *o = *(const char *const *)((const char *)names + stride * (size_t)(s - 1));
		if (strcmp(o, nm) == 0)
			return s - 1;
	}
}

int32_t hlo__comp_find(const rm_hlo_module *m, const char *name)
{
	if (name[0] == '%')
		name++;
	name_table t = {.slots = m->comp_hash, .cap = m->comp_hash_cap};
	if (!t.slots)
		return -1;
	return table_find(&t, &m->comps[0].name, sizeof(hlo_comp), name);
}

const hlo_attr *hlo__attr(const hlo_instr *in, const char *name)
{
	for (int32_t i = 0; i < in->n_attrs; i++)
		if (strcmp(in->attrs[i].name, name) == 0)
			return &in->attrs[i];
	return NULL;
}

/* ---- the grammar ---- */

/* name '=' value; the value's text copied. */
static bool parse_attr(parser *ps, hlo_attr *a)
{
	const char *s;
	size_t n = lex_name(ps, &s);
	if (n == 0)
		return expected(ps, ps->p, "an attribute name");
	a->name = arena_strndup(&ps->m->arena, s, n);
	if (!expect_char(ps, '=', "'=' after the attribute name"))
		return false;
	skip_ws(ps);
	a->line = ps->line;
	a->col = col_of(ps, ps->p);
	const char *v = skip_balanced(ps, false);
	if (!v)
		return false;
	const char *e = ps->p;
	while (e > v && isspace((unsigned char)e[-1]))
		e--;
	if (e == v)
		return expected(ps, v, "a value after '='");
	a->value = arena_strndup(&ps->m->arena, v, (size_t)(e - v));
	return true;
}

/* Attributes after ',' until the end of the line (growing *attrs in the arena). */
static bool parse_attrs(parser *ps, hlo_attr **attrs, int32_t *n_attrs)
{
	hlo_attr buf[128];
	int32_t n = 0;
	while (peek_char(ps, ',')) {
		ps->p++;
		if (n == (int32_t)RM_ARRAY_SIZE(buf))
			return fail_at(ps, ps->p, "more than 128 attributes");
		if (!parse_attr(ps, &buf[n]))
			return false;
		n++;
	}
	*attrs = arena_alloc(&ps->m->arena, sizeof(hlo_attr) * (size_t)(n ? n : 1));
	memcpy(*attrs, buf, sizeof(hlo_attr) * (size_t)n);
	*n_attrs = n;
	return true;
}

/* [ROOT] name '=' shape opcode '(' operands ')' attrs. Operand names kept for resolution. */
static bool parse_instr(parser *ps, hlo_instr *in, bool *root, const char ***opnames, int **oplines)
{
	*root = match_word(ps, "ROOT");
	skip_ws(ps);
	in->line = ps->line;
	in->col = col_of(ps, ps->p);
	const char *s;
	size_t n = lex_name(ps, &s);
	if (n == 0)
		return expected(ps, ps->p, "an instruction name or '}'");
	in->name = arena_strndup(&ps->m->arena, s, n);
	if (!expect_char(ps, '=', "'=' after the instruction name"))
		return false;
	/* the shape may be left out (hand-written HLO: the parser infers it); XLA's dumps print it */
	if (at_shape(ps)) {
		if (!parse_shape(ps, &in->shape, 0))
			return false;
	} else {
		/* "f33[2]": a shape whose element type is not one */
		const char *q = ps->p;
		while (q < ps->end && isalnum((unsigned char)*q))
			q++;
		if (q < ps->end && *q == '[')
			return expected(ps, ps->p, "a shape (an element type such as f32, bf16, s32, pred, or a tuple)");
		in->shape_inferred = true;
	}
	n = lex_name(ps, &s);
	if (n == 0)
		return expected(ps, ps->p, "an opcode after the shape");
	in->opcode = arena_strndup(&ps->m->arena, s, n);
	if (!expect_char(ps, '(', "'(' after the opcode"))
		return false;
	const char *args = ps->p;
	bool raw = strcmp(in->opcode, "constant") == 0 || strcmp(in->opcode, "parameter") == 0;
	const char **names = NULL;
	int *lines = NULL;
	int32_t cnt = 0, cap = 0;
	if (raw) {
		if (!skip_balanced(ps, true))
			return false;
	} else if (!peek_char(ps, ')')) {
		for (;;) {
			if (at_shape(ps)) {
				hlo_shape tmp;
				if (!parse_shape(ps, &tmp, 0))
					goto fail;
			}
			skip_ws(ps);
			int line = ps->line, col = col_of(ps, ps->p);
			n = lex_name(ps, &s);
			if (n == 0) {
				expected(ps, ps->p, "an operand name");
				goto fail;
			}
			if (cnt == cap) {
				cap = cap ? cap * 2 : 8;
				names = rm_xrealloc(names, sizeof(*names) * (size_t)cap);
				lines = rm_xrealloc(lines, sizeof(*lines) * 2 * (size_t)cap);
			}
			names[cnt] = arena_strndup(&ps->m->arena, s, n);
			lines[2 * cnt] = line;
			lines[2 * cnt + 1] = col;
			cnt++;
			if (!peek_char(ps, ','))
				break;
			ps->p++;
		}
	}
	in->args = arena_strndup(&ps->m->arena, args, (size_t)(ps->p - args));
	if (!expect_char(ps, ')', "')' closing the operands"))
		goto fail;
	in->n_operands = cnt;
	in->operands = NULL;
	*opnames = names;
	*oplines = lines;
	return parse_attrs(ps, &in->attrs, &in->n_attrs);
fail:
	free(names);
	free(lines);
	return false;
}

/* The shape of an instruction written without one, from its operands (they come first): a
 * tuple's is the tuple of theirs, a get-tuple-element's the element's, a while's or an
 * elementwise op's that of operand 0 (compare: pred of it); a copy, not a new array. Shapes
 * XLA's inference would give otherwise (a dot, a reduce) are left as an empty tuple: no bytes. */
static void infer_shape(parser *ps, hlo_comp *c, hlo_instr *in)
{
	memset(&in->shape, 0, sizeof(in->shape));
	in->shape.ptype = -1;
	const char *op = in->opcode;
	if (strcmp(op, "tuple") == 0) {
		in->shape.rank = in->n_operands;
		in->shape.elems = arena_alloc(&ps->m->arena, sizeof(hlo_shape) * (size_t)(in->n_operands ? in->n_operands : 1));
		for (int32_t k = 0; k < in->n_operands; k++)
			in->shape.elems[k] = c->instrs[in->operands[k]].shape;
		return;
	}
	if (in->n_operands == 0)
		return;
	const hlo_shape *s0 = &c->instrs[in->operands[0]].shape;
	if (strcmp(op, "get-tuple-element") == 0) {
		const hlo_attr *ix = hlo__attr(in, "index");
		long k = ix ? strtol(ix->value, NULL, 10) : -1;
		if (s0->ptype < 0 && k >= 0 && k < s0->rank)
			in->shape = s0->elems[k];
		return;
	}
	static const char *const same[] = {"while", "add", "subtract", "multiply", "divide", "maximum", "minimum",
					   "negate", "abs", "exponential", "log", "tanh", "sqrt", "rsqrt", "copy",
					   "select", "clamp", "and", "or", "xor", "not", "power", "compare", "convert",
					   "opt-barrier", "bitcast", "all-reduce", "collective-permute", "fusion"};
	for (size_t i = 0; i < RM_ARRAY_SIZE(same); i++)
		if (strcmp(op, same[i]) == 0) {
			in->shape = *(strcmp(op, "select") == 0 && in->n_operands > 1 ? &c->instrs[in->operands[1]].shape : s0);
			if (strcmp(op, "compare") == 0 && in->shape.ptype >= 0)
				in->shape.ptype = 0; /* pred */
			return;
		}
}

/* Resolves operand names to instruction indices in the computation. */
static bool resolve_operands(parser *ps, hlo_comp *c, const char ***opnames, int **oplines)
{
	name_table t;
	int32_t dup = -1;
	bool ok = true;
	if (!table_build(&t, &c->instrs[0].name, sizeof(hlo_instr), c->n_instrs, &dup)) {
		rm_error_set(ps->err, RM_INVALID, ps->file, c->instrs[dup].line, c->instrs[dup].col,
			     "instruction '%s' is defined twice in computation '%s'", c->instrs[dup].name, c->name);
		free(t.slots);
		return false;
	}
	for (int32_t i = 0; i < c->n_instrs && ok; i++) {
		hlo_instr *in = &c->instrs[i];
		in->operands = arena_alloc(&ps->m->arena, sizeof(int32_t) * (size_t)(in->n_operands ? in->n_operands : 1));
		for (int32_t k = 0; k < in->n_operands; k++) {
			int32_t j = table_find(&t, &c->instrs[0].name, sizeof(hlo_instr), opnames[i][k]);
			if (j < 0) {
				rm_error_set(ps->err, RM_INVALID, ps->file, oplines[i][2 * k], oplines[i][2 * k + 1],
					     "operand '%s' of '%s' is not an instruction of computation '%s'",
					     opnames[i][k], in->name, c->name);
				ok = false;
				break;
			}
			in->operands[k] = j;
		}
		if (ok && in->shape_inferred)
			infer_shape(ps, c, in);
	}
	free(t.slots);
	return ok;
}

static bool parse_computation(parser *ps, hlo_comp *c)
{
	c->entry = match_word(ps, "ENTRY");
	skip_ws(ps);
	c->line = ps->line;
	c->col = col_of(ps, ps->p);
	const char *s;
	size_t n = lex_name(ps, &s);
	if (n == 0)
		return expected(ps, ps->p, "a computation name");
	c->name = arena_strndup(&ps->m->arena, s, n);
	if (peek_char(ps, '(')) {
		ps->p++;
		if (!skip_balanced(ps, true) || !expect_char(ps, ')', "')' closing the parameters"))
			return false;
		skip_ws(ps);
		if (ps->end - ps->p < 2 || ps->p[0] != '-' || ps->p[1] != '>')
			return expected(ps, ps->p, "'->' and the result shape after the parameters");
		ps->p += 2;
		hlo_shape r;
		if (!parse_shape(ps, &r, 0))
			return false;
	}
	if (!expect_char(ps, '{', "'{' opening the computation"))
		return false;
	int32_t cap = 16, cnt = 0, held = 0; /* held: entries of opnames/oplines set */
	hlo_instr *ins = rm_xmalloc(sizeof(*ins) * (size_t)cap);
	const char ***opnames = rm_xmalloc(sizeof(*opnames) * (size_t)cap);
	int **oplines = rm_xmalloc(sizeof(*oplines) * (size_t)cap);
	c->root = -1;
	bool ok = true;
	while (ok && !peek_char(ps, '}')) {
		if (ps->p >= ps->end) {
			ok = expected(ps, ps->p, "'}' closing the computation before the end of the text");
			break;
		}
		if (cnt == cap) {
			cap *= 2;
			ins = rm_xrealloc(ins, sizeof(*ins) * (size_t)cap);
			opnames = rm_xrealloc(opnames, sizeof(*opnames) * (size_t)cap);
			oplines = rm_xrealloc(oplines, sizeof(*oplines) * (size_t)cap);
		}
		bool root = false;
		memset(&ins[cnt], 0, sizeof(ins[cnt]));
		opnames[cnt] = NULL;
		oplines[cnt] = NULL;
		held = cnt + 1;
		ok = parse_instr(ps, &ins[cnt], &root, &opnames[cnt], &oplines[cnt]);
		if (ok && root)
			c->root = cnt;
		if (ok)
			cnt++;
	}
	if (ok) {
		ps->p++; /* '}' */
		c->n_instrs = cnt;
		c->instrs = arena_alloc(&ps->m->arena, sizeof(hlo_instr) * (size_t)(cnt ? cnt : 1));
		memcpy(c->instrs, ins, sizeof(hlo_instr) * (size_t)cnt);
		if (c->root < 0 && cnt > 0)
			c->root = cnt - 1; /* the last instruction when none says ROOT */
		ok = cnt == 0 || resolve_operands(ps, c, opnames, oplines);
		if (ok && peek_char(ps, ',')) {
			hlo_attr *attrs;
			int32_t na;
			ok = parse_attrs(ps, &attrs, &na); /* execution_thread="..." */
		}
	}
	/* the instruction that failed (index cnt) may hold its operand names too */
	for (int32_t i = 0; i < held; i++) {
		free(opnames[i]);
		free(oplines[i]);
	}
	free(opnames);
	free(oplines);
	free(ins);
	return ok;
}

static bool parse_header(parser *ps)
{
	skip_ws(ps);
	ps->m->line = ps->line;
	ps->m->col = col_of(ps, ps->p);
	if (!match_word(ps, "HloModule"))
		return expected(ps, ps->p, "'HloModule' at the start of the module");
	const char *s;
	size_t n = lex_name(ps, &s);
	if (n == 0)
		return expected(ps, ps->p, "the module name after 'HloModule'");
	ps->m->name = arena_strndup(&ps->m->arena, s, n);
	hlo_attr *attrs;
	int32_t na;
	if (!parse_attrs(ps, &attrs, &na))
		return false;
	for (int32_t i = 0; i < na; i++) {
		if (strcmp(attrs[i].name, "is_scheduled") == 0)
			ps->m->scheduled = strcmp(attrs[i].value, "true") == 0;
		else if (strcmp(attrs[i].name, "num_partitions") == 0)
			ps->m->num_partitions = atoll(attrs[i].value);
		else if (strcmp(attrs[i].name, "replica_count") == 0)
			ps->m->replica_count = atoll(attrs[i].value);
	}
	if (ps->m->num_partitions < 1)
		ps->m->num_partitions = 1;
	if (ps->m->replica_count < 1)
		ps->m->replica_count = 1;
	return true;
}

rm_hlo_module *rm_hlo_parse(const char *text, size_t len, const char *file, rm_error *err)
{
	rm_hlo_module *m = rm_new(rm_hlo_module, 1);
	snprintf(m->file, sizeof(m->file), "%s", file ? file : "");
	m->entry = -1;
	parser ps = {.p = text, .end = text + len, .line_start = text, .line = 1, .file = file, .err = err, .m = m};
	if (!parse_header(&ps))
		goto fail;
	int32_t cap = 8;
	hlo_comp *comps = rm_xmalloc(sizeof(*comps) * (size_t)cap);
	for (;;) {
		skip_ws(&ps);
		if (ps.p >= ps.end)
			break;
		if (m->n_comps == cap) {
			cap *= 2;
			comps = rm_xrealloc(comps, sizeof(*comps) * (size_t)cap);
		}
		memset(&comps[m->n_comps], 0, sizeof(comps[0]));
		if (!parse_computation(&ps, &comps[m->n_comps])) {
			free(comps);
			goto fail;
		}
		if (comps[m->n_comps].entry) {
			if (m->entry >= 0) {
				rm_error_set(err, RM_INVALID, file, comps[m->n_comps].line, comps[m->n_comps].col,
					     "a second ENTRY computation '%s'", comps[m->n_comps].name);
				free(comps);
				goto fail;
			}
			m->entry = m->n_comps;
		}
		m->n_comps++;
	}
	m->comps = arena_alloc(&m->arena, sizeof(hlo_comp) * (size_t)(m->n_comps ? m->n_comps : 1));
	memcpy(m->comps, comps, sizeof(hlo_comp) * (size_t)m->n_comps);
	free(comps);
	if (m->n_comps > 0) {
		name_table t;
		int32_t dup = -1;
		if (!table_build(&t, &m->comps[0].name, sizeof(hlo_comp), m->n_comps, &dup)) {
			rm_error_set(err, RM_INVALID, file, m->comps[dup].line, m->comps[dup].col,
				     "computation '%s' is defined twice", m->comps[dup].name);
			free(t.slots);
			goto fail;
		}
		m->comp_hash = t.slots;
		m->comp_hash_cap = t.cap;
	}
	return m;
fail:
	rm_hlo_destroy(m);
	return NULL;
}

rm_hlo_module *rm_hlo_load(const char *path, rm_error *err)
{
	char *text;
	size_t len;
	if (!rm_read_file(path, &text, &len, err))
		return NULL;
	rm_hlo_module *m = rm_hlo_parse(text, len, path, err);
	free(text);
	return m;
}

void rm_hlo_destroy(rm_hlo_module *m)
{
	if (!m)
		return;
	free(m->comp_hash);
	arena_free(m->arena);
	free(m);
}

void rm_hlo_module_get_info(const rm_hlo_module *m, rm_hlo_module_info *info)
{
	memset(info, 0, sizeof(*info));
	info->name = m->name;
	info->scheduled = m->scheduled;
	info->computations = m->n_comps;
	for (int32_t i = 0; i < m->n_comps; i++)
		info->instructions += m->comps[i].n_instrs;
	info->num_partitions = m->num_partitions;
	info->replica_count = m->replica_count;
	info->entry = m->entry >= 0 ? m->comps[m->entry].name : NULL;
}
