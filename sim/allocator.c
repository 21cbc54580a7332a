/*
 * A model of PyTorch's CUDA caching allocator (sim/allocator.h; rules and sources in docs/sim.md
 * "Reserved memory"). Written from the behaviour documented in c10/cuda/CUDACachingAllocator.cpp:
 *
 * - Sizes round up to 512 B. Requests <= 1 MiB come from the small pool, the rest from the large
 *   pool; each pool is kept per stream, so a block freed on one stream serves only that stream.
 * - Best fit: the free block of the stream's pool with the smallest (size, address) >= the
 *   request. It is split when the rest is >= 512 B (small pool) or > 1 MiB (large pool); the
 *   request takes the front, the rest stays cached.
 * - No fit: a new segment (cudaMalloc) of 2 MiB (small), 20 MiB (requests under 10 MiB) or the
 *   request rounded up to 2 MiB. When that would pass the limit, every cached segment with no
 *   block in use is freed and the cudaMalloc retried (num_alloc_retries); if it still does not
 *   fit, PyTorch raises OutOfMemoryError (num_ooms) and the replay goes on over the limit.
 * - Free: the block returns to its pool, merged with free neighbours of its segment.
 * - Expandable segments: one segment per (stream, pool), mapped in pages of 2 MiB (small pool)
 *   or 20 MiB (large pool) at its end. No fit: the free block at the end of the segment (if any)
 *   grows by whole pages, else pages are appended as a new block; then the usual split. On a
 *   retry the free pages at the end of each segment are unmapped (free pages between blocks in
 *   use stay mapped: the model's reserved memory after a retry is an upper bound).
 * - Not modelled: max_split_size_mb (default unlimited), roundup_power2_divisions, garbage
 *   collection thresholds, CUDA graph private pools, and the deferred free of record_stream()
 *   (the engine frees a tensor when its last consumer ends, which is when those events complete).
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "allocator.h"

typedef struct sim_blk {
	int64_t addr, size;
	int32_t prev, next;   /* neighbours in the segment (-1 at its ends); next links the free list */
	int32_t left, right;  /* children in the pool's treap while cached */
	int32_t wprev, wnext; /* list of cached whole segments (caching mode) */
	uint32_t prio;        /* treap priority (max-heap) */
	int32_t pool;         /* stream * 2 + (large ? 1 : 0) */
	uint8_t allocated, cached, whole, pad_;
	uint32_t pad2_;
} sim_blk;
static_assert(sizeof(sim_blk) == 56, "sim_blk: one record per block, keep it at 56 bytes");

struct sim_alloc {
	rm_sim_allocator kind;
	int32_t n_pools;      /* 2 per stream */
	int64_t limit;
	sim_blk *b;
	int32_t n, cap, free_head;
	int32_t *root;        /* per pool: treap of cached blocks by (size, address) */
	int32_t whole_head;   /* caching mode: cached blocks that are a whole segment */
	int32_t *last;        /* expandable: per pool, the block at the end of its segment, or -1 */
	int64_t *mapped;      /* expandable: per pool, bytes of pages mapped */
	int64_t next_addr;    /* caching mode: the address of the next segment */
	uint32_t prio_seq;
	sim_alloc_stats st;
};

/* ---- names (remora/sim.h) ---------------------------------------------------------------- */

const char *rm_sim_allocator_name(rm_sim_allocator a)
{
	switch (a) {
#define RM_SIM_ALLOCATOR_NAME(id, name, what)                                                      \
	case RM_SIM_ALLOC_##id:                                                                  \
		return name;
		RM_SIM_ALLOCATOR_MAP(RM_SIM_ALLOCATOR_NAME)
#undef RM_SIM_ALLOCATOR_NAME
	default:
		return "?";
	}
}

const char *rm_sim_allocator_describe(rm_sim_allocator a)
{
	switch (a) {
#define RM_SIM_ALLOCATOR_WHAT(id, name, what)                                                      \
	case RM_SIM_ALLOC_##id:                                                                  \
		return what;
		RM_SIM_ALLOCATOR_MAP(RM_SIM_ALLOCATOR_WHAT)
#undef RM_SIM_ALLOCATOR_WHAT
	default:
		return "?";
	}
}

bool rm_sim_allocator_from_name(const char *name, rm_sim_allocator *out)
{
	for (int a = 0; a < RM_SIM_ALLOC_COUNT; a++)
		if (strcasecmp(name, rm_sim_allocator_name((rm_sim_allocator)a)) == 0) {
			*out = (rm_sim_allocator)a;
			return true;
		}
	return false;
}

/* ---- sizes ------------------------------------------------------------------------------- */

