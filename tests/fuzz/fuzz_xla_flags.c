/* libFuzzer harness: XLA_FLAGS strings (rm_xla_flags_parse over XLA's defaults), then the
 * string remora prints for the parsed flags, which must parse again. */
#include "fuzz.h"
#include "remora/xla_flags.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_cstr(data, size);
	rm_xla_flags f = rm_xla_flags_default();
	rm_error err;
	rm_error_clear(&err);
	rm_status st = rm_xla_flags_parse(text, &f, &err);
	fuzz_check_error(st, &err);
	if (st != RM_OK && (err.column < 1 || (size_t)err.column > size + 1))
		abort(); /* the column points into the text (or just past it) */
	free(text);
	return 0;
}
