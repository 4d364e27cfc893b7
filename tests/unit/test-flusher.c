/* Write-back (docs/design.md §6): watermarks, drain, the generation
 * race, backend errors, the stall at dirty-max, coalescing.
 *
 * Where determinism matters the tests call flusher_batch or hhc_drain
 * themselves instead of running the flusher thread; where they run it
 * (hhc_start), they wait on the backend's counters (condition
 * variables with a timeout), never on sleeps.
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

#include <cmocka.h>

#include "common.h"
#include "devcrash.h"
#include "flusher.h"
#include "membackend.h"
#include "preopen.h"
#include "reclaim.h"
#include "vol.h"

#define BS 4096u
#define SECTORS (BS / PAT_SECTOR)
#define TIMEOUT_MS 30000

struct env {
  struct membackend *mb;
  struct hhc_dev *cdev, *hdev;
  struct hhc_backend_info info;
  struct hhc_conf conf;
  struct hhc_preopened pre; /* devices given to hhc_open */
  struct hhc_volume *vol;
};

static void
env_init (struct env *e, uint32_t nslots, uint64_t backend_size,
          uint32_t preferred)
{
  memset (e, 0, sizeof *e);
  e->mb = membackend_new (backend_size);
  assert_non_null (e->mb);
  assert_int_equal (
      crashdev_create (test_cache_dev_size (nslots, BS), &e->cdev), 0);
  e->hdev = hookdev_new (e->cdev);
  e->info = membackend_info (e->mb, preferred, "membackend:flusher");
  hhc_conf_init (&e->conf);
  e->pre.cache = e->hdev;
  e->conf.msgfn = test_msg;
}

static void
env_open (struct env *e)
{
  assert_int_equal (
      hhc_open (&e->conf, &e->pre, &membackend_ops, &e->info, &e->vol), 0);
}

static void
env_free (struct env *e)
{
  if (e->vol)
    hhc_close (e->vol);
  hookdev_destroy (e->hdev);
  crashdev_destroy (e->cdev);
  membackend_free (e->mb);
}

static void
write_v (struct env *e, uint64_t lba, uint64_t version)
{
  unsigned char blk[BS];

  pattern_fill (blk, lba, 0, SECTORS, version);
  assert_int_equal (hhc_write (e->vol, e->mb, blk, BS, lba * BS, false), 0);
}

static bool
backend_has (struct env *e, bool durable, uint64_t lba, uint64_t version)
{
  unsigned char blk[BS];

  pattern_fill (blk, lba, 0, SECTORS, version);
  return membackend_cmp (e->mb, durable, blk, BS, lba * BS) == 0;
}

static bool
reads_v (struct env *e, uint64_t lba, uint64_t version)
{
  unsigned char blk[BS], want[BS];

  pattern_fill (want, lba, 0, SECTORS, version);
  assert_int_equal (hhc_read (e->vol, e->mb, blk, BS, lba * BS), 0);
  return memcmp (blk, want, BS) == 0;
}

static uint64_t
dirty (struct env *e)
{
  struct hhc_counts c;
  hhc_get_counts (e->vol, &c);
  return c.dirty;
}

static uint32_t
slot_of (struct hhc_volume *vol, uint64_t lba)
{
  struct hhc_stripe *st = index_stripe (&vol->idx, lba);
  uint32_t s;

  pthread_mutex_lock (&st->lock);
  s = index_lookup (&vol->idx, lba);
  pthread_mutex_unlock (&st->lock);
  return s;
}

static uint32_t
active_of (struct hhc_volume *vol, uint64_t lba)
{
  struct hhc_stripe *st = index_stripe (&vol->idx, lba);
  uint32_t f = 0, s;

  pthread_mutex_lock (&st->lock);
  s = index_lookup (&vol->idx, lba);
  if (s != HHC_NIL)
    f = active_get (st, s);
  pthread_mutex_unlock (&st->lock);
  return f;
}

/* ---- a gate: a hook blocks in it until the test opens it ---- */

struct gate {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool armed;   /* the next matching call blocks */
  bool entered; /* a call is blocked in the gate */
  bool open;
  uint64_t match_lo, match_hi; /* byte range a call must touch */
};

static void
gate_init (struct gate *g)
{
  memset (g, 0, sizeof *g);
  pthread_mutex_init (&g->lock, NULL);
  pthread_cond_init (&g->cond, NULL);
}

static void
gate_destroy (struct gate *g)
{
  pthread_mutex_destroy (&g->lock);
  pthread_cond_destroy (&g->cond);
}