int64_t sim_alloc_round_size(int64_t bytes)
{
	if (bytes < SIM_ALLOC_MIN_BLOCK)
		return SIM_ALLOC_MIN_BLOCK;
	return (bytes + SIM_ALLOC_MIN_BLOCK - 1) / SIM_ALLOC_MIN_BLOCK * SIM_ALLOC_MIN_BLOCK;
}

int64_t sim_alloc_segment_size(int64_t rounded)
{
	if (rounded <= SIM_ALLOC_SMALL_SIZE)
		return SIM_ALLOC_SMALL_BUFFER;
	if (rounded < SIM_ALLOC_MIN_LARGE_ALLOC)
		return SIM_ALLOC_LARGE_BUFFER;
	return (rounded + SIM_ALLOC_ROUND_LARGE - 1) / SIM_ALLOC_ROUND_LARGE * SIM_ALLOC_ROUND_LARGE;
}

static inline bool is_large(int32_t pool)
{
	return (pool & 1) != 0;
}

/* Expandable segments map pages of the pool's segment size (the note [Expandable Segments]). */
static inline int64_t page_bytes(int32_t pool)
{
	return is_large(pool) ? SIM_ALLOC_LARGE_BUFFER : SIM_ALLOC_SMALL_BUFFER;
}

static inline int64_t ceil_to(int64_t x, int64_t m)
{
	return (x + m - 1) / m * m;
}

sim_alloc *sim_alloc_create(rm_sim_allocator kind, int32_t n_streams)
{
	if ((kind != RM_SIM_ALLOC_PYTORCH && kind != RM_SIM_ALLOC_PYTORCH_EXPANDABLE) || n_streams < 1)
		return NULL;
	sim_alloc *a = rm_new(sim_alloc, 1);
	a->kind = kind;
	a->n_pools = 2 * n_streams;
	a->root = rm_xmalloc((size_t)a->n_pools * sizeof(int32_t));
	a->last = rm_xmalloc((size_t)a->n_pools * sizeof(int32_t));
	a->mapped = rm_xmalloc((size_t)a->n_pools * sizeof(int64_t));
	a->cap = 64;
	a->b = rm_xmalloc((size_t)a->cap * sizeof(sim_blk));
	sim_alloc_reset(a, INT64_MAX);
	return a;
}

void sim_alloc_destroy(sim_alloc *a)
{
	if (!a)
		return;
	free(a->b);
	free(a->root);
	free(a->last);
	free(a->mapped);
	free(a);
}

void sim_alloc_reset(sim_alloc *a, int64_t limit_bytes)
{
	a->limit = limit_bytes;
	a->n = 0;
	a->free_head = -1;
	a->whole_head = -1;
	a->next_addr = 0;
	a->prio_seq = 0;
	for (int32_t p = 0; p < a->n_pools; p++) {
		a->root[p] = -1;
		a->last[p] = -1;
		a->mapped[p] = 0;
	}
	memset(&a->st, 0, sizeof(a->st));
}

const sim_alloc_stats *sim_alloc_get_stats(const sim_alloc *a)
{
	return &a->st;
}

/* ---- block records ---------------------------------------------------------------------- */

static int32_t blk_new(sim_alloc *a, int32_t pool, int64_t addr, int64_t size)
{
	int32_t i = a->free_head;
	if (i >= 0) {
		a->free_head = a->b[i].next;
	} else {
		if (a->n == a->cap) {
			a->cap *= 2;
			a->b = rm_xrealloc(a->b, (size_t)a->cap * sizeof(sim_blk));
		}
		i = a->n++;
	}
	/* Distinct, well-mixed priorities from a counter (a Weyl sequence through a mixer). */
	uint32_t x = ++a->prio_seq * 0x9E3779B9u;
	x ^= x >> 16;
	x *= 0x85EBCA6Bu;
	x ^= x >> 13;
	a->b[i] = (sim_blk){.addr = addr, .size = size, .prev = -1, .next = -1, .left = -1,
			    .right = -1, .wprev = -1, .wnext = -1, .prio = x, .pool = pool};
	return i;
}

static void blk_release(sim_alloc *a, int32_t i)
{
	a->b[i].next = a->free_head;
	a->free_head = i;
}

/* ---- the pools' treaps, keyed by (size, address) ----------------------------------------- */

static inline bool key_less(const sim_blk *x, const sim_blk *y)
{
	return x->size < y->size || (x->size == y->size && x->addr < y->addr);
}

/* Splits treap t into keys < k (*l) and keys > k (*r); k is not in t. */
static void treap_split(sim_blk *b, int32_t t, const sim_blk *k, int32_t *l, int32_t *r)
{
	while (t >= 0) {
		if (key_less(&b[t], k)) {
			*l = t;
			l = &b[t].right;
			t = b[t].right;
		} else {
			*r = t;
			r = &b[t].left;
			t = b[t].left;
		}
	}
	*l = *r = -1;
}

