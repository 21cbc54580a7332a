/*
 * Measured traces (remora/trace.h): the NCCL name parse, the kernel classes, the streaming reader
 * (plain, gzip, the array form, truncation and other errors with their positions) and the step
 * analysis on hand-written traces whose figures are worked out below by hand; Chrome "B"/"E"
 * duration pairs; and `calib import-trace` (the kernels of a trace as calibration rows).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>
#include <sqlite3.h>
#include <zlib.h>

#include "remora/trace.h"

static const char *env(const char *name)
{
	const char *v = getenv(name);
	cr_assert_not_null(v, "%s must be set (meson test sets it)", name);
	return v;
}

static const char *test_file(const char *name)
{
	static char path[1024];
	snprintf(path, sizeof(path), "%s/trace/%s", env("REMORA_TEST_DATA"), name);
	return path;
}

/* Times in the fixtures are whole microseconds: compare in microseconds, exactly up to the
 * conversion to seconds. */
#define assert_us(seconds, us) cr_assert_float_eq((seconds) * 1e6, (double)(us), 1e-6, "%s = %.9g s, expected %g us", #seconds, (seconds), (double)(us))

Test(trace, nccl_names)
{
	rm_trace_nccl_name n;
	cr_assert(rm_trace_nccl_parse("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", &n));
	cr_assert_str_eq(n.op, "AllGather");
	cr_assert_str_eq(n.algo, "RING");
	cr_assert_str_eq(n.proto, "LL");
	cr_assert_str_eq(n.redop, "");
	cr_assert(rm_trace_nccl_parse("void ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", &n));
	cr_assert_str_eq(n.op, "AllReduce");
	cr_assert_str_eq(n.algo, "RING");
	cr_assert_str_eq(n.proto, "LL");
	cr_assert_str_eq(n.redop, "Sum");
	cr_assert_str_eq(n.type, "float");
	/* >= 2.19 order: coll_redop_type_algo_proto */
	cr_assert(rm_trace_nccl_parse("ncclDevKernel_ReduceScatter_Sum_bf16_NVLS_TREE_SIMPLE(x)", &n));
	cr_assert_str_eq(n.op, "ReduceScatter");
	cr_assert_str_eq(n.redop, "Sum");
	cr_assert_str_eq(n.type, "bf16");
	cr_assert_str_eq(n.algo, "NVLS_TREE");
	cr_assert_str_eq(n.proto, "SIMPLE");
	cr_assert(rm_trace_nccl_parse("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", &n));
	cr_assert_str_eq(n.op, "SendRecv");
	cr_assert_str_eq(n.type, "int8_t");
	cr_assert(rm_trace_nccl_parse("ncclDevKernel_AllReduce_Sum_f32_COLLNET_DIRECT_LL128", &n));
	cr_assert_str_eq(n.algo, "COLLNET_DIRECT");
	cr_assert_str_eq(n.proto, "LL128");
	cr_assert_str_eq(n.type, "f32");
	cr_assert(rm_trace_nccl_parse("ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)", &n));
	cr_assert_str_eq(n.op, "Generic");
	cr_assert_str_eq(n.algo, "");
	cr_assert_not(rm_trace_nccl_parse("sm90_xmma_gemm_bf16", &n));
	cr_assert_str_eq(n.op, "");
}

Test(trace, classes)
{
	cr_assert_eq(rm_trace_classify("ncclDevKernel_AllGather_RING_LL(x)", "kernel", NULL), RM_TRACE_NCCL);
	cr_assert_eq(rm_trace_classify("Memcpy DtoD (Device -> Device)", "gpu_memcpy", NULL), RM_TRACE_MEMCPY);
	cr_assert_eq(rm_trace_classify("Memset (Device)", "gpu_memset", NULL), RM_TRACE_MEMSET);
	cr_assert_eq(rm_trace_classify("void flash_fwd_kernel<...>(Flash_fwd_params)", "kernel", NULL), RM_TRACE_ATTENTION);
	cr_assert_eq(rm_trace_classify("fmha_cutlassF_bf16_aligned_64x128_rf_sm80", "kernel", NULL), RM_TRACE_ATTENTION);
	cr_assert_eq(rm_trace_classify("cudnn_generated_fort_native_sdpa_sm90_knob_7", "kernel", NULL), RM_TRACE_ATTENTION);
	cr_assert_eq(rm_trace_classify("sm90_xmma_gemm_bf16bf16_bf16f32", "kernel", NULL), RM_TRACE_GEMM);
	cr_assert_eq(rm_trace_classify("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTN", "kernel", NULL), RM_TRACE_GEMM);
	cr_assert_eq(rm_trace_classify("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm>(...)", "kernel", NULL), RM_TRACE_GEMM);
	cr_assert_eq(rm_trace_classify("ampere_sgemm_128x64_nn", "kernel", NULL), RM_TRACE_GEMM);
	cr_assert_eq(rm_trace_classify("void fbgemm_gpu::permute_2D_lengths_kernel<int>(int, int)", "kernel", NULL),
		     RM_TRACE_MEMORY_BOUND);
	cr_assert_eq(rm_trace_classify("void at::native::vectorized_elementwise_kernel<4>(int)", "kernel", NULL),
		     RM_TRACE_MEMORY_BOUND);
	/* JAX: the XLA op decides when the kernel name says nothing */
	cr_assert_eq(rm_trace_classify("loop_fusion_3", NULL, "all-gather-start.1"), RM_TRACE_NCCL);
	cr_assert_eq(rm_trace_classify("loop_multiply_fusion", NULL, "multiply_fusion"), RM_TRACE_MEMORY_BOUND);
	cr_assert_str_eq(rm_trace_class_key(RM_TRACE_MEMORY_BOUND), "memory_bound");
	cr_assert(rm_trace_class_is_compute(RM_TRACE_ATTENTION));
	cr_assert_not(rm_trace_class_is_compute(RM_TRACE_MEMCPY));
}

