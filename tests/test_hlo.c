/*
 * XLA HLO text (remora/hlo.h): shapes, the parser's errors with their line:column, and the
 * lowering of small modules written for the purpose (tests/data/hlo/) whose figures are worked
 * out by hand below: a while loop with a pipelined all-gather, synchronous collectives (is_sync
 * and plain), replica groups in both forms, a host copy, cuBLAS and Triton GEMMs, cuDNN attention.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "remora/hlo.h"
#include "remora/program.h"

static const char *env(const char *name)
{
	const char *v = getenv(name);
	cr_assert_not_null(v, "%s must be set (meson test sets it)", name);
	return v;
}

static const char *test_file(const char *name)
{
	static char path[1024];
	snprintf(path, sizeof(path), "%s/hlo/%s", env("REMORA_TEST_DATA"), name);
	return path;
}

static rm_program *lower_file(const char *name, rm_hlo_report *rep)
{
	rm_error err;
	rm_error_clear(&err);
	rm_hlo_module *m = rm_hlo_load(test_file(name), &err);
	cr_assert_not_null(m, "%s:%d:%d: %s", err.file, err.line, err.column, err.msg);
	rm_program *p = rm_hlo_lower(m, NULL, rep, &err);
	cr_assert_not_null(p, "%s:%d:%d: %s", err.file, err.line, err.column, err.msg);
	rm_hlo_destroy(m);
	return p;
}

static const rm_program_op *op_named(const rm_program *p, const char *name)
{
	for (int32_t i = 0; i < p->n_ops; i++)
		if (strcmp(p->ops[i].name, name) == 0)
			return &p->ops[i];
	cr_assert_fail("no op %s", name);
	return NULL;
}

/* Whether op waits on the event op `from` records. */
static bool waits_on(const rm_program *p, const rm_program_op *op, const rm_program_op *from)
{
	cr_assert_eq(from->records.count, 1, "%s records one event", from->name);
	int32_t ev = rm_program_refs(p, from->records)[0];
	for (uint32_t i = 0; i < op->waits.count; i++)
		if (rm_program_refs(p, op->waits)[i] == ev)
			return true;
	return false;
}

Test(hlo, shape_bytes)
{
	cr_assert_eq(rm_hlo_shape_bytes("bf16[8,128]{1,0}"), 8 * 128 * 2);
	cr_assert_eq(rm_hlo_shape_bytes("(f32[], s32[4])"), 4 + 16);
	cr_assert_eq(rm_hlo_shape_bytes("s4[3]"), 2, "12 bits round up to 2 bytes");
	cr_assert_eq(rm_hlo_shape_bytes("f32[<=16]{0}"), 64, "a bounded dynamic dim at its bound");
	cr_assert_eq(rm_hlo_shape_bytes("bf16[4,8]{1,0:T(8,128)(2,1)S(5)}"), 64);
	cr_assert_eq(rm_hlo_shape_bytes("((pred[2]), token[])"), 2);
	cr_assert_eq(rm_hlo_shape_bytes("bogus[2]"), -1);
	cr_assert_eq(rm_hlo_shape_bytes("f32[2"), -1);
}

Test(hlo, parse_module)
{
	rm_error err;
	rm_hlo_module *m = rm_hlo_load(test_file("pipelined_ag.hlo"), &err);
	cr_assert_not_null(m, "%s", err.msg);
	rm_hlo_module_info info;
	rm_hlo_module_get_info(m, &info);
	cr_assert_str_eq(info.name, "pipelined_ag");
	cr_assert(info.scheduled);
	cr_assert_eq(info.computations, 5);
	cr_assert_eq(info.instructions, 3 + 5 + 14 + 4 + 10); /* counted in the file, per computation */
	cr_assert_eq(info.num_partitions, 8);
	cr_assert_eq(info.replica_count, 1);
	cr_assert_str_eq(info.entry, "main");
	rm_hlo_destroy(m);
}

