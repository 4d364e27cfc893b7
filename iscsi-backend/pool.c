/* Session pool.
 *
 * Each slot of the pool is a session:
 *
 *   ctx     busy   meaning
 *   NULL    0      free, not logged in (lost, reconnect on next use)
 *   set     0      free, logged in
 *   any     1      taken by one thread, which alone may touch ctx
 *
 * pool.lock protects every busy flag and the reconnect counter; a
 * thread that has set busy owns ctx without any lock, so the slow
 * network work never holds the pool lock.  pool.freed is signalled
 * whenever a slot is given back.
 *
 * Auto-reconnection inside libiscsi is switched off: a broken session
 * is destroyed and logged in again here, a bounded number of times,
 * so a vanished target turns into EIO instead of a hang.
 */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <nbdkit-plugin.h>

#include "cleanup.h"
#include "pool.h"
#include "sense.h"

struct session {
  struct iscsi_context *ctx;
  bool busy;
};

static struct {
  const struct pool_conf *conf;
  struct session *s;
  unsigned n;
  unsigned reconnects;
  pthread_mutex_t lock; /* protects s[].busy and reconnects */
  pthread_cond_t freed;
} pool = {
  .lock = PTHREAD_MUTEX_INITIALIZER,
  .freed = PTHREAD_COND_INITIALIZER,
};

/* Log a new context in.  Reports failures with nbdkit_error when LOUD,
 * else with nbdkit_debug (retries are not errors yet).
 */
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
  if (c->timeout > 0)
    iscsi_set_timeout (ctx, c->timeout);
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
  return ctx;
}

static void
session_drop (struct session *s)
{
  if (s->ctx)
    iscsi_destroy_context (s->ctx);
  s->ctx = NULL;
}

int
pool_start (const struct pool_conf *conf)
{
  unsigned i;

  pool.conf = conf;
  pool.n = conf->sessions;
  pool.s = calloc (pool.n, sizeof pool.s[0]);
  if (pool.s == NULL)
    {
      nbdkit_error ("calloc: %m");
      return -1;
    }
  for (i = 0; i < pool.n; i++)
    {
      pool.s[i].ctx = session_login (true);
      if (pool.s[i].ctx == NULL)
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
      if (pool.s[i].ctx)
        iscsi_logout_sync (pool.s[i].ctx);
      session_drop (&pool.s[i]);
    }
  free (pool.s);
  pool.s = NULL;
  pool.n = 0;
}

static struct session *
pool_take (void)
{
  ISCSI_SCOPED_LOCK (&pool.lock);
  for (;;)
    {
      unsigned i;
      /* Prefer a logged-in session. */
      for (i = 0; i < pool.n; i++)
        if (!pool.s[i].busy && pool.s[i].ctx)
          goto found;
      for (i = 0; i < pool.n; i++)
        if (!pool.s[i].busy)
          goto found;
      pthread_cond_wait (&pool.freed, &pool.lock);
      continue;
found:
      pool.s[i].busy = true;
      return &pool.s[i];
    }
}

static void
pool_give_back (struct session *s)
{
  ISCSI_SCOPED_LOCK (&pool.lock);
  s->busy = false;
  pthread_cond_signal (&pool.freed);
}

unsigned
pool_reconnects (void)
{
  ISCSI_SCOPED_LOCK (&pool.lock);
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

/* One attempt on session S.  Returns the action; *TASK is set on
 * SENSE_OK only.
 */
static enum sense_action
attempt (struct session *s, pool_issue_fn issue, void *arg,
         struct scsi_task **task, char *msg, size_t len, int *err)
{
  struct scsi_task *t;
  enum sense_action a;

  if (s->ctx == NULL)
    {
      s->ctx = session_login (false);
      if (s->ctx == NULL)
        {
          snprintf (msg, len, "reconnection to %s failed", pool.conf->portal);
          *err = EIO;
          return SENSE_RECONNECT;
        }
      ISCSI_SCOPED_LOCK (&pool.lock);
      pool.reconnects++;
    }
  t = issue (s->ctx, pool.conf->lun, arg);
  a = sense_classify (s->ctx, t, msg, len, err);
  if (a == SENSE_OK)
    {
      *task = t;
      return a;
    }
  if (t)
    scsi_free_scsi_task (t);
  if (a == SENSE_RECONNECT)
    session_drop (s);
  return a;
}

int
pool_exec (const char *what, pool_issue_fn issue, void *arg,
           struct scsi_task **task)
{
  char msg[256] = "";
  int err = EIO;
  unsigned n;

  for (n = 1;; n++)
    {
      struct session *s = pool_take ();
      enum sense_action a
          = attempt (s, issue, arg, task, msg, sizeof msg, &err);
      pool_give_back (s);
      if (a == SENSE_OK)
        return 0;
      if (a == SENSE_FAIL)
        {
          nbdkit_error ("%s: %s", what, msg);
          break;
        }
      if (n >= pool.conf->attempts)
        {
          nbdkit_error ("%s: %s (gave up after %u attempts)", what, msg, n);
          break;
        }
      nbdkit_debug ("%s: %s: %s, attempt %u of %u", what, msg,
                    sense_action_to_string (a), n + 1, pool.conf->attempts);
      backoff (n);
    }
  errno = err;
  return -1;
}
