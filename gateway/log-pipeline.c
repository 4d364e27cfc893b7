/* Pipelined barriers (log-inflight=K, K > 1): up to K barrier segments
 * in flight at once, and the durable frontier that FLUSHes wait for.
 *
 * The writer places each sealed buffer's segment in log order (its
 * position, its chain link: log-writer.c) and gives it to every
 * healthy mirror (pipe_issue).  Each mirror has K lanes (threads) that
 * take its segments in log order, so the writes start in log order on
 * every mirror, and finish in any order.  A segment on mirror m is
 *
 *   plain         not a barrier: written, durable only once a later
 *                 sync of m covers it
 *   FUA barrier   a barrier given to a mirror that offers FUA when no
 *                 plain segment was given to it since the last sync
 *                 barrier: written with FUA, durable when done
 *   sync barrier  any other barrier: written, then, once every earlier
 *                 segment's write on m is done, m is synced; the sync
 *                 makes durable every segment whose write was done
 *                 before it began (m->synced)
 *
 * The durable frontier (log->pipe_front) is the first segment that is
 * not durable on every healthy mirror: every segment below it is.
 * durable_barrier and rev_durable follow the newest barrier below it,
 * never a barrier past a segment that is not durable yet, whatever
 * order the mirrors finish in: a replay stops at the first segment
 * that is missing or torn, so a later segment durable past such a hole
 * counts for nothing, and no FLUSH is acknowledged that depended on
 * it.  A mirror that fails stops counting, as in log-mirror.c.
 *
 * Buffers: a plain segment's buffer is free again once every lane is
 * done with it; a barrier's once it is also durable (a FUA barrier's
 * durability is kept only there).  Every barrier becomes durable
 * without a later segment: a sync barrier syncs after every earlier
 * write, and a FUA barrier follows only FUA barriers since the last
 * sync barrier.
 *
 * Locks: everything here is under log->lock, but a lane's I/O; lanes
 * wait on pipe_cv (a segment to take, or an earlier write done).
 */
#include <config.h>

#include <stdio.h>

#include "common.h"
#include "log_int.h"

struct lane {
  struct hhc_log *log;
  unsigned mi; /* its mirror */
  pthread_t thread;
  bool started;
};

/* The in-flight segment seq, if it is still in the list. */
static struct buf *
in_flight (struct hhc_log *log, uint64_t seq)
{
  for (struct buf *b = log->ifhead; b && b->seq <= seq; b = b->next)
    if (b->seq == seq)
      return b;
  return NULL;
}

/* Is b durable on mirror i (lock held)? */
static bool
durable_on (const struct hhc_log *log, const struct buf *b, unsigned i)
{
  return (b->fua_done >> i & 1) || b->seq < log->m[i].synced;
}

/* Is b durable on every healthy mirror? */
static bool
durable_everywhere (const struct hhc_log *log, const struct buf *b)
{
  for (unsigned i = 0; i < log->nm; i++)
    if (!log->m[i].failed && !durable_on (log, b, i))
      return false;
  return true;
}

/* Below it, every segment is durable on every healthy mirror by syncs. */
static uint64_t
min_synced (const struct hhc_log *log)
{
  uint64_t s = UINT64_MAX;

  for (unsigned i = 0; i < log->nm; i++)
    if (!log->m[i].failed)
      s = HHC_MIN (s, log->m[i].synced);
  return s;
}

/* Barrier b is durable, and every segment before it: FLUSHes that
 * named it are done; the group commit learns how long it took.
 */
static void
barrier_durable (struct hhc_log *log, const struct buf *b)
{
  owe_voids_locked (log); /* a healthy mirror made it durable */
  log->durable_barrier = b->seq;
  log->rev_durable = b->rev_upto;
  if (b->joiners > 0)
    {
      log->last_group = b->joiners;
      log->last_done_ns = hhc_now_ns ();
      log->last_barrier_ns = log->last_done_ns - b->t0;
      if (log->cur)
        log->cur->expect = log->cur->joiners + b->joiners;
    }
}

/* Move the frontier as far as it goes (lock held).  Segments no longer
 * in the list are plain ones whose buffers are free: durable once the
 * syncs of every healthy mirror cover them.
 */
static bool
advance_front (struct hhc_log *log)
{
  uint64_t ms = min_synced (log);
  struct buf *b = log->ifhead;
  bool moved = false;

  while (b && b->seq < log->pipe_front)
    b = b->next;
  while (log->healthy > 0 && log->pipe_front < log->issue_seq)
    {
      if (b && b->seq == log->pipe_front)
        {
          if (!durable_everywhere (log, b))
            break;
          b->durable = true;
          if (b->barrier)
            {
              barrier_durable (log, b);
              moved = true;
            }
          b = b->next;
          log->pipe_front++;
          continue;
        }
      if (log->pipe_front >= ms)
        break;
      log->pipe_front = HHC_MIN (ms, b ? b->seq : log->issue_seq);
    }
  return moved;
}

