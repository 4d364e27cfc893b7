/* Volume life cycle: the one place that assembles a volume.  Open
 * (the configuration, the devices, the cache: open-cache.c formats or
 * checks it, pairs it with its log and settles what the last run
 * left; the load), start (the log: logstart.c; the flusher thread),
 * close.
 *
 * Layers: open.c calls flush.c (FLUSH and drain at close), the flusher
 * and the modules below them; none of them calls back up
 * into open.c.  The only upward calls are the log's callbacks into the
 * volume, installed by logstart.c (struct log_callbacks).
 */
#include <config.h>

#include <stdio.h>

#include "bflush.h"
#include "common.h"
#include "flusher.h"
#include "logpair.h"
#include "logstart.h"
#include "open_int.h"
#include "vol.h"

static int
check_conf (const struct hhc_conf *conf, const struct hhc_preopened *pre)
{
  hhc_msg_fn msgfn = conf->msgfn;

  if (conf->cache_path == NULL && (pre == NULL || pre->cache == NULL))
    {
      hhc_msg (msgfn, HHC_MSG_ERROR, "cache= is required");
      return EINVAL;
    }
  if (conf->mode == HHC_MODE_HHC && conf->nlogs == 0)
    {
      hhc_msg (msgfn, HHC_MSG_ERROR, "mode=hhc needs at least one log=");
      return EINVAL;
    }
  if (conf->nlogs > HHC_MAX_LOGS)
    {
      hhc_msg (msgfn, HHC_MSG_ERROR, "log= may be given at most %d times",
               HHC_MAX_LOGS);
      return EINVAL;
    }
  if (conf->segment_size
      && (!HHC_IS_POW2 (conf->segment_size) || conf->segment_size < 65536
          || conf->segment_size > 64 * 1024 * 1024))
    {
      hhc_msg (msgfn, HHC_MSG_ERROR,
               "segment-size must be a power of two from 64K to 64M");
      return EINVAL;
    }
  if (conf->log_buffers == 1 || conf->log_buffers > 64)
    {
      hhc_msg (msgfn, HHC_MSG_ERROR, "log-buffers must be from 2 to 64");
      return EINVAL;
    }
  if (conf->log_inflight > 16)
    {
      hhc_msg (msgfn, HHC_MSG_ERROR, "log-inflight must be from 1 to 16");
      return EINVAL;
    }
  if (conf->block_size
      && (!HHC_IS_POW2 (conf->block_size) || conf->block_size < 512
          || conf->block_size > 1048576))
    {
      hhc_msg (msgfn, HHC_MSG_ERROR,
               "block-size must be a power of two from 512 to 1M");
      return EINVAL;
    }
  if (conf->direct && conf->block_size && conf->block_size < 4096)
    {
      hhc_msg (msgfn, HHC_MSG_ERROR,
               "direct=true needs a block-size of at least 4K");
      return EINVAL;
    }
  if (conf->dirty_low > conf->dirty_high || conf->dirty_high > conf->dirty_max
      || conf->dirty_max > 100 || conf->dirty_max == 0)
    {
      hhc_msg (msgfn, HHC_MSG_ERROR,
               "dirty-low <= dirty-high <= dirty-max <= 100 is required");
      return EINVAL;
    }
  return 0;
}

/* The identity the cache is tied to. */
static char *
make_identity (const struct hhc_conf *conf, const struct hhc_backend_info *info)
{
  const char *id = conf->backend_id && *conf->backend_id
                       ? conf->backend_id
                       : (info->identity ? info->identity : "");
  char *s;

  if (asprintf (&s, "%.*s", CACHE_IDENTITY_MAX, id) == -1)
    return NULL;
  return s;
}

static void
set_watermarks (struct hhc_volume *vol)
{
  uint64_t n = vol->cache.nslots;

  vol->dirty_low = n * vol->conf.dirty_low / 100;
  vol->dirty_high = n * vol->conf.dirty_high / 100;
  vol->dirty_max = HHC_MAX (n * vol->conf.dirty_max / 100, 1);
  vol->free_low = HHC_MAX (n / 64, 4);
  vol->evict_batch = HHC_MAX (n / 64, 8);
}

