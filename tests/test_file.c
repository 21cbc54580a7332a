/*
 * Unit tests of remora/file.h (common/file.c): the output writer onto new paths, regular files,
 * symbolic links, FIFOs and devices, its failures (a full device, an injected ENOSPC), concurrent
 * writers, and the reader that refuses a FIFO instead of hanging on it.
 */
#define _DEFAULT_SOURCE /* mknod, makedev */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "remora/common.h"
#include "remora/file.h"

static char dir[64];

static void make_dir(void)
{
	snprintf(dir, sizeof(dir), "/tmp/remora-test-file-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void remove_dir(void)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	char p[600];
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
			unlink(p);
		}
	closedir(d);
	rmdir(dir);
}

TestSuite(file, .init = make_dir, .fini = remove_dir);

static char *in_dir(const char *name)
{
	static char bufs[4][600];
	static int k;
	char *b = bufs[k++ % 4];
	snprintf(b, 600, "%s/%s", dir, name);
	return b;
}

/* Number of entries in the test folder (besides . and ..). */
static int entries(void)
{
	DIR *d = opendir(dir);
	cr_assert_not_null(d);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

static char *slurp(const char *path, size_t *len)
{
	char *data = NULL;
	rm_error err;
	cr_assert(rm_read_file(path, &data, len, &err), "%s", err.msg);
	return data;
}

static void put_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	chmod(path, mode);
}

static bool write_text(const char *path, const char *text, rm_error *err)
{
	rm_file_writer *w = rm_file_writer_open(path, err);
	if (!w)
		return false;
	fputs(text, rm_file_writer_stream(w));
	return rm_file_writer_commit(w, err);
}

Test(file, new_path_is_written_whole_with_no_temporary_left)
{
	rm_error err;
	rm_error_clear(&err);
	const char *p = in_dir("out.json");
	rm_file_writer *w = rm_file_writer_open(p, &err);
	cr_assert_not_null(w, "%s", err.msg);
	cr_assert(rm_file_writer_is_atomic(w));
	/* nothing is visible at the target before the commit */
	fputs("{\"a\": 1}\n", rm_file_writer_stream(w));
	struct stat st;
	cr_assert_neq(stat(p, &st), 0);
	cr_assert(rm_file_writer_commit(w, &err), "%s", err.msg);
	size_t len;
	char *text = slurp(p, &len);
	cr_assert_str_eq(text, "{\"a\": 1}\n");
	free(text);
	cr_assert_eq(entries(), 1);
	/* a new file gets 0666 less the umask, as fopen would give it */
	mode_t mask = umask(022);
	umask(mask);
	cr_assert_eq(stat(p, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0666 & ~mask);
}

Test(file, symlink_target_is_replaced_and_the_link_kept)
{
	rm_error err;
	const char *target = in_dir("real.json"), *link = in_dir("link.json");
	put_file(target, "old old old\n", 0640);
	cr_assert_eq(symlink("real.json", link), 0); /* relative: resolved from the link's folder */
	struct stat before;
	cr_assert_eq(stat(target, &before), 0);
	cr_assert(write_text(link, "new\n", &err), "%s", err.msg);
	struct stat st;
	cr_assert_eq(lstat(link, &st), 0);
	cr_assert(S_ISLNK(st.st_mode), "the link was replaced by a file");
	char buf[64];
	ssize_t n = readlink(link, buf, sizeof(buf) - 1);
	cr_assert_eq(n, 9);
	buf[n] = '\0';
	cr_assert_str_eq(buf, "real.json");
	size_t len;
	char *text = slurp(target, &len);
	cr_assert_str_eq(text, "new\n");
	free(text);
	cr_assert_eq(stat(target, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0640, "the mode of the replaced file is kept");
	cr_assert_neq(st.st_ino, before.st_ino, "replaced by rename, not rewritten in place");
	cr_assert_eq(entries(), 2);
}

Test(file, dangling_symlink_creates_its_target)
{
	rm_error err;
	cr_assert_eq(symlink(in_dir("made.json"), in_dir("dangling")), 0);
	cr_assert(write_text(in_dir("dangling"), "x\n", &err), "%s", err.msg);
	struct stat st;
	cr_assert_eq(lstat(in_dir("dangling"), &st), 0);
	cr_assert(S_ISLNK(st.st_mode));
	cr_assert_eq(lstat(in_dir("made.json"), &st), 0);
	cr_assert(S_ISREG(st.st_mode));
	cr_assert_eq(entries(), 2);
}

typedef struct reader_arg {
	const char *path;
	char buf[1 << 16];
	size_t len;
} reader_arg;

static void *fifo_reader(void *p)
{
	reader_arg *a = p;
	int fd = open(a->path, O_RDONLY);
	if (fd < 0)
		return NULL;
	ssize_t n;
	while ((n = read(fd, a->buf + a->len, sizeof(a->buf) - 1 - a->len)) > 0)
		a->len += (size_t)n;
	close(fd);
	return NULL;
}

Test(file, fifo_is_written_through, .timeout = 10)
{
	const char *p = in_dir("fifo");
	cr_assert_eq(mkfifo(p, 0600), 0);
	static reader_arg a;
	memset(&a, 0, sizeof(a));
	a.path = p;
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, fifo_reader, &a), 0);
	rm_error err;
	rm_file_writer *w = rm_file_writer_open(p, &err); /* waits for the reader, as FIFOs do */
	cr_assert_not_null(w, "%s", err.msg);
	cr_assert_not(rm_file_writer_is_atomic(w));
	for (int i = 0; i < 1000; i++)
		fprintf(rm_file_writer_stream(w), "line %04d\n", i);
	cr_assert(rm_file_writer_commit(w, &err), "%s", err.msg);
	pthread_join(t, NULL);
	cr_assert_eq(a.len, 10000u, "the reader got every byte: %zu", a.len);
	cr_assert(strncmp(a.buf + 9990, "line 0999\n", 10) == 0);
	struct stat st;
	cr_assert_eq(lstat(p, &st), 0);
	cr_assert(S_ISFIFO(st.st_mode), "the FIFO was replaced");
	cr_assert_eq(entries(), 1);
}

