/*
 * remora/cost.h — what one operation costs on a hardware profile (models/cost.c).
 *
 * The engine (sim/) asks a cost model two questions about every op of a schedule program: how
 * long it takes running alone on the whole GPU, and how many SMs it holds while it runs (NCCL
 * collectives hold one SM per channel; compute kernels hold none exclusively, they share what is
 * left). Contention between concurrent ops (fewer SMs, shared HBM, NVLink, PCIe) is the engine's
 * business, not the cost model's.
 *
 * A cost model is a const table of function pointers (as wlroots' backend
 * interface), so calibration or an NCCL-aware collective model can replace the default one
 * without touching the engine. rm_cost_model_default() implements the first models:
 * - GEMM: t = t0 + FLOPs / R * q, with q the wave-quantization factor (see rm_cost_gemm_s);
 * - attention: like a GEMM of the attention FLOPs, or its HBM bytes if that is slower;
 * - memory-bound (elementwise) kernels: bytes / achievable HBM bandwidth;
 * - copies: bytes / pinned PCIe copy bandwidth (h2d, d2h), 2 * bytes / HBM bandwidth (d2d);
 * - collectives: NCCL's own cost model (remora/nccl.h), calibrated.
 *
 * Invariants: the functions are pure (same input, same output) and never fail: the inputs were
 * validated when the program was read or built. Units are in the names: _s seconds, bytes.
 */
#ifndef REMORA_COST_H
#define REMORA_COST_H

#include <stdbool.h>
#include <stdint.h>

#include "remora/common.h"
#include "remora/hw.h"
#include "remora/nccl.h"
#include "remora/workload.h"

/* What an op is, for its cost. */
typedef enum rm_cost_kind {
	RM_COST_GEMM,
	RM_COST_ATTENTION,
	RM_COST_ELEMENTWISE,
	RM_COST_COLLECTIVE,
	RM_COST_COPY,
	RM_COST_KIND_COUNT
} rm_cost_kind;

/* Collective kinds are NCCL's (remora/nccl.h); the program JSON spells them "all_gather",
 * "reduce_scatter", "all_reduce", "all_to_all", "permute" (send/recv to a peer). */
typedef rm_coll rm_collective;

typedef enum rm_copy_dir {
	RM_COPY_H2D,
	RM_COPY_D2H,
	RM_COPY_D2D,
	RM_COPY_P2P, /* to a peer GPU of the node over NVLink on the copy engines (async TP's
		      * micro-pipelined all-gather and reduce-scatter steps) */
	RM_COPY_DIR_COUNT
} rm_copy_dir;

/* Names as the program JSON spells them: "gemm", "all_gather", "h2d", ... */
const char *rm_cost_kind_name(rm_cost_kind kind);
const char *rm_collective_name(rm_collective coll);
const char *rm_copy_dir_name(rm_copy_dir dir);
bool rm_cost_kind_parse(const char *name, rm_cost_kind *out);
bool rm_collective_parse(const char *name, rm_collective *out);
bool rm_copy_dir_parse(const char *name, rm_copy_dir *out);

typedef struct rm_elementwise_cost {
	int64_t bytes_read;    /* HBM bytes read */
	int64_t bytes_written; /* HBM bytes written */
	double flops;          /* FLOPs executed (FP32 SIMT), usually negligible */
	rm_membound_class cls; /* what the kernel does (its bandwidth fraction); 0 = pointwise */
	int32_t kernels;       /* kernels the op launches (an eager decomposition); 0 = one */
	bool eager;            /* ATen's eager kernels even in a fused program (an Inductor
				* fallback): the eager per-kernel rate */
} rm_elementwise_cost;

typedef struct rm_collective_cost {
	rm_collective op;
	/* nccl-tests' convention: the full (unsharded) buffer, i.e. the all-gather output, the
	 * reduce-scatter input, the all-reduce buffer; for permute the bytes sent to the peer. */
	int64_t bytes;
	int32_t group_size; /* ranks in the group; 1 is a no-op */
	int32_t span;       /* nodes the group spans (1: one NVSwitch node) */
} rm_collective_cost;

typedef struct rm_copy_cost {
	rm_copy_dir dir;
	int64_t bytes;
} rm_copy_cost;

typedef struct rm_attention_cost {
	rm_attention_shape shape;
	bool backward; /* backward pass: 2.5x the forward FLOPs (flash attention convention) */
} rm_attention_cost;

