/* Restarts with other devices (docs/design.md §5.7, §5.10): a seeded
 * campaign of starts, each given a set of the log's three mirrors
 * that changes from start to start, in mode hhc or wb (which retires
 * the log), ssd-sync=flush or checkpoint, with the faults between and
 * during runs that the directed tests of test-log-epoch.c each take
 * one at a time:
 *
 *   - a power cut anywhere in a start or in its run (the backend
 *     losing its unflushed writes half the time);
 *   - a mirror that fails in a run, for good (until it heals before a
 *     later start, its stale log intact) or for one write;
 *   - the SSD lost (a blank one in its place), an older image of it
 *     put back (taken from an earlier clean stop: the same cache
 *     rolled back, or one another cache has replaced), a new blank
 *     disk in place of a mirror.
 *
 * The property, after every start that succeeds: each block reads a
 * version no older than the last FLUSH, FUA write or clean stop
 * acknowledged before it, and no version that a later start dropped
 * (the oracle below).  A start that is refused must change no device.
 * And a start in mode hhc given every mirror, none failing, all of one
 * log of this cache, on the SSD of the last run (or a blank one), with
 * a mirror of the last run's mark left intact, must not be refused
 * (must_start).
 *
 * Not generated (nothing left can tell, so nothing can be checked): the
 * SSD lost or blank disks given in place of mirrors when no mirror
 * given holds every acknowledged block (the "holders" below); a stale
 * mirror given alone after the loss of the SSD; an older SSD image
 * once a mirror was blanked since it was taken, or of a cache that
 * another replaced and whose successor retired the log (design.md
 * §5.10's gaps).
 *
 * HHC_TEST_SEED (first seed; without it the regression seeds run
 * first: tests/unit/regress-seeds finds them), HHC_TEST_ROUNDS (seeds), HHC_TEST_STARTS (starts a seed,
 * default 12), HHC_TEST_VERBOSE=1 (each start's mirrors' superblocks and
 * the backend's blocks in the events, the core's messages on stderr).
 * A failing seed prints its events.
 */
#include <config.h>

#include <pthread.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <setjmp.h>

#include <cmocka.h>

#include "cache-format.h"
#include "log-helpers.h"
#include "log.h"
#include "vol.h"

#define NMIR 3
#define ALL ((1u << NMIR) - 1)
#define NB 8u /* blocks the runs write */
#define MAXAFTER 64

/* What block l may read: dur (the version of the last acknowledged
 * FLUSH or FUA write) or one of after[] (written since, or served by a
 * start since).
 */
struct cand {
  uint64_t dur;
  uint64_t after[MAXAFTER];
  unsigned n;
};

enum ssd_state {
  SSD_CURRENT, /* the SSD of the last run */
  SSD_BLANK,   /* lost: a blank one in its place */
  SSD_OLD,     /* an older image of it put back */
};

struct totals {
  uint64_t starts, refused, cut_starts, cuts, wb_starts, ssd_lost, old_ssd,
      old_taken, blanks, failed, flushes, must_start;
};

struct xr {
  struct env e;
  struct power pw;
  uint64_t seed, rng, ver;
  struct cand c[NB];
  /* The mirrors that hold every acknowledged block the backend may
   * not: the healthy mirrors of the last run that acknowledged a
   * FLUSH (a mirror that failed in it is not one); none after a start
   * in mode wb (its log is retired).
   */
  unsigned holders;
  /* The last run's mirrors (mode hhc) that did not fail in it and
   * were not blanked since: with none, a start may be refused (a redo
   * owed that no mirror left can give).
   */
  unsigned last_healthy;
  /* A start cut before it returned on a blank or older SSD: what the
   * SSD holds is not known (still blank, part formatted, replayed in
   * part): no start must succeed until one that is not cut.
   */
  bool doubt;
  unsigned dead;     /* mirrors that fail (or will: armed) until healed */
  unsigned injected; /* this run's failing mirror (0: none) */
  enum ssd_state ssd;
  unsigned char *old_ssd; /* the SSD's image after a clean stop */
  bool old_replaced;      /* of a cache another has replaced since */
  bool hhc;               /* this run's mode */
  unsigned mask;          /* this run's mirrors */
  bool verbose;
  char hist[32768];
  size_t hlen;
  struct totals *t;
};

