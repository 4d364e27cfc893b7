/* cos-backend: the write-back buffer of dirty objects.
 *
 * Why: a 4 KiB write into an object is a PUT of the whole object, a
 * round trip and the hashing of object-size bytes.  A client that
 * writes then FLUSHes (a file system, a database) would wait for each
 * PUT in turn.  Here a write lands in the object's dirty copy and is
 * acknowledged; write-back threads PUT dirty objects in parallel, and
 * a FLUSH (or FUA) waits only for the objects it covers.  Writes into
 * an object that is still dirty cost no request at all.
 *
 * Durability is a disk's volatile write cache: a write is durable once
 * a FLUSH (or a FUA) that followed it has returned.  A crash loses the
 * dirty objects; a clean exit stores them first (cos.c).
 *
 * Objects: an entry is QUEUED (dirty, waiting for a thread), INFLIGHT
 * (a thread stores a snapshot of it; writes meanwhile patch the entry
 * and mark it redirty) or FAILED (its store failed after the store's
 * own retries; it stays dirty, and the next sync or write tries it
 * again).  At most one store of an object is in flight, so two PUTs of
 * one object never race in the store.
 *
 * What a sync waits for: every write has a generation (gen).  An entry
 * remembers the generation of its oldest write that is not yet stored
 * (since).  A sync that starts at generation G is done when no entry
 * in its range has since <= G.  A store of a snapshot taken after G
 * covers everything written up to G.
 *
 * Locks: the object's lock (ops->lock, held by its writers) is taken
 * before the buffer's mutex, never after; ops->stored runs with both
 * held (it takes the object cache's mutex).  Writers patch an entry
 * with both held; a thread snapshots it with the mutex only, so the
 * store itself holds no lock at all.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lock.h"
#include "wbuf.h"

enum state { QUEUED, INFLIGHT, FAILED };

struct entry {
  uint64_t idx;
  char *data;
  enum state state;
  bool redirty;              /* INFLIGHT: written since the snapshot */
  uint64_t since;            /* gen of the oldest write not yet stored */
  uint64_t redirty_gen;      /* redirty: gen of the first such write */
  uint64_t attempt;          /* attempt number of its last store */
  uint64_t failed_at;        /* attempt that failed last (0: stored since) */
  struct entry *hnext;       /* hash chain */
  struct entry *qnext;       /* queue of QUEUED entries */
  struct entry *prev, *next; /* all entries */
};

struct thread {
  struct wbuf *w;
  pthread_t tid;
  char *snap; /* the snapshot being stored */
};

struct wbuf {
  struct wbuf_ops ops;
  pthread_mutex_t m;
  pthread_cond_t work; /* the queue has an entry, or stop */
  pthread_cond_t done; /* a store ended, or a reservation did */
  uint32_t object_size;
  size_t max;      /* entries at most */
  size_t count;    /* entries */
  size_t reserved; /* writers between wbuf_reserve and patch/add */
  size_t busy;     /* entries QUEUED or INFLIGHT */
  size_t nbuckets;
  struct entry **buckets;
  struct entry *all;
  struct entry *qhead, *qtail;
  uint64_t gen;
  uint64_t attempts; /* stores started so far */
  unsigned nthreads, started;
  struct thread *thr;
  bool stop;
  struct wbuf_stats st;
};

struct wbuf *
wbuf_new (const struct wbuf_ops *ops, size_t max, uint32_t object_size,
          unsigned nthreads)
{
  struct wbuf *w;

  if (max == 0)
    max = 1;
  if (nthreads == 0)
    nthreads = 1;
  if (nthreads > max)
    nthreads = max;
  w = calloc (1, sizeof *w);
  if (w == NULL)
    return NULL;
  w->nbuckets = 2 * max;
  w->buckets = calloc (w->nbuckets, sizeof *w->buckets);
  w->thr = calloc (nthreads, sizeof *w->thr);
  if (w->buckets == NULL || w->thr == NULL)
    {
      free (w->buckets);
      free (w->thr);
      free (w);
      errno = ENOMEM;
      return NULL;
    }
  w->ops = *ops;
  w->max = max;
  w->object_size = object_size;
  w->nthreads = nthreads;
  pthread_mutex_init (&w->m, NULL);
  pthread_cond_init (&w->work, NULL);
  pthread_cond_init (&w->done, NULL);
  return w;
}

void
wbuf_free (struct wbuf *w)
{
  struct entry *e, *next;

  if (w == NULL)
    return;
  hhc_lock (&w->m);
  w->stop = true;
  pthread_cond_broadcast (&w->work);
  hhc_unlock (&w->m);
  for (unsigned i = 0; i < w->started; i++)
    pthread_join (w->thr[i].tid, NULL);
  for (e = w->all; e; e = next)
    {
      next = e->next;
      free (e->data);
      free (e);
    }
  for (unsigned i = 0; i < w->nthreads; i++)
    free (w->thr[i].snap);
  free (w->thr);
  free (w->buckets);
  pthread_cond_destroy (&w->done);
  pthread_cond_destroy (&w->work);
  pthread_mutex_destroy (&w->m);
  free (w);
}

