/*
 * The executor's plan (remora/exec.h): memory plans of the shipped scenarios' programs and of a
 * hand-checked one, the failures before launch (memory, dtypes, groups), the attention lowering,
 * the comparison, trace and calibration rows of a synthetic measurement, and `remora exec
 * --dry-run` exit codes. No GPU needed.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "remora/calib.h"
#include "remora/exec.h"
#include "remora/scenario.h"
#include "remora/schedule.h"
#include "remora/sim.h"

static const char *env(const char *name)
{
	const char *v = getenv(name);
	cr_assert_not_null(v, "%s must be set (meson test sets it)", name);
	return v;
}

static const char *test_file(const char *name)
{
	static char path[1024];
	snprintf(path, sizeof(path), "%s/%s", env("REMORA_TEST_DATA"), name);
	return path;
}

static const rm_hw_profile *hw(const char *name)
{
	const rm_hw_profile *p = rm_hw_profile_find(name, NULL);
	cr_assert_not_null(p, "%s", name);
	return p;
}

/* Every pair of pool (or host) tensors whose launch-order lifetimes meet is disjoint in memory,
 * and everything lies inside its region. Exhaustive. */
static void assert_no_overlap(const rm_exec_plan *plan)
{
	const rm_program *prog = plan->prog;
	for (int32_t a = 0; a < prog->n_tensors; a++) {
		const rm_exec_placement *p = &plan->tensors[a];
		if (p->first_op < 0)
			continue;
		cr_assert_geq(p->offset, 0);
		cr_assert_eq(p->offset % RM_EXEC_ALIGN, 0);
		cr_assert_leq(p->offset + p->bytes, plan->region_bytes[p->region], "%s", prog->tensors[a].name);
		for (int32_t b = a + 1; b < prog->n_tensors; b++) {
			const rm_exec_placement *q = &plan->tensors[b];
			if (q->first_op < 0 || q->region != p->region)
				continue;
			bool live_together = p->first_op <= q->last_op && q->first_op <= p->last_op;
			if (!live_together || p->bytes == 0 || q->bytes == 0)
				continue;
			bool disjoint = p->offset + p->bytes <= q->offset || q->offset + q->bytes <= p->offset;
			cr_assert(disjoint, "%s [%ld,+%ld) and %s [%ld,+%ld) overlap while both live",
				  prog->tensors[a].name, (long)p->offset, (long)p->bytes, prog->tensors[b].name,
				  (long)q->offset, (long)q->bytes);
		}
	}
}

/* Every operand of every op lies inside its region, and its extent within its bytes. */
static void assert_operands_in_bounds(const rm_exec_plan *plan)
{
	for (int32_t i = 0; i < plan->prog->n_ops; i++)
		for (int k = 0; k < plan->ops[i].n_operands; k++) {
			const rm_exec_operand *o = &plan->ops[i].operand[k];
			cr_assert_geq(o->offset, 0);
			cr_assert_leq(o->extent, o->bytes);
			cr_assert_leq(o->offset + o->extent, plan->region_bytes[o->region], "%s operand %d",
				      plan->prog->ops[i].name, k);
		}
}

/* plan->launch_order is a permutation of the ops in which every op comes after the previous op
 * of its stream and after the recorder of every event it waits on. Exhaustive. */
static void assert_launch_order_valid(const rm_exec_plan *plan)
{
	const rm_program *prog = plan->prog;
	int32_t n = prog->n_ops;
	int32_t *pos = calloc((size_t)n + 1, sizeof(int32_t)), *recorder = calloc((size_t)prog->n_events + 1, sizeof(int32_t));
	int32_t *last = calloc((size_t)prog->n_streams + 1, sizeof(int32_t));
	for (int32_t i = 0; i < n; i++)
		pos[i] = -1;
	for (int32_t k = 0; k < n; k++) {
		int32_t i = plan->launch_order[k];
		cr_assert(i >= 0 && i < n && pos[i] < 0, "launch_order[%d] = %d: not a permutation", k, i);
		pos[i] = k;
	}
	for (int32_t i = 0; i < n; i++) {
		const int32_t *r = rm_program_refs(prog, prog->ops[i].records);
		for (uint32_t k = 0; k < prog->ops[i].records.count; k++)
			recorder[r[k]] = i;
	}
	for (int32_t s = 0; s < prog->n_streams; s++)
		last[s] = -1;
	for (int32_t i = 0; i < n; i++) {
		const rm_program_op *op = &prog->ops[i];
		if (last[op->stream] >= 0)
			cr_assert_lt(pos[last[op->stream]], pos[i], "%s launches before the op before it on its stream",
				     op->name);
		last[op->stream] = i;
		const int32_t *w = rm_program_refs(prog, op->waits);
		for (uint32_t k = 0; k < op->waits.count; k++)
			cr_assert_lt(pos[recorder[w[k]]], pos[i], "%s waits on event %d before its record launches",
				     op->name, w[k]);
	}
	free(pos);
	free(recorder);
	free(last);
}

/* ---- a small program checked by hand ------------------------------------------------------ */

static rm_program *small_program(void)
{
	rm_program *p = rm_program_create("small");
	int32_t s = rm_program_add_stream(p, "compute", RM_STREAM_COMPUTE, 0);
	int32_t c = rm_program_add_stream(p, "copy", RM_STREAM_COPY, 0);
	int32_t w = rm_program_add_tensor(p, "w", 4096, RM_ROLE_PARAM_SHARD, RM_LOC_DEVICE, true);
	int32_t a = rm_program_add_tensor(p, "a", 1000, RM_ROLE_ACTIVATION, RM_LOC_DEVICE, false);
	int32_t b = rm_program_add_tensor(p, "b", 2000, RM_ROLE_ACTIVATION, RM_LOC_DEVICE, false);
	int32_t cc = rm_program_add_tensor(p, "c", 500, RM_ROLE_ACTIVATION, RM_LOC_DEVICE, false);
	int32_t h = rm_program_add_tensor(p, "c.host", 500, RM_ROLE_RESIDUAL, RM_LOC_HOST, false);
	int32_t ev = rm_program_add_event(p, "c.ready");
	/* op0 writes a; op1 reads a, writes b; op2 reads b, writes c; op3 copies c to the host */
	rm_program_op_desc d = rm_program_op_desc_init("op0", RM_COST_ELEMENTWISE, s);
	d.cost.elementwise = (rm_elementwise_cost){.bytes_read = 4096, .bytes_written = 1000};
	d.inputs = &w, d.n_inputs = 1, d.outputs = &a, d.n_outputs = 1;
	rm_program_add_op(p, &d);
	d = rm_program_op_desc_init("op1", RM_COST_ELEMENTWISE, s);
	d.cost.elementwise = (rm_elementwise_cost){.bytes_read = 1000, .bytes_written = 2000};
	d.inputs = &a, d.n_inputs = 1, d.outputs = &b, d.n_outputs = 1;
	rm_program_add_op(p, &d);
	d = rm_program_op_desc_init("op2", RM_COST_ELEMENTWISE, s);
	d.cost.elementwise = (rm_elementwise_cost){.bytes_read = 2000, .bytes_written = 500};
	d.inputs = &b, d.n_inputs = 1, d.outputs = &cc, d.n_outputs = 1, d.records = &ev, d.n_records = 1;
	rm_program_add_op(p, &d);
	d = rm_program_op_desc_init("op3", RM_COST_COPY, c);
	d.cost.copy = (rm_copy_cost){.dir = RM_COPY_D2H, .bytes = 500};
	d.inputs = &cc, d.n_inputs = 1, d.outputs = &h, d.n_outputs = 1, d.waits = &ev, d.n_waits = 1;
	rm_program_add_op(p, &d);
	return p;
}

Test(exec, small_plan_by_hand)
{
	rm_error err;
	rm_program *prog = small_program();
	rm_exec_plan *plan = rm_exec_plan_create(prog, NULL, RM_EXEC_ATTN_FUSED, &err);
	cr_assert_not_null(plan, "%s", err.msg);
	/* greedy by size: b (2048 aligned) at 0; a (1024) lives with b at op1: after it, 2048;
	 * c (512) lives with b at op2 but never with a: a's place, 2048 */
	cr_assert_eq(plan->tensors[2].offset, 0);    /* b */
	cr_assert_eq(plan->tensors[1].offset, 2048); /* a */
	cr_assert_eq(plan->tensors[3].offset, 2048); /* c */
	cr_assert_eq(plan->region_bytes[RM_EXEC_POOL], 3072);
	cr_assert_eq(plan->pool_live_peak_bytes, 3072); /* a + b at op1 */
	cr_assert_eq(plan->tensors[1].first_op, 0);
	cr_assert_eq(plan->tensors[1].last_op, 1);
	cr_assert_eq(plan->tensors[3].last_op, 3);
	cr_assert_eq(plan->region_bytes[RM_EXEC_PERSISTENT], 4096);
	cr_assert_eq(plan->tensors[4].region, RM_EXEC_HOST);
	cr_assert_eq(plan->region_bytes[RM_EXEC_HOST], 512);
	/* every operand is a program tensor: no scratch, no GEMM, no workspace */
	cr_assert_eq(plan->region_bytes[RM_EXEC_SCRATCH], 0);
	cr_assert_eq(plan->workspace_bytes, 0);
	cr_assert_eq(plan->device_bytes, 3072 + 4096);
	cr_assert_eq(plan->ops[3].operand[0].tensor, 3);
	cr_assert_eq(plan->ops[3].operand[1].region, RM_EXEC_HOST);
	cr_assert_eq(plan->stream_ops[0], 3);
	cr_assert_eq(plan->stream_ops[1], 1);
	cr_assert_eq(plan->kind_ops[RM_COST_ELEMENTWISE], 3);
	cr_assert_eq(plan->kind_bytes[RM_COST_COPY], 500);
	cr_assert_eq(plan->early_waits, 0);
	cr_assert_eq(plan->reordered_ops, 0);
	for (int32_t k = 0; k < prog->n_ops; k++)
		cr_assert_eq(plan->launch_order[k], k); /* no early wait: program order */
	assert_launch_order_valid(plan);
	assert_no_overlap(plan);
	assert_operands_in_bounds(plan);
	rm_exec_limits lim = {.hw = hw("h100-sxm")};
	cr_assert_eq(rm_exec_plan_check(plan, &lim, &err), RM_OK, "%s", err.msg);
	/* a GPU with less free memory than the plan */
	lim.device_free_bytes = 4096;
	cr_assert_eq(rm_exec_plan_check(plan, &lim, &err), RM_RANGE);
	cr_assert(strstr(err.msg, "free"), "%s", err.msg);
	rm_exec_plan_destroy(plan);
	rm_program_destroy(prog);
}

