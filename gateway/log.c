/* The HDD barrier log: start and stop, barriers (a FLUSH's ticket),
 * the start-up rebase, and the queries.  See log.h for the API,
 * log_int.h for the files of the log and its locks, log-format.h for
 * the layout, and docs/log.md for the protocol and why it is safe.
 *
 * The log's life: log_open (log-open.c: superblocks; log-scan.c: every
 * mirror's chain, at once), log_replay if the SSD was lost
 * (log-replay.c), log_start (the writer runs),
 * log_rebase (every dirty block logged again under this run's base),
 * then log_append / log_revoke (log-buffer.c) and log_barrier for each
 * FLUSH, and log_stop.
 *
 * A barrier: every key that is dirty but unlogged is read back
 * (relog_unlogged) into the current buffer; the ticket names that
 * buffer (or the newest sealed one) and the revoke records issued so
 * far; the writer writes it with the barrier flag and a sync; the
 * ticket is done once durable_barrier and rev_durable reach it.  With
 * no healthy mirror left it fails (EIO) and the caller falls back to
 * writing every dirty block back.
 */
#include <config.h>

#include "common.h"
#include "log_int.h"

/* Continue after the chain found by the scan (log_start). */
static void
continue_chain (struct hhc_log *log)
{
  log->tail_lpos = log->scan.end_lpos;
  log->next_seq = log->scan.end_seq;
  log->last_crc = log->scan.end_crc;
  log->phead_lpos = log->hint_off;
  log->phead_seq = log->hint_seq;
  log->head_seq = log->written_seq = log->rebase_seq = log->next_seq;
  /* A barrier written before log_rebase has logged the dirty blocks
   * again must not move the replay's start past the last run's
   * segments, where those blocks still are: until then, segments name
   * the base that a replay would use now.  (With this run's base, a
   * crash just after the start-up barrier, a full first segment of
   * re-logged blocks, then the loss of the SSD lost every dirty block
   * not yet re-logged, though a FLUSH of the last run covered it.)
   */
  log->base_seq = log->scan.last_barrier >= 0
                      ? log->scan.segs.ptr[log->scan.last_barrier].base
                      : log->next_seq;
  log->base_from = UINT64_MAX;
  log->durable_barrier = log->barrier_issued = log->next_seq - 1;
  log->rev_durable = log->rev_issued_bar = 0;
  log->want_barrier = 0;
}

int
log_start (struct hhc_log *log, const uint8_t cache_uuid[16], uint32_t nkeys,
           const struct log_callbacks *cb)
{
  bool repair = memcmp (log->cache_uuid, cache_uuid, 16) != 0;
  bool joined = false;
  int r;

  if ((r = alloc_mem (log, log->nbufs, nkeys)) != 0)
    return r;
  if (cb)
    log->cb = *cb;
  for (unsigned i = 0; i < log->nm; i++)
    joined |= log->m[i].blank;
  memcpy (log->cache_uuid, cache_uuid, 16);
  continue_chain (log);
  /* A superblock of an earlier version is rewritten before the first
   * segment of this run: a build that wrote it then refuses the log
   * (LOG_VERSION) rather than misread its segments.
   */
  if (repair || joined || log->old_version)
    {
      if (joined)
        hhc_msg (log->msgfn, HHC_MSG_INFO,
                 "log: a blank mirror joins the log; it is complete once "
                 "this start has written every dirty block to it");
      /* Both copies: a copy of version 1 left beside it would be one
       * that an earlier build, reading each copy alone, still takes.
       */
      if ((r = write_sb (log)) != 0 || (r = write_sb (log)) != 0)
        return r;
      log->old_version = false;
    }
  for (unsigned i = 0; i < log->nm; i++)
    log->m[i].blank = false;
  hhc_lock (&log->lock);
  log->freelist = NULL;
  for (unsigned i = 0; i < log->nbufs; i++)
    {
      log->bufs[i].next = log->freelist;
      log->freelist = &log->bufs[i];
    }
  try_make_current (log);
  hhc_unlock (&log->lock);
  if ((r = mirrors_start_threads (log)) != 0 || (r = pipe_start (log)) != 0
      || (r = pthread_create (&log->writer, NULL, writer_thread, log)) != 0)
    {
      pipe_stop (log); /* the lanes that started (free_log cannot) */
      return r;
    }
  log->started = true;
  return 0;
}

