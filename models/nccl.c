/*
 * NCCL's collective cost model (remora/nccl.h). Constants and formulas from
 * docs/reference/nccl-model.md (NVIDIA/nccl src/graph/tuning.cc, enqueue.cc); multi-node
 * fabric figures from docs/reference/hardware.md; size efficiencies fitted from
 * data/reference/nccl-h100-8gpu.csv. Every number below names its source.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "remora/cost.h"
#include "remora/nccl.h"

enum { LINK_NVLINK, LINK_PCI, LINK_NET, LINK_COUNT };
enum { A_RING = RM_NCCL_ALGO_RING, A_TREE = RM_NCCL_ALGO_TREE, A_NVLS = RM_NCCL_ALGO_NVLS,
       A_NVLS_TREE = RM_NCCL_ALGO_NVLS_TREE, A_PAT = RM_NCCL_ALGO_PAT, NA = RM_NCCL_ALGO_COUNT };
enum { P_LL = RM_NCCL_PROTO_LL, P_LL128 = RM_NCCL_PROTO_LL128, P_SIMPLE = RM_NCCL_PROTO_SIMPLE,
       NP = RM_NCCL_PROTO_COUNT };

struct rm_nccl_constants {
	const char *version;
	const char *range; /* the releases the table stands for, for labels ("2.23+") */
	int major, minor; /* first version the table applies to */
	float base_lat[NA][NP];          /* us, by algorithm and protocol */
	float hw_lat[LINK_COUNT][NA][NP]; /* us per step, by link */
	float ll_max_bw_node;            /* GB/s, llMaxBws compute-capability row (Hopper), one node only */
	float ll_frac_ag_rs, ll_frac_ar; /* ring LL share of busBW on one node */
	float ll_frac_net;               /* ring LL share of busBW across nodes */
	float ll128_eff, ll128_eff_ppn1; /* ring LL128: min(eff * busBW, graph channels * per_ch) */
	float ll128_per_ch;
	float tree_eff, tree_per_ch[3];  /* tree: min(eff * busBW, graph channels * per_ch[bucket]) */
	float tree_ll128_per_ch[3];      /* tree LL128 cap per graph channel, by node bucket */
	float nvls_eff;                  /* Hopper NVLS efficiency */
	float nvls_tree_per_ch[3];       /* perChMaxNVLSTreeBws Hopper row, by node bucket */
	float pat_bw;                    /* PAT share of the tree graph's busBW; 0: no PAT */
	int nvls_tree_style;             /* NVLS-tree arithmetic across nodes: 0 as in 2.18, 1 as in
					  * 2.19-2.27, 2 as in 2.28 (the 2.23+ table takes 1 below 2.28) */
	bool ar_inter_steps_2n;          /* ring all-reduce counts 2 x nodes network steps (not 2 x (nodes-1)) */
	bool ppn1_tree_net_lat;          /* one GPU per node: every algorithm takes Tree's network latency */
};

/*
 * NVIDIA/nccl src/graph/tuning.cc at v2.28.9-1 (ncclTunerConstantsDefaults, ncclTopoTuneModel),
 * summarised in docs/reference/nccl-model.md; the table stands for 2.23 on. Inside that range the
 * model's minor picks what changed across nodes: the PAT share was 0.85 in 2.23 (0.75 from 2.24);
 * before 2.28 NVLS-tree took min(bwIntra, bwInter (/2 beyond 2 nodes)) per head, converted by
 * 5/6, with a 14 us network hop (20.9 in 2.28).
 */
static const rm_nccl_constants k_2_28 = {
	.version = "2.28",
	.range = "2.23+",
	.major = 2,
	.minor = 23,
	.base_lat = {[A_RING] = {6.6f, 14.0f, 8.4f}, [A_TREE] = {6.8f, 14.0f, 8.4f},
		     [A_NVLS] = {0, 0, 0}, [A_NVLS_TREE] = {0, 0, 0}, [A_PAT] = {8.0f, 8.0f, 8.0f}},
	.hw_lat = {
		[LINK_NVLINK] = {[A_RING] = {0.6f, 1.9f, 3.4f}, [A_TREE] = {0.6f, 1.25f, 4.0f},
				 [A_NVLS] = {0, 0, 25.0f}, [A_NVLS_TREE] = {0, 0, 25.0f}, [A_PAT] = {0, 0, 4.0f}},
		[LINK_PCI] = {[A_RING] = {1.0f, 2.5f, 5.7f}, [A_TREE] = {1.0f, 1.9f, 4.0f}, [A_PAT] = {0, 0, 4.0f}},
		[LINK_NET] = {[A_RING] = {2.7f, 4.0f, 14.0f}, [A_TREE] = {5.0f, 8.5f, 14.0f},
			      [A_NVLS] = {0, 0, 18.0f}, [A_NVLS_TREE] = {0, 0, 20.9f}, [A_PAT] = {0, 0, 14.0f}},
	},
	.ll_max_bw_node = 141.0f,
	.ll_frac_ag_rs = 0.5f,
	.ll_frac_ar = 0.5f,
	.ll_frac_net = 0.5f,
	.ll128_eff = 0.92f,
	.ll128_eff_ppn1 = 0.92f,
	.ll128_per_ch = 36.7f,
	.tree_eff = 0.92f,
	.tree_per_ch = {38.7f, 41.4f, 36.0f},
	.tree_ll128_per_ch = {36.7f, 36.7f, 29.0f},
	.nvls_eff = 0.85f,
	.nvls_tree_per_ch = {0.0f, 57.7f, 45.5f},
	.pat_bw = 0.75f,
	.nvls_tree_style = 2,
	.ar_inter_steps_2n = false,
	.ppn1_tree_net_lat = true,
};

/* tuning.cc at v2.21.5-1 (2.19-2.22): Tree Simple base 0 with 28 us per hop; ring all-reduce
 * counts 2 x nodes network steps; no PAT, no one-GPU-per-node latency rule; NVLS-tree's network
 * hop 14 us. */
static const rm_nccl_constants k_2_21 = {
	.version = "2.21",
	.range = "2.19-2.22",
	.major = 2,
	.minor = 19,
	.base_lat = {[A_RING] = {6.6f, 14.0f, 8.4f}, [A_TREE] = {6.8f, 14.0f, 0.0f},
		     [A_NVLS] = {0, 0, 0}, [A_NVLS_TREE] = {0, 0, 0}},
	.hw_lat = {
		[LINK_NVLINK] = {[A_RING] = {0.6f, 1.9f, 3.4f}, [A_TREE] = {0.6f, 1.25f, 28.0f},
				 [A_NVLS] = {0, 0, 25.0f}, [A_NVLS_TREE] = {0, 0, 25.0f}},
		[LINK_PCI] = {[A_RING] = {1.0f, 2.5f, 5.7f}, [A_TREE] = {1.0f, 1.9f, 28.0f}},
		[LINK_NET] = {[A_RING] = {2.7f, 4.0f, 14.0f}, [A_TREE] = {5.0f, 8.5f, 28.0f},
			      [A_NVLS] = {0, 0, 18.0f}, [A_NVLS_TREE] = {0, 0, 14.0f}},
	},
	.ll_max_bw_node = 141.0f,
	.ll_frac_ag_rs = 0.5f,
	.ll_frac_ar = 0.5f,
	.ll_frac_net = 0.5f,
	.ll128_eff = 0.92f,
	.ll128_eff_ppn1 = 0.92f,
	.ll128_per_ch = 36.7f,
	.tree_eff = 0.92f,
	.tree_per_ch = {38.7f, 41.4f, 36.0f},
	.tree_ll128_per_ch = {36.7f, 36.7f, 29.0f},
	.nvls_eff = 0.85f,
	.nvls_tree_per_ch = {0.0f, 57.7f, 45.5f},
	.pat_bw = 0.0f,
	.nvls_tree_style = 1,
	.ar_inter_steps_2n = true,
	.ppn1_tree_net_lat = false,
};

/* tuning.cc at v2.18.6-1: NVLS 23 us in all; NVLS-tree 23 us + 2 (nodes - 1) x 19 us; llMaxBw 87.7
 * on one Hopper node; ring LL scaled by
 * 1/3 (all-gather, reduce-scatter on one node) or 1/4 (all-reduce, or any collective across nodes);
 * ring LL128 0.7 of busBW with one GPU per node. */
static const rm_nccl_constants k_2_18 = {
	.version = "2.18",
	.range = "2.18",
	.major = 2,
	.minor = 18,
	/* NVLS: 23 us in all; 2.18's hwLat table had no NVLink NVLS entry (docs/reference/
	 * nccl-model.md "Corrections") */
	.base_lat = {[A_RING] = {6.6f, 14.0f, 8.4f}, [A_TREE] = {6.8f, 14.0f, 0.0f},
		     [A_NVLS] = {0, 0, 23.0f}, [A_NVLS_TREE] = {0, 0, 23.0f}},
	.hw_lat = {
		[LINK_NVLINK] = {[A_RING] = {0.6f, 1.9f, 3.4f}, [A_TREE] = {0.6f, 1.25f, 28.0f},
				 [A_NVLS] = {0, 0, 0}, [A_NVLS_TREE] = {0, 0, 0}},
		[LINK_PCI] = {[A_RING] = {1.0f, 2.5f, 5.7f}, [A_TREE] = {1.0f, 1.9f, 28.0f}},
		[LINK_NET] = {[A_RING] = {2.7f, 4.0f, 14.0f}, [A_TREE] = {5.0f, 8.5f, 28.0f},
			      [A_NVLS] = {0, 0, 18.0f}, [A_NVLS_TREE] = {0, 0, 19.0f}},
	},
	.ll_max_bw_node = 87.7f,
	.ll_frac_ag_rs = 1.0f / 3.0f,
	.ll_frac_ar = 1.0f / 4.0f,
	.ll_frac_net = 1.0f / 4.0f,
	.ll128_eff = 0.92f,
	.ll128_eff_ppn1 = 0.7f,
	.ll128_per_ch = 36.7f,
	.tree_eff = 0.92f,
	.tree_per_ch = {38.7f, 41.4f, 36.0f},
	.tree_ll128_per_ch = {36.7f, 36.7f, 29.0f},
	.nvls_eff = 0.85f,
	.nvls_tree_per_ch = {0.0f, 57.7f, 45.5f},
	.pat_bw = 0.0f,
	.nvls_tree_style = 0,
	.ar_inter_steps_2n = true,
	.ppn1_tree_net_lat = false,
};

/* llMaxBws rows read across nodes (tuning.cc: the row is the CPU vendor's once nNodes > 1, the
 * same in 2.18-2.28): [Intel, AMD or mixed][2 nodes, more than 2], GB/s. */
static const float ll_max_bw_net[2][2] = {{39.0f, 20.4f}, {22.5f, 19.0f}};