/*
 * overlap.json, by hand (microseconds). Stream 7: GEMM [100,130) (aten::mm 64x128 @ 128x256:
 * 2*64*128*256 = 4194304 FLOPs), elementwise [140,160), flash [170,180), an AllReduce [185,195) ON
 * THE COMPUTE STREAM, GEMM [205,220). Stream 20: AllGather [120,150), ReduceScatter [190,210)
 * (across the step boundary), memcpy [230,240) of 1e6 bytes.
 * Step 1 = [100,200): compute = 30+20+10 = 60; comm = [120,150) + [185,200) = 45;
 *   exposed = [130,140) + [185,200) = 25; all work = [100,160) + [170,180) + [185,200) = 85 ->
 *   idle 15; collectives on the compute stream: 1, 10; stream 7 = 70 (4 events), stream 20 =
 *   [120,150) + [190,200) = 40 (2 events).
 * Step 2 = [200,250): compute = 15; comm = [200,210) = 10; exposed = [200,205) = 5; all work =
 *   [200,220) + [230,240) = 30 -> idle 20; stream 20 = 20.
 * Median of two: the mean of the two.
 */
Test(trace, overlap_steps)
{
	rm_error err;
	rm_error_clear(&err);
	rm_trace *t = rm_trace_read(test_file("overlap.json"), &err);
	cr_assert_not_null(t, "%s", err.msg);
	rm_trace_summary s;
	rm_trace_summary_get(t, &s);
	cr_assert_eq(s.rank, 3);
	cr_assert_eq(s.events, 18);
	cr_assert_eq(s.gpu_events, 8);
	cr_assert_eq(s.kernels, 7);
	cr_assert_eq(s.nccl_kernels, 3);
	cr_assert_eq(s.steps, 2, "the gpu_user_annotation ProfilerStep is not a step");
	cr_assert_eq(s.streams, 2);
	cr_assert_eq(s.devices, 1);
	cr_assert_eq(s.gemm_shapes, 1);
	cr_assert_str_eq(s.format, "kineto");
	rm_trace_report *r = NULL;
	int n = 0;
	rm_trace_analyze(t, 0, &r, &n);
	cr_assert_eq(n, 1);
	cr_assert_eq(r[0].rank, 3);
	cr_assert(r[0].from_steps);
	cr_assert_eq(r[0].n_windows, 2);
	const rm_trace_fig *f1 = &r[0].windows[0].fig, *f2 = &r[0].windows[1].fig, *m = &r[0].median;
	cr_assert_eq(r[0].windows[0].number, 1);
	assert_us(f1->step_s, 100);
	assert_us(f1->compute_busy_s, 60);
	assert_us(f1->comm_busy_s, 45);
	assert_us(f1->exposed_comm_s, 25);
	assert_us(f1->gpu_busy_s, 85);
	assert_us(f1->idle_s, 15);
	cr_assert_eq(f1->coll_on_compute_count, 1);
	assert_us(f1->coll_on_compute_s, 10);
	assert_us(f1->class_s[RM_TRACE_GEMM], 30);
	assert_us(f1->class_s[RM_TRACE_ATTENTION], 10);
	assert_us(f1->class_s[RM_TRACE_MEMORY_BOUND], 20);
	assert_us(f1->class_s[RM_TRACE_NCCL], 45);
	cr_assert_eq(f1->class_count[RM_TRACE_NCCL], 3);
	cr_assert_eq(r[0].n_streams, 2);
	cr_assert_eq(f1->streams[0].stream, 7);
	assert_us(f1->streams[0].busy_s, 70);
	cr_assert_eq(f1->streams[0].kernels, 4);
	cr_assert(f1->streams[0].compute && f1->streams[0].comm);
	cr_assert_eq(f1->streams[1].stream, 20);
	assert_us(f1->streams[1].busy_s, 40);
	cr_assert_not(f1->streams[1].compute);
	cr_assert_float_eq(f1->gemm_flops, 4194304.0, 0.5);
	assert_us(f1->gemm_shaped_s, 30);
	/* NCCL kinds in (op, algo, proto) order */
	cr_assert_eq(r[0].n_nccl, 3);
	cr_assert_str_eq(f1->nccl[0].op, "AllGather");
	cr_assert_str_eq(f1->nccl[2].op, "ReduceScatter");
	cr_assert_str_eq(f1->nccl[2].proto, "SIMPLE");
	assert_us(f1->nccl[2].busy_s, 10);
	assert_us(f2->step_s, 50);
	assert_us(f2->compute_busy_s, 15);
	assert_us(f2->comm_busy_s, 10);
	assert_us(f2->exposed_comm_s, 5);
	assert_us(f2->idle_s, 20);
	cr_assert_eq(f2->coll_on_compute_count, 0);
	assert_us(f2->streams[1].busy_s, 20);
	cr_assert_float_eq(f2->copy_bytes, 1e6, 0.5);
	assert_us(f2->copy_bytes_s, 10);
	assert_us(m->step_s, 75);
	assert_us(m->compute_busy_s, 37.5);
	assert_us(m->comm_busy_s, 27.5);
	assert_us(m->exposed_comm_s, 15);
	assert_us(m->idle_s, 17.5);
	rm_trace_reports_free(r, n);
	rm_trace_destroy(t);
}

