/* The log's writer thread: it writes the sealed buffers, in order, at
 * the tail of every healthy mirror, seals the current buffer when a
 * barrier is owed (after the group commit's wait), and, when idle,
 * voids failed mirrors and makes room (log-reclaim.c).
 *
 * A sealed buffer goes out in three steps (write_buffer): decide (lock
 * held: pop it, its base and barrier flag, where its segment goes and
 * whether it can be written), write (lock dropped: build the header,
 * the wrap marker and the I/O, write it to the mirrors), complete
 * (lock held: the ring slot and the tail, its deaths, the durable
 * barrier, the buffer free again).  A buffer that cannot be written
 * stops the log (log_fail_locked): later barriers must not count it.
 *
 * With log-inflight above 1 the write step only gives the segment to
 * the mirrors' lanes and the writer goes on (writer_issue): the
 * segment is placed at once, and the frontier of durable segments
 * (log-pipeline.c) moves durable_barrier.  barrier_issued is the
 * newest barrier given to the mirrors: a barrier owed is one no
 * issued barrier covers yet.
 *
 * The writer is the only one to write log->tail_lpos, last_crc, the
 * header buffers and the deaths vector; it reads them without the
 * lock.
 */
#include <config.h>

#include <assert.h>
#include <stdio.h>
#include <time.h>

#include "common.h"
#include "log_int.h"

/* Where the writer puts one sealed buffer (write_buffer). */
struct wplan {
  uint64_t l;       /* logical position of its segment (after a wrap) */
  uint64_t hl;      /* header bytes */
  uint64_t dl, len; /* data bytes (padded), both */
  uint32_t flags;   /* its header's (LOG_F_BARRIER or 0) */
};

/* Build b's header into hdr (checksum over header and data); prev is
 * the checksum of the segment before it.  Returns the checksum.
 */
static uint32_t
build_header (struct hhc_log *log, struct buf *b, unsigned char *hdr,
              uint32_t hl, uint64_t phys, uint32_t flags, uint32_t prev)
{
  struct log_seg_hdr h = {
    .seq = b->seq,
    .base = b->base,
    .flags = flags | LOG_F_XXH3,
    .nblocks = b->nblocks,
    .nrevokes = b->revokes.len,
    .hdr_len = hl,
    .seg_id = phys / LOG_ALIGN,
    .prev_checksum = prev,
  };

  memcpy (h.log_uuid, log->uuid, 16);
  memcpy (h.cache_uuid, log->cache_uuid, 16);
  log_seg_encode (&h, b->lbas, b->revokes.ptr, hdr);
  return log_seg_link (
      log_seg_seal (hdr, b->data, (size_t)b->nblocks * log->bs));
}

/* Is sealed buffer b (the queue's first) to go out as a barrier (lock
 * held)?  If a FLUSH waits for it (its segment, or revokes it carries,
 * and no barrier issued yet covers them), or past half full: every
 * segment is a barrier then, so that entries it supersedes die (and
 * the head can move) without waiting for a client's FLUSH.
 */
static bool
barrier_owed (struct hhc_log *log, const struct buf *b)
{
  return b->barrier || used_bytes (log) * 2 >= log->region_size
         || (b->seq >= log->want_barrier
             && log->want_barrier > log->barrier_issued)
         || (log->want_revs > log->rev_issued_bar
             && b->rev_upto >= log->want_revs);
}

/* Decide for sealed buffer b, the queue's first (lock held): pop it,
 * its base and barrier flag, where its segment goes (*p).  0: write
 * it; EIO: it cannot be (no healthy mirror, or no room: only when
 * stopping with a full log); ENOMEM: no memory for its deaths.
 */
static int
writer_decide (struct hhc_log *log, struct buf *b, struct wplan *p)
{
  bool barrier = barrier_owed (log, b);
  uint64_t phys;

  p->hl = log_seg_hdr_len (b->nblocks, b->revokes.len);
  p->dl = log_seg_data_len (b->nblocks, log->bs);
  p->len = p->hl + p->dl;
  /* The buffer's reservation guarantees the room (room_for_buffer). */
  p->l = log->tail_lpos;
  phys = p->l % log->region_size;
  if (phys + p->len > log->region_size)
    p->l += log->region_size - phys;
  bool fits = p->l + p->len <= log->phead_lpos + log->region_size
              && p->len <= b->reserved;
  /* Pop b; its header names the base of this moment (build_header
   * runs without the lock).  A segment sealed before the last re-logged
   * block's keeps the last run's base even when it is taken after the
   * switch: a barrier there with this run's base would make a replay
   * skip the last run's segments, where the blocks re-logged after it
   * still are.
   */
  if (b->seq >= log->base_from)
    log->base_seq = log->rebase_seq;
  b->base = log->base_seq;
  log->qhead = b->next;
  if (log->qhead == NULL)
    log->qtail = NULL;
  b->barrier = barrier;
  p->flags = b->barrier ? LOG_F_BARRIER : 0;
  if (log->healthy == 0 || !fits)
    return EIO;
  /* Room for its deaths now, while failing costs no more than this
   * segment (writer_complete must record them once it is written).
   */
  return deaths_reserve (log, b->deaths.len);
}

