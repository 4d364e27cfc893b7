/* Crash device, for the unit tests (linked into them, not into the
 * core): simulates power loss.
 *
 * State (all under lock):
 *   durable  what the medium holds after a power cut
 *   current  what reads return: durable + every pending write
 *   pending  writes since the last sync, in order
 *   dead     after crashdev_crash: writes and syncs fail with EIO
 *
 * sync moves every pending write into durable.  A FUA write goes to
 * durable at once (and into the pending writes it overlaps, which it
 * followed: keeping them at a crash must not undo it; its place among
 * them is kept, fuas).  crash applies a chosen subset of pending writes
 * to durable (in order; with the seeded coin, a dropped write of
 * several 4 KiB pieces lands in part half the time: each piece kept or
 * not, as a disk's cache destages in any order), and a write in flight
 * (crashdev_set_in_flight) lands in part or not at all; on a tearing
 * device one lost write is torn; it records the newest writes it
 * dropped, copies durable to current and marks the device dead.  An unreadable range (a torn
 * write on an HDD) fails the reads that touch it until writes cover it
 * (a write in its middle keeps only the larger rest); a write heals
 * what reads see at once, the medium only once it is durable (a cut
 * that drops it leaves the bytes unreadable again).
 */
#include <config.h>

#include <stdio.h>

#include "common.h"
#include "devcrash.h"

struct pending {
  uint64_t off;
  size_t len;
  unsigned char *data;
};

HHC_VECTOR (pending_vec, struct pending)

/* A FUA write made while writes were pending: after which of them it
 * came (a crash heals what it covers there, in order).
 */
struct fua_mark {
  size_t after;
  uint64_t off;
  size_t len;
};

HHC_VECTOR (mark_vec, struct fua_mark)

struct crash_dev {
  struct hhc_dev dev;
  pthread_mutex_t lock; /* protects everything below */
  unsigned char *durable;
  unsigned char *current;
  struct pending_vec pending;
  struct mark_vec fuas; /* FUA writes among the pending ones */
  bool dead;
  bool tearing;              /* crashdev_set_tearing */
  struct pending fly;        /* crashdev_set_in_flight (len 0: none) */
  struct crashdev_lost lost; /* what the last crash dropped */
  struct crashdev_bad bad;   /* unreadable bytes, as reads see them */
  struct crashdev_bad dbad;  /* and on the medium (durable writes heal) */
};

static struct crash_dev *
to_crash (struct hhc_dev *d)
{
  return (struct crash_dev *)d;
}

static int
crash_pread (struct hhc_dev *d, void *buf, size_t len, uint64_t off)
{
  struct crash_dev *c = to_crash (d);
  HHC_SCOPED_LOCK (&c->lock);

  if (off + len > d->size)
    return EIO;
  for (unsigned i = 0; i < c->bad.n; i++)
    if (off < c->bad.off[i] + c->bad.len[i] && c->bad.off[i] < off + len)
      return EIO;
  memcpy (buf, c->current + off, len);
  return 0;
}

/* A write over unreadable bytes makes the ones it covers readable (a
 * disk remaps a sector it writes); each range keeps its larger rest.
 */
static void
heal (struct crashdev_bad *bad, uint64_t off, size_t len)
{
  unsigned k = 0;

  for (unsigned i = 0; i < bad->n; i++)
    {
      uint64_t b0 = bad->off[i], b1 = b0 + bad->len[i];
      if (off < b1 && off + len > b0)
        {
          if (off > b0 && (off - b0 >= b1 - HHC_MIN (b1, off + len)))
            b1 = off; /* the part before the write is the larger */
          else
            b0 = HHC_MIN (b1, off + len);
        }
      if (b1 > b0)
        {
          bad->off[k] = b0;
          bad->len[k++] = b1 - b0;
        }
    }
  bad->n = k;
}

static int
crash_pwrite (struct hhc_dev *d, const void *buf, size_t len, uint64_t off)
{
  struct crash_dev *c = to_crash (d);
  struct pending p = { .off = off, .len = len };
  HHC_SCOPED_LOCK (&c->lock);

  if (off + len > d->size || c->dead)
    return EIO;
  p.data = malloc (len);
  if (p.data == NULL)
    return ENOMEM;
  memcpy (p.data, buf, len);
  if (pending_vec_append (&c->pending, p))
    {
      free (p.data);
      return ENOMEM;
    }
  memcpy (c->current + off, buf, len);
  heal (&c->bad, off, len);
  return 0;
}

