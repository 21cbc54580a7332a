/*
 * Schedule program JSON (remora/program.h): reading with jansson, and writing. Syntax errors
 * carry jansson's line:column. Semantic errors name the JSON path of the offending value
 * ("ops[12].inputs[1]: unknown tensor 99"); jansson keeps no positions for values, so the
 * line:column of that path is looked up afterwards in libfyaml's events over the same text
 * (common/fy_util.h). The format is documented in docs/sim.md.
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/fy_util.h"
#include "remora/json.h"
#include "remora/program.h"

typedef struct reader {
	const char *file;
	rm_error *err;
	char bad_key[128]; /* an unknown key: the error points at the key, not at its object */
} reader;

/* Every reader helper returns false after setting the error. */
#define FAIL(status, ...) (rm_error_set(r->err, (status), r->file, 0, 0, __VA_ARGS__), false)

static bool check_keys(reader *r, json_t *obj, const char *path, const char *const *allowed)
{
	const char *key;
	json_t *v;
	json_object_foreach(obj, key, v) {
		bool ok = false;
		for (const char *const *a = allowed; *a; a++)
			if (strcmp(*a, key) == 0)
				ok = true;
		if (!ok) {
			char list[256] = "";
			size_t len = 0;
			for (const char *const *a = allowed; *a && len < sizeof(list); a++) {
				int w = snprintf(list + len, sizeof(list) - len, "%s%s",
						 a == allowed ? "" : ", ", *a);
				if (w < 0)
					break;
				len += (size_t)w;
			}
			snprintf(r->bad_key, sizeof(r->bad_key), "%s", key);
			return FAIL(RM_UNKNOWN_KEY, "%s: unknown key '%s' (expected one of: %s)", path,
				    key, list);
		}
	}
	return true;
}

static bool get_obj(reader *r, json_t *parent, const char *key, const char *path, json_t **out)
{
	json_t *v = json_object_get(parent, key);
	if (!v)
		return FAIL(RM_MISSING, "%s: missing key '%s'", path, key);
	if (!json_is_object(v))
		return FAIL(RM_INVALID, "%s.%s: expected an object", path, key);
	*out = v;
	return true;
}

/* An integer in [min, max]; when absent, *out = def if !required. */
static bool get_int(reader *r, json_t *obj, const char *key, const char *path, bool required,
		    int64_t def, int64_t min, int64_t max, int64_t *out)
{
	json_t *v = json_object_get(obj, key);
	if (!v || json_is_null(v)) {
		if (required)
			return FAIL(RM_MISSING, "%s: missing key '%s'", path, key);
		*out = def;
		return true;
	}
	int64_t x;
	if (json_is_integer(v)) {
		x = json_integer_value(v);
	} else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
		   fabs(json_real_value(v)) < 9.2e18) {
		x = (int64_t)json_real_value(v);
	} else {
		return FAIL(RM_INVALID, "%s.%s: expected an integer", path, key);
	}
	if (x < min)
		return FAIL(RM_RANGE, "%s.%s: %lld is too small (must be at least %lld)", path, key,
			    (long long)x, (long long)min);
	if (x > max)
		return FAIL(RM_RANGE, "%s.%s: %lld is too large (must be at most %lld)", path, key,
			    (long long)x, (long long)max);
	*out = x;
	return true;
}

static bool get_i32(reader *r, json_t *obj, const char *key, const char *path, bool required,
		    int32_t def, int32_t min, int32_t max, int32_t *out)
{
	int64_t x;
	if (!get_int(r, obj, key, path, required, def, min, max, &x))
		return false;
	*out = (int32_t)x;
	return true;
}

static bool get_real(reader *r, json_t *obj, const char *key, const char *path, bool required,
		     double def, double *out)
{
	json_t *v = json_object_get(obj, key);
	if (!v || json_is_null(v)) {
		if (required)
			return FAIL(RM_MISSING, "%s: missing key '%s'", path, key);
		*out = def;
		return true;
	}
	if (!json_is_number(v))
		return FAIL(RM_INVALID, "%s.%s: expected a number", path, key);
	double x = json_number_value(v);
	if (!(x >= 0) || !isfinite(x))
		return FAIL(RM_RANGE, "%s.%s: expected a non-negative finite number", path, key);
	*out = x;
	return true;
}

