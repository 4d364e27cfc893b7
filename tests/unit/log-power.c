/* The log tests' power switch, the devices and the backend behind it,
 * and whole-device images (see log-helpers.h).
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

/* After the cut of device i (a log: i > 0): with torn_tails, the
 * newest write it dropped (a superblock's too) is to be unreadable once
 * the power is back (power_restore): all of it, or half the time (from
 * the cut's seed) a run of its 4 KiB pieces.
 */
static void
torn_tail (struct power *pw, unsigned i)
{
  unsigned seed = pw->seed + 104729 * i;
  uint64_t off;
  size_t len, n;

  pw->bad_len[i] = 0;
  if (!pw->torn_tails || i == 0 || !crashdev_last_lost (pw->cd[i], &off, &len))
    return;
  n = len / LOG_ALIGN;
  if (n > 1 && len % LOG_ALIGN == 0 && rand_r (&seed) % 2)
    {
      size_t first = (size_t)rand_r (&seed) % n;
      size_t count = 1 + (size_t)rand_r (&seed) % (n - first);
      off += first * LOG_ALIGN;
      len = count * LOG_ALIGN;
    }
  pw->bad_off[i] = off;
  pw->bad_len[i] = len;
  pw->torn++;
  pw->torn_sb += off < LOG_REGION_OFF;
}