/* The last error the core reported (for the events of a refusal). */
static pthread_mutex_t err_lock = PTHREAD_MUTEX_INITIALIZER;
static char last_err[160];

static void
sets_msg (enum hhc_msg_level level, const char *msg)
{
  test_msg (level, msg);
  if (level != HHC_MSG_ERROR)
    return;
  pthread_mutex_lock (&err_lock);
  snprintf (last_err, sizeof last_err, "%s", msg);
  pthread_mutex_unlock (&err_lock);
}

static void
note (struct xr *x, const char *fmt, ...)
{
  va_list ap;

  if (x->hlen >= sizeof x->hist - 1)
    return;
  va_start (ap, fmt);
  int n = vsnprintf (x->hist + x->hlen, sizeof x->hist - x->hlen, fmt, ap);
  va_end (ap);
  if (n > 0)
    x->hlen += (size_t)n;
  if (x->hlen > sizeof x->hist - 1)
    x->hlen = sizeof x->hist - 1;
}

#define XFAIL(x, ...)                                                          \
  do                                                                           \
    {                                                                          \
      char m_[300];                                                            \
      snprintf (m_, sizeof m_, __VA_ARGS__);                                   \
      printf ("seed %llu: events: %s\n", (unsigned long long)(x)->seed,        \
              (x)->hist);                                                      \
      fail_msg ("seed %llu: %s", (unsigned long long)(x)->seed, m_);           \
    }                                                                          \
  while (0)

static unsigned
rnd (struct xr *x, unsigned n)
{
  return (unsigned)test_rand_below (&x->rng, n);
}

static const char *
mask_str (unsigned mask)
{
  static char bufs[2][NMIR + 3];
  static unsigned k;
  char *s = bufs[k++ % 2]; /* two in one message */
  size_t n = 0;

  s[n++] = '{';
  for (unsigned i = 0; i < NMIR; i++)
    if (mask & (1u << i))
      s[n++] = (char)('a' + i);
  s[n++] = '}';
  s[n] = 0;
  return s;
}

static void
give (struct xr *x, unsigned mask)
{
  unsigned n = 0;

  for (unsigned i = 0; i < NMIR; i++)
    if (mask & (1u << i))
      {
        x->e.conf.log_paths[n] = log_names[i];
        x->e.pre.logs[n++] = x->e.logs[i].pd;
      }
  x->e.conf.nlogs = n;
}

static void
cand_add (struct cand *c, uint64_t v)
{
  if (c->n == MAXAFTER)
    {
      memmove (c->after, c->after + 1, (MAXAFTER - 1) * sizeof c->after[0]);
      c->n--;
    }
  c->after[c->n++] = v;
}

static bool
cand_has (const struct cand *c, uint64_t v)
{
  if (v == c->dur)
    return true;
  for (unsigned i = 0; i < c->n; i++)
    if (c->after[i] == v)
      return true;
  return false;
}

/* A FLUSH (or a FUA write of block l alone) was acknowledged. */
static void
acked (struct xr *x, int only)
{
  for (unsigned l = 0; l < NB; l++)
    if (only < 0 || (unsigned)only == l)
      {
        struct cand *c = &x->c[l];
        if (c->n)
          c->dur = c->after[c->n - 1];
        c->n = 0;
      }
  x->holders = x->hhc ? x->mask & ~x->injected & ~x->dead : 0;
}

/* The version of block l the volume reads (-1: not one version of l). */
static int64_t
vol_version (struct xr *x, uint64_t l)
{
  unsigned char blk[BS];

  if (hhc_read (x->e.vol, &x->e.be, blk, BS, l * BS) != 0)
    return -2;
  return block_version (blk, l);
}

