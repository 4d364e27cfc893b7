/* Which HDD log a cache is paired with, decided at open (before
 * anything runs): mode hhc opens its log and checks that it is the
 * cache's (logpair_open); another mode on a cache that was used in
 * hhc retires (voids) that log, or is refused (logpair_check_retire,
 * logpair_retire, logpair_retire_before_format).  logpair_link
 * records the pairing in the state page the open writes.
 *
 * The pairing, per the cache's state page (cache.h, enum
 * cache_log_link) and the log's superblock (log_uuids):
 *
 *   cache new            a valid log of this backend: replayed at start
 *   log blank            the cache's log is gone (log_lost) or none
 *   log names the cache  paired: this run goes on with it
 *   cache names the log  a replay into this cache was interrupted:
 *                        replayed again
 *   otherwise            another cache's log: refused
 *
 * What a log given says about a loaded cache (older than the log, a
 * redo or replay owed, which of the cases above a valid log is) is
 * logpair-check.c's.
 *
 * Runs in hhc_open or hhc_start, from one thread, before any client
 * request; takes no lock itself (logpair_retire writes every dirty
 * block back through hhc_drain first, with that path's locks).
 */
#include <config.h>

#include <stdio.h>

#include "common.h"
#include "logpair.h"
#include "logpair_int.h"
#include "vol.h"

/* The log_conf of this volume's log. */
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
    .inflight = vol->conf.log_inflight,
    .msgfn = vol->conf.msgfn,
    .devs = vol->pre.logs,
    .ring_slots = vol->pre.log_ring_slots,
  };
}

/* Can a replay of a log still write into the backend under this
 * cache (cache.h, enum cache_log_link)?
 */
static bool
cache_log_paired (const struct hhc_cache *c)
{
  return c->log_link == CACHE_LOG_PAIRED || c->log_link == CACHE_LOG_REPLAYING
         || (c->log_link == CACHE_LOG_UNKNOWN && !uuid_is_zero (c->log_uuid));
}

/* Mode hhc: open the log and decide what it means for the cache.
 * cache_new: the cache is about to be formatted (blank, or
 * format=force): a valid log of this backend is replayed at start.  A
 * loaded cache needs the log it is paired with, or a blank one.
 */
int
logpair_open (struct hhc_volume *vol, bool cache_new)
{
  struct hhc_cache *c = &vol->cache;
  static const uint8_t zero[16];
  uint8_t luuid[16], lcache[16];
  char a[37];
  enum log_found found;
  struct log_conf lc = log_conf_of (
      vol, cache_new ? (vol->conf.block_size ? vol->conf.block_size : 4096)
                     : c->block_size);
  int r;

  if (vol->conf.mode != HHC_MODE_HHC)
    return 0;
  if (!cache_new
      && ((r = note_redo_owed (vol, &lc)) != 0
          || (r = behind_log (vol, &lc)) != 0))
    return r;
  /* (The state page read by note_redo_owed.) */
  lc.format_epoch = cache_new ? 0 : known_epoch (c);
  r = log_open (&lc, cache_new ? zero : c->uuid, &vol->log, &found);
  if (r == ENODATA)
    {
      if (no_redo (vol, "is blank or voided") == 0)
        replay_unfinished (vol); /* says why */
      return EINVAL;
    }
  if (r)
    return r;
  log_uuids (vol->log, luuid, lcache);
  hhc_uuid_str (luuid, a);
  if (cache_new)
    {
      memcpy (c->log_uuid, luuid, 16);
      vol->replay_pending = found == LOG_FOUND_VALID;
      return voided_since (vol);
    }
  if (found == LOG_FOUND_BLANK)
    {
      /* A redo owed comes here only with log-lost=accept (else
       * ENODATA above).
       */
      if ((r = log_gone (vol, a)) != 0)
        {
          log_close (vol->log);
          vol->log = NULL;
        }
      return r;
    }
  return pair_valid (vol, luuid, lcache, a);
}