/* ---- shipped scenarios -------------------------------------------------------------------- */

/*
 * A wait before its record in program order: ops (stream) 0 (copy) waits on ev, which 2
 * (compute) records; 1 (compute) before it; 3 (copy) after 0; 4 (compute) after 2. Program order
 * would enqueue 0's cudaStreamWaitEvent before 2's cudaEventRecord (CUDA would wait on the
 * previous iteration's record; a capture refuses it). By hand, the smallest ready op first:
 * ready {1} -> 1; then 2 (after 1) -> 2; then {0 (ev recorded), 4} -> 0; {3, 4} -> 3, 4. Order
 * 1 2 0 3 4: one early wait, three ops off their index. Lifetimes are launch positions: x (0 ->
 * 3) lives at positions 2..3, y (1 -> 4) at 0..4.
 */
Test(exec, waits_before_their_record_launch_after_it)
{
	rm_program *p = rm_program_create("early");
	int32_t s = rm_program_add_stream(p, "compute", RM_STREAM_COMPUTE, 0);
	int32_t c = rm_program_add_stream(p, "copy", RM_STREAM_COPY, 0);
	int32_t x = rm_program_add_tensor(p, "x", 1024, RM_ROLE_ACTIVATION, RM_LOC_DEVICE, false);
	int32_t y = rm_program_add_tensor(p, "y", 2048, RM_ROLE_ACTIVATION, RM_LOC_DEVICE, false);
	int32_t ev = rm_program_add_event(p, "ev");
	rm_program_op_desc d = rm_program_op_desc_init("op0", RM_COST_ELEMENTWISE, c);
	d.cost.elementwise = (rm_elementwise_cost){.bytes_read = 0, .bytes_written = 1024};
	d.outputs = &x, d.n_outputs = 1, d.waits = &ev, d.n_waits = 1;
	rm_program_add_op(p, &d);
	d = rm_program_op_desc_init("op1", RM_COST_ELEMENTWISE, s);
	d.cost.elementwise = (rm_elementwise_cost){.bytes_read = 0, .bytes_written = 2048};
	d.outputs = &y, d.n_outputs = 1;
	rm_program_add_op(p, &d);
	d = rm_program_op_desc_init("op2", RM_COST_ELEMENTWISE, s);
	d.cost.elementwise = (rm_elementwise_cost){.bytes_read = 256, .bytes_written = 256};
	d.records = &ev, d.n_records = 1;
	rm_program_add_op(p, &d);
	d = rm_program_op_desc_init("op3", RM_COST_ELEMENTWISE, c);
	d.cost.elementwise = (rm_elementwise_cost){.bytes_read = 1024, .bytes_written = 0};
	d.inputs = &x, d.n_inputs = 1;
	rm_program_add_op(p, &d);
	d = rm_program_op_desc_init("op4", RM_COST_ELEMENTWISE, s);
	d.cost.elementwise = (rm_elementwise_cost){.bytes_read = 2048, .bytes_written = 0};
	d.inputs = &y, d.n_inputs = 1;
	rm_program_add_op(p, &d);
	rm_error err;
	rm_exec_plan *plan = rm_exec_plan_create(p, NULL, RM_EXEC_ATTN_FUSED, &err);
	cr_assert_not_null(plan, "%s", err.msg);
	const int32_t want[5] = {1, 2, 0, 3, 4};
	for (int k = 0; k < 5; k++)
		cr_assert_eq(plan->launch_order[k], want[k], "launch_order[%d] = %d, want %d", k, plan->launch_order[k],
			     want[k]);
	cr_assert_eq(plan->early_waits, 1);
	cr_assert_eq(plan->reordered_ops, 3);
	cr_assert_eq(plan->tensors[x].first_op, 2);
	cr_assert_eq(plan->tensors[x].last_op, 3);
	cr_assert_eq(plan->tensors[y].first_op, 0);
	cr_assert_eq(plan->tensors[y].last_op, 4);
	assert_launch_order_valid(plan);
	assert_no_overlap(plan);
	/* the same order from the function itself, and the counts without the out-parameter */
	int32_t order[5], moved = -1;
	cr_assert_eq(rm_exec_launch_order(p, order, &moved), 1);
	cr_assert_eq(moved, 3);
	cr_assert_eq(memcmp(order, want, sizeof(want)), 0);
	cr_assert_eq(rm_exec_launch_order(p, order, NULL), 1);
	/* the dry-run text says it */
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	rm_exec_plan_print(plan, f);
	fclose(f);
	cr_assert(strstr(text, "launch order   1 waits come before their event's record in program order: 3 ops"),
		  "%s", text);
	free(text);
	json_t *j = rm_exec_plan_json(plan, false);
	cr_assert_eq(json_integer_value(json_object_get(j, "reordered_ops")), 3);
	json_decref(j);
	rm_exec_plan_destroy(plan);
	rm_program_destroy(p);
}

Test(exec, dry_run_plans_of_every_shipped_scenario)
{
	char dir[1024];
	snprintf(dir, sizeof(dir), "%s/scenarios", env("REMORA_DATA_DIR"));
	DIR *d = opendir(dir);
	cr_assert_not_null(d, "%s", dir);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		if (len < 6 || strcmp(e->d_name + len - 5, ".yaml") != 0)
			continue;
		char path[2048];
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		rm_scenario sc;
		rm_scenario_resolved res;
		rm_schedule_report rep;
		rm_error err;
		rm_scenario_init(&sc);
		cr_assert_eq(rm_scenario_load(path, &sc, &err), RM_OK, "%s: %s", path, err.msg);
		cr_assert_eq(rm_scenario_resolve(&sc, NULL, &res, &err), RM_OK, "%s: %s", path, err.msg);
		if (res.train.pp > 1) {
			/* a pipelined step is simulated stage by stage; no one program */
			cr_assert_null(rm_schedule_build(&res.sched, &rep, &err), "%s", path);
			cr_assert(strstr(err.msg, "stage by stage"), "%s", err.msg);
			rm_scenario_resolved_finish(&res);
			n++;
			continue;
		}
		rm_program *prog = rm_schedule_build(&res.sched, &rep, &err);
		cr_assert_not_null(prog, "%s: %s", path, err.msg);
		rm_exec_plan *plan = rm_exec_plan_create(prog, path, RM_EXEC_ATTN_FUSED, &err);
		cr_assert_not_null(plan, "%s: %s", path, err.msg);
		/* the plan's counts add up */
		int32_t ops = 0, kinds = 0;
		for (int32_t s = 0; s < prog->n_streams; s++)
			ops += plan->stream_ops[s];
		for (int k = 0; k < RM_COST_KIND_COUNT; k++)
			kinds += plan->kind_ops[k];
		cr_assert_eq(ops, prog->n_ops);
		cr_assert_eq(kinds, prog->n_ops);
		/* the pool holds the launch-order live peak, and no two live tensors share a byte */
		cr_assert_geq(plan->region_bytes[RM_EXEC_POOL], plan->pool_live_peak_bytes);
		assert_no_overlap(plan);
		assert_operands_in_bounds(plan);
		assert_launch_order_valid(plan);
		/* against the engine: the same persistent tensors; the pool holds every tensor live at
		 * some point of the launch order, and the engine's peak (in simulated time) is such a
		 * set for these schedules, whose compute stream serialises the tensors' producers and
		 * consumers. (Not a theorem: ops of other streams launched before a producer and
		 * running late could make the engine hold more; the 10% bound says how close.) */
		rm_sim_options opt = {.hw_queues = res.hw_queues};
		rm_sim *sim = rm_sim_create(prog, &res.hw, &opt, &err);
		cr_assert_not_null(sim, "%s", err.msg);
		cr_assert_eq(rm_sim_run(sim, &err), RM_OK, "%s", err.msg);
		int64_t engine_peak = rm_sim_get_metrics(sim)->peak_memory_bytes;
		int64_t planned = plan->region_bytes[RM_EXEC_POOL] + plan->region_bytes[RM_EXEC_PERSISTENT];
		cr_assert_geq(planned, engine_peak, "%s: planned %ld, engine peak %ld", path, (long)planned,
			      (long)engine_peak);
		cr_assert_leq(planned, engine_peak + engine_peak / 10, "%s: planned %ld, engine peak %ld", path,
			      (long)planned, (long)engine_peak);
		rm_sim_destroy(sim);
		/* the scenario's own hardware, the launch its collectives ask for */
		rm_exec_limits lim = {.hw = &res.hw};
		if ((res.train.dp_replicate > 1 && res.train.fsdp > 1) || res.train.tp > 1) {
			/* groups of several sizes: refused until sub-communicators exist (DDP's one
			 * group of every GPU is the world) */
			cr_assert_eq(rm_exec_plan_check(plan, &lim, &err), RM_UNSUPPORTED, "%s", path);
			cr_assert(strstr(err.msg, "sub-communicators"), "%s", err.msg);
			rm_exec_plan_destroy(plan);
			rm_program_destroy(prog);
			rm_schedule_report_finish(&rep);
			rm_scenario_resolved_finish(&res);
			n++;
			continue;
		}
		cr_assert_eq(rm_exec_plan_check(plan, &lim, &err), RM_OK, "%s: %s", path, err.msg);
		/* the same program on one GPU: its FSDP collectives cannot run */
		if (plan->max_group > 1) {
			lim.world = 1;
			cr_assert_eq(rm_exec_plan_check(plan, &lim, &err), RM_INVALID);
			cr_assert(strstr(err.msg, "mpirun -np"), "%s", err.msg);
		}
		json_t *j = rm_exec_plan_json(plan, false);
		cr_assert_eq(json_integer_value(json_object_get(j, "ops")), prog->n_ops);
		json_decref(j);
		rm_exec_plan_destroy(plan);
		rm_program_destroy(prog);
		rm_schedule_report_finish(&rep);
		rm_scenario_resolved_finish(&res);
		n++;
	}
	closedir(d);
	cr_assert_gt(n, 0, "no scenario in %s", dir);
}

