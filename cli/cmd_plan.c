/*
 * `remora plan MODEL --tokens N --hardware A,B [--gpus N,M | --deadline D | --budget X --price
 * A=P,B=Q] [...]`: capacity planning. For each hardware and GPU count, every layout x remat policy
 * x micro-batch is simulated (remora/plan.h); prints the answer per hardware with its time to
 * train, GPU-hours and cost, what to paste, why the leading alternatives lose, and the front of
 * time to train against GPUs.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "remora/calib.h"
#include "remora/file.h"
#include "remora/json.h"
#include "remora/pipeline.h"
#include "remora/plan.h"

static void plan_usage(FILE *out)
{
	fprintf(out,
		"usage: remora plan MODEL [options]\n\n"
		"Plans the GPUs to train MODEL (a preset or a config.json) on a token budget: for each\n"
		"hardware and GPU count it simulates every layout (TP with SP inside a node, PP, CP for\n"
		"long sequences, FSDP or HSDP, EP for MoE) with each remat policy and micro-batch, and\n"
		"prints the fastest plan that fits, its time to train, GPU-hours and cost.\n\n"
		"options:\n"
		"  -t, --tokens N          tokens to train on, SI suffixes: 1T = 10^12 (omit: what fits)\n"
		"  -H, --hardware A,B      hardware profiles or CALIB.db:NAME (default h100-sxm)\n"
		"  -g, --gpus N,M          GPU counts to plan (default: 1 node, 2, 4, ... nodes)\n"
		"  -D, --deadline D        the fewest GPUs that train within D (30d, 36h)\n"
		"  -B, --budget X          the fastest plan that costs at most X (needs --price)\n"
		"  -P, --price A=P,B=Q     price per GPU-hour of each hardware\n"
		"  -S, --seq-len N         sequence length (default 8192)\n"
		"  -b, --global-batch N    sequences per step (default 4 Mi tokens' worth), or N:M to try\n"
		"                          N, 2N, 4N ... up to M; a convergence choice, not a speed knob:\n"
		"                          keep the range your recipe trains well with\n"
		"  -r, --runtime R         fsdp2 (default), xla or megatron\n"
		"  -p, --policy P          a remat policy to try (repeatable; default: the runtime's three)\n"
		"      --tp LIST           only these tensor-parallel degrees (default 1,2,4,8)\n"
		"      --pp LIST           only these pipeline degrees (default: divisors of the layers to 16)\n"
		"      --max-gpus N        the top of the GPU-count ladder (default 4096; 16384 with a\n"
		"                          deadline or budget)\n"
		"      --pp-schedule LIST  pipelined layouts under each of: 1f1b (default), interleaved,\n"
		"                          gpipe, zero_bubble, zbv (zero_bubble over 2 chunks a stage)\n"
		"      --async-tp          each TP layout also with async TP (torchtitan, torch.compile)\n"
		"      --nvlink-mesh N     nodes are boards of N GPUs NVLinked without NVSwitch (HGX 4-GPU:\n"
		"                          4; as cluster.nvlink_mesh); default 8-GPU NVSwitch nodes\n"
		"      --zero LIST         HSDP layouts under each ZeRO stage: 1, 2, 3 (default 3)\n"
		"      --scaling           then the answer's strong and weak scaling, one node up to\n"
		"                          --max-gpus (the first hardware; TP and PP kept)\n"
		"      --plot DIR          write time to train against GPUs (and cost against time, with\n"
		"                          prices), each answer marked, as data, a gnuplot script, SVGs\n"
		"                          and PNGs (where gnuplot has pngcairo)\n"
		"  -d, --db FILE           keep the sweeps in this SQLite file; a killed plan resumes\n"
		"  -J, --jobs N            simulate on N threads (same results for any N)\n"
		"      --shard K/N         sweep only the K-th of N shards of every search into --db (array\n"
		"                          jobs without MPI; remora merge the shards, then plan --db OUT.db)\n"
		"  -k, --top K             alternatives shown per hardware (default 5)\n"
		"  -j, --json              machine-readable output\n"
		"  -h, --help              this help\n\n"
		"Under mpirun -np N each rank sweeps its shard of every search and rank 0 prints the plan.\n");
}

/* Splits a comma list into out (at most cap): -1 when longer, -2 for an empty entry ("a,,b",
 * a trailing comma), -3 for an entry given twice. */
static int split_list(const char *text, char (*out)[256], int cap)
{
	int n = 0;
	const char *p = text;
	for (;;) {
		size_t len = strcspn(p, ",");
		if (len == 0)
			return -2;
		if (n >= cap)
			return -1;
		snprintf(out[n], 256, "%.*s", (int)(len < 255 ? len : 255), p);
		for (int i = 0; i < n; i++)
			if (strcmp(out[i], out[n]) == 0)
				return -3;
		n++;
		if (!p[len])
			return n;
		p += len + 1;
	}
}

/* The usage error for split_list's result r on option opt. */
static int list_error(const char *opt, int r, int cap, const char *example)
{
	if (r == -3)
		return cli_usage_error("plan", "%s: an entry is given twice", opt);
	if (r == -2)
		return cli_usage_error("plan", "%s: an empty entry (\"a,,b\" or a trailing comma)", opt);
	return cli_usage_error("plan", "%s: expected 1 to %d entries, e.g. %s", opt, cap, example);
}

/* A decimal amount (--budget, a --price): the whole text a finite number, no hex ("0x10"), inf,
 * nan or empty text (strtod reads "" as 0 and "0x10" as 16). */
static bool parse_amount(const char *text, double *out)
{
	char *end = NULL;
	if (!text[0] || strspn(text, "0123456789.eE+-") != strlen(text))
		return false;
	*out = strtod(text, &end);
	return end && !*end && isfinite(*out);
}

/* What the progress lines name: the search under way ("h100-sxm, 64 GPUs"). */
typedef struct progress_ctx {
	char search[128];
} progress_ctx;

/* Each search's header line on stderr: hardware, GPU count, what it sweeps. user: progress_ctx,
 * which keeps the search's name for search_progress. */
static void progress(const char *what, void *user)
{
	progress_ctx *pc = user;
	fprintf(stderr, "remora: plan %s\n", what);
	size_t n = strcspn(what, ":");
	snprintf(pc->search, sizeof(pc->search), "%.*s", (int)(n < 127 ? n : 127), what);
}

/* On a terminal: the search under way as one line rewritten in place, candidates done of its
 * total, the rate (candidates simulated now per second of its sweep) and the ETA at that rate. */
static void search_progress(const rm_search_progress *p, void *user)
{
	const progress_ctx *pc = user;
	double rate = p->elapsed_s > 0 ? (double)(p->done - p->skipped) / p->elapsed_s : 0;
	double eta = rate > 0 ? (double)(p->total - p->done) / rate : 0;
	fprintf(stderr, "\rremora: plan %s: %lld/%lld candidates, %.0f/s, ETA %.0f s   ", pc->search, (long long)p->done,
		(long long)p->total, rate, eta);
	if (p->done == p->total)
		fputc('\n', stderr);
	fflush(stderr);
}

static void layout_text(const rm_plan_row *r, char *buf, size_t n);
static void row_of_overrides(const char *q, rm_plan_row *rr);

/* -vv: one line per candidate a search simulates now: its place in the search, label (the
 * layout as the tables name it, "TP 2 (SP) x FSDP 4", then the remat policy), micro-batch, then
 * step time, tokens/s per GPU and peak, or its error. */
static void row_line(const rm_candidate_result *r, int64_t done, int64_t total, void *user)
{
	(void)user;
	char label[400];
	if (r->c.parallelism[0]) {
		rm_plan_row rr;
		row_of_overrides(r->c.parallelism, &rr);
		char lt[200];
		layout_text(&rr, lt, sizeof(lt));
		/* the search's label is "[degrees] policy": the policy after the brackets */
		const char *pol = r->c.label[0] == '[' && strstr(r->c.label, "] ") ? strstr(r->c.label, "] ") + 2 : r->c.label;
		snprintf(label, sizeof(label), "%s, %s", lt, pol);
	} else
		snprintf(label, sizeof(label), "%s", r->c.label);
	if (!r->ok)
		fprintf(stderr, "remora: candidate %lld/%lld: %s, mb %lld: error: %s\n", (long long)done, (long long)total,
			label, (long long)r->c.micro_batch, r->error);
	else
		fprintf(stderr, "remora: candidate %lld/%lld: %s, mb %lld: step %.2f ms, %.0f tok/s/GPU, peak %.2f GiB%s\n",
			(long long)done, (long long)total, label, (long long)r->c.micro_batch,
			r->step_time_s * 1e3, r->tokens_per_s_per_gpu, (double)r->peak_memory_bytes / (double)RM_GiB,
			r->fits ? "" : ", does not fit");
}

