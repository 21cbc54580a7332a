/*
 * remora/workload.h — the transformer workload model (models/hfconfig.c, models/workload.c).
 *
 * What it does: reads a Hugging Face config.json (or a preset in data/models/), counts parameters
 * exactly, and builds the op graph of one training step per GPU: the embedding, one decoder layer
 * (forward ops in order, then backward ops split into data-gradient and weight-gradient ops), and
 * the head (final norm, LM head, loss). Every decoder layer is identical, so one layer's graph
 * stands for all L; the schedulers instantiate it L times. The exception is a mixture of experts
 * whose first layers are dense (DeepSeek-V3's first_k_dense_replace): those run a second graph,
 * dense_layer (rm_workload_layer_graph gives each layer's).
 *
 * Invariants
 * - Forward ops produce values; every value has one producer and a canonical checkpoint name
 *   (seed report style: dot_attention_query, ..., dot_mlp_out; see rm_checkpoint_canonical()).
 * - A backward op lists the forward values it needs (its residuals). The bytes of the distinct
 *   residuals of one layer are what the layer keeps for the backward pass when nothing is
 *   recomputed; for GPT-2 with unfused attention and dropout they equal
 *   s*b*h*(34 + 5*a*s/h) (Korthikanti et al. 2022; docs/reference/activation-memory.md row 1).
 * - Shapes and sizes are per GPU: FSDP shards parameters and optimizer state, not the batch
 *   (each GPU runs its own micro_batch sequences through the whole layer).
 *
 * Units: FLOPs are floating-point operations (a multiply-add counts 2), bytes are bytes.
 */
#ifndef REMORA_WORKLOAD_H
#define REMORA_WORKLOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "remora/common.h"
#include "remora/nccl.h"

typedef enum rm_dtype {
	RM_DTYPE_FP32,
	RM_DTYPE_BF16,
	RM_DTYPE_FP16,
	RM_DTYPE_FP8_E4M3,
	RM_DTYPE_FP8_E5M2,
	RM_DTYPE_INT32,
	RM_DTYPE_UINT8,
	RM_DTYPE_COUNT
} rm_dtype;

/* Bytes per element (fp32 4, bf16/fp16 2, fp8 1, int32 4, uint8 1). */
int rm_dtype_size(rm_dtype dtype);
/* Canonical name: "fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "int32", "uint8". */
const char *rm_dtype_name(rm_dtype dtype);
/* Parses a name; accepts the canonical names and "float32", "bfloat16", "float16". */
bool rm_dtype_parse(const char *name, rm_dtype *out);

typedef enum rm_arch {
	RM_ARCH_LLAMA,   /* LlamaForCausalLM */
	RM_ARCH_MISTRAL, /* MistralForCausalLM */
	RM_ARCH_QWEN2,   /* Qwen2ForCausalLM: Llama layout with q/k/v biases */
	RM_ARCH_GPT2,    /* GPT2LMHeadModel: LayerNorm, learned positions, GELU MLP, biases */
	RM_ARCH_MIXTRAL, /* MixtralForCausalLM: Mistral attention, every MLP a top-k of SwiGLU experts */
	RM_ARCH_QWEN2_MOE, /* Qwen2MoeForCausalLM: Qwen2 attention, routed experts plus a gated shared expert */
	RM_ARCH_QWEN3_MOE, /* Qwen3MoeForCausalLM: q/k RMSNorm per head, routed experts */
	RM_ARCH_DEEPSEEK_V3, /* DeepseekV3ForCausalLM: MLA attention, dense first layers, shared + routed experts */
	RM_ARCH_RESIDUAL_MLP, /* ResidualMLP (remora's own): each layer x + W2 act(W1 x), no attention,
			       * no norm; the stand-in of scheduler reports' toy models (jax#20763) */
	RM_ARCH_COUNT
} rm_arch;

/* The Hugging Face architecture string of an arch ("LlamaForCausalLM"). */
const char *rm_arch_hf_name(rm_arch arch);

typedef enum rm_norm_kind { RM_NORM_RMSNORM, RM_NORM_LAYERNORM } rm_norm_kind;
typedef enum rm_mlp_kind { RM_MLP_SWIGLU, RM_MLP_GELU, RM_MLP_RELU } rm_mlp_kind;

