/* The cache's load at open (gateway/cache-load.c) on metadata the core
 * wrote: more pages than one read chunk (so the reader thread and its
 * two buffers are used), clean, dirty and free slots mixed, a stale
 * copy, a corrupt newest copy, an LBA in two slots across chunks.  The
 * index, the free list, the LRU built by the callback, the dirty count
 * and the copies' sequences are compared with a model.  Read errors
 * and corrupt pages while the reader is ahead fail the load.
 */
#include <config.h>

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cache.h"
#include "common.h"
#include "index.h"
#include "lru.h"
#include "membackend.h"

#define BS 4096u
#define NPAGES 600u /* the load reads 256 pages of each copy at a time */
#define NS (NPAGES * CACHE_EPP)
#define VOLSIZE (UINT64_C (1) << 32) /* 2^20 blocks */
#define SLOT_A (10 * CACHE_EPP + 7)  /* page 10 (chunk 0) */
#define SLOT_B (400 * CACHE_EPP + 3) /* page 400 (chunk 1) */
#define SLOT_C (599 * CACHE_EPP + 1) /* page 599 (the last chunk) */

struct model {
  uint64_t lba[NS];
  unsigned st[NS]; /* enum slot_state */
};

struct fixture {
  char path[64];
  struct hhc_dev *dev;
  struct model m;
};

static uint64_t
lba_of (uint32_t s)
{
  return (s * UINT64_C (0x9E3779B1)) & ((VOLSIZE / BS) - 1);
}

/* A cache whose geometry is NS slots, in a sparse file. */
static void
geometry (struct hhc_cache *c, struct hhc_dev *dev)
{
  memset (c, 0, sizeof *c);
  c->dev = dev;
  c->msgfn = test_msg;
  c->block_size = BS;
  c->volume_size = VOLSIZE;
  c->nslots = NS;
  c->data_off = cache_layout (NS, BS, &c->npages, &c->meta_off);
}

static void
set (struct hhc_cache *c, struct model *m, uint32_t s, uint64_t lba,
     unsigned st)
{
  if (m->st[s] != SLOT_FREE)
    index_remove (c->idx, s);
  if (st != SLOT_FREE)
    index_insert (c->idx, s, lba);
  cache_set_state (c, s, st);
  m->st[s] = st;
  m->lba[s] = lba;
}

/* Round 1 (commit 2, copy B): a mix of free, clean and dirty slots.
 * Round 2 (commit 3, copy A of the pages it changes): slot A's block
 * moves to slot B, slot C turns dirty.  Then page 10's newest copy
 * (A) is corrupted: the load takes its copy B, where slot A still
 * holds the block, and resolves the duplicate for slot B (the newer
 * commit).  Page 300's copy A (stale: format's) is corrupted too.
 */
static int
setup (void **state)
{
  struct fixture *f = calloc (1, sizeof *f);
  struct hhc_cache c;
  struct hhc_index idx;
  uint64_t seed = 33;

  assert_non_null (f);
  strcpy (f->path, "/var/tmp/test-cache-load.XXXXXX");
  int fd = mkstemp (f->path);
  assert_true (fd >= 0);
  close (fd);
  unlink (f->path);
  geometry (&c, NULL);
  assert_int_equal (dev_open_path (f->path, c.data_off + (uint64_t)NS * BS,
                                   false, test_msg, &f->dev),
                    0);
  c.dev = f->dev;
  assert_int_equal (index_init (&idx, NS), 0);
  assert_int_equal (cache_init_mem (&c, &idx), 0);
  assert_int_equal (cache_format (&c, "test-cache-load"), 0);
  for (uint32_t s = 0; s < NS; s++)
    {
      unsigned r = test_rand (&seed) % 4; /* free, clean, dirty, dirty */
      if (s == SLOT_B || s == SLOT_C)
        r = s == SLOT_C ? 1 : 0;
      if (s == SLOT_A)
        r = 1;
      if (r)
        set (&c, &f->m, s, lba_of (s), r == 1 ? SLOT_CLEAN : SLOT_DIRTY);
    }
  assert_int_equal (cache_commit (&c), 0);
  uint64_t moved = f->m.lba[SLOT_A];
  set (&c, &f->m, SLOT_A, 0, SLOT_FREE);
  set (&c, &f->m, SLOT_B, moved, SLOT_DIRTY);
  set (&c, &f->m, SLOT_C, f->m.lba[SLOT_C], SLOT_DIRTY);
  assert_int_equal (cache_commit (&c), 0);
  assert_int_equal (c.copy_seq[2 * 10], 3);
  assert_int_equal (c.copy_seq[2 * 300], 1);
  static const unsigned char junk[CACHE_PAGE] = { 0x5a };
  assert_int_equal (dev_pwrite (f->dev, junk, CACHE_PAGE,
                                cache_page_offset (c.meta_off, NPAGES, 10, 0)),
                    0);
  assert_int_equal (dev_pwrite (f->dev, junk, CACHE_PAGE,
                                cache_page_offset (c.meta_off, NPAGES, 300, 0)),
                    0);
  assert_int_equal (dev_sync (f->dev), 0);
  cache_free_mem (&c);
  index_free (&idx);
  *state = f;
  return 0;
}

