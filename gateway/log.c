/* The HDD barrier log: see log.h for the layout and docs/log.md for
 * the protocol and why it is safe.
 *
 * Superblock (little-endian, 4 KiB, copies A at 0 and B at 4 KiB; a
 * write goes over the older copy):
 *   0   magic "HHCLOG01"      8  u32 version      12 u32 block_size
 *   16  log uuid[16]          32 cache uuid[16]   48 u64 volume_size
 *   56  u64 region_size       64 u32 segment_size 68 u32 identity length
 *   72  u64 head offset (in the region)           80 u64 head seq
 *   88  u64 generation        96 identity (up to 2048 bytes)
 *   4088 u32 mirrors of the run that wrote it (0: an earlier build)
 *   4092 u32 crc32c of bytes 0..4091
 *
 * Segment header (4 KiB multiple):
 *   0   magic "HHCSEG01"      8  u64 seq          16 u64 base seq
 *   24  u32 flags             28 u32 block count  32 u32 revoke count
 *   36  u32 header length     40 u64 segment id (offset in region / 4K)
 *   48  log uuid[16]          64 cache uuid[16]   80 u32 checksum (over
 *   the header with this field 0, then the data blocks: segsum with
 *   flag LOG_F_SUM, which every segment written now has, else crc32c)
 *   84  u32 checksum of the previous segment (the chain link)
 *   96  u64 LBA[block count], then u64 revoked LBA[revoke count]
 * Data: block count blocks, then padding to 4 KiB.
 */
#include <config.h>

#include <endian.h>
#include <stdio.h>

#include "common.h"
#include "crc32c.h"
#include "log.h"

#define SB_SIZE 4096
#define ALIGN 4096
#define IDENTITY_MAX 2048
#define POS_OLDER 0x80000000u /* an older entry of the LBA may be on disk */
#define POS_MASK 0x7fffffffu
#define MAX_SEQ (UINT64_C (1) << 62) /* sequence numbers stay below */
/* The largest region used (the ring has a slot per ALIGN bytes of it
 * and counts them in 32 bits); a bigger device is used only up to it.
 */
#define MAX_REGION (UINT64_C (1) << 43)

HHC_VECTOR (u64_vec, uint64_t)
HHC_VECTOR (u32_vec, uint32_t)

enum seg_state { SEG_FILLING, SEG_SEALED, SEG_WRITTEN };

/* One segment from the head to the buffer being filled (ring slot
 * seq % ring_cap).
 */
struct seg {
  uint64_t seq;
  uint64_t lpos;  /* logical position (written segments) */
  uint32_t len;   /* bytes on disk */
  uint32_t live;  /* entries not yet dead */
  uint32_t chain; /* first key whose newest entry is here */
  uint8_t state;
};

/* Per key (cache slot): where its newest entry is. */
struct key {
  uint64_t lba;        /* the block (valid while logged or unlogged) */
  uint32_t seg;        /* ring slot, LOG_NONE: not in the log */
  uint32_t pos;        /* position in the segment | POS_OLDER */
  uint32_t prev, next; /* chain of the segment's keys */
};

struct buf {
  char *mem;  /* the largest header, then the data: one write */
  char *data; /* max_blocks blocks (mem + the largest header) */
  uint64_t *lbas;
  uint32_t *keys;
  uint32_t nblocks;
  uint32_t limit; /* blocks it may take (max_blocks, less for reclaim) */
  /* A reclaim buffer takes only entries of this ring slot (the head's),
   * LOG_NONE for a normal one.
   */
  uint32_t reclaim_from;
  struct u64_vec revokes;
  struct u32_vec deaths; /* ring slots an entry here superseded */
  uint64_t seq;
  uint64_t rev_upto; /* rev_sealed once this buffer was sealed */
  bool barrier;
  uint64_t reserved; /* tail bytes held for it */
  struct buf *next;  /* queue or free list */
  uint64_t base;     /* base_seq when the writer took it (its header's) */
  /* Group commit: FLUSHes whose ticket names this buffer, and when the
   * first of them came (hhc_now_ns).
   */
  unsigned joiners;
  unsigned expect; /* FLUSHes likely to join (group_wait_ns) */
  uint64_t first_want_ns;
};

/* A death waits until the superseding segment is under a barrier. */
struct death {
  uint64_t seq;  /* the superseding segment */
  uint32_t ring; /* the segment that lost an entry */
};
HHC_VECTOR (death_vec, struct death)

/* Writes for one segment on every mirror. */
struct io {
  unsigned n;
  uint64_t off[3];
  const void *p[3];
  size_t len[3];
  bool sync, sync_only;
  bool sb; /* a superblock: not to mirrors with sb_hold */
};

struct mirror {
  struct hhc_dev *dev;
  bool own, failed, blank;
  char *path; /* as given (an NBD URI is dialled again to void it) */
  /* Voiding (see "voiding a log that fell out of use" below): the
   * failed mirror is owed a void (want_void), has had it (voided), or
   * stopped being written only at log_stop (no_void: never owed).
   */
  bool want_void, voided, void_warned, no_void;
  /* A void mirror joining at start: no superblock is written to it
   * until log_rebase has made this run's log complete on it (until
   * then a copy of its void superblock wins, and it reads as blank).
   */
  bool sb_hold;
  /* Worker for parallel writes. */
  pthread_t thread;
  bool has_thread, stop;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  const struct io *job; /* non-NULL: to do */
  int result;
  bool done;
};

/* What a scan of one mirror found. */
struct seg_info {
  uint64_t seq, base, lpos;
  uint32_t flags, hdr_len, nblocks, nrevokes;
};
HHC_VECTOR (seginfo_vec, struct seg_info)

struct scan {
  struct seginfo_vec segs;
  uint64_t end_lpos, end_seq; /* where and which the next segment is */
  uint32_t end_crc;           /* crc of the last segment of the chain */
  long last_barrier;          /* index in segs, -1: none */
};

struct hhc_log {
  hhc_log_fn logfn;
  struct mirror m[LOG_MAX_MIRRORS];
  unsigned nm;
  uint32_t bs, max_blocks, segment_size;
  uint64_t volume_size, region_size;
  char *identity;
  uint8_t uuid[16], cache_uuid[16];
  uint64_t sb_gen;
  struct scan scan; /* of the best mirror */
  unsigned best;    /* mirror the scan came from */
  uint64_t hint_seq, hint_off;

  pthread_mutex_t io_lock; /* one mirrors_io at a time; sb fields */
  pthread_mutex_t lock;
  pthread_cond_t writer_cv; /* work for the writer */
  pthread_cond_t done_cv;   /* a barrier completed or failed */
  pthread_cond_t buf_cv;    /* a buffer became current */
  struct seg *ring;
  uint32_t ring_cap;
  uint32_t ring_max; /* conf->ring_slots (tests): 0, or fewer slots */
  struct key *keys;
  uint32_t nkeys;
  uint64_t *unlogged; /* bitmap: dirty, newest data not in the log */
  uint32_t nunlogged;
  struct buf *bufs;
  unsigned nbufs;
  struct buf *cur, *qhead, *qtail, *freelist;
  struct u64_vec pending_rev; /* revokes while no buffer is current */
  uint32_t rev_cap;           /* revokes per segment */
  uint64_t reserve;           /* tail bytes held per unwritten buffer */
  uint64_t reserved;          /* bytes held by unwritten buffers */
  struct death_vec deaths;
  size_t deaths_done;
  uint64_t next_seq;        /* the next buffer to become current */
  uint64_t head_seq;        /* oldest segment in the ring */
  uint64_t written_seq;     /* every segment below this is written */
  uint64_t durable_barrier; /* highest barrier synced */
  /* Revoke records: issued (in a buffer or pending), in sealed buffers,
   * and in segments under a durable barrier.  Records go into buffers
   * in the order issued, so a FLUSH that saw rev_issued == n is covered
   * once rev_durable >= n (an emergency barrier carries no pending
   * record: its sequence alone proved nothing about them).
   */
  uint64_t rev_issued, rev_sealed, rev_durable;
  uint64_t want_revs;    /* a barrier making this many records durable */
  uint64_t want_barrier; /* a barrier covering this seq is wanted */
  uint64_t tail_lpos;    /* where the next segment goes */
  uint64_t phead_lpos, phead_seq; /* persisted head */
  /* Write-ahead: the in-memory head when the last checkpoint began.
   * The SSD reflects every segment before it, so a persisted head may
   * go up to here and no further (persist_head).
   */
  uint64_t ckpt_lpos, ckpt_seq;
  bool lost_ckpt; /* the checkpoint after the last mirror failed */
  /* The base every segment header names: where a replay starts.  It
   * is the last run's until log_rebase has logged every dirty block
   * again; then this run's first segment (rebase_seq), from the
   * segment that holds the last of them (base_from) on.
   */
  uint64_t base_seq, rebase_seq, base_from;
  bool rebased, started, stop, writer_busy;
  bool adopt;        /* offline: take the volume the log records */
  uint32_t last_crc; /* writer: crc of the last segment written */
  /* Group commit: the FLUSHes the last barrier written for FLUSHes
   * carried, and how long writing it took (group_wait_ns).
   */
  unsigned last_group;
  uint64_t last_barrier_ns, last_done_ns;
  unsigned char *hdrbuf; /* the writer's header buffer (grows) */
  size_t hdrcap;
  unsigned char *markbuf; /* the writer's wrap marker */
  unsigned healthy;
  unsigned unvoided;     /* atomic: failed mirrors not yet voided */
  uint64_t next_void_ns; /* writer: next background void attempt */
  /* A dead NBD mirror is dialled again at most after 1, 2, 4, then
   * every 8 s (dial_due_locked); lock.
   */
  uint64_t next_dial_ns;
  unsigned dial_tries;
  pthread_mutex_t void_lock; /* one void_failed at a time; -> lock */
  pthread_t writer;
  struct log_callbacks cb;
  struct log_stats st;
};

/* ---- segment checksum ---- */

/* A segment's checksum must change when any of its blocks does.  A CRC
 * does not: it is linear, so a block that ends with its own crc32c (a
 * file system's or a database's page, hhc-verify's blocks) moves a
 * crc32c computed over it by an amount that does not depend on the
 * block's content.  A segment torn by a crash, whose last blocks still
 * held such blocks of the region's last lap, kept its crc32c, and the
 * replay wrote those blocks to the backend under this segment's LBAs
 * (docs/open-failures.md 1).  segsum is a 64-bit multiply-rotate
 * chain over 8-byte words (each step a bijection of the state, and not
 * linear over GF(2)), folded to 32 bits at the end.  Lengths are
 * multiples of 8 (headers and blocks are at least 512 bytes).
 */
struct segsum {
  uint64_t h;
};

static void
segsum_init (struct segsum *s)
{
  s->h = UINT64_C (0x9E3779B97F4A7C15);
}

static void
segsum_add (struct segsum *s, const void *p, size_t len)
{
  const unsigned char *b = p;
  uint64_t h = s->h;

  for (size_t i = 0; i + 8 <= len; i += 8)
    {
      h ^= get64 (b + i) * UINT64_C (0xC2B2AE3D27D4EB4F);
      h = (h << 29 | h >> 35) * UINT64_C (0x165667B19E3779F9);
    }
  s->h = h;
}

static uint32_t
segsum_final (const struct segsum *s)
{
  uint64_t h = s->h;

  h ^= h >> 32;
  h *= UINT64_C (0xD6E8FEB86659FD93);
  h ^= h >> 32;
  return (uint32_t)h;
}

/* The checksum of a segment whose header has flags FLAGS, fed in
 * pieces: segsum with LOG_F_SUM, else crc32c (earlier builds).
 */
struct segck {
  bool sum;
  struct segsum s;
  uint32_t crc;
};

static void
segck_init (struct segck *c, uint32_t flags)
{
  c->sum = flags & LOG_F_SUM;
  segsum_init (&c->s);
  c->crc = 0;
}

static void
segck_add (struct segck *c, const void *p, size_t len)
{
  if (c->sum)
    segsum_add (&c->s, p, len);
  else
    c->crc = crc32c (c->crc, p, len);
}

static uint32_t
segck_final (const struct segck *c)
{
  return c->sum ? segsum_final (&c->s) : c->crc;
}

uint32_t
log_segment_checksum (uint32_t flags, const void *seg, size_t len)
{
  struct segck c;

  segck_init (&c, flags);
  segck_add (&c, seg, len);
  return segck_final (&c);
}

/* 64 bits: a header's counts are read from disk, and a 32-bit length
 * would wrap for ~2^29 revokes and pass header_ok (fuzz-log).
 */
static uint64_t
hdr_len_for (uint32_t nblocks, size_t nrevokes)
{
  return HHC_ROUND_UP (LOG_HDR_FIXED + 8 * ((uint64_t)nblocks + nrevokes),
                       ALIGN);
}

static uint64_t
data_len_for (const struct hhc_log *log, uint32_t nblocks)
{
  return HHC_ROUND_UP ((uint64_t)nblocks * log->bs, ALIGN);
}

/* ---- unlogged bitmap (lock held) ---- */