static void
gate_arm (struct gate *g, uint64_t lo, uint64_t hi)
{
  pthread_mutex_lock (&g->lock);
  g->armed = true;
  g->entered = g->open = false;
  g->match_lo = lo;
  g->match_hi = hi;
  pthread_mutex_unlock (&g->lock);
}

/* In a hook: block if armed and [off, off+len) touches the range. */
static void
gate_pass (struct gate *g, uint64_t off, uint64_t len)
{
  pthread_mutex_lock (&g->lock);
  if (g->armed && off < g->match_hi && off + len > g->match_lo)
    {
      g->armed = false;
      g->entered = true;
      pthread_cond_broadcast (&g->cond);
      while (!g->open)
        pthread_cond_wait (&g->cond, &g->lock);
    }
  pthread_mutex_unlock (&g->lock);
}

/* Wait until a call is blocked in the gate; false on timeout. */
static bool
gate_wait_entered (struct gate *g)
{
  struct timespec ts;
  bool ok = true;

  test_deadline (&ts, TIMEOUT_MS);
  pthread_mutex_lock (&g->lock);
  while (!g->entered && ok)
    ok = pthread_cond_timedwait (&g->cond, &g->lock, &ts) != ETIMEDOUT
         || g->entered;
  pthread_mutex_unlock (&g->lock);
  return ok;
}

static void
gate_open (struct gate *g)
{
  pthread_mutex_lock (&g->lock);
  g->open = true;
  g->armed = false;
  pthread_cond_broadcast (&g->cond);
  pthread_mutex_unlock (&g->lock);
}

static void
gate_backend_hook (void *opaque, uint64_t offset, uint32_t count)
{
  gate_pass (opaque, offset, count);
}

static int
gate_dev_hook (void *opaque, const void *buf, size_t len, uint64_t offset)
{
  gate_pass (opaque, offset, len);
  return 0;
}

/* ---- threads ---- */

struct batch_arg {
  struct hhc_volume *vol;
  struct membackend *mb;
  long result;
};

static void *
batch_thread (void *arg)
{
  struct batch_arg *a = arg;

  a->result = flusher_batch (a->vol, a->mb, 1);
  return NULL;
}

struct write_arg {
  struct env *e;
  uint64_t lba, version;
  int result;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool started, done;
};

static void
write_arg_init (struct write_arg *w, struct env *e, uint64_t lba,
                uint64_t version)
{
  memset (w, 0, sizeof *w);
  w->e = e;
  w->lba = lba;
  w->version = version;
  pthread_mutex_init (&w->lock, NULL);
  pthread_cond_init (&w->cond, NULL);
}

static void *
write_thread (void *arg)
{
  struct write_arg *w = arg;
  unsigned char blk[BS];
  int r;

  pattern_fill (blk, w->lba, 0, SECTORS, w->version);
  pthread_mutex_lock (&w->lock);
  w->started = true;
  pthread_cond_broadcast (&w->cond);
  pthread_mutex_unlock (&w->lock);
  r = hhc_write (w->e->vol, w->e->mb, blk, BS, w->lba * BS, false);
  pthread_mutex_lock (&w->lock);
  w->result = r;
  w->done = true;
  pthread_cond_broadcast (&w->cond);
  pthread_mutex_unlock (&w->lock);
  return NULL;
}

static bool
write_done (struct write_arg *w)
{
  bool d;
  pthread_mutex_lock (&w->lock);
  d = w->done;
  pthread_mutex_unlock (&w->lock);
  return d;
}

/* ---- watermarks ---- */

static void
test_watermarks (void **state)
{
  struct env e;

  env_init (&e, 64, 1 << 20, 0);
  env_open (&e);
  assert_int_equal (e.vol->dirty_low, 12);  /* 20% of 64 */
  assert_int_equal (e.vol->dirty_high, 38); /* 60% */
  assert_int_equal (e.vol->dirty_max, 60);  /* 95% */
  hhc_close (e.vol);
  e.vol = NULL;
  e.conf.dirty_low = 10;
  e.conf.dirty_high = 50;
  e.conf.dirty_max = 90;
  env_open (&e);
  assert_int_equal (e.vol->dirty_low, 6);
  assert_int_equal (e.vol->dirty_high, 32);
  assert_int_equal (e.vol->dirty_max, 57);
  hhc_close (e.vol);
  e.vol = NULL;
  /* Inconsistent watermarks are refused. */
  e.conf.dirty_low = 70;
  assert_int_equal (
      hhc_open (&e.conf, &e.pre, &membackend_ops, &e.info, &e.vol), EINVAL);
  e.conf.dirty_low = 20;
  e.conf.dirty_max = 101;
  assert_int_equal (
      hhc_open (&e.conf, &e.pre, &membackend_ops, &e.info, &e.vol), EINVAL);
  e.vol = NULL;
  env_free (&e);
}

