/* tests/powercut: a disk whose unflushed writes a power cut may lose.
 *
 * nbdkit-powercut-plugin serves IMAGE and appends every write that is
 * not yet flushed to JOURNAL: a record header, the bytes the write
 * replaced and the bytes it wrote.  A FLUSH empties the journal (all
 * completed writes are now durable); a FUA write is marked durable.
 * powercut-apply then plays the power cut on the image of a server
 * that was killed: roll back every journalled write (newest first), and
 * replay a random subset of them in their order, some torn at a 4 KiB
 * boundary; durable ones are always replayed whole.  The result is a
 * state a disk with a volatile write cache may be left in.
 */
#ifndef HHC_POWERCUT_H
#define HHC_POWERCUT_H

#include <stdint.h>

#define POWERCUT_MAGIC 0x3143455243545550ULL /* "PUTCREC1" */
#define POWERCUT_DURABLE 1

struct powercut_rec {
  uint64_t magic;
  uint64_t offset;
  uint32_t length; /* followed by length old bytes, then length new */
  uint32_t flags;
};

#endif /* HHC_POWERCUT_H */
