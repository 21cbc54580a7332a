/* libFuzzer harness: Hugging Face config.json (rm_model_config_parse); a config that parses is
 * also checked against the default training setup, as describe and simulate do next. */
#include "fuzz.h"
#include "remora/workload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	rm_model_config m;
	rm_error err;
	rm_error_clear(&err);
	rm_status st = rm_model_config_parse((const char *)data, size, "config.json", &m, &err);
	fuzz_check_error(st, &err);
	if (st == RM_OK) {
		rm_train_config t = rm_train_config_default(&m);
		rm_error_clear(&err);
		fuzz_check_error(rm_train_config_check(&m, &t, &err), &err);
		rm_param_count p = rm_model_param_count(&m);
		(void)p;
	}
	return 0;
}