static bool get_bool(reader *r, json_t *obj, const char *key, const char *path, bool def,
		     bool *out)
{
	json_t *v = json_object_get(obj, key);
	if (!v) {
		*out = def;
		return true;
	}
	if (!json_is_boolean(v))
		return FAIL(RM_INVALID, "%s.%s: expected true or false", path, key);
	*out = json_is_true(v);
	return true;
}

static bool get_str(reader *r, json_t *obj, const char *key, const char *path, bool required,
		    const char *def, const char **out)
{
	json_t *v = json_object_get(obj, key);
	if (!v) {
		if (required)
			return FAIL(RM_MISSING, "%s: missing key '%s'", path, key);
		*out = def;
		return true;
	}
	if (!json_is_string(v))
		return FAIL(RM_INVALID, "%s.%s: expected a string", path, key);
	*out = json_string_value(v);
	return true;
}

/* An enumerated string: parse(s, &value) must accept it; expected lists the choices. */
#define GET_ENUM(obj, key, path, required, def, parse, out, expected)                            \
	do {                                                                                     \
		const char *s_;                                                                  \
		if (!get_str(r, (obj), (key), (path), (required), NULL, &s_))                    \
			return false;                                                            \
		if (!s_) {                                                                       \
			*(out) = (def);                                                          \
		} else if (!parse(s_, (out))) {                                                  \
			return FAIL(RM_INVALID, "%s.%s: unknown value '%s' (expected %s)", (path), \
				    (key), s_, (expected));                                      \
		}                                                                                \
	} while (0)

static bool get_array(reader *r, json_t *obj, const char *key, const char *path, bool required,
		      json_t **out)
{
	json_t *v = json_object_get(obj, key);
	if (!v) {
		if (required)
			return FAIL(RM_MISSING, "%s: missing key '%s'", path, key);
		*out = NULL;
		return true;
	}
	if (!json_is_array(v))
		return FAIL(RM_INVALID, "%s.%s: expected an array", path, key);
	*out = v;
	return true;
}

/* Checks that element i of an array is an object whose "id" equals i. */
static bool check_entry(reader *r, json_t *v, const char *what, size_t i, char *path,
			size_t path_size)
{
	snprintf(path, path_size, "%s[%zu]", what, i);
	if (!json_is_object(v))
		return FAIL(RM_INVALID, "%s: expected an object", path);
	int64_t id;
	if (!get_int(r, v, "id", path, true, 0, 0, INT32_MAX, &id))
		return false;
	if ((size_t)id != i)
		return FAIL(RM_INVALID, "%s.id: %lld must equal the position %zu in '%s'", path,
			    (long long)id, i, what);
	return true;
}

static bool get_index_list(reader *r, json_t *obj, const char *key, const char *path,
			   int32_t limit, const char *entity, int32_t **buf, uint32_t *n)
{
	json_t *arr;
	*n = 0;
	if (!get_array(r, obj, key, path, false, &arr))
		return false;
	if (!arr)
		return true;
	size_t count = json_array_size(arr);
	*buf = rm_xrealloc(*buf, (count + 1) * sizeof(int32_t));
	for (size_t j = 0; j < count; j++) {
		json_t *v = json_array_get(arr, j);
		if (!json_is_integer(v))
			return FAIL(RM_INVALID, "%s.%s[%zu]: expected an integer %s id", path, key, j,
				    entity);
		json_int_t x = json_integer_value(v);
		if (x < 0 || x >= limit)
			return FAIL(RM_INVALID, "%s.%s[%zu]: unknown %s %lld (the program has %d)",
				    path, key, j, entity, (long long)x, limit);
		(*buf)[j] = (int32_t)x;
	}
	*n = (uint32_t)count;
	return true;
}

