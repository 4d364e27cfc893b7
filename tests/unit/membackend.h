/* Test support shared by every unit test (membackend.c, hookdev.c,
 * metacheck.c, testutil.c).
 *
 * membackend: an in-memory backend implementing struct hhc_backend_ops
 * (the ctx of every call is the struct membackend *).  It keeps the
 * current bytes and a "durable" copy that a flush (or a FUA write)
 * updates, counts every call, can fail reads, writes and flushes on
 * demand (a failed flush may drop the unflushed bytes, as Linux does),
 * can slow writes down and calls hooks at the start of a read, write
 * or flush so that a test can act in the middle of one.
 *
 * hookdev: a cache device that forwards to another device (usually a
 * crash device) and lets a test see or veto each write and sync.
 *
 * metacheck: watches a hookdev and checks invariant 1 in docs/design.md
 * §4.2 on every slot write (see below).
 *
 * pattern: self-describing sector contents (LBA, sector, version).
 */
#ifndef HHC_TEST_MEMBACKEND_H
#define HHC_TEST_MEMBACKEND_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "dev.h"
#include "hhccore.h"

/* ---- membackend ---- */

struct membackend;

/* The ops table; pass a struct membackend * as every ctx. */
extern const struct hhc_backend_ops membackend_ops;

/* A zeroed backend of size bytes (current and durable). */
struct membackend *membackend_new (uint64_t size);
void membackend_free (struct membackend *mb);

/* An info block: size, preferred block, identity, trim/zero/fua. */
struct hhc_backend_info membackend_info (struct membackend *mb,
                                         uint32_t preferred_block,
                                         const char *identity);

uint64_t membackend_size (struct membackend *mb);

/* Copy out the current (durable = false) or flushed bytes. */
void membackend_peek (struct membackend *mb, bool durable, void *buf,
                      uint64_t count, uint64_t offset);
/* Set current and durable bytes directly (no counters, no hooks). */
void membackend_poke (struct membackend *mb, const void *buf, uint64_t count,
                      uint64_t offset);
/* memcmp of buf against the current or durable bytes. */
int membackend_cmp (struct membackend *mb, bool durable, const void *buf,
                    uint64_t count, uint64_t offset);

enum mb_counter {
  MB_READS,        /* successful reads */
  MB_WRITES,       /* successful writes */
  MB_FLUSHES,      /* successful flushes */
  MB_TRIMS,        /* successful trims */
  MB_ZEROS,        /* successful zeros */
  MB_READ_ERRORS,  /* reads failed by injection */
  MB_WRITE_ERRORS, /* writes failed by injection */
  MB_FLUSH_ERRORS, /* flushes failed by injection */
  MB_NCOUNTERS
};

uint64_t membackend_count (struct membackend *mb, enum mb_counter c);
void membackend_reset_counts (struct membackend *mb);
/* Wait until counter c reaches target; false after timeout_ms. */
bool membackend_wait_count (struct membackend *mb, enum mb_counter c,
                            uint64_t target, unsigned timeout_ms);

enum mb_op { MB_OP_READ, MB_OP_WRITE, MB_OP_FLUSH };

/* Fail the next n calls of op with EIO. */
void membackend_fail_next (struct membackend *mb, enum mb_op op, unsigned n);
/* Fail every call of op with EIO while on. */
void membackend_fail_all (struct membackend *mb, enum mb_op op, bool on);
/* Sleep this many microseconds in every write (latency, not sync). */
void membackend_set_write_delay (struct membackend *mb, unsigned us);
/* While on, a flush that fails by injection drops every byte written
 * since the last successful flush (the current bytes become the
 * durable ones), as Linux drops dirty pages whose write-back failed:
 * the next flush then succeeds with nothing to write.
 */
void membackend_set_drop_on_flush_error (struct membackend *mb, bool on);

/* Called at the start of a call, before faults and delay, with no
 * backend lock held (it may block, or call into the volume).
 * offset/count are 0 for a flush.
 */
typedef void (*membackend_hook) (void *opaque, uint64_t offset, uint32_t count);
void membackend_set_hook (struct membackend *mb, enum mb_op op,
                          membackend_hook fn, void *opaque);
/* Called at the end of every flush, with its result (0 or an errno),
 * after a failed one has dropped what it drops, with no backend lock
 * held (it may block): the caller has not seen the result yet.
 */
typedef void (*membackend_done_hook) (void *opaque, int result);
void membackend_set_flush_done_hook (struct membackend *mb,
                                     membackend_done_hook fn, void *opaque);

/* Successful writes in order (offset, length). */
struct mb_extent {
  uint64_t offset;
  uint32_t count;
};
/* Copy up to max entries of the write log; returns the total. */
size_t membackend_write_log (struct membackend *mb, struct mb_extent *out,
                             size_t max);
void membackend_clear_write_log (struct membackend *mb);

/* ---- hookdev ---- */

struct hookdev;

/* Called before a write is forwarded (no hookdev lock held).  Return
 * 0 to forward it, or an errno to fail it without forwarding.
 */
typedef int (*hookdev_write_fn) (void *opaque, const void *buf, size_t len,
                                 uint64_t offset);
/* Called after a write was forwarded, with the inner device's result. */
typedef void (*hookdev_done_fn) (void *opaque, const void *buf, size_t len,
                                 uint64_t offset, int result);
