/* Room in the log: the writer makes it when no buffer can become
 * current.  In order of cost: persist a head that moved (the region
 * behind it may then be reused; with write-ahead, the SSD is committed
 * first), write an emergency barrier so that superseded entries die
 * and owed revokes get durable, copy the head segment's few live
 * entries forward (active reclaim), or ask the volume to write dirty
 * blocks back (the pressure callback).
 *
 * Every function here is called by the writer with log->lock held and
 * may drop it (for the callbacks, or I/O under io_lock: io_lock ->
 * lock).  persist_head is also called by log_rebase and log_discard
 * (log.c) while the writer runs: its sync and superblock write, and
 * the superblock fields, are under io_lock, so one at a time.
 * log_prove_failed (a sync that proves a failed mirror's void, the
 * same way: log-writer.c when idle, log_stop) takes io_lock itself,
 * with no lock held.
 */
#include <config.h>

#include "common.h"
#include "log_int.h"

/* Write-ahead checkpoint (lock held; dropped during it): FLUSH synced
 * only the log, so the segments behind the in-memory head may hold the
 * only durable copy of what a FLUSH covered (the SSD's slot data and
 * metadata are not synced for it).  Commit the SSD: afterwards it
 * holds everything those segments did, and the head may be persisted
 * up to where it was when the commit began.
 */
static int
checkpoint_locked (struct hhc_log *log)
{
  struct log_callbacks cb = log->cb;
  uint64_t lpos = mem_head_lpos (log), seq = mem_head_seq (log);
  int r;

  if (cb.checkpoint == NULL || lpos <= log->ckpt_lpos)
    return 0;
  hhc_unlock (&log->lock);
  r = cb.checkpoint (cb.opaque);
  hhc_lock (&log->lock);
  if (r == 0 && lpos > log->ckpt_lpos)
    {
      log->ckpt_lpos = lpos;
      log->ckpt_seq = seq;
      log->st.checkpoints++;
    }
  return r;
}

/* Persist the in-memory head (lock held; dropped during I/O).  Every
 * written segment is synced first: the entries that made the old head
 * segments dead must be durable before those segments may be
 * overwritten.  With a checkpoint callback (write-ahead), the SSD is
 * committed first and the head persisted no further than where it was
 * when that commit began (checkpoint_locked).
 */
int
persist_head (struct hhc_log *log)
{
  struct io sync = { .sync = true, .sync_only = true };
  uint64_t lpos, seq;
  int r;

  if ((r = checkpoint_locked (log)) != 0)
    return r;
  hhc_unlock (&log->lock);
  hhc_lock (&log->io_lock); /* io_lock -> lock */
  hhc_lock (&log->lock);
  lpos = mem_head_lpos (log);
  seq = mem_head_seq (log);
  if (log->cb.checkpoint && lpos > log->ckpt_lpos)
    {
      /* The head moved on during the checkpoint: only as far as it. */
      lpos = log->ckpt_lpos;
      seq = log->ckpt_seq;
    }
  if (lpos <= log->phead_lpos)
    {
      hhc_unlock (&log->io_lock);
      return 0;
    }
  /* Pipelined: the sync covers the writes done before it begins. */
  uint64_t placed = log->written_seq;
  while (log->inflight_max > 1 && log->healthy > 0
         && !pipe_written_below (log, placed))
    pthread_cond_wait (&log->done_cv, &log->lock);
  hhc_unlock (&log->lock);
  log->hint_off = lpos % log->region_size;
  log->hint_seq = seq;
  r = mirrors_io_locked (log, &sync);
  if (r == 0)
    r = write_sb_locked (log);
  hhc_lock (&log->lock);
  if (r == 0)
    pipe_synced (log, placed);
  if (r == 0)
    {
      log->phead_lpos = lpos;
      log->phead_seq = seq;
      log->st.head_persists++;
    }
  hhc_unlock (&log->io_lock);
  return r;
}

/* ---- active reclaim ---- */

#define RECLAIM_MAX 64 /* keys relogged at a time */

/* Bytes the live entries of the written segments would take if copied
 * (lock held).
 */
