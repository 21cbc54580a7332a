/* libFuzzer harness: scenario YAML (rm_scenario_parse over the defaults). */
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
	return 0;
}
