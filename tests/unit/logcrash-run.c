/* A run of the log's crash campaign (test-log-crash.c, logcrash.h):
 * its devices behind the power switch, the volume opened and closed,
 * the client's operations (writes, zeros, trims, flushes, reads,
 * write-back batches, reclaim, prefetch, backend outages), each
 * recorded in the oracle, the random workload made of them, and the
 * check of every sector of the volume or the backend.
 */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logcrash.h"

void
set_phase (struct run *r, const char *phase)
{
  __atomic_store_n (&r->phase, phase, __ATOMIC_RELEASE);
}

const char *
get_phase (struct run *r)
{
  return __atomic_load_n (&r->phase, __ATOMIC_ACQUIRE);
}

static void
run_set_devs (struct run *r)
{
  struct hhc_dev *cd[MAX_DEVS];

  cd[0] = r->ssd.cd;
  for (unsigned i = 0; i < r->nlogs; i++)
    cd[1 + i] = r->logs[i].cd;
  power_set_devs (&r->pw, cd, 1 + r->nlogs);
  r->pre.cache = r->ssd.pd;
}

void
new_ssd (struct run *r, uint32_t nslots)
{
  tdev_free (&r->ssd);
  r->nslots = nslots;
  tdev_new (&r->ssd, test_cache_dev_size (nslots, BS), &r->pw, "ssd");
  run_set_devs (r);
}

void
run_open (struct run *r)
{
  int e = hhc_open (&r->conf, &r->pre, &pbe_ops, &r->info, &r->vol);

  if (e)
    RFAIL (r, "hhc_open: %s", strerror (e));
  e = hhc_start (r->vol, &r->be);
  if (e)
    RFAIL (r, "hhc_start: %s", strerror (e));
}

void
run_close (struct run *r)
{
  int e = hhc_close (r->vol);

  r->vol = NULL;
  if (e)
    RFAIL (r, "hhc_close: %s", strerror (e));
}

uint64_t
pick_lba (struct run *r)
{
  return test_rand_below (&r->rng, 2) ? test_rand_below (&r->rng, 24)
                                      : test_rand_below (&r->rng, r->nblocks);
}

/* Sectors [first_sec, +nsec) (may span blocks). */
void
do_write (struct run *r, uint64_t first_sec, uint64_t nsec, bool fua)
{
  uint64_t v = ++r->op;
  int e;

  for (uint64_t i = 0; i < nsec; i++)
    {
      uint64_t sec = first_sec + i;
      pattern_fill (r->buf + i * PAT_SECTOR, sec / SECTORS, sec % SECTORS, 1,
                    v);
      model_set (&r->m, sec, v);
    }
  e = hhc_write (r->vol, &r->be, r->buf, nsec * PAT_SECTOR,
                 first_sec * PAT_SECTOR, fua);
  if (e)
    RFAIL (r, "write of sectors %llu+%llu: %s", (unsigned long long)first_sec,
           (unsigned long long)nsec, strerror (e));
  if (fua && !power_crashed (&r->pw))
    for (uint64_t i = 0; i < nsec; i++)
      {
        r->m.flushed[first_sec + i] = v;
        r->m.trimmed[first_sec + i] = false;
      }
  r->nwrites++;
}

/* Zero or trim sectors [first_sec, +nsec). */
static void
do_passdown (struct run *r, uint64_t first_sec, uint64_t nsec, bool trim,
             bool fua)
{
  uint64_t v = ++r->op | ZERO_FLAG;
  uint64_t lo = first_sec, hi = first_sec + nsec;
  int e;

  if (trim)
    {
      /* Only whole blocks are dropped; edges stay as they are. */
      lo = (first_sec + SECTORS - 1) / SECTORS * SECTORS;
      hi = hi / SECTORS * SECTORS;
    }
  for (uint64_t s = lo; s < hi; s++)
    {
      model_set (&r->m, s, v);
      if (trim)
        r->m.trimmed[s] = true;
    }
  e = trim ? hhc_trim (r->vol, &r->be, nsec * PAT_SECTOR,
                       first_sec * PAT_SECTOR, fua)
           : hhc_zero (r->vol, &r->be, nsec * PAT_SECTOR,
                       first_sec * PAT_SECTOR, fua);
  if (e)
    RFAIL (r, "%s: %s", trim ? "trim" : "zero", strerror (e));
  /* FUA flushes the whole volume; count it for this range only. */
  if (fua && !power_crashed (&r->pw))
    for (uint64_t s = lo; s < hi; s++)
      {
        r->m.flushed[s] = opnum (v);
        r->m.trimmed[s] = false;
      }
}

void
do_flush (struct run *r, bool drain)
{
  int e = drain ? hhc_drain (r->vol, &r->be) : hhc_flush (r->vol, &r->be);

  if (e)
    RFAIL (r, "%s: %s", drain ? "drain" : "flush", strerror (e));
  if (!power_crashed (&r->pw))
    {
      model_flush_all (&r->m);
      r->nflushes++;
    }
}

