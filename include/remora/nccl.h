/*
 * remora/nccl.h — collective cost model faithful to NCCL (models/nccl.c).
 *
 * What it does: predicts the time of an NCCL collective the way NCCL's own tuner does
 * (docs/reference/nccl-model.md, from NVIDIA/nccl src/graph/tuning.cc): for every enabled
 * (algorithm, protocol) pair, time = latency + bytes / algorithm bandwidth, and NCCL runs the
 * fastest. Algorithms: ring, tree (all-reduce), NVLS and NVLS-tree (NVLink SHARP on
 * third-generation NVSwitch) and PAT (all-gather / reduce-scatter with one GPU per node, 2.23+);
 * protocols LL, LL128, Simple. Intra-node links are NVLink/NVSwitch, inter-node links the NICs.
 * Across nodes the raw model is tuning.cc's own arithmetic on the topology graph NCCL's search
 * finds for the group's shape (docs/collectives.md 'Across nodes'); the calibrated model also
 * caps the ring, tree and PAT bandwidth by the measured fabric curve of docs/reference/hardware.md
 * (reduce-scatter busBW by node count), which NCCL's estimate overstates.
 *
 * NCCL 2.27/2.28's symmetric-memory kernels and copy-engine collectives, which bypass the tuner
 * when buffers sit in symmetric windows, follow rm_nccl_model.registration and .cta_policy
 * (docs/collectives.md 'Symmetric kernels and copy engines').
 *
 * Two flavours: the raw NCCL model (what NCCL itself believes), and the calibrated model, which
 * multiplies the bandwidth term by a measured efficiency per message size (the pipeline-fill
 * ramp NCCL's model ignores; fitted from data/reference/nccl-h100-8gpu.csv, like NCCL's own
 * treeCorrectionFactor) and applies fitted overrides from the calibration database.
 *
 * Units: bytes as nccl-tests counts them (the full buffer: all-gather output, reduce-scatter
 * input, all-reduce buffer, all-to-all send buffer), time in microseconds, bandwidths in GB/s
 * (10^9 B/s). algBW = bytes / time; busBW = algBW * (n-1)/n for all-gather, reduce-scatter and
 * all-to-all, * 2(n-1)/n for all-reduce, * 1 for send/recv (nccl-tests doc/PERFORMANCE.md).
 */
#ifndef REMORA_NCCL_H
#define REMORA_NCCL_H

#include <stdbool.h>
#include <stdint.h>

#include "remora/common.h"
#include "remora/hw.h"

typedef enum rm_coll {
	RM_COLL_ALL_GATHER,
	RM_COLL_REDUCE_SCATTER,
	RM_COLL_ALL_REDUCE,
	RM_COLL_ALL_TO_ALL,
	RM_COLL_SEND_RECV,
	RM_COLL_COUNT
} rm_coll;

/* "all-gather", "reduce-scatter", "all-reduce", "all-to-all", "send-recv". */
const char *rm_coll_name(rm_coll coll);
/* Accepts the names above, nccl-tests' (all_gather, alltoall, sendrecv...) and XLA's
 * (all-gather, reduce-scatter, all-reduce, all-to-all, collective-permute = send-recv). */
bool rm_coll_parse(const char *name, rm_coll *out);
/* busBW = algBW * factor for a group of n ranks (nccl-tests definitions). */
double rm_coll_busbw_factor(rm_coll coll, int ranks);

typedef enum rm_nccl_algo {
	RM_NCCL_ALGO_RING,
	RM_NCCL_ALGO_TREE,
	RM_NCCL_ALGO_NVLS,
	RM_NCCL_ALGO_NVLS_TREE,
	RM_NCCL_ALGO_PAT, /* all-gather / reduce-scatter, one GPU per node (NCCL 2.23+) */
	RM_NCCL_ALGO_COUNT,
	/* Not tuned: point-to-point (all-to-all, send/recv) and a one-rank local copy. */
	RM_NCCL_ALGO_P2P = RM_NCCL_ALGO_COUNT,
	RM_NCCL_ALGO_LOCAL,
	/* Not tuned either, taken whenever eligible (rm_nccl_model.registration, .cta_policy): a
	 * symmetric-memory kernel (2.27+) and a copy-engine collective (2.28+, zero SMs). */
	RM_NCCL_ALGO_SYMMETRIC,
	RM_NCCL_ALGO_CE,
} rm_nccl_algo;

