/* libFuzzer harness: remat policy expressions (rm_remat_policy_parse), e.g.
 * "save_only_these_names(query_proj, mlpwo)". */
#include "fuzz.h"
#include "remora/remat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_cstr(data, size);
	rm_error err;
	rm_error_clear(&err);
	rm_remat_policy *p = rm_remat_policy_parse(text, &err);
	if (!p && err.msg[0] == '\0')
		abort();
	rm_remat_policy_destroy(p);
	free(text);
	return 0;
}
