/* Decoding of SCSI status and sense data, and the one mapping from a
 * check condition to an action and an errno.
 *
 * Mapping (sense key -> action, errno):
 *
 *   UNIT ATTENTION      retry            EIO (after the bound)
 *   NOT READY           retry            EIO (after the bound)
 *   ABORTED COMMAND     retry            EIO (after the bound)
 *   RECOVERED ERROR     success
 *   MEDIUM ERROR        fail             EIO
 *   HARDWARE ERROR      fail             EIO
 *   ILLEGAL REQUEST     fail             EINVAL
 *   DATA PROTECT        fail             EROFS (ENOSPC when thin
 *                                        provisioning ran out of space)
 *   anything else       fail             EIO
 *
 * Status BUSY / TASK SET FULL is retried; a transport error, a
 * cancelled or timed-out task or no task at all means the session is
 * broken: reconnect and retry.
 *
 * Resets (sense_is_reset).  A UNIT ATTENTION is retried, but one with
 * ASC 29h may also say that the logical unit lost its volatile write
 * cache: lu.c then decides whether writes were lost.  Which ones:
 *
 *   ASC/ASCQ  name                                   cache may be gone
 *   29h/00h   power on, reset, or bus device reset   yes
 *   29h/01h   power on occurred                      yes
 *   29h/02h   SCSI bus reset occurred                yes
 *   29h/03h   bus device reset function occurred     yes (LU reset)
 *   29h/04h   device internal reset                  yes
 *   29h/05h   transceiver mode changed (SE)          no: physical layer
 *   29h/06h   transceiver mode changed (LVD)         no: physical layer
 *   29h/07h   I_T nexus loss occurred                no
 *   29h/other (none in SPC-5; vendor)                yes, to be safe
 *
 * The cache belongs to the logical unit, not to an I_T nexus: a nexus
 * loss (a dropped connection, a session reinstated) ends that nexus'
 * tasks and reservations, but the writes the LU has completed stay
 * in its cache.  A power on, a hard reset and a LOGICAL UNIT RESET
 * reset the LU itself, and SAM lets them drop what it had not written
 * to the medium; 29h/00h does not say which reset it was.
 *
 * What tgtd 1.0.85 reports, measured with libiscsi: 29h/00h on the
 * first command after every login (a new I_T nexus) and on every
 * nexus after a LOGICAL UNIT RESET (the sender's included); NOT READY
 * 04h/01h while a LU is offline (tgtadm --params online=0) and nothing
 * when it comes back; nothing for the target State offline/ready;
 * TARGET WARM/COLD RESET are refused ("function not supported").  The
 * 29h/00h of a new nexus is no reset, and the plugin never sees it:
 * libiscsi's login (iscsi_full_connect_sync) consumes it with TEST
 * UNIT READY.  So a 29h seen on a command was established after its
 * session logged in.
 */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>

#include "sense.h"

const char *
sense_action_to_string (enum sense_action a)
{
  switch (a)
    {
    case SENSE_OK:
      return "ok";
    case SENSE_RETRY:
      return "retry";
    case SENSE_RECONNECT:
      return "reconnect";
    case SENSE_FAIL:
      return "fail";
    }
  return "unknown";
}

static const char *
key_name (int key)
{
  static const char *const names[] = {
    "NO SENSE",       "RECOVERED ERROR", "NOT READY",      "MEDIUM ERROR",
    "HARDWARE ERROR", "ILLEGAL REQUEST", "UNIT ATTENTION", "DATA PROTECT",
    "BLANK CHECK",    "VENDOR SPECIFIC", "COPY ABORTED",   "ABORTED COMMAND",
    "OBSOLETE",       "VOLUME OVERFLOW", "MISCOMPARE",
  };
  if (key >= 0 && key < (int)(sizeof names / sizeof names[0]))
    return names[key];
  return "UNKNOWN SENSE KEY";
}

/* ASC << 8 | ASCQ of the conditions met in practice. */
static const struct {
  int code;
  const char *name;
} asc_names[] = {
  { 0x0000, "no additional sense information" },
  { 0x0401, "logical unit is in process of becoming ready" },
  { 0x0402, "initializing command required" },
  { 0x0403, "manual intervention required" },
  { 0x0404, "format in progress" },
  { 0x0c00, "write error" },
  { 0x1100, "unrecovered read error" },
  { 0x2000, "invalid command operation code" },
  { 0x2100, "logical block address out of range" },
  { 0x2400, "invalid field in CDB" },
  { 0x2500, "logical unit not supported" },
  { 0x2600, "invalid field in parameter list" },
  { 0x2700, "write protected" },
  { 0x2707, "space allocation failed write protect" },
  { 0x2800, "not ready to ready change, medium may have changed" },
  { 0x2900, "power on, reset, or bus device reset occurred" },
  { 0x2901, "power on occurred" },
  { 0x2902, "SCSI bus reset occurred" },
  { 0x2903, "bus device reset function occurred" },
  { 0x2904, "device internal reset" },
  { 0x2907, "I_T nexus loss occurred" },
  { 0x2a01, "mode parameters changed" },
  { 0x2a09, "capacity data has changed" },
  { 0x3a00, "medium not present" },
  { 0x3f0e, "reported luns data has changed" },
  { 0x4700, "SCSI parity error" },
  { 0x4b00, "data phase error" },
};

