/*
 * The price cache (remora/sim.h, rm_sim_prices): what the cost model says of one op shape (its
 * time alone, the SMs it holds, a GEMM's tiles, what a collective draws from the network) asked
 * once and kept, since a step's ops have few distinct shapes (the seed step: 133 collectives of 6
 * shapes, every layer's kernels the same) and a search's candidates share them.
 *
 * Keys are the shape, written field by field (never the struct's bytes, whose padding is
 * unspecified), and the context it is priced in: the cost model (by address: a model is a const
 * table whose data must not change while a cache holds its prices, remora/cost.h) and the
 * hardware profile, compared byte for byte against a copy the cache keeps. The cost model's
 * functions are pure, so a cached price is the price.
 */
#include <string.h>

#include "sim_internal.h"

/* The key lists every field of each cost struct: one added there must be added here (the
 * sizes below catch most additions). */
_Static_assert(sizeof(rm_gemm_shape) == 40, "rm_gemm_shape changed: update shape_key");
_Static_assert(sizeof(rm_attention_shape) == 64, "rm_attention_shape changed: update shape_key");
_Static_assert(sizeof(rm_attention_cost) == 72, "rm_attention_cost changed: update shape_key");
_Static_assert(sizeof(rm_elementwise_cost) == 32, "rm_elementwise_cost changed: update shape_key");
_Static_assert(sizeof(rm_collective_cost) == 24, "rm_collective_cost changed: update shape_key");
_Static_assert(sizeof(rm_copy_cost) == 16, "rm_copy_cost changed: update shape_key");

#define KEY_WORDS 13

typedef struct shape_key {
	uint64_t w[KEY_WORDS]; /* [0]: the context and kind; then the fields; unused words 0 */
} shape_key;

typedef struct price_ctx {
	const rm_cost_model *cm;
	rm_hw_profile hw;
} price_ctx;

typedef struct price_entry {
	bool used;
	shape_key key;
	rm_sim_price price;
} price_entry;

/* Entries kept at most (a search sees hundreds); past it ops are priced by the model. */
#define PRICES_MAX ((size_t)1 << 16)

struct rm_sim_prices {
	price_ctx *ctx;
	int32_t n_ctx, cap_ctx;
	price_entry *slot; /* open addressing, cap a power of two, at most half full */
	size_t cap, n;
};

rm_sim_prices *rm_sim_prices_create(void)
{
	rm_sim_prices *p = rm_new(rm_sim_prices, 1);
	p->cap = 256;
	p->slot = rm_new(price_entry, p->cap);
	return p;
}

void rm_sim_prices_destroy(rm_sim_prices *p)
{
	if (!p)
		return;
	free(p->ctx);
	free(p->slot);
	free(p);
}

int32_t sim_prices_context(rm_sim_prices *p, const rm_cost_model *cm, const rm_hw_profile *hw)
{
	for (int32_t i = 0; i < p->n_ctx; i++)
		if (p->ctx[i].cm == cm && memcmp(&p->ctx[i].hw, hw, sizeof(*hw)) == 0)
			return i;
	if (p->n_ctx == p->cap_ctx) {
		p->cap_ctx = p->cap_ctx ? 2 * p->cap_ctx : 4;
		p->ctx = rm_xrealloc(p->ctx, (size_t)p->cap_ctx * sizeof(price_ctx));
	}
	p->ctx[p->n_ctx].cm = cm;
	memcpy(&p->ctx[p->n_ctx].hw, hw, sizeof(*hw));
	return p->n_ctx++;
}

static uint64_t f64_bits(double d)
{
	uint64_t u;
	memcpy(&u, &d, sizeof(u));
	return u;
}