static bool read_cost(reader *r, json_t *op, const char *path, rm_program_op_desc *d,
		      rm_program_phase phase)
{
	char sub[96];
	json_t *c;
	rm_cost_op *cost = &d->cost;
	const char *key = rm_cost_kind_name(cost->kind);
	if (!get_obj(r, op, key, path, &c))
		return false;
	snprintf(sub, sizeof(sub), "%s.%s", path, key);
	const int64_t big = INT64_MAX / 4;
	switch (cost->kind) {
	case RM_COST_GEMM: {
		static const char *const keys[] = {"batch", "m", "n", "k", "dtype", NULL};
		rm_gemm_shape *g = &cost->gemm;
		if (!check_keys(r, c, sub, keys) ||
		    !get_int(r, c, "batch", sub, false, 1, 1, big, &g->batch) ||
		    !get_int(r, c, "m", sub, true, 0, 1, big, &g->m) ||
		    !get_int(r, c, "n", sub, true, 0, 1, big, &g->n) ||
		    !get_int(r, c, "k", sub, true, 0, 1, big, &g->k))
			return false;
		GET_ENUM(c, "dtype", sub, false, RM_DTYPE_BF16, rm_dtype_parse, &g->dtype,
			 "bf16, fp16, fp32, fp8_e4m3, fp8_e5m2");
		break;
	}
	case RM_COST_ATTENTION: {
		static const char *const keys[] = {"b",	     "heads", "kv_heads", "s",	    "d",
						   "causal", "fused", "dtype",	  "window", "dv", NULL};
		rm_attention_shape *a = &cost->attention.shape;
		cost->attention.backward = phase == RM_PPHASE_BWD;
		if (!check_keys(r, c, sub, keys) ||
		    !get_int(r, c, "b", sub, true, 0, 1, big, &a->batch) ||
		    !get_int(r, c, "heads", sub, true, 0, 1, big, &a->heads) ||
		    !get_int(r, c, "kv_heads", sub, false, a->heads, 1, big, &a->kv_heads) ||
		    !get_int(r, c, "s", sub, true, 0, 1, big, &a->seq) ||
		    !get_int(r, c, "d", sub, true, 0, 1, big, &a->head_dim) ||
		    !get_bool(r, c, "causal", sub, true, &a->causal) ||
		    !get_bool(r, c, "fused", sub, true, &a->fused) ||
		    !get_int(r, c, "window", sub, false, 0, 0, big, &a->window) ||
		    !get_int(r, c, "dv", sub, false, 0, 0, big, &a->v_head_dim))
			return false;
		GET_ENUM(c, "dtype", sub, false, RM_DTYPE_BF16, rm_dtype_parse, &a->dtype,
			 "bf16, fp16, fp32, fp8_e4m3, fp8_e5m2");
		break;
	}
	case RM_COST_ELEMENTWISE: {
		static const char *const keys[] = {"bytes_read", "bytes_written", "flops", "class", "kernels", "eager", NULL};
		rm_elementwise_cost *e = &cost->elementwise;
		if (!check_keys(r, c, sub, keys) ||
		    !get_int(r, c, "bytes_read", sub, true, 0, 0, big, &e->bytes_read) ||
		    !get_int(r, c, "bytes_written", sub, true, 0, 0, big, &e->bytes_written) ||
		    !get_real(r, c, "flops", sub, false, 0, &e->flops))
			return false;
		GET_ENUM(c, "class", sub, false, RM_MB_POINTWISE, rm_membound_class_parse, &e->cls,
			 "pointwise, norm, norm_bwd, softmax, gather, optimizer");
		{
			int64_t kn = 1;
			if (!get_int(r, c, "kernels", sub, false, 1, 1, 1 << 20, &kn))
				return false;
			e->kernels = (int32_t)kn;
		}
		if (!get_bool(r, c, "eager", sub, false, &e->eager))
			return false;
		break;
	}
	case RM_COST_COLLECTIVE: {
		static const char *const keys[] = {"op", "bytes", "group_size", "span", NULL};
		rm_collective_cost *k = &cost->collective;
		if (!check_keys(r, c, sub, keys))
			return false;
		GET_ENUM(c, "op", sub, true, RM_COLL_ALL_GATHER, rm_collective_parse, &k->op,
			 "all_gather, reduce_scatter, all_reduce, all_to_all, permute");
		if (!get_int(r, c, "bytes", sub, true, 0, 0, big, &k->bytes) ||
		    !get_i32(r, c, "group_size", sub, true, 1, 1, 1 << 20, &k->group_size) ||
		    !get_i32(r, c, "span", sub, false, 1, 1, 1 << 20, &k->span))
			return false;
		break;
	}
	case RM_COST_COPY: {
		static const char *const keys[] = {"direction", "bytes", NULL};
		rm_copy_cost *k = &cost->copy;
		if (!check_keys(r, c, sub, keys))
			return false;
		GET_ENUM(c, "direction", sub, true, RM_COPY_H2D, rm_copy_dir_parse, &k->dir,
			 "h2d, d2h, d2d");
		if (!get_int(r, c, "bytes", sub, true, 0, 0, big, &k->bytes))
			return false;
		break;
	}
	default:
		return FAIL(RM_INVALID, "%s.kind: unknown kind", path);
	}
	return true;
}

