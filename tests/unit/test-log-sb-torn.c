/* Torn superblock writes on a log mirror (docs/design.md §1, log-format.h):
 * an HDD's write that a power cut interrupts may leave its sectors
 * unreadable.  A mirror with one superblock copy unreadable still opens,
 * and a void that the cut tore still reads as void.
 *
 * Tests:
 *   torn_update    a new log has both copies valid; the newer copy
 *                  unreadable: the log opens on the older one (with
 *                  the SSD, and replayed without it); both copies
 *                  unreadable: refused with the read's error, the
 *                  devices unchanged.
 *   torn_void      the only mirror fails, a FLUSH falls back (block 3
 *                  goes to the backend as 42) and voids the mirror; the
 *                  power fails after the void mark is synced, before
 *                  the copies are written, and the copies' write leaves
 *                  A, B, both or neither unreadable: the restart
 *                  without the SSD opens and replays nothing (block 3
 *                  stays 42, not the log's 41); also with the power
 *                  failing again at each of the first calls of the
 *                  format that restart does.
 *   rejoined_torn  a voided mirror that joined the log again keeps its
 *                  old void mark; a torn superblock update on it later
 *                  still reads as the log, and replays everything when
 *                  it is the last copy.
 *   disagree       two mirrors, the newer copy of one unreadable (a
 *                  cut tore it there, the other mirror synced it): the
 *                  next superblock write to that mirror goes over the
 *                  unreadable copy, not its only readable one (a second
 *                  torn write would have left it none: found by
 *                  review).
 *   join_then_fail a voided mirror joins at start and the other mirror
 *                  fails at one of its first writes of the start: the
 *                  start goes on with the joining one, the failed one
 *                  is not voided until the joining one holds the log,
 *                  so a cut in that void and the SSD's loss still
 *                  replay every block (found by review: both mirrors
 *                  read void; and a failure at the start's superblock
 *                  failed the start).
 *   behind_then_fail the same with a mirror that is behind (its void
 *                  never landed: an older superblock, a shorter chain)
 *                  instead of void (found by the second review).
 *   both_fail      both mirrors fail on one write while no FLUSH can
 *                  fall back: neither is voided, and the first alone
 *                  replays every block (found by the third review).
 *   idle_proof     a mirror that fails right before the volume goes
 *                  idle is voided by the idle writer's own proof
 *                  (found by the fifth review: it stayed un-owed).
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log-helpers.h"
#include "log.h"

/* Which copy of the log on cd is the newer valid one (0: A, 1: B). */
static unsigned
newer_copy (struct hhc_dev *cd)
{
  unsigned char buf[2 * LOG_SB_SIZE];
  struct log_sb a, b;

  assert_int_equal (dev_pread (cd, buf, sizeof buf, 0), 0);
  assert_int_equal (log_sb_decode (buf, &a), 0);
  assert_int_equal (log_sb_decode (buf + LOG_SB_SIZE, &b), 0);
  return b.generation > a.generation;
}

/* Decode the superblock area of cd as the log would. */
static int
sb_state (struct hhc_dev *cd, struct log_sb *sb)
{
  struct log_sb_read rd;

  return log_dev_sb (cd, sb, &rd);
}

/* ---- a torn update ---- */

/* Replace mirror i by a blank device (it is lost). */
static void
lose_mirror (struct env *e, unsigned i)
{
  tdev_free (&e->logs[i]);
  tdev_new (&e->logs[i], LOG_REGION_OFF + 1024 * KiB, NULL, log_names[i]);
  e->pre.logs[i] = e->logs[i].pd;
}

/* The backend holds version 10 + l of blocks 0 .. n-1. */
static void
check_backend (struct env *e, uint64_t n, const char *what)
{
  for (uint64_t l = 0; l < n; l++)
    if (!backend_has (e, l, 10 + l))
      fail_msg ("%s: block %llu holds version %lld, not %llu", what,
                (unsigned long long)l, (long long)backend_version (e, l),
                (unsigned long long)(10 + l));
}

/* Open a new log, write versions 10 + l of blocks 0..7 and FLUSH,
 * with the backend refusing writes (so they are only in the cache and
 * the log); left open.
 */
