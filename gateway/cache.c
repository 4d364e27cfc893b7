/* SSD cache device I/O: see cache.h for the layout and invariants,
 * cache-format.h for the bytes of the superblock, state and metadata
 * pages (encoded, decoded and checked in cache-format.c).
 *
 * The superblock is written only by format (so it cannot be torn by a
 * crash in normal operation).  Format first zeroes the old superblock,
 * then writes metadata copy A (all free) and zeroes copy B, syncs,
 * writes the superblock and syncs: a crash during format leaves a
 * device with no valid superblock, never a mix.
 */
#include <config.h>

#include <endian.h>
#include <fcntl.h>
#include <unistd.h>

#include "cache.h"
#include "common.h"

#define COMMIT_CHUNK 256 /* pages snapshotted and written at a time */
#define LOAD_CHUNK 256   /* pages of each copy read at a time at load */

/* c's geometry from a decoded superblock. */
static void
take_super (struct hhc_cache *c, const struct cache_super *sb)
{
  c->block_size = sb->block_size;
  memcpy (c->uuid, sb->uuid, 16);
  memcpy (c->log_uuid, sb->log_uuid, 16);
  c->volume_size = sb->volume_size;
  c->nslots = sb->nslots;
  c->npages = sb->npages;
  c->meta_off = sb->meta_off;
  c->data_off = sb->data_off;
}

int
cache_read_super (struct hhc_cache *c, char *identity, size_t idlen)
{
  HHC_CLEANUP_FREE unsigned char *buf = hhc_alloc_aligned (CACHE_PAGE);
  struct cache_super sb;
  enum cache_super_fault f;
  int r;

  if (buf == NULL)
    return ENOMEM;
  r = dev_pread (c->dev, buf, CACHE_PAGE, 0);
  if (r)
    {
      hhc_msg (c->msgfn, HHC_MSG_ERROR, "%s: reading superblock: %s",
               c->dev->name, strerror (r));
      return r;
    }
  cache_super_decode (buf, &sb);
  f = cache_super_check (&sb, c->dev->size);
  if (f == CACHE_SUPER_NO_MAGIC)
    return ENOENT;
  if (f == CACHE_SUPER_BAD_CRC)
    {
      hhc_msg (c->msgfn, HHC_MSG_ERROR,
               "%s: cache superblock is corrupt (bad checksum)", c->dev->name);
      return EINVAL;
    }
  if (f == CACHE_SUPER_VERSION)
    {
      hhc_msg (c->msgfn, HHC_MSG_ERROR,
               "%s: cache format version %u is not supported (want %u)",
               c->dev->name, sb.version, CACHE_VERSION);
      return EINVAL;
    }
  take_super (c, &sb);
  if (f == CACHE_SUPER_GEOMETRY || sb.identity_len >= idlen)
    {
      hhc_msg (c->msgfn, HHC_MSG_ERROR,
               "%s: cache superblock has an impossible geometry "
               "(or the device shrank)",
               c->dev->name);
      return EINVAL;
    }
  memcpy (identity, sb.identity, sb.identity_len + 1);
  return 0;
}

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

static uint64_t
copy_offset (const struct hhc_cache *c, uint32_t p, int copy)
{
  return cache_page_offset (c->meta_off, c->npages, p, copy);
}

/* Write every page of one copy with free entries (format). */
static int
write_blank_copy (struct hhc_cache *c, int copy, bool zero)
{
  const uint32_t chunk = 256;
  HHC_CLEANUP_FREE unsigned char *buf
      = hhc_alloc_aligned ((size_t)chunk * CACHE_PAGE);

  if (buf == NULL)
    return ENOMEM;
  for (uint32_t p = 0; p < c->npages; p += chunk)
    {
      uint32_t n = HHC_MIN (chunk, c->npages - p);
      for (uint32_t i = 0; i < n; i++)
        {
          unsigned char *pg = buf + (size_t)i * CACHE_PAGE;
          if (zero)
            {
              memset (pg, 0, CACHE_PAGE);
              continue;
            }
          cache_page_init (pg, p + i, 1, c->uuid);
          cache_page_seal (pg);
        }
      int r = dev_pwrite (c->dev, buf, (size_t)n * CACHE_PAGE,
                          copy_offset (c, p, copy));
      if (r)
        return r;
    }
  return 0;
}

