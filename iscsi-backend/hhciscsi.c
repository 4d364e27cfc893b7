/* nbdkit-hhciscsi-plugin: one iSCSI LUN, reached with libiscsi.
 *
 * Files: hhciscsi.c (the nbdkit callbacks), config.c (parameters),
 * probe.c (geometry and identity, once after logging in), io.c (block
 * I/O: chunks, read-modify-write, WRITE SAME, UNMAP, SYNCHRONIZE
 * CACHE), pool.c (choosing a session, reconnect and retry), session.c
 * (one session: login, issuing, reading the replies), lu.c (what a
 * reset of the LU may have lost), sense.c (status and sense data ->
 * action and errno).  Calls go one way only, down this list.
 *
 * Geometry and capabilities are read once, in .after_fork, after the
 * pool has logged in (nbdkit forks before that; a failure there stops
 * the server with one error line).  After that `lun` is read-only.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "config.h"
#include "io.h"
#include "pool.h"
#include "probe.h"

static void
hhciscsi_load (void)
{
  io_init ();
}

static void
hhciscsi_unload (void)
{
  config_free ();
  free (lun.identity);
}

static int
hhciscsi_config (const char *key, const char *value)
{
  return config_set (key, value);
}

static int
hhciscsi_config_complete (void)
{
  return config_complete ();
}

static int
hhciscsi_after_fork (void)
{
  if (pool_start (&conf) == -1 || probe_lun (&conf) == -1)
    return -1;
  nbdkit_debug ("hhciscsi: %s: %" PRIu64 " blocks of %" PRIu32
                " bytes, unmap=%d write-same=%d, identity %s",
                conf.target, lun.blocks, lun.bs, lun.lbpu, lun.lbpws,
                lun.identity);
  return 0;
}

static void
hhciscsi_cleanup (void)
{
  pool_stop ();
}

/* ---------------------------------------------------------------- */
/* nbdkit callbacks. */

static void *
hhciscsi_open (int readonly)
{
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static int64_t
hhciscsi_get_size (void *h)
{
  return (int64_t)(lun.blocks * lun.bs);
}

static const char *
hhciscsi_export_description (void *h)
{
  return lun.identity;
}

static int
hhciscsi_block_size (void *h, uint32_t *minimum, uint32_t *preferred,
                     uint32_t *maximum)
{
  *minimum = lun.bs;
  *preferred = lun.opt_gran;
  *maximum = 0xffffffff;
  return 0;
}

static int
hhciscsi_can_multi_conn (void *h)
{
  return 1; /* SYNCHRONIZE CACHE covers every session's writes */
}

static int
hhciscsi_can_flush (void *h)
{
  return 1;
}

static int
hhciscsi_can_fua (void *h)
{
  return NBDKIT_FUA_NATIVE;
}

static int
hhciscsi_can_trim (void *h)
{
  return lun.lbpu;
}

static int
hhciscsi_can_zero (void *h)
{
  return lun.lbpws; /* else nbdkit writes zeroes with .pwrite */
}

static int
hhciscsi_can_fast_zero (void *h)
{
  return lun.lbpws;
}

static int
hhciscsi_pread (void *h, void *buf, uint32_t count, uint64_t offset,
                uint32_t flags)
{
  return io_pread (buf, count, offset);
}

static int
hhciscsi_pwrite (void *h, const void *buf, uint32_t count, uint64_t offset,
                 uint32_t flags)
{
  return io_pwrite (buf, count, offset, flags & NBDKIT_FLAG_FUA);
}

/* After a reset that may have dropped writes from the target's cache
 * (pool_writes_lost) no flush can succeed: the plugin does not keep
 * what it wrote, so it cannot write it again.  The SYNCHRONIZE CACHE
 * is still sent, for what the LU does hold.
 */
static int
hhciscsi_flush (void *h, uint32_t flags)
{
  if (io_sync (0, 0) == -1)
    return -1;
  if (pool_writes_lost ())
    {
      nbdkit_debug ("flush: fails: a reset may have lost writes (see the"
                    " error above)");
      errno = EIO;
      return -1;
    }
  return 0;
}

static int
hhciscsi_zero (void *h, uint32_t count, uint64_t offset, uint32_t flags)
{
  uint64_t first = (offset + lun.bs - 1) / lun.bs;
  uint64_t end = (offset + count) / lun.bs;
  bool fua = flags & NBDKIT_FLAG_FUA;
  bool may_unmap = (flags & NBDKIT_FLAG_MAY_TRIM) && lun.lbpu && lun.lbprz;

  if (end <= first)
    return io_pwrite (NULL, count, offset, fua);
  if (io_pwrite (NULL, first * lun.bs - offset, offset, fua) == -1
      || io_pwrite (NULL, offset + count - end * lun.bs, end * lun.bs, fua)
             == -1
      || io_write_same_zero (first, end - first, may_unmap) == -1)
    return -1;
  return fua ? io_sync (first, end - first) : 0;
}

static int
hhciscsi_trim (void *h, uint32_t count, uint64_t offset, uint32_t flags)
{
  uint64_t first = (offset + lun.bs - 1) / lun.bs;
  uint64_t end = (offset + count) / lun.bs;

  if (io_unmap (first, end) == -1)
    return -1;
  if ((flags & NBDKIT_FLAG_FUA) && end > first)
    return io_sync (first, end - first);
  return 0;
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name = "hhciscsi",
  .longname = "hhc-gateway iSCSI LUN plugin (libiscsi)",
  .version = PACKAGE_VERSION,
  .load = hhciscsi_load,
  .unload = hhciscsi_unload,
  .config = hhciscsi_config,
  .config_complete = hhciscsi_config_complete,
  .config_help = ISCSI_CONFIG_HELP,
  .magic_config_key = "url",
  .after_fork = hhciscsi_after_fork,
  .cleanup = hhciscsi_cleanup,
  .open = hhciscsi_open,
  .get_size = hhciscsi_get_size,
  .export_description = hhciscsi_export_description,
  .block_size = hhciscsi_block_size,
  .can_multi_conn = hhciscsi_can_multi_conn,
  .can_flush = hhciscsi_can_flush,
  .can_fua = hhciscsi_can_fua,
  .can_trim = hhciscsi_can_trim,
  .can_zero = hhciscsi_can_zero,
  .can_fast_zero = hhciscsi_can_fast_zero,
  .pread = hhciscsi_pread,
  .pwrite = hhciscsi_pwrite,
  .flush = hhciscsi_flush,
  .zero = hhciscsi_zero,
  .trim = hhciscsi_trim,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