/* A decoder-only transformer, as its config.json describes it. */
typedef struct rm_model_config {
	char name[64]; /* preset name or the config file's base name */
	rm_arch arch;
	int64_t vocab;
	int64_t hidden;   /* h */
	int64_t layers;   /* L */
	int64_t heads;    /* a, query heads */
	int64_t kv_heads; /* key/value heads (grouped-query attention when < heads) */
	int64_t head_dim; /* d = hidden / heads unless the config sets head_dim */
	int64_t ffn;      /* MLP inner size */
	int64_t max_pos;  /* max_position_embeddings / n_positions */
	bool tied;        /* LM head shares the input embedding matrix */
	bool qkv_bias;    /* biases on q, k, v projections */
	bool out_bias;    /* biases on the attention output and MLP projections (GPT-2) */
	rm_norm_kind norm;
	rm_mlp_kind mlp;
	bool learned_pos; /* learned position embeddings (GPT-2) instead of rotary */
	double attn_dropout;  /* dropout on attention probabilities (attn_pdrop) */
	double resid_dropout; /* dropout after attention and MLP outputs (resid_pdrop) */
	double embd_dropout;  /* dropout after the embedding (embd_pdrop) */
	int64_t sliding_window; /* 0 = full attention */

	/* Mixture of experts (experts == 0: a dense model, every field below 0 or false). Every
	 * expert is a SwiGLU MLP (3 matrices h x its inner size, no biases); the router is a
	 * linear map h -> experts without bias (transformers' Mixtral, Qwen2-MoE, Qwen3-MoE and
	 * DeepSeek-V3 modelling code). */
	int64_t experts;         /* routed experts per MoE layer: num_local_experts (Mixtral),
				  * num_experts (Qwen), n_routed_experts (DeepSeek) */
	int64_t experts_per_tok; /* routed experts each token goes to (top-k): num_experts_per_tok */
	int64_t expert_ffn;      /* inner size of a routed expert: moe_intermediate_size
				  * (Mixtral: intermediate_size) */
	int64_t shared_experts;  /* experts every token goes to: n_shared_experts (DeepSeek), 1 for
				  * Qwen2-MoE's shared expert */
	int64_t shared_ffn;      /* inner size of one shared expert: shared_expert_intermediate_size
				  * (Qwen2-MoE), moe_intermediate_size (DeepSeek) */
	bool shared_gate;        /* Qwen2-MoE: a sigmoid gate h -> 1 scales the shared expert */
	bool router_bias;        /* DeepSeek-V3 (topk_method noaux_tc): one bias per routed expert
				  * added to the scores for the top-k choice (e_score_correction_bias) */
	int64_t dense_layers;    /* layers whose MLP is dense (ffn wide) instead of MoE: DeepSeek's
				  * first_k_dense_replace (the first layers), Qwen's mlp_only_layers and
				  * decoder_sparse_step; the other layers - dense_layers are MoE */
	bool dense_first;        /* the dense layers are layers 0 .. dense_layers - 1 (always DeepSeek's
				  * with moe_layer_freq 1); the op graphs model only this placement */
	int64_t mtp_layers;      /* DeepSeek-V3 multi-token-prediction modules
				  * (num_nextn_predict_layers): counted apart, not part of the model */

	/* Attention variants of the MoE families */
	bool qk_norm;            /* Qwen3: RMSNorm over head_dim on queries and keys */
	bool mla;                /* multi-head latent attention (DeepSeek-V2/V3); head_dim is then
				  * qk_nope_head_dim + qk_rope_head_dim and kv_heads = heads */
	int64_t q_lora_rank;     /* query compression rank; 0: queries projected from h directly */
	int64_t kv_lora_rank;    /* key/value latent rank */
	int64_t qk_nope_head_dim, qk_rope_head_dim, v_head_dim;
} rm_model_config;

/* Whether a model has mixture-of-experts layers (experts > 0). */
bool rm_model_config_is_moe(const rm_model_config *model);

