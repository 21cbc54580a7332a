/* The result table and the error record (remora/common.h). */
#include <stdio.h>
#include <string.h>

#include "remora/common.h"

static const char *const status_msg[] = {
#define RM_STATUS_MSG(name, msg) [RM_##name] = msg,
	RM_STATUS_MAP(RM_STATUS_MSG)
#undef RM_STATUS_MSG
};

static const char *const status_name[] = {
#define RM_STATUS_NAME(name, msg) [RM_##name] = #name,
	RM_STATUS_MAP(RM_STATUS_NAME)
#undef RM_STATUS_NAME
};

const char *rm_status_str(rm_status status)
{
	if ((unsigned)status >= RM_STATUS_COUNT)
		return "unknown status";
	return status_msg[status];
}

const char *rm_status_name(rm_status status)
{
	if ((unsigned)status >= RM_STATUS_COUNT)
		return "UNKNOWN";
	return status_name[status];
}

void rm_error_clear(rm_error *err)
{
	if (!err)
		return;
	memset(err, 0, sizeof(*err));
	err->status = RM_OK;
}

rm_status rm_error_set(rm_error *err, rm_status status, const char *file, int line, int column,
		       const char *fmt, ...)
{
	if (!err)
		return status;
	err->status = status;
	snprintf(err->file, sizeof(err->file), "%s", file ? file : "");
	err->line = line;
	err->column = column;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return status;
}

void rm_error_prefix(rm_error *err, const char *fmt, ...)
{
	if (!err)
		return;
	char head[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(head, sizeof(head), fmt, ap);
	va_end(ap);
	char old[sizeof(err->msg)];
	memcpy(old, err->msg, sizeof(old));
	snprintf(err->msg, sizeof(err->msg), "%s%s", head, old);
}

void rm_error_format(const rm_error *err, char *buf, size_t size)
{
	if (!err || size == 0)
		return;
	const char *msg = err->msg[0] ? err->msg : rm_status_str(err->status);
	if (err->file[0] && err->line > 0 && err->column > 0)
		snprintf(buf, size, "%s:%d:%d: error: %s", err->file, err->line, err->column, msg);
	else if (err->file[0] && err->line > 0)
		snprintf(buf, size, "%s:%d: error: %s", err->file, err->line, msg);
	else if (err->file[0])
		snprintf(buf, size, "%s: error: %s", err->file, msg);
	else
		snprintf(buf, size, "error: %s", msg);
}
