/*
 * NCCL collective model: the worked figures of docs/reference/nccl-model.md, the rows of
 * data/reference/nccl-h100-8gpu.csv, docs/reference/hardware.md's multi-node figures, and bad input.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "remora/nccl.h"

static rm_nccl_model model_of(const char *hw_name, const char *version, bool calibrated)
{
	rm_nccl_model m;
	rm_error err;
	rm_error_clear(&err);
	const rm_hw_profile *hw = rm_hw_profile_find(hw_name, &err);
	cr_assert_not_null(hw, "%s", err.msg);
	cr_assert_eq(rm_nccl_model_init(&m, hw, version, &err), RM_OK, "%s", err.msg);
	m.calibrated = calibrated;
	return m;
}

static double rel(double got, double want)
{
	return fabs(got - want) / want;
}

static double pair_time(const rm_nccl_model *m, rm_coll coll, int64_t bytes, rm_nccl_algo a,
			rm_nccl_proto p, rm_coll_estimate *e)
{
	rm_coll_query q = rm_coll_query_make(coll, bytes, 8, 1);
	return rm_nccl_pair_time(m, &q, a, p, e);
}

Test(nccl, ring_all_gather_latency_per_protocol)
{
	/* docs/reference/nccl-model.md worked figures: 10.8 / 27.3 / 32.2 us (base + 7 steps x NVLink hop) */
	rm_nccl_model m = model_of("h100-sxm", "2.28", false);
	const double want[3] = {10.8, 27.3, 32.2};
	for (int p = 0; p < RM_NCCL_PROTO_COUNT; p++) {
		rm_coll_estimate e;
		cr_assert_geq(pair_time(&m, RM_COLL_ALL_GATHER, 1 << 20, RM_NCCL_ALGO_RING, (rm_nccl_proto)p, &e), 0);
		cr_assert_lt(rel(e.latency_us, want[p]), 0.02, "%s: %.3f vs %.1f", rm_nccl_proto_name(e.proto),
			     e.latency_us, want[p]);
	}
}

Test(nccl, nvls_all_reduce_busbw)
{
	/* docs/reference/nccl-model.md: NVLS all-reduce busBW ~476 GB/s (measured 480) */
	rm_nccl_model m = model_of("h100-sxm", NULL, false);
	rm_coll_estimate e;
	cr_assert_geq(pair_time(&m, RM_COLL_ALL_REDUCE, INT64_C(1) << 34, RM_NCCL_ALGO_NVLS,
				RM_NCCL_PROTO_SIMPLE, &e), 0);
	cr_assert_lt(rel(e.busbw_GBps, 476), 0.02, "NVLS busBW %.1f", e.busbw_GBps);
	cr_assert_eq(e.channels, 16);
}

/* Size at which pair b becomes faster than pair a, by bisection over bytes. */
static double crossover(const rm_nccl_model *m, rm_coll coll, rm_nccl_algo aa, rm_nccl_proto pa,
			rm_nccl_algo ab, rm_nccl_proto pb)
{
	double lo = 1024, hi = 1e10;
	for (int i = 0; i < 200; i++) {
		double mid = sqrt(lo * hi);
		double ta = pair_time(m, coll, (int64_t)mid, aa, pa, NULL);
		double tb = pair_time(m, coll, (int64_t)mid, ab, pb, NULL);
		if (tb < ta)
			hi = mid;
		else
			lo = mid;
	}
	return lo;
}

