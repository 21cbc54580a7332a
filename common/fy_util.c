/* libfyaml helpers (common/fy_util.h). */
#include "common/fy_util.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rm__fy_node_position(struct fy_node *n, int *line, int *col)
{
	*line = *col = 0;
	while (n && !fy_node_is_scalar(n)) {
		if (fy_node_is_mapping(n)) {
			struct fy_node_pair *p = fy_node_mapping_get_by_index(n, 0);
			n = p ? fy_node_pair_key(p) : NULL;
		} else if (fy_node_is_sequence(n)) {
			n = fy_node_sequence_get_by_index(n, 0);
		} else {
			n = NULL;
		}
	}
	struct fy_token *t = n ? fy_node_get_scalar_token(n) : NULL;
	const struct fy_mark *m = t ? fy_token_start_mark(t) : NULL;
	if (!m)
		return;
	*line = m->line + 1;
	*col = m->column + 1;
	enum fy_node_style st = fy_node_get_style(n);
	if ((st == FYNS_DOUBLE_QUOTED || st == FYNS_SINGLE_QUOTED) && *col > 1)
		(*col)--;
}

int rm__fy_directive_line(const char *text, size_t len)
{
	size_t i = 0;
	if (len >= 3 && (unsigned char)text[0] == 0xef && (unsigned char)text[1] == 0xbb &&
	    (unsigned char)text[2] == 0xbf)
		i = 3;
	int line = 1;
	bool at_start = true;
	for (; i < len; i++) {
		char c = text[i];
		if (at_start && c == '%')
			return line;
		at_start = c == '\n' || c == '\r';
		/* "\r\n" is one line break */
		if (c == '\n' || (c == '\r' && (i + 1 >= len || text[i + 1] != '\n')))
			line++;
	}
	return 0;
}

bool rm__fy_directives_are_ascii(const char *text, size_t len, int *line, int *col)
{
	int ln = 1;
	for (size_t i = 0; i < len; i++) {
		/* a line starts after \n, after \r not followed by \n, and at the start of the text */
		bool after_break = i > 0 && (text[i - 1] == '\n' || (text[i - 1] == '\r' && text[i] != '\n'));
		if (after_break)
			ln++;
		/* YAML 1.1 also breaks lines at NEL, LS and PS (U+0085, U+2028, U+2029) */
		bool after_unicode_break =
			(i >= 2 && !memcmp(text + i - 2, "\xc2\x85", 2)) ||
			(i >= 3 && (!memcmp(text + i - 3, "\xe2\x80\xa8", 3) || !memcmp(text + i - 3, "\xe2\x80\xa9", 3)));
		if ((i > 0 && !after_break && !after_unicode_break) || text[i] != '%')
			continue;
		for (size_t j = i + 1; j < len && text[j] != '\n' && text[j] != '\r'; j++) {
			unsigned char c = (unsigned char)text[j];
			if ((c < 0x20 && c != '\t') || c > 0x7e) {
				*line = ln;
				*col = (int)(j - i) + 1;
				return false;
			}
		}
	}
	return true;
}

/* Length of the well-formed UTF-8 sequence at s (RFC 3629, table 3-7 of Unicode), 0 if none. */
static size_t utf8_sequence(const unsigned char *s, size_t left)
{
	unsigned char c = s[0];
	if (c < 0x80)
		return 1;
	size_t n;
	unsigned char lo = 0x80, hi = 0xbf;
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		if (c == 0xe0)
			lo = 0xa0;
		else if (c == 0xed)
			hi = 0x9f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;
	} else {
		return 0;
	}
	if (left < n || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

bool rm__fy_find_bad_utf8(const char *text, size_t len, int *line, int *column)
{
	const unsigned char *s = (const unsigned char *)text;
	int ln = 1, col = 1;
	for (size_t i = 0; i < len;) {
		size_t n = utf8_sequence(s + i, len - i);
		if (n == 0) {
			*line = ln;
			*column = col;
			return true;
		}
		if (s[i] == '\n') {
			ln++;
			col = 1;
		} else {
			col++;
		}
		i += n;
	}
	*line = *column = 0;
	return false;
}

bool rm__fy_find_control(const char *text, size_t len, int *line, int *column, unsigned *byte)
{
	int ln = 1, col = 1;
	*line = *column = 0;
	*byte = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)text[i];
		if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) {
			*line = ln;
			*column = col;
			*byte = c;
			return true;
		}
		if (c == '\n') {
			ln++;
			col = 1;
		} else if ((c & 0xc0) != 0x80) {
			col++; /* a character, not a UTF-8 continuation byte */
		}
	}
	return false;
}