/* tuning.cc treeCorrectionFactor (unchanged 2.18-2.28): the tree all-reduce bandwidth is scaled by
 * [protocol][log2(bytes / 64)] for 64 B to 256 MiB. */
static const float tree_correction[NP][23] = {
	{1.0f, 1.0f, 1.0f, 1.0f, .9f, .8f, .7f, .7f, .7f, .7f, .6f, .5f, .4f, .4f, .5f, .6f, .7f, .8f, .9f, 1.0f, 1.0f, 1.0f, 1.0f},
	{1.0f, 1.0f, 1.0f, 1.0f, 1.0f, .9f, .8f, .8f, .8f, .7f, .6f, .6f, .6f, .6f, .6f, .6f, .8f, .9f, .9f, .9f, .9f, 1.0f, 1.0f},
	{.9f, .9f, .9f, .9f, .9f, .9f, .9f, .8f, .7f, .6f, .6f, .5f, .5f, .5f, .5f, .6f, .7f, .8f, .7f, .7f, .8f, .9f, .9f},
};

/* The search speeds NCCL tries for a graph that crosses the network on sm_90 (src/graph/search.cc
 * sm90SpeedArrayInter, v2.28.9-1), GB/s per channel, highest first. */
static const float net_search_speeds[] = {48.0f, 45.0f, 42.0f, 40.0f, 30.0f, 24.0f, 22.0f, 20.0f, 17.5f,
					  15.0f, 12.0f, 6.0f, 3.0f, 2.4f, 1.2f, 0.24f, 0.12f};

/* NVLS graph on an H100 NVSwitch node: one head per GPU at 40 GB/s (docs/reference/nccl-model.md
 * 'Corrections'); used for NVLS all-gather / reduce-scatter and NVLS-tree. */
#define NVLS_HEAD_GBps 40.0

static const rm_nccl_constants *const tables[] = {&k_2_18, &k_2_21, &k_2_28};

/* Threads per channel and bytes per thread before NCCL adds a channel (docs/reference/nccl-model.md
 * 'Channels and SMs'; enqueue.cc NCCL_*_THREAD_THRESHOLD, ring LL scaled by the rank count). */
static const int proto_threads[NP] = {512, 640, 512};
static const int proto_thread_threshold[NP] = {8, 8, 64};

/* Ring reduce-scatter busBW by node count on H100 + NDR, 8 GPUs and 8 NICs per node
 * (docs/reference/hardware.md 'Multi-node', github.com/NVIDIA/nccl/issues/1229), as a fraction of the node's
 * NIC bandwidth 8 x 47 GB/s. Below 4 nodes the 4-node value holds (the 2-node all-gather report
 * in docs/reference/hardware.md, 343 GB/s, is 5% lower). */
static const struct {
	int nodes;
	double busbw_GBps;
} fabric_curve[] = {{4, 360}, {8, 345}, {16, 320}, {32, 300}, {64, 280}, {128, 260}};
#define REF_NODE_NIC_GBps (8.0 * 47.0)

/* NVLS all-reduce busBW by GPUs in the node relative to 8 (docs/reference/hardware.md '8-GPU node fabric',
 * github.com/NVIDIA/nccl/issues/1455): ~370 for 2-4 GPUs, 420/440/460/480 for 5/6/7/8. */
static const double nvls_gpu_curve[9] = {0, 0, 370, 370, 370, 420, 440, 460, 480};

/*
 * Calibrated efficiency of the bandwidth term by message size: measured bandwidth over the raw
 * model's, eff = (bytes / (t_measured - latency_model)) / algbw_model, for the rows of
 * data/reference/nccl-h100-8gpu.csv of 4 MiB and above (smaller rows are latency-bound or the
 * single-process launch floor). Linear in log2(bytes) between points, flat outside, capped at 1.
 */
typedef struct eff_point {
	double log2_bytes;
	double eff;
} eff_point;

static const eff_point eff_ring_ag_rs[] = {
	/* mean of the all_gather and reduce_scatter ring rows (Simple: latency 32.2 us, algBW
	 * 411.4 GB/s): 64 MiB 0.912/0.933, 256 MiB 0.931/0.949, 1 GiB 0.968/0.972, 8 GiB 1.0/1.0;
	 * 4 and 16 MiB rows match the raw model (the 4 MiB row sits on the launch floor) */
	{22, 1.0}, {24, 1.0}, {26, 0.923}, {28, 0.940}, {30, 0.970}, {33, 1.0},
};
static const eff_point eff_nvls_ar[] = {
	/* all_reduce default rows, NVLS (latency 25 us, algBW 273.2 GB/s): the NVLS pipeline ramps
	 * up slowly; 4 MiB 0.526, 16 MiB 0.622, 64 MiB 0.819, 256 MiB 0.903, 1 GiB 0.982, 8 GiB 1.0.
	 * (The all_reduce ring rows measure at or above the raw model: no correction.) */
	{22, 0.526}, {24, 0.622}, {26, 0.819}, {28, 0.903}, {30, 0.982}, {33, 1.0},
};

static const eff_point eff_ce_ag[] = {
	/* NCCL_CTA_POLICY_ZERO all-gather (calibrated model), 8 GPUs: github.com/pytorch/pytorch/pull/182850
	 * measured NCCL and copy-engine all-gathers of 1 / 4 / 16 MiB shards (8 / 32 / 128 MiB
	 * buffers) at 12.4 / 57.2 / 229.4 and 9.4 / 37.7 / 149.1 GB/s in one harness; the copy engine
	 * took 1.319 / 1.517 / 1.539x NCCL's time. eff = (copy-engine bytes term) / (ratio x the
	 * calibrated NCCL model's time - copy-engine latency) keeps those ratios: 0.403, 0.490, 0.553.
	 * No copy-engine row at 512 MiB: 1.0 there, the nvbandwidth rate; pull/172714's overlapped
	 * step (a 512 MiB copy-engine all-gather beside an 8192^3 matmul in 1.77 ms) bounds it from
	 * below at 0.72. docs/collectives.md 'Symmetric kernels and copy engines'. */
	{23, 0.403}, {25, 0.490}, {27, 0.553}, {29, 1.0},
};

static double interp_eff(const eff_point *pts, size_t n, double bytes)
{
	if (bytes <= 0)
		return pts[0].eff;
	double x = log2(bytes);
	if (x <= pts[0].log2_bytes)
		return pts[0].eff;
	for (size_t i = 1; i < n; i++) {
		if (x <= pts[i].log2_bytes) {
			double t = (x - pts[i - 1].log2_bytes) / (pts[i].log2_bytes - pts[i - 1].log2_bytes);
			double e = pts[i - 1].eff + t * (pts[i].eff - pts[i - 1].eff);
			return e > 1.0 ? 1.0 : e;
		}
	}
	return pts[n - 1].eff > 1.0 ? 1.0 : pts[n - 1].eff;
}

static double size_efficiency(rm_coll coll, rm_nccl_algo algo, double bytes)
{
	if (algo == RM_NCCL_ALGO_RING && (coll == RM_COLL_ALL_GATHER || coll == RM_COLL_REDUCE_SCATTER))
		return interp_eff(eff_ring_ag_rs, RM_ARRAY_SIZE(eff_ring_ag_rs), bytes);
	if ((algo == RM_NCCL_ALGO_NVLS || algo == RM_NCCL_ALGO_NVLS_TREE) && coll == RM_COLL_ALL_REDUCE)
		return interp_eff(eff_nvls_ar, RM_ARRAY_SIZE(eff_nvls_ar), bytes);
	return 1.0;
}

/* ---- names ---- */

static const char *const coll_names[RM_COLL_COUNT] = {"all-gather", "reduce-scatter", "all-reduce",
						      "all-to-all", "send-recv"};

const char *rm_coll_name(rm_coll coll)
{
	return (unsigned)coll < RM_COLL_COUNT ? coll_names[coll] : "unknown";
}

bool rm_coll_parse(const char *name, rm_coll *out)
{
	static const struct {
		const char *name;
		rm_coll coll;
	} names[] = {
		{"all-gather", RM_COLL_ALL_GATHER},     {"all_gather", RM_COLL_ALL_GATHER},
		{"allgather", RM_COLL_ALL_GATHER},      {"reduce-scatter", RM_COLL_REDUCE_SCATTER},
		{"reduce_scatter", RM_COLL_REDUCE_SCATTER}, {"reducescatter", RM_COLL_REDUCE_SCATTER},
		{"all-reduce", RM_COLL_ALL_REDUCE},     {"all_reduce", RM_COLL_ALL_REDUCE},
		{"allreduce", RM_COLL_ALL_REDUCE},      {"all-to-all", RM_COLL_ALL_TO_ALL},
		{"all_to_all", RM_COLL_ALL_TO_ALL},     {"alltoall", RM_COLL_ALL_TO_ALL},
		{"send-recv", RM_COLL_SEND_RECV},       {"sendrecv", RM_COLL_SEND_RECV},
		{"send_recv", RM_COLL_SEND_RECV},       {"collective-permute", RM_COLL_SEND_RECV},
	};
	for (size_t i = 0; i < RM_ARRAY_SIZE(names); i++)
		if (strcasecmp(name, names[i].name) == 0) {
			*out = names[i].coll;
			return true;
		}
	return false;
}

double rm_coll_busbw_factor(rm_coll coll, int ranks)
{
	double n = ranks;
	if (ranks <= 1)
		return 0.0;
	switch (coll) {
	case RM_COLL_ALL_REDUCE:
		return 2.0 * (n - 1.0) / n;
	case RM_COLL_SEND_RECV:
		return 1.0;
	default:
		return (n - 1.0) / n;
	}
}

static const char *const algo_names[] = {"Ring", "Tree", "NVLS", "NVLSTree", "PAT", "P2P", "Local", "Symmetric",
					 "CopyEngine"};
static const char *const proto_names[NP] = {"LL", "LL128", "Simple"};

const char *rm_nccl_algo_name(rm_nccl_algo algo)
{
	return (unsigned)algo < RM_ARRAY_SIZE(algo_names) ? algo_names[algo] : "unknown";
}

const char *rm_nccl_proto_name(rm_nccl_proto proto)
{
	return (unsigned)proto < NP ? proto_names[proto] : "unknown";
}

static bool parse_list(const char *list, const char *const *names, int count, unsigned *mask,
		       const char *what, rm_error *err)
{
	bool exclude = list[0] == '^';
	const char *p = exclude ? list + 1 : list;
	unsigned named = 0;
	char token[64];
	while (*p) {
		size_t len = strcspn(p, ",");
		if (len == 0 || len >= sizeof(token)) {
			rm_error_set(err, RM_INVALID, NULL, 0, 0, "%s list '%s': empty or overlong entry", what,
				     list);
			return false;
		}
		memcpy(token, p, len);
		token[len] = '\0';
		int found = -1;
		for (int i = 0; i < count; i++)
			if (strcasecmp(token, names[i]) == 0)
				found = i;
		if (found < 0) {
			char known[128] = "";
			for (int i = 0; i < count; i++) {
				size_t n = strlen(known);
				snprintf(known + n, sizeof(known) - n, "%s%s", i ? ", " : "", names[i]);
			}
			rm_error_set(err, RM_INVALID, NULL, 0, 0, "unknown %s '%s' (known: %s)", what, token,
				     known);
			return false;
		}
		named |= 1u << found;
		p += len;
		if (*p == ',')
			p++;
	}
	if (named == 0) {
		rm_error_set(err, RM_INVALID, NULL, 0, 0, "%s list '%s' names nothing", what, list);
		return false;
	}
	*mask = exclude ? (((1u << count) - 1) & ~named) : named;
	return true;
}

