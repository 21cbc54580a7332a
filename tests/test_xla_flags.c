/* XLA_FLAGS parsing: the seed report's flags verbatim, defaults, absl forms, errors by column. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <string.h>

#include "remora/scenario.h"
#include "remora/xla_flags.h"

/* docs/reference/seed.md 'Setup', the XLA flags verbatim, as one XLA_FLAGS string */
static const char *seed_flags =
	"--xla_gpu_graph_level=0 --xla_gpu_enable_latency_hiding_scheduler=true "
	"--xla_gpu_enable_all_gather_combine_by_dim=false "
	"--xla_gpu_enable_reduce_scatter_combine_by_dim=false "
	"--xla_gpu_enable_pipelined_all_gather=true --xla_gpu_enable_pipelined_reduce_scatter=true "
	"--xla_gpu_enable_pipelined_all_reduce=true --xla_gpu_enable_pipelined_collectives=false "
	"--xla_gpu_enable_while_loop_double_buffering=true "
	"--xla_gpu_enable_highest_priority_async_stream=true "
	"--xla_gpu_all_reduce_combine_threshold_bytes=2147483648 "
	"--xla_gpu_all_gather_combine_threshold_bytes=2147483648 "
	"--xla_gpu_reduce_scatter_combine_threshold_bytes=2147483648 "
	"--xla_gpu_disable_async_collectives=collectivebroadcast,alltoall,collectivepermute";

Test(xla_flags, seed_report_flags)
{
	rm_xla_flags f = rm_xla_flags_default();
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_xla_flags_parse(seed_flags, &f, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(f.graph_level, 0);
	cr_assert(f.latency_hiding_scheduler);
	cr_assert_not(f.all_gather_combine_by_dim);
	/* the umbrella --xla_gpu_enable_pipelined_collectives=false does not undo the three
	 * specific flags: XLA ORs them */
	cr_assert_not(f.pipelined_collectives);
	cr_assert(rm_xla_pipelines_all_gather(&f));
	cr_assert(rm_xla_pipelines_reduce_scatter(&f));
	cr_assert(rm_xla_pipelines_all_reduce(&f));
	cr_assert(f.while_loop_double_buffering);
	cr_assert_eq(f.all_gather_combine_threshold_bytes, 2147483648LL);
	cr_assert(f.async_disabled[RM_XLA_COLLECTIVEBROADCAST]);
	cr_assert(f.async_disabled[RM_XLA_ALLTOALL]);
	cr_assert(f.async_disabled[RM_XLA_COLLECTIVEPERMUTE]);
	cr_assert_not(f.async_disabled[RM_XLA_ALLGATHER]);
	cr_assert_eq(f.memory_limit_slop_factor, 95, "XLA's default");
	cr_assert_eq(f.n_unmodelled, 0);
}

Test(xla_flags, absl_forms_quotes_and_unmodelled)
{
	rm_xla_flags f = rm_xla_flags_default();
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_xla_flags_parse("  --xla_gpu_enable_while_loop_double_buffering\n"
					"-xla_gpu_memory_limit_slop_factor=110 "
					"--noxla_gpu_enable_latency_hiding_scheduler "
					"--xla_gpu_enable_command_buffer='' "
					"--xla_gpu_experimental_parallel_collective_overlap_limit=\"2\" "
					"--xla_gpu_enable_triton_gemm=false --xla_gpu_enable_triton_gemm=true",
					&f, &err),
		     RM_OK, "%s", err.msg);
	cr_assert(f.while_loop_double_buffering);
	cr_assert_eq(f.memory_limit_slop_factor, 110);
	cr_assert_not(f.latency_hiding_scheduler);
	cr_assert(f.command_buffer_disabled);
	cr_assert_eq(f.parallel_collective_overlap_limit, 2);
	cr_assert_eq(f.n_unmodelled, 1, "unmodelled flags are recorded once");
	cr_assert_str_eq(f.unmodelled[0], "xla_gpu_enable_triton_gemm");
	rm_xla_flags_warn_unmodelled(&f);
}

