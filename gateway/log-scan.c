/* Scanning a log mirror: the chain of segments that replay follows,
 * from the head hint while sequence numbers, chain links and checksums
 * verify; every mirror at open, at once, the one with the newest
 * barrier kept; and the read-only inspection of a chain (hhcctl
 * check).  Reads only; no lock (log_open, before the writer, or
 * offline).
 */
#include <config.h>

#include "common.h"
#include "log_int.h"

/* Segments are checksummed in reads of at most this. */
#define SCAN_CHUNK (1024 * 1024)

void
scan_free (struct scan *s)
{
  seginfo_vec_reset (&s->segs);
}

/* Decode the segment header read at phys (its first LOG_ALIGN bytes in
 * h) into *sh: true if it is segment seq of this log, and fits.
 */
static bool
header_ok (struct hhc_log *log, const unsigned char *h, uint64_t seq,
           uint64_t phys, struct log_seg_hdr *sh)
{
  if (log_seg_decode (h, sh) != 0 || sh->seq != seq
      || memcmp (sh->log_uuid, log->uuid, 16) != 0
      || sh->seg_id != phys / LOG_ALIGN)
    return false;
  return log_seg_fits (sh, phys, log->region_size, log->bs);
}

/* A read-ahead window over one mirror's region.  A scan reads the
 * chain in order, so one request serves the headers and data of every
 * segment in it: a header and its data were two requests of their
 * own, and on a device where each request costs a seek or a round trip
 * (an HDD, a mirror over NBD) a chain of small barrier segments took
 * seconds per thousand of them.  The reads start at WIN_FIRST and
 * double up to the cap, and the buffer grows with them, so that a
 * short chain (a small log, a fuzzer's input) costs little.  A read
 * that fails is tried again for only the bytes asked for: the sectors
 * past the chain's tail may be unreadable (a write the power cut
 * tore), and a read ahead into them must not end the chain early.
 */
#define WIN_FIRST (64 * 1024)

struct scanwin {
  struct hhc_dev *dev;
  uint64_t region;  /* the region's size */
  unsigned char *p; /* size bytes */
  size_t size;
  size_t cap;     /* no read asks for more */
  size_t next;    /* bytes the next read ahead asks for (at most cap) */
  uint64_t start; /* region offset of p[0] */
  size_t len;     /* bytes read from start */
};

/* A window whose reads ask for at most cap bytes (and never go past
 * the region) on mirror m's region.
 */
static void
win_init (struct scanwin *w, struct hhc_log *log, struct mirror *m, size_t cap)
{
  *w = (struct scanwin){ .dev = m->dev, .region = log->region_size };
  w->cap = HHC_MIN ((uint64_t)cap, log->region_size);
  w->next = HHC_MIN ((size_t)WIN_FIRST, w->cap);
}

static void
win_free (struct scanwin *w)
{
  free (w->p);
}

/* Read len bytes from off into the window (grown first if need be).
 * 0, ENOMEM or the read's errno (the window then empty).
 */
static int
win_fill (struct scanwin *w, uint64_t off, size_t len)
{
  w->len = 0;
  if (len > w->size)
    {
      free (w->p);
      w->size = 0;
      if ((w->p = hhc_alloc_aligned (len)) == NULL)
        return ENOMEM;
      w->size = len;
    }
  int r = dev_pread (w->dev, w->p, len, LOG_REGION_OFF + off);
  if (r == 0)
    {
      w->start = off;
      w->len = len;
    }
  return r;
}

/* At *out, up to max bytes of the region from off (off below the
 * region's end): *got of them, at least one, and all of
 * min (max, cap, the rest of the region) if all is set; read from off
 * unless the window holds off (and those bytes, if all).  0, ENOMEM
 * or the read's errno.
 */