/* A mode other than hhc on a cache that was used in mode hhc: what it
 * writes back goes unseen by the log, whose entries (dirty blocks of
 * the last hhc run) a replay after the loss of this cache would write
 * over it.  Refused, unless log= names that log (checked here):
 * hhc_start then writes every dirty block back (the log protected
 * them against the loss of the cache until then), voids the log
 * (log_retire) and records in the state page that no log is paired.
 */
int
logpair_check_retire (struct hhc_volume *vol)
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
      hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR,
               "%s: the cache was used in mode hhc and its log may still "
               "hold older copies of its blocks, which a replay after the "
               "loss of this cache would write over what mode %s writes "
               "back: give that log as log= (it is then voided), or start "
               "in mode hhc",
               vol->dev->name, hhc_mode_to_string (vol->conf.mode));
      return EINVAL;
    }
  /* An older copy of the cache would write its blocks back over
   * FLUSHed ones the log holds (behind_log).
   */
  if ((r = behind_log (vol, &lc)) != 0)
    return r;
  r = log_retire (&lc, c->uuid, c->linked_log, 0);
  vol->retire_pending = r == 0;
  return r;
}

int
logpair_retire (struct hhc_volume *vol, void *bctx)
{
  struct hhc_cache *c = &vol->cache;
  struct log_conf lc = log_conf_of (vol, c->block_size);
  int r = hhc_drain (vol, bctx);

  if (r)
    hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR,
             "writing back dirty blocks before the log is voided: %s",
             strerror (r));
  /* The retirement's own epoch, in the cache before any void carries
   * it: a copy of the cache older than the retirement then shows older
   * than its voids (behind_log; else it started on them, its blocks
   * older than FLUSHes the runs after the retirement acknowledged).
   */
  uint64_t e = known_epoch (c) + 1;
  if (r == 0)
    {
      c->log_epoch = e;
      r = cache_write_state (c, vol->run_state);
    }
  if (r == 0)
    r = log_retire (&lc, c->uuid, c->linked_log, e);
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
void
logpair_link (struct hhc_volume *vol)
{
  struct hhc_cache *c = &vol->cache;
  uint8_t was[16], lcache[16];

  memcpy (was, c->linked_log, 16);
  memset (c->linked_log, 0, 16);
  if (vol->log == NULL)
    c->log_link = CACHE_LOG_UNKNOWN; /* with log_uuid zero: none */
  else
    {
      /* Until the run's record (logpair_record_gen) follows the
       * replay.
       */
      c->log_link
          = vol->replay_pending ? CACHE_LOG_REPLAYING : CACHE_LOG_PAIRED;
      log_uuids (vol->log, c->linked_log, lcache);
    }
  if (memcmp (was, c->linked_log, 16) != 0)
    c->log_gen = record_floor (vol); /* a generation of another log */
}

/* A replay into the backend of a log that the cache knows to be stale
 * (an interrupted recovery of format=force, which carried the old
 * cache's record: the mirror given now is behind it): it would write
 * older data over the backend.  Refused, or with log-lost=accept not
 * replayed.
 */
static int
stale_replay (struct hhc_volume *vol, const char *names, uint64_t g,
              uint64_t rec)
{
  if (vol->conf.accept_log_loss)
    {
      vol->replay_pending = false;
      hhc_msg (vol->conf.msgfn, HHC_MSG_WARNING,
               "log= %s: superblock generation %" PRIu64
               " is older than the %" PRIu64 " recorded: not replayed "
               "(log-lost=accept)",
               names, g, rec);
      return 0;
    }
  hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR,
           "log= %s: superblock generation %" PRIu64
           " is older than the %" PRIu64 " recorded (a mirror left out or "
           "failed): replaying it into the backend would write older data "
           "over it; give the last run's mirrors, or log-lost=accept to "
           "start without the replay",
           names, g, rec);
  return EINVAL;
}

