/* FLUSH: what a client's FLUSH makes durable, and how (docs/design.md
 * §4.2, invariant 4; docs/core.md "Durability: the commit").
 *
 * FLUSH = a backend flush when anything went to the backend directly
 * (always in pt and wt; trims, zeros and pt writes in wb) + cache_commit
 * (sync slot data, write metadata pages, sync); in hhc also a log
 * barrier, which replaces the commit with ssd-sync=checkpoint; in
 * wbflush (or hhc with no log mirror left) every dirty block is written
 * back first (flusher_writeback_all).  hhc_drain is write-back of
 * everything plus a FLUSH.
 *
 * Locks: wal_lock (leave_wal) is held across a commit and the state
 * page write, and (record_failures) across a log superblock write (the
 * log's io_lock) and the state page write; nothing else is held here
 * (the log and bflush.c wait with their own).
 */
#include <config.h>

#include <stdio.h>

#include "bflush.h"
#include "common.h"
#include "flusher.h"
#include "passdown.h"
#include "vol.h"

bool
hhc_backend_unflushed (struct hhc_volume *vol)
{
  return !vol->info.multi_conn
         || load64 (&vol->be_flushed) < load64 (&vol->be_written);
}

/* Flush the backend if anything went to it directly since the last
 * completed backend flush (always in pt and wt).
 */
static int
flush_backend (struct hhc_volume *vol, void *bctx)
{
  uint64_t w = load64 (&vol->be_written);
  uint64_t f = load64 (&vol->be_flushed);
  uint64_t seq = passdown_seq (vol); /* after w: covers all it counts */
  int r;

  /* Without multi-conn a flush covers only its own connection's
   * writes: never skip it then.
   */
  if (hhc_mode_is_wb (vol->conf.mode) && f >= w && vol->info.multi_conn)
    return 0;
  r = bflush_run (vol, bctx);
  if (r)
    {
      stat_add (&vol->stats.backend_errors, 1);
      return r;
    }
  if (vol->info.multi_conn) /* else it covered only this connection */
    passdown_flushed (vol, seq);
  bflush_done (vol, w);
  /* A flush that began before this one ended may yet fail, having
   * dropped what this one found nothing left of (bflush.c).
   */
  return bflush_settle (vol);
}

/* ssd-sync=checkpoint and no log mirror left: from now on FLUSHes make
 * their data durable without the log (hhc_flush's fallback), so the log
 * must never be redone over it after a crash (a FLUSH covered by the
 * log's last barrier may have been rewritten since).  Before the first
 * such FLUSH returns: commit (what the log held is then on the SSD) and
 * leave the state page that asks for the redo.
 */
static int
leave_wal (struct hhc_volume *vol)
{
  int r = 0;

  if (!vol->conf.wal)
    return 0;
  hhc_lock (&vol->wal_lock);
  if (!vol->wal_left)
    {
      r = cache_commit (&vol->cache);
      if (r == 0)
        r = cache_write_state (&vol->cache, CACHE_IN_USE_WB);
      if (r == 0)
        {
          vol->wal_left = true;
          vol->run_state = CACHE_IN_USE_WB; /* record_failures */
          hhc_msg (vol->conf.msgfn, HHC_MSG_WARNING,
                   "%s: no log mirror left: FLUSHes commit the cache and "
                   "write back every dirty block from now on",
                   vol->dev->name);
        }
    }
  hhc_unlock (&vol->wal_lock);
  return r;
}

/* Before a FLUSH is acknowledged: if a log mirror failed since the
 * last record, the healthy ones get a newer superblock and the state
 * page records its generation (under wal_lock), so that the failed
 * mirror, not voided before a crash and given alone, is known to be
 * stale (logpair_stale; docs/design.md §5.10).  0, or errno (the
 * caller falls back when no mirror is left).
 */
