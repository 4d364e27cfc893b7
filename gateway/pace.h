/* The flusher's pace (docs/design.md §6.2): when to write back, and
 * whether at full speed, from the dirty share of the cache and of the
 * HDD log.  All but pace_of are pure functions of their inputs.
 *
 * The log's dirty share is the room the dirty blocks take in the log
 * (ndirty times what one logged block costs there, its data plus its
 * share of segment headers) over the log's usable region (the region
 * less the tail room kept for segment buffers and reclaim).  The
 * effective share is the larger of the cache's and the log's, and the
 * dirty-low and dirty-high watermarks apply to it: with a log smaller
 * than the cache's dirty part, write-back starts early enough that
 * live entries do not fill the log while FLUSHes wait for room.
 *
 * pace_of gathers the inputs from a volume: it takes the log's lock
 * (briefly, twice), so its caller may hold the flusher lock but not
 * the log's (flusher lock -> log lock, vol.h).
 */
#ifndef HHC_PACE_H
#define HHC_PACE_H

#include <stdbool.h>
#include <stdint.h>

struct hhc_conf;
struct hhc_volume;

/* What one round of the flusher sees. */
struct pace_in {
  uint64_t ndirty;                /* dirty slots */
  uint64_t cache_low, cache_high; /* the cache's watermarks (slots) */
  unsigned low, high;             /* dirty-low, dirty-high (percent) */
  uint64_t log_blocks;            /* dirty blocks the log holds (0: no log) */
  double log_used;                /* log_usage: 0..1, dead entries too */
  bool draining, idle, reclaim;
};

/* What the round does. */
struct pace {
  bool go;   /* write back a batch */
  bool full; /* and the next one at once */
};

/* The log's room for dirty blocks: the usable region (region less
 * reserve) over the cost of one logged block, which is bytes / blocks
 * of what the log wrote so far and at least bs (no log written yet: bs).
 * 0 if no room at all.
 */
uint64_t pace_log_blocks (uint64_t region, uint64_t reserve, uint64_t bytes,
                          uint64_t blocks, uint32_t bs);
/* The watermark in dirty slots for percent: the cache's (cache_wm,
 * its slots times percent) or the log's (log_blocks times percent),
 * whichever is lower: the larger share of the two reaches it first.
 */
uint64_t pace_watermark (uint64_t cache_wm, unsigned percent,
                         uint64_t log_blocks);
/* The decision for one round. */
struct pace pace_decide (const struct pace_in *in);
/* The decision for the flusher of vol now (see above for the lock). */
struct pace pace_of (struct hhc_volume *vol, bool draining);

#endif /* HHC_PACE_H */
