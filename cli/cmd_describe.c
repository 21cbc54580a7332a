/*
 * `remora describe MODEL [--seq-len N] [--micro-batch N] [--fsdp N] [--json] ...`: the op graph
 * of one training step per GPU, op by op, with totals (parameters, FLOPs per token, activation
 * bytes per layer, static memory per GPU under FSDP).
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "remora/json.h"
#include "remora/workload.h"

static void describe_usage(FILE *out)
{
	fprintf(out,
		"usage: remora describe MODEL [options]\n\n"
		"MODEL is a preset (");
	for (const char *const *p = rm_model_preset_names(); *p; p++)
		fprintf(out, "%s%s", *p, p[1] ? ", " : "");
	fprintf(out,
		") or a path to a Hugging Face config.json.\n"
		"Prints the ops of one training step per GPU (embedding, one decoder layer forward and\n"
		"backward, head) with shapes, FLOPs, bytes and checkpoint names, and the totals.\n\n"
		"options:\n"
		"  -s, --seq-len N        sequence length (default: min(4096, max positions))\n"
		"  -b, --micro-batch N    sequences per GPU per micro-batch (default 1)\n"
		"  -f, --fsdp N           FSDP degree: params, grads, optimizer sharded N ways (default 1)\n"
		"      --tp N             tensor-parallel degree (Megatron column/row split; default 1)\n"
		"      --sp               sequence parallelism with --tp (norms and dropouts on seq/tp)\n"
		"  -g, --grad-accum N     micro-batches per step (default 1)\n"
		"      --dtype T          activation dtype: bf16 (default), fp16, fp32\n"
		"      --grad-dtype T     gradient dtype for memory: bf16 (default), fp32\n"
		"      --optimizer O      adamw (default), sgd_momentum, sgd\n"
		"      --no-master-weights  no fp32 master copy\n"
		"      --unfused-attention  QK^T, softmax, PV as separate kernels (default: flash)\n"
		"      --no-causal        bidirectional attention\n"
		"      --dropout on|off   dropout as the config sets it (on) or none (off)\n"
		"  -j, --json             machine-readable output\n"
		"  -h, --help             this help\n");
}

static json_t *shape_json(const rm_value *v)
{
	json_t *a = json_array();
	for (int i = 0; i < v->rank; i++)
		json_array_append_new(a, json_integer(v->shape[i]));
	return a;
}

static void shape_text(const rm_graph *g, const rm_op *op, char *buf, size_t n)
{
	if (op->kind == RM_OP_GEMM) {
		if (op->gemm.batch > 1)
			snprintf(buf, n, "%" PRId64 "x[%" PRId64 "x%" PRId64 "x%" PRId64 "]",
				 op->gemm.batch, op->gemm.m, op->gemm.n, op->gemm.k);
		else
			snprintf(buf, n, "%" PRId64 "x%" PRId64 "x%" PRId64, op->gemm.m, op->gemm.n,
				 op->gemm.k);
		return;
	}
	if (op->kind == RM_OP_COLLECTIVE) {
		snprintf(buf, n, "%s %.1f MiB", rm_collective_name(op->coll), (double)op->coll_bytes / 1048576.0);
		return;
	}
	if (op->kind == RM_OP_ATTENTION) {
		int w = snprintf(buf, n, "b%" PRId64 " h%" PRId64 "/%" PRId64 " s%" PRId64 " d%" PRId64,
				 op->attention.batch, op->attention.heads, op->attention.kv_heads,
				 op->attention.seq, op->attention.head_dim);
		if (op->attention.v_head_dim > 0 && w >= 0 && (size_t)w < n)
			snprintf(buf + w, n - (size_t)w, "/v%" PRId64, op->attention.v_head_dim);
		return;
	}
	const rm_value *v = NULL;
	if (op->phase == RM_PHASE_FWD && op->n_outputs > 0)
		v = &g->values[op->outputs[0]];
	else if (op->fwd_op >= 0 && g->ops[op->fwd_op].n_outputs > 0)
		v = &g->values[g->ops[op->fwd_op].outputs[0]];
	size_t used = 0;
	buf[0] = '\0';
	for (int i = 0; v && i < v->rank && used < n; i++)
		used += (size_t)snprintf(buf + used, n - used, "%s%" PRId64, i ? "x" : "", v->shape[i]);
}

/* The checkpoint name of a forward op's output (what a remat policy names), "" for backward. */
static const char *saved_name(const rm_graph *g, const rm_op *op)
{
	if (op->phase != RM_PHASE_FWD || op->n_outputs == 0)
		return "";
	return g->values[op->outputs[0]].name;
}

