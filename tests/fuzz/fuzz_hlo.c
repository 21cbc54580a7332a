/* libFuzzer harness: XLA HLO text (rm_hlo_parse, no NUL at the end of the bytes) and, for a module
 * that parses, its lowering (rm_hlo_lower, which validates the program it builds) with the
 * unrolling limit low so that a loop's trip count cannot take the run's time; every op the
 * report counts is in the program. */
#include "fuzz.h"
#include "remora/hlo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	rm_error err;
	rm_error_clear(&err);
	rm_hlo_module *m = rm_hlo_parse((const char *)data, size, "fuzz.hlo", &err);
	if (!m) {
		if (err.msg[0] == '\0' || err.status == RM_OK)
			abort();
		return 0;
	}
	rm_hlo_lower_options opt = {.max_ops = 20000};
	rm_hlo_report rep;
	rm_error_clear(&err);
	rm_program *p = rm_hlo_lower(m, &opt, &rep, &err);
	if (p) {
		int64_t ops = rep.gemm + rep.attention + rep.memory_bound + rep.copies + rep.unknown;
		for (int c = 0; c < RM_COLL_COUNT; c++)
			ops += rep.coll_async[c] + rep.coll_sync[c];
		if (ops != p->n_ops || rep.n_sync > p->n_ops)
			abort();
	} else if (err.msg[0] == '\0') {
		abort();
	}
	rm_program_destroy(p);
	rm_hlo_report_finish(&rep);
	rm_hlo_destroy(m);
	return 0;
}
