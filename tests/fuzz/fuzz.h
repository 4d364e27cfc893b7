/* Shared by the fuzz targets of tests/fuzz and by mkseeds, which
 * writes their seed corpora: the input formats, a memory device and
 * the helpers that make a mutated image pass its checksums.
 *
 * Input of fuzz-cache (the SSD cache device):
 *   byte 0     flags (FUZZ_CACHE_*)
 *   byte 1..   the device from offset 0 (superblock, state pages,
 *              metadata pages); the rest of the FUZZ_CACHE_DEV bytes
 *              of the device are zero
 *
 * Input of fuzz-log (an HDD log mirror):
 *   byte 0     flags (FUZZ_LOG_*)
 *   byte 1     cut: a second mirror holds the region only up to
 *              cut * 4 KiB (FUZZ_LOG_MIRROR2); its low bits also say
 *              the void mark's generation (FUZZ_LOG_MARK) and which
 *              part of the superblock area is unreadable
 *              (FUZZ_LOG_TORN)
 *   byte 2..   superblocks A and B (8 KiB), then the circular region
 *              from its start (device offset LOG_REGION_OFF): the
 *              56 KiB of nothing between them are not in the input
 *
 * Checksums: a mutated image almost never has a right crc32c, so the
 * flags ask the target to recompute them first (the code under test
 * still checks them: a flag left clear fuzzes the check itself).
 */
#ifndef HHC_FUZZ_H
#define HHC_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dev.h"
#include "hhccore.h"
#include "log-format.h"

#define FUZZ_CACHE_DEV (1024 * 1024) /* bytes of the cache device */
#define FUZZ_CACHE_FIX_SUPER 1u      /* recompute the superblock crc */
#define FUZZ_CACHE_FIX_STATE 2u      /* the state pages' crcs */
#define FUZZ_CACHE_FIX_PAGES 4u      /* the metadata pages' crcs */
#define FUZZ_CACHE_PT 8u             /* open in pt (else wb) */
#define FUZZ_CACHE_START 16u         /* hhc_start: pt writes back */

#define FUZZ_LOG_SB_BYTES 8192           /* superblocks in the input */
#define FUZZ_LOG_MIN_REGION (448 * 1024) /* region bytes at least */
#define FUZZ_LOG_SEGMENT 65536           /* segment-size of the log */
#define FUZZ_LOG_FIX_SUPER 1u            /* recompute superblock crcs */
#define FUZZ_LOG_FIX_SEGS 2u             /* segment crcs and links */
#define FUZZ_LOG_MIRROR2 4u              /* a second, cut-off mirror */
#define FUZZ_LOG_FILTER 8u               /* open as the filter does */
#define FUZZ_LOG_START 16u               /* then run: rebase, write */
/* A void mark at LOG_VOID_OFF, of copy A's UUIDs, its generation copy
 * A's + (cut & 3) - 1 (below, equal, above it).
 */
#define FUZZ_LOG_MARK 32u
/* One part of the superblock area unreadable (until a write covers
 * it): (cut >> 2) % 3 picks copy A, copy B or the void mark.
 */
#define FUZZ_LOG_TORN 64u

/* A device in memory: size bytes, zero but for what is loaded.  Its
 * memory is reused by the next one: fuzzdev_free zeroes what was
 * loaded or written, so a write through fuzzdev_mem of anything but
 * zeros must be told with fuzzdev_wrote.
 */
struct hhc_dev *fuzzdev_new (uint64_t size, const char *name);
/* Copy len bytes to off (what fits in the device). */
void fuzzdev_load (struct hhc_dev *d, uint64_t off, const void *buf,
                   size_t len);
/* The device's bytes, size of them. */
unsigned char *fuzzdev_mem (struct hhc_dev *d);
/* Bytes below end may have been written through fuzzdev_mem. */
void fuzzdev_wrote (struct hhc_dev *d, uint64_t end);
/* Bytes from the start that may not be zero (the rest are). */
uint64_t fuzzdev_used (struct hhc_dev *d);
/* Reads touching [off, +len) fail with EIO until a write touches it
 * (0: none).
 */
void fuzzdev_set_bad (struct hhc_dev *d, uint64_t off, uint64_t len);
/* Free the device (its memory is kept for the next one). */
void fuzzdev_free (struct hhc_dev *d);

/* Log messages to stderr if $FUZZ_VERBOSE is set, else drop them. */
void fuzz_log (enum hhc_msg_level level, const char *msg);

/* Recompute the checksums of a cache device image of len bytes (what
 * flags ask for).  Returns the offset past the last byte changed (0:
 * none), for fuzzdev_wrote.
 */
size_t fuzz_fix_cache (unsigned char *img, size_t len, unsigned flags);

/* Recompute the checksums of a log mirror image of len bytes: the
 * superblocks, and along the chain that a scan from the newest
 * superblock's head hint follows, each segment's link to its
 * predecessor and its crc.  Returns as fuzz_fix_cache.
 */
size_t fuzz_fix_log (unsigned char *img, size_t len, unsigned flags);

/* The superblock of a log image that read_sb () would choose (the
 * codec's log_sb_decode_mirror: the newer valid copy) into *sb: false
 * if none, or if a copy is void (the log takes the mirror for blank).
 */
bool fuzz_log_sb (const unsigned char *img, size_t len, struct log_sb *sb);

#endif /* HHC_FUZZ_H */
