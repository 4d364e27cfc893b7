/* One cached volume: the request paths (docs/design.md §3, §4.4).
 *
 * Requests are split into cache blocks.  For each block the stripe
 * lock of its LBA is taken, the slot looked up, and the slot claimed
 * with ACT_BUSY before any I/O; the lock is never held during I/O.
 *
 *   block state    read                write (wb)          write (wt)
 *   cached         read slot           write slot; clean   backend, then slot
 *                                      -> dirty
 *   not cached     backend -> new slot new slot (+ backend new slot (+ backend
 *                  (clean)             read if partial)    read), backend
 *                                      (dirty)             (clean)
 *
 * pt: reads use cached blocks, misses go to the backend and are not
 * cached; writes invalidate the blocks and go to the backend.  So do
 * requests of a sequential stream past seq-cutoff (seqcut.h) in every
 * mode, but that a write keeps a dirty block and writes it through the
 * cache (write_direct).
 *
 * A new slot comes from the free pool (invariant 1); when it is empty
 * reads bypass the cache and writes wait for the flusher to evict.
 * Trim and zero invalidate whole blocks and pass down ("passdown");
 * they are recorded (passdown_since) so that a concurrent fill or
 * write-back of an affected block does not mark it clean.  A range of
 * more blocks than the cache has slots is invalidated by a scan of the
 * slots (a 64 TiB trim is 2^34 blocks); so that it cannot miss a block
 * moving to a slot it passed, a copy-on-write does not publish while a
 * passdown on the block runs: it retries after it (as write_miss does).
 *
 * Reads and prefetch are in read.c, trims and zeros in trim.c, the
 * invalidation and waits they share in invalidate.c, the claim helpers
 * in request.h; durability (invariant 4), FLUSH and FUA in flush.c.
 */
#include <config.h>

#include <stdio.h>

#include "common.h"
#include "flusher.h"
#include "invalidate.h"
#include "passdown.h"
#include "reclaim.h"
#include "request.h"
#include "seqcut.h"
#include "vol.h"

/* ---- backend helpers ---- */

static int
be_read_block (struct hhc_volume *vol, void *bctx, uint64_t lba, char *blk)
{
  uint32_t n = block_valid_len (vol, lba);
  int r = vol->ops->pread (bctx, blk, n, lba * vol->bs);

  if (r)
    stat_add (&vol->stats.backend_errors, 1);
  memset (blk + n, 0, vol->bs - n);
  return r;
}

/* ---- no lock held below this line ---- */

/* Why a write to a cached block has to start again. */
enum write_again {
  AGAIN_NO,
  AGAIN_NO_SLOT,  /* no free slot for a copy-on-write */
  AGAIN_PASSDOWN, /* a passdown runs on the block */
};

/* A wb write to a clean block: copy-on-write into a new slot.  The
 * persisted clean entry keeps describing the old slot, whose data is
 * the backend's, until the new dirty entry is committed: so a clean
 * entry never holds data the backend lacks, and clean blocks can be
 * kept after a crash.  s is claimed BUSY; *again (s released) when
 * no free slot is left (the caller waits for the flusher and retries)
 * or a passdown on lba runs (the caller waits for it and retries).
 */
static int
write_clean_cow (struct hhc_volume *vol, struct hhc_stripe *st, uint32_t s,
                 uint64_t lba, const char *buf, uint32_t off, uint32_t len,
                 enum write_again *again)
{
  uint32_t t = cache_alloc_slot (&vol->cache);
  HHC_CLEANUP_FREE char *blk = NULL;
  const char *data = buf;
  int r = 0;

  if (t != HHC_NIL && len < vol->bs)
    {
      blk = hhc_alloc_aligned (vol->bs);
      r = blk ? cache_read_slot (&vol->cache, s, blk, 0, vol->bs) : ENOMEM;
      if (r == 0)
        memcpy (blk + off, buf, len);
      data = blk;
    }
  if (t != HHC_NIL && r == 0)
    r = cache_write_slot (&vol->cache, t, data, 0, vol->bs);

