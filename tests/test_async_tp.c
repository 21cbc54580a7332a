/*
 * Async tensor parallelism (parallelism.async_tp): the micro-pipelined all-gather -> projections
 * and projection -> reduce-scatter the scheduler emits (schedules/scheduler.c ATP_*), their
 * copy-engine peer copies (RM_COPY_P2P) and the pipeline the engine runs from them.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "remora/cost.h"
#include "remora/hw.h"
#include "scenario_run.h"

/* llama-2-7b (h 4096, 32 layers) at seq 1024, TP 8 with SP on one node, no FSDP. */
#define ATP_BASE                                                                                   \
	"model: llama-2-7b\ncluster: {gpus_per_node: 8, nodes: 1}\ntraining: {seq_len: 1024}\n"      \
	"remat: {policy: everything_saveable, scan: false}\nscheduler: {mode: fsdp2}\n"
#define ATP_LONG                                                                                   \
	"model: llama-2-7b\ncluster: {gpus_per_node: 8, nodes: 1}\ntraining: {seq_len: 4096}\n"      \
	"remat: {policy: everything_saveable, scan: false}\nscheduler: {mode: fsdp2}\n"
#define ATP_PAR "parallelism: {tp: 8, sp: true, fsdp: 1, async_tp: true}\n"

static int32_t op_named(const rm_program *p, const char *name)
{
	for (int32_t i = 0; i < p->n_ops; i++)
		if (strcmp(p->ops[i].name, name) == 0)
			return i;
	cr_assert_fail("no op %s", name);
	return -1;
}

static bool waits_for(const rm_program *p, int32_t op, int32_t recorder)
{
	const rm_program_op *o = &p->ops[op], *r = &p->ops[recorder];
	const int32_t *w = rm_program_refs(p, o->waits), *rec = rm_program_refs(p, r->records);
	for (uint32_t i = 0; i < o->waits.count; i++)
		for (uint32_t j = 0; j < r->records.count; j++)
			if (w[i] == rec[j])
				return true;
	return false;
}

/* A copy-engine copy of 1 MiB to a peer: one 3 us launch, then 1048576 B at the measured 371.2
 * GB/s (nvbandwidth device_to_device_memcpy_read_ce, 8x H100; cost.h RM_CE_D2D_GBPS_H100):
 * 3 + 2.8248 us, on NVLink, holding no SMs; no bytes, no time. */
Test(async_tp, peer_copy_cost)
{
	const rm_hw_profile *hw = rm_hw_profile_find("h100-sxm", NULL);
	cr_assert_not_null(hw);
	rm_cost_op op = {.kind = RM_COST_COPY, .copy = {.dir = RM_COPY_P2P, .bytes = 1 << 20}};
	double expect = 3e-6 + 1048576.0 / 371.2e9;
	cr_assert_float_eq(expect, 5.8248e-6, 0.0001e-6);
	const rm_cost_model *m = rm_cost_model_default();
	cr_assert_float_eq(m->op_time_s(m, &op, hw), expect, 1e-15);
	cr_assert_eq(m->sms_held(m, &op, hw), 0);
	cr_assert_eq(rm_cost_op_resource(&op), RM_RES_NVLINK);
	op.copy.bytes = 0;
	cr_assert_eq(m->op_time_s(m, &op, hw), 0.0);
	rm_copy_dir d;
	cr_assert(rm_copy_dir_parse("p2p", &d) && d == RM_COPY_P2P);
}

/*
 * What the scheduler emits for a layer's forward at TP 8: the attention input (1 x 1024 x 4096
 * bf16 = 8 MiB gathered) arrives as 7 peer copies of 1 MiB on the copy-engine stream; the query,
 * key and value projections run as 8 chunks of 128 tokens each, chunk by chunk together, chunk i
 * of the query after copy i; the output projection's 8 chunks each send their 1 MiB to its owner
 * but the last (local) one, and the reduce-scatter is the sum of the 8 chunks (8 MiB read, 1 MiB
 * written). Per layer 6 collectives are micro-pipelined: the two forward all-gathers and
 * reduce-scatters and the backward all-gathers of the output-projections' gradients: 192 in 32
 * layers.
 */
