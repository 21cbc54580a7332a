/*
 * Reader of nccl-tests output (NVIDIA/nccl-tests src/common.cu prints it): rm_nccl_tests_parse.
 *
 * A log is a sequence of header blocks and tables. A block: "# nccl-tests version V
 * nccl-headers=H nccl-library=L" (absent before nccl-tests 2.10 or so), "# Collective test
 * starting: all_gather_perf", "# nThread T nGpus G ...", "# Using devices", one
 * "#  Rank R [Group G] Pid P on HOST device D [BUS] NAME" line per rank (with MPI and -g 1, one
 * per process), the two column header lines and the unit line, rows, and the closing
 * "# Out of bounds values" / "# Avg bus bandwidth" lines. Several processes writing to one file
 * repeat blocks and rows; identical rows are kept once.
 *
 * Options that change the table (nccl-tests src/util.cu writeResultHeader and
 * writeBenchmarkLineBody): -I 1 adds i_min, i_max, i_p99 (us) and i_cv% (%) after each
 * placement's #wrong, -S 1 a "timestamp" column printed as "%Y-%m-%d %H:%M:%S" (two fields, its
 * unit line shows the format itself); both are read, their extra columns ignored. -C 1 names the
 * time column "cputime": the host's time around the launches, refused with that reason. The
 * launch mode comes from "# nThread T nGpus G" (G > 1: one thread drives several GPUs and its
 * launches are serial, which puts a host floor under small sizes) and the rank lines' Pids.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "calib_internal.h"

#define MAX_FIELDS 24
#define MAX_RANKS 4096
#define MAX_HOSTS 512

/* Which column a field of a row is. */
typedef enum col_kind {
	COL_SIZE,
	COL_COUNT,
	COL_TYPE,
	COL_REDOP,
	COL_ROOT,
	COL_TIME,
	COL_ALGBW,
	COL_BUSBW,
	COL_WRONG,     /* #wrong: a count */
	COL_ERROR_OLD, /* error: max deviation, older versions */
	COL_ITER_US,   /* -I 1: i_min, i_max, i_p99 of the per-iteration CUDA event times (us) */
	COL_ITER_PCT,  /* -I 1: i_cv%, their coefficient of variation */
	COL_TS_DATE,   /* -S 1: the wall-clock timestamp, printed as "%Y-%m-%d %H:%M:%S" */
	COL_TS_TIME,
	COL_OTHER,
} col_kind;

typedef struct layout {
	int n;
	col_kind kind[MAX_FIELDS];
	int group[MAX_FIELDS]; /* 0 out-of-place, 1 in-place, for time..wrong */
} layout;

typedef struct parser {
	const char *path;
	int line;
	bool have_coll;
	rm_coll coll;
	layout cols;
	bool have_cols;
	/* ranks and hosts of the current header block */
	int n_ranks;
	int rank_ids[MAX_RANKS];
	int n_hosts;
	char hosts[MAX_HOSTS][64];
	int n_pids;
	int pids[MAX_RANKS];  /* distinct processes among the rank lines */
	int threads, gpus;    /* "# nThread T nGpus G" of the block; 0 when not printed */
	int gpus_hint;
	int rows_open;       /* rows since the last "Avg bus bandwidth" line */
	int table_line;      /* first row of the open table */
	int cap;
	rm_nccl_tests_log *log;
	rm_error *err;
} parser;

/* Splits s in place at blanks; returns the count and each field's 1-based column. */
static int split(char *s, const char *line_start, char **fields, int *cols, int max)
{
	int n = 0;
	char *p = s;
	while (*p) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		if (n == max)
			return max + 1;
		fields[n] = p;
		cols[n] = (int)(p - line_start) + 1;
		n++;
		while (*p && *p != ' ' && *p != '\t')
			p++;
		if (*p)
			*p++ = '\0';
	}
	return n;
}

