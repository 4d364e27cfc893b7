/* Opening a log: the mirrors' superblocks (every valid one of the same
 * log and backend), the geometry, the format of a blank log, then the
 * scan of every valid mirror (log-scan.c scan_all: the newest barrier
 * is the one replay reads).  Also freeing a log (log-retire.c checks
 * and voids one without opening it for use).
 *
 * No lock: a log being opened is not shared yet (the scan's threads
 * only read what is set before they start).
 */
#include <config.h>

#include <stdio.h>

#include "common.h"
#include "log_int.h"

void
free_log (struct hhc_log *log)
{
  if (log == NULL)
    return;
  for (unsigned i = 0; i < log->nm; i++)
    {
      if (log->m[i].own)
        dev_close (log->m[i].dev);
      free (log->m[i].path);
      pthread_mutex_destroy (&log->m[i].mu);
      pthread_mutex_destroy (&log->m[i].sync_mu);
      pthread_cond_destroy (&log->m[i].cv);
    }
  for (unsigned i = 0; log->bufs && i < log->nbufs; i++)
    {
      free (log->bufs[i].mem);
      free (log->bufs[i].mark);
      free (log->bufs[i].lbas);
      free (log->bufs[i].keys);
      u64_vec_reset (&log->bufs[i].revokes);
      u32_vec_reset (&log->bufs[i].deaths);
    }
  free (log->bufs);
  free (log->hdrbuf);
  free (log->ring);
  free (log->keys);
  free (log->unlogged);
  u64_vec_reset (&log->pending_rev);
  death_vec_reset (&log->deaths);
  scan_free (&log->scan);
  free (log->identity);
  pthread_mutex_destroy (&log->lock);
  pthread_mutex_destroy (&log->io_lock);
  pthread_mutex_destroy (&log->void_lock);
  pthread_cond_destroy (&log->writer_cv);
  pthread_cond_destroy (&log->done_cv);
  pthread_cond_destroy (&log->buf_cv);
  pthread_cond_destroy (&log->pipe_cv);
  free (log);
}

/* Offline (hhcctl recover, no identity given): take the volume the
 * valid superblock sb records.
 */
static int
adopt_volume (struct hhc_log *log, const struct log_sb *sb)
{
  char *id = strndup (sb->identity, sb->identity_len);

  if (id == NULL)
    return ENOMEM;
  free (log->identity);
  log->identity = id;
  log->volume_size = sb->volume_size;
  log->bs = sb->block_size;
  /* The log's own segment size, not the default, or a small log made
   * with segment-size=64K is refused as too small for 1M segments
   * (found by fuzz-log).
   */
  uint32_t seg = sb->segment_size;
  if (HHC_IS_POW2 (seg) && seg >= 64 * 1024 && seg <= 64 * 1024 * 1024
      && seg >= log->bs)
    {
      log->segment_size = seg;
      log->segment_auto = false;
    }
  log->max_blocks = HHC_MAX (log->segment_size / log->bs, 1);
  log->adopt = false;
  return 0;
}

/* Does a valid superblock belong to this backend? */
static int
check_sb_owner (struct hhc_log *log, struct mirror *m, const struct log_sb *sb)
{
  uint32_t idl = sb->identity_len;
  int r;

  if (log->adopt && idl <= LOG_IDENTITY_MAX && HHC_IS_POW2 (sb->block_size)
      && (r = adopt_volume (log, sb)) != 0)
    return r;
  if (idl > LOG_IDENTITY_MAX || sb->volume_size != log->volume_size
      || sb->block_size != log->bs || idl != strlen (log->identity)
      || memcmp (sb->identity, log->identity, idl) != 0)
    {
      hhc_msg (log->msgfn, HHC_MSG_ERROR,
               "log %s belongs to another volume (identity \"%.*s\", %" PRIu64
               " bytes, block size %u; this volume is \"%s\", %" PRIu64
               " bytes, block size %u): use a blank log device",
               m->dev->name, (int)HHC_MIN (idl, LOG_IDENTITY_MAX), sb->identity,
               sb->volume_size, sb->block_size, log->identity, log->volume_size,
               log->bs);
      return EINVAL;
    }
  return 0;
}