/* jax.json: metadata after the events; stream 13 runs a fusion [10,40) and a GEMM [50,80),
 * stream 14 an all-gather [30,60); the "XLA Ops" line repeats the fusion and is not GPU work; the
 * Steps line gives step 7 = [0,100). compute 60, comm 30, exposed [40,50) = 10, work [10,80) = 70,
 * idle 30. */
Test(trace, jax_streams)
{
	rm_error err;
	rm_error_clear(&err);
	rm_trace *t = rm_trace_read(test_file("jax.json"), &err);
	cr_assert_not_null(t, "%s", err.msg);
	rm_trace_summary s;
	rm_trace_summary_get(t, &s);
	cr_assert_str_eq(s.format, "jax");
	cr_assert_eq(s.gpu_events, 3);
	cr_assert_eq(s.rank, -1);
	rm_trace_report *r = NULL;
	int n = 0;
	rm_trace_analyze(t, 5, &r, &n);
	cr_assert_eq(n, 1);
	cr_assert_eq(r[0].rank, 5, "no distributedInfo: the file's index");
	cr_assert(r[0].from_steps);
	cr_assert_eq(r[0].windows[0].number, 7);
	const rm_trace_fig *f = &r[0].median;
	assert_us(f->step_s, 100);
	assert_us(f->compute_busy_s, 60);
	assert_us(f->comm_busy_s, 30);
	assert_us(f->exposed_comm_s, 10);
	assert_us(f->idle_s, 30);
	assert_us(f->class_s[RM_TRACE_GEMM], 30);
	rm_trace_reports_free(r, n);
	rm_trace_destroy(t);
}

/* The array form without its closing bracket (allowed by the format) and no step: the window is
 * the span of the GPU events, [1.5, 10) us; fractional microseconds become whole nanoseconds. */
Test(trace, array_form_span)
{
	const char *text = "[{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k1\", \"pid\": 0, \"tid\": 7, \"ts\": 1.5, \"dur\": 2.25},\n"
			   " {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k2\", \"pid\": 0, \"tid\": 7, \"ts\": 8, \"dur\": 2},\n";
	rm_error err;
	rm_error_clear(&err);
	rm_trace *t = rm_trace_read_mem(text, strlen(text), "array.json", &err);
	cr_assert_not_null(t, "%s", err.msg);
	rm_trace_report *r = NULL;
	int n = 0;
	rm_trace_analyze(t, 0, &r, &n);
	cr_assert_not(r[0].from_steps);
	cr_assert_eq(r[0].windows[0].start_ns, 1500);
	cr_assert_eq(r[0].windows[0].end_ns, 10000);
	cr_assert_float_eq(r[0].median.gpu_busy_s, 4.25e-6, 1e-15);
	cr_assert_float_eq(r[0].median.idle_s, 4.25e-6, 1e-15);
	rm_trace_reports_free(r, n);
	rm_trace_destroy(t);
}

static rm_trace *read_text_expect_error(const char *text, rm_error *err)
{
	rm_error_clear(err);
	rm_trace *t = rm_trace_read_mem(text, strlen(text), "bad.json", err);
	cr_assert_null(t, "'%s' should not read", text);
	cr_assert_str_eq(err->file, "bad.json");
	cr_assert_neq(err->msg[0], '\0');
	return t;
}

Test(trace, errors_with_positions)
{
	rm_error err;
	/* truncated inside the second event: the position is the end of the text, line 3 column 25 (after its 24 bytes) */
	read_text_expect_error("{\"traceEvents\": [\n"
			       "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, \"tid\": 7, \"ts\": 1, \"dur\": 2},\n"
			       "{\"ph\": \"X\", \"cat\": \"kern", &err);
	cr_assert_eq(err.status, RM_PARSE);
	cr_assert_eq(err.line, 3);
	cr_assert_eq(err.column, 25);
	cr_assert(strstr(err.msg, "truncated"), "%s", err.msg);
	/* truncated between events of the object form */
	read_text_expect_error("{\"traceEvents\": [\n"
			       "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, \"tid\": 7, \"ts\": 1, \"dur\": 2},\n",
			       &err);
	cr_assert_eq(err.line, 3);
	cr_assert_eq(err.column, 1);
	/* malformed inside an event: jansson's error placed in the file (line 2, the '}' at column 14) */
	read_text_expect_error("{\"traceEvents\": [\n {\"ph\": \"X\", }]}", &err);
	cr_assert_eq(err.status, RM_PARSE);
	cr_assert_eq(err.line, 2);
	cr_assert_eq(err.column, 14);
	cr_assert(strstr(err.msg, "malformed JSON"), "%s", err.msg);
	/* no traceEvents */
	read_text_expect_error("{\"schemaVersion\": 1, \"deviceProperties\": []}", &err);
	cr_assert_eq(err.status, RM_NOT_FOUND);
	cr_assert(strstr(err.msg, "traceEvents"), "%s", err.msg);
	/* no GPU events: CPU operators only */
	read_text_expect_error("{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::add\", \"pid\": 1, "
			       "\"tid\": 1, \"ts\": 1, \"dur\": 2}]}", &err);
	cr_assert_eq(err.status, RM_NOT_FOUND);
	cr_assert(strstr(err.msg, "no GPU events in 1 trace events"), "%s", err.msg);
	/* empty */
	read_text_expect_error("{\"traceEvents\": []}", &err);
	cr_assert_eq(err.status, RM_NOT_FOUND);
	/* a GPU event without its duration, at line 1 column 18 */
	read_text_expect_error("{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": 1}]}", &err);
	cr_assert_eq(err.line, 1);
	cr_assert_eq(err.column, 18);
	cr_assert(strstr(err.msg, "dur"), "%s", err.msg);
	/* times past 4e15 us: ts + dur would leave int64 nanoseconds */
	read_text_expect_error("{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, \"tid\": 7, "
			       "\"ts\": 9223372036854775, \"dur\": 9223372036854775}]}",
			       &err);
	cr_assert_eq(err.status, RM_PARSE);
	cr_assert(strstr(err.msg, "at most 4e15"), "%s", err.msg);
	/* a GPU event's device must be an ordinal: a string pid (hashed) is none */
	read_text_expect_error("{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": \"abc\", "
			       "\"tid\": 7, \"ts\": 1, \"dur\": 2}]}",
			       &err);
	cr_assert_eq(err.status, RM_PARSE);
	cr_assert(strstr(err.msg, "is not a device ordinal"), "%s", err.msg);
	/* not an object */
	read_text_expect_error("{\"traceEvents\": [1]}", &err);
	cr_assert(strstr(err.msg, "not an object"), "%s", err.msg);
	read_text_expect_error("<html>", &err);
	cr_assert(strstr(err.msg, "not a Chrome trace"), "%s", err.msg);
}

