/*
 * `remora collective`: one NCCL collective's predicted time, algBW, busBW, algorithm, protocol
 * and channels; `--table` compares the model with data/reference/nccl-h100-8gpu.csv row by row.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "remora/calib.h"
#include "remora/nccl.h"

static void collective_usage(FILE *out)
{
	fprintf(out,
		"usage: remora collective --op OP --bytes SIZE --gpus N [options]\n"
		"       remora collective --table [--raw] [--json]\n\n"
		"Predicts one NCCL collective as NCCL's tuner does: every enabled (algorithm, protocol)\n"
		"pair is priced latency + bytes/bandwidth and the fastest runs.\n\n"
		"options:\n"
		"  -o, --op OP            all-gather, reduce-scatter, all-reduce, all-to-all, send-recv\n"
		"  -b, --bytes SIZE       full buffer as nccl-tests counts it: 4096, 64KiB, 16MiB, 1GiB, 1GB\n"
		"  -g, --gpus N           GPUs in the group\n"
		"  -n, --nodes K          nodes the group spans (default 1)\n"
		"  -H, --hardware NAME    hardware profile (default h100-sxm; see `remora hw list`), or\n"
		"                         DB:PROFILE, a calibrated profile (`remora calib fit`)\n"
		"  -a, --algo LIST        as NCCL_ALGO: Ring, Tree, NVLS, NVLSTree, PAT; ^ excludes\n"
		"  -p, --proto LIST       as NCCL_PROTO: LL, LL128, Simple; ^ excludes\n"
		"      --nccl-version V   constants of NCCL V (default 2.28; 2.18 to 2.30 and their\n"
		"                         patch releases; 2.18 and 2.19-2.22 differ)\n"
		"      --cpu VENDOR       host CPU across nodes: intel (default), amd, mixed, other;\n"
		"                         sets NCCL's LL cap and network posting overhead\n"
		"      --cta-policy P     as NCCL_CTA_POLICY: default, efficiency (2.27+), zero (2.28+:\n"
		"                         copy-engine all-gather / all-to-all, 0 SMs, with --registration\n"
		"                         symmetric on one node)\n"
		"      --registration R   the buffers: none (default), buffer (ncclCommRegister),\n"
		"                         symmetric (ncclCommWindowRegister, 2.27+: NCCL's symmetric-\n"
		"                         memory kernels on one node)\n"
		"      --topology KIND    the fabric between nodes: rail_optimized or fat_tree\n"
		"                         (docs/collectives.md 'Topology'; calibrated model only)\n"
		"      --tier N[:R[:US]]  a switch tier, leaf first, repeatable: the nodes one switch\n"
		"                         reaches, the taper R into it (default 1: non-blocking) and\n"
		"                         its hop latency in us (default 0); default tiers: a DGX\n"
		"                         SuperPOD unit (rail leaf of 32 nodes) or a 64-port leaf\n"
		"      --no-pxn           as NCCL_PXN_DISABLE=1: all-to-all to another rail leaves\n"
		"                         by the GPU's own NIC and crosses the spine\n"
		"      --nvlink-mesh N    the node is a board of N GPUs NVLinked without NVSwitch (an\n"
		"                         HGX 4-GPU board: 4); as the scenario key cluster.nvlink_mesh\n"
		"      --raw              NCCL's own model, without the measured size efficiency\n"
		"                         (and, across nodes, without the measured fabric cap)\n"
		"      --all              also list every (algorithm, protocol) pair's time\n"
		"  -t, --table            predicted vs data/reference/nccl-h100-8gpu.csv, with errors\n"
		"  -j, --json             machine-readable output\n"
		"  -h, --help             this help\n");
}

static json_t *estimate_json(const rm_coll_query *q, const rm_coll_estimate *e)
{
	json_t *o = json_object();
	json_object_set_new(o, "op", json_string(rm_coll_name(q->coll)));
	json_object_set_new(o, "bytes", json_integer(q->bytes));
	json_object_set_new(o, "gpus", json_integer(q->ranks));
	json_object_set_new(o, "nodes", json_integer(q->nodes));
	json_object_set_new(o, "time_us", json_real(e->time_us));
	json_object_set_new(o, "latency_us", json_real(e->latency_us));
	json_object_set_new(o, "algbw_GBps", json_real(e->algbw_GBps));
	json_object_set_new(o, "busbw_GBps", json_real(e->busbw_GBps));
	json_object_set_new(o, "algorithm", json_string(rm_nccl_algo_name(e->algo)));
	json_object_set_new(o, "protocol", json_string(rm_nccl_proto_name(e->proto)));
	json_object_set_new(o, "channels", json_integer(e->channels));
	if (e->algo == RM_NCCL_ALGO_SYMMETRIC)
		json_object_set_new(o, "kernel", json_string(rm_nccl_symk_name(e->symk)));
	json_object_set_new(o, "efficiency", json_real(e->efficiency));
	return o;
}

static int run_table(const rm_nccl_model *model, bool json)
{
	rm_error err;
	rm_error_clear(&err);
	char path[1024];
	if (!rm_data_path("reference/nccl-h100-8gpu.csv", path, sizeof(path), &err))
		return cli_fail(&err);
	rm_nccl_ref_row *rows = NULL;
	int n = 0;
	if (rm_nccl_ref_load(path, &rows, &n, &err) != RM_OK)
		return cli_fail(&err);
	json_t *arr = json_array();
	if (!json) {
		char label[96];
		printf("%s, NCCL %s%s, vs data/reference/nccl-h100-8gpu.csv\n", model->hw.name,
		       rm_nccl_model_version_label(model, label, sizeof(label)), model->calibrated ? " + measured size efficiency" : " (raw)");
		printf("%-15s %-8s %12s %11s %11s %8s  %-9s %-7s %3s  %s\n", "collective", "algo", "bytes",
		       "meas us", "pred us", "error", "algorithm", "proto", "ch", "note");
	}
	double worst_large = 0, worst_small = 0;
	for (int i = 0; i < n; i++) {
		const rm_nccl_ref_row *r = &rows[i];
		rm_coll_query q = rm_coll_query_make(r->coll, r->bytes, 8, 1);
		if (r->forced_ring)
			q.algo_mask = 1u << RM_NCCL_ALGO_RING;
		rm_coll_estimate e;
		if (rm_nccl_estimate(model, &q, &e, &err) != RM_OK) {
			json_decref(arr);
			free(rows);
			return cli_fail(&err);
		}
		double error = r->time_us > 0 ? (e.time_us - r->time_us) / r->time_us : 0.0;
		bool floor = rm_nccl_ref_is_launch_floor(r, e.time_us);
		bool large = r->bytes >= 16 * RM_MiB;
		const char *note = floor ? "launch floor (single process)" : large ? "" : "small";
		if (!floor) {
			if (large && fabs(error) > worst_large)
				worst_large = fabs(error);
			if (!large && fabs(error) > worst_small)
				worst_small = fabs(error);
		}
		if (json) {
			json_t *o = estimate_json(&q, &e);
			json_object_set_new(o, "reference_algo", json_string(r->forced_ring ? "ring" : "default"));
			json_object_set_new(o, "measured_us", json_real(r->time_us));
			json_object_set_new(o, "error", json_real(error));
			json_object_set_new(o, "launch_floor", json_boolean(floor));
			json_array_append_new(arr, o);
		} else {
			printf("%-15s %-8s %12lld %11.1f %11.1f %+7.1f%%  %-9s %-7s %3d  %s\n",
			       rm_coll_name(r->coll), r->forced_ring ? "ring" : "default",
			       (long long)r->bytes, r->time_us, e.time_us, 100.0 * error,
			       rm_nccl_algo_name(e.algo), rm_nccl_proto_name(e.proto), e.channels, note);
		}
	}
	free(rows);
	if (json) {
		json_t *doc = json_object();
		json_object_set_new(doc, "schema", json_string("remora.collective-table/1"));
		json_object_set_new(doc, "hardware", json_string(model->hw.name));
		json_object_set_new(doc, "nccl_version", json_string(rm_nccl_model_version(model)));
		json_object_set_new(doc, "calibrated", json_boolean(model->calibrated));
		json_object_set_new(doc, "max_abs_error_16MiB_up", json_real(worst_large));
		json_object_set_new(doc, "max_abs_error_below_16MiB", json_real(worst_small));
		json_object_set_new(doc, "rows", arr);
		return cli_print_json(doc);
	}
	json_decref(arr);
	printf("\nworst |error|: %.1f%% at 16 MiB and above, %.1f%% below (launch-floor rows excluded)\n",
	       100.0 * worst_large, 100.0 * worst_small);
	return CLI_EXIT_OK;
}

/* Why the --cta-policy / --registration asked for did not change the path NCCL takes, or NULL. */
static const char *buffers_note(const rm_coll_query *q, const rm_coll_estimate *e, rm_nccl_cta_policy policy,
				rm_nccl_registration reg)
{
	if (e->algo == RM_NCCL_ALGO_CE || e->algo == RM_NCCL_ALGO_SYMMETRIC || e->algo == RM_NCCL_ALGO_LOCAL)
		return NULL;
	if (reg == RM_NCCL_REG_SYMMETRIC && q->nodes > 1)
		return "symmetric kernels and copy engines run inside one node only: the tuner's choice runs";
	if (policy == RM_NCCL_CTA_ZERO && reg != RM_NCCL_REG_SYMMETRIC)
		return "the copy engines need symmetric windows (--registration symmetric): the tuner's choice runs";
	if (policy == RM_NCCL_CTA_EFFICIENCY && reg == RM_NCCL_REG_NONE)
		return "the efficiency policy's NVLS needs registered buffers (--registration buffer)";
	return NULL;
}