Test(exec, offloaded_residuals_live_in_pinned_host_memory)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/scenarios/seed-llama2-7b-fsdp8-h100.yaml", env("REMORA_DATA_DIR"));
	rm_scenario sc;
	rm_scenario_resolved res;
	rm_schedule_report rep;
	rm_error err;
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_load(path, &sc, &err), RM_OK, "%s", err.msg);
	const char *sets[] = {"remat.policy=save_and_offload_only_these_names", "remat.names=[]",
			      "remat.offload_names=[dot_mlp_out, dot_attention_value]"};
	for (size_t i = 0; i < RM_ARRAY_SIZE(sets); i++)
		cr_assert_eq(rm_scenario_set(&sc, sets[i], &err), RM_OK, "%s", err.msg);
	cr_assert_eq(rm_scenario_resolve(&sc, NULL, &res, &err), RM_OK, "%s", err.msg);
	rm_program *prog = rm_schedule_build(&res.sched, &rep, &err);
	cr_assert_not_null(prog, "%s", err.msg);
	rm_exec_plan *plan = rm_exec_plan_create(prog, path, RM_EXEC_ATTN_FUSED, &err);
	cr_assert_not_null(plan, "%s", err.msg);
	cr_assert_gt(plan->kind_ops[RM_COST_COPY], 0);
	cr_assert_gt(plan->region_bytes[RM_EXEC_HOST], 0);
	/* every copy has a host side in pinned host memory and a device side on the device */
	for (int32_t i = 0; i < prog->n_ops; i++) {
		if (prog->ops[i].cost.kind != RM_COST_COPY)
			continue;
		const rm_exec_op_plan *op = &plan->ops[i];
		rm_copy_dir dir = prog->ops[i].cost.copy.dir;
		cr_assert_eq(op->operand[0].region == RM_EXEC_HOST, dir == RM_COPY_H2D, "%s", prog->ops[i].name);
		cr_assert_eq(op->operand[1].region == RM_EXEC_HOST, dir == RM_COPY_D2H, "%s", prog->ops[i].name);
		for (int k = 0; k < 2; k++)
			cr_assert_leq(op->operand[k].offset + op->operand[k].bytes, plan->region_bytes[op->operand[k].region]);
	}
	assert_no_overlap(plan);
	assert_operands_in_bounds(plan);
	rm_exec_plan_destroy(plan);
	rm_program_destroy(prog);
	rm_schedule_report_finish(&rep);
	rm_scenario_resolved_finish(&res);
}

/* ---- failures before launch --------------------------------------------------------------- */

Test(exec, too_much_memory_fails_with_sizes)
{
	rm_error err;
	rm_program *prog = rm_program_load(test_file("exec/too_much_memory.json"), &err);
	cr_assert_not_null(prog, "%s", err.msg);
	rm_exec_plan *plan = rm_exec_plan_create(prog, NULL, RM_EXEC_ATTN_FUSED, &err);
	cr_assert_not_null(plan);
	rm_exec_limits lim = {.hw = hw("h200-sxm")};
	cr_assert_eq(rm_exec_plan_check(plan, &lim, &err), RM_RANGE);
	cr_assert(strstr(err.msg, "needs 200.") && strstr(err.msg, "h200-sxm has"), "%s", err.msg);
	rm_exec_plan_destroy(plan);
	rm_program_destroy(prog);
}

Test(exec, unknown_dtype_fails_when_read)
{
	rm_error err;
	rm_program *prog = rm_program_load(test_file("exec/unknown_dtype.json"), &err);
	cr_assert_null(prog);
	cr_assert_eq(err.status, RM_INVALID);
	cr_assert(strstr(err.msg, "ops[0].gemm.dtype: unknown value 'int4'"), "%s", err.msg);
}

Test(exec, unknown_dtype_in_memory_fails_before_planning)
{
	rm_error err;
	rm_program *prog = rm_program_create("bad-dtype");
	int32_t s = rm_program_add_stream(prog, "compute", RM_STREAM_COMPUTE, 0);
	rm_program_op_desc d = rm_program_op_desc_init("mm", RM_COST_GEMM, s);
	d.cost.gemm = (rm_gemm_shape){.batch = 1, .m = 64, .n = 64, .k = 64, .dtype = (rm_dtype)RM_DTYPE_COUNT};
	rm_program_add_op(prog, &d);
	cr_assert_null(rm_exec_plan_create(prog, NULL, RM_EXEC_ATTN_FUSED, &err));
	cr_assert_eq(err.status, RM_INVALID);
	/* rm_program_validate's message, run by the planner */
	cr_assert(strstr(err.msg, "ops[0].gemm.dtype: unknown dtype"), "%s", err.msg);
	rm_program_destroy(prog);
}

Test(exec, integer_and_fp8_gemms_are_checked)
{
	rm_error err;
	rm_program *prog = rm_program_load(test_file("exec/int_gemm.json"), &err);
	cr_assert_not_null(prog, "%s", err.msg);
	rm_exec_plan *plan = rm_exec_plan_create(prog, NULL, RM_EXEC_ATTN_FUSED, &err);
	rm_exec_limits lim = {.hw = hw("h100-sxm")};
	cr_assert_eq(rm_exec_plan_check(plan, &lim, &err), RM_UNSUPPORTED);
	cr_assert(strstr(err.msg, "uint8 GEMM"), "%s", err.msg);
	/* fp8: fine on H100, refused on A100 (no FP8 tensor cores) */
	prog->ops[0].cost.gemm.dtype = RM_DTYPE_FP8_E4M3;
	cr_assert_eq(rm_exec_plan_check(plan, &lim, &err), RM_OK, "%s", err.msg);
	lim.hw = hw("a100-sxm-80gb");
	cr_assert_eq(rm_exec_plan_check(plan, &lim, &err), RM_UNSUPPORTED);
	cr_assert(strstr(err.msg, "FP8 tensor cores"), "%s", err.msg);
	rm_exec_plan_destroy(plan);
	rm_program_destroy(prog);
}

/* ---- attention ---------------------------------------------------------------------------- */

Test(exec, unfused_attention_does_the_non_causal_flops)
{
	rm_attention_cost a = {.shape = {.batch = 2, .heads = 32, .kv_heads = 8, .seq = 4096, .head_dim = 128,
					 .causal = true, .fused = true, .dtype = RM_DTYPE_BF16}};
	rm_gemm_shape g[5];
	rm_elementwise_cost sm;
	int n = rm_exec_attention_lowering(&a, g, &sm);
	cr_assert_eq(n, 2);
	double flops = 0;
	for (int i = 0; i < n; i++)
		flops += rm_cost_gemm_flops(&g[i]);
	double full = 4.0 * 2 * 32 * 4096.0 * 4096.0 * 128;
	cr_assert_float_eq(flops, full, 1.0);
	cr_assert_eq(sm.bytes_read, 2LL * 32 * 4096 * 4096 * 2);
	a.backward = true;
	n = rm_exec_attention_lowering(&a, g, &sm);
	cr_assert_eq(n, 5);
	flops = 0;
	for (int i = 0; i < n; i++)
		flops += rm_cost_gemm_flops(&g[i]);
	cr_assert_float_eq(flops, 2.5 * full, 1.0);
	/* slower than the fused model (twice the causal FLOPs plus the scores' HBM traffic) */
	const rm_hw_profile *h = hw("h100-sxm");
	a.backward = false;
	cr_assert_gt(rm_exec_attention_unfused_s(&a, h), rm_cost_attention_s(&a, h, NULL));
}

/* Latent attention (DeepSeek-V3: q, k at 24, v at 16 here) is lowered with one head dim: refused
 * before launch with the two dims, fine once they agree. */
