/* Classification of a finished SCSI command: what the caller should do
 * next (done, retry, reconnect and retry, give up) and the errno to
 * report if it gives up.  No locks: pure functions of the task.
 */
#ifndef HHCISCSI_SENSE_H
#define HHCISCSI_SENSE_H

#include <stdbool.h>
#include <stddef.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

enum sense_action {
  SENSE_OK,        /* the command succeeded */
  SENSE_RETRY,     /* transient condition: issue it again */
  SENSE_RECONNECT, /* the session is unusable: reconnect, then retry */
  SENSE_FAIL,      /* permanent error: report it */
};

/* Name of an action, for debug messages. */
const char *sense_action_to_string (enum sense_action a);

/* Decide what to do with TASK (NULL when libiscsi could not run the
 * command at all) issued on CTX.  Writes a one-line description of any
 * failure to MSG (LEN bytes) and its errno to *ERR.
 */
enum sense_action sense_classify (struct iscsi_context *ctx,
                                  struct scsi_task *task, char *msg, size_t len,
                                  int *err);

/* True if a command that finished with STATUS (TASK: its task, may be
 * NULL) reports that the logical unit was reset, so that its volatile
 * cache may have been dropped: UNIT ATTENTION with ASC 29h, except
 * 29h/05h, 29h/06h (transceiver mode) and 29h/07h (I_T nexus loss).
 */
bool sense_is_reset (int status, const struct scsi_task *task);

/* True if the target refused such a command without executing any of
 * it: BUSY, TASK SET FULL, RESERVATION CONFLICT, UNIT ATTENTION or
 * NOT READY.
 */
bool sense_refused (int status, const struct scsi_task *task);

/* Describe TASK's sense data in MSG (LEN bytes): key, ASC/ASCQ name and
 * codes.
 */
void sense_describe (const struct scsi_task *task, char *msg, size_t len);

#endif /* HHCISCSI_SENSE_H */