static bool
crashed (struct xr *x)
{
  return power_crashed (&x->pw);
}

/* After a start: every block reads a version it may; what it reads is
 * all a later start may serve of what was written before.  Unless the
 * power was cut inside the start: then no client could have read
 * anything it serves (seed 15430: such a start redid a mirror's
 * shorter chain, a later one the longer, and the version between
 * counted as dropped).
 */
static void
check_reads (struct xr *x)
{
  bool seen = !crashed (x);

  for (unsigned l = 0; l < NB; l++)
    {
      struct cand *c = &x->c[l];
      int64_t v = vol_version (x, l);

      if (v < 0 || !cand_has (c, (uint64_t)v))
        XFAIL (x,
               "block %u reads version %lld; the last acknowledged was "
               "%llu, %u written since",
               l, (long long)v, (unsigned long long)c->dur, c->n);
      if (!seen)
        continue;
      c->n = 0;
      if ((uint64_t)v != c->dur)
        cand_add (c, (uint64_t)v);
    }
}

static void
x_write (struct xr *x, unsigned l, bool fua)
{
  unsigned char blk[BS];
  uint64_t v = ++x->ver;

  pattern_fill (blk, l, 0, SECTORS, v);
  cand_add (&x->c[l], v);
  int r = hhc_write (x->e.vol, &x->e.be, blk, BS, (uint64_t)l * BS, fua);
  note (x, " w%u=%llu%s%s", l, (unsigned long long)v, fua ? "F" : "",
        r ? "!" : "");
  if (r == 0 && fua && !crashed (x))
    acked (x, (int)l);
}

static void
x_flush (struct xr *x)
{
  int r = hhc_flush (x->e.vol, &x->e.be);

  note (x, " f%s", r ? "!" : "");
  if (r == 0 && !crashed (x))
    {
      acked (x, -1);
      x->t->flushes++;
    }
}

/* A mirror of the run starts failing: for good, or its next write. */
static void
inject (struct xr *x)
{
  unsigned i, n = 0, pick[NMIR];

  for (i = 0; i < NMIR; i++)
    if ((x->mask & (1u << i)) && !(x->dead & (1u << i)))
      pick[n++] = i;
  if (n == 0 || x->injected)
    return;
  i = pick[rnd (x, n)];
  x->injected = 1u << i;
  x->t->failed++;
  if (rnd (x, 2))
    {
      pdev_fail_after (x->e.logs[i].pd, rnd (x, 6));
      x->dead |= 1u << i;
      note (x, " dead%c", 'a' + i);
    }
  else
    {
      pdev_fail_once (x->e.logs[i].pd, rnd (x, 6));
      note (x, " once%c", 'a' + i);
    }
}

static void
workload (struct xr *x)
{
  unsigned nops = 1 + rnd (x, 14);

  for (unsigned k = 0; k < nops && !crashed (x); k++)
    {
      unsigned op = rnd (x, 16);
      if (op < 9)
        x_write (x, rnd (x, NB), op == 0);
      else if (op < 14)
        x_flush (x);
      else if (op == 14)
        inject (x);
      else
        {
          int r = hhc_drain (x->e.vol, &x->e.be);
          note (x, " drain%s", r ? "!" : "");
        }
    }
}

/* HHC_TEST_VERBOSE: the mirrors' superblocks and the backend's blocks,
 * into the events.
 */
