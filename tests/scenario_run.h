/*
 * Shared by the scenario tests (test_schedule.c, test_parallel.c): resolve a scenario, schedule
 * it, simulate it; and the check that a bad scenario fails at its key's FILE:LINE:COLUMN.
 */
#ifndef REMORA_TESTS_SCENARIO_RUN_H
#define REMORA_TESTS_SCENARIO_RUN_H

#include <criterion/criterion.h>
#include <string.h>

#include "remora/scenario.h"
#include "remora/schedule.h"
#include "remora/sim.h"

typedef struct run {
	rm_scenario_resolved res;
	rm_schedule_report rep;
	rm_program *prog;
	rm_sim_metrics m;
} run;

/* Resolves sc, schedules it and simulates the program into r. */
static inline void resolve_and_run(run *r, const rm_scenario *sc)
{
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_scenario_resolve(sc, NULL, &r->res, &err), RM_OK, "%s", err.msg);
	r->prog = rm_schedule_build(&r->res.sched, &r->rep, &err);
	cr_assert_not_null(r->prog, "%s", err.msg);
	rm_sim_options opt = {.hw_queues = r->res.hw_queues};
	rm_sim *s = rm_sim_create(r->prog, &r->res.hw, &opt, &err);
	cr_assert_not_null(s, "%s", err.msg);
	cr_assert_eq(rm_sim_run(s, &err), RM_OK, "%s", err.msg);
	r->m = *rm_sim_get_metrics(s);
	rm_sim_destroy(s);
}

static inline void run_finish(run *r)
{
	rm_program_destroy(r->prog);
	rm_schedule_report_finish(&r->rep);
	rm_scenario_resolved_finish(&r->res);
}

/* Parses, resolves, schedules and simulates a scenario given as text. */
static inline void run_text(run *r, const char *text)
{
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	cr_assert_eq(rm_scenario_parse(text, strlen(text), "t.yaml", &sc, &err), RM_OK, "%s", err.msg);
	resolve_and_run(r, &sc);
}

/* Parses and resolves text as "bad.yaml"; it must fail with status st at line:col, its message
 * holding needle. */
static inline void expect_scenario_error(const char *text, rm_status st, int line, int col, const char *needle)
{
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	rm_status got = rm_scenario_parse(text, strlen(text), "bad.yaml", &sc, &err);
	if (got == RM_OK) {
		rm_scenario_resolved res;
		got = rm_scenario_resolve(&sc, NULL, &res, &err);
		if (got == RM_OK)
			rm_scenario_resolved_finish(&res);
	}
	cr_assert_eq(got, st, "%s -> %s (%s)", text, rm_status_name(got), err.msg);
	cr_assert_eq(err.line, line, "%s: line %d (%s)", text, err.line, err.msg);
	cr_assert_eq(err.column, col, "%s: column %d (%s)", text, err.column, err.msg);
	cr_assert(strstr(err.msg, needle), "'%s' lacks '%s'", err.msg, needle);
	cr_assert_str_eq(err.file, "bad.yaml");
}

#endif