Test(nccl, all_gather_protocol_switch_points)
{
	rm_nccl_model m = model_of("h100-sxm", NULL, false);
	/* docs/reference/nccl-model.md: LL -> LL128 at ~4.6 MB. By hand: 16.5 us / (1/161.1 - 1/378.5) GB/s^-1 */
	double ll_ll128 = crossover(&m, RM_COLL_ALL_GATHER, RM_NCCL_ALGO_RING, RM_NCCL_PROTO_LL,
				    RM_NCCL_ALGO_RING, RM_NCCL_PROTO_LL128);
	cr_assert_lt(rel(ll_ll128, 4.6e6), 0.02, "LL->LL128 at %.3g B", ll_ll128);
	/* LL128 -> Simple: the same constants give 4.9 us / (1/378.5 - 1/411.4) = 23.2e6 B; the
	 * reference rounds it to "~24 MB" */
	double ll128_simple = crossover(&m, RM_COLL_ALL_GATHER, RM_NCCL_ALGO_RING, RM_NCCL_PROTO_LL128,
					RM_NCCL_ALGO_RING, RM_NCCL_PROTO_SIMPLE);
	cr_assert_lt(rel(ll128_simple, 23.19e6), 0.02, "LL128->Simple at %.4g B", ll128_simple);
	cr_assert_lt(rel(ll128_simple, 24e6), 0.04);
	/* NVLS all-reduce beats ring LL above ~1.1 MB */
	double nvls = crossover(&m, RM_COLL_ALL_REDUCE, RM_NCCL_ALGO_RING, RM_NCCL_PROTO_LL,
				RM_NCCL_ALGO_NVLS, RM_NCCL_PROTO_SIMPLE);
	cr_assert_lt(rel(nvls, 1.1e6), 0.05, "NVLS from %.3g B", nvls);
}

Test(nccl, all_gather_16MB_worked_figure)
{
	/* docs/reference/nccl-model.md: model all-gather at 16 MB 71.6 us (measured 70.7), LL128 */
	for (int cal = 0; cal < 2; cal++) {
		rm_nccl_model m = model_of("h100-sxm", NULL, cal);
		rm_coll_query q = rm_coll_query_make(RM_COLL_ALL_GATHER, 16 * RM_MiB, 8, 1);
		rm_coll_estimate e;
		cr_assert_eq(rm_nccl_estimate(&m, &q, &e, NULL), RM_OK);
		cr_assert_lt(rel(e.time_us, 71.6), 0.02, "%.2f us", e.time_us);
		cr_assert_eq(e.algo, RM_NCCL_ALGO_RING);
		cr_assert_eq(e.proto, RM_NCCL_PROTO_LL128);
	}
}

static void load_reference(rm_nccl_ref_row **rows, int *n)
{
	const char *dir = getenv("REMORA_DATA_DIR");
	cr_assert_not_null(dir);
	char path[1024];
	snprintf(path, sizeof(path), "%s/reference/nccl-h100-8gpu.csv", dir);
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_nccl_ref_load(path, rows, n, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(*n, 38, "38 rows in data/reference/nccl-h100-8gpu.csv");
}

Test(nccl, reference_rows_within_tolerance)
{
	/* Every row of 16 MiB and above within 10%, smaller rows within 25%, except the
	 * single-process launch-floor rows (~35 us measured for any small size). */
	rm_nccl_model m = model_of("h100-sxm", NULL, true);
	rm_nccl_ref_row *rows;
	int n;
	load_reference(&rows, &n);
	int floors = 0;
	for (int i = 0; i < n; i++) {
		rm_coll_query q = rm_coll_query_make(rows[i].coll, rows[i].bytes, 8, 1);
		if (rows[i].forced_ring)
			q.algo_mask = 1u << RM_NCCL_ALGO_RING;
		rm_coll_estimate e;
		cr_assert_eq(rm_nccl_estimate(&m, &q, &e, NULL), RM_OK);
		double err = rel(e.time_us, rows[i].time_us);
		if (rm_nccl_ref_is_launch_floor(&rows[i], e.time_us)) {
			floors++;
			cr_assert(rows[i].bytes <= RM_MiB, "line %d: only tiny rows sit on the floor", rows[i].line);
			continue;
		}
		double tol = rows[i].bytes >= 16 * RM_MiB ? 0.10 : 0.25;
		cr_assert_leq(err, tol, "line %d: %s %lld B: predicted %.1f us, measured %.1f us", rows[i].line,
			      rm_coll_name(rows[i].coll), (long long)rows[i].bytes, e.time_us, rows[i].time_us);
	}
	/* all-gather and reduce-scatter ring at 64 KiB, 512 KiB, 1 MiB; all-reduce ring 8 B .. 1 MiB */
	cr_assert_eq(floors, 10);
	free(rows);
}

Test(nccl, raw_model_ring_rows_within_ten_percent)
{
	/* Without the size efficiency the ring rows of 16 MiB and above are already within 10%: the
	 * correction only matters for NVLS, whose pipeline ramps up slowly (raw: 30% fast at 16 MiB). */
	rm_nccl_model m = model_of("h100-sxm", NULL, false);
	rm_nccl_ref_row *rows;
	int n;
	load_reference(&rows, &n);
	for (int i = 0; i < n; i++) {
		if (!rows[i].forced_ring || rows[i].bytes < 16 * RM_MiB)
			continue;
		rm_coll_query q = rm_coll_query_make(rows[i].coll, rows[i].bytes, 8, 1);
		q.algo_mask = 1u << RM_NCCL_ALGO_RING;
		rm_coll_estimate e;
		cr_assert_eq(rm_nccl_estimate(&m, &q, &e, NULL), RM_OK);
		cr_assert_leq(rel(e.time_us, rows[i].time_us), 0.10, "line %d", rows[i].line);
	}
	free(rows);
}

Test(nccl, held_out_log_sizes)
{
	/* Sizes of data/reference/h100-8gpu-all_gather_ring.out (out-of-place time) that
	 * are not rows of the CSV the efficiencies were fitted on. */
	static const struct {
		int64_t bytes;
		double us;
	} rows[] = {{8388608, 47.46},      {33554432, 125.67},     {134217728, 388.74},
		    {536870912, 1400.76},  {2147483648, 5354.70},  {4294967296, 10585.1}};
	rm_nccl_model m = model_of("h100-sxm", NULL, true);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		rm_coll_query q = rm_coll_query_make(RM_COLL_ALL_GATHER, rows[i].bytes, 8, 1);
		q.algo_mask = 1u << RM_NCCL_ALGO_RING;
		rm_coll_estimate e;
		cr_assert_eq(rm_nccl_estimate(&m, &q, &e, NULL), RM_OK);
		cr_assert_leq(rel(e.time_us, rows[i].us), 0.10, "%lld B: %.1f vs %.1f", (long long)rows[i].bytes,
			      e.time_us, rows[i].us);
	}
}