/*
 * Parses a Hugging Face config.json held in memory. path names the input in errors. Supported
 * architectures: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, GPT2LMHeadModel,
 * MixtralForCausalLM, Qwen2MoeForCausalLM, Qwen3MoeForCausalLM, DeepseekV3ForCausalLM, and
 * remora's own ResidualMLP (model_type "residual_mlp": vocab_size, hidden_size,
 * intermediate_size, num_hidden_layers, hidden_act relu or gelu, tie_word_embeddings; no attention
 * and no norms, heads 0); any other is RM_UNSUPPORTED with the list. Malformed JSON is RM_PARSE with the parser's
 * line:column; a missing required key (the expert keys of an MoE model included) RM_MISSING at
 * the enclosing mapping; a non-positive size, heads not dividing hidden, or num_experts_per_tok
 * above the expert count RM_INVALID at the offending value; a model whose parameter count passes
 * 2^62 RM_RANGE.
 */
rm_status rm_model_config_parse(const char *text, size_t len, const char *path,
				rm_model_config *out, rm_error *err);
/* Reads and parses a config.json file (see rm_model_config_parse). */
rm_status rm_model_config_load(const char *path, rm_model_config *out, rm_error *err);
/*
 * Loads MODEL: a preset name from data/models/ (e.g. "llama-2-7b") or a path to a config.json
 * (anything containing '/' or ending in ".json"). Unknown presets list the shipped ones.
 */
rm_status rm_model_config_resolve(const char *model, rm_model_config *out, rm_error *err);
/* Names of the shipped presets, NULL-terminated. */
const char *const *rm_model_preset_names(void);

/* Parameter counts by part (elements, not bytes). */
typedef struct rm_param_count {
	int64_t embedding;  /* token table V*h (+ learned positions max_pos*h) */
	int64_t per_layer;  /* one decoder layer, norms and biases included */
	int64_t layers;     /* L * per_layer */
	int64_t final_norm; /* weights (and bias for LayerNorm) of the final norm */
	int64_t lm_head;    /* V*h, 0 when tied */
	int64_t total;
	/* Non-embedding parameters for the FLOPs convention: total minus the input embedding lookup
	 * tables, plus the head matrix when tied (the LM head is a real matmul either way). */
	int64_t nonembedding;
	/* Mixture of experts. per_layer is then one MoE layer and per_dense_layer one layer with
	 * a dense MLP (dense models: per_dense_layer = per_layer, routed_experts 0, active = total,
	 * active_nonembedding = nonembedding, mtp 0). */
	int64_t per_dense_layer;
	int64_t routed_experts; /* all routed experts of all MoE layers */
	/* What one token uses: total minus the (experts - experts_per_tok) routed experts it is
	 * not sent to, in every MoE layer (the router, shared experts and attention all count). */
	int64_t active;
	int64_t active_nonembedding; /* nonembedding minus the same unchosen experts */
	/* DeepSeek-V3's multi-token-prediction modules, not in total: per module one MoE layer,
	 * two RMSNorms on its inputs, the projection 2h -> h and its output RMSNorm; the
	 * embedding and head are shared with the main model (the published checkpoint stores a
	 * copy of both in layer 61). */
	int64_t mtp;
} rm_param_count;

/* Exact parameter count of a model (docs/reference/models.csv conventions). */
rm_param_count rm_model_param_count(const rm_model_config *model);

typedef enum rm_optimizer {
	RM_OPT_ADAMW, /* two fp32 moments per parameter */
	RM_OPT_SGD_MOMENTUM, /* one fp32 momentum per parameter */
	RM_OPT_SGD,   /* no state */
	RM_OPT_COUNT
} rm_optimizer;

const char *rm_optimizer_name(rm_optimizer opt);
bool rm_optimizer_parse(const char *name, rm_optimizer *out);

/*
 * How the loss over the vocabulary is computed (training.loss):
 * - plain: the logits are cast to fp32 and the cross-entropy materialises them and their
 *   gradient over the whole micro-batch (PyTorch `F.cross_entropy(logits.float(), labels)`,
 *   torchtitan and Hugging Face trainers; XLA keeps what its fusion does not remove);
 * - chunked: the same work over token chunks of 1/8 of the micro-batch, so one chunk's fp32
 *   buffers are live at a time (torchtune's chunked cross-entropy: 8 chunks);
 * - fused: a fused linear + cross-entropy kernel (Liger's FusedLinearCrossEntropy) computes the
 *   logits, loss and both gradients chunk by chunk without keeping the logits.
 */
