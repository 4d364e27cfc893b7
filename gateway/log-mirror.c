/* The log's mirrors: writes to all of them at once (a worker thread per
 * mirror when there are several), a mirror's failure, and voiding the
 * log a failed mirror holds (the superblock on disk: log-superblock.c).
 *
 * A mirror is healthy until a write or sync to it fails; then it is
 * failed for the rest of the run (never written again), and owed a void
 * when its log would mislead a replay (mark_failed_locked).  States of
 * a mirror (m->failed, want_void, voided):
 *
 *   healthy      0 0 0   written with every segment and superblock
 *   failed       1 0 0   not written; its log still counts (the last
 *                        mirror, until a FLUSH falls back; or no_void)
 *   owed a void  1 1 0   the writer, FLUSHes that fall back and
 *                        log_stop try to void it
 *   voided       1 1 1   both superblock copies void on disk
 *
 * Locks: mirrors_io runs under io_lock (one at a time: the writer,
 * log_rebase and log_discard while it runs, or open/close with no
 * writer) and takes log->lock only to read and update the mirrors'
 * flags, never across I/O.  void_failed runs under void_lock, not
 * io_lock: a failed mirror is written by no one else, but for what a
 * mirrors_io that chose it before it failed is still writing.  That
 * happens: log_fail_locked runs on the thread that finds the log
 * cannot be kept, which may be the flusher or a request thread (a
 * trim's revoke: add_revoke) while the writer writes, so a mirror may
 * be marked failed and then voided (at once, or for the last one once
 * a FLUSH has fallen back) while that write goes on.  Harmless: a
 * segment write never touches the superblocks, and a superblock write
 * rewrites one copy, while a void copy (or the void mark) wins over a
 * valid one of no later generation (read_sb) and voiding writes both.
 */
#include <config.h>

#include <stdio.h>

#include "common.h"
#include "log_int.h"

/* ---- I/O on every mirror ---- */

/* A barrier written with FUA is durable without a sync, but FUA does
 * not make an earlier write durable: only while nothing was written
 * without a sync since the last one (m->plain; log-pipeline.c keeps the
 * same rule).  The serial writer's mirrors: one io at a time each.
 * With pipelined barriers m->plain is the lanes' (m->piped).
 */
static int
do_io (struct mirror *m, const struct io *io)
{
  bool fua = io->sync && !io->sync_only && io->n > 0 && !m->piped && !m->plain
             && dev_can_fua (m->dev);
  int r = 0;

  for (unsigned i = 0; r == 0 && i < io->n && !io->sync_only; i++)
    {
      /* A superblock goes over the mirror's other copy than its newest. */
      uint64_t off = io->sb ? (1 - m->sb_slot) * LOG_SB_SIZE : io->off[i];
      r = fua ? mirror_fsync (m, io->p[i], io->len[i], off)
              : dev_pwrite (m->dev, io->p[i], io->len[i], off);
    }
  if (r == 0 && io->sync && !fua)
    r = mirror_fsync (m, NULL, 0, 0);
  if (r == 0 && io->sb)
    m->sb_slot = 1 - m->sb_slot;
  if (r == 0 && !m->piped)
    m->plain = !io->sync && (m->plain || (io->n > 0 && !io->sync_only));
  m->last_fua = r == 0 && fua;
  return r;
}

int
mirror_fsync (struct mirror *m, const void *buf, size_t len, uint64_t off)
{
  int r;

  if (!m->dev->errors_once) /* each call reports its own errors */
    return buf ? dev_pwrite_fua (m->dev, buf, len, off) : dev_sync (m->dev);
  hhc_lock (&m->sync_mu);
  if (m->sync_err)
    r = EIO;
  else
    r = buf ? dev_pwrite_fua (m->dev, buf, len, off) : dev_sync (m->dev);
  if (r)
    m->sync_err = true;
  hhc_unlock (&m->sync_mu);
  return r;
}

static void *
mirror_thread (void *arg)
{
  struct mirror *m = arg;

  hhc_lock (&m->mu);
  for (;;)
    {
      while (m->job == NULL && !m->stop)
        pthread_cond_wait (&m->cv, &m->mu);
      if (m->job == NULL)
        break;
      const struct io *io = m->job;
      hhc_unlock (&m->mu);
      int r = do_io (m, io);
      hhc_lock (&m->mu);
      m->result = r;
      m->job = NULL;
      m->done = true;
      pthread_cond_broadcast (&m->cv);
    }
  hhc_unlock (&m->mu);
  return NULL;
}

