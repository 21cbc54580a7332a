/*
 * A trace's kernels as calibration measurements (remora/trace.h rm_trace_calib_import): each GPU
 * kernel linked by Kineto's "External id" to an operator with shapes (trace_private.h
 * rm_trace__op) adds its duration to that operator; operators with the same params aggregate to
 * the median of their times. The rows go to calibrate/ through rm_calib_import_rows, in one
 * transaction for every file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "trace_private.h"

/* One operator's measured time, before aggregation. */
typedef struct inst {
	int run;
	int kind;
	char bench[24]; /* the benchmark: "gemm", "attention", "all_reduce"... */
	char *key; /* its params (count aside), compact with sorted keys: the aggregation key */
	double us;
	int64_t kernels;
} inst;

typedef struct run_info {
	char *source, *gpu, *cuda, *driver, *nccl;
	int file, device;
} run_info;

typedef struct importer {
	inst *in;
	int64_t n_in, cap_in;
	run_info *runs;
	int n_runs;
	rm_trace_calib_stats st;
	int64_t unlinked_ops; /* operators with shapes no kernel's External id names */
} importer;

static int op_kind_of_class(int cls)
{
	switch (cls) {
	case RM_TRACE_GEMM:
		return RM_TRACE_CALIB_GEMM;
	case RM_TRACE_ATTENTION:
		return RM_TRACE_CALIB_ATTENTION;
	case RM_TRACE_NCCL:
		return RM_TRACE_CALIB_NCCL;
	default:
		return -1;
	}
}

static int run_for(importer *im, const rm_trace *t, const char *path, int file, int device)
{
	for (int i = 0; i < im->n_runs; i++)
		if (im->runs[i].file == file && im->runs[i].device == device)
			return i;
	im->runs = rm_xrealloc(im->runs, (size_t)(im->n_runs + 1) * sizeof(*im->runs));
	run_info *r = &im->runs[im->n_runs];
	size_t n = strlen(path) + 8;
	r->source = rm_xmalloc(n);
	snprintf(r->source, n, "trace: %s", path);
	const char *gpu = device < t->n_device_names && t->device_names[device] ? t->device_names[device] : "unknown";
	r->gpu = rm_xstrdup(gpu);
	r->cuda = rm_xstrdup(t->cuda[0] ? t->cuda : "unknown");
	r->driver = rm_xstrdup(t->driver[0] ? t->driver : "unknown");
	r->nccl = rm_xstrdup(t->nccl[0] ? t->nccl : "unknown");
	r->file = file;
	r->device = device;
	return im->n_runs++;
}

/* The node count of a collective's group: distinct rank / gpus_per_node over its ranks; 0 when
 * the ranks are not known. */
static int group_nodes(const rm_trace *t, const rm_trace__op *op, int gpus_per_node)
{
	int64_t group = op->d[1];
	if (gpus_per_node <= 0 || group < 1 || group > 1 << 20)
		return 0;
	int64_t *node = rm_new(int64_t, (size_t)group);
	int64_t n = 0;
	json_t *ranks = op->ranks >= 0 ? json_loads(t->names[op->ranks], 0, NULL) : NULL;
	if (json_is_array(ranks) && json_array_size(ranks) == (size_t)group) {
		for (int64_t i = 0; i < group; i++) {
			json_t *r = json_array_get(ranks, (size_t)i);
			if (!json_is_integer(r) || json_integer_value(r) < 0) {
				n = 0;
				break;
			}
			node[n++] = (int64_t)json_integer_value(r) / gpus_per_node;
		}
	} else if (op->d[2] >= 0 && op->d[3] >= 1) {
		for (int64_t i = 0; i < group; i++)
			node[n++] = (op->d[2] + i * op->d[3]) / gpus_per_node;
	}
	json_decref(ranks);
	int distinct = 0;
	for (int64_t i = 0; i < n; i++) {
		bool seen = false;
		for (int64_t j = 0; j < i && !seen; j++)
			seen = node[j] == node[i];
		distinct += !seen;
	}
	free(node);
	return distinct;
}