/* Open mirror i: conf's test device or its path. */
static int
open_mirror (const struct log_conf *conf, unsigned i, struct mirror *m)
{
  pthread_mutex_init (&m->mu, NULL);
  pthread_mutex_init (&m->sync_mu, NULL);
  m->plain = true; /* the first barrier syncs (do_io, log-pipeline.c) */
  pthread_cond_init (&m->cv, NULL);
  if (conf->paths && conf->paths[i]
      && (m->path = strdup (conf->paths[i])) == NULL)
    return ENOMEM;
  if (conf->devs && conf->devs[i])
    {
      m->dev = conf->devs[i];
      return 0;
    }
  int r = dev_open_path (conf->paths[i], 0, false, conf->msgfn, &m->dev);
  m->own = r == 0;
  return r;
}

/* A log with conf's geometry and its mirrors open (nothing read). */
int
new_log (const struct log_conf *conf, struct hhc_log **logp, uint64_t *min_size)
{
  struct hhc_log *log = calloc (1, sizeof *log);
  bool serial = false;

  *logp = log;
  *min_size = UINT64_MAX;
  if (log == NULL)
    return ENOMEM;
  pthread_mutex_init (&log->lock, NULL);
  pthread_mutex_init (&log->io_lock, NULL);
  pthread_mutex_init (&log->void_lock, NULL);
  pthread_cond_init (&log->writer_cv, NULL);
  pthread_cond_init (&log->done_cv, NULL);
  pthread_cond_init (&log->buf_cv, NULL);
  pthread_cond_init (&log->pipe_cv, NULL);
  log->msgfn = conf->msgfn;
  log->ring_max = conf->ring_slots;
  log->bs = conf->block_size;
  log->volume_size = conf->volume_size;
  /* Without segment-size, open_buffers chooses once the region is
   * known (log_default_segment); meanwhile the smallest default.
   */
  log->segment_auto = conf->segment_size == 0;
  log->segment_size
      = conf->segment_size ? conf->segment_size : LOG_SEG_MIN_AUTO;
  log->segment_size = HHC_MAX (log->segment_size, log->bs);
  log->max_blocks = log->segment_size / log->bs;
  log->identity
      = strndup (conf->identity ? conf->identity : "", LOG_IDENTITY_MAX);
  log->adopt = conf->identity == NULL;
  if (log->identity == NULL)
    return ENOMEM;
  if (conf->npaths == 0 || conf->npaths > LOG_MAX_MIRRORS)
    {
      hhc_msg (conf->msgfn, HHC_MSG_ERROR, "log= may be given 1 to %d times",
               LOG_MAX_MIRRORS);
      return EINVAL;
    }
  for (unsigned i = 0; i < conf->npaths; i++)
    {
      struct mirror *m = &log->m[log->nm++];
      int r = open_mirror (conf, i, m);
      if (r)
        return r;
      *min_size = HHC_MIN (*min_size, m->dev->size);
      serial |= m->dev->serial;
    }
  /* Barriers in flight: on a device that runs one request at a time
   * (an NBD connection) more of them only split the groups of FLUSHes
   * that one barrier would carry (docs/log.md, "Pipelined barriers").
   */
  log->inflight_max = conf->inflight;
  if (log->inflight_max == 0)
    log->inflight_max = serial ? 1 : LOG_INFLIGHT_DEFAULT;
  for (unsigned i = 0; i < log->nm; i++)
    log->m[i].piped = log->inflight_max > 1;
  return 0;
}

/* ---- log_open, step by step ---- */

/* Superblocks: every valid one must be of the same log and backend.
 * The newest valid one into *good; how many are valid, and how many
 * void (those are used as blank devices).
 */
