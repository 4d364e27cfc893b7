/* The core's backend ops over nbdkit_next.  The core passes the
 * context per call: a connection's next for client requests, the
 * background context for write-back.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <nbdkit-filter.h>

#include "lock.h"
#include "next-backend.h"

bool next_backend_serialize;
/* Held across each call to the plugin when serialising. */
static pthread_mutex_t serial_lock = PTHREAD_MUTEX_INITIALIZER;

void
next_backend_lock (void)
{
  if (next_backend_serialize)
    hhc_lock (&serial_lock);
}

void
next_backend_unlock (void)
{
  if (next_backend_serialize)
    hhc_unlock (&serial_lock);
}

static int
nb_pread (void *ctx, void *buf, uint32_t count, uint64_t offset)
{
  HHC_SCOPED_LOCK_IF (next_backend_serialize, &serial_lock);
  nbdkit_next *next = ctx;
  int err = 0;

  if (next->pread (next, buf, count, offset, 0, &err) == -1)
    return err ? err : EIO;
  return 0;
}

static int
nb_pwrite (void *ctx, const void *buf, uint32_t count, uint64_t offset,
           bool fua)
{
  HHC_SCOPED_LOCK_IF (next_backend_serialize, &serial_lock);
  nbdkit_next *next = ctx;
  uint32_t flags = 0;
  int err = 0;

  if (fua && next->can_fua (next) == NBDKIT_FUA_NATIVE)
    flags = NBDKIT_FLAG_FUA;
  if (next->pwrite (next, buf, count, offset, flags, &err) == -1)
    return err ? err : EIO;
  if (fua && flags == 0 && next->can_flush (next) == 1
      && next->flush (next, 0, &err) == -1)
    return err ? err : EIO;
  return 0;
}

static int
nb_flush (void *ctx)
{
  HHC_SCOPED_LOCK_IF (next_backend_serialize, &serial_lock);
  nbdkit_next *next = ctx;
  int err = 0;

  if (next->can_flush (next) != 1)
    return 0;
  if (next->flush (next, 0, &err) == -1)
    return err ? err : EIO;
  return 0;
}

static int
nb_trim (void *ctx, uint32_t count, uint64_t offset)
{
  HHC_SCOPED_LOCK_IF (next_backend_serialize, &serial_lock);
  nbdkit_next *next = ctx;
  int err = 0;

  if (next->can_trim (next) != 1)
    return 0;
  if (next->trim (next, count, offset, 0, &err) == -1)
    return err ? err : EIO;
  return 0;
}

static int
nb_zero (void *ctx, uint32_t count, uint64_t offset)
{
  HHC_SCOPED_LOCK_IF (next_backend_serialize, &serial_lock);
  nbdkit_next *next = ctx;
  int err = 0;

  if (next->zero (next, count, offset, NBDKIT_FLAG_MAY_TRIM, &err) == -1)
    return err ? err : EIO;
  return 0;
}

const struct hhc_backend_ops next_backend_ops = {
  .pread = nb_pread,
  .pwrite = nb_pwrite,
  .flush = nb_flush,
  .trim = nb_trim,
  .zero = nb_zero,
};

int
next_backend_probe (nbdkit_next *next, struct hhc_backend_info *info)
{
  uint32_t minimum = 0, preferred = 0, maximum = 0;
  int64_t size;

  if (next->prepare (next) == -1)
    return -1;
  size = next->get_size (next);
  if (size == -1)
    return -1;
  if (next->can_write (next) == -1 || next->can_flush (next) == -1
      || next->can_fua (next) == -1 || next->can_cache (next) == -1
      || next->can_multi_conn (next) == -1 || next->can_extents (next) == -1
      || next->can_fast_zero (next) == -1 || next->is_rotational (next) == -1)
    return -1;
  info->can_trim = next->can_trim (next) == 1;
  info->can_zero = next->can_zero (next) > 0;
  info->can_fua = next->can_fua (next) != NBDKIT_FUA_NONE;
  info->multi_conn = next->can_multi_conn (next) == 1;
  if (next->block_size (next, &minimum, &preferred, &maximum) == -1)
    return -1;
  info->size = size;
  info->preferred_block = preferred;
  info->max_request = maximum == 0xffffffff ? 0 : maximum;
  info->identity = next->export_description (next);
  return 0;
}
