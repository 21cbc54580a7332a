/*
 * XLA's flag defaults by JAX release (remora/xla_flags.h; docs/xla-versions.md has the sources
 * in full). One row per release: the openxla/xla commit that jaxlib release pins (XLA_COMMIT in
 * jax-ml/jax third_party/xla/workspace.bzl, or revision.bzl from 0.7, at tag jax-vNAME), and the
 * values DefaultDebugOptionsIgnoringFlags (xla/debug_options_flags.cc) sets at that commit. The
 * combine thresholds are kDefault*CombineThreshold (xla/service/collective_utils.h; a local
 * kDefaultThreshold in debug_options_flags.cc at 0.4.30). Whether LHS runs without the flag is
 * IsLHSEnabled in xla/service/gpu/gpu_hlo_schedule.cc at the same commit.
 */
#include <stdio.h>
#include <string.h>

#include "remora/xla_flags.h"

#define MiB30 (30 * RM_MiB)
#define MiB30_7 (30 * RM_MiB + 7) /* 30 * 1024 * 1024 + 7 from 0.4.35 on */

/* Flags a release's XLA does not define. */
#define NO_OVERLAP_LIMIT RM_XLA_FLAG_BIT(PARALLEL_COLLECTIVE_OVERLAP_LIMIT) /* added after 0.4.30 */
#define NO_SOL RM_XLA_FLAG_BIT(ANALYTICAL_SOL_LATENCY_ESTIMATOR)            /* added after 0.4.35 */
#define NO_UMBRELLA RM_XLA_FLAG_BIT(PIPELINED_COLLECTIVES)                  /* removed after 0.5.3 */
#define NO_GRAPH_LEVEL RM_XLA_FLAG_BIT(GRAPH_LEVEL)                         /* removed after 0.6.2 */

static const rm_xla_version versions[] = {
	/* name, commit, date,
	 * lhs, pipelined AG/RS/AR, combine_by_dim AG/RS, double buffering, highest-priority stream,
	 * SoL estimator, combine thresholds, slop %, overlap limit, while-loop unrolling,
	 * PGLE turns LHS on, SoL on Hopper turns LHS on, absent flags */

	/* version 0, unversioned: remora's defaults before versions existed, kept bit for bit for
	 * scenarios that name none. They are 0.4.30's except that LHS is on (0.4.30: off) and the
	 * overlap-limit flag is accepted (0.4.30 has none; its one collective stream makes it 1). */
	{"", "", "", true, false, false, false, true, true, false, true, false, MiB30, 95, 1, "", false, false, 0},

	/* 0.4.30 (the seed report): debug_options_flags.cc lines 126-215 at this commit */
	{"0.4.30", "79fd5733f99b3c0948d7202bc1bbe1ee3980da5c", "2024-06-18", false, false, false, false, true, true,
	 false, true, false, MiB30, 95, 1, "no_unroll (no flag)", false, false, NO_OVERLAP_LIMIT | NO_SOL},

	/* 0.4.35: all-gather combine_by_dim off, reduce-scatter pipelined, thresholds 30 MiB + 7,
	 * the overlap-limit flag and while-loop auto-unrolling appear (lines 139-299) */
	{"0.4.35", "76da730179313b3bebad6dea6861768421b7358c", "2024-10-21", false, false, true, false, false, true,
	 false, true, false, MiB30_7, 95, 1, "auto_unroll", false, false, NO_SOL},

	/* 0.5.3: reduce-scatter combine_by_dim off too; the SoL estimator flag appears (off); a PGLE
	 * profile turns LHS on (IsLHSEnabled) (lines 143-317) */
	{"0.5.3", "df971129bd82e381954da0185b534220e21798a4", "2025-03-18", false, false, true, false, false, false,
	 false, true, false, MiB30_7, 95, 1, "auto_unroll", true, false, 0},

	/* 0.6.2: as 0.5.3; --xla_gpu_enable_pipelined_collectives is gone (lines 154-318) */
	{"0.6.2", "3d5ece64321630dade7ff733ae1353fc3c83d9cc", "2025-06-17", false, false, true, false, false, false,
	 false, true, false, MiB30_7, 95, 1, "auto_unroll", true, false, NO_UMBRELLA},

	/* 0.7.2: the SoL estimator is on by default, and SolLatencyEstimator::IsSupportedForModule
	 * (Hopper or Blackwell, only all-gather/reduce-scatter/all-reduce, nothing host-offloaded)
	 * turns LHS on; --xla_gpu_graph_level is gone (lines 255-434) */
	{"0.7.2", "0fccb8a6037019b20af2e502ba4b8f5e0f98c8f6", "2025-09-14", false, false, true, false, false, false,
	 false, true, true, MiB30_7, 95, 1, "auto_unroll", true, true, NO_UMBRELLA | NO_GRAPH_LEVEL},

	/* 0.8.3: as 0.7.2 for these flags (lines 263-448) */
	{"0.8.3", "913ae2eaa3cb88971003592a90959685a78c9e30", "2025-12-17", false, false, true, false, false, false,
	 false, true, true, MiB30_7, 95, 1, "auto_unroll", true, true, NO_UMBRELLA | NO_GRAPH_LEVEL},

	/* 0.11.0, the newest release read: as 0.7.2 for these flags (lines 279-465) */
	{"0.11.0", "131bf41acb4650e4391a640c3f1859c1c86ad74b", "2026-07-15", false, false, true, false, false, false,
	 false, true, true, MiB30_7, 95, 1, "auto_unroll", true, true, NO_UMBRELLA | NO_GRAPH_LEVEL},
};