typedef enum rm_nccl_proto {
	RM_NCCL_PROTO_LL,
	RM_NCCL_PROTO_LL128,
	RM_NCCL_PROTO_SIMPLE,
	RM_NCCL_PROTO_COUNT
} rm_nccl_proto;

/* NCCL's spellings: "Ring", "Tree", "NVLS", "NVLSTree", "PAT" (and "P2P", "Local", "Symmetric",
 * "CopyEngine"); "LL", "LL128", "Simple". */
const char *rm_nccl_algo_name(rm_nccl_algo algo);
const char *rm_nccl_proto_name(rm_nccl_proto proto);

/*
 * Parses an NCCL_ALGO / NCCL_PROTO style list into a bit mask (bit i = enum value i):
 * comma-separated names, case-insensitive, "^" in front to exclude instead ("^LL128").
 * Returns false with err naming the unknown entry.
 */
bool rm_nccl_parse_algos(const char *list, unsigned *mask, rm_error *err);
bool rm_nccl_parse_protos(const char *list, unsigned *mask, rm_error *err);

#define RM_NCCL_ALL_ALGOS ((1u << RM_NCCL_ALGO_COUNT) - 1)
#define RM_NCCL_ALL_PROTOS ((1u << RM_NCCL_PROTO_COUNT) - 1)
#define RM_NCCL_MAX_OVERRIDES 128

/*
 * A fitted (latency, bandwidth) for one (collective, algorithm, protocol) over a size range, on
 * the topology it was measured on: a group of ranks GPUs, ranks_per_node on each of nodes nodes.
 * It applies only to queries of exactly that topology (a fit of 8 GPUs on 1 node says nothing
 * about 16 on 2 or 64 on 8); an override whose topology is unset (ranks 0) never applies.
 */
typedef struct rm_nccl_override {
	rm_coll coll;
	rm_nccl_algo algo;
	rm_nccl_proto proto;
	int ranks, ranks_per_node, nodes; /* the measured group; ranks = ranks_per_node * nodes */
	int64_t min_bytes, max_bytes; /* inclusive range of bytes it applies to */
	double latency_us;
	double algbw_GBps;
	char source[96];
} rm_nccl_override;

typedef struct rm_nccl_constants rm_nccl_constants; /* the per-version tables (models/nccl.c) */

/*
 * The hosts' CPU, as NCCL's topology reports it (comm->cpuVendor / cpuArch). Across nodes it picks
 * the LL bandwidth cap (tuning.cc llMaxBws: Intel row 39.0 / 20.4 GB/s for 2 / >2 nodes, AMD or
 * mixed row 22.5 / 19.0) and the network posting overhead (x86 Intel 1 us, x86 AMD 2 us, others
 * 1 us; x3 for Simple). On one node it changes nothing. DGX H100 hosts are Intel (the default).
 */
typedef enum rm_nccl_cpu {
	RM_NCCL_CPU_INTEL,
	RM_NCCL_CPU_AMD,
	RM_NCCL_CPU_MIXED, /* nodes of both vendors in one communicator */
	RM_NCCL_CPU_OTHER, /* Arm, POWER */
	RM_NCCL_CPU_COUNT
} rm_nccl_cpu;

/* "intel", "amd", "mixed", "other"; the parser accepts these case-insensitively and "arm". */
const char *rm_nccl_cpu_name(rm_nccl_cpu cpu);
bool rm_nccl_cpu_parse(const char *name, rm_nccl_cpu *out);

/*
 * The communicator's CTA policy (ncclConfig_t.CTAPolicy, NCCL_CTA_POLICY; PyTorch
 * ProcessGroupNCCL.Options().config.cta_policy): DEFAULT (0), EFFICIENCY (1, 2.27+: with registered
 * buffers on one NVSwitch node, all-gather and reduce-scatter run NVLS on a handful of CTAs),
 * ZERO (2, 2.28+: with symmetric windows on one node, all-gather and all-to-all run on the copy
 * engines and hold no SM). NVIDIA/nccl src/enqueue.cc at v2.28.9-1; docs/collectives.md.
 */