Test(exec, latent_attention_is_refused_before_launch)
{
	rm_error err;
	rm_program *p = rm_program_create("mla");
	int32_t st = rm_program_add_stream(p, "compute", RM_STREAM_COMPUTE, 0);
	int32_t qkv = rm_program_add_tensor(p, "qkv", 3 * 128 * 4 * 24 * 2, RM_ROLE_ACTIVATION, RM_LOC_DEVICE, true);
	int32_t o = rm_program_add_tensor(p, "o", 128 * 4 * 16 * 2, RM_ROLE_ACTIVATION, RM_LOC_DEVICE, false);
	rm_program_op_desc d = rm_program_op_desc_init("attention_context", RM_COST_ATTENTION, st);
	d.cost.attention.shape = (rm_attention_shape){.batch = 1, .heads = 4, .kv_heads = 4, .seq = 128, .head_dim = 24,
						      .v_head_dim = 16, .causal = true, .fused = true,
						      .dtype = RM_DTYPE_BF16};
	d.inputs = &qkv, d.n_inputs = 1, d.outputs = &o, d.n_outputs = 1;
	rm_program_add_op(p, &d);
	rm_exec_plan *plan = rm_exec_plan_create(p, NULL, RM_EXEC_ATTN_FUSED, &err);
	cr_assert_not_null(plan, "%s", err.msg);
	rm_exec_limits lim = {.hw = hw("h100-sxm")};
	cr_assert_eq(rm_exec_plan_check(plan, &lim, &err), RM_UNSUPPORTED);
	cr_assert(strstr(err.msg, "value head dim of 16 beside 24") && strstr(err.msg, "one head dim"), "%s", err.msg);
	p->ops[0].cost.attention.shape.v_head_dim = 0;
	cr_assert_eq(rm_exec_plan_check(plan, &lim, &err), RM_OK, "%s", err.msg);
	rm_exec_plan_destroy(plan);
	rm_program_destroy(p);
}

/* ---- fused attention (cuDNN SDPA) plan ------------------------------------------------------ */

/* Forward then backward attention, b 1, 4 heads over 2 kv heads, s 128, d 64, in dtype: Q 64 KiB,
 * K, V 32 KiB each, O 64 KiB, the log-sum-exp 4 x 128 fp32 = 2 KiB, dO 64 KiB and the combined
 * dQ/dK/dV 128 KiB, the program's tensors as the scheduler writes them (backward inputs Q, K, V,
 * O, lse, dO). Tensor ids: q 0, k 1, v 2, o 3, lse 4, do 5, dqkv 6. */
static rm_program *attention_program(rm_dtype dtype, int64_t head_dim)
{
	rm_program *p = rm_program_create("attn");
	int32_t st = rm_program_add_stream(p, "compute", RM_STREAM_COMPUTE, 0);
	int64_t es = rm_dtype_size(dtype), q = 4 * 128 * head_dim * es, kv = q / 2;
	int32_t t[7];
	t[0] = rm_program_add_tensor(p, "q", q, RM_ROLE_ACTIVATION, RM_LOC_DEVICE, true);
	t[1] = rm_program_add_tensor(p, "k", kv, RM_ROLE_ACTIVATION, RM_LOC_DEVICE, true);
	t[2] = rm_program_add_tensor(p, "v", kv, RM_ROLE_ACTIVATION, RM_LOC_DEVICE, true);
	t[3] = rm_program_add_tensor(p, "o", q, RM_ROLE_ACTIVATION, RM_LOC_DEVICE, false);
	t[4] = rm_program_add_tensor(p, "lse", 4 * 128 * 4, RM_ROLE_ACTIVATION, RM_LOC_DEVICE, false);
	t[5] = rm_program_add_tensor(p, "do", q, RM_ROLE_ACTIVATION, RM_LOC_DEVICE, true);
	t[6] = rm_program_add_tensor(p, "dqkv", q + 2 * kv, RM_ROLE_ACTIVATION, RM_LOC_DEVICE, false);
	rm_attention_shape sh = {.batch = 1, .heads = 4, .kv_heads = 2, .seq = 128, .head_dim = head_dim,
				 .causal = true, .fused = true, .dtype = dtype};
	rm_program_op_desc d = rm_program_op_desc_init("attention", RM_COST_ATTENTION, st);
	d.cost.attention.shape = sh;
	d.inputs = &t[0], d.n_inputs = 3, d.outputs = &t[3], d.n_outputs = 2;
	rm_program_add_op(p, &d);
	d = rm_program_op_desc_init("attention.bwd", RM_COST_ATTENTION, st);
	d.cost.attention.shape = sh;
	d.cost.attention.backward = true;
	d.phase = RM_PPHASE_BWD; /* what the program's JSON derives backward from */
	d.inputs = &t[0], d.n_inputs = 6, d.outputs = &t[6], d.n_outputs = 1;
	rm_program_add_op(p, &d);
	return p;
}

Test(exec, fused_attention_operands_by_hand)
{
	rm_error err;
	rm_program *prog = attention_program(RM_DTYPE_BF16, 64);
	rm_exec_plan *plan = rm_exec_plan_create(prog, NULL, RM_EXEC_ATTN_FUSED, &err);
	cr_assert_not_null(plan, "%s", err.msg);
	cr_assert_eq(plan->attention_fused, 2);
	cr_assert_eq(plan->attention_unfused, 0);
	/* forward: Q, K, V read, O and the stats written, all program tensors */
	const rm_exec_op_plan *f = &plan->ops[0];
	cr_assert(f->fused);
	cr_assert_eq(f->n_operands, 5);
	static const int64_t fwd_bytes[5] = {65536, 32768, 32768, 65536, 2048};
	for (int k = 0; k < 5; k++) {
		cr_assert_eq(f->operand[k].tensor, k, "operand %d", k);
		cr_assert_eq(f->operand[k].bytes, fwd_bytes[k], "operand %d", k);
		cr_assert_eq(f->operand[k].offset, plan->tensors[k].offset, "operand %d", k);
	}
	/* backward: Q, K, V, O, stats, dO read; dQ, dK, dV consecutive slices of dqkv; then the
	 * workspace: dQ in fp32 (4 x 128 x 64 x 4 = 128 KiB) and softmax_sum (4 x 128 x 4 = 2 KiB) */
	const rm_exec_op_plan *b = &plan->ops[1];
	cr_assert(b->fused);
	cr_assert_eq(b->n_operands, RM_ATTN_F_COUNT);
	for (int k = RM_ATTN_F_Q; k <= RM_ATTN_F_DO; k++)
		cr_assert_eq(b->operand[k].tensor, k, "operand %d", k);
	int64_t dqkv = plan->tensors[6].offset;
	cr_assert_eq(b->operand[RM_ATTN_F_DQ].tensor, 6);
	cr_assert_eq(b->operand[RM_ATTN_F_DQ].offset, dqkv);
	cr_assert_eq(b->operand[RM_ATTN_F_DK].offset, dqkv + 65536);
	cr_assert_eq(b->operand[RM_ATTN_F_DV].offset, dqkv + 65536 + 32768);
	cr_assert_eq(b->operand[RM_ATTN_F_DV].bytes, 32768);
	cr_assert_eq(b->operand[RM_ATTN_F_DQ_ACCUM].region, RM_EXEC_SCRATCH);
	cr_assert_eq(b->operand[RM_ATTN_F_DQ_ACCUM].bytes, 131072);
	cr_assert_eq(b->operand[RM_ATTN_F_SOFTMAX_SUM].region, RM_EXEC_SCRATCH);
	cr_assert_eq(b->operand[RM_ATTN_F_SOFTMAX_SUM].offset, 131072);
	cr_assert_eq(b->operand[RM_ATTN_F_SOFTMAX_SUM].bytes, 2048);
	/* no s x s scores: the scratch is the backward's workspace alone */
	cr_assert_eq(plan->region_bytes[RM_EXEC_SCRATCH], 131072 + 2048);
	/* causal FLOPs of the fused kernel (rm_cost_attention_flops), not the unfused GEMMs' */
	double flops = rm_cost_attention_flops(&prog->ops[0].cost.attention) +
		       rm_cost_attention_flops(&prog->ops[1].cost.attention);
	cr_assert_float_eq(plan->kind_flops[RM_COST_ATTENTION], flops, 1e-9 * flops);
	json_t *j = rm_exec_plan_json(plan, false);
	cr_assert_str_eq(json_string_value(json_object_get(j, "attention_kernel")), RM_EXEC_ATTN_FUSED_KERNEL);
	json_decref(j);
	assert_operands_in_bounds(plan);
	rm_exec_plan_destroy(plan);

	/* --attention unfused: the chunk's scores, s x s x 2 B x 4 slices = 128 KiB, twice in the
	 * backward (P, dS), beside K, V and dK, dV in scratch (64 KiB each: expanded to the 4 heads,
	 * larger than the program's 2-head K and V) */
	plan = rm_exec_plan_create(prog, NULL, RM_EXEC_ATTN_UNFUSED, &err);
	cr_assert_not_null(plan, "%s", err.msg);
	cr_assert_eq(plan->attention_fused, 0);
	cr_assert_eq(plan->attention_unfused, 2);
	cr_assert(!plan->ops[1].fused);
	cr_assert_eq(plan->region_bytes[RM_EXEC_SCRATCH], 4 * 65536 + 2 * 131072);
	rm_exec_plan_destroy(plan);
	rm_program_destroy(prog);
}