static const char *const cpu_names[RM_NCCL_CPU_COUNT] = {"intel", "amd", "mixed", "other"};

const char *rm_nccl_cpu_name(rm_nccl_cpu cpu)
{
	return (unsigned)cpu < RM_NCCL_CPU_COUNT ? cpu_names[cpu] : "unknown";
}

bool rm_nccl_cpu_parse(const char *name, rm_nccl_cpu *out)
{
	for (int i = 0; i < RM_NCCL_CPU_COUNT; i++)
		if (strcasecmp(name, cpu_names[i]) == 0) {
			*out = (rm_nccl_cpu)i;
			return true;
		}
	if (strcasecmp(name, "arm") == 0) {
		*out = RM_NCCL_CPU_OTHER;
		return true;
	}
	return false;
}

/* NCCL's names of the policies (nccl.h NCCL_CTA_POLICY_DEFAULT 0x00, _EFFICIENCY 0x01, _ZERO 0x02) */
static const char *const cta_policy_names[RM_NCCL_CTA_COUNT] = {"default", "efficiency", "zero"};

const char *rm_nccl_cta_policy_name(rm_nccl_cta_policy policy)
{
	return (unsigned)policy < RM_NCCL_CTA_COUNT ? cta_policy_names[policy] : "unknown";
}

bool rm_nccl_cta_policy_parse(const char *name, rm_nccl_cta_policy *out)
{
	static const char prefix[] = "NCCL_CTA_POLICY_";
	if (strncasecmp(name, prefix, sizeof(prefix) - 1) == 0)
		name += sizeof(prefix) - 1;
	for (int i = 0; i < RM_NCCL_CTA_COUNT; i++) {
		char digit[2] = {(char)('0' + i), '\0'};
		if (strcasecmp(name, cta_policy_names[i]) == 0 || strcmp(name, digit) == 0) {
			*out = (rm_nccl_cta_policy)i;
			return true;
		}
	}
	return false;
}

static const char *const registration_names[RM_NCCL_REG_COUNT] = {"none", "buffer", "symmetric"};

const char *rm_nccl_registration_name(rm_nccl_registration reg)
{
	return (unsigned)reg < RM_NCCL_REG_COUNT ? registration_names[reg] : "unknown";
}

bool rm_nccl_registration_parse(const char *name, rm_nccl_registration *out)
{
	for (int i = 0; i < RM_NCCL_REG_COUNT; i++)
		if (strcasecmp(name, registration_names[i]) == 0) {
			*out = (rm_nccl_registration)i;
			return true;
		}
	return false;
}

bool rm_nccl_parse_algos(const char *list, unsigned *mask, rm_error *err)
{
	return parse_list(list, algo_names, NA, mask, "algorithm", err);
}

bool rm_nccl_parse_protos(const char *list, unsigned *mask, rm_error *err)
{
	return parse_list(list, proto_names, NP, mask, "protocol", err);
}

/* ---- model ---- */

/*
 * The newest release the tables are known to describe: nccl-model.md read tuning.cc at NCCL ~2.30
 * and the 2.23+ constants held unchanged through it. A later MAJOR.MINOR may have new tables,
 * so it is refused rather than silently priced with these.
 */
enum { NEWEST_MAJOR = 2, NEWEST_MINOR = 30 };

/* MAJOR.MINOR[.PATCH], digits only; false otherwise. */
static bool parse_version(const char *v, int *major, int *minor)
{
	int n = 0, parts[3] = {0, 0, 0};
	const char *p = v;
	while (n < 3) {
		if (*p < '0' || *p > '9')
			return false;
		long x = 0;
		while (*p >= '0' && *p <= '9' && x < 100000)
			x = x * 10 + (*p++ - '0');
		if (x >= 100000)
			return false;
		parts[n++] = (int)x;
		if (*p == '\0')
			break;
		if (*p++ != '.')
			return false;
	}
	if (*p != '\0' || n < 2)
		return false;
	*major = parts[0];
	*minor = parts[1];
	return true;
}

static const rm_nccl_constants *table_for(int major, int minor)
{
	const rm_nccl_constants *pick = NULL;
	for (size_t i = 0; i < RM_ARRAY_SIZE(tables); i++)
		if (major > tables[i]->major || (major == tables[i]->major && minor >= tables[i]->minor))
			pick = tables[i];
	return pick;
}

static void known_versions(char *buf, size_t size)
{
	buf[0] = '\0';
	for (size_t i = 0; i < RM_ARRAY_SIZE(tables); i++) {
		size_t l = strlen(buf);
		bool last = i + 1 == RM_ARRAY_SIZE(tables);
		if (last)
			snprintf(buf + l, size - l, "%s%d.%d-%d.%d (%s tables)", i ? ", " : "", tables[i]->major,
				 tables[i]->minor, NEWEST_MAJOR, NEWEST_MINOR, tables[i]->range);
		else
			snprintf(buf + l, size - l, "%s%s (%s tables)", i ? ", " : "", tables[i]->range,
				 tables[i]->version);
	}
}

rm_status rm_nccl_model_init(rm_nccl_model *model, const rm_hw_profile *hw, const char *version,
			     rm_error *err)
{
	/* the override table is not cleared: n_overrides bounds it (keeps init cheap, ~20 KB) */
	model->hw = *hw;
	model->k = NULL;
	model->calibrated = true;
	model->cpu = RM_NCCL_CPU_INTEL;
	model->cta_policy = RM_NCCL_CTA_DEFAULT;
	model->registration = RM_NCCL_REG_NONE;
	model->fabric = (rm_fabric){.kind = RM_FABRIC_NONE, .pxn = true};
	model->n_overrides = 0;
	model->version[0] = '\0';
	int major = 2, minor = 28;
	char known[160];
	if (version && version[0]) {
		if (strlen(version) >= sizeof(model->version) || !parse_version(version, &major, &minor))
			return rm_error_set(err, RM_INVALID, NULL, 0, 0,
					    "NCCL version '%s': expected MAJOR.MINOR[.PATCH], e.g. 2.28 or 2.26.2",
					    version);
		if (major > NEWEST_MAJOR || (major == NEWEST_MAJOR && minor > NEWEST_MINOR)) {
			known_versions(known, sizeof(known));
			return rm_error_set(err, RM_INVALID, NULL, 0, 0,
					    "NCCL version %s is newer than the newest modelled (%d.%d): its tuning "
					    "tables are not known (known: %s; any patch release of these is fine)",
					    version, NEWEST_MAJOR, NEWEST_MINOR, known);
		}
	}
	const rm_nccl_constants *pick = table_for(major, minor);
	if (!pick) {
		known_versions(known, sizeof(known));
		return rm_error_set(err, RM_INVALID, NULL, 0, 0,
				    "NCCL version %s is older than the oldest modelled (2.18; known: %s)", version,
				    known);
	}
	model->k = pick;
	model->minor = major == 2 ? minor : NEWEST_MINOR;
	if (version && version[0])
		snprintf(model->version, sizeof(model->version), "%s", version);
	return RM_OK;
}

const char *rm_nccl_model_version(const rm_nccl_model *model)
{
	return model->k ? model->k->version : "unset";
}

const char *rm_nccl_model_version_label(const rm_nccl_model *model, char *buf, size_t size)
{
	if (!model->k) {
		snprintf(buf, size, "unset");
		return buf;
	}
	int major = 0, minor = 0;
	if (!model->version[0]) {
		snprintf(buf, size, "%s (default; %s tables)", model->k->version, model->k->range);
	} else if (!parse_version(model->version, &major, &minor) || table_for(major, minor) != model->k) {
		/* a measured release outside the known ones, priced with the nearest table */
		bool newer = major > NEWEST_MAJOR || (major == NEWEST_MAJOR && minor > NEWEST_MINOR);
		snprintf(buf, size, "%s (%s than modelled; %s tables)", model->version, newer ? "newer" : "older",
			 model->k->range);
	} else {
		snprintf(buf, size, "%s (%s tables)", model->version, model->k->range);
	}
	return buf;
}

bool rm_nccl_model_add_override(rm_nccl_model *model, const rm_nccl_override *ov)
{
	if (model->n_overrides >= RM_NCCL_MAX_OVERRIDES || ov->ranks < 1 || ov->nodes < 1 ||
	    ov->ranks_per_node < 1 || ov->ranks != ov->ranks_per_node * ov->nodes)
		return false;
	model->overrides[model->n_overrides++] = *ov;
	return true;
}

rm_status rm_nccl_model_set_buffers(rm_nccl_model *model, rm_nccl_cta_policy policy, rm_nccl_registration reg,
				    rm_error *err)
{
	char label[96];
	if ((unsigned)policy >= RM_NCCL_CTA_COUNT || (unsigned)reg >= RM_NCCL_REG_COUNT)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0, "unknown CTA policy or registration");
	/* nccl.h: NCCL_CTA_POLICY_EFFICIENCY and ncclCommWindowRegister from 2.27.3, NCCL_CTA_POLICY_ZERO
	 * (src/ce_coll.cc) from 2.28.3 */
	const char *what = NULL;
	int need = 0;
	if (policy == RM_NCCL_CTA_ZERO) {
		what = "CTA policy zero (copy-engine collectives)";
		need = 28;
	} else if (policy == RM_NCCL_CTA_EFFICIENCY) {
		what = "CTA policy efficiency";
		need = 27;
	}
	if (reg == RM_NCCL_REG_SYMMETRIC && need < 27) {
		what = "symmetric registration (ncclCommWindowRegister)";
		need = 27;
	}
	if (model->minor < need)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0, "%s needs NCCL 2.%d or later, not %s", what, need,
				    rm_nccl_model_version_label(model, label, sizeof(label)));
	model->cta_policy = policy;
	model->registration = reg;
	return RM_OK;
}

rm_coll_query rm_coll_query_make(rm_coll coll, int64_t bytes, int ranks, int nodes)
{
	rm_coll_query q = {
		.coll = coll,
		.bytes = bytes,
		.ranks = ranks,
		.nodes = nodes,
		.algo_mask = RM_NCCL_ALL_ALGOS,
		.proto_mask = RM_NCCL_ALL_PROTOS,
	};
	return q;
}

