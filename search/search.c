/*
 * The candidate space, evaluation and the sweep (remora/search.h). The SQLite store is in
 * search/store.c.
 */
#include <assert.h>
#include <math.h>
#include <stddef.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "remora/pipeline.h"
#include "search_internal.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the space ---- */

/* Adds a policy unless the space has it (a linear scan: at most 2 x 4096 subsets + the listed
 * policies, once per search). The array grows: no candidate is ever dropped. */
static void add_policy(rm_search *s, const char *expr, const char *label)
{
	for (int i = 0; i < s->n_policies; i++)
		if (strcmp(s->policies[i].expr, expr) == 0)
			return;
	if (s->n_policies == s->cap_policies) {
		s->cap_policies = s->cap_policies ? 2 * s->cap_policies : 64;
		s->policies = rm_xrealloc(s->policies, (size_t)s->cap_policies * sizeof(search_policy));
	}
	search_policy *p = &s->policies[s->n_policies++];
	memset(p, 0, sizeof(*p));
	snprintf(p->expr, sizeof(p->expr), "%s", expr);
	snprintf(p->label, sizeof(p->label), "%s", label);
}

static const char *short_name(const char *canonical)
{
	static const struct {
		const char *name, *abbr;
	} abbr[] = {
		{"dot_attention_query", "q"},   {"dot_attention_key", "k"},     {"dot_attention_value", "v"},
		{"dot_attention_out", "out"},   {"dot_mlp_gate", "gate"},       {"dot_mlp_up", "up"},
		{"dot_mlp_out", "mlp_out"},     {"attention_context", "ctx"},   {"pre_attention_norm", "attn_norm"},
		{"pre_mlp_norm", "mlp_norm"},   {"rotary_query", "rot_q"},      {"rotary_key", "rot_k"},
		{"mlp_activation", "act"},      {"mlp_hidden", "hidden"},
	};
	for (size_t i = 0; i < RM_ARRAY_SIZE(abbr); i++)
		if (strcmp(canonical, abbr[i].name) == 0)
			return abbr[i].abbr;
	return canonical;
}

/* save_only_these_names / offload of a subset of the candidate names (bit mask). */
static void add_subset(rm_search *s, const char names[][48], int n, uint64_t mask, bool offload)
{
	char expr[1200], label[160];
	size_t u = (size_t)snprintf(expr, sizeof(expr), "%s",
				    offload ? "save_and_offload_only_these_names([], [" : "save_only_these_names(");
	size_t lu = (size_t)snprintf(label, sizeof(label), "%s", offload ? "offload: " : "save: ");
	bool first = true;
	for (int i = 0; i < n; i++) {
		if (!(mask & (UINT64_C(1) << i)))
			continue;
		const char *c = rm_checkpoint_canonical(names[i]) ? rm_checkpoint_canonical(names[i]) : names[i];
		u += (size_t)snprintf(expr + u, u < sizeof(expr) ? sizeof(expr) - u : 0, "%s'%s'", first ? "" : ", ", c);
		lu += (size_t)snprintf(label + lu, lu < sizeof(label) ? sizeof(label) - lu : 0, "%s%s", first ? "" : ",",
				       short_name(c));
		first = false;
	}
	snprintf(expr + u, u < sizeof(expr) ? sizeof(expr) - u : 0, "%s", offload ? "])" : ")");
	if (first) {
		if (offload)
			return;
		snprintf(label, sizeof(label), "save: (none)");
	}
	add_policy(s, expr, label);
}

/* Recompute FLOPs a name saves per byte it keeps (for ordering beyond 12 names). */
static double name_value(const rm_search *s, const char *name)
{
	const rm_graph *g = &s->res0.wl->layer;
	const char *c = rm_checkpoint_canonical(name);
	int v = c ? rm_graph_find_value(g, c) : -1;
	if (v < 0 || g->values[v].producer < 0)
		return 0;
	return g->ops[g->values[v].producer].flops / (double)(g->values[v].bytes + 1);
}

static rm_status build_space(rm_search *s, rm_error *err)
{
	/* a name listed twice (or under two spellings) would double the space for nothing */
	rm_scenario *sc = &s->base;
	int kept = 0, dups = 0, first_dup = -1;
	for (int i = 0; i < sc->n_search_names; i++) {
		const char *ci = rm_checkpoint_canonical(sc->search_names[i]) ? rm_checkpoint_canonical(sc->search_names[i])
									    : sc->search_names[i];
		bool dup = false;
		for (int j = 0; j < kept && !dup; j++) {
			const char *cj = rm_checkpoint_canonical(sc->search_names[j]) ? rm_checkpoint_canonical(sc->search_names[j])
										     : sc->search_names[j];
			dup = strcmp(ci, cj) == 0;
		}
		if (dup) {
			if (dups++ == 0) {
				/* one warning, at the list's position when the file gives one */
				char at[600] = "";
				const rm_scenario_pos *p = rm_scenario_key_pos(sc, "search.names");
				if (sc->path[0] && p && p->line > 0)
					snprintf(at, sizeof(at), "%s:%d:%d: ", sc->path, p->line, p->column);
				first_dup = i;
				rm_log_warn("%ssearch.names[%d] \"%s\" is listed already; counted once", at, i,
					    sc->search_names[i]);
			}
		} else if (kept != i)
			memcpy(sc->search_names[kept++], sc->search_names[i], sizeof(sc->search_names[0]));
		else
			kept++;
	}
	if (dups > 1)
		rm_log_warn("search.names: %d more names after [%d] are listed already; each counted once", dups - 1,
			    first_dup);
	sc->n_search_names = kept;
	int n = sc->n_search_names;
	if (n > 0 && n <= 12) {
		for (uint64_t mask = 0; mask < (UINT64_C(1) << n); mask++) {
			add_subset(s, (const char(*)[48])sc->search_names, n, mask, false);
			if (sc->search_offload)
				add_subset(s, (const char(*)[48])sc->search_names, n, mask, true);
		}
	} else if (n > 12) {
		/* nested prefixes by value: every other subset of the same size keeps more bytes for
		 * less recompute saved, so it is dominated in (time, memory) */
		int order[RM_SCENARIO_MAX_LIST];
		for (int i = 0; i < n; i++)
			order[i] = i;
		for (int i = 0; i < n; i++)
			for (int j = i + 1; j < n; j++)
				if (name_value(s, sc->search_names[order[j]]) > name_value(s, sc->search_names[order[i]])) {
					int t = order[i];
					order[i] = order[j];
					order[j] = t;
				}
		char sorted[RM_SCENARIO_MAX_LIST][48];
		for (int i = 0; i < n; i++)
			memcpy(sorted[i], sc->search_names[order[i]], 48);
		for (int k = 0; k <= n && k < 64; k++) {
			uint64_t mask = k == 64 ? ~UINT64_C(0) : (UINT64_C(1) << k) - 1;
			add_subset(s, (const char (*)[48])sorted, n, mask, false);
			if (sc->search_offload)
				add_subset(s, (const char (*)[48])sorted, n, mask, true);
		}
	}
	for (int i = 0; i < sc->n_search_policies; i++) {
		rm_remat_policy *p = rm_remat_policy_parse(sc->search_policies[i], err);
		if (!p) {
			rm_error_prefix(err, "search.policies[%d] \"%s\": ", i, sc->search_policies[i]);
			return err->status;
		}
		rm_remat_policy_destroy(p);
		add_policy(s, sc->search_policies[i], sc->search_policies[i]);
	}
	for (int i = 0; i < sc->n_search_micro_batches; i++) {
		bool dup = false;
		for (int j = 0; j < s->n_mbs; j++)
			dup |= s->mbs[j] == sc->search_micro_batches[i];
		if (!dup)
			s->mbs[s->n_mbs++] = sc->search_micro_batches[i];
		else
			rm_log_warn("search.micro_batches[%d] %lld is listed already; counted once", i,
				    (long long)sc->search_micro_batches[i]);
	}
	if (s->n_mbs == 0)
		s->mbs[s->n_mbs++] = s->res0.train.micro_batch;
	s->n_variants = 0;
	if (s->res0.sched.mode == RM_SCHED_FSDP2 && sc->n_search_flag_variants > 0) {
		const rm_scenario_pos *at = rm_scenario_key_pos(sc, "search.flag_variants");
		if (at && at->line > 0)
			rm_log_warn("%s:%d:%d: search.flag_variants are XLA flags; scheduler.mode fsdp2 has none, so each "
				    "candidate runs once",
				    sc->path[0] ? sc->path : "scenario", at->line, at->column);
		else
			rm_log_warn("%s: search.flag_variants are XLA flags; scheduler.mode fsdp2 has none, so each "
				    "candidate runs once",
				    sc->path[0] ? sc->path : "scenario");
	}
	for (int i = 0; i < sc->n_search_flag_variants && s->res0.sched.mode != RM_SCHED_FSDP2; i++) {
		bool dup = false;
		for (int j = 0; j < s->n_variants; j++)
			dup |= strcmp(s->variants[j], sc->search_flag_variants[i]) == 0;
		if (!dup)
			snprintf(s->variants[s->n_variants++], sizeof(s->variants[0]), "%s", sc->search_flag_variants[i]);
	}
	if (s->n_variants == 0)
		s->variants[s->n_variants++][0] = '\0';
	s->include_ideal = sc->search_include_ideal;
	if (s->n_policies == 0)
		return rm_error_set(err, RM_INVALID, sc->path, 0, 0,
				    "the search space is empty: give search.names (checkpoint names whose subsets "
				    "to try) or search.policies (e.g. [nothing_saveable, dots_saveable])");
	int64_t per = (int64_t)s->n_policies * s->n_mbs * (s->n_par > 0 ? s->n_par : 1);
	s->count = 1 + per * (s->n_variants + (s->include_ideal ? 1 : 0));
	if (s->count > sc->search_max_candidates)
		return rm_error_set(err, RM_RANGE, sc->path, 0, 0,
				    "the search space has %lld candidates (%d policies x %d micro-batches x %d flag "
				    "variants%s x %d parallelism variants), over search.max_candidates=%lld: narrow "
				    "search.names (%d names give %d subsets%s), search.micro_batches, search.flag_variants "
				    "or search.parallelism, or raise search.max_candidates",
				    (long long)s->count, s->n_policies, s->n_mbs, s->n_variants,
				    s->include_ideal ? " + ideal" : "", s->n_par > 0 ? s->n_par : 1,
				    (long long)sc->search_max_candidates, n,
				    n <= 12 ? 1 << n : n + 1, sc->search_offload ? ", doubled by search.offload" : "");
	return RM_OK;
}