/* "all_gather_perf" / "all_gather" / a path containing it -> collective. */
static bool coll_from_name(const char *name, rm_coll *coll, char *unsupported, size_t size)
{
	static const struct {
		const char *key;
		int coll; /* -1: an nccl-tests test remora does not model */
	} names[] = {
		{"all_gather", RM_COLL_ALL_GATHER}, {"reduce_scatter", RM_COLL_REDUCE_SCATTER},
		{"all_reduce", RM_COLL_ALL_REDUCE}, {"alltoall", RM_COLL_ALL_TO_ALL},
		{"sendrecv", RM_COLL_SEND_RECV},    {"broadcast", -1},
		{"reduce_perf", -1},                {"gather_perf", -1},
		{"scatter_perf", -1},               {"hypercube", -1},
	};
	for (size_t i = 0; i < RM_ARRAY_SIZE(names); i++) {
		if (strstr(name, names[i].key)) {
			if (names[i].coll < 0) {
				snprintf(unsupported, size, "%s", names[i].key);
				return false;
			}
			*coll = (rm_coll)names[i].coll;
			return true;
		}
	}
	unsupported[0] = '\0';
	return false;
}

static void nccl_code_to_version(long code, char *buf, size_t size)
{
	if (code >= 10000)
		snprintf(buf, size, "%ld.%ld.%ld", code / 10000, (code % 10000) / 100, code % 100);
	else
		snprintf(buf, size, "%ld.%ld.%ld", code / 1000, (code % 1000) / 100, code % 100);
}

static void parse_version_line(parser *p, const char *line)
{
	const char *v = strstr(line, "nccl-tests version");
	if (v)
		sscanf(v + strlen("nccl-tests version"), " %31s", p->log->tests_version);
	const char *lib = strstr(line, "nccl-library=");
	if (lib) {
		long code = strtol(lib + strlen("nccl-library="), NULL, 10);
		if (code > 0)
			nccl_code_to_version(code, p->log->nccl_version, sizeof(p->log->nccl_version));
	}
}

static rm_status parse_rank_line(parser *p, const char *line)
{
	const char *r = strstr(line, "Rank");
	int rank = -1;
	if (!r || sscanf(r + 4, "%d", &rank) != 1 || rank < 0)
		return rm_error_set(p->err, RM_PARSE, p->path, p->line, (int)(r ? r - line : 0) + 1,
				    "expected '#  Rank N ... on HOST device D [BUS] NAME'");
	char host[64] = "";
	const char *on = strstr(r, " on ");
	if (on)
		sscanf(on + 4, " %63s", host);
	const char *pid_at = strstr(r, "Pid");
	int pid = -1;
	if (pid_at && sscanf(pid_at + 3, "%d", &pid) == 1) {
		bool seen = false;
		for (int i = 0; i < p->n_pids && !seen; i++)
			seen = p->pids[i] == pid;
		if (!seen && p->n_pids < MAX_RANKS)
			p->pids[p->n_pids++] = pid;
	}
	for (int i = 0; i < p->n_ranks; i++)
		if (p->rank_ids[i] == rank)
			return RM_OK; /* repeated by another process's header */
	if (p->n_ranks == MAX_RANKS)
		return rm_error_set(p->err, RM_RANGE, p->path, p->line, 1, "more than %d ranks", MAX_RANKS);
	p->rank_ids[p->n_ranks++] = rank;
	bool known = false;
	for (int i = 0; i < p->n_hosts; i++)
		known = known || strcmp(p->hosts[i], host) == 0;
	if (!known && p->n_hosts < MAX_HOSTS)
		snprintf(p->hosts[p->n_hosts++], sizeof(p->hosts[0]), "%s", host);
	if (rank == 0) {
		snprintf(p->log->host, sizeof(p->log->host), "%s", host);
		const char *bus = strchr(r, '[');
		const char *close = bus ? strchr(bus, ']') : NULL;
		if (close) {
			const char *name = close + 1;
			while (*name == ' ')
				name++;
			snprintf(p->log->gpu, sizeof(p->log->gpu), "%s", name);
			size_t l = strlen(p->log->gpu);
			while (l && (p->log->gpu[l - 1] == ' ' || p->log->gpu[l - 1] == '\r'))
				p->log->gpu[--l] = '\0';
		}
	}
	return RM_OK;
}

