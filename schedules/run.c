/*
 * The resolved run's canonical text and digest (remora/scenario.h). Every value that decides a
 * result is written, by name, in a fixed order; nothing that only names or documents a value
 * (profile names, file paths, sources) is. Adding a field to one of the resolved structs means
 * adding it here: tests/test_schedule.c checks that changing each kind of value changes the
 * digest.
 */
#include <stdio.h>
#include <string.h>

#include "model_digest.h"
#include "remora/scenario.h"

const char *rm_model_revision(void)
{
	return REMORA_MODEL_DIGEST;
}

static void canon_model(rm_canon *c, const rm_model_config *m)
{
	rm_canon_int(c, "model.arch", m->arch);
	rm_canon_int(c, "model.vocab", m->vocab);
	rm_canon_int(c, "model.hidden", m->hidden);
	rm_canon_int(c, "model.layers", m->layers);
	rm_canon_int(c, "model.heads", m->heads);
	rm_canon_int(c, "model.kv_heads", m->kv_heads);
	rm_canon_int(c, "model.head_dim", m->head_dim);
	rm_canon_int(c, "model.ffn", m->ffn);
	rm_canon_int(c, "model.max_pos", m->max_pos);
	rm_canon_int(c, "model.tied", m->tied);
	rm_canon_int(c, "model.qkv_bias", m->qkv_bias);
	rm_canon_int(c, "model.out_bias", m->out_bias);
	rm_canon_int(c, "model.norm", m->norm);
	rm_canon_int(c, "model.mlp", m->mlp);
	rm_canon_int(c, "model.learned_pos", m->learned_pos);
	rm_canon_real(c, "model.attn_dropout", m->attn_dropout);
	rm_canon_real(c, "model.resid_dropout", m->resid_dropout);
	rm_canon_real(c, "model.embd_dropout", m->embd_dropout);
	rm_canon_int(c, "model.sliding_window", m->sliding_window);
}

static void canon_train(rm_canon *c, const rm_train_config *t)
{
	rm_canon_int(c, "train.seq_len", t->seq_len);
	rm_canon_int(c, "train.micro_batch", t->micro_batch);
	rm_canon_int(c, "train.grad_accum", t->grad_accum);
	rm_canon_int(c, "train.fsdp", t->fsdp);
	rm_canon_int(c, "train.dtype", t->dtype);
	rm_canon_int(c, "train.param_dtype", t->param_dtype);
	rm_canon_int(c, "train.grad_dtype", t->grad_dtype);
	rm_canon_int(c, "train.optimizer_dtype", t->optimizer_dtype);
	rm_canon_int(c, "train.optimizer", t->optimizer);
	rm_canon_int(c, "train.master_weights", t->master_weights);
	rm_canon_int(c, "train.fused_attention", t->fused_attention);
	rm_canon_int(c, "train.causal", t->causal);
	rm_canon_int(c, "train.dropout", t->dropout);
	rm_canon_int(c, "train.loss", t->loss);
	if (t->rope != RM_ROPE_COMPLEX)
		rm_canon_int(c, "train.rope", t->rope);
	rm_canon_int(c, "train.grad_clip", t->grad_clip);
	rm_canon_int(c, "train.gemm_dtype", t->gemm_dtype);
	rm_canon_int(c, "train.fp8_all_gather", t->fp8_all_gather);
	rm_canon_int(c, "train.master_shards", t->master_shards);
	rm_canon_int(c, "train.dp_replicate", t->dp_replicate);
	rm_canon_int(c, "train.zero", t->zero);
	rm_canon_int(c, "train.tp", t->tp);
	rm_canon_int(c, "train.sp", t->sp);
	if (t->async_tp)
		rm_canon_int(c, "train.async_tp", t->async_tp);
	rm_canon_int(c, "train.cp", t->cp);
	rm_canon_int(c, "train.ep", t->ep);
	rm_canon_real(c, "train.moe_imbalance", t->moe_imbalance);
	rm_canon_real(c, "train.moe_capacity_factor", t->moe_capacity_factor);
	rm_canon_int(c, "train.pp", t->pp);
	rm_canon_int(c, "train.pp_schedule", t->pp_schedule);
	rm_canon_int(c, "train.virtual_stages", t->virtual_stages);
	rm_canon_int(c, "train.loss_parallel", t->loss_parallel);
	rm_canon_int(c, "train.tp_embedding_replicated", t->tp_embedding_replicated);
}