Test(nccl, reduce_scatter_busbw_falls_with_nodes)
{
	/* docs/reference/hardware.md 'Multi-node': ring reduce-scatter busBW 4 -> 360, 8 -> 345, 16 -> 320,
	 * 32 -> 300 GB/s (8 GPUs and 8 NDR NICs per node); here at 8 GiB */
	static const struct {
		int nodes;
		double busbw;
	} ref[] = {{4, 360}, {8, 345}, {16, 320}, {32, 300}};
	rm_nccl_model m = model_of("h100-sxm", NULL, true);
	double prev = 1e9;
	for (int nodes = 1; nodes <= 128; nodes *= 2) {
		rm_coll_query q = rm_coll_query_make(RM_COLL_REDUCE_SCATTER, INT64_C(8) << 30, 8 * nodes, nodes);
		rm_coll_estimate e;
		cr_assert_eq(rm_nccl_estimate(&m, &q, &e, NULL), RM_OK);
		cr_assert_lt(e.busbw_GBps, prev, "busBW must fall with node count (%d nodes)", nodes);
		prev = e.busbw_GBps;
		for (size_t i = 0; i < sizeof(ref) / sizeof(ref[0]); i++)
			if (ref[i].nodes == nodes)
				cr_assert_lt(rel(e.busbw_GBps, ref[i].busbw), 0.05, "%d nodes: %.1f GB/s", nodes,
					     e.busbw_GBps);
	}
}

Test(nccl, nvls_tree_across_two_nodes)
{
	/* docs/reference/hardware.md: 2 x 8 H100 all-reduce busBW ~470 GB/s with NVLS-tree */
	rm_nccl_model m = model_of("h100-sxm", NULL, true);
	rm_coll_query q = rm_coll_query_make(RM_COLL_ALL_REDUCE, INT64_C(8) << 30, 16, 2);
	rm_coll_estimate e;
	cr_assert_eq(rm_nccl_estimate(&m, &q, &e, NULL), RM_OK);
	cr_assert_eq(e.algo, RM_NCCL_ALGO_NVLS_TREE);
	cr_assert_lt(rel(e.busbw_GBps, 470), 0.03, "%.1f GB/s", e.busbw_GBps);
}

