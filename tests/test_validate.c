/*
 * Validation cases (remora/validate.h): the case reader (good case, unknown keys and missing
 * sections with line:column, ranges, overrides), the error arithmetic and summary on hand-made
 * results, and one tiny case run end to end against a hand-computed MFU.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remora/validate.h"

#define GOOD_CASE                                                                                 \
	"name: tiny gpt-2\n"                                                                      \
	"source: \"hand-made\"\n"                                                                 \
	"assumed:\n"                                                                              \
	"  - one GPU\n"                                                                           \
	"  - \"ideal runtime\"\n"                                                                 \
	"notes: a note\n"                                                                         \
	"scenario:\n"                                                                             \
	"  model: gpt-2\n"                                                                        \
	"  cluster: {gpus_per_node: 1}\n"                                                         \
	"  training: {seq_len: 128, micro_batch: 2}\n"                                            \
	"  scheduler: {mode: ideal}\n"                                                            \
	"set: [training.micro_batch=4]\n"                                                         \
	"measured:\n"                                                                             \
	"  tokens_per_s_per_gpu: [1000, 3000]\n"                                                  \
	"  mfu: 0.25\n"                                                                           \
	"  mfu_convention: palm_noncausal\n"                                                      \
	"  memory_fraction: 0.25\n"                                                               \
	"  memory_kind: active_fraction\n"                                                        \
	"  device_memory_gib: 96\n"

static rm_validation_case *parse(const char *text, rm_status want, rm_error *err)
{
	rm_validation_case *c = calloc(1, sizeof(*c));
	cr_assert_not_null(c);
	rm_error_clear(err);
	rm_status st = rm_validation_case_parse(text, strlen(text), "dir/case.yaml", c, err);
	cr_assert_eq(st, want, "status %d (want %d): %d:%d: %s", st, want, err->line, err->column, err->msg);
	return c;
}

/* Parses text, expects status want at line:column with a message containing what. */
static void expect_error(const char *text, rm_status want, int line, int column, const char *what)
{
	rm_error err;
	free(parse(text, want, &err));
	cr_expect_str_eq(err.file, "dir/case.yaml");
	cr_expect_eq(err.line, line, "line %d, want %d: %s", err.line, line, err.msg);
	cr_expect_eq(err.column, column, "column %d, want %d: %s", err.column, column, err.msg);
	cr_expect(strstr(err.msg, what) != NULL, "'%s' not in '%s'", what, err.msg);
}

Test(validate_case, good_case)
{
	rm_error err;
	rm_validation_case *c = parse(GOOD_CASE, RM_OK, &err);
	cr_expect_str_eq(c->name, "tiny gpt-2");
	cr_expect_str_eq(c->source, "hand-made");
	cr_assert_eq(c->n_assumed, 2);
	cr_expect_str_eq(c->assumed[1], "ideal runtime");
	cr_expect_str_eq(c->notes, "a note");
	cr_expect_str_eq(c->scenario.model, "gpt-2");
	cr_expect_eq(c->scenario.seq_len, 128);
	/* the override is applied over the inline scenario */
	cr_expect_eq(c->scenario.micro_batch, 4);
	cr_expect_str_eq(c->scenario.path, "dir/case.yaml");
	cr_expect_str_eq(c->scenario.dir, "dir");
	cr_expect_str_eq(c->scenario_file, "");
	cr_expect(c->tokens_per_s_per_gpu.set);
	cr_expect_eq(c->tokens_per_s_per_gpu.low, 1000);
	cr_expect_eq(c->tokens_per_s_per_gpu.high, 3000);
	cr_expect_eq(rm_measured_mid(c->tokens_per_s_per_gpu), 2000);
	cr_expect_eq(rm_measured_mid(c->mfu), 0.25);
	cr_expect_eq(c->mfu_convention, RM_MFU_PALM_NONCAUSAL);
	cr_expect_eq(c->memory_kind, RM_MEMORY_ACTIVE_FRACTION);
	cr_expect_eq(c->device_memory_gib, 96);
	free(c);
}