static int log2i(int n)
{
	int l = 0;
	while (n > 1) {
		n >>= 1;
		l++;
	}
	return l;
}

static int node_bucket(int nodes)
{
	return nodes <= 1 ? 0 : nodes == 2 ? 1 : 2;
}

/* Fabric efficiency of the inter-node ring at this node count (fabric_curve, log-linear). */
static double fabric_efficiency(int nodes)
{
	size_t n = RM_ARRAY_SIZE(fabric_curve);
	double x = log2((double)nodes);
	double y;
	if (nodes <= fabric_curve[0].nodes) {
		y = fabric_curve[0].busbw_GBps;
	} else if (nodes >= fabric_curve[n - 1].nodes) {
		/* beyond the last point, keep the last slope per doubling, never below half */
		double slope = fabric_curve[n - 1].busbw_GBps - fabric_curve[n - 2].busbw_GBps;
		y = fabric_curve[n - 1].busbw_GBps + slope * (x - log2(fabric_curve[n - 1].nodes));
		if (y < fabric_curve[n - 1].busbw_GBps / 2)
			y = fabric_curve[n - 1].busbw_GBps / 2;
	} else {
		size_t i = 1;
		while (fabric_curve[i].nodes < nodes)
			i++;
		double x0 = log2(fabric_curve[i - 1].nodes), x1 = log2(fabric_curve[i].nodes);
		double t = (x - x0) / (x1 - x0);
		y = fabric_curve[i - 1].busbw_GBps + t * (fabric_curve[i].busbw_GBps - fabric_curve[i - 1].busbw_GBps);
	}
	return y / REF_NODE_NIC_GBps;
}

/* NCCL's network posting overhead per step, us (tuning.cc getNetOverhead: x86 Intel 1, x86 AMD 2,
 * anything else 1; NCCL_NET_OVERHEAD unset). */
static double net_overhead_us(rm_nccl_cpu cpu)
{
	return cpu == RM_NCCL_CPU_AMD ? 2.0 : 1.0;
}

/*
 * Topology facts of a query that every pair uses: the ring/tree graph NCCL's search finds
 * (src/graph/search.cc ncclTopoCompute), the channels it launches (connect.cc doubles the ring
 * graph's channels for execution), and the measured fabric cap of the calibrated model.
 *
 * One node: the profile's search result (H100: 12 channels x 30 GB/s = 360 GB/s, launched 24).
 * Across nodes each GPU of the group drives its own NIC (DGX/HGX H100: 8 NICs for 8 GPUs), so the
 * search finds one channel per NIC at the fastest network speed not above the NIC's line rate (a
 * 400 Gb/s NDR port, 50 GB/s: 48 GB/s), and ncclTopoDupChannels doubles the channels and halves
 * their speed unless, on sm_80+, the speed is below 50 GB/s with more than 4 channels:
 * 8 GPUs per node -> 8 x 48 (launched 16, github.com/NVIDIA/nccl/issues/1453);
 * 1 GPU per node -> 1 x 48, duplicated to 2 x 24 (launched 4).
 */
typedef struct topo {
	int n, nodes, ppn;
	int log2_nodes; /* log2i(nodes), the tree depth across nodes */
	int intra_link;
	double graph_busbw; /* ring/tree graph busBW: channels x speed (capped by the fabric, calibrated) */
	double graph_bw;    /* graph speed per channel, GB/s (bwIntra = bwInter for ring and tree) */
	double net_speed;   /* search speed per channel before duplication (NVLS-tree's bwInter) */
	int graph_channels; /* ring/tree graph channels: the "channels" of the LL128 and tree caps */
	int channels;       /* ring/tree channels launched (comm->nChannels) */
	double fabric_lat;  /* switch latency per network step of the path (cluster.topology), us */
} topo;

/* The NIC's line rate as NCCL's topology reads it (port speed / 8): the profiles give the effective
 * rate, 94% of the line rate (docs/reference/hardware.md: 47 of 50 GB/s for NDR, 23.5 of 25 for HDR). */
#define NIC_EFFECTIVE_SHARE 0.94

static void net_graph(const rm_nccl_model *m, topo *t)
{
	double line = m->hw.nic_GBps / NIC_EFFECTIVE_SHARE + 1e-9;
	size_t i = 0;
	while (i + 1 < RM_ARRAY_SIZE(net_search_speeds) && net_search_speeds[i] > line)
		i++;
	double speed = net_search_speeds[i];
	int ch = t->ppn; /* one NIC per GPU of the group on the node */
	t->net_speed = speed;
	/* ncclTopoDupChannels (sm_90): only from 25 GB/s, and not below 50 GB/s with more than 4 */
	if (speed >= 25.0 && !(speed < 50.0 && ch > 4)) {
		int dup = 2 * ch > 16 ? 16 : 2 * ch; /* ring graph maxChannels = MAXCHANNELS / 2 */
		speed /= (dup + ch - 1) / ch;
		ch = dup;
	}
	t->graph_channels = ch;
	t->graph_bw = speed;
	t->graph_busbw = ch * speed;
	t->channels = 2 * ch > 32 ? 32 : 2 * ch; /* doubled for execution, at most MAXCHANNELS */
}

/* NCCL's intra-node search speeds for sm_90, GB/s (src/graph/search.cc sm90SpeedArrayIntra), and
 * its NVLink bandwidth per link on sm_90 (src/graph/topo.h SM90_NVLINK_BW). */
static const double sm90_intra_speeds[] = {60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0};
#define SM90_NVLINK_LINK_GBPS 20.6

/*
 * The ring graph of ppn GPUs of a board whose GPUs are joined NVLink to NVLink (no NVSwitch,
 * cluster.nvlink_mesh): the path to a peer is the pair's own links, nvlink_links / (mesh - 1) of
 * them at 20.6 GB/s each. NCCL's search (src/graph/search.cc ncclTopoCompute) starts at the
 * fastest speed a path carries and packs channels while the links last; a channel crosses one of
 * each GPU's ppn - 1 edges, and the rings of a complete graph (ppn >= 3) use every edge alike, so
 * a speed s gives floor(pair / s) channels per edge x (ppn - 1). It tries slower speeds while
 * they are more than 0.49 of the best found and keeps the most bandwidth; then
 * ncclTopoDupChannels doubles the channels at half the speed from 50 GB/s (the rule net_graph
 * follows). A group that reaches the node's full ring (nccl_ring_busbw_GBps) keeps that graph.
 * E.g. 2 GPUs of a 4-GPU H200 board: 6 links, 123.6 GB/s; 2 channels at 60, duplicated to 4 at
 * 30: busBW 120 GB/s against 360 on NVSwitch; 4 GPUs of it: 6 channels at 60, the full 360.
 */
static bool mesh_ring_graph(const rm_nccl_model *m, int ppn, topo *t)
{
	int mesh = (int)m->hw.nvlink_mesh_gpus;
	if (mesh < 2 || ppn < 2 || m->hw.nvlink_links < 1)
		return false;
	double pair = floor(m->hw.nvlink_links / (mesh - 1)) * SM90_NVLINK_LINK_GBPS;
	size_t i = 0;
	while (i + 1 < RM_ARRAY_SIZE(sm90_intra_speeds) && sm90_intra_speeds[i] > pair)
		i++;
	double best = 0, best_s = sm90_intra_speeds[i];
	int best_ch = 0;
	for (; i < RM_ARRAY_SIZE(sm90_intra_speeds); i++) {
		double s = sm90_intra_speeds[i];
		if (best > 0 && s / best_s <= 0.49)
			break;
		int ch = (int)floor(pair / s + 1e-9) * (ppn - 1);
		if (s * ch > best + 1e-9) {
			best = s * ch;
			best_s = s;
			best_ch = ch;
		}
	}
	if (best_ch < 1 || best >= m->hw.nccl_ring_busbw_GBps)
		return false; /* the node's own ring graph */
	if (best_s >= 25.0 && !(best_s < 50.0 && best_ch > 4)) {
		int dup = 2 * best_ch > 16 ? 16 : 2 * best_ch;
		best_s /= (dup + best_ch - 1) / best_ch;
		best_ch = dup;
	}
	int cap = m->hw.nccl_ring_channels >= 1 ? (int)m->hw.nccl_ring_channels : 32;
	t->graph_channels = best_ch;
	t->graph_bw = best_s;
	t->graph_busbw = best_s * best_ch;
	t->channels = 2 * best_ch > cap ? cap : 2 * best_ch;
	return true;
}

static topo topo_of(const rm_nccl_model *m, const rm_coll_query *q)
{
	topo t = {.n = q->ranks, .nodes = q->nodes, .ppn = q->ranks / q->nodes};
	t.log2_nodes = q->nodes > 1 ? log2i(q->nodes) : 0;
	t.intra_link = m->hw.nvlink_links > 0 ? LINK_NVLINK : LINK_PCI;
	if (t.nodes == 1) {
		t.channels = (int)m->hw.nccl_ring_channels;
		if (t.channels < 1)
			t.channels = 1;
		t.graph_channels = t.channels >= 2 ? t.channels / 2 : 1;
		t.graph_busbw = m->hw.nccl_ring_busbw_GBps;
		t.graph_bw = t.graph_busbw / t.graph_channels;
		t.net_speed = 0;
		mesh_ring_graph(m, t.ppn, &t);
		return t;
	}
	net_graph(m, &t);
	topo mesh = t;
	if (mesh_ring_graph(m, t.ppn, &mesh) && mesh.graph_busbw < t.graph_busbw) {
		/* the hops inside a node ride the pair's links: the slower of the two graphs */
		t.graph_busbw = mesh.graph_busbw;
		t.graph_bw = t.graph_busbw / t.graph_channels;
	}
	if (m->calibrated) {
		double fabric = t.ppn * m->hw.nic_GBps * fabric_efficiency(t.nodes);
		if (fabric < t.graph_busbw)
			t.graph_busbw = fabric;
		if (m->fabric.kind != RM_FABRIC_NONE) {
			/* rings and trees stay on their rails: the path of the group's node count */
			rm_fabric_path path = rm_fabric_path_of(&m->fabric, t.nodes, false);
			t.graph_busbw /= path.oversubscription;
			t.graph_bw /= path.oversubscription;
			t.net_speed /= path.oversubscription;
			t.fabric_lat = path.latency_us;
		}
	}
	return t;
}

/* Channels NCCL launches for this size: it drops channels while each thread would get less than
 * its threshold of bytes (docs/reference/nccl-model.md 'Channels and SMs'). NVLS and PAT keep all. */
static int launched_channels(int full, rm_nccl_algo algo, rm_nccl_proto proto, int ranks, int64_t bytes)
{
	if (algo == RM_NCCL_ALGO_NVLS || algo == RM_NCCL_ALGO_NVLS_TREE || algo == RM_NCCL_ALGO_PAT)
		return full;
	int64_t per_channel = (int64_t)proto_threads[proto] * proto_thread_threshold[proto];
	if (algo == RM_NCCL_ALGO_RING && proto == RM_NCCL_PROTO_LL)
		per_channel *= ranks;
	int64_t nc = per_channel > 0 ? bytes / per_channel : full;
	if (nc < 1)
		nc = 1;
	if (nc > full)
		nc = full;
	return (int)nc;
}