static void canon_hw(rm_canon *c, const rm_hw_profile *hw)
{
	char key[64];
	for (int f = 0; f < RM_HW_FIELD_COUNT; f++) {
		snprintf(key, sizeof(key), "hw.%s", rm_hw_field_info_at((rm_hw_field)f)->key);
		rm_canon_real(c, key, rm_hw_profile_get(hw, (rm_hw_field)f));
	}
}

static void canon_nccl(rm_canon *c, const rm_nccl_model *n)
{
	rm_canon_str(c, "nccl.tables", rm_nccl_model_version(n));
	rm_canon_int(c, "nccl.calibrated", n->calibrated);
	rm_canon_int(c, "nccl.overrides", n->n_overrides);
	char key[64];
	for (int i = 0; i < n->n_overrides; i++) {
		const rm_nccl_override *o = &n->overrides[i];
		char v[256];
		snprintf(v, sizeof(v), "%d %d %d %dx%dx%d %lld %lld %a %a", (int)o->coll, (int)o->algo, (int)o->proto,
			 o->ranks, o->ranks_per_node, o->nodes, (long long)o->min_bytes, (long long)o->max_bytes,
			 o->latency_us, o->algbw_GBps);
		snprintf(key, sizeof(key), "nccl.override[%d]", i);
		rm_canon_str(c, key, v);
	}
	/* the fabric only when one is set, so that runs without cluster.topology keep their digest */
	if (n->fabric.kind != RM_FABRIC_NONE) {
		rm_canon_str(c, "nccl.fabric", rm_fabric_kind_name(n->fabric.kind));
		rm_canon_int(c, "nccl.fabric.pxn", n->fabric.pxn);
		for (int i = 0; i < n->fabric.n_tiers; i++) {
			const rm_fabric_tier *t = &n->fabric.tiers[i];
			char v[128];
			snprintf(v, sizeof(v), "%d %a %a", t->nodes, t->oversubscription, t->hop_latency_us);
			snprintf(key, sizeof(key), "nccl.fabric.tier[%d]", i);
			rm_canon_str(c, key, v);
		}
	}
}

static void canon_flags(rm_canon *c, const rm_xla_flags *f)
{
	const rm_xla_version *v = rm_xla_version_at(f->version);
	rm_canon_str(c, "xla.version", v ? v->name : "");
	rm_canon_int(c, "xla.hopper", f->hopper);
	rm_canon_int(c, "xla.latency_hiding_scheduler", f->latency_hiding_scheduler);
	rm_canon_int(c, "xla.lhs_flag", f->lhs_flag);
	rm_canon_int(c, "xla.pipelined_collectives", f->pipelined_collectives);
	rm_canon_int(c, "xla.pipelined_all_gather", f->pipelined_all_gather);
	rm_canon_int(c, "xla.pipelined_reduce_scatter", f->pipelined_reduce_scatter);
	rm_canon_int(c, "xla.pipelined_all_reduce", f->pipelined_all_reduce);
	rm_canon_int(c, "xla.while_loop_double_buffering", f->while_loop_double_buffering);
	rm_canon_int(c, "xla.highest_priority_async_stream", f->highest_priority_async_stream);
	rm_canon_int(c, "xla.all_gather_combine_threshold_bytes", f->all_gather_combine_threshold_bytes);
	rm_canon_int(c, "xla.reduce_scatter_combine_threshold_bytes", f->reduce_scatter_combine_threshold_bytes);
	rm_canon_int(c, "xla.all_reduce_combine_threshold_bytes", f->all_reduce_combine_threshold_bytes);
	rm_canon_int(c, "xla.all_gather_combine_by_dim", f->all_gather_combine_by_dim);
	rm_canon_int(c, "xla.reduce_scatter_combine_by_dim", f->reduce_scatter_combine_by_dim);
	char key[64];
	for (int k = 0; k < RM_XLA_COLL_KIND_COUNT; k++) {
		snprintf(key, sizeof(key), "xla.async_disabled.%s", rm_xla_coll_kind_name((rm_xla_coll_kind)k));
		rm_canon_int(c, key, f->async_disabled[k]);
	}
	rm_canon_int(c, "xla.memory_limit_slop_factor", f->memory_limit_slop_factor);
	rm_canon_int(c, "xla.parallel_collective_overlap_limit", f->parallel_collective_overlap_limit);
	rm_canon_int(c, "xla.graph_level", f->graph_level);
	rm_canon_int(c, "xla.command_buffer_disabled", f->command_buffer_disabled);
	rm_canon_int(c, "xla.profile_guided", f->profile_guided);
	rm_canon_int(c, "xla.analytical_sol_latency_estimator", f->analytical_sol_latency_estimator);
	/* only when set, so that the canonical form (and every stored key) of runs without it stays */
	if (f->remat_pass_disabled)
		rm_canon_int(c, "xla.remat_pass_disabled", 1);
	/* unmodelled flags are warned about and change nothing: left out */
}