/* Below dirty-low the flusher writes back only once the client has
 * been idle (1 s): every write-back it starts must see an idle client.
 */
struct idle_probe {
  struct hhc_volume *vol;
  uint64_t min_idle_ns; /* smallest idle time seen at a write-back */
  uint64_t calls;
};

static void
idle_hook (void *opaque, uint64_t offset, uint32_t count)
{
  struct idle_probe *p = opaque;
  uint64_t last = __atomic_load_n (&p->vol->last_io_ns, __ATOMIC_RELAXED);
  uint64_t idle = hhc_now_ns () - last;

  if (p->calls++ == 0 || idle < p->min_idle_ns)
    p->min_idle_ns = idle;
}

static void
test_idle_writeback_below_low (void **state)
{
  struct env e;
  struct idle_probe p = { NULL, 0, 0 };

  env_init (&e, 64, 1 << 20, 0);
  env_open (&e);
  p.vol = e.vol;
  e.conf.writeback_threads = 1;
  e.vol->conf.writeback_threads = 1; /* the hook runs in one thread */
  membackend_set_hook (e.mb, MB_OP_WRITE, idle_hook, &p);
  assert_int_equal (hhc_start (e.vol, e.mb), 0);
  for (uint64_t l = 0; l < 3; l++) /* 3 < dirty-low (12) */
    write_v (&e, l, 1);
  assert_true (membackend_wait_count (e.mb, MB_WRITES, 1, TIMEOUT_MS));
  assert_true (membackend_wait_count (e.mb, MB_FLUSHES, 1, TIMEOUT_MS));
  hhc_close (e.vol);
  e.vol = NULL;
  membackend_set_hook (e.mb, MB_OP_WRITE, NULL, NULL);
  assert_true (p.calls >= 1);
  /* The core waits for 1 s of idleness; any real wait (not the 20-100
   * ms pace of an active flusher) shows the rule is kept.
   */
  if (p.min_idle_ns < UINT64_C (200000000))
    fail_msg ("below dirty-low, write-back started after only %llu ms of "
              "client idleness",
              (unsigned long long)(p.min_idle_ns / 1000000));
  for (uint64_t l = 0; l < 3; l++)
    assert_true (backend_has (&e, true, l, 1));
  env_free (&e);
}

/* Above dirty-low the flusher writes back without waiting for idle
 * (the test does not measure when; it only waits for it).
 */
static void
test_writeback_above_low (void **state)
{
  struct env e;

  env_init (&e, 64, 1 << 20, 0);
  env_open (&e);
  assert_int_equal (hhc_start (e.vol, e.mb), 0);
  for (uint64_t l = 0; l < 40; l++) /* above dirty-high (38) */
    write_v (&e, l, 1);
  assert_true (membackend_wait_count (e.mb, MB_FLUSHES, 1, TIMEOUT_MS));
  assert_int_equal (hhc_drain (e.vol, e.mb), 0);
  assert_int_equal (dirty (&e), 0);
  for (uint64_t l = 0; l < 40; l++)
    assert_true (backend_has (&e, true, l, 1));
  env_free (&e);
}

/* ---- drain ---- */

static void
test_drain (void **state)
{
  struct env e;
  const uint64_t size = 1 << 20;
  unsigned char *shadow = calloc (1, size), *got = malloc (size);
  unsigned char buf[3 * BS];
  uint64_t s = 5;
  struct hhc_counts c;

  assert_non_null (shadow);
  assert_non_null (got);
  env_init (&e, 128, size, 0);
  env_open (&e);
  for (int i = 0; i < 100; i++)
    {
      uint64_t off = test_rand_below (&s, 120) * BS + test_rand_below (&s, BS);
      uint32_t len = 1 + test_rand_below (&s, sizeof buf);
      for (uint32_t j = 0; j < len; j++)
        buf[j] = test_rand (&s);
      assert_int_equal (hhc_write (e.vol, e.mb, buf, len, off, false), 0);
      memcpy (shadow + off, buf, len);
    }
  assert_true (dirty (&e) > 0);
  assert_int_equal (hhc_drain (e.vol, e.mb), 0);
  hhc_get_counts (e.vol, &c);
  assert_int_equal (c.dirty, 0);
  assert_true (c.writeback_blocks > 0);
  membackend_peek (e.mb, true, got, size, 0);
  assert_memory_equal (got, shadow, size);
  /* Draining a clean cache is a no-op. */
  membackend_reset_counts (e.mb);
  assert_int_equal (hhc_drain (e.vol, e.mb), 0);
  assert_int_equal (membackend_count (e.mb, MB_WRITES), 0);
  free (shadow);
  free (got);
  env_free (&e);
}

