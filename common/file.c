/*
 * Safe output files and non-blocking input opens (remora/file.h).
 *
 * The atomic write is the classic sequence of rename(2)'s guarantee (POSIX: "If the link named by
 * the new argument exists, it shall be removed and old renamed to new ... a link named new shall
 * remain visible to other threads throughout the renaming operation"): write a new file in the
 * target's directory, fsync it, rename it over the target, fsync the directory so the rename
 * itself is durable.
 */
#define _GNU_SOURCE /* fopencookie */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "remora/file.h"

/* Linux's MAXSYMLINKS: the kernel's own limit on links followed in one path walk. */
#define RM_FILE_MAX_LINKS 40
/* Attempts at a free temporary name; 2^32 names each, so a collision twice is already rare. */
#define RM_FILE_TMP_TRIES 64

struct rm_file_writer {
	char *shown;  /* the path as the user gave it, for messages */
	char *target; /* atomic: the file renamed over (links resolved); NULL for write-through */
	char *tmp;    /* atomic: the temporary file */
	int fd;
	FILE *f;
	int err_no; /* first write error */
	uint64_t written;
	bool fault;
	uint64_t fault_after;
	int fault_errno;
};

static char *str_join(const char *a, const char *sep, const char *b)
{
	size_t la = strlen(a), ls = strlen(sep), lb = strlen(b);
	char *s = rm_xmalloc(la + ls + lb + 1);
	memcpy(s, a, la);
	memcpy(s + la, sep, ls);
	memcpy(s + la + ls, b, lb + 1);
	return s;
}

/* The directory part of path ("." for a bare name, "/" for "/x"). */
static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return rm_xstrdup(".");
	if (slash == path)
		return rm_xstrdup("/");
	size_t n = (size_t)(slash - path);
	char *d = rm_xmalloc(n + 1);
	memcpy(d, path, n);
	d[n] = '\0';
	return d;
}

static const char *base_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

static const char *kind_name(mode_t mode)
{
	if (S_ISDIR(mode))
		return "a directory";
	if (S_ISFIFO(mode))
		return "a FIFO";
	if (S_ISCHR(mode))
		return "a character device";
	if (S_ISBLK(mode))
		return "a block device";
	if (S_ISSOCK(mode))
		return "a socket";
	if (S_ISLNK(mode))
		return "a symbolic link";
	return "not a regular file";
}

/* ---- writing ------------------------------------------------------------------------------- */

static ssize_t cookie_write(void *cookie, const char *buf, size_t size)
{
	rm_file_writer *w = cookie;
	size_t done = 0;
	while (done < size && !w->err_no) {
		size_t chunk = size - done;
		if (w->fault) {
			if (w->written >= w->fault_after) {
				w->err_no = w->fault_errno;
				break;
			}
			if (chunk > w->fault_after - w->written)
				chunk = (size_t)(w->fault_after - w->written);
		}
		ssize_t n = write(w->fd, buf + done, chunk);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			w->err_no = n < 0 ? errno : EIO;
			break;
		}
		done += (size_t)n;
		w->written += (uint64_t)n;
	}
	if (w->err_no) {
		errno = w->err_no;
		return 0; /* fopencookie(3): 0 on error, the stream's error flag is set */
	}
	return (ssize_t)done;
}

/* The descriptor is closed by commit/abort, after the fsync. */
static int cookie_close(void *cookie)
{
	(void)cookie;
	return 0;
}

static bool attach_stream(rm_file_writer *w, rm_error *err)
{
	cookie_io_functions_t io = {.write = cookie_write, .close = cookie_close};
	w->f = fopencookie(w, "w", io);
	if (!w->f)
		return rm_error_set(err, RM_IO, w->shown, 0, 0, "cannot open for writing: %s", strerror(errno)), false;
	return true;
}

static void writer_free(rm_file_writer *w)
{
	free(w->shown);
	free(w->target);
	free(w->tmp);
	free(w);
}

/* The descriptor number of a path that names one of this process's descriptors, or -1. */
static int fd_path(const char *path)
{
	if (strcmp(path, "/dev/stdout") == 0)
		return STDOUT_FILENO;
	if (strcmp(path, "/dev/stderr") == 0)
		return STDERR_FILENO;
	static const char *const prefixes[] = {"/dev/fd/", "/proc/self/fd/"};
	for (size_t i = 0; i < RM_ARRAY_SIZE(prefixes); i++) {
		size_t n = strlen(prefixes[i]);
		if (strncmp(path, prefixes[i], n) != 0)
			continue;
		int64_t fd;
		if (rm_parse_positive_int(path + n, &fd) && fd <= INT_MAX)
			return (int)fd;
		if (strcmp(path + n, "0") == 0)
			return 0;
	}
	return -1;
}

