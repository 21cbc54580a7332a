/*
 * `remora schedule SCENARIO [--set KEY=VALUE]... [-o program.json]` writes the schedule program
 * XLA would run; `remora simulate SCENARIO [--set KEY=VALUE]... [--json] [--trace OUT]` runs it
 * and prints the result (docs/design.md contract 3). `remora schedule --from-hlo FILE [SCENARIO]`
 * lowers XLA's own scheduled HLO instead (cli/cmd_hlo.c, docs/hlo.md).
 */
/* realpath (XSI) */
#define _XOPEN_SOURCE 700
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "remora/calib.h"
#include "remora/file.h"
#include "remora/json.h"
#include "remora/pipeline.h"
#include "remora/scenario.h"
#include "remora/schedule.h"
#include "remora/sim.h"

static void simulate_usage(FILE *out, const char *cmd)
{
	bool sim = strcmp(cmd, "simulate") == 0;
	fprintf(out,
		"usage: remora %s SCENARIO [--set KEY=VALUE]... %s\n%s\n"
		"%s\n\n"
		"options:\n"
		"  -s, --set KEY=VALUE   override a scenario key, e.g. --set training.micro_batch=4,\n"
		"                        --set remat.names=[dot_mlp_out], --set xla_flags='--xla_...'\n",
		cmd, sim ? "[--json] [--trace OUT] [--breakdown]" : "[-o PROGRAM.json]",
		sim ? "" : "       remora schedule [SCENARIO] --from-hlo FILE [-o PROGRAM.json] [--hardware NAME]\n",
		sim ? "Builds the step's schedule as XLA would and simulates it: step time, tokens/s per GPU,\n"
		      "MFU, peak memory against capacity, exposed communication, and every collective that\n"
		      "runs synchronously on the compute stream with its reason."
		    : "Writes the schedule program of one training step as XLA would run it (streams, tensors,\n"
		      "events, ops), for `remora run-program` or `remora exec`. With --from-hlo, the program is\n"
		      "the one XLA itself scheduled (its *.after_optimizations.txt HLO dump), with a summary on\n"
		      "stderr: ops by kind and the collectives XLA made synchronous; given a SCENARIO as well,\n"
		      "next to the ones remora's scheduler makes synchronous for it (docs/hlo.md).");
	if (sim)
		fprintf(out, "  -j, --json            the result as JSON (schema remora.result/1)\n"
			     "  -t, --trace OUT       write a Perfetto/Chrome trace of the step to OUT\n"
			     "  -b, --breakdown       time by kernel class (summing to the step time) with roofline\n"
			     "                        bounds, and memory by tensor role at the peak (docs/sim.md)\n");
	else
		fprintf(out, "  -o, --output FILE     write the program there (default: stdout)\n"
			     "  -F, --from-hlo FILE   lower XLA's scheduled HLO text (--xla_dump_hlo_as_text) instead\n"
			     "  -H, --hardware NAME   with --from-hlo: the program's runtime.hardware (default h100-sxm)\n");
	fprintf(out, "  -h, --help            this help\n\nScenario keys: see docs/scenarios.md.\n");
}

/* The peak against usable memory, what the headroom is made of, and a warning when the margin
 * is thinner than allocator slack usually is (docs/reference/kernels-h100.md section 6). */
static void print_memory(const rm_sim_metrics *m, const rm_memory_budget *b, const rm_sim_options *opt)
{
	char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32];
	if (opt->allocator == RM_SIM_ALLOC_JAX_PREALLOC) {
		printf("  peak memory        %s of the %s BFC pool (%s of HBM usable)  %s\n",
		       rm_format_bytes(m->peak_memory_bytes, b1, sizeof(b1)), rm_format_bytes(m->peak_reserved_bytes, b2, sizeof(b2)),
		       rm_format_bytes(m->memory_usable_bytes, b3, sizeof(b3)), m->fits ? "fits" : "DOES NOT FIT");
		if (m->peak_reserved_bytes > m->memory_usable_bytes)
			printf("  WARNING            the BFC pool is larger than the usable HBM: xla.mem_fraction leaves no room\n"
			       "                     for the CUDA context and NCCL's buffers\n");
	} else
		printf("  peak memory        %s of %s usable  %s\n", rm_format_bytes(m->peak_memory_bytes, b1, sizeof(b1)),
		       rm_format_bytes(m->memory_usable_bytes, b2, sizeof(b2)), m->fits ? "fits" : "DOES NOT FIT");
	printf("  peak reserved      %s (%s", rm_format_bytes(m->peak_reserved_bytes, b1, sizeof(b1)),
	       rm_sim_allocator_describe(opt->allocator));
	if (opt->allocator == RM_SIM_ALLOC_JAX_PREALLOC)
		printf(" %.0f%% of HBM", 100.0 * (opt->alloc_fraction > 0 ? opt->alloc_fraction : RM_SIM_JAX_MEM_FRACTION));
	if (m->num_alloc_retries)
		printf(", %lld cudaMalloc retries", (long long)m->num_alloc_retries);
	printf(")\n");
	if (m->num_ooms && opt->allocator == RM_SIM_ALLOC_JAX_PREALLOC)
		printf("  WARNING            the live buffers pass the BFC pool (%s): XLA fails with\n"
		       "                     RESOURCE_EXHAUSTED, however much HBM is left; raise xla.mem_fraction\n"
		       "                     (XLA_PYTHON_CLIENT_MEM_FRACTION) or use less memory\n",
		       rm_format_bytes(m->peak_reserved_bytes, b3, sizeof(b3)));
	else if (m->num_ooms)
		printf("  WARNING            %lld allocations fail even after the cache is freed: PyTorch raises\n"
		       "                     OutOfMemoryError (so the plan does not fit, whatever the live tensors add\n"
		       "                     up to); the reserved peak above is the replay's, past the limit\n",
		       (long long)m->num_ooms);
	if (b->headroom_set)
		printf("  not usable         %s of %s HBM (memory_headroom_gib)\n",
		       rm_format_bytes(b->headroom_bytes, b3, sizeof(b3)), rm_format_bytes(b->hbm_bytes, b4, sizeof(b4)));
	else
		printf("  not usable         %s of %s HBM: CUDA context %s, NCCL buffers %s, cuBLASLt workspace %s\n",
		       rm_format_bytes(b->headroom_bytes, b3, sizeof(b3)), rm_format_bytes(b->hbm_bytes, b4, sizeof(b4)),
		       rm_format_bytes(b->cuda_context_bytes, b5, sizeof(b5)),
		       rm_format_bytes(b->nccl_buffer_bytes, b6, sizeof(b6)),
		       rm_format_bytes(b->cublas_workspace_bytes, b1, sizeof(b1)));
	if (m->fits && rm_memory_budget_tight(m->peak_memory_bytes, m->memory_usable_bytes))
		printf("  WARNING            the peak is within %s of usable memory: allocator fragmentation\n"
		       "                     (reserved beyond allocated) can take more; keep a margin before\n"
		       "                     running this plan\n",
		       rm_format_bytes(m->memory_usable_bytes - m->peak_memory_bytes, b1, sizeof(b1)));
}

