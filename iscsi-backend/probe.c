/* iscsi-backend: the LUN's geometry, limits and identity (probe.h),
 * read once in .after_fork after the pool has logged in (nbdkit forks
 * before that; a failure here stops the server with one error line).
 * It fills io.h's `lun`, which is read-only after.
 */
#include <config.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "io.h"
#include "pool.h"
#include "probe.h"

static struct scsi_task *
issue_capacity (struct iscsi_context *ctx, int l, void *p, iscsi_command_cb cb,
                void *priv)
{
  return iscsi_readcapacity16_task (ctx, l, cb, priv);
}

static struct scsi_task *
issue_vpd (struct iscsi_context *ctx, int l, void *p, iscsi_command_cb cb,
           void *priv)
{
  return iscsi_inquiry_task (ctx, l, 1, *(int *)p, 255, cb, priv);
}

/* Run INQUIRY for VPD page PAGE; NULL (logged at debug level) if the
 * LUN does not have it.
 */
static struct scsi_task *
vpd (int page)
{
  struct scsi_task *t;
  if (pool_exec ("INQUIRY", POOL_OTHER, issue_vpd, &page, &t) == -1)
    return NULL;
  if (scsi_datain_unmarshall (t) == NULL)
    {
      nbdkit_debug ("VPD page 0x%02x: cannot decode it", page);
      scsi_free_scsi_task (t);
      return NULL;
    }
  return t;
}

static int
probe_capacity (void)
{
  struct scsi_task *t;
  struct scsi_readcapacity16 *rc;

  if (pool_exec ("READ CAPACITY(16)", POOL_OTHER, issue_capacity, NULL, &t)
      == -1)
    return -1;
  rc = scsi_datain_unmarshall (t);
  if (rc == NULL)
    {
      nbdkit_error ("READ CAPACITY(16): cannot decode the reply");
      scsi_free_scsi_task (t);
      return -1;
    }
  lun.bs = rc->block_length;
  lun.blocks = rc->returned_lba + 1;
  lun.lbprz = rc->lbprz;
  scsi_free_scsi_task (t);
  if (lun.bs < 512 || lun.bs > 65536 || (lun.bs & (lun.bs - 1)) != 0)
    {
      nbdkit_error ("the LUN's block size %" PRIu32 " is not supported",
                    lun.bs);
      return -1;
    }
  return 0;
}

static void
probe_limits (void)
{
  struct scsi_task *t;

  lun.max_xfer = MAX_CHUNK;
  lun.opt_gran = lun.bs;
  if ((t = vpd (SCSI_INQUIRY_PAGECODE_BLOCK_LIMITS)) != NULL)
    {
      struct scsi_inquiry_block_limits *bl = scsi_datain_unmarshall (t);
      uint64_t max = (uint64_t)bl->max_xfer_len * lun.bs;
      uint64_t gran = (uint64_t)bl->opt_gran * lun.bs;
      if (max >= lun.bs && max < lun.max_xfer)
        lun.max_xfer = max - max % lun.bs;
      if (gran > lun.bs && gran <= (32u << 20) && (gran & (gran - 1)) == 0)
        lun.opt_gran = gran;
      lun.max_unmap = bl->max_unmap == 0xffffffff ? 0 : bl->max_unmap;
      lun.max_ws = bl->max_ws_len;
      scsi_free_scsi_task (t);
    }
  if ((t = vpd (SCSI_INQUIRY_PAGECODE_LOGICAL_BLOCK_PROVISIONING)) != NULL)
    {
      struct scsi_inquiry_logical_block_provisioning *lbp
          = scsi_datain_unmarshall (t);
      lun.lbpu = lbp->lbpu;
      lun.lbpws = lbp->lbpws;
      scsi_free_scsi_task (t);
    }
}

/* "naa.HEX" or "eui.HEX" from VPD 0x83, plus " serial=..." from 0x80;
 * else C's target and LUN.
 */
static int
probe_identity (const struct pool_conf *c)
{
  char id[160] = "";
  struct scsi_task *t;

  if ((t = vpd (SCSI_INQUIRY_PAGECODE_DEVICE_IDENTIFICATION)) != NULL)
    {
      struct scsi_inquiry_device_identification *di
          = scsi_datain_unmarshall (t);
      struct scsi_inquiry_device_designator *d;
      for (d = di->designators; d && id[0] == '\0'; d = d->next)
        {
          size_t i, o;
          if (d->designator_type != SCSI_DESIGNATOR_TYPE_NAA
              && d->designator_type != SCSI_DESIGNATOR_TYPE_EUI_64)
            continue;
          o = snprintf (id, sizeof id, "%s.",
                        d->designator_type == SCSI_DESIGNATOR_TYPE_NAA ? "naa"
                                                                       : "eui");
          for (i = 0; i < (size_t)d->designator_length && o + 3 < 64; i++)
            o += snprintf (id + o, sizeof id - o, "%02x",
                           (unsigned char)d->designator[i]);
        }
      scsi_free_scsi_task (t);
    }
  if ((t = vpd (SCSI_INQUIRY_PAGECODE_UNIT_SERIAL_NUMBER)) != NULL)
    {
      struct scsi_inquiry_unit_serial_number *sn = scsi_datain_unmarshall (t);
      size_t o = strlen (id);
      const char *u = sn->usn ? sn->usn : "";
      while (*u == ' ') /* SPC pads the serial with leading spaces */
        u++;
      if (*u)
        snprintf (id + o, sizeof id - o, "%sserial=%.64s", o ? " " : "", u);
      scsi_free_scsi_task (t);
    }
  if (id[0] == '\0')
    snprintf (id, sizeof id, "%.100s/%d", c->target, c->lun);
  lun.identity = strdup (id);
  if (lun.identity == NULL)
    {
      nbdkit_error ("strdup: %m");
      return -1;
    }
  return 0;
}

int
probe_lun (const struct pool_conf *c)
{
  if (probe_capacity () == -1)
    return -1;
  probe_limits ();
  return probe_identity (c);
}
