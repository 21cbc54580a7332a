/* Embedded hardware profiles: values from docs/reference/hardware.md, every value sourced. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "remora/hw.h"

Test(hw, h100_datasheet_values)
{
	const rm_hw_profile *hw = rm_hw_profile_find("h100-sxm", NULL);
	cr_assert_not_null(hw);
	/* docs/reference/hardware.md rows: SMs 132; BF16 dense 989.4; HBM peak 3.35 TB/s, BabelStream 2.90 TB/s */
	cr_assert_eq(hw->sm_count, 132);
	cr_assert_float_eq(hw->bf16_TFLOPs, 989.4, 1e-9);
	cr_assert_float_eq(hw->hbm_peak_GBps, 3350, 1e-9);
	cr_assert_float_eq(hw->hbm_achievable_GBps, 2900, 1e-9);
	cr_assert_float_eq(hw->nvlink_nccl_GBps, 18 * 20.6, 1e-9);
	cr_assert_eq(hw->nccl_ring_channels, 24);
	/* 81559 MiB as the driver reports the 80 GB part */
	cr_assert_float_eq(hw->hbm_bytes, 85520809984.0, 1.0);
}

Test(hw, h200_and_a100_differ_where_the_reference_says)
{
	const rm_hw_profile *h200 = rm_hw_profile_find("h200", NULL);
	const rm_hw_profile *a100 = rm_hw_profile_find("A100", NULL);
	cr_assert_not_null(h200);
	cr_assert_not_null(a100);
	cr_assert_str_eq(h200->name, "h200-sxm");
	cr_assert_float_eq(h200->hbm_peak_GBps, 4800, 1e-9);
	cr_assert_float_eq(h200->hbm_achievable_GBps, 4010, 1e-9);
	cr_assert_eq(a100->sm_count, 108);
	cr_assert_float_eq(a100->bf16_TFLOPs, 312, 1e-9);
	cr_assert_eq(a100->fp8_TFLOPs, 0, "A100 has no FP8 tensor cores");
	cr_assert_eq(a100->nccl_nvls_channels, 0, "no NVLS before third-generation NVSwitch");
}

Test(hw, every_value_cites_a_source)
{
	for (size_t i = 0; i < rm_hw_profile_count(); i++) {
		const rm_hw_profile *hw = rm_hw_profile_at(i);
		for (int f = 0; f < RM_HW_FIELD_COUNT; f++)
			cr_assert(hw->source[f] && hw->source[f][0], "%s.%s has no source", hw->name,
				  rm_hw_field_info_at((rm_hw_field)f)->key);
	}
}

Test(hw, unknown_profile_lists_known_names)
{
	rm_error err;
	rm_error_clear(&err);
	cr_assert_null(rm_hw_profile_find("b200", &err));
	cr_assert_eq(err.status, RM_NOT_FOUND);
	cr_assert(strstr(err.msg, "h100-sxm, h100-sxm-96gb, h200-sxm, a100-sxm-80gb"), "%s", err.msg);
}

Test(hw, fields_by_name_get_and_set)
{
	rm_hw_profile hw = *rm_hw_profile_find("h100-sxm", NULL);
	int f = rm_hw_field_find("hbm_achievable_GBps");
	cr_assert_eq(f, RM_HW_hbm_achievable_GBps);
	cr_assert_eq(rm_hw_field_find("warp_drive"), -1);
	rm_hw_profile_set(&hw, (rm_hw_field)f, 3000, "fit: babelstream copy");
	cr_assert_float_eq(rm_hw_profile_get(&hw, (rm_hw_field)f), 3000, 1e-9);
	cr_assert_str_eq(hw.source[f], "fit: babelstream copy");
	/* the embedded default is untouched */
	cr_assert_float_eq(rm_hw_profile_find("h100-sxm", NULL)->hbm_achievable_GBps, 2900, 1e-9);
}