/* Cut the power now: snapshot what survives, keep the devices live. */
void
power_cut (struct power *pw)
{
  pthread_rwlock_wrlock (&pw->rw);
  if (!pw->crashed)
    {
      for (unsigned i = 0; i < pw->ncd; i++)
        {
          struct hhc_dev *d = pw->cd[i];
          unsigned char *cur = malloc (d->size);
          /* The images are the disk's bytes, read past its unreadable
           * ones (kept for the restore, and for the volume going on).
           */
          crashdev_get_bads (d, &pw->was[i]);
          crashdev_set_bad (d, 0, 0);
          free (pw->img[i]);
          pw->img[i] = malloc (d->size);
          if (cur == NULL || pw->img[i] == NULL
              || dev_pread (d, cur, d->size, 0) != 0)
            abort ();
          crashdev_crash (d, pw->seed + 7919 * i, NULL, NULL);
          if (dev_pread (d, pw->img[i], d->size, 0) != 0)
            abort ();
          torn_tail (pw, i);
          /* The volume goes on with what it had written. */
          crashdev_restart (d);
          if (dev_pwrite (d, cur, d->size, 0) != 0)
            abort ();
          crashdev_set_bads (d, &pw->was[i]);
          free (cur);
        }
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
      /* The bytes unreadable at the cut stay so (putting the image back
       * is no write of the disk's), and this cut's torn tail joins them.
       */
      crashdev_restart (d);
      T_ASSERT ((dev_pwrite (d, pw->img[i], d->size, 0)) == 0);
      T_ASSERT ((dev_sync (d)) == 0);
      crashdev_set_bads (d, &pw->was[i]);
      crashdev_add_bad (d, pw->bad_off[i], pw->bad_len[i]);
      pw->bad_len[i] = 0;
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

/* kind: 0 read (not counted), 1 write, 2 sync; p the device (NULL: the
 * backend).
 */
static void
power_enter (struct power *pw, int kind, struct pdev *p)
{
  if (pw == NULL)
    return;
  if (kind && __atomic_load_n (&pw->crash_at, __ATOMIC_ACQUIRE)
      && (kind == 2 || !__atomic_load_n (&pw->sync_only, __ATOMIC_ACQUIRE))
      && power_counts (pw, p))
    {
      uint64_t n = __atomic_add_fetch (&pw->ops, 1, __ATOMIC_ACQ_REL);
      if (n == __atomic_load_n (&pw->crash_at, __ATOMIC_ACQUIRE))
        power_cut (pw); /* before this call: it happens after the cut */
    }
  pthread_rwlock_rdlock (&pw->rw);
}

static void
power_leave (struct power *pw)
{
  if (pw)
    pthread_rwlock_unlock (&pw->rw);
}

/* ---- pdev: a device behind the switch, with faults and latency ---- */

struct pdev *
to_pdev (struct hhc_dev *d)
{
  return (struct pdev *)d;
}

static bool
pd_failing (struct pdev *p)
{
  return __atomic_load_n (&p->failing, __ATOMIC_ACQUIRE);
}

void
meet_init (struct meet *m, unsigned n, unsigned ms)
{
  memset (m, 0, sizeof *m);
  pthread_mutex_init (&m->mu, NULL);
  pthread_cond_init (&m->cv, NULL);
  m->n = n;
  m->ms = ms;
}

void
meet_destroy (struct meet *m)
{
  pthread_cond_destroy (&m->cv);
  pthread_mutex_destroy (&m->mu);
}

static void
meet_arrive (struct meet *m)
{
  struct timespec ts;

  test_deadline (&ts, m->ms);
  pthread_mutex_lock (&m->mu);
  m->arrived++;
  pthread_cond_broadcast (&m->cv);
  while (m->arrived < m->n && !m->timed_out)
    if (pthread_cond_timedwait (&m->cv, &m->mu, &ts) == ETIMEDOUT)
      m->timed_out = true;
  pthread_mutex_unlock (&m->mu);
}

void
pdev_set_meet (struct hhc_dev *d, struct meet *m)
{
  __atomic_store_n (&to_pdev (d)->meet, m, __ATOMIC_RELEASE);
}

static int
pd_pread (struct hhc_dev *d, void *buf, size_t len, uint64_t off)
{
  struct pdev *p = to_pdev (d);
  int r;

  if (off >= LOG_REGION_OFF)
    __atomic_add_fetch (&p->region_reads, 1, __ATOMIC_RELAXED);
  if (off >= LOG_REGION_OFF && __atomic_load_n (&p->meet, __ATOMIC_ACQUIRE))
    {
      struct meet *m = __atomic_exchange_n (&p->meet, NULL, __ATOMIC_ACQ_REL);
      if (m)
        meet_arrive (m);
    }
  if (pd_failing (p)
      || (p->bad_len && off < p->bad_off + p->bad_len
          && p->bad_off < off + len))
    return EIO;
  power_enter (p->pw, 0, p);
  r = dev_pread (p->inner, buf, len, off);
  power_leave (p->pw);
  return r;
}

/* Whether this write fails: the device failed already, or this is
 * the write past fail_after (the device fails from then on, or with
 * once only this write).
 */
static bool
pd_write_fails (struct pdev *p)
{
  if (pd_failing (p))
    return true;
  if (__atomic_add_fetch (&p->writes, 1, __ATOMIC_ACQ_REL)
      > __atomic_load_n (&p->fail_after, __ATOMIC_ACQUIRE))
    {
      if (__atomic_load_n (&p->once, __ATOMIC_ACQUIRE))
        __atomic_store_n (&p->fail_after, UINT64_MAX, __ATOMIC_RELEASE);
      else
        __atomic_store_n (&p->failing, true, __ATOMIC_RELEASE);
      __atomic_store_n (&p->failed_once, true, __ATOMIC_RELEASE);
      return true;
    }
  return false;
}

/* Record a write to the superblock area (pdev's sb_writes). */
static void
pd_note_sb (struct pdev *p, uint64_t off)
{
  if (off >= LOG_REGION_OFF)
    return;
  unsigned i = __atomic_fetch_add (&p->nsb, 1, __ATOMIC_ACQ_REL);
  if (i < sizeof p->sb_writes / sizeof p->sb_writes[0])
    p->sb_writes[i] = off;
}

static int
pd_pwrite (struct hhc_dev *d, const void *buf, size_t len, uint64_t off)
{
  struct pdev *p = to_pdev (d);
  int r;

  if (pd_write_fails (p))
    return EIO;
  pd_note_sb (p, off);
  power_enter (p->pw, 1, p);
  r = dev_pwrite (p->inner, buf, len, off);
  power_leave (p->pw);
  return r;
}

/* The HDD's cost of a barrier (a sync, or a FUA write). */
static void
pd_delay (struct pdev *p)
{
  if (p->sync_delay_us)
    {
      struct timespec ts = { 0, (long)p->sync_delay_us * 1000 };
      nanosleep (&ts, NULL);
    }
}

static int
pd_sync (struct hhc_dev *d)
{
  struct pdev *p = to_pdev (d);
  int r;

  if (pd_failing (p))
    return EIO;
  pd_delay (p);
  power_enter (p->pw, 2, p);
  r = dev_sync (p->inner);
  power_leave (p->pw);
  return r;
}

/* A FUA write counts as a write and as a sync (a cut at a sync may
 * fall on it), and fails as a write does.
 */
static int
pd_pwrite_fua (struct hhc_dev *d, const void *buf, size_t len, uint64_t off)
{
  struct pdev *p = to_pdev (d);
  int r;

  if (pd_write_fails (p))
    return EIO;
  pd_note_sb (p, off);
  pd_delay (p);
  power_enter (p->pw, 2, p);
  r = dev_pwrite_fua (p->inner, buf, len, off);
  power_leave (p->pw);
  return r;
}

static void
pd_close (struct hhc_dev *d)
{
  /* The test owns it: pdev_free. */
}

static const struct hhc_dev_ops pdev_ops = {
  .pread = pd_pread,
  .pwrite = pd_pwrite,
  .sync = pd_sync,
  .close = pd_close,
};

/* The same for an inner device with FUA. */
static const struct hhc_dev_ops pdev_fua_ops = {
  .pread = pd_pread,
  .pwrite = pd_pwrite,
  .sync = pd_sync,
  .close = pd_close,
  .pwrite_fua = pd_pwrite_fua,
};

void
pdev_set_fua (struct hhc_dev *d, bool on)
{
  struct pdev *p = to_pdev (d);

  p->dev.ops = on && dev_can_fua (p->inner) ? &pdev_fua_ops : &pdev_ops;
}

struct hhc_dev *
pdev_new (struct hhc_dev *inner, struct power *pw, const char *name)
{
  struct pdev *p = calloc (1, sizeof *p);

  T_ASSERT ((p) != NULL);
  p->dev.ops = dev_can_fua (inner) ? &pdev_fua_ops : &pdev_ops;
  p->dev.size = inner->size;
  p->dev.name = strdup (name);
  T_ASSERT ((p->dev.name) != NULL);
  p->inner = inner;
  p->pw = pw;
  p->fail_after = UINT64_MAX;
  return &p->dev;
}

void
pdev_free (struct hhc_dev *d)
{
  if (d == NULL)
    return;
  free (d->name);
  free (d);
}

/* The device fails (every call EIO) after n more successful writes. */
void
pdev_fail_after (struct hhc_dev *d, uint64_t n)
{
  struct pdev *p = to_pdev (d);

  __atomic_store_n (&p->once, false, __ATOMIC_RELEASE);
  __atomic_store_n (&p->fail_after,
                    __atomic_load_n (&p->writes, __ATOMIC_ACQUIRE) + n,
                    __ATOMIC_RELEASE);
  if (n == 0)
    __atomic_store_n (&p->failing, true, __ATOMIC_RELEASE);
}

void
pdev_fail_once (struct hhc_dev *d, uint64_t n)
{
  struct pdev *p = to_pdev (d);

  __atomic_store_n (&p->once, true, __ATOMIC_RELEASE);
  __atomic_store_n (&p->fail_after,
                    __atomic_load_n (&p->writes, __ATOMIC_ACQUIRE) + n,
                    __ATOMIC_RELEASE);
}

void
pdev_heal (struct hhc_dev *d)
{
  struct pdev *p = to_pdev (d);

  __atomic_store_n (&p->fail_after, UINT64_MAX, __ATOMIC_RELEASE);
  __atomic_store_n (&p->failing, false, __ATOMIC_RELEASE);
}

void
tdev_new (struct tdev *t, uint64_t size, struct power *pw, const char *name)
{
  T_ASSERT ((crashdev_create (size, &t->cd)) == 0);
  t->pd = pdev_new (t->cd, pw, name);
}

void
tdev_free (struct tdev *t)
{
  pdev_free (t->pd);
  if (t->cd)
    crashdev_destroy (t->cd);
  t->pd = t->cd = NULL;
}

/* Whole-device images (for replaying one state several ways). */
unsigned char *
dev_save (struct hhc_dev *cd)
{
  unsigned char *p = malloc (cd->size);

  T_ASSERT ((p) != NULL);
  T_ASSERT ((dev_pread (cd, p, cd->size, 0)) == 0);
  return p;
}

void
dev_load (struct hhc_dev *cd, const unsigned char *img)
{
  crashdev_restart (cd);
  T_ASSERT ((dev_pwrite (cd, img, cd->size, 0)) == 0);
  T_ASSERT ((dev_sync (cd)) == 0);
}

/* ---- pbe: the memory backend behind the switch ---- */

static int
pbe_pread (void *ctx, void *buf, uint32_t count, uint64_t offset)
{
  struct pbe *b = ctx;
  int r;

  power_enter (b->pw, 0, NULL);
  r = membackend_ops.pread (b->mb, buf, count, offset);
  power_leave (b->pw);
  return r;
}

static int
pbe_pwrite (void *ctx, const void *buf, uint32_t count, uint64_t offset,
            bool fua)
{
  struct pbe *b = ctx;
  int r;

  power_enter (b->pw, 1, NULL);
  r = membackend_ops.pwrite (b->mb, buf, count, offset, fua);
  power_leave (b->pw);
  return r;
}

static int
pbe_flush (void *ctx)
{
  struct pbe *b = ctx;
  int r;

  power_enter (b->pw, 2, NULL);
  r = membackend_ops.flush (b->mb);
  power_leave (b->pw);
  return r;
}

static int
pbe_trim (void *ctx, uint32_t count, uint64_t offset)
{
  struct pbe *b = ctx;
  int r;

  power_enter (b->pw, 1, NULL);
  r = membackend_ops.trim (b->mb, count, offset);
  power_leave (b->pw);
  return r;
}

static int
pbe_zero (void *ctx, uint32_t count, uint64_t offset)
{
  struct pbe *b = ctx;
  int r;

  power_enter (b->pw, 1, NULL);
  r = membackend_ops.zero (b->mb, count, offset);
  power_leave (b->pw);
  return r;
}

const struct hhc_backend_ops pbe_ops = {
  .pread = pbe_pread,
  .pwrite = pbe_pwrite,
  .flush = pbe_flush,
  .trim = pbe_trim,
  .zero = pbe_zero,
};
