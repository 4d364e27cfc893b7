/* SSD cache format: see cache.h for the layout and invariants.
 *
 * Superblock (little-endian, 4 KiB):
 *   0   magic "HHCCACHE"        8   u32 version
 *   12  u32 block_size          16  uuid[16]
 *   32  log uuid[16] (zero: no log yet)
 *   48  u64 volume_size         56  u32 nslots
 *   60  u32 npages              64  u64 meta_off
 *   72  u64 data_off            80  u32 identity length
 *   84  identity (up to 2048 bytes)
 *   4092 u32 crc32c of bytes 0..4091
 *
 * State page (two copies, A at 4 KiB and B at 8 KiB; a write goes to
 * the older copy, the newer valid one counts):
 *   0 u32 magic "HHST"  4 u32 enum cache_state  8 u64 seq
 *   16 uuid[0..7]       24 u32 crc32c (computed with this field 0)
 *
 * Metadata page header (little-endian):
 *   0 u32 magic "HHMP"  4 u32 page number  8 u64 commit seq
 *   16 uuid[0..7]       24 u32 crc32c (computed with this field 0)
 *   28 u32 reserved     32 entries: u64 (lba << 2 | state)
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
#include "crc32c.h"

#define PAGE_MAGIC 0x504d4848u  /* "HHMP" */
#define COMMIT_CHUNK 256        /* pages snapshotted and written at a time */
#define STATE_MAGIC 0x54534848u /* "HHST" */
#define STATE_OFF CACHE_PAGE    /* two state pages after the superblock */
/* Commit and state sequences stay below this (2^62 commits take
 * millennia); a copy claiming more is corrupt: its successor's number
 * would wrap past 2^64 to "older than everything" and every later
 * commit would lose to it at load (found by fuzz-cache).
 */
#define MAX_SEQ (UINT64_C (1) << 62)

static uint64_t
layout_data_off (uint32_t nslots, uint32_t block_size, uint32_t *npages,
                 uint64_t *meta_off)
{
  uint32_t np = (nslots + CACHE_EPP - 1) / CACHE_EPP;
  uint64_t align = HHC_MAX (block_size, CACHE_PAGE);

  *npages = np;
  *meta_off = 3 * CACHE_PAGE;
  return HHC_ROUND_UP (*meta_off + 2 * (uint64_t)np * CACHE_PAGE, align);
}

int
cache_geometry (uint64_t dev_size, uint32_t block_size, uint64_t volume_size,
                uint32_t *nslots, uint32_t *npages, uint64_t *meta_off,
                uint64_t *data_off)
{
  uint64_t vblocks = (volume_size + block_size - 1) / block_size;
  uint64_t n;

  if (dev_size <= CACHE_PAGE)
    return ENOSPC;
  /* Each slot costs its block plus 16 bytes of metadata (two copies). */
  n = (dev_size - CACHE_PAGE) / (block_size + 16);
  n = HHC_MIN (n, (uint64_t)HHC_MAX_SLOTS);
  n = HHC_MIN (n, HHC_MAX (vblocks, (uint64_t)CACHE_MIN_SLOTS));
  while (n >= CACHE_MIN_SLOTS)
    {
      uint64_t d = layout_data_off (n, block_size, npages, meta_off);
      if (d + n * block_size <= dev_size)
        {
          *nslots = n;
          *data_off = d;
          return 0;
        }
      n--;
    }
  return ENOSPC;
}