/* Writes overlap.json gzip-compressed to path; returns the compressed size. */
static long write_gzip_copy(const char *path)
{
	FILE *in = fopen(test_file("overlap.json"), "rb");
	cr_assert_not_null(in);
	gzFile gz = gzopen(path, "wb9");
	cr_assert_not_null(gz);
	char buf[4096];
	size_t got;
	while ((got = fread(buf, 1, sizeof(buf), in)) > 0)
		cr_assert_eq(gzwrite(gz, buf, (unsigned)got), (int)got);
	fclose(in);
	cr_assert_eq(gzclose(gz), Z_OK);
	FILE *f = fopen(path, "rb");
	fseek(f, 0, SEEK_END);
	long size = ftell(f);
	fclose(f);
	return size;
}

Test(trace, gzip_and_truncated_gzip)
{
	char path[] = "/tmp/remora-test-trace-XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	close(fd);
	long size = write_gzip_copy(path);
	rm_error err;
	rm_error_clear(&err);
	rm_trace *t = rm_trace_read(path, &err);
	cr_assert_not_null(t, "%s", err.msg);
	rm_trace_summary s;
	rm_trace_summary_get(t, &s);
	cr_assert_eq(s.gpu_events, 8, "the same trace as the plain file");
	cr_assert_eq(s.rank, 3);
	rm_trace_destroy(t);
	/* cut the compressed stream in half: zlib reports the truncation, positioned in the text */
	cr_assert_eq(truncate(path, size / 2), 0);
	rm_error_clear(&err);
	t = rm_trace_read(path, &err);
	cr_assert_null(t);
	cr_assert_eq(err.status, RM_PARSE);
	cr_assert_str_eq(err.file, path);
	cr_assert_gt(err.line, 1);
	cr_assert(strstr(err.msg, "gzip stream is truncated"), "%s", err.msg);
	cr_assert(strstr(err.msg, "decompressed text"), "%s", err.msg);
	cr_assert(strstr(err.msg, "compressed byte offset"), "%s", err.msg);
	unlink(path);
}

Test(trace, missing_file)
{
	rm_error err;
	rm_error_clear(&err);
	cr_assert_null(rm_trace_read("/nonexistent/trace.json", &err));
	cr_assert_eq(err.status, RM_IO);
}

/* Runs `remora ARGS` (a shell line) and returns its exit status; its stdout in out (size). */
static int run_remora(const char *args, char *out, size_t size)
{
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "'%s' %s 2>/dev/null", env("REMORA_BIN"), args);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	size_t n = fread(out, 1, size - 1, p);
	out[n] = '\0';
	int st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(trace, cli)
{
	static char out[1 << 16];
	char args[1200];
	snprintf(args, sizeof(args), "trace report --json '%s'", test_file("overlap.json"));
	cr_assert_eq(run_remora(args, out, sizeof(out)), 0);
	json_error_t jerr;
	json_t *doc = json_loads(out, 0, &jerr);
	cr_assert_not_null(doc, "%s", jerr.text);
	json_t *r0 = json_array_get(json_object_get(doc, "ranks"), 0);
	cr_assert_eq(json_integer_value(json_object_get(r0, "rank")), 3);
	cr_assert_float_eq(json_real_value(json_object_get(r0, "exposed_comm_s")), 15e-6, 1e-12);
	cr_assert_float_eq(json_real_value(json_object_get(r0, "idle_s")), 17.5e-6, 1e-12);
	json_t *coc = json_object_get(r0, "collectives_on_compute_stream");
	cr_assert_eq(json_integer_value(json_object_get(coc, "count")), 1, "the median of 1 and 0, rounded");
	cr_assert_eq(json_array_size(json_object_get(r0, "steps")), 2);
	json_decref(doc);
	/* a directory: its *.json files in name order (jax.json is file 0, overlap.json rank 3) */
	snprintf(args, sizeof(args), "trace import '%s/trace'", env("REMORA_TEST_DATA"));
	cr_assert_eq(run_remora(args, out, sizeof(out)), 0);
	cr_assert(strstr(out, "jax.json: 13 events, 3 GPU events"), "%s", out);
	cr_assert(strstr(out, "overlap.json: 18 events, 8 GPU events (7 kernels, 3 NCCL), 2 streams on 1 devices, rank 3"),
		  "%s", out);
	/* bad input: exit 1, nothing on stdout; bad usage: exit 2 */
	cr_assert_eq(run_remora("trace report /nonexistent.json", out, sizeof(out)), 1);
	cr_assert_str_eq(out, "");
	cr_assert_eq(run_remora("trace frobnicate x", out, sizeof(out)), 2);
	cr_assert_eq(run_remora("trace import --json x", out, sizeof(out)), 2);
}