typedef enum rm_nccl_cta_policy {
	RM_NCCL_CTA_DEFAULT,
	RM_NCCL_CTA_EFFICIENCY,
	RM_NCCL_CTA_ZERO,
	RM_NCCL_CTA_COUNT
} rm_nccl_cta_policy;

/* "default", "efficiency", "zero"; the parser also takes 0/1/2 and NCCL_CTA_POLICY_<NAME>. */
const char *rm_nccl_cta_policy_name(rm_nccl_cta_policy policy);
bool rm_nccl_cta_policy_parse(const char *name, rm_nccl_cta_policy *out);

/*
 * How the collective's buffers are registered with NCCL: NONE (plain cudaMalloc / caching
 * allocator), BUFFER (ncclCommRegister or CUDA-graph registration; PyTorch
 * TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK=1), SYMMETRIC (ncclCommWindowRegister with
 * NCCL_WIN_COLL_SYMMETRIC, 2.27+; PyTorch symm_mem with the NCCL backend). With SYMMETRIC on one
 * node NCCL runs its symmetric-memory kernels for all-gather, reduce-scatter and all-reduce
 * instead of the tuned ones (src/scheduler/symmetric_sched.cc, src/sym_kernels.cc).
 */
typedef enum rm_nccl_registration {
	RM_NCCL_REG_NONE,
	RM_NCCL_REG_BUFFER,
	RM_NCCL_REG_SYMMETRIC,
	RM_NCCL_REG_COUNT
} rm_nccl_registration;

/* "none", "buffer", "symmetric" (case-insensitive). */
const char *rm_nccl_registration_name(rm_nccl_registration reg);
bool rm_nccl_registration_parse(const char *name, rm_nccl_registration *out);

/* NCCL's symmetric-memory kernels (src/include/sym_kernels.h ncclSymkKernelId), by its names. */
typedef enum rm_nccl_symk {
	RM_NCCL_SYMK_NONE,
	RM_NCCL_SYMK_AR_AGxLL_R,
	RM_NCCL_SYMK_AR_AGxLLMC_R,
	RM_NCCL_SYMK_AR_RSxLD_AGxST,
	RM_NCCL_SYMK_AR_RSxLDMC_AGxSTMC,
	RM_NCCL_SYMK_AG_LL,
	RM_NCCL_SYMK_AG_LLMC,
	RM_NCCL_SYMK_AG_ST,
	RM_NCCL_SYMK_AG_STMC,
	RM_NCCL_SYMK_RS_LL,
	RM_NCCL_SYMK_RS_LD,
	RM_NCCL_SYMK_RS_LDMC,
	RM_NCCL_SYMK_COUNT
} rm_nccl_symk;

/* "AllReduce_AGxLL_R", ..., "ReduceScatter_LDMC" as NCCL logs them; "" for NONE. */
const char *rm_nccl_symk_name(rm_nccl_symk kernel);

/*
 * The scale-out fabric between nodes (cluster.topology; docs/collectives.md "Topology").
 * kind RM_FABRIC_NONE (the default) leaves every estimate as without a fabric. Tiers go from the
 * leaf up: tiers[k].nodes is how many nodes one switch of tier k reaches (for the leaf of a
 * rail-optimised fabric, the nodes whose NIC of one rail it holds: 32 in a DGX SuperPOD H100
 * scalable unit; for a fat tree, the nodes whose every NIC it holds), strictly increasing, each
 * a multiple of the one below; oversubscription is the taper into the tier: the downlink
 * bandwidth of the tier below over its uplink bandwidth to this one (>= 1; 1: non-blocking; a
 * "2:1 oversubscribed spine" is 2 on the spine; always 1 on the leaf, where the NICs plug in);
 * hop_latency_us what one pass through such a switch adds (0: not known).
 * pxn: NCCL's PXN (the default; NCCL_PXN_DISABLE=1 turns it off): point-to-point traffic to a
 * GPU on another rail goes over NVLink to the local GPU on that rail and leaves by its NIC.
 *
 * A group's nodes are taken as consecutive in the placement, so a group of G nodes stays under
 * the lowest tier whose switch reaches G nodes. Rings and trees keep each channel on one rail
 * (NCCL's graph search gives channel c NIC c on every node), so only point-to-point traffic
 * without PXN crosses rails.
 */