/* The cost inputs of one op (docs/design.md contract 2); the member named by kind is meaningful. */
typedef struct rm_cost_op {
	rm_cost_kind kind;
	union {
		rm_gemm_shape gemm;
		rm_attention_cost attention;
		rm_elementwise_cost elementwise;
		rm_collective_cost collective;
		rm_copy_cost copy;
	};
} rm_cost_op;

/*
 * The attention kernel a runtime calls (training.attention_kernel): FlashAttention-2 (PyTorch
 * SDPA's default flash backend), FlashAttention-3 (Hopper), cuDNN's fused SDPA (what JAX/XLA and
 * Transformer Engine call on Hopper). Rates: docs/reference/kernels-h100.md section 2.
 */
typedef enum rm_attention_kernel {
	RM_ATTN_FLASH2,
	RM_ATTN_FLASH3,
	RM_ATTN_CUDNN,
	RM_ATTN_KERNEL_COUNT
} rm_attention_kernel;

/* "flash2", "flash3", "cudnn". */
const char *rm_attention_kernel_name(rm_attention_kernel k);
bool rm_attention_kernel_parse(const char *name, rm_attention_kernel *out);

/*
 * How the runtime launches kernels, for the kernel model:
 * - attention: the fused attention kernel;
 * - fused: memory-bound ops run as generated fused kernels (torch.compile, XLA) at the rates of
 *   docs/reference/kernels-h100.md section 3's fused rows; false: PyTorch eager kernels at its
 *   eager rows;
 * - host_us: the least time one kernel occupies its stream: the host's issue cost per kernel when
 *   kernels are shorter than it (eager PyTorch: ~6 us per op with autograd, section 5), else the
 *   raw launch (hw->launch_us). 0: hw->launch_us;
 * - ce_collectives: scheduler.collective_engine copy_engine: all-gathers within a node run on
 *   the copy engines (rm_cost_ce_all_gather_s), holding no SMs; other collectives stay NCCL's SM
 *   kernels (copy engines move bytes, they cannot reduce).
 */
typedef struct rm_kernel_config {
	rm_attention_kernel attention;
	bool fused;
	double host_us;
	bool ce_collectives;
} rm_kernel_config;

/*
 * Copy-engine device-to-device bandwidth over NVLink on 8x H100 SXM (NVSwitch), one direction,
 * GB/s: nvbandwidth device_to_device_memcpy_read_ce on an Azure ND H100 v5 host, 370.3-373.0 GB/s
 * over the 56 GPU pairs, mean 371.2 (SUM 20785.58 / 56; docs/reference/hardware.md).
 */
#define RM_CE_D2D_GBPS_H100 371.2

/*
 * Seconds for an all-gather within one NVSwitch node on the copy engines (NCCL's zero-SM
 * collectives, NCCL_CTA_POLICY_ZERO; PyTorch's copy-engine collectives): each GPU receives the
 * (n - 1) / n of c->bytes it lacks at the measured copy-engine bandwidth (RM_CE_D2D_GBPS_H100,
 * scaled by hw->nvlink_GBps / 450 for another NVLink generation), after one launch
 * (hw->launch_us). 0 for a group of one or no bytes; -1 when c is not an all-gather within a node
 * (copy engines cannot reduce; across nodes the NIC carries it).
 */
double rm_cost_ce_all_gather_s(const rm_collective_cost *c, const rm_hw_profile *hw);

/* cuDNN attention, fused memory-bound kernels, the raw launch floor: what XLA runs. */
rm_kernel_config rm_kernel_config_default(void);

/* The shared resource an op consumes while it runs; the engine shares each one fluidly. */
typedef enum rm_cost_resource {
	RM_RES_SM,       /* compute-bound kernels: the SMs no collective holds */
	RM_RES_HBM,      /* memory-bound kernels and device-to-device copies */
	RM_RES_NVLINK,   /* collectives: NVLink, both directions */
	RM_RES_PCIE_H2D, /* host-to-device copies */
	RM_RES_PCIE_D2H, /* device-to-host copies */
	RM_RES_NET,      /* collectives of groups across nodes: the NICs and the fabric, which
			  * groups inside a node do not use */
	RM_RES_COUNT
} rm_cost_resource;

/* Which resource the op's rate is limited by (a pure function of the kind and direction). */
rm_cost_resource rm_cost_op_resource(const rm_cost_op *op);