/* ---- B/E duration events ------------------------------------------------------------------- */

/*
 * be.json writes every span as a B/E pair: ProfilerStep#1 [0, 100) us on the CPU thread, with
 * aten::mm [5, 8) nested inside it (shapes A[256,512] . B[512,1024]); a GEMM kernel [10, 30) on
 * stream 7 whose External id 5 is in its E's args (merged into the B's); an elementwise kernel
 * [20, 50) on stream 8; and a kernel whose B has no E (dropped, with a warning). By hand: busy =
 * union [10, 50) = 40 us, idle = 100 - 40 = 60 us, GEMM FLOPs 2 * 256 * 1024 * 512 = 268435456.
 */
Test(trace, begin_end_pairs)
{
	rm_error err;
	rm_error_clear(&err);
	rm_trace *t = rm_trace_read(test_file("be.json"), &err);
	cr_assert_not_null(t, "%s", err.msg);
	rm_trace_summary s;
	rm_trace_summary_get(t, &s);
	cr_assert_eq(s.events, 9);
	cr_assert_eq(s.gpu_events, 2, "the B without its E is dropped");
	cr_assert_eq(s.steps, 1);
	cr_assert_eq(s.gemm_shapes, 1);
	cr_assert_eq(s.streams, 2);
	rm_trace_report *r = NULL;
	int n = 0;
	rm_trace_analyze(t, 0, &r, &n);
	cr_assert_eq(n, 1);
	cr_assert(r[0].from_steps);
	cr_assert_eq(r[0].windows[0].start_ns, 0);
	cr_assert_eq(r[0].windows[0].end_ns, 100000);
	assert_us(r[0].median.gpu_busy_s, 40);
	assert_us(r[0].median.idle_s, 60);
	assert_us(r[0].median.class_s[RM_TRACE_GEMM], 20);
	assert_us(r[0].median.class_s[RM_TRACE_MEMORY_BOUND], 30);
	cr_assert_float_eq(r[0].median.gemm_flops, 268435456.0, 0.5);
	rm_trace_reports_free(r, n);
	rm_trace_destroy(t);
}

Test(trace, begin_end_errors)
{
	rm_error err;
	/* an E that closes nothing: an error at the E (line 2, column 1) */
	read_text_expect_error("{\"traceEvents\": [\n"
			       "{\"ph\": \"E\", \"pid\": 1, \"tid\": 2, \"ts\": 5}]}",
			       &err);
	cr_assert_eq(err.status, RM_PARSE);
	cr_assert_eq(err.line, 2);
	cr_assert_eq(err.column, 1);
	cr_assert(strstr(err.msg, "closes no B event"), "%s", err.msg);
	/* B/E pairs nest per thread: an E on another tid does not close the B */
	read_text_expect_error("{\"traceEvents\": [\n"
			       "{\"ph\": \"B\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, \"tid\": 7, \"ts\": 1},\n"
			       "{\"ph\": \"E\", \"pid\": 0, \"tid\": 8, \"ts\": 3}]}",
			       &err);
	cr_assert_eq(err.line, 3);
	cr_assert(strstr(err.msg, "tid 8"), "%s", err.msg);
	/* an E before its B */
	read_text_expect_error("{\"traceEvents\": [\n"
			       "{\"ph\": \"B\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, \"tid\": 7, \"ts\": 10},\n"
			       "{\"ph\": \"E\", \"pid\": 0, \"tid\": 7, \"ts\": 4}]}",
			       &err);
	cr_assert_eq(err.line, 3);
	cr_assert(strstr(err.msg, "before its B"), "%s", err.msg);
	/* a B without ts */
	read_text_expect_error("{\"traceEvents\": [{\"ph\": \"B\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, \"tid\": 7}]}",
			       &err);
	cr_assert_eq(err.column, 18);
	cr_assert(strstr(err.msg, "numeric ts"), "%s", err.msg);
}

/* ---- calib import-trace -------------------------------------------------------------------- */

static char tmpdir[64];

static void make_dir(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/remora-trace-XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
}

static void cleanup_dir(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
}

static const char *calib_file(const char *name)
{
	static char path[1024];
	snprintf(path, sizeof(path), "%s/trace/calib/%s", env("REMORA_TEST_DATA"), name);
	return path;
}

