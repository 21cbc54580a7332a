/*
 * gpudist/env.h — which launcher started this process, and as which rank: the one place remora
 * reads Open MPI's, PMIx's, PMI/Hydra's and Slurm's variables. Plain C with no MPI, so that
 * `remora` (which never links MPI; its sweeps load remora-mpi.so only under a launcher,
 * cli/sweep.c) and the GPU executables (gpudist/dist.h) detect a launch the same way.
 */
#ifndef REMORA_GPUDIST_ENV_H
#define REMORA_GPUDIST_ENV_H

#ifdef __cplusplus
extern "C" {
#endif

/* Where the rank came from, when a launcher set it (rm_dist_env_detect). */
typedef struct rm_dist_env {
	int size;       /* processes in the job, 1 when no launcher variable says otherwise */
	int rank;       /* 0 when unknown */
	int local_rank; /* rank among the processes of this node; -1 when no variable gives it */
	const char *source; /* "ompi", "pmix", "pmi", "slurm" or "none" (a static string) */
} rm_dist_env;

/* getenv, or a stand-in for tests. */
typedef const char *(*rm_dist_getenv_fn)(const char *name);

/*
 * The launcher's rank, size and local rank from the environment through get (getenv when NULL),
 * in this order: Open MPI (OMPI_COMM_WORLD_SIZE / _RANK / _LOCAL_RANK), PMIx (PMIX_RANK, size
 * from OMPI_COMM_WORLD_SIZE, PMIX_SIZE or PMI_SIZE), PMI/Hydra (PMI_SIZE, PMI_RANK,
 * MPI_LOCALRANKID), a Slurm job step (SLURM_STEP_NUM_TASKS, SLURM_PROCID, SLURM_LOCALID).
 *
 * Slurm's size is the STEP's task count, which srun sets for the processes it starts (srun(1),
 * "OUTPUT ENVIRONMENT VARIABLES"). A batch script also carries SLURM_PROCID=0 and the
 * allocation's SLURM_NTASKS, but it is one process: read as a launch of SLURM_NTASKS ranks it
 * would wait for peers that never start. So SLURM_PROCID without SLURM_STEP_NUM_TASKS is no
 * launch ("none"); a PMIx rank may still take its size from SLURM_NTASKS (srun --mpi=pmix sets
 * both). A value that is not a non-negative integer counts as absent. Pure: returns the result,
 * no error.
 */
rm_dist_env rm_dist_env_detect(rm_dist_getenv_fn get);

#ifdef __cplusplus
}
#endif

#endif
