/*
 * Golden end-to-end tests of the `remora` command: fixed inputs, stdout diffed byte for byte
 * against data/golden/. After an intended change, regenerate with
 *   REMORA_UPDATE_GOLDEN=1 meson test -C build --suite golden
 * and review the diff of data/golden/ before committing.
 * Also checks exit codes and messages of bad input end to end.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct run_result {
	char *out;
	size_t len;
	int exit_code;
} run_result;

/* Folder to run remora in (NULL: the test's); set by tests whose output names input paths. */
static const char *run_cwd;

/* Runs `remora ARGS` (stderr merged into stdout when merge is set). */
static run_result run_remora(const char *args, bool merge)
{
	const char *bin = getenv("REMORA_BIN");
	cr_assert_not_null(bin, "REMORA_BIN must name the remora executable");
	char cmd[4096];
	if (run_cwd)
		snprintf(cmd, sizeof(cmd), "cd '%s' && '%s' %s%s", run_cwd, bin, args, merge ? " 2>&1" : " 2>/dev/null");
	else
		snprintf(cmd, sizeof(cmd), "'%s' %s%s", bin, args, merge ? " 2>&1" : " 2>/dev/null");
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	run_result r = {0};
	size_t cap = 1 << 16;
	r.out = malloc(cap);
	size_t got;
	while ((got = fread(r.out + r.len, 1, cap - r.len - 1, p)) > 0) {
		r.len += got;
		if (cap - r.len < 4096) {
			cap *= 2;
			r.out = realloc(r.out, cap);
		}
	}
	r.out[r.len] = '\0';
	int status = pclose(p);
	r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
	return r;
}

/* Compares stdout of `remora ARGS` with data/golden/NAME; returns the output (caller frees). */
static char *golden_out(const char *name, const char *args)
{
	const char *dir = getenv("REMORA_GOLDEN_DIR");
	cr_assert_not_null(dir, "REMORA_GOLDEN_DIR must point at data/golden");
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	run_result r = run_remora(args, false);
	cr_assert_eq(r.exit_code, 0, "remora %s exited %d", args, r.exit_code);
	const char *update = getenv("REMORA_UPDATE_GOLDEN");
	if (update && strcmp(update, "1") == 0) {
		FILE *f = fopen(path, "wb");
		cr_assert_not_null(f, "cannot write %s", path);
		fwrite(r.out, 1, r.len, f);
		fclose(f);
		return r.out;
	}
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "missing golden file %s (run with REMORA_UPDATE_GOLDEN=1)", path);
	char *want = malloc(r.len + 2);
	size_t n = fread(want, 1, r.len + 1, f);
	fclose(f);
	bool same = n == r.len && memcmp(want, r.out, r.len) == 0;
	size_t at = 0;
	while (at < n && at < r.len && want[at] == r.out[at])
		at++;
	cr_assert(same, "remora %s differs from %s at byte %zu (got %zu bytes, golden %zu)", args,
		  path, at, r.len, n);
	free(want);
	return r.out;
}

static void golden(const char *name, const char *args)
{
	free(golden_out(name, args));
}

/* XLA's own schedule read from HLO text (tests/data/hlo/pipelined_ag.hlo, docs/hlo.md): the
 * program, byte for byte. */
Test(golden, schedule_from_hlo_json)
{
	const char *data = getenv("REMORA_TEST_DATA");
	cr_assert_not_null(data, "REMORA_TEST_DATA must point at tests/data");
	char args[1200];
	snprintf(args, sizeof(args), "schedule --from-hlo '%s/hlo/pipelined_ag.hlo'", data);
	golden("schedule-from-hlo-pipelined-ag.json", args);
}

Test(golden, describe_gpt2_json)
{
	golden("describe-gpt-2.json", "describe gpt-2 --json");
}

Test(golden, describe_llama3_8b_fsdp8_json)
{
	golden("describe-llama-3-8b-b2-fsdp8.json", "describe llama-3-8b --micro-batch 2 --fsdp 8 --json");
}

Test(golden, describe_llama2_7b_text)
{
	golden("describe-llama-2-7b.txt", "describe llama-2-7b");
}

/* DeepSeek-V3: the dense first layers' and the MoE layers' op graphs (latent attention), 671,026,419,200
 * parameters in all (docs/reference/models.csv). */
Test(golden, describe_deepseek_v3)
{
	golden("describe-deepseek-v3.txt", "describe deepseek-v3");
}

Test(golden, hw_show_h100_json)
{
	golden("hw-h100-sxm.json", "hw show h100-sxm --json");
}

Test(golden, collective_table_json)
{
	golden("collective-table.json", "collective --table --json");
}

Test(golden, collective_all_pairs_text)
{
	golden("collective-all-gather-16MiB.txt", "collective --op all-gather --bytes 16MiB --gpus 8 --all");
}

/* One GPU on each of 16 nodes (a TP-8 job's data-parallel group): NCCL's own model picks PAT at
 * 4 MiB (tests/test_nccl.c derives every pair's time) and holds 4 channels. */
Test(golden, collective_one_gpu_per_node_text)
{
	golden("collective-all-gather-4MiB-16x1.txt",
	       "collective --op all-gather --bytes 4MiB --gpus 16 --nodes 16 --raw --all");
}

static char *seed_arg(void)
{
	static char buf[1200];
	const char *dir = getenv("REMORA_DATA_DIR");
	cr_assert_not_null(dir);
	snprintf(buf, sizeof(buf), "'%s/scenarios/seed-llama2-7b-fsdp8-h100.yaml'", dir);
	return buf;
}

Test(golden, simulate_seed_text)
{
	char args[1400];
	snprintf(args, sizeof(args), "simulate %s", seed_arg());
	golden("simulate-seed.txt", args);
}

Test(golden, simulate_seed_micro_batch_12_json)
{
	/* the first micro-batch whose loop collectives all go to the compute stream (XLA's
	 * kDecreaseMemoryOverLimit: tracked memory reaches the limit) */
	char args[1400];
	snprintf(args, sizeof(args), "simulate %s --set training.micro_batch=12 --json", seed_arg());
	golden("simulate-seed-b12.json", args);
}

/* The seed with no XLA_FLAGS under two JAX releases' defaults (docs/xla-versions.md): at 0.4.30
 * xla_gpu_enable_latency_hiding_scheduler defaults to false and nothing else turns LHS on, so
 * every collective runs on the compute stream; at 0.7.2 the SoL estimator, on by default, turns
 * LHS on for Hopper (IsLHSEnabled), reduce-scatters are pipelined and combine_by_dim is off. The
 * seed as written names --xla_gpu_enable_pipelined_collectives, which 0.6.2's XLA no longer has. */
static json_t *seed_version_json(const char *golden_name, const char *version)
{
	char args[1400];
	snprintf(args, sizeof(args), "simulate %s --set xla.version=%s --set xla_flags= --json", seed_arg(), version);
	char *out = golden_out(golden_name, args);
	json_error_t jerr;
	json_t *doc = json_loads(out, 0, &jerr);
	cr_assert_not_null(doc, "%s", jerr.text);
	free(out);
	json_t *sched = json_object_get(doc, "schedule");
	cr_assert_str_eq(json_string_value(json_object_get(sched, "xla_version")), version);
	cr_assert_str_eq(json_string_value(json_object_get(sched, "xla_flags")), "");
	return doc;
}

Test(golden, simulate_seed_xla_version_defaults)
{
	json_t *old = seed_version_json("simulate-seed-jax-0.4.30-defaults.json", "0.4.30");
	json_t *c = json_object_get(old, "collectives");
	json_int_t total = json_integer_value(json_object_get(c, "total"));
	cr_assert_gt(total, 0);
	cr_assert_eq(json_integer_value(json_object_get(c, "sync")), total, "no LHS: every collective synchronous");
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(c, "sync_reasons"), "no_latency_hiding_scheduler")),
		     total);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(old, "schedule"), "latency_hiding_scheduler")),
			 "off: --xla_gpu_enable_latency_hiding_scheduler is false");
	json_t *now = seed_version_json("simulate-seed-jax-0.7.2-defaults.json", "0.7.2");
	c = json_object_get(now, "collectives");
	cr_assert_gt(json_integer_value(json_object_get(c, "async")), 0, "LHS runs: collectives overlap");
	cr_assert_null(json_object_get(json_object_get(c, "sync_reasons"), "no_latency_hiding_scheduler"));
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(now, "schedule"), "latency_hiding_scheduler")),
			 "on: the SoL latency estimator on Hopper or newer");
	cr_assert_lt(json_real_value(json_object_get(now, "step_time_s")),
		     json_real_value(json_object_get(old, "step_time_s")));
	json_decref(old);
	json_decref(now);
	char args[1400];
	snprintf(args, sizeof(args), "simulate %s --set xla.version=0.6.2", seed_arg());
	run_result r = run_remora(args, true);
	cr_assert_eq(r.exit_code, 1, "%s", r.out);
	cr_assert(strstr(r.out, "error: xla_flags: XLA_FLAGS: --xla_gpu_enable_pipelined_collectives is not a flag of "
				"the XLA in JAX 0.6.2 (openxla/xla 3d5ece643216, 2025-06-17)"),
		  "%s", r.out);
	free(r.out);
}