/* Before a cut, reads return exactly the newest data. */
static void
check_read_exact (struct run *r, uint64_t lba)
{
  unsigned char blk[BS], want[PAT_SECTOR];
  int e = hhc_read (r->vol, &r->be, blk, BS, lba * BS);

  if (e)
    RFAIL (r, "read of block %llu: %s", (unsigned long long)lba, strerror (e));
  for (uint32_t s = 0; s < SECTORS; s++)
    {
      uint64_t v = r->m.latest[lba * SECTORS + s];
      if (v & ZERO_FLAG)
        memset (want, 0, sizeof want);
      else
        pattern_fill (want, lba, s, 1, v);
      if (memcmp (blk + s * PAT_SECTOR, want, PAT_SECTOR) != 0)
        RFAIL (r,
               "op %llu: block %llu sector %u does not read its newest "
               "data",
               (unsigned long long)r->op, (unsigned long long)lba, s);
    }
}

/* The backend refuses writes for a while: write-back stops, the log
 * fills with overwrites of a few hot blocks around some that stay
 * (active reclaim moves those).  Starts from a drained cache so that
 * what is dirty always fits in the log (a FLUSH with a log full of
 * dirty blocks must wait for the backend).
 */
static void
backend_outage (struct run *r)
{
  uint64_t n = 40 + test_rand_below (&r->rng, 120);

  do_flush (r, true);
  set_phase (r, "workload, backend outage");
  membackend_fail_all (r->mb, MB_OP_WRITE, true);
  for (int i = 0; i < 6 && !power_crashed (&r->pw); i++)
    do_write (r, (24 + test_rand_below (&r->rng, r->nblocks - 24)) * SECTORS,
              SECTORS, false);
  for (uint64_t k = 0; k < n && !power_crashed (&r->pw); k++)
    {
      if (test_rand_below (&r->rng, 12) == 0)
        do_flush (r, false);
      else
        do_write (r, test_rand_below (&r->rng, 8) * SECTORS, SECTORS, false);
    }
  membackend_fail_all (r->mb, MB_OP_WRITE, false);
  set_phase (r, "workload");
}

void
workload (struct run *r, int nops)
{
  for (int i = 0; i < nops && !power_crashed (&r->pw); i++)
    {
      uint64_t op = test_rand_below (&r->rng, 100);
      uint64_t lba = pick_lba (r);

      if (op < 46)
        {
          uint64_t s0 = 0, n = SECTORS;
          uint64_t kind = test_rand_below (&r->rng, 10);
          if (kind < 4) /* part of a block */
            {
              s0 = test_rand_below (&r->rng, SECTORS);
              n = 1 + test_rand_below (&r->rng, SECTORS - s0);
            }
          else if (kind == 9 && lba + 3 <= r->nblocks)
            {
              /* 2-3 blocks, unaligned */
              s0 = test_rand_below (&r->rng, SECTORS);
              n = SECTORS + test_rand_below (&r->rng, 2 * SECTORS - s0);
            }
          do_write (r, lba * SECTORS + s0, n,
                    test_rand_below (&r->rng, 20) == 0);
        }
      else if (op < 58)
        check_read_exact (r, lba);
      else if (op < 69)
        do_flush (r, false);
      else if (op < 70)
        do_flush (r, true);
      else if (op < 78)
        {
          long n = flusher_batch (r->vol, &r->be,
                                  1 + test_rand_below (&r->rng, 3));
          if (n < 0)
            RFAIL (r, "flusher_batch: %s", strerror ((int)-n));
        }
      else if (op < 80)
        {
          /* A burst of whole blocks without a flush: the log fills. */
          uint64_t n = 8 + test_rand_below (&r->rng, 40);
          for (uint64_t k = 0; k < n && !power_crashed (&r->pw); k++)
            do_write (r, test_rand_below (&r->rng, r->nblocks) * SECTORS,
                      SECTORS, false);
        }
      else if (op < 81)
        {
          if (!r->no_outages && test_env_u64 ("HHC_TEST_OUTAGES", 1))
            backend_outage (r);
        }
      else if (op < 82)
        {
          int e = vol_reclaim (r->vol);
          if (e)
            RFAIL (r, "vol_reclaim: %s", strerror (e));
        }
      else if (op < 94 && lba + 2 <= r->nblocks)
        {
          /* Zero or trim up to two blocks, sector aligned. */
          uint64_t s0 = test_rand_below (&r->rng, SECTORS);
          uint64_t n = 1 + test_rand_below (&r->rng, 2 * SECTORS - s0);
          do_passdown (r, lba * SECTORS + s0, n, op >= 88,
                       test_rand_below (&r->rng, 8) == 0);
        }
      else
        {
          int e = hhc_prefetch (r->vol, &r->be, 2 * BS,
                                (lba + 2 <= r->nblocks ? lba : 0) * BS);
          if (e)
            RFAIL (r, "prefetch: %s", strerror (e));
        }
    }
}

/* Every sector of the volume (through reads) or of the backend. */
void
verify_all (struct run *r, bool backend, const char *what)
{
  unsigned char blk[BS];
  char why[200];

  for (uint64_t l = 0; l < r->nblocks; l++)
    {
      if (backend)
        membackend_peek (r->mb, false, blk, BS, l * BS);
      else
        {
          int e = hhc_read (r->vol, &r->be, blk, BS, l * BS);
          if (e)
            RFAIL (r, "%s: read of block %llu: %s", what, (unsigned long long)l,
                   strerror (e));
        }
      for (uint32_t s = 0; s < SECTORS; s++)
        if (!model_ok (&r->m, l * SECTORS + s, blk + s * PAT_SECTOR, why,
                       sizeof why))
          RFAIL (r, "%s: block %llu sector %u holds %s", what,
                 (unsigned long long)l, s, why);
    }
}
