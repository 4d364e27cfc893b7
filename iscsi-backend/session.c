/* iscsi-backend: one session of the pool (pool-int.h): its login,
 * issuing commands, the leader's poll and the ticker.
 *
 * Each session is one struct iscsi_context with its own mutex; many
 * commands are in flight on a session at once (libiscsi's asynchronous
 * *_task calls).  libiscsi is not thread-safe, so every call on s->ctx
 * is made with s->lock held, and completion callbacks run with it held
 * too.  Polls and a requester's wait never hold it; a reconnection
 * (a synchronous login) does, as no command can go on that session
 * until it is done.
 *
 * Who reads the replies: leader and followers.  A requester queues its
 * command, writes what the socket takes at once, and then waits.  One
 * of the waiting requesters of a session is its leader: it polls the
 * socket and runs iscsi_service, which reads every reply that is in
 * and whose callbacks mark their requests done.  When the leader's own
 * request is done it hands the leadership to a requester still
 * waiting, if there is one.  So a reply costs no thread hop for the
 * leader's own command (at queue depth 1, none at all) and one wake-up
 * for a follower's, which is the least there can be with a thread per
 * request (nbdkit's model).
 *
 * No wake-up meets a held lock.  A follower sleeps on a semaphore of
 * its own, not on s->lock: whoever finds its request done (or makes it
 * the leader) puts it on s->wakeups, and the posts are made after
 * s->lock is released (session_unlock), so a woken follower does not
 * block at once on the mutex of the thread that woke it, and one whose
 * command succeeded returns without taking s->lock at all.  (A
 * requester that finds s->lock taken just waits for it: measured, that
 * is 2% of requests, too few to pay for handing commands to the
 * holder.)  A request is posted at most once per sleep:
 *
 *   asleep  on wakeups  meaning
 *   false   no          running (or leading); nobody posts it
 *   true    no          sleeping; the next one to wake it queues a post
 *   false   yes         one post owed, made at the next session_unlock
 *
 * A bit of a write may stay queued when the socket is full; the
 * sender then wakes the leader's poll (s->wake, an eventfd) so it
 * polls for POLLOUT too.  With no request in flight a ticker thread
 * per session services the socket twice a second: NOP-Ins from the
 * target, a connection closed while idle, libiscsi's timeout scan.
 *
 * A broken session (socket error, a command queued in vain, a timed
 * out command) is dropped: every command on it is cancelled, which
 * completes it with SCSI_STATUS_CANCELLED, the context is destroyed
 * and s->gen is bumped.  Requesters then reconnect and retry, a
 * bounded number of times (pool_exec), so a vanished target turns
 * into EIO instead of a hang.  libiscsi's own automatic reconnection
 * is switched off.
 */
#include <config.h>

#include <errno.h>
#include <poll.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <nbdkit-plugin.h>

#include "lock.h"
#include "pool-int.h"
#include "sense.h"

/* Log a new context in, as C asks.  Reports failures with
 * nbdkit_error when LOUD, else with nbdkit_debug (retries are not
 * errors yet).  Every login gives up after LOGIN_BOUND_S even with
 * timeout=0, the TCP connect included (LOGIN_SYNCNT SYN retries:
 * 1 + 2 + 4 s): the first ones, so that a portal that never answers
 * stops the start; the ticker's,
 * which nbdkit's exit waits for; and a requester's reconnection, which
 * holds the session's lock meanwhile (so the ticker and the exit wait
 * for it too).  A reconnection is not a command: pool_exec bounds the
 * attempts, and a target that does not answer then gets EIO.
 */
