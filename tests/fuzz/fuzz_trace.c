/* libFuzzer harness: Chrome Trace Event JSON (rm_trace_read_mem, the streaming reader's scanner,
 * its per-event decoding and the placement of JAX events); a trace that reads is also analysed. */
#include "fuzz.h"
#include "remora/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	rm_error err;
	rm_error_clear(&err);
	rm_trace *t = rm_trace_read_mem((const char *)data, size, "trace.json", &err);
	if (!t) {
		fuzz_check_error(err.status == RM_OK ? RM_PARSE : err.status, &err);
		return 0;
	}
	rm_trace_summary s;
	rm_trace_summary_get(t, &s);
	if (s.gpu_events <= 0)
		abort(); /* a trace without GPU events is refused */
	rm_trace_report *r = NULL;
	int n = 0;
	rm_trace_analyze(t, 0, &r, &n);
	for (int i = 0; i < n; i++)
		if (!(r[i].median.gpu_busy_s <= r[i].median.step_s + 1e-9) || r[i].median.exposed_comm_s > r[i].median.comm_busy_s + 1e-9)
			abort(); /* a union is never longer than its window, nor exposed comm than comm */
	rm_trace_reports_free(r, n);
	rm_trace_destroy(t);
	return 0;
}
