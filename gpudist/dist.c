/*
 * gpudist: rank detection, status agreement, the id broadcast and the poll loop (dist.h).
 */
#include "gpudist/dist.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if REMORA_DIST_MPI
#include <mpi.h>
#endif

static const char *plain_getenv(const char *name)
{
	return getenv(name);
}

int rm_dist_init(rm_dist *d, char *msg, size_t msg_size)
{
	rm_dist_env e = rm_dist_env_detect(NULL);
	memset(d, 0, sizeof(*d));
	d->world = 1;
	d->source = e.source;
	if (e.size <= 1)
		return 0;
#if REMORA_DIST_MPI
	int inited = 0;
	MPI_Initialized(&inited);
	if (!inited && MPI_Init(NULL, NULL) != MPI_SUCCESS) {
		snprintf(msg, msg_size, "MPI_Init failed (%s says %d processes)", e.source, e.size);
		return -1;
	}
	d->mpi = true;
	d->owns_mpi = !inited; /* finalised by whoever initialised it */
	MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
	MPI_Comm_size(MPI_COMM_WORLD, &d->world);
	MPI_Comm node;
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &node);
	MPI_Comm_rank(node, &d->local_rank);
	MPI_Comm_free(&node);
	if (d->world != e.size) {
		snprintf(msg, msg_size, "MPI_COMM_WORLD has %d ranks but %s says %d processes", d->world, e.source, e.size);
		return -1;
	}
	return 0;
#else
	snprintf(msg, msg_size,
		 "started as %d processes (%s) but built without MPI: reconfigure with -Dmpi=enabled (docs/build.md)",
		 e.size, e.source);
	return -1;
#endif
}

void rm_dist_finish(rm_dist *d)
{
#if REMORA_DIST_MPI
	if (d && d->owns_mpi) {
		MPI_Finalize();
		d->owns_mpi = d->mpi = false;
	}
#else
	(void)d;
#endif
}

int rm_dist_device(const rm_dist *d, int n_devices)
{
	int local = d->local_rank >= 0 ? d->local_rank : d->rank;
	return n_devices > 0 ? local % n_devices : 0;
}

int rm_dist_agree(const rm_dist *d, bool ok, int *code, char *msg, size_t msg_size)
{
	if (d->world <= 1 || !d->mpi)
		return ok ? 0 : -1;
#if REMORA_DIST_MPI
	/* the lowest failing rank, INT_MAX when none */
	int mine = ok ? INT_MAX : d->rank, first = INT_MAX;
	MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
	if (first == INT_MAX)
		return 0;
	struct {
		int32_t code;
		char msg[RM_DIST_MSG];
	} pkt;
	memset(&pkt, 0, sizeof(pkt));
	if (d->rank == first) {
		pkt.code = code ? *code : 0;
		snprintf(pkt.msg, sizeof(pkt.msg), "rank %d: %s", first, msg && msg[0] ? msg : "failed");
	}
	MPI_Bcast(&pkt, (int)sizeof(pkt), MPI_BYTE, first, MPI_COMM_WORLD);
	pkt.msg[sizeof(pkt.msg) - 1] = '\0';
	if (code)
		*code = pkt.code;
	if (msg && msg_size)
		snprintf(msg, msg_size, "%s", pkt.msg);
	return -1;
#else
	(void)code, (void)msg, (void)msg_size;
	return ok ? 0 : -1;
#endif
}

void rm_dist_barrier(const rm_dist *d)
{
#if REMORA_DIST_MPI
	if (d->mpi && d->world > 1)
		MPI_Barrier(MPI_COMM_WORLD);
#else
	(void)d;
#endif
}

int rm_dist_bcast_status(const rm_dist *d, bool ok, void *blob, size_t n, char *msg, size_t msg_size)
{
	if (d->world <= 1 || !d->mpi)
		return ok ? 0 : -1;
#if REMORA_DIST_MPI
	enum { MAX_BLOB = 4096 };
	struct {
		int32_t ok;
		char msg[RM_DIST_MSG];
		unsigned char blob[MAX_BLOB];
	} pkt;
	if (n > MAX_BLOB) {
		snprintf(msg, msg_size, "rm_dist_bcast_status: %zu bytes, at most %d", n, (int)MAX_BLOB);
		return -1; /* the same n on every rank: every rank returns here */
	}
	memset(&pkt, 0, sizeof(pkt));
	if (d->rank == 0) {
		pkt.ok = ok;
		if (!ok)
			snprintf(pkt.msg, sizeof(pkt.msg), "rank 0: %s", msg && msg[0] ? msg : "failed");
		else
			memcpy(pkt.blob, blob, n);
	}
	MPI_Bcast(&pkt, (int)sizeof(pkt), MPI_BYTE, 0, MPI_COMM_WORLD);
	if (!pkt.ok) {
		pkt.msg[sizeof(pkt.msg) - 1] = '\0';
		if (msg && msg_size)
			snprintf(msg, msg_size, "%s", pkt.msg);
		return -1;
	}
	if (d->rank != 0)
		memcpy(blob, pkt.blob, n);
	return 0;
#else
	(void)blob, (void)n, (void)msg, (void)msg_size;
	return ok ? 0 : -1;
#endif
}

