/* The HDD barrier log (docs/design.md §5; decisions in docs/log.md).
 * The on-disk format in full is in log-format.h, the internals in
 * log_int.h.
 *
 * Layout of every mirror (identical; little-endian):
 *   0, 4 KiB     superblock, copies A and B (the newer valid one counts)
 *   64 KiB       the circular region: packed segments, 4 KiB aligned
 *
 * A segment is a header (4 KiB multiple: sequence number, barrier flag,
 * base sequence, LBA table, revoke table, a checksum over header and
 * data) followed by its data blocks.  A segment that does not fit
 * before the end of the region is preceded by a wrap marker (a header
 * with the same sequence number and the wrap flag) and written at the
 * start.
 *
 * The log does not know the cache: a block is named by a "key" (the
 * volume passes its cache slot number) and the LBA.  Per key the log
 * keeps where the block's newest entry is (segment, position), which
 * doubles as the slot's "logged" flag, and chains the keys of each
 * segment for active reclaim.
 *
 * Replay (SSD lost) applies the segments from the head hint (or the
 * last barrier's base, if later) to the last segment with the barrier
 * flag: per segment first its revokes, then its blocks; last writer
 * wins.
 *
 * Locks: log->lock protects everything in memory but the mirrors' I/O
 * state.  It is never held during device I/O, and no other lock is
 * taken while it is held, except through the callbacks, which are
 * called without it.
 */
#ifndef HHC_LOG_H
#define HHC_LOG_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "dev.h"
#include "hhccore.h"
#include "log-format.h" /* the on-disk format: LOG_MAGIC, LOG_F_* ... */

#define LOG_NONE 0xFFFFFFFFu
/* Barrier segments in flight at once when not given (log-inflight),
 * and always 1 on a serial device (dev->serial: NBD).  1 until K > 1
 * is measured a gain on a quiet machine and on the one-head HDD model
 * (docs/log.md, "Pipelined barriers": on a loaded machine K=4 on a
 * file measured 1.04-1.74x K=1, within the noise of the runs, and on
 * a one-head disk K barriers each cost a rotation).  A build with
 * CPPFLAGS=-DLOG_INFLIGHT_DEFAULT=4 changes it for comparisons.
 */
#ifndef LOG_INFLIGHT_DEFAULT
#define LOG_INFLIGHT_DEFAULT 1
#endif
#define LOG_MAX_MIRRORS HHC_MAX_LOGS
/* The segment size without segment-size (log_default_segment): the
 * largest of these powers of two whose buffers take at most a quarter
 * of the region and LOG_BUF_MEM_AUTO of memory.
 */
#define LOG_SEG_MAX_AUTO (4u << 20)
#define LOG_SEG_MIN_AUTO (1u << 20)
#define LOG_BUF_MEM_AUTO (UINT64_C (16) << 20)

struct hhc_log;

/* Callbacks into the volume, called without the log lock. */
struct log_callbacks {
  void *opaque;
  /* Re-log key: claim the block, read it from the SSD and call
   * log_append (or nothing if it is no longer dirty).  0 or errno.
   */
  int (*relog) (void *opaque, uint32_t key, uint64_t lba);
  /* The log is filling up: write back the oldest dirty blocks. */
  void (*pressure) (void *opaque);
  /* Write-ahead (docs/design.md §5.8): make the SSD's slot data and metadata
   * durable (cache_commit).  Called before the persisted head moves
   * (the log space behind it may then be reused), and once when the
   * last mirror fails.  NULL: FLUSH commits the SSD itself, and the
   * head moves freely.  0 or errno.
   */
  int (*checkpoint) (void *opaque);
};

