/* hhcctl: the gateway's admin tool (hhcctl(8)).
 *
 *   hhcctl check   --cache PATH [--log PATH...]   verify, read-only
 *   hhcctl format  --cache PATH [--log PATH...] [--force]
 *   hhcctl mttdl   [--disks N] [--log-disks M] [--mttf-hdd H] ... [--json]
 *   hhcctl recover --log PATH [--log PATH...] --backend PATH|NBD-URI
 *
 * check and format work on devices no gateway has open (a running
 * gateway holds an exclusive flock on each; check reads anyway, with
 * a warning, format refuses).  check opens everything O_RDONLY through
 * a device of its own below (pwrite fails with EROFS), so nothing it
 * calls in the core can change a byte.
 *
 * Exit status of every command: 0 success (check: healthy), 1 an
 * error (check: a problem found), 2 a usage error.
 */
#include <config.h>

#include <fcntl.h>
#include <getopt.h>
#include <linux/fs.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "common.h"
#include "crc32c.h"
#include "dev.h"
#include "log.h"
#include "hhcctl-live.h"
#include "mttdl.h"

static bool quiet;
static bool quiet_core;                 /* drop the core's info messages */
static const char *cmd_name = "hhcctl"; /* "hhcctl CMD", for messages */

/* ---- messages ---- */

/* check's report: the core's errors and warnings count as its own. */
struct report {
  unsigned problems, warnings;
};
static struct report *report;

static void
report_line (const char *kind, const char *fmt, va_list ap)
{
  fputs (kind, stdout);
  vprintf (fmt, ap);
  putchar ('\n');
}

static void __attribute__ ((format (printf, 1, 2))) note (const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  report_line ("", fmt, ap);
  va_end (ap);
}

static void __attribute__ ((format (printf, 1, 2)))
problem (const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  report_line ("error: ", fmt, ap);
  va_end (ap);
  if (report)
    report->problems++;
}

static void __attribute__ ((format (printf, 1, 2)))
warning (const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  report_line ("warning: ", fmt, ap);
  va_end (ap);
  if (report)
    report->warnings++;
}

static void
log_cb (enum hhc_log_level level, const char *msg)
{
  if (report)
    {
      if (level == HHC_LOG_ERROR)
        problem ("%s", msg);
      else if (level == HHC_LOG_WARNING)
        warning ("%s", msg);
      else if (level == HHC_LOG_INFO && !quiet_core)
        note ("%s", msg);
      return;
    }
  if (level == HHC_LOG_DEBUG
      || ((quiet || quiet_core) && level == HHC_LOG_INFO))
    return;
  fprintf (stderr, "hhcctl: %s%s\n", level == HHC_LOG_ERROR ? "error: " : "",
           msg);
}

/* ---- command lines ---- */

/* A usage error: one line, exit status 2. */
static int __attribute__ ((format (printf, 1, 2)))
usage_error (const char *fmt, ...)
{
  va_list ap;

  fprintf (stderr, "%s: ", cmd_name);
  va_start (ap, fmt);
  vfprintf (stderr, fmt, ap);
  va_end (ap);
  fprintf (stderr, " (try '%s --help')\n", cmd_name);
  return 2;
}

/* getopt_long (with ":" first in optstring and opterr 0) returned c,
 * '?' or ':': name the option.
 */
static int
bad_option (int c, char **argv)
{
  const char *arg = argv[optind - 1];

  if (c == ':')
    return usage_error ("option '%s' needs a value", arg);
  if (optopt && strncmp (arg, "--", 2) != 0)
    return usage_error ("unknown option '-%c'", optopt);
  return usage_error ("unknown option '%s'", arg);
}

static int
parse_unsigned (const char *opt, const char *s, unsigned min, unsigned max,
                unsigned *v)
{
  char *end;
  unsigned long n;

  errno = 0;
  n = strtoul (s, &end, 10);
  if (errno || end == s || *end || *s == '-' || n < min || n > max)
    return usage_error ("%s must be a whole number from %u to %u, not '%s'",
                        opt, min, max, s);
  *v = n;
  return 0;
}

static int
parse_hours (const char *opt, const char *s, double *v)
{
  char *end;
  double d;

  errno = 0;
  d = strtod (s, &end);
  if (errno || end == s || *end || !isfinite (d) || d <= 0)
    return usage_error ("%s must be a positive number of hours, not '%s'", opt,
                        s);
  *v = d;
  return 0;
}

/* Collect a --log PATH. */
static int
add_log (const char **logs, unsigned *nlogs, const char *path)
{
  if (*nlogs == HHC_MAX_LOGS)
    return usage_error ("--log may be given at most %d times", HHC_MAX_LOGS);
  logs[(*nlogs)++] = path;
  return 0;
}

/* ---- read-only devices (check) ----
 *
 * A file or block device opened O_RDONLY, with a shared flock when it
 * can get one: a running gateway holds an exclusive one, so failing
 * to get it means the device is in use (it is read anyway).
 */

struct ro_dev {
  struct hhc_dev dev;
  int fd;
};

static int
ro_pread (struct hhc_dev *d, void *buf, size_t len, uint64_t off)
{
  struct ro_dev *f = (struct ro_dev *)d;
  char *p = buf;

  if (off + len > d->size)
    return EIO;
  while (len > 0)
    {
      ssize_t r = pread (f->fd, p, len, off);
      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0)
        return errno;
      if (r == 0) /* the file shrank: zeros */
        {
          memset (p, 0, len);
          return 0;
        }
      p += r;
      len -= r;
      off += r;
    }
  return 0;
}

static int
ro_pwrite (struct hhc_dev *d, const void *buf, size_t len, uint64_t off)
{
  return EROFS;
}

static int
ro_sync (struct hhc_dev *d)
{
  return EROFS;
}

static void
ro_close (struct hhc_dev *d)
{
  struct ro_dev *f = (struct ro_dev *)d;

  close (f->fd);
  free (d->name);
  free (f);
}

static const struct hhc_dev_ops ro_ops = {
  .pread = ro_pread,
  .pwrite = ro_pwrite,
  .sync = ro_sync,
  .close = ro_close,
};

