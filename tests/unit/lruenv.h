/* The fixture of the LRU tests (test-lru, test-lru-scan,
 * test-lru-race): an index's slots on a midpoint LRU, and the choice
 * of one victim as vol_evict makes it.
 */
#ifndef HHC_TEST_LRUENV_H
#define HHC_TEST_LRUENV_H

#include <stdint.h>

#include "index.h"
#include "lru.h"

struct fixture {
  struct hhc_index idx;
  struct hhc_lru lru;
};

/* nslots slots, hot:cold at most ratio:1. */
struct fixture *fixture_new (uint32_t nslots, unsigned ratio);
void fixture_free (struct fixture *f);

/* vol_evict's choice of one victim (LRU lock held): the walk's first. */
uint32_t evict_one (struct fixture *f);

#endif /* HHC_TEST_LRUENV_H */