Test(async_tp, emitted_pipeline)
{
	run r;
	run_text(&r, ATP_BASE ATP_PAR);
	const rm_program *p = r.prog;
	cr_assert_eq(r.rep.async_tp_collectives, 32 * 6);
	int32_t copies[8];
	for (int i = 1; i < 8; i++) {
		char n[96];
		snprintf(n, sizeof(n), "layer00/fwd/attention_input_gathered/p2p%d", i);
		copies[i] = op_named(p, n);
		const rm_program_op *c = &p->ops[copies[i]];
		cr_assert_eq(c->cost.kind, RM_COST_COPY);
		cr_assert_eq(c->cost.copy.dir, RM_COPY_P2P);
		cr_assert_eq(c->cost.copy.bytes, 1 << 20);
		cr_assert_str_eq(p->streams[c->stream].name, "tp-copy-engine");
	}
	const char *users[3] = {"dot_attention_query", "dot_attention_key", "dot_attention_value"};
	int32_t prev = -1;
	for (int i = 0; i < 8; i++)
		for (int u = 0; u < 3; u++) {
			char n[96];
			snprintf(n, sizeof(n), "layer00/fwd/%s/chunk%d", users[u], i);
			int32_t o = op_named(p, n);
			cr_assert_gt(o, prev, "%s out of chunk order", n);
			prev = o;
			cr_assert_eq(p->ops[o].cost.gemm.m, 128);
			cr_assert_eq(p->ops[o].cost.gemm.k, 4096);
			if (i > 0 && u == 0)
				cr_assert(waits_for(p, o, copies[i]), "%s does not wait for its shard", n);
		}
	int32_t last_chunk = op_named(p, "layer00/fwd/dot_attention_out/chunk7");
	cr_assert_eq(p->ops[last_chunk].cost.gemm.m, 128);
	for (int i = 1; i < 8; i++) {
		char n[96];
		snprintf(n, sizeof(n), "layer00/fwd/dot_attention_out/p2p%d", i);
		int32_t c = op_named(p, n);
		cr_assert_eq(p->ops[c].cost.copy.bytes, 1 << 20);
	}
	const rm_program_op *red = &p->ops[op_named(p, "layer00/fwd/attention_out_reduced")];
	cr_assert_eq(red->cost.kind, RM_COST_ELEMENTWISE);
	cr_assert_eq(red->cost.elementwise.bytes_read, 8 << 20);
	cr_assert_eq(red->cost.elementwise.bytes_written, 1 << 20);
	/* the backward: the output gradient of the MLP all-gathered by copies for the dgrad */
	op_named(p, "layer00/bwd/mlp_out_reduced.bwd/p2p7");
	op_named(p, "layer00/bwd/dot_mlp_out.dgrad/chunk7");
	run_finish(&r);
}

/*
 * The engine runs the two-stage pipeline the emission describes: the copies one after another
 * (each its solo time: nothing else uses NVLink with FSDP off), the q/k/v chunk group i starting
 * when both group i - 1 has ended and copy i has landed. So the region ends at
 * max(8 g, g + 7 c) after the copies start, g one chunk group, c one copy. Whether it pays is
 * the chunks' size: at 1024 tokens the GEMMs of 128 rows lose more to their fixed cost and wave
 * quantization than the overlap saves, and the step is slower than with the collectives run whole
 * on the compute stream; at 4096 tokens (512 rows) it is faster (fused all-gather + matmul on
 * 8x H100: NCCL-then-matmul fastest at M <= 256, the fused kernels 1.11-1.13x faster from M =
 * 512; meta-pytorch/kraken pull/2, docs/reference/kernels-h100.md section 7).
 */