typedef enum rm_fabric_kind {
	RM_FABRIC_NONE,
	RM_FABRIC_RAIL_OPTIMIZED,
	RM_FABRIC_FAT_TREE,
	RM_FABRIC_KIND_COUNT
} rm_fabric_kind;

/* "none", "rail_optimized", "fat_tree"; the parser accepts these case-insensitively. */
const char *rm_fabric_kind_name(rm_fabric_kind kind);
bool rm_fabric_kind_parse(const char *name, rm_fabric_kind *out);

#define RM_FABRIC_MAX_TIERS 4

typedef struct rm_fabric_tier {
	int nodes;               /* nodes one switch of this tier reaches */
	double oversubscription; /* down:up bandwidth of the switch, >= 1 */
	double hop_latency_us;   /* one pass through the switch, us */
} rm_fabric_tier;

typedef struct rm_fabric {
	rm_fabric_kind kind;
	int n_tiers;
	rm_fabric_tier tiers[RM_FABRIC_MAX_TIERS];
	bool pxn;
} rm_fabric;

/* Bounds a tier's taper and hop latency are checked against: tapers past 64:1 or hops past a
 * millisecond describe no real fabric (a 2:1 or 4:1 spine, well under 1 us a switch hop). */
#define RM_FABRIC_MAX_TAPER 64.0
#define RM_FABRIC_MAX_HOP_US 1000.0

/*
 * Checks a fabric: tiers present (1 to RM_FABRIC_MAX_TIERS; a rail-optimised fabric needs a tier
 * above its rail leaves, which joins the rails), nodes >= 1 strictly increasing and each a
 * multiple of the tier below, oversubscription >= 1 and finite, latency >= 0 and finite. RM_INVALID
 * naming "tiers[k].field" otherwise. A fabric of kind NONE is valid.
 */
rm_status rm_fabric_validate(const rm_fabric *f, rm_error *err);

/*
 * The path a group's network traffic takes: the highest tier it crosses (0: it stays under one
 * leaf switch), the oversubscription its bandwidth is divided by (the product of the tapers of
 * tiers 1 to the highest: its traffic climbs every uplink up to there), and the
 * switch latency per network step: a path up to tier k passes one switch of tier k and two of
 * every tier below (up and down), sum = tiers[k].lat + 2 x sum_{j<k} tiers[j].lat.
 * nodes: the group's; cross_rail: traffic between different rails (rail-optimised fabrics reach
 * another rail only above the leaves, so at least tier 1). A group of one node crosses nothing.
 */
typedef struct rm_fabric_path {
	int tier;
	double oversubscription;
	double latency_us;
} rm_fabric_path;
rm_fabric_path rm_fabric_path_of(const rm_fabric *f, int nodes, bool cross_rail);

typedef struct rm_nccl_model {
	rm_hw_profile hw;
	const rm_nccl_constants *k;
	bool calibrated; /* apply the measured size efficiency and the overrides */
	char version[24]; /* the release asked for or measured ("2.26.2"); empty: the default */
	rm_nccl_cpu cpu;  /* host CPU vendor; init sets RM_NCCL_CPU_INTEL, callers may change it */
	int minor;        /* MINOR of the release modelled (28 by default): picks the few multi-node
			   * rules that changed inside one table's range (NVLS-tree, PAT) */
	rm_nccl_cta_policy cta_policy;     /* init: DEFAULT; set with rm_nccl_model_set_buffers */
	rm_nccl_registration registration; /* init: NONE */
	rm_fabric fabric; /* the fabric between nodes; init: kind NONE, pxn true (calibrated model only) */
	int n_overrides;
	rm_nccl_override overrides[RM_NCCL_MAX_OVERRIDES];
} rm_nccl_model;

/*
 * Initialises a model for a hardware profile and an NCCL version ("2.28", "2.28.9", "2.18.3";
 * NULL = 2.28, the version shipped with CUDA 13.0 here). Constants exist for 2.18 (NVLS base
 * latency 23 us, LL capped at 87.7 GB/s and scaled 1/3 or 1/4), 2.19-2.22 (Tree/Simple base 0
 * with 28 us per hop) and 2.23 to 2.30 (the tables of docs/reference/nccl-model.md); versions in between take
 * the nearest older table; any PATCH is accepted. calibrated starts true, cpu Intel. RM_INVALID (the
 * message lists the known releases) for an unparsable version, one before 2.18, or one after
 * 2.30 (a MAJOR.MINOR whose tuning tables are not known, e.g. 9.99).
 */