typedef enum rm_loss_kind { RM_LOSS_PLAIN, RM_LOSS_CHUNKED, RM_LOSS_FUSED, RM_LOSS_COUNT } rm_loss_kind;

const char *rm_loss_kind_name(rm_loss_kind k);
bool rm_loss_kind_parse(const char *name, rm_loss_kind *out);

/*
 * How the model code applies the rotary position embedding (training.rope):
 * - complex: as a complex multiply, x.float() viewed as complex, times freqs_cis, back to the
 *   activation dtype (torchtitan's apply_rotary_emb, Meta's reference Llama). Inductor has no code
 *   generation for complex operators ("Torchinductor does not support code generation for complex
 *   operators. Performance may be worse than eager.", torch/_inductor/lowering.py; reported for
 *   torchtitan's rope in pytorch/torchtitan#15): under torch.compile the multiply stays an ATen
 *   kernel and the casts around it are kernels of their own, so the rotary runs as its eager
 *   decomposition, 3 kernels, and fuses with nothing. XLA generates complex code and fuses it.
 * - real: as real sin/cos rotations of the two halves, x1 cos - x2 sin and x2 cos + x1 sin
 *   concatenated (Hugging Face's rotate_half, KempnerForge's apply_rope): Inductor fuses it.
 */
typedef enum rm_rope_impl { RM_ROPE_COMPLEX, RM_ROPE_REAL, RM_ROPE_COUNT } rm_rope_impl;

const char *rm_rope_impl_name(rm_rope_impl r);
bool rm_rope_impl_parse(const char *name, rm_rope_impl *out);