Test(async_tp, pipeline_timing)
{
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	const char *text = ATP_BASE ATP_PAR;
	cr_assert_eq(rm_scenario_parse(text, strlen(text), "t.yaml", &sc, &err), RM_OK, "%s", err.msg);
	rm_scenario_resolved res;
	cr_assert_eq(rm_scenario_resolve(&sc, NULL, &res, &err), RM_OK, "%s", err.msg);
	rm_schedule_report rep;
	rm_program *p = rm_schedule_build(&res.sched, &rep, &err);
	cr_assert_not_null(p, "%s", err.msg);
	rm_sim_options opt = {.hw_queues = res.hw_queues};
	rm_sim *s = rm_sim_create(p, &res.hw, &opt, &err);
	cr_assert_not_null(s, "%s", err.msg);
	cr_assert_eq(rm_sim_run(s, &err), RM_OK, "%s", err.msg);
	const char *users[3] = {"dot_attention_query", "dot_attention_key", "dot_attention_value"};
	double c_solo = 3e-6 + 1048576.0 / 371.2e9;
	rm_time_ps copy_end[8] = {0}, group_end = 0;
	rm_time_ps t0 = rm_sim_op_start(s, op_named(p, "layer00/fwd/attention_input_gathered/p2p1"));
	for (int i = 1; i < 8; i++) {
		char n[96];
		snprintf(n, sizeof(n), "layer00/fwd/attention_input_gathered/p2p%d", i);
		int32_t c = op_named(p, n);
		double d = rm_time_to_s(rm_sim_op_end(s, c) - rm_sim_op_start(s, c));
		cr_assert_float_eq(d, c_solo, 1e-11, "copy %d took %g s", i, d);
		copy_end[i] = rm_sim_op_end(s, c);
	}
	double g = 0;
	for (int i = 0; i < 8; i++) {
		char n[96];
		snprintf(n, sizeof(n), "layer00/fwd/%s/chunk%d", users[0], i);
		rm_time_ps start = rm_sim_op_start(s, op_named(p, n));
		rm_time_ps ready = i == 0 ? t0 : (group_end > copy_end[i] ? group_end : copy_end[i]);
		cr_assert_eq(start, ready, "chunk group %d starts at %llu ps, ready at %llu", i, (unsigned long long)start,
			     (unsigned long long)ready);
		snprintf(n, sizeof(n), "layer00/fwd/%s/chunk%d", users[2], i);
		group_end = rm_sim_op_end(s, op_named(p, n));
		if (i == 0)
			g = rm_time_to_s(group_end - start);
	}
	double expect = fmax(8 * g, g + 7 * c_solo);
	cr_assert_float_eq(rm_time_to_s(group_end - t0), expect, 1e-9, "region %g s, expected %g", rm_time_to_s(group_end - t0),
			   expect);
	rm_time_ps step_async = rm_sim_get_metrics(s)->step_time;
	rm_sim_destroy(s);
	rm_program_destroy(p);
	rm_schedule_report_finish(&rep);
	rm_scenario_resolved_finish(&res);

	run plain;
	run_text(&plain, ATP_BASE "parallelism: {tp: 8, sp: true, fsdp: 1}\n");
	cr_assert_eq(plain.rep.async_tp_collectives, 0);
	cr_assert_gt(step_async, plain.m.step_time, "chunks of 128 rows: %g vs %g s", rm_time_to_s(step_async),
		     rm_time_to_s(plain.m.step_time));
	run_finish(&plain);

	/* 4096 tokens: chunks of 512 rows, and the overlap wins */
	run a, b;
	run_text(&a, ATP_LONG ATP_PAR);
	run_text(&b, ATP_LONG "parallelism: {tp: 8, sp: true, fsdp: 1}\n");
	cr_assert_lt(a.m.step_time, b.m.step_time);
	run_finish(&a);
	run_finish(&b);
}

/* Async TP needs sequence parallelism (the pass matches its collectives), a tensor-parallel
 * group, and that group inside one node (symmetric memory over NVLink). */
Test(async_tp, bad_settings)
{
	expect_scenario_error("model: llama-2-7b\nparallelism: {tp: 8, async_tp: true}\n", RM_INVALID, 2, 32,
			      "set parallelism.sp: true");
	expect_scenario_error("model: llama-2-7b\nparallelism: {async_tp: true}\n", RM_INVALID, 2, 25,
			      "needs parallelism.tp > 1");
	expect_scenario_error("model: llama-2-7b\ncluster: {gpus_per_node: 8, nodes: 2}\n"
			      "parallelism: {tp: 16, sp: true, fsdp: 1, async_tp: true}\n",
			      RM_INVALID, 3, 52, "must fit in one node");
}

/* ---- DTensor's layout copies (scheduler.c layout_copy) ---- */

/* The ops named ".../chunk-cat", the bytes each reads and the stream of the first. */
static int32_t layout_copies(const rm_program *p, int64_t *bytes_each, bool *same_bytes, int32_t *stream)
{
	int32_t n = 0;
	*same_bytes = true;
	for (int32_t i = 0; i < p->n_ops; i++) {
		const char *nm = p->ops[i].name;
		size_t len = strlen(nm);
		if (len < 10 || strcmp(nm + len - 10, "/chunk-cat") != 0 || strncmp(nm, "layer", 5) != 0)
			continue;
		const rm_cost_op *c = &p->ops[i].cost;
		cr_assert_eq(c->kind, RM_COST_ELEMENTWISE);
		cr_assert_eq(c->elementwise.bytes_read, c->elementwise.bytes_written);
		if (n == 0) {
			*bytes_each = c->elementwise.bytes_read;
			*stream = p->ops[i].stream;
		} else if (c->elementwise.bytes_read != *bytes_each) {
			*same_bytes = false;
		}
		n++;
	}
	return n;
}

