/*
 * The figures README.md and docs/ quote, held to the commands that print them
 * (tests/data/doc-figures.tsv). Each line names a doc, a figure as the doc spells it, a remora
 * command line and a string its output must contain: the doc must hold the figure and the
 * command's output the string, so a changed output without its doc, or a doc without its
 * output, fails here with the line, the doc, the figure and the command.
 *
 * Line format (tab-separated, '#' starts a comment line, blank lines are skipped):
 *   DOC <TAB> FIGURE <TAB> COMMAND <TAB> EXPECTED
 * - DOC: relative to the repository root.
 * - COMMAND: the arguments after `remora`, run without a shell in the repository root. Words are
 *   split at spaces; '...' or "..." quote a word with spaces. $TMP is a folder of this test's
 *   own. A word "&&" separates commands run in turn (`schedule S -o $TMP/p.json && exec
 *   $TMP/p.json --dry-run`): each must exit 0, and the last one's output is checked. A
 *   leading "!" word: the (last) command must fail with exit status 1 instead.
 * - EXPECTED: looked for in stdout; "stderr:" before it looks in stderr (a warning, an error).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { MAX_WORDS = 64 };

/* Reads the whole of path into a NUL-terminated buffer (caller frees), NULL if unreadable. */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 1 << 16, len = 0, got;
	char *buf = malloc(cap);
	cr_assert_not_null(buf);
	while ((got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
		len += got;
		if (cap - len < 4096) {
			cap *= 2;
			buf = realloc(buf, cap);
			cr_assert_not_null(buf);
		}
	}
	buf[len] = '\0';
	fclose(f);
	return buf;
}

/* Splits cmd into words in place (spaces; '...' and "..." quote); returns the count, -1 on an
 * unclosed quote or too many words. */
static int split_words(char *cmd, char **words)
{
	int n = 0;
	char *p = cmd;
	for (;;) {
		while (*p == ' ')
			p++;
		if (!*p)
			return n;
		if (n == MAX_WORDS - 1)
			return -1;
		char *out = p;
		words[n++] = out;
		while (*p && *p != ' ') {
			if (*p == '\'' || *p == '"') {
				char q = *p++;
				while (*p && *p != q)
					*out++ = *p++;
				if (!*p)
					return -1;
				p++;
			} else {
				*out++ = *p++;
			}
		}
		if (*p)
			p++;
		*out = '\0';
	}
}

/* Word w with every $TMP replaced by tmp (caller frees). */
static char *expand_tmp(const char *w, const char *tmp)
{
	size_t cap = strlen(w) + 1;
	for (const char *s = strstr(w, "$TMP"); s; s = strstr(s + 4, "$TMP"))
		cap += strlen(tmp);
	char *out = malloc(cap), *o = out;
	cr_assert_not_null(out);
	while (*w) {
		if (strncmp(w, "$TMP", 4) == 0) {
			o = stpcpy(o, tmp);
			w += 4;
		} else {
			*o++ = *w++;
		}
	}
	*o = '\0';
	return out;
}

typedef struct run_result {
	char *out, *err;
	int exit_code; /* -1: killed by a signal, or not run */
} run_result;

