/* The cache device at open (open.c): format a blank or forced one,
 * check that a used one belongs to this backend, pair it with its log
 * (logpair.c), and after the load (cache_load) settle what the last run
 * left: drop untrusted clean blocks, mark the cache in use.
 */
#include <config.h>

#include <stdio.h>

#include "common.h"
#include "logpair.h"
#include "open_int.h"
#include "vol.h"

/* A used slot found by the load.  The volume is not published yet: no
 * other thread sees its LRU, so the LRU lock is not taken (a lock and
 * an unlock per slot were a tenth of a big cache's start-up).
 */
void
found_slot (void *opaque, uint32_t slot, uint64_t lba, enum slot_state st)
{
  struct hhc_volume *vol = opaque;

  if (st >= SLOT_DIRTY)
    vol->ndirty++;
  lru_insert_locked (&vol->lru, slot, st >= SLOT_DIRTY);
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
      hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR,
               "the volume has more than 2^34 blocks of %u bytes: use a "
               "larger block-size",
               c->block_size);
      return EINVAL;
    }
  r = cache_geometry (vol->dev->size, c->block_size, vol->info.size, &c->nslots,
                      &c->npages, &c->meta_off, &c->data_off);
  if (r)
    {
      hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR,
               "%s: device is too small for a cache of %u-byte blocks "
               "(%" PRIu64 " bytes)",
               vol->dev->name, c->block_size, vol->dev->size);
      return r;
    }
  hhc_msg (vol->conf.msgfn, HHC_MSG_INFO,
           "%s: formatting: %u slots of %u bytes", vol->dev->name, c->nslots,
           c->block_size);
  return cache_format (c, vol->identity);
}

/* Refuse a cache that belongs to another backend or geometry. */
static int
check_owner (struct hhc_volume *vol, const char *identity)
{
  struct hhc_cache *c = &vol->cache;

  if (strcmp (identity, vol->identity) != 0)
    {
      hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR,
               "%s: cache belongs to another backend (identity \"%s\", "
               "this backend's is \"%s\"); use format=force to discard it",
               vol->dev->name, identity, vol->identity);
      return EINVAL;
    }
  if (c->volume_size != vol->info.size)
    {
      hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR,
               "%s: cache belongs to a backend of %" PRIu64
               " bytes, this backend has %" PRIu64
               " (identity mismatch); use format=force to discard it",
               vol->dev->name, c->volume_size, vol->info.size);
      return EINVAL;
    }
  if (vol->conf.block_size && vol->conf.block_size != c->block_size)
    {
      hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR,
               "%s: cache was formatted with block-size=%u, not %u",
               vol->dev->name, c->block_size, vol->conf.block_size);
      return EINVAL;
    }
  return 0;
}

/* The device holds no cache (or format=force): refuse what could not
 * be told apart or replayed, pair the log, format.
 */
static int
new_cache (struct hhc_volume *vol)
{
  int r;

  if (*vol->identity == '\0' && !vol->conf.allow_no_identity)
    {
      /* Two backends of one size could then be swapped, and the cache
       * would serve one's blocks for the other's.
       */
      hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR,
               "%s: the backend has no export description: set "
               "backend-id= to a name unique to this backend before the "
               "cache is formatted (or require-backend-id=false to tie it "
               "to the backend's size alone)",
               vol->dev->name);
      return EINVAL;
    }
  if (*vol->identity == '\0')
    hhc_msg (vol->conf.msgfn, HHC_MSG_WARNING,
             "the backend has no export description and backend-id= is "
             "not set: the cache is tied to the backend's size only");
  if (vol->conf.format == HHC_FORMAT_FORCE
      && (r = logpair_retire_before_format (vol)) != 0)
    return r;
  if (vol->conf.mode != HHC_MODE_HHC && vol->conf.nlogs > 0
      && !vol->log_retired)
    {
      /* A log next to a new cache is replayed, which only mode hhc
       * does.
       */
      hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR,
               "%s: the cache is new, so log= would have to be replayed "
               "first: start in mode hhc (mode=%s refused)",
               vol->dev->name, hhc_mode_to_string (vol->conf.mode));
      return EINVAL;
    }
  struct logpair_old old = { .known = false };
  if (vol->conf.format == HHC_FORMAT_FORCE)
    logpair_read_old (vol, &old);
  memset (vol->cache.log_uuid, 0, 16); /* logpair_open sets it in hhc */
  if ((r = logpair_open (vol, true)) != 0
      || (r = logpair_check_old (vol, &old)) != 0)
    return r;
  logpair_link (vol);
  return format_cache (vol);
}