static int32_t treap_merge(sim_blk *b, int32_t l, int32_t r)
{
	int32_t root = -1, *link = &root;
	while (l >= 0 && r >= 0) {
		if (b[l].prio > b[r].prio) {
			*link = l;
			link = &b[l].right;
			l = b[l].right;
		} else {
			*link = r;
			link = &b[r].left;
			r = b[r].left;
		}
	}
	*link = l >= 0 ? l : r;
	return root;
}

static void cache_insert(sim_alloc *a, int32_t i)
{
	sim_blk *b = a->b, *x = &b[i];
	int32_t *link = &a->root[x->pool];
	while (*link >= 0 && b[*link].prio > x->prio)
		link = key_less(x, &b[*link]) ? &b[*link].left : &b[*link].right;
	treap_split(b, *link, x, &x->left, &x->right);
	*link = i;
	x->cached = 1;
	if (a->kind == RM_SIM_ALLOC_PYTORCH && x->prev < 0 && x->next < 0) {
		x->whole = 1;
		x->wprev = -1;
		x->wnext = a->whole_head;
		if (a->whole_head >= 0)
			b[a->whole_head].wprev = i;
		a->whole_head = i;
	}
}

/* Unlinks cached block i, whose parent's link to it is *link, from the treap and the list. */
static void cache_unlink(sim_alloc *a, int32_t *link, int32_t i)
{
	sim_blk *b = a->b, *x = &b[i];
	*link = treap_merge(b, x->left, x->right);
	x->left = x->right = -1;
	x->cached = 0;
	if (x->whole) {
		if (x->wprev >= 0)
			b[x->wprev].wnext = x->wnext;
		else
			a->whole_head = x->wnext;
		if (x->wnext >= 0)
			b[x->wnext].wprev = x->wprev;
		x->whole = 0;
	}
}

static void cache_remove(sim_alloc *a, int32_t i)
{
	sim_blk *b = a->b, *x = &b[i];
	int32_t *link = &a->root[x->pool];
	while (*link != i)
		link = key_less(x, &b[*link]) ? &b[*link].left : &b[*link].right;
	cache_unlink(a, link, i);
}

/* Takes the cached block of pool with the smallest (size, address) whose size is >= size out
 * of the cache (one descent finds and unlinks it); -1 if none. */
static int32_t cache_take_best_fit(sim_alloc *a, int32_t pool, int64_t size)
{
	sim_blk *b = a->b;
	int32_t *link = &a->root[pool], *best = NULL;
	while (*link >= 0) {
		if (b[*link].size >= size) {
			best = link;
			link = &b[*link].left;
		} else {
			link = &b[*link].right;
		}
	}
	if (!best)
		return -1;
	int32_t i = *best;
	cache_unlink(a, best, i);
	return i;
}

/* ---- segments ---------------------------------------------------------------------------- */

static void reserve(sim_alloc *a, int64_t bytes)
{
	a->st.reserved_bytes += bytes;
	if (a->st.reserved_bytes > a->st.peak_reserved_bytes)
		a->st.peak_reserved_bytes = a->st.reserved_bytes;
}

/* Expandable: unmaps the whole pages of the free block at the end of each segment. */
static void unmap_free_tails(sim_alloc *a)
{
	for (int32_t p = 0; p < a->n_pools; p++) {
		int32_t l = a->last[p];
		if (l < 0 || a->b[l].allocated)
			continue;
		int64_t keep_end = ceil_to(a->b[l].addr, page_bytes(p));
		int64_t unmapped = a->mapped[p] - keep_end;
		if (unmapped <= 0)
			continue;
		cache_remove(a, l);
		a->mapped[p] = keep_end;
		a->st.reserved_bytes -= unmapped;
		if (keep_end > a->b[l].addr) {
			a->b[l].size = keep_end - a->b[l].addr;
			cache_insert(a, l);
		} else {
			a->last[p] = a->b[l].prev;
			if (a->b[l].prev >= 0)
				a->b[a->b[l].prev].next = -1;
			blk_release(a, l);
		}
		if (a->mapped[p] == 0)
			a->st.segments--;
	}
}

void sim_alloc_empty_cache(sim_alloc *a)
{
	if (a->kind == RM_SIM_ALLOC_PYTORCH_EXPANDABLE) {
		unmap_free_tails(a);
		return;
	}
	while (a->whole_head >= 0) {
		int32_t i = a->whole_head;
		cache_remove(a, i);
		a->st.reserved_bytes -= a->b[i].size;
		a->st.segments--;
		blk_release(a, i);
	}
}