/*
 * A device node like /dev/full (char 1:7) or /dev/null (1:3) in the test folder where the test
 * may make one (root), else a symlink to the real one. Never the real path itself: a writer that
 * renamed over its target would replace the machine's device with a regular file.
 */
static void make_device(const char *path, unsigned minor, const char *real)
{
	if (mknod(path, S_IFCHR | 0666, makedev(1, minor)) != 0)
		cr_assert_eq(symlink(real, path), 0);
}

Test(file, full_device_fails_with_the_path_and_enospc)
{
	rm_error err;
	rm_error_clear(&err);
	const char *full = in_dir("full");
	make_device(full, 7, "/dev/full");
	struct stat before, st;
	cr_assert_eq(lstat(full, &before), 0);
	rm_file_writer *w = rm_file_writer_open(full, &err);
	cr_assert_not_null(w, "%s", err.msg);
	cr_assert_not(rm_file_writer_is_atomic(w));
	for (int i = 0; i < 100; i++)
		fputs("0123456789abcdef", rm_file_writer_stream(w));
	cr_assert_not(rm_file_writer_commit(w, &err));
	cr_assert_eq(err.status, RM_IO);
	cr_assert_str_eq(err.file, full);
	cr_assert(strstr(err.msg, strerror(ENOSPC)), "%s", err.msg);
	/* the device (or link) is still there as it was */
	cr_assert_eq(lstat(full, &st), 0);
	cr_assert_eq(st.st_mode, before.st_mode);
	cr_assert_eq(stat(full, &st), 0);
	cr_assert(S_ISCHR(st.st_mode));
	/* through a link too; the link stays */
	cr_assert_eq(symlink("full", in_dir("full.link")), 0);
	cr_assert_not(write_text(in_dir("full.link"), "x", &err));
	cr_assert(strstr(err.msg, strerror(ENOSPC)), "%s", err.msg);
	cr_assert_eq(lstat(in_dir("full.link"), &st), 0);
	cr_assert(S_ISLNK(st.st_mode));
	cr_assert_eq(entries(), 2);
}