/* Write copy `copy` of the state page (cache-format.h). */
static int
write_state_copy (struct hhc_cache *c, int copy, enum cache_state state,
                  uint64_t seq)
{
  HHC_CLEANUP_FREE unsigned char *pg = hhc_alloc_aligned (CACHE_PAGE);
  struct cache_state_page sp = {
    .state = state,
    .seq = seq,
    .log_link = c->log_link,
  };

  if (pg == NULL)
    return ENOMEM;
  memcpy (sp.uuid8, c->uuid, 8);
  memcpy (sp.linked_log, c->linked_log, 16);
  cache_state_encode (&sp, pg);
  return dev_pwrite (c->dev, pg, CACHE_PAGE,
                     CACHE_STATE_OFF + (uint64_t)copy * CACHE_PAGE);
}

int
cache_read_state (struct hhc_cache *c, enum cache_state *state)
{
  HHC_CLEANUP_FREE unsigned char *pg = hhc_alloc_aligned (CACHE_PAGE);
  struct cache_state_page sp[2] = {
    { .state = CACHE_IN_USE, .log_link = CACHE_LOG_UNKNOWN },
    { .state = CACHE_IN_USE, .log_link = CACHE_LOG_UNKNOWN },
  };
  int r;

  if (pg == NULL)
    return ENOMEM;
  for (int i = 0; i < 2; i++)
    {
      r = dev_pread (c->dev, pg, CACHE_PAGE,
                     CACHE_STATE_OFF + (uint64_t)i * CACHE_PAGE);
      if (r)
        return r;
      if (!cache_state_decode (pg, c->uuid, &sp[i]))
        sp[i].seq = 0;
      c->state_seq[i] = sp[i].seq;
    }
  /* No valid copy: in use, clean blocks untrusted (the safe side). */
  int newer = c->state_seq[0] >= c->state_seq[1] ? 0 : 1;
  *state = sp[newer].state;
  c->log_link = sp[newer].log_link;
  memcpy (c->linked_log, sp[newer].linked_log, 16);
  return 0;
}

int
cache_write_state (struct hhc_cache *c, enum cache_state state)
{
  int copy = c->state_seq[0] <= c->state_seq[1] ? 0 : 1;
  uint64_t seq = HHC_MAX (c->state_seq[0], c->state_seq[1]) + 1;
  int r = write_state_copy (c, copy, state, seq);

  if (r == 0)
    r = dev_sync (c->dev);
  if (r == 0)
    c->state_seq[copy] = seq;
  else
    {
      /* As for a commit: a sync that failed may have dropped slot
       * writes too, and a later sync that succeeds does not bring them
       * back.  Every later commit (so every FLUSH) fails.
       */
      hhc_msg (c->msgfn, HHC_MSG_ERROR, "%s: writing the state page: %s",
               c->dev->name, strerror (r));
      if (r != ENOMEM)
        {
          HHC_SCOPED_LOCK (&c->gc_lock);
          if (c->failed == 0)
            __atomic_store_n (&c->failed, r, __ATOMIC_RELEASE);
        }
    }
  return r;
}

/* The superblock of c's geometry and identity into buf. */
static void
build_super (const struct hhc_cache *c, const char *identity, size_t idl,
             unsigned char *buf)
{
  struct cache_super sb = {
    .block_size = c->block_size,
    .volume_size = c->volume_size,
    .nslots = c->nslots,
    .npages = c->npages,
    .meta_off = c->meta_off,
    .data_off = c->data_off,
    .identity_len = idl,
  };

  memcpy (sb.uuid, c->uuid, 16);
  memcpy (sb.log_uuid, c->log_uuid, 16);
  memcpy (sb.identity, identity, idl);
  cache_super_encode (&sb, buf);
}

