/*
 * Remat policies (remora/remat.h): a parser for policies as JAX, MaxText and PyTorch users write
 * them, and the per-layer plan of saved, offloaded and recomputed values.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remora/remat.h"

static const char *const kind_names[RM_REMAT_KIND_COUNT] = {
	[RM_REMAT_EVERYTHING_SAVEABLE] = "everything_saveable",
	[RM_REMAT_NOTHING_SAVEABLE] = "nothing_saveable",
	[RM_REMAT_DOTS_SAVEABLE] = "dots_saveable",
	[RM_REMAT_DOTS_WITH_NO_BATCH_DIMS_SAVEABLE] = "dots_with_no_batch_dims_saveable",
	[RM_REMAT_SAVE_ONLY_THESE_NAMES] = "save_only_these_names",
	[RM_REMAT_SAVE_ANY_NAMES_BUT_THESE] = "save_any_names_but_these",
	[RM_REMAT_SAVE_ANYTHING_EXCEPT_THESE_NAMES] = "save_anything_except_these_names",
	[RM_REMAT_SAVE_AND_OFFLOAD_ONLY_THESE_NAMES] = "save_and_offload_only_these_names",
	[RM_REMAT_OFFLOAD_DOT_WITH_NO_BATCH_DIMS] = "offload_dot_with_no_batch_dims",
	[RM_REMAT_SAVE_FROM_BOTH_POLICIES] = "save_from_both_policies",
};

const char *rm_remat_kind_name(rm_remat_kind kind)
{
	return (unsigned)kind < RM_REMAT_KIND_COUNT ? kind_names[kind] : "unknown";
}

static const char *const fate_names[] = {"unused", "carry", "saved", "offloaded", "recomputed"};

const char *rm_value_fate_name(rm_value_fate fate)
{
	return (unsigned)fate < RM_ARRAY_SIZE(fate_names) ? fate_names[fate] : "unknown";
}

/* ---- construction ---- */

static rm_remat_policy *policy_new(rm_remat_kind kind)
{
	rm_remat_policy *p = rm_new(rm_remat_policy, 1);
	p->kind = kind;
	snprintf(p->offload_src, sizeof(p->offload_src), "device");
	snprintf(p->offload_dst, sizeof(p->offload_dst), "pinned_host");
	return p;
}

void rm_remat_policy_destroy(rm_remat_policy *p)
{
	if (!p)
		return;
	rm_remat_policy_destroy(p->first);
	rm_remat_policy_destroy(p->second);
	free(p);
}

rm_remat_policy *rm_remat_policy_copy(const rm_remat_policy *p)
{
	if (!p)
		return NULL;
	rm_remat_policy *c = rm_new(rm_remat_policy, 1);
	*c = *p;
	c->first = rm_remat_policy_copy(p->first);
	c->second = rm_remat_policy_copy(p->second);
	return c;
}

/* Adds the canonical names of a user name (qkv_proj expands to three) to a list, no duplicates. */
static bool add_name(const char **list, int *n, const char *user, rm_error *err, int column)
{
	const char *expanded[4];
	int k = rm_checkpoint_expand(user, expanded, 4);
	if (k == 0) {
		rm_error_set(err, RM_INVALID, NULL, 1, column,
			     "unknown checkpoint name \"%s\" (remora's names: dot_attention_query, "
			     "dot_attention_key, dot_attention_value, dot_attention_out, dot_mlp_gate, "
			     "dot_mlp_up, dot_mlp_out, pre_attention_norm, pre_mlp_norm, rotary_query, "
			     "rotary_key, attention_context, mlp_activation, mlp_hidden, ...; MaxText's "
			     "query_proj, key_proj, value_proj, qkv_proj, out_proj, context, mlpwi_0, "
			     "mlpwi_1, mlpwi, mlpwo)",
			     user);
		return false;
	}
	for (int i = 0; i < k; i++) {
		bool dup = false;
		for (int j = 0; j < *n; j++)
			dup |= strcmp(list[j], expanded[i]) == 0;
		if (dup)
			continue;
		if (*n >= RM_REMAT_MAX_NAMES) {
			rm_error_set(err, RM_RANGE, NULL, 1, column, "more than %d checkpoint names",
				     RM_REMAT_MAX_NAMES);
			return false;
		}
		list[(*n)++] = expanded[i];
	}
	return true;
}