/* Open path read-only; *busy: a gateway holds it. */
static int
ro_open (const char *path, struct hhc_dev **devp, bool *busy)
{
  struct ro_dev *f;
  struct stat st;
  uint64_t size;
  int fd, r;

  *busy = false;
  if (dev_is_nbd_uri (path))
    return dev_open_nbd (path, log_cb, devp);
  fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd == -1)
    {
      r = errno;
      problem ("%s: %s", path, strerror (r));
      return r;
    }
  if (fstat (fd, &st) == -1 || (!S_ISREG (st.st_mode) && !S_ISBLK (st.st_mode))
      || (S_ISBLK (st.st_mode) && ioctl (fd, BLKGETSIZE64, &size) == -1))
    {
      problem ("%s: not a regular file or block device", path);
      close (fd);
      return ENODEV;
    }
  if (S_ISREG (st.st_mode))
    size = st.st_size;
  if (flock (fd, LOCK_SH | LOCK_NB) == -1)
    *busy = true;
  f = calloc (1, sizeof *f);
  if (f == NULL || (f->dev.name = strdup (path)) == NULL)
    {
      free (f);
      close (fd);
      return ENOMEM;
    }
  f->dev.ops = &ro_ops;
  f->dev.size = size;
  f->fd = fd;
  *devp = &f->dev;
  return 0;
}

/* ---- the cache device: what it holds ---- */

/* Metadata page header (gateway/cache.c): magic "HHMP", page number,
 * commit sequence, 8 bytes of the cache UUID, crc32c with its field 0.
 */
#define PAGE_MAGIC 0x504d4848u

struct entry {
  uint64_t lba;
  uint64_t key; /* commit seq << 2 | state: the larger one wins */
};

struct cache_census {
  bool blank;         /* no superblock: the gateway formats it */
  struct hhc_cache c; /* superblock (geometry, UUIDs) */
  char identity[CACHE_IDENTITY_MAX + 1];
  enum cache_state state;        /* of the state page */
  uint32_t bad_pages, first_bad; /* pages with no valid copy */
  uint64_t clean, dirty;         /* blocks, duplicates resolved */
  uint64_t beyond, first_beyond; /* entries naming blocks beyond the volume */
  uint64_t dups;                 /* blocks named by more than one slot */
};

static int
cmp_entry (const void *a, const void *b)
{
  const struct entry *x = a, *y = b;

  if (x->lba != y->lba)
    return x->lba < y->lba ? -1 : 1;
  return x->key < y->key ? -1 : x->key > y->key;
}

/* Sequence of a valid copy of page p, 0 if it is not valid. */
static uint64_t
page_seq (const struct hhc_cache *c, uint32_t p, unsigned char *pg)
{
  uint32_t crc = get32 (pg + 24);
  bool ok;

  if (get32 (pg) != PAGE_MAGIC || get32 (pg + 4) != p
      || memcmp (pg + 16, c->uuid, 8) != 0)
    return 0;
  put32 (pg + 24, 0);
  ok = crc32c (0, pg, CACHE_PAGE) == crc;
  put32 (pg + 24, crc);
  return ok ? get64 (pg + 8) : 0;
}

/* The entries of every page's newer valid copy into *ents. */
static int
read_pages (struct cache_census *cc, struct entry *ents, size_t *nents)
{
  const uint32_t chunk = 256;
  struct hhc_cache *c = &cc->c;
  uint64_t nblocks = (c->volume_size + c->block_size - 1) / c->block_size;
  HHC_CLEANUP_FREE unsigned char *a
      = hhc_alloc_aligned ((size_t)chunk * CACHE_PAGE);
  HHC_CLEANUP_FREE unsigned char *b
      = hhc_alloc_aligned ((size_t)chunk * CACHE_PAGE);
  int r;

  if (a == NULL || b == NULL)
    return ENOMEM;
  *nents = 0;
  for (uint32_t p0 = 0; p0 < c->npages; p0 += chunk)
    {
      uint32_t n = HHC_MIN (chunk, c->npages - p0);
      size_t len = (size_t)n * CACHE_PAGE;
      uint64_t off = c->meta_off + (uint64_t)p0 * CACHE_PAGE;
      if ((r = dev_pread (c->dev, a, len, off)) != 0
          || (r = dev_pread (c->dev, b, len,
                             off + (uint64_t)c->npages * CACHE_PAGE))
                 != 0)
        return r;
      for (uint32_t i = 0; i < n; i++)
        {
          uint32_t p = p0 + i;
          unsigned char *pa = a + (size_t)i * CACHE_PAGE;
          unsigned char *pb = b + (size_t)i * CACHE_PAGE;
          uint64_t sa = page_seq (c, p, pa), sb = page_seq (c, p, pb);
          unsigned char *pg = sb > sa ? pb : pa;
          uint64_t seq = HHC_MAX (sa, sb);
          if (seq == 0)
            {
              if (cc->bad_pages++ == 0)
                cc->first_bad = p;
              continue;
            }
          for (uint32_t e = 0; e < CACHE_EPP; e++)
            {
              uint64_t slot = (uint64_t)p * CACHE_EPP + e;
              uint64_t v = get64 (pg + CACHE_PAGE_HDR + 8 * e);
              if (slot >= c->nslots)
                break;
              if ((v & 3) == SLOT_FREE)
                continue;
              if ((v >> 2) >= nblocks)
                {
                  if (cc->beyond++ == 0)
                    cc->first_beyond = v >> 2;
                  continue;
                }
              ents[(*nents)++] = (struct entry){ v >> 2, seq << 2 | (v & 3) };
            }
        }
    }
  return 0;
}

/* Read the cache's superblock, state page and metadata (nothing is
 * written).  0 (cc->blank if it holds no cache), EINVAL (corrupt
 * superblock: logged) or an errno.
 */
static int
cache_census (struct hhc_dev *dev, struct cache_census *cc)
{
  struct entry *ents;
  size_t n;
  int r;

  memset (cc, 0, sizeof *cc);
  cc->c.dev = dev;
  cc->c.log = log_cb;
  r = cache_read_super (&cc->c, cc->identity, sizeof cc->identity);
  if (r == ENOENT)
    {
      cc->blank = true;
      return 0;
    }
  if (r || (r = cache_read_state (&cc->c, &cc->state)) != 0)
    return r;
  ents = malloc (((size_t)cc->c.nslots + 1) * sizeof *ents);
  if (ents == NULL)
    return ENOMEM;
  r = read_pages (cc, ents, &n);
  /* Sorted by LBA, the winner of each LBA (as cache_load picks it: the
   * newer commit, dirty over clean on a tie) comes last.
   */
  qsort (ents, n, sizeof *ents, cmp_entry);
  for (size_t i = 0; r == 0 && i < n; i++)
    {
      if (i + 1 < n && ents[i + 1].lba == ents[i].lba)
        {
          if (i == 0 || ents[i - 1].lba != ents[i].lba)
            cc->dups++;
          continue;
        }
      if ((ents[i].key & 3) >= SLOT_DIRTY)
        cc->dirty++;
      else
        cc->clean++;
    }
  free (ents);
  return r;
}

