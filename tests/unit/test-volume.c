/* The request paths of one volume in every mode, against a shadow
 * copy of what the volume must contain: random reads, writes, trims,
 * zeros and flushes at any byte alignment; pass-through caching
 * nothing; coalesced read misses; trim/zero invalidation with FUA;
 * prefetch; concurrent writers; a failed backend flush is sticky.
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

/* ---- a failed backend flush is sticky ----
 *
 * The backend drops what it had not flushed when a flush fails (as
 * Linux drops dirty pages whose write-back failed), so its next flush
 * succeeds although a pass-down (a pt or wt write, a trim, a zero) is
 * lost.  So a backend flush that fails while a pass-down may be
 * unflushed (in pt and wt: any) makes every later FLUSH fail with EIO
 * until the volume is reopened; the flusher's own backend flush counts
 * too; and a close after such a failure does not mark the cache closed
 * (a wt cache then drops its clean blocks at the next open).  x is
 * block 5, y block 9.
 */

#define X (5 * BS)
#define Y (9 * BS)

static uint64_t
flush_errors (struct hhc_volume *vol)
{
  struct hhc_counts c;

  hhc_get_counts (vol, &c);
  return c.flush_errors;
}

/* The stats document contains needle. */
static void
stats_has (struct hhc_volume *vol, const char *needle)
{
  char *j = hhc_stats_json (vol);

  assert_non_null (j);
  if (strstr (j, needle) == NULL)
    fail_msg ("the stats lack %s:\n%s", needle, j);
  free (j);
}

/* pt, wt: write x=A, FLUSH; write x=B while the backend's flushes
 * fail; FLUSH fails; the backend heals; FLUSH must still fail.  Close
 * and reopen: x reads A (the backend's), not B from the cache.
 */
static void
sticky_write (enum hhc_mode mode)
{
  struct volenv e;
  unsigned char a[BS], b[BS], got[BS];

  memset (a, 'A', BS);
  memset (b, 'B', BS);
  volenv_init (&e, mode, 64, 1 << 20);
  membackend_set_drop_on_flush_error (e.mb, true);
  assert_int_equal (volenv_try_open (&e), 0);
  assert_int_equal (hhc_write (e.vol, e.mb, a, BS, X, false), 0);
  assert_int_equal (hhc_flush (e.vol, e.mb), 0);
  assert_int_equal (flush_errors (e.vol), 0);
  membackend_fail_all (e.mb, MB_OP_FLUSH, true);
  assert_int_equal (hhc_write (e.vol, e.mb, b, BS, X, false), 0);
  assert_int_equal (hhc_flush (e.vol, e.mb), EIO);
  assert_int_equal (flush_errors (e.vol), 1);
  membackend_fail_all (e.mb, MB_OP_FLUSH, false);
  /* The test's premise: the backend forgot B. */
  assert_int_equal (membackend_cmp (e.mb, false, a, BS, X), 0);
  if (hhc_flush (e.vol, e.mb) != EIO)
    fail_msg ("mode %s: a FLUSH after a failed backend flush did not fail "
              "(the backend dropped the write of B)",
              hhc_mode_to_string (mode));
  assert_int_equal (hhc_flush (e.vol, e.mb), EIO);
  /* The sticky failures count too, and the stats say why. */
  assert_int_equal (flush_errors (e.vol), 3);
  stats_has (e.vol, "\"flush_errors\": 3");
  stats_has (e.vol, "\"backend_flush_failed\": true");

  (void)hhc_close (e.vol); /* may report the failure */
  e.vol = NULL;
  assert_int_equal (volenv_try_open (&e), 0);
  assert_int_equal (hhc_read (e.vol, e.mb, got, BS, X), 0);
  if (memcmp (got, a, BS) != 0)
    fail_msg ("mode %s: after a close that followed a failed backend "
              "flush, x is not the backend's A (%s)",
              hhc_mode_to_string (mode),
              memcmp (got, b, BS) == 0 ? "B from the cache: it was marked "
                                         "closed"
                                       : "neither A nor B");
  assert_int_equal (hhc_flush (e.vol, e.mb), 0); /* reopened */
  volenv_free (&e);
}

static void
test_sticky_flush_pt (void **state)
{
  sticky_write (HHC_MODE_PT);
}

static void
test_sticky_flush_wt (void **state)
{
  sticky_write (HHC_MODE_WT);
}

/* wb, wbflush: x=A read into the cache (clean), then zeroed or
 * trimmed (a pass-down); the backend's flushes fail: FLUSH fails; the
 * backend heals; FLUSH must still fail.
 */
