/*
 * `remora merge OUT.db IN.db...`: merges sweep databases (the shards of `remora search --shard` or
 * `remora plan --shard`, or any sweeps) into OUT, created when missing. Rows are keyed and
 * checksummed (search/store.c), so merging twice adds nothing and no row is duplicated; an input
 * row that fails its checksum stops the merge before anything is written.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "remora/search.h"

static void merge_usage(FILE *out)
{
	fprintf(out,
		"usage: remora merge OUT.db IN.db [IN.db...]\n\n"
		"Merges sweep databases (the shards of `remora search --shard K/N` or `remora plan --shard\n"
		"K/N`) into OUT.db, created when missing. Every row is keyed by the SHA-256 of its scenario\n"
		"and configuration and carries a checksum: merging again adds nothing, a row OUT.db holds is\n"
		"never lost, and an input row that fails its checksum stops the merge with nothing written.\n"
		"Then `remora search SCENARIO --db OUT.db` (or plan) prints the sweep's answer.\n\n"
		"options:\n"
		"  -h, --help  this help\n");
}

int cli_cmd_merge(int argc, char **argv)
{
	static const struct option longopts[] = {{"help", no_argument, NULL, 'h'}, {0, 0, 0, 0}};
	const char *shortopts = "h";
	int c;
	while ((c = cli_getopt(argc, argv, shortopts, longopts)) != -1) {
		if (c == 'h') {
			merge_usage(stdout);
			return CLI_EXIT_OK;
		}
		return cli_option_error("merge", argc, argv, shortopts, longopts);
	}
	if (argc - optind < 2)
		return cli_usage_error("merge", argc - optind < 1 ? "missing OUT.db and IN.db" : "missing IN.db (the databases to merge)");
	const char *out = argv[optind];
	const char *const *in = (const char *const *)argv + optind + 1;
	int n_in = argc - optind - 1;
	const char *outs[] = {out};
	int crc = cli_check_outputs("merge", outs, 1, in, n_in);
	if (crc != CLI_EXIT_OK)
		return crc;
	rm_error err;
	rm_error_clear(&err);
	rm_search_merge_stats ms;
	struct stat st_out;
	bool existed = stat(out, &st_out) == 0;
	if (rm_search_merge(out, in, n_in, &ms, &err) != RM_OK) {
		/* nothing merged: an OUT this run created goes again (one that existed is unchanged) */
		if (!existed)
			unlink(out);
		return cli_fail(&err);
	}
	printf("%s: %lld rows read from %d database%s, %lld added, %lld already there", out, (long long)ms.read, n_in,
	       n_in == 1 ? "" : "s", (long long)ms.added, (long long)ms.same);
	if (ms.repaired)
		printf(", %lld damaged rows replaced", (long long)ms.repaired);
	printf("\n");
	if (ms.conflicts)
		rm_log_warn("%s: %lld rows differ from the inputs' rows of the same key (another build's figures?); "
			    "its own are kept",
			    out, (long long)ms.conflicts);
	return CLI_EXIT_OK;
}