/* failed: the open failed, so files it created are removed again. */
static void
free_volume (struct hhc_volume *vol, bool failed)
{
  void (*close_dev) (struct hhc_dev *) = failed ? dev_discard : dev_close;

  log_close (vol->log);
  if (vol->pre.owned)
    for (unsigned i = 0; i < vol->conf.nlogs; i++)
      close_dev (vol->pre.logs[i]);
  cache_free_mem (&vol->cache);
  lru_destroy (&vol->lru);
  index_free (&vol->idx);
  promote_free (&vol->promote);
  if (vol->pre.cache == NULL || vol->pre.owned)
    close_dev (vol->dev);
  pthread_mutex_destroy (&vol->wait_lock);
  pthread_mutex_destroy (&vol->wal_lock);
  pthread_cond_destroy (&vol->wait_cond);
  pthread_mutex_destroy (&vol->pd.lock);
  pthread_mutex_destroy (&vol->bf_lock);
  pthread_cond_destroy (&vol->bf_cond);
  seqcut_destroy (&vol->seqcut);
  free (vol->identity);
  free (vol->cache_path);
  free (vol->stats_path);
  free (vol);
}

/* A failed start: discard what pre holds if it is hhc_preopen's (files
 * it created are removed again).
 */
static void
discard_preopened (struct hhc_preopened *pre)
{
  if (pre == NULL || !pre->owned)
    return;
  for (unsigned i = 0; i < HHC_MAX_LOGS; i++)
    dev_discard (pre->logs[i]);
  dev_discard (pre->cache);
  free (pre);
}

int
hhc_preopen (const struct hhc_conf *conf, struct hhc_preopened **prep)
{
  struct hhc_preopened *pre;
  int r = check_conf (conf, NULL);

  *prep = NULL;
  if (r)
    return r;
  pre = calloc (1, sizeof *pre);
  if (pre == NULL)
    return ENOMEM;
  pre->owned = true;
  r = dev_open_path (conf->cache_path, conf->cache_size, conf->direct,
                     conf->msgfn, &pre->cache);
  /* The log devices too (so that a missing or locked one is reported
   * at once).
   */
  for (unsigned i = 0; r == 0 && i < conf->nlogs; i++)
    r = dev_open_path (conf->log_paths[i], conf->log_size, false, conf->msgfn,
                       &pre->logs[i]);
  if (r)
    discard_preopened (pre);
  else
    *prep = pre;
  return r;
}

/* A volume for conf, not yet opened: conf copied (its strings too),
 * the locks, the identity.  It takes pre over (a failure discards it).
 */
static int
new_volume (const struct hhc_conf *conf, struct hhc_preopened *pre,
            const struct hhc_backend_ops *ops,
            const struct hhc_backend_info *info, struct hhc_volume **volp)
{
  struct hhc_volume *vol = calloc (1, sizeof *vol);

  if (vol == NULL)
    {
      discard_preopened (pre);
      return ENOMEM;
    }
  if (pre)
    {
      vol->pre = *pre; /* pre-opened devices, if any */
      if (pre->owned)
        free (pre); /* the volume has taken it over */
    }
  vol->dev = vol->pre.cache;
  pthread_mutex_init (&vol->wait_lock, NULL);
  pthread_mutex_init (&vol->wal_lock, NULL);
  pthread_cond_init (&vol->wait_cond, NULL);
  pthread_mutex_init (&vol->pd.lock, NULL);
  pthread_mutex_init (&vol->bf_lock, NULL);
  pthread_cond_init (&vol->bf_cond, NULL);
  seqcut_init (&vol->seqcut, conf->seq_cutoff);
  vol->conf = *conf;
  vol->ops = ops;
  vol->info = *info;
  vol->info.identity = NULL;
  vol->cache_path = conf->cache_path ? strdup (conf->cache_path) : NULL;
  vol->stats_path = conf->stats_path ? strdup (conf->stats_path) : NULL;
  vol->conf.cache_path = vol->cache_path;
  vol->conf.stats_path = vol->stats_path;
  if ((conf->cache_path && vol->cache_path == NULL)
      || (conf->stats_path && vol->stats_path == NULL))
    {
      free_volume (vol, true);
      return ENOMEM;
    }
  vol->conf.backend_id = NULL;
  vol->identity = make_identity (conf, info);
  if (vol->identity == NULL)
    {
      free_volume (vol, true);
      return ENOMEM;
    }
  *volp = vol;
  return 0;
}