rm_status rm_nccl_model_init(rm_nccl_model *model, const rm_hw_profile *hw, const char *version,
			     rm_error *err);
/* The constants' version label ("2.18", "2.21", "2.28"). */
const char *rm_nccl_model_version(const rm_nccl_model *model);
/*
 * The release the model stands for and the table it maps to, into buf: "2.26.2 (2.23+ tables)",
 * "2.28 (default; 2.23+ tables)", or for a measured release outside the modelled ones (set by
 * the resolver in model->version) "2.31.1 (newer than modelled; 2.23+ tables)". Returns buf.
 */
const char *rm_nccl_model_version_label(const rm_nccl_model *model, char *buf, size_t size);
/*
 * Sets the CTA policy and buffer registration after init. RM_INVALID, naming the release, when the
 * modelled release lacks them: EFFICIENCY and SYMMETRIC need 2.27+, ZERO 2.28+ (NCCL before that
 * resets an unknown policy to DEFAULT; remora refuses instead of pricing something else).
 */
rm_status rm_nccl_model_set_buffers(rm_nccl_model *model, rm_nccl_cta_policy policy, rm_nccl_registration reg,
				    rm_error *err);

/* Adds a fitted override (the calibration database's); false when the table is full or the
 * override's topology is unset or inconsistent (ranks != ranks_per_node * nodes). */
bool rm_nccl_model_add_override(rm_nccl_model *model, const rm_nccl_override *ov);

typedef struct rm_coll_query {
	rm_coll coll;
	int64_t bytes;      /* full buffer, as nccl-tests counts it */
	int ranks;          /* GPUs in the group (for send-recv: 2, the pair) */
	int nodes;          /* nodes the group spans; ranks/nodes GPUs per node */
	unsigned algo_mask;  /* RM_NCCL_ALL_ALGOS unless forced (NCCL_ALGO) */
	unsigned proto_mask; /* RM_NCCL_ALL_PROTOS unless forced (NCCL_PROTO) */
} rm_coll_query;

/* A query for coll over bytes on ranks GPUs in nodes nodes, every algorithm and protocol enabled. */
rm_coll_query rm_coll_query_make(rm_coll coll, int64_t bytes, int ranks, int nodes);

typedef struct rm_coll_estimate {
	double time_us;
	double latency_us;
	double algbw_GBps; /* bytes / time */
	double busbw_GBps; /* algbw * rm_coll_busbw_factor */
	rm_nccl_algo algo;
	rm_nccl_proto proto;
	int channels;      /* CTAs launched = SMs held for the whole collective: NCCL's comm->nChannels
			    * (24 on one 8x H100 node, 16 across DGX H100 nodes, 4 with one GPU per
			    * node; 16 for NVLS), fewer for small messages; a symmetric kernel's
			    * blocks (1-64); 0 on the copy engines */
	rm_nccl_symk symk; /* the symmetric-memory kernel when algo is RM_NCCL_ALGO_SYMMETRIC */
	double efficiency; /* calibrated bandwidth factor applied (1 = raw NCCL model) */
	bool overridden;   /* a fitted override supplied latency and bandwidth */
} rm_coll_estimate;

