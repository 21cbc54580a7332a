/*
 * The XLA-style scheduler on the seed scenario (reference/seed.md): what stays async, what turns
 * synchronous and why, saved bytes and collective bytes computed by hand; scenario errors.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remora/scenario.h"
#include "remora/schedule.h"
#include "remora/sim.h"

typedef struct run {
	rm_scenario_resolved res;
	rm_schedule_report rep;
	rm_program *prog;
	rm_sim_metrics m;
} run;

static const char *seed_path(void)
{
	static char path[1024];
	const char *dir = getenv("REMORA_DATA_DIR");
	cr_assert_not_null(dir);
	snprintf(path, sizeof(path), "%s/scenarios/seed-llama2-7b-fsdp8-h100.yaml", dir);
	return path;
}

/* Loads the seed scenario, applies the overrides (NULL-terminated), schedules and simulates. */
static void run_seed(run *r, const char *const *sets)
{
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_load(seed_path(), &sc, &err), RM_OK, "%s", err.msg);
	for (int i = 0; sets && sets[i]; i++)
		cr_assert_eq(rm_scenario_set(&sc, sets[i], &err), RM_OK, "%s: %s", sets[i], err.msg);
	cr_assert_eq(rm_scenario_resolve(&sc, NULL, &r->res, &err), RM_OK, "%s", err.msg);
	r->prog = rm_schedule_build(&r->res.sched, &r->rep, &err);
	cr_assert_not_null(r->prog, "%s", err.msg);
	rm_sim_options opt = {.hw_queues = r->res.hw_queues};
	rm_sim *s = rm_sim_create(r->prog, &r->res.hw, &opt, &err);
	cr_assert_not_null(s, "%s", err.msg);
	cr_assert_eq(rm_sim_run(s, &err), RM_OK, "%s", err.msg);
	r->m = *rm_sim_get_metrics(s);
	rm_sim_destroy(s);
}

static void run_finish(run *r)
{
	rm_program_destroy(r->prog);
	rm_schedule_report_finish(&r->rep);
	rm_scenario_resolved_finish(&r->res);
}

/* Collectives of the decoder layers ("layerNN/...") that run synchronously, by reason. */
static int layer_sync(const rm_program *p, const char *reason)
{
	int n = 0;
	for (int32_t i = 0; i < p->n_ops; i++) {
		const rm_program_op *op = &p->ops[i];
		if (op->cost.kind != RM_COST_COLLECTIVE || !op->sync_reason || strncmp(op->name, "layer", 5) != 0)
			continue;
		/* the pipeliner's prologue and epilogue sit outside the loop, next to nothing */
		if (!reason || strcmp(op->sync_reason, reason) == 0)
			n++;
	}
	return n;
}

static int layer_collectives(const rm_program *p)
{
	int n = 0;
	for (int32_t i = 0; i < p->n_ops; i++)
		if (p->ops[i].cost.kind == RM_COST_COLLECTIVE && strncmp(p->ops[i].name, "layer", 5) == 0)
			n++;
	return n;
}

#define NOTHING "remat.policy=nothing_saveable", "remat.names=[]"

Test(schedule, nothing_saveable_keeps_layer_collectives_async)
{
	/* Every micro-batch up to 12: the loop bodies' gathers and reduce-scatters all overlap
	 * compute. (The pipeliner's epilogue reduce-scatters of the last two layers, outside the
	 * loop, share one in-flight slot with the head's and embedding's: overlap_limit.) */
	const char *mbs[] = {"training.micro_batch=1", "training.micro_batch=2", "training.micro_batch=4",
			     "training.micro_batch=8", "training.micro_batch=12"};
	for (size_t i = 0; i < sizeof(mbs) / sizeof(mbs[0]); i++) {
		const char *sets[] = {NOTHING, mbs[i], NULL};
		run r;
		run_seed(&r, sets);
		cr_assert(r.m.fits, "%s fits", mbs[i]);
		cr_assert_eq(layer_sync(r.prog, "memory_limit"), 0, "%s", mbs[i]);
		cr_assert_eq(layer_sync(r.prog, "nothing_to_overlap"), 1,
			     "%s: only the prologue gather of layer 1 (double buffering) has nothing before it", mbs[i]);
		run_finish(&r);
	}
}

