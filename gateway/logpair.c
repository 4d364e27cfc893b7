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
 * Runs in hhc_open or hhc_start, from one thread, before any client
 * request; takes no lock itself (logpair_retire writes every dirty
 * block back through hhc_drain first, with that path's locks).
 */
#include <config.h>

#include <stdio.h>

#include "common.h"
#include "logpair.h"
#include "vol.h"

static bool
uuid_is_zero (const uint8_t u[16])
{
  static const uint8_t z[16];
  return memcmp (u, z, 16) == 0;
}

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

/* "a.log, b.log": the mirrors given (log=), for a message. */
static void
log_names (struct hhc_volume *vol, char *buf, size_t len)
{
  size_t n = 0;

  buf[0] = '\0';
  for (unsigned i = 0; i < vol->conf.nlogs && n < len; i++)
    n += snprintf (buf + n, len - n, "%s%s", i ? ", " : "",
                   vol->conf.log_paths[i] ? vol->conf.log_paths[i] : "?");
}

/* Has a run of another cache marked the log since this cache recorded
 * its generation (none recorded: a new cache, or a state page of an
 * earlier build, no answer)?  Then the log names that cache for good,
 * not this one in a start that was cut: a cache that ran with the log
 * before another took it over was taken back, older blocks served over
 * FLUSHed ones (fourth review).  The record, not the epoch reserved:
 * starts cut before their mark reserve epochs too, and two of them let
 * the other cache's mark fall below (fifth review).  This cache never
 * marked the log while it names another one (log_start writes its
 * UUID first).
 */
static bool
claimed_since (struct hhc_volume *vol)
{
  const struct hhc_cache *c = &vol->cache;

  return !uuid_is_zero (c->linked_log)
         && log_newest_epoch (vol->log) > c->log_gen >> LOG_EPOCH_SHIFT;
}

/* The record a cache starts from when it pairs with a log: the log's
 * newest epoch as found (no run of it counts below), so that "none
 * recorded" is never left while a log is linked (sixth review: a start
 * cut before its mark, then another cache's run of the log, and the
 * log was taken back).
 */
static uint64_t
record_floor (struct hhc_volume *vol)
{
  return vol->log ? log_newest_epoch (vol->log) << LOG_EPOCH_SHIFT : 0;
}

/* The newest epoch of its log this cache knows of: its reservation
 * (each start writes it into the state page before any mirror takes
 * it: settle_after_load) or its record (the log's newest as found when
 * it paired).  0: none (a cache of an earlier build, or formatted and
 * cut before its first record).
 */
static uint64_t
known_epoch (const struct hhc_cache *c)
{
  return HHC_MAX (c->log_epoch, c->log_gen >> LOG_EPOCH_SHIFT);
}

/* A run later than any this cache knows of (log_survey: a superblock,
 * valid or void, that names this cache or is of one of its logs, with
 * a newer epoch): the cache device is an older copy of the one that ran
 * with them (put back, restored from a snapshot, or a device that lost
 * writes it had acknowledged).  Its blocks are older than FLUSHes the
 * log acknowledged, and a start would serve them (found by the
 * mirror-sets campaign, test-log-sets; also when the later run's log
 * was since taken over and retired by another cache).  Refused before
 * anything is written; format=force rebuilds the cache from the log
 * (a replay, as after the loss of the SSD).  No record (0): no answer.
 */
static int
behind_log (struct hhc_volume *vol, const struct log_conf *lc)
{
  uint64_t k = known_epoch (&vol->cache), e;
  char names[512];
  int r;

  if (k == 0)
    return 0;
  if ((r = log_survey (lc, vol->cache.uuid, vol->cache.linked_log, &e)) != 0
      || e <= k)
    return r;
  log_names (vol, names, sizeof names);
  hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR,
           "%s: log= %s holds a run (epoch %" PRIu64 ") later than any this "
           "cache knows of (%" PRIu64 "): the cache device is an older copy "
           "of the one that ran with it, and would serve blocks older than "
           "FLUSHes the log acknowledged; start with format=force to "
           "rebuild the cache from the log",
           vol->dev->name, names, e, k);
  return EINVAL;
}

