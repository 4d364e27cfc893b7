/* iscsi-backend: I/O on the LUN (io.h).  Requests are split into
 * whole blocks, sent with READ(16)/WRITE(16) in chunks of at most
 * `lun.max_xfer` bytes, and partial edge blocks of a write go through
 * read-modify-write.  Two RMWs of one block must not interleave, so
 * each holds rmw_locks[block % RMW_LOCKS] (one at a time, so no lock
 * order is needed).  Concurrent writes of overlapping whole blocks are
 * not ordered: NBD leaves that undefined.
 *
 * Each command is an issue function for pool_exec (pool.c), which
 * runs it on a session with reconnections and retries.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "cleanup.h"
#include "io.h"
#include "lock.h"
#include "pool.h"

#define RMW_LOCKS 64

struct lun_info lun;

static pthread_mutex_t rmw_locks[RMW_LOCKS];

void
io_init (void)
{
  unsigned i;
  for (i = 0; i < RMW_LOCKS; i++)
    pthread_mutex_init (&rmw_locks[i], NULL);
}

/* ---------------------------------------------------------------- */
/* Commands, each an issue function for pool_exec. */

struct io_arg {
  uint64_t lba;
  uint32_t blocks;
  unsigned char *data; /* write / write same payload */
  bool fua;
  bool may_unmap; /* WRITE SAME: set the UNMAP bit */
  struct unmap_list unmap;
};

/* The blocks are read straight into a->data (no copy, no allocation). */
static struct scsi_task *
issue_read (struct iscsi_context *ctx, int l, void *p, iscsi_command_cb cb,
            void *priv)
{
  struct io_arg *a = p;
  size_t n = (size_t)a->blocks * lun.bs;
  struct scsi_task *t
      = iscsi_read16_task (ctx, l, a->lba, n, lun.bs, 0, 0, 0, 0, 0, cb, priv);
  if (t && scsi_task_add_data_in_buffer (t, n, a->data) != 0)
    {
      iscsi_scsi_cancel_task (ctx, t);
      scsi_free_scsi_task (t);
      return NULL;
    }
  return t;
}

static struct scsi_task *
issue_write (struct iscsi_context *ctx, int l, void *p, iscsi_command_cb cb,
             void *priv)
{
  struct io_arg *a = p;
  return iscsi_write16_task (ctx, l, a->lba, a->data, a->blocks * lun.bs,
                             lun.bs, 0, 0, a->fua, 0, 0, cb, priv);
}

static struct scsi_task *
issue_sync_cache (struct iscsi_context *ctx, int l, void *p,
                  iscsi_command_cb cb, void *priv)
{
  struct io_arg *a = p;
  return iscsi_synchronizecache16_task (ctx, l, a->lba, a->blocks, 0, 0, cb,
                                        priv);
}

static struct scsi_task *
issue_write_same (struct iscsi_context *ctx, int l, void *p,
                  iscsi_command_cb cb, void *priv)
{
  struct io_arg *a = p;
  return iscsi_writesame16_task (ctx, l, a->lba, a->data, lun.bs, a->blocks, 0,
                                 a->may_unmap, 0, 0, cb, priv);
}

static struct scsi_task *
issue_unmap (struct iscsi_context *ctx, int l, void *p, iscsi_command_cb cb,
             void *priv)
{
  struct io_arg *a = p;
  return iscsi_unmap_task (ctx, l, 0, 0, &a->unmap, 1, cb, priv);
}

/* Read BLOCKS blocks at LBA into BUF (chunked). */
static int
read_blocks (uint64_t lba, uint64_t blocks, unsigned char *buf)
{
  uint32_t per = lun.max_xfer / lun.bs;
  while (blocks > 0)
    {
      struct io_arg a
          = { .lba = lba, .blocks = blocks < per ? blocks : per, .data = buf };
      struct scsi_task *t;
      size_t n = (size_t)a.blocks * lun.bs;
      if (pool_exec ("READ(16)", POOL_OTHER, issue_read, &a, &t) == -1)
        return -1;
      if (t->residual_status == SCSI_RESIDUAL_UNDERFLOW && t->residual > 0)
        {
          nbdkit_error ("READ(16): short read (%zu of %zu bytes)",
                        n - (t->residual < n ? t->residual : n), n);
          scsi_free_scsi_task (t);
          errno = EIO;
          return -1;
        }
      scsi_free_scsi_task (t);
      lba += a.blocks;
      blocks -= a.blocks;
      buf += n;
    }
  return 0;
}

/* Write BLOCKS blocks from BUF at LBA (chunked). */
static int
write_blocks (uint64_t lba, uint64_t blocks, const unsigned char *buf, bool fua)
{
  uint32_t per = lun.max_xfer / lun.bs;
  while (blocks > 0)
    {
      struct io_arg a = { .lba = lba,
                          .blocks = blocks < per ? blocks : per,
                          .data = (unsigned char *)buf,
                          .fua = fua };
      struct scsi_task *t;
      if (pool_exec ("WRITE(16)", fua ? POOL_WRITE_FUA : POOL_WRITE,
                     issue_write, &a, &t)
          == -1)
        return -1;
      scsi_free_scsi_task (t);
      lba += a.blocks;
      blocks -= a.blocks;
      buf += (size_t)a.blocks * lun.bs;
    }
  return 0;
}

