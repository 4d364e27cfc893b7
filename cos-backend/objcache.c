/* cos-backend: a small write-through cache of whole objects.
 *
 * Why: a write of part of an object is a read-modify-write, and small
 * random writes (a file system's metadata, a database's pages) patch
 * the same objects again and again.  Keeping the objects last read or
 * written saves the GET of each read-modify-write, half its requests.
 *
 * Coherence: the cache holds only what this process knows the store
 * holds.  Entries are put and dropped only by a thread that holds the
 * object's lock (cos.c) right after it read the whole object or got a
 * PUT or DELETE acknowledged; a PUT whose outcome is unknown drops the
 * entry.  Plain reads only look: a read that misses does not insert
 * what it fetched, since a write may have replaced the object while
 * the GET was on its way.  As with the store itself, another process
 * writing the same volume is not supported.
 *
 * With write-back (wbuf.c) the latest content of a dirty object is in
 * the write-back buffer, which readers look at first; this cache still
 * holds only what the store acknowledged, put by the write-back thread
 * (under the object's lock) before the dirty copy goes.
 *
 * Structure: a chained hash of entries, one LRU list, one mutex.  The
 * mutex is held while object bytes are copied (at most object-size,
 * microseconds next to an HTTP request).
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lock.h"
#include "objcache.h"

struct entry {
  uint64_t idx;
  char *data;
  struct entry *hnext;       /* hash chain */
  struct entry *prev, *next; /* LRU list, most recent first */
};

struct objcache {
  pthread_mutex_t lock;
  uint32_t object_size;
  size_t capacity, count;
  size_t nbuckets;
  struct entry **buckets;
  struct entry *head, *tail;
  uint64_t hits, misses;
};

struct objcache *
objcache_new (size_t capacity, uint32_t object_size)
{
  struct objcache *c;

  if (capacity == 0)
    return NULL;
  c = calloc (1, sizeof *c);
  if (c == NULL)
    return NULL;
  c->nbuckets = 2 * capacity;
  c->buckets = calloc (c->nbuckets, sizeof *c->buckets);
  if (c->buckets == NULL)
    {
      free (c);
      return NULL;
    }
  pthread_mutex_init (&c->lock, NULL);
  c->capacity = capacity;
  c->object_size = object_size;
  return c;
}

void
objcache_free (struct objcache *c)
{
  struct entry *e, *next;

  if (c == NULL)
    return;
  for (e = c->head; e; e = next)
    {
      next = e->next;
      free (e->data);
      free (e);
    }
  free (c->buckets);
  pthread_mutex_destroy (&c->lock);
  free (c);
}

static struct entry **
slot (struct objcache *c, uint64_t idx)
{
  return &c->buckets[(idx * 0x9E3779B97F4A7C15ULL >> 17) % c->nbuckets];
}

static struct entry *
find (struct objcache *c, uint64_t idx)
{
  for (struct entry *e = *slot (c, idx); e; e = e->hnext)
    if (e->idx == idx)
      return e;
  return NULL;
}

static void
lru_unlink (struct objcache *c, struct entry *e)
{
  if (e->prev)
    e->prev->next = e->next;
  else
    c->head = e->next;
  if (e->next)
    e->next->prev = e->prev;
  else
    c->tail = e->prev;
  e->prev = e->next = NULL;
}

static void
lru_push (struct objcache *c, struct entry *e)
{
  e->prev = NULL;
  e->next = c->head;
  if (c->head)
    c->head->prev = e;
  c->head = e;
  if (c->tail == NULL)
    c->tail = e;
}

static void
remove_entry (struct objcache *c, struct entry *e)
{
  struct entry **p = slot (c, e->idx);

  while (*p != e)
    p = &(*p)->hnext;
  *p = e->hnext;
  lru_unlink (c, e);
  c->count--;
}

bool
objcache_read (struct objcache *c, uint64_t idx, uint32_t off, uint32_t n,
               void *buf)
{
  struct entry *e;

  if (c == NULL)
    return false;
  hhc_lock (&c->lock);
  e = find (c, idx);
  if (e)
    {
      memcpy (buf, e->data + off, n);
      lru_unlink (c, e);
      lru_push (c, e);
      c->hits++;
    }
  else
    c->misses++;
  hhc_unlock (&c->lock);
  return e != NULL;
}

bool
objcache_has (struct objcache *c, uint64_t idx)
{
  bool r;

  if (c == NULL)
    return false;
  hhc_lock (&c->lock);
  r = find (c, idx) != NULL;
  hhc_unlock (&c->lock);
  return r;
}

void
objcache_put (struct objcache *c, uint64_t idx, const void *data)
{
  struct entry *e;

  if (c == NULL)
    return;
  hhc_lock (&c->lock);
  e = find (c, idx);
  if (e)
    lru_unlink (c, e);
  else
    {
      if (c->count >= c->capacity)
        {
          /* Reuse the least recently used entry and its buffer. */
          e = c->tail;
          remove_entry (c, e);
        }
      else
        {
          e = calloc (1, sizeof *e);
          if (e)
            e->data = malloc (c->object_size);
          if (e == NULL || e->data == NULL)
            {
              free (e);
              hhc_unlock (&c->lock);
              return; /* not caching is always correct */
            }
        }
      e->idx = idx;
      e->hnext = *slot (c, idx);
      *slot (c, idx) = e;
      c->count++;
    }
  memcpy (e->data, data, c->object_size);
  lru_push (c, e);
  hhc_unlock (&c->lock);
}

void
objcache_drop (struct objcache *c, uint64_t idx)
{
  struct entry *e;

  if (c == NULL)
    return;
  hhc_lock (&c->lock);
  e = find (c, idx);
  if (e)
    {
      remove_entry (c, e);
      free (e->data);
      free (e);
    }
  hhc_unlock (&c->lock);
}

void
objcache_stats (struct objcache *c, uint64_t *hits, uint64_t *misses)
{
  *hits = *misses = 0;
  if (c == NULL)
    return;
  hhc_lock (&c->lock);
  *hits = c->hits;
  *misses = c->misses;
  hhc_unlock (&c->lock);
}