static void
sticky_passdown (enum hhc_mode mode, bool trim)
{
  struct volenv e;
  unsigned char a[BS], got[BS];

  memset (a, 'A', BS);
  volenv_init (&e, mode, 64, 1 << 20);
  membackend_poke (e.mb, a, BS, X);
  membackend_set_drop_on_flush_error (e.mb, true);
  assert_int_equal (volenv_try_open (&e), 0);
  assert_int_equal (hhc_read (e.vol, e.mb, got, BS, X), 0);
  assert_memory_equal (got, a, BS);
  if (trim)
    assert_int_equal (hhc_trim (e.vol, e.mb, BS, X, false), 0);
  else
    assert_int_equal (hhc_zero (e.vol, e.mb, BS, X, false), 0);
  membackend_fail_all (e.mb, MB_OP_FLUSH, true);
  assert_int_equal (hhc_flush (e.vol, e.mb), EIO);
  membackend_fail_all (e.mb, MB_OP_FLUSH, false);
  assert_int_equal (membackend_cmp (e.mb, false, a, BS, X), 0);
  if (hhc_flush (e.vol, e.mb) != EIO)
    fail_msg ("mode %s: a FLUSH after a failed backend flush did not fail "
              "(the backend dropped the %s of x)",
              hhc_mode_to_string (mode), trim ? "trim" : "zero");
  volenv_free (&e);
}

static void
test_sticky_flush_passdown (void **state)
{
  sticky_passdown (HHC_MODE_WB, false);
  sticky_passdown (HHC_MODE_WB, true);
  sticky_passdown (HHC_MODE_WBFLUSH, false);
  sticky_passdown (HHC_MODE_WBFLUSH, true);
}

/* Wait until the volume counts a failed write-back (it has seen the
 * flusher's backend flush fail); false after TIMEOUT_MS.
 */
static bool
wait_writeback_error (struct volenv *e)
{
  struct timespec nap = { 0, 1000000 };

  for (unsigned ms = 0; ms < TIMEOUT_MS; ms++)
    {
      if (volenv_counts (e).writeback_errors > 0)
        return true;
      nanosleep (&nap, NULL);
    }
  return volenv_counts (e).writeback_errors > 0;
}

/* wb: x=A read (clean) and zeroed; the backend's flushes fail; y is
 * written and the flusher's write-back of y fails on its backend
 * flush; the backend heals: the client's FLUSH must fail, although it
 * never saw a failure itself.
 */
static void
test_sticky_flush_flusher (void **state)
{
  struct volenv e;
  unsigned char a[BS], c[BS], got[BS];

  memset (a, 'A', BS);
  memset (c, 'C', BS);
  volenv_init (&e, HHC_MODE_WB, 64, 1 << 20);
  e.conf.idle_ms = 10; /* write back as soon as the client is quiet */
  membackend_poke (e.mb, a, BS, X);
  membackend_set_drop_on_flush_error (e.mb, true);
  assert_int_equal (volenv_try_open (&e), 0);
  assert_int_equal (hhc_start (e.vol, e.mb), 0);
  assert_int_equal (hhc_read (e.vol, e.mb, got, BS, X), 0);
  assert_int_equal (hhc_zero (e.vol, e.mb, BS, X, false), 0);
  membackend_fail_all (e.mb, MB_OP_FLUSH, true);
  assert_int_equal (hhc_write (e.vol, e.mb, c, BS, Y, false), 0);
  assert_true (wait_writeback_error (&e));
  membackend_fail_all (e.mb, MB_OP_FLUSH, false);
  assert_int_equal (membackend_cmp (e.mb, false, a, BS, X), 0);
  if (hhc_flush (e.vol, e.mb) != EIO)
    fail_msg ("wb: a FLUSH after the flusher's backend flush failed did not "
              "fail (the backend dropped the zero of x)");
  volenv_free (&e);
}

/* A failed backend flush that has returned from the backend (which
 * has dropped what it had not flushed) but not yet to the volume, and
 * meanwhile a client's FLUSH, whose own backend flush finds nothing
 * left to write: the FLUSH must not succeed.  The failed flush is held
 * after the backend until the FLUSH returns, or 300 ms pass (a volume
 * that orders its backend flushes makes the FLUSH wait for it).
 *   wb: x=A read and zeroed; the flusher's write-back of y fails.
 *   pt: x=B written; another client's FLUSH fails.
 */
struct flush_race {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool failed;     /* a failed flush is being held */
  bool flush_done; /* the client's FLUSH returned */
  struct volenv *e;
  int first_result; /* pt: the failing FLUSH's result */
};

static void
flush_race_hook (void *opaque, int result)
{
  struct flush_race *fr = opaque;
  struct timespec ts;

  if (result == 0)
    return;
  pthread_mutex_lock (&fr->lock);
  if (!fr->failed) /* hold the first failure only */
    {
      fr->failed = true;
      pthread_cond_broadcast (&fr->cond);
      test_deadline (&ts, 300);
      while (!fr->flush_done)
        if (pthread_cond_timedwait (&fr->cond, &fr->lock, &ts) == ETIMEDOUT)
          break;
    }
  pthread_mutex_unlock (&fr->lock);
}

