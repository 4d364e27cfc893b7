/* The flusher's pace: see pace.h.
 *
 *   share s = max (ndirty / nslots, ndirty / log_blocks): a watermark
 *   of P percent is min (nslots * P, log_blocks * P) / 100 slots
 *
 *   | condition                                         | round      |
 *   |---------------------------------------------------|------------|
 *   | no dirty block, or s < low, log < 1/2 used,       | none       |
 *   |   not idle, not draining                          |            |
 *   | s >= low, or log >= 1/2 used                      | a batch    |
 *   | s >= high, log >= 3/4 used, idle, draining,       | back to    |
 *   |   free pool low                                   | back       |
 *
 * "Used" counts dead entries too (they leave only as the head moves,
 * which write-back of the oldest blocks helps); the share counts what
 * only write-back can free.
 */
#include <config.h>

#include "common.h"
#include "pace.h"
#include "reclaim.h"
#include "vol.h"

uint64_t
pace_log_blocks (uint64_t region, uint64_t reserve, uint64_t bytes,
                 uint64_t blocks, uint32_t bs)
{
  uint64_t cost = bs;

  if (blocks > 0 && bytes / blocks > cost)
    cost = bytes / blocks;
  if (region <= reserve || cost == 0)
    return 0;
  return (region - reserve) / cost;
}

uint64_t
pace_watermark (uint64_t cache_wm, unsigned percent, uint64_t log_blocks)
{
  if (log_blocks == 0)
    return cache_wm;
  return HHC_MIN (cache_wm, log_blocks * percent / 100);
}

struct pace
pace_decide (const struct pace_in *in)
{
  uint64_t d = in->ndirty;
  bool push = in->draining || in->idle;

  return (struct pace){
    .go = d > 0
          && (d >= pace_watermark (in->cache_low, in->low, in->log_blocks)
              || push || in->log_used >= 0.5),
    .full = d >= pace_watermark (in->cache_high, in->high, in->log_blocks)
            || push || in->reclaim || in->log_used >= 0.75,
  };
}

/* The log's room for dirty blocks (0: no log, or it is not healthy). */
static uint64_t
log_room_blocks (struct hhc_volume *vol)
{
  struct log_stats st;

  if (vol->log == NULL || !log_healthy (vol->log))
    return 0;
  log_get_stats (vol->log, &st);
  return pace_log_blocks (st.region_size, st.reserve, st.bytes, st.blocks,
                          vol->bs);
}

/* No client request for idle-ms, counted from the check that last saw
 * one (vol.h: io_seen; the checks come at least every 100 ms while the
 * backend answers, so the wait is at most that longer).
 */
static bool
idle (struct hhc_volume *vol)
{
  uint64_t now = hhc_now_ns ();

  if (__atomic_exchange_n (&vol->io_seen, false, __ATOMIC_RELAXED))
    {
      __atomic_store_n (&vol->last_io_ns, now, __ATOMIC_RELAXED);
      return false;
    }
  return vol->conf.idle_ms > 0
         && now - __atomic_load_n (&vol->last_io_ns, __ATOMIC_RELAXED)
                > (uint64_t)vol->conf.idle_ms * 1000000;
}

struct pace
pace_of (struct hhc_volume *vol, bool draining)
{
  /* The log filling up calls for write-back too (passive reclaim:
   * the dirty list is oldest first, so the log head moves).
   */
  struct pace_in in = {
    .ndirty = __atomic_load_n (&vol->ndirty, __ATOMIC_ACQUIRE),
    .cache_low = vol->dirty_low,
    .cache_high = vol->dirty_high,
    .low = vol->conf.dirty_low,
    .high = vol->conf.dirty_high,
    .log_blocks = log_room_blocks (vol),
    .log_used = vol->log ? log_usage (vol->log) : 0,
    .draining = draining,
    .idle = idle (vol),
    .reclaim = vol_needs_reclaim (vol),
  };

  return pace_decide (&in);
}