static bool check_disjoint(const rm_remat_policy *p, rm_error *err, int column)
{
	for (int i = 0; i < p->n_names; i++)
		for (int j = 0; j < p->n_offload; j++)
			if (strcmp(p->names[i], p->offload[j]) == 0) {
				rm_error_set(err, RM_INVALID, NULL, 1, column,
					     "\"%s\" is both saved and offloaded: the lists of "
					     "save_and_offload_only_these_names must not overlap",
					     p->names[i]);
				return false;
			}
	return true;
}

rm_remat_policy *rm_remat_policy_make(rm_remat_kind kind, const char *const *save,
				      const char *const *offload, rm_error *err)
{
	rm_remat_policy *p = policy_new(kind);
	for (int i = 0; save && save[i]; i++)
		if (!add_name(p->names, &p->n_names, save[i], err, 0))
			goto fail;
	for (int i = 0; offload && offload[i]; i++)
		if (!add_name(p->offload, &p->n_offload, offload[i], err, 0))
			goto fail;
	if (!check_disjoint(p, err, 0))
		goto fail;
	return p;
fail:
	rm_remat_policy_destroy(p);
	return NULL;
}

/* ---- parser: a small subset of Python call syntax ---- */

typedef enum { V_STRING, V_LIST, V_CALL } value_kind;

typedef struct value value;
struct value {
	value_kind kind;
	int column;      /* 1-based column where the value starts */
	int name_column; /* V_CALL: 1-based column of the last identifier (after "jax." or "maxtext:") */
	char text[128];  /* V_STRING: the string; V_CALL: the callee's last identifier */
	char prefix[16]; /* V_CALL: "maxtext" / "torch" for NAME:policy forms */
	bool called;     /* V_CALL: written with parentheses */
	char keyword[48]; /* argument keyword, "" when positional */
	value *items;    /* V_LIST items / V_CALL arguments */
	int n_items;
};

typedef struct parser {
	const char *s;
	size_t pos;
	int depth;
	rm_error *err;
} parser;

static void value_free(value *v)
{
	for (int i = 0; i < v->n_items; i++)
		value_free(&v->items[i]);
	free(v->items);
	v->items = NULL;
	v->n_items = 0;
}

static void skip_ws(parser *ps)
{
	while (isspace((unsigned char)ps->s[ps->pos]))
		ps->pos++;
}

static int col(const parser *ps)
{
	return (int)ps->pos + 1;
}

