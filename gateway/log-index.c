/* The log's in-memory index: per key (cache slot) where its newest entry
 * is, the ring of segments from the head to the buffer being filled
 * (each with its live count and the chain of its keys), the bitmap of
 * keys that are dirty but not logged, and the deaths that wait for a
 * barrier.  Also where the in-memory head is, and the allocation of it
 * all (with the buffers) at log_start.
 *
 * Invariants (log->lock held for all of it):
 * - keys[k].seg is the ring slot of k's newest entry, or LOG_NONE; k is
 *   on that slot's chain, and counted in its live.
 * - An entry superseded by a newer one (log_append) stays live until
 *   the segment of the newer one is under a durable barrier (a death,
 *   applied by apply_deaths): until then a replay still needs it.
 * - The head (head_seq) is the oldest written segment with live
 *   entries; segments before it may be overwritten once the head is
 *   persisted (log-reclaim.c).
 */
#include <config.h>

#include "common.h"
#include "log_int.h"

/* ---- unlogged bitmap ---- */

bool
is_unlogged (const struct hhc_log *log, uint32_t k)
{
  return (log->unlogged[k / 64] >> (k % 64)) & 1;
}

void
set_unlogged (struct hhc_log *log, uint32_t k, bool on)
{
  uint64_t bit = UINT64_C (1) << (k % 64);

  if (on == is_unlogged (log, k))
    return;
  if (on)
    {
      log->unlogged[k / 64] |= bit;
      log->nunlogged++;
    }
  else
    {
      log->unlogged[k / 64] &= ~bit;
      log->nunlogged--;
      pthread_cond_broadcast (&log->buf_cv); /* relog_unlogged may wait */
    }
}

/* ---- the ring and the chains ---- */

struct seg *
ring_of (struct hhc_log *log, uint64_t seq)
{
  return &log->ring[seq % log->ring_cap];
}

void
chain_remove (struct hhc_log *log, uint32_t k)
{
  struct key *e = &log->keys[k];
  struct seg *g = &log->ring[e->seg];

  if (e->prev != LOG_NONE)
    log->keys[e->prev].next = e->next;
  else
    g->chain = e->next;
  if (e->next != LOG_NONE)
    log->keys[e->next].prev = e->prev;
  e->prev = e->next = LOG_NONE;
}

void
chain_add (struct hhc_log *log, uint32_t k, uint32_t ring)
{
  struct key *e = &log->keys[k];
  struct seg *g = &log->ring[ring];

  e->seg = ring;
  e->prev = LOG_NONE;
  e->next = g->chain;
  if (g->chain != LOG_NONE)
    log->keys[g->chain].prev = k;
  g->chain = k;
}

/* ---- the head ---- */

/* Logical position of the in-memory head. */
uint64_t
mem_head_lpos (struct hhc_log *log)
{
  if (!log->rebased)
    return log->phead_lpos;
  if (log->head_seq < log->written_seq)
    return ring_of (log, log->head_seq)->lpos;
  return log->tail_lpos;
}

/* Sequence number of the in-memory head (see mem_head_lpos). */
uint64_t
mem_head_seq (struct hhc_log *log)
{
  return log->head_seq < log->written_seq ? log->head_seq : log->written_seq;
}

uint64_t
used_bytes (struct hhc_log *log)
{
  uint64_t h = log->rebased ? mem_head_lpos (log) : log->phead_lpos;
  return log->tail_lpos - h;
}

void
advance_head (struct hhc_log *log)
{
  while (log->head_seq < log->written_seq)
    {
      struct seg *g = ring_of (log, log->head_seq);
      if (g->state != SEG_WRITTEN || g->live > 0)
        break;
      log->head_seq++;
    }
}

/* ---- deaths ---- */

/* Deaths whose superseding segment is now under a durable barrier. */
void
apply_deaths (struct hhc_log *log)
{
  while (log->deaths_done < log->deaths.len
         && log->deaths.ptr[log->deaths_done].seq <= log->durable_barrier)
    {
      log->ring[log->deaths.ptr[log->deaths_done].ring].live--;
      log->deaths_done++;
    }
  if (log->deaths_done == log->deaths.len)
    log->deaths.len = log->deaths_done = 0;
  advance_head (log);
}

