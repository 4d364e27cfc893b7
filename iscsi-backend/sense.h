/* Classification of a finished SCSI command: what the caller should do
 * next (done, retry, reconnect and retry, give up) and the errno to
 * report if it gives up.  No locks: pure functions of the task.
 */
#ifndef HHCISCSI_SENSE_H
#define HHCISCSI_SENSE_H

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

#endif /* HHCISCSI_SENSE_H */