/* An empty search.micro_batches searches nothing: refused where it is written, not read as the
 * scenario's micro-batch. */
Test(golden, search_empty_micro_batches_refused)
{
	char args[1400];
	snprintf(args, sizeof(args), "search %s --set 'search.micro_batches=[]'", seed_arg());
	run_result r = run_remora(args, true);
	cr_assert_eq(r.exit_code, 1, "%s", r.out);
	cr_assert(strstr(r.out, "error: --set search.micro_batches=[]: search.micro_batches: an empty list searches no "
				"micro-batch"),
		  "%s", r.out);
	free(r.out);
}

Test(golden, search_seed_json, .timeout = 240)
{
	/* the README's main job: the whole seed search space (run from data/ so the scenario path
	 * in the output does not depend on where the checkout is) */
	static char dir[1024];
	snprintf(dir, sizeof(dir), "%s", getenv("REMORA_DATA_DIR"));
	run_cwd = dir;
	char *out = golden_out("search-seed.json", "search scenarios/seed-llama2-7b-fsdp8-h100.yaml --jobs 2 --json");
	run_cwd = NULL;
	json_error_t jerr;
	json_t *doc = json_loads(out, 0, &jerr);
	cr_assert_not_null(doc, "%s", jerr.text);
	json_t *best = json_object_get(doc, "best");
	cr_assert(json_is_true(json_object_get(best, "fits")), "the winner fits in memory");
	json_t *reasons = json_object_get(json_object_get(best, "collectives"), "sync_reasons");
	cr_assert_null(json_object_get(reasons, "memory_limit"), "the winner keeps its collectives async");
	cr_assert_gt(json_real_value(json_object_get(doc, "speedup_vs_as_written")), 1.0);
	cr_assert_eq(json_integer_value(json_object_get(doc, "candidates_evaluated")),
		     json_integer_value(json_object_get(doc, "candidates_total")));
	/* top is the table's ten rows (search-seed.txt): the first (slop factor 120, flag variant 1:
	 * with the flags as given XLA's rematerialization pass recomputes at micro-batch 4, the fourth
	 * row) folds 1 same schedule, XLA gives up -0.2% against the ideal runtime there; the tenth
	 * saves q, k, out, gate, up and ctx with the flags as given */
	json_t *top = json_object_get(doc, "top");
	cr_assert_eq(json_array_size(top), 10);
	json_t *t0 = json_array_get(top, 0), *t9 = json_array_get(top, 9);
	cr_expect_str_eq(json_string_value(json_object_get(t0, "label")), "save: q,k,v,gate,up,ctx");
	cr_expect_eq(json_integer_value(json_object_get(t0, "same")), 1);
	cr_expect(fabs(json_real_value(json_object_get(t0, "ideal_gap_pct")) - -0.2) < 0.05);
	cr_expect_str_eq(json_string_value(json_object_get(json_array_get(top, 3), "label")), "save: q,k,v,gate,up,ctx");
	cr_expect_eq(json_integer_value(json_object_get(json_array_get(top, 3), "same")), 3);
	cr_expect_str_eq(json_string_value(json_object_get(t9, "label")), "save: q,k,out,gate,up,ctx");
	cr_expect_eq(json_integer_value(json_object_get(t9, "micro_batch")), 4);
	json_decref(doc);
	free(out);
}

/* The seed search as the README quotes it: the table ranks XLA candidates only (the ideal bound
 * is its "ideal gap" column), and the table's first row, the best plan and the first line of the
 * XLA Pareto front name the winner the same way, flag variant included. */
Test(golden, search_seed_text, .timeout = 240)
{
	static char dir[1024];
	snprintf(dir, sizeof(dir), "%s", getenv("REMORA_DATA_DIR"));
	run_cwd = dir;
	char *out = golden_out("search-seed.txt", "search scenarios/seed-llama2-7b-fsdp8-h100.yaml --jobs 2");
	run_cwd = NULL;
	cr_expect_null(strstr(out, "(ideal)"), "%s", out);
	cr_expect(strstr(out, " ideal gap\n"), "%s", out);
	cr_expect(strstr(out, "\n  1   save: q,k,v,gate,up,ctx (+1 same)               4 v1 "), "%s", out);
	cr_expect(strstr(out, "\nbest plan for XLA (save: q,k,v,gate,up,ctx, mb 4, flags v1; paste these):\n"),
		  "%s", out);
	const char *front = strstr(out, "\nPareto front of the XLA candidates");
	cr_assert_not_null(front, "%s", out);
	const char *first = strchr(front + 1, '\n');
	cr_assert_not_null(first);
	cr_expect_eq(strncmp(strstr(first, "GiB  "), "GiB  save: q,k,v,gate,up,ctx, mb 4, flags v1   <- best plan\n",
			     59),
		     0, "%s", first);
	/* a variant named on the front gets its flags */
	cr_expect(strstr(front, "flags v2\n"), "%s", front);
	cr_expect(strstr(front, "\n  flags v2 = search.flag_variants[2], on top of the scenario's: "
				"--xla_gpu_enable_while_loop_double_buffering=false\n"),
		  "%s", front);
	cr_expect_null(strstr(front, ", ideal"), "%s", front);
	/* the flags to paste: those the scenario gives, even at 0.4.30's defaults (pipelined
	 * collectives false, the highest-priority async stream true), and those that differ */
	cr_expect(strstr(out, "   (the flags you gave, and those that differ from the defaults of JAX 0.4.30's XLA)\n"), "%s", out);
	cr_expect(strstr(out, " --xla_gpu_enable_pipelined_collectives=false "), "%s", out);
	cr_expect(strstr(out, " --xla_gpu_enable_highest_priority_async_stream=true "), "%s", out);
	free(out);
}

/* DOES NOT FIT comes with what takes the memory at the peak and what would fit, computed from
 * the roles at the peak: the seed at micro-batch 12 passes JAX's 59.74 GiB pool by 9.49 GiB
 * (69.22 GiB, in the backward, where the last layers' gradients meet the scan's stacked
 * residuals); activations and residuals (55.30 GiB) scale with the micro-batch, so 9 gives
 * 69.22 - 55.30 x 3/12 = 55.40 GiB (simulate at 9 says 55.40); the sharded state at the peak
 * (13.55 GiB: the persistent shards and the gradient shards written so far) over 4x the GPUs
 * leaves 69.22 - 13.55 x 3/4 = 59.06 GiB (simulate at fsdp 32 over 4 nodes says 59.06). */
