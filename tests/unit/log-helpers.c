/* The log tests' failures and their environment for the directed
 * tests (see log-helpers.h; the power switch: log-power.c; the devices
 * and the backend behind it: log-pdev.c).
 */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log-helpers.h"

const char *const log_names[HHC_MAX_LOGS]
    = { "log0", "log1", "log2", "log3", "log4", "log5", "log6", "log7" };

__thread char *worker_msg;

void
tfail (const char *fmt, ...)
{
  char msg[MSG_MAX];
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (msg, sizeof msg, fmt, ap);
  va_end (ap);
  if (worker_msg)
    {
      snprintf (worker_msg, MSG_MAX, "%s", msg);
      pthread_exit (NULL);
    }
  fail_msg ("%s", msg);
  abort (); /* not reached */
}

/* ---- env: a simple environment for the directed tests ---- */

/* Backend of nblocks blocks, block l holding pattern version 0. */
void
env_init (struct env *e, uint64_t nblocks, uint32_t nslots, unsigned nlogs,
          uint64_t log_size)
{
  unsigned char blk[BS];

  memset (e, 0, sizeof *e);
  e->nblocks = nblocks;
  e->nslots = nslots;
  e->mb = membackend_new (nblocks * BS);
  assert_non_null (e->mb);
  e->be = (struct pbe){ e->mb, NULL };
  for (uint64_t l = 0; l < nblocks; l++)
    {
      pattern_fill (blk, l, 0, SECTORS, 0);
      membackend_poke (e->mb, blk, BS, l * BS);
    }
  e->info = membackend_info (e->mb, 0, "membackend:log-env");
  tdev_new (&e->ssd, test_cache_dev_size (nslots, BS), NULL, "ssd");
  hhc_conf_init (&e->conf);
  e->conf.mode = HHC_MODE_HHC;
  e->conf.msgfn = test_msg;
  e->pre.cache = e->ssd.pd;
  e->conf.segment_size = SEG;
  e->conf.writeback_threads = 2;
  e->nlogs = nlogs;
  e->conf.nlogs = nlogs;
  for (unsigned i = 0; i < nlogs; i++)
    {
      tdev_new (&e->logs[i], log_size, NULL, log_names[i]);
      e->conf.log_paths[i] = log_names[i];
      e->pre.logs[i] = e->logs[i].pd;
    }
}

int
env_try_open (struct env *e)
{
  int r = hhc_open (&e->conf, &e->pre, &pbe_ops, &e->info, &e->vol);

  if (r == 0 && (r = hhc_start (e->vol, &e->be)) != 0)
    {
      hhc_close (e->vol);
      e->vol = NULL;
    }
  return r;
}

void
env_open (struct env *e)
{
  assert_int_equal (env_try_open (e), 0);
}

void
env_close (struct env *e)
{
  assert_int_equal (hhc_close (e->vol), 0);
  e->vol = NULL;
}

/* A blank SSD (the old one is lost). */
void
env_new_ssd (struct env *e)
{
  tdev_free (&e->ssd);
  tdev_new (&e->ssd, test_cache_dev_size (e->nslots, BS), NULL, "ssd");
  e->pre.cache = e->ssd.pd;
}

void
env_free (struct env *e)
{
  if (e->vol)
    hhc_close (e->vol);
  tdev_free (&e->ssd);
  for (unsigned i = 0; i < HHC_MAX_LOGS; i++)
    tdev_free (&e->logs[i]);
  membackend_free (e->mb);
}

/* Write version of block lba: 0 or errno (no cmocka assertion: for
 * the tests' own threads too).
 */
int
env_try_write (struct env *e, uint64_t lba, uint64_t version)
{
  unsigned char blk[BS];

  pattern_fill (blk, lba, 0, SECTORS, version);
  return hhc_write (e->vol, &e->be, blk, BS, lba * BS, false);
}

void
env_write (struct env *e, uint64_t lba, uint64_t version, bool fua)
{
  unsigned char blk[BS];

  pattern_fill (blk, lba, 0, SECTORS, version);
  assert_int_equal (hhc_write (e->vol, &e->be, blk, BS, lba * BS, fua), 0);
}

void
env_flush (struct env *e)
{
  assert_int_equal (hhc_flush (e->vol, &e->be), 0);
}

/* Does the backend (durable bytes) hold version v of block lba? */
bool
backend_has (struct env *e, uint64_t lba, uint64_t v)
{
  unsigned char blk[BS];

  pattern_fill (blk, lba, 0, SECTORS, v);
  return membackend_cmp (e->mb, true, blk, BS, lba * BS) == 0;
}

