/*
 * Private to trace/: what the reader keeps of a trace and the analysis reads (remora/trace.h).
 * Internal names carry the second prefix rm_trace__.
 */
#ifndef REMORA_TRACE_PRIVATE_H
#define REMORA_TRACE_PRIVATE_H

#include <stdint.h>

#include "remora/trace.h"

/* Event flags. */
enum {
	RM_TRACE__SHAPED = 1, /* a GEMM kernel whose operator had shapes (work = its FLOPs, 0 for a
			       * second kernel of the same operator) */
	RM_TRACE__BYTES = 2,  /* a copy whose args gave "bytes" (work = bytes) */
};

/* One GPU event, 48 bytes; millions of them in a large trace. */
typedef struct rm_trace__event {
	int64_t ts_ns, dur_ns;
	int64_t ext_id;   /* Kineto "External id" (-1 when absent): links a kernel to its operator */
	int64_t work;     /* FLOPs (GEMM with shapes) or bytes (copies), by flags */
	int32_t stream;   /* index into rm_trace.streams */
	int32_t name;     /* index into rm_trace.names */
	int16_t nccl;     /* index into rm_trace.nccl_kinds, -1 when not NCCL */
	uint8_t cls;      /* rm_trace_class */
	uint8_t flags;
	uint32_t seq;     /* file order, the last tie-break */
} rm_trace__event;
_Static_assert(sizeof(rm_trace__event) == 48, "rm_trace__event is kept per GPU event: keep it small");

typedef struct rm_trace__stream {
	int device;
	int64_t stream;
	bool compute, comm;
} rm_trace__stream;

typedef struct rm_trace__step {
	int64_t number;
	int64_t ts_ns, dur_ns;
	int device; /* -1: a CPU annotation (applies to every device of the trace) */
} rm_trace__step;

typedef struct rm_trace__nccl_kind {
	char op[24], algo[24], proto[8];
} rm_trace__nccl_kind;

/* Kinds of operator whose shapes make a kernel a calibration row (trace/calib.c). */
enum { RM_TRACE__OP_GEMM, RM_TRACE__OP_ATTENTION, RM_TRACE__OP_COMM, RM_TRACE__OP_KINDS };

/*
 * A CPU operator with shapes (record_shapes) that launched GPU kernels, keyed by its Kineto
 * "External id": a GEMM (aten::mm, addmm, bmm, baddbmm), an attention operator
 * (aten::_scaled_dot_product_*, _flash_attention_*, _efficient_attention_*), or a collective
 * (record_param_comms, or the collective arguments newer Kineto writes on the NCCL kernel).
 */
typedef struct rm_trace__op {
	int64_t ext_id;
	uint32_t seq;     /* file order: the first of two records of one id wins */
	uint8_t kind;     /* RM_TRACE__OP_* */
	bool bwd;         /* attention: a backward operator */
	int8_t causal;    /* attention: 1, 0, or -1 when the trace does not say */
	char layout[8];   /* GEMM: "tn", "nn", "nt", "tt" from "Input Strides", else "unknown" */
	char dtype[12];   /* "bf16", "fp16", "fp32", "fp8", ... or "unknown" */
	char name[48];    /* the aten operator, or the collective's benchmark name ("all_reduce") */
	/* GEMM: batch, m, n, k; attention: batch, heads, kv_heads, seq_q, seq_kv, head_dim;
	 * collective: bytes (nccl-tests' size), group size, first rank, rank stride (-1: unknown) */
	int64_t d[6];
	int32_t ranks;    /* collective: "Process Group Ranks" text (index into names), -1 absent */
} rm_trace__op;
_Static_assert(sizeof(rm_trace__op) == 144, "rm_trace__op is kept per shaped operator: keep it small");

struct rm_trace {
	rm_trace__event *ev;
	int64_t n_ev, cap_ev;
	rm_trace__stream *streams;
	int n_streams, cap_streams;
	rm_trace__step *steps;
	int64_t n_steps, cap_steps;
	char **names;
	int32_t n_names, cap_names;
	rm_trace__nccl_kind *nccl_kinds;
	int n_nccl_kinds;
	rm_trace__op *ops;   /* by (ext_id, seq) after the reader's finish */
	int64_t n_ops, cap_ops;
	char **device_names; /* deviceProperties[].name by id (NULL where absent) */
	int n_device_names;
	char cuda[32], driver[32], nccl[32]; /* "12.4"... from the top level; empty when absent */
	int rank;
	bool jax;
	int64_t events, text_bytes, gemm_shapes;
};

/* The index of the first operator with this External id in t->ops (sorted), or -1. */
int64_t rm_trace__op_find(const rm_trace *t, int64_t ext_id);

#endif /* REMORA_TRACE_PRIVATE_H */