static uint64_t
live_bytes (struct hhc_log *log)
{
  uint64_t n = 0;

  for (uint64_t q = log->head_seq; q < log->written_seq; q++)
    {
      uint32_t l = ring_of (log, q)->live;
      if (l)
        n += (uint64_t)l * log->bs + log_seg_hdr_len (l, 0);
    }
  return n;
}

/* No room for a normal buffer: make a reclaim buffer current for the
 * head's live entries, if copying them pays.  Copying pays if the head
 * holds less live data (live) than its length with the dead segments
 * behind it (gain), and also when it is all live but the log as a
 * whole is at most half live: the copy costs what it frees, and the
 * head moves on towards the dead entries (a backend outage leaves
 * blocks written once, never written back, at the head: with nothing
 * else, every FLUSH then waited for the backend).  The buffer holds
 * only the head's live blocks, so its segment (and the waste of a
 * wrap before it) fits in what is left, where a whole segment's
 * reservation did not; it may use the room kept for reclaim.  Returns
 * false if not (no buffer made current).
 */
static bool
reclaim_buffer (struct hhc_log *log, const struct seg *g, uint64_t live,
                uint64_t gain)
{
  uint32_t nb
      = HHC_MIN (HHC_MIN (g->live, (uint32_t)RECLAIM_MAX), log->max_blocks);
  uint64_t res = HHC_ROUND_UP ((uint64_t)nb * log->bs, LOG_ALIGN)
                 + log_seg_hdr_len (nb, log->rev_cap);

  if ((live >= gain && live_bytes (log) * 2 > log->region_size)
      || log->freelist == NULL || !room_for (log, 2 * res + EMERGENCY, 2))
    return false;
  struct buf *f = log->freelist;
  log->freelist = f->next;
  make_current (log, f, res);
  f->limit = HHC_MAX (nb, 1u);
  f->reclaim_from = log->head_seq % log->ring_cap;
  if (full_of_revokes (log, f))
    seal (log);
  return true;
}

/* Relog up to RECLAIM_MAX keys of the head segment g into the current
 * buffer (lock held, dropped for the callbacks).
 */
static void
relog_head (struct hhc_log *log, const struct seg *g)
{
  uint32_t keys[RECLAIM_MAX];
  uint64_t lbas[RECLAIM_MAX];
  uint64_t cur_seq = log->cur->seq;
  unsigned n = 0;

  for (uint32_t k = g->chain; k != LOG_NONE && n < RECLAIM_MAX;
       k = log->keys[k].next)
    {
      lbas[n] = log->keys[k].lba;
      keys[n++] = k;
    }
  struct log_callbacks cb = log->cb;
  hhc_unlock (&log->lock);
  for (unsigned i = 0; i < n; i++)
    cb.relog (cb.opaque, keys[i], lbas[i]);
  hhc_lock (&log->lock);
  log->st.reclaimed += n;
  /* Under a barrier soon, so that the copied entries die. */
  if (log->want_barrier < cur_seq)
    log->want_barrier = cur_seq;
}

/* Relog the keys of the head segment when space is short and the head
 * holds little live data (active reclaim; lock held, dropped).
 */
bool
active_reclaim (struct hhc_log *log)
{
  if (!log->rebased || log->cb.relog == NULL || log->healthy == 0
      || log->head_seq >= log->written_seq)
    return false;
  struct seg *g = ring_of (log, log->head_seq);
  if (g->state != SEG_WRITTEN || g->chain == LOG_NONE)
    return false;
  uint64_t live = (uint64_t)g->live * log->bs + log_seg_hdr_len (g->live, 0);
  /* Moving the head's live blocks frees the head segment and every
   * dead one behind it.
   */
  uint64_t q = log->head_seq + 1, gain;
  while (q < log->written_seq && ring_of (log, q)->live == 0)
    q++;
  gain = (q < log->written_seq ? ring_of (log, q)->lpos : log->tail_lpos)
         - g->lpos;
  bool jammed = log->cur == NULL && !room_for_buffer (log);
  if (jammed)
    {
      if (!reclaim_buffer (log, g, live, gain))
        return false;
      if (log->cur == NULL)
        return true;
    }
  else if (log->cur == NULL || used_bytes (log) * 2 < log->region_size
           || live * 2 > gain)
    return false; /* not needed yet, or mostly live: write-back */
  relog_head (log, g);
  return true;
}