static int
win_at (struct scanwin *w, uint64_t off, size_t max, bool all,
        const unsigned char **out, size_t *got)
{
  size_t need = HHC_MIN (HHC_MIN (max, w->cap), w->region - off);
  uint64_t end = w->start + w->len;

  if (off < w->start || off >= end || (all && off + need > end))
    {
      size_t ahead = HHC_MIN (HHC_MAX (w->next, need), w->region - off);
      ahead = HHC_MIN (ahead, w->cap);
      int r = win_fill (w, off, ahead);
      if (r && r != ENOMEM && need < ahead)
        r = win_fill (w, off, need);
      if (r)
        return r;
      w->next = HHC_MIN (w->next * 2, w->cap);
    }
  *out = w->p + (off - w->start);
  *got = HHC_MIN (max, w->start + w->len - off);
  return 0;
}

/* n contiguous bytes of the region at off (n at most cap and the rest
 * of the region) at *out.  0, EILSEQ (n is more than that), ENOMEM or
 * the read's errno.
 */
static int
win_get_all (struct scanwin *w, uint64_t off, size_t n,
             const unsigned char **out)
{
  size_t got;
  int r = win_at (w, off, n, true, out, &got);

  if (r == 0 && got < n)
    return EILSEQ;
  return r;
}

/* The checksum of the segment at phys whose header is sh, total bytes
 * of header and data, read through w.  0 (*sum set), EILSEQ (it would
 * run past the region), ENOMEM, or the read's errno.
 */
static int
segment_sum (struct scanwin *w, const struct log_seg_hdr *sh, uint64_t phys,
             uint64_t total, uint64_t *sum)
{
  struct log_segck ck;
  const unsigned char *p;
  size_t got;
  int r;

  if (phys + HHC_ROUND_UP (total, 512) > w->region)
    return EILSEQ;
  if ((r = win_get_all (w, phys, LOG_ALIGN, &p)) != 0)
    return r;
  log_segck_init (&ck, sh->flags);
  log_segck_add_header (&ck, p, LOG_ALIGN);
  for (uint64_t done = LOG_ALIGN; done < total; done += got)
    {
      size_t max = HHC_MIN (total - done, (uint64_t)SCAN_CHUNK);
      if ((r = win_at (w, phys + done, max, false, &p, &got)) != 0)
        return r;
      log_segck_add (&ck, p, got);
    }
  *sum = log_segck_final (&ck);
  return 0;
}

static int
scan_append (struct scan *s, const struct log_seg_hdr *sh, uint64_t lpos)
{
  struct seg_info si = { sh->seq,     sh->base,    lpos,        sh->flags,
                         sh->hdr_len, sh->nblocks, sh->nrevokes };

  if (seginfo_vec_append (&s->segs, si))
    return ENOMEM;
  if (sh->flags & LOG_F_BARRIER)
    s->last_barrier = s->segs.len - 1;
  return 0;
}

/* Follow the chain of segments from the head hint on mirror m. */
int
scan_mirror (struct hhc_log *log, struct mirror *m, uint64_t hint_off,
             uint64_t hint_seq, struct scan *s)
{
  struct scanwin w __attribute__ ((cleanup (win_free))) = { 0 };
  uint64_t lpos = hint_off, seq = hint_seq, start = hint_off;
  bool wrapped = false, have_prev = false;
  uint32_t prev_crc = 0;
  uint64_t sum;

  memset (s, 0, sizeof *s);
  s->last_barrier = -1;
  win_init (&w, log, m, SCAN_CHUNK);
  while (lpos - start < log->region_size)
    {
      uint64_t phys = lpos % log->region_size;
      const unsigned char *h;
      struct log_seg_hdr sh;
      int r;
      if (phys + LOG_ALIGN > log->region_size)
        {
          lpos += log->region_size - phys;
          continue;
        }
      if ((r = win_get_all (&w, phys, LOG_ALIGN, &h)) == ENOMEM)
        return ENOMEM;
      if (r || !header_ok (log, h, seq, phys, &sh))
        break;
      /* Each segment names its predecessor's crc: a stale segment of a
       * crashed run whose sequence number fits is not taken for ours.
       */
      if (have_prev && sh.prev_checksum != prev_crc)
        break;
      r = segment_sum (&w, &sh, phys,
                       sh.hdr_len + (uint64_t)sh.nblocks * log->bs, &sum);
      if (r == ENOMEM)
        return ENOMEM;
      if (r || sum != sh.checksum)
        break;
      if (sh.flags & LOG_F_WRAP)
        {
          if (wrapped || sh.nblocks)
            break;
          wrapped = true;
          lpos += log->region_size - phys;
          continue;
        }
      wrapped = false;
      prev_crc = log_seg_link (sh.checksum);
      have_prev = true;
      if (scan_append (s, &sh, lpos))
        return ENOMEM;
      lpos += sh.hdr_len + log_seg_data_len (sh.nblocks, log->bs);
      seq++;
    }
  s->end_lpos = lpos;
  s->end_seq = seq;
  s->end_crc = prev_crc;
  return 0;
}

