/*
 * How a sweep is split across processes (cli.h, cli_sweep): --shard K/N for array
 * jobs under a batch scheduler, or the ranks of `mpirun -np N`. The library knows nothing of MPI
 * (rm_search_options' shard and resume_from); this file is the only one that uses it, through
 * the table of remora-mpi.so (cli/mpi_ops.h, cli/mpi_module.c).
 *
 * Under mpirun each rank k sweeps shard k into its own database DB.rankK (no two processes write
 * one SQLite file, which network filesystems do not lock reliably), skipping the rows DB holds
 * already. After the sweep rank 0 merges every rank file into DB (rm_search_merge: keyed rows,
 * idempotent) and removes them; a job killed part-way leaves rank files that the next run merges
 * first, so it redoes only what no rank committed. Without --db the files live in a folder made
 * by rank 0 in the current directory and removed at the end. The folder of DB must be shared by
 * every rank's machine (the usual home or scratch filesystem of a cluster). The module is loaded
 * only under mpirun: `remora` links no MPI library.
 */
#include <dirent.h>
#include <fcntl.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "cli.h"
#include "gpudist/env.h"
#include "mpi_ops.h"
#include "remora/search.h"

/*
 * Whether a launcher started this process as one of several (or as the one rank of
 * `mpirun -np 1`): the launcher's variables as the GPU executables read them (gpudist/env.h).
 * *size: the processes it says it started.
 */
static const char *launcher_name(const char *source)
{
	if (strcmp(source, "slurm") == 0)
		return "srun";
	if (strcmp(source, "pmix") == 0)
		return "a PMIx launcher";
	if (strcmp(source, "pmi") == 0)
		return "a PMI launcher (Hydra)";
	return "mpirun";
}

static bool launched_by_mpirun(int *size, const char **source)
{
	rm_dist_env e = rm_dist_env_detect(NULL);
	*size = e.size;
	*source = e.source;
	return strcmp(e.source, "none") != 0;
}

bool cli_parse_shard(const char *cmd, const char *text, int *k, int *n)
{
	char *end = NULL;
	/* digits only on both sides: strtol alone would take " 1/2", "+1/2" and "1/ 2" */
	long a = text[0] >= '0' && text[0] <= '9' ? strtol(text, &end, 10) : 0, b = 0;
	bool ok = end && end != text && *end == '/';
	if (ok) {
		const char *q = end + 1;
		b = q[0] >= '0' && q[0] <= '9' ? strtol(q, &end, 10) : 0;
		ok = end != q && *end == '\0' && b >= 1 && b <= CLI_MAX_SHARDS && a >= 1 && a <= b;
	}
	if (!ok) {
		cli_usage_error(cmd, "--shard '%s': K/N with 1 <= K <= N <= %d (the K-th of N shards)", text,
				CLI_MAX_SHARDS);
		return false;
	}
	*k = (int)a - 1;
	*n = (int)b;
	return true;
}

/* Removes a database file and SQLite's companions beside it. */
static void remove_db(const char *path)
{
	char p[CLI_SWEEP_PATH + 8];
	unlink(path);
	snprintf(p, sizeof(p), "%s-wal", path);
	unlink(p);
	snprintf(p, sizeof(p), "%s-shm", path);
	unlink(p);
	snprintf(p, sizeof(p), "%s-journal", path);
	unlink(p);
}

/*
 * Whether the rank file at path holds nothing: a rank killed while it opened its file (before
 * its schema was committed) leaves an empty SQLite file, or one whose first transaction never
 * committed, with no table and no application_id. Opening it read-write rolls back a hot journal
 * and recovers a write-ahead log, so only committed content counts. False when it cannot be read
 * (the merge then says why).
 */
static bool rank_file_holds_nothing(const char *path)
{
	sqlite3 *db = NULL;
	bool empty = false;
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) == SQLITE_OK) {
		sqlite3_busy_timeout(db, 10000);
		sqlite3_stmt *q = NULL;
		if (sqlite3_prepare_v2(db,
				       "SELECT (SELECT count(*) FROM sqlite_master), (SELECT application_id FROM "
				       "pragma_application_id)",
				       -1, &q, NULL) == SQLITE_OK &&
		    sqlite3_step(q) == SQLITE_ROW)
			empty = sqlite3_column_int64(q, 0) == 0 && sqlite3_column_int64(q, 1) == 0;
		sqlite3_finalize(q);
	}
	sqlite3_close(db);
	return empty;
}

/*
 * Merges the rank files of final (final.rank0, final.rank1, ..., of any earlier rank count) into
 * final and removes them. Rank files of a killed run hold what it committed.
 */
