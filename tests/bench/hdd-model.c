/* One-head HDD timing model (issue 32), for the benchmarks' log device.
 *
 * nbdkit's delay filter charges every write its delay in parallel with
 * every other write: 16 writes in flight cost one delay, as if the disk
 * had 16 heads.  This model is a single server with a clock:
 *
 *   - one head: requests are served one at a time, in arrival order; a
 *     request starts at max(arrival, free_at) and the head is busy until
 *     its finish (free_at = finish);
 *   - a volatile write cache of cache_bytes: a write is absorbed into it
 *     at no head time, but the cache never holds more than cache_bytes:
 *     a write that would overflow it first writes the excess to the
 *     media at the bandwidth (so a stream of writes without barriers
 *     runs at the disk's bandwidth, never faster);
 *   - a non-sequential access (offset != the byte after the previous
 *     access) costs a seek first;
 *   - a read costs seek (if non-sequential) + its transfer at the
 *     bandwidth; it does not touch the cache;
 *   - a barrier (FLUSH, or a write with FUA after its absorption) costs
 *     the rotation plus the destage of what the cache holds at the
 *     bandwidth, and empties the cache; a FLUSH with an empty cache
 *     costs nothing.
 *
 * The cache is not destaged in the background while the head is idle:
 * the log flushes right after it writes, so that idle time is short, and
 * a destage still waits for the sector to come round (the rotation the
 * barrier pays).  Every charge is in integer ns, so a scripted sequence
 * of arrivals gives exact, repeatable times (tests/test-hdd-model.sh).
 */
#include <config.h>

#include "hdd-model.h"

void
hdd_model_init (struct hdd_model *m, const struct hdd_params *p)
{
  m->p = *p;
  m->free_at = 0;
  m->dirty = 0;
  m->pos = 0;
  m->have_pos = false;
}

uint64_t
hdd_model_transfer_ns (const struct hdd_model *m, uint64_t len)
{
  return (uint64_t)((unsigned __int128)len * 1000000000u / m->p.bandwidth);
}

/* Seek charge for an access at OFFSET; moves the head past it. */
static uint64_t
head_move (struct hdd_model *m, uint64_t offset, uint64_t len)
{
  uint64_t seek = m->have_pos && m->pos == offset ? 0 : m->p.seek_ns;

  m->pos = offset + len;
  m->have_pos = true;
  return seek;
}

/* Absorbs LEN bytes into the cache; returns the overflow's transfer. */
static uint64_t
cache_absorb (struct hdd_model *m, uint64_t len)
{
  uint64_t excess = 0;

  if (m->dirty + len > m->p.cache_bytes)
    excess = m->dirty + len - m->p.cache_bytes;
  m->dirty += len - excess;
  return hdd_model_transfer_ns (m, excess);
}

/* Rotation + destage of the cache; empties it. */
static uint64_t
cache_barrier (struct hdd_model *m)
{
  uint64_t t = m->p.rotation_ns + hdd_model_transfer_ns (m, m->dirty);

  m->dirty = 0;
  return t;
}

struct hdd_service
hdd_model_serve (struct hdd_model *m, uint64_t now, enum hdd_op op,
                 uint64_t offset, uint64_t len, bool fua)
{
  struct hdd_service s = { 0 };

  s.start = now > m->free_at ? now : m->free_at;
  switch (op)
    {
    case HDD_READ:
      s.seek = head_move (m, offset, len);
      s.transfer = hdd_model_transfer_ns (m, len);
      break;
    case HDD_WRITE:
      s.seek = head_move (m, offset, len);
      s.transfer = cache_absorb (m, len);
      if (fua)
        s.barrier = cache_barrier (m);
      break;
    case HDD_FLUSH:
      if (m->dirty > 0)
        s.barrier = cache_barrier (m);
      break;
    }
  s.finish = s.start + s.seek + s.transfer + s.barrier;
  s.dirty = m->dirty;
  m->free_at = s.finish;
  return s;
}
