/*
 * Unit tests of the allocator models (sim/allocator.c, and the engine's replay in sim/engine.c):
 * every expected byte count is derived by hand from PyTorch's rules (docs/sim.md "Reserved
 * memory"): 512 B rounding; <= 1 MiB from 2 MiB small-pool segments; under 10 MiB from 20 MiB
 * segments; larger requests rounded up to 2 MiB; best fit per (stream, pool); split when the rest
 * is >= 512 B (small) or > 1 MiB (large); free neighbours merge; expandable segments map pages of
 * 2 MiB (small pool) and 20 MiB (large pool).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "remora/hw.h"
#include "remora/scenario.h"
#include "remora/sim.h"
#include "sim/allocator.h"

#define KiB INT64_C(1024)
#define MiB (INT64_C(1024) * 1024)

static sim_alloc *caching(int32_t streams, int64_t limit)
{
	sim_alloc *a = sim_alloc_create(RM_SIM_ALLOC_PYTORCH, streams);
	cr_assert_not_null(a);
	sim_alloc_reset(a, limit);
	return a;
}

static sim_alloc *expandable(int32_t streams, int64_t limit)
{
	sim_alloc *a = sim_alloc_create(RM_SIM_ALLOC_PYTORCH_EXPANDABLE, streams);
	cr_assert_not_null(a);
	sim_alloc_reset(a, limit);
	return a;
}

#define reserved(a) (sim_alloc_get_stats(a)->reserved_bytes)
#define allocated(a) (sim_alloc_get_stats(a)->allocated_bytes)

Test(allocator, sizes_round_to_512_bytes_and_pick_the_segment_size)
{
	cr_assert_eq(sim_alloc_round_size(0), 512);            /* the minimum block */
	cr_assert_eq(sim_alloc_round_size(1), 512);
	cr_assert_eq(sim_alloc_round_size(513), 1024);         /* 2 x 512 */
	cr_assert_eq(sim_alloc_round_size(MiB), MiB);          /* already a multiple */
	cr_assert_eq(sim_alloc_segment_size(MiB), 2 * MiB);    /* <= 1 MiB: small pool, 2 MiB */
	cr_assert_eq(sim_alloc_segment_size(MiB + 512), 20 * MiB); /* large, under 10 MiB: 20 MiB */
	cr_assert_eq(sim_alloc_segment_size(10 * MiB - 512), 20 * MiB);
	cr_assert_eq(sim_alloc_segment_size(10 * MiB), 10 * MiB);  /* from 10 MiB: round to 2 MiB */
	cr_assert_eq(sim_alloc_segment_size(15 * MiB), 16 * MiB);  /* 15 -> 16 */
	cr_assert_null(sim_alloc_create(RM_SIM_ALLOC_EXACT, 1));    /* no replay needed */
	cr_assert_null(sim_alloc_create(RM_SIM_ALLOC_JAX_PREALLOC, 1));
}

Test(allocator, a_freed_20_mib_segment_serves_a_larger_request)
{
	sim_alloc *a = caching(1, INT64_MAX);
	/* 3 MiB is a large request under 10 MiB: a 20 MiB segment, split 3 + 17 (17 > 1 MiB). */
	int32_t x = sim_alloc_malloc(a, 0, 3 * MiB);
	cr_assert_eq(reserved(a), 20 * MiB);
	cr_assert_eq(allocated(a), 3 * MiB);
	/* Freed, it merges with its 17 MiB rest back into one 20 MiB free block. */
	sim_alloc_free(a, x);
	cr_assert_eq(allocated(a), 0);
	/* 15 MiB: best fit is that 20 MiB block (split 15 + 5): no new segment. */
	sim_alloc_malloc(a, 0, 15 * MiB);
	cr_assert_eq(reserved(a), 20 * MiB);
	cr_assert_eq(allocated(a), 15 * MiB);
	cr_assert_eq(sim_alloc_get_stats(a)->segments, 1);
	cr_assert_eq(sim_alloc_get_stats(a)->peak_reserved_bytes, 20 * MiB);
	sim_alloc_destroy(a);
}

