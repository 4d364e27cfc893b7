/* The passdown tracker: see passdown.h.
 *
 * A running passdown sits in run[] from passdown_begin to passdown_end;
 * one that did not fit counts in overflow (then every block is "under
 * a running passdown" until it ends).  At its end its sequence number
 * goes to done[] for every 64-block region it covered.  A fill or a
 * write-back takes passdown_seq before it reads, and asks
 * passdown_since when it is about to mark a block clean.
 *
 *   seq     next, copied for the lock-free fast paths
 *   active  passdowns between begin and end
 *   flushed the highest seq a completed backend flush covers
 *
 * A passdown's ticket carries the failed-flush count at its start;
 * an owed one compares it at its end (bflush_owed, bflush.c).
 *
 * Lock: pd.lock (passdown.h); the fast paths read only atomics.
 */
#include <config.h>

#include "bflush.h"
#include "common.h"
#include "passdown.h"
#include "vol.h"

uint64_t
passdown_seq (struct hhc_volume *vol)
{
  return load64 (&vol->pd.seq);
}

/* Record a passdown of blocks [first, last) in run (in overflow if it
 * does not fit: then every check says yes until it ends), and the
 * count of failed backend flushes so far, before it reaches the
 * backend: a flush that failed before is no threat to it.
 */
struct passdown_ticket
passdown_begin (struct hhc_volume *vol, uint64_t first, uint64_t last)
{
  uint64_t failures = bflush_failures (vol);
  HHC_SCOPED_LOCK (&vol->pd.lock);
  uint64_t id = ++vol->pd.next;
  unsigned i;

  for (i = 0; i < PD_RUNNING; i++)
    if (vol->pd.run[i].seq == 0)
      {
        vol->pd.run[i] = (struct passdown_run){ first, last, id };
        break;
      }
  if (i == PD_RUNNING)
    vol->pd.overflow++;
  __atomic_fetch_add (&vol->pd.active, 1, __ATOMIC_ACQ_REL);
  __atomic_store_n (&vol->pd.seq, id, __ATOMIC_RELEASE);
  return (struct passdown_ticket){ i, failures };
}

void
passdown_end (struct hhc_volume *vol, struct passdown_ticket t, uint64_t first,
              uint64_t last, bool owed)
{
  HHC_SCOPED_LOCK (&vol->pd.lock);
  uint64_t id = ++vol->pd.next;

  if (owed)
    bflush_owed (vol, t.failures);
  if (t.i < PD_RUNNING)
    vol->pd.run[t.i].seq = 0;
  else
    vol->pd.overflow--;
  /* Remember the end per region (every region once is enough for a
   * huge range: each hash bucket gets id).
   */
  uint64_t r0 = first >> PD_REGION_SHIFT;
  uint64_t r1 = (last - 1) >> PD_REGION_SHIFT;
  if (r1 - r0 >= PD_HASH)
    for (unsigned h = 0; h < PD_HASH; h++)
      vol->pd.done[h] = id;
  else
    for (uint64_t rg = r0; rg <= r1; rg++)
      vol->pd.done[hhc_hash64 (rg) % PD_HASH] = id;
  __atomic_store_n (&vol->pd.seq, id, __ATOMIC_RELEASE);
  __atomic_fetch_sub (&vol->pd.active, 1, __ATOMIC_ACQ_REL);
  vol_wake_waiters (vol); /* writers waiting in wait_passdowns */
}

/* pd.lock held. */
static bool
running_on (struct hhc_volume *vol, uint64_t lba)
{
  if (vol->pd.overflow)
    return true;
  for (unsigned i = 0; i < PD_RUNNING; i++)
    if (vol->pd.run[i].seq && vol->pd.run[i].first <= lba
        && lba < vol->pd.run[i].last)
      return true;
  return false;
}

void
passdown_flushed (struct hhc_volume *vol, uint64_t seq)
{
  uint64_t f = load64 (&vol->pd.flushed);

  while (f < seq
         && !__atomic_compare_exchange_n (&vol->pd.flushed, &f, seq, false,
                                          __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    ;
}

/* Did a passdown on lba's region end after the last backend flush?
 * Then the backend may still lose it: a fill must not cache the block
 * (its clean entry would not be the backend's durable data).
 */
bool
passdown_unflushed (struct hhc_volume *vol, uint64_t lba)
{
  uint64_t f = load64 (&vol->pd.flushed);

  if (load64 (&vol->pd.seq) <= f)
    return false; /* fast path: nothing since the last flush */
  HHC_SCOPED_LOCK (&vol->pd.lock);
  return vol->pd.done[hhc_hash64 (lba >> PD_REGION_SHIFT) % PD_HASH] > f;
}

bool
passdown_running (struct hhc_volume *vol, uint64_t lba)
{
  if (load64 (&vol->pd.active) == 0)
    return false;
  HHC_SCOPED_LOCK (&vol->pd.lock);
  return running_on (vol, lba);
}

bool
passdown_since (struct hhc_volume *vol, uint64_t seq, uint64_t lba)
{
  if (load64 (&vol->pd.active) == 0 && load64 (&vol->pd.seq) == seq)
    return false; /* fast path: nothing happened */

  HHC_SCOPED_LOCK (&vol->pd.lock);
  return running_on (vol, lba)
         || vol->pd.done[hhc_hash64 (lba >> PD_REGION_SHIFT) % PD_HASH] > seq;
}
