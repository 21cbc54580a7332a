/* `remora run-program FILE [--hardware NAME] [--queues N] [--json] [--trace OUT] [--breakdown]`. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "remora/calib.h"
#include "remora/hw.h"
#include "remora/program.h"
#include "remora/sim.h"

static void run_program_usage(FILE *out)
{
	fprintf(out,
		"usage: remora run-program FILE [--hardware NAME] [--queues N] [--json] [--trace OUT]\n"
		"                           [--breakdown]\n\n"
		"Simulates a schedule program (JSON, schema remora.program/1; see docs/sim.md) and\n"
		"prints step time, memory peak and communication overlap.\n\n"
		"options:\n"
		"  -H, --hardware NAME  hardware profile (default: the program's runtime.hardware, else h100-sxm)\n"
		"  -Q, --queues N       hardware queues, CUDA_DEVICE_MAX_CONNECTIONS (default 8)\n"
		"  -j, --json           the result as JSON (schema remora.result/1)\n"
		"  -t, --trace OUT      write a Chrome JSON trace (open in ui.perfetto.dev)\n"
		"  -b, --breakdown      time by kernel class with roofline bounds, memory by role at\n"
		"                       the peak (docs/sim.md \"Breakdown\")\n"
		"  -h, --help           this help\n");
}

static void print_text(const rm_sim *sim)
{
	const rm_sim_metrics *m = rm_sim_get_metrics(sim);
	const rm_program *prog = rm_sim_program(sim);
	char b1[32], b2[32];
	printf("program            %s (%d ops, %d streams) on %s\n", prog->name, prog->n_ops,
	       prog->n_streams, rm_sim_hw(sim)->name);
	printf("step time          %.3f ms\n", rm_time_to_s(m->step_time) * 1e3);
	printf("lower bound        %.3f ms\n", rm_time_to_s(m->lower_bound) * 1e3);
	if (prog->tokens > 0)
		printf("tokens/s per GPU   %.1f\n", m->tokens_per_s);
	printf("MFU                %.1f%%\n", m->mfu * 100);
	char b3[32], b4[32];
	printf("peak memory        %s of %s usable (%s HBM less %s: CUDA context, NCCL buffers, workspace) (%s)\n",
	       rm_format_bytes(m->peak_memory_bytes, b1, sizeof(b1)),
	       rm_format_bytes(m->memory_usable_bytes, b2, sizeof(b2)),
	       rm_format_bytes(m->memory_capacity_bytes, b3, sizeof(b3)),
	       rm_format_bytes(m->memory_capacity_bytes - m->memory_usable_bytes, b4, sizeof(b4)),
	       m->fits ? "fits" : "DOES NOT FIT");
	if (m->num_ooms > 0 && m->peak_reserved_bytes > 0 && m->peak_reserved_bytes < m->peak_memory_bytes)
		printf("WARNING            the live buffers pass the allocator's pool of %s (runtime.alloc_fraction of HBM):\n"
		       "                   XLA fails with RESOURCE_EXHAUSTED\n",
		       rm_format_bytes(m->peak_reserved_bytes, b3, sizeof(b3)));
	if (m->mfu > 1.0)
		printf("WARNING            MFU above 100%%: the program's model_flops (%.3g) exceed what the step can "
		       "execute at the BF16 peak; check model_flops\n",
		       m->model_flops);
	if (m->first_oom_op >= 0)
		printf("first op over      %s\n", prog->ops[m->first_oom_op].name);
	printf("compute busy       %.3f ms\n", rm_time_to_s(m->compute_busy) * 1e3);
	printf("communication      %.3f ms total, %.3f ms exposed\n",
	       rm_time_to_s(m->comm_total) * 1e3, rm_time_to_s(m->exposed_comm) * 1e3);
	printf("recompute          %.3f ms\n", rm_time_to_s(m->recompute) * 1e3);
	printf("collectives        %d (%d async, %d sync)\n", m->collectives,
	       m->collectives - m->sync_collectives, m->sync_collectives);
	for (int32_t s = 0; s < prog->n_streams; s++)
		printf("stream %-11s %.3f ms busy\n", prog->streams[s].name,
		       rm_time_to_s(rm_sim_stream_busy(sim, s)) * 1e3);
}

int cli_cmd_run_program(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"hardware", required_argument, NULL, 'H'},
		{"queues", required_argument, NULL, 'Q'},
		{"json", no_argument, NULL, 'j'},
		{"trace", required_argument, NULL, 't'},
		{"help", no_argument, NULL, 'h'},
		{"breakdown", no_argument, NULL, 'b'},
		{0, 0, 0, 0},
	};
	const char *hw_name = NULL, *trace = NULL;
	bool json = false, breakdown = false;
	int64_t queues = 8;
	bool queues_given = false;
	int c;
	const char *shortopts = "H:Q:jt:bh";
	while ((c = cli_getopt(argc, argv, shortopts, longopts)) != -1) {
		switch (c) {
		case 'H':
			hw_name = optarg;
			break;
		case 'Q':
			if (!cli_parse_positive("run-program", "--queues", optarg, &queues))
				return CLI_EXIT_USAGE;
			queues_given = true;
			if (queues > 128)
				return cli_usage_error("run-program", "--queues: at most 128");
			break;
		case 'j':
			json = true;
			break;
		case 't':
			trace = optarg;
			break;
		case 'b':
			breakdown = true;
			break;
		case 'h':
			run_program_usage(stdout);
			return CLI_EXIT_OK;
		default:
			return cli_option_error("run-program", argc, argv, shortopts, longopts);
		}
	}
	if (optind >= argc)
		return cli_usage_error("run-program", "missing the program FILE");
	if (optind + 1 != argc)
		return cli_usage_error("run-program", "unexpected argument '%s'", argv[optind + 1]);
	const char *path = argv[optind];
	{
		const char *outs[] = {trace};
		const char *ins[] = {path};
		int crc = cli_check_outputs("run-program", outs, 1, ins, 1);
		if (crc != CLI_EXIT_OK)
			return crc;
	}

	rm_error err;
	rm_error_clear(&err);
	rm_program *prog = rm_program_load(path, &err);
	if (!prog)
		return cli_fail(&err);
	/* the hardware and kernels the program was scheduled for (its "runtime"), unless given */
	const rm_program_runtime *prt = &prog->runtime;
	bool hw_from_program = !hw_name && prt->set && prt->hardware[0];
	if (!hw_name)
		hw_name = hw_from_program ? prt->hardware : "h100-sxm";
	rm_hw_profile resolved;
	static rm_nccl_model nccl;
	static rm_cost_nccl cost;
	if (rm_calib_resolve_hw(hw_name, NULL, &resolved, &nccl, &err) != RM_OK) {
		if (hw_from_program)
			rm_error_prefix(&err, "%s: runtime.hardware: ", path);
		rm_program_destroy(prog);
		return cli_fail(&err);
	}
	rm_cost_nccl_init(&cost, &nccl);
	if (prt->set) {
		cost.kernels = prt->kernels;
		/* the power limit and HBM size belong to the hardware the program was scheduled for;
		 * --hardware names another GPU with its own */
		if (hw_from_program && prt->power_w > 0) {
			if (prt->power_w > resolved.tdp_W) {
				rm_error_set(&err, RM_RANGE, path, 0, 0, "runtime.power_w: %g W is above the %g W TDP of %s",
					     prt->power_w, resolved.tdp_W, resolved.name);
				rm_program_destroy(prog);
				return cli_fail(&err);
			}
			rm_hw_profile_set(&resolved, RM_HW_power_W, prt->power_w, "the program's runtime.power_w");
		}
		if (hw_from_program && prt->hbm_bytes > 0)
			rm_hw_profile_set(&resolved, RM_HW_hbm_bytes, prt->hbm_bytes, "the program's runtime.hbm_bytes");
		if (!queues_given && prt->hw_queues > 0)
			queues = prt->hw_queues;
	}
	const rm_hw_profile *hw = &resolved;
	int rc = CLI_EXIT_FAIL;
	/* what HBM the program cannot use: the budget of its largest collective group (one
	 * communicator's NCCL buffers, the context, a cuBLASLt workspace; remora/hw.h) */
	int ranks = 1, nodes = 1;
	for (int32_t i = 0; i < prog->n_ops; i++)
		if (prog->ops[i].cost.kind == RM_COST_COLLECTIVE && prog->ops[i].cost.collective.group_size > ranks) {
			ranks = prog->ops[i].cost.collective.group_size;
			nodes = prog->ops[i].cost.collective.span > 0 ? prog->ops[i].cost.collective.span : 1;
		}
	rm_memory_budget budget = rm_memory_budget_default(hw, ranks, nodes);
	rm_sim_allocator alloc = RM_SIM_ALLOC_EXACT;
	if (prt->set && prt->allocator[0] && !rm_sim_allocator_from_name(prt->allocator, &alloc)) {
		rm_error_set(&err, RM_INVALID, path, 0, 0, "runtime.allocator: unknown allocator '%s'", prt->allocator);
		rm_program_destroy(prog);
		return cli_fail(&err);
	}
	rm_sim_options opt = {.allocator = alloc,
			      .alloc_fraction = prt->set ? prt->alloc_fraction : 0,
			      .hw_queues = (int)queues,
			      .memory_timeline = trace != NULL,
			      .cost = &cost.base,
			      .memory_headroom_bytes = budget.headroom_bytes};
	rm_sim *sim = rm_sim_create(prog, hw, &opt, &err);
	if (!sim) {
		snprintf(err.file, sizeof(err.file), "%s", path);
		rc = cli_fail(&err);
		goto out_program;
	}
	if (rm_sim_run(sim, &err) != RM_OK) {
		snprintf(err.file, sizeof(err.file), "%s", path);
		rc = cli_fail(&err);
		goto out_sim;
	}
	/* atomically onto a regular file, straight through to a device or FIFO (remora/file.h) */
	if (trace && !rm_sim_write_trace_file(sim, trace, &err)) {
		rc = cli_fail(&err);
		goto out_sim;
	}
	rm_breakdown bd;
	if (breakdown && rm_sim_breakdown(sim, &budget, &bd, &err) != RM_OK) {
		rc = cli_fail(&err);
		goto out_sim;
	}
	if (json) {
		json_t *doc = rm_sim_result_json(sim);
		if (breakdown)
			json_object_set_new(doc, "breakdown", rm_breakdown_json(&bd));
		rc = cli_print_json(doc);
	} else {
		print_text(sim);
		if (breakdown)
			cli_print_breakdown(&bd);
		rc = CLI_EXIT_OK;
	}
out_sim:
	rm_sim_destroy(sim);
out_program:
	rm_program_destroy(prog);
	return rc;
}