/*
 * pipelined_ag.hlo: a 4-iteration loop (condition i < 4) whose iteration t waits for the weights
 * gathered before it (iteration 0: the start before the loop; t > 0: iteration t-1's start,
 * through the loop-carried tuple) and starts the next gather. Per iteration: add (i+1), the shard
 * fusion, the all-gather start, the GEMM, the add fusion: 5 ops; plus 2 before the loop = 22.
 * The all-gather: shard bf16[128,1024] = 256 KiB on each of 8 ranks, 2 MiB gathered (nccl-tests'
 * all-gather size is the output's); [1,8]<=[8]: one group of devices 0..7, one node.
 * The GEMM: lhs [512,1024] contracting dim 1, rhs [1024,1024] contracting dim 0: m 512, n 1024,
 * k 1024.
 */
Test(hlo, pipelined_all_gather)
{
	rm_hlo_report rep;
	rm_program *p = lower_file("pipelined_ag.hlo", &rep);
	cr_assert_eq(p->n_ops, 22);
	cr_assert_eq(rep.whiles, 1);
	cr_assert_eq(rep.iterations, 4);
	cr_assert_eq(rep.coll_async[RM_COLL_ALL_GATHER], 5);
	cr_assert_eq(rep.n_sync, 0);
	cr_assert_eq(rep.gemm, 4);
	cr_assert_eq(rep.memory_bound, 13);
	cr_assert_eq(rep.unknown, 0);
	cr_assert_eq(rep.unmatched_done, 0);
	const rm_program_op *ag0 = op_named(p, "ag0");
	cr_assert_eq(p->streams[ag0->stream].kind, RM_STREAM_COLLECTIVE);
	cr_assert_eq(ag0->cost.collective.op, RM_COLL_ALL_GATHER);
	cr_assert_eq(ag0->cost.collective.bytes, 128 * 1024 * 2 * 8);
	cr_assert_eq(ag0->cost.collective.group_size, 8);
	cr_assert_eq(ag0->cost.collective.span, 1);
	/* the start waits for the shard fusion before it */
	cr_assert(waits_on(p, ag0, op_named(p, "shard0")));
	/* iteration 0's first compute op waits for the gather started before the loop ... */
	cr_assert(waits_on(p, op_named(p, "loop/i0/i.next"), ag0));
	/* ... and iteration t's for iteration t-1's: the pipelined gather crosses the back edge */
	for (int t = 1; t < 4; t++) {
		char a[64], b[64];
		snprintf(a, sizeof(a), "loop/i%d/i.next", t);
		snprintf(b, sizeof(b), "loop/i%d/ag.next", t - 1);
		cr_assert(waits_on(p, op_named(p, a), op_named(p, b)), "%s waits for %s", a, b);
		cr_assert(!waits_on(p, op_named(p, a), op_named(p, "ag0")));
	}
	const rm_program_op *g = op_named(p, "loop/i2/gemm");
	cr_assert_eq(g->cost.kind, RM_COST_GEMM);
	cr_assert_eq(g->cost.gemm.m, 512);
	cr_assert_eq(g->cost.gemm.n, 1024);
	cr_assert_eq(g->cost.gemm.k, 1024);
	cr_assert_eq(g->cost.gemm.batch, 1);
	cr_assert_eq(g->cost.gemm.dtype, RM_DTYPE_BF16);
	/* the add fusion: two bf16[512,1024] in (2 MiB), one out (1 MiB) */
	const rm_program_op *f = op_named(p, "loop/i0/x.next");
	cr_assert_eq(f->cost.elementwise.bytes_read, 2 * 512 * 1024 * 2);
	cr_assert_eq(f->cost.elementwise.bytes_written, 512 * 1024 * 2);
	rm_hlo_report_finish(&rep);
	rm_program_destroy(p);
}

/*
 * sync_ag.hlo (num_partitions 16): an all-gather-start with is_sync="true" and a plain all-gather
 * are synchronous (compute stream), a collective-permute too; the all-reduce-start and the
 * reduce-scatter wrapped in async-start are async. Groups: [1,16]<=[16] is 16 ranks over 2 nodes
 * of 8; [2,8]<=[2,8]T(1,0) transposes the iota, so group 0 is {0,8,1,9,2,10,3,11}: 8 ranks on 2
 * nodes; {} is all 16 partitions; {{0,1,2,3},...} 4 ranks on one node. Bytes: the is_sync
 * all-gather 256x4096 bf16 x 16 = 32 MiB, the plain one x 8 = 16 MiB; all-reduce f32[4096,1024]
 * = 16 MiB; reduce-scatter its 16 MiB input; the permute f32[1024,1024] = 4 MiB. The host
 * parameter (layout S(5)) copied to a device buffer: a 4 MiB host-to-device copy.
 */