Test(xla_flags, format_lists_what_differs_from_default)
{
	rm_xla_flags f = rm_xla_flags_default();
	char buf[1024];
	cr_assert_str_eq(rm_xla_flags_format(&f, buf, sizeof(buf)), "");
	rm_error err;
	cr_assert_eq(rm_xla_flags_parse("--xla_gpu_memory_limit_slop_factor=120 "
					"--xla_gpu_disable_async_collectives=allgather,reducescatter",
					&f, &err),
		     RM_OK);
	cr_assert_str_eq(rm_xla_flags_format(&f, buf, sizeof(buf)),
			 "--xla_gpu_memory_limit_slop_factor=120 "
			 "--xla_gpu_disable_async_collectives=allgather,reducescatter");
	rm_xla_flags g = rm_xla_flags_default();
	cr_assert_eq(rm_xla_flags_parse(buf, &g, &err), RM_OK);
	cr_assert_eq(memcmp(g.async_disabled, f.async_disabled, sizeof(f.async_disabled)), 0);
	cr_assert_eq(g.memory_limit_slop_factor, 120);
}

static void expect_error(const char *text, rm_status st, int column, const char *needle)
{
	rm_xla_flags f = rm_xla_flags_default();
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_xla_flags_parse(text, &f, &err), st, "%s: %s", text, err.msg);
	cr_assert_eq(err.column, column, "%s: column %d (%s)", text, err.column, err.msg);
	cr_assert(strstr(err.msg, needle), "%s: '%s' lacks '%s'", text, err.msg, needle);
}

Test(xla_flags, malformed_flags_name_the_flag)
{
	expect_error("--xla_gpu_memory_limit_slop_factor=abc", RM_INVALID, 1,
		     "--xla_gpu_memory_limit_slop_factor expects an integer, got 'abc'");
	expect_error("--xla_gpu_enable_latency_hiding_scheduler=true xla_gpu_graph_level=0", RM_PARSE, 48,
		     "'xla_gpu_graph_level=0' is not a flag");
	expect_error("--xla_gpu_enable_pipelined_all_gather=yes", RM_INVALID, 1, "expects true or false, got 'yes'");
	expect_error("--xla_gpu_disable_async_collectives=allgatherr", RM_INVALID, 1,
		     "unknown collective kind 'allgatherr'");
	expect_error("--jax_enable_x64=true", RM_INVALID, 1, "is not an XLA flag");
	expect_error("--xla_gpu_memory_limit_slop_factor=0", RM_RANGE, 1, "outside [1, 1000]");
	expect_error("--xla_gpu_graph_level='0", RM_PARSE, 1, "unterminated quote");
	expect_error("--=1", RM_PARSE, 1, "has no flag name");
}

/* ---- version profiles (schedules/xla_versions.c, docs/xla-versions.md) ---- */

static rm_xla_flags at_version(const char *name, bool hopper)
{
	int i = rm_xla_version_find(name);
	cr_assert_geq(i, 0, "profile %s", name);
	return rm_xla_flags_for_version(i, hopper);
}

Test(xla_versions, known_versions_and_their_commits)
{
	char buf[256];
	cr_assert_str_eq(rm_xla_version_list(buf, sizeof(buf)), "0.4.30, 0.4.35, 0.5.3, 0.6.2, 0.7.2, 0.8.3, 0.11.0");
	cr_assert_eq(rm_xla_version_find(""), 0, "the unversioned defaults");
	cr_assert_eq(rm_xla_version_find("0.4.31"), -1, "no nearest-match guessing");
	cr_assert_eq(rm_xla_version_find("0.4"), -1);
	cr_assert_null(rm_xla_version_at(rm_xla_version_count()));
	/* XLA_COMMIT in jax-ml/jax third_party/xla/workspace.bzl (revision.bzl from 0.7) at the tags */
	cr_assert_str_eq(rm_xla_version_at(rm_xla_version_find("0.4.30"))->xla_commit,
			 "79fd5733f99b3c0948d7202bc1bbe1ee3980da5c");
	cr_assert_str_eq(rm_xla_version_at(rm_xla_version_find("0.4.35"))->xla_commit,
			 "76da730179313b3bebad6dea6861768421b7358c");
	cr_assert_str_eq(rm_xla_version_at(rm_xla_version_find("0.5.3"))->xla_commit,
			 "df971129bd82e381954da0185b534220e21798a4");
	cr_assert_str_eq(rm_xla_version_at(rm_xla_version_find("0.6.2"))->xla_commit,
			 "3d5ece64321630dade7ff733ae1353fc3c83d9cc");
	cr_assert_str_eq(rm_xla_version_at(rm_xla_version_find("0.7.2"))->xla_commit,
			 "0fccb8a6037019b20af2e502ba4b8f5e0f98c8f6");
	cr_assert_str_eq(rm_xla_version_at(rm_xla_version_find("0.11.0"))->xla_commit,
			 "131bf41acb4650e4391a640c3f1859c1c86ad74b");
}