typedef struct op_lists {
	int32_t *inputs, *outputs, *waits, *records;
} op_lists;

static bool read_op(reader *r, rm_program *prog, json_t *v, size_t i, op_lists *lists)
{
	static const char *const keys[] = {
		"id",	   "name",	  "kind",   "stream", "inputs", "outputs", "waits",
		"records", "phase",	  "layer",  "time_s", "sync_reason", "gemm", "attention",
		"elementwise", "collective", "copy", NULL,
	};
	char path[48];
	if (!check_entry(r, v, "ops", i, path, sizeof(path)) || !check_keys(r, v, path, keys))
		return false;
	const char *name;
	rm_cost_kind kind;
	if (!get_str(r, v, "name", path, true, NULL, &name))
		return false;
	GET_ENUM(v, "kind", path, true, RM_COST_GEMM, rm_cost_kind_parse, &kind,
		 "gemm, attention, elementwise, collective, copy");
	rm_program_op_desc d = rm_program_op_desc_init(name, kind, 0);
	for (int k = 0; k < RM_COST_KIND_COUNT; k++)
		if (k != (int)kind && json_object_get(v, rm_cost_kind_name((rm_cost_kind)k)))
			return FAIL(RM_INVALID, "%s.%s: an op of kind '%s' takes '%s', not '%s'", path,
				    rm_cost_kind_name((rm_cost_kind)k), rm_cost_kind_name(kind),
				    rm_cost_kind_name(kind), rm_cost_kind_name((rm_cost_kind)k));
	GET_ENUM(v, "phase", path, false, RM_PPHASE_FWD, rm_program_phase_parse, &d.phase,
		 "fwd, bwd, recompute, optimizer");
	if (!get_i32(r, v, "stream", path, true, 0, INT32_MIN, INT32_MAX, &d.stream))
		return false;
	if (d.stream < 0 || d.stream >= prog->n_streams)
		return FAIL(RM_INVALID, "%s.stream: unknown stream %d (the program has %d)", path,
			    d.stream, prog->n_streams);
	if (!get_i32(r, v, "layer", path, false, -1, -1, INT32_MAX, &d.layer) ||
	    !get_real(r, v, "time_s", path, false, -1, &d.time_s) ||
	    !get_str(r, v, "sync_reason", path, false, NULL, &d.sync_reason) ||
	    !read_cost(r, v, path, &d, d.phase))
		return false;
	if (d.sync_reason && kind != RM_COST_COLLECTIVE)
		return FAIL(RM_INVALID, "%s.sync_reason: only collectives have a sync reason", path);
	if (!get_index_list(r, v, "inputs", path, prog->n_tensors, "tensor", &lists->inputs,
			    &d.n_inputs) ||
	    !get_index_list(r, v, "outputs", path, prog->n_tensors, "tensor", &lists->outputs,
			    &d.n_outputs) ||
	    !get_index_list(r, v, "waits", path, prog->n_events, "event", &lists->waits,
			    &d.n_waits) ||
	    !get_index_list(r, v, "records", path, prog->n_events, "event", &lists->records,
			    &d.n_records))
		return false;
	d.inputs = lists->inputs;
	d.outputs = lists->outputs;
	d.waits = lists->waits;
	d.records = lists->records;
	rm_program_add_op(prog, &d);
	return true;
}