static bool
is_unlogged (const struct hhc_log *log, uint32_t k)
{
  return (log->unlogged[k / 64] >> (k % 64)) & 1;
}

static void
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

/* ---- mirrors ---- */

static int
do_io (struct mirror *m, const struct io *io)
{
  int r = 0;

  for (unsigned i = 0; r == 0 && i < io->n && !io->sync_only; i++)
    r = dev_pwrite (m->dev, io->p[i], io->len[i], io->off[i]);
  if (r == 0 && io->sync)
    r = dev_sync (m->dev);
  return r;
}

static void *
mirror_thread (void *arg)
{
  struct mirror *m = arg;

  hhc_lock (&m->mu);
  for (;;)
    {
      while (m->job == NULL && !m->stop)
        pthread_cond_wait (&m->cv, &m->mu);
      if (m->job == NULL)
        break;
      const struct io *io = m->job;
      hhc_unlock (&m->mu);
      int r = do_io (m, io);
      hhc_lock (&m->mu);
      m->result = r;
      m->job = NULL;
      m->done = true;
      pthread_cond_broadcast (&m->cv);
    }
  hhc_unlock (&m->mu);
  return NULL;
}

/* Owe a void to failed mirror m (log->lock held). */
static void
owe_void_locked (struct hhc_log *log, struct mirror *m)
{
  if (!m->failed || m->want_void || m->no_void)
    return;
  m->want_void = true;
  __atomic_add_fetch (&log->unvoided, 1, __ATOMIC_ACQ_REL);
  log->next_void_ns = log->next_dial_ns = 0; /* try at once */
  log->dial_tries = 0;
  pthread_cond_broadcast (&log->writer_cv);
}

/* Mark m failed (log->lock held): it is written no more.  While other
 * mirrors stay healthy they hold everything it did, and more: it is
 * owed a void at once.  The last mirror's log is the only copy that
 * survives the loss of the SSD of what FLUSHes covered: it is owed a
 * void only once a FLUSH that fell back has written every dirty block
 * back (log_void_stale).  can_void false (a log that stops being
 * written at log_stop, its last segment with no room): never voided,
 * it is what a crash at that moment leaves, which a replay handles.
 */
static void
mark_failed_locked (struct hhc_log *log, struct mirror *m, bool can_void)
{
  if (m->failed)
    return;
  m->failed = true;
  m->no_void = !can_void;
  log->healthy--;
  if (log->healthy > 0)
    owe_void_locked (log, m);
}

/* Run io on every healthy mirror at once; a mirror that fails is marked
 * failed.  Returns 0 if at least one mirror succeeded.  Called by one
 * thread at a time (the writer, or open/close with no writer).
 */
static int
mirrors_io_locked (struct hhc_log *log, const struct io *io)
{
  bool use[LOG_MAX_MIRRORS];
  int res[LOG_MAX_MIRRORS];
  unsigned ok = 0, n = 0, left;

  hhc_lock (&log->lock);
  for (unsigned i = 0; i < log->nm; i++)
    n += use[i] = !log->m[i].failed && !(io->sb && log->m[i].sb_hold);
  hhc_unlock (&log->lock);
  for (unsigned i = 0; i < log->nm; i++)
    {
      struct mirror *m = &log->m[i];
      if (!use[i])
        continue;
      if (n == 1 || !m->has_thread)
        res[i] = do_io (m, io);
      else
        {
          hhc_lock (&m->mu);
          m->done = false;
          m->job = io;
          pthread_cond_broadcast (&m->cv);
          hhc_unlock (&m->mu);
        }
    }
  for (unsigned i = 0; i < log->nm; i++)
    {
      struct mirror *m = &log->m[i];
      if (!use[i])
        continue;
      if (n > 1 && m->has_thread)
        {
          hhc_lock (&m->mu);
          while (!m->done)
            pthread_cond_wait (&m->cv, &m->mu);
          res[i] = m->result;
          hhc_unlock (&m->mu);
        }
      if (res[i] == 0)
        {
          ok++;
          continue;
        }
      hhc_lock (&log->lock);
      mark_failed_locked (log, m, true);
      left = log->healthy;
      pthread_cond_broadcast (&log->done_cv);
      pthread_cond_broadcast (&log->buf_cv);
      hhc_unlock (&log->lock);
      hhc_log (log->logfn, HHC_LOG_ERROR,
               "log mirror %s failed: %s; it is no longer written (%u "
               "healthy mirror%s left)",
               m->dev->name, strerror (res[i]), left, left == 1 ? "" : "s");
    }
  hhc_lock (&log->lock);
  log->st.syncs += io->sync;
  hhc_unlock (&log->lock);
  return ok ? 0 : EIO;
}

static int
mirrors_io (struct hhc_log *log, const struct io *io)
{
  HHC_SCOPED_LOCK (&log->io_lock);

  return mirrors_io_locked (log, io);
}

/* ---- superblock ---- */

static void
build_sb (struct hhc_log *log, unsigned char *sb)
{
  size_t idl = strlen (log->identity);

  memset (sb, 0, SB_SIZE);
  memcpy (sb, LOG_MAGIC, 8);
  put32 (sb + 8, LOG_VERSION);
  put32 (sb + 12, log->bs);
  memcpy (sb + 16, log->uuid, 16);
  memcpy (sb + 32, log->cache_uuid, 16);
  put64 (sb + 48, log->volume_size);
  put64 (sb + 56, log->region_size);
  put32 (sb + 64, log->segment_size);
  put32 (sb + 68, idl);
  put64 (sb + 72, log->hint_off);
  put64 (sb + 80, log->hint_seq);
  put64 (sb + 88, log->sb_gen);
  memcpy (sb + 96, log->identity, idl);
  put32 (sb + 4088, log->nm);
  put32 (sb + 4092, crc32c (0, sb, 4092));
}

/* Write the superblock (next generation, over the older copy) to every
 * healthy mirror and sync (io_lock held).
 */
static int
write_sb_locked (struct hhc_log *log)
{
  HHC_CLEANUP_FREE unsigned char *sb = hhc_alloc_aligned (SB_SIZE);
  struct io io = { .n = 1, .sync = true, .sb = true };

  if (sb == NULL)
    return ENOMEM;
  log->sb_gen++;
  build_sb (log, sb);
  io.p[0] = sb;
  io.len[0] = SB_SIZE;
  io.off[0] = (log->sb_gen & 1) * SB_SIZE;
  return mirrors_io_locked (log, &io);
}

static int
write_sb (struct hhc_log *log)
{
  HHC_SCOPED_LOCK (&log->io_lock);

  return write_sb_locked (log);
}

/* This run's log is complete on every mirror (log_rebase, log_discard):
 * a void mirror that joined gets its superblock, both copies (the void
 * one would win over one).
 */
static int
release_sb_hold (struct hhc_log *log)
{
  HHC_SCOPED_LOCK (&log->io_lock);
  bool any = false;
  int r;

  for (unsigned i = 0; i < log->nm; i++)
    {
      any |= log->m[i].sb_hold;
      log->m[i].sb_hold = false;
    }
  if (!any)
    return 0;
  r = write_sb_locked (log);
  return r ? r : write_sb_locked (log);
}

/* ---- voiding a log that fell out of use ----
 *
 * A mirror that failed keeps, on disk, the chain it had: entries that
 * were live then, older than what the cache and the backend get later
 * (FLUSHes fall back to write-back once no mirror is left, and revokes
 * no longer reach it).  Replayed after the loss of the SSD it would
 * write that old data over newer data.  So a failed mirror is voided:
 * both superblock copies become a void superblock (magic LOG_VOID_MAGIC,
 * the log and cache UUIDs, crc32c), and a void mirror reads as blank.
 * When it is owed one: mark_failed_locked, log_void_stale.  Then the
 * writer tries when idle, every VOID_RETRY_NS, as do every FLUSH that
 * falls back and log_stop; a dead NBD connection is dialled again only
 * as dial_due_locked allows.  A failed mirror never counts again in
 * this run.
 */
#define LOG_VOID_MAGIC "HHCVOID1"
#define VOID_RETRY_NS 1000000000u
/* Dialling a dead NBD mirror again is bounded (a TCP connect to a host
 * that is gone waits minutes): the writer or a FLUSH waits for it.
 */
#define VOID_DIAL_MS 1000

static void
quiet_log (enum hhc_log_level level, const char *msg)
{
}

static void
build_void_sb (const uint8_t log_uuid[16], const uint8_t cache_uuid[16],
               unsigned char *sb)
{
  memset (sb, 0, SB_SIZE);
  memcpy (sb, LOG_VOID_MAGIC, 8);
  put32 (sb + 8, LOG_VERSION);
  memcpy (sb + 16, log_uuid, 16);
  memcpy (sb + 32, cache_uuid, 16);
  put32 (sb + 4092, crc32c (0, sb, 4092));
}

/* Overwrite both superblock copies of dev with a void one, and sync. */
static int
void_dev (struct hhc_dev *dev, const uint8_t log_uuid[16],
          const uint8_t cache_uuid[16])
{
  HHC_CLEANUP_FREE unsigned char *sb = hhc_alloc_aligned (2 * SB_SIZE);
  int r;

  if (sb == NULL)
    return ENOMEM;
  build_void_sb (log_uuid, cache_uuid, sb);
  memcpy (sb + SB_SIZE, sb, SB_SIZE);
  r = dev_pwrite (dev, sb, 2 * SB_SIZE, 0);
  return r ? r : dev_sync (dev);
}

/* May a dead NBD mirror be dialled again now (lock held)?  If so, the
 * next dial waits 1, 2, 4, then 8 s: against a host that is gone each
 * costs VOID_DIAL_MS of a FLUSH's or the writer's time.
 */
static bool
dial_due_locked (struct hhc_log *log)
{
  uint64_t now = hhc_now_ns ();

  if (now < log->next_dial_ns)
    return false;
  log->next_dial_ns
      = now + ((uint64_t)VOID_RETRY_NS << HHC_MIN (log->dial_tries, 3u));
  log->dial_tries++;
  return true;
}

/* Void every failed mirror that is owed it, dialling a dead NBD one
 * again if dial (void_lock held; not log->lock: the devices of failed
 * mirrors are used by no one else).
 */
static void
void_failed (struct hhc_log *log, bool dial)
{
  uint8_t luuid[16], cuuid[16];

  for (unsigned i = 0; i < log->nm; i++)
    {
      struct mirror *m = &log->m[i];
      hhc_lock (&log->lock);
      bool todo = m->want_void && !m->voided;
      memcpy (luuid, log->uuid, 16);
      memcpy (cuuid, log->cache_uuid, 16);
      hhc_unlock (&log->lock);
      if (!todo)
        continue;
      int r = void_dev (m->dev, luuid, cuuid);
      struct hhc_dev *d;
      /* A dead NBD connection fails every request for ever: dial the
       * server again (it may be back).  A file device is not opened
       * twice (flock).
       */
      if (r && dial && m->path && dev_is_nbd_uri (m->path)
          && dev_open_nbd_bounded (m->path, VOID_DIAL_MS, quiet_log, &d) == 0)
        {
          r = void_dev (d, luuid, cuuid);
          dev_close (d);
        }
      hhc_lock (&log->lock);
      bool warn = r && !m->void_warned;
      if (r == 0)
        {
          m->voided = true;
          __atomic_sub_fetch (&log->unvoided, 1, __ATOMIC_ACQ_REL);
        }
      else
        m->void_warned = true;
      hhc_unlock (&log->lock);
      if (r == 0)
        hhc_log (log->logfn, HHC_LOG_WARNING,
                 "log mirror %s: voided (it failed earlier; nothing on it "
                 "can be replayed now)",
                 m->dev->name);
      else if (warn)
        hhc_log (log->logfn, HHC_LOG_ERROR,
                 "log mirror %s: cannot void it yet (%s): retrying; until "
                 "then it holds a stale log, which a restart after the loss "
                 "of the cache would replay",
                 m->dev->name, strerror (r));
    }
}

unsigned
log_void_stale (struct hhc_log *log)
{
  hhc_lock (&log->lock);
  for (unsigned i = 0; i < log->nm; i++)
    owe_void_locked (log, &log->m[i]);
  hhc_unlock (&log->lock);
  return log_void_failed (log);
}

unsigned
log_void_failed (struct hhc_log *log)
{
  if (__atomic_load_n (&log->unvoided, __ATOMIC_ACQUIRE) == 0)
    return 0;
  hhc_lock (&log->lock);
  bool dial = dial_due_locked (log);
  hhc_unlock (&log->lock);
  HHC_SCOPED_LOCK (&log->void_lock);
  void_failed (log, dial);
  return __atomic_load_n (&log->unvoided, __ATOMIC_ACQUIRE);
}

/* Read a mirror's superblock: 0 (valid, into sbout), ENOENT (blank),
 * ESTALE (voided: a void superblock, into sbout), EINVAL (corrupt,
 * logged).
 */