static void
note_devices (struct xr *x)
{
  if (!x->verbose)
    return;
  note (x, "\n    [");
  for (unsigned i = 0; i < NMIR; i++)
    {
      struct log_sb sb;
      struct log_sb_read rd;
      int r = log_dev_sb (x->e.logs[i].cd, &sb, &rd);
      note (x, "%c:", 'a' + i);
      if (r == 0 || r == ESTALE)
        note (x, "%s%llu.%llu/%02x%02x ", r ? "void" : "",
              (unsigned long long)(sb.generation >> LOG_EPOCH_SHIFT),
              (unsigned long long)(sb.generation & 0xffffffffu), sb.log_uuid[0],
              sb.cache_uuid[0]);
      else
        note (x, "- ");
    }
  note (x, "backend:");
  for (unsigned l = 0; l < NB; l++)
    note (x, " %lld", (long long)backend_version (&x->e, l));
  note (x, "]");
}

/* The faults between two starts. */
static void
between (struct xr *x)
{
  for (unsigned i = 0; i < NMIR; i++)
    if ((x->dead & (1u << i)) && rnd (x, 2))
      {
        pdev_heal (x->e.logs[i].pd);
        x->dead &= ~(1u << i);
        note (x, " heal%c", 'a' + i);
      }
  switch (rnd (x, 12))
    {
    case 0:
      if (x->holders && x->ssd == SSD_CURRENT)
        {
          dev_blank (x->e.ssd.cd);
          x->ssd = SSD_BLANK;
          x->t->ssd_lost++;
          note (x, " SSD-LOST");
          x->old_replaced = x->old_ssd != NULL;
        }
      break;
    case 1:
      {
        unsigned i = rnd (x, NMIR);
        if (!(x->holders & (1u << i)) || __builtin_popcount (x->holders) >= 2)
          {
            dev_blank (x->e.logs[i].cd);
            x->holders &= ~(1u << i);
            x->last_healthy &= ~(1u << i);
            /* It may have held the only trace of a run later than the
             * image (nothing could tell the image is older then).
             */
            free (x->old_ssd);
            x->old_ssd = NULL;
            x->t->blanks++;
            note (x, " blank%c", 'a' + i);
          }
        break;
      }
    case 2:
      if (x->old_ssd && x->ssd == SSD_CURRENT)
        x->ssd = SSD_OLD; /* put back at the start (start_old) */
      break;
    default:
      break;
    }
}

/* The start's mode and mirrors. */
static void
choose (struct xr *x)
{
  x->hhc = x->ssd == SSD_BLANK || x->doubt || rnd (x, 7) != 0;
  x->mask = rnd (x, 2) ? ALL : rnd (x, ALL + 1);
  if (x->hhc && x->mask == 0)
    x->mask = 1u << rnd (x, NMIR);
  if (x->ssd == SSD_OLD)
    /* The operator puts the wrong SSD into the same configuration. */
    x->mask = ALL;
  if (x->ssd == SSD_BLANK || x->doubt)
    /* One mirror that holds the data, at least. */
    {
      unsigned h[NMIR], n = 0;
      for (unsigned i = 0; i < NMIR; i++)
        if (x->holders & (1u << i))
          h[n++] = i;
      if (n)
        x->mask |= 1u << h[rnd (x, n)];
    }
  x->e.conf.mode = x->hhc ? HHC_MODE_HHC : HHC_MODE_WB;
  give (x, x->mask);
}

/* Images of the SSD and the mirrors given, to check that a refusal
 * changes none of them.
 */
struct images {
  unsigned char *ssd, *log[NMIR];
};

static void
images_take (struct xr *x, struct images *im)
{
  memset (im, 0, sizeof *im);
  im->ssd = dev_save (x->e.ssd.cd);
  for (unsigned i = 0; i < NMIR; i++)
    if (x->mask & (1u << i))
      im->log[i] = dev_save (x->e.logs[i].cd);
}

static void
images_check (struct xr *x, struct images *im)
{
  struct hhc_dev *cd = x->e.ssd.cd;
  unsigned char *now = dev_save (cd);

  if (memcmp (now, im->ssd, cd->size) != 0)
    XFAIL (x, "a refused start changed the SSD");
  free (now);
  for (unsigned i = 0; i < NMIR; i++)
    if (im->log[i])
      {
        cd = x->e.logs[i].cd;
        now = dev_save (cd);
        if (memcmp (now, im->log[i], cd->size) != 0)
          {
            size_t off = 0;
            while (now[off] == im->log[i][off])
              off++;
            XFAIL (x, "a refused start changed mirror %c (at byte %zu)",
                   'a' + i, off);
          }
        free (now);
      }
}