/* "benchmark|params|value" of every measurement in rowid order, one per line, into out. */
static void dump_rows(const char *db, const char *sql, char *out, size_t size)
{
	sqlite3 *s = NULL;
	sqlite3_stmt *st = NULL;
	cr_assert_eq(sqlite3_open(db, &s), SQLITE_OK);
	cr_assert_eq(sqlite3_prepare_v2(s, sql, -1, &st, NULL), SQLITE_OK, "%s", sqlite3_errmsg(s));
	out[0] = '\0';
	size_t len = 0;
	while (sqlite3_step(st) == SQLITE_ROW) {
		for (int c = 0; c < sqlite3_column_count(st); c++) {
			const unsigned char *v = sqlite3_column_text(st, c);
			len += (size_t)snprintf(out + len, size - len, "%s%s", c ? "|" : "", v ? (const char *)v : "NULL");
		}
		len += (size_t)snprintf(out + len, size - len, "\n");
	}
	sqlite3_finalize(st);
	sqlite3_close(s);
}

/*
 * calib/calib.json, by hand (tests/data/trace/calib): three aten::mm A[256,512] . B[512,1024]
 * (B a transposed view: "tn") whose kernels take 10, 14 and 30 us: one row, median 14, count 3;
 * addmm(bias, A[512,256], B[256,1024]) contiguous ("nn") with a GEMM kernel of 8 us and its
 * split-K reduction of 2 us: 10 us; bmm fp32 A[4,128,64] . B[4,64,128] (B transposed: "tn") 5 us;
 * a GEMM kernel whose operator has no shapes: skipped. Attention: the SDPA flash forward, q
 * [2,16,1024,128], k [2,4,1024,128], Concrete Inputs[4] "True": 100 us; _flash_attention_backward
 * in [batch, seq, heads, dim] with two kernels 20 + 180 = 200 us. NCCL: an all-gather of 8388608
 * bf16 out (16777216 bytes, nccl-tests' size is the output) over ranks 8..15, which on nodes of
 * 4 GPUs are nodes 2 and 3; an all-reduce of 4194304 bf16 (8388608 bytes) over ranks 0 and 4
 * (start 0, stride 4): nodes 0 and 1; an NCCL kernel without arguments and a broadcast: skipped.
 * The run: GPU of deviceProperties[0], CUDA 12040 -> 12.4, driver API 12080 -> 12.8, NCCL 2.21.5;
 * rank 9 from distributedInfo.
 */
