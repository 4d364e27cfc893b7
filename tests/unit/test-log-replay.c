/* Replay of the log after the loss of the SSD (docs/design.md §5
 * and §7): what a replay gives each LBA.  (Where a replay stops:
 * test-log-replay-torn.c; a replay failing midway:
 * test-log-replay-error.c; the segments and the environment:
 * logreplay.h.)
 *
 * Tests:
 *   slot_reuse  slots written back, evicted and taken by other LBAs
 *               while their revoked entries are still in the buffer
 *               being filled; then the SSD is lost: every LBA gets
 *               back its own data, never another's.
 *   order       newest wins across segments, revoke then rewrite and
 *               rewrite then revoke, blocks adjacent in the log but
 *               not in LBA and the other way round; merged writes.
 *   max_request a backend's largest request (below a block, or not a
 *               multiple of one) cuts the replay's writes as the
 *               flusher's.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logreplay.h"

#define SR_SLOTS 16
#define SR_ROUNDS 10
#define SR_BLOCKS (SR_SLOTS * SR_ROUNDS + 8)

/* Write back every dirty block (bounded: 10 s).  A batch that cleans
 * nothing while blocks are dirty found them in the flusher thread's
 * batch: poll until that one is done (1000 quick tries failed so under
 * load, once in ~18 runs).
 */
static void
write_back_all (struct env *e)
{
  for (int i = 0; i < 10000; i++)
    {
      long n = flusher_batch (e->vol, &e->be, 2);
      assert_true (n >= 0);
      if (n == 0 && counts (e).dirty == 0)
        return;
      if (n == 0)
        nanosleep (&(struct timespec){ 0, 1000000 }, NULL);
    }
  fail_msg ("slot reuse: write-back did not finish");
}

/* Every round writes SR_SLOTS new LBAs into a cache of SR_SLOTS slots,
 * so each round's writes take the slots of the last round's blocks
 * once they are written back and evicted; write-back runs halfway
 * through a round too, so revoked entries leave the current buffer
 * (the last block moved into their place) and their slots come back
 * under other LBAs before any barrier; only every third round ends in
 * a FLUSH.  The last round is not written back: the SSD is lost and
 * the replay must give every LBA its own last version
 * (docs/open-failures.md 1; log_append's in-place check).
 */
static void
test_slot_reuse (void **state)
{
  struct env e;
  uint64_t expect[SR_BLOCKS] = { 0 };

  env_init (&e, SR_BLOCKS, SR_SLOTS, 1, LOG_REGION_OFF + 1024 * KiB);
  env_open (&e);
  for (uint64_t k = 0; k < SR_ROUNDS; k++)
    {
      for (uint64_t i = 0; i < SR_SLOTS; i++)
        {
          uint64_t lba = k * SR_SLOTS + (i * 7) % SR_SLOTS;
          env_write (&e, lba, k + 1, false);
          expect[lba] = k + 1;
          if (i == 3)
            {
              /* A rewrite in place, in the buffer being filled. */
              env_write (&e, lba, 100 + k, false);
              expect[lba] = 100 + k;
            }
          if (i == SR_SLOTS / 2 && k + 1 < SR_ROUNDS)
            write_back_all (&e);
        }
      /* A trim revokes a block of the second half (written after the
       * write-back) while the others stay in the buffer (the last one
       * moves into its place); the moved one is then rewritten in
       * place, the trimmed one anew.
       */
      uint64_t first = k * SR_SLOTS + (9 * 7) % SR_SLOTS;
      uint64_t last = k * SR_SLOTS + (15 * 7) % SR_SLOTS;
      assert_int_equal (hhc_trim (e.vol, &e.be, BS, first * BS, false), 0);
      env_write (&e, last, 200 + k, false);
      expect[last] = 200 + k;
      env_write (&e, first, 300 + k, false);
      expect[first] = 300 + k;
      if (k % 3 == 2 || k + 1 == SR_ROUNDS)
        env_flush (&e);
      if (k + 1 < SR_ROUNDS)
        write_back_all (&e);
    }
  for (uint64_t l = 0; l < SR_BLOCKS; l++)
    assert_true (reads_v (&e, l, expect[l]));
  /* Nothing more reaches the backend but the replay. */
  membackend_fail_all (e.mb, MB_OP_WRITE, true);
  env_close (&e);
  membackend_fail_all (e.mb, MB_OP_WRITE, false);
  env_new_ssd (&e);
  env_open (&e);
  check_backend_state (&e, expect, "slot reuse, after the SSD is lost");
  env_close (&e);
  env_free (&e);
  (void)state;
}

