/* cos-backend: the write-back buffer of dirty objects (see wbuf.c). */
#ifndef HHC_COS_WBUF_H
#define HHC_COS_WBUF_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct wbuf;

struct wbuf_ops {
  /* Store DATA (object_size bytes) as object IDX: PUT, or DELETE when
   * it is all zeros.  Returns 0, or -1 with the error reported.
   */
  int (*store) (uint64_t idx, const void *data);
  /* The lock that serialises writers of object IDX (object.c's
   * stripes).
   */
  pthread_mutex_t *(*lock) (uint64_t idx);
  /* Called with lock (IDX) and the buffer's mutex held after a store
   * of DATA ended, before the entry goes: OK says whether the store now
   * holds DATA (object.c keeps its object cache).
   */
  void (*stored) (uint64_t idx, const void *data, bool ok);
};

struct wbuf_stats {
  uint64_t stores;   /* objects stored by the write-back threads */
  uint64_t merged;   /* writes into an object that was dirty already */
  uint64_t failures; /* stores that failed (the object stays dirty) */
  uint64_t waits;    /* writes that waited for room */
};

/* At most MAX dirty objects of OBJECT_SIZE bytes, stored by up to
 * NTHREADS threads (started at the first write).  NULL (errno set) on
 * allocation failure.
 */
extern struct wbuf *wbuf_new (const struct wbuf_ops *ops, size_t max,
                              uint32_t object_size, unsigned nthreads);
/* Stop the threads and drop what is still dirty (wbuf_sync first). */
extern void wbuf_free (struct wbuf *w);

/* A writer of object IDX:
 *
 *   lock (IDX)
 *   if (!wbuf_patch (w, IDX, off, n, buf))
 *     unlock (IDX)
 *     wbuf_reserve (w)                    (never under an object lock)
 *     lock (IDX)
 *     if (wbuf_patch (...)) wbuf_unreserve (w)   (dirtied meanwhile)
 *     else read the object, patch it, wbuf_add (w, IDX, obj)
 *          (or wbuf_unreserve (w) if there is nothing to write)
 *   unlock (IDX)
 *
 * wbuf_patch copies BUF (NULL: zeros) to [OFF, OFF+N) of IDX if IDX is
 * dirty, and returns true then; it needs no room.  wbuf_reserve waits
 * for room for one more dirty object; it fails (-1, errno EIO) only
 * when every dirty object failed to be stored, and failed again when
 * retried once.  wbuf_add takes OBJ (object_size bytes, malloc'd) as
 * the new dirty content of IDX and uses up the reservation; it fails
 * (-1, errno set, OBJ not taken, reservation given back) only if it is
 * out of memory or threads, and the caller then stores the object
 * itself.
 */
extern int wbuf_reserve (struct wbuf *w);
extern void wbuf_unreserve (struct wbuf *w);
/* Would wbuf_reserve wait now (or fail)? */
extern bool wbuf_full (struct wbuf *w);
extern bool wbuf_patch (struct wbuf *w, uint64_t idx, uint32_t off, uint32_t n,
                        const void *buf);
extern int wbuf_add (struct wbuf *w, uint64_t idx, char *obj);

/* Copy bytes [OFF, OFF+N) of object IDX into BUF if it is dirty;
 * returns true then.
 */
extern bool wbuf_read (struct wbuf *w, uint64_t idx, uint32_t off, uint32_t n,
                       void *buf);
extern bool wbuf_has (struct wbuf *w, uint64_t idx);
/* Set DIRTY[i - LO] for each dirty object i in [LO, HI]. */
extern void wbuf_dirty_set (struct wbuf *w, uint64_t lo, uint64_t hi,
                            bool *dirty);

/* Wait until every object in [LO, HI] that was dirty when called has
 * been stored.  Objects whose store had failed are tried once more.
 * Returns 0, or -1 with errno EIO if one of them could not be stored
 * (it stays dirty: a later sync tries again).
 */
extern int wbuf_sync (struct wbuf *w, uint64_t lo, uint64_t hi);

extern size_t wbuf_dirty (struct wbuf *w);
extern void wbuf_get_stats (struct wbuf *w, struct wbuf_stats *st);

#endif /* HHC_COS_WBUF_H */
