/* Test support: see membackend.h.
 *
 * membackend locking: one mutex per backend protects the bytes, the
 * counters, the fault settings, the hooks and the write log; the
 * condition variable is broadcast whenever a counter changes.  Hooks
 * and the write delay run without the mutex.
 *
 * hookdev locking: its mutex protects the hook pointers and counters;
 * hooks run without it.
 *
 * metacheck locking: its mutex protects the durable shadow and the
 * list of unsynced writes; checks run under it.
 */
#include <config.h>

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <setjmp.h>
#include <stdarg.h>

#include <cmocka.h>

#include "cache.h"
#include "crc32c.h"
#include "common.h"
#include "devcrash.h"
#include "membackend.h"

/* ------------------------------------------------------------------ */
/* membackend                                                          */
/* ------------------------------------------------------------------ */

struct fault {
  unsigned next; /* fail this many more calls */
  bool all;      /* fail every call */
};

struct hook {
  membackend_hook fn;
  void *opaque;
};

struct membackend {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  uint64_t size;
  unsigned char *data;    /* what reads return */
  unsigned char *durable; /* as of the last flush */
  uint64_t *unflushed;    /* bitmap of 4 KiB units written since */
  uint64_t counts[MB_NCOUNTERS];
  struct fault faults[3]; /* indexed by enum mb_op */
  struct hook hooks[3];
  membackend_done_hook flush_done; /* see membackend_set_flush_done_hook */
  void *flush_done_opaque;
  unsigned write_delay_us;
  bool drop_on_flush_error; /* a failed flush forgets unflushed bytes */
  struct mb_extent *log;
  size_t nlog, caplog;
};

#define MB_UNIT 4096u

/* Mark [offset, offset+count) as written since the last flush. */
static void
mark_unflushed (struct membackend *mb, uint64_t offset, uint64_t count)
{
  for (uint64_t u = offset / MB_UNIT; count && u * MB_UNIT < offset + count;
       u++)
    mb->unflushed[u / 64] |= UINT64_C (1) << (u % 64);
}

struct membackend *
membackend_new (uint64_t size)
{
  struct membackend *mb = calloc (1, sizeof *mb);

  if (mb == NULL)
    return NULL;
  mb->size = size;
  mb->data = calloc (1, size ? size : 1);
  mb->durable = calloc (1, size ? size : 1);
  mb->unflushed = calloc ((size / MB_UNIT + 64) / 64, sizeof (uint64_t));
  if (!mb->data || !mb->durable || !mb->unflushed)
    {
      free (mb->data);
      free (mb->durable);
      free (mb->unflushed);
      free (mb);
      return NULL;
    }
  pthread_mutex_init (&mb->lock, NULL);
  pthread_cond_init (&mb->cond, NULL);
  return mb;
}

void
membackend_free (struct membackend *mb)
{
  if (mb == NULL)
    return;
  pthread_mutex_destroy (&mb->lock);
  pthread_cond_destroy (&mb->cond);
  free (mb->data);
  free (mb->durable);
  free (mb->unflushed);
  free (mb->log);
  free (mb);
}

struct hhc_backend_info
membackend_info (struct membackend *mb, uint32_t preferred_block,
                 const char *identity)
{
  struct hhc_backend_info info = {
    .size = mb->size,
    .preferred_block = preferred_block,
    .max_request = 0,
    .identity = identity,
    .can_trim = true,
    .can_zero = true,
    .can_fua = true,
    .multi_conn = true,
  };
  return info;
}

uint64_t
membackend_size (struct membackend *mb)
{
  return mb->size;
}

void
membackend_peek (struct membackend *mb, bool durable, void *buf, uint64_t count,
                 uint64_t offset)
{
  pthread_mutex_lock (&mb->lock);
  memcpy (buf, (durable ? mb->durable : mb->data) + offset, count);
  pthread_mutex_unlock (&mb->lock);
}

void
membackend_poke (struct membackend *mb, const void *buf, uint64_t count,
                 uint64_t offset)
{
  pthread_mutex_lock (&mb->lock);
  memcpy (mb->data + offset, buf, count);
  memcpy (mb->durable + offset, buf, count);
  pthread_mutex_unlock (&mb->lock);
}

int
membackend_cmp (struct membackend *mb, bool durable, const void *buf,
                uint64_t count, uint64_t offset)
{
  int r;

  pthread_mutex_lock (&mb->lock);
  r = memcmp ((durable ? mb->durable : mb->data) + offset, buf, count);
  pthread_mutex_unlock (&mb->lock);
  return r;
}

uint64_t
membackend_count (struct membackend *mb, enum mb_counter c)
{
  uint64_t v;

  pthread_mutex_lock (&mb->lock);
  v = mb->counts[c];
  pthread_mutex_unlock (&mb->lock);
  return v;
}

