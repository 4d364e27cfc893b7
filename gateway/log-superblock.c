/* The log's superblock on disk: what it holds (sb_of_log), writing it
 * to every healthy mirror (write_sb: the next generation; log_mark_run:
 * a run's first, of a new epoch, log.h), releasing the mirrors that
 * joined at start (release_sb_hold), and reading a mirror's copies and
 * void mark (log_dev_sb, read_sb).  Writes go through mirrors_io_locked
 * (log-mirror.c), under io_lock.
 */
#include <config.h>

#include <stdio.h>

#include "common.h"
#include "log_int.h"

/* The superblock of this log as it is now (io_lock held, or no writer
 * yet).
 */
void
sb_of_log (const struct hhc_log *log, struct log_sb *sb)
{
  memset (sb, 0, sizeof *sb);
  sb->version = LOG_VERSION;
  sb->block_size = log->bs;
  memcpy (sb->log_uuid, log->uuid, 16);
  memcpy (sb->cache_uuid, log->cache_uuid, 16);
  sb->volume_size = log->volume_size;
  sb->region_size = log->region_size;
  sb->segment_size = log->segment_size;
  sb->identity_len = HHC_MIN (strlen (log->identity), (size_t)LOG_IDENTITY_MAX);
  memcpy (sb->identity, log->identity, sb->identity_len);
  sb->head_off = log->hint_off;
  sb->head_seq = log->hint_seq;
  sb->generation = log->sb_gen;
  sb->mirrors = log->nm;
}

/* Write the superblock (next generation, over the older copy) to every
 * healthy mirror and sync (io_lock held).
 */
static int
write_sb_gen_locked (struct hhc_log *log, uint64_t gen)
{
  HHC_CLEANUP_FREE unsigned char *buf = hhc_alloc_aligned (LOG_SB_SIZE);
  struct io io = { .n = 1, .sync = true, .sb = true };
  struct log_sb sb;

  if (buf == NULL)
    return ENOMEM;
  __atomic_store_n (&log->sb_gen, gen, __ATOMIC_RELEASE); /* void_failed */
  sb_of_log (log, &sb);
  log_sb_encode (&sb, buf);
  io.p[0] = buf;
  io.len[0] = LOG_SB_SIZE;
  io.off[0] = 0; /* do_io: over each mirror's older copy */
  int r = mirrors_io_locked (log, &io);
  /* Taken by a mirror: one healthy that was not held (a held write
   * succeeds with none).
   */
  hhc_lock (&log->lock);
  for (unsigned i = 0; r == 0 && i < log->nm; i++)
    if (!log->m[i].failed && !log->m[i].sb_hold)
      {
        log->sb_gen_taken = sb.generation;
        break;
      }
  hhc_unlock (&log->lock);
  return r;
}

int
write_sb_locked (struct hhc_log *log)
{
  uint64_t gen = __atomic_load_n (&log->sb_gen, __ATOMIC_ACQUIRE) + 1;

  /* The count within a run must not carry into an epoch no start
   * reserved (2^32 superblock writes: a year at 100 a second).
   */
  if (gen % (UINT64_C (1) << LOG_EPOCH_SHIFT) == 0)
    {
      hhc_msg (log->msgfn, HHC_MSG_ERROR,
               "log: 2^32 superblock writes in one run: restart the "
               "gateway (a new run)");
      return EOVERFLOW;
    }
  return write_sb_gen_locked (log, gen);
}

int
write_sb (struct hhc_log *log)
{
  HHC_SCOPED_LOCK (&log->io_lock);

  return write_sb_locked (log);
}

uint64_t
log_max_epoch (struct hhc_log *log)
{
  HHC_SCOPED_LOCK (&log->io_lock);

  return __atomic_load_n (&log->sb_gen, __ATOMIC_ACQUIRE) >> LOG_EPOCH_SHIFT;
}