Test(golden, simulate_does_not_fit_says_what_would)
{
	char args[1200];
	snprintf(args, sizeof(args), "simulate %s --set training.micro_batch=12", seed_arg());
	run_result r = run_remora(args, false);
	cr_assert_eq(r.exit_code, 0, "%s", r.out);
	cr_expect(strstr(r.out, "DOES NOT FIT"), "%s", r.out);
	cr_expect(strstr(r.out, ", micro-batch 12 x grad_accum 1, XLA schedule (scan)\n"), "%s", r.out);
	cr_expect(strstr(r.out, "\n  over by            9.49 GiB; at the peak (t = "), "%s", r.out);
	cr_expect(strstr(r.out, "residual 36.00 GiB, activation 19.30 GiB, optimizer_state 9.41 GiB"), "%s", r.out);
	cr_expect(strstr(r.out, "\n    --set training.micro_batch=9   about 55.40 GiB"), "%s", r.out);
	cr_expect(strstr(r.out, "\n    --set parallelism.fsdp=32 --set cluster.nodes=4   about 59.06 GiB (4 x the GPUs"), "%s",
		  r.out);
	cr_expect(strstr(r.out, "\n    --set remat.policy=save_and_offload_only_these_names --set remat.names=[] --set "
				"remat.offload_names=[dot_mlp_out,dot_attention_value,dot_attention_query,dot_attention_key]   "
				"the saved names to host memory instead: up to 36.00 GiB off the device"),
		  "%s", r.out);
	/* each --set line runs as pasted: 4 x the GPUs as 4 nodes of 8 (fsdp 32 must divide the
	 * cluster's GPUs), the smaller micro-batch, the saved names offloaded, and it fits */
	static const char *const lines[] = {"\n    --set parallelism.fsdp=", "\n    --set training.micro_batch=",
					    "\n    --set remat.policy="};
	static const char *const want[] = {" 59.06 GiB of the 59.74 GiB BFC pool (78.63 GiB of HBM usable)  fits\n",
					   " 55.40 GiB of the 59.74 GiB BFC pool (78.63 GiB of HBM usable)  fits\n",
					   " 37.35 GiB of the 59.74 GiB BFC pool (78.63 GiB of HBM usable)  fits\n"};
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		const char *at = strstr(r.out, lines[i]);
		cr_assert_not_null(at, "%s", r.out);
		at += 5;
		const char *stop = strstr(at, "   "); /* the options end at the column gap */
		cr_assert_not_null(stop);
		char again[1600];
		snprintf(again, sizeof(again), "simulate %s --set training.micro_batch=12 %.*s", seed_arg(), (int)(stop - at), at);
		run_result p = run_remora(again, true);
		cr_expect_eq(p.exit_code, 0, "remora %s: %s", again, p.out);
		cr_expect(strstr(p.out, want[i]), "remora %s: %s", again, p.out);
		free(p.out);
	}
	free(r.out);
	/* a step that fits says nothing of it */
	snprintf(args, sizeof(args), "simulate %s --set training.micro_batch=9", seed_arg());
	r = run_remora(args, false);
	cr_assert_eq(r.exit_code, 0, "%s", r.out);
	cr_expect_null(strstr(r.out, "would fit"), "%s", r.out);
	free(r.out);
}

/* A search where nothing fits names the candidate closest to fitting and what would fit it (the
 * seed as written at micro-batch 12: the figures of simulate_does_not_fit_says_what_would). */
Test(golden, search_nothing_fits_says_what_would)
{
	char args[1600];
	snprintf(args, sizeof(args),
		 "search %s --set training.micro_batch=12 --set 'search.names=[]' --set 'search.policies=[dots_saveable]' "
		 "--set 'search.micro_batches=[8,12]' --set \"search.flag_variants=['']\"",
		 seed_arg());
	run_result r = run_remora(args, false);
	cr_assert_eq(r.exit_code, 0, "%s", r.out);
	cr_expect(strstr(r.out, "\n  (no candidate of XLA fits)\n"), "%s", r.out);
	cr_expect(strstr(r.out, "\nbest plan for XLA: DOES NOT FIT. Closest: as written, mb 12, peak 69.22 GiB of 59.74 "
				"GiB in the BFC pool\n  over by            9.49 GiB"),
		  "%s", r.out);
	/* a search's micro-batches are search.micro_batches */
	cr_expect(strstr(r.out, "\n    --set search.micro_batches=[9]   about 55.40 GiB"), "%s", r.out);
	free(r.out);
	/* --json: no best and no rows, but the closest candidate and the hint, exit 0 */
	char jargs[1700];
	snprintf(jargs, sizeof(jargs), "%s --json", args);
	r = run_remora(jargs, false);
	cr_assert_eq(r.exit_code, 0, "%s", r.out);
	json_error_t jerr;
	json_t *doc = json_loads(r.out, 0, &jerr);
	cr_assert_not_null(doc, "%s: %s", jerr.text, r.out);
	cr_expect(json_is_null(json_object_get(doc, "best")));
	cr_expect_eq(json_array_size(json_object_get(doc, "top")), 0);
	json_t *closest = json_object_get(doc, "closest");
	cr_expect_str_eq(json_string_value(json_object_get(closest, "label")), "as written");
	cr_expect_eq(json_integer_value(json_object_get(closest, "micro_batch")), 12);
	/* 69.22 GiB over 59.74 GiB: 74325909504 - 64140607488 = 10185302016 B over (9.49 GiB) */
	json_t *hint = json_object_get(doc, "hint");
	cr_expect_eq(json_integer_value(json_object_get(hint, "over_bytes")), 10185302016);
	cr_expect_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(hint, "at_peak"), 0), "role")),
			 "residual");
	json_t *fit = json_object_get(hint, "would_fit");
	cr_expect_str_eq(json_string_value(json_object_get(json_array_get(fit, 0), "change")),
			 "--set search.micro_batches=[9]");
	cr_expect_str_eq(json_string_value(json_object_get(json_array_get(fit, 3), "change")),
			 "--set parallelism.fsdp=32 --set cluster.nodes=4");
	json_decref(doc);
	free(r.out);
}

/* Units: hw show gives bytes in binary units with the exact count (85520809984 B = 79.65 GiB, the
 * H100's HBM as the driver reports it; 50 MB of L2 = 47.68 MiB), never 8.55208e+10 B. */
Test(golden, hw_show_bytes_in_binary_units)
{
	run_result r = run_remora("hw show h100-sxm", false);
	cr_assert_eq(r.exit_code, 0, "%s", r.out);
	cr_expect(strstr(r.out, "\nhbm_bytes                       79.65 GiB      85520809984 B; "), "%s", r.out);
	cr_expect(strstr(r.out, "\nl2_bytes                        47.68 MiB      50000000 B; "), "%s", r.out);
	cr_expect_null(strstr(r.out, "e+"), "%s", r.out);
	free(r.out);
}

/* -v logs the resolved inputs on stderr: profile figures with their sources, the memory budget's
 * terms and XLA's memory limit, (59.74 GiB pool - 10.98 GiB of I/O) x 0.95 = 46.32 GiB; stdout is
 * what it is without -v. */
Test(golden, simulate_verbose_logs_resolved_inputs)
{
	char args[1400];
	snprintf(args, sizeof(args), "-v simulate %s", seed_arg());
	run_result r = run_remora(args, true);
	cr_assert_eq(r.exit_code, 0, "%s", r.out);
	cr_expect(strstr(r.out, "remora: info: hardware h100-sxm: hbm_peak_GBps = 3350 GB/s (docs/reference/hardware.md "
				"'HBM peak bandwidth' (DS))\n"),
		  "%s", r.out);
	cr_expect(strstr(r.out, "remora: info: memory budget: 78.63 GiB usable = 79.65 GiB HBM - 1.02 GiB headroom"), "%s",
		  r.out);
	cr_expect(strstr(r.out, "remora: info: XLA memory limit: 46.32 GiB = (59.74 GiB device memory - 10.98 GiB "
				"parameters and outputs) x slop 95%\n"),
		  "%s", r.out);
	/* NCCL's choice per collective shape: the 64 per-layer all-gathers (forward and backward)
	 * as `remora collective --op all-gather --bytes 386MiB --gpus 8` prices one; 133 in all */
	cr_expect(strstr(r.out, "remora: info: NCCL 2.28: all-gather 386.00 MiB over 8 GPUs on 1 node(s), x64: Ring "
				"Simple, 24 channels, 1068.96 us, busBW 331.31 GB/s\n"),
		  "%s", r.out);
	cr_expect(strstr(r.out, "remora: info: schedule: 133 collectives, 127 async"), "%s", r.out);
	/* bytes in binary units with the exact count, as hw show gives them */
	cr_expect(strstr(r.out, "remora: info: hardware h100-sxm: hbm_bytes = 79.65 GiB (85520809984 B) ("), "%s", r.out);
	cr_expect(strstr(r.out, "remora: info: hardware h100-sxm: l2_bytes = 47.68 MiB (50000000 B) ("), "%s", r.out);
	cr_expect_null(strstr(r.out, "e+"), "%s", r.out);
	free(r.out);
	/* the global options also after the command name, spelt either way; -q there too */
	static const char *const after[] = {"-v", "--verbose", "-j -v"};
	for (size_t i = 0; i < sizeof(after) / sizeof(after[0]); i++) {
		snprintf(args, sizeof(args), "simulate %s %s", seed_arg(), after[i]);
		r = run_remora(args, true);
		cr_expect_eq(r.exit_code, 0, "remora %s: %s", args, r.out);
		cr_expect(strstr(r.out, "remora: info: XLA memory limit: 46.32 GiB"), "remora %s: %s", args, r.out);
		cr_expect_null(strstr(r.out, "remora: debug:"), "remora %s: %s", args, r.out);
		free(r.out);
	}
	snprintf(args, sizeof(args), "-v simulate %s -v --set training.micro_batch=4", seed_arg());
	r = run_remora(args, true);
	cr_expect_eq(r.exit_code, 0, "%s", r.out);
	cr_expect(strstr(r.out, "remora: info: XLA memory limit:"), "%s", r.out);
	free(r.out);
	snprintf(args, sizeof(args), "simulate %s -q", seed_arg());
	r = run_remora(args, true);
	cr_expect_eq(r.exit_code, 0, "%s", r.out);
	cr_expect_null(strstr(r.out, "remora: warning:"), "%s", r.out);
	free(r.out);
	snprintf(args, sizeof(args), "simulate %s", seed_arg());
	r = run_remora(args, true);
	cr_expect_null(strstr(r.out, "remora: info:"), "%s", r.out);
	free(r.out);
}

