/* Hugging Face config.json reader: presets, defaults, and every error with its line:column. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remora/workload.h"

static rm_status load(const char *file, rm_model_config *m, rm_error *err)
{
	const char *dir = getenv("REMORA_TEST_DATA");
	cr_assert_not_null(dir, "REMORA_TEST_DATA must point at tests/data");
	char path[1024];
	snprintf(path, sizeof(path), "%s/configs/%s", dir, file);
	rm_error_clear(err);
	return rm_model_config_load(path, m, err);
}

/* Asserts the status and position of the error a malformed file gives. */
static void expect_error(const char *file, rm_status st, int line, int col, const char *needle)
{
	rm_model_config m;
	rm_error err;
	rm_status got = load(file, &m, &err);
	cr_assert_eq(got, st, "%s: status %s, want %s (%s)", file, rm_status_name(got),
		     rm_status_name(st), err.msg);
	cr_assert_eq(err.line, line, "%s: line %d, want %d (%s)", file, err.line, line, err.msg);
	cr_assert_eq(err.column, col, "%s: column %d, want %d (%s)", file, err.column, col, err.msg);
	cr_assert(strstr(err.msg, needle), "%s: message '%s' lacks '%s'", file, err.msg, needle);
	cr_assert(strstr(err.file, file), "%s: error names file '%s'", file, err.file);
}

Test(hfconfig, truncated_file_points_at_its_end)
{
	expect_error("truncated.json", RM_PARSE, 5, 1, "truncated");
}

Test(hfconfig, heads_not_dividing_hidden_points_at_heads)
{
	/* line 6 is `  "num_attention_heads": 30,`: the value starts in column 26 */
	expect_error("heads-not-dividing.json", RM_INVALID, 6, 26, "does not divide hidden_size");
}

Test(hfconfig, missing_key_points_at_the_object)
{
	expect_error("missing-ffn.json", RM_MISSING, 1, 1, "\"intermediate_size\"");
}

Test(hfconfig, non_positive_size)
{
	expect_error("zero-layers.json", RM_INVALID, 5, 24, "must be positive");
}

Test(hfconfig, unsupported_architecture_lists_supported)
{
	expect_error("unsupported-arch.json", RM_UNSUPPORTED, 2, 21, "GPT2LMHeadModel");
}

Test(hfconfig, quoted_number_is_not_an_integer)
{
	expect_error("string-size.json", RM_INVALID, 3, 17, "must be an integer");
}

Test(hfconfig, kv_heads_must_divide_heads)
{
	expect_error("kv-heads.json", RM_INVALID, 7, 26, "num_key_value_heads");
}

Test(hfconfig, duplicate_key_is_a_parse_error)
{
	expect_error("duplicate-key.json", RM_PARSE, 1, 63, "duplicate key");
}

Test(hfconfig, top_level_must_be_an_object)
{
	expect_error("top-level-array.json", RM_PARSE, 1, 1, "JSON object");
}

Test(hfconfig, empty_file)
{
	expect_error("empty.json", RM_PARSE, 1, 1, "empty file");
}

Test(hfconfig, missing_file_is_an_io_error)
{
	rm_model_config m;
	rm_error err;
	cr_assert_eq(load("no-such-file.json", &m, &err), RM_IO);
	cr_assert(strstr(err.msg, "cannot open"));
}