static rm_status merge_rank_files(const char *final, int *merged, rm_error *err)
{
	*merged = 0;
	char dir[CLI_SWEEP_PATH], base[CLI_SWEEP_PATH];
	const char *slash = strrchr(final, '/');
	if (slash) {
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - final), final);
		if (!dir[0])
			snprintf(dir, sizeof(dir), "/");
		snprintf(base, sizeof(base), "%s", slash + 1);
	} else {
		snprintf(dir, sizeof(dir), ".");
		snprintf(base, sizeof(base), "%s", final);
	}
	DIR *d = opendir(dir);
	if (!d)
		return rm_error_set(err, RM_IO, dir, 0, 0, "cannot list the database's folder: %s", strerror(errno));
	size_t nb = strlen(base);
	int cap = 16, n = 0;
	char(*files)[CLI_SWEEP_PATH] = rm_xcalloc((size_t)cap, CLI_SWEEP_PATH);
	for (struct dirent *e; (e = readdir(d)) != NULL;) {
		const char *name = e->d_name;
		if (strncmp(name, base, nb) != 0 || strncmp(name + nb, ".rank", 5) != 0)
			continue;
		const char *digits = name + nb + 5;
		if (!*digits || strspn(digits, "0123456789") != strlen(digits))
			continue;
		char path[CLI_SWEEP_PATH];
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		if (rank_file_holds_nothing(path)) {
			/* nothing committed: nothing to merge, and the merge would refuse it */
			remove_db(path);
			continue;
		}
		if (n == cap) {
			cap *= 2;
			files = rm_xrealloc(files, (size_t)cap * CLI_SWEEP_PATH);
		}
		snprintf(files[n++], CLI_SWEEP_PATH, "%s/%s", dir, name);
	}
	closedir(d);
	rm_status st = RM_OK;
	if (n > 0) {
		/* in name order, so the merge is the same on every file system */
		qsort(files, (size_t)n, CLI_SWEEP_PATH, (int (*)(const void *, const void *))strcmp);
		const char **in = rm_new(const char *, (size_t)n);
		for (int i = 0; i < n; i++)
			in[i] = files[i];
		rm_search_merge_stats ms;
		st = rm_search_merge(final, in, n, &ms, err);
		if (st == RM_OK) {
			for (int i = 0; i < n; i++)
				remove_db(files[i]);
			if (ms.conflicts > 0)
				rm_log_warn("%s: %lld rows of the rank files differ from the rows it holds; its rows are kept",
					    final, (long long)ms.conflicts);
		}
		free(in);
		*merged = n;
	}
	free(files);
	return st;
}

/* Rank 0's status to every rank; the others fail with a short message (rank 0 said why). */
static rm_status share_status(const cli_sweep *w, rm_status st, rm_error *err)
{
	int v = (int)st;
	w->ops->bcast(&v, (int)sizeof(v));
	if (w->rank != 0 && v != RM_OK)
		return rm_error_set(err, (rm_status)v, NULL, 0, 0, "rank 0 failed (its message says why)");
	return (rm_status)v;
}

/*
 * Loads remora-mpi.so (cli/mpi_ops.h) from this executable's directory, or from ../lib/remora
 * beside it once installed; NULL with a message in why when there is none or it does not load.
 * RTLD_GLOBAL: Open MPI's own plugins, loaded by MPI_Init, resolve its symbols through it.
 */
static const cli_mpi_ops *load_module(void **handle, char *why, size_t size)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0) {
		snprintf(why, size, "cannot find this executable: %s", strerror(errno));
		return NULL;
	}
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	if (slash)
		*slash = '\0';
	static const char *const where[] = {"/" CLI_MPI_MODULE, "/../lib/remora/" CLI_MPI_MODULE};
	why[0] = '\0';
	for (size_t i = 0; i < RM_ARRAY_SIZE(where); i++) {
		char path[PATH_MAX + 64];
		snprintf(path, sizeof(path), "%s%s", self, where[i]);
		if (access(path, R_OK) != 0) {
			if (!why[0])
				snprintf(why, size, "%s: %s", path, strerror(errno));
			continue;
		}
		*handle = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
		if (!*handle) {
			snprintf(why, size, "%s", dlerror());
			return NULL;
		}
		const cli_mpi_ops *ops = dlsym(*handle, CLI_MPI_SYMBOL);
		if (!ops || ops->abi != CLI_MPI_ABI) {
			snprintf(why, size, "%s: %s", path, ops ? "built by another remora" : "not remora's MPI module");
			dlclose(*handle);
			*handle = NULL;
			return NULL;
		}
		return ops;
	}
	return NULL;
}

/*
 * One mpirun sweep per --db at a time: rank 0 holds DB.lock (flock) from before it merges a
 * killed run's rank files until the end, since a second run would merge and remove the first
 * one's live rank files. The file is removed at the end; a lock taken on a file another run
 * removed meanwhile is retried (the path must still name the locked file). Returns the open
 * descriptor, -2 when another run holds the lock, -1 on another error (why says it). flock is
 * advisory and network file systems may not honour it: there, keep to one run per --db.
 */