/* "TP 8 (SP) x PP 4 x FSDP 16 x 2 replicas" */
static void layout_text(const rm_plan_row *r, char *buf, size_t n)
{
	size_t u = 0;
	buf[0] = '\0';
#define PUT(...) (u += (size_t)snprintf(buf + u, u < n ? n - u : 0, __VA_ARGS__))
	if (r->tp > 1)
		PUT("TP %lld%s", (long long)r->tp,
		    strstr(r->layout, "parallelism.async_tp=true") ? " (SP, async)" : r->sp ? " (SP)" : "");
	if (r->pp > 1) {
		const char *sch = strstr(r->layout, "parallelism.pp_schedule=");
		char name[16] = "";
		if (sch)
			sscanf(sch + strlen("parallelism.pp_schedule="), "%15s", name);
		bool two = strstr(r->layout, "parallelism.virtual_stages=2") != NULL;
		PUT("%sPP %lld%s%s%s%s", u ? " x " : "", (long long)r->pp, name[0] ? " (" : "", name,
		    name[0] && two ? ", 2 chunks" : "", name[0] ? ")" : "");
	}
	if (r->cp > 1)
		PUT("%sCP %lld", u ? " x " : "", (long long)r->cp);
	if (r->ep > 1)
		PUT("%sEP %lld", u ? " x " : "", (long long)r->ep);
	if (r->fsdp > 1)
		PUT("%sFSDP %lld%s", u ? " x " : "", (long long)r->fsdp, r->cp > 1 ? " (over CP x DP)" : "");
	if (r->dp_replicate > 1)
		PUT("%s%lld replicas", u ? " x " : "", (long long)r->dp_replicate);
	if (!u)
		PUT("one GPU");
	if (r->dp_replicate > 1 && (r->zero == 1 || r->zero == 2))
		PUT(" (ZeRO-%d)", r->zero);
	if (strstr(r->layout, "training.global_batch="))
		PUT(", batch %lld", (long long)r->global_batch); /* a --global-batch range */
#undef PUT
}

/* The degrees of a layout read back from its overrides ("parallelism.tp=2 parallelism.sp=true
 * ..." as rm_plan_layouts writes them) into a row layout_text can name: a refused layout's, or a
 * candidate's on its -vv line. */
static void row_of_overrides(const char *q, rm_plan_row *rr)
{
	memset(rr, 0, sizeof(*rr));
	snprintf(rr->layout, sizeof(rr->layout), "%s", q);
	char sp[8] = "";
	long long tp = 1, pp = 1, cp = 1, fsdp = 1, rep = 1, gbv = 0, ep = 0;
	sscanf(q, "parallelism.tp=%lld parallelism.sp=%7s parallelism.pp=%lld parallelism.cp=%lld "
		  "parallelism.fsdp=%lld parallelism.dp_replicate=%lld",
	       &tp, sp, &pp, &cp, &fsdp, &rep);
	const char *g = strstr(q, "training.global_batch=");
	if (g)
		gbv = atoll(g + strlen("training.global_batch="));
	const char *e = strstr(q, "parallelism.ep=");
	if (e)
		ep = atoll(e + strlen("parallelism.ep="));
	rr->tp = tp, rr->pp = pp, rr->cp = cp, rr->fsdp = fsdp, rr->dp_replicate = rep, rr->ep = ep;
	rr->sp = strcmp(sp, "true") == 0;
	rr->global_batch = gbv;
	const char *zz = strstr(q, "parallelism.zero=");
	rr->zero = zz ? atoi(zz + strlen("parallelism.zero=")) : 3;
}

static const char *gib(int64_t b, char *buf)
{
	snprintf(buf, 16, "%.1f", (double)b / (1024.0 * 1024.0 * 1024.0));
	return buf;
}

static void duration_text(double s, char *buf, size_t n)
{
	if (s <= 0)
		snprintf(buf, n, "-");
	else if (s >= 86400 * 2)
		snprintf(buf, n, "%.1f days", s / 86400);
	else
		snprintf(buf, n, "%.1f h", s / 3600);
}

/* Why layout row r loses to the winner w (both from one GPU count). */
static void why_loses(const rm_plan_row *r, const rm_plan_row *w, char *buf, size_t n)
{
	if (!r->r.ok) {
		snprintf(buf, n, "%s", r->r.error[0] ? r->r.error : "no candidate ran");
		return;
	}
	char a[16], b[16];
	if (!r->r.fits) {
		snprintf(buf, n, "does not fit: at best %s GiB of %s usable", gib(r->r.peak_memory_bytes, a),
			 gib(r->r.memory_capacity_bytes, b));
		return;
	}
	double slower = w->r.tokens_per_s_per_gpu > 0 ? 1.0 - r->r.tokens_per_s_per_gpu / w->r.tokens_per_s_per_gpu : 0;
	if (slower < 0.01) {
		snprintf(buf, n, "%.1f%% slower: as fast in practice (either will do)", 100.0 * slower);
		return;
	}
	double step = r->r.step_time_s > 0 ? r->r.step_time_s : 1;
	char why[160] = "";
	if (r->pp > 1)
		snprintf(why, sizeof(why), "pipeline bubble %.0f%% of the first stage", 100.0 * r->bubble_fraction);
	else if (r->r.exposed_comm_s / step > 0.05)
		snprintf(why, sizeof(why), "exposed communication %.0f%% of the step", 100.0 * r->r.exposed_comm_s / step);
	else if (r->r.recompute_s / step > 0.05)
		snprintf(why, sizeof(why), "recompute %.0f%% of the step", 100.0 * r->r.recompute_s / step);
	else
		snprintf(why, sizeof(why), "MFU %.1f%%", 100.0 * r->r.mfu);
	snprintf(buf, n, "%.1f%% slower: %s", 100.0 * slower, why);
}

static int cmp_rows(const void *pa, const void *pb)
{
	const rm_plan_row *a = pa, *b = pb;
	int fa = a->r.ok && a->r.fits, fb = b->r.ok && b->r.fits;
	if (fa != fb)
		return fb - fa;
	if (a->r.tokens_per_s_per_gpu != b->r.tokens_per_s_per_gpu)
		return a->r.tokens_per_s_per_gpu < b->r.tokens_per_s_per_gpu ? 1 : -1;
	return strcmp(a->layout, b->layout);
}

static json_t *row_json(const rm_plan_request *req, const rm_plan_row *r, bool answer)
{
	json_t *o = json_object();
	char lt[200];
	layout_text(r, lt, sizeof(lt));
	json_object_set_new(o, "hardware", json_string(req->hardware[r->hw]));
	json_object_set_new(o, "gpus", json_integer(r->gpus));
	json_object_set_new(o, "nodes", json_integer(r->nodes));
	json_object_set_new(o, "parallelism", json_string(lt));
	json_object_set_new(o, "overrides", json_string(r->layout));
	json_t *deg = json_object();
	json_object_set_new(deg, "tp", json_integer(r->tp));
	json_object_set_new(deg, "sp", json_boolean(r->sp));
	json_object_set_new(deg, "pp", json_integer(r->pp));
	json_object_set_new(deg, "cp", json_integer(r->cp));
	json_object_set_new(deg, "ep", json_integer(r->ep));
	json_object_set_new(deg, "fsdp", json_integer(r->fsdp));
	json_object_set_new(deg, "dp_replicate", json_integer(r->dp_replicate));
	json_object_set_new(deg, "pp_schedule", json_string(rm_pp_schedule_name((rm_pp_schedule)r->pp_schedule)));
	json_object_set_new(deg, "virtual_stages", json_integer(r->virtual_stages));
	json_object_set_new(deg, "async_tp", json_boolean(r->async_tp));
	json_object_set_new(deg, "zero", json_integer(r->zero));
	json_object_set_new(o, "degrees", deg);
	json_object_set_new(o, "policy", rm_json_string(r->r.c.policy));
	json_object_set_new(o, "micro_batch", json_integer(r->r.c.micro_batch));
	json_object_set_new(o, "grad_accum", json_integer(r->grad_accum));
	json_object_set_new(o, "global_batch", json_integer(r->global_batch));
	json_object_set_new(o, "step_time_s", json_real(r->r.step_time_s));
	json_object_set_new(o, "tokens_per_s_per_gpu", json_real(r->r.tokens_per_s_per_gpu));
	json_object_set_new(o, "time_to_train_s", r->time_to_train_s > 0 ? json_real(r->time_to_train_s) : json_null());
	json_object_set_new(o, "gpu_hours", r->time_to_train_s > 0 ? json_real(r->gpu_hours) : json_null());
	json_object_set_new(o, "cost", r->cost >= 0 ? json_real(r->cost) : json_null());
	json_object_set_new(o, "mfu", json_real(r->r.mfu));
	json_object_set_new(o, "peak_memory_bytes", json_integer(r->r.peak_memory_bytes));
	json_object_set_new(o, "memory_capacity_bytes", json_integer(r->r.memory_capacity_bytes));
	json_object_set_new(o, "fits", json_boolean(r->r.fits));
	if (r->pp > 1) {
		json_object_set_new(o, "bubble_fraction", json_real(r->bubble_fraction));
		json_t *st = json_array();
		for (int k = 0; k < r->n_stages; k++)
			json_array_append_new(st, json_integer(r->stage_peak_bytes[k]));
		json_object_set_new(o, "stage_peak_memory_bytes", st);
	}
	json_object_set_new(o, "answer", json_boolean(answer));
	return o;
}

/* The order plans are listed in: by the request's objective. */
static const rm_plan_request *g_req;

static bool all_priced(const rm_plan_request *req)
{
	for (int h = 0; h < req->n_hardware; h++)
		if (req->price[h] < 0)
			return false;
	return true;
}

