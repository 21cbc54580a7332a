/* Unit tests of the schedule program: JSON reading and writing, validation (sim/program*.c). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remora/program.h"

static void data_path(char *buf, size_t size, const char *rel)
{
	const char *dir = getenv("REMORA_TEST_DATA");
	cr_assert_not_null(dir, "REMORA_TEST_DATA is not set");
	snprintf(buf, size, "%s/programs/%s", dir, rel);
}

Test(program, example_loads)
{
	char path[1024];
	data_path(path, sizeof(path), "example.json");
	rm_error err;
	rm_error_clear(&err);
	rm_program *p = rm_program_load(path, &err);
	cr_assert_not_null(p, "%s", err.msg);
	cr_assert_str_eq(p->name, "two-layer-fsdp-example");
	cr_assert_eq(p->tokens, 4096);
	cr_assert_eq(p->n_streams, 3);
	cr_assert_eq(p->n_tensors, 12);
	cr_assert_eq(p->n_events, 4);
	cr_assert_eq(p->n_ops, 10);
	cr_assert_eq(p->streams[1].priority, -1);
	cr_assert_eq(p->streams[1].kind, RM_STREAM_COLLECTIVE);
	cr_assert_eq(p->streams[2].priority, 0);
	const rm_program_op *op = &p->ops[2];
	cr_assert_str_eq(op->name, "layer00/fwd/dot_mlp_up");
	cr_assert_eq(op->cost.kind, RM_COST_GEMM);
	cr_assert_eq(op->cost.gemm.batch, 1); /* default */
	cr_assert_eq(op->cost.gemm.n, 14336);
	cr_assert_eq(op->inputs.count, 2);
	cr_assert_eq(rm_program_refs(p, op->inputs)[1], 3);
	cr_assert_eq(rm_program_refs(p, op->waits)[0], 0);
	cr_assert_eq(p->ops[7].cost.attention.backward, true); /* phase bwd */
	cr_assert_eq(p->ops[7].cost.attention.shape.kv_heads, 8);
	cr_assert_eq(p->ops[8].cost.collective.span, 1);
	cr_assert_str_eq(p->ops[9].sync_reason, "remat: saved name made the collective synchronous");
	cr_assert_eq(p->tensors[9].location, RM_LOC_HOST);
	cr_assert_eq(p->tensors[0].persistent, true);
	cr_assert_eq(p->tensors[3].persistent, false);
	rm_program_destroy(p);
}

static char *write_to_string(const rm_program *p, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	cr_assert_not_null(f);
	rm_error err;
	cr_assert(rm_program_write(p, f, &err));
	fclose(f);
	return buf;
}

Test(program, write_then_read_is_identity)
{
	char path[1024];
	data_path(path, sizeof(path), "example.json");
	rm_error err;
	rm_program *p = rm_program_load(path, &err);
	cr_assert_not_null(p, "%s", err.msg);
	size_t l1, l2;
	char *t1 = write_to_string(p, &l1);
	rm_program *q = rm_program_parse(t1, l1, "(written)", &err);
	cr_assert_not_null(q, "%s", err.msg);
	char *t2 = write_to_string(q, &l2);
	cr_assert_eq(l1, l2);
	cr_assert_eq(memcmp(t1, t2, l1), 0);
	cr_assert_eq(q->n_ops, p->n_ops);
	for (int32_t i = 0; i < p->n_ops; i++) {
		cr_assert_str_eq(q->ops[i].name, p->ops[i].name);
		cr_assert_eq(memcmp(&q->ops[i].cost, &p->ops[i].cost, sizeof(rm_cost_op)), 0,
			     "op %d", i);
	}
	free(t1);
	free(t2);
	rm_program_destroy(p);
	rm_program_destroy(q);
}

/*
 * Every malformed file fails with the expected status and a message naming the place: semantic
 * errors keep their JSON path and point at the offending value (an unknown key at the key).
 */
