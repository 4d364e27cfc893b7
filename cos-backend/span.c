/* cos-backend: a request cut into objects, done by up to parallel=
 * threads at once (the first object by the calling thread): a 4 MiB
 * read of 1 MiB objects costs one round trip, not four.  Each object
 * is read or written alone (object.c), under its own lock, so the
 * threads never hold two object locks at once.
 *
 * Read-ahead: a read that goes on where the last one ended, and whose
 * last object is not cached, also reads the next ra_objects objects into
 * the object cache, in parallel with its own: the reads after it are
 * served from memory until the next miss reads ahead again.  One GET's
 * time for ra_objects + 1 objects, where a sequential reader at queue
 * depth 1 would wait for each GET in turn.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "lock.h"
#include "objcache.h"
#include "object.h"
#include "span.h"

/* One request's objects. */
struct span {
  char *buf; /* NULL: zeros (writes only) */
  uint64_t offset;
  uint32_t count;
  bool write;
  bool fua;
  uint64_t first, last; /* object indexes */
  uint64_t ra_last;     /* reads: read ahead up to this object */
  pthread_mutex_t lock; /* protects next and err */
  uint64_t next;        /* next object to take */
  int err;              /* first errno, 0 if none */
};

static uint64_t seq_next; /* atomic: where a sequential read goes on */

/* Object IDX's part of the request. */
static int
span_object (struct span *sp, uint64_t idx)
{
  uint32_t osize = vol.object_size;
  uint64_t start = idx == sp->first ? sp->offset : idx * osize;
  uint64_t end = (idx + 1) * osize;
  uint32_t off, n;
  char *b;

  if (end > sp->offset + sp->count)
    end = sp->offset + sp->count;
  off = start % osize;
  n = end - start;
  b = sp->buf ? sp->buf + (start - sp->offset) : NULL;
  return sp->write ? object_write (idx, off, n, b, sp->fua)
                   : object_read (idx, off, n, b);
}

static void *
span_worker (void *p)
{
  struct span *sp = p;

  for (;;)
    {
      uint64_t idx;
      int err;

      hhc_lock (&sp->lock);
      idx = sp->next++;
      err = sp->err;
      hhc_unlock (&sp->lock);
      if (idx > sp->last && idx <= sp->ra_last && err == 0)
        {
          object_read_ahead (idx);
          continue;
        }
      if (idx > sp->last || err != 0)
        return NULL;
      if (span_object (sp, idx) == -1)
        {
          err = errno ? errno : EIO;
          HHC_SCOPED_LOCK (&sp->lock);
          if (sp->err == 0)
            sp->err = err;
        }
    }
}

/* Do [OFFSET, OFFSET+COUNT), reading AHEAD objects beyond it. */
static int
do_span (char *buf, uint32_t count, uint64_t offset, bool write, bool fua,
         unsigned ahead)
{
  struct span sp = { .buf = buf,
                     .offset = offset,
                     .count = count,
                     .write = write,
                     .fua = fua,
                     .first = offset / vol.object_size,
                     .last = (offset + count - 1) / vol.object_size };
  pthread_t tids[64];
  unsigned nthreads = 0;
  uint64_t nobj, nall = (vol.size + vol.object_size - 1) / vol.object_size;

  sp.ra_last = sp.last + ahead < nall ? sp.last + ahead : nall - 1;
  if (sp.ra_last < sp.last)
    sp.ra_last = sp.last;
  nobj = sp.ra_last - sp.first + 1;

  sp.next = sp.first;
  pthread_mutex_init (&sp.lock, NULL);
  while (nthreads + 1 < conf.max_parallel && nthreads + 1 < nobj
         && pthread_create (&tids[nthreads], NULL, span_worker, &sp) == 0)
    nthreads++;
  span_worker (&sp);
  for (unsigned i = 0; i < nthreads; i++)
    pthread_join (tids[i], NULL);
  pthread_mutex_destroy (&sp.lock);
  if (sp.err)
    {
      errno = sp.err;
      return -1;
    }
  return 0;
}

int
span_read (void *buf, uint32_t count, uint64_t offset)
{
  uint64_t prev
      = __atomic_exchange_n (&seq_next, offset + count, __ATOMIC_RELAXED);
  uint64_t last = (offset + count - 1) / vol.object_size;
  unsigned ahead = 0;

  if (vol.ra_objects > 0 && prev == offset && offset > 0
      && !objcache_has (vol.cache, last))
    ahead = vol.ra_objects;
  return do_span (buf, count, offset, false, false, ahead);
}

int
span_write (const void *buf, uint32_t count, uint64_t offset, bool fua)
{
  return do_span ((char *)buf, count, offset, true, fua, 0);
}