#define LOGIN_SYNCNT 2
static struct iscsi_context *
session_login (const struct pool_conf *c, bool loud)
{
  struct iscsi_context *ctx = iscsi_create_context (c->initiator);
  if (ctx == NULL)
    {
      nbdkit_error ("iscsi_create_context: out of memory");
      return NULL;
    }
  iscsi_set_targetname (ctx, c->target);
  iscsi_set_session_type (ctx, ISCSI_SESSION_NORMAL);
  iscsi_set_header_digest (ctx, ISCSI_HEADER_DIGEST_NONE_CRC32C);
  iscsi_set_noautoreconnect (ctx, 1);
  iscsi_set_tcp_syncnt (ctx, LOGIN_SYNCNT);
  iscsi_set_timeout (ctx, c->timeout > 0 ? c->timeout : LOGIN_BOUND_S);
  if (c->user
      && iscsi_set_initiator_username_pwd (ctx, c->user,
                                           c->password ? c->password : "")
             != 0)
    {
      nbdkit_error ("CHAP: %s", iscsi_get_error (ctx));
      iscsi_destroy_context (ctx);
      return NULL;
    }
  if (iscsi_full_connect_sync (ctx, c->portal, c->lun) != 0)
    {
      if (loud)
        nbdkit_error ("cannot log in to %s on portal %s, LUN %d: %s", c->target,
                      c->portal, c->lun, iscsi_get_error (ctx));
      else
        nbdkit_debug ("login to %s failed: %s", c->portal,
                      iscsi_get_error (ctx));
      iscsi_destroy_context (ctx);
      return NULL;
    }
  if (c->timeout == 0)
    iscsi_set_timeout (ctx, 0); /* commands wait for ever, as asked */
  return ctx;
}

/* With s->lock held: publish whether S is logged in. */
static void
session_set_up (struct session *s, bool up)
{
  HHC_SCOPED_LOCK (&s->pool->lock);
  s->up = up;
}

static void
session_wake (struct session *s)
{
  uint64_t one = 1;
  ssize_t r = write (s->wake, &one, sizeof one);
  (void)r; /* EAGAIN: the counter is already set, which is enough */
}

/* With s->lock held: cancel every command on the session (each
 * completes as CANCELLED), destroy the context and remember WHY.
 */
void
session_drop (struct session *s, const char *why)
{
  if (s->ctx == NULL)
    return;
  snprintf (s->why, sizeof s->why, "%s", why);
  iscsi_scsi_cancel_all_tasks (s->ctx);
  iscsi_destroy_context (s->ctx);
  s->ctx = NULL;
  s->gen++;
  session_set_up (s, false);
  session_wake (s);
}

/* With s->lock held: drop the session after libiscsi reported an
 * error on it.
 */
static void
session_fail (struct session *s, const char *what)
{
  char why[160];
  snprintf (why, sizeof why, "%s: %s", what, iscsi_get_error (s->ctx));
  nbdkit_debug ("hhciscsi: session lost: %s", why);
  session_drop (s, why);
}

/* With s->lock held: log the session in if it is not. */
static int
session_ensure (struct session *s, char *msg, size_t len)
{
  if (s->ctx)
    return 0;
  s->ctx = session_login (s->pool->conf, false);
  if (s->ctx == NULL)
    {
      snprintf (msg, len, "reconnection to %s failed", s->pool->conf->portal);
      return -1;
    }
  s->gen++;
  session_set_up (s, true);
  {
    HHC_SCOPED_LOCK (&s->pool->lock);
    s->pool->reconnects++;
  }
  return 0;
}

/* With s->lock held: queue a post of R's semaphore, if R sleeps. */
static void
request_wake (struct session *s, struct request *r)
{
  if (!r->asleep)
    return;
  r->asleep = false;
  r->woke_done = r->done;
  r->wnext = s->wakeups;
  s->wakeups = r;
}

/* Completion of one command, run by libiscsi with s->lock held.  DATA
 * is the task (NULL when cancelled or timed out).
 */
static void
request_done (struct iscsi_context *ctx, int status, void *data, void *priv)
{
  struct request *r = priv;
  const struct scsi_task *t = data;
  if (r->done)
    return;
  r->status = status;
  r->done = true;
  lu_end (r, !sense_refused (status, t),
          status == SCSI_STATUS_GOOD || status == SCSI_STATUS_CONDITION_MET);
  if (sense_is_reset (status, t))
    r->drain = lu_reset_seen (t, r->s->pool->conf);
  if (r->prevp) /* else cancelled while being queued: not listed */
    {
      if (r->next)
        r->next->prevp = r->prevp;
      *r->prevp = r->next;
    }
  request_wake (r->s, r);
}

/* With s->lock held: R could not be issued (R->msg says why). */
static void
request_fail (struct session *s, struct request *r)
{
  lu_end (r, false, false); /* never sent */
  r->task = NULL;
  r->done = true;
  request_wake (s, r);
}