Test(trace, calib_import_rows, .init = make_dir, .fini = cleanup_dir)
{
	char db_path[128];
	snprintf(db_path, sizeof(db_path), "%s/calib.db", tmpdir);
	rm_error err;
	rm_error_clear(&err);
	rm_calib_db *db = rm_calib_db_open(db_path, true, &err);
	cr_assert_not_null(db, "%s", err.msg);
	const char *paths[] = {calib_file("calib.json")};
	rm_trace_calib_stats st;
	cr_assert_eq(rm_trace_calib_import(db, paths, 1, 4, &st, &err), RM_OK, "%s", err.msg);
	rm_calib_db_close(db);
	cr_assert_eq(st.files, 1);
	cr_assert_eq(st.runs, 1);
	cr_assert_eq(st.rows[RM_TRACE_CALIB_GEMM], 3);
	cr_assert_eq(st.kernels[RM_TRACE_CALIB_GEMM], 6);
	cr_assert_eq(st.skipped[RM_TRACE_CALIB_GEMM], 1);
	cr_assert_eq(st.rows[RM_TRACE_CALIB_ATTENTION], 2);
	cr_assert_eq(st.kernels[RM_TRACE_CALIB_ATTENTION], 3);
	cr_assert_eq(st.skipped[RM_TRACE_CALIB_ATTENTION], 0);
	cr_assert_eq(st.rows[RM_TRACE_CALIB_NCCL], 2);
	cr_assert_eq(st.kernels[RM_TRACE_CALIB_NCCL], 2);
	cr_assert_eq(st.skipped[RM_TRACE_CALIB_NCCL], 2);
	static char out[8192];
	dump_rows(db_path, "SELECT machine, gpu, driver, cuda, nccl, source FROM runs", out, sizeof(out));
	char want[1400];
	snprintf(want, sizeof(want), "unknown|NVIDIA H100 80GB HBM3|12.8|12.4|2.21.5|trace: %s\n", paths[0]);
	cr_assert_str_eq(out, want);
	dump_rows(db_path, "SELECT benchmark, params, value, unit FROM measurements ORDER BY rowid", out, sizeof(out));
	cr_assert_str_eq(out,
			 "gemm|{\"batch\":1,\"count\":1,\"device\":0,\"dtype\":\"bf16\",\"k\":256,\"layout\":\"nn\",\"m\":512,"
			 "\"n\":1024,\"op\":\"aten::addmm\",\"rank\":9}|10.0|us\n"
			 "gemm|{\"batch\":1,\"count\":3,\"device\":0,\"dtype\":\"bf16\",\"k\":512,\"layout\":\"tn\",\"m\":256,"
			 "\"n\":1024,\"op\":\"aten::mm\",\"rank\":9}|14.0|us\n"
			 "gemm|{\"batch\":4,\"count\":1,\"device\":0,\"dtype\":\"fp32\",\"k\":64,\"layout\":\"tn\",\"m\":128,"
			 "\"n\":128,\"op\":\"aten::bmm\",\"rank\":9}|5.0|us\n"
			 "attention|{\"batch\":2,\"causal\":true,\"count\":1,\"device\":0,\"dtype\":\"bf16\",\"head_dim\":128,"
			 "\"heads\":16,\"kv_heads\":4,\"op\":\"aten::_flash_attention_backward\",\"pass\":\"bwd\",\"rank\":9,"
			 "\"seq_kv\":1024,\"seq_q\":1024}|200.0|us\n"
			 "attention|{\"batch\":2,\"causal\":true,\"count\":1,\"device\":0,\"dtype\":\"bf16\",\"head_dim\":128,"
			 "\"heads\":16,\"kv_heads\":4,\"op\":\"aten::_scaled_dot_product_flash_attention\",\"pass\":\"fwd\","
			 "\"rank\":9,\"seq_kv\":1024,\"seq_q\":1024}|100.0|us\n"
			 "all_gather|{\"algo\":\"default\",\"bytes\":16777216,\"count\":1,\"device\":0,\"dtype\":\"bf16\","
			 "\"kernel_algo\":\"RING\",\"kernel_proto\":\"LL\",\"nodes\":2,\"rank\":9,\"ranks\":8}|300.0|us\n"
			 "all_reduce|{\"algo\":\"default\",\"bytes\":8388608,\"count\":1,\"device\":0,\"dtype\":\"bf16\","
			 "\"kernel_algo\":\"RING\",\"kernel_proto\":\"LL\",\"nodes\":2,\"rank\":9,\"ranks\":2}|250.0|us\n");
	/* without --gpus-per-node the collectives carry no node count; on nodes of 8 GPUs both groups
	 * sit on one node (ranks 8..15 on node 1; ranks 0 and 4 on node 0) */
	db = rm_calib_db_open(db_path, true, &err);
	cr_assert_eq(rm_trace_calib_import(db, paths, 1, 0, &st, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(rm_trace_calib_import(db, paths, 1, 8, &st, &err), RM_OK, "%s", err.msg);
	rm_calib_db_close(db);
	dump_rows(db_path,
		  "SELECT run_id, benchmark, json_extract(params, '$.nodes') FROM measurements WHERE benchmark LIKE 'all%' "
		  "AND run_id > 1 ORDER BY rowid",
		  out, sizeof(out));
	cr_assert_str_eq(out, "2|all_gather|NULL\n2|all_reduce|NULL\n3|all_gather|1\n3|all_reduce|1\n");
}

/* One transaction for every file: a bad second file leaves the database as it was; a trace
 * without shapes imports nothing (RM_MISSING). */
Test(trace, calib_import_atomic, .init = make_dir, .fini = cleanup_dir)
{
	char db_path[128], bad[128];
	snprintf(db_path, sizeof(db_path), "%s/calib.db", tmpdir);
	snprintf(bad, sizeof(bad), "%s/bad.json", tmpdir);
	FILE *f = fopen(bad, "w");
	cr_assert_not_null(f);
	fputs("{\"traceEvents\": [\n{\"ph\": \"E\", \"pid\": 1, \"tid\": 1, \"ts\": 3}]}\n", f);
	fclose(f);
	rm_error err;
	rm_error_clear(&err);
	rm_calib_db *db = rm_calib_db_open(db_path, true, &err);
	cr_assert_not_null(db, "%s", err.msg);
	const char *paths[] = {calib_file("calib.json"), bad};
	cr_assert_eq(rm_trace_calib_import(db, paths, 2, 4, NULL, &err), RM_PARSE);
	cr_assert_str_eq(err.file, bad);
	cr_assert_eq(err.line, 2);
	const char *none[] = {test_file("jax.json")};
	rm_error_clear(&err);
	cr_assert_eq(rm_trace_calib_import(db, none, 1, 0, NULL, &err), RM_MISSING);
	cr_assert(strstr(err.msg, "record_shapes"), "%s", err.msg);
	rm_calib_db_close(db);
	static char out[256];
	dump_rows(db_path, "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM measurements)", out, sizeof(out));
	cr_assert_str_eq(out, "0|0\n");
}

/*
 * `calib fit` reads imported GEMM rows with no change: calib/fit.json holds two BF16 TN GEMMs on
 * an H100 (132 SMs, 128x256 tiles: 8x4 = 32 and 16x8 = 128 tiles, both under one wave, q = 1),
 * 1024x1024x4096 in 22.18 us and 2048x2048x4096 in 73.719 us. FLOPs 2*m*n*k = 8589.934592 and
 * 34359.738368 MFLOP; the line through both points: R = (34359.738368 - 8589.934592) /
 * (73.719 - 22.18) = 500.00589 TFLOP/s, t0 = 22.18 - 8589.934592 / R = 5.00033 us.
 */
Test(trace, calib_fit_from_trace, .init = make_dir, .fini = cleanup_dir)
{
	char db_path[128];
	snprintf(db_path, sizeof(db_path), "%s/calib.db", tmpdir);
	rm_error err;
	rm_error_clear(&err);
	rm_calib_db *db = rm_calib_db_open(db_path, true, &err);
	cr_assert_not_null(db, "%s", err.msg);
	const char *paths[] = {calib_file("fit.json")};
	cr_assert_eq(rm_trace_calib_import(db, paths, 1, 0, NULL, &err), RM_OK, "%s", err.msg);
	rm_calib_fit_opts opts = {.profile = "trace"};
	rm_calib_fit_report rep;
	cr_assert_eq(rm_calib_fit(db, &opts, &rep, &err), RM_OK, "%s", err.msg);
	rm_calib_db_close(db);
	const rm_calib_fit_result *g = NULL;
	for (int i = 0; i < rep.n_results; i++)
		if (!strcmp(rep.results[i].model, "gemm.bf16"))
			g = &rep.results[i];
	cr_assert_not_null(g);
	cr_assert(g->ok, "%s", g->why);
	cr_assert_eq(g->n_points, 2);
	rm_calib_fit_report_finish(&rep);
	static char out[512];
	dump_rows(db_path, "SELECT json_extract(params, '$.TFLOPs'), json_extract(params, '$.t0_us') FROM fits "
			   "WHERE model = 'gemm.bf16'",
		  out, sizeof(out));
	double R = 0, t0 = 0;
	cr_assert_eq(sscanf(out, "%lf|%lf", &R, &t0), 2, "%s", out);
	double want_R = (34359.738368 - 8589.934592) / (73.719 - 22.18);
	cr_assert_float_eq(R, want_R, 1e-6 * want_R);
	cr_assert_float_eq(t0, 22.18 - 8589.934592 / want_R, 1e-6);
}

Test(trace, calib_cli, .init = make_dir, .fini = cleanup_dir)
{
	static char out[1 << 14];
	char args[1400];
	cr_assert_eq(run_remora("calib --help", out, sizeof(out)), 0);
	cr_assert(strstr(out, "import-trace TRACE|DIR... --db DB"), "%s", out);
	/* a directory: calib.json and fit.json, one run each */
	snprintf(args, sizeof(args), "calib import-trace '%s/trace/calib' --db '%s/c.db' --gpus-per-node 4",
		 env("REMORA_TEST_DATA"), tmpdir);
	cr_assert_eq(run_remora(args, out, sizeof(out)), 0);
	cr_assert(strstr(out, "imported 2 traces into"), "%s", out);
	cr_assert(strstr(out, "2 runs (first id 1); rows: gemm 5, attention 2, nccl 2 (from 8, 3, 2 kernels); kernels "
			      "skipped (no shapes): gemm 1, attention 0, nccl 2"),
		  "%s", out);
	snprintf(args, sizeof(args), "calib import-trace --json '%s' --db '%s/c.db'", calib_file("fit.json"), tmpdir);
	cr_assert_eq(run_remora(args, out, sizeof(out)), 0);
	json_t *doc = json_loads(out, 0, NULL);
	cr_assert_not_null(doc, "%s", out);
	cr_assert_eq(json_integer_value(json_object_get(doc, "first_run_id")), 3);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(doc, "gemm"), "rows")), 2);
	json_decref(doc);
	/* bad input: exit 1 and a database the command would have created is not left behind */
	snprintf(args, sizeof(args), "calib import-trace '%s' --db '%s/new.db'", test_file("jax.json"), tmpdir);
	cr_assert_eq(run_remora(args, out, sizeof(out)), 1);
	char p[128];
	snprintf(p, sizeof(p), "%s/new.db", tmpdir);
	cr_assert_neq(access(p, F_OK), 0, "the failed import left %s", p);
	cr_assert_eq(run_remora("calib import-trace --db x.db", out, sizeof(out)), 2);
}

