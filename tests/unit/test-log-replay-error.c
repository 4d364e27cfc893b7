/* Replay of the log after the loss of the SSD (docs/design.md §5
 * and §7) when a read or a write fails: a replay that fails midway
 * returns the error and the next start replays again; an unreadable
 * sector where the replay needs nothing is no error.  (What a replay
 * gives each LBA: test-log-replay.c; the segments and the environment:
 * logreplay.h.)
 *
 * Tests:
 *   write_error a backend write fails midway: the error comes back,
 *               the backend is not flushed, the next start replays.
 *   read_error  the same with a read of the log failing midway.
 *   dead_bad_sector  an unreadable sector in dead bytes a run reads
 *               through does not fail the replay.
 */
#include <config.h>

#include <stdbool.h>
#include <string.h>

#include "logreplay.h"

/* ---- errors: mid-replay, then a retry from the same log ---- */

#define ER_BLOCKS 4096
#define ER_LIVE 2048 /* 8 MiB: more runs than buffers */

struct fail_at {
  struct env *e;
  uint64_t writes; /* atomic */
  bool log_read;   /* fail the log's reads, else the backend's writes */
};

static void
fail_hook (void *opaque, uint64_t offset, uint32_t count)
{
  struct fail_at *f = opaque;

  if (__atomic_add_fetch (&f->writes, 1, __ATOMIC_ACQ_REL) != 3)
    return;
  if (f->log_read)
    __atomic_store_n (&to_pdev (f->e->logs[0].pd)->failing, true,
                      __ATOMIC_RELEASE);
  else
    membackend_fail_all (f->e->mb, MB_OP_WRITE, true);
  (void)offset;
  (void)count;
}

/* A replay that fails midway (a backend write, or a read of the log)
 * returns the error and starts nothing: no flush of the backend, and
 * the next start replays again, to the full state.
 */
static void
replay_error (bool log_read)
{
  struct env e;
  static uint64_t expect[ER_BLOCKS];
  struct fail_at f = { &e, 0, log_read };
  uint64_t flushes;

  memset (expect, 0, sizeof expect);
  quiet_env (&e, ER_BLOCKS, ER_LIVE + 256, 16 * 1024 * KiB);
  for (uint64_t i = 0; i < ER_LIVE; i++)
    write_v (&e, expect, (i * 1237) % ER_BLOCKS, 1);
  env_flush (&e);
  lose_ssd (&e);
  membackend_set_hook (e.mb, MB_OP_WRITE, fail_hook, &f);
  flushes = membackend_count (e.mb, MB_FLUSHES);
  assert_int_not_equal (env_try_open (&e), 0);
  assert_int_equal (membackend_count (e.mb, MB_FLUSHES), flushes);
  assert_true (f.writes >= 3);
  membackend_set_hook (e.mb, MB_OP_WRITE, NULL, NULL);
  membackend_fail_all (e.mb, MB_OP_WRITE, false);
  pdev_heal (e.logs[0].pd);
  env_open (&e);
  check_backend_state (&e, expect, "replayed again after an error");
  env_close (&e);
  env_free (&e);
}

static void
test_write_error (void **state)
{
  replay_error (false);
  (void)state;
}

static void
test_read_error (void **state)
{
  replay_error (true);
  (void)state;
}

/* A run reads through dead bytes (a superseded block, or on a
 * wrapped log the free space past the tail, where a write torn by the
 * crash may have left an unreadable sector: the scan's read ahead falls
 * back to exact reads there, test-log-open scan_bad_tail).  An unreadable sector there holds nothing the replay needs:
 * the replay reads the run's live blocks on their own and goes on.
 */
static void
test_dead_bad_sector (void **state)
{
  struct env e;
  uint64_t expect[OR_BLOCKS] = { 0 };
  struct seg_desc segs[64];
  size_t nseg;
  struct pdev *pd;
  int r;

  quiet_env (&e, OR_BLOCKS, OR_BLOCKS, 4096 * KiB);
  for (uint64_t l = 0; l < 16; l++)
    write_v (&e, expect, l, 1);
  env_flush (&e);
  for (uint64_t l = 4; l < 8; l++) /* 4-7 of the first segment die */
    write_v (&e, expect, l, 2);
  env_flush (&e);
  lose_ssd (&e);
  nseg = parse_segments (e.logs[0].cd, segs, 64);
  size_t i = 0;
  while (i < nseg && segs[i].nblocks != 16)
    i++;
  assert_true (i < nseg);
  /* Opened (the scan read it all), then the sector of the dead LBA 5
   * goes bad before the replay reads it.
   */
  assert_int_equal (hhc_open (&e.conf, &e.pre, &pbe_ops, &e.info, &e.vol), 0);
  pd = to_pdev (e.logs[0].pd);
  pd->bad_off = segs[i].off + segs[i].hdr_len + 5 * BS;
  pd->bad_len = 512;
  r = hhc_start (e.vol, &e.be);
  pd->bad_len = 0;
  if (r)
    {
      hhc_close (e.vol);
      e.vol = NULL;
      env_free (&e);
      fail_msg ("replay failed (%s) on an unreadable dead block", strerror (r));
    }
  check_backend_state (&e, expect, "a bad sector in dead bytes");
  env_close (&e);
  env_free (&e);
  (void)state;
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_write_error),
    cmocka_unit_test (test_read_error),
    cmocka_unit_test (test_dead_bad_sector),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