Test(golden, same_input_same_bytes)
{
	run_result a = run_remora("describe qwen2-7b --fsdp 4 --json", false);
	run_result b = run_remora("describe qwen2-7b --fsdp 4 --json", false);
	cr_assert_eq(a.len, b.len);
	cr_assert_eq(memcmp(a.out, b.out, a.len), 0);
	free(a.out);
	free(b.out);
}

Test(cli_errors, malformed_config_names_file_line_column)
{
	const char *data = getenv("REMORA_TEST_DATA");
	cr_assert_not_null(data);
	char args[1024];
	snprintf(args, sizeof(args), "describe '%s/configs/heads-not-dividing.json'", data);
	run_result r = run_remora(args, true);
	cr_assert_eq(r.exit_code, 1);
	cr_assert(strstr(r.out, "heads-not-dividing.json:6:26: error: num_attention_heads (30)"),
		  "%s", r.out);
	free(r.out);
}

Test(cli_errors, bad_usage_exits_2)
{
	static const char *const cases[][2] = {
		{"describe", "missing MODEL"},
		{"describe gpt-2 --micro-batch 0", "--micro-batch expects a positive integer"},
		{"describe gpt-2 --seq-len abc", "--seq-len expects a positive integer"},
		{"describe gpt-2 --dtype int4", "unknown dtype 'int4'"},
		{"describe gpt-2 extra", "unexpected argument 'extra'"},
		{"frobnicate", "unknown command 'frobnicate'"},
		{"hw show", "needs a profile NAME"},
		{"collective --op all-gather --bytes 12XB --gpus 8", "--bytes expects a size"},
		{"collective --op broadcastt --bytes 1MiB --gpus 8", "unknown collective 'broadcastt'"},
		{"collective --op all-gather --bytes 1MiB", "missing --gpus"},
		{"collective --op all-gather --bytes 1MiB --gpus 8 --algo Butterfly", "unknown algorithm 'Butterfly'"},
		{"collective --table --nccl-version 1.2", "older than the oldest modelled"},
		{"collective --op all-gather --bytes 1MiB --gpus 16 --nodes 2 --cpu sparc", "--cpu: unknown vendor 'sparc'"},
		{"simulate", "missing SCENARIO"},
		{"search", "missing SCENARIO"},
		{"search x.yaml --jobs 0", "--jobs expects a positive integer"},
		{"bench", "missing the benchmark name: engine, search or plan"},
		{"search x.yaml -j 2", "unexpected argument '2' (-j is --json; --jobs N or -J N sets the jobs)"},
		{"plan llama-2-7b -j 4", "unexpected argument '4' (-j is --json; --jobs N or -J N sets the jobs)"},
		{"search x.yaml --db ''", "--db needs a file name"},
		{"search x.yaml --trace ''", "--trace needs a file name"},
		/* a malformed --set is usage in every command that takes one, before any file is read */
		{"simulate x.yaml --set training.micro_batch", "--set expects KEY=VALUE"},
		{"schedule x.yaml --set =4", "got '=4'"},
		{"search x.yaml --set +=x", "got '+=x'"},
		{"simulate x.yaml --set training.foo=3", "unknown key \"training.foo\""},
		{"schedule x.yaml --set training.foo=3", "unknown key \"training.foo\""},
		{"search x.yaml --set training.foo=3", "unknown key \"training.foo\""},
		{"search x.yaml --set remat.names+=[a]", "only string keys such as xla_flags append"},
		{"schedule x.yaml --hardware h100-sxm", "--hardware goes with --from-hlo"},
		{"simulate x.yaml --from-hlo x.hlo", "--from-hlo is an option of `remora schedule`"},
		{"schedule --from-hlo x.hlo --set training.micro_batch=2", "--set applies to a SCENARIO"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		run_result r = run_remora(cases[i][0], true);
		cr_assert_eq(r.exit_code, 2, "remora %s exited %d", cases[i][0], r.exit_code);
		cr_assert(strstr(r.out, cases[i][1]), "remora %s said: %s", cases[i][0], r.out);
		free(r.out);
	}
}

/*
 * A bad option is named for what is wrong with it, in one remora message (getopt's own is off):
 * a missing value is not an "unrecognised option", and simulate and schedule, which share one
 * table of long options, refuse each other's outputs instead of taking them and writing nothing.
 */
Test(cli_errors, bad_options_are_named_once)
{
	static const char *const cases[][2] = {
		{"simulate x.yaml --set", "error: option --set needs a value"},
		{"simulate x.yaml -s", "error: option -s needs a value"},
		{"simulate x.yaml --breakdown=3", "error: option --breakdown takes no value"},
		{"simulate x.yaml --bogus", "error: unrecognised option '--bogus'"},
		{"simulate x.yaml -bx", "error: unrecognised option '-x'"},
		{"simulate x.yaml --output p.json", "--output is an option of `remora schedule`"},
		{"simulate x.yaml -o p.json", "error: unrecognised option '-o'"},
		{"schedule x.yaml --trace t.json", "--trace is an option of `remora simulate`"},
		{"schedule x.yaml --json", "--json is an option of `remora simulate`"},
		{"schedule x.yaml -j", "error: unrecognised option '-j'"},
		{"search x.yaml --top", "error: option --top needs a value"},
		{"search x.yaml --stop-after", "error: option --stop-after needs a value"},
		{"validate --max-error", "error: option --max-error needs a value"},
		{"hw show --json=1", "error: option --json takes no value"},
		{"describe gpt-2 --seq-len", "error: option --seq-len needs a value"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		run_result r = run_remora(cases[i][0], true);
		cr_expect_eq(r.exit_code, 2, "remora %s exited %d", cases[i][0], r.exit_code);
		cr_expect(strstr(r.out, cases[i][1]), "remora %s said: %s", cases[i][0], r.out);
		/* one error line, then the hint to --help */
		const char *first = strstr(r.out, "error:");
		cr_expect(first && !strstr(first + 1, "error:"), "remora %s said: %s", cases[i][0], r.out);
		cr_expect(strncmp(r.out, "remora: error: ", 15) == 0, "remora %s said: %s", cases[i][0], r.out);
		free(r.out);
	}
}

/* Ctrl-C during a search into a --db: exit 130 as a shell gives, and a line on stderr saying how
 * many candidates the database holds; the same command then simulates exactly the rest (the
 * signal comes once the database exists, whichever row the sweep is at). */
Test(cli_errors, ctrl_c_during_a_db_search_says_what_is_stored, .timeout = 120)
{
	const char *bin = getenv("REMORA_BIN"), *data = getenv("REMORA_DATA_DIR");
	cr_assert_not_null(bin);
	cr_assert_not_null(data);
	char dir[] = "/tmp/remora-interrupt-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char db[600], errpath[600], seed[1200];
	snprintf(db, sizeof(db), "%s/sweep.db", dir);
	snprintf(errpath, sizeof(errpath), "%s/stderr.txt", dir);
	snprintf(seed, sizeof(seed), "%s/scenarios/seed-llama2-7b-fsdp8-h100.yaml", data);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		if (!freopen("/dev/null", "w", stdout) || !freopen(errpath, "w", stderr))
			_exit(127);
		execl(bin, bin, "search", seed, "--db", db, (char *)NULL);
		_exit(127);
	}
	struct timespec tick = {.tv_nsec = 50000000}, half = {.tv_nsec = 500000000};
	for (int i = 0; i < 1200 && access(db, F_OK) != 0; i++)
		nanosleep(&tick, NULL);
	nanosleep(&half, NULL);
	cr_assert_eq(kill(pid, SIGINT), 0);
	int status = 0;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 130, "status %d", status);
	FILE *f = fopen(errpath, "r");
	cr_assert_not_null(f);
	static char err[4096];
	size_t n = fread(err, 1, sizeof(err) - 1, f);
	err[n] = '\0';
	fclose(f);
	const char *line = strstr(err, "remora: interrupted: ");
	cr_assert_not_null(line, "%s", err);
	long long stored = -1, total = -1;
	char tail[256] = "";
	cr_assert_eq(sscanf(line, "remora: interrupted: %lld of %lld candidates stored in %255[^\n]", &stored, &total, tail), 3,
		     "%s", err);
	cr_expect_eq(total, 12951);
	cr_expect(stored > 0 && stored < total, "%s", err);
	char want[800];
	snprintf(want, sizeof(want), "%s; rerun the same command to resume", db);
	cr_expect_str_eq(tail, want);
	char args[1800];
	snprintf(args, sizeof(args), "search '%s' --db '%s' --jobs 2", seed, db);
	run_result r = run_remora(args, false);
	cr_assert_eq(r.exit_code, 0, "%s", r.out);
	char again[200];
	snprintf(again, sizeof(again), ": 12951 candidates in the space, %lld simulated now (the rest were already in the database)\n",
		 total - stored);
	cr_expect(strstr(r.out, again), "want %s in %s", again, r.out);
	free(r.out);
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

/* Output to a full disk is an error (exit 1), said once: --json's own message, or main's for text. */
Test(cli_errors, full_disk_is_one_error)
{
	const char *bin = getenv("REMORA_BIN");
	cr_assert_not_null(bin);
	static const char *const cases[][2] = {
		{"--json", "remora: error: writing JSON to stdout failed\n"},
		{"", "remora: error: writing the output failed\n"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char cmd[4096], out[1024];
		snprintf(cmd, sizeof(cmd), "'%s' -q simulate %s %s 2>&1 >/dev/full; echo \"exit $?\"", bin, seed_arg(),
			 cases[i][0]);
		FILE *p = popen(cmd, "r");
		cr_assert_not_null(p);
		size_t n = fread(out, 1, sizeof(out) - 1, p);
		out[n] = '\0';
		pclose(p);
		char want[256];
		snprintf(want, sizeof(want), "%sexit 1\n", cases[i][1]);
		cr_expect_str_eq(out, want, "simulate %s", cases[i][0]);
	}
}

/*
 * libfyaml 0.7.12 loops for ever on the two bytes "%\xd0" (a YAML directive line with malformed
 * UTF-8): as a scenario and as a --set value, every command refuses it with exit 1.
 */
Test(cli_errors, directive_line_is_refused_not_scanned, .timeout = 30)
{
	char dir[] = "/tmp/remora-directive-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char path[128];
	snprintf(path, sizeof(path), "%s/bad.yaml", dir);
	FILE *f = fopen(path, "wb");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite("%\xd0", 1, 2, f), 2);
	cr_assert_eq(fclose(f), 0);
	static const char *const cmds[] = {"simulate", "schedule", "search"};
	char args[1600], want[160];
	snprintf(want, sizeof(want), "%s:1:2: error: invalid YAML: a directive line (starting with '%%')", path);
	for (size_t i = 0; i < 3; i++) {
		snprintf(args, sizeof(args), "%s '%s'", cmds[i], path);
		run_result r = run_remora(args, true);
		cr_assert_eq(r.exit_code, 1, "%s: exit %d", args, r.exit_code);
		cr_assert(strstr(r.out, want), "%s: %s", args, r.out);
		free(r.out);
		snprintf(args, sizeof(args), "%s %s --set 'training.micro_batch=%%\xd0'", cmds[i], seed_arg());
		r = run_remora(args, true);
		cr_assert_eq(r.exit_code, 1, "%s: exit %d", args, r.exit_code);
		cr_assert(strstr(r.out, "malformed UTF-8"), "%s: %s", args, r.out);
		free(r.out);
	}
	remove(path);
	rmdir(dir);
}

Test(cli_errors, impossible_setups_exit_1)
{
	run_result r = run_remora("describe gpt-2 --seq-len 4096", true);
	cr_assert_eq(r.exit_code, 1);
	cr_assert(strstr(r.out, "exceeds the 1024 learned positions"), "%s", r.out);
	free(r.out);
	r = run_remora("describe no-such-model", true);
	cr_assert_eq(r.exit_code, 1);
	cr_assert(strstr(r.out, "unknown model 'no-such-model'"), "%s", r.out);
	free(r.out);
	r = run_remora("collective --op all-gather --bytes 1MiB --gpus 16", true);
	cr_assert_eq(r.exit_code, 1);
	cr_assert(strstr(r.out, "16 GPUs per node, but a h100-sxm node has 8"), "%s", r.out);
	free(r.out);
	r = run_remora("simulate /nonexistent/scenario.yaml", true);
	cr_assert_eq(r.exit_code, 1);
	cr_assert(strstr(r.out, "/nonexistent/scenario.yaml: error: cannot open"), "%s", r.out);
	free(r.out);
	char args[1400];
	snprintf(args, sizeof(args), "simulate %s --set training.micro_batch=lots", seed_arg());
	r = run_remora(args, true);
	cr_assert_eq(r.exit_code, 1);
	cr_assert(strstr(r.out, "--set training.micro_batch=lots: training.micro_batch: expected an integer"), "%s", r.out);
	free(r.out);
	snprintf(args, sizeof(args), "search %s --set search.max_candidates=50", seed_arg());
	r = run_remora(args, true);
	cr_assert_eq(r.exit_code, 1);
	cr_assert(strstr(r.out, "over search.max_candidates=50"), "%s", r.out);
	free(r.out);
	r = run_remora("hw show b200", true);
	cr_assert_eq(r.exit_code, 1);
	cr_assert(strstr(r.out, "unknown hardware profile 'b200'"), "%s", r.out);
	free(r.out);
}

/* A model at every documented cap of config.json (2^24 hidden, ffn and vocab, 4096 layers):
 * 8.07e18 parameters whose byte counts pass int64. describe refuses it instead of printing
 * negative sizes and exiting 0. */
Test(cli_errors, model_past_64_bit_sizes_exits_1)
{
	const char *data = getenv("REMORA_TEST_DATA");
	cr_assert_not_null(data);
	char args[1024];
	snprintf(args, sizeof(args), "describe '%s/configs/max-dimensions.json'", data);
	run_result r = run_remora(args, true);
	cr_assert_eq(r.exit_code, 1, "%s", r.out);
	cr_assert(strstr(r.out, "too large to represent: about 8.07e+18 parameters"), "%s", r.out);
	cr_assert_null(strstr(r.out, " -"), "%s", r.out);
	free(r.out);
}

/* A program written by `schedule` carries the hardware, power limit and kernels it was scheduled
 * for, so `run-program` prices it exactly as `simulate` does (the step time, to the last digit). */
static void step_line(const char *out, char *buf, size_t n)
{
	const char *s = strstr(out, "step time");
	cr_assert_not_null(s, "%s", out);
	const char *ms = strstr(s, " ms");
	cr_assert_not_null(ms);
	size_t len = (size_t)(ms - s);
	snprintf(buf, n, "%.*s", (int)(len < n ? len : n - 1), s);
}

Test(golden, schedule_then_run_program_prices_like_simulate)
{
	static const char *const sets[] = {"--set hardware.power_w=500", "--set training.attention_kernel=flash2",
					   "--set scheduler.mode=fsdp2", "--set hardware=h200-sxm"};
	for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++) {
		char args[2048], prog[64], a[128], b[128];
		snprintf(prog, sizeof(prog), "/tmp/remora-rt-%d.json", (int)getpid());
		snprintf(args, sizeof(args), "simulate %s %s", seed_arg(), sets[i]);
		run_result sim = run_remora(args, false);
		cr_assert_eq(sim.exit_code, 0);
		snprintf(args, sizeof(args), "schedule %s %s -o %s", seed_arg(), sets[i], prog);
		run_result sch = run_remora(args, false);
		cr_assert_eq(sch.exit_code, 0);
		snprintf(args, sizeof(args), "run-program %s", prog);
		run_result rp = run_remora(args, false);
		cr_assert_eq(rp.exit_code, 0, "%s", rp.out);
		step_line(sim.out, a, sizeof(a));
		step_line(rp.out, b, sizeof(b));
		/* "step time          474.752" in both (the column widths differ) */
		const char *na = strpbrk(a, "0123456789"), *nb = strpbrk(b, "0123456789");
		cr_assert_str_eq(na, nb, "%s: simulate '%s', run-program '%s'", sets[i], a, b);
		unlink(prog);
		free(sim.out);
		free(sch.out);
		free(rp.out);
	}
}

