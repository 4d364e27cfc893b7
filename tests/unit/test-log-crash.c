/* The log's crash campaign (docs/design.md §3, §5 and §7): a seeded
 * campaign of power cuts on a small, wrapping log (the power switch of
 * log-helpers.h): each run's configuration, the cut, the recovery
 * (reopen or replay) and the checks after it, the seeds under their
 * watchdog.  A run's devices, operations and workload are in
 * logcrash-run.c (logcrash.h).
 *
 * Tests:
 *   random_crashes  reopen normally, or throw the SSD away and replay
 *                   the log (sometimes with a second power cut during
 *                   the recovery); a write the cut lost may land in
 *                   part (some 4 KiB pieces), and on a log one lost
 *                   write a cut leaves its sectors unreadable
 *                   (torn_tails: the newest, sometimes an older one or
 *                   the FUA write in flight; until a durable write
 *                   covers them; a superblock's too); in a
 *                   quarter of the runs a log mirror's write fails
 *                   once and the cut falls in its void (run_cut), and
 *                   with two mirrors the other one may fail once in
 *                   the recovery (start_fault);
 *                   every sector is checked
 *                   against the campaigns' oracle (oracle.h).  Each
 *                   seed runs under a watchdog: a seed not done after
 *                   HHC_TEST_TIMEOUT seconds is a HANG failure.
 *                   HHC_TEST_SEED (first seed),
 *                   HHC_TEST_ROUNDS (how many), HHC_TEST_KEEP_GOING=1
 *                   (report every failing seed, not just the first),
 *                   HHC_TEST_OUTAGES=0 (no backend outages).
 */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logcrash.h"

struct totals {
  uint64_t runs, cut_mid, reopen, replay, recovery_cut, writes, flushes;
  uint64_t segments, wrapped, full_waits, relogged, reclaimed, revokes;
  uint64_t head_persists, mirrors2, backend_reverts, ops, torn_tails;
  uint64_t torn_sbs, torn_older, torn_fua, fua_cuts, partial, void_runs;
  uint64_t void_cuts;
  uint64_t start_faults;
  uint64_t redone, redo_runs, redo_cut, checkpoints;
};

static void
add_log_stats (struct run *r, struct totals *t)
{
  struct log_stats ls;

  log_get_stats (r->vol->log, &ls);
  t->segments += ls.segments;
  t->wrapped += ls.bytes > ls.region_size;
  t->full_waits += ls.full_waits;
  t->relogged += ls.relogged;
  t->reclaimed += ls.reclaimed;
  t->revokes += ls.revokes;
  t->head_persists += ls.head_persists;
  t->checkpoints += ls.checkpoints;
}

/* After the restart: the volume works, and after a drain the backend
 * holds exactly what the volume reads.
 */
static void
check_usable (struct run *r)
{
  unsigned char blk[BS];

  set_phase (r, "after recovery");
  for (int i = 0; i < 6; i++)
    {
      uint64_t lba = pick_lba (r);
      do_write (r, lba * SECTORS, SECTORS, false);
    }
  do_flush (r, true);
  for (uint64_t l = 0; l < r->nblocks; l++)
    {
      T_ASSERT ((hhc_read (r->vol, &r->be, blk, BS, l * BS)) == 0);
      if (membackend_cmp (r->mb, true, blk, BS, l * BS) != 0)
        RFAIL (r,
               "after a drain, block %llu reads other data than the "
               "backend holds",
               (unsigned long long)l);
    }
}

/* Open with a power cut armed within the first max_at counted calls;
 * true if it came (the volume is closed again, the power back on).
 */
static bool
open_cut (struct run *r, uint64_t max_at, unsigned seed)
{
  power_arm (&r->pw, 1 + test_rand_below (&r->rng, max_at),
             test_rand_below (&r->rng, 2), seed, test_rand_below (&r->rng, 2));
  run_open (r);
  if (!power_crashed (&r->pw))
    {
      power_arm (&r->pw, 0, false, 0, false);
      return false;
    }
  run_close (r);
  power_restore (&r->pw);
  return true;
}

static const uint32_t slot_choice[] = { 64, 128, 256, 400 };