/* The column names line: "#  size  count  type  redop  root  time  algbw  busbw  #wrong ...". */
static rm_status parse_columns(parser *p, char *body, const char *line)
{
	char *f[MAX_FIELDS + 1];
	int c[MAX_FIELDS + 1];
	int n = split(body, line, f, c, MAX_FIELDS);
	if (n > MAX_FIELDS)
		n = MAX_FIELDS;
	layout L = {.n = 0};
	int group = -1;
	for (int i = 0; i < n && L.n < MAX_FIELDS; i++) {
		col_kind k = COL_OTHER;
		if (!strcmp(f[i], "cputime"))
			/* -C 1 (report_cputime): the host's wall time around the launches, not the GPU's */
			return rm_error_set(p->err, RM_UNSUPPORTED, p->path, p->line, c[i],
					    "this log was made with -C 1 (CPU time, column 'cputime'): its times are "
					    "not GPU times; rerun without -C");
		if (!strcmp(f[i], "size"))
			k = COL_SIZE;
		else if (!strcmp(f[i], "count"))
			k = COL_COUNT;
		else if (!strcmp(f[i], "type"))
			k = COL_TYPE;
		else if (!strcmp(f[i], "redop"))
			k = COL_REDOP;
		else if (!strcmp(f[i], "root"))
			k = COL_ROOT;
		else if (!strcmp(f[i], "time"))
			k = COL_TIME, group++;
		else if (!strcmp(f[i], "algbw"))
			k = COL_ALGBW;
		else if (!strcmp(f[i], "busbw"))
			k = COL_BUSBW;
		else if (!strcmp(f[i], "#wrong") || !strcmp(f[i], "wrong"))
			k = COL_WRONG;
		else if (!strcmp(f[i], "error"))
			k = COL_ERROR_OLD;
		else if (!strcmp(f[i], "i_min") || !strcmp(f[i], "i_max") || !strcmp(f[i], "i_p99"))
			k = COL_ITER_US;
		else if (!strcmp(f[i], "i_cv%"))
			k = COL_ITER_PCT;
		else if (!strcmp(f[i], "timestamp"))
			k = COL_TS_DATE;
		L.kind[L.n] = k;
		L.group[L.n] = group < 0 ? 0 : group > 1 ? 1 : group;
		L.n++;
		if (k == COL_TS_DATE && L.n < MAX_FIELDS) {
			/* one header word, two fields in the rows and the unit line */
			L.kind[L.n] = COL_TS_TIME;
			L.group[L.n] = L.group[L.n - 1];
			L.n++;
		}
	}
	p->cols = L;
	p->have_cols = true;
	return RM_OK;
}

/* The unit a column prints on the unit line, or NULL for a column without one. */
static const char *column_unit(col_kind k)
{
	switch (k) {
	case COL_SIZE:
		return "(B)";
	case COL_COUNT:
		return "(elements)";
	case COL_TIME:
	case COL_ITER_US:
		return "(us)";
	case COL_ALGBW:
	case COL_BUSBW:
		return "(GB/s)";
	case COL_ITER_PCT:
		return "(%)";
	case COL_TS_DATE:
		return "%Y-%m-%d"; /* nccl-tests prints the strftime format as the timestamp's unit */
	case COL_TS_TIME:
		return "%H:%M:%S";
	default:
		return NULL;
	}
}

static const char *column_what(col_kind k)
{
	static const char *const names[] = {"size", "count", "type", "redop", "root", "time", "algbw", "busbw",
					    "#wrong", "error", "per-iteration time", "per-iteration cv",
					    "timestamp", "timestamp", "unknown"};
	return names[k];
}

/* The unit line: each column's unit in the order of the column header (default: the classic table). */
static rm_status check_units(parser *p, char *body, const char *line)
{
	char *f[MAX_FIELDS + 1];
	int c[MAX_FIELDS + 1];
	int n = split(body, line, f, c, MAX_FIELDS);
	if (n > MAX_FIELDS)
		n = MAX_FIELDS;
	col_kind want[MAX_FIELDS];
	int nw = 0;
	if (p->have_cols) {
		for (int i = 0; i < p->cols.n; i++)
			if (column_unit(p->cols.kind[i]))
				want[nw++] = p->cols.kind[i];
	} else {
		static const col_kind classic[] = {COL_SIZE, COL_COUNT, COL_TIME, COL_ALGBW, COL_BUSBW,
						   COL_TIME, COL_ALGBW, COL_BUSBW};
		for (size_t i = 0; i < RM_ARRAY_SIZE(classic); i++)
			want[nw++] = classic[i];
	}
	for (int i = 0; i < n; i++) {
		if (i >= nw)
			return rm_error_set(p->err, RM_INVALID, p->path, p->line, c[i],
					    "unit %s has no column: the column header names %d columns with units", f[i],
					    nw);
		const char *u = column_unit(want[i]);
		if (strcmp(f[i], u) != 0)
			return rm_error_set(p->err, RM_INVALID, p->path, p->line, c[i],
					    "unit %s for the %s column: remora reads nccl-tests tables in %s", f[i],
					    column_what(want[i]), u);
	}
	return RM_OK;
}