  hhc_lock (&st->lock);
  if (t != HHC_NIL && r == 0 && passdown_running (vol, lba))
    *again = AGAIN_PASSDOWN; /* a slot scan may have passed t */
  else if (t == HHC_NIL)
    *again = AGAIN_NO_SLOT;
  if (*again != AGAIN_NO || r)
    {
      if (t != HHC_NIL)
        cache_unalloc_slot (&vol->cache, t);
      clear_flags (st, s, ACT_BUSY);
      hhc_unlock (&st->lock);
      return r;
    }
  /* The new slot takes the block's place; the old one is freed. */
  if (vol->log)
    log_append (vol->log, t, lba, data);
  index_remove (&vol->idx, s);
  lru_remove (&vol->lru, s);
  cache_set_state (&vol->cache, s, SLOT_FREE);
  cache_release_slot (&vol->cache, s);
  active_set (st, s, 0);
  index_insert (&vol->idx, t, lba);
  publish_locked (vol, t, SLOT_DIRTY);
  lru_touch (&vol->lru, t); /* accessed: back to hot when cleaned */
  hhc_unlock (&st->lock);
  return 0;
}

/* Write into a cached block (claimed BUSY by the caller).  wb: a dirty
 * block is rewritten in place, a clean one copied on write; wt: the
 * backend, then the slot in place (clean blocks are not trusted after
 * a crash in wt, see open.c).
 */
static int
write_hit (struct hhc_volume *vol, void *bctx, struct hhc_stripe *st,
           uint32_t s, uint64_t lba, const char *buf, uint32_t off,
           uint32_t len, bool fua, enum write_again *again)
{
  bool wt = vol->conf.mode == HHC_MODE_WT;
  enum slot_state state = slot_state (&vol->idx.slots[s]);
  int r = 0;

  stat_add (&vol->stats.write_hits, 1);
  if (!wt && state == SLOT_CLEAN)
    return write_clean_cow (vol, st, s, lba, buf, off, len, again);
  /* Never FUA to the backend: a FUA that fails may drop earlier wt
   * writes as a failed flush does, and hhc_write flushes after a FUA
   * write anyway (hhc_flush, which counts a failure).
   */
  if (wt)
    r = vol->ops->pwrite (bctx, buf, len, lba * vol->bs + off, false);
  if (r == 0)
    r = cache_write_slot (&vol->cache, s, buf, off, len);
  if (r == 0 && vol->log)
    {
      /* A dirty block rewritten in place (we hold it BUSY). */
      if (len == vol->bs)
        log_append (vol->log, s, lba, buf);
      else
        log_update (vol->log, s, lba, buf, off, len);
    }

  hhc_lock (&st->lock);
  /* The slot may now differ from the backend: drop it, while it is
   * still BUSY, so that no read without the lock sees it in between.
   */
  if (r && state == SLOT_CLEAN && (active_get (st, s) & ~ACT_BUSY) == 0)
    invalidate_locked (vol, s);
  clear_flags (st, s, ACT_BUSY);
  if (r == 0)
    lru_touch (&vol->lru, s);
  hhc_unlock (&st->lock);
  return r;
}

/* Write a block that is not cached into new slot t (claimed BUSY). */
static int
write_miss (struct hhc_volume *vol, void *bctx, struct hhc_stripe *st,
            uint32_t t, uint64_t lba, const char *buf, uint32_t off,
            uint32_t len, bool fua, bool *retry)
{
  bool wt = vol->conf.mode == HHC_MODE_WT;
  uint64_t seq = passdown_seq (vol);
  HHC_CLEANUP_FREE char *blk = NULL;
  const char *data = buf;
  int r = 0;

  stat_add (&vol->stats.write_misses, 1);
  if (len < vol->bs)
    {
      blk = hhc_alloc_aligned (vol->bs);
      r = blk ? be_read_block (vol, bctx, lba, blk) : ENOMEM;
      if (r == 0)
        memcpy (blk + off, buf, len);
      data = blk;
    }
  if (r == 0 && wt) /* not FUA: see write_hit */
    r = vol->ops->pwrite (bctx, buf, len, lba * vol->bs + off, false);
  if (r == 0)
    r = cache_write_slot (&vol->cache, t, data, 0, vol->bs);

  hhc_lock (&st->lock);
  if (r == 0 && ((len == vol->bs && !wt) || !passdown_since (vol, seq, lba)))
    {
      if (vol->log)
        log_append (vol->log, t, lba, data);
      publish_locked (vol, t, wt ? SLOT_CLEAN : SLOT_DIRTY);
      active_set (st, t, 0);
    }
  else
    {
      /* Failed, or a trim/zero/pt write on this block overlapped us:
       * in wt the backend has the data, so just do not cache it; in wb
       * the backend data we merged with may be stale: try again once
       * the passdown is over.
       */
      unfill_locked (vol, st, t);
      *retry = r == 0 && !wt;
    }
  hhc_unlock (&st->lock);
  return r;
}