Test(hlo, sync_collectives_and_groups)
{
	rm_hlo_report rep;
	rm_program *p = lower_file("sync_ag.hlo", &rep);
	cr_assert_eq(rep.n_sync, 3);
	cr_assert_eq(rep.coll_sync[RM_COLL_ALL_GATHER], 2);
	cr_assert_eq(rep.coll_sync[RM_COLL_SEND_RECV], 1);
	cr_assert_eq(rep.coll_async[RM_COLL_ALL_REDUCE], 1);
	cr_assert_eq(rep.coll_async[RM_COLL_REDUCE_SCATTER], 1);
	cr_assert_str_eq(rep.sync[0].name, "ags");
	cr_assert(rep.sync[0].is_sync_attr);
	cr_assert_eq(rep.sync[0].line, 18);
	cr_assert_str_eq(rep.sync[1].name, "ag2");
	cr_assert(!rep.sync[1].is_sync_attr);
	const rm_program_op *ags = op_named(p, "ags");
	cr_assert_eq(p->streams[ags->stream].kind, RM_STREAM_COMPUTE);
	cr_assert_not_null(ags->sync_reason);
	cr_assert_eq(ags->cost.collective.bytes, 32 * 1024 * 1024);
	cr_assert_eq(ags->cost.collective.group_size, 16);
	cr_assert_eq(ags->cost.collective.span, 2);
	const rm_program_op *ag2 = op_named(p, "ag2");
	cr_assert_eq(ag2->cost.collective.bytes, 16 * 1024 * 1024);
	cr_assert_eq(ag2->cost.collective.group_size, 8);
	cr_assert_eq(ag2->cost.collective.span, 2, "the transposed iota puts 0..3 and 8..11 in group 0");
	const rm_program_op *ar = op_named(p, "ars");
	cr_assert_eq(p->streams[ar->stream].kind, RM_STREAM_COLLECTIVE);
	cr_assert_eq(ar->cost.collective.group_size, 16);
	cr_assert_eq(ar->cost.collective.bytes, 16 * 1024 * 1024);
	const rm_program_op *rs = op_named(p, "rss");
	cr_assert_eq(rs->cost.collective.op, RM_COLL_REDUCE_SCATTER);
	cr_assert_eq(rs->cost.collective.group_size, 4);
	cr_assert_eq(rs->cost.collective.span, 1);
	cr_assert_eq(rs->cost.collective.bytes, 16 * 1024 * 1024);
	const rm_program_op *cp = op_named(p, "cps");
	cr_assert_eq(cp->cost.kind, RM_COST_COPY);
	cr_assert_eq(cp->cost.copy.dir, RM_COPY_H2D);
	cr_assert_eq(cp->cost.copy.bytes, 4 * 1024 * 1024);
	cr_assert_eq(rep.copies, 1);
	/* the permute after the dones waits for all three async ops */
	const rm_program_op *perm = op_named(p, "cp");
	cr_assert_eq(perm->cost.collective.op, RM_COLL_SEND_RECV);
	cr_assert_eq(perm->cost.collective.bytes, 4 * 1024 * 1024);
	cr_assert(waits_on(p, perm, ar) && waits_on(p, perm, rs) && waits_on(p, perm, cp));
	cr_assert_eq(rep.unmatched_done, 0, "the is_sync start's done is no unmatched done");
	cr_assert_eq(rep.stream_annotated, 1);
	rm_hlo_report_finish(&rep);
	rm_program_destroy(p);
}