static void
images_free (struct images *im)
{
  free (im->ssd);
  for (unsigned i = 0; i < NMIR; i++)
    free (im->log[i]);
}

/* The SSD's newer valid state page (false: none, a blank SSD). */
static bool
ssd_state (struct xr *x, struct cache_state_page *sp)
{
  unsigned char pg[CACHE_PAGE];
  struct cache_state_page c;
  bool found = false;

  for (unsigned copy = 0; copy < 2; copy++)
    {
      uint8_t uuid[16] = { 0 };
      if (dev_pread (x->e.ssd.cd, pg, CACHE_PAGE,
                     CACHE_STATE_OFF + copy * CACHE_PAGE)
          != 0)
        continue;
      memcpy (uuid, pg + 16, 8); /* the decode checks these 8 bytes */
      if (cache_state_decode (pg, uuid, &c) && (!found || c.seq > sp->seq))
        {
          *sp = c;
          found = true;
        }
    }
  return found;
}

/* Do the mirrors of mask hold one log of this cache (their valid
 * superblocks one log's, which names no cache, this one, or is the
 * log it last ran with; void and blank ones aside)?  Mirrors of two
 * logs are refused (a new log formatted on a blank one given alone,
 * say), and so is another cache's log (one of the SSD lost), and a
 * mirror of the log this cache took over that still names the cache
 * it replaced with a run later than the last this cache recorded (left
 * out of the takeover, and numbered above this cache's: seed 27308,
 * refused as it must be, epochs cannot tell it from a later run).
 */
static bool
one_log (struct xr *x, unsigned mask)
{
  static const uint8_t zero[16];
  struct cache_state_page sp;
  bool cache = ssd_state (x, &sp);
  uint8_t uuid[16];
  bool have = false;

  for (unsigned i = 0; i < NMIR; i++)
    {
      struct log_sb sb;
      struct log_sb_read rd;
      if (!(mask & (1u << i)) || log_dev_sb (x->e.logs[i].cd, &sb, &rd) != 0)
        continue;
      if (have && memcmp (uuid, sb.log_uuid, 16) != 0)
        return false;
      if (cache && memcmp (sb.cache_uuid, zero, 16) != 0
          && memcmp (sb.cache_uuid, sp.uuid8, 8) != 0
          && (memcmp (sb.log_uuid, sp.linked_log, 16) != 0
              || sb.generation >> LOG_EPOCH_SHIFT > sp.log_gen
                     >> LOG_EPOCH_SHIFT))
        return false;
      memcpy (uuid, sb.log_uuid, 16);
      have = true;
    }
  return true;
}

/* Must this start succeed? */
static bool
must_start (struct xr *x)
{
  return x->hhc && x->mask == ALL && x->dead == 0 && x->ssd != SSD_OLD
         && !x->doubt && x->last_healthy && one_log (x, x->mask);
}

/* The end of a run: a clean stop, or a cut (armed, or now). */
static void
stop (struct xr *x, bool armed)
{
  if (armed && !crashed (x) && rnd (x, 2))
    power_cut (&x->pw);
  if (crashed (x))
    {
      hhc_close (x->e.vol);
      x->e.vol = NULL;
      power_restore (&x->pw);
      x->t->cuts++;
      note (x, " CUT");
    }
  else
    {
      power_arm (&x->pw, 0, false, 0, false);
      int r = hhc_close (x->e.vol);
      x->e.vol = NULL;
      note (x, " stop%s", r ? "!" : "");
      if (r == 0)
        acked (x, -1); /* a clean stop keeps every write */
      /* Of a run in mode hhc: the cache then records its log's epoch
       * (one of a cache that never ran in mode hhc can be told from
       * nothing left).
       */
      if (r == 0 && x->hhc && x->dead == 0 && rnd (x, 4) == 0)
        {
          free (x->old_ssd);
          x->old_ssd = dev_save (x->e.ssd.cd);
          x->old_replaced = false;
          note (x, " (saved)");
        }
    }
  x->last_healthy &= ~x->injected;
  /* A fault for one write that did not happen is not carried over. */
  for (unsigned i = 0; i < NMIR; i++)
    if ((x->injected & (1u << i)) && !(x->dead & (1u << i)))
      pdev_heal (x->e.logs[i].pd);
  x->injected = 0;
}

