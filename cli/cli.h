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
#include "remora/sim.h"

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
int cli_cmd_validate(int argc, char **argv);
int cli_cmd_plan(int argc, char **argv);
int cli_cmd_trace(int argc, char **argv);
int cli_cmd_compare(int argc, char **argv);

/*
 * Loads the scenario at path, applies the --set overrides (sets, n_sets) and resolves it into res
 * (cmd_simulate.c; simulate, schedule and compare). CLI_EXIT_OK, or the exit code with the message
 * printed: a bad --set form or key is a usage error, a bad file or value a failure.
 */
int cli_load_scenario(const char *cmd, const char *path, char **sets, int n_sets, rm_scenario *sc,
		      rm_scenario_resolved *res);
/*
 * The trace files the arguments name (cmd_trace.c): a directory stands for its *.json and
 * *.json.gz files in name order (hidden ones skipped). *files (n of them, each and the array
 * malloc'd) are the caller's. false with a message on stderr when a directory cannot be read or
 * holds no trace.
 */
bool cli_trace_files(int argc, char **argv, char ***files, int *n);
/* `remora schedule --from-hlo PATH`: lowers the HLO, writes the program to output (stdout if
 * NULL) and prints the summary; with predicted (the scenario's program), the comparison of
 * synchronous collectives. Returns the exit code. */
typedef struct rm_program rm_program;
int cli_schedule_from_hlo(const char *cmd, const char *path, const char *output, const char *hardware,
			  const char *scenario, const rm_program *predicted);

/*
 * The cost model a scenario's simulation uses: the default one with collectives priced by the
 * NCCL model of its hardware, calibrated overrides included for "CALIB.db:NAME" (for the FSDP
 * group's size). cost must stay where it is (it points at itself).
 */


/*
 * `remora exec` without --dry-run or --replay: replaces this process with remora-gpu (beside this
 * executable) running `exec` with argv (the subcommand's, argv[0] "exec") and the log level.
 * Returns only on failure (remora-gpu not built, or execv failed): the exit code, message printed.
 */
int cli_exec_on_gpu(int argc, char **argv);

/* Exit codes: 0 success, 1 failure of the input or the environment, 2 bad usage; 130 (128 +
 * SIGINT, as a shell reports a Ctrl-C) for a search into a --db stopped by Ctrl-C. */
enum { CLI_EXIT_OK = 0, CLI_EXIT_FAIL = 1, CLI_EXIT_USAGE = 2, CLI_EXIT_INTERRUPTED = 130 };

/* Prints err as "remora: FILE:LINE:COL: error: MSG" and returns CLI_EXIT_FAIL. */
int cli_fail(const rm_error *err);
/* Prints "remora: error: MSG" (plus a hint to --help) and returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * Refuses (usage error, exit 2) an output path that is the same file as one of the command's
 * inputs (same device and inode, through any link): `--trace scenario.yaml` or a trace onto the
 * sweep database would replace what the command reads. NULL entries are skipped.
 */
int cli_check_outputs(const char *cmd, const char *const *outputs, int n_out, const char *const *inputs, int n_in);
/*
 * A --plot folder, before any work: usage error (CLI_EXIT_USAGE) for an empty name or a path that
 * exists and is not a folder; else CLI_EXIT_OK.
 */
int cli_plot_dir_check(const char *cmd, const char *dir);
/* Creates the --plot folder (an existing one is kept): CLI_EXIT_OK, else the error printed and
 * CLI_EXIT_FAIL ("DIR: cannot create the plot folder: REASON"). */
int cli_plot_dir_create(const char *dir);
/*
 * Checks the form of every --set KEY=VALUE (an '=', a key remora has) before any file is read and
 * prints a usage error for the first bad one: CLI_EXIT_USAGE, else CLI_EXIT_OK. Values are
 * checked when they are applied (a bad value is bad input, exit 1).
 */
int cli_check_sets(const char *cmd, char *const *sets, int n_sets);
/* Prints a step breakdown (rm_sim_breakdown) as text: time by class, memory by role at the peak
 * (cmd_simulate.c; simulate and run-program --breakdown). */