static int lock_db(const char *db, char *why, size_t n)
{
	char path[CLI_SWEEP_PATH + 8];
	snprintf(path, sizeof(path), "%s.lock", db);
	for (int tries = 0; tries < 16; tries++) {
		int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0) {
			snprintf(why, n, "cannot open %s: %s", path, strerror(errno));
			return -1;
		}
		if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
			int e = errno;
			close(fd);
			if (e == EWOULDBLOCK)
				return -2;
			snprintf(why, n, "cannot lock %s: %s", path, strerror(e));
			return -1;
		}
		struct stat held, now;
		if (fstat(fd, &held) == 0 && stat(path, &now) == 0 && held.st_dev == now.st_dev && held.st_ino == now.st_ino)
			return fd;
		close(fd); /* removed by the run that held it: take the new one */
	}
	snprintf(why, n, "cannot lock %s: it keeps being replaced", path);
	return -1;
}

static void unlock_db(cli_sweep *w)
{
	if (!w->locked)
		return;
	char path[CLI_SWEEP_PATH + 8];
	snprintf(path, sizeof(path), "%s.lock", w->db);
	unlink(path); /* while still held: a run waiting on it retries on the next file */
	close(w->lock_fd);
	w->locked = false;
}

/*
 * Folders .remora-sweep-* in the current directory other than ours (mine): a run without --db
 * that was killed cannot remove its folder, and nothing resumes from it (a resumable sweep names
 * its --db). Rank 0 says so once per run; it removes nothing, since another sweep may be running
 * in the same directory.
 */
static void warn_stale_folders(const char *mine)
{
	DIR *d = opendir(".");
	if (!d)
		return;
	int n = 0;
	char first[CLI_SWEEP_PATH] = "";
	for (struct dirent *e; (e = readdir(d));) {
		if (strncmp(e->d_name, ".remora-sweep-", 14) != 0 || strcmp(e->d_name, mine) == 0)
			continue;
		if (n++ == 0)
			snprintf(first, sizeof(first), "%s", e->d_name);
	}
	closedir(d);
	if (n > 0)
		rm_log_warn("%d folder%s .remora-sweep-* (%s%s) of earlier runs without --db: a killed run leaves "
			    "its ranks' rows there and nothing resumes from them; remove %s when no sweep is running "
			    "here, and give --db to make a sweep resumable",
			    n, n == 1 ? "" : "s", first, n > 1 ? ", ..." : "", n == 1 ? "it" : "them");
}