static const char *
asc_name (int code)
{
  size_t i;
  for (i = 0; i < sizeof asc_names / sizeof asc_names[0]; i++)
    if (asc_names[i].code == code)
      return asc_names[i].name;
  return "unlisted condition";
}

static enum sense_action
check_condition (const struct scsi_sense *s, int *err)
{
  switch ((int)s->key)
    {
    case SCSI_SENSE_RECOVERED_ERROR:
      return SENSE_OK;
    case SCSI_SENSE_UNIT_ATTENTION:
    case SCSI_SENSE_NOT_READY:
    case SCSI_SENSE_COMMAND_ABORTED:
      *err = EIO;
      return SENSE_RETRY;
    case SCSI_SENSE_ILLEGAL_REQUEST:
      *err = EINVAL;
      return SENSE_FAIL;
    case SCSI_SENSE_DATA_PROTECTION:
      *err = s->ascq == 0x2707 ? ENOSPC : EROFS;
      return SENSE_FAIL;
    default:
      *err = EIO;
      return SENSE_FAIL;
    }
}

enum sense_action
sense_classify (struct iscsi_context *ctx, struct scsi_task *task, char *msg,
                size_t len, int *err)
{
  *err = EIO;
  if (task == NULL)
    {
      snprintf (msg, len, "connection failed: %s", iscsi_get_error (ctx));
      return SENSE_RECONNECT;
    }
  switch (task->status)
    {
    case SCSI_STATUS_GOOD:
    case SCSI_STATUS_CONDITION_MET:
      return SENSE_OK;
    case SCSI_STATUS_CHECK_CONDITION:
      {
        char d[160];
        sense_describe (task, d, sizeof d);
        snprintf (msg, len, "check condition: %s", d);
      }
      return check_condition (&task->sense, err);
    case SCSI_STATUS_BUSY:
    case SCSI_STATUS_TASK_SET_FULL:
      snprintf (msg, len, "target busy (SCSI status 0x%x)", task->status);
      return SENSE_RETRY;
    case SCSI_STATUS_ERROR:
    case SCSI_STATUS_CANCELLED:
    case SCSI_STATUS_TIMEOUT:
      snprintf (msg, len, "%s: %s",
                task->status == SCSI_STATUS_TIMEOUT ? "timed out"
                                                    : "transport error",
                iscsi_get_error (ctx));
      return SENSE_RECONNECT;
    default:
      snprintf (msg, len, "SCSI status 0x%x", task->status);
      return SENSE_FAIL;
    }
}

void
sense_describe (const struct scsi_task *task, char *msg, size_t len)
{
  snprintf (msg, len, "%s, %s (ASC/ASCQ 0x%02x/0x%02x)",
            key_name (task->sense.key), asc_name (task->sense.ascq),
            (task->sense.ascq >> 8) & 0xff, task->sense.ascq & 0xff);
}

static bool
is_check (int status, const struct scsi_task *task, int key)
{
  return status == SCSI_STATUS_CHECK_CONDITION && task != NULL
         && (int)task->sense.key == key;
}

bool
sense_is_reset (int status, const struct scsi_task *task)
{
  int ascq;

  if (!is_check (status, task, SCSI_SENSE_UNIT_ATTENTION)
      || (task->sense.ascq >> 8) != 0x29)
    return false;
  ascq = task->sense.ascq & 0xff;
  return ascq != 0x05 && ascq != 0x06 && ascq != 0x07;
}

bool
sense_refused (int status, const struct scsi_task *task)
{
  switch (status)
    {
    case SCSI_STATUS_BUSY:
    case SCSI_STATUS_TASK_SET_FULL:
    case SCSI_STATUS_RESERVATION_CONFLICT:
      return true;
    default:
      return is_check (status, task, SCSI_SENSE_UNIT_ATTENTION)
             || is_check (status, task, SCSI_SENSE_NOT_READY);
    }
}