static int
open_read_sbs (struct hhc_log *log, struct log_sb *good, unsigned *nvalid,
               unsigned *nvoid)
{
  struct log_sb sb;
  uint64_t gen;
  int r;

  log->sb_gen = 0;
  for (unsigned i = 0; i < log->nm; i++)
    {
      struct mirror *m = &log->m[i];
      r = read_sb (log, m, &sb, &gen);
      /* A copy newer than the one that counts (on a mirror read as
       * void: its join was cut short) still takes a generation: a void
       * marks the newest one a mirror may hold.
       */
      log->sb_gen = HHC_MAX (log->sb_gen, gen);
      if (r == ESTALE)
        {
          hhc_msg (log->msgfn, HHC_MSG_INFO,
                   "log %s was voided (it fell out of use in an earlier run): "
                   "it holds nothing to replay and is used as a blank device",
                   m->dev->name);
          ++*nvoid;
          memcpy (m->void_log, sb.log_uuid, 16);
          m->void_gen = sb.generation;
          /* It may hold this log's own older history past this run's
           * tail (a mirror voided by a retirement, then the log taken
           * up again from another mirror): cut at the release like an
           * older run's (found by the mirror-sets campaign: its old
           * segment at the head passed for this run's next).
           */
          m->older_run = true;
          m->sb_hold = true;
          r = ENOENT;
        }
      if (r == ENOENT)
        {
          /* It joins: it holds the log once log_rebase (or log_discard)
           * has made it complete (release_sb_hold), and takes no
           * superblock before: one taken in a start cut short vouched
           * for a chain it does not hold (chain_generation; review).
           */
          m->blank = m->joining = m->sb_hold = true;
          continue;
        }
      if (r || (r = check_sb_owner (log, m, &sb)) != 0)
        return r;
      if (*nvalid && memcmp (sb.log_uuid, good->log_uuid, 16) != 0)
        {
          hhc_msg (log->msgfn, HHC_MSG_ERROR,
                   "log mirrors %s and %s belong to different logs: give "
                   "mirrors of one log, or blank devices",
                   log->m[0].dev->name, m->dev->name);
          return EINVAL;
        }
      m->sb_gen = sb.generation;
      if (log_sb_check (&sb) == LOG_SB_SOUND)
        {
          m->hint_off = sb.head_off;
          m->hint_seq = sb.head_seq;
        }
      if (*nvalid == 0 || sb.generation > good->generation)
        *good = sb;
      if (sb.version < LOG_VERSION)
        log->old_version = true; /* rewritten by log_start */
      ++*nvalid;
    }
  return 0;
}

/* A new log (no mirror holds one) over the smallest mirror. */
static void
open_blank (struct hhc_log *log, const uint8_t cache_uuid[16],
            uint64_t min_size, uint64_t epoch)
{
  for (unsigned i = 0; i < log->nm; i++)
    log->m[i].sb_hold = log->m[i].joining = false; /* formatted below */
  log->sb_gen = epoch << LOG_EPOCH_SHIFT;
  log->region_size = min_size > LOG_REGION_OFF
                         ? (min_size - LOG_REGION_OFF) / LOG_ALIGN * LOG_ALIGN
                         : 0;
  log->region_size = HHC_MIN (log->region_size, LOG_MAX_REGION);
  hhc_make_uuid (log->uuid);
  memcpy (log->cache_uuid, cache_uuid, 16);
  log->hint_off = 0;
  log->hint_seq = 1;
}

/* The log the valid superblock good records.  What it records is
 * checked before any sum with it: a region of 2^64 - 64 KiB wrapped
 * LOG_REGION_OFF + region_size to 0, passed the size check, and
 * log_start tried to allocate a ring of 2^32 entries; with a head
 * sequence 0, every barrier of the next run would count as durable at
 * once (fuzz-log, in CI).
 */