static const char *
state_to_string (enum cache_state st)
{
  switch (st)
    {
    case CACHE_CLOSED:
      return "closed cleanly";
    case CACHE_IN_USE_WB:
      return "in use or not closed cleanly (wb: clean blocks are kept)";
    case CACHE_IN_USE_HHC:
      return "in use or not closed cleanly (hhc: the next start redoes the "
             "log into the cache)";
    case CACHE_IN_USE:
    default:
      return "in use or not closed cleanly (pt/wt: clean blocks are dropped "
             "at the next start)";
    }
}

/* check: report on the cache. */
static void
report_cache (const char *path, const struct cache_census *cc)
{
  const struct hhc_cache *c = &cc->c;
  char u[37], l[37];

  if (cc->blank)
    {
      note ("cache %s: blank (no HHC cache: the gateway formats it at the "
            "next start)",
            path);
      return;
    }
  hhc_uuid_str (c->uuid, u);
  hhc_uuid_str (c->log_uuid, l);
  note ("cache %s: superblock ok: version %d, uuid %s, log %s", path,
        CACHE_VERSION, u, l);
  note ("cache %s: volume \"%s\", %" PRIu64 " bytes; %u slots of %u bytes",
        path, cc->identity, c->volume_size, c->nslots, c->block_size);
  note ("cache %s: %s", path, state_to_string (cc->state));
  note ("cache %s: %u metadata pages: %" PRIu64 " dirty, %" PRIu64
        " clean blocks",
        path, c->npages, cc->dirty, cc->clean);
  if (cc->bad_pages)
    problem ("cache %s: %u metadata pages have no valid copy (the first is "
             "page %u): the gateway refuses to load the cache",
             path, cc->bad_pages, cc->first_bad);
  if (cc->beyond)
    problem ("cache %s: %" PRIu64 " metadata entries name blocks beyond the "
             "volume (the first: block %" PRIu64
             "): the gateway refuses to load the cache",
             path, cc->beyond, cc->first_beyond);
  if (cc->dups && cc->state == CACHE_CLOSED)
    problem ("cache %s: %" PRIu64 " blocks are in more than one slot, in a "
             "cache that was closed cleanly",
             path, cc->dups);
  else if (cc->dups)
    warning ("cache %s: %" PRIu64 " blocks are in more than one slot (a "
             "crash during a commit): the next start keeps the newer entry",
             path, cc->dups);
}

/* ---- the log ---- */

/* The log mirrors of check or format, opened, and the log on them. */
struct logset {
  const char **paths;
  unsigned n;
  struct hhc_dev *devs[HHC_MAX_LOGS];
  bool blank[HHC_MAX_LOGS];
  unsigned nblank;
  struct hhc_log *log; /* NULL if every mirror is blank */
};

static void
logset_close (struct logset *ls)
{
  log_close (ls->log);
  ls->log = NULL;
  for (unsigned i = 0; i < ls->n; i++)
    {
      dev_close (ls->devs[i]);
      ls->devs[i] = NULL;
    }
}

/* Does a device hold no log superblock (neither copy has the magic)?
 * That is what the core calls blank.
 */
static int
log_dev_blank (struct hhc_dev *dev, bool *blank)
{
  HHC_CLEANUP_FREE unsigned char *sb = hhc_alloc_aligned (8192);
  int r;

  if (sb == NULL)
    return ENOMEM;
  if (dev->size < 8192)
    {
      *blank = true;
      return 0;
    }
  if ((r = dev_pread (dev, sb, 8192, 0)) != 0)
    return r;
  *blank = memcmp (sb, LOG_MAGIC, 8) != 0 && memcmp (sb + 4096, LOG_MAGIC, 8);
  return 0;
}

/* The devices are open: open the log on them as hhcctl recover does
 * (the volume the log records).  Nothing is written: a blank mirror
 * stays blank, and if all are, no log is opened.
 */
static int
logset_open (struct logset *ls)
{
  static const uint8_t zero[16];
  enum log_found found;
  int r;

  for (unsigned i = 0; i < ls->n; i++)
    {
      if ((r = log_dev_blank (ls->devs[i], &ls->blank[i])) != 0)
        {
          problem ("log %s: %s", ls->paths[i], strerror (r));
          return r;
        }
      ls->nblank += ls->blank[i];
    }
  if (ls->nblank == ls->n)
    return 0;
  struct log_conf lc = {
    .paths = ls->paths,
    .npaths = ls->n,
    .block_size = 512,
    .log = log_cb,
    .test_devs = ls->devs,
  };
  return log_open (&lc, zero, &ls->log, &found);
}

static int
count_block (void *opaque, const void *buf, uint64_t lba)
{
  (*(uint64_t *)opaque)++;
  return 0;
}

/* Blocks a replay of the log would write to the backend. */
static int
replay_count (struct hhc_log *log, uint64_t *n)
{
  int r;

  *n = 0;
  quiet_core = true; /* "N blocks replayed": none were */
  r = log_replay (log, count_block, NULL, n);
  quiet_core = false;
  return r;
}

/* check: what one mirror holds beyond its chain.  A sweep of the whole
 * region finds the segments the chain does not reach; those of this
 * run or a later one (base >= the chain's) with a sequence number from
 * the chain's end on are "orphans": data replay cannot bring back.
 */
struct orphans {
  uint64_t n, first, last;
  uint64_t barriers, last_barrier;
  uint64_t damaged; /* damaged segments of this run after the end */
  int error;
};