static int
read_sb (struct hhc_log *log, struct mirror *m, unsigned char *sbout)
{
  HHC_CLEANUP_FREE unsigned char *buf = hhc_alloc_aligned (2 * SB_SIZE);
  bool magic = false;
  uint64_t best_gen = 0;
  int best = -1, r;

  if (buf == NULL)
    return ENOMEM;
  if ((r = dev_pread (m->dev, buf, 2 * SB_SIZE, 0)) != 0)
    {
      hhc_log (log->logfn, HHC_LOG_ERROR, "log %s: reading superblock: %s",
               m->dev->name, strerror (r));
      return r;
    }
  for (int c = 0; c < 2; c++)
    {
      unsigned char *sb = buf + c * SB_SIZE;
      /* A void copy wins: only voiding writes one, and a crash in the
       * middle of it may have left the other copy valid.
       */
      if (memcmp (sb, LOG_VOID_MAGIC, 8) == 0
          && crc32c (0, sb, 4092) == get32 (sb + 4092))
        {
          memcpy (sbout, sb, SB_SIZE);
          return ESTALE;
        }
      if (memcmp (sb, LOG_MAGIC, 8) != 0)
        continue;
      magic = true;
      if (crc32c (0, sb, 4092) != get32 (sb + 4092)
          || get32 (sb + 8) != LOG_VERSION)
        continue;
      if (best < 0 || get64 (sb + 88) > best_gen)
        {
          best = c;
          best_gen = get64 (sb + 88);
        }
    }
  if (best < 0 && !magic)
    return ENOENT;
  if (best < 0)
    {
      hhc_log (log->logfn, HHC_LOG_ERROR,
               "log %s: superblock is corrupt (bad checksum or version)",
               m->dev->name);
      return EINVAL;
    }
  memcpy (sbout, buf + best * SB_SIZE, SB_SIZE);
  return 0;
}

/* ---- scanning ---- */

static void
scan_free (struct scan *s)
{
  seginfo_vec_reset (&s->segs);
}

/* Check a segment header read at lpos; the header's first 4 KiB are in
 * h.  Returns true if it looks like segment seq of this log.
 */
static bool
header_ok (struct hhc_log *log, const unsigned char *h, uint64_t seq,
           uint64_t phys)
{
  uint32_t hl = get32 (h + 36), nb = get32 (h + 28), nr = get32 (h + 32);

  if (memcmp (h, LOG_SEG_MAGIC, 8) != 0 || get64 (h + 8) != seq
      || memcmp (h + 48, log->uuid, 16) != 0 || get64 (h + 40) != phys / ALIGN)
    return false;
  if (hl < ALIGN || hl % ALIGN || hl < hdr_len_for (nb, nr)
      || nb > log->region_size / log->bs)
    return false;
  return phys + hl + data_len_for (log, nb) <= log->region_size;
}

/* Follow the chain of segments from the head hint on mirror m. */
static int
scan_mirror (struct hhc_log *log, struct mirror *m, uint64_t hint_off,
             uint64_t hint_seq, struct scan *s)
{
  const size_t chunk = 1024 * 1024;
  HHC_CLEANUP_FREE unsigned char *h = hhc_alloc_aligned (ALIGN);
  /* Grown to the largest read, at most chunk: most segments are far
   * smaller, and a fresh megabyte per scan costs 256 page faults.
   */
  HHC_CLEANUP_FREE unsigned char *big = NULL;
  size_t bigsize = 0;
  uint64_t lpos = hint_off, seq = hint_seq, start = hint_off;
  bool wrapped = false, have_prev = false;
  uint32_t prev_crc = 0;

  memset (s, 0, sizeof *s);
  s->last_barrier = -1;
  if (h == NULL)
    return ENOMEM;
  while (lpos - start < log->region_size)
    {
      uint64_t phys = lpos % log->region_size;
      if (phys + ALIGN > log->region_size)
        {
          lpos += log->region_size - phys;
          continue;
        }
      if (dev_pread (m->dev, h, ALIGN, LOG_REGION_OFF + phys) != 0
          || !header_ok (log, h, seq, phys))
        break;
      uint32_t flags = get32 (h + 24), hl = get32 (h + 36);
      uint32_t nb = get32 (h + 28), want = get32 (h + 80);
      /* Each segment names its predecessor's crc: a stale segment of a
       * crashed run whose sequence number fits is not taken for ours.
       */
      if (have_prev && get32 (h + 84) != prev_crc)
        break;
      uint64_t dl = (uint64_t)nb * log->bs, done;
      uint32_t crc;

      struct segck ck;
      put32 (h + 80, 0);
      segck_init (&ck, flags);
      segck_add (&ck, h, ALIGN);
      /* The rest of the header, then the data, in chunks. */
      bool bad = false;
      for (done = ALIGN; !bad && done < hl + dl;)
        {
          uint64_t n = HHC_MIN ((uint64_t)chunk, hl + dl - done);
          uint64_t rd = HHC_ROUND_UP (n, 512);
          if (rd > bigsize)
            {
              free (big);
              bigsize = HHC_ROUND_UP (rd, ALIGN);
              if ((big = hhc_alloc_aligned (bigsize)) == NULL)
                return ENOMEM;
            }
          if (phys + done + rd > log->region_size
              || dev_pread (m->dev, big, rd, LOG_REGION_OFF + phys + done))
            bad = true;
          else
            segck_add (&ck, big, n);
          done += n;
        }
      crc = segck_final (&ck);
      if (bad || crc != want)
        break;
      if (flags & LOG_F_WRAP)
        {
          if (wrapped || nb)
            break;
          wrapped = true;
          lpos += log->region_size - phys;
          continue;
        }
      wrapped = false;
      prev_crc = want;
      have_prev = true;
      struct seg_info si
          = { seq, get64 (h + 16), lpos, flags, hl, nb, get32 (h + 32) };
      if (seginfo_vec_append (&s->segs, si))
        return ENOMEM;
      if (flags & LOG_F_BARRIER)
        s->last_barrier = s->segs.len - 1;
      lpos += hl + data_len_for (log, nb);
      seq++;
    }
  s->end_lpos = lpos;
  s->end_seq = seq;
  s->end_crc = prev_crc;
  return 0;
}

/* ---- open ---- */

static void
free_log (struct hhc_log *log)
{
  if (log == NULL)
    return;
  for (unsigned i = 0; i < log->nm; i++)
    {
      if (log->m[i].own)
        dev_close (log->m[i].dev);
      free (log->m[i].path);
      pthread_mutex_destroy (&log->m[i].mu);
      pthread_cond_destroy (&log->m[i].cv);
    }
  for (unsigned i = 0; log->bufs && i < log->nbufs; i++)
    {
      free (log->bufs[i].mem);
      free (log->bufs[i].lbas);
      free (log->bufs[i].keys);
      u64_vec_reset (&log->bufs[i].revokes);
      u32_vec_reset (&log->bufs[i].deaths);
    }
  free (log->bufs);
  free (log->hdrbuf);
  free (log->markbuf);
  free (log->ring);
  free (log->keys);
  free (log->unlogged);
  u64_vec_reset (&log->pending_rev);
  death_vec_reset (&log->deaths);
  scan_free (&log->scan);
  free (log->identity);
  pthread_mutex_destroy (&log->lock);
  pthread_mutex_destroy (&log->io_lock);
  pthread_mutex_destroy (&log->void_lock);
  pthread_cond_destroy (&log->writer_cv);
  pthread_cond_destroy (&log->done_cv);
  pthread_cond_destroy (&log->buf_cv);
  free (log);
}

/* Does a valid superblock belong to this backend? */
static int
check_sb_owner (struct hhc_log *log, struct mirror *m, const unsigned char *sb)
{
  uint32_t idl = get32 (sb + 68);

  if (log->adopt && idl <= IDENTITY_MAX && HHC_IS_POW2 (get32 (sb + 12)))
    {
      char *id = strndup ((const char *)sb + 96, idl);
      if (id == NULL)
        return ENOMEM;
      free (log->identity);
      log->identity = id;
      log->volume_size = get64 (sb + 48);
      log->bs = get32 (sb + 12);
      /* Offline (hhcctl recover): the log's own segment size, not the
       * default, or a small log made with segment-size=64K is refused
       * as too small for 1M segments (found by fuzz-log).
       */
      uint32_t seg = get32 (sb + 64);
      if (HHC_IS_POW2 (seg) && seg >= 64 * 1024 && seg <= 64 * 1024 * 1024
          && seg >= log->bs)
        log->segment_size = seg;
      log->max_blocks = HHC_MAX (log->segment_size / log->bs, 1);
      log->adopt = false;
    }

  if (idl > IDENTITY_MAX || get64 (sb + 48) != log->volume_size
      || get32 (sb + 12) != log->bs || idl != strlen (log->identity)
      || memcmp (sb + 96, log->identity, idl) != 0)
    {
      hhc_log (log->logfn, HHC_LOG_ERROR,
               "log %s belongs to another volume (identity \"%.*s\", %" PRIu64
               " bytes, block size %u; this volume is \"%s\", %" PRIu64
               " bytes, block size %u): use a blank log device",
               m->dev->name, (int)HHC_MIN (idl, IDENTITY_MAX), sb + 96,
               get64 (sb + 48), get32 (sb + 12), log->identity,
               log->volume_size, log->bs);
      return EINVAL;
    }
  return 0;
}

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
  uint64_t n = region_size / ALIGN;

  if (n > RING_EXACT_MAX)
    n = HHC_MAX (RING_EXACT_MAX, region_size / RING_COARSE);
  if (cap && n > cap)
    n = cap;
  return n;
}

static int
alloc_mem (struct hhc_log *log, unsigned nbuffers, uint32_t nkeys)
{
  log->nkeys = nkeys;
  log->ring_cap = ring_slots (log->region_size, log->ring_max) + nbuffers + 2;
  log->ring = calloc (log->ring_cap, sizeof *log->ring);
  log->keys = malloc ((size_t)HHC_MAX (nkeys, 1) * sizeof *log->keys);
  log->unlogged = calloc ((nkeys + 63) / 64 + 1, 8);
  log->nbufs = nbuffers;
  log->bufs = calloc (nbuffers, sizeof *log->bufs);
  if (!log->ring || !log->keys || !log->unlogged || !log->bufs)
    return ENOMEM;
  for (uint32_t k = 0; k < nkeys; k++)
    log->keys[k] = (struct key){ 0, LOG_NONE, 0, LOG_NONE, LOG_NONE };
  for (unsigned i = 0; i < nbuffers; i++)
    {
      struct buf *b = &log->bufs[i];
      size_t hmax = hdr_len_for (log->max_blocks, log->rev_cap);
      b->mem = hhc_alloc_aligned (hmax + (size_t)log->max_blocks * log->bs);
      b->data = b->mem ? b->mem + hmax : NULL;
      b->lbas = malloc ((size_t)log->max_blocks * 8);
      b->keys = malloc ((size_t)log->max_blocks * 4);
      if (!b->mem || !b->lbas || !b->keys)
        return ENOMEM;
      b->next = log->freelist;
      log->freelist = b;
    }
  return 0;
}

/* A log with conf's geometry and its mirrors open (nothing read). */
static int
new_log (const struct log_conf *conf, struct hhc_log **logp, uint64_t *min_size)
{
  struct hhc_log *log = calloc (1, sizeof *log);

  *logp = log;
  *min_size = UINT64_MAX;
  if (log == NULL)
    return ENOMEM;
  pthread_mutex_init (&log->lock, NULL);
  pthread_mutex_init (&log->io_lock, NULL);
  pthread_mutex_init (&log->void_lock, NULL);
  pthread_cond_init (&log->writer_cv, NULL);
  pthread_cond_init (&log->done_cv, NULL);
  pthread_cond_init (&log->buf_cv, NULL);
  log->logfn = conf->log;
  log->ring_max = conf->ring_slots;
  log->bs = conf->block_size;
  log->volume_size = conf->volume_size;
  log->segment_size = conf->segment_size ? conf->segment_size : 1024 * 1024;
  log->segment_size = HHC_MAX (log->segment_size, log->bs);
  log->max_blocks = log->segment_size / log->bs;
  log->identity = strndup (conf->identity ? conf->identity : "", IDENTITY_MAX);
  log->adopt = conf->identity == NULL;
  if (log->identity == NULL)
    return ENOMEM;
  if (conf->npaths == 0 || conf->npaths > LOG_MAX_MIRRORS)
    {
      hhc_log (conf->log, HHC_LOG_ERROR, "log= may be given 1 to %d times",
               LOG_MAX_MIRRORS);
      return EINVAL;
    }
  for (unsigned i = 0; i < conf->npaths; i++)
    {
      struct mirror *m = &log->m[log->nm++];
      pthread_mutex_init (&m->mu, NULL);
      pthread_cond_init (&m->cv, NULL);
      if (conf->paths && conf->paths[i]
          && (m->path = strdup (conf->paths[i])) == NULL)
        return ENOMEM;
      if (conf->test_devs && conf->test_devs[i])
        m->dev = conf->test_devs[i];
      else
        {
          int r = dev_open_path (conf->paths[i], 0, false, conf->log, &m->dev);
          if (r)
            return r;
          m->own = true;
        }
      *min_size = HHC_MIN (*min_size, m->dev->size);
    }
  return 0;
}