static bool pair_available(const rm_nccl_model *m, const rm_coll_query *q, const topo *t, int a, int p)
{
	/* NCCL turns NVLS off for 2 GPUs or fewer per node (src/transport/nvls.cc ncclNvlsInit:
	 * `gpuCount <= 2` returns with nvlsSupport 0) */
	bool nvls_hw = m->hw.nccl_nvls_bw_GBps > 0 && m->hw.nccl_nvls_channels > 0 && t->ppn > 2 &&
		       m->hw.nvlink_mesh_gpus < 2; /* NVLS is the NVSwitch's: none on a mesh board */
	bool ag_rs = q->coll == RM_COLL_ALL_GATHER || q->coll == RM_COLL_REDUCE_SCATTER;
	switch (a) {
	case A_RING:
		return q->coll <= RM_COLL_ALL_REDUCE;
	case A_TREE:
		return q->coll == RM_COLL_ALL_REDUCE;
	case A_NVLS:
		/* Simple only; across nodes NVLS needs CollNet, which is not modelled */
		return nvls_hw && p == P_SIMPLE && t->nodes == 1 && q->coll <= RM_COLL_ALL_REDUCE;
	case A_NVLS_TREE:
		return nvls_hw && p == P_SIMPLE && t->nodes > 1 && q->coll == RM_COLL_ALL_REDUCE;
	case A_PAT:
		/* tuning.cc ncclPatEnable (2.23+): Simple, one GPU per node (nNodes == nRanks) */
		return m->k->pat_bw > 0 && p == P_SIMPLE && ag_rs && t->nodes > 1 && t->ppn == 1;
	default:
		return false;
	}
}

/* Whether any protocol of algorithm a can run this query (a cheap first filter of pair_available). */
static bool algo_offered(const rm_nccl_model *m, const rm_coll_query *q, const topo *t, int a)
{
	switch (a) {
	case A_RING:
		return true; /* every tuned collective */
	case A_TREE:
		return q->coll == RM_COLL_ALL_REDUCE;
	case A_PAT:
		return t->ppn == 1 && t->nodes > 1;
	default:
		return t->ppn > 2 && m->hw.nccl_nvls_channels > 0 && m->hw.nvlink_mesh_gpus < 2;
	}
}

/* Raw NCCL latency (us) and algorithm bandwidth (GB/s) of an available pair: tuning.cc
 * ncclTopoTuneModel's arithmetic, in its order. */
static void pair_model(const rm_nccl_model *m, const rm_coll_query *q, const topo *t, int a, int p,
		       double *lat_us, double *algbw)
{
	const rm_nccl_constants *k = m->k;
	bool ar = q->coll == RM_COLL_ALL_REDUCE;
	bool multi = t->nodes > 1;
	int nsteps = ar ? 2 * (t->n - 1) : t->n - 1;
	int inter_steps = !multi ? 0 : !ar ? t->nodes - 1 : k->ar_inter_steps_2n ? 2 * t->nodes : 2 * (t->nodes - 1);
	double intra_lat = k->hw_lat[t->intra_link][a][p];
	/* with one GPU per node every step is exposed: the Tree network latency stands for all (2.23+) */
	int net_algo = t->ppn == 1 && k->ppn1_tree_net_lat ? A_TREE : a;
	/* + graphs[a]->latencyInter, the NIC's latency (0 for IB verbs), where the fabric's switch
	 * latency per step goes too (tuning.cc: interLat += graphs[a]->latencyInter) */
	double inter_lat = k->hw_lat[LINK_NET][net_algo][p] + t->fabric_lat;
	int bucket = node_bucket(t->nodes);
	double ll_max = k->ll_max_bw_node;
	if (multi && p == P_LL) {
		int cpu_row = m->cpu == RM_NCCL_CPU_AMD || m->cpu == RM_NCCL_CPU_MIXED ? 1 : 0;
		ll_max = ll_max_bw_net[cpu_row][bucket - 1];
	}
	double gch = t->graph_channels;
	double lat = k->base_lat[a][p], bus = 0, ratio = 1;
	switch (a) {
	case A_RING: {
		/* a network step still has to post: the intra-node step time is at least that */
		double post = multi ? net_overhead_us(m->cpu) * (p == P_SIMPLE ? 3.0 : 1.0) : 0.0;
		double step = fmax(intra_lat, post);
		lat += (double)(nsteps - inter_steps) * step + (double)inter_steps * inter_lat;
		bus = t->graph_busbw;
		if (p == P_LL) {
			bus *= multi ? k->ll_frac_net : ar ? k->ll_frac_ar : k->ll_frac_ag_rs;
			bus = fmin(bus, ll_max);
		} else if (p == P_LL128) {
			bus = fmin(bus * (t->ppn < 2 ? k->ll128_eff_ppn1 : k->ll128_eff), gch * k->ll128_per_ch);
		}
		ratio = (double)t->n / nsteps;
		break;
	}
	case A_TREE:
		lat += 2.0 * ((t->ppn - 1) * intra_lat + t->log2_nodes * inter_lat);
		bus = fmin(t->graph_busbw * k->tree_eff, gch * k->tree_per_ch[bucket]);
		if (p == P_LL)
			bus = fmin(bus / 3.8, ll_max);
		else if (p == P_LL128)
			bus = fmin(bus * (t->nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), gch * k->tree_ll128_per_ch[bucket]);
		ratio = 0.5;
		break;
	case A_PAT:
		/* the tree graph's busBW x 0.75, no busBW->algBW conversion; latency log2(nodes) network
		 * hops at a 3.5th of the network latency plus a linear 2.8 us per rank */
		lat += t->log2_nodes * (inter_lat / 3.5) + t->n * 2.8;
		*lat_us = lat;
		*algbw = t->graph_busbw * (m->minor == 23 ? 0.85 : k->pat_bw);
		return;
	case A_NVLS:
		lat += intra_lat;
		if (ar) {
			/* the profile's fitted NVLS bandwidth (300 GB/s over 16 channels) and the
			 * per-GPU-count curve of docs/reference/hardware.md */
			double nch = m->hw.nccl_nvls_channels;
			double intra = m->hw.nccl_nvls_bw_GBps * k->nvls_eff * (nch - 1) / nch;
			int g = t->ppn < 8 ? t->ppn : 8;
			bus = intra * 2.0 * nvls_gpu_curve[g] / nvls_gpu_curve[8];
			ratio = (double)t->n / nsteps;
		} else {
			/* all-gather / reduce-scatter: heads x 40 x 0.85 x (h-1)/h x (ppn-1)/ppn, taken as
			 * the algorithm bandwidth (tuning.cc converts only ring, and non-AG/RS, busBW) */
			double h = t->ppn;
			bus = h * NVLS_HEAD_GBps * k->nvls_eff * (h - 1) / h * (t->ppn - 1) / t->ppn;
			ratio = 1.0;
		}
		break;
	case A_NVLS_TREE: {
		int style = k->nvls_tree_style == 2 && m->minor < 28 ? 1 : k->nvls_tree_style;
		double h = t->ppn, alg;
		if (style == 2) {
			lat += intra_lat + 2.0 * t->log2_nodes * inter_lat;
			double intra = NVLS_HEAD_GBps * k->nvls_eff * (h - 1) / h * 2.0;
			double inter = t->net_speed * (t->nodes <= 2 ? 2.0 : 1.0);
			double per_ch = fmin(fmin(intra, inter), k->nvls_tree_per_ch[bucket]);
			alg = h * per_ch * t->n / nsteps;
		} else if (style == 1) {
			/* 2.19-2.27: 14 us network hop (the 2.23+ table holds 2.28's 20.9) */
			lat += intra_lat + 2.0 * t->log2_nodes * (14.0 + t->fabric_lat);
			double inter = t->nodes <= 2 ? t->net_speed : t->net_speed / 2.0;
			alg = h * fmin(NVLS_HEAD_GBps, inter) * 5.0 / 6.0;
		} else {
			/* 2.18: the base latency alone plus 2 (nodes - 1) network hops; the graph's
			 * bwIntra on 2 nodes, bwInter beyond, converted by 0.7 n / (2 (n - 1)) nodes */
			lat += 2.0 * (t->nodes - 1) * inter_lat;
			double bw = t->nodes <= 2 ? NVLS_HEAD_GBps : t->net_speed;
			alg = h * bw * 0.70 * t->nodes / (2.0 * (t->nodes - 1));
		}
		if (m->calibrated) {
			/* each GPU moves 1/ppn of the buffer through its own NIC, up and down the tree,
			 * which caps the algBW at ppn NICs of the measured fabric */
			alg = fmin(alg, t->ppn * m->hw.nic_GBps * fabric_efficiency(t->nodes) /
					       (m->fabric.kind != RM_FABRIC_NONE
							? rm_fabric_path_of(&m->fabric, t->nodes, false).oversubscription
							: 1.0));
		}
		*lat_us = lat;
		*algbw = alg;
		return;
	}
	default:
		break;
	}
	*lat_us = lat;
	*algbw = bus * ratio;
}

static const rm_nccl_override *find_override(const rm_nccl_model *m, const rm_coll_query *q, int a, int p)
{
	for (int i = 0; i < m->n_overrides; i++) {
		const rm_nccl_override *o = &m->overrides[i];
		/* a fit applies to the topology it was measured on, never to another group */
		if (o->coll == q->coll && (int)o->algo == a && (int)o->proto == p && o->ranks == q->ranks &&
		    o->nodes == q->nodes && o->ranks_per_node * q->nodes == q->ranks &&
		    q->bytes >= o->min_bytes && q->bytes <= o->max_bytes)
			return o;
	}
	return NULL;
}

static void finish_estimate(const rm_coll_query *q, double lat, double algbw, rm_coll_estimate *e)
{
	e->latency_us = lat;
	e->time_us = lat + (algbw > 0 ? (double)q->bytes / (algbw * 1e3) : 0.0);
	e->algbw_GBps = e->time_us > 0 ? (double)q->bytes / (e->time_us * 1e3) : 0.0;
	e->busbw_GBps = e->algbw_GBps * rm_coll_busbw_factor(q->coll, q->ranks);
}

/* tuning.cc ncclTopoGetAlgoTime's size corrections: the tree all-reduce bandwidth by
 * treeCorrectionFactor, and the ring Simple all-reduce latency x 1.4 across nodes once every
 * channel of every rank has 64 B or more (the ring's plateau; x 1.9 before sm_80). */