/* With s->lock held: issue R's command, logging the session in first
 * if it is not, and list R as waiting.
 */
static void
session_issue (struct session *s, struct request *r)
{
  if (session_ensure (s, r->msg, r->len) == -1)
    {
      request_fail (s, r);
      return;
    }
  r->gen = s->gen;
  r->task = r->issue (s->ctx, s->pool->conf->lun, r->arg, request_done, r);
  if (r->task == NULL)
    {
      snprintf (r->msg, r->len, "cannot queue the command: %s",
                iscsi_get_error (s->ctx));
      session_drop (s, r->msg);
      request_fail (s, r);
      return;
    }
  if (r->done) /* completed at once (libiscsi does not, today) */
    return;
  r->next = s->waiting;
  r->prevp = &s->waiting;
  if (r->next)
    r->next->prevp = &r->next;
  s->waiting = r;
}

/* With s->lock held: send what the socket takes now; the leader sends
 * the rest once it polls for POLLOUT, which a wake-up makes it do.
 */
static void
session_send (struct session *s)
{
  if (s->ctx == NULL)
    return;
  if (iscsi_service (s->ctx, POLLOUT) < 0)
    session_fail (s, "send failed");
  else if (s->leader && iscsi_out_queue_length (s->ctx) > 0)
    session_wake (s);
}

/* Release s->lock.  Before: make sure one of the waiting requests
 * leads (the leader, when its own request is done, just steps down).
 * After: post the wakeups (sem_post does not touch a semaphore after
 * waking its waiter, so a woken owner may destroy it at once: glibc
 * 2.21 and later, musl).
 */
void
session_unlock (struct session *s)
{
  struct request *w, *next;

  if (s->leader == NULL && s->waiting)
    {
      s->leader = s->waiting;
      request_wake (s, s->leader);
    }
  w = s->wakeups;
  s->wakeups = NULL;
  hhc_unlock (&s->lock);
  for (; w; w = next)
    {
      next = w->wnext; /* W may be gone once posted */
      sem_post (&w->sem);
    }
}

/* Hand R to session S: with s->lock held, issue and send it. */
void
session_submit (struct session *s, struct request *r)
{
  hhc_lock (&s->lock);
  session_issue (s, r);
  session_send (s);
}

/* With s->lock held: poll the socket for up to TIMEOUT ms (dropping
 * the lock meanwhile when TIMEOUT > 0) and service what came.
 */
static void
session_poll (struct session *s, int timeout)
{
  struct pollfd pfd[2];
  unsigned gen = s->gen;
  int r;

  pfd[0].fd = iscsi_get_fd (s->ctx);
  pfd[0].events = iscsi_which_events (s->ctx);
  pfd[0].revents = 0;
  pfd[1].fd = s->wake;
  pfd[1].events = POLLIN;
  pfd[1].revents = 0;
  if (timeout > 0)
    session_unlock (s);
  r = poll (pfd, 2, timeout);
  if (timeout > 0)
    hhc_lock (&s->lock);
  if (r == -1)
    {
      if (errno != EINTR)
        nbdkit_error ("poll: %m");
      return;
    }
  if (pfd[1].revents & POLLIN)
    {
      uint64_t n;
      ssize_t rr = read (s->wake, &n, sizeof n);
      (void)rr;
    }
  if (s->ctx == NULL || gen != s->gen)
    return; /* the context polled for is gone */
  if (iscsi_service (s->ctx, pfd[0].revents) < 0)
    session_fail (s, "connection failed");
}