/* ---- parallelism variants ---- */

/* Whether an override sets a layout key: parallelism.*, cluster.*, scheduler.*,
 * training.global_batch or grad_accum, remat.scan (what a layout needs; the policy, micro-batch
 * and flags are the search's other axes). */
static bool layout_key(const char *assignment, rm_error *err)
{
	static const char *const ok[] = {"parallelism.", "cluster.", "scheduler.", "training.global_batch=",
					 "training.grad_accum=", "remat.scan="};
	for (size_t i = 0; i < RM_ARRAY_SIZE(ok); i++)
		if (strncmp(assignment, ok[i], strlen(ok[i])) == 0)
			return true;
	rm_error_set(err, RM_INVALID, NULL, 0, 0,
		     "\"%.*s\" is not a layout key (parallelism.*, cluster.*, scheduler.*, training.global_batch or "
		     "grad_accum, remat.scan); policies, micro-batches and flags are the search's other axes",
		     (int)strcspn(assignment, "="), assignment);
	return false;
}

/* Applies a variant's overrides ("KEY=VALUE KEY=VALUE", --set syntax; a value in brackets may
 * hold spaces) to sc; with layout_only, a key that is not a layout key is refused first. */
static rm_status apply_overrides(rm_scenario *sc, const char *list, bool layout_only, rm_error *err)
{
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", list);
	char *p = buf;
	while (*p) {
		while (*p == ' ')
			p++;
		if (!*p)
			break;
		char *q = p;
		int depth = 0;
		while (*q && (depth > 0 || *q != ' ')) {
			depth += *q == '[' || *q == '{';
			depth -= (*q == ']' || *q == '}') && depth > 0;
			q++;
		}
		char end = *q;
		*q = '\0';
		if (layout_only && !layout_key(p, err))
			return RM_INVALID;
		rm_status st = rm_scenario_set(sc, p, err);
		if (st != RM_OK)
			return st;
		if (!end)
			break;
		p = q + 1;
	}
	return RM_OK;
}

/* The resolved scenario of parallelism variant p. */
static const rm_scenario_resolved *par_resolved(const rm_search *s, int p)
{
	return s->par_owned[p] ? &s->par_res[p] : &s->res0;
}

/*
 * search.parallelism: each variant resolved as the scenario with its overrides. A variant that
 * does not resolve (degrees that do not divide, a pipelined one, which the search does not run)
 * is left out with a warning that gives the reason; none left is an error.
 */
static rm_status build_parallelism(rm_search *s, rm_error *err)
{
	const rm_scenario *sc = &s->base;
	s->n_par = 0;
	if (sc->n_search_parallelism == 0) {
		s->par[0][0] = '\0';
		s->par_owned[0] = false;
		s->par_gb[0] = sc->global_batch;
		s->n_par = 1;
		return RM_OK;
	}
	for (int i = 0; i < sc->n_search_parallelism && s->n_par < SEARCH_MAX_PAR; i++) {
		const char *v = sc->search_parallelism[i];
		bool dup = false;
		for (int j = 0; j < s->n_par; j++)
			dup |= strcmp(s->par[j], v) == 0;
		if (dup)
			continue;
		int k = s->n_par;
		snprintf(s->par[k], sizeof(s->par[k]), "%s", v);
		if (!v[strspn(v, " ")]) {
			s->par_owned[k] = false;
			s->par_gb[k] = sc->global_batch;
			s->n_par++;
			continue;
		}
		rm_scenario variant = s->base;
		rm_error e;
		rm_error_clear(&e);
		rm_status st = apply_overrides(&variant, v, true, &e);
		if (st == RM_OK)
			st = rm_scenario_resolve(&variant, s->resolver, &s->par_res[k], &e);
		/* refused at the scenario's micro-batch only (a global batch whose accumulation is
		 * too long to simulate there): kept if one of the searched micro-batches resolves;
		 * the others are error rows */
		for (int m = 0; st != RM_OK && e.status != RM_IO && m < sc->n_search_micro_batches; m++) {
			rm_scenario again = variant;
			if (sc->search_micro_batches[m] == (sc->micro_batch ? sc->micro_batch : 1))
				continue;
			again.micro_batch = sc->search_micro_batches[m];
			rm_error e2;
			rm_error_clear(&e2);
			if (rm_scenario_resolve(&again, s->resolver, &s->par_res[k], &e2) == RM_OK)
				st = RM_OK;
		}

		if (st != RM_OK) {
			rm_log_warn("search.parallelism[%d] \"%s\" left out: %s", i, v, e.msg);
			continue;
		}
		s->par_owned[k] = true;
		s->par_gb[k] = variant.global_batch;
		s->n_par++;
	}
	if (s->n_par == 0)
		return rm_error_set(err, RM_INVALID, sc->path, 0, 0,
				    "search.parallelism: no variant resolves (the warnings above say why)");
	if (sc->n_search_parallelism > SEARCH_MAX_PAR)
		rm_log_warn("search.parallelism: only the first %d variants are searched", SEARCH_MAX_PAR);
	return RM_OK;
}

