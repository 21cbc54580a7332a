/*
 * gpudist: which launcher started this process (env.h). No MPI here.
 */
#include "gpudist/env.h"

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

/* A non-negative decimal integer, or -1 (absent, empty, signed, trailing bytes, too large). */
static int env_int(rm_dist_getenv_fn get, const char *name)
{
	const char *s = get(name);
	if (!s || !*s)
		return -1;
	long v = 0;
	for (const char *c = s; *c; c++) {
		if (*c < '0' || *c > '9')
			return -1;
		v = v * 10 + (*c - '0');
		if (v > INT_MAX)
			return -1;
	}
	return (int)v;
}

static const char *plain_getenv(const char *name)
{
	return getenv(name);
}

rm_dist_env rm_dist_env_detect(rm_dist_getenv_fn get)
{
	if (!get)
		get = plain_getenv;
	rm_dist_env e = {1, 0, -1, "none"};
	static const struct {
		const char *source, *size, *rank, *local;
		bool size_required; /* no launch without the size variable */
	} launchers[] = {
		{"ompi", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", false},
		/* PMIx (Open MPI 5, prterun, srun --mpi=pmix) names the rank; its size comes from the
		 * launcher's other variables */
		{"pmix", "PMIX_SIZE", "PMIX_RANK", NULL, false},
		{"pmi", "PMI_SIZE", "PMI_RANK", "MPI_LOCALRANKID", false},
		/* a batch script has SLURM_PROCID too: only an srun step is a launch (env.h) */
		{"slurm", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "SLURM_LOCALID", true},
	};
	for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]); i++) {
		int rank = env_int(get, launchers[i].rank);
		if (rank < 0)
			continue;
		int size = env_int(get, launchers[i].size);
		if (size < 0 && launchers[i].size_required)
			continue;
		if (size < 0)
			size = env_int(get, "OMPI_COMM_WORLD_SIZE");
		if (size < 0)
			size = env_int(get, "PMI_SIZE");
		if (size < 0)
			size = env_int(get, "SLURM_STEP_NUM_TASKS");
		if (size < 0)
			size = env_int(get, "SLURM_NTASKS");
		if (size <= rank)
			size = rank + 1; /* at least this many */
		e.size = size;
		e.rank = rank;
		e.local_rank = launchers[i].local ? env_int(get, launchers[i].local) : -1;
		if (e.local_rank < 0)
			e.local_rank = env_int(get, "OMPI_COMM_WORLD_LOCAL_RANK");
		if (e.local_rank < 0)
			e.local_rank = env_int(get, "SLURM_LOCALID");
		e.source = launchers[i].source;
		return e;
	}
	return e;
}