int
logpair_stale (struct hhc_volume *vol, int state)
{
  struct hhc_cache *c = &vol->cache;
  uint8_t luuid[16], lcache[16];
  uint64_t g;
  char names[512];

  if (vol->log == NULL || c->log_gen == 0)
    return 0;
  log_uuids (vol->log, luuid, lcache);
  g = log_open_generation (vol->log);
  if (memcmp (luuid, c->linked_log, 16) != 0 || g == 0 || g >= c->log_gen)
    return 0;
  logpair_names (vol, names, sizeof names);
  if (vol->replay_pending)
    return stale_replay (vol, names, g, c->log_gen);
  if (state == CACHE_IN_USE_HHC && vol->conf.accept_log_loss)
    {
      log_hold_sb (vol->log);
      vol->log_lost = true; /* settle_after_load: no redo */
      hhc_msg (vol->conf.msgfn, HHC_MSG_WARNING,
               "log= %s: superblock generation %" PRIu64
               " is older than the %" PRIu64 " this cache last ran with: "
               "not redone (log-lost=accept)",
               names, g, c->log_gen);
      return 0;
    }
  if (state == CACHE_IN_USE_HHC)
    {
      hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR,
               "log= %s: superblock generation %" PRIu64
               " is older than the %" PRIu64 " this cache last ran with (a "
               "mirror left out of a later run, or one that failed in it): "
               "redoing it after the crash would undo FLUSHed writes; give "
               "the last run's mirrors (leaving out one that failed in it), "
               "or log-lost=accept to start without its redo",
               names, g, c->log_gen);
      return EINVAL;
    }
  log_hold_sb (vol->log);
  hhc_msg (vol->conf.msgfn, HHC_MSG_WARNING,
           "log= %s: superblock generation %" PRIu64
           " is older than the %" PRIu64 " this cache last ran with (a "
           "mirror left out of a later run, or one that failed in it): its "
           "segments are not used; "
           "the cache's dirty blocks are written to it at start",
           names, g, c->log_gen);
  return 0;
}

void
logpair_reserve_epoch (struct hhc_volume *vol)
{
  struct hhc_cache *c = &vol->cache;
  uint64_t e = HHC_MAX (c->log_epoch, c->log_gen >> LOG_EPOCH_SHIFT);

  if (vol->log)
    c->log_epoch = HHC_MAX (e, log_max_epoch (vol->log)) + 1;
}

int
logpair_record_gen (struct hhc_volume *vol)
{
  uint64_t gen, f = log_failures (vol->log); /* the mark covers them */
  int r = log_mark_run (vol->log, vol->cache.log_epoch, &gen);

  if (r)
    return r;
  log_revoid (vol->log, gen);
  if (vol->cache.log_link == CACHE_LOG_REPLAYING)
    vol->cache.log_link = CACHE_LOG_PAIRED; /* replayed before the mark */
  vol->cache.log_gen = gen;
  vol->cache.log_epoch = HHC_MAX (vol->cache.log_epoch, gen >> LOG_EPOCH_SHIFT);
  r = cache_write_state (&vol->cache, vol->run_state);
  if (r == 0)
    __atomic_store_n (&vol->fails_recorded, f, __ATOMIC_RELEASE);
  return r;
}

void
logpair_read_old (struct hhc_volume *vol, struct logpair_old *old)
{
  HHC_CLEANUP_FREE char *identity = malloc (CACHE_IDENTITY_MAX + 1);
  struct hhc_cache *c = &vol->cache;
  enum cache_state state;

  memset (old, 0, sizeof *old);
  if (identity == NULL || vol->conf.mode != HHC_MODE_HHC
      || cache_read_super (c, identity, CACHE_IDENTITY_MAX + 1) != 0
      || cache_read_state (c, &state) != 0)
    return;
  old->known = true;
  memcpy (old->uuid, c->uuid, 16);
  memcpy (old->linked_log, c->linked_log, 16);
  old->log_gen = c->log_gen;
}

