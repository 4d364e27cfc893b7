/* Trim and zero (docs/design.md §4.4, §4.5): the whole blocks of the
 * range are invalidated and the request is passed down to the backend
 * ("passdown", recorded so that a concurrent fill or write-back of an
 * affected block does not mark it clean); the partial blocks at its
 * edges go through the cache as writes of zeros.  A range of more
 * blocks than the cache has slots is invalidated by a scan of the
 * slots (invalidate.c).
 */
#include <config.h>

#include <stdio.h>

#include "common.h"
#include "invalidate.h"
#include "passdown.h"
#include "request.h"
#include "vol.h"

/* Write zeros over a range with pwrite (backend without zero). */
static int
be_write_zeros (struct hhc_volume *vol, void *bctx, uint32_t count,
                uint64_t offset)
{
  const uint32_t chunk = 1024 * 1024;
  HHC_CLEANUP_FREE char *z = calloc (1, HHC_MIN (count, chunk));
  int r = z ? 0 : ENOMEM;

  while (r == 0 && count > 0)
    {
      uint32_t n = HHC_MIN (count, chunk);
      r = vol->ops->pwrite (bctx, z, n, offset, false);
      offset += n;
      count -= n;
    }
  return r;
}

/* The backend's part of a trim or zero. */
static int
passdown_op (struct hhc_volume *vol, void *bctx, bool zero, uint64_t count,
             uint64_t offset)
{
  if (!zero)
    return vol->info.can_trim && vol->ops->trim
               ? vol->ops->trim (bctx, count, offset)
               : 0;
  if (vol->info.can_zero && vol->ops->zero)
    return vol->ops->zero (bctx, count, offset);
  return be_write_zeros (vol, bctx, count, offset);
}

/* Zeros through the cache (the partial edges of a zero). */
static int
write_zeros (struct hhc_volume *vol, void *bctx, uint32_t n, uint64_t offset)
{
  HHC_CLEANUP_FREE char *z = calloc (1, n);

  return z ? hhc_write (vol, bctx, z, n, offset, false) : ENOMEM;
}

/* Trim or zero: partial blocks at the edges of a zero are written
 * with zeros through the cache; whole blocks are invalidated and the
 * operation passed down.
 */
static int
passdown (struct hhc_volume *vol, void *bctx, bool zero, uint32_t count,
          uint64_t offset, bool fua)
{
  uint64_t start = offset, end = offset + count;
  struct u64_vec kept = { 0 }; /* dirty blocks to zero in the cache */
  int r = check_range (vol, count, offset);

  if (r)
    return r;
  note_io (vol);
  if (vol->conf.mode != HHC_MODE_PT)
    {
      uint64_t e = offset + count;
      /* Whole blocks: [start, end); a partial last block of the volume
       * counts as whole.
       */
      start = HHC_ROUND_UP (offset, vol->bs);
      end = e == vol->info.size ? e : e / vol->bs * vol->bs;
      end = HHC_MAX (start, end);
      if (zero && start > offset)
        r = write_zeros (vol, bctx, HHC_MIN (start, e) - offset, offset);
      if (zero && r == 0 && end < e)
        r = write_zeros (vol, bctx, e - end, end);
      if (r)
        return r;
    }
  if (end > start)
    {
      bool keep = zero && vol->conf.mode != HHC_MODE_PT;
      uint64_t first = start / vol->bs;
      uint64_t last = (end + vol->bs - 1) / vol->bs;
      struct passdown_ticket pd = passdown_begin (vol, first, last);
      r = invalidate_range (vol, first, last, keep, &kept);
      if (r == 0)
        r = commit_invalidations (vol);
      if (r == 0)
        r = passdown_op (vol, bctx, zero, end - start, start);
      if (r)
        stat_add (&vol->stats.backend_errors, 1);
      passdown_end (vol, pd, first, last, true);
    }
  for (size_t i = 0; r == 0 && i < kept.len; i++)
    r = write_zeros (vol, bctx, block_valid_len (vol, kept.ptr[i]),
                     kept.ptr[i] * vol->bs);
  u64_vec_reset (&kept);
  if (r == 0 && fua)
    r = hhc_flush (vol, bctx);
  return r;
}

int
hhc_trim (struct hhc_volume *vol, void *bctx, uint32_t count, uint64_t offset,
          bool fua)
{
  return passdown (vol, bctx, false, count, offset, fua);
}

int
hhc_zero (struct hhc_volume *vol, void *bctx, uint32_t count, uint64_t offset,
          bool fua)
{
  return passdown (vol, bctx, true, count, offset, fua);
}