static json_t *graph_json(const rm_graph *g)
{
	json_t *doc = json_object();
	json_object_set_new(doc, "params", json_integer(g->params));
	json_t *ops = json_array();
	for (int i = 0; i < g->n_ops; i++) {
		const rm_op *op = &g->ops[i];
		json_t *o = json_object();
		json_object_set_new(o, "name", json_string(op->name));
		json_object_set_new(o, "kind", json_string(rm_op_kind_name(op->kind)));
		json_object_set_new(o, "phase", json_string(rm_phase_name(op->phase)));
		if (op->kind == RM_OP_GEMM) {
			json_t *gm = json_object();
			json_object_set_new(gm, "batch", json_integer(op->gemm.batch));
			json_object_set_new(gm, "m", json_integer(op->gemm.m));
			json_object_set_new(gm, "n", json_integer(op->gemm.n));
			json_object_set_new(gm, "k", json_integer(op->gemm.k));
			json_object_set_new(gm, "dtype", json_string(rm_dtype_name(op->gemm.dtype)));
			json_object_set_new(gm, "has_batch_dims", json_boolean(op->gemm.has_batch_dims));
			json_object_set_new(o, "gemm", gm);
		} else if (op->kind == RM_OP_ATTENTION) {
			json_t *at = json_object();
			json_object_set_new(at, "batch", json_integer(op->attention.batch));
			json_object_set_new(at, "heads", json_integer(op->attention.heads));
			json_object_set_new(at, "kv_heads", json_integer(op->attention.kv_heads));
			json_object_set_new(at, "seq", json_integer(op->attention.seq));
			json_object_set_new(at, "head_dim", json_integer(op->attention.head_dim));
			if (op->attention.v_head_dim > 0)
				json_object_set_new(at, "v_head_dim", json_integer(op->attention.v_head_dim));
			json_object_set_new(at, "causal", json_boolean(op->attention.causal));
			json_object_set_new(at, "fused", json_boolean(op->attention.fused));
			json_object_set_new(o, "attention", at);
		}
		json_object_set_new(o, "flops", json_real(op->flops));
		json_object_set_new(o, "bytes_read", json_integer(op->bytes_read));
		json_object_set_new(o, "bytes_written", json_integer(op->bytes_written));
		json_object_set_new(o, "weight_elems", json_integer(op->weight_elems));
		if (op->phase == RM_PHASE_FWD) {
			json_t *outs = json_array();
			for (int k = 0; k < op->n_outputs; k++) {
				const rm_value *v = &g->values[op->outputs[k]];
				json_t *jv = json_object();
				json_object_set_new(jv, "name", json_string(v->name));
				json_object_set_new(jv, "dtype", json_string(rm_dtype_name(v->dtype)));
				json_object_set_new(jv, "shape", shape_json(v));
				json_object_set_new(jv, "bytes", json_integer(v->bytes));
				json_object_set_new(jv, "needed_by_backward",
						    json_boolean(rm_graph_value_is_residual(g, op->outputs[k])));
				json_array_append_new(outs, jv);
			}
			json_object_set_new(o, "outputs", outs);
			json_t *ins = json_array();
			for (int k = 0; k < op->n_inputs; k++)
				json_array_append_new(ins, json_string(g->values[op->inputs[k]].name));
			json_object_set_new(o, "inputs", ins);
		} else {
			json_object_set_new(o, "differentiates", json_string(g->ops[op->fwd_op].name));
			json_t *res = json_array();
			for (int k = 0; k < op->n_residuals; k++)
				json_array_append_new(res, json_string(g->values[op->residuals[k]].name));
			json_object_set_new(o, "residuals", res);
		}
		json_array_append_new(ops, o);
	}
	json_object_set_new(doc, "ops", ops);
	json_object_set_new(doc, "fwd_flops", json_real(rm_graph_flops(g, RM_PHASE_FWD)));
	json_object_set_new(doc, "bwd_flops", json_real(rm_graph_flops(g, RM_PHASE_BWD_DGRAD) +
							 rm_graph_flops(g, RM_PHASE_BWD_WGRAD)));
	json_object_set_new(doc, "residual_bytes", json_integer(rm_graph_residual_bytes(g)));
	return doc;
}

