/*
 * remora/file.h — the one way remora writes an output file and opens an input file.
 *
 * Writing (rm_file_writer): what happens depends on what the path names, checked when it is
 * opened:
 * - a regular file or a path that does not exist yet: the output goes to a new file beside it
 *   (same directory, random name ".NAME.XXXXXXXX.tmp", created with O_EXCL so concurrent runs never
 *   share one), is fflush'ed and fsync'ed, then renamed over the target and the directory is
 *   fsync'ed. A reader sees the old file or the whole new one, never a part; a failed write removes
 *   the temporary file and leaves the old file as it was. An existing file keeps its mode bits.
 * - a symbolic link: followed (up to 40 links) to its final target, which is written as above;
 *   the link stays a link. A dangling link creates its target.
 * - a character device (/dev/null, a terminal, /dev/full) or a FIFO, and /dev/stdout,
 *   /dev/stderr, /dev/fd/N, /proc/self/fd/N: written straight through, no temporary file, no
 *   rename. Opening a FIFO waits for its reader, as any writer of a FIFO does.
 * - a directory, a block device or a socket: refused.
 * Every error names the path and, where the system gave one, strerror(errno), e.g.
 * "out/trace.json: write failed: No space left on device".
 *
 * Reading (rm_file_open_read): only regular files are read. The open never blocks (O_NONBLOCK,
 * cleared once the file is known to be regular), so a FIFO or a device is refused at once instead
 * of hanging the tool.
 *
 * Not thread-safe per writer; distinct writers may be used from distinct threads.
 */
#ifndef REMORA_FILE_H
#define REMORA_FILE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "remora/common.h"

typedef struct rm_file_writer rm_file_writer;

/*
 * Opens PATH for writing as described above. Returns NULL with err (status RM_IO, file = path)
 * when the path is refused or cannot be created. The caller writes to rm_file_writer_stream()
 * and ends with exactly one of rm_file_writer_commit or rm_file_writer_abort.
 */
rm_file_writer *rm_file_writer_open(const char *path, rm_error *err);
/* The stream to write to; write errors are remembered with their errno for the commit. */
FILE *rm_file_writer_stream(rm_file_writer *w);
/* true when the output is written atomically (temporary file + rename), false for write-through. */
bool rm_file_writer_is_atomic(const rm_file_writer *w);
/*
 * Flushes, syncs and puts the output in place; frees w. false with err ("PATH: write failed:
 * REASON") when any byte failed to reach the file; then nothing replaced the target and no
 * temporary file is left.
 */
bool rm_file_writer_commit(rm_file_writer *w, rm_error *err);
/* Drops the output (removes the temporary file; the target is untouched) and frees w. NULL ok. */
void rm_file_writer_abort(rm_file_writer *w);
/*
 * Fault injection for tests: after `after_bytes` bytes have been written, every further write
 * fails with errno `errnum` (e.g. ENOSPC), as on a full disk. Affects this writer only.
 */
void rm_file_writer_inject_fault(rm_file_writer *w, uint64_t after_bytes, int errnum);

/*
 * Whether an output could be written to PATH, checked before the work that produces it: a regular
 * file or a new one in an existing folder is probed by creating (then removing) the temporary
 * file rm_file_writer_open would write, which leaves PATH untouched; a character device, a FIFO
 * or /dev/fd/N is not opened (opening a FIFO waits for its reader) and passes. false with err as
 * rm_file_writer_open gives it ("cannot create a file in DIR: REASON", "is a directory; ...").
 */
bool rm_file_check_writable(const char *path, rm_error *err);

/* Writes one output: fills `out`, returns false (with err) on failure. */
typedef bool (*rm_file_write_fn)(FILE *out, void *user, rm_error *err);
/*
 * Open, fn, commit in one call. When fn fails, the output is dropped; when the stream had a write
 * error, err names the path and the errno whatever fn reported. err->file is the path when fn
 * left it empty.
 */
bool rm_file_write(const char *path, rm_file_write_fn fn, void *user, rm_error *err);

/*
 * Opens a regular file for reading ("rb"). NULL with err (RM_IO, file = path) when it cannot be
 * opened, is a directory ("is a directory, not a file") or anything else that is not a regular
 * file ("not a regular file (a FIFO)", "... (a character device)", ...). Never blocks.
 */
FILE *rm_file_open_read(const char *path, rm_error *err);
/*
 * For files other libraries open (SQLite databases): true when PATH does not exist or is a
 * regular file (after following links); false with err as rm_file_open_read says otherwise.
 */
bool rm_file_check_regular(const char *path, rm_error *err);

#endif /* REMORA_FILE_H */
