/* libFuzzer harness: validation case files (rm_validation_case_parse), their inline scenario
 * (rm_scenario_parse_at) and overrides included. Cases are parsed, not run. A case may name a
 * scenario file: inputs with a '/' are skipped and the case's folder does not exist, so no file
 * is ever read (a path could name a FIFO or a device). */
#include "fuzz.h"
#include "remora/validate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (memchr(data, '/', size))
		return 0;
	rm_validation_case *c = malloc(sizeof(*c));
	if (!c)
		abort();
	rm_error err;
	rm_error_clear(&err);
	rm_status st = rm_validation_case_parse((const char *)data, size, "remora-fuzz-no-such-folder/case.yaml", c, &err);
	fuzz_check_error(st, &err);
	if (st == RM_OK && (!c->name[0] || !c->source[0] || !c->tokens_per_s_per_gpu.set || !c->scenario.model[0]))
		abort(); /* RM_OK means every required key was read */
	free(c);
	return 0;
}
