/*
 * `remora schedule --from-hlo FILE [SCENARIO] [-o PROGRAM.json] [--hardware NAME]`: XLA's scheduled
 * HLO text lowered to a schedule program (remora/hlo.h, docs/hlo.md), with a summary on stderr:
 * ops by kind, the collectives XLA left synchronous and, given a scenario, the ones remora's
 * scheduler makes synchronous for it next to them.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "remora/calib.h"
#include "remora/file.h"
#include "remora/hlo.h"
#include "remora/program.h"

static bool write_program(FILE *out, void *user, rm_error *err)
{
	return rm_program_write(user, out, err);
}

static void print_counts(const char *what, const int64_t *by)
{
	int64_t total = 0;
	for (int c = 0; c < RM_COLL_COUNT; c++)
		total += by[c];
	fprintf(stderr, "  %-22s %lld", what, (long long)total);
	const char *sep = " (";
	for (int c = 0; c < RM_COLL_COUNT; c++)
		if (by[c]) {
			fprintf(stderr, "%s%s %lld", sep, rm_coll_name((rm_coll)c), (long long)by[c]);
			sep = ", ";
		}
	fprintf(stderr, "%s\n", total ? ")" : "");
}

static void print_summary(const char *path, const rm_hlo_module *m, const rm_hlo_report *r, const rm_program *prog)
{
	rm_hlo_module_info info;
	rm_hlo_module_get_info(m, &info);
	fprintf(stderr, "remora: %s: HLO module %s%s: %d computations, %d instructions, num_partitions %lld, "
			"replica_count %lld\n",
		path, info.name, info.scheduled ? " (is_scheduled=true)" : " (not scheduled: the text order is used)",
		info.computations, info.instructions, (long long)info.num_partitions, (long long)info.replica_count);
	fprintf(stderr, "remora: lowered to %d ops (%lld while loops, %lld iterations unrolled):\n", prog->n_ops,
		(long long)r->whiles, (long long)r->iterations);
	fprintf(stderr, "  %-22s %lld\n  %-22s %lld\n  %-22s %lld\n  %-22s %lld\n", "gemm", (long long)r->gemm,
		"attention", (long long)r->attention, "memory-bound", (long long)r->memory_bound, "copies",
		(long long)r->copies);
	print_counts("collectives async", r->coll_async);
	print_counts("collectives sync", r->coll_sync);
	fprintf(stderr, "  %-22s %lld\n", "no kernel", (long long)r->no_cost);
	if (r->unknown || r->unknown_in_fusions) {
		fprintf(stderr, "remora: warning: %lld instructions of opcodes remora does not model, priced as memory-bound "
				"by their bytes:",
			(long long)(r->unknown + r->unknown_in_fusions));
		for (int32_t i = 0; i < r->n_unknown_names; i++)
			fprintf(stderr, "%s %s x%lld", i ? "," : "", r->unknown_names[i], (long long)r->unknown_counts[i]);
		fprintf(stderr, "\n");
	}
	if (r->stream_annotated)
		fprintf(stderr, "remora: note: %lld instructions carry _xla_stream_annotation (an explicit stream in XLA); "
				"they run on the one compute stream here\n",
			(long long)r->stream_annotated);
	if (r->unmatched_done)
		fprintf(stderr, "remora: warning: %lld done ops whose start was not found (they wait for nothing)\n",
			(long long)r->unmatched_done);
	fprintf(stderr, "remora: XLA's synchronous collectives: %lld\n", (long long)r->n_sync);
	for (int64_t i = 0; i < r->n_sync; i++) {
		const rm_hlo_sync_collective *s = &r->sync[i];
		char b[32];
		fprintf(stderr, "  %-48s %-14s %10s  group %-4d %s (line %d)\n", s->name, rm_coll_name(s->op),
			rm_format_bytes(s->bytes, b, sizeof(b)), s->group_size,
			s->is_sync_attr ? "is_sync=true" : "no start/done", s->line);
	}
}

/* The scheduler's synchronous collectives (those with a sync reason) next to XLA's. */
static void print_comparison(const char *scenario, const rm_hlo_report *r, const rm_program *pred)
{
	int64_t by[RM_COLL_COUNT] = {0}, n = 0;
	for (int32_t i = 0; i < pred->n_ops; i++) {
		const rm_program_op *o = &pred->ops[i];
		if (o->cost.kind == RM_COST_COLLECTIVE && o->sync_reason) {
			by[o->cost.collective.op]++;
			n++;
		}
	}
	fprintf(stderr, "remora: synchronous collectives, XLA's (HLO) and remora's scheduler's (%s):\n", scenario);
	fprintf(stderr, "  %-16s %10s %10s\n", "collective", "XLA", "remora");
	for (int c = 0; c < RM_COLL_COUNT; c++)
		if (by[c] || r->coll_sync[c])
			fprintf(stderr, "  %-16s %10lld %10lld\n", rm_coll_name((rm_coll)c), (long long)r->coll_sync[c],
				(long long)by[c]);
	fprintf(stderr, "  %-16s %10lld %10lld\n", "total", (long long)r->n_sync, (long long)n);
	if (n)
		fprintf(stderr, "remora: the scheduler's synchronous collectives:\n");
	for (int32_t i = 0; i < pred->n_ops; i++) {
		const rm_program_op *o = &pred->ops[i];
		if (o->cost.kind == RM_COST_COLLECTIVE && o->sync_reason) {
			char b[32];
			fprintf(stderr, "  %-48s %-14s %10s  group %-4d %s\n", o->name, rm_coll_name(o->cost.collective.op),
				rm_format_bytes(o->cost.collective.bytes, b, sizeof(b)), o->cost.collective.group_size,
				o->sync_reason);
		}
	}
}

int cli_schedule_from_hlo(const char *cmd, const char *path, const char *output, const char *hardware,
			  const char *scenario, const rm_program *predicted)
{
	rm_error err;
	rm_error_clear(&err);
	if (hardware && !strchr(hardware, ':') && !rm_hw_profile_find(hardware, &err))
		return cli_usage_error(cmd, "--hardware: %s", err.msg);
	rm_hlo_module *m = rm_hlo_load(path, &err);
	if (!m)
		return cli_fail(&err);
	rm_hlo_lower_options opt = {.hardware = hardware};
	rm_hlo_report rep;
	rm_program *prog = rm_hlo_lower(m, &opt, &rep, &err);
	int rc = CLI_EXIT_OK;
	if (!prog) {
		rc = cli_fail(&err);
		goto done;
	}
	/* the program first, so that a failed write leaves nothing behind and prints no summary */
	bool ok = output ? rm_file_write(output, write_program, prog, &err) : rm_program_write(prog, stdout, &err);
	if (!ok) {
		if (err.status == RM_OK)
			rm_error_set(&err, RM_IO, output ? output : "stdout", 0, 0, "writing the program failed");
		rc = cli_fail(&err);
		goto done;
	}
	if (!output)
		fflush(stdout);
	print_summary(path, m, &rep, prog);
	if (predicted)
		print_comparison(scenario, &rep, predicted);
	if (output)
		fprintf(stderr, "remora: wrote %s (%d ops, %d events, %d streams)\n", output, prog->n_ops, prog->n_events,
			prog->n_streams);
done:
	rm_program_destroy(prog);
	rm_hlo_report_finish(&rep);
	rm_hlo_destroy(m);
	return rc;
}
