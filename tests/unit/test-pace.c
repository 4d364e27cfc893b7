/* The flusher's pace (gateway/pace.h, docs/design.md §6.2): the log's
 * room for dirty blocks, and the watermarks that follow the larger of
 * the cache's and the log's dirty share.
 *
 * The case of issue 32: a cache of 192 MiB (49152 slots of 4 KiB) with
 * a 64 MiB log.  The cache's watermarks (20 % and 60 % of its slots)
 * lie beyond what the log holds at all, so only the log's share can
 * start write-back in time.  The last test runs the flusher thread of
 * a volume with such a log and waits for write-back (bounded waits on
 * the backend's counters, no sleeps).
 */
#include <config.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "log-helpers.h"
#include "log-format.h"
#include "pace.h"

#define MIB (UINT64_C (1) << 20)
#define SLOTS 49152u      /* 192 MiB of 4 KiB */
#define RESERVE (7 * MIB) /* 4 buffers + 3 of 1 MiB */

static struct pace_in
input (uint64_t ndirty, uint64_t log_blocks)
{
  return (struct pace_in){
    .ndirty = ndirty,
    .cache_low = SLOTS * 20 / 100,
    .cache_high = SLOTS * 60 / 100,
    .low = 20,
    .high = 60,
    .log_blocks = log_blocks,
  };
}

/* Room: the usable region over the cost of a logged block, which is
 * what the log wrote per block and never less than the block.
 */
static void
test_log_blocks (void **state)
{
  (void)state;
  /* Nothing written yet: one block costs a block. */
  assert_int_equal (pace_log_blocks (64 * MIB, RESERVE, 0, 0, BS),
                    57 * MIB / BS);
  /* Single-block segments: a 4 KiB header per block. */
  assert_int_equal (
      pace_log_blocks (64 * MIB, RESERVE, 1000 * 2 * BS, 1000, BS),
      57 * MIB / (2 * BS));
  /* Fewer bytes than blocks (counted before written): still a block. */
  assert_int_equal (pace_log_blocks (64 * MIB, RESERVE, 10, 1000, BS),
                    57 * MIB / BS);
  /* A region no larger than its reserve holds nothing. */
  assert_int_equal (pace_log_blocks (RESERVE, RESERVE, 0, 0, BS), 0);
  assert_int_equal (pace_log_blocks (MIB, RESERVE, 0, 0, BS), 0);
}

/* The lower of the two watermarks wins; no log: the cache's. */
static void
test_watermark (void **state)
{
  (void)state;
  assert_int_equal (pace_watermark (9830, 20, 0), 9830);
  assert_int_equal (pace_watermark (9830, 20, 7296), 1459);
  assert_int_equal (pace_watermark (9830, 20, 1u << 20), 9830);
  assert_int_equal (pace_watermark (29491, 60, 7296), 4377);
}

/* Without a log (or with one larger than the cache's dirty part) the
 * cache's watermarks alone decide, as before.
 */
static void
test_cache_share (void **state)
{
  struct pace_in in = input (9829, 0);
  struct pace p = pace_decide (&in);

  (void)state;
  assert_false (p.go);
  in.ndirty = 9830;
  p = pace_decide (&in);
  assert_true (p.go);
  assert_false (p.full);
  in.ndirty = 29491;
  assert_true (pace_decide (&in).full);
  /* A 512 MiB log holds all 49152 slots: no change. */
  in = input (9829, 131072);
  assert_false (pace_decide (&in).go);
  in.ndirty = 29490;
  assert_false (pace_decide (&in).full);
}

/* A 64 MiB log of single-block segments holds 7296 blocks: write-back
 * starts at 20 % of that (1459 dirty, 3 % of the cache) and goes at
 * full speed from 60 % (4377), long before the log is full of live
 * entries and far below the cache's own watermarks.
 */
static void
test_log_share (void **state)
{
  uint64_t lb = pace_log_blocks (64 * MIB, RESERVE, 2 * BS, 1, BS);
  struct pace_in in = input (1458, lb);

  (void)state;
  assert_int_equal (lb, 7296);
  assert_false (pace_decide (&in).go);
  in.ndirty = 1459;
  assert_true (pace_decide (&in).go);
  assert_false (pace_decide (&in).full);
  in.ndirty = 4376;
  assert_false (pace_decide (&in).full);
  in.ndirty = 4377;
  assert_true (pace_decide (&in).full);
  /* The log over full (a burst of unlogged writes): full speed. */
  in.ndirty = 8000;
  assert_true (pace_decide (&in).full);
}

/* The other reasons stay: the log's used share (dead entries too),
 * idle, draining, the free pool; and no batch without a dirty block.
 */
static void
test_other_reasons (void **state)
{
  struct pace_in in = input (10, 0);

  (void)state;
  assert_false (pace_decide (&in).go);
  in.log_used = 0.5;
  assert_true (pace_decide (&in).go);
  assert_false (pace_decide (&in).full);
  in.log_used = 0.75;
  assert_true (pace_decide (&in).full);
  in = input (10, 0);
  in.idle = true;
  assert_true (pace_decide (&in).go && pace_decide (&in).full);
  in = input (10, 0);
  in.draining = true;
  assert_true (pace_decide (&in).go && pace_decide (&in).full);
  in = input (10, 0);
  in.reclaim = true;
  assert_false (pace_decide (&in).go);
  assert_true (pace_decide (&in).full);
  in = input (0, 7296);
  in.log_used = 0.9;
  in.draining = true;
  assert_false (pace_decide (&in).go);
}

/* A volume of 1024 slots (dirty-low: 204 dirty) with a log of 1 MiB
 * that holds about 140 blocks (dirty-low: about 28): 40 dirty blocks,
 * written without a FLUSH (one segment: the log is far from half
 * used), never idle: only the log's share starts write-back.
 */
static void
test_flusher_follows_log (void **state)
{
  struct env e;

  (void)state;
  env_init (&e, 4096, 1024, 1, LOG_REGION_OFF + MIB);
  e.conf.idle_ms = 0;
  env_open (&e);
  assert_true (e.vol->dirty_low >= 200);
  membackend_reset_counts (e.mb);
  for (uint64_t l = 0; l < 40; l++)
    env_write (&e, l, 1, false);
  assert_true (membackend_wait_count (e.mb, MB_WRITES, 1, 30000));
  assert_true (membackend_wait_count (e.mb, MB_FLUSHES, 1, 30000));
  env_free (&e);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_log_blocks),
    cmocka_unit_test (test_watermark),
    cmocka_unit_test (test_cache_share),
    cmocka_unit_test (test_log_share),
    cmocka_unit_test (test_other_reasons),
    cmocka_unit_test (test_flusher_follows_log),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
