/* A pool of iSCSI sessions to one LUN, and the retrying command runner.
 *
 * Every session is one struct iscsi_context served by a thread of its
 * own, with many commands in flight: pool_exec queues the command on
 * the least busy session and waits for its reply.  The pool's mutexes
 * are taken inside; callers hold no lock.
 */
#ifndef HHCISCSI_POOL_H
#define HHCISCSI_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

/* Where and how to log in.  Filled in by .config; read-only after. */
struct pool_conf {
  char *portal;    /* host:port or [v6]:port */
  char *target;    /* target IQN */
  char *initiator; /* our IQN */
  char *user;      /* CHAP user, or NULL */
  char *password;  /* CHAP secret, or NULL: never logged */
  int lun;
  int timeout;       /* seconds per command, 0 = none */
  unsigned sessions; /* pool size */
  unsigned attempts; /* tries per command, including the first */
};

/* What a command does to the LU's volatile write cache, for the
 * reset check (see the top of lu.c).
 */
enum pool_kind {
  POOL_OTHER,     /* nothing: reads, inquiries, a SYNC CACHE of a range */
  POOL_WRITE,     /* may sit in the cache: WRITE, WRITE SAME, UNMAP */
  POOL_WRITE_FUA, /* WRITE with FUA: on the medium once GOOD */
  POOL_SYNC,      /* SYNCHRONIZE CACHE of the whole LU */
};

/* Queue one command on CTX to LUN with libiscsi's asynchronous
 * *_task call, passing CB and PRIV through; ARG is the caller's.
 * Called with the session's lock held.
 */
typedef struct scsi_task *(*pool_issue_fn) (struct iscsi_context *ctx, int lun,
                                            void *arg, iscsi_command_cb cb,
                                            void *priv);

/* Allocate the pool and log in every session.  On error the reason has
 * been reported with nbdkit_error and -1 is returned.
 */
int pool_start (const struct pool_conf *conf);

/* Log out and free every session. */
void pool_stop (void);

/* Run ISSUE (named WHAT in messages, doing KIND) on a free session,
 * reconnecting and retrying up to conf->attempts times.  On success
 * *TASK holds the good task (free it with scsi_free_scsi_task) and 0
 * is returned; on failure the error has been reported, errno is set
 * and -1 returned.
 */
int pool_exec (const char *what, enum pool_kind kind, pool_issue_fn issue,
               void *arg, struct scsi_task **task);

/* True once the LU reported a reset while writes were not flushed:
 * they may be lost, and every flush must fail.  Sticky.
 */
bool pool_writes_lost (void);

/* Number of reconnections done since start (for tests and debug). */
unsigned pool_reconnects (void);

#endif /* HHCISCSI_POOL_H */