/* Free the buffers whose I/O is over (a barrier's once durable too, or
 * once no mirror is healthy).
 */
static bool
reap (struct hhc_log *log)
{
  struct buf **pp = &log->ifhead, *last = NULL;
  bool freed = false;

  while (*pp)
    {
      struct buf *b = *pp;
      if (b->pending > 0 || (b->barrier && !b->durable && log->healthy > 0))
        {
          last = b;
          pp = &b->next;
          continue;
        }
      *pp = b->next;
      log->inflight_bars -= b->barrier;
      b->next = log->freelist;
      log->freelist = b;
      freed = true;
    }
  log->iftail = last;
  return freed;
}

void
pipe_update (struct hhc_log *log)
{
  if (log->inflight_max <= 1)
    return;
  bool moved = advance_front (log);

  if (moved)
    apply_deaths (log);
  if (reap (log))
    {
      try_make_current (log);
      pthread_cond_broadcast (&log->writer_cv);
      moved = true;
    }
  /* Only on a change: log_barrier_wait calls this before each wait. */
  if (moved)
    pthread_cond_broadcast (&log->done_cv);
}

void
pipe_issue (struct hhc_log *log, struct buf *b)
{
  b->issued = b->wdone = b->fua_done = b->fua = b->sync = 0;
  b->durable = false;
  b->pending = 0;
  b->t0 = 0; /* set when a lane starts it: no queueing in the group wait */
  for (unsigned i = 0; i < log->nm; i++)
    {
      struct mirror *m = &log->m[i];
      uint8_t bit = 1u << i;
      if (m->failed)
        continue;
      b->issued |= bit;
      b->pending++;
      if (!b->barrier)
        m->plain = true;
      else if (m->can_fua && !m->plain)
        b->fua |= bit;
      else
        {
          b->sync |= bit;
          m->plain = false;
        }
    }
  /* Counted once per barrier, as the serial writer counts them: made
   * durable by a sync on some mirror, or by FUA writes alone.
   */
  if (b->barrier && b->issued)
    {
      log->st.syncs += b->sync != 0;
      log->st.fua_barriers += b->sync == 0;
    }
  b->next = NULL;
  if (log->iftail)
    log->iftail->next = b;
  else
    log->ifhead = b;
  log->iftail = b;
  log->issue_seq = b->seq + 1;
  if (b->barrier)
    {
      log->inflight_bars++;
      log->barrier_issued = b->seq;
      log->rev_issued_bar = b->rev_upto;
    }
  pthread_cond_broadcast (&log->pipe_cv);
  pipe_update (log); /* no healthy mirror: it is free again at once */
}

/* Every segment below the first one given to mirror i whose write is
 * not done yet (lock held).
 */
static uint64_t
written_prefix (const struct hhc_log *log, unsigned i)
{
  for (const struct buf *b = log->ifhead; b; b = b->next)
    if ((b->issued >> i & 1) && !(b->wdone >> i & 1))
      return b->seq;
  return log->issue_seq;
}

bool
pipe_written_below (struct hhc_log *log, uint64_t seq)
{
  for (unsigned i = 0; i < log->nm; i++)
    if (!log->m[i].failed && written_prefix (log, i) < seq)
      return false;
  return true;
}

void
pipe_synced (struct hhc_log *log, uint64_t seq)
{
  for (unsigned i = 0; i < log->nm; i++)
    if (!log->m[i].failed && log->m[i].synced < seq)
      log->m[i].synced = seq;
  pipe_update (log);
}

void
pipe_drain (struct hhc_log *log)
{
  while (log->ifhead)
    {
      pipe_update (log);
      if (log->ifhead)
        pthread_cond_wait (&log->done_cv, &log->lock);
    }
}

/* ---- lanes ---- */

/* Write b's segment to m (no lock): with FUA, every write of it. */
static int
lane_write (struct mirror *m, const struct io *io, bool fua)
{
  int r = 0;

  for (unsigned k = 0; r == 0 && k < io->n; k++)
    r = fua ? mirror_fsync (m, io->p[k], io->len[k], io->off[k])
            : dev_pwrite (m->dev, io->p[k], io->len[k], io->off[k]);
  return r;
}

