/*
 * Embedded hardware profiles (remora/hw.h). Every value cites its row in
 * docs/reference/hardware.md with the kind of figure: DS datasheet, M measured by a third
 * party, NCCL a constant in NCCL's source, D derived by arithmetic (the arithmetic is given).
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "remora/hw.h"

static const rm_hw_field_info field_info[RM_HW_FIELD_COUNT] = {
#define RM_HW_FIELD_INFO(f, unit, desc) [RM_HW_##f] = {#f, unit, desc, offsetof(rm_hw_profile, f)},
	RM_HW_FIELDS(RM_HW_FIELD_INFO)
#undef RM_HW_FIELD_INFO
};

/* Shared citations. */
#define HW_SM "docs/reference/hardware.md 'SMs' (DS)"
#define HW_CLOCK "docs/reference/hardware.md 'boost clock' (DS)"
#define HW_BF16 "docs/reference/hardware.md 'BF16/FP16 tensor, dense' (DS)"
#define HW_FP8 "docs/reference/hardware.md 'FP8 tensor, dense' (DS)"
#define HW_TF32 "docs/reference/hardware.md 'TF32 tensor, dense' (DS)"
#define HW_FP32 "docs/reference/hardware.md 'FP32 SIMT' (DS)"
#define HW_HBM_CAP                                                                               \
	"docs/reference/hardware.md 'HBM capacity' (DS) as the driver reports it (nvidia-smi memory.total, M); "    \
	"docs/reference/seed.md mechanism 4 (133.6 GiB arena at 95% on H200) agrees"
#define HW_HBM_PEAK "docs/reference/hardware.md 'HBM peak bandwidth' (DS)"
#define HW_HBM_ACH "docs/reference/hardware.md 'HBM achievable (BabelStream copy)' (M)"
#define HW_L2 "docs/reference/hardware.md 'L2 cache' (DS)"
#define HW_NVL "docs/reference/hardware.md 'NVLink' (DS)"
#define HW_NVL_NCCL "docs/reference/hardware.md 'NVLink as NCCL models it' (NCCL, src/graph/topo.h)"
#define HW_P2P "docs/reference/hardware.md 'raw P2P copy, one direction' (M)"
#define HW_PCIE "docs/reference/hardware.md 'PCIe to host' (DS)"
#define HW_HOST "docs/reference/hardware.md 'host copy, pinned, copy engine' (M)"
#define HW_NIC "docs/reference/hardware.md 'scale-out NIC per GPU (DGX)' (DS/M; midpoint of 46-48 effective)"
#define HW_NODE "docs/reference/hardware.md '8-GPU node fabric (HGX/DGX H100 and H200)' (DS)"
#define HW_TDP "docs/reference/hardware.md 'TDP' (DS)"
#define HW_GEMM_FIT                                                                              \
	"D: least-squares fit of t = t0 + waves x FLOPs/R x (K + K0)/K to the 45 BF16 rows of docs/reference/gemm-h100.csv " \
	"and kernels-h100-gemm.csv (xla sm_90, mamf, tilelang; 700 W): t0 6.5 us, R 840 TFLOP/s, K0 152, rms 11% (docs/sim.md)"
#define HW_GEMM_FP8                                                                              \
	"D: R x 1402.6/794.5, the MAMF best FP8 over the MAMF best BF16 on H100 SXM "                 \
	"(docs/reference/kernels-h100-gemm.csv, gemm-h100.csv)"
#define HW_POWER "docs/reference/hardware.md 'TDP' (DS): the default power limit"
#define HW_WAVES                                                                                 \
	"0: not calibrated; the engine counts a GEMM's waves on the SMs a collective leaves "          \
	"(docs/reference/hardware.md, one-wave GEMM ~2x beside NCCL)"
#define HW_TILE "docs/reference/hardware.md 'Compute efficiency': tiles = ceil(M/128)*ceil(N/256) (D)"
#define HW_LAUNCH "docs/reference/hardware.md 'Kernel launch': raw launch host cost ~3 us (M)"
#define HW_RING "docs/reference/hardware.md 'NCCL's ring kernels on 8x H100 use 24 channels' (NCCL logs)"
#define HW_NVLS "docs/reference/hardware.md 'NVLS uses 16' (NCCL src/transport/nvls.cc)"
#define HW_RING_BW                                                                               \
	"docs/reference/nccl-model.md 'Worked figures': 12 searched channels x 30 GB/s, duplicated to 24 = 360 GB/s " \
	"(30 = the largest search speed <= 370.8/12)"
