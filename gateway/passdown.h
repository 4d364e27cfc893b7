/* Passdowns: trims, zeros and pass-through writes, which change the
 * backend under the cache (docs/core.md "Trim and zero").
 *
 * Each one is recorded in a ring with the block range it covers and
 * sequence numbers taken at its start and end; a read-miss fill or a
 * write-back that overlapped one on its block does not mark that block
 * clean (the backend may have moved under it).
 *
 * Lock: struct hhc_passdowns.lock protects its fields but the atomics;
 * it may be taken under a stripe lock and takes the volume's wait_lock
 * (passdown_end wakes waiting writers) and nothing else.
 */
#ifndef HHC_PASSDOWN_H
#define HHC_PASSDOWN_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define PD_HASH 4096      /* regions remembered for finished passdowns */
#define PD_REGION_SHIFT 6 /* a region is 64 blocks */
#define PD_RUNNING 64     /* running passdowns tracked one by one */

struct hhc_volume;

struct hhc_passdowns {
  pthread_mutex_t lock; /* protects the fields below but the atomics */
  struct passdown_run {
    uint64_t first, last; /* blocks [first, last) */
    uint64_t seq;         /* start (running) or end (done) sequence */
  } run[PD_RUNNING];
  unsigned overflow; /* running passdowns not in run */
  /* Finished passdowns: per hashed region of blocks, the highest end
   * sequence number of one that covered it (collisions only make the
   * answer "yes" more often).
   */
  uint64_t done[PD_HASH];
  uint64_t next;    /* last sequence number given out */
  uint64_t seq;     /* atomic: copy of next for the fast path */
  uint64_t flushed; /* atomic: passdowns that ended at or before this
                     * sequence number are durable on the backend */
  uint64_t active;  /* atomic: passdowns running */
};

/* A running passdown, from passdown_begin to passdown_end (the
 * caller keeps it).
 */
struct passdown_ticket {
  unsigned i;        /* index in run (PD_RUNNING: counted in overflow) */
  uint64_t failures; /* bflush_failures when it began */
};

/* Record a passdown of blocks [first, last) before it changes the
 * backend (if it did not fit in run, every check says yes until it
 * ends).
 */
struct passdown_ticket passdown_begin (struct hhc_volume *vol, uint64_t first,
                                       uint64_t last);
/* It ended (successfully or not) and wakes writers waiting for it;
 * owed: it counts as a backend write (be_written) that the next FLUSH
 * flushes, and if a backend flush failed since it began (that flush
 * may have dropped it) every later FLUSH fails (bflush_owed).  Not
 * owed: a failed write whose data went into the cache instead
 * (write_direct's fallback), which no FLUSH needs the backend for, so
 * a backend flush that failed meanwhile does not make FLUSHes fail for
 * good.
 */
void passdown_end (struct hhc_volume *vol, struct passdown_ticket t,
                   uint64_t first, uint64_t last, bool owed);
/* The passdown sequence number now (take it before reading data that
 * is to be marked clean).
 */
uint64_t passdown_seq (struct hhc_volume *vol);
/* Did a passdown covering block lba run at any time since seq? */
bool passdown_since (struct hhc_volume *vol, uint64_t seq, uint64_t lba);
/* Is a passdown covering block lba running now? */
bool passdown_running (struct hhc_volume *vol, uint64_t lba);
/* Did a passdown on lba's region end after the last backend flush?
 * Then the backend may still lose it: a fill must not cache the block.
 */
bool passdown_unflushed (struct hhc_volume *vol, uint64_t lba);
/* A backend flush that started when the passdown sequence number was
 * seq completed (called by whoever flushed).
 */
void passdown_flushed (struct hhc_volume *vol, uint64_t seq);

#endif /* HHC_PASSDOWN_H */
