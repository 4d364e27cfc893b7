/* The HDD barrier log's internals, shared by its files (gateway/log*.c)
 * and by no one else: the log's state and the functions one file of it
 * calls in another.  The public API is log.h, the on-disk format
 * log-format.h, the protocol docs/log.md.
 *
 * Files (each calls only those listed after it, never back):
 *   log.c          start and stop, barriers, rebase, stats
 *   log-writer.c   the writer thread: a sealed buffer to disk
 *   log-reclaim.c  room: checkpoint, persisted head, active reclaim,
 *                  the emergency barrier
 *   log-pipeline.c pipelined barriers (log-inflight > 1): segments in
 *                  flight, their lanes, the durable frontier
 *   log-buffer.c   the buffer being filled: append, update, revoke,
 *                  seal, room for the next buffer
 *   log-open.c     open (superblocks, format), retire, free
 *   log-scan.c     the chain of segments on a mirror, every mirror's
 *                  at open (at once, a thread each); inspection
 *   log-replay.c   replay into the backend: the surviving blocks
 *   log-stream.c   the replay's reads of the log and writes
 *   log-mirror.c   mirror I/O and failure, voiding
 *   log-superblock.c  superblock I/O: writes, a run's mark, release of
 *                  the mirrors that joined, reading a mirror's copies
 *   log-index.c    the in-memory index: keys, the ring of segments,
 *                  the unlogged bitmap, deaths, the head
 *   log-format.c   the on-disk codec and the segment checksum
 *
 * Locks, outermost first (a lock may be taken while holding those
 * above it, never the other way):
 *   void_lock  one void_failed at a time
 *   io_lock    one mirrors_io at a time; the superblock fields
 *              (sb_gen, hint_off, hint_seq) and each mirror's sb_hold
 *   lock       everything in memory but the mirrors' I/O state; never
 *              held during device I/O, and no other lock is taken
 *              while it is held.  The callbacks are called without
 *              it, but for the caller's message callback (hhc_msg):
 *              log_fail_locked and in_place_pos call it with lock
 *              held
 * The lanes of pipelined barriers (log-pipeline.c) take only lock,
 * never across I/O, and wait on pipe_cv; persist_head waits for them
 * with io_lock held, which they never take.
 * A mirror's m->mu (its worker thread and its job) is apart from
 * them: taken by its worker, by mirrors_io_locked under io_lock
 * (mirror_start, mirror_wait) and by mirrors_stop_threads, never
 * while lock is held, and no lock is taken while it is held.
 */
#ifndef HHC_LOG_INT_H
#define HHC_LOG_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common.h"
#include "log-format.h"
#include "log.h"

#define POS_OLDER 0x80000000u /* an older entry of the LBA may be on disk */
#define POS_MASK 0x7fffffffu

/* A normal buffer needs, besides its reservation, the room an empty
 * emergency barrier needs (room_for_buffer, make_room).
 */
#define EMERGENCY (2 * LOG_ALIGN)

/* A failed mirror owed a void is tried again this often (log-mirror.c,
 * the writer).
 */
#define VOID_RETRY_NS 1000000000u

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

/* Writes for one segment on every mirror. */
struct io {
  unsigned n;
  uint64_t off[3];
  const void *p[3];
  size_t len[3];
  bool sync, sync_only;
  bool sb; /* a superblock: not to mirrors with sb_hold */
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
  /* Both allocated whole at log_start (alloc_mem), so that filling a
   * buffer never allocates: revokes has room for rev_cap records (a
   * buffer is sealed when it holds that many), deaths for max_blocks
   * + rev_cap (each death is an entry in the buffer, or one revoked
   * there, which left a revoke record).
   */
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
  /* In flight (log-pipeline.c; next then links the in-flight list, in
   * log order).  Masks of mirrors (bit i: log->m[i]): given the
   * segment, its write done, durable by FUA, to be written with FUA,
   * to be synced after.  pending: mirrors whose lane still has it.
   */
  struct io pio;
  uint8_t issued, wdone, fua_done, fua, sync;
  bool durable; /* it and every segment before it, on every healthy mirror */
  unsigned pending;
  uint64_t t0; /* when a lane started it (group commit's wait) */
  uint64_t len;
  unsigned char *mark; /* its wrap marker (LOG_ALIGN) */
};