static void
open_write_eight (struct env *e)
{
  env_open (e);
  /* A format writes both copies (a copy unreadable next to a blank one
   * is then a format's torn first write: log_sb_decode_mirror).
   */
  (void)newer_copy (e->logs[0].cd);
  membackend_fail_all (e->mb, MB_OP_WRITE, true);
  for (uint64_t l = 0; l < 8; l++)
    env_write (e, l, 10 + l, false);
  env_flush (e);
}

static void
write_eight (struct env *e)
{
  open_write_eight (e);
  env_close (e);
  membackend_fail_all (e->mb, MB_OP_WRITE, false);
}

/* Then mirror 1 fails once (on block 8's segment) and is voided, once
 * mirror 0 has made a barrier durable after that (block 8 again), at
 * the latest by the close.
 */
static void
void_mirror1 (struct env *e)
{
  struct log_sb sb;

  pdev_fail_once (e->logs[1].pd, 0);
  env_write (e, 8, 18, false);
  env_flush (e);
  assert_int_equal (counts (e).log_mirrors_failed, 1);
  env_write (e, 8, 18, false);
  env_flush (e);
  env_close (e);
  assert_int_equal (sb_state (e->logs[1].cd, &sb), ESTALE);
}

static void
test_torn_update (void **state)
{
  struct env e;
  struct log_sb sb;
  unsigned char *before;

  quiet_env_init (&e, 1);
  write_eight (&e);
  struct hhc_dev *cd = e.logs[0].cd;

  /* The newer copy unreadable, the SSD kept: opens, reads. */
  crashdev_set_bad (cd, newer_copy (cd) * LOG_SB_SIZE, LOG_SB_SIZE);
  assert_int_equal (sb_state (cd, &sb), 0);
  env_open (&e);
  assert_true (reads_v (&e, 5, 15));
  env_close (&e);

  /* Again, and the SSD lost: the replay brings back every block. */
  crashdev_set_bad (cd, newer_copy (cd) * LOG_SB_SIZE, LOG_SB_SIZE);
  env_new_ssd (&e);
  env_open (&e);
  for (uint64_t l = 0; l < 8; l++)
    assert_true (backend_has (&e, l, 10 + l));
  env_close (&e);

  /* Both copies unreadable: nothing to go by; refused, unchanged. */
  crashdev_set_bad (cd, 0, 2 * LOG_SB_SIZE);
  assert_int_equal (sb_state (cd, &sb), EIO);
  crashdev_set_bad (cd, 0, 0);
  before = dev_save (cd);
  crashdev_set_bad (cd, 0, 2 * LOG_SB_SIZE);
  assert_int_equal (env_try_open (&e), EIO);
  crashdev_set_bad (cd, 0, 0);
  unsigned char *after = dev_save (cd);
  assert_memory_equal (before, after, cd->size);
  free (before);
  free (after);
  env_free (&e);
  (void)state;
}

/* ---- a torn void ---- */

/* torn: which copies the void's torn write left unreadable (bit 0: A,
 * bit 1: B).  format_cut: if not 0, the power fails again at that call
 * to the mirror (write or sync) in the restart, which formats it (it
 * reads void): whatever the format had done must still read void or
 * as the new log, never as the old one (found by review: clearing the
 * void mark with copy A brought the old copy B back).
 */