/* The model's dimensions, the "model" object of describe's JSON. */
static json_t *model_json(const rm_model_config *m)
{
	json_t *jm = json_object();
	json_object_set_new(jm, "name", rm_json_string(m->name));
	json_object_set_new(jm, "architecture", json_string(rm_arch_hf_name(m->arch)));
	json_object_set_new(jm, "vocab", json_integer(m->vocab));
	json_object_set_new(jm, "hidden", json_integer(m->hidden));
	json_object_set_new(jm, "layers", json_integer(m->layers));
	json_object_set_new(jm, "heads", json_integer(m->heads));
	json_object_set_new(jm, "kv_heads", json_integer(m->kv_heads));
	json_object_set_new(jm, "head_dim", json_integer(m->head_dim));
	json_object_set_new(jm, "ffn", json_integer(m->ffn));
	json_object_set_new(jm, "max_positions", json_integer(m->max_pos));
	json_object_set_new(jm, "tied_embeddings", json_boolean(m->tied));
	return jm;
}

static json_t *describe_json(const rm_workload *wl)
{
	const rm_model_config *m = &wl->model;
	const rm_train_config *t = &wl->train;
	json_t *doc = json_object();
	json_object_set_new(doc, "schema", json_string("remora.describe/1"));
	json_t *jm = model_json(m);
	json_object_set_new(doc, "model", jm);
	json_t *jt = json_object();
	json_object_set_new(jt, "seq_len", json_integer(t->seq_len));
	json_object_set_new(jt, "micro_batch", json_integer(t->micro_batch));
	json_object_set_new(jt, "grad_accum", json_integer(t->grad_accum));
	json_object_set_new(jt, "fsdp", json_integer(t->fsdp));
	json_object_set_new(jt, "dtype", json_string(rm_dtype_name(t->dtype)));
	json_object_set_new(jt, "grad_dtype", json_string(rm_dtype_name(t->grad_dtype)));
	json_object_set_new(jt, "optimizer", json_string(rm_optimizer_name(t->optimizer)));
	json_object_set_new(jt, "master_weights", json_boolean(t->master_weights));
	json_object_set_new(jt, "fused_attention", json_boolean(t->fused_attention));
	json_object_set_new(jt, "causal", json_boolean(t->causal));
	json_object_set_new(doc, "training", jt);

	const rm_param_count *p = &wl->params;
	json_object_set_new(doc, "params", json_integer(p->total));
	json_t *jp = json_object();
	json_object_set_new(jp, "embedding", json_integer(p->embedding));
	json_object_set_new(jp, "per_layer", json_integer(p->per_layer));
	json_object_set_new(jp, "layers", json_integer(p->layers));
	json_object_set_new(jp, "final_norm", json_integer(p->final_norm));
	json_object_set_new(jp, "lm_head", json_integer(p->lm_head));
	json_object_set_new(jp, "nonembedding", json_integer(p->nonembedding));
	json_object_set_new(doc, "params_breakdown", jp);

	json_t *jf = json_object();
	json_object_set_new(jf, "convention",
			    json_string("PaLM appendix B: 6*N_nonembedding + 12*L*h*s, attention non-causal; "
					"N_nonembedding counts the LM head matmul, not the lookup tables"));
	json_object_set_new(jf, "model", json_real(rm_workload_model_flops_per_token(wl)));
	double tokens = (double)(t->seq_len * t->micro_batch);
	json_object_set_new(jf, "executed", json_real(rm_workload_executed_flops(wl) / tokens));
	json_object_set_new(doc, "flops_per_token", jf);

	rm_static_memory s = rm_workload_static_memory(wl);
	json_t *js = json_object();
	json_object_set_new(js, "convention",
			    json_string("ZeRO-3: params, grads and optimizer state sharded over fsdp; "
					"bf16 params, fp32 master, AdamW fp32 m and v"));
	json_object_set_new(js, "params", json_integer(s.params));
	json_object_set_new(js, "master_weights", json_integer(s.master));
	json_object_set_new(js, "grads", json_integer(s.grads));
	json_object_set_new(js, "optimizer", json_integer(s.optimizer));
	json_object_set_new(js, "total", json_integer(s.total));
	json_object_set_new(doc, "static_memory_per_gpu", js);

	json_t *ja = json_object();
	int64_t per_layer = rm_graph_residual_bytes(&wl->layer);
	int64_t nd = rm_workload_dense_layers(wl);
	int64_t per_dense = nd > 0 ? rm_graph_residual_bytes(&wl->dense_layer) : 0;
	json_object_set_new(ja, "per_layer_bytes", json_integer(per_layer));
	json_object_set_new(ja, "all_layers_bytes", json_integer(per_layer * (m->layers - nd) + per_dense * nd));
	json_object_set_new(ja, "layer_gathered_param_bytes",
			    json_integer(wl->layer.params * rm_dtype_size(t->param_dtype)));
	if (nd > 0) {
		json_object_set_new(ja, "per_dense_layer_bytes", json_integer(per_dense));
		json_object_set_new(ja, "dense_layer_gathered_param_bytes",
				    json_integer(wl->dense_layer.params * rm_dtype_size(t->param_dtype)));
	}
	json_object_set_new(doc, "activations", ja);

	json_object_set_new(doc, "embedding", graph_json(&wl->embedding));
	if (nd > 0)
		json_object_set_new(doc, "dense_layer", graph_json(&wl->dense_layer));
	json_object_set_new(doc, "layer", graph_json(&wl->layer));
	json_object_set_new(doc, "head", graph_json(&wl->head));
	return doc;
}