int
log_open (const struct log_conf *conf, const uint8_t cache_uuid[16],
          struct hhc_log **logp, enum log_found *found)
{
  HHC_CLEANUP_FREE unsigned char *sb = hhc_alloc_aligned (SB_SIZE);
  HHC_CLEANUP_FREE unsigned char *good = hhc_alloc_aligned (SB_SIZE);
  struct hhc_log *log;
  uint64_t min_size;
  unsigned nvalid = 0, nvoid = 0;
  int r = new_log (conf, &log, &min_size);

  if (r == 0 && (sb == NULL || good == NULL))
    r = ENOMEM;
  if (r)
    goto fail;
  /* Superblocks: every valid one must be of the same log and backend. */
  for (unsigned i = 0; i < log->nm; i++)
    {
      struct mirror *m = &log->m[i];
      r = read_sb (log, m, sb);
      if (r == ESTALE)
        {
          hhc_log (conf->log, HHC_LOG_INFO,
                   "log %s was voided (it fell out of use in an earlier run): "
                   "it holds nothing to replay and is used as a blank device",
                   m->dev->name);
          nvoid++;
          m->sb_hold = true;
          r = ENOENT;
        }
      if (r == ENOENT)
        {
          m->blank = true;
          continue;
        }
      if (r || (r = check_sb_owner (log, m, sb)) != 0)
        goto fail;
      if (nvalid && memcmp (sb + 16, good + 16, 16) != 0)
        {
          hhc_log (conf->log, HHC_LOG_ERROR,
                   "log mirrors %s and %s belong to different logs: give "
                   "mirrors of one log, or blank devices",
                   log->m[0].dev->name, m->dev->name);
          r = EINVAL;
          goto fail;
        }
      if (nvalid == 0 || get64 (sb + 88) > get64 (good + 88))
        memcpy (good, sb, SB_SIZE);
      nvalid++;
    }
  if (nvalid == 0 && conf->identity == NULL)
    {
      hhc_log (conf->log, HHC_LOG_ERROR,
               nvoid ? "%s: the log was voided (it fell out of use): it "
                       "holds nothing to recover"
                     : "%s: not an HHC log",
               log->m[0].dev->name);
      r = EINVAL;
      goto fail;
    }
  if (nvalid == 0)
    for (unsigned i = 0; i < log->nm; i++)
      log->m[i].sb_hold = false; /* formatted below, as blank ones */
  if (nvalid == 0)
    {
      log->region_size = min_size > LOG_REGION_OFF
                             ? (min_size - LOG_REGION_OFF) / ALIGN * ALIGN
                             : 0;
      log->region_size = HHC_MIN (log->region_size, MAX_REGION);
      hhc_make_uuid (log->uuid);
      memcpy (log->cache_uuid, cache_uuid, 16);
      log->hint_off = 0;
      log->hint_seq = 1;
    }
  else
    {
      memcpy (log->uuid, good + 16, 16);
      memcpy (log->cache_uuid, good + 32, 16);
      log->region_size = get64 (good + 56);
      log->hint_off = get64 (good + 72);
      log->hint_seq = get64 (good + 80);
      log->sb_gen = get64 (good + 88);
      /* Sequence numbers start at 1 and never come near MAX_SEQ: a
       * head outside is corruption (with 0, every barrier of the next
       * run would count as durable at once: fuzz-log).
       */
      if (log->hint_seq == 0 || log->hint_seq > MAX_SEQ)
        {
          hhc_log (conf->log, HHC_LOG_ERROR,
                   "log: superblock is corrupt (head sequence %" PRIu64 ")",
                   log->hint_seq);
          r = EINVAL;
          goto fail;
        }
    }
  /* A region must hold the reservations of every buffer and more. */
  log->nbufs = conf->nbuffers ? conf->nbuffers : 4;
  log->rev_cap = HHC_MAX (log->max_blocks, 256u);
  log->reserve = HHC_ROUND_UP ((uint64_t)log->max_blocks * log->bs, ALIGN)
                 + hdr_len_for (log->max_blocks, log->rev_cap);
  /* A small log uses fewer buffers (at least 2): the reservations of
   * all of them, one more for wrap waste and one to spare must fit.
   */
  while (log->nbufs > 2
         && (uint64_t)(log->nbufs + 3) * log->reserve > log->region_size)
    log->nbufs--;
  uint64_t need = 5 * log->reserve;
  /* What a superblock records is checked before any sum with it: a
   * region of 2^64 - 64 KiB wrapped LOG_REGION_OFF + region_size to 0,
   * passed the size check, and log_start tried to allocate a ring of
   * 2^32 entries (fuzz-log, in CI).
   */
  if (nvalid
      && (log->region_size % ALIGN || log->region_size > MAX_REGION
          || log->hint_off >= log->region_size || log->hint_off % ALIGN))
    {
      hhc_log (conf->log, HHC_LOG_ERROR,
               "log %s: superblock is corrupt (region of %" PRIu64
               " bytes, head at %" PRIu64 ")",
               log->m[0].dev->name, log->region_size, log->hint_off);
      r = EINVAL;
      goto fail;
    }
  for (unsigned i = 0; i < log->nm; i++)
    if (log->region_size < need || log->region_size % ALIGN
        || log->m[i].dev->size < LOG_REGION_OFF
        || log->m[i].dev->size - LOG_REGION_OFF < log->region_size
        || log->hint_off >= log->region_size)
      {
        hhc_log (conf->log, HHC_LOG_ERROR,
                 "log %s: device is too small (%" PRIu64
                 " bytes; with segment-size=%u it needs at least %" PRIu64 ")",
                 log->m[i].dev->name, log->m[i].dev->size, log->segment_size,
                 LOG_REGION_OFF + HHC_MAX (need, log->region_size));
        r = EINVAL;
        goto fail;
      }
  log->healthy = log->nm;
  log->st.mirrors = log->nm;
  if (nvalid == 0)
    {
      /* Format: the superblock on every mirror, and the first segment
       * position cleared so no older log's data can be mistaken.
       */
      HHC_CLEANUP_FREE char *zero = hhc_alloc_aligned (2 * SB_SIZE);
      struct io io = { .n = 2, .sync = true };
      if (zero == NULL)
        {
          r = ENOMEM;
          goto fail;
        }
      io.p[0] = io.p[1] = zero;
      io.len[0] = 2 * SB_SIZE;
      io.len[1] = ALIGN;
      io.off[0] = 0;
      io.off[1] = LOG_REGION_OFF;
      if ((r = mirrors_io (log, &io)) != 0 || (r = write_sb (log)) != 0
          || log->healthy < log->nm)
        {
          r = r ? r : EIO;
          hhc_log (conf->log, HHC_LOG_ERROR, "formatting the log failed");
          goto fail;
        }
      for (unsigned i = 0; i < log->nm; i++)
        log->m[i].blank = false;
      hhc_log (conf->log, HHC_LOG_INFO,
               "log: formatted %u mirror%s, region of %" PRIu64 " bytes",
               log->nm, log->nm == 1 ? "" : "s", log->region_size);
      *found = LOG_FOUND_BLANK;
    }
  else
    *found = LOG_FOUND_VALID;

  /* Scan every valid mirror; the one with the newest barrier counts. */
  for (unsigned i = 0; i < log->nm; i++)
    {
      struct scan s;
      if (log->m[i].blank)
        continue;
      if ((r = scan_mirror (log, &log->m[i], log->hint_off, log->hint_seq, &s))
          != 0)
        goto fail;
      long lb = s.last_barrier, cb = log->scan.last_barrier;
      bool better
          = log->scan.end_seq == 0
            || (lb >= 0
                && (cb < 0 || s.segs.ptr[lb].seq > log->scan.segs.ptr[cb].seq))
            || (lb == cb && s.end_seq > log->scan.end_seq);
      if (better)
        {
          scan_free (&log->scan);
          log->scan = s;
          log->best = i;
        }
      else
        scan_free (&s);
    }
  if (*found == LOG_FOUND_BLANK)
    {
      log->scan.end_lpos = 0;
      log->scan.end_seq = 1;
      log->scan.last_barrier = -1;
    }
  *logp = log;
  return 0;

fail:
  free_log (log);
  return r ? r : EINVAL;
}

/* Is the superblock sb (valid or void) of the log log_uuid, or, when
 * that is zero (a cache of an earlier build does not record it), of a
 * log paired with cache cache_uuid?
 */
static bool
sb_of_cache (const unsigned char *sb, const uint8_t cache_uuid[16],
             const uint8_t log_uuid[16])
{
  static const uint8_t zero[16];

  if (memcmp (log_uuid, zero, 16) != 0)
    return memcmp (sb + 16, log_uuid, 16) == 0;
  return memcmp (sb + 32, cache_uuid, 16) == 0;
}

/* Check every mirror of a log to retire: each is blank, or valid or
 * void and of this cache; at least one is not blank.  Fill the UUIDs
 * from a valid one.  ESTALE: none is valid (every one void already).
 */
static int
check_retire (struct hhc_log *log, const uint8_t cache_uuid[16],
              const uint8_t log_uuid[16], unsigned char *sb)
{
  unsigned nvalid = 0, nvoid = 0, recorded = 0;

  for (unsigned i = 0; i < log->nm; i++)
    {
      struct mirror *m = &log->m[i];
      int r = read_sb (log, m, sb);
      if (r == ENOENT)
        continue;
      if (r == 0)
        recorded = HHC_MAX (recorded, get32 (sb + 4088));
      if (r != 0 && r != ESTALE)
        return r;
      if (!sb_of_cache (sb, cache_uuid, log_uuid))
        {
          hhc_log (log->logfn, HHC_LOG_ERROR,
                   "log %s belongs to another cache: give the log this "
                   "cache was used with in mode hhc",
                   m->dev->name);
          return EINVAL;
        }
      m->want_void = r == 0;
      nvoid += r == ESTALE;
      if (r == 0)
        {
          memcpy (log->uuid, sb + 16, 16);
          memcpy (log->cache_uuid, sb + 32, 16);
          nvalid++;
        }
    }
  if (recorded > log->nm)
    {
      /* A mirror left out would still be replayed. */
      hhc_log (log->logfn, HHC_LOG_ERROR,
               "log %s had %u mirrors when last written, %u given: give "
               "every mirror of it as log=",
               log->m[0].dev->name, recorded, log->nm);
      return EINVAL;
    }
  if (nvalid + nvoid == 0)
    {
      hhc_log (log->logfn, HHC_LOG_ERROR,
               "log %s is blank, not the log this cache was used with in "
               "mode hhc: give that log's log=",
               log->m[0].dev->name);
      return EINVAL;
    }
  return nvalid ? 0 : ESTALE;
}

int
log_retire (const struct log_conf *conf, const uint8_t cache_uuid[16],
            const uint8_t log_uuid[16], bool void_it)
{
  HHC_CLEANUP_FREE unsigned char *sb = hhc_alloc_aligned (SB_SIZE);
  struct hhc_log *log;
  uint64_t min_size;
  int r = new_log (conf, &log, &min_size);

  if (r == 0 && sb == NULL)
    r = ENOMEM;
  if (r == 0)
    r = check_retire (log, cache_uuid, log_uuid, sb);
  for (unsigned i = 0; r == 0 && void_it && i < log->nm; i++)
    if (log->m[i].want_void
        && (r = void_dev (log->m[i].dev, log->uuid, log->cache_uuid)) != 0)
      hhc_log (conf->log, HHC_LOG_ERROR, "log %s: voiding it: %s",
               log->m[i].dev->name, strerror (r));
  if (r == 0 && void_it)
    hhc_log (conf->log, HHC_LOG_INFO,
             "log: voided (retired): the cache is used without it from now "
             "on");
  free_log (log);
  return r == ESTALE ? 0 : r;
}

void
log_volume (struct hhc_log *log, const char **identity, uint64_t *size,
            uint32_t *block_size)
{
  *identity = log->identity;
  *size = log->volume_size;
  *block_size = log->bs;
}

void
log_uuids (struct hhc_log *log, uint8_t log_uuid[16], uint8_t cache_uuid[16])
{
  memcpy (log_uuid, log->uuid, 16);
  memcpy (cache_uuid, log->cache_uuid, 16);
}

/* ---- replay ---- */

/* LBA -> device offset of its data (UINT64_MAX: revoked). */
struct rmap {
  uint64_t *lba, *off;
  size_t cap, n;
};

static uint64_t *
rmap_slot (struct rmap *m, uint64_t lba)
{
  size_t i = hhc_hash64 (lba) & (m->cap - 1);

  while (m->lba[i] != UINT64_MAX && m->lba[i] != lba)
    i = (i + 1) & (m->cap - 1);
  if (m->lba[i] == UINT64_MAX)
    {
      m->lba[i] = lba;
      m->off[i] = UINT64_MAX;
      m->n++;
    }
  return &m->off[i];
}

