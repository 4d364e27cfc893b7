/* iscsi-backend: the session pool (pool.h): choosing a session,
 * running a command with reconnections and retries (pool_exec), and
 * draining the other sessions when a reset is reported.
 *
 * A session (session.c) is one struct iscsi_context with its own mutex
 * and many commands in flight; its requesters take turns reading the
 * replies.  A broken session is dropped, and its requesters reconnect
 * and retry a bounded number of times, so a vanished target turns into
 * EIO instead of a hang.  The LU's write cache, which a reset may drop,
 * is accounted in lu.c; a reset reported on one session is drained
 * from the others here (lu_drain).
 */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nbdkit-plugin.h>

#include "lock.h"
#include "pool-int.h"
#include "sense.h"

/* TEST UNIT READYs per session in a drain: one per pending UNIT
 * ATTENTION, and tgtd queues one per event.
 */
#define DRAIN_TRIES 8

static struct pool pool = {
  .lock = PTHREAD_MUTEX_INITIALIZER,
};

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
      pool.n = i + 1; /* so pool_stop frees what is set up */
      pool.s[i].pool = &pool;
      if (session_start (&pool.s[i]) == -1)
        return -1;
    }
  nbdkit_debug ("hhciscsi: %u sessions logged in to %s", pool.n, conf->portal);
  return 0;
}

void
pool_stop (void)
{
  for (unsigned i = 0; i < pool.n; i++)
    session_stop (&pool.s[i]);
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
  lu_drain_done ();
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