/* Sequences one micro-batch step takes over the data-parallel GPUs (the scenario's rule:
 * micro_batch x fsdp / cp x dp_replicate). */
static int64_t search_sequences_per_micro_step(const rm_train_config *t)
{
	int64_t cp = t->cp > 0 ? t->cp : 1, rep = t->dp_replicate > 0 ? t->dp_replicate : 1;
	return t->micro_batch * (t->fsdp / cp) * rep;
}

/* ---- shards ---- */

static void decode(const rm_search *s, int64_t i, int *par, int *p, int *m, int *v);

/*
 * The predicted cost of one candidate of parallelism variant par at micro-batch m (par < 0: the
 * scenario as written), in layer-micro-steps: a step simulates every layer once per accumulated
 * micro-batch (docs/design.md "gradient accumulation (each micro-batch re-gathers weights)"), so
 * its events grow as layers x grad_accum; the micro-batch's size changes the costs of the ops,
 * not their number. A pipelined candidate resolves its own scenario and simulates each stage and
 * then the pipeline's schedule (remora/pipeline.h): counted twice. A micro-batch that does not
 * divide training.global_batch is an error row, which costs nothing: counted as 1.
 */
static double class_cost_of(const rm_search *s, int par, int m)
{
	const rm_scenario_resolved *res = par < 0 ? &s->res0 : par_resolved(s, par);
	rm_train_config t = res->train;
	int64_t ga = t.grad_accum > 0 ? t.grad_accum : 1;
	if (par >= 0) {
		t.micro_batch = s->mbs[m];
		if (s->par_gb[par] > 0) {
			/* the variant's global batch, as rm_search_create builds its workloads */
			int64_t per_step = search_sequences_per_micro_step(&t);
			if (per_step <= 0 || s->par_gb[par] % per_step != 0)
				return 1;
			ga = s->par_gb[par] / per_step;
		}
	}
	double layers = res->model.layers > 0 ? (double)res->model.layers : 1;
	return layers * (double)ga * (t.pp > 1 ? 2.0 : 1.0);
}

typedef struct shard_class {
	double cost;
	int id;
} shard_class;

/* Heaviest first; equal costs by class id, so the order is total. */
static int cmp_class(const void *a, const void *b)
{
	const shard_class *x = a, *y = b;
	if (x->cost != y->cost)
		return x->cost > y->cost ? -1 : 1;
	return (x->id > y->id) - (x->id < y->id);
}

/* The members of class c: 1 for the scenario as written, every policy and flag variant (and the
 * ideal runtime) of one (parallelism variant, micro-batch) otherwise. */
static int64_t class_size(const rm_search *s, int c)
{
	return c == 0 ? 1 : (int64_t)s->n_policies * (s->n_variants + (s->include_ideal ? 1 : 0));
}

/* Computes the dealing order's classes once: O(classes), nothing per candidate. */
static void build_shard_classes(rm_search *s)
{
	int n_par = s->n_par > 0 ? s->n_par : 1;
	s->n_classes = 1 + n_par * s->n_mbs;
	shard_class *cl = rm_new(shard_class, (size_t)s->n_classes);
	cl[0] = (shard_class){class_cost_of(s, -1, 0), 0};
	for (int par = 0; par < n_par; par++)
		for (int m = 0; m < s->n_mbs; m++) {
			int id = 1 + par * s->n_mbs + m;
			cl[id] = (shard_class){class_cost_of(s, par, m), id};
		}
	qsort(cl, (size_t)s->n_classes, sizeof(cl[0]), cmp_class);
	s->class_cost = rm_new(double, (size_t)s->n_classes);
	s->class_start = rm_new(int64_t, (size_t)s->n_classes);
	int64_t pos = 0;
	for (int i = 0; i < s->n_classes; i++) {
		s->class_cost[cl[i].id] = cl[i].cost;
		s->class_start[cl[i].id] = pos;
		pos += class_size(s, cl[i].id);
	}
	assert(pos == s->count);
	free(cl);
}

/* Candidate i's class and its rank among the class's members (index order). */
static int class_of(const rm_search *s, int64_t i, int64_t *rank)
{
	if (i == 0) {
		*rank = 0;
		return 0;
	}
	int64_t vv = s->n_variants + (s->include_ideal ? 1 : 0);
	int par, p, m, v;
	decode(s, i, &par, &p, &m, &v);
	*rank = (int64_t)p * vv + v;
	return 1 + par * s->n_mbs + m;
}

double rm_search_cost_estimate(const rm_search *s, int64_t i)
{
	int64_t rank;
	return s->class_cost[class_of(s, i, &rank)];
}

int64_t rm_search_shard_size(const rm_search *s, int k, int n)
{
	assert(n >= 1 && k >= 0 && k < n);
	/* every full round gives each shard one; the last, partial round runs forward on an even
	 * round and backward on an odd one */
	int64_t rounds = s->count / n, rem = s->count % n;
	bool extra = rounds % 2 == 0 ? k < rem : k >= n - rem;
	return rounds + (extra ? 1 : 0);
}

int rm_search_shard_of(const rm_search *s, int64_t i, int n)
{
	assert(i >= 0 && i < s->count && n >= 1);
	int64_t rank;
	int c = class_of(s, i, &rank);
	int64_t pos = s->class_start[c] + rank;
	/* snake order: round r deals positions r n .. r n + n - 1 to shards 0..n-1, the next round
	 * back from n-1 to 0, so the heaviest of each round alternates ends */
	int64_t round = pos / n, j = pos % n;
	return (int)(round % 2 == 0 ? j : n - 1 - j);
}

/* ---- lifecycle ---- */

void rm_search_destroy(rm_search *s)
{
	if (!s)
		return;
	search_store_close(s);
	for (int p = 0; p < s->n_par; p++) {
		for (int i = 0; i < s->n_mbs; i++)
			rm_workload_destroy(s->wl[p][i]);
		if (s->par_owned[p])
			rm_scenario_resolved_finish(&s->par_res[p]);
	}
	for (int i = 0; i < s->n_policies; i++)
		rm_remat_policy_destroy(s->policies[i].parsed);
	rm_scenario_resolved_finish(&s->res0);
	free(s->policies);
	free(s->class_cost);
	free(s->class_start);
	free(s);
}