Test(xla_versions, unversioned_defaults_are_remoras_previous_ones)
{
	rm_xla_flags f = rm_xla_flags_default();
	cr_assert_eq(f.version, 0);
	cr_assert(f.lhs_flag && f.latency_hiding_scheduler);
	cr_assert_not(f.pipelined_all_gather || f.pipelined_reduce_scatter || f.pipelined_all_reduce);
	cr_assert(f.all_gather_combine_by_dim && f.reduce_scatter_combine_by_dim);
	cr_assert_eq(f.all_gather_combine_threshold_bytes, 30 << 20);
	cr_assert_eq(f.memory_limit_slop_factor, 95);
	cr_assert_eq(f.parallel_collective_overlap_limit, 1);
	cr_assert_eq(f.graph_level, 1);
	cr_assert_not(f.analytical_sol_latency_estimator);
	/* every modelled flag is known there */
	rm_error err;
	cr_assert_eq(rm_xla_flags_parse("--xla_gpu_experimental_parallel_collective_overlap_limit=2 "
					"--xla_gpu_enable_pipelined_collectives=true --xla_gpu_graph_level=0 "
					"--xla_gpu_enable_analytical_sol_latency_estimator=true",
					&f, &err),
		     RM_OK, "%s", err.msg);
}

Test(xla_versions, defaults_as_debug_options_flags_cc_sets_them)
{
	/* 0.4.30, debug_options_flags.cc at 79fd573: kDefaultThreshold = 30 * 1024 * 1024 (line 126),
	 * combine_by_dim true (130-131), LHS false (156), no pipelining (163-166) */
	rm_xla_flags f = at_version("0.4.30", true);
	cr_assert_not(f.lhs_flag);
	cr_assert_not(f.latency_hiding_scheduler);
	cr_assert(f.all_gather_combine_by_dim && f.reduce_scatter_combine_by_dim);
	cr_assert_not(f.pipelined_reduce_scatter);
	cr_assert_eq(f.reduce_scatter_combine_threshold_bytes, 31457280);
	cr_assert_not(f.while_loop_double_buffering);
	cr_assert(f.highest_priority_async_stream);
	/* 0.4.35 at 76da730: all-gather combine_by_dim false, reduce-scatter's still true,
	 * reduce-scatter pipelined, kDefault*CombineThreshold = 30 * 1024 * 1024 + 7 */
	f = at_version("0.4.35", true);
	cr_assert_not(f.all_gather_combine_by_dim);
	cr_assert(f.reduce_scatter_combine_by_dim);
	cr_assert(f.pipelined_reduce_scatter);
	cr_assert_not(f.pipelined_all_gather || f.pipelined_all_reduce);
	cr_assert_eq(f.all_gather_combine_threshold_bytes, 31457287);
	cr_assert_eq(f.all_reduce_combine_threshold_bytes, 31457287);
	cr_assert_not(f.latency_hiding_scheduler);
	/* 0.5.3 at df97112: reduce-scatter combine_by_dim false too; SoL estimator off */
	f = at_version("0.5.3", true);
	cr_assert_not(f.reduce_scatter_combine_by_dim);
	cr_assert_not(f.analytical_sol_latency_estimator);
	cr_assert_not(f.latency_hiding_scheduler);
	/* 0.7.2 at 0fccb8a: SoL estimator on, and on Hopper it turns LHS on (IsLHSEnabled) */
	f = at_version("0.7.2", true);
	cr_assert(f.analytical_sol_latency_estimator);
	cr_assert_not(f.lhs_flag);
	cr_assert(f.latency_hiding_scheduler);
	cr_assert_eq(f.memory_limit_slop_factor, 95);
	cr_assert_eq(f.parallel_collective_overlap_limit, 1);
	f = at_version("0.7.2", false);
	cr_assert_not(f.latency_hiding_scheduler, "an A100 has no SoL estimator: LHS stays off");
	f = at_version("0.11.0", true);
	cr_assert(f.latency_hiding_scheduler && f.pipelined_reduce_scatter && !f.all_gather_combine_by_dim);
}

