/* Between open.c and open-cache.c: the cache device's part of opening
 * a volume.
 */
#ifndef HHC_OPEN_INT_H
#define HHC_OPEN_INT_H

#include <stdint.h>

#include "vol.h"

/* Format, or check and load the superblock of, the cache device;
 * pair it with the log (logpair_open).
 */
int open_cache (struct hhc_volume *vol);
/* cache_load's callback: a used slot (the volume not published yet). */
void found_slot (void *opaque, uint32_t slot, uint64_t lba, enum slot_state st);
/* After the load: drop clean blocks the last run leaves untrusted,
 * make the result durable and mark the cache in use for this run.
 */
int settle_after_load (struct hhc_volume *vol);

#endif /* HHC_OPEN_INT_H */