/* How one step is trained on one GPU. */
typedef struct rm_train_config {
	int64_t seq_len;       /* s */
	int64_t micro_batch;   /* b, sequences per GPU per micro-batch */
	int64_t grad_accum;    /* micro-batches per step */
	int64_t fsdp;          /* FSDP degree: parameters, gradients, optimizer sharded over it */
	int64_t dp_replicate;  /* HSDP: replicas of the FSDP group (data parallel across them); the
				* data-parallel degree is fsdp x dp_replicate */
	int64_t tp;            /* tensor parallelism (Megatron-LM): attention heads, key/value heads,
				* the MLP's inner size and the vocabulary split over tp GPUs, which
				* run the same tokens; 1: none */
	int64_t ep;            /* expert parallelism: the routed experts split over ep GPUs of the
				* data-parallel group, tokens dispatched to them and combined back
				* by all-to-all (1: every expert on every GPU) */
	double moe_imbalance;  /* tokens the busiest GPU's experts receive over the balanced share
				* (1: perfectly balanced routing) */
	double moe_capacity_factor; /* an expert's capacity over the balanced share; tokens past it are
				     * dropped (0: dropless) */
	int64_t cp;            /* context parallelism: each GPU of a group of cp runs seq_len / cp of every
				* sequence, the attention all-gathers the keys and values over the group
				* (torchtitan's context_parallel with rotate_method allgather, Megatron-LM's
				* --context-parallel-size with its all-gather variant); 1: none */
	bool sp;               /* sequence parallelism with tp: the norms, dropouts and residual
				* adds run on seq_len / tp tokens, all-gather / reduce-scatter of
				* the activations instead of all-reduce (Korthikanti et al. 2022) */
	bool async_tp;         /* with sp: async tensor parallelism (PyTorch's micro-pipelined TP,
				* torch._inductor micro_pipeline_tp; torchtitan's
				* enable_async_tensor_parallel): an all-gather feeding projections and
				* a reduce-scatter of one projection's output run as tp steps of
				* copy-engine peer copies overlapped with the projection's chunks */
	int64_t pp;            /* pipeline stages (1: none); each holds layers / pp decoder layers, the
				* first the embedding, the last the head; grad_accum is the number of
				* micro-batches the schedule pipelines */
	int pp_schedule;       /* rm_pp_schedule (remora/pipeline.h) */
	int64_t virtual_stages; /* interleaved: model chunks per stage (1 otherwise) */
	bool loss_parallel;    /* tp: the cross-entropy over each GPU's ceil(V / tp) logits (Megatron,
				* torchtitan's loss_parallel; default); false: the logits all-gathered to
				* the whole vocabulary and the loss computed on every GPU (KempnerForge's
				* ColwiseParallel(output_layouts=Replicate())) */
	bool tp_embedding_replicated; /* tp: the whole embedding table on every GPU, the lookup's
				       * output sliced to the sequence shard (KempnerForge) instead
				       * of Megatron's vocabulary-parallel embedding */
	int zero;              /* ZeRO stage over the data-parallel GPUs: 3 (default) shards the
				* optimizer state over the FSDP group only (replicated across replicas, as
				* HSDP does); 1 shards the optimizer state and fp32 master over all
				* fsdp x dp_replicate GPUs (parameters and gradients stay sharded over
				* fsdp); 2 also keeps only that slice of the reduced gradients */
	rm_dtype dtype;        /* activations and compute (bf16) */
	rm_dtype param_dtype;  /* parameters as gathered for compute (bf16) */
	rm_dtype grad_dtype;   /* gradients (bf16; fp32 for fp32 reduce-scatter) */
	rm_optimizer optimizer;
	rm_dtype optimizer_dtype; /* the optimizer's moments: fp32 (default), or the parameters' dtype
				   * when a model cast to bf16 keeps them so (torch.optim.AdamW's state
				   * is zeros_like(param)) */
	bool master_weights;   /* fp32 master copy of the parameters */
	bool fused_attention;  /* flash attention (default) or unfused QK^T/softmax/PV */
	bool causal;           /* causal mask (default) */
	int dropout;           /* -1: as the config says; 0: off; 1: on (the config's rates) */
	rm_loss_kind loss;     /* plain (default), chunked or fused cross-entropy */
	bool embed_one_hot;    /* the token embedding as a one-hot matmul ([T, V] x [V, h], MaxText's
				* use_iota_embed) instead of a gather; tp 1 only */
	rm_rope_impl rope;     /* complex (default: torchtitan) or real rotary embedding */
	rm_dtype gemm_dtype;   /* the layers' projections: bf16, or fp8 (E4M3 forward, E5M2
				* gradients) with their quantization kernels, as Transformer Engine and
				* torchao run them; attention and the LM head stay in dtype */
	bool master_shards;    /* the sharded parameters are the fp32 master itself and only the
				* gathered copies are param_dtype (PyTorch FSDP2's MixedPrecisionPolicy):
				* no separate param_dtype shard */
	bool fp8_all_gather;   /* fp8 GEMMs: gather the layer weights already in fp8 (torchao's
				* float8 all-gather): half the bytes, no per-micro-batch weight cast */
	bool grad_clip;        /* global gradient-norm clipping before the optimizer (default) */
} rm_train_config;

/* Defaults: seq_len min(4096, max_pos), micro_batch 1, grad_accum 1, fsdp 1, bf16 everywhere,
 * AdamW with fp32 master weights, fused causal attention, dropout as configured, the plain loss,
 * gradient clipping on (torchtitan's max_norm 1.0, MaxText's gradient_clipping_threshold 1.0). */
rm_train_config rm_train_config_default(const rm_model_config *model);
/* Checks a training setup against a model; RM_INVALID with a sentence on the first problem. */
rm_status rm_train_config_check(const rm_model_config *model, const rm_train_config *train,
				rm_error *err);

/* The group a collective op of a layer graph runs among. */
enum { RM_GROUP_TP, RM_GROUP_CP, RM_GROUP_EP };

typedef enum rm_op_kind {
	RM_OP_GEMM,        /* dense matmul, cost from gemm {batch, m, n, k, dtype} */
	RM_OP_ATTENTION,   /* fused (flash) attention kernel, forward or backward */
	RM_OP_ELEMENTWISE, /* memory-bound kernel: norm, rotary, softmax, activation, add, ... */
	RM_OP_COLLECTIVE,  /* a tensor-parallel collective inside the layer (coll over coll_bytes,
			    * among the train config's tp GPUs), on the compute stream's path */
	RM_OP_KIND_COUNT
} rm_op_kind;