/* A death waits until the superseding segment is under a barrier. */
struct death {
  uint64_t seq;  /* the superseding segment */
  uint32_t ring; /* the segment that lost an entry */
};
HHC_VECTOR (death_vec, struct death)

struct mirror {
  struct hhc_dev *dev;
  bool own, failed, blank;
  char *path; /* as given (an NBD URI is dialled again to void it) */
  /* Voiding (log-mirror.c, "voiding a log that fell out of use"): the
   * failed mirror is owed a void (want_void), has had it (voided), or
   * stopped being written only at log_stop (no_void: never owed).
   */
  bool want_void, voided, void_warned, no_void;
  /* A mirror joining at start, void or behind (log-open.c,
   * mark_behind): no superblock is written to it until log_rebase has
   * made this run's log complete on it (until then a void one's void
   * copy wins, and a behind one keeps the generation that shows it
   * behind).
   */
  bool sb_hold;
  /* Of an older run than the newest (log-open.c): past this run's tail
   * it may hold segments of a history this run does not have, which
   * release_sb_hold cuts off with a zero block at the tail.
   */
  bool older_run;
  /* It joined at this start (blank, void, or behind the others: an
   * older superblock or a shorter chain) and does not yet hold the log
   * for a restart, until release_sb_hold has written this run's
   * superblock to it after the start-up re-log (log->lock): so another
   * mirror's failure does not make that one owe a void at once
   * (mark_failed_locked).
   */
  bool joining;
  uint64_t sb_gen; /* the generation of its valid superblock at open */
  /* The head its superblock records, where its scan starts: each
   * mirror's own (a start cut before its mark may have moved one
   * mirror's head past what another's chain still needs: found by the
   * mirror-sets campaign).  hint_seq 0: the log's.
   */
  uint64_t hint_off, hint_seq;
  /* Read as void at open: the log and generation its void records
   * (void_gen 0: not void).
   */
  uint8_t void_log[16];
  uint64_t void_gen;
  /* What its scan found at open: the sequence of its last barrier (0:
   * none) and of the segment after its chain.
   */
  uint64_t scan_lb_seq, scan_end_seq;
  uint32_t scan_end_crc; /* the link of its chain's last segment */
  bool scanned;          /* of the newest epoch, its scan succeeded */
  /* log_retire: not of the newest run given, voided with this (its own
   * generation) and a mirror count of 0, so that it never counts for a
   * run; 0: a member, voided with the log's.
   */
  uint64_t retire_gen;
  /* log_retire: void already, its void (void_log, void_gen and these)
   * to be written again with the retirement's epoch.
   */
  bool revoid;
  uint8_t void_cache[16];
  unsigned void_mirrors;
  uint64_t void_retired; /* the retirement epoch it carries */
  /* Which superblock copy (0: A, 1: B) holds its newest valid
   * superblock: a superblock write goes over the other one, so that
   * a torn write never leaves it without a readable valid copy, even
   * when the mirrors' copies disagree (do_io; io_lock).
   */
  unsigned sb_slot;
  /* Pipelined barriers (log-pipeline.c; log->lock): the next segment
   * its lanes take, every segment below synced (durable) on it, a
   * segment given without FUA since the last one given a sync, and
   * whether the device offers FUA.
   */
  uint64_t pseq, synced;
  /* Failures and durability, in the order they happened (log->lock):
   * fail_gen, the log's fail_gen when it failed; dur_gen, the highest
   * fail_gen seen at the start of a write or sync of it that then made
   * something durable.  A failed mirror is owed its void only if a
   * healthy, complete mirror made something durable in an I/O begun
   * after the failure (dur_gen >= fail_gen: owe_voids_locked).
   */
  uint64_t fail_gen, dur_gen;
  bool plain, can_fua;
  /* The serial writer (do_io, one io at a time per mirror): plain as
   * above, from the start (true: the first barrier syncs whatever an
   * earlier run left unsynced); the last io was made durable by FUA.
   * piped: barriers are pipelined (fixed at open): plain is then the
   * lanes' alone (pipe_issue, under log->lock), and do_io, which other
   * threads call while the writer issues segments (persist_head from
   * log_rebase, a superblock), neither reads nor clears it: its writes
   * are synced, never FUA.
   */
  bool last_fua, piped;
  /* Every fsync-type call on the device (a sync, a FUA write) takes
   * sync_mu, one at a time, and a failure stays in sync_err: Linux
   * reports a buffered file's write-back error to one such call per
   * open file only, so two overlapping calls (lanes, persist_head)
   * could see one fail and the other succeed and be credited
   * (mirror_fsync, log-mirror.c).
   */
  pthread_mutex_t sync_mu;
  bool sync_err;
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
  hhc_msg_fn msgfn;
  struct mirror m[LOG_MAX_MIRRORS];
  unsigned nm;
  uint32_t bs, max_blocks, segment_size;
  bool segment_auto; /* segment-size not given: open_buffers picks it */
  uint64_t volume_size, region_size;
  char *identity;
  uint8_t uuid[16], cache_uuid[16];
  uint64_t sb_gen;
  uint64_t sb_gen_taken;   /* the last generation a mirror took */
  uint64_t open_gen;       /* the newest valid superblock's at open (0: none) */
  unsigned retire_mirrors; /* log_retire: the mirrors of it given (blank
                            * devices are none) */
  uint64_t chain_gen;      /* the newest superblock generation among the
                       * mirrors whose chain is the chosen one (scan_all:
                       * chain_generation; log_open_generation) */
  bool old_version;        /* a valid superblock of an earlier LOG_VERSION */
  struct scan scan;        /* of the best mirror */
  unsigned best;           /* mirror the scan came from */
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
  unsigned nbufs_want; /* before a small log gave some up (open_buffers) */
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
  /* The writer's header buffer (allocated for the largest header at
   * log_start; grows).  Each buffer has its own wrap marker (b->mark):
   * with pipelined barriers it may be in flight while the next is
   * built.
   */
  unsigned char *hdrbuf;
  size_t hdrcap;
  unsigned healthy;
  unsigned unvoided;     /* atomic: failed mirrors not yet voided */
  uint64_t fail_gen;     /* mirror failures so far (mirror.fail_gen) */
  uint64_t next_void_ns; /* writer: next background void attempt */
  /* A dead NBD mirror is dialled again at most after 1, 2, 4, then
   * every 8 s (dial_due_locked); lock.
   */
  uint64_t next_dial_ns;
  unsigned dial_tries;
  pthread_mutex_t void_lock; /* one void_failed at a time; -> lock */
  /* Pipelined barriers (log-pipeline.c; lock): at most inflight_max
   * barrier segments in flight (1: the writer writes one segment at a
   * time, as before), the segments in flight in log order, and the
   * newest barrier issued (placed and given to the mirrors) with its
   * revoke count: durable_barrier and rev_durable follow it.  The
   * lanes (inflight_max per mirror) wait on pipe_cv.
   */
  unsigned inflight_max, inflight_bars;
  struct buf *ifhead, *iftail;
  uint64_t issue_seq;  /* the next segment to be given to the mirrors */
  uint64_t pipe_front; /* every segment below durable on every mirror */
  uint64_t barrier_issued, rev_issued_bar;
  pthread_cond_t pipe_cv;
  bool pipe_stop;
  struct lane *lanes;
  unsigned nlanes;
  pthread_t writer;
  struct log_callbacks cb;
  struct log_stats st;
};