void cli_print_breakdown(const rm_breakdown *bd);
/*
 * For a step that does not fit: what takes the memory at the peak (bd's roles, the largest three)
 * and each change's estimated peak (a smaller micro-batch, fewer saved names, offload, more FSDP
 * GPUs), each estimate with the --set options that try it as they can be pasted (more FSDP GPUs
 * with the cluster.nodes that hold them). peak and capacity in
 * bytes; t the step's training configuration (micro_batch, fsdp); gpus the cluster's GPUs and
 * gpus_per_node its nodes' (the scenario's cluster). out NULL: printed; else set on out as
 * over_bytes, peak_time_s, at_peak [{role, bytes}] and would_fit [{change, estimate_bytes (when
 * estimated), note}]. saved: the names the plan saves by name (n_saved of them; 0: none, and no
 * offload line is offered), so the offload line is the --set options that move them to host
 * memory. search: the hint is for search's closest candidate, so a smaller micro-batch is
 * search.micro_batches (training.micro_batch does not choose a search's micro-batches). Does
 * nothing when peak <= capacity (cmd_simulate.c; simulate and search).
 */
void cli_print_fit_hint(const rm_breakdown *bd, int64_t peak, int64_t capacity, const rm_train_config *t,
			int64_t gpus, int64_t gpus_per_node, const char (*saved)[48], int n_saved, bool search,
			json_t *out);
/*
 * The usage error (exit 2) for getopt_long's '?': an unknown option, an option missing its value,
 * or a value given to a long option that takes none, told apart with the subcommand's own
 * shortopts and longopts (those it passed to getopt_long) and optopt/optind as getopt_long left
 * them. main() turns getopt's own messages off (opterr), so this is the one message.
 */
struct option;
int cli_option_error(const char *cmd, int argc, char **argv, const char *shortopts, const struct option *longopts);
/*
 * getopt_long for a subcommand that also takes the global -v/--verbose and -q/--quiet after the
 * command name (`remora simulate S -vv`), as `remora -vv simulate S` does: each one adjusts the
 * log level at once and is not returned; a letter or name the command has itself stays the
 * command's. Returns what getopt_long returns otherwise; shortopts and longopts are the
 * command's own (those cli_option_error is given). Not reentrant (one static copy of the tables).
 */
int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts);
/* The log level the options before the command name set (`remora -v exec ...`), without those
 * after it: what the handoff to remora-gpu passes ahead of the subcommand's own argv, which
 * carries the rest. */
rm_log_level cli_global_log_level(void);
/*
 * The hint for an unexpected argument of a command where -j is --json and -J is --jobs: " (-j is
 * --json; --jobs N or -J N sets the jobs)" when one of the arguments from index from (getopt's
 * optind: the non-options, once getopt_long has moved them last) is a number and a short option
 * cluster ending in j came before them (`search S -j 2`), else "".
 */
const char *cli_jobs_hint(int argc, char **argv, int from);
/* Parses a positive integer option value; on failure prints a usage error naming the option. */
bool cli_parse_positive(const char *cmd, const char *option, const char *text, int64_t *out);
/*
 * Writes a JSON document to stdout, sorted keys kept in insertion order, fixed real precision so
 * the same input gives the same bytes. Steals the reference. Returns CLI_EXIT_OK or FAIL.
 */
int cli_print_json(json_t *doc);
/*
 * Runs `gnuplot plots.gp` in dir without a shell (cmd_search.c): 0 when it ran and succeeded,
 * ENOENT when there is no gnuplot on PATH, another errno when it could not start, -1 when it
 * failed (its wait status in *status). gnuplot's output goes to stderr.
 */
