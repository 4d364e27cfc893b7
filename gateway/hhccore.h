/* HHC gateway core: public API.
 *
 * One handle (struct hhc_volume) per cached volume.  The core never
 * includes nbdkit headers: the caller hands it a backend (an ops table
 * plus an opaque context per call) and a message callback.
 *
 * Every function returns 0 on success or a positive errno value.
 * Messages go through conf->msgfn.
 */
#ifndef HHCCORE_H
#define HHCCORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Cache modes (docs/design.md §3).  HHC_MODE_HHC needs at least one
 * log device.
 */
enum hhc_mode {
  HHC_MODE_PT,      /* pass-through: no caching, writes invalidate */
  HHC_MODE_WT,      /* write-through: backend and cache written */
  HHC_MODE_WB,      /* write-back: cache written, backend later */
  HHC_MODE_WBFLUSH, /* write-back, FLUSH writes back everything */
  HHC_MODE_HHC,     /* write-back + HDD barrier log */
};

/* "pt", "wt", ... */
const char *hhc_mode_to_string (enum hhc_mode mode);
/* Parse a mode name; returns 0 or EINVAL. */
int hhc_mode_from_string (const char *s, enum hhc_mode *mode);

/* What to do with the cache device at open. */
enum hhc_format {
  HHC_FORMAT_AUTO,  /* format a blank device, load a valid one */
  HHC_FORMAT_FORCE, /* always format (discards what it holds) */
  HHC_FORMAT_NEVER, /* refuse a device that is not formatted */
};

const char *hhc_format_to_string (enum hhc_format f);
int hhc_format_from_string (const char *s, enum hhc_format *f);

/* Which read misses enter the cache (docs/design.md §4.8). */
enum hhc_promote_policy {
  HHC_PROMOTE_ALWAYS, /* every read miss */
  HHC_PROMOTE_NHIT,   /* a block's promote_hits-th miss in the window */
};

#define HHC_PROMOTE_MAX_HITS 255
#define HHC_PROMOTE_MAX_WINDOW 1000000000u

/* "always", "nhit" */
const char *hhc_promote_to_string (enum hhc_promote_policy p);
/* Parse a policy name; returns 0 or EINVAL. */
int hhc_promote_from_string (const char *s, enum hhc_promote_policy *p);

#define HHC_MAX_LOGS 8 /* log mirrors */

/* Levels of the message callback: messages for the operator (the HDD
 * log is another thing: struct hhc_log, log.h).
 */
enum hhc_msg_level {
  HHC_MSG_DEBUG,
  HHC_MSG_INFO,
  HHC_MSG_WARNING,
  HHC_MSG_ERROR
};

typedef void (*hhc_msg_fn) (enum hhc_msg_level level, const char *msg);

/* The backend below the cache.  Each call gets the context the caller
 * passes for it (the filter passes the connection's nbdkit_next, the
 * flusher its own background context).  Functions return 0 or a
 * positive errno.
 */
struct hhc_backend_ops {
  int (*pread) (void *ctx, void *buf, uint32_t count, uint64_t offset);
  int (*pwrite) (void *ctx, const void *buf, uint32_t count, uint64_t offset,
                 bool fua);
  int (*flush) (void *ctx);
  int (*trim) (void *ctx, uint32_t count, uint64_t offset); /* may be NULL */
  int (*zero) (void *ctx, uint32_t count, uint64_t offset); /* may be NULL */
};

/* Description of the backend, probed by the caller before hhc_open. */
struct hhc_backend_info {
  uint64_t size;            /* bytes */
  uint32_t preferred_block; /* 0 = unknown */
  uint32_t max_request;     /* 0 = no limit below 32 MiB */
  const char *identity;     /* stable id (export description); may be "" */
  bool can_trim;
  bool can_zero;
  bool can_fua;
  bool multi_conn; /* a flush on one context covers writes on others */
};

