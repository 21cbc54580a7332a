/* hlo/: the parsed module shared by parse.c and lower.c (remora/hlo.h). */
#ifndef REMORA_HLO_PRIVATE_H
#define REMORA_HLO_PRIVATE_H

#include <stdint.h>

#include "remora/hlo.h"

/* A shape: an array (ptype, dims) or a tuple of shapes. */
typedef struct hlo_shape {
	int16_t ptype;     /* index in hlo__ptypes; -1 for a tuple */
	int16_t mem_space; /* the layout's S(n); 0 device, 5 host (XLA's kHostMemorySpace) */
	int32_t rank;      /* dims of an array, elements of a tuple */
	int64_t *dims;
	struct hlo_shape *elems;
} hlo_shape;

typedef struct hlo_attr {
	const char *name;
	const char *value; /* the text after '=', NUL-terminated */
	int line, col;
} hlo_attr;

typedef struct hlo_instr {
	const char *name;
	const char *opcode;
	hlo_shape shape;
	bool shape_inferred; /* written without a shape: inferred from the operands (parse.c) */
	const char *args;   /* the text between the parentheses (constants, parameter numbers) */
	int32_t n_operands;
	int32_t *operands;  /* indices in the computation's instructions */
	int32_t n_attrs;
	hlo_attr *attrs;
	int line, col;
} hlo_instr;

typedef struct hlo_comp {
	const char *name;
	bool entry;
	int32_t n_instrs;
	int32_t root;
	hlo_instr *instrs;
	int line, col;
} hlo_comp;

struct rm_hlo_module {
	char *name;
	char file[256];
	bool scheduled;
	int64_t num_partitions, replica_count;
	int line, col; /* of the HloModule header */
	int32_t n_comps, entry;
	hlo_comp *comps;
	int32_t *comp_hash; /* open addressing on names: comp index + 1, 0 empty */
	uint32_t comp_hash_cap;
	void *arena;
};

/* The element types, their bits per element. */
typedef struct hlo_ptype {
	const char *name;
	int bits;
} hlo_ptype;
extern const hlo_ptype hlo__ptypes[];
extern const int hlo__n_ptypes;

int64_t hlo__shape_bytes(const hlo_shape *s);
int64_t hlo__shape_elems(const hlo_shape *s);
/* The attribute's value, NULL if absent. */
const hlo_attr *hlo__attr(const hlo_instr *in, const char *name);
/* The computation named name (a leading '%' ignored); -1 if none. */
int32_t hlo__comp_find(const rm_hlo_module *m, const char *name);

#endif