static int
write_block (struct hhc_volume *vol, void *bctx, uint64_t lba, const char *buf,
             uint32_t off, uint32_t len, bool fua)
{
  struct hhc_stripe *st = index_stripe (&vol->idx, lba);

  for (;;)
    {
      uint32_t s, f;
      bool retry = false;
      int r;

      hhc_lock (&st->lock);
      s = wait_idle (vol, st, lba, ACT_BUSY);
      if (s != HHC_NIL)
        {
          f = active_get (st, s);
          active_set (st, s, f | ACT_BUSY | (f & ACT_WB ? ACT_REDIRTY : 0));
          hhc_unlock (&st->lock);
          enum write_again again = AGAIN_NO;
          r = write_hit (vol, bctx, st, s, lba, buf, off, len, fua, &again);
          if (again == AGAIN_NO)
            return r;
          if (again == AGAIN_PASSDOWN)
            {
              wait_passdowns (vol, lba);
              continue;
            }
          s = HHC_NIL; /* no free slot for the copy: wait below */
          goto stall;
        }
      s = cache_alloc_slot (&vol->cache);
      if (s != HHC_NIL)
        {
          active_set (st, s, ACT_BUSY); /* before it is mapped: read.c */
          index_insert (&vol->idx, s, lba);
        }
      hhc_unlock (&st->lock);
stall:
      if (s == HHC_NIL)
        {
          if ((r = cache_failed (vol)) != 0)
            return r;
          stat_add (&vol->stats.stalls, 1);
          wait_for_flusher (vol);
          continue;
        }
      r = write_miss (vol, bctx, st, s, lba, buf, off, len, fua, &retry);
      if (!retry)
        return r;
      wait_passdowns (vol, lba);
    }
}

static void
throttle (struct hhc_volume *vol)
{
  if (!hhc_mode_is_wb (vol->conf.mode))
    return;
  if (load64 (&vol->ndirty) >= vol->dirty_high)
    flusher_kick (&vol->flusher);
  while (load64 (&vol->ndirty) >= vol->dirty_max && cache_failed (vol) == 0)
    {
      stat_add (&vol->stats.stalls, 1);
      wait_for_flusher (vol);
    }
}

static int write_blocks (struct hhc_volume *vol, void *bctx, const char *p,
                         uint32_t count, uint64_t offset);
static int write_direct (struct hhc_volume *vol, void *bctx, const char *buf,
                         uint32_t count, uint64_t offset);

int
hhc_write (struct hhc_volume *vol, void *bctx, const void *buf, uint32_t count,
           uint64_t offset, bool fua)
{
  int r = check_range (vol, count, offset);

  if (r == 0 && cache_failed (vol))
    r = EIO;
  if (r)
    return r;
  note_io (vol);
  stat_add (&vol->stats.bytes_written, count);
  if (vol->conf.mode == HHC_MODE_PT
      || seqcut_check (&vol->seqcut, offset, count, true))
    r = write_direct (vol, bctx, buf, count, offset);
  else
    {
      throttle (vol);
      r = write_blocks (vol, bctx, buf, count, offset);
    }
  if (r == 0 && fua)
    r = hhc_flush (vol, bctx);
  return r;
}