/*
 * gemm.hlo: cuBLASLt batched bf16 [4,2048,1024] x [4,1024,512] (batch dim 0, contracting 2 and 1):
 * batch 4, m 2048, n 512, k 1024. The fp8 matmul [8192,4096] x [14336,4096] contracting dim 1 of
 * both (B transposed), backend_config as an escaped string: m 8192, n 14336, k 4096. The Triton
 * fusion's dot [64,256] x [256,128]: m 64, n 128, k 256. cuDNN attention Q [2,4096,32,128],
 * K [2,4096,8,128] with batch dims (0,2) and contracting 3: batch 2, 32 heads, 8 KV heads,
 * seq 4096, head_dim 128, CAUSAL. The custom call "my_kernel" is not modelled.
 */
Test(hlo, gemm_and_attention)
{
	rm_hlo_report rep;
	rm_program *p = lower_file("gemm.hlo", &rep);
	const rm_gemm_shape *g = &op_named(p, "bmm")->cost.gemm;
	cr_assert(g->batch == 4 && g->m == 2048 && g->n == 512 && g->k == 1024, "%lld %lld %lld %lld",
		  (long long)g->batch, (long long)g->m, (long long)g->n, (long long)g->k);
	cr_assert(g->has_batch_dims);
	g = &op_named(p, "f8")->cost.gemm;
	cr_assert(g->batch == 1 && g->m == 8192 && g->n == 14336 && g->k == 4096);
	cr_assert_eq(g->dtype, RM_DTYPE_FP8_E4M3);
	g = &op_named(p, "tg")->cost.gemm;
	cr_assert_eq(op_named(p, "tg")->cost.kind, RM_COST_GEMM);
	cr_assert(g->m == 64 && g->n == 128 && g->k == 256);
	const rm_program_op *a = op_named(p, "fmha");
	cr_assert_eq(a->cost.kind, RM_COST_ATTENTION);
	const rm_attention_shape *s = &a->cost.attention.shape;
	cr_assert(s->batch == 2 && s->heads == 32 && s->kv_heads == 8 && s->seq == 4096 && s->head_dim == 128);
	cr_assert(s->causal);
	cr_assert(!a->cost.attention.backward);
	cr_assert_eq(rep.gemm, 3);
	cr_assert_eq(rep.attention, 1);
	cr_assert_eq(rep.unknown, 1);
	cr_assert_str_eq(rep.unknown_names[0], "custom-call:my_kernel");
	/* priced as memory-bound: bf16[64,128] in and out */
	cr_assert_eq(op_named(p, "odd")->cost.elementwise.bytes_read, 64 * 128 * 2);
	rm_hlo_report_finish(&rep);
	rm_program_destroy(p);
}

static void assert_parse_error(const char *text, rm_status st, int line, int col, const char *msg)
{
	rm_error err;
	rm_error_clear(&err);
	cr_assert_null(rm_hlo_parse(text, strlen(text), "t.hlo", &err));
	cr_assert_eq(err.status, st, "%s", err.msg);
	cr_assert_eq(err.line, line, "%d:%d %s", err.line, err.column, err.msg);
	cr_assert_eq(err.column, col, "%d:%d %s", err.line, err.column, err.msg);
	cr_assert(strstr(err.msg, msg), "%s", err.msg);
}

Test(hlo, errors_with_positions)
{
	rm_error err;
	rm_error_clear(&err);
	/* bad_attr.hlo line 6 "  %x = f32[8]{0} add(%p %n)": a ',' missing before %n at column 25 */
	cr_assert_null(rm_hlo_load(test_file("bad_attr.hlo"), &err));
	cr_assert_eq(err.status, RM_PARSE);
	cr_assert_eq(err.line, 6);
	cr_assert_eq(err.column, 25);
	cr_assert(strstr(err.msg, "expected ')' closing the operands"), "%s", err.msg);
	assert_parse_error("HloModul m\n", RM_PARSE, 1, 1, "expected 'HloModule'");
	assert_parse_error("HloModule m\nENTRY %e {\n  %a = f32[2]{0} parameter(0)\n  ROOT %b = f32[2]{0} add(%a, %zz)\n}\n",
			   RM_INVALID, 4, 31, "operand 'zz' of 'b' is not an instruction");
	assert_parse_error("HloModule m\nENTRY %e {\n  %a = f33[2]{0} parameter(0)\n}\n", RM_PARSE, 3, 8,
			   "expected a shape");
	assert_parse_error("HloModule m\nENTRY %e {\n  %a = f32[2]{0} parameter(0)\n", RM_PARSE, 4, 1,
			   "'}' closing the computation");
	assert_parse_error("HloModule m\nENTRY %e {\n  %a = f32[2]{0} parameter(0), metadata={op_name=\"x}\n}\n",
			   RM_PARSE, 3, 50, "closing the string");
	/* a while loop without a trip count: an error at the while, naming it */
	rm_hlo_module *m = rm_hlo_load(test_file("no_trip.hlo"), &err);
	cr_assert_not_null(m, "%s", err.msg);
	cr_assert_null(rm_hlo_lower(m, NULL, NULL, &err));
	cr_assert_eq(err.line, 23);
	cr_assert_eq(err.column, 8);
	cr_assert(strstr(err.msg, "w: a while loop without a trip count"), "%s", err.msg);
	rm_hlo_destroy(m);
}

