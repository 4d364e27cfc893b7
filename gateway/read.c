/* Reads: hits, misses filled into new slots in runs, and prefetch
 * (NBD_CMD_CACHE).  The claim protocol is volume.c's (request.h).
 *
 * A read that misses several consecutive blocks claims a new slot for
 * each (up to 1 MiB, stopping at the first block that is cached or
 * cannot get a slot) and reads them from the backend in one request.
 * A fill does not mark its block clean if a passdown overlapped it or
 * one on its region is not yet flushed (passdown.h).  With no free
 * slot the read bypasses the cache and kicks the flusher; pt and a
 * sequential stream (seqcut.h) never fill.
 *
 * promote=nhit (promote.h): a miss fills only if its block is
 * promoted.  A run of misses that are not is read around the cache
 * in one backend request (bypass_run); a fill run stops at the first
 * block that is not.  Each block's miss is counted once per request:
 * the block whose miss was counted last, and its verdict, go from one
 * block of the request to the next (struct miss_note).  Prefetch
 * always fills; a sequential stream's misses are not counted.
 */
#include <config.h>

#include <stdio.h>

#include "common.h"
#include "flusher.h"
#include "passdown.h"
#include "reclaim.h"
#include "request.h"
#include "vol.h"

/* Misses are read from the backend in runs of up to 1 MiB. */
#define FILL_RUN_MAX 256
static uint32_t
fill_run_max (struct hhc_volume *vol)
{
  return HHC_MAX (HHC_MIN ((uint32_t)FILL_RUN_MAX, (1u << 20) / vol->bs), 1u);
}

/* The last block whose miss a request counted (promote.h). */
struct miss_note {
  uint64_t lba1; /* its lba + 1; 0: none */
  bool admit;    /* whether it was promoted */
};

/* Whether the miss of block lba (not cached) may fill the cache,
 * counting it unless n says it was counted already.
 */
static bool
admit_miss (struct hhc_volume *vol, struct miss_note *n, uint64_t lba)
{
  if (n->lba1 != lba + 1)
    {
      n->lba1 = lba + 1;
      n->admit = promote_miss (&vol->promote, lba);
    }
  return n->admit;
}

/* Claim block lba for a fill: a new slot mapped to it, BUSY.  The
 * stripe lock is held; HHC_NIL when the block is cached after all, a
 * passdown covers it, or no free slot is left.
 */
static uint32_t
claim_fill_locked (struct hhc_volume *vol, struct hhc_stripe *st, uint64_t lba,
                   uint64_t seq)
{
  uint32_t t;

  if (index_lookup (&vol->idx, lba) != HHC_NIL || passdown_since (vol, seq, lba)
      || passdown_unflushed (vol, lba))
    return HHC_NIL;
  t = cache_alloc_slot (&vol->cache);
  if (t != HHC_NIL)
    {
      /* BUSY first: a read without the lock never sees t mapped, idle
       * and not yet filled.
       */
      active_set (st, t, ACT_BUSY);
      index_insert (&vol->idx, t, lba);
    }
  return t;
}

/* Miss: read a run of uncached blocks from the backend in one request
 * into new slots.  Called with the stripe lock of lba held (lba not
 * cached); returns with it released.  Up to nmax blocks are claimed,
 * stopping at the first block that is cached or cannot get a slot.
 * out (may be NULL) receives want bytes starting at byte off of block
 * lba; *nread: blocks read (at least 1).  note (NULL for prefetch):
 * the run stops at a block whose miss is not promoted.
 */