static bool read_program(reader *r, json_t *root, rm_program *prog)
{
	static const char *const top_keys[] = {"schema",  "name",    "tokens", "model_flops", "runtime",
					       "streams", "tensors", "events", "ops",
					       NULL};
	char path[48];
	if (!json_is_object(root))
		return FAIL(RM_INVALID, "(top level): expected an object");
	if (!check_keys(r, root, "(top level)", top_keys))
		return false;
	const char *schema, *name;
	if (!get_str(r, root, "schema", "(top level)", true, NULL, &schema))
		return false;
	if (strcmp(schema, RM_PROGRAM_SCHEMA) != 0)
		return FAIL(RM_UNSUPPORTED, "schema: '%s' is not supported (expected '%s')", schema,
			    RM_PROGRAM_SCHEMA);
	if (!get_str(r, root, "name", "(top level)", false, "", &name) ||
	    !get_int(r, root, "tokens", "(top level)", false, 0, 0, INT64_MAX / 4, &prog->tokens) ||
	    !get_real(r, root, "model_flops", "(top level)", false, -1, &prog->model_flops))
		return false;
	free(prog->name);
	prog->name = rm_xstrdup(name);
	json_t *rt = json_object_get(root, "runtime");
	if (rt && !json_is_null(rt)) {
		static const char *const rt_keys[] = {"hardware", "power_w", "hbm_bytes", "attention_kernel", "fused", "host_us",
						      "hw_queues", "allocator", "alloc_fraction", "collective_engine", NULL};
		const char *hwn;
		rm_program_runtime *pr = &prog->runtime;
		if (!json_is_object(rt))
			return FAIL(RM_INVALID, "runtime: expected an object");
		if (!check_keys(r, rt, "runtime", rt_keys))
			return false;
		pr->kernels = rm_kernel_config_default();
		if (!get_str(r, rt, "hardware", "runtime", false, "", &hwn) ||
		    !get_real(r, rt, "power_w", "runtime", false, 0, &pr->power_w) ||
		    !get_real(r, rt, "hbm_bytes", "runtime", false, 0, &pr->hbm_bytes) ||
		    !get_bool(r, rt, "fused", "runtime", true, &pr->kernels.fused) ||
		    !get_real(r, rt, "host_us", "runtime", false, 0, &pr->kernels.host_us))
			return false;
		const char *alloc, *engine;
		int64_t queues = 0;
		if (!get_int(r, rt, "hw_queues", "runtime", false, 0, 1, 128, &queues) ||
		    !get_str(r, rt, "allocator", "runtime", false, "", &alloc) ||
		    !get_real(r, rt, "alloc_fraction", "runtime", false, 0, &pr->alloc_fraction) ||
		    !get_str(r, rt, "collective_engine", "runtime", false, "sm", &engine))
			return false;
		if (strcmp(engine, "copy_engine") == 0)
			pr->kernels.ce_collectives = true;
		else if (strcmp(engine, "sm") != 0)
			return FAIL(RM_INVALID, "runtime.collective_engine: expected sm or copy_engine, got '%.40s'", engine);
		pr->hw_queues = (int)queues;
		if (strlen(alloc) >= sizeof(pr->allocator))
			return FAIL(RM_RANGE, "runtime.allocator: unknown allocator '%.40s'", alloc);
		snprintf(pr->allocator, sizeof(pr->allocator), "%s", alloc);
		/* what a GPU can be: the scenario's own bounds (remora/scenario.h) */
		if (pr->power_w != 0 && (pr->power_w < 100 || pr->power_w > 5000))
			return FAIL(RM_RANGE, "runtime.power_w: %g W is outside 100-5000 W", pr->power_w);
		if (pr->hbm_bytes != 0 && (pr->hbm_bytes < 1073741824.0 || pr->hbm_bytes > 1125899906842624.0))
			return FAIL(RM_RANGE, "runtime.hbm_bytes: %g is outside 1 GiB-1 PiB", pr->hbm_bytes);
		if (pr->kernels.host_us > 1e4)
			return FAIL(RM_RANGE, "runtime.host_us: %g us per kernel is more than 10 ms", pr->kernels.host_us);
		if (pr->alloc_fraction > 1)
			return FAIL(RM_RANGE, "runtime.alloc_fraction: %g is not a fraction of memory", pr->alloc_fraction);
		if (strlen(hwn) >= sizeof(pr->hardware))
			return FAIL(RM_RANGE, "runtime.hardware: longer than %zu characters", sizeof(pr->hardware) - 1);
		snprintf(pr->hardware, sizeof(pr->hardware), "%s", hwn);
		GET_ENUM(rt, "attention_kernel", "runtime", false, RM_ATTN_CUDNN, rm_attention_kernel_parse,
			 &pr->kernels.attention, "flash2, flash3, cudnn");
		pr->set = true;
	}

	json_t *streams, *tensors, *events, *ops, *v;
	size_t i;
	if (!get_array(r, root, "streams", "(top level)", true, &streams) ||
	    !get_array(r, root, "tensors", "(top level)", false, &tensors) ||
	    !get_array(r, root, "events", "(top level)", false, &events) ||
	    !get_array(r, root, "ops", "(top level)", true, &ops))
		return false;
	if (json_array_size(streams) == 0)
		return FAIL(RM_INVALID, "streams: a program needs at least one stream");

	json_array_foreach(streams, i, v) {
		static const char *const keys[] = {"id", "name", "kind", "priority", NULL};
		if (!check_entry(r, v, "streams", i, path, sizeof(path)) ||
		    !check_keys(r, v, path, keys))
			return false;
		rm_stream_kind kind;
		int32_t prio;
		if (!get_str(r, v, "name", path, true, NULL, &name))
			return false;
		GET_ENUM(v, "kind", path, false, RM_STREAM_COMPUTE, rm_stream_kind_parse, &kind,
			 "compute, collective, copy");
		if (!get_i32(r, v, "priority", path, false, 0, -1000, 1000, &prio))
			return false;
		rm_program_add_stream(prog, name, kind, prio);
	}
	if (tensors) {
		json_array_foreach(tensors, i, v) {
			static const char *const keys[] = {"id",       "name",	     "bytes", "role",
							   "location", "persistent", NULL};
			if (!check_entry(r, v, "tensors", i, path, sizeof(path)) ||
			    !check_keys(r, v, path, keys))
				return false;
			int64_t bytes;
			rm_tensor_role role;
			rm_location loc;
			bool persistent;
			if (!get_str(r, v, "name", path, true, NULL, &name) ||
			    !get_int(r, v, "bytes", path, true, 0, 0, INT64_MAX / 4, &bytes))
				return false;
			GET_ENUM(v, "role", path, true, RM_ROLE_ACTIVATION, rm_tensor_role_parse, &role,
				 "param_shard, gathered_param, activation, residual, gradient, "
				 "optimizer_state, workspace");
			GET_ENUM(v, "location", path, false, RM_LOC_DEVICE, rm_location_parse, &loc,
				 "device, host");
			if (!get_bool(r, v, "persistent", path, false, &persistent))
				return false;
			rm_program_add_tensor(prog, name, bytes, role, loc, persistent);
		}
	}
	if (events) {
		json_array_foreach(events, i, v) {
			static const char *const keys[] = {"id", "name", NULL};
			if (!check_entry(r, v, "events", i, path, sizeof(path)) ||
			    !check_keys(r, v, path, keys) ||
			    !get_str(r, v, "name", path, false, "", &name))
				return false;
			rm_program_add_event(prog, name);
		}
	}
	op_lists lists = {0};
	bool ok = true;
	json_array_foreach(ops, i, v) {
		if (!(ok = read_op(r, prog, v, i, &lists)))
			break;
	}
	free(lists.inputs);
	free(lists.outputs);
	free(lists.waits);
	free(lists.records);
	return ok;
}