int
log_replay (struct hhc_log *log,
            int (*write) (void *opaque, const void *buf, uint64_t lba),
            void (*progress) (void *opaque, uint64_t done, uint64_t total),
            void *opaque)
{
  struct scan *s = &log->scan;
  struct mirror *m = &log->m[log->best];
  uint64_t nblocks = (log->volume_size + log->bs - 1) / log->bs;
  uint64_t entries = 0, done = 0, total = 0, start_seq;
  struct rmap map = { 0 };
  HHC_CLEANUP_FREE unsigned char *hdr = NULL;
  HHC_CLEANUP_FREE char *blk = hhc_alloc_aligned (log->bs);
  uint32_t maxhl = ALIGN;
  long first = -1;
  int r = 0;

  if (s->last_barrier < 0)
    {
      hhc_log (log->logfn, HHC_LOG_INFO,
               "log replay: no complete barrier in the log, nothing to "
               "replay");
      return 0;
    }
  start_seq = HHC_MAX (log->hint_seq, s->segs.ptr[s->last_barrier].base);
  for (long i = 0; i <= s->last_barrier; i++)
    if (s->segs.ptr[i].seq >= start_seq)
      {
        if (first < 0)
          first = i;
        entries += s->segs.ptr[i].nblocks + s->segs.ptr[i].nrevokes;
        maxhl = HHC_MAX (maxhl, s->segs.ptr[i].hdr_len);
      }
  if (first < 0)
    return 0;
  map.cap = 16;
  while (map.cap < 2 * entries + 16)
    map.cap *= 2;
  map.lba = malloc (map.cap * 8);
  map.off = malloc (map.cap * 8);
  hdr = hhc_alloc_aligned (maxhl);
  if (!map.lba || !map.off || !hdr || !blk)
    {
      r = ENOMEM;
      goto out;
    }
  memset (map.lba, 0xff, map.cap * 8);
  hhc_log (log->logfn, HHC_LOG_INFO,
           "log replay: segments %" PRIu64 " to %" PRIu64 " from %s",
           s->segs.ptr[first].seq, s->segs.ptr[s->last_barrier].seq,
           m->dev->name);
  for (long i = first; i <= s->last_barrier; i++)
    {
      struct seg_info *si = &s->segs.ptr[i];
      uint64_t phys = si->lpos % log->region_size;
      if ((r = dev_pread (m->dev, hdr, si->hdr_len, LOG_REGION_OFF + phys))
          != 0)
        goto out;
      const unsigned char *lbas = hdr + LOG_HDR_FIXED;
      const unsigned char *revs = lbas + 8 * (size_t)si->nblocks;
      for (uint32_t j = 0; j < si->nrevokes; j++)
        *rmap_slot (&map, get64 (revs + 8 * j)) = UINT64_MAX;
      for (uint32_t j = 0; j < si->nblocks; j++)
        {
          uint64_t lba = get64 (lbas + 8 * j);
          if (lba >= nblocks)
            {
              hhc_log (log->logfn, HHC_LOG_ERROR,
                       "log %s: segment %" PRIu64 " names block %" PRIu64
                       " beyond the volume: refusing to replay",
                       m->dev->name, si->seq, lba);
              r = EINVAL;
              goto out;
            }
          *rmap_slot (&map, lba)
              = LOG_REGION_OFF + phys + si->hdr_len + (uint64_t)j * log->bs;
        }
    }
  for (size_t i = 0; i < map.cap; i++)
    total += map.lba[i] != UINT64_MAX && map.off[i] != UINT64_MAX;
  for (size_t i = 0; i < map.cap && r == 0; i++)
    {
      if (map.lba[i] == UINT64_MAX || map.off[i] == UINT64_MAX)
        continue;
      r = dev_pread (m->dev, blk, log->bs, map.off[i]);
      if (r == 0)
        r = write (opaque, blk, map.lba[i]);
      if (r == 0 && progress && (++done % 256 == 0 || done == total))
        progress (opaque, done, total);
    }
  if (r == 0)
    hhc_log (log->logfn, HHC_LOG_INFO,
             "log replay: %" PRIu64 " blocks replayed", total);
out:
  if (r)
    hhc_log (log->logfn, HHC_LOG_ERROR, "log replay failed: %s", strerror (r));
  free (map.lba);
  free (map.off);
  return r;
}

/* ---- in-memory log (lock held) ---- */

static struct seg *
ring_of (struct hhc_log *log, uint64_t seq)
{
  return &log->ring[seq % log->ring_cap];
}

static void
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

static void
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

/* Make b the buffer being filled, with the next sequence number. */
static void
make_current (struct hhc_log *log, struct buf *b, uint64_t reserve)
{
  struct seg *g = ring_of (log, log->next_seq);

  b->seq = log->next_seq++;
  b->nblocks = 0;
  b->limit = log->max_blocks;
  b->reclaim_from = LOG_NONE;
  b->barrier = false;
  b->joiners = 0;
  b->expect = log->last_group;
  b->first_want_ns = 0;
  b->revokes.len = 0;
  b->deaths.len = 0;
  *g = (struct seg){ .seq = b->seq, .chain = LOG_NONE, .state = SEG_FILLING };
  b->reserved = reserve;
  log->reserved += reserve;
  /* Revokes issued while no buffer was current belong here, in order;
   * more than fit go on in the next buffer (appends wait until all are
   * placed, so no revoke can land after a newer entry of its block).
   */
  size_t n = HHC_MIN (log->pending_rev.len, (size_t)log->rev_cap);
  for (size_t i = 0; i < n; i++)
    if (u64_vec_append (&b->revokes, log->pending_rev.ptr[i]))
      abort ();
  if (n > 0)
    {
      memmove (log->pending_rev.ptr, log->pending_rev.ptr + n,
               (log->pending_rev.len - n) * sizeof (uint64_t));
      log->pending_rev.len -= n;
    }
  log->cur = b;
  pthread_cond_broadcast (&log->buf_cv);
}

/* Room at the tail for one more unwritten buffer?  Each one holds a
 * reservation as big as its largest segment, plus one more for the
 * waste of a wrap (at most one among them, as together they hold less
 * than the region), so a sealed buffer can always be written: the
 * writer never waits for room, and an entry superseded by an unwritten
 * one can never pin the head.
 */
static uint64_t mem_head_seq (struct hhc_log *log);

static bool
room_for (struct hhc_log *log, uint64_t bytes, unsigned slots)
{
  uint64_t end = log->tail_lpos + log->reserved + bytes;
  return end <= log->phead_lpos + log->region_size
         && log->next_seq - mem_head_seq (log) + slots <= log->ring_cap;
}

/* A normal buffer: its largest segment, the waste of one wrap, one
 * more buffer for active reclaim when nothing else fits, and the room
 * an empty emergency barrier needs (EMERGENCY).
 */
#define EMERGENCY (2 * ALIGN)
static bool
room_for_buffer (struct hhc_log *log)
{
  return room_for (log, 3 * log->reserve + EMERGENCY, 3);
}

static void seal (struct hhc_log *log);

/* Make a free buffer current if there is room (lock held). */
static void
try_make_current (struct hhc_log *log)
{
  while (log->cur == NULL && log->freelist && log->healthy > 0
         && room_for_buffer (log))
    {
      struct buf *f = log->freelist;
      log->freelist = f->next;
      make_current (log, f, log->reserve);
      if (log->pending_rev.len > 0)
        seal (log); /* full of revokes: the rest go into the next */
    }
  if (log->cur == NULL)
    pthread_cond_broadcast (&log->writer_cv); /* make room */
}

/* Seal the current buffer and queue it for the writer. */
static void
seal (struct hhc_log *log)
{
  struct buf *b = log->cur;

  ring_of (log, b->seq)->state = SEG_SEALED;
  log->rev_sealed += b->revokes.len;
  b->rev_upto = log->rev_sealed;
  b->next = NULL;
  if (log->qtail)
    log->qtail->next = b;
  else
    log->qhead = b;
  log->qtail = b;
  log->cur = NULL;
  pthread_cond_broadcast (&log->writer_cv);
  try_make_current (log);
}

static void
add_revoke (struct hhc_log *log, uint64_t lba)
{
  struct u64_vec *v = log->cur ? &log->cur->revokes : &log->pending_rev;

  if (u64_vec_append (v, lba))
    abort (); /* cannot be refused; tiny */
  log->st.revokes++;
  log->rev_issued++;
  if (log->cur && log->cur->revokes.len >= log->rev_cap)
    seal (log);
}

/* The position of key's entry in the current buffer b, which holds
 * this slot's block of the same LBA: a slot that took another LBA
 * without its entry revoked would put one LBA's data under another's
 * in the log (DESIGN.md 4, invariant 1; docs/open-failures.md 1).
 * Never expected: stop with a core rather than log it so (a crash
 * loses nothing that a FLUSH covered).  Lock held.
 */
static uint32_t
in_place_pos (struct hhc_log *log, const struct buf *b, uint32_t key,
              uint64_t lba)
{
  uint32_t pos = log->keys[key].pos & POS_MASK;

  if (pos >= b->nblocks || b->keys[pos] != key || b->lbas[pos] != lba)
    {
      hhc_log (log->logfn, HHC_LOG_ERROR,
               "log: internal error: slot %" PRIu32 " (LBA %" PRIu64
               ") has entry %" PRIu32 " of %" PRIu32
               " in the current buffer, which is slot %" PRIu32
               " and LBA %" PRIu64 "; stopping",
               key, lba, pos, b->nblocks,
               pos < b->nblocks ? b->keys[pos] : UINT32_MAX,
               pos < b->nblocks ? b->lbas[pos] : UINT64_MAX);
      abort ();
    }
  return pos;
}

void
log_append (struct hhc_log *log, uint32_t key, uint64_t lba, const void *data)
{
  HHC_SCOPED_LOCK (&log->lock);
  struct key *e = &log->keys[key];
  struct buf *b = log->cur;

  e->lba = lba;
  /* A reclaim buffer is only for the head's blocks: other writes in it
   * would use the room it was made for and free nothing (then the log
   * stayed jammed); they wait unlogged for the next normal buffer.
   */
  if (b == NULL || log->healthy == 0
      || (b->reclaim_from != LOG_NONE && e->seg != b->reclaim_from))
    {
      set_unlogged (log, key, true);
      return;
    }
  uint32_t ring = b->seq % log->ring_cap;
  log->st.blocks++;
  set_unlogged (log, key, false);
  if (e->seg == ring)
    {
      /* Still in the buffer being filled: replace in place. */
      memcpy (b->data + (size_t)in_place_pos (log, b, key, lba) * log->bs, data,
              log->bs);
      return;
    }
  uint32_t older = 0;
  if (e->seg != LOG_NONE)
    {
      /* The older entry dies once this one is under a barrier. */
      if (u32_vec_append (&b->deaths, e->seg))
        abort ();
      chain_remove (log, key);
      older = POS_OLDER;
    }
  uint32_t pos = b->nblocks++;
  memcpy (b->data + (size_t)pos * log->bs, data, log->bs);
  b->lbas[pos] = lba;
  b->keys[pos] = key;
  e->pos = pos | older;
  chain_add (log, key, ring);
  log->ring[ring].live++;
  if (b->nblocks >= b->limit)
    seal (log);
}

void
log_update (struct hhc_log *log, uint32_t key, uint64_t lba, const void *buf,
            uint32_t off, uint32_t len)
{
  HHC_SCOPED_LOCK (&log->lock);
  struct key *e = &log->keys[key];

  e->lba = lba;
  if (log->cur && e->seg == log->cur->seq % log->ring_cap
      && !is_unlogged (log, key))
    memcpy (log->cur->data
                + (size_t)in_place_pos (log, log->cur, key, lba) * log->bs
                + off,
            buf, len);
  else
    set_unlogged (log, key, true); /* a barrier reads it back */
}

void
log_revoke (struct hhc_log *log, uint32_t key, uint64_t lba)
{
  HHC_SCOPED_LOCK (&log->lock);
  struct key *e = &log->keys[key];
  struct buf *b = log->cur;

  set_unlogged (log, key, false);
  if (e->seg == LOG_NONE)
    return;
  struct seg *g = &log->ring[e->seg];
  bool in_cur = b && e->seg == b->seq % log->ring_cap;
  if (in_cur)
    {
      /* Void it in memory: move the last block into its place. */
      uint32_t pos = e->pos & POS_MASK, last = b->nblocks - 1;
      bool older = e->pos & POS_OLDER;
      if (pos != last)
        {
          memcpy (b->data + (size_t)pos * log->bs,
                  b->data + (size_t)last * log->bs, log->bs);
          b->lbas[pos] = b->lbas[last];
          b->keys[pos] = b->keys[last];
          struct key *moved = &log->keys[b->keys[pos]];
          moved->pos = pos | (moved->pos & POS_OLDER);
        }
      b->nblocks--;
      chain_remove (log, key);
      g->live--;
      e->seg = LOG_NONE;
      if (older)
        add_revoke (log, lba);
    }
  else
    {
      chain_remove (log, key);
      g->live--;
      e->seg = LOG_NONE;
      add_revoke (log, lba);
    }
  pthread_cond_broadcast (&log->writer_cv); /* the head may move */
}