/*
 * What a memory-bound kernel does, for the fraction of HBM bandwidth it reaches
 * (docs/reference/kernels-h100.md section 3; the rates are in models/cost.c).
 */
typedef enum rm_membound_class {
	RM_MB_POINTWISE, /* activations, residual adds, rotary, dropout, casts */
	RM_MB_NORM,      /* RMSNorm/LayerNorm forward: one row reduction */
	RM_MB_NORM_BWD,  /* norm backward: two reductions and the weight-gradient reduction */
	RM_MB_SOFTMAX,   /* softmax, log-softmax, cross-entropy over the vocabulary */
	RM_MB_GATHER,    /* embedding gather and its scatter-add */
	RM_MB_OPTIMIZER, /* the optimizer step and gradient clipping (multi-tensor kernels) */
	RM_MB_CLASS_COUNT
} rm_membound_class;

/* "pointwise", "norm", "norm_bwd", "softmax", "gather", "optimizer". */
const char *rm_membound_class_name(rm_membound_class c);
bool rm_membound_class_parse(const char *name, rm_membound_class *out);

typedef enum rm_phase {
	RM_PHASE_FWD,
	RM_PHASE_BWD_DGRAD, /* gradient with respect to activations */
	RM_PHASE_BWD_WGRAD, /* gradient with respect to weights */
	RM_PHASE_COUNT
} rm_phase;

const char *rm_op_kind_name(rm_op_kind kind);
const char *rm_phase_name(rm_phase phase);

#define RM_OP_MAX_INPUTS 6
#define RM_OP_MAX_OUTPUTS 2
#define RM_OP_MAX_RESIDUALS 6
#define RM_MAX_RANK 4

/* A tensor produced by a forward op. */
typedef struct rm_value {
	char name[48]; /* canonical checkpoint name, unique within its graph */
	rm_dtype dtype;
	int rank;
	int64_t shape[RM_MAX_RANK];
	int64_t bytes;
	int producer; /* op index in the graph, -1 for the graph's input */
} rm_value;

typedef struct rm_gemm_shape {
	int64_t batch, m, n, k; /* C[batch, m, n] = A[batch, m, k] . B[batch, k, n] */
	rm_dtype dtype;
	bool has_batch_dims; /* a dot_general with batch dimensions (attention's QK^T, PV) */
} rm_gemm_shape;

typedef struct rm_attention_shape {
	int64_t batch, heads, kv_heads, seq, head_dim; /* head_dim: of the queries and keys */
	int64_t v_head_dim; /* of the values and the output when it differs (multi-head latent
			     * attention: qk 192, v 128); 0: head_dim */
	int64_t window; /* causal sliding window (Mistral sliding_window): query i attends keys
			 * i-window+1..i; 0 = full attention */
	bool causal;
	bool fused;
	rm_dtype dtype;
} rm_attention_shape;

typedef struct rm_op {
	char name[64]; /* forward: its output's checkpoint name; backward: "<fwd>.dgrad|.wgrad|.bwd" */
	rm_op_kind kind;
	rm_phase phase;
	int fwd_op; /* backward ops: the forward op they differentiate; forward ops: -1 */
	rm_gemm_shape gemm;           /* kind == RM_OP_GEMM */
	rm_attention_shape attention; /* kind == RM_OP_ATTENTION */
	double flops;                 /* executed FLOPs */
	int64_t bytes_read;           /* HBM bytes read (inputs, weights) */
	int64_t bytes_written;        /* HBM bytes written (outputs) */
	int64_t grad_bytes;           /* backward ops: bytes of the gradient they leave live when that
				       * differs from bytes_written (a chunked loss); 0: bytes_written */
	int64_t weight_elems;         /* parameter elements this op reads (forward) or their grads */
	rm_membound_class mclass;     /* kind == RM_OP_ELEMENTWISE: what the kernel does */
	bool no_grad;                 /* forward ops with no backward of their own (fp8 casts) */
	int64_t eager_bytes;          /* memory-bound ops run as PyTorch eager kernels: the HBM bytes of
				       * their decomposition (0: bytes_read + bytes_written) ... */
	int eager_kernels;            /* ... in this many kernels (0: one) */
	bool complex_arith;           /* computes in complex numbers (the complex rotary, rm_rope_impl):
				       * Inductor runs it as its eager decomposition and fuses it with
				       * nothing; XLA fuses it as any elementwise op */
	rm_coll coll;                 /* kind == RM_OP_COLLECTIVE: all-gather, reduce-scatter or
				       * all-reduce over the tensor-parallel group ... */
	int64_t coll_bytes;           /* ... of this full buffer (nccl-tests' size) */
	int coll_group;               /* ... among the group: RM_GROUP_TP, RM_GROUP_CP or RM_GROUP_EP */
	bool expert;                  /* a routed expert's weights: split over ep GPUs, which hold them
				       * whole (no FSDP gathers when ep > 1) */
	int n_inputs, n_outputs, n_residuals;
	int inputs[RM_OP_MAX_INPUTS];   /* value indices (forward ops) */
	int outputs[RM_OP_MAX_OUTPUTS]; /* value indices (forward ops) */
	int residuals[RM_OP_MAX_RESIDUALS]; /* forward values a backward op needs */
} rm_op;