/* What cuDNN's flash SDPA does not take runs unfused even when fused is asked for. */
Test(exec, fused_attention_only_where_cudnn_runs_it)
{
	rm_error err;
	struct {
		rm_dtype dtype;
		int64_t d;
		bool fused;
	} cases[] = {{RM_DTYPE_BF16, 64, true}, {RM_DTYPE_FP16, 128, true}, {RM_DTYPE_BF16, 256, true},
		     {RM_DTYPE_FP32, 64, false}, /* no fp32 flash kernel */
		     {RM_DTYPE_BF16, 12, false}, /* rows of 24 B: not 16-byte aligned */
		     {RM_DTYPE_BF16, 264, false}}; /* past 256 */
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		rm_program *prog = attention_program(cases[c].dtype, cases[c].d);
		cr_assert_eq(rm_exec_attention_fusable(&prog->ops[0].cost.attention), cases[c].fused, "case %zu", c);
		rm_exec_plan *plan = rm_exec_plan_create(prog, NULL, RM_EXEC_ATTN_FUSED, &err);
		cr_assert_not_null(plan, "%s", err.msg);
		cr_assert_eq(plan->attention_fused, cases[c].fused ? 2 : 0, "case %zu", c);
		rm_exec_plan_destroy(plan);
		/* a shape the model prices unfused runs unfused */
		prog->ops[0].cost.attention.shape.fused = false;
		cr_assert(!rm_exec_attention_fusable(&prog->ops[0].cost.attention));
		rm_program_destroy(prog);
	}
}

/*
 * The seed scenario (issue 15's "Must show"): attention runs fused, and the plan's program
 * tensors (pool live peak + persistent) are exactly the engine's peak. What the device total
 * adds on top is named: the pool's fragmentation (greedy by size above its live peak), the
 * scratch (operands no program tensor covers: the fused backward's 64.5 MiB workspace) and
 * the cuBLASLt workspace, which the engine counts outside its peak (its memory budget's "not
 * usable").
 */
Test(exec, seed_scenario_runs_attention_fused_at_the_engine_peak)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/scenarios/seed-llama2-7b-fsdp8-h100.yaml", env("REMORA_DATA_DIR"));
	rm_scenario sc;
	rm_scenario_resolved res;
	rm_schedule_report rep;
	rm_error err;
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_load(path, &sc, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(rm_scenario_resolve(&sc, NULL, &res, &err), RM_OK, "%s", err.msg);
	rm_program *prog = rm_schedule_build(&res.sched, &rep, &err);
	cr_assert_not_null(prog, "%s", err.msg);
	rm_exec_plan *fused = rm_exec_plan_create(prog, path, RM_EXEC_ATTN_FUSED, &err);
	rm_exec_plan *unfused = rm_exec_plan_create(prog, path, RM_EXEC_ATTN_UNFUSED, &err);
	cr_assert(fused && unfused, "%s", err.msg);
	/* 32 layers: forward, recomputed forward, backward */
	cr_assert_eq(fused->attention_fused, 96);
	cr_assert_eq(fused->attention_unfused, 0);
	cr_assert_eq(unfused->attention_unfused, 96);
	rm_sim_options opt = {.hw_queues = res.hw_queues};
	rm_sim *sim = rm_sim_create(prog, &res.hw, &opt, &err);
	cr_assert_not_null(sim, "%s", err.msg);
	cr_assert_eq(rm_sim_run(sim, &err), RM_OK, "%s", err.msg);
	int64_t engine_peak = rm_sim_get_metrics(sim)->peak_memory_bytes;
	rm_sim_destroy(sim);
	const int64_t *r = fused->region_bytes;
	cr_assert_eq(fused->pool_live_peak_bytes + r[RM_EXEC_PERSISTENT], engine_peak);
	cr_assert_eq(fused->device_bytes, engine_peak + (r[RM_EXEC_POOL] - fused->pool_live_peak_bytes) +
						  r[RM_EXEC_SCRATCH] + fused->workspace_bytes);
	cr_assert_eq(fused->workspace_bytes, RM_EXEC_WORKSPACE_BYTES); /* one compute stream */
	/* llama-2-7b at s 4096, micro-batch 1: the backward's workspace, 32 heads x 4096 x
	 * (128 + 1) x 4 B = 64.5 MiB (dQ in fp32 and the softmax sums), is all the scratch: every
	 * other operand is a program tensor (a weight gradient's dW accumulates in place into the
	 * gradient buffer it reads) */
	int64_t ws = 32LL * 4096 * (128 + 1) * 4;
	cr_assert_eq(r[RM_EXEC_SCRATCH], ws);
	int found = 0;
	for (int32_t i = 0; i < prog->n_ops; i++) {
		if (strcmp(prog->ops[i].name, "layer05/bwd/dot_mlp_gate.wgrad") != 0)
			continue;
		const rm_exec_operand *d = &fused->ops[i].operand[2];
		cr_assert_geq(d->tensor, 0);
		cr_assert_str_eq(prog->tensors[d->tensor].name, "layer05/grads0");
		cr_assert_eq(d->bytes, 4096LL * 11008 * 2);
		found++;
	}
	cr_assert_eq(found, 1);
	/* unfused: 1 GiB chunks of scores, twice in the backward, beside dK, dV */
	cr_assert_geq(unfused->region_bytes[RM_EXEC_SCRATCH], 2 * RM_EXEC_SCORES_BYTES);
	cr_assert_eq(unfused->pool_live_peak_bytes, fused->pool_live_peak_bytes);
	rm_exec_plan_destroy(fused);
	rm_exec_plan_destroy(unfused);
	rm_program_destroy(prog);
	rm_schedule_report_finish(&rep);
	rm_scenario_resolved_finish(&res);
}

/* ---- measurement: trace, comparison, calibration rows ------------------------------------- */

/* A measurement that is the engine's own timeline, with every op 10% slower. */
static void fake_measurement(const rm_program *prog, const rm_hw_profile *h, rm_exec_measurement *m)
{
	rm_error err;
	rm_sim_options opt = {0};
	rm_sim *sim = rm_sim_create(prog, h, &opt, &err);
	cr_assert_not_null(sim, "%s", err.msg);
	cr_assert_eq(rm_sim_run(sim, &err), RM_OK);
	rm_exec_measurement_init(m, prog->n_ops);
	for (int32_t i = 0; i < prog->n_ops; i++) {
		m->op_start_s[i] = rm_time_to_s(rm_sim_op_start(sim, i)) * 1.1;
		m->op_end_s[i] = rm_time_to_s(rm_sim_op_end(sim, i)) * 1.1;
		m->op_mean_s[i] = m->op_end_s[i] - m->op_start_s[i];
	}
	m->step_s = rm_time_to_s(rm_sim_get_metrics(sim)->step_time) * 1.1;
	m->iterations = 3;
	m->device_bytes = 1 << 30;
	snprintf(m->device, sizeof(m->device), "fake H100");
	snprintf(m->attention_kernel, sizeof(m->attention_kernel), "none");
	rm_sim_destroy(sim);
}

/* The predicted attention of a comparison: the fused kernel's figure where cuDNN's SDPA ran,
 * rm_exec_attention_unfused_s where the unfused lowering ran. */
static double compare_attention(const rm_program *prog, const char *kernel, int *fused, int *unfused)
{
	rm_error err;
	rm_exec_plan *plan = rm_exec_plan_create(prog, NULL, RM_EXEC_ATTN_FUSED, &err);
	cr_assert_not_null(plan, "%s", err.msg);
	rm_exec_measurement m;
	rm_exec_measurement_init(&m, prog->n_ops);
	for (int32_t i = 0; i < prog->n_ops; i++)
		m.op_start_s[i] = i * 1e-3, m.op_end_s[i] = (i + 1) * 1e-3, m.op_mean_s[i] = 1e-3;
	m.step_s = prog->n_ops * 1e-3;
	m.iterations = 1;
	m.world = 1;
	snprintf(m.attention_kernel, sizeof(m.attention_kernel), "%s", kernel);
	json_t *cmp = rm_exec_compare(prog, plan, hw("h100-sxm"), 8, &m, &err);
	cr_assert_not_null(cmp, "%s", err.msg);
	json_t *ap = json_object_get(cmp, "attention_priced");
	*fused = (int)json_integer_value(json_object_get(ap, "fused"));
	*unfused = (int)json_integer_value(json_object_get(ap, "unfused"));
	double p = json_real_value(json_object_get(json_object_get(json_object_get(cmp, "kinds"), "attention"),
						   "predicted_s"));
	json_decref(cmp);
	rm_exec_measurement_finish(&m);
	rm_exec_plan_destroy(plan);
	return p;
}

Test(exec, compare_prices_attention_as_it_ran)
{
	rm_program *prog = attention_program(RM_DTYPE_BF16, 128);
	const rm_hw_profile *h = hw("h100-sxm");
	double unfused_s = rm_exec_attention_unfused_s(&prog->ops[0].cost.attention, h) +
			   rm_exec_attention_unfused_s(&prog->ops[1].cost.attention, h);
	int nf = 0, nu = 0;
	double fused = compare_attention(prog, RM_EXEC_ATTN_FUSED_KERNEL, &nf, &nu);
	cr_assert_eq(nf, 2);
	cr_assert_eq(nu, 0);
	double unfused = compare_attention(prog, RM_EXEC_ATTN_UNFUSED_KERNEL, &nf, &nu);
	cr_assert_eq(nf, 0);
	cr_assert_eq(nu, 2);
	cr_assert_float_eq(unfused, unfused_s, 1e-9, "%g vs %g", unfused, unfused_s);
	/* the fused kernel skips the causal half and the scores' HBM traffic */
	cr_assert_lt(fused, unfused);
	rm_program_destroy(prog);
	/* fp32 attention has no cuDNN flash kernel: unfused even in a fused run */
	prog = attention_program(RM_DTYPE_FP32, 128);
	compare_attention(prog, RM_EXEC_ATTN_FUSED_KERNEL, &nf, &nu);
	cr_assert_eq(nf, 0);
	cr_assert_eq(nu, 2);
	rm_program_destroy(prog);
}