int
cache_format (struct hhc_cache *c, const char *identity)
{
  HHC_CLEANUP_FREE unsigned char *sb = hhc_alloc_aligned (CACHE_PAGE);
  size_t idl = strlen (identity);
  int r;

  if (sb == NULL)
    return ENOMEM;
  if (idl > CACHE_IDENTITY_MAX)
    idl = CACHE_IDENTITY_MAX;
  hhc_make_uuid (c->uuid);
  if ((r = dev_pwrite (c->dev, sb, CACHE_PAGE, 0)) != 0
      || (r = dev_sync (c->dev)) != 0
      || (r = write_blank_copy (c, 0, false)) != 0
      || (r = write_blank_copy (c, 1, true)) != 0
      || (r = write_state_copy (c, 0, CACHE_CLOSED, 1)) != 0
      || (r = dev_pwrite (c->dev, sb, CACHE_PAGE, CACHE_STATE_OFF + CACHE_PAGE))
             != 0
      || (r = dev_sync (c->dev)) != 0)
    goto fail;
  c->state_seq[0] = 1;
  c->state_seq[1] = 0;
  build_super (c, identity, idl, sb);
  if ((r = dev_pwrite (c->dev, sb, CACHE_PAGE, 0)) != 0
      || (r = dev_sync (c->dev)) != 0)
    goto fail;
  c->commit_seq = 1;
  return 0;

fail:
  hhc_msg (c->msgfn, HHC_MSG_ERROR, "%s: formatting the cache: %s",
           c->dev->name, strerror (r));
  return r;
}

int
cache_init_mem (struct hhc_cache *c, struct hhc_index *idx)
{
  c->idx = idx;
  c->npagelocks = HHC_MIN (c->npages, 4096u);
  c->page_locks = calloc (c->npagelocks, sizeof *c->page_locks);
  c->dirty_bits = calloc ((c->npages + 63) / 64, sizeof (uint64_t));
  c->copy_seq = calloc ((size_t)c->npages * 2, sizeof (uint64_t));
  /* A commit writes at most every page, COMMIT_CHUNK at a time. */
  c->commit_bufs = hhc_alloc_aligned (
      (size_t)HHC_MIN (c->npages, (uint32_t)COMMIT_CHUNK) * CACHE_PAGE);
  if (!c->page_locks || !c->dirty_bits || !c->copy_seq || !c->commit_bufs)
    {
      free (c->page_locks);
      free (c->dirty_bits);
      free (c->copy_seq);
      free (c->commit_bufs);
      c->commit_bufs = NULL;
      c->page_locks = NULL;
      return ENOMEM;
    }
  for (uint32_t i = 0; i < c->npagelocks; i++)
    pthread_mutex_init (&c->page_locks[i], NULL);
  pthread_mutex_init (&c->commit_lock, NULL);
  pthread_mutex_init (&c->gc_lock, NULL);
  pthread_cond_init (&c->gc_cond, NULL);
  pthread_mutex_init (&c->free_lock, NULL);
  c->free_head = c->pending_head = HHC_NIL;
  c->nfree = c->npending = 0;
  /* Format wrote copy A with sequence 1. */
  for (uint32_t p = 0; p < c->npages; p++)
    c->copy_seq[2 * p] = 1;
  return 0;
}

void
cache_free_mem (struct hhc_cache *c)
{
  if (c->page_locks == NULL)
    return;
  for (uint32_t i = 0; i < c->npagelocks; i++)
    pthread_mutex_destroy (&c->page_locks[i]);
  pthread_mutex_destroy (&c->commit_lock);
  pthread_mutex_destroy (&c->gc_lock);
  pthread_cond_destroy (&c->gc_cond);
  pthread_mutex_destroy (&c->free_lock);
  free (c->page_locks);
  free (c->dirty_bits);
  free (c->copy_seq);
  free (c->commit_bufs);
  c->page_locks = NULL;
}

/* Chain a slot onto a free list (free lock held). */
static void
push_free (struct hhc_cache *c, uint32_t *head, uint32_t slot)
{
  struct hhc_slot *s = &c->idx->slots[slot];
  uint32_t hw = __atomic_load_n (&s->hword, __ATOMIC_RELAXED);

  __atomic_store_n (&s->hword, (hw & ~HHC_LINK_MASK) | *head, __ATOMIC_RELEASE);
  *head = slot;
}

static uint32_t
pop_free (struct hhc_cache *c, uint32_t *head)
{
  uint32_t slot = *head;
  struct hhc_slot *s;
  uint32_t hw;

  if (slot == HHC_NIL)
    return HHC_NIL;
  s = &c->idx->slots[slot];
  hw = __atomic_load_n (&s->hword, __ATOMIC_RELAXED);
  *head = hw & HHC_LINK_MASK;
  __atomic_store_n (&s->hword, hw | HHC_LINK_MASK, __ATOMIC_RELEASE);
  return slot;
}