/* The step breakdown (rm_sim_breakdown): one row per class, then memory at the peak by role. */
void cli_print_breakdown(const rm_breakdown *bd)
{
	char b1[32];
	double step_ms = rm_time_to_s(bd->step_time) * 1e3;
	printf("\n  time by class       wall ms   share    busy ms    solo ms  roofline ms  achieved\n");
	for (int c = 0; c < RM_BD_COUNT; c++) {
		const rm_breakdown_time *t = &bd->time[c];
		double v;
		const char *unit;
		printf("    %-14s %10.3f  %5.1f%%", rm_breakdown_class_name((rm_breakdown_class)c),
		       rm_time_to_s(t->wall) * 1e3, step_ms > 0 ? 100.0 * rm_time_to_s(t->wall) * 1e3 / step_ms : 0.0);
		if (c == RM_BD_IDLE) {
			printf("\n");
			continue;
		}
		printf(" %10.3f %10.3f %12.3f", rm_time_to_s(t->busy) * 1e3, rm_time_to_s(t->solo) * 1e3, t->roofline_s * 1e3);
		if (rm_breakdown_achieved(bd, (rm_breakdown_class)c, &v, &unit))
			printf("  %.1f %s", v, unit);
		printf("\n");
	}
	printf("    %-14s %10.3f  100.0%%\n", "step", step_ms);
	printf("  memory at the peak  t = %.3f ms\n", rm_time_to_s(bd->peak_time) * 1e3);
	for (int r = 0; r < RM_ROLE_COUNT; r++)
		if (bd->role_bytes[r])
			printf("    %-18s %s\n", rm_tensor_role_name((rm_tensor_role)r), rm_format_bytes(bd->role_bytes[r], b1, sizeof(b1)));
	printf("    %-18s %s\n", "tensors", rm_format_bytes(bd->peak_tensor_bytes, b1, sizeof(b1)));
	if (bd->has_budget && bd->budget.headroom_set) {
		printf("    %-18s %s\n", "headroom (set)", rm_format_bytes(bd->budget.headroom_bytes, b1, sizeof(b1)));
	} else if (bd->has_budget) {
		printf("    %-18s %s\n", "CUDA context", rm_format_bytes(bd->budget.cuda_context_bytes, b1, sizeof(b1)));
		printf("    %-18s %s\n", "NCCL buffers", rm_format_bytes(bd->budget.nccl_buffer_bytes, b1, sizeof(b1)));
		printf("    %-18s %s\n", "cuBLASLt workspace", rm_format_bytes(bd->budget.cublas_workspace_bytes, b1, sizeof(b1)));
	}
	printf("    %-18s %s\n", "total", rm_format_bytes(bd->peak_total_bytes, b1, sizeof(b1)));
}

/*
 * What to change when a step does not fit, computed from the memory at the peak (bd, by tensor
 * role): the largest roles, then each change's estimated peak, the smallest change that fits
 * first per kind. Estimates, first order: activations and saved residuals scale with the
 * micro-batch (they are per-sequence tensors); FSDP shards the parameter shards, gradients and
 * optimizer state over parallelism.fsdp (x2 per step, same global batch assumed); offloading or
 * not saving the residuals takes at most what they hold. capacity: the bytes the step must fit.
 */
/* One change that would fit, printed as "    WHAT  about EST (WHY)" or appended to arr: change (the
 * --set options to paste, or what to do), estimate_bytes (-1: none), note. */
static void hint_change(json_t *arr, const char *change, int pad, int64_t est, const char *why)
{
	char b[32];
	if (!arr) {
		if (est >= 0)
			printf("    %-*s about %s (%s)\n", pad, change, rm_format_bytes(est, b, sizeof(b)), why);
		else
			printf("    %-*s %s\n", pad, change, why);
		return;
	}
	json_t *o = json_object();
	json_object_set_new(o, "change", json_string(change));
	if (est >= 0)
		json_object_set_new(o, "estimate_bytes", json_integer(est));
	json_object_set_new(o, "note", json_string(why));
	json_array_append_new(arr, o);
}

void cli_print_fit_hint(const rm_breakdown *bd, int64_t peak, int64_t capacity, const rm_train_config *t,
			int64_t gpus, int64_t gpus_per_node, const char (*saved)[48], int n_saved, bool search,
			json_t *out)
{
	char b1[32], b2[32], b3[32], what[1200], why[400];
	int64_t over = peak - capacity;
	if (over <= 0)
		return;
	/* the three largest roles at the peak */
	int order[RM_ROLE_COUNT], n = 0;
	for (int r = 0; r < RM_ROLE_COUNT; r++)
		if (bd->role_bytes[r] > 0)
			order[n++] = r;
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && bd->role_bytes[order[j]] > bd->role_bytes[order[j - 1]]; j--) {
			int x = order[j];
			order[j] = order[j - 1];
			order[j - 1] = x;
		}
	json_t *changes = NULL;
	if (out) {
		json_object_set_new(out, "over_bytes", json_integer(over));
		json_object_set_new(out, "peak_time_s", json_real(rm_time_to_s(bd->peak_time)));
		json_t *roles = json_array();
		for (int i = 0; i < n && i < 3; i++) {
			json_t *o = json_object();
			json_object_set_new(o, "role", json_string(rm_tensor_role_name((rm_tensor_role)order[i])));
			json_object_set_new(o, "bytes", json_integer(bd->role_bytes[order[i]]));
			json_array_append_new(roles, o);
		}
		json_object_set_new(out, "at_peak", roles);
		changes = json_array();
		json_object_set_new(out, "would_fit", changes);
	} else {
		printf("  over by            %s; at the peak (t = %.3f ms):", rm_format_bytes(over, b1, sizeof(b1)),
		       rm_time_to_s(bd->peak_time) * 1e3);
		for (int i = 0; i < n && i < 3; i++)
			printf("%s %s %s", i ? "," : "", rm_tensor_role_name((rm_tensor_role)order[i]),
			       rm_format_bytes(bd->role_bytes[order[i]], b2, sizeof(b2)));
		printf(" (--breakdown)\n");
		printf("  would fit (estimates, first order; paste a line's --set options to check it):\n");
	}
	int64_t act = bd->role_bytes[RM_ROLE_ACTIVATION], res = bd->role_bytes[RM_ROLE_RESIDUAL];
	int64_t state = bd->role_bytes[RM_ROLE_PARAM_SHARD] + bd->role_bytes[RM_ROLE_GRADIENT] +
			bd->role_bytes[RM_ROLE_OPTIMIZER_STATE];
	bool any = false;
	int64_t mb = t->micro_batch > 0 ? t->micro_batch : 1;
	for (int64_t m = mb - 1; m >= 1 && act + res > 0; m--) {
		int64_t est = peak - (int64_t)((double)(act + res) * (double)(mb - m) / (double)mb);
		if (est <= capacity) {
			snprintf(what, sizeof(what), search ? "--set search.micro_batches=[%lld]" : "--set training.micro_batch=%lld",
				 (long long)m);
			snprintf(why, sizeof(why), "activations and saved residuals, %s, scale with it",
				 rm_format_bytes(act + res, b2, sizeof(b2)));
			hint_change(changes, what, (int)strlen(what) + 2, est, why);
			any = true;
			break;
		}
	}
	if (res >= over) {
		snprintf(why, sizeof(why),
			 "the saved residuals hold %s: saving %s less fits (remat.names, or\n"
			 "%23snothing_saveable, which keeps only the layer inputs)",
			 rm_format_bytes(res, b1, sizeof(b1)), rm_format_bytes(over, b2, sizeof(b2)), "");
		if (changes)
			snprintf(why, sizeof(why),
				 "the saved residuals hold %s: saving %s less fits (remat.names, or nothing_saveable, "
				 "which keeps only the layer inputs)",
				 rm_format_bytes(res, b1, sizeof(b1)), rm_format_bytes(over, b2, sizeof(b2)));
		hint_change(changes, "save fewer names", 18, -1, why);
		if (n_saved > 0 && !search) {
			/* the saved names offloaded instead: --set remat.names=[] --set remat.offload_names=[...] */
			int len = snprintf(what, sizeof(what), "--set remat.policy=save_and_offload_only_these_names --set remat.names=[] --set remat.offload_names=[");
			for (int i = 0; i < n_saved && len > 0 && (size_t)len < sizeof(what); i++)
				len += snprintf(what + len, sizeof(what) - (size_t)len, "%s%s", i ? "," : "", saved[i]);
			if (len > 0 && (size_t)len < sizeof(what) - 1) {
				what[len++] = ']';
				what[len] = '\0';
				snprintf(why, sizeof(why), "the saved names to host memory instead: "
							  "up to %s off the device",
					 rm_format_bytes(res, b1, sizeof(b1)));
				hint_change(changes, what, (int)strlen(what) + 2, -1, why);
			}
		} else if (search) {
			snprintf(why, sizeof(why), "the search's space: search.offload (the saved names moved to host memory, "
						  "up to %s)",
				 rm_format_bytes(res, b1, sizeof(b1)));
			hint_change(changes, "offload them", 18, -1, why);
		}
		any = true;
	}
	for (int64_t k = 2; k <= 64 && state > 0 && t->fsdp >= 1; k *= 2) {
		int64_t est = peak - state + state / k;
		if (est <= capacity) {
			/* k x the GPUs: k x the nodes (a cluster is whole nodes, gpus = gpus_per_node x nodes) */
			int64_t gpn = gpus_per_node > 0 ? gpus_per_node : gpus;
			snprintf(what, sizeof(what), "--set parallelism.fsdp=%lld --set cluster.nodes=%lld",
				 (long long)(t->fsdp * k), (long long)(gpus / (gpn > 0 ? gpn : 1) * k));
			snprintf(why, sizeof(why), "%lld x the GPUs: the sharded state, %s, becomes %s", (long long)k,
				 rm_format_bytes(state, b2, sizeof(b2)), rm_format_bytes(state / k, b3, sizeof(b3)));
			hint_change(changes, what, (int)strlen(what) + 2, est, why);
			any = true;
			break;
		}
	}
	if (!any)
		hint_change(changes, changes ? "no single change" : "no single change:", 0, -1, "combine a smaller micro-batch, fewer saved names and more GPUs");
}