#define HW_NVLS_BW                                                                               \
	"D: 300 GB/s makes docs/reference/nccl-model.md's NVLS formula (bw * 0.85 * 15/16 * 2) give its worked "    \
	"476-480 GB/s all-reduce busBW"

#define HW_MESH                                                                                  \
	"0: the HGX/DGX 8-GPU baseboard's NVSwitch (docs/reference/hardware.md '8-GPU node fabric'); "   \
	"cluster.nvlink_mesh sets a board without one"

#define HOPPER_COMMON_SOURCES                                                                    \
	[RM_HW_sm_count] = HW_SM, [RM_HW_boost_clock_MHz] = HW_CLOCK,                              \
	[RM_HW_bf16_TFLOPs] = HW_BF16, [RM_HW_fp8_TFLOPs] = HW_FP8, [RM_HW_tf32_TFLOPs] = HW_TF32, \
	[RM_HW_fp32_TFLOPs] = HW_FP32, [RM_HW_hbm_bytes] = HW_HBM_CAP,                            \
	[RM_HW_hbm_peak_GBps] = HW_HBM_PEAK, [RM_HW_hbm_achievable_GBps] = HW_HBM_ACH,             \
	[RM_HW_l2_bytes] = HW_L2, [RM_HW_nvlink_links] = HW_NVL, [RM_HW_nvlink_GBps] = HW_NVL,     \
	[RM_HW_nvlink_nccl_GBps] = HW_NVL_NCCL, [RM_HW_p2p_GBps] = HW_P2P, [RM_HW_pcie_GBps] = HW_PCIE,                      \
	[RM_HW_h2d_GBps] = HW_HOST, [RM_HW_d2h_GBps] = HW_HOST, [RM_HW_nic_GBps] = HW_NIC,         \
	[RM_HW_gpus_per_node] = HW_NODE, [RM_HW_tdp_W] = HW_TDP, [RM_HW_power_W] = HW_POWER,       \
	[RM_HW_gemm_overhead_us] = HW_GEMM_FIT, [RM_HW_gemm_bf16_TFLOPs] = HW_GEMM_FIT,            \
	[RM_HW_gemm_k_overhead] = HW_GEMM_FIT,                                                     \
	[RM_HW_gemm_fp8_TFLOPs] = HW_GEMM_FP8, [RM_HW_gemm_tile_m] = HW_TILE,                      \
	[RM_HW_gemm_tile_n] = HW_TILE, [RM_HW_launch_us] = HW_LAUNCH,                              \
	[RM_HW_gemm_slowdown_per_sm] = HW_WAVES,                                                   \
	[RM_HW_nccl_ring_channels] = HW_RING, [RM_HW_nccl_nvls_channels] = HW_NVLS,                \
	[RM_HW_nccl_ring_busbw_GBps] = HW_RING_BW, [RM_HW_nccl_nvls_bw_GBps] = HW_NVLS_BW,         \
	[RM_HW_nvlink_mesh_gpus] = HW_MESH