Test(allocator, a_block_freed_on_one_stream_does_not_serve_another)
{
	sim_alloc *a = caching(2, INT64_MAX);
	int32_t x = sim_alloc_malloc(a, 0, 3 * MiB); /* stream 0: 20 MiB segment */
	sim_alloc_free(a, x);                        /* cached in stream 0's large pool */
	sim_alloc_malloc(a, 1, 3 * MiB);             /* stream 1 cannot use it: 20 MiB more */
	cr_assert_eq(reserved(a), 40 * MiB);
	sim_alloc_malloc(a, 0, 3 * MiB); /* stream 0 reuses its own: still 40 MiB */
	cr_assert_eq(reserved(a), 40 * MiB);
	sim_alloc_destroy(a);
}

Test(allocator, small_blocks_split_and_coalesce_on_both_sides)
{
	sim_alloc *a = caching(1, INT64_MAX);
	/* Four 512 KiB requests fill one 2 MiB small segment: 2048 = 4 x 512 KiB; each split leaves
	 * a rest >= 512 B until the last, which takes the final 512 KiB exactly. */
	int32_t b1 = sim_alloc_malloc(a, 0, 512 * KiB);
	int32_t b2 = sim_alloc_malloc(a, 0, 512 * KiB);
	int32_t b3 = sim_alloc_malloc(a, 0, 512 * KiB);
	int32_t b4 = sim_alloc_malloc(a, 0, 512 * KiB);
	cr_assert_eq(reserved(a), 2 * MiB);
	cr_assert_eq(allocated(a), 2 * MiB);
	/* A fifth small request finds no free block: a second 2 MiB segment. */
	int32_t b5 = sim_alloc_malloc(a, 0, 100);
	cr_assert_eq(reserved(a), 4 * MiB);
	cr_assert_eq(allocated(a), 2 * MiB + 512); /* 100 B rounds to 512 B */
	sim_alloc_free(a, b5);
	/* b2, b3 merge (next side); b1 merges with them (next side); b4 is still in use, so the
	 * first segment is not whole and empty_cache frees only the second: 4 - 2 = 2 MiB. */
	sim_alloc_free(a, b2);
	sim_alloc_free(a, b3);
	sim_alloc_free(a, b1);
	sim_alloc_empty_cache(a);
	cr_assert_eq(reserved(a), 2 * MiB);
	/* b4 merges with the 1.5 MiB block before it (prev side): the segment is whole again. */
	sim_alloc_free(a, b4);
	sim_alloc_empty_cache(a);
	cr_assert_eq(reserved(a), 0);
	cr_assert_eq(sim_alloc_get_stats(a)->segments, 0);
	sim_alloc_destroy(a);
}

Test(allocator, large_blocks_split_only_when_more_than_1_mib_remains)
{
	sim_alloc *a = caching(1, INT64_MAX);
	/* 19 MiB: a 20 MiB segment (19 rounded up to 2 MiB); the 1 MiB rest is not > 1 MiB, so the
	 * block stays whole and counts 20 MiB allocated. */
	sim_alloc_malloc(a, 0, 19 * MiB);
	cr_assert_eq(allocated(a), 20 * MiB);
	/* 18.5 MiB: also a 20 MiB segment, but 1.5 MiB > 1 MiB remains: split, 18.5 MiB allocated. */
	sim_alloc_malloc(a, 0, 18 * MiB + 512 * KiB);
	cr_assert_eq(allocated(a), 20 * MiB + 18 * MiB + 512 * KiB);
	cr_assert_eq(reserved(a), 40 * MiB);
	sim_alloc_destroy(a);
}