/* The volume's configuration, drawn from the seed. */
static void
run_conf (struct run *r, uint64_t seed)
{
  static const unsigned low_choice[] = { 2, 5, 10, 20 };

  hhc_conf_init (&r->conf);
  memset (&r->pre, 0, sizeof r->pre);
  r->conf.mode = HHC_MODE_HHC;
  /* ssd-sync=checkpoint (a FLUSH syncs only the log) in two seeds out of
   * three, from the seed so that the draws below stay as they were.
   */
  r->conf.wal = seed % 3 != 0;
  /* Barriers in flight (1: one segment at a time) and whether the log
   * devices offer FUA, from the seed too (the draws below unchanged).
   */
  r->conf.log_inflight = (unsigned[]){ 1, 2, 4 }[seed / 3 % 3];
  /* seq-cutoff, from the seed too: off; 1 byte (every request bypasses
   * the cache: writes go to the backend over dirty blocks); 8K (the
   * 2-3 block writes, and streams).
   */
  r->conf.seq_cutoff = (uint64_t[]){ 0, 1, 2 * BS, 0 }[seed % 4];
  /* promote=nhit (N = 2, a window of 64 misses) in every other pair of
   * seeds, from the seed too.
   */
  if (seed / 2 % 2)
    {
      r->conf.promote = HHC_PROMOTE_NHIT;
      r->conf.promote_window = 64;
    }
  r->conf.msgfn = test_msg;
  r->conf.nlogs = r->nlogs;
  r->conf.segment_size = SEG;
  r->conf.log_buffers = 2 + test_rand_below (&r->rng, 3);
  r->conf.writeback_threads = 2;
  if (test_rand_below (&r->rng, 3))
    {
      r->conf.dirty_low = low_choice[test_rand_below (&r->rng, 4)];
      r->conf.dirty_high
          = r->conf.dirty_low + 5 + test_rand_below (&r->rng, 30);
    }
  else
    {
      /* Write-back mostly when the log fills up: the log runs full. */
      r->conf.dirty_low = 70;
      r->conf.dirty_high = 85;
    }
  r->conf.dirty_max = 90;
  for (unsigned i = 0; i < r->nlogs; i++)
    {
      tdev_new (&r->logs[i], r->log_size, &r->pw, log_names[i]);
      pdev_set_fua (r->logs[i].pd, seed / 9 % 2 == 0);
      r->conf.log_paths[i] = log_names[i];
      r->pre.logs[i] = r->logs[i].pd;
    }
}

/* The devices, the backend (every block at version 0) and the
 * volume's configuration of seed's run.
 */
static void
run_setup (struct run *r, uint64_t seed)
{
  static const uint64_t region_choice[]
      = { 352 * KiB, 384 * KiB, 512 * KiB, 1024 * KiB, 3072 * KiB };
  unsigned char blk[BS];

  r->seed = seed;
  r->rng = seed * 0x9E3779B97F4A7C15ull + 1;
  set_phase (r, "setup");
  r->nblocks = (1 + test_rand_below (&r->rng, 2)) * 256;
  r->nlogs = 1 + test_rand_below (&r->rng, 2);
  r->log_size = LOG_REGION_OFF + region_choice[test_rand_below (&r->rng, 5)];
  r->buf = malloc (3 * BS);
  T_ASSERT ((r->buf) != NULL);
  r->mb = membackend_new (r->nblocks * BS);
  T_ASSERT ((r->mb) != NULL);
  power_init (&r->pw, r->mb);
  r->pw.torn_tails = true; /* a torn write may leave its sectors unreadable */
  r->be = (struct pbe){ r->mb, &r->pw };
  model_init (&r->m, r->nblocks * SECTORS, SECTORS);
  for (uint64_t l = 0; l < r->nblocks; l++)
    {
      pattern_fill (blk, l, 0, SECTORS, 0);
      membackend_poke (r->mb, blk, BS, l * BS);
      for (uint32_t s = 0; s < SECTORS; s++)
        model_set (&r->m, l * SECTORS + s, 0);
    }
  r->info = membackend_info (r->mb, test_rand_below (&r->rng, 2) ? 16384 : 0,
                             "membackend:log");
  run_conf (r, seed);
  new_ssd (r, slot_choice[test_rand_below (&r->rng, 4)]);
  snprintf (r->cfg, sizeof r->cfg,
            "%u log%s of %llu KiB, %u buffers, %u in flight%s, %u slots, "
            "%llu blocks, dirty %u/%u/%u, preferred block %u, "
            "seq-cutoff %llu, promote %s",
            r->nlogs, r->nlogs > 1 ? "s" : "",
            (unsigned long long)(r->log_size - LOG_REGION_OFF) / KiB,
            r->conf.log_buffers, r->conf.log_inflight,
            seed / 9 % 2 == 0 ? " (FUA)" : "", r->nslots,
            (unsigned long long)r->nblocks, r->conf.dirty_low,
            r->conf.dirty_high, r->conf.dirty_max, r->info.preferred_block,
            (unsigned long long)r->conf.seq_cutoff,
            hhc_promote_to_string (r->conf.promote));
}