/* The writes for b's segment (no lock: the writer's own buffers).  The
 * header buffer was allocated for the largest header (alloc_mem), the
 * marker too.  0 or ENOMEM.
 */
static int
writer_build_io (struct hhc_log *log, struct buf *b, const struct wplan *p,
                 struct io *io)
{
  uint64_t phys = p->l % log->region_size;
  uint32_t prev = log->last_crc; /* the writer's own */

  if (log->hdrcap < p->hl)
    {
      free (log->hdrbuf);
      log->hdrbuf = hhc_alloc_aligned (p->hl);
      log->hdrcap = log->hdrbuf ? p->hl : 0;
      if (log->hdrbuf == NULL)
        return ENOMEM;
    }
  log->last_crc
      = build_header (log, b, log->hdrbuf, p->hl, phys, p->flags, prev);
  if (p->l != log->tail_lpos
      && log->tail_lpos % log->region_size + LOG_ALIGN <= log->region_size)
    {
      /* Wrap marker where the segment would have gone. */
      uint64_t mp = log->tail_lpos % log->region_size;
      struct buf empty = { .seq = b->seq, .base = b->base };
      build_header (log, &empty, b->mark, LOG_ALIGN, mp, LOG_F_WRAP, prev);
      io->p[io->n] = b->mark;
      io->len[io->n] = LOG_ALIGN;
      io->off[io->n++] = LOG_REGION_OFF + mp;
    }
  /* Header and data in one write, when the header fits in front of the
   * data (always: the largest header has room there).
   */
  size_t hmax = b->data - b->mem;
  if (p->hl <= hmax)
    {
      memcpy (b->data - p->hl, log->hdrbuf, p->hl);
      io->p[io->n] = b->data - p->hl;
      io->len[io->n] = p->hl + p->dl;
      io->off[io->n++] = LOG_REGION_OFF + phys;
    }
  else
    {
      /* Only one segment at a time may point at the writer's own
       * header buffer: with barriers in flight a lane may still be
       * writing it when the next segment is built.  The buffers'
       * header room is sized for the largest header, so this branch
       * is only taken at log-inflight=1.
       */
      assert (log->inflight_max <= 1);
      io->p[io->n] = log->hdrbuf;
      io->len[io->n] = p->hl;
      io->off[io->n++] = LOG_REGION_OFF + phys;
      if (b->nblocks)
        {
          io->p[io->n] = b->data;
          io->len[io->n] = p->dl;
          io->off[io->n++] = LOG_REGION_OFF + phys + p->hl;
        }
    }
  io->sync = b->barrier;
  return 0;
}

/* Write b's segment (lock held; dropped during I/O).  0 or errno. */
static int
writer_write (struct hhc_log *log, struct buf *b, const struct wplan *p)
{
  uint64_t t0 = hhc_now_ns ();
  struct io io = { 0 };
  int r;

  log->writer_busy = true;
  hhc_unlock (&log->lock);
  r = writer_build_io (log, b, p, &io);
  if (r == 0)
    r = mirrors_io (log, &io);
  hhc_lock (&log->lock);
  log->writer_busy = false;
  if (r)
    return r;
  log->st.segments++;
  log->st.bytes += p->len;
  log->st.barriers += b->barrier;
  if (b->barrier && b->joiners > 0)
    {
      /* b's clients come back to join the current buffer, next to
       * those that joined it while b was written.
       */
      log->last_group = b->joiners;
      log->last_done_ns = hhc_now_ns ();
      log->last_barrier_ns = log->last_done_ns - t0;
      if (log->cur)
        log->cur->expect = log->cur->joiners + b->joiners;
    }
  return 0;
}

/* b's segment is placed (lock held): the ring slot, the tail, its
 * reservation, its deaths (applied once a barrier at or after it is
 * durable).
 */
