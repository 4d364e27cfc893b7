/* Write-back batches (flusher.h: flusher_batch, flusher_writeback_all);
 * the thread that runs them is flusher.c.
 *
 * A batch, step by step:
 *   1. take up to BATCH of the oldest dirty slots (dirty list head),
 *      each with the dirty blocks that follow it (its run of
 *      consecutive LBAs) and the other dirty blocks of its
 *      preferred-size chunk, up to BATCH_BYTES in all: a batch of
 *      contiguous runs is BATCH_BYTES in a few large extents that
 *      keep every writer busy, one of random blocks at most BATCH
 *      runs (which bounds the time a batch takes);
 *   2. claim each (stripe lock): still mapped, dirty, not busy ->
 *      ACT_BUSY | ACT_WB, ACT_REDIRTY cleared;
 *   3. read their data from the SSD, then drop ACT_BUSY (clients may
 *      write again; a write sets ACT_REDIRTY);
 *   4. sort by LBA, cut into extents of consecutive blocks that do not
 *      cross a chunk boundary, write them with nthreads threads;
 *   5. flush the backend;
 *   6. per block (stripe lock): if its extent and the flush succeeded,
 *      it was not rewritten and no trim/zero passed down meanwhile,
 *      mark it clean (invariant 3); drop ACT_WB.
 */
#include <config.h>

#include <stdio.h>

#include "bflush.h"
#include "common.h"
#include "passdown.h"
#include "reclaim.h"
#include "flusher.h"
#include "pace.h"
#include "vol.h"

#define BATCH 256               /* runs (oldest dirty blocks) per batch... */
#define BATCH_BYTES (16u << 20) /* ...and at most this many bytes */
#define MAX_EXTENT (4u * 1024 * 1024)

struct wb_block {
  uint64_t lba;
  uint32_t slot;
  uint32_t extent; /* index of its extent */
};

struct wb_extent {
  uint64_t lba;   /* first block */
  uint32_t first; /* index of first block in the sorted array */
  uint32_t n;     /* blocks */
  int err;
};

struct wb_batch {
  struct hhc_volume *vol;
  void *bctx;
  struct wb_block *blocks;
  uint32_t nblocks;
  uint32_t nruns; /* blocks taken not right after the one before */
  char *data;     /* nblocks * bs, in sorted order */
  struct wb_extent *ext;
  uint32_t next;
  uint32_t nextents;
  pthread_mutex_t lock; /* protects next */
};

static int
cmp_lba (const void *a, const void *b)
{
  const struct wb_block *x = a, *y = b;
  return x->lba < y->lba ? -1 : x->lba > y->lba;
}

/* Claim block lba for write-back if it is dirty and idle. */
static bool
claim (struct hhc_volume *vol, uint64_t lba, uint32_t *slotp)
{
  struct hhc_stripe *st = index_stripe (&vol->idx, lba);
  HHC_SCOPED_LOCK (&st->lock);
  uint32_t s = index_lookup (&vol->idx, lba);

  if (s == HHC_NIL || slot_state (&vol->idx.slots[s]) < SLOT_DIRTY
      || active_get (st, s) != 0)
    return false;
  active_set (st, s, ACT_BUSY | ACT_WB);
  *slotp = s;
  return true;
}

/* Claim lba into the batch (a block already in it is busy: claim
 * refuses it): at most max blocks in at most BATCH runs (a block not
 * right after the last one taken starts one), so that the time of a
 * batch of scattered blocks stays bounded.
 */
static bool
take (struct wb_batch *b, uint64_t lba, uint32_t max)
{
  bool starts = b->nblocks == 0 || b->blocks[b->nblocks - 1].lba + 1 != lba;
  uint32_t s;

  if (b->nblocks >= max || (starts && b->nruns >= BATCH)
      || lba >= b->vol->nblocks || !claim (b->vol, lba, &s))
    return false;
  b->nruns += starts;
  b->blocks[b->nblocks++] = (struct wb_block){ lba, s, 0 };
  return true;
}