/* The trip count from backend_config known_trip_count (the condition compares two values, so it
 * alone would not say): 3 iterations of one negate each. */
Test(hlo, known_trip_count)
{
	const char *text = "HloModule k, is_scheduled=true\n"
			   "b {\n  bp = (s32[], f32[8]{0}) parameter(0)\n"
			   "  bi = s32[] get-tuple-element(bp), index=0\n"
			   "  bx = f32[8]{0} get-tuple-element(bp), index=1\n"
			   "  bn = f32[8]{0} negate(bx)\n"
			   "  ROOT bt = (s32[], f32[8]{0}) tuple(bi, bn)\n}\n"
			   "c {\n  cp = (s32[], f32[8]{0}) parameter(0)\n"
			   "  ci = s32[] get-tuple-element(cp), index=0\n"
			   "  ROOT cc = pred[] compare(ci, ci), direction=LT\n}\n"
			   "ENTRY e {\n  p = f32[8]{0} parameter(0)\n  z = s32[] constant(0)\n"
			   "  t = (s32[], f32[8]{0}) tuple(z, p)\n"
			   "  ROOT w = (s32[], f32[8]{0}) while(t), condition=c, body=b, "
			   "backend_config={\"known_trip_count\":{\"n\":\"3\"}}\n}\n";
	rm_error err;
	rm_hlo_module *m = rm_hlo_parse(text, strlen(text), "k.hlo", &err);
	cr_assert_not_null(m, "%d:%d %s", err.line, err.column, err.msg);
	rm_hlo_report rep;
	rm_program *p = rm_hlo_lower(m, NULL, &rep, &err);
	cr_assert_not_null(p, "%s", err.msg);
	cr_assert_eq(rep.iterations, 3);
	cr_assert_eq(p->n_ops, 3);
	cr_assert_str_eq(p->ops[2].name, "w/i2/bn");
	cr_assert_eq(p->ops[2].cost.elementwise.bytes_read, 32);
	rm_hlo_report_finish(&rep);
	rm_program_destroy(p);
	rm_hlo_destroy(m);
}

/* Hand-written HLO leaves shapes out (XLA's parser infers them): a get-tuple-element takes the
 * element's, a negate its operand's, so the negate reads and writes f32[4] = 16 bytes. */
Test(hlo, shapes_left_out)
{
	const char *text = "HloModule s\nENTRY e {\n  p = (f32[4]{0}, s32[]) parameter(0)\n"
			   "  g = get-tuple-element(p), index=0\n  n = negate(g)\n  ROOT t = tuple(n, g)\n}\n";
	rm_error err;
	rm_hlo_module *m = rm_hlo_parse(text, strlen(text), "s.hlo", &err);
	cr_assert_not_null(m, "%d:%d %s", err.line, err.column, err.msg);
	rm_program *p = rm_hlo_lower(m, NULL, NULL, &err);
	cr_assert_not_null(p, "%s", err.msg);
	cr_assert_eq(p->n_ops, 1);
	cr_assert_eq(p->ops[0].cost.elementwise.bytes_read, 16);
	cr_assert_eq(p->ops[0].cost.elementwise.bytes_written, 16);
	rm_program_destroy(p);
	rm_hlo_destroy(m);
}