Test(program, malformed_files_fail_clearly)
{
	static const struct {
		const char *file;
		rm_status status;
		const char *needle;
		int line;   /* > 0: the error must carry this line */
		int column; /* > 0: and this column (counted by hand in the file) */
	} cases[] = {
		{"syntax.json", RM_PARSE, "unexpected token", 6, 3},
		{"truncated.json", RM_PARSE, "", 5, 75},
		{"empty.json", RM_PARSE, "expected", 1, 1},
		{"duplicate_key.json", RM_PARSE, "duplicate object key", 5, 7},
		{"not_object.json", RM_INVALID, "expected an object", 1, 1},
		{"wrong_schema.json", RM_UNSUPPORTED, "remora.program/9", 1, 12},
		{"unknown_key.json", RM_UNKNOWN_KEY, "ops[1].elementwise: unknown key 'flop'", 7, 59},
		{"unknown_tensor.json", RM_INVALID, "ops[1].inputs[0]: unknown tensor 7", 7, 102},
		{"unknown_stream.json", RM_INVALID, "ops[0].stream: unknown stream 3", 5, 54},
		{"unknown_event.json", RM_INVALID, "ops[0].waits[0]: unknown event 1", 6, 101},
		{"unproduced.json", RM_INVALID, "ops[0].inputs[1]: op 'a' reads tensor 1 'act', which no op produces", 7, 105},
		{"never_recorded.json", RM_INVALID, "ops[1].waits[0]: op 'mm' waits on event 0 'ag.done', which no op records", 8, 102},
		{"cycle.json", RM_INVALID, "dependency cycle (deadlock): ops[0] 'mm0' <- ops[2] 'ag' <- ops[1] 'mm1'", 0, 0},
		{"bad_size.json", RM_RANGE, "tensors[0].bytes: -4 is too small", 4, 47},
		{"bad_shape.json", RM_RANGE, "ops[0].gemm.m: 0 is too small", 5, 71},
		{"bad_id.json", RM_INVALID, "ops[0].id: 1 must equal the position 0", 5, 12},
		{"two_producers.json", RM_INVALID, "ops[1].outputs[0]: tensor 0 'x' is already produced by ops[0] 'a'", 7, 103},
		{"wrong_cost_key.json", RM_INVALID, "ops[0].copy: an op of kind 'gemm' takes 'gemm'", 5, 65},
		{"bad_enum.json", RM_INVALID, "ops[0].collective.op: unknown value 'all_scatter'", 6, 27},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char path[1024], rel[128];
		snprintf(rel, sizeof(rel), "bad/%s", cases[i].file);
		data_path(path, sizeof(path), rel);
		rm_error err;
		rm_error_clear(&err);
		rm_program *p = rm_program_load(path, &err);
		cr_expect_null(p, "%s: accepted", cases[i].file);
		rm_program_destroy(p);
		cr_expect_eq(err.status, cases[i].status, "%s: status %s (%s)", cases[i].file,
			     rm_status_name(err.status), err.msg);
		cr_expect(strstr(err.msg, cases[i].needle) != NULL, "%s: message '%s'", cases[i].file,
			  err.msg);
		cr_expect_str_eq(err.file, path, "%s: file", cases[i].file);
		if (cases[i].line > 0)
			cr_expect_eq(err.line, cases[i].line, "%s: line %d", cases[i].file, err.line);
		if (cases[i].column > 0)
			cr_expect_eq(err.column, cases[i].column, "%s: column %d", cases[i].file,
				     err.column);
	}
}

Test(program, missing_file_is_io_error)
{
	rm_error err;
	cr_assert_null(rm_program_load("/nonexistent/program.json", &err));
	cr_assert_eq(err.status, RM_IO);
}

/* Every prefix of a valid file is rejected cleanly (never a crash or a hang). */
Test(program, every_truncation_fails_cleanly)
{
	char path[1024];
	data_path(path, sizeof(path), "example.json");
	char *text;
	size_t len;
	rm_error err;
	cr_assert(rm_read_file(path, &text, &len, &err));
	size_t failures = 0, tries = 0;
	for (size_t n = 0; n + 2 < len; n += 3, tries++) { /* short of the closing "}\n" */
		rm_program *p = rm_program_parse(text, n, "prefix", &err);
		if (!p)
			failures++;
		rm_program_destroy(p);
	}
	cr_assert_eq(failures, tries);
	free(text);
}

Test(program, builder_validation)
{
	rm_program *p = rm_program_create("built");
	int32_t s = rm_program_add_stream(p, "compute", RM_STREAM_COMPUTE, 0);
	int32_t t = rm_program_add_tensor(p, "x", 8, RM_ROLE_ACTIVATION, RM_LOC_DEVICE, false);
	rm_program_op_desc d = rm_program_op_desc_init("a", RM_COST_GEMM, s);
	d.outputs = &t;
	d.n_outputs = 1;
	rm_program_add_op(p, &d);
	rm_error err;
	cr_assert_eq(rm_program_validate(p, "mem", &err), RM_OK, "%s", err.msg);
	/* An op waiting on its own event. */
	int32_t e = rm_program_add_event(p, "e");
	d = rm_program_op_desc_init("self", RM_COST_GEMM, s);
	d.waits = &e;
	d.n_waits = 1;
	d.records = &e;
	d.n_records = 1;
	rm_program_add_op(p, &d);
	cr_assert_eq(rm_program_validate(p, "mem", &err), RM_INVALID);
	cr_assert(strstr(err.msg, "ops[1].waits[0]") != NULL, "%s", err.msg);
	rm_program_destroy(p);

	p = rm_program_create(NULL);
	rm_program_add_stream(p, "compute", RM_STREAM_COMPUTE, 0);
	d = rm_program_op_desc_init("bad stream", RM_COST_GEMM, 5);
	rm_program_add_op(p, &d);
	cr_assert_eq(rm_program_validate(p, NULL, &err), RM_INVALID);
	cr_assert(strstr(err.msg, "ops[0].stream: unknown stream 5") != NULL, "%s", err.msg);
	rm_program_destroy(p);
	rm_program_destroy(NULL);
}

