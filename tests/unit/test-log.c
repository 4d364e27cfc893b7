/* The HDD barrier log in mode hhc (DESIGN.md sections 3, 5 and 7).
 *
 * Every device (the SSD cache and each log mirror) is a crash device
 * behind a "power" wrapper, and the backend is the in-memory one
 * behind the same wrapper.  A power cut takes a snapshot, atomically
 * across all of them, of what a real power cut at that instant would
 * leave (each device: a seeded random subset of its unsynced writes;
 * the backend: its current bytes, or in some runs only its flushed
 * bytes); the volume then goes on running on the live devices so that
 * no thread can hang on a dead one, is closed, and the snapshot is put
 * back before the restart.
 *
 * Tests:
 *   random_crashes  seeded crash campaign on a small, wrapping log:
 *                   reopen normally, or throw the SSD away and replay
 *                   the log (sometimes with a second power cut during
 *                   the recovery); every sector is checked against an
 *                   oracle (below).  Each seed runs under a watchdog:
 *                   a seed not done after HHC_TEST_TIMEOUT seconds is a
 *                   HANG failure.  HHC_TEST_SEED (first seed),
 *                   HHC_TEST_ROUNDS (how many), HHC_TEST_KEEP_GOING=1
 *                   (report every failing seed, not just the first),
 *                   HHC_TEST_OUTAGES=0 (no backend outages).
 *   torn_tail       a corrupt segment ends the replay: the backend
 *                   holds exactly the state of the barrier before it.
 *   mirror_fails    one mirror fails: I/O and FLUSH go on, replay from
 *                   the survivor (alone, next to the stale mirror, or
 *                   next to a blank one that joins).
 *   mirrors_fail    every mirror fails: FLUSH falls back to writing
 *                   back every dirty block.
 *   group_commit    16 threads writing and flushing to a slow log:
 *                   far fewer log syncs than flushes, and after an SSD
 *                   loss the replay holds every block's last version.
 *   rebase_cut      the log fails during the start-up re-log of the
 *                   dirty blocks, then the SSD is lost: the replay
 *                   still brings back every flushed block.
 *   rebase_tight    the same with a log more than half full (every
 *                   segment a barrier) and a slow log sync (buffers
 *                   queued when the re-log is done).
 *   slot_reuse      slots written back, evicted and taken by other
 *                   LBAs while their revoked entries are still in the
 *                   buffer being filled; then the SSD is lost: every
 *                   LBA gets back its own data, never another's.
 *   refusals        logs of another cache, backend, block size or
 *                   log; a log device too small, a valid log too
 *                   small for a bigger segment-size (nothing
 *                   written); hhc without a log.
 *   lost_log        a cache whose log is gone starts on a blank log
 *                   and logs its dirty blocks there again.
 *   full_log        a log much smaller than the dirty data: FLUSH
 *                   completes (bounded: a HANG failure otherwise) and
 *                   everything is durable.
 *   close_full_log  hhc_close right after filling the log (the flusher
 *                   is stopped first) finishes, and the cache keeps it
 *                   all.  These two run last, as a hang leaves threads
 *                   behind.
 *
 * The oracle, per 512-byte sector (each carries its block, sector
 * index and version, see pattern_fill): the sector holds data written
 * to that very sector (or zeros from a zero or trim, or the initial
 * version 0), never anything else, and no older than what the last
 * completed FLUSH (or the sector's last FUA write) covered.  A trim
 * not yet covered by a completed FLUSH makes any version the sector
 * ever had legal (NBD: trimmed data is undefined); once covered, the
 * sector reads zeros (the memory backend zeroes trimmed ranges).
 */
#include <config.h>

#include <endian.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "common.h"
#include "crc32c.h"
#include "devcrash.h"
#include "flusher.h"
#include "membackend.h"
#include "preopen.h"
#include "reclaim.h"
#include "vol.h"

#define BS 4096u
#define SECTORS (BS / PAT_SECTOR)
#define SEG 65536u
#define ZERO_FLAG (UINT64_C (1) << 63)
#define KiB 1024u
#define MAX_DEVS (1 + HHC_MAX_LOGS)

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

static const char *const log_names[HHC_MAX_LOGS]
    = { "log0", "log1", "log2", "log3", "log4", "log5", "log6", "log7" };

/* Failures.  In the main thread they are cmocka's; the campaign runs
 * each seed in a thread of its own under a watchdog (a hang is a
 * failure too), and there a failure keeps its message and ends the
 * thread (cmocka's longjmp must not cross threads).
 */
static __thread char *worker_msg; /* non-NULL in a campaign thread */
#define MSG_MAX 600

static void tfail (const char *fmt, ...)
    __attribute__ ((noreturn, format (printf, 1, 2)));

static void
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

