/*
 * Prediction next to measurement (remora/compare.h): a hand-built program of fixed-time ops,
 * simulated, against the hand-written trace tests/data/trace/compare.json; every row, the five
 * largest discrepancies and the merged trace worked out by hand below; the CLI's errors.
 *
 * Measured (compare.json, times in us): three ProfilerSteps [0,50), [50,110), [110,158) holding
 * the same kernels at offsets 0, 50, 110. Per step, from the offset:
 *   stream 20: AllGather RING_LL [0,12), AllGather RING_SIMPLE [20,26), ReduceScatter [30,40),
 *              Memset [46,47)
 *   stream 7:  GEMM [12,37), flash_fwd [37,41), elementwise [41,44), AllReduce [44,46)
 * so each step: gemm 25, attention 4, memory_bound 3, nccl 12+6+10+2 = 30, memset 1; compute
 * busy [12,44) = 32; comm busy 30; exposed (comm minus compute) [0,12) + [44,46) = 14; GPU busy
 * [0,47) = 47; collectives on the compute stream: the AllReduce on 7 (which runs compute), 1 and
 * 2; per op AllGather 2 kernels 18 (both algorithms, one union), AllReduce 1 and 2,
 * ReduceScatter 1 and 10. Steps 50, 60, 48: median 50 (step 1); idle 3, 13, 1: median 3.
 *
 * Predicted (by_hand below): ag [0,10) comm, mm [10,30) gemm, attn [30,34), ew [34,39)
 * elementwise, rs [39,47) comm (waits ew), cp [0,5) h2d copy: step 47; gemm 20; attention 4;
 * memory_bound 5; nccl 18; memcpy 5; compute busy [10,39) = 29; comm busy 18; exposed [0,10) +
 * [39,47) = 18; idle 0; none on the compute stream; AllGather 1 and 10, ReduceScatter 1 and 8.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "remora/compare.h"
#include "remora/hw.h"
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
	snprintf(path, sizeof(path), "%s/trace/%s", env("REMORA_TEST_DATA"), name);
	return path;
}

#define assert_us(seconds, us)                                                                                \
	cr_assert_float_eq((seconds) * 1e6, (double)(us), 1e-6, "%s = %.9g s, expected %g us", #seconds, (seconds), \
			   (double)(us))

static int32_t op(rm_program *p, const char *name, rm_cost_kind kind, rm_coll coll, int32_t stream, double us,
		  const int32_t *waits, uint32_t n_waits, const int32_t *records, uint32_t n_rec)
{
	rm_program_op_desc d = rm_program_op_desc_init(name, kind, stream);
	d.time_s = us * 1e-6;
	if (kind == RM_COST_COLLECTIVE)
		d.cost.collective = (rm_collective_cost){.op = coll, .bytes = 1 << 20, .group_size = 8, .span = 1};
	if (kind == RM_COST_COPY)
		d.cost.copy = (rm_copy_cost){.dir = RM_COPY_H2D, .bytes = 1};
	if (kind == RM_COST_ATTENTION)
		d.cost.attention.shape = (rm_attention_shape){.batch = 1, .heads = 32, .kv_heads = 32, .seq = 4096,
							      .head_dim = 128, .causal = true, .dtype = RM_DTYPE_BF16};
	d.waits = waits;
	d.n_waits = n_waits;
	d.records = records;
	d.n_records = n_rec;
	return rm_program_add_op(p, &d);
}

static rm_program *by_hand(void)
{
	rm_program *p = rm_program_create("compare-by-hand");
	rm_program_add_stream(p, "compute", RM_STREAM_COMPUTE, 0);
	rm_program_add_stream(p, "comm", RM_STREAM_COLLECTIVE, -1);
	rm_program_add_stream(p, "copy", RM_STREAM_COPY, 0);
	int32_t e0 = rm_program_add_event(p, "ag_done"), e1 = rm_program_add_event(p, "ew_done");
	op(p, "ag", RM_COST_COLLECTIVE, RM_COLL_ALL_GATHER, 1, 10, NULL, 0, &e0, 1);
	op(p, "mm", RM_COST_GEMM, 0, 0, 20, &e0, 1, NULL, 0);
	op(p, "attn", RM_COST_ATTENTION, 0, 0, 4, NULL, 0, NULL, 0);
	op(p, "ew", RM_COST_ELEMENTWISE, 0, 0, 5, NULL, 0, &e1, 1);
	op(p, "rs", RM_COST_COLLECTIVE, RM_COLL_REDUCE_SCATTER, 1, 8, &e1, 1, NULL, 0);
	op(p, "cp", RM_COST_COPY, 0, 2, 5, NULL, 0, NULL, 0);
	return p;
}

typedef struct fixture {
	rm_program *prog;
	rm_sim *sim;
	rm_trace *measured;
	rm_trace_report *pred, *meas;
	int n_pred, n_meas;
	rm_compare c;
} fixture;

static void setup(fixture *f)
{
	memset(f, 0, sizeof(*f));
	rm_error err;
	rm_error_clear(&err);
	f->prog = by_hand();
	const rm_hw_profile *hw = rm_hw_profile_find("h100-sxm", NULL);
	cr_assert_not_null(hw);
	rm_sim_options opt = {.memory_timeline = true};
	f->sim = rm_sim_create(f->prog, hw, &opt, &err);
	cr_assert_not_null(f->sim, "%s", err.msg);
	cr_assert_eq(rm_sim_run(f->sim, &err), RM_OK, "%s", err.msg);
	rm_trace *pt = rm_compare_sim_trace(f->sim, &err);
	cr_assert_not_null(pt, "%s", err.msg);
	rm_compare_analyze(pt, 0, &f->pred, &f->n_pred);
	rm_trace_destroy(pt);
	cr_assert_eq(f->n_pred, 1);
	f->measured = rm_trace_read(test_file("compare.json"), &err);
	cr_assert_not_null(f->measured, "%s", err.msg);
	rm_compare_analyze(f->measured, 0, &f->meas, &f->n_meas);
	cr_assert_eq(f->n_meas, 1);
	const rm_trace_report *m = rm_compare_pick(f->meas, f->n_meas, -1, &err);
	cr_assert_not_null(m);
	rm_compare_build(&f->pred[0], m, &f->c);
}

static void teardown(fixture *f)
{
	rm_compare_finish(&f->c);
	rm_trace_reports_free(f->pred, f->n_pred);
	rm_trace_reports_free(f->meas, f->n_meas);
	rm_trace_destroy(f->measured);
	rm_sim_destroy(f->sim);
	rm_program_destroy(f->prog);
}

static const rm_compare_row *row(const rm_compare *c, rm_compare_group g, const char *key)
{
	for (int i = 0; i < c->n_rows; i++)
		if (c->rows[i].group == g && strcmp(c->rows[i].key, key) == 0)
			return &c->rows[i];
	cr_assert_fail("no row %s %s", rm_compare_group_key(g), key);
	return NULL;
}

static void expect(const rm_compare *c, rm_compare_group g, const char *key, double pred_us, double meas_us)
{
	const rm_compare_row *r = row(c, g, key);
	cr_assert_float_eq(r->predicted_s * 1e6, pred_us, 1e-6, "%s predicted %.9g us, expected %g", key,
			   r->predicted_s * 1e6, pred_us);
	cr_assert_float_eq(r->measured_s * 1e6, meas_us, 1e-6, "%s measured %.9g us, expected %g", key,
			   r->measured_s * 1e6, meas_us);
}

Test(compare, predicted_run_as_a_trace)
{
	fixture f;
	setup(&f);
	/* the sim ran the ops where the header says (no contention at 1 MiB and fixed times) */
	const rm_trace_report *p = &f.pred[0];
	cr_assert(p->from_steps);
	cr_assert_eq(p->n_windows, 1);
	cr_assert_eq(p->windows[0].start_ns, 0);
	cr_assert_eq(p->windows[0].end_ns, 47000);
	assert_us(p->median.compute_busy_s, 29);
	assert_us(p->median.exposed_comm_s, 18);
	cr_assert_eq(p->n_nccl, 2);
	cr_assert_str_eq(p->median.nccl[0].op, "AllGather");
	cr_assert_str_eq(p->median.nccl[0].algo, "");
	cr_assert_str_eq(p->median.nccl[1].op, "ReduceScatter");
	teardown(&f);
}