Test(validate_case, single_value_is_a_range_of_one)
{
	rm_error err;
	rm_validation_case *c = parse("name: a\nsource: b\nscenario: {model: gpt-2}\n"
				      "measured: {tokens_per_s_per_gpu: 9369, memory_gib: 56.8, memory_kind: reserved}\n",
				      RM_OK, &err);
	cr_expect_eq(c->tokens_per_s_per_gpu.low, 9369);
	cr_expect_eq(c->tokens_per_s_per_gpu.high, 9369);
	cr_expect_eq(c->memory_kind, RM_MEMORY_RESERVED);
	cr_expect_eq(rm_measured_mid(c->memory), 56.8);
	cr_expect(!c->mfu.set);
	cr_expect(isnan(rm_measured_mid(c->mfu)));
	free(c);
}

Test(validate_case, unknown_keys_name_line_and_column)
{
	/* top level, inside measured, and inside the inline scenario (scenario.c's own message) */
	expect_error("name: a\nsource: b\nscenario: {model: gpt-2}\nmeasured: {tokens_per_s_per_gpu: 5}\n"
		     "  \nsources: c\n",
		     RM_UNKNOWN_KEY, 6, 1, "unknown key \"sources\"");
	expect_error("name: a\nsource: b\nscenario: {model: gpt-2}\nmeasured:\n  tokens_per_s_per_gpu: 5\n"
		     "  wps: 3\n",
		     RM_UNKNOWN_KEY, 6, 3, "unknown key \"measured.wps\"");
	expect_error("name: a\nsource: b\nscenario:\n  model: gpt-2\n  training: {seq_len: 64, seqlen: 3}\n"
		     "measured: {tokens_per_s_per_gpu: 5}\n",
		     RM_UNKNOWN_KEY, 5, 27, "unknown key \"training.seqlen\"");
}

Test(validate_case, missing_measured_and_required_figures)
{
	expect_error("name: a\nsource: b\nscenario: {model: gpt-2}\n", RM_MISSING, 1, 1, "missing required key \"measured\"");
	expect_error("name: a\nscenario: {model: gpt-2}\nmeasured: {tokens_per_s_per_gpu: 5}\n", RM_MISSING, 1, 1,
		     "missing required key \"source\"");
	expect_error("name: a\nsource: b\nscenario: {model: gpt-2}\nmeasured:\n  mfu: 0.3\n  mfu_convention: remora\n",
		     RM_MISSING, 5, 3, "tokens_per_s_per_gpu");
	/* an MFU without its convention, a memory figure without its kind */
	expect_error("name: a\nsource: b\nscenario: {model: gpt-2}\nmeasured:\n  tokens_per_s_per_gpu: 5\n  mfu: 0.3\n",
		     RM_MISSING, 6, 8, "mfu_convention");
	expect_error("name: a\nsource: b\nscenario: {model: gpt-2}\nmeasured:\n  tokens_per_s_per_gpu: 5\n"
		     "  memory_gib: 30\n",
		     RM_MISSING, 6, 15, "memory_kind");
}

