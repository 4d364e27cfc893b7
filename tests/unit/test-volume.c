/* The request paths of one volume in every mode, against a shadow
 * copy of what the volume must contain: random reads, writes, trims,
 * zeros and flushes at any byte alignment; pass-through caching
 * nothing; coalesced read misses; trim/zero invalidation with FUA;
 * prefetch; concurrent writers.  A failed backend flush being sticky
 * is test-flush-sticky.c.
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

#include "devcrash.h"
#include "flusher.h"
#include "membackend.h"
#include "preopen.h"
#include "volenv.h"

#define BS 4096u
#define SECTORS (BS / PAT_SECTOR)
#define TIMEOUT_MS 30000

static void
random_bytes (unsigned char *p, size_t n, uint64_t *s)
{
  for (size_t i = 0; i < n; i++)
    p[i] = test_rand (s);
}

/* Fill the backend (current and durable) with random bytes. */
static void
randomize_backend (struct volenv *e, unsigned char *shadow, uint64_t seed)
{
  uint64_t size = membackend_size (e->mb);

  random_bytes (shadow, size, &seed);
  membackend_poke (e->mb, shadow, size, 0);
}

/* ---- random operations against a shadow ---- */

/* What a trim leaves zero (membackend trims read as zeros): in pt the
 * whole range goes down; otherwise only the whole blocks inside it
 * (a partial last block of the volume counts as whole).
 */
static void
shadow_trim (unsigned char *shadow, enum hhc_mode mode, uint64_t size,
             uint64_t off, uint64_t len)
{
  uint64_t start = off, end = off + len;

  if (mode != HHC_MODE_PT)
    {
      start = (off + BS - 1) / BS * BS;
      end = end == size ? end : end / BS * BS;
    }
  if (end > start)
    memset (shadow + start, 0, end - start);
}