void
log_stop (struct hhc_log *log)
{
  if (log == NULL || !log->started)
    return;
  hhc_lock (&log->lock);
  /* What the buffer holds goes out under a last barrier (best effort:
   * nothing waits for room or re-logs, the cache has every block).
   */
  if (log->cur && (log->cur->nblocks || log->cur->revokes.len))
    log->want_barrier = HHC_MAX (log->want_barrier, log->cur->seq);
  log->stop = true;
  log->cb.pressure = NULL; /* the flusher is gone */
  log->cb.relog = NULL;
  pthread_cond_broadcast (&log->writer_cv);
  hhc_unlock (&log->lock);
  pthread_join (log->writer, NULL);
  pipe_stop (log); /* the writer drained it */
  mirrors_stop_threads (log);
  hhc_lock (&log->lock);
  log->next_dial_ns = 0; /* a last try, dialling too */
  hhc_unlock (&log->lock);
  log_prove_failed (log);
  log_void_failed (log);
  log->started = false;
}

void
log_close (struct hhc_log *log)
{
  log_stop (log);
  free_log (log);
}

/* ---- barriers ---- */

/* Read key k back through the relog callback while it is dirty but
 * not in the log: 0 or errno.
 */
static int
relog_key (struct hhc_log *log, uint32_t k)
{
  for (;;)
    {
      hhc_lock (&log->lock);
      /* Wait for a buffer only while the key still needs one: the
       * relog that logged it may have filled the log, and waiting
       * then for a buffer it no longer needs waited for write-back
       * (fuzz-log hung so; a FLUSH during a backend outage would
       * have waited for the backend).
       */
      while (is_unlogged (log, k)
             && (log->cur == NULL || log->cur->reclaim_from != LOG_NONE)
             && log->healthy > 0)
        pthread_cond_wait (&log->buf_cv, &log->lock);
      bool todo = is_unlogged (log, k) && log->healthy > 0;
      uint64_t lba = log->keys[k].lba;
      struct log_callbacks cb = log->cb;
      hhc_unlock (&log->lock);
      if (!todo)
        return 0;
      int r = cb.relog ? cb.relog (cb.opaque, k, lba) : EIO;
      if (r)
        return r;
      hhc_lock (&log->lock);
      log->st.relogged++;
      hhc_unlock (&log->lock);
    }
}

/* Read back every key that is dirty but not in the log (snapshot). */
static int
relog_unlogged (struct hhc_log *log)
{
  HHC_CLEANUP_FREE uint64_t *snap = NULL;
  size_t words = ((size_t)log->nkeys + 63) / 64;
  int r;

  hhc_lock (&log->lock);
  if (log->nunlogged == 0)
    {
      hhc_unlock (&log->lock);
      return 0;
    }
  snap = malloc (words * 8);
  if (snap)
    memcpy (snap, log->unlogged, words * 8);
  hhc_unlock (&log->lock);
  if (snap == NULL)
    return ENOMEM;
  for (size_t w = 0; w < words; w++)
    for (uint64_t bits = snap[w]; bits; bits &= bits - 1)
      if ((r = relog_key (log, w * 64 + __builtin_ctzll (bits))) != 0)
        return r;
  return 0;
}