/* Runs whose cut waits for a mirror's fault: a quarter, from the seed
 * (runs of 5 seeds: 5-9, 25-29, ...; so the 12 seeds of a sanitized
 * run have some).
 */
static bool
void_cut_run (uint64_t seed)
{
  return seed / 5 % 4 == 1;
}

/* The cut: at any counted call (device write or sync, backend write,
 * trim, zero or flush), or only at a sync or backend flush; or, in a
 * void_cut_run, a write to one log mirror fails once (it heals at
 * once) and the cut falls on one of the first four writes and syncs to
 * it after that: what the log does with a failed mirror, its void (the
 * void mark, a sync, both copies, a sync), at once with two mirrors,
 * after the FLUSH that falls back with one.  Then the volume is closed
 * and the snapshot put back.
 */
static void
run_cut (struct run *r, struct totals *t)
{
  set_phase (r, "workload");
  bool revert = test_rand_below (&r->rng, 2);
  t->backend_reverts += revert;
  struct hhc_dev *faulty = NULL;
  if (void_cut_run (r->seed))
    {
      r->faulty = test_rand_below (&r->rng, r->nlogs);
      faulty = r->logs[r->faulty].pd;
      pdev_fail_once (faulty, test_rand_below (&r->rng, 60));
      power_arm_after_fault (&r->pw, 1 + test_rand_below (&r->rng, 4),
                             (unsigned)r->seed, revert, faulty);
      r->no_outages = r->nlogs == 1;
      t->void_runs++;
    }
  else if (test_rand_below (&r->rng, 2))
    power_arm (&r->pw, 1 + test_rand_below (&r->rng, 1500), false,
               (unsigned)r->seed, revert);
  else
    power_arm (&r->pw, 1 + test_rand_below (&r->rng, 400), true,
               (unsigned)r->seed, revert);
  workload (r, 250 + test_rand_below (&r->rng, 250));
  if (faulty)
    pdev_heal (faulty); /* a fault that did not come yet never will */
  t->ops += __atomic_load_n (&r->pw.ops, __ATOMIC_ACQUIRE);
  if (power_crashed (&r->pw))
    {
      t->cut_mid++;
      t->void_cuts += faulty != NULL;
    }
  else
    power_cut (&r->pw);
  add_log_stats (r, t);
  set_phase (r, "close after the cut");
  run_close (r);
  power_restore (&r->pw);
}

/* In a void_cut_run with two mirrors, half the time the other mirror
 * (the one that did not fail in the workload, while the faulty one,
 * voided or behind, joins) fails once at one of its first writes of
 * the recovery: the start goes on with the joining mirror and voids
 * neither before that one holds the log.  start_fault_end heals it.
 */
static void
start_fault (struct run *r, struct totals *t)
{
  if (!void_cut_run (r->seed) || r->nlogs < 2 || test_rand_below (&r->rng, 2))
    return;
  pdev_fail_once (r->logs[!r->faulty].pd, test_rand_below (&r->rng, 8));
  t->start_faults++;
}

static void
start_fault_end (struct run *r)
{
  for (unsigned i = 0; i < r->nlogs; i++)
    pdev_heal (r->logs[i].pd);
}

/* (a) Power back on: reload the cache, redoing the log into it (FLUSH
 * synced only the log).  Sometimes the power fails again during the
 * redo.
 */
static void
run_reopen (struct run *r, struct totals *t)
{
  struct hhc_counts c;

  set_phase (r, "reopen");
  t->reopen++;
  /* The redo depends on how the last run flushed, not this one. */
  if (test_rand_below (&r->rng, 4) == 0)
    r->conf.wal = !r->conf.wal;
  start_fault (r, t);
  if (test_rand_below (&r->rng, 3) == 0)
    {
      set_phase (r, "reopen, cut during the redo");
      if (open_cut (r, 60, (unsigned)r->seed + 3))
        {
          t->redo_cut++;
          set_phase (r, "reopen after a cut during the redo");
          run_open (r);
        }
    }
  else
    run_open (r);
  start_fault_end (r);
  hhc_get_counts (r->vol, &c);
  t->redone += c.log_redone;
  t->redo_runs += c.log_redone > 0;
  verify_all (r, false, "reopened volume");
}