Test(validate_case, bad_ranges)
{
	const char *head = "name: a\nsource: b\nscenario: {model: gpt-2}\nmeasured:\n  tokens_per_s_per_gpu: ";
	char text[512];
	snprintf(text, sizeof(text), "%s[8400, 8100]\n", head);
	expect_error(text, RM_INVALID, 5, 26, "low end above its high end");
	snprintf(text, sizeof(text), "%s[8100, 8400, 8600]\n", head);
	expect_error(text, RM_INVALID, 5, 25, "[low, high]");
	snprintf(text, sizeof(text), "%s[8100, fast]\n", head);
	expect_error(text, RM_INVALID, 5, 32, "expected a number from 1 to 1e+08");
	snprintf(text, sizeof(text), "%s-5\n", head);
	expect_error(text, RM_INVALID, 5, 25, "expected a number from 1 to 1e+08");
	/* figures no GPU produces are refused, not carried into the statistics */
	snprintf(text, sizeof(text), "%s1e308\n", head);
	expect_error(text, RM_INVALID, 5, 25, "from 1 to 1e+08");
	snprintf(text, sizeof(text), "%s1e-300\n", head);
	expect_error(text, RM_INVALID, 5, 25, "from 1 to 1e+08");
	expect_error("name: a\nsource: b\nscenario: {model: gpt-2}\nmeasured:\n  tokens_per_s_per_gpu: 5\n"
		     "  memory_gib: 1e300\n  memory_kind: reserved\n",
		     RM_INVALID, 6, 15, "from 0.001 to 1.04858e+06");
	/* an MFU is a fraction, not a percentage */
	expect_error("name: a\nsource: b\nscenario: {model: gpt-2}\nmeasured:\n  tokens_per_s_per_gpu: 5\n"
		     "  mfu: 33\n  mfu_convention: palm_noncausal\n",
		     RM_INVALID, 6, 8, "from 0.0001 to 1");
}

Test(validate_case, bad_override_is_reported_at_its_item)
{
	expect_error("name: a\nsource: b\nscenario: {model: gpt-2}\nset:\n  - training.micro_batch=many\n"
		     "measured: {tokens_per_s_per_gpu: 5}\n",
		     RM_INVALID, 5, 5, "set[0]: training.micro_batch=many: training.micro_batch: expected an integer");
}

Test(validate_case, resolution_error_of_an_override_points_at_it)
{
	rm_error err;
	rm_validation_case *c = parse("name: a\nsource: b\nscenario: {model: gpt-2, scheduler: {mode: ideal}}\n"
				      "set: [training.micro_batch=2, parallelism.fsdp=3]\n"
				      "measured: {tokens_per_s_per_gpu: 5}\n",
				      RM_OK, &err);
	rm_validation_result r;
	cr_assert_eq(rm_validation_run(c, NULL, &r, &err), RM_INVALID);
	cr_expect_str_eq(err.file, "dir/case.yaml");
	cr_expect_eq(err.line, 4);
	cr_expect_eq(err.column, 31);
	cr_expect(strstr(err.msg, "set[1]: parallelism.fsdp: FSDP degree 3") == err.msg, "%s", err.msg);
	free(c);
}

Test(validate_summary, median_of_magnitudes)
{
	/* |+10|, |-30|, |5|, |-20| sorted: 5 10 20 30 -> (10 + 20) / 2; the NAN (no figure) is skipped */
	const double even[] = {10, -30, 5, NAN, -20};
	cr_expect_float_eq(rm_validation_median_abs(even, 5), 15.0, 1e-12);
	const double odd[] = {3, -1, -2};
	cr_expect_float_eq(rm_validation_median_abs(odd, 3), 2.0, 1e-12);
	const double none[] = {NAN};
	cr_expect(isnan(rm_validation_median_abs(none, 1)));
	cr_expect(isnan(rm_validation_median_abs(NULL, 0)));
}

Test(validate_summary, counts_and_worst)
{
	rm_validation_result r[3];
	memset(r, 0, sizeof(r));
	const double tok[] = {10, -30, 25}, mem[] = {NAN, 5, -40}, mfu[] = {6, 2, NAN};
	for (int i = 0; i < 3; i++) {
		r[i].tokens_error_pct = tok[i];
		r[i].memory_error_pct = mem[i];
		r[i].mfu_excess_points = mfu[i];
	}
	rm_validation_summary s;
	rm_validation_summarize(r, 3, &s);
	cr_expect_eq(s.cases, 3);
	cr_expect_eq(s.tokens_cases, 3);
	cr_expect_eq(s.memory_cases, 2);
	cr_expect_float_eq(s.tokens_median_abs_pct, 25.0, 1e-12); /* 10 25 30 */
	cr_expect_float_eq(s.memory_median_abs_pct, 22.5, 1e-12); /* (5 + 40) / 2 */
	cr_expect_eq(s.worst, 2);
	cr_expect_str_eq(s.worst_metric, "memory");
	cr_expect_float_eq(s.worst_error_pct, -40.0, 1e-12);
	cr_expect_eq(s.over_bad_error, 2); /* case 1 (30) and case 2 (25, 40) */
	cr_expect_eq(s.mfu_over_margin, 1); /* 6 points > 5; 2 is not */
}