int
mirrors_start_threads (struct hhc_log *log)
{
  int r;

  if (log->nm < 2)
    return 0;
  for (unsigned i = 0; i < log->nm; i++)
    {
      if ((r = pthread_create (&log->m[i].thread, NULL, mirror_thread,
                               &log->m[i]))
          != 0)
        return r;
      log->m[i].has_thread = true;
    }
  return 0;
}

void
mirrors_stop_threads (struct hhc_log *log)
{
  for (unsigned i = 0; i < log->nm; i++)
    if (log->m[i].has_thread)
      {
        hhc_lock (&log->m[i].mu);
        log->m[i].stop = true;
        pthread_cond_broadcast (&log->m[i].cv);
        hhc_unlock (&log->m[i].mu);
        pthread_join (log->m[i].thread, NULL);
        log->m[i].has_thread = false;
      }
}

/* Owe a void to failed mirror m (log->lock held). */
static void
owe_void_locked (struct hhc_log *log, struct mirror *m)
{
  if (!m->failed || m->want_void || m->no_void)
    return;
  m->want_void = true;
  __atomic_add_fetch (&log->unvoided, 1, __ATOMIC_ACQ_REL);
  log->next_void_ns = log->next_dial_ns = 0; /* try at once */
  log->dial_tries = 0;
  pthread_cond_broadcast (&log->writer_cv);
}

/* Healthy mirrors that hold the log for a restart (log->lock held): not
 * one joining, whose superblock on disk is still void.
 */
static unsigned
complete_locked (const struct hhc_log *log)
{
  unsigned n = 0;

  for (unsigned i = 0; i < log->nm; i++)
    n += !log->m[i].failed && !log->m[i].joining;
  return n;
}

/* Owe a void to every failed mirror not owed one yet that a healthy,
 * complete mirror has outlived: made something durable in an I/O begun
 * after the failure (dur_gen >= fail_gen; log->lock held).  Called where
 * a mirror has just made something durable (mirrors_io_locked, a
 * pipelined barrier, release_sb_hold), not where a mirror fails: when
 * two fail at once (both NBD connections drop, the log stops) their
 * failures are seen one after the other, and the first must not be
 * voided for a mirror that is failing too (found by review: it voided a
 * good disk and kept the last one alone), nor for a success that
 * began before it (a pipelined barrier another mirror had finished:
 * the fourth review).
 */
void
owe_voids_locked (struct hhc_log *log)
{
  uint64_t proof = 0; /* the latest failure a complete mirror outlived */

  if (log->healthy == log->nm || complete_locked (log) == 0)
    return;
  for (unsigned i = 0; i < log->nm; i++)
    if (!log->m[i].failed && !log->m[i].joining)
      proof = HHC_MAX (proof, log->m[i].dur_gen);
  for (unsigned i = 0; i < log->nm; i++)
    if (log->m[i].fail_gen <= proof)
      owe_void_locked (log, &log->m[i]);
}

/* Is a failed mirror waiting for proof that a complete one outlived it
 * (not owed its void yet, not one never to be voided) (log->lock held)?
 */
bool
unproven_locked (const struct hhc_log *log)
{
  if (log->healthy == log->nm || complete_locked (log) == 0)
    return false;
  for (unsigned i = 0; i < log->nm; i++)
    if (log->m[i].failed && !log->m[i].want_void && !log->m[i].no_void)
      return true;
  return false;
}

/* Mark m failed (log->lock held): it is written no more.  While other
 * mirrors stay healthy and complete (not joining) they hold everything
 * it did, and more: it is owed a void once one of them has made
 * something durable since (owe_voids_locked).  The last mirror's log is the only copy that
 * survives the loss of the SSD of what FLUSHes covered: it is owed a
 * void only once a FLUSH that fell back has written every dirty block
 * back (log_void_stale).  can_void false (a log that stops being
 * written at log_stop, its last segment with no room): never voided,
 * it is what a crash at that moment leaves, which a replay handles.
 */