/* Step 1 and 2. */
static void
select_blocks (struct wb_batch *b, uint32_t max)
{
  struct hhc_volume *vol = b->vol;
  uint32_t cand[BATCH];
  uint32_t n = lru_oldest_dirty (&vol->lru, cand, HHC_MIN (max, BATCH));
  uint32_t per_chunk = vol->info.preferred_block > vol->bs
                           ? vol->info.preferred_block / vol->bs
                           : 1;

  per_chunk = HHC_MIN (per_chunk, 256u);
  for (uint32_t i = 0; i < n && b->nblocks < max && b->nruns < BATCH; i++)
    {
      uint64_t lba = slot_lba (&vol->idx.slots[cand[i]]);
      uint64_t c0 = lba / per_chunk * per_chunk;

      if (!take (b, lba, max))
        continue;
      /* The rest of the chunk, so extents fill whole objects. */
      for (uint64_t l = c0; l < c0 + per_chunk && b->nblocks < max; l++)
        if (l != lba)
          (void)take (b, l, max);
      /* The run that follows, so extents are as long as the data. */
      for (uint64_t l = HHC_MAX (lba + 1, c0 + per_chunk); take (b, l, max);
           l++)
        ;
    }
}

/* Release claims (step 6 for a block). */
static bool
finish_block (struct hhc_volume *vol, struct wb_block *blk, bool ok,
              uint64_t seq)
{
  struct hhc_stripe *st = index_stripe (&vol->idx, blk->lba);
  HHC_SCOPED_LOCK (&st->lock);
  uint32_t f = active_get (st, blk->slot);
  bool passdown = passdown_since (vol, seq, blk->lba);

  /* A client that wrote the block meanwhile set ACT_REDIRTY. */
  bool clean = ok && !(f & ACT_REDIRTY) && !passdown;

  if (clean)
    {
      cache_set_state (&vol->cache, blk->slot, SLOT_CLEAN);
      __atomic_fetch_sub (&vol->ndirty, 1, __ATOMIC_ACQ_REL);
      /* Written back and flushed: its log entries are void now (and
       * not before: docs/design.md §4.2, invariant 3).
       */
      if (vol->log)
        log_revoke (vol->log, blk->slot, blk->lba);
      lru_make_clean (&vol->lru, blk->slot);
    }
  else
    /* Rewritten, failed or overlapped by a trim/zero: to the tail, so
     * that the next batch takes other blocks first.
     */
    lru_requeue_dirty (&vol->lru, blk->slot);
  /* Our own BUSY was dropped after the SSD read: a BUSY here is a
   * client's (reading or writing the block now); it must keep it.
   */
  active_set (st, blk->slot, f & ~(ACT_WB | ACT_REDIRTY));
  return clean;
}

static void
drop_busy (struct hhc_volume *vol, struct wb_block *blk)
{
  struct hhc_stripe *st = index_stripe (&vol->idx, blk->lba);
  HHC_SCOPED_LOCK (&st->lock);

  active_set (st, blk->slot, active_get (st, blk->slot) & ~ACT_BUSY);
}

/* Step 4: cut the sorted blocks into extents. */
static void
make_extents (struct wb_batch *b)
{
  struct hhc_volume *vol = b->vol;
  /* Extents never cross the backend's preferred block size (an object
   * store's object); with none known, only max_n limits them.
   */
  uint64_t chunk = vol->info.preferred_block >= vol->bs
                       ? vol->info.preferred_block / vol->bs
                       : UINT64_MAX;
  uint32_t max_n = MAX_EXTENT / vol->bs;

  if (vol->info.max_request && vol->info.max_request / vol->bs < max_n)
    max_n = HHC_MAX (vol->info.max_request / vol->bs, 1u);
  for (uint32_t i = 0; i < b->nblocks; i++)
    {
      struct wb_extent *e = b->nextents ? &b->ext[b->nextents - 1] : NULL;
      uint64_t lba = b->blocks[i].lba;
      if (e && e->lba + e->n == lba && e->n < max_n
          && lba / chunk == e->lba / chunk)
        e->n++;
      else
        {
          e = &b->ext[b->nextents++];
          *e = (struct wb_extent){ lba, i, 1, 0 };
        }
      b->blocks[i].extent = b->nextents - 1;
    }
}

