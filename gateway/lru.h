/* Midpoint LRU (CSG style) plus the dirty list.
 *
 * Clean blocks live on two lists split by a midpoint: hot and cold,
 * sized hot:cold = hot_ratio:1.  A new block enters at the head of
 * cold (the midpoint).  A hit only sets the block's "referenced" bit,
 * without the lock (a hit is cheap, as in CSG); a referenced cold block
 * that eviction reaches is promoted to the head of hot instead of
 * evicted; when hot grows beyond its share its tail is demoted to the
 * head of cold, or, if referenced, goes back to hot's head unreferenced
 * (a second chance, CLOCK-style).  Eviction takes from the cold tail
 * (then hot), so a long scan only churns cold.
 *
 * Dirty blocks live on a third list in the order they became dirty:
 * its head is the oldest dirty block (written back first).  They can
 * never be evicted, because they are not on the clean lists.  A hit on
 * a dirty block only sets its "referenced" bit; when it is cleaned it
 * returns to hot if referenced or it came from hot, else to cold.
 *
 * One global lock, held only to move list nodes (never during I/O); a
 * hit takes none.
 * Lock order: stripe lock -> LRU lock.
 */
#ifndef HHC_LRU_H
#define HHC_LRU_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "index.h"

enum lru_list {
  LRU_NONE = 0,
  LRU_HOT = 1,
  LRU_COLD = 2,
  LRU_DIRTY = 3,
};

const char *lru_list_to_string (enum lru_list l);

struct hhc_lru {
  pthread_mutex_t lock; /* protects every prev/next word and the lists */
  struct hhc_slot *slots;
  unsigned hot_ratio;
  uint32_t head[4], tail[4], count[4]; /* indexed by enum lru_list */
};

/* Set up for the slot array (all slots off-list). */
void lru_init (struct hhc_lru *lru, struct hhc_slot *slots, unsigned hot_ratio);
void lru_destroy (struct hhc_lru *lru);

/* Each of these takes the LRU lock itself, except lru_touch. */

/* A new clean block: head of cold. */
void lru_insert_clean (struct hhc_lru *lru, uint32_t slot);
/* A new dirty block (newest at the tail of the dirty list). */
void lru_insert_dirty (struct hhc_lru *lru, uint32_t slot);
/* A read or write hit: sets "referenced" (no lock, no list move). */
void lru_touch (struct hhc_lru *lru, uint32_t slot);
/* A clean block was written: move it to the dirty tail. */
void lru_make_dirty (struct hhc_lru *lru, uint32_t slot);
/* A dirty block was rewritten during write-back: dirty tail again. */
void lru_requeue_dirty (struct hhc_lru *lru, uint32_t slot);
/* A dirty block was written back: back to hot or cold. */
void lru_make_clean (struct hhc_lru *lru, uint32_t slot);
/* Take a slot off its list. */
void lru_remove (struct hhc_lru *lru, uint32_t slot);
/* Which list slot is on. */
enum lru_list lru_which (struct hhc_lru *lru, uint32_t slot);
/* Up to n slots from the head of the dirty list (oldest first). */
uint32_t lru_oldest_dirty (struct hhc_lru *lru, uint32_t *out, uint32_t n);
/* Number of blocks on a list. */
uint32_t lru_count (struct hhc_lru *lru, enum lru_list l);

/* ---- LRU lock must be held below this line ---- */

/* Coldest clean slot after 'from' (HHC_NIL: start at the cold tail,
 * then continue into hot); HHC_NIL when there is none.
 */
uint32_t lru_colder_prev (struct hhc_lru *lru, uint32_t from);
/* Eviction reached slot: if it is referenced on cold, promote it to
 * the head of hot (unreferenced; hot's tail may be demoted) and return
 * true: do not evict it.  Only lru_walk_victim calls it in the core.
 */
bool lru_promote_locked (struct hhc_lru *lru, uint32_t slot);

/* The eviction decision, one walk per eviction batch (vol_evict, and
 * tests/bench/lru-sim): the clean blocks coldest first; every
 * referenced cold block it reaches is promoted on the way (never
 * evicted while an unreferenced block is offered first), and every
 * other block is offered as a victim.  The caller evicts a victim
 * (lru_unlink_locked) or leaves it; either way the next call offers
 * the next one.  The lock is held from start to the last call.  A
 * walk promotes at most the cold list once (promoting clears the bit;
 * demoted blocks are unreferenced), one promotion per cold hit: the
 * list moves a hit on main made under the lock, made here in a batch.
 */
struct lru_walk {
  uint32_t next; /* next block to look at (HHC_NIL: done) */
};
void lru_walk_start (struct hhc_lru *lru, struct lru_walk *w);
/* The next victim, or HHC_NIL when no clean block is left. */
uint32_t lru_walk_victim (struct hhc_lru *lru, struct lru_walk *w);
/* lru_remove with the lock held. */
void lru_unlink_locked (struct hhc_lru *lru, uint32_t slot);
/* lru_insert_dirty (dirty) or lru_insert_clean with the lock held
 * (or before any other thread can see the LRU: the load at open).
 */
void lru_insert_locked (struct hhc_lru *lru, uint32_t slot, bool dirty);

#endif /* HHC_LRU_H */