Test(schedule, seed_names_turn_synchronous_at_micro_batch_6)
{
	const char *b4[] = {"training.micro_batch=4", NULL};
	const char *b6[] = {"training.micro_batch=6", NULL};
	const char *b6_nothing[] = {NOTHING, "training.micro_batch=6", NULL};
	run r4, r6, n6;
	run_seed(&r4, b4);
	run_seed(&r6, b6);
	run_seed(&n6, b6_nothing);
	cr_assert_eq(layer_sync(r4.prog, "memory_limit"), 0);
	/* at 6 the stacked names (3 x 2sbh per layer) and the carry push the tracked memory of the
	 * loop bodies past half of XLA's limit: every loop collective goes to the compute stream */
	int layer_total = layer_collectives(r6.prog);
	cr_assert_gt(layer_sync(r6.prog, "memory_limit"), layer_total * 8 / 10, "%d of %d",
		     layer_sync(r6.prog, "memory_limit"), layer_total);
	cr_assert_gt(r6.rep.tracked_peak_bytes, r6.rep.memory_limit_bytes / 2);
	cr_assert_lt(r4.rep.tracked_peak_bytes, r4.rep.memory_limit_bytes / 2);
	cr_assert_eq(layer_sync(n6.prog, "memory_limit"), 0, "nothing_saveable stays async at 6");
	/* the switch costs step time: communication is no longer hidden */
	cr_assert_gt(r6.m.exposed_comm, 10 * n6.m.exposed_comm);
	run_finish(&r4);
	run_finish(&r6);
	run_finish(&n6);
}

Test(schedule, slop_factor_or_offloading_turns_them_async_again)
{
	const char *slop[] = {"training.micro_batch=6", "xla_flags=--xla_gpu_enable_pipelined_all_gather=true "
							"--xla_gpu_enable_pipelined_reduce_scatter=true "
							"--xla_gpu_enable_pipelined_all_reduce=true "
							"--xla_gpu_enable_while_loop_double_buffering=true "
							"--xla_gpu_all_gather_combine_threshold_bytes=2147483648 "
							"--xla_gpu_reduce_scatter_combine_threshold_bytes=2147483648 "
							"--xla_gpu_memory_limit_slop_factor=120",
			      NULL};
	const char *offload[] = {"training.micro_batch=6", "remat.policy=save_and_offload_only_these_names",
				 "remat.names=[]",
				 "remat.offload_names=[dot_mlp_out, dot_attention_value, dot_attention_query, dot_attention_key]",
				 NULL};
	run a, b;
	run_seed(&a, slop);
	run_seed(&b, offload);
	cr_assert_eq(layer_sync(a.prog, "memory_limit"), 0);
	cr_assert_eq(layer_sync(b.prog, "memory_limit"), 0);
	cr_assert_gt(b.rep.offloaded_bytes_step, 0);
	/* offloading keeps only the carry on device: L x 2sbh x 6 */
	cr_assert_eq(b.rep.saved_bytes_step, 32LL * 6 * 2 * 4096 * 4096);
	run_finish(&a);
	run_finish(&b);
}

Test(schedule, disabled_kinds_are_synchronous_with_reason_disabled)
{
	const char *sets[] = {"xla_flags=--xla_gpu_disable_async_collectives=allgather,reducescatter", NULL};
	run r;
	run_seed(&r, sets);
	int ag = 0, rs = 0;
	for (int32_t i = 0; i < r.prog->n_ops; i++) {
		const rm_program_op *op = &r.prog->ops[i];
		if (op->cost.kind != RM_COST_COLLECTIVE)
			continue;
		if (op->cost.collective.op == RM_COLL_ALL_GATHER) {
			ag++;
			cr_assert(op->sync_reason && strcmp(op->sync_reason, "disabled") == 0, "%s", op->name);
		}
		if (op->cost.collective.op == RM_COLL_REDUCE_SCATTER) {
			rs++;
			cr_assert(op->sync_reason && strcmp(op->sync_reason, "disabled") == 0, "%s", op->name);
		}
		if (op->cost.collective.op == RM_COLL_ALL_REDUCE)
			cr_assert(!op->sync_reason || strcmp(op->sync_reason, "disabled") != 0);
	}
	cr_assert_gt(ag, 0);
	cr_assert_gt(rs, 0);
	run_finish(&r);
}