/* Called after a sync was forwarded, with its result. */
typedef void (*hookdev_sync_fn) (void *opaque, int result);

/* Wrap inner.  The volume never closes a test device; free with
 * hookdev_destroy (inner is not freed).
 */
struct hhc_dev *hookdev_new (struct hhc_dev *inner);
void hookdev_destroy (struct hhc_dev *dev);
struct hhc_dev *hookdev_inner (struct hhc_dev *dev);
void hookdev_set_hooks (struct hhc_dev *dev, hookdev_write_fn before,
                        hookdev_done_fn after, hookdev_sync_fn sync,
                        void *opaque);
/* Called before a sync is forwarded; return an errno to fail it
 * without forwarding.
 */
typedef int (*hookdev_presync_fn) (void *opaque);
void hookdev_set_presync (struct hhc_dev *dev, hookdev_presync_fn fn,
                          void *opaque);
/* Writes and syncs forwarded so far. */
uint64_t hookdev_writes (struct hhc_dev *dev);
uint64_t hookdev_syncs (struct hhc_dev *dev);

/* ---- metacheck: invariant 1 on every slot write ----
 *
 * Keeps a model of the cache's metadata as the device would hold it
 * after a power cut: per page, the durable copies plus every write
 * since the last sync.  Before a slot write is forwarded, each sector
 * of it that carries a pattern header (LBA L) is checked against every
 * version of the slot's entry that a crash could leave behind (the
 * newest valid durable copy, every unsynced write of the page, and
 * the other durable copy when an unsynced write targets the newest):
 * each must say free or L.  Violations are counted and the first few
 * described on stderr.
 */
struct metacheck;

/* Install on a hookdev (replaces its hooks).  The model is read from
 * the inner device now; call metacheck_reload after a restart (with
 * the inner device working again).  At a power cut caused by
 * metacheck_crash_at*, one unsynced metadata page write (if any) is
 * chosen to have been torn: reload first writes that page as the new
 * page header over the bytes the write was replacing.
 */
struct metacheck *metacheck_new (struct hhc_dev *hookdev);
void metacheck_free (struct metacheck *m);
void metacheck_reload (struct metacheck *m);
uint64_t metacheck_violations (struct metacheck *m);
/* Slot writes checked so far (to show the checker did something). */
uint64_t metacheck_checked (struct metacheck *m);
/* Metadata page writes torn so far. */
uint64_t metacheck_tears (struct metacheck *m);
/* Crash the inner crash device before the n-th write or sync from now
 * (1 = the next one); 0 disarms.  keep_seed chooses the unsynced
 * writes that survive.  on_crash (may be NULL) runs just before the
 * power cut, e.g. to stop the backend as a real power cut would stop
 * the whole gateway.
 */
void metacheck_crash_at (struct metacheck *m, uint64_t n, unsigned keep_seed,
                         void (*on_crash) (void *), void *opaque);
/* The same, counting only syncs: the cut comes just before the n-th
 * sync from now, i.e. in the middle of a commit.
 */
void metacheck_crash_at_sync (struct metacheck *m, uint64_t n,
                              unsigned keep_seed, void (*on_crash) (void *),
                              void *opaque);
bool metacheck_crashed (struct metacheck *m);

/* ---- pattern: self-describing 512-byte sectors ----
 *
 * Each sector starts with a header (magic, block LBA, sector index in
 * the block, version) and is filled with bytes derived from them.
 */
#define PAT_SECTOR 512u

/* Fill nsectors sectors of block lba from first_sector on, version v. */
void pattern_fill (void *buf, uint64_t lba, uint32_t first_sector,
                   uint32_t nsectors, uint64_t version);
/* Decode one sector: 1 = valid pattern (fills the outputs), 0 = all
 * zeros, -1 = anything else.
 */
int pattern_decode (const void *sector, uint64_t *lba, uint32_t *sector_idx,
                    uint64_t *version);

/* ---- misc ---- */

/* Logging callback: silent unless HHC_TEST_VERBOSE is set; counts
 * error messages.
 */
void test_msg (enum hhc_msg_level level, const char *msg);
uint64_t test_log_errors (void);

/* Size of a crash device that holds exactly nslots slots of bs. */
uint64_t test_cache_dev_size (uint32_t nslots, uint32_t bs);

/* Absolute CLOCK_REALTIME deadline ms from now. */
void test_deadline (struct timespec *ts, unsigned ms);
/* Join t; false if it has not finished after ms. */
bool test_join (pthread_t t, unsigned ms);

/* Apply $HHC_TEST_FILTER (a cmocka test-name pattern) if set. */
void test_filter_from_env (void);
/* $name as a number, or def if unset. */
uint64_t test_env_u64 (const char *name, uint64_t def);

/* Small deterministic PRNG (xorshift64*). */
static inline uint64_t
test_rand (uint64_t *s)
{
  uint64_t x = *s ? *s : 0x9E3779B97F4A7C15ull;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545F4914F6CDD1Dull;
}

static inline uint64_t
test_rand_below (uint64_t *s, uint64_t n)
{
  return n ? test_rand (s) % n : 0;
}

#endif /* HHC_TEST_MEMBACKEND_H */