bool rm__fy_find_tab(const char *text, size_t len, int *line, int *column)
{
	const char *t = memchr(text, '\t', len);
	*line = *column = 0;
	if (!t)
		return false;
	int ln = 1, col = 1;
	for (const char *p = text; p < t; p++) {
		if (*p == '\n') {
			ln++;
			col = 1;
		} else if (((unsigned char)*p & 0xc0) != 0x80) {
			col++;
		}
	}
	*line = ln;
	*column = col;
	return true;
}

/* ---- locating a node by path in the event stream ---- */

#define PATH_MAX_COMPONENTS 32
#define PATH_MAX_DEPTH 256

typedef struct path_component {
	char text[256];
	size_t len;
} path_component;

/* Splits "/a/1/\"b c\"" into components; false when the path is too deep or too long. */
static bool split_path(const char *path, path_component *comps, int *n)
{
	*n = 0;
	const char *p = path;
	while (*p) {
		if (*p == '/') {
			p++;
			continue;
		}
		if (*n == PATH_MAX_COMPONENTS)
			return false;
		path_component *c = &comps[(*n)++];
		c->len = 0;
		bool quoted = *p == '"';
		if (quoted)
			p++;
		while (*p && (quoted ? *p != '"' : *p != '/')) {
			if (c->len + 1 >= sizeof(c->text))
				return false;
			c->text[c->len++] = *p++;
		}
		if (quoted && *p == '"')
			p++;
		c->text[c->len] = '\0';
	}
	return true;
}

typedef struct path_frame {
	bool is_map;
	bool want_key;    /* mapping: the next node is a key */
	bool key_matches; /* mapping: the current key is the path's next component */
	bool on_path;     /* the container is the node at path[0..level) */
	int level;
	long index; /* sequence: the next item's index */
} path_frame;

/*
 * Where the node of event e starts. An empty scalar has no mark of its own: then its anchor or
 * tag (&a, !!str), else the end of what came before it (prev, the key it is the value of).
 */
static void event_position(struct fy_event *e, const struct fy_mark *prev, int *line, int *col)
{
	const struct fy_mark *m = fy_event_start_mark(e);
	bool after_indicator = false; /* the mark is one past a quote or an '&' */
	if (e->type == FYET_SCALAR) {
		enum fy_scalar_style st = fy_token_scalar_style(e->scalar.value);
		after_indicator = m && (st == FYSS_SINGLE_QUOTED || st == FYSS_DOUBLE_QUOTED);
		if (!m && e->scalar.anchor && (m = fy_token_start_mark(e->scalar.anchor)) != NULL)
			after_indicator = true;
		if (!m && e->scalar.tag)
			m = fy_token_start_mark(e->scalar.tag);
		if (!m)
			m = prev;
	}
	*line = m ? m->line + 1 : 0;
	*col = m ? m->column + 1 : 0;
	if (after_indicator && *col > 1)
		(*col)--;
}

static bool index_matches(const path_component *c, long index)
{
	if (c->len == 0 || c->len > 18)
		return false;
	long v = 0;
	for (size_t i = 0; i < c->len; i++) {
		if (c->text[i] < '0' || c->text[i] > '9')
			return false;
		v = v * 10 + (c->text[i] - '0');
	}
	return v == index;
}

