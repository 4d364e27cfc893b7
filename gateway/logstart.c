/* The HDD log at start (mode hhc): replay into the backend when the
 * cache is new, redo into the cache after a crash with
 * ssd-sync=checkpoint, then the rebase (every dirty block logged again
 * under a new base barrier); and the log's callbacks into the volume
 * (relog, pressure, checkpoint), which log_start installs.
 *
 * Everything here but the callbacks runs in hhc_start, before the
 * flusher and before any client request: the replay and redo touch the
 * index, the LRU and the cache from this thread alone (they still take
 * the stripe locks, as the request paths do).  The callbacks are
 * called by the log without its lock: relog takes a stripe lock
 * (vol_relog), pressure the flusher lock, checkpoint the cache's commit.
 */
#include <config.h>

#include <stdio.h>

#include "common.h"
#include "flusher.h"
#include "log-format.h"
#include "logpair.h"
#include "logstart.h"
#include "pace.h"
#include "vol.h"

struct replay_ctx {
  struct hhc_volume *vol;
  void *bctx;
  unsigned last_pct;
  uint64_t to_backend; /* redo: blocks written to the backend */
};

/* n blocks from lba into the backend (the last one clipped to the
 * volume); called by several writers at once, as the flusher's
 * workers call the backend with one context.
 */
static int
replay_write_n (void *opaque, const void *buf, uint64_t lba, uint32_t n)
{
  struct replay_ctx *rc = opaque;
  struct hhc_volume *vol = rc->vol;
  uint64_t off = lba * vol->bs;
  uint64_t len = HHC_MIN ((uint64_t)n * vol->bs, vol->info.size - off);

  return vol->ops->pwrite (rc->bctx, buf, len, off, false);
}

static int
replay_write (void *opaque, const void *buf, uint64_t lba)
{
  return replay_write_n (opaque, buf, lba, 1);
}

/* Redo one block of the log into the cache (the restart after a crash
 * in hhc: FLUSH synced only the log): into the slot the loaded metadata
 * names for this LBA, else a free slot (persisted free: invariant 1),
 * else the backend.  The block becomes dirty; the rebase logs it again.
 * Nothing runs yet but the replay's one writer thread (log_replay),
 * while this one waits for it.
 */
static int
redo_write (void *opaque, const void *buf, uint64_t lba)
{
  struct replay_ctx *rc = opaque;
  struct hhc_volume *vol = rc->vol;
  struct hhc_stripe *st = index_stripe (&vol->idx, lba);
  bool fresh = false;
  uint32_t s;
  int r;

  hhc_lock (&st->lock);
  s = index_lookup (&vol->idx, lba);
  if (s == HHC_NIL && (s = cache_alloc_slot (&vol->cache)) != HHC_NIL)
    {
      index_insert (&vol->idx, s, lba);
      fresh = true;
    }
  hhc_unlock (&st->lock);
  if (s == HHC_NIL)
    {
      rc->to_backend++;
      return replay_write (opaque, buf, lba);
    }
  r = cache_write_slot (&vol->cache, s, buf, 0, vol->bs);
  hhc_lock (&st->lock);
  if (r && fresh)
    {
      index_remove (&vol->idx, s);
      cache_unalloc_slot (&vol->cache, s);
    }
  else if (r == 0 && (fresh || slot_state (&vol->idx.slots[s]) < SLOT_DIRTY))
    {
      cache_set_state (&vol->cache, s, SLOT_DIRTY);
      vol->ndirty++;
      if (fresh)
        lru_insert_dirty (&vol->lru, s);
      else
        lru_make_dirty (&vol->lru, s);
    }
  hhc_unlock (&st->lock);
  if (r == 0)
    vol->redone++;
  return r;
}

static void
replay_progress (void *opaque, uint64_t done, uint64_t total)
{
  struct replay_ctx *rc = opaque;
  unsigned pct = total ? done * 100 / total : 100;

  if (pct / 10 != rc->last_pct / 10 || done == total)
    hhc_msg (rc->vol->conf.msgfn, HHC_MSG_INFO,
             "log replay: %" PRIu64 " of %" PRIu64 " blocks (%u%%)", done,
             total, pct);
  rc->last_pct = pct;
}

