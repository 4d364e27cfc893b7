/* The fixture of the LRU tests (lruenv.h). */
#include <config.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "lruenv.h"

struct fixture *
fixture_new (uint32_t nslots, unsigned ratio)
{
  struct fixture *f = calloc (1, sizeof *f);

  assert_non_null (f);
  assert_int_equal (index_init (&f->idx, nslots), 0);
  lru_init (&f->lru, f->idx.slots, ratio);
  return f;
}

void
fixture_free (struct fixture *f)
{
  lru_destroy (&f->lru);
  index_free (&f->idx);
  free (f);
}

/* vol_evict's choice of one victim (LRU lock held): the walk's first. */
uint32_t
evict_one (struct fixture *f)
{
  struct lru_walk w;

  lru_walk_start (&f->lru, &w);
  return lru_walk_victim (&f->lru, &w);
}