/* A FUA write: durable when it returns. */
static int
crash_pwrite_fua (struct hhc_dev *d, const void *buf, size_t len, uint64_t off)
{
  struct crash_dev *c = to_crash (d);
  HHC_SCOPED_LOCK (&c->lock);

  if (off + len > d->size || c->dead)
    return EIO;
  if (c->pending.len > 0
      && mark_vec_append (&c->fuas,
                          (struct fua_mark){ c->pending.len, off, len }))
    return ENOMEM;
  memcpy (c->current + off, buf, len);
  memcpy (c->durable + off, buf, len);
  heal (&c->bad, off, len);
  heal (&c->dbad, off, len);
  for (size_t i = 0; i < c->pending.len; i++)
    {
      struct pending *p = &c->pending.ptr[i];
      uint64_t lo = HHC_MAX (p->off, off);
      uint64_t hi = HHC_MIN (p->off + p->len, off + len);
      if (lo < hi)
        memcpy (p->data + (lo - p->off), (const char *)buf + (lo - off),
                hi - lo);
    }
  return 0;
}

static void
drop_pending (struct crash_dev *c)
{
  for (size_t i = 0; i < c->pending.len; i++)
    free (c->pending.ptr[i].data);
  c->pending.len = 0;
  c->fuas.len = 0;
}

static int
crash_sync (struct hhc_dev *d)
{
  struct crash_dev *c = to_crash (d);
  HHC_SCOPED_LOCK (&c->lock);

  if (c->dead)
    return EIO;
  for (size_t i = 0; i < c->pending.len; i++)
    {
      struct pending *p = &c->pending.ptr[i];
      memcpy (c->durable + p->off, p->data, p->len);
    }
  drop_pending (c);
  c->dbad = c->bad; /* every write reads saw is durable now */
  return 0;
}

static void
crash_close (struct hhc_dev *d)
{
  /* The test owns the device: see crashdev_destroy. */
}

static const struct hhc_dev_ops crash_ops = {
  .pread = crash_pread,
  .pwrite = crash_pwrite,
  .sync = crash_sync,
  .close = crash_close,
  .pwrite_fua = crash_pwrite_fua,
};

int
crashdev_create (uint64_t size, struct hhc_dev **devp)
{
  struct crash_dev *c = calloc (1, sizeof *c);

  if (c == NULL)
    return ENOMEM;
  c->durable = calloc (1, size);
  c->current = calloc (1, size);
  c->dev.name = strdup ("crashdev");
  if (c->durable == NULL || c->current == NULL || c->dev.name == NULL)
    {
      free (c->durable);
      free (c->current);
      free (c->dev.name);
      free (c);
      return ENOMEM;
    }
  pthread_mutex_init (&c->lock, NULL);
  c->dev.ops = &crash_ops;
  c->dev.size = size;
  *devp = &c->dev;
  return 0;
}

size_t
crashdev_pending (struct hhc_dev *d)
{
  struct crash_dev *c = to_crash (d);
  HHC_SCOPED_LOCK (&c->lock);

  return c->pending.len;
}

/* Note a write the crash dropped (in whole or in part): the newest
 * CRASHDEV_LOST_MAX are kept, oldest first.
 */
static void
note_lost (struct crashdev_lost *l, uint64_t off, size_t len)
{
  if (l->n == CRASHDEV_LOST_MAX)
    {
      memmove (l->off, l->off + 1, sizeof l->off[0] * (l->n - 1));
      memmove (l->len, l->len + 1, sizeof l->len[0] * (l->n - 1));
      l->n--;
    }
  l->off[l->n] = off;
  l->len[l->n++] = len;
}

/* A write's pieces are the parts of it between CRASHDEV_PIECE
 * boundaries of the device (a disk's physical sectors).
 */
static size_t
npieces (const struct pending *p)
{
  return (p->off + p->len - 1) / CRASHDEV_PIECE - p->off / CRASHDEV_PIECE + 1;
}

static void
piece (const struct pending *p, size_t i, uint64_t *lo, uint64_t *hi)
{
  uint64_t b = (p->off / CRASHDEV_PIECE + i) * CRASHDEV_PIECE;

  *lo = HHC_MAX (b, p->off);
  *hi = HHC_MIN (b + CRASHDEV_PIECE, p->off + p->len);
}

/* What a cut does to one unsynced write: it lands, is lost, or lands in
 * part (landed[k]: piece k did).
 */
enum fate { LAND, LOSE, PART };
struct outcome {
  enum fate fate;
  unsigned char *landed;
};

/* The fate of a write the coin (or keep) did not keep: lost, or half
 * the time (seeded, more than one piece) each piece lands or not.
 */
static void
decide_dropped (const struct pending *p, bool seeded, unsigned *seed,
                struct outcome *o)
{
  size_t n = npieces (p), got = 0;

