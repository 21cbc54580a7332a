/* Reader of reference collective measurements (remora/nccl.h, rm_nccl_ref_load). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remora/nccl.h"

#define LAUNCH_FLOOR_MAX_US 46.0 /* data/reference/nccl-h100-8gpu.csv header: "~35 us launch floor" */

bool rm_nccl_is_launch_floor(double measured_us, double predicted_us)
{
	return measured_us <= LAUNCH_FLOOR_MAX_US && predicted_us < 0.8 * measured_us;
}

bool rm_nccl_ref_is_launch_floor(const rm_nccl_ref_row *row, double predicted_us)
{
	return row->forced_ring && rm_nccl_is_launch_floor(row->time_us, predicted_us);
}

/* Largest message size of a row: 2^53 B, the largest integer every double holds exactly (a
 * reference table lists sizes up to a few GiB). */
#define REF_MAX_BYTES 9007199254740992.0

static bool parse_number(const char *s, double *v)
{
	char *end = NULL;
	errno = 0;
	*v = strtod(s, &end);
	return end != s && *end == '\0' && errno != ERANGE && *v >= 0;
}

rm_status rm_nccl_ref_load(const char *path, rm_nccl_ref_row **rows_out, int *count, rm_error *err)
{
	char *text = NULL;
	size_t len = 0;
	if (!rm_read_file(path, &text, &len, err))
		return err ? err->status : RM_IO;
	rm_status st = RM_OK;
	int cap = 64, n = 0, line_no = 0;
	rm_nccl_ref_row *rows = rm_new(rm_nccl_ref_row, (size_t)cap);
	bool header = false;
	char *next = text;
	while (next && *next) {
		char *line = next;
		char *nl = strchr(line, '\n');
		if (nl) {
			*nl = '\0';
			next = nl + 1;
		} else {
			next = NULL;
		}
		line_no++;
		size_t l = strlen(line);
		if (l && line[l - 1] == '\r')
			line[--l] = '\0';
		if (line[0] == '#' || l == 0)
			continue;
		if (!header) {
			if (strcmp(line, "collective,algo,bytes,time_us,busbw_GBps") != 0) {
				st = rm_error_set(err, RM_PARSE, path, line_no, 1,
						  "expected the header 'collective,algo,bytes,time_us,busbw_GBps'");
				goto fail;
			}
			header = true;
			continue;
		}
		char *fields[6];
		int nf = 0, col[6];
		char *p = line;
		while (nf < 6) {
			col[nf] = (int)(p - line) + 1;
			fields[nf++] = p;
			char *comma = strchr(p, ',');
			if (!comma)
				break;
			*comma = '\0';
			p = comma + 1;
		}
		if (nf != 5) {
			st = rm_error_set(err, RM_PARSE, path, line_no, 1, "expected 5 fields, found %d", nf);
			goto fail;
		}
		if (n == cap) {
			cap *= 2;
			rows = rm_xrealloc(rows, (size_t)cap * sizeof(*rows));
		}
		rm_nccl_ref_row *r = &rows[n];
		memset(r, 0, sizeof(*r));
		r->line = line_no;
		if (!rm_coll_parse(fields[0], &r->coll)) {
			st = rm_error_set(err, RM_PARSE, path, line_no, col[0], "unknown collective '%s'", fields[0]);
			goto fail;
		}
		if (strcmp(fields[1], "ring") == 0) {
			r->forced_ring = true;
		} else if (strcmp(fields[1], "default") != 0) {
			st = rm_error_set(err, RM_PARSE, path, line_no, col[1],
					  "algo must be 'ring' or 'default', got '%s'", fields[1]);
			goto fail;
		}
		double v[3];
		for (int i = 0; i < 3; i++) {
			if (!parse_number(fields[2 + i], &v[i])) {
				st = rm_error_set(err, RM_PARSE, path, line_no, col[2 + i],
						  "expected a non-negative number, got '%s'", fields[2 + i]);
				goto fail;
			}
		}
		/* compared in double before the cast: a value past int64 (1e30, inf) has no int64 */
		if (!(v[0] <= REF_MAX_BYTES) || v[0] != floor(v[0])) {
			st = rm_error_set(err, RM_PARSE, path, line_no, col[2],
					  "bytes must be an integer in [0, 2^53], got '%s'", fields[2]);
			goto fail;
		}
		r->bytes = (int64_t)v[0];
		r->time_us = v[1];
		r->busbw_GBps = v[2];
		n++;
	}
	if (!header) {
		st = rm_error_set(err, RM_PARSE, path, line_no ? line_no : 1, 1, "no header line: empty file?");
		goto fail;
	}
	free(text);
	*rows_out = rows;
	*count = n;
	return RM_OK;
fail:
	free(rows);
	free(text);
	return st;
}