static void nccl_size_corrections(const rm_coll_query *q, const topo *t, int a, int p, double *lat,
				  double *algbw)
{
	if (q->coll != RM_COLL_ALL_REDUCE)
		return;
	if (a == A_TREE && q->bytes >= 64) {
		int log_size = log2i((int)(q->bytes >> 6 > INT32_MAX ? INT32_MAX : q->bytes >> 6));
		if (log_size < 23)
			*algbw *= tree_correction[p][log_size];
	}
	if (a == A_RING && p == P_SIMPLE && t->nodes > 1 && q->bytes / ((int64_t)t->channels * t->n) >= 64)
		*lat *= 1.4;
}

/* rm_nccl_pair_time on a topology already derived (rm_nccl_estimate derives it once per query). */
static double pair_time_on(const rm_nccl_model *m, const rm_coll_query *q, const topo *tp, rm_nccl_algo algo,
			   rm_nccl_proto proto, rm_coll_estimate *est)
{
	rm_coll_estimate e = {.algo = algo, .proto = proto, .efficiency = 1.0};
	double lat, algbw;
	pair_model(m, q, tp, algo, proto, &lat, &algbw);
	nccl_size_corrections(q, tp, algo, proto, &lat, &algbw);
	const rm_nccl_override *ov = m->calibrated ? find_override(m, q, algo, proto) : NULL;
	if (ov) {
		lat = ov->latency_us;
		algbw = ov->algbw_GBps;
		e.overridden = true;
	} else if (m->calibrated) {
		e.efficiency = size_efficiency(q->coll, algo, (double)q->bytes);
		algbw *= e.efficiency;
	}
	if (algbw <= 0)
		return -1.0;
	int full = algo == RM_NCCL_ALGO_NVLS || algo == RM_NCCL_ALGO_NVLS_TREE
			   ? (int)m->hw.nccl_nvls_channels
			   : tp->channels;
	e.channels = launched_channels(full, algo, proto, q->ranks, q->bytes);
	finish_estimate(q, lat, algbw, &e);
	if (est)
		*est = e;
	return e.time_us;
}

double rm_nccl_pair_time(const rm_nccl_model *m, const rm_coll_query *q, rm_nccl_algo algo,
			 rm_nccl_proto proto, rm_coll_estimate *est)
{
	topo t = topo_of(m, q);
	if ((int)algo >= NA || (int)proto >= NP || !pair_available(m, q, &t, algo, proto))
		return -1.0;
	return pair_time_on(m, q, &t, algo, proto, est);
}

/* All-to-all and send/recv run as point-to-point transfers (NCCL's p2p path, Simple). */
static void p2p_estimate(const rm_nccl_model *m, const rm_coll_query *q, rm_coll_estimate *e)
{
	topo t = topo_of(m, q);
	const rm_nccl_constants *k = m->k;
	double lat = k->base_lat[A_RING][P_SIMPLE] + k->hw_lat[t.intra_link][A_RING][P_SIMPLE];
	double nic = m->hw.nic_GBps * fabric_efficiency(t.nodes);
	double time_bw;
	/* the fabric (calibrated model): the rail-local path, and for a peer on another rail without
	 * PXN the path between rails (rail-optimised fabrics join rails above the leaves) */
	bool fab = m->calibrated && m->fabric.kind != RM_FABRIC_NONE && t.nodes > 1;
	bool cross = fab && m->fabric.kind == RM_FABRIC_RAIL_OPTIMIZED && !m->fabric.pxn && t.ppn > 1 &&
		     q->coll == RM_COLL_ALL_TO_ALL;
	rm_fabric_path rail = fab ? rm_fabric_path_of(&m->fabric, t.nodes, false) : (rm_fabric_path){0, 1.0, 0.0};
	rm_fabric_path other = cross ? rm_fabric_path_of(&m->fabric, t.nodes, true) : rail;
	if (t.nodes > 1)
		lat += k->hw_lat[LINK_NET][A_RING][P_SIMPLE] + 3.0 * net_overhead_us(m->cpu) + other.latency_us;
	if (q->coll == RM_COLL_SEND_RECV) {
		time_bw = (double)q->bytes / ((t.nodes > 1 ? nic / rail.oversubscription : m->hw.p2p_GBps) * 1e3);
	} else {
		/* each rank sends bytes/n to every peer: (ppn-1) peers over NVLink, the rest over its NIC */
		double per_peer = (double)q->bytes / t.n;
		double intra = per_peer * (t.ppn - 1) / (m->hw.nccl_ring_busbw_GBps * 1e3);
		double inter = t.nodes > 1 ? per_peer * (t.n - t.ppn) / (nic / rail.oversubscription * 1e3) : 0.0;
		if (cross) {
			/* of each remote node's ppn peers one shares this GPU's rail; the other
			 * (ppn-1)/ppn of the bytes climb to the tier joining the rails, whose uplink
			 * share is nic / its oversubscription: the NIC and that uplink bound the time */
			double up = per_peer * (t.n - t.ppn) * (t.ppn - 1) / t.ppn /
				    (nic / other.oversubscription * 1e3);
			inter = fmax(per_peer * (t.n - t.ppn) / (nic * 1e3), up);
			if (rail.oversubscription > 1.0)
				inter = fmax(inter, per_peer * (t.n - t.ppn) / t.ppn / (nic / rail.oversubscription * 1e3));
		}
		time_bw = fmax(intra, inter);
	}
	*e = (rm_coll_estimate){.algo = RM_NCCL_ALGO_P2P, .proto = RM_NCCL_PROTO_SIMPLE,
				.efficiency = 1.0, .channels = t.channels};
	e->latency_us = lat;
	e->time_us = lat + time_bw;
	e->algbw_GBps = e->time_us > 0 ? (double)q->bytes / (e->time_us * 1e3) : 0.0;
	e->busbw_GBps = e->algbw_GBps * rm_coll_busbw_factor(q->coll, q->ranks);
}

/* ---- symmetric-memory kernels and copy-engine collectives (2.27 / 2.28) ---- */

static const char *const symk_names[RM_NCCL_SYMK_COUNT] = {
	"",
	"AllReduce_AGxLL_R",
	"AllReduce_AGxLLMC_R",
	"AllReduce_RSxLD_AGxST",
	"AllReduce_RSxLDMC_AGxSTMC",
	"AllGather_LL",
	"AllGather_LLMC",
	"AllGather_ST",
	"AllGather_STMC",
	"ReduceScatter_LL",
	"ReduceScatter_LD",
	"ReduceScatter_LDMC",
};

const char *rm_nccl_symk_name(rm_nccl_symk kernel)
{
	return (unsigned)kernel < RM_NCCL_SYMK_COUNT ? symk_names[kernel] : "unknown";
}

/*
 * NVIDIA/nccl src/sym_kernels.cc at v2.28.9-1 (src/symmetric.cc at v2.27.3-1, the same model),
 * sm_90 and older (every remora profile): ncclSymkMaxBlocks 64 CTAs of 512 threads; the multicast
 * kernels at most ceil(16 / nRanks) CTAs; base latency 4.5 us (LL kernels) or 7.8 us; 65 GiB/s per
 * CTA for all-reduce, 44 for the others; peak 480 GiB/s for AllReduce_RSxLDMC_AGxSTMC, 320 for the
 * others; LL kernels count 9x the bytes ("2X the bytes, plus some processing, plus no unrolling").
 */
enum { SYMK_MAX_BLOCKS = 64, SYMK_LL_BUS_FACTOR = 9 };
#define SYMK_GiBps_TO_B_PER_US ((double)(1 << 30) / 1.0e6)
#define SYMK_SM_PENALTY 0.025f /* ncclSymkPickKernel: 2.5% more time per CTA held */

/* sym_kernels.cc softmin / softplus: smooth min(x, ceiling) and max(0, x). */
static double symk_softmin(double x, double ceiling, double softness)
{
	return ceiling - softness * log1p((exp(ceiling / softness) - 1.0) * exp(-x / softness));
}

static double symk_softplus(double x, double softness)
{
	double z = x / softness;
	return z >= 100.0 ? x : softness * log1p(exp(z));
}

/* sym_kernels.cc model(): time in us of bus_bytes on n_sms CTAs. */
static double symk_time(double bus_bytes, double base_lat, int n_sms, double sm_bw, double mult, double peak)
{
	double bw = symk_softmin(n_sms * sm_bw * mult, peak, sm_bw);
	return base_lat + symk_softplus(bus_bytes / bw - 1.0, 1.0);
}

static bool symk_is_ll(rm_nccl_symk k)
{
	return k == RM_NCCL_SYMK_AR_AGxLL_R || k == RM_NCCL_SYMK_AR_AGxLLMC_R || k == RM_NCCL_SYMK_AG_LL ||
	       k == RM_NCCL_SYMK_AG_LLMC || k == RM_NCCL_SYMK_RS_LL;
}

static bool symk_is_mc(rm_nccl_symk k)
{
	return k == RM_NCCL_SYMK_AR_AGxLLMC_R || k == RM_NCCL_SYMK_AR_RSxLDMC_AGxSTMC || k == RM_NCCL_SYMK_AG_LLMC ||
	       k == RM_NCCL_SYMK_AG_STMC || k == RM_NCCL_SYMK_RS_LDMC;
}

/* sym_kernels.cc queryModel(): the time at the most CTAs, then the fewest CTAs within 2.5% of it
 * (config.minCTAs 1, maxCTAs 64 by default; NCCL_SYM_CTAS unset). n_bytes: the per-rank count's
 * bytes for all-gather / reduce-scatter, the buffer for all-reduce. */
static void symk_query(rm_nccl_symk k, int n, double n_bytes, float *time_us, int *blocks)
{
	int max_blocks = SYMK_MAX_BLOCKS;
	double bus = n_bytes, mult = 1.0;
	switch (k) {
	case RM_NCCL_SYMK_AR_AGxLL_R:
	case RM_NCCL_SYMK_AG_LL:
	case RM_NCCL_SYMK_RS_LL:
		bus = (double)n * n_bytes * SYMK_LL_BUS_FACTOR;
		break;
	case RM_NCCL_SYMK_AR_AGxLLMC_R:
	case RM_NCCL_SYMK_AG_LLMC:
		bus = (double)n * n_bytes * SYMK_LL_BUS_FACTOR;
		mult = 1.1; /* "To beat non-MC LL" */
		break;
	case RM_NCCL_SYMK_AR_RSxLD_AGxST:
		/* size_t arithmetic: 2 nBytes (n-1) / n, truncated */
		bus = (double)(((int64_t)n_bytes * 2 * (n - 1)) / n);
		break;
	case RM_NCCL_SYMK_AR_RSxLDMC_AGxSTMC:
		bus = (double)((int64_t)n_bytes / n) + n_bytes;
		mult = n;
		max_blocks = (16 + n - 1) / n;
		break;
	case RM_NCCL_SYMK_AG_ST:
	case RM_NCCL_SYMK_RS_LD:
		bus = (double)(n - 1) * n_bytes;
		break;
	case RM_NCCL_SYMK_AG_STMC:
	case RM_NCCL_SYMK_RS_LDMC:
		bus = (double)(n - 1) * n_bytes; /* NCCL: "Wrong ... but we want to beat non-MC" */
		mult = 0.55 * n;
		max_blocks = (16 + n - 1) / n;
		break;
	default:
		break;
	}
	bool ar = k >= RM_NCCL_SYMK_AR_AGxLL_R && k <= RM_NCCL_SYMK_AR_RSxLDMC_AGxSTMC;
	double base = symk_is_ll(k) ? 4.5 : 7.8;
	double sm_bw = (ar ? 65.0 : 44.0) * SYMK_GiBps_TO_B_PER_US;
	double peak = (k == RM_NCCL_SYMK_AR_RSxLDMC_AGxSTMC ? 480.0 : 320.0) * SYMK_GiBps_TO_B_PER_US;
	double best = symk_time(bus, base, max_blocks, sm_bw, mult, peak);
	*blocks = max_blocks;
	*time_us = (float)best;
	for (int b = 1; b < max_blocks; b++) {
		double t = symk_time(bus, base, b, sm_bw, mult, peak);
		if (t <= 1.025 * (float)best) {
			*blocks = b;
			*time_us = (float)t;
			break;
		}
	}
}

