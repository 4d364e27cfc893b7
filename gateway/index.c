/* Sharded hash index: LBA -> slot.
 *
 * The bucket array has 7 heads per 8 slots (load factor <= 8/7, never
 * resized: a full cache's chains average 1.57 slots per hit, against
 * 1.5 with one head per slot).  Bucket b belongs to stripe
 * b % nstripes; a lookup takes only that stripe's lock.  Chains are
 * linked through the slots' hword, so the index costs 3.5 bytes per
 * slot beyond the slot entry (the whole: 19.5 bytes per slot).
 *
 * The slot and bucket arrays of a big cache (HUGE_MIN and more) are
 * mapped on their own and advised to use transparent huge pages: a
 * start-up maps millions of blocks at random places in them, and with
 * 4 KiB pages nearly every one of those costs a TLB miss and a page
 * fault besides its cache miss.
 */
#include <config.h>

#include <stdio.h>
#include <sys/mman.h>

#include "common.h"
#include "index.h"

#define STATE_SHIFT 28
#define STATE_MASK (3u << STATE_SHIFT)
#define LBAHI_SHIFT 30
#define HUGE_PAGE (UINT64_C (2) << 20)
#define HUGE_MIN (2 * HUGE_PAGE) /* arrays this big get huge pages */

const char *
slot_state_to_string (enum slot_state s)
{
  switch (s)
    {
    case SLOT_FREE:
      return "free";
    case SLOT_CLEAN:
      return "clean";
    case SLOT_DIRTY:
      return "dirty";
    case SLOT_DIRTY_LOGGED:
      return "dirty-logged";
    }
  return "?";
}

static uint32_t
load32 (const uint32_t *p)
{
  return __atomic_load_n (p, __ATOMIC_ACQUIRE);
}

static void
store32 (uint32_t *p, uint32_t v)
{
  __atomic_store_n (p, v, __ATOMIC_RELEASE);
}

/* A big array: its own 2 MiB-aligned mapping, advised to use huge
 * pages (a hint: where the kernel has none, 4 KiB pages).  Smaller
 * ones come from malloc.  NULL if out of memory.
 */
