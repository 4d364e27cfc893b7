/* cos-backend: which objects exist, for .extents (see extents.c). */
#ifndef HHC_COS_EXTENTS_H
#define HHC_COS_EXTENTS_H

#include <stdint.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

/* Add the extents of [OFFSET, OFFSET+COUNT) (or of a first part of it)
 * to EXTENTS: objects in the listing or dirty are data, the others
 * holes.  Returns -1 with errno set after nbdkit_error.
 */
extern int extents_list (uint32_t count, uint64_t offset,
                         struct nbdkit_extents *extents);

#endif /* HHC_COS_EXTENTS_H */