/* Gives a semantic error without a position the line:column of the value its path names. */
static void locate_error(const reader *r, const char *text, size_t len)
{
	rm_error *err = r->err;
	if (!err || err->line > 0)
		return;
	char path[256];
	if (!rm__fy_message_path(err->msg, "", path, sizeof(path)))
		return;
	if (r->bad_key[0]) {
		size_t u = strlen(path);
		if (snprintf(path + u, sizeof(path) - u, "%s%s", u > 1 ? "/" : "", r->bad_key) >=
		    (int)(sizeof(path) - u))
			return;
	}
	int line, col;
	if (rm__fy_path_position(text, len, true, path, r->bad_key[0] != '\0', &line, &col)) {
		err->line = line;
		err->column = col;
	}
}

rm_program *rm_program_parse(const char *text, size_t len, const char *file, rm_error *err)
{
	reader rd = {.file = file, .err = err};
	json_error_t jerr;
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		int column = jerr.column;
		if (jerr.line > 0 && column <= 0 && jerr.position >= 0 && (size_t)jerr.position <= len) {
			/* at the end of the input jansson gives no column: count it from the byte offset */
			size_t at = (size_t)jerr.position, start = at;
			while (start > 0 && text[start - 1] != '\n')
				start--;
			column = (int)(at - start) + 1;
		}
		rm_error_set(err, RM_PARSE, file, jerr.line > 0 ? jerr.line : 0, column > 0 ? column : 0, "%s",
			     jerr.text);
		return NULL;
	}
	rm_program *prog = rm_program_create(NULL);
	bool ok = read_program(&rd, root, prog);
	json_decref(root);
	if (ok)
		ok = rm_program_validate(prog, file, err) == RM_OK;
	if (!ok) {
		locate_error(&rd, text, len);
		rm_program_destroy(prog);
		return NULL;
	}
	return prog;
}

