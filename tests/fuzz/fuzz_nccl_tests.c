/* libFuzzer harness: nccl-tests logs (rm_nccl_tests_parse on a buffer; the path names the
 * collective when the log does not). */
#include "fuzz.h"
#include "remora/calib.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	rm_nccl_tests_log log;
	rm_error err;
	rm_error_clear(&err);
	rm_status st = rm_nccl_tests_parse("all_gather_perf.log", (const char *)data, size, 8, &log, &err);
	fuzz_check_error(st, &err);
	rm_nccl_tests_log_finish(&log); /* zeroed on entry, so safe after an error too */
	return 0;
}