static bool parse_double(const char *s, double *v)
{
	char *end = NULL;
	errno = 0;
	*v = strtod(s, &end);
	return end != s && *end == '\0' && errno != ERANGE && isfinite(*v);
}

static bool parse_int64(const char *s, int64_t *v)
{
	char *end = NULL;
	errno = 0;
	long long x = strtoll(s, &end, 10);
	*v = x;
	return end != s && *end == '\0' && errno != ERANGE;
}

/* The default layout when a table has no column header (nccl-tests >= 2.11 with a root column). */
static layout default_layout(int n)
{
	static const col_kind with_root[] = {COL_SIZE,  COL_COUNT, COL_TYPE,  COL_REDOP, COL_ROOT,
					     COL_TIME,  COL_ALGBW, COL_BUSBW, COL_WRONG, COL_TIME,
					     COL_ALGBW, COL_BUSBW, COL_WRONG};
	layout L = {.n = 13};
	int skip = n == 12 ? 1 : 0; /* older tables: no root column */
	int j = 0;
	for (int i = 0; i < 13; i++) {
		if (skip && with_root[i] == COL_ROOT)
			continue;
		L.kind[j] = with_root[i];
		L.group[j] = i >= 9 ? 1 : 0;
		j++;
	}
	L.n = j;
	return L;
}

static bool rows_equal(const rm_nccl_tests_row *a, const rm_nccl_tests_row *b)
{
	if (a->coll != b->coll || a->bytes != b->bytes || a->count != b->count || a->root != b->root ||
	    a->ranks != b->ranks || a->nodes != b->nodes || a->gpus_per_thread != b->gpus_per_thread ||
	    strcmp(a->type, b->type) || strcmp(a->redop, b->redop))
		return false;
	for (int g = 0; g < 2; g++) {
		if (a->has[g] != b->has[g])
			return false;
		if (a->has[g] && (a->time_us[g] != b->time_us[g] || a->algbw_GBps[g] != b->algbw_GBps[g] ||
				  a->busbw_GBps[g] != b->busbw_GBps[g] || a->wrong[g] != b->wrong[g]))
			return false;
	}
	return true;
}