/*
 * Estimates one collective: the fastest enabled (algorithm, protocol), as NCCL picks it. Before
 * tuning, as NCCL 2.28's enqueue does: with SYMMETRIC registration on one node, policy ZERO
 * sends all-gather and all-to-all to the copy engines (RM_NCCL_ALGO_CE, 0 channels), and
 * all-gather, reduce-scatter and all-reduce otherwise run the symmetric kernel NCCL's own model
 * picks (RM_NCCL_ALGO_SYMMETRIC; its time, blocks as channels). After tuning, policy EFFICIENCY
 * with registered buffers turns an all-gather / reduce-scatter on one NVSwitch node into NVLS on
 * ceil(32 / heads) / ceil(40 / heads) CTAs (4 / 5 with 8 heads) when that is no more than the
 * tuned pair's channels.
 * Reductions are taken to be floating-point sums (what training reduces), which every symmetric
 * kernel supports. The NCCL_ALGO / NCCL_PROTO masks do not steer the symmetric and CE paths (NCCL
 * reads them in its tuner only) but do disable EFFICIENCY's NVLS, as NCCL's check of the
 * environment does.
 * Errors (RM_INVALID, message naming the value): bytes < 0, ranks < 1, nodes < 1, ranks not a
 * multiple of nodes, more GPUs per node than the profile has, send-recv with ranks != 2, a mask
 * that leaves no pair available for this collective and topology (the message lists why).
 * ranks == 1 is a local copy (2 * bytes through HBM), as NCCL does for a group of one.
 */
rm_status rm_nccl_estimate(const rm_nccl_model *model, const rm_coll_query *q, rm_coll_estimate *out,
			   rm_error *err);

/*
 * Time of one (algorithm, protocol) pair, in us, or a negative value when NCCL does not offer
 * it for this collective and topology. Fills est when it is not NULL. q's masks are ignored.
 */
double rm_nccl_pair_time(const rm_nccl_model *model, const rm_coll_query *q, rm_nccl_algo algo,
			 rm_nccl_proto proto, rm_coll_estimate *est);


/*
 * What a collective across nodes draws from the network while it runs, for the engine's sharing
 * (docs/sim.md "Network sharing"): share[0] is the fraction of each GPU's NIC it uses, share[1 + j]
 * the fraction of its share of the uplinks from tier j to tier j + 1 (0 when it does not climb
 * them), each in
 * [1e-6, 1]: bytes through the NIC per GPU / time_us / the NIC's rate at this scale (the
 * profile's effective rate x the measured fabric curve), and on an uplink that rate divided by the
 * tapers of the tiers up to it. Bytes through one GPU's NIC: rings, trees and PAT
 * bytes x busBW factor / GPUs per node (channel c of every node uses NIC c); all-to-all
 * bytes x (ranks - per node) / ranks (its remote share, spread over the node's NICs); send-recv
 * bytes. False (nothing drawn) for a group inside one node, a query without bytes or time, or a
 * model without a fabric: the engine then shares the network equally among its collectives.
 */
#define RM_NET_LEVELS (RM_FABRIC_MAX_TIERS)
typedef struct rm_net_load {
	double share[RM_NET_LEVELS];
} rm_net_load;
bool rm_nccl_net_load(const rm_nccl_model *model, const rm_coll_query *q, double time_us, rm_net_load *out);

/* ---- reference measurements (data/reference/nccl-h100-8gpu.csv format) ---- */

/* One row: collective, algo ("ring" forced or "default" = NCCL's choice), bytes, time, busBW. */
typedef struct rm_nccl_ref_row {
	rm_coll coll;
	bool forced_ring;
	int64_t bytes;
	double time_us;
	double busbw_GBps;
	int line; /* line in the file, for messages */
} rm_nccl_ref_row;

/*
 * Reads a CSV with the header collective,algo,bytes,time_us,busbw_GBps ('#' lines are
 * comments). Allocates *rows (caller frees). Errors name file:line:column: a missing or different
 * header, an unknown collective or algo, a non-numeric or negative field, a wrong field count.
 */
rm_status rm_nccl_ref_load(const char *path, rm_nccl_ref_row **rows, int *count, rm_error *err);

/*
 * Whether a row is the single-process launch floor noted in data/reference/nccl-h100-8gpu.csv: a
 * forced-ring row (measured with one process driving 8 GPUs) of at most 46 us where the model
 * predicts less than 80% of it, i.e. the ~35 us launch cost, not the collective, is measured.
 */
bool rm_nccl_ref_is_launch_floor(const rm_nccl_ref_row *row, double predicted_us);

/*
 * The same test for any measurement of a single-process (-g N, N > 1) nccl-tests run: measured
 * at most 46 us (the ~35 us host launch floor of one thread launching on 8 H100s, plus noise)
 * while the model predicts less than 80% of it. The calibration fit keeps such rows out.
 */
bool rm_nccl_is_launch_floor(double measured_us, double predicted_us);

#endif /* REMORA_NCCL_H */