static int
record_failures (struct hhc_volume *vol)
{
  uint64_t f = log_failures (vol->log), gen;
  int r = 0;

  if (f == __atomic_load_n (&vol->fails_recorded, __ATOMIC_ACQUIRE))
    return 0; /* every FLUSH: one atomic load */
  hhc_lock (&vol->wal_lock);
  f = log_failures (vol->log); /* before the superblock: it covers them */
  if (f > vol->fails_recorded)
    {
      r = log_mark_failures (vol->log, &gen);
      if (r == 0)
        {
          vol->cache.log_gen = HHC_MAX (vol->cache.log_gen, gen);
          r = cache_write_state (&vol->cache, vol->run_state);
        }
      if (r == 0)
        __atomic_store_n (&vol->fails_recorded, f, __ATOMIC_RELEASE);
    }
  hhc_unlock (&vol->wal_lock);
  return r;
}

/* FLUSH: the backend (trims, zeros, pt/wt writes made durable), then
 * the cache (slot data and metadata).  A trim or zero has committed its
 * frees before it reached the backend (commit_invalidations), so the
 * order only decides which of the two a failed FLUSH leaves undone.
 *
 * hhc with ssd-sync=checkpoint: the log is a write-ahead log (docs/design.md
 * §5.8): every dirty block in a synced barrier segment is all a FLUSH
 * needs.  The SSD is committed at checkpoints instead (before the log's
 * persisted head moves past segments it may still need, see log.c
 * persist_head), and a restart after a crash redoes the log into the
 * cache (logstart.c).
 */
static int
flush_run (struct hhc_volume *vol, void *bctx)
{
  uint64_t t0 = hhc_now_ns ();
  struct log_ticket ticket = { 0 };
  bool wbflush = vol->conf.mode == HHC_MODE_WBFLUSH, fallback = false;
  int r;

  if (__atomic_load_n (&vol->be_failed, __ATOMIC_ACQUIRE))
    return EIO; /* sticky: bflush.c */
  r = flush_backend (vol, bctx);
  int rl = r == 0 && vol->log ? log_barrier_begin (vol->log, &ticket) : 0;

  if (r == 0 && !(vol->log && vol->conf.wal))
    r = cache_commit (&vol->cache); /* the log writes meanwhile */
  if (vol->log && rl == 0 && ticket.seq)
    rl = log_barrier_wait (vol->log, &ticket);
  if (r == 0 && vol->log && rl == 0)
    rl = record_failures (vol); /* a mirror failed: §5.10 */
  if (r == 0 && vol->log)
    {
      r = rl;
      if (r && !log_healthy (vol->log))
        {
          /* No log mirror left: durable the slow way (docs/design.md §5.5). */
          stat_add (&vol->stats.log_fallbacks, 1);
          r = leave_wal (vol);
          if (r == 0)
            r = cache_commit (&vol->cache);
          fallback = wbflush = true;
        }
    }
  if (r == 0 && wbflush)
    r = flusher_writeback_all (vol, bctx);
  /* Every block the failed mirrors hold is on the backend now, some
   * older than what this FLUSH makes durable: void them before it
   * returns (not before: until now they were the only copy of what
   * earlier FLUSHes covered that survives the loss of the SSD).
   */
  if (r == 0 && fallback)
    log_void_stale (vol->log);
  if (r == 0 && __atomic_load_n (&vol->be_failed, __ATOMIC_ACQUIRE))
    r = EIO; /* the flusher's backend flush failed meanwhile */
  stat_add (&vol->stats.flushes, 1);
  hist_add (&vol->stats.flush_lat, (hhc_now_ns () - t0) / 1000);
  return r;
}

/* Every FLUSH that returns an error counts (a client's, a FUA write's, a
 * drain's), the sticky ones too.
 */
int
hhc_flush (struct hhc_volume *vol, void *bctx)
{
  int r = flush_run (vol, bctx);

  if (r)
    stat_add (&vol->stats.flush_errors, 1);
  return r;
}

int
hhc_drain (struct hhc_volume *vol, void *bctx)
{
  int r = flusher_writeback_all (vol, bctx);

  return r ? r : hhc_flush (vol, bctx); /* also trims and zeros */
}