/* ---- log-open.c ---- */

/* A log with conf's geometry and its mirrors open (nothing read);
 * *min_size: the smallest mirror.  On error *logp may still need
 * free_log.
 */
int new_log (const struct log_conf *conf, struct hhc_log **logp,
             uint64_t *min_size);
/* Close what new_log opened and free everything (NULL: nothing). */
void free_log (struct hhc_log *log);

/* ---- log-scan.c ---- */

/* Follow the chain of segments from the head hint on mirror m (*s is
 * filled even on error: scan_free it).
 */
int scan_mirror (struct hhc_log *log, struct mirror *m, uint64_t hint_off,
                 uint64_t hint_seq, struct scan *s);
void scan_free (struct scan *s);
/* Scan every mirror that is not blank, all at once: the one with the
 * newest barrier (then the longest chain after it; the first on a tie)
 * becomes log->scan and log->best.  An error from any mirror fails.
 */
int scan_all (struct hhc_log *log);

/* ---- log-pipeline.c: no lock held ---- */

/* Start the lanes (inflight_max per mirror, when it is above 1) and
 * stop them (nothing may be in flight).
 */
int pipe_start (struct hhc_log *log);
void pipe_stop (struct hhc_log *log);

/* ---- log-mirror.c: no lock held ---- */