void
membackend_reset_counts (struct membackend *mb)
{
  pthread_mutex_lock (&mb->lock);
  memset (mb->counts, 0, sizeof mb->counts);
  pthread_mutex_unlock (&mb->lock);
}

void
test_deadline (struct timespec *ts, unsigned ms)
{
  hhc_deadline (ts, ms); /* the core's helper (common.h) */
}

bool
membackend_wait_count (struct membackend *mb, enum mb_counter c,
                       uint64_t target, unsigned timeout_ms)
{
  struct timespec ts;
  bool ok = true;

  test_deadline (&ts, timeout_ms);
  pthread_mutex_lock (&mb->lock);
  while (mb->counts[c] < target)
    if (pthread_cond_timedwait (&mb->cond, &mb->lock, &ts) == ETIMEDOUT)
      {
        ok = mb->counts[c] >= target;
        break;
      }
  pthread_mutex_unlock (&mb->lock);
  return ok;
}

void
membackend_fail_next (struct membackend *mb, enum mb_op op, unsigned n)
{
  pthread_mutex_lock (&mb->lock);
  mb->faults[op].next = n;
  pthread_mutex_unlock (&mb->lock);
}

void
membackend_fail_all (struct membackend *mb, enum mb_op op, bool on)
{
  pthread_mutex_lock (&mb->lock);
  mb->faults[op].all = on;
  pthread_mutex_unlock (&mb->lock);
}

void
membackend_set_write_delay (struct membackend *mb, unsigned us)
{
  pthread_mutex_lock (&mb->lock);
  mb->write_delay_us = us;
  pthread_mutex_unlock (&mb->lock);
}

void
membackend_set_drop_on_flush_error (struct membackend *mb, bool on)
{
  pthread_mutex_lock (&mb->lock);
  mb->drop_on_flush_error = on;
  pthread_mutex_unlock (&mb->lock);
}

void
membackend_set_flush_done_hook (struct membackend *mb, membackend_done_hook fn,
                                void *opaque)
{
  pthread_mutex_lock (&mb->lock);
  mb->flush_done = fn;
  mb->flush_done_opaque = opaque;
  pthread_mutex_unlock (&mb->lock);
}

void
membackend_set_hook (struct membackend *mb, enum mb_op op, membackend_hook fn,
                     void *opaque)
{
  pthread_mutex_lock (&mb->lock);
  mb->hooks[op] = (struct hook){ fn, opaque };
  pthread_mutex_unlock (&mb->lock);
}

size_t
membackend_write_log (struct membackend *mb, struct mb_extent *out, size_t max)
{
  size_t n;

  pthread_mutex_lock (&mb->lock);
  n = mb->nlog;
  if (out)
    memcpy (out, mb->log, (n < max ? n : max) * sizeof *out);
  pthread_mutex_unlock (&mb->lock);
  return n;
}

void
membackend_clear_write_log (struct membackend *mb)
{
  pthread_mutex_lock (&mb->lock);
  mb->nlog = 0;
  pthread_mutex_unlock (&mb->lock);
}

/* Run the hook of op (no lock held). */
static void
run_hook (struct membackend *mb, enum mb_op op, uint64_t offset, uint32_t count)
{
  struct hook h;

  pthread_mutex_lock (&mb->lock);
  h = mb->hooks[op];
  pthread_mutex_unlock (&mb->lock);
  if (h.fn)
    h.fn (h.opaque, offset, count);
}

/* Should this call of op fail?  (lock held) */
static bool
inject (struct membackend *mb, enum mb_op op)
{
  static const enum mb_counter errs[]
      = { MB_READ_ERRORS, MB_WRITE_ERRORS, MB_FLUSH_ERRORS };
  struct fault *f = &mb->faults[op];

  if (!f->all && f->next == 0)
    return false;
  if (!f->all)
    f->next--;
  mb->counts[errs[op]]++;
  pthread_cond_broadcast (&mb->cond);
  return true;
}

static void
bump (struct membackend *mb, enum mb_counter c)
{
  mb->counts[c]++;
  pthread_cond_broadcast (&mb->cond);
}

static bool
in_range (struct membackend *mb, uint64_t count, uint64_t offset)
{
  return offset <= mb->size && count <= mb->size - offset;
}

static int
mb_pread (void *ctx, void *buf, uint32_t count, uint64_t offset)
{
  struct membackend *mb = ctx;
  int r = 0;

  run_hook (mb, MB_OP_READ, offset, count);
  pthread_mutex_lock (&mb->lock);
  if (!in_range (mb, count, offset))
    r = EINVAL;
  else if (inject (mb, MB_OP_READ))
    r = EIO;
  else
    {
      memcpy (buf, mb->data + offset, count);
      bump (mb, MB_READS);
    }
  pthread_mutex_unlock (&mb->lock);
  return r;
}