  o->fate = LOSE;
  if (!seeded || n <= 1 || (rand_r (seed) & 1))
    return;
  o->landed = malloc (n);
  if (o->landed == NULL)
    abort ();
  for (size_t k = 0; k < n; k++)
    got += o->landed[k] = rand_r (seed) & 1;
  o->fate = got == n ? LAND : got ? PART : LOSE;
}

/* Add [off, off + len) to bad (a test harness limit: abort when full,
 * rather than let the oldest range read again).
 */
static void
bad_add (struct crashdev_bad *b, uint64_t off, size_t len)
{
  if (len == 0)
    return;
  if (b->n == CRASHDEV_BAD_MAX)
    {
      fprintf (stderr, "crashdev: more than %d unreadable ranges\n",
               CRASHDEV_BAD_MAX);
      abort ();
    }
  b->off[b->n] = off;
  b->len[b->n++] = len;
}

/* The write the cut tears on a tearing device: the newest lost one, a
 * quarter of the time an older one (the cache wrote out of order):
 * all of it, or half the time a run of its pieces.  Returns its index
 * (SIZE_MAX: none) and the range.
 */
static size_t
choose_tear (const struct pending *w, const struct outcome *o, size_t n,
             unsigned *seed, uint64_t *off, size_t *len, bool *older)
{
  size_t lost[CRASHDEV_LOST_MAX], nl = 0, v;

  for (size_t i = n; i-- > 0 && nl < CRASHDEV_LOST_MAX;)
    if (o[i].fate != LAND)
      lost[nl++] = i; /* newest first */
  if (nl == 0)
    return SIZE_MAX;
  *older = nl > 1 && rand_r (seed) % 4 == 0;
  v = *older ? lost[1 + rand_r (seed) % (nl - 1)] : lost[0];
  *off = w[v].off;
  *len = w[v].len;
  size_t np = npieces (&w[v]);
  if (np > 1 && rand_r (seed) % 2)
    {
      size_t first = (size_t)rand_r (seed) % np;
      size_t last = first + (size_t)rand_r (seed) % (np - first);
      uint64_t lo, hi, lo2, hi2;
      piece (&w[v], first, &lo, &hi);
      piece (&w[v], last, &lo2, &hi2);
      *off = lo;
      *len = hi2 - lo;
    }
  return v;
}

/* Apply write w's fate o to the medium. */
static void
apply (struct crash_dev *c, const struct pending *w, const struct outcome *o)
{
  if (o->fate == LAND)
    {
      memcpy (c->durable + w->off, w->data, w->len);
      heal (&c->dbad, w->off, w->len);
      return;
    }
  for (size_t k = 0; o->fate == PART && k < npieces (w); k++)
    if (o->landed[k])
      {
        uint64_t lo, hi;
        piece (w, k, &lo, &hi);
        memcpy (c->durable + lo, w->data + (lo - w->off), hi - lo);
        heal (&c->dbad, lo, hi - lo);
      }
}

/* Play the cut on the medium: the writes in order (the FUA writes
 * among them heal what they cover at their place), the torn one's
 * bytes unreadable from its place on (a later write that lands heals
 * them).  Lock held.
 */
static void
play (struct crash_dev *c, const struct pending *w, struct outcome *o, size_t n,
      unsigned *seed)
{
  struct crashdev_lost *l = &c->lost;
  uint64_t toff = 0;
  size_t tlen = 0, m = 0;
  bool older = false;
  size_t victim = c->tearing ? choose_tear (w, o, n, seed, &toff, &tlen, &older)
                             : SIZE_MAX;

  for (size_t i = 0; i < n; i++)
    {
      for (; m < c->fuas.len && c->fuas.ptr[m].after <= i; m++)
        heal (&c->dbad, c->fuas.ptr[m].off, c->fuas.ptr[m].len);
      apply (c, &w[i], &o[i]);
      if (i == victim)
        {
          bad_add (&c->dbad, toff, tlen);
          l->torn_off = toff;
          l->torn_len = tlen;
          l->torn_in_flight = c->fly.len > 0 && i == n - 1;
          l->torn_older = older;
        }
      if (o[i].fate == LAND)
        continue;
      note_lost (l, w[i].off, w[i].len);
      l->partial += o[i].fate == PART;
    }
  for (; m < c->fuas.len; m++)
    heal (&c->dbad, c->fuas.ptr[m].off, c->fuas.ptr[m].len);
}

