/*
 * remora/search.h — policy and schedule search (search/search.c, search/store.c).
 *
 * What it does: enumerates a candidate space from a scenario's search section — subsets of the
 * candidate checkpoint names (all of them up to 12 names; beyond, the nested prefixes of the
 * names ordered by recompute FLOPs saved per byte kept), the listed built-in policies, the
 * offloaded variant of each subset, micro-batch sizes, XLA flag variants, and the ideal
 * (non-XLA) runtime — simulates every candidate, and keeps the results in an SQLite database,
 * one row per candidate keyed by the SHA-256 of the resolved scenario (rm_scenario_resolved_digest:
 * model, training, hardware with its calibration, NCCL model, flags, scheduler options and the
 * cost-model revision) and of the candidate's configuration, each row with a checksum of its
 * values. Candidates whose schedules are
 * identical (a name the backward never reads changes nothing) share one simulation.
 *
 * Invariants
 * - Candidates are data: an index maps to a configuration by a pure function; evaluating one has
 *   no side effect but its row. Results are the same for any number of threads (--jobs).
 * - Rows are written in transactions as they complete; a sweep killed at any point and run
 *   again skips the rows already stored and ends with the same database content.
 * - Memory is flat in the number of candidates: rows go to SQLite, the ranking and the Pareto
 *   front are read back from it.
 * - Shards (rm_search_shard_of) partition the space by a pure function of it; shards swept into
 *   separate databases and merged (rm_search_merge) hold exactly the rows of one sweep.
 *
 * Units: seconds, bytes.
 */
#ifndef REMORA_SEARCH_H
#define REMORA_SEARCH_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "remora/common.h"
#include "remora/scenario.h"


/* One candidate's configuration. */
typedef struct rm_candidate {
	int64_t index;
	char policy[1200];  /* policy expression (JAX syntax) */
	char label[160];    /* short: "save: q,k,v" */
	int64_t micro_batch;
	char flags[1024];   /* the XLA_FLAGS variant appended to the scenario's flags */
	char parallelism[256]; /* the search.parallelism variant's overrides ("" the scenario's) */
	bool ideal;         /* the hand-tuned runtime instead of XLA */
	bool as_written;    /* the scenario itself */
	char key[RM_SHA256_HEX]; /* SHA-256 of the resolved scenario's digest and this configuration */
} rm_candidate;

/* A candidate's result (docs/design.md contract 3, flattened). */
typedef struct rm_candidate_result {
	rm_candidate c;
	bool ok;
	char error[256];
	double step_time_s, tokens_per_s_per_gpu, mfu;
	int64_t peak_memory_bytes, memory_capacity_bytes;
	bool fits;
	double compute_busy_s, comm_total_s, exposed_comm_s, recompute_s, lower_bound_s;
	int collectives, async, sync;
	int sync_memory_limit, sync_disabled, sync_nothing, sync_overlap, sync_no_lhs;
	int64_t saved_bytes_step;
	uint64_t schedule_hash; /* identical schedules share one simulation */
	int64_t periods_added;  /* micro-batches the engine added to those simulated (a periodic
				 * step: rm_sim_metrics.periods_added); not stored */
} rm_candidate_result;

typedef struct rm_search rm_search;

/*
 * Prepares a search over a scenario (resolved with resolver, see remora/scenario.h). Errors:
 * the scenario's own errors; an empty space (RM_INVALID, says which keys to fill); more
 * candidates than search.max_candidates (RM_RANGE, says how to narrow it).
 */
rm_search *rm_search_create(const rm_scenario *sc, rm_hw_resolver resolver, rm_error *err);
void rm_search_destroy(rm_search *s);
/* The cost model every candidate is simulated with (NULL: the default); it must outlive s. */
void rm_search_set_cost_model(rm_search *s, const rm_cost_model *cost);
/* Candidates in the space (the scenario as written is candidate 0). */
int64_t rm_search_count(const rm_search *s);
/* The configuration of candidate i (0 <= i < count). */
void rm_search_candidate(const rm_search *s, int64_t i, rm_candidate *out);
/* The ideal-runtime candidate with i's policy, micro-batch and parallelism (i itself when it is
 * one); -1 when the space has no ideal candidates (search.include_ideal false) or i is the
 * scenario as written (0) or out of range. */