static int
log_relog_cb (void *opaque, uint32_t key, uint64_t lba)
{
  return vol_relog (opaque, key, lba);
}

static int
log_checkpoint_cb (void *opaque)
{
  struct hhc_volume *vol = opaque;

  return cache_commit (&vol->cache);
}

static void
log_pressure_cb (void *opaque)
{
  struct hhc_volume *vol = opaque;

  if (__atomic_load_n (&vol->flusher_on, __ATOMIC_ACQUIRE))
    flusher_kick (&vol->flusher);
}

/* A new cache: replay the log into the backend, which then holds
 * every block the log does (the lost cache's dirty blocks among them).
 */
static int
replay_into_backend (struct hhc_volume *vol, struct replay_ctx *rc)
{
  struct log_sink sink = {
    replay_write_n, replay_progress, rc, vol->conf.writeback_threads, 0, 0
  };
  uint64_t t0 = hhc_now_ns ();
  int r;

  /* Writes as the flusher cuts them (make_extents): a maximum below
   * a block still gets one block per write, not a merged run.
   */
  if (vol->info.max_request)
    sink.max_blocks = HHC_MAX (vol->info.max_request / vol->bs, 1u);
  if (vol->info.preferred_block >= vol->bs)
    sink.chunk = vol->info.preferred_block / vol->bs;
  r = log_replay_sink (vol->log, &sink);

  if (r == 0 && (r = vol->ops->flush (rc->bctx)) != 0)
    hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR,
             "log replay: flushing the backend: %s", strerror (r));
  if (r == 0)
    {
      vol->replay_pending = false;
      hhc_msg (vol->conf.msgfn, HHC_MSG_INFO,
               "log replay: into the backend and flushed in %.2f s",
               (hhc_now_ns () - t0) / 1e9);
    }
  return r;
}

/* A crash in hhc with ssd-sync=checkpoint (this run may have any
 * ssd-sync): what FLUSHes covered since the last checkpoint is in the
 * log only.  Redo it into the cache (the log stays as it is until the
 * new base barrier, so a crash during the redo just redoes again).
 */
static int
redo_into_cache (struct hhc_volume *vol, struct replay_ctx *rc)
{
  uint64_t t0 = hhc_now_ns ();
  int r = log_replay (vol->log, redo_write, replay_progress, rc);

  if (r == 0)
    r = cache_commit (&vol->cache);
  if (r == 0 && rc->to_backend > 0)
    r = vol->ops->flush (rc->bctx);
  if (r)
    {
      hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR,
               "log: redoing the last run's log into the cache: %s",
               strerror (r));
      return r;
    }
  if (vol->redone || rc->to_backend)
    hhc_msg (vol->conf.msgfn, HHC_MSG_INFO,
             "log: the last run did not stop cleanly: redid %" PRIu64
             " blocks into the cache, wrote %" PRIu64
             " to the backend (no free slot), in %.2f s",
             vol->redone, rc->to_backend, (hhc_now_ns () - t0) / 1e9);
  return 0;
}

/* The dirty blocks must fit in the log next to the last run's
 * segments (which stay until the new base barrier is written).  If
 * they do not, write them all back first: then nothing in the old
 * segments is needed any more.
 */
static int
make_room_for_rebase (struct hhc_volume *vol, void *bctx)
{
  int r;

  if (log_rebase_fits (vol->log, vol->ndirty))
    return 0;
  hhc_msg (vol->conf.msgfn, HHC_MSG_INFO,
           "log: no room for the %" PRIu64
           " dirty blocks next to the last run's segments: writing "
           "them back first",
           vol->ndirty);
  if ((r = flusher_writeback_all (vol, bctx)) != 0
      || (r = vol->ops->flush (bctx)) != 0 || (r = log_discard (vol->log)))
    hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR,
             "log: writing back before start: %s", strerror (r));
  return r;
}

/* n bytes as the parameters write them: G if whole, else M (rounded
 * up if up, else to the nearest).
 */