/* The numbered rows of `remora search`'s table, up to cap of them; returns how many. */
static int search_rows(const char *out, char rows[][200], int cap)
{
	const char *p = strstr(out, "\n  #   policy");
	cr_assert_not_null(p, "%s", out);
	p = strchr(p + 1, '\n');
	int n = 0;
	while (p && p[1] == ' ' && p[2] == ' ' && p[3] >= '0' && p[3] <= '9' && n < cap) {
		const char *e = strchr(p + 1, '\n');
		size_t len = e ? (size_t)(e - p - 1) : strlen(p + 1);
		snprintf(rows[n++], 200, "%.*s", (int)len, p + 1);
		p = e;
	}
	return n;
}

/* --top K shows K rows of the table even when runs of same candidates fold into one row, and
 * each row's "(+N same)" counts the whole run: the rows are those of the full table. */
Test(golden, search_top_shows_k_folded_rows, .timeout = 120)
{
	const char *data = getenv("REMORA_TEST_DATA");
	cr_assert_not_null(data);
	static char full[40][200], part[40][200];
	char args[1200];
	snprintf(args, sizeof(args), "search '%s/search-fold.yaml' --top 1000", data);
	run_result all = run_remora(args, false);
	cr_assert_eq(all.exit_code, 0, "%s", all.out);
	int n_full = search_rows(all.out, full, 40);
	cr_assert_geq(n_full, 7);
	/* the fixture's first 5 rows fold runs of 4 and 8, more than the first 4 x 5 candidates
	 * read for --top 5 */
	int folded = 0;
	for (int i = 0; i < 5; i++) {
		const char *same = strstr(full[i], "(+");
		folded += 1 + (same ? atoi(same + 2) : 0);
	}
	cr_assert_gt(folded, 20, "%d candidates in the first 5 rows", folded);
	for (int k = 5; k <= 6; k++) {
		snprintf(args, sizeof(args), "search '%s/search-fold.yaml' --top %d", data, k);
		run_result r = run_remora(args, false);
		cr_assert_eq(r.exit_code, 0, "%s", r.out);
		int n = search_rows(r.out, part, 40);
		cr_expect_eq(n, k, "--top %d showed %d rows:\n%s", k, n, r.out);
		for (int i = 0; i < n && i < n_full; i++)
			cr_expect_str_eq(part[i], full[i], "--top %d, row %d", k, i + 1);
		free(r.out);
	}
	free(all.out);
}

