/* Write-back (docs/design.md §6): coalescing.  Contiguous dirty
 * blocks go back to the backend in as few writes as its preferred
 * block size and maximum request allow, never across a preferred-block
 * boundary (or as large writes when it reports none); gaps split
 * extents; a long contiguous run goes back in one batch.  The tests
 * call hhc_drain or flusher_batch themselves and read the in-memory
 * backend's write log.
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
#include "flusherenv.h"
#include "membackend.h"
#include "preopen.h"
#include "reclaim.h"
#include "vol.h"

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
    cmocka_unit_test (test_coalescing),
    cmocka_unit_test (test_coalescing_gaps),
    cmocka_unit_test (test_coalescing_unknown_preferred),
    cmocka_unit_test (test_long_run_one_batch),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
