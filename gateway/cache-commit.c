/* The cache's commit: snapshot the dirty metadata pages, sync, write
 * each over its older copy, then pool the slots whose "free" is now
 * durable (cache.h, cache_commit).
 */
#include <config.h>

#include "cache.h"
#include "cache_int.h"
#include "common.h"

/* Build page p of the metadata from the slots (page lock held, or no
 * concurrency).
 */
static void
build_page (struct hhc_cache *c, uint32_t p, uint64_t seq, unsigned char *buf)
{
  uint32_t first = p * CACHE_EPP;
  uint32_t n = HHC_MIN ((uint32_t)CACHE_EPP, c->nslots - first);

  cache_page_init (buf, p, seq, c->uuid);
  for (uint32_t i = 0; i < n; i++)
    {
      const struct hhc_slot *s = &c->idx->slots[first + i];
      cache_page_set (buf, i, slot_lba (s), slot_state (s));
    }
  cache_page_seal (buf);
}

/* Snapshot one dirty page into buf (clears its dirty bit). */
static void
snapshot_page (struct hhc_cache *c, uint32_t p, uint64_t seq,
               unsigned char *buf)
{
  pthread_mutex_t *pl = &c->page_locks[p % c->npagelocks];

  hhc_lock (pl);
  __atomic_fetch_and (&c->dirty_bits[p / 64], ~(UINT64_C (1) << (p % 64)),
                      __ATOMIC_ACQ_REL);
  build_page (c, p, seq, buf);
  hhc_unlock (pl);
}

HHC_VECTOR (u32_vec, uint32_t)

/* Put a taken pending list back (a commit that wrote nothing). */
static void
untake (struct hhc_cache *c, uint32_t taken, uint32_t ntaken)
{
  HHC_SCOPED_LOCK (&c->free_lock);

  while (taken != HHC_NIL)
    {
      uint32_t next = c->idx->slots[taken].hword & HHC_LINK_MASK;
      push_free (c, &c->pending_head, taken);
      taken = next;
    }
  c->npending += ntaken;
}

/* The dirty pages, in order. */
static int
dirty_pages (struct hhc_cache *c, struct u32_vec *pages)
{
  for (uint32_t w = 0; w < (c->npages + 63) / 64; w++)
    {
      uint64_t bits = __atomic_load_n (&c->dirty_bits[w], __ATOMIC_ACQUIRE);
      while (bits)
        {
          uint32_t p = w * 64 + __builtin_ctzll (bits);
          bits &= bits - 1;
          if (u32_vec_append (pages, p))
            return ENOMEM;
        }
    }
  return 0;
}

/* Snapshot, sync and write pages[0..n) (steps 2-4 for one chunk). */
static int
commit_chunk (struct hhc_cache *c, const uint32_t *pages, size_t n,
              uint64_t seq, unsigned char *bufs)
{
  int r;

  for (size_t i = 0; i < n; i++)
    snapshot_page (c, pages[i], seq, bufs + i * CACHE_PAGE);
  if ((r = dev_sync (c->dev)) != 0)
    return r;
  for (size_t i = 0; i < n; i++)
    {
      uint32_t p = pages[i];
      int copy = c->copy_seq[2 * p] <= c->copy_seq[2 * p + 1] ? 0 : 1;
      r = dev_pwrite (c->dev, bufs + i * CACHE_PAGE, CACHE_PAGE,
                      copy_offset (c, p, copy));
      if (r)
        return r;
      c->copy_seq[2 * p + copy] = seq;
    }
  return 0;
}

/* One commit round (commit lock held):
 * 1. take the pending-free list (their "free" is in the dirty pages);
 * 2. snapshot the dirty pages (at most COMMIT_CHUNK at a time);
 * 3. sync: every slot write that the snapshot's entries describe
 *    completed before the snapshot, so it is durable now;
 * 4. write each page over its older copy; repeat 2-4 per chunk; sync;
 * 5. the taken slots are durably free: they join the pool.
 * ENOMEM before anything was written leaves everything as it was.
 */
static int
do_commit (struct hhc_cache *c)
{
  struct u32_vec pages = { 0 };
  /* Allocated once: a fresh megabyte per commit costs page faults. */
  unsigned char *bufs = c->commit_bufs;
  uint32_t taken, ntaken;
  uint64_t seq = c->commit_seq + 1;
  bool wrote;
  int r = 0;

  if (bufs == NULL)
    return ENOMEM;
  hhc_lock (&c->free_lock);
  taken = c->pending_head;
  ntaken = c->npending;
  c->pending_head = HHC_NIL;
  c->npending = 0;
  hhc_unlock (&c->free_lock);

  if (dirty_pages (c, &pages) != 0)
    {
      untake (c, taken, ntaken);
      u32_vec_reset (&pages);
      return ENOMEM;
    }
  wrote = __atomic_exchange_n (&c->data_written, 0, __ATOMIC_ACQ_REL);
  if (pages.len == 0 && !wrote && ntaken == 0)
    goto out;
  if (pages.len == 0)
    r = dev_sync (c->dev);
  for (size_t i = 0; r == 0 && i < pages.len; i += COMMIT_CHUNK)
    r = commit_chunk (c, pages.ptr + i, HHC_MIN (pages.len - i, COMMIT_CHUNK),
                      seq, bufs);
  if (r == 0 && pages.len > 0 && (r = dev_sync (c->dev)) == 0)
    c->commit_seq = seq;
  if (r)
    {
      /* The device lost a write or a sync: pages may be stale on disk
       * and the taken slots are not known free.  Keep them out of
       * circulation; every later commit fails (see failed).
       */
      hhc_msg (c->msgfn, HHC_MSG_ERROR, "%s: cache metadata commit failed: %s",
               c->dev->name, strerror (r));
      goto out;
    }
  hhc_lock (&c->free_lock);
  while (taken != HHC_NIL)
    {
      uint32_t next = c->idx->slots[taken].hword & HHC_LINK_MASK;
      push_free (c, &c->free_head, taken);
      c->nfree++;
      taken = next;
    }
  hhc_unlock (&c->free_lock);
out:
  u32_vec_reset (&pages);
  return r;
}

int
cache_commit (struct hhc_cache *c)
{
  HHC_SCOPED_LOCK (&c->gc_lock);
  uint64_t mine = ++c->gc_requested;

  while (c->gc_done < mine && cache_is_failed (c) == 0)
    {
      if (c->gc_running)
        {
          pthread_cond_wait (&c->gc_cond, &c->gc_lock);
          continue;
        }
      uint64_t target = c->gc_requested;
      c->gc_running = true;
      hhc_unlock (&c->gc_lock);
      hhc_lock (&c->commit_lock);
      int r = do_commit (c);
      hhc_unlock (&c->commit_lock);
      hhc_lock (&c->gc_lock);
      c->gc_running = false;
      pthread_cond_broadcast (&c->gc_cond);
      if (r == ENOMEM) /* nothing was written: the others try again */
        return ENOMEM;
      c->gc_done = target;
      if (r)
        __atomic_store_n (&c->failed, r, __ATOMIC_RELEASE);
    }
  return cache_is_failed (c);
}