/* Configuration of one volume.  Fill with hhc_conf_init, then set. */
struct hhc_conf {
  const char *cache_path; /* required */
  uint64_t cache_size;    /* create a regular file this big if missing */
  enum hhc_mode mode;     /* default HHC_MODE_WB */
  uint32_t block_size;    /* default 4096 */
  unsigned dirty_low;     /* percent of slots, default 20 */
  unsigned dirty_high;    /* default 60 */
  unsigned dirty_max;     /* default 95 */
  unsigned hot_ratio;     /* hot:cold = hot_ratio:1, default 2 */
  enum hhc_format format; /* default auto */
  const char *backend_id; /* overrides the backend identity if set */
  /* Format a cache for a backend with no identity (no export
   * description, no backend_id): tied to its size alone, so that
   * another backend of that size could be given it.  false: refused.
   */
  bool allow_no_identity;
  /* log-lost=accept: start even though the last run's write-ahead log
   * (ssd-sync=checkpoint, stopped uncleanly) is blank or stale, without
   * its redo: what FLUSHes covered since the cache's last commit is
   * lost.  false: refused.
   */
  bool accept_log_loss;
  bool direct;            /* O_DIRECT on the cache device */
  const char *stats_path; /* JSON stats rewritten once a second */
  unsigned
      writeback_threads; /* writes in flight while writing back, default 4 */
  /* Write back at full speed after this long without a request; 0:
   * never (default 1000).
   */
  unsigned idle_ms;
  /* Sequential cutoff: a stream of sequential requests longer than
   * this many bytes bypasses the cache; 0 (default): off.
   */
  uint64_t seq_cutoff;
  /* The HDD log (mode hhc): one path per mirror (file, block device). */
  const char *log_paths[HHC_MAX_LOGS];
  unsigned nlogs;
  uint64_t log_size;     /* create missing log files this big */
  uint32_t segment_size; /* largest segment (bytes); 0: 1 to 4 MiB by
                          * the log's size (log.h) */
  unsigned log_buffers;  /* segment buffers; 0: 4 */
  unsigned log_inflight; /* barrier segments in flight (1..16); 0: the
                          * default (LOG_INFLIGHT_DEFAULT, log.h) */
  /* ssd-sync=checkpoint: the log is a write-ahead log, a FLUSH syncs
   * only the log (docs/log.md "Write-ahead").  false (ssd-sync=flush,
   * the default): a FLUSH also commits the SSD.
   */
  bool wal;
  /* Promotion of read misses: promote=nhit fills the cache with a
   * block at its promote_hits-th miss (1..255, default 2) among the
   * last promote_window misses (0, the default: as many as the cache
   * has slots).  Writes are cached as the mode says.
   */
  enum hhc_promote_policy promote; /* default always */
  unsigned promote_hits;
  uint64_t promote_window;
  hhc_msg_fn msgfn; /* required */
};

/* Set every field to its default. */
void hhc_conf_init (struct hhc_conf *conf);

/* Is mode a write-back mode (dirty blocks in the cache)? */
static inline bool
hhc_mode_is_wb (enum hhc_mode m)
{
  return m == HHC_MODE_WB || m == HHC_MODE_WBFLUSH || m == HHC_MODE_HHC;
}

struct hhc_volume;

/* Devices opened before the volume (hhc_preopen), kept until hhc_open
 * takes them over.  Opaque: the core's private preopen.h defines it.
 */
struct hhc_preopened;

/* Open and lock the cache device and the log devices now (before
 * nbdkit forks, so that a locked or missing device is reported at
 * once).  *prep is then given to hhc_open; until then they stay open
 * (also across a fork: a parent that exits must not close them).
 */
int hhc_preopen (const struct hhc_conf *conf, struct hhc_preopened **prep);

/* Whether a device path is an NBD URI (nbd://, nbd+unix://, nbds://,
 * ...), which the core opens through libnbd, rather than a file name.
 */
bool hhc_is_nbd_uri (const char *path);

/* Open (format or load) the cache for this backend.  Checks the cache
 * belongs to the backend, locks the device, rebuilds the index.  The
 * volume does no background work until hhc_start.  pre: hhc_preopen's
 * devices, which hhc_open takes over whether it succeeds or not; NULL:
 * open the paths of conf now.
 */
int hhc_open (const struct hhc_conf *conf, struct hhc_preopened *pre,
              const struct hhc_backend_ops *ops,
              const struct hhc_backend_info *info, struct hhc_volume **volp);

