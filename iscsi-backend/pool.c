/* Session pool.
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
 *
 * The LU's write cache.  A WRITE without FUA, a WRITE SAME or an UNMAP
 * may sit in the target's volatile cache until a SYNCHRONIZE CACHE of
 * the LU, which covers the writes of every session.  A reset of the
 * LU (a UNIT ATTENTION with ASC 29h, see sense.c) may drop that cache,
 * and the plugin cannot send again what it does not keep: if a write
 * may be in the cache when a reset is reported, every flush fails from
 * then on (lu.lost, hhciscsi_flush).  One logical clock orders the
 * events, under lu.lock:
 *
 *   event                                      effect
 *   a write (POOL_WRITE) starts                inflight++
 *   ... ends, unless refused (sense_refused)   inflight--, written = ++clock
 *   ... ends refused (not executed)            inflight--
 *   a full SYNC CACHE attempt starts           its tick = ++clock
 *   ... ends GOOD                              synced = max (synced, tick)
 *   a reset is reported                        lost if inflight > 0
 *                                              or written > synced
 *
 * A write that ended before a sync started is covered by it; one in
 * flight when the sync started is not (it ends with a later tick).
 * An end is accounted in the completion callback, with s->lock held,
 * so one session's replies count in the order the target sent them: a
 * reset reported just before a SYNC CACHE of the same session is
 * judged before that sync counts.
 *
 * One reset is reported on every session, each at its next command.
 * A late report, after new writes, would look like a second reset with
 * writes at risk.  So when a report finds none, its requester drains
 * the other sessions at once: no write may start (lu.draining; writers
 * wait on lu.gate) while it runs TEST UNIT READY on every other
 * logged-in session until one comes back without a UNIT ATTENTION,
 * each bounded by the timeout (10 s when there is none).
 *
 * A reset is reported only to the sessions logged in when it happens:
 * libiscsi's login consumes the 29h/00h of a new I_T nexus (sense.c).
 * So it is missed when none is (a target that restarts drops them
 * all), and seen too late when a flush succeeds first on a session
 * that logged in after it.
 *
 * Lock order: s->lock, then pool.lock (which only guards the choice
 * of a session and the counters) or lu.lock; never the other way
 * round, and pool.lock and lu.lock never together.  s->tick_lock is
 * taken alone.
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
#include "pool.h"
#include "sense.h"

/* Poll timeout of an idle service thread: libiscsi checks command
 * timeouts only inside iscsi_service.
 */
#define SERVICE_TICK_MS 500

/* TEST UNIT READYs per session in a drain: one per pending UNIT
 * ATTENTION, and tgtd queues one per event.
 */
#define DRAIN_TRIES 8

struct request;

struct session {
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
  bool asleep;    /* see the table at the top */
  bool woke_done; /* done when its post was queued */
  bool ended;     /* its end is accounted in lu */
  bool drain;     /* it reported a reset: its requester drains */
};

static struct {
  const struct pool_conf *conf;
  struct session *s;
  unsigned n;
  unsigned reconnects;
  pthread_mutex_t lock; /* protects s[].users, s[].up and reconnects */
} pool = {
  .lock = PTHREAD_MUTEX_INITIALIZER,
};

/* The LU's write cache, as our commands left it (see the top). */
static struct {
  pthread_mutex_t lock; /* protects all of lu */
  pthread_cond_t gate;  /* broadcast when a drain ends */
  uint64_t clock;       /* the logical clock */
  uint64_t written;     /* tick of the last end of a write */
  uint64_t synced;      /* start tick of the latest good full sync */
  unsigned inflight;    /* POOL_WRITE commands started, not ended */
  bool draining;        /* a drain runs: no POOL_WRITE may start */
  bool lost;            /* a reset may have dropped writes: sticky */
} lu = {
  .lock = PTHREAD_MUTEX_INITIALIZER,
  .gate = PTHREAD_COND_INITIALIZER,
};

