/* Midpoint LRU: see lru.h for the policy.
 *
 * Links are 28-bit slot numbers in the slots' prev/next words; prev
 * also holds the list a slot is on, next the "referenced" bit:
 *
 *   prev:  bits 0-27 previous slot | bits 28-29 enum lru_list
 *   next:  bits 0-27 next slot     | bit 28 referenced
 *
 * Every load and store is atomic: other threads may peek (tests), and
 * a hit sets the referenced bit without the lock (lru_touch).
 *
 * A hit only sets "referenced", with one atomic OR and no lock, so
 * that a hit costs no lock and no list move (CSG makes a hit cheap the
 * same way).  The lists move later, under the lock:
 *
 *   cold, referenced   eviction reaches it: promoted to hot's head
 *                      (lru_promote_locked), not evicted
 *   hot, referenced    hot's tail is demoted: back to hot's head
 *                      instead (balance: a second chance, CLOCK)
 *   dirty, referenced  cleaned: to hot (lru_make_clean)
 *
 * Moving to another list clears the bit.  A store of the same word by
 * a list move under the lock may drop a bit set at that moment: the
 * block then loses its promotion, a matter of precision only.
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
  return __atomic_load_n (&s->next, __ATOMIC_RELAXED) & REF_BIT;
}

static uint32_t
prev_of (const struct hhc_slot *s)
{
  return link_of (__atomic_load_n (&s->prev, __ATOMIC_RELAXED));
}

static uint32_t
next_of (const struct hhc_slot *s)
{
  return link_of (__atomic_load_n (&s->next, __ATOMIC_RELAXED));
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
  uint32_t p = prev_of (s), n = next_of (s);

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

/* Second chances one balance gives at most (bounds the time under the
 * lock; a referenced tail past them is demoted all the same).
 */
#define SECOND_CHANCES 8

/* Keep hot at most hot_ratio/(hot_ratio+1) of the clean blocks.  A
 * referenced tail of hot goes back to hot's head, unreferenced.
 */
static void
balance (struct hhc_lru *lru)
{
  unsigned chances = SECOND_CHANCES;

  while (lru->count[LRU_HOT] > 1
         && lru->count[LRU_HOT]
                > (uint64_t)lru->hot_ratio * (lru->count[LRU_COLD] + 1))
    {
      uint32_t t = lru->tail[LRU_HOT];
      bool again = chances > 0 && ref_of (&lru->slots[t]);
      lru_unlink_locked (lru, t);
      if (again)
        chances--;
      push_head (lru, again ? LRU_HOT : LRU_COLD, t, false);
    }
}

void
lru_insert_locked (struct hhc_lru *lru, uint32_t slot, bool dirty)
{
  lru_unlink_locked (lru, slot);
  if (dirty)
    push_tail (lru, LRU_DIRTY, slot, false);
  else
    push_head (lru, LRU_COLD, slot, false);
}

void
lru_insert_clean (struct hhc_lru *lru, uint32_t slot)
{
  HHC_SCOPED_LOCK (&lru->lock);

  lru_insert_locked (lru, slot, false);
}

void
lru_insert_dirty (struct hhc_lru *lru, uint32_t slot)
{
  HHC_SCOPED_LOCK (&lru->lock);

  lru_insert_locked (lru, slot, true);
}

void
lru_touch (struct hhc_lru *lru, uint32_t slot)
{
  struct hhc_slot *s = &lru->slots[slot];

  if (list_of (s) != LRU_NONE && !ref_of (s))
    __atomic_fetch_or (&s->next, REF_BIT, __ATOMIC_RELAXED);
}

bool
lru_promote_locked (struct hhc_lru *lru, uint32_t slot)
{
  struct hhc_slot *s = &lru->slots[slot];

  if (list_of (s) != LRU_COLD || !ref_of (s))
    return false;
  lru_unlink_locked (lru, slot);
  push_head (lru, LRU_HOT, slot, false);
  balance (lru);
  return true;
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
      s = next_of (&lru->slots[s]);
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
  uint32_t p = prev_of (&lru->slots[from]);
  if (p == HHC_NIL && list_of (&lru->slots[from]) == LRU_COLD)
    return lru->tail[LRU_HOT];
  return p;
}

void
lru_walk_start (struct hhc_lru *lru, struct lru_walk *w)
{
  w->next = lru_colder_prev (lru, HHC_NIL);
}

uint32_t
lru_walk_victim (struct hhc_lru *lru, struct lru_walk *w)
{
  uint32_t s;

  while ((s = w->next) != HHC_NIL)
    {
      struct hhc_slot *p = &lru->slots[s];
      bool cold_head = list_of (p) == LRU_COLD && prev_of (p) == HHC_NIL;

      w->next = lru_colder_prev (lru, s);
      if (!lru_promote_locked (lru, s))
        return s;
      /* s was cold's last: the promotion's balance may have demoted
       * hot's tail (w->next) to cold; start again from the coldest.
       */
      if (cold_head)
        w->next = lru_colder_prev (lru, HHC_NIL);
    }
  return HHC_NIL;
}