Test(allocator, out_of_memory_frees_cached_segments_and_retries)
{
	sim_alloc *a = caching(1, 50 * MiB);
	int32_t x = sim_alloc_malloc(a, 0, 3 * MiB);  /* 20 MiB segment, split 3 + 17 */
	int32_t y = sim_alloc_malloc(a, 0, 18 * MiB); /* 18 > 17 free: own 18 MiB segment: 38 */
	(void)x;
	cr_assert_eq(reserved(a), 38 * MiB);
	sim_alloc_free(a, y); /* cached: a whole free 18 MiB segment */
	/* 24 MiB: no cached block fits (17, 18); 38 + 24 = 62 > 50 MiB, so the whole free segment
	 * (18) is released and the cudaMalloc retried: 20 + 24 = 44 <= 50 fits. */
	sim_alloc_malloc(a, 0, 24 * MiB);
	cr_assert_eq(sim_alloc_get_stats(a)->num_alloc_retries, 1);
	cr_assert_eq(sim_alloc_get_stats(a)->num_ooms, 0);
	cr_assert_eq(reserved(a), 44 * MiB);
	cr_assert_eq(sim_alloc_get_stats(a)->peak_reserved_bytes, 44 * MiB);
	/* Another 24 MiB: 44 + 24 = 68 > 50; nothing whole is free (the 17 MiB rest belongs to a
	 * segment in use), so the retry fails too: an OOM, and the replay goes on at 68 MiB. */
	sim_alloc_malloc(a, 0, 24 * MiB);
	cr_assert_eq(sim_alloc_get_stats(a)->num_alloc_retries, 2);
	cr_assert_eq(sim_alloc_get_stats(a)->num_ooms, 1);
	cr_assert_eq(reserved(a), 68 * MiB);
	sim_alloc_destroy(a);
}

Test(allocator, expandable_segments_reserve_less_for_growing_requests)
{
	/* Requests of 12, 14, 16 and 18 MiB, each freed before the next (a batch that grows). */
	static const int64_t sizes[] = {12 * MiB, 14 * MiB, 16 * MiB, 18 * MiB};
	sim_alloc *c = caching(1, INT64_MAX), *e = expandable(1, INT64_MAX);
	for (int i = 0; i < 4; i++) {
		sim_alloc_free(c, sim_alloc_malloc(c, 0, sizes[i]));
		sim_alloc_free(e, sim_alloc_malloc(e, 0, sizes[i]));
	}
	/* Caching: each request is larger than every cached block, so each gets its own segment
	 * (sizes >= 10 MiB, already multiples of 2 MiB): 12 + 14 + 16 + 18 = 60 MiB. */
	cr_assert_eq(reserved(c), 60 * MiB);
	cr_assert_eq(sim_alloc_get_stats(c)->segments, 4);
	/* Expandable: 12 MiB maps one 20 MiB page; freed, the segment is one 20 MiB free block that
	 * 14, 16 and 18 MiB all fit in: 20 MiB. */
	cr_assert_eq(reserved(e), 20 * MiB);
	cr_assert_eq(sim_alloc_get_stats(e)->segments, 1);
	/* 30 MiB now: the free 20 MiB tail grows by 10 MiB, rounded up to one 20 MiB page: 40. */
	sim_alloc_malloc(e, 0, 30 * MiB);
	cr_assert_eq(reserved(e), 40 * MiB);
	/* A small request maps its own pool's segment in 2 MiB pages: 40 + 2 = 42 MiB. */
	sim_alloc_malloc(e, 0, 4 * KiB);
	cr_assert_eq(reserved(e), 42 * MiB);
	sim_alloc_destroy(c);
	sim_alloc_destroy(e);
}

Test(allocator, expandable_segments_unmap_free_tail_pages_on_a_retry)
{
	sim_alloc *e = expandable(1, 60 * MiB);
	int32_t x = sim_alloc_malloc(e, 0, 10 * MiB); /* [0, 10) in one 20 MiB page */
	int32_t y = sim_alloc_malloc(e, 0, 25 * MiB); /* [10, 35): the 10 MiB free tail grows by
						       * 15 -> one 20 MiB page: 40 MiB mapped */
	cr_assert_eq(reserved(e), 40 * MiB);
	(void)x;
	sim_alloc_free(e, y); /* free tail [10, 40) */
	/* A 2 MiB small-pool request needs a 2 MiB page: 42 <= 60, no retry. */
	sim_alloc_malloc(e, 0, 512 * KiB);
	cr_assert_eq(reserved(e), 42 * MiB);
	/* 45 MiB in the large pool: the free tail (30 MiB) grows by 15 -> 20 MiB: 62 > 60. The
	 * retry unmaps the whole pages of the free tail past the block in use ([20, 40)): 22 MiB
	 * reserved; then the tail [10, 20) grows by 35 -> 40 MiB: 62 again > 60: an OOM. */
	sim_alloc_malloc(e, 0, 45 * MiB);
	cr_assert_eq(sim_alloc_get_stats(e)->num_alloc_retries, 1);
	cr_assert_eq(sim_alloc_get_stats(e)->num_ooms, 1);
	cr_assert_eq(reserved(e), 62 * MiB);
	sim_alloc_destroy(e);
}