int cli_sweep_begin(const char *cmd, cli_sweep *w, const char *db, int shard, int shards)
{
	memset(w, 0, sizeof(*w));
	w->shard = shard;
	w->shards = shards;
	w->final_db = db;
	if (db)
		snprintf(w->db, sizeof(w->db), "%s", db);
	int size = 0;
	const char *source = "none";
	if (!launched_by_mpirun(&size, &source))
		return CLI_EXIT_OK;
	char why[PATH_MAX + 128];
	w->ops = load_module(&w->module, why, sizeof(why));
	if (!w->ops) {
		if (size == 1)
			return CLI_EXIT_OK; /* one rank: a plain run */
		fprintf(stderr,
			"remora: error: %s: started by %s as %d processes, but MPI cannot be used (%s): every rank "
			"would run the whole sweep; build with Open MPI (libopenmpi-dev, meson -Dmpi=enabled) or use "
			"--shard K/N and remora merge\n",
			cmd, launcher_name(source), size, why);
		return CLI_EXIT_USAGE;
	}
	if (!w->ops->init(&w->rank, &w->size)) {
		fprintf(stderr, "remora: error: MPI_Init failed under %s\n", launcher_name(source));
		return CLI_EXIT_FAIL;
	}
	w->mpi_init = true;
	if (w->size != size) {
		/* e.g. srun without an MPI plugin: every process is its own MPI world of one */
		fprintf(stderr,
			"remora: error: %s: %s started %d processes but MPI_COMM_WORLD has %d: every rank would "
			"run the whole sweep (for srun, --mpi=pmix; or use --shard K/N and remora merge)\n",
			cmd, launcher_name(source), size, w->size);
		return CLI_EXIT_USAGE;
	}
	if (w->size < 2)
		return CLI_EXIT_OK; /* one rank: a plain run */
	if (shards > 1)
		return cli_usage_error(cmd, "--shard splits a sweep without MPI; under mpirun each rank takes its shard");
	w->mpi = true;
	w->shard = w->rank;
	w->shards = w->size;
	if (w->rank != 0)
		rm_log_set_level(RM_LOG_ERROR); /* rank 0 gives the warnings once */
	rm_error err;
	rm_error_clear(&err);
	rm_status st = RM_OK;
	char tmp[CLI_SWEEP_PATH] = "";
	if (!db) {
		/* per-rank files in a folder of the current directory (shared by the ranks' machines) */
		if (w->rank == 0) {
			snprintf(tmp, sizeof(tmp), ".remora-sweep-XXXXXX");
			if (!mkdtemp(tmp))
				st = rm_error_set(&err, RM_IO, ".", 0, 0, "cannot make a folder for the ranks' databases: %s",
						  strerror(errno));
		}
		if (w->rank == 0 && st == RM_OK)
			warn_stale_folders(tmp);
		w->ops->bcast(tmp, (int)sizeof(tmp));
		snprintf(w->tmpdir, sizeof(w->tmpdir), "%s", tmp);
		snprintf(w->db, sizeof(w->db), "%s/sweep.db", tmp);
	}
	if (st == RM_OK && w->rank == 0 && db) {
		char lock_why[CLI_SWEEP_PATH + 128];
		w->lock_fd = lock_db(w->db, lock_why, sizeof(lock_why));
		w->locked = w->lock_fd >= 0;
		if (w->lock_fd == -2)
			st = rm_error_set(&err, RM_IO, w->db, 0, 0,
					  "another mpirun sweep is using this database (%s.lock is held): wait for it to end "
					  "or give another --db",
					  w->db);
		else if (w->lock_fd == -1)
			st = rm_error_set(&err, RM_IO, w->db, 0, 0, "%s", lock_why);
	}
	/* what a killed run's ranks committed goes into the one database before anyone reads it */
	if (st == RM_OK && w->rank == 0) {
		int merged = 0;
		st = merge_rank_files(w->db, &merged, &err);
		if (st == RM_OK && merged > 0)
			rm_log_warn("%s: merged %d rank files (%s.rank*) left by an earlier run", w->db, merged, w->db);
	}
	if (share_status(w, st, &err) != RM_OK)
		return w->rank == 0 ? cli_fail(&err) : CLI_EXIT_FAIL;
	snprintf(w->rank_db, sizeof(w->rank_db), "%s.rank%d", w->db, w->rank);
	return CLI_EXIT_OK;
}

void cli_sweep_options(const cli_sweep *w, rm_search_options *opt)
{
	opt->shard_index = w->shards > 1 ? w->shard : 0;
	opt->shard_count = w->shards > 1 ? w->shards : 0;
	if (w->mpi) {
		opt->db_path = w->rank_db;
		opt->resume_from = w->db;
	} else {
		opt->db_path = w->final_db;
	}
}

bool cli_sweep_is_root(const cli_sweep *w)
{
	return !w->mpi || w->rank == 0;
}

rm_status cli_sweep_gather(cli_sweep *w, rm_search_progress *prog, rm_status st, rm_error *err)
{
	if (!w->mpi)
		return st;
	/* every rank's status and counts (this is also the barrier: every rank file is closed) */
	int worst = (int)st;
	w->ops->max_int(&worst, 1);
	long long sum[3] = {prog ? prog->total : 0, prog ? prog->done : 0, prog ? prog->skipped : 0};
	w->ops->sum_ll(sum, 3);
	if (prog) {
		prog->total = sum[0];
		prog->done = sum[1];
		prog->skipped = sum[2];
	}
	/* rank 0 keeps what every rank committed, even when one failed */
	rm_status ms = RM_OK;
	rm_error merr;
	rm_error_clear(&merr);
	if (w->rank == 0) {
		int merged = 0;
		ms = merge_rank_files(w->db, &merged, &merr);
	}
	ms = share_status(w, ms, &merr);
	if (st != RM_OK)
		return st;
	if (worst != RM_OK)
		return rm_error_set(err, (rm_status)worst, NULL, 0, 0, "another rank failed (its message says why)");
	if (ms != RM_OK) {
		*err = merr;
		return ms;
	}
	return RM_OK;
}

double cli_sweep_reduce(const cli_sweep *w, double v, bool max)
{
	if (w->mpi)
		w->ops->reduce_double(&v, 1, max);
	return v;
}

rm_status cli_sweep_gather_fn(void *user, rm_status st, rm_error *err)
{
	return cli_sweep_gather(user, NULL, st, err);
}

void cli_sweep_end(cli_sweep *w)
{
	if (w->mpi_init) {
		if (w->mpi)
			w->ops->barrier();
		if (w->tmpdir[0] && w->rank == 0) {
			remove_db(w->db);
			rmdir(w->tmpdir);
		}
		unlock_db(w);
		w->ops->finalize();
	}
	/* the module stays loaded: Open MPI's atexit handlers may still run in it */
	memset(w, 0, sizeof(*w));
}