int
log_barrier_begin (struct hhc_log *log, struct log_ticket *ticket)
{
  int r = relog_unlogged (log);

  *ticket = (struct log_ticket){ 0 };
  if (r)
    return r;
  HHC_SCOPED_LOCK (&log->lock);
  if (log->healthy == 0)
    return EIO;
  /* Nothing new since the last barrier?  Also with no current buffer
   * (the log full of live entries, waiting for write-back): a ticket
   * for the next buffer would wait for room that only write-back
   * makes, for nothing (fuzz-log hung so; a FLUSH during a backend
   * outage waited for the backend).
   */
  bool placed = (log->cur == NULL
                 || (log->cur->nblocks == 0 && log->cur->revokes.len == 0))
                && log->pending_rev.len == 0 && log->qhead == NULL
                && !log->writer_busy;
  if (placed && log->durable_barrier + 1 == log->written_seq)
    return 0;
  /* Pipelined: everything new is placed, under a barrier in flight (its
   * revoke count is rev_issued then: every record is sealed).  Wait for
   * that one, not for another.
   */
  if (placed && log->barrier_issued + 1 == log->written_seq)
    {
      ticket->seq = log->barrier_issued;
      ticket->revs = log->rev_issued;
      return 0;
    }
  /* No current buffer: what is new is in the sealed buffers (queued,
   * being written, or written without the flag), so the newest of them
   * is the one to cover: write_buffer flags it, or, if it went out
   * without the flag, make_room writes an emergency barrier after it.
   * Not the next buffer: if the writer had just queued an emergency
   * barrier (which covers everything), the next one waited for room
   * that only write-back makes (fuzz-log hung so, once, under load).
   * Pending revokes go into a later buffer: the record count says when
   * they are durable.
   */
  ticket->seq = log->cur ? log->cur->seq : log->next_seq - 1;
  ticket->revs = log->rev_issued;
  if (log->cur)
    log->st.joins++; /* a whole barrier to wait for: the benchmarks' bound */
  if (log->cur && log->cur->joiners++ == 0)
    log->cur->first_want_ns = hhc_now_ns ();
  if (log->want_barrier < ticket->seq)
    log->want_barrier = ticket->seq;
  if (log->want_revs < ticket->revs)
    log->want_revs = ticket->revs;
  pthread_cond_broadcast (&log->writer_cv);
  return 0;
}

int
log_barrier_wait (struct hhc_log *log, const struct log_ticket *ticket)
{
  HHC_SCOPED_LOCK (&log->lock);

  while ((log->durable_barrier < ticket->seq || log->rev_durable < ticket->revs)
         && log->healthy > 0)
    {
      pipe_update (log); /* a mirror may have failed meanwhile */
      if (log->durable_barrier < ticket->seq || log->rev_durable < ticket->revs)
        pthread_cond_wait (&log->done_cv, &log->lock);
    }
  return log->durable_barrier >= ticket->seq && log->rev_durable >= ticket->revs
             ? 0
             : EIO;
}

int
log_barrier (struct hhc_log *log)
{
  struct log_ticket ticket;
  int r = log_barrier_begin (log, &ticket);

  return r ? r : log_barrier_wait (log, &ticket);
}

/* ---- start of a run ---- */

/* This run's base from the segment that holds the last re-logged block
 * (the current buffer, or the next one) on, and a barrier there:
 * returns that segment (lock held).
 */
static uint64_t
switch_base_locked (struct hhc_log *log)
{
  uint64_t target = log->cur ? log->cur->seq : log->next_seq;

  log->base_from = target;
  if (log->want_barrier < target)
    log->want_barrier = target;
  pthread_cond_broadcast (&log->writer_cv);
  return target;
}

/* The barrier at target is durable: the log is rebased, and its head
 * persisted (lock held).
 */
static int
rebased_locked (struct hhc_log *log, uint64_t target)
{
  int r;

  while (log->durable_barrier < target && log->healthy > 0)
    pthread_cond_wait (&log->done_cv, &log->lock);
  if (log->durable_barrier < target)
    return EIO;
  log->rebased = true;
  advance_head (log);
  r = persist_head (log);
  /* The head moved: a buffer may fit now (else writes go unlogged
   * until the writer's next timeout).
   */
  try_make_current (log);
  return r;
}

