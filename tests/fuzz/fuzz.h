/*
 * Shared helpers of the libFuzzer harnesses (tests/fuzz/, scripts/fuzz.sh). Each harness feeds
 * one parser of remora the fuzzer's bytes and checks what every caller relies on: a status from
 * the result enum, an error message, and a result that is filled on RM_OK. A crash, a sanitizer
 * report, a hang (-timeout) or a leak is a finding.
 */
#ifndef REMORA_FUZZ_H
#define REMORA_FUZZ_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "remora/common.h"

/* The fuzzer's bytes as a NUL-terminated string (parsers of C strings stop at an inner NUL,
 * as they would on a command line). Free with free(). */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

/* A failing status carries a message; anything else is a defect of the parser. */
static inline void fuzz_check_error(rm_status st, const rm_error *err)
{
	if (st != RM_OK && err->msg[0] == '\0')
		abort();
}

/* Warnings (e.g. a sequence past max_position_embeddings) would flood the fuzzer's output. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	rm_log_set_level(RM_LOG_ERROR);
	return 0;
}

#endif