/*
 * Follows symbolic links of the last component until a path that is not a link (or does not
 * exist). Relative link targets are taken from the link's directory, as the kernel does.
 */
static char *resolve_links(const char *path, rm_error *err)
{
	char *cur = rm_xstrdup(path);
	for (int hop = 0; hop <= RM_FILE_MAX_LINKS; hop++) {
		struct stat st;
		if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode))
			return cur;
		char buf[PATH_MAX];
		ssize_t n = readlink(cur, buf, sizeof(buf) - 1);
		if (n < 0) {
			rm_error_set(err, RM_IO, path, 0, 0, "cannot read the symbolic link %s: %s", cur, strerror(errno));
			free(cur);
			return NULL;
		}
		buf[n] = '\0';
		char *next;
		if (buf[0] == '/') {
			next = rm_xstrdup(buf);
		} else {
			char *d = dir_of(cur);
			next = str_join(d, "/", buf);
			free(d);
		}
		free(cur);
		cur = next;
	}
	rm_error_set(err, RM_IO, path, 0, 0, "cannot write: %s", strerror(ELOOP));
	free(cur);
	return NULL;
}

/* Creates the temporary file beside w->target; mode 0666 less the umask, as a new file gets. */
static bool create_tmp(rm_file_writer *w, rm_error *err)
{
	char *dir = dir_of(w->target);
	const char *base = base_of(w->target);
	int base_len = (int)strlen(base);
	if (base_len > 200) /* leaves room for the suffix within NAME_MAX (255) */
		base_len = 200;
	size_t cap = strlen(dir) + (size_t)base_len + 32;
	w->tmp = rm_xmalloc(cap);
	int last = 0;
	for (int i = 0; i < RM_FILE_TMP_TRIES; i++) {
		uint32_t r = 0;
		if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
			r = (uint32_t)getpid() * 2654435761u + (uint32_t)i; /* Knuth's multiplicative hash */
		snprintf(w->tmp, cap, "%s/.%.*s.%08x.tmp", dir, base_len, base, (unsigned)r);
		w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0666);
		if (w->fd >= 0) {
			free(dir);
			return true;
		}
		last = errno;
		if (last != EEXIST)
			break;
	}
	rm_error_set(err, RM_IO, w->shown, 0, 0, "cannot create a file in %s: %s", dir, strerror(last));
	free(dir);
	free(w->tmp);
	w->tmp = NULL;
	return false;
}

static bool open_through(rm_file_writer *w, int fd, rm_error *err)
{
	w->fd = fd >= 0 ? dup(fd) : open(w->shown, O_WRONLY | O_NOCTTY | O_CLOEXEC);
	if (w->fd < 0)
		return rm_error_set(err, RM_IO, w->shown, 0, 0, "cannot open for writing: %s", strerror(errno)), false;
	return true;
}

rm_file_writer *rm_file_writer_open(const char *path, rm_error *err)
{
	if (!path || !*path) {
		rm_error_set(err, RM_IO, NULL, 0, 0, "empty output path");
		return NULL;
	}
	rm_file_writer *w = rm_new(rm_file_writer, 1);
	w->shown = rm_xstrdup(path);
	w->fd = -1;
	int fd = fd_path(path);
	struct stat st;
	if (fd >= 0) {
		if (!open_through(w, fd, err))
			goto fail;
	} else if (stat(path, &st) == 0) {
		if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
			if (!open_through(w, -1, err))
				goto fail;
		} else if (S_ISREG(st.st_mode)) {
			w->target = resolve_links(path, err);
			if (!w->target || !create_tmp(w, err))
				goto fail;
			/* the replacement keeps the permissions of the file it replaces */
			if (fchmod(w->fd, st.st_mode & 07777) != 0) {
				rm_error_set(err, RM_IO, path, 0, 0, "cannot set the mode of %s: %s", w->tmp, strerror(errno));
				goto fail;
			}
		} else {
			rm_error_set(err, RM_IO, path, 0, 0, "is %s; remora writes regular files, character devices "
				     "and FIFOs", kind_name(st.st_mode));
			goto fail;
		}
	} else if (errno == ENOENT) {
		/* a new file, possibly through a dangling link */
		w->target = resolve_links(path, err);
		if (!w->target || !create_tmp(w, err))
			goto fail;
	} else {
		rm_error_set(err, RM_IO, path, 0, 0, "cannot write: %s", strerror(errno));
		goto fail;
	}
	if (!attach_stream(w, err))
		goto fail;
	return w;
fail:
	if (w->fd >= 0)
		close(w->fd);
	if (w->tmp)
		unlink(w->tmp);
	writer_free(w);
	return NULL;
}

