/* Offline access to a gateway's devices: everything hhcctl's check,
 * format and recover need from the core, with no gateway running.
 * hhcctl includes this header and the public one (hhccore.h) alone.
 *
 *   devices   offline.c      open read-only (check) or locked for
 *                            writing (format, recover), blank a head
 *   cache     offline.c      the census of a cache device: superblock
 *                            and state page as the gateway reads them
 *                            (cache.c), every metadata page checked by
 *                            the codec (cache-format.h)
 *   log       offline-log.c  open a log's mirrors without writing
 *                            (blank as the gateway decides it),
 *                            inspect its chains and segments (headers
 *                            and superblock decoded by the codec,
 *                            log-format.h), count or run a replay
 *
 * Nothing here writes to a device but offline_blank, offline_log_blank
 * and the replay
 * callback the caller gives; a device opened read-only fails every
 * write with EROFS.  Errors are returned as errno values; the core's
 * own messages go through the hhc_msg_fn the caller gives.
 */
#ifndef HHC_OFFLINE_H
#define HHC_OFFLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache-format.h"
#include "hhccore.h"
#include "log-format.h"

struct hhc_dev;
struct hhc_log;

/* ---- devices (offline.c) ---- */

/* Bytes whose zeroing makes a device blank: the next gateway start
 * formats it.
 */
#define OFFLINE_CACHE_HEAD CACHE_PAGE /* the superblock */

/* Open a file, block device or NBD URI read-only (check); *busy: a
 * running gateway has it (it is read anyway).
 */
int offline_open_readonly (const char *path, hhc_msg_fn msgfn,
                           struct hhc_dev **devp, bool *busy);
/* Open one for writing, locked as a gateway locks it (EBUSY while a
 * gateway runs on it).
 */
int offline_open (const char *path, hhc_msg_fn msgfn, struct hhc_dev **devp);
/* Size in bytes. */
uint64_t offline_size (const struct hhc_dev *dev);
/* Write exactly len bytes at off; make completed writes durable. */
int offline_write (struct hhc_dev *dev, const void *buf, size_t len,
                   uint64_t off);
int offline_sync (struct hhc_dev *dev);
/* Zero the first len bytes (at most the device's size) and sync. */
int offline_blank (struct hhc_dev *dev, size_t len);
/* Make a log mirror blank: its superblock copies and void mark zeroed,
 * copy A and the mark first, a sync, then copy B, a sync, so that a
 * power cut tears at most one copy and leaves the other whole (the log
 * as it was, or blank: never a torn mix that reads as neither).
 */
int offline_log_blank (struct hhc_dev *dev);
/* Close (NULL: nothing). */
void offline_close (struct hhc_dev *dev);

/* "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */
void offline_uuid_str (const uint8_t uuid[16], char out[37]);

/* ---- the cache (offline.c) ---- */

/* What a cache device holds, as the gateway would load it. */
struct offline_cache {
  bool blank;             /* no superblock: the gateway formats it */
  struct cache_super sb;  /* valid unless blank: geometry, UUIDs, identity */
  enum cache_state state; /* of the state page */
  uint32_t bad_pages, first_bad;   /* pages with no valid copy */
  uint32_t late_pages, first_late; /* sequence >= CACHE_SEQ_LOAD_MAX */
  uint64_t late_state;             /* that state sequence, else 0 */
  uint64_t clean, dirty;           /* blocks, duplicates resolved */
  uint64_t beyond, first_beyond;   /* entries naming blocks beyond the volume */
  uint64_t dups;                   /* blocks named by more than one slot */
  /* Of the state page: the log it last ran with (zero: none), and the
   * newest run of it the cache knows of (0: none; logpair-check.c).
   */
  uint8_t linked_log[16];
  uint64_t known_epoch;
  uint64_t record_epoch; /* its last run's recorded (0: none) */
};

/* Read the cache's superblock, state page and metadata (nothing is
 * written).  0 (cc->blank if it holds no cache), EINVAL (corrupt
 * superblock: logged) or an errno.
 */
int offline_cache_read (struct hhc_dev *dev, hhc_msg_fn msgfn,
                        struct offline_cache *cc);

/* ---- the log (offline-log.c) ---- */

/* A log's mirrors, opened by the caller, and the log on them. */
struct offline_logset {
  const char **paths;
  unsigned n;
  struct hhc_dev *devs[HHC_MAX_LOGS];
  bool blank[HHC_MAX_LOGS]; /* holds no log superblock */
  unsigned nblank;
  struct hhc_log *log; /* NULL if every mirror is blank */
};