int
vol_relog (struct hhc_volume *vol, uint32_t key, uint64_t lba)
{
  struct hhc_stripe *st = index_stripe (&vol->idx, lba);
  HHC_CLEANUP_FREE char *blk = hhc_alloc_aligned (vol->bs);
  uint32_t s;
  int r;

  if (blk == NULL)
    return ENOMEM;
  hhc_lock (&st->lock);
  s = wait_idle (vol, st, lba, ACT_BUSY);
  if (s != key || slot_state (&vol->idx.slots[s]) < SLOT_DIRTY)
    {
      /* No longer this block's dirty slot. */
      hhc_unlock (&st->lock);
      log_forget (vol->log, key, lba);
      return 0;
    }
  active_change (st, s, ACT_BUSY, 0);
  hhc_unlock (&st->lock);
  r = cache_read_slot (&vol->cache, s, blk, 0, vol->bs);
  hhc_lock (&st->lock);
  /* Write-back may have cleaned it meanwhile (and revoked it). */
  if (r == 0 && slot_state (&vol->idx.slots[s]) >= SLOT_DIRTY)
    log_append (vol->log, s, lba, blk);
  clear_flags (st, s, ACT_BUSY);
  hhc_unlock (&st->lock);
  return r;
}

/* Write through the cache, block by block. */
static int
write_blocks (struct hhc_volume *vol, void *bctx, const char *p, uint32_t count,
              uint64_t offset)
{
  int r = 0;

  while (r == 0 && count > 0)
    {
      uint64_t lba = offset / vol->bs;
      uint32_t off = offset % vol->bs;
      uint32_t n = HHC_MIN (count, vol->bs - off);
      r = write_block (vol, bctx, lba, p, off, n, false);
      p += n;
      offset += n;
      count -= n;
    }
  return r;
}

/* A write straight to the backend (pt; a sequential stream past
 * seq-cutoff), recorded as a passdown so that the next FLUSH flushes
 * the backend and no fill or write-back overlapping it marks its
 * blocks clean.  Cached blocks are invalidated first (their frees
 * committed in wb, as for a trim), but for dirty ones in the
 * write-back modes: dropping one would let a crash before the backend
 * is flushed bring back data older than a FLUSH covered, and writing
 * it back first costs a backend flush.  They are written through the
 * cache afterwards instead (and logged in hhc), so neither the cache
 * nor the log keeps an older copy that could be read, written back or
 * replayed over this write.
 */
static int
write_direct (struct hhc_volume *vol, void *bctx, const char *buf,
              uint32_t count, uint64_t offset)
{
  uint64_t first = offset / vol->bs;
  uint64_t last = (offset + count + vol->bs - 1) / vol->bs;
  struct u64_vec kept = { 0 }; /* dirty blocks: through the cache */
  struct passdown_ticket pd = passdown_begin (vol, first, last);
  int r = invalidate_range (vol, first, last, hhc_mode_is_wb (vol->conf.mode),
                            &kept);

  bool be_err = false;

  if (r == 0)
    r = commit_invalidations (vol);
  if (r == 0 && (r = vol->ops->pwrite (bctx, buf, count, offset, false)) != 0)
    {
      stat_add (&vol->stats.backend_errors, 1);
      be_err = true;
    }
  /* A fallback below is no backend write a FLUSH owes. */
  passdown_end (vol, pd, first, last,
                !(be_err && hhc_mode_is_wb (vol->conf.mode)));
  if (be_err && hhc_mode_is_wb (vol->conf.mode))
    {
      /* The backend is out: a write-back mode takes the whole write
       * into the cache as usual (as dirty blocks: whatever part of it
       * the backend got, write-back replaces; no FLUSH needs the
       * backend for it).
       */
      throttle (vol);
      kept.len = 0;
      r = write_blocks (vol, bctx, buf, count, offset);
    }
  for (size_t i = 0; r == 0 && i < kept.len; i++)
    {
      uint64_t s = HHC_MAX (offset, kept.ptr[i] * vol->bs);
      uint64_t e = HHC_MIN (offset + count, (kept.ptr[i] + 1) * vol->bs);
      r = write_blocks (vol, bctx, buf + (s - offset), e - s, s);
    }
  u64_vec_reset (&kept);
  return r;
}