rm_program *rm_program_load(const char *path, rm_error *err)
{
	char *text;
	size_t len;
	if (!rm_read_file(path, &text, &len, err))
		return NULL;
	rm_program *prog = rm_program_parse(text, len, path, err);
	free(text);
	return prog;
}

/* ---- writing --------------------------------------------------------------------------- */

static json_t *index_list(const rm_program *prog, rm_program_list l)
{
	json_t *a = json_array();
	const int32_t *v = rm_program_refs(prog, l);
	for (uint32_t j = 0; j < l.count; j++)
		json_array_append_new(a, json_integer(v[j]));
	return a;
}

static json_t *cost_json(const rm_program_op *op)
{
	const rm_cost_op *c = &op->cost;
	json_t *o = json_object();
	switch (c->kind) {
	case RM_COST_GEMM:
		json_object_set_new(o, "batch", json_integer(c->gemm.batch));
		json_object_set_new(o, "m", json_integer(c->gemm.m));
		json_object_set_new(o, "n", json_integer(c->gemm.n));
		json_object_set_new(o, "k", json_integer(c->gemm.k));
		json_object_set_new(o, "dtype", json_string(rm_dtype_name(c->gemm.dtype)));
		break;
	case RM_COST_ATTENTION: {
		const rm_attention_shape *a = &c->attention.shape;
		json_object_set_new(o, "b", json_integer(a->batch));
		json_object_set_new(o, "heads", json_integer(a->heads));
		json_object_set_new(o, "kv_heads", json_integer(a->kv_heads));
		json_object_set_new(o, "s", json_integer(a->seq));
		json_object_set_new(o, "d", json_integer(a->head_dim));
		json_object_set_new(o, "causal", json_boolean(a->causal));
		json_object_set_new(o, "fused", json_boolean(a->fused));
		json_object_set_new(o, "dtype", json_string(rm_dtype_name(a->dtype)));
		if (a->window > 0)
			json_object_set_new(o, "window", json_integer(a->window));
		if (a->v_head_dim > 0)
			json_object_set_new(o, "dv", json_integer(a->v_head_dim));
		break;
	}
	case RM_COST_ELEMENTWISE:
		json_object_set_new(o, "bytes_read", json_integer(c->elementwise.bytes_read));
		json_object_set_new(o, "bytes_written", json_integer(c->elementwise.bytes_written));
		json_object_set_new(o, "flops", json_real(c->elementwise.flops));
		if (c->elementwise.cls != RM_MB_POINTWISE)
			json_object_set_new(o, "class", json_string(rm_membound_class_name(c->elementwise.cls)));
		if (c->elementwise.kernels > 1)
			json_object_set_new(o, "kernels", json_integer(c->elementwise.kernels));
		if (c->elementwise.eager)
			json_object_set_new(o, "eager", json_true());
		break;
	case RM_COST_COLLECTIVE:
		json_object_set_new(o, "op", json_string(rm_collective_name(c->collective.op)));
		json_object_set_new(o, "bytes", json_integer(c->collective.bytes));
		json_object_set_new(o, "group_size", json_integer(c->collective.group_size));
		json_object_set_new(o, "span", json_integer(c->collective.span));
		break;
	case RM_COST_COPY:
		json_object_set_new(o, "direction", json_string(rm_copy_dir_name(c->copy.dir)));
		json_object_set_new(o, "bytes", json_integer(c->copy.bytes));
		break;
	default:
		break;
	}
	return o;
}