#define COPY_BASE                                                                                  \
	"model: llama-2-7b\ncluster: {gpus_per_node: 8, nodes: 1}\ntraining: {seq_len: 4096}\n"      \
	"remat: {policy: everything_saveable, scan: false}\n"

/*
 * PyTorch shards [b, s, h] activations on the sequence (Shard(1)) and NCCL gathers along dim 0, so
 * each sequence-parallel all-gather is followed by torch.cat(torch.chunk(out, tp, dim=0), dim=1)
 * and each reduce-scatter preceded by torch.cat(torch.chunk(x, tp, dim=1))
 * (torch/distributed/_functional_collectives.py): one copy of the whole buffer, 1 x 4096 x 4096
 * bf16 = 33,554,432 bytes read and as many written. Per layer at TP 2 with everything saved: the
 * forward's 2 all-gathers and 2 reduce-scatters, their 4 conjugates in the backward, and the 2
 * re-gathers of the projections' inputs the weight gradients read (sequence parallelism keeps
 * the shard): 10, 320 in 32 layers, on the compute stream.
 */
Test(async_tp, dtensor_sequence_collectives_copy_their_buffer)
{
	run r;
	run_text(&r, COPY_BASE "parallelism: {tp: 2, sp: true, fsdp: 4}\nscheduler: {mode: fsdp2}\n");
	int64_t each = 0;
	bool same = false;
	int32_t stream = -1;
	cr_assert_eq(layout_copies(r.prog, &each, &same, &stream), 320);
	cr_assert(same);
	cr_assert_eq(each, INT64_C(4096) * 4096 * 2);
	cr_assert_eq(r.prog->streams[stream].kind, RM_STREAM_COMPUTE);
	/* the gather's copy reads the rank-ordered buffer and writes the gathered input q reads */
	int32_t ag = op_named(r.prog, "layer00/fwd/attention_input_gathered");
	int32_t cp = op_named(r.prog, "layer00/fwd/attention_input_gathered/chunk-cat");
	int32_t q = op_named(r.prog, "layer00/fwd/dot_attention_query");
	cr_assert(ag < cp && cp < q);
	const int32_t *ag_out = rm_program_refs(r.prog, r.prog->ops[ag].outputs);
	const int32_t *cp_in = rm_program_refs(r.prog, r.prog->ops[cp].inputs);
	cr_assert_eq(ag_out[0], cp_in[0]);
	run_finish(&r);
}

/* Megatron-LM keeps [s, b, h] and gathers along the first dimension; without sequence parallelism
 * the row-parallel outputs are all-reduced in place: no copy either way. */
Test(async_tp, no_layout_copy_for_megatron_or_without_sp)
{
	int64_t each;
	bool same;
	int32_t stream;
	run r;
	run_text(&r, COPY_BASE "parallelism: {tp: 2, sp: true, fsdp: 1}\nscheduler: {mode: megatron}\n");
	cr_assert_eq(layout_copies(r.prog, &each, &same, &stream), 0);
	run_finish(&r);
	run_text(&r, COPY_BASE "parallelism: {tp: 2, sp: false, fsdp: 4}\nscheduler: {mode: fsdp2}\n");
	cr_assert_eq(layout_copies(r.prog, &each, &same, &stream), 0);
	run_finish(&r);
}

/* Async TP's fused all-gather-matmul and matmul-reduce-scatter move the gather dim to the front
 * and write the shards in place (torch/distributed/_symmetric_memory _fused_all_gather_matmul_impl):
 * the 6 micro-pipelined collectives of a layer copy nothing; the other 4 (the backward
 * reduce-scatters of the gathers' gradients and the 2 re-gathers) are NCCL calls with their
 * copies: 128 in 32 layers. */
Test(async_tp, fused_collectives_copy_nothing)
{
	int64_t each;
	bool same;
	int32_t stream;
	run r;
	run_text(&r, COPY_BASE "parallelism: {tp: 2, sp: true, fsdp: 4, async_tp: true}\nscheduler: {mode: fsdp2}\n");
	cr_assert_eq(r.rep.async_tp_collectives, 32 * 6);
	cr_assert_eq(layout_copies(r.prog, &each, &same, &stream), 32 * 4);
	run_finish(&r);
}