static bool nvls_supported(const rm_nccl_model *m, int ppn)
{
	/* src/transport/nvls.cc ncclNvlsInit: NVLS needs NVSwitch SHARP and more than 2 GPUs */
	return m->hw.nccl_nvls_bw_GBps > 0 && m->hw.nccl_nvls_channels > 0 && ppn > 2;
}

/*
 * ncclSymkPickKernel: among the kernels of the collective that the communicator can run
 * (multicast ones need NVLS; LL ones under 2 GiB of bus bytes; nothing at 64 GiB or more), the
 * lowest time x (1 + 2.5% per CTA). Symmetric kernels run inside one node only (ncclSymkMask:
 * nNodes > 1 masks every one). False when none applies.
 */
static bool symk_estimate(const rm_nccl_model *m, const rm_coll_query *q, rm_coll_estimate *e)
{
	static const rm_nccl_symk ar[] = {RM_NCCL_SYMK_AR_AGxLL_R, RM_NCCL_SYMK_AR_AGxLLMC_R,
					  RM_NCCL_SYMK_AR_RSxLD_AGxST, RM_NCCL_SYMK_AR_RSxLDMC_AGxSTMC};
	static const rm_nccl_symk ag[] = {RM_NCCL_SYMK_AG_LL, RM_NCCL_SYMK_AG_LLMC, RM_NCCL_SYMK_AG_ST,
					  RM_NCCL_SYMK_AG_STMC};
	static const rm_nccl_symk rs[] = {RM_NCCL_SYMK_RS_LL, RM_NCCL_SYMK_RS_LD, RM_NCCL_SYMK_RS_LDMC};
	const rm_nccl_symk *list;
	size_t count;
	if (m->registration != RM_NCCL_REG_SYMMETRIC || m->minor < 27 || q->nodes != 1)
		return false;
	switch (q->coll) {
	case RM_COLL_ALL_REDUCE:
		list = ar, count = RM_ARRAY_SIZE(ar);
		break;
	case RM_COLL_ALL_GATHER:
		list = ag, count = RM_ARRAY_SIZE(ag);
		break;
	case RM_COLL_REDUCE_SCATTER:
		list = rs, count = RM_ARRAY_SIZE(rs);
		break;
	default:
		return false;
	}
	int n = q->ranks;
	bool ar_coll = q->coll == RM_COLL_ALL_REDUCE;
	/* NCCL's count: per rank for all-gather (sendcount) and reduce-scatter (recvcount); from 2.28
	 * aligned up to whole 1 KiB cells (NCCL_SYM_KERNEL_CELL_SIZE, symmetric_sched.cc) */
	int64_t n_bytes = ar_coll ? q->bytes : q->bytes / n;
	if (m->minor >= 28)
		n_bytes = (n_bytes + 1023) / 1024 * 1024;
	int64_t bus_bytes = (ar_coll ? 1 : n) * n_bytes;
	if (bus_bytes >= 32 * (INT64_C(2) << 30))
		return false;
	bool nvls = nvls_supported(m, n);
	rm_nccl_symk best = RM_NCCL_SYMK_NONE;
	float best_time = 1.e30f;
	int best_blocks = 999;
	for (size_t i = 0; i < count; i++) {
		rm_nccl_symk k = list[i];
		if ((symk_is_mc(k) && !nvls) || (symk_is_ll(k) && bus_bytes >= (INT64_C(2) << 30)))
			continue;
		float t;
		int b;
		symk_query(k, n, (double)n_bytes, &t, &b);
		if (t * (1.0f + SYMK_SM_PENALTY * b) < best_time * (1.0f + SYMK_SM_PENALTY * best_blocks)) {
			best = k;
			best_time = t;
			best_blocks = b;
		}
	}
	if (best == RM_NCCL_SYMK_NONE)
		return false;
	*e = (rm_coll_estimate){.algo = RM_NCCL_ALGO_SYMMETRIC, .proto = RM_NCCL_PROTO_SIMPLE, .efficiency = 1.0,
				.channels = best_blocks, .symk = best};
	e->time_us = best_time;
	e->latency_us = symk_is_ll(best) ? 4.5 : 7.8;
	e->algbw_GBps = e->time_us > 0 ? (double)q->bytes / (e->time_us * 1e3) : 0.0;
	e->busbw_GBps = e->algbw_GBps * rm_coll_busbw_factor(q->coll, q->ranks);
	return true;
}

/*
 * Stream operations of one copy-engine collective (src/ce_coll.cc ncclCeAllGather /
 * ncclCeAlltoAll at v2.28.9-1): a ready barrier (a 4-byte flag write to the multicast window and
 * one cuStreamBatchMemOp waiting on the n-1 peers' flags), one cudaMemcpyBatchAsync of the
 * pushes to every peer, and a completion barrier of the same two operations.
 */
enum { CE_STREAM_OPS = 5, CE_FLAG_CROSSINGS = 2 };

/*
 * NCCL's copy-engine all-gather / all-to-all (ncclCeImplemented: AllGather, AlltoAll, also
 * Scatter/Gather; CUDA driver 12.5+), taken by enqueue.cc taskAppend when the communicator is on
 * one node, both buffers are in symmetric windows and the policy is ZERO. NCCL has no cost model
 * for it; remora's: CE_STREAM_OPS launches (hw.launch_us each) and CE_FLAG_CROSSINGS NVLink flag
 * hops (tuning.cc hwLat NVLink ring LL, 0.6 us), then each GPU pushes (n-1)/n of the buffer to its
 * peers at the measured copy-engine bandwidth (RM_CE_D2D_GBPS_H100, scaled by the profile's NVLink
 * over H100's 450 GB/s; P2P copy rate without NVLink); calibrated, that rate times the measured
 * all-gather efficiency eff_ce_ag (0.40 at 8 MiB to 1.0 at 512 MiB). Holds no SM. Up to 8 pushes per batch:
 * NCCL's extra barrier every 8 copies of 512 MiB or more (CE_COLL_INTRA_BATCH_SYNC_*) applies only
 * to groups of more than 8 and is not modelled.
 */
static bool ce_estimate(const rm_nccl_model *m, const rm_coll_query *q, rm_coll_estimate *e)
{
	if (m->cta_policy != RM_NCCL_CTA_ZERO || m->registration != RM_NCCL_REG_SYMMETRIC || m->minor < 28 ||
	    q->nodes != 1 || (q->coll != RM_COLL_ALL_GATHER && q->coll != RM_COLL_ALL_TO_ALL))
		return false;
	double n = q->ranks;
	double bw_GBps = m->hw.nvlink_GBps > 0 ? RM_CE_D2D_GBPS_H100 * m->hw.nvlink_GBps / 450.0 : m->hw.p2p_GBps;
	if (m->hw.nvlink_mesh_gpus >= 2 && m->hw.nvlink_links > 0 && n > 1) {
		/* on a mesh board each peer's share comes over the pair's links only */
		double share = (n - 1.0) * floor(m->hw.nvlink_links / (m->hw.nvlink_mesh_gpus - 1)) / m->hw.nvlink_links;
		bw_GBps *= share < 1.0 ? share : 1.0;
	}
	double lat = CE_STREAM_OPS * m->hw.launch_us + CE_FLAG_CROSSINGS * m->k->hw_lat[LINK_NVLINK][A_RING][P_LL];
	/* calibrated: the measured all-gather curve (eff_ce_ag); all-to-all has no measurement */
	double eff = m->calibrated && q->coll == RM_COLL_ALL_GATHER
			     ? interp_eff(eff_ce_ag, RM_ARRAY_SIZE(eff_ce_ag), (double)q->bytes)
			     : 1.0;
	*e = (rm_coll_estimate){.algo = RM_NCCL_ALGO_CE, .proto = RM_NCCL_PROTO_SIMPLE, .efficiency = eff};
	e->latency_us = lat;
	e->time_us = lat + (bw_GBps > 0 ? (n - 1.0) / n * (double)q->bytes / (bw_GBps * eff * 1e3) : 0.0);
	e->algbw_GBps = e->time_us > 0 ? (double)q->bytes / (e->time_us * 1e3) : 0.0;
	e->busbw_GBps = e->algbw_GBps * rm_coll_busbw_factor(q->coll, q->ranks);
	return true;
}

/*
 * enqueue.cc ncclGetAlgoInfo under NCCL_CTA_POLICY_EFFICIENCY (2.27+, NCCL_ALGO / NCCL_PROTO
 * unset, registered buffers): an all-gather or reduce-scatter on one NVLS node switches to NVLS
 * Simple on ncclNvlsRegResourcesQuery's CTAs, ceil(4 x 8 / heads) for all-gather and
 * ceil(5 x 8 / heads) for reduce-scatter on sm_90 (nvls.cc; 4 and 5 with 8 heads), when that is
 * no more than the tuned choice's channels. Its time is NCCL's NVLS estimate (NCCL does not
 * re-estimate). Across nodes it needs CollNet, which is not modelled.
 */
static void efficiency_nvls(const rm_nccl_model *m, const rm_coll_query *q, const topo *t, rm_coll_estimate *best)
{
	if (m->cta_policy != RM_NCCL_CTA_EFFICIENCY || m->registration == RM_NCCL_REG_NONE || m->minor < 27 ||
	    q->algo_mask != RM_NCCL_ALL_ALGOS || q->proto_mask != RM_NCCL_ALL_PROTOS || t->nodes != 1 ||
	    (q->coll != RM_COLL_ALL_GATHER && q->coll != RM_COLL_REDUCE_SCATTER) || !nvls_supported(m, t->ppn))
		return;
	int heads = t->ppn; /* one NVLS head per GPU of the node (docs/reference/nccl-model.md) */
	int factor = q->coll == RM_COLL_REDUCE_SCATTER ? 5 * 8 : 4 * 8;
	int rec = (factor + heads - 1) / heads;
	if (rec > best->channels)
		return;
	rm_coll_estimate e;
	if (pair_time_on(m, q, t, RM_NCCL_ALGO_NVLS, RM_NCCL_PROTO_SIMPLE, &e) < 0)
		return;
	e.channels = rec;
	*best = e;
}