void
log_forget (struct hhc_log *log, uint32_t key, uint64_t lba)
{
  HHC_SCOPED_LOCK (&log->lock);

  if (log->keys[key].lba == lba && log->keys[key].seg == LOG_NONE)
    set_unlogged (log, key, false);
}

bool
log_is_logged (struct hhc_log *log, uint32_t key)
{
  HHC_SCOPED_LOCK (&log->lock);

  return log->keys[key].seg != LOG_NONE && !is_unlogged (log, key);
}

bool
log_healthy (struct hhc_log *log)
{
  HHC_SCOPED_LOCK (&log->lock);

  return log->healthy > 0;
}

/* Logical position of the in-memory head. */
static uint64_t
mem_head_lpos (struct hhc_log *log)
{
  if (!log->rebased)
    return log->phead_lpos;
  if (log->head_seq < log->written_seq)
    return ring_of (log, log->head_seq)->lpos;
  return log->tail_lpos;
}

static uint64_t
used_bytes (struct hhc_log *log)
{
  uint64_t h = log->rebased ? mem_head_lpos (log) : log->phead_lpos;
  return log->tail_lpos - h;
}

double
log_usage (struct hhc_log *log)
{
  HHC_SCOPED_LOCK (&log->lock);

  if (log->healthy == 0 || log->region_size == 0)
    return 0;
  /* Full is full of bytes or of ring slots (a big log of small
   * segments): either way write-back makes room.
   */
  double bytes = (double)used_bytes (log) / log->region_size;
  double slots = (double)(log->next_seq - mem_head_seq (log)) / log->ring_cap;
  return HHC_MAX (bytes, slots);
}

static void
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

/* Deaths whose superseding segment is now under a durable barrier. */
static void
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

/* ---- the writer ---- */

/* Sequence number of the in-memory head (see mem_head_lpos). */
static uint64_t
mem_head_seq (struct hhc_log *log)
{
  return log->head_seq < log->written_seq ? log->head_seq : log->written_seq;
}

/* Write-ahead checkpoint (lock held; dropped during it): FLUSH synced
 * only the log, so the segments behind the in-memory head may hold the
 * only durable copy of what a FLUSH covered (the SSD's slot data and
 * metadata are not synced for it).  Commit the SSD: afterwards it
 * holds everything those segments did, and the head may be persisted
 * up to where it was when the commit began.
 */
static int
checkpoint_locked (struct hhc_log *log)
{
  struct log_callbacks cb = log->cb;
  uint64_t lpos = mem_head_lpos (log), seq = mem_head_seq (log);
  int r;

  if (cb.checkpoint == NULL || lpos <= log->ckpt_lpos)
    return 0;
  hhc_unlock (&log->lock);
  r = cb.checkpoint (cb.opaque);
  hhc_lock (&log->lock);
  if (r == 0 && lpos > log->ckpt_lpos)
    {
      log->ckpt_lpos = lpos;
      log->ckpt_seq = seq;
      log->st.checkpoints++;
    }
  return r;
}

/* Persist the in-memory head (lock held; dropped during I/O).  Every
 * written segment is synced first: the entries that made the old head
 * segments dead must be durable before those segments may be
 * overwritten.  With a checkpoint callback (write-ahead), the SSD is
 * committed first and the head persisted no further than where it was
 * when that commit began (checkpoint_locked).
 */
static int
persist_head (struct hhc_log *log)
{
  struct io sync = { .sync = true, .sync_only = true };
  uint64_t lpos, seq;
  int r;

  if ((r = checkpoint_locked (log)) != 0)
    return r;
  hhc_unlock (&log->lock);
  hhc_lock (&log->io_lock); /* io_lock -> lock */
  hhc_lock (&log->lock);
  lpos = mem_head_lpos (log);
  seq = mem_head_seq (log);
  if (log->cb.checkpoint && lpos > log->ckpt_lpos)
    {
      /* The head moved on during the checkpoint: only as far as it. */
      lpos = log->ckpt_lpos;
      seq = log->ckpt_seq;
    }
  if (lpos <= log->phead_lpos)
    {
      hhc_unlock (&log->io_lock);
      return 0;
    }
  hhc_unlock (&log->lock);
  log->hint_off = lpos % log->region_size;
  log->hint_seq = seq;
  r = mirrors_io_locked (log, &sync);
  if (r == 0)
    r = write_sb_locked (log);
  hhc_lock (&log->lock);
  if (r == 0)
    {
      log->phead_lpos = lpos;
      log->phead_seq = seq;
      log->st.head_persists++;
    }
  hhc_unlock (&log->io_lock);
  return r;
}

/* Build b's header into hdr (crc over header and data); prev is the
 * crc of the segment before it.  Returns the crc.
 */
static uint32_t
build_header (struct hhc_log *log, struct buf *b, unsigned char *hdr,
              uint32_t hl, uint64_t phys, uint32_t flags, uint32_t prev)
{
  memset (hdr, 0, hl);
  memcpy (hdr, LOG_SEG_MAGIC, 8);
  put64 (hdr + 8, b->seq);
  put64 (hdr + 16, b->base);
  put32 (hdr + 24, flags | LOG_F_SUM);
  put32 (hdr + 28, b->nblocks);
  put32 (hdr + 32, b->revokes.len);
  put32 (hdr + 36, hl);
  put64 (hdr + 40, phys / ALIGN);
  memcpy (hdr + 48, log->uuid, 16);
  memcpy (hdr + 64, log->cache_uuid, 16);
  put32 (hdr + 84, prev);
  for (uint32_t i = 0; i < b->nblocks; i++)
    put64 (hdr + LOG_HDR_FIXED + 8 * i, b->lbas[i]);
  for (size_t i = 0; i < b->revokes.len; i++)
    put64 (hdr + LOG_HDR_FIXED + 8 * (b->nblocks + i), b->revokes.ptr[i]);
  struct segsum sum;
  segsum_init (&sum);
  segsum_add (&sum, hdr, hl);
  segsum_add (&sum, b->data, (size_t)b->nblocks * log->bs);
  uint32_t crc = segsum_final (&sum);
  put32 (hdr + 80, crc);
  return crc;
}

/* Bytes the live entries of the written segments would take if copied
 * (lock held).
 */
static uint64_t
live_bytes (struct hhc_log *log)
{
  uint64_t n = 0;

  for (uint64_t q = log->head_seq; q < log->written_seq; q++)
    {
      uint32_t l = ring_of (log, q)->live;
      if (l)
        n += (uint64_t)l * log->bs + hdr_len_for (l, 0);
    }
  return n;
}

/* Relog the keys of the head segment when space is short and the head
 * holds little live data (active reclaim; lock held, dropped).
 */
static bool
active_reclaim (struct hhc_log *log)
{
  uint32_t keys[64];
  uint64_t lbas[64];
  unsigned n = 0;

  if (!log->rebased || log->cb.relog == NULL || log->healthy == 0
      || log->head_seq >= log->written_seq)
    return false;
  struct seg *g = ring_of (log, log->head_seq);
  if (g->state != SEG_WRITTEN || g->chain == LOG_NONE)
    return false;
  uint64_t live = (uint64_t)g->live * log->bs + hdr_len_for (g->live, 0);
  /* Moving the head's live blocks frees the head segment and every
   * dead one behind it.
   */
  uint64_t q = log->head_seq + 1, gain;
  while (q < log->written_seq && ring_of (log, q)->live == 0)
    q++;
  gain = (q < log->written_seq ? ring_of (log, q)->lpos : log->tail_lpos)
         - g->lpos;
  bool jammed = log->cur == NULL && !room_for_buffer (log);
  if (jammed)
    {
      /* No room for a normal buffer: copying pays if the head holds
       * less live data than its length, and also when it is all live
       * but the log as a whole is at most half live: the copy costs
       * what it frees, and the head moves on towards the dead entries
       * (a backend outage leaves blocks written once, never written
       * back, at the head: with nothing else, every FLUSH then waited
       * for the backend).  The buffer holds only the head's live
       * blocks, so its segment (and the waste of a wrap before it)
       * fits in what is left, where a whole segment's reservation
       * did not; it may use the room kept for reclaim.
       */
      uint32_t nb = HHC_MIN (HHC_MIN (g->live, 64u), log->max_blocks);
      uint64_t res = HHC_ROUND_UP ((uint64_t)nb * log->bs, ALIGN)
                     + hdr_len_for (nb, log->rev_cap);
      if ((live >= gain && live_bytes (log) * 2 > log->region_size)
          || log->freelist == NULL || !room_for (log, 2 * res + EMERGENCY, 2))
        return false;
      struct buf *f = log->freelist;
      log->freelist = f->next;
      make_current (log, f, res);
      f->limit = HHC_MAX (nb, 1u);
      f->reclaim_from = log->head_seq % log->ring_cap;
      if (log->pending_rev.len > 0)
        seal (log);
      if (log->cur == NULL)
        return true;
    }
  else if (log->cur == NULL || used_bytes (log) * 2 < log->region_size
           || live * 2 > gain)
    return false; /* not needed yet, or mostly live: write-back */
  uint64_t cur_seq = log->cur->seq;
  for (uint32_t k = g->chain; k != LOG_NONE && n < 64; k = log->keys[k].next)
    {
      lbas[n] = log->keys[k].lba;
      keys[n++] = k;
    }
  struct log_callbacks cb = log->cb;
  hhc_unlock (&log->lock);
  for (unsigned i = 0; i < n; i++)
    cb.relog (cb.opaque, keys[i], lbas[i]);
  hhc_lock (&log->lock);
  log->st.reclaimed += n;
  /* Under a barrier soon, so that the copied entries die. */
  if (log->want_barrier < cur_seq)
    log->want_barrier = cur_seq;
  return true;
}

/* Write sealed buffer b at the tail (lock held; dropped during I/O). */
static void
write_buffer (struct hhc_log *log, struct buf *b)
{
  /* Past half full every segment is a barrier, so that entries it
   * supersedes die (and the head can move) without waiting for a
   * client's FLUSH.
   */
  bool tight = used_bytes (log) * 2 >= log->region_size;
  uint32_t hl = hdr_len_for (b->nblocks, b->revokes.len);
  uint64_t dl = data_len_for (log, b->nblocks), len = hl + dl;
  uint64_t l, phys;
  unsigned char *hdr = NULL, *marker = NULL;
  struct io io = { 0 };
  int r = 0;

  /* The buffer's reservation guarantees the room (room_for_buffer). */
  l = log->tail_lpos;
  phys = l % log->region_size;
  if (phys + len > log->region_size)
    l += log->region_size - phys;
  bool fits
      = l + len <= log->phead_lpos + log->region_size && len <= b->reserved;
  /* Pop b; its header names the base of this moment (build_header
   * runs without the lock).  A segment sealed before the last re-logged
   * block's keeps the last run's base even when it is taken after the
   * switch: a barrier there with this run's base would make a replay
   * skip the last run's segments, where the blocks re-logged after it
   * still are.
   */
  if (b->seq >= log->base_from)
    log->base_seq = log->rebase_seq;
  b->base = log->base_seq;
  log->qhead = b->next;
  if (log->qhead == NULL)
    log->qtail = NULL;
  if (tight)
    b->barrier = true; /* so that superseded entries die soon */
  if ((b->seq >= log->want_barrier && log->want_barrier > log->durable_barrier)
      || (log->want_revs > log->rev_durable && b->rev_upto >= log->want_revs))
    b->barrier = true; /* a FLUSH waits for this one */
  if (log->healthy > 0 && fits)
    {
      uint32_t flags = b->barrier ? LOG_F_BARRIER : 0;
      uint64_t t0 = hhc_now_ns ();
      log->writer_busy = true;
      hhc_unlock (&log->lock);
      /* Buffers kept across segments (only the writer uses them): a
       * fresh allocation per segment costs page faults.
       */
      if (log->hdrcap < hl)
        {
          free (log->hdrbuf);
          log->hdrbuf = hhc_alloc_aligned (hl);
          log->hdrcap = log->hdrbuf ? hl : 0;
        }
      if (log->markbuf == NULL)
        log->markbuf = hhc_alloc_aligned (ALIGN);
      hdr = log->hdrbuf;
      if (hdr == NULL)
        r = ENOMEM;
      else
        {
          phys = l % log->region_size;
          uint32_t prev = log->last_crc; /* the writer's own */
          log->last_crc = build_header (log, b, hdr, hl, phys, flags, prev);
          if (l != log->tail_lpos
              && log->tail_lpos % log->region_size + ALIGN <= log->region_size)
            {
              /* Wrap marker where the segment would have gone. */
              uint64_t mp = log->tail_lpos % log->region_size;
              struct buf empty = { .seq = b->seq, .base = b->base };
              marker = log->markbuf;
              if (marker == NULL)
                r = ENOMEM;
              else
                {
                  build_header (log, &empty, marker, ALIGN, mp, LOG_F_WRAP,
                                prev);
                  io.p[io.n] = marker;
                  io.len[io.n] = ALIGN;
                  io.off[io.n++] = LOG_REGION_OFF + mp;
                }
            }
          /* Header and data in one write, when the header fits in
           * front of the data (always, unless pending revokes overflowed).
           */
          size_t hmax = b->data - b->mem;
          if (hl <= hmax && r == 0)
            {
              memcpy (b->data - hl, hdr, hl);
              io.p[io.n] = b->data - hl;
              io.len[io.n] = hl + dl;
              io.off[io.n++] = LOG_REGION_OFF + phys;
            }
          else
            {
              io.p[io.n] = hdr;
              io.len[io.n] = hl;
              io.off[io.n++] = LOG_REGION_OFF + phys;
              if (b->nblocks)
                {
                  io.p[io.n] = b->data;
                  io.len[io.n] = dl;
                  io.off[io.n++] = LOG_REGION_OFF + phys + hl;
                }
            }
          io.sync = b->barrier;
          if (r == 0)
            r = mirrors_io (log, &io);
        }
      hhc_lock (&log->lock);
      log->writer_busy = false;
      if (r == 0)
        {
          log->st.segments++;
          log->st.bytes += len;
          log->st.barriers += b->barrier;
          if (b->barrier && b->joiners > 0)
            {
              /* b's clients come back to join the current buffer,
               * next to those that joined it while b was written.
               */
              log->last_group = b->joiners;
              log->last_done_ns = hhc_now_ns ();
              log->last_barrier_ns = log->last_done_ns - t0;
              if (log->cur)
                log->cur->expect = log->cur->joiners + b->joiners;
            }
        }
    }
  else
    r = EIO;
  if (r && log->healthy > 0)
    {
      /* Could not write it (no memory, or stopping with a full log):
       * later barriers must not count it, so the log stops here.
       */
      hhc_log (log->logfn, HHC_LOG_ERROR,
               "log: segment %" PRIu64 " could not be written: %s; the log "
               "is no longer used",
               b->seq, strerror (r));
      for (unsigned i = 0; i < log->nm; i++)
        mark_failed_locked (log, &log->m[i], !log->stop);
    }
  struct seg *g = ring_of (log, b->seq);
  g->state = SEG_WRITTEN;
  g->lpos = l;
  g->len = len;
  log->tail_lpos = l + len;
  log->reserved -= b->reserved;
  log->written_seq = b->seq + 1;
  for (size_t i = 0; i < b->deaths.len; i++)
    if (death_vec_append (&log->deaths,
                          (struct death){ b->seq, b->deaths.ptr[i] }))
      abort ();
  if (r == 0 && b->barrier)
    {
      log->durable_barrier = b->seq;
      log->rev_durable = b->rev_upto;
    }
  apply_deaths (log);
  pthread_cond_broadcast (&log->done_cv);
  /* The buffer is free again. */
  b->next = log->freelist;
  log->freelist = b;
  try_make_current (log);
  struct log_callbacks cb = log->cb;
  if (cb.pressure && used_bytes (log) * 2 >= log->region_size)
    {
      hhc_unlock (&log->lock);
      cb.pressure (cb.opaque);
      hhc_lock (&log->lock);
    }
}

