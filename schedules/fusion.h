/*
 * Private to schedules/: which memory-bound ops of an op graph a fusing compiler (XLA's GPU
 * fusion passes; torch.compile's Inductor for the vertical part) runs as one kernel, and the HBM
 * bytes and launches of each fused kernel (schedules/fusion.c; the rules and their sources are in
 * docs/sim.md "Fusion").
 *
 * A pure function of a graph, the ops that run in the pass (the forward and backward, or a
 * recompute pass) and the values that must reach HBM (the remat plan's saved, carried and
 * offloaded values; in a recompute pass the values the backward reads). Computed once per plan,
 * never per candidate op.
 *
 * Invariants
 * - Only RM_OP_ELEMENTWISE ops fuse; GEMMs (cuBLAS) and attention (cuDNN / flash) are library
 *   calls that stay kernels of their own. Gathers and optimizer kernels stay alone.
 * - A fusion holds at most one reduction (norm, norm backward, softmax): its hero.
 * - Every external input of a fusion is produced before its first op, so the fused kernel can
 *   run where its first op runs: the first op carries the kernel (one launch, all the bytes), the
 *   others cost nothing.
 * - An add whose one operand is a GEMM's only use may instead run inside the GEMM (opts): the GEMM's
 *   own output is then not written.
 * - A value produced inside a fusion is written to HBM when something outside the fusion reads
 *   it (an op of another fusion or a library call, the next layer) or the caller requires it;
 *   otherwise it is not written, not read back and takes no memory.
 *
 * Units: bytes, FLOPs.
 */
#ifndef REMORA_SCHEDULES_FUSION_H
#define REMORA_SCHEDULES_FUSION_H

#include <stdbool.h>
#include <stdint.h>

#include "remora/cost.h"
#include "remora/workload.h"

/* XLA's horizontal loop fusion takes loop fusions of up to 8192 x 8192 elements
 * (xla/service/gpu/transforms/horizontal_loop_fusion.cc, IsProfitableFusionCandidate). */
#define SCHED_FUSION_HORIZONTAL_MAX_ELEMS (INT64_C(8192) * INT64_C(8192))

typedef struct sched_fusion_op {
	int fusion;            /* first op of the fusion this op belongs to; -1: not a memory-bound op
				* of the pass */
	int64_t bytes_read;    /* the fused kernel's HBM bytes on the first op, 0 on the others */
	int64_t bytes_written;
	double flops;          /* the fusion's FLOPs on the first op */
	rm_membound_class cls; /* the kernel's class: its reduction's, else the first op's */
	int32_t kernels;       /* 1 on the first op, 0 on the others */
	int64_t grad_internal; /* backward ops: bytes of the op's gradient output that only its own
				* fusion reads (not written, not allocated) */
	int epilogue_of;       /* an add run as the epilogue of this GEMM (no cost of its own); -1 */
} sched_fusion_op;

typedef struct sched_fusion {
	int n_ops, n_values;
	sched_fusion_op *ops; /* per op of the graph */
	bool *written;        /* per value: reaches HBM (true for values no fused op produces) */
	int kernels;          /* memory-bound kernels of the pass after fusion */
	int unfused_kernels;  /* memory-bound ops of the pass before */
} sched_fusion;

typedef struct sched_fusion_opts {
	bool horizontal;    /* XLA's horizontal loop fusion of sibling pointwise fusions that feed
			     * one consumer (Inductor does not fuse independent nodes without shared
			     * reads) */
	bool gemm_epilogue; /* XLA's GEMM rewriter: an add of a GEMM's only use becomes the cuBLAS
			     * call's C operand (beta = 1), no kernel of its own (Inductor keeps the
			     * add as a Triton kernel) */
	bool no_complex;    /* Inductor: ops in complex arithmetic (rm_op complex_arith) are ATen
			     * fallbacks that join no fusion (torch/_inductor/lowering.py has no
			     * complex code generation); XLA fuses them */
} sched_fusion_opts;

/*
 * Fuses the memory-bound ops of graph g. run: per op, whether it runs in this pass (NULL: all
 * ops, forward and backward). keep: per value, whether it must be written to HBM whatever its
 * readers (NULL: none). Fills out (free with sched_fusion_finish); never fails (asserts on a
 * malformed graph).
 */
void sched_fusion_build(const rm_graph *g, const bool *run, const bool *keep, sched_fusion_opts opts,
			sched_fusion *out);
void sched_fusion_finish(sched_fusion *f);

/*
 * The cost of op i as the fused program runs it: for a memory-bound op of the pass, its fusion's
 * kernel on the first op and nothing on the others (nor on a GEMM's epilogue); false for any other
 * op (price it as is).
 */
bool sched_fusion_cost(const sched_fusion *f, int i, rm_elementwise_cost *out);

/*
 * Bytes of the gradient tensor backward op i leaves live: default_bytes less what only its own
 * fusion reads (0 when all of it stays inside the fused kernel).
 */
int64_t sched_fusion_grad_bytes(const sched_fusion *f, const rm_graph *g, int i, int64_t default_bytes);

#endif /* REMORA_SCHEDULES_FUSION_H */