/* Runs `remora ARGV` in root, stdout and stderr to files under tmp; returns both. */
static run_result run_one(const char *bin, const char *root, const char *tmp, char **argv, int argc)
{
	char out_path[4200], err_path[4200];
	snprintf(out_path, sizeof(out_path), "%s/.stdout", tmp);
	snprintf(err_path, sizeof(err_path), "%s/.stderr", tmp);
	char *args[MAX_WORDS + 1];
	args[0] = (char *)bin;
	for (int i = 0; i < argc; i++)
		args[i + 1] = expand_tmp(argv[i], tmp);
	args[argc + 1] = NULL;
	pid_t pid = fork();
	cr_assert_neq(pid, -1, "fork: %s", strerror(errno));
	if (pid == 0) {
		int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (o < 0 || e < 0 || chdir(root) != 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
			_exit(127);
		execv(bin, args);
		_exit(127);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0)
		cr_assert_eq(errno, EINTR, "waitpid: %s", strerror(errno));
	for (int i = 0; i < argc; i++)
		free(args[i + 1]);
	run_result r = {.out = slurp(out_path), .err = slurp(err_path)};
	r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
	if (!r.out)
		r.out = strdup("");
	if (!r.err)
		r.err = strdup("");
	return r;
}

/* The outputs of the commands run so far, by command text: lines sharing a command run it once. */
typedef struct cached_run {
	char *cmd;
	run_result r;
	char why[256]; /* empty: the run went as the line asks; else what went wrong */
} cached_run;

static cached_run cache[256];
static int n_cache;

/* Runs the command text cmd (words, "&&" between commands, a leading "!"). */
static const cached_run *run_line(const char *bin, const char *root, const char *tmp, const char *cmd)
{
	for (int i = 0; i < n_cache; i++)
		if (strcmp(cache[i].cmd, cmd) == 0)
			return &cache[i];
	cr_assert_lt(n_cache, (int)(sizeof(cache) / sizeof(cache[0])), "more distinct commands than the cache holds");
	cached_run *c = &cache[n_cache++];
	c->cmd = strdup(cmd);
	c->why[0] = '\0';
	char *text = strdup(cmd);
	char *words[MAX_WORDS];
	int n = split_words(text, words);
	if (n <= 0) {
		snprintf(c->why, sizeof(c->why), "cannot split the command into words (an unclosed quote, or more than %d)", MAX_WORDS - 1);
		c->r = (run_result){strdup(""), strdup(""), -1};
		free(text);
		return c;
	}
	bool must_fail = strcmp(words[0], "!") == 0;
	int first = must_fail ? 1 : 0;
	c->r = (run_result){strdup(""), strdup(""), -1};
	for (int step = 1; first < n; step++) {
		int last = first;
		while (last < n && strcmp(words[last], "&&") != 0)
			last++;
		free(c->r.out);
		free(c->r.err);
		c->r = run_one(bin, root, tmp, words + first, last - first);
		bool final = last >= n;
		int want = final && must_fail ? 1 : 0;
		if (c->r.exit_code != want) {
			snprintf(c->why, sizeof(c->why), "its command %d exited %d, not %d; stderr: %.150s", step,
				 c->r.exit_code, want, c->r.err);
			break;
		}
		first = last + 1;
	}
	free(text);
	return c;
}

/* Removes what the commands wrote under tmp (a flat folder), and tmp. */
static void remove_tmp(const char *tmp)
{
	DIR *d = opendir(tmp);
	if (d) {
		struct dirent *e;
		char path[4200];
		while ((e = readdir(d))) {
			if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
				continue;
			snprintf(path, sizeof(path), "%s/%s", tmp, e->d_name);
			unlink(path);
		}
		closedir(d);
	}
	rmdir(tmp);
}

Test(golden_doc_figures, every_line_of_doc_figures_tsv, .timeout = 240)
{
	const char *bin = getenv("REMORA_BIN");
	const char *root = getenv("REMORA_SOURCE_DIR");
	const char *data = getenv("REMORA_TEST_DATA");
	cr_assert_not_null(bin, "REMORA_BIN must name the remora executable");
	cr_assert_not_null(root, "REMORA_SOURCE_DIR must name the repository root");
	cr_assert_not_null(data, "REMORA_TEST_DATA must point at tests/data");
	char tsv_path[4200];
	snprintf(tsv_path, sizeof(tsv_path), "%s/doc-figures.tsv", data);
	char *tsv = slurp(tsv_path);
	cr_assert_not_null(tsv, "cannot read %s", tsv_path);
	char tmp[] = "/tmp/remora-doc-figures-XXXXXX";
	cr_assert_not_null(mkdtemp(tmp), "mkdtemp: %s", strerror(errno));
	const char *where = "tests/data/doc-figures.tsv";

	int lineno = 0, checks = 0;
	for (char *line = tsv, *next; line && *line; line = next) {
		lineno++;
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		size_t len = strlen(line);
		if (len > 0 && line[len - 1] == '\r')
			line[--len] = '\0';
		if (line[0] == '#' || strspn(line, " \t") == len)
			continue;
		char *field[4];
		int nf = 0;
		char *p = line;
		while (nf < 4) {
			field[nf++] = p;
			char *tab = strchr(p, '\t');
			if (!tab)
				break;
			*tab = '\0';
			p = tab + 1;
		}
		cr_expect(nf == 4 && !strchr(field[3], '\t'),
			  "%s:%d: a check has 4 tab-separated fields (doc, figure, command, expected), this line has %d", where,
			  lineno, nf);
		if (nf != 4)
			continue;
		const char *doc = field[0], *figure = field[1], *cmd = field[2], *expected = field[3];
		checks++;

		char doc_path[4200];
		snprintf(doc_path, sizeof(doc_path), "%s/%s", root, doc);
		char *doc_text = slurp(doc_path);
		cr_expect_not_null(doc_text, "%s:%d: cannot read the doc %s", where, lineno, doc);
		if (doc_text) {
			cr_expect(strstr(doc_text, figure) != NULL,
				  "%s:%d: %s no longer holds the figure \"%s\" (checked against `remora %s`): "
				  "update the doc and this line together",
				  where, lineno, doc, figure, cmd);
			free(doc_text);
		}

		const cached_run *c = run_line(bin, root, tmp, cmd);
		if (c->why[0]) {
			cr_expect_fail("%s:%d: `remora %s` (for %s's \"%s\"): %s", where, lineno, cmd, doc, figure, c->why);
			continue;
		}
		bool on_stderr = strncmp(expected, "stderr:", 7) == 0;
		const char *want = on_stderr ? expected + 7 : expected;
		const char *got = on_stderr ? c->r.err : c->r.out;
		cr_expect(strstr(got, want) != NULL,
			  "%s:%d: `remora %s` no longer prints \"%s\" on %s, which %s quotes as \"%s\": "
			  "update the doc and this line together",
			  where, lineno, cmd, want, on_stderr ? "stderr" : "stdout", doc, figure);
	}
	/* the README walkthrough and the tables of docs/ are checked: a file cut short fails */
	cr_expect_geq(checks, 40, "%s: %d checks, fewer than the 40 expected", where, checks);
	cr_log_info("%s: %d checks, %d distinct commands", where, checks, n_cache);

	for (int i = 0; i < n_cache; i++) {
		free(cache[i].cmd);
		free(cache[i].r.out);
		free(cache[i].r.err);
	}
	n_cache = 0;
	remove_tmp(tmp);
	free(tsv);
}