static void
sweep_mirror (struct hhc_log *log, unsigned i, const struct log_chain_desc *c,
              uint64_t region, struct orphans *o)
{
  uint64_t nb = region / 4096;
  uint64_t base = c->n ? c->segs[c->n - 1].base : 0;
  HHC_CLEANUP_FREE uint8_t *seen = calloc (nb / 8 + 1, 1);
  struct log_seg_desc d;

  memset (o, 0, sizeof *o);
  if (seen == NULL)
    {
      o->error = ENOMEM;
      return;
    }
  for (size_t k = 0; k < c->n; k++)
    for (uint64_t b = c->segs[k].off / 4096;
         b < (c->segs[k].off + c->segs[k].len) / 4096 && b < nb; b++)
      seen[b / 8] |= 1 << (b % 8);
  for (uint64_t b = 0; b < nb; b++)
    {
      if (seen[b / 8] & (1 << (b % 8)))
        continue;
      int r = log_inspect_segment (log, i, b * 4096, &d);
      if (r == ENOENT)
        continue;
      if (r == EILSEQ)
        {
          o->damaged += d.seq > c->end_seq && d.base >= base
                        && !(d.flags & LOG_F_WRAP);
          continue;
        }
      if (r)
        {
          o->error = r;
          return;
        }
      if (!(d.flags & LOG_F_WRAP) && d.seq >= c->end_seq && d.base >= base)
        {
          if (o->n++ == 0 || d.seq < o->first)
            o->first = d.seq;
          o->last = HHC_MAX (o->last, d.seq);
          if (d.flags & LOG_F_BARRIER)
            {
              o->barriers++;
              o->last_barrier = HHC_MAX (o->last_barrier, d.seq);
            }
        }
      b += d.len / 4096 - 1; /* the rest of it */
    }
}

/* check: one mirror's chain and what follows it. */
static void
report_mirror (struct hhc_log *log, unsigned i, const char *path,
               const struct log_chain_desc *c, uint64_t region,
               bool closed_cleanly)
{
  struct log_seg_desc d = { 0 };
  struct orphans o;
  int r;

  if (c->n == 0)
    note ("log %s: no segments from the head (segment %" PRIu64 ") on", path,
          c->end_seq);
  else if (c->last_barrier < 0)
    note ("log %s: segments %" PRIu64 " to %" PRIu64 ", no barrier", path,
          c->segs[0].seq, c->segs[c->n - 1].seq);
  else
    note ("log %s: segments %" PRIu64 " to %" PRIu64
          ", newest barrier %" PRIu64,
          path, c->segs[0].seq, c->segs[c->n - 1].seq,
          c->segs[c->last_barrier].seq);
  if (c->n && (size_t)(c->last_barrier + 1) < c->n)
    note ("log %s: %zu segments after the newest barrier (no flush covered "
          "them: not replayed)",
          path, c->n - (size_t)(c->last_barrier + 1));

  /* The segment the chain stops at. */
  r = log_inspect_segment (log, i, c->end_off, &d);
  bool broken = r == EILSEQ && d.seq == c->end_seq;
  if (r && r != ENOENT && r != EILSEQ)
    problem ("log %s: reading the region at %" PRIu64 ": %s", path, c->end_off,
             strerror (r));
  if (r == 0 && d.seq == c->end_seq)
    note ("log %s: segment %" PRIu64 " at %" PRIu64 " is of an earlier run "
          "(its link does not fit): ignored",
          path, d.seq, c->end_off);

  sweep_mirror (log, i, c, region, &o);
  if (o.error)
    {
      problem ("log %s: scanning the region: %s", path, strerror (o.error));
      return;
    }
  const char *what = broken ? "is damaged (checksum or header)" : "is missing";
  char later[96];
  if (o.n == 1)
    snprintf (later, sizeof later, "a later segment (%" PRIu64 ") is", o.first);
  else
    snprintf (later, sizeof later,
              "%" PRIu64 " later segments (%" PRIu64 " to %" PRIu64 ") are",
              o.n, o.first, o.last);
  if (o.barriers)
    problem ("log %s: segment %" PRIu64 " at offset %" PRIu64
             " %s, but %s intact, among them barrier %" PRIu64
             ": replay stops before segment %" PRIu64
             ", so data that flushes acknowledged after it is lost",
             path, c->end_seq, c->end_off, what, later, o.last_barrier,
             c->end_seq);
  else if (o.n)
    warning ("log %s: segment %" PRIu64 " at offset %" PRIu64
             " %s; %s intact, but none is a barrier (a crash while writing?): "
             "no flush acknowledged them",
             path, c->end_seq, c->end_off, what, later);
  else if (broken && (d.flags & LOG_F_BARRIER) && closed_cleanly)
    problem ("log %s: the last segment, barrier %" PRIu64 " at offset %" PRIu64
             ", is damaged, and the cache was closed cleanly: the flushes it "
             "acknowledged cannot be replayed",
             path, d.seq, c->end_off);
  else if (broken)
    warning ("log %s: the log ends with a damaged segment %" PRIu64
             " at offset %" PRIu64 " (torn by a crash, or corrupted): replay "
             "stops before it",
             path, d.seq, c->end_off);
  if (o.damaged)
    warning ("log %s: %" PRIu64 " more damaged segments after the end of "
             "the chain",
             path, o.damaged);
}

/* check: do the mirrors hold the same log? */
static void
compare_mirrors (const struct logset *ls, const struct log_chain_desc *ch,
                 unsigned best)
{
  const struct log_chain_desc *b = &ch[best];
  uint64_t bb = b->last_barrier >= 0 ? b->segs[b->last_barrier].seq : 0;

  for (unsigned i = 0; i < ls->n; i++)
    {
      const struct log_chain_desc *c = &ch[i];
      uint64_t cb = c->last_barrier >= 0 ? c->segs[c->last_barrier].seq : 0;
      if (i == best || ls->blank[i])
        continue;
      for (size_t k = 0, j = 0; k < c->n && j < b->n;)
        {
          if (c->segs[k].seq < b->segs[j].seq)
            k++;
          else if (c->segs[k].seq > b->segs[j].seq)
            j++;
          else if (c->segs[k].off != b->segs[j].off
                   || c->segs[k].crc != b->segs[j].crc)
            {
              problem ("log mirrors %s and %s disagree: segment %" PRIu64
                       " differs",
                       ls->paths[i], ls->paths[best], c->segs[k].seq);
              break;
            }
          else
            {
              k++;
              j++;
            }
        }
      if (cb < bb && c->last_barrier < 0)
        problem ("log mirror %s is behind: it has no barrier, %s's newest is "
                 "%" PRIu64
                 " (it stopped being written, or is damaged): replay uses %s",
                 ls->paths[i], ls->paths[best], bb, ls->paths[best]);
      else if (cb < bb)
        problem ("log mirror %s is behind: its newest barrier is %" PRIu64
                 ", %s's is %" PRIu64
                 " (it stopped being written, or is damaged): replay uses %s",
                 ls->paths[i], cb, ls->paths[best], bb, ls->paths[best]);
      else if (c->end_seq != b->end_seq)
        warning ("log mirrors %s and %s end at different segments (%" PRIu64
                 " and %" PRIu64 ") after the same newest barrier",
                 ls->paths[i], ls->paths[best], c->end_seq, b->end_seq);
    }
}