Test(exec, compare_trace_and_calibration_rows)
{
	rm_error err;
	rm_program *prog = rm_program_load(test_file("programs/example.json"), &err);
	cr_assert_not_null(prog, "%s", err.msg);
	rm_exec_plan *plan = rm_exec_plan_create(prog, NULL, RM_EXEC_ATTN_FUSED, &err);
	const rm_hw_profile *h = hw("h100-sxm");
	rm_exec_measurement m;
	fake_measurement(prog, h, &m);

	json_t *cmp = rm_exec_compare(prog, plan, h, 8, &m, &err);
	cr_assert_not_null(cmp, "%s", err.msg);
	double step_err = json_real_value(json_object_get(json_object_get(cmp, "step"), "error"));
	cr_assert_float_eq(step_err, 1 / 1.1 - 1, 1e-6, "step error %f", step_err);
	json_t *gemm = json_object_get(json_object_get(cmp, "kinds"), "gemm");
	cr_assert_not_null(gemm);
	cr_assert_gt(json_integer_value(json_object_get(gemm, "ops")), 0);
	cr_assert_eq(json_array_size(json_object_get(cmp, "worst_ops")), 5);
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	rm_exec_compare_print(cmp, f);
	fclose(f);
	cr_assert(strstr(text, "step") && strstr(text, "peak memory"), "%s", text);
	free(text);
	json_decref(cmp);

	/* the trace is JSON with one X slice per op */
	f = open_memstream(&text, &len);
	cr_assert(rm_exec_write_trace(prog, &m, f, &err));
	fclose(f);
	json_error_t jerr;
	json_t *trace = json_loadb(text, len, 0, &jerr);
	cr_assert_not_null(trace, "%s", jerr.text);
	size_t i, slices = 0;
	json_t *ev;
	json_array_foreach(json_object_get(trace, "traceEvents"), i, ev) {
		if (strcmp(json_string_value(json_object_get(ev, "ph")), "X") == 0)
			slices++;
	}
	cr_assert_eq(slices, (size_t)prog->n_ops);
	json_decref(trace);
	free(text);

	/* calibration rows: only ops that ran alone; they import */
	char db_path[] = "/tmp/remora-test-exec-XXXXXX";
	int fd = mkstemp(db_path);
	cr_assert_geq(fd, 0);
	close(fd);
	unlink(db_path);
	char rows_path[512];
	snprintf(rows_path, sizeof(rows_path), "%s.jsonl", db_path);
	f = fopen(rows_path, "w");
	int rows = rm_exec_write_calib_rows(prog, &m, "test", f, &err);
	fclose(f);
	cr_assert_gt(rows, 0);
	cr_assert_lt(rows, prog->n_ops);
	rm_calib_db *db = rm_calib_db_open(db_path, true, &err);
	cr_assert_not_null(db, "%s", err.msg);
	rm_calib_import_stats st;
	cr_assert_eq(rm_calib_import_jsonl(db, rows_path, &st, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(st.measurements, rows);
	rm_calib_db_close(db);
	unlink(rows_path);
	unlink(db_path);

	rm_exec_measurement_finish(&m);
	rm_exec_plan_destroy(plan);
	rm_program_destroy(prog);
}

/*
 * Graph mode's figures beside the eager ones: the step of the replays against the same predicted
 * step (eager 1.1x the engine, graph 1.25x: errors 1/1.1 - 1 and 1/1.25 - 1 = -20%), per-kind
 * sums of the graph's per-op means (here twice the eager ones, so exactly twice their sums), the
 * table's extra rows, and the JSON round trip, with and without the graph's members.
 */
Test(exec, graph_mode_compare_and_round_trip)
{
	rm_error err;
	rm_program *prog = rm_program_load(test_file("programs/example.json"), &err);
	cr_assert_not_null(prog, "%s", err.msg);
	rm_exec_plan *plan = rm_exec_plan_create(prog, NULL, RM_EXEC_ATTN_FUSED, &err);
	const rm_hw_profile *h = hw("h100-sxm");
	rm_exec_measurement m;
	fake_measurement(prog, h, &m);
	double predicted = m.step_s / 1.1;
	m.graph_step_s = predicted * 1.25;
	m.graph_step_op_events_s = predicted * 1.3;
	m.graph_launch_host_s = 12e-6;
	m.graph_op_mean_s = calloc((size_t)prog->n_ops, sizeof(double));
	for (int32_t i = 0; i < prog->n_ops; i++)
		m.graph_op_mean_s[i] = 2 * m.op_mean_s[i];

	json_t *cmp = rm_exec_compare(prog, plan, h, 8, &m, &err);
	cr_assert_not_null(cmp, "%s", err.msg);
	json_t *sg = json_object_get(cmp, "step_graph");
	cr_assert_not_null(sg);
	cr_assert_float_eq(json_real_value(json_object_get(sg, "error")), 1 / 1.25 - 1, 1e-6);
	cr_assert_float_eq(json_real_value(json_object_get(json_object_get(cmp, "step"), "error")), 1 / 1.1 - 1, 1e-6);
	cr_assert_float_eq(json_real_value(json_object_get(sg, "launch_host_s")), 12e-6, 1e-15);
	const char *key;
	json_t *row;
	int kinds = 0;
	json_object_foreach(json_object_get(cmp, "kinds"), key, row) {
		double me = json_real_value(json_object_get(row, "measured_s"));
		double mg = json_real_value(json_object_get(row, "measured_graph_s"));
		double p = json_real_value(json_object_get(row, "predicted_s"));
		cr_assert_eq(mg, 2 * me, "%s: %g vs 2 x %g", key, mg, me);
		if (mg > 0)
			cr_assert_float_eq(json_real_value(json_object_get(row, "error_graph")), (p - mg) / mg, 1e-9, "%s", key);
		kinds++;
	}
	cr_assert_gt(kinds, 1);
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	rm_exec_compare_print(cmp, f);
	fclose(f);
	cr_assert(strstr(text, "step (graph)") && strstr(text, "gemm (graph)") && strstr(text, "-20.0 %"), "%s", text);
	free(text);
	json_decref(cmp);

	/* JSON: written, read back the same */
	char path[] = "/tmp/remora-test-exec-graph-XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	f = fdopen(fd, "w");
	json_t *doc = rm_exec_measurement_json(prog, &m);
	json_dumpf(doc, f, JSON_REAL_PRECISION(17));
	fclose(f);
	json_decref(doc);
	rm_exec_measurement back;
	cr_assert_eq(rm_exec_measurement_load(path, prog, &back, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(back.graph_step_s, m.graph_step_s);
	cr_assert_eq(back.graph_step_op_events_s, m.graph_step_op_events_s);
	cr_assert_eq(back.graph_launch_host_s, m.graph_launch_host_s);
	cr_assert_not_null(back.graph_op_mean_s);
	for (int32_t i = 0; i < prog->n_ops; i++)
		cr_assert_eq(back.graph_op_mean_s[i], m.graph_op_mean_s[i]);
	rm_exec_measurement_finish(&back);

	/* eager only: no graph members written, none read */
	free(m.graph_op_mean_s);
	m.graph_op_mean_s = NULL;
	m.graph_step_s = m.graph_step_op_events_s = m.graph_launch_host_s = 0;
	doc = rm_exec_measurement_json(prog, &m);
	cr_assert_null(json_object_get(doc, "graph"));
	cr_assert_null(json_object_get(json_array_get(json_object_get(doc, "ops"), 0), "graph_mean_s"));
	/* graph_mean_s on one op only is refused */
	json_object_set_new(json_array_get(json_object_get(doc, "ops"), 1), "graph_mean_s", json_real(1e-3));
	f = fopen(path, "w");
	json_dumpf(doc, f, 0);
	fclose(f);
	json_decref(doc);
	cr_assert_eq(rm_exec_measurement_load(path, prog, &back, &err), RM_INVALID);
	cr_assert(strstr(err.msg, "ops[1]: graph_mean_s must be non-negative seconds, on every op or on none"), "%s",
		  err.msg);
	unlink(path);
	cmp = rm_exec_compare(prog, plan, h, 8, &m, &err);
	cr_assert_null(json_object_get(cmp, "step_graph"));
	json_decref(cmp);

	rm_exec_measurement_finish(&m);
	rm_exec_plan_destroy(plan);
	rm_program_destroy(prog);
}

/* ---- the command line --------------------------------------------------------------------- */

static int remora(const char *args)
{
	char cmd[4096];
	snprintf(cmd, sizeof(cmd), "'%s' exec %s >/dev/null 2>&1", env("REMORA_BIN"), args);
	int st = system(cmd);
	cr_assert(WIFEXITED(st), "%s", cmd);
	return WEXITSTATUS(st);
}

static int remora_capture(const char *args, char *out, size_t size)
{
	char cmd[4096];
	snprintf(cmd, sizeof(cmd), "'%s' exec %s 2>&1", env("REMORA_BIN"), args);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	size_t n = fread(out, 1, size - 1, p);
	out[n] = '\0';
	int st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(exec, cli_dry_run_exit_codes)
{
	char args[2048], out[16384];
	snprintf(args, sizeof(args), "--dry-run '%s'", test_file("programs/example.json"));
	cr_assert_eq(remora_capture(args, out, sizeof(out)), 0, "%s", out);
	cr_assert(strstr(out, "device total") && strstr(out, "check          ok"), "%s", out);
	snprintf(args, sizeof(args), "--dry-run --json --tensors '%s'", test_file("programs/example.json"));
	cr_assert_eq(remora(args), 0);
	snprintf(args, sizeof(args), "--dry-run '%s'", test_file("exec/too_much_memory.json"));
	cr_assert_eq(remora_capture(args, out, sizeof(out)), 1, "%s", out);
	cr_assert(strstr(out, "error") && strstr(out, "device memory"), "%s", out);
	snprintf(args, sizeof(args), "--dry-run '%s'", test_file("exec/unknown_dtype.json"));
	cr_assert_eq(remora_capture(args, out, sizeof(out)), 1, "%s", out);
	cr_assert(strstr(out, "int4"), "%s", out);
	snprintf(args, sizeof(args), "--dry-run '%s'", test_file("exec/int_gemm.json"));
	cr_assert_eq(remora(args), 1);
	cr_assert_eq(remora("--dry-run"), 2);
	cr_assert_eq(remora("--dry-run --bogus x.json"), 2);
	cr_assert_eq(remora("--help"), 0);
	/* graph mode and the set-up timeout parse (a dry run runs neither); a timeout of 0 is refused */
	snprintf(args, sizeof(args), "--dry-run --graph --init-timeout 30 '%s'", test_file("programs/example.json"));
	cr_assert_eq(remora(args), 0);
	snprintf(args, sizeof(args), "--dry-run --init-timeout 0 '%s'", test_file("programs/example.json"));
	cr_assert_eq(remora_capture(args, out, sizeof(out)), 2, "%s", out);
	cr_assert(strstr(out, "--init-timeout"), "%s", out);
	cr_assert_eq(remora_capture("--help", out, sizeof(out)), 0);
	cr_assert(strstr(out, "--graph") && strstr(out, "--init-timeout S"), "%s", out);
	/* a real run needs a GPU (and a CUDA build), and this program's FSDP-8 collectives need 8
	 * ranks: without mpirun it fails cleanly before launching anything, GPU or not. (The CUDA
	 * driver needs the shadow gap unprotected under AddressSanitizer.) */
	setenv("ASAN_OPTIONS", "protect_shadow_gap=0", 1);
	snprintf(args, sizeof(args), "--iterations 1 '%s'", test_file("programs/example.json"));
	cr_assert_eq(remora_capture(args, out, sizeof(out)), 1, "%s", out);
	cr_assert(strstr(out, "error"), "%s", out);
}

Test(exec, replay_compare_trace_and_store_from_the_cli)
{
	rm_error err;
	rm_program *prog = rm_program_load(test_file("programs/example.json"), &err);
	cr_assert_not_null(prog, "%s", err.msg);
	rm_exec_measurement m;
	fake_measurement(prog, hw("h100-sxm"), &m);
	char dir[] = "/tmp/remora-test-exec-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char meas[1100], trace[1100], db[1100], out_json[1100];
	snprintf(meas, sizeof(meas), "%s/run.json", dir);
	snprintf(trace, sizeof(trace), "%s/trace.json", dir);
	snprintf(db, sizeof(db), "%s/calib.db", dir);
	snprintf(out_json, sizeof(out_json), "%s/out.json", dir);
	json_t *doc = json_pack("{s:o}", "measurement", rm_exec_measurement_json(prog, &m));
	cr_assert_eq(json_dump_file(doc, meas, 0), 0);
	json_decref(doc);

	/* round trip */
	rm_exec_measurement back;
	cr_assert_eq(rm_exec_measurement_load(meas, prog, &back, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(back.n_ops, prog->n_ops);
	cr_assert_float_eq(back.step_s, m.step_s, 1e-12);
	cr_assert_float_eq(back.op_end_s[3], m.op_end_s[3], 1e-12);
	rm_exec_measurement_finish(&back);
	/* a measurement of another program */
	rm_program *other = rm_program_load(test_file("exec/int_gemm.json"), &err);
	cr_assert_neq(rm_exec_measurement_load(meas, other, &back, &err), RM_OK);
	cr_assert(strstr(err.msg, "one per op of the program"), "%s", err.msg);
	rm_program_destroy(other);

	char args[6000];
	snprintf(args, sizeof(args), "'%s' --replay '%s' --compare --calib '%s' --trace '%s' --json > '%s'",
		 test_file("programs/example.json"), meas, db, trace, out_json);
	char cmd[8000];
	snprintf(cmd, sizeof(cmd), "'%s' exec %s", env("REMORA_BIN"), args);
	int st = system(cmd);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", cmd);
	json_error_t jerr;
	json_t *out = json_load_file(out_json, 0, &jerr);
	cr_assert_not_null(out, "%s", jerr.text);
	json_t *cmp = json_object_get(out, "compare");
	cr_assert_gt(json_integer_value(json_object_get(cmp, "calibration_rows")), 0);
	cr_assert_not_null(json_object_get(json_object_get(cmp, "kinds"), "collective"));
	json_decref(out);
	json_t *tr = json_load_file(trace, 0, &jerr);
	cr_assert_not_null(tr, "%s", jerr.text);
	json_decref(tr);
	rm_calib_db *d = rm_calib_db_open(db, false, &err);
	cr_assert_not_null(d, "%s", err.msg);
	json_t *dump = rm_calib_db_dump_json(d, &err);
	cr_assert_not_null(dump);
	cr_assert_eq(json_array_size(json_object_get(dump, "runs")), 1);
	json_decref(dump);
	rm_calib_db_close(d);
	/* text output too */
	snprintf(cmd, sizeof(cmd), "'%s' exec '%s' --replay '%s' --compare >/dev/null", env("REMORA_BIN"),
		 test_file("programs/example.json"), meas);
	st = system(cmd);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", cmd);
	unlink(meas);
	unlink(trace);
	unlink(db);
	unlink(out_json);
	rmdir(dir);
	rm_exec_measurement_finish(&m);
	rm_program_destroy(prog);
}

/* A malformed measurement points at the offending value (positions counted by hand below). */
Test(exec, bad_measurement_points_at_the_value)
{
	rm_error err;
	rm_program *prog = rm_program_load(test_file("programs/example.json"), &err);
	cr_assert_not_null(prog, "%s", err.msg);
	char dir[] = "/tmp/remora-test-meas-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char path[128];
	snprintf(path, sizeof(path), "%s/run.json", dir);
	static const struct {
		const char *text;
		int line, column;
		const char *needle;
	} cases[] = {
		/* line 3 "  \"ops\": []": the '[' at column 10 */
		{"{\"measurement\": {\n  \"schema\": \"" RM_EXEC_MEASUREMENT_SCHEMA "\",\n  \"ops\": []}}\n", 3, 10,
		 "ops: expected an array"},
		/* line 2 "  \"schema\": \"x\"": the quote at column 13 */
		{"{\"measurement\": {\n  \"schema\": \"x\",\n  \"ops\": []}}\n", 2, 13, "schema: expected"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		FILE *f = fopen(path, "w");
		cr_assert_not_null(f);
		fputs(cases[i].text, f);
		cr_assert_eq(fclose(f), 0);
		rm_exec_measurement m;
		rm_error_clear(&err);
		cr_assert_neq(rm_exec_measurement_load(path, prog, &m, &err), RM_OK);
		cr_assert(strstr(err.msg, cases[i].needle), "%s", err.msg);
		cr_assert_eq(err.line, cases[i].line, "%s: line %d", err.msg, err.line);
		cr_assert_eq(err.column, cases[i].column, "%s: column %d", err.msg, err.column);
	}
	unlink(path);
	rmdir(dir);
	rm_program_destroy(prog);
}

/* A GEMM of 2^32 x 2^32 x 2^32: its operands take 2^65 B each, past int64. The plan saturates
 * its byte counts instead of overflowing, and the check refuses the op, as run-program refuses
 * the program (the engine's cost model gives it 2.0e14 s). */
Test(exec, operands_past_int64_are_refused)
{
	rm_error err;
	rm_error_clear(&err);
	rm_program *prog = rm_program_load(test_file("exec/huge_gemm.json"), &err);
	cr_assert_not_null(prog, "%s", err.msg);
	rm_exec_plan *plan = rm_exec_plan_create(prog, NULL, RM_EXEC_ATTN_FUSED, &err);
	cr_assert_not_null(plan, "%s", err.msg);
	cr_assert_eq(plan->oversized_op, 0);
	cr_assert_eq(plan->ops[0].operand[0].bytes, RM_EXEC_BYTES_MAX);
	cr_assert_geq(plan->device_bytes, RM_EXEC_BYTES_MAX);
	rm_exec_limits lim = {.hw = hw("h200-sxm")};
	cr_assert_eq(rm_exec_plan_check(plan, &lim, &err), RM_RANGE);
	cr_assert(strstr(err.msg, "ops[0] 'matmul': a gemm whose operands take more than 2^61 B"), "%s", err.msg);
	rm_exec_plan_destroy(plan);
	rm_program_destroy(prog);

	char args[2048], out[16384];
	snprintf(args, sizeof(args), "--dry-run '%s'", test_file("exec/huge_gemm.json"));
	cr_assert_eq(remora_capture(args, out, sizeof(out)), 1, "%s", out);
	cr_assert(strstr(out, "check          FAILED") && !strstr(out, "check          ok"), "%s", out);
	char cmd[4096];
	snprintf(cmd, sizeof(cmd), "'%s' run-program '%s' >/dev/null 2>&1", env("REMORA_BIN"),
		 test_file("exec/huge_gemm.json"));
	int st = system(cmd);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "%s", cmd);
}

/* cuBLASLt's alignment preference from an operand's address: the largest power of two dividing
 * it, capped at cuBLASLt's default of 256 (e.g. an attention chunk at 3 x 80 x 2 = 480 bytes). */
Test(exec, operand_alignment_for_cublaslt)
{
	cr_assert_eq(rm_exec_alignment(0), 256);
	cr_assert_eq(rm_exec_alignment(4096), 256);
	cr_assert_eq(rm_exec_alignment(256 + 128), 128);
	cr_assert_eq(rm_exec_alignment(480), 32);
	cr_assert_eq(rm_exec_alignment(2 * 7), 2);
	cr_assert_eq(rm_exec_alignment(1001), 1);
}

/* ---- the unfused attention's lowering against attention computed directly ------------------ */

enum { AS = 5, AD = 3, ANB = 2 }; /* sequence, head dim, slices: tiny, hand-checkable sizes */

/* Deterministic values in [-1, 1). */
static void attn_fill(float *x, int n, unsigned seed)
{
	for (int i = 0; i < n; i++) {
		seed = seed * 1664525u + 1013904223u;
		x[i] = (float)(seed >> 8) / 8388608.0f - 1.0f;
	}
}

/* Direct row-major attention of one slice: P = softmax(Q K^T / sqrt(d)) over keys (causal:
 * key <= query), O = P V; and, given dO, the gradients of L = sum(O * dO). */
static void attn_direct(const float *q, const float *k, const float *v, const float *dout, bool causal, double *o,
			double *dq, double *dk, double *dv)
{
	double p[AS][AS], dp[AS][AS], ds[AS][AS], scale = 1.0 / sqrt((double)AD);
	for (int i = 0; i < AS; i++) {
		double mx = -1e300, sum = 0;
		for (int j = 0; j < AS; j++) {
			double sij = 0;
			for (int c = 0; c < AD; c++)
				sij += (double)q[i * AD + c] * k[j * AD + c];
			p[i][j] = sij * scale;
			if (!causal || j <= i)
				mx = fmax(mx, p[i][j]);
		}
		for (int j = 0; j < AS; j++) {
			p[i][j] = causal && j > i ? 0 : exp(p[i][j] - mx);
			sum += p[i][j];
		}
		for (int j = 0; j < AS; j++)
			p[i][j] /= sum;
	}
	for (int i = 0; i < AS; i++)
		for (int c = 0; c < AD; c++) {
			o[i * AD + c] = 0;
			for (int j = 0; j < AS; j++)
				o[i * AD + c] += p[i][j] * v[j * AD + c];
		}
	if (!dq)
		return;
	for (int i = 0; i < AS; i++) {
		double rowdot = 0;
		for (int j = 0; j < AS; j++) {
			dp[i][j] = 0;
			for (int c = 0; c < AD; c++)
				dp[i][j] += (double)dout[i * AD + c] * v[j * AD + c];
			rowdot += p[i][j] * dp[i][j];
		}
		for (int j = 0; j < AS; j++)
			ds[i][j] = p[i][j] * (dp[i][j] - rowdot);
	}
	for (int x = 0; x < AS; x++)
		for (int c = 0; c < AD; c++) {
			dq[x * AD + c] = dk[x * AD + c] = dv[x * AD + c] = 0;
			for (int y = 0; y < AS; y++) {
				dq[x * AD + c] += scale * ds[x][y] * k[y * AD + c];
				dk[x * AD + c] += scale * ds[y][x] * q[y * AD + c];
				dv[x * AD + c] += p[y][x] * dout[y * AD + c];
			}
		}
}

/* L = sum(O * dO) of one slice, for the finite-difference check of attn_direct's gradients. */
static double attn_loss(const float *q, const float *k, const float *v, const float *dout, bool causal)
{
	double o[AS * AD], l = 0;
	attn_direct(q, k, v, dout, causal, o, NULL, NULL, NULL);
	for (int i = 0; i < AS * AD; i++)
		l += o[i] * dout[i];
	return l;
}

Test(exec, attention_steps_shapes_and_strides)
{
	rm_attn_step st[7];
	cr_assert_eq(rm_exec_attention_steps(4096, 128, false, st), 3);
	/* S = Q K^T as column-major S^T = K^T Q: A = K transposed (ld d), B = Q (ld d), D ld s */
	cr_assert(st[0].kind == RM_ATTN_GEMM && st[0].a == RM_ATTN_K && st[0].b == RM_ATTN_Q && st[0].d == RM_ATTN_P);
	cr_assert(st[0].trans_a && !st[0].trans_b);
	cr_assert_eq(st[0].m, 4096);
	cr_assert_eq(st[0].n, 4096);
	cr_assert_eq(st[0].k, 128);
	cr_assert_eq(st[0].lda, 128);
	cr_assert_eq(st[0].ldb, 128);
	cr_assert_eq(st[0].ldd, 4096);
	cr_assert_eq(st[0].stride_a, 4096 * 128);
	cr_assert_eq(st[0].stride_d, 4096LL * 4096);
	cr_assert_float_eq(st[0].alpha, 1.0 / sqrt(128.0), 1e-15);
	cr_assert_eq(st[1].kind, RM_ATTN_SOFTMAX);
	/* O = P V: column-major O^T = V^T P^T, A = V (ld d), B = P (ld s), both as stored (NN) */
	cr_assert(st[2].a == RM_ATTN_V && st[2].b == RM_ATTN_P && !st[2].trans_a && !st[2].trans_b);
	cr_assert_eq(st[2].m, 128);
	cr_assert_eq(st[2].n, 4096);
	cr_assert_eq(st[2].k, 4096);
	cr_assert_eq(st[2].lda, 128);
	cr_assert_eq(st[2].ldb, 4096);
	cr_assert_eq(st[2].ldd, 128);
	cr_assert_eq(rm_exec_attention_steps(4096, 128, true, st), 7);
	cr_assert_eq(st[1].kind, RM_ATTN_SOFTMAX, "the backward recomputes P, softmax included");
	/* dV = P^T dO: B = P transposed (NT) */
	cr_assert(st[2].d == RM_ATTN_DV && st[2].b == RM_ATTN_P && st[2].trans_b && !st[2].trans_a);
	cr_assert_eq(st[4].kind, RM_ATTN_SOFTMAX_BWD);
	cr_assert(st[6].d == RM_ATTN_DK && st[6].trans_b && st[6].b == RM_ATTN_DP);
}

/* The steps run by the CPU reference give the directly computed O, dQ, dK, dV (causal and not),
 * and the direct gradients agree with finite differences of L = sum(O * dO). */
Test(exec, attention_lowering_matches_direct_attention)
{
	const int n = ANB * AS * AD;
	for (int causal = 0; causal < 2; causal++) {
		float q[ANB * AS * AD], k[ANB * AS * AD], v[ANB * AS * AD], dout[ANB * AS * AD];
		float o[ANB * AS * AD], dq[ANB * AS * AD], dk[ANB * AS * AD], dv[ANB * AS * AD];
		float p[ANB * AS * AS], dp[ANB * AS * AS];
		attn_fill(q, n, 1), attn_fill(k, n, 2), attn_fill(v, n, 3), attn_fill(dout, n, 4);
		float *buf[RM_ATTN_BUF_COUNT] = {q, k, v, o, dout, dq, dk, dv, p, dp};
		rm_attn_step st[7];
		int ns = rm_exec_attention_steps(AS, AD, false, st);
		rm_exec_attention_reference(st, ns, AS, AD, ANB, causal, buf);
		for (int z = 0; z < ANB; z++) {
			double od[AS * AD];
			attn_direct(q + z * AS * AD, k + z * AS * AD, v + z * AS * AD, NULL, causal, od, NULL, NULL, NULL);
			for (int i = 0; i < AS * AD; i++)
				cr_assert_float_eq(o[z * AS * AD + i], od[i], 1e-5, "O slice %d [%d]", z, i);
		}
		if (causal) /* row 0 attends to key 0 alone: O[0] = V[0] */
			for (int c = 0; c < AD; c++)
				cr_assert_float_eq(o[c], v[c], 1e-6);
		ns = rm_exec_attention_steps(AS, AD, true, st);
		memset(p, 0, sizeof(p));
		rm_exec_attention_reference(st, ns, AS, AD, ANB, causal, buf);
		for (int z = 0; z < ANB; z++) {
			size_t off = (size_t)z * AS * AD;
			double od[AS * AD], gq[AS * AD], gk[AS * AD], gv[AS * AD];
			attn_direct(q + off, k + off, v + off, dout + off, causal, od, gq, gk, gv);
			for (int i = 0; i < AS * AD; i++) {
				cr_assert_float_eq(dq[off + i], gq[i], 1e-5, "dQ slice %d [%d]", z, i);
				cr_assert_float_eq(dk[off + i], gk[i], 1e-5, "dK slice %d [%d]", z, i);
				cr_assert_float_eq(dv[off + i], gv[i], 1e-5, "dV slice %d [%d]", z, i);
			}
			/* central differences on every element of the slice's Q, K and V */
			float *in[3] = {q + off, k + off, v + off};
			double *g[3] = {gq, gk, gv};
			for (int t = 0; t < 3; t++)
				for (int i = 0; i < AS * AD; i++) {
					float keep = in[t][i];
					const float h = 1e-2f;
					in[t][i] = keep + h;
					double up = attn_loss(q + off, k + off, v + off, dout + off, causal);
					in[t][i] = keep - h;
					double down = attn_loss(q + off, k + off, v + off, dout + off, causal);
					in[t][i] = keep;
					double fd = (up - down) / (2.0 * (double)h);
					cr_assert_float_eq(g[t][i], fd, 2e-4, "tensor %d [%d]: %.6f vs %.6f", t, i, g[t][i], fd);
				}
		}
	}
}
