/* The assembled volume (struct hhc_volume): the state the core's
 * modules share, and the lock order across them.
 *
 * open.c builds a volume (devices, cache, index, LRU, log, flusher),
 * with logpair.c and logstart.c doing its log's part at open and at
 * start; the request path (volume.c, read.c, flush.c), the flusher and
 * the modules below them (passdown.c, reclaim.c, bflush.c,
 * stats-json.c) use what it built.  No module calls back up into
 * open.c; the only upward calls are the log's callbacks (struct
 * log_callbacks, installed by logstart.c).
 *
 * Locks.  There is no lock for the whole volume: each lock protects
 * one module's state (its comment says what).  Outermost first; a
 * thread holding one of these takes only locks further down the list:
 *
 *   lock               where          taken under it
 *   flusher lock       flusher.h      log lock (log_usage), free lock
 *                                     (vol_needs_reclaim)
 *   wal_lock           flush.c        gc and commit lock (cache_commit),
 *                                     state page (leave_wal); the log's
 *                                     io_lock (record_failures)
 *   gc, commit lock    cache.h        page lock, free lock; else taken
 *                                     with no lock held (FLUSH, the
 *                                     flusher, reclaim, the log's
 *                                     checkpoint callback)
 *   stripe lock        index.h        LRU, pd.lock, page, free, log lock;
 *                                     one stripe at a time
 *   LRU lock           lru.h          a stripe lock by trylock only
 *                                     (vol_evict: the exception to this
 *                                     order, so it never waits), and
 *                                     under that stripe the page and
 *                                     free locks
 *   pd.lock            passdown.h     wait_lock (passdown_end)
 *   page lock          cache.h        free lock (cache.h's order)
 *   free lock          cache.h        nothing
 *   log lock           log.h          nothing of the volume's; the log's
 *                                     io_lock and void_lock come before
 *                                     it, not under it (log.c)
 *   wait_lock          here           nothing (wait_cond)
 *
 * Taken alone, with no other lock held: bf_lock (bflush.c: tickets,
 * waited on), the write-back batch's lock (flusher.c), the sequential
 * cutoff's table lock (seqcut.h), a device's own lock (inside its
 * calls).  The log calls the volume back without its
 * lock: relog takes a stripe lock (then the log lock again), pressure
 * the flusher lock, checkpoint the commit.  No lock is held during
 * device or backend I/O, except the commit lock and wal_lock (the
 * cache's metadata and state page) and the log's I/O lock.
 */
#ifndef HHC_VOL_H
#define HHC_VOL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "cache.h"
#include "common.h"
#include "dev.h"
#include "flusher.h"
#include "hhccore.h"
#include "index.h"
#include "log.h"
#include "lru.h"
#include "passdown.h"
#include "preopen.h"
#include "seqcut.h"
#include "promote.h"
#include "stats.h"

struct hhc_volume {
  struct hhc_conf conf;     /* strings below are our own copies */
  struct hhc_preopened pre; /* devices opened before hhc_open, if any */
  char *cache_path, *stats_path;
  const struct hhc_backend_ops *ops;
  struct hhc_backend_info info;
  char *identity; /* what the cache is tied to */

  struct hhc_dev *dev;
  struct hhc_index idx;
  struct hhc_lru lru;
  struct hhc_cache cache;
  struct hhc_promote promote; /* promote=nhit's miss counts (no lock) */
  uint32_t bs;                /* block size */
  uint64_t nblocks;           /* blocks in the volume */

  /* Watermarks in slots. */
  uint64_t dirty_low, dirty_high, dirty_max;
  uint32_t free_low, evict_batch;

  uint64_t ndirty; /* atomic: slots in state dirty */
  /* The idle test (pace.c): a request sets io_seen (when it is not
   * set: the shared line is written once per check, not per request);
   * the pace check, which alone clears it, then stores the time it saw
   * it in last_io_ns (never earlier than the request).
   */
  bool io_seen;        /* atomic */
  uint64_t last_io_ns; /* atomic */
  /* Writes that went to the backend directly (trim, zero, pt) bump
   * be_written; a backend flush that started after the n-th such
   * write raises be_flushed to n.  A wb FLUSH skips the backend flush
   * when be_flushed == be_written.
   */
  uint64_t be_written; /* atomic */
  uint64_t be_flushed; /* atomic */
  void *bg_ctx;        /* hhc_start's backend context (flushed at close) */
  /* Sticky: a backend flush failed while a passdown (or a wt write)
   * may have been unflushed (bflush.c: a passdown that fell back to
   * the cache does not count).  A backend may drop what a failed flush
   * did not write and then report a later flush as a success (Linux
   * does), and a passdown is never sent again: every later FLUSH
   * fails (this errno) until the volume is reopened, and the cache is
   * not marked closed cleanly.  Blocks written back are not counted:
   * they stay dirty and are sent again.  Atomic.
   */
  int be_failed;
  /* Backend flushes in progress (bflush.c). */
#define BF_WINDOW 64
  pthread_mutex_t bf_lock;
  pthread_cond_t bf_cond;
  uint64_t bf_next, bf_done_below;
  uint64_t bf_failures; /* atomic: backend flushes that failed */
  bool bf_done[BF_WINDOW];
  /* Trims, zeros and pt writes in progress or not yet flushed
   * (passdown.c).
   */
  struct hhc_passdowns pd;

  pthread_mutex_t wait_lock; /* protects nothing but the wait below */
  pthread_cond_t wait_cond;  /* slots freed or cleaned, a passdown ended */

  int loaded_state;    /* enum cache_state found at open */
  struct hhc_log *log; /* mode hhc: the HDD log */
  bool replay_pending; /* the cache is new: replay the log at start */
  uint64_t redone;     /* blocks the start-up redo wrote (logstart.c) */
  bool log_lost;       /* open: the log this cache was paired with is gone */
  bool redo_owed;      /* open: the last run's log is to be redone */
  /* A mode other than hhc on a cache used in hhc, with log= naming its
   * log: hhc_start writes every dirty block back, then voids the log
   * (logpair_retire).
   */
  bool retire_pending;
  bool log_retired; /* format=force voided the old cache's log */
  int run_state;    /* enum cache_state this run writes (settle_after_load) */
  /* ssd-sync=checkpoint after the last mirror failed: the state page no
   * longer asks for a redo (hhc_flush, leave_wal).
   */
  pthread_mutex_t wal_lock;
  bool wal_left;
  /* log_failures the state page's log_gen covers (atomic; written
   * under wal_lock by record_failures, and by logpair_record_gen at
   * start, before any request).
   */
  uint64_t fails_recorded;
  bool flusher_on; /* atomic: the flusher thread runs */
  struct hhc_flusher flusher;
  struct hhc_stats stats;
  struct hhc_seqcut seqcut; /* seq-cutoff: the stream table */
  bool started;
};

/* Read one of the volume's 64-bit atomics. */
static inline uint64_t
load64 (const uint64_t *p)
{
  return __atomic_load_n (p, __ATOMIC_ACQUIRE);
}

/* Wake threads waiting for free or clean slots, or for a passdown to
 * end (wait_cond).
 */
static inline void
vol_wake_waiters (struct hhc_volume *vol)
{
  hhc_lock (&vol->wait_lock);
  pthread_cond_broadcast (&vol->wait_cond);
  hhc_unlock (&vol->wait_lock);
}

/* ---- volume.c ---- */

/* Log callback: write block lba (slot key) to the log again, read
 * back from the SSD, if it is still dirty there.
 */
int vol_relog (struct hhc_volume *vol, uint32_t key, uint64_t lba);

#endif /* HHC_VOL_H */