/* Before R is issued, with no lock held: a write waits for a drain to
 * end and counts as in flight, a full sync takes its start tick.
 */
static void
lu_begin (struct request *r)
{
  HHC_SCOPED_LOCK (&lu.lock);
  if (r->kind == POOL_WRITE)
    {
      while (lu.draining)
        hhc_cond_wait (&lu.gate, &lu.lock);
      lu.inflight++;
    }
  else if (r->kind == POOL_SYNC)
    r->tick = ++lu.clock;
}

/* With s->lock held: R ended, EXECUTED unless the target refused it,
 * GOOD if it succeeded.  Once per request.
 */
static void
lu_end (struct request *r, bool executed, bool good)
{
  if (r->ended)
    return;
  r->ended = true;
  HHC_SCOPED_LOCK (&lu.lock);
  if (r->kind == POOL_WRITE)
    {
      lu.inflight--;
      if (executed)
        lu.written = ++lu.clock;
    }
  else if (r->kind == POOL_SYNC && good && r->tick > lu.synced)
    lu.synced = r->tick;
}

/* With s->lock held: the reply T reports a reset of the LU.  Marks the
 * writes lost if one may have been in the cache (one error line, the
 * first time); else returns true if the caller must drain the other
 * sessions (no drain runs yet).
 */
static bool
lu_reset_seen (const struct scsi_task *t)
{
  const struct pool_conf *c = pool.conf;
  char d[160];

  sense_describe (t, d, sizeof d);
  HHC_SCOPED_LOCK (&lu.lock);
  if (lu.lost)
    return false;
  if (lu.inflight == 0 && lu.written <= lu.synced)
    {
      nbdkit_debug ("hhciscsi: LUN reset (%s), every write was flushed", d);
      if (lu.draining)
        return false;
      lu.draining = true;
      return true;
    }
  lu.lost = true;
  nbdkit_error ("%s LUN %d on %s was reset with writes not yet flushed,"
                " which may be lost, so every flush fails from now on"
                " (restart nbdkit once the data is checked): %s",
                c->target, c->lun, c->portal, d);
  return false;
}

bool
pool_writes_lost (void)
{
  HHC_SCOPED_LOCK (&lu.lock);
  return lu.lost;
}

/* Log a new context in.  Reports failures with nbdkit_error when LOUD,
 * else with nbdkit_debug (retries are not errors yet).  Every login
 * gives up after LOGIN_BOUND_S even with timeout=0, the TCP connect
 * included (LOGIN_SYNCNT SYN retries: 1 + 2 + 4 s): the first ones, so
 * that a portal that never answers stops the start; the ticker's,
 * which nbdkit's exit waits for; and a requester's reconnection, which
 * holds the session's lock meanwhile (so the ticker and the exit wait
 * for it too).  A reconnection is not a command: pool_exec bounds the
 * attempts, and a target that does not answer then gets EIO.
 */
