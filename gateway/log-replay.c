/* Replay (the SSD was lost): the segments of the best mirror's chain
 * from the head hint (or the last barrier's base, if later) to the
 * last segment with the barrier flag, into the backend.  Per segment
 * first its revokes, then its blocks: last writer wins.  The headers
 * are read first into a map from LBA to where its data is (or revoked);
 * the surviving blocks, sorted by where they are on the device, are
 * then read in runs and written once each (log-stream.c).
 *
 * No lock: after log_open, before log_start.
 */
#include <config.h>

#include "common.h"
#include "log_int.h"

/* LBA -> device offset of its data (off UINT64_MAX: revoked; lba
 * UINT64_MAX: a free slot).  Slots are the stream's replay_blk, so the
 * surviving blocks are compacted in place (no second array at the
 * peak: 16 bytes a slot, 2-4 slots an entry of the plan).
 */
struct rmap {
  struct replay_blk *e;
  size_t cap, n;
};

static uint64_t *
rmap_slot (struct rmap *m, uint64_t lba)
{
  size_t i = hhc_hash64 (lba) & (m->cap - 1);

  while (m->e[i].lba != UINT64_MAX && m->e[i].lba != lba)
    i = (i + 1) & (m->cap - 1);
  if (m->e[i].lba == UINT64_MAX)
    {
      m->e[i].lba = lba;
      m->e[i].off = UINT64_MAX;
      m->n++;
    }
  return &m->e[i].off;
}

/* The segments to replay: scan indexes first..last (-1: none), how
 * many entries they hold and their largest header.
 */
struct rplan {
  long first, last;
  uint64_t entries;
  uint32_t maxhl;
};

static void
replay_plan (struct hhc_log *log, struct rplan *p)
{
  struct scan *s = &log->scan;
  uint64_t start_seq;

  p->first = -1;
  p->last = s->last_barrier;
  p->entries = 0;
  p->maxhl = LOG_ALIGN;
  if (p->last < 0)
    return;
  start_seq = HHC_MAX (log->hint_seq, s->segs.ptr[p->last].base);
  for (long i = 0; i <= p->last; i++)
    if (s->segs.ptr[i].seq >= start_seq)
      {
        if (p->first < 0)
          p->first = i;
        p->entries += s->segs.ptr[i].nblocks + s->segs.ptr[i].nrevokes;
        p->maxhl = HHC_MAX (p->maxhl, s->segs.ptr[i].hdr_len);
      }
}

/* One segment's header (read into hdr) into the map. */
static int
map_segment (struct hhc_log *log, struct mirror *m, const struct seg_info *si,
             unsigned char *hdr, struct rmap *map)
{
  uint64_t nblocks = (log->volume_size + log->bs - 1) / log->bs;
  uint64_t phys = si->lpos % log->region_size;
  int r;

  if ((r = dev_pread (m->dev, hdr, si->hdr_len, LOG_REGION_OFF + phys)) != 0)
    return r;
  for (uint32_t j = 0; j < si->nrevokes; j++)
    *rmap_slot (map, log_seg_revoke (hdr, si->nblocks, j)) = UINT64_MAX;
  for (uint32_t j = 0; j < si->nblocks; j++)
    {
      uint64_t lba = log_seg_lba (hdr, j);
      if (lba >= nblocks)
        {
          hhc_msg (log->msgfn, HHC_MSG_ERROR,
                   "log %s: segment %" PRIu64 " names block %" PRIu64
                   " beyond the volume: refusing to replay",
                   m->dev->name, si->seq, lba);
          return EINVAL;
        }
      *rmap_slot (map, lba)
          = LOG_REGION_OFF + phys + si->hdr_len + (uint64_t)j * log->bs;
    }
  return 0;
}

static int
by_off (const void *a, const void *b)
{
  uint64_t x = ((const struct replay_blk *)a)->off;
  uint64_t y = ((const struct replay_blk *)b)->off;

  return (x > y) - (x < y);
}

/* Every block the map holds (not revoked), in log order: the map's
 * array, compacted (the map is gone after).
 */