static void
random_ops (enum hhc_mode mode, uint64_t size, uint64_t seed, int nops)
{
  struct volenv e;
  unsigned char *shadow = malloc (size), *got = malloc (size);
  unsigned char buf[3 * BS + 100];
  uint64_t s = seed;
  int r;

  assert_non_null (shadow);
  assert_non_null (got);
  volenv_init (&e, mode, 64, size);
  randomize_backend (&e, shadow, seed * 77);
  assert_int_equal (volenv_try_open (&e), 0);
  assert_int_equal (hhc_start (e.vol, e.mb), 0);
  for (int i = 0; i < nops; i++)
    {
      uint64_t op = test_rand_below (&s, 100);
      /* Mostly a hot region of 40 blocks, sometimes anywhere. */
      uint64_t span = test_rand_below (&s, 4) ? 40 * BS : size;
      uint64_t off = test_rand_below (&s, span);
      uint64_t len = 1 + test_rand_below (&s, sizeof buf);

      if (test_rand_below (&s, 3) == 0) /* block aligned */
        {
          off = off / BS * BS;
          len = (1 + test_rand_below (&s, 3)) * BS;
        }
      if (off + len > size)
        len = size - off;
      if (len == 0)
        continue;
      if (op < 40)
        {
          r = hhc_read (e.vol, e.mb, buf, len, off);
          assert_int_equal (r, 0);
          if (memcmp (buf, shadow + off, len) != 0)
            fail_msg ("mode %s seed %llu op %d: read of %llu bytes at %llu "
                      "differs from what was written",
                      hhc_mode_to_string (mode), (unsigned long long)seed, i,
                      (unsigned long long)len, (unsigned long long)off);
        }
      else if (op < 75)
        {
          bool fua = test_rand_below (&s, 10) == 0;
          random_bytes (buf, len, &s);
          assert_int_equal (hhc_write (e.vol, e.mb, buf, len, off, fua), 0);
          memcpy (shadow + off, buf, len);
          if (mode != HHC_MODE_WB)
            {
              /* pt, wt: the backend has it as soon as it returns. */
              membackend_peek (e.mb, false, got, len, off);
              if (memcmp (got, buf, len) != 0)
                fail_msg ("mode %s seed %llu op %d: backend lacks a write",
                          hhc_mode_to_string (mode), (unsigned long long)seed,
                          i);
            }
          if (fua)
            {
              membackend_peek (e.mb, true, got, len, off);
              if (mode != HHC_MODE_WB)
                assert_memory_equal (got, buf, len);
            }
        }
      else if (op < 82)
        {
          assert_int_equal (hhc_trim (e.vol, e.mb, len, off, false), 0);
          shadow_trim (shadow, mode, size, off, len);
        }
      else if (op < 90)
        {
          assert_int_equal (hhc_zero (e.vol, e.mb, len, off, false), 0);
          memset (shadow + off, 0, len);
        }
      else if (op < 95)
        assert_int_equal (hhc_flush (e.vol, e.mb), 0);
      else
        assert_int_equal (hhc_prefetch (e.vol, e.mb, len, off), 0);
      if (mode == HHC_MODE_WT && i % 100 == 0)
        {
          membackend_peek (e.mb, false, got, size, 0);
          assert_memory_equal (got, shadow, size);
        }
    }
  /* Everything reads back; then the backend holds it durably. */
  for (uint64_t off = 0; off < size; off += sizeof buf)
    {
      uint64_t len = size - off < sizeof buf ? size - off : sizeof buf;
      assert_int_equal (hhc_read (e.vol, e.mb, buf, len, off), 0);
      assert_memory_equal (buf, shadow + off, len);
    }
  if (mode == HHC_MODE_WB)
    assert_int_equal (hhc_drain (e.vol, e.mb), 0);
  assert_int_equal (hhc_flush (e.vol, e.mb), 0);
  membackend_peek (e.mb, true, got, size, 0);
  assert_memory_equal (got, shadow, size);
  if (mode == HHC_MODE_PT)
    {
      struct hhc_counts c = volenv_counts (&e);
      assert_int_equal (c.read_hits, 0);
      assert_int_equal (c.free, c.slots);
    }
  free (shadow);
  free (got);
  volenv_free (&e);
}

static void
test_random_pt (void **state)
{
  random_ops (HHC_MODE_PT, 1 << 20, 1, 1500);
}

static void
test_random_wt (void **state)
{
  random_ops (HHC_MODE_WT, 1 << 20, 2, 1500);
}

static void
test_random_wb (void **state)
{
  random_ops (HHC_MODE_WB, 1 << 20, 3, 2000);
  random_ops (HHC_MODE_WB, 1 << 20, 4, 2000);
}

/* A volume whose size is not a multiple of the block size. */
static void
test_random_odd_size (void **state)
{
  random_ops (HHC_MODE_WB, (1 << 20) + 1536, 5, 1500);
  random_ops (HHC_MODE_WT, (1 << 20) + 1536, 6, 1000);
}

static void
test_out_of_range (void **state)
{
  struct volenv e;
  unsigned char buf[BS];

  volenv_init (&e, HHC_MODE_WB, 64, 1 << 20);
  assert_int_equal (volenv_try_open (&e), 0);
  assert_int_equal (hhc_read (e.vol, e.mb, buf, BS, (1 << 20) - 100), EINVAL);
  assert_int_equal (hhc_write (e.vol, e.mb, buf, 2, 1 << 20, false), EINVAL);
  assert_int_equal (hhc_trim (e.vol, e.mb, BS, UINT64_MAX - 10, false), EINVAL);
  assert_int_equal (hhc_zero (e.vol, e.mb, 1, 1 << 20, false), EINVAL);
  assert_int_equal (hhc_read (e.vol, e.mb, buf, 100, (1 << 20) - 100), 0);
  volenv_free (&e);
}

/* ---- pt caches nothing ---- */