static double objective(const rm_plan_row *r)
{
	if (g_req->budget > 0)
		return (r->cost <= g_req->budget ? 0 : 1e30) + r->time_to_train_s;
	if (g_req->deadline_s > 0)
		return (r->time_to_train_s <= g_req->deadline_s ? 0 : 1e30) + r->gpu_hours;
	if (g_req->tokens > 0)
		return r->cost >= 0 && all_priced(g_req) ? r->cost : r->gpu_hours;
	return -r->r.tokens_per_s_per_gpu * (double)r->gpus;
}

static int cmp_plans(const void *pa, const void *pb)
{
	const rm_plan_row *a = *(const rm_plan_row *const *)pa, *b = *(const rm_plan_row *const *)pb;
	double x = objective(a), y = objective(b);
	if (x != y)
		return x < y ? -1 : 1;
	if (a->gpus != b->gpus)
		return a->gpus < b->gpus ? -1 : 1;
	return a->hw - b->hw;
}

/* The winner as a scenario file: `remora simulate` of it gives the row's figures. */
static void print_paste(const rm_plan_request *req, const rm_plan_row *r, int64_t gpn, int64_t seq)
{
	int64_t per_node = r->gpus < gpn ? r->gpus : gpn;
	printf("  scenario   (save as a file: `remora simulate FILE` gives this row)\n");
	printf("    model: %s\n", req->model);
	printf("    hardware: %s\n", req->hardware[r->hw]);
	if (req->nvlink_mesh > 0)
		printf("    cluster: {gpus_per_node: %lld, nodes: %lld, nvlink_mesh: %d}\n", (long long)per_node,
		       (long long)(r->gpus / per_node), req->nvlink_mesh);
	else
		printf("    cluster: {gpus_per_node: %lld, nodes: %lld}\n", (long long)per_node,
		       (long long)(r->gpus / per_node));
	printf("    training: {seq_len: %lld, micro_batch: %lld, global_batch: %lld}\n", (long long)seq,
	       (long long)r->r.c.micro_batch, (long long)r->global_batch);
	printf("    parallelism: {tp: %lld, sp: %s, pp: %lld, cp: %lld, fsdp: %lld, dp_replicate: %lld", (long long)r->tp,
	       r->sp ? "true" : "false", (long long)r->pp, (long long)r->cp, (long long)r->fsdp, (long long)r->dp_replicate);
	if (r->ep > 1)
		printf(", ep: %lld", (long long)r->ep);
	if (r->pp > 1 && r->pp_schedule != RM_PP_1F1B)
		printf(", pp_schedule: %s", rm_pp_schedule_name((rm_pp_schedule)r->pp_schedule));
	if (r->virtual_stages > 1)
		printf(", virtual_stages: %lld", (long long)r->virtual_stages);
	if (r->async_tp)
		printf(", async_tp: true");
	if (r->zero > 0 && r->zero < 3)
		printf(", zero: %d", r->zero);
	printf("}\n");
	bool xla = strcasecmp(req->runtime, "xla") == 0;
	printf("    remat: {%spolicy: \"%s\"}\n", xla ? "" : "scan: false, ", r->r.c.policy);
	printf("    scheduler: {mode: %s}\n", req->runtime);
}

/* One scaling curve: the answer's layout family at each GPU count (remat and micro-batch
 * re-searched), strong (the global batch fixed) or weak (the batch per GPU fixed). */
static rm_status scaling_run(const rm_plan_request *req, const rm_plan_row *w, int64_t gpn, bool weak,
			     const rm_plan_options *opt, rm_plan_result *out, rm_error *err)
{
	rm_plan_request r = *req;
	r.n_hardware = 1;
	if (w->hw != 0) {
		snprintf(r.hardware[0], sizeof(r.hardware[0]), "%s", req->hardware[w->hw]);
		r.price[0] = req->price[w->hw];
	}
	r.n_tp = r.n_pp = 1;
	r.tp[0] = w->tp;
	r.pp[0] = w->pp;
	r.deadline_s = r.budget = 0;
	r.n_gpus = 0;
	int64_t top = req->max_gpus > 0 ? req->max_gpus : 4096;
	for (int64_t g = gpn; g <= top && r.n_gpus < RM_PLAN_MAX_GPUS; g *= 2)
		r.gpus[r.n_gpus++] = g;
	if (weak) {
		r.global_batch_min = r.global_batch_max = w->global_batch;
		r.weak_base_gpus = w->gpus;
	}
	return rm_plan_run(&r, rm_calib_hw_resolver, opt, out, err);
}

static void print_scaling(const char *title, const rm_plan_result *res)
{
	printf("\n%s\n", title);
	printf("  %6s  %-42s %8s %9s %10s %6s %9s %10s\n", "GPUs", "layout", "mb x ga", "tok/s/GPU", "efficiency", "MFU",
	       "exposed", "step s");
	double base = 0;
	for (int i = 0; i < res->n_points; i++) {
		const rm_plan_point *pt = &res->points[i];
		if (!pt->have_best) {
			printf("  %6lld  %s\n", (long long)pt->gpus,
			       pt->n_layouts ? "nothing fits"
			       : pt->n_rejected ? pt->rejected_why[0]
						: "no layout");
			continue;
		}
		const rm_plan_row *b = &pt->best;
		if (base <= 0)
			base = b->r.tokens_per_s_per_gpu;
		char lt[200], mb[32], ex[32];
		layout_text(b, lt, sizeof(lt));
		snprintf(mb, sizeof(mb), "%lld x %lld", (long long)b->r.c.micro_batch, (long long)b->grad_accum);
		double step = b->r.step_time_s > 0 ? b->r.step_time_s : 1;
		if (b->pp > 1)
			snprintf(ex, sizeof(ex), "bubble %.0f%%", 100.0 * b->bubble_fraction);
		else
			snprintf(ex, sizeof(ex), "%.1f%%", 100.0 * b->r.exposed_comm_s / step);
		printf("  %6lld  %-42s %8s %9.0f %9.1f%% %5.1f%% %9s %10.3f\n", (long long)b->gpus, lt, mb,
		       b->r.tokens_per_s_per_gpu, 100.0 * b->r.tokens_per_s_per_gpu / base, 100.0 * b->r.mfu, ex,
		       b->r.step_time_s);
	}
}

static json_t *scaling_json(const rm_plan_request *req, const rm_plan_result *res)
{
	json_t *arr = json_array();
	for (int i = 0; i < res->n_points; i++)
		if (res->points[i].have_best)
			json_array_append_new(arr, row_json(req, &res->points[i].best, false));
	return arr;
}

/* ---- --plot DIR ---- */

typedef struct plot_ctx {
	const rm_plan_request *req;
	const rm_plan_result *res;
	bool priced;
} plot_ctx;

/* One block per hardware (gnuplot's index): GPUs, days to train, GPU-hours, cost, and the plan's
 * layout and micro-batch x accumulation (a quoted string; the layout text holds no quote). */
static bool write_points(FILE *f, void *user, rm_error *err)
{
	(void)err;
	const plot_ctx *p = user;
	fprintf(f, "# one block per hardware: gpus time_to_train_days gpu_hours cost \"layout, micro-batch x grad_accum\"\n");
	for (int h = 0; h < p->req->n_hardware; h++) {
		fprintf(f, "# %s\n", p->req->hardware[h]);
		for (int i = 0; i < p->res->n_points; i++) {
			const rm_plan_point *pt = &p->res->points[i];
			if (pt->hw != h || !pt->have_best)
				continue;
			fprintf(f, "%lld %.6f %.3f ", (long long)pt->gpus, pt->best.time_to_train_s / 86400.0,
				pt->best.gpu_hours);
			if (pt->best.cost >= 0)
				fprintf(f, "%.3f", pt->best.cost);
			else
				fprintf(f, "?"); /* no price: missing (plots.gp: set datafile missing) */
			char lt[200];
			layout_text(&pt->best, lt, sizeof(lt));
			fprintf(f, " \"%s, mb %lld x %lld\"\n", lt, (long long)pt->best.r.c.micro_batch,
				(long long)pt->best.grad_accum);
		}
		fprintf(f, "\n\n");
	}
	return true;
}

/* The plan that answers the request on hardware h, or NULL. */
static const rm_plan_row *plot_answer(const plot_ctx *p, int h)
{
	return p->res->chosen[h] >= 0 ? &p->res->points[p->res->chosen[h]].best : NULL;
}

/* Where answer w sits on a plot: (GPUs, days), or with cost (days, cost). */
static void answer_xy(const rm_plan_row *w, bool cost, double *x, double *y)
{
	*x = cost ? w->time_to_train_s / 86400.0 : (double)w->gpus;
	*y = cost ? w->cost : w->time_to_train_s / 86400.0;
}

/* A plot's ranges, set from its points (not gnuplot's autoscale, which widens a log axis to whole
 * decades and finds an empty range for one point): x and y, each on a log scale or not. */
typedef struct plot_range {
	double x0, x1, y0, y1;
	bool xlog, ylog, any;
} plot_range;

/* Where point i sits on the plot of cost (days, cost) or not (GPUs, days); false when it is not
 * drawn there (no plan, no time to train, no cost). */
