/* libFuzzer harness: schedule program JSON (rm_program_parse, which validates the program). */
#include "fuzz.h"
#include "remora/program.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	rm_error err;
	rm_error_clear(&err);
	rm_program *p = rm_program_parse((const char *)data, size, "fuzz.json", &err);
	if (!p && err.msg[0] == '\0')
		abort();
	rm_program_destroy(p);
	return 0;
}
