/* Invalidation and the waits the request paths share (invalidate.c),
 * for volume.c and trim.c.
 */
#ifndef HHC_INVALIDATE_H
#define HHC_INVALIDATE_H

#include <stdbool.h>
#include <stdint.h>

#include "common.h"
#include "vol.h"

/* LBAs (the dirty blocks a passdown keeps). */
HHC_VECTOR (u64_vec, uint64_t)

/* Wait up to 50 ms for wait_cond (slots freed or cleaned, a passdown
 * ended); callers re-check their condition.
 */
void wait_a_little (struct hhc_volume *vol);
/* Wait (bounded) for the flusher to free or clean slots. */
void wait_for_flusher (struct hhc_volume *vol);
/* Wait until no passdown covering lba is running. */
void wait_passdowns (struct hhc_volume *vol, uint64_t lba);
/* Bytes of block lba that lie inside the volume. */
uint32_t block_valid_len (struct hhc_volume *vol, uint64_t lba);
/* Drop a mapped, idle slot from the cache (its stripe lock held). */
void invalidate_locked (struct hhc_volume *vol, uint32_t s);
/* Invalidate block lba, waiting for I/O and write-back on it; with
 * keep_dirty a dirty block is left alone and true returned (the caller
 * zeroes it in the cache instead).
 */
bool invalidate_block (struct hhc_volume *vol, uint64_t lba, bool keep_dirty);
/* Before a passdown changes the backend: in the write-back modes,
 * make every free of a clean slot so far durable (a commit).
 */
int commit_invalidations (struct hhc_volume *vol);
/* Invalidate blocks [first, last) as invalidate_block does (keep: as
 * keep_dirty), the dirty ones kept appended to *kept; a range of more
 * blocks than the cache has slots by a scan of the slots.
 */
int invalidate_range (struct hhc_volume *vol, uint64_t first, uint64_t last,
                      bool keep, struct u64_vec *kept);

#endif /* HHC_INVALIDATE_H */
