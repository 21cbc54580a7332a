/*
 * Capacity planning (remora/plan.h): token and duration parsing, the layouts tried per GPU count,
 * the arithmetic of a plan, and that a plan is a simulated step `simulate` reproduces.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "remora/plan.h"
#include "scenario_run.h"

Test(plan, token_counts_take_si_suffixes)
{
	rm_error err;
	double t = 0;
	cr_assert(rm_plan_parse_tokens("15T", &t, &err));
	cr_assert_eq(t, 15e12);
	cr_assert(rm_plan_parse_tokens("1t", &t, &err) && t == 1e12);
	cr_assert(rm_plan_parse_tokens("300B", &t, &err) && t == 300e9);
	cr_assert(rm_plan_parse_tokens("2.5G", &t, &err) && t == 2.5e9);
	cr_assert(rm_plan_parse_tokens("1.5e12", &t, &err) && t == 1.5e12);
	cr_assert(rm_plan_parse_tokens("40K", &t, &err) && t == 40e3);
	const char *bad[] = {"", "T", "-1T", "1X", "1e19", "0", "15TB", "nan", "0x10", "inf"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		rm_error_clear(&err);
		cr_assert_not(rm_plan_parse_tokens(bad[i], &t, &err), "'%s' parsed", bad[i]);
		cr_assert(strstr(err.msg, "is not a token count"), "%s", err.msg);
	}
}

Test(plan, durations_take_units)
{
	rm_error err;
	double s = 0;
	cr_assert(rm_plan_parse_duration("30d", &s, &err) && s == 30 * 86400.0);
	cr_assert(rm_plan_parse_duration("36h", &s, &err) && s == 36 * 3600.0);
	cr_assert(rm_plan_parse_duration("90m", &s, &err) && s == 5400.0);
	cr_assert(rm_plan_parse_duration("2w", &s, &err) && s == 2 * 604800.0);
	cr_assert(rm_plan_parse_duration("3600", &s, &err) && s == 3600.0);
	const char *bad[] = {"", "0d", "-1h", "1y", "d", "3 d", "0x10d", "0x1p4d", "infd", "nanh"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		rm_error_clear(&err);
		cr_assert_not(rm_plan_parse_duration(bad[i], &s, &err), "'%s' parsed", bad[i]);
		cr_assert(strstr(err.msg, "is not a duration"), "%s", err.msg);
	}
}

static void resolve_text(const char *text, rm_scenario_resolved *res)
{
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_parse(text, strlen(text), "t.yaml", &sc, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(rm_scenario_resolve(&sc, NULL, res, &err), RM_OK, "%s", err.msg);
}

/*
 * Llama-3-8B (32 heads, 8 key/value heads, ffn 14336, 32 layers) on 16 GPUs, 8 a node, seq 8192
 * (no CP). tp in {1, 2, 4, 8}; pp a divisor of 32 in the list with tp x pp | 16; the FSDP group
 * every data-parallel GPU (dp = 16 / (tp pp)), plus HSDP with the 8 / tp GPUs of a node when dp
 * spans nodes: tp 1: pp 1 (16, 8 x 2), pp 2, 4, 8, 16: 6; tp 2: pp 1 (8, 4 x 2), pp 2, 4, 8: 5;
 * tp 4: pp 1 (4, 2 x 2), pp 2, 4: 4; tp 8: pp 1 (2, 1 x 2), pp 2: 3. 18 in all.
 */