int rm_dist_count_nodes(const rm_dist *d)
{
#if REMORA_DIST_MPI
	if (d->mpi && d->world > 1) {
		enum { HOST = 64 };
		char host[HOST];
		memset(host, 0, sizeof(host));
		gethostname(host, sizeof(host) - 1);
		char *all = (char *)calloc((size_t)d->world, HOST);
		if (!all)
			return 1;
		MPI_Allgather(host, HOST, MPI_CHAR, all, HOST, MPI_CHAR, MPI_COMM_WORLD);
		int nodes = 0;
		for (int i = 0; i < d->world; i++) {
			bool seen = false;
			for (int j = 0; j < i && !seen; j++)
				seen = strncmp(all + (size_t)i * HOST, all + (size_t)j * HOST, HOST) == 0;
			nodes += !seen;
		}
		free(all);
		return nodes;
	}
#else
	(void)d;
#endif
	return 1;
}

/* A positive number of seconds from the environment variable name, or 0. */
static double env_seconds(const char *name)
{
	const char *s = getenv(name);
	if (s && *s) {
		char *end = NULL;
		errno = 0;
		double v = strtod(s, &end);
		if (errno == 0 && end && *end == '\0' && v > 0 && v < 1e9)
			return v;
	}
	return 0;
}

double rm_dist_timeout_s(double flag_s)
{
	if (flag_s > 0)
		return flag_s;
	double v = env_seconds("REMORA_NCCL_TIMEOUT_S");
	return v > 0 ? v : RM_DIST_TIMEOUT_S;
}

double rm_dist_init_timeout_s(double flag_s)
{
	if (flag_s > 0)
		return flag_s;
	double v = env_seconds("REMORA_NCCL_INIT_TIMEOUT_S");
	return v > 0 ? v : rm_dist_timeout_s(0);
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int rm_dist_wait(const rm_dist_waiter *w, double timeout_s, const char *what, char *msg, size_t msg_size)
{
	char why[RM_DIST_MSG] = "";
	double t0 = now_s();
	long sleep_ns = 20000;
	for (;;) {
		int q = w->query(w->arg, why, sizeof(why));
		if (q > 0)
			return 0;
		if (q < 0)
			break;
		if (w->async_error && w->async_error(w->arg, why, sizeof(why)) != 0)
			break;
		double waited = now_s() - t0;
		if (waited > timeout_s) {
			snprintf(why, sizeof(why),
				 "no progress in %.3g s (timeout; %s); communicators aborted", waited,
				 w->timeout_hint ? w->timeout_hint : "REMORA_NCCL_TIMEOUT_S or --timeout");
			break;
		}
		struct timespec ts = {0, sleep_ns};
		nanosleep(&ts, NULL);
		if (sleep_ns < 1000000)
			sleep_ns *= 2;
	}
	if (w->abort)
		w->abort(w->arg);
	snprintf(msg, msg_size, "%s: %s", what, why[0] ? why : "failed");
	return -1;
}

/* s lower-cased into buf, or "default" when s is unset or empty. */
static void lower_or_default(const char *s, char *buf, size_t n)
{
	if (!s || !*s)
		s = "default";
	size_t k = 0;
	for (; s[k] && k + 1 < n; k++)
		buf[k] = (char)(s[k] >= 'A' && s[k] <= 'Z' ? s[k] - 'A' + 'a' : s[k]);
	buf[k] = '\0';
}

void rm_dist_nccl_env(rm_dist_getenv_fn get, char *algo, size_t algo_size, char *proto, size_t proto_size,
		      char *tuning, size_t tuning_size)
{
	if (!get)
		get = plain_getenv;
	lower_or_default(get("NCCL_ALGO"), algo, algo_size);
	lower_or_default(get("NCCL_PROTO"), proto, proto_size);
	static const char *const names[] = {
		"NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_MIN_CTAS",	 "NCCL_MAX_CTAS",
		"NCCL_NTHREADS",      "NCCL_NVLS_ENABLE",   "NCCL_NVLSTREE_MAX_CHUNKSIZE", "NCCL_CTA_POLICY",
		"NCCL_BUFFSIZE",      "NCCL_P2P_LEVEL",     "NCCL_SHM_DISABLE",	 "NCCL_P2P_DISABLE",
	};
	char buf[1024];
	size_t len = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const char *v = get(names[i]);
		if (!v || !*v)
			continue;
		char name[64], val[128];
		lower_or_default(names[i] + 5, name, sizeof(name));
		lower_or_default(v, val, sizeof(val));
		int w = snprintf(buf + len, sizeof(buf) - len, "%s%s=%s", len ? "," : "", name, val);
		if (w < 0 || (size_t)w >= sizeof(buf) - len)
			break;
		len += (size_t)w;
	}
	snprintf(tuning, tuning_size, "%s", len ? buf : "default");
}

double rm_dist_max(const rm_dist *d, double v)
{
#if REMORA_DIST_MPI
	if (d->mpi && d->world > 1) {
		double out = v;
		MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
		return out;
	}
#else
	(void)d;
#endif
	return v;
}
