/*
 * remora/common.h — what every module shares: the result enum, the error record that carries
 * file:line:column to the user, the logger, checked allocation and unit helpers.
 *
 * Invariants
 * - Every fallible function returns rm_status (or bool, or NULL from a create) and, when it is
 *   given an rm_error, fills it where the failure happens with the position and a sentence a user
 *   can act on. Nothing here prints on its own except the logger.
 * - Status messages come from one table (RM_STATUS_MAP), as libuv's UV_ERRNO_MAP does.
 *
 * Units: sizes in bytes (int64_t or uint64_t), decimal prefixes for rates (GB/s = 1e9 B/s),
 * binary prefixes for sizes where the field uses them (KiB, MiB, GiB = 2^10, 2^20, 2^30).
 */
#ifndef REMORA_COMMON_H
#define REMORA_COMMON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* X(NAME, message): one row per result. */
#define RM_STATUS_MAP(X)                                                        \
	X(OK, "success")                                                        \
	X(NOMEM, "out of memory")                                               \
	X(IO, "input/output error")                                             \
	X(PARSE, "malformed input")                                             \
	X(INVALID, "invalid value")                                             \
	X(UNKNOWN_KEY, "unknown key")                                           \
	X(MISSING, "missing required value")                                    \
	X(UNSUPPORTED, "not supported")                                         \
	X(NOT_FOUND, "not found")                                               \
	X(RANGE, "value out of range")                                          \
	X(USAGE, "bad command-line usage")

typedef enum rm_status {
#define RM_STATUS_ENUM(name, msg) RM_##name,
	RM_STATUS_MAP(RM_STATUS_ENUM)
#undef RM_STATUS_ENUM
	RM_STATUS_COUNT
} rm_status;

/* The message of a status, e.g. "malformed input"; "unknown status" outside the table. */
const char *rm_status_str(rm_status status);
/* The enum name without prefix, e.g. "PARSE"; stable, used in JSON output. */
const char *rm_status_name(rm_status status);

/*
 * An error as the user sees it: "FILE:LINE:COL: MESSAGE". file may be empty (an error on the
 * command line or in memory), line/column are 1-based and 0 when unknown.
 */
typedef struct rm_error {
	rm_status status;
	char file[256];
	int line;
	int column;
	char msg[768];
} rm_error;

/* Clears err to RM_OK with no position. err may be NULL. */
void rm_error_clear(rm_error *err);
/*
 * Records a failure in err (may be NULL) and returns status, so callers can write
 * `return rm_error_set(err, RM_INVALID, path, line, col, "...", ...);`.
 * file may be NULL; line and column are 1-based, 0 when unknown.
 */
