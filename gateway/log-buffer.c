/* The log's buffers: the one being filled (log_append, log_update,
 * log_revoke put entries and revoke records into it), sealing it for
 * the writer, and the room at the tail a buffer needs before it may
 * become current; the sizes log_open picks from that room (the default
 * segment size).
 *
 * A buffer is free (log->freelist), current (log->cur: being filled),
 * sealed (on the writer's queue, qhead..qtail), or being written (the
 * writer's); then free again.  Its ring slot's state follows: FILLING,
 * SEALED, WRITTEN.
 *
 * Invariants (log->lock held for all of it):
 * - While a buffer is current, no revoke is pending (pending_rev is
 *   empty): a buffer takes the pending ones when it becomes current
 *   and is sealed at once if it could not take them all, so no revoke
 *   can land after a newer entry of its block.
 * - Filling a buffer never allocates (struct buf in log_int.h).
 * - Every unwritten buffer holds a reservation at the tail (room_for),
 *   so a sealed buffer can always be written.
 */
#include <config.h>

#include "common.h"
#include "log_int.h"

/* Make b the buffer being filled, with the next sequence number. */
void
make_current (struct hhc_log *log, struct buf *b, uint64_t reserve)
{
  struct seg *g = ring_of (log, log->next_seq);

  b->seq = log->next_seq++;
  b->nblocks = 0;
  b->limit = log->max_blocks;
  b->reclaim_from = LOG_NONE;
  b->barrier = false;
  b->joiners = 0;
  b->expect = log->last_group;
  b->first_want_ns = 0;
  b->revokes.len = 0;
  b->deaths.len = 0;
  *g = (struct seg){ .seq = b->seq, .chain = LOG_NONE, .state = SEG_FILLING };
  b->reserved = reserve;
  log->reserved += reserve;
  /* Revokes issued while no buffer was current belong here, in order;
   * more than fit go on in the next buffer (appends wait until all are
   * placed, so no revoke can land after a newer entry of its block).
   * b->revokes has room for rev_cap of them (alloc_mem).
   */
  size_t n = HHC_MIN (log->pending_rev.len, (size_t)log->rev_cap);
  if (n > 0)
    {
      memcpy (b->revokes.ptr, log->pending_rev.ptr, n * sizeof (uint64_t));
      b->revokes.len = n;
      memmove (log->pending_rev.ptr, log->pending_rev.ptr + n,
               (log->pending_rev.len - n) * sizeof (uint64_t));
      log->pending_rev.len -= n;
    }
  log->cur = b;
  pthread_cond_broadcast (&log->buf_cv);
}

/* Room at the tail for one more unwritten buffer?  Each one holds a
 * reservation as big as its largest segment, plus one more for the
 * waste of a wrap (at most one among them, as together they hold less
 * than the region), so a sealed buffer can always be written: the
 * writer never waits for room, and an entry superseded by an unwritten
 * one can never pin the head.
 */
bool
room_for (struct hhc_log *log, uint64_t bytes, unsigned slots)
{
  uint64_t end = log->tail_lpos + log->reserved + bytes;
  return end <= log->phead_lpos + log->region_size
         && log->next_seq - mem_head_seq (log) + slots <= log->ring_cap;
}

/* A normal buffer: its largest segment, the waste of one wrap, one
 * more buffer for active reclaim when nothing else fits, and the room
 * an empty emergency barrier needs (EMERGENCY).
 */
bool
room_for_buffer (struct hhc_log *log)
{
  return room_for (log, 3 * log->reserve + EMERGENCY, 3);
}

/* Whether b, just made current, took all the revokes it has room for
 * (rev_cap, or some are left pending): then it is sealed at once, as
 * add_revoke seals a buffer that fills up, so that a revoke never goes
 * into a buffer past its room (which would allocate).
 */
bool
full_of_revokes (const struct hhc_log *log, const struct buf *b)
{
  return log->pending_rev.len > 0 || b->revokes.len >= log->rev_cap;
}

/* Make a free buffer current if there is room (lock held). */
void
try_make_current (struct hhc_log *log)
{
  while (log->cur == NULL && log->freelist && log->healthy > 0
         && room_for_buffer (log))
    {
      struct buf *f = log->freelist;
      log->freelist = f->next;
      make_current (log, f, log->reserve);
      if (full_of_revokes (log, f))
        seal (log); /* the rest go into the next */
    }
  if (log->cur == NULL)
    pthread_cond_broadcast (&log->writer_cv); /* make room */
}

