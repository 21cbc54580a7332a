/*
 * remora/hw.h — hardware profiles: the figures every cost model reads (models/hw.c).
 *
 * A profile is a plain value: the embedded defaults below come from
 * docs/reference/hardware.md, each field carrying the row it was taken from; calibration
 * (calibrate/) copies a default and overrides fields with fitted values, replacing their sources.
 *
 * Units are in the field names: _TFLOPs = 10^12 FLOP/s (dense, no sparsity), _GBps = 10^9 B/s
 * (one direction unless the name says otherwise), _bytes, _us = microseconds, _MHz, _W.
 */
#ifndef REMORA_HW_H
#define REMORA_HW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "remora/common.h"

/* X(field, unit, description). All values are doubles; counts are whole numbers. */
#define RM_HW_FIELDS(X)                                                                          \
	X(sm_count, "", "streaming multiprocessors")                                             \
	X(boost_clock_MHz, "MHz", "boost clock")                                                 \
	X(bf16_TFLOPs, "TFLOP/s", "BF16/FP16 tensor peak, dense")                                \
	X(fp8_TFLOPs, "TFLOP/s", "FP8 tensor peak, dense (0: not supported)")                    \
	X(tf32_TFLOPs, "TFLOP/s", "TF32 tensor peak, dense")                                     \
	X(fp32_TFLOPs, "TFLOP/s", "FP32 SIMT peak")                                              \
	X(hbm_bytes, "B", "HBM capacity")                                                        \
	X(hbm_peak_GBps, "GB/s", "HBM peak bandwidth")                                           \
	X(hbm_achievable_GBps, "GB/s", "HBM achievable bandwidth (copy)")                        \
	X(l2_bytes, "B", "L2 cache")                                                             \
	X(nvlink_links, "", "NVLink links per GPU")                                              \
	X(nvlink_GBps, "GB/s", "NVLink bandwidth per direction, datasheet")                      \
	X(nvlink_nccl_GBps, "GB/s", "NVLink bandwidth per direction as NCCL models it")           \
	X(p2p_GBps, "GB/s", "measured raw P2P copy, one direction")                              \
	X(pcie_GBps, "GB/s", "PCIe to host per direction, datasheet")                            \
	X(h2d_GBps, "GB/s", "pinned host-to-device copy, measured")                              \
	X(d2h_GBps, "GB/s", "pinned device-to-host copy, measured")                              \
	X(nic_GBps, "GB/s", "scale-out NIC per GPU, effective")                                  \
	X(gpus_per_node, "", "GPUs per node (HGX/DGX)")                                          \
	X(tdp_W, "W", "board power (TDP): the limit the kernel tables were measured at")          \
	X(power_W, "W", "power limit the GPU runs under (nvidia-smi -pl); tensor-core rates scale") \
	X(gemm_overhead_us, "us", "GEMM fixed overhead t0 in t = t0 + FLOPs/R")                  \
	X(gemm_k_overhead, "", "GEMM per-tile pipeline fill, in elements of K: t x (K + K0) / K")   \
	X(gemm_bf16_TFLOPs, "TFLOP/s", "best achievable BF16 GEMM rate R")                       \
	X(gemm_fp8_TFLOPs, "TFLOP/s", "best achievable FP8 GEMM rate R (0: not supported)")      \
	X(gemm_tile_m, "", "GEMM CTA tile rows for wave quantization")                           \
	X(gemm_tile_n, "", "GEMM CTA tile columns for wave quantization")                        \
	X(launch_us, "us", "kernel launch overhead (no CUDA graph)")                             \
	X(gemm_slowdown_per_sm, "", "GEMM slowdown per SM a collective holds (calibrated; 0: waves)") \
	X(nccl_ring_channels, "", "NCCL ring channels (one SM each) on a full node")             \
	X(nccl_nvls_channels, "", "NCCL NVLS channels on a full node")                          \
	X(nccl_ring_busbw_GBps, "GB/s", "NCCL ring busBW on one node (topology search result)")  \
	X(nccl_nvls_bw_GBps, "GB/s", "NCCL NVLS graph intra-node bandwidth (0: no NVLS)")        \
	X(nvlink_mesh_gpus, "", "GPUs of a board whose NVLinks join them directly (0: NVSwitch)")

typedef enum rm_hw_field {
#define RM_HW_FIELD_ENUM(f, unit, desc) RM_HW_##f,
	RM_HW_FIELDS(RM_HW_FIELD_ENUM)
#undef RM_HW_FIELD_ENUM
	RM_HW_FIELD_COUNT
} rm_hw_field;

