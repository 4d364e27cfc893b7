/* A log's superblocks read without opening it for use: log_retire,
 * which checks a log and voids it (a cache used without it from now
 * on), and log_survey, which finds the newest run of a cache the
 * mirrors given show (an older copy of the cache is refused:
 * logpair.c).
 *
 * No lock: the log these build is never shared.
 */
#include <config.h>

#include <stdio.h>

#include "common.h"
#include "log_int.h"

/* ---- retiring a log ---- */

/* Is the superblock sb (valid or void) of the log log_uuid, or, when
 * that is zero (a cache of an earlier build does not record it), of a
 * log paired with cache cache_uuid?
 */
static bool
sb_of_cache (const struct log_sb *sb, const uint8_t cache_uuid[16],
             const uint8_t log_uuid[16])
{
  static const uint8_t zero[16];

  if (memcmp (log_uuid, zero, 16) != 0)
    return memcmp (sb->log_uuid, log_uuid, 16) == 0;
  return memcmp (sb->cache_uuid, cache_uuid, 16) == 0;
}

/* Of the mirrors given (of_log: valid or void, of this log), those
 * of the newest epoch top are the members of its last run, and their
 * superblocks' count says how many it had: fewer given is refused
 * (EINVAL, logged).  Sets each mirror's retire_gen, retire_mirrors and
 * sb_gen for the voids.
 */
static int
count_members (struct hhc_log *log, const bool *of_log, const uint64_t *epoch,
               const uint64_t *gens, const unsigned *count, uint64_t top)
{
  unsigned recorded = 0, newest = 0;
  uint64_t member_gen = 0;

  /* Only mirrors of the newest run count, and its count: a mirror
   * voided in an earlier run does not stand for one of a later run left
   * out (fifth review: retired, and the one left out was replayed after
   * a loss of the SSD).  A void from before its run's mark is voided
   * again after it (log_revoid); a cut between the two refuses, which
   * one start in mode hhc with every mirror settles.  A void of a later
   * epoch than every valid mirror given marks a run whose mirrors were
   * not all given (seventh review): the newest epoch of all decides.
   */
  for (unsigned i = 0; i < log->nm; i++)
    {
      bool member = of_log[i] && epoch[i] == top;
      log->m[i].retire_gen = member ? 0 : gens[i];
      if (member)
        {
          newest++;
          recorded = HHC_MAX (recorded, count[i]);
          member_gen = HHC_MAX (member_gen, gens[i]);
        }
    }
  log->retire_mirrors = newest; /* its voids record them */
  log->sb_gen = HHC_MAX (log->sb_gen, member_gen);
  if (recorded > newest)
    {
      /* A mirror left out would still be replayed. */
      hhc_msg (log->msgfn, HHC_MSG_ERROR,
               "log %s had %u mirrors when last written, %u of them given "
               "(a blank device is not one): give every mirror of it as "
               "log= (or, if one is lost for good, start once in mode hhc "
               "with the mirrors left: the log then records them)",
               log->m[0].dev->name, recorded, newest);
      return EINVAL;
    }
  return 0;
}

/* m holds the void sb (gen: the newest generation it may hold): to
 * be written again with the retirement's epoch (log_retire).
 */
static void
note_void (struct mirror *m, const struct log_sb *sb, uint64_t gen)
{
  m->revoid = true;
  memcpy (m->void_log, sb->log_uuid, 16);
  memcpy (m->void_cache, sb->cache_uuid, 16);
  m->void_gen = gen; /* the newest it may hold, as the first void's */
  m->void_mirrors = sb->mirrors;
  m->void_retired = sb->retire_epoch;
}

/* Check every mirror of a log to retire: each is blank, or valid or
 * void and of this cache; at least one is not blank.  Fill the UUIDs
 * from a valid one.  ESTALE: none is valid (every one void already).
 */