/* Read a mirror's superblock: 0 (valid, into *sb), ENOENT (blank),
 * ESTALE (voided: the void superblock, into *sb), EINVAL (corrupt,
 * logged), or an I/O errno (logged).  Sets m->sb_slot; *max_gen: the
 * highest generation of a valid copy on it, whatever won (0: none).
 */
int read_sb (struct hhc_log *log, struct mirror *m, struct log_sb *sb,
             uint64_t *max_gen);
/* The superblock of this log as it is now (io_lock held, or no writer
 * yet).
 */
void sb_of_log (const struct hhc_log *log, struct log_sb *sb);
/* Void dev: the void mark (a void superblock of generation, the newest
 * superblock generation dev may hold, the log's count of mirrors and a
 * retirement's epoch, 0 for a failed mirror), a sync, then both
 * copies, a sync (log-format.h).
 */
int void_dev (struct hhc_dev *dev, const uint8_t log_uuid[16],
              const uint8_t cache_uuid[16], uint64_t generation,
              unsigned mirrors, uint64_t retire_epoch);
/* Run io on every healthy mirror (a mirror that fails is marked
 * failed): 0 if at least one succeeded, else EIO.  mirrors_io takes
 * io_lock; mirrors_io_locked is called with it held.
 */
int mirrors_io (struct hhc_log *log, const struct io *io);
int mirrors_io_locked (struct hhc_log *log, const struct io *io);
/* Write the superblock (next generation, over the older copy) to every
 * healthy mirror and sync; write_sb_locked with io_lock held.
 */
int write_sb (struct hhc_log *log);
int write_sb_locked (struct hhc_log *log);
/* This run's log is complete on every mirror: superblocks to the void
 * mirrors that joined (sb_hold).
 */
int release_sb_hold (struct hhc_log *log);
/* A sync of m (buf NULL) or a FUA write of len bytes of buf at off,
 * under m->sync_mu; an error is sticky (EIO for every later call).
 */
int mirror_fsync (struct mirror *m, const void *buf, size_t len, uint64_t off);
/* A write or sync to m failed with err: mark it failed, say so. */
void mirror_failed (struct hhc_log *log, struct mirror *m, int err);
/* A failed mirror not yet owed its void for want of proof that a
 * complete mirror outlived it (an idle volume, a close): a sync of the
 * healthy mirrors now, which owes it if they succeed (log-reclaim.c).
 */
void log_prove_failed (struct hhc_log *log);
/* Start a worker thread per mirror (more than one mirror), and stop
 * them.
 */
int mirrors_start_threads (struct hhc_log *log);
void mirrors_stop_threads (struct hhc_log *log);

/* ---- lock must be held below this line ---- */

/* log-mirror.c */

/* Mark m failed: it is written no more (can_void: see there). */
void mark_failed_locked (struct hhc_log *log, struct mirror *m, bool can_void);
/* A healthy mirror made something durable: every failed mirror is owed
 * its void now, if a healthy one holds the log.
 */
void owe_voids_locked (struct hhc_log *log);
/* Is a failed mirror waiting for that proof (log_prove_failed)? */
bool unproven_locked (const struct hhc_log *log);
/* The log can no longer be kept (what: why, err: the errno): every
 * mirror is marked failed, so no later barrier counts and FLUSHes fall
 * back to write-back.  Logged.
 */
void log_fail_locked (struct hhc_log *log, const char *what, int err);

/* log-index.c */