static void print_graph(const rm_graph *g, const char *title)
{
	printf("\n%s: %lld parameters\n", title, (long long)g->params);
	printf("  %-44s %-11s %-9s %-26s %10s %10s  %s\n", "op", "kind", "phase", "shape", "GFLOPs",
	       "out MiB", "checkpoint name");
	for (int i = 0; i < g->n_ops; i++) {
		const rm_op *op = &g->ops[i];
		char shape[64];
		shape_text(g, op, shape, sizeof(shape));
		double mb = op->phase == RM_PHASE_FWD && op->n_outputs > 0
				    ? (double)g->values[op->outputs[0]].bytes / (double)RM_MiB
				    : (double)op->bytes_written / (double)RM_MiB; /* binary, as the totals below */
		printf("  %-44s %-11s %-9s %-26s %10.3f %10.2f  %s\n", op->name,
		       rm_op_kind_name(op->kind), rm_phase_name(op->phase), shape, op->flops / 1e9, mb,
		       saved_name(g, op));
	}
}

static void describe_text(const rm_workload *wl)
{
	const rm_model_config *m = &wl->model;
	const rm_train_config *t = &wl->train;
	printf("%s (%s): L=%lld h=%lld heads=%lld kv_heads=%lld head_dim=%lld ffn=%lld vocab=%lld%s\n",
	       m->name, rm_arch_hf_name(m->arch), (long long)m->layers, (long long)m->hidden,
	       (long long)m->heads, (long long)m->kv_heads, (long long)m->head_dim,
	       (long long)m->ffn, (long long)m->vocab, m->tied ? " tied" : "");
	printf("per GPU: seq_len=%lld micro_batch=%lld tp=%lld%s fsdp=%lld dtype=%s attention=%s\n",
	       (long long)t->seq_len, (long long)t->micro_batch, (long long)t->tp, t->tp > 1 && t->sp ? " (sp)" : "",
	       (long long)t->fsdp,
	       rm_dtype_name(t->dtype), m->heads == 0 ? "none" : t->fused_attention ? "fused (flash)" : "unfused");
	int64_t nd = rm_workload_dense_layers(wl);
	print_graph(&wl->embedding, "embedding");
	if (nd > 0) {
		char title[96];
		snprintf(title, sizeof(title), "dense decoder layer (layers 0-%lld)", (long long)(nd - 1));
		print_graph(&wl->dense_layer, title);
		snprintf(title, sizeof(title), "MoE decoder layer (x %lld)", (long long)(m->layers - nd));
		print_graph(&wl->layer, title);
	} else {
		print_graph(&wl->layer, "decoder layer (x L)");
	}
	print_graph(&wl->head, "head");

	const rm_param_count *p = &wl->params;
	rm_static_memory s = rm_workload_static_memory(wl);
	char b1[32], b2[32], b3[32], b4[32], b5[32];
	double tokens = (double)(t->seq_len * t->micro_batch);
	printf("\ntotals\n");
	printf("  parameters             %lld (embedding %lld, per layer %lld, head %lld)\n",
	       (long long)p->total, (long long)p->embedding, (long long)p->per_layer,
	       (long long)(p->lm_head + p->final_norm));
	printf("  layer GFLOPs           fwd %.2f, bwd %.2f per micro-batch\n",
	       rm_graph_flops(&wl->layer, RM_PHASE_FWD) / 1e9,
	       (rm_graph_flops(&wl->layer, RM_PHASE_BWD_DGRAD) +
		rm_graph_flops(&wl->layer, RM_PHASE_BWD_WGRAD)) / 1e9);
	printf("  step TFLOPs per GPU    %.3f executed per micro-batch (no recompute)\n",
	       rm_workload_executed_flops(wl) / 1e12);
	printf("  FLOPs per token        %.4g model (%s, PaLM), %.4g executed\n", rm_workload_model_flops_per_token(wl),
	       m->mla ? "6N + 6La(d_qk+d_v)s" : "6N + 12Lhs", rm_workload_executed_flops(wl) / tokens);
	int64_t act = rm_graph_residual_bytes(&wl->layer);
	int64_t dact = nd > 0 ? rm_graph_residual_bytes(&wl->dense_layer) : 0;
	printf("  activations kept       %s per layer, %s for %lld layers (nothing recomputed)\n",
	       rm_format_bytes(act, b1, sizeof(b1)), rm_format_bytes(act * (m->layers - nd) + dact * nd, b2, sizeof(b2)),
	       (long long)m->layers);
	printf("  gathered layer params  %s per FSDP all-gather\n",
	       rm_format_bytes(wl->layer.params * rm_dtype_size(t->param_dtype), b1, sizeof(b1)));
	if (nd > 0) {
		printf("  dense layer            GFLOPs fwd %.2f, bwd %.2f; activations %s; gathered params %s\n",
		       rm_graph_flops(&wl->dense_layer, RM_PHASE_FWD) / 1e9,
		       (rm_graph_flops(&wl->dense_layer, RM_PHASE_BWD_DGRAD) +
			rm_graph_flops(&wl->dense_layer, RM_PHASE_BWD_WGRAD)) / 1e9,
		       rm_format_bytes(dact, b1, sizeof(b1)),
		       rm_format_bytes(wl->dense_layer.params * rm_dtype_size(t->param_dtype), b2, sizeof(b2)));
	}
	printf("  static memory per GPU  %s = params %s + master %s + grads %s + %s %s\n",
	       rm_format_bytes(s.total, b1, sizeof(b1)), rm_format_bytes(s.params, b2, sizeof(b2)),
	       rm_format_bytes(s.master, b3, sizeof(b3)), rm_format_bytes(s.grads, b4, sizeof(b4)),
	       rm_optimizer_name(t->optimizer), rm_format_bytes(s.optimizer, b5, sizeof(b5)));
}