/* Iterations of `while (i DIR 10)` with i starting at start (the constant in the while's operand
 * tuple); the body adds 1 to i. */
static int64_t iterations(int start, const char *dir)
{
	char text[2048];
	snprintf(text, sizeof(text),
		 "HloModule k, is_scheduled=true\n"
		 "b {\n  bp = (s32[], f32[8]{0}) parameter(0)\n"
		 "  bi = s32[] get-tuple-element(bp), index=0\n  one = s32[] constant(1)\n"
		 "  bi1 = s32[] add(bi, one)\n  bx = f32[8]{0} get-tuple-element(bp), index=1\n"
		 "  ROOT bt = (s32[], f32[8]{0}) tuple(bi1, bx)\n}\n"
		 "c {\n  cp = (s32[], f32[8]{0}) parameter(0)\n"
		 "  ci = s32[] get-tuple-element(cp), index=0\n  n = s32[] constant(10)\n"
		 "  ROOT cc = pred[] compare(ci, n), direction=%s\n}\n"
		 "ENTRY e {\n  p = f32[8]{0} parameter(0)\n  z = s32[] constant(%d)\n"
		 "  t = (s32[], f32[8]{0}) tuple(z, p)\n"
		 "  ROOT w = (s32[], f32[8]{0}) while(t), condition=c, body=b\n}\n",
		 dir, start);
	rm_error err;
	rm_hlo_module *m = rm_hlo_parse(text, strlen(text), "k.hlo", &err);
	cr_assert_not_null(m, "%d:%d %s", err.line, err.column, err.msg);
	rm_hlo_report rep;
	rm_program *p = rm_hlo_lower(m, NULL, &rep, &err);
	cr_assert_not_null(p, "%s", err.msg);
	int64_t n = rep.iterations;
	cr_assert_eq(p->n_ops, n, "one add a body");
	rm_hlo_report_finish(&rep);
	rm_program_destroy(p);
	rm_hlo_destroy(m);
	return n;
}

Test(hlo, trip_count_from_condition)
{
	cr_assert_eq(iterations(0, "LT"), 10);
	cr_assert_eq(iterations(6, "LT"), 4, "i = 6, 7, 8, 9");
	cr_assert_eq(iterations(6, "LE"), 5, "i = 6 .. 10");
	cr_assert_eq(iterations(12, "LT"), 0);
}

/* Every prefix of a module (cut anywhere, no NUL at the end) parses and lowers or is refused with
 * a position; only the whole text (with or without its last newline) lowers. */
Test(hlo, truncated_anywhere)
{
	char *text;
	size_t len;
	rm_error err;
	cr_assert(rm_read_file(test_file("sync_ag.hlo"), &text, &len, &err), "%s", err.msg);
	size_t lowered = 0;
	for (size_t n = 0; n <= len; n++) {
		char *buf = malloc(n ? n : 1);
		memcpy(buf, text, n);
		rm_error_clear(&err);
		rm_hlo_module *m = rm_hlo_parse(buf, n, "t.hlo", &err);
		rm_program *p = m ? rm_hlo_lower(m, NULL, NULL, &err) : NULL;
		if (p)
			lowered++;
		else
			cr_assert(err.status != RM_OK && err.line >= (n ? 1 : 0), "prefix %zu: no error", n);
		rm_program_destroy(p);
		rm_hlo_destroy(m);
		free(buf);
	}
	cr_assert_eq(lowered, 2);
	free(text);
}