/* --top 1000 (the most it takes): the # column widens to the four digits of row 1000 and the
 * policy column narrows by one, so every row's "mb" column starts where the header's does. */
Test(golden, search_top_1000_keeps_the_columns, .timeout = 240)
{
	char args[1400];
	snprintf(args, sizeof(args), "search %s --jobs 2 --top 1000", seed_arg());
	run_result r = run_remora(args, false);
	cr_assert_eq(r.exit_code, 0, "%s", r.out);
	const char *head = strstr(r.out, "\n  #    policy ");
	cr_assert_not_null(head, "%s", r.out);
	head++;
	size_t mb_at = (size_t)(strstr(head, " mb flags") - head);
	static const char *const rows[] = {"\n  1    ", "\n  999  ", "\n  1000 "};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const char *row = strstr(head, rows[i]);
		cr_assert_not_null(row, "no row %s", rows[i] + 1);
		row++;
		/* the micro-batch right-aligned in 4 columns ending where "mb" does, then the flags */
		cr_expect(row[mb_at + 2] >= '1' && row[mb_at + 2] <= '9' && row[mb_at + 3] == ' ', "%.150s", row);
	}
	cr_expect_null(strstr(head, "\n  1001 "), "%s", head);
	/* past 1000 is refused */
	snprintf(args, sizeof(args), "search %s --top 1001", seed_arg());
	run_result e = run_remora(args, true);
	cr_expect_eq(e.exit_code, 2);
	cr_expect(strstr(e.out, "--top at most 1000"), "%s", e.out);
	free(e.out);
	free(r.out);
}

/* An XLA scenario without xla.version says which defaults it runs on; it was described as the
 * ideal runtime ("collectives on their own stream ... (not XLA)"). */
Test(golden, simulate_unversioned_xla_names_its_defaults)
{
	const char *data = getenv("REMORA_TEST_DATA");
	cr_assert_not_null(data);
	char args[1200];
	snprintf(args, sizeof(args), "simulate '%s/xla-unversioned.yaml'", data);
	run_result r = run_remora(args, false);
	cr_assert_eq(r.exit_code, 0, "%s", r.out);
	cr_expect(strstr(r.out, "XLA schedule (unrolled)"), "%s", r.out);
	cr_expect(strstr(r.out, "\n  XLA        remora's unversioned defaults (JAX 0.4.30's"), "%s", r.out);
	cr_expect_null(strstr(r.out, "not XLA"), "%s", r.out);
	free(r.out);
}

/* Capacity planning, narrowed to a few layouts so that it runs in about a second: Llama-3-8B on
 * 1T tokens and Llama-3-70B on 15T tokens, H100 against H200 at given prices. */
Test(golden, plan_llama3_8b_1t_text)
{
	golden("plan-llama-3-8b-1T.txt", "plan llama-3-8b --tokens 1T --hardware h100-sxm,h200-sxm --gpus 64 --tp 1,2 "
					 "--pp 1,2 --price h100-sxm=2.5,h200-sxm=3.4");
}

Test(golden, plan_llama3_70b_15t_json)
{
	golden("plan-llama-3-70b-15T.json", "plan llama-3-70b --tokens 15T --hardware h100-sxm,h200-sxm --gpus 1024 "
					    "--tp 4,8 --pp 1,2 --price h100-sxm=2.5,h200-sxm=3.4 --json");
}

/* Lines of text that start with prefix. */
static int count_lines(const char *text, const char *prefix)
{
	int n = 0;
	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		n += strncmp(p, prefix, strlen(prefix)) == 0;
	return n;
}

/* -vv: a line per candidate the sweep simulates, in index order; the first is the scenario as
 * written with search-seed.txt's figures for it (351.34 ms, 11658 tokens/s per GPU, 18.35 GiB:
 * 19699638272 B). -v adds none; on a pipe there is no progress line either. */
Test(golden, search_vv_logs_each_candidate)
{
	char args[1400];
	snprintf(args, sizeof(args),
		 "-vv search %s --set search.names=[] --set search.micro_batches=[1] --set search.flag_variants=[]", seed_arg());
	run_result r = run_remora(args, true);
	cr_assert_eq(r.exit_code, 0, "%s", r.out);
	cr_assert(strstr(r.out, ": 15 candidates in the space, 15 simulated now\n"), "%s", r.out);
	cr_assert_eq(count_lines(r.out, "remora: candidate "), 15, "%s", r.out);
	cr_assert(strstr(r.out, "\nremora: candidate 1/15: as written, mb 1, flags as given: step 351.34 ms, 11658 tok/s/GPU, "
				"peak 18.35 GiB\n") ||
			  strncmp(r.out, "remora: candidate 1/15: as written, mb 1, flags as given: step 351.34 ms", 70) == 0,
		  "%s", r.out);
	cr_assert(strstr(r.out, "remora: candidate 15/15: "), "%s", r.out);
	cr_assert(strstr(r.out, ", ideal runtime: step "), "%s", r.out);
	cr_assert_null(strstr(r.out, "\r"), "no progress line on a pipe");
	free(r.out);
	snprintf(args, sizeof(args),
		 "-v search %s --set search.names=[] --set search.micro_batches=[1] --set search.flag_variants=[]", seed_arg());
	r = run_remora(args, true);
	cr_assert_eq(r.exit_code, 0, "%s", r.out);
	cr_assert_eq(count_lines(r.out, "remora: candidate "), 0, "%s", r.out);
	free(r.out);
}