/* No buffer can become current for lack of room: persist a newer head
 * if the head moved, else ask for write-back (lock held; dropped).
 * Returns true if it made progress.
 */
static bool
make_room (struct hhc_log *log)
{
  if (log->cur || log->freelist == NULL || log->healthy == 0)
    return false;
  advance_head (log); /* revokes may have emptied head segments */
  if (room_for_buffer (log))
    {
      try_make_current (log);
      return true;
    }
  if (log->rebased && mem_head_lpos (log) > log->phead_lpos
      && persist_head (log) == 0)
    {
      try_make_current (log);
      return true;
    }
  /* Entries superseded by written segments die only under a barrier,
   * and a FLUSH may wait for revokes that no buffer could take: if
   * either is owed, write a barrier into the room kept for it, a
   * header with as many of the pending revokes as fit in it (in order;
   * the rest go on in the next buffer).
   */
  bool revs_owed
      = log->want_revs > log->rev_durable && log->pending_rev.len > 0;
  if ((log->deaths_done < log->deaths.len
       || log->durable_barrier + 1 < log->written_seq || revs_owed)
      && room_for (log, EMERGENCY, 1))
    {
      struct buf *f = log->freelist;
      size_t len = log->pending_rev.len;
      /* A header of one ALIGN at most: at an aligned tail it needs
       * no wrap, so the room kept (EMERGENCY) always holds it.  An
       * 8 KiB header could need 4 KiB of wrap waste more than that,
       * and then failed the log (found by the spin model's review).
       */
      size_t n = HHC_MIN (HHC_MIN (len, (size_t)log->rev_cap),
                          (size_t)(ALIGN - LOG_HDR_FIXED) / 8);
      log->freelist = f->next;
      log->pending_rev.len = n; /* make_current takes these n */
      make_current (log, f, EMERGENCY);
      if (len > n)
        memmove (log->pending_rev.ptr, log->pending_rev.ptr + n,
                 (len - n) * sizeof (uint64_t));
      log->pending_rev.len = len - n;
      log->cur->barrier = true;
      ring_of (log, log->cur->seq)->state = SEG_SEALED;
      log->rev_sealed += f->revokes.len;
      f->rev_upto = log->rev_sealed;
      f->next = NULL;
      if (log->qtail)
        log->qtail->next = f;
      else
        log->qhead = f;
      log->qtail = f;
      log->cur = NULL;
      return true;
    }
  log->st.full_waits++;
  struct log_callbacks cb = log->cb;
  if (cb.pressure)
    {
      hhc_unlock (&log->lock);
      cb.pressure (cb.opaque);
      hhc_lock (&log->lock);
    }
  return false;
}

/* Group commit (lock held).  A barrier owed for the current buffer
 * waits a little before it is sealed while fewer FLUSHes have asked
 * for it than are expected (b->expect): those that joined it while the
 * last barrier was written, plus the clients of that barrier, likely
 * back with their next write and FLUSH soon after it completed.
 * Sealed at once, a barrier carries only the FLUSHes that came while
 * the one before it was written, and clients settle into two groups
 * that alternate, each FLUSH waiting two barrier times (measured on a
 * 4 ms emulated HDD: FLUSH p50 9.6 ms from 4 clients, 5.1 ms from one;
 * with this wait 5.2 ms from 4, and 1.4x the FLUSHes per second from
 * 16).  The wait ends when as many as expected have asked, or half the
 * last barrier's write time (at most GROUP_WAIT_MAX_NS) after the
 * writer became free or the first FLUSH asked, whichever is later.
 * Only for a log whose barriers take GROUP_WAIT_MIN_BARRIER_NS or more
 * (an HDD, a remote mirror): on a fast one the clients are not back in
 * time and the wait only adds to the latency.  One client alone never
 * waits.  Returns the time to wait, 0 to seal now.  Only the moment a
 * barrier is sealed changes: every FLUSH is still covered by the
 * barrier its ticket names, and the wait is bounded.
 */
#define GROUP_WAIT_MAX_NS 2000000u
#define GROUP_WAIT_MIN_BARRIER_NS 1000000u

static uint64_t
group_wait_ns (struct hhc_log *log)
{
  const struct buf *b = log->cur;
  uint64_t window, now, start;

  if (log->stop || b->joiners == 0 || b->joiners >= b->expect
      || log->last_barrier_ns < GROUP_WAIT_MIN_BARRIER_NS)
    return 0;
  window = HHC_MIN (log->last_barrier_ns / 2, (uint64_t)GROUP_WAIT_MAX_NS);
  start = HHC_MAX (b->first_want_ns, log->last_done_ns);
  now = hhc_now_ns ();
  if (now >= start + window)
    return 0;
  return start + window - now;
}

static void *
writer_thread (void *arg)
{
  struct hhc_log *log = arg;

  hhc_lock (&log->lock);
  for (;;)
    {
      struct buf *b = log->qhead;
      if (log->healthy == 0 && !log->lost_ckpt && log->cb.checkpoint)
        {
          /* The last mirror failed: what FLUSHes made durable only in
           * the log must be on the SSD now (its FLUSHes commit the SSD
           * themselves from here on).
           */
          struct log_callbacks cb = log->cb;
          log->lost_ckpt = true;
          hhc_unlock (&log->lock);
          int r = cb.checkpoint (cb.opaque);
          hhc_lock (&log->lock);
          if (r == 0)
            log->st.checkpoints++;
          continue;
        }
      /* A barrier is owed (its segment may have been sealed because it
       * was full, and written without the flag): seal what is current.
       */
      if (b == NULL && log->cur
          && (log->want_barrier > log->durable_barrier
              || log->want_revs > log->rev_durable))
        {
          uint64_t wait = group_wait_ns (log);
          if (wait > 0)
            {
              struct timespec ts;
              clock_gettime (CLOCK_REALTIME, &ts);
              ts.tv_nsec += (long)wait;
              ts.tv_sec += ts.tv_nsec / 1000000000L;
              ts.tv_nsec %= 1000000000L;
              pthread_cond_timedwait (&log->writer_cv, &log->lock, &ts);
              continue;
            }
          log->cur->barrier = true;
          seal (log);
          b = log->qhead;
        }
      if (b)
        {
          write_buffer (log, b);
          continue;
        }
      if (log->stop)
        break;
      if (__atomic_load_n (&log->unvoided, __ATOMIC_ACQUIRE) > 0
          && hhc_now_ns () >= log->next_void_ns)
        {
          /* Only when idle: the healthy mirrors come first. */
          log->next_void_ns = hhc_now_ns () + VOID_RETRY_NS;
          hhc_unlock (&log->lock);
          log_void_failed (log);
          hhc_lock (&log->lock);
          continue;
        }
      if (make_room (log) || active_reclaim (log))
        continue;
      struct timespec ts;
      hhc_deadline (&ts, log->cur == NULL ? 50 : 1000);
      pthread_cond_timedwait (&log->writer_cv, &log->lock, &ts);
    }
  hhc_unlock (&log->lock);
  return NULL;
}

int
log_start (struct hhc_log *log, const uint8_t cache_uuid[16], uint32_t nkeys,
           const struct log_callbacks *cb)
{
  bool repair = memcmp (log->cache_uuid, cache_uuid, 16) != 0;
  bool joined = false;
  int r;

  if ((r = alloc_mem (log, log->nbufs, nkeys)) != 0)
    return r;
  if (cb)
    log->cb = *cb;
  for (unsigned i = 0; i < log->nm; i++)
    joined |= log->m[i].blank;
  memcpy (log->cache_uuid, cache_uuid, 16);
  /* Continue after the chain found by the scan. */
  log->tail_lpos = log->scan.end_lpos;
  log->next_seq = log->scan.end_seq;
  log->last_crc = log->scan.end_crc;
  log->phead_lpos = log->hint_off;
  log->phead_seq = log->hint_seq;
  log->head_seq = log->written_seq = log->rebase_seq = log->next_seq;
  /* A barrier written before log_rebase has logged the dirty blocks
   * again must not move the replay's start past the last run's
   * segments, where those blocks still are: until then, segments name
   * the base that a replay would use now.  (With this run's base, a
   * crash just after the start-up barrier, a full first segment of
   * re-logged blocks, then the loss of the SSD lost every dirty block
   * not yet re-logged, though a FLUSH of the last run covered it.)
   */
  log->base_seq = log->scan.last_barrier >= 0
                      ? log->scan.segs.ptr[log->scan.last_barrier].base
                      : log->next_seq;
  log->base_from = UINT64_MAX;
  log->durable_barrier = log->next_seq - 1;
  log->want_barrier = 0;
  if (repair || joined)
    {
      if (joined)
        hhc_log (log->logfn, HHC_LOG_INFO,
                 "log: a blank mirror joins the log; it is complete after "
                 "the first barrier of this run");
      if ((r = write_sb (log)) != 0)
        return r;
    }
  for (unsigned i = 0; i < log->nm; i++)
    log->m[i].blank = false;
  hhc_lock (&log->lock);
  log->freelist = NULL;
  for (unsigned i = 0; i < log->nbufs; i++)
    {
      log->bufs[i].next = log->freelist;
      log->freelist = &log->bufs[i];
    }
  try_make_current (log);
  hhc_unlock (&log->lock);
  if (log->nm > 1)
    for (unsigned i = 0; i < log->nm; i++)
      {
        if ((r = pthread_create (&log->m[i].thread, NULL, mirror_thread,
                                 &log->m[i]))
            != 0)
          return r;
        log->m[i].has_thread = true;
      }
  if ((r = pthread_create (&log->writer, NULL, writer_thread, log)) != 0)
    return r;
  log->started = true;
  return 0;
}