void rm_scenario_resolved_canonical(const rm_scenario_resolved *r, rm_canon *c)
{
	rm_canon_str(c, "schema", "remora.run/1");
	rm_canon_str(c, "model_revision", REMORA_MODEL_DIGEST);
	canon_model(c, &r->model);
	canon_train(c, &r->train);
	canon_hw(c, &r->hw);
	canon_nccl(c, &r->cost.nccl);
	canon_flags(c, &r->flags);
	char policy[4096];
	rm_canon_str(c, "remat.policy", r->policy ? rm_remat_policy_format(r->policy, policy, sizeof(policy)) : "");
	const rm_schedule_config *s = &r->sched;
	rm_canon_int(c, "sched.fsdp_nodes", s->fsdp_nodes);
	rm_canon_int(c, "sched.replica_nodes", s->replica_nodes);
	rm_canon_int(c, "sched.tp_nodes", s->tp_nodes);
	rm_canon_int(c, "sched.cp_nodes", s->cp_nodes);
	rm_canon_int(c, "sched.ep_nodes", s->ep_nodes);
	rm_canon_int(c, "sched.megatron", s->megatron);
	rm_canon_int(c, "sched.overlap_grad_reduce", s->overlap_grad_reduce);
	rm_canon_int(c, "sched.overlap_param_gather", s->overlap_param_gather);
	rm_canon_int(c, "sched.scan", s->scan);
	rm_canon_int(c, "sched.recompute_num_layers", s->recompute_num_layers);
	rm_canon_int(c, "sched.prevent_cse", s->prevent_cse);
	rm_canon_int(c, "sched.compile_partitioner", s->compile_partitioner);
	rm_canon_int(c, "sched.eager", s->eager);
	rm_canon_int(c, "sched.reshard_after_forward", s->reshard_after_forward);
	rm_canon_int(c, "sched.grad_sync_last", s->grad_sync_last);
	rm_canon_int(c, "sched.mode", s->mode);
	rm_canon_int(c, "sched.prefetch_depth", s->prefetch_depth);
	rm_canon_int(c, "sched.lhs_cost", s->lhs_cost);
	rm_canon_int(c, "sched.device_memory_bytes", s->device_memory_bytes);
	rm_canon_real(c, "sched.mem_fraction", s->mem_fraction);
	rm_canon_int(c, "sched.platform_allocator", s->platform_allocator);
	rm_canon_int(c, "sched.no_donate", s->no_donate);
	rm_canon_int(c, "sim.hw_queues", r->hw_queues);
	rm_canon_int(c, "kernels.attention", r->cost.kernels.attention);
	rm_canon_int(c, "kernels.fused", r->cost.kernels.fused);
	rm_canon_real(c, "kernels.host_us", r->cost.kernels.host_us);
	if (r->cost.kernels.ce_collectives) /* only when set: the digests of earlier scenarios stand */
		rm_canon_int(c, "kernels.ce_collectives", 1);
	rm_canon_int(c, "cluster.gpus", r->gpus);
	rm_canon_int(c, "memory.headroom_bytes", r->memory.headroom_bytes);
	rm_canon_int(c, "memory.allocator", r->allocator);
	rm_canon_real(c, "memory.alloc_fraction", r->alloc_fraction);
}

void rm_scenario_resolved_digest(const rm_scenario_resolved *r, char hex[RM_SHA256_HEX])
{
	rm_canon c;
	rm_canon_init(&c);
	rm_scenario_resolved_canonical(r, &c);
	uint8_t d[RM_SHA256_BYTES];
	rm_canon_digest(&c, d);
	rm_sha256_hex(d, hex);
	rm_canon_finish(&c);
}