rm_search *rm_search_create(const rm_scenario *sc, rm_hw_resolver resolver, rm_error *err)
{
	rm_search *s = rm_new(rm_search, 1);
	s->base = *sc;
	s->resolver = resolver;
	if (rm_scenario_resolve(&s->base, resolver, &s->res0, err) != RM_OK)
		goto fail;

	/* the scenario's identity: the digest of what it resolves to (everything but its search
	 * section, which only chooses candidates), cost-model revision included */
	rm_scenario_resolved_digest(&s->res0, s->scenario_hash);
	if (build_parallelism(s, err) != RM_OK || build_space(s, err) != RM_OK)
		goto fail;
	/* caches shared read-only by the workers (their warnings are the scenario's, given when it
	 * resolved) */
	bool was_quiet = rm_log_thread_quiet(true);
	for (int p = 0; p < s->n_par; p++)
		for (int i = 0; i < s->n_mbs; i++) {
			const rm_scenario_resolved *res = par_resolved(s, p);
			rm_train_config t = res->train;
			t.micro_batch = s->mbs[i];
			if (s->par_gb[p] > 0) {
				/* training.global_batch (the variant's) fixes the sequences per step: the
				 * micro-batch sets the accumulation, and one that does not divide it is
				 * no candidate (rm_search_evaluate says why) */
				int64_t per_step = search_sequences_per_micro_step(&t);
				if (s->par_gb[p] % per_step != 0)
					continue;
				t.grad_accum = s->par_gb[p] / per_step;
				/* the scenario's bound on one program (rm_scenario_resolve) */
				if (t.pp <= 1 && res->model.layers * t.grad_accum > RM_SCENARIO_MAX_LAYER_STEPS)
					continue;
			}
			s->wl[p][i] = rm_workload_create(&res->model, &t, err);
			if (!s->wl[p][i]) {
				rm_log_thread_quiet(was_quiet);
				rm_error_prefix(err, "search.micro_batches: %lld%s%s: ", (long long)s->mbs[i],
						s->par[p][0] ? " with " : "", s->par[p]);
				goto fail;
			}
		}
	rm_log_thread_quiet(was_quiet);
	for (int i = 0; i < s->n_policies; i++) {
		s->policies[i].parsed = rm_remat_policy_parse(s->policies[i].expr, err);
		if (!s->policies[i].parsed)
			goto fail;
		/* policies with the same plan give the same schedule */
		rm_remat_plan plan;
		if (rm_remat_plan_build(&s->res0.wl->layer, s->policies[i].parsed, &plan, err) != RM_OK)
			goto fail;
		s->policies[i].plan_hash = rm_hash_fnv1a(plan.fate, sizeof(plan.fate[0]) * (size_t)plan.n_values, RM_FNV1A_SEED);
		s->policies[i].canonical = i;
		for (int j = 0; j < i; j++)
			if (s->policies[j].plan_hash == s->policies[i].plan_hash) {
				s->policies[i].canonical = s->policies[j].canonical;
				break;
			}
		rm_remat_plan_finish(&plan);
	}
	for (int i = 0; i < s->n_variants; i++) {
		s->variant_flags[i] = s->res0.flags;
		if (rm_xla_flags_parse(s->variants[i], &s->variant_flags[i], err) != RM_OK) {
			rm_error_prefix(err, "search.flag_variants[%d]: ", i);
			goto fail;
		}
	}
	build_shard_classes(s);
	return s;
fail:
	rm_search_destroy(s);
	return NULL;
}

void rm_search_set_cost_model(rm_search *s, const rm_cost_model *cost)
{
	s->cost = cost;
}

rm_sched_mode rm_search_runtime(const rm_search *s)
{
	return s->res0.sched.mode == RM_SCHED_FSDP2 ? RM_SCHED_FSDP2 : RM_SCHED_XLA;
}

const rm_memory_budget *rm_search_memory_budget(const rm_search *s)
{
	return &s->res0.memory;
}

int64_t rm_search_jax_pool_bytes(const rm_search *s)
{
	if (s->res0.allocator != RM_SIM_ALLOC_JAX_PREALLOC)
		return 0;
	double f = s->res0.alloc_fraction > 0 ? s->res0.alloc_fraction : RM_SIM_JAX_MEM_FRACTION;
	return (int64_t)(f * (double)s->res0.hw.hbm_bytes);
}

int64_t rm_search_count(const rm_search *s)
{
	return s->count;
}

/* Index -> (parallelism variant, policy, micro-batch, flag variant or ideal). */
static void decode(const rm_search *s, int64_t i, int *par, int *p, int *m, int *v)
{
	int64_t vv = s->n_variants + (s->include_ideal ? 1 : 0);
	int64_t k = i - 1;
	*v = (int)(k % vv);
	k /= vv;
	*m = (int)(k % s->n_mbs);
	k /= s->n_mbs;
	*p = (int)(k % s->n_policies);
	*par = (int)(k / s->n_policies);
}

int64_t rm_search_ideal_of(const rm_search *s, int64_t i)
{
	if (i <= 0 || i >= s->count || !s->include_ideal)
		return -1;
	int par, p, m, v;
	decode(s, i, &par, &p, &m, &v);
	/* the variant is the index's fastest digit (decode): the ideal runtime is the last one */
	return i - v + s->n_variants;
}

void rm_search_candidate(const rm_search *s, int64_t i, rm_candidate *c)
{
	memset(c, 0, sizeof(*c));
	c->index = i;
	if (i == 0) {
		c->as_written = true;
		rm_remat_policy_format(s->res0.policy, c->policy, sizeof(c->policy));
		snprintf(c->label, sizeof(c->label), "as written");
		c->micro_batch = s->res0.train.micro_batch;
		c->ideal = s->res0.sched.mode == RM_SCHED_IDEAL;
	} else {
		int par, p, m, v;
		decode(s, i, &par, &p, &m, &v);
		snprintf(c->policy, sizeof(c->policy), "%s", s->policies[p].expr);
		snprintf(c->parallelism, sizeof(c->parallelism), "%s", s->par[par]);
		if (s->par[par][0]) {
			/* "[tp=2 sp=true] save: q,k": the overrides without their section */
			char shortp[160] = "";
			size_t u = 0;
			static const struct {
				const char *from, *to;
			} abbr[] = {{"parallelism.", ""}, {"pp_schedule=", ""}, {"virtual_stages=", "v"},
				    {"dp_replicate=", "rep="}, {"loss_parallel=", "lp="}, {"tp_embedding=", "emb="},
				    {"=true", ""}, {"training.", ""}, {"scheduler.", ""}, {"cluster.", ""}};
			for (const char *q = s->par[par]; *q && u + 1 < sizeof(shortp);) {
				bool hit = false;
				for (size_t a = 0; a < RM_ARRAY_SIZE(abbr) && !hit; a++) {
					size_t n = strlen(abbr[a].from);
					if (strncmp(q, abbr[a].from, n) == 0) {
						u += (size_t)snprintf(shortp + u, sizeof(shortp) - u, "%s", abbr[a].to);
						q += n;
						hit = true;
					}
				}
				if (!hit)
					shortp[u++] = *q++;
				if (u >= sizeof(shortp))
					u = sizeof(shortp) - 1;
			}
			shortp[u] = '\0';
			snprintf(c->label, sizeof(c->label), "[%s] %s", shortp, s->policies[p].label);
		} else {
			snprintf(c->label, sizeof(c->label), "%s", s->policies[p].label);
		}
		c->micro_batch = s->mbs[m];
		c->ideal = v == s->n_variants;
		if (!c->ideal)
			snprintf(c->flags, sizeof(c->flags), "%s", s->variants[v]);
	}
	rm_canon id;
	rm_canon_init(&id);
	rm_canon_str(&id, "run", s->scenario_hash);
	rm_canon_str(&id, "policy", c->policy);
	rm_canon_int(&id, "micro_batch", c->micro_batch);
	rm_canon_str(&id, "flags", c->flags);
	if (c->parallelism[0])
		rm_canon_str(&id, "parallelism", c->parallelism);
	rm_canon_int(&id, "ideal", c->ideal);
	rm_canon_int(&id, "as_written", c->as_written);
	uint8_t d[RM_SHA256_BYTES];
	rm_canon_digest(&id, d);
	rm_sha256_hex(d, c->key);
	rm_canon_finish(&id);
}