/* At -v: the inputs the run resolved, each with where it came from (stderr; the output is the
 * same without it): the hardware profile's figures and sources, the memory budget's terms, and
 * XLA's scheduler memory limit with its terms. */
static void log_resolved(const rm_scenario_resolved *res, const rm_schedule_report *rep, const rm_program *prog)
{
	if (rm_log_get_level() < RM_LOG_INFO)
		return;
	char b1[32], b2[32], b3[32], b4[32];
	for (int f = 0; f < RM_HW_FIELD_COUNT; f++) {
		const rm_hw_field_info *info = rm_hw_field_info_at((rm_hw_field)f);
		double v = rm_hw_profile_get(&res->hw, (rm_hw_field)f);
		const char *src = res->hw.source[f] ? res->hw.source[f] : "no source";
		/* bytes in binary units with the exact count beside them, as `hw show` prints them */
		if (strcmp(info->unit, "B") == 0 && v >= 0 && v < 9e18)
			rm_log_info("hardware %s: %s = %s (%.0f B) (%s)", res->hw.name, info->key,
				    rm_format_bytes((int64_t)v, b1, sizeof(b1)), v, src);
		else
			rm_log_info("hardware %s: %s = %.6g %s (%s)", res->hw.name, info->key, v, info->unit, src);
	}
	const rm_memory_budget *m = &res->memory;
	rm_log_info("memory budget: %s usable = %s HBM - %s headroom (%s)", rm_format_bytes(m->usable_bytes, b1, sizeof(b1)),
		    rm_format_bytes(m->hbm_bytes, b2, sizeof(b2)), rm_format_bytes(m->headroom_bytes, b3, sizeof(b3)),
		    m->headroom_set ? "set" : "CUDA context + NCCL buffers + cuBLASLt workspace");
	if (!m->headroom_set)
		rm_log_info("memory budget: headroom = %s CUDA context + %s NCCL buffers + %s cuBLASLt workspace",
			    rm_format_bytes(m->cuda_context_bytes, b1, sizeof(b1)),
			    rm_format_bytes(m->nccl_buffer_bytes, b2, sizeof(b2)),
			    rm_format_bytes(m->cublas_workspace_bytes, b3, sizeof(b3)));
	if (res->sched.mode == RM_SCHED_XLA)
		rm_log_info("XLA memory limit: %s = (%s device memory - %s parameters and outputs) x slop %d%%",
			    rm_format_bytes(rep->memory_limit_bytes, b1, sizeof(b1)),
			    rm_format_bytes(rep->memory_base_bytes, b2, sizeof(b2)),
			    rm_format_bytes(rep->io_bytes, b3, sizeof(b3)), res->flags.memory_limit_slop_factor);
	rm_log_info("schedule: %d collectives, %d async; LHS-tracked peak %s", rep->collectives, rep->async,
		    rm_format_bytes(rep->tracked_peak_bytes, b4, sizeof(b4)));
	/* NCCL's choice per collective shape, in the order the program first has it (the groups'
	 * nodes as the cost model reads them: span, or as many nodes as the group needs); one pass,
	 * at most 64 shapes (a step has a handful), the rest counted */
	enum { MAX_SHAPES = 64 };
	rm_collective_cost shape[MAX_SHAPES];
	int count[MAX_SHAPES], n_shapes = 0, more = 0;
	for (int i = 0; i < prog->n_ops; i++) {
		const rm_cost_op *op = &prog->ops[i].cost;
		if (op->kind != RM_COST_COLLECTIVE || op->collective.group_size <= 1 || op->collective.bytes <= 0)
			continue;
		const rm_collective_cost *c = &op->collective;
		int k = 0;
		while (k < n_shapes && !(shape[k].op == c->op && shape[k].bytes == c->bytes &&
					 shape[k].group_size == c->group_size && shape[k].span == c->span))
			k++;
		if (k == n_shapes && n_shapes == MAX_SHAPES) {
			more++;
			continue;
		}
		if (k == n_shapes) {
			shape[n_shapes] = *c;
			count[n_shapes++] = 0;
		}
		count[k]++;
	}
	for (int k = 0; k < n_shapes; k++) {
		const rm_collective_cost *c = &shape[k];
		rm_coll_query q = rm_cost_collective_query(c, &res->hw);
		rm_coll_estimate e;
		if (rm_nccl_estimate(&res->cost.nccl, &q, &e, NULL) != RM_OK)
			continue;
		rm_log_info("NCCL %s: %s %s over %d GPUs on %d node(s), x%d: %s %s, %d channels, %.2f us, busBW %.2f GB/s",
			    rm_nccl_model_version(&res->cost.nccl), rm_coll_name(c->op), rm_format_bytes(c->bytes, b1, sizeof(b1)),
			    c->group_size, q.nodes, count[k], rm_nccl_algo_name(e.algo), rm_nccl_proto_name(e.proto), e.channels,
			    e.time_us, e.busbw_GBps);
	}
	if (more)
		rm_log_info("NCCL: %d more collectives of other shapes", more);
}

int cli_check_sets(const char *cmd, char *const *sets, int n_sets)
{
	rm_scenario *scratch = rm_new(rm_scenario, 1);
	int rc = CLI_EXIT_OK;
	for (int i = 0; i < n_sets && rc == CLI_EXIT_OK; i++) {
		rm_error err;
		rm_error_clear(&err);
		rm_scenario_init(scratch);
		rm_status st = rm_scenario_set(scratch, sets[i], &err);
		if (st == RM_USAGE || st == RM_UNKNOWN_KEY)
			rc = cli_usage_error(cmd, "%s", err.msg);
	}
	free(scratch);
	return rc;
}

static bool program_fn(FILE *out, void *user, rm_error *err)
{
	return rm_program_write(user, out, err);
}

/* The scenario's hardware spec for a program file: a calibration database as an absolute path
 * (the scenario resolves it against its own folder; a program may be run from anywhere). */