/* plan -vv: each search's header, then a line per candidate it simulates (2 layouts x 4
 * micro-batches and the scenario as written: 9), labelled with the layout's degrees. */
Test(golden, plan_vv_logs_each_candidate)
{
	run_result r = run_remora("-vv plan llama-2-7b --tokens 1G --gpus 8 --seq-len 1024 --global-batch 64 --tp 1,2 --pp 1 "
				  "--policy nothing_saveable",
				  true);
	cr_assert_eq(r.exit_code, 0, "%s", r.out);
	cr_assert(strstr(r.out, "remora: plan h100-sxm, 8 GPUs: 2 layouts x 1 policies x 4 micro-batches\n"), "%s", r.out);
	cr_assert_eq(count_lines(r.out, "remora: candidate "), 9, "%s", r.out);
	cr_assert(strstr(r.out, "remora: candidate 6/9: TP 2 (SP) x FSDP 4, nothing_saveable, mb 1: step "),
		  "%s", r.out);
	cr_assert_null(strstr(r.out, "\r"), "no progress line on a pipe");
	free(r.out);
}

/* A ResidualMLP model has no tensor-parallel layout: `--tp 2` alone says so, not that the
 * degrees divide nothing. */
Test(golden, plan_residual_mlp_tp_says_data_parallel_only)
{
	const char *data = getenv("REMORA_DATA_DIR");
	cr_assert_not_null(data);
	char args[1400];
	snprintf(args, sizeof(args), "plan '%s/scenarios/jax20763-mlp-model.json' --tokens 1G --gpus 8 --tp 2", data);
	run_result r = run_remora(args, true);
	cr_assert(strstr(r.out, "no layout: a ResidualMLP model is planned data-parallel only (remora splits no "
				"block of it across GPUs): --tp 1\n"),
		  "%s", r.out);
	cr_assert_null(strstr(r.out, "divide nothing"), "%s", r.out);
	free(r.out);
}

/* Under data parallelism without FSDP (the jax#20763 repro's 8 replicas) the ideal runtime the
 * search compares with is a data-parallel one, not FSDP. */
Test(golden, search_ddp_names_its_ideal_runtime_data_parallel)
{
	const char *data = getenv("REMORA_DATA_DIR");
	cr_assert_not_null(data);
	char args[1400];
	snprintf(args, sizeof(args),
		 "search '%s/scenarios/jax20763-toy-dp8-h100.yaml' --set 'search.policies=[nothing_saveable]' "
		 "--set 'search.micro_batches=[4]'",
		 data);
	run_result r = run_remora(args, true);
	cr_assert_eq(r.exit_code, 0, "%s", r.out);
	cr_assert(strstr(r.out, "  a hand-tuned data-parallel runtime (ideal mode: nothing_saveable, micro-batch 4) would "
				"reach "),
		  "%s", r.out);
	cr_assert_null(strstr(r.out, "hand-tuned FSDP"), "%s", r.out);
	free(r.out);
}

/* A ResidualMLP config's keys for attention or norms are read by nothing: each is warned about
 * at its line and column (tests/data/configs/residual-mlp-unused-keys.json). */
Test(golden, residual_mlp_warns_of_unused_keys)
{
	const char *data = getenv("REMORA_DATA_DIR");
	cr_assert_not_null(data);
	char args[1400];
	snprintf(args, sizeof(args), "describe '%s/../tests/data/configs/residual-mlp-unused-keys.json'", data);
	run_result r = run_remora(args, true);
	cr_assert_eq(r.exit_code, 0, "%s", r.out);
	cr_assert(strstr(r.out, "residual-mlp-unused-keys.json:7:26: num_attention_heads has no effect: a ResidualMLP "
				"block is x + W2 act(W1 x), with no attention, norm or experts\n"),
		  "%s", r.out);
	cr_assert(strstr(r.out, "residual-mlp-unused-keys.json:8:19: rms_norm_eps has no effect"), "%s", r.out);
	cr_assert(strstr(r.out, "(ResidualMLP): L=8 h=1024 heads=0"), "%s", r.out);
	free(r.out);
}

/* `plan --plot DIR`: one block per hardware of GPUs, days, GPU-hours and cost, where GPU-hours =
 * GPUs x days x 24 and an unpriced cost is gnuplot's missing value; the script names each block. */
