/* Offline access to the HDD log (offline.h): open a log's mirrors
 * without writing, inspect them for hhcctl check, count or run a
 * replay for hhcctl format and recover.
 *
 * Everything goes through log.c (log_open with the caller's devices,
 * log_inspect_*, log_replay) and the log's codec (log-format.h): the
 * blank test decodes the superblocks as the log does, and the
 * inspection results are handed on in offline.h's own structs, which
 * hold the codec's, so that hhcctl needs no log.h.
 */
#include <config.h>

#include "common.h"
#include "dev.h"
#include "log.h"
#include "logpair_int.h"
#include "offline.h"

/* Does a device hold no log?  What the log would use as a blank device:
 * neither superblock copy has the log's magic, or it is void
 * (log_sb_decode_mirror, as read_sb decides).  A corrupt superblock is
 * not blank: log_open refuses it.
 */
static int
log_dev_blank (struct hhc_dev *dev, bool *blank)
{
  struct log_sb sb;
  struct log_sb_read rd;
  int r;

  if (dev->size < LOG_SB_AREA)
    {
      *blank = true;
      return 0;
    }
  r = log_dev_sb (dev, &sb, &rd);
  if (r == EIO || r == ENOMEM)
    return r == EIO ? rd.err : r;
  *blank = r == ENOENT || r == ESTALE;
  return 0;
}

int
offline_log_blank (struct hhc_dev *dev)
{
  HHC_CLEANUP_FREE void *z = hhc_alloc_aligned (LOG_SB_SIZE);
  int r;

  if (z == NULL)
    return ENOMEM;
  if (dev->size < LOG_SB_AREA)
    return offline_blank (dev, dev->size);
  if ((r = dev_pwrite (dev, z, LOG_SB_SIZE, 0)) != 0
      || (r = dev_pwrite (dev, z, LOG_SB_SIZE, LOG_VOID_OFF)) != 0
      || (r = dev_sync (dev)) != 0
      || (r = dev_pwrite (dev, z, LOG_SB_SIZE, LOG_SB_SIZE)) != 0)
    return r;
  return dev_sync (dev);
}

/* The log_conf of ls's open devices (the volume the log records). */
static struct log_conf
logset_conf (struct offline_logset *ls, hhc_msg_fn msgfn)
{
  return (struct log_conf){
    .paths = ls->paths,
    .npaths = ls->n,
    .block_size = 512,
    .msgfn = msgfn,
    .devs = ls->devs,
  };
}

int
offline_logset_open (struct offline_logset *ls, hhc_msg_fn msgfn,
                     unsigned *failed)
{
  static const uint8_t zero[16];
  enum log_found found;
  int r;

  *failed = ls->n;
  for (unsigned i = 0; i < ls->n; i++)
    {
      if ((r = log_dev_blank (ls->devs[i], &ls->blank[i])) != 0)
        {
          *failed = i;
          return r;
        }
      ls->nblank += ls->blank[i];
    }
  if (ls->nblank == ls->n)
    return 0;
  struct log_conf lc = logset_conf (ls, msgfn);
  return log_open (&lc, zero, &ls->log, &found);
}

int
offline_behind_log (struct offline_logset *ls, const char *cache_name,
                    const struct offline_cache *cc, hhc_msg_fn msgfn)
{
  struct log_conf lc = logset_conf (ls, msgfn);

  return logpair_behind (&lc, cache_name, cc->sb.uuid, cc->linked_log,
                         cc->known_epoch, cc->record_epoch);
}

void
offline_logset_close_log (struct offline_logset *ls)
{
  log_close (ls->log);
  ls->log = NULL;
}

void
offline_logset_close (struct offline_logset *ls)
{
  offline_logset_close_log (ls);
  for (unsigned i = 0; i < ls->n; i++)
    {
      dev_close (ls->devs[i]);
      ls->devs[i] = NULL;
    }
}

int
offline_log_open (const char *const *paths, unsigned n, hhc_msg_fn msgfn,
                  struct hhc_log **logp)
{
  static const uint8_t zero[16];
  enum log_found found;
  struct log_conf lc = {
    .paths = paths,
    .npaths = n,
    .block_size = 512,
    .msgfn = msgfn,
  };

  return log_open (&lc, zero, logp, &found);
}

void
offline_log_close (struct hhc_log *log)
{
  log_close (log);
}

void
offline_log_info (struct hhc_log *log, struct offline_log_info *info)
{
  log_inspect_sb (log, &info->sb, &info->best);
}

