/* SSD cache device I/O: see cache.h for the layout and invariants,
 * cache-format.h for the bytes of the superblock, state and metadata
 * pages (encoded, decoded and checked in cache-format.c).  The load at
 * open is in cache-load.c, the commit in cache-commit.c.
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
#include "cache_int.h"
#include "common.h"

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
    .log_gen = c->log_gen,
    .log_epoch = c->log_epoch,
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
  c->log_gen = sp[newer].log_gen;
  c->log_epoch = sp[newer].log_epoch;
  memcpy (c->linked_log, sp[newer].linked_log, 16);
  return 0;
}

int
cache_check_state_seq (struct hhc_cache *c)
{
  uint64_t seq = HHC_MAX (c->state_seq[0], c->state_seq[1]);

  if (seq < CACHE_SEQ_LOAD_MAX)
    return 0;
  hhc_msg (c->msgfn, HHC_MSG_ERROR,
           "%s: the state page's sequence %" PRIu64
           " is past 2^61 (corrupt): refusing the cache",
           c->dev->name, seq);
  return EINVAL;
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
      /* The first failure stays (no lock: a state page is written
       * before cache_alloc_mem too, by logpair_retire_before_format).
       */
      int none = 0;
      if (r != ENOMEM)
        __atomic_compare_exchange_n (&c->failed, &none, r, false,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
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
