/* Test support (membackend.h): hookdev, a device that calls hooks
 * around another's I/O.  Its mutex protects the hook pointers and
 * counters; hooks run without it.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "devcrash.h"
#include "membackend.h"

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