static void
one_start (struct xr *x)
{
  unsigned char *cur = NULL;
  struct images im;
  bool armed = rnd (x, 3) == 0;
  bool check_images;

  between (x);
  note_devices (x);
  choose (x);
  if (x->ssd == SSD_OLD)
    {
      cur = dev_save (x->e.ssd.cd);
      dev_load (x->e.ssd.cd, x->old_ssd);
      x->t->old_ssd++;
    }
  note (x, "\n  start %s %s%s%s%s:", x->hhc ? "hhc" : "wb", mask_str (x->mask),
        x->ssd == SSD_OLD     ? " old-ssd"
        : x->ssd == SSD_BLANK ? " blank-ssd"
                              : "",
        x->dead ? " dead:" : "", x->dead ? mask_str (x->dead) : "");
  check_images = !armed && x->dead == 0;
  if (check_images)
    images_take (x, &im);
  if (armed)
    {
      uint64_t at = 1 + rnd (x, 160);
      power_arm (&x->pw, at, false, (unsigned)test_rand (&x->rng), rnd (x, 2));
      note (x, " arm@%llu", (unsigned long long)at);
    }
  x->t->starts++;
  x->t->wb_starts += !x->hhc;
  bool must = must_start (x);
  last_err[0] = 0;
  int r = env_try_open (&x->e);
  if (r != 0)
    {
      pthread_mutex_lock (&err_lock);
      note (x, " refused(%d: %.90s)", r, last_err);
      pthread_mutex_unlock (&err_lock);
      x->t->refused++;
      if (crashed (x))
        {
          power_restore (&x->pw);
          x->t->cut_starts++;
        }
      else
        {
          power_arm (&x->pw, 0, false, 0, false);
          if (check_images)
            images_check (x, &im);
          if (must)
            XFAIL (x, "a start with every mirror was refused (%d)", r);
        }
      if (check_images)
        images_free (&im);
      if (cur)
        /* The operator puts the right SSD back. */
        {
          dev_load (x->e.ssd.cd, cur);
          x->ssd = SSD_CURRENT;
        }
      free (cur);
      return;
    }
  if (check_images)
    images_free (&im);
  free (cur);
  x->t->must_start += must;
  if (x->ssd == SSD_OLD)
    x->t->old_taken++;
  note (x, " ok");
  check_reads (x);
  /* A start that returned marked its mirrors (mode hhc): a redo is of
   * them from now on.  One cut before it returned may or may not have.
   */
  unsigned marked = x->hhc ? x->mask & ~x->dead : ALL;
  if (!crashed (x))
    {
      x->last_healthy = marked;
      x->ssd = SSD_CURRENT;
      x->doubt = false;
    }
  else
    {
      x->last_healthy &= marked;
      x->doubt |= x->ssd != SSD_CURRENT;
      if (x->ssd == SSD_OLD)
        x->ssd = SSD_CURRENT; /* not put back again */
    }
  /* A retirement wrote every dirty block back: no mirror holds one.
   * An older SSD image of this cache stays (the retirement's voids
   * carry an epoch above any it knows of); one of a cache this one
   * replaced does not: its successor's voids name the successor, and
   * the log may be one the image never knew (seed 26547; design.md
   * §5.10's gaps).
   */
  if (!x->hhc)
    {
      x->holders = 0;
      if (x->old_replaced)
        {
          free (x->old_ssd);
          x->old_ssd = NULL;
        }
    }
  workload (x);
  stop (x, armed);
}