/* An op graph: forward ops in execution order, then backward ops in execution order. */
typedef struct rm_graph {
	char name[32]; /* "embedding", "layer", "head" */
	rm_value *values;
	int n_values;
	rm_op *ops;
	int n_ops;
	int n_fwd_ops; /* ops[0 .. n_fwd_ops) are forward */
	int input;     /* value index of the graph input (the layer's residual stream), or -1 */
	int64_t params; /* parameter elements of this part */
} rm_graph;

/* One training step per GPU of a model under a training setup. */
typedef struct rm_workload {
	rm_model_config model;
	rm_train_config train;
	rm_param_count params;
	rm_graph embedding; /* token (and position) lookup */
	rm_graph layer;     /* one decoder layer; the step runs it L times (a mixture of experts with
			     * dense first layers: the MoE layer, run L - dense_layers times) */
	rm_graph dense_layer; /* DeepSeek-V3's first_k_dense_replace layers: the same attention with
			       * a dense SwiGLU MLP, run as layers 0 .. dense_layers - 1; n_ops 0
			       * when every layer is the same */
	rm_graph head;      /* final norm, LM head, cross-entropy loss */
} rm_workload;

/*
 * Builds the workload (op graphs of one micro-batch) of a model and training setup. Returns
 * NULL with err on an invalid setup (see rm_train_config_check), and RM_UNSUPPORTED for a model
 * whose layers the op graph does not model yet (mixture of experts, latent attention, q/k norms;
 * rm_model_param_count counts them). Free with rm_workload_destroy.
 */
rm_workload *rm_workload_create(const rm_model_config *model, const rm_train_config *train,
				rm_error *err);
void rm_workload_destroy(rm_workload *wl);

/* The op graph of decoder layer l (0-based): dense_layer for the dense first layers of a
 * mixture of experts, layer otherwise. */
const rm_graph *rm_workload_layer_graph(const rm_workload *wl, int64_t l);
/* Layers that run the dense_layer graph (0 when every layer runs layer). */
int64_t rm_workload_dense_layers(const rm_workload *wl);

/* Index of the value or op of that name in a graph, or -1. */
int rm_graph_find_value(const rm_graph *g, const char *name);
int rm_graph_find_op(const rm_graph *g, const char *name);
/* Sum of op FLOPs of a graph for a phase, or all phases when phase == RM_PHASE_COUNT. */
double rm_graph_flops(const rm_graph *g, rm_phase phase);
/*
 * Bytes of the distinct forward values that the graph's backward ops need (nothing recomputed,
 * nothing offloaded; a sequence-parallel all-gather's output counts as its shard, which is what
 * the layer keeps and gathers again). For the layer graph this is the activation memory per layer per micro-batch.
 */
int64_t rm_graph_residual_bytes(const rm_graph *g);
/* Whether the backward pass of the graph needs value v. */
bool rm_graph_value_is_residual(const rm_graph *g, int v);

/*
 * Model FLOPs per token of training (forward + backward, no recompute), PaLM appendix B
 * convention (docs/reference/activation-memory.md): 6 * N_nonembedding + 12 * L * a*d * s, attention
 * counted non-causally; a*d equals h for every shipped model but DeepSeek-V3, whose latent
 * attention's QK^T and PV contract different head dims: 6 * L * a * (d_qk + d_v) * s (the same
 * three times the forward's 2 * a * (d_qk + d_v) FLOPs per (query, key) pair). Used for MFU.
 */
