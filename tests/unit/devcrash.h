/* Crash device (unit tests only: linked into them, never into the
 * core): a device that keeps unsynced writes in memory.
 *
 * Keeps a durable image and a list of writes not yet synced (a FUA
 * write is durable at once).  Reads
 * see every write.  crashdev_crash() "cuts the power": each unsynced
 * write is kept or dropped (keep(i) decides for the i-th pending
 * write, or a seeded coin when keep is NULL), the device then drops
 * every later write and sync with EIO until crashdev_restart().
 */
#ifndef HHC_DEVCRASH_H
#define HHC_DEVCRASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dev.h"

/* A crash device of size bytes, all zeros and durable. */
int crashdev_create (uint64_t size, struct hhc_dev **devp);
/* Number of writes not yet synced. */
size_t crashdev_pending (struct hhc_dev *dev);
#define CRASHDEV_PIECE 4096
/* Cut the power (see above). */
void crashdev_crash (struct hhc_dev *dev, unsigned seed,
                     bool (*keep) (size_t i, void *opaque), void *opaque);
/* An HDD: the next crashes tear one write each that they lose (the
 * newest, a quarter of the time an older one: all of it, or half the
 * time a run of its pieces), which then reads as unreadable bytes
 * until a durable write covers them; a write that lands after it at
 * the crash heals what it covers.
 */
void crashdev_set_tearing (struct hhc_dev *dev, bool on);
/* A write that was on its way when the next crash cuts the power (it
 * never completed: the newest write of all, lost, landed in part, or
 * torn).  buf must live until the crash.
 */
void crashdev_set_in_flight (struct hhc_dev *dev, const void *buf, uint64_t off,
                             size_t len);
/* Power back on: reads see the durable image, writes work again. */
void crashdev_restart (struct hhc_dev *dev);
/* The newest unsynced write the last crashdev_crash dropped (in whole
 * or in part): false if it dropped none.
 */
bool crashdev_last_lost (struct hhc_dev *dev, uint64_t *off, size_t *len);
/* The newest CRASHDEV_LOST_MAX of them, oldest first, and what the
 * crash tore (crashdev_set_tearing).
 */
#define CRASHDEV_LOST_MAX 4
struct crashdev_lost {
  unsigned n;
  unsigned partial; /* of the crash's dropped writes, landed in part */
  uint64_t off[CRASHDEV_LOST_MAX];
  size_t len[CRASHDEV_LOST_MAX];
  uint64_t torn_off; /* the torn range (torn_len 0: none) */
  size_t torn_len;
  bool torn_older;     /* of a lost write older than the newest */
  bool torn_in_flight; /* of the write in flight */
};
void crashdev_get_lost (struct hhc_dev *dev, struct crashdev_lost *l);
/* Copy what reads see, unreadable bytes included, into buf (the
 * device's size).
 */
void crashdev_peek (struct hhc_dev *dev, void *buf);
/* Unreadable bytes, as writes torn by power cuts can leave a disk's
 * sectors: reads that touch them fail with EIO; a later write heals
 * what it covers (one in the middle: the smaller rest too) for reads
 * at once, and for good once it is durable (a crash that drops it
 * leaves them unreadable).  Setting ranges sets both (with nothing
 * pending).  Up to CRASHDEV_BAD_MAX ranges a device (one more aborts:
 * a harness limit, never a range that reads again); kept across
 * crashes and restarts.
 */
#define CRASHDEV_BAD_MAX 16
struct crashdev_bad {
  unsigned n;
  uint64_t off[CRASHDEV_BAD_MAX];
  size_t len[CRASHDEV_BAD_MAX];
};
/* Only len bytes from off (0: none). */
void crashdev_set_bad (struct hhc_dev *dev, uint64_t off, size_t len);
/* The newest range (len 0: none). */
void crashdev_get_bad (struct hhc_dev *dev, uint64_t *off, size_t *len);
/* One more range (len 0: nothing). */
void crashdev_add_bad (struct hhc_dev *dev, uint64_t off, size_t len);
void crashdev_get_bads (struct hhc_dev *dev, struct crashdev_bad *b);
void crashdev_set_bads (struct hhc_dev *dev, const struct crashdev_bad *b);
/* Free the device.  Its close() is a no-op, so that it outlives the
 * volumes opened on it: the test frees it with this.
 */
void crashdev_destroy (struct hhc_dev *dev);

#endif /* HHC_DEVCRASH_H */