/* Whether `grow` more reserved bytes fit; if not, empties the cache and retries once. */
static void make_room(sim_alloc *a, int64_t grow)
{
	if (a->st.reserved_bytes + grow <= a->limit)
		return;
	sim_alloc_empty_cache(a);
	a->st.num_alloc_retries++;
}

/* Caching mode, no cached block fits: a new segment holding one free block. */
static int32_t new_segment(sim_alloc *a, int32_t pool, int64_t size)
{
	int64_t seg = sim_alloc_segment_size(size);
	make_room(a, seg);
	if (a->st.reserved_bytes + seg > a->limit)
		a->st.num_ooms++;
	int32_t i = blk_new(a, pool, a->next_addr, seg);
	a->next_addr += seg;
	reserve(a, seg);
	a->st.segments++;
	return i;
}

/* Expandable mode, no cached block fits: grows the pool's segment at its end. */
static int32_t grow_segment(sim_alloc *a, int32_t pool, int64_t size)
{
	int64_t page = page_bytes(pool);
	int32_t l = a->last[pool];
	bool tail_free = l >= 0 && !a->b[l].allocated;
	int64_t grow = ceil_to(size - (tail_free ? a->b[l].size : 0), page);
	if (a->st.reserved_bytes + grow > a->limit) {
		make_room(a, grow);
		l = a->last[pool];
		tail_free = l >= 0 && !a->b[l].allocated;
		grow = ceil_to(size - (tail_free ? a->b[l].size : 0), page);
		if (a->st.reserved_bytes + grow > a->limit)
			a->st.num_ooms++;
	}
	if (a->mapped[pool] == 0)
		a->st.segments++;
	int32_t i;
	if (tail_free) {
		cache_remove(a, l);
		a->b[l].size += grow;
		i = l;
	} else {
		i = blk_new(a, pool, a->mapped[pool], grow);
		a->b[i].prev = l;
		if (l >= 0)
			a->b[l].next = i;
		a->last[pool] = i;
	}
	a->mapped[pool] += grow;
	reserve(a, grow);
	return i;
}

/* ---- malloc and free --------------------------------------------------------------------- */

int32_t sim_alloc_malloc(sim_alloc *a, int32_t stream, int64_t bytes)
{
	int64_t size = sim_alloc_round_size(bytes);
	int32_t pool = 2 * stream + (size > SIM_ALLOC_SMALL_SIZE);
	int32_t i = cache_take_best_fit(a, pool, size);
	if (i < 0)
		i = a->kind == RM_SIM_ALLOC_PYTORCH_EXPANDABLE ? grow_segment(a, pool, size)
							       : new_segment(a, pool, size);
	int64_t rest = a->b[i].size - size;
	if (is_large(pool) ? rest > SIM_ALLOC_SMALL_SIZE : rest >= SIM_ALLOC_MIN_BLOCK) {
		int32_t r = blk_new(a, pool, a->b[i].addr + size, rest);
		sim_blk *x = &a->b[i], *y = &a->b[r];
		y->prev = i;
		y->next = x->next;
		if (x->next >= 0)
			a->b[x->next].prev = r;
		x->next = r;
		x->size = size;
		if (a->kind == RM_SIM_ALLOC_PYTORCH_EXPANDABLE && a->last[pool] == i)
			a->last[pool] = r;
		cache_insert(a, r);
	}
	a->b[i].allocated = 1;
	a->st.allocated_bytes += a->b[i].size;
	return i;
}

void sim_alloc_free(sim_alloc *a, int32_t i)
{
	sim_blk *b = a->b;
	int32_t pool = b[i].pool;
	b[i].allocated = 0;
	a->st.allocated_bytes -= b[i].size;
	int32_t p = b[i].prev;
	if (p >= 0 && !b[p].allocated) {
		cache_remove(a, p);
		b[p].size += b[i].size;
		b[p].next = b[i].next;
		if (b[i].next >= 0)
			b[b[i].next].prev = p;
		if (a->kind == RM_SIM_ALLOC_PYTORCH_EXPANDABLE && a->last[pool] == i)
			a->last[pool] = p;
		blk_release(a, i);
		i = p;
	}
	int32_t n = b[i].next;
	if (n >= 0 && !b[n].allocated) {
		cache_remove(a, n);
		b[i].size += b[n].size;
		b[i].next = b[n].next;
		if (b[n].next >= 0)
			b[b[n].next].prev = i;
		if (a->kind == RM_SIM_ALLOC_PYTORCH_EXPANDABLE && a->last[pool] == n)
			a->last[pool] = i;
		blk_release(a, n);
	}
	cache_insert(a, i);
}
