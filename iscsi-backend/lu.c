/* iscsi-backend: the LU's write cache, as our commands left it
 * (pool-int.h).
 *
 * A WRITE without FUA, a WRITE SAME or an UNMAP may sit in the target's volatile cache until a SYNCHRONIZE CACHE of
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
 */
#include <config.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <nbdkit-plugin.h>

#include "lock.h"
#include "pool-int.h"
#include "sense.h"

/* The LU's write cache (see the top). */
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
void
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
void
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

/* With s->lock held: the reply T reports a reset of the LU that C
 * names (for the message).  Marks the writes lost if one may have been
 * in the cache (one error line, the first time); else returns true if
 * the caller must drain the other sessions (no drain runs yet).
 */
bool
lu_reset_seen (const struct scsi_task *t, const struct pool_conf *c)
{
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

void
lu_drain_done (void)
{
  HHC_SCOPED_LOCK (&lu.lock);
  lu.draining = false;
  pthread_cond_broadcast (&lu.gate);
}
