/* cos-backend: a request cut into objects, done in parallel (see
 * span.c).
 */
#ifndef HHC_COS_SPAN_H
#define HHC_COS_SPAN_H

#include <stdbool.h>
#include <stdint.h>

/* Read [OFFSET, OFFSET+COUNT) of the volume into BUF, reading ahead
 * when the read goes on where the last one ended.  Returns -1 with
 * errno set after nbdkit_error.
 */
extern int span_read (void *buf, uint32_t count, uint64_t offset);

/* Write BUF (zeros when NULL) at [OFFSET, OFFSET+COUNT) of the volume;
 * FUA: durable when it returns.  Returns -1 with errno set after
 * nbdkit_error.
 */
extern int span_write (const void *buf, uint32_t count, uint64_t offset,
                       bool fua);

#endif /* HHC_COS_SPAN_H */