/* The A100 entry overrides some of the shared sources on purpose. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
static const rm_hw_profile profiles[] = {
	{
		.name = "h100-sxm",
		.description = "NVIDIA H100 SXM5 80GB HBM3, HGX/DGX 8-GPU NVSwitch node, NDR InfiniBand",
		.sm_count = 132,
		.boost_clock_MHz = 1980,
		.bf16_TFLOPs = 989.4,
		.fp8_TFLOPs = 1978.9,
		.tf32_TFLOPs = 494.7,
		.fp32_TFLOPs = 66.9,
		.hbm_bytes = 81559.0 * 1048576.0, /* 81559 MiB */
		.hbm_peak_GBps = 3350,
		.hbm_achievable_GBps = 2900,
		.l2_bytes = 50e6,
		.nvlink_links = 18,
		.nvlink_GBps = 450,
		.nvlink_nccl_GBps = 370.8,
		.p2p_GBps = 380,
		.pcie_GBps = 64,
		.h2d_GBps = 51,
		.d2h_GBps = 52,
		.nic_GBps = 47,
		.gpus_per_node = 8,
		.tdp_W = 700,
		.power_W = 700,
		.gemm_overhead_us = 6.5,
		.gemm_k_overhead = 152,
		.gemm_bf16_TFLOPs = 840,
		.gemm_fp8_TFLOPs = 1483,
		.gemm_tile_m = 128,
		.gemm_tile_n = 256,
		.launch_us = 3,
		.nccl_ring_channels = 24,
		.nccl_nvls_channels = 16,
		.nccl_ring_busbw_GBps = 360,
		.nccl_nvls_bw_GBps = 300,
		.source = {HOPPER_COMMON_SOURCES},
	},
	{
		.name = "h100-sxm-96gb",
		.description = "NVIDIA H100 SXM5 96GB HBM2e at a 500 W limit (the hosts of many PyTorch benchmarks), 8-GPU NVSwitch node",
		.sm_count = 132,
		.boost_clock_MHz = 1980,
		.bf16_TFLOPs = 989.4,
		.fp8_TFLOPs = 1978.9,
		.tf32_TFLOPs = 494.7,
		.fp32_TFLOPs = 66.9,
		.hbm_bytes = 95.0 * 1073741824.0, /* 95 GiB as the process sees it */
		.hbm_peak_GBps = 2447,
		.hbm_achievable_GBps = 2118,
		.l2_bytes = 50e6,
		.nvlink_links = 18,
		.nvlink_GBps = 450,
		.nvlink_nccl_GBps = 370.8,
		.p2p_GBps = 380,
		.pcie_GBps = 64,
		.h2d_GBps = 51,
		.d2h_GBps = 52,
		.nic_GBps = 47,
		.gpus_per_node = 8,
		.tdp_W = 700,
		.power_W = 500,
		.gemm_overhead_us = 6.5,
		.gemm_k_overhead = 152,
		.gemm_bf16_TFLOPs = 840,
		.gemm_fp8_TFLOPs = 1483,
		.gemm_tile_m = 128,
		.gemm_tile_n = 256,
		.launch_us = 3,
		.nccl_ring_channels = 24,
		.nccl_nvls_channels = 16,
		.nccl_ring_busbw_GBps = 360,
		.nccl_nvls_bw_GBps = 300,
		.source = {HOPPER_COMMON_SOURCES,
			   [RM_HW_hbm_bytes] = "docs/reference/validation.md V1: \"95 GiB\" usable per GPU in torchtitan's logs (M)",
			   [RM_HW_hbm_peak_GBps] = "docs/reference/kernels-h100.md section 4 (D): memory clock 1593 MHz x 2 (DDR) x a "
						   "6-stack 6144-bit bus / 8 = 2447 GB/s; 2.41 TB/s in arXiv 2604.11391 for the same part",
			   [RM_HW_hbm_achievable_GBps] = "D: 2447 x 2900/3350, the H100 SXM BabelStream/peak ratio",
			   [RM_HW_power_W] = "docs/reference/kernels-h100.md section 4: 500 W (DESIRED_POWER=500 for H100 in PyTorch's "
					     "benchmark scripts; \"H100 (HBM2E, 500W)\", pytorch/pytorch pull/119842) (C)"},
	},
	{
		.name = "h200-sxm",
		.description = "NVIDIA H200 SXM 141GB HBM3e, HGX 8-GPU NVSwitch node, NDR InfiniBand",
		.sm_count = 132,
		.boost_clock_MHz = 1980,
		.bf16_TFLOPs = 989.4,
		.fp8_TFLOPs = 1978.9,
		.tf32_TFLOPs = 494.7,
		.fp32_TFLOPs = 66.9,
		.hbm_bytes = 143771.0 * 1048576.0, /* 143771 MiB */
		.hbm_peak_GBps = 4800,
		.hbm_achievable_GBps = 4010,
		.l2_bytes = 50e6,
		.nvlink_links = 18,
		.nvlink_GBps = 450,
		.nvlink_nccl_GBps = 370.8,
		.p2p_GBps = 380,
		.pcie_GBps = 64,
		.h2d_GBps = 52,
		.d2h_GBps = 52,
		.nic_GBps = 47,
		.gpus_per_node = 8,
		.tdp_W = 700,
		.power_W = 700,
		.gemm_overhead_us = 6.5,
		.gemm_k_overhead = 152,
		.gemm_bf16_TFLOPs = 840,
		.gemm_fp8_TFLOPs = 1537,
		.gemm_tile_m = 128,
		.gemm_tile_n = 256,
		.launch_us = 3,
		.nccl_ring_channels = 24,
		.nccl_nvls_channels = 16,
		.nccl_ring_busbw_GBps = 360,
		.nccl_nvls_bw_GBps = 300,
		.source = {HOPPER_COMMON_SOURCES,
			   [RM_HW_p2p_GBps] = "docs/reference/hardware.md 'raw P2P copy, one direction' (~380, assumed equal to H100)",
			   [RM_HW_gemm_fp8_TFLOPs] = "D: R x 1453.4/794.5, the MAMF best FP8 on H200 over the MAMF best BF16 "
						     "(docs/reference/kernels-h100-gemm.csv)"},
	},
	{
		.name = "a100-sxm-80gb",
		.description = "NVIDIA A100 SXM4 80GB HBM2e, HGX 8-GPU NVSwitch node, HDR InfiniBand",
		.sm_count = 108,
		.boost_clock_MHz = 1410,
		.bf16_TFLOPs = 312,
		.fp8_TFLOPs = 0,
		.tf32_TFLOPs = 156,
		.fp32_TFLOPs = 19.5,
		.hbm_bytes = 81920.0 * 1048576.0, /* 81920 MiB */
		.hbm_peak_GBps = 2039,
		.hbm_achievable_GBps = 1765,
		.l2_bytes = 40e6,
		.nvlink_links = 12,
		.nvlink_GBps = 300,
		.nvlink_nccl_GBps = 240,
		.p2p_GBps = 246,
		.pcie_GBps = 32,
		.h2d_GBps = 25.5,
		.d2h_GBps = 26,
		.nic_GBps = 23.5,
		.gpus_per_node = 8,
		.tdp_W = 400,
		.power_W = 400,
		.gemm_overhead_us = 6,
		.gemm_k_overhead = 0,
		.gemm_bf16_TFLOPs = 249,
		.gemm_fp8_TFLOPs = 0,
		.gemm_tile_m = 128,
		.gemm_tile_n = 256,
		.launch_us = 3,
		.nccl_ring_channels = 24,
		.nccl_nvls_channels = 0,
		.nccl_ring_busbw_GBps = 240,
		.nccl_nvls_bw_GBps = 0,
		.source = {
			HOPPER_COMMON_SOURCES,
			[RM_HW_fp8_TFLOPs] = "docs/reference/hardware.md 'FP8 tensor, dense': n/a on A100 (DS)",
			[RM_HW_hbm_achievable_GBps] =
				"D: not sourced in docs/reference/hardware.md; 2039 * (2900/3350), the H100 measured/peak ratio",
			[RM_HW_p2p_GBps] = "D: not sourced; 240 * (380/370.8), the H100 measured/NCCL ratio",
			[RM_HW_h2d_GBps] = "D: not sourced; 32 * (51/64), the H100 measured/PCIe ratio",
			[RM_HW_d2h_GBps] = "D: not sourced; 32 * (52/64), the H100 measured/PCIe ratio",
			[RM_HW_nic_GBps] = "docs/reference/hardware.md 'scale-out NIC per GPU': 200 Gb/s HDR = 25 GB/s raw; "
					   "D: * 47/50 as on NDR",
			[RM_HW_gemm_bf16_TFLOPs] = "D: not sourced; 312 * (790/989.4), the H100 achievable/peak ratio",
			[RM_HW_gemm_overhead_us] = "docs/reference/hardware.md 'Compute efficiency' t0 (the H100 figure; not fitted for A100)",
			[RM_HW_gemm_k_overhead] = "not fitted for A100: 0 (no K pipeline term)",
			[RM_HW_gemm_fp8_TFLOPs] = "docs/reference/hardware.md: no FP8 tensor cores on A100 (DS)",
			[RM_HW_nccl_ring_channels] = "assumed equal to H100 (24); not sourced for A100",
			[RM_HW_nccl_nvls_channels] = "docs/reference/hardware.md: NVLS needs third-generation NVSwitch; none on A100",
			[RM_HW_nccl_ring_busbw_GBps] = "D: 12 searched channels x 20 GB/s (NCCL models A100 NVLink as 12 x 20 = 240, docs/reference/hardware.md)",
			[RM_HW_nccl_nvls_bw_GBps] = "no NVLS on A100 (docs/reference/hardware.md)",
		},
	},
};