static void *
failing_flush_run (void *arg)
{
  struct flush_race *fr = arg;

  fr->first_result = hhc_flush (fr->e->vol, fr->e->mb);
  return NULL;
}

static void
flush_race (enum hhc_mode mode)
{
  struct volenv e;
  struct flush_race fr = { .failed = false, .e = &e, .first_result = -1 };
  unsigned char a[BS], b[BS], c[BS], got[BS];
  pthread_t t;
  struct timespec ts;
  int r;

  memset (a, 'A', BS);
  memset (b, 'B', BS);
  memset (c, 'C', BS);
  pthread_mutex_init (&fr.lock, NULL);
  pthread_cond_init (&fr.cond, NULL);
  volenv_init (&e, mode, 64, 1 << 20);
  e.conf.idle_ms = 10;
  membackend_poke (e.mb, a, BS, X);
  membackend_set_drop_on_flush_error (e.mb, true);
  membackend_set_flush_done_hook (e.mb, flush_race_hook, &fr);
  assert_int_equal (volenv_try_open (&e), 0);
  assert_int_equal (hhc_start (e.vol, e.mb), 0);
  if (mode == HHC_MODE_PT)
    {
      assert_int_equal (hhc_write (e.vol, e.mb, b, BS, X, false), 0);
      membackend_fail_all (e.mb, MB_OP_FLUSH, true);
      assert_int_equal (pthread_create (&t, NULL, failing_flush_run, &fr), 0);
    }
  else
    {
      assert_int_equal (hhc_read (e.vol, e.mb, got, BS, X), 0);
      assert_int_equal (hhc_zero (e.vol, e.mb, BS, X, false), 0);
      membackend_fail_all (e.mb, MB_OP_FLUSH, true);
      assert_int_equal (hhc_write (e.vol, e.mb, c, BS, Y, false), 0);
    }
  test_deadline (&ts, TIMEOUT_MS);
  pthread_mutex_lock (&fr.lock);
  while (!fr.failed)
    assert_int_not_equal (pthread_cond_timedwait (&fr.cond, &fr.lock, &ts),
                          ETIMEDOUT);
  pthread_mutex_unlock (&fr.lock);
  membackend_fail_all (e.mb, MB_OP_FLUSH, false);
  r = hhc_flush (e.vol, e.mb);
  pthread_mutex_lock (&fr.lock);
  fr.flush_done = true;
  pthread_cond_broadcast (&fr.cond);
  pthread_mutex_unlock (&fr.lock);
  if (mode == HHC_MODE_PT)
    {
      assert_true (test_join (t, TIMEOUT_MS));
      assert_int_equal (fr.first_result, EIO);
    }
  membackend_set_flush_done_hook (e.mb, NULL, NULL);
  assert_int_equal (membackend_cmp (e.mb, false, a, BS, X), 0);
  if (r != EIO)
    fail_msg ("mode %s: a FLUSH sent while %s backend flush was failing "
              "returned %d, not EIO (the backend had dropped the %s of x)",
              hhc_mode_to_string (mode),
              mode == HHC_MODE_PT ? "another FLUSH's" : "the flusher's", r,
              mode == HHC_MODE_PT ? "write" : "zero");
  volenv_free (&e);
  pthread_mutex_destroy (&fr.lock);
  pthread_cond_destroy (&fr.cond);
}

static void
test_sticky_flush_race (void **state)
{
  flush_race (HHC_MODE_WB);
  flush_race (HHC_MODE_PT);
}

/* The rule's other side, in wb: a failed write-back flush with no
 * pass-down behind it loses nothing (the blocks stay dirty and are
 * written again), so FLUSH still succeeds and the data reaches the
 * backend.
 */
static void
test_flusher_flush_error_no_passdown (void **state)
{
  struct volenv e;
  unsigned char c[BS];

  memset (c, 'C', BS);
  volenv_init (&e, HHC_MODE_WB, 64, 1 << 20);
  e.conf.idle_ms = 10;
  membackend_set_drop_on_flush_error (e.mb, true);
  assert_int_equal (volenv_try_open (&e), 0);
  assert_int_equal (hhc_start (e.vol, e.mb), 0);
  membackend_fail_all (e.mb, MB_OP_FLUSH, true);
  assert_int_equal (hhc_write (e.vol, e.mb, c, BS, Y, false), 0);
  assert_true (wait_writeback_error (&e));
  membackend_fail_all (e.mb, MB_OP_FLUSH, false);
  assert_int_equal (hhc_flush (e.vol, e.mb), 0);
  assert_int_equal (hhc_drain (e.vol, e.mb), 0);
  assert_int_equal (membackend_cmp (e.mb, true, c, BS, Y), 0);
  volenv_free (&e);
}