Test(hw, memory_budget_of_a_training_gpu)
{
	/* docs/reference/kernels-h100.md section 6: 0.52 GiB context, 32 MiB cuBLASLt workspace, per
	 * NCCL channel 4 MiB + 8*512*8*16 B + 120*640*8*8 B = 9,633,792 B, 256 MiB NVLS */
	const rm_hw_profile *h100 = rm_hw_profile_find("h100-sxm", NULL);
	cr_assert_not_null(h100);
	rm_memory_budget b = rm_memory_budget_default(h100, 8, 1);
	cr_assert_eq(b.cuda_context_bytes, (int64_t)(0.52 * 1073741824.0));
	cr_assert_eq(b.cublas_workspace_bytes, 33554432);
	cr_assert_eq(b.nccl_buffer_bytes, (int64_t)h100->nccl_ring_channels * 9633792 + 268435456);
	cr_assert_eq(b.headroom_bytes, b.cuda_context_bytes + b.cublas_workspace_bytes + b.nccl_buffer_bytes);
	cr_assert_eq(b.usable_bytes, (int64_t)h100->hbm_bytes - b.headroom_bytes);
	/* two ranks cannot use NVLS; one rank has no communicator */
	cr_assert_eq(rm_memory_budget_default(h100, 2, 1).nccl_buffer_bytes, (int64_t)h100->nccl_ring_channels * 9633792);
	cr_assert_eq(rm_memory_budget_default(h100, 1, 1).nccl_buffer_bytes, 0);
	rm_memory_budget u = rm_memory_budget_with_headroom(h100, 8, 1, INT64_C(4) << 30);
	cr_assert(u.headroom_set);
	cr_assert_eq(u.usable_bytes, (int64_t)h100->hbm_bytes - (INT64_C(4) << 30));
}

/* The text of SOURCE_ROOT/rel (REMORA_SOURCE_DATA_DIR's parent is the source tree), or NULL. */
static char *source_file(const char *rel)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/../%s", REMORA_SOURCE_DATA_DIR, rel);
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	char *buf = NULL;
	size_t len = 0, cap = 0, n;
	char chunk[4096];
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (len + n + 1 > cap) {
			cap = 2 * (len + n + 1);
			buf = realloc(buf, cap);
			cr_assert_not_null(buf);
		}
		memcpy(buf + len, chunk, n);
		len += n;
	}
	fclose(f);
	if (!buf)
		buf = calloc(1, 1);
	buf[len] = '\0';
	return buf;
}

/*
 * Every "docs/reference/FILE" a profile's source string cites (what `remora hw show` prints)
 * is a file of the source tree, and a row quoted after it ("FILE 'ROW'") is in that file. A row
 * ends at a quote followed by a space, ':', ',', ')' or the end (so "NCCL's" stays inside).
 */
Test(hw, cited_reference_files_and_rows_exist)
{
	static const char prefix[] = "docs/reference/";
	int files = 0, rows = 0;
	for (size_t i = 0; i < rm_hw_profile_count(); i++) {
		const rm_hw_profile *hw = rm_hw_profile_at(i);
		for (int f = 0; f < RM_HW_FIELD_COUNT; f++) {
			const char *src = hw->source[f];
			for (const char *at = strstr(src, prefix); at; at = strstr(at + 1, prefix)) {
				size_t n = strlen(prefix);
				while (at[n] && (strchr("-_.", at[n]) || (at[n] >= 'a' && at[n] <= 'z') ||
						 (at[n] >= '0' && at[n] <= '9')))
					n++;
				while (n > 0 && at[n - 1] == '.')
					n--; /* a full stop ending the sentence */
				char rel[256];
				cr_assert_lt(n, sizeof(rel));
				memcpy(rel, at, n);
				rel[n] = '\0';
				char *text = source_file(rel);
				cr_assert_not_null(text, "%s.%s cites %s, which is not in the source tree: %s", hw->name,
						   rm_hw_field_info_at((rm_hw_field)f)->key, rel, src);
				files++;
				if (at[n] == ' ' && at[n + 1] == '\'') {
					const char *row = at + n + 2, *end = row;
					while (*end && !(end[0] == '\'' && (strchr(" :,)", end[1]) || end[1] == '\0')))
						end++;
					cr_assert_eq(*end, '\'', "unterminated row in %s", src);
					char want[256];
					cr_assert_lt((size_t)(end - row), sizeof(want));
					memcpy(want, row, (size_t)(end - row));
					want[end - row] = '\0';
					cr_assert_not_null(strstr(text, want), "%s.%s: row '%s' is not in %s", hw->name,
							   rm_hw_field_info_at((rm_hw_field)f)->key, want, rel);
					rows++;
				}
				free(text);
			}
		}
	}
	/* h100-sxm alone cites hardware.md for some thirty fields, most with a quoted row */
	cr_assert_gt(files, 60, "%d citations checked", files);
	cr_assert_gt(rows, 50, "%d quoted rows checked", rows);
}
