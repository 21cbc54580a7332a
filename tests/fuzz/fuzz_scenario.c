/* libFuzzer harness: scenario YAML (rm_scenario_parse over the defaults); a scenario that parses
 * and names a preset model is also resolved (model, hardware, training setup, policy, flags,
 * scheduler options), as simulate and search do next. Paths are not resolved: reading files is
 * not the parser's business, and a path could name a FIFO or a device. */
#include "fuzz.h"
#include "remora/scenario.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	rm_scenario sc;
	rm_error err;
	rm_error_clear(&err);
	rm_scenario_init(&sc);
	rm_status st = rm_scenario_parse((const char *)data, size, "fuzz.yaml", &sc, &err);
	fuzz_check_error(st, &err);
	size_t n = strlen(sc.model);
	if (st == RM_OK && !strchr(sc.model, '/') && !(n >= 5 && !strcmp(sc.model + n - 5, ".json"))) {
		rm_scenario_resolved res;
		rm_error_clear(&err);
		st = rm_scenario_resolve(&sc, NULL, &res, &err);
		fuzz_check_error(st, &err);
		if (st == RM_OK)
			rm_scenario_resolved_finish(&res);
	}
	return 0;
}
