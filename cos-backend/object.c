/* cos-backend: the objects of the open volume, one at a time: read,
 * write through, write back into a dirty copy, read ahead.
 *
 * A partial write reads the object, patches it and writes it back,
 * under a lock of that object so that two partial writes of one object
 * do not lose each other's bytes.  Locks are striped (a fixed array of
 * mutexes picked by object index), which is cheap and has no lifetime
 * to manage; requests to different objects run in parallel.  A request
 * that spans objects takes their locks one at a time, never two at
 * once (span.c), so there is no lock order to get wrong.
 *
 * The object cache (objcache.c) is only changed under the object's
 * lock, by the thread that has just read or written the object; the
 * write-back buffer (wbuf.c) takes and gives back the same lock
 * around its stores.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "config.h"
#include "lock.h"
#include "objcache.h"
#include "object.h"
#include "s3.h"

#define NLOCKS 1024

/* Stripe i serialises the writers (and readers ahead) of the objects
 * that object_lock maps to it.
 */
static pthread_mutex_t locks[NLOCKS];

struct cos_volume vol;

static uint64_t ra_fetched; /* atomic: objects read ahead */

void
object_init (void)
{
  for (int i = 0; i < NLOCKS; i++)
    pthread_mutex_init (&locks[i], NULL);
}

static pthread_mutex_t *
object_lock (uint64_t idx)
{
  return &locks[(idx * 0x9E3779B97F4A7C15ULL) >> 54 & (NLOCKS - 1)];
}

void
object_key (int64_t idx, char *key, size_t n)
{
  const char *sep = conf.prefix[0] ? "/" : "";

  if (idx < 0)
    snprintf (key, n, "%s%svolume.json", conf.prefix, sep);
  else
    snprintf (key, n, "%s%s%016" PRIx64, conf.prefix, sep, (uint64_t)idx);
}

static bool
is_zero (const void *buf, size_t n)
{
  const unsigned char *p = buf;

  return n == 0 || (p[0] == 0 && memcmp (p, p + 1, n - 1) == 0);
}

int
object_sync (uint64_t lo, uint64_t hi, const char *what)
{
  if (vol.wb == NULL || wbuf_sync (vol.wb, lo, hi) == 0)
    return 0;
  nbdkit_error ("cos: %s: dirty objects could not be stored (errors above); "
                "they stay dirty and the next flush tries again",
                what);
  errno = EIO;
  return -1;
}

int
object_read (uint64_t idx, uint32_t off, uint32_t n, void *buf)
{
  char key[1024];
  struct s3_io io = {
    .method = "GET", .key = key, .buf = buf, .buf_len = n, .missing_ok = true
  };
  int r;

  if ((vol.wb && wbuf_read (vol.wb, idx, off, n, buf))
      || objcache_read (vol.cache, idx, off, n, buf))
    return 0;
  object_key (idx, key, sizeof key);
  if (n < vol.object_size)
    {
      io.range_off = off;
      io.range_len = n;
    }
  r = s3_do (vol.s3, &io);
  free (io.text);
  if (r == -1)
    return -1;
  if (r == 1)
    {
      /* Only a missing object reads as zeros; a missing bucket (deleted
       * under us, or a typo in a reconfiguration) is an error.
       */
      if (strcmp (io.code, "NoSuchKey") != 0)
        {
          nbdkit_error ("cos: GET s3://%s/%s: HTTP 404 %s", conf.bucket, key,
                        io.code[0] ? io.code : "(no S3 error code)");
          errno = EIO;
          return -1;
        }
      memset (buf, 0, n);
      return 0;
    }
  return 0;
}

/* Object IDX whole, in a new buffer (free it), or NULL after an error. */
static char *
read_whole_object (uint64_t idx)
{
  char *obj = malloc (vol.object_size);

  if (obj == NULL)
    {
      nbdkit_error ("cos: malloc: %m");
      return NULL;
    }
  if (object_read (idx, 0, vol.object_size, obj) == -1)
    {
      free (obj);
      return NULL;
    }
  return obj;
}

/* Store a whole object: PUT, or DELETE when it is all zeros. */
static int
put_object (uint64_t idx, const void *buf)
{
  char key[1024];
  struct s3_io io = { .key = key };
  int r;

  object_key (idx, key, sizeof key);
  if (is_zero (buf, vol.object_size))
    io.method = "DELETE";
  else
    {
      io.method = "PUT";
      io.body = buf;
      io.body_len = vol.object_size;
    }
  r = s3_do (vol.s3, &io);
  free (io.text);
  return r == 0 ? 0 : -1;
}

/* The caller holds the object's lock.  After a failure the store may
 * hold the old or the new content: forget it.
 */
static void
stored (uint64_t idx, const void *data, bool ok)
{
  if (ok)
    objcache_put (vol.cache, idx, data);
  else
    objcache_drop (vol.cache, idx);
}

const struct wbuf_ops object_wbuf_ops
    = { .store = put_object, .lock = object_lock, .stored = stored };

static int
store_object (uint64_t idx, const void *buf)
{
  int r = put_object (idx, buf);

  stored (idx, buf, r == 0);
  return r;
}

/* Write-back, with the object's lock held and no room reserved yet:
 * patch the object's dirty copy (no room needed), or find that zeros
 * over zeros change nothing.  Returns 1 when that was all, 0 when a
 * new dirty copy is needed, -1 after an error.
 */