static int
check_retire (struct hhc_log *log, const uint8_t cache_uuid[16],
              const uint8_t log_uuid[16])
{
  unsigned nvalid = 0, nvoid = 0;
  uint64_t epoch[LOG_MAX_MIRRORS] = { 0 }, gens[LOG_MAX_MIRRORS] = { 0 };
  uint64_t top = 0;
  unsigned count[LOG_MAX_MIRRORS] = { 0 };
  bool of_log[LOG_MAX_MIRRORS] = { false };
  static const uint8_t zero[16];
  struct mirror *other = NULL;
  bool named_us = false;
  struct log_sb sb;
  uint64_t gen;
  int r;

  log->sb_gen = 0;
  for (unsigned i = 0; i < log->nm; i++)
    {
      struct mirror *m = &log->m[i];
      r = read_sb (log, m, &sb, &gen);
      log->sb_gen = HHC_MAX (log->sb_gen, gen);
      if (r == ENOENT)
        continue;
      if (r != 0 && r != ESTALE)
        return r;
      /* A void copy records the count too (0 from earlier builds:
       * unknown), and the run it was voided in (its generation's
       * epoch): given only void mirrors, one left out may be valid.
       */
      of_log[i] = true;
      gens[i] = HHC_MAX (sb.generation, gen);
      epoch[i] = sb.generation >> LOG_EPOCH_SHIFT;
      count[i] = sb.mirrors;
      top = HHC_MAX (top, epoch[i]);
      if (!sb_of_cache (&sb, cache_uuid, log_uuid))
        {
          hhc_msg (log->msgfn, HHC_MSG_ERROR,
                   "log %s belongs to another cache: give the log this "
                   "cache was used with in mode hhc",
                   m->dev->name);
          return EINVAL;
        }
      named_us |= memcmp (sb.cache_uuid, cache_uuid, 16) == 0;
      if (r == 0 && memcmp (sb.cache_uuid, cache_uuid, 16) != 0
          && memcmp (sb.cache_uuid, zero, 16) != 0)
        other = m;
      m->want_void = r == 0;
      m->sb_gen = gens[i]; /* the order of the voids: next_to_void */
      nvoid += r == ESTALE;
      if (r == ESTALE)
        note_void (m, &sb, gens[i]);
      if (r == 0)
        {
          memcpy (log->uuid, sb.log_uuid, 16);
          memcpy (log->cache_uuid, sb.cache_uuid, 16);
          nvalid++;
        }
    }
  if (other && !named_us)
    {
      /* This cache's log= by its UUID, but log_start never named the
       * cache in it: the replay into this new cache did not finish
       * (found by the mirror-sets campaign: retired, and what only the
       * log held was lost).
       */
      hhc_msg (log->msgfn, HHC_MSG_ERROR,
               "log %s was being replayed into this cache when a start "
               "stopped: start in mode hhc with it first to finish the "
               "recovery",
               other->dev->name);
      return EINVAL;
    }
  /* The voids name this cache (a valid mirror left out of its run may
   * still name the one it took the log over from: review).
   */
  if (named_us)
    memcpy (log->cache_uuid, cache_uuid, 16);
  if ((r = count_members (log, of_log, epoch, gens, count, top)) != 0)
    return r;
  if (nvalid + nvoid == 0)
    {
      hhc_msg (log->msgfn, HHC_MSG_ERROR,
               "log %s is blank, not the log this cache was used with in "
               "mode hhc: give that log's log=",
               log->m[0].dev->name);
      return EINVAL;
    }
  return nvalid ? 0 : ESTALE;
}

/* The valid mirror to void next: the one with the oldest superblock. */
static struct mirror *
next_to_void (struct hhc_log *log)
{
  struct mirror *best = NULL;

  for (unsigned i = 0; i < log->nm; i++)
    if (log->m[i].want_void
        && (best == NULL || log->m[i].sb_gen < best->sb_gen))
      best = &log->m[i];
  return best;
}