rm_status rm_error_set(rm_error *err, rm_status status, const char *file, int line, int column,
		       const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* Prefixes the message with context ("while reading X: ") keeping position and status. */
void rm_error_prefix(rm_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Writes "file:line:column: error: msg" (parts that are unknown are left out) into buf. */
void rm_error_format(const rm_error *err, char *buf, size_t size);

/*
 * Logger. Messages go to stderr as "remora: LEVEL: text". The level is process-wide (set once by
 * the command line); logging never affects results.
 */
typedef enum rm_log_level {
	RM_LOG_ERROR = 0,
	RM_LOG_WARN = 1,
	RM_LOG_INFO = 2,
	RM_LOG_DEBUG = 3,
} rm_log_level;

void rm_log_set_level(rm_log_level level);
rm_log_level rm_log_get_level(void);
/* Holds back the calling thread's warnings and notes (errors still print) while quiet; returns
 * the previous setting. For work that repeats what was already reported once (a search
 * re-resolving a variant for each of its candidates). */
bool rm_log_thread_quiet(bool quiet);
void rm_log(rm_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rm_log_error_record(const rm_error *err);

#define rm_log_error(...) rm_log(RM_LOG_ERROR, __VA_ARGS__)
#define rm_log_warn(...) rm_log(RM_LOG_WARN, __VA_ARGS__)
#define rm_log_info(...) rm_log(RM_LOG_INFO, __VA_ARGS__)
#define rm_log_debug(...) rm_log(RM_LOG_DEBUG, __VA_ARGS__)

/*
 * Checked allocation: on exhaustion these print "remora: fatal: out of memory (N bytes at
 * FILE:LINE)" and abort. remora's allocations are small and bounded by the input; running out of
 * host memory is not a condition the tool can recover from meaningfully.
 */
void *rm__xmalloc(size_t size, const char *file, int line);
void *rm__xcalloc(size_t count, size_t size, const char *file, int line);
void *rm__xrealloc(void *ptr, size_t size, const char *file, int line);
char *rm__xstrdup(const char *s, const char *file, int line);
#define rm_xmalloc(size) rm__xmalloc((size), __FILE__, __LINE__)
#define rm_xcalloc(count, size) rm__xcalloc((count), (size), __FILE__, __LINE__)
#define rm_xrealloc(ptr, size) rm__xrealloc((ptr), (size), __FILE__, __LINE__)
#define rm_xstrdup(s) rm__xstrdup((s), __FILE__, __LINE__)
#define rm_new(type, count) ((type *)rm_xcalloc((count), sizeof(type)))

/* Propagates a non-OK status to the caller. */
#define RM_CHECK(expr)                                                         \
	do {                                                                   \
		rm_status rm__s = (expr);                                      \
		if (rm__s != RM_OK)                                            \
			return rm__s;                                          \
	} while (0)

#define RM_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Sizes (binary) and rates (decimal). */
#define RM_KiB ((int64_t)1 << 10)
#define RM_MiB ((int64_t)1 << 20)
#define RM_GiB ((int64_t)1 << 30)
#define RM_GB 1e9
#define RM_TB 1e12

/*
 * Parses a size such as "4096", "64KiB", "16 MiB", "1GiB", "1.5GB" or "512B" into bytes.
 * Binary suffixes KiB/MiB/GiB/TiB (and K/M/G/T as their short forms, as nccl-tests writes them),
 * decimal kB/MB/GB/TB. Returns false on anything else, on negative values, on a fractional byte
 * count, or on overflow of int64.
 */
bool rm_parse_size(const char *text, int64_t *bytes);
/*
 * Parses a positive decimal integer without sign, spaces or suffix into *out; false otherwise
 * (including overflow of int64).
 */
bool rm_parse_positive_int(const char *text, int64_t *out);
/* Formats bytes with a binary suffix ("16.0 MiB"); returns buf. */
const char *rm_format_bytes(int64_t bytes, char *buf, size_t size);

/* SQLite PRAGMA application_id of remora's two databases, so each refuses the other's file:
 * 'RMCA' the calibration database (calibrate/db.c), 'RMSW' the sweep store (search/store.c). */
#define RM_APP_ID_CALIB UINT32_C(0x524D4341)
#define RM_APP_ID_SWEEP UINT32_C(0x524D5357)

/* Hashes a string with 64-bit FNV-1a (Fowler, Noll, Vo); used for stable ids and keys. */
uint64_t rm_hash_fnv1a(const void *data, size_t len, uint64_t seed);
#define RM_FNV1A_SEED UINT64_C(0xcbf29ce484222325)

/*
 * Resolves a data file shipped in data/ (e.g. "models/llama-2-7b.json") to a readable path in buf.
 * Looks in $REMORA_DATA_DIR, then the source tree's data/ the binary was built from, then the
 * installed data directory. Returns false, with err naming every place tried, if none has it.
 */
bool rm_data_path(const char *relative, char *buf, size_t size, rm_error *err);

/* Reads a whole regular file (at most 4 GiB) into a NUL-terminated buffer (caller frees); false
 * with err on failure: cannot open, a directory, a FIFO or device (refused at once, never waited
 * on: remora/file.h rm_file_open_read), too large, read error. */
bool rm_read_file(const char *path, char **data, size_t *len, rm_error *err);

#endif /* REMORA_COMMON_H */