static int
teardown (void **state)
{
  struct fixture *f = *state;

  dev_close (f->dev);
  unlink (f->path);
  free (f);
  return 0;
}

struct found {
  struct hhc_lru *lru;
  uint32_t last; /* the slot reported before (descending order) */
  uint64_t nused, ndirty;
};

static void
found_slot (void *opaque, uint32_t slot, uint64_t lba, enum slot_state st)
{
  struct found *fd = opaque;

  assert_true (slot < fd->last);
  fd->last = slot;
  fd->nused++;
  if (st >= SLOT_DIRTY)
    fd->ndirty++;
  lru_insert_locked (fd->lru, slot, st >= SLOT_DIRTY);
}

/* Load f's cache into c, idx, lru; returns cache_load's result. */
static int
load (struct fixture *f, struct hhc_cache *c, struct hhc_index *idx,
      struct hhc_lru *lru, struct found *fd)
{
  char id[CACHE_IDENTITY_MAX + 1];

  geometry (c, f->dev);
  assert_int_equal (cache_read_super (c, id, sizeof id), 0);
  assert_int_equal (c->nslots, NS);
  assert_int_equal (c->npages, NPAGES);
  assert_int_equal (index_init (idx, NS), 0);
  lru_init (lru, idx->slots, 3);
  assert_int_equal (cache_init_mem (c, idx), 0);
  *fd = (struct found){ .lru = lru, .last = NS };
  return cache_load (c, found_slot, fd);
}

static void
unload (struct hhc_cache *c, struct hhc_index *idx, struct hhc_lru *lru)
{
  cache_free_mem (c);
  lru_destroy (lru);
  index_free (idx);
}

/* The model's first/last used slot in state st (HHC_NIL: none). */
static uint32_t
edge (const struct model *m, unsigned st, bool last)
{
  for (uint32_t i = 0; i < NS; i++)
    {
      uint32_t s = last ? NS - 1 - i : i;
      if (m->st[s] == st)
        return s;
    }
  return HHC_NIL;
}