Test(plan, layouts_of_16_gpus)
{
	rm_scenario_resolved res;
	resolve_text("model: llama-3-8b\ncluster: {gpus_per_node: 8, nodes: 2}\ntraining: {seq_len: 8192}\n", &res);
	char out[64][256];
	int n = rm_plan_layouts(&res, 16, 8, NULL, out, 64);
	cr_assert_eq(n, 18);
	cr_assert_str_eq(out[0], "parallelism.tp=1 parallelism.sp=false parallelism.pp=1 parallelism.cp=1 "
				 "parallelism.fsdp=16 parallelism.dp_replicate=1");
	cr_assert_str_eq(out[1], "parallelism.tp=1 parallelism.sp=false parallelism.pp=1 parallelism.cp=1 "
				 "parallelism.fsdp=8 parallelism.dp_replicate=2");
	cr_assert_str_eq(out[17], "parallelism.tp=8 parallelism.sp=true parallelism.pp=2 parallelism.cp=1 "
				  "parallelism.fsdp=1 parallelism.dp_replicate=1");
	/* narrowed to TP 8: its 3 */
	rm_plan_request req = rm_plan_request_default();
	req.n_tp = 1;
	req.tp[0] = 8;
	cr_assert_eq(rm_plan_layouts(&res, 16, 8, &req, out, 64), 3);
	/* the cap bounds the list */
	cr_assert_eq(rm_plan_layouts(&res, 16, 8, NULL, out, 5), 5);
	/* two schedules double the 10 pipelined layouts: 8 + 20; async TP then doubles every TP
	 * layout: tp 1: 2 + 8, tp 2: 4 + 12, tp 4: 4 + 8, tp 8: 4 + 4 = 46 */
	rm_plan_request sch = rm_plan_request_default();
	sch.n_pp_schedules = 2;
	snprintf(sch.pp_schedules[0], sizeof(sch.pp_schedules[0]), "1f1b");
	snprintf(sch.pp_schedules[1], sizeof(sch.pp_schedules[1]), "zero_bubble");
	cr_assert_eq(rm_plan_layouts(&res, 16, 8, &sch, out, 64), 28);
	sch.async_tp = true;
	n = rm_plan_layouts(&res, 16, 8, &sch, out, 64);
	cr_assert_eq(n, 46);
	bool found = false;
	for (int i = 0; i < n; i++)
		found |= strstr(out[i], "parallelism.tp=2 ") && strstr(out[i], "parallelism.pp=2 ") &&
			 strstr(out[i], "parallelism.pp_schedule=zero_bubble parallelism.virtual_stages=1 parallelism.async_tp=true");
	cr_assert(found);
	rm_scenario_resolved_finish(&res);

	/* 32768 tokens: context parallelism too (cp in 2, 4, 8 with tp x cp inside the node) */
	resolve_text("model: llama-3-8b\ncluster: {gpus_per_node: 8, nodes: 2}\ntraining: {seq_len: 32768}\n", &res);
	req.n_tp = 1;
	req.tp[0] = 1;
	req.n_pp = 1;
	req.pp[0] = 1;
	n = rm_plan_layouts(&res, 16, 8, &req, out, 64);
	/* cp 1: dp 16 (16, 8 x 2); cp 2: dp 8 (8, 4 x 2); cp 4: dp 4 (4, 2 x 2); cp 8: dp 2 (2, 1 x 2) */
	cr_assert_eq(n, 8);
	cr_assert(strstr(out[6], "parallelism.cp=8 parallelism.fsdp=2 parallelism.dp_replicate=1"), "%s", out[6]);
	rm_scenario_resolved_finish(&res);
}

/* Llama-2-7B on one node of 8 H100s, 1e9 tokens of seq 1024, global batch 64, full AC only,
 * TP 1 or 2 without PP: FSDP 8 and TP 2 x FSDP 4 (and TP 2 x HSDP is no layout: dp 4 fits in
 * the node). */
static rm_plan_request small_request(void)
{
	rm_plan_request req = rm_plan_request_default();
	snprintf(req.model, sizeof(req.model), "llama-2-7b");
	req.n_hardware = 1;
	snprintf(req.hardware[0], sizeof(req.hardware[0]), "h100-sxm");
	req.price[0] = 2.5;
	req.tokens = 1e9;
	req.n_gpus = 1;
	req.gpus[0] = 8;
	req.seq_len = 1024;
	req.global_batch_min = req.global_batch_max = 64;
	req.n_tp = 2;
	req.tp[0] = 1;
	req.tp[1] = 2;
	req.n_pp = 1;
	req.pp[0] = 1;
	req.n_policies = 1;
	snprintf(req.policies[0], sizeof(req.policies[0]), "nothing_saveable");
	return req;
}

