/* Private to search/: the search object and the SQLite store. */
#ifndef REMORA_SEARCH_INTERNAL_H
#define REMORA_SEARCH_INTERNAL_H

#include <sqlite3.h>

#include "remora/search.h"
#include "remora/sim.h"

#define SEARCH_MAX_MBS RM_SCENARIO_MAX_LIST
#define SEARCH_MAX_VARIANTS RM_SCENARIO_MAX_LIST
#define SEARCH_MAX_PAR RM_SCENARIO_MAX_LIST

/* The first 128 bits of a candidate's SHA-256 key, for the in-memory resume set. */
typedef struct search_key {
	uint64_t hi, lo;
} search_key;

typedef struct search_policy {
	char expr[1200];
	char label[160];
	rm_remat_policy *parsed;
	uint64_t plan_hash;
	int canonical; /* first policy with the same plan */
} search_policy;

struct rm_search {
	rm_scenario base;
	rm_hw_resolver resolver;
	rm_scenario_resolved res0;
	char scenario_hash[RM_SHA256_HEX]; /* rm_scenario_resolved_digest of the scenario */
	search_policy *policies;
	int n_policies, cap_policies;
	int64_t mbs[SEARCH_MAX_MBS];
	int n_mbs;
	/* parallelism variants: overrides, their resolved scenarios ([0] is res0's copy when the
	 * list is empty), and the workloads of each variant and micro-batch */
	int n_par;
	char par[SEARCH_MAX_PAR][256];
	rm_scenario_resolved par_res[SEARCH_MAX_PAR];
	bool par_owned[SEARCH_MAX_PAR];
	int64_t par_gb[SEARCH_MAX_PAR]; /* each variant's training.global_batch (0: none) */
	rm_workload *wl[SEARCH_MAX_PAR][SEARCH_MAX_MBS];
	char variants[SEARCH_MAX_VARIANTS][512];
	rm_xla_flags variant_flags[SEARCH_MAX_VARIANTS];
	int n_variants;
	bool include_ideal;
	int64_t count;
	const rm_cost_model *cost;
	/* shards (rm_search_shard_of): the candidates fall in classes of equal predicted cost
	 * (0: the scenario as written; 1 + par x n_mbs + m: one parallelism variant and
	 * micro-batch), dealt heaviest class first; class_start is each class's first position in
	 * that order */
	int n_classes;
	double *class_cost;
	int64_t *class_start;
	/* store */
	sqlite3 *db;
	sqlite3_stmt *put;
	sqlite3_stmt *space_put;   /* a stored row's key and index into the space table */
	int64_t space_version;     /* PRAGMA data_version at the space table's last sync; -1: never */
	search_key *keys; /* keys of the verified rows stored for this scenario, sorted, for resume */
	int64_t n_keys;
	int64_t damaged; /* rows whose checksum failed (deleted, so recomputed) */
};

rm_status search_store_open(rm_search *s, const char *path, rm_error *err);
/* Adds the verified keys of this scenario stored in another sweep database (read only) to the
 * resume set; a file that does not exist adds none. */
rm_status search_store_skip_from(rm_search *s, const char *path, rm_error *err);
void search_store_close(rm_search *s);
bool search_store_has(const rm_search *s, const char *key_hex);
rm_status search_store_begin(rm_search *s, rm_error *err);
rm_status search_store_commit(rm_search *s, rm_error *err);
rm_status search_store_put(rm_search *s, const rm_candidate_result *r, rm_error *err);

#endif /* REMORA_SEARCH_INTERNAL_H */