/* What a worker keeps between its candidates (rm_search_run): the collective prices and the
 * program storage. */
typedef struct search_reuse {
	rm_sim_prices *prices; /* NULL: each simulation prices its own shapes */
	rm_program *prog;      /* NULL: each candidate's program is a new one */
	rm_sim_storage *sim;   /* NULL: each simulation allocates its own arrays */
} search_reuse;

static void search_evaluate(const rm_search *s, const rm_candidate *c, const search_reuse *reuse,
			    rm_candidate_result *out);

/* Micro-batches a search builds of a longer step (rm_schedule_config.emit_micro_batches): the
 * first, three to find the period in (the fewest the engine takes: two starts to compare and
 * one untouched), the last. A step whose transient is longer is built whole. */
#define SEARCH_EMIT_MICRO_BATCHES 5
/* Trips a search builds of a scan's longer loops (rm_schedule_config.emit_loop_iters): the first,
 * four to find the period in, the last. With three (5 built) a third of the seed space's
 * evaluations reached no periodic state within them (the stretch's first trip starts while the
 * trip before it still runs); with four, 3% build the whole step instead. */
#define SEARCH_EMIT_LOOP_ITERS 6

/* Evaluates with explicit workload, policy and flags; reuse NULL: the reference path. */
static void evaluate(const rm_search *s, const rm_scenario_resolved *res, const rm_candidate *c, const rm_workload *wl,
		     const rm_remat_policy *pol, const rm_xla_flags *flags, const search_reuse *reuse,
		     rm_candidate_result *r)
{
	memset(r, 0, sizeof(*r));
	r->c = *c;
	rm_error err;
	rm_error_clear(&err);
	rm_schedule_config cfg = res->sched;
	cfg.wl = wl;
	cfg.policy = pol;
	cfg.flags = *flags;
	/* candidates run under the scenario's runtime (xla or fsdp2); ideal rows under the bound */
	cfg.mode = c->ideal ? RM_SCHED_IDEAL : res->sched.mode == RM_SCHED_FSDP2 ? RM_SCHED_FSDP2 : RM_SCHED_XLA;
	cfg.lean = true;
	if (s->cost)
		cfg.cost = s->cost; /* a test's own model; otherwise the resolved run's */
	cfg.into = reuse ? reuse->prog : NULL;
	/* a step of many micro-batches as a few, its middle ones extended by the engine once they
	 * repeat (remora/sim.h rm_sim_loop: the same metrics bit for bit); the reference path
	 * builds them all, and so does a step whose run reaches no periodic state */
	cfg.emit_micro_batches = reuse ? SEARCH_EMIT_MICRO_BATCHES : 0;
	cfg.emit_loop_iters = reuse ? SEARCH_EMIT_LOOP_ITERS : 0;
again:;
	rm_schedule_report rep;
	rm_program *prog = rm_schedule_build(&cfg, &rep, &err);
	if (!prog) {
		snprintf(r->error, sizeof(r->error), "%s", err.msg);
		return;
	}
	/* JAX's BFC pool costs nothing to model and decides what fits; the PyTorch caching
	 * allocator's replay is left to `simulate` (rows carry allocated memory) */
	bool jax_pool = res->allocator == RM_SIM_ALLOC_JAX_PREALLOC;
	rm_sim_options opt = {.scheduler_built = true,
			      .hw_queues = res->hw_queues,
			      .cost = cfg.cost,
			      .memory_headroom_bytes = res->memory.headroom_bytes,
			      .allocator = jax_pool ? RM_SIM_ALLOC_JAX_PREALLOC : RM_SIM_ALLOC_EXACT,
			      .alloc_fraction = res->alloc_fraction,
			      .prices = reuse ? reuse->prices : NULL,
			      .unpriced_cache = !reuse,
			      .storage = reuse ? reuse->sim : NULL,
			     };
	for (int k = 0; k < RM_SCHED_MAX_LOOPS && k < RM_SIM_MAX_LOOPS; k++)
		opt.loops[k] = (rm_sim_loop){.first_op = rep.loops[k].first_op,
					     .ops = rep.loops[k].ops,
					     .iters = rep.loops[k].iters,
					     .trips = rep.loops[k].trips};
	/* fewer micro-batches or trips than the step's and no stretch to extend: not the step */
	bool partial = (rep.loops[0].ops == 0 && rep.micro_batches_emitted < wl->train.grad_accum) || rep.loops_partial;
	rm_sim *sim = partial ? NULL : rm_sim_create(prog, &res->hw, &opt, &err);
	rm_status run = partial ? RM_UNSUPPORTED : sim ? rm_sim_run(sim, &err) : RM_INVALID;
	if (run == RM_UNSUPPORTED && (cfg.emit_micro_batches > 0 || cfg.emit_loop_iters > 0)) {
		rm_sim_destroy(sim);
		if (prog != cfg.into)
			rm_program_destroy(prog);
		rm_schedule_report_finish(&rep);
		rm_error_clear(&err);
		cfg.emit_micro_batches = 0;
		cfg.emit_loop_iters = 0;
		goto again;
	}
	if (run != RM_OK) {
		snprintf(r->error, sizeof(r->error), "%s", err.msg);
		rm_sim_destroy(sim);
		if (prog != cfg.into)
			rm_program_destroy(prog);
		rm_schedule_report_finish(&rep);
		return;
	}
	const rm_sim_metrics *m = rm_sim_get_metrics(sim);
	r->ok = true;
	r->step_time_s = rm_time_to_s(m->step_time);
	r->tokens_per_s_per_gpu = m->tokens_per_s;
	r->mfu = m->mfu;
	r->peak_memory_bytes = m->peak_memory_bytes;
	r->memory_capacity_bytes = m->memory_capacity_bytes;
	r->fits = m->fits;
	r->compute_busy_s = rm_time_to_s(m->compute_busy);
	r->comm_total_s = rm_time_to_s(m->comm_total);
	r->exposed_comm_s = rm_time_to_s(m->exposed_comm);
	r->recompute_s = rm_time_to_s(m->recompute);
	r->lower_bound_s = rm_time_to_s(m->lower_bound);
	r->periods_added = m->periods_added;
	r->collectives = rep.collectives;
	r->async = rep.async;
	r->sync = rep.sync;
	r->sync_memory_limit = rep.sync_by_reason[RM_SYNC_MEMORY_PEAK_OVER_LIMIT] +
			       rep.sync_by_reason[RM_SYNC_DECREASE_MEMORY_OVER_LIMIT];
	r->sync_disabled = rep.sync_by_reason[RM_SYNC_DISABLED];
	r->sync_nothing = rep.sync_by_reason[RM_SYNC_NOTHING_TO_OVERLAP];
	r->sync_overlap = rep.sync_by_reason[RM_SYNC_OVERLAP_LIMIT];
	r->sync_no_lhs = rep.sync_by_reason[RM_SYNC_NO_LHS];
	r->saved_bytes_step = rep.saved_bytes_step;
	rm_sim_destroy(sim);
	if (prog != cfg.into)
		rm_program_destroy(prog);
	rm_schedule_report_finish(&rep);
}