/* (b) The SSD is lost: a blank one, and the log is replayed into the
 * backend at start.  Sometimes the power fails again during the
 * recovery.
 */
static void
run_replay (struct run *r, struct totals *t)
{
  t->replay++;
  set_phase (r, "replay");
  new_ssd (r, slot_choice[test_rand_below (&r->rng, 4)]);
  start_fault (r, t);
  if (test_rand_below (&r->rng, 3) == 0)
    {
      set_phase (r, "replay, cut during recovery");
      if (open_cut (r, 120, (unsigned)r->seed + 1))
        {
          t->recovery_cut++;
          /* Again with what is left of the new SSD, or another. */
          if (test_rand_below (&r->rng, 2))
            new_ssd (r, slot_choice[test_rand_below (&r->rng, 4)]);
          set_phase (r, "replay after a cut during recovery");
          run_open (r);
        }
    }
  else
    run_open (r);
  start_fault_end (r);
  verify_all (r, true, "backend after the replay");
  verify_all (r, false, "volume after the replay");
}

static void
one_run (struct run *r, uint64_t seed, struct totals *t)
{
  run_setup (r, seed);
  set_phase (r, "first open");
  run_open (r);

  /* Some runs start from a volume that was closed and reopened. */
  if (seed % 4 == 0)
    {
      set_phase (r, "before the reopen");
      workload (r, 80);
      run_close (r);
      model_flush_all (&r->m); /* close makes everything durable */
      run_open (r);
    }
  run_cut (r, t);
  if (test_rand_below (&r->rng, 2) == 0)
    run_reopen (r, t);
  else
    run_replay (r, t);
  check_usable (r);
  run_close (r);

  t->runs++;
  t->writes += r->nwrites;
  t->flushes += r->nflushes;
  t->mirrors2 += r->nlogs == 2;
  t->torn_tails += r->pw.torn;
  t->torn_sbs += r->pw.torn_sb;
  t->torn_older += r->pw.torn_older;
  t->torn_fua += r->pw.torn_fua;
  t->fua_cuts += r->pw.fua_cuts;
  t->partial += r->pw.partial;
  tdev_free (&r->ssd);
  for (unsigned i = 0; i < r->nlogs; i++)
    tdev_free (&r->logs[i]);
  power_destroy (&r->pw);
  membackend_free (r->mb);
  model_free (&r->m);
  free (r->buf);
}

struct seed_job {
  struct run r;
  uint64_t seed;
  struct totals t;
  char msg[MSG_MAX];
};

static void *
seed_thread (void *p)
{
  struct seed_job *j = p;

  worker_msg = j->msg;
  one_run (&j->r, j->seed, &j->t);
  return NULL;
}