Test(compare, rows_by_hand)
{
	fixture f;
	setup(&f);
	const rm_compare *c = &f.c;
	cr_assert_eq(c->rank, 0);
	cr_assert_eq(c->device, 0);
	cr_assert(c->from_steps);
	cr_assert_eq(c->n_windows, 3);
	cr_assert_eq(c->shown_number, 1, "the step of median length, 50 us among 50, 60, 48");
	cr_assert_eq(c->shown_start_ns, 0);
	cr_assert_eq(c->shown_end_ns, 50000);
	expect(c, RM_COMPARE_STEP, "step_s", 47, 50);
	expect(c, RM_COMPARE_CLASS, "gemm", 20, 25);
	expect(c, RM_COMPARE_CLASS, "attention", 4, 4);
	expect(c, RM_COMPARE_CLASS, "memory_bound", 5, 3);
	expect(c, RM_COMPARE_CLASS, "nccl", 18, 30);
	expect(c, RM_COMPARE_CLASS, "memcpy", 5, 0);
	expect(c, RM_COMPARE_CLASS, "memset", 0, 1);
	cr_assert_not(row(c, RM_COMPARE_CLASS, "memset")->modelled);
	cr_assert(row(c, RM_COMPARE_CLASS, "memcpy")->modelled);
	expect(c, RM_COMPARE_FIGURE, "compute_busy_s", 29, 32);
	expect(c, RM_COMPARE_FIGURE, "comm_busy_s", 18, 30);
	expect(c, RM_COMPARE_FIGURE, "exposed_comm_s", 18, 14);
	expect(c, RM_COMPARE_FIGURE, "idle_s", 0, 3);
	expect(c, RM_COMPARE_FIGURE, "collectives_on_compute_stream", 0, 2);
	expect(c, RM_COMPARE_COLLECTIVE, "AllGather", 10, 18);
	expect(c, RM_COMPARE_COLLECTIVE, "AllReduce", 0, 2);
	expect(c, RM_COMPARE_COLLECTIVE, "ReduceScatter", 8, 10);
	/* counts: predicted ops, measured kernels */
	const rm_compare_row *ag = row(c, RM_COMPARE_COLLECTIVE, "AllGather");
	cr_assert_eq(ag->predicted_count, 1);
	cr_assert_eq(ag->measured_count, 2, "RING_LL and RING_SIMPLE are one AllGather row");
	cr_assert_eq(row(c, RM_COMPARE_CLASS, "nccl")->measured_count, 4);
	cr_assert_eq(row(c, RM_COMPARE_CLASS, "memory_bound")->predicted_count, 1);
	cr_assert_eq(row(c, RM_COMPARE_FIGURE, "collectives_on_compute_stream")->measured_count, 1);
	/* the rows: step, 6 classes, 5 figures, 3 collectives in name order */
	cr_assert_eq(c->n_rows, 15);
	cr_assert_str_eq(c->rows[12].key, "AllGather");
	cr_assert_str_eq(c->rows[14].key, "ReduceScatter");
	/* signed errors: (47 - 50) / 50 = -6 %; exposed (18 - 14) / 14 = +28.571 %; memcpy none */
	cr_assert_float_eq(rm_compare_row_error_pct(row(c, RM_COMPARE_STEP, "step_s")), -6.0, 1e-9);
	cr_assert_float_eq(rm_compare_row_error_pct(row(c, RM_COMPARE_FIGURE, "exposed_comm_s")), 400.0 / 14, 1e-9);
	cr_assert(isnan(rm_compare_row_error_pct(row(c, RM_COMPARE_CLASS, "memcpy"))));
	teardown(&f);
}