int64_t rm_search_ideal_of(const rm_search *s, int64_t i);
/* Evaluates one candidate (thread-safe; no side effects). */
void rm_search_evaluate(const rm_search *s, const rm_candidate *c, rm_candidate_result *out);

typedef struct rm_search_progress {
	int64_t done, total, skipped;
	int64_t reused; /* of done: rows copied from an equal earlier candidate (not simulated) */
	int64_t extended; /* of done: rows whose step the engine extended by its period
			   * (rm_candidate_result.periods_added > 0) */
	double elapsed_s;
} rm_search_progress;
typedef void (*rm_search_progress_fn)(const rm_search_progress *p, void *user);

typedef struct rm_search_options {
	const char *db_path;   /* NULL: an in-memory database */
	int jobs;              /* threads, >= 1 */
	int64_t stop_after;    /* > 0: stop (as if killed) after this many new rows; tests only */
	rm_search_progress_fn progress;
	void *progress_user;
	/* called with progress_user for each row the sweep simulates now (not those already
	 * stored), in index order from the one writer thread, with the progress's done and total
	 * counting it (-vv's per-candidate lines); NULL: none */
	void (*on_row)(const rm_candidate_result *r, int64_t done, int64_t total, void *user);
	/* shard_count > 1: evaluate only the candidates of shard shard_index (0 <= shard_index <
	 * shard_count, rm_search_shard_of); the others are neither evaluated nor counted in the
	 * progress. 0 or 1: every candidate. */
	int shard_index, shard_count;
	/* another sweep database (read only; NULL none, a missing file none): its verified rows of
	 * this scenario count as stored, so a shard writing its own database skips what the merged
	 * one already holds */
	const char *resume_from;
	/* true: the unoptimised reference path (every candidate simulated on its own: no memo of
	 * equal plans, no shared caches); the rows are the same bit for bit (tests compare them) */
	bool reference;
	/* non-NULL: polled after each row is stored; once it reads non-zero (a SIGINT handler set
	 * it) the sweep commits what it wrote and returns RM_OK early, as stop_after does, with the
	 * progress counting what was done. NULL: runs to the end. */
	const volatile sig_atomic_t *interrupt;
} rm_search_options;

/*
 * Runs the sweep: evaluates every candidate (of the shard, when opt asks for one) not yet in the
 * database and stores its row. A candidate whose simulated inputs equal an earlier one's (the
 * same parallelism variant, micro-batch and flag variant or runtime, and a policy that resolves
 * to the same remat plan: every value's fate and every recomputed op) gets that candidate's
 * results copied instead of a second simulation (a memo of the run, compared in full, bounded in
 * size; the copy is what the simulation would give, so rows do not depend on --jobs or shards). Returns RM_IO with err on a database error (rows already
 * committed stay), RM_INVALID for a shard index outside 0..shard_count-1.
 */
rm_status rm_search_run(rm_search *s, const rm_search_options *opt, rm_search_progress *out, rm_error *err);

/*
 * Shards: candidate i belongs to one of n shards by a pure function of the space (the same for
 * any --jobs, any machine). Candidates are ordered by their predicted cost
 * (rm_search_cost_estimate), heaviest first, index order among equals, and dealt in snake order
 * (0, 1, .., n-1, n-1, .., 0, 0, 1, ..): the predicted work of any two shards then differs by at
 * most the cost of the heaviest candidate (each round's spread is at most its first cost less its
 * last, and these telescope), and their sizes by at most one.
 */
int rm_search_shard_of(const rm_search *s, int64_t i, int n);
/* Candidates in shard k of n (0 <= k < n). */
int64_t rm_search_shard_size(const rm_search *s, int k, int n);
/*
 * The predicted simulation work of candidate i, in layer-micro-steps: layers x the micro-batches
 * a step accumulates, twice that for a pipelined candidate (resolved and simulated stage by stage,
 * then scheduled), 1 for one that is an error row (a micro-batch that does not divide
 * training.global_batch). Only its order matters (shard balance).
 */
double rm_search_cost_estimate(const rm_search *s, int64_t i);

/*
 * Closes the search's database and opens db_path instead, loading its verified rows of this
 * scenario: after shards were merged into one file, the ranking and the Pareto front read every
 * shard's rows. NULL only closes it (another process may then merge the file); the next
 * rm_search_run opens its options' database. Errors as rm_search_run's opening.
 */
