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
 */
#include <config.h>

#include <errno.h>
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
      snprintf (msg, len, "check condition: %s, %s (ASC/ASCQ 0x%02x/0x%02x)",
                key_name (task->sense.key), asc_name (task->sense.ascq),
                (task->sense.ascq >> 8) & 0xff, task->sense.ascq & 0xff);
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