/* check: the log and its pairing with the cache (cc NULL: no cache). */
static void
report_log (struct logset *ls, const struct cache_census *cc)
{
  struct log_chain_desc ch[HHC_MAX_LOGS] = { 0 };
  uint8_t luuid[16], lcache[16];
  uint64_t region, hoff, hseq, vsize, blocks;
  const char *identity;
  unsigned best;
  uint32_t bs;
  char a[37], b[37];
  bool cache_ok = cc && !cc->blank;
  bool closed = cache_ok && cc->state == CACHE_CLOSED;

  for (unsigned i = 0; i < ls->n; i++)
    if (ls->blank[i] && ls->nblank < ls->n)
      warning ("log %s: blank next to %u mirror%s of the log: it joins at the "
               "next start (until then the log has a copy fewer)",
               ls->paths[i], ls->n - ls->nblank,
               ls->n - ls->nblank == 1 ? "" : "s");
  if (ls->log == NULL)
    {
      note ("log: blank (no HHC log: the gateway formats it at the next "
            "start)");
      if (cache_ok && memcmp (cc->c.log_uuid, (uint8_t[16]){ 0 }, 16) != 0)
        {
          hhc_uuid_str (cc->c.log_uuid, a);
          warning ("the cache was paired with log %s, which is not on these "
                   "devices: the next start makes a new log and writes every "
                   "dirty block to it",
                   a);
        }
      return;
    }
  log_uuids (ls->log, luuid, lcache);
  log_volume (ls->log, &identity, &vsize, &bs);
  log_inspect_geometry (ls->log, &region, &hoff, &hseq, &best);
  hhc_uuid_str (luuid, a);
  hhc_uuid_str (lcache, b);
  note ("log: uuid %s, paired with cache %s", a, b);
  note ("log: volume \"%s\", %" PRIu64 " bytes, block size %u; region of "
        "%" PRIu64 " bytes, head at segment %" PRIu64,
        identity, vsize, bs, region, hseq);
  for (unsigned i = 0; i < ls->n; i++)
    {
      if (ls->blank[i])
        continue;
      int r = log_inspect_chain (ls->log, i, &ch[i]);
      if (r)
        problem ("log %s: scanning: %s", ls->paths[i], strerror (r));
      else
        report_mirror (ls->log, i, ls->paths[i], &ch[i], region, closed);
    }
  compare_mirrors (ls, ch, best);
  for (unsigned i = 0; i < ls->n; i++)
    free (ch[i].segs);
  if (replay_count (ls->log, &blocks) == 0)
    note ("log: a replay (from %s) would write %" PRIu64
          " blocks to the backend",
          ls->paths[best], blocks);

  if (!cache_ok)
    {
      if (cc)
        note ("the cache is blank: the next start replays the log into the "
              "backend");
      return;
    }
  if (strcmp (identity, cc->identity) != 0 || vsize != cc->c.volume_size
      || bs != cc->c.block_size)
    problem ("the log belongs to another volume (\"%s\", %" PRIu64
             " bytes, block size %u) than the cache (\"%s\", %" PRIu64
             " bytes, block size %u)",
             identity, vsize, bs, cc->identity, cc->c.volume_size,
             cc->c.block_size);
  else if (memcmp (lcache, cc->c.uuid, 16) == 0)
    note ("log and cache are paired");
  else if (memcmp (cc->c.log_uuid, luuid, 16) == 0)
    warning ("a recovery into this cache was interrupted: the next start "
             "replays the log again");
  else
    problem ("the log is paired with another cache (%s): the gateway refuses "
             "to start with these devices",
             b);
}

/* ---- check ---- */

static void
check_usage (FILE *f)
{
  fprintf (f, "usage: hhcctl check --cache PATH [--log PATH...]\n"
              "       hhcctl check --log PATH [--log PATH...]\n"
              "Verify a cache device and its log mirrors without changing "
              "them.\n"
              "Exit status: 0 healthy, 1 a problem was found, 2 usage.\n"
              "See hhcctl(8).\n");
}