static void
writer_place (struct hhc_log *log, struct buf *b, const struct wplan *p)
{
  struct seg *g = ring_of (log, b->seq);
  g->state = SEG_WRITTEN;
  g->lpos = p->l;
  g->len = p->len;
  log->tail_lpos = p->l + p->len;
  log->reserved -= b->reserved;
  log->written_seq = b->seq + 1;
  /* writer_decide made room for the deaths of a segment it wrote: this
   * fails only when the log has stopped, and its deaths no longer
   * matter then.
   */
  if (deaths_reserve (log, b->deaths.len) == 0)
    for (size_t i = 0; i < b->deaths.len; i++)
      log->deaths.ptr[log->deaths.len++]
          = (struct death){ b->seq, b->deaths.ptr[i] };
}

/* Past half full, ask for write-back (lock held; dropped). */
static void
writer_pressure (struct hhc_log *log)
{
  struct log_callbacks cb = log->cb;
  if (cb.pressure && used_bytes (log) * 2 >= log->region_size)
    {
      hhc_unlock (&log->lock);
      cb.pressure (cb.opaque);
      hhc_lock (&log->lock);
    }
}

/* After b was written (r == 0) or not (lock held; dropped for the
 * pressure callback): placed, the durable barrier; b is free again.
 */
static void
writer_complete (struct hhc_log *log, struct buf *b, const struct wplan *p,
                 int r)
{
  if (r)
    {
      /* Could not write it (no memory, or stopping with a full log):
       * later barriers must not count it, so the log stops here.
       */
      char what[64];
      snprintf (what, sizeof what, "segment %" PRIu64 " could not be written",
                b->seq);
      log_fail_locked (log, what, r);
    }
  writer_place (log, b, p);
  if (r == 0 && b->barrier)
    {
      log->durable_barrier = log->barrier_issued = b->seq;
      log->rev_durable = log->rev_issued_bar = b->rev_upto;
    }
  apply_deaths (log);
  pthread_cond_broadcast (&log->done_cv);
  /* The buffer is free again. */
  b->next = log->freelist;
  log->freelist = b;
  try_make_current (log);
  writer_pressure (log);
}

/* Pipelined (log-inflight > 1): build b's writes, place its segment
 * and give it to the mirrors' lanes (log-pipeline.c), without waiting
 * for them (lock held; dropped to build).
 */
static void
writer_issue (struct hhc_log *log, struct buf *b, const struct wplan *p)
{
  int r;

  log->writer_busy = true;
  hhc_unlock (&log->lock);
  b->pio = (struct io){ 0 };
  r = writer_build_io (log, b, p, &b->pio);
  hhc_lock (&log->lock);
  log->writer_busy = false;
  if (r)
    {
      writer_complete (log, b, p, r);
      return;
    }
  writer_place (log, b, p);
  log->st.segments++;
  log->st.bytes += p->len;
  log->st.barriers += b->barrier;
  pipe_issue (log, b);
  writer_pressure (log);
}

/* Write sealed buffer b at the tail (lock held; dropped during I/O). */
static void
write_buffer (struct hhc_log *log, struct buf *b)
{
  struct wplan p;
  int r = writer_decide (log, b, &p);

  if (r == 0 && log->inflight_max > 1)
    {
      writer_issue (log, b, &p);
      return;
    }
  if (r == 0)
    r = writer_write (log, b, &p);
  writer_complete (log, b, &p, r);
}

/* Pipelined: b would go out as a barrier while inflight_max of them are
 * in flight already (lock held)?
 */
static bool
pipe_full (struct hhc_log *log, const struct buf *b)
{
  return log->inflight_max > 1 && log->inflight_bars >= log->inflight_max
         && log->healthy > 0 && barrier_owed (log, b);
}

/* Group commit (lock held).  A barrier owed for the current buffer
 * waits a little before it is sealed while fewer FLUSHes have asked
 * for it than are expected (b->expect): those that joined it while the
 * last barrier was written, plus the clients of that barrier, likely
 * back with their next write and FLUSH soon after it completed.
 * Sealed at once, a barrier carries only the FLUSHes that came while
 * the one before it was written, and clients settle into two groups
 * that alternate, each FLUSH waiting two barrier times (measured on a
 * 4 ms emulated HDD: FLUSH p50 9.6 ms from 4 clients, 5.1 ms from one;
 * with this wait 5.2 ms from 4, and 1.4x the FLUSHes per second from
 * 16).  The wait ends when as many as expected have asked, or half the
 * last barrier's write time (at most GROUP_WAIT_MAX_NS) after the
 * writer became free or the first FLUSH asked, whichever is later.
 * Only for a log whose barriers take GROUP_WAIT_MIN_BARRIER_NS or more
 * (an HDD, a remote mirror): on a fast one the clients are not back in
 * time and the wait only adds to the latency.  One client alone never
 * waits.  Returns the time to wait, 0 to seal now.  Only the moment a
 * barrier is sealed changes: every FLUSH is still covered by the
 * barrier its ticket names, and the wait is bounded.
 */