static void
append_log (struct membackend *mb, uint64_t offset, uint32_t count)
{
  if (mb->nlog == mb->caplog)
    {
      size_t ncap = mb->caplog ? mb->caplog * 2 : 256;
      struct mb_extent *n = realloc (mb->log, ncap * sizeof *n);
      if (n == NULL)
        return; /* the log is best effort */
      mb->log = n;
      mb->caplog = ncap;
    }
  mb->log[mb->nlog++] = (struct mb_extent){ offset, count };
}

static int
mb_pwrite (void *ctx, const void *buf, uint32_t count, uint64_t offset,
           bool fua)
{
  struct membackend *mb = ctx;
  unsigned delay;
  int r = 0;

  run_hook (mb, MB_OP_WRITE, offset, count);
  pthread_mutex_lock (&mb->lock);
  delay = mb->write_delay_us;
  pthread_mutex_unlock (&mb->lock);
  if (delay)
    {
      struct timespec ts = { delay / 1000000, (long)(delay % 1000000) * 1000 };
      nanosleep (&ts, NULL);
    }
  pthread_mutex_lock (&mb->lock);
  if (!in_range (mb, count, offset))
    r = EINVAL;
  else if (inject (mb, MB_OP_WRITE))
    r = EIO;
  else
    {
      memcpy (mb->data + offset, buf, count);
      if (fua)
        memcpy (mb->durable + offset, buf, count);
      mark_unflushed (mb, offset, count);
      append_log (mb, offset, count);
      bump (mb, MB_WRITES);
    }
  pthread_mutex_unlock (&mb->lock);
  return r;
}

/* Settle the units written since the last flush: make them durable
 * (keep), or drop them, back to their durable bytes (lock held).
 */
static void
settle_unflushed (struct membackend *mb, bool keep)
{
  for (uint64_t w = 0; w < (mb->size / MB_UNIT + 64) / 64; w++)
    while (mb->unflushed[w])
      {
        uint64_t u = w * 64 + __builtin_ctzll (mb->unflushed[w]);
        uint64_t o = u * MB_UNIT;
        uint64_t n = mb->size - o < MB_UNIT ? mb->size - o : MB_UNIT;
        if (keep)
          memcpy (mb->durable + o, mb->data + o, n);
        else
          memcpy (mb->data + o, mb->durable + o, n);
        mb->unflushed[w] &= mb->unflushed[w] - 1;
      }
}

static int
mb_flush (void *ctx)
{
  struct membackend *mb = ctx;
  membackend_done_hook done;
  void *done_opaque;
  int r = 0;

  run_hook (mb, MB_OP_FLUSH, 0, 0);
  pthread_mutex_lock (&mb->lock);
  if (inject (mb, MB_OP_FLUSH))
    {
      r = EIO;
      if (mb->drop_on_flush_error)
        settle_unflushed (mb, false);
    }
  else
    {
      settle_unflushed (mb, true);
      bump (mb, MB_FLUSHES);
    }
  done = mb->flush_done;
  done_opaque = mb->flush_done_opaque;
  pthread_mutex_unlock (&mb->lock);
  if (done)
    done (done_opaque, r);
  return r;
}

/* Trim reads back as zeros, like the memory plugin. */
static int
mb_zero_range (void *ctx, uint32_t count, uint64_t offset, enum mb_counter c)
{
  struct membackend *mb = ctx;
  int r = 0;

  pthread_mutex_lock (&mb->lock);
  if (!in_range (mb, count, offset))
    r = EINVAL;
  else if (inject (mb, MB_OP_WRITE))
    r = EIO;
  else
    {
      memset (mb->data + offset, 0, count);
      mark_unflushed (mb, offset, count);
      bump (mb, c);
    }
  pthread_mutex_unlock (&mb->lock);
  return r;
}

static int
mb_trim (void *ctx, uint32_t count, uint64_t offset)
{
  return mb_zero_range (ctx, count, offset, MB_TRIMS);
}

static int
mb_zero (void *ctx, uint32_t count, uint64_t offset)
{
  return mb_zero_range (ctx, count, offset, MB_ZEROS);
}

const struct hhc_backend_ops membackend_ops = {
  .pread = mb_pread,
  .pwrite = mb_pwrite,
  .flush = mb_flush,
  .trim = mb_trim,
  .zero = mb_zero,
};

/* ------------------------------------------------------------------ */
/* hookdev                                                             */
/* ------------------------------------------------------------------ */

struct hookdev {
  struct hhc_dev dev; /* first: the volume sees this */
  struct hhc_dev *inner;
  pthread_mutex_t lock; /* protects the fields below */
  hookdev_write_fn before;
  hookdev_done_fn after;
  hookdev_sync_fn sync;
  void *opaque;
  hookdev_presync_fn presync;
  void *presync_opaque;
  uint64_t nwrites, nsyncs;
};