double rm_workload_model_flops_per_token(const rm_workload *wl);
/*
 * FLOPs per token for MFU: the PaLM convention with attention counted over the (query, key)
 * pairs actually attended (half, causal; fewer with a sliding window), so that MFU cannot pass
 * 100% at long sequences where causal kernels skip half the scores.
 */
double rm_workload_mfu_flops_per_token(const rm_workload *wl);
/* FLOPs the op graphs execute per micro-batch: embedding + each layer's graph + head, all phases. */
double rm_workload_executed_flops(const rm_workload *wl);

/*
 * Parameter elements one GPU of a tensor-parallel group holds before FSDP sharding: the sum of
 * the embedding, L layers and head graphs' parameters (column- and row-parallel matrices and the
 * vocabulary split over tp; norms and the row-parallel output biases replicated). tp = 1: the
 * model's total.
 */
int64_t rm_workload_rank_params(const rm_workload *wl);
/* Of those, the routed experts' (their E / ep experts of every MoE layer); 0 for a dense model. */
int64_t rm_workload_rank_expert_params(const rm_workload *wl);

/* Static (persistent) memory per GPU under FSDP / HSDP / ZeRO, in bytes. */
typedef struct rm_static_memory {
	int64_t shard_elems;   /* ceil(rank params / fsdp): the parameter shard (rm_workload_rank_params) */
	int64_t opt_group;     /* GPUs the optimizer state is sharded over: fsdp (zero 3), or
				* fsdp x dp_replicate (zero 1, 2) */
	int64_t opt_elems;     /* ceil(params / opt_group): the slice the optimizer updates */
	int64_t params;        /* shard_elems * param dtype */
	int64_t master;        /* opt_elems * 4 with fp32 master weights, else 0 */
	int64_t grads;         /* shard_elems * grad dtype (zero 2: opt_elems * grad dtype) */
	int64_t optimizer;     /* AdamW: 2 * moment bytes * opt_elems; SGD momentum: 1 * */
	int64_t update_params; /* bytes of parameters the optimizer step writes: opt_elems * param dtype
				* (0 when the fp32 master shard is the parameter) */
	int64_t update_grads;  /* bytes of reduced gradients the optimizer step reads: opt_elems * grad dtype */
	int64_t total;
} rm_static_memory;

/*
 * Static memory per GPU: every parameter and gradient sharded evenly over the FSDP group, the
 * optimizer state and fp32 master over the optimizer group (ZeRO stage 1/2: all data-parallel GPUs;
 * Rajbhandari et al. 2020, section 5: P_os and P_os+g) and otherwise over the
 * FSDP group (with master_shards and master weights the param_dtype shard is not kept: FSDP2's fp32
 * shards, 4 + 4 + 8 = 16 bytes per parameter with fp32 gradients) (ZeRO stage 3 convention: Rajbhandari et al. 2020, section 3: 2 + 2 + 12 bytes per
 * parameter for mixed-precision Adam, i.e. bf16 params, bf16 grads, fp32 master, fp32 m and v).
 */
rm_static_memory rm_workload_static_memory(const rm_workload *wl);

/*
 * Canonical checkpoint name for a user's name: canonical names map to themselves; MaxText's
 * aliases (query_proj, key_proj, value_proj, out_proj, context, mlpwi_0, mlpwi_1, mlpwi, mlpwo)
 * map to dot_attention_query, dot_attention_key, dot_attention_value, dot_attention_out,
 * attention_context, dot_mlp_gate, dot_mlp_up, dot_mlp_up, dot_mlp_out. NULL when unknown.
 * MaxText's qkv_proj stands for three names: see rm_checkpoint_expand().
 */
const char *rm_checkpoint_canonical(const char *name);
/*
 * Expands a user's name into canonical names (qkv_proj gives the three projections); returns the
 * count written to out (at most max), 0 when unknown.
 */
int rm_checkpoint_expand(const char *name, const char **out, int max);

#endif /* REMORA_WORKLOAD_H */