/* A trim (it reaches the backend too: writes allowed meanwhile). */
static void
trim_one (struct env *e, uint64_t lba)
{
  membackend_fail_all (e->mb, MB_OP_WRITE, false);
  assert_int_equal (hhc_trim (e->vol, &e->be, BS, lba * BS, false), 0);
  membackend_fail_all (e->mb, MB_OP_WRITE, true);
}

/* The replay's order rules (log-stream.c: runs in log order, writes
 * in LBA order): an LBA rewritten in several segments gets its newest
 * version; revoked then rewritten, the rewrite; rewritten then revoked,
 * nothing of the log; blocks adjacent in the log but scattered in LBA
 * and adjacent in LBA but written out of order each get their own
 * data; and runs of LBAs go to the backend merged.
 */
static void
test_order (void **state)
{
  struct env e;
  uint64_t expect[OR_BLOCKS] = { 0 };
  struct mb_extent ext[OR_BLOCKS];
  size_t n, merged = 0;

  quiet_env (&e, OR_BLOCKS, OR_BLOCKS, 4096 * KiB);
  for (uint64_t l = 0; l < 64; l++) /* adjacent in both */
    write_v (&e, expect, l, 1);
  env_flush (&e);
  for (uint64_t l = 64; l-- > 0;) /* adjacent in LBA, reversed in log */
    if (l % 2 == 0)
      write_v (&e, expect, l, 2);
  env_flush (&e);
  for (uint64_t i = 0; i < 150; i++) /* adjacent in log, not in LBA */
    write_v (&e, expect, 100 + (i * 97) % 300, 3);
  write_v (&e, expect, 10, 4); /* a third version, segments later */
  trim_one (&e, 5);
  env_flush (&e);
  write_v (&e, expect, 5, 5); /* revoked, then rewritten */
  write_v (&e, expect, 7, 5);
  env_flush (&e);
  trim_one (&e, 7);
  env_flush (&e);
  lose_ssd (&e);
  env_open (&e);
  expect[7] = UINT64_MAX; /* checked below */
  for (uint64_t l = 0; l < OR_BLOCKS; l++)
    if (l != 7 && !backend_has (&e, l, expect[l]))
      fail_msg ("block %llu: version %lld, expected %llu",
                (unsigned long long)l, (long long)backend_version (&e, l),
                (unsigned long long)expect[l]);
  assert_false (backend_has (&e, 7, 5));
  assert_false (backend_has (&e, 7, 1));
  /* LBAs 11-63 come from two segments in the log's first MiB, so from
   * one run: one write (10's newest version, 7's revoke and 5's may be
   * in the next run).
   */
  n = membackend_write_log (e.mb, ext, OR_BLOCKS);
  for (size_t i = 0; i < n; i++)
    merged = HHC_MAX (merged, (size_t)ext[i].count / BS);
  if (getenv ("HHC_TEST_VERBOSE"))
    fprintf (stderr, "%zu writes, the longest %zu blocks\n", n, merged);
  assert_true (n < 64 + 150);
  assert_true (merged >= 53);
  env_close (&e);
  env_free (&e);
  (void)state;
}

/* A backend whose largest request is smaller than a block (or not a
 * multiple of it) gets writes cut as the flusher cuts them
 * (make_extents): one block, or as many as fit, never a merged run.
 */
static void
max_request_cut (uint32_t max_request, uint32_t expect_max)
{
  struct env e;
  uint64_t expect[OR_BLOCKS] = { 0 };
  struct mb_extent ext[OR_BLOCKS];
  size_t n;

  quiet_env (&e, OR_BLOCKS, OR_BLOCKS, 4096 * KiB);
  for (uint64_t l = 0; l < 64; l++)
    write_v (&e, expect, l, 1);
  env_flush (&e);
  lose_ssd (&e);
  e.info.max_request = max_request;
  env_open (&e);
  for (uint64_t l = 0; l < 64; l++)
    assert_true (backend_has (&e, l, 1));
  n = membackend_write_log (e.mb, ext, OR_BLOCKS);
  assert_true (n > 0 && n <= OR_BLOCKS);
  for (size_t i = 0; i < n; i++)
    if (ext[i].count > expect_max)
      fail_msg ("a replay write of %u bytes, the backend takes %u",
                ext[i].count, max_request);
  env_close (&e);
  env_free (&e);
}

static void
test_max_request (void **state)
{
  max_request_cut (BS / 2, BS);
  max_request_cut (3 * BS + 100, 3 * BS);
  (void)state;
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_slot_reuse),
    cmocka_unit_test (test_order),
    cmocka_unit_test (test_max_request),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
