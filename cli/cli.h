/*
 * Private to cli/: the subcommand table and the helpers the subcommands share. The command line
 * only parses arguments and formats output; every number comes from the library.
 */
#ifndef REMORA_CLI_H
#define REMORA_CLI_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "remora/common.h"
#include "remora/cost.h"
#include "remora/scenario.h"

typedef struct cli_command {
	const char *name;
	const char *summary;
	int (*run)(int argc, char **argv); /* argv[0] is the subcommand name */
} cli_command;

/* Subcommands (one file each). */
int cli_cmd_collective(int argc, char **argv);
int cli_cmd_describe(int argc, char **argv);
int cli_cmd_hw(int argc, char **argv);
int cli_cmd_schedule(int argc, char **argv);
int cli_cmd_search(int argc, char **argv);
int cli_cmd_simulate(int argc, char **argv);
int cli_cmd_calib(int argc, char **argv);
int cli_cmd_run_program(int argc, char **argv);
int cli_cmd_bench(int argc, char **argv);
int cli_cmd_exec(int argc, char **argv);

/*
 * The cost model a scenario's simulation uses: the default one with collectives priced by the
 * NCCL model of its hardware, calibrated overrides included for "CALIB.db:NAME" (for the FSDP
 * group's size). cost must stay where it is (it points at itself).
 */


/* Exit codes: 0 success, 1 failure of the input or the environment, 2 bad usage. */
enum { CLI_EXIT_OK = 0, CLI_EXIT_FAIL = 1, CLI_EXIT_USAGE = 2 };

/* Prints err as "remora: FILE:LINE:COL: error: MSG" and returns CLI_EXIT_FAIL. */
int cli_fail(const rm_error *err);
/* Prints "remora: error: MSG" (plus a hint to --help) and returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Parses a positive integer option value; on failure prints a usage error naming the option. */
bool cli_parse_positive(const char *cmd, const char *option, const char *text, int64_t *out);
/*
 * Writes a JSON document to stdout, sorted keys kept in insertion order, fixed real precision so
 * the same input gives the same bytes. Steals the reference. Returns CLI_EXIT_OK or FAIL.
 */
int cli_print_json(json_t *doc);

#endif /* REMORA_CLI_H */