static void *
big_alloc (size_t size)
{
  size_t len = HHC_ROUND_UP (size, HUGE_PAGE);
  unsigned char *p, *a;

  if (size < HUGE_MIN)
    return malloc (size);
  p = mmap (NULL, len + HUGE_PAGE, PROT_READ | PROT_WRITE,
            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return NULL;
  /* Trim to an aligned start: the head and the tail go back. */
  a = (unsigned char *)HHC_ROUND_UP ((uintptr_t)p, HUGE_PAGE);
  if (a > p)
    munmap (p, a - p);
  munmap (a + len, p + HUGE_PAGE - a);
#ifdef MADV_HUGEPAGE
  madvise (a, len, MADV_HUGEPAGE);
#endif
  return a;
}

static void
big_free (void *p, size_t size)
{
  if (p == NULL)
    return;
  if (size < HUGE_MIN)
    free (p);
  else
    munmap (p, HHC_ROUND_UP (size, HUGE_PAGE));
}

int
index_init (struct hhc_index *idx, uint32_t nslots)
{
  uint32_t ns = 1;

  memset (idx, 0, sizeof *idx);
  if (nslots == 0 || nslots > HHC_MAX_SLOTS)
    return EINVAL;
  /* About one stripe per 64 slots, at most 1024 stripes. */
  while (ns < 1024 && ns * 64 < nslots)
    ns <<= 1;
  idx->nslots = nslots;
  idx->nbuckets = nslots - nslots / 8;
  idx->nstripes = ns;
  idx->slots = big_alloc ((size_t)nslots * sizeof *idx->slots);
  idx->buckets = big_alloc ((size_t)idx->nbuckets * sizeof *idx->buckets);
  idx->stripes = calloc (ns, sizeof *idx->stripes);
  idx->mapped = calloc (HHC_NREGIONS, sizeof *idx->mapped);
  if (!idx->slots || !idx->buckets || !idx->stripes || !idx->mapped)
    {
      index_free (idx);
      return ENOMEM;
    }
  for (uint32_t i = 0; i < nslots; i++)
    idx->slots[i] = (struct hhc_slot){ 0, HHC_NIL, HHC_NIL, HHC_NIL };
  for (uint32_t i = 0; i < idx->nbuckets; i++)
    idx->buckets[i] = HHC_NIL;
  for (uint32_t i = 0; i < ns; i++)
    {
      pthread_mutex_init (&idx->stripes[i].lock, NULL);
      pthread_cond_init (&idx->stripes[i].cond, NULL);
    }
  return 0;
}

void
index_free (struct hhc_index *idx)
{
  if (idx->stripes)
    for (uint32_t i = 0; i < idx->nstripes; i++)
      {
        pthread_mutex_destroy (&idx->stripes[i].lock);
        pthread_cond_destroy (&idx->stripes[i].cond);
        free (idx->stripes[i].active);
      }
  free (idx->stripes);
  big_free (idx->slots, (size_t)idx->nslots * sizeof *idx->slots);
  big_free (idx->buckets, (size_t)idx->nbuckets * sizeof *idx->buckets);
  free (idx->mapped);
  memset (idx, 0, sizeof *idx);
}

static uint32_t
bucket_of (const struct hhc_index *idx, uint64_t lba)
{
  /* Multiply-shift maps the hash onto [0, nbuckets) without division. */
  uint32_t h = (uint32_t)(hhc_hash64 (lba) >> 32);
  return (uint32_t)(((uint64_t)h * idx->nbuckets) >> 32);
}

struct hhc_stripe *
index_stripe (struct hhc_index *idx, uint64_t lba)
{
  return &idx->stripes[bucket_of (idx, lba) & (idx->nstripes - 1)];
}

/* Count a slot mapped to (delta 1) or unmapped from (-1) lba. */
static void
count_mapped (struct hhc_index *idx, uint64_t lba, int delta)
{
  __atomic_fetch_add (&idx->mapped[lba >> HHC_REGION_SHIFT], (uint32_t)delta,
                      __ATOMIC_RELAXED);
}

void
index_stripe_barrier (struct hhc_index *idx)
{
  for (uint32_t i = 0; i < idx->nstripes; i++)
    {
      hhc_lock (&idx->stripes[i].lock);
      hhc_unlock (&idx->stripes[i].lock);
    }
}

bool
index_any_mapped (struct hhc_index *idx, uint64_t first, uint64_t last)
{
  if (first >= last)
    return false;
  for (uint64_t r = first >> HHC_REGION_SHIFT;
       r <= (last - 1) >> HHC_REGION_SHIFT; r++)
    if (__atomic_load_n (&idx->mapped[r], __ATOMIC_RELAXED) != 0)
      return true;
  return false;
}

uint64_t
slot_lba (const struct hhc_slot *s)
{
  uint64_t hi = load32 (&s->hword) >> LBAHI_SHIFT;
  return (hi << 32) | load32 (&s->lba_lo);
}

enum slot_state
slot_state (const struct hhc_slot *s)
{
  return (load32 (&s->hword) & STATE_MASK) >> STATE_SHIFT;
}

static uint32_t
hnext (const struct hhc_slot *s)
{
  return s->hword & HHC_LINK_MASK;
}

static void
set_hnext (struct hhc_slot *s, uint32_t n)
{
  store32 (&s->hword, (s->hword & ~HHC_LINK_MASK) | n);
}

void
index_prefetch_bucket (const struct hhc_index *idx, uint64_t lba)
{
  __builtin_prefetch (&idx->buckets[bucket_of (idx, lba)]);
}

void
index_prefetch_chain (const struct hhc_index *idx, uint64_t lba)
{
  uint32_t s
      = __atomic_load_n (&idx->buckets[bucket_of (idx, lba)], __ATOMIC_RELAXED);

  if (s != HHC_NIL)
    __builtin_prefetch (&idx->slots[s]);
}

/* The generation of a stripe (seqlock writer side, lock held): odd
 * from gen_begin to gen_end, and every reader that overlapped either
 * sees it move.  Ordering without fences (which ThreadSanitizer does
 * not model): every store between the two is a release store
 * (store32, the nbusy store), so a reader whose acquire load sees one
 * of them also sees the odd value before it; the reader's last look is
 * an acquire load after all of its own (acquire) loads, and after the
 * pread of the slot, a system call the compiler cannot move it across.
 */
static void
gen_begin (struct hhc_stripe *st)
{
  __atomic_store_n (&st->gen, st->gen + 1, __ATOMIC_RELAXED);
}

static void
gen_end (struct hhc_stripe *st)
{
  __atomic_store_n (&st->gen, st->gen + 1, __ATOMIC_RELEASE);
}

uint32_t
index_read_begin (const struct hhc_stripe *st)
{
  uint32_t g = __atomic_load_n (&st->gen, __ATOMIC_ACQUIRE);

  if (__atomic_load_n (&st->nbusy, __ATOMIC_ACQUIRE) != 0)
    return 1;
  return g;
}

bool
index_read_end (const struct hhc_stripe *st, uint32_t gen)
{
  return (gen & 1) == 0 && __atomic_load_n (&st->gen, __ATOMIC_ACQUIRE) == gen;
}

/* Chains average 1.57 slots in a full cache; a walk this long without
 * the lock has likely wandered into a chain that changed under it.
 */
#define UNLOCKED_WALK_MAX 16

uint32_t
index_lookup_unlocked (const struct hhc_index *idx, uint64_t lba)
{
  uint32_t s
      = __atomic_load_n (&idx->buckets[bucket_of (idx, lba)], __ATOMIC_ACQUIRE);

  for (int n = 0; s != HHC_NIL && s < idx->nslots; n++)
    {
      if (n == UNLOCKED_WALK_MAX)
        return HHC_NIL;
      if (slot_lba (&idx->slots[s]) == lba)
        return s;
      s = load32 (&idx->slots[s].hword) & HHC_LINK_MASK;
    }
  return HHC_NIL;
}

uint32_t
index_lookup (struct hhc_index *idx, uint64_t lba)
{
  uint32_t s = idx->buckets[bucket_of (idx, lba)];

  while (s != HHC_NIL && slot_lba (&idx->slots[s]) != lba)
    s = hnext (&idx->slots[s]);
  return s;
}

void
index_insert (struct hhc_index *idx, uint32_t slot, uint64_t lba)
{
  struct hhc_slot *s = &idx->slots[slot];
  uint32_t *head = &idx->buckets[bucket_of (idx, lba)];
  uint32_t hw = s->hword & STATE_MASK;
  struct hhc_stripe *st = index_stripe (idx, lba);

  hw |= (uint32_t)(lba >> 32) << LBAHI_SHIFT;
  hw |= *head;
  gen_begin (st);
  store32 (&s->lba_lo, (uint32_t)lba);
  store32 (&s->hword, hw);
  store32 (head, slot);
  gen_end (st);
  count_mapped (idx, lba, 1);
}

void
index_remove (struct hhc_index *idx, uint32_t slot)
{
  struct hhc_slot *s = &idx->slots[slot];
  uint32_t *head = &idx->buckets[bucket_of (idx, slot_lba (s))];
  struct hhc_stripe *st = index_stripe (idx, slot_lba (s));
  uint32_t prev = HHC_NIL, cur = *head;

  while (cur != slot)
    {
      if (cur == HHC_NIL)
        {
          fprintf (stderr, "hhc: index_remove: slot %u not in index\n", slot);
          abort ();
        }
      prev = cur;
      cur = hnext (&idx->slots[cur]);
    }
  gen_begin (st);
  if (prev == HHC_NIL)
    store32 (head, hnext (s));
  else
    set_hnext (&idx->slots[prev], hnext (s));
  set_hnext (s, HHC_NIL);
  gen_end (st);
  count_mapped (idx, slot_lba (s), -1);
}

void
slot_set_state (struct hhc_slot *s, enum slot_state st)
{
  store32 (&s->hword, (s->hword & ~STATE_MASK) | ((uint32_t)st << STATE_SHIFT));
}

uint32_t
active_get (struct hhc_stripe *st, uint32_t slot)
{
  for (uint32_t i = 0; i < st->nactive; i++)
    if (st->active[i].slot == slot)
      return st->active[i].flags;
  return 0;
}

void
active_set (struct hhc_stripe *st, uint32_t slot, uint32_t flags)
{
  active_change (st, slot, flags, ~flags);
}

void
active_change (struct hhc_stripe *st, uint32_t slot, uint32_t set,
               uint32_t clear)
{
  uint32_t i, flags, old;

  for (i = 0; i < st->nactive; i++)
    if (st->active[i].slot == slot)
      break;
  old = i < st->nactive ? st->active[i].flags : 0;
  flags = (old & ~clear) | set;
  if ((old ^ flags) & ACT_BUSY)
    {
      gen_begin (st);
      __atomic_store_n (&st->nbusy, st->nbusy + ((flags & ACT_BUSY) ? 1 : -1),
                        __ATOMIC_RELEASE);
      gen_end (st);
    }
  if (i == st->nactive)
    {
      if (flags == 0)
        return;
      if (st->nactive == st->capactive)
        {
          uint32_t ncap = st->capactive ? st->capactive * 2 : 8;
          void *n = realloc (st->active, ncap * sizeof *st->active);
          if (n == NULL)
            hhc_pthread_fail ("active_set: realloc", ENOMEM);
          st->active = n;
          st->capactive = ncap;
        }
      st->active[st->nactive++] = (struct hhc_active){ slot, flags };
      return;
    }
  if ((st->active[i].flags & ~flags) != 0 && st->nwaiters > 0)
    pthread_cond_broadcast (&st->cond);
  if (flags == 0)
    st->active[i] = st->active[--st->nactive];
  else
    st->active[i].flags = flags;
}

void
stripe_wait (struct hhc_stripe *st)
{
  int r;

  st->nwaiters++;
  r = pthread_cond_wait (&st->cond, &st->lock);
  st->nwaiters--;
  if (r)
    hhc_pthread_fail ("pthread_cond_wait", r);
}
