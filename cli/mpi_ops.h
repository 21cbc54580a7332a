/*
 * Private to cli/: the interface between `remora` and remora-mpi.so, the module that alone links
 * Open MPI (cli/mpi_module.c). `remora` links no MPI library, so a plain run never maps it; under
 * mpirun cli/sweep.c loads the module (dlopen) and calls MPI through this table. Every call is
 * collective over MPI_COMM_WORLD unless said otherwise.
 */
#ifndef REMORA_CLI_MPI_OPS_H
#define REMORA_CLI_MPI_OPS_H

#include <stdbool.h>

/* Raised whenever the table changes: a module of another build is refused. */
#define CLI_MPI_ABI 1
#define CLI_MPI_MODULE "remora-mpi.so"
#define CLI_MPI_SYMBOL "remora_mpi_ops"

typedef struct cli_mpi_ops {
	int abi;    /* CLI_MPI_ABI */
	/* MPI_Init_thread (funneled: only the main thread calls MPI); false when it fails (not
	 * collective) */
	bool (*init)(int *rank, int *size);
	/* waits for every rank without spinning (a non-blocking barrier tested every millisecond) */
	void (*barrier)(void);
	/* rank 0's n bytes to every rank */
	void (*bcast)(void *buf, int n);
	/* in place over n values: the maximum of ints, the sum of long longs, sum or max of doubles */
	void (*max_int)(int *v, int n);
	void (*sum_ll)(long long *v, int n);
	void (*reduce_double)(double *v, int n, bool max);
	void (*finalize)(void);
} cli_mpi_ops;

#endif /* REMORA_CLI_MPI_OPS_H */