static struct hookdev *
to_hook (struct hhc_dev *d)
{
  return (struct hookdev *)d;
}

static int
hd_pread (struct hhc_dev *d, void *buf, size_t len, uint64_t off)
{
  return dev_pread (to_hook (d)->inner, buf, len, off);
}

static int
hd_pwrite (struct hhc_dev *d, const void *buf, size_t len, uint64_t off)
{
  struct hookdev *h = to_hook (d);
  hookdev_write_fn before;
  hookdev_done_fn after;
  void *opaque;
  int r = 0;

  pthread_mutex_lock (&h->lock);
  before = h->before;
  after = h->after;
  opaque = h->opaque;
  pthread_mutex_unlock (&h->lock);
  if (before)
    r = before (opaque, buf, len, off);
  if (r)
    return r;
  r = dev_pwrite (h->inner, buf, len, off);
  pthread_mutex_lock (&h->lock);
  h->nwrites++;
  pthread_mutex_unlock (&h->lock);
  if (after)
    after (opaque, buf, len, off, r);
  return r;
}

static int
hd_sync (struct hhc_dev *d)
{
  struct hookdev *h = to_hook (d);
  hookdev_sync_fn sync;
  hookdev_presync_fn presync;
  void *opaque;
  int r;

  pthread_mutex_lock (&h->lock);
  presync = h->presync;
  opaque = h->presync_opaque;
  pthread_mutex_unlock (&h->lock);
  if (presync && (r = presync (opaque)) != 0)
    return r;
  r = dev_sync (h->inner);

  pthread_mutex_lock (&h->lock);
  h->nsyncs++;
  sync = h->sync;
  opaque = h->opaque;
  pthread_mutex_unlock (&h->lock);
  if (sync)
    sync (opaque, r);
  return r;
}

static void
hd_close (struct hhc_dev *d)
{
  /* The test owns it: hookdev_destroy. */
}

static const struct hhc_dev_ops hookdev_ops = {
  .pread = hd_pread,
  .pwrite = hd_pwrite,
  .sync = hd_sync,
  .close = hd_close,
};

struct hhc_dev *
hookdev_new (struct hhc_dev *inner)
{
  struct hookdev *h = calloc (1, sizeof *h);

  if (h == NULL)
    return NULL;
  h->dev.ops = &hookdev_ops;
  h->dev.size = inner->size;
  h->dev.name = strdup ("hookdev");
  h->inner = inner;
  pthread_mutex_init (&h->lock, NULL);
  return &h->dev;
}

void
hookdev_destroy (struct hhc_dev *dev)
{
  struct hookdev *h = to_hook (dev);

  if (h == NULL)
    return;
  pthread_mutex_destroy (&h->lock);
  free (h->dev.name);
  free (h);
}

struct hhc_dev *
hookdev_inner (struct hhc_dev *dev)
{
  return to_hook (dev)->inner;
}

void
hookdev_set_hooks (struct hhc_dev *dev, hookdev_write_fn before,
                   hookdev_done_fn after, hookdev_sync_fn sync, void *opaque)
{
  struct hookdev *h = to_hook (dev);

  pthread_mutex_lock (&h->lock);
  h->before = before;
  h->after = after;
  h->sync = sync;
  h->opaque = opaque;
  pthread_mutex_unlock (&h->lock);
}

void
hookdev_set_presync (struct hhc_dev *dev, hookdev_presync_fn fn, void *opaque)
{
  struct hookdev *h = to_hook (dev);

  pthread_mutex_lock (&h->lock);
  h->presync = fn;
  h->presync_opaque = opaque;
  pthread_mutex_unlock (&h->lock);
}

uint64_t
hookdev_writes (struct hhc_dev *dev)
{
  struct hookdev *h = to_hook (dev);
  uint64_t n;

  pthread_mutex_lock (&h->lock);
  n = h->nwrites;
  pthread_mutex_unlock (&h->lock);
  return n;
}

uint64_t
hookdev_syncs (struct hhc_dev *dev)
{
  struct hookdev *h = to_hook (dev);
  uint64_t n;

  pthread_mutex_lock (&h->lock);
  n = h->nsyncs;
  pthread_mutex_unlock (&h->lock);
  return n;
}

/* ------------------------------------------------------------------ */
/* metacheck                                                           */
/* ------------------------------------------------------------------ */

/* The on-disk format, as cache.c documents it (re-derived here so a
 * change of format shows up as a test failure, not a silent pass).
 */
#define MC_PAGE 4096u
#define MC_PAGE_HDR 32u
#define MC_EPP ((MC_PAGE - MC_PAGE_HDR) / 8)
#define MC_PAGE_MAGIC 0x504d4848u