static int
fill_run (struct hhc_volume *vol, void *bctx, struct hhc_stripe *st,
          uint64_t lba, uint32_t nmax, struct miss_note *note, char *out,
          uint32_t off, uint32_t want, uint32_t *nread)
{
  uint64_t seq = passdown_seq (vol);
  uint32_t slots[FILL_RUN_MAX];
  uint32_t k = 1;
  uint64_t bytes;
  HHC_CLEANUP_FREE char *buf = NULL;
  int r;

  slots[0] = claim_fill_locked (vol, st, lba, seq);
  hhc_unlock (&st->lock);
  if (slots[0] != HHC_NIL)
    while (k < nmax && lba + k < vol->nblocks)
      {
        struct hhc_stripe *s2 = index_stripe (&vol->idx, lba + k);
        hhc_lock (&s2->lock);
        slots[k] = note && index_lookup (&vol->idx, lba + k) == HHC_NIL
                           && !admit_miss (vol, note, lba + k)
                       ? HHC_NIL
                       : claim_fill_locked (vol, s2, lba + k, seq);
        hhc_unlock (&s2->lock);
        if (slots[k] == HHC_NIL)
          break;
        k++;
      }
  if (slots[0] == HHC_NIL && vol_needs_reclaim (vol))
    flusher_kick (&vol->flusher);

  /* One backend read for the run; the volume's last block may be
   * partial: the rest of it reads as zeros.
   */
  bytes = HHC_MIN ((uint64_t)k * vol->bs, vol->info.size - lba * vol->bs);
  buf = hhc_alloc_aligned ((size_t)k * vol->bs);
  r = buf ? vol->ops->pread (bctx, buf, bytes, lba * vol->bs) : ENOMEM;
  if (r)
    stat_add (&vol->stats.backend_errors, 1);

  for (uint32_t i = 0; i < k; i++)
    {
      struct hhc_stripe *s2 = index_stripe (&vol->idx, lba + i);
      uint32_t t = slots[i];
      int w = 0;
      if (t == HHC_NIL)
        continue; /* bypass: the block is not cached */
      if (r == 0)
        w = cache_write_slot (&vol->cache, t, buf + (size_t)i * vol->bs, 0,
                              vol->bs);
      hhc_lock (&s2->lock);
      if (r == 0 && w == 0 && !passdown_since (vol, seq, lba + i))
        {
          publish_locked (vol, t, SLOT_CLEAN);
          active_set (s2, t, 0);
          stat_add (&vol->stats.read_fills, 1);
        }
      else
        unfill_locked (vol, s2, t);
      hhc_unlock (&s2->lock);
    }
  if (r == 0 && out)
    memcpy (out, buf + off,
            HHC_MIN ((uint64_t)want, (uint64_t)k * vol->bs - off));
  *nread = k;
  return r;
}

/* A miss not promoted: read block lba and the blocks after it that
 * are neither cached nor promoted (up to nmax) from the backend into
 * out in one request, caching nothing.  Called with lba's stripe lock
 * held (lba not cached); returns with it released.  out gets up to
 * want bytes from byte off of block lba; *done: the bytes delivered.
 */
static int
bypass_run (struct hhc_volume *vol, void *bctx, struct hhc_stripe *st,
            uint64_t lba, uint32_t nmax, struct miss_note *note, char *out,
            uint32_t off, uint32_t want, uint32_t *done)
{
  uint32_t k = 1, len;
  int r;

  hhc_unlock (&st->lock);
  while (k < nmax && lba + k < vol->nblocks)
    {
      struct hhc_stripe *s2 = index_stripe (&vol->idx, lba + k);
      bool cached;
      hhc_lock (&s2->lock);
      cached = index_lookup (&vol->idx, lba + k) != HHC_NIL;
      hhc_unlock (&s2->lock);
      if (cached || admit_miss (vol, note, lba + k))
        break;
      k++;
    }
  len = HHC_MIN ((uint64_t)want, (uint64_t)k * vol->bs - off);
  stat_add (&vol->stats.read_misses, k);
  r = vol->ops->pread (bctx, out, len, lba * vol->bs + off);
  if (r)
    stat_add (&vol->stats.backend_errors, 1);
  *done = len;
  return r;
}

/* A hit that takes no lock: look lba up and read its slot between two
 * looks at the stripe's generation (index_read_begin).  If any slot of
 * the stripe was mapped, unmapped or claimed ACT_BUSY meanwhile (a
 * write in place, a fill, an eviction that let the slot go to another
 * block), what was read is dropped and the caller reads under the
 * lock.  Returns false for that, for a miss, and while the stripe has
 * a busy slot; true with *r set when the read counts.
 */
static bool
read_hit_unlocked (struct hhc_volume *vol, struct hhc_stripe *st, uint64_t lba,
                   char *buf, uint32_t off, uint32_t len, int *r)
{
  uint32_t gen = index_read_begin (st), s;

  if (gen & 1)
    return false;
  s = index_lookup_unlocked (&vol->idx, lba);
  if (s == HHC_NIL)
    return false;
  *r = cache_read_slot (&vol->cache, s, buf, off, len);
  if (!index_read_end (st, gen))
    return false;
  stat_add (&vol->stats.read_hits, 1);
  lru_touch (&vol->lru, s);
  if (*r)
    hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR, "%s: reading slot %u: %s",
             vol->dev->name, s, strerror (*r));
  return true;
}