static bool fail(parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool fail(parser *ps, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	rm_error_set(ps->err, RM_PARSE, NULL, 1, col(ps), "policy: %s", msg);
	return false;
}

static bool is_ident_start(char c)
{
	return isalpha((unsigned char)c) || c == '_';
}

static bool parse_value(parser *ps, value *out);

static bool parse_items(parser *ps, value *out, char close)
{
	skip_ws(ps);
	while (ps->s[ps->pos] != close) {
		if (out->n_items >= 64)
			return fail(ps, "%s", "too many items");
		out->items = rm_xrealloc(out->items, (size_t)(out->n_items + 1) * sizeof(value));
		value *item = &out->items[out->n_items];
		memset(item, 0, sizeof(*item));
		out->n_items++;
		skip_ws(ps);
		if (ps->s[ps->pos] == '*') /* *names unpacking */
			ps->pos++;
		/* keyword=value */
		size_t save = ps->pos;
		if (is_ident_start(ps->s[ps->pos])) {
			size_t start = ps->pos;
			while (isalnum((unsigned char)ps->s[ps->pos]) || ps->s[ps->pos] == '_')
				ps->pos++;
			size_t len = ps->pos - start;
			skip_ws(ps);
			if (ps->s[ps->pos] == '=' && len < sizeof(item->keyword)) {
				memcpy(item->keyword, ps->s + start, len);
				item->keyword[len] = '\0';
				ps->pos++;
			} else {
				ps->pos = save;
			}
		}
		if (!parse_value(ps, item))
			return false;
		skip_ws(ps);
		if (ps->s[ps->pos] == ',') {
			ps->pos++;
			skip_ws(ps);
		} else if (ps->s[ps->pos] != close) {
			char want[2] = {close, '\0'};
			return fail(ps, "expected ',' or '%s'", want);
		}
	}
	ps->pos++;
	return true;
}

static bool parse_value(parser *ps, value *out)
{
	if (++ps->depth > 16)
		return fail(ps, "%s", "nested too deeply");
	skip_ws(ps);
	out->column = col(ps);
	char c = ps->s[ps->pos];
	bool ok;
	if (c == '"' || c == '\'') {
		out->kind = V_STRING;
		ps->pos++;
		size_t start = ps->pos;
		while (ps->s[ps->pos] && ps->s[ps->pos] != c)
			ps->pos++;
		if (!ps->s[ps->pos]) {
			ps->pos = start - 1;
			ok = fail(ps, "%s", "unterminated string");
		} else if (ps->pos - start >= sizeof(out->text)) {
			ok = fail(ps, "%s", "string too long");
		} else {
			memcpy(out->text, ps->s + start, ps->pos - start);
			out->text[ps->pos - start] = '\0';
			ps->pos++;
			ok = true;
		}
	} else if (c == '[' || c == '(') {
		out->kind = V_LIST;
		ps->pos++;
		ok = parse_items(ps, out, c == '[' ? ']' : ')');
	} else if (is_ident_start(c)) {
		out->kind = V_CALL;
		/* dotted.qualified.name or prefix:name; keep the last component */
		for (;;) {
			size_t start = ps->pos;
			out->name_column = col(ps);
			while (isalnum((unsigned char)ps->s[ps->pos]) || ps->s[ps->pos] == '_')
				ps->pos++;
			size_t len = ps->pos - start;
			if (len >= sizeof(out->text))
				return fail(ps, "%s", "name too long");
			memcpy(out->text, ps->s + start, len);
			out->text[len] = '\0';
			if (ps->s[ps->pos] == ':' && !out->prefix[0] && len < sizeof(out->prefix)) {
				memcpy(out->prefix, out->text, len + 1);
				ps->pos++;
			} else if (ps->s[ps->pos] == '.') {
				ps->pos++;
			} else {
				break;
			}
			if (!is_ident_start(ps->s[ps->pos]))
				return fail(ps, "%s", "expected a name");
		}
		skip_ws(ps);
		ok = true;
		if (ps->s[ps->pos] == '(') {
			ps->pos++;
			out->called = true;
			ok = parse_items(ps, out, ')');
		}
	} else if (c == '\0') {
		ok = fail(ps, "%s", "expected a policy, a string or a list, found the end");
	} else {
		char ch[2] = {c, '\0'};
		ok = fail(ps, "unexpected '%s'", ch);
	}
	ps->depth--;
	return ok;
}

/* ---- interpretation ---- */

static rm_remat_policy *interpret(const value *v, rm_error *err);

static bool collect_names(const value *v, const char **list, int *n, rm_error *err)
{
	if (v->kind == V_STRING)
		return add_name(list, n, v->text, err, v->column);
	if (v->kind == V_LIST) {
		for (int i = 0; i < v->n_items; i++)
			if (!collect_names(&v->items[i], list, n, err))
				return false;
		return true;
	}
	rm_error_set(err, RM_INVALID, NULL, 1, v->column,
		     "policy: expected checkpoint names as strings, found '%s'", v->text);
	return false;
}

static bool set_place(char *dst, size_t size, const value *v, const char *want, rm_error *err)
{
	if (v->kind != V_STRING || strcmp(v->text, want) != 0) {
		rm_error_set(err, RM_UNSUPPORTED, NULL, 1, v->column,
			     "policy: only offload_src=\"device\" and offload_dst=\"pinned_host\" are modelled "
			     "(got \"%s\")",
			     v->kind == V_STRING ? v->text : "?");
		return false;
	}
	snprintf(dst, size, "%s", v->text);
	return true;
}

static rm_remat_policy *maxtext_policy(const char *name, int column, rm_error *err)
{
	static const struct {
		const char *name;
		const char *save[9];
		const char *offload[9];
		int kind; /* -1: names; else a kind without names */
	} table[] = {
		/* docs/reference/remat-policies.md, MaxText section */
		{"minimal", {"query_proj", "key_proj", "value_proj", "out_proj", "mlpwi_0", "mlpwi_1", "mlpwo"}, {0}, -1},
		{"minimal_with_context",
		 {"query_proj", "key_proj", "value_proj", "out_proj", "mlpwi_0", "mlpwi_1", "mlpwo", "context"}, {0}, -1},
		{"minimal_flash",
		 {"query_proj", "key_proj", "value_proj", "out_proj", "mlpwi_0", "mlpwi_1", "mlpwo", "context"}, {0}, -1},
		{"save_dot_with_context_except_mlp", {"qkv_proj", "context", "out_proj"}, {0}, -1},
		{"save_dot_except_mlpwi", {"qkv_proj", "out_proj", "mlpwo"}, {0}, -1},
		{"save_dot_except_mlp", {"qkv_proj", "out_proj"}, {0}, -1},
		{"save_qkv_proj", {"qkv_proj"}, {0}, -1},
		{"save_out_proj", {"out_proj"}, {0}, -1},
		{"qkv_proj_offloaded", {0}, {"qkv_proj"}, -1},
		{"minimal_offloaded", {0}, {"query_proj", "key_proj", "value_proj", "out_proj", "mlpwi_0", "mlpwi_1", "mlpwo"}, -1},
		{"full", {0}, {0}, RM_REMAT_NOTHING_SAVEABLE},
		{"none", {0}, {0}, RM_REMAT_EVERYTHING_SAVEABLE},
	};
	for (size_t i = 0; i < RM_ARRAY_SIZE(table); i++) {
		if (strcmp(name, table[i].name) != 0)
			continue;
		if (table[i].kind >= 0)
			return policy_new((rm_remat_kind)table[i].kind);
		bool offload = table[i].offload[0] != NULL;
		rm_remat_policy *p = rm_remat_policy_make(
			offload ? RM_REMAT_SAVE_AND_OFFLOAD_ONLY_THESE_NAMES : RM_REMAT_SAVE_ONLY_THESE_NAMES,
			table[i].save, table[i].offload, err);
		return p;
	}
	rm_error_set(err, RM_INVALID, NULL, 1, column,
		     "unknown MaxText remat_policy '%s' (minimal, minimal_with_context, "
		     "save_dot_with_context_except_mlp, save_dot_except_mlpwi, save_dot_except_mlp, "
		     "save_qkv_proj, save_out_proj, qkv_proj_offloaded, minimal_offloaded, full, none; "
		     "'custom' is written as save_and_offload_only_these_names)",
		     name);
	return NULL;
}

static rm_remat_policy *torch_policy(const char *name, int column, rm_error *err)
{
	if (strcmp(name, "full") == 0)
		return policy_new(RM_REMAT_NOTHING_SAVEABLE);
	if (strcmp(name, "selective") == 0) {
		/* op-level SAC: matmuls and attention saved, cheap ops recomputed */
		rm_remat_policy *p = policy_new(RM_REMAT_SAVE_FROM_BOTH_POLICIES);
		p->first = policy_new(RM_REMAT_DOTS_SAVEABLE);
		static const char *const attn[] = {"attention_context", NULL};
		p->second = rm_remat_policy_make(RM_REMAT_SAVE_ONLY_THESE_NAMES, attn, NULL, err);
		return p;
	}
	if (strcmp(name, "none") == 0)
		return policy_new(RM_REMAT_EVERYTHING_SAVEABLE);
	rm_error_set(err, RM_INVALID, NULL, 1, column,
		     "unknown PyTorch activation checkpointing mode '%s' (full, selective, none)", name);
	return NULL;
}

/*
 * Megatron-LM's recompute granularities (--recompute-granularity): full recomputes each layer
 * from its input (with remat.recompute_num_layers and remat.recompute_method); selective
 * recomputes the core attention only, QK^T, softmax, its dropout and the attention over V, from
 * the saved q, k, v (Korthikanti et al. 2022, section 5; with a fused kernel, the kernel's
 * output).
 */
static rm_remat_policy *megatron_policy(const char *name, int column, rm_error *err)
{
	if (strcmp(name, "full") == 0)
		return policy_new(RM_REMAT_NOTHING_SAVEABLE);
	if (strcmp(name, "selective") == 0) {
		static const char *const core[] = {"attention_scores", "attention_probs", "attention_probs_dropout",
						   "attention_probs_dropout_mask", "attention_context", "attention_lse",
						   NULL};
		rm_remat_policy *p = rm_remat_policy_make(RM_REMAT_SAVE_ANYTHING_EXCEPT_THESE_NAMES, core, NULL, err);
		if (p)
			p->quiet = true;
		return p;
	}
	rm_error_set(err, RM_INVALID, NULL, 1, column, "unknown Megatron-LM recompute granularity '%s' (full, selective)",
		     name);
	return NULL;
}

static const value *arg_named(const value *v, const char *keyword, int position)
{
	for (int i = 0; i < v->n_items; i++)
		if (strcmp(v->items[i].keyword, keyword) == 0)
			return &v->items[i];
	int pos = 0;
	for (int i = 0; i < v->n_items; i++) {
		if (v->items[i].keyword[0])
			continue;
		if (pos++ == position)
			return &v->items[i];
	}
	return NULL;
}

static rm_remat_policy *interpret(const value *v, rm_error *err)
{
	if (v->kind != V_CALL) {
		rm_error_set(err, RM_PARSE, NULL, 1, v->column, "policy: expected a policy name");
		return NULL;
	}
	if (strcmp(v->prefix, "maxtext") == 0)
		return maxtext_policy(v->text, v->name_column, err);
	if (strcmp(v->prefix, "torch") == 0 || strcmp(v->prefix, "pytorch") == 0)
		return torch_policy(v->text, v->name_column, err);
	if (strcmp(v->prefix, "megatron") == 0)
		return megatron_policy(v->text, v->name_column, err);
	if (v->prefix[0]) {
		rm_error_set(err, RM_PARSE, NULL, 1, v->column,
			     "policy: unknown prefix '%s:' (maxtext:, torch: or megatron:)", v->prefix);
		return NULL;
	}
	/* JAX's aliases */
	const char *name = v->text;
	if (strcmp(name, "checkpoint_dots") == 0)
		name = "dots_saveable";
	else if (strcmp(name, "checkpoint_dots_with_no_batch_dims") == 0)
		name = "dots_with_no_batch_dims_saveable";
	int kind = -1;
	for (int k = 0; k < RM_REMAT_KIND_COUNT; k++)
		if (strcmp(name, kind_names[k]) == 0)
			kind = k;
	if (kind < 0) {
		if (!v->called) {
			/* a bare MaxText name */
			rm_error dummy;
			rm_remat_policy *p = maxtext_policy(name, v->column, &dummy);
			if (p)
				return p;
		}
		rm_error_set(err, RM_INVALID, NULL, 1, v->name_column,
			     "unknown remat policy '%s' (JAX: everything_saveable, nothing_saveable, "
			     "dots_saveable, dots_with_no_batch_dims_saveable, save_only_these_names, "
			     "save_any_names_but_these, save_anything_except_these_names, "
			     "save_and_offload_only_these_names, offload_dot_with_no_batch_dims, "
			     "save_from_both_policies; or maxtext:NAME, torch:full, torch:selective)",
			     v->text);
		return NULL;
	}
	rm_remat_policy *p = policy_new((rm_remat_kind)kind);
	switch (p->kind) {
	case RM_REMAT_SAVE_ONLY_THESE_NAMES:
	case RM_REMAT_SAVE_ANY_NAMES_BUT_THESE:
	case RM_REMAT_SAVE_ANYTHING_EXCEPT_THESE_NAMES:
		for (int i = 0; i < v->n_items; i++) {
			if (v->items[i].keyword[0]) {
				rm_error_set(err, RM_INVALID, NULL, 1, v->items[i].column,
					     "policy: %s takes names only, not %s=", kind_names[kind],
					     v->items[i].keyword);
				goto fail;
			}
			if (!collect_names(&v->items[i], p->names, &p->n_names, err))
				goto fail;
		}
		break;
	case RM_REMAT_SAVE_AND_OFFLOAD_ONLY_THESE_NAMES: {
		const value *save = arg_named(v, "names_which_can_be_saved", 0);
		const value *off = arg_named(v, "names_which_can_be_offloaded", 1);
		const value *src = arg_named(v, "offload_src", 2);
		const value *dst = arg_named(v, "offload_dst", 3);
		if (!save || !off) {
			rm_error_set(err, RM_INVALID, NULL, 1, v->column,
				     "policy: save_and_offload_only_these_names needs names_which_can_be_saved "
				     "and names_which_can_be_offloaded");
			goto fail;
		}
		if (!collect_names(save, p->names, &p->n_names, err) ||
		    !collect_names(off, p->offload, &p->n_offload, err))
			goto fail;
		if (src && !set_place(p->offload_src, sizeof(p->offload_src), src, "device", err))
			goto fail;
		if (dst && !set_place(p->offload_dst, sizeof(p->offload_dst), dst, "pinned_host", err))
			goto fail;
		if (!check_disjoint(p, err, v->column))
			goto fail;
		break;
	}
	case RM_REMAT_OFFLOAD_DOT_WITH_NO_BATCH_DIMS: {
		const value *src = arg_named(v, "offload_src", 0);
		const value *dst = arg_named(v, "offload_dst", 1);
		if (src && !set_place(p->offload_src, sizeof(p->offload_src), src, "device", err))
			goto fail;
		if (dst && !set_place(p->offload_dst, sizeof(p->offload_dst), dst, "pinned_host", err))
			goto fail;
		break;
	}
	case RM_REMAT_SAVE_FROM_BOTH_POLICIES: {
		if (v->n_items != 2) {
			rm_error_set(err, RM_INVALID, NULL, 1, v->column,
				     "policy: save_from_both_policies takes two policies, got %d", v->n_items);
			goto fail;
		}
		p->first = interpret(&v->items[0], err);
		if (!p->first)
			goto fail;
		p->second = interpret(&v->items[1], err);
		if (!p->second)
			goto fail;
		break;
	}
	default:
		if (v->n_items > 0) {
			rm_error_set(err, RM_INVALID, NULL, 1, v->items[0].column,
				     "policy: %s takes no arguments", kind_names[kind]);
			goto fail;
		}
		break;
	}
	return p;
fail:
	rm_remat_policy_destroy(p);
	return NULL;
}

rm_remat_policy *rm_remat_policy_parse(const char *expr, rm_error *err)
{
	parser ps = {.s = expr ? expr : "", .err = err};
	value root;
	memset(&root, 0, sizeof(root));
	rm_remat_policy *p = NULL;
	if (!parse_value(&ps, &root))
		goto out;
	skip_ws(&ps);
	if (ps.s[ps.pos] != '\0') {
		fail(&ps, "%s", "unexpected text after the policy");
		goto out;
	}
	p = interpret(&root, err);
out:
	value_free(&root);
	return p;
}

static size_t append(char *buf, size_t size, size_t used, const char *s)
{
	if (used < size)
		snprintf(buf + used, size - used, "%s", s);
	return used + strlen(s);
}

static size_t format_names(char *buf, size_t size, size_t used, const char *const *names, int n,
			   bool as_list)
{
	if (as_list)
		used = append(buf, size, used, "[");
	for (int i = 0; i < n; i++) {
		used = append(buf, size, used, i ? ", \"" : "\"");
		used = append(buf, size, used, names[i]);
		used = append(buf, size, used, "\"");
	}
	if (as_list)
		used = append(buf, size, used, "]");
	return used;
}

static size_t format_policy(const rm_remat_policy *p, char *buf, size_t size, size_t used)
{
	used = append(buf, size, used, "jax.checkpoint_policies.");
	used = append(buf, size, used, kind_names[p->kind]);
	switch (p->kind) {
	case RM_REMAT_SAVE_ONLY_THESE_NAMES:
	case RM_REMAT_SAVE_ANY_NAMES_BUT_THESE:
	case RM_REMAT_SAVE_ANYTHING_EXCEPT_THESE_NAMES:
		used = append(buf, size, used, "(");
		used = format_names(buf, size, used, p->names, p->n_names, false);
		used = append(buf, size, used, ")");
		break;
	case RM_REMAT_SAVE_AND_OFFLOAD_ONLY_THESE_NAMES:
		used = append(buf, size, used, "(names_which_can_be_saved=");
		used = format_names(buf, size, used, p->names, p->n_names, true);
		used = append(buf, size, used, ", names_which_can_be_offloaded=");
		used = format_names(buf, size, used, p->offload, p->n_offload, true);
		used = append(buf, size, used, ", offload_src=\"device\", offload_dst=\"pinned_host\")");
		break;
	case RM_REMAT_OFFLOAD_DOT_WITH_NO_BATCH_DIMS:
		used = append(buf, size, used, "(offload_src=\"device\", offload_dst=\"pinned_host\")");
		break;
	case RM_REMAT_SAVE_FROM_BOTH_POLICIES:
		used = append(buf, size, used, "(");
		used = format_policy(p->first, buf, size, used);
		used = append(buf, size, used, ", ");
		used = format_policy(p->second, buf, size, used);
		used = append(buf, size, used, ")");
		break;
	default:
		break;
	}
	return used;
}

const char *rm_remat_policy_format(const rm_remat_policy *p, char *buf, size_t size)
{
	if (size == 0)
		return buf;
	buf[0] = '\0';
	format_policy(p, buf, size, 0);
	return buf;
}

/* ---- the plan ---- */

typedef enum { DECIDE_RECOMPUTE, DECIDE_SAVE, DECIDE_OFFLOAD } decision;

static bool in_list(const char *const *list, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcmp(list[i], name) == 0)
			return true;
	return false;
}