static void
one_seed (uint64_t seed, unsigned nstarts, bool verbose, struct totals *t)
{
  struct xr *x = calloc (1, sizeof *x);

  assert_non_null (x);
  x->seed = seed;
  x->verbose = verbose;
  x->rng = seed * 0x9E3779B97F4A7C15ull + 1;
  x->t = t;
  pw_env_init (&x->e, &x->pw, NMIR);
  x->e.conf.msgfn = sets_msg;
  x->e.conf.wal = rnd (x, 2);
  x->last_healthy = ALL; /* no run yet */
  note (x, "%s", x->e.conf.wal ? "ssd-sync=checkpoint" : "ssd-sync=flush");
  for (unsigned s = 0; s < nstarts; s++)
    one_start (x);
  if (verbose)
    printf ("seed %llu: %s\n", (unsigned long long)seed, x->hist);
  for (unsigned i = 0; i < NMIR; i++)
    pdev_heal (x->e.logs[i].pd);
  pw_env_free (&x->e, &x->pw);
  free (x->old_ssd);
  free (x);
}

static void
test_mirror_sets (void **state)
{
  uint64_t first = test_env_u64 ("HHC_TEST_SEED", 1);
  uint64_t n = test_env_u64 ("HHC_TEST_ROUNDS", SANITIZED ? 40 : 200);
  unsigned nstarts = (unsigned)test_env_u64 ("HHC_TEST_STARTS", 12);
  bool verbose = test_env_u64 ("HHC_TEST_VERBOSE", 0);
  struct totals t = { 0 };

  /* A watchdog: a hang ends the test (SIGALRM). */
  alarm ((unsigned)test_env_u64 ("HHC_TEST_TIMEOUT", 600));
  printf ("mirror sets: seeds %llu..%llu (one: HHC_TEST_SEED=n "
          "HHC_TEST_ROUNDS=1 HHC_TEST_VERBOSE=1)\n",
          (unsigned long long)first, (unsigned long long)(first + n - 1));
  fflush (stdout);
  /* Seeds that caught a fix taken out (tests/unit/regress-seeds, at
   * 2026-12-07's last draws: empty_log, retired_here, log_hold_sb with
   * the scan's own heads, the retirement's epoch in the survey, its
   * voids written again, a loaded cache's new log at its known epoch,
   * a void joiner's history cut); a change to what the campaign draws
   * moves them.
   */
  static const uint64_t regress[] = { 401, 919, 2562, 261, 7747, 5617, 29039 };
  for (size_t k = 0;
       !getenv ("HHC_TEST_SEED") && k < sizeof regress / sizeof *regress; k++)
    one_seed (regress[k], nstarts, verbose, &t);
  for (uint64_t s = first; s < first + n; s++)
    one_seed (s, nstarts, verbose, &t);
  alarm (0);
  printf ("%llu starts (%llu in mode wb, %llu that had to succeed), %llu "
          "refused (%llu cut); %llu runs cut; %llu completed FLUSHes; %llu "
          "mirrors failed in a run; %llu SSDs lost; %llu older SSD images "
          "put back (%llu taken); %llu blank disks in place of a mirror\n",
          (unsigned long long)t.starts, (unsigned long long)t.wb_starts,
          (unsigned long long)t.must_start, (unsigned long long)t.refused,
          (unsigned long long)t.cut_starts, (unsigned long long)t.cuts,
          (unsigned long long)t.flushes, (unsigned long long)t.failed,
          (unsigned long long)t.ssd_lost, (unsigned long long)t.old_ssd,
          (unsigned long long)t.old_taken, (unsigned long long)t.blanks);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_mirror_sets),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
