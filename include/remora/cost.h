/*
 * remora/cost.h — what one operation costs on a hardware profile (models/cost.c).
 *
 * The engine (sim/) asks a cost model two questions about every op of a schedule program: how
 * long it takes running alone on the whole GPU, and how many SMs it holds while it runs (NCCL
 * collectives hold one SM per channel; compute kernels hold none exclusively, they share what is
 * left). Contention between concurrent ops (fewer SMs, shared HBM, NVLink, PCIe) is the engine's
 * business, not the cost model's.
 *
 * A cost model is a const table of function pointers (STYLE.md "Layers meet at small
 * interfaces"), so calibration or an NCCL-aware collective model can replace the default one
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

/* The cost inputs of one op (DESIGN.md contract 2); the member named by kind is meaningful. */
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

/* The shared resource an op consumes while it runs; the engine shares each one fluidly. */
typedef enum rm_cost_resource {
	RM_RES_SM,       /* compute-bound kernels: the SMs no collective holds */
	RM_RES_HBM,      /* memory-bound kernels and device-to-device copies */
	RM_RES_NVLINK,   /* collectives: NVLink, both directions */
	RM_RES_PCIE_H2D, /* host-to-device copies */
	RM_RES_PCIE_D2H, /* device-to-host copies */
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
} rm_cost_nccl;
void rm_cost_nccl_init(rm_cost_nccl *c, const rm_nccl_model *nccl);

/* FLOPs of a GEMM: 2 * batch * m * n * k. */
double rm_cost_gemm_flops(const rm_gemm_shape *g);
/*
 * GEMM seconds on sms SMs (sms <= 0 means hw->sm_count):
 *   tiles = batch * ceil(m / tile_m) * ceil(n / tile_n)
 *   q     = 1 if tiles <= sms (cuBLAS picks smaller tiles or split-K to fill one wave),
 *           else ceil(tiles / sms) * sms / tiles (the idle share of the last wave)
 *   t     = gemm_overhead_us + FLOPs / (R * sms / sm_count) * q
 * R is gemm_bf16_TFLOPs (fp8: gemm_fp8_TFLOPs; fp32: tf32_TFLOPs * R/bf16 peak). Source:
 * hardware.md "Compute efficiency" (t0 = 6 us, R = 790 TFLOP/s, tile 128x256); errors against
 * gemm-h100.csv are tabulated in docs/sim.md (within 10% for K >= 512, fast for small K).
 */
double rm_cost_gemm_s(const rm_gemm_shape *g, const rm_hw_profile *hw, int sms);
/* Attention FLOPs: forward 4*b*heads*s*s*d (halved when causal; a fused kernel with a causal
 * sliding window w < s executes 4*b*heads*d*(w(w+1)/2 + (s-w)w)), backward 2.5x that. */
double rm_cost_attention_flops(const rm_attention_cost *a);
/* Attention seconds: max(GEMM-rate time of its FLOPs (t0 included), its HBM bytes / HBM). */
double rm_cost_attention_s(const rm_attention_cost *a, const rm_hw_profile *hw);
/* Memory-bound seconds: max((read + written) / hbm_achievable, flops / fp32 peak). */
double rm_cost_elementwise_s(const rm_elementwise_cost *e, const rm_hw_profile *hw);
/* Copy seconds: bytes / h2d_GBps or d2h_GBps; d2d 2 * bytes / hbm_achievable_GBps. */
double rm_cost_copy_s(const rm_copy_cost *c, const rm_hw_profile *hw);
/*
 * Collective seconds from NCCL's cost model (remora/nccl.h: NCCL 2.28 constants, calibrated with
 * the measured size efficiency): the fastest (algorithm, protocol) NCCL would pick for
 * group_size ranks over span nodes. group_size 1 costs 0 (XLA drops trivial collectives). A
 * group too large for span nodes of hw is spread over as many nodes as it needs.
 */
double rm_cost_collective_s(const rm_collective_cost *c, const rm_hw_profile *hw);
/* NCCL channels (= SMs held for the collective's whole duration) of the pair NCCL picks, fewer
 * for small messages (nccl-model.md "Channels and SMs"); 0 for group_size 1. */
int rm_cost_collective_channels(const rm_collective_cost *c, const rm_hw_profile *hw);

#endif /* REMORA_COST_H */