int
cache_read_super (struct hhc_cache *c, char *identity, size_t idlen)
{
  HHC_CLEANUP_FREE unsigned char *sb = hhc_alloc_aligned (CACHE_PAGE);
  uint32_t idl, np;
  uint64_t mo, dof;
  int r;

  if (sb == NULL)
    return ENOMEM;
  r = dev_pread (c->dev, sb, CACHE_PAGE, 0);
  if (r)
    {
      hhc_log (c->log, HHC_LOG_ERROR, "%s: reading superblock: %s",
               c->dev->name, strerror (r));
      return r;
    }
  if (memcmp (sb, CACHE_MAGIC, 8) != 0)
    return ENOENT;
  if (crc32c (0, sb, 4092) != get32 (sb + 4092))
    {
      hhc_log (c->log, HHC_LOG_ERROR,
               "%s: cache superblock is corrupt (bad checksum)", c->dev->name);
      return EINVAL;
    }
  if (get32 (sb + 8) != CACHE_VERSION)
    {
      hhc_log (c->log, HHC_LOG_ERROR,
               "%s: cache format version %u is not supported (want %u)",
               c->dev->name, get32 (sb + 8), CACHE_VERSION);
      return EINVAL;
    }
  c->block_size = get32 (sb + 12);
  memcpy (c->uuid, sb + 16, 16);
  memcpy (c->log_uuid, sb + 32, 16);
  c->volume_size = get64 (sb + 48);
  c->nslots = get32 (sb + 56);
  c->npages = get32 (sb + 60);
  c->meta_off = get64 (sb + 64);
  c->data_off = get64 (sb + 72);
  idl = get32 (sb + 80);
  dof = layout_data_off (c->nslots, HHC_MAX (c->block_size, 1), &np, &mo);
  if (!HHC_IS_POW2 (c->block_size) || c->block_size < 512
      || c->block_size > 1048576 || c->nslots < CACHE_MIN_SLOTS
      || c->nslots > HHC_MAX_SLOTS || np != c->npages || mo != c->meta_off
      || dof != c->data_off || idl > CACHE_IDENTITY_MAX || idl >= idlen
      || c->data_off + (uint64_t)c->nslots * c->block_size > c->dev->size)
    {
      hhc_log (c->log, HHC_LOG_ERROR,
               "%s: cache superblock has an impossible geometry "
               "(or the device shrank)",
               c->dev->name);
      return EINVAL;
    }
  memcpy (identity, sb + 84, idl);
  identity[idl] = '\0';
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

  memset (buf, 0, CACHE_PAGE);
  put32 (buf, PAGE_MAGIC);
  put32 (buf + 4, p);
  put64 (buf + 8, seq);
  memcpy (buf + 16, c->uuid, 8);
  for (uint32_t i = 0; i < n; i++)
    {
      const struct hhc_slot *s = &c->idx->slots[first + i];
      enum slot_state st = slot_state (s);
      uint64_t e = st == SLOT_FREE ? 0 : (slot_lba (s) << 2 | st);
      put64 (buf + CACHE_PAGE_HDR + 8 * i, e);
    }
  put32 (buf + 24, crc32c (0, buf, CACHE_PAGE));
}

static uint64_t
copy_offset (const struct hhc_cache *c, uint32_t p, int copy)
{
  return c->meta_off + ((uint64_t)copy * c->npages + p) * CACHE_PAGE;
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
          memset (pg, 0, CACHE_PAGE);
          if (zero)
            continue;
          put32 (pg, PAGE_MAGIC);
          put32 (pg + 4, p + i);
          put64 (pg + 8, 1);
          memcpy (pg + 16, c->uuid, 8);
          put32 (pg + 24, crc32c (0, pg, CACHE_PAGE));
        }
      int r = dev_pwrite (c->dev, buf, (size_t)n * CACHE_PAGE,
                          copy_offset (c, p, copy));
      if (r)
        return r;
    }
  return 0;
}

/* Write copy `copy` of the state page: u32 magic, u32 state, u64
 * sequence, 8 bytes of the cache UUID, u32 crc32c (of the page with
 * this field 0), u32 log link (enum cache_log_link), the paired log's
 * UUID (16 bytes; both 0 in pages of earlier builds).
 */
