/*
 * Private to sim/: a model of the device allocator a runtime puts between tensors and cudaMalloc,
 * replayed over the engine's allocations and frees in time order (sim/allocator.c; the rules and
 * their sources are in docs/sim.md "Reserved memory").
 *
 * Modes with a replay: RM_SIM_ALLOC_PYTORCH (PyTorch's CUDA caching allocator: 512 B rounding,
 * small and large pools, best fit per stream, splitting, coalescing, one release-and-retry when
 * cudaMalloc would fail) and RM_SIM_ALLOC_PYTORCH_EXPANDABLE (expandable_segments:True: one
 * segment per stream and pool that grows by pages). The other modes need no replay: exact
 * reserves what is allocated, jax_prealloc a fraction of HBM (rm_sim metrics).
 *
 * Units: bytes. Block handles are small integers, valid until the block is freed or the
 * allocator reset. Every operation is O(log n) expected in the number of cached blocks (a treap
 * per (stream, pool) keyed by (size, address), as PyTorch's std::set keyed by (stream, size,
 * address)); a release of the cache is O(number of segments released). Deterministic: the treap
 * priorities come from a counter, not from addresses or a clock.
 */
#ifndef REMORA_SIM_ALLOCATOR_H
#define REMORA_SIM_ALLOCATOR_H

#include <stdint.h>

#include "remora/sim.h"

/* PyTorch's constants (c10/cuda/CUDACachingAllocator.cpp, c10/core/AllocatorConfig.h). */
#define SIM_ALLOC_MIN_BLOCK INT64_C(512)                /* kMinBlockSize: all sizes round to it */
#define SIM_ALLOC_SMALL_SIZE (INT64_C(1) << 20)         /* kSmallSize: <= 1 MiB is a small request */
#define SIM_ALLOC_SMALL_BUFFER (INT64_C(2) << 20)       /* kSmallBuffer: small-pool segment */
#define SIM_ALLOC_LARGE_BUFFER (INT64_C(20) << 20)      /* kLargeBuffer: segment for 1-10 MiB */
#define SIM_ALLOC_MIN_LARGE_ALLOC (INT64_C(10) << 20)   /* kMinLargeAlloc: from here, own segment */
#define SIM_ALLOC_ROUND_LARGE (INT64_C(2) << 20)        /* kRoundLarge: large segments round to it */

typedef struct sim_alloc sim_alloc;

/* Counters of one replay, as torch.cuda.memory_stats() names them. */
typedef struct sim_alloc_stats {
	int64_t reserved_bytes;      /* "reserved_bytes.all.current": segments (or mapped pages) held */
	int64_t peak_reserved_bytes; /* "reserved_bytes.all.peak" */
	int64_t allocated_bytes;     /* "allocated_bytes.all.current": rounded block sizes in use */
	int64_t segments;            /* "segment.all.current" (expandable: segments with pages) */
	int64_t num_alloc_retries;   /* cache released and cudaMalloc retried */
	int64_t num_ooms;            /* failed even after the retry: PyTorch raises OutOfMemoryError;
				      * the replay then goes on over the limit */
} sim_alloc_stats;

/*
 * An allocator of kind RM_SIM_ALLOC_PYTORCH or RM_SIM_ALLOC_PYTORCH_EXPANDABLE for streams
 * 0 .. n_streams-1 (n_streams >= 1). NULL for any other kind (no replay needed).
 */
sim_alloc *sim_alloc_create(rm_sim_allocator kind, int32_t n_streams);
void sim_alloc_destroy(sim_alloc *a);
/* Empties the allocator (nothing reserved); cudaMalloc fails past limit_bytes reserved. */
void sim_alloc_reset(sim_alloc *a, int64_t limit_bytes);
/* Allocates bytes (>= 0) for stream; returns the block's handle. */
int32_t sim_alloc_malloc(sim_alloc *a, int32_t stream, int64_t bytes);
/* Returns a block to its stream's pool, coalescing it with free neighbours. */
void sim_alloc_free(sim_alloc *a, int32_t block);
/* Frees every cached segment no block of which is in use (torch.cuda.empty_cache()). */
void sim_alloc_empty_cache(sim_alloc *a);
const sim_alloc_stats *sim_alloc_get_stats(const sim_alloc *a);
/* The size a request of bytes is rounded to (512 B granularity), and its segment size. */
int64_t sim_alloc_round_size(int64_t bytes);
int64_t sim_alloc_segment_size(int64_t rounded);

#endif /* REMORA_SIM_ALLOCATOR_H */