static void runtime_hardware(const rm_scenario *sc, char *buf, size_t size)
{
	char spec[1100], real[PATH_MAX];
	rm_scenario_hardware_spec(sc, spec, sizeof(spec));
	snprintf(buf, size, "%s", spec);
	char *colon = strrchr(spec, ':');
	if (!colon || colon == spec || spec[0] == '/')
		return;
	*colon = '\0';
	if (realpath(spec, real))
		snprintf(buf, size, "%s:%s", real, colon + 1);
}

int cli_load_scenario(const char *cmd, const char *path, char **sets, int n_sets, rm_scenario *sc,
		      rm_scenario_resolved *res)
{
	rm_error err;
	rm_error_clear(&err);
	int rc = cli_check_sets(cmd, sets, n_sets);
	if (rc != CLI_EXIT_OK)
		return rc;
	rm_scenario_init(sc);
	if (rm_scenario_load(path, sc, &err) != RM_OK)
		return cli_fail(&err);
	for (int i = 0; i < n_sets; i++)
		if (rm_scenario_set(sc, sets[i], &err) != RM_OK)
			return err.status == RM_USAGE || err.status == RM_UNKNOWN_KEY ? cli_usage_error(cmd, "%s", err.msg) : cli_fail(&err);
	if (rm_scenario_resolve(sc, rm_calib_hw_resolver, res, &err) != RM_OK)
		return cli_fail(&err);
	rm_xla_flags_warn_unmodelled(&res->flags);
	return CLI_EXIT_OK;
}

/* A pipelined scenario (parallelism.pp > 1): the engine prices one micro-batch through a stage,
 * the pipeline schedule orders the step (remora/pipeline.h). */
static int simulate_pipeline(const char *cmd, bool sim, const rm_scenario_resolved *res, bool json, bool other_outputs)
{
	if (!sim || other_outputs)
		return cli_usage_error(cmd, "a pipelined scenario (parallelism.pp > 1) is simulated stage by stage: "
					    "`remora simulate` prints and --json writes it (search and validate run it "
					    "too); --trace, --breakdown, -o and `remora schedule` do not apply yet");
	rm_error err;
	rm_error_clear(&err);
	rm_pp_run r;
	if (rm_pp_run_scenario(res, &r, &err) != RM_OK)
		return cli_fail(&err);
	const rm_train_config *t = &res->train;
	if (json) {
		json_t *o = json_object();
		json_object_set_new(o, "schema", json_string("remora.pipeline/1"));
		json_object_set_new(o, "model", rm_json_string(res->model.name));
		json_object_set_new(o, "gpus", json_integer(res->gpus));
		json_object_set_new(o, "tp", json_integer(t->tp));
		json_object_set_new(o, "pp", json_integer(t->pp));
		json_object_set_new(o, "fsdp", json_integer(t->fsdp));
		json_object_set_new(o, "dp_replicate", json_integer(t->dp_replicate));
		json_object_set_new(o, "schedule", json_string(rm_pp_schedule_name(r.schedule)));
		json_object_set_new(o, "virtual_stages", json_integer(r.chunks));
		json_object_set_new(o, "micro_batches", json_integer(r.micro_batches));
		json_object_set_new(o, "step_time_s", json_real(r.step_s));
		json_object_set_new(o, "tokens_per_s_per_gpu", json_real(r.tokens_per_s));
		json_object_set_new(o, "mfu", json_real(r.mfu));
		json_object_set_new(o, "bubble_fraction", json_real(r.sched.bubble_fraction));
		json_object_set_new(o, "p2p_s", json_real(r.p2p_s));
		json_object_set_new(o, "p2p_bytes", json_integer(r.p2p_bytes));
		const rm_pp_stage_cost *kinds[3] = {&r.first, &r.middle, &r.last};
		const char *kn[3] = {"first", "middle", "last"};
		json_t *sc = json_object();
		for (int k = 0; k < 3; k++) {
			json_t *e = json_object();
			json_object_set_new(e, "fwd_s", json_real(kinds[k]->fwd_s));
			json_object_set_new(e, "bwd_s", json_real(kinds[k]->bwd_s));
			json_object_set_new(e, "tail_s", json_real(kinds[k]->tail_s));
			if (r.schedule == RM_PP_ZERO_BUBBLE) {
				const int64_t wb[3] = {r.wgrad_bytes_first, r.wgrad_bytes_middle, r.wgrad_bytes_last};
				json_object_set_new(e, "wgrad_s", json_real(kinds[k]->wgrad_s));
				json_object_set_new(e, "wgrad_bytes", json_integer(wb[k]));
			}
			json_object_set_new(sc, kn[k], e);
		}
		json_object_set_new(o, "stage_costs", sc);
		json_t *st = json_array();
		for (int s = 0; s < r.stages; s++) {
			json_t *e = json_object();
			json_object_set_new(e, "stage", json_integer(s));
			json_object_set_new(e, "in_flight", json_integer(r.sched.in_flight[s]));
			json_object_set_new(e, "peak_memory_bytes", json_integer(r.peak_bytes[s]));
			json_object_set_new(e, "end_s", json_real(r.sched.stage_end_s[s]));
			json_array_append_new(st, e);
		}
		json_object_set_new(o, "stages", st);
		json_object_set_new(o, "usable_bytes", json_integer(r.usable_bytes));
		json_object_set_new(o, "fits", json_boolean(r.fits));
		return cli_print_json(o);
	}
	char b1[32], b2[32], b3[32];
	char extra[96] = "";
	if (t->cp > 1)
		snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra), ", CP %lld", (long long)t->cp);
	if (t->ep > 1)
		snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra), ", EP %lld", (long long)t->ep);
	if (t->zero < 3 && t->dp_replicate > 1)
		snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra), ", ZeRO-%d", t->zero);
	printf("%s on %d x %s, PP %d (%s%s), TP %lld%s%s, FSDP %lld x %lld replicas, seq %lld, micro-batch %lld x %d micro-batches\n",
	       res->model.name, res->gpus, res->hw.name, r.stages, rm_pp_schedule_name(r.schedule),
	       r.chunks > 1 ? ", chunks per stage" : "", (long long)t->tp, t->sp ? " (SP)" : "", extra,
	       (long long)t->fsdp, (long long)t->dp_replicate, (long long)t->seq_len, (long long)t->micro_batch,
	       r.micro_batches);
	if (r.chunks > 1)
		printf("  chunks per stage   %d\n", r.chunks);
	printf("\n  step time          %.3f ms\n", r.step_s * 1e3);
	printf("  tokens/s per GPU   %.0f\n", r.tokens_per_s);
	printf("  MFU                %.1f%%\n", 100.0 * r.mfu);
	printf("  bubble             %.1f%% of %s span\n", 100.0 * r.sched.bubble_fraction,
	       r.schedule == RM_PP_ZERO_BUBBLE && r.chunks == 2 ? "the last stage to end's" : "stage 0's");
	printf("  one micro-batch    first stage %.3f + %.3f ms, middle %.3f + %.3f, last %.3f + %.3f (forward + "
	       "backward); tail %.3f ms\n",
	       r.first.fwd_s * 1e3, r.first.bwd_s * 1e3, r.middle.fwd_s * 1e3, r.middle.bwd_s * 1e3, r.last.fwd_s * 1e3,
	       r.last.bwd_s * 1e3, r.first.tail_s * 1e3);
	if (r.schedule == RM_PP_ZERO_BUBBLE)
		printf("  weight gradients   first stage %.3f ms, middle %.3f, last %.3f of the backward (W, deferred); "
		       "%s held from B to W on a middle stage\n",
		       r.first.wgrad_s * 1e3, r.middle.wgrad_s * 1e3, r.last.wgrad_s * 1e3,
		       rm_format_bytes(r.wgrad_bytes_middle, b1, sizeof(b1)));
	printf("  between stages     %s per transfer, %.3f ms\n", rm_format_bytes(r.p2p_bytes, b1, sizeof(b1)), r.p2p_s * 1e3);
	if (res->train.async_tp)
		printf("  async TP           each stage's all-gathers before projections and reduce-scatters after one "
		       "micro-pipelined: %lld steps of copy-engine peer copies each\n",
		       (long long)res->train.tp);
	printf("  peak memory        %s on stage %d (%d micro-batch chunks of %s in flight) of %s usable  %s\n",
	       rm_format_bytes(r.peak_bytes[r.peak_stage], b1, sizeof(b1)), r.peak_stage, r.sched.in_flight[r.peak_stage],
	       rm_format_bytes(r.act_bytes_per_chunk, b2, sizeof(b2)), rm_format_bytes(r.usable_bytes, b3, sizeof(b3)),
	       r.fits ? "fits" : "DOES NOT FIT");
	if (r.stages > 1)
		printf("  last stage         %s (%d in flight)\n", rm_format_bytes(r.peak_bytes[r.stages - 1], b1, sizeof(b1)),
		       r.sched.in_flight[r.stages - 1]);
	return CLI_EXIT_OK;
}

