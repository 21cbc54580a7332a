/* The logger (remora/common.h): one process-wide level, messages to stderr. */
#include <stdatomic.h>
#include <stdio.h>

#include "remora/common.h"

static atomic_int log_level = RM_LOG_WARN;

static const char *const level_name[] = {
	[RM_LOG_ERROR] = "error",
	[RM_LOG_WARN] = "warning",
	[RM_LOG_INFO] = "info",
	[RM_LOG_DEBUG] = "debug",
};

/*
 * Writes text to stderr with control characters (C0 other than tab, and DEL) shown as \xNN, so
 * input quoted in a message (a config value, a file name) cannot move the cursor, recolour the
 * terminal or fake a line of its own in a log.
 */
static void put_escaped(const char *prefix, const char *text)
{
	char out[4200];
	size_t n = 0;
	for (const unsigned char *p = (const unsigned char *)text; *p && n + 5 < sizeof(out); p++) {
		if ((*p < 0x20 && *p != '\t') || *p == 0x7f)
			n += (size_t)snprintf(out + n, sizeof(out) - n, "\\x%02x", *p);
		else
			out[n++] = (char)*p;
	}
	out[n] = '\0';
	/* One fprintf per message keeps lines whole when threads log at once. */
	fprintf(stderr, "%s%s\n", prefix, out);
}

void rm_log_set_level(rm_log_level level)
{
	atomic_store(&log_level, (int)level);
}

rm_log_level rm_log_get_level(void)
{
	return (rm_log_level)atomic_load(&log_level);
}

/* The calling thread's warnings and notes held back (rm_log_thread_quiet); errors still print. */
static _Thread_local bool thread_quiet;

bool rm_log_thread_quiet(bool quiet)
{
	bool was = thread_quiet;
	thread_quiet = quiet;
	return was;
}

void rm_log(rm_log_level level, const char *fmt, ...)
{
	if ((int)level > atomic_load(&log_level) || (thread_quiet && level != RM_LOG_ERROR))
		return;
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	char prefix[32];
	snprintf(prefix, sizeof(prefix), "remora: %s: ", level_name[level]);
	put_escaped(prefix, line);
}

void rm_log_error_record(const rm_error *err)
{
	char buf[1200];
	rm_error_format(err, buf, sizeof(buf));
	/* rm_error_format already says "error:"; keep the program name in front only. */
	put_escaped("remora: ", buf);
}