/* Format or read the superblock according to conf->format. */
int
open_cache (struct hhc_volume *vol)
{
  HHC_CLEANUP_FREE char *identity = malloc (CACHE_IDENTITY_MAX + 1);
  int r;

  if (identity == NULL)
    return ENOMEM;
  if (vol->conf.format == HHC_FORMAT_FORCE)
    return new_cache (vol);
  r = cache_read_super (&vol->cache, identity, CACHE_IDENTITY_MAX + 1);
  if (r == ENOENT && vol->conf.format == HHC_FORMAT_AUTO)
    return new_cache (vol);
  if (r == ENOENT)
    {
      hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR,
               "%s: not an HHC cache and format=never", vol->dev->name);
      return EINVAL;
    }
  if (r)
    return r;
  if ((r = check_owner (vol, identity)) != 0)
    return r;
  if (*identity == '\0')
    hhc_msg (vol->conf.msgfn, HHC_MSG_WARNING,
             "%s: the cache is tied to the backend's size only (formatted "
             "with no backend-id= for a plugin with no export description)",
             vol->dev->name);
  return logpair_open (vol, false);
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
int
settle_after_load (struct hhc_volume *vol)
{
  enum cache_state state;
  int r = cache_read_state (&vol->cache, &state);

  if (r == 0)
    r = cache_check_state_seq (&vol->cache);
  if (r)
    return r;
  vol->loaded_state = state;
  if ((r = logpair_stale (vol, state)) != 0)
    return r;
  if (state == CACHE_IN_USE_HHC && vol->conf.mode != HHC_MODE_HHC)
    {
      /* FLUSHes since its last checkpoint are in the log only. */
      hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR,
               "%s: the last run, in mode hhc with ssd-sync=checkpoint, did "
               "not stop cleanly and its log holds data this cache does "
               "not: start it in mode hhc with its log= first (mode=%s "
               "refused)",
               vol->dev->name, hhc_mode_to_string (vol->conf.mode));
      return EINVAL;
    }
  if (vol->conf.mode != HHC_MODE_HHC && (r = logpair_check_retire (vol)) != 0)
    return r;
  if (vol->log)
    logpair_link (vol);
  if (state == CACHE_IN_USE_HHC && vol->log_lost)
    {
      /* log-lost=accept (else refused: logpair_open, logpair_stale):
       * the cache as its last commit left it, no redo.
       */
      hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR,
               "%s: the last run, with ssd-sync=checkpoint, did not stop "
               "cleanly and its log is gone or stale: starting without its "
               "redo (log-lost=accept): what FLUSHes covered since the "
               "cache's last commit is lost, in part (blocks rewritten in "
               "place since then kept, others not: check the filesystem)",
               vol->dev->name);
      state = vol->loaded_state = CACHE_IN_USE_WB;
    }
  if (state == CACHE_IN_USE)
    {
      uint32_t n = drop_clean (vol);
      hhc_msg (vol->conf.msgfn, HHC_MSG_INFO,
               "%s: the cache was not closed cleanly after a run in pt or "
               "wt mode: dropped %u clean blocks, kept %" PRIu64
               " dirty blocks",
               vol->dev->name, n, vol->ndirty);
    }
  /* A redo owed by the last run stays owed until logstart_run has done
   * it, whatever this run's ssd-sync.
   */
  if (vol->log && (vol->conf.wal || state == CACHE_IN_USE_HHC))
    state = CACHE_IN_USE_HHC;
  else if (hhc_mode_is_wb (vol->conf.mode))
    state = CACHE_IN_USE_WB;
  else
    state = CACHE_IN_USE;
  vol->run_state = state;
  /* A run with ssd-sync=checkpoint asks for a redo from its log's mark
   * on (logpair_record_gen): until then no client was served and the
   * cache holds everything, and a crash there must not ask for a redo
   * of a log that has no mark of this run yet (a mirror given alone
   * after a warning would be refused as stale).
   */
  if (state == CACHE_IN_USE_HHC && vol->loaded_state != CACHE_IN_USE_HHC)
    state = CACHE_IN_USE_WB;
  logpair_reserve_epoch (vol);
  r = cache_commit (&vol->cache);
  if (r == 0)
    r = cache_write_state (&vol->cache, state);
  return r;
}