/* Open the cache device (unless pre-opened) and the cache on it
 * (format or load its superblock, pair its log); check its block size
 * fits this volume.
 */
static int
open_device (struct hhc_volume *vol)
{
  const struct hhc_conf *conf = &vol->conf;
  int r;

  if (vol->dev == NULL
      && (r = dev_open_path (conf->cache_path, conf->cache_size, conf->direct,
                             conf->msgfn, &vol->dev))
             != 0)
    return r;
  vol->cache.dev = vol->dev;
  vol->cache.msgfn = conf->msgfn;
  if ((r = open_cache (vol)) != 0)
    return r;
  vol->bs = vol->cache.block_size;
  if (conf->direct && vol->bs < 4096)
    {
      hhc_msg (conf->msgfn, HHC_MSG_ERROR,
               "%s: direct=true needs a block-size of at least 4K (the "
               "cache has %u)",
               vol->dev->name, vol->bs);
      return EINVAL;
    }
  vol->nblocks = (vol->info.size + vol->bs - 1) / vol->bs;
  if (vol->nblocks > HHC_MAX_BLOCKS)
    {
      hhc_msg (conf->msgfn, HHC_MSG_ERROR,
               "volume has more than 2^34 blocks: use a larger block-size");
      return EINVAL;
    }
  return 0;
}

/* promote-hits and promote-window in range (promote=nhit). */
static int
check_promote (const struct hhc_conf *c)
{
  if (c->promote == HHC_PROMOTE_NHIT
      && (c->promote_hits < 1 || c->promote_hits > HHC_PROMOTE_MAX_HITS
          || c->promote_window > HHC_PROMOTE_MAX_WINDOW))
    {
      hhc_msg (c->msgfn, HHC_MSG_ERROR,
               "promote-hits must be from 1 to %d, promote-window at most %u",
               HHC_PROMOTE_MAX_HITS, HHC_PROMOTE_MAX_WINDOW);
      return EINVAL;
    }
  return 0;
}

/* promote=nhit's counters; the window defaults to the cache's slots:
 * a block read again within that many misses would still be in a cache
 * that promoted every miss (docs/design.md §4.8).
 */
static int
setup_promote (struct hhc_volume *vol)
{
  const struct hhc_conf *c = &vol->conf;
  uint64_t window = c->promote_window ? c->promote_window : vol->cache.nslots;
  int r = promote_init (&vol->promote, c->promote, c->promote_hits,
                        HHC_MAX (window, 1), 0);

  if (r)
    hhc_msg (c->msgfn, HHC_MSG_ERROR, "promote=%s: %s",
             hhc_promote_to_string (c->promote), strerror (r));
  return r;
}

/* Build the index and the LRU from the cache's metadata, then settle
 * what the last run left (settle_after_load).
 */
static int
load_slots (struct hhc_volume *vol)
{
  int r;

  if ((r = index_init (&vol->idx, vol->cache.nslots)) != 0)
    return r;
  lru_init (&vol->lru, vol->idx.slots, vol->conf.hot_ratio);
  if ((r = cache_init_mem (&vol->cache, &vol->idx)) != 0)
    return r;
  r = cache_load (&vol->cache, found_slot, vol);
  if (r == 0)
    r = settle_after_load (vol);
  if (r == 0)
    set_watermarks (vol);
  if (r == 0)
    r = setup_promote (vol);
  return r;
}