Test(xla_versions, what_turns_lhs_on)
{
	rm_error err;
	/* a PGLE profile: from 0.5 (IsLHSEnabled), not at 0.4.35 (the flag alone) */
	rm_xla_flags f = at_version("0.5.3", true);
	cr_assert_eq(rm_xla_flags_parse("--xla_gpu_pgle_profile_file_or_directory_path=/p.pbtxt", &f, &err), RM_OK);
	cr_assert(f.latency_hiding_scheduler);
	cr_assert_str_eq(rm_xla_lhs_reason(&f), "on: a PGLE profile is given");
	f = at_version("0.4.35", true);
	cr_assert_eq(rm_xla_flags_parse("--xla_gpu_pgle_profile_file_or_directory_path=/p.pbtxt", &f, &err), RM_OK);
	cr_assert_not(f.latency_hiding_scheduler);
	/* 0.7.2: the SoL estimator's escape hatch turns it off again */
	f = at_version("0.7.2", true);
	cr_assert_str_eq(rm_xla_lhs_reason(&f), "on: the SoL latency estimator on Hopper or newer");
	cr_assert_eq(rm_xla_flags_parse("--xla_gpu_enable_analytical_sol_latency_estimator=false", &f, &err), RM_OK);
	cr_assert_not(f.latency_hiding_scheduler);
	cr_assert_eq(rm_xla_flags_parse("--xla_gpu_enable_latency_hiding_scheduler", &f, &err), RM_OK);
	cr_assert(f.latency_hiding_scheduler);
	cr_assert_str_eq(rm_xla_lhs_reason(&f), "on: --xla_gpu_enable_latency_hiding_scheduler");
}

static void expect_absent(const char *version, const char *text, int column, const char *flag)
{
	rm_xla_flags f = at_version(version, true);
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_xla_flags_parse(text, &f, &err), RM_UNSUPPORTED, "%s under %s: %s", text, version, err.msg);
	cr_assert_eq(err.column, column, "%s: column %d (%s)", text, err.column, err.msg);
	char want[256];
	snprintf(want, sizeof(want), "--%s is not a flag of the XLA in JAX %s (openxla/xla ", flag, version);
	cr_assert(strstr(err.msg, want), "'%s' lacks '%s'", err.msg, want);
	cr_assert(strstr(err.msg, "Unknown flag in XLA_FLAGS"), "%s", err.msg);
}

Test(xla_versions, a_flag_the_version_lacks_is_refused)
{
	/* added after 0.4.30 */
	expect_absent("0.4.30", "--xla_gpu_memory_limit_slop_factor=90 --xla_gpu_experimental_parallel_collective_overlap_limit=2",
		      39, "xla_gpu_experimental_parallel_collective_overlap_limit");
	expect_absent("0.4.35", "--xla_gpu_enable_analytical_sol_latency_estimator=true", 1,
		      "xla_gpu_enable_analytical_sol_latency_estimator");
	/* the seed report's own flags: the umbrella is gone after 0.5.3, graph_level after 0.6.2 */
	expect_absent("0.6.2", "--noxla_gpu_enable_pipelined_collectives", 1, "xla_gpu_enable_pipelined_collectives");
	expect_absent("0.7.2", seed_flags, 1, "xla_gpu_graph_level");
	rm_xla_flags f = at_version("0.4.35", true);
	rm_error err;
	cr_assert_eq(rm_xla_flags_parse("--xla_gpu_experimental_parallel_collective_overlap_limit=2", &f, &err), RM_OK,
		     "0.4.35 has the flag: %s", err.msg);
	cr_assert_eq(f.parallel_collective_overlap_limit, 2);
	f = at_version("0.5.3", true);
	cr_assert_eq(rm_xla_flags_parse(seed_flags, &f, &err), RM_OK, "0.5.3 takes the seed's flags: %s", err.msg);
}

