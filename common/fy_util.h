/*
 * Private to remora: libfyaml helpers shared by the readers of config.json (models/) and of
 * scenario files (schedules/). Not a public header.
 */
#ifndef REMORA_FY_UTIL_H
#define REMORA_FY_UTIL_H

#include <libfyaml.h>
#include <stdbool.h>
#include <stddef.h>

/*
 * 1-based line and column where a node starts (0, 0 when unknown). libfyaml 0.7 exposes marks on
 * tokens only: a scalar's own token (a quoted scalar's opening quote), a collection's first
 * scalar.
 */
void rm__fy_node_position(struct fy_node *node, int *line, int *column);

/*
 * The first scalar, key or value, under n (depth first, in document order) whose text holds a
 * NUL character: an escaped "\0" or "\u0000", which C strings would silently cut short. NULL
 * when there is none.
 */
struct fy_node *rm__fy_find_nul_scalar(struct fy_node *n);

/*
 * Whether text (already parsed once as a whole document) holds a second YAML document after the
 * first ("---" or "..." then more), which a reader of one document would silently ignore; *line
 * is the 1-based line where the second starts (0 when unknown).
 */
bool rm__fy_has_second_document(const char *text, size_t len, int *line);

/*
 * 1-based line of the first line of text that starts with '%' (a YAML directive such as
 * "%YAML 1.2"), 0 when there is none. Lines end at '\n' or '\r' (as libfyaml counts them); a
 * UTF-8 byte order mark before the first line is skipped. libfyaml 0.7.12 (Debian 12) scans a
 * directive followed by malformed UTF-8 (the two bytes "%\xd0") for ever: the JSON readers
 * (config.json, program paths) refuse every directive line, since JSON has none.
 */
int rm__fy_directive_line(const char *text, size_t len);

/*
 * The YAML readers' guard against the same loop (scenarios, --set values): a directive line
 * (%YAML 1.2, %TAG ...) is accepted only when it is printable ASCII, at the start of the text or
 * after any line break (\n, \r, and YAML 1.1's NEL, LS, PS). Returns false with the 1-based line
 * (counted at \n and \r) and the column, from the '%', of the first offending byte.
 */
bool rm__fy_directives_are_ascii(const char *text, size_t len, int *line, int *col);

/*
 * 1-based line and column (in characters) of the first byte of text that is not well-formed
 * UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF); false when all is.
 * libfyaml 0.7.12 rejects malformed UTF-8 inside a comment without a diagnostic.
 */
bool rm__fy_find_bad_utf8(const char *text, size_t len, int *line, int *column);

/*
 * The first control character of text that neither YAML nor JSON admits (bytes 0x00-0x1F except
 * tab, line feed and carriage return, and 0x7F: outside YAML 1.2's c-printable, and raw in JSON
 * text), its 1-based line and column and the byte in *byte (false, 0, 0 when there is none).
 * libfyaml 0.7.12 writes through a null pointer on some documents holding one ("? a: \t\0",
 * "? a:  \t? a:  \t\x01"): every reader refuses them first.
 */
bool rm__fy_find_control(const char *text, size_t len, int *line, int *column, unsigned *byte);

/*
 * The first tab of text, 1-based line and column (false, 0, 0 when there is none). YAML allows
 * tabs only as separation, never as indentation, and libfyaml 0.7.12 writes through a null
 * pointer on some documents with tabs before indicators ("a: b\nc d: \t?\tx"): the YAML
 * readers (scenarios, validation cases) take spaces only.
 */
bool rm__fy_find_tab(const char *text, size_t len, int *line, int *column);

/*
 * Where the node at path starts in text, 1-based (a mapping's '{', a sequence's '[', a quoted
 * scalar's opening quote), found by replaying libfyaml's events over text (YAML, or JSON when
 * json is set). path is libfyaml's node path ("/ops/12/inputs/1", "/" or "" for the root:
 * mapping keys by their text, sequence items by index). With key set, the position of the last
 * mapping key itself instead of its value. Returns false (line and column 0) when text does not
 * parse, contains a YAML directive line, or has no such node.
 */
bool rm__fy_path_position(const char *text, size_t len, bool json, const char *path, bool key, int *line,
			  int *column);

/*
 * Where node n of the document in text starts, 1-based: a scalar by its token; a mapping, a
 * sequence or a scalar without a token of its own (an empty value) by rm__fy_path_position over
 * text (NULL text: libfyaml's own mark). 0, 0 when n is NULL and nothing is known.
 */
void rm__fy_node_start(const char *text, size_t len, bool json, struct fy_node *n, int *line, int *column);

/*
 * The JSON path an error message starts with ("ops[12].inputs[1]: ...", "(top level): ...") as
 * libfyaml's node path under base ("" or e.g. "/measurement"): "/ops/12/inputs/1". False when
 * the message does not start with a path followed by ':'.
 */
bool rm__fy_message_path(const char *msg, const char *base, char *out, size_t size);

#endif /* REMORA_FY_UTIL_H */