/* ---- make room ---- */

/* Entries superseded by written segments die only under a barrier,
 * and a FLUSH may wait for revokes that no buffer could take: if
 * either is owed, write a barrier into the room kept for it, a header
 * with as many of the pending revokes as fit in it (in order; the
 * rest go on in the next buffer).  Returns whether it was queued.
 */
static bool
emergency_barrier (struct hhc_log *log)
{
  bool revs_owed
      = log->want_revs > log->rev_durable && log->pending_rev.len > 0;

  if ((log->deaths_done >= log->deaths.len
       && log->durable_barrier + 1 >= log->written_seq && !revs_owed)
      || !room_for (log, EMERGENCY, 1))
    return false;
  struct buf *f = log->freelist;
  size_t len = log->pending_rev.len;
  /* A header of one LOG_ALIGN at most: at an aligned tail it needs
   * no wrap, so the room kept (EMERGENCY) always holds it.  An
   * 8 KiB header could need 4 KiB of wrap waste more than that,
   * and then failed the log (found by the spin model's review).
   */
  size_t n = HHC_MIN (HHC_MIN (len, (size_t)log->rev_cap),
                      (size_t)(LOG_ALIGN - LOG_HDR_FIXED) / 8);
  log->freelist = f->next;
  log->pending_rev.len = n; /* make_current takes these n */
  make_current (log, f, EMERGENCY);
  if (len > n)
    memmove (log->pending_rev.ptr, log->pending_rev.ptr + n,
             (len - n) * sizeof (uint64_t));
  log->pending_rev.len = len - n;
  log->cur->barrier = true;
  queue_sealed (log);
  return true;
}

/* No buffer can become current for lack of room: persist a newer head
 * if the head moved, else ask for write-back (lock held; dropped).
 * Returns true if it made progress.
 */
bool
make_room (struct hhc_log *log)
{
  if (log->cur || log->freelist == NULL || log->healthy == 0)
    return false;
  advance_head (log); /* revokes may have emptied head segments */
  if (room_for_buffer (log))
    {
      try_make_current (log);
      return true;
    }
  /* Pipelined: segments in flight make room once durable (their
   * deaths); an emergency barrier or a head persisted now would only
   * wait for them.
   */
  if (log->ifhead)
    return false;
  if (log->rebased && mem_head_lpos (log) > log->phead_lpos
      && persist_head (log) == 0)
    {
      try_make_current (log);
      return true;
    }
  if (emergency_barrier (log))
    return true;
  log->st.full_waits++;
  struct log_callbacks cb = log->cb;
  if (cb.pressure)
    {
      hhc_unlock (&log->lock);
      cb.pressure (cb.opaque);
      hhc_lock (&log->lock);
    }
  return false;
}

/* A failed mirror waits for proof that a complete one outlived it
 * (log_int.h).
 */
void
log_prove_failed (struct hhc_log *log)
{
  struct io sync = { .sync = true, .sync_only = true };
  HHC_SCOPED_LOCK (&log->io_lock);

  /* A sync the healthy mirrors make now: the proof if it succeeds
   * (mirrors_io_locked owes the voids), nothing if they fail too.  As
   * persist_head's: with barriers in flight, after the writes placed so
   * far, and the lanes told what it made durable (else the frontier
   * waits for a sync of theirs that their rules no longer ask for).
   */
  hhc_lock (&log->lock);
  bool need = unproven_locked (log);
  uint64_t placed = log->written_seq;
  while (need && log->inflight_max > 1 && log->healthy > 0
         && !pipe_written_below (log, placed))
    pthread_cond_wait (&log->done_cv, &log->lock);
  hhc_unlock (&log->lock);
  if (need && mirrors_io_locked (log, &sync) == 0)
    {
      hhc_lock (&log->lock);
      pipe_synced (log, placed);
      hhc_unlock (&log->lock);
    }
}