Test(xla_versions, format_is_relative_to_the_versions_defaults)
{
	char buf[1024];
	rm_xla_flags f = at_version("0.4.30", true);
	rm_error err;
	cr_assert_eq(rm_xla_flags_parse("--xla_gpu_enable_latency_hiding_scheduler=true", &f, &err), RM_OK);
	cr_assert_str_eq(rm_xla_flags_format(&f, buf, sizeof(buf)), "--xla_gpu_enable_latency_hiding_scheduler=true");
	/* 0.7.2 runs LHS without the flag: nothing to write */
	f = at_version("0.7.2", true);
	cr_assert_str_eq(rm_xla_flags_format(&f, buf, sizeof(buf)), "");
	cr_assert_eq(rm_xla_flags_parse("--xla_gpu_enable_analytical_sol_latency_estimator=false "
					"--xla_gpu_enable_reduce_scatter_combine_by_dim=true",
					&f, &err),
		     RM_OK);
	cr_assert_str_eq(rm_xla_flags_format(&f, buf, sizeof(buf)),
			 "--xla_gpu_enable_reduce_scatter_combine_by_dim=true "
			 "--xla_gpu_enable_analytical_sol_latency_estimator=false");
	rm_xla_flags g = at_version("0.7.2", true);
	cr_assert_eq(rm_xla_flags_parse(buf, &g, &err), RM_OK);
	cr_assert_eq(g.latency_hiding_scheduler, f.latency_hiding_scheduler);
	cr_assert_eq(g.reduce_scatter_combine_by_dim, f.reduce_scatter_combine_by_dim);
}

/* format_keep writes a flag the user gave even where it equals the release's default (0.4.30:
 * pipelined collectives false, highest-priority async stream true), and the others as format does. */
Test(xla_versions, format_keep_writes_the_flags_given_at_their_default)
{
	char buf[1024];
	rm_xla_flags f = at_version("0.4.30", true);
	rm_error err;
	cr_assert_eq(rm_xla_flags_parse("--xla_gpu_enable_pipelined_collectives=false "
					"--xla_gpu_enable_highest_priority_async_stream=true "
					"--xla_gpu_enable_while_loop_double_buffering=true",
					&f, &err),
		     RM_OK, "%s", err.msg);
	cr_assert_str_eq(rm_xla_flags_format(&f, buf, sizeof(buf)), "--xla_gpu_enable_while_loop_double_buffering=true");
	cr_assert_str_eq(rm_xla_flags_format_keep(&f, f.given, buf, sizeof(buf)),
			 "--xla_gpu_enable_pipelined_collectives=false --xla_gpu_enable_while_loop_double_buffering=true "
			 "--xla_gpu_enable_highest_priority_async_stream=true");
	/* a flag not given and at its default stays out */
	cr_assert_null(strstr(buf, "pipelined_all_gather"));
	/* an empty keep is format */
	char plain[1024];
	cr_assert_str_eq(rm_xla_flags_format_keep(&f, 0, buf, sizeof(buf)), rm_xla_flags_format(&f, plain, sizeof(plain)));
}

Test(xla_versions, flag_names_follow_the_map)
{
	cr_assert_str_eq(rm_xla_flag_name(RM_XLA_FLAG_LATENCY_HIDING_SCHEDULER), "xla_gpu_enable_latency_hiding_scheduler");
	cr_assert_str_eq(rm_xla_flag_name(RM_XLA_FLAG_GRAPH_LEVEL), "xla_gpu_graph_level");
	cr_assert_str_eq(rm_xla_flag_name(RM_XLA_FLAG_COUNT), "unknown");
	/* each name parses as its own flag and sets its own bit */
	for (int i = 0; i < RM_XLA_FLAG_COUNT; i++) {
		static const char *const value[RM_XLA_FLAG_COUNT] = {
			[RM_XLA_FLAG_DISABLE_ASYNC_COLLECTIVES] = "allgather",
			[RM_XLA_FLAG_COMMAND_BUFFER] = "",
			[RM_XLA_FLAG_PGLE_PROFILE] = "/p",
		};
		char text[160];
		const char *v = value[i] ? value[i] : "1";
		snprintf(text, sizeof(text), "--%s=%s", rm_xla_flag_name((rm_xla_flag_id)i), v);
		rm_xla_flags f = rm_xla_flags_default();
		rm_error err;
		cr_assert_eq(rm_xla_flags_parse(text, &f, &err), RM_OK, "%s: %s", text, err.msg);
		cr_assert_eq(f.given, UINT32_C(1) << i, "%s", text);
		cr_assert_eq(f.n_unmodelled, 0, "%s", text);
	}
}