void
log_stop (struct hhc_log *log)
{
  if (log == NULL || !log->started)
    return;
  hhc_lock (&log->lock);
  /* What the buffer holds goes out under a last barrier (best effort:
   * nothing waits for room or re-logs, the cache has every block).
   */
  if (log->cur && (log->cur->nblocks || log->cur->revokes.len))
    log->want_barrier = HHC_MAX (log->want_barrier, log->cur->seq);
  log->stop = true;
  log->cb.pressure = NULL; /* the flusher is gone */
  log->cb.relog = NULL;
  pthread_cond_broadcast (&log->writer_cv);
  hhc_unlock (&log->lock);
  pthread_join (log->writer, NULL);
  for (unsigned i = 0; i < log->nm; i++)
    if (log->m[i].has_thread)
      {
        hhc_lock (&log->m[i].mu);
        log->m[i].stop = true;
        pthread_cond_broadcast (&log->m[i].cv);
        hhc_unlock (&log->m[i].mu);
        pthread_join (log->m[i].thread, NULL);
        log->m[i].has_thread = false;
      }
  hhc_lock (&log->lock);
  log->next_dial_ns = 0; /* a last try, dialling too */
  hhc_unlock (&log->lock);
  log_void_failed (log);
  log->started = false;
}

void
log_close (struct hhc_log *log)
{
  log_stop (log);
  free_log (log);
}

/* Read back every key that is dirty but not in the log (snapshot). */
static int
relog_unlogged (struct hhc_log *log)
{
  HHC_CLEANUP_FREE uint64_t *snap = NULL;
  size_t words = ((size_t)log->nkeys + 63) / 64;

  hhc_lock (&log->lock);
  if (log->nunlogged == 0)
    {
      hhc_unlock (&log->lock);
      return 0;
    }
  snap = malloc (words * 8);
  if (snap)
    memcpy (snap, log->unlogged, words * 8);
  hhc_unlock (&log->lock);
  if (snap == NULL)
    return ENOMEM;
  for (size_t w = 0; w < words; w++)
    for (uint64_t bits = snap[w]; bits; bits &= bits - 1)
      {
        uint32_t k = w * 64 + __builtin_ctzll (bits);
        for (;;)
          {
            hhc_lock (&log->lock);
            /* Wait for a buffer only while the key still needs one: the
             * relog that logged it may have filled the log, and waiting
             * then for a buffer it no longer needs waited for write-back
             * (fuzz-log hung so; a FLUSH during a backend outage would
             * have waited for the backend).
             */
            while (is_unlogged (log, k)
                   && (log->cur == NULL || log->cur->reclaim_from != LOG_NONE)
                   && log->healthy > 0)
              pthread_cond_wait (&log->buf_cv, &log->lock);
            bool todo = is_unlogged (log, k) && log->healthy > 0;
            uint64_t lba = log->keys[k].lba;
            hhc_unlock (&log->lock);
            if (!todo)
              break;
            struct log_callbacks cb;
            hhc_lock (&log->lock);
            cb = log->cb;
            hhc_unlock (&log->lock);
            int r = cb.relog ? cb.relog (cb.opaque, k, lba) : EIO;
            if (r)
              return r;
            hhc_lock (&log->lock);
            log->st.relogged++;
            hhc_unlock (&log->lock);
          }
      }
  return 0;
}

int
log_barrier_begin (struct hhc_log *log, struct log_ticket *ticket)
{
  int r = relog_unlogged (log);

  *ticket = (struct log_ticket){ 0 };
  if (r)
    return r;
  HHC_SCOPED_LOCK (&log->lock);
  if (log->healthy == 0)
    return EIO;
  /* Nothing new since the last barrier?  Also with no current buffer
   * (the log full of live entries, waiting for write-back): a ticket
   * for the next buffer would wait for room that only write-back
   * makes, for nothing (fuzz-log hung so; a FLUSH during a backend
   * outage waited for the backend).
   */
  if ((log->cur == NULL
       || (log->cur->nblocks == 0 && log->cur->revokes.len == 0))
      && log->pending_rev.len == 0 && log->qhead == NULL && !log->writer_busy
      && log->durable_barrier + 1 == log->written_seq)
    return 0;
  /* No current buffer: what is new is in the sealed buffers (queued,
   * being written, or written without the flag), so the newest of them
   * is the one to cover: write_buffer flags it, or, if it went out
   * without the flag, make_room writes an emergency barrier after it.
   * Not the next buffer: if the writer had just queued an emergency
   * barrier (which covers everything), the next one waited for room
   * that only write-back makes (fuzz-log hung so, once, under load).
   * Pending revokes go into a later buffer: the record count says when
   * they are durable.
   */
  ticket->seq = log->cur ? log->cur->seq : log->next_seq - 1;
  ticket->revs = log->rev_issued;
  if (log->cur && log->cur->joiners++ == 0)
    log->cur->first_want_ns = hhc_now_ns ();
  if (log->want_barrier < ticket->seq)
    log->want_barrier = ticket->seq;
  if (log->want_revs < ticket->revs)
    log->want_revs = ticket->revs;
  pthread_cond_broadcast (&log->writer_cv);
  return 0;
}

int
log_barrier_wait (struct hhc_log *log, const struct log_ticket *ticket)
{
  HHC_SCOPED_LOCK (&log->lock);

  while ((log->durable_barrier < ticket->seq || log->rev_durable < ticket->revs)
         && log->healthy > 0)
    pthread_cond_wait (&log->done_cv, &log->lock);
  return log->durable_barrier >= ticket->seq && log->rev_durable >= ticket->revs
             ? 0
             : EIO;
}

int
log_barrier (struct hhc_log *log)
{
  struct log_ticket ticket;
  int r = log_barrier_begin (log, &ticket);

  return r ? r : log_barrier_wait (log, &ticket);
}

int
log_rebase (struct hhc_log *log, const uint32_t *dirty_keys,
            const uint64_t *lbas, size_t n)
{
  uint64_t target = 0;
  int r;

  hhc_lock (&log->lock);
  for (size_t i = 0; i < n; i++)
    {
      log->keys[dirty_keys[i]].lba = lbas[i];
      set_unlogged (log, dirty_keys[i], true);
    }
  pthread_cond_broadcast (&log->writer_cv);
  hhc_unlock (&log->lock);
  /* Every dirty block into a buffer (segments written meanwhile still
   * name the last run's base), then this run's base from the segment
   * that holds the last of them (the current buffer, or the next one)
   * on, then a barrier there: an empty one if nothing else.  Sealed
   * buffers still queued keep the last run's base (write_seg).
   */
  r = relog_unlogged (log);
  if (r == 0)
    {
      HHC_SCOPED_LOCK (&log->lock);
      target = log->cur ? log->cur->seq : log->next_seq;
      log->base_from = target;
      if (log->want_barrier < target)
        log->want_barrier = target;
      pthread_cond_broadcast (&log->writer_cv);
    }
  if (r == 0)
    r = log_barrier (log);
  if (r == 0)
    {
      HHC_SCOPED_LOCK (&log->lock);
      while (log->durable_barrier < target && log->healthy > 0)
        pthread_cond_wait (&log->done_cv, &log->lock);
      if (log->durable_barrier < target)
        r = EIO;
      else
        {
          log->rebased = true;
          advance_head (log);
          r = persist_head (log);
          /* The head moved: a buffer may fit now (else writes go
           * unlogged until the writer's next timeout).
           */
          try_make_current (log);
        }
    }
  if (r == 0)
    r = release_sb_hold (log);
  if (r)
    hhc_log (log->logfn, HHC_LOG_ERROR,
             "log: writing the dirty blocks to the log at start-up: %s",
             strerror (r));
  return r;
}

bool
log_rebase_fits (struct hhc_log *log, uint64_t nblocks)
{
  HHC_SCOPED_LOCK (&log->lock);
  uint64_t per = (uint64_t)log->max_blocks * log->bs;
  uint64_t need = (nblocks * log->bs / per + 2) * log->reserve
                  + (uint64_t)log->nbufs * log->reserve;

  return log->tail_lpos + need <= log->phead_lpos + log->region_size;
}

int
log_discard (struct hhc_log *log)
{
  int r;

  hhc_lock (&log->lock);
  log->rebased = true; /* nothing before this point is needed */
  advance_head (log);
  r = persist_head (log);
  try_make_current (log);
  hhc_unlock (&log->lock);
  return r ? r : release_sb_hold (log);
}

void
log_get_stats (struct hhc_log *log, struct log_stats *s)
{
  HHC_SCOPED_LOCK (&log->lock);

  *s = log->st;
  s->unlogged_now = log->nunlogged;
  s->region_size = log->region_size;
  s->used = used_bytes (log);
  s->mirrors = log->nm;
  s->mirrors_failed = log->nm - log->healthy;
  s->mirrors_unvoided = __atomic_load_n (&log->unvoided, __ATOMIC_ACQUIRE);
}

const char *
log_mirror_name (struct hhc_log *log, unsigned i, bool *failed)
{
  if (i >= log->nm)
    return NULL;
  HHC_SCOPED_LOCK (&log->lock);
  *failed = log->m[i].failed;
  return log->m[i].dev->name;
}

/* ---- read-only inspection (hhcctl check) ---- */

/* The checksum of a segment of total bytes (header and data) at phys
 * whose first header block is h (checksum field zeroed), read in
 * chunks.
 */
static int
segment_crc (struct hhc_log *log, struct mirror *m, const unsigned char *h,
             uint64_t phys, uint64_t total, uint32_t *crcp)
{
  const size_t chunk = 1024 * 1024;
  HHC_CLEANUP_FREE unsigned char *big = hhc_alloc_aligned (chunk);
  struct segck ck;
  int r;

  if (big == NULL)
    return ENOMEM;
  segck_init (&ck, get32 (h + 24));
  segck_add (&ck, h, ALIGN);
  for (uint64_t done = ALIGN; done < total;)
    {
      uint64_t n = HHC_MIN ((uint64_t)chunk, total - done);
      uint64_t rd = HHC_ROUND_UP (n, 512);
      if (phys + done + rd > log->region_size)
        return EILSEQ;
      if ((r = dev_pread (m->dev, big, rd, LOG_REGION_OFF + phys + done)) != 0)
        return r;
      segck_add (&ck, big, n);
      done += n;
    }
  *crcp = segck_final (&ck);
  return 0;
}

int
log_inspect_segment (struct hhc_log *log, unsigned i, uint64_t off,
                     struct log_seg_desc *d)
{
  HHC_CLEANUP_FREE unsigned char *h = hhc_alloc_aligned (ALIGN);
  uint32_t nb, crc;
  int r;

  if (i >= log->nm || off % ALIGN || off + ALIGN > log->region_size)
    return EINVAL;
  if (h == NULL)
    return ENOMEM;
  if ((r = dev_pread (log->m[i].dev, h, ALIGN, LOG_REGION_OFF + off)) != 0)
    return r;
  if (memcmp (h, LOG_SEG_MAGIC, 8) != 0 || memcmp (h + 48, log->uuid, 16) != 0
      || get64 (h + 40) != off / ALIGN)
    return ENOENT;
  nb = get32 (h + 28);
  *d = (struct log_seg_desc){
    .seq = get64 (h + 8),
    .base = get64 (h + 16),
    .off = off,
    .flags = get32 (h + 24),
    .nblocks = nb,
    .nrevokes = get32 (h + 32),
    .crc = get32 (h + 80),
    .prev_crc = get32 (h + 84),
  };
  if (!header_ok (log, h, d->seq, off))
    return EILSEQ;
  d->len = get32 (h + 36) + data_len_for (log, nb);
  put32 (h + 80, 0);
  r = segment_crc (log, &log->m[i], h, off,
                   get32 (h + 36) + (uint64_t)nb * log->bs, &crc);
  if (r)
    return r;
  return crc == d->crc ? 0 : EILSEQ;
}

int
log_inspect_chain (struct hhc_log *log, unsigned i, struct log_chain_desc *c)
{
  HHC_CLEANUP_FREE unsigned char *h = hhc_alloc_aligned (ALIGN);
  struct scan s;
  int r;

  memset (c, 0, sizeof *c);
  c->last_barrier = -1;
  c->end_seq = log->hint_seq;
  c->end_off = log->hint_off;
  if (i >= log->nm)
    return EINVAL;
  if (h == NULL)
    return ENOMEM;
  if (log->m[i].blank)
    return 0;
  r = scan_mirror (log, &log->m[i], log->hint_off, log->hint_seq, &s);
  if (r == 0 && (c->segs = calloc (s.segs.len + 1, sizeof *c->segs)) == NULL)
    r = ENOMEM;
  for (size_t k = 0; r == 0 && k < s.segs.len; k++)
    {
      const struct seg_info *si = &s.segs.ptr[k];
      uint64_t phys = si->lpos % log->region_size;
      r = dev_pread (log->m[i].dev, h, ALIGN, LOG_REGION_OFF + phys);
      c->segs[k] = (struct log_seg_desc){
        .seq = si->seq,
        .base = si->base,
        .off = phys,
        .len = si->hdr_len + data_len_for (log, si->nblocks),
        .flags = si->flags,
        .nblocks = si->nblocks,
        .nrevokes = si->nrevokes,
        .crc = get32 (h + 80),
        .prev_crc = get32 (h + 84),
      };
    }
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
log_inspect_geometry (struct hhc_log *log, uint64_t *region_size,
                      uint64_t *head_off, uint64_t *head_seq, unsigned *best)
{
  *region_size = log->region_size;
  *head_off = log->hint_off;
  *head_seq = log->hint_seq;
  *best = log->best;
}
