/* XLA_FLAGS parsing: the seed report's flags verbatim, defaults, absl forms, errors by column. */
#include <criterion/criterion.h>
#include <string.h>

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