struct mc_geom {
  uint32_t bs, nslots, npages;
  uint64_t meta_off, data_off;
  unsigned char uuid[8];
};

struct mc_write {
  uint64_t off;
  size_t len;
  unsigned char *data;
};

struct metacheck {
  struct hhc_dev *hd;
  pthread_mutex_t lock;   /* protects everything below */
  unsigned char *durable; /* shadow of the medium after a power cut */
  uint64_t size;
  struct mc_write *pend; /* writes since the last sync, in order */
  size_t npend, cappend;
  uint64_t violations, checked;
  uint64_t crash_in;    /* writes and syncs until the crash; 0 = never */
  bool crash_sync_only; /* count only syncs */
  unsigned keep_seed;
  void (*on_crash) (void *);
  void *on_crash_opaque;
  bool crashed;
  bool geom_valid; /* geom parsed from the current superblock */
  struct mc_geom geom;
  /* A metadata page write in flight at the power cut, to be torn
   * (new header, old entries) when the power comes back.
   */
  bool tear;
  uint64_t tear_off;
  unsigned char tear_new[MC_PAGE], tear_old[MC_PAGE];
  uint64_t tears;
};

static uint32_t
mc_get32 (const unsigned char *p)
{
  uint32_t v;
  memcpy (&v, p, 4);
  return le32toh (v);
}

static uint64_t
mc_get64 (const unsigned char *p)
{
  uint64_t v;
  memcpy (&v, p, 8);
  return le64toh (v);
}

/* Geometry from a superblock image; false if it is not one. */
static bool
mc_parse_super (const unsigned char *sb, struct mc_geom *g)
{
  if (memcmp (sb, "HHCCACHE", 8) != 0
      || crc32c (0, sb, 4092) != mc_get32 (sb + 4092))
    return false;
  g->bs = mc_get32 (sb + 12);
  g->nslots = mc_get32 (sb + 56);
  g->npages = mc_get32 (sb + 60);
  g->meta_off = mc_get64 (sb + 64);
  g->data_off = mc_get64 (sb + 72);
  memcpy (g->uuid, sb + 16, 8);
  return g->bs >= 512 && g->npages > 0;
}

/* Sequence of a valid page image of page p, 0 if invalid. */
static uint64_t
mc_page_seq (const struct mc_geom *g, uint32_t p, const unsigned char *pg)
{
  unsigned char tmp[MC_PAGE];

  if (mc_get32 (pg) != MC_PAGE_MAGIC || mc_get32 (pg + 4) != p
      || memcmp (pg + 16, g->uuid, 8) != 0)
    return 0;
  memcpy (tmp, pg, MC_PAGE);
  memset (tmp + 24, 0, 4);
  if (crc32c (0, tmp, MC_PAGE) != mc_get32 (pg + 24))
    return 0;
  return mc_get64 (pg + 8);
}

static uint64_t
mc_copy_off (const struct mc_geom *g, uint32_t p, int copy)
{
  return g->meta_off + ((uint64_t)copy * g->npages + p) * MC_PAGE;
}

/* Is the entry for slot in page image pg free or lba? */
static bool
mc_entry_ok (const unsigned char *pg, uint32_t slot, uint64_t lba,
             uint64_t *found)
{
  uint64_t e = mc_get64 (pg + MC_PAGE_HDR + 8 * (slot % MC_EPP));

  *found = e >> 2;
  return (e & 3) == 0 || (e >> 2) == lba;
}

static void
mc_report (struct metacheck *m, uint32_t slot, uint64_t lba, uint64_t other,
           const char *where)
{
  m->violations++;
  if (m->violations <= 5)
    fprintf (stderr,
             "metacheck: slot %u written with block %llu's data while "
             "its %s metadata entry says block %llu\n",
             slot, (unsigned long long)lba, where, (unsigned long long)other);
}

/* Check the write of block lba's data into slot (lock held). */
static void
mc_check_slot (struct metacheck *m, const struct mc_geom *g, uint32_t slot,
               uint64_t lba)
{
  uint32_t p = slot / MC_EPP;
  const unsigned char *cp[2];
  uint64_t seq[2], other;
  int newest;
  bool touched[2] = { false, false };

  m->checked++;
  for (int c = 0; c < 2; c++)
    {
      cp[c] = m->durable + mc_copy_off (g, p, c);
      seq[c] = mc_page_seq (g, p, cp[c]);
    }
  newest = seq[1] > seq[0] ? 1 : 0;
  if (seq[newest] && !mc_entry_ok (cp[newest], slot, lba, &other))
    mc_report (m, slot, lba, other, "durable");
  for (size_t i = 0; i < m->npend; i++)
    {
      struct mc_write *w = &m->pend[i];
      for (int c = 0; c < 2; c++)
        {
          uint64_t o = mc_copy_off (g, p, c);
          if (w->off >= o + MC_PAGE || w->off + w->len <= o)
            continue;
          touched[c] = true;
          if (w->off <= o && w->off + w->len >= o + MC_PAGE)
            {
              const unsigned char *pg = w->data + (o - w->off);
              if (mc_page_seq (g, p, pg)
                  && !mc_entry_ok (pg, slot, lba, &other))
                mc_report (m, slot, lba, other, "unsynced");
            }
        }
    }
  /* A torn write over the newest copy would bring back the other. */
  if (touched[newest] && seq[!newest]
      && !mc_entry_ok (cp[!newest], slot, lba, &other))
    mc_report (m, slot, lba, other, "older");
}