/* The params of one operator (count aside). */
static json_t *op_params(const rm_trace *t, const rm_trace__op *op, int device, int32_t kernel_name,
			 int gpus_per_node)
{
	json_t *p = NULL;
	if (op->kind == RM_TRACE__OP_GEMM) {
		p = json_pack("{s:I, s:I, s:I, s:I, s:s, s:s, s:s}", "m", (json_int_t)op->d[1], "n", (json_int_t)op->d[2],
			      "k", (json_int_t)op->d[3], "batch", (json_int_t)op->d[0], "dtype", op->dtype, "layout",
			      op->layout, "op", op->name);
	} else if (op->kind == RM_TRACE__OP_ATTENTION) {
		p = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:s, s:s}", "batch", (json_int_t)op->d[0], "heads",
			      (json_int_t)op->d[1], "kv_heads", (json_int_t)op->d[2], "seq_q", (json_int_t)op->d[3],
			      "seq_kv", (json_int_t)op->d[4], "head_dim", (json_int_t)op->d[5], "pass",
			      op->bwd ? "bwd" : "fwd", "dtype", op->dtype, "op", op->name);
		if (op->causal >= 0)
			json_object_set_new(p, "causal", json_boolean(op->causal == 1));
	} else {
		p = json_pack("{s:I, s:I, s:s, s:s}", "bytes", (json_int_t)op->d[0], "ranks", (json_int_t)op->d[1],
			      "dtype", op->dtype, "algo", "default");
		int nodes = group_nodes(t, op, gpus_per_node);
		if (nodes > 0)
			json_object_set_new(p, "nodes", json_integer(nodes));
		rm_trace_nccl_name nn;
		if (kernel_name >= 0 && rm_trace_nccl_parse(t->names[kernel_name], &nn)) {
			if (nn.algo[0])
				json_object_set_new(p, "kernel_algo", json_string(nn.algo));
			if (nn.proto[0])
				json_object_set_new(p, "kernel_proto", json_string(nn.proto));
		}
	}
	json_object_set_new(p, "device", json_integer(device));
	if (t->rank >= 0)
		json_object_set_new(p, "rank", json_integer(t->rank));
	return p;
}

/* The operators of one trace with their kernels' time, appended to im->in. */
static void collect_trace(importer *im, const rm_trace *t, const char *path, int file, int gpus_per_node)
{
	int64_t *sum_ns = rm_new(int64_t, (size_t)t->n_ops + 1);
	int64_t *nk = rm_new(int64_t, (size_t)t->n_ops + 1);
	int *dev = rm_new(int, (size_t)t->n_ops + 1);
	int32_t *kname = rm_new(int32_t, (size_t)t->n_ops + 1);
	int64_t *linked = rm_new(int64_t, (size_t)t->n_ops * RM_TRACE_CALIB_KINDS + 1);
	for (int64_t i = 0; i < t->n_ev; i++) {
		const rm_trace__event *e = &t->ev[i];
		if (e->cls == RM_TRACE_MEMCPY || e->cls == RM_TRACE_MEMSET)
			continue;
		int ck = op_kind_of_class(e->cls);
		int64_t k = e->ext_id >= 0 ? rm_trace__op_find(t, e->ext_id) : -1;
		if (k < 0) {
			if (ck >= 0)
				im->st.skipped[ck]++;
			continue;
		}
		if (nk[k] == 0) {
			dev[k] = t->streams[e->stream].device;
			kname[k] = -1;
		}
		if (e->cls == RM_TRACE_NCCL && kname[k] < 0)
			kname[k] = e->name;
		sum_ns[k] += e->dur_ns;
		nk[k]++;
		if (ck >= 0)
			linked[k * RM_TRACE_CALIB_KINDS + ck]++;
	}
	for (int64_t k = 0; k < t->n_ops; k++) {
		if (nk[k] == 0 && !(k > 0 && t->ops[k - 1].ext_id == t->ops[k].ext_id))
			im->unlinked_ops++;
		if (nk[k] == 0 || sum_ns[k] <= 0) {
			for (int c = 0; c < RM_TRACE_CALIB_KINDS; c++)
				im->st.skipped[c] += linked[k * RM_TRACE_CALIB_KINDS + c];
			continue;
		}
		/* a second record of the same operator (record_param_comms and the kernel's own args) */
		if (k > 0 && t->ops[k - 1].ext_id == t->ops[k].ext_id)
			continue;
		const rm_trace__op *op = &t->ops[k];
		int kind = op->kind == RM_TRACE__OP_GEMM ? RM_TRACE_CALIB_GEMM
			   : op->kind == RM_TRACE__OP_ATTENTION ? RM_TRACE_CALIB_ATTENTION
								 : RM_TRACE_CALIB_NCCL;
		json_t *p = op_params(t, op, dev[k], kname[k], gpus_per_node);
		char *key = json_dumps(p, JSON_COMPACT | JSON_SORT_KEYS);
		json_decref(p);
		if (im->n_in == im->cap_in) {
			im->cap_in = im->cap_in ? 2 * im->cap_in : 256;
			im->in = rm_xrealloc(im->in, (size_t)im->cap_in * sizeof(*im->in));
		}
		int64_t nlinked = nk[k]; /* every kernel of the operator, whatever its name's class */
		inst *in = &im->in[im->n_in++];
		*in = (inst){.run = run_for(im, t, path, file, dev[k]), .kind = kind, .key = key,
			     .us = (double)sum_ns[k] / 1e3, .kernels = nlinked};
		snprintf(in->bench, sizeof(in->bench), "%s",
			 kind == RM_TRACE_CALIB_GEMM ? "gemm" : kind == RM_TRACE_CALIB_ATTENTION ? "attention" : op->name);
	}
	free(sum_ns);
	free(nk);
	free(dev);
	free(kname);
	free(linked);
}