struct log_conf {
  const char *const *paths; /* mirrors: file, block device or NBD URI */
  unsigned npaths;
  uint32_t block_size;
  uint64_t volume_size;
  const char *identity;  /* backend identity, as in the cache; NULL:
                          * take the volume the log records (offline) */
  uint32_t segment_size; /* bytes of data per buffer (0: 1 to 4 MiB,
                          * by the region: log-open.c) */
  unsigned nbuffers;     /* segment buffers (0: 4, or inflight + 2) */
  unsigned inflight;     /* barrier segments in flight (0: the default) */
  hhc_msg_fn msgfn;
  /* Devices opened already, used instead of the paths (hhc_preopen's,
   * hhcctl's read-only ones, a test's); NULL: open the paths.
   */
  struct hhc_dev **devs;
  uint32_t ring_slots; /* tests: at most this many segments in
                               * memory (0: the default, log.c) */
  /* No mirror holds a log: ENODATA (nothing written, nothing said)
   * instead of formatting one.
   */
  bool no_format;
  /* The epoch a log formatted now starts at: a loaded cache's known
   * epoch (logpair-check.c), so that the new log, which names the
   * cache, shows an older copy of the cache older than it even when
   * the start is cut before its mark (it replaces voided mirrors that
   * showed it: test-log-sets seed 5617); 0 for a new cache.
   */
  uint64_t format_epoch;
};

/* What log_open found. */
enum log_found {
  LOG_FOUND_BLANK, /* no mirror holds a log: formatted a new one */
  LOG_FOUND_VALID, /* a log of this backend */
};

/* Open every mirror, check the superblocks.  A blank mirror next to a
 * valid one joins the log; if all are blank, a new log is formatted
 * (paired with cache_uuid; conf->no_format: ENODATA instead).
 * Refuses (EINVAL, logged) a log of another
 * backend, mirrors of different logs, a corrupt superblock, devices
 * too small.
 */
int log_open (const struct log_conf *conf, const uint8_t cache_uuid[16],
              struct hhc_log **logp, enum log_found *found);
void log_close (struct hhc_log *log);

/* The volume the log belongs to. */
void log_volume (struct hhc_log *log, const char **identity, uint64_t *size,
                 uint32_t *block_size);

/* The log's UUID and the cache UUID it is paired with. */
void log_uuids (struct hhc_log *log, uint8_t log_uuid[16],
                uint8_t cache_uuid[16]);
/* The superblock generation at open of the mirror whose chain is read
 * (0: the log was blank or formatted): not the newest of all, which a
 * mirror that joined in a start cut short may hold over an empty chain
 * (found by review: a failed mirror's chain passed with a blank
 * joiner's generation).
 */
uint64_t log_open_generation (struct hhc_log *log);
/* A superblock generation is a run's epoch (the high 32 bits: each
 * start's log_mark_run takes one above every epoch the mirrors given
 * or the cache knew) and a count within the run (persist_head and the
 * other superblock writes).  A mirror of an older epoch than the newest
 * was left out of that run (or failed before its start ended): its
 * chain is never the one read (scan_all), whatever its barriers; within
 * an epoch the newest barrier decides, as mirrors of one run may
 * disagree only by what a crash or a failure cut.
 */
#define LOG_EPOCH_SHIFT 32

/* The newest superblock epoch the mirrors given hold (valid copies;
 * the cache's own reservation covers a start whose mark was cut).
 */
uint64_t log_max_epoch (struct hhc_log *log);
/* After log_start's re-log: write a superblock of the first generation
 * of epoch (which the cache reserved: above log_max_epoch and every
 * epoch it reserved before) to every healthy mirror and sync; *gen
 * gets it.  A mirror left out of this run keeps an older epoch: the
 * cache records *gen (logpair_record_gen) so that such a mirror, given
 * alone later, is known to be stale.  0 or errno (EOVERFLOW: past
 * 2^30 epochs, a corrupt generation).
 */
int log_mark_run (struct hhc_log *log, uint64_t epoch, uint64_t *gen);
/* The generation of the last superblock written (after log_stop: the
 * one its mirrors end the run with).
 */
uint64_t log_generation (struct hhc_log *log);
/* After the run's mark (generation gen): void again, with gen, every
 * mirror voided in this run so far (best effort), so that a void from
 * before the mark counts as one of this run's mirrors in a retirement
 * (sixth review; check_retire counts the newest epoch's only).
 */
