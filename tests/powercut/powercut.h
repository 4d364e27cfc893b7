/* tests/powercut: a disk whose unflushed writes a power cut may lose.
 *
 * nbdkit-powercut-plugin serves IMAGE and appends every write that is
 * not yet flushed to JOURNAL: a record header, the bytes the write
 * replaced and the bytes it wrote.  A FLUSH appends a marker, then
 * empties the journal (all completed writes are now durable; a kill
 * between the two leaves them durable by the marker); a FUA write is
 * marked durable.
 * powercut-apply then plays the power cut on the image of a server
 * that was killed: roll back every journalled write (newest first), and
 * replay a random subset of them in their order, some torn at a 4 KiB
 * boundary; durable ones are always replayed whole.  The result is a
 * state a disk with a volatile write cache may be left in.
 *
 * An HDD's bytes that torn writes left unreadable (bad=, BAD-FILE) are
 * up to PC_BAD_MAX ranges.  A write makes what it covers readable for
 * reads at once, and for good once it is durable (a FLUSH, a FUA
 * write, a clean stop, or powercut-apply keeping it): a cut that drops
 * it leaves them unreadable again.
 */
#ifndef HHC_POWERCUT_H
#define HHC_POWERCUT_H

#include <stdbool.h>
#include <stdint.h>

#define POWERCUT_MAGIC 0x3143455243545550ULL /* "PUTCREC1" */
#define POWERCUT_DURABLE 1
#define POWERCUT_FLUSH 2 /* a flush began: no bytes follow */

struct powercut_rec {
  uint64_t magic;
  uint64_t offset;
  uint32_t length; /* followed by length old bytes, then length new */
  uint32_t flags;
};

#define PC_BAD_MAX 16
struct pc_bad {
  unsigned n;
  uint64_t off[PC_BAD_MAX];
  uint64_t len[PC_BAD_MAX];
};

/* badranges.c.  load: a missing file holds none; -1 with errno. */
int pc_bad_load (const char *file, struct pc_bad *b);
int pc_bad_save (const char *file, const struct pc_bad *b);
bool pc_bad_hits (const struct pc_bad *b, uint64_t off, uint64_t len);
void pc_bad_heal (struct pc_bad *b, uint64_t off, uint64_t len);
int pc_bad_add (struct pc_bad *b, uint64_t off, uint64_t len);

#endif /* HHC_POWERCUT_H */