static void
test_load_matches_model (void **state)
{
  struct fixture *f = *state;
  struct hhc_cache c;
  struct hhc_index idx;
  struct hhc_lru lru;
  struct found fd;
  uint64_t nused = 0, ndirty = 0, nclean = 0;

  assert_int_equal (load (f, &c, &idx, &lru, &fd), 0);
  for (uint32_t s = 0; s < NS; s++)
    {
      assert_int_equal (slot_state (&idx.slots[s]), f->m.st[s]);
      if (f->m.st[s] == SLOT_FREE)
        continue;
      nused++;
      ndirty += f->m.st[s] == SLOT_DIRTY;
      nclean += f->m.st[s] == SLOT_CLEAN;
      assert_int_equal (slot_lba (&idx.slots[s]), f->m.lba[s]);
      assert_int_equal (index_lookup (&idx, f->m.lba[s]), s);
    }
  assert_int_equal (fd.nused, nused);
  assert_int_equal (fd.ndirty, ndirty);
  /* The free list: every free slot, lowest first. */
  uint32_t n = 0, prev = 0;
  for (uint32_t s = c.free_head; s != HHC_NIL;
       s = idx.slots[s].hword & HHC_LINK_MASK)
    {
      assert_int_equal (f->m.st[s], SLOT_FREE);
      assert_true (n == 0 || s > prev);
      prev = s;
      n++;
    }
  assert_int_equal (n, NS - nused);
  assert_int_equal (c.nfree, NS - nused);
  /* The LRU: clean blocks in cold (lowest slot at the head), dirty
   * ones in the dirty list (lowest at the tail, the newest end).
   */
  assert_int_equal (lru_count (&lru, LRU_COLD), nclean);
  assert_int_equal (lru_count (&lru, LRU_DIRTY), ndirty);
  assert_int_equal (lru_count (&lru, LRU_HOT), 0);
  assert_int_equal (lru.head[LRU_COLD], edge (&f->m, SLOT_CLEAN, false));
  assert_int_equal (lru.tail[LRU_COLD], edge (&f->m, SLOT_CLEAN, true));
  assert_int_equal (lru.head[LRU_DIRTY], edge (&f->m, SLOT_DIRTY, true));
  assert_int_equal (lru.tail[LRU_DIRTY], edge (&f->m, SLOT_DIRTY, false));
  /* Copies: page 10's A is corrupt (B from commit 2 taken), page 300's
   * stale A is corrupt (B newest), page 400's A is the newest.  Only
   * page 10 (slot A lost its duplicate) needs a commit.
   */
  assert_int_equal (c.commit_seq, 3);
  assert_int_equal (c.copy_seq[2 * 10], 0);
  assert_int_equal (c.copy_seq[2 * 10 + 1], 2);
  assert_int_equal (c.copy_seq[2 * 300], 0);
  assert_int_equal (c.copy_seq[2 * 300 + 1], 2);
  assert_int_equal (c.copy_seq[2 * 400], 3);
  assert_int_equal (c.copy_seq[2 * 400 + 1], 2);
  assert_int_equal (c.copy_seq[2 * 599], 3);
  for (uint32_t p = 0; p < NPAGES; p++)
    assert_int_equal ((c.dirty_bits[p / 64] >> (p % 64)) & 1, p == 10);
  unload (&c, &idx, &lru);
}

/* ---- failures while the reader is ahead ---- */

static const struct hhc_dev_ops *real_ops;
static uint64_t fail_from; /* reads at or past this offset fail */

static int
failing_pread (struct hhc_dev *dev, void *buf, size_t len, uint64_t off)
{
  if (off + len > fail_from)
    return EIO;
  return real_ops->pread (dev, buf, len, off);
}

static void
test_read_error (void **state)
{
  struct fixture *f = *state;
  struct hhc_cache c;
  struct hhc_index idx;
  struct hhc_lru lru;
  struct found fd;
  struct hhc_dev_ops ops = *f->dev->ops;
  uint32_t np;
  uint64_t meta_off;

  cache_layout (NS, BS, &np, &meta_off);
  /* Copy B of chunk 1 (pages 256..511) fails, chunk 0 mapped first;
   * then copy B of the last chunk.
   */
  for (int i = 0; i < 2; i++)
    {
      fail_from = cache_page_offset (meta_off, np, i ? 599 : 300, 1);
      real_ops = f->dev->ops;
      ops.pread = failing_pread;
      f->dev->ops = &ops;
      assert_int_equal (load (f, &c, &idx, &lru, &fd), EIO);
      f->dev->ops = real_ops;
      assert_int_equal (fd.nused, 0);
      unload (&c, &idx, &lru);
    }
}

static void
test_corrupt_page_stops_load (void **state)
{
  struct fixture *f = *state;
  struct hhc_cache c;
  struct hhc_index idx;
  struct hhc_lru lru;
  struct found fd;
  static const unsigned char junk[CACHE_PAGE] = { 0xa5 };
  uint32_t np;
  uint64_t meta_off;

  cache_layout (NS, BS, &np, &meta_off);
  /* Page 5, in chunk 0: both copies corrupt (B was the good one). */
  for (int copy = 0; copy < 2; copy++)
    assert_int_equal (dev_pwrite (f->dev, junk, CACHE_PAGE,
                                  cache_page_offset (meta_off, np, 5, copy)),
                      0);
  assert_int_equal (load (f, &c, &idx, &lru, &fd), EINVAL);
  assert_int_equal (fd.nused, 0);
  unload (&c, &idx, &lru);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_load_matches_model),
    cmocka_unit_test (test_read_error),
    cmocka_unit_test (test_corrupt_page_stops_load),
  };

  return cmocka_run_group_tests (tests, setup, teardown);
}