Test(compare, five_largest)
{
	fixture f;
	setup(&f);
	const rm_compare *c = &f.c;
	/* |pred - meas| in us: nccl 12, comm_busy 12, AllGather 8, gemm 5, memcpy 5, then exposed 4
	 * (out); ties in row order (nccl is a class row, before the figures; gemm before memcpy) */
	static const char *const want[] = {"nccl", "comm_busy_s", "AllGather", "gemm", "memcpy"};
	cr_assert_eq(c->n_largest, 5);
	for (int i = 0; i < 5; i++)
		cr_assert_str_eq(c->rows[c->largest[i]].key, want[i], "place %d", i + 1);
	json_t *doc = rm_compare_json(c);
	cr_assert_str_eq(json_string_value(json_object_get(doc, "schema")), "remora.compare/1");
	json_t *top = json_object_get(doc, "largest_discrepancies");
	cr_assert_eq(json_array_size(top), 5);
	json_t *t0 = json_array_get(top, 0);
	cr_assert_str_eq(json_string_value(json_object_get(t0, "key")), "nccl");
	cr_assert_str_eq(json_string_value(json_object_get(t0, "group")), "class");
	cr_assert_float_eq(json_real_value(json_object_get(t0, "diff_s")), -12e-6, 1e-15);
	cr_assert_float_eq(json_real_value(json_object_get(t0, "error_pct")), -40.0, 1e-9);
	json_t *memcpy_row = json_object_get(json_object_get(doc, "classes"), "memcpy");
	cr_assert(json_is_null(json_object_get(memcpy_row, "error_pct")));
	json_t *colls = json_object_get(doc, "collectives");
	cr_assert_eq(json_array_size(colls), 3);
	cr_assert_eq(json_integer_value(json_object_get(json_array_get(colls, 0), "measured_count")), 2);
	json_decref(doc);
	teardown(&f);
}