void
crashdev_crash (struct hhc_dev *d, unsigned seed,
                bool (*keep) (size_t i, void *opaque), void *opaque)
{
  struct crash_dev *c = to_crash (d);
  HHC_SCOPED_LOCK (&c->lock);
  size_t n = c->pending.len + (c->fly.len > 0);
  struct pending *w = malloc ((n + 1) * sizeof *w);
  struct outcome *o = calloc (n + 1, sizeof *o);

  if (w == NULL || o == NULL)
    abort ();
  if (c->pending.len > 0) /* ptr may be NULL */
    memcpy (w, c->pending.ptr, c->pending.len * sizeof *w);
  for (size_t i = 0; i < c->pending.len; i++)
    {
      bool k = keep ? keep (i, opaque) : (rand_r (&seed) & 1);
      if (k)
        o[i].fate = LAND;
      else
        decide_dropped (&w[i], keep == NULL, &seed, &o[i]);
    }
  if (c->fly.len > 0) /* in flight: it never completed */
    {
      w[n - 1] = c->fly;
      decide_dropped (&w[n - 1], true, &seed, &o[n - 1]);
    }
  memset (&c->lost, 0, sizeof c->lost);
  play (c, w, o, n, &seed);
  for (size_t i = 0; i < n; i++)
    free (o[i].landed);
  free (o);
  free (w);
  c->fly.len = 0;
  drop_pending (c);
  memcpy (c->current, c->durable, d->size);
  c->bad = c->dbad;
  c->dead = true;
}

void
crashdev_set_tearing (struct hhc_dev *d, bool on)
{
  struct crash_dev *c = to_crash (d);
  HHC_SCOPED_LOCK (&c->lock);

  c->tearing = on;
}

void
crashdev_set_in_flight (struct hhc_dev *d, const void *buf, uint64_t off,
                        size_t len)
{
  struct crash_dev *c = to_crash (d);
  HHC_SCOPED_LOCK (&c->lock);

  c->fly = (struct pending){ off, off + len <= d->size ? len : 0,
                             (unsigned char *)buf };
}

bool
crashdev_last_lost (struct hhc_dev *d, uint64_t *off, size_t *len)
{
  struct crash_dev *c = to_crash (d);
  HHC_SCOPED_LOCK (&c->lock);

  *off = c->lost.n ? c->lost.off[c->lost.n - 1] : 0;
  *len = c->lost.n ? c->lost.len[c->lost.n - 1] : 0;
  return c->lost.n > 0;
}

void
crashdev_get_lost (struct hhc_dev *d, struct crashdev_lost *l)
{
  struct crash_dev *c = to_crash (d);
  HHC_SCOPED_LOCK (&c->lock);

  *l = c->lost;
}

void
crashdev_peek (struct hhc_dev *d, void *buf)
{
  struct crash_dev *c = to_crash (d);
  HHC_SCOPED_LOCK (&c->lock);

  memcpy (buf, c->current, d->size);
}

void
crashdev_get_bad (struct hhc_dev *d, uint64_t *off, size_t *len)
{
  struct crash_dev *c = to_crash (d);
  HHC_SCOPED_LOCK (&c->lock);

  *off = c->bad.n ? c->bad.off[c->bad.n - 1] : 0;
  *len = c->bad.n ? c->bad.len[c->bad.n - 1] : 0;
}

void
crashdev_set_bad (struct hhc_dev *d, uint64_t off, size_t len)
{
  struct crash_dev *c = to_crash (d);
  HHC_SCOPED_LOCK (&c->lock);

  c->bad.n = len > 0;
  c->bad.off[0] = off;
  c->bad.len[0] = len;
  c->dbad = c->bad;
}

void
crashdev_add_bad (struct hhc_dev *d, uint64_t off, size_t len)
{
  struct crash_dev *c = to_crash (d);
  HHC_SCOPED_LOCK (&c->lock);

  bad_add (&c->bad, off, len);
  bad_add (&c->dbad, off, len);
}

void
crashdev_get_bads (struct hhc_dev *d, struct crashdev_bad *b)
{
  struct crash_dev *c = to_crash (d);
  HHC_SCOPED_LOCK (&c->lock);

  *b = c->bad;
}

void
crashdev_set_bads (struct hhc_dev *d, const struct crashdev_bad *b)
{
  struct crash_dev *c = to_crash (d);
  HHC_SCOPED_LOCK (&c->lock);

  c->bad = *b;
  c->dbad = *b;
}

void
crashdev_restart (struct hhc_dev *d)
{
  struct crash_dev *c = to_crash (d);
  HHC_SCOPED_LOCK (&c->lock);

  drop_pending (c);
  memcpy (c->current, c->durable, d->size);
  c->bad = c->dbad;
  c->dead = false;
}

void
crashdev_destroy (struct hhc_dev *d)
{
  struct crash_dev *c = to_crash (d);

  drop_pending (c);
  pending_vec_reset (&c->pending);
  mark_vec_reset (&c->fuas);
  pthread_mutex_destroy (&c->lock);
  free (c->durable);
  free (c->current);
  free (d->name);
  free (c);
}