static void
torn_void (unsigned torn, unsigned format_cut)
{
  struct env e;
  struct power pw;
  struct log_sb sb;

  pw_env_init (&e, &pw, 1);
  env_open (&e);
  env_write (&e, 3, 41, false);
  env_flush (&e); /* 41 under a barrier in the log */
  /* The next log write fails (once); the FLUSH falls back, writes 42
   * back and voids the mirror: the mark (call 1), a sync (2), the
   * copies (3), a sync (4).  The cut comes before call 3.
   */
  pdev_fail_once (e.logs[0].pd, 0);
  power_arm_after_fault (&pw, 3, 7, false, e.logs[0].pd);
  env_write (&e, 3, 42, false);
  env_flush (&e);
  assert_int_equal (counts (&e).log_mirrors_failed, 1);
  if (!power_crashed (&pw))
    fail_msg ("the void made fewer than 3 writes and syncs: is its mark "
              "written and synced before the copies?");
  env_close (&e);
  power_restore (&pw);
  struct hhc_dev *cd = e.logs[0].cd;
  if (torn)
    crashdev_set_bad (cd, (torn & 1 ? 0 : LOG_SB_SIZE),
                      (torn == 3 ? 2 : 1) * LOG_SB_SIZE);
  assert_int_equal (sb_state (cd, &sb), ESTALE);
  /* The mark holds the newest generation the copies may hold. */
  crashdev_set_bad (cd, 0, 0);
  unsigned char copies[2 * LOG_SB_SIZE];
  struct log_sb a, b;
  assert_int_equal (dev_pread (cd, copies, sizeof copies, 0), 0);
  assert_int_equal (log_sb_decode (copies, &a), 0);
  assert_int_equal (log_sb_decode (copies + LOG_SB_SIZE, &b), 0);
  assert_true (sb.generation >= HHC_MAX (a.generation, b.generation));
  if (torn)
    crashdev_set_bad (cd, (torn & 1 ? 0 : LOG_SB_SIZE),
                      (torn == 3 ? 2 : 1) * LOG_SB_SIZE);

  pw_env_new_ssd (&e, &pw);
  if (format_cut)
    {
      power_arm_after_fault (&pw, format_cut, 11, false, e.logs[0].pd);
      if (env_try_open (&e) == 0)
        env_close (&e);
      /* The format's calls: copy A and the region start, a sync, copy
       * B, a sync, two superblocks, the mark (and its sync): the cut
       * falls in it.
       */
      if (format_cut <= 7 && !power_crashed (&pw))
        fail_msg ("no cut at the format's call %u", format_cut);
      if (power_crashed (&pw))
        power_restore (&pw);
      else
        power_arm (&pw, 0, false, 0, false);
      pw_env_new_ssd (&e, &pw);
    }
  assert_int_equal (env_try_open (&e), 0);
  if (!backend_has (&e, 3, 42))
    fail_msg ("torn copies %u, format cut at %u: block 3 holds version %lld "
              "after the SSD loss, not 42: the voided log was replayed",
              torn, format_cut, (long long)backend_version (&e, 3));
  assert_true (reads_v (&e, 3, 42));
  env_close (&e);
  pw_env_free (&e, &pw);
}

static void
test_torn_void (void **state)
{
  for (unsigned torn = 0; torn < 4; torn++)
    torn_void (torn, 0);
  /* Copy A unreadable or not, B the old log: a cut at each of the
   * format's first calls.
   */
  for (unsigned cut = 1; cut <= 10; cut++)
    {
      torn_void (0, cut);
      torn_void (1, cut);
    }
  (void)state;
}

/* ---- a mirror voided, joined again, then torn ---- */

static void
test_rejoined_torn (void **state)
{
  struct env e;
  struct log_sb sb, mark;

  quiet_env_init (&e, 2);
  open_write_eight (&e);
  void_mirror1 (&e);
  struct hhc_dev *cd = e.logs[1].cd;
  assert_int_equal (sb_state (cd, &mark), ESTALE);

  /* It joins again (both copies rewritten, newer than its mark). */
  env_open (&e);
  env_write (&e, 9, 19, false);
  env_flush (&e);
  env_close (&e);
  assert_int_equal (sb_state (cd, &sb), 0);
  assert_true (sb.generation > mark.generation);
  unsigned char m[LOG_SB_SIZE];
  assert_int_equal (dev_pread (cd, m, sizeof m, LOG_VOID_OFF), 0);
  assert_int_equal (log_sb_decode (m, &mark), ESTALE); /* still there */

  /* Its newer copy torn, mirror 0 and the SSD lost: mirror 1 is the
   * log, and the replay brings back every block.
   */
  crashdev_set_bad (cd, newer_copy (cd) * LOG_SB_SIZE, LOG_SB_SIZE);
  assert_int_equal (sb_state (cd, &sb), 0);
  lose_mirror (&e, 0);
  env_new_ssd (&e);
  membackend_fail_all (e.mb, MB_OP_WRITE, false);
  env_open (&e);
  check_backend (&e, 10, "after the replay from the rejoined mirror");
  env_close (&e);
  env_free (&e);
  (void)state;
}