void log_revoid (struct hhc_log *log, uint64_t gen);
/* Did the scan at open find no segment in the chain read? */
bool log_chain_empty (struct hhc_log *log);
/* The epoch of the newest valid superblock at open (0: blank). */
uint64_t log_newest_epoch (struct hhc_log *log);
/* The chain read is not this cache's (logpair_stale: a mirror left
 * out or failed; another log of this cache): no mirror gets a
 * superblock until the start-up re-log has made this run's log
 * complete on it (release_sb_hold), else a start cut before that left
 * the stale chain under a superblock as new as the healthy mirrors'
 * (found by the mirror-sets campaign: its head then passed for theirs,
 * and a replay missed blocks).  After log_open, before log_start.
 */
void log_hold_sb (struct hhc_log *log);
/* The newest epoch of a void superblock of this log among the mirrors
 * given (0: none).  Above log_newest_epoch: the chain read is of an
 * older run than one whose mirror was voided since (retired, or failed
 * in it), and a replay of it would write older blocks over what that
 * run wrote back.
 */
uint64_t log_void_epoch (struct hhc_log *log);
/* Mirror failures so far in this run (a count that only grows). */
uint64_t log_failures (struct hhc_log *log);
/* A mirror that failed and was not voided keeps this run's superblock
 * generation: given alone after a crash, it could pass for the log
 * (docs/design.md §5.10).  Before a FLUSH that only the others hold is
 * acknowledged, they get a superblock of the next generation (*gen),
 * which the cache records (record_failures).  0 or errno (no
 * healthy mirror took it).
 */
int log_mark_failures (struct hhc_log *log, uint64_t *gen);

/* Replay the log into the backend through write (block-sized writes at
 * lba * block_size), calling progress(done, total) now and then:
 * log_replay_sink with one block per write and one writer thread
 * (write is never called from the caller's thread, nor from two at
 * once).  Does not flush the backend.  Returns 0 or errno.
 */
int log_replay (struct hhc_log *log,
                int (*write) (void *opaque, const void *buf, uint64_t lba),
                void (*progress) (void *opaque, uint64_t done, uint64_t total),
                void *opaque);

/* Where log_replay_sink puts the surviving blocks. */
struct log_sink {
  /* Write n blocks of consecutive LBAs from lba (n * block_size bytes
   * at buf; the last block of the volume may be partial, as the caller
   * clips it).  Called by up to writers threads at once, never twice
   * for one LBA; never from the thread that called log_replay_sink.
   */
  int (*write) (void *opaque, const void *buf, uint64_t lba, uint32_t n);
  /* May be NULL; called from the caller's thread only. */
  void (*progress) (void *opaque, uint64_t done, uint64_t total);
  void *opaque;
  unsigned writers;    /* write calls at once (0 or 1: one) */
  uint32_t max_blocks; /* most blocks per write (0: no limit) */
  uint32_t chunk;      /* a write never crosses a multiple of chunk
                        * blocks (0: no such boundary) */
};

/* The same, streamed: the surviving blocks are read in log order, in
 * requests of up to 1 MiB, and written with adjacent LBAs merged, by
 * sink->writers threads while the log is read (docs/log.md, Replay).
 * The first error stops it and is returned once every write in flight
 * has returned.  Does not flush the backend.  0 or errno.
 */
int log_replay_sink (struct hhc_log *log, const struct log_sink *sink);

/* Start the writer (after log_open, and log_replay if any) for keys
 * 0 .. nkeys-1 (cache slots).  The log is (re)paired with cache_uuid.
 */
int log_start (struct hhc_log *log, const uint8_t cache_uuid[16],
               uint32_t nkeys, const struct log_callbacks *cb);
/* Stop the writer; sealed buffers are written first. */
void log_stop (struct hhc_log *log);

/* Start of a run: re-log every key in dirty_keys (read back from the
 * SSD through the relog callback), write a barrier whose base is the
 * first segment of this run (older segments are void for replay) and
 * persist the head.  0 or errno.
 */
int log_rebase (struct hhc_log *log, const uint32_t *dirty_keys,
                const uint64_t *lbas, size_t n);

/* Start of a run, before log_rebase: can nblocks dirty blocks be
 * written to the log while the last run's segments still hold their
 * room?  If not, write every dirty block back, flush the backend, and
 * call log_discard (the old segments are then not needed) first.
 */
bool log_rebase_fits (struct hhc_log *log, uint64_t nblocks);
int log_discard (struct hhc_log *log);