static int
patch_dirty_copy (uint64_t idx, uint32_t off, uint32_t n, const void *buf)
{
  char *obj;

  if (wbuf_patch (vol.wb, idx, off, n, buf))
    return 1;
  /* Zeros over zeros change nothing and need no room: when the buffer
   * is full of objects whose stores fail, they must still succeed.  A
   * partial zero reads the object anyway (it stays in the object cache
   * for the read in add_dirty_copy); a whole one only when it would
   * wait.
   */
  if (buf != NULL || (n == vol.object_size && !wbuf_full (vol.wb)))
    return 0;
  obj = read_whole_object (idx);
  if (obj == NULL)
    return -1;
  if (is_zero (obj + off, n))
    {
      free (obj);
      return 1;
    }
  objcache_put (vol.cache, idx, obj);
  free (obj);
  return 0;
}

/* Write-back, with the object's lock held and room reserved: make the
 * object's dirty copy from its content and BUF (or zeros).  The
 * reservation is used, or given back when no copy is made.
 */
static int
add_dirty_copy (uint64_t idx, uint32_t off, uint32_t n, const void *buf)
{
  char *obj = NULL;
  int r = -1;

  if (wbuf_patch (vol.wb, idx, off, n, buf))
    {
      r = 0; /* dirtied meanwhile */
      goto unreserve;
    }
  obj = malloc (vol.object_size);
  if (obj == NULL)
    {
      nbdkit_error ("cos: malloc: %m");
      goto unreserve;
    }
  if (n < vol.object_size)
    {
      if (object_read (idx, 0, vol.object_size, obj) == -1)
        goto unreserve;
      if (buf == NULL && is_zero (obj + off, n))
        {
          r = 0; /* zeros already */
          goto unreserve;
        }
    }
  if (buf)
    memcpy (obj + off, buf, n);
  else
    memset (obj + off, 0, n);
  if (wbuf_add (vol.wb, idx, obj) == 0)
    return 0;                  /* the buffer owns obj now */
  r = store_object (idx, obj); /* out of memory or threads: write through */
  free (obj);
  return r;

unreserve:
  wbuf_unreserve (vol.wb);
  free (obj);
  return r;
}

/* Write-back: patch the object's dirty copy, or make one from its
 * content (wbuf.h); FUA then waits until it is stored.
 */
static int
buffer_object (uint64_t idx, uint32_t off, uint32_t n, const void *buf,
               bool fua)
{
  pthread_mutex_t *lock = object_lock (idx);
  int r;

  /* Into a dirty copy: no room needed.  Else wait for room with no
   * lock held, and look again.
   */
  hhc_lock (lock);
  r = patch_dirty_copy (idx, off, n, buf);
  hhc_unlock (lock);
  if (r == -1)
    return -1;
  if (r == 0)
    {
      if (wbuf_reserve (vol.wb) == -1)
        {
          nbdkit_error ("cos: write-back: no dirty object can be stored "
                        "(errors above)");
          return -1;
        }
      hhc_lock (lock);
      r = add_dirty_copy (idx, off, n, buf);
      hhc_unlock (lock);
      if (r == -1)
        return -1;
    }
  return fua ? object_sync (idx, idx, "FUA write") : 0;
}

/* Write through, with the object's lock held. */
static int
write_through (uint64_t idx, uint32_t off, uint32_t n, const void *buf)
{
  char *obj;
  int r;

  if (off == 0 && n == vol.object_size && buf)
    return store_object (idx, buf);
  if (off == 0 && n == vol.object_size)
    {
      char key[1024];
      struct s3_io io = { .method = "DELETE", .key = key };
      object_key (idx, key, sizeof key);
      r = s3_do (vol.s3, &io) == 0 ? 0 : -1;
      free (io.text);
      objcache_drop (vol.cache, idx); /* missing now (or unknown) */
      return r;
    }
  obj = read_whole_object (idx);
  if (obj == NULL)
    return -1;
  if (buf)
    memcpy (obj + off, buf, n);
  else if (is_zero (obj + off, n))
    {
      /* Zeroing part of an object that is missing or already zero there
       * costs nothing.
       */
      free (obj);
      return 0;
    }
  else
    memset (obj + off, 0, n);
  r = store_object (idx, obj);
  free (obj);
  return r;
}

int
object_write (uint64_t idx, uint32_t off, uint32_t n, const void *buf, bool fua)
{
  pthread_mutex_t *lock = object_lock (idx);
  int r;

  if (vol.wb)
    return buffer_object (idx, off, n, buf, fua);
  hhc_lock (lock);
  r = write_through (idx, off, n, buf);
  hhc_unlock (lock);
  return r;
}

/* Under the object's lock as the cache wants (objcache.c): the read
 * that wants the object tries again after a failure here.
 */
void
object_read_ahead (uint64_t idx)
{
  pthread_mutex_t *lock = object_lock (idx);
  char *obj;

  if (objcache_has (vol.cache, idx) || (vol.wb && wbuf_has (vol.wb, idx))
      || (obj = malloc (vol.object_size)) == NULL)
    return;
  hhc_lock (lock);
  if (!objcache_has (vol.cache, idx) && !(vol.wb && wbuf_has (vol.wb, idx))
      && object_read (idx, 0, vol.object_size, obj) == 0)
    {
      objcache_put (vol.cache, idx, obj);
      __atomic_fetch_add (&ra_fetched, 1, __ATOMIC_RELAXED);
    }
  hhc_unlock (lock);
  free (obj);
}

uint64_t
object_read_ahead_count (void)
{
  return __atomic_load_n (&ra_fetched, __ATOMIC_RELAXED);
}
