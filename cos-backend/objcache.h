/* cos-backend: a small write-through cache of whole objects (see
 * objcache.c).
 */
#ifndef HHC_COS_OBJCACHE_H
#define HHC_COS_OBJCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct objcache;

/* A cache of at most CAPACITY objects of OBJECT_SIZE bytes.  NULL when
 * CAPACITY is 0 (every function accepts a NULL cache and does nothing)
 * or on allocation failure (errno set).
 */
extern struct objcache *objcache_new (size_t capacity, uint32_t object_size);
extern void objcache_free (struct objcache *c);

/* Copy bytes [OFF, OFF+N) of object IDX into BUF if the object is
 * cached; returns true then.
 */
extern bool objcache_read (struct objcache *c, uint64_t idx, uint32_t off,
                           uint32_t n, void *buf);

/* Is object IDX cached?  (No hit or miss is counted.) */
extern bool objcache_has (struct objcache *c, uint64_t idx);

/* Object IDX now holds DATA (object_size bytes, copied) in the store.
 * The caller holds the object's lock and has just read or written it.
 */
extern void objcache_put (struct objcache *c, uint64_t idx, const void *data);

/* Forget object IDX (its content in the store is unknown). */
extern void objcache_drop (struct objcache *c, uint64_t idx);

extern void objcache_stats (struct objcache *c, uint64_t *hits,
                            uint64_t *misses);

#endif /* HHC_COS_OBJCACHE_H */