/* ---- through the engine ------------------------------------------------------------------- */

static const rm_hw_profile *h100(void)
{
	const rm_hw_profile *hw = rm_hw_profile_find("h100-sxm", NULL);
	cr_assert_not_null(hw);
	return hw;
}

/* A 3 MiB tensor made and read on stream 0, then another made on stream `second` after an event
 * and read there; a 100 MiB persistent tensor. */
static rm_program *two_tensors(int32_t second)
{
	rm_program *p = rm_program_create("alloc");
	rm_program_add_stream(p, "compute", RM_STREAM_COMPUTE, 0);
	rm_program_add_stream(p, "comm", RM_STREAM_COLLECTIVE, 0);
	int32_t w = rm_program_add_tensor(p, "w", 100 * MiB, RM_ROLE_PARAM_SHARD, RM_LOC_DEVICE, true);
	int32_t t0 = rm_program_add_tensor(p, "t0", 3 * MiB, RM_ROLE_ACTIVATION, RM_LOC_DEVICE, false);
	int32_t t1 = rm_program_add_tensor(p, "t1", 3 * MiB, RM_ROLE_ACTIVATION, RM_LOC_DEVICE, false);
	int32_t ev = rm_program_add_event(p, "done");
	const char *names[] = {"make0", "use0", "make1", "use1"};
	for (int i = 0; i < 4; i++) {
		rm_program_op_desc d = rm_program_op_desc_init(names[i], RM_COST_ELEMENTWISE, i < 2 ? 0 : second);
		d.time_s = 1e-6;
		int32_t in[2] = {w, i == 1 ? t0 : t1};
		int32_t out = i == 0 ? t0 : t1;
		if (i % 2 == 0) {
			d.inputs = in;
			d.n_inputs = 1;
			d.outputs = &out;
			d.n_outputs = 1;
		} else {
			d.inputs = in;
			d.n_inputs = 2;
		}
		if (i == 1) {
			d.records = &ev;
			d.n_records = 1;
		}
		if (i == 2) {
			d.waits = &ev;
			d.n_waits = 1;
		}
		rm_program_add_op(p, &d);
	}
	return p;
}

static rm_sim_metrics run_with(const rm_program *p, rm_sim_allocator alloc)
{
	rm_error err;
	rm_error_clear(&err);
	rm_sim_options opt = {.hw_queues = 8, .allocator = alloc};
	rm_sim *sim = rm_sim_create(p, h100(), &opt, &err);
	cr_assert_not_null(sim, "create: %s", err.msg);
	cr_assert_eq(rm_sim_run(sim, &err), RM_OK, "run: %s", err.msg);
	rm_sim_metrics m = *rm_sim_get_metrics(sim);
	/* a second run starts from an empty allocator: the same figures */
	cr_assert_eq(rm_sim_run(sim, &err), RM_OK, "run: %s", err.msg);
	cr_assert_eq(rm_sim_get_metrics(sim)->peak_reserved_bytes, m.peak_reserved_bytes);
	rm_sim_destroy(sim);
	return m;
}

Test(allocator, the_engine_allocates_on_the_producer_stream)
{
	/* Live: 100 MiB persistent + one 3 MiB tensor at a time (t0 is freed when use0 ends, before
	 * make1 starts): 103 MiB allocated at the peak. */
	rm_program *same = two_tensors(0), *other = two_tensors(1);
	rm_sim_metrics m = run_with(same, RM_SIM_ALLOC_PYTORCH);
	cr_assert_eq(m.peak_memory_bytes, 103 * MiB);
	/* The parameter: a 100 MiB segment (>= 10 MiB, a multiple of 2 MiB); t0: 20 MiB; t1 on the
	 * same stream reuses t0's cached block: 120 MiB. */
	cr_assert_eq(m.peak_reserved_bytes, 120 * MiB);
	cr_assert_eq(m.reserved_at_peak_bytes, 120 * MiB);
	cr_assert_eq(m.num_alloc_retries, 0);
	/* t1 made on the other stream cannot use stream 0's block: another 20 MiB. */
	m = run_with(other, RM_SIM_ALLOC_PYTORCH);
	cr_assert_eq(m.peak_memory_bytes, 103 * MiB);
	cr_assert_eq(m.peak_reserved_bytes, 140 * MiB);
	/* Expandable: the parameter maps 100 MiB = 5 pages of 20 MiB in stream 0's large segment;
	 * t0 maps one more page (120); t1 on stream 1 maps a page of its own segment: 140 MiB. */
	m = run_with(other, RM_SIM_ALLOC_PYTORCH_EXPANDABLE);
	cr_assert_eq(m.peak_reserved_bytes, 140 * MiB);
	/* Exact: reserved is what is allocated. */
	m = run_with(other, RM_SIM_ALLOC_EXACT);
	cr_assert_eq(m.peak_reserved_bytes, 103 * MiB);
	cr_assert_eq(m.num_alloc_retries, 0);
	rm_program_destroy(same);
	rm_program_destroy(other);
}

