/*
 * remora/digest.h — SHA-256 digests (common/digest.c), through OpenSSL's libcrypto (EVP).
 *
 * What it is for: keys that must not collide and checksums that must catch a changed byte — the
 * sweep store's row keys (the digest of a resolved run's canonical text plus a candidate) and its
 * per-row checksums. In-memory de-duplication inside one run may keep using rm_hash_fnv1a.
 *
 * A digest is 32 bytes (FIPS 180-4 SHA-256); its text form is 64 lower-case hex digits.
 */
#ifndef REMORA_DIGEST_H
#define REMORA_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#define RM_SHA256_BYTES 32
#define RM_SHA256_HEX (2 * RM_SHA256_BYTES + 1) /* with the terminating NUL */

/* SHA-256 of len bytes at data into out. Aborts (rm_die) only if libcrypto cannot run SHA-256. */
void rm_sha256(const void *data, size_t len, uint8_t out[RM_SHA256_BYTES]);
/* Hex of a digest into hex (RM_SHA256_HEX bytes); returns hex. */
char *rm_sha256_hex(const uint8_t digest[RM_SHA256_BYTES], char hex[RM_SHA256_HEX]);
/* SHA-256 of a NUL-terminated string, as hex. */
char *rm_sha256_hex_of(const char *text, char hex[RM_SHA256_HEX]);

/*
 * A growable text buffer for canonical serializations (what gets hashed). Lines are "key=value";
 * doubles are written exactly (C99 %a hexadecimal floating point), so equal values give equal text
 * and different values different text. rm_canon_finish frees it.
 */
typedef struct rm_canon {
	char *buf;
	size_t len, cap;
} rm_canon;

void rm_canon_init(rm_canon *c);
void rm_canon_finish(rm_canon *c);
void rm_canon_str(rm_canon *c, const char *key, const char *value);
void rm_canon_int(rm_canon *c, const char *key, int64_t value);
void rm_canon_real(rm_canon *c, const char *key, double value);
/* Digest of what was written so far. */
void rm_canon_digest(const rm_canon *c, uint8_t out[RM_SHA256_BYTES]);

#endif /* REMORA_DIGEST_H */