/* ---- every mirror, at open ---- */

struct scan_job {
  struct hhc_log *log;
  unsigned i; /* the mirror */
  struct scan s;
  int r;
};

/* Where m's scan starts: the head its own superblock records (one of
 * this log's region: the same size), else the log's.
 */
static uint64_t
mirror_hint_off (const struct hhc_log *log, const struct mirror *m)
{
  return m->hint_seq && m->hint_off < log->region_size ? m->hint_off
                                                       : log->hint_off;
}

static uint64_t
mirror_hint_seq (const struct hhc_log *log, const struct mirror *m)
{
  return m->hint_seq && m->hint_off < log->region_size ? m->hint_seq
                                                       : log->hint_seq;
}

static void *
scan_job_run (void *arg)
{
  struct scan_job *j = arg;
  struct mirror *m = &j->log->m[j->i];

  j->r = scan_mirror (j->log, m, mirror_hint_off (j->log, m),
                      mirror_hint_seq (j->log, m), &j->s);
  return NULL;
}

/* Is s a better chain than the best so far (log->scan, none while its
 * end_seq is 0): a newer last barrier, or the same one and more after
 * it?
 */
static bool
scan_better (const struct hhc_log *log, const struct scan *s)
{
  long lb = s->last_barrier, cb = log->scan.last_barrier;

  return log->scan.end_seq == 0
         || (lb >= 0
             && (cb < 0 || s->segs.ptr[lb].seq > log->scan.segs.ptr[cb].seq))
         || (lb == cb && s->end_seq > log->scan.end_seq);
}

/* Is mirror m's chain the chosen one (log->scan): the same segments
 * (the last one's link equal: each names its predecessor's), or none
 * in both?  Not a shorter one: a chain may end early by damage (a read
 * error, a lost region), and a mirror that vouched for a longer chain
 * it had lost let a failed mirror's stale chain be redone (fourth
 * review).
 */
static bool
chain_same (const struct hhc_log *log, const struct mirror *m)
{
  const struct scan *s = &log->scan;

  return m->scan_end_seq == s->end_seq
         && (s->segs.len == 0 || m->scan_end_crc == s->end_crc);
}

/* The generation that vouches for the chosen chain (log_open_generation,
 * logpair_stale): the newest superblock among the mirrors of the newest
 * epoch whose chain is the same.  Only a complete mirror takes a
 * superblock (joining ones are held: release_sb_hold), and one that
 * failed owes a newer generation to the others before the next FLUSH
 * returns (record_failures), so such a mirror held every barrier a
 * FLUSH was acknowledged on, and so does the same chain on another.
 * Not the chosen mirror's own: when a failed mirror ties with the
 * others, it is chosen (mirror order), and its older generation refused
 * a restart given every mirror (third review).  One that went further
 * (pipelined barriers it had before it failed) is still refused with
 * the others: the error asks to leave a failed mirror out.
 */