/* A dirty block was written: data is the whole block.  Never waits;
 * when no buffer is free the key is left unlogged (a barrier reads it
 * back).  Call with the block claimed (no concurrent write of it).
 */
void log_append (struct hhc_log *log, uint32_t key, uint64_t lba,
                 const void *data);
/* Part of a block changed (in place); the log copies it if the entry is
 * still in the buffer being filled, else unlogs the key.
 */
void log_update (struct hhc_log *log, uint32_t key, uint64_t lba,
                 const void *buf, uint32_t off, uint32_t len);
/* The block is no longer dirty in the cache (written back and flushed
 * on the backend, or trimmed): void its log entries.
 */
void log_revoke (struct hhc_log *log, uint32_t key, uint64_t lba);
/* key is not dirty (any more): clear its unlogged flag. */
void log_forget (struct hhc_log *log, uint32_t key, uint64_t lba);
/* Is key's newest data in the log (or a buffer)? */
bool log_is_logged (struct hhc_log *log, uint32_t key);

/* Barrier: every block appended before and every unlogged dirty key is
 * in a synced segment with the barrier flag on every healthy mirror.
 * EIO when no mirror is healthy (the caller falls back to write-back).
 */
int log_barrier (struct hhc_log *log);

/* log_barrier in two halves, so that the caller can sync the SSD while
 * the barrier is written: begin re-logs unlogged blocks and asks for
 * the barrier; wait waits for it.
 */
struct log_ticket {
  uint64_t seq;  /* a barrier at or after this segment; 0: none needed */
  uint64_t revs; /* and every revoke record up to this count durable */
};
int log_barrier_begin (struct hhc_log *log, struct log_ticket *ticket);
int log_barrier_wait (struct hhc_log *log, const struct log_ticket *ticket);

/* Void every failed mirror that is owed it and not voided yet (its
 * superblocks become void: nothing on it can be replayed).  A mirror
 * that fails while another stays healthy is owed it at once; the
 * writer tries in the background.  Returns how many failed mirrors
 * are still not voided.
 */
unsigned log_void_failed (struct hhc_log *log);
/* No mirror is healthy, and a FLUSH that fell back has written every
 * dirty block back and flushed the backend: what the failed mirrors
 * hold is stale.  Owe every one a void, and try (log_void_failed).
 */
unsigned log_void_stale (struct hhc_log *log);

/* The cache is about to be used without its log (a mode other than
 * hhc): check that the log is log_uuid (if zero: a log paired with
 * cache_uuid), with every mirror it had, and with retire_epoch (not
 * 0: the epoch the caller reserved in the cache, durably, for the
 * voids to carry) void each of them (the oldest superblock first).
 * 0 also if it is void already; EINVAL (logged) if a mirror is of
 * another log, a mirror is missing, all are blank, or no superblock
 * names the cache (its replay into it did not finish).  An older copy
 * of the cache is the caller's to refuse (log_survey).  Needs no
 * log_open.
 */
int log_retire (const struct log_conf *conf, const uint8_t cache_uuid[16],
                const uint8_t log_uuid[16], uint64_t retire_epoch);
/* The newest epoch (out->epoch) of a superblock among conf's mirrors,
 * valid or void, that names the cache cache_uuid or is of one of its
 * logs (log_uuid, the one it last ran with, or one whose valid
 * superblock names it): the newest run of that cache they show (each
 * start reserves its epoch in the cache before any mirror takes it; a
 * retirement's void counts with the epoch it reserved).
 * Writes nothing (a mirror that cannot be read shows nothing; the
 * start's log_open says why).  0 or ENOMEM, EINVAL (conf).
 */
struct log_survey {
  uint64_t epoch;
  /* Of those, the valid superblock naming another cache (a run of one
   * of this cache's logs by another cache) with the newest epoch: its
   * mirror (-1: none) and epoch.
   */
  int other;
  uint64_t other_epoch;
};
int log_survey (const struct log_conf *conf, const uint8_t cache_uuid[16],
                const uint8_t log_uuid[16], struct log_survey *out);

/* Is at least one mirror healthy? */
bool log_healthy (struct hhc_log *log);
/* Fraction (0..1) of the region in use. */
double log_usage (struct hhc_log *log);