void
queue_sealed (struct hhc_log *log)
{
  struct buf *b = log->cur;

  ring_of (log, b->seq)->state = SEG_SEALED;
  log->rev_sealed += b->revokes.len;
  b->rev_upto = log->rev_sealed;
  b->next = NULL;
  if (log->qtail)
    log->qtail->next = b;
  else
    log->qhead = b;
  log->qtail = b;
  log->cur = NULL;
}

/* Seal the current buffer and queue it for the writer. */
void
seal (struct hhc_log *log)
{
  queue_sealed (log);
  pthread_cond_broadcast (&log->writer_cv);
  try_make_current (log);
}

/* A buffer's revokes have room for rev_cap records, and it is sealed
 * when it holds that many (alloc_mem): no allocation.  Revokes while no
 * buffer is current wait in pending_rev, which grows: without memory
 * for one the record would be lost, and a replay could bring back the
 * data it voids, so the log stops instead (log_fail_locked: FLUSHes
 * fall back to writing every dirty block back).
 */
static void
add_revoke (struct hhc_log *log, uint64_t lba)
{
  struct u64_vec *v = log->cur ? &log->cur->revokes : &log->pending_rev;

  if (u64_vec_append (v, lba))
    {
      log_fail_locked (log, "a revoke record could not be kept", ENOMEM);
      return;
    }
  log->st.revokes++;
  log->rev_issued++;
  if (log->cur && log->cur->revokes.len >= log->rev_cap)
    seal (log);
}

/* The position of key's entry in the current buffer b, which holds
 * this slot's block of the same LBA: a slot that took another LBA
 * without its entry revoked would put one LBA's data under another's
 * in the log (docs/design.md §4.2, invariant 1; docs/open-failures.md 1).
 * Never expected: stop with a core rather than log it so (a crash
 * loses nothing that a FLUSH covered).  Lock held.
 */
static uint32_t
in_place_pos (struct hhc_log *log, const struct buf *b, uint32_t key,
              uint64_t lba)
{
  uint32_t pos = log->keys[key].pos & POS_MASK;

  if (pos >= b->nblocks || b->keys[pos] != key || b->lbas[pos] != lba)
    {
      hhc_msg (log->msgfn, HHC_MSG_ERROR,
               "log: internal error: slot %" PRIu32 " (LBA %" PRIu64
               ") has entry %" PRIu32 " of %" PRIu32
               " in the current buffer, which is slot %" PRIu32
               " and LBA %" PRIu64 "; stopping",
               key, lba, pos, b->nblocks,
               pos < b->nblocks ? b->keys[pos] : UINT32_MAX,
               pos < b->nblocks ? b->lbas[pos] : UINT64_MAX);
      abort ();
    }
  return pos;
}

void
log_append (struct hhc_log *log, uint32_t key, uint64_t lba, const void *data)
{
  HHC_SCOPED_LOCK (&log->lock);
  struct key *e = &log->keys[key];
  struct buf *b = log->cur;

  e->lba = lba;
  /* A reclaim buffer is only for the head's blocks: other writes in it
   * would use the room it was made for and free nothing (then the log
   * stayed jammed); they wait unlogged for the next normal buffer.
   */
  if (b == NULL || log->healthy == 0
      || (b->reclaim_from != LOG_NONE && e->seg != b->reclaim_from))
    {
      set_unlogged (log, key, true);
      return;
    }
  uint32_t ring = b->seq % log->ring_cap;
  if (e->seg == ring)
    {
      /* Still in the buffer being filled: replace in place. */
      log->st.blocks++;
      set_unlogged (log, key, false);
      memcpy (b->data + (size_t)in_place_pos (log, b, key, lba) * log->bs, data,
              log->bs);
      return;
    }
  /* The older entry dies once this one is under a barrier.  deaths
   * has room for every death the buffer can take (alloc_mem); should
   * it fail all the same, the block waits unlogged for the next buffer
   * (a barrier reads it back).
   */
  if (e->seg != LOG_NONE && u32_vec_append (&b->deaths, e->seg))
    {
      seal (log);
      set_unlogged (log, key, true);
      return;
    }
  log->st.blocks++;
  set_unlogged (log, key, false);
  uint32_t older = 0;
  if (e->seg != LOG_NONE)
    {
      chain_remove (log, key);
      older = POS_OLDER;
    }
  uint32_t pos = b->nblocks++;
  memcpy (b->data + (size_t)pos * log->bs, data, log->bs);
  b->lbas[pos] = lba;
  b->keys[pos] = key;
  e->pos = pos | older;
  chain_add (log, key, ring);
  log->ring[ring].live++;
  if (b->nblocks >= b->limit)
    seal (log);
}