int
log_mark_run (struct hhc_log *log, uint64_t epoch, uint64_t *gen)
{
  /* No void meanwhile (void_failed takes the numbered generation): a
   * failed mirror's void of the new epoch before the mark is durable on
   * the healthy ones looked, after a cut, like a later run's, and the
   * chain they hold was refused as older (voided_since in logpair.c).
   * Lock order: void_lock, then io_lock.
   */
  HHC_SCOPED_LOCK (&log->void_lock);
  HHC_SCOPED_LOCK (&log->io_lock);
  uint64_t now = __atomic_load_n (&log->sb_gen, __ATOMIC_ACQUIRE);
  int r;

  /* Above every count of the epochs before (this start's superblock
   * writes so far are of the mirrors' epoch).
   */
  epoch = HHC_MAX (epoch, (now >> LOG_EPOCH_SHIFT) + 1);
  if (epoch >= UINT64_C (1) << 30)
    {
      hhc_msg (log->msgfn, HHC_MSG_ERROR,
               "log: superblock generation past 2^62 (corrupt): refusing");
      return EOVERFLOW;
    }

  r = write_sb_gen_locked (log, epoch << LOG_EPOCH_SHIFT);
  *gen = __atomic_load_n (&log->sb_gen, __ATOMIC_ACQUIRE);
  return r;
}

uint64_t
log_generation (struct hhc_log *log)
{
  HHC_SCOPED_LOCK (&log->io_lock);

  return log->sb_gen_taken;
}

uint64_t
log_newest_epoch (struct hhc_log *log)
{
  return log->open_gen >> LOG_EPOCH_SHIFT;
}

void
log_hold_sb (struct hhc_log *log)
{
  HHC_SCOPED_LOCK (&log->lock);

  for (unsigned i = 0; i < log->nm; i++)
    log->m[i].sb_hold = true;
}

uint64_t
log_void_epoch (struct hhc_log *log)
{
  uint64_t e = 0;

  for (unsigned i = 0; i < log->nm; i++)
    if (log->m[i].void_gen && memcmp (log->m[i].void_log, log->uuid, 16) == 0)
      e = HHC_MAX (e, log->m[i].void_gen >> LOG_EPOCH_SHIFT);
  return e;
}

uint64_t
log_failures (struct hhc_log *log)
{
  return __atomic_load_n (&log->fail_gen, __ATOMIC_ACQUIRE);
}

int
log_mark_failures (struct hhc_log *log, uint64_t *gen)
{
  HHC_SCOPED_LOCK (&log->io_lock);
  uint64_t before = log->sb_gen_taken;
  int r = write_sb_locked (log);

  *gen = log->sb_gen_taken;
  /* A write that only held mirrors took proves nothing (none at run
   * time: release_sb_hold ends the start).
   */
  return r ? r : *gen > before ? 0 : EIO;
}

/* A mirror of an older run, about to get this run's superblock: its
 * block at the tail gets zeros (and a sync), so that no segment of its
 * own history there can pass for this run's next one (the segment at
 * the head has no link to check: found by review).  io_lock held.
 */
static void
cut_older_history (struct hhc_log *log, struct mirror *m)
{
  HHC_CLEANUP_FREE unsigned char *z = hhc_alloc_aligned (LOG_ALIGN);
  uint64_t phys;
  bool skip;
  int r;

  hhc_lock (&log->lock);
  phys = log->tail_lpos % log->region_size;
  m->older_run = false;
  skip = m->failed;
  hhc_unlock (&log->lock);
  if (skip)
    return;
  if (phys + LOG_ALIGN > log->region_size)
    phys = 0; /* the next segment wraps */
  if (z == NULL)
    r = ENOMEM;
  else
    {
      memset (z, 0, LOG_ALIGN);
      r = dev_pwrite (m->dev, z, LOG_ALIGN, LOG_REGION_OFF + phys);
    }
  if (r == 0)
    r = mirror_fsync (m, NULL, 0, 0);
  if (r)
    mirror_failed (log, m, r);
}

/* This run's log is complete on every mirror (log_rebase, log_discard):
 * a mirror that joined gets this run's superblock, both copies (a void
 * copy would win over one; one behind gets the head past what it
 * lacks), and every mirror that joined now counts as holding the log.
 */
