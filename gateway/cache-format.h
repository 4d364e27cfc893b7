/* The SSD cache's on-disk format: pure encode and decode of the
 * superblock, the state page and the metadata pages (no I/O).  The
 * gateway (cache.c), hhcctl (through offline.h) and the fuzzers read
 * and write the device through these alone, so that all of them
 * accept exactly what the gateway accepts.
 *
 * Layout (offsets in bytes; cache.h says what the regions are for):
 *   0                superblock (4 KiB)
 *   4 KiB, 8 KiB     state page, copies A and B
 *   meta_off         metadata copy A: npages pages of 4 KiB
 *   meta_off + npages*4K   metadata copy B
 *   data_off         nslots data slots of block_size (aligned)
 *
 * Superblock (little-endian, 4 KiB):
 *   0   magic "HHCCACHE"        8   u32 version
 *   12  u32 block_size          16  uuid[16]
 *   32  log uuid[16] (zero: no log yet)
 *   48  u64 volume_size         56  u32 nslots
 *   60  u32 npages              64  u64 meta_off
 *   72  u64 data_off            80  u32 identity length
 *   84  identity (up to 2048 bytes)
 *   4092 u32 crc32c of bytes 0..4091
 *
 * State page (two copies, A at 4 KiB and B at 8 KiB; a write goes to
 * the older copy, the newer valid one counts):
 *   0 u32 magic "HHST"  4 u32 enum cache_state  8 u64 seq
 *   16 uuid[0..7]       24 u32 crc32c (computed with this field 0)
 *   28 u32 log link (enum cache_log_link)
 *   32 the paired log's UUID (16 bytes; 28..47 are 0 in pages of
 *      earlier builds)
 *   48 u64 the generation of the superblock that log's mirrors got at
 *      the start of the run (0 in pages of earlier builds: unknown): a
 *      mirror older than it was left out of a run (logpair_stale)
 *   56 u64 the newest epoch a start reserved for its mark, before any
 *      mirror could take it (logpair_reserve_epoch; 0: none)
 * Values of these two at or past CACHE_MAX_SEQ read as 0 (corrupt).
 *
 * Metadata page (little-endian):
 *   0 u32 magic "HHMP"  4 u32 page number  8 u64 commit seq
 *   16 uuid[0..7]       24 u32 crc32c (computed with this field 0)
 *   28 u32 reserved     32 entries: u64 (lba << 2 | state)
 *
 * Sequence numbers (commit and state) stay below CACHE_MAX_SEQ: a
 * page or state copy claiming more is invalid.
 */
#ifndef HHC_CACHE_FORMAT_H
#define HHC_CACHE_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CACHE_MAGIC "HHCCACHE"
#define CACHE_VERSION 2
#define CACHE_PAGE 4096
#define CACHE_PAGE_HDR 32
#define CACHE_EPP ((CACHE_PAGE - CACHE_PAGE_HDR) / 8) /* 508 */
#define CACHE_IDENTITY_MAX 2048
#define CACHE_MIN_SLOTS 16
#define CACHE_PAGE_MAGIC 0x504d4848u  /* "HHMP" */
#define CACHE_STATE_MAGIC 0x54534848u /* "HHST" */
#define CACHE_STATE_OFF CACHE_PAGE    /* two state pages after the superblock */
/* Commit and state sequences stay below this (2^62 commits take
 * millennia); a copy claiming more is corrupt: its successor's number
 * would wrap past 2^64 to "older than everything" and every later
 * commit would lose to it at load (found by fuzz-cache).
 */
#define CACHE_MAX_SEQ (UINT64_C (1) << 62)
/* A cache whose newest commit or state sequence (either copy) is at or
 * past this is refused at load: its next write would need a number
 * at or past CACHE_MAX_SEQ, which the codec rejects, so the older copy
 * would win and the write be lost (a state page at CACHE_MAX_SEQ - 1
 * undid "in use": found by fuzz-cache).  A run starts far below and no
 * run commits 2^61 times, so only a corrupt device is refused.
 */
#define CACHE_SEQ_LOAD_MAX (CACHE_MAX_SEQ / 2)

/* The state page: was the cache closed cleanly, and if not, can its
 * clean blocks be trusted?  A clean block is trusted when its data is
 * the backend's durable data.  In wb that always holds (clean blocks
 * are copied on write; a fill does not cache a block whose region had
 * a trim/zero not yet flushed on the backend).  In wt and pt it may
 * not: a crash can lose a backend write that the cache already holds.
 * So after an unclean stop in wt/pt the clean blocks are dropped;
 * dirty blocks are always kept.  read: the newer valid copy (none
 * valid: CACHE_IN_USE); write: over the older copy, then sync.
 */
enum cache_state {
  CACHE_IN_USE = 0,    /* open (or crashed): clean blocks untrusted */
  CACHE_CLOSED = 1,    /* closed cleanly: everything trusted */
  CACHE_IN_USE_WB = 2, /* open in wb: clean blocks trusted */
  /* Open in hhc: clean blocks trusted, and what FLUSHes covered since
   * the last checkpoint is in the log only (redo it at start).
   */
  CACHE_IN_USE_HHC = 3,
};
/* Does a log hold dirty blocks of this cache?  The state page records
 * it (read into c->log_link, written from it), so that a run in a mode
 * other than hhc, whose write-back the log would not see, can refuse
 * to start while a replay after the loss of the cache could still
 * write the log's older blocks over it (open.c retire_log).
 */
