/* Midpoint LRU: see lru.h for the policy.
 *
 * Links are 28-bit slot numbers in the slots' prev/next words; prev
 * also holds the list a slot is on, next the "referenced" bit:
 *
 *   prev:  bits 0-27 previous slot | bits 28-29 enum lru_list
 *   next:  bits 0-27 next slot     | bit 28 referenced
 *
 * Every store is atomic so that other threads may peek (tests).
 */
#include <config.h>

#include "common.h"
#include "lru.h"

#define LIST_SHIFT 28
#define REF_BIT (1u << 28)

const char *
lru_list_to_string (enum lru_list l)
{
  switch (l)
    {
    case LRU_NONE:
      return "none";
    case LRU_HOT:
      return "hot";
    case LRU_COLD:
      return "cold";
    case LRU_DIRTY:
      return "dirty";
    }
  return "?";
}

static uint32_t
link_of (uint32_t w)
{
  return w & HHC_LINK_MASK;
}

static void
set_word (uint32_t *p, uint32_t v)
{
  __atomic_store_n (p, v, __ATOMIC_RELAXED);
}

static void
set_prev (struct hhc_slot *s, uint32_t prev, enum lru_list l)
{
  set_word (&s->prev, prev | ((uint32_t)l << LIST_SHIFT));
}

static void
set_next (struct hhc_slot *s, uint32_t next, bool ref)
{
  set_word (&s->next, next | (ref ? REF_BIT : 0));
}

static enum lru_list
list_of (const struct hhc_slot *s)
{
  return __atomic_load_n (&s->prev, __ATOMIC_RELAXED) >> LIST_SHIFT;
}

static bool
ref_of (const struct hhc_slot *s)
{
  return s->next & REF_BIT;
}

void
lru_init (struct hhc_lru *lru, struct hhc_slot *slots, unsigned hot_ratio)
{
  memset (lru, 0, sizeof *lru);
  pthread_mutex_init (&lru->lock, NULL);
  lru->slots = slots;
  lru->hot_ratio = hot_ratio ? hot_ratio : 2;
  for (int i = 0; i < 4; i++)
    lru->head[i] = lru->tail[i] = HHC_NIL;
}

void
lru_destroy (struct hhc_lru *lru)
{
  pthread_mutex_destroy (&lru->lock);
}

void
lru_unlink_locked (struct hhc_lru *lru, uint32_t slot)
{
  struct hhc_slot *s = &lru->slots[slot];
  enum lru_list l = list_of (s);
  uint32_t p = link_of (s->prev), n = link_of (s->next);

  if (l == LRU_NONE)
    return;
  if (p == HHC_NIL)
    lru->head[l] = n;
  else
    set_next (&lru->slots[p], n, ref_of (&lru->slots[p]));
  if (n == HHC_NIL)
    lru->tail[l] = p;
  else
    set_prev (&lru->slots[n], p, l);
  lru->count[l]--;
  set_prev (s, HHC_NIL, LRU_NONE);
  set_next (s, HHC_NIL, ref_of (s));
}

static void
push_head (struct hhc_lru *lru, enum lru_list l, uint32_t slot, bool ref)
{
  struct hhc_slot *s = &lru->slots[slot];
  uint32_t h = lru->head[l];

  set_prev (s, HHC_NIL, l);
  set_next (s, h, ref);
  if (h == HHC_NIL)
    lru->tail[l] = slot;
  else
    set_prev (&lru->slots[h], slot, l);
  lru->head[l] = slot;
  lru->count[l]++;
}

static void
push_tail (struct hhc_lru *lru, enum lru_list l, uint32_t slot, bool ref)
{
  struct hhc_slot *s = &lru->slots[slot];
  uint32_t t = lru->tail[l];

  set_prev (s, t, l);
  set_next (s, HHC_NIL, ref);
  if (t == HHC_NIL)
    lru->head[l] = slot;
  else
    set_next (&lru->slots[t], slot, ref_of (&lru->slots[t]));
  lru->tail[l] = slot;
  lru->count[l]++;
}