static void *
write_worker (void *arg)
{
  struct wb_batch *b = arg;
  struct hhc_volume *vol = b->vol;

  for (;;)
    {
      uint32_t i;
      hhc_lock (&b->lock);
      i = b->next++;
      hhc_unlock (&b->lock);
      if (i >= b->nextents)
        return NULL;
      struct wb_extent *e = &b->ext[i];
      uint64_t off = e->lba * vol->bs;
      uint64_t len = (uint64_t)e->n * vol->bs;
      if (off + len > vol->info.size)
        len = vol->info.size - off;
      e->err = vol->ops->pwrite (b->bctx, b->data + (size_t)e->first * vol->bs,
                                 len, off, false);
    }
}

/* Step 4 writes with nthreads threads (the caller is one of them). */
static void
write_extents (struct wb_batch *b, unsigned nthreads)
{
  pthread_t th[64];
  unsigned started = 0;

  nthreads = HHC_MIN (HHC_MIN (nthreads, 64u), b->nextents);
  for (unsigned i = 1; i < nthreads; i++)
    if (pthread_create (&th[started], NULL, write_worker, b) == 0)
      started++;
  write_worker (b);
  for (unsigned i = 0; i < started; i++)
    pthread_join (th[i], NULL);
}

/* Allocate a batch of at most max blocks (their data buffer is sized
 * when they are taken: read_blocks).
 */
static bool
batch_alloc (struct wb_batch *b, uint32_t max)
{
  b->blocks = malloc ((size_t)max * sizeof *b->blocks);
  b->ext = malloc ((size_t)max * sizeof *b->ext);
  if (!b->blocks || !b->ext)
    {
      free (b->blocks);
      free (b->ext);
      return false;
    }
  pthread_mutex_init (&b->lock, NULL);
  return true;
}

static void
batch_free (struct wb_batch *b)
{
  pthread_mutex_destroy (&b->lock);
  free (b->blocks);
  free (b->ext);
  free (b->data);
}

/* Step 3: read the claimed blocks from the SSD (in sorted order), then
 * drop our ACT_BUSY.  Returns the first error.
 */
static int
read_blocks (struct wb_batch *b)
{
  struct hhc_volume *vol = b->vol;
  int err = 0;

  b->data = hhc_alloc_aligned ((size_t)b->nblocks * vol->bs);
  for (uint32_t i = 0; i < b->nblocks; i++)
    {
      int r = b->data
                  ? cache_read_slot (&vol->cache, b->blocks[i].slot,
                                     b->data + (size_t)i * vol->bs, 0, vol->bs)
                  : ENOMEM;
      if (r && !err)
        err = r;
      drop_busy (vol, &b->blocks[i]);
    }
  return err;
}

/* Steps 4 and 5: write the extents, then flush the backend; returns
 * the flush's error.  Another backend flush that fails after these
 * writes may drop them, and then this flush succeeds with nothing left
 * to write: the blocks are clean only if none failed meanwhile
 * (bflush.c; the spin model's flaw 10).
 */
static int
write_and_flush (struct wb_batch *b, unsigned nthreads)
{
  struct hhc_volume *vol = b->vol;
  uint64_t nfail = bflush_failures (vol);
  uint64_t fw, fseq;
  int ferr;

  write_extents (b, nthreads);
  fw = __atomic_load_n (&vol->be_written, __ATOMIC_ACQUIRE);
  fseq = passdown_seq (vol); /* after fw: covers all it counts */
  ferr = bflush_run (vol, b->bctx);
  if (ferr == 0)
    {
      bflush_wait (vol);
      if (bflush_failures (vol) != nfail)
        ferr = EIO;
    }
  if (ferr == 0 && vol->info.multi_conn)
    {
      passdown_flushed (vol, fseq);
      bflush_done (vol, fw);
    }
  return ferr;
}