static int cmp_inst(const void *pa, const void *pb)
{
	const inst *a = pa, *b = pb;
	if (a->run != b->run)
		return a->run < b->run ? -1 : 1;
	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1;
	int c = strcmp(a->bench, b->bench);
	if (!c)
		c = strcmp(a->key, b->key);
	if (c)
		return c;
	return a->us < b->us ? -1 : a->us > b->us;
}

static void importer_free(importer *im)
{
	for (int64_t i = 0; i < im->n_in; i++)
		free(im->in[i].key);
	free(im->in);
	for (int i = 0; i < im->n_runs; i++) {
		free(im->runs[i].source);
		free(im->runs[i].gpu);
		free(im->runs[i].cuda);
		free(im->runs[i].driver);
		free(im->runs[i].nccl);
	}
	free(im->runs);
}

rm_status rm_trace_calib_import(rm_calib_db *db, const char *const *paths, int n_paths, int gpus_per_node,
				rm_trace_calib_stats *stats, rm_error *err)
{
	importer im = {0};
	rm_status st = RM_OK;
	for (int f = 0; f < n_paths; f++) {
		rm_trace *t = rm_trace_read(paths[f], err);
		if (!t) {
			st = err ? err->status : RM_PARSE;
			goto done;
		}
		collect_trace(&im, t, paths[f], f, gpus_per_node);
		rm_trace_destroy(t);
		im.st.files++;
	}
	if (im.n_in == 0) {
		if (im.unlinked_ops > 0)
			st = rm_error_set(err, RM_MISSING, n_paths > 0 ? paths[0] : "", 0, 0,
					  "%lld operators have shapes but no kernel carries their External id (%lld GEMM, "
					  "%lld attention, %lld NCCL kernels unlinked): an older Kineto gives a kernel its "
					  "launch's correlation id instead, which this importer does not follow. Nothing "
					  "was imported",
					  (long long)im.unlinked_ops, (long long)im.st.skipped[0], (long long)im.st.skipped[1],
					  (long long)im.st.skipped[2]);
		else
			st = rm_error_set(err, RM_MISSING, n_paths > 0 ? paths[0] : "", 0, 0,
					  "no GPU kernel with operator shapes (%lld GEMM, %lld attention, %lld NCCL kernels "
					  "without them): was the profiler run with record_shapes=True? Nothing was imported",
					  (long long)im.st.skipped[0], (long long)im.st.skipped[1], (long long)im.st.skipped[2]);
		goto done;
	}
	qsort(im.in, (size_t)im.n_in, sizeof(*im.in), cmp_inst);
	/* groups of one key: the median time (the mean of the two middle ones for an even count) */
	rm_calib_row_desc *rows = rm_new(rm_calib_row_desc, (size_t)im.n_in);
	char **texts = rm_new(char *, (size_t)im.n_in);
	char (*bench)[32] = rm_xmalloc((size_t)im.n_in * sizeof(*bench));
	int64_t n_rows = 0;
	for (int64_t i = 0; i < im.n_in;) {
		int64_t j = i;
		int64_t kernels = 0;
		while (j < im.n_in && im.in[j].run == im.in[i].run && im.in[j].kind == im.in[i].kind &&
		       !strcmp(im.in[j].bench, im.in[i].bench) && !strcmp(im.in[j].key, im.in[i].key))
			kernels += im.in[j++].kernels;
		int64_t n = j - i;
		double med = n % 2 ? im.in[i + n / 2].us : 0.5 * (im.in[i + n / 2 - 1].us + im.in[i + n / 2].us);
		json_t *p = json_loads(im.in[i].key, 0, NULL);
		json_object_set_new(p, "count", json_integer(n));
		texts[n_rows] = json_dumps(p, JSON_COMPACT | JSON_SORT_KEYS);
		json_decref(p);
		snprintf(bench[n_rows], sizeof(bench[n_rows]), "%s", im.in[i].bench);
		rows[n_rows] = (rm_calib_row_desc){.run = im.in[i].run, .benchmark = bench[n_rows],
						   .params = texts[n_rows], .value = med, .unit = "us"};
		im.st.rows[im.in[i].kind]++;
		im.st.kernels[im.in[i].kind] += kernels;
		n_rows++;
		i = j;
	}
	rm_calib_run_desc *runs = rm_new(rm_calib_run_desc, (size_t)im.n_runs);
	for (int i = 0; i < im.n_runs; i++)
		runs[i] = (rm_calib_run_desc){.machine = "unknown", .gpu = im.runs[i].gpu, .driver = im.runs[i].driver,
					      .cuda = im.runs[i].cuda, .nccl = im.runs[i].nccl,
					      .source = im.runs[i].source};
	rm_calib_import_stats cs;
	st = rm_calib_import_rows(db, runs, im.n_runs, rows, n_rows, &cs, err);
	if (st == RM_OK) {
		im.st.runs = cs.runs;
		im.st.first_run_id = cs.first_run_id;
		if (stats)
			*stats = im.st;
	}
	for (int64_t i = 0; i < n_rows; i++)
		free(texts[i]);
	free(texts);
	free(bench);
	free(rows);
	free(runs);
done:
	importer_free(&im);
	return st;
}
