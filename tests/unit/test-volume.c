/* The request paths of one volume in every mode, against a shadow
 * copy of what the volume must contain: random reads, writes, trims,
 * zeros and flushes at any byte alignment; requests out of range;
 * pass-through caching nothing; concurrent writers.  (Read misses and
 * prefetch: test-volume-read.c; trim and zero: test-volume-trim.c; a
 * failed backend flush being sticky: test-flush-sticky.c; the volume:
 * volenv.h.)
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
    cmocka_unit_test (test_concurrent_writers),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