int
hhc_open (const struct hhc_conf *conf, struct hhc_preopened *pre,
          const struct hhc_backend_ops *ops,
          const struct hhc_backend_info *info, struct hhc_volume **volp)
{
  struct hhc_volume *vol;
  int r = check_conf (conf, pre);

  if (r == 0)
    r = check_promote (conf);
  if (r == 0 && info->size == 0)
    {
      hhc_msg (conf->msgfn, HHC_MSG_ERROR, "the backend is empty (size 0)");
      r = EINVAL;
    }
  if (r)
    {
      discard_preopened (pre);
      return r;
    }
  if ((r = new_volume (conf, pre, ops, info, &vol)) != 0)
    return r;
  if ((r = open_device (vol)) != 0 || (r = load_slots (vol)) != 0)
    {
      free_volume (vol, true);
      return r;
    }
  hhc_msg (conf->msgfn, HHC_MSG_INFO,
           "%s: %u slots of %u bytes, %" PRIu64 " dirty, %u free, mode %s",
           vol->dev->name, vol->cache.nslots, vol->bs, vol->ndirty,
           vol->cache.nfree, hhc_mode_to_string (conf->mode));
  *volp = vol;
  return 0;
}

int
hhc_start (struct hhc_volume *vol, void *bctx)
{
  int r;

  if (vol->retire_pending && (r = logpair_retire (vol, bctx)) != 0)
    return r;
  if (!hhc_mode_is_wb (vol->conf.mode) && vol->ndirty > 0)
    {
      hhc_msg (vol->conf.msgfn, HHC_MSG_INFO,
               "mode %s: writing back %" PRIu64 " dirty blocks first",
               hhc_mode_to_string (vol->conf.mode), vol->ndirty);
      if ((r = hhc_drain (vol, bctx)) != 0)
        {
          hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR,
                   "writing back dirty blocks: %s", strerror (r));
          return r;
        }
    }
  /* After a crash the backend may still hold writes of the last run
   * that it has not made durable (the process died, not the backend):
   * flush them before fills can cache that data as clean.
   */
  if (vol->loaded_state != CACHE_CLOSED && (r = vol->ops->flush (bctx)) != 0)
    {
      hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR,
               "flushing the backend after an unclean stop: %s", strerror (r));
      return r;
    }
  if (vol->log && (r = logstart_run (vol, bctx)) != 0)
    return r;
  r = flusher_start (&vol->flusher, vol, bctx);
  if (r)
    return r;
  __atomic_store_n (&vol->flusher_on, true, __ATOMIC_RELEASE);
  vol->bg_ctx = bctx;
  vol->started = true;
  return 0;
}

/* Closing cleanly: every clean block must equal the backend's durable
 * data, so flush the backend (when something may have gone to it
 * without a flush), commit, and only then set the clean flag.
 */
int
hhc_close (struct hhc_volume *vol)
{
  bool be_ok;
  int r, r2 = 0;

  if (vol == NULL)
    return 0;
  __atomic_store_n (&vol->flusher_on, false, __ATOMIC_RELEASE);
  flusher_stop (&vol->flusher);
  if (vol->log && vol->started)
    log_stop (vol->log); /* ends with a barrier over what it holds */
  if (vol->bg_ctx)
    {
      r2 = bflush_run (vol, vol->bg_ctx);
      be_ok = r2 == 0;
    }
  else
    be_ok = vol->conf.mode == HHC_MODE_WB
            && __atomic_load_n (&vol->be_written, __ATOMIC_ACQUIRE)
                   == __atomic_load_n (&vol->be_flushed, __ATOMIC_ACQUIRE);
  /* A flush that failed earlier may have dropped what the backend
   * held; a later success does not bring it back: not closed cleanly.
   */
  if (__atomic_load_n (&vol->be_failed, __ATOMIC_ACQUIRE))
    {
      be_ok = false;
      hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR,
               "close: a backend flush failed during this run: the cache "
               "stays marked in use");
    }
  r = cache_commit (&vol->cache);
  /* The generation the log's mirrors end the run with: a mirror given
   * alone next time must not come below it (logpair_stale).
   */
  if (vol->log && vol->started && vol->cache.log_gen)
    vol->cache.log_gen
        = HHC_MAX (vol->cache.log_gen, log_generation (vol->log));
  if (r == 0 && be_ok)
    r = cache_write_state (&vol->cache, CACHE_CLOSED);
  if (r2)
    hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR,
             "close: flushing the backend: %s (the cache stays marked "
             "in use)",
             strerror (r2));
  if (vol->conf.stats_path)
    {
      char *json = hhc_stats_json (vol);
      if (json)
        stats_write_file (vol->conf.stats_path, json);
      free (json);
    }
  free_volume (vol, false);
  return r ? r : r2;
}