/* hhccore.h: drain writes back every dirty block "and flushes the
 * backend" (what hhcctl drain promises: afterwards the backend alone
 * holds the volume durably).  A zero passed down to the backend and
 * not flushed yet must be durable after a drain too, even when no
 * block was dirty.
 */
static void
test_drain_flushes_backend (void **state)
{
  struct env e;
  unsigned char blk[BS], zero[BS];
  bool durable;

  memset (zero, 0, sizeof zero);
  env_init (&e, 64, 1 << 20, 0);
  pattern_fill (blk, 2, 0, SECTORS, 0);
  membackend_poke (e.mb, blk, BS, 2 * BS);
  env_open (&e);
  assert_int_equal (hhc_zero (e.vol, e.mb, BS, 2 * BS, false), 0);
  assert_int_equal (dirty (&e), 0);
  assert_int_equal (hhc_drain (e.vol, e.mb), 0);
  durable = membackend_cmp (e.mb, true, zero, BS, 2 * BS) == 0;
  env_free (&e);
  if (!durable)
    fail_msg ("hhc_drain returned with a zeroed block not flushed to the "
              "backend (no dirty blocks, so no backend flush)");
}

/* In pt and wt modes, hhc_start first writes back what an earlier
 * write-back run left dirty.
 */
static void
test_start_drains_in_wt (void **state)
{
  struct env e;

  env_init (&e, 64, 1 << 20, 0);
  env_open (&e);
  for (uint64_t l = 0; l < 10; l++)
    write_v (&e, l, 1);
  assert_int_equal (hhc_close (e.vol), 0);
  e.vol = NULL;
  e.conf.mode = HHC_MODE_WT;
  env_open (&e);
  assert_int_equal (dirty (&e), 10);
  assert_int_equal (hhc_start (e.vol, e.mb), 0);
  assert_int_equal (dirty (&e), 0);
  for (uint64_t l = 0; l < 10; l++)
    assert_true (backend_has (&e, true, l, 1));
  env_free (&e);
}

/* ---- the generation race ---- */

static void
test_generation_race (void **state)
{
  struct env e;
  struct gate g;
  struct batch_arg a;
  pthread_t th;

  env_init (&e, 64, 1 << 20, 0);
  env_open (&e);
  gate_init (&g);
  write_v (&e, 7, 1);
  write_v (&e, 8, 1);
  membackend_set_hook (e.mb, MB_OP_WRITE, gate_backend_hook, &g);
  gate_arm (&g, 7 * BS, 8 * BS);
  a = (struct batch_arg){ e.vol, e.mb, 0 };
  assert_int_equal (pthread_create (&th, NULL, batch_thread, &a), 0);
  assert_true (gate_wait_entered (&g));
  /* Write-back holds version 1 of block 7; the client rewrites it. */
  assert_true (active_of (e.vol, 7) & ACT_WB);
  write_v (&e, 7, 2);
  assert_true (active_of (e.vol, 7) & ACT_REDIRTY);
  gate_open (&g);
  assert_true (test_join (th, TIMEOUT_MS));
  membackend_set_hook (e.mb, MB_OP_WRITE, NULL, NULL);
  /* Block 8 is clean, block 7 is still dirty with version 2. */
  assert_true (a.result >= 1);
  assert_int_equal (dirty (&e), 1);
  assert_int_equal (active_of (e.vol, 7), 0);
  assert_true (backend_has (&e, true, 7, 1));
  assert_true (backend_has (&e, true, 8, 1));
  assert_true (reads_v (&e, 7, 2));
  /* The next round writes the new data. */
  assert_int_equal (hhc_drain (e.vol, e.mb), 0);
  assert_int_equal (dirty (&e), 0);
  assert_true (backend_has (&e, true, 7, 2));
  /* Evicted and read back from the backend: still version 2. */
  assert_true (vol_evict (e.vol, 100) >= 1);
  assert_int_equal (slot_of (e.vol, 7), HHC_NIL);
  assert_true (reads_v (&e, 7, 2));
  gate_destroy (&g);
  env_free (&e);
}

/* A trim elsewhere in the volume while a block is written back does
 * not stop that block from becoming clean (steady discards must not
 * stop write-back); the trim is tracked by block range.
 */