Test(nccl, forced_algorithms_and_protocols)
{
	rm_nccl_model m = model_of("h100-sxm", NULL, true);
	rm_error err;
	rm_error_clear(&err);
	rm_coll_query q = rm_coll_query_make(RM_COLL_ALL_REDUCE, 256 * RM_MiB, 8, 1);
	cr_assert(rm_nccl_parse_algos("tree", &q.algo_mask, &err));
	rm_coll_estimate e;
	cr_assert_eq(rm_nccl_estimate(&m, &q, &e, &err), RM_OK);
	cr_assert_eq(e.algo, RM_NCCL_ALGO_TREE);
	cr_assert(rm_nccl_parse_algos("^NVLS,NVLSTree", &q.algo_mask, &err));
	cr_assert(rm_nccl_parse_protos("LL128", &q.proto_mask, &err));
	cr_assert_eq(rm_nccl_estimate(&m, &q, &e, &err), RM_OK);
	cr_assert_eq(e.proto, RM_NCCL_PROTO_LL128);
	cr_assert_neq(e.algo, RM_NCCL_ALGO_NVLS);
	/* tree does not run all-gather: a clear error, not a silent fallback */
	q = rm_coll_query_make(RM_COLL_ALL_GATHER, RM_MiB, 8, 1);
	q.algo_mask = 1u << RM_NCCL_ALGO_TREE;
	cr_assert_eq(rm_nccl_estimate(&m, &q, &e, &err), RM_UNSUPPORTED);
	cr_assert(strstr(err.msg, "tree is all-reduce only"), "%s", err.msg);
	cr_assert_not(rm_nccl_parse_algos("Butterfly", &q.algo_mask, &err));
	cr_assert(strstr(err.msg, "unknown algorithm 'Butterfly'"), "%s", err.msg);
	cr_assert_not(rm_nccl_parse_protos("", &q.proto_mask, &err));
}

Test(nccl, versions_change_constants)
{
	rm_nccl_model v218 = model_of("h100-sxm", "2.18.3", false);
	rm_nccl_model v228 = model_of("h100-sxm", "2.28.9", false);
	cr_assert_str_eq(rm_nccl_model_version(&v218), "2.18");
	cr_assert_str_eq(rm_nccl_model_version(&v228), "2.28");
	rm_nccl_model v221 = model_of("h100-sxm", "2.21", false);
	cr_assert_str_eq(rm_nccl_model_version(&v221), "2.21");
	rm_coll_estimate e;
	/* NVLS latency: base 23 + 25 in 2.18, 0 + 25 now */
	pair_time(&v218, RM_COLL_ALL_REDUCE, RM_MiB, RM_NCCL_ALGO_NVLS, RM_NCCL_PROTO_SIMPLE, &e);
	cr_assert_float_eq(e.latency_us, 48.0, 1e-4);
	/* ring LL all-gather busBW: min(360/3, 87.7) = 87.7 in 2.18; min(360/2, 141) = 141 now */
	pair_time(&v218, RM_COLL_ALL_GATHER, INT64_C(1) << 33, RM_NCCL_ALGO_RING, RM_NCCL_PROTO_LL, &e);
	double lat = e.latency_us;
	double algbw = (double)(INT64_C(1) << 33) / ((e.time_us - lat) * 1e3);
	cr_assert_lt(rel(algbw, 87.7 * 8 / 7), 1e-4, "%.3f", algbw);
	rm_nccl_model m;
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_nccl_model_init(&m, rm_hw_profile_find("h100", NULL), "2.12", &err), RM_INVALID);
	cr_assert_eq(rm_nccl_model_init(&m, rm_hw_profile_find("h100", NULL), "latest", &err), RM_INVALID);
	cr_assert(strstr(err.msg, "MAJOR.MINOR"), "%s", err.msg);
}

