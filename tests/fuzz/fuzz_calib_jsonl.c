/*
 * libFuzzer harness: the calibration JSON lines of remora-calibrate (rm_calib_import_jsonl) into
 * an in-memory database. The importer reads a path, so each input is written to one temporary
 * regular file first; the database is reopened every 256 successful imports to bound memory.
 */
#include <stdio.h>
#include <unistd.h>

#include "fuzz.h"
#include "remora/calib.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[64];
static rm_calib_db *db;
static int imports;

static void setup(void)
{
	const char *dir = getenv("TMPDIR");
	snprintf(path, sizeof(path), "%s/remora-fuzz-XXXXXX", dir && strlen(dir) < 40 ? dir : "/tmp");
	int fd = mkstemp(path);
	if (fd < 0)
		abort();
	close(fd);
}

static void cleanup(void)
{
	rm_calib_db_close(db);
	unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!path[0]) {
		setup();
		atexit(cleanup);
	}
	rm_error err;
	rm_error_clear(&err);
	if (!db && !(db = rm_calib_db_open(":memory:", true, &err)))
		abort();
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
		abort();
	rm_calib_import_stats stats;
	rm_status st = rm_calib_import_jsonl(db, path, &stats, &err);
	fuzz_check_error(st, &err);
	if (st == RM_OK && ++imports % 256 == 0) {
		rm_calib_db_close(db);
		db = NULL;
	}
	return 0;
}