Test(schedule, saved_and_collective_bytes_by_hand)
{
	run r;
	run_seed(&r, NULL);
	/* seed names: v, q, k saved (dot_mlp_out is never read by the backward) + the carry, each
	 * [1, 4096, 4096] bf16, for 32 layers */
	int64_t sbh2 = 2LL * 4096 * 4096;
	cr_assert_eq(r.rep.plan.saved_bytes, 3 * sbh2);
	cr_assert_eq(r.rep.saved_bytes_step, 32 * 4 * sbh2);
	/* one layer's collectives move its parameters: gathers of the matrices (bf16) plus the
	 * all-reduce of the replicated norms = 202,383,360 parameters x 2 bytes */
	int64_t ag = 0, rs = 0, ar = 0;
	for (int32_t i = 0; i < r.prog->n_ops; i++) {
		const rm_program_op *op = &r.prog->ops[i];
		if (op->cost.kind != RM_COST_COLLECTIVE || op->layer != 5)
			continue;
		if (op->cost.collective.op == RM_COLL_ALL_GATHER && op->phase == RM_PPHASE_FWD)
			ag += op->cost.collective.bytes;
		if (op->cost.collective.op == RM_COLL_REDUCE_SCATTER)
			rs += op->cost.collective.bytes;
		if (op->cost.collective.op == RM_COLL_ALL_REDUCE)
			ar += op->cost.collective.bytes;
		cr_assert_eq(op->cost.collective.group_size, 8);
	}
	cr_assert_eq(ag + ar, 202383360LL * 2);
	cr_assert_eq(rs + ar, 202383360LL * 2);
	cr_assert_eq(ar, 2LL * 4096 * 2, "two RMSNorm weight vectors");
	run_finish(&r);
}

Test(schedule, recompute_ops_follow_the_policy)
{
	const char *nothing[] = {NOTHING, NULL};
	const char *dots[] = {"remat.policy=dots_saveable", "remat.names=[]", NULL};
	run a, b;
	run_seed(&a, nothing);
	run_seed(&b, dots);
	int rec_a = 0, rec_gemm_b = 0, rec_b = 0;
	for (int32_t i = 0; i < a.prog->n_ops; i++)
		rec_a += a.prog->ops[i].phase == RM_PPHASE_RECOMPUTE;
	for (int32_t i = 0; i < b.prog->n_ops; i++) {
		rec_b += b.prog->ops[i].phase == RM_PPHASE_RECOMPUTE;
		rec_gemm_b += b.prog->ops[i].phase == RM_PPHASE_RECOMPUTE && b.prog->ops[i].cost.kind == RM_COST_GEMM;
	}
	cr_assert_eq(rec_a, 32 * a.rep.plan.n_recompute_ops);
	cr_assert_eq(a.rep.plan.n_recompute_ops, 14, "16 forward ops of a Llama layer minus the down projection and the last add");
	cr_assert_eq(rec_gemm_b, 0);
	cr_assert_gt(rec_b, 0);
	cr_assert_gt(a.m.recompute, b.m.recompute);
	run_finish(&a);
	run_finish(&b);
}

Test(schedule, ideal_mode_and_unrolled_layers)
{
	const char *ideal[] = {"scheduler.mode=ideal", "training.micro_batch=6", NULL};
	const char *unrolled[] = {"remat.scan=false", NOTHING, NULL};
	run a, b;
	run_seed(&a, ideal);
	run_seed(&b, unrolled);
	cr_assert_eq(a.rep.sync, 0, "the ideal runtime never runs a collective on the compute stream");
	cr_assert_gt(b.rep.async, 0);
	cr_assert(b.m.fits);
	run_finish(&a);
	run_finish(&b);
}

Test(schedule, same_scenario_same_program)
{
	run a, b;
	run_seed(&a, NULL);
	run_seed(&b, NULL);
	char *ta = NULL, *tb = NULL;
	size_t la = 0, lb = 0;
	FILE *fa = open_memstream(&ta, &la), *fb = open_memstream(&tb, &lb);
	cr_assert(rm_program_write(a.prog, fa, NULL));
	cr_assert(rm_program_write(b.prog, fb, NULL));
	fclose(fa);
	fclose(fb);
	cr_assert_eq(la, lb);
	cr_assert_eq(memcmp(ta, tb, la), 0);
	cr_assert_eq(a.m.step_time, b.m.step_time);
	free(ta);
	free(tb);
	run_finish(&a);
	run_finish(&b);
}