/* Step 6 for every block: clean if its extent was written and the
 * backend flush (ferr) succeeded.  Returns the blocks cleaned.
 */
static long
finish_blocks (struct wb_batch *b, int ferr, uint64_t seq)
{
  long cleaned = 0;

  for (uint32_t i = 0; i < b->nblocks; i++)
    {
      bool ok = ferr == 0 && b->ext[b->blocks[i].extent].err == 0;
      cleaned += finish_block (b->vol, &b->blocks[i], ok, seq);
    }
  return cleaned;
}

/* The batch's error: the first extent's that failed, else ferr. */
static int
batch_error (const struct wb_batch *b, int ferr)
{
  for (uint32_t i = 0; i < b->nextents; i++)
    if (b->ext[i].err)
      return b->ext[i].err;
  return ferr;
}

long
flusher_batch (struct hhc_volume *vol, void *bctx, unsigned nthreads)
{
  struct wb_batch b = { .vol = vol, .bctx = bctx };
  uint32_t max = HHC_MAX (BATCH_BYTES / vol->bs, 1u);
  uint64_t seq = passdown_seq (vol);
  long cleaned = 0;
  int err, ferr;

  /* A failed cache device may return stale data: write nothing back. */
  if (cache_is_failed (&vol->cache))
    return -EIO;
  if (!batch_alloc (&b, max))
    return -ENOMEM;
  select_blocks (&b, max);
  qsort (b.blocks, b.nblocks, sizeof *b.blocks, cmp_lba);
  err = read_blocks (&b);
  if (b.nblocks == 0)
    goto out;
  if (err)
    hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR,
             "write-back: reading the cache: %s", strerror (err));
  /* Clean blocks are trusted after a crash in wb (cache.h), so no
   * persisted clean entry may describe older data than the backend
   * gets now: commit first, making durable the frees of the slots that
   * copy-on-write replaced.
   */
  if (err == 0)
    err = cache_commit (&vol->cache);
  if (err)
    {
      (void)finish_blocks (&b, err, seq); /* none is clean */
      goto out;
    }
  make_extents (&b);
  ferr = write_and_flush (&b, nthreads);
  err = batch_error (&b, ferr);
  cleaned = finish_blocks (&b, ferr, seq);
  if (err)
    {
      stat_add (&vol->stats.writeback_errors, 1);
      stat_add (&vol->stats.backend_errors, 1);
      hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR,
               "write-back of %u blocks: backend: %s (blocks stay dirty)",
               b.nblocks, strerror (err));
    }
  stat_add (&vol->stats.writeback_blocks, cleaned);
out:
  batch_free (&b);
  vol_wake_waiters (vol);
  /* Progress counts: only a batch that cleaned nothing is a failure
   * (and backs the flusher off).
   */
  return err && cleaned == 0 ? -err : cleaned;
}

/* Write back everything: batches from the calling thread until no
 * dirty block is left (flusher.h).
 */
int
flusher_writeback_all (struct hhc_volume *vol, void *bctx)
{
  unsigned failures = 0;

  if (cache_is_failed (&vol->cache))
    return EIO;
  while (__atomic_load_n (&vol->ndirty, __ATOMIC_ACQUIRE) > 0)
    {
      long n = flusher_batch (vol, bctx, vol->conf.writeback_threads);
      if (n < 0 && ++failures >= 3)
        return (int)-n;
      if (n == 0)
        {
          /* Blocks busy elsewhere (the flusher thread): let it finish. */
          struct timespec ts = { 0, 1000000 };
          nanosleep (&ts, NULL);
        }
    }
  return 0;
}
