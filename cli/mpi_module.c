/*
 * remora-mpi.so: the only code that links Open MPI (cli/mpi_ops.h). Loaded by `remora` only when
 * mpirun started it, so every other run starts without MPI's libraries.
 */
#include <mpi.h>
#include <time.h>

#include "mpi_ops.h"

static bool mod_init(int *rank, int *size)
{
	int provided = 0;
	if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
		return false;
	MPI_Comm_rank(MPI_COMM_WORLD, rank);
	MPI_Comm_size(MPI_COMM_WORLD, size);
	return true;
}

/*
 * Open MPI's blocking collectives poll at full speed, so a rank that finished its shard would take
 * a core from the ranks still simulating when there are more ranks than idle cores
 * (--oversubscribe). A non-blocking barrier tested every millisecond costs nothing measurable;
 * the collective that follows then completes at once.
 */
static void mod_barrier(void)
{
	MPI_Request rq;
	if (MPI_Ibarrier(MPI_COMM_WORLD, &rq) != MPI_SUCCESS)
		return;
	int done = 0;
	struct timespec ms = {0, 1000000};
	while (MPI_Test(&rq, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done)
		nanosleep(&ms, NULL);
}

static void mod_bcast(void *buf, int n)
{
	mod_barrier();
	MPI_Bcast(buf, n, MPI_BYTE, 0, MPI_COMM_WORLD);
}

static void mod_max_int(int *v, int n)
{
	mod_barrier();
	MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
}

static void mod_sum_ll(long long *v, int n)
{
	mod_barrier();
	MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
}

static void mod_reduce_double(double *v, int n, bool max)
{
	mod_barrier();
	MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, max ? MPI_MAX : MPI_SUM, MPI_COMM_WORLD);
}

static void mod_finalize(void)
{
	MPI_Finalize();
}

/* The table cli/sweep.c looks up by name (CLI_MPI_SYMBOL); the prototype keeps
 * -Wmissing-variable-declarations quiet where it is on. */
extern const cli_mpi_ops remora_mpi_ops;
const cli_mpi_ops remora_mpi_ops = {
	.abi = CLI_MPI_ABI,
	.init = mod_init,
	.barrier = mod_barrier,
	.bcast = mod_bcast,
	.max_int = mod_max_int,
	.sum_ll = mod_sum_ll,
	.reduce_double = mod_reduce_double,
	.finalize = mod_finalize,
};