/* The policy's answer for value v; the lse follows attention_context (the kernel emits both). */
static decision decide(const rm_remat_policy *p, const rm_graph *g, int v)
{
	const rm_value *val = &g->values[v];
	const char *name = strcmp(val->name, "attention_lse") == 0 ? "attention_context" : val->name;
	const rm_op *prod = val->producer >= 0 ? &g->ops[val->producer] : NULL;
	bool is_dot = prod && prod->kind == RM_OP_GEMM && prod->outputs[0] == v;
	bool dot_no_batch = is_dot && !prod->gemm.has_batch_dims;
	switch (p->kind) {
	case RM_REMAT_EVERYTHING_SAVEABLE:
		return DECIDE_SAVE;
	case RM_REMAT_NOTHING_SAVEABLE:
		return DECIDE_RECOMPUTE;
	case RM_REMAT_DOTS_SAVEABLE:
		return is_dot ? DECIDE_SAVE : DECIDE_RECOMPUTE;
	case RM_REMAT_DOTS_WITH_NO_BATCH_DIMS_SAVEABLE:
		return dot_no_batch ? DECIDE_SAVE : DECIDE_RECOMPUTE;
	case RM_REMAT_SAVE_ONLY_THESE_NAMES:
		return in_list(p->names, p->n_names, name) ? DECIDE_SAVE : DECIDE_RECOMPUTE;
	case RM_REMAT_SAVE_ANY_NAMES_BUT_THESE:
	case RM_REMAT_SAVE_ANYTHING_EXCEPT_THESE_NAMES:
		return in_list(p->names, p->n_names, name) ? DECIDE_RECOMPUTE : DECIDE_SAVE;
	case RM_REMAT_SAVE_AND_OFFLOAD_ONLY_THESE_NAMES:
		if (in_list(p->names, p->n_names, name))
			return DECIDE_SAVE;
		return in_list(p->offload, p->n_offload, name) ? DECIDE_OFFLOAD : DECIDE_RECOMPUTE;
	case RM_REMAT_OFFLOAD_DOT_WITH_NO_BATCH_DIMS:
		return dot_no_batch ? DECIDE_OFFLOAD : DECIDE_RECOMPUTE;
	case RM_REMAT_SAVE_FROM_BOTH_POLICIES: {
		decision a = decide(p->first, g, v), b = decide(p->second, g, v);
		if (a == DECIDE_SAVE || b == DECIDE_SAVE)
			return DECIDE_SAVE;
		if (a == DECIDE_OFFLOAD || b == DECIDE_OFFLOAD)
			return DECIDE_OFFLOAD;
		return DECIDE_RECOMPUTE;
	}
	default:
		return DECIDE_RECOMPUTE;
	}
}

