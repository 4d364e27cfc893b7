/* The SSD cache device: superblock, metadata pages, data slots, and
 * the free-slot pool.
 *
 * Layout (offsets in bytes):
 *   0                superblock (4 KiB)
 *   4 KiB, 8 KiB     state page, copies A and B (clean-shutdown flag)
 *   meta_off         metadata copy A: npages pages of 4 KiB
 *   meta_off + npages*4K   metadata copy B
 *   data_off         nslots data slots of block_size (aligned)
 *
 * A metadata page holds 508 entries (one u64 per slot: block number
 * << 2 | state) behind a header with the page number, the commit
 * sequence number that wrote it, 8 bytes of the cache UUID and a
 * crc32c.  A commit writes each changed page over its older copy;
 * load takes the newer valid copy, so a torn page write loses nothing
 * that an earlier commit made durable.
 *
 * The byte layouts and their checks are in cache-format.h.
 *
 * Invariant 1 (docs/design.md §4.2): a slot's data is written only when its
 * persisted entry says free or says the same LBA.  Freed slots go to a
 * pending list; only after a commit has made "free" durable do they
 * join the free pool that allocation takes from.
 *
 * Lock order: stripe lock -> page lock -> free lock.  The commit lock
 * is taken under no lock but the volume's wal_lock (gateway/vol.h has
 * the order across modules).
 */
#ifndef HHC_CACHE_H
#define HHC_CACHE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "cache-format.h"
#include "dev.h"
#include "hhccore.h"
#include "index.h"

struct hhc_cache {
  struct hhc_dev *dev;
  hhc_msg_fn msgfn;
  struct hhc_index *idx;

  /* Geometry, fixed once formatted. */
  uint8_t uuid[16];
  uint8_t log_uuid[16]; /* the log formatted or recovered with it (zero: none);
                         * set before cache_format */
  uint32_t block_size;
  uint32_t nslots;
  uint64_t volume_size;
  uint32_t npages;
  uint64_t meta_off, data_off;
  uint64_t state_seq[2];  /* state page copies (open/close only) */
  uint32_t log_link;      /* enum cache_log_link: kept in the state page */
  uint8_t linked_log[16]; /* the log it is paired with (state page; zero:
                           * not recorded, as by earlier builds) */
  uint64_t log_gen;       /* that log's superblock generation at the
                           * start of the last run (state page; 0:
                           * unknown: logpair_stale) */
  uint64_t log_epoch;     /* the newest epoch a start reserved (state
                           * page: logpair_reserve_epoch) */

  /* Metadata pages. */
  pthread_mutex_t *page_locks; /* page p: page_locks[p % npagelocks]; each
                                * protects the entries of its pages */
  uint32_t npagelocks;
  uint64_t *dirty_bits;        /* one bit per page, atomic */
  uint64_t *copy_seq;          /* [2*p + copy]: commit lock */
  uint64_t commit_seq;         /* commit lock */
  pthread_mutex_t commit_lock; /* serialises commits */
  unsigned char *commit_bufs;  /* page snapshots (commit lock) */
  int data_written;            /* atomic: slot data written since sync */

  /* Group commit. */
  pthread_mutex_t gc_lock; /* protects gc_* and failed */
  pthread_cond_t gc_cond;
  uint64_t gc_requested, gc_done;
  bool gc_running;
  int failed; /* atomic, sticky: the device lost a write or a sync */

  /* Free slots, chained through the slots' hash links. */
  pthread_mutex_t free_lock;       /* protects the two lists below */
  uint32_t free_head, nfree;       /* persisted free: may be written */
  uint32_t pending_head, npending; /* freed, not yet durable */
};

/* cache_geometry (cache-format.h) gives the geometry for a device. */

/* Read the superblock.  Returns 0 and fills geometry if valid, ENOENT
 * if the device holds no cache (no magic), EINVAL if it is corrupt or
 * of another version (logged).
 */
int cache_read_super (struct hhc_cache *c, char *identity, size_t idlen);

/* Format the device (destroys its contents) for this geometry. */
int cache_format (struct hhc_cache *c, const char *identity);

/* The state page (enum cache_state and enum cache_log_link in
 * cache-format.h): read the newer valid copy (none valid:
 * CACHE_IN_USE), filling c->log_link and c->linked_log; write over the
 * older copy, then sync.
 */
int cache_read_state (struct hhc_cache *c, enum cache_state *state);
/* After cache_read_state: EINVAL (said why) if the newer state copy's
 * sequence is CACHE_SEQ_LOAD_MAX or more (the next state write would
 * need a number the codec rejects), else 0.
 */
int cache_check_state_seq (struct hhc_cache *c);
int cache_write_state (struct hhc_cache *c, enum cache_state state);

/* Allocate RAM structures for the geometry in c (after format or
 * read_super); idx must be initialised for c->nslots.
 */
int cache_init_mem (struct hhc_cache *c, struct hhc_index *idx);
void cache_free_mem (struct hhc_cache *c);

/* Load the metadata: calls found(slot, lba, state) for every used
 * slot (duplicates of one LBA resolved: newest commit wins), puts free
 * slots in the pool.  EINVAL (logged) on a corrupt page.
 */
int cache_load (struct hhc_cache *c,
                void (*found) (void *opaque, uint32_t slot, uint64_t lba,
                               enum slot_state st),
                void *opaque);

/* Byte offset of a slot's data on the device. */
static inline uint64_t
cache_slot_offset (const struct hhc_cache *c, uint32_t slot)
{
  return c->data_off + (uint64_t)slot * c->block_size;
}

/* Read/write slot data (off/len inside the block). */
int cache_read_slot (struct hhc_cache *c, uint32_t slot, void *buf,
                     uint32_t off, uint32_t len);
int cache_write_slot (struct hhc_cache *c, uint32_t slot, const void *buf,
                      uint32_t off, uint32_t len);

/* Make every completed slot write and every state change durable
 * (group commit: concurrent callers share one round).
 */
int cache_commit (struct hhc_cache *c);

/* The device lost a write or a sync (sticky; 0 if not).  After that
 * it may return stale data for any slot, so the volume serves no
 * cached data and writes nothing back.
 */
static inline int
cache_is_failed (struct hhc_cache *c)
{
  return __atomic_load_n (&c->failed, __ATOMIC_ACQUIRE);
}

/* ---- stripe lock of the slot's LBA held (or slot unmapped) ---- */

/* Set a slot's persisted state (takes the page lock, marks the page
 * for the next commit).
 */
void cache_set_state (struct hhc_cache *c, uint32_t slot, enum slot_state st);

/* Free-slot pool (takes the free lock). */
uint32_t cache_alloc_slot (struct hhc_cache *c); /* HHC_NIL if none */
/* Return a slot whose persisted state is still free (a failed fill). */
void cache_unalloc_slot (struct hhc_cache *c, uint32_t slot);
/* Queue a slot just set to free; usable after the next commit. */
void cache_release_slot (struct hhc_cache *c, uint32_t slot);
uint32_t cache_nfree (struct hhc_cache *c);
uint32_t cache_npending (struct hhc_cache *c);

#endif /* HHC_CACHE_H */