/* ---- mirrors whose copies disagree ---- */

static void
test_disagree (void **state)
{
  struct env e;

  quiet_env_init (&e, 2);
  open_write_eight (&e);
  env_close (&e);
  struct hhc_dev *cd = e.logs[1].cd;
  unsigned torn = newer_copy (cd);
  crashdev_set_bad (cd, torn * LOG_SB_SIZE, LOG_SB_SIZE);
  struct pdev *p = to_pdev (e.logs[1].pd);
  __atomic_store_n (&p->nsb, 0, __ATOMIC_RELEASE);
  env_open (&e);
  env_write (&e, 8, 18, false);
  env_flush (&e);
  env_close (&e);
  assert_true (__atomic_load_n (&p->nsb, __ATOMIC_ACQUIRE) > 0);
  if (p->sb_writes[0] != torn * LOG_SB_SIZE)
    fail_msg ("the first superblock write to the mirror went to offset %llu, "
              "over its only readable copy, not over the torn one at %u",
              (unsigned long long)p->sb_writes[0], torn * LOG_SB_SIZE);
  /* Mirror 0 and the SSD lost: mirror 1 replays everything. */
  lose_mirror (&e, 0);
  env_new_ssd (&e);
  membackend_fail_all (e.mb, MB_OP_WRITE, false);
  env_open (&e);
  check_backend (&e, 9, "replayed from mirror 1");
  env_close (&e);
  env_free (&e);
  (void)state;
}

/* ---- a mirror that fails while the other one joins ---- */

/* Mirror 1 fails for good (on block 8's segment); its void cannot land
 * before the close.  Healed, it holds its old superblock and a chain
 * that ends before block 8: it is behind.
 */
static void
leave_mirror1_behind (struct env *e)
{
  struct log_sb s0, s1;

  pdev_fail_after (e->logs[1].pd, 0);
  env_write (e, 8, 18, false);
  env_flush (e);
  env_close (e);
  pdev_heal (e->logs[1].pd);
  assert_int_equal (sb_state (e->logs[0].cd, &s0), 0);
  assert_int_equal (sb_state (e->logs[1].cd, &s1), 0);
  assert_true (s1.generation <= s0.generation);
}

/* One try: mirror 1 was voided (or, if behind, left behind), and
 * mirror 0 fails on its (k+1)-th write of the restart.  Whether the
 * start got through (with mirror 0 failed and a cut in the calls to it
 * after that); if so, the SSD's loss after the cut replays every block.
 */
static bool
join_then_fail (uint64_t k, bool behind)
{
  struct env e;
  struct power pw;

  pw_env_init (&e, &pw, 2);
  open_write_eight (&e);
  if (behind)
    leave_mirror1_behind (&e);
  else
    void_mirror1 (&e);

  /* Mirror 1 joins; mirror 0 fails on its (k+1)-th write, and the power
   * fails in the first calls to it after that: its void, if it is owed
   * one before mirror 1 holds the log.  Slow syncs on mirror 1: the
   * writer, idle after the re-log's barrier, would have time to void
   * mirror 0 before mirror 1's superblocks land, if it were owed a
   * void then.
   */
  pdev_fail_once (e.logs[0].pd, k);
  power_arm_after_fault (&pw, 3, 7, false, e.logs[0].pd);
  pdev_set_sync_delay (e.logs[1].pd, 100000);
  int r = env_try_open (&e);
  pdev_set_sync_delay (e.logs[1].pd, 0);
  /* The start goes on with the joining mirror (found by review: a
   * superblock that only mirror 0 could take failed it).
   */
  if (r)
    fail_msg ("%s: the start failed (%s) with mirror 0 failing at its write "
              "%llu",
              behind ? "behind" : "void", strerror (r),
              (unsigned long long)k + 1);
  bool through = r == 0 && counts (&e).log_mirrors_failed == 1;
  if (r == 0)
    {
      env_write (&e, 9, 19, false);
      env_flush (&e);
      env_close (&e);
    }
  through &= power_crashed (&pw);
  if (power_crashed (&pw))
    power_restore (&pw);
  else
    power_arm (&pw, 0, false, 0, false);
  if (through)
    {
      pw_env_new_ssd (&e, &pw);
      membackend_fail_all (e.mb, MB_OP_WRITE, false);
      env_open (&e);
      check_backend (&e, 9, "after the cut and the SSD's loss");
      env_close (&e);
    }
  pw_env_free (&e, &pw);
  return through;
}