typedef struct rm_hw_profile {
	char name[64];
	char description[128];
#define RM_HW_FIELD_MEMBER(f, unit, desc) double f;
	RM_HW_FIELDS(RM_HW_FIELD_MEMBER)
#undef RM_HW_FIELD_MEMBER
	/* Where each value comes from: "docs/reference/hardware.md <row> (DS|M|NCCL|D)" or a calibration fit. */
	const char *source[RM_HW_FIELD_COUNT];
} rm_hw_profile;

/* Descriptor of a field, for printing and for overriding by name. */
typedef struct rm_hw_field_info {
	const char *key;
	const char *unit;
	const char *description;
	size_t offset; /* offsetof(rm_hw_profile, key) */
} rm_hw_field_info;

/* The field table, RM_HW_FIELD_COUNT entries in declaration order. */
const rm_hw_field_info *rm_hw_field_info_at(rm_hw_field field);
/* The field of that key ("hbm_bytes"), or -1. */
int rm_hw_field_find(const char *key);
/* The value of a field of a profile. */
double rm_hw_profile_get(const rm_hw_profile *hw, rm_hw_field field);
/* Sets a field and its source (source must outlive the profile; NULL keeps the old one). */
void rm_hw_profile_set(rm_hw_profile *hw, rm_hw_field field, double value, const char *source);

/* Number of embedded profiles, and the i-th (i < count). */
size_t rm_hw_profile_count(void);
const rm_hw_profile *rm_hw_profile_at(size_t i);
/*
 * The embedded profile of that name ("h100-sxm", "h200-sxm", "a100-sxm-80gb"; the aliases
 * "h100", "h200", "a100" are accepted), or NULL with err listing the known names.
 */
const rm_hw_profile *rm_hw_profile_find(const char *name, rm_error *err);

/*
 * What of a GPU's HBM one training process can use for its own tensors, and what the rest is
 * made of (docs/reference/kernels-h100.md section 6, "Memory overheads on a training GPU"):
 * - cuda_context_bytes: the CUDA context with lazily loaded modules plus library handles; 0.52 GiB
 *   measured as the non-framework memory of a training process on H200 (ibid., cudnn-frontend
 *   dsv3 H200 figures; 287-400 MB for the bare context alone);
 * - cublas_workspace_bytes: one cuBLASLt workspace, 32 MiB on sm90 (PyTorch's
 *   CUBLASLT_WORKSPACE_SIZE default, the cuBLAS recommendation for Hopper);
 * - nccl_buffer_bytes: NCCL's receive buffers for one communicator over the group: Simple 4 MiB +
 *   LL 512 KiB + LL128 4.69 MiB per channel and peer connection, ~220 MiB for a ring of 24
 *   channels on one 8-GPU node, plus 256 MiB of NVLS unicast buffers when the group can use NVLS
 *   (one NVSwitch node, more than 2 ranks, a profile with NVLS bandwidth); none for a group of one;
 * - headroom_bytes: their sum, or what the user set (memory_headroom_gib);
 * - usable_bytes = hbm_bytes - headroom_bytes: what "fits" is judged against.
 * The allocator's own slack (PyTorch reserved-but-unallocated, fragmentation) is not included: a
 * peak within 5% of usable_bytes is reported as tight.
 */
typedef struct rm_memory_budget {
	int64_t hbm_bytes;
	int64_t cuda_context_bytes, cublas_workspace_bytes, nccl_buffer_bytes;
	int64_t headroom_bytes;
	bool headroom_set; /* headroom_bytes is the user's, not the sum of the parts */
	int64_t usable_bytes;
} rm_memory_budget;

/* Whether a peak that fits leaves less than 5% of usable memory: the margin allocator slack
 * (PyTorch reserved beyond allocated, fragmentation) usually takes, so the plan is reported as
 * tight (docs/reference/kernels-h100.md section 6). */
bool rm_memory_budget_tight(int64_t peak_bytes, int64_t usable_bytes);

/* The derived budget of hw for one NCCL communicator of ranks GPUs over nodes nodes. */
rm_memory_budget rm_memory_budget_default(const rm_hw_profile *hw, int ranks, int nodes);
/* The same with a headroom the user set (bytes >= 0, < hbm_bytes); the parts are kept for reports. */
rm_memory_budget rm_memory_budget_with_headroom(const rm_hw_profile *hw, int ranks, int nodes, int64_t headroom_bytes);

#endif /* REMORA_HW_H */
