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
	int rank;
	bool jax;
	int64_t events, text_bytes, gemm_shapes;
};

#endif /* REMORA_TRACE_PRIVATE_H */