/* wb: another backend flush that fails while write-back's writes are
 * unflushed drops them too (the backend drops every unflushed write),
 * and write-back's own flush then succeeds with nothing left to write:
 * the blocks must stay dirty, never be clean while the backend lacks
 * them (the spin model's flaw 10).  y is zeroed (a pass-down, so that
 * a client's FLUSH flushes the backend) and x written (dirty); a
 * write-back batch runs in this thread; at the start of its backend
 * flush a hook makes another thread's FLUSH fail on the backend (which
 * drops the write-back of x) and waits for it; then the batch's flush
 * goes on and succeeds.
 */
struct other_flush {
  struct volenv *e;
  bool armed;  /* the next backend flush is the write-back's */
  bool ran;    /* the hook ran the other FLUSH */
  bool joined; /* and it returned */
  int result;  /* its result */
};

static void *
other_flush_run (void *arg)
{
  struct other_flush *o = arg;

  o->result = hhc_flush (o->e->vol, o->e->mb);
  return NULL;
}

static void
other_flush_hook (void *opaque, uint64_t offset, uint32_t count)
{
  struct other_flush *o = opaque;
  pthread_t t;

  /* Only the write-back's flush: the other FLUSH's passes through. */
  if (!o->armed)
    return;
  o->armed = false;
  membackend_fail_next (o->e->mb, MB_OP_FLUSH, 1);
  if (pthread_create (&t, NULL, other_flush_run, o) != 0)
    return;
  o->ran = true;
  o->joined = test_join (t, TIMEOUT_MS);
}

static void
test_writeback_other_flush_failed (void **state)
{
  struct volenv e;
  struct other_flush o = { .e = &e, .result = -1 };
  unsigned char x[BS], got[BS];
  long n;

  pattern_fill (x, X / BS, 0, SECTORS, 1);
  volenv_init (&e, HHC_MODE_WB, 64, 1 << 20);
  membackend_set_drop_on_flush_error (e.mb, true);
  assert_int_equal (volenv_try_open (&e), 0);
  assert_int_equal (hhc_zero (e.vol, e.mb, BS, Y, false), 0);
  assert_int_equal (membackend_count (e.mb, MB_ZEROS), 1);
  assert_int_equal (hhc_write (e.vol, e.mb, x, BS, X, false), 0);
  assert_int_equal (volenv_counts (&e).dirty, 1);

  o.armed = true;
  membackend_set_hook (e.mb, MB_OP_FLUSH, other_flush_hook, &o);
  n = flusher_batch (e.vol, e.mb, 1);
  membackend_set_hook (e.mb, MB_OP_FLUSH, NULL, NULL);
  membackend_fail_next (e.mb, MB_OP_FLUSH, 0);
  assert_true (o.ran);
  assert_true (o.joined);
  assert_int_equal (o.result, EIO);
  assert_int_equal (membackend_count (e.mb, MB_FLUSH_ERRORS), 1);
  /* The test's premise: the backend dropped the write-back of x. */
  assert_int_not_equal (membackend_cmp (e.mb, false, x, BS, X), 0);
  assert_int_not_equal (membackend_cmp (e.mb, true, x, BS, X), 0);
  if (n > 0 || volenv_counts (&e).dirty != 1)
    fail_msg ("wb: write-back cleaned x (batch returned %ld, %llu blocks "
              "dirty) although another backend flush failed meanwhile and "
              "dropped its write: the backend lacks x",
              n, (unsigned long long)volenv_counts (&e).dirty);
  assert_int_equal (n, -EIO);

  /* The fault gone, the next write-back makes x durable. */
  assert_int_equal (flusher_batch (e.vol, e.mb, 1), 1);
  assert_int_equal (volenv_counts (&e).dirty, 0);
  assert_int_equal (membackend_cmp (e.mb, true, x, BS, X), 0);
  assert_int_equal (hhc_read (e.vol, e.mb, got, BS, X), 0);
  assert_memory_equal (got, x, BS);
  /* The failed flush may have dropped the zero of y: sticky. */
  assert_int_equal (hhc_flush (e.vol, e.mb), EIO);
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
    cmocka_unit_test (test_sticky_flush_pt),
    cmocka_unit_test (test_sticky_flush_wt),
    cmocka_unit_test (test_sticky_flush_passdown),
    cmocka_unit_test (test_sticky_flush_flusher),
    cmocka_unit_test (test_sticky_flush_race),
    cmocka_unit_test (test_flusher_flush_error_no_passdown),
    cmocka_unit_test (test_writeback_other_flush_failed),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