static void
test_trim_elsewhere_during_writeback (void **state)
{
  struct env e;
  struct gate g;
  struct batch_arg a;
  pthread_t th;

  env_init (&e, 64, 1 << 20, 0);
  env_open (&e);
  gate_init (&g);
  write_v (&e, 7, 1);
  write_v (&e, 200, 1);
  membackend_set_hook (e.mb, MB_OP_WRITE, gate_backend_hook, &g);
  gate_arm (&g, 7 * BS, 8 * BS);
  a = (struct batch_arg){ e.vol, e.mb, 0 };
  assert_int_equal (pthread_create (&th, NULL, batch_thread, &a), 0);
  assert_true (gate_wait_entered (&g));
  /* First without a trim: both blocks are cleaned. */
  assert_true (active_of (e.vol, 7) & ACT_WB);
  gate_open (&g);
  assert_true (test_join (th, TIMEOUT_MS));
  membackend_set_hook (e.mb, MB_OP_WRITE, NULL, NULL);
  assert_int_equal (dirty (&e), 0);

  /* Again, with a trim of another block in the middle. */
  write_v (&e, 7, 2);
  membackend_set_hook (e.mb, MB_OP_WRITE, gate_backend_hook, &g);
  gate_arm (&g, 7 * BS, 8 * BS);
  a = (struct batch_arg){ e.vol, e.mb, 0 };
  assert_int_equal (pthread_create (&th, NULL, batch_thread, &a), 0);
  assert_true (gate_wait_entered (&g));
  assert_int_equal (hhc_trim (e.vol, e.mb, BS, 200 * BS, false), 0);
  gate_open (&g);
  assert_true (test_join (th, TIMEOUT_MS));
  membackend_set_hook (e.mb, MB_OP_WRITE, NULL, NULL);
  assert_int_equal (a.result, 1);
  assert_int_equal (dirty (&e), 0);
  assert_true (backend_has (&e, true, 7, 2));
  gate_destroy (&g);
  env_free (&e);
}

/* A client write that claimed a block (ACT_BUSY) while the block was
 * being written back must keep its claim until it finishes: the end of
 * the write-back batch (flusher.c finish_block) may not clear it.
 * Otherwise a second write-back claims the block in the middle of the
 * client's write, writes the old data to the backend and marks the
 * block clean; the new data is then lost on eviction, even after a
 * FLUSH.
 */
static void
test_busy_survives_writeback (void **state)
{
  struct env e;
  struct gate gb, gd;
  struct batch_arg a;
  struct write_arg w;
  pthread_t tb, tw;
  uint32_t k, flags_mid;
  long second;
  bool lost;

  env_init (&e, 64, 1 << 20, 0);
  env_open (&e);
  gate_init (&gb);
  gate_init (&gd);
  write_v (&e, 7, 1);
  k = slot_of (e.vol, 7);

  /* Write-back of block 7 stops in the backend write. */
  membackend_set_hook (e.mb, MB_OP_WRITE, gate_backend_hook, &gb);
  gate_arm (&gb, 7 * BS, 8 * BS);
  a = (struct batch_arg){ e.vol, e.mb, 0 };
  assert_int_equal (pthread_create (&tb, NULL, batch_thread, &a), 0);
  assert_true (gate_wait_entered (&gb));

  /* A client rewrites block 7 and stops in its SSD write. */
  hookdev_set_hooks (e.hdev, gate_dev_hook, NULL, NULL, &gd);
  gate_arm (&gd, cache_slot_offset (&e.vol->cache, k),
            cache_slot_offset (&e.vol->cache, k) + BS);
  write_arg_init (&w, &e, 7, 2);
  assert_int_equal (pthread_create (&tw, NULL, write_thread, &w), 0);
  assert_true (gate_wait_entered (&gd));
  assert_true (active_of (e.vol, 7) & ACT_BUSY);

  /* The write-back batch ends while the client is still writing. */
  gate_open (&gb);
  assert_true (test_join (tb, TIMEOUT_MS));
  membackend_set_hook (e.mb, MB_OP_WRITE, NULL, NULL);
  flags_mid = active_of (e.vol, 7);

  /* Another write-back round now, as the flusher thread would run. */
  second = flusher_batch (e.vol, e.mb, 1);

  /* Let the client finish, flush, and push block 7 out of the cache. */
  gate_open (&gd);
  assert_true (test_join (tw, TIMEOUT_MS));
  hookdev_set_hooks (e.hdev, NULL, NULL, NULL, NULL);
  assert_int_equal (w.result, 0);
  assert_int_equal (hhc_flush (e.vol, e.mb), 0);
  vol_evict (e.vol, 100);
  lost = !reads_v (&e, 7, 2);
  if (!(flags_mid & ACT_BUSY) || lost)
    {
      gate_destroy (&gb);
      gate_destroy (&gd);
      env_free (&e);
    }
  if (!(flags_mid & ACT_BUSY) || lost)
    fail_msg ("client write's ACT_BUSY was %s by the end of a concurrent "
              "write-back (flags 0x%x); a second write-back then "
              "cleaned %ld block(s) under the writer%s",
              flags_mid & ACT_BUSY ? "kept" : "cleared", flags_mid, second,
              lost ? "; the flushed write of version 2 was LOST (block "
                     "reads version 1 after eviction)"
                   : "");
  assert_int_equal (hhc_drain (e.vol, e.mb), 0);
  assert_true (backend_has (&e, true, 7, 2));
  gate_destroy (&gb);
  gate_destroy (&gd);
  env_free (&e);
}

