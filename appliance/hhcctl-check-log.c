/* hhcctl check: the log's part of the report (each mirror's chain and
 * what lies beyond it, whether the mirrors agree, the pairing with the
 * cache), and opening the log for check and format.  What the log
 * holds is read through offline.h (gateway/offline-log.c).
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "hhcctl.h"

int
logset_open (struct offline_logset *ls)
{
  unsigned bad;
  int r = offline_logset_open (ls, msg_cb, &bad);

  if (r && bad < ls->n)
    problem ("log %s: %s", ls->paths[bad], strerror (r));
  return r;
}

int
replay_count (struct hhc_log *log, uint64_t *n)
{
  int r;

  quiet_core = true; /* "N blocks replayed": none were */
  r = offline_log_count (log, n);
  quiet_core = false;
  return r;
}

/* ---- one mirror ---- */

/* Its chain: which segments, the newest barrier. */
static void
report_chain (const char *path, const struct offline_chain *c)
{
  if (c->n == 0)
    note ("log %s: no segments from the head (segment %" PRIu64 ") on", path,
          c->end_seq);
  else if (c->last_barrier < 0)
    note ("log %s: segments %" PRIu64 " to %" PRIu64 ", no barrier", path,
          c->segs[0].hdr.seq, c->segs[c->n - 1].hdr.seq);
  else
    note ("log %s: segments %" PRIu64 " to %" PRIu64
          ", newest barrier %" PRIu64,
          path, c->segs[0].hdr.seq, c->segs[c->n - 1].hdr.seq,
          c->segs[c->last_barrier].hdr.seq);
  if (c->n && (size_t)(c->last_barrier + 1) < c->n)
    note ("log %s: %zu segments after the newest barrier (no flush covered "
          "them: not replayed)",
          path, c->n - (size_t)(c->last_barrier + 1));
}

/* The segment the chain stops at, into d; true if it is there but
 * damaged.
 */
static bool
inspect_end (struct hhc_log *log, unsigned i, const char *path,
             const struct offline_chain *c, struct offline_seg *d)
{
  int r = offline_log_segment (log, i, c->end_off, d);

  if (r && r != ENOENT && r != EILSEQ)
    problem ("log %s: reading the region at %" PRIu64 ": %s", path, c->end_off,
             strerror (r));
  if (r == 0 && d->hdr.seq == c->end_seq)
    note ("log %s: segment %" PRIu64 " at %" PRIu64 " is of an earlier run "
          "(its link does not fit): ignored",
          path, d->hdr.seq, c->end_off);
  return r == EILSEQ && d->hdr.seq == c->end_seq;
}

/* Where the chain ends, and the orphans after it: what a replay
 * loses.
 */
static void
report_end (const char *path, const struct offline_chain *c,
            const struct offline_seg *d, bool broken,
            const struct offline_orphans *o, bool closed_cleanly)
{
  const char *what = broken ? "is damaged (checksum or header)" : "is missing";
  char later[96];

  if (o->n == 1)
    snprintf (later, sizeof later, "a later segment (%" PRIu64 ") is",
              o->first);
  else
    snprintf (later, sizeof later,
              "%" PRIu64 " later segments (%" PRIu64 " to %" PRIu64 ") are",
              o->n, o->first, o->last);
  if (o->barriers)
    problem ("log %s: segment %" PRIu64 " at offset %" PRIu64
             " %s, but %s intact, among them barrier %" PRIu64
             ": replay stops before segment %" PRIu64
             ", so data that flushes acknowledged after it is lost",
             path, c->end_seq, c->end_off, what, later, o->last_barrier,
             c->end_seq);
  else if (o->n)
    warning ("log %s: segment %" PRIu64 " at offset %" PRIu64
             " %s; %s intact, but none is a barrier (a crash while writing?): "
             "no flush acknowledged them",
             path, c->end_seq, c->end_off, what, later);
  else if (broken && (d->hdr.flags & LOG_F_BARRIER) && closed_cleanly)
    problem ("log %s: the last segment, barrier %" PRIu64 " at offset %" PRIu64
             ", is damaged, and the cache was closed cleanly: the flushes it "
             "acknowledged cannot be replayed",
             path, d->hdr.seq, c->end_off);
  else if (broken)
    warning ("log %s: the log ends with a damaged segment %" PRIu64
             " at offset %" PRIu64 " (torn by a crash, or corrupted): replay "
             "stops before it",
             path, d->hdr.seq, c->end_off);
  if (o->damaged)
    warning ("log %s: %" PRIu64 " more damaged segments after the end of "
             "the chain",
             path, o->damaged);
}