struct log_stats {
  uint64_t segments, barriers, syncs, bytes, blocks, revokes;
  uint64_t fua_barriers; /* barriers made durable by FUA writes alone */
  uint64_t joins;        /* FLUSHes that waited for a barrier not yet sealed */
  uint64_t relogged, unlogged_now, full_waits, reclaimed, head_persists;
  uint64_t checkpoints;
  uint64_t region_size, used;
  /* Bytes of the region kept at the tail for the segment buffers, a
   * reclaim buffer, a wrap and an emergency barrier (log_room_kept):
   * not for dirty blocks (docs/design.md §5.6).
   */
  uint64_t reserve;
  uint64_t reserve_max;  /* the same for a region of any size (without
                          * segment-size, a bigger log gets bigger
                          * segments) */
  uint32_t segment_size; /* the largest segment of this run */
  unsigned mirrors, mirrors_failed;
  unsigned mirrors_unvoided; /* failed, and not yet voided on disk */
};
void log_get_stats (struct hhc_log *log, struct log_stats *s);
/* The segment size when segment-size is not given, for a region of
 * region bytes and nbufs buffers (block size bs): see LOG_SEG_MAX_AUTO.
 */
uint32_t log_default_segment (uint64_t region, unsigned nbufs, uint32_t bs);
/* The room a log with nbufs buffers of seg bytes keeps at its tail: the
 * reservations (segment and header) of the buffers, one for a reclaim
 * buffer, one for a wrap, one to spare, and an emergency barrier's.
 */
uint64_t log_room_kept (uint32_t seg, uint32_t bs, unsigned nbufs);
/* Health of mirror i (name, failed). */
const char *log_mirror_name (struct hhc_log *log, unsigned i, bool *failed);

/* ---- read-only inspection (hhcctl check), after log_open and before
 * log_start: nothing is written ----
 */

/* A segment as a mirror holds it: its header, decoded (log-format.h);
 * off: where the header is, in bytes from the start of the region;
 * len: header and data (4 KiB multiple).
 */
struct log_seg_desc {
  struct log_seg_hdr hdr;
  uint64_t off, len;
};

/* The chain that replay follows on mirror i (the scan log_open did:
 * from the head hint while sequence, link and checksums verify; wrap
 * markers are not listed), and where it ends: the sequence number and
 * region offset of the next segment, which is missing or bad.
 */
struct log_chain_desc {
  struct log_seg_desc *segs; /* n, malloc'd: the caller frees it */
  size_t n;
  long last_barrier; /* index in segs, -1: none */
  uint64_t end_seq, end_off;
};
int log_inspect_chain (struct hhc_log *log, unsigned i,
                       struct log_chain_desc *c);

/* The segment whose header would be at off (a 4 KiB multiple) in the
 * region of mirror i, whatever its sequence number: 0 if it is a whole
 * segment of this log (d filled); ENOENT if no header of this log is
 * there; EILSEQ if the header is of this log but the segment is
 * damaged (impossible lengths, or the checksum fails: d filled from
 * the header, len 0 if the lengths are impossible); or an I/O errno.
 */
int log_inspect_segment (struct hhc_log *log, unsigned i, uint64_t off,
                         struct log_seg_desc *d);

/* How a mirror's superblock area read (log_dev_sb). */
struct log_sb_read {
  unsigned unreadable; /* LOG_SB_* bits: parts that could not be read */
  int err;             /* the first read error */
  unsigned newest;     /* the copy (0: A, 1: B) of the newest valid one */
  uint64_t max_gen;    /* its generation (0: no valid copy) */
};

/* Read the superblock area of dev and decode it as the log does
 * (log_sb_decode_mirror; ENOMEM too), what the read found in *rd.
 */
int log_dev_sb (struct hhc_dev *dev, struct log_sb *sb, struct log_sb_read *rd);

/* The superblock as the log holds it (what log_open read, and the
 * volume it adopted offline) and the mirror replay reads from.
 */
void log_inspect_sb (struct hhc_log *log, struct log_sb *sb, unsigned *best);

#endif /* HHC_LOG_H */