#define GROUP_WAIT_MAX_NS 2000000u
#define GROUP_WAIT_MIN_BARRIER_NS 1000000u

static uint64_t
group_wait_ns (struct hhc_log *log)
{
  const struct buf *b = log->cur;
  uint64_t window, now, start;

  if (log->stop || b->joiners == 0 || b->joiners >= b->expect
      || log->last_barrier_ns < GROUP_WAIT_MIN_BARRIER_NS)
    return 0;
  window = HHC_MIN (log->last_barrier_ns / 2, (uint64_t)GROUP_WAIT_MAX_NS);
  start = HHC_MAX (b->first_want_ns, log->last_done_ns);
  now = hhc_now_ns ();
  if (now >= start + window)
    return 0;
  return start + window - now;
}

/* The last mirror failed: what FLUSHes made durable only in the log
 * must be on the SSD now (its FLUSHes commit the SSD themselves from
 * here on).  Once (lock held; dropped).  Returns whether it ran.
 */
static bool
last_checkpoint (struct hhc_log *log)
{
  if (log->healthy > 0 || log->lost_ckpt || log->cb.checkpoint == NULL)
    return false;
  struct log_callbacks cb = log->cb;
  log->lost_ckpt = true;
  hhc_unlock (&log->lock);
  int r = cb.checkpoint (cb.opaque);
  hhc_lock (&log->lock);
  if (r == 0)
    log->st.checkpoints++;
  return true;
}

/* A barrier is owed (its segment may have been sealed because it was
 * full, and written without the flag): seal what is current, after
 * the group commit's wait (lock held).  Returns false if it waited
 * instead.
 */
static bool
seal_barrier (struct hhc_log *log)
{
  uint64_t wait = group_wait_ns (log);

  if (wait > 0)
    {
      struct timespec ts;
      clock_gettime (CLOCK_REALTIME, &ts);
      ts.tv_nsec += (long)wait;
      ts.tv_sec += ts.tv_nsec / 1000000000L;
      ts.tv_nsec %= 1000000000L;
      pthread_cond_timedwait (&log->writer_cv, &log->lock, &ts);
      return false;
    }
  log->cur->barrier = true;
  seal (log);
  return true;
}

/* Void failed mirrors in the background, every VOID_RETRY_NS, and
 * only when idle: the healthy mirrors come first (lock held; dropped).
 * Returns whether it tried.
 */
static bool
void_when_idle (struct hhc_log *log)
{
  /* A failed mirror that no durable write has proved outlived (the
   * volume went idle): a sync, when nothing is in flight.
   */
  bool prove = log->ifhead == NULL && unproven_locked (log);

  if ((__atomic_load_n (&log->unvoided, __ATOMIC_ACQUIRE) == 0 && !prove)
      || hhc_now_ns () < log->next_void_ns)
    return false;
  log->next_void_ns = hhc_now_ns () + VOID_RETRY_NS;
  hhc_unlock (&log->lock);
  if (prove)
    log_prove_failed (log);
  log_void_failed (log);
  hhc_lock (&log->lock);
  return true;
}

void *
writer_thread (void *arg)
{
  struct hhc_log *log = arg;

  hhc_lock (&log->lock);
  for (;;)
    {
      struct buf *b = log->qhead;
      pipe_update (log);
      if (last_checkpoint (log))
        continue;
      if (b == NULL && log->cur
          && (log->want_barrier > log->barrier_issued
              || log->want_revs > log->rev_issued_bar))
        {
          if (!seal_barrier (log))
            continue;
          b = log->qhead;
        }
      if (b && pipe_full (log, b))
        {
          pthread_cond_wait (&log->writer_cv, &log->lock);
          continue;
        }
      if (b)
        {
          write_buffer (log, b);
          continue;
        }
      if (log->stop)
        {
          pipe_drain (log);
          break;
        }
      if (void_when_idle (log) || make_room (log) || active_reclaim (log))
        continue;
      struct timespec ts;
      hhc_deadline (&ts, log->cur == NULL ? 50 : 1000);
      pthread_cond_timedwait (&log->writer_cv, &log->lock, &ts);
    }
  hhc_unlock (&log->lock);
  return NULL;
}