FILE *rm_file_writer_stream(rm_file_writer *w)
{
	return w->f;
}

bool rm_file_writer_is_atomic(const rm_file_writer *w)
{
	return w->target != NULL;
}

void rm_file_writer_inject_fault(rm_file_writer *w, uint64_t after_bytes, int errnum)
{
	w->fault = true;
	w->fault_after = after_bytes;
	w->fault_errno = errnum;
}

/* fsync of the directory that holds path, so that a rename survives a crash. */
static void sync_dir(const char *path)
{
	char *dir = dir_of(path);
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		/* EINVAL: the file system cannot sync directories (the data itself is synced) */
		if (fsync(fd) != 0 && errno != EINVAL)
			rm_log_warn("%s: cannot sync the directory after writing %s: %s", dir, base_of(path),
				    strerror(errno));
		close(fd);
	}
	free(dir);
}

bool rm_file_writer_commit(rm_file_writer *w, rm_error *err)
{
	int e = 0;
	const char *what = "write failed";
	if (fflush(w->f) != 0 || ferror(w->f))
		e = w->err_no ? w->err_no : EIO;
	fclose(w->f);
	w->f = NULL;
	if (!e && w->target && fsync(w->fd) != 0)
		e = errno;
	if (close(w->fd) != 0 && !e)
		e = errno;
	w->fd = -1;
	if (!e && w->target && rename(w->tmp, w->target) != 0) {
		e = errno;
		what = "cannot put the file in place";
	}
	if (e) {
		if (w->tmp)
			unlink(w->tmp);
		rm_error_set(err, RM_IO, w->shown, 0, 0, "%s: %s", what, strerror(e));
		writer_free(w);
		return false;
	}
	if (w->target)
		sync_dir(w->target);
	writer_free(w);
	return true;
}

void rm_file_writer_abort(rm_file_writer *w)
{
	if (!w)
		return;
	if (w->f)
		fclose(w->f);
	if (w->fd >= 0)
		close(w->fd);
	if (w->tmp)
		unlink(w->tmp);
	writer_free(w);
}

bool rm_file_write(const char *path, rm_file_write_fn fn, void *user, rm_error *err)
{
	rm_file_writer *w = rm_file_writer_open(path, err);
	if (!w)
		return false;
	if (!fn(w->f, user, err)) {
		int e = w->err_no;
		rm_file_writer_abort(w);
		if (e)
			rm_error_set(err, RM_IO, path, 0, 0, "write failed: %s", strerror(e));
		else if (err && !err->file[0])
			snprintf(err->file, sizeof(err->file), "%s", path);
		return false;
	}
	return rm_file_writer_commit(w, err);
}

/* ---- reading ------------------------------------------------------------------------------- */

static bool refuse_kind(const char *path, mode_t mode, rm_error *err)
{
	if (S_ISDIR(mode))
		rm_error_set(err, RM_IO, path, 0, 0, "is a directory, not a file");
	else
		rm_error_set(err, RM_IO, path, 0, 0, "not a regular file (%s)", kind_name(mode));
	return false;
}

FILE *rm_file_open_read(const char *path, rm_error *err)
{
	/* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer for ever */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		rm_error_set(err, RM_IO, path, 0, 0, "cannot open: %s", strerror(errno));
		return NULL;
	}
	struct stat st;
	if (fstat(fd, &st) != 0) {
		rm_error_set(err, RM_IO, path, 0, 0, "cannot open: %s", strerror(errno));
		close(fd);
		return NULL;
	}
	if (!S_ISREG(st.st_mode)) {
		refuse_kind(path, st.st_mode, err);
		close(fd);
		return NULL;
	}
	int flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
		rm_error_set(err, RM_IO, path, 0, 0, "cannot open: %s", strerror(errno));
		close(fd);
		return NULL;
	}
	FILE *f = fdopen(fd, "rb");
	if (!f) {
		rm_error_set(err, RM_IO, path, 0, 0, "cannot open: %s", strerror(errno));
		close(fd);
	}
	return f;
}

bool rm_file_check_writable(const char *path, rm_error *err)
{
	struct stat st;
	if (path && *path && (fd_path(path) >= 0 || (stat(path, &st) == 0 && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)))))
		return true;
	rm_file_writer *w = rm_file_writer_open(path, err);
	if (!w)
		return false;
	rm_file_writer_abort(w);
	return true;
}

bool rm_file_check_regular(const char *path, rm_error *err)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return errno == ENOENT ? true
				       : (rm_error_set(err, RM_IO, path, 0, 0, "cannot open: %s", strerror(errno)), false);
	return S_ISREG(st.st_mode) || refuse_kind(path, st.st_mode, err);
}
