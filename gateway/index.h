/* The slot array and the sharded index (LBA -> slot).
 *
 * Every cache slot has a 16-byte entry in RAM (struct hhc_slot) and
 * the hash table has 7 32-bit bucket heads per 8 slots, so the index
 * and the LRU together cost 19.5 bytes per cached block (and 64 KiB of
 * region counters per volume, below).  Links are 28-bit
 * slot numbers; the other bits of each word hold state:
 *
 *   word    bits   meaning                       protected by
 *   lba_lo  0-31   block number, low bits        stripe lock of the LBA
 *   hword   0-27   next slot in the hash chain   stripe lock
 *           28-29  persisted state (enum slot_state)  stripe + page lock
 *           30-31  block number bits 32-33       stripe lock
 *   prev    0-27   previous slot in its LRU list LRU lock
 *           28-29  which list (enum lru_list)    LRU lock
 *   next    0-27   next slot in its LRU list     LRU lock
 *           28     referenced while dirty        LRU lock
 *
 * Words are written only by holders of their lock, with atomic stores,
 * so code holding another lock may read them with atomic loads (the
 * metadata writer reads lba and state under the page lock; eviction
 * reads the LBA under the LRU lock and then confirms it under the
 * stripe lock, taken with trylock).
 *
 * Transient I/O state (a slot being filled or written, written back,
 * rewritten during write-back) is rare, so it is not kept per slot but
 * in a small table per lock stripe (struct hhc_active).  Waiters sleep
 * on the stripe's condition variable.
 */
#ifndef HHC_INDEX_H
#define HHC_INDEX_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define HHC_NIL 0x0FFFFFFFu       /* no slot */
#define HHC_MAX_SLOTS 0x0FFFFFFFu /* slots are numbered 0 .. MAX-1 */
#define HHC_MAX_BLOCKS (UINT64_C (1) << 34)
#define HHC_LINK_MASK 0x0FFFFFFFu
/* The mapped slots are counted per region of 2^20 blocks (16384
 * counters for 2^34 blocks), so that a trim of a huge range can tell
 * cheaply that it has nothing to invalidate.
 */
#define HHC_REGION_SHIFT 20
#define HHC_NREGIONS (HHC_MAX_BLOCKS >> HHC_REGION_SHIFT)

/* Persisted state of a slot (metadata entry). */
enum slot_state {
  SLOT_FREE = 0,         /* holds nothing (or is being filled) */
  SLOT_CLEAN = 1,        /* holds the backend's data for its LBA */
  SLOT_DIRTY = 2,        /* holds data not yet written back */
  SLOT_DIRTY_LOGGED = 3, /* reserved for the HDD log */
};

const char *slot_state_to_string (enum slot_state s);

struct hhc_slot {
  uint32_t lba_lo;
  uint32_t hword;
  uint32_t prev;
  uint32_t next;
};

/* Transient flags (per-stripe table). */
#define ACT_BUSY 1u    /* filled, written or read by one thread: wait */
#define ACT_WB 2u      /* being written back: trim/zero wait */
#define ACT_REDIRTY 4u /* written since write-back took its copy */

struct hhc_active {
  uint32_t slot;
  uint32_t flags;
};

struct hhc_stripe {
  pthread_mutex_t lock; /* protects the buckets of this stripe, their
                         * slots' lba_lo/hword, and active[] */
  pthread_cond_t cond;  /* signalled when an active flag clears */
  struct hhc_active *active;
  uint32_t nactive, capactive;
  uint32_t nwaiters; /* threads in stripe_wait (none: no broadcast) */
  /* For readers without the lock (index_read_begin): gen is odd while
   * a lock holder changes the stripe's chains or its count of ACT_BUSY
   * slots (nbusy), and moves on with every such change.  Written under
   * the lock, read atomically by anyone.
   */
  uint32_t gen;
  uint32_t nbusy;
};

struct hhc_index {
  struct hhc_slot *slots;
  uint32_t nslots;
  uint32_t *buckets; /* nbuckets heads */
  uint32_t nbuckets; /* nslots - nslots / 8 (at least 1) */
  struct hhc_stripe *stripes;
  uint32_t nstripes; /* power of two */
  uint32_t *mapped;  /* HHC_NREGIONS counts of mapped slots (atomic) */
};

/* Allocate for nslots (<= HHC_MAX_SLOTS): every slot free, unmapped. */
int index_init (struct hhc_index *idx, uint32_t nslots);
void index_free (struct hhc_index *idx);

/* The stripe that guards lba. */
struct hhc_stripe *index_stripe (struct hhc_index *idx, uint64_t lba);

/* Take and release every stripe lock: whoever held one at the call
 * has left it, and whoever takes one later sees what the caller did
 * before the call.
 */
void index_stripe_barrier (struct hhc_index *idx);

/* May a slot be mapped to a block of [first, last)?  Any thread; a
 * block mapped by a request that completed before the call is seen.
 */
bool index_any_mapped (struct hhc_index *idx, uint64_t first, uint64_t last);

/* Slot word accessors (atomic, any thread). */
uint64_t slot_lba (const struct hhc_slot *s);
enum slot_state slot_state (const struct hhc_slot *s);

/* Prefetch the bucket head of lba, or (once that is cached) the slot
 * at the head of its chain: a loader that maps many blocks at once
 * (cache_load) overlaps their cache misses.  A hint only: no lock.
 */
void index_prefetch_bucket (const struct hhc_index *idx, uint64_t lba);
void index_prefetch_chain (const struct hhc_index *idx, uint64_t lba);

/* A hit without the stripe lock (a seqlock read): begin returns the
 * stripe's generation, or an odd value when a lock holder is changing
 * it or one of its slots is ACT_BUSY (then take the lock instead).
 * index_lookup_unlocked may be wrong, may give up (HHC_NIL) on a long
 * chain, and what is read from the slot it names counts only if
 * index_read_end then says the generation did not move: no slot of the
 * stripe was mapped, unmapped or claimed in between.
 */
uint32_t index_read_begin (const struct hhc_stripe *st);
uint32_t index_lookup_unlocked (const struct hhc_index *idx, uint64_t lba);
bool index_read_end (const struct hhc_stripe *st, uint32_t gen);

/* ---- stripe lock of the LBA must be held below this line ---- */

/* Slot holding lba, or HHC_NIL. */
uint32_t index_lookup (struct hhc_index *idx, uint64_t lba);
/* Map an unmapped slot to lba (state unchanged). */
void index_insert (struct hhc_index *idx, uint32_t slot, uint64_t lba);
/* Unmap a mapped slot. */
void index_remove (struct hhc_index *idx, uint32_t slot);
/* Set the persisted state (caller also holds the slot's page lock). */
void slot_set_state (struct hhc_slot *s, enum slot_state st);

/* Transient flags of slot in its stripe's table. */
uint32_t active_get (struct hhc_stripe *st, uint32_t slot);
/* Set flags (0 removes the entry); wakes waiters when bits clear. */
void active_set (struct hhc_stripe *st, uint32_t slot, uint32_t flags);
/* Set the flags in set and clear those in clear (one lookup). */
void active_change (struct hhc_stripe *st, uint32_t slot, uint32_t set,
                    uint32_t clear);
/* Wait for the stripe's condition (lock held, released meanwhile). */
void stripe_wait (struct hhc_stripe *st);

#endif /* HHC_INDEX_H */