static void
chain_generation (struct hhc_log *log)
{
  for (unsigned i = 0; i < log->nm; i++)
    if (log->m[i].scanned && chain_same (log, &log->m[i]))
      log->chain_gen = HHC_MAX (log->chain_gen, log->m[i].sb_gen);
}

/* A mirror whose chain is shorter than the best one's joins (as one
 * with an older superblock does: log-open.c), superblocks held until
 * it is complete.
 */
static void
mark_behind (struct hhc_log *log)
{
  const struct mirror *b = &log->m[log->best];

  for (unsigned i = 0; i < log->nm; i++)
    {
      struct mirror *m = &log->m[i];
      if (!m->blank
          && (m->scan_lb_seq != b->scan_lb_seq
              || m->scan_end_seq != b->scan_end_seq))
        m->joining = m->sb_hold = true;
    }
}

int
scan_all (struct hhc_log *log)
{
  struct scan_job jobs[LOG_MAX_MIRRORS];
  pthread_t th[LOG_MAX_MIRRORS];
  bool started[LOG_MAX_MIRRORS] = { false };
  uint64_t best_off = log->hint_off, best_seq = log->hint_seq;
  unsigned n = 0;
  int r = 0;

  for (unsigned i = 0; i < log->nm; i++)
    if (!log->m[i].blank)
      jobs[n++] = (struct scan_job){ .log = log, .i = i };
  /* The mirrors are separate disks: each is read by a thread of its
   * own (the first by this one; one that cannot start runs here too),
   * so a start reads them in the time of one.
   */
  for (unsigned k = 1; k < n; k++)
    started[k] = pthread_create (&th[k], NULL, scan_job_run, &jobs[k]) == 0;
  for (unsigned k = 0; k < n; k++)
    if (!started[k])
      scan_job_run (&jobs[k]);
  for (unsigned k = 1; k < n; k++)
    if (started[k])
      pthread_join (th[k], NULL);
  for (unsigned k = 0; k < n && r == 0; k++)
    r = jobs[k].r;
  /* In mirror order, as the choice was made when they were read one
   * after the other.
   */
  for (unsigned k = 0; k < n; k++)
    {
      struct mirror *m = &log->m[jobs[k].i];
      long lb = jobs[k].s.last_barrier;
      m->scan_lb_seq = lb >= 0 ? jobs[k].s.segs.ptr[lb].seq : 0;
      m->scan_end_seq = jobs[k].s.end_seq;
      m->scan_end_crc = jobs[k].s.end_crc;
      /* Only a mirror of the newest run (epoch, log_int.h): one of an
       * older run was left out of the newest, or failed before that
       * run's start ended; its chain may even run further, in a
       * history that run no longer has (two histories under one log's
       * sequence numbers).  What a FLUSH covered in the newest run is
       * on every mirror of it.
       */
      bool newest
          = m->sb_gen >> LOG_EPOCH_SHIFT == log->open_gen >> LOG_EPOCH_SHIFT;
      m->scanned = r == 0 && newest;
      if (m->scanned && scan_better (log, &jobs[k].s))
        {
          scan_free (&log->scan);
          log->scan = jobs[k].s;
          log->best = jobs[k].i;
          best_off = mirror_hint_off (log, m);
          best_seq = mirror_hint_seq (log, m);
        }
      else
        scan_free (&jobs[k].s);
    }
  /* The head of the chain read (replay, phead: log.c). */
  log->hint_off = best_off;
  log->hint_seq = best_seq;
  chain_generation (log);
  mark_behind (log);
  return r;
}

bool
log_chain_empty (struct hhc_log *log)
{
  return log->scan.segs.len == 0;
}

/* ---- read-only inspection (hhcctl check) ---- */