static bool point_xy(const plot_ctx *p, int i, bool cost, double *x, double *y)
{
	const rm_plan_point *pt = &p->res->points[i];
	if (!pt->have_best || !(pt->best.time_to_train_s > 0) || (cost && !(pt->best.cost > 0)))
		return false;
	answer_xy(&pt->best, cost, x, y);
	return true;
}

/* The ranges around every drawn point: a log axis a factor 1.3 past the extremes (2 around a
 * single value), the linear days axis of the cost plot from 0 to 15% past the longest. */
static plot_range plot_ranges(const plot_ctx *p, bool cost)
{
	plot_range r = {.xlog = !cost, .ylog = true};
	for (int i = 0; i < p->res->n_points; i++) {
		double x, y;
		if (!point_xy(p, i, cost, &x, &y))
			continue;
		if (!r.any || x < r.x0)
			r.x0 = x;
		if (!r.any || x > r.x1)
			r.x1 = x;
		if (!r.any || y < r.y0)
			r.y0 = y;
		if (!r.any || y > r.y1)
			r.y1 = y;
		r.any = true;
	}
	if (!r.any)
		return r;
	double fx = r.x0 == r.x1 ? 2.0 : 1.3, fy = r.y0 == r.y1 ? 2.0 : 1.3;
	if (r.xlog) {
		r.x0 /= fx;
		r.x1 *= fx;
	} else {
		r.x0 = 0;
		r.x1 *= 1.15;
	}
	r.y0 /= fy;
	r.y1 *= fy;
	return r;
}

/* (x, y) as fractions of the plot's width and height. */
static void plot_frac(const plot_range *r, double x, double y, double *fx, double *fy)
{
	*fx = r->xlog ? log(x / r->x0) / log(r->x1 / r->x0) : (x - r->x0) / (r->x1 - r->x0);
	*fy = r->ylog ? log(y / r->y0) / log(r->y1 / r->y0) : (y - r->y0) / (r->y1 - r->y0);
}

/* Whether the box [x0, x1] x [y0, y1] (plot fractions) meets a hardware's curve on the plot:
 * each segment between consecutive drawn points of one hardware, sampled at 64 points. */
static bool box_meets_curve(const plot_ctx *p, bool cost, const plot_range *rg, double x0, double x1, double y0,
			    double y1)
{
	for (int i = 0; i + 1 < p->res->n_points; i++) {
		double ax, ay, bx, by;
		if (p->res->points[i].hw != p->res->points[i + 1].hw || !point_xy(p, i, cost, &ax, &ay) ||
		    !point_xy(p, i + 1, cost, &bx, &by))
			continue;
		double fax, fay, fbx, fby;
		plot_frac(rg, ax, ay, &fax, &fay);
		plot_frac(rg, bx, by, &fbx, &fby);
		for (int k = 0; k <= 64; k++) {
			double t = k / 64.0, x = fax + t * (fbx - fax), y = fay + t * (fby - fay);
			if (x >= x0 && x <= x1 && y >= y0 && y <= y1)
				return true;
		}
	}
	return false;
}

/*
 * The answers' labels at (x, y) = (GPUs, days), or with cost (days, cost): two lines each, beside
 * the point, placed where the label stays inside the plot and clear of the labels placed before
 * it, of every hardware's curve and of the other answers' marks: tried towards the middle of the
 * plot first, then the other way, each above and below the point at 2 text lines out, then 2.5
 * lines further; when no place is clear, the first that is inside the plot and clear of the other
 * labels. The geometry in fractions of the plot: a text line 1/40 of its height, a character
 * 1/160 of its width (the 1200 x 800 terminals, labels at font size 10).
 */
static void script_answer_labels(FILE *f, const plot_ctx *p, bool cost, const plot_range *rg)
{
	fprintf(f, "unset label\n");
	const double line_h = 1.0 / 40, char_w = 1.0 / 160, mark = 0.015;
	double placed[RM_PLAN_MAX_HW][4]; /* x0, x1, y0, y1 */
	int n_placed = 0;
	for (int h = 0; h < p->req->n_hardware; h++) {
		int wi = p->res->chosen[h];
		double x, y;
		if (wi < 0 || !point_xy(p, wi, cost, &x, &y))
			continue;
		const rm_plan_row *w = &p->res->points[wi].best;
		char text[2][300], lt[200], t[32];
		layout_text(w, lt, sizeof(lt));
		duration_text(w->time_to_train_s, t, sizeof(t));
		snprintf(text[0], sizeof(text[0]), "answer on %s: %lld GPUs, %s", p->req->hardware[h], (long long)w->gpus, lt);
		int u = snprintf(text[1], sizeof(text[1]), "%s, %.0f GPU-hours", t, w->gpu_hours);
		if (w->cost >= 0)
			snprintf(text[1] + u, sizeof(text[1]) - (size_t)u, ", cost %.0f", w->cost);
		size_t chars = strlen(text[0]) > strlen(text[1]) ? strlen(text[0]) : strlen(text[1]);
		double fx, fy, width = (double)(chars + 2) * char_w, height = 2.6 * line_h;
		plot_frac(rg, x, y, &fx, &fy);
		bool toward_left = fx > 0.5;
		int best = -1, fallback = -1;
		double box[64][4], offy[64];
		bool left[64];
		int n = 0;
		for (int step = 0; step < 8; step++)
			for (int hs = 0; hs < 2; hs++)
				for (int vs = 0; vs < 2; vs++) {
					bool l = hs ? !toward_left : toward_left;
					double off = (vs ? -1 : 1) * (2.0 + 2.5 * step), cy = fy + off * line_h;
					double x0 = l ? fx - 1.5 * char_w - width : fx + 1.5 * char_w;
					box[n][0] = x0, box[n][1] = x0 + width, box[n][2] = cy - height / 2, box[n][3] = cy + height / 2;
					offy[n] = off, left[n] = l;
					n++;
				}
		for (int c = 0; c < n && best < 0; c++) {
			const double *bx = box[c];
			bool inside = bx[0] >= 0 && bx[1] <= 1 && bx[2] >= 0 && bx[3] <= 1;
			for (int k = 0; k < n_placed && inside; k++)
				inside = bx[1] <= placed[k][0] || bx[0] >= placed[k][1] || bx[3] <= placed[k][2] ||
					 bx[2] >= placed[k][3];
			if (!inside)
				continue;
			if (fallback < 0)
				fallback = c;
			bool clear = !box_meets_curve(p, cost, rg, bx[0], bx[1], bx[2], bx[3]);
			/* the other answers' marks */
			for (int k = 0; k < p->req->n_hardware && clear; k++) {
				int oi = p->res->chosen[k];
				double ox, oy, ofx, ofy;
				if (k == h || oi < 0 || !point_xy(p, oi, cost, &ox, &oy))
					continue;
				plot_frac(rg, ox, oy, &ofx, &ofy);
				clear = ofx + mark < bx[0] || ofx - mark > bx[1] || ofy + mark < bx[2] || ofy - mark > bx[3];
			}
			if (clear)
				best = c;
		}
		int c = best >= 0 ? best : fallback >= 0 ? fallback : 0;
		memcpy(placed[n_placed++], box[c], sizeof(box[c]));
		fprintf(f, "set label %d \"%s\\n%s\"", h + 1, text[0], text[1]);
		if (cost)
			fprintf(f, " at answer%d_days, answer%d_cost", h, h);
		else
			fprintf(f, " at answer%d_gpus, answer%d_days", h, h);
		fprintf(f, " %s offset %s,%.1f boxed front font ',10'\n", left[c] ? "right" : "left", left[c] ? "-1.5" : "1.5",
			offy[c]);
	}
}

/* Tics for a log axis from lo to hi: 1, 2 and 5 x 10^k where at least 4 of those fall in range,
 * else evenly spaced ones (a step of 1, 2 or 5 x 10^k, the largest that gives at least 4), as
 * plain numbers: gnuplot's own are whole decades, none on an axis of less than one. Nothing
 * when the range is empty. */
static void script_log_tics(FILE *f, const char *axis, double lo, double hi)
{
	static const double m[] = {1, 2, 5};
	if (!(lo > 0) || !(hi > lo))
		return;
	int count = 0;
	for (double d = pow(10, floor(log10(lo))); d <= hi; d *= 10)
		for (int i = 0; i < 3; i++)
			count += m[i] * d >= lo && m[i] * d <= hi;
	fprintf(f, "set %stics (", axis);
	bool first = true;
	if (count >= 4) {
		for (double d = pow(10, floor(log10(lo))); d <= hi; d *= 10)
			for (int i = 0; i < 3; i++)
				if (m[i] * d >= lo && m[i] * d <= hi) {
					fprintf(f, "%s%.10g", first ? "" : ", ", m[i] * d);
					first = false;
				}
	} else {
		double step = pow(10, floor(log10(hi - lo)));
		for (int k = 0; k < 12; k++) {
			double st = step * (k % 3 == 0 ? 1 : k % 3 == 1 ? 0.5 : 0.2) * pow(0.1, k / 3);
			if (floor(hi / st) - ceil(lo / st) + 1 >= 4) {
				step = st;
				break;
			}
		}
		for (double v = ceil(lo / step) * step; v <= hi; v += step) {
			fprintf(f, "%s%.10g", first ? "" : ", ", round(v / step) * step);
			first = false;
		}
	}
	fprintf(f, ")\n");
}

/* The ranges of rg as gnuplot commands, with the y axis's tics (script_log_tics; gnuplot's own
 * when no point is drawn). */