bool is_unlogged (const struct hhc_log *log, uint32_t k);
void set_unlogged (struct hhc_log *log, uint32_t k, bool on);
struct seg *ring_of (struct hhc_log *log, uint64_t seq);
/* Take key k out of its segment's chain, or put it first in ring's. */
void chain_remove (struct hhc_log *log, uint32_t k);
void chain_add (struct hhc_log *log, uint32_t k, uint32_t ring);
/* The in-memory head: logical position and sequence number. */
uint64_t mem_head_lpos (struct hhc_log *log);
uint64_t mem_head_seq (struct hhc_log *log);
/* Bytes of the region in use. */
uint64_t used_bytes (struct hhc_log *log);
/* Move the in-memory head past written segments without live entries. */
void advance_head (struct hhc_log *log);
/* Apply the deaths whose superseding segment is under a durable
 * barrier, then advance_head.
 */
void apply_deaths (struct hhc_log *log);
/* Room in log->deaths for n more without allocating: 0 or ENOMEM. */
int deaths_reserve (struct hhc_log *log, size_t n);
/* The ring, the keys, the bitmap and the buffers for nkeys keys (no
 * lock needed: log_start, before the writer).  0 or ENOMEM.
 */
int alloc_mem (struct hhc_log *log, unsigned nbuffers, uint32_t nkeys);

/* log-buffer.c */

/* Make b the buffer being filled, with the next sequence number,
 * holding reserve bytes of the tail.
 */
void make_current (struct hhc_log *log, struct buf *b, uint64_t reserve);
/* Room at the tail for bytes more and slots more ring slots?  For a
 * normal buffer (room_for_buffer)?
 */
bool room_for (struct hhc_log *log, uint64_t bytes, unsigned slots);
bool room_for_buffer (struct hhc_log *log);
/* The bytes a buffer of seg bytes reserves at the tail (its largest
 * segment and header): log->reserve (log-open.c's open_buffers).
 */
uint64_t buffer_reserve (uint32_t seg, uint32_t bs);
/* Whether b, just made current, has taken all the revokes it has room
 * for: it is to be sealed at once.
 */
bool full_of_revokes (const struct hhc_log *log, const struct buf *b);
/* Make a free buffer current if there is room. */
void try_make_current (struct hhc_log *log);
/* Take the current buffer off, sealed, onto the writer's queue (no
 * wake-up, no next buffer: seal does both).
 */
void queue_sealed (struct hhc_log *log);
/* Seal the current buffer and queue it for the writer. */
void seal (struct hhc_log *log);

/* log-reclaim.c (both may drop the lock) */

/* Persist the in-memory head: 0 or errno. */
int persist_head (struct hhc_log *log);
/* No buffer can become current for lack of room: make some.  True if
 * progress was made.
 */
bool make_room (struct hhc_log *log);
/* Relog the head segment's live keys when that frees room.  True if
 * progress was made.
 */
bool active_reclaim (struct hhc_log *log);

/* log-writer.c */

/* The writer thread (started by log_start, with log as arg). */
void *writer_thread (void *arg);

/* log-pipeline.c */

/* Give placed segment b (its writes in b->pio) to every healthy
 * mirror's lanes.
 */
void pipe_issue (struct hhc_log *log, struct buf *b);
/* The durable frontier: mark in-flight segments durable in order,
 * durable_barrier and rev_durable up to the newest such barrier, and
 * free the buffers whose I/O is over.
 */
void pipe_update (struct hhc_log *log);
/* Is every write of a segment below seq done on every healthy mirror? */
bool pipe_written_below (struct hhc_log *log, uint64_t seq);
/* A sync of every healthy mirror, begun once pipe_written_below (seq),
 * succeeded: every segment below seq is durable.
 */
void pipe_synced (struct hhc_log *log, uint64_t seq);
/* Wait until nothing is in flight (lock held; the writer at stop). */
void pipe_drain (struct hhc_log *log);

/* ---- log-stream.c (no lock: before log_start) ---- */

/* A surviving block of a replay: its data's device offset, its LBA. */
struct replay_blk {
  uint64_t off, lba;
};
/* Read the n blocks of v (sorted by off, each LBA once) from dev in
 * runs and write them through sink (log_replay_sink); *reads: read
 * requests made.  0 or the first error.
 */
int replay_stream (struct hhc_dev *dev, uint32_t bs, const struct replay_blk *v,
                   size_t n, const struct log_sink *sink, uint64_t *reads);

#endif /* HHC_LOG_INT_H */