int
log_inspect_segment (struct hhc_log *log, unsigned i, uint64_t off,
                     struct log_seg_desc *d)
{
  struct scanwin w __attribute__ ((cleanup (win_free))) = { 0 };
  const unsigned char *h;
  struct log_seg_hdr sh;
  uint64_t sum;
  int r;

  if (i >= log->nm || off % LOG_ALIGN || off + LOG_ALIGN > log->region_size)
    return EINVAL;
  /* One segment: the header alone first, then its data, so that a
   * sweep of every position reads (and allocates) no more than that.
   */
  win_init (&w, log, &log->m[i], LOG_ALIGN);
  if ((r = win_get_all (&w, off, LOG_ALIGN, &h)) != 0)
    return r;
  if (log_seg_decode (h, &sh) == ENOENT
      || memcmp (sh.log_uuid, log->uuid, 16) != 0
      || sh.seg_id != off / LOG_ALIGN)
    return ENOENT;
  *d = (struct log_seg_desc){ .hdr = sh, .off = off };
  if (!header_ok (log, h, sh.seq, off, &sh))
    return EILSEQ;
  d->len = sh.hdr_len + log_seg_data_len (sh.nblocks, log->bs);
  uint64_t total = sh.hdr_len + (uint64_t)sh.nblocks * log->bs;
  w.cap = HHC_MIN ((uint64_t)SCAN_CHUNK, log->region_size);
  w.next = 0; /* no read ahead: the data, a chunk at a time */
  r = segment_sum (&w, &sh, off, total, &sum);
  if (r)
    return r;
  return sum == sh.checksum ? 0 : EILSEQ;
}

/* The chain scan s of mirror i, as c describes it: its headers read
 * again, through a window of WIN_FIRST bytes (small segments share a
 * read; a big one costs a read of its header's window).
 */
static int
describe_chain (struct hhc_log *log, unsigned i, const struct scan *s,
                struct log_chain_desc *c)
{
  struct scanwin w __attribute__ ((cleanup (win_free))) = { 0 };
  const unsigned char *h;
  struct log_seg_hdr sh;
  int r = 0;

  if ((c->segs = calloc (s->segs.len + 1, sizeof *c->segs)) == NULL)
    return ENOMEM;
  win_init (&w, log, &log->m[i], WIN_FIRST);
  for (size_t k = 0; r == 0 && k < s->segs.len; k++)
    {
      const struct seg_info *si = &s->segs.ptr[k];
      uint64_t phys = si->lpos % log->region_size;
      if ((r = win_get_all (&w, phys, LOG_ALIGN, &h)) != 0)
        break;
      log_seg_decode (h, &sh);
      c->segs[k] = (struct log_seg_desc){
        .hdr = sh,
        .off = phys,
        .len = si->hdr_len + log_seg_data_len (si->nblocks, log->bs),
      };
    }
  return r;
}

int
log_inspect_chain (struct hhc_log *log, unsigned i, struct log_chain_desc *c)
{
  struct scan s;
  int r;

  memset (c, 0, sizeof *c);
  c->last_barrier = -1;
  c->end_seq = log->hint_seq;
  c->end_off = log->hint_off;
  if (i >= log->nm)
    return EINVAL;
  if (log->m[i].blank)
    return 0;
  r = scan_mirror (log, &log->m[i], mirror_hint_off (log, &log->m[i]),
                   mirror_hint_seq (log, &log->m[i]), &s);
  if (r == 0)
    r = describe_chain (log, i, &s, c);
  if (r == 0)
    {
      c->n = s.segs.len;
      c->last_barrier = s.last_barrier;
      c->end_seq = s.end_seq;
      c->end_off = s.end_lpos % log->region_size;
    }
  else
    {
      free (c->segs);
      c->segs = NULL;
    }
  scan_free (&s);
  return r;
}

void
log_inspect_sb (struct hhc_log *log, struct log_sb *sb, unsigned *best)
{
  sb_of_log (log, sb);
  *best = log->best;
}
