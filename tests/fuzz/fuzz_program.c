/* libFuzzer harness: schedule program JSON (rm_program_parse, which validates the program); a
 * program that loads is simulated on H100 SXM as run-program does (cost model, engine run), with
 * the allocator model chosen by the input's length; reserved can never be below allocated unless
 * the run ran out of memory. */
#include "fuzz.h"
#include "remora/hw.h"
#include "remora/program.h"
#include "remora/sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	rm_error err;
	rm_error_clear(&err);
	rm_program *p = rm_program_parse((const char *)data, size, "fuzz.json", &err);
	if (!p) {
		if (err.msg[0] == '\0')
			abort();
		return 0;
	}
	const rm_hw_profile *hw = rm_hw_profile_find("h100-sxm", NULL);
	if (!hw)
		abort();
	rm_sim_options opt = {.hw_queues = 8, .memory_timeline = true,
			      .allocator = (rm_sim_allocator)(size % RM_SIM_ALLOC_COUNT)};
	rm_sim *sim = rm_sim_create(p, hw, &opt, &err);
	if (sim) {
		rm_error_clear(&err);
		rm_status st = rm_sim_run(sim, &err);
		fuzz_check_error(st, &err);
		const rm_sim_metrics *m = rm_sim_get_metrics(sim);
		/* a run whose live tensors pass what the allocator can hold (JAX's fixed BFC pool, a
		 * failed cudaMalloc) ran out of memory: only then is reserved below allocated */
		if (st == RM_OK && m->peak_reserved_bytes < m->peak_memory_bytes && m->num_ooms == 0)
			abort();
		rm_sim_destroy(sim);
	} else if (err.msg[0] == '\0') {
		abort();
	}
	rm_program_destroy(p);
	return 0;
}