static struct entry **
slot (struct wbuf *w, uint64_t idx)
{
  return &w->buckets[(idx * 0x9E3779B97F4A7C15ULL >> 17) % w->nbuckets];
}

static struct entry *
find (struct wbuf *w, uint64_t idx)
{
  for (struct entry *e = *slot (w, idx); e; e = e->hnext)
    if (e->idx == idx)
      return e;
  return NULL;
}

/* Queue E (it becomes QUEUED; the caller fixes busy / the counts). */
static void
push (struct wbuf *w, struct entry *e)
{
  e->state = QUEUED;
  e->qnext = NULL;
  if (w->qtail)
    w->qtail->qnext = e;
  else
    w->qhead = e;
  w->qtail = e;
  pthread_cond_signal (&w->work);
}

static void
remove_entry (struct wbuf *w, struct entry *e)
{
  struct entry **p = slot (w, e->idx);

  while (*p != e)
    p = &(*p)->hnext;
  *p = e->hnext;
  if (e->prev)
    e->prev->next = e->next;
  else
    w->all = e->next;
  if (e->next)
    e->next->prev = e->prev;
  w->count--;
  free (e->data);
  free (e);
}

/* Queue again every FAILED entry. */
static void
retry_failed (struct wbuf *w)
{
  for (struct entry *e = w->all; e; e = e->next)
    if (e->state == FAILED)
      {
        push (w, e);
        w->busy++;
      }
}

static void *
worker (void *p)
{
  struct thread *t = p;
  struct wbuf *w = t->w;
  char *snap = t->snap;

  hhc_lock (&w->m);
  for (;;)
    {
      struct entry *e;
      pthread_mutex_t *lk;
      uint64_t idx;
      int r;

      while (!w->stop && w->qhead == NULL)
        hhc_cond_wait (&w->work, &w->m);
      if (w->qhead == NULL)
        break;
      e = w->qhead;
      w->qhead = e->qnext;
      if (w->qhead == NULL)
        w->qtail = NULL;
      e->state = INFLIGHT;
      e->redirty = false;
      e->attempt = ++w->attempts;
      memcpy (snap, e->data, w->object_size);
      idx = e->idx;
      hhc_unlock (&w->m);

      r = w->ops.store (idx, snap);

      lk = w->ops.lock (idx);
      hhc_lock (lk);
      hhc_lock (&w->m);
      if (r == 0)
        {
          w->st.stores++;
          e->failed_at = 0;
        }
      else
        {
          w->st.failures++;
          e->failed_at = e->attempt;
        }
      /* Before the entry goes: a reader that misses it must find what
       * the store holds in the object cache, not an older copy.
       */
      w->ops.stored (idx, snap, r == 0);
      if (e->redirty)
        {
          /* Written again meanwhile: store it again (also after a
           * failure: a sync that waits for it sees failed_at).
           * Stored, the oldest write not covered is the first after
           * the snapshot.
           */
          if (r == 0)
            e->since = e->redirty_gen;
          push (w, e);
        }
      else if (r == 0)
        {
          remove_entry (w, e);
          w->busy--;
        }
      else
        {
          e->state = FAILED;
          w->busy--;
        }
      pthread_cond_broadcast (&w->done);
      hhc_unlock (&w->m);
      hhc_unlock (lk);
      hhc_lock (&w->m);
    }
  hhc_unlock (&w->m);
  return NULL;
}

int
wbuf_reserve (struct wbuf *w)
{
  bool retried = false, waited = false;

  hhc_lock (&w->m);
  while (w->count + w->reserved >= w->max)
    {
      if (w->busy > 0 || w->reserved > 0)
        {
          waited = true;
          hhc_cond_wait (&w->done, &w->m);
          continue;
        }
      /* Every dirty object failed to be stored: try them once more,
       * then give up rather than wait for ever.
       */
      if (retried)
        {
          hhc_unlock (&w->m);
          errno = EIO;
          return -1;
        }
      retry_failed (w);
      retried = true;
    }
  w->reserved++;
  if (waited)
    w->st.waits++;
  hhc_unlock (&w->m);
  return 0;
}

bool
wbuf_full (struct wbuf *w)
{
  hhc_lock (&w->m);
  bool full = w->count + w->reserved >= w->max;
  hhc_unlock (&w->m);
  return full;
}