/* Mirror 0 fails at each of its first 12 writes of the restart in turn:
 * every start goes on, none may lose anything, and in at least one the
 * cut comes after mirror 0's failure.
 */
static void
test_join_then_fail (void **state)
{
  unsigned through = 0;

  for (uint64_t k = 0; k < 12; k++)
    through += join_then_fail (k, false);
  assert_true (through > 0);
  (void)state;
}

/* The same with mirror 1 behind (a void that never landed), not void. */
static void
test_behind_then_fail (void **state)
{
  unsigned through = 0;

  for (uint64_t k = 0; k < 12; k++)
    through += join_then_fail (k, true);
  assert_true (through > 0);
  (void)state;
}

/* ---- two mirrors that fail at once ---- */

/* Both mirrors fail on the same segment write (once each: their disks
 * are fine again at once) while the backend is out, so no FLUSH can
 * fall back: neither may be voided, since a void is owed only once a
 * healthy mirror holds the log (found by review: the failure seen
 * first was voided, its disk being fine, and the last mirror kept
 * alone).  Then the SSD and mirror 1 are lost: mirror 0 replays
 * every block.
 */
static void
test_both_fail (void **state)
{
  struct env e;
  struct log_sb sb;
  unsigned char blk[BS];

  quiet_env_init (&e, 2);
  open_write_eight (&e); /* the backend refuses writes from here */
  pdev_fail_once (e.logs[0].pd, 0);
  pdev_fail_once (e.logs[1].pd, 0);
  memset (blk, 0x5a, sizeof blk);
  assert_int_equal (hhc_write (e.vol, &e.be, blk, BS, 20 * BS, false), 0);
  (void)hhc_flush (e.vol, &e.be); /* falls back; the backend refuses */
  assert_int_equal (counts (&e).log_mirrors_failed, 2);
  (void)hhc_close (e.vol); /* log_stop voids what is owed */
  e.vol = NULL;
  for (unsigned i = 0; i < 2; i++)
    if (sb_state (e.logs[i].cd, &sb) != 0)
      fail_msg ("mirror %u was voided while no healthy mirror held the log", i);
  lose_mirror (&e, 1);
  env_new_ssd (&e);
  membackend_fail_all (e.mb, MB_OP_WRITE, false);
  env_open (&e);
  check_backend (&e, 8, "replayed from mirror 0");
  env_close (&e);
  env_free (&e);
  (void)state;
}

/* ---- a failure right before the volume goes idle ---- */

/* Mirror 1 fails once on the last segment before the volume goes idle:
 * no later barrier proves mirror 0 outlived it, so the idle writer
 * makes that proof with a sync of its own (log_prove_failed) and voids
 * mirror 1, without a close (polled for at most 20 s; the writer's idle
 * tries come every second).
 */
static void
test_idle_proof (void **state)
{
  struct env e;
  struct log_sb sb;
  int r = 0;

  quiet_env_init (&e, 2);
  open_write_eight (&e);
  pdev_fail_once (e.logs[1].pd, 0);
  env_write (&e, 8, 18, false);
  env_flush (&e);
  assert_int_equal (counts (&e).log_mirrors_failed, 1);
  for (unsigned n = 0; n < 2000 && (r = sb_state (e.logs[1].cd, &sb)) != ESTALE;
       n++)
    nanosleep (&(struct timespec){ 0, 10000000 }, NULL);
  if (r != ESTALE)
    fail_msg ("the failed mirror was not voided while the volume was idle");
  env_close (&e);
  env_free (&e);
  (void)state;
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_torn_update),
    cmocka_unit_test (test_torn_void),
    cmocka_unit_test (test_rejoined_torn),
    cmocka_unit_test (test_disagree),
    cmocka_unit_test (test_behind_then_fail),
    cmocka_unit_test (test_both_fail),
    cmocka_unit_test (test_idle_proof),
    cmocka_unit_test (test_join_then_fail),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