/* The log given is replayed into the backend as after the loss of the
 * SSD; the cache it formats over, still readable, may tell that the
 * log is another one than its last run's, or a mirror behind it (left
 * out, or failed): that replay wrote older data over the backend,
 * blocks written back since included (found by review).
 */
int
logpair_check_old (struct hhc_volume *vol, const struct logpair_old *old)
{
  uint8_t luuid[16], lcache[16];
  char names[512];
  uint64_t g;

  if (!old->known || !vol->replay_pending)
    return 0;
  log_uuids (vol->log, luuid, lcache);
  g = log_open_generation (vol->log);
  if (memcmp (lcache, old->uuid, 16) != 0
      || ((uuid_is_zero (old->linked_log)
           || memcmp (old->linked_log, luuid, 16) == 0)
          && (old->log_gen == 0 || g >= old->log_gen)))
    {
      /* Replayed: the new cache's record starts at the log as found
       * (the old cache's may be below a mark it made and did not record,
       * or be another cache's: an interrupted recovery was then taken
       * for a log claimed since; sixth review).
       */
      vol->cache.log_gen = HHC_MAX (vol->cache.log_gen, record_floor (vol));
      return 0;
    }
  logpair_names (vol, names, sizeof names);
  if (vol->conf.accept_log_loss)
    {
      /* The new cache names no log in its superblock (else a start cut
       * before log_start took it for a recovery to replay again) and
       * carries no record of the old one's.
       */
      vol->replay_pending = false;
      memset (vol->cache.log_uuid, 0, 16);
      vol->cache.log_gen = record_floor (vol);
      hhc_msg (vol->conf.msgfn, HHC_MSG_WARNING,
               "format=force: log= %s is not the last run's log of the "
               "cache formatted over: not replayed (log-lost=accept)",
               names);
      return 0;
    }
  hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR,
           "%s: format=force: log= %s is not the last run's log of the "
           "cache it formats over (another log, or superblock generation "
           "%" PRIu64 " below the %" PRIu64 " it recorded: a mirror left "
           "out or failed): replaying it would write older data over the "
           "backend; give the last run's mirrors, or log-lost=accept to "
           "format without replaying it",
           vol->dev->name, names, g, old->log_gen);
  log_close (vol->log);
  vol->log = NULL;
  return EINVAL;
}

/* format=force in a mode other than hhc over a cache used in hhc: its
 * log would still be replayed after the loss of the new cache, over
 * what this mode writes back.  With log= naming it, it is voided first
 * (log_retired; the old cache's dirty blocks go, as format=force
 * says); without, refused.  A superblock that cannot be read pairs
 * nothing.
 */
int
logpair_retire_before_format (struct hhc_volume *vol)
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
      hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR,
               "%s: format=force over a cache used in mode hhc: its log "
               "would still be replayed after the loss of the new cache, "
               "over what mode %s writes back: give that log as log= (it "
               "is then voided)",
               vol->dev->name, hhc_mode_to_string (vol->conf.mode));
      return EINVAL;
    }
  struct log_conf lc = log_conf_of (vol, c->block_size);
  /* The old cache's blocks are dropped, not written back: no check.
   * The voids carry an epoch above any the old cache knows of or its
   * log shows (an image of it put back is older than them: behind_log;
   * review: the old cache may itself be older than its log), reserved in
   * its state page first, as logpair_retire does (review: a cut before
   * the format left the old cache intact and refused as older than its
   * own voids).
   */
  struct log_survey s;
  if ((r = log_survey (&lc, c->uuid, c->linked_log, &s)) != 0)
    return r;
  c->log_epoch = HHC_MAX (known_epoch (c), s.epoch) + 1;
  r = cache_write_state (c, state);
  if (r == 0)
    r = log_retire (&lc, c->uuid, c->linked_log, c->log_epoch);
  vol->log_retired = r == 0;
  return r;
}