static rm_status parse_row(parser *p, char *text, const char *line, bool last_line)
{
	char *f[MAX_FIELDS + 1];
	int c[MAX_FIELDS + 1];
	int end_col = (int)(text - line) + (int)strlen(text) + 1;
	int n = split(text, line, f, c, MAX_FIELDS);
	layout L = p->have_cols ? p->cols : default_layout(n);
	if (n < L.n) {
		if (last_line)
			return rm_error_set(p->err, RM_PARSE, p->path, p->line, end_col,
					    "truncated: the log ends in the middle of a row (%d of %d fields)", n,
					    L.n);
		return rm_error_set(p->err, RM_PARSE, p->path, p->line, n > 0 ? c[n - 1] : 1,
				    "expected %d fields in this row, found %d", L.n, n);
	}
	if (n > L.n)
		return rm_error_set(p->err, RM_PARSE, p->path, p->line, c[L.n < MAX_FIELDS ? L.n : MAX_FIELDS - 1],
				    "expected %d fields in this row, found more", L.n);
	if (!p->have_coll)
		return rm_error_set(p->err, RM_MISSING, p->path, p->line, 1,
				    "which collective is this? no '# Collective test starting: X_perf' line "
				    "before the table and none in the file name");
	int ranks = p->n_ranks ? p->n_ranks : p->gpus_hint;
	if (ranks <= 0)
		return rm_error_set(p->err, RM_MISSING, p->path, p->line, 1,
				    "cannot tell how many GPUs ran this test: no '#  Rank' lines before the "
				    "table (pass the GPU count, --gpus N)");
	rm_nccl_tests_row r = {.coll = p->coll, .root = -1, .ranks = ranks,
			       .nodes = p->n_hosts ? p->n_hosts : 1, .line = p->line,
			       .wrong = {-1, -1}, .gpus_per_thread = p->gpus, .processes = p->n_pids};
	bool na[2] = {false, false}, seen[2] = {false, false};
	for (int i = 0; i < L.n; i++) {
		const char *s = f[i];
		int g = L.group[i];
		double d;
		int64_t v;
		bool is_na = strcmp(s, "N/A") == 0;
		switch (L.kind[i]) {
		case COL_SIZE:
		case COL_COUNT:
			if (!parse_int64(s, &v) || v < 0)
				return rm_error_set(p->err, RM_PARSE, p->path, p->line, c[i],
						    "expected a byte or element count, found '%s'", s);
			if (L.kind[i] == COL_SIZE)
				r.bytes = v;
			else
				r.count = v;
			break;
		case COL_TYPE:
			snprintf(r.type, sizeof(r.type), "%s", s);
			break;
		case COL_REDOP:
			snprintf(r.redop, sizeof(r.redop), "%s", s);
			break;
		case COL_ROOT:
			if (!parse_int64(s, &v) || v < -1 || v > INT32_MAX)
				return rm_error_set(p->err, RM_PARSE, p->path, p->line, c[i],
						    "expected a root rank (or -1), found '%s'", s);
			r.root = (int)v;
			break;
		case COL_TIME:
		case COL_ALGBW:
		case COL_BUSBW:
			seen[g] = true;
			if (is_na) {
				na[g] = true;
				break;
			}
			if (!parse_double(s, &d) || d < 0)
				return rm_error_set(p->err, RM_PARSE, p->path, p->line, c[i],
						    "expected a non-negative number (or N/A), found '%s'", s);
			if (L.kind[i] == COL_TIME)
				r.time_us[g] = d;
			else if (L.kind[i] == COL_ALGBW)
				r.algbw_GBps[g] = d;
			else
				r.busbw_GBps[g] = d;
			break;
		case COL_WRONG:
			if (is_na)
				break;
			if (!parse_int64(s, &v) || v < 0)
				return rm_error_set(p->err, RM_PARSE, p->path, p->line, c[i],
						    "expected a count of wrong elements (or N/A), found '%s'", s);
			r.wrong[g] = v;
			break;
		case COL_ERROR_OLD:
			if (!is_na && !parse_double(s, &d))
				return rm_error_set(p->err, RM_PARSE, p->path, p->line, c[i],
						    "expected an error magnitude (or N/A), found '%s'", s);
			break;
		default:
			break;
		}
	}
	for (int g = 0; g < 2; g++)
		r.has[g] = seen[g] && !na[g];
	if (p->rows_open == 0)
		p->table_line = p->line;
	p->rows_open++;
	rm_nccl_tests_log *log = p->log;
	if (log->n_rows == 0) {
		log->threads = p->threads;
		log->gpus_per_thread = p->gpus;
		log->processes = p->n_pids;
	}
	for (int i = log->n_rows - 1; i >= 0; i--)
		if (rows_equal(&log->rows[i], &r)) {
			log->duplicates++;
			return RM_OK;
		}
	if (log->n_rows == p->cap) {
		p->cap = p->cap ? 2 * p->cap : 64;
		log->rows = rm_xrealloc(log->rows, (size_t)p->cap * sizeof(*log->rows));
	}
	log->rows[log->n_rows++] = r;
	return RM_OK;
}