/* Why a model has no op graph yet (rm_workload_create refuses it), or NULL. */
static const char *not_modelled(const rm_model_config *m)
{
	if (rm_model_config_is_moe(m) && m->dense_layers > 0 && m->dense_layers < m->layers && !m->dense_first)
		return "the op graph of dense layers between mixture-of-experts ones is not modelled yet: no ops, FLOPs or "
		       "memory";
	return NULL;
}

static json_t *params_json(const rm_param_count *p)
{
	json_t *jp = json_object();
	json_object_set_new(jp, "embedding", json_integer(p->embedding));
	json_object_set_new(jp, "per_layer", json_integer(p->per_layer));
	json_object_set_new(jp, "per_dense_layer", json_integer(p->per_dense_layer));
	json_object_set_new(jp, "layers", json_integer(p->layers));
	json_object_set_new(jp, "final_norm", json_integer(p->final_norm));
	json_object_set_new(jp, "lm_head", json_integer(p->lm_head));
	json_object_set_new(jp, "nonembedding", json_integer(p->nonembedding));
	json_object_set_new(jp, "routed_experts", json_integer(p->routed_experts));
	json_object_set_new(jp, "active", json_integer(p->active));
	json_object_set_new(jp, "active_nonembedding", json_integer(p->active_nonembedding));
	json_object_set_new(jp, "mtp", json_integer(p->mtp));
	return jp;
}