/* Start background threads (flusher, stats writer).  bctx is the
 * backend context they use; it must stay valid until hhc_close.  In
 * pt and wt modes this first writes back any dirty block left by an
 * earlier write-back run.
 */
int hhc_start (struct hhc_volume *vol, void *bctx);

/* Stop background threads, write metadata, mark the cache cleanly
 * closed.  Dirty blocks stay dirty (written back after the next open).
 */
int hhc_close (struct hhc_volume *vol);

/* Client I/O.  bctx is the caller's backend context for misses and
 * pass-down.  fua: the write is durable (as FLUSH) when this returns.
 */
int hhc_read (struct hhc_volume *vol, void *bctx, void *buf, uint32_t count,
              uint64_t offset);
int hhc_write (struct hhc_volume *vol, void *bctx, const void *buf,
               uint32_t count, uint64_t offset, bool fua);
int hhc_flush (struct hhc_volume *vol, void *bctx);
int hhc_trim (struct hhc_volume *vol, void *bctx, uint32_t count,
              uint64_t offset, bool fua);
int hhc_zero (struct hhc_volume *vol, void *bctx, uint32_t count,
              uint64_t offset, bool fua);
/* Does a backend flush have anything to make durable that only a
 * client's own context could?  False when every trim, zero and pt
 * write that went to the backend is covered by a completed backend
 * flush, and the backend has multi-conn (its flushes cover every
 * context).  wt writes are not counted: they are durable after the
 * client's FLUSH, which flushes the backend, as NBD asks; write-back
 * flushes the backend itself.
 */
bool hhc_backend_unflushed (struct hhc_volume *vol);
/* A backend flush that the caller makes itself (a connection's own
 * context at its close, when hhc_backend_unflushed): begin returns a
 * ticket, end takes it and the result (0 or errno).  As for the core's
 * own flushes, a failure makes every later FLUSH fail, and a FLUSH
 * waits for the end of one that began before its own ended.
 */
uint64_t hhc_backend_flush_begin (struct hhc_volume *vol);
void hhc_backend_flush_end (struct hhc_volume *vol, uint64_t ticket, int err);
/* NBD_CMD_CACHE: read the range into the cache. */
int hhc_prefetch (struct hhc_volume *vol, void *bctx, uint32_t count,
                  uint64_t offset);

/* Write back every dirty block and flush the backend (used by tests,
 * pt/wt start-up and drain).
 */
int hhc_drain (struct hhc_volume *vol, void *bctx);

/* Statistics as a malloc'd JSON string (caller frees). */
char *hhc_stats_json (struct hhc_volume *vol);

/* A few numbers for tests. */
struct hhc_counts {
  uint64_t slots, free, clean, dirty;
  uint64_t read_hits, read_misses, write_hits, write_misses;
  uint64_t read_fills;       /* blocks read misses put in the cache */
  uint64_t promote_bypassed; /* read misses nhit kept out of it */
  uint64_t evictions, writeback_blocks, writeback_errors;
  uint64_t flushes, flush_errors; /* FLUSHes; those that failed */
  /* The HDD log (zero without one). */
  uint64_t log_segments, log_barriers, log_syncs, log_blocks, log_revokes;
  uint64_t log_fua_barriers; /* barriers durable by FUA writes alone */
  uint64_t log_joins; /* FLUSHes that waited for a barrier not yet sealed */
  uint64_t log_relogged, log_reclaimed, log_full_waits, log_used, log_region;
  uint64_t log_segment_size;            /* the largest segment of this run */
  uint64_t log_checkpoints, log_redone; /* write-ahead (docs/design.md §5.8) */
  unsigned log_mirrors, log_mirrors_failed;
  unsigned log_mirrors_unvoided; /* failed, stale log not yet voided */
};
void hhc_get_counts (struct hhc_volume *vol, struct hhc_counts *c);

/* Bytes of RAM the index and LRU use per cache slot. */
double hhc_ram_per_block (struct hhc_volume *vol);

#ifdef __cplusplus
}
#endif

#endif /* HHCCORE_H */
