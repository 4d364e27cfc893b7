/* What the log given at open says about a loaded cache (logpair.c
 * decides with these): whether the cache is older than its log
 * (behind_log), whether a redo or a replay is owed and the log given
 * can give it (note_redo_owed, no_redo, replay_unfinished, log_gone),
 * what a valid log next to it is (pair_valid: this cache's, another of
 * its logs, a mirror of one it retired, an interrupted recovery, an
 * empty log, or another cache's), and whether a replay's chain is older
 * than a void of its log (voided_since).  docs/design.md §5.10.
 *
 * Runs in hhc_open, from one thread, before any client request.
 */
#include <config.h>

#include <stdio.h>

#include "common.h"
#include "logpair_int.h"
#include "vol.h"

/* "a.log, b.log": the mirrors of paths, for a message. */
static void
names_of (const char *const *paths, unsigned n, char *buf, size_t len)
{
  size_t k = 0;

  buf[0] = '\0';
  for (unsigned i = 0; i < n && k < len; i++)
    k += snprintf (buf + k, len - k, "%s%s", i ? ", " : "",
                   paths[i] ? paths[i] : "?");
}

void
logpair_names (struct hhc_volume *vol, char *buf, size_t len)
{
  names_of ((const char *const *)vol->conf.log_paths, vol->conf.nlogs, buf,
            len);
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
uint64_t
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
uint64_t
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
 *
 * A valid superblock of another cache's run of one of its logs with
 * an epoch above this cache's record (its last recorded run: a
 * reservation alone, of a start that was cut or of a retirement, does
 * not count, as another cache that took the log over may number its
 * run the same: review) is refused too, whatever this cache reserved:
 * either that run is later than this cache's (it is an older copy), or
 * it is a mirror left out when this cache replayed the log and took it
 * over, numbered higher (epochs are not monotonic across caches:
 * test-log-sets seed 27308).  Epochs cannot tell which, and the advice
 * differs (format=force would replay that mirror's chain): the message
 * names the mirror and gives both.
 */
int
logpair_behind (const struct log_conf *lc, const char *name,
                const uint8_t cache_uuid[16], const uint8_t linked_log[16],
                uint64_t known, uint64_t record)
{
  struct log_survey s;
  char names[512];
  int r;

  if (known == 0)
    return 0;
  if ((r = log_survey (lc, cache_uuid, linked_log, &s)) != 0)
    return r;
  if (s.other >= 0 && record != 0 && s.other_epoch > record)
    {
      hhc_msg (lc->msgfn, HHC_MSG_ERROR,
               "%s: log mirror %s holds another cache's run of the log "
               "(epoch %" PRIu64 ") later than this cache's last run of it "
               "(%" PRIu64 "): if that mirror was left out when this cache "
               "replayed the log and took it over, leave it out (or give a "
               "blank device in its place); if this cache device is older "
               "than that run (put back, restored), start in mode hhc with "
               "format=force to rebuild it from the log",
               name, lc->paths[s.other] ? lc->paths[s.other] : "?",
               s.other_epoch, record);
      return EINVAL;
    }
  if (s.epoch <= known)
    return 0;
  names_of (lc->paths, lc->npaths, names, sizeof names);
  hhc_msg (lc->msgfn, HHC_MSG_ERROR,
           "%s: log= %s holds a run (epoch %" PRIu64 ") later than any this "
           "cache knows of (%" PRIu64 "): the cache device is an older copy "
           "of the one that ran with it, and would serve blocks older than "
           "FLUSHes the log acknowledged; start in mode hhc with format=force "
           "to rebuild the cache from the log",
           name, names, s.epoch, known);
  return EINVAL;
}

int
behind_log (struct hhc_volume *vol, const struct log_conf *lc)
{
  return logpair_behind (lc, vol->dev->name, vol->cache.uuid,
                         vol->cache.linked_log, known_epoch (&vol->cache),
                         vol->cache.log_gen >> LOG_EPOCH_SHIFT);
}

/* A loaded cache whose last run (ssd-sync=checkpoint) stopped
 * uncleanly owes a redo of its log (the state alone says so, whatever
 * the link: state pages of earlier builds), and a new one whose replay
 * did not finish owes that replay (replay_unfinished): a blank log then
 * is refused before it is formatted (lc->no_format), unless
 * log-lost=accept.
 */
int
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
int
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
  logpair_names (vol, names, sizeof names);
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
  logpair_names (vol, names, sizeof names);
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
int
voided_since (struct hhc_volume *vol)
{
  uint64_t v = log_void_epoch (vol->log), e = log_newest_epoch (vol->log);
  char names[512];

  if (!vol->replay_pending || v <= e)
    return 0;
  logpair_names (vol, names, sizeof names);
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
bool
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
int
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
int
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