void
wbuf_unreserve (struct wbuf *w)
{
  hhc_lock (&w->m);
  w->reserved--;
  pthread_cond_broadcast (&w->done);
  hhc_unlock (&w->m);
}

bool
wbuf_patch (struct wbuf *w, uint64_t idx, uint32_t off, uint32_t n,
            const void *buf)
{
  struct entry *e;

  hhc_lock (&w->m);
  e = find (w, idx);
  if (e == NULL)
    {
      hhc_unlock (&w->m);
      return false;
    }
  if (buf)
    memcpy (e->data + off, buf, n);
  else
    memset (e->data + off, 0, n);
  w->gen++;
  w->st.merged++;
  if (e->state == INFLIGHT && !e->redirty)
    {
      e->redirty = true;
      e->redirty_gen = w->gen;
    }
  else if (e->state == FAILED)
    {
      push (w, e);
      w->busy++;
    }
  hhc_unlock (&w->m);
  return true;
}

/* Start the threads (the first time; they must not exist before
 * nbdkit forks).  Called with the mutex held.  -1 if none runs.
 */
static int
start_threads (struct wbuf *w)
{
  while (w->started < w->nthreads)
    {
      struct thread *t = &w->thr[w->started];
      t->w = w;
      if (t->snap == NULL && (t->snap = malloc (w->object_size)) == NULL)
        break;
      if (pthread_create (&t->tid, NULL, worker, t) != 0)
        break;
      w->started++;
    }
  if (w->started == 0)
    {
      errno = EAGAIN;
      return -1;
    }
  return 0;
}

int
wbuf_add (struct wbuf *w, uint64_t idx, char *obj)
{
  struct entry *e = calloc (1, sizeof *e);

  hhc_lock (&w->m);
  if (e == NULL || (w->started < w->nthreads && start_threads (w) == -1))
    {
      int err = e == NULL ? ENOMEM : errno;
      w->reserved--;
      pthread_cond_broadcast (&w->done);
      hhc_unlock (&w->m);
      free (e);
      errno = err;
      return -1;
    }
  e->idx = idx;
  e->data = obj;
  e->since = ++w->gen;
  e->hnext = *slot (w, idx);
  *slot (w, idx) = e;
  e->next = w->all;
  if (w->all)
    w->all->prev = e;
  w->all = e;
  w->count++;
  w->busy++;
  w->reserved--;
  push (w, e);
  hhc_unlock (&w->m);
  return 0;
}

bool
wbuf_read (struct wbuf *w, uint64_t idx, uint32_t off, uint32_t n, void *buf)
{
  struct entry *e;

  hhc_lock (&w->m);
  e = find (w, idx);
  if (e)
    memcpy (buf, e->data + off, n);
  hhc_unlock (&w->m);
  return e != NULL;
}

bool
wbuf_has (struct wbuf *w, uint64_t idx)
{
  bool r;

  hhc_lock (&w->m);
  r = find (w, idx) != NULL;
  hhc_unlock (&w->m);
  return r;
}

void
wbuf_dirty_set (struct wbuf *w, uint64_t lo, uint64_t hi, bool *dirty)
{
  hhc_lock (&w->m);
  for (struct entry *e = w->all; e; e = e->next)
    if (e->idx >= lo && e->idx <= hi)
      dirty[e->idx - lo] = true;
  hhc_unlock (&w->m);
}

int
wbuf_sync (struct wbuf *w, uint64_t lo, uint64_t hi)
{
  uint64_t g, a0;
  bool failed;

  hhc_lock (&w->m);
  g = w->gen;
  a0 = w->attempts;
  for (;;)
    {
      bool pending = false;
      failed = false;
      for (struct entry *e = w->all; e; e = e->next)
        if (e->idx >= lo && e->idx <= hi && e->since <= g)
          {
            /* A store that started after this sync began and failed is
             * this sync's failure, even if later writes queued the
             * object again: never wait for ever on an object that keeps
             * being written while the store is down.  One that failed
             * before is tried once more.
             */
            if (e->failed_at > a0)
              failed = true;
            else if (e->state == FAILED)
              {
                push (w, e);
                w->busy++;
                pending = true;
              }
            else
              pending = true;
          }
      if (!pending)
        break;
      hhc_cond_wait (&w->done, &w->m);
    }
  hhc_unlock (&w->m);
  if (failed)
    {
      errno = EIO;
      return -1;
    }
  return 0;
}

size_t
wbuf_dirty (struct wbuf *w)
{
  size_t n;

  hhc_lock (&w->m);
  n = w->count;
  hhc_unlock (&w->m);
  return n;
}

void
wbuf_get_stats (struct wbuf *w, struct wbuf_stats *st)
{
  hhc_lock (&w->m);
  *st = w->st;
  hhc_unlock (&w->m);
}