int
log_retire (const struct log_conf *conf, const uint8_t cache_uuid[16],
            const uint8_t log_uuid[16], uint64_t retire_epoch)
{
  bool void_it = retire_epoch != 0;
  struct hhc_log *log;
  uint64_t min_size;
  int r = new_log (conf, &log, &min_size);

  if (r == 0 && (r = check_retire (log, cache_uuid, log_uuid)) == ESTALE)
    r = 0; /* every mirror void already */
  /* Oldest superblock first: a retirement that stops part way leaves
   * valid only the newest mirrors, never an older chain beside a voided
   * newer one (found by the mirror-sets campaign: the newer one voided,
   * the older ones replayed over what the retirement had written back).
   */
  for (struct mirror *m; r == 0 && void_it && (m = next_to_void (log));)
    {
      m->want_void = false;
      r = void_dev (m->dev, log->uuid, log->cache_uuid,
                    m->retire_gen ? m->retire_gen : log->sb_gen,
                    m->retire_gen ? 0 : log->retire_mirrors, retire_epoch);
      if (r)
        hhc_msg (conf->msgfn, HHC_MSG_ERROR, "log %s: voiding it: %s",
                 m->dev->name, strerror (r));
    }
  /* Those void already (failed in a run, or voided by a retirement cut
   * part way) carry this retirement's epoch too, the rest of each void
   * as it was: else, with none left valid to void, nothing would show
   * a copy of the cache older than this retirement older (found by
   * the mirror-sets campaign, seed 7747).
   */
  for (unsigned i = 0; r == 0 && void_it && i < log->nm; i++)
    {
      struct mirror *m = &log->m[i];
      int e = 0;
      if (m->revoid && m->void_retired < retire_epoch
          && memcmp (m->void_cache, cache_uuid, 16) == 0)
        e = void_dev (m->dev, m->void_log, m->void_cache, m->void_gen,
                      m->void_mirrors, retire_epoch);
      /* Only evidence is lost (review: a mirror that failed, readable
       * but not writable, refused every later retirement).
       */
      if (e)
        hhc_msg (conf->msgfn, HHC_MSG_WARNING,
                 "log %s: writing the retirement into its void: %s (an "
                 "older copy of the cache may not be told from it)",
                 m->dev->name, strerror (e));
    }
  if (r == 0 && void_it)
    hhc_msg (conf->msgfn, HHC_MSG_INFO,
             "log: voided (retired): the cache is used without it from now "
             "on");
  free_log (log);
  return r;
}

/* ---- the newest run of a cache ---- */

int
log_survey (const struct log_conf *conf, const uint8_t cache_uuid[16],
            const uint8_t log_uuid[16], struct log_survey *out)
{
  struct hhc_log *log;
  struct log_sb_read rd;
  uint64_t min_size;
  uint8_t logs[LOG_MAX_MIRRORS + 1][16];
  struct log_sb sb[LOG_MAX_MIRRORS];
  bool read[LOG_MAX_MIRRORS] = { false }, valid[LOG_MAX_MIRRORS] = { false };
  unsigned nlogs = 0;
  int r = new_log (conf, &log, &min_size);

  *out = (struct log_survey){ .other = -1 };
  /* The logs of this cache: its last one, and each whose valid
   * superblock names it.
   */
  memcpy (logs[nlogs++], log_uuid, 16);
  for (unsigned i = 0; r == 0 && i < log->nm; i++)
    {
      int e = log_dev_sb (log->m[i].dev, &sb[i], &rd);
      read[i] = e == 0 || e == ESTALE;
      valid[i] = e == 0;
      if (e == 0 && memcmp (sb[i].cache_uuid, cache_uuid, 16) == 0)
        memcpy (logs[nlogs++], sb[i].log_uuid, 16);
    }
  /* Every superblock, valid or void, that names this cache or is of
   * one of its logs (another cache's void of it too).
   */
  for (unsigned i = 0; r == 0 && i < log->nm; i++)
    {
      bool mine = memcmp (sb[i].cache_uuid, cache_uuid, 16) == 0;
      bool ours = read[i] && mine;
      for (unsigned k = 0; read[i] && !ours && k < nlogs; k++)
        ours = memcmp (sb[i].log_uuid, logs[k], 16) == 0;
      if (!ours)
        continue;
      /* A retirement's epoch counts only in a void of this cache's: it
       * is this cache's count, meaningless to another (review: one
       * that took the log over was refused by it).
       */
      uint64_t g = sb[i].generation >> LOG_EPOCH_SHIFT;
      out->epoch
          = HHC_MAX (out->epoch, HHC_MAX (g, mine ? sb[i].retire_epoch : 0));
      if (!mine && valid[i] && (out->other < 0 || g > out->other_epoch))
        {
          out->other = (int)i;
          out->other_epoch = g;
        }
    }
  free_log (log);
  return r;
}