static void script_ranges(FILE *f, const plot_range *rg)
{
	fprintf(f, "set xtics autofreq\nset ytics autofreq\n");
	if (!rg->any)
		return;
	fprintf(f, "set xrange [%.6g:%.6g]\nset yrange [%.6g:%.6g]\n", rg->x0, rg->x1, rg->y0, rg->y1);
	script_log_tics(f, "y", rg->y0, rg->y1);
}

static bool write_plan_script(FILE *f, void *user, rm_error *err)
{
	(void)err;
	const plot_ctx *p = user;
	fprintf(f, "# gnuplot script written by remora plan; run: gnuplot plots.gp\n"
		   "# the answer per hardware (the plan's own figures: GPUs, days to train, cost)\n");
	bool any = false;
	for (int h = 0; h < p->req->n_hardware; h++) {
		const rm_plan_row *w = plot_answer(p, h);
		if (!w)
			continue;
		any = true;
		fprintf(f, "answer%d_gpus = %lld\nanswer%d_days = %.6f\n", h, (long long)w->gpus, h,
			w->time_to_train_s / 86400.0);
		if (w->cost >= 0)
			fprintf(f, "answer%d_cost = %.3f\n", h, w->cost);
	}
	fprintf(f, "$answers << EOD\n");
	for (int h = 0; h < p->req->n_hardware; h++) {
		const rm_plan_row *w = plot_answer(p, h);
		if (w)
			fprintf(f, "%lld %.6f\n", (long long)w->gpus, w->time_to_train_s / 86400.0);
	}
	fprintf(f, "EOD\n");
	/* the cost of each answer, as a third column where priced */
	fprintf(f, "$answer_costs << EOD\n");
	for (int h = 0; h < p->req->n_hardware; h++) {
		const rm_plan_row *w = plot_answer(p, h);
		if (w && w->cost >= 0)
			fprintf(f, "%.6f %.3f\n", w->time_to_train_s / 86400.0, w->cost);
	}
	fprintf(f, "EOD\n");
	fprintf(f, "png = strstrt(GPVAL_TERMINALS, 'pngcairo') > 0\n"
		   "set terminal svg size 1200,800 dynamic noenhanced font 'sans,12' background '#ffffff'\n"
		   "set style textbox opaque noborder\n"
		   "set datafile missing '?'\nset grid\nset key top right\nset logscale x 2\nset logscale y\n"
		   "set output 'time-to-train.svg'\n"
		   "set title 'Time to train against GPUs (each point the fastest plan that fits at that count)'\n"
		   "set xlabel 'GPUs'\nset ylabel 'days to train'\n");
	plot_range rg = plot_ranges(p, false);
	script_ranges(f, &rg);
	/* a tic at each GPU count the plan tried */
	bool first_tic = true;
	for (int i = 0; i < p->res->n_points; i++) {
		double x, y;
		bool seen = false;
		for (int j = 0; j < i && !seen; j++)
			seen = p->res->points[j].gpus == p->res->points[i].gpus && point_xy(p, j, false, &x, &y);
		if (seen || !point_xy(p, i, false, &x, &y))
			continue;
		fprintf(f, "%s%lld", first_tic ? "set xtics (" : ", ", (long long)p->res->points[i].gpus);
		first_tic = false;
	}
	if (!first_tic)
		fprintf(f, ")\n");
	script_answer_labels(f, p, false, &rg);
	fprintf(f, "plot");
	for (int h = 0; h < p->req->n_hardware; h++)
		fprintf(f, "%s 'points.dat' index %d using 1:2 with linespoints pt 7 title '%s'", h ? ", \\\n    " : " ", h,
			p->req->hardware[h]);
	if (any)
		fprintf(f, ", \\\n     $answers using 1:2 with points pt 3 ps 3 lw 2 lc rgb '#000000' title 'answer (per "
			   "hardware)'");
	fprintf(f, "\n");
	cli_gnuplot_png(f, "time-to-train");
	if (p->priced) {
		fprintf(f, "unset logscale\nset logscale y\n"
			   "set output 'cost-vs-time.svg'\n"
			   "set title 'Cost against time to train'\nset xlabel 'days to train'\n"
			   "set ylabel 'cost (price units: --price per GPU-hour x GPU-hours)'\n");
		plot_range rc = plot_ranges(p, true);
		script_ranges(f, &rc);
		script_answer_labels(f, p, true, &rc);
		fprintf(f, "plot");
		for (int h = 0; h < p->req->n_hardware; h++)
			fprintf(f, "%s 'points.dat' index %d using 2:4 with linespoints pt 7 title '%s'",
				h ? ", \\\n    " : " ", h, p->req->hardware[h]);
		if (any)
			fprintf(f, ", \\\n     $answer_costs using 1:2 with points pt 3 ps 3 lw 2 lc rgb '#000000' title "
				   "'answer (per hardware)'");
		fprintf(f, "\n");
		cli_gnuplot_png(f, "cost-vs-time");
	}
	return true;
}

static int write_plan_plots(const char *dir, const rm_plan_request *req, const rm_plan_result *res, bool priced)
{
	rm_error err;
	rm_error_clear(&err);
	int rc = cli_plot_dir_create(dir);
	if (rc != CLI_EXIT_OK)
		return rc;
	for (int h = 0; h < req->n_hardware; h++)
		if (strchr(req->hardware[h], '\'') || strchr(req->hardware[h], '"') || strchr(req->hardware[h], '\\') ||
		    strchr(req->hardware[h], '\n')) {
			rm_error_set(&err, RM_INVALID, NULL, 0, 0, "--plot: the hardware name '%s' cannot be a plot title",
				     req->hardware[h]);
			return cli_fail(&err);
		}
	plot_ctx p = {req, res, priced};
	char path[1200];
	snprintf(path, sizeof(path), "%s/points.dat", dir);
	if (!rm_file_write(path, write_points, &p, &err))
		return cli_fail(&err);
	snprintf(path, sizeof(path), "%s/plots.gp", dir);
	if (!rm_file_write(path, write_plan_script, &p, &err))
		return cli_fail(&err);
	const char *const png[] = {"time-to-train.png", "cost-vs-time.png"};
	return cli_render_plots(dir, png, 2, "the SVGs and PNGs",
				priced ? "time-to-train.png and cost-vs-time.png" : "time-to-train.png",
				priced ? "time-to-train.svg and cost-vs-time.svg" : "time-to-train.svg");
}

/*
 * Whether point i's plan is off the front: another plan is at most as large on both axes, time to
 * train and (by_cost) cost over every hardware or (else) GPUs of the same hardware, and smaller on
 * one.
 */
static bool dominated(const rm_plan_result *res, int i, bool by_cost)
{
	const rm_plan_point *pt = &res->points[i];
	double x = by_cost ? pt->best.cost : (double)pt->gpus, t = pt->best.time_to_train_s;
	for (int j = 0; j < res->n_points; j++) {
		const rm_plan_point *o = &res->points[j];
		if (j == i || !o->have_best || (!by_cost && o->hw != pt->hw))
			continue;
		double ox = by_cost ? o->best.cost : (double)o->gpus, ot = o->best.time_to_train_s;
		if (ox <= x && ot <= t && (ox < x || ot < t))
			return true;
	}
	return false;
}