static void
test_pt_no_cache (void **state)
{
  struct volenv e;
  unsigned char buf[BS];
  struct hhc_counts c;

  volenv_init (&e, HHC_MODE_PT, 64, 1 << 20);
  assert_int_equal (volenv_try_open (&e), 0);
  for (int round = 0; round < 3; round++)
    for (uint64_t l = 0; l < 10; l++)
      assert_int_equal (hhc_read (e.vol, e.mb, buf, BS, l * BS), 0);
  assert_int_equal (hhc_prefetch (e.vol, e.mb, 10 * BS, 0), 0);
  memset (buf, 1, sizeof buf);
  assert_int_equal (hhc_write (e.vol, e.mb, buf, BS, 0, false), 0);
  assert_int_equal (hhc_read (e.vol, e.mb, buf, BS, 0), 0);
  c = volenv_counts (&e);
  assert_int_equal (c.read_hits, 0);
  assert_int_equal (c.read_misses, 31);
  assert_int_equal (c.free, c.slots);
  assert_int_equal (membackend_count (e.mb, MB_READS), 31);
  volenv_free (&e);
}

/* ---- read-miss coalescing ---- */

#define READERS 4

struct miss_probe {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  uint64_t target; /* offset of the block */
  unsigned reads;  /* backend reads of it */
  bool entered;
};

/* Hold the first backend read of the block until a second read of it
 * arrives (coalescing broken) or 300 ms pass: long enough for the
 * other readers to reach the block, which only makes the test
 * stronger, never flaky.
 */
static void
miss_hook (void *opaque, uint64_t offset, uint32_t count)
{
  struct miss_probe *p = opaque;
  struct timespec ts;

  if (offset != p->target)
    return;
  pthread_mutex_lock (&p->lock);
  p->reads++;
  pthread_cond_broadcast (&p->cond);
  if (p->reads == 1)
    {
      p->entered = true;
      test_deadline (&ts, 300);
      while (p->reads == 1)
        if (pthread_cond_timedwait (&p->cond, &p->lock, &ts) == ETIMEDOUT)
          break;
    }
  pthread_mutex_unlock (&p->lock);
}

struct reader {
  struct volenv *e;
  uint64_t lba;
  int result;
  bool ok;
};

static void *
reader_run (void *arg)
{
  struct reader *r = arg;
  unsigned char buf[BS], want[BS];

  pattern_fill (want, r->lba, 0, SECTORS, 0);
  r->result = hhc_read (r->e->vol, r->e->mb, buf, BS, r->lba * BS);
  r->ok = memcmp (buf, want, BS) == 0;
  return NULL;
}

static void
test_read_miss_coalescing (void **state)
{
  struct volenv e;
  struct miss_probe p;
  struct reader rd[READERS];
  pthread_t th[READERS];
  unsigned char blk[BS];
  struct timespec ts;
  struct hhc_counts c;

  volenv_init (&e, HHC_MODE_WB, 64, 1 << 20);
  pattern_fill (blk, 9, 0, SECTORS, 0);
  membackend_poke (e.mb, blk, BS, 9 * BS);
  assert_int_equal (volenv_try_open (&e), 0);
  memset (&p, 0, sizeof p);
  pthread_mutex_init (&p.lock, NULL);
  pthread_cond_init (&p.cond, NULL);
  p.target = 9 * BS;
  membackend_set_hook (e.mb, MB_OP_READ, miss_hook, &p);
  for (int i = 0; i < READERS; i++)
    {
      rd[i] = (struct reader){ &e, 9, -1, false };
      assert_int_equal (pthread_create (&th[i], NULL, reader_run, &rd[i]), 0);
      if (i == 0)
        {
          /* The others start once the first holds the backend read. */
          test_deadline (&ts, TIMEOUT_MS);
          pthread_mutex_lock (&p.lock);
          while (!p.entered)
            assert_int_not_equal (
                pthread_cond_timedwait (&p.cond, &p.lock, &ts), ETIMEDOUT);
          pthread_mutex_unlock (&p.lock);
        }
    }
  for (int i = 0; i < READERS; i++)
    {
      assert_true (test_join (th[i], TIMEOUT_MS));
      assert_int_equal (rd[i].result, 0);
      assert_true (rd[i].ok);
    }
  membackend_set_hook (e.mb, MB_OP_READ, NULL, NULL);
  assert_int_equal (p.reads, 1);
  c = volenv_counts (&e);
  assert_int_equal (c.read_misses, 1);
  assert_int_equal (c.read_hits, READERS - 1);
  pthread_mutex_destroy (&p.lock);
  pthread_cond_destroy (&p.cond);
  volenv_free (&e);
}