rm_status rm_nccl_estimate(const rm_nccl_model *m, const rm_coll_query *q, rm_coll_estimate *out,
			   rm_error *err)
{
	if ((unsigned)q->coll >= RM_COLL_COUNT)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0, "unknown collective");
	if (q->bytes < 0)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0, "bytes must be >= 0, got %lld",
				    (long long)q->bytes);
	if (q->ranks < 1 || q->nodes < 1)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0,
				    "a group needs at least 1 GPU on 1 node (got %d GPUs, %d nodes)", q->ranks,
				    q->nodes);
	if (q->ranks % q->nodes != 0)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0,
				    "%d GPUs do not spread evenly over %d nodes", q->ranks, q->nodes);
	int ppn = q->ranks / q->nodes;
	if (ppn > (int)m->hw.gpus_per_node)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0,
				    "%d GPUs per node, but a %s node has %d (use --nodes)", ppn, m->hw.name,
				    (int)m->hw.gpus_per_node);
	if (q->coll == RM_COLL_SEND_RECV && q->ranks != 2)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0,
				    "send-recv is between 2 GPUs (got %d)", q->ranks);
	if (q->ranks == 1) {
		/* A group of one: NCCL copies the buffer device to device (read + write through HBM). */
		*out = (rm_coll_estimate){.algo = RM_NCCL_ALGO_LOCAL, .proto = RM_NCCL_PROTO_SIMPLE,
					  .efficiency = 1.0};
		out->time_us = 2.0 * (double)q->bytes / (m->hw.hbm_achievable_GBps * 1e3);
		out->algbw_GBps = out->time_us > 0 ? (double)q->bytes / (out->time_us * 1e3) : 0.0;
		return RM_OK;
	}
	/* NCCL 2.28 enqueue: copy engines (taskAppend), then symmetric kernels (ncclPrepareTasks), both
	 * before the tuner */
	if (ce_estimate(m, q, out) || symk_estimate(m, q, out))
		return RM_OK;
	if (q->coll == RM_COLL_ALL_TO_ALL || q->coll == RM_COLL_SEND_RECV) {
		p2p_estimate(m, q, out);
		return RM_OK;
	}
	bool found = false;
	rm_coll_estimate best = {0};
	const topo t = topo_of(m, q);
	for (int a = 0; a < NA; a++) {
		if (!(q->algo_mask & (1u << a)) || !algo_offered(m, q, &t, a))
			continue;
		for (int p = 0; p < NP; p++) {
			if (!(q->proto_mask & (1u << p)) || !pair_available(m, q, &t, a, p))
				continue;
			rm_coll_estimate e;
			double time = pair_time_on(m, q, &t, (rm_nccl_algo)a, (rm_nccl_proto)p, &e);
			/* ties keep the first pair in NCCL's (algorithm, protocol) order */
			if (time >= 0 && (!found || time < best.time_us)) {
				best = e;
				found = true;
			}
		}
	}
	if (!found) {
		char algos[64] = "", protos[64] = "";
		for (int a = 0; a < NA; a++)
			if (q->algo_mask & (1u << a)) {
				size_t n = strlen(algos);
				snprintf(algos + n, sizeof(algos) - n, "%s%s", n ? "," : "", algo_names[a]);
			}
		for (int p = 0; p < NP; p++)
			if (q->proto_mask & (1u << p)) {
				size_t n = strlen(protos);
				snprintf(protos + n, sizeof(protos) - n, "%s%s", n ? "," : "", proto_names[p]);
			}
		return rm_error_set(err, RM_UNSUPPORTED, NULL, 0, 0,
				    "no enabled algorithm/protocol runs %s on %d GPUs over %d node(s) of %s "
				    "(algorithms %s, protocols %s; tree is all-reduce only, NVLS needs Simple "
				    "and NVSwitch, NVLSTree needs several nodes, PAT needs Simple and one GPU "
				    "per node)",
				    rm_coll_name(q->coll), q->ranks, q->nodes, m->hw.name,
				    algos[0] ? algos : "none", protos[0] ? protos : "none");
	}
	efficiency_nvls(m, q, &t, &best);
	*out = best;
	return RM_OK;
}

/* ---- fabric (cluster.topology) ---- */

static const char *const fabric_names[RM_FABRIC_KIND_COUNT] = {"none", "rail_optimized", "fat_tree"};

const char *rm_fabric_kind_name(rm_fabric_kind kind)
{
	return (unsigned)kind < RM_FABRIC_KIND_COUNT ? fabric_names[kind] : "unknown";
}

bool rm_fabric_kind_parse(const char *name, rm_fabric_kind *out)
{
	for (int i = 0; i < RM_FABRIC_KIND_COUNT; i++)
		if (strcasecmp(name, fabric_names[i]) == 0) {
			*out = (rm_fabric_kind)i;
			return true;
		}
	return false;
}

rm_status rm_fabric_validate(const rm_fabric *f, rm_error *err)
{
	if (f->kind == RM_FABRIC_NONE)
		return RM_OK;
	if ((unsigned)f->kind >= RM_FABRIC_KIND_COUNT)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0, "kind: %d is not a fabric", (int)f->kind);
	if (f->n_tiers < 1 || f->n_tiers > RM_FABRIC_MAX_TIERS)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0, "tiers: %d tiers, expected 1 to %d", f->n_tiers,
				    RM_FABRIC_MAX_TIERS);
	if (f->kind == RM_FABRIC_RAIL_OPTIMIZED && f->n_tiers < 2)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0,
				    "tiers: a rail_optimized fabric has one leaf per rail and needs a tier above "
				    "them that joins the rails (the spine of a DGX SuperPOD)");
	for (int k = 0; k < f->n_tiers; k++) {
		const rm_fabric_tier *t = &f->tiers[k];
		if (t->nodes < 1)
			return rm_error_set(err, RM_INVALID, NULL, 0, 0, "tiers[%d].nodes: %d, expected at least 1", k,
					    t->nodes);
		if (k > 0 && (t->nodes <= f->tiers[k - 1].nodes || t->nodes % f->tiers[k - 1].nodes != 0))
			return rm_error_set(err, RM_INVALID, NULL, 0, 0,
					    "tiers[%d].nodes: %d, expected a multiple of tier %d's %d greater than it "
					    "(a switch of a higher tier reaches whole switches of the tier below)",
					    k, t->nodes, k - 1, f->tiers[k - 1].nodes);
		if (k == 0 && t->oversubscription != 1.0)
			return rm_error_set(err, RM_INVALID, NULL, 0, 0,
					    "tiers[0].oversubscription: %g, but the leaf is where the NICs plug in: a "
					    "taper belongs to the tier above it (its uplink bandwidth from the tier "
					    "below over that tier's downlink bandwidth)",
					    t->oversubscription);
		if (!(t->oversubscription >= 1.0 && t->oversubscription <= RM_FABRIC_MAX_TAPER))
			return rm_error_set(err, RM_INVALID, NULL, 0, 0,
					    "tiers[%d].oversubscription: %g, expected a ratio from 1 (non-blocking) to %g",
					    k, t->oversubscription, RM_FABRIC_MAX_TAPER);
		if (!(t->hop_latency_us >= 0.0 && t->hop_latency_us <= RM_FABRIC_MAX_HOP_US))
			return rm_error_set(err, RM_INVALID, NULL, 0, 0,
					    "tiers[%d].latency_us: %g, expected 0 to %g us a hop", k, t->hop_latency_us,
					    RM_FABRIC_MAX_HOP_US);
	}
	return RM_OK;
}

rm_fabric_path rm_fabric_path_of(const rm_fabric *f, int nodes, bool cross_rail)
{
	rm_fabric_path p = {.tier = 0, .oversubscription = 1.0, .latency_us = 0.0};
	if (f->kind == RM_FABRIC_NONE || f->n_tiers < 1 || nodes <= 1)
		return p;
	int k = 0;
	while (k + 1 < f->n_tiers && f->tiers[k].nodes < nodes)
		k++;
	if (cross_rail && f->kind == RM_FABRIC_RAIL_OPTIMIZED && k < 1 && f->n_tiers > 1)
		k = 1;
	p.tier = k;
	p.latency_us = f->tiers[k].hop_latency_us;
	for (int j = 0; j < k; j++) {
		p.oversubscription *= f->tiers[j + 1].oversubscription;
		p.latency_us += 2.0 * f->tiers[j].hop_latency_us;
	}
	return p;
}

bool rm_nccl_net_load(const rm_nccl_model *m, const rm_coll_query *q, double time_us, rm_net_load *out)
{
	memset(out, 0, sizeof(*out));
	if (m->fabric.kind == RM_FABRIC_NONE || q->nodes <= 1 || q->ranks <= 1 || q->bytes <= 0 || !(time_us > 0) ||
	    q->ranks % q->nodes != 0)
		return false;
	int ppn = q->ranks / q->nodes;
	double n = q->ranks, bytes = (double)q->bytes, nic_bytes;
	bool cross = false;
	if (q->coll == RM_COLL_SEND_RECV) {
		nic_bytes = bytes;
	} else if (q->coll == RM_COLL_ALL_TO_ALL) {
		nic_bytes = bytes * (n - ppn) / n;
		cross = m->fabric.kind == RM_FABRIC_RAIL_OPTIMIZED && !m->fabric.pxn && ppn > 1;
	} else {
		nic_bytes = bytes * rm_coll_busbw_factor(q->coll, q->ranks) / ppn;
	}
	double cap_GBps = m->hw.nic_GBps * (m->calibrated ? fabric_efficiency(q->nodes) : 1.0);
	if (!(cap_GBps > 0))
		return false;
	double rate_GBps = nic_bytes / (time_us * 1e3);
	double nic = rate_GBps / cap_GBps;
	out->share[0] = fmin(1.0, fmax(1e-6, nic));
	rm_fabric_path path = rm_fabric_path_of(&m->fabric, q->nodes, cross);
	/* cross-rail all-to-all: (ppn-1)/ppn of its remote bytes climb (rm_nccl_estimate's p2p) */
	double climbing = cross ? (double)(ppn - 1) / ppn : 1.0;
	double over = 1.0;
	for (int j = 0; j < path.tier && j + 1 < RM_NET_LEVELS; j++) {
		over *= m->fabric.tiers[j + 1].oversubscription;
		out->share[1 + j] = fmin(1.0, fmax(1e-6, nic * climbing * over));
	}
	return true;
}
