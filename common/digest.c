/* SHA-256 through libcrypto and canonical text buffers (remora/digest.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "remora/common.h"
#include "remora/digest.h"

void rm_sha256(const void *data, size_t len, uint8_t out[RM_SHA256_BYTES])
{
	unsigned int n = 0;
	/* EVP_Digest is libcrypto's one-shot interface; it fails only without a SHA-256 provider */
	if (EVP_Digest(data, len, out, &n, EVP_sha256(), NULL) != 1 || n != RM_SHA256_BYTES) {
		fprintf(stderr, "remora: libcrypto could not compute SHA-256\n");
		abort();
	}
}

char *rm_sha256_hex(const uint8_t digest[RM_SHA256_BYTES], char hex[RM_SHA256_HEX])
{
	static const char digits[] = "0123456789abcdef";
	for (int i = 0; i < RM_SHA256_BYTES; i++) {
		hex[2 * i] = digits[digest[i] >> 4];
		hex[2 * i + 1] = digits[digest[i] & 15];
	}
	hex[2 * RM_SHA256_BYTES] = '\0';
	return hex;
}

char *rm_sha256_hex_of(const char *text, char hex[RM_SHA256_HEX])
{
	uint8_t d[RM_SHA256_BYTES];
	rm_sha256(text, strlen(text), d);
	return rm_sha256_hex(d, hex);
}

void rm_canon_init(rm_canon *c)
{
	c->cap = 1024;
	c->len = 0;
	c->buf = rm_new(char, c->cap);
	c->buf[0] = '\0';
}

void rm_canon_finish(rm_canon *c)
{
	if (!c)
		return;
	free(c->buf);
	c->buf = NULL;
	c->len = c->cap = 0;
}

static void canon_put(rm_canon *c, const char *key, const char *value)
{
	size_t kl = strlen(key), vl = strlen(value), esc = 0;
	for (size_t i = 0; i < vl; i++)
		esc += value[i] == '\n' || value[i] == '\\';
	size_t need = c->len + kl + vl + esc + 3;
	if (need > c->cap) {
		while (c->cap < need)
			c->cap *= 2;
		c->buf = rm_xrealloc(c->buf, c->cap);
	}
	memcpy(c->buf + c->len, key, kl);
	c->len += kl;
	c->buf[c->len++] = '=';
	/* a value never spans lines: newlines and backslashes are escaped, one key per line */
	for (size_t i = 0; i < vl; i++) {
		if (value[i] == '\n' || value[i] == '\\') {
			c->buf[c->len++] = '\\';
			c->buf[c->len++] = value[i] == '\n' ? 'n' : '\\';
		} else {
			c->buf[c->len++] = value[i];
		}
	}
	c->buf[c->len++] = '\n';
	c->buf[c->len] = '\0';
}

void rm_canon_str(rm_canon *c, const char *key, const char *value)
{
	canon_put(c, key, value ? value : "");
}

void rm_canon_int(rm_canon *c, const char *key, int64_t value)
{
	char v[32];
	snprintf(v, sizeof(v), "%lld", (long long)value);
	canon_put(c, key, v);
}

void rm_canon_real(rm_canon *c, const char *key, double value)
{
	char v[48];
	snprintf(v, sizeof(v), "%a", value);
	canon_put(c, key, v);
}

void rm_canon_digest(const rm_canon *c, uint8_t out[RM_SHA256_BYTES])
{
	rm_sha256(c->buf, c->len, out);
}