/* Sync mirror i for b once every segment given to it before b is
 * written (lock held; dropped during the sync).  0, errno, or -1: the
 * mirror failed meanwhile (reported already).
 */
static int
lane_sync (struct hhc_log *log, unsigned i, const struct buf *b)
{
  struct mirror *m = &log->m[i];
  uint64_t c = 0;
  int r;

  while (!m->failed && (c = written_prefix (log, i)) <= b->seq)
    pthread_cond_wait (&log->pipe_cv, &log->lock);
  if (m->failed)
    return -1;
  uint64_t g0 = log->fail_gen; /* owe_voids_locked */
  hhc_unlock (&log->lock);
  r = mirror_fsync (m, NULL, 0, 0);
  hhc_lock (&log->lock);
  if (r == 0 && m->synced < c)
    m->synced = c;
  if (r == 0)
    m->dur_gen = HHC_MAX (m->dur_gen, g0);
  return r;
}

/* Take b on mirror i: write, sync if it is to be, record (lock held;
 * dropped during I/O).
 */
static void
lane_job (struct hhc_log *log, unsigned i, struct buf *b)
{
  struct mirror *m = &log->m[i];
  bool fua = b->fua >> i & 1, dead = m->failed;
  uint64_t g0 = log->fail_gen; /* owe_voids_locked */
  int r = -1;

  if (b->t0 == 0)
    b->t0 = hhc_now_ns ();
  hhc_unlock (&log->lock);
  if (!dead)
    r = lane_write (m, &b->pio, fua);
  hhc_lock (&log->lock);
  if (r == 0)
    {
      b->wdone |= 1u << i;
      pthread_cond_broadcast (&log->pipe_cv); /* a lane_sync may go on */
      pthread_cond_broadcast (&log->done_cv); /* persist_head may */
      if (b->sync >> i & 1)
        r = lane_sync (log, i, b);
      else if (fua)
        {
          b->fua_done |= 1u << i;
          m->dur_gen = HHC_MAX (m->dur_gen, g0);
        }
    }
  if (r > 0 && !m->failed)
    {
      hhc_unlock (&log->lock);
      mirror_failed (log, m, r);
      hhc_lock (&log->lock);
    }
  b->pending--;
  pipe_update (log);
}

/* The next segment mirror i's lanes take (lock held), or NULL.  Taken
 * in log order; a segment not given to it (it failed) is skipped.
 */
static struct buf *
lane_next (struct hhc_log *log, unsigned i)
{
  struct mirror *m = &log->m[i];

  while (m->pseq < log->issue_seq)
    {
      struct buf *b = in_flight (log, m->pseq++);
      if (b && (b->issued >> i & 1))
        return b;
    }
  return NULL;
}

static void *
lane_thread (void *arg)
{
  struct lane *ln = arg;
  struct hhc_log *log = ln->log;

  hhc_lock (&log->lock);
  for (;;)
    {
      struct buf *b = lane_next (log, ln->mi);
      if (b)
        lane_job (log, ln->mi, b);
      else if (log->pipe_stop)
        break;
      else
        pthread_cond_wait (&log->pipe_cv, &log->lock);
    }
  hhc_unlock (&log->lock);
  return NULL;
}

int
pipe_start (struct hhc_log *log)
{
  if (log->inflight_max <= 1)
    return 0;
  log->issue_seq = log->pipe_front = log->written_seq;
  for (unsigned i = 0; i < log->nm; i++)
    {
      log->m[i].pseq = log->m[i].synced = log->written_seq;
      log->m[i].can_fua = dev_can_fua (log->m[i].dev);
    }
  log->nlanes = log->nm * log->inflight_max;
  log->lanes = calloc (log->nlanes, sizeof *log->lanes);
  if (log->lanes == NULL)
    return ENOMEM;
  for (unsigned k = 0; k < log->nlanes; k++)
    {
      struct lane *ln = &log->lanes[k];
      *ln = (struct lane){ .log = log, .mi = k % log->nm };
      int r = pthread_create (&ln->thread, NULL, lane_thread, ln);
      if (r)
        return r;
      ln->started = true;
    }
  return 0;
}

void
pipe_stop (struct hhc_log *log)
{
  if (log->lanes == NULL)
    return;
  hhc_lock (&log->lock);
  log->pipe_stop = true;
  pthread_cond_broadcast (&log->pipe_cv);
  hhc_unlock (&log->lock);
  for (unsigned k = 0; k < log->nlanes; k++)
    if (log->lanes[k].started)
      pthread_join (log->lanes[k].thread, NULL);
  free (log->lanes);
  log->lanes = NULL;
}