/* Pick the newest valid copy of page p from a (copy A) and b (copy B),
 * noting both copies' sequences; NULL (logged) if neither is valid.
 */
static const unsigned char *
pick_page (struct hhc_cache *c, uint32_t p, const unsigned char *a,
           const unsigned char *b)
{
  uint64_t sa = cache_page_check (a, p, c->uuid);
  uint64_t sb = cache_page_check (b, p, c->uuid);

  c->copy_seq[2 * p] = sa;
  c->copy_seq[2 * p + 1] = sb;
  if (sa == 0 && sb == 0)
    {
      hhc_msg (c->msgfn, HHC_MSG_ERROR,
               "%s: cache metadata page %u is corrupt in both copies",
               c->dev->name, p);
      return NULL;
    }
  return sb > sa ? b : a;
}

/* Map one used entry of page p: slot to lba (pseq: the commit
 * sequence of each page loaded so far).
 */
static void
load_entry (struct hhc_cache *c, uint32_t p, uint32_t slot, uint64_t lba,
            enum slot_state st, const uint64_t *pseq)
{
  /* An LBA in two slots: a crash in the middle of a commit.  The
   * entry from the newer commit wins (dirty over clean on a tie); the
   * loser becomes free.
   */
  uint32_t old = index_lookup (c->idx, lba);
  if (old != HHC_NIL)
    {
      uint64_t os = pseq[old / CACHE_EPP];
      enum slot_state ost = slot_state (&c->idx->slots[old]);
      bool mine = pseq[p] > os || (pseq[p] == os && st > ost);
      uint32_t loser = mine ? old : slot;
      if (mine)
        index_remove (c->idx, old);
      cache_set_state (c, loser, SLOT_FREE);
      if (!mine)
        return;
    }
  index_insert (c->idx, slot, lba);
  slot_set_state (&c->idx->slots[slot], st);
}

#define PF_DIST 8 /* entries ahead: bucket at 2*PF_DIST, chain at PF_DIST */

/* Map the used entries of page p (its newest valid copy in buf).  The
 * index's bucket heads and chain heads of the entries ahead are
 * prefetched: the entries hit the index at random, and overlapping
 * their cache misses is most of the speed of a big cache's start-up.
 * EINVAL (logged) on an entry beyond the volume of nblocks blocks.
 */
static int
load_entries (struct hhc_cache *c, uint32_t p, const unsigned char *buf,
              const uint64_t *pseq, uint64_t nblocks)
{
  uint64_t lba[CACHE_EPP];
  unsigned st[CACHE_EPP];
  uint32_t n = HHC_MIN ((uint32_t)CACHE_EPP, c->nslots - p * CACHE_EPP);

  for (uint32_t i = 0; i < n; i++)
    {
      cache_page_get (buf, i, &lba[i], &st[i]);
      if (st[i] != SLOT_FREE && lba[i] >= nblocks)
        {
          hhc_msg (c->msgfn, HHC_MSG_ERROR,
                   "%s: cache metadata page %u: block %" PRIu64
                   " is beyond the volume",
                   c->dev->name, p, lba[i]);
          return EINVAL;
        }
    }
  for (uint32_t i = 0; i < n; i++)
    {
      if (i + 2 * PF_DIST < n && st[i + 2 * PF_DIST] != SLOT_FREE)
        index_prefetch_bucket (c->idx, lba[i + 2 * PF_DIST]);
      if (i + PF_DIST < n && st[i + PF_DIST] != SLOT_FREE)
        index_prefetch_chain (c->idx, lba[i + PF_DIST]);
      if (st[i] != SLOT_FREE)
        load_entry (c, p, p * CACHE_EPP + i, lba[i], st[i], pseq);
    }
  return 0;
}

/* Load pages [p0, p0 + n): both copies read in one request each
 * (LOAD_CHUNK pages: the metadata is read nearly sequentially, in
 * large requests, as the start-up benchmark's limit reads it).
 */