static json_t *schedule_json(const rm_scenario_resolved *res, const rm_schedule_report *rep)
{
	json_t *o = json_object();
	char buf[4096];
	json_object_set_new(o, "model", rm_json_string(res->model.name));
	json_object_set_new(o, "hardware", rm_json_string(res->hw.name));
	json_object_set_new(o, "gpus", json_integer(res->gpus));
	json_object_set_new(o, "fsdp", json_integer(res->train.fsdp));
	json_object_set_new(o, "tp", json_integer(res->train.tp));
	json_object_set_new(o, "sp", json_boolean(res->train.sp));
	json_object_set_new(o, "cp", json_integer(res->train.cp));
	json_object_set_new(o, "dp_replicate", json_integer(res->train.dp_replicate));
	json_object_set_new(o, "zero", json_integer(res->train.zero));
	json_object_set_new(o, "replica_collectives", json_integer(rep->replica_collectives));
	if (rep->async_tp_collectives)
		json_object_set_new(o, "async_tp_collectives", json_integer(rep->async_tp_collectives));
	json_object_set_new(o, "replica_sync_collectives", json_integer(rep->replica_sync));
	json_object_set_new(o, "seq_len", json_integer(res->train.seq_len));
	json_object_set_new(o, "micro_batch", json_integer(res->train.micro_batch));
	json_object_set_new(o, "grad_accum", json_integer(res->train.grad_accum));
	json_object_set_new(o, "policy", rm_json_string(rm_remat_policy_format(res->policy, buf, sizeof(buf))));
	json_object_set_new(o, "xla_flags", rm_json_string(rm_xla_flags_format(&res->flags, buf, sizeof(buf))));
	if (res->flags.version > 0) {
		/* the JAX release whose XLA defaults the flags go on top of (docs/xla-versions.md) */
		json_object_set_new(o, "xla_version", json_string(rm_xla_version_at(res->flags.version)->name));
		json_object_set_new(o, "latency_hiding_scheduler", json_string(rm_xla_lhs_reason(&res->flags)));
	}
	json_object_set_new(o, "mode", json_string(rm_sched_mode_name(res->sched.mode)));
	json_object_set_new(o, "attention_kernel", json_string(rm_attention_kernel_name(res->cost.kernels.attention)));
	if (res->cost.nccl.fabric.kind != RM_FABRIC_NONE) {
		const rm_fabric *f = &res->cost.nccl.fabric;
		json_t *tiers = json_array();
		for (int i = 0; i < f->n_tiers; i++)
			json_array_append_new(tiers, json_pack("{s:i, s:f, s:f}", "nodes", f->tiers[i].nodes,
								 "oversubscription", f->tiers[i].oversubscription,
								 "latency_us", f->tiers[i].hop_latency_us));
		json_object_set_new(o, "topology", json_pack("{s:s, s:b, s:o}", "kind", rm_fabric_kind_name(f->kind),
							     "pxn", f->pxn, "tiers", tiers));
	}
	json_object_set_new(o, "compile", json_boolean(res->compile));
	json_object_set_new(o, "power_w", json_real(res->hw.power_W));
	json_object_set_new(o, "scan", json_boolean(res->sched.scan));
	json_object_set_new(o, "memory_limit_bytes", json_integer(rep->memory_limit_bytes));
	json_object_set_new(o, "io_bytes", json_integer(rep->io_bytes));
	json_object_set_new(o, "tracked_peak_bytes", json_integer(rep->tracked_peak_bytes));
	json_object_set_new(o, "memory_base_bytes", json_integer(rep->memory_base_bytes));
	json_object_set_new(o, "backward_gathers_fenced", json_boolean(rep->backward_gathers_fenced));
	if (rep->lhs_moved_slots > 0) {
		json_object_set_new(o, "lhs_moved_slots", json_integer(rep->lhs_moved_slots));
		json_object_set_new(o, "lhs_live_recompute_bytes", json_integer(rep->lhs_live_recompute_bytes));
		json_object_set_new(o, "lhs_recompute_layer_bytes", json_integer(rep->lhs_recompute_layer_bytes));
		json_object_set_new(o, "lhs_move_rule", json_string(rep->lhs_move_rule ? rep->lhs_move_rule : "?"));
	}
	if (rep->first_memory_sync_tracked_bytes > 0)
		json_object_set_new(o, "first_memory_sync_tracked_bytes", json_integer(rep->first_memory_sync_tracked_bytes));
	if (rep->remat_applied)
		json_object_set_new(o, "xla_remat",
				    json_pack("{s:I, s:I, s:I, s:i, s:i, s:I, s:f, s:b}", "limit_bytes",
					      (json_int_t)rep->remat_limit_bytes, "peak_before_bytes",
					      (json_int_t)rep->remat_peak_before_bytes, "peak_after_bytes",
					      (json_int_t)rep->remat_peak_after_bytes, "recomputed_ops", rep->remat_ops,
					      "moved_ops", rep->remat_moves, "recomputed_bytes", (json_int_t)rep->remat_bytes,
					      "recomputed_flops", rep->remat_flops, "still_over", rep->remat_over));
	json_object_set_new(o, "saved_bytes_per_layer", json_integer(rep->plan.saved_bytes));
	json_object_set_new(o, "carry_bytes_per_layer", json_integer(rep->plan.carry_bytes));
	json_object_set_new(o, "offloaded_bytes_per_layer", json_integer(rep->plan.offloaded_bytes));
	json_object_set_new(o, "recompute_flops_per_layer", json_real(rep->plan.recompute_flops));
	json_object_set_new(o, "saved_bytes_step", json_integer(rep->saved_bytes_step));
	return o;
}