Test(program, enum_names_round_trip)
{
	for (int k = 0; k < RM_ROLE_COUNT; k++) {
		rm_tensor_role r;
		cr_assert(rm_tensor_role_parse(rm_tensor_role_name((rm_tensor_role)k), &r));
		cr_assert_eq((int)r, k);
	}
	for (int k = 0; k < RM_PPHASE_COUNT; k++) {
		rm_program_phase ph;
		cr_assert(rm_program_phase_parse(rm_program_phase_name((rm_program_phase)k), &ph));
		cr_assert_eq((int)ph, k);
	}
	rm_stream_kind sk;
	cr_assert(rm_stream_kind_parse("copy", &sk) && sk == RM_STREAM_COPY);
	rm_location loc;
	cr_assert_not(rm_location_parse("cloud", &loc));
}

/* NULL + 0 is undefined behaviour in C (clang's -fsanitize=pointer-overflow reports it): the
 * reference pool of a new program is allocated, so the empty lists of an op without inputs
 * (tests/data/exec/int_gemm.json) point into it. */
Test(program, empty_lists_point_into_an_allocated_pool)
{
	rm_program *p = rm_program_create("empty");
	rm_program_list none = {0, 0};
	cr_assert_not_null(rm_program_refs(p, none));
	int32_t s = rm_program_add_stream(p, "compute", RM_STREAM_COMPUTE, 0);
	rm_program_op_desc d = rm_program_op_desc_init("matmul", RM_COST_GEMM, s);
	d.cost.gemm = (rm_gemm_shape){.batch = 1, .m = 16, .n = 16, .k = 16, .dtype = RM_DTYPE_BF16};
	d.time_s = 1e-6;
	rm_program_add_op(p, &d);
	cr_assert_not_null(rm_program_refs(p, p->ops[0].inputs));
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_program_validate(p, NULL, &err), RM_OK, "%s", err.msg);
	rm_program_destroy(p);
}

/* Each tensor may take up to 2^61 - 1 B, but their sum feeds the engine's live memory and the
 * executor's regions (four such tensors pass 2^63), so the sum is bounded by 2^61 - 1 as well. */
Test(program, tensor_bytes_adding_up_past_2_61_are_refused)
{
	rm_program *p = rm_program_create("huge");
	int64_t big = INT64_MAX / 4; /* the largest size program_json.c accepts */
	for (int i = 0; i < 4; i++) {
		char name[8];
		snprintf(name, sizeof(name), "w%d", i);
		rm_program_add_tensor(p, name, i < 2 ? big / 2 : big, RM_ROLE_PARAM_SHARD, RM_LOC_DEVICE, true);
	}
	rm_error err;
	rm_error_clear(&err);
	/* big/2 + big/2 = big - 1 fits; the third tensor passes 2^61 - 1 */
	cr_assert_eq(rm_program_validate(p, "huge.json", &err), RM_RANGE);
	cr_assert(strstr(err.msg, "tensors[2].bytes: the tensors up to this one take more than 2^61 B"), "%s",
		  err.msg);
	rm_program_destroy(p);
}

/* The "runtime" a schedule records survives a write and a read, and values no GPU has are refused
 * at their position. */