/* flusher_batch returns the number of blocks it cleaned, and the
 * writeback_blocks counter counts cleaned blocks: a block rewritten
 * during its write-back is not cleaned and must not be counted.
 */
static void
test_batch_counts_only_cleaned (void **state)
{
  struct env e;
  struct gate g;
  struct batch_arg a;
  pthread_t th;
  struct hhc_counts c;

  env_init (&e, 64, 1 << 20, 0);
  env_open (&e);
  gate_init (&g);
  write_v (&e, 7, 1);
  write_v (&e, 8, 1);
  membackend_set_hook (e.mb, MB_OP_WRITE, gate_backend_hook, &g);
  gate_arm (&g, 7 * BS, 8 * BS);
  a = (struct batch_arg){ e.vol, e.mb, 0 };
  assert_int_equal (pthread_create (&th, NULL, batch_thread, &a), 0);
  assert_true (gate_wait_entered (&g));
  write_v (&e, 7, 2);
  gate_open (&g);
  assert_true (test_join (th, TIMEOUT_MS));
  membackend_set_hook (e.mb, MB_OP_WRITE, NULL, NULL);
  hhc_get_counts (e.vol, &c);
  gate_destroy (&g);
  env_free (&e);
  assert_int_equal (c.dirty, 1);
  if (a.result != 1 || c.writeback_blocks != 1)
    fail_msg ("one of two blocks was cleaned, but flusher_batch returned "
              "%ld and writeback_blocks is %llu",
              a.result, (unsigned long long)c.writeback_blocks);
}

/* ---- backend errors ---- */

static void
test_backend_errors (void **state)
{
  struct env e;
  struct hhc_counts c;

  env_init (&e, 64, 1 << 20, 0);
  env_open (&e);
  for (uint64_t l = 0; l < 20; l++)
    write_v (&e, l, 1);
  membackend_fail_all (e.mb, MB_OP_WRITE, true);
  assert_int_equal (flusher_batch (e.vol, e.mb, 4), -EIO);
  hhc_get_counts (e.vol, &c);
  assert_int_equal (c.dirty, 20);
  assert_int_equal (c.writeback_blocks, 0);
  assert_true (c.writeback_errors >= 1);
  /* drain gives up after a few failures, with the error. */
  assert_int_equal (hhc_drain (e.vol, e.mb), EIO);
  /* Cached data stays readable, and writes go on into the cache. */
  for (uint64_t l = 0; l < 20; l++)
    assert_true (reads_v (&e, l, 1));
  write_v (&e, 3, 2);
  write_v (&e, 30, 2);
  hhc_get_counts (e.vol, &c);
  assert_int_equal (c.dirty, 21);
  assert_int_equal (membackend_count (e.mb, MB_WRITES), 0);
  /* A failing flush also keeps them dirty. */
  membackend_fail_all (e.mb, MB_OP_WRITE, false);
  membackend_fail_all (e.mb, MB_OP_FLUSH, true);
  assert_int_equal (flusher_batch (e.vol, e.mb, 4), -EIO);
  assert_int_equal (dirty (&e), 21);
  /* Backend back: drain succeeds. */
  membackend_fail_all (e.mb, MB_OP_FLUSH, false);
  assert_int_equal (hhc_drain (e.vol, e.mb), 0);
  assert_int_equal (dirty (&e), 0);
  for (uint64_t l = 0; l < 20; l++)
    assert_true (backend_has (&e, true, l, l == 3 ? 2 : 1));
  assert_true (backend_has (&e, true, 30, 2));
  env_free (&e);
}

/* Backend errors: the flusher retries with a growing (capped
 * exponential) back-off, not at a fixed short interval.  Measured
 * between the batches' backend flushes (each failed batch still ends
 * with one); nothing kicks the flusher meanwhile.  Lower bounds only.
 */
struct flush_times {
  pthread_mutex_t lock;
  uint64_t t[8];
  unsigned n;
};

static void
flush_time_hook (void *opaque, uint64_t offset, uint32_t count)
{
  struct flush_times *ft = opaque;

  pthread_mutex_lock (&ft->lock);
  if (ft->n < 8)
    ft->t[ft->n++] = hhc_now_ns ();
  pthread_mutex_unlock (&ft->lock);
}