/* Replace LEN bytes at offset IN of block LBA with BUF. */
static int
rmw_block (uint64_t lba, uint32_t in, uint32_t len, const void *buf, bool fua)
{
  HHC_CLEANUP_FREE unsigned char *blk = malloc (lun.bs);
  if (blk == NULL)
    {
      nbdkit_error ("malloc: %m");
      return -1;
    }
  HHC_SCOPED_LOCK (&rmw_locks[lba % RMW_LOCKS]);
  if (read_blocks (lba, 1, blk) == -1)
    return -1;
  if (buf)
    memcpy (blk + in, buf, len);
  else
    memset (blk + in, 0, len);
  return write_blocks (lba, 1, blk, fua);
}

/* ---------------------------------------------------------------- */
/* Byte ranges and whole blocks (io.h). */

int
io_pread (void *buf, uint32_t count, uint64_t offset)
{
  uint64_t first = offset / lun.bs;
  uint64_t end = (offset + count + lun.bs - 1) / lun.bs;
  HHC_CLEANUP_FREE unsigned char *bounce = NULL;

  if (offset % lun.bs == 0 && count % lun.bs == 0)
    return read_blocks (first, count / lun.bs, buf);
  bounce = malloc ((end - first) * lun.bs);
  if (bounce == NULL)
    {
      nbdkit_error ("malloc: %m");
      return -1;
    }
  if (read_blocks (first, end - first, bounce) == -1)
    return -1;
  memcpy (buf, bounce + offset % lun.bs, count);
  return 0;
}

int
io_pwrite (const void *data, uint64_t count, uint64_t offset, bool fua)
{
  const unsigned char *buf = data;
  HHC_CLEANUP_FREE unsigned char *zeroes = NULL;
  while (count > 0)
    {
      uint64_t lba = offset / lun.bs;
      uint32_t in = offset % lun.bs;
      uint64_t n;
      int r;
      if (in != 0 || count < lun.bs)
        {
          n = lun.bs - in < count ? lun.bs - in : count;
          r = rmw_block (lba, in, n, buf, fua);
        }
      else
        {
          n = count - count % lun.bs;
          if (buf == NULL)
            {
              if (n > MAX_CHUNK)
                n = MAX_CHUNK;
              if (zeroes == NULL && (zeroes = calloc (1, MAX_CHUNK)) == NULL)
                {
                  nbdkit_error ("calloc: %m");
                  return -1;
                }
            }
          r = write_blocks (lba, n / lun.bs, buf ? buf : zeroes, fua);
        }
      if (r == -1)
        return -1;
      count -= n;
      offset += n;
      if (buf)
        buf += n;
    }
  return 0;
}

int
io_sync (uint64_t lba, uint64_t blocks)
{
  struct io_arg a = { .lba = lba, .blocks = blocks > UINT32_MAX ? 0 : blocks };
  enum pool_kind k = lba == 0 && a.blocks == 0 ? POOL_SYNC : POOL_OTHER;
  struct scsi_task *t;
  if (pool_exec ("SYNCHRONIZE CACHE(16)", k, issue_sync_cache, &a, &t) == -1)
    return -1;
  scsi_free_scsi_task (t);
  return 0;
}

int
io_write_same_zero (uint64_t lba, uint64_t blocks, bool may_unmap)
{
  HHC_CLEANUP_FREE unsigned char *zero = calloc (1, lun.bs);
  uint64_t per = lun.max_ws ? lun.max_ws : 65536;
  if (zero == NULL)
    {
      nbdkit_error ("calloc: %m");
      return -1;
    }
  while (blocks > 0)
    {
      struct io_arg a = { .lba = lba,
                          .blocks = blocks < per ? blocks : per,
                          .data = zero,
                          .may_unmap = may_unmap };
      struct scsi_task *t;
      if (pool_exec ("WRITE SAME(16)", POOL_WRITE, issue_write_same, &a, &t)
          == -1)
        return -1;
      scsi_free_scsi_task (t);
      lba += a.blocks;
      blocks -= a.blocks;
    }
  return 0;
}

int
io_unmap (uint64_t lba, uint64_t end)
{
  uint64_t per = lun.max_unmap ? lun.max_unmap : UINT32_MAX;

  while (lba < end)
    {
      struct io_arg a = { .unmap = { .lba = lba } };
      struct scsi_task *t;
      a.unmap.num = end - lba < per ? end - lba : per;
      if (pool_exec ("UNMAP", POOL_WRITE, issue_unmap, &a, &t) == -1)
        return -1;
      scsi_free_scsi_task (t);
      lba += a.unmap.num;
    }
  return 0;
}
