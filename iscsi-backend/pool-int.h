/* iscsi-backend: what pool.c (choosing a session, pool_exec, the
 * drain after a reset), session.c (one session: login, issuing, the
 * leader's poll, the ticker) and lu.c (the LU's write cache) share.
 * Nothing else includes it.  The design is at the top of pool.c,
 * session.c and lu.c.
 *
 * Lock order, across the three: s->lock, then pool.lock (which only
 * guards the choice of a session and the counters) or lu.lock; never
 * the other way round, and pool.lock and lu.lock never together.
 * s->tick_lock is taken alone.
 */
#ifndef HHCISCSI_POOL_INT_H
#define HHCISCSI_POOL_INT_H

#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "pool.h"

/* Poll timeout of an idle service thread: libiscsi checks command
 * timeouts only inside iscsi_service.
 */
#define SERVICE_TICK_MS 500

/* Every login, and commands that must not wait for ever with
 * timeout=0, give up after this many seconds (see session_login).
 */
#define LOGIN_BOUND_S 10

struct pool;
struct request;

struct session {
  struct pool *pool;         /* the pool it is in: its conf and lock */
  pthread_mutex_t lock;      /* protects ctx ... why; see session_unlock */
  struct iscsi_context *ctx; /* NULL: not logged in */
  unsigned gen;              /* bumped whenever ctx is dropped or set */
  struct request *waiting;   /* requests in flight, a list */
  struct request *leader;    /* the one of them polling, or NULL */
  struct request *wakeups;   /* to post once s->lock is released */
  int wake;                  /* eventfd: the leader must poll anew */
  char why[160];             /* why the session was last dropped */
  pthread_mutex_t tick_lock; /* protects stop */
  pthread_cond_t tick;       /* the ticker's timed wait; signalled at stop */
  bool stop;
  bool thread_started;
  pthread_t thread;
  unsigned users; /* requesters on this session: under pool.lock */
  bool up;        /* ctx != NULL, as seen under pool.lock */
};

/* One command and its requester, on the requester's stack.  The
 * command fields are read by whoever issues it; the rest is under
 * s->lock until the request is posted done.
 */
struct request {
  sem_t sem; /* posted once per sleep: done, or made leader */
  struct session *s;
  pool_issue_fn issue;
  void *arg;
  enum pool_kind kind;
  uint64_t tick; /* POOL_SYNC: lu.clock when it started */
  char *msg;     /* why it could not be issued, LEN bytes */
  size_t len;
  struct scsi_task *task;        /* NULL until issued, or if that failed */
  unsigned gen;                  /* s->gen when issued */
  struct request *next, **prevp; /* in s->waiting */
  struct request *wnext;         /* in s->wakeups */
  int status;                    /* SCSI_STATUS_* from the callback */
  bool done;
  bool asleep;    /* see the table at the top of session.c */
  bool woke_done; /* done when its post was queued */
  bool ended;     /* its end is accounted in lu */
  bool drain;     /* it reported a reset: its requester drains */
};

/* The pool (pool.c), which every session points to (s->pool). */
struct pool {
  const struct pool_conf *conf;
  struct session *s;
  unsigned n;
  unsigned reconnects;
  pthread_mutex_t lock; /* protects s[].users, s[].up and reconnects */
};

/* session.c (each function's comment is there). */

/* Set up S (s->pool set), log it in (loudly) and start its ticker. */
extern int session_start (struct session *s);
/* Stop S's ticker, log S out and free it. */
extern void session_stop (struct session *s);
/* Take s->lock, issue R on S and send it. */
extern void session_submit (struct session *s, struct request *r);
/* Wait for R (s->lock held): true with s->lock still held. */
extern bool request_wait (struct session *s, struct request *r);
/* With s->lock held: cancel every command, drop the context. */
extern void session_drop (struct session *s, const char *why);
/* Release s->lock, posting the wake-ups it queued. */
extern void session_unlock (struct session *s);

/* lu.c: the LU's write cache (each function's comment is there). */

/* Before R is issued, with no lock held. */
extern void lu_begin (struct request *r);
/* With s->lock held: R ended (once per request). */
extern void lu_end (struct request *r, bool executed, bool good);
/* With s->lock held: T reports a reset of C's LU; true: drain the
 * others.
 */
extern bool lu_reset_seen (const struct scsi_task *t,
                           const struct pool_conf *c);
/* The drain that lu_reset_seen asked for is over: writes may start. */
extern void lu_drain_done (void);

#endif /* HHCISCSI_POOL_INT_H */