typedef struct rm_cost_model rm_cost_model;
struct rm_cost_model {
	const char *name;
	/* Seconds the op takes running alone with all sm_count SMs; >= 0, finite. */
	double (*op_time_s)(const rm_cost_model *self, const rm_cost_op *op, const rm_hw_profile *hw);
	/* SMs the op holds exclusively while it runs (NCCL channels); 0 for compute kernels. */
	int (*sms_held)(const rm_cost_model *self, const rm_cost_op *op, const rm_hw_profile *hw);
	void *data; /* the implementation's own; NULL for the default model */
	/*
	 * Optional (NULL: the engine shares RM_RES_NET equally among the running network
	 * collectives): what a collective of time_s seconds across nodes draws from the NIC and the
	 * uplinks (rm_nccl_net_load); false when it draws nothing. Set by rm_cost_nccl_init when its
	 * NCCL model has a fabric (cluster.topology).
	 */
	bool (*net_load)(const rm_cost_model *self, const rm_cost_op *op, const rm_hw_profile *hw, double time_s,
			 rm_net_load *out);
};

/* The default model described above; a static const table, never freed. */
const rm_cost_model *rm_cost_model_default(void);

/*
 * The default model with collectives priced by a given NCCL model (a calibrated one, with its
 * fitted overrides: see rm_calib_resolve_hw). The caller owns the storage; use &c->base.
 */
typedef struct rm_cost_nccl {
	rm_cost_model base;
	rm_nccl_model nccl;
	rm_kernel_config kernels; /* rm_kernel_config_default() unless set after init */
} rm_cost_nccl;
void rm_cost_nccl_init(rm_cost_nccl *c, const rm_nccl_model *nccl);

/*
 * Tensor-core throughput under a power limit, as a fraction of the rate measured at the TDP:
 * min(1, power_W / tdp_W). Capped well below TDP, a GEMM's throughput falls in proportion to the
 * cap (GB300 at 500 W against 1400 W: ~617 against 1600-2174 TFLOP/s, ratio 0.28-0.39 for a power
 * ratio of 0.36; docs/reference/kernels-h100.md section 4). No H100 sweep is public: this is the
 * least certain factor of the model, and calibration at the user's limit replaces it.
 * Memory-bound kernels are not scaled.
 */
double rm_cost_power_factor(const rm_hw_profile *hw);

/* Output tiles of a GEMM, batch * ceil(m / gemm_tile_m) * ceil(n / gemm_tile_n): one CTA per SM
 * at a time, so the waves it needs on F SMs are ceil(tiles / F) (the engine's contention). */
double rm_cost_gemm_tiles(const rm_gemm_shape *g, const rm_hw_profile *hw);
/* FLOPs of a GEMM: 2 * batch * m * n * k. */
double rm_cost_gemm_flops(const rm_gemm_shape *g);
/*
 * GEMM seconds on sms SMs (sms <= 0 means hw->sm_count):
 *   tiles = batch * ceil(m / tile_m) * ceil(n / tile_n)
 *   q     = 1 if tiles <= sms (cuBLAS picks smaller tiles or split-K to fill one wave),
 *           else ceil(tiles / sms) * sms / tiles (the idle share of the last wave)
 *   t     = gemm_overhead_us + FLOPs / (R * p * sms / sm_count) * q * (k + K0) / k
 * R is gemm_bf16_TFLOPs (fp8: gemm_fp8_TFLOPs; fp32: tf32_TFLOPs * R/bf16 peak), K0 is
 * gemm_k_overhead (each output tile's pipeline fill and epilogue, in elements of K), p is
 * rm_cost_power_factor. t0 = 6.5 us, R = 840 TFLOP/s and K0 = 152 are a least-squares fit to the
 * 45 measured BF16 shapes of docs/reference/gemm-h100.csv and kernels-h100-gemm.csv (rms error 11%,
 * every row in docs/sim.md). The result is never below the roofline's memory side,
 *   gemm_overhead_us + rm_cost_gemm_min_bytes / hbm_achievable_GBps
 * (a skinny GEMM of a tensor-parallel projection, n or k of 128-512 against m of 10^4-10^5
 * tokens, moves its activation at HBM speed: Williams et al., "Roofline", CACM 2009).
 */
double rm_cost_gemm_s(const rm_gemm_shape *g, const rm_hw_profile *hw, int sms);
/* The fewest HBM bytes a GEMM moves: A (m x k) and B (k x n) read once, C (m x n) written once,
 * per batch; fp8 operands write a bf16 C. */
