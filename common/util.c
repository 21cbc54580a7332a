/* Size parsing, formatting, hashing, data paths and file reading (remora/common.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "remora/common.h"
#include "remora/file.h"

bool rm_parse_positive_int(const char *text, int64_t *out)
{
	if (!text || *text < '0' || *text > '9')
		return false;
	errno = 0;
	char *end = NULL;
	long long v = strtoll(text, &end, 10);
	if (errno == ERANGE || *end != '\0' || v <= 0)
		return false;
	*out = (int64_t)v;
	return true;
}

bool rm_parse_size(const char *text, int64_t *bytes)
{
	static const struct {
		const char *suffix;
		double scale;
	} units[] = {
		{"", 1.0},        {"B", 1.0},       {"K", 1024.0},  {"KiB", 1024.0},
		{"M", 1048576.0}, {"MiB", 1048576.0}, {"G", 1073741824.0},
		{"GiB", 1073741824.0}, {"T", 1099511627776.0}, {"TiB", 1099511627776.0},
		{"kB", 1e3},      {"KB", 1e3},      {"MB", 1e6},    {"GB", 1e9},
		{"TB", 1e12},
	};
	if (!text)
		return false;
	while (*text == ' ')
		text++;
	if ((*text < '0' || *text > '9') && *text != '.')
		return false;
	errno = 0;
	char *end = NULL;
	double v = strtod(text, &end);
	if (errno == ERANGE || end == text || !isfinite(v) || v < 0)
		return false;
	while (*end == ' ')
		end++;
	for (size_t i = 0; i < RM_ARRAY_SIZE(units); i++) {
		if (strcmp(end, units[i].suffix) != 0)
			continue;
		double b = v * units[i].scale;
		if (b >= 9.2e18 || b != floor(b))
			return false;
		*bytes = (int64_t)b;
		return true;
	}
	return false;
}

const char *rm_format_bytes(int64_t bytes, char *buf, size_t size)
{
	double v = (double)bytes;
	if (bytes >= RM_GiB)
		snprintf(buf, size, "%.2f GiB", v / (double)RM_GiB);
	else if (bytes >= RM_MiB)
		snprintf(buf, size, "%.2f MiB", v / (double)RM_MiB);
	else if (bytes >= RM_KiB)
		snprintf(buf, size, "%.2f KiB", v / (double)RM_KiB);
	else
		snprintf(buf, size, "%lld B", (long long)bytes);
	return buf;
}

uint64_t rm_hash_fnv1a(const void *data, size_t len, uint64_t seed)
{
	/* FNV-1a 64: offset basis 0xcbf29ce484222325, prime 0x100000001b3 (Fowler/Noll/Vo). */
	const unsigned char *p = data;
	uint64_t h = seed;
	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= UINT64_C(0x100000001b3);
	}
	return h;
}

bool rm_data_path(const char *relative, char *buf, size_t size, rm_error *err)
{
	const char *dirs[3] = {getenv("REMORA_DATA_DIR"), REMORA_SOURCE_DATA_DIR,
			       REMORA_INSTALL_DATA_DIR};
	char tried[600] = "";
	for (size_t i = 0; i < RM_ARRAY_SIZE(dirs); i++) {
		if (!dirs[i] || !dirs[i][0])
			continue;
		int n = snprintf(buf, size, "%s/%s", dirs[i], relative);
		if (n < 0 || (size_t)n >= size)
			continue;
		if (access(buf, R_OK) == 0)
			return true;
		size_t used = strlen(tried);
		snprintf(tried + used, sizeof(tried) - used, "%s%s", used ? ", " : "", dirs[i]);
	}
	rm_error_set(err, RM_NOT_FOUND, NULL, 0, 0, "data file '%s' not found in %s (set REMORA_DATA_DIR to remora's data/ folder)",
		     relative, tried[0] ? tried : "no data directory");
	return false;
}

#define RM_READ_FILE_MAX (INT64_C(4) << 30)

bool rm_read_file(const char *path, char **data, size_t *len, rm_error *err)
{
	/* regular files only, refused without blocking (a FIFO would otherwise hang the open) */
	FILE *f = rm_file_open_read(path, err);
	if (!f)
		return false;
	struct stat st;
	if (fstat(fileno(f), &st) != 0) {
		rm_error_set(err, RM_IO, path, 0, 0, "cannot open: %s", strerror(errno));
		fclose(f);
		return false;
	}
	if (st.st_size > RM_READ_FILE_MAX) {
		fclose(f);
		rm_error_set(err, RM_RANGE, path, 0, 0, "file of %lld bytes is larger than remora reads (%lld)",
			     (long long)st.st_size, (long long)RM_READ_FILE_MAX);
		return false;
	}
	size_t cap = 4096, n = 0;
	char *buf = rm_xmalloc(cap);
	for (;;) {
		if (n + 1 >= cap) {
			cap *= 2;
			buf = rm_xrealloc(buf, cap);
		}
		size_t got = fread(buf + n, 1, cap - n - 1, f);
		n += got;
		if (got == 0)
			break;
	}
	bool failed = ferror(f);
	int e = errno;
	fclose(f);
	if (failed) {
		free(buf);
		rm_error_set(err, RM_IO, path, 0, 0, "read error: %s", strerror(e));
		return false;
	}
	buf[n] = '\0';
	*data = buf;
	if (len)
		*len = n;
	return true;
}