int cli_run_gnuplot(const char *dir, int *status);
/*
 * Runs gnuplot on dir/plots.gp (cli_run_gnuplot) after removing the n_png PNGs it writes (file
 * names in dir; an earlier run's must not pass for this one's), then says on stderr what came out:
 * "wrote DIR/<wrote_png>" when the first PNG exists, else a warning that this gnuplot has no
 * pngcairo, and "wrote DIR/<wrote_svg>". gnuplot missing from PATH is a warning naming run_for
 * (what running plots.gp by hand gives); exit 0. Cannot remove a PNG, start gnuplot, or gnuplot
 * failed: an error (RM_IO) and its exit code. Returns the command's exit code.
 */
int cli_render_plots(const char *dir, const char *const *png, int n_png, const char *run_for, const char *wrote_png,
		     const char *wrote_svg);
/* Writes the gnuplot lines that, after a plot drawn on the SVG terminal, draw it again to
 * <name>.png on pngcairo when the script's `png` variable says gnuplot has that terminal. */
void cli_gnuplot_png(FILE *f, const char *name);

/*
 * Sweeps across processes (cli/sweep.c): --shard K/N (array jobs without MPI: the process sweeps
 * its shard into its own --db, merged later by `remora merge`), or the ranks of `mpirun -np N`
 * (each rank sweeps its shard into DB.rankK; rank 0 merges them into DB and alone prints). MPI is
 * initialised only when mpirun started the process, so a plain run never touches it.
 */
#define CLI_MAX_SHARDS 4096
#define CLI_SWEEP_PATH 1200
#include "remora/search.h"
typedef struct cli_sweep {
	int shard, shards;             /* shards > 1: this process's part (0-based) */
	bool mpi, mpi_init;            /* mpi: more than one rank; mpi_init: MPI_Init was called */
	int rank, size;
	const char *final_db;          /* the --db given (NULL: none) */
	char db[CLI_SWEEP_PATH];       /* the one database the output reads (under MPI without --db: a
					* temporary one) */
	char rank_db[CLI_SWEEP_PATH + 16]; /* under MPI: this rank's file */
	char tmpdir[CLI_SWEEP_PATH];   /* under MPI without --db: the folder removed at the end */
	const struct cli_mpi_ops *ops; /* under mpirun: remora-mpi.so's table (cli/mpi_ops.h) */
	void *module;
	bool locked;                   /* rank 0 under MPI with --db: DB.lock held (flock) for the run */
	int lock_fd;
} cli_sweep;
/* Parses "K/N" (1 <= K <= N <= CLI_MAX_SHARDS) into a 0-based shard; a usage error otherwise. */
bool cli_parse_shard(const char *cmd, const char *text, int *k, int *n);
/* Starts a sweep: under mpirun (more than one rank) initialises MPI, merges rank files an
 * earlier, killed run left, and sets this rank's database. CLI_EXIT_OK or the exit code. */
int cli_sweep_begin(const char *cmd, cli_sweep *w, const char *db, int shard, int shards);
/* Fills opt's db_path, resume_from and shard for this process. */
void cli_sweep_options(const cli_sweep *w, rm_search_options *opt);
/* Whether this process prints the output (not an MPI rank other than 0). */
bool cli_sweep_is_root(const cli_sweep *w);
/*
 * Under MPI, after every rank closed its database: sums the ranks' progress into prog, and rank
 * 0 merges the rank files into the one database (even when a rank failed: nothing committed is
 * lost). Returns st, another rank's failure, or the merge's; a plain run returns st.
 */
rm_status cli_sweep_gather(cli_sweep *w, rm_search_progress *prog, rm_status st, rm_error *err);
/* Under MPI the sum (or the maximum) of v over the ranks; v otherwise. */
double cli_sweep_reduce(const cli_sweep *w, double v, bool max);
/* cli_sweep_gather as rm_plan_options.gather (user: the cli_sweep). */
rm_status cli_sweep_gather_fn(void *user, rm_status st, rm_error *err);
/* Ends the sweep (under MPI: a barrier, the temporary folder removed, MPI_Finalize). */
void cli_sweep_end(cli_sweep *w);

/* `remora merge OUT.db IN.db...` (cmd_merge.c). */
int cli_cmd_merge(int argc, char **argv);

#endif /* REMORA_CLI_H */