/* check: one mirror's chain and what follows it. */
static void
report_mirror (struct hhc_log *log, unsigned i, const char *path,
               const struct offline_chain *c, uint64_t region,
               bool closed_cleanly)
{
  struct offline_seg d = { 0 };
  struct offline_orphans o;
  bool broken;

  report_chain (path, c);
  broken = inspect_end (log, i, path, c, &d);
  offline_log_sweep (log, i, c, region, &o);
  if (o.error)
    {
      problem ("log %s: scanning the region: %s", path, strerror (o.error));
      return;
    }
  report_end (path, c, &d, broken, &o, closed_cleanly);
}

/* ---- the mirrors together ---- */

/* Is a segment of both chains different on one? */
static bool
chains_differ (const struct offline_chain *c, const struct offline_chain *b,
               uint64_t *seq)
{
  for (size_t k = 0, j = 0; k < c->n && j < b->n;)
    {
      const struct offline_seg *x = &c->segs[k], *y = &b->segs[j];
      if (x->hdr.seq < y->hdr.seq)
        k++;
      else if (x->hdr.seq > y->hdr.seq)
        j++;
      else if (x->off != y->off || x->hdr.checksum != y->hdr.checksum)
        {
          *seq = x->hdr.seq;
          return true;
        }
      else
        {
          k++;
          j++;
        }
    }
  return false;
}

/* check: do the mirrors hold the same log? */
static void
compare_mirrors (const struct offline_logset *ls,
                 const struct offline_chain *ch, unsigned best)
{
  const struct offline_chain *b = &ch[best];
  uint64_t bb = b->last_barrier >= 0 ? b->segs[b->last_barrier].hdr.seq : 0;

  for (unsigned i = 0; i < ls->n; i++)
    {
      const struct offline_chain *c = &ch[i];
      uint64_t cb = c->last_barrier >= 0 ? c->segs[c->last_barrier].hdr.seq : 0;
      uint64_t seq;
      if (i == best || ls->blank[i])
        continue;
      if (chains_differ (c, b, &seq))
        problem ("log mirrors %s and %s disagree: segment %" PRIu64 " differs",
                 ls->paths[i], ls->paths[best], seq);
      if (cb < bb && c->last_barrier < 0)
        problem ("log mirror %s is behind: it has no barrier, %s's newest is "
                 "%" PRIu64
                 " (it stopped being written, or is damaged): replay uses %s",
                 ls->paths[i], ls->paths[best], bb, ls->paths[best]);
      else if (cb < bb)
        problem ("log mirror %s is behind: its newest barrier is %" PRIu64
                 ", %s's is %" PRIu64
                 " (it stopped being written, or is damaged): replay uses %s",
                 ls->paths[i], cb, ls->paths[best], bb, ls->paths[best]);
      else if (cb > bb)
        problem ("log mirror %s has a newer barrier (%" PRIu64
                 ") than %s (%" PRIu64
                 ") but is of an older run (it was left out of a later "
                 "one): replay uses %s",
                 ls->paths[i], cb, ls->paths[best], bb, ls->paths[best]);
      else if (c->end_seq != b->end_seq)
        warning ("log mirrors %s and %s end at different segments (%" PRIu64
                 " and %" PRIu64 ") after the same newest barrier",
                 ls->paths[i], ls->paths[best], c->end_seq, b->end_seq);
    }
}

/* ---- the log ---- */

