/* Small helpers shared by the core: scope-bound locks and buffers and
 * UUIDs (from common/), a type-safe growable array, logging.
 */
#ifndef HHC_COMMON_H
#define HHC_COMMON_H

#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* By path: every user of the core's headers gets them without a -I. */
#include "../common/cleanup.h"
#include "../common/le.h"
#include "../common/lock.h"
#include "../common/uuid.h"
#include "hhccore.h"

#include "../common/arith.h"

/* Abort on a failed pthread call: a failed lock is a bug, not an
 * error to report.  common/lock.h's hhc_lock_fail under the core's
 * name.  (hhc_lock, hhc_unlock and HHC_SCOPED_LOCK are common/lock.h's,
 * HHC_CLEANUP_FREE common/cleanup.h's.)
 */
static inline void __attribute__ ((noreturn))
hhc_pthread_fail (const char *what, int r)
{
  hhc_lock_fail (what, r);
}

#include "../common/vector.h"

/* Logging through the caller's callback. */
void hhc_msgv (hhc_msg_fn fn, enum hhc_msg_level level, const char *fmt,
               va_list ap);
void hhc_msg (hhc_msg_fn fn, enum hhc_msg_level level, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

/* *ts = now + ms on CLOCK_REALTIME (for pthread_cond_timedwait). */
struct timespec;
void hhc_deadline (struct timespec *ts, unsigned ms);

/* Monotonic time in nanoseconds. */
uint64_t hhc_now_ns (void);

/* Allocate a zeroed buffer aligned to 4096 (for O_DIRECT). */
void *hhc_alloc_aligned (size_t size);

/* Little-endian fields of the on-disk formats: common/le.h's, under
 * the short names the codecs use.
 */
static inline uint32_t
get32 (const void *p)
{
  return le32_load (p);
}

static inline uint64_t
get64 (const void *p)
{
  return le64_load (p);
}

static inline void
put32 (void *p, uint32_t v)
{
  le32_store (p, v);
}

static inline void
put64 (void *p, uint64_t v)
{
  le64_store (p, v);
}

/* A random (version 4) UUID: common/uuid.h's, under the core's name. */
static inline void
hhc_make_uuid (uint8_t uuid[16])
{
  hhc_uuid_generate (uuid);
}

/* "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (common/uuid.h's). */
static inline void
hhc_uuid_str (const uint8_t u[16], char out[37])
{
  hhc_uuid_format (u, out);
}

/* 64-bit mixing hash (for the index). */
static inline uint64_t
hhc_hash64 (uint64_t x)
{
  x ^= x >> 33;
  x *= UINT64_C (0xff51afd7ed558ccd);
  x ^= x >> 33;
  x *= UINT64_C (0xc4ceb9fe1a85ec53);
  x ^= x >> 33;
  return x;
}

#endif /* HHC_COMMON_H */