void
mark_failed_locked (struct hhc_log *log, struct mirror *m, bool can_void)
{
  if (m->failed)
    return;
  m->failed = true;
  m->fail_gen = log->fail_gen + 1;
  __atomic_store_n (&log->fail_gen, m->fail_gen, __ATOMIC_RELEASE);
  m->no_void = !can_void;
  log->healthy--;
  /* Pipelined barriers: a lane waiting for its writes gives up, and
   * the frontier is over the mirrors left (pipe_update).
   */
  pthread_cond_broadcast (&log->pipe_cv);
  pthread_cond_broadcast (&log->writer_cv);
}

/* The log stops here (write_buffer: a segment that could not be
 * written; a revoke record that could not be kept): later barriers
 * must not count what is missing, so every mirror is failed, and
 * FLUSHes fall back to writing every dirty block back (which then
 * voids the last mirror: log_void_stale).
 */
void
log_fail_locked (struct hhc_log *log, const char *what, int err)
{
  if (log->healthy == 0)
    return;
  hhc_msg (log->msgfn, HHC_MSG_ERROR, "log: %s: %s; the log is no longer used",
           what, strerror (err));
  for (unsigned i = 0; i < log->nm; i++)
    mark_failed_locked (log, &log->m[i], !log->stop);
  pthread_cond_broadcast (&log->done_cv);
  pthread_cond_broadcast (&log->buf_cv);
  pthread_cond_broadcast (&log->writer_cv);
}

/* A write or sync to m failed with err (no lock held). */
void
mirror_failed (struct hhc_log *log, struct mirror *m, int err)
{
  unsigned left;

  hhc_lock (&log->lock);
  mark_failed_locked (log, m, true);
  left = log->healthy;
  pthread_cond_broadcast (&log->done_cv);
  pthread_cond_broadcast (&log->buf_cv);
  hhc_unlock (&log->lock);
  hhc_msg (log->msgfn, HHC_MSG_ERROR,
           "log mirror %s failed: %s; it is no longer written (%u "
           "healthy mirror%s left)",
           m->dev->name, strerror (err), left, left == 1 ? "" : "s");
}

/* Start io on m: by its worker when n (mirrors written) > 1, else here
 * (*res: the result).
 */
static void
mirror_start (struct mirror *m, const struct io *io, unsigned n, int *res)
{
  if (n == 1 || !m->has_thread)
    {
      *res = do_io (m, io);
      return;
    }
  hhc_lock (&m->mu);
  m->done = false;
  m->job = io;
  pthread_cond_broadcast (&m->cv);
  hhc_unlock (&m->mu);
}

/* Wait for what mirror_start gave m's worker, if anything. */
static int
mirror_wait (struct mirror *m, unsigned n, int res)
{
  if (n == 1 || !m->has_thread)
    return res;
  hhc_lock (&m->mu);
  while (!m->done)
    pthread_cond_wait (&m->cv, &m->mu);
  res = m->result;
  hhc_unlock (&m->mu);
  return res;
}

/* Run io on every healthy mirror at once; a mirror that fails is marked
 * failed.  Returns 0 if at least one mirror succeeded.  Called with
 * io_lock held: one at a time (see "Locks" at the top of this file).
 */