int rm_xla_version_count(void)
{
	return (int)RM_ARRAY_SIZE(versions);
}

const rm_xla_version *rm_xla_version_at(int index)
{
	return index >= 0 && index < (int)RM_ARRAY_SIZE(versions) ? &versions[index] : NULL;
}

int rm_xla_version_find(const char *name)
{
	for (int i = 0; name && i < (int)RM_ARRAY_SIZE(versions); i++)
		if (strcmp(versions[i].name, name) == 0)
			return i;
	return -1;
}

const char *rm_xla_version_list(char *buf, size_t size)
{
	size_t used = 0;
	if (size)
		buf[0] = '\0';
	for (int i = 1; i < (int)RM_ARRAY_SIZE(versions) && used < size; i++) {
		int n = snprintf(buf + used, size - used, "%s%s", i > 1 ? ", " : "", versions[i].name);
		used += n > 0 ? (size_t)n : 0;
	}
	return buf;
}

rm_xla_flags rm_xla_flags_for_version(int index, bool hopper)
{
	const rm_xla_version *v = rm_xla_version_at(index);
	if (!v) {
		index = 0;
		v = &versions[0];
	}
	rm_xla_flags f = {
		.lhs_flag = v->lhs,
		.pipelined_all_gather = v->pipelined_all_gather,
		.pipelined_reduce_scatter = v->pipelined_reduce_scatter,
		.pipelined_all_reduce = v->pipelined_all_reduce,
		.while_loop_double_buffering = v->while_loop_double_buffering,
		.highest_priority_async_stream = v->highest_priority_async_stream,
		.all_gather_combine_threshold_bytes = v->combine_threshold_bytes,
		.reduce_scatter_combine_threshold_bytes = v->combine_threshold_bytes,
		.all_reduce_combine_threshold_bytes = v->combine_threshold_bytes,
		.all_gather_combine_by_dim = v->all_gather_combine_by_dim,
		.reduce_scatter_combine_by_dim = v->reduce_scatter_combine_by_dim,
		.memory_limit_slop_factor = v->memory_limit_slop_factor,
		.parallel_collective_overlap_limit = v->parallel_collective_overlap_limit,
		.graph_level = 1, /* where the flag exists its default is 1 */
		.analytical_sol_latency_estimator = v->analytical_sol_latency_estimator,
		.version = index,
		.hopper = hopper,
	};
	f.latency_hiding_scheduler = rm_xla_lhs_runs(&f);
	return f;
}

bool rm_xla_lhs_runs(const rm_xla_flags *f)
{
	const rm_xla_version *v = rm_xla_version_at(f->version);
	if (!v)
		v = &versions[0];
	return f->lhs_flag || (v->pgle_enables_lhs && f->profile_guided) ||
	       (v->sol_enables_lhs && f->hopper && f->analytical_sol_latency_estimator);
}

const char *rm_xla_lhs_reason(const rm_xla_flags *f)
{
	const rm_xla_version *v = rm_xla_version_at(f->version);
	if (!v)
		v = &versions[0];
	if (f->lhs_flag)
		return "on: --xla_gpu_enable_latency_hiding_scheduler";
	if (v->pgle_enables_lhs && f->profile_guided)
		return "on: a PGLE profile is given";
	if (v->sol_enables_lhs && f->hopper && f->analytical_sol_latency_estimator)
		return "on: the SoL latency estimator on Hopper or newer";
	return "off: --xla_gpu_enable_latency_hiding_scheduler is false";
}