void rm__fy_node_start(const char *text, size_t len, bool json, struct fy_node *n, int *line, int *column)
{
	*line = *column = 0;
	if (n && fy_node_is_scalar(n)) {
		rm__fy_node_position(n, line, column);
		if (*line > 0)
			return;
	}
	if (text && n) {
		char *path = fy_node_get_path(n);
		bool found = path && rm__fy_path_position(text, len, json, path, false, line, column);
		free(path);
		if (found)
			return;
	}
	rm__fy_node_position(n, line, column);
}

bool rm__fy_path_position(const char *text, size_t len, bool json, const char *path, bool key, int *line,
			  int *column)
{
	*line = *column = 0;
	path_component comps[PATH_MAX_COMPONENTS];
	int n;
	if (!split_path(path ? path : "", comps, &n) || (key && n == 0) || rm__fy_directive_line(text, len))
		return false;
	struct fy_parse_cfg cfg = {.flags = FYPCF_QUIET | (json ? FYPCF_JSON_FORCE : FYPCF_DEFAULT_VERSION_AUTO)};
	struct fy_parser *fyp = fy_parser_create(&cfg);
	if (!fyp)
		return false;
	if (fy_parser_set_string(fyp, text, len) != 0) {
		fy_parser_destroy(fyp);
		return false;
	}
	path_frame *stack = calloc(PATH_MAX_DEPTH, sizeof(*stack));
	int depth = 0;
	bool found = false, done = false;
	struct fy_mark prev = {0}; /* where the last event with a mark ended */
	bool have_prev = false;
	struct fy_event *e;
	while (!done && stack && (e = fy_parser_parse(fyp)) != NULL) {
		enum fy_event_type t = e->type;
		bool node = t == FYET_SCALAR || t == FYET_ALIAS || t == FYET_MAPPING_START || t == FYET_SEQUENCE_START;
		if (node) {
			path_frame *parent = depth > 0 && depth <= PATH_MAX_DEPTH ? &stack[depth - 1] : NULL;
			bool on_path = false;
			int level = 0;
			if (depth == 0) {
				on_path = true;
			} else if (parent && parent->is_map && parent->want_key) {
				parent->want_key = false;
				parent->key_matches = false;
				if (parent->on_path && parent->level < n && t == FYET_SCALAR) {
					size_t klen = 0;
					const char *k = fy_token_get_text(e->scalar.value, &klen);
					const path_component *c = &comps[parent->level];
					parent->key_matches = k && klen == c->len && memcmp(k, c->text, klen) == 0;
					if (parent->key_matches && key && parent->level + 1 == n) {
						event_position(e, have_prev ? &prev : NULL, line, column);
						found = done = true;
					}
				}
			} else if (parent && parent->is_map) {
				on_path = parent->on_path && parent->key_matches && parent->level < n;
				level = parent->level + 1;
				parent->want_key = true;
			} else if (parent) {
				on_path = parent->on_path && parent->level < n &&
					  index_matches(&comps[parent->level], parent->index);
				level = parent->level + 1;
				parent->index++;
			}
			if (!done && on_path && level == n && !key) {
				event_position(e, have_prev ? &prev : NULL, line, column);
				found = done = true;
			}
			if (t == FYET_MAPPING_START || t == FYET_SEQUENCE_START) {
				if (depth < PATH_MAX_DEPTH)
					stack[depth] = (path_frame){.is_map = t == FYET_MAPPING_START,
								    .want_key = true,
								    .on_path = on_path,
								    .level = level};
				depth++;
			}
		} else if (t == FYET_MAPPING_END || t == FYET_SEQUENCE_END) {
			if (depth > 0)
				depth--;
		} else if (t == FYET_DOCUMENT_END) {
			done = true;
		}
		const struct fy_mark *end = fy_event_end_mark(e);
		if (end && (t == FYET_SCALAR || t == FYET_ALIAS || t == FYET_MAPPING_START || t == FYET_SEQUENCE_START ||
			    t == FYET_MAPPING_END || t == FYET_SEQUENCE_END)) {
			prev = *end;
			have_prev = true;
		}
		fy_parser_event_free(fyp, e);
	}
	free(stack);
	fy_parser_destroy(fyp);
	if (!found)
		*line = *column = 0;
	return found;
}

