/* Sequential cutoff: the stream table and the uncached read run
 * (seqcut.h has the design note).
 *
 * Reads of a sequential stream still use every cached block (a dirty
 * one holds the only current copy); only the blocks that are not
 * cached come from the backend, in runs, and are not filled in.  A
 * block that becomes cached after it was looked up is read from the
 * backend anyway: the write that cached it overlaps this read, and NBD
 * does not order the two.
 */
#include <config.h>

#include "common.h"
#include "request.h"
#include "seqcut.h"
#include "vol.h"

void
seqcut_init (struct hhc_seqcut *sc, uint64_t cutoff)
{
  memset (sc, 0, sizeof *sc);
  sc->cutoff = cutoff;
  pthread_mutex_init (&sc->lock, NULL);
}

void
seqcut_destroy (struct hhc_seqcut *sc)
{
  pthread_mutex_destroy (&sc->lock);
}

/* ---- sc->lock held below this line ---- */

/* Is e among the older half of the entries (by last use)? */
static bool
older_half (const struct hhc_seqcut *sc, const struct seqcut_stream *e)
{
  unsigned newer = 0;

  for (unsigned i = 0; i < SEQCUT_STREAMS; i++)
    newer += sc->stream[i].used > e->used;
  return newer >= SEQCUT_STREAMS / 2;
}

/* The entry a new stream takes: an unused one, else the shortest of
 * the older half (ties: the least recently used).  Plain LRU let the
 * random requests of another client, each a stream of its own, push a
 * scan out of the table between two of its requests, so that it never
 * reached the cutoff (bench/run's scan experiment: 15 of 128 MiB
 * bypassed); a stream that has moved more than one request's worth
 * outlives them, and one that stopped ages out once it is in the
 * older half with nothing shorter there.
 */
static struct seqcut_stream *
victim_stream (struct hhc_seqcut *sc)
{
  struct seqcut_stream *v = NULL;

  for (unsigned i = 0; i < SEQCUT_STREAMS; i++)
    {
      struct seqcut_stream *e = &sc->stream[i];
      if (e->len == 0)
        return e;
      if (!older_half (sc, e))
        continue;
      if (v == NULL || e->len < v->len
          || (e->len == v->len && e->used < v->used))
        v = e;
    }
  return v;
}

/* The stream a request at offset continues (the longest, if several
 * expect it there: a short one that ended where a long one now goes),
 * else the entry to reuse (victim_stream); *hit says which.
 */
static struct seqcut_stream *
find_stream (struct hhc_seqcut *sc, uint64_t offset, bool write, bool *hit)
{
  struct seqcut_stream *match = NULL;

  for (unsigned i = 0; i < SEQCUT_STREAMS; i++)
    {
      struct seqcut_stream *e = &sc->stream[i];
      if (e->len > 0 && e->next == offset && e->write == write
          && (match == NULL || e->len > match->len))
        match = e;
    }
  *hit = match != NULL;
  return match ? match : victim_stream (sc);
}

/* ---- no lock held below this line ---- */

bool
seqcut_check (struct hhc_seqcut *sc, uint64_t offset, uint32_t count,
              bool write)
{
  struct seqcut_stream *e;
  bool hit, seq;

  if (sc->cutoff == 0 || count == 0)
    return false;
  hhc_lock (&sc->lock);
  e = find_stream (sc, offset, write, &hit);
  if (!hit)
    {
      e->len = 0;
      e->write = write;
    }
  e->len = e->len > UINT64_MAX - count ? UINT64_MAX : e->len + count;
  e->next = offset + count;
  e->used = ++sc->tick;
  seq = e->len > sc->cutoff;
  hhc_unlock (&sc->lock);
  if (seq)
    stat_add (write ? &sc->write_bytes : &sc->read_bytes, count);
  return seq;
}

/* Blocks from lba on (lba itself not cached) that are not cached
 * either, up to nmax.
 */
static uint32_t
uncached_run (struct hhc_volume *vol, uint64_t lba, uint32_t nmax)
{
  uint32_t k = 1;

  for (; k < nmax; k++)
    {
      struct hhc_stripe *st = index_stripe (&vol->idx, lba + k);
      HHC_SCOPED_LOCK (&st->lock);
      if (index_lookup (&vol->idx, lba + k) != HHC_NIL)
        break;
    }
  return k;
}

int
seqcut_read_run (struct hhc_volume *vol, void *bctx, uint64_t lba, char *buf,
                 uint32_t off, uint32_t want, uint32_t nmax, uint32_t *done)
{
  uint32_t k = uncached_run (vol, lba, HHC_MAX (nmax, 1u));
  uint64_t len = HHC_MIN ((uint64_t)want, (uint64_t)k * vol->bs - off);
  int r;

  stat_add (&vol->stats.read_misses, k);
  r = vol->ops->pread (bctx, buf, (uint32_t)len, lba * vol->bs + off);
  if (r)
    stat_add (&vol->stats.backend_errors, 1);
  *done = (uint32_t)len;
  return r;
}