Test(nccl, versions_beyond_the_known_tables_are_refused)
{
	rm_nccl_model m;
	rm_error err;
	rm_error_clear(&err);
	const rm_hw_profile *hw = rm_hw_profile_find("h100-sxm", NULL);
	char label[96];
	/* 9.99 used to take the 2.28 constants silently */
	cr_assert_eq(rm_nccl_model_init(&m, hw, "9.99", &err), RM_INVALID);
	cr_assert(strstr(err.msg, "newer than the newest modelled"), "%s", err.msg);
	cr_assert(strstr(err.msg, "2.19-2.22") && strstr(err.msg, "2.23-2.30"), "lists the known: %s", err.msg);
	cr_assert_eq(rm_nccl_model_init(&m, hw, "2.31", &err), RM_INVALID);
	cr_assert_eq(rm_nccl_model_init(&m, hw, "3.0.1", &err), RM_INVALID);
	cr_assert_eq(rm_nccl_model_init(&m, hw, "2.28.x", &err), RM_INVALID);
	cr_assert_eq(rm_nccl_model_init(&m, hw, "2.28.9.1", &err), RM_INVALID);
	/* patches of known minors are fine, and the label says which table they map to */
	cr_assert_eq(rm_nccl_model_init(&m, hw, "2.28.9", &err), RM_OK, "%s", err.msg);
	cr_assert_str_eq(rm_nccl_model_version_label(&m, label, sizeof(label)), "2.28.9 (2.23+ tables)");
	cr_assert_eq(rm_nccl_model_init(&m, hw, "2.26.2", &err), RM_OK, "%s", err.msg);
	cr_assert_str_eq(rm_nccl_model_version(&m), "2.28");
	cr_assert_str_eq(rm_nccl_model_version_label(&m, label, sizeof(label)), "2.26.2 (2.23+ tables)");
	cr_assert_eq(rm_nccl_model_init(&m, hw, "2.30.1", &err), RM_OK, "%s", err.msg);
	cr_assert_eq(rm_nccl_model_init(&m, hw, "2.20.5", &err), RM_OK, "%s", err.msg);
	cr_assert_str_eq(rm_nccl_model_version_label(&m, label, sizeof(label)), "2.20.5 (2.19-2.22 tables)");
	cr_assert_eq(rm_nccl_model_init(&m, hw, NULL, &err), RM_OK, "%s", err.msg);
	cr_assert_str_eq(rm_nccl_model_version_label(&m, label, sizeof(label)), "2.28 (default; 2.23+ tables)");
}

Test(nccl, overrides_apply_to_their_topology_only)
{
	rm_nccl_model m = model_of("h100-sxm", NULL, true);
	rm_nccl_override ov = {.coll = RM_COLL_ALL_GATHER, .algo = RM_NCCL_ALGO_RING, .proto = RM_NCCL_PROTO_SIMPLE,
			       .ranks = 8, .ranks_per_node = 8, .nodes = 1, .min_bytes = 0,
			       .max_bytes = INT64_C(1) << 40, .latency_us = 1.0, .algbw_GBps = 10000.0};
	cr_assert(rm_nccl_model_add_override(&m, &ov));
	rm_nccl_override bad = ov;
	bad.ranks = 0;
	cr_assert_not(rm_nccl_model_add_override(&m, &bad), "an override without a topology is refused");
	bad = ov;
	bad.ranks = 16; /* 8 per node on 1 node is not 16 */
	cr_assert_not(rm_nccl_model_add_override(&m, &bad));
	rm_error err;
	rm_error_clear(&err);
	rm_coll_estimate e;
	/* 1 GiB at 10000 GB/s + 1 us: the override wins on 8x1 */
	rm_coll_query q = rm_coll_query_make(RM_COLL_ALL_GATHER, RM_GiB, 8, 1);
	cr_assert_eq(rm_nccl_estimate(&m, &q, &e, &err), RM_OK, "%s", err.msg);
	cr_assert(e.overridden);
	cr_assert_float_eq(e.time_us, 1.0 + (double)RM_GiB / 1e7, 1e-9);
	/* and not on 16x2 nor 64x8, nor 4x1: those get the model */
	static const int groups[][2] = {{16, 2}, {64, 8}, {4, 1}};
	rm_nccl_model plain = model_of("h100-sxm", NULL, true);
	for (int g = 0; g < 3; g++) {
		rm_coll_estimate p;
		q = rm_coll_query_make(RM_COLL_ALL_GATHER, RM_GiB, groups[g][0], groups[g][1]);
		cr_assert_eq(rm_nccl_estimate(&m, &q, &e, &err), RM_OK, "%s", err.msg);
		cr_assert_eq(rm_nccl_estimate(&plain, &q, &p, &err), RM_OK, "%s", err.msg);
		cr_assert_not(e.overridden, "%dx%d", groups[g][0], groups[g][1]);
		cr_assert_eq(e.time_us, p.time_us);
	}
}