/* A pipelined candidate: its own resolved scenario, simulated stage by stage (remora/pipeline.h). */
static void evaluate_pipelined(const rm_search *s, const rm_candidate *c, rm_candidate_result *r)
{
	memset(r, 0, sizeof(*r));
	r->c = *c;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_resolved res;
	/* the variant's warnings were given once, when the search resolved it */
	bool was = rm_log_thread_quiet(true);
	rm_status st = rm_search_resolve_candidate(s, c, &res, &err);
	if (st != RM_OK) {
		rm_log_thread_quiet(was);
		snprintf(r->error, sizeof(r->error), "%s", err.msg);
		return;
	}
	if (s->cost)
		res.sched.cost = s->cost;
	/* its stage programs without names: the search reads no op's (rm_pp_run_scenario keeps
	 * them where zero_bubble needs them) */
	res.sched.lean = true;
	rm_pp_run pr;
	st = rm_pp_run_scenario(&res, &pr, &err);
	rm_log_thread_quiet(was);
	if (st != RM_OK) {
		snprintf(r->error, sizeof(r->error), "%s", err.msg);
		rm_scenario_resolved_finish(&res);
		return;
	}
	r->ok = true;
	r->step_time_s = pr.step_s;
	r->tokens_per_s_per_gpu = pr.tokens_per_s;
	r->mfu = pr.mfu;
	r->peak_memory_bytes = pr.peak_bytes[pr.peak_stage];
	r->memory_capacity_bytes = pr.usable_bytes;
	r->fits = pr.fits;
	r->saved_bytes_step = pr.act_bytes_per_chunk;
	rm_scenario_resolved_finish(&res);
}

void rm_search_evaluate(const rm_search *s, const rm_candidate *c, rm_candidate_result *out)
{
	search_reuse none = {0};
	search_evaluate(s, c, &none, out);
}

/* rm_search_evaluate with a worker's reuse (NULL: the reference path, no caches at all). */
static void search_evaluate(const rm_search *s, const rm_candidate *c, const search_reuse *reuse,
			    rm_candidate_result *out)
{
	if (c->as_written) {
		if (s->res0.train.pp > 1)
			evaluate_pipelined(s, c, out);
		else
			evaluate(s, &s->res0, c, s->res0.wl, s->res0.policy, &s->res0.flags, reuse, out);
		return;
	}
	int par, p, m, v;
	decode(s, c->index, &par, &p, &m, &v);
	if (par_resolved(s, par)->train.pp > 1) {
		evaluate_pipelined(s, c, out);
		return;
	}
	if (!s->wl[par][m]) {
		memset(out, 0, sizeof(*out));
		out->c = *c;
		const rm_scenario_resolved *res = par_resolved(s, par);
		rm_train_config t = res->train;
		t.micro_batch = s->mbs[m];
		int64_t per_step = search_sequences_per_micro_step(&t);
		if (s->par_gb[par] % per_step != 0)
			snprintf(out->error, sizeof(out->error),
				 "training.global_batch %lld is not a multiple of micro_batch %lld x %lld data-parallel GPUs",
				 (long long)s->par_gb[par], (long long)t.micro_batch, (long long)(per_step / t.micro_batch));
		else
			snprintf(out->error, sizeof(out->error),
				 "training.global_batch %lld at micro_batch %lld is %lld layers x grad_accum %lld = %lld "
				 "layer passes per step, over the %d remora simulates in one program (a larger "
				 "micro-batch accumulates fewer)",
				 (long long)s->par_gb[par], (long long)t.micro_batch, (long long)res->model.layers,
				 (long long)(s->par_gb[par] / per_step), (long long)(res->model.layers * (s->par_gb[par] / per_step)),
				 RM_SCENARIO_MAX_LAYER_STEPS);
		return;
	}
	const rm_xla_flags *flags = v < s->n_variants ? &s->variant_flags[v] : &s->res0.flags;
	evaluate(s, par_resolved(s, par), c, s->wl[par][m], s->policies[p].parsed, flags, reuse, out);
}

rm_status rm_search_resolve_candidate(const rm_search *s, const rm_candidate *c, rm_scenario_resolved *out,
				      rm_error *err)
{
	rm_scenario sc = s->base;
	if (c->parallelism[0]) {
		rm_status st = apply_overrides(&sc, c->parallelism, false, err);
		if (st != RM_OK)
			return st;
	}
	snprintf(sc.policy, sizeof(sc.policy), "%s", c->policy);
	sc.n_names = sc.n_offload = 0;
	sc.micro_batch = c->micro_batch;
	size_t used = strlen(sc.xla_flags);
	if (c->flags[0])
		snprintf(sc.xla_flags + used, sizeof(sc.xla_flags) - used, "%s%s", used ? " " : "", c->flags);
	/* the scenario's own runtime (xla, fsdp2 or megatron), or the bound */
	if (c->ideal)
		snprintf(sc.mode, sizeof(sc.mode), "ideal");
	else if (strcasecmp(sc.mode, "ideal") == 0)
		snprintf(sc.mode, sizeof(sc.mode), "xla");
	return rm_scenario_resolve(&sc, s->resolver, out, err);
}

/* ---- the memo of equal plans (rm_search_run) ---- */

/*
 * A candidate's simulation reads its parallelism variant's resolved scenario, the workload of
 * its micro-batch, its flag variant (or the ideal runtime), the cost model, and of its policy
 * only the remat plan the scheduler builds from it (rm_schedule_build: the fates of the layer's
 * values and the recomputed ops, for the layer graph and a mixture's dense layer graph). The
 * memo key is exactly that: (variant, micro-batch, flag variant) and the plans' bytes, compared
 * in full; equal keys give equal rows, so a hit copies the earlier candidate's results. Entries
 * past MEMO_MAX_ENTRIES are not kept (those candidates are simulated: the same rows, slower),
 * which bounds the memo at ~20 MiB whatever the size of the space.
 */
#define MEMO_MAX_ENTRIES 32768
#define RESULT_TAIL offsetof(rm_candidate_result, ok)

typedef struct memo_entry {
	uint64_t hash;
	size_t key_len;
	uint8_t *key;
	unsigned char tail[sizeof(rm_candidate_result) - RESULT_TAIL]; /* the result after its candidate */
} memo_entry;

typedef struct search_memo {
	pthread_mutex_t mu;
	memo_entry **slot; /* open addressing, cap a power of two, at most half full */
	size_t cap, n;
} search_memo;

/* A worker's key: the plan bytes of the last (variant, policy, micro-batch) it saw, so the
 * flag variants of one policy (the index's fastest digit) build its plan once. */
typedef struct memo_key {
	int par, p, m; /* whose plan bytes buf holds after the header; par -1: none */
	bool ok;       /* the plan built (false: no key, the candidate is simulated) */
	uint8_t *buf;
	size_t len, cap;
} memo_key;

#define MEMO_HEADER (3 * sizeof(int32_t))

static void memo_init(search_memo *mm)
{
	memset(mm, 0, sizeof(*mm));
	pthread_mutex_init(&mm->mu, NULL);
	mm->cap = 1024;
	mm->slot = rm_new(memo_entry *, mm->cap);
}