static const char *
size_str (char *buf, size_t len, uint64_t n, bool up)
{
  const uint64_t M = UINT64_C (1) << 20;

  if (n >= (M << 10) && n % (M << 10) == 0)
    snprintf (buf, len, "%" PRIu64 "G", n >> 30);
  else
    snprintf (buf, len, "%" PRIu64 "M", up ? (n + M - 1) / M : (n + M / 2) / M);
  return buf;
}

/* Warn if the log cannot hold dirty-max of the cache (even at one block
 * per block, before segment headers): then a FLUSH waits for write-back
 * to the backend once the dirty blocks fill the log, however early the
 * flusher starts (pace.h).  The log keeps room at its tail for its
 * segment buffers, one reclaim buffer and a wrap.
 */
static void
warn_small_log (struct hhc_volume *vol)
{
  struct log_stats st;
  uint64_t need = vol->dirty_max * vol->bs;
  char a[32], b[32], c[32], d[32];

  log_get_stats (vol->log, &st);
  if (st.region_size >= need + st.reserve)
    return;
  hhc_msg (
      vol->conf.msgfn, HHC_MSG_WARNING,
      "log-size=%s holds less than dirty-max=%u%% of cache-size=%s "
      "(%s): FLUSHes will wait for write-back to the backend when the "
      "dirty blocks fill the log; make log-size at least %s, or lower "
      "dirty-max",
      size_str (a, sizeof a, st.region_size + LOG_REGION_OFF, false),
      vol->conf.dirty_max, size_str (b, sizeof b, vol->dev->size, false),
      size_str (c, sizeof c, need, false),
      size_str (d, sizeof d, need + st.reserve_max + LOG_REGION_OFF, true));
}

/* Write every dirty block of the cache to the log under a new base
 * barrier.
 */
static int
rebase_dirty (struct hhc_volume *vol)
{
  uint32_t *keys = malloc ((vol->ndirty + 1) * sizeof *keys);
  uint64_t *lbas = malloc ((vol->ndirty + 1) * sizeof *lbas);
  size_t n = 0;
  int r = 0;

  if (keys == NULL || lbas == NULL)
    r = ENOMEM;
  for (uint32_t s = 0; r == 0 && s < vol->idx.nslots && n < vol->ndirty; s++)
    if (slot_state (&vol->idx.slots[s]) >= SLOT_DIRTY)
      {
        keys[n] = s;
        lbas[n++] = slot_lba (&vol->idx.slots[s]);
      }
  if (r == 0)
    {
      if (n)
        hhc_msg (vol->conf.msgfn, HHC_MSG_INFO,
                 "log: writing %zu dirty blocks to the log", n);
      r = log_rebase (vol->log, keys, lbas, n);
    }
  free (keys);
  free (lbas);
  return r;
}

/* Mode hhc at start: replay the log into the backend if the cache is
 * new (or redo it into the cache after a crash with ssd-sync=checkpoint),
 * then write every dirty block of the cache to the log under a new
 * base barrier (docs/design.md §7.3; docs/log.md).
 */
int
logstart_run (struct hhc_volume *vol, void *bctx)
{
  struct log_callbacks cb = { vol, log_relog_cb, log_pressure_cb,
                              vol->conf.wal ? log_checkpoint_cb : NULL };
  struct replay_ctx rc = { vol, bctx, 0, 0 };
  int r = 0;

  if (vol->replay_pending)
    r = replay_into_backend (vol, &rc);
  else if (vol->loaded_state == CACHE_IN_USE_HHC)
    r = redo_into_cache (vol, &rc);
  if (r)
    return r;
  /* Done (and durable): now this run's own state (settle_after_load
   * kept the one that asks for the redo).
   */
  if (vol->loaded_state == CACHE_IN_USE_HHC && !vol->conf.wal)
    {
      vol->run_state = CACHE_IN_USE_WB;
      if ((r = cache_write_state (&vol->cache, CACHE_IN_USE_WB)) != 0)
        return r;
    }
  if ((r = log_start (vol->log, vol->cache.uuid, vol->cache.nslots, &cb)) != 0)
    return r;
  warn_small_log (vol);
  if ((r = make_room_for_rebase (vol, bctx)) != 0
      || (r = rebase_dirty (vol)) != 0)
    return r;
  return logpair_record_gen (vol);
}