static rm_status parse_comment(parser *p, char *line)
{
	char *body = line + 1;
	while (*body == ' ' || *body == '\t')
		body++;
	if (!strncmp(body, "nccl-tests version", 18)) {
		parse_version_line(p, body);
	} else if (!strncmp(body, "Collective test starting:", 25)) {
		char name[64] = "", bad[32];
		sscanf(body + 25, " %63s", name);
		if (!coll_from_name(name, &p->coll, bad, sizeof(bad))) {
			if (bad[0])
				return rm_error_set(p->err, RM_UNSUPPORTED, p->path, p->line,
						    (int)(body - line) + 27,
						    "nccl-tests '%s' is not a collective remora models "
						    "(all_gather, reduce_scatter, all_reduce, alltoall, sendrecv)",
						    name);
			return rm_error_set(p->err, RM_PARSE, p->path, p->line, (int)(body - line) + 27,
					    "unknown nccl-tests binary '%s'", name);
		}
		p->have_coll = true;
		p->n_ranks = 0;
		p->n_hosts = 0;
		p->n_pids = 0;
		p->threads = p->gpus = 0;
	} else if (!strncmp(body, "nThread", 7)) {
		p->n_ranks = 0;
		p->n_hosts = 0;
		p->n_pids = 0;
		/* "# nThread T nGpus G ...": T threads per process, each driving G GPUs */
		int t = 0, g = 0;
		if (sscanf(body, "nThread %d nGpus %d", &t, &g) == 2 && t > 0 && g > 0) {
			p->threads = t;
			p->gpus = g;
		} else {
			p->threads = p->gpus = 0;
		}
	} else if (!strncmp(body, "Rank", 4)) {
		return parse_rank_line(p, line);
	} else if (!strncmp(body, "size", 4) || strstr(body, " size ")) {
		return parse_columns(p, body, line);
	} else if (!strncmp(body, "(B)", 3)) {
		return check_units(p, body, line);
	} else if (!strncmp(body, "Avg bus bandwidth", 17)) {
		p->rows_open = 0;
	}
	return RM_OK;
}

rm_status rm_nccl_tests_parse(const char *path, const char *text, size_t len, int gpus_hint,
			      rm_nccl_tests_log *log, rm_error *err)
{
	memset(log, 0, sizeof(*log));
	parser *p = rm_new(parser, 1);
	p->path = path ? path : "";
	p->log = log;
	p->err = err;
	p->gpus_hint = gpus_hint;
	char bad[32];
	const char *base = path ? strrchr(path, '/') : NULL;
	base = base ? base + 1 : path;
	p->have_coll = base && coll_from_name(base, &p->coll, bad, sizeof(bad));
	rm_status st = RM_OK;
	char *buf = rm_xmalloc(len + 1);
	memcpy(buf, text, len);
	buf[len] = '\0';
	char *next = buf, *end = buf + len;
	while (next < end) {
		char *line = next;
		char *nl = memchr(line, '\n', (size_t)(end - line));
		bool last = true;
		if (nl) {
			*nl = '\0';
			next = nl + 1;
			/* the last line with content may be cut mid-row, newline or not */
			for (char *q = next; q < end; q++)
				if (*q != ' ' && *q != '\t' && *q != '\r' && *q != '\n') {
					last = false;
					break;
				}
		} else {
			next = end;
		}
		p->line++;
		size_t l = strlen(line);
		if (l != (size_t)(nl ? nl - line : end - line)) {
			st = rm_error_set(err, RM_PARSE, p->path, p->line, (int)l + 1, "NUL byte in the log");
			goto done;
		}
		if (l && line[l - 1] == '\r')
			line[--l] = '\0';
		char *s = line;
		while (*s == ' ' || *s == '\t')
			s++;
		if (!*s)
			continue;
		if (*s == '#') {
			st = parse_comment(p, s);
		} else if ((*s >= '0' && *s <= '9') || *s == '-' || *s == '+' || *s == '.') {
			/* a row, or something shaped like one (a negative or fractional size): the row
			 * parser says what is wrong with it rather than skipping it */
			st = parse_row(p, s, line, last);
		} else {
			/* NCCL INFO/WARN lines, launcher chatter: not part of the table */
			continue;
		}
		if (st != RM_OK)
			goto done;
	}
	if (p->rows_open > 0) {
		st = rm_error_set(err, RM_PARSE, p->path, p->line, 0,
				  "truncated: the table starting at line %d has no closing '# Avg bus "
				  "bandwidth' line (was the run cut short?)",
				  p->table_line);
		goto done;
	}
	if (log->n_rows == 0)
		st = rm_error_set(err, RM_MISSING, p->path, 0, 0, "no nccl-tests result rows in this file");
done:
	free(buf);
	free(p);
	if (st != RM_OK)
		rm_nccl_tests_log_finish(log);
	return st;
}

void rm_nccl_tests_log_finish(rm_nccl_tests_log *log)
{
	if (!log)
		return;
	free(log->rows);
	log->rows = NULL;
	log->n_rows = 0;
}