/* time to train = tokens / (tokens/s per GPU x GPUs), GPU-hours = GPUs x time / 3600, cost =
 * GPU-hours x price; the plan is the fastest layout that fits; and simulating its scenario gives
 * its tokens/s. */
Test(plan, arithmetic_and_simulate_agree, .timeout = 120)
{
	rm_plan_request req = small_request();
	rm_plan_result res;
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_plan_run(&req, NULL, NULL, &res, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(res.n_points, 1);
	const rm_plan_point *pt = &res.points[0];
	cr_assert_eq(pt->n_layouts, 2);
	cr_assert_eq(res.chosen[0], 0);
	cr_assert(pt->have_best);
	const rm_plan_row *b = &pt->best;
	cr_assert(b->r.fits);
	double tps = b->r.tokens_per_s_per_gpu;
	cr_assert_float_eq(b->time_to_train_s, 1e9 / (tps * 8), 1e-9 * b->time_to_train_s);
	cr_assert_float_eq(b->gpu_hours, 8 * b->time_to_train_s / 3600, 1e-12 * b->gpu_hours);
	cr_assert_float_eq(b->cost, 2.5 * b->gpu_hours, 1e-12 * b->cost);
	for (int i = 0; i < pt->n_layouts; i++)
		if (pt->layouts[i].r.fits)
			cr_assert_geq(tps, pt->layouts[i].r.tokens_per_s_per_gpu);
	cr_assert_eq(b->global_batch, 64);
	int64_t dp = b->fsdp * b->dp_replicate;
	cr_assert_eq(b->grad_accum * b->r.c.micro_batch * dp, 64);

	/* the winner's scenario, simulated */
	char text[2048];
	snprintf(text, sizeof(text),
		 "model: llama-2-7b\nhardware: h100-sxm\ncluster: {gpus_per_node: 8, nodes: 1}\n"
		 "training: {seq_len: 1024, micro_batch: %lld, global_batch: 64}\n"
		 "parallelism: {tp: %lld, sp: %s, pp: 1, cp: 1, fsdp: %lld, dp_replicate: %lld}\n"
		 "remat: {scan: false, policy: \"%s\"}\nscheduler: {mode: fsdp2}\n",
		 (long long)b->r.c.micro_batch, (long long)b->tp, b->sp ? "true" : "false", (long long)b->fsdp,
		 (long long)b->dp_replicate, b->r.c.policy);
	/* as `remora simulate` runs it: the resolved scenario's cost model (its NCCL model) */
	rm_scenario sc;
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_parse(text, strlen(text), "w.yaml", &sc, &err), RM_OK, "%s", err.msg);
	rm_scenario_resolved wr;
	cr_assert_eq(rm_scenario_resolve(&sc, NULL, &wr, &err), RM_OK, "%s", err.msg);
	rm_schedule_report rep;
	rm_program *prog = rm_schedule_build(&wr.sched, &rep, &err);
	cr_assert_not_null(prog, "%s", err.msg);
	rm_sim_options opt = {.hw_queues = wr.hw_queues, .cost = wr.sched.cost};
	rm_sim *sim = rm_sim_create(prog, &wr.hw, &opt, &err);
	cr_assert_not_null(sim, "%s", err.msg);
	cr_assert_eq(rm_sim_run(sim, &err), RM_OK, "%s", err.msg);
	double got = rm_sim_get_metrics(sim)->tokens_per_s;
	cr_assert_float_eq(got, tps, 1e-9 * tps, "simulate %g, plan %g", got, tps);
	rm_sim_destroy(sim);
	rm_program_destroy(prog);
	rm_schedule_report_finish(&rep);
	rm_scenario_resolved_finish(&wr);
	rm_plan_result_finish(&res);
}

/* A candidate that does not fit is never a plan: Llama-3-70B on one node with nothing recomputed
 * keeps far more than 80 GB per GPU. */