int
mirrors_io_locked (struct hhc_log *log, const struct io *io)
{
  bool use[LOG_MAX_MIRRORS];
  int res[LOG_MAX_MIRRORS];
  unsigned ok = 0, n = 0;

  hhc_lock (&log->lock);
  for (unsigned i = 0; i < log->nm; i++)
    n += use[i] = !log->m[i].failed && !(io->sb && log->m[i].sb_hold);
  uint64_t g0 = log->fail_gen; /* failures before this io began */
  hhc_unlock (&log->lock);
  for (unsigned i = 0; i < log->nm; i++)
    if (use[i])
      mirror_start (&log->m[i], io, n, &res[i]);
  for (unsigned i = 0; i < log->nm; i++)
    {
      if (!use[i])
        continue;
      res[i] = mirror_wait (&log->m[i], n, res[i]);
      if (res[i] == 0)
        ok++;
      else
        mirror_failed (log, &log->m[i], res[i]);
    }
  bool synced = false;
  for (unsigned i = 0; i < log->nm; i++)
    synced |= use[i] && res[i] == 0 && !log->m[i].last_fua;
  hhc_lock (&log->lock);
  for (unsigned i = 0; io->sync && i < log->nm; i++)
    if (use[i] && res[i] == 0)
      log->m[i].dur_gen = HHC_MAX (log->m[i].dur_gen, g0);
  if (io->sync && ok)
    owe_voids_locked (log);
  /* A superblock no mirror took, while the only healthy ones are void
   * mirrors joining (sb_hold): they get this run's superblock once the
   * start-up re-log is on them (release_sb_hold), and the mirror that
   * failed keeps its log until then (it is not owed a void while they
   * join): the start goes on with them (found by review: it failed).
   */
  bool held = false;
  for (unsigned i = 0; io->sb && i < log->nm; i++)
    held |= !log->m[i].failed && log->m[i].sb_hold;
  if (io->sync && ok)
    {
      bool fua_barrier = !synced && !io->sb && !io->sync_only;
      log->st.syncs += !fua_barrier;
      log->st.fua_barriers += fua_barrier;
    }
  hhc_unlock (&log->lock);
  return ok || held ? 0 : EIO;
}

int
mirrors_io (struct hhc_log *log, const struct io *io)
{
  HHC_SCOPED_LOCK (&log->io_lock);

  return mirrors_io_locked (log, io);
}

/* ---- voiding a log that fell out of use ----
 *
 * A mirror that failed keeps, on disk, the chain it had: entries that
 * were live then, older than what the cache and the backend get later
 * (FLUSHes fall back to write-back once no mirror is left, and revokes
 * no longer reach it).  Replayed after the loss of the SSD it would
 * write that old data over newer data.  So a failed mirror is voided:
 * both superblock copies become a void superblock (magic LOG_VOID_MAGIC,
 * the log and cache UUIDs, crc32c: log-format.h), and a void mirror
 * reads as blank.  When it is owed one: mark_failed_locked,
 * log_void_stale.  Then the writer tries when idle, every
 * VOID_RETRY_NS, as do every FLUSH that falls back and log_stop; a dead
 * NBD connection is dialled again only as dial_due_locked allows.  A
 * failed mirror never counts again in this run.
 */

/* Dialling a dead NBD mirror again is bounded (a TCP connect to a host
 * that is gone waits minutes): the writer or a FLUSH waits for it.
 */
#define VOID_DIAL_MS 1000

static void
quiet_msg (enum hhc_msg_level level, const char *msg)
{
}

/* The void mark first, synced, then both copies: a crash that tears
 * the copies leaves the mark to say what they were becoming.
 */
int
void_dev (struct hhc_dev *dev, const uint8_t log_uuid[16],
          const uint8_t cache_uuid[16], uint64_t generation, unsigned mirrors,
          uint64_t retire_epoch)
{
  HHC_CLEANUP_FREE unsigned char *sb = hhc_alloc_aligned (2 * LOG_SB_SIZE);
  int r;

  if (sb == NULL)
    return ENOMEM;
  log_sb_encode_void (log_uuid, cache_uuid, generation, sb);
  log_sb_void_mirrors (sb, mirrors);
  log_sb_void_epoch (sb, retire_epoch);
  memcpy (sb + LOG_SB_SIZE, sb, LOG_SB_SIZE);
  if ((r = dev_pwrite (dev, sb, LOG_SB_SIZE, LOG_VOID_OFF)) != 0
      || (r = dev_sync (dev)) != 0
      || (r = dev_pwrite (dev, sb, 2 * LOG_SB_SIZE, 0)) != 0)
    return r;
  return dev_sync (dev);
}

/* May a dead NBD mirror be dialled again now (lock held)?  If so, the
 * next dial waits 1, 2, 4, then 8 s: against a host that is gone each
 * costs VOID_DIAL_MS of a FLUSH's or the writer's time.
 */
static bool
dial_due_locked (struct hhc_log *log)
{
  uint64_t now = hhc_now_ns ();

  if (now < log->next_dial_ns)
    return false;
  log->next_dial_ns
      = now + ((uint64_t)VOID_RETRY_NS << HHC_MIN (log->dial_tries, 3u));
  log->dial_tries++;
  return true;
}