/* Pick an unsynced metadata page write to tear (lock held). */
static void
mc_choose_tear (struct metacheck *m)
{
  uint64_t s = m->keep_seed + 1, n = 0, pick;
  const struct mc_geom *g = &m->geom;

  m->tear = false;
  if (!m->geom_valid)
    return;
  for (size_t i = 0; i < m->npend; i++)
    if (m->pend[i].off >= g->meta_off && m->pend[i].off < g->data_off
        && m->pend[i].len >= MC_PAGE)
      n++;
  if (n == 0)
    return;
  pick = test_rand_below (&s, n);
  for (size_t i = 0; i < m->npend; i++)
    {
      struct mc_write *w = &m->pend[i];
      if (w->off < g->meta_off || w->off >= g->data_off || w->len < MC_PAGE)
        continue;
      if (pick-- == 0)
        {
          m->tear = true;
          m->tear_off = w->off;
          memcpy (m->tear_new, w->data, MC_PAGE);
          memcpy (m->tear_old, m->durable + w->off, MC_PAGE);
          return;
        }
    }
}

/* Count one device write or sync; cut the power if it is the one. */
static void
mc_maybe_crash (struct metacheck *m, bool is_sync)
{
  bool crash = false;
  unsigned seed = 0;
  void (*on_crash) (void *) = NULL;
  void *on_crash_opaque = NULL;

  pthread_mutex_lock (&m->lock);
  if (m->crash_in && (is_sync || !m->crash_sync_only) && --m->crash_in == 0)
    {
      mc_choose_tear (m);
      crash = true;
      seed = m->keep_seed;
      on_crash = m->on_crash;
      on_crash_opaque = m->on_crash_opaque;
      m->crashed = true; /* from now on errors are expected */
    }
  pthread_mutex_unlock (&m->lock);
  if (crash)
    {
      if (on_crash)
        on_crash (on_crash_opaque);
      crashdev_crash (hookdev_inner (m->hd), seed, NULL, NULL);
    }
}

static int
mc_presync (void *opaque)
{
  mc_maybe_crash (opaque, true);
  return 0;
}

static int
mc_before (void *opaque, const void *buf, size_t len, uint64_t off)
{
  struct metacheck *m = opaque;
  unsigned char sb[4096];
  struct mc_geom g;

  mc_maybe_crash (m, false);

  pthread_mutex_lock (&m->lock);
  if (off < sizeof sb) /* (re)format: read the superblock again */
    m->geom_valid = false;
  if (!m->geom_valid)
    {
      pthread_mutex_unlock (&m->lock);
      if (dev_pread (hookdev_inner (m->hd), sb, sizeof sb, 0) != 0
          || !mc_parse_super (sb, &g))
        return 0;
      pthread_mutex_lock (&m->lock);
      m->geom = g;
      m->geom_valid = off >= sizeof sb;
    }
  g = m->geom;
  if (off >= g.data_off)
    {
      uint32_t last_slot = UINT32_MAX;
      uint64_t last_lba = UINT64_MAX;
      /* Every whole sector of the write that carries a pattern header;
       * each (slot, LBA) pair is checked once.
       */
      for (size_t i
           = (PAT_SECTOR - (off - g.data_off) % PAT_SECTOR) % PAT_SECTOR;
           i + PAT_SECTOR <= len; i += PAT_SECTOR)
        {
          uint64_t o = off + i, lba, ver;
          uint32_t sec, slot = (uint32_t)((o - g.data_off) / g.bs);
          if (pattern_decode ((const unsigned char *)buf + i, &lba, &sec, &ver)
                  == 1
              && (slot != last_slot || lba != last_lba))
            {
              mc_check_slot (m, &g, slot, lba);
              last_slot = slot;
              last_lba = lba;
            }
        }
    }
  pthread_mutex_unlock (&m->lock);
  return 0;
}