/* Blank mirrors; true if there is no log at all (said so). */
static bool
report_blank (const struct offline_logset *ls, const struct offline_cache *cc)
{
  bool cache_ok = cc && !cc->blank;
  char a[37];

  for (unsigned i = 0; i < ls->n; i++)
    if (ls->blank[i] && ls->nblank < ls->n)
      warning ("log %s: blank next to %u mirror%s of the log: it joins at the "
               "next start (until then the log has a copy fewer)",
               ls->paths[i], ls->n - ls->nblank,
               ls->n - ls->nblank == 1 ? "" : "s");
  if (ls->log != NULL)
    return false;
  note ("log: blank (no HHC log: the gateway formats it at the next "
        "start)");
  if (cache_ok && memcmp (cc->sb.log_uuid, (uint8_t[16]){ 0 }, 16) != 0)
    {
      offline_uuid_str (cc->sb.log_uuid, a);
      warning ("the cache was paired with log %s, which is not on these "
               "devices: the next start makes a new log and writes every "
               "dirty block to it",
               a);
    }
  return true;
}

/* Every mirror's chain, compared; then what a replay would write. */
static void
report_mirrors (struct offline_logset *ls, const struct offline_log_info *li,
                bool closed)
{
  struct offline_chain ch[HHC_MAX_LOGS] = { 0 };
  uint64_t blocks;

  for (unsigned i = 0; i < ls->n; i++)
    {
      if (ls->blank[i])
        continue;
      int r = offline_log_chain (ls->log, i, &ch[i]);
      if (r)
        problem ("log %s: scanning: %s", ls->paths[i], strerror (r));
      else
        report_mirror (ls->log, i, ls->paths[i], &ch[i], li->sb.region_size,
                       closed);
    }
  compare_mirrors (ls, ch, li->best);
  for (unsigned i = 0; i < ls->n; i++)
    offline_chain_free (&ch[i]);
  if (replay_count (ls->log, &blocks) == 0)
    note ("log: a replay (from %s) would write %" PRIu64
          " blocks to the backend",
          ls->paths[li->best], blocks);
}

/* Do the log and the cache belong together? */
static void
report_pairing (const struct log_sb *ls, const struct offline_cache *cc)
{
  const struct cache_super *sb = &cc->sb;
  char b[37];

  offline_uuid_str (ls->cache_uuid, b);
  if (strcmp (ls->identity, sb->identity) != 0
      || ls->volume_size != sb->volume_size || ls->block_size != sb->block_size)
    problem ("the log belongs to another volume (\"%s\", %" PRIu64
             " bytes, block size %u) than the cache (\"%s\", %" PRIu64
             " bytes, block size %u)",
             ls->identity, ls->volume_size, ls->block_size, sb->identity,
             sb->volume_size, sb->block_size);
  else if (memcmp (ls->cache_uuid, sb->uuid, 16) == 0)
    note ("log and cache are paired");
  else if (memcmp (sb->log_uuid, ls->log_uuid, 16) == 0)
    warning ("a recovery into this cache was interrupted: the next start "
             "replays the log again");
  else
    problem ("the log is paired with another cache (%s): the gateway refuses "
             "to start with these devices",
             b);
}

void
report_log (struct offline_logset *ls, const struct offline_cache *cc,
            const char *cache_path)
{
  struct offline_log_info li;
  const struct log_sb *sb = &li.sb;
  char a[37], b[37];
  bool cache_ok = cc && !cc->blank;
  /* An older copy of the cache than the log shows (the gateway's own
   * check, said as a problem): what a start would do with the pair
   * does not follow.
   */
  bool behind
      = cache_ok && offline_behind_log (ls, cache_path, cc, msg_cb) == EINVAL;

  if (report_blank (ls, behind ? NULL : cc))
    return;
  offline_log_info (ls->log, &li);
  offline_uuid_str (sb->log_uuid, a);
  offline_uuid_str (sb->cache_uuid, b);
  note ("log: uuid %s, paired with cache %s", a, b);
  note ("log: volume \"%s\", %" PRIu64 " bytes, block size %u; region of "
        "%" PRIu64 " bytes, head at segment %" PRIu64,
        sb->identity, sb->volume_size, sb->block_size, sb->region_size,
        sb->head_seq);
  report_mirrors (ls, &li, cache_ok && cc->state == CACHE_CLOSED);
  if (cache_ok)
    {
      if (!behind)
        report_pairing (sb, cc);
    }
  else if (cc)
    note ("the cache is blank: the next start replays the log into the "
          "backend");
}