/* The parameter part of describe for a model without an op graph (MoE, MLA). */
static json_t *describe_params_json(const rm_model_config *m)
{
	rm_param_count p = rm_model_param_count(m);
	json_t *doc = json_object();
	json_object_set_new(doc, "schema", json_string("remora.describe/1"));
	json_t *jm = model_json(m);
	json_t *je = json_object();
	json_object_set_new(je, "experts", json_integer(m->experts));
	json_object_set_new(je, "experts_per_tok", json_integer(m->experts_per_tok));
	json_object_set_new(je, "expert_ffn", json_integer(m->expert_ffn));
	json_object_set_new(je, "shared_experts", json_integer(m->shared_experts));
	json_object_set_new(je, "shared_ffn", json_integer(m->shared_ffn));
	json_object_set_new(je, "dense_layers", json_integer(m->dense_layers));
	json_object_set_new(je, "mtp_layers", json_integer(m->mtp_layers));
	json_object_set_new(jm, "moe", je);
	if (m->mla) {
		json_t *ja = json_object();
		json_object_set_new(ja, "q_lora_rank", json_integer(m->q_lora_rank));
		json_object_set_new(ja, "kv_lora_rank", json_integer(m->kv_lora_rank));
		json_object_set_new(ja, "qk_nope_head_dim", json_integer(m->qk_nope_head_dim));
		json_object_set_new(ja, "qk_rope_head_dim", json_integer(m->qk_rope_head_dim));
		json_object_set_new(ja, "v_head_dim", json_integer(m->v_head_dim));
		json_object_set_new(jm, "mla", ja);
	}
	json_object_set_new(doc, "model", jm);
	json_object_set_new(doc, "params", json_integer(p.total));
	json_object_set_new(doc, "active_params", json_integer(p.active));
	json_object_set_new(doc, "params_breakdown", params_json(&p));
	json_object_set_new(doc, "not_modelled", json_string(not_modelled(m)));
	return doc;
}