Test(plan, nothing_fits_no_plan, .timeout = 120)
{
	rm_plan_request req = small_request();
	snprintf(req.model, sizeof(req.model), "llama-3-70b");
	snprintf(req.policies[0], sizeof(req.policies[0]), "everything_saveable");
	req.seq_len = 8192;
	req.n_tp = 1;
	req.tp[0] = 8;
	req.global_batch_min = req.global_batch_max = 8;
	rm_plan_result res;
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_plan_run(&req, NULL, NULL, &res, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(res.n_points, 1);
	cr_assert_not(res.points[0].have_best);
	cr_assert_eq(res.chosen[0], -1);
	cr_assert(res.points[0].n_layouts > 0);
	for (int i = 0; i < res.points[0].n_layouts; i++)
		cr_assert_not(res.points[0].layouts[i].r.fits && res.points[0].layouts[i].r.ok);
	cr_assert(strstr(res.why_none[0], "no layout fits on h100-sxm"), "%s", res.why_none[0]);
	rm_plan_result_finish(&res);
}

Test(plan, bad_requests)
{
	rm_plan_result res;
	rm_error err;
	rm_plan_request req = small_request();
	req.model[0] = '\0';
	rm_error_clear(&err);
	cr_assert_eq(rm_plan_run(&req, NULL, NULL, &res, &err), RM_INVALID);
	cr_assert(strstr(err.msg, "no model"), "%s", err.msg);
	rm_plan_result_finish(&res);

	req = small_request();
	req.n_hardware = 0;
	rm_error_clear(&err);
	cr_assert_eq(rm_plan_run(&req, NULL, NULL, &res, &err), RM_INVALID);
	cr_assert(strstr(err.msg, "no hardware"), "%s", err.msg);
	rm_plan_result_finish(&res);

	req = small_request();
	req.price[0] = -1;
	req.budget = 1000;
	rm_error_clear(&err);
	cr_assert_eq(rm_plan_run(&req, NULL, NULL, &res, &err), RM_INVALID);
	cr_assert(strstr(err.msg, "needs a price per GPU-hour"), "%s", err.msg);
	rm_plan_result_finish(&res);

	req = small_request();
	req.gpus[0] = 12;
	rm_error_clear(&err);
	cr_assert_eq(rm_plan_run(&req, NULL, NULL, &res, &err), RM_INVALID);
	cr_assert(strstr(err.msg, "12 GPUs is not a whole number of h100-sxm nodes of 8"), "%s", err.msg);
	rm_plan_result_finish(&res);

	req = small_request();
	req.n_gpus = 0;
	req.max_gpus = 4;
	rm_error_clear(&err);
	cr_assert_eq(rm_plan_run(&req, NULL, NULL, &res, &err), RM_INVALID);
	cr_assert(strstr(err.msg, "--max-gpus 4 is below one h100-sxm node of 8 GPUs"), "%s", err.msg);
	rm_plan_result_finish(&res);
	req.max_gpus = (1 << 20) + 1;
	rm_error_clear(&err);
	cr_assert_eq(rm_plan_run(&req, NULL, NULL, &res, &err), RM_INVALID);
	cr_assert(strstr(err.msg, "the ladder goes up to 1048576 GPUs"), "%s", err.msg);
	rm_plan_result_finish(&res);

	/* the scenario's words for a bad request name the plan's flag */
	req = small_request();
	snprintf(req.model, sizeof(req.model), "gpt-2");
	req.seq_len = 8192;
	rm_error_clear(&err);
	cr_assert_neq(rm_plan_run(&req, NULL, NULL, &res, &err), RM_OK);
	cr_assert(strstr(err.msg, "(from --seq-len, default 8192)") && strstr(err.msg, "give --seq-len"), "%s", err.msg);
	rm_plan_result_finish(&res);

	req = small_request();
	snprintf(req.hardware[0], sizeof(req.hardware[0]), "h100-nope");
	rm_error_clear(&err);
	cr_assert_neq(rm_plan_run(&req, NULL, NULL, &res, &err), RM_OK);
	cr_assert(strstr(err.msg, "h100-nope"), "%s", err.msg);
	rm_plan_result_finish(&res);
}

static void keep_rows(const rm_candidate_result *r, void *user)
{
	rm_candidate_result *rows = user;
	if (!r->c.as_written && r->c.micro_batch >= 1 && r->c.micro_batch <= 3)
		rows[r->c.micro_batch - 1] = *r;
}

/* With training.global_batch, each searched micro-batch keeps the global batch: 64 sequences on
 * 8 GPUs are 8 x 8, 4 x 2 micro-batches of 1 and 2 (the same step time as the scenario written
 * with grad_accum 8 or 4), and 3 divides nothing: no candidate, with the reason. */
Test(plan, search_keeps_the_global_batch, .timeout = 120)
{
	const char *text = "model: llama-2-7b\ntraining: {seq_len: 1024, global_batch: 64}\n"
			   "remat: {scan: false}\nscheduler: {mode: fsdp2}\n"
			   "search: {policies: [nothing_saveable], micro_batches: [1, 2, 3], include_ideal: false}\n";
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_parse(text, strlen(text), "t.yaml", &sc, &err), RM_OK, "%s", err.msg);
	rm_search *s = rm_search_create(&sc, NULL, &err);
	cr_assert_not_null(s, "%s", err.msg);
	rm_search_options opt = {.jobs = 1};
	rm_search_progress prog;
	cr_assert_eq(rm_search_run(s, &opt, &prog, &err), RM_OK, "%s", err.msg);
	rm_candidate_result rows[3];
	memset(rows, 0, sizeof(rows));
	cr_assert_eq(rm_search_each(s, keep_rows, rows, &err), RM_OK);
	cr_assert(rows[0].ok && rows[1].ok);
	cr_assert_not(rows[2].ok);
	cr_assert(strstr(rows[2].error, "global_batch 64 is not a multiple of micro_batch 3 x 8 data-parallel GPUs"), "%s",
		  rows[2].error);
	for (int mb = 1; mb <= 2; mb++) {
		char t2[512];
		snprintf(t2, sizeof(t2),
			 "model: llama-2-7b\ntraining: {seq_len: 1024, micro_batch: %d, grad_accum: %d}\n"
			 "remat: {scan: false, policy: nothing_saveable}\nscheduler: {mode: fsdp2}\n",
			 mb, 8 / mb);
		rm_scenario s2;
		rm_scenario_init(&s2);
		cr_assert_eq(rm_scenario_parse(t2, strlen(t2), "w.yaml", &s2, &err), RM_OK, "%s", err.msg);
		rm_scenario_resolved wr;
		cr_assert_eq(rm_scenario_resolve(&s2, NULL, &wr, &err), RM_OK, "%s", err.msg);
		rm_schedule_report rep;
		rm_program *prog2 = rm_schedule_build(&wr.sched, &rep, &err);
		cr_assert_not_null(prog2, "%s", err.msg);
		rm_sim_options so = {.hw_queues = wr.hw_queues, .cost = wr.sched.cost};
		rm_sim *sim = rm_sim_create(prog2, &wr.hw, &so, &err);
		cr_assert_not_null(sim, "%s", err.msg);
		cr_assert_eq(rm_sim_run(sim, &err), RM_OK, "%s", err.msg);
		double step = rm_time_to_s(rm_sim_get_metrics(sim)->step_time);
		cr_assert_float_eq(rows[mb - 1].step_time_s, step, 1e-9 * step, "mb %d: %g vs %g", mb,
				   rows[mb - 1].step_time_s, step);
		rm_sim_destroy(sim);
		rm_program_destroy(prog2);
		rm_schedule_report_finish(&rep);
		rm_scenario_resolved_finish(&wr);
	}
	rm_search_destroy(s);
}