int
log_rebase (struct hhc_log *log, const uint32_t *dirty_keys,
            const uint64_t *lbas, size_t n)
{
  uint64_t target = 0;
  int r;

  hhc_lock (&log->lock);
  for (size_t i = 0; i < n; i++)
    {
      log->keys[dirty_keys[i]].lba = lbas[i];
      set_unlogged (log, dirty_keys[i], true);
    }
  pthread_cond_broadcast (&log->writer_cv);
  hhc_unlock (&log->lock);
  /* Every dirty block into a buffer (segments written meanwhile still
   * name the last run's base), then this run's base from the segment
   * that holds the last of them on, then a barrier there: an empty one
   * if nothing else.  Sealed buffers still queued keep the last run's
   * base (writer_decide).
   */
  r = relog_unlogged (log);
  if (r == 0)
    {
      HHC_SCOPED_LOCK (&log->lock);
      target = switch_base_locked (log);
    }
  if (r == 0)
    r = log_barrier (log);
  if (r == 0)
    {
      HHC_SCOPED_LOCK (&log->lock);
      r = rebased_locked (log, target);
    }
  if (r == 0)
    r = release_sb_hold (log);
  if (r)
    hhc_msg (log->msgfn, HHC_MSG_ERROR,
             "log: writing the dirty blocks to the log at start-up: %s",
             strerror (r));
  return r;
}

bool
log_rebase_fits (struct hhc_log *log, uint64_t nblocks)
{
  HHC_SCOPED_LOCK (&log->lock);
  uint64_t per = (uint64_t)log->max_blocks * log->bs;
  uint64_t need = (nblocks * log->bs / per + 2) * log->reserve
                  + (uint64_t)log->nbufs * log->reserve;

  return log->tail_lpos + need <= log->phead_lpos + log->region_size;
}

int
log_discard (struct hhc_log *log)
{
  int r;

  hhc_lock (&log->lock);
  log->rebased = true; /* nothing before this point is needed */
  advance_head (log);
  r = persist_head (log);
  try_make_current (log);
  hhc_unlock (&log->lock);
  return r ? r : release_sb_hold (log);
}

/* ---- queries ---- */

bool
log_healthy (struct hhc_log *log)
{
  HHC_SCOPED_LOCK (&log->lock);

  return log->healthy > 0;
}

double
log_usage (struct hhc_log *log)
{
  HHC_SCOPED_LOCK (&log->lock);

  if (log->healthy == 0 || log->region_size == 0)
    return 0;
  /* Full is full of bytes or of ring slots (a big log of small
   * segments): either way write-back makes room.
   */
  double bytes = (double)used_bytes (log) / log->region_size;
  double slots = (double)(log->next_seq - mem_head_seq (log)) / log->ring_cap;
  return HHC_MAX (bytes, slots);
}

void
log_get_stats (struct hhc_log *log, struct log_stats *s)
{
  HHC_SCOPED_LOCK (&log->lock);

  *s = log->st;
  s->unlogged_now = log->nunlogged;
  s->region_size = log->region_size;
  s->used = used_bytes (log);
  s->segment_size = log->segment_size;
  s->reserve = log_room_kept (log->segment_size, log->bs, log->nbufs);
  /* A bigger log has the buffers a small one may have given up, and
   * without segment-size maybe bigger ones.
   */
  s->reserve_max = log_room_kept (log->segment_auto ? log_default_segment (
                                      UINT64_MAX, log->nbufs_want, log->bs)
                                                    : log->segment_size,
                                  log->bs, log->nbufs_want);
  s->mirrors = log->nm;
  s->mirrors_failed = log->nm - log->healthy;
  s->mirrors_unvoided = __atomic_load_n (&log->unvoided, __ATOMIC_ACQUIRE);
}

const char *
log_mirror_name (struct hhc_log *log, unsigned i, bool *failed)
{
  if (i >= log->nm)
    return NULL;
  HHC_SCOPED_LOCK (&log->lock);
  *failed = log->m[i].failed;
  return log->m[i].dev->name;
}