/* Keep hot at most hot_ratio/(hot_ratio+1) of the clean blocks. */
static void
balance (struct hhc_lru *lru)
{
  while (lru->count[LRU_HOT] > 1
         && lru->count[LRU_HOT]
                > (uint64_t)lru->hot_ratio * (lru->count[LRU_COLD] + 1))
    {
      uint32_t t = lru->tail[LRU_HOT];
      lru_unlink_locked (lru, t);
      push_head (lru, LRU_COLD, t, false);
    }
}

void
lru_insert_clean (struct hhc_lru *lru, uint32_t slot)
{
  HHC_SCOPED_LOCK (&lru->lock);

  lru_unlink_locked (lru, slot);
  push_head (lru, LRU_COLD, slot, false);
}

void
lru_insert_dirty (struct hhc_lru *lru, uint32_t slot)
{
  HHC_SCOPED_LOCK (&lru->lock);

  lru_unlink_locked (lru, slot);
  push_tail (lru, LRU_DIRTY, slot, false);
}

void
lru_touch (struct hhc_lru *lru, uint32_t slot)
{
  struct hhc_slot *s = &lru->slots[slot];
  HHC_SCOPED_LOCK (&lru->lock);

  switch (list_of (s))
    {
    case LRU_HOT:
      if (lru->head[LRU_HOT] == slot)
        return;
      /* fallthrough */
    case LRU_COLD:
      lru_unlink_locked (lru, slot);
      push_head (lru, LRU_HOT, slot, false);
      balance (lru);
      return;
    case LRU_DIRTY:
      set_next (s, link_of (s->next), true);
      return;
    case LRU_NONE:
      return;
    }
}

void
lru_make_dirty (struct hhc_lru *lru, uint32_t slot)
{
  struct hhc_slot *s = &lru->slots[slot];
  HHC_SCOPED_LOCK (&lru->lock);
  enum lru_list l = list_of (s);

  if (l == LRU_DIRTY)
    return;
  lru_unlink_locked (lru, slot);
  /* A write is an access: remember it when the block is cleaned. */
  push_tail (lru, LRU_DIRTY, slot, l == LRU_HOT || l == LRU_COLD);
}

void
lru_requeue_dirty (struct hhc_lru *lru, uint32_t slot)
{
  struct hhc_slot *s = &lru->slots[slot];
  HHC_SCOPED_LOCK (&lru->lock);
  bool ref = ref_of (s);

  lru_unlink_locked (lru, slot);
  push_tail (lru, LRU_DIRTY, slot, ref);
}

void
lru_make_clean (struct hhc_lru *lru, uint32_t slot)
{
  struct hhc_slot *s = &lru->slots[slot];
  HHC_SCOPED_LOCK (&lru->lock);
  bool ref = ref_of (s);

  lru_unlink_locked (lru, slot);
  if (ref)
    {
      push_head (lru, LRU_HOT, slot, false);
      balance (lru);
    }
  else
    push_head (lru, LRU_COLD, slot, false);
}

void
lru_remove (struct hhc_lru *lru, uint32_t slot)
{
  HHC_SCOPED_LOCK (&lru->lock);

  lru_unlink_locked (lru, slot);
  set_next (&lru->slots[slot], HHC_NIL, false);
}

enum lru_list
lru_which (struct hhc_lru *lru, uint32_t slot)
{
  HHC_SCOPED_LOCK (&lru->lock);

  return list_of (&lru->slots[slot]);
}

uint32_t
lru_oldest_dirty (struct hhc_lru *lru, uint32_t *out, uint32_t n)
{
  HHC_SCOPED_LOCK (&lru->lock);
  uint32_t i = 0, s = lru->head[LRU_DIRTY];

  while (i < n && s != HHC_NIL)
    {
      out[i++] = s;
      s = link_of (lru->slots[s].next);
    }
  return i;
}

uint32_t
lru_count (struct hhc_lru *lru, enum lru_list l)
{
  HHC_SCOPED_LOCK (&lru->lock);

  return lru->count[l];
}

uint32_t
lru_colder_prev (struct hhc_lru *lru, uint32_t from)
{
  if (from == HHC_NIL)
    return lru->tail[LRU_COLD] != HHC_NIL ? lru->tail[LRU_COLD]
                                          : lru->tail[LRU_HOT];
  uint32_t p = link_of (lru->slots[from].prev);
  if (p == HHC_NIL && list_of (&lru->slots[from]) == LRU_COLD)
    return lru->tail[LRU_HOT];
  return p;
}