/* Read from block lba: a hit, or a miss that may fill a run of up to
 * nmax blocks.  buf gets up to want bytes from byte off of the block;
 * returns the bytes delivered in *done.  note: as for fill_run.
 */
static int
read_block (struct hhc_volume *vol, void *bctx, uint64_t lba, char *buf,
            uint32_t off, uint32_t want, uint32_t nmax, bool bypass,
            struct miss_note *note, uint32_t *done)
{
  struct hhc_stripe *st = index_stripe (&vol->idx, lba);
  uint32_t len = HHC_MIN (want, vol->bs - off);
  uint32_t s, k;
  int r;

  if (read_hit_unlocked (vol, st, lba, buf, off, len, &r))
    {
      *done = len;
      return r;
    }
  hhc_lock (&st->lock);
  s = wait_idle (vol, st, lba, ACT_BUSY);
  if (s == HHC_NIL)
    {
      bool fill = vol->conf.mode != HHC_MODE_PT && !bypass;
      if (fill && !admit_miss (vol, note, lba))
        return bypass_run (vol, bctx, st, lba, nmax, note, buf, off, want,
                           done);
      if (fill)
        {
          r = fill_run (vol, bctx, st, lba, nmax, note, buf, off, want, &k);
          *done = HHC_MIN ((uint64_t)want, (uint64_t)k * vol->bs - off);
          stat_add (&vol->stats.read_misses, k);
          return r;
        }
      hhc_unlock (&st->lock); /* pt or seq-cutoff: no fill */
      return seqcut_read_run (vol, bctx, lba, buf, off, want, nmax, done);
    }
  active_change (st, s, ACT_BUSY, 0);
  hhc_unlock (&st->lock);

  stat_add (&vol->stats.read_hits, 1);
  lru_touch (&vol->lru, s);
  r = cache_read_slot (&vol->cache, s, buf, off, len);
  if (r)
    hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR, "%s: reading slot %u: %s",
             vol->dev->name, s, strerror (r));

  hhc_lock (&st->lock);
  clear_flags (st, s, ACT_BUSY);
  hhc_unlock (&st->lock);
  *done = len;
  return r;
}

int
hhc_read (struct hhc_volume *vol, void *bctx, void *buf, uint32_t count,
          uint64_t offset)
{
  char *p = buf;
  struct miss_note note = { 0, false };
  int r = check_range (vol, count, offset);
  bool bypass = r == 0 && seqcut_check (&vol->seqcut, offset, count, false);

  if (r == 0 && cache_failed (vol))
    r = EIO; /* cached data can no longer be trusted */

  note_io (vol);
  stat_add (&vol->stats.bytes_read, count);
  while (r == 0 && count > 0)
    {
      uint64_t lba = offset / vol->bs;
      uint32_t off = offset % vol->bs;
      uint64_t blocks = ((uint64_t)off + count + vol->bs - 1) / vol->bs;
      uint32_t nmax = HHC_MIN (blocks, (uint64_t)fill_run_max (vol));
      uint32_t n;
      r = read_block (vol, bctx, lba, p, off, count, nmax, bypass, &note, &n);
      p += n;
      offset += n;
      count -= n;
    }
  return r;
}

int
hhc_prefetch (struct hhc_volume *vol, void *bctx, uint32_t count,
              uint64_t offset)
{
  int r = check_range (vol, count, offset);
  uint64_t end = (offset + count + vol->bs - 1) / vol->bs;

  if (r || vol->conf.mode == HHC_MODE_PT || cache_failed (vol))
    return r;
  for (uint64_t b = offset / vol->bs; r == 0 && b < end;)
    {
      struct hhc_stripe *st = index_stripe (&vol->idx, b);
      uint32_t k = 1;
      hhc_lock (&st->lock);
      if (index_lookup (&vol->idx, b) != HHC_NIL)
        hhc_unlock (&st->lock);
      else
        r = fill_run (vol, bctx, st, b,
                      HHC_MIN (end - b, (uint64_t)fill_run_max (vol)), NULL,
                      NULL, 0, 0, &k);
      b += k;
    }
  return r;
}