/* ---- trim and zero invalidate, FUA makes them durable ---- */

static void
test_trim_zero_fua (void **state)
{
  struct volenv e;
  unsigned char blk[BS], want[BS], zero[BS];
  uint64_t flushes;
  struct hhc_counts c;

  memset (zero, 0, sizeof zero);
  volenv_init (&e, HHC_MODE_WB, 64, 1 << 20);
  assert_int_equal (volenv_try_open (&e), 0);
  for (uint64_t l = 0; l < 10; l++)
    {
      pattern_fill (blk, l, 0, SECTORS, 1);
      assert_int_equal (hhc_write (e.vol, e.mb, blk, BS, l * BS, false), 0);
    }
  assert_int_equal (volenv_counts (&e).dirty, 10);

  /* Trim blocks 2 and 3 (whole) with FUA. */
  flushes = membackend_count (e.mb, MB_FLUSHES);
  assert_int_equal (hhc_trim (e.vol, e.mb, 2 * BS, 2 * BS, true), 0);
  c = volenv_counts (&e);
  assert_int_equal (c.dirty, 8);
  assert_int_equal (membackend_count (e.mb, MB_TRIMS), 1);
  assert_true (membackend_count (e.mb, MB_FLUSHES) > flushes);
  membackend_peek (e.mb, true, blk, BS, 2 * BS);
  assert_memory_equal (blk, zero, BS);
  assert_int_equal (hhc_read (e.vol, e.mb, blk, BS, 3 * BS), 0);
  assert_memory_equal (blk, zero, BS);

  /* Zero from the middle of block 5 to the middle of block 7: the
   * edges are zeroed in the cache, block 6 goes down.
   */
  flushes = membackend_count (e.mb, MB_FLUSHES);
  assert_int_equal (hhc_zero (e.vol, e.mb, 2 * BS - 50, 5 * BS + 100, true), 0);
  assert_int_equal (membackend_count (e.mb, MB_ZEROS), 1);
  assert_true (membackend_count (e.mb, MB_FLUSHES) > flushes);
  membackend_peek (e.mb, true, blk, BS, 6 * BS);
  assert_memory_equal (blk, zero, BS);
  for (uint64_t l = 5; l <= 7; l++)
    {
      pattern_fill (want, l, 0, SECTORS, 1);
      if (l == 5)
        memset (want + 100, 0, BS - 100);
      else if (l == 6)
        memset (want, 0, BS);
      else
        memset (want, 0, 50);
      assert_int_equal (hhc_read (e.vol, e.mb, blk, BS, l * BS), 0);
      assert_memory_equal (blk, want, BS);
    }
  /* A trim smaller than a block drops nothing. */
  assert_int_equal (hhc_trim (e.vol, e.mb, 100, 8 * BS + 10, false), 0);
  pattern_fill (want, 8, 0, SECTORS, 1);
  assert_int_equal (hhc_read (e.vol, e.mb, blk, BS, 8 * BS), 0);
  assert_memory_equal (blk, want, BS);
  /* After write-back the backend matches. */
  assert_int_equal (hhc_drain (e.vol, e.mb), 0);
  for (uint64_t l = 0; l < 10; l++)
    {
      assert_int_equal (hhc_read (e.vol, e.mb, want, BS, l * BS), 0);
      membackend_peek (e.mb, true, blk, BS, l * BS);
      assert_memory_equal (blk, want, BS);
    }
  volenv_free (&e);
}

