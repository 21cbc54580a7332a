/* Checked allocation (remora/common.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remora/common.h"

static void oom(size_t size, const char *file, int line)
{
	fprintf(stderr, "remora: fatal: out of memory (%zu bytes at %s:%d)\n", size, file, line);
	abort();
}

void *rm__xmalloc(size_t size, const char *file, int line)
{
	void *p = malloc(size ? size : 1);
	if (!p)
		oom(size, file, line);
	return p;
}

void *rm__xcalloc(size_t count, size_t size, const char *file, int line)
{
	void *p = calloc(count ? count : 1, size ? size : 1);
	if (!p)
		oom(count * size, file, line);
	return p;
}

void *rm__xrealloc(void *ptr, size_t size, const char *file, int line)
{
	void *p = realloc(ptr, size ? size : 1);
	if (!p)
		oom(size, file, line);
	return p;
}

char *rm__xstrdup(const char *s, const char *file, int line)
{
	size_t n = strlen(s) + 1;
	char *p = rm__xmalloc(n, file, line);
	memcpy(p, s, n);
	return p;
}