/* How many deaths wait for a barrier has no small bound (every entry
 * superseded since the last one): the writer makes room for a
 * segment's deaths before it writes the segment (write_buffer), where
 * failing costs only the log (its existing fallback), not an entry
 * that would stay live for ever and pin the head.
 */
int
deaths_reserve (struct hhc_log *log, size_t n)
{
  struct death_vec *v = &log->deaths;
  size_t want = v->len + n, ncap;
  struct death *p;

  if (want <= v->cap)
    return 0;
  ncap = HHC_MAX (HHC_MAX (2 * v->cap, want), (size_t)16);
  if ((p = realloc (v->ptr, ncap * sizeof *p)) == NULL)
    return ENOMEM;
  v->ptr = p;
  v->cap = ncap;
  return 0;
}

/* ---- allocation ---- */

/* Ring slots, one per segment from the head to the newest (32 bytes
 * of RAM each).  One per 4 KiB of region up to RING_EXACT_MAX (a 4 GiB
 * region): every segment is at least that long, so the ring never
 * limits such a log.  A larger region gets one per RING_COARSE bytes
 * (512 MiB of RAM per TiB of log instead of 8 GiB), and the log then
 * also counts as full while every slot is in use (room_for): it holds
 * fewer segments than its region could when they are small (FLUSHes
 * of a few blocks each), and write-back frees slots as it frees room.
 */
#define RING_EXACT_MAX (UINT64_C (1) << 20)
#define RING_COARSE (64 * 1024)

static uint32_t
ring_slots (uint64_t region_size, uint32_t cap)
{
  uint64_t n = region_size / LOG_ALIGN;

  if (n > RING_EXACT_MAX)
    n = HHC_MAX (RING_EXACT_MAX, region_size / RING_COARSE);
  if (cap && n > cap)
    n = cap;
  return n;
}

/* Fixed-size arrays of a vector (it never grows past cap). */
#define VEC_ALLOC(v, n)                                                        \
  ((v)->len = 0, (v)->cap = (n),                                               \
   ((v)->ptr = malloc ((size_t)(n) * sizeof *(v)->ptr)) != NULL)

/* A buffer's memory: everything filling it takes (struct buf). */
static int
alloc_buf (struct hhc_log *log, struct buf *b)
{
  size_t hmax = log_seg_hdr_len (log->max_blocks, log->rev_cap);

  b->mem = hhc_alloc_aligned (hmax + (size_t)log->max_blocks * log->bs);
  b->data = b->mem ? b->mem + hmax : NULL;
  b->mark = hhc_alloc_aligned (LOG_ALIGN); /* its wrap marker */
  b->lbas = malloc ((size_t)log->max_blocks * 8);
  b->keys = malloc ((size_t)log->max_blocks * 4);
  if (!b->mem || !b->mark || !b->lbas || !b->keys
      || !VEC_ALLOC (&b->revokes, log->rev_cap)
      || !VEC_ALLOC (&b->deaths, (size_t)log->max_blocks + log->rev_cap))
    return ENOMEM;
  return 0;
}

int
alloc_mem (struct hhc_log *log, unsigned nbuffers, uint32_t nkeys)
{
  size_t hmax = log_seg_hdr_len (log->max_blocks, log->rev_cap);

  log->nkeys = nkeys;
  log->ring_cap = ring_slots (log->region_size, log->ring_max) + nbuffers + 2;
  log->ring = calloc (log->ring_cap, sizeof *log->ring);
  log->keys = malloc ((size_t)HHC_MAX (nkeys, 1) * sizeof *log->keys);
  log->unlogged = calloc ((nkeys + 63) / 64 + 1, 8);
  log->nbufs = nbuffers;
  log->bufs = calloc (nbuffers, sizeof *log->bufs);
  /* The writer's: the largest header. */
  log->hdrbuf = hhc_alloc_aligned (hmax);
  log->hdrcap = log->hdrbuf ? hmax : 0;
  if (!log->ring || !log->keys || !log->unlogged || !log->bufs || !log->hdrbuf)
    return ENOMEM;
  for (uint32_t k = 0; k < nkeys; k++)
    log->keys[k] = (struct key){ 0, LOG_NONE, 0, LOG_NONE, LOG_NONE };
  for (unsigned i = 0; i < nbuffers; i++)
    {
      struct buf *b = &log->bufs[i];
      if (alloc_buf (log, b) != 0)
        return ENOMEM;
      b->next = log->freelist;
      log->freelist = b;
    }
  return 0;
}
