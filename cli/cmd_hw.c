/* `remora hw list` and `remora hw show NAME [--json]`. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "remora/calib.h"
#include "remora/hw.h"

static void hw_usage(FILE *out)
{
	fprintf(out, "usage: remora hw list\n"
		     "       remora hw show NAME|CALIB.db:PROFILE [--json]\n\n"
		     "Shows an embedded hardware profile: every figure the cost models use, its unit and "
		     "its source\n(docs/reference/hardware.md row, or the calibration fit that set it).\n\n"
		     "options:\n"
		     "  -j, --json   machine-readable output\n"
		     "  -h, --help   this help\n");
}

static json_t *hw_to_json(const rm_hw_profile *hw)
{
	json_t *doc = json_object();
	json_object_set_new(doc, "schema", json_string("remora.hw/1"));
	json_object_set_new(doc, "name", json_string(hw->name));
	json_object_set_new(doc, "description", json_string(hw->description));
	json_t *fields = json_object();
	for (int f = 0; f < RM_HW_FIELD_COUNT; f++) {
		const rm_hw_field_info *info = rm_hw_field_info_at((rm_hw_field)f);
		double v = rm_hw_profile_get(hw, (rm_hw_field)f);
		json_t *entry = json_object();
		if (v == floor(v) && fabs(v) < 9e15)
			json_object_set_new(entry, "value", json_integer((json_int_t)v));
		else
			json_object_set_new(entry, "value", json_real(v));
		json_object_set_new(entry, "unit", json_string(info->unit));
		json_object_set_new(entry, "description", json_string(info->description));
		json_object_set_new(entry, "source", json_string(hw->source[f] ? hw->source[f] : ""));
		json_object_set_new(fields, info->key, entry);
	}
	json_object_set_new(doc, "fields", fields);
	return doc;
}

int cli_cmd_hw(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{0, 0, 0, 0},
	};
	bool json = false;
	int c;
	const char *shortopts = "jh";
	while ((c = cli_getopt(argc, argv, shortopts, longopts)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'h':
			hw_usage(stdout);
			return CLI_EXIT_OK;
		default:
			return cli_option_error("hw", argc, argv, shortopts, longopts);
		}
	}
	if (optind >= argc)
		return cli_usage_error("hw", "missing action: list or show NAME");
	const char *action = argv[optind++];
	if (strcmp(action, "list") == 0) {
		if (optind != argc)
			return cli_usage_error("hw", "unexpected argument '%s'", argv[optind]);
		if (json) {
			json_t *arr = json_array();
			for (size_t i = 0; i < rm_hw_profile_count(); i++)
				json_array_append_new(arr, json_string(rm_hw_profile_at(i)->name));
			return cli_print_json(arr);
		}
		for (size_t i = 0; i < rm_hw_profile_count(); i++)
			printf("%-16s %s\n", rm_hw_profile_at(i)->name, rm_hw_profile_at(i)->description);
		return CLI_EXIT_OK;
	}
	if (strcmp(action, "show") != 0)
		return cli_usage_error("hw", "unknown action '%s' (expected list or show)", action);
	if (optind >= argc)
		return cli_usage_error("hw", "hw show needs a profile NAME (see `remora hw list`)");
	if (optind + 1 != argc)
		return cli_usage_error("hw", "unexpected argument '%s'", argv[optind + 1]);
	rm_error err;
	rm_error_clear(&err);
	rm_hw_profile resolved;
	if (rm_calib_resolve_hw(argv[optind], NULL, &resolved, NULL, &err) != RM_OK)
		return cli_fail(&err);
	const rm_hw_profile *hw = &resolved;
	if (json)
		return cli_print_json(hw_to_json(hw));
	printf("%s: %s\n\n", hw->name, hw->description);
	printf("%-22s %14s %-8s %s\n", "field", "value", "unit", "source");
	for (int f = 0; f < RM_HW_FIELD_COUNT; f++) {
		const rm_hw_field_info *info = rm_hw_field_info_at((rm_hw_field)f);
		double v = rm_hw_profile_get(hw, (rm_hw_field)f);
		const char *src = hw->source[f] ? hw->source[f] : "";
		if (strcmp(info->unit, "B") == 0 && v >= 0 && v < 9e18) {
			/* bytes in binary units (KiB, MiB, GiB as rm_format_bytes picks), the exact count
			 * before the source */
			char b[32];
			rm_format_bytes((int64_t)v, b, sizeof(b));
			char *unit = strchr(b, ' ');
			if (unit)
				*unit++ = '\0';
			printf("%-22s %14s %-8s %.0f B; %s\n", info->key, b, unit ? unit : "B", v, src);
		} else {
			printf("%-22s %14.6g %-8s %s\n", info->key, v, info->unit, src);
		}
	}
	return CLI_EXIT_OK;
}