Test(nccl, channels_shrink_for_small_messages)
{
	rm_nccl_model m = model_of("h100-sxm", NULL, false);
	rm_coll_estimate e;
	/* Simple: 512 threads x 64 B per channel; 256 KiB -> 8 channels, >= 768 KiB -> all 24 */
	pair_time(&m, RM_COLL_ALL_GATHER, 256 * RM_KiB, RM_NCCL_ALGO_RING, RM_NCCL_PROTO_SIMPLE, &e);
	cr_assert_eq(e.channels, 8);
	pair_time(&m, RM_COLL_ALL_GATHER, 768 * RM_KiB, RM_NCCL_ALGO_RING, RM_NCCL_PROTO_SIMPLE, &e);
	cr_assert_eq(e.channels, 24);
	/* ring LL: 512 threads x 8 B x 8 ranks = 32 KiB per channel */
	pair_time(&m, RM_COLL_ALL_GATHER, 64 * RM_KiB, RM_NCCL_ALGO_RING, RM_NCCL_PROTO_LL, &e);
	cr_assert_eq(e.channels, 2);
	pair_time(&m, RM_COLL_ALL_REDUCE, 8, RM_NCCL_ALGO_RING, RM_NCCL_PROTO_LL, &e);
	cr_assert_eq(e.channels, 1);
}

Test(nccl, group_of_one_is_a_local_copy)
{
	rm_nccl_model m = model_of("h200-sxm", NULL, true);
	rm_coll_query q = rm_coll_query_make(RM_COLL_ALL_GATHER, RM_GiB, 1, 1);
	rm_coll_estimate e;
	cr_assert_eq(rm_nccl_estimate(&m, &q, &e, NULL), RM_OK);
	cr_assert_eq(e.algo, RM_NCCL_ALGO_LOCAL);
	/* 2 x 1 GiB through 4010 GB/s of HBM */
	cr_assert_float_eq(e.time_us, 2.0 * 1073741824.0 / 4010e3, 1e-6);
	cr_assert_eq(e.channels, 0);
}

Test(nccl, bad_queries_fail_clearly)
{
	rm_nccl_model m = model_of("h100-sxm", NULL, true);
	rm_error err;
	rm_coll_query q = rm_coll_query_make(RM_COLL_ALL_GATHER, -1, 8, 1);
	rm_coll_estimate e;
	cr_assert_eq(rm_nccl_estimate(&m, &q, &e, &err), RM_INVALID);
	q = rm_coll_query_make(RM_COLL_ALL_GATHER, 1024, 12, 1);
	cr_assert_eq(rm_nccl_estimate(&m, &q, &e, &err), RM_INVALID);
	cr_assert(strstr(err.msg, "12 GPUs per node"), "%s", err.msg);
	q = rm_coll_query_make(RM_COLL_ALL_GATHER, 1024, 12, 8);
	cr_assert_eq(rm_nccl_estimate(&m, &q, &e, &err), RM_INVALID);
	cr_assert(strstr(err.msg, "evenly"), "%s", err.msg);
	q = rm_coll_query_make(RM_COLL_SEND_RECV, 1024, 4, 1);
	cr_assert_eq(rm_nccl_estimate(&m, &q, &e, &err), RM_INVALID);
	q = rm_coll_query_make(RM_COLL_ALL_REDUCE, 1024, 0, 1);
	cr_assert_eq(rm_nccl_estimate(&m, &q, &e, &err), RM_INVALID);
}