static void
test_backoff_grows (void **state)
{
  struct env e;
  struct flush_times ft = { .n = 0 };
  uint64_t gap[4];

  pthread_mutex_init (&ft.lock, NULL);
  env_init (&e, 64, 1 << 20, 0);
  env_open (&e);
  for (uint64_t l = 0; l < 20; l++) /* above dirty-low */
    write_v (&e, l, 1);
  membackend_fail_all (e.mb, MB_OP_WRITE, true);
  membackend_set_hook (e.mb, MB_OP_FLUSH, flush_time_hook, &ft);
  assert_int_equal (hhc_start (e.vol, e.mb), 0);
  assert_true (membackend_wait_count (e.mb, MB_FLUSHES, 5, TIMEOUT_MS));
  hhc_close (e.vol);
  e.vol = NULL;
  for (int i = 0; i < 4; i++)
    gap[i] = (ft.t[i + 1] - ft.t[i]) / 1000000;
  pthread_mutex_destroy (&ft.lock);
  env_free (&e);
  /* 100, 200, 400, 800 ms with doubling; at least 350 ms by the 4th. */
  if (gap[3] < 350)
    fail_msg ("retry intervals after backend write errors: %llu, %llu, "
              "%llu, %llu ms (no back-off growth)",
              (unsigned long long)gap[0], (unsigned long long)gap[1],
              (unsigned long long)gap[2], (unsigned long long)gap[3]);
}

/* ---- the stall at dirty-max ---- */

static void
test_stall_at_dirty_max (void **state)
{
  struct env e;
  struct write_arg w;
  pthread_t tw;
  struct timespec ts;
  uint64_t errs;

  env_init (&e, 64, 1 << 20, 0);
  env_open (&e);
  membackend_fail_all (e.mb, MB_OP_WRITE, true);
  assert_int_equal (hhc_start (e.vol, e.mb), 0);
  for (uint64_t l = 0; l < e.vol->dirty_max; l++)
    write_v (&e, l, 1);
  assert_int_equal (dirty (&e), e.vol->dirty_max);

  write_arg_init (&w, &e, 100, 1);
  assert_int_equal (pthread_create (&tw, NULL, write_thread, &w), 0);
  test_deadline (&ts, TIMEOUT_MS);
  pthread_mutex_lock (&w.lock);
  while (!w.started)
    assert_int_not_equal (pthread_cond_timedwait (&w.cond, &w.lock, &ts),
                          ETIMEDOUT);
  pthread_mutex_unlock (&w.lock);
  /* The flusher keeps failing (and retrying: each failed batch still
   * ends with a backend flush) while the writer waits.
   */
  errs = membackend_count (e.mb, MB_FLUSHES);
  assert_true (membackend_wait_count (e.mb, MB_FLUSHES, errs + 3, TIMEOUT_MS));
  assert_false (write_done (&w));
  assert_true (stat_get (&e.vol->stats.stalls) > 0);
  /* Reads of cached data go on meanwhile. */
  for (uint64_t l = 0; l < 10; l++)
    assert_true (reads_v (&e, l, 1));
  /* Backend back: the writer completes, without an error. */
  membackend_fail_all (e.mb, MB_OP_WRITE, false);
  assert_true (test_join (tw, TIMEOUT_MS));
  assert_int_equal (w.result, 0);
  assert_true (reads_v (&e, 100, 1));
  assert_int_equal (hhc_drain (e.vol, e.mb), 0);
  assert_true (backend_has (&e, true, 100, 1));
  env_free (&e);
}

/* ---- coalescing ---- */

static size_t
get_log (struct env *e, struct mb_extent **logp)
{
  size_t n = membackend_write_log (e->mb, NULL, 0);
  *logp = malloc ((n + 1) * sizeof **logp);
  assert_non_null (*logp);
  return membackend_write_log (e->mb, *logp, n);
}