Test(program, runtime_round_trips_and_is_checked)
{
	rm_program *p = rm_program_create("rt");
	rm_program_add_stream(p, "compute", RM_STREAM_COMPUTE, 0);
	rm_program_op_desc d = rm_program_op_desc_init("k", RM_COST_ELEMENTWISE, 0);
	d.cost.elementwise = (rm_elementwise_cost){.bytes_read = 100, .cls = RM_MB_NORM, .kernels = 8};
	rm_program_add_op(p, &d);
	p->runtime.set = true;
	snprintf(p->runtime.hardware, sizeof(p->runtime.hardware), "h100-sxm-96gb");
	p->runtime.power_w = 500;
	p->runtime.hbm_bytes = 95.0 * 1073741824.0;
	p->runtime.kernels = (rm_kernel_config){.attention = RM_ATTN_FLASH2, .fused = false, .host_us = 6};
	p->runtime.hw_queues = 1;
	snprintf(p->runtime.allocator, sizeof(p->runtime.allocator), "pytorch");
	size_t len;
	char *text = write_to_string(p, &len);
	rm_error err;
	rm_error_clear(&err);
	rm_program *q = rm_program_parse(text, len, "rt.json", &err);
	cr_assert_not_null(q, "%s", err.msg);
	cr_assert(q->runtime.set);
	cr_assert_str_eq(q->runtime.hardware, "h100-sxm-96gb");
	cr_assert_float_eq(q->runtime.power_w, 500, 0);
	cr_assert_float_eq(q->runtime.hbm_bytes, 95.0 * 1073741824.0, 0);
	cr_assert_eq(q->runtime.kernels.attention, RM_ATTN_FLASH2);
	cr_assert(!q->runtime.kernels.fused);
	cr_assert_float_eq(q->runtime.kernels.host_us, 6, 0);
	cr_assert_eq(q->runtime.hw_queues, 1);
	cr_assert_str_eq(q->runtime.allocator, "pytorch");
	cr_assert_eq(q->ops[0].cost.elementwise.cls, RM_MB_NORM);
	cr_assert_eq(q->ops[0].cost.elementwise.kernels, 8);
	rm_program_destroy(q);
	free(text);
	rm_program_destroy(p);
	static const struct {
		const char *runtime, *needle;
	} bad[] = {
		{"{\"fused\": true, \"hbm_bytes\": 1e30}", "runtime.hbm_bytes"},
		{"{\"fused\": true, \"power_w\": 50}", "runtime.power_w"},
		{"{\"fused\": true, \"host_us\": 1e9}", "runtime.host_us"},
		{"{\"fused\": true, \"attention_kernel\": \"nope\"}", "runtime.attention_kernel"},
		{"{\"fused\": true, \"watts\": 500}", "watts"},
		{"{\"fused\": true, \"hw_queues\": 0}", "runtime.hw_queues"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char doc[512];
		snprintf(doc, sizeof(doc),
			 "{\"schema\": \"remora.program/1\", \"runtime\": %s,\n \"streams\": [{\"id\": 0, \"name\": \"c\"}], "
			 "\"ops\": []}",
			 bad[i].runtime);
		rm_error_clear(&err);
		cr_assert_null(rm_program_parse(doc, strlen(doc), "bad.json", &err), "%s accepted", bad[i].runtime);
		cr_assert(strstr(err.msg, bad[i].needle), "%s: %s", bad[i].runtime, err.msg);
		cr_assert_gt(err.line, 0, "%s: no position", err.msg);
	}
}

/* A reset program is empty as a new one, and one built into it again writes the same file. */
static void build_small(rm_program *p)
{
	int32_t s = rm_program_add_stream(p, "compute", RM_STREAM_COMPUTE, 0);
	int32_t t = rm_program_add_tensor(p, "x", 1024, RM_ROLE_ACTIVATION, RM_LOC_DEVICE, false);
	int32_t e = rm_program_add_event(p, "");
	rm_program_op_desc d = rm_program_op_desc_init("a", RM_COST_ELEMENTWISE, s);
	d.cost.elementwise.bytes_written = 1024;
	d.outputs = &t;
	d.n_outputs = 1;
	d.records = &e;
	d.n_records = 1;
	rm_program_add_op(p, &d);
	d = rm_program_op_desc_init("", RM_COST_ELEMENTWISE, s);
	d.cost.elementwise.bytes_read = 1024;
	d.inputs = &t;
	d.n_inputs = 1;
	d.waits = &e;
	d.n_waits = 1;
	rm_program_add_op(p, &d);
}

Test(program, reset_keeps_storage_and_rebuilds_the_same_program)
{
	rm_program *fresh = rm_program_create(NULL), *reused = rm_program_create(NULL);
	build_small(fresh);
	for (int i = 0; i < 40; i++)
		build_small(reused); /* 80 ops: the arrays grow past their first capacity */
	int32_t cap_ops = reused->cap_ops;
	rm_program_reset(reused);
	cr_assert_eq(reused->n_ops, 0);
	cr_assert_eq(reused->n_tensors + reused->n_streams + reused->n_events, 0);
	cr_assert_eq(reused->n_refs, 0u);
	cr_assert_eq(reused->model_flops, -1);
	cr_assert_str_eq(reused->name, "");
	cr_assert_eq(reused->cap_ops, cap_ops, "the op array keeps its capacity");
	build_small(reused);
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_program_validate(reused, NULL, &err), RM_OK, "%s", err.msg);
	size_t l1, l2;
	char *t1 = write_to_string(fresh, &l1), *t2 = write_to_string(reused, &l2);
	cr_assert_eq(l1, l2);
	cr_assert_eq(memcmp(t1, t2, l1), 0, "the same program");
	cr_assert_str_eq(reused->ops[1].name, "", "an empty name");
	free(t1);
	free(t2);
	rm_program_destroy(fresh);
	rm_program_destroy(reused);
}
