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

void rm_log_set_level(rm_log_level level)
{
	atomic_store(&log_level, (int)level);
}

rm_log_level rm_log_get_level(void)
{
	return (rm_log_level)atomic_load(&log_level);
}

void rm_log(rm_log_level level, const char *fmt, ...)
{
	if ((int)level > atomic_load(&log_level))
		return;
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* One fprintf per message keeps lines whole when threads log at once. */
	fprintf(stderr, "remora: %s: %s\n", level_name[level], line);
}

void rm_log_error_record(const rm_error *err)
{
	char buf[1200];
	rm_error_format(err, buf, sizeof(buf));
	/* rm_error_format already says "error:"; keep the program name in front only. */
	fprintf(stderr, "remora: %s\n", buf);
}