static int run(const char *cmd, int argc, char **argv)
{
	bool sim = strcmp(cmd, "simulate") == 0;
	static const struct option longopts[] = {
		{"set", required_argument, NULL, 's'},   {"json", no_argument, NULL, 'j'},
		{"trace", required_argument, NULL, 't'}, {"output", required_argument, NULL, 'o'},
		{"help", no_argument, NULL, 'h'},        {"breakdown", no_argument, NULL, 'b'},
		{"from-hlo", required_argument, NULL, 'F'}, {"hardware", required_argument, NULL, 'H'},
		{0, 0, 0, 0},
	};
	char **sets = rm_new(char *, (size_t)argc + 1);
	int n_sets = 0, c, rc = CLI_EXIT_OK;
	bool json = false, breakdown = false;
	const char *trace = NULL, *output = NULL, *from_hlo = NULL, *hardware = NULL;
	const char *shortopts = sim ? "s:jt:bh" : "s:o:F:H:h";
	while ((c = cli_getopt(argc, argv, shortopts, longopts)) != -1) {
		switch (c) {
		case 's':
			sets[n_sets++] = optarg;
			break;
		case 'j':
		case 't':
		case 'b':
			/* the long table is shared: schedule takes none of simulate's outputs */
			if (!sim) {
				free(sets);
				return cli_usage_error(cmd, "--%s is an option of `remora simulate`",
						       c == 'j' ? "json" : c == 't' ? "trace" : "breakdown");
			}
			json |= c == 'j';
			breakdown |= c == 'b';
			if (c == 't')
				trace = optarg;
			break;
		case 'o':
			if (sim) {
				free(sets);
				return cli_usage_error(cmd, "--output is an option of `remora schedule` (simulate writes a "
							    "trace with --trace, its result with --json to stdout)");
			}
			output = optarg;
			break;
		case 'F':
		case 'H':
			if (sim) {
				free(sets);
				return cli_usage_error(cmd, "--%s is an option of `remora schedule`",
						       c == 'F' ? "from-hlo" : "hardware");
			}
			if (c == 'F')
				from_hlo = optarg;
			else
				hardware = optarg;
			break;
		case 'h':
			simulate_usage(stdout, cmd);
			free(sets);
			return CLI_EXIT_OK;
		default:
			free(sets);
			return cli_option_error(cmd, argc, argv, shortopts, longopts);
		}
	}
	if (hardware && !from_hlo) {
		free(sets);
		return cli_usage_error(cmd, "--hardware goes with --from-hlo (a scenario names its hardware)");
	}
	if (from_hlo && optind >= argc) {
		free(sets);
		if (n_sets)
			return cli_usage_error(cmd, "--set applies to a SCENARIO, and --from-hlo was given none");
		const char *outs[] = {output}, *ins[] = {from_hlo};
		rc = cli_check_outputs(cmd, outs, 1, ins, 1);
		return rc != CLI_EXIT_OK ? rc : cli_schedule_from_hlo(cmd, from_hlo, output, hardware, NULL, NULL);
	}
	if (optind >= argc) {
		free(sets);
		return cli_usage_error(cmd, "missing SCENARIO (a YAML file, e.g. data/scenarios/seed-llama2-7b-fsdp8-h100.yaml)");
	}
	if (optind + 1 != argc) {
		free(sets);
		return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind + 1]);
	}
	rm_scenario sc;
	rm_scenario_resolved res;
	rc = cli_load_scenario(cmd, argv[optind], sets, n_sets, &sc, &res);
	free(sets);
	if (rc != CLI_EXIT_OK)
		return rc;
	{
		char model[1100];
		const char *outs[] = {trace, output};
		const char *ins[] = {argv[optind], rm_scenario_model_file(&sc, model, sizeof(model)), from_hlo};
		rc = cli_check_outputs(cmd, outs, 2, ins, 3);
		if (rc != CLI_EXIT_OK) {
			rm_scenario_resolved_finish(&res);
			return rc;
		}
	}
	rm_error err;
	rm_error_clear(&err);
	if (res.train.pp > 1) {
		rc = simulate_pipeline(cmd, sim, &res, json, trace != NULL || breakdown || output != NULL);
		rm_scenario_resolved_finish(&res);
		return rc;
	}
	/* res.sched.cost: collectives priced by the (possibly calibrated) NCCL model of the resolved
	 * hardware, the same model the engine runs below */
	rm_schedule_report rep;
	rm_program *prog = rm_schedule_build(&res.sched, &rep, &err);
	if (!prog) {
		rm_scenario_resolved_finish(&res);
		return cli_fail(&err);
	}
	log_resolved(&res, &rep, prog);
	/* what run-program needs to price it the same way: hardware, power limit, kernels */
	prog->runtime.set = true;
	runtime_hardware(&sc, prog->runtime.hardware, sizeof(prog->runtime.hardware));
	prog->runtime.hw_queues = res.hw_queues;
	snprintf(prog->runtime.allocator, sizeof(prog->runtime.allocator), "%s", rm_sim_allocator_name(res.allocator));
	prog->runtime.alloc_fraction = res.alloc_fraction;
	prog->runtime.power_w = res.hw.power_W;
	prog->runtime.hbm_bytes = res.hw.hbm_bytes;
	prog->runtime.kernels = res.cost.kernels;
	if (from_hlo) {
		rc = cli_schedule_from_hlo(cmd, from_hlo, output, hardware, argv[optind], prog);
		goto done;
	}
	if (!sim) {
		bool ok = output ? rm_file_write(output, program_fn, prog, &err) : rm_program_write(prog, stdout, &err);
		if (!ok) {
			if (err.status == RM_OK)
				rm_error_set(&err, RM_IO, output ? output : "stdout", 0, 0, "writing the program failed");
			rc = cli_fail(&err);
		} else if (output) {
			fprintf(stderr, "remora: wrote %s (%d ops, %d tensors, %d streams)\n", output, prog->n_ops,
				prog->n_tensors, prog->n_streams);
		}
		goto done;
	}
	rm_sim_options opt = {.scheduler_built = true, /* rm_schedule_build's, checked there */
			      .hw_queues = res.hw_queues,
			      .memory_timeline = trace != NULL,
			      .cost = res.sched.cost,
			      .memory_headroom_bytes = res.memory.headroom_bytes,
			      .allocator = res.allocator,
			      .alloc_fraction = res.alloc_fraction};
	rm_sim *s = rm_sim_create(prog, &res.hw, &opt, &err);
	if (!s || rm_sim_run(s, &err) != RM_OK) {
		rm_sim_destroy(s);
		rc = cli_fail(&err);
		goto done;
	}
	/* atomically onto a regular file, straight through to a device or FIFO (remora/file.h) */
	if (trace && !rm_sim_write_trace_file(s, trace, &err)) {
		rm_sim_destroy(s);
		rc = cli_fail(&err);
		goto done;
	}
	rm_breakdown bd;
	if (breakdown && rm_sim_breakdown(s, &res.memory, &bd, &err) != RM_OK) {
		rm_sim_destroy(s);
		rc = cli_fail(&err);
		goto done;
	}
	const rm_sim_metrics *m = rm_sim_get_metrics(s);
	if (json) {
		json_t *doc = rm_sim_result_json(s);
		json_object_set_new(doc, "schedule", schedule_json(&res, &rep));
		json_t *mb = json_object();
		json_object_set_new(mb, "hbm_bytes", json_integer(res.memory.hbm_bytes));
		json_object_set_new(mb, "headroom_bytes", json_integer(res.memory.headroom_bytes));
		json_object_set_new(mb, "headroom_set", json_boolean(res.memory.headroom_set));
		json_object_set_new(mb, "cuda_context_bytes", json_integer(res.memory.cuda_context_bytes));
		json_object_set_new(mb, "nccl_buffer_bytes", json_integer(res.memory.nccl_buffer_bytes));
		json_object_set_new(mb, "cublas_workspace_bytes", json_integer(res.memory.cublas_workspace_bytes));
		json_object_set_new(mb, "usable_bytes", json_integer(res.memory.usable_bytes));
		json_object_set_new(doc, "memory_budget", mb);
		if (breakdown)
			json_object_set_new(doc, "breakdown", rm_breakdown_json(&bd));
		rc = cli_print_json(doc);
	} else {
		char b3[32], b4[32], b5[32], b6[32], b7[32], pol[4096], fl[4096];
		char par[96];
		if (res.train.dp_replicate > 1 && res.train.fsdp > 1)
			snprintf(par, sizeof(par), "FSDP %lld x %lld replicas (HSDP)", (long long)res.train.fsdp,
				 (long long)res.train.dp_replicate);
		else if (res.train.dp_replicate > 1)
			snprintf(par, sizeof(par), "data parallel %lld (no FSDP)", (long long)res.train.dp_replicate);
		else
			snprintf(par, sizeof(par), "FSDP %lld", (long long)res.train.fsdp);
		if (res.train.ep > 1) {
			size_t n = strlen(par);
			snprintf(par + n, sizeof(par) - n, ", EP %lld", (long long)res.train.ep);
		}
		if (res.train.cp > 1) {
			char cpb[96];
			snprintf(cpb, sizeof(cpb), "CP %lld, %s (%lld x cp)", (long long)res.train.cp, par,
				 (long long)(res.train.fsdp / res.train.cp));
			snprintf(par, sizeof(par), "%s", cpb);
		}
		if (res.train.tp > 1) {
			char tpb[96];
			snprintf(tpb, sizeof(tpb), "TP %lld%s, %s", (long long)res.train.tp, res.train.sp ? " (SP)" : "", par);
			snprintf(par, sizeof(par), "%s", tpb);
		}
		if (res.train.zero < 3 && res.train.dp_replicate > 1) {
			size_t n = strlen(par);
			snprintf(par + n, sizeof(par) - n, ", ZeRO-%d over %lld", res.train.zero,
				 (long long)(res.train.fsdp * res.train.dp_replicate));
		}
		printf("%s on %d x %s, %s, seq %lld, micro-batch %lld x grad_accum %lld, %s%s\n", res.model.name, res.gpus,
		       res.hw.name, par, (long long)res.train.seq_len,
		       (long long)res.train.micro_batch, (long long)res.train.grad_accum,
		       res.sched.mode == RM_SCHED_XLA     ? "XLA schedule"
		       : res.sched.megatron               ? "Megatron-LM"
		       : res.sched.mode == RM_SCHED_FSDP2 ? "PyTorch FSDP2"
							  : "ideal schedule",
		       res.sched.scan ? " (scan)" : " (unrolled)");
		printf("  policy     %s\n", rm_remat_policy_format(res.policy, pol, sizeof(pol)));
		/* the flags the scenario gives, even at their defaults, and those that differ */
		rm_xla_flags_format_keep(&res.flags, res.flags.given, fl, sizeof(fl));
		if (res.sched.mode == RM_SCHED_XLA && fl[0])
			printf("  XLA_FLAGS  %s   (the flags you gave, and those that differ from the defaults below)\n", fl);
		else if (res.sched.mode == RM_SCHED_XLA)
			printf("  XLA_FLAGS  (none: XLA's defaults)\n");
		if (res.sched.mode == RM_SCHED_XLA && res.flags.version > 0) {
			const rm_xla_version *v = rm_xla_version_at(res.flags.version);
			printf("  XLA        defaults of JAX %s (openxla/xla %.12s, %s); LHS %s\n", v->name, v->xla_commit, v->xla_date,
			       rm_xla_lhs_reason(&res.flags));
		} else if (res.sched.mode == RM_SCHED_XLA)
			/* version 0 (remora/xla_flags.h): the scenario names no xla.version */
			printf("  XLA        remora's unversioned defaults (JAX 0.4.30's, the LHS flag true; xla.version "
			       "names a release); LHS %s\n",
			       rm_xla_lhs_reason(&res.flags));
		else if (res.sched.megatron)
			printf("  runtime    Transformer Engine kernels, gradients reduced %s on their own stream%s\n",
			       res.sched.overlap_grad_reduce ? "per layer in the backward" : "after the backward",
			       res.train.zero < 3 && res.train.dp_replicate > 1
				       ? (res.sched.overlap_param_gather ? ", parameters gathered per layer ahead of its forward"
									  : ", parameters gathered after the step")
				       : "");
		else if (res.sched.mode == RM_SCHED_FSDP2)
			printf("  runtime    %s, all-gathers %d block(s) ahead, reduce-scatters on their own stream\n",
			       res.compile ? "torch.compile" : "eager", res.sched.prefetch_depth);
		else
			printf("  runtime    collectives on their own stream, all-gathers %d layer(s) ahead (not XLA)\n",
			       res.sched.prefetch_depth);
		if (res.cost.nccl.cta_policy != RM_NCCL_CTA_DEFAULT || res.cost.nccl.registration != RM_NCCL_REG_NONE)
			printf("  NCCL       CTA policy %s, buffers registered: %s (docs/collectives.md)\n",
			       rm_nccl_cta_policy_name(res.cost.nccl.cta_policy),
			       rm_nccl_registration_name(res.cost.nccl.registration));
		const rm_fabric *fab = &res.cost.nccl.fabric;
		if (fab->kind != RM_FABRIC_NONE) {
			/* cluster.topology: the switch tiers, leaf first (docs/collectives.md "Topology") */
			printf("  fabric     %s, PXN %s, tiers", rm_fabric_kind_name(fab->kind), fab->pxn ? "on" : "off");
			for (int i = 0; i < fab->n_tiers; i++)
				printf("%s %d nodes (taper %g, %g us a hop)", i ? "," : "", fab->tiers[i].nodes,
				       fab->tiers[i].oversubscription, fab->tiers[i].hop_latency_us);
			printf("\n");
		}
		/* Inductor leaves a complex rotary to ATen (docs/sim.md "Fusion") */
		bool rope_fallback = res.sched.mode == RM_SCHED_FSDP2 && !res.sched.eager && res.train.rope == RM_ROPE_COMPLEX &&
				     res.model.heads > 0;
		printf("  kernels    %s%s%s%s%s, GPU at %.4g W%s\n\n",
		       res.model.heads > 0 ? rm_attention_kernel_name(res.cost.kernels.attention) : "no",
		       res.model.heads > 0 ? " attention" : " attention (ResidualMLP)",
		       res.train.gemm_dtype == RM_DTYPE_FP8_E4M3 ? ", fp8 GEMMs" : "",
		       res.train.loss != RM_LOSS_PLAIN ? (res.train.loss == RM_LOSS_CHUNKED ? ", chunked loss" : ", fused loss") : "",
		       rope_fallback ? ", complex rotary (3 unfused ATen kernels under torch.compile; training.rope)" : "",
		       res.hw.power_W > 0 ? res.hw.power_W : res.hw.tdp_W,
		       res.hw.power_W > 0 && res.hw.power_W < res.hw.tdp_W ? " (tensor cores scaled by the power limit)" : "");
		printf("  step time          %.3f ms   (lower bound %.3f ms)\n", rm_time_to_s(m->step_time) * 1e3,
		       rm_time_to_s(m->lower_bound) * 1e3);
		printf("  tokens/s per GPU   %.0f\n", m->tokens_per_s);
		printf("  MFU                %.1f%%\n", 100.0 * m->mfu);
		print_memory(m, &res.memory, &opt);
		printf("  compute busy       %.3f ms (recompute %.3f ms)\n", rm_time_to_s(m->compute_busy) * 1e3,
		       rm_time_to_s(m->recompute) * 1e3);
		printf("  communication      %.3f ms, exposed %.3f ms\n", rm_time_to_s(m->comm_total) * 1e3,
		       rm_time_to_s(m->exposed_comm) * 1e3);
		/* (data parallelism alone has no FSDP collectives: its all-reduces are the line below) */
		if (rep.collectives > 0 || rep.replica_collectives == 0) {
			printf("  collectives        %d: %d async, %d on the compute stream", rep.collectives, rep.async,
			       rep.sync);
			bool first = true;
			for (int r = 1; r < RM_SYNC_REASON_COUNT; r++)
				if (rep.sync_by_reason[r]) {
					printf("%s%d %s", first ? " (" : ", ", rep.sync_by_reason[r],
					       rm_sync_reason_name((rm_sync_reason)r));
					first = false;
				}
			printf("%s\n", first ? "" : ")");
		}
		{
			/* the layer graph's own: tensor-, context- and expert-parallel collectives, on
			 * the compute stream's path */
			int inner = m->collectives - rep.collectives - rep.replica_collectives;
			if (inner > 0)
				printf("  in the layers      %d tensor-, context- or expert-parallel collectives, on the compute "
				       "stream's path\n",
				       inner);
		}
		if (rep.async_tp_collectives)
			printf("  async TP           %d all-gathers and reduce-scatters micro-pipelined with their projections: "
			       "%lld steps of copy-engine peer copies each\n",
			       rep.async_tp_collectives, (long long)res.train.tp);
		if (rep.replica_collectives)
			printf("  across replicas    %d collectives over %lld GPUs on %d node(s) (%d on the compute stream)\n",
			       rep.replica_collectives, (long long)res.train.dp_replicate,
			       res.sched.replica_nodes > 0 ? res.sched.replica_nodes : 1, rep.replica_sync);
		bool no_limit = res.sched.mode == RM_SCHED_XLA && rep.memory_limit_bytes == 0;
		const char *base_from = res.sched.device_memory_bytes > 0 ? "scheduler.device_memory_gib"
					: res.sched.platform_allocator    ? "80% of HBM (platform allocator)"
									  : "XLA_PYTHON_CLIENT_MEM_FRACTION of HBM";
		int mem_syncs = rep.sync_by_reason[RM_SYNC_MEMORY_PEAK_OVER_LIMIT] +
				rep.sync_by_reason[RM_SYNC_DECREASE_MEMORY_OVER_LIMIT];
		if (no_limit)
			printf("  XLA memory limit   none left: the train state and step I/O (%s) exceed the %s\n"
			       "                     XLA starts from (%s), so every collective is scheduled under\n"
			       "                     memory pressure and no slop factor can help. Shard more\n"
			       "                     (parallelism.fsdp over more GPUs), keep fewer fp32 copies\n"
			       "                     (training.master_weights=false), donate the train state\n"
			       "                     (xla.donate), or give XLA more of the device (xla.mem_fraction).\n",
			       rm_format_bytes(rep.io_bytes, b3, sizeof(b3)), rm_format_bytes(rep.memory_base_bytes, b4, sizeof(b4)),
			       base_from);
		else if (res.sched.mode == RM_SCHED_XLA)
			printf("  XLA memory limit   %s of %s (%s, less %s of I/O, x slop); LHS-tracked peak %s%s\n",
			       rm_format_bytes(rep.memory_limit_bytes, b3, sizeof(b3)),
			       rm_format_bytes(rep.memory_base_bytes, b4, sizeof(b4)), base_from,
			       rm_format_bytes(rep.io_bytes, b5, sizeof(b5)),
			       rm_format_bytes(rep.tracked_peak_bytes, b6, sizeof(b6)),
			       rep.tracked_peak_bytes >= rep.memory_limit_bytes ? " (at or over the limit)"
			       : rep.tracked_peak_bytes > rep.memory_limit_bytes / 2 ? " (over half the limit: memory changes tracked)"
										    : "");
		if (res.sched.mode == RM_SCHED_XLA && rep.remat_applied && !no_limit)
			printf("  XLA remat pass     tracked peak %s over its %s limit (the scheduler's less the %s of\n"
			       "                     outputs): it recomputes %d ops a step (%s, %.3g GFLOP), moves %d; peak\n"
			       "                     after it %s%s (docs/schedules.md)\n",
			       rm_format_bytes(rep.remat_peak_before_bytes, b3, sizeof(b3)),
			       rm_format_bytes(rep.remat_limit_bytes, b4, sizeof(b4)),
			       rm_format_bytes(rep.memory_limit_bytes - rep.remat_limit_bytes, b5, sizeof(b5)), rep.remat_ops,
			       rm_format_bytes(rep.remat_bytes, b6, sizeof(b6)), rep.remat_flops / 1e9, rep.remat_moves,
			       rm_format_bytes(rep.remat_peak_after_bytes, b7, sizeof(b7)),
			       rep.remat_over ? ", still over (XLA warns \"Can't reduce memory use below\")" : "");
		if (res.sched.mode == RM_SCHED_XLA && rep.lhs_moved_slots > 0 && rep.lhs_recompute_layer_bytes > 0)
			printf("  compute order      the LHS moved %d backward slots (most by %s): %s of recomputed\n"
			       "                     activations live at once, %.1f layers' worth (docs/schedules.md)\n",
			       rep.lhs_moved_slots, rep.lhs_move_rule ? rep.lhs_move_rule : "?",
			       rm_format_bytes(rep.lhs_live_recompute_bytes, b6, sizeof(b6)),
			       (double)rep.lhs_live_recompute_bytes / (double)rep.lhs_recompute_layer_bytes);
		else if (res.sched.mode == RM_SCHED_XLA && rep.lhs_moved_slots > 0)
			printf("  compute order      the LHS moved %d backward slots (most by %s; docs/schedules.md)\n",
			       rep.lhs_moved_slots, rep.lhs_move_rule ? rep.lhs_move_rule : "?");
		if (rep.backward_gathers_fenced && res.sched.scan)
			printf("  note               remat.prevent_cse is true (jax.checkpoint's default): its optimization\n"
			       "                     barrier keeps the backward's all-gathers in their iteration, so they\n"
			       "                     overlap little. Under a scan it is not needed (JAX's docs); MaxText sets\n"
			       "                     prevent_cse=not scan_layers. Set remat.prevent_cse: false if your code does.\n");
		if (mem_syncs && !no_limit)
			printf("\n  %d collectives run on the compute stream under XLA's memory rules: tracked memory\n"
			       "  was %s against the %s limit when the first was chosen (kMemoryPeakOverLimit: a\n"
			       "  window whose buffer would pass the limit is not opened; kDecreaseMemoryOverLimit: at\n"
			       "  the limit the start that frees memory goes first). Try raising\n"
			       "  --xla_gpu_memory_limit_slop_factor, saving fewer names, offloading them\n"
			       "  (save_and_offload_only_these_names), or a smaller micro-batch.\n",
			       mem_syncs, rm_format_bytes(rep.first_memory_sync_tracked_bytes, b5, sizeof(b5)),
			       rm_format_bytes(rep.memory_limit_bytes, b6, sizeof(b6)));
		if (!m->fits) {
			/* what takes the memory at the peak, and what would fit */
			rm_breakdown fb;
			if (breakdown || rm_sim_breakdown(s, &res.memory, &fb, &err) == RM_OK) {
				double frac = opt.alloc_fraction > 0 ? opt.alloc_fraction : RM_SIM_JAX_MEM_FRACTION;
				int64_t cap = m->memory_usable_bytes;
				if (opt.allocator == RM_SIM_ALLOC_JAX_PREALLOC &&
				    (int64_t)(frac * (double)m->memory_capacity_bytes) < cap)
					cap = (int64_t)(frac * (double)m->memory_capacity_bytes);
				printf("\n");
				cli_print_fit_hint(breakdown ? &bd : &fb, m->peak_memory_bytes, cap, &res.train, res.gpus,
						   sc.gpus_per_node ? sc.gpus_per_node : (int64_t)res.hw.gpus_per_node,
						   (const char(*)[48])sc.names, sc.n_names, false, NULL);
			}
		}
		if (breakdown)
			cli_print_breakdown(&bd);
	}
	rm_sim_destroy(s);
done:
	rm_program_destroy(prog);
	rm_schedule_report_finish(&rep);
	rm_scenario_resolved_finish(&res);
	return rc;
}

int cli_cmd_schedule(int argc, char **argv)
{
	return run("schedule", argc, argv);
}

int cli_cmd_simulate(int argc, char **argv)
{
	return run("simulate", argc, argv);
}