#define T_ASSERT(c)                                                            \
  do                                                                           \
    {                                                                          \
      if (!(c))                                                                \
        tfail ("%s:%d: %s", __FILE__, __LINE__, #c);                           \
    }                                                                          \
  while (0)

/* ------------------------------------------------------------------ */
/* power: one switch for every device and the backend                  */
/* ------------------------------------------------------------------ */

struct power {
  pthread_rwlock_t rw; /* read: one device or backend call; write: cut */
  uint64_t ops;        /* atomic: counted calls since armed */
  uint64_t crash_at;   /* atomic: cut at this counted call (0: never) */
  bool sync_only;      /* atomic: count only syncs and backend flushes */
  bool crashed;        /* atomic */
  unsigned seed;       /* which unsynced writes survive */
  bool revert_backend; /* the backend loses its unflushed writes too */
  struct hhc_dev *cd[MAX_DEVS]; /* the crash devices (not wrappers) */
  unsigned ncd;
  unsigned char *img[MAX_DEVS]; /* what the cut left on each */
  struct membackend *mb;
  unsigned char *be_img;
};

static void
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

static void
power_destroy (struct power *pw)
{
  for (unsigned i = 0; i < MAX_DEVS; i++)
    free (pw->img[i]);
  free (pw->be_img);
  pthread_rwlock_destroy (&pw->rw);
}

/* The crash devices a cut applies to (SSD first, then the logs). */
static void
power_set_devs (struct power *pw, struct hhc_dev *const *cd, unsigned n)
{
  pthread_rwlock_wrlock (&pw->rw);
  pw->ncd = n;
  for (unsigned i = 0; i < n; i++)
    pw->cd[i] = cd[i];
  pthread_rwlock_unlock (&pw->rw);
}

static bool
power_crashed (struct power *pw)
{
  return __atomic_load_n (&pw->crashed, __ATOMIC_ACQUIRE);
}

/* Cut the power now: snapshot what survives, keep the devices live. */
static void
power_cut (struct power *pw)
{
  pthread_rwlock_wrlock (&pw->rw);
  if (!pw->crashed)
    {
      for (unsigned i = 0; i < pw->ncd; i++)
        {
          struct hhc_dev *d = pw->cd[i];
          unsigned char *cur = malloc (d->size);
          free (pw->img[i]);
          pw->img[i] = malloc (d->size);
          if (cur == NULL || pw->img[i] == NULL
              || dev_pread (d, cur, d->size, 0) != 0)
            abort ();
          crashdev_crash (d, pw->seed + 7919 * i, NULL, NULL);
          if (dev_pread (d, pw->img[i], d->size, 0) != 0)
            abort ();
          /* The volume goes on with what it had written. */
          crashdev_restart (d);
          if (dev_pwrite (d, cur, d->size, 0) != 0)
            abort ();
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

/* Arm: cut at the at-th counted call from now (0: disarm). */
static void
power_arm (struct power *pw, uint64_t at, bool sync_only, unsigned seed,
           bool revert_backend)
{
  pthread_rwlock_wrlock (&pw->rw);
  pw->seed = seed;
  pw->revert_backend = revert_backend;
  __atomic_store_n (&pw->ops, 0, __ATOMIC_RELEASE);
  __atomic_store_n (&pw->sync_only, sync_only, __ATOMIC_RELEASE);
  __atomic_store_n (&pw->crashed, false, __ATOMIC_RELEASE);
  __atomic_store_n (&pw->crash_at, at, __ATOMIC_RELEASE);
  pthread_rwlock_unlock (&pw->rw);
}

/* Put the snapshot back (no volume open) and disarm. */
static void
power_restore (struct power *pw)
{
  T_ASSERT (pw->crashed);
  for (unsigned i = 0; i < pw->ncd; i++)
    {
      struct hhc_dev *d = pw->cd[i];
      crashdev_restart (d);
      T_ASSERT ((dev_pwrite (d, pw->img[i], d->size, 0)) == 0);
      T_ASSERT ((dev_sync (d)) == 0);
    }
  membackend_poke (pw->mb, pw->be_img, membackend_size (pw->mb), 0);
  power_arm (pw, 0, false, 0, false);
}

/* kind: 0 read (not counted), 1 write, 2 sync. */
static void
power_enter (struct power *pw, int kind)
{
  if (pw == NULL)
    return;
  if (kind && __atomic_load_n (&pw->crash_at, __ATOMIC_ACQUIRE)
      && (kind == 2 || !__atomic_load_n (&pw->sync_only, __ATOMIC_ACQUIRE)))
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

struct pdev {
  struct hhc_dev dev; /* first: the volume sees this */
  struct hhc_dev *inner;
  struct power *pw;
  uint64_t writes;     /* atomic */
  uint64_t fail_after; /* atomic: writes that succeed before it fails */
  bool failing;        /* atomic: every call fails with EIO */
  unsigned sync_delay_us;
};

static struct pdev *
to_pdev (struct hhc_dev *d)
{
  return (struct pdev *)d;
}

static bool
pd_failing (struct pdev *p)
{
  return __atomic_load_n (&p->failing, __ATOMIC_ACQUIRE);
}

static int
pd_pread (struct hhc_dev *d, void *buf, size_t len, uint64_t off)
{
  struct pdev *p = to_pdev (d);
  int r;

  if (pd_failing (p))
    return EIO;
  power_enter (p->pw, 0);
  r = dev_pread (p->inner, buf, len, off);
  power_leave (p->pw);
  return r;
}

static int
pd_pwrite (struct hhc_dev *d, const void *buf, size_t len, uint64_t off)
{
  struct pdev *p = to_pdev (d);
  int r;

  if (pd_failing (p))
    return EIO;
  if (__atomic_add_fetch (&p->writes, 1, __ATOMIC_ACQ_REL)
      > __atomic_load_n (&p->fail_after, __ATOMIC_ACQUIRE))
    {
      __atomic_store_n (&p->failing, true, __ATOMIC_RELEASE);
      return EIO;
    }
  power_enter (p->pw, 1);
  r = dev_pwrite (p->inner, buf, len, off);
  power_leave (p->pw);
  return r;
}

static int
pd_sync (struct hhc_dev *d)
{
  struct pdev *p = to_pdev (d);
  int r;

  if (pd_failing (p))
    return EIO;
  if (p->sync_delay_us)
    {
      struct timespec ts = { 0, (long)p->sync_delay_us * 1000 };
      nanosleep (&ts, NULL);
    }
  power_enter (p->pw, 2);
  r = dev_sync (p->inner);
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

static struct hhc_dev *
pdev_new (struct hhc_dev *inner, struct power *pw, const char *name)
{
  struct pdev *p = calloc (1, sizeof *p);

  T_ASSERT ((p) != NULL);
  p->dev.ops = &pdev_ops;
  p->dev.size = inner->size;
  p->dev.name = strdup (name);
  T_ASSERT ((p->dev.name) != NULL);
  p->inner = inner;
  p->pw = pw;
  p->fail_after = UINT64_MAX;
  return &p->dev;
}

static void
pdev_free (struct hhc_dev *d)
{
  if (d == NULL)
    return;
  free (d->name);
  free (d);
}

/* The device fails (every call EIO) after n more successful writes. */
static void
pdev_fail_after (struct hhc_dev *d, uint64_t n)
{
  struct pdev *p = to_pdev (d);

  __atomic_store_n (&p->fail_after,
                    __atomic_load_n (&p->writes, __ATOMIC_ACQUIRE) + n,
                    __ATOMIC_RELEASE);
  if (n == 0)
    __atomic_store_n (&p->failing, true, __ATOMIC_RELEASE);
}

static void
pdev_heal (struct hhc_dev *d)
{
  struct pdev *p = to_pdev (d);

  __atomic_store_n (&p->fail_after, UINT64_MAX, __ATOMIC_RELEASE);
  __atomic_store_n (&p->failing, false, __ATOMIC_RELEASE);
}

/* A crash device plus its wrapper. */
struct tdev {
  struct hhc_dev *cd, *pd;
};

static void
tdev_new (struct tdev *t, uint64_t size, struct power *pw, const char *name)
{
  T_ASSERT ((crashdev_create (size, &t->cd)) == 0);
  t->pd = pdev_new (t->cd, pw, name);
}

static void
tdev_free (struct tdev *t)
{
  pdev_free (t->pd);
  if (t->cd)
    crashdev_destroy (t->cd);
  t->pd = t->cd = NULL;
}

/* Whole-device images (for replaying one state several ways). */
static unsigned char *
dev_save (struct hhc_dev *cd)
{
  unsigned char *p = malloc (cd->size);

  T_ASSERT ((p) != NULL);
  T_ASSERT ((dev_pread (cd, p, cd->size, 0)) == 0);
  return p;
}

static void
dev_load (struct hhc_dev *cd, const unsigned char *img)
{
  crashdev_restart (cd);
  T_ASSERT ((dev_pwrite (cd, img, cd->size, 0)) == 0);
  T_ASSERT ((dev_sync (cd)) == 0);
}

/* ---- pbe: the memory backend behind the switch ---- */

struct pbe {
  struct membackend *mb;
  struct power *pw;
};

static int
pbe_pread (void *ctx, void *buf, uint32_t count, uint64_t offset)
{
  struct pbe *b = ctx;
  int r;

  power_enter (b->pw, 0);
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

  power_enter (b->pw, 1);
  r = membackend_ops.pwrite (b->mb, buf, count, offset, fua);
  power_leave (b->pw);
  return r;
}

static int
pbe_flush (void *ctx)
{
  struct pbe *b = ctx;
  int r;

  power_enter (b->pw, 2);
  r = membackend_ops.flush (b->mb);
  power_leave (b->pw);
  return r;
}

static int
pbe_trim (void *ctx, uint32_t count, uint64_t offset)
{
  struct pbe *b = ctx;
  int r;

  power_enter (b->pw, 1);
  r = membackend_ops.trim (b->mb, count, offset);
  power_leave (b->pw);
  return r;
}

static int
pbe_zero (void *ctx, uint32_t count, uint64_t offset)
{
  struct pbe *b = ctx;
  int r;

  power_enter (b->pw, 1);
  r = membackend_ops.zero (b->mb, count, offset);
  power_leave (b->pw);
  return r;
}

static const struct hhc_backend_ops pbe_ops = {
  .pread = pbe_pread,
  .pwrite = pbe_pwrite,
  .flush = pbe_flush,
  .trim = pbe_trim,
  .zero = pbe_zero,
};

/* ------------------------------------------------------------------ */
/* the oracle                                                          */
/* ------------------------------------------------------------------ */

struct hist {
  uint64_t *v; /* versions written, oldest first; ZERO_FLAG|n = zeros */
  uint32_t n, cap;
};

struct model {
  uint64_t nsec;
  struct hist *h;
  uint64_t *latest;  /* newest entry per sector */
  uint64_t *flushed; /* minimum (op number) a crash may leave */
  bool *trimmed;     /* a trim not yet covered by a flush */
};

static uint64_t
opnum (uint64_t v)
{
  return v & ~ZERO_FLAG;
}

static void
model_init (struct model *m, uint64_t nsec)
{
  m->nsec = nsec;
  m->h = calloc (nsec, sizeof *m->h);
  m->latest = calloc (nsec, sizeof *m->latest);
  m->flushed = calloc (nsec, sizeof *m->flushed);
  m->trimmed = calloc (nsec, sizeof *m->trimmed);
  T_ASSERT ((m->h) != NULL);
  T_ASSERT ((m->latest) != NULL);
  T_ASSERT ((m->flushed) != NULL);
  T_ASSERT ((m->trimmed) != NULL);
}

static void
model_free (struct model *m)
{
  for (uint64_t i = 0; i < m->nsec; i++)
    free (m->h[i].v);
  free (m->h);
  free (m->latest);
  free (m->flushed);
  free (m->trimmed);
}

static void
model_set (struct model *m, uint64_t sec, uint64_t v)
{
  struct hist *h = &m->h[sec];

  if (h->n == h->cap)
    {
      h->cap = h->cap ? 2 * h->cap : 4;
      h->v = realloc (h->v, h->cap * sizeof *h->v);
      T_ASSERT ((h->v) != NULL);
    }
  h->v[h->n++] = v;
  m->latest[sec] = v;
}

static void
model_flush_all (struct model *m)
{
  for (uint64_t i = 0; i < m->nsec; i++)
    {
      m->flushed[i] = opnum (m->latest[i]);
      m->trimmed[i] = false;
    }
}

/* Is this sector content acceptable for sector sec after a crash? */
static bool
model_ok (const struct model *m, uint64_t sec, const unsigned char *data,
          char *why, size_t whylen)
{
  const struct hist *h = &m->h[sec];
  uint64_t lba = 0, ver = 0;
  uint32_t sidx = 0;
  int d = pattern_decode (data, &lba, &sidx, &ver);

  if (d < 0)
    {
      snprintf (why, whylen, "garbage");
      return false;
    }
  if (d == 1 && (lba != sec / SECTORS || sidx != sec % SECTORS))
    {
      snprintf (why, whylen, "block %llu sector %u's data (version %llu)",
                (unsigned long long)lba, sidx, (unsigned long long)ver);
      return false;
    }
  for (uint32_t i = 0; i < h->n; i++)
    {
      bool zero = h->v[i] & ZERO_FLAG;
      if ((d == 0) != zero || (!zero && h->v[i] != ver))
        continue;
      if (m->trimmed[sec] || opnum (h->v[i]) >= m->flushed[sec])
        return true;
    }
  if (d == 1)
    snprintf (why, whylen, "version %llu (%s; flushed: %llu, latest: %llu%s%s)",
              (unsigned long long)ver,
              h->n && ver <= opnum (m->latest[sec]) ? "older than allowed"
                                                    : "never written here",
              (unsigned long long)m->flushed[sec],
              (unsigned long long)opnum (m->latest[sec]),
              m->latest[sec] & ZERO_FLAG ? " zero" : "",
              m->trimmed[sec] ? ", trimmed" : "");
  else
    snprintf (why, whylen, "zeros (flushed: %llu, latest: %llu%s)",
              (unsigned long long)m->flushed[sec],
              (unsigned long long)opnum (m->latest[sec]),
              m->latest[sec] & ZERO_FLAG ? " zero" : "");
  return false;
}

/* ------------------------------------------------------------------ */
/* the crash campaign                                                  */
/* ------------------------------------------------------------------ */

struct run {
  uint64_t seed, rng;
  uint64_t nblocks;
  uint32_t nslots;
  unsigned nlogs;
  uint64_t log_size;
  struct power pw;
  struct membackend *mb;
  struct pbe be;
  struct tdev ssd, logs[2];
  struct hhc_backend_info info;
  struct hhc_conf conf;
  struct hhc_preopened pre; /* devices given to hhc_open */
  struct hhc_volume *vol;
  struct model m;
  uint64_t op; /* version counter */
  unsigned char *buf;
  const char *phase; /* atomic: the watchdog reads it */
  char cfg[200];     /* the run's configuration, for messages */
  /* what happened, for the summary */
  uint64_t nwrites, nflushes;
};

static void
set_phase (struct run *r, const char *phase)
{
  __atomic_store_n (&r->phase, phase, __ATOMIC_RELEASE);
}

static const char *
get_phase (struct run *r)
{
  return __atomic_load_n (&r->phase, __ATOMIC_ACQUIRE);
}

#define RFAIL(r, ...)                                                          \
  do                                                                           \
    {                                                                          \
      char msg_[400];                                                          \
      snprintf (msg_, sizeof msg_, __VA_ARGS__);                               \
      tfail ("seed %llu (%s; %s): %s", (unsigned long long)(r)->seed,          \
             get_phase (r), (r)->cfg, msg_);                                   \
    }                                                                          \
  while (0)

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

static void
new_ssd (struct run *r, uint32_t nslots)
{
  tdev_free (&r->ssd);
  r->nslots = nslots;
  tdev_new (&r->ssd, test_cache_dev_size (nslots, BS), &r->pw, "ssd");
  run_set_devs (r);
}

static void
run_open (struct run *r)
{
  int e = hhc_open (&r->conf, &r->pre, &pbe_ops, &r->info, &r->vol);

  if (e)
    RFAIL (r, "hhc_open: %s", strerror (e));
  e = hhc_start (r->vol, &r->be);
  if (e)
    RFAIL (r, "hhc_start: %s", strerror (e));
}

static void
run_close (struct run *r)
{
  int e = hhc_close (r->vol);

  r->vol = NULL;
  if (e)
    RFAIL (r, "hhc_close: %s", strerror (e));
}

static uint64_t
pick_lba (struct run *r)
{
  return test_rand_below (&r->rng, 2) ? test_rand_below (&r->rng, 24)
                                      : test_rand_below (&r->rng, r->nblocks);
}

/* Sectors [first_sec, +nsec) (may span blocks). */
static void
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

static void
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

static void
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
          if (test_env_u64 ("HHC_TEST_OUTAGES", 1))
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
static void
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

struct totals {
  uint64_t runs, cut_mid, reopen, replay, recovery_cut, writes, flushes;
  uint64_t segments, wrapped, full_waits, relogged, reclaimed, revokes;
  uint64_t head_persists, mirrors2, backend_reverts, ops;
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

static void
one_run (struct run *r, uint64_t seed, struct totals *t)
{
  static const uint32_t slot_choice[] = { 64, 128, 256, 400 };
  static const uint64_t region_choice[]
      = { 352 * KiB, 384 * KiB, 512 * KiB, 1024 * KiB, 3072 * KiB };
  static const unsigned low_choice[] = { 2, 5, 10, 20 };
  unsigned char blk[BS];
  int how;

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
  r->be = (struct pbe){ r->mb, &r->pw };
  model_init (&r->m, r->nblocks * SECTORS);
  for (uint64_t l = 0; l < r->nblocks; l++)
    {
      pattern_fill (blk, l, 0, SECTORS, 0);
      membackend_poke (r->mb, blk, BS, l * BS);
      for (uint32_t s = 0; s < SECTORS; s++)
        model_set (&r->m, l * SECTORS + s, 0);
    }
  r->info = membackend_info (r->mb, test_rand_below (&r->rng, 2) ? 16384 : 0,
                             "membackend:log");
  hhc_conf_init (&r->conf);
  memset (&r->pre, 0, sizeof r->pre);
  r->conf.mode = HHC_MODE_HHC;
  /* ssd-sync=checkpoint (a FLUSH syncs only the log) in two seeds out of
   * three, from the seed so that the draws below stay as they were.
   */
  r->conf.wal = seed % 3 != 0;
  r->conf.log = test_log;
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
      r->conf.log_paths[i] = log_names[i];
      r->pre.logs[i] = r->logs[i].pd;
    }
  new_ssd (r, slot_choice[test_rand_below (&r->rng, 4)]);
  snprintf (r->cfg, sizeof r->cfg,
            "%u log%s of %llu KiB, %u buffers, %u slots, %llu blocks, "
            "dirty %u/%u/%u, preferred block %u",
            r->nlogs, r->nlogs > 1 ? "s" : "",
            (unsigned long long)(r->log_size - LOG_REGION_OFF) / KiB,
            r->conf.log_buffers, r->nslots, (unsigned long long)r->nblocks,
            r->conf.dirty_low, r->conf.dirty_high, r->conf.dirty_max,
            r->info.preferred_block);
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

  /* The cut: at any counted call (device write or sync, backend
   * write, trim, zero or flush), or only at a sync or backend flush.
   */
  set_phase (r, "workload");
  bool revert = test_rand_below (&r->rng, 2);
  t->backend_reverts += revert;
  if (test_rand_below (&r->rng, 2))
    power_arm (&r->pw, 1 + test_rand_below (&r->rng, 1500), false,
               (unsigned)seed, revert);
  else
    power_arm (&r->pw, 1 + test_rand_below (&r->rng, 400), true, (unsigned)seed,
               revert);
  workload (r, 250 + test_rand_below (&r->rng, 250));
  t->ops += __atomic_load_n (&r->pw.ops, __ATOMIC_ACQUIRE);
  if (power_crashed (&r->pw))
    t->cut_mid++;
  else
    power_cut (&r->pw);
  add_log_stats (r, t);
  set_phase (r, "close after the cut");
  run_close (r);
  power_restore (&r->pw);

  how = test_rand_below (&r->rng, 2);
  if (how == 0)
    {
      /* (a) Power back on: reload the cache, redoing the log into it
       * (FLUSH synced only the log).  Sometimes the power fails again
       * during the redo.
       */
      struct hhc_counts c;
      set_phase (r, "reopen");
      t->reopen++;
      /* The redo depends on how the last run flushed, not this one. */
      if (test_rand_below (&r->rng, 4) == 0)
        r->conf.wal = !r->conf.wal;
      if (test_rand_below (&r->rng, 3) == 0)
        {
          set_phase (r, "reopen, cut during the redo");
          if (open_cut (r, 60, (unsigned)seed + 3))
            {
              t->redo_cut++;
              set_phase (r, "reopen after a cut during the redo");
              run_open (r);
            }
        }
      else
        run_open (r);
      hhc_get_counts (r->vol, &c);
      t->redone += c.log_redone;
      t->redo_runs += c.log_redone > 0;
      verify_all (r, false, "reopened volume");
    }
  else
    {
      /* (b) The SSD is lost: a blank one, and the log is replayed into
       * the backend at start.  Sometimes the power fails again during
       * the recovery.
       */
      t->replay++;
      set_phase (r, "replay");
      new_ssd (r, slot_choice[test_rand_below (&r->rng, 4)]);
      if (test_rand_below (&r->rng, 3) == 0)
        {
          set_phase (r, "replay, cut during recovery");
          if (open_cut (r, 120, (unsigned)seed + 1))
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
      verify_all (r, true, "backend after the replay");
      verify_all (r, false, "volume after the replay");
    }
  check_usable (r);
  run_close (r);

  t->runs++;
  t->writes += r->nwrites;
  t->flushes += r->nflushes;
  t->mirrors2 += r->nlogs == 2;
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
          "the redo)\n",
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
          (unsigned long long)t.redone, (unsigned long long)t.redo_cut);
  /* The write-ahead restart was exercised (a FLUSH commits no SSD). */
  if (!failed && t.reopen >= 10 && t.redo_runs == 0)
    fail_msg ("%llu reopens, none redid a block from the log",
              (unsigned long long)t.reopen);
  if (failed)
    fail_msg ("%llu seed(s) failed; the first: %s", (unsigned long long)failed,
              first_msg);
}

/* ------------------------------------------------------------------ */
/* a simple environment for the directed tests                         */
/* ------------------------------------------------------------------ */

struct env {
  struct membackend *mb;
  struct pbe be;
  struct tdev ssd;
  struct tdev logs[HHC_MAX_LOGS];
  unsigned nlogs;
  struct hhc_backend_info info;
  struct hhc_conf conf;
  struct hhc_preopened pre; /* devices given to hhc_open */
  struct hhc_volume *vol;
  uint64_t nblocks;
  uint32_t nslots;
};

/* Backend of nblocks blocks, block l holding pattern version 0. */
static void
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
  e->conf.log = test_log;
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

static int
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

static void
env_open (struct env *e)
{
  assert_int_equal (env_try_open (e), 0);
}

static void
env_close (struct env *e)
{
  assert_int_equal (hhc_close (e->vol), 0);
  e->vol = NULL;
}

/* A blank SSD (the old one is lost). */
static void
env_new_ssd (struct env *e)
{
  tdev_free (&e->ssd);
  tdev_new (&e->ssd, test_cache_dev_size (e->nslots, BS), NULL, "ssd");
  e->pre.cache = e->ssd.pd;
}

static void
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
static int
env_try_write (struct env *e, uint64_t lba, uint64_t version)
{
  unsigned char blk[BS];

  pattern_fill (blk, lba, 0, SECTORS, version);
  return hhc_write (e->vol, &e->be, blk, BS, lba * BS, false);
}

static void
env_write (struct env *e, uint64_t lba, uint64_t version, bool fua)
{
  unsigned char blk[BS];

  pattern_fill (blk, lba, 0, SECTORS, version);
  assert_int_equal (hhc_write (e->vol, &e->be, blk, BS, lba * BS, fua), 0);
}

static void
env_flush (struct env *e)
{
  assert_int_equal (hhc_flush (e->vol, &e->be), 0);
}

/* Does the backend (durable bytes) hold version v of block lba? */
static bool
backend_has (struct env *e, uint64_t lba, uint64_t v)
{
  unsigned char blk[BS];

  pattern_fill (blk, lba, 0, SECTORS, v);
  return membackend_cmp (e->mb, true, blk, BS, lba * BS) == 0;
}

static bool
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
static int64_t
backend_version (struct env *e, uint64_t lba)
{
  unsigned char blk[BS];
  uint64_t l, v = 0, v0 = 0;
  uint32_t s;

  membackend_peek (e->mb, true, blk, BS, lba * BS);
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
static void
check_backend_state (struct env *e, const uint64_t *expect, const char *what)
{
  for (uint64_t l = 0; l < e->nblocks; l++)
    if (!backend_has (e, l, expect[l]))
      fail_msg ("%s: backend block %llu holds version %lld, expected %llu",
                what, (unsigned long long)l, (long long)backend_version (e, l),
                (unsigned long long)expect[l]);
}

static struct hhc_counts
counts (struct env *e)
{
  struct hhc_counts c;

  hhc_get_counts (e->vol, &c);
  return c;
}

/* ---- torn tail ---- */

static uint32_t
rd32 (const unsigned char *p)
{
  uint32_t v;
  memcpy (&v, p, 4);
  return le32toh (v);
}

static uint64_t
rd64 (const unsigned char *p)
{
  uint64_t v;
  memcpy (&v, p, 8);
  return le64toh (v);
}

struct seg_desc {
  uint64_t off; /* on the device */
  uint64_t seq;
  uint32_t flags, nblocks, hdr_len;
  uint64_t len;
};

/* Follow the segment chain of a log that never wrapped (log.c's
 * format: "HHCSEG01", u64 seq at 8, u32 flags at 24, u32 block count
 * at 28, u32 header length at 36).
 */
static size_t
parse_segments (struct hhc_dev *d, struct seg_desc *out, size_t max)
{
  unsigned char h[4096];
  uint64_t pos = 0, seq = 0;
  size_t n = 0;

  while (n < max && LOG_REGION_OFF + pos + sizeof h <= d->size)
    {
      assert_int_equal (dev_pread (d, h, sizeof h, LOG_REGION_OFF + pos), 0);
      if (memcmp (h, LOG_SEG_MAGIC, 8) != 0 || (n && rd64 (h + 8) != seq + 1))
        break;
      struct seg_desc s = { LOG_REGION_OFF + pos, rd64 (h + 8),  rd32 (h + 24),
                            rd32 (h + 28),        rd32 (h + 36), 0 };
      s.len = s.hdr_len + HHC_ROUND_UP ((uint64_t)s.nblocks * BS, 4096);
      out[n++] = s;
      seq = s.seq;
      pos += s.len;
    }
  return n;
}

static void
garble (struct hhc_dev *d, uint64_t off, uint64_t len, uint64_t seed)
{
  unsigned char *p = malloc (len);

  assert_non_null (p);
  for (uint64_t i = 0; i < len; i++)
    p[i] = (unsigned char)test_rand (&seed);
  assert_int_equal (dev_pwrite (d, p, len, off), 0);
  assert_int_equal (dev_sync (d), 0);
  free (p);
}

#define TT_ROUNDS 4
#define TT_BLOCKS 64

/* A block that ends with the crc32c of the rest, as file systems' and
 * databases' pages often do (and hhc-verify's blocks).
 */
static void
codeword_fill (unsigned char *blk, uint64_t *rng)
{
  for (uint32_t i = 0; i < BS - 4; i++)
    blk[i] = (unsigned char)test_rand (rng);
  put32 (blk + BS - 4, crc32c (0, blk, BS - 4));
}

/* variant 0: the last barrier segment is garbage from its header on;
 * 1: only its last data block is (a torn write); 2: the barrier before
 * it has one flipped byte, so the last (valid) one must be ignored;
 * 3: the last round writes blocks that end with their own crc32c, and
 * the last one of them on the log is another such block, as a torn
 * write leaves the last lap's blocks behind (a crc32c over the segment
 * does not change then: docs/open-failures.md 1); 4: nothing is torn,
 * but every segment is rewritten as earlier builds wrote it (crc32c,
 * no LOG_F_SUM): the replay still takes all of them.
 */
static void
torn_tail_variant (int variant)
{
  struct env e;
  uint64_t state[TT_ROUNDS + 1][TT_BLOCKS];
  uint64_t rng = 1234 + variant;
  struct seg_desc segs[64], *data[TT_ROUNDS];
  size_t nseg, nd = 0;
  int keep;

  env_init (&e, TT_BLOCKS, 128, 1, LOG_REGION_OFF + 1024 * KiB);
  env_open (&e);
  /* Nothing reaches the backend but the replay. */
  membackend_fail_all (e.mb, MB_OP_WRITE, true);
  memset (state[0], 0, sizeof state[0]);
  for (int k = 1; k <= TT_ROUNDS; k++)
    {
      memcpy (state[k], state[k - 1], sizeof state[k]);
      for (int i = 0; i < 6; i++)
        {
          uint64_t lba = test_rand_below (&rng, 24);
          uint64_t v = k * 100 + i;
          if (variant == 3 && k == TT_ROUNDS)
            {
              unsigned char blk[BS];
              codeword_fill (blk, &rng);
              assert_int_equal (
                  hhc_write (e.vol, &e.be, blk, BS, lba * BS, false), 0);
              state[k][lba] = UINT64_MAX; /* no pattern version */
              continue;
            }
          env_write (&e, lba, v, false);
          state[k][lba] = v;
        }
      env_flush (&e);
    }
  env_close (&e);
  membackend_fail_all (e.mb, MB_OP_WRITE, false);

  nseg = parse_segments (e.logs[0].cd, segs, 64);
  for (size_t i = 0; i < nseg; i++)
    if (segs[i].nblocks)
      {
        assert_true (nd < TT_ROUNDS);
        assert_true (segs[i].flags & LOG_F_BARRIER);
        data[nd++] = &segs[i];
      }
  assert_int_equal (nd, TT_ROUNDS);
  switch (variant)
    {
    case 0:
      garble (e.logs[0].cd, data[3]->off, data[3]->len, rng);
      keep = 3;
      break;
    case 1:
      garble (e.logs[0].cd, data[3]->off + data[3]->len - BS, BS, rng);
      keep = 3;
      break;
    case 3:
      {
        unsigned char blk[BS];
        codeword_fill (blk, &rng);
        assert_int_equal (
            dev_pwrite (e.logs[0].cd, blk, BS,
                        data[3]->off + data[3]->hdr_len
                            + (uint64_t)(data[3]->nblocks - 1) * BS),
            0);
        assert_int_equal (dev_sync (e.logs[0].cd), 0);
        keep = 3;
      }
      break;
    case 4:
      {
        uint32_t prev = 0;
        for (size_t i = 0; i < nseg; i++)
          {
            size_t len = segs[i].hdr_len + (size_t)segs[i].nblocks * BS;
            unsigned char *p = malloc (len);
            assert_non_null (p);
            assert_int_equal (dev_pread (e.logs[0].cd, p, len, segs[i].off), 0);
            assert_true (rd32 (p + 24) & LOG_F_SUM);
            put32 (p + 24, rd32 (p + 24) & ~LOG_F_SUM);
            if (i > 0)
              put32 (p + 84, prev);
            put32 (p + 80, 0);
            prev = crc32c (0, p, len);
            put32 (p + 80, prev);
            assert_int_equal (dev_pwrite (e.logs[0].cd, p, len, segs[i].off),
                              0);
            free (p);
          }
        assert_int_equal (dev_sync (e.logs[0].cd), 0);
        keep = 4;
      }
      break;
    default:
      {
        unsigned char b;
        uint64_t off = data[2]->off + LOG_HDR_FIXED; /* its LBA table */
        assert_int_equal (dev_pread (e.logs[0].cd, &b, 1, off), 0);
        b ^= 0x40;
        assert_int_equal (dev_pwrite (e.logs[0].cd, &b, 1, off), 0);
        assert_int_equal (dev_sync (e.logs[0].cd), 0);
        keep = 2;
      }
    }

  /* The SSD is lost: the replay stops at the corrupt segment. */
  env_new_ssd (&e);
  env_open (&e);
  check_backend_state (&e, state[keep], "after replaying a torn tail");

  /* The log goes on from there: new barriers, another SSD loss, and
   * the segments after the corrupt one stay ignored.
   */
  membackend_fail_all (e.mb, MB_OP_WRITE, true);
  for (int i = 0; i < 3; i++)
    {
      uint64_t lba = 30 + i;
      /* The first one over a block that the ignored barriers wrote. */
      for (uint64_t l = 0; i == 0 && l < TT_BLOCKS; l++)
        if (state[TT_ROUNDS][l] != state[keep][l])
          {
            lba = l;
            break;
          }
      env_write (&e, lba, 900 + i, false);
      state[keep][lba] = 900 + i;
    }
  env_flush (&e);
  env_close (&e);
  membackend_fail_all (e.mb, MB_OP_WRITE, false);
  env_new_ssd (&e);
  env_open (&e);
  check_backend_state (&e, state[keep], "after a second SSD loss");
  env_close (&e);
  env_free (&e);
}

static void
test_torn_tail (void **state)
{
  for (int v = 0; v < 5; v++)
    torn_tail_variant (v);
}

/* ---- mirrors ---- */

#define MB_BLOCKS 64

/* One mirror fails (fidx), then the SSD is lost; replay from: 0 the
 * survivor alone, 1 the survivor next to the failed mirror (healed,
 * stale), 2 the survivor next to a blank device, which then carries
 * the log alone after the survivor is lost too.
 */
static void
mirror_fails (unsigned fidx, uint64_t fail_after)
{
  struct env e;
  uint64_t expect[MB_BLOCKS] = { 0 };
  unsigned char *limg[2], *be;
  unsigned surv = !fidx;

  env_init (&e, MB_BLOCKS, 128, 2, LOG_REGION_OFF + 1024 * KiB);
  env_open (&e);
  membackend_fail_all (e.mb, MB_OP_WRITE, true);
  for (uint64_t l = 0; l < 8; l++)
    {
      env_write (&e, l, 10 + l, false);
      expect[l] = 10 + l;
    }
  env_flush (&e);
  assert_int_equal (counts (&e).log_mirrors_failed, 0);
  pdev_fail_after (e.logs[fidx].pd, fail_after);
  for (int k = 2; k <= 4; k++)
    {
      for (uint64_t l = 4; l < 16; l++)
        {
          env_write (&e, l, k * 100 + l, false);
          expect[l] = k * 100 + l;
        }
      env_flush (&e);
      assert_true (reads_v (&e, 5, k * 100 + 5));
    }
  env_write (&e, 20, 2020, true); /* FUA */
  expect[20] = 2020;
  struct hhc_counts c = counts (&e);
  assert_int_equal (c.log_mirrors, 2);
  assert_int_equal (c.log_mirrors_failed, 1);
  env_close (&e);
  membackend_fail_all (e.mb, MB_OP_WRITE, false);
  pdev_heal (e.logs[fidx].pd);
  for (int i = 0; i < 2; i++)
    limg[i] = dev_save (e.logs[i].cd);
  be = malloc (MB_BLOCKS * BS);
  assert_non_null (be);
  membackend_peek (e.mb, true, be, MB_BLOCKS * BS, 0);

  for (int variant = 0; variant < 3; variant++)
    {
      for (int i = 0; i < 2; i++)
        dev_load (e.logs[i].cd, limg[i]);
      membackend_poke (e.mb, be, MB_BLOCKS * BS, 0);
      env_new_ssd (&e);
      if (variant == 0)
        {
          e.conf.nlogs = 1;
          e.pre.logs[0] = e.logs[surv].pd;
        }
      else
        {
          e.conf.nlogs = 2;
          e.pre.logs[0] = e.logs[0].pd;
          e.pre.logs[1] = e.logs[1].pd;
          if (variant == 2)
            {
              tdev_free (&e.logs[fidx]);
              tdev_new (&e.logs[fidx], LOG_REGION_OFF + 1024 * KiB, NULL,
                        log_names[fidx]);
              e.pre.logs[fidx] = e.logs[fidx].pd;
            }
        }
      env_open (&e);
      for (uint64_t l = 0; l < MB_BLOCKS; l++)
        if (!backend_has (&e, l, expect[l]))
          fail_msg ("mirror %u failed, replay variant %d: block %llu holds "
                    "version %lld, expected %llu",
                    fidx, variant, (unsigned long long)l,
                    (long long)backend_version (&e, l),
                    (unsigned long long)expect[l]);
      if (variant == 2)
        {
          /* The blank mirror joined: after a barrier of this run it
           * alone holds what a replay needs.
           */
          membackend_fail_all (e.mb, MB_OP_WRITE, true);
          for (uint64_t l = 30; l < 36; l++)
            {
              env_write (&e, l, 3000 + l, false);
              expect[l] = 3000 + l;
            }
          env_flush (&e);
          env_close (&e);
          membackend_fail_all (e.mb, MB_OP_WRITE, false);
          env_new_ssd (&e);
          e.conf.nlogs = 1;
          e.pre.logs[0] = e.logs[fidx].pd;
          env_open (&e);
          for (uint64_t l = 0; l < MB_BLOCKS; l++)
            if (!backend_has (&e, l, expect[l]))
              fail_msg ("mirror %u failed, replay from the mirror that "
                        "joined: block %llu holds version %lld, expected "
                        "%llu",
                        fidx, (unsigned long long)l,
                        (long long)backend_version (&e, l),
                        (unsigned long long)expect[l]);
        }
      env_close (&e);
    }
  e.conf.nlogs = 2;
  free (be);
  free (limg[0]);
  free (limg[1]);
  env_free (&e);
}

static void
test_mirror_fails (void **state)
{
  for (unsigned fidx = 0; fidx < 2; fidx++)
    for (uint64_t after = 0; after < 3; after++)
      mirror_fails (fidx, after);
}

static void
test_mirrors_fail (void **state)
{
  struct env e;

  env_init (&e, MB_BLOCKS, 128, 2, LOG_REGION_OFF + 1024 * KiB);
  env_open (&e);
  for (uint64_t l = 0; l < 8; l++)
    env_write (&e, l, 10 + l, false);
  env_flush (&e);
  pdev_fail_after (e.logs[0].pd, 0);
  pdev_fail_after (e.logs[1].pd, 1);
  for (uint64_t l = 4; l < 24; l++)
    env_write (&e, l, 100 + l, false);
  /* No mirror left: FLUSH writes back every dirty block instead. */
  env_flush (&e);
  struct hhc_counts c = counts (&e);
  assert_int_equal (c.log_mirrors_failed, 2);
  assert_int_equal (c.dirty, 0);
  for (uint64_t l = 0; l < 24; l++)
    assert_true (backend_has (&e, l, l < 4 ? 10 + l : 100 + l));
  /* And a FUA write is durable in the backend when it returns. */
  env_write (&e, 30, 3030, true);
  assert_true (backend_has (&e, 30, 3030));
  env_write (&e, 31, 3131, false);
  env_write (&e, 5, 555, false);
  env_flush (&e);
  assert_true (backend_has (&e, 31, 3131));
  assert_true (backend_has (&e, 5, 555));
  assert_true (reads_v (&e, 5, 555));
  env_close (&e);
  env_free (&e);
}

/* One mirror, the SSD and the mirror on one power supply, no write-back
 * but the FLUSHes' (the mirror tests below).
 */
/* 64 blocks, 128 slots, nlogs mirrors of 512 KiB, no write-back but
 * the FLUSHes'.
 */
static void
quiet_env_init (struct env *e, unsigned nlogs)
{
  env_init (e, 64, 128, nlogs, LOG_REGION_OFF + 512 * KiB);
  e->conf.dirty_low = 90;
  e->conf.dirty_high = 95;
  e->conf.dirty_max = 99;
  e->conf.idle_ms = 0;
}

static void
pw_env_init (struct env *e, struct power *pw)
{
  quiet_env_init (e, 1);
  power_init (pw, e->mb);
  e->be.pw = pw;
  to_pdev (e->logs[0].pd)->pw = pw;
  to_pdev (e->ssd.pd)->pw = pw;
  power_set_devs (pw, (struct hhc_dev *[]){ e->ssd.cd, e->logs[0].cd }, 2);
}

/* A run in hhc that leaves block 3 (version 41) dirty in the cache and
 * in the log.
 */
static void
dirty_in_log (struct env *e)
{
  env_open (e);
  env_write (e, 3, 41, false);
  env_flush (e);
  env_close (e);
}

static void
pw_env_free (struct env *e, struct power *pw)
{
  e->be.pw = NULL;
  to_pdev (e->logs[0].pd)->pw = NULL;
  to_pdev (e->ssd.pd)->pw = NULL;
  env_free (e);
  power_destroy (pw);
}

/* ssd-sync=checkpoint: the only mirror fails, a FLUSH falls back (the
 * block goes to the backend), and then the power fails.  The log comes
 * back readable with the block's older version under its last barrier:
 * the restart must not redo that over the newer flushed one.
 */
static void
test_wal_mirror_lost (void **state)
{
  struct env e;
  struct power pw;

  pw_env_init (&e, &pw);
  e.conf.wal = true;
  env_open (&e);
  env_write (&e, 3, 41, false);
  env_write (&e, 4, 51, false);
  env_flush (&e); /* the log's barrier only */
  pdev_fail_after (e.logs[0].pd, 0);
  env_write (&e, 3, 42, false);
  env_flush (&e); /* no mirror: commit, write back everything */
  assert_int_equal (counts (&e).log_mirrors_failed, 1);
  assert_true (backend_has (&e, 3, 42));
  power_arm (&pw, 0, false, 7, false);
  power_cut (&pw);
  env_close (&e);
  power_restore (&pw);
  pdev_heal (e.logs[0].pd);
  env_open (&e);
  assert_int_equal (counts (&e).log_redone, 0);
  assert_true (reads_v (&e, 3, 42));
  assert_true (reads_v (&e, 4, 51));
  env_close (&e);
  pw_env_free (&e, &pw);
}

/* Issue 27, case 1: the only mirror fails, a FLUSH falls back (B goes
 * to the backend), and the mirror heals.  Then the power fails and the
 * SSD is lost: the restart must not replay the mirror's stale log (A)
 * over B.  The mirror is voided by a FLUSH after it healed
 * (flush_after), or else by the writer in the background.
 */
static void
heal_variant (bool flush_after)
{
  struct env e;
  struct power pw;

  pw_env_init (&e, &pw);
  env_open (&e);
  env_write (&e, 3, 41, false);
  env_flush (&e); /* 41 under a barrier in the log */
  pdev_fail_after (e.logs[0].pd, 0);
  env_write (&e, 3, 42, false);
  env_flush (&e); /* no mirror: written back */
  assert_true (backend_has (&e, 3, 42));
  assert_int_equal (counts (&e).log_mirrors_failed, 1);
  assert_int_equal (counts (&e).log_mirrors_unvoided, 1);
  pdev_heal (e.logs[0].pd);
  if (flush_after)
    {
      env_write (&e, 5, 51, false);
      env_flush (&e);
    }
  else
    for (int i = 0; i < 1000 && counts (&e).log_mirrors_unvoided; i++)
      {
        struct timespec ts = { 0, 10000000 };
        nanosleep (&ts, NULL);
      }
  assert_int_equal (counts (&e).log_mirrors_unvoided, 0);
  power_arm (&pw, 0, false, 7, false);
  power_cut (&pw);
  env_close (&e);
  power_restore (&pw);
  env_new_ssd (&e);
  env_open (&e);
  if (!backend_has (&e, 3, 42))
    fail_msg ("%s: block 3 holds version %lld after the SSD loss, not 42",
              flush_after ? "FLUSH after the heal" : "background void",
              (long long)backend_version (&e, 3));
  assert_true (reads_v (&e, 3, 42));
  if (flush_after)
    assert_true (backend_has (&e, 5, 51));
  env_close (&e);
  pw_env_free (&e, &pw);
}

/* The last mirror fails on a segment write (one transient error) and
 * heals; no FLUSH falls back.  Its log still holds the only copy of a
 * flushed block that survives the loss of the SSD: it must not be
 * voided before a FLUSH has written the block back (found by review:
 * the first version voided it at once, and the replay lost 41).
 */
static void
test_last_mirror_kept (void **state)
{
  struct env e;
  struct power pw;

  pw_env_init (&e, &pw);
  env_open (&e);
  env_write (&e, 3, 41, false);
  env_flush (&e); /* 41 durable in the log only */
  pdev_fail_after (e.logs[0].pd, 0);
  for (uint64_t l = 10; l < 40; l++)
    env_write (&e, l, 1, false); /* fills a segment: its write fails */
  for (int i = 0; i < 1000 && counts (&e).log_mirrors_failed == 0; i++)
    {
      struct timespec ts = { 0, 10000000 };
      nanosleep (&ts, NULL);
    }
  assert_int_equal (counts (&e).log_mirrors_failed, 1);
  pdev_heal (e.logs[0].pd);
  /* Owed no void yet: the writer must leave it alone. */
  assert_int_equal (counts (&e).log_mirrors_unvoided, 0);
  power_arm (&pw, 0, false, 7, false);
  power_cut (&pw);
  env_close (&e);
  power_restore (&pw);
  env_new_ssd (&e);
  env_open (&e);
  if (!backend_has (&e, 3, 41))
    fail_msg ("block 3 (flushed as 41) holds version %lld after the loss "
              "of the SSD",
              (long long)backend_version (&e, 3));
  env_close (&e);
  pw_env_free (&e, &pw);
}

static void
test_mirror_heals (void **state)
{
  heal_variant (true);
  heal_variant (false);
}

/* Issue 27, case 2: a cache used in hhc (block 3 dirty, in the log),
 * then in wbflush.  Without its log the start is refused; with it the
 * dirty block is written back and the log voided, and later starts
 * need no log.  The SSD is then lost: a restart in hhc with the old
 * log must not replay 41 over the 42 that wbflush wrote back.
 */
static void
test_retire (void **state)
{
  struct env e;

  quiet_env_init (&e, 1);
  dirty_in_log (&e); /* 3 dirty, in the log */
  assert_false (backend_has (&e, 3, 41));
  e.conf.mode = HHC_MODE_WBFLUSH;
  e.conf.nlogs = 0;
  assert_int_equal (env_try_open (&e), EINVAL);
  e.conf.nlogs = 1;
  env_open (&e);
  assert_true (backend_has (&e, 3, 41)); /* drained before the void */
  env_write (&e, 3, 42, false);
  env_flush (&e);
  env_close (&e);
  e.conf.nlogs = 0;
  env_open (&e); /* retired: no log needed */
  env_close (&e);
  env_new_ssd (&e);
  e.conf.mode = HHC_MODE_HHC;
  e.conf.nlogs = 1;
  env_open (&e);
  assert_true (backend_has (&e, 3, 42));
  assert_true (reads_v (&e, 3, 42));
  env_close (&e);
  env_free (&e);
}

/* What a retire refuses, and format=force (review of the first
 * version): (a) one of two mirrors: the other would still be replayed;
 * (b) a log this cache was paired with before a newer one replaced it;
 * (c) format=force in wb over a cache used in hhc, without its log;
 * with it, the log is voided, and a restart in hhc on a new cache
 * after the loss of the SSD replays nothing over what wb wrote back.
 */
static void
test_retire_checks (void **state)
{
  struct env e;

  quiet_env_init (&e, 2);
  dirty_in_log (&e);
  /* (a) */
  e.conf.mode = HHC_MODE_WB;
  e.conf.nlogs = 1;
  assert_int_equal (env_try_open (&e), EINVAL);
  /* (b): a new log (logs[2], blank) replaces both; logs[0] is stale */
  e.conf.mode = HHC_MODE_HHC;
  tdev_new (&e.logs[2], LOG_REGION_OFF + 512 * KiB, NULL, log_names[2]);
  e.pre.logs[0] = e.logs[2].pd;
  e.conf.nlogs = 1;
  env_open (&e);
  env_close (&e);
  e.conf.mode = HHC_MODE_WB;
  e.pre.logs[0] = e.logs[0].pd;
  e.pre.logs[1] = e.logs[1].pd;
  e.conf.nlogs = 2;
  assert_int_equal (env_try_open (&e), EINVAL);
  /* (c) */
  e.conf.format = HHC_FORMAT_FORCE;
  e.conf.nlogs = 0;
  assert_int_equal (env_try_open (&e), EINVAL);
  e.conf.nlogs = 1;
  e.pre.logs[0] = e.logs[2].pd;
  env_open (&e);
  env_write (&e, 3, 42, false);
  env_flush (&e);
  env_close (&e);
  e.conf.format = HHC_FORMAT_AUTO;
  e.conf.nlogs = 0;
  env_open (&e); /* no log needed any more */
  assert_int_equal (hhc_drain (e.vol, &e.be), 0);
  env_close (&e);
  assert_true (backend_has (&e, 3, 42));
  env_new_ssd (&e);
  e.conf.mode = HHC_MODE_HHC;
  e.conf.nlogs = 1;
  env_open (&e);
  assert_true (backend_has (&e, 3, 42));
  env_close (&e);
  env_free (&e);
}

/* ---- group commit ---- */

#define GC_THREADS 16
#define GC_ITERS 25

struct gc_arg {
  struct env *e;
  unsigned id;
  int err;
};

static void *
gc_thread (void *p)
{
  struct gc_arg *a = p;

  for (unsigned i = 0; i < GC_ITERS && a->err == 0; i++)
    {
      uint64_t lba = a->id * 4 + i % 4;
      a->err = env_try_write (a->e, lba, 1 + i);
      if (a->err == 0)
        a->err = hhc_flush (a->e->vol, &a->e->be);
    }
  return NULL;
}

static void
test_group_commit (void **state)
{
  struct env e;
  pthread_t th[GC_THREADS];
  struct gc_arg args[GC_THREADS];
  struct hhc_counts c0, c1;
  uint64_t expect[GC_THREADS * 4];

  env_init (&e, 256, 256, 1, LOG_REGION_OFF + 4096 * KiB);
  /* An HDD: a sync takes a while (the log's only; no time is
   * asserted).
   */
  to_pdev (e.logs[0].pd)->sync_delay_us = 1000;
  env_open (&e);
  /* Nothing is written back: the log alone holds what was flushed
   * (checked by a replay below).
   */
  membackend_fail_all (e.mb, MB_OP_WRITE, true);
  c0 = counts (&e);
  for (unsigned i = 0; i < GC_THREADS; i++)
    {
      args[i] = (struct gc_arg){ &e, i, 0 };
      assert_int_equal (pthread_create (&th[i], NULL, gc_thread, &args[i]), 0);
    }
  for (unsigned i = 0; i < GC_THREADS; i++)
    {
      assert_true (test_join (th[i], 300000));
      assert_int_equal (args[i].err, 0);
    }
  c1 = counts (&e);
  uint64_t flushes = c1.flushes - c0.flushes;
  uint64_t syncs = c1.log_syncs - c0.log_syncs;
  uint64_t barriers = c1.log_barriers - c0.log_barriers;
  printf ("group commit: %llu flushes, %llu log barriers, %llu log syncs\n",
          (unsigned long long)flushes, (unsigned long long)barriers,
          (unsigned long long)syncs);
  assert_int_equal (flushes, GC_THREADS * GC_ITERS);
  assert_true (syncs * 2 < flushes);
  for (unsigned i = 0; i < GC_THREADS; i++)
    for (unsigned k = 0; k < 4; k++)
      {
        /* The last version written to block id*4+k. */
        unsigned last = 0;
        for (unsigned it = 0; it < GC_ITERS; it++)
          if (it % 4 == k)
            last = it + 1;
        assert_true (reads_v (&e, i * 4 + k, last));
        expect[i * 4 + k] = last;
      }
  /* The SSD is lost: the replay of the log (barriers sealed by the
   * group commit's wait, see group_wait_ns) brings back every block's
   * last flushed version.
   */
  env_close (&e);
  membackend_fail_all (e.mb, MB_OP_WRITE, false);
  env_new_ssd (&e);
  env_open (&e);
  for (uint64_t l = 0; l < GC_THREADS * 4; l++)
    if (!backend_has (&e, l, expect[l]))
      fail_msg ("group commit replay: block %llu holds version %lld, "
                "expected %llu",
                (unsigned long long)l, (long long)backend_version (&e, l),
                (unsigned long long)expect[l]);
  env_close (&e);
  env_free (&e);
}

/* ---- a cut during the start-up re-log ---- */

#define RB_BLOCKS 64

/* A reopen with RB_BLOCKS dirty blocks re-logs them: several segments.
 * The log fails after `at` more writes (a crash at that point, as
 * far as the log is concerned), then the SSD is lost: the replay must
 * bring back every block the last run flushed.  Before the start-up
 * barrier named the last run's base until every dirty block was
 * logged again, a barrier on the first full segment of re-logged
 * blocks made the replay skip the last run's segments, and the blocks
 * not yet re-logged were lost.
 */
static void
test_rebase_cut (void **state)
{
  struct env e;
  unsigned char *ssd, *log, *be;

  env_init (&e, 2 * RB_BLOCKS, 256, 1, LOG_REGION_OFF + 2048 * KiB);
  e.conf.dirty_low = 90; /* no write-back before the cut */
  e.conf.dirty_high = 95;
  env_open (&e);
  membackend_fail_all (e.mb, MB_OP_WRITE, true);
  for (uint64_t l = 0; l < RB_BLOCKS; l++)
    env_write (&e, l, 100 + l, false);
  env_flush (&e);
  env_close (&e);
  ssd = dev_save (e.ssd.cd);
  log = dev_save (e.logs[0].cd);
  be = malloc (2 * RB_BLOCKS * BS);
  assert_non_null (be);
  membackend_peek (e.mb, true, be, 2 * RB_BLOCKS * BS, 0);

  for (uint64_t at = 0; at <= 12; at++)
    {
      dev_load (e.ssd.cd, ssd);
      dev_load (e.logs[0].cd, log);
      membackend_poke (e.mb, be, 2 * RB_BLOCKS * BS, 0);
      membackend_fail_all (e.mb, MB_OP_WRITE, true);
      pdev_fail_after (e.logs[0].pd, at);
      if (env_try_open (&e) == 0)
        env_close (&e);
      pdev_heal (e.logs[0].pd);
      membackend_fail_all (e.mb, MB_OP_WRITE, false);
      /* The SSD is lost: replay. */
      env_new_ssd (&e);
      env_open (&e);
      for (uint64_t l = 0; l < RB_BLOCKS; l++)
        if (!backend_has (&e, l, 100 + l))
          fail_msg ("log failed after %llu writes of the start-up re-log, "
                    "then the SSD was lost: block %llu holds version %lld, "
                    "expected %llu",
                    (unsigned long long)at, (unsigned long long)l,
                    (long long)backend_version (&e, l),
                    (unsigned long long)(100 + l));
      env_close (&e);
      /* Back to the SSD of the last run (same size). */
      tdev_free (&e.ssd);
      tdev_new (&e.ssd, test_cache_dev_size (e.nslots, BS), NULL, "ssd");
      e.pre.cache = e.ssd.pd;
    }
  free (ssd);
  free (log);
  free (be);
  env_free (&e);
}

/* The same with a log more than half full at start-up, small segments
 * and a slow log sync: every segment the writer takes is then a
 * barrier, and several buffers of re-logged blocks wait for it when
 * log_rebase switches to this run's base.  A barrier taken after the
 * switch but before the last re-logged block's segment must still
 * name the last run's base: with this run's, a replay from it skipped
 * the last run's segments and lost the blocks re-logged after it.
 */
#define RT_BLOCKS 64
#define RT_PASSES 4

static void
test_rebase_tight (void **state)
{
  struct env e;
  unsigned char *ssd, *log, *be;
  uint64_t expect[RT_BLOCKS];
  const uint64_t besize = 2 * RT_BLOCKS * BS;

  env_init (&e, 2 * RT_BLOCKS, 256, 1, LOG_REGION_OFF + 2048 * KiB);
  e.conf.dirty_low = 90; /* no write-back before the cut */
  e.conf.dirty_high = 95;
  env_open (&e);
  membackend_fail_all (e.mb, MB_OP_WRITE, true);
  /* Dead entries that hold no segment (each keeps a live one): the
   * log is more than half full when the next run re-logs the blocks.
   */
  for (uint64_t l = 0; l < RT_BLOCKS; l++)
    env_write (&e, l, expect[l] = 100 + l, false);
  env_flush (&e);
  for (unsigned pass = 0; pass < RT_PASSES; pass++)
    {
      for (uint64_t l = 0; l < RT_BLOCKS; l++)
        if (l % 4 != 0)
          env_write (&e, l, expect[l] = 200 + 100 * pass + l, false);
      env_flush (&e);
    }
  env_close (&e);
  ssd = dev_save (e.ssd.cd);
  log = dev_save (e.logs[0].cd);
  be = malloc (besize);
  assert_non_null (be);
  membackend_peek (e.mb, true, be, besize, 0);

  for (uint64_t at = 0; at <= 40; at++)
    {
      dev_load (e.ssd.cd, ssd);
      dev_load (e.logs[0].cd, log);
      membackend_poke (e.mb, be, besize, 0);
      membackend_fail_all (e.mb, MB_OP_WRITE, true);
      to_pdev (e.logs[0].pd)->sync_delay_us = 2000;
      pdev_fail_after (e.logs[0].pd, at);
      if (env_try_open (&e) == 0)
        env_close (&e);
      pdev_heal (e.logs[0].pd);
      to_pdev (e.logs[0].pd)->sync_delay_us = 0;
      membackend_fail_all (e.mb, MB_OP_WRITE, false);
      env_new_ssd (&e);
      env_open (&e);
      for (uint64_t l = 0; l < RT_BLOCKS; l++)
        if (!backend_has (&e, l, expect[l]))
          fail_msg ("log (more than half full) failed after %llu writes of "
                    "the start-up re-log, then the SSD was lost: block %llu "
                    "holds version %lld, expected %llu",
                    (unsigned long long)at, (unsigned long long)l,
                    (long long)backend_version (&e, l),
                    (unsigned long long)expect[l]);
      env_close (&e);
      tdev_free (&e.ssd);
      tdev_new (&e.ssd, test_cache_dev_size (e.nslots, BS), NULL, "ssd");
      e.pre.cache = e.ssd.pd;
    }
  free (ssd);
  free (log);
  free (be);
  env_free (&e);
}

/* ---- refusals ---- */

/* A volume on ssd/log that wrote and flushed something. */
/* ---- slot reuse ---- */

#define SR_SLOTS 16
#define SR_ROUNDS 10
#define SR_BLOCKS (SR_SLOTS * SR_ROUNDS + 8)

/* Write back every dirty block (bounded). */
static void
write_back_all (struct env *e)
{
  for (int i = 0; i < 1000; i++)
    {
      long n = flusher_batch (e->vol, &e->be, 2);
      assert_true (n >= 0);
      if (n == 0 && counts (e).dirty == 0)
        return;
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

static void
make_pair (struct env *e, uint64_t v)
{
  env_open (e);
  for (uint64_t l = 0; l < 4; l++)
    env_write (e, l, v + l, false);
  env_flush (e);
  env_close (e);
}

static void
test_refusals (void **state)
{
  struct env a, b;
  struct hhc_volume *vol = NULL;
  struct tdev small;

  env_init (&a, 64, 64, 1, LOG_REGION_OFF + 512 * KiB);
  env_init (&b, 64, 64, 1, LOG_REGION_OFF + 512 * KiB);
  /* Same backend, as far as the identity tells. */
  b.info.identity = a.info.identity;
  make_pair (&a, 100);
  make_pair (&b, 200);

  /* Cache a with b's log (paired with cache b): refused. */
  a.pre.logs[0] = b.logs[0].pd;
  assert_int_equal (env_try_open (&a), EINVAL);
  /* Mirrors of two different logs: refused. */
  a.conf.nlogs = 2;
  a.conf.log_paths[1] = log_names[1];
  a.pre.logs[0] = a.logs[0].pd;
  a.pre.logs[1] = b.logs[0].pd;
  assert_int_equal (env_try_open (&a), EINVAL);
  a.conf.nlogs = 1;
  a.pre.logs[1] = NULL;
  /* Neither refusal changed anything: both pairs still open. */
  env_open (&a);
  assert_true (reads_v (&a, 1, 101));
  env_close (&a);
  env_open (&b);
  assert_true (reads_v (&b, 1, 201));
  env_close (&b);

  /* A log of another backend (identity, size, block size), with a
   * blank cache: refused, and the cache is not formatted.
   */
  env_new_ssd (&a);
  a.info.identity = "membackend:someone-else";
  assert_int_equal (env_try_open (&a), EINVAL);
  a.info.identity = b.info.identity;
  a.info.size -= BS;
  assert_int_equal (env_try_open (&a), EINVAL);
  a.info.size += BS;
  a.conf.block_size = 8192;
  assert_int_equal (env_try_open (&a), EINVAL);
  a.conf.block_size = 0;
  {
    unsigned char sb[8];
    assert_int_equal (dev_pread (a.ssd.cd, sb, sizeof sb, 0), 0);
    assert_memory_equal (sb, "\0\0\0\0\0\0\0\0", 8);
  }

  /* A log device too small for segment-size=64K. */
  tdev_new (&small, LOG_REGION_OFF + 128 * KiB, NULL, "small");
  a.pre.logs[0] = small.pd;
  assert_int_equal (env_try_open (&a), EINVAL);
  tdev_free (&small);
  a.pre.logs[0] = a.logs[0].pd;

  /* A valid log too small for a bigger segment-size: refused before
   * anything is written.  So every superblock names a segment size that
   * fits its region, and hhcctl recover, which takes the recorded one,
   * opens every log a gateway wrote (fuzz-log's regress-reopen-952389c6
   * had a superblock that does not fit, made by the fuzzer).
   */
  {
    unsigned char saved[8192], now[8192];
    assert_int_equal (dev_pread (a.logs[0].cd, saved, sizeof saved, 0), 0);
    a.conf.segment_size = 1024 * KiB;
    assert_int_equal (env_try_open (&a), EINVAL);
    a.conf.segment_size = SEG;
    assert_int_equal (dev_pread (a.logs[0].cd, now, sizeof now, 0), 0);
    assert_memory_equal (saved, now, sizeof saved);
  }

  /* A superblock (crc right) whose region wraps LOG_REGION_OFF +
   * region_size to 0: refused as corrupt, before the ring of 2^32
   * slots that it asked for is allocated (found by fuzz-log in CI).
   */
  {
    unsigned char saved[8192], sb[4096];
    assert_int_equal (dev_pread (a.logs[0].cd, saved, sizeof saved, 0), 0);
    for (unsigned copy = 0; copy < 2; copy++)
      {
        memcpy (sb, saved + copy * 4096, sizeof sb);
        put64 (sb + 56, -(uint64_t)LOG_REGION_OFF);
        put32 (sb + 4092, crc32c (0, sb, 4092));
        assert_int_equal (dev_pwrite (a.logs[0].cd, sb, sizeof sb, copy * 4096),
                          0);
      }
    assert_int_equal (env_try_open (&a), EINVAL);
    assert_int_equal (dev_pwrite (a.logs[0].cd, saved, sizeof saved, 0), 0);
  }

  /* A head hint (crc right) that is not 4 KiB aligned: no gateway
   * writes one (segments start aligned), and a run from it would write
   * unaligned segments.  Refused as corrupt (seen in a fuzz-log input).
   */
  {
    unsigned char saved[8192], sb[4096];
    assert_int_equal (dev_pread (a.logs[0].cd, saved, sizeof saved, 0), 0);
    for (unsigned copy = 0; copy < 2; copy++)
      {
        memcpy (sb, saved + copy * 4096, sizeof sb);
        put64 (sb + 72, get64 (sb + 72) + 0x32);
        put32 (sb + 4092, crc32c (0, sb, 4092));
        assert_int_equal (dev_pwrite (a.logs[0].cd, sb, sizeof sb, copy * 4096),
                          0);
      }
    assert_int_equal (env_try_open (&a), EINVAL);
    assert_int_equal (dev_pwrite (a.logs[0].cd, saved, sizeof saved, 0), 0);
  }

  /* Mode hhc without a log, and a log in another mode. */
  a.conf.nlogs = 0;
  assert_int_equal (hhc_open (&a.conf, &a.pre, &pbe_ops, &a.info, &vol),
                    EINVAL);
  a.conf.nlogs = 1;
  a.conf.mode = HHC_MODE_WB;
  assert_int_equal (hhc_open (&a.conf, &a.pre, &pbe_ops, &a.info, &vol),
                    EINVAL);
  a.conf.mode = HHC_MODE_HHC;
  assert_null (vol);

  /* The right log with the blank cache: replayed, accepted. */
  env_open (&a);
  assert_true (reads_v (&a, 2, 102));
  env_close (&a);
  env_free (&a);
  env_free (&b);
}

/* ---- a lost log ---- */

static void
test_lost_log (void **state)
{
  struct env e;

  env_init (&e, 64, 128, 1, LOG_REGION_OFF + 512 * KiB);
  env_open (&e);
  membackend_fail_all (e.mb, MB_OP_WRITE, true);
  for (uint64_t l = 0; l < 12; l++)
    env_write (&e, l, 40 + l, false);
  env_flush (&e);
  env_close (&e);
  /* The log device is replaced by a blank one: the cache starts, and
   * its dirty blocks go to the new log before any request.
   */
  tdev_free (&e.logs[0]);
  tdev_new (&e.logs[0], LOG_REGION_OFF + 512 * KiB, NULL, "log0");
  e.pre.logs[0] = e.logs[0].pd;
  env_open (&e);
  assert_int_equal (counts (&e).dirty, 12);
  assert_true (counts (&e).log_relogged >= 12);
  assert_true (reads_v (&e, 3, 43));
  env_close (&e);
  /* Then the SSD is lost too: the new log has everything. */
  membackend_fail_all (e.mb, MB_OP_WRITE, false);
  env_new_ssd (&e);
  env_open (&e);
  for (uint64_t l = 0; l < 64; l++)
    assert_true (backend_has (&e, l, l < 12 ? 40 + l : 0));
  env_close (&e);
  env_free (&e);
}

/* ---- a full log ---- */

#define FL_BLOCKS 1500

struct fl_arg {
  struct env *e;
  int err;
};

static void *
fl_thread (void *p)
{
  struct fl_arg *a = p;
  unsigned char blk[BS];

  for (uint64_t l = 0; l < FL_BLOCKS && a->err == 0; l++)
    {
      pattern_fill (blk, l * 2, 0, SECTORS, 7000 + l);
      a->err = hhc_write (a->e->vol, &a->e->be, blk, BS, l * 2 * BS, false);
    }
  if (a->err == 0)
    a->err = hhc_flush (a->e->vol, &a->e->be);
  return NULL;
}

/* A ring of a few segment slots (a big log's ring is coarser than its
 * region: log.c ring_slots): with every slot in use the log counts as
 * full, and small barrier segments (a FLUSH after each write) must
 * keep going, through write-back freeing slots, without a hang.  Then
 * the SSD is lost: the replay holds every flushed block.
 */
#define SMALL_RING_ROUNDS 400

struct ring_arg {
  struct env *e;
  uint64_t expect[64];
  int err;
};

static void *
ring_thread (void *p)
{
  struct ring_arg *a = p;

  for (uint64_t i = 0; i < SMALL_RING_ROUNDS && a->err == 0; i++)
    {
      uint64_t l = (i * 37) % 64;
      a->err = env_try_write (a->e, l, 1000 + i);
      if (a->err == 0)
        a->err = hhc_flush (a->e->vol, &a->e->be);
      a->expect[l] = 1000 + i;
    }
  return NULL;
}

/* A ring of 12 slots in a 16 MiB region, write-back only at 90%
 * dirty: one flushed block pins the head, then writes without FLUSH
 * fill segments.  The slots run out long before the bytes do; the log
 * must still count as full (log_usage) so that write-back frees them
 * (found by review: every FLUSH waited for ever).
 */
struct pin_arg {
  struct env *e;
  int err;
};

static void *
pin_thread (void *p)
{
  struct pin_arg *a = p;

  a->err = env_try_write (a->e, 0, 7);
  if (a->err == 0)
    a->err = hhc_flush (a->e->vol, &a->e->be);
  for (uint64_t i = 0; i < 2000 && a->err == 0; i++)
    {
      if (i % 400 == 399)
        a->err = hhc_flush (a->e->vol, &a->e->be);
      if (a->err == 0)
        a->err = env_try_write (a->e, 1 + i % 63, 1000 + i);
    }
  if (a->err == 0)
    a->err = hhc_flush (a->e->vol, &a->e->be);
  return NULL;
}

static void
test_ring_pinned_head (void **state)
{
  struct env e;
  pthread_t th;
  struct pin_arg arg = { 0 };
  struct hhc_counts c;

  env_init (&e, 1024, 1024, 1, LOG_REGION_OFF + 16384 * KiB);
  e.pre.log_ring_slots = 12;
  e.conf.dirty_low = 90;
  e.conf.dirty_high = 95;
  e.conf.dirty_max = 99;
  e.conf.idle_ms = 0;
  env_open (&e);
  arg.e = &e;
  assert_int_equal (pthread_create (&th, NULL, pin_thread, &arg), 0);
  if (!test_join (th, (SANITIZED ? 300 : 60) * 1000))
    {
      c = counts (&e);
      fail_msg ("HANG: a pinned head and a ring of 12 slots (%llu segments, "
                "%llu full waits, %llu written back, log %llu of %llu "
                "bytes used)",
                (unsigned long long)c.log_segments,
                (unsigned long long)c.log_full_waits,
                (unsigned long long)c.writeback_blocks,
                (unsigned long long)c.log_used,
                (unsigned long long)c.log_region);
    }
  assert_int_equal (arg.err, 0);
  env_close (&e);
  env_free (&e);
}

static void
test_small_ring (void **state)
{
  struct env e;
  pthread_t th;
  struct ring_arg arg = { 0 };
  struct hhc_counts c;

  env_init (&e, 64, 128, 1, LOG_REGION_OFF + 1024 * KiB);
  e.pre.log_ring_slots = 12; /* the region would take 256 */
  env_open (&e);
  arg.e = &e;
  assert_int_equal (pthread_create (&th, NULL, ring_thread, &arg), 0);
  if (!test_join (th, (SANITIZED ? 300 : 60) * 1000))
    {
      c = counts (&e);
      fail_msg ("HANG: write + FLUSH rounds with a ring of 12 segments "
                "(%llu segments, %llu full waits, %llu written back)",
                (unsigned long long)c.log_segments,
                (unsigned long long)c.log_full_waits,
                (unsigned long long)c.writeback_blocks);
    }
  assert_int_equal (arg.err, 0);
  c = counts (&e);
  printf ("small ring: %llu segments, %llu full waits, %llu written back\n",
          (unsigned long long)c.log_segments,
          (unsigned long long)c.log_full_waits,
          (unsigned long long)c.writeback_blocks);
  assert_true (c.log_segments >= SMALL_RING_ROUNDS);
  env_close (&e);
  env_new_ssd (&e);
  env_open (&e);
  for (uint64_t l = 0; l < 64; l++)
    if (arg.expect[l] && !backend_has (&e, l, arg.expect[l]))
      fail_msg ("small ring, SSD lost: block %llu holds version %lld, "
                "expected %llu",
                (unsigned long long)l, (long long)backend_version (&e, l),
                (unsigned long long)arg.expect[l]);
  env_close (&e);
  env_free (&e);
}

static void
test_full_log (void **state)
{
  struct env e;
  struct power pw;
  pthread_t th;
  struct fl_arg arg;
  struct hhc_counts c;

  /* 8 MiB of cache, a 352 KiB log region. */
  env_init (&e, 2 * FL_BLOCKS + 100, 2048, 1, LOG_REGION_OFF + 352 * KiB);
  power_init (&pw, e.mb);
  e.be.pw = &pw;
  to_pdev (e.logs[0].pd)->pw = &pw;
  to_pdev (e.ssd.pd)->pw = &pw;
  power_set_devs (&pw, (struct hhc_dev *[]){ e.ssd.cd, e.logs[0].cd }, 2);
  e.conf.log_buffers = 2;
  /* Write-back starts only when the log asks for it. */
  e.conf.dirty_low = 80;
  e.conf.dirty_high = 90;
  e.conf.dirty_max = 95;
  env_open (&e);
  arg = (struct fl_arg){ &e, 0 };
  assert_int_equal (pthread_create (&th, NULL, fl_thread, &arg), 0);
  if (!test_join (th, (SANITIZED ? 300 : 60) * 1000))
    {
      c = counts (&e);
      /* Leaves the volume and its threads behind (hence the last test). */
      fail_msg ("HANG: %u writes and a FLUSH on a full log did not finish "
                "(%llu dirty, %llu full waits, log %llu of %llu bytes used)",
                FL_BLOCKS, (unsigned long long)c.dirty,
                (unsigned long long)c.log_full_waits,
                (unsigned long long)c.log_used,
                (unsigned long long)c.log_region);
    }
  assert_int_equal (arg.err, 0);
  /* What the FLUSH covered survives a power cut that loses the SSD
   * (and whatever the backend was not asked to flush).
   */
  power_arm (&pw, 0, false, 99, true);
  power_cut (&pw);
  c = counts (&e);
  printf ("full log: %llu blocks logged, %llu segments, %llu full waits, "
          "%llu relogged, %llu written back\n",
          (unsigned long long)c.log_blocks, (unsigned long long)c.log_segments,
          (unsigned long long)c.log_full_waits,
          (unsigned long long)c.log_relogged,
          (unsigned long long)c.writeback_blocks);
  assert_true (c.log_blocks > 0);
  for (uint64_t l = 0; l < FL_BLOCKS; l += 7)
    assert_true (reads_v (&e, l * 2, 7000 + l));
  env_close (&e);
  power_restore (&pw);
  env_new_ssd (&e);
  env_open (&e);
  for (uint64_t l = 0; l < FL_BLOCKS; l++)
    if (!backend_has (&e, l * 2, 7000 + l))
      fail_msg ("full log, SSD lost after the FLUSH: block %llu holds "
                "version %lld, expected %llu",
                (unsigned long long)(l * 2),
                (long long)backend_version (&e, l * 2),
                (unsigned long long)(7000 + l));
  env_close (&e);
  e.be.pw = NULL;
  to_pdev (e.logs[0].pd)->pw = NULL;
  env_free (&e);
  power_destroy (&pw);
}

/* A backend outage under a load that overwrites a small working set
 * with a FLUSH every 8 writes: nothing can be written back, so the
 * log fills with entries of which only the newest per block are live
 * (far less than the region).  Active reclaim must keep making room:
 * every FLUSH completes while the backend is down (a FLUSH waited for
 * the backend in the outage campaign: the head segment was all live,
 * so copying it "gained" nothing and reclaim gave up).
 */
#define OUT_WS 48       /* blocks in the working set: 192 KiB */
#define OUT_ROUNDS 3000 /* writes */

struct out_arg {
  struct env *e;
  uint64_t seed;
  int err;
  unsigned flushes;
  uint64_t last[OUT_WS];
};

static void *
out_thread (void *p)
{
  struct out_arg *a = p;
  unsigned char blk[BS];

  for (unsigned i = 0; i < OUT_ROUNDS && a->err == 0; i++)
    {
      /* A hot quarter takes half the writes. */
      uint64_t r = test_rand (&a->seed);
      uint64_t l = r & 1 ? (r >> 1) % (OUT_WS / 4) : (r >> 1) % OUT_WS;
      a->last[l] = 1000 + i;
      pattern_fill (blk, l, 0, SECTORS, a->last[l]);
      a->err = hhc_write (a->e->vol, &a->e->be, blk, BS, l * BS, false);
      if (a->err == 0 && i % 8 == 7)
        {
          a->err = hhc_flush (a->e->vol, &a->e->be);
          a->flushes++;
        }
    }
  if (a->err == 0)
    a->err = hhc_flush (a->e->vol, &a->e->be);
  return NULL;
}

static void
test_outage_flush (void **state)
{
  struct env e;
  pthread_t th;
  struct out_arg arg;
  struct hhc_counts c;

  /* A 640 KiB log region: 3.3 times the working set. */
  env_init (&e, OUT_WS + 16, 256, 1, LOG_REGION_OFF + 640 * KiB);
  e.conf.log_buffers = 2;
  env_open (&e);
  membackend_fail_all (e.mb, MB_OP_WRITE, true);
  arg = (struct out_arg){ .e = &e, .seed = 77 };
  assert_int_equal (pthread_create (&th, NULL, out_thread, &arg), 0);
  if (!test_join (th, (SANITIZED ? 300 : 60) * 1000))
    {
      c = counts (&e);
      /* Leaves the volume and its threads behind (hence near the end). */
      fail_msg ("HANG: a FLUSH during a backend outage did not finish "
                "after %u of them (%llu dirty, %llu full waits, %llu "
                "reclaimed, log %llu of %llu bytes used)",
                arg.flushes, (unsigned long long)c.dirty,
                (unsigned long long)c.log_full_waits,
                (unsigned long long)c.log_reclaimed,
                (unsigned long long)c.log_used,
                (unsigned long long)c.log_region);
    }
  assert_int_equal (arg.err, 0);
  c = counts (&e);
  printf (
      "outage: %u writes, %u flushes, %llu dirty, %llu segments, %llu "
      "reclaimed, %llu full waits, %llu relogged\n",
      OUT_ROUNDS, arg.flushes + 1, (unsigned long long)c.dirty,
      (unsigned long long)c.log_segments, (unsigned long long)c.log_reclaimed,
      (unsigned long long)c.log_full_waits, (unsigned long long)c.log_relogged);
  assert_int_equal (c.writeback_blocks, 0);
  /* The last FLUSH covered everything: the SSD is lost, the log is
   * replayed into the backend (back now).
   */
  membackend_fail_all (e.mb, MB_OP_WRITE, false);
  env_close (&e);
  env_new_ssd (&e);
  env_open (&e);
  for (uint64_t l = 0; l < OUT_WS; l++)
    if (arg.last[l] && !backend_has (&e, l, arg.last[l]))
      fail_msg ("outage, SSD lost after the last FLUSH: block %llu holds "
                "version %lld, expected %llu",
                (unsigned long long)l, (long long)backend_version (&e, l),
                (unsigned long long)arg.last[l]);
  env_close (&e);
  env_free (&e);
}

/* Closing with the log full: the flusher is stopped first, so the
 * close's barrier must not wait for write-back that never comes.
 */
struct cl_arg {
  struct env *e;
  int err;
};

static void *
cl_thread (void *p)
{
  struct cl_arg *a = p;
  unsigned char blk[BS];

  for (uint64_t l = 0; l < FL_BLOCKS && a->err == 0; l++)
    {
      pattern_fill (blk, l * 2, 0, SECTORS, 8000 + l);
      a->err = hhc_write (a->e->vol, &a->e->be, blk, BS, l * 2 * BS, false);
    }
  if (a->err == 0)
    {
      struct hhc_counts c;
      hhc_get_counts (a->e->vol, &c);
      printf ("close on a full log: %llu dirty, %llu full waits, log %llu "
              "of %llu bytes used\n",
              (unsigned long long)c.dirty, (unsigned long long)c.log_full_waits,
              (unsigned long long)c.log_used, (unsigned long long)c.log_region);
      a->err = hhc_close (a->e->vol);
    }
  a->e->vol = NULL;
  return NULL;
}

static void
test_close_full_log (void **state)
{
  struct env e;
  pthread_t th;
  struct cl_arg arg;

  env_init (&e, 2 * FL_BLOCKS + 100, 2048, 1, LOG_REGION_OFF + 352 * KiB);
  e.conf.log_buffers = 2;
  e.conf.dirty_low = 80;
  e.conf.dirty_high = 90;
  e.conf.dirty_max = 95;
  env_open (&e);
  arg = (struct cl_arg){ &e, 0 };
  assert_int_equal (pthread_create (&th, NULL, cl_thread, &arg), 0);
  if (!test_join (th, (SANITIZED ? 300 : 60) * 1000))
    fail_msg ("HANG: %u writes and a close on a full log did not finish",
              FL_BLOCKS);
  assert_int_equal (arg.err, 0);
  /* Reopened, the cache has it all. */
  env_open (&e);
  for (uint64_t l = 0; l < FL_BLOCKS; l += 5)
    assert_true (reads_v (&e, l * 2, 8000 + l));
  env_close (&e);
  env_free (&e);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_refusals),
    cmocka_unit_test (test_torn_tail),
    cmocka_unit_test (test_mirror_fails),
    cmocka_unit_test (test_mirrors_fail),
    cmocka_unit_test (test_wal_mirror_lost),
    cmocka_unit_test (test_mirror_heals),
    cmocka_unit_test (test_last_mirror_kept),
    cmocka_unit_test (test_retire),
    cmocka_unit_test (test_retire_checks),
    cmocka_unit_test (test_lost_log),
    cmocka_unit_test (test_group_commit),
    cmocka_unit_test (test_slot_reuse),
    cmocka_unit_test (test_rebase_cut),
    cmocka_unit_test (test_rebase_tight),
    cmocka_unit_test (test_random_crashes),
    cmocka_unit_test (test_outage_flush),     /* a hang leaves threads */
    cmocka_unit_test (test_small_ring),       /* a hang leaves threads */
    cmocka_unit_test (test_ring_pinned_head), /* a hang leaves threads */
    cmocka_unit_test (test_full_log),         /* last: a hang leaves threads */
    cmocka_unit_test (test_close_full_log),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