static void memo_finish(search_memo *mm)
{
	for (size_t i = 0; i < mm->cap; i++)
		if (mm->slot[i]) {
			free(mm->slot[i]->key);
			free(mm->slot[i]);
		}
	free(mm->slot);
	pthread_mutex_destroy(&mm->mu);
}

/* The slot of key (its entry, or the empty slot where it goes); under mm->mu. */
static size_t memo_find(const search_memo *mm, uint64_t h, const uint8_t *key, size_t len)
{
	size_t i = (size_t)h & (mm->cap - 1);
	for (;;) {
		const memo_entry *e = mm->slot[i];
		if (!e || (e->hash == h && e->key_len == len && memcmp(e->key, key, len) == 0))
			return i;
		i = (i + 1) & (mm->cap - 1);
	}
}

static bool memo_get(search_memo *mm, uint64_t h, const memo_key *k, rm_candidate_result *out)
{
	pthread_mutex_lock(&mm->mu);
	const memo_entry *e = mm->slot[memo_find(mm, h, k->buf, k->len)];
	if (e)
		memcpy((unsigned char *)out + RESULT_TAIL, e->tail, sizeof(e->tail));
	pthread_mutex_unlock(&mm->mu);
	return e != NULL;
}

static void memo_put(search_memo *mm, uint64_t h, const memo_key *k, const rm_candidate_result *r)
{
	pthread_mutex_lock(&mm->mu);
	if (mm->n < MEMO_MAX_ENTRIES && !mm->slot[memo_find(mm, h, k->buf, k->len)]) {
		if (2 * (mm->n + 1) > mm->cap) {
			size_t old_cap = mm->cap;
			memo_entry **old = mm->slot;
			mm->cap *= 2;
			mm->slot = rm_new(memo_entry *, mm->cap);
			for (size_t i = 0; i < old_cap; i++)
				if (old[i])
					mm->slot[memo_find(mm, old[i]->hash, old[i]->key, old[i]->key_len)] = old[i];
			free(old);
		}
		memo_entry *e = rm_new(memo_entry, 1);
		e->hash = h;
		e->key_len = k->len;
		e->key = rm_xmalloc(k->len);
		memcpy(e->key, k->buf, k->len);
		memcpy(e->tail, (const unsigned char *)r + RESULT_TAIL, sizeof(e->tail));
		mm->slot[memo_find(mm, h, k->buf, k->len)] = e;
		mm->n++;
	}
	pthread_mutex_unlock(&mm->mu);
}

static void key_put(memo_key *k, const void *data, size_t n)
{
	if (k->len + n > k->cap) {
		k->cap = 2 * (k->len + n) + 64;
		k->buf = rm_xrealloc(k->buf, k->cap);
	}
	memcpy(k->buf + k->len, data, n);
	k->len += n;
}

/* Appends a plan's bytes: its sizes, every value's fate and every op's recompute flag. */
static bool key_put_plan(memo_key *k, const rm_graph *g, const rm_remat_policy *pol, bool partitioner)
{
	rm_remat_plan plan;
	rm_error err;
	rm_error_clear(&err);
	/* the scheduler gives the plan's warnings; this copy of it is silent */
	bool was = rm_log_thread_quiet(true);
	rm_status st = rm_remat_plan_build_compiled(g, pol, partitioner, &plan, &err);
	rm_log_thread_quiet(was);
	if (st != RM_OK)
		return false;
	int32_t sizes[2] = {plan.n_values, plan.n_ops};
	key_put(k, sizes, sizeof(sizes));
	for (int v = 0; v < plan.n_values; v++) {
		uint8_t f = (uint8_t)plan.fate[v];
		key_put(k, &f, 1);
	}
	for (int o = 0; o < plan.n_ops; o++) {
		uint8_t f = plan.recompute[o] ? 1 : 0;
		key_put(k, &f, 1);
	}
	rm_remat_plan_finish(&plan);
	return true;
}

/* Makes k the key of candidate (par, p, m, v) of a single-program variant; false: no key. */
static bool memo_key_make(const rm_search *s, memo_key *k, int par, int p, int m, int v)
{
	if (k->par != par || k->p != p || k->m != m) {
		const rm_workload *wl = s->wl[par][m];
		bool partitioner = par_resolved(s, par)->sched.compile_partitioner;
		k->par = par;
		k->p = p;
		k->m = m;
		k->len = MEMO_HEADER;
		if (k->cap < k->len) {
			k->cap = 256;
			k->buf = rm_xrealloc(k->buf, k->cap);
		}
		k->ok = key_put_plan(k, &wl->layer, s->policies[p].parsed, partitioner) &&
			(rm_workload_dense_layers(wl) == 0 ||
			 key_put_plan(k, &wl->dense_layer, s->policies[p].parsed, partitioner));
	}
	int32_t head[3] = {par, m, v};
	memcpy(k->buf, head, sizeof(head));
	return k->ok;
}

/* rm_search_evaluate, with the results of an equal earlier candidate when the memo has them
 * (memo NULL: always simulated). True when they were copied. */
static bool evaluate_memo(const rm_search *s, search_memo *memo, memo_key *k, const search_reuse *reuse,
			  const rm_candidate *c, rm_candidate_result *out)
{
	if (!memo || c->as_written) {
		search_evaluate(s, c, reuse, out);
		return false;
	}
	int par, p, m, v;
	decode(s, c->index, &par, &p, &m, &v);
	if (par_resolved(s, par)->train.pp > 1 || !s->wl[par][m] || !memo_key_make(s, k, par, p, m, v)) {
		search_evaluate(s, c, reuse, out);
		return false;
	}
	uint64_t h = rm_hash_fnv1a(k->buf, k->len, RM_FNV1A_SEED);
	memset(out, 0, sizeof(*out));
	if (memo_get(memo, h, k, out)) {
		out->c = *c;
		return true;
	}
	search_evaluate(s, c, reuse, out);
	memo_put(memo, h, k, out);
	return false;
}

/* ---- the sweep ---- */

/*
 * Workers take candidate indices in order from one counter; a candidate whose row is stored is
 * marked skipped without being evaluated. The writer consumes the slots in index order, so the
 * rows are written in the same order for any number of threads, and nothing proportional to the
 * size of the space is allocated: a window of slots bounds what is in flight.
 */
enum { SLOT_EMPTY, SLOT_RESULT, SLOT_REUSED, SLOT_SKIPPED, SLOT_OTHER_SHARD };

typedef struct work {
	rm_search *s;
	int64_t count;
	atomic_llong next;
	int64_t consumed; /* candidates the writer has taken from their slots (under mu) */
	rm_candidate_result *slots;
	atomic_int *state;
	int64_t window;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	atomic_bool stop;
	int shard, shards; /* shards > 1: only candidates of this shard are evaluated */
	search_memo *memo; /* NULL: the reference path (rm_search_options.reference) */
} work;