/* A trim of a block under write-back waits for it: the backend must
 * end up trimmed, not holding the written-back data.
 */
struct wb_hold {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  uint64_t target;
  bool entered, trim_done, trim_started;
  bool done_during_hold; /* the trim finished while we held the write */
};

static void
wb_hold_hook (void *opaque, uint64_t offset, uint32_t count)
{
  struct wb_hold *h = opaque;
  struct timespec ts;

  if (offset != h->target)
    return;
  pthread_mutex_lock (&h->lock);
  if (h->entered) /* hold only the first write-back */
    {
      pthread_mutex_unlock (&h->lock);
      return;
    }
  h->entered = true;
  pthread_cond_broadcast (&h->cond);
  /* Hold the write until the trim has started, then up to 300 ms
   * more (the trim should be waiting for us, not finishing).
   */
  test_deadline (&ts, TIMEOUT_MS);
  while (!h->trim_started)
    if (pthread_cond_timedwait (&h->cond, &h->lock, &ts) == ETIMEDOUT)
      break;
  test_deadline (&ts, 300);
  while (!h->trim_done)
    if (pthread_cond_timedwait (&h->cond, &h->lock, &ts) == ETIMEDOUT)
      break;
  h->done_during_hold = h->trim_done;
  pthread_mutex_unlock (&h->lock);
}

struct trim_arg {
  struct volenv *e;
  struct wb_hold *h;
  int result;
};

static void *
trim_run (void *arg)
{
  struct trim_arg *t = arg;

  pthread_mutex_lock (&t->h->lock);
  t->h->trim_started = true;
  pthread_cond_broadcast (&t->h->cond);
  pthread_mutex_unlock (&t->h->lock);
  t->result = hhc_trim (t->e->vol, t->e->mb, BS, t->h->target, false);
  pthread_mutex_lock (&t->h->lock);
  t->h->trim_done = true;
  pthread_cond_broadcast (&t->h->cond);
  pthread_mutex_unlock (&t->h->lock);
  return NULL;
}

static void *
drain_run (void *arg)
{
  struct volenv *e = arg;

  hhc_drain (e->vol, e->mb);
  return NULL;
}

static void
test_trim_during_writeback (void **state)
{
  struct volenv e;
  struct wb_hold h;
  struct trim_arg t;
  pthread_t td, tt;
  unsigned char blk[BS], zero[BS];
  struct timespec ts;
  bool trim_early;

  memset (zero, 0, sizeof zero);
  volenv_init (&e, HHC_MODE_WB, 64, 1 << 20);
  assert_int_equal (volenv_try_open (&e), 0);
  pattern_fill (blk, 8, 0, SECTORS, 1);
  assert_int_equal (hhc_write (e.vol, e.mb, blk, BS, 8 * BS, false), 0);
  memset (&h, 0, sizeof h);
  pthread_mutex_init (&h.lock, NULL);
  pthread_cond_init (&h.cond, NULL);
  h.target = 8 * BS;
  membackend_set_hook (e.mb, MB_OP_WRITE, wb_hold_hook, &h);
  assert_int_equal (pthread_create (&td, NULL, drain_run, &e), 0);
  test_deadline (&ts, TIMEOUT_MS);
  pthread_mutex_lock (&h.lock);
  while (!h.entered)
    assert_int_not_equal (pthread_cond_timedwait (&h.cond, &h.lock, &ts),
                          ETIMEDOUT);
  pthread_mutex_unlock (&h.lock);
  t = (struct trim_arg){ &e, &h, -1 };
  assert_int_equal (pthread_create (&tt, NULL, trim_run, &t), 0);
  assert_true (test_join (td, TIMEOUT_MS));
  assert_true (test_join (tt, TIMEOUT_MS));
  trim_early = h.done_during_hold;
  membackend_set_hook (e.mb, MB_OP_WRITE, NULL, NULL);
  assert_int_equal (t.result, 0);
  assert_false (trim_early);
  assert_int_equal (hhc_flush (e.vol, e.mb), 0);
  assert_int_equal (hhc_drain (e.vol, e.mb), 0);
  membackend_peek (e.mb, false, blk, BS, 8 * BS);
  assert_memory_equal (blk, zero, BS);
  assert_int_equal (hhc_read (e.vol, e.mb, blk, BS, 8 * BS), 0);
  assert_memory_equal (blk, zero, BS);
  assert_int_equal (volenv_counts (&e).dirty, 0);
  pthread_mutex_destroy (&h.lock);
  pthread_cond_destroy (&h.cond);
  volenv_free (&e);
}