static void
take_seg (struct offline_seg *s, const struct log_seg_desc *d)
{
  *s = (struct offline_seg){ .hdr = d->hdr, .off = d->off, .len = d->len };
}

int
offline_log_chain (struct hhc_log *log, unsigned mirror,
                   struct offline_chain *c)
{
  struct log_chain_desc d = { 0 };
  int r;

  memset (c, 0, sizeof *c);
  if ((r = log_inspect_chain (log, mirror, &d)) != 0)
    return r;
  c->segs = calloc (d.n + 1, sizeof *c->segs);
  if (c->segs == NULL)
    {
      free (d.segs);
      return ENOMEM;
    }
  for (size_t k = 0; k < d.n; k++)
    take_seg (&c->segs[k], &d.segs[k]);
  c->n = d.n;
  c->last_barrier = d.last_barrier;
  c->end_seq = d.end_seq;
  c->end_off = d.end_off;
  free (d.segs);
  return 0;
}

void
offline_chain_free (struct offline_chain *c)
{
  free (c->segs);
  c->segs = NULL;
  c->n = 0;
}

int
offline_log_segment (struct hhc_log *log, unsigned mirror, uint64_t off,
                     struct offline_seg *d)
{
  struct log_seg_desc sd = { 0 };
  int r = log_inspect_segment (log, mirror, off, &sd);

  take_seg (d, &sd);
  return r;
}

/* Mark the 4 KiB blocks of the region that the chain covers. */
static void
mark_chain (const struct offline_chain *c, uint64_t nb, uint8_t *seen)
{
  for (size_t k = 0; k < c->n; k++)
    for (uint64_t b = c->segs[k].off / 4096;
         b < (c->segs[k].off + c->segs[k].len) / 4096 && b < nb; b++)
      seen[b / 8] |= 1 << (b % 8);
}

/* Count the segment d, found at no place of the chain c, among the
 * orphans o if it is one (of this run or later, from the chain's end
 * on: base is the chain's last).
 */
static void
count_orphan (const struct offline_chain *c, uint64_t base,
              const struct log_seg_hdr *d, struct offline_orphans *o)
{
  if ((d->flags & LOG_F_WRAP) || d->seq < c->end_seq || d->base < base)
    return;
  if (o->n++ == 0 || d->seq < o->first)
    o->first = d->seq;
  o->last = HHC_MAX (o->last, d->seq);
  if (d->flags & LOG_F_BARRIER)
    {
      o->barriers++;
      o->last_barrier = HHC_MAX (o->last_barrier, d->seq);
    }
}

void
offline_log_sweep (struct hhc_log *log, unsigned mirror,
                   const struct offline_chain *c, uint64_t region,
                   struct offline_orphans *o)
{
  uint64_t nb = region / 4096;
  uint64_t base = c->n ? c->segs[c->n - 1].hdr.base : 0;
  HHC_CLEANUP_FREE uint8_t *seen = calloc (nb / 8 + 1, 1);
  struct offline_seg d;

  memset (o, 0, sizeof *o);
  if (seen == NULL)
    {
      o->error = ENOMEM;
      return;
    }
  mark_chain (c, nb, seen);
  for (uint64_t b = 0; b < nb; b++)
    {
      if (seen[b / 8] & (1 << (b % 8)))
        continue;
      int r = offline_log_segment (log, mirror, b * 4096, &d);
      if (r == ENOENT)
        continue;
      if (r == EILSEQ)
        {
          o->damaged += d.hdr.seq > c->end_seq && d.hdr.base >= base
                        && !(d.hdr.flags & LOG_F_WRAP);
          continue;
        }
      if (r)
        {
          o->error = r;
          return;
        }
      count_orphan (c, base, &d.hdr, o);
      b += d.len / 4096 - 1; /* the rest of it */
    }
}

int
offline_log_replay (struct hhc_log *log,
                    int (*write) (void *opaque, const void *buf, uint64_t lba,
                                  uint32_t n),
                    void (*progress) (void *opaque, uint64_t done,
                                      uint64_t total),
                    void *opaque, unsigned writers)
{
  const char *identity;
  uint64_t size;
  uint32_t bs;

  log_volume (log, &identity, &size, &bs);
  struct log_sink sink
      = { write, progress, opaque, writers, HHC_MAX ((1u << 20) / bs, 1u), 0 };
  return log_replay_sink (log, &sink);
}

static int
count_block (void *opaque, const void *buf, uint64_t lba)
{
  (*(uint64_t *)opaque)++;
  return 0;
}

int
offline_log_count (struct hhc_log *log, uint64_t *n)
{
  *n = 0;
  return log_replay (log, count_block, NULL, n);
}