/* Evaluates candidate i into its slot (or marks it skipped); false once the sweep stops. */
static bool work_one(work *w, memo_key *k, const search_reuse *reuse, int64_t i)
{
	int64_t slot = i % w->window;
	/* stay within the writer's window so memory stays bounded: candidate i may use its slot
	 * once the writer has taken candidate i - window from it. (Waiting for the slot to look
	 * empty is not enough: i and i + window could both see it empty and one result be lost.) */
	pthread_mutex_lock(&w->mu);
	while (!atomic_load(&w->stop) && i >= w->consumed + w->window)
		pthread_cond_wait(&w->cv, &w->mu);
	pthread_mutex_unlock(&w->mu);
	if (atomic_load(&w->stop))
		return false;
	rm_candidate c;
	int state = SLOT_SKIPPED;
	rm_candidate_result r;
	if (w->shards > 1 && rm_search_shard_of(w->s, i, w->shards) != w->shard)
		state = SLOT_OTHER_SHARD;
	else
		rm_search_candidate(w->s, i, &c);
	if (state == SLOT_SKIPPED && !search_store_has(w->s, c.key)) {
		state = evaluate_memo(w->s, w->memo, k, reuse, &c, &r) ? SLOT_REUSED : SLOT_RESULT;
	}
	pthread_mutex_lock(&w->mu);
	if (state == SLOT_RESULT || state == SLOT_REUSED)
		w->slots[slot] = r;
	atomic_store(&w->state[slot], state);
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	return true;
}

static void *worker(void *arg)
{
	work *w = arg;
	memo_key k = {.par = -1};
	search_reuse reuse = {.prices = rm_sim_prices_create(), .prog = rm_program_create(NULL), .sim = rm_sim_storage_create()};
	for (;;) {
		if (atomic_load(&w->stop))
			break;
		int64_t i = atomic_fetch_add(&w->next, 1);
		if (i >= w->count || !work_one(w, &k, w->memo ? &reuse : NULL, i))
			break;
	}
	free(k.buf);
	rm_sim_prices_destroy(reuse.prices);
	rm_program_destroy(reuse.prog);
	rm_sim_storage_destroy(reuse.sim);
	return NULL;
}

/* Starts the worker threads; false (with err) when none can be made. Fewer than asked is fine. */
static bool start_workers(work *w, pthread_t *threads, int jobs, int *started, rm_error *err)
{
	*started = 0;
	int first_error = 0;
	for (int j = 0; j < jobs; j++) {
		int rc = pthread_create(&threads[j], NULL, worker, w);
		if (rc != 0) {
			first_error = rc;
			break;
		}
		(*started)++;
	}
	if (*started == 0) {
		rm_error_set(err, RM_IO, NULL, 0, 0, "cannot start a search thread: %s (pthread_create)",
			     strerror(first_error));
		return false;
	}
	if (*started < jobs)
		rm_log_warn("started %d of %d search threads (pthread_create: %s); the sweep runs on %d", *started, jobs,
			    strerror(first_error), *started);
	return true;
}

rm_status rm_search_run(rm_search *s, const rm_search_options *opt, rm_search_progress *out, rm_error *err)
{
	double t0 = now_s();
	int shards = opt->shard_count > 1 ? opt->shard_count : 1;
	if (opt->shard_index < 0 || opt->shard_index >= shards)
		return rm_error_set(err, RM_INVALID, NULL, 0, 0, "shard %d of %d: a shard is 0 to %d", opt->shard_index,
				    shards, shards - 1);
	RM_CHECK(search_store_open(s, opt->db_path, err));
	if (opt->resume_from)
		RM_CHECK(search_store_skip_from(s, opt->resume_from, err));
	int jobs = opt->jobs > 0 ? opt->jobs : 1;
	work w = {.s = s, .count = s->count, .window = 256, .shard = opt->shard_index, .shards = shards};
	search_memo memo;
	/* REMORA_SEARCH_REFERENCE=1 in the environment: the reference path, as opt->reference */
	const char *ref_env = getenv("REMORA_SEARCH_REFERENCE");
	if (!opt->reference && !(ref_env && ref_env[0] && strcmp(ref_env, "0") != 0)) {
		memo_init(&memo);
		w.memo = &memo;
	}
	atomic_init(&w.next, 0);
	atomic_init(&w.stop, false);
	w.slots = rm_new(rm_candidate_result, (size_t)w.window);
	w.state = rm_new(atomic_int, (size_t)w.window);
	for (int64_t i = 0; i < w.window; i++)
		atomic_init(&w.state[i], SLOT_EMPTY);
	pthread_mutex_init(&w.mu, NULL);
	pthread_cond_init(&w.cv, NULL);
	pthread_t *threads = rm_new(pthread_t, (size_t)jobs);
	int started = 0;
	rm_status st = start_workers(&w, threads, jobs, &started, err) ? RM_OK : RM_IO;
	/* the writer: rows in index order, committed in batches */
	rm_search_progress prog = {.total = rm_search_shard_size(s, opt->shard_index, shards)};
	double last_commit = now_s(), last_progress = 0;
	int in_batch = 0;
	int64_t written = 0;
	if (st == RM_OK)
		st = search_store_begin(s, err);
	for (int64_t i = 0; i < s->count && st == RM_OK; i++) {
		int64_t slot = i % w.window;
		pthread_mutex_lock(&w.mu);
		while (atomic_load(&w.state[slot]) == SLOT_EMPTY)
			pthread_cond_wait(&w.cv, &w.mu);
		int state = atomic_load(&w.state[slot]);
		rm_candidate_result r;
		if (state == SLOT_RESULT || state == SLOT_REUSED)
			r = w.slots[slot];
		atomic_store(&w.state[slot], SLOT_EMPTY);
		w.consumed = i + 1;
		pthread_cond_broadcast(&w.cv);
		pthread_mutex_unlock(&w.mu);
		if (state == SLOT_OTHER_SHARD)
			continue;
		prog.done++;
		if (state == SLOT_SKIPPED) {
			prog.skipped++;
			continue;
		}
		if (state == SLOT_REUSED)
			prog.reused++;
		if (r.periods_added > 0)
			prog.extended++;
		r.schedule_hash = 0;
		st = search_store_put(s, &r, err);
		if (st != RM_OK)
			break;
		if (opt->on_row)
			opt->on_row(&r, prog.done, prog.total, opt->progress_user);
		in_batch++;
		written++;
		double t = now_s();
		if (in_batch >= 64 || t - last_commit > 0.5) {
			st = search_store_commit(s, err);
			if (st == RM_OK)
				st = search_store_begin(s, err);
			in_batch = 0;
			last_commit = t;
		}
		if ((opt->stop_after > 0 && written >= opt->stop_after) || (opt->interrupt && *opt->interrupt)) {
			/* as if killed right after a commit (or interrupted): nothing more is written */
			if (st == RM_OK)
				st = search_store_commit(s, err);
			in_batch = -1;
			atomic_store(&w.stop, true);
			break;
		}
		if (opt->progress && t - last_progress > 0.2) {
			prog.elapsed_s = t - t0;
			opt->progress(&prog, opt->progress_user);
			last_progress = t;
		}
	}
	if (st == RM_OK && in_batch >= 0)
		st = search_store_commit(s, err);
	atomic_store(&w.stop, true);
	pthread_mutex_lock(&w.mu);
	pthread_cond_broadcast(&w.cv);
	pthread_mutex_unlock(&w.mu);
	for (int j = 0; j < started; j++)
		pthread_join(threads[j], NULL);
	pthread_mutex_destroy(&w.mu);
	pthread_cond_destroy(&w.cv);
	free(threads);
	free(w.slots);
	free(w.state);
	if (w.memo)
		memo_finish(w.memo);
	prog.elapsed_s = now_s() - t0;
	if (opt->progress)
		opt->progress(&prog, opt->progress_user);
	if (out)
		*out = prog;
	return st;
}
