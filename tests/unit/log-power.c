/* The log tests' power switch: its cuts, what they leave on each crash
 * device, and the calls that count towards them (see log-helpers.h).
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log-helpers.h"

/* ---- power: one switch for every device and the backend ---- */

void
power_init (struct power *pw, struct membackend *mb)
{
  pthread_rwlockattr_t a;

  memset (pw, 0, sizeof *pw);
  pthread_rwlockattr_init (&a);
  /* A cut must not wait behind an endless stream of readers. */
  pthread_rwlockattr_setkind_np (&a,
                                 PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  pthread_rwlock_init (&pw->rw, &a);
  pthread_rwlockattr_destroy (&a);
  pw->mb = mb;
}

void
power_destroy (struct power *pw)
{
  for (unsigned i = 0; i < MAX_DEVS; i++)
    free (pw->img[i]);
  free (pw->be_img);
  pthread_rwlock_destroy (&pw->rw);
}

/* The crash devices a cut applies to (SSD first, then the logs). */
void
power_set_devs (struct power *pw, struct hhc_dev *const *cd, unsigned n)
{
  pthread_rwlock_wrlock (&pw->rw);
  pw->ncd = n;
  for (unsigned i = 0; i < n; i++)
    pw->cd[i] = cd[i];
  pthread_rwlock_unlock (&pw->rw);
}

bool
power_crashed (struct power *pw)
{
  return __atomic_load_n (&pw->crashed, __ATOMIC_ACQUIRE);
}

/* Count what the cut of device i tore and landed in part. */
static void
count_cut (struct power *pw, unsigned i)
{
  struct crashdev_lost l;

  crashdev_get_lost (pw->cd[i], &l);
  pw->partial += l.partial;
  if (l.torn_len == 0)
    return;
  pw->torn++;
  pw->torn_sb += l.torn_off < LOG_REGION_OFF;
  pw->torn_older += l.torn_older;
  pw->torn_fua += l.torn_in_flight;
}

/* Cut device i: its image is what survives (and what is torn), the
 * device goes on with what it had (its unreadable bytes too).
 */
static void
cut_dev (struct power *pw, unsigned i)
{
  struct hhc_dev *d = pw->cd[i];
  unsigned char *cur = malloc (d->size);
  struct crashdev_bad live;

  free (pw->img[i]);
  pw->img[i] = malloc (d->size);
  if (cur == NULL || pw->img[i] == NULL)
    abort ();
  crashdev_get_bads (d, &live);
  crashdev_peek (d, cur);
  /* A log is an HDD (torn_tails); the SSD is never torn. */
  crashdev_set_tearing (d, pw->torn_tails && i > 0);
  if (pw->fua_dev == d)
    crashdev_set_in_flight (d, pw->fua_buf, pw->fua_off, pw->fua_len);
  crashdev_crash (d, pw->seed + 7919 * i, NULL, NULL);
  crashdev_peek (d, pw->img[i]);
  crashdev_get_bads (d, &pw->was[i]);
  count_cut (pw, i);
  /* The volume goes on with what it had written. */
  crashdev_restart (d);
  if (dev_pwrite (d, cur, d->size, 0) != 0)
    abort ();
  crashdev_set_bads (d, &live);
  free (cur);
}

/* Cut the power now: snapshot what survives, keep the devices live. */
void
power_cut (struct power *pw)
{
  pthread_rwlock_wrlock (&pw->rw);
  if (!pw->crashed)
    {
      for (unsigned i = 0; i < pw->ncd; i++)
        cut_dev (pw, i);
      pw->fua_cuts += pw->fua_dev != NULL;
      pw->fua_dev = NULL;
      free (pw->be_img);
      pw->be_img = malloc (membackend_size (pw->mb));
      if (pw->be_img == NULL)
        abort ();
      membackend_peek (pw->mb, pw->revert_backend, pw->be_img,
                       membackend_size (pw->mb), 0);
      __atomic_store_n (&pw->crashed, true, __ATOMIC_RELEASE);
    }
  pthread_rwlock_unlock (&pw->rw);
}

static void
arm (struct power *pw, uint64_t at, bool sync_only, unsigned seed,
     bool revert_backend, struct pdev *only)
{
  pthread_rwlock_wrlock (&pw->rw);
  pw->seed = seed;
  pw->revert_backend = revert_backend;
  __atomic_store_n (&pw->ops, 0, __ATOMIC_RELEASE);
  __atomic_store_n (&pw->sync_only, sync_only, __ATOMIC_RELEASE);
  __atomic_store_n (&pw->only, only, __ATOMIC_RELEASE);
  __atomic_store_n (&pw->crashed, false, __ATOMIC_RELEASE);
  __atomic_store_n (&pw->crash_at, at, __ATOMIC_RELEASE);
  pthread_rwlock_unlock (&pw->rw);
}

/* Arm: cut at the at-th counted call from now (0: disarm). */
void
power_arm (struct power *pw, uint64_t at, bool sync_only, unsigned seed,
           bool revert_backend)
{
  arm (pw, at, sync_only, seed, revert_backend, NULL);
}

void
power_arm_after_fault (struct power *pw, uint64_t at, unsigned seed,
                       bool revert_backend, struct hhc_dev *pd)
{
  arm (pw, at, false, seed, revert_backend, to_pdev (pd));
}

/* Put the snapshot back (no volume open) and disarm. */
void
power_restore (struct power *pw)
{
  T_ASSERT (pw->crashed);
  for (unsigned i = 0; i < pw->ncd; i++)
    {
      struct hhc_dev *d = pw->cd[i];
      /* The bytes unreadable after the cut (its tear among them) stay
       * so: putting the image back is no write of the disk's.
       */
      crashdev_restart (d);
      T_ASSERT ((dev_pwrite (d, pw->img[i], d->size, 0)) == 0);
      T_ASSERT ((dev_sync (d)) == 0);
      crashdev_set_bads (d, &pw->was[i]);
    }
  membackend_poke (pw->mb, pw->be_img, membackend_size (pw->mb), 0);
  power_arm (pw, 0, false, 0, false);
}

/* Does this call count towards the cut?  Every one, or only those of
 * the device the cut waits for, once a write to it has failed.
 */
static bool
power_counts (struct power *pw, struct pdev *p)
{
  struct pdev *only = __atomic_load_n (&pw->only, __ATOMIC_ACQUIRE);

  return only == NULL
         || (p == only && __atomic_load_n (&p->failed_once, __ATOMIC_ACQUIRE));
}

void
power_enter_call (struct power *pw, const struct pcall *c)
{
  if (pw == NULL)
    return;
  if (c->kind && __atomic_load_n (&pw->crash_at, __ATOMIC_ACQUIRE)
      && (c->kind == 2 || !__atomic_load_n (&pw->sync_only, __ATOMIC_ACQUIRE))
      && power_counts (pw, c->p))
    {
      uint64_t n = __atomic_add_fetch (&pw->ops, 1, __ATOMIC_ACQ_REL);
      if (n == __atomic_load_n (&pw->crash_at, __ATOMIC_ACQUIRE))
        {
          /* Before this call: it happens after the cut, but a FUA write
           * was on its way (power_cut: it may land in part, or tear).
           */
          pthread_rwlock_wrlock (&pw->rw);
          if (c->fua_buf && !pw->crashed)
            {
              pw->fua_buf = c->fua_buf;
              pw->fua_dev = c->p->inner;
              pw->fua_off = c->off;
              pw->fua_len = c->len;
            }
          pthread_rwlock_unlock (&pw->rw);
          power_cut (pw);
        }
    }
  pthread_rwlock_rdlock (&pw->rw);
}

void
power_enter (struct power *pw, int kind, struct pdev *p)
{
  struct pcall c = { .kind = kind, .p = p };

  power_enter_call (pw, &c);
}

void
power_leave (struct power *pw)
{
  if (pw)
    pthread_rwlock_unlock (&pw->rw);
}