static void
mc_after (void *opaque, const void *buf, size_t len, uint64_t off, int r)
{
  struct metacheck *m = opaque;
  struct mc_write w = { off, len, NULL };

  if (r != 0)
    return;
  w.data = malloc (len);
  if (w.data == NULL)
    abort ();
  memcpy (w.data, buf, len);
  pthread_mutex_lock (&m->lock);
  if (m->npend == m->cappend)
    {
      m->cappend = m->cappend ? 2 * m->cappend : 64;
      m->pend = realloc (m->pend, m->cappend * sizeof *m->pend);
      if (m->pend == NULL)
        abort ();
    }
  m->pend[m->npend++] = w;
  pthread_mutex_unlock (&m->lock);
}

static void
mc_drop_pending (struct metacheck *m, bool apply)
{
  for (size_t i = 0; i < m->npend; i++)
    {
      if (apply)
        memcpy (m->durable + m->pend[i].off, m->pend[i].data, m->pend[i].len);
      free (m->pend[i].data);
    }
  m->npend = 0;
}

static void
mc_sync (void *opaque, int r)
{
  struct metacheck *m = opaque;

  if (r != 0)
    return;
  pthread_mutex_lock (&m->lock);
  mc_drop_pending (m, true);
  pthread_mutex_unlock (&m->lock);
}

void
metacheck_reload (struct metacheck *m)
{
  pthread_mutex_lock (&m->lock);
  if (m->tear)
    {
      unsigned char torn[MC_PAGE];
      struct hhc_dev *in = hookdev_inner (m->hd);
      /* The new header (sequence, checksum) over the old entries: a
       * page that fails its checksum unless nothing but the sequence
       * changed.
       */
      memcpy (torn, m->tear_old, MC_PAGE);
      memcpy (torn, m->tear_new, MC_PAGE_HDR);
      if (dev_pwrite (in, torn, MC_PAGE, m->tear_off) != 0
          || dev_sync (in) != 0)
        abort ();
      m->tear = false;
      m->tears++;
      if (getenv ("HHC_TEST_VERBOSE"))
        fprintf (stderr, "metacheck: tore the page write at %llu\n",
                 (unsigned long long)m->tear_off);
    }
  mc_drop_pending (m, false);
  m->geom_valid = false;
  if (dev_pread (hookdev_inner (m->hd), m->durable, m->size, 0) != 0)
    abort ();
  pthread_mutex_unlock (&m->lock);
}

struct metacheck *
metacheck_new (struct hhc_dev *hd)
{
  struct metacheck *m = calloc (1, sizeof *m);

  if (m == NULL)
    return NULL;
  m->hd = hd;
  m->size = hd->size;
  m->durable = malloc (m->size);
  if (m->durable == NULL)
    {
      free (m);
      return NULL;
    }
  pthread_mutex_init (&m->lock, NULL);
  metacheck_reload (m);
  hookdev_set_hooks (hd, mc_before, mc_after, mc_sync, m);
  hookdev_set_presync (hd, mc_presync, m);
  return m;
}

void
metacheck_free (struct metacheck *m)
{
  if (m == NULL)
    return;
  hookdev_set_hooks (m->hd, NULL, NULL, NULL, NULL);
  hookdev_set_presync (m->hd, NULL, NULL);
  mc_drop_pending (m, false);
  free (m->pend);
  free (m->durable);
  pthread_mutex_destroy (&m->lock);
  free (m);
}

/* A counter of m, read under its lock. */
static uint64_t
metacheck_get (struct metacheck *m, const uint64_t *counter)
{
  uint64_t v;

  pthread_mutex_lock (&m->lock);
  v = *counter;
  pthread_mutex_unlock (&m->lock);
  return v;
}

uint64_t
metacheck_violations (struct metacheck *m)
{
  return metacheck_get (m, &m->violations);
}

uint64_t
metacheck_checked (struct metacheck *m)
{
  return metacheck_get (m, &m->checked);
}

uint64_t
metacheck_tears (struct metacheck *m)
{
  return metacheck_get (m, &m->tears);
}

void
metacheck_crash_at (struct metacheck *m, uint64_t n, unsigned keep_seed,
                    void (*on_crash) (void *), void *opaque)
{
  pthread_mutex_lock (&m->lock);
  m->crash_in = n;
  m->keep_seed = keep_seed;
  m->on_crash = on_crash;
  m->on_crash_opaque = opaque;
  m->crash_sync_only = false;
  m->crashed = false;
  pthread_mutex_unlock (&m->lock);
}

void
metacheck_crash_at_sync (struct metacheck *m, uint64_t n, unsigned keep_seed,
                         void (*on_crash) (void *), void *opaque)
{
  metacheck_crash_at (m, n, keep_seed, on_crash, opaque);
  pthread_mutex_lock (&m->lock);
  m->crash_sync_only = true;
  pthread_mutex_unlock (&m->lock);
}

bool
metacheck_crashed (struct metacheck *m)
{
  bool c;

  pthread_mutex_lock (&m->lock);
  c = m->crashed;
  pthread_mutex_unlock (&m->lock);
  return c;
}

