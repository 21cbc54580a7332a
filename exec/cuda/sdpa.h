/*
 * Private to exec/cuda/: fused attention through cuDNN's graph (backend) API, the operation
 * graph of cudnn-frontend's sdpa / sdpa_backward nodes (exec/cuda/sdpa.cu), for the operands of
 * rm_exec_attention_fused_bytes (remora/exec.h). Built with cuDNN where meson finds it
 * (RMX_HAVE_CUDNN=1); without it every call fails with "cuDNN not available", so the runner falls
 * back to unfused attention the same way as when cuDNN refuses a graph.
 *
 * Errors: -1 (or NULL) with msg set to "CALL: CUDNN_STATUS_...: what it was for" (cudnnGetErrorString).
 */
#ifndef REMORA_EXEC_CUDA_SDPA_H
#define REMORA_EXEC_CUDA_SDPA_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include "remora/exec.h"
}

typedef struct rmx_sdpa rmx_sdpa;

/* A cuDNN handle on the current device, graphs cached per shape, variant packs per op (n_ops). */
rmx_sdpa *rmx_sdpa_create(int32_t n_ops, char *msg, size_t n);
void rmx_sdpa_destroy(rmx_sdpa *s);
/* "9.19.0" (the loaded library's cudnnGetVersion), or "none". */
void rmx_sdpa_version(char *out, size_t n);

/*
 * Builds and finalizes a's graph (cached by shape): heuristics mode A, then the fallback mode,
 * the first engine configuration whose execution plan finalizes. *workspace_bytes: what that plan
 * asks for (CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE), besides the dQ_accum / softmax_sum operands.
 */
int rmx_sdpa_prepare(rmx_sdpa *s, const rm_attention_cost *a, int64_t *workspace_bytes, char *msg, size_t n);

/*
 * Enqueues op's attention on stream: ptr[k] is operand k of rm_attn_fused_operand (forward: the
 * first 5), every one 16-byte aligned; workspace holds at least the prepared plan's bytes.
 */
int rmx_sdpa_run(rmx_sdpa *s, int32_t op, const rm_attention_cost *a, cudaStream_t stream,
		 void *const ptr[RM_ATTN_F_COUNT], void *workspace, char *msg, size_t n);

#endif /* REMORA_EXEC_CUDA_SDPA_H */