int cli_cmd_plan(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"tokens", required_argument, NULL, 't'},   {"hardware", required_argument, NULL, 'H'},
		{"gpus", required_argument, NULL, 'g'},     {"deadline", required_argument, NULL, 'D'},
		{"budget", required_argument, NULL, 'B'},   {"price", required_argument, NULL, 'P'},
		{"seq-len", required_argument, NULL, 'S'},  {"global-batch", required_argument, NULL, 'b'},
		{"runtime", required_argument, NULL, 'r'},  {"policy", required_argument, NULL, 'p'},
		{"max-gpus", required_argument, NULL, 'M'}, {"db", required_argument, NULL, 'd'},
		{"jobs", required_argument, NULL, 'J'},     {"top", required_argument, NULL, 'k'},
		{"tp", required_argument, NULL, 'T'},       {"pp", required_argument, NULL, 'L'},
		{"scaling", no_argument, NULL, 'W'},       {"plot", required_argument, NULL, 'O'},
		{"pp-schedule", required_argument, NULL, 'Q'}, {"async-tp", no_argument, NULL, 'A'},
		{"zero", required_argument, NULL, 'Z'},
		{"json", no_argument, NULL, 'j'},	    {"help", no_argument, NULL, 'h'},
		{"shard", required_argument, NULL, 256},
		{"nvlink-mesh", required_argument, NULL, 257},
		{NULL, 0, NULL, 0}};
	static const char *const shortopts = "t:H:g:D:B:P:S:b:r:p:d:J:k:jh";
	rm_plan_request req = rm_plan_request_default();
	const char *hardware = "h100-sxm", *prices = NULL, *db = NULL;
	int64_t jobs = 1, top = 5, v = 0;
	bool json = false, scaling = false;
	const char *plot_dir = NULL;
	int shard = 0, shards = 0;
	rm_error err;
	rm_error_clear(&err);
	int c;
	while ((c = cli_getopt(argc, argv, shortopts, longopts)) != -1) {
		switch (c) {
		case 't':
			if (!rm_plan_parse_tokens(optarg, &req.tokens, &err))
				return cli_usage_error("plan", "--tokens: %s", err.msg);
			break;
		case 'H':
			hardware = optarg;
			break;
		case 'g': {
			char list[RM_PLAN_MAX_GPUS][256];
			int n = split_list(optarg, list, RM_PLAN_MAX_GPUS);
			if (n < 1)
				return list_error("--gpus", n, RM_PLAN_MAX_GPUS, "64,128");
			for (int i = 0; i < n; i++)
				if (!cli_parse_positive("plan", "--gpus", list[i], &req.gpus[i]))
					return CLI_EXIT_USAGE;
			for (int i = 0; i < n; i++)
				for (int j = 0; j < i; j++)
					if (req.gpus[i] == req.gpus[j])
						return cli_usage_error("plan", "--gpus: %lld is given twice", (long long)req.gpus[i]);
			req.n_gpus = n;
			break;
		}
		case 'D':
			if (!rm_plan_parse_duration(optarg, &req.deadline_s, &err))
				return cli_usage_error("plan", "--deadline: %s", err.msg);
			if (strspn(optarg, "0123456789.eE+-") == strlen(optarg))
				return cli_usage_error("plan", "--deadline %s: give a unit (%sd for days, %sh for hours)", optarg,
						       optarg, optarg);
			break;
		case 'B': {
			if (!parse_amount(optarg, &req.budget) || !(req.budget > 0))
				return cli_usage_error("plan", "--budget: expected a positive amount, got '%s'", optarg);
			break;
		}
		case 'P':
			prices = optarg;
			break;
		case 'S':
			if (!cli_parse_positive("plan", "--seq-len", optarg, &req.seq_len))
				return CLI_EXIT_USAGE;
			break;
		case 'b': {
			/* N, or a range N:M whose powers-of-two multiples of N are tried */
			char lo[64], *colon = strchr(optarg, ':');
			snprintf(lo, sizeof(lo), "%.*s", colon ? (int)(colon - optarg) : 63, optarg);
			if (!cli_parse_positive("plan", "--global-batch", lo, &req.global_batch_min))
				return CLI_EXIT_USAGE;
			req.global_batch_max = req.global_batch_min;
			if (colon && !cli_parse_positive("plan", "--global-batch", colon + 1, &req.global_batch_max))
				return CLI_EXIT_USAGE;
			if (req.global_batch_max < req.global_batch_min)
				return cli_usage_error("plan", "--global-batch %s: the range's top is below its bottom", optarg);
			break;
		}
		case 'r':
			if (strcasecmp(optarg, "fsdp2") != 0 && strcasecmp(optarg, "xla") != 0 && strcasecmp(optarg, "megatron") != 0)
				return cli_usage_error("plan", "--runtime: expected fsdp2, xla or megatron, got '%s'", optarg);
			snprintf(req.runtime, sizeof(req.runtime), "%s", optarg);
			break;
		case 'p':
			if (req.n_policies >= 16)
				return cli_usage_error("plan", "--policy: at most 16");
			snprintf(req.policies[req.n_policies++], sizeof(req.policies[0]), "%s", optarg);
			break;
		case 'T':
		case 'L': {
			char list[16][256];
			int cap = c == 'T' ? 8 : 16;
			int n = split_list(optarg, list, cap);
			if (n < 1)
				return list_error(c == 'T' ? "--tp" : "--pp", n, cap, "1,2,4");
			for (int i = 0; i < n; i++)
				if (!cli_parse_positive("plan", c == 'T' ? "--tp" : "--pp", list[i], c == 'T' ? &req.tp[i] : &req.pp[i]))
					return CLI_EXIT_USAGE;
			if (c == 'T')
				req.n_tp = n;
			else
				req.n_pp = n;
			break;
		}
		case 'M':
			if (!cli_parse_positive("plan", "--max-gpus", optarg, &req.max_gpus))
				return CLI_EXIT_USAGE;
			break;
		case 'd':
			if (!optarg[0])
				return cli_usage_error("plan", "--db: an empty file name");
			db = optarg;
			break;
		case 'J':
			if (!cli_parse_positive("plan", "--jobs", optarg, &jobs))
				return CLI_EXIT_USAGE;
			if (jobs > 1024)
				return cli_usage_error("plan", "--jobs %lld: at most 1024 threads", (long long)jobs);
			break;
		case 'k':
			if (!cli_parse_positive("plan", "--top", optarg, &top))
				return CLI_EXIT_USAGE;
			break;
		case 'j':
			json = true;
			break;
		case 'W':
			scaling = true;
			break;
		case 'O':
			plot_dir = optarg;
			break;
		case 'A':
			req.async_tp = true;
			break;
		case 257: {
			int64_t n = 0;
			if (!cli_parse_positive("plan", "--nvlink-mesh", optarg, &n))
				return CLI_EXIT_USAGE;
			if (n < 2 || n > 8)
				return cli_usage_error("plan", "--nvlink-mesh: a board of 2 to 8 GPUs, got %lld", (long long)n);
			req.nvlink_mesh = (int)n;
			break;
		}
		case 'Z': {
			char list[3][256];
			int n = split_list(optarg, list, 3);
			if (n < 1)
				return list_error("--zero", n, 3, "1,3");
			for (int i = 0; i < n; i++) {
				if (strcmp(list[i], "1") != 0 && strcmp(list[i], "2") != 0 && strcmp(list[i], "3") != 0)
					return cli_usage_error("plan", "--zero: '%s' is not a ZeRO stage (1, 2 or 3)", list[i]);
				req.zero[i] = list[i][0] - '0';
			}
			req.n_zero = n;
			break;
		}
		case 'Q': {
			char list[5][256];
			int n = split_list(optarg, list, 5);
			if (n < 1)
				return list_error("--pp-schedule", n, 5, "1f1b,zero_bubble");
			for (int i = 0; i < n; i++) {
				static const char *const known[] = {"1f1b", "interleaved", "gpipe", "zero_bubble", "zbv"};
				bool ok = false;
				for (size_t k = 0; k < RM_ARRAY_SIZE(known); k++)
					ok |= strcmp(list[i], known[k]) == 0;
				if (!ok)
					return cli_usage_error("plan",
							       "--pp-schedule: '%s' is not 1f1b, interleaved, gpipe, zero_bubble or zbv",
							       list[i]);
				snprintf(req.pp_schedules[i], sizeof(req.pp_schedules[0]), "%s", list[i]);
			}
			req.n_pp_schedules = n;
			break;
		}
		case 256:
			if (!cli_parse_shard("plan", optarg, &shard, &shards))
				return CLI_EXIT_USAGE;
			break;
		case 'h':
			plan_usage(stdout);
			return CLI_EXIT_OK;
		default:
			return cli_option_error("plan", argc, argv, shortopts, longopts);
		}
	}
	(void)v;
	if (optind >= argc)
		return cli_usage_error("plan", "missing MODEL (a preset such as llama-3-70b, or a config.json)");
	if (optind + 1 != argc)
		return cli_usage_error("plan", "unexpected argument '%s'%s", argv[optind + 1],
				       cli_jobs_hint(argc, argv, optind));
	snprintf(req.model, sizeof(req.model), "%s", argv[optind]);
	int nh = split_list(hardware, req.hardware, RM_PLAN_MAX_HW);
	if (nh < 1)
		return list_error("--hardware", nh, RM_PLAN_MAX_HW, "h100-sxm,h200-sxm");
	req.n_hardware = nh;
	if (prices) {
		char list[RM_PLAN_MAX_HW][256];
		int n = split_list(prices, list, RM_PLAN_MAX_HW);
		if (n < 1)
			return list_error("--price", n, RM_PLAN_MAX_HW, "h100-sxm=2.5,h200-sxm=3.4");
		for (int i = 0; i < n; i++) {
			char *eq = strchr(list[i], '=');
			double p = NAN;
			if (!eq || !parse_amount(eq + 1, &p) || !(p >= 0))
				return cli_usage_error("plan", "--price: expected HARDWARE=PRICE (h100-sxm=2.5), got '%s'", list[i]);
			*eq = '\0';
			int h = -1;
			for (int k = 0; k < nh; k++)
				if (strcmp(req.hardware[k], list[i]) == 0)
					h = k;
			if (h < 0)
				return cli_usage_error("plan", "--price: '%s' is not one of --hardware %s", list[i], hardware);
			if (req.price[h] >= 0)
				return cli_usage_error("plan", "--price: %s is priced twice", list[i]);
			req.price[h] = p;
		}
	}
	if (req.max_gpus > 0 && req.n_gpus > 0 && !scaling)
		return cli_usage_error("plan", "--max-gpus tops the ladder of GPU counts; --gpus gives the counts: one or the "
					       "other (with --scaling, --max-gpus tops the scaling curves)");
	if (req.budget > 0 && req.deadline_s > 0)
		return cli_usage_error("plan", "--deadline and --budget: give one constraint");
	if (req.budget > 0)
		for (int h = 0; h < nh; h++)
			if (req.price[h] < 0)
				return cli_usage_error("plan", "--budget needs a --price per GPU-hour of every hardware; %s has none",
						       req.hardware[h]);
	if ((req.budget > 0 || req.deadline_s > 0) && req.tokens <= 0)
		return cli_usage_error("plan", "--deadline and --budget need --tokens");
	if (plot_dir) {
		/* a folder to write into, checked before any simulation */
		struct stat pst;
		int prc = cli_plot_dir_check("plan", plot_dir);
		if (prc != CLI_EXIT_OK)
			return prc;
		if (db) {
			struct stat dst;
			if (strcmp(db, plot_dir) == 0 || (stat(db, &dst) == 0 && stat(plot_dir, &pst) == 0 &&
							   dst.st_dev == pst.st_dev && dst.st_ino == pst.st_ino))
				return cli_usage_error("plan", "--plot %s is the --db file", plot_dir);
		}
		prc = cli_plot_dir_create(plot_dir);
		if (prc != CLI_EXIT_OK)
			return prc;
		/* nothing written may land on what the plan reads: the database, a config.json */
		static const char *const files[] = {"points.dat",	 "plots.gp",	     "time-to-train.svg",
						    "cost-vs-time.svg", "time-to-train.png", "cost-vs-time.png"};
		char paths[6][1200];
		const char *outs[6];
		for (int i = 0; i < 6; i++) {
			snprintf(paths[i], sizeof(paths[i]), "%s/%s", plot_dir, files[i]);
			outs[i] = paths[i];
		}
		const char *ins[] = {db, req.model};
		int crc = cli_check_outputs("plan", outs, 6, ins, 2);
		if (crc != CLI_EXIT_OK)
			return crc;
	}
	if (shards > 1 && !db)
		return cli_usage_error("plan", "--shard needs --db: each shard keeps its rows in its own file for remora merge");
	if (shards > 1 && scaling)
		return cli_usage_error("plan", "--scaling scales the answer, which one shard cannot know: merge the shards "
					       "and run plan --db MERGED --scaling (the merged rows are not simulated again)");
	cli_sweep split;
	int src = cli_sweep_begin("plan", &split, db, shard, shards);
	if (src != CLI_EXIT_OK) {
		cli_sweep_end(&split);
		return src;
	}
	rm_plan_options opt = {.db_path = db, .jobs = (int)jobs, .shard_index = split.shard, .shard_count = split.shards};
	if (split.mpi) {
		opt.db_path = split.rank_db;
		opt.merged_db = split.db;
		opt.gather = cli_sweep_gather_fn;
		opt.gather_user = &split;
	}
	/* -vv: each search's header and a line per candidate; else on a terminal the header and a
	 * progress line with the rate and ETA per search; nothing on a pipe */
	progress_ctx pctx = {.search = ""};
	opt.user = &pctx;
	if (rm_log_get_level() >= RM_LOG_DEBUG && cli_sweep_is_root(&split)) {
		opt.progress = progress;
		opt.on_row = row_line;
	} else if (isatty(STDERR_FILENO) && !json && cli_sweep_is_root(&split)) {
		opt.progress = progress;
		opt.search_progress = search_progress;
	}
	rm_plan_result res;
	rm_status pst = rm_plan_run(&req, rm_calib_hw_resolver, &opt, &res, &err);
	/* the scaling curves: on every rank under MPI (their searches are split too); a shard alone
	 * does not know the answer to scale */
	rm_plan_result strong, weak;
	memset(&strong, 0, sizeof(strong));
	memset(&weak, 0, sizeof(weak));
	const rm_plan_row *sw = NULL;
	bool shard_only = shards > 1 && !split.mpi;
	if (pst == RM_OK && scaling && !shard_only) {
		for (int h = 0; h < nh && !sw; h++)
			if (res.chosen[h] >= 0)
				sw = &res.points[res.chosen[h]].best;
		if (!sw)
			pst = rm_error_set(&err, RM_INVALID, NULL, 0, 0, "plan --scaling: no plan to scale (%s)", res.why_none[0]);
		if (pst == RM_OK)
			pst = scaling_run(&req, sw, res.gpn[sw->hw], false, &opt, &strong, &err);
		if (pst == RM_OK)
			pst = scaling_run(&req, sw, res.gpn[sw->hw], true, &opt, &weak, &err);
	}
	if (pst != RM_OK || !cli_sweep_is_root(&split) || shard_only) {
		int prc = pst != RM_OK ? cli_fail(&err) : CLI_EXIT_OK;
		if (pst == RM_OK && shard_only && json) {
			json_t *doc = json_object();
			json_object_set_new(doc, "schema", json_string("remora.plan.shard/1"));
			json_object_set_new(doc, "db", rm_json_string(db));
			json_object_set_new(doc, "shard", json_integer(shard + 1));
			json_object_set_new(doc, "shards", json_integer(shards));
			json_object_set_new(doc, "searches", json_integer(res.n_points));
			prc = cli_print_json(doc);
		} else if (pst == RM_OK && shard_only)
			printf("%s: shard %d/%d of each of the plan's %d searches (one per hardware and GPU count); merge the "
			       "shards with remora merge OUT.db and plan --db OUT.db\n",
			       db, shard + 1, shards, res.n_points);
		rm_plan_result_finish(&strong);
		rm_plan_result_finish(&weak);
		rm_plan_result_finish(&res);
		cli_sweep_end(&split);
		return prc;
	}
	/* every point's winner, in the objective's order */
	const rm_plan_row **plans = rm_new(const rm_plan_row *, (size_t)(res.n_points + 1));
	int np = 0;
	for (int i = 0; i < res.n_points; i++)
		if (res.points[i].have_best)
			plans[np++] = &res.points[i].best;
	g_req = &req;
	qsort(plans, (size_t)np, sizeof(plans[0]), cmp_plans);
	int rc = CLI_EXIT_OK;
	int64_t gb = req.global_batch_min > 0 ? req.global_batch_min : (INT64_C(4) << 20) / (req.seq_len > 0 ? req.seq_len : 8192);
	int64_t seq = req.seq_len > 0 ? req.seq_len : 8192;
	if (plot_dir) {
		if (req.tokens <= 0)
			rm_log_warn("--plot draws time to train: give --tokens; nothing plotted");
		else if ((rc = write_plan_plots(plot_dir, &req, &res, all_priced(&req))) != CLI_EXIT_OK)
			goto out;
	}
	if (json) {
		json_t *doc = json_object();
		json_t *rq = json_object();
		json_object_set_new(rq, "model", json_string(req.model));
		json_object_set_new(rq, "tokens", json_real(req.tokens));
		json_object_set_new(rq, "seq_len", json_integer(seq));
		json_object_set_new(rq, "global_batch", json_integer(gb));
		json_object_set_new(rq, "runtime", json_string(req.runtime));
		json_object_set_new(rq, "deadline_s", req.deadline_s > 0 ? json_real(req.deadline_s) : json_null());
		json_object_set_new(rq, "budget", req.budget > 0 ? json_real(req.budget) : json_null());
		json_object_set_new(doc, "request", rq);
		json_t *arr = json_array();
		for (int i = 0; i < np; i++) {
			bool answer = false;
			for (int h = 0; h < nh; h++)
				answer |= res.chosen[h] >= 0 && &res.points[res.chosen[h]].best == plans[i];
			json_array_append_new(arr, row_json(&req, plans[i], answer));
		}
		json_object_set_new(doc, "plans", arr);
		json_t *none = json_object();
		for (int h = 0; h < nh; h++)
			if (res.chosen[h] < 0)
				json_object_set_new(none, req.hardware[h], json_string(res.why_none[h]));
		json_object_set_new(doc, "no_plan", none);
		if (sw) {
			json_t *sc = json_object();
			json_object_set_new(sc, "strong", scaling_json(&req, &strong));
			json_object_set_new(sc, "weak", scaling_json(&req, &weak));
			json_object_set_new(doc, "scaling", sc);
		}
		rc = cli_print_json(doc);
		goto out;
	}
	if (req.global_batch_max > req.global_batch_min)
		printf("plan for %s: seq %lld, global batch %lld to %lld sequences, scheduler.mode %s\n", req.model,
		       (long long)seq, (long long)req.global_batch_min, (long long)req.global_batch_max, req.runtime);
	else
		printf("plan for %s: seq %lld, global batch %lld sequences (%.2fM tokens per step), scheduler.mode %s\n",
		       req.model, (long long)seq, (long long)gb, (double)(gb * seq) / 1e6, req.runtime);
	if (req.tokens > 0) {
		const char *sfx = req.tokens >= 1e12 ? "T" : req.tokens >= 1e9 ? "B" : req.tokens >= 1e6 ? "M" : "K";
		double div = req.tokens >= 1e12 ? 1e12 : req.tokens >= 1e9 ? 1e9 : req.tokens >= 1e6 ? 1e6 : 1e3;
		printf("  tokens      %.6g (%.6g%s)\n", req.tokens, req.tokens / div, sfx);
	}
	else
		printf("  tokens      none given: what fits, and how fast\n");
	if (req.deadline_s > 0) {
		char d[32];
		duration_text(req.deadline_s, d, sizeof(d));
		printf("  deadline    %s: the fewest GPUs that make it\n", d);
	}
	else if (req.budget > 0)
		printf("  budget      %.0f: the fastest plan within it\n", req.budget);
	else if (req.tokens > 0)
		printf("  objective   %s (add --deadline or --budget for another answer)\n",
		       all_priced(&req) ? "the lowest cost" : "the fewest GPU-hours");
	if (req.global_batch_max > req.global_batch_min)
		printf("  global batch %lld to %lld sequences (powers of two from the first): a convergence choice; a "
		       "larger one is faster, not better\n",
		       (long long)req.global_batch_min, (long long)req.global_batch_max);
	else
		printf("  global batch is a convergence choice (--global-batch): remora keeps it fixed\n");
	for (int h = 0; h < nh; h++) {
		if (req.price[h] >= 0)
			printf("\n%s  (cost in price units: --price %g per GPU-hour x GPU-hours)\n", req.hardware[h], req.price[h]);
		else
			printf("\n%s  (no --price: costs not shown)\n", req.hardware[h]);
		printf("  %6s %5s  %-42s %8s %9s %6s %8s %12s %10s %10s\n", "GPUs", "nodes", "layout", "mb x ga", "tok/s/GPU",
		       "MFU", "peak GiB", "time", "GPU-hours", "cost");
		for (int i = 0; i < res.n_points; i++) {
			const rm_plan_point *pt = &res.points[i];
			if (pt->hw != h)
				continue;
			if (!pt->have_best) {
				char why[320];
				const rm_plan_row *least = NULL;
				for (int k = 0; k < pt->n_layouts; k++)
					if (pt->layouts[k].r.ok &&
					    (!least || pt->layouts[k].r.peak_memory_bytes < least->r.peak_memory_bytes))
						least = &pt->layouts[k];
				char a[16], b[16];
				if (least)
					snprintf(why, sizeof(why), "nothing fits: at best %s GiB of %s usable",
						 gib(least->r.peak_memory_bytes, a), gib(least->r.memory_capacity_bytes, b));
				else
					snprintf(why, sizeof(why), "no layout: %s",
						 pt->n_rejected ? pt->rejected_why[0] : "the degrees tried divide nothing");
				printf("  %6lld %5lld  %s\n", (long long)pt->gpus, (long long)((pt->gpus + res.gpn[h] - 1) / res.gpn[h]),
				       why);
				continue;
			}
			const rm_plan_row *b = &pt->best;
			char lt[200], mg[16], t[32], mb[32], cost[32];
			layout_text(b, lt, sizeof(lt));
			duration_text(b->time_to_train_s, t, sizeof(t));
			snprintf(mb, sizeof(mb), "%lld x %lld", (long long)b->r.c.micro_batch, (long long)b->grad_accum);
			if (b->cost >= 0)
				snprintf(cost, sizeof(cost), "%.0f", b->cost);
			else
				snprintf(cost, sizeof(cost), "-");
			char gh[32];
			if (b->time_to_train_s > 0)
				snprintf(gh, sizeof(gh), "%.0f", b->gpu_hours);
			else
				snprintf(gh, sizeof(gh), "-");
			printf("%s %6lld %5lld  %-42s %8s %9.0f %5.1f%% %8s %12s %10s %10s\n", i == res.chosen[h] ? ">" : " ",
			       (long long)b->gpus, (long long)b->nodes, lt, mb, b->r.tokens_per_s_per_gpu, 100.0 * b->r.mfu,
			       gib(b->r.peak_memory_bytes, mg), t, gh, cost);
		}
		if (res.chosen[h] < 0) {
			printf("  no plan: %s\n", res.why_none[h]);
			continue;
		}
		const rm_plan_point *pt = &res.points[res.chosen[h]];
		const rm_plan_row *w = &pt->best;
		char lt[200], t[32];
		layout_text(w, lt, sizeof(lt));
		duration_text(w->time_to_train_s, t, sizeof(t));
		printf("\n  answer     %lld GPUs (%lld node%s), %s, %.0f tokens/s per GPU, MFU %.1f%%", (long long)w->gpus,
		       (long long)w->nodes, w->nodes == 1 ? "" : "s", lt, w->r.tokens_per_s_per_gpu, 100.0 * w->r.mfu);
		if (req.tokens > 0)
			printf(", %s, %.0f GPU-hours", t, w->gpu_hours);
		if (w->cost >= 0)
			printf(", cost %.0f", w->cost);
		printf("\n");
		if (w->pp > 1) {
			printf("  per stage  peak");
			for (int k = 0; k < w->n_stages; k++) {
				char g[16];
				printf(" %s", gib(w->stage_peak_bytes[k], g));
			}
			printf(" GiB (bubble %.1f%%)\n", 100.0 * w->bubble_fraction);
		}
		print_paste(&req, w, res.gpn[h], seq);
		/* the leading alternatives at the same GPU count, and why they lose */
		rm_plan_row *alt = rm_new(rm_plan_row, (size_t)pt->n_layouts + 1);
		memcpy(alt, pt->layouts, sizeof(rm_plan_row) * (size_t)pt->n_layouts);
		qsort(alt, (size_t)pt->n_layouts, sizeof(rm_plan_row), cmp_rows);
		if (pt->n_layouts + pt->n_rejected <= 1)
			printf("  instead    nothing: the only layout at %lld GPUs (--tp, --pp and the others widen it)\n",
			       (long long)pt->gpus);
		else
			printf("  instead    at %lld GPUs:\n", (long long)pt->gpus);
		int shown = 0;
		for (int i = 0; i < pt->n_layouts && shown < top; i++) {
			if (strcmp(alt[i].layout, w->layout) == 0)
				continue;
			char a[200], why[300];
			layout_text(&alt[i], a, sizeof(a));
			why_loses(&alt[i], w, why, sizeof(why));
			printf("    %-42s %s\n", a, why);
			shown++;
		}
		for (int i = 0; i < pt->n_rejected && shown < top; i++, shown++) {
			rm_plan_row rr;
			row_of_overrides(pt->rejected[i], &rr);
			char a[200];
			layout_text(&rr, a, sizeof(a));
			printf("    %-42s %s\n", a, pt->rejected_why[i]);
		}
		free(alt);
	}
	if (req.tokens > 0 && nh > 1 && np > 0) {
		/* across hardware: the objective's pick among the answers */
		const rm_plan_row *o = NULL;
		for (int i = 0; i < np && !o; i++)
			for (int h = 0; h < nh; h++)
				if (res.chosen[h] >= 0 && &res.points[res.chosen[h]].best == plans[i])
					o = plans[i];
		if (o) {
			char t[32];
			duration_text(o->time_to_train_s, t, sizeof(t));
			printf("\noverall: %s, %lld GPUs, %s, %.0f GPU-hours", req.hardware[o->hw], (long long)o->gpus, t,
			       o->gpu_hours);
			if (o->cost >= 0)
				printf(", cost %.0f", o->cost);
			printf(" (%s)\n", req.deadline_s > 0 ? "the fewest GPU-hours within the deadline"
					   : req.budget > 0	 ? "the fastest within the budget"
					   : all_priced(&req)	 ? "the lowest cost"
								 : "the fewest GPU-hours");
		}
	}
	if (req.tokens > 0 && np > 1) {
		/* per hardware, the front of time to train against GPUs; across hardware, of time to
		 * train against cost (a point is on a front when no other is both at most as large on
		 * both axes and smaller on one) */
		printf("\nfront: time to train vs GPUs (no other plan of the hardware is faster on as few GPUs)\n");
		for (int i = 0; i < res.n_points; i++) {
			const rm_plan_point *pt = &res.points[i];
			if (!pt->have_best)
				continue;
			if (dominated(&res, i, false))
				continue;
			char t[32];
			duration_text(pt->best.time_to_train_s, t, sizeof(t));
			printf("  %-12s %6lld GPUs  %12s  %10.0f GPU-hours\n", req.hardware[pt->hw], (long long)pt->gpus, t,
			       pt->best.gpu_hours);
		}
		bool priced = true;
		for (int h = 0; h < nh; h++)
			priced &= req.price[h] >= 0;
		if (priced) {
			printf("\nfront: time to train vs cost (no other plan is faster for as little)\n");
			for (int i = 0; i < res.n_points; i++) {
				const rm_plan_point *pt = &res.points[i];
				if (!pt->have_best)
					continue;
				if (dominated(&res, i, true))
					continue;
				char t[32];
				duration_text(pt->best.time_to_train_s, t, sizeof(t));
				printf("  %-12s %6lld GPUs  %12s  cost %12.0f\n", req.hardware[pt->hw], (long long)pt->gpus, t,
				       pt->best.cost);
			}
		}
	}
	if (sw) {
		char lt[200], title[512];
		layout_text(sw, lt, sizeof(lt));
		snprintf(title, sizeof(title),
			 "strong scaling on %s: the global batch fixed at %lld sequences; TP %lld, PP %lld kept, the rest "
			 "re-searched per count",
			 req.hardware[sw->hw], (long long)sw->global_batch, (long long)sw->tp, (long long)sw->pp);
		print_scaling(title, &strong);
		snprintf(title, sizeof(title), "weak scaling on %s: %.3g sequences per GPU (%lld on %lld GPUs)",
			 req.hardware[sw->hw], (double)sw->global_batch / (double)sw->gpus, (long long)sw->global_batch,
			 (long long)sw->gpus);
		print_scaling(title, &weak);
	}
out:
	rm_plan_result_finish(&strong);
	rm_plan_result_finish(&weak);
	free(plans);
	rm_plan_result_finish(&res);
	cli_sweep_end(&split);
	return rc;
}