/* The key of op in context ctx: every field of its kind's cost inputs. */
static void shape_key_of(int32_t ctx, const rm_cost_op *op, shape_key *k)
{
	memset(k, 0, sizeof(*k));
	k->w[0] = (uint64_t)(uint32_t)ctx << 8 | (uint64_t)op->kind;
	uint64_t *w = k->w + 1;
	switch (op->kind) {
	case RM_COST_GEMM: {
		const rm_gemm_shape *g = &op->gemm;
		w[0] = (uint64_t)g->batch;
		w[1] = (uint64_t)g->m;
		w[2] = (uint64_t)g->n;
		w[3] = (uint64_t)g->k;
		w[4] = (uint64_t)g->dtype << 1 | (g->has_batch_dims ? 1u : 0u);
		break;
	}
	case RM_COST_ATTENTION: {
		const rm_attention_shape *a = &op->attention.shape;
		w[0] = (uint64_t)a->batch;
		w[1] = (uint64_t)a->heads;
		w[2] = (uint64_t)a->kv_heads;
		w[3] = (uint64_t)a->seq;
		w[4] = (uint64_t)a->head_dim;
		w[5] = (uint64_t)a->v_head_dim;
		w[6] = (uint64_t)a->window;
		w[7] = (uint64_t)a->dtype << 3 | (a->causal ? 4u : 0u) | (a->fused ? 2u : 0u) |
		       (op->attention.backward ? 1u : 0u);
		break;
	}
	case RM_COST_ELEMENTWISE: {
		const rm_elementwise_cost *e = &op->elementwise;
		w[0] = (uint64_t)e->bytes_read;
		w[1] = (uint64_t)e->bytes_written;
		w[2] = f64_bits(e->flops);
		w[3] = (uint64_t)e->cls << 32 | (uint32_t)e->kernels;
		break;
	}
	case RM_COST_COLLECTIVE: {
		const rm_collective_cost *c = &op->collective;
		w[0] = (uint64_t)c->op;
		w[1] = (uint64_t)c->bytes;
		w[2] = (uint64_t)(uint32_t)c->group_size << 32 | (uint32_t)c->span;
		break;
	}
	case RM_COST_COPY:
		w[0] = (uint64_t)op->copy.dir;
		w[1] = (uint64_t)op->copy.bytes;
		break;
	default:
		break;
	}
}

static uint64_t key_hash(const shape_key *k)
{
	uint64_t h = UINT64_C(0x9e3779b97f4a7c15);
	for (int i = 0; i < KEY_WORDS; i++) {
		h ^= k->w[i];
		h *= UINT64_C(0xff51afd7ed558ccd);
		h ^= h >> 32;
	}
	return h;
}

static size_t find_slot(const rm_sim_prices *p, uint64_t h, const shape_key *k)
{
	size_t i = (size_t)h & (p->cap - 1);
	while (p->slot[i].used && memcmp(&p->slot[i].key, k, sizeof(*k)) != 0)
		i = (i + 1) & (p->cap - 1);
	return i;
}

/* What the cost model says of op (priced by the model: op->time_s < 0). */
static void price_of(const rm_cost_model *cm, const rm_cost_op *op, const rm_hw_profile *hw, rm_sim_price *out)
{
	memset(out, 0, sizeof(*out));
	out->time_s = cm->op_time_s(cm, op, hw);
	out->sms = cm->sms_held(cm, op, hw);
	if (op->kind == RM_COST_GEMM)
		out->tiles = rm_cost_gemm_tiles(&op->gemm, hw);
	if (rm_cost_op_resource(op) == RM_RES_NET && cm->net_load && out->time_s > 0)
		out->has_net = cm->net_load(cm, op, hw, out->time_s, &out->net);
}

const rm_sim_price *sim_prices_get(rm_sim_prices *p, int32_t ctx, const rm_cost_model *cm, const rm_cost_op *op,
				   const rm_hw_profile *hw, rm_sim_price *scratch)
{
	shape_key k;
	shape_key_of(ctx, op, &k);
	uint64_t h = key_hash(&k);
	size_t i = find_slot(p, h, &k);
	if (p->slot[i].used)
		return &p->slot[i].price;
	if (p->n >= PRICES_MAX) {
		price_of(cm, op, hw, scratch);
		return scratch;
	}
	if (2 * (p->n + 1) > p->cap) {
		size_t old_cap = p->cap;
		price_entry *old = p->slot;
		p->cap *= 2;
		p->slot = rm_new(price_entry, p->cap);
		for (size_t j = 0; j < old_cap; j++)
			if (old[j].used)
				p->slot[find_slot(p, key_hash(&old[j].key), &old[j].key)] = old[j];
		free(old);
		i = find_slot(p, h, &k);
	}
	price_entry *e = &p->slot[i];
	e->used = true;
	e->key = k;
	price_of(cm, op, hw, &e->price);
	p->n++;
	return &e->price;
}