/* Whether the warning for (name, graph) is new to this process: a search builds a plan for
 * every candidate, and one line per missing name is enough. Past 256 pairs every one is new. */
static bool first_missing_warning(const char *name, const char *graph)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static char seen[256][96];
	static int n_seen;
	char key[96];
	snprintf(key, sizeof(key), "%s\x1f%s", graph, name);
	bool fresh = true;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < n_seen && fresh; i++)
		fresh = strcmp(seen[i], key) != 0;
	if (fresh && n_seen < 256)
		snprintf(seen[n_seen++], sizeof(seen[0]), "%s", key);
	pthread_mutex_unlock(&mu);
	return fresh;
}

static void warn_missing_names(const rm_remat_policy *p, const rm_graph *g)
{
	if (!p || p->quiet)
		return;
	const char *const *lists[2] = {p->names, p->offload};
	int counts[2] = {p->n_names, p->n_offload};
	for (int l = 0; l < 2; l++)
		for (int i = 0; i < counts[l]; i++)
			if (rm_graph_find_value(g, lists[l][i]) < 0 &&
			    first_missing_warning(lists[l][i], g->name[0] ? g->name : "layer"))
				rm_log_warn("remat policy names \"%s\", which this model's %s graph does not have "
					    "(unfused attention, dropout, the MLP type or the layer kind decide which "
					    "values exist); ignored there",
					    lists[l][i], g->name[0] ? g->name : "layer");
	warn_missing_names(p->first, g);
	warn_missing_names(p->second, g);
}

