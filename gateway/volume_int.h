/* Internals of one volume, shared by volume.c and flusher.c. */
#ifndef HHC_VOLUME_INT_H
#define HHC_VOLUME_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "cache.h"
#include "common.h"
#include "dev.h"
#include "flusher.h"
#include "hhc.h"
#include "index.h"
#include "log.h"
#include "lru.h"
#include "passdown.h"
#include "preopen.h"
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
  uint32_t bs;      /* block size */
  uint64_t nblocks; /* blocks in the volume */

  /* Watermarks in slots. */
  uint64_t dirty_low, dirty_high, dirty_max;
  uint32_t free_low, evict_batch;

  uint64_t ndirty;     /* atomic: slots in state dirty */
  uint64_t last_io_ns; /* atomic: last client request */
  /* Writes that went to the backend directly (trim, zero, pt) bump
   * be_written; a backend flush that started after the n-th such
   * write raises be_flushed to n.  A wb FLUSH skips the backend flush
   * when be_flushed == be_written.
   */
  uint64_t be_written; /* atomic */
  uint64_t be_flushed; /* atomic */
  void *bg_ctx;        /* hhc_start's backend context (flushed at close) */
  /* Sticky: a backend flush failed while a passdown (or a wt write)
   * may have been unflushed.  A backend may drop what a failed flush
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
  pthread_cond_t wait_cond;  /* slots freed or cleaned */

  int loaded_state;    /* enum cache_state found at open */
  struct hhc_log *log; /* mode hhc: the HDD log */
  bool replay_pending; /* the cache is new: replay the log at start */
  uint64_t redone;     /* blocks the start-up redo wrote (open.c) */
  bool log_lost;       /* open: the log this cache was paired with is gone */
  /* A mode other than hhc on a cache used in hhc, with log= naming its
   * log: hhc_start writes every dirty block back, then voids the log
   * (open.c retire_log).
   */
  bool retire_pending;
  bool log_retired; /* format=force voided the old cache's log */
  int run_state;    /* enum cache_state this run writes (settle_after_load) */
  /* ssd-sync=checkpoint after the last mirror failed: the state page no
   * longer asks for a redo (hhc_flush, leave_wal).
   */
  pthread_mutex_t wal_lock;
  bool wal_left;
  bool flusher_on; /* atomic: the flusher thread runs */
  struct hhc_flusher flusher;
  struct hhc_stats stats;
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

/* ---- bflush.c: every backend flush goes through these ---- */

/* A backend flush begins: returns its ticket and reads be_flushed
 * into *flushed.
 */
uint64_t bflush_begin (struct hhc_volume *vol, uint64_t *flushed);
/* It ended with err (0 or errno): a failure that may have dropped a
 * passdown (or a pt/wt write) sets be_failed.
 */
void bflush_end (struct hhc_volume *vol, uint64_t ticket, int err,
                 uint64_t flushed);
/* Wait until every backend flush begun so far has ended. */
void bflush_wait (struct hhc_volume *vol);
/* bflush_wait, then EIO if be_failed is set. */
int bflush_settle (struct hhc_volume *vol);
/* How many backend flushes have failed so far. */
uint64_t bflush_failures (struct hhc_volume *vol);
/* A backend flush that began when be_written was w succeeded and
 * covers every connection (multi-conn): raise be_flushed to w.
 */
void bflush_done (struct hhc_volume *vol, uint64_t w);
/* begin, ops->flush, end. */
int bflush_run (struct hhc_volume *vol, void *bctx);

/* Log callback: write block lba (slot key) to the log again, read
 * back from the SSD, if it is still dirty there.
 */
int vol_relog (struct hhc_volume *vol, uint32_t key, uint64_t lba);

#endif /* HHC_VOLUME_INT_H */