#pragma GCC diagnostic pop

static const struct {
	const char *alias;
	const char *name;
} aliases[] = {
	{"h100", "h100-sxm"},
	{"h100-sxm5", "h100-sxm"},
	{"h200", "h200-sxm"},
	{"a100", "a100-sxm-80gb"},
	{"a100-sxm", "a100-sxm-80gb"},
};

const rm_hw_field_info *rm_hw_field_info_at(rm_hw_field field)
{
	if ((unsigned)field >= RM_HW_FIELD_COUNT)
		return NULL;
	return &field_info[field];
}

int rm_hw_field_find(const char *key)
{
	for (int i = 0; i < RM_HW_FIELD_COUNT; i++)
		if (strcmp(field_info[i].key, key) == 0)
			return i;
	return -1;
}

double rm_hw_profile_get(const rm_hw_profile *hw, rm_hw_field field)
{
	const double *v = (const double *)((const char *)hw + field_info[field].offset);
	return *v;
}

void rm_hw_profile_set(rm_hw_profile *hw, rm_hw_field field, double value, const char *source)
{
	double *v = (double *)((char *)hw + field_info[field].offset);
	*v = value;
	if (source)
		hw->source[field] = source;
}

size_t rm_hw_profile_count(void)
{
	return RM_ARRAY_SIZE(profiles);
}