static void
surviving (struct rmap *map, struct replay_blk **vp, size_t *np)
{
  struct replay_blk *v = map->e, *small;
  size_t n = 0;

  for (size_t i = 0; i < map->cap; i++)
    if (v[i].lba != UINT64_MAX && v[i].off != UINT64_MAX)
      v[n++] = v[i];
  map->e = NULL;
  if ((small = realloc (v, (n + 1) * sizeof *v)) != NULL)
    v = small;
  qsort (v, n, sizeof *v, by_off);
  *vp = v;
  *np = n;
}

/* The map of the planned segments: a hash of at least twice as many
 * slots as entries.
 */
static int
replay_map (struct hhc_log *log, struct mirror *m, const struct rplan *p,
            struct rmap *map)
{
  HHC_CLEANUP_FREE unsigned char *hdr = hhc_alloc_aligned (p->maxhl);
  int r = 0;

  map->cap = 16;
  while (map->cap < 2 * p->entries + 16)
    map->cap *= 2;
  map->e = malloc (map->cap * sizeof *map->e);
  if (!map->e || !hdr)
    return ENOMEM;
  memset (map->e, 0xff, map->cap * sizeof *map->e);
  hhc_msg (log->msgfn, HHC_MSG_INFO,
           "log replay: segments %" PRIu64 " to %" PRIu64 " from %s",
           log->scan.segs.ptr[p->first].seq, log->scan.segs.ptr[p->last].seq,
           m->dev->name);
  for (long i = p->first; r == 0 && i <= p->last; i++)
    r = map_segment (log, m, &log->scan.segs.ptr[i], hdr, map);
  return r;
}

/* log_replay's sink: one block per call of the caller's write. */
struct one_by_one {
  int (*write) (void *opaque, const void *buf, uint64_t lba);
  void (*progress) (void *opaque, uint64_t done, uint64_t total);
  void *opaque;
  uint32_t bs;
};

static int
one_write (void *opaque, const void *buf, uint64_t lba, uint32_t n)
{
  struct one_by_one *o = opaque;
  int r = 0;

  for (uint32_t i = 0; i < n && r == 0; i++)
    r = o->write (o->opaque, (const char *)buf + (size_t)i * o->bs, lba + i);
  return r;
}

static void
one_progress (void *opaque, uint64_t done, uint64_t total)
{
  struct one_by_one *o = opaque;

  o->progress (o->opaque, done, total);
}

int
log_replay (struct hhc_log *log,
            int (*write) (void *opaque, const void *buf, uint64_t lba),
            void (*progress) (void *opaque, uint64_t done, uint64_t total),
            void *opaque)
{
  struct one_by_one o = { write, progress, opaque, log->bs };
  struct log_sink sink
      = { one_write, progress ? one_progress : NULL, &o, 1, 1, 0 };

  return log_replay_sink (log, &sink);
}

/* The map, its surviving blocks in log order, streamed into sink. */
static int
replay_run (struct hhc_log *log, struct mirror *m, const struct rplan *p,
            const struct log_sink *sink, size_t *np, uint64_t *reads)
{
  struct rmap map = { 0 };
  struct replay_blk *v = NULL;
  int r = replay_map (log, m, p, &map);

  if (r == 0)
    surviving (&map, &v, np);
  free (map.e);
  if (r == 0)
    r = replay_stream (m->dev, log->bs, v, *np, sink, reads);
  free (v);
  return r;
}

int
log_replay_sink (struct hhc_log *log, const struct log_sink *sink)
{
  struct mirror *m = &log->m[log->best];
  struct rplan p;
  uint64_t reads = 0;
  size_t n = 0;
  int r;

  replay_plan (log, &p);
  if (p.last < 0)
    {
      hhc_msg (log->msgfn, HHC_MSG_INFO,
               "log replay: no complete barrier in the log, nothing to "
               "replay");
      return 0;
    }
  if (p.first < 0)
    return 0;
  r = replay_run (log, m, &p, sink, &n, &reads);
  if (r == 0)
    hhc_msg (log->msgfn, HHC_MSG_INFO,
             "log replay: %zu blocks replayed in %" PRIu64 " reads of the log",
             n, reads);
  else
    hhc_msg (log->msgfn, HHC_MSG_ERROR, "log replay failed: %s", strerror (r));
  return r;
}