static void describe_params_text(const rm_model_config *m)
{
	rm_param_count p = rm_model_param_count(m);
	printf("%s (%s): L=%lld h=%lld heads=%lld kv_heads=%lld head_dim=%lld ffn=%lld vocab=%lld%s\n",
	       m->name, rm_arch_hf_name(m->arch), (long long)m->layers, (long long)m->hidden,
	       (long long)m->heads, (long long)m->kv_heads, (long long)m->head_dim,
	       (long long)m->ffn, (long long)m->vocab, m->tied ? " tied" : "");
	if (rm_model_config_is_moe(m)) {
		printf("experts: %lld routed (top %lld, ffn %lld)", (long long)m->experts,
		       (long long)m->experts_per_tok, (long long)m->expert_ffn);
		if (m->shared_experts)
			printf(", %lld shared (ffn %lld%s)", (long long)m->shared_experts,
			       (long long)m->shared_ffn, m->shared_gate ? ", gated" : "");
		printf("; %lld MoE layers", (long long)(m->layers - m->dense_layers));
		if (m->dense_layers)
			printf(", %lld dense (ffn %lld)", (long long)m->dense_layers, (long long)m->ffn);
		printf("\n");
	}
	if (m->mla)
		printf("attention: latent (MLA) q_lora_rank=%lld kv_lora_rank=%lld qk_nope=%lld qk_rope=%lld v=%lld\n",
		       (long long)m->q_lora_rank, (long long)m->kv_lora_rank,
		       (long long)m->qk_nope_head_dim, (long long)m->qk_rope_head_dim,
		       (long long)m->v_head_dim);
	printf("\nparameters\n");
	printf("  total                  %lld (embedding %lld, layers %lld, head %lld)\n",
	       (long long)p.total, (long long)p.embedding, (long long)p.layers,
	       (long long)(p.lm_head + p.final_norm));
	printf("  per layer              %lld MoE", (long long)p.per_layer);
	if (m->dense_layers)
		printf(", %lld dense", (long long)p.per_dense_layer);
	printf("\n  routed experts         %lld\n", (long long)p.routed_experts);
	printf("  active per token       %lld (total minus the %lld routed experts of %lld not chosen, per MoE layer)\n",
	       (long long)p.active, (long long)(m->experts - m->experts_per_tok), (long long)m->experts);
	if (m->mtp_layers)
		printf("  multi-token prediction %lld in %lld module(s), not in the total\n", (long long)p.mtp,
		       (long long)m->mtp_layers);
	printf("\n%s; the training options do not apply.\n", not_modelled(m));
}