void
log_update (struct hhc_log *log, uint32_t key, uint64_t lba, const void *buf,
            uint32_t off, uint32_t len)
{
  HHC_SCOPED_LOCK (&log->lock);
  struct key *e = &log->keys[key];

  e->lba = lba;
  if (log->cur && e->seg == log->cur->seq % log->ring_cap
      && !is_unlogged (log, key))
    memcpy (log->cur->data
                + (size_t)in_place_pos (log, log->cur, key, lba) * log->bs
                + off,
            buf, len);
  else
    set_unlogged (log, key, true); /* a barrier reads it back */
}

/* Void key's entry in the current buffer b: the last block moves into
 * its place.  Returns whether an older entry of it may be on disk.
 */
static bool
remove_from_current (struct hhc_log *log, struct buf *b, struct key *e)
{
  uint32_t pos = e->pos & POS_MASK, last = b->nblocks - 1;
  bool older = e->pos & POS_OLDER;

  if (pos != last)
    {
      memcpy (b->data + (size_t)pos * log->bs, b->data + (size_t)last * log->bs,
              log->bs);
      b->lbas[pos] = b->lbas[last];
      b->keys[pos] = b->keys[last];
      struct key *moved = &log->keys[b->keys[pos]];
      moved->pos = pos | (moved->pos & POS_OLDER);
    }
  b->nblocks--;
  return older;
}

void
log_revoke (struct hhc_log *log, uint32_t key, uint64_t lba)
{
  HHC_SCOPED_LOCK (&log->lock);
  struct key *e = &log->keys[key];
  struct buf *b = log->cur;

  set_unlogged (log, key, false);
  if (e->seg == LOG_NONE)
    return;
  struct seg *g = &log->ring[e->seg];
  bool in_cur = b && e->seg == b->seq % log->ring_cap;
  /* In the buffer being filled, void it in memory; a revoke record is
   * needed only if an older entry may be on disk.
   */
  bool record = in_cur ? remove_from_current (log, b, e) : true;
  chain_remove (log, key);
  g->live--;
  e->seg = LOG_NONE;
  if (record)
    add_revoke (log, lba);
  pthread_cond_broadcast (&log->writer_cv); /* the head may move */
}

void
log_forget (struct hhc_log *log, uint32_t key, uint64_t lba)
{
  HHC_SCOPED_LOCK (&log->lock);

  if (log->keys[key].lba == lba && log->keys[key].seg == LOG_NONE)
    set_unlogged (log, key, false);
}

bool
log_is_logged (struct hhc_log *log, uint32_t key)
{
  HHC_SCOPED_LOCK (&log->lock);

  return log->keys[key].seg != LOG_NONE && !is_unlogged (log, key);
}

/* ---- sizes (log_open) ---- */

/* What a buffer of seg bytes reserves at the tail: its largest
 * segment, data and a header with room for its revokes.
 */
uint64_t
buffer_reserve (uint32_t seg, uint32_t bs)
{
  uint32_t nb = HHC_MAX (seg / bs, 1u);

  return HHC_ROUND_UP ((uint64_t)nb * bs, LOG_ALIGN)
         + log_seg_hdr_len (nb, HHC_MAX (nb, 256u));
}

uint64_t
log_room_kept (uint32_t seg, uint32_t bs, unsigned nbufs)
{
  return (nbufs + 3) * buffer_reserve (seg, bs) + EMERGENCY;
}

/* The segment size when segment-size is not given: LOG_SEG_MAX_AUTO,
 * halved (down to LOG_SEG_MIN_AUTO) while the room the log keeps for
 * nbufs such buffers (log_room_kept) would take more than a quarter
 * of the region, or the buffers more than LOG_BUF_MEM_AUTO of memory.
 * Bigger segments mean fewer writes, and under a stream of writes
 * fewer barriers (a FLUSH's barrier seals a fuller buffer): fileserver
 * on the one-head HDD model 4,700 -> 5,300 IOPS with 4 MiB instead of
 * 1 MiB, on the delay model 6,800 -> 11,400 (bench/results/
 * hdd-model.md); a small log keeps 1 MiB.
 */
uint32_t
log_default_segment (uint64_t region, unsigned nbufs, uint32_t bs)
{
  uint64_t seg = LOG_SEG_MAX_AUTO;

  while (seg > LOG_SEG_MIN_AUTO
         && (log_room_kept (seg, bs, nbufs) > region / 4
             || nbufs * seg > LOG_BUF_MEM_AUTO))
    seg /= 2;
  return HHC_MAX ((uint32_t)seg, bs);
}
