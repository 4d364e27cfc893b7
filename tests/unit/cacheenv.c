/* The fixture of the cache tests (cacheenv.h). */
#include <config.h>

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cacheenv.h"
#include "common.h"
#include "vol.h"

/* Every block of the backend holds version 0 of its pattern. */
static void
fill_backend (struct membackend *mb)
{
  unsigned char *blk = malloc (BS);
  uint64_t n = membackend_size (mb) / BS;

  assert_non_null (blk);
  for (uint64_t l = 0; l < n; l++)
    {
      pattern_fill (blk, l, 0, SECTORS, 0);
      membackend_poke (mb, blk, BS, l * BS);
    }
  free (blk);
}

void
env_init (struct env *e, uint32_t nslots, uint64_t backend_size, bool pattern)
{
  memset (e, 0, sizeof *e);
  e->mb = membackend_new (backend_size);
  assert_non_null (e->mb);
  if (pattern)
    fill_backend (e->mb);
  assert_int_equal (
      crashdev_create (test_cache_dev_size (nslots, BS), &e->cdev), 0);
  e->hdev = hookdev_new (e->cdev);
  assert_non_null (e->hdev);
  e->info = membackend_info (e->mb, 0, "membackend:test");
  hhc_conf_init (&e->conf);
  e->pre.cache = e->hdev;
  e->conf.msgfn = test_msg;
  e->conf.mode = HHC_MODE_WB;
}

int
env_open (struct env *e)
{
  e->vol = NULL;
  return hhc_open (&e->conf, &e->pre, &membackend_ops, &e->info, &e->vol);
}

void
env_open_ok (struct env *e)
{
  assert_int_equal (env_open (e), 0);
  assert_non_null (e->vol);
}

/* Close; after a crash the final commit fails and that is expected. */
int
env_close (struct env *e)
{
  int r = hhc_close (e->vol);
  e->vol = NULL;
  return r;
}

void
env_free (struct env *e)
{
  if (e->vol)
    env_close (e);
  metacheck_free (e->mc);
  hookdev_destroy (e->hdev);
  crashdev_destroy (e->cdev);
  membackend_free (e->mb);
}

/* Power cut keeping the unsynced writes keep() chooses, then power on. */
void
env_crash_restart (struct env *e, bool (*keep) (size_t, void *))
{
  crashdev_crash (e->cdev, 1, keep, NULL);
  if (e->vol)
    env_close (e);
  crashdev_restart (e->cdev);
  if (e->mc)
    metacheck_reload (e->mc);
}

bool
keep_none (size_t i, void *opaque)
{
  return false;
}

/* ---- block helpers ---- */

void
write_v (struct env *e, uint64_t lba, uint64_t version)
{
  unsigned char blk[BS];

  pattern_fill (blk, lba, 0, SECTORS, version);
  assert_int_equal (hhc_write (e->vol, e->mb, blk, BS, lba * BS, false), 0);
}

/* Version of block lba as read through the volume; -1 if the sectors
 * disagree or are not a valid pattern of that block, -2 if all zero.
 */
int64_t
read_v (struct env *e, uint64_t lba)
{
  unsigned char blk[BS];
  int64_t v = -3;

  assert_int_equal (hhc_read (e->vol, e->mb, blk, BS, lba * BS), 0);
  for (uint32_t s = 0; s < SECTORS; s++)
    {
      uint64_t l, ver;
      uint32_t sec;
      int d = pattern_decode (blk + s * PAT_SECTOR, &l, &sec, &ver);
      int64_t sv = d == 0                          ? -2
                   : d < 0 || l != lba || sec != s ? -1
                                                   : (int64_t)ver;
      if (sv == -1 || (v != -3 && v != sv))
        return -1;
      v = sv;
    }
  return v;
}

/* State of block lba's slot (persisted-state word in RAM). */
enum slot_state
block_state (struct hhc_volume *vol, uint64_t lba)
{
  struct hhc_stripe *st = index_stripe (&vol->idx, lba);
  enum slot_state s = SLOT_FREE;
  uint32_t slot;

  pthread_mutex_lock (&st->lock);
  slot = index_lookup (&vol->idx, lba);
  if (slot != HHC_NIL)
    s = slot_state (&vol->idx.slots[slot]);
  pthread_mutex_unlock (&st->lock);
  return s;
}

unsigned char *
dev_snapshot (struct hhc_dev *d)
{
  unsigned char *p = malloc (d->size);

  assert_non_null (p);
  assert_int_equal (dev_pread (d, p, d->size, 0), 0);
  return p;
}

void
assert_dev_unchanged (struct env *e, const unsigned char *before)
{
  unsigned char *now = dev_snapshot (e->cdev);

  assert_int_equal (crashdev_pending (e->cdev), 0);
  assert_memory_equal (now, before, e->cdev->size);
  free (now);
}

/* Overwrite with garbage and make it durable. */
void
corrupt (struct hhc_dev *d, uint64_t off, size_t len, uint64_t seed)
{
  unsigned char *g = malloc (len);

  assert_non_null (g);
  for (size_t i = 0; i < len; i++)
    g[i] = test_rand (&seed);
  assert_int_equal (dev_pwrite (d, g, len, off), 0);
  assert_int_equal (dev_sync (d), 0);
  free (g);
}

uint64_t
get64le (const unsigned char *p)
{
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

uint32_t
get32le (const unsigned char *p)
{
  return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Offsets of both copies of metadata page p and their sequences. */
void
page_copies (struct hhc_dev *d, uint32_t p, uint64_t off[2], uint64_t seq[2])
{
  unsigned char sb[4096], pg[4096];
  uint32_t npages;
  uint64_t meta_off;

  assert_int_equal (dev_pread (d, sb, sizeof sb, 0), 0);
  npages = get32le (sb + 60);
  meta_off = get64le (sb + 64);
  assert_true (p < npages);
  for (int c = 0; c < 2; c++)
    {
      off[c] = meta_off + ((uint64_t)c * npages + p) * 4096;
      assert_int_equal (dev_pread (d, pg, sizeof pg, off[c]), 0);
      seq[c] = get32le (pg) == 0x504d4848u ? get64le (pg + 8) : 0;
    }
}
