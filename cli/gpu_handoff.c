/*
 * Hands `remora exec` over to remora-gpu, the build of the same command line that links the CUDA
 * runner (cuBLASLt, NCCL, MPI). `remora` itself links none of them, so every other command starts
 * without mapping the CUDA libraries; remora-gpu is built only where nvcc, CUDA and NCCL are found
 * and is installed beside `remora` (docs/exec.md "Two executables").
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#define GPU_EXE_NAME "remora-gpu"

/* The path of remora-gpu in the directory of this executable (/proc/self/exe), or false. */
static bool gpu_exe_path(char *out, size_t size, rm_error *err)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0)
		return rm_error_set(err, RM_IO, "/proc/self/exe", 0, 0, "cannot find this executable: %s",
				    strerror(errno)),
		       false;
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	if (!slash)
		return rm_error_set(err, RM_IO, self, 0, 0, "this executable's path has no directory"), false;
	*slash = '\0';
	if ((size_t)snprintf(out, size, "%s/%s", self, GPU_EXE_NAME) >= size)
		return rm_error_set(err, RM_IO, self, 0, 0, "path too long"), false;
	return true;
}

int cli_exec_on_gpu(int argc, char **argv)
{
	rm_error err;
	rm_error_clear(&err);
	char path[PATH_MAX + sizeof(GPU_EXE_NAME) + 1];
	if (!gpu_exe_path(path, sizeof(path), &err))
		return cli_fail(&err);
	if (access(path, X_OK) != 0) {
		fprintf(stderr,
			"remora: error: running a program needs %s (%s), built only where CUDA, cuBLAS and NCCL "
			"are found; this build has none: --dry-run and --replay work without it\n",
			path, strerror(errno));
		return CLI_EXIT_FAIL;
	}
	/* remora-gpu [-q|-v...] exec ARGS...: the subcommand's argv, the log level carried over (the
	 * level before the command name: a -v among ARGS is in argv and counts there again) */
	static char quiet[] = "-q", verbose[] = "-v";
	char **args = rm_xcalloc((size_t)argc + 5, sizeof(*args));
	int k = 0;
	args[k++] = path;
	rm_log_level level = cli_global_log_level();
	if (level == RM_LOG_ERROR)
		args[k++] = quiet;
	for (int v = RM_LOG_WARN; v < (int)level; v++)
		args[k++] = verbose;
	for (int i = 0; i < argc; i++)
		args[k++] = argv[i];
	args[k] = NULL;
	fflush(stdout);
	fflush(stderr);
	execv(path, args);
	rm_error_set(&err, RM_IO, path, 0, 0, "cannot run it: %s", strerror(errno));
	free(args);
	return cli_fail(&err);
}