bool rm_program_write(const rm_program *prog, FILE *out, rm_error *err)
{
	json_t *doc = json_object();
	json_object_set_new(doc, "schema", json_string(RM_PROGRAM_SCHEMA));
	json_object_set_new(doc, "name", rm_json_string(prog->name ? prog->name : ""));
	if (prog->tokens > 0)
		json_object_set_new(doc, "tokens", json_integer(prog->tokens));
	if (prog->model_flops >= 0)
		json_object_set_new(doc, "model_flops", json_real(prog->model_flops));
	if (prog->runtime.set) {
		const rm_program_runtime *pr = &prog->runtime;
		json_t *rt = json_object();
		if (pr->hardware[0])
			json_object_set_new(rt, "hardware", rm_json_string(pr->hardware));
		if (pr->power_w > 0)
			json_object_set_new(rt, "power_w", json_real(pr->power_w));
		if (pr->hbm_bytes > 0)
			json_object_set_new(rt, "hbm_bytes", json_real(pr->hbm_bytes));
		json_object_set_new(rt, "attention_kernel", json_string(rm_attention_kernel_name(pr->kernels.attention)));
		json_object_set_new(rt, "fused", json_boolean(pr->kernels.fused));
		if (pr->kernels.host_us > 0)
			json_object_set_new(rt, "host_us", json_real(pr->kernels.host_us));
		if (pr->kernels.ce_collectives)
			json_object_set_new(rt, "collective_engine", json_string("copy_engine"));
		if (pr->hw_queues > 0)
			json_object_set_new(rt, "hw_queues", json_integer(pr->hw_queues));
		if (pr->allocator[0])
			json_object_set_new(rt, "allocator", json_string(pr->allocator));
		if (pr->alloc_fraction > 0)
			json_object_set_new(rt, "alloc_fraction", json_real(pr->alloc_fraction));
		json_object_set_new(doc, "runtime", rt);
	}
	json_t *a = json_array();
	for (int32_t i = 0; i < prog->n_streams; i++) {
		const rm_program_stream *s = &prog->streams[i];
		json_t *o = json_object();
		json_object_set_new(o, "id", json_integer(i));
		json_object_set_new(o, "name", rm_json_string(s->name));
		json_object_set_new(o, "kind", json_string(rm_stream_kind_name(s->kind)));
		json_object_set_new(o, "priority", json_integer(s->priority));
		json_array_append_new(a, o);
	}
	json_object_set_new(doc, "streams", a);
	a = json_array();
	for (int32_t i = 0; i < prog->n_tensors; i++) {
		const rm_program_tensor *t = &prog->tensors[i];
		json_t *o = json_object();
		json_object_set_new(o, "id", json_integer(i));
		json_object_set_new(o, "name", rm_json_string(t->name));
		json_object_set_new(o, "bytes", json_integer(t->bytes));
		json_object_set_new(o, "role", json_string(rm_tensor_role_name(t->role)));
		json_object_set_new(o, "location", json_string(rm_location_name(t->location)));
		json_object_set_new(o, "persistent", json_boolean(t->persistent));
		json_array_append_new(a, o);
	}
	json_object_set_new(doc, "tensors", a);
	a = json_array();
	for (int32_t i = 0; i < prog->n_events; i++) {
		json_t *o = json_object();
		json_object_set_new(o, "id", json_integer(i));
		json_object_set_new(o, "name", rm_json_string(prog->events[i].name));
		json_array_append_new(a, o);
	}
	json_object_set_new(doc, "events", a);
	a = json_array();
	for (int32_t i = 0; i < prog->n_ops; i++) {
		const rm_program_op *op = &prog->ops[i];
		json_t *o = json_object();
		json_object_set_new(o, "id", json_integer(i));
		json_object_set_new(o, "name", rm_json_string(op->name));
		json_object_set_new(o, "kind", json_string(rm_cost_kind_name(op->cost.kind)));
		json_object_set_new(o, rm_cost_kind_name(op->cost.kind), cost_json(op));
		json_object_set_new(o, "stream", json_integer(op->stream));
		json_object_set_new(o, "phase", json_string(rm_program_phase_name(op->phase)));
		if (op->layer >= 0)
			json_object_set_new(o, "layer", json_integer(op->layer));
		if (op->time_s >= 0)
			json_object_set_new(o, "time_s", json_real(op->time_s));
		if (op->sync_reason)
			json_object_set_new(o, "sync_reason", rm_json_string(op->sync_reason));
		json_object_set_new(o, "inputs", index_list(prog, op->inputs));
		json_object_set_new(o, "outputs", index_list(prog, op->outputs));
		json_object_set_new(o, "waits", index_list(prog, op->waits));
		json_object_set_new(o, "records", index_list(prog, op->records));
		json_array_append_new(a, o);
	}
	json_object_set_new(doc, "ops", a);
	int rc = json_dumpf(doc, out, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
	json_decref(doc);
	if (rc != 0 || fputc('\n', out) == EOF)
		return rm_error_set(err, RM_IO, NULL, 0, 0, "writing the program failed"), false;
	return true;
}