Test(xla_versions, parsed_not_modelled_flags_are_reported_once, .init = cr_redirect_stderr)
{
	rm_xla_flags f = at_version("0.5.3", true);
	rm_error err;
	cr_assert_eq(rm_xla_flags_parse("--xla_gpu_graph_level=0 --xla_gpu_enable_command_buffer= --xla_gpu_graph_level=1 "
					"--xla_gpu_memory_limit_slop_factor=90",
					&f, &err),
		     RM_OK);
	rm_xla_flags_warn_unmodelled(&f);
	fflush(stderr);
	cr_assert_stderr_eq_str("remora: warning: XLA_FLAGS: 2 flag(s) parsed, not modelled: --xla_gpu_graph_level, "
				"--xla_gpu_enable_command_buffer (remora models neither CUDA graphs nor command buffers "
				"and reads no PGLE profile's costs)\n");
}

Test(xla_versions, modelled_flags_raise_no_warning, .init = cr_redirect_stderr)
{
	rm_xla_flags f = at_version("0.5.3", true);
	rm_error err;
	cr_assert_eq(rm_xla_flags_parse("--xla_gpu_memory_limit_slop_factor=90 --xla_gpu_enable_pipelined_all_gather", &f,
					&err),
		     RM_OK);
	rm_xla_flags_warn_unmodelled(&f);
	fflush(stderr);
	cr_assert_stderr_eq_str("");
}

/* ---- the scenario key xla.version ---- */

static rm_status resolve_text(const char *text, const char *set, rm_scenario_resolved *res, rm_error *err)
{
	rm_scenario sc;
	rm_error_clear(err);
	rm_scenario_init(&sc);
	rm_status st = rm_scenario_parse(text, strlen(text), "v.yaml", &sc, err);
	if (st == RM_OK && set)
		st = rm_scenario_set(&sc, set, err);
	return st == RM_OK ? rm_scenario_resolve(&sc, NULL, res, err) : st;
}