static void
test_random_crashes (void **state)
{
  uint64_t first = test_env_u64 ("HHC_TEST_SEED", 1);
  uint64_t n = test_env_u64 ("HHC_TEST_ROUNDS", SANITIZED ? 12 : 50);
  /* A seed that has not finished after this long hangs. */
  unsigned timeout_s = test_env_u64 ("HHC_TEST_TIMEOUT", SANITIZED ? 300 : 60);
  /* HHC_TEST_KEEP_GOING=1: report every failing seed, not the first. */
  bool keep_going = test_env_u64 ("HHC_TEST_KEEP_GOING", 0);
  struct totals t = { 0 };
  uint64_t failed = 0;
  char first_msg[MSG_MAX] = "";

  printf ("log crash campaign: seeds %llu..%llu (replay one with "
          "HHC_TEST_SEED=n HHC_TEST_ROUNDS=1)\n",
          (unsigned long long)first, (unsigned long long)(first + n - 1));
  fflush (stdout);
  for (uint64_t seed = first; seed < first + n; seed++)
    {
      struct seed_job *j = calloc (1, sizeof *j);
      pthread_t th;
      assert_non_null (j);
      j->seed = seed;
      assert_int_equal (pthread_create (&th, NULL, seed_thread, j), 0);
      if (!test_join (th, timeout_s * 1000))
        /* Leaked on purpose: its threads are stuck. */
        {
          const char *ph = get_phase (&j->r); /* after cfg was set */
          snprintf (j->msg, sizeof j->msg,
                    "seed %llu (%s; %s): HANG: not finished after %u s",
                    (unsigned long long)seed, ph,
                    strcmp (ph, "setup") ? j->r.cfg : "?", timeout_s);
        }
      if (j->msg[0])
        {
          printf ("FAILED: %s\n", j->msg);
          fflush (stdout);
          if (failed++ == 0)
            snprintf (first_msg, sizeof first_msg, "%s", j->msg);
          if (!keep_going)
            break;
          continue; /* leaked: it may still be in use */
        }
      t.runs += j->t.runs;
      t.cut_mid += j->t.cut_mid;
      t.reopen += j->t.reopen;
      t.replay += j->t.replay;
      t.recovery_cut += j->t.recovery_cut;
      t.writes += j->t.writes;
      t.flushes += j->t.flushes;
      t.segments += j->t.segments;
      t.wrapped += j->t.wrapped;
      t.full_waits += j->t.full_waits;
      t.relogged += j->t.relogged;
      t.reclaimed += j->t.reclaimed;
      t.revokes += j->t.revokes;
      t.head_persists += j->t.head_persists;
      t.checkpoints += j->t.checkpoints;
      t.redone += j->t.redone;
      t.redo_runs += j->t.redo_runs;
      t.redo_cut += j->t.redo_cut;
      t.mirrors2 += j->t.mirrors2;
      t.backend_reverts += j->t.backend_reverts;
      t.torn_tails += j->t.torn_tails;
      t.torn_sbs += j->t.torn_sbs;
      t.torn_older += j->t.torn_older;
      t.torn_fua += j->t.torn_fua;
      t.fua_cuts += j->t.fua_cuts;
      t.partial += j->t.partial;
      t.void_runs += j->t.void_runs;
      t.void_cuts += j->t.void_cuts;
      t.start_faults += j->t.start_faults;
      t.ops += j->t.ops;
      free (j);
    }
  printf ("%llu runs (%llu with 2 mirrors, %llu cut mid-workload, %llu "
          "with the backend losing unflushed writes): %llu reopened, %llu "
          "replayed (%llu cut again during recovery); %llu writes, %llu "
          "completed flushes, %llu counted calls; log: %llu segments, "
          "%llu runs wrapped, %llu full waits, %llu relogged, %llu "
          "reclaimed, %llu revokes, %llu head persists, %llu "
          "checkpoints; %llu reopens redid %llu blocks (%llu cut during "
          "the redo); %llu torn log writes left unreadable (%llu of "
          "superblocks, %llu older than the newest lost, %llu a FUA write "
          "in flight); %llu cuts on a FUA write in flight; %llu lost "
          "writes landed in part; "
          "%llu runs with a mirror's fault (%llu cut in "
          "the calls to it after the fault: its void; %llu with the other "
          "mirror's fault in the recovery)\n",
          (unsigned long long)t.runs, (unsigned long long)t.mirrors2,
          (unsigned long long)t.cut_mid, (unsigned long long)t.backend_reverts,
          (unsigned long long)t.reopen, (unsigned long long)t.replay,
          (unsigned long long)t.recovery_cut, (unsigned long long)t.writes,
          (unsigned long long)t.flushes, (unsigned long long)t.ops,
          (unsigned long long)t.segments, (unsigned long long)t.wrapped,
          (unsigned long long)t.full_waits, (unsigned long long)t.relogged,
          (unsigned long long)t.reclaimed, (unsigned long long)t.revokes,
          (unsigned long long)t.head_persists,
          (unsigned long long)t.checkpoints, (unsigned long long)t.redo_runs,
          (unsigned long long)t.redone, (unsigned long long)t.redo_cut,
          (unsigned long long)t.torn_tails, (unsigned long long)t.torn_sbs,
          (unsigned long long)t.torn_older, (unsigned long long)t.torn_fua,
          (unsigned long long)t.fua_cuts, (unsigned long long)t.partial,
          (unsigned long long)t.void_runs, (unsigned long long)t.void_cuts,
          (unsigned long long)t.start_faults);
  /* The cut fell in voids (in the calls to a mirror after its fault). */
  if (!failed && t.void_runs >= 5 && t.void_cuts == 0)
    fail_msg ("%llu runs with a mirror's fault, no cut fell after it",
              (unsigned long long)t.void_runs);
  /* The write-ahead restart was exercised (a FLUSH commits no SSD). */
  if (!failed && t.reopen >= 10 && t.redo_runs == 0)
    fail_msg ("%llu reopens, none redid a block from the log",
              (unsigned long long)t.reopen);
  if (failed)
    fail_msg ("%llu seed(s) failed; the first: %s", (unsigned long long)failed,
              first_msg);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_random_crashes),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
