/* cos-backend: the open volume and its objects, one at a time (see
 * object.c).  Every function may be called from any thread; the ones
 * that read or write an object take its lock themselves.
 */
#ifndef HHC_COS_OBJECT_H
#define HHC_COS_OBJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wbuf.h"

/* The open volume: filled by open_volume (open.c), read-only after
 * it but for wb, which .cleanup stores, frees and clears once no
 * request can come.  Defined in object.c, below the files that use it.
 */
struct cos_volume {
  struct s3 *s3;
  uint64_t size;          /* bytes */
  uint32_t object_size;   /* bytes */
  char uuid[37];          /* the volume's, from volume.json */
  char *description;      /* the export description */
  struct objcache *cache; /* NULL: object-cache= holds no object */
  struct wbuf *wb;        /* NULL: writeback=0 */
  unsigned ra_objects;    /* readahead in effect (0: off) */
};

extern struct cos_volume vol;

/* .load: initialise the striped object locks. */
extern void object_init (void);

/* The key of object IDX or, with IDX = -1, of volume.json, into
 * KEY[0..N).
 */
extern void object_key (int64_t idx, char *key, size_t n);

/* Read [OFF, OFF+N) of object IDX into BUF: from its dirty copy, the
 * object cache, or the store (a missing object reads as zeros).
 * Returns -1 after nbdkit_error with errno set.
 */
extern int object_read (uint64_t idx, uint32_t off, uint32_t n, void *buf);

/* Write BUF (or zeros when BUF is NULL) at [OFF, OFF+N) of object IDX:
 * into its dirty copy with write-back (FUA: then wait for its store),
 * else straight to the store.  Returns -1 after nbdkit_error.
 */
extern int object_write (uint64_t idx, uint32_t off, uint32_t n,
                         const void *buf, bool fua);

/* Read object IDX into the object cache unless it is there (or dirty)
 * already.  A failure only means no read-ahead.
 */
extern void object_read_ahead (uint64_t idx);

/* Objects read ahead so far (stats). */
extern uint64_t object_read_ahead_count (void);

/* Wait until the dirty objects in [LO, HI] are stored (write-back;
 * nothing without).  Returns -1 with errno EIO after nbdkit_error
 * naming WHAT.
 */
extern int object_sync (uint64_t lo, uint64_t hi, const char *what);

/* What the write-back buffer calls to store an object. */
extern const struct wbuf_ops object_wbuf_ops;

#endif /* HHC_COS_OBJECT_H */