/* ---- bad scenarios ---- */

static void expect_scenario_error(const char *text, rm_status st, int line, int col, const char *needle)
{
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	rm_status got = rm_scenario_parse(text, strlen(text), "bad.yaml", &sc, &err);
	if (got == RM_OK) {
		rm_scenario_resolved res;
		got = rm_scenario_resolve(&sc, NULL, &res, &err);
		if (got == RM_OK)
			rm_scenario_resolved_finish(&res);
	}
	cr_assert_eq(got, st, "%s -> %s (%s)", text, rm_status_name(got), err.msg);
	cr_assert_eq(err.line, line, "%s: line %d (%s)", text, err.line, err.msg);
	cr_assert_eq(err.column, col, "%s: column %d (%s)", text, err.column, err.msg);
	cr_assert(strstr(err.msg, needle), "'%s' lacks '%s'", err.msg, needle);
	cr_assert_str_eq(err.file, "bad.yaml");
}

Test(scenario, bad_files_point_at_the_key)
{
	expect_scenario_error("model: llama-2-7b\ntraining:\n  micro_bach: 4\n", RM_UNKNOWN_KEY, 3, 3,
			      "unknown key \"training.micro_bach\"");
	expect_scenario_error("model: llama-2-7b\ntraining:\n  micro_batch: four\n", RM_INVALID, 3, 16,
			      "training.micro_batch: expected an integer");
	expect_scenario_error("model: llama-2-7b\ntraining: [1, 2\n", RM_PARSE, 3, 1, "without a closing bracket");
	expect_scenario_error("hardware: h100-sxm\n", RM_MISSING, 1, 1, "missing required key \"model\"");
	expect_scenario_error("model: llama-2-7b\nremat:\n  names: [dot_mlp_outt]\n", RM_INVALID, 3, 11,
			      "unknown checkpoint name \"dot_mlp_outt\"");
	expect_scenario_error("model: llama-2-7b\nremat:\n  policy: save_only_these_name\n", RM_INVALID, 3, 11,
			      "unknown remat policy");
	expect_scenario_error("model: llama-2-7b\nxla_flags: --xla_gpu_memory_limit_slop_factor=lots\n", RM_INVALID, 2, 12,
			      "expects an integer");
	expect_scenario_error("model: llama-3-9b\n", RM_NOT_FOUND, 1, 8, "unknown model 'llama-3-9b'");
	expect_scenario_error("model: llama-2-7b\nhardware: b200\n", RM_NOT_FOUND, 2, 11, "unknown hardware profile");
	expect_scenario_error("model: llama-2-7b\nparallelism:\n  fsdp: 16\n", RM_INVALID, 3, 9, "must divide the 8 GPUs");
	expect_scenario_error("model: llama-2-7b\nscheduler:\n  mode: fast\n", RM_INVALID, 3, 9, "expected xla or ideal");
}

Test(scenario, set_overrides_and_their_errors)
{
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_set(&sc, "training.micro_batch=4", &err), RM_OK);
	cr_assert_eq(sc.micro_batch, 4);
	cr_assert_eq(rm_scenario_set(&sc, "remat.names=[query_proj, mlpwo]", &err), RM_OK);
	cr_assert_eq(sc.n_names, 2);
	cr_assert_eq(rm_scenario_set(&sc, "search.micro_batches=[1, 2, 4]", &err), RM_OK);
	cr_assert_eq(sc.search_micro_batches[2], 4);
	cr_assert_eq(rm_scenario_set(&sc, "training.micro_batch=0", &err), RM_RANGE);
	cr_assert(strstr(err.msg, "--set training.micro_batch=0"), "%s", err.msg);
	cr_assert_eq(rm_scenario_set(&sc, "training.microbatch=4", &err), RM_UNKNOWN_KEY);
	cr_assert_eq(rm_scenario_set(&sc, "novalue", &err), RM_USAGE);
	cr_assert_eq(rm_scenario_set(&sc, "remat.names=[a, b", &err), RM_PARSE);
}