double rm_cost_gemm_min_bytes(const rm_gemm_shape *g);
/* Attention FLOPs: forward 4*b*heads*s*s*d (halved when causal; a fused kernel with a causal
 * sliding window w < s executes 4*b*heads*d*(w(w+1)/2 + (s-w)w)), backward 2.5x that. With a value
 * head dim d_v != d (latent attention) QK^T contracts d and PV d_v: 2*b*heads*(d + d_v) per
 * attended pair forward and 2*b*heads*(3d + 2d_v) backward (recomputed QK^T, dQ, dK over d; dP,
 * dV over d_v: FlashAttention-2's five backward matmuls), which are the above when d_v = d. */
double rm_cost_attention_flops(const rm_attention_cost *a);
/*
 * Measured TFLOP/s (at the TDP, 16-bit) of a fused attention kernel, forward or backward, for a
 * head dim, sequence length (the window when one is set) and mask, interpolated linearly in
 * log2(seq) between the measured lengths 512 ... 16k (32k for cuDNN) and clamped outside them
 * (docs/reference/kernels-h100.md sections 2.2-2.4; the table and how missing rows are derived
 * are in models/cost.c). Head dims other than 64/128/256 take the nearest measured one.
 */
double rm_cost_attention_tflops(rm_attention_kernel kernel, bool backward, bool causal, int64_t head_dim,
				int64_t seq);
/*
 * Attention seconds. Fused: t0 + FLOPs / (the kernel's measured rate x power factor), or its HBM
 * bytes / HBM if that is slower. Unfused (separate QK^T, softmax, PV ops): the GEMM-rate time of
 * its FLOPs or its bytes (score matrix included). k NULL: rm_kernel_config_default().
 */
double rm_cost_attention_s(const rm_attention_cost *a, const rm_hw_profile *hw, const rm_kernel_config *k);
/*
 * Fraction of the HBM peak a memory-bound kernel of class c reaches, fused or eager
 * (docs/reference/kernels-h100.md section 3; each value's row is in models/cost.c).
 */
double rm_cost_membound_efficiency(rm_membound_class c, bool fused);
/* Memory-bound seconds: max((read + written) / (hbm_peak x efficiency), flops / fp32 peak,
 * kernels x the kernel floor of k (host_us, or hw->launch_us)). k NULL: rm_kernel_config_default(). */
double rm_cost_elementwise_s(const rm_elementwise_cost *e, const rm_hw_profile *hw, const rm_kernel_config *k);
/*
 * Copy seconds: bytes / h2d_GBps or d2h_GBps; d2d 2 * bytes / hbm_achievable_GBps; p2p (one
 * copy-engine copy to or from one peer over NVLink) bytes / RM_CE_D2D_GBPS_H100, scaled by
 * hw->nvlink_GBps / 450 for another NVLink generation, after one launch (hw->launch_us), as
 * rm_cost_ce_all_gather_s; 0 for no bytes.
 */
double rm_cost_copy_s(const rm_copy_cost *c, const rm_hw_profile *hw);
/*
 * Collective seconds from NCCL's cost model (remora/nccl.h: NCCL 2.28 constants, calibrated with
 * the measured size efficiency): the fastest (algorithm, protocol) NCCL would pick for
 * group_size ranks over span nodes. group_size 1 costs 0 (XLA drops trivial collectives). A
 * group too large for span nodes of hw is spread over as many nodes as it needs.
 */
double rm_cost_collective_s(const rm_collective_cost *c, const rm_hw_profile *hw);

/* The NCCL query (rm_coll_query_make) a collective op is priced as: its op, bytes and group over
 * span nodes, or, when the group does not fit span nodes of hw's gpus_per_node (8 when unset)
 * or does not divide over them, over the fewest nodes that hold it evenly (the program format
 * does not carry the node size). */
rm_coll_query rm_cost_collective_query(const rm_collective_cost *c, const rm_hw_profile *hw);
/*
 * HBM bandwidth (GB/s) a collective of time_s seconds draws on each GPU while it runs: 3x its wire
 * bytes per GPU ((g-1)/g of the buffer; 2 (g-1)/g for all-reduce), because NCCL stores what it
 * receives in its FIFO and reads it back, and reads or writes the user buffer (NCCL's maintainer,
 * github.com/NVIDIA/nccl/issues/1428; docs/reference/kernels-h100.md section 7). 0 for group 1.
 */
double rm_cost_collective_hbm_GBps(const rm_collective_cost *c, double time_s);
/* NCCL channels (= SMs held for the collective's whole duration) of the pair NCCL picks, fewer
 * for small messages (docs/reference/nccl-model.md "Channels and SMs"); 0 for group_size 1. */
int rm_cost_collective_channels(const rm_collective_cost *c, const rm_hw_profile *hw);

#endif /* REMORA_COST_H */