rm_status rm_remat_plan_build(const rm_graph *g, const rm_remat_policy *policy, rm_remat_plan *plan,
			      rm_error *err)
{
	return rm_remat_plan_build_compiled(g, policy, false, plan, err);
}

rm_status rm_remat_plan_build_compiled(const rm_graph *g, const rm_remat_policy *policy, bool partitioner,
				       rm_remat_plan *plan, rm_error *err)
{
	memset(plan, 0, sizeof(*plan));
	if (!policy)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0, "no remat policy");
	warn_missing_names(policy, g);
	plan->n_values = g->n_values;
	plan->n_ops = g->n_ops;
	plan->fate = rm_new(rm_value_fate, (size_t)g->n_values);
	plan->recompute = rm_new(bool, (size_t)g->n_ops);
	bool *needed = rm_new(bool, (size_t)g->n_values);
	int *stack = rm_new(int, (size_t)g->n_values + 1);
	int top = 0;
	for (int v = 0; v < g->n_values; v++)
		if (rm_graph_value_is_residual(g, v)) {
			needed[v] = true;
			stack[top++] = v;
		}
	/* Worklist: every needed value is the carry, saved, offloaded, or recomputed from its
	 * producer's inputs, which then become needed in turn. */
	while (top > 0) {
		int v = stack[--top];
		if (plan->fate[v] != RM_FATE_UNUSED)
			continue;
		const rm_value *val = &g->values[v];
		if (v == g->input || val->producer < 0) {
			plan->fate[v] = RM_FATE_CARRY;
			continue;
		}
		decision d = decide(policy, g, v);
		const rm_op *pop = &g->ops[val->producer];
		if (partitioner && d == DECIDE_SAVE && policy->kind == RM_REMAT_EVERYTHING_SAVEABLE &&
		    pop->kind == RM_OP_ELEMENTWISE && pop->mclass == RM_MB_POINTWISE)
			d = DECIDE_RECOMPUTE; /* fused into the backward kernels that read it */
		if (pop->kind == RM_OP_COLLECTIVE && pop->coll == RM_COLL_ALL_GATHER)
			d = DECIDE_RECOMPUTE; /* sequence parallelism keeps the shard and gathers again
					       * in the backward (Korthikanti et al. 2022, 4.2.2) */
		if (d == DECIDE_SAVE) {
			plan->fate[v] = RM_FATE_SAVED;
			continue;
		}
		if (d == DECIDE_OFFLOAD) {
			plan->fate[v] = RM_FATE_OFFLOADED;
			continue;
		}
		plan->fate[v] = RM_FATE_RECOMPUTED;
		const rm_op *prod = &g->ops[val->producer];
		plan->recompute[val->producer] = true;
		for (int i = 0; i < prod->n_inputs; i++) {
			int in = prod->inputs[i];
			if (!needed[in]) {
				needed[in] = true;
				stack[top++] = in;
			}
		}
	}
	for (int v = 0; v < g->n_values; v++) {
		switch (plan->fate[v]) {
		case RM_FATE_CARRY:
			plan->carry_bytes += g->values[v].bytes;
			break;
		case RM_FATE_SAVED:
			plan->saved_bytes += g->values[v].bytes;
			break;
		case RM_FATE_OFFLOADED:
			plan->offloaded_bytes += g->values[v].bytes;
			break;
		default:
			break;
		}
	}
	for (int o = 0; o < g->n_fwd_ops; o++)
		if (plan->recompute[o]) {
			plan->n_recompute_ops++;
			plan->recompute_flops += g->ops[o].flops;
		}
	free(needed);
	free(stack);
	return RM_OK;
}

void rm_remat_plan_finish(rm_remat_plan *plan)
{
	if (!plan)
		return;
	free(plan->fate);
	free(plan->recompute);
	memset(plan, 0, sizeof(*plan));
}