Test(nccl, names_and_busbw_factors)
{
	rm_coll c;
	cr_assert(rm_coll_parse("all_gather", &c) && c == RM_COLL_ALL_GATHER);
	cr_assert(rm_coll_parse("ReduceScatter", &c) && c == RM_COLL_REDUCE_SCATTER);
	cr_assert(rm_coll_parse("collective-permute", &c) && c == RM_COLL_SEND_RECV);
	cr_assert_not(rm_coll_parse("broadcastt", &c));
	cr_assert_float_eq(rm_coll_busbw_factor(RM_COLL_ALL_REDUCE, 8), 14.0 / 8.0, 1e-12);
	cr_assert_float_eq(rm_coll_busbw_factor(RM_COLL_ALL_GATHER, 8), 7.0 / 8.0, 1e-12);
	cr_assert_float_eq(rm_coll_busbw_factor(RM_COLL_SEND_RECV, 2), 1.0, 1e-12);
}

Test(nccl, reference_reader_reports_positions)
{
	const char *dir = getenv("REMORA_TEST_DATA");
	cr_assert_not_null(dir);
	char path[1024];
	snprintf(path, sizeof(path), "%s/nccl/bad-bytes.csv", dir);
	rm_nccl_ref_row *rows = NULL;
	int n = 0;
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_nccl_ref_load(path, &rows, &n, &err), RM_PARSE);
	cr_assert_eq(err.line, 3);
	cr_assert_eq(err.column, 23);
	cr_assert(strstr(err.msg, "'12x'"), "%s", err.msg);
	snprintf(path, sizeof(path), "%s/nccl/bad-header.csv", dir);
	cr_assert_eq(rm_nccl_ref_load(path, &rows, &n, &err), RM_PARSE);
	cr_assert_eq(err.line, 2);
}

/* A size past int64 (or inf) is refused by value before it is converted: (int64_t)1e30 is
 * undefined behaviour (clang's -fsanitize=float-cast-overflow). */
Test(nccl, reference_sizes_past_int64_are_refused)
{
	static const char *const sizes[] = {"1e30", "inf", "9007199254740993.5", "18446744073709551616"};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char path[] = "/tmp/remora-nccl-ref-XXXXXX";
		int fd = mkstemp(path);
		cr_assert_geq(fd, 0);
		FILE *f = fdopen(fd, "w");
		fprintf(f, "collective,algo,bytes,time_us,busbw_GBps\nall_gather,ring,%s,35.5,1.6\n", sizes[i]);
		fclose(f);
		rm_nccl_ref_row *rows = NULL;
		int n = 0;
		rm_error err;
		rm_error_clear(&err);
		cr_assert_eq(rm_nccl_ref_load(path, &rows, &n, &err), RM_PARSE, "%s", sizes[i]);
		cr_assert_eq(err.line, 2);
		cr_assert_eq(err.column, 17);
		cr_assert(strstr(err.msg, "bytes must be an integer in [0, 2^53]"), "%s", err.msg);
		unlink(path);
	}
}

Test(nccl, no_nvls_on_two_gpus)
{
	/* NCCL's ncclNvlsInit (src/transport/nvls.cc) leaves NVLS off when a node has 2 GPUs or
	 * fewer: a 1 GiB all-reduce on 2 H100s runs a ring; on 4 NVLS is offered */
	rm_nccl_model m;
	rm_error err;
	cr_assert_eq(rm_nccl_model_init(&m, rm_hw_profile_find("h100-sxm", NULL), NULL, &err), RM_OK, "%s", err.msg);
	rm_coll_query q = rm_coll_query_make(RM_COLL_ALL_REDUCE, INT64_C(1) << 30, 2, 1);
	rm_coll_estimate e;
	cr_assert_eq(rm_nccl_estimate(&m, &q, &e, &err), RM_OK, "%s", err.msg);
	cr_assert_neq(e.algo, RM_NCCL_ALGO_NVLS);
	cr_assert_lt(rm_nccl_pair_time(&m, &q, RM_NCCL_ALGO_NVLS, RM_NCCL_PROTO_SIMPLE, NULL), 0, "NVLS not offered");
	q = rm_coll_query_make(RM_COLL_ALL_REDUCE, INT64_C(1) << 30, 4, 1);
	cr_assert_geq(rm_nccl_pair_time(&m, &q, RM_NCCL_ALGO_NVLS, RM_NCCL_PROTO_SIMPLE, NULL), 0);
}
