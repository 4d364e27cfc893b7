/* cos-backend: opening the volume at .get_ready, closing it at
 * .unload (see open.c; the volume itself is in object.h).
 */
#ifndef HHC_COS_OPEN_H
#define HHC_COS_OPEN_H

/* .get_ready: connect to the store, read volume.json (making it with
 * create=true), set up the object cache and the write-back buffer.
 * Returns -1 after nbdkit_error.
 */
extern int open_volume (void);

/* .unload: free everything open_volume set up (wb is gone by then). */
extern void close_volume (void);

#endif /* HHC_COS_OPEN_H */