/* A loaded cache whose last run (ssd-sync=checkpoint) stopped
 * uncleanly owes a redo of its log (the state alone says so, whatever
 * the link: state pages of earlier builds), and a new one whose replay
 * did not finish owes that replay (replay_unfinished): a blank log then
 * is refused before it is formatted (lc->no_format), unless
 * log-lost=accept.
 */
static int
note_redo_owed (struct hhc_volume *vol, struct log_conf *lc)
{
  enum cache_state state;
  int r = cache_read_state (&vol->cache, &state);

  vol->redo_owed = r == 0 && state == CACHE_IN_USE_HHC;
  lc->no_format = (vol->redo_owed || vol->cache.log_link == CACHE_LOG_REPLAYING)
                  && !vol->conf.accept_log_loss;
  return r;
}

/* A log that cannot give the redo owed (blank, voided, another log of
 * this cache, or stale: logpair_stale): refused (EINVAL, said why with
 * what), unless log-lost=accept: then the start goes on without the
 * redo (log_lost, settle_after_load).  0 when no redo is owed.
 */
static int
no_redo (struct hhc_volume *vol, const char *what)
{
  char names[512];

  if (!vol->redo_owed)
    return 0;
  if (vol->conf.accept_log_loss)
    {
      vol->log_lost = true;
      return 0;
    }
  log_names (vol, names, sizeof names);
  hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR,
           "%s: the last run, with ssd-sync=checkpoint, did not stop "
           "cleanly and its log is to be redone into the cache, but log= "
           "%s %s: give the last run's log mirrors, or log-lost=accept to "
           "start without them (what FLUSHes covered since the cache's last "
           "commit is then lost)",
           vol->dev->name, names, what);
  return EINVAL;
}

/* A log paired with this cache, but not the one its state page says
 * it last ran with (an older one, given again after the cache ran with
 * a new log): it cannot give the redo owed (found by review: it was
 * redone, over FLUSHes only the newer log held).  Otherwise used (the
 * cache holds everything; the start re-logs its dirty blocks).
 */
static int
other_log_of_cache (struct hhc_volume *vol, const uint8_t luuid[16])
{
  struct hhc_cache *c = &vol->cache;
  char a[37], b[37], names[512];
  int r;

  if (uuid_is_zero (c->linked_log) || memcmp (c->linked_log, luuid, 16) == 0)
    return 0;
  if ((r = no_redo (vol, "is not the log it last ran with")) != 0)
    {
      log_close (vol->log);
      vol->log = NULL;
      return r;
    }
  log_hold_sb (vol->log);
  hhc_uuid_str (luuid, a);
  hhc_uuid_str (c->linked_log, b);
  log_names (vol, names, sizeof names);
  hhc_msg (vol->conf.msgfn, HHC_MSG_WARNING,
           "log= %s: log %s is not the log %s this cache last ran with: its "
           "segments are not used; the cache's dirty blocks are written to "
           "it at start",
           names, a, b);
  return 0;
}

/* A replay of a chain older than a void of its log given beside it
 * (log_void_epoch): the void's run retired the log or voided a mirror
 * that failed in it, and what that run held went to the backend or to
 * mirrors not given; the older chain would write older blocks over it
 * (found by the mirror-sets campaign: a retirement cut after voiding
 * the newest mirror, then the loss of the SSD).  Refused, or with
 * log-lost=accept not replayed.
 */