int
release_sb_hold (struct hhc_log *log)
{
  HHC_SCOPED_LOCK (&log->io_lock);
  bool any = false;
  int r;

  for (unsigned i = 0; i < log->nm; i++)
    if (log->m[i].older_run)
      cut_older_history (log, &log->m[i]);
  hhc_lock (&log->lock);
  for (unsigned i = 0; i < log->nm; i++)
    {
      any |= log->m[i].sb_hold || log->m[i].joining;
      log->m[i].sb_hold = false;
    }
  hhc_unlock (&log->lock);
  if (any && (r = write_sb_locked (log)) != 0)
    return r;
  if (any && (r = write_sb_locked (log)) != 0)
    return r;
  /* Now the mirrors that joined hold the log: a mirror that failed
   * while only joining ones were left is owed its void
   * (mark_failed_locked).
   */
  hhc_lock (&log->lock);
  for (unsigned i = 0; i < log->nm; i++)
    log->m[i].joining = false;
  owe_voids_locked (log);
  hhc_unlock (&log->lock);
  return 0;
}

int
log_dev_sb (struct hhc_dev *dev, struct log_sb *sb, struct log_sb_read *rd)
{
  HHC_CLEANUP_FREE unsigned char *buf = hhc_alloc_aligned (LOG_SB_AREA);
  struct log_sb c;

  memset (rd, 0, sizeof *rd);
  if (buf == NULL)
    return ENOMEM;
  /* One read; if it fails, each part alone (a torn write may have left
   * the sectors of one unreadable).
   */
  if (dev_pread (dev, buf, LOG_SB_AREA, 0) != 0)
    for (unsigned i = 0; i < 3; i++)
      {
        int r = dev_pread (dev, buf + i * LOG_SB_SIZE, LOG_SB_SIZE,
                           i * LOG_SB_SIZE);
        if (r)
          {
            rd->unreadable |= 1u << i;
            rd->err = rd->err ? rd->err : r;
          }
      }
  /* The newest as the codec takes it (the first of equal ones). */
  for (unsigned i = 0, found = 0; i < 2; i++)
    if (!(rd->unreadable & (1u << i))
        && log_sb_decode (buf + i * LOG_SB_SIZE, &c) == 0
        && (!found || c.generation > rd->max_gen))
      {
        found = 1;
        rd->newest = i;
        rd->max_gen = c.generation;
      }
  return log_sb_decode_mirror (buf, rd->unreadable, sb);
}

/* Part of m's superblock area was unreadable (rd), and the area
 * decoded to r: say which part and what counts.
 */
static void
warn_unreadable (struct hhc_log *log, struct mirror *m,
                 const struct log_sb_read *rd, int r)
{
  const char *what = r == ESTALE   ? "the mirror reads as voided"
                     : r == ENOENT ? "the other copy is blank: a format was "
                                     "torn"
                     : r == 0      ? "the other copy counts"
                                   : "and the other copy is not valid";

  if (!(rd->unreadable & LOG_SB_COPIES))
    hhc_msg (log->msgfn, HHC_MSG_WARNING,
             "log %s: the void mark is unreadable (%s): a void was torn "
             "before it began; the superblock copies count",
             m->dev->name, strerror (rd->err));
  else
    hhc_msg (log->msgfn, HHC_MSG_WARNING,
             "log %s: superblock copy %c%s is unreadable (%s), its write "
             "torn: %s",
             m->dev->name, rd->unreadable & LOG_SB_COPY_A ? 'A' : 'B',
             rd->unreadable & LOG_SB_MARK ? " (and the void mark)" : "",
             strerror (rd->err), what);
}

/* Read a mirror's superblock: 0 (valid, into out), ENOENT (blank),
 * ESTALE (voided: a void superblock, into out), EINVAL (corrupt,
 * logged), or the read's error (neither copy readable, logged).
 */
int
read_sb (struct hhc_log *log, struct mirror *m, struct log_sb *out,
         uint64_t *max_gen)
{
  struct log_sb_read rd;
  int r = log_dev_sb (m->dev, out, &rd);

  /* With no valid copy, the first write goes over A. */
  m->sb_slot = rd.max_gen ? rd.newest : 1;
  *max_gen = rd.max_gen;
  if (r == EIO)
    {
      hhc_msg (log->msgfn, HHC_MSG_ERROR,
               "log %s: reading superblock: %s (both copies)", m->dev->name,
               strerror (rd.err));
      return rd.err;
    }
  if (r == EILSEQ)
    {
      hhc_msg (log->msgfn, HHC_MSG_ERROR,
               "log %s: superblock is corrupt (bad checksum or version)",
               m->dev->name);
      return EINVAL;
    }
  if (rd.unreadable)
    warn_unreadable (log, m, &rd, r);
  return r;
}