/* The devices are open: open the log on them as hhcctl recover does
 * (the volume the log records).  Nothing is written: a blank mirror
 * stays blank, and if all are, no log is opened.  An error reading a
 * mirror is returned with *failed its index (else *failed is n).
 */
int offline_logset_open (struct offline_logset *ls, hhc_msg_fn msgfn,
                         unsigned *failed);
/* Would a start refuse the cache cc (named cache_name) as an older
 * copy of the one that ran with the log on ls's mirrors (a superblock
 * of a run or a retirement later than any cc knows of: the gateway's
 * own check, logpair-check.c)?  Then EINVAL, said through msgfn as an
 * error; else 0.  Reads superblocks only; ls need not hold a log.
 */
int offline_behind_log (struct offline_logset *ls, const char *cache_name,
                        const struct offline_cache *cc, hhc_msg_fn msgfn);
/* Close the log (ls->log NULL after) ... */
void offline_logset_close_log (struct offline_logset *ls);
/* ... and the devices too. */
void offline_logset_close (struct offline_logset *ls);

/* Open the log on its mirrors' paths (recover: the volume the log
 * records; errors logged).
 */
int offline_log_open (const char *const *paths, unsigned n, hhc_msg_fn msgfn,
                      struct hhc_log **logp);
void offline_log_close (struct hhc_log *log);

/* What the log's superblock says (as the log holds it: the newest
 * valid copy of the mirrors, with the volume the log adopted; decoded
 * by the codec, log-format.h), and where replay reads from.
 */
struct offline_log_info {
  struct log_sb sb; /* UUIDs, volume, region, head hint */
  unsigned best;    /* the mirror replay reads from */
};
void offline_log_info (struct hhc_log *log, struct offline_log_info *info);

/* A segment as a mirror holds it: its header, decoded by the codec
 * (log-format.h: seq, base, flags LOG_F_*, checksum ...); off is where
 * the header is, in bytes from the start of the region; len header and
 * data.
 */
struct offline_seg {
  struct log_seg_hdr hdr;
  uint64_t off, len;
};

/* The chain that replay follows on one mirror (wrap markers are not
 * listed), and where it ends: the next segment, missing or bad.
 */
struct offline_chain {
  struct offline_seg *segs; /* n of them: offline_chain_free */
  size_t n;
  long last_barrier; /* index in segs, -1: none */
  uint64_t end_seq, end_off;
};
int offline_log_chain (struct hhc_log *log, unsigned mirror,
                       struct offline_chain *c);
void offline_chain_free (struct offline_chain *c);

/* The segment whose header would be at off in the region of a
 * mirror: 0 if it is a whole segment of this log; ENOENT if no
 * header of this log is there; EILSEQ if it is damaged (d filled from
 * its header); or an I/O errno.
 */
int offline_log_segment (struct hhc_log *log, unsigned mirror, uint64_t off,
                         struct offline_seg *d);

/* What one mirror holds beyond its chain.  A sweep of the whole
 * region finds the segments the chain does not reach; those of this
 * run or a later one (base >= the chain's) with a sequence number
 * from the chain's end on are "orphans": data replay cannot bring
 * back.
 */
struct offline_orphans {
  uint64_t n, first, last;
  uint64_t barriers, last_barrier;
  uint64_t damaged; /* damaged segments of this run after the end */
  int error;
};
void offline_log_sweep (struct hhc_log *log, unsigned mirror,
                        const struct offline_chain *c, uint64_t region,
                        struct offline_orphans *o);

/* Replay the log through write: n blocks of consecutive LBAs from lba
 * (n * block_size bytes at buf, adjacent blocks merged up to 1 MiB),
 * called by up to writers threads at once, never twice for one LBA and
 * never from the caller's thread; progress (may be NULL) is called now
 * and then from the caller's thread.  The backend is not flushed.  0
 * or errno.
 */
int offline_log_replay (struct hhc_log *log,
                        int (*write) (void *opaque, const void *buf,
                                      uint64_t lba, uint32_t n),
                        void (*progress) (void *opaque, uint64_t done,
                                          uint64_t total),
                        void *opaque, unsigned writers);
/* Blocks a replay would write (nothing is written; the log's info
 * message about a replay still goes to its hhc_msg_fn).
 */
int offline_log_count (struct hhc_log *log, uint64_t *n);

#endif /* HHC_OFFLINE_H */