static int
voided_since (struct hhc_volume *vol)
{
  uint64_t v = log_void_epoch (vol->log), e = log_newest_epoch (vol->log);
  char names[512];

  if (!vol->replay_pending || v <= e)
    return 0;
  log_names (vol, names, sizeof names);
  if (vol->conf.accept_log_loss)
    {
      vol->replay_pending = false;
      memset (vol->cache.log_uuid, 0, 16); /* no recovery to redo */
      hhc_msg (vol->conf.msgfn, HHC_MSG_WARNING,
               "log= %s: its chain (epoch %" PRIu64 ") is older than a "
               "void of the same log (epoch %" PRIu64 "): not replayed "
               "(log-lost=accept)",
               names, e, v);
      return 0;
    }
  hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR,
           "log= %s: its chain (epoch %" PRIu64 ") is older than a void of "
           "the same log (epoch %" PRIu64 "): a later run retired the log "
           "or voided a mirror that failed in it; replaying the older chain "
           "would write older data over the backend: give that run's "
           "mirrors, or log-lost=accept to start without the replay",
           names, e, v);
  log_close (vol->log);
  vol->log = NULL;
  return EINVAL;
}

/* Is the log luuid, which names another cache, one whose replay into
 * this new cache was interrupted (to be replayed again)?  The state
 * says so (CACHE_LOG_REPLAYING), or for a state page of an earlier
 * build, the cache was formatted for it, links no other log and
 * recorded no run since (its record no newer than the log's newest
 * epoch, which format set it to: record_floor; not log_epoch 0, which
 * an earlier build's second start reserved before it was cut again:
 * review).  Not if a run of another cache marked the log since
 * (claimed_since).  Before, any log the cache was formatted for passed,
 * long after that recovery: a mirror of it left out of it was "replayed
 * again" in place of the redo the cache owed its later log (found by
 * the mirror-sets campaign).
 */
static bool
recovery_interrupted (struct hhc_volume *vol, const uint8_t luuid[16])
{
  const struct hhc_cache *c = &vol->cache;

  if (memcmp (c->log_uuid, luuid, 16) != 0 || claimed_since (vol))
    return false;
  if (c->log_link == CACHE_LOG_REPLAYING)
    return memcmp (c->linked_log, luuid, 16) == 0;
  return c->log_link != CACHE_LOG_RETIRED
         && c->log_gen >> LOG_EPOCH_SHIFT <= log_newest_epoch (vol->log)
         && (uuid_is_zero (c->linked_log)
             || memcmp (c->linked_log, luuid, 16) == 0);
}

/* Did this cache retire the log luuid (every dirty block written
 * back, its mirrors voided), no run marking it since, and no redo
 * owed (none is after a retirement: the next run in hhc links a log
 * again)?
 */
static bool
retired_here (struct hhc_volume *vol, const uint8_t luuid[16])
{
  const struct hhc_cache *c = &vol->cache;

  return c->log_link == CACHE_LOG_RETIRED && !vol->redo_owed
         && (memcmp (c->log_uuid, luuid, 16) == 0
             || memcmp (c->linked_log, luuid, 16) == 0)
         && !claimed_since (vol);
}

/* Is the replay of the log this new cache was formatted for not
 * finished, and no log-lost=accept?  What that log holds is in no
 * cache and maybe not in the backend: any other log is refused (found
 * by the mirror-sets campaign: a recovery cut, then a start with a
 * blank log served older blocks).  Logged.
 */
static bool
replay_unfinished (struct hhc_volume *vol)
{
  const struct hhc_cache *c = &vol->cache;
  char b[37];

  if (c->log_link != CACHE_LOG_REPLAYING || vol->conf.accept_log_loss)
    return false;
  hhc_uuid_str (c->linked_log, b);
  hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR,
           "%s: the replay of log %s into this new cache did not finish (a "
           "start stopped): give that log's mirrors to finish it, or "
           "log-lost=accept to start without it (what only it held is then "
           "lost)",
           vol->dev->name, b);
  return true;
}

/* The log this cache was paired with, if any, is not the one given
 * (blank, or empty_log's): the start goes on with the new one (a redo
 * owed was refused or accepted before), unless that log's replay into
 * this new cache did not finish (EINVAL, logged; log-lost=accept goes
 * on).
 */