/* want_writes: the fewest writes the boundaries allow (at most). */
static void
check_coalescing (uint32_t preferred, uint32_t max_request, uint32_t nblocks,
                  size_t want_writes)
{
  struct env e;
  struct mb_extent *log;
  size_t n;
  uint32_t chunk = preferred >= BS ? preferred : 0; /* 0: no boundary */
  uint64_t covered = 0;

  env_init (&e, 256, 1 << 20, preferred);
  e.info.max_request = max_request;
  env_open (&e);
  /* Written in a scrambled order: the flusher sorts by LBA. */
  for (uint32_t i = 0; i < nblocks; i++)
    write_v (&e, (i * 7) % nblocks, 1);
  assert_int_equal (hhc_drain (e.vol, e.mb), 0);
  n = get_log (&e, &log);
  for (size_t i = 0; i < n; i++)
    {
      uint64_t o = log[i].offset, len = log[i].count;
      assert_int_equal (o % BS, 0);
      assert_int_equal (len % BS, 0);
      /* Never across a preferred-block boundary. */
      if (chunk)
        assert_int_equal (o / chunk, (o + len - 1) / chunk);
      if (max_request)
        assert_true (len <= max_request);
      covered += len;
    }
  assert_int_equal (covered, (uint64_t)nblocks * BS);
  for (uint32_t l = 0; l < nblocks; l++)
    assert_true (backend_has (&e, true, l, 1));
  free (log);
  env_free (&e);
  if (n > want_writes)
    fail_msg ("preferred block %u, max request %u: %u contiguous dirty "
              "blocks took %zu backend writes, expected at most %zu",
              preferred, max_request, nblocks, n, want_writes);
}

static void
test_coalescing (void **state)
{
  check_coalescing (16384, 0, 32, 8);     /* 4 blocks per write */
  check_coalescing (65536, 0, 32, 2);     /* 16 per write */
  check_coalescing (65536, 8192, 32, 16); /* max request: 2 */
  check_coalescing (1 << 20, 0, 200, 1);  /* one whole object */
}

/* Gaps split extents; partial chunks are not padded. */
static void
test_coalescing_gaps (void **state)
{
  struct env e;
  struct mb_extent *log;
  size_t n;

  env_init (&e, 64, 1 << 20, 65536);
  env_open (&e);
  write_v (&e, 0, 1);
  write_v (&e, 1, 1);
  write_v (&e, 3, 1);
  write_v (&e, 15, 1);
  write_v (&e, 16, 1); /* next 64K chunk */
  assert_int_equal (hhc_drain (e.vol, e.mb), 0);
  n = get_log (&e, &log);
  assert_int_equal (n, 4);
  for (size_t i = 0; i < n; i++)
    {
      if (log[i].offset == 0)
        assert_int_equal (log[i].count, 2 * BS);
      else
        assert_int_equal (log[i].count, BS);
    }
  free (log);
  env_free (&e);
}

/* A backend that does not report a preferred block size (0: nbdkit's
 * file and memory plugins) should still get contiguous dirty blocks
 * as few large writes, not one write per block.
 */
static void
test_coalescing_unknown_preferred (void **state)
{
  check_coalescing (0, 0, 32, 4);
}

/* A long contiguous run goes back in few large writes and one batch
 * (one backend flush per batch), not in batches of BATCH blocks each
 * with its own flush: 2048 blocks (8 MiB) are two 4 MiB writes.  A
 * batch of scattered blocks stays at BATCH (256) runs.
 */
static void
test_long_run_one_batch (void **state)
{
  struct env e;
  struct mb_extent *log;
  size_t n;

  env_init (&e, 4096, 16 << 20, 0);
  env_open (&e);
  for (uint64_t l = 0; l < 2048; l++)
    write_v (&e, l, 1);
  membackend_reset_counts (e.mb);
  assert_int_equal (flusher_batch (e.vol, e.mb, 4), 2048);
  assert_int_equal (membackend_count (e.mb, MB_FLUSHES), 1);
  n = get_log (&e, &log);
  assert_int_equal (n, 2);
  free (log);
  for (uint64_t l = 0; l < 2048; l++)
    assert_true (backend_has (&e, true, l, 1));
  /* Every other block: 300 runs of one block. */
  for (uint64_t l = 0; l < 600; l += 2)
    write_v (&e, l, 2);
  assert_int_equal (flusher_batch (e.vol, e.mb, 4), 256);
  assert_int_equal (dirty (&e), 300 - 256);
  env_free (&e);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_watermarks),
    cmocka_unit_test (test_idle_writeback_below_low),
    cmocka_unit_test (test_writeback_above_low),
    cmocka_unit_test (test_drain),
    cmocka_unit_test (test_drain_flushes_backend),
    cmocka_unit_test (test_start_drains_in_wt),
    cmocka_unit_test (test_generation_race),
    cmocka_unit_test (test_busy_survives_writeback),
    cmocka_unit_test (test_trim_elsewhere_during_writeback),
    cmocka_unit_test (test_batch_counts_only_cleaned),
    cmocka_unit_test (test_backend_errors),
    cmocka_unit_test (test_backoff_grows),
    cmocka_unit_test (test_stall_at_dirty_max),
    cmocka_unit_test (test_coalescing),
    cmocka_unit_test (test_coalescing_gaps),
    cmocka_unit_test (test_coalescing_unknown_preferred),
    cmocka_unit_test (test_long_run_one_batch),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