/* The X events of pid in the merged trace: how many, the earliest start and the latest end. */
static void slices(json_t *events, int pid, int *n, double *first, double *last)
{
	*n = 0;
	*first = INFINITY;
	*last = -INFINITY;
	size_t i;
	json_t *e;
	json_array_foreach(events, i, e)
	{
		if (json_integer_value(json_object_get(e, "pid")) != pid ||
		    strcmp(json_string_value(json_object_get(e, "ph")), "X") != 0)
			continue;
		double ts = json_number_value(json_object_get(e, "ts")), dur = json_number_value(json_object_get(e, "dur"));
		(*n)++;
		if (ts < *first)
			*first = ts;
		if (ts + dur > *last)
			*last = ts + dur;
	}
}

static const char *process_name(json_t *events, int pid)
{
	size_t i;
	json_t *e;
	json_array_foreach(events, i, e)
	{
		if (json_integer_value(json_object_get(e, "pid")) == pid &&
		    strcmp(json_string_value(json_object_get(e, "name")), "process_name") == 0)
			return json_string_value(json_object_get(json_object_get(e, "args"), "name"));
	}
	return NULL;
}

Test(compare, merged_trace_aligned_at_zero)
{
	fixture f;
	setup(&f);
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	rm_error err;
	rm_error_clear(&err);
	cr_assert(rm_compare_write_trace(f.sim, f.measured, &f.c, out, &err), "%s", err.msg);
	fclose(out);
	json_error_t je;
	json_t *doc = json_loadb(buf, len, 0, &je);
	cr_assert_not_null(doc, "%s", je.text);
	json_t *events = json_object_get(doc, "traceEvents");
	cr_assert_str_eq(process_name(events, 1), "predicted");
	cr_assert_str_eq(process_name(events, 2), "measured");
	int n;
	double first, last;
	/* predicted: the six ops, from ag and cp at 0 to rs's end at 47 us */
	slices(events, 1, &n, &first, &last);
	cr_assert_eq(n, 6);
	cr_assert_float_eq(first, 0, 1e-9);
	cr_assert_float_eq(last, 47, 1e-9);
	/* measured: step 1's eight kernels, its window [0, 50) shifted to 0: [0, 47) */
	slices(events, 2, &n, &first, &last);
	cr_assert_eq(n, 8);
	cr_assert_float_eq(first, 0, 1e-9);
	cr_assert_float_eq(last, 47, 1e-9);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(doc, "otherData"), "measured_step")), 1);
	json_decref(doc);
	/* deterministic: the same bytes again */
	char *buf2 = NULL;
	size_t len2 = 0;
	out = open_memstream(&buf2, &len2);
	cr_assert(rm_compare_write_trace(f.sim, f.measured, &f.c, out, &err));
	fclose(out);
	cr_assert_eq(len, len2);
	cr_assert(memcmp(buf, buf2, len) == 0);
	free(buf);
	free(buf2);
	teardown(&f);
}