/* Void m, dialling a dead NBD mirror again if dial.  A dead NBD
 * connection fails every request for ever: dial the server again (it
 * may be back).  A file device is not opened twice (flock).
 */
static int
void_mirror (struct mirror *m, const uint8_t luuid[16], const uint8_t cuuid[16],
             uint64_t gen, unsigned nm, bool dial)
{
  int r = void_dev (m->dev, luuid, cuuid, gen, nm, 0);
  struct hhc_dev *d;

  if (r && dial && m->path && dev_is_nbd_uri (m->path)
      && dev_open_nbd_bounded (m->path, VOID_DIAL_MS, quiet_msg, &d) == 0)
    {
      r = void_dev (d, luuid, cuuid, gen, nm, 0);
      dev_close (d);
    }
  return r;
}

/* Record (and log) how voiding m went. */
static void
void_done (struct hhc_log *log, struct mirror *m, int r)
{
  hhc_lock (&log->lock);
  bool warn = r && !m->void_warned;
  if (r == 0)
    {
      m->voided = true;
      __atomic_sub_fetch (&log->unvoided, 1, __ATOMIC_ACQ_REL);
    }
  else
    m->void_warned = true;
  hhc_unlock (&log->lock);
  if (r == 0)
    hhc_msg (log->msgfn, HHC_MSG_WARNING,
             "log mirror %s: voided (it failed earlier; nothing on it "
             "can be replayed now)",
             m->dev->name);
  else if (warn)
    hhc_msg (log->msgfn, HHC_MSG_ERROR,
             "log mirror %s: cannot void it yet (%s): retrying; until "
             "then it holds a stale log, which a restart after the loss "
             "of the cache would replay",
             m->dev->name, strerror (r));
}

/* Void every failed mirror that is owed it, dialling a dead NBD one
 * again if dial (void_lock held; not log->lock nor io_lock: a failed
 * mirror's device is used by no one else, but for a write begun before
 * it failed, which is harmless: see "Locks" at the top of this file).
 */
static void
void_failed (struct hhc_log *log, bool dial)
{
  uint8_t luuid[16], cuuid[16];

  for (unsigned i = 0; i < log->nm; i++)
    {
      struct mirror *m = &log->m[i];
      hhc_lock (&log->lock);
      bool todo = m->want_void && !m->voided;
      memcpy (luuid, log->uuid, 16);
      memcpy (cuuid, log->cache_uuid, 16);
      /* No superblock m got is newer: one written to it was numbered
       * before m failed, and the failure was seen under this lock.
       */
      uint64_t gen = __atomic_load_n (&log->sb_gen, __ATOMIC_ACQUIRE);
      hhc_unlock (&log->lock);
      if (todo)
        void_done (log, m, void_mirror (m, luuid, cuuid, gen, log->nm, dial));
    }
}

void
log_revoid (struct hhc_log *log, uint64_t gen)
{
  HHC_SCOPED_LOCK (&log->void_lock);
  uint8_t luuid[16], cuuid[16];

  for (unsigned i = 0; i < log->nm; i++)
    {
      struct mirror *m = &log->m[i];
      hhc_lock (&log->lock);
      bool again = m->voided;
      memcpy (luuid, log->uuid, 16);
      memcpy (cuuid, log->cache_uuid, 16);
      hhc_unlock (&log->lock);
      if (again) /* best effort: a refusal at worst, and one start heals */
        (void)void_mirror (m, luuid, cuuid, gen, log->nm, false);
    }
}

unsigned
log_void_stale (struct hhc_log *log)
{
  hhc_lock (&log->lock);
  for (unsigned i = 0; i < log->nm; i++)
    owe_void_locked (log, &log->m[i]);
  hhc_unlock (&log->lock);
  return log_void_failed (log);
}

unsigned
log_void_failed (struct hhc_log *log)
{
  if (__atomic_load_n (&log->unvoided, __ATOMIC_ACQUIRE) == 0)
    return 0;
  hhc_lock (&log->lock);
  bool dial = dial_due_locked (log);
  hhc_unlock (&log->lock);
  HHC_SCOPED_LOCK (&log->void_lock);
  void_failed (log, dial);
  return __atomic_load_n (&log->unvoided, __ATOMIC_ACQUIRE);
}
