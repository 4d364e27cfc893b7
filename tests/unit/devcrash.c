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
 * followed: keeping them at a crash must not undo it).  crash applies
 * a chosen subset of pending writes to durable (in order; with the
 * seeded coin, a dropped write of several 4 KiB pieces lands in part
 * half the time: each piece kept or not, as a disk's cache destages in
 * any order), records the newest writes it dropped, copies durable to
 * current and marks the device dead.  An unreadable range (a torn
 * write on an HDD) fails the reads that touch it until writes cover it
 * (a write in its middle keeps only the larger rest); a write heals
 * what reads see at once, the medium only once it is durable (a cut
 * that drops it leaves the bytes unreadable again).
 */
#include <config.h>

#include "common.h"
#include "devcrash.h"

struct pending {
  uint64_t off;
  size_t len;
  unsigned char *data;
};

HHC_VECTOR (pending_vec, struct pending)

struct crash_dev {
  struct hhc_dev dev;
  pthread_mutex_t lock; /* protects everything below */
  unsigned char *durable;
  unsigned char *current;
  struct pending_vec pending;
  bool dead;
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

/* Apply the pieces of p that a seeded coin keeps (a write the cache
 * destaged in part); true if it kept every piece.
 */
static bool
apply_pieces (struct crash_dev *c, const struct pending *p, unsigned *seed)
{
  bool all = true;

  for (size_t o = 0; o < p->len; o += CRASHDEV_PIECE)
    {
      size_t n = HHC_MIN (CRASHDEV_PIECE, p->len - o);
      if (rand_r (seed) & 1)
        {
          memcpy (c->durable + p->off + o, p->data + o, n);
          heal (&c->dbad, p->off + o, n);
        }
      else
        all = false;
    }
  return all;
}

void
crashdev_crash (struct hhc_dev *d, unsigned seed,
                bool (*keep) (size_t i, void *opaque), void *opaque)
{
  struct crash_dev *c = to_crash (d);
  HHC_SCOPED_LOCK (&c->lock);

  c->lost.n = c->lost.partial = 0;
  for (size_t i = 0; i < c->pending.len; i++)
    {
      struct pending *p = &c->pending.ptr[i];
      bool k = keep ? keep (i, opaque) : (rand_r (&seed) & 1);
      if (k)
        {
          memcpy (c->durable + p->off, p->data, p->len);
          heal (&c->dbad, p->off, p->len);
        }
      else if (keep || p->len <= CRASHDEV_PIECE || (rand_r (&seed) & 1))
        note_lost (&c->lost, p->off, p->len);
      else if (!apply_pieces (c, p, &seed))
        {
          note_lost (&c->lost, p->off, p->len);
          c->lost.partial++;
        }
    }
  drop_pending (c);
  memcpy (c->current, c->durable, d->size);
  c->bad = c->dbad;
  c->dead = true;
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

  if (len == 0)
    return;
  if (c->bad.n == CRASHDEV_BAD_MAX)
    {
      memmove (c->bad.off, c->bad.off + 1,
               sizeof c->bad.off[0] * (c->bad.n - 1));
      memmove (c->bad.len, c->bad.len + 1,
               sizeof c->bad.len[0] * (c->bad.n - 1));
      c->bad.n--;
    }
  c->bad.off[c->bad.n] = off;
  c->bad.len[c->bad.n++] = len;
  c->dbad = c->bad;
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
  pthread_mutex_destroy (&c->lock);
  free (c->durable);
  free (c->current);
  free (d->name);
  free (c);
}