Test(compare, pick_rank)
{
	rm_trace_report r[3];
	memset(r, 0, sizeof(r));
	r[0].rank = 2;
	r[1].rank = 2;
	r[1].device = 1;
	r[2].rank = 5;
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_compare_pick(r, 3, 5, &err), &r[2]);
	cr_assert_eq(rm_compare_pick(r, 3, 2, &err), &r[0], "a rank's first device");
	cr_assert_eq(rm_compare_pick(r, 3, -1, &err), &r[0], "no rank 0: the first report");
	cr_assert_null(rm_compare_pick(r, 3, 0, &err));
	cr_assert_eq(err.status, RM_NOT_FOUND);
	cr_assert(strstr(err.msg, "no rank 0 in the trace (ranks: 2, 5)"), "%s", err.msg);
}

/* Runs `remora ARGS` (a shell line) and returns its exit status; its stdout in out (size). */
static int run_remora(const char *args, char *out, size_t size)
{
	char cmd[4096];
	snprintf(cmd, sizeof(cmd), "'%s' %s 2>/dev/null", env("REMORA_BIN"), args);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	size_t n = fread(out, 1, size - 1, p);
	out[n] = '\0';
	int st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const char *seed(void)
{
	static char path[1024];
	snprintf(path, sizeof(path), "%s/scenarios/seed-llama2-7b-fsdp8-h100.yaml", env("REMORA_DATA_DIR"));
	return path;
}

Test(compare, cli)
{
	static char out[1 << 16];
	char args[3000], dir[] = "/tmp/remora-compare-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char trace[1100], bad[1100], nosteps[1100];
	snprintf(trace, sizeof(trace), "%s/both.json", dir);
	snprintf(bad, sizeof(bad), "%s/truncated.json", dir);
	snprintf(nosteps, sizeof(nosteps), "%s/nosteps.json", dir);
	/* the seed against the fixture: JSON with every group, the merged trace written */
	snprintf(args, sizeof(args), "compare '%s' --measured '%s' --json --trace '%s'", seed(), test_file("compare.json"),
		 trace);
	cr_assert_eq(run_remora(args, out, sizeof(out)), 0);
	json_error_t je;
	json_t *doc = json_loads(out, 0, &je);
	cr_assert_not_null(doc, "%s", je.text);
	cr_assert_float_eq(json_real_value(json_object_get(json_object_get(doc, "step"), "measured_s")), 50e-6, 1e-12);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(doc, "measured"), "window")), "steps_median");
	cr_assert_eq(json_array_size(json_object_get(doc, "largest_discrepancies")), 5);
	json_decref(doc);
	struct stat st;
	cr_assert_eq(stat(trace, &st), 0);
	unlink(trace);
	/* a truncated trace: exit 1, nothing on stdout, no OUT */
	FILE *f = fopen(bad, "w");
	fputs("{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": 1, \"dur\"", f);
	fclose(f);
	snprintf(args, sizeof(args), "compare '%s' --measured '%s' --trace '%s'", seed(), bad, trace);
	cr_assert_eq(run_remora(args, out, sizeof(out)), 1);
	cr_assert_str_eq(out, "");
	cr_assert_neq(stat(trace, &st), 0, "no partial OUT");
	/* a bad scenario: exit 1, nothing on stdout */
	snprintf(args, sizeof(args), "compare '%s' --measured '%s' --trace '%s'", bad, test_file("compare.json"), trace);
	cr_assert_eq(run_remora(args, out, sizeof(out)), 1);
	cr_assert_str_eq(out, "");
	cr_assert_neq(stat(trace, &st), 0);
	/* no step annotations: the GPU span stands for the step, and the text says so */
	f = fopen(nosteps, "w");
	fputs("{\"traceEvents\": [\n"
	      "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"sm90_xmma_gemm_bf16\", \"ts\": 100, \"dur\": 30, \"args\": {\"device\": 0, \"stream\": 7}},\n"
	      "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclDevKernel_AllGather_RING_LL(x)\", \"ts\": 120, \"dur\": 20, \"args\": {\"device\": 0, \"stream\": 20}}\n"
	      "]}\n",
	      f);
	fclose(f);
	snprintf(args, sizeof(args), "compare '%s' --measured '%s'", seed(), nosteps);
	cr_assert_eq(run_remora(args, out, sizeof(out)), 0);
	cr_assert(strstr(out, "no step annotation in the trace, the span of its GPU events stands for the step"), "%s", out);
	snprintf(args, sizeof(args), "compare '%s' --measured '%s' --json", seed(), nosteps);
	cr_assert_eq(run_remora(args, out, sizeof(out)), 0);
	doc = json_loads(out, 0, &je);
	cr_assert_not_null(doc, "%s", je.text);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(doc, "measured"), "window")), "gpu_span");
	cr_assert_float_eq(json_real_value(json_object_get(json_object_get(doc, "step"), "measured_s")), 40e-6, 1e-12);
	json_decref(doc);
	/* --set reaches the prediction: micro-batch 2 makes a longer predicted step */
	snprintf(args, sizeof(args), "compare '%s' --measured '%s' --json", seed(), test_file("compare.json"));
	cr_assert_eq(run_remora(args, out, sizeof(out)), 0);
	doc = json_loads(out, 0, &je);
	cr_assert_not_null(doc, "%s", je.text);
	double b1 = json_real_value(json_object_get(json_object_get(doc, "step"), "predicted_s"));
	json_decref(doc);
	snprintf(args, sizeof(args), "compare '%s' --set training.micro_batch=2 --measured '%s' --json", seed(),
		 test_file("compare.json"));
	cr_assert_eq(run_remora(args, out, sizeof(out)), 0);
	doc = json_loads(out, 0, &je);
	cr_assert_not_null(doc, "%s", je.text);
	double b2 = json_real_value(json_object_get(json_object_get(doc, "step"), "predicted_s"));
	json_decref(doc);
	cr_assert(b2 > b1 * 1.5, "micro-batch 2: %g s, micro-batch 1: %g s", b2, b1);
	/* the JAX fixture: one step, named; its device 0 of rank 0 */
	snprintf(args, sizeof(args), "compare '%s' --measured '%s'", seed(), test_file("jax.json"));
	cr_assert_eq(run_remora(args, out, sizeof(out)), 0);
	cr_assert(strstr(out, "measured: rank 0, device 0: its one step, 7\n"), "%s", out);
	/* a directory (compare.json rank 0, jax.json file 1, overlap.json rank 3): --rank 3 is
	 * overlap.json, whose kernels the merged trace then holds (of its step 2, [200, 250) us:
	 * ReduceScatter clipped to [0, 10), nvjet [5, 20), the memcpy [30, 40)) */
	snprintf(args, sizeof(args), "compare '%s' --measured '%s/trace' --rank 3 --json --trace '%s'", seed(),
		 env("REMORA_TEST_DATA"), trace);
	cr_assert_eq(run_remora(args, out, sizeof(out)), 0);
	doc = json_loads(out, 0, &je);
	cr_assert_not_null(doc, "%s", je.text);
	json_t *meas = json_object_get(doc, "measured");
	cr_assert_eq(json_integer_value(json_object_get(meas, "rank")), 3);
	cr_assert(strstr(json_string_value(json_object_get(meas, "file")), "overlap.json"));
	json_decref(doc);
	doc = json_load_file(trace, 0, &je);
	cr_assert_not_null(doc, "%s", je.text);
	size_t i;
	json_t *e;
	int n_meas = 0;
	double last = 0;
	json_array_foreach(json_object_get(doc, "traceEvents"), i, e)
	{
		if (json_integer_value(json_object_get(e, "pid")) != 2 || strcmp(json_string_value(json_object_get(e, "ph")), "X"))
			continue;
		n_meas++;
		double end = json_number_value(json_object_get(e, "ts")) + json_number_value(json_object_get(e, "dur"));
		last = end > last ? end : last;
	}
	cr_assert_eq(n_meas, 3);
	cr_assert_float_eq(last, 40, 1e-9);
	json_decref(doc);
	unlink(trace);
	/* a rank the trace does not have: exit 1; usage errors: exit 2 */
	snprintf(args, sizeof(args), "compare '%s' --measured '%s' --rank 4", seed(), test_file("compare.json"));
	cr_assert_eq(run_remora(args, out, sizeof(out)), 1);
	cr_assert_str_eq(out, "");
	snprintf(args, sizeof(args), "compare '%s'", seed());
	cr_assert_eq(run_remora(args, out, sizeof(out)), 2);
	snprintf(args, sizeof(args), "compare '%s' --measured '%s' --rank x", seed(), test_file("compare.json"));
	cr_assert_eq(run_remora(args, out, sizeof(out)), 2);
	unlink(bad);
	unlink(nosteps);
	rmdir(dir);
}