/* Sleep SERVICE_TICK_MS or until stopped.  Returns true if stopped. */
static bool
ticker_sleep (struct session *s)
{
  HHC_SCOPED_LOCK (&s->tick_lock);
  struct timespec ts;

  if (s->stop)
    return true;
  clock_gettime (CLOCK_REALTIME, &ts);
  ts.tv_nsec += SERVICE_TICK_MS * 1000000L;
  if (ts.tv_nsec >= 1000000000L)
    {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
  pthread_cond_timedwait (&s->tick, &s->tick_lock, &ts);
  return s->stop;
}

/* The ticker: with no request in flight nobody else reads the socket.
 * And nobody else logs a dropped session back in once another one is
 * up (pool_take prefers sessions that are up), so the pool would
 * shrink to one session for good after the target dropped them all:
 * the ticker logs it in, every tick at first, then backing off (up to
 * 8 ticks) while the target does not answer.
 */
static void *
ticker_thread (void *p)
{
  struct session *s = p;
  unsigned fails = 0, skip = 0;
  char msg[160];

  while (!ticker_sleep (s))
    {
      hhc_lock (&s->lock);
      if (s->ctx == NULL)
        {
          if (skip > 0)
            skip--;
          else if (session_ensure (s, msg, sizeof msg) == 0)
            fails = 0;
          else
            {
              fails += fails < 3;
              skip = (1u << fails) - 1;
            }
        }
      else if (s->leader == NULL)
        session_poll (s, 0);
      session_unlock (s);
    }
  return NULL;
}

static int
session_init (struct session *s)
{
  pthread_mutex_init (&s->lock, NULL);
  pthread_mutex_init (&s->tick_lock, NULL);
  pthread_cond_init (&s->tick, NULL);
  s->wake = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (s->wake == -1)
    {
      nbdkit_error ("eventfd: %m");
      return -1;
    }
  return 0;
}

/* After S's first login: before it, the ticker would see no context
 * and log in a second one of its own.
 */
static int
session_start_ticker (struct session *s)
{
  int r = pthread_create (&s->thread, NULL, ticker_thread, s);
  if (r != 0)
    {
      errno = r;
      nbdkit_error ("pthread_create: %m");
      return -1;
    }
  s->thread_started = true;
  return 0;
}

/* Wait for R, handed to S with s->lock held (session_submit), to be
 * done: leading (polling the socket) when nobody else does, else asleep
 * on R's semaphore.  Returns true with s->lock held, or false
 * without it when R was posted done with a good status (the fast
 * path: nothing left to do on the session).
 */
bool
request_wait (struct session *s, struct request *r)
{
  bool locked = true;

  for (;;)
    {
      if (!locked)
        {
          while (sem_wait (&r->sem) == -1)
            ; /* EINTR */
          if (r->woke_done && r->task
              && (r->status == SCSI_STATUS_GOOD
                  || r->status == SCSI_STATUS_CONDITION_MET))
            return false;
          hhc_lock (&s->lock);
          locked = true;
        }
      if (r->done)
        break;
      if (s->leader == NULL)
        s->leader = r;
      if (s->leader == r)
        session_poll (s, SERVICE_TICK_MS);
      else
        {
          r->asleep = true;
          session_unlock (s);
          locked = false;
        }
    }
  if (s->leader == r)
    s->leader = NULL; /* session_unlock names the next one */
  return true;
}

/* Set up S, whose s->pool the pool has set, and log it in (a failure
 * is an nbdkit_error: this is the start), then start its ticker.  Returns -1 after nbdkit_error; what
 * was set up is freed by session_stop.
 */
int
session_start (struct session *s)
{
  struct iscsi_context *ctx;

  s->wake = -1;
  if (session_init (s) == -1)
    return -1;
  /* Bounded: a portal that accepts the connection and never
   * answers is one error at start-up, not a start that hangs.
   */
  ctx = session_login (s->pool->conf, true);
  if (ctx == NULL)
    return -1;
  {
    HHC_SCOPED_LOCK (&s->lock);
    s->ctx = ctx;
    session_set_up (s, true);
  }
  return session_start_ticker (s);
}

/* Stop S's ticker, log S out and free it. */
void
session_stop (struct session *s)
{
  if (s->thread_started)
    {
      {
        HHC_SCOPED_LOCK (&s->tick_lock);
        s->stop = true;
        pthread_cond_signal (&s->tick);
      }
      pthread_join (s->thread, NULL);
    }
  if (s->ctx)
    {
      /* The logout is a command: with timeout=0 it would wait for
       * ever for a target that froze while the session was idle.
       */
      iscsi_set_timeout (s->ctx, LOGIN_BOUND_S);
      iscsi_logout_sync (s->ctx);
      iscsi_destroy_context (s->ctx);
      s->ctx = NULL;
    }
  if (s->wake >= 0)
    close (s->wake);
  pthread_cond_destroy (&s->tick);
  pthread_mutex_destroy (&s->tick_lock);
  pthread_mutex_destroy (&s->lock);
}