static int
write_state_copy (struct hhc_cache *c, int copy, enum cache_state state,
                  uint64_t seq)
{
  HHC_CLEANUP_FREE unsigned char *pg = hhc_alloc_aligned (CACHE_PAGE);

  if (pg == NULL)
    return ENOMEM;
  put32 (pg, STATE_MAGIC);
  put32 (pg + 4, state);
  put64 (pg + 8, seq);
  memcpy (pg + 16, c->uuid, 8);
  put32 (pg + 28, c->log_link);
  memcpy (pg + 32, c->linked_log, 16);
  put32 (pg + 24, crc32c (0, pg, CACHE_PAGE));
  return dev_pwrite (c->dev, pg, CACHE_PAGE,
                     STATE_OFF + (uint64_t)copy * CACHE_PAGE);
}

int
cache_read_state (struct hhc_cache *c, enum cache_state *state)
{
  HHC_CLEANUP_FREE unsigned char *pg = hhc_alloc_aligned (CACHE_PAGE);
  uint32_t st[2] = { CACHE_IN_USE, CACHE_IN_USE };
  uint32_t link[2] = { CACHE_LOG_UNKNOWN, CACHE_LOG_UNKNOWN };
  uint8_t linked[2][16] = { { 0 } };
  int r;

  if (pg == NULL)
    return ENOMEM;
  for (int i = 0; i < 2; i++)
    {
      r = dev_pread (c->dev, pg, CACHE_PAGE,
                     STATE_OFF + (uint64_t)i * CACHE_PAGE);
      if (r)
        return r;
      uint32_t crc = get32 (pg + 24);
      put32 (pg + 24, 0);
      c->state_seq[i] = 0;
      if (get32 (pg) == STATE_MAGIC && memcmp (pg + 16, c->uuid, 8) == 0
          && crc32c (0, pg, CACHE_PAGE) == crc && get64 (pg + 8) < MAX_SEQ)
        {
          c->state_seq[i] = get64 (pg + 8);
          st[i] = get32 (pg + 4);
          if (st[i] > CACHE_IN_USE_HHC)
            st[i] = CACHE_IN_USE; /* unknown: the safe side */
          link[i] = get32 (pg + 28);
          if (link[i] > CACHE_LOG_RETIRED)
            link[i] = CACHE_LOG_PAIRED; /* unknown: the safe side */
          memcpy (linked[i], pg + 32, 16);
        }
    }
  /* No valid copy: in use, clean blocks untrusted (the safe side). */
  *state = c->state_seq[0] >= c->state_seq[1] ? st[0] : st[1];
  int newer = c->state_seq[0] >= c->state_seq[1] ? 0 : 1;
  c->log_link = link[newer];
  memcpy (c->linked_log, linked[newer], 16);
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
      hhc_log (c->log, HHC_LOG_ERROR, "%s: writing the state page: %s",
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
      || (r = dev_pwrite (c->dev, sb, CACHE_PAGE, STATE_OFF + CACHE_PAGE)) != 0
      || (r = dev_sync (c->dev)) != 0)
    goto fail;
  c->state_seq[0] = 1;
  c->state_seq[1] = 0;
  memcpy (sb, CACHE_MAGIC, 8);
  put32 (sb + 8, CACHE_VERSION);
  put32 (sb + 12, c->block_size);
  memcpy (sb + 16, c->uuid, 16);
  memcpy (sb + 32, c->log_uuid, 16);
  put64 (sb + 48, c->volume_size);
  put32 (sb + 56, c->nslots);
  put32 (sb + 60, c->npages);
  put64 (sb + 64, c->meta_off);
  put64 (sb + 72, c->data_off);
  put32 (sb + 80, idl);
  memcpy (sb + 84, identity, idl);
  put32 (sb + 4092, crc32c (0, sb, 4092));
  if ((r = dev_pwrite (c->dev, sb, CACHE_PAGE, 0)) != 0
      || (r = dev_sync (c->dev)) != 0)
    goto fail;
  c->commit_seq = 1;
  return 0;

fail:
  hhc_log (c->log, HHC_LOG_ERROR, "%s: formatting the cache: %s", c->dev->name,
           strerror (r));
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

/* Validate one copy of page p; returns its sequence or 0 if invalid. */
static uint64_t
page_valid (struct hhc_cache *c, uint32_t p, unsigned char *buf)
{
  uint32_t crc = get32 (buf + 24);

  if (get32 (buf) != PAGE_MAGIC || get32 (buf + 4) != p
      || memcmp (buf + 16, c->uuid, 8) != 0)
    return 0;
  put32 (buf + 24, 0);
  if (crc32c (0, buf, CACHE_PAGE) != crc)
    return 0;
  put32 (buf + 24, crc);
  return get64 (buf + 8) < MAX_SEQ ? get64 (buf + 8) : 0;
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

/* The newest valid copy of page p into buf; EINVAL if neither is. */
static int
load_page (struct hhc_cache *c, uint32_t p, unsigned char *buf,
           unsigned char *other)
{
  uint64_t sa, sb;
  int r;

  if ((r = dev_pread (c->dev, buf, CACHE_PAGE, copy_offset (c, p, 0))) != 0
      || (r = dev_pread (c->dev, other, CACHE_PAGE, copy_offset (c, p, 1)))
             != 0)
    return r;
  sa = page_valid (c, p, buf);
  sb = page_valid (c, p, other);
  c->copy_seq[2 * p] = sa;
  c->copy_seq[2 * p + 1] = sb;
  if (sa == 0 && sb == 0)
    {
      hhc_log (c->log, HHC_LOG_ERROR,
               "%s: cache metadata page %u is corrupt in both copies",
               c->dev->name, p);
      return EINVAL;
    }
  if (sb > sa)
    memcpy (buf, other, CACHE_PAGE);
  return 0;
}

int
cache_load (struct hhc_cache *c,
            void (*found) (void *opaque, uint32_t slot, uint64_t lba,
                           enum slot_state st),
            void *opaque)
{
  HHC_CLEANUP_FREE unsigned char *buf = hhc_alloc_aligned (2 * CACHE_PAGE);
  HHC_CLEANUP_FREE uint64_t *pseq
      = calloc ((size_t)c->npages, sizeof (uint64_t));
  uint64_t nblocks = (c->volume_size + c->block_size - 1) / c->block_size;
  int r;

  if (buf == NULL || pseq == NULL)
    return ENOMEM;
  for (uint32_t p = 0; p < c->npages; p++)
    {
      if ((r = load_page (c, p, buf, buf + CACHE_PAGE)) != 0)
        return r;
      pseq[p] = get64 (buf + 8);
      c->commit_seq = HHC_MAX (c->commit_seq, pseq[p]);
      for (uint32_t i = 0; i < CACHE_EPP; i++)
        {
          uint32_t slot = p * CACHE_EPP + i;
          uint64_t e = get64 (buf + CACHE_PAGE_HDR + 8 * i);
          enum slot_state st = e & 3;
          uint64_t lba = e >> 2;
          if (slot >= c->nslots)
            break;
          if (st == SLOT_FREE)
            continue;
          if (lba >= nblocks)
            {
              hhc_log (c->log, HHC_LOG_ERROR,
                       "%s: cache metadata page %u: block %" PRIu64
                       " is beyond the volume",
                       c->dev->name, p, lba);
              return EINVAL;
            }
          /* An LBA in two slots: a crash in the middle of a commit.
           * The entry from the newer commit wins (dirty over clean on
           * a tie); the loser becomes free.
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
                continue;
            }
          index_insert (c->idx, slot, lba);
          slot_set_state (&c->idx->slots[slot], st);
        }
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
      hhc_log (c->log, HHC_LOG_ERROR, "%s: cache metadata commit failed: %s",
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