bool rm__fy_message_path(const char *msg, const char *base, char *out, size_t size)
{
	static const char top[] = "(top level)";
	int w = snprintf(out, size, "%s/", base);
	if (w < 0 || (size_t)w >= size)
		return false;
	size_t o = (size_t)w, i = 0;
	if (strncmp(msg, top, sizeof(top) - 1) == 0) {
		i = sizeof(top) - 1;
		if (msg[i] == '.')
			i++;
	}
	for (; msg[i] && msg[i] != ':'; i++) {
		char c = msg[i];
		if (o + 2 >= size)
			return false;
		if (c == '.' || c == '[') {
			out[o++] = '/';
		} else if (c == ']') {
			if (msg[i + 1] && msg[i + 1] != '.' && msg[i + 1] != '[' && msg[i + 1] != ':')
				return false;
		} else if (isalnum((unsigned char)c) || c == '_') {
			out[o++] = c;
		} else {
			return false;
		}
	}
	if (msg[i] != ':')
		return false;
	out[o] = '\0';
	return true;
}

static struct fy_node *find_nul(struct fy_node *n, int depth)
{
	if (!n || depth > 512)
		return NULL;
	if (fy_node_is_scalar(n)) {
		size_t len = 0;
		const char *t = fy_node_get_scalar(n, &len);
		return t && len > 0 && memchr(t, '\0', len) ? n : NULL;
	}
	void *it = NULL;
	if (fy_node_is_mapping(n)) {
		struct fy_node_pair *p;
		while ((p = fy_node_mapping_iterate(n, &it)) != NULL) {
			struct fy_node *bad = find_nul(fy_node_pair_key(p), depth + 1);
			if (!bad)
				bad = find_nul(fy_node_pair_value(p), depth + 1);
			if (bad)
				return bad;
		}
	} else if (fy_node_is_sequence(n)) {
		struct fy_node *item;
		while ((item = fy_node_sequence_iterate(n, &it)) != NULL) {
			struct fy_node *bad = find_nul(item, depth + 1);
			if (bad)
				return bad;
		}
	}
	return NULL;
}

struct fy_node *rm__fy_find_nul_scalar(struct fy_node *n)
{
	return find_nul(n, 0);
}

bool rm__fy_has_second_document(const char *text, size_t len, int *line)
{
	*line = 0;
	/* a diagnostic object of our own: one libfyaml creates for the parser is not freed with it */
	struct fy_diag_cfg dcfg;
	fy_diag_cfg_default(&dcfg);
	dcfg.fp = NULL;
	struct fy_diag *diag = fy_diag_create(&dcfg);
	struct fy_parse_cfg cfg = {.flags = FYPCF_QUIET | FYPCF_DEFAULT_VERSION_AUTO, .diag = diag};
	struct fy_parser *fyp = fy_parser_create(&cfg);
	if (!fyp) {
		fy_diag_destroy(diag);
		return false;
	}
	bool second = false;
	if (fy_parser_set_string(fyp, text, len) == 0) {
		struct fy_document *a = fy_parse_load_document(fyp);
		struct fy_document *b = a ? fy_parse_load_document(fyp) : NULL;
		if (b) {
			second = true;
			struct fy_node *root = fy_document_root(b);
			int col = 0;
			if (root)
				rm__fy_node_position(root, line, &col);
			fy_parse_document_destroy(fyp, b);
		}
		if (a)
			fy_parse_document_destroy(fyp, a);
	}
	fy_parser_destroy(fyp);
	fy_diag_destroy(diag);
	return second;
}