/* ---- prefetch ---- */

static void
test_prefetch (void **state)
{
  struct volenv e;
  unsigned char buf[BS];
  struct hhc_counts c;
  uint64_t reads;

  volenv_init (&e, HHC_MODE_WT, 64, 1 << 20);
  assert_int_equal (volenv_try_open (&e), 0);
  assert_int_equal (hhc_prefetch (e.vol, e.mb, 16 * BS - 100, 4 * BS + 50), 0);
  reads = membackend_count (e.mb, MB_READS);
  assert_int_equal (reads, 1); /* the 16 blocks in one backend read */
  for (uint64_t l = 4; l < 20; l++)
    assert_int_equal (hhc_read (e.vol, e.mb, buf, BS, l * BS), 0);
  c = volenv_counts (&e);
  assert_int_equal (c.read_hits, 16);
  assert_int_equal (c.read_misses, 0);
  assert_int_equal (membackend_count (e.mb, MB_READS), reads);
  /* Prefetching cached blocks reads nothing. */
  assert_int_equal (hhc_prefetch (e.vol, e.mb, 16 * BS, 4 * BS), 0);
  assert_int_equal (membackend_count (e.mb, MB_READS), reads);
  volenv_free (&e);
}

/* A large read miss fetches its blocks from the backend in runs (one
 * request per run of uncached blocks), and caches every block.
 */
static void
test_read_miss_runs (void **state)
{
  struct volenv e;
  static unsigned char buf[64 * BS], want[64 * BS];
  struct hhc_counts c;

  volenv_init (&e, HHC_MODE_WB, 128, 1 << 20);
  assert_int_equal (volenv_try_open (&e), 0);
  /* Block 10 cached first: the 64-block read is two runs around it. */
  assert_int_equal (hhc_read (e.vol, e.mb, buf, BS, 10 * BS), 0);
  assert_int_equal (membackend_count (e.mb, MB_READS), 1);
  assert_int_equal (hhc_read (e.vol, e.mb, buf, 64 * BS - 1000, 500), 0);
  assert_int_equal (membackend_count (e.mb, MB_READS), 3);
  membackend_peek (e.mb, false, want, 64 * BS - 1000, 500);
  assert_memory_equal (buf, want, 64 * BS - 1000);
  c = volenv_counts (&e);
  assert_int_equal (c.read_misses, 64);
  assert_int_equal (c.read_hits, 1);
  /* All cached now: no backend read. */
  assert_int_equal (hhc_read (e.vol, e.mb, buf, 64 * BS, 0), 0);
  assert_int_equal (membackend_count (e.mb, MB_READS), 3);
  volenv_free (&e);
}

/* ---- concurrent writers ---- */

#define WRITERS 4
#define WBLOCKS 256

struct writer {
  struct volenv *e;
  unsigned t;
  uint64_t last[WBLOCKS]; /* version per block (own blocks only) */
  int errors;
};

