/*
 * The remora executable itself: it links no CUDA library (they belong to remora-gpu, which
 * `remora exec` execs; docs/exec.md "Two executables"), read from its ELF dynamic section; and
 * without remora-gpu beside it, `remora exec` says what is missing and exits 1.
 */
#include <criterion/criterion.h>
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "remora/common.h"

static const char *remora_bin(void)
{
	const char *bin = getenv("REMORA_BIN");
	cr_assert_not_null(bin, "REMORA_BIN must name the remora executable");
	return bin;
}

static char *slurp(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "cannot open %s", path);
	cr_assert_eq(fseek(f, 0, SEEK_END), 0);
	long n = ftell(f);
	cr_assert_gt(n, 0);
	rewind(f);
	char *buf = malloc((size_t)n);
	cr_assert_not_null(buf);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*size = (size_t)n;
	return buf;
}

/* The DT_NEEDED names of a 64-bit ELF file, joined by '\n' into out. */
static void needed_libraries(const char *path, char *out, size_t out_size)
{
	size_t size;
	char *img = slurp(path, &size);
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
	cr_assert(size >= sizeof(*eh) && memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0, "%s is not ELF", path);
	cr_assert_eq(eh->e_ident[EI_CLASS], ELFCLASS64);
	cr_assert(eh->e_shoff + (size_t)eh->e_shnum * sizeof(Elf64_Shdr) <= size);
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(img + eh->e_shoff);
	out[0] = '\0';
	int found = 0;
	for (int i = 0; i < eh->e_shnum; i++) {
		if (sh[i].sh_type != SHT_DYNAMIC)
			continue;
		cr_assert_lt(sh[i].sh_link, eh->e_shnum);
		const Elf64_Shdr *str = &sh[sh[i].sh_link];
		cr_assert(sh[i].sh_offset + sh[i].sh_size <= size && str->sh_offset + str->sh_size <= size);
		const Elf64_Dyn *dyn = (const Elf64_Dyn *)(img + sh[i].sh_offset);
		for (size_t d = 0; d < sh[i].sh_size / sizeof(*dyn) && dyn[d].d_tag != DT_NULL; d++) {
			if (dyn[d].d_tag != DT_NEEDED)
				continue;
			cr_assert_lt(dyn[d].d_un.d_val, str->sh_size);
			strncat(out, img + str->sh_offset + dyn[d].d_un.d_val, out_size - strlen(out) - 2);
			strcat(out, "\n");
			found++;
		}
	}
	free(img);
	cr_assert_gt(found, 0, "%s: no DT_NEEDED entry (not dynamically linked?)", path);
}

Test(exe, remora_links_no_cuda_library)
{
	char libs[4096];
	needed_libraries(remora_bin(), libs, sizeof(libs));
	/* what it must link (libc, and jansson for every JSON document) proves the reader works */
	cr_assert_not_null(strstr(libs, "libc.so"), "%s", libs);
	cr_assert_not_null(strstr(libs, "libjansson"), "%s", libs);
	const char *cuda[] = {"libcudart", "libcublas", "libcublasLt", "libnccl", "libcuda.", "libmpi"};
	for (size_t i = 0; i < RM_ARRAY_SIZE(cuda); i++)
		cr_assert_null(strstr(libs, cuda[i]), "remora links %s:\n%s", cuda[i], libs);
}

/* Runs argv (no shell), stdout to /dev/null, stderr to errpath; the exit status. */
static int run(char *const argv[], const char *errpath)
{
	posix_spawn_file_actions_t fa;
	cr_assert_eq(posix_spawn_file_actions_init(&fa), 0);
	cr_assert_eq(posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0), 0);
	cr_assert_eq(posix_spawn_file_actions_addopen(&fa, 2, errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600), 0);
	pid_t pid;
	extern char **environ;
	cr_assert_eq(posix_spawn(&pid, argv[0], &fa, NULL, argv, environ), 0, "cannot start %s", argv[0]);
	posix_spawn_file_actions_destroy(&fa);
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st), "%s did not exit normally", argv[0]);
	return WEXITSTATUS(st);
}

/* A copy of remora alone in a directory: `exec` (not --dry-run) cannot find remora-gpu. */
Test(exe, exec_without_remora_gpu_says_so)
{
	char dir[] = "/tmp/remora-exe-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char copy[512], program[512], errpath[512];
	snprintf(copy, sizeof(copy), "%s/remora", dir);
	snprintf(errpath, sizeof(errpath), "%s/err", dir);
	const char *data = getenv("REMORA_TEST_DATA");
	cr_assert_not_null(data);
	snprintf(program, sizeof(program), "%s/exec/gpu_small.json", data);
	size_t size;
	char *img = slurp(remora_bin(), &size);
	FILE *f = fopen(copy, "wb");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(img, 1, size, f), size);
	cr_assert_eq(fclose(f), 0);
	free(img);
	cr_assert_eq(chmod(copy, 0755), 0);

	char exec_arg[] = "exec", dry[] = "--dry-run";
	char *const argv[] = {copy, exec_arg, program, NULL};
	cr_assert_eq(run(argv, errpath), 1);
	size_t n;
	char *err = slurp(errpath, &n);
	char *msg = strndup(err, n);
	cr_assert_not_null(strstr(msg, "remora-gpu"), "%s", msg);
	cr_assert_not_null(strstr(msg, "--dry-run and --replay work without it"), "%s", msg);
	free(msg);
	free(err);

	/* the dry run needs no remora-gpu */
	char *const dry_argv[] = {copy, exec_arg, dry, program, NULL};
	cr_assert_eq(run(dry_argv, errpath), 0);
	unlink(errpath);
	unlink(copy);
	rmdir(dir);
}