Test(file, failed_write_keeps_the_old_file_and_leaves_no_temporary)
{
	const char *p = in_dir("keep.json");
	put_file(p, "the old content\n", 0644);
	rm_error err;
	rm_error_clear(&err);
	rm_file_writer *w = rm_file_writer_open(p, &err);
	cr_assert_not_null(w, "%s", err.msg);
	cr_assert(rm_file_writer_is_atomic(w));
	rm_file_writer_inject_fault(w, 5000, ENOSPC); /* a disk that fills after 5000 bytes */
	for (int i = 0; i < 1000; i++)
		fputs("0123456789", rm_file_writer_stream(w));
	cr_assert_eq(entries(), 2, "the temporary file is beside the target while writing");
	cr_assert_not(rm_file_writer_commit(w, &err));
	cr_assert_str_eq(err.file, p);
	cr_assert(strstr(err.msg, "write failed: ") && strstr(err.msg, strerror(ENOSPC)), "%s", err.msg);
	size_t len;
	char *text = slurp(p, &len);
	cr_assert_str_eq(text, "the old content\n");
	free(text);
	cr_assert_eq(entries(), 1, "no temporary file left");
}

static bool fail_midway(FILE *out, void *user, rm_error *err)
{
	(void)user;
	fputs("partial", out);
	rm_error_set(err, RM_INVALID, NULL, 0, 0, "the producer failed");
	return false;
}

Test(file, producer_failure_keeps_the_old_file)
{
	const char *p = in_dir("keep.txt");
	put_file(p, "old\n", 0644);
	rm_error err;
	cr_assert_not(rm_file_write(p, fail_midway, NULL, &err));
	cr_assert_str_eq(err.msg, "the producer failed");
	cr_assert_str_eq(err.file, p);
	size_t len;
	char *text = slurp(p, &len);
	cr_assert_str_eq(text, "old\n");
	free(text);
	cr_assert_eq(entries(), 1);
	/* abort before any commit: same */
	rm_file_writer *w = rm_file_writer_open(p, &err);
	fputs("never", rm_file_writer_stream(w));
	rm_file_writer_abort(w);
	text = slurp(p, &len);
	cr_assert_str_eq(text, "old\n");
	free(text);
	cr_assert_eq(entries(), 1);
}

Test(file, directory_and_missing_folder_are_refused_with_the_path)
{
	rm_error err;
	cr_assert_null(rm_file_writer_open(dir, &err));
	cr_assert_str_eq(err.file, dir);
	cr_assert(strstr(err.msg, "a directory"), "%s", err.msg);
	cr_assert_null(rm_file_writer_open(in_dir("no/such/out.json"), &err));
	cr_assert(strstr(err.msg, strerror(ENOENT)), "%s", err.msg);
	cr_assert_eq(entries(), 0);
}

/* The check before the work: an existing file stays byte for byte, nothing is left beside it; a
 * new path in an existing folder passes and is not created; a directory and a missing folder
 * fail as the writer would; a FIFO passes without being opened (no reader: opening would wait). */
Test(file, writable_check_leaves_the_path_untouched, .timeout = 10)
{
	rm_error err;
	char *old = in_dir("old.json");
	put_file(old, "keep", 0640);
	cr_assert(rm_file_check_writable(old, &err), "%s", err.msg);
	size_t n = 0;
	char *text = slurp(old, &n);
	cr_assert_str_eq(text, "keep");
	free(text);
	cr_assert_eq(entries(), 1);
	cr_assert(rm_file_check_writable(in_dir("new.json"), &err), "%s", err.msg);
	cr_assert_eq(entries(), 1, "the new path is not created");
	cr_assert_not(rm_file_check_writable(dir, &err));
	cr_assert(strstr(err.msg, "a directory"), "%s", err.msg);
	cr_assert_not(rm_file_check_writable(in_dir("no/such/out.json"), &err));
	cr_assert(strstr(err.msg, strerror(ENOENT)), "%s", err.msg);
	char *fifo = in_dir("pipe");
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	cr_assert(rm_file_check_writable(fifo, &err), "%s", err.msg);
	cr_assert_not(rm_file_check_writable("", &err));
	cr_assert_eq(entries(), 2);
}