static void *
writer_run (void *arg)
{
  struct writer *w = arg;
  unsigned char buf[BS];
  uint64_t s = w->t + 100;

  for (uint64_t v = 1; v <= 300; v++)
    {
      /* Own blocks: t, t + WRITERS, ... */
      uint64_t l = w->t + WRITERS * test_rand_below (&s, WBLOCKS / WRITERS);
      uint32_t s0 = 0, n = SECTORS;
      if (w->last[l] != 0 && test_rand_below (&s, 2))
        {
          /* Partial rewrite; the rest keeps its version. */
          s0 = test_rand_below (&s, SECTORS);
          n = 1;
          pattern_fill (buf, l, s0, n, w->last[l]);
          if (hhc_write (w->e->vol, w->e->mb, buf, n * PAT_SECTOR,
                         l * BS + s0 * PAT_SECTOR, false))
            w->errors++;
          continue;
        }
      pattern_fill (buf, l, 0, SECTORS, v);
      if (hhc_write (w->e->vol, w->e->mb, buf, BS, l * BS, false))
        w->errors++;
      w->last[l] = v;
      if (v % 50 == 0 && hhc_flush (w->e->vol, w->e->mb))
        w->errors++;
    }
  return NULL;
}

static void
test_concurrent_writers (void **state)
{
  struct volenv e;
  struct writer *w = calloc (WRITERS, sizeof *w);
  pthread_t th[WRITERS];
  unsigned char buf[BS], want[BS];

  assert_non_null (w);
  volenv_init (&e, HHC_MODE_WB, 64, WBLOCKS * BS);
  assert_int_equal (volenv_try_open (&e), 0);
  /* A slow backend: write-back overlaps the writers more. */
  membackend_set_write_delay (e.mb, 100);
  assert_int_equal (hhc_start (e.vol, e.mb), 0);
  for (unsigned t = 0; t < WRITERS; t++)
    {
      w[t].e = &e;
      w[t].t = t;
      assert_int_equal (pthread_create (&th[t], NULL, writer_run, &w[t]), 0);
    }
  for (unsigned t = 0; t < WRITERS; t++)
    {
      assert_true (test_join (th[t], 120000));
      assert_int_equal (w[t].errors, 0);
    }
  assert_int_equal (hhc_flush (e.vol, e.mb), 0);
  for (uint64_t l = 0; l < WBLOCKS; l++)
    {
      uint64_t v = w[l % WRITERS].last[l];
      assert_int_equal (hhc_read (e.vol, e.mb, buf, BS, l * BS), 0);
      if (v == 0)
        memset (want, 0, BS);
      else
        pattern_fill (want, l, 0, SECTORS, v);
      if (memcmp (buf, want, BS) != 0)
        fail_msg ("block %llu: not version %llu", (unsigned long long)l,
                  (unsigned long long)v);
    }
  assert_int_equal (hhc_drain (e.vol, e.mb), 0);
  for (uint64_t l = 0; l < WBLOCKS; l++)
    {
      uint64_t v = w[l % WRITERS].last[l];
      if (v == 0)
        memset (want, 0, BS);
      else
        pattern_fill (want, l, 0, SECTORS, v);
      assert_int_equal (membackend_cmp (e.mb, true, want, BS, l * BS), 0);
    }
  free (w);
  volenv_free (&e);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_random_pt),
    cmocka_unit_test (test_random_wt),
    cmocka_unit_test (test_random_wb),
    cmocka_unit_test (test_random_odd_size),
    cmocka_unit_test (test_out_of_range),
    cmocka_unit_test (test_pt_no_cache),
    cmocka_unit_test (test_read_miss_coalescing),
    cmocka_unit_test (test_trim_zero_fua),
    cmocka_unit_test (test_trim_during_writeback),
    cmocka_unit_test (test_prefetch),
    cmocka_unit_test (test_read_miss_runs),
    cmocka_unit_test (test_concurrent_writers),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