int cli_cmd_describe(int argc, char **argv)
{
	enum { OPT_DTYPE = 256, OPT_GRAD_DTYPE, OPT_OPTIMIZER, OPT_NO_MASTER, OPT_UNFUSED,
	       OPT_NO_CAUSAL, OPT_DROPOUT, OPT_TP, OPT_SP };
	static const struct option longopts[] = {
		{"seq-len", required_argument, NULL, 's'},
		{"micro-batch", required_argument, NULL, 'b'},
		{"fsdp", required_argument, NULL, 'f'},
		{"tp", required_argument, NULL, OPT_TP},
		{"sp", no_argument, NULL, OPT_SP},
		{"grad-accum", required_argument, NULL, 'g'},
		{"dtype", required_argument, NULL, OPT_DTYPE},
		{"grad-dtype", required_argument, NULL, OPT_GRAD_DTYPE},
		{"optimizer", required_argument, NULL, OPT_OPTIMIZER},
		{"no-master-weights", no_argument, NULL, OPT_NO_MASTER},
		{"unfused-attention", no_argument, NULL, OPT_UNFUSED},
		{"no-causal", no_argument, NULL, OPT_NO_CAUSAL},
		{"dropout", required_argument, NULL, OPT_DROPOUT},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{0, 0, 0, 0},
	};
	/* Options are collected first and applied once the model (and its defaults) is known. */
	int64_t seq = 0, mb = 0, fsdp = 0, accum = 0, tp = 0;
	bool sp = false;
	const char *dtype = NULL, *grad_dtype = NULL, *optimizer = NULL;
	bool no_master = false, unfused = false, no_causal = false, json = false;
	int dropout = -1;
	int c;
	const char *shortopts = "s:b:f:g:jh";
	while ((c = cli_getopt(argc, argv, shortopts, longopts)) != -1) {
		switch (c) {
		case 's':
			if (!cli_parse_positive("describe", "--seq-len", optarg, &seq))
				return CLI_EXIT_USAGE;
			break;
		case 'b':
			if (!cli_parse_positive("describe", "--micro-batch", optarg, &mb))
				return CLI_EXIT_USAGE;
			break;
		case 'f':
			if (!cli_parse_positive("describe", "--fsdp", optarg, &fsdp))
				return CLI_EXIT_USAGE;
			break;
		case OPT_TP:
			if (!cli_parse_positive("describe", "--tp", optarg, &tp))
				return CLI_EXIT_USAGE;
			break;
		case OPT_SP:
			sp = true;
			break;
		case 'g':
			if (!cli_parse_positive("describe", "--grad-accum", optarg, &accum))
				return CLI_EXIT_USAGE;
			break;
		case OPT_DTYPE:
			dtype = optarg;
			break;
		case OPT_GRAD_DTYPE:
			grad_dtype = optarg;
			break;
		case OPT_OPTIMIZER:
			optimizer = optarg;
			break;
		case OPT_NO_MASTER:
			no_master = true;
			break;
		case OPT_UNFUSED:
			unfused = true;
			break;
		case OPT_NO_CAUSAL:
			no_causal = true;
			break;
		case OPT_DROPOUT:
			if (strcmp(optarg, "on") == 0)
				dropout = 1;
			else if (strcmp(optarg, "off") == 0)
				dropout = 0;
			else
				return cli_usage_error("describe", "--dropout expects on or off, got '%s'",
						       optarg);
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			describe_usage(stdout);
			return CLI_EXIT_OK;
		default:
			return cli_option_error("describe", argc, argv, shortopts, longopts);
		}
	}
	if (optind >= argc)
		return cli_usage_error("describe", "missing MODEL (a preset name or a config.json path)");
	if (optind + 1 != argc)
		return cli_usage_error("describe", "unexpected argument '%s'", argv[optind + 1]);

	rm_error err;
	rm_error_clear(&err);
	rm_model_config model;
	if (rm_model_config_resolve(argv[optind], &model, &err) != RM_OK)
		return cli_fail(&err);
	if (not_modelled(&model)) {
		if (json)
			return cli_print_json(describe_params_json(&model));
		describe_params_text(&model);
		return CLI_EXIT_OK;
	}
	rm_train_config train = rm_train_config_default(&model);
	if (seq)
		train.seq_len = seq;
	if (mb)
		train.micro_batch = mb;
	if (fsdp)
		train.fsdp = fsdp;
	if (tp)
		train.tp = tp;
	if (sp && train.tp <= 1)
		rm_log_warn("describe: --sp needs --tp 2 or more: ignored");
	train.sp = sp;
	if (accum)
		train.grad_accum = accum;
	if (dtype && !rm_dtype_parse(dtype, &train.dtype))
		return cli_usage_error("describe", "--dtype: unknown dtype '%s' (bf16, fp16, fp32)", dtype);
	if (grad_dtype && !rm_dtype_parse(grad_dtype, &train.grad_dtype))
		return cli_usage_error("describe", "--grad-dtype: unknown dtype '%s' (bf16, fp32)",
				       grad_dtype);
	if (optimizer && !rm_optimizer_parse(optimizer, &train.optimizer))
		return cli_usage_error("describe",
				       "--optimizer: unknown optimizer '%s' (adamw, sgd_momentum, sgd)",
				       optimizer);
	if (no_master)
		train.master_weights = false;
	if (unfused)
		train.fused_attention = false;
	if (no_causal)
		train.causal = false;
	train.dropout = dropout;

	rm_workload *wl = rm_workload_create(&model, &train, &err);
	if (!wl)
		return cli_fail(&err);
	int rc = CLI_EXIT_OK;
	if (json)
		rc = cli_print_json(describe_json(wl));
	else
		describe_text(wl);
	rm_workload_destroy(wl);
	return rc;
}
