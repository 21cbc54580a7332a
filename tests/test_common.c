/* common/: sizes, status table, error formatting, hashing, JSON strings. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "remora/common.h"
#include "remora/json.h"

Test(common, parse_size_binary_and_decimal_suffixes)
{
	int64_t b = 0;
	cr_assert(rm_parse_size("4096", &b) && b == 4096);
	cr_assert(rm_parse_size("16MiB", &b) && b == 16777216);
	cr_assert(rm_parse_size("16 MiB", &b) && b == 16777216);
	cr_assert(rm_parse_size("1GiB", &b) && b == 1073741824);
	cr_assert(rm_parse_size("1G", &b) && b == 1073741824, "nccl-tests writes G for GiB");
	cr_assert(rm_parse_size("1.5K", &b) && b == 1536);
	cr_assert(rm_parse_size("1GB", &b) && b == 1000000000);
	cr_assert(rm_parse_size("512B", &b) && b == 512);
}

Test(common, parse_size_rejects_bad_input)
{
	int64_t b = 0;
	cr_assert_not(rm_parse_size("-1", &b));
	cr_assert_not(rm_parse_size("1.5", &b), "a fractional byte count is not a size");
	cr_assert_not(rm_parse_size("10XB", &b));
	cr_assert_not(rm_parse_size("", &b));
	cr_assert_not(rm_parse_size("MiB", &b));
	cr_assert_not(rm_parse_size("1e30", &b), "overflow of int64");
	cr_assert_not(rm_parse_size(NULL, &b));
}

Test(common, parse_positive_int)
{
	int64_t v = 0;
	cr_assert(rm_parse_positive_int("8", &v) && v == 8);
	cr_assert_not(rm_parse_positive_int("0", &v));
	cr_assert_not(rm_parse_positive_int("-3", &v));
	cr_assert_not(rm_parse_positive_int("3x", &v));
	cr_assert_not(rm_parse_positive_int(" 3", &v));
	cr_assert_not(rm_parse_positive_int("99999999999999999999", &v));
}

Test(common, status_table)
{
	cr_assert_str_eq(rm_status_str(RM_OK), "success");
	cr_assert_str_eq(rm_status_str(RM_PARSE), "malformed input");
	cr_assert_str_eq(rm_status_name(RM_UNKNOWN_KEY), "UNKNOWN_KEY");
	cr_assert_str_eq(rm_status_str((rm_status)999), "unknown status");
}

Test(common, error_format_with_and_without_position)
{
	rm_error err;
	char buf[256];
	rm_error_set(&err, RM_INVALID, "a.json", 3, 7, "bad %s", "value");
	rm_error_format(&err, buf, sizeof(buf));
	cr_assert_str_eq(buf, "a.json:3:7: error: bad value");
	rm_error_prefix(&err, "model: ");
	rm_error_format(&err, buf, sizeof(buf));
	cr_assert_str_eq(buf, "a.json:3:7: error: model: bad value");
	rm_error_set(&err, RM_USAGE, NULL, 0, 0, "no file");
	rm_error_format(&err, buf, sizeof(buf));
	cr_assert_str_eq(buf, "error: no file");
	cr_assert_eq(rm_error_set(NULL, RM_IO, NULL, 0, 0, "x"), RM_IO);
}

Test(common, fnv1a_reference_values)
{
	/* FNV-1a 64 test vectors (Fowler/Noll/Vo reference): "" and "a". */
	cr_assert_eq(rm_hash_fnv1a("", 0, RM_FNV1A_SEED), UINT64_C(0xcbf29ce484222325));
	cr_assert_eq(rm_hash_fnv1a("a", 1, RM_FNV1A_SEED), UINT64_C(0xaf63dc4c8601ec8c));
}

Test(common, format_bytes)
{
	char buf[32];
	cr_assert_str_eq(rm_format_bytes(512, buf, sizeof(buf)), "512 B");
	cr_assert_str_eq(rm_format_bytes(3 * RM_MiB / 2, buf, sizeof(buf)), "1.50 MiB");
	cr_assert_str_eq(rm_format_bytes(80 * RM_GiB, buf, sizeof(buf)), "80.00 GiB");
}

Test(common, data_path_reports_where_it_looked)
{
	char buf[512];
	rm_error err;
	rm_error_clear(&err);
	cr_assert(rm_data_path("models/llama-2-7b.json", buf, sizeof(buf), &err), "%s", err.msg);
	cr_assert_not(rm_data_path("models/no-such.json", buf, sizeof(buf), &err));
	cr_assert_eq(err.status, RM_NOT_FOUND);
	cr_assert(strstr(err.msg, "REMORA_DATA_DIR"));
}

/* The serialised form of rm_json_string(s) (caller frees). */
static char *json_of(const char *s)
{
	json_t *j = rm_json_string(s);
	cr_assert_not_null(j);
	char *text = json_dumps(j, JSON_ENCODE_ANY);
	json_decref(j);
	return text;
}

Test(common, json_string_escapes_quotes_backslashes_and_controls)
{
	char *t = json_of("a\"b\\c\x01");
	cr_assert_str_eq(t, "\"a\\\"b\\\\c\\u0001\"");
	free(t);
	/* and parses back to the same bytes */
	json_t *back = json_loads("[\"a\\\"b\\\\c\\u0001\"]", 0, NULL);
	cr_assert_str_eq(json_string_value(json_array_get(back, 0)), "a\"b\\c\x01");
	json_decref(back);
	t = json_of(NULL);
	cr_assert_str_eq(t, "\"\"");
	free(t);
}

Test(common, json_string_keeps_valid_utf8_and_replaces_invalid_bytes)
{
	/* json_string() alone returns NULL for these, and the member would vanish */
	cr_assert_null(json_string("x\xff"));
	json_t *j = rm_json_string("x\xff.json");
	cr_assert_str_eq(json_string_value(j), "x\xEF\xBF\xBD.json");
	json_decref(j);
	/* RFC 3629: U+00E9, U+20AC, U+1F600 are kept */
	j = rm_json_string("\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
	cr_assert_str_eq(json_string_value(j), "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
	json_decref(j);
	/* an overlong '/' (C0 AF), a surrogate (ED A0 80), above U+10FFFF (F4 90 80 80), a cut
	 * sequence at the end (E2 82): each invalid byte becomes one U+FFFD */
	const unsigned char overlong[] = {0xC0, 0xAF, 0}, surrogate[] = {0xED, 0xA0, 0x80, 0},
			    above[] = {0xF4, 0x90, 0x80, 0x80, 0}, cut[] = {'a', 0xE2, 0x82, 0};
	cr_assert_eq(rm_utf8_sequence_length(overlong), 0);
	cr_assert_eq(rm_utf8_sequence_length(surrogate), 0);
	cr_assert_eq(rm_utf8_sequence_length(above), 0);
	cr_assert_eq(rm_utf8_sequence_length((const unsigned char *)"\xF4\x8F\xBF\xBF"), 4, "U+10FFFF");
	j = rm_json_string((const char *)cut);
	cr_assert_str_eq(json_string_value(j), "a\xEF\xBF\xBD\xEF\xBF\xBD");
	json_decref(j);
	j = rm_json_string((const char *)surrogate);
	cr_assert_eq(strlen(json_string_value(j)), 9u);
	json_decref(j);
}