static int
load_chunk (struct hhc_cache *c, uint32_t p0, uint32_t n, unsigned char *bufs,
            uint64_t *pseq, uint64_t nblocks)
{
  unsigned char *b = bufs + (size_t)LOAD_CHUNK * CACHE_PAGE;
  size_t len = (size_t)n * CACHE_PAGE;
  int r;

  if ((r = dev_pread (c->dev, bufs, len, copy_offset (c, p0, 0))) != 0
      || (r = dev_pread (c->dev, b, len, copy_offset (c, p0, 1))) != 0)
    return r;
  for (uint32_t i = 0; i < n; i++)
    {
      uint32_t p = p0 + i;
      size_t o = (size_t)i * CACHE_PAGE;
      const unsigned char *pg = pick_page (c, p, bufs + o, b + o);
      if (pg == NULL)
        return EINVAL;
      pseq[p] = HHC_MAX (c->copy_seq[2 * p], c->copy_seq[2 * p + 1]);
      c->commit_seq = HHC_MAX (c->commit_seq, pseq[p]);
      if ((r = load_entries (c, p, pg, pseq, nblocks)) != 0)
        return r;
    }
  return 0;
}

int
cache_load (struct hhc_cache *c,
            void (*found) (void *opaque, uint32_t slot, uint64_t lba,
                           enum slot_state st),
            void *opaque)
{
  HHC_CLEANUP_FREE unsigned char *bufs
      = hhc_alloc_aligned ((size_t)2 * LOAD_CHUNK * CACHE_PAGE);
  HHC_CLEANUP_FREE uint64_t *pseq
      = calloc ((size_t)c->npages, sizeof (uint64_t));
  uint64_t nblocks = (c->volume_size + c->block_size - 1) / c->block_size;
  int r;

  if (bufs == NULL || pseq == NULL)
    return ENOMEM;
  for (uint32_t p = 0; p < c->npages; p += LOAD_CHUNK)
    {
      uint32_t n = HHC_MIN ((uint32_t)LOAD_CHUNK, c->npages - p);
      if ((r = load_chunk (c, p, n, bufs, pseq, nblocks)) != 0)
        return r;
    }
  /* Report used slots, pool the free ones (highest number last, so
   * allocation starts at slot 0).
   */
  for (uint32_t s = c->nslots; s-- > 0;)
    {
      struct hhc_slot *sl = &c->idx->slots[s];
      enum slot_state st = slot_state (sl);
      if (st == SLOT_FREE)
        {
          push_free (c, &c->free_head, s);
          c->nfree++;
        }
      else
        found (opaque, s, slot_lba (sl), st);
    }
  return 0;
}

int
cache_read_slot (struct hhc_cache *c, uint32_t slot, void *buf, uint32_t off,
                 uint32_t len)
{
  return dev_pread (c->dev, buf, len, cache_slot_offset (c, slot) + off);
}

int
cache_write_slot (struct hhc_cache *c, uint32_t slot, const void *buf,
                  uint32_t off, uint32_t len)
{
  int r = dev_pwrite (c->dev, buf, len, cache_slot_offset (c, slot) + off);

  __atomic_store_n (&c->data_written, 1, __ATOMIC_RELEASE);
  return r;
}

void
cache_set_state (struct hhc_cache *c, uint32_t slot, enum slot_state st)
{
  uint32_t p = slot / CACHE_EPP;
  pthread_mutex_t *pl = &c->page_locks[p % c->npagelocks];

  hhc_lock (pl);
  slot_set_state (&c->idx->slots[slot], st);
  __atomic_fetch_or (&c->dirty_bits[p / 64], UINT64_C (1) << (p % 64),
                     __ATOMIC_ACQ_REL);
  hhc_unlock (pl);
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

uint32_t
cache_alloc_slot (struct hhc_cache *c)
{
  HHC_SCOPED_LOCK (&c->free_lock);
  uint32_t s = pop_free (c, &c->free_head);

  if (s != HHC_NIL)
    c->nfree--;
  return s;
}

void
cache_unalloc_slot (struct hhc_cache *c, uint32_t slot)
{
  HHC_SCOPED_LOCK (&c->free_lock);

  push_free (c, &c->free_head, slot);
  c->nfree++;
}

void
cache_release_slot (struct hhc_cache *c, uint32_t slot)
{
  HHC_SCOPED_LOCK (&c->free_lock);

  push_free (c, &c->pending_head, slot);
  c->npending++;
}

uint32_t
cache_nfree (struct hhc_cache *c)
{
  HHC_SCOPED_LOCK (&c->free_lock);

  return c->nfree;
}

uint32_t
cache_npending (struct hhc_cache *c)
{
  HHC_SCOPED_LOCK (&c->free_lock);

  return c->npending;
}