static int
log_gone (struct hhc_volume *vol, const char *luuid_str)
{
  struct hhc_cache *c = &vol->cache;
  char b[37];

  if (replay_unfinished (vol))
    return EINVAL;
  if (!vol->redo_owed && uuid_is_zero (c->log_uuid)
      && uuid_is_zero (c->linked_log))
    return 0;
  vol->log_lost = true;
  hhc_uuid_str (uuid_is_zero (c->linked_log) ? c->log_uuid : c->linked_log, b);
  hhc_msg (vol->conf.msgfn, HHC_MSG_WARNING,
           "the log this cache was paired with (%s) is gone: starting with "
           "a new log %s; every dirty block is written to it before the "
           "first client request",
           b, luuid_str);
  return 0;
}

/* A valid log that names no cache and holds no segment (the caller
 * checks both): formatted by the start of a new cache that was cut
 * before log_start named it (log_start names the cache before it writes
 * any segment), and no run marked it.  Used as a blank log (found by
 * the mirror-sets campaign: refused as "another cache's" for good, a
 * device that had to be blanked by hand).  One with segments is refused
 * as another cache's (review: nothing else should write one).
 */
static int
empty_log (struct hhc_volume *vol, const char *luuid_str)
{
  int r = no_redo (vol, "holds nothing (formatted by a start that was cut)");

  if (r == 0)
    r = log_gone (vol, luuid_str);
  if (r)
    {
      log_close (vol->log);
      vol->log = NULL;
    }
  return r;
}

/* A valid log next to a loaded cache (mode hhc): this cache's, a
 * mirror of a log it retired, one whose replay into it was interrupted,
 * the stale log a cut format=force paired it with, an empty one, or
 * another cache's (refused).  a: the log's UUID, for messages.
 */
static int
pair_valid (struct hhc_volume *vol, const uint8_t luuid[16],
            const uint8_t lcache[16], const char *a)
{
  struct hhc_cache *c = &vol->cache;
  char b[37];

  if (memcmp (lcache, c->uuid, 16) == 0)
    return other_log_of_cache (vol, luuid);
  if (retired_here (vol, luuid))
    {
      /* Its mirrors that the retirement voided are blank now; this
       * one, left out of it, holds an older chain (found by the
       * mirror-sets campaign: taken for a recovery to replay again).
       */
      hhc_msg (vol->conf.msgfn, HHC_MSG_INFO,
               "log %s was retired by this cache, this mirror of it left "
               "out: its segments are not used",
               a);
      log_hold_sb (vol->log);
      return 0;
    }
  if (recovery_interrupted (vol, luuid))
    {
      hhc_msg (vol->conf.msgfn, HHC_MSG_INFO,
               "log %s: a recovery into this cache was interrupted: "
               "replaying the log again",
               a);
      vol->replay_pending = true;
      return voided_since (vol);
    }
  if (c->log_link == CACHE_LOG_PAIRED && memcmp (c->linked_log, luuid, 16) == 0
      && !claimed_since (vol))
    {
      /* format=force with log-lost=accept paired this new cache with
       * a stale log it did not replay, and was cut before log_start
       * wrote this cache's UUID into it (the cache's superblock names
       * no log, so that this is not taken for a recovery to replay
       * again: third review).
       */
      return 0;
    }
  if (uuid_is_zero (lcache) && log_chain_empty (vol->log))
    return empty_log (vol, a);
  hhc_uuid_str (lcache, b);
  hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR,
           "log %s belongs to another cache (paired with cache %s): give "
           "the log written with this cache, or a blank log device",
           vol->conf.log_paths[0] ? vol->conf.log_paths[0] : a, b);
  log_close (vol->log);
  vol->log = NULL;
  return EINVAL;
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
  r = log_retire (&lc, c->uuid, c->linked_log, known_epoch (c), false);
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
  if (r == 0)
    r = log_retire (&lc, c->uuid, c->linked_log, known_epoch (c), true);
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
  log_names (vol, names, sizeof names);
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
  log_names (vol, names, sizeof names);
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
  /* The old cache's blocks are dropped, not written back: no check. */
  r = log_retire (&lc, c->uuid, c->linked_log, 0, true);
  vol->log_retired = r == 0;
  return r;
}