/* ------------------------------------------------------------------ */
/* pattern                                                             */
/* ------------------------------------------------------------------ */

#define PAT_MAGIC 0x54544150u /* "PATT" */
#define PAT_HDR 32u

static uint64_t
pat_mix (uint64_t x)
{
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

static uint64_t
pat_seed (uint64_t lba, uint32_t sec, uint64_t version)
{
  return pat_mix (lba * 0x9E3779B97F4A7C15ull ^ pat_mix (version + sec + 1));
}

static void
pat_body (unsigned char *body, size_t n, uint64_t seed)
{
  uint64_t s = seed | 1;

  for (size_t i = 0; i < n; i += 8)
    {
      uint64_t v = test_rand (&s);
      memcpy (body + i, &v, n - i < 8 ? n - i : 8);
    }
}

static void
pat_sector (unsigned char *p, uint64_t lba, uint32_t sec, uint64_t version)
{
  uint64_t seed = pat_seed (lba, sec, version);
  uint32_t magic = htole32 (PAT_MAGIC), s = htole32 (sec);
  uint64_t l = htole64 (lba), v = htole64 (version), k = htole64 (seed);

  memcpy (p, &magic, 4);
  memcpy (p + 4, &s, 4);
  memcpy (p + 8, &l, 8);
  memcpy (p + 16, &v, 8);
  memcpy (p + 24, &k, 8);
  pat_body (p + PAT_HDR, PAT_SECTOR - PAT_HDR, seed);
}

void
pattern_fill (void *buf, uint64_t lba, uint32_t first_sector, uint32_t nsectors,
              uint64_t version)
{
  unsigned char *p = buf;

  for (uint32_t i = 0; i < nsectors; i++)
    pat_sector (p + (size_t)i * PAT_SECTOR, lba, first_sector + i, version);
}

int
pattern_decode (const void *sector, uint64_t *lba, uint32_t *sector_idx,
                uint64_t *version)
{
  const unsigned char *p = sector;
  unsigned char want[PAT_SECTOR];
  uint64_t l, v;
  uint32_t s;
  bool zero = true;

  for (size_t i = 0; i < PAT_SECTOR && zero; i++)
    zero = p[i] == 0;
  if (zero)
    return 0;
  if (mc_get32 (p) != PAT_MAGIC)
    return -1;
  s = mc_get32 (p + 4);
  l = mc_get64 (p + 8);
  v = mc_get64 (p + 16);
  pat_sector (want, l, s, v);
  if (memcmp (want, p, PAT_SECTOR) != 0)
    return -1;
  *lba = l;
  *sector_idx = s;
  *version = v;
  return 1;
}

/* ------------------------------------------------------------------ */
/* misc                                                                */
/* ------------------------------------------------------------------ */

static uint64_t log_errors;

void
test_msg (enum hhc_msg_level level, const char *msg)
{
  static int verbose = -1;

  if (level == HHC_MSG_ERROR)
    __atomic_fetch_add (&log_errors, 1, __ATOMIC_RELAXED);
  if (__atomic_load_n (&verbose, __ATOMIC_RELAXED) < 0)
    __atomic_store_n (&verbose, getenv ("HHC_TEST_VERBOSE") != NULL,
                      __ATOMIC_RELAXED);
  if (__atomic_load_n (&verbose, __ATOMIC_RELAXED))
    fprintf (stderr, "hhc[%s]: %s\n",
             level == HHC_MSG_ERROR  ? "error"
             : level == HHC_MSG_INFO ? "info"
                                     : "debug",
             msg);
}

uint64_t
test_log_errors (void)
{
  return __atomic_load_n (&log_errors, __ATOMIC_RELAXED);
}

/* Ask the core's own geometry (so a layout change cannot skew the
 * tests): the smallest size, in steps of 512 bytes, that gives nslots.
 */
uint64_t
test_cache_dev_size (uint32_t nslots, uint32_t bs)
{
  uint64_t size = (uint64_t)nslots * bs;

  for (;;)
    {
      uint32_t n = 0, np;
      uint64_t mo, dof;
      if (cache_geometry (size, bs, UINT64_C (1) << 50, &n, &np, &mo, &dof) == 0
          && n >= nslots)
        return size;
      size += 512;
    }
}

bool
test_join (pthread_t t, unsigned ms)
{
  struct timespec ts;

  test_deadline (&ts, ms);
  return pthread_timedjoin_np (t, NULL, &ts) == 0;
}

void
test_filter_from_env (void)
{
  const char *f = getenv ("HHC_TEST_FILTER");

  if (f && *f)
    cmocka_set_test_filter (f);
}

uint64_t
test_env_u64 (const char *name, uint64_t def)
{
  const char *v = getenv (name);

  return v && *v ? strtoull (v, NULL, 0) : def;
}