static int run_remora(const char *args)
{
	char cmd[4096];
	snprintf(cmd, sizeof(cmd), "'%s' %s >/dev/null 2>&1", env("REMORA_BIN"), args);
	int st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(hlo, cli)
{
	char dir[] = "/tmp/remora-hlo-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char out[256], args[2048];
	snprintf(out, sizeof(out), "%s/p.json", dir);
	/* a parse error: exit 1 and nothing written */
	snprintf(args, sizeof(args), "schedule --from-hlo '%s' -o '%s'", test_file("bad_attr.hlo"), out);
	cr_assert_eq(run_remora(args), 1);
	struct stat st;
	cr_assert_neq(stat(out, &st), 0, "no partial output");
	/* the pipelined loop: a program run-program reads back with the same ops */
	snprintf(args, sizeof(args), "schedule --from-hlo '%s' -o '%s'", test_file("pipelined_ag.hlo"), out);
	cr_assert_eq(run_remora(args), 0);
	rm_error err;
	rm_program *p = rm_program_load(out, &err);
	cr_assert_not_null(p, "%s", err.msg);
	cr_assert_eq(p->n_ops, 22);
	cr_assert_str_eq(p->runtime.hardware, "h100-sxm");
	rm_program_destroy(p);
	snprintf(args, sizeof(args), "run-program '%s'", out);
	cr_assert_eq(run_remora(args), 0);
	/* --hardware must name a profile; --hardware without --from-hlo is a usage error */
	snprintf(args, sizeof(args), "schedule --from-hlo '%s' --hardware nosuch -o '%s'", test_file("gemm.hlo"), out);
	cr_assert_eq(run_remora(args), 2);
	cr_assert_eq(run_remora("schedule --hardware h100-sxm x.yaml"), 2);
	unlink(out);
	rmdir(dir);
}

/* With a scenario: XLA's synchronous collectives (sync_ag.hlo: 2 all-gathers, 1 permute) next to
 * the scheduler's; the scheduler's column total equals the collectives it lists. */
Test(hlo, compare_with_scenario)
{
	char cmd[4096];
	snprintf(cmd, sizeof(cmd), "'%s' schedule '%s/scenarios/jax20763-toy-fsdp8-h100.yaml' --from-hlo '%s' -o /dev/null 2>&1",
		 env("REMORA_BIN"), env("REMORA_DATA_DIR"), test_file("sync_ag.hlo"));
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	char line[1024];
	bool in_list = false;
	long xla_total = -1, remora_total = -1, listed = 0, xla_ag = -1, xla_perm = -1;
	while (fgets(line, sizeof(line), p)) {
		long a, b;
		if (sscanf(line, "  total %ld %ld", &a, &b) == 2) {
			xla_total = a;
			remora_total = b;
		} else if (sscanf(line, "  all-gather %ld %ld", &a, &b) == 2) {
			xla_ag = a;
		} else if (sscanf(line, "  send-recv %ld %ld", &a, &b) == 2) {
			xla_perm = a;
		} else if (strstr(line, "the scheduler's synchronous collectives:")) {
			in_list = true;
		} else if (in_list && strncmp(line, "  ", 2) == 0) {
			listed++;
		} else {
			in_list = false;
		}
	}
	int st = pclose(p);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	cr_assert_eq(xla_total, 3);
	cr_assert_eq(xla_ag, 2);
	cr_assert_eq(xla_perm, 1);
	cr_assert_gt(remora_total, 0, "the toy FSDP scenario has synchronous collectives (overlap limit)");
	cr_assert_eq(listed, remora_total);
}

/* Lowering errors found by a fresh tester: a trip count the op limit cannot hold is refused at the
 * while before anything unrolls; a computation that calls itself is named at its call; an unknown
 * opcode inside a fusion is counted as at top level. */
Test(hlo, refusals_at_their_instruction)
{
	const char *loop = "HloModule k, is_scheduled=true\n"
			   "b {\n  bp = (s32[], f32[8]{0}) parameter(0)\n"
			   "  bi = s32[] get-tuple-element(bp), index=0\n"
			   "  bx = f32[8]{0} get-tuple-element(bp), index=1\n"
			   "  bn = f32[8]{0} negate(bx)\n"
			   "  ROOT bt = (s32[], f32[8]{0}) tuple(bi, bn)\n}\n"
			   "c {\n  cp = (s32[], f32[8]{0}) parameter(0)\n"
			   "  ci = s32[] get-tuple-element(cp), index=0\n"
			   "  ROOT cc = pred[] compare(ci, ci), direction=LT\n}\n"
			   "ENTRY e {\n  p = f32[8]{0} parameter(0)\n  z = s32[] constant(0)\n"
			   "  t = (s32[], f32[8]{0}) tuple(z, p)\n"
			   "  ROOT w = (s32[], f32[8]{0}) while(t), condition=c, body=b, "
			   "backend_config={\"known_trip_count\":{\"n\":\"1000000000000\"}}\n}\n";
	rm_error err;
	rm_hlo_module *m = rm_hlo_parse(loop, strlen(loop), "k.hlo", &err);
	cr_assert_not_null(m, "%d:%d %s", err.line, err.column, err.msg);
	cr_assert_null(rm_hlo_lower(m, NULL, NULL, &err));
	cr_assert_eq(err.line, 18); /* "  ROOT w = ... while(...)": the name at column 8 */
	cr_assert_eq(err.column, 8);
	cr_assert(strstr(err.msg, "1000000000000 iterations of a 5-instruction body"), "%s", err.msg);
	rm_hlo_destroy(m);

	const char *rec = "HloModule r\nf {\n  x = f32[8]{0} parameter(0)\n"
			  "  ROOT y = f32[8]{0} call(x), to_apply=f\n}\n"
			  "ENTRY e {\n  p = f32[8]{0} parameter(0)\n  ROOT q = f32[8]{0} call(p), to_apply=f\n}\n";
	m = rm_hlo_parse(rec, strlen(rec), "r.hlo", &err);
	cr_assert_not_null(m, "%d:%d %s", err.line, err.column, err.msg);
	cr_assert_null(rm_hlo_lower(m, NULL, NULL, &err));
	cr_assert_eq(err.line, 4);
	cr_assert(strstr(err.msg, "%f calls itself"), "%s", err.msg);
	rm_hlo_destroy(m);

	const char *fus = "HloModule u\nfc {\n  a = f32[8]{0} parameter(0)\n  ROOT r = f32[8]{0} frobnicate(a)\n}\n"
			  "ENTRY e {\n  p = f32[8]{0} parameter(0)\n  ROOT f = f32[8]{0} fusion(p), kind=kLoop, calls=fc\n}\n";
	m = rm_hlo_parse(fus, strlen(fus), "u.hlo", &err);
	cr_assert_not_null(m, "%d:%d %s", err.line, err.column, err.msg);
	rm_hlo_report rep;
	rm_program *p = rm_hlo_lower(m, NULL, &rep, &err);
	cr_assert_not_null(p, "%s", err.msg);
	cr_assert_eq(rep.unknown, 0, "the fusion is one memory-bound op");
	cr_assert_eq(rep.unknown_in_fusions, 1);
	cr_assert_str_eq(rep.unknown_names[0], "frobnicate");
	rm_hlo_report_finish(&rep);
	rm_program_destroy(p);
	rm_hlo_destroy(m);
}

/* Iota replica groups with sizes past any device count (a fuzzer's find: strtoll saturates and
 * the product of [groups,size] or of the reshape dims overflowed) are refused at the instruction. */
Test(hlo, replica_groups_beyond_any_device_count)
{
	const char *forms[2][2] = {
		{"[2,11111111111111111111111]<=[2,8]T(1,0)", "more than 2^20 devices"},
		{"[1,8]<=[4611686018427387904,4611686018427387904]", "a bad reshape dim"},
	};
	for (int i = 0; i < 2; i++) {
		char text[512];
		snprintf(text, sizeof(text),
			 "HloModule m\nadd {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n"
			 "  ROOT s = f32[] add(x, y)\n}\nENTRY e {\n  p = f32[8]{0} parameter(0)\n"
			 "  ROOT a = f32[8]{0} all-reduce(p), replica_groups=%s, to_apply=add\n}\n",
			 forms[i][0]);
		rm_error err;
		rm_hlo_module *m = rm_hlo_parse(text, strlen(text), "g.hlo", &err);
		cr_assert_not_null(m, "%d:%d %s", err.line, err.column, err.msg);
		cr_assert_null(rm_hlo_lower(m, NULL, NULL, &err));
		cr_assert_eq(err.line, 9);
		cr_assert_eq(err.column, 8);
		cr_assert(strstr(err.msg, forms[i][1]), "%s", err.msg);
		rm_hlo_destroy(m);
	}
}