const rm_hw_profile *rm_hw_profile_at(size_t i)
{
	return i < RM_ARRAY_SIZE(profiles) ? &profiles[i] : NULL;
}

const rm_hw_profile *rm_hw_profile_find(const char *name, rm_error *err)
{
	if (!name)
		name = "";
	for (size_t i = 0; i < RM_ARRAY_SIZE(aliases); i++)
		if (strcasecmp(name, aliases[i].alias) == 0)
			name = aliases[i].name;
	for (size_t i = 0; i < RM_ARRAY_SIZE(profiles); i++)
		if (strcasecmp(name, profiles[i].name) == 0)
			return &profiles[i];
	char known[256] = "";
	for (size_t i = 0; i < RM_ARRAY_SIZE(profiles); i++) {
		size_t n = strlen(known);
		snprintf(known + n, sizeof(known) - n, "%s%s", i ? ", " : "", profiles[i].name);
	}
	rm_error_set(err, RM_NOT_FOUND, NULL, 0, 0, "unknown hardware profile '%s' (known: %s)", name,
		     known);
	return NULL;
}

/* ---- memory budget (remora/hw.h) ---- */

/* docs/reference/kernels-h100.md section 6: non-framework memory of a training process on H200. */
#define CUDA_CONTEXT_BYTES ((int64_t)(0.52 * 1073741824.0))
/* ibid.: cuBLASLt workspace on sm90 (PyTorch CUBLASLT_WORKSPACE_SIZE, 32768 KiB). */
#define CUBLAS_WORKSPACE_BYTES (INT64_C(32) << 20)
/* ibid.: per channel and connection, Simple (NCCL_BUFFSIZE 4 MiB) + LL (8 x 512 x 8 x 16 B) +
 * LL128 (120 x 640 x 8 x 8 B) receive buffers. */
#define NCCL_BYTES_PER_CHANNEL ((INT64_C(4) << 20) + INT64_C(8) * 512 * 8 * 16 + INT64_C(120) * 640 * 8 * 8)
/* ibid.: NVLS unicast buffers, 1 MiB x 2 x 16 channels x 8 heads, per NVLS communicator. */
#define NCCL_NVLS_BYTES (INT64_C(256) << 20)

rm_memory_budget rm_memory_budget_default(const rm_hw_profile *hw, int ranks, int nodes)
{
	rm_memory_budget b = {.hbm_bytes = (int64_t)hw->hbm_bytes};
	b.cuda_context_bytes = CUDA_CONTEXT_BYTES;
	b.cublas_workspace_bytes = CUBLAS_WORKSPACE_BYTES;
	if (ranks > 1) {
		/* a ring receives from one peer per channel */
		b.nccl_buffer_bytes = (int64_t)hw->nccl_ring_channels * NCCL_BYTES_PER_CHANNEL;
		int per_node = nodes > 0 ? ranks / nodes : ranks;
		if (per_node > 2 && hw->nccl_nvls_bw_GBps > 0)
			b.nccl_buffer_bytes += NCCL_NVLS_BYTES;
	}
	b.headroom_bytes = b.cuda_context_bytes + b.cublas_workspace_bytes + b.nccl_buffer_bytes;
	b.usable_bytes = b.hbm_bytes - b.headroom_bytes;
	return b;
}

bool rm_memory_budget_tight(int64_t peak_bytes, int64_t usable_bytes)
{
	return peak_bytes <= usable_bytes && (double)peak_bytes > 0.95 * (double)usable_bytes;
}

rm_memory_budget rm_memory_budget_with_headroom(const rm_hw_profile *hw, int ranks, int nodes, int64_t headroom_bytes)
{
	rm_memory_budget b = rm_memory_budget_default(hw, ranks, nodes);
	b.headroom_bytes = headroom_bytes;
	b.headroom_set = true;
	b.usable_bytes = b.hbm_bytes - headroom_bytes;
	return b;
}