/* NODES[:TAPER[:LATENCY_US]] into a tier. */
static bool parse_tier(const char *text, rm_fabric_tier *t)
{
	char *end = NULL;
	long nodes = strtol(text, &end, 10);
	if (end == text || nodes < 1 || nodes > 1000000)
		return false;
	*t = (rm_fabric_tier){.nodes = (int)nodes, .oversubscription = 1.0};
	if (*end == '\0')
		return true;
	if (*end != ':')
		return false;
	const char *p = end + 1;
	t->oversubscription = strtod(p, &end); /* its range: rm_fabric_validate */
	if (end == p || !isfinite(t->oversubscription))
		return false;
	if (*end == '\0')
		return true;
	if (*end != ':')
		return false;
	p = end + 1;
	t->hop_latency_us = strtod(p, &end);
	return end != p && *end == '\0' && isfinite(t->hop_latency_us);
}

static json_t *fabric_json(const rm_fabric *f, const rm_coll_query *q)
{
	json_t *o = json_object();
	json_object_set_new(o, "kind", json_string(rm_fabric_kind_name(f->kind)));
	json_object_set_new(o, "pxn", json_boolean(f->pxn));
	json_t *tiers = json_array();
	for (int i = 0; i < f->n_tiers; i++)
		json_array_append_new(tiers, json_pack("{s:i, s:f, s:f}", "nodes", f->tiers[i].nodes, "oversubscription",
							 f->tiers[i].oversubscription, "latency_us",
							 f->tiers[i].hop_latency_us));
	json_object_set_new(o, "tiers", tiers);
	/* without PXN an all-to-all on a rail-optimised fabric leaves by each GPU's own NIC and
	 * crosses rails, so the spine */
	bool cross = !f->pxn && q->coll == RM_COLL_ALL_TO_ALL && f->kind == RM_FABRIC_RAIL_OPTIMIZED;
	rm_fabric_path p = rm_fabric_path_of(f, q->nodes, cross);
	json_object_set_new(o, "path", json_pack("{s:i, s:f, s:f}", "tier", p.tier, "oversubscription", p.oversubscription,
						 "latency_us", p.latency_us));
	return o;
}