static int
open_valid (struct hhc_log *log, const struct log_sb *good)
{
  memcpy (log->uuid, good->log_uuid, 16);
  memcpy (log->cache_uuid, good->cache_uuid, 16);
  log->region_size = good->region_size;
  log->hint_off = good->head_off;
  log->hint_seq = good->head_seq;
  log->sb_gen = HHC_MAX (log->sb_gen, good->generation); /* open_read_sbs */
  log->open_gen = log->sb_gen_taken = good->generation;
  log->chain_gen = 0; /* scan_all: chain_generation */
  switch (log_sb_check (good))
    {
    case LOG_SB_SOUND:
      return 0;
    case LOG_SB_BAD_HEAD_SEQ:
      hhc_msg (log->msgfn, HHC_MSG_ERROR,
               "log: superblock is corrupt (head sequence %" PRIu64 ")",
               log->hint_seq);
      return EINVAL;
    case LOG_SB_BAD_REGION:
      break;
    }
  hhc_msg (log->msgfn, HHC_MSG_ERROR,
           "log %s: superblock is corrupt (region of %" PRIu64
           " bytes, head at %" PRIu64 ")",
           log->m[0].dev->name, log->region_size, log->hint_off);
  return EINVAL;
}

/* The buffers and what each holds of the region: a region must hold
 * the reservations of every buffer and more, and every mirror the
 * region.
 */
static int
open_buffers (struct hhc_log *log, unsigned nbuffers)
{
  /* With K barriers in flight, K buffers are held by the mirrors: two
   * more let one fill while another waits (log-inflight).
   */
  log->nbufs = nbuffers ? nbuffers : HHC_MAX (4u, log->inflight_max + 2);
  log->nbufs_want = log->nbufs;
  if (log->segment_auto)
    {
      log->segment_size
          = log_default_segment (log->region_size, log->nbufs, log->bs);
      log->max_blocks = log->segment_size / log->bs;
    }
  log->rev_cap = HHC_MAX (log->max_blocks, 256u);
  log->reserve = buffer_reserve (log->segment_size, log->bs);
  /* A small log uses fewer buffers (at least 2): the reservations of
   * all of them, one more for wrap waste and one to spare must fit.
   */
  while (log->nbufs > 2
         && (uint64_t)(log->nbufs + 3) * log->reserve > log->region_size)
    log->nbufs--;
  uint64_t need = 5 * log->reserve;
  for (unsigned i = 0; i < log->nm; i++)
    if (log->region_size < need || log->region_size % LOG_ALIGN
        || log->m[i].dev->size < LOG_REGION_OFF
        || log->m[i].dev->size - LOG_REGION_OFF < log->region_size
        || log->hint_off >= log->region_size)
      {
        hhc_msg (log->msgfn, HHC_MSG_ERROR,
                 "log %s: device is too small (%" PRIu64
                 " bytes; with segment-size=%u it needs at least %" PRIu64 ")",
                 log->m[i].dev->name, log->m[i].dev->size, log->segment_size,
                 LOG_REGION_OFF + HHC_MAX (need, log->region_size));
        return EINVAL;
      }
  return 0;
}

/* Format: the superblock copies cleared, and the first segment
 * position, so no older log's data can be mistaken; then the
 * superblock, both copies; then the void mark of an older log.  One
 * step at a time, each synced, so that a cut leaves a state that reads
 * as before (void or blank) or as the new log: copy A (with the region
 * start), copy B, the two superblocks, the mark.  The mark goes last:
 * while it is there an old copy that a void's torn write left valid
 * stays void (found by review: clearing the mark with copy A brought
 * such a copy back), and a mark voids only copies of its own log, so it
 * does not touch the new one.
 */
static int
open_format (struct hhc_log *log)
{
  HHC_CLEANUP_FREE char *zero = hhc_alloc_aligned (LOG_SB_SIZE);
  struct io a = { .n = 2, .sync = true }, b = { .n = 1, .sync = true };
  struct io mark = { .n = 1, .sync = true };
  int r;

  if (zero == NULL)
    return ENOMEM;
  a.p[0] = a.p[1] = b.p[0] = mark.p[0] = zero;
  a.len[0] = a.len[1] = b.len[0] = mark.len[0] = LOG_SB_SIZE;
  a.off[0] = 0;
  a.off[1] = LOG_REGION_OFF;
  b.off[0] = LOG_SB_SIZE;
  mark.off[0] = LOG_VOID_OFF;
  if ((r = mirrors_io (log, &a)) != 0 || (r = mirrors_io (log, &b)) != 0
      || (r = write_sb (log)) != 0 || (r = write_sb (log)) != 0
      || (r = mirrors_io (log, &mark)) != 0 || log->healthy < log->nm)
    {
      hhc_msg (log->msgfn, HHC_MSG_ERROR, "formatting the log failed");
      return r ? r : EIO;
    }
  for (unsigned i = 0; i < log->nm; i++)
    log->m[i].blank = false;
  hhc_msg (log->msgfn, HHC_MSG_INFO,
           "log: formatted %u mirror%s, region of %" PRIu64 " bytes", log->nm,
           log->nm == 1 ? "" : "s", log->region_size);
  return 0;
}

