/*
 * How a sweep is split across processes (cli.h "Sweeps across processes"): --shard K/N for array
 * jobs under a batch scheduler, or the ranks of `mpirun -np N`. The library knows nothing of MPI
 * (rm_search_options' shard and resume_from); this file is the only one that calls it.
 *
 * Under mpirun each rank k sweeps shard k into its own database DB.rankK (no two processes write
 * one SQLite file, which network filesystems do not lock reliably), skipping the rows DB holds
 * already. After the sweep rank 0 merges every rank file into DB (rm_search_merge: keyed rows,
 * idempotent) and removes them; a job killed part-way leaves rank files that the next run merges
 * first, so it redoes only what no rank committed. Without --db the files live in a folder made
 * by rank 0 in the current directory and removed at the end. The folder of DB must be shared by
 * every rank's machine (the usual home or scratch filesystem of a cluster).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "remora/search.h"

#if REMORA_HAVE_MPI
#include <mpi.h>
#endif

/* Whether this process was started by mpirun (Open MPI's or a PMIx launcher's variables). */
static bool launched_by_mpirun(int *size)
{
	const char *n = getenv("OMPI_COMM_WORLD_SIZE");
	if (!n)
		n = getenv("PMIX_SIZE");
	*size = n ? atoi(n) : 0;
	return n || getenv("PMIX_RANK") || getenv("OMPI_COMM_WORLD_RANK");
}

bool cli_parse_shard(const char *cmd, const char *text, int *k, int *n)
{
	char *end = NULL;
	long a = strtol(text, &end, 10), b = 0;
	bool ok = end != text && *end == '/';
	if (ok) {
		const char *q = end + 1;
		b = strtol(q, &end, 10);
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

#if REMORA_HAVE_MPI
/*
 * Waits for every rank without spinning: Open MPI's blocking collectives poll at full speed, so a
 * rank that finished its shard would take a core from the ranks still simulating when there are
 * more ranks than idle cores (--oversubscribe). A non-blocking barrier tested every millisecond
 * costs nothing measurable; the collective that follows then completes at once.
 */
static void idle_barrier(void)
{
	MPI_Request rq;
	if (MPI_Ibarrier(MPI_COMM_WORLD, &rq) != MPI_SUCCESS)
		return;
	int done = 0;
	struct timespec ms = {0, 1000000};
	while (MPI_Test(&rq, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done)
		nanosleep(&ms, NULL);
}

/* Rank 0's status to every rank; the others fail with a short message (rank 0 said why). */
static rm_status share_status(const cli_sweep *w, rm_status st, rm_error *err)
{
	idle_barrier();
	int v = (int)st;
	MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
	if (w->rank != 0 && v != RM_OK)
		return rm_error_set(err, (rm_status)v, NULL, 0, 0, "rank 0 failed (its message says why)");
	return (rm_status)v;
}
#endif

int cli_sweep_begin(const char *cmd, cli_sweep *w, const char *db, int shard, int shards)
{
	memset(w, 0, sizeof(*w));
	w->shard = shard;
	w->shards = shards;
	w->final_db = db;
	if (db)
		snprintf(w->db, sizeof(w->db), "%s", db);
	int size = 0;
	if (!launched_by_mpirun(&size))
		return CLI_EXIT_OK;
#if REMORA_HAVE_MPI
	int provided = 0;
	if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
		fprintf(stderr, "remora: error: MPI_Init failed under mpirun\n");
		return CLI_EXIT_FAIL;
	}
	w->mpi_init = true;
	MPI_Comm_rank(MPI_COMM_WORLD, &w->rank);
	MPI_Comm_size(MPI_COMM_WORLD, &w->size);
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
		MPI_Bcast(tmp, (int)sizeof(tmp), MPI_CHAR, 0, MPI_COMM_WORLD);
		snprintf(w->tmpdir, sizeof(w->tmpdir), "%s", tmp);
		snprintf(w->db, sizeof(w->db), "%s/sweep.db", tmp);
	}
	/* what a killed run's ranks committed goes into the one database before anyone reads it */
	if (st == RM_OK && w->rank == 0) {
		int merged = 0;
		st = merge_rank_files(w->db, &merged, &err);
		if (st == RM_OK && merged > 0)
			rm_log_info("%s: merged %d rank files left by an earlier run", w->db, merged);
	}
	if (share_status(w, st, &err) != RM_OK)
		return w->rank == 0 ? cli_fail(&err) : CLI_EXIT_FAIL;
	snprintf(w->rank_db, sizeof(w->rank_db), "%s.rank%d", w->db, w->rank);
	return CLI_EXIT_OK;
#else
	if (size > 1) {
		fprintf(stderr,
			"remora: error: %s: started by mpirun with %d ranks, but this remora was built without MPI "
			"(meson setup -Dmpi=enabled with libopenmpi-dev): every rank would run the whole sweep; use "
			"--shard K/N and remora merge instead\n",
			cmd, size);
		return CLI_EXIT_USAGE;
	}
	return CLI_EXIT_OK;
#endif
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
#if REMORA_HAVE_MPI
	/* every rank's status and counts (this is also the barrier: every rank file is closed) */
	int mine = (int)st, worst = 0;
	idle_barrier();
	MPI_Allreduce(&mine, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	long long c[3] = {prog ? prog->total : 0, prog ? prog->done : 0, prog ? prog->skipped : 0}, sum[3];
	MPI_Allreduce(c, sum, 3, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
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
#else
	(void)prog;
	(void)err;
	return st;
#endif
}

double cli_sweep_reduce(const cli_sweep *w, double v, bool max)
{
#if REMORA_HAVE_MPI
	if (w->mpi) {
		double out = 0;
		idle_barrier();
		MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, max ? MPI_MAX : MPI_SUM, MPI_COMM_WORLD);
		return out;
	}
#else
	(void)w;
	(void)max;
#endif
	return v;
}

rm_status cli_sweep_gather_fn(void *user, rm_status st, rm_error *err)
{
	return cli_sweep_gather(user, NULL, st, err);
}

void cli_sweep_end(cli_sweep *w)
{
#if REMORA_HAVE_MPI
	if (w->mpi_init) {
		if (w->mpi)
			idle_barrier();
		if (w->tmpdir[0] && w->rank == 0) {
			remove_db(w->db);
			rmdir(w->tmpdir);
		}
		MPI_Finalize();
	}
#else
	(void)w;
#endif
	memset(w, 0, sizeof(*w));
}