Test(golden, plan_plot_points)
{
	char dir[] = "/tmp/remora-plan-plot-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char args[512];
	snprintf(args, sizeof(args),
		 "plan llama-2-7b --tokens 1G --gpus 8,16 --seq-len 1024 --global-batch 64 --tp 1 --pp 1 "
		 "--policy nothing_saveable --hardware h100-sxm,h200-sxm --price h100-sxm=2.5 --plot %s",
		 dir);
	run_result r = run_remora(args, false);
	cr_assert_eq(r.exit_code, 0, "%s", r.out);
	free(r.out);
	char path[600];
	snprintf(path, sizeof(path), "%s/points.dat", dir);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	char line[256];
	int rows = 0, blocks = 0;
	while (fgets(line, sizeof(line), f)) {
		if (line[0] == '#') {
			blocks += strstr(line, "h100-sxm") || strstr(line, "h200-sxm");
			continue;
		}
		long long gpus;
		double days, hours;
		char cost[32];
		if (sscanf(line, "%lld %lf %lf %31s", &gpus, &days, &hours, cost) != 4)
			continue;
		cr_assert(gpus == 8 || gpus == 16);
		cr_assert_float_eq(hours, (double)gpus * days * 24, 2e-3);
		/* h100 priced at 2.5 (the first block), h200 not */
		if (rows < 2)
			cr_assert_float_eq(atof(cost), 2.5 * hours, 5e-3);
		else
			cr_assert_str_eq(cost, "?");
		rows++;
	}
	fclose(f);
	cr_assert_eq(rows, 4);
	cr_assert_eq(blocks, 2);
	snprintf(path, sizeof(path), "%s/plots.gp", dir);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	char script[4096];
	size_t n = fread(script, 1, sizeof(script) - 1, f);
	script[n] = '\0';
	fclose(f);
	cr_assert(strstr(script, "index 1 using 1:2 with linespoints pt 7 title 'h200-sxm'"), "%s", script);
	/* each hardware's answer marked and labelled with the plan's own figures (the fewest GPU-hours
	 * at 8 or 16 GPUs: the label's GPUs are the marked point's), and PNGs where gnuplot can */
	for (int h = 0; h < 2; h++) {
		char key[64];
		snprintf(key, sizeof(key), "\nanswer%d_gpus = ", h);
		const char *at = strstr(script, key);
		cr_assert_not_null(at, "%s", script);
		long long g = atoll(at + strlen(key));
		cr_assert(g == 8 || g == 16, "%s", script);
		snprintf(key, sizeof(key), "set label %d \"answer on %s: %lld GPUs, ", h + 1, h ? "h200-sxm" : "h100-sxm", g);
		cr_assert(strstr(script, key), "no %s in %s", key, script);
	}
	cr_assert(strstr(script, "$answers using 1:2 with points"), "%s", script);
	cr_assert(strstr(script, "set terminal pngcairo"), "%s", script);
	cr_assert_null(strstr(script, "cost-vs-time"), "one hardware has no price: no cost plot");
	/* the ranges come from the data: GPUs 8 and 16 over log2 give [8/1.3, 16 x 1.3], a tic at
	 * each count */
	cr_assert(strstr(script, "\nset xrange [6.15385:20.8]\n"), "%s", script);
	cr_assert(strstr(script, "\nset xtics (8, 16)\n"), "%s", script);
	/* one GPU count, both priced: no empty range for gnuplot to warn of ([4:16] around 8), the
	 * cost axis says what its unit is, and the table says where the cost comes from */
	snprintf(args, sizeof(args),
		 "plan llama-2-7b --tokens 1G --gpus 8 --seq-len 1024 --global-batch 64 --tp 1 --pp 1 "
		 "--policy nothing_saveable --hardware h100-sxm,h200-sxm --price h100-sxm=2.5,h200-sxm=3.5 --plot %s",
		 dir);
	r = run_remora(args, true);
	cr_assert_eq(r.exit_code, 0, "%s", r.out);
	cr_expect_null(strstr(r.out, "Warning"), "%s", r.out);
	cr_expect(strstr(r.out, "\nh100-sxm  (cost in price units: --price 2.5 per GPU-hour x GPU-hours)\n"), "%s", r.out);
	free(r.out);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	static char script2[8192];
	n = fread(script2, 1, sizeof(script2) - 1, f);
	script2[n] = '\0';
	fclose(f);
	cr_expect(strstr(script2, "\nset xrange [4:16]\n"), "%s", script2);
	cr_expect(strstr(script2, "\nset ylabel 'cost (price units: --price per GPU-hour x GPU-hours)'\n"), "%s", script2);
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

/* `remora plan` refuses bad usage with exit 2 and says what is wrong. */
Test(golden, plan_usage_errors)
{
	static const struct {
		const char *args, *needle;
	} cases[] = {
		{"plan llama-3-8b --hardware h100-sxm,h100-sxm", "an entry is given twice"},
		{"plan llama-3-8b --hardware h100-sxm,", "an empty entry"},
		{"plan llama-3-8b --gpus 8,16,8", "an entry is given twice"},
		{"plan llama-3-8b --db ''", "an empty file name"},
		{"plan llama-3-8b --jobs 100000", "at most 1024 threads"},
		{"plan llama-3-8b --tokens 1T --deadline 30", "give a unit"},
		{"plan llama-3-8b --gpus 8 --max-gpus 64", "one or the other"},
		{"plan llama-3-8b --tokens 1T --budget 100 --hardware h100-sxm,h200-sxm --price h100-sxm=2",
		 "h200-sxm has none"},
		{"plan llama-3-8b --price h100-sxm=2,h100-sxm=3", "h100-sxm is priced twice"},
		/* strtod would read these as 0, 16 and 2 */
		{"plan llama-3-8b --gpus 8 --tp 1 --pp 1 --tokens 1T --price h100-sxm=", "expected HARDWARE=PRICE"},
		{"plan llama-3-8b --gpus 8 --tp 1 --pp 1 --tokens 1T --budget 0x10 --price h100-sxm=2", "expected a positive amount"},
		{"plan llama-3-8b --gpus 8 --tp 1 --pp 1 --tokens 1T --price h100-sxm=0x2", "expected HARDWARE=PRICE"},
		{"plan llama-3-8b --gpus 8 --tp 1 --pp 1 --tokens 1T --deadline 0x10d", "is not a duration"},
		{"plan llama-3-8b --gpus 8 --tp 1 --pp 1 --shard ' 1/2' --db /tmp/remora-no-such-dir/s.db", "K/N with 1 <= K"},
		{"plan llama-3-8b --gpus 8 --tp 1 --pp 1 --shard 1/+2 --db /tmp/remora-no-such-dir/s.db", "K/N with 1 <= K"},
		{"plan llama-3-8b --global-batch 64:32", "below its bottom"},
		{"plan llama-3-8b --tokens 1T --plot /etc/hostname", "not a folder"},
		{"plan llama-3-8b --tokens 1T --shard 1/2 --db /tmp/remora-no-such-dir/s.db --scaling",
		 "one shard cannot know"},
		{"bench plan --gpus 8,8", "8 is given twice"},
		{"bench plan --gpus 8,,16", "a list of GPU counts"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		run_result r = run_remora(cases[i].args, true);
		cr_assert_eq(r.exit_code, 2, "%s: exit %d (%s)", cases[i].args, r.exit_code, r.out);
		cr_assert(strstr(r.out, cases[i].needle), "%s: '%s' lacks '%s'", cases[i].args, r.out, cases[i].needle);
		free(r.out);
	}
	/* a taper no fabric has, refused by the fabric's own check */
	run_result r = run_remora("collective --op all-gather --bytes 1GiB --gpus 16 --nodes 2 --topology rail_optimized "
				  "--tier 1 --tier 2:1e308",
				  true);
	cr_assert_eq(r.exit_code, 2, "%s", r.out);
	cr_assert(strstr(r.out, "expected a ratio from 1 (non-blocking) to 64"), "%s", r.out);
	free(r.out);
}

/* An HGX 4-GPU board (--nvlink-mesh 4): 2 of its H200s all-gather 128 MiB over their own 6 links,
 * 120 GB/s of graph busBW (tests/test_nccl.c mesh_board_pairs_ride_their_own_links) at the
 * measured size efficiency; 8 channels; a node bigger than the board is bad usage. */
Test(golden, collective_on_a_mesh_board)
{
	run_result r = run_remora("collective --op all-gather --bytes 128MiB --gpus 2 --hardware h200-sxm --nvlink-mesh 4",
				  false);
	cr_assert_eq(r.exit_code, 0, "%s", r.out);
	cr_assert(strstr(r.out, "board     4 GPUs joined NVLink to NVLink, no NVSwitch: 6 links to each peer"), "%s",
		  r.out);
	cr_assert(strstr(r.out, "time      612.17 us"), "%s", r.out);
	cr_assert(strstr(r.out, "Ring, protocol Simple, 8 channels"), "%s", r.out);
	free(r.out);
	r = run_remora("collective --op all-gather --bytes 128MiB --gpus 8 --hardware h200-sxm --nvlink-mesh 4", true);
	cr_assert_eq(r.exit_code, 2, "%s", r.out);
	cr_assert(strstr(r.out, "8 GPUs per node do not fit one board"), "%s", r.out);
	free(r.out);
}

/* A merge that fails leaves no OUT behind when there was none (and touches an existing one not). */
Test(golden, merge_failure_creates_nothing)
{
	char dir[] = "/tmp/remora-merge-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char args[600], out[300];
	snprintf(out, sizeof(out), "%s/out.db", dir);
	snprintf(args, sizeof(args), "merge %s %s/missing.db", out, dir);
	run_result r = run_remora(args, true);
	cr_assert_eq(r.exit_code, 1, "%s", r.out);
	free(r.out);
	cr_assert_neq(access(out, F_OK), 0, "a failed merge left %s", out);
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

/* `remora compare` on the seed and the hand-written three-step trace (tests/data/trace/compare.json),
 * run from the source root so the printed paths are the relative ones given. */
Test(golden, compare_seed_text)
{
	const char *data = getenv("REMORA_DATA_DIR");
	cr_assert_not_null(data);
	static char root[1200];
	snprintf(root, sizeof(root), "%s/..", data);
	run_cwd = root;
	golden("compare-seed.txt",
	       "compare data/scenarios/seed-llama2-7b-fsdp8-h100.yaml --measured tests/data/trace/compare.json");
	run_cwd = NULL;
}

/* An output the search cannot write is refused before the sweep runs (none of its table is
 * printed), not found unwritable after it: a --trace in a missing folder, a --plot that is a
 * file (left as it was). */
Test(golden, search_refuses_unwritable_outputs_before_the_sweep)
{
	char args[1400];
	snprintf(args, sizeof(args), "search %s --trace /nonexistent-remora-dir/w.json", seed_arg());
	run_result r = run_remora(args, true);
	cr_assert_eq(r.exit_code, 1, "%s", r.out);
	cr_expect(strstr(r.out, "cannot create a file in /nonexistent-remora-dir"), "%s", r.out);
	cr_expect_null(strstr(r.out, "best plan"), "%s", r.out);
	free(r.out);
	char keep[] = "/tmp/remora-plot-file-XXXXXX";
	int fd = mkstemp(keep);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "keep", 4), 4);
	close(fd);
	snprintf(args, sizeof(args), "search %s --plot %s", seed_arg(), keep);
	r = run_remora(args, true);
	cr_assert_eq(r.exit_code, 2, "%s", r.out);
	cr_expect(strstr(r.out, "not a folder"), "%s", r.out);
	cr_expect_null(strstr(r.out, "best plan"), "%s", r.out);
	free(r.out);
	char buf[8] = "";
	FILE *f = fopen(keep, "r");
	cr_assert_not_null(f);
	cr_assert_eq(fread(buf, 1, 4, f), 4);
	fclose(f);
	cr_expect_str_eq(buf, "keep");
	unlink(keep);
}
