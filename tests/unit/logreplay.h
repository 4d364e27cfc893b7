/* The fixture of the replay tests (test-log-replay,
 * test-log-replay-torn, test-log-replay-error): the segments of a log
 * that never wrapped, and an environment whose backend only the replay
 * writes.
 */
#ifndef HHC_TEST_LOGREPLAY_H
#define HHC_TEST_LOGREPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "log-helpers.h"

#define OR_BLOCKS 512

struct seg_desc {
  uint64_t off; /* on the device */
  uint64_t seq;
  uint32_t flags, nblocks, hdr_len;
  uint64_t len;
};

/* Follow the segment chain of a log that never wrapped. */
size_t parse_segments (struct hhc_dev *d, struct seg_desc *out, size_t max);

/* An environment that writes nothing back: only the replay reaches
 * the backend.
 */
void quiet_env (struct env *e, uint64_t nblocks, uint32_t nslots, uint64_t log);
/* Close the volume, let writes reach the backend again (its write log
 * cleared) and lose the SSD.
 */
void lose_ssd (struct env *e);
/* Write version v of block lba and note it in expect[lba]. */
void write_v (struct env *e, uint64_t *expect, uint64_t lba, uint64_t v);

#endif /* HHC_TEST_LOGREPLAY_H */