enum cache_log_link {
  CACHE_LOG_UNKNOWN = 0, /* state pages of earlier builds: log_uuid tells */
  CACHE_LOG_PAIRED = 1,  /* used in mode hhc: its log may be replayed */
  CACHE_LOG_RETIRED = 2, /* its log was voided: no log may be replayed */
  /* A new cache paired with a log whose replay into the backend has
   * not finished (no run of the cache recorded yet): that log, and no
   * other, is replayed first.  Read as paired by earlier builds.
   */
  CACHE_LOG_REPLAYING = 3,
};

/* ---- geometry ---- */

/* Where the metadata and the data slots of nslots slots go: fills
 * npages and meta_off, returns data_off.
 */
uint64_t cache_layout (uint32_t nslots, uint32_t block_size, uint32_t *npages,
                       uint64_t *meta_off);

/* Geometry for a device: fills nslots, npages, offsets; ENOSPC if the
 * device is too small for CACHE_MIN_SLOTS slots.
 */
int cache_geometry (uint64_t dev_size, uint32_t block_size,
                    uint64_t volume_size, uint32_t *nslots, uint32_t *npages,
                    uint64_t *meta_off, uint64_t *data_off);

/* Byte offset of copy (0: A, 1: B) of metadata page p. */
static inline uint64_t
cache_page_offset (uint64_t meta_off, uint32_t npages, uint32_t p, int copy)
{
  return meta_off + ((uint64_t)copy * npages + p) * CACHE_PAGE;
}

/* ---- superblock ---- */

struct cache_super {
  bool magic_ok; /* the magic is there (else: no cache on the device) */
  bool crc_ok;
  uint32_t version;
  uint32_t block_size;
  uint8_t uuid[16];
  uint8_t log_uuid[16]; /* zero: none */
  uint64_t volume_size;
  uint32_t nslots;
  uint32_t npages;
  uint64_t meta_off, data_off;
  uint32_t identity_len; /* as recorded (may exceed CACHE_IDENTITY_MAX) */
  char identity[CACHE_IDENTITY_MAX + 1]; /* at most CACHE_IDENTITY_MAX
                                          * bytes of it, terminated */
};

/* What is wrong with a superblock, in the order the gateway checks. */
enum cache_super_fault {
  CACHE_SUPER_OK = 0,
  CACHE_SUPER_NO_MAGIC, /* the device holds no cache */
  CACHE_SUPER_BAD_CRC,  /* corrupt (bad checksum) */
  CACHE_SUPER_VERSION,  /* another version of the format */
  CACHE_SUPER_GEOMETRY, /* impossible geometry, or the device shrank */
};

/* Decode a superblock (CACHE_PAGE bytes), whatever it holds. */
void cache_super_decode (const void *buf, struct cache_super *sb);
/* Check a decoded superblock as the gateway does, on a device of
 * dev_size bytes.
 */
enum cache_super_fault cache_super_check (const struct cache_super *sb,
                                          uint64_t dev_size);
/* Encode sb (version, magic and crc are set; identity_len bytes of
 * identity, at most CACHE_IDENTITY_MAX) into buf (CACHE_PAGE bytes).
 */
void cache_super_encode (const struct cache_super *sb, void *buf);
/* Compute and store a superblock's crc (the fuzzers' fix-up). */
void cache_super_seal (void *buf);

/* ---- state page ---- */

struct cache_state_page {
  uint32_t state;    /* enum cache_state */
  uint64_t seq;      /* below CACHE_MAX_SEQ */
  uint8_t uuid8[8];  /* the first 8 bytes of the cache UUID */
  uint32_t log_link; /* enum cache_log_link */
  uint8_t linked_log[16];
  uint64_t log_gen;   /* linked_log's superblock generation, 0: unknown */
  uint64_t log_epoch; /* the newest epoch a start reserved (0: none) */
};

/* Encode sp into buf (CACHE_PAGE bytes, crc set). */
void cache_state_encode (const struct cache_state_page *sp, void *buf);
/* Decode one copy: true if it is a valid state page of the cache
 * whose UUID is uuid (magic, UUID, crc, seq below CACHE_MAX_SEQ).  An
 * unknown state reads as CACHE_IN_USE, an unknown link as
 * CACHE_LOG_PAIRED (the safe sides).
 */
bool cache_state_decode (const void *buf, const uint8_t uuid[16],
                         struct cache_state_page *sp);

/* ---- metadata pages ---- */

/* Start page p (CACHE_PAGE bytes at buf): all entries free, header
 * for commit seq of the cache whose UUID is uuid.  Seal it after the
 * entries are set.
 */
void cache_page_init (void *buf, uint32_t p, uint64_t seq,
                      const uint8_t uuid[16]);
/* Compute and store the crc of a metadata page (or of a state page:
 * the field is at the same place).
 */
void cache_page_seal (void *buf);
/* The commit sequence of a valid copy of page p of the cache whose
 * UUID is uuid, 0 if it is not valid (magic, page number, UUID, crc,
 * seq below CACHE_MAX_SEQ).
 */
uint64_t cache_page_check (const void *buf, uint32_t p, const uint8_t uuid[16]);

/* Entry i of a page: state (enum slot_state, 0: free) and LBA. */
void cache_page_get (const void *buf, uint32_t i, uint64_t *lba,
                     unsigned *state);
void cache_page_set (void *buf, uint32_t i, uint64_t lba, unsigned state);

#endif /* HHC_CACHE_FORMAT_H */
