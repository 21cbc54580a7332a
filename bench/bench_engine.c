/*
 * Engine benchmark: events per second of rm_sim_run on synthetic FSDP-like programs of 10^5 and
 * 10^6 ops (docs/design.md performance target: at least 5 million events per second on one core).
 * An event is an op start or an op end. Usage: bench_engine [MIN_SECONDS_PER_SIZE [ALLOCATOR]]
 * (ALLOCATOR: exact, pytorch, pytorch_expandable or jax; default exact, no replay).
 * The same measurement is `remora bench engine [--json]`.
 */
#include <stdio.h>
#include <stdlib.h>

#include "remora/sim.h"

int main(int argc, char **argv)
{
	double min_s = argc > 1 ? atof(argv[1]) : 1.0;
	rm_sim_options opt = {0};
	if (argc > 2 && !rm_sim_allocator_from_name(argv[2], &opt.allocator)) {
		fprintf(stderr, "bench_engine: unknown allocator '%s'\n", argv[2]);
		return 2;
	}
	static const int32_t sizes[] = {100000, 1000000};
	int rc = 0;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		rm_sim_bench_result r;
		rm_error err;
		rm_error_clear(&err);
		if (rm_sim_bench_engine_with(sizes[i], min_s, &opt, &r, &err) != RM_OK) {
			rm_log_error_record(&err);
			return 1;
		}
		printf("engine %8d ops, %s: %.2f M events/s, %.1f ns/event (%d runs, %.2f s)\n", r.ops,
		       rm_sim_allocator_name(opt.allocator), r.events_per_s / 1e6, r.ns_per_event, r.runs, r.seconds);
		if (r.events_per_s < 5e6)
			rc = 1;
	}
	return rc;
}
