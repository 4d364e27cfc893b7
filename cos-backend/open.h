/* cos-backend: the open volume, and opening it at .get_ready (see
 * open.c).
 */
#ifndef HHC_COS_OPEN_H
#define HHC_COS_OPEN_H

#include <stdint.h>

#include "wbuf.h"

/* The open volume: filled by open_volume, read-only after it but for
 * wb, which .cleanup stores, frees and clears once no request can
 * come.
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

/* .get_ready: connect to the store, read volume.json (making it with
 * create=true), set up the object cache and the write-back buffer.
 * Returns -1 after nbdkit_error.
 */
extern int open_volume (void);

/* .unload: free everything open_volume set up (wb is gone by then). */
extern void close_volume (void);

#endif /* HHC_COS_OPEN_H */
