/*
 * remora/json.h — what remora's JSON writers share on top of jansson (every JSON document remora
 * writes is built and serialised by jansson, so escaping is jansson's).
 *
 * jansson accepts only valid UTF-8 for strings: json_string() of other bytes returns NULL, and
 * json_object_set_new() then leaves the member out without a word. Names remora did not make
 * itself (a model's file name, a scenario's path) may be any bytes, so they go through
 * rm_json_string, which never fails.
 */
#ifndef REMORA_JSON_H
#define REMORA_JSON_H

#include <jansson.h>

/*
 * A JSON string of s: s itself when it is valid UTF-8 (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF), otherwise s with each invalid byte replaced by U+FFFD
 * (the Unicode replacement character). NULL gives "". Never returns NULL (allocation failures
 * abort, as remora's checked allocation does).
 */
json_t *rm_json_string(const char *s);

/* Length of the valid UTF-8 sequence at p (1-4), or 0 when the byte at p starts none. */
int rm_utf8_sequence_length(const unsigned char *p);

#endif /* REMORA_JSON_H */
