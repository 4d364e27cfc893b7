/* The devices and the backend behind the log tests' power switch
 * (pdev, tdev, pbe: faults, latency, rendezvous) and whole-device
 * images (see log-helpers.h).
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log-helpers.h"

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
  unsigned us = __atomic_load_n (&p->sync_delay_us, __ATOMIC_RELAXED);

  if (us)
    {
      struct timespec ts = { 0, (long)us * 1000 };
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
  power_enter_call (
      p->pw, &(struct pcall){
                 .kind = 2, .p = p, .fua_buf = buf, .off = off, .len = len });
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
pdev_set_sync_delay (struct hhc_dev *d, unsigned us)
{
  __atomic_store_n (&to_pdev (d)->sync_delay_us, us, __ATOMIC_RELAXED);
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

/* A new blank disk in cd's place (zeros). */
void
dev_blank (struct hhc_dev *cd)
{
  unsigned char *z = calloc (1, cd->size);

  T_ASSERT ((z) != NULL);
  dev_load (cd, z);
  free (z);
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
