/* Backend flushes: what a failed one may have dropped, and the order a
 * FLUSH needs (docs/core.md, "Durability: the commit").
 *
 * A backend may forget what a failed flush did not write and report
 * the next flush as a success (Linux's page cache does; a reset iSCSI
 * target too).  Blocks written back stay dirty until a flush after
 * them succeeds, so they are sent again; passdowns (trims, zeros, pt
 * writes) and wt writes are sent once.  So a failed flush that may
 * have dropped one of those sets be_failed, and every later FLUSH
 * fails until the volume is reopened.
 *
 * Which failures may have: one after a passdown ended that no
 * successful flush covered yet (note_failure: be_written against
 * be_flushed), and one while a passdown ran that then ends owed: it
 * may have reached the backend before the flush (bflush_owed: the
 * failure count at its start against the count at its end).  A
 * passdown whose backend write failed and whose data went into the
 * cache (write_direct's fallback) is not owed: a flush that failed
 * meanwhile dropped nothing a FLUSH needs from the backend.
 *
 * Every backend flush, whoever makes it (a client's FLUSH, the
 * flusher, a connection's context at its close, the close), takes a
 * ticket.  A FLUSH whose own backend flush succeeded still waits for
 * every flush that began before its own ended (bflush_settle): one of
 * them may fail having dropped a passdown that this FLUSH covers, and
 * its failure is counted only when it returns.  Write-back waits the
 * same way, and cleans nothing if any backend flush failed since it
 * began writing (bf_failures): that failure may have dropped its
 * writes, which its own flush then found no more of.
 *
 *   bf_next       tickets given out
 *   bf_done_below every ticket below this one has ended
 *   bf_done[t % BF_WINDOW]   ticket t ended (t >= bf_done_below)
 *
 * Lock: bf_lock protects the three; be_failed, be_written, be_flushed
 * and bf_failures are atomics.  No other lock is held while waiting;
 * bflush_owed is called under pd.lock and takes none.
 */
#include <config.h>

#include "bflush.h"
#include "common.h"
#include "vol.h"

uint64_t
bflush_begin (struct hhc_volume *vol, uint64_t *flushed)
{
  HHC_SCOPED_LOCK (&vol->bf_lock);

  while (vol->bf_next - vol->bf_done_below >= BF_WINDOW)
    pthread_cond_wait (&vol->bf_cond, &vol->bf_lock);
  *flushed = load64 (&vol->be_flushed);
  return vol->bf_next++;
}

/* Make every later FLUSH fail (once: the first errno stays). */
static void
set_failed (struct hhc_volume *vol, int err)
{
  int none = 0;

  if (__atomic_compare_exchange_n (&vol->be_failed, &none, err ? err : EIO,
                                   false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR,
             "%s: a backend flush failed (%s) while trims, zeros or "
             "writes that went straight to the backend were not yet "
             "durable: the backend may have dropped them, so every FLUSH "
             "fails from now on, until the volume is reopened",
             vol->dev->name, strerror (err ? err : EIO));
}

/* A flush that began when be_flushed was flushed failed with err (and
 * bf_failures counts it): set be_failed if it may have dropped a
 * passdown that ended or a wt/pt write.  A passdown still running is
 * judged at its end (bflush_owed).
 */
static void
note_failure (struct hhc_volume *vol, int err, uint64_t flushed)
{
  uint64_t w = __atomic_load_n (&vol->be_written, __ATOMIC_SEQ_CST);

  /* In pt and wt every client write went to the backend.  Without
   * multi-conn be_flushed proves nothing about other connections.
   */
  if (hhc_mode_is_wb (vol->conf.mode)
      && (vol->info.multi_conn ? w <= flushed : w == 0))
    return;
  set_failed (vol, err);
}

void
bflush_owed (struct hhc_volume *vol, uint64_t failures)
{
  /* Both sides sequentially consistent: of this increment and a
   * failing flush's (bflush_end), whichever comes second sees the
   * other, so a failure while the passdown ran is never missed.
   */
  __atomic_add_fetch (&vol->be_written, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n (&vol->bf_failures, __ATOMIC_SEQ_CST) != failures)
    set_failed (vol, EIO);
}

void
bflush_end (struct hhc_volume *vol, uint64_t ticket, int err, uint64_t flushed)
{
  if (err)
    {
      __atomic_add_fetch (&vol->bf_failures, 1, __ATOMIC_SEQ_CST);
      note_failure (vol, err, flushed);
    }
  HHC_SCOPED_LOCK (&vol->bf_lock);
  vol->bf_done[ticket % BF_WINDOW] = true;
  while (vol->bf_done_below < vol->bf_next
         && vol->bf_done[vol->bf_done_below % BF_WINDOW])
    vol->bf_done[vol->bf_done_below++ % BF_WINDOW] = false;
  pthread_cond_broadcast (&vol->bf_cond);
}

void
bflush_wait (struct hhc_volume *vol)
{
  HHC_SCOPED_LOCK (&vol->bf_lock);
  uint64_t upto = vol->bf_next;

  while (vol->bf_done_below < upto)
    pthread_cond_wait (&vol->bf_cond, &vol->bf_lock);
}

int
bflush_settle (struct hhc_volume *vol)
{
  bflush_wait (vol);
  return __atomic_load_n (&vol->be_failed, __ATOMIC_ACQUIRE) ? EIO : 0;
}

uint64_t
bflush_failures (struct hhc_volume *vol)
{
  return __atomic_load_n (&vol->bf_failures, __ATOMIC_ACQUIRE);
}

void
bflush_done (struct hhc_volume *vol, uint64_t w)
{
  uint64_t f = load64 (&vol->be_flushed);

  while (f < w
         && !__atomic_compare_exchange_n (&vol->be_flushed, &f, w, false,
                                          __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    ;
}

int
bflush_run (struct hhc_volume *vol, void *bctx)
{
  uint64_t flushed, t = bflush_begin (vol, &flushed);
  int r = vol->ops->flush (bctx);

  bflush_end (vol, t, r, flushed);
  return r;
}

uint64_t
hhc_backend_flush_begin (struct hhc_volume *vol)
{
  uint64_t flushed;

  return bflush_begin (vol, &flushed);
}

void
hhc_backend_flush_end (struct hhc_volume *vol, uint64_t ticket, int err)
{
  /* Flushed only when something was owed (hhc_backend_unflushed): a
   * failure may always have dropped it.
   */
  bflush_end (vol, ticket, err, 0);
}