/* A global batch of 4608 sequences on 8 GPUs is 576 micro-batches of 1 per data-parallel GPU: 32
 * layers x 576 = 18432 layer passes, over the 16384 one program holds (RM_SCENARIO_MAX_LAYER_STEPS).
 * Micro-batches of 2 need 288 (9216 passes), so the layout is still a candidate and its
 * micro-batch-1 row says why it is none. TP 2 x FSDP 4 has 4 data-parallel GPUs: micro-batch 2
 * accumulates 576 too, 4 is the first that fits in one program. */
static void keep_by_layout(const rm_candidate_result *r, void *user)
{
	rm_candidate_result(*rows)[3] = user;
	int par = strstr(r->c.parallelism, "tp=2") ? 1 : 0;
	int m = r->c.micro_batch == 1 ? 0 : r->c.micro_batch == 2 ? 1 : r->c.micro_batch == 4 ? 2 : -1;
	if (!r->c.as_written && m >= 0)
		rows[par][m] = *r;
}

Test(plan, a_long_accumulation_moves_to_larger_micro_batches, .timeout = 120)
{
	const char *text = "model: llama-2-7b\ntraining: {seq_len: 1024, micro_batch: 2, global_batch: 4608}\n"
			   "remat: {scan: false}\nscheduler: {mode: fsdp2}\n"
			   "search: {policies: [nothing_saveable], micro_batches: [1, 2, 4], include_ideal: false,\n"
			   "  parallelism: ['', 'parallelism.tp=2 parallelism.sp=true parallelism.fsdp=4']}\n";
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_parse(text, strlen(text), "t.yaml", &sc, &err), RM_OK, "%s", err.msg);
	rm_search *s = rm_search_create(&sc, NULL, &err);
	cr_assert_not_null(s, "%s", err.msg);
	rm_search_options opt = {.jobs = 1};
	rm_search_progress prog;
	cr_assert_eq(rm_search_run(s, &opt, &prog, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(prog.total, 1 + 2 * 3); /* the TP 2 variant is kept: micro-batch 4 resolves */
	rm_candidate_result rows[2][3];
	memset(rows, 0, sizeof(rows));
	cr_assert_eq(rm_search_each(s, keep_by_layout, rows, &err), RM_OK);
	cr_assert_not(rows[0][0].ok);
	cr_assert(strstr(rows[0][0].error, "32 layers x grad_accum 576 = 18432 layer passes"), "%s", rows[0][0].error);
	cr_assert(rows[0][1].ok && rows[0][2].ok, "%s / %s", rows[0][1].error, rows[0][2].error);
	cr_assert_not(rows[1][0].ok);
	cr_assert(strstr(rows[1][0].error, "grad_accum 1152 = 36864"), "%s", rows[1][0].error);
	cr_assert_not(rows[1][1].ok);
	cr_assert(strstr(rows[1][1].error, "grad_accum 576 = 18432"), "%s", rows[1][1].error);
	cr_assert(rows[1][2].ok, "%s", rows[1][2].error);
	rm_search_destroy(s);

	/* the plan: its layout check tries the micro-batches too, so both layouts are plans' rows */
	rm_plan_request req = small_request();
	req.global_batch_min = req.global_batch_max = 4608;
	rm_plan_result res;
	cr_assert_eq(rm_plan_run(&req, NULL, NULL, &res, &err), RM_OK, "%s", err.msg);
	const rm_plan_point *pt = &res.points[0];
	cr_assert_eq(pt->n_layouts, 2);
	cr_assert_eq(pt->n_rejected, 0);
	for (int i = 0; i < 2; i++) {
		const rm_plan_row *r = &pt->layouts[i];
		cr_assert(r->r.ok, "%s", r->r.error);
		int64_t dp = r->fsdp * r->dp_replicate;
		cr_assert_eq(r->grad_accum * r->r.c.micro_batch * dp, 4608);
		cr_assert_leq(32 * r->grad_accum, RM_SCENARIO_MAX_LAYER_STEPS);
	}
	rm_plan_result_finish(&res);
}

/* Nodes that are HGX 4-GPU boards (nvlink_mesh 4): a node holds 4 GPUs, so 8 GPUs are 2 nodes
 * and HSDP's shard group is the board; TP 2 inside a board rides one pair's links and comes out
 * slower than on NVSwitch nodes, FSDP-only layouts barely move. */
Test(plan, mesh_boards_are_nodes_of_four, .timeout = 120)
{
	rm_plan_request req = small_request();
	rm_plan_result sw, mesh;
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_plan_run(&req, NULL, NULL, &sw, &err), RM_OK, "%s", err.msg);
	req.nvlink_mesh = 4;
	cr_assert_eq(rm_plan_run(&req, NULL, NULL, &mesh, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(mesh.gpn[0], 4);
	const rm_plan_point *a = &sw.points[0], *b = &mesh.points[0];
	cr_assert(b->have_best);
	cr_assert_eq(b->best.nodes, 2);
	const rm_plan_row *tp_sw = NULL, *tp_mesh = NULL;
	for (int i = 0; i < a->n_layouts; i++)
		if (a->layouts[i].tp == 2 && a->layouts[i].r.ok)
			tp_sw = &a->layouts[i];
	for (int i = 0; i < b->n_layouts; i++)
		if (b->layouts[i].tp == 2 && b->layouts[i].fsdp == tp_sw->fsdp && b->layouts[i].r.ok)
			tp_mesh = &b->layouts[i];
	cr_assert_not_null(tp_sw);
	cr_assert_not_null(tp_mesh);
	cr_assert_lt(tp_mesh->r.tokens_per_s_per_gpu, tp_sw->r.tokens_per_s_per_gpu);
	rm_plan_result_finish(&sw);
	rm_plan_result_finish(&mesh);
}

/* Weak scaling keeps the batch per GPU: 64 sequences on 8 GPUs are 128 on 16, so the plan at 16
 * GPUs runs the same accumulation per GPU; strong scaling keeps 64 and halves it. */
Test(plan, weak_scaling_grows_the_global_batch, .timeout = 120)
{
	rm_plan_request req = small_request();
	req.n_gpus = 2;
	req.gpus[0] = 8;
	req.gpus[1] = 16;
	req.n_tp = 1;
	req.tp[0] = 1;
	rm_plan_result strong, weak;
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_plan_run(&req, NULL, NULL, &strong, &err), RM_OK, "%s", err.msg);
	req.weak_base_gpus = 8;
	cr_assert_eq(rm_plan_run(&req, NULL, NULL, &weak, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(strong.n_points, 2);
	cr_assert_eq(weak.n_points, 2);
	cr_assert(strong.points[1].have_best && weak.points[1].have_best);
	cr_assert_eq(strong.points[1].best.global_batch, 64);
	cr_assert_eq(weak.points[1].best.global_batch, 128);
	cr_assert_eq(weak.points[0].best.global_batch, 64);
	const rm_plan_row *w = &weak.points[1].best;
	cr_assert_eq(w->grad_accum * w->r.c.micro_batch * w->fsdp * w->dp_replicate, 128);
	rm_plan_result_finish(&strong);
	rm_plan_result_finish(&weak);
}

/* A global batch range 64:256 tries 64, 128 and 256 for each layout, each with its own
 * accumulation; the answer is the fastest of them. */
Test(plan, a_global_batch_range_tries_each_power_of_two, .timeout = 120)
{
	rm_plan_request req = small_request();
	req.n_tp = 1;
	req.tp[0] = 1;
	req.global_batch_max = 256;
	rm_plan_result res;
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_plan_run(&req, NULL, NULL, &res, &err), RM_OK, "%s", err.msg);
	const rm_plan_point *pt = &res.points[0];
	cr_assert_eq(pt->n_layouts, 3);
	int64_t seen = 0;
	for (int i = 0; i < 3; i++) {
		const rm_plan_row *r = &pt->layouts[i];
		seen |= r->global_batch;
		cr_assert(strstr(r->layout, "training.global_batch="), "%s", r->layout);
		if (r->r.ok)
			cr_assert_eq(r->grad_accum * r->r.c.micro_batch * r->fsdp * r->dp_replicate, r->global_batch);
		if (r->r.ok && r->r.fits)
			cr_assert_geq(pt->best.r.tokens_per_s_per_gpu, r->r.tokens_per_s_per_gpu);
	}
	cr_assert_eq(seen, 64 | 128 | 256);
	rm_plan_result_finish(&res);
}

/* An MoE model whose experts the shard group does not divide (Qwen1.5-MoE's 60 on 8 GPUs) is
 * planned with its experts sharded by FSDP like the other weights, not refused. */
Test(plan, moe_experts_not_divided_by_the_shard_group, .timeout = 120)
{
	rm_plan_request req = small_request();
	snprintf(req.model, sizeof(req.model), "qwen2-moe-a2.7b");
	req.n_tp = 1;
	req.tp[0] = 1;
	rm_plan_result res;
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_plan_run(&req, NULL, NULL, &res, &err), RM_OK, "%s", err.msg);
	cr_assert(res.points[0].have_best, "%s", res.why_none[0]);
	cr_assert_eq(res.points[0].best.fsdp, 8);
	cr_assert(!strstr(res.points[0].best.layout, "parallelism.ep="), "%s", res.points[0].best.layout);
	rm_plan_result_finish(&res);
}

/* --zero adds each HSDP layout under the stages asked for (XLA runs ZeRO-1/2 over the replicas);
 * a space past 64 layouts is refused with the flags to narrow. */
Test(plan, zero_stages_and_too_many_layouts)
{
	rm_scenario_resolved res;
	resolve_text("model: llama-3-8b\ncluster: {gpus_per_node: 8, nodes: 2}\ntraining: {seq_len: 8192}\n", &res);
	char out[65][256];
	rm_plan_request req = rm_plan_request_default();
	req.n_tp = req.n_pp = 1;
	req.tp[0] = req.pp[0] = 1;
	req.n_zero = 2;
	req.zero[0] = 1;
	req.zero[1] = 3;
	/* tp 1, pp 1 on 16 GPUs: FSDP 16, and HSDP 8 x 2 under ZeRO-1 and ZeRO-3 */
	int n = rm_plan_layouts(&res, 16, 8, &req, out, 65);
	cr_assert_eq(n, 3);
	cr_assert(strstr(out[1], "parallelism.dp_replicate=2 parallelism.zero=1"), "%s", out[1]);
	cr_assert_null(strstr(out[2], "parallelism.zero="), "%s", out[2]);
	rm_scenario_resolved_finish(&res);

	rm_plan_request big = small_request();
	snprintf(big.model, sizeof(big.model), "llama-3-70b");
	big.n_tp = big.n_pp = 0;
	big.gpus[0] = 1024;
	big.n_pp_schedules = 5;
	const char *sch[] = {"1f1b", "interleaved", "gpipe", "zero_bubble", "zbv"};
	for (int i = 0; i < 5; i++)
		snprintf(big.pp_schedules[i], sizeof(big.pp_schedules[0]), "%s", sch[i]);
	big.async_tp = true;
	rm_plan_result r;
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_plan_run(&big, NULL, NULL, &r, &err), RM_RANGE);
	cr_assert(strstr(err.msg, "more than 64 layouts to try: narrow --tp, --pp"), "%s", err.msg);
	rm_plan_result_finish(&r);
}

/* A --global-batch range whose top is near INT64_MAX is refused as too many batches to try; the
 * doublings up to it once wrapped around and never ended. */
Test(plan, a_huge_global_batch_range_is_refused, .timeout = 60)
{
	rm_plan_request req = small_request(); /* 2 layouts x 57 batches from 64 = 2^6 to 2^62 */
	req.global_batch_max = INT64_MAX;
	rm_plan_result res;
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_plan_run(&req, NULL, NULL, &res, &err), RM_RANGE, "%s", err.msg);
	cr_assert(strstr(err.msg, "narrow the range"), "%s", err.msg);
	rm_plan_result_finish(&res);
}