int cli_cmd_collective(int argc, char **argv)
{
	enum { OPT_VERSION = 256, OPT_RAW, OPT_ALL, OPT_CPU, OPT_POLICY, OPT_REG, OPT_TOPOLOGY, OPT_TIER, OPT_NO_PXN, OPT_MESH };
	static const struct option longopts[] = {
		{"op", required_argument, NULL, 'o'},
		{"bytes", required_argument, NULL, 'b'},
		{"gpus", required_argument, NULL, 'g'},
		{"nodes", required_argument, NULL, 'n'},
		{"hardware", required_argument, NULL, 'H'},
		{"algo", required_argument, NULL, 'a'},
		{"proto", required_argument, NULL, 'p'},
		{"nccl-version", required_argument, NULL, OPT_VERSION},
		{"raw", no_argument, NULL, OPT_RAW},
		{"cpu", required_argument, NULL, OPT_CPU},
		{"cta-policy", required_argument, NULL, OPT_POLICY},
		{"registration", required_argument, NULL, OPT_REG},
		{"all", no_argument, NULL, OPT_ALL},
		{"topology", required_argument, NULL, OPT_TOPOLOGY},
		{"tier", required_argument, NULL, OPT_TIER},
		{"no-pxn", no_argument, NULL, OPT_NO_PXN},
		{"nvlink-mesh", required_argument, NULL, OPT_MESH},
		{"table", no_argument, NULL, 't'},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{0, 0, 0, 0},
	};
	const char *op = NULL, *hw_name = "h100-sxm", *algo = NULL, *proto = NULL, *version = NULL;
	int64_t bytes = -1, gpus = 0, nodes = 1, mesh = 0;
	bool raw = false, all = false, table = false, json = false;
	rm_nccl_cpu cpu = RM_NCCL_CPU_INTEL;
	rm_nccl_cta_policy policy = RM_NCCL_CTA_DEFAULT;
	rm_nccl_registration reg = RM_NCCL_REG_NONE;
	rm_fabric fabric = {.kind = RM_FABRIC_NONE, .pxn = true};
	int c;
	rm_error err;
	rm_error_clear(&err);
	const char *shortopts = "o:b:g:n:H:a:p:tjh";
	while ((c = cli_getopt(argc, argv, shortopts, longopts)) != -1) {
		switch (c) {
		case 'o':
			op = optarg;
			break;
		case 'b':
			if (!rm_parse_size(optarg, &bytes))
				return cli_usage_error("collective",
						       "--bytes expects a size such as 4096, 64KiB, 16MiB or 1GB, got '%s'",
						       optarg);
			break;
		case 'g':
			if (!cli_parse_positive("collective", "--gpus", optarg, &gpus))
				return CLI_EXIT_USAGE;
			break;
		case 'n':
			if (!cli_parse_positive("collective", "--nodes", optarg, &nodes))
				return CLI_EXIT_USAGE;
			break;
		case 'H':
			hw_name = optarg;
			break;
		case 'a':
			algo = optarg;
			break;
		case 'p':
			proto = optarg;
			break;
		case OPT_VERSION:
			version = optarg;
			break;
		case OPT_RAW:
			raw = true;
			break;
		case OPT_CPU:
			if (!rm_nccl_cpu_parse(optarg, &cpu))
				return cli_usage_error("collective", "--cpu: unknown vendor '%s' (intel, amd, mixed, other)",
						       optarg);
			break;
		case OPT_POLICY:
			if (!rm_nccl_cta_policy_parse(optarg, &policy))
				return cli_usage_error("collective",
						       "--cta-policy: unknown policy '%s' (default, efficiency, zero)", optarg);
			break;
		case OPT_REG:
			if (!rm_nccl_registration_parse(optarg, &reg))
				return cli_usage_error("collective",
						       "--registration: unknown registration '%s' (none, buffer, symmetric)",
						       optarg);
			break;
		case OPT_ALL:
			all = true;
			break;
		case OPT_TOPOLOGY:
			if (!rm_fabric_kind_parse(optarg, &fabric.kind) || fabric.kind == RM_FABRIC_NONE)
				return cli_usage_error("collective", "--topology: unknown fabric '%s' (rail_optimized, fat_tree)",
						       optarg);
			break;
		case OPT_TIER:
			if (fabric.n_tiers >= RM_FABRIC_MAX_TIERS || !parse_tier(optarg, &fabric.tiers[fabric.n_tiers]))
				return cli_usage_error("collective",
						       "--tier expects NODES[:TAPER[:LATENCY_US]] (at most %d tiers), e.g. "
						       "32 or 128:2:0.5, got '%s'",
						       RM_FABRIC_MAX_TIERS, optarg);
			fabric.n_tiers++;
			break;
		case OPT_NO_PXN:
			fabric.pxn = false;
			break;
		case OPT_MESH:
			if (!cli_parse_positive("collective", "--nvlink-mesh", optarg, &mesh))
				return CLI_EXIT_USAGE;
			if (mesh < 2 || mesh > 8)
				return cli_usage_error("collective", "--nvlink-mesh: a board of 2 to 8 GPUs, got %lld",
						       (long long)mesh);
			break;
		case 't':
			table = true;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			collective_usage(stdout);
			return CLI_EXIT_OK;
		default:
			return cli_option_error("collective", argc, argv, shortopts, longopts);
		}
	}
	if (optind != argc)
		return cli_usage_error("collective", "unexpected argument '%s'", argv[optind]);
	/* "h100-sxm" or "calib.db:NAME" (fitted values and collective overrides of that group) */
	rm_hw_profile hw_store;
	rm_nccl_model model;
	if (version) {
		/* a release whose tables are not known is bad usage, whatever the hardware */
		rm_nccl_model *probe = rm_new(rm_nccl_model, 1);
		rm_status vst = rm_nccl_model_init(probe, rm_hw_profile_find("h100-sxm", NULL), version, &err);
		free(probe);
		if (vst != RM_OK)
			return cli_usage_error("collective", "--nccl-version: %s", err.msg);
	}
	rm_calib_resolve_opts ro = {.nccl_version = version, .ranks = table ? 8 : (int)gpus,
				    .nodes = table ? 1 : (int)nodes};
	if (rm_calib_resolve_hw(hw_name, &ro, &hw_store, &model, &err) != RM_OK) {
		if (version && !strchr(hw_name, ':') && rm_hw_profile_find(hw_name, NULL))
			return cli_usage_error("collective", "--nccl-version: %s", err.msg);
		return cli_fail(&err);
	}
	if (mesh > 0) {
		/* the scenario's rules (cluster.nvlink_mesh): the links split evenly, the group inside */
		if (mesh > hw_store.gpus_per_node || hw_store.nvlink_links < 1 ||
		    (int64_t)hw_store.nvlink_links % (mesh - 1) != 0)
			return cli_usage_error("collective",
					       "--nvlink-mesh %lld: the %d NVLinks of a %s do not join %lld GPUs of a "
					       "node of %d evenly",
					       (long long)mesh, (int)hw_store.nvlink_links, hw_store.name, (long long)mesh,
					       (int)hw_store.gpus_per_node);
		if (!table && gpus / nodes > mesh)
			return cli_usage_error("collective", "--nvlink-mesh %lld: %lld GPUs per node do not fit one board",
					       (long long)mesh, (long long)(gpus / nodes));
		hw_store.nvlink_mesh_gpus = (double)mesh;
		hw_store.gpus_per_node = (double)mesh;
		model.hw.nvlink_mesh_gpus = (double)mesh;
		model.hw.gpus_per_node = (double)mesh;
	}
	const rm_hw_profile *hw = &hw_store;
	model.calibrated = !raw;
	model.cpu = cpu;
	if (rm_nccl_model_set_buffers(&model, policy, reg, &err) != RM_OK)
		return cli_usage_error("collective", "--cta-policy/--registration: %s", err.msg);
	if ((fabric.n_tiers > 0 || !fabric.pxn) && fabric.kind == RM_FABRIC_NONE)
		return cli_usage_error("collective", "--tier and --no-pxn describe a fabric: give --topology too");
	if (fabric.kind != RM_FABRIC_NONE) {
		if (fabric.n_tiers == 0) {
			/* the scenario's defaults (docs/reference/hardware.md "Scale-out switches"): a
			 * DGX SuperPOD H100 scalable unit (rail leaves of 32 nodes under a spine) or a
			 * 64-port QM9700 leaf, 32 ports down, of 8-NIC nodes */
			int leaf = fabric.kind == RM_FABRIC_RAIL_OPTIMIZED ? 32 : 4;
			int top = nodes > 2 * leaf ? (int)((nodes + leaf - 1) / leaf * leaf) : 2 * leaf;
			fabric.n_tiers = 2;
			fabric.tiers[0] = (rm_fabric_tier){.nodes = leaf, .oversubscription = 1.0};
			fabric.tiers[1] = (rm_fabric_tier){.nodes = top, .oversubscription = 1.0};
		}
		if (rm_fabric_validate(&fabric, &err) != RM_OK)
			return cli_usage_error("collective", "--tier: %s", err.msg);
		if (!table && fabric.tiers[fabric.n_tiers - 1].nodes < nodes)
			return cli_usage_error("collective", "--tier: the top tier reaches %d nodes, the group spans %lld",
					       fabric.tiers[fabric.n_tiers - 1].nodes, (long long)nodes);
		model.fabric = fabric;
	}
	if (table)
		return run_table(&model, json);

	rm_coll coll;
	if (!op)
		return cli_usage_error("collective", "missing --op (all-gather, reduce-scatter, all-reduce, all-to-all, send-recv)");
	if (!rm_coll_parse(op, &coll))
		return cli_usage_error("collective", "--op: unknown collective '%s' (all-gather, reduce-scatter, all-reduce, all-to-all, send-recv)", op);
	if (bytes < 0)
		return cli_usage_error("collective", "missing --bytes SIZE");
	if (gpus == 0)
		return cli_usage_error("collective", "missing --gpus N");
	if (gpus > 1000000 || nodes > 1000000)
		return cli_usage_error("collective", "--gpus and --nodes must be at most 1000000");
	rm_coll_query q = rm_coll_query_make(coll, bytes, (int)gpus, (int)nodes);
	if (algo && !rm_nccl_parse_algos(algo, &q.algo_mask, &err))
		return cli_usage_error("collective", "--algo: %s", err.msg);
	if (proto && !rm_nccl_parse_protos(proto, &q.proto_mask, &err))
		return cli_usage_error("collective", "--proto: %s", err.msg);
	rm_coll_estimate e;
	if (rm_nccl_estimate(&model, &q, &e, &err) != RM_OK)
		return cli_fail(&err);
	if (json) {
		json_t *o = estimate_json(&q, &e);
		json_object_set_new(o, "hardware", json_string(hw->name));
		json_object_set_new(o, "nccl_version", json_string(rm_nccl_model_version(&model)));
		char label[96];
		json_object_set_new(o, "nccl_release",
				    json_string(rm_nccl_model_version_label(&model, label, sizeof(label))));
		if (q.nodes > 1)
			json_object_set_new(o, "cpu", json_string(rm_nccl_cpu_name(model.cpu)));
		if (policy != RM_NCCL_CTA_DEFAULT || reg != RM_NCCL_REG_NONE) {
			json_object_set_new(o, "cta_policy", json_string(rm_nccl_cta_policy_name(policy)));
			json_object_set_new(o, "registration", json_string(rm_nccl_registration_name(reg)));
			const char *why = buffers_note(&q, &e, policy, reg);
			if (why)
				json_object_set_new(o, "note", json_string(why));
		}
		if (model.fabric.kind != RM_FABRIC_NONE)
			json_object_set_new(o, "topology", fabric_json(&model.fabric, &q));
		if (mesh > 0)
			json_object_set_new(o, "nvlink_mesh", json_integer(mesh));
		if (all) {
			json_t *pairs = json_array();
			for (int a = 0; a < RM_NCCL_ALGO_COUNT; a++)
				for (int p = 0; p < RM_NCCL_PROTO_COUNT; p++) {
					rm_coll_estimate pe;
					if (rm_nccl_pair_time(&model, &q, (rm_nccl_algo)a, (rm_nccl_proto)p, &pe) < 0)
						continue;
					json_array_append_new(pairs, estimate_json(&q, &pe));
				}
			json_object_set_new(o, "pairs", pairs);
		}
		return cli_print_json(o);
	}
	char b[32], label[96];
	printf("%s of %s on %d GPU(s) over %d node(s) of %s, NCCL %s%s\n", rm_coll_name(coll),
	       rm_format_bytes(bytes, b, sizeof(b)), q.ranks, q.nodes, hw->name,
	       rm_nccl_model_version_label(&model, label, sizeof(label)), raw ? " (raw model)" : "");
	if (q.nodes > 1)
		printf("  hosts     %s CPUs, %d GPU(s) per node\n", rm_nccl_cpu_name(model.cpu), q.ranks / q.nodes);
	if (mesh > 0)
		printf("  board     %lld GPUs joined NVLink to NVLink, no NVSwitch: %d links to each peer, no NVLS\n",
		       (long long)mesh, (int)(hw->nvlink_links / (double)(mesh - 1)));
	if (model.fabric.kind != RM_FABRIC_NONE && q.nodes > 1) {
		bool cross = !model.fabric.pxn && q.coll == RM_COLL_ALL_TO_ALL && model.fabric.kind == RM_FABRIC_RAIL_OPTIMIZED;
		rm_fabric_path p = rm_fabric_path_of(&model.fabric, q.nodes, cross);
		printf("  fabric    %s%s, %d nodes: %s, bandwidth / %g, +%.3f us switch latency per network step%s\n",
		       rm_fabric_kind_name(model.fabric.kind), model.fabric.pxn ? "" : " without PXN", q.nodes,
		       p.tier == 0 ? "inside one leaf" : p.tier == 1 ? "across the spine (tier 1)" : "up to a higher tier",
		       p.oversubscription, p.latency_us, raw ? " (not applied: --raw)" : "");
		if (p.tier > 1)
			printf("            highest tier crossed: %d\n", p.tier);
	}
	printf("  time      %.2f us (latency %.2f us)\n", e.time_us, e.latency_us);
	printf("  algBW     %.2f GB/s\n  busBW     %.2f GB/s\n", e.algbw_GBps, e.busbw_GBps);
	if (policy != RM_NCCL_CTA_DEFAULT || reg != RM_NCCL_REG_NONE)
		printf("  buffers   CTA policy %s, registration %s\n", rm_nccl_cta_policy_name(policy),
		       rm_nccl_registration_name(reg));
	if (e.algo == RM_NCCL_ALGO_CE)
		printf("  algorithm CopyEngine (cudaMemcpyBatchAsync), 0 channels (no SM held)\n");
	else if (e.algo == RM_NCCL_ALGO_SYMMETRIC)
		printf("  algorithm Symmetric kernel %s, %d CTAs (SMs held)\n", rm_nccl_symk_name(e.symk), e.channels);
	else
		printf("  algorithm %s, protocol %s, %d channels (SMs held)\n", rm_nccl_algo_name(e.algo),
		       rm_nccl_proto_name(e.proto), e.channels);
	if (e.efficiency < 1.0)
		printf("  measured size efficiency %.3f applied to the bandwidth (--raw to omit)\n", e.efficiency);
	const char *why = buffers_note(&q, &e, policy, reg);
	if (why)
		printf("  note      %s\n", why);
	if (all) {
		printf("\n  %-9s %-7s %11s %11s %8s\n", "algorithm", "proto", "time us", "busBW GB/s", "channels");
		for (int a = 0; a < RM_NCCL_ALGO_COUNT; a++)
			for (int p = 0; p < RM_NCCL_PROTO_COUNT; p++) {
				rm_coll_estimate pe;
				if (rm_nccl_pair_time(&model, &q, (rm_nccl_algo)a, (rm_nccl_proto)p, &pe) < 0)
					continue;
				printf("  %-9s %-7s %11.2f %11.2f %8d\n", rm_nccl_algo_name(pe.algo),
				       rm_nccl_proto_name(pe.proto), pe.time_us, pe.busbw_GBps, pe.channels);
			}
	}
	return CLI_EXIT_OK;
}
