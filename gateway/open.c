/* Volume life cycle: open (format or load the cache and check that it
 * belongs to this backend), start, drain, close; and statistics.
 */
#include <config.h>

#include <stdio.h>

#include "common.h"
#include "volume_int.h"

static int
check_conf (const struct hhc_conf *conf, const struct hhc_preopened *pre)
{
  hhc_log_fn log = conf->log;

  if (conf->cache_path == NULL && (pre == NULL || pre->cache == NULL))
    {
      hhc_log (log, HHC_LOG_ERROR, "cache= is required");
      return EINVAL;
    }
  if (conf->mode == HHC_MODE_HHC && conf->nlogs == 0)
    {
      hhc_log (log, HHC_LOG_ERROR, "mode=hhc needs at least one log=");
      return EINVAL;
    }
  if (conf->nlogs > HHC_MAX_LOGS)
    {
      hhc_log (log, HHC_LOG_ERROR, "log= may be given at most %d times",
               HHC_MAX_LOGS);
      return EINVAL;
    }
  if (conf->segment_size
      && (!HHC_IS_POW2 (conf->segment_size) || conf->segment_size < 65536
          || conf->segment_size > 64 * 1024 * 1024))
    {
      hhc_log (log, HHC_LOG_ERROR,
               "segment-size must be a power of two from 64K to 64M");
      return EINVAL;
    }
  if (conf->log_buffers == 1 || conf->log_buffers > 64)
    {
      hhc_log (log, HHC_LOG_ERROR, "log-buffers must be from 2 to 64");
      return EINVAL;
    }
  if (conf->block_size
      && (!HHC_IS_POW2 (conf->block_size) || conf->block_size < 512
          || conf->block_size > 1048576))
    {
      hhc_log (log, HHC_LOG_ERROR,
               "block-size must be a power of two from 512 to 1M");
      return EINVAL;
    }
  if (conf->direct && conf->block_size && conf->block_size < 4096)
    {
      hhc_log (log, HHC_LOG_ERROR,
               "direct=true needs a block-size of at least 4K");
      return EINVAL;
    }
  if (conf->dirty_low > conf->dirty_high || conf->dirty_high > conf->dirty_max
      || conf->dirty_max > 100 || conf->dirty_max == 0)
    {
      hhc_log (log, HHC_LOG_ERROR,
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
found_slot (void *opaque, uint32_t slot, uint64_t lba, enum slot_state st)
{
  struct hhc_volume *vol = opaque;

  if (st >= SLOT_DIRTY)
    {
      vol->ndirty++;
      lru_insert_dirty (&vol->lru, slot);
    }
  else
    lru_insert_clean (&vol->lru, slot);
}

static int
format_cache (struct hhc_volume *vol)
{
  struct hhc_cache *c = &vol->cache;
  int r;

  c->block_size = vol->conf.block_size ? vol->conf.block_size : 4096;
  c->volume_size = vol->info.size;
  if ((vol->info.size + c->block_size - 1) / c->block_size > HHC_MAX_BLOCKS)
    {
      hhc_log (vol->conf.log, HHC_LOG_ERROR,
               "the volume has more than 2^34 blocks of %u bytes: use a "
               "larger block-size",
               c->block_size);
      return EINVAL;
    }
  r = cache_geometry (vol->dev->size, c->block_size, vol->info.size, &c->nslots,
                      &c->npages, &c->meta_off, &c->data_off);
  if (r)
    {
      hhc_log (vol->conf.log, HHC_LOG_ERROR,
               "%s: device is too small for a cache of %u-byte blocks "
               "(%" PRIu64 " bytes)",
               vol->dev->name, c->block_size, vol->dev->size);
      return r;
    }
  hhc_log (vol->conf.log, HHC_LOG_INFO, "%s: formatting: %u slots of %u bytes",
           vol->dev->name, c->nslots, c->block_size);
  return cache_format (c, vol->identity);
}

/* Refuse a cache that belongs to another backend or geometry. */
static int
check_owner (struct hhc_volume *vol, const char *identity)
{
  struct hhc_cache *c = &vol->cache;

  if (strcmp (identity, vol->identity) != 0)
    {
      hhc_log (vol->conf.log, HHC_LOG_ERROR,
               "%s: cache belongs to another backend (identity \"%s\", "
               "this backend's is \"%s\"); use format=force to discard it",
               vol->dev->name, identity, vol->identity);
      return EINVAL;
    }
  if (c->volume_size != vol->info.size)
    {
      hhc_log (vol->conf.log, HHC_LOG_ERROR,
               "%s: cache belongs to a backend of %" PRIu64
               " bytes, this backend has %" PRIu64
               " (identity mismatch); use format=force to discard it",
               vol->dev->name, c->volume_size, vol->info.size);
      return EINVAL;
    }
  if (vol->conf.block_size && vol->conf.block_size != c->block_size)
    {
      hhc_log (vol->conf.log, HHC_LOG_ERROR,
               "%s: cache was formatted with block-size=%u, not %u",
               vol->dev->name, c->block_size, vol->conf.block_size);
      return EINVAL;
    }
  return 0;
}

static bool
uuid_is_zero (const uint8_t u[16])
{
  static const uint8_t z[16];
  return memcmp (u, z, 16) == 0;
}

/* Mode hhc: open the log and decide what it means for the cache.
 * cache_new: the cache is about to be formatted (blank, or
 * format=force): a valid log of this backend is replayed at start.  A
 * loaded cache needs the log it is paired with, or a blank one.
 */
static struct log_conf
log_conf_of (struct hhc_volume *vol, uint32_t block_size)
{
  return (struct log_conf){
    .paths = vol->conf.log_paths,
    .npaths = vol->conf.nlogs,
    .block_size = block_size,
    .volume_size = vol->info.size,
    .identity = vol->identity,
    .segment_size = vol->conf.segment_size,
    .nbuffers = vol->conf.log_buffers,
    .log = vol->conf.log,
    .test_devs = vol->pre.logs,
    .ring_slots = vol->pre.log_ring_slots,
  };
}

static int
open_log (struct hhc_volume *vol, bool cache_new)
{
  struct hhc_cache *c = &vol->cache;
  static const uint8_t zero[16];
  uint8_t luuid[16], lcache[16];
  char a[37], b[37];
  enum log_found found;
  struct log_conf lc = log_conf_of (
      vol, cache_new ? (vol->conf.block_size ? vol->conf.block_size : 4096)
                     : c->block_size);
  int r;

  if (vol->conf.mode != HHC_MODE_HHC)
    return 0;
  r = log_open (&lc, cache_new ? zero : c->uuid, &vol->log, &found);
  if (r)
    return r;
  log_uuids (vol->log, luuid, lcache);
  hhc_uuid_str (luuid, a);
  if (cache_new)
    {
      memcpy (c->log_uuid, luuid, 16);
      vol->replay_pending = found == LOG_FOUND_VALID;
      return 0;
    }
  if (found == LOG_FOUND_BLANK)
    {
      if (!uuid_is_zero (c->log_uuid))
        {
          vol->log_lost = true;
          hhc_uuid_str (c->log_uuid, b);
          hhc_log (vol->conf.log, HHC_LOG_WARNING,
                   "the log this cache was paired with (%s) is gone: "
                   "starting with a new log %s; every dirty block is "
                   "written to it before the first client request",
                   b, a);
        }
      return 0;
    }
  if (memcmp (lcache, c->uuid, 16) == 0)
    return 0;
  if (memcmp (c->log_uuid, luuid, 16) == 0)
    {
      hhc_log (vol->conf.log, HHC_LOG_INFO,
               "log %s: a recovery into this cache was interrupted: "
               "replaying the log again",
               a);
      vol->replay_pending = true;
      return 0;
    }
  hhc_uuid_str (lcache, b);
  hhc_log (vol->conf.log, HHC_LOG_ERROR,
           "log %s belongs to another cache (paired with cache %s): give "
           "the log written with this cache, or a blank log device",
           vol->conf.log_paths[0] ? vol->conf.log_paths[0] : a, b);
  log_close (vol->log);
  vol->log = NULL;
  return EINVAL;
}

/* Can a replay of a log still write into the backend under this
 * cache (cache.h, enum cache_log_link)?
 */
static bool
cache_log_paired (const struct hhc_cache *c)
{
  return c->log_link == CACHE_LOG_PAIRED
         || (c->log_link == CACHE_LOG_UNKNOWN && !uuid_is_zero (c->log_uuid));
}

/* A mode other than hhc on a cache that was used in mode hhc: what it
 * writes back goes unseen by the log, whose entries (dirty blocks of
 * the last hhc run) a replay after the loss of this cache would write
 * over it.  Refused, unless log= names that log (checked here):
 * hhc_start then writes every dirty block back (the log protected
 * them against the loss of the cache until then), voids the log
 * (log_retire) and records in the state page that no log is paired.
 */
static int
check_retire_log (struct hhc_volume *vol)
{
  struct hhc_cache *c = &vol->cache;
  struct log_conf lc = log_conf_of (vol, c->block_size);
  int r;

  if (vol->log_retired) /* by format=force, before the format */
    return 0;
  if (vol->conf.nlogs == 0)
    {
      if (!cache_log_paired (c))
        return 0;
      hhc_log (vol->conf.log, HHC_LOG_ERROR,
               "%s: the cache was used in mode hhc and its log may still "
               "hold older copies of its blocks, which a replay after the "
               "loss of this cache would write over what mode %s writes "
               "back: give that log as log= (it is then voided), or start "
               "in mode hhc",
               vol->dev->name, hhc_mode_to_string (vol->conf.mode));
      return EINVAL;
    }
  r = log_retire (&lc, c->uuid, c->linked_log, false);
  vol->retire_pending = r == 0;
  return r;
}

static int
retire_log (struct hhc_volume *vol, void *bctx)
{
  struct hhc_cache *c = &vol->cache;
  struct log_conf lc = log_conf_of (vol, c->block_size);
  int r = hhc_drain (vol, bctx);

  if (r)
    hhc_log (vol->conf.log, HHC_LOG_ERROR,
             "writing back dirty blocks before the log is voided: %s",
             strerror (r));
  if (r == 0)
    r = log_retire (&lc, c->uuid, c->linked_log, true);
  if (r == 0)
    {
      c->log_link = CACHE_LOG_RETIRED;
      r = cache_write_state (c, vol->run_state);
    }
  vol->retire_pending = r != 0;
  return r;
}

/* Record in the state page (written by format_cache or
 * settle_after_load) which log, if any, this run pairs the cache with.
 */
static void
link_log (struct hhc_volume *vol)
{
  struct hhc_cache *c = &vol->cache;
  uint8_t lcache[16];

  memset (c->linked_log, 0, 16);
  if (vol->log == NULL)
    {
      c->log_link = CACHE_LOG_UNKNOWN; /* with log_uuid zero: none */
      return;
    }
  c->log_link = CACHE_LOG_PAIRED;
  log_uuids (vol->log, c->linked_log, lcache);
}

/* format=force in a mode other than hhc over a cache used in hhc: its
 * log would still be replayed after the loss of the new cache, over
 * what this mode writes back.  With log= naming it, it is voided first
 * (log_retired; the old cache's dirty blocks go, as format=force
 * says); without, refused.  A superblock that cannot be read pairs
 * nothing.
 */
static int
retire_before_format (struct hhc_volume *vol)
{
  HHC_CLEANUP_FREE char *identity = malloc (CACHE_IDENTITY_MAX + 1);
  struct hhc_cache *c = &vol->cache;
  enum cache_state state;
  int r;

  if (identity == NULL)
    return ENOMEM;
  if (vol->conf.mode == HHC_MODE_HHC
      || cache_read_super (c, identity, CACHE_IDENTITY_MAX + 1) != 0
      || cache_read_state (c, &state) != 0 || !cache_log_paired (c))
    return 0;
  if (vol->conf.nlogs == 0)
    {
      hhc_log (vol->conf.log, HHC_LOG_ERROR,
               "%s: format=force over a cache used in mode hhc: its log "
               "would still be replayed after the loss of the new cache, "
               "over what mode %s writes back: give that log as log= (it "
               "is then voided)",
               vol->dev->name, hhc_mode_to_string (vol->conf.mode));
      return EINVAL;
    }
  struct log_conf lc = log_conf_of (vol, c->block_size);
  r = log_retire (&lc, c->uuid, c->linked_log, true);
  vol->log_retired = r == 0;
  return r;
}

/* Format or read the superblock according to conf->format. */
static int
open_cache (struct hhc_volume *vol, bool *formatted)
{
  HHC_CLEANUP_FREE char *identity = malloc (CACHE_IDENTITY_MAX + 1);
  int r;

  if (identity == NULL)
    return ENOMEM;
  *formatted = false;
  if (vol->conf.format == HHC_FORMAT_FORCE)
    goto format;
  r = cache_read_super (&vol->cache, identity, CACHE_IDENTITY_MAX + 1);
  if (r == ENOENT && vol->conf.format == HHC_FORMAT_AUTO)
    goto format;
  if (r == ENOENT)
    {
      hhc_log (vol->conf.log, HHC_LOG_ERROR,
               "%s: not an HHC cache and format=never", vol->dev->name);
      return EINVAL;
    }
  if (r)
    return r;
  if ((r = check_owner (vol, identity)) != 0)
    return r;
  if (*identity == '\0')
    hhc_log (vol->conf.log, HHC_LOG_WARNING,
             "%s: the cache is tied to the backend's size only (formatted "
             "with no backend-id= for a plugin with no export description)",
             vol->dev->name);
  return open_log (vol, false);

format:
  *formatted = true;
  if (*vol->identity == '\0' && !vol->conf.allow_no_identity)
    {
      /* Two backends of one size could then be swapped, and the cache
       * would serve one's blocks for the other's.
       */
      hhc_log (vol->conf.log, HHC_LOG_ERROR,
               "%s: the backend has no export description: set "
               "backend-id= to a name unique to this backend before the "
               "cache is formatted (or require-backend-id=false to tie it "
               "to the backend's size alone)",
               vol->dev->name);
      return EINVAL;
    }
  if (*vol->identity == '\0')
    hhc_log (vol->conf.log, HHC_LOG_WARNING,
             "the backend has no export description and backend-id= is "
             "not set: the cache is tied to the backend's size only");
  if (vol->conf.format == HHC_FORMAT_FORCE
      && (r = retire_before_format (vol)) != 0)
    return r;
  if (vol->conf.mode != HHC_MODE_HHC && vol->conf.nlogs > 0
      && !vol->log_retired)
    {
      /* A log next to a new cache is replayed, which only mode hhc
       * does.
       */
      hhc_log (vol->conf.log, HHC_LOG_ERROR,
               "%s: the cache is new, so log= would have to be replayed "
               "first: start in mode hhc (mode=%s refused)",
               vol->dev->name, hhc_mode_to_string (vol->conf.mode));
      return EINVAL;
    }
  memset (vol->cache.log_uuid, 0, 16); /* open_log sets it in hhc */
  if ((r = open_log (vol, true)) != 0)
    return r;
  link_log (vol);
  return format_cache (vol);
}

/* Free every clean slot (after an unclean stop in pt/wt). */
static uint32_t
drop_clean (struct hhc_volume *vol)
{
  uint32_t n = 0;

  for (uint32_t s = 0; s < vol->idx.nslots; s++)
    if (slot_state (&vol->idx.slots[s]) == SLOT_CLEAN)
      {
        index_remove (&vol->idx, s);
        lru_remove (&vol->lru, s);
        cache_set_state (&vol->cache, s, SLOT_FREE);
        cache_release_slot (&vol->cache, s);
        n++;
      }
  return n;
}

/* After load: drop clean blocks if the last run crashed in a mode
 * whose clean blocks cannot be trusted (see enum cache_state), make the
 * result durable (also duplicates resolved by the load), and mark the
 * cache "in use" before any I/O.
 */
static int
settle_after_load (struct hhc_volume *vol)
{
  enum cache_state state;
  int r = cache_read_state (&vol->cache, &state);

  if (r)
    return r;
  vol->loaded_state = state;
  if (state == CACHE_IN_USE_HHC && vol->conf.mode != HHC_MODE_HHC)
    {
      /* FLUSHes since its last checkpoint are in the log only. */
      hhc_log (vol->conf.log, HHC_LOG_ERROR,
               "%s: the last run, in mode hhc with ssd-sync=checkpoint, did "
               "not stop cleanly and its log holds data this cache does "
               "not: start it in mode hhc with its log= first (mode=%s "
               "refused)",
               vol->dev->name, hhc_mode_to_string (vol->conf.mode));
      return EINVAL;
    }
  if (vol->conf.mode != HHC_MODE_HHC && (r = check_retire_log (vol)) != 0)
    return r;
  if (vol->log)
    link_log (vol);
  if (state == CACHE_IN_USE_HHC && vol->log_lost)
    hhc_log (vol->conf.log, HHC_LOG_ERROR,
             "%s: the last run, with ssd-sync=checkpoint, did not stop "
             "cleanly and its log is gone: what FLUSHes covered since the "
             "cache's last commit is lost",
             vol->dev->name);
  if (state == CACHE_IN_USE)
    {
      uint32_t n = drop_clean (vol);
      hhc_log (vol->conf.log, HHC_LOG_INFO,
               "%s: the cache was not closed cleanly after a run in pt or "
               "wt mode: dropped %u clean blocks, kept %" PRIu64
               " dirty blocks",
               vol->dev->name, n, vol->ndirty);
    }
  /* A redo owed by the last run stays owed until start_log has done
   * it, whatever this run's ssd-sync.
   */
  if (vol->log && (vol->conf.wal || state == CACHE_IN_USE_HHC))
    state = CACHE_IN_USE_HHC;
  else if (hhc_mode_is_wb (vol->conf.mode))
    state = CACHE_IN_USE_WB;
  else
    state = CACHE_IN_USE;
  vol->run_state = state;
  r = cache_commit (&vol->cache);
  if (r == 0)
    r = cache_write_state (&vol->cache, state);
  return r;
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
  if (vol->pre.cache == NULL || vol->pre.owned)
    close_dev (vol->dev);
  pthread_mutex_destroy (&vol->wait_lock);
  pthread_mutex_destroy (&vol->wal_lock);
  pthread_cond_destroy (&vol->wait_cond);
  pthread_mutex_destroy (&vol->pd.lock);
  pthread_mutex_destroy (&vol->bf_lock);
  pthread_cond_destroy (&vol->bf_cond);
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
                     conf->log, &pre->cache);
  /* The log devices too (so that a missing or locked one is reported
   * at once).
   */
  for (unsigned i = 0; r == 0 && i < conf->nlogs; i++)
    r = dev_open_path (conf->log_paths[i], conf->log_size, false, conf->log,
                       &pre->logs[i]);
  if (r)
    discard_preopened (pre);
  else
    *prep = pre;
  return r;
}

int
hhc_open (const struct hhc_conf *conf, struct hhc_preopened *pre,
          const struct hhc_backend_ops *ops,
          const struct hhc_backend_info *info, struct hhc_volume **volp)
{
  struct hhc_volume *vol;
  bool formatted;
  int r;

  if ((r = check_conf (conf, pre)) != 0)
    goto fail_early;
  if (info->size == 0)
    {
      hhc_log (conf->log, HHC_LOG_ERROR, "the backend is empty (size 0)");
      r = EINVAL;
      goto fail_early;
    }
  vol = calloc (1, sizeof *vol);
  if (vol == NULL)
    {
      r = ENOMEM;
      goto fail_early;
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
  vol->conf = *conf;
  vol->ops = ops;
  vol->info = *info;
  vol->info.identity = NULL;
  vol->cache_path = conf->cache_path ? strdup (conf->cache_path) : NULL;
  vol->stats_path = conf->stats_path ? strdup (conf->stats_path) : NULL;
  vol->conf.cache_path = vol->cache_path;
  vol->conf.stats_path = vol->stats_path;
  vol->conf.backend_id = NULL;
  vol->identity = make_identity (conf, info);
  if (vol->identity == NULL)
    {
      r = ENOMEM;
      goto fail;
    }
  if (vol->dev == NULL
      && (r = dev_open_path (conf->cache_path, conf->cache_size, conf->direct,
                             conf->log, &vol->dev))
             != 0)
    goto fail;

  vol->cache.dev = vol->dev;
  vol->cache.log = conf->log;
  if ((r = open_cache (vol, &formatted)) != 0)
    goto fail;
  vol->bs = vol->cache.block_size;
  if (conf->direct && vol->bs < 4096)
    {
      hhc_log (conf->log, HHC_LOG_ERROR,
               "%s: direct=true needs a block-size of at least 4K (the "
               "cache has %u)",
               vol->dev->name, vol->bs);
      r = EINVAL;
      goto fail;
    }
  vol->nblocks = (info->size + vol->bs - 1) / vol->bs;
  if (vol->nblocks > HHC_MAX_BLOCKS)
    {
      hhc_log (conf->log, HHC_LOG_ERROR,
               "volume has more than 2^34 blocks: use a larger block-size");
      r = EINVAL;
      goto fail;
    }
  if ((r = index_init (&vol->idx, vol->cache.nslots)) != 0)
    goto fail;
  lru_init (&vol->lru, vol->idx.slots, conf->hot_ratio);
  if ((r = cache_init_mem (&vol->cache, &vol->idx)) != 0)
    goto fail;
  r = cache_load (&vol->cache, found_slot, vol);
  if (r == 0)
    r = settle_after_load (vol);
  if (r)
    goto fail;
  set_watermarks (vol);
  hhc_log (conf->log, HHC_LOG_INFO,
           "%s: %u slots of %u bytes, %" PRIu64 " dirty, %u free, mode %s",
           vol->dev->name, vol->cache.nslots, vol->bs, vol->ndirty,
           vol->cache.nfree, hhc_mode_to_string (conf->mode));
  *volp = vol;
  return 0;

fail:
  free_volume (vol, true);
  return r;

fail_early:
  discard_preopened (pre);
  return r;
}

struct replay_ctx {
  struct hhc_volume *vol;
  void *bctx;
  unsigned last_pct;
  uint64_t to_backend; /* redo: blocks written to the backend */
};

static int
replay_write (void *opaque, const void *buf, uint64_t lba)
{
  struct replay_ctx *rc = opaque;
  struct hhc_volume *vol = rc->vol;
  uint64_t off = lba * vol->bs;
  uint32_t len = HHC_MIN ((uint64_t)vol->bs, vol->info.size - off);

  return vol->ops->pwrite (rc->bctx, buf, len, off, false);
}

/* Redo one block of the log into the cache (the restart after a crash
 * in hhc: FLUSH synced only the log): into the slot the loaded metadata
 * names for this LBA, else a free slot (persisted free: invariant 1),
 * else the backend.  The block becomes dirty; start_log logs it again.
 * Nothing runs yet but this thread.
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
    hhc_log (rc->vol->conf.log, HHC_LOG_INFO,
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

/* Mode hhc at start: replay the log into the backend if the cache is
 * new, then write every dirty block of the cache to the log under a
 * new base barrier (DESIGN.md section 7; docs/log.md).
 */
static int
start_log (struct hhc_volume *vol, void *bctx)
{
  struct log_callbacks cb = { vol, log_relog_cb, log_pressure_cb,
                              vol->conf.wal ? log_checkpoint_cb : NULL };
  struct replay_ctx rc = { vol, bctx, 0, 0 };
  uint32_t *keys = NULL;
  uint64_t *lbas = NULL;
  size_t n = 0;
  int r;

  if (vol->replay_pending)
    {
      r = log_replay (vol->log, replay_write, replay_progress, &rc);
      if (r == 0 && (r = vol->ops->flush (bctx)) != 0)
        hhc_log (vol->conf.log, HHC_LOG_ERROR,
                 "log replay: flushing the backend: %s", strerror (r));
      if (r)
        return r;
      vol->replay_pending = false;
    }
  else if (vol->loaded_state == CACHE_IN_USE_HHC)
    {
      /* A crash in hhc with ssd-sync=checkpoint (this run may have any
       * ssd-sync): what FLUSHes covered since the last checkpoint is in
       * the log only.  Redo it into the cache (the log stays as
       * it is until the new base barrier, so a crash during the redo
       * just redoes again).
       */
      r = log_replay (vol->log, redo_write, replay_progress, &rc);
      if (r == 0)
        r = cache_commit (&vol->cache);
      if (r == 0 && rc.to_backend > 0)
        r = vol->ops->flush (bctx);
      if (r)
        {
          hhc_log (vol->conf.log, HHC_LOG_ERROR,
                   "log: redoing the last run's log into the cache: %s",
                   strerror (r));
          return r;
        }
      if (vol->redone || rc.to_backend)
        hhc_log (vol->conf.log, HHC_LOG_INFO,
                 "log: the last run did not stop cleanly: redid %" PRIu64
                 " blocks into the cache, wrote %" PRIu64
                 " to the backend (no free slot)",
                 vol->redone, rc.to_backend);
    }
  /* Done (and durable): now this run's own state (settle_after_load
   * kept the one that asks for the redo).
   */
  if (vol->loaded_state == CACHE_IN_USE_HHC && !vol->conf.wal
      && (r = cache_write_state (&vol->cache, CACHE_IN_USE_WB)) != 0)
    return r;
  if ((r = log_start (vol->log, vol->cache.uuid, vol->cache.nslots, &cb)) != 0)
    return r;
  /* The dirty blocks must fit in the log next to the last run's
   * segments (which stay until the new base barrier is written).  If
   * they do not, write them all back first: then nothing in the old
   * segments is needed any more.
   */
  if (!log_rebase_fits (vol->log, vol->ndirty))
    {
      hhc_log (vol->conf.log, HHC_LOG_INFO,
               "log: no room for the %" PRIu64
               " dirty blocks next to the last run's segments: writing "
               "them back first",
               vol->ndirty);
      if ((r = flusher_writeback_all (vol, bctx)) != 0
          || (r = vol->ops->flush (bctx)) != 0 || (r = log_discard (vol->log)))
        {
          hhc_log (vol->conf.log, HHC_LOG_ERROR,
                   "log: writing back before start: %s", strerror (r));
          return r;
        }
    }
  keys = malloc ((vol->ndirty + 1) * sizeof *keys);
  lbas = malloc ((vol->ndirty + 1) * sizeof *lbas);
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
        hhc_log (vol->conf.log, HHC_LOG_INFO,
                 "log: writing %zu dirty blocks to the log", n);
      r = log_rebase (vol->log, keys, lbas, n);
    }
  free (keys);
  free (lbas);
  return r;
}

int
hhc_start (struct hhc_volume *vol, void *bctx)
{
  int r;

  if (vol->retire_pending && (r = retire_log (vol, bctx)) != 0)
    return r;
  if (!hhc_mode_is_wb (vol->conf.mode) && vol->ndirty > 0)
    {
      hhc_log (vol->conf.log, HHC_LOG_INFO,
               "mode %s: writing back %" PRIu64 " dirty blocks first",
               hhc_mode_to_string (vol->conf.mode), vol->ndirty);
      if ((r = hhc_drain (vol, bctx)) != 0)
        {
          hhc_log (vol->conf.log, HHC_LOG_ERROR,
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
      hhc_log (vol->conf.log, HHC_LOG_ERROR,
               "flushing the backend after an unclean stop: %s", strerror (r));
      return r;
    }
  if (vol->log && (r = start_log (vol, bctx)) != 0)
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
      hhc_log (vol->conf.log, HHC_LOG_ERROR,
               "close: a backend flush failed during this run: the cache "
               "stays marked in use");
    }
  r = cache_commit (&vol->cache);
  if (r == 0 && be_ok)
    r = cache_write_state (&vol->cache, CACHE_CLOSED);
  if (r2)
    hhc_log (vol->conf.log, HHC_LOG_ERROR,
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