/*
 * launch.json, the layout of older Kineto traces: the kernel and its cudaLaunchKernel carry the
 * launch's correlation as "External id" (900), the operator its own (5). The launch at 120 us
 * runs inside aten::mm [100, 150) on thread 11, so kernel [200, 204) is that 256 x 512 x 1024 GEMM:
 * 2 x 256 x 512 x 1024 = 268,435,456 FLOPs in 4 us. The launch at 160 us (after the operator
 * ended) and the one on thread 12 enclose in no operator: those kernels stay unshaped. The launch
 * at 140.5 us names its pid as a string (read by decoding the event, not from its text): its
 * kernel [230, 234) is the same operator's second kernel, shaped, its FLOPs already counted.
 */
Test(trace, older_kineto_links_kernels_through_their_launch)
{
	rm_error err;
	rm_error_clear(&err);
	rm_trace *t = rm_trace_read(test_file("launch.json"), &err);
	cr_assert_not_null(t, "%s", err.msg);
	rm_trace_report *r = NULL;
	int n = 0;
	rm_trace_analyze(t, 0, &r, &n);
	cr_assert_eq(n, 1);
	const rm_trace_fig *m = &r[0].median;
	assert_us(m->class_s[RM_TRACE_GEMM], 16);
	cr_assert_float_eq(m->gemm_flops, 268435456.0, 0.5);
	assert_us(m->gemm_shaped_s, 8);
	rm_trace_reports_free(r, n);
	rm_trace_destroy(t);
}

/* A device is an ordinal: a name in args.device is refused with its text, not hashed into one. */
Test(trace, device_name_is_refused)
{
	rm_error err;
	read_text_expect_error("{\"traceEvents\": [\n"
			       "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, \"tid\": 7, \"ts\": 10, \"dur\": 5, "
			       "\"args\": {\"device\": \"x\", \"stream\": 7}}]}",
			       &err);
	cr_assert_eq(err.status, RM_PARSE);
	cr_assert_eq(err.line, 2);
	cr_assert_eq(err.column, 1);
	cr_assert(strstr(err.msg, "args.device is \"x\", not an integer device ordinal"), "%s", err.msg);
	/* traceEvents that is not an array: said so at its value */
	read_text_expect_error("{\"traceEvents\": 5}", &err);
	cr_assert_eq(err.status, RM_PARSE);
	cr_assert_eq(err.line, 1);
	cr_assert_eq(err.column, 17);
	cr_assert(strstr(err.msg, "must be an array of events, found '5'"), "%s", err.msg);
}