Test(hfconfig, gpt2_defaults)
{
	rm_model_config m;
	rm_error err;
	cr_assert_eq(load("gpt2-minimal.json", &m, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(m.arch, RM_ARCH_GPT2);
	cr_assert_eq(m.ffn, 4 * 768, "n_inner null means 4*n_embd");
	cr_assert(m.tied, "GPT-2 ties its head by default");
	cr_assert_float_eq(m.attn_dropout, 0.1, 1e-12);
	cr_assert_eq(m.head_dim, 64);
	cr_assert_str_eq(m.name, "gpt2-minimal");
}

Test(hfconfig, model_type_without_architectures)
{
	rm_model_config m;
	rm_error err;
	cr_assert_eq(load("mistral-window.json", &m, &err), RM_OK, "%s", err.msg);
	cr_assert_eq(m.arch, RM_ARCH_MISTRAL);
	cr_assert_eq(m.sliding_window, 4096);
	cr_assert_eq(m.kv_heads, 8);
}

Test(hfconfig, presets_resolve_and_unknown_lists_them)
{
	rm_model_config m;
	rm_error err;
	rm_error_clear(&err);
	for (const char *const *p = rm_model_preset_names(); *p; p++) {
		cr_assert_eq(rm_model_config_resolve(*p, &m, &err), RM_OK, "%s: %s", *p, err.msg);
		cr_assert_str_eq(m.name, *p);
	}
	cr_assert_eq(rm_model_config_resolve("llama-9", &m, &err), RM_NOT_FOUND);
	cr_assert(strstr(err.msg, "llama-2-7b") && strstr(err.msg, "gpt-2"), "%s", err.msg);
}

Test(hfconfig, parse_from_memory)
{
	const char *text = "{\"architectures\": [\"Qwen2ForCausalLM\"], \"vocab_size\": 151936,"
			   " \"hidden_size\": 896, \"num_hidden_layers\": 24, \"num_attention_heads\": 14,"
			   " \"num_key_value_heads\": 2, \"intermediate_size\": 4864,"
			   " \"tie_word_embeddings\": true}";
	rm_model_config m;
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_model_config_parse(text, strlen(text), "mem.json", &m, &err), RM_OK, "%s",
		     err.msg);
	cr_assert(m.qkv_bias && m.tied);
	/* Qwen2-0.5B (its published config): 494,032,768 parameters, by hand with head_dim 64:
	 * 151936*896 + 24*(2*896 + 2*896*896 + 896 + 2*(896*128 + 128) + 3*896*4864) + 896. */
	cr_assert_eq(rm_model_param_count(&m).total, 494032768LL);
}

/* Asserts the error of config text parsed from memory (positions counted by hand in text). */
static void expect_text_error(const char *text, rm_status st, int line, int col, const char *needle)
{
	rm_model_config m;
	rm_error err;
	rm_error_clear(&err);
	rm_status got = rm_model_config_parse(text, strlen(text), "mem.json", &m, &err);
	cr_assert_eq(got, st, "%s: status %s, want %s (%s)", text, rm_status_name(got), rm_status_name(st),
		     err.msg);
	cr_assert_eq(err.line, line, "%s: line %d, want %d (%s)", text, err.line, line, err.msg);
	cr_assert_eq(err.column, col, "%s: column %d, want %d (%s)", text, err.column, col, err.msg);
	cr_assert(strstr(err.msg, needle), "'%s' lacks '%s'", err.msg, needle);
	cr_assert_str_eq(err.file, "mem.json");
}

/* Objects and lists (empty ones too) are pointed at by their '{' or '[', not by their first item. */
Test(hfconfig, collections_point_at_their_bracket)
{
	/* line 2: ` "architectures": []` -> '[' is column 19 */
	expect_text_error("{\"vocab_size\": 1,\n \"architectures\": []}", RM_INVALID, 2, 19,
			  "\"architectures\" must be a non-empty list");
	/* `{"architectures": ["LlamaForCausalLM"], "vocab_size": {}}`: '{' of {} is column 55 */
	expect_text_error("{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": {}}", RM_INVALID, 1, 55,
			  "\"vocab_size\" must be an integer");
	/* the same with [7, 8]: '[' at column 55, not the 7 at 56 */
	expect_text_error("{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": [7, 8]}", RM_INVALID, 1, 55,
			  "\"vocab_size\" must be an integer");
	/* the object itself, after two blank lines and two spaces: line 3, column 3 */
	expect_text_error("\n\n  {\"architectures\": [\"LlamaForCausalLM\"]}", RM_MISSING, 3, 3,
			  "missing required key \"vocab_size\"");
}

/* libfyaml 0.7.12 scans "%\xd0" for ever; the reader refuses a directive line before parsing. */
Test(hfconfig, directive_line_is_refused_not_scanned, .timeout = 5)
{
	expect_text_error("%\xd0", RM_PARSE, 1, 1, "'%'");
	expect_text_error("{\"vocab_size\": 1,\n%\xd0}", RM_PARSE, 2, 1, "YAML directive");
}

/* JSON holds no NUL byte: refused at its position before libfyaml sees it. */
Test(hfconfig, nul_byte_is_refused_before_parsing)
{
	static const char text[] = "{\"architectures\": [\"LlamaForCausalLM\"],\n \"a\": \"\0\"}";
	rm_model_config m;
	rm_error err;
	rm_error_clear(&err);
	cr_assert_eq(rm_model_config_parse(text, sizeof(text) - 1, "nul.json", &m, &err), RM_PARSE);
	cr_assert_eq(err.line, 2);
	cr_assert_eq(err.column, 8);
	cr_assert(strstr(err.msg, "control character 0x00"), "%s", err.msg);
}