/* Two processes writing one path at once, 40 times each: every result is one whole file. */
Test(file, concurrent_writers_end_with_one_complete_file, .timeout = 60)
{
	const char *p = in_dir("shared.dat");
	enum { SIZE = 256 * 1024, ROUNDS = 40 };
	pid_t kids[2];
	for (int k = 0; k < 2; k++) {
		kids[k] = fork();
		cr_assert_geq(kids[k], 0);
		if (kids[k] == 0) {
			char *buf = malloc(SIZE);
			memset(buf, k ? 'b' : 'a', SIZE);
			for (int r = 0; r < ROUNDS; r++) {
				rm_error err;
				rm_file_writer *w = rm_file_writer_open(p, &err);
				if (!w)
					_exit(1);
				/* in pieces, so the two writers interleave */
				for (int q = 0; q < 16; q++)
					fwrite(buf + q * (SIZE / 16), 1, SIZE / 16, rm_file_writer_stream(w));
				if (!rm_file_writer_commit(w, &err))
					_exit(2);
			}
			free(buf);
			_exit(0);
		}
	}
	for (int k = 0; k < 2; k++) {
		int st;
		cr_assert_eq(waitpid(kids[k], &st, 0), kids[k]);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "writer %d failed (%d)", k, WEXITSTATUS(st));
	}
	size_t len;
	char *text = slurp(p, &len);
	cr_assert_eq(len, (size_t)SIZE);
	for (size_t i = 1; i < len; i++)
		cr_assert_eq(text[i], text[0], "bytes of two writers mixed at %zu", i);
	free(text);
	cr_assert_eq(entries(), 1, "temporary files left");
}

Test(file, fd_paths_are_written_through)
{
	rm_error err;
	rm_file_writer *w = rm_file_writer_open("/dev/stderr", &err);
	cr_assert_not_null(w, "%s", err.msg);
	cr_assert_not(rm_file_writer_is_atomic(w));
	rm_file_writer_abort(w);
	make_device(in_dir("null"), 3, "/dev/null");
	w = rm_file_writer_open(in_dir("null"), &err);
	cr_assert_not_null(w, "%s", err.msg);
	cr_assert_not(rm_file_writer_is_atomic(w));
	fputs("discarded", rm_file_writer_stream(w));
	cr_assert(rm_file_writer_commit(w, &err), "%s", err.msg);
}

/* ---- reading -------------------------------------------------------------------------------- */

/* Without a writer, a blocking open of a FIFO never returns; the reader refuses it at once. */
Test(file, reading_a_fifo_is_refused_not_waited_on, .timeout = 5)
{
	const char *p = in_dir("in.fifo");
	cr_assert_eq(mkfifo(p, 0600), 0);
	char *data = NULL;
	size_t len;
	rm_error err;
	cr_assert_not(rm_read_file(p, &data, &len, &err));
	cr_assert_eq(err.status, RM_IO);
	cr_assert_str_eq(err.file, p);
	cr_assert_str_eq(err.msg, "not a regular file (a FIFO)");
	cr_assert_null(rm_file_open_read(p, &err));
	cr_assert_not(rm_file_check_regular(p, &err));
	cr_assert_str_eq(err.msg, "not a regular file (a FIFO)");
}

Test(file, reading_devices_and_folders_is_refused)
{
	char *data = NULL;
	size_t len;
	rm_error err;
	cr_assert_not(rm_read_file("/dev/zero", &data, &len, &err));
	cr_assert_str_eq(err.msg, "not a regular file (a character device)");
	cr_assert_not(rm_read_file(dir, &data, &len, &err));
	cr_assert_str_eq(err.msg, "is a directory, not a file");
	cr_assert_not(rm_read_file(in_dir("missing"), &data, &len, &err));
	cr_assert(strstr(err.msg, strerror(ENOENT)), "%s", err.msg);
	cr_assert(rm_file_check_regular(in_dir("missing"), &err), "a new database path is fine");
	/* a regular file reads back as written */
	put_file(in_dir("r.txt"), "abc", 0644);
	char *text = slurp(in_dir("r.txt"), &len);
	cr_assert_eq(len, 3u);
	cr_assert_str_eq(text, "abc");
	free(text);
	cr_assert(rm_file_check_regular(in_dir("r.txt"), &err));
}
