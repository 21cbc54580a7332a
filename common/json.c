/* Strings for jansson from arbitrary bytes (remora/json.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remora/common.h"
#include "remora/json.h"

static bool cont(unsigned char c)
{
	return c >= 0x80 && c <= 0xBF;
}

int rm_utf8_sequence_length(const unsigned char *p)
{
	/* RFC 3629 section 4, the UTF8-octets grammar, row by row */
	unsigned char c = p[0];
	if (c < 0x80)
		return c ? 1 : 0;
	if (c >= 0xC2 && c <= 0xDF)
		return cont(p[1]) ? 2 : 0;
	if (c >= 0xE0 && c <= 0xEF) {
		unsigned char lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
		return p[1] >= lo && p[1] <= hi && cont(p[2]) ? 3 : 0;
	}
	if (c >= 0xF0 && c <= 0xF4) {
		unsigned char lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
		return p[1] >= lo && p[1] <= hi && cont(p[2]) && cont(p[3]) ? 4 : 0;
	}
	return 0;
}

json_t *rm_json_string(const char *s)
{
	if (!s)
		s = "";
	json_t *j = json_string(s);
	if (j)
		return j;
	/* at most 3 bytes (U+FFFD) per input byte */
	size_t n = strlen(s);
	char *fixed = rm_xmalloc(3 * n + 1);
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		int len = rm_utf8_sequence_length(p);
		if (len > 0) {
			memcpy(fixed + o, p, (size_t)len);
			o += (size_t)len;
			p += len;
		} else {
			memcpy(fixed + o, "\xEF\xBF\xBD", 3);
			o += 3;
			p++;
		}
	}
	fixed[o] = '\0';
	j = json_string(fixed);
	free(fixed);
	if (!j) {
		fprintf(stderr, "remora: fatal: out of memory (a JSON string of %zu bytes)\n", n);
		abort();
	}
	return j;
}