Test(allocator, jax_preallocates_three_quarters_of_hbm)
{
	rm_program *p = two_tensors(1);
	rm_sim_metrics m = run_with(p, RM_SIM_ALLOC_JAX_PREALLOC);
	/* h100-sxm HBM: 85520809984 B (81559 MiB); x 0.75 = 21380202496 x 3 = 64140607488 B. */
	cr_assert_eq(h100()->hbm_bytes, INT64_C(85520809984));
	cr_assert_eq(m.peak_reserved_bytes, INT64_C(64140607488));
	cr_assert_eq(m.peak_memory_bytes, 103 * MiB);
	rm_program_destroy(p);
}

Test(allocator, an_unknown_allocator_is_refused)
{
	rm_program *p = two_tensors(0);
	rm_error err;
	rm_error_clear(&err);
	rm_sim_options opt = {.allocator = RM_SIM_ALLOC_COUNT};
	cr_assert_null(rm_sim_create(p, h100(), &opt, &err));
	cr_assert_eq(err.status, RM_INVALID);
	cr_assert(strstr(err.msg, "allocator"), "%s", err.msg);
	rm_program_destroy(p);
}

/* ---- the scenario key -------------------------------------------------------------------- */

static rm_status resolve_with(const char *mode, const char *alloc, rm_sim_allocator *out, rm_error *err)
{
	char text[256];
	snprintf(text, sizeof(text), "model: llama-2-7b\nscheduler:\n  mode: %s\n  allocator: %s\n", mode, alloc);
	rm_scenario sc;
	rm_scenario_init(&sc);
	rm_status st = rm_scenario_parse(text, strlen(text), "a.yaml", &sc, err);
	cr_assert_eq(st, RM_OK, "%s", err->msg);
	rm_scenario_resolved res;
	st = rm_scenario_resolve(&sc, NULL, &res, err);
	if (st == RM_OK) {
		*out = res.allocator;
		cr_assert_float_eq(res.alloc_fraction, 0.75, 1e-12);
		rm_scenario_resolved_finish(&res);
	}
	return st;
}

Test(allocator, scheduler_allocator_resolves_auto_by_runtime)
{
	rm_error err;
	rm_error_clear(&err);
	rm_sim_allocator a = RM_SIM_ALLOC_COUNT;
	cr_assert_eq(resolve_with("xla", "auto", &a, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(a, RM_SIM_ALLOC_JAX_PREALLOC);
	cr_assert_eq(resolve_with("ideal", "auto", &a, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(a, RM_SIM_ALLOC_PYTORCH);
	cr_assert_eq(resolve_with("xla", "pytorch_expandable", &a, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(a, RM_SIM_ALLOC_PYTORCH_EXPANDABLE);
	cr_assert_eq(resolve_with("xla", "platform", &a, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(a, RM_SIM_ALLOC_PLATFORM);
	cr_assert_str_eq(rm_sim_allocator_describe(a), "XLA platform allocator: reserved = allocated");
	cr_assert_eq(resolve_with("ideal", "tcmalloc", &a, &err), RM_INVALID);
	cr_assert_str_eq(err.file, "a.yaml");
	cr_assert_eq(err.line, 4);
	cr_assert(strstr(err.msg, "scheduler.allocator"), "%s", err.msg);
	cr_assert(strstr(err.msg, "\"tcmalloc\""), "%s", err.msg);
}