Test(validate_run, tiny_case_error_arithmetic)
{
	rm_error err;
	rm_validation_case *c = parse(GOOD_CASE, RM_OK, &err);
	rm_validation_result r;
	cr_assert_eq(rm_validation_run(c, NULL, &r, &err), RM_OK, "%s", err.msg);
	cr_assert(r.tokens_per_s_per_gpu > 0);
	cr_expect_eq(r.measured_tokens_per_s_per_gpu, 2000);
	cr_expect_float_eq(r.tokens_error_pct, 100.0 * (r.tokens_per_s_per_gpu - 2000) / 2000, 1e-9);
	/* gpt-2 at seq 128: N_nonembedding = 12 x 7,087,872 (layers) + 1,536 (final LayerNorm)
	 * + 50,257 x 768 (the tied head) = 123,653,376; 6 N + 12 x 12 x 768 x 128 = 756,076,032 FLOPs
	 * per token, over the H100 SXM's 989.4 TFLOP/s */
	double palm = r.tokens_per_s_per_gpu * 756076032.0 / 989.4e12;
	cr_expect_float_eq(r.mfu_palm_noncausal, palm, 1e-12 + palm * 1e-12);
	cr_expect_eq(r.mfu, r.mfu_palm_noncausal);
	/* causal attention counts half the scores: remora's MFU is below the non-causal one */
	cr_expect_lt(r.mfu_remora, r.mfu_palm_noncausal);
	cr_expect_float_eq(r.mfu_excess_points, 100.0 * (r.mfu - 0.25), 1e-9);
	/* active memory: 25% of 96 GiB, compared with the allocated peak */
	cr_expect_float_eq(r.measured_memory_bytes, 0.25 * 96 * 1073741824.0, 1e-3);
	cr_expect_str_eq(r.memory_metric, "peak_memory_bytes");
	cr_expect_eq(r.memory_bytes, r.peak_memory_bytes);
	cr_expect_float_eq(r.memory_error_pct, 100.0 * ((double)r.memory_bytes - r.measured_memory_bytes) / r.measured_memory_bytes,
			   1e-9);
	free(c);
}

/* The case reader refuses a NUL byte before libfyaml parses (it crashes on "? a: \t\0\0\0"). */
Test(validate_case, nul_byte_is_refused_before_parsing)
{
	static const char text[] = "# case\n? xntion: \t\0\0\xf5\0\0\0\0\xa9" "90\n";
	rm_validation_case c;
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_validation_case_parse(text, sizeof(text) - 1, "nul.yaml", &c, &err), RM_PARSE);
	cr_assert_eq(err.line, 2);
	cr_assert_eq(err.column, 12);
	cr_assert(strstr(err.msg, "control character 0x00"), "%s", err.msg);
}

/* An empty case file, or one of comments only, is refused at 1:1 with what it lacks. */
Test(validate_case, empty_file_is_refused_at_its_start)
{
	static const char *const texts[] = {"", "\n\n", "# a comment\n  # another\n"};
	for (size_t i = 0; i < 3; i++) {
		rm_validation_case c;
		rm_error err;
		rm_error_clear(&err);
		cr_assert_eq(rm_validation_case_parse(texts[i], strlen(texts[i]), "empty.yaml", &c, &err), RM_PARSE);
		cr_assert_eq(err.line, 1);
		cr_assert_eq(err.column, 1);
		cr_assert(strstr(err.msg, "holds no case"), "%s", err.msg);
	}
}