rm_status rm_search_reopen(rm_search *s, const char *db_path, rm_error *err);

/* What rm_search_merge did. */
typedef struct rm_search_merge_stats {
	int64_t read;      /* verified rows read from the inputs */
	int64_t added;     /* rows OUT did not have */
	int64_t same;      /* rows OUT had already, identical (merging again adds nothing) */
	int64_t conflicts; /* rows OUT had with other values: OUT's are kept (warned) */
	int64_t repaired;  /* rows of OUT that failed their checksum, replaced by a verified input row */
} rm_search_merge_stats;

/*
 * Merges sweep databases (any scenarios, remora/search.h's store) into out, created when missing:
 * every row is keyed by its SHA-256 key and carries its checksum, so merging is idempotent and a
 * row is never duplicated. In one transaction: either every input is merged or out is unchanged.
 * Errors (nothing written): an input that does not exist or is not a sweep database of this
 * schema (application_id, user_version), a row of an input that fails its checksum (RM_INVALID,
 * naming the file and the key), an out that is another program's file or an older schema whose
 * rows could not be kept (RM_INVALID), SQLite's errors (RM_IO). Rows of out are never lost: one
 * that differs from an input's row is kept, unless it fails its own checksum.
 */
rm_status rm_search_merge(const char *out, const char *const *in, int n_in, rm_search_merge_stats *stats,
			  rm_error *err);

typedef enum rm_search_filter { RM_SEARCH_ANY, RM_SEARCH_XLA_ONLY, RM_SEARCH_IDEAL_ONLY } rm_search_filter;

/* The stored results: the best k by tokens/s per GPU among those that fit; -1 on error. */
int rm_search_top(rm_search *s, rm_search_filter filter, rm_candidate_result *out, int k, rm_error *err);
/*
 * The Pareto front of (step time, peak memory) over the candidates that fit, fastest first. Step
 * time is compared per token (1 / tokens per second per GPU), so candidates of different
 * micro-batch sizes compare fairly; each entry keeps its own step time.
 */
int rm_search_pareto(rm_search *s, rm_candidate_result *out, int cap, rm_error *err);
/* The front of the candidates of one runtime (filter), as rm_search_pareto; RM_SEARCH_ANY mixes
 * runtimes (rm_search_pareto). Same-figure candidates are named by the row rm_search_top ranks
 * first (the shorter policy expression, then the index), so every report names them alike. */
int rm_search_pareto_of(rm_search *s, rm_search_filter filter, rm_candidate_result *out, int cap, rm_error *err);
/* The stored row of candidate index: 1 when found, 0 when it is not stored (yet), -1 on an
 * error (err set). */
int rm_search_result(rm_search *s, int64_t index, rm_candidate_result *out, rm_error *err);
/* The scenario as written (candidate 0), from the database. */
bool rm_search_as_written(rm_search *s, rm_candidate_result *out, rm_error *err);
/* Every stored row, in key order, for plots and tests; calls fn per row. */
rm_status rm_search_each(rm_search *s, void (*fn)(const rm_candidate_result *r, void *user), void *user,
			 rm_error *err);
/* Rows stored. */
int64_t rm_search_rows(rm_search *s);
/* What of HBM a candidate may use (the resolved scenario's budget; every candidate shares it). */
const rm_memory_budget *rm_search_memory_budget(const rm_search *s);
/* The runtime the scenario's candidates run under: RM_SCHED_XLA or RM_SCHED_FSDP2 (an ideal-mode
 * scenario searches XLA candidates and the ideal bound). */
rm_sched_mode rm_search_runtime(const rm_search *s);
/* Bytes of JAX's BFC pool (xla.mem_fraction of HBM) the candidates must fit in when the scenario
 * reports JAX's allocator; 0 otherwise (they fit in usable HBM). */
int64_t rm_search_jax_pool_bytes(const rm_search *s);
/* Rows of this scenario that failed their checksum when the sweep opened the database (deleted,
 * so the sweep recomputed them). */
int64_t rm_search_damaged_rows(const rm_search *s);

/* The resolved scenario of a candidate (for its program, trace and memory timeline). */
rm_status rm_search_resolve_candidate(const rm_search *s, const rm_candidate *c, rm_scenario_resolved *out,
				      rm_error *err);

#endif /* REMORA_SEARCH_H */