/* From the superblocks to a log ready to scan (or formatted). */
static int
open_log (struct hhc_log *log, const struct log_conf *conf,
          const uint8_t cache_uuid[16], uint64_t min_size,
          enum log_found *found)
{
  struct log_sb good;
  unsigned nvalid = 0, nvoid = 0;
  int r;

  if ((r = open_read_sbs (log, &good, &nvalid, &nvoid)) != 0)
    return r;
  /* A valid mirror with an older superblock than the newest missed
   * writes (its void never landed, a cut, left out of a run): it joins
   * too, and gets no superblock until the re-log has made it complete
   * (release_sb_hold).  Else a cut before that left it with a newer
   * generation than the cache recorded, over a chain that lacks what
   * the others hold: given alone next, it passed for the log (a mirror
   * that failed in the last run, given again with a blank one: found
   * by review), or an older run's chain passed for the newest epoch.
   */
  for (unsigned i = 0; i < log->nm; i++)
    if (!log->m[i].blank && log->m[i].sb_gen < good.generation)
      {
        log->m[i].joining = log->m[i].sb_hold = true;
        /* Of an older run (epoch, log_int.h): its history past this
         * run's tail is cut at the release.
         */
        if (log->m[i].sb_gen >> LOG_EPOCH_SHIFT < good.generation
            >> LOG_EPOCH_SHIFT)
          log->m[i].older_run = true;
      }
  if (nvalid == 0 && conf->identity == NULL)
    {
      hhc_msg (conf->msgfn, HHC_MSG_ERROR,
               nvoid ? "%s: the log was voided (it fell out of use): it "
                       "holds nothing to recover"
                     : "%s: not an HHC log",
               log->m[0].dev->name);
      return EINVAL;
    }
  if (nvalid == 0 && conf->no_format)
    return ENODATA; /* the caller says why */
  if (nvalid == 0)
    open_blank (log, cache_uuid, min_size, conf->format_epoch);
  else if ((r = open_valid (log, &good)) != 0)
    return r;
  if ((r = open_buffers (log, conf->nbuffers)) != 0)
    return r;
  log->healthy = log->nm;
  log->st.mirrors = log->nm;
  if (nvalid == 0 && (r = open_format (log)) != 0)
    return r;
  *found = nvalid ? LOG_FOUND_VALID : LOG_FOUND_BLANK;
  return 0;
}

int
log_open (const struct log_conf *conf, const uint8_t cache_uuid[16],
          struct hhc_log **logp, enum log_found *found)
{
  struct hhc_log *log;
  uint64_t min_size;
  int r = new_log (conf, &log, &min_size);

  if (r == 0)
    r = open_log (log, conf, cache_uuid, min_size, found);
  if (r == 0)
    r = scan_all (log);
  if (r)
    {
      free_log (log);
      return r;
    }
  if (*found == LOG_FOUND_BLANK)
    {
      log->scan.end_lpos = 0;
      log->scan.end_seq = 1;
      log->scan.last_barrier = -1;
    }
  *logp = log;
  return 0;
}

void
log_volume (struct hhc_log *log, const char **identity, uint64_t *size,
            uint32_t *block_size)
{
  *identity = log->identity;
  *size = log->volume_size;
  *block_size = log->bs;
}

void
log_uuids (struct hhc_log *log, uint8_t log_uuid[16], uint8_t cache_uuid[16])
{
  memcpy (log_uuid, log->uuid, 16);
  memcpy (cache_uuid, log->cache_uuid, 16);
}

uint64_t
log_open_generation (struct hhc_log *log)
{
  return log->chain_gen;
}
