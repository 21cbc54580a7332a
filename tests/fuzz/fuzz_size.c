/* libFuzzer harness: size strings ("4096", "64KiB", "1.5GB"; rm_parse_size). A size that parses
 * is non-negative, and printing it in bytes parses back to the same value. */
#include <inttypes.h>
#include <stdio.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_cstr(data, size);
	int64_t bytes = -1;
	if (rm_parse_size(text, &bytes)) {
		if (bytes < 0)
			abort();
		char again[32];
		int64_t back = -1;
		snprintf(again, sizeof(again), "%" PRId64, bytes);
		if (!rm_parse_size(again, &back) || back != bytes)
			abort();
	}
	free(text);
	return 0;
}