bool
reads_v (struct env *e, uint64_t lba, uint64_t v)
{
  unsigned char blk[BS], want[BS];

  pattern_fill (want, lba, 0, SECTORS, v);
  assert_int_equal (hhc_read (e->vol, &e->be, blk, BS, lba * BS), 0);
  return memcmp (blk, want, BS) == 0;
}

/* The version of block lba in the backend's durable bytes (-1: not a
 * whole block of one version of lba).
 */
int64_t
backend_version (struct env *e, uint64_t lba)
{
  unsigned char blk[BS];

  membackend_peek (e->mb, true, blk, BS, lba * BS);
  return block_version (blk, lba);
}

/* The version of block lba that blk holds (-1: not one). */
int64_t
block_version (const unsigned char *blk, uint64_t lba)
{
  uint64_t l, v = 0, v0 = 0;
  uint32_t s;

  for (uint32_t i = 0; i < SECTORS; i++)
    {
      if (pattern_decode (blk + i * PAT_SECTOR, &l, &s, &v) != 1 || l != lba
          || s != i || (i && v != v0))
        return -1;
      v0 = v;
    }
  return (int64_t)v;
}

/* Every block of the backend holds expect[lba]. */
void
check_backend_state (struct env *e, const uint64_t *expect, const char *what)
{
  for (uint64_t l = 0; l < e->nblocks; l++)
    if (!backend_has (e, l, expect[l]))
      fail_msg ("%s: backend block %llu holds version %lld, expected %llu",
                what, (unsigned long long)l, (long long)backend_version (e, l),
                (unsigned long long)expect[l]);
}

struct hhc_counts
counts (struct env *e)
{
  struct hhc_counts c;

  hhc_get_counts (e->vol, &c);
  return c;
}

/* 64 blocks, 128 slots, nlogs mirrors of 1 MiB, no write-back but
 * the FLUSHes'.  (With 512 KiB the room the log keeps for its buffers,
 * 7 reservations of a 64 KiB segment and its header, left 7 blocks
 * for dirty ones, and one dirty block put the log's share past
 * dirty-low: the flusher wrote it back when it got the CPU first.)
 */
void
quiet_env_init (struct env *e, unsigned nlogs)
{
  env_init (e, 64, 128, nlogs, LOG_REGION_OFF + 1024 * KiB);
  e->conf.dirty_low = 90;
  e->conf.dirty_high = 95;
  e->conf.dirty_max = 99;
  e->conf.idle_ms = 0;
}

/* nlogs mirrors, the SSD, the mirrors and the backend on one power
 * supply, no write-back but the FLUSHes'.
 */
/* Put e's SSD, its mirrors and their crash devices on the switch pw. */
static void
pw_attach (struct env *e, struct power *pw)
{
  struct hhc_dev *cd[MAX_DEVS];

  to_pdev (e->ssd.pd)->pw = pw;
  cd[0] = e->ssd.cd;
  for (unsigned i = 0; i < e->nlogs; i++)
    {
      to_pdev (e->logs[i].pd)->pw = pw;
      cd[1 + i] = e->logs[i].cd;
    }
  power_set_devs (pw, cd, 1 + e->nlogs);
}

void
pw_env_init (struct env *e, struct power *pw, unsigned nlogs)
{
  quiet_env_init (e, nlogs);
  power_init (pw, e->mb);
  e->be.pw = pw;
  pw_attach (e, pw);
}

void
pw_env_new_ssd (struct env *e, struct power *pw)
{
  env_new_ssd (e);
  pw_attach (e, pw);
}

void
pw_env_free (struct env *e, struct power *pw)
{
  e->be.pw = NULL;
  for (unsigned i = 0; i < e->nlogs; i++)
    to_pdev (e->logs[i].pd)->pw = NULL;
  to_pdev (e->ssd.pd)->pw = NULL;
  env_free (e);
  power_destroy (pw);
}

/* Rewrite each valid superblock copy of dev (checksum right) with
 * edit applied; the old bytes of both copies into saved.
 */
void
edit_sbs (struct hhc_dev *dev, unsigned char saved[2 * LOG_SB_SIZE],
          void (*edit) (struct log_sb *))
{
  unsigned char sb[LOG_SB_SIZE];
  struct log_sb d;
  unsigned valid = 0;

  assert_int_equal (dev_pread (dev, saved, 2 * LOG_SB_SIZE, 0), 0);
  for (unsigned copy = 0; copy < 2; copy++)
    {
      if (log_sb_decode (saved + copy * LOG_SB_SIZE, &d) != 0)
        continue;
      edit (&d);
      log_sb_encode (&d, sb);
      assert_int_equal (dev_pwrite (dev, sb, sizeof sb, copy * LOG_SB_SIZE), 0);
      valid++;
    }
  assert_true (valid > 0);
}
