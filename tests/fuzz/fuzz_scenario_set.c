/* libFuzzer harness: `--set KEY=VALUE` assignments (rm_scenario_set over the defaults). Inputs
 * hold one assignment per line, applied in turn as repeated --set options would be. */
#include "fuzz.h"
#include "remora/scenario.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_cstr(data, size);
	rm_scenario sc;
	rm_scenario_init(&sc);
	char *save = NULL;
	for (char *a = strtok_r(text, "\n", &save); a; a = strtok_r(NULL, "\n", &save)) {
		rm_error err;
		rm_error_clear(&err);
		rm_status st = rm_scenario_set(&sc, a, &err);
		fuzz_check_error(st, &err);
	}
	free(text);
	return 0;
}