Test(xla_version_key, selects_the_profile_and_flags_go_on_top)
{
	rm_scenario_resolved r;
	rm_error err;
	const char *text = "model: llama-2-7b\nxla:\n  version: \"0.4.35\"\n"
			   "xla_flags: --xla_gpu_enable_latency_hiding_scheduler=true\n";
	cr_assert_eq(resolve_text(text, NULL, &r, &err), RM_OK, "%s", err.msg);
	cr_assert_str_eq(rm_xla_version_at(r.flags.version)->name, "0.4.35");
	cr_assert(r.flags.hopper, "h100-sxm is Hopper");
	cr_assert(r.flags.latency_hiding_scheduler, "the user's flag over the version's false");
	cr_assert(r.flags.pipelined_reduce_scatter, "0.4.35's default");
	cr_assert_not(r.flags.all_gather_combine_by_dim, "0.4.35's default");
	cr_assert_eq(r.sched.flags.all_gather_combine_threshold_bytes, 31457287, "the scheduler gets them");
	char d435[RM_SHA256_HEX];
	rm_scenario_resolved_digest(&r, d435);
	rm_scenario_resolved_finish(&r);
	/* --set changes the version, and the run's digest with it */
	cr_assert_eq(resolve_text(text, "xla.version=0.5.3", &r, &err), RM_OK, "%s", err.msg);
	cr_assert_str_eq(rm_xla_version_at(r.flags.version)->name, "0.5.3");
	cr_assert_not(r.flags.reduce_scatter_combine_by_dim);
	char d053[RM_SHA256_HEX];
	rm_scenario_resolved_digest(&r, d053);
	cr_assert_str_neq(d435, d053);
	rm_scenario_resolved_finish(&r);
	/* absent: the unversioned defaults */
	cr_assert_eq(resolve_text("model: llama-2-7b\n", NULL, &r, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(r.flags.version, 0);
	cr_assert(r.flags.latency_hiding_scheduler);
	rm_scenario_resolved_finish(&r);
	/* an A100 under 0.7.2: no SoL estimator, so no LHS */
	cr_assert_eq(resolve_text("model: llama-2-7b\nhardware: a100-sxm-80gb\nxla: {version: 0.7.2}\n", NULL, &r, &err),
		     RM_OK, "%s", err.msg);
	cr_assert_not(r.flags.hopper);
	cr_assert_not(r.flags.latency_hiding_scheduler);
	rm_scenario_resolved_finish(&r);
}

Test(xla_version_key, unknown_versions_and_absent_flags_are_errors)
{
	rm_scenario_resolved r;
	rm_error err;
	cr_assert_eq(resolve_text("model: llama-2-7b\nxla:\n  version: 0.4.31\n", NULL, &r, &err), RM_INVALID);
	cr_assert_str_eq(err.file, "v.yaml");
	cr_assert_eq(err.line, 3);
	cr_assert_eq(err.column, 12);
	cr_assert_str_eq(err.msg, "xla.version: unknown version \"0.4.31\" (known: 0.4.30, 0.4.35, 0.5.3, 0.6.2, 0.7.2, "
				  "0.8.3, 0.11.0)");
	cr_assert_eq(resolve_text("model: llama-2-7b\n", "xla.version=0.7", &r, &err), RM_INVALID);
	cr_assert(strstr(err.msg, "xla.version (from --set xla.version): unknown version \"0.7\""), "%s", err.msg);
	cr_assert_eq(resolve_text("model: llama-2-7b\n", "xla.version=", &r, &err), RM_INVALID, "empty is not unversioned");
	cr_assert(strstr(err.msg, "unknown version \"\" (known: 0.4.30,"), "%s", err.msg);
	cr_assert_eq(resolve_text("model: llama-2-7b\nxla: {release: 0.4.30}\n", NULL, &r, &err), RM_UNKNOWN_KEY);
	cr_assert(strstr(err.msg, "unknown key \"xla.release\" (known here: version, mem_fraction, allocator, donate)"), "%s", err.msg);
	/* the seed's --xla_gpu_graph_level=0 under 0.7.2, whose XLA aborts on it */
	const char *seed = "model: llama-2-7b\nxla: {version: \"0.7.2\"}\n"
			   "xla_flags:\n  - --xla_gpu_enable_latency_hiding_scheduler=true\n  - --xla_gpu_graph_level=0\n";
	cr_assert_eq(resolve_text(seed, NULL, &r, &err), RM_UNSUPPORTED);
	cr_assert_str_eq(err.file, "v.yaml");
	cr_assert_eq(err.line, 4, "the xla_flags list (%s)", err.msg);
	cr_assert(strstr(err.msg, "xla_flags: XLA_FLAGS: --xla_gpu_graph_level is not a flag of the XLA in JAX 0.7.2 "
				  "(openxla/xla 0fccb8a60370, 2025-09-14)"),
		  "%s", err.msg);
}

/* --xla_disable_hlo_passes is a comma-separated list of pass names (xla/debug_options_flags.cc);
 * "rematerialization" turns off HloRematerialization after scheduling (JAX-Toolbox's MaxText
 * script passes it), other names change nothing remora models. */
Test(xla_flags, disable_hlo_passes_names_rematerialization)
{
	rm_xla_flags f = rm_xla_flags_default();
	rm_error err;
	rm_error_clear(&err);
	cr_assert_not(f.remat_pass_disabled);
	cr_assert_eq(rm_xla_flags_parse("--xla_disable_hlo_passes=algsimp,rematerialization", &f, &err), RM_OK, "%s",
		     err.msg);
	cr_assert(f.remat_pass_disabled);
	cr_assert_eq(f.n_unmodelled, 0);
	char buf[512];
	cr_assert(strstr(rm_xla_flags_format(&f, buf, sizeof(buf)), "--xla_disable_hlo_passes=rematerialization"));
	cr_assert_eq(rm_xla_flags_parse("--xla_disable_hlo_passes=rematerialization-2,algsimp", &f, &err), RM_OK, "%s",
		     err.msg);
	cr_assert_not(f.remat_pass_disabled, "a pass whose name only starts so is another pass");
}