#define LOGIN_BOUND_S 10
#define LOGIN_SYNCNT 2
static struct iscsi_context *
session_login (bool loud)
{
  const struct pool_conf *c = pool.conf;
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
  HHC_SCOPED_LOCK (&pool.lock);
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
static void
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
  s->ctx = session_login (false);
  if (s->ctx == NULL)
    {
      snprintf (msg, len, "reconnection to %s failed", pool.conf->portal);
      return -1;
    }
  s->gen++;
  session_set_up (s, true);
  {
    HHC_SCOPED_LOCK (&pool.lock);
    pool.reconnects++;
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
    r->drain = lu_reset_seen (t);
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
  r->task = r->issue (s->ctx, pool.conf->lun, r->arg, request_done, r);
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
static void
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
static void
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

int
pool_start (const struct pool_conf *conf)
{
  unsigned i;

  pool.conf = conf;
  pool.s = calloc (conf->sessions, sizeof pool.s[0]);
  if (pool.s == NULL)
    {
      nbdkit_error ("calloc: %m");
      return -1;
    }
  for (i = 0; i < conf->sessions; i++)
    {
      struct session *s = &pool.s[i];
      pool.n = i + 1; /* so pool_stop frees what is set up */
      s->wake = -1;
      if (session_init (s) == -1)
        return -1;
      /* Bounded: a portal that accepts the connection and never
       * answers is one error at start-up, not a start that hangs.
       */
      struct iscsi_context *ctx = session_login (true);
      if (ctx == NULL)
        return -1;
      {
        HHC_SCOPED_LOCK (&s->lock);
        s->ctx = ctx;
        session_set_up (s, true);
      }
      if (session_start_ticker (s) == -1)
        return -1;
    }
  nbdkit_debug ("hhciscsi: %u sessions logged in to %s", pool.n, conf->portal);
  return 0;
}

void
pool_stop (void)
{
  unsigned i;
  for (i = 0; i < pool.n; i++)
    {
      struct session *s = &pool.s[i];
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
  free (pool.s);
  pool.s = NULL;
  pool.n = 0;
}

/* The session with the fewest requesters, a logged-in one if any is. */
static struct session *
pool_take (void)
{
  HHC_SCOPED_LOCK (&pool.lock);
  struct session *best = NULL;
  bool best_up = false;
  unsigned i;

  for (i = 0; i < pool.n; i++)
    {
      struct session *s = &pool.s[i];
      bool up = s->up;
      if (best == NULL || (up && !best_up)
          || (up == best_up && s->users < best->users))
        {
          best = s;
          best_up = up;
        }
    }
  best->users++;
  return best;
}

static void
pool_give_back (struct session *s)
{
  HHC_SCOPED_LOCK (&pool.lock);
  s->users--;
}

unsigned
pool_reconnects (void)
{
  HHC_SCOPED_LOCK (&pool.lock);
  return pool.reconnects;
}

/* Sleep before attempt N (1, 2, ...): 100 ms doubling, capped at 2 s. */
static void
backoff (unsigned n)
{
  unsigned ms = 100u << (n < 5 ? n - 1 : 4);
  struct timespec ts;
  if (ms > 2000)
    ms = 2000;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (long)(ms % 1000) * 1000000;
  nanosleep (&ts, NULL);
}

/* With s->lock held, R done: what to do next (see attempt). */
static enum sense_action
request_classify (struct session *s, struct request *r, int *err)
{
  enum sense_action a;

  if (r->task == NULL)
    return SENSE_RECONNECT; /* r->msg says why */
  if (s->ctx && r->gen == s->gen)
    a = sense_classify (s->ctx, r->task, r->msg, r->len, err);
  else
    {
      snprintf (r->msg, r->len, "session lost: %s", s->why);
      a = SENSE_RECONNECT;
    }
  if (a == SENSE_RECONNECT && s->ctx && r->gen == s->gen)
    session_drop (s, r->msg);
  return a;
}

/* Wait for R, handed to S with s->lock held (session_submit), to be
 * done: leading (polling the socket) when nobody else does, else asleep
 * on R's semaphore.  Returns true with s->lock held, or false
 * without it when R was posted done with a good status (the fast
 * path: nothing left to do on the session).
 */
static bool
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

/* A command as pool_exec runs it, and how its last attempt went. */
struct command {
  const char *what; /* its name, for messages */
  enum pool_kind kind;
  pool_issue_fn issue;
  void *arg;
  char msg[256]; /* why the last attempt failed */
  int err;       /* and its errno */
  bool drain;    /* it reported a reset: drain the other sessions */
};

/* One attempt of C on session S.  Returns the action; *TASK is set on
 * SENSE_OK only.
 */
static enum sense_action
attempt (struct session *s, struct command *c, struct scsi_task **task)
{
  struct request r = { .s = s,
                       .issue = c->issue,
                       .arg = c->arg,
                       .kind = c->kind,
                       .msg = c->msg,
                       .len = sizeof c->msg };
  enum sense_action a = SENSE_OK;
  bool locked;

  c->err = EIO;
  sem_init (&r.sem, 0, 0);
  lu_begin (&r);
  session_submit (s, &r);
  locked = request_wait (s, &r);
  c->drain = r.drain;
  if (r.task)
    r.task->status = r.status;
  if (locked)
    {
      a = request_classify (s, &r, &c->err);
      session_unlock (s);
    }
  sem_destroy (&r.sem);
  if (a == SENSE_OK)
    {
      *task = r.task;
      return a;
    }
  if (r.task)
    scsi_free_scsi_task (r.task);
  return a;
}

/* TEST UNIT READY, bounded even when commands may wait for ever.  With
 * s->lock held (libiscsi reads the timeout when it queues the PDU).
 */
static struct scsi_task *
issue_tur (struct iscsi_context *ctx, int lun, void *arg, iscsi_command_cb cb,
           void *priv)
{
  int timeout = pool.conf->timeout;
  struct scsi_task *t;

  iscsi_set_timeout (ctx, timeout > 0 ? timeout : LOGIN_BOUND_S);
  t = iscsi_testunitready_task (ctx, lun, cb, priv);
  iscsi_set_timeout (ctx, timeout);
  return t;
}

/* Count a requester on S if S is logged in. */
static bool
session_take_if_up (struct session *s)
{
  HHC_SCOPED_LOCK (&pool.lock);
  if (!s->up)
    return false;
  s->users++;
  return true;
}

/* One TEST UNIT READY of a drain on S. */
static enum sense_action
drain_one (struct session *s)
{
  struct command c
      = { .what = "TEST UNIT READY", .kind = POOL_OTHER, .issue = issue_tur };
  struct scsi_task *t;
  enum sense_action a = attempt (s, &c, &t);

  if (a == SENSE_OK)
    scsi_free_scsi_task (t);
  else
    nbdkit_debug ("hhciscsi: drain: %s: %s", c.what, c.msg);
  return a;
}

/* A reset reported on EXCEPT put no write at risk, and writes wait
 * (lu.draining): let every other logged-in session report it now, then
 * open the gate.  A session that is down has nothing to report.
 */
static void
lu_drain (struct session *except)
{
  unsigned i, k;

  for (i = 0; i < pool.n; i++)
    {
      struct session *s = &pool.s[i];
      if (s == except || !session_take_if_up (s))
        continue;
      for (k = 0; k < DRAIN_TRIES; k++)
        if (drain_one (s) != SENSE_RETRY)
          break;
      pool_give_back (s);
    }
  HHC_SCOPED_LOCK (&lu.lock);
  lu.draining = false;
  pthread_cond_broadcast (&lu.gate);
}

int
pool_exec (const char *what, enum pool_kind kind, pool_issue_fn issue,
           void *arg, struct scsi_task **task)
{
  struct command c = { .what = what, .kind = kind, .issue = issue, .arg = arg };
  unsigned n;

  for (n = 1;; n++)
    {
      struct session *s = pool_take ();
      enum sense_action a = attempt (s, &c, task);
      pool_give_back (s);
      if (c.drain)
        lu_drain (s);
      if (a == SENSE_OK)
        return 0;
      if (a == SENSE_FAIL)
        {
          nbdkit_error ("%s: %s", what, c.msg);
          break;
        }
      if (n >= pool.conf->attempts)
        {
          nbdkit_error ("%s: %s (gave up after %u attempts)", what, c.msg, n);
          break;
        }
      nbdkit_debug ("%s: %s: %s, attempt %u of %u", what, c.msg,
                    sense_action_to_string (a), n + 1, pool.conf->attempts);
      backoff (n);
    }
  errno = c.err;
  return -1;
}