Test(schedule, gradient_accumulation_regathers_without_holding_memory)
{
	const char *one[] = {NULL};
	const char *two[] = {"training.grad_accum=2", NULL};
	run a, b;
	run_seed(&a, one);
	run_seed(&b, two);
	/* every micro-batch re-gathers and reduces: twice the collectives, twice the tokens */
	cr_assert_eq(b.rep.collectives, 2 * a.rep.collectives);
	cr_assert_eq(b.prog->tokens, 2 * a.prog->tokens);
	/* the first micro-batch's activations are gone before the second starts: the peak grows
	 * by less than 5% (the persistent gradient shards are the same) */
	cr_assert_lt(b.m.peak_memory_bytes, a.m.peak_memory_bytes * 105 / 100);
	cr_assert_gt(b.m.step_time, 19 * a.m.step_time / 10);
	run_finish(&a);
	run_finish(&b);
}

Test(schedule, unrolled_layers_track_their_own_memory)
{
	const char *sets[] = {"remat.scan=false", NULL};
	run r;
	run_seed(&r, sets);
	/* no stacks through loops: the tracked memory stays far under half the limit at b=1 */
	cr_assert_lt(r.rep.tracked_peak_bytes, r.rep.memory_limit_bytes / 4);
	cr_assert_eq(layer_sync(r.prog, "memory_limit"), 0);
	run_finish(&r);
}

/* A number past its range is refused with the range, not converted: (int64_t)(1e10 * 2^30) is
 * undefined behaviour and used to become the default 80% of HBM. */
Test(scenario, device_memory_out_of_range_is_refused)
{
	expect_scenario_error("model: llama-2-7b\nscheduler:\n  device_memory_gib: 1e10\n", RM_RANGE, 3, 22,
			      "scheduler.device_memory_gib: 1e+10 is outside [0, 1048576]");
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_set(&sc, "scheduler.device_memory_gib=1e10", &err), RM_RANGE);
	cr_assert(strstr(err.msg, "outside [0, 1048576]"), "%s", err.msg);
	cr_assert_eq(rm_scenario_set(&sc, "scheduler.device_memory_gib=1048576", &err), RM_OK, "%s", err.msg);
	cr_assert_float_eq(sc.device_memory_gib, 1048576.0, 0.0);
}

/* libfyaml 0.7.12 loops for ever on a directive line holding invalid UTF-8 ("%\xd0", found by
 * tests/fuzz/fuzz_scenario; also after a YAML 1.1 NEL line break): refused before parsing. The
 * timeout turns the old hang into a failure. */
Test(scenario, directive_lines_with_invalid_utf8_are_refused, .timeout = 20)
{
	static const struct {
		const char *text;
		int line, column;
	} cases[] = {
		{"%\xd0", 1, 2},
		{"model: llama-2-7b\n%\xd0\n", 2, 2},
		{"%YA]M\x85L 1.2\n---\nmodel: llama-2-7b\n", 1, 6},
		{"%YAML 1.1\n---\nmodel: a\xc2\x85%\xd0\n", 3, 2},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		rm_scenario sc;
		rm_error err;
		rm_error_clear(&err);
		rm_scenario_init(&sc);
		cr_assert_eq(rm_scenario_parse(cases[i].text, strlen(cases[i].text), "bad.yaml", &sc, &err), RM_PARSE,
			     "case %zu", i);
		cr_assert_eq(err.line, cases[i].line, "case %zu: %s", i, err.msg);
		cr_assert_eq(err.column, cases[i].column, "case %zu: %s", i, err.msg);
		cr_assert(strstr(err.msg, "directive line"), "%s", err.msg);
	}
	/* a well-formed directive still parses */
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	const char *ok = "%YAML 1.2\n---\nmodel: llama-2-7b\n";
	cr_assert_eq(rm_scenario_parse(ok, strlen(ok), "ok.yaml", &sc, &err), RM_OK, "%s", err.msg);
	cr_assert_str_eq(sc.model, "llama-2-7b");
	cr_assert_eq(rm_scenario_set(&sc, "training.seq_len=%\xd0", &err), RM_PARSE);
	cr_assert(strstr(err.msg, "--set training.seq_len=") && strstr(err.msg, "directive line"), "%s", err.msg);
}