static int
cmd_check (int argc, char **argv)
{
  static const struct option opts[] = {
    { "cache", required_argument, NULL, 'c' },
    { "log", required_argument, NULL, 'l' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  const char *logs[HHC_MAX_LOGS], *cache = NULL;
  struct logset ls = { .paths = logs };
  struct report rep = { 0 };
  struct cache_census cc;
  struct hhc_dev *cdev = NULL;
  bool busy, have_cache = false;
  int c;

  while ((c = getopt_long (argc, argv, ":c:l:h", opts, NULL)) != -1)
    switch (c)
      {
      case 'c':
        if (cache)
          return usage_error ("--cache may be given once");
        cache = optarg;
        break;
      case 'l':
        if (add_log (logs, &ls.n, optarg))
          return 2;
        break;
      case 'h':
        check_usage (stdout);
        return 0;
      default:
        return bad_option (c, argv);
      }
  if (optind != argc)
    return usage_error ("unexpected argument '%s'", argv[optind]);
  if (cache == NULL && ls.n == 0)
    return usage_error ("give --cache PATH, --log PATH, or both");

  report = &rep;
  if (cache && ro_open (cache, &cdev, &busy) == 0)
    {
      if (busy)
        warning ("cache %s is in use by a running gateway: read anyway, the "
                 "results may be stale or inconsistent",
                 cache);
      int r = cache_census (cdev, &cc);
      if (r == 0)
        {
          have_cache = true;
          report_cache (cache, &cc);
        }
      else if (r != EINVAL) /* EINVAL: the core said why */
        problem ("cache %s: %s", cache, strerror (r));
    }
  bool logs_open = ls.n > 0;
  for (unsigned i = 0; logs_open && i < ls.n; i++)
    {
      if (ro_open (logs[i], &ls.devs[i], &busy) != 0)
        logs_open = false;
      else if (busy)
        warning ("log %s is in use by a running gateway: read anyway, the "
                 "results may be stale or inconsistent",
                 logs[i]);
    }
  if (logs_open)
    {
      if (logset_open (&ls) == 0)
        report_log (&ls, have_cache ? &cc : NULL);
    }
  else if (ls.n == 0 && have_cache && !cc.blank
           && memcmp (cc.c.log_uuid, (uint8_t[16]){ 0 }, 16) != 0)
    note ("the cache is paired with a log (mode hhc): give it with --log to "
          "check it too");
  logset_close (&ls);
  dev_close (cdev);
  report = NULL;
  if (rep.problems)
    printf ("check: %u problem%s found, %u warning%s\n", rep.problems,
            rep.problems == 1 ? "" : "s", rep.warnings,
            rep.warnings == 1 ? "" : "s");
  else
    printf ("check: healthy (%u warning%s)\n", rep.warnings,
            rep.warnings == 1 ? "" : "s");
  return rep.problems ? 1 : 0;
}

/* ---- format ---- */

static void
format_usage (FILE *f)
{
  fprintf (f, "usage: hhcctl format [--cache PATH] [--log PATH...] [--force]\n"
              "Make the devices blank: the next gateway start formats "
              "them.\n"
              "Refuses a cache with dirty blocks or a log with data to "
              "replay unless --force.\n"
              "See hhcctl(8).\n");
}

/* Zero len bytes at 0 and sync. */
static int
zero_head (struct hhc_dev *dev, size_t len)
{
  HHC_CLEANUP_FREE void *z = hhc_alloc_aligned (len);
  int r;

  if (z == NULL)
    return ENOMEM;
  len = HHC_MIN ((uint64_t)len, dev->size);
  if ((r = dev_pwrite (dev, z, len, 0)) == 0)
    r = dev_sync (dev);
  if (r)
    fprintf (stderr, "hhcctl: error: %s: writing: %s\n", dev->name,
             strerror (r));
  return r;
}

/* May the cache be made blank?  0 yes, 1 refused (said why). */
static int
format_check_cache (const char *path, struct hhc_dev *dev, bool force,
                    bool *blank)
{
  struct cache_census cc;
  int r = cache_census (dev, &cc);

  *blank = r == 0 && cc.blank;
  if (r && !force)
    {
      fprintf (stderr,
               "hhcctl: error: %s: cannot tell whether the cache holds dirty "
               "blocks (%s): refusing to format it without --force\n",
               path, r == EINVAL ? "corrupt" : strerror (r));
      return 1;
    }
  if (r == 0 && !cc.blank && (cc.dirty || cc.bad_pages) && !force)
    {
      fprintf (stderr,
               "hhcctl: error: %s holds %" PRIu64
               " dirty blocks not yet written back to the backend%s: "
               "refusing to format it without --force\n",
               path, cc.dirty,
               cc.bad_pages ? " (and unreadable metadata pages)" : "");
      return 1;
    }
  if (r == 0 && !cc.blank && cc.dirty)
    fprintf (stderr,
             "hhcctl: warning: %s: discarding %" PRIu64
             " dirty blocks (--force)\n",
             path, cc.dirty);
  return 0;
}

/* May the log be made blank?  0 yes, 1 refused (said why). */
static int
format_check_log (struct logset *ls, bool force)
{
  uint64_t blocks = 0;
  int r = logset_open (ls);

  if (r == 0 && ls->log)
    r = replay_count (ls->log, &blocks);
  if (r && !force)
    {
      fprintf (stderr,
               "hhcctl: error: %s: cannot tell whether the log holds data to "
               "replay (%s): refusing to format it without --force\n",
               ls->paths[0], strerror (r));
      return 1;
    }
  if (blocks && !force)
    {
      fprintf (stderr,
               "hhcctl: error: the log on %s holds %" PRIu64
               " blocks not yet written back (a replay would write them to "
               "the backend): refusing to format it without --force\n",
               ls->paths[0], blocks);
      return 1;
    }
  if (blocks)
    fprintf (stderr,
             "hhcctl: warning: the log on %s: discarding %" PRIu64
             " blocks (--force)\n",
             ls->paths[0], blocks);
  log_close (ls->log);
  ls->log = NULL;
  return 0;
}

static int
cmd_format (int argc, char **argv)
{
  static const struct option opts[] = {
    { "cache", required_argument, NULL, 'c' },
    { "log", required_argument, NULL, 'l' },
    { "force", no_argument, NULL, 'f' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  const char *logs[HHC_MAX_LOGS], *cache = NULL;
  struct logset ls = { .paths = logs };
  struct hhc_dev *cdev = NULL;
  bool force = false, cblank = false;
  int c, r = 0;

  while ((c = getopt_long (argc, argv, ":c:l:fh", opts, NULL)) != -1)
    switch (c)
      {
      case 'c':
        if (cache)
          return usage_error ("--cache may be given once");
        cache = optarg;
        break;
      case 'l':
        if (add_log (logs, &ls.n, optarg))
          return 2;
        break;
      case 'f':
        force = true;
        break;
      case 'h':
        format_usage (stdout);
        return 0;
      default:
        return bad_option (c, argv);
      }
  if (optind != argc)
    return usage_error ("unexpected argument '%s'", argv[optind]);
  if (cache == NULL && ls.n == 0)
    return usage_error ("give --cache PATH, --log PATH, or both");

  /* Open everything (locked: not while a gateway runs), decide, and
   * only then write.
   */
  if (cache && dev_open_path (cache, 0, false, log_cb, &cdev) != 0)
    r = 1;
  for (unsigned i = 0; r == 0 && i < ls.n; i++)
    if (dev_open_path (logs[i], 0, false, log_cb, &ls.devs[i]) != 0)
      r = 1;
  if (r == 0 && cdev)
    r = format_check_cache (cache, cdev, force, &cblank);
  if (r == 0 && ls.n)
    r = format_check_log (&ls, force);
  if (r == 0 && cdev)
    {
      if (cblank)
        printf ("cache %s: already blank\n", cache);
      else if ((r = zero_head (cdev, CACHE_PAGE) ? 1 : 0) == 0)
        printf ("cache %s: blank (the next start formats it)\n", cache);
    }
  for (unsigned i = 0; r == 0 && i < ls.n; i++)
    {
      if (ls.blank[i])
        printf ("log %s: already blank\n", logs[i]);
      else if ((r = zero_head (ls.devs[i], 8192) ? 1 : 0) == 0)
        printf ("log %s: blank (the next start formats it)\n", logs[i]);
    }
  if (r == 0 && cdev && ls.n == 0)
    printf ("note: a log paired with this cache is replayed into the backend "
            "at the next start; format it too to discard its data\n");
  logset_close (&ls);
  dev_close (cdev);
  return r;
}

/* ---- mttdl ---- */

/* Defaults: see hhcctl(8), MTTDL MODEL, for the sources. */
#define MTTDL_DEF_DISKS 4
#define MTTDL_DEF_LOG_DISKS 2
#define MTTDL_DEF_HDD 500000.0  /* hours: field AFR of about 1.75% */
#define MTTDL_DEF_SSD 2000000.0 /* hours: enterprise NVMe datasheets */
#define MTTDL_DEF_MTTR 24.0

struct mttdl_row {
  char name[16];
  char what[48];
  double hours, approx;
};

static void
mttdl_usage (FILE *f)
{
  fprintf (f,
           "usage: hhcctl mttdl [--disks N] [--log-disks M] [--mttf-hdd "
           "HOURS]\n"
           "                    [--mttf-ssd HOURS] [--mttr HOURS] [--json]\n"
           "MTTDL of RAID5, RAID6 and HHC with 1..M log disks (Markov "
           "model).\n"
           "Defaults: --disks %d --log-disks %d --mttf-hdd %.0f --mttf-ssd "
           "%.0f --mttr %.0f\n"
           "See hhcctl(8).\n",
           MTTDL_DEF_DISKS, MTTDL_DEF_LOG_DISKS, MTTDL_DEF_HDD, MTTDL_DEF_SSD,
           MTTDL_DEF_MTTR);
}

static void
mttdl_print (const struct mttdl_row *rows, size_t n, unsigned disks, unsigned m,
             double hdd, double ssd, double mttr, bool json)
{
  const double y = MTTDL_HOURS_PER_YEAR;

  if (json)
    {
      printf ("{\n  \"parameters\": {\"disks\": %u, \"log_disks\": %u, "
              "\"mttf_hdd_hours\": %.17g, \"mttf_ssd_hours\": %.17g, "
              "\"mttr_hours\": %.17g, \"hours_per_year\": %.17g},\n"
              "  \"models\": [\n",
              disks, m, hdd, ssd, mttr, y);
      for (size_t i = 0; i < n; i++)
        printf ("    {\"name\": \"%s\", \"description\": \"%s\", "
                "\"mttdl_hours\": %.6e, \"mttdl_years\": %.6e, "
                "\"closed_form_years\": %.6e}%s\n",
                rows[i].name, rows[i].what, rows[i].hours, rows[i].hours / y,
                rows[i].approx / y, i + 1 < n ? "," : "");
      printf ("  ]\n}\n");
      return;
    }
  printf ("MTTDL (Markov model): MTTF %.0f h per HDD, %.0f h per SSD, MTTR "
          "%.0f h\n\n",
          hdd, ssd, mttr);
  printf ("%-7s  %-30s  %14s  %14s\n", "model", "", "MTTDL (years)",
          "closed form");
  for (size_t i = 0; i < n; i++)
    printf ("%-7s  %-30s  %14.4g  %14.4g\n", rows[i].name, rows[i].what,
            rows[i].hours / y, rows[i].approx / y);
}

static int
cmd_mttdl (int argc, char **argv)
{
  static const struct option opts[] = {
    { "disks", required_argument, NULL, 'n' },
    { "log-disks", required_argument, NULL, 'm' },
    { "mttf-hdd", required_argument, NULL, 'H' },
    { "mttf-ssd", required_argument, NULL, 'S' },
    { "mttr", required_argument, NULL, 'r' },
    { "json", no_argument, NULL, 'j' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  unsigned disks = MTTDL_DEF_DISKS, m = MTTDL_DEF_LOG_DISKS;
  double hdd = MTTDL_DEF_HDD, ssd = MTTDL_DEF_SSD, mttr = MTTDL_DEF_MTTR;
  struct mttdl_row rows[3 + MTTDL_MAX_LOG_DISKS];
  bool json = false;
  size_t n = 0;
  int c, r = 0;

  while ((c = getopt_long (argc, argv, ":n:m:H:S:r:jh", opts, NULL)) != -1)
    {
      switch (c)
        {
        case 'n':
          r = parse_unsigned ("--disks", optarg, 4, MTTDL_MAX_DISKS, &disks);
          break;
        case 'm':
          r = parse_unsigned ("--log-disks", optarg, 1, MTTDL_MAX_LOG_DISKS,
                              &m);
          break;
        case 'H':
          r = parse_hours ("--mttf-hdd", optarg, &hdd);
          break;
        case 'S':
          r = parse_hours ("--mttf-ssd", optarg, &ssd);
          break;
        case 'r':
          r = parse_hours ("--mttr", optarg, &mttr);
          break;
        case 'j':
          json = true;
          break;
        case 'h':
          mttdl_usage (stdout);
          return 0;
        default:
          return bad_option (c, argv);
        }
      if (r)
        return r;
    }
  if (optind != argc)
    return usage_error ("unexpected argument '%s'", argv[optind]);

  /* The SSD alone (write-back without a log): its own MTTF. */
  rows[n] = (struct mttdl_row){ "SSD", "write-back SSD, no log", ssd, ssd };
  n++;
  for (unsigned f = 1; f <= 2; f++, n++)
    {
      snprintf (rows[n].name, sizeof rows[n].name, "RAID%u", f + 4);
      snprintf (rows[n].what, sizeof rows[n].what,
                "%u disks, survives %u failure%s", disks, f, f > 1 ? "s" : "");
      if ((r = mttdl_raid (disks, f, hdd, mttr, &rows[n].hours)) != 0
          || (r = mttdl_raid_approx (disks, f, hdd, mttr, &rows[n].approx))
                 != 0)
        break;
    }
  for (unsigned k = 1; r == 0 && k <= m; k++, n++)
    {
      snprintf (rows[n].name, sizeof rows[n].name, "HHC-%u", k);
      snprintf (rows[n].what, sizeof rows[n].what, "SSD + %u log disk%s", k,
                k > 1 ? "s" : "");
      if ((r = mttdl_hhc (k, hdd, ssd, mttr, &rows[n].hours)) != 0)
        break;
      r = mttdl_hhc_approx (k, hdd, ssd, mttr, &rows[n].approx);
    }
  if (r)
    {
      fprintf (stderr,
               "hhcctl: error: the model has no answer for these "
               "values (%s)\n",
               r == ERANGE ? "it does not fit in a double" : "out of range");
      return 1;
    }
  mttdl_print (rows, n, disks, m, hdd, ssd, mttr, json);
  return 0;
}

/* ---- recover ---- */

struct target {
  struct hhc_dev *dev;
  uint64_t size;
  uint32_t bs;
  bool tty;
  unsigned last;
};

static int
write_block (void *opaque, const void *buf, uint64_t lba)
{
  struct target *t = opaque;
  uint64_t off = lba * t->bs;
  size_t len = HHC_MIN ((uint64_t)t->bs, t->size - off);

  return dev_pwrite (t->dev, buf, len, off);
}

static void
progress (void *opaque, uint64_t done, uint64_t total)
{
  struct target *t = opaque;
  unsigned pct = total ? done * 100 / total : 100;

  if (quiet)
    return;
  if (t->tty)
    {
      char bar[41];
      unsigned fill = pct * 40 / 100;
      memset (bar, '#', fill);
      memset (bar + fill, ' ', 40 - fill);
      bar[40] = '\0';
      fprintf (stderr, "\rreplaying [%s] %3u%% %" PRIu64 "/%" PRIu64, bar, pct,
               done, total);
      if (done == total)
        fputc ('\n', stderr);
    }
  else if (pct / 10 != t->last / 10 || done == total)
    fprintf (stderr, "replaying: %u%% (%" PRIu64 " of %" PRIu64 " blocks)\n",
             pct, done, total);
  t->last = pct;
}

static void
recover_usage (FILE *f)
{
  fprintf (f, "usage: hhcctl recover --log PATH [--log PATH...] --backend "
              "PATH|NBD-URI [--quiet]\n"
              "Replay the HHC gateway's HDD log into the backend (offline).\n"
              "See hhcctl(8).\n");
}

static int
cmd_recover (int argc, char **argv)
{
  static const struct option opts[] = {
    { "log", required_argument, NULL, 'l' },
    { "backend", required_argument, NULL, 'b' },
    { "quiet", no_argument, NULL, 'q' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  const char *logs[HHC_MAX_LOGS];
  const char *backend = NULL, *identity;
  unsigned nlogs = 0;
  struct hhc_log *log = NULL;
  enum log_found found;
  struct target t = { 0 };
  uint8_t zero[16] = { 0 };
  int c, r;

  while ((c = getopt_long (argc, argv, ":l:b:qh", opts, NULL)) != -1)
    switch (c)
      {
      case 'l':
        if (add_log (logs, &nlogs, optarg))
          return 2;
        break;
      case 'b':
        backend = optarg;
        break;
      case 'q':
        quiet = true;
        break;
      case 'h':
        recover_usage (stdout);
        return 0;
      default:
        return bad_option (c, argv);
      }
  if (optind != argc)
    return usage_error ("unexpected argument '%s'", argv[optind]);
  if (nlogs == 0 || backend == NULL)
    return usage_error ("--log and --backend are required");
  struct log_conf lc = {
    .paths = logs,
    .npaths = nlogs,
    .block_size = 512,
    .log = log_cb,
  };
  if ((r = log_open (&lc, zero, &log, &found)) != 0)
    return 1;
  log_volume (log, &identity, &t.size, &t.bs);
  if ((r = dev_open_path (backend, 0, false, log_cb, &t.dev)) != 0)
    {
      log_close (log);
      return 1;
    }
  if (t.dev->size < t.size)
    {
      fprintf (stderr,
               "hhcctl: error: %s has %" PRIu64
               " bytes, but the log is of a volume of %" PRIu64
               " bytes (identity \"%s\"): refusing\n",
               backend, t.dev->size, t.size, identity);
      dev_close (t.dev);
      log_close (log);
      return 1;
    }
  if (!quiet)
    fprintf (stderr, "hhcctl: log of volume \"%s\" (%" PRIu64 " bytes)\n",
             identity, t.size);
  t.tty = isatty (2);
  r = log_replay (log, write_block, progress, &t);
  if (r == 0 && (r = dev_sync (t.dev)) != 0)
    fprintf (stderr, "hhcctl: error: flushing %s: %s\n", backend, strerror (r));
  dev_close (t.dev);
  log_close (log);
  return r ? 1 : 0;
}

/* ---- commands ---- */

struct command {
  const char *name;
  int (*run) (int argc, char **argv);
  const char *synopsis; /* after "hhcctl NAME" */
  const char *summary;
};

static const struct command commands[] = {
  /* Offline: devices no gateway has open. */
  { "check", cmd_check, "--cache PATH [--log PATH...]",
    "verify a cache and its log without changing them" },
  { "format", cmd_format, "[--cache PATH] [--log PATH...] [--force]",
    "make the devices blank (the next start formats them)" },
  { "recover", cmd_recover, "--log PATH... --backend PATH|NBD-URI",
    "replay the log into the backend (the SSD is lost)" },
  /* Arithmetic. */
  { "mttdl", cmd_mttdl, "[--disks N] [--log-disks M] [--json] ...",
    "MTTDL of RAID5/6 and HHC (Markov model)" },
  /* A running gateway (hhcctl-live.c). */
  { "status", hhcctl_status, "[--run-dir DIR] [--json]",
    "the volumes of a running hhc-gateway" },
  { "drain", hhcctl_drain, "[--run-dir DIR] [--quiet] VOLUME",
    "write back every dirty block of a volume (progress bar)" },
};

static void
usage (FILE *f)
{
  fprintf (f, "usage: hhcctl COMMAND [OPTION...]\n\nCommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf (f, "  %-8s %s\n  %-8s   %s\n", commands[i].name,
             commands[i].synopsis, "", commands[i].summary);
  fprintf (f, "\n'hhcctl COMMAND --help' describes a command's options.  "
              "See hhcctl(8).\n");
}

int
main (int argc, char **argv)
{
  static char name[64];

  if (argc < 2)
    {
      usage (stderr);
      return 2;
    }
  if (strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0
      || strcmp (argv[1], "help") == 0)
    {
      usage (stdout);
      return 0;
    }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (strcmp (argv[1], commands[i].name) == 0)
      {
        snprintf (name, sizeof name, "hhcctl %s", commands[i].name);
        cmd_name = name;
        opterr = 0;
        return commands[i].run (argc - 1, argv + 1);
      }
  fprintf (stderr, "hhcctl: unknown command '%s' (try 'hhcctl --help')\n",
           argv[1]);
  return 2;
}
