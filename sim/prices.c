/*
 * The collective price cache (remora/sim.h, rm_sim_prices): what the cost model says of one
 * collective shape (its time alone, the SMs it holds, what it draws from the network) asked once
 * and kept, since a step's collectives have few distinct shapes (the seed step: 133 collectives,
 * 6 shapes) and a search's candidates share them.
 *
 * Keys are the shape (kind, bytes, group size, node span) and the context it is priced in: the
 * cost model (by address: a model is a const table whose data must not change while a cache
 * holds its prices, remora/cost.h) and the hardware profile, compared byte for byte against a
 * copy the cache keeps. The cost model's functions are pure, so a cached price is the price.
 */
#include <string.h>

#include "sim_internal.h"

typedef struct price_ctx {
	const rm_cost_model *cm;
	rm_hw_profile hw;
} price_ctx;

typedef struct price_entry {
	bool used;
	int32_t ctx;
	rm_collective_cost c;
	rm_sim_price price;
} price_entry;

/* Shapes kept at most (a search sees tens); past it collectives are priced by the model. */
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
	p->cap = 64;
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

static uint64_t shape_hash(int32_t ctx, const rm_collective_cost *c)
{
	uint64_t h = (uint64_t)c->bytes * UINT64_C(0x9e3779b97f4a7c15);
	h ^= ((uint64_t)(uint32_t)c->group_size << 32 | (uint32_t)c->span) * UINT64_C(0xc2b2ae3d27d4eb4f);
	h ^= ((uint64_t)c->op << 40 | (uint32_t)ctx) * UINT64_C(0x165667b19e3779f9);
	return h ^ (h >> 29);
}

static bool same_shape(const price_entry *e, int32_t ctx, const rm_collective_cost *c)
{
	return e->ctx == ctx && e->c.op == c->op && e->c.bytes == c->bytes && e->c.group_size == c->group_size &&
	       e->c.span == c->span;
}

static size_t find_slot(const rm_sim_prices *p, uint64_t h, int32_t ctx, const rm_collective_cost *c)
{
	size_t i = (size_t)h & (p->cap - 1);
	while (p->slot[i].used && !same_shape(&p->slot[i], ctx, c))
		i = (i + 1) & (p->cap - 1);
	return i;
}

/* What the cost model says of op (a collective priced by the model: op->time_s < 0). */
static void price_of(const rm_cost_model *cm, const rm_cost_op *op, const rm_hw_profile *hw, rm_sim_price *out)
{
	memset(out, 0, sizeof(*out));
	out->time_s = cm->op_time_s(cm, op, hw);
	out->sms = cm->sms_held(cm, op, hw);
	if (rm_cost_op_resource(op) == RM_RES_NET && cm->net_load && out->time_s > 0)
		out->has_net = cm->net_load(cm, op, hw, out->time_s, &out->net);
}

const rm_sim_price *sim_prices_get(rm_sim_prices *p, int32_t ctx, const rm_cost_model *cm, const rm_cost_op *op,
				   const rm_hw_profile *hw, rm_sim_price *scratch)
{
	const rm_collective_cost *c = &op->collective;
	uint64_t h = shape_hash(ctx, c);
	size_t i = find_slot(p, h, ctx, c);
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
		for (size_t k = 0; k < old_cap; k++)
			if (old[k].used)
				p->slot[find_slot(p, shape_hash(old[k].ctx, &old[k].c), old[k].ctx, &old[k].c)] = old[k];
		free(old);
		i = find_slot(p, h, ctx, c);
	}
	price_entry *e = &p->slot[i];
	e->used = true;
	e->ctx = ctx;
	e->c = *c;
	price_of(cm, op, hw, &e->price);
	p->n++;
	return &e->price;
}
