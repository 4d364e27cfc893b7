/* The on-disk format of the HDD barrier log, as a pure codec: the log
 * superblock (and the void superblock that replaces it when a mirror
 * falls out of use), the segment header, and the segment checksum.
 * No I/O, no locks, no state: bytes in, structs with named fields out,
 * and back.  Whatever reads or writes the format uses it: the log
 * (log-*.c), the fuzzers (tests/fuzz/), the tests, and hhcctl
 * (through gateway/offline.h).  It needs only the C library (and log-format.c, the core's
 * common.h and crc32c.c).
 *
 * Layout of every mirror (identical on each; all fields little-endian):
 *   0, 4 KiB     superblock, copies A and B (the newer valid one counts;
 *                a write goes over the mirror's other copy)
 *   8 KiB        the void mark (LOG_VOID_OFF): a void superblock written
 *                and synced before a void rewrites A and B, and by
 *                nothing else, so a torn void is told from a torn
 *                update (log_sb_decode_mirror); zeroed by a format
 *   64 KiB       the circular region (LOG_REGION_OFF): packed segments,
 *                each 4 KiB aligned
 *
 * Superblock (LOG_SB_SIZE bytes):
 *   0   magic "HHCLOG01"      8  u32 version      12 u32 block_size
 *   16  log uuid[16]          32 cache uuid[16]   48 u64 volume_size
 *   56  u64 region_size       64 u32 segment_size 68 u32 identity length
 *   72  u64 head offset (in the region)           80 u64 head seq
 *   88  u64 generation        96 identity (up to LOG_IDENTITY_MAX bytes)
 *   4088 u32 mirrors of the run that wrote it (0: an earlier build)
 *   4092 u32 crc32c of bytes 0..4091
 *
 * Void superblock (a mirror that fell out of use: nothing on it may be
 * replayed; it reads as blank):
 *   0   magic "HHCVOID1"      8  u32 version (LOG_VERSION)
 *   16  log uuid[16]          32 cache uuid[16]
 *   88  u64 generation: the newest superblock generation it voids (0
 *       in an earlier build's)
 *   96  u64 retirement epoch: a retirement's void, the epoch the
 *       retiring start reserved in its cache first (0: a failed
 *       mirror's void, or an earlier build's)
 *   4088 u32 mirrors of the log (0: an earlier build's)  (the rest 0)
 *   4092 u32 crc32c of bytes 0..4091
 *
 * Segment header (a LOG_ALIGN multiple):
 *   0   magic "HHCSEG01"      8  u64 seq          16 u64 base seq
 *   24  u32 flags             28 u32 block count  32 u32 revoke count
 *   36  u32 header length     40 u64 segment id (offset in region / 4K)
 *   48  log uuid[16]          64 cache uuid[16]   80 u32 checksum (over
 *   the header with this field 0, then the data blocks: see
 *   log_segck_init; with LOG_F_XXH3 the low half of the XXH3-64)
 *   84  u32 checksum of the previous segment (the chain link: its
 *   32 bits at 80)
 *   88  u32 with LOG_F_XXH3 the high half of the XXH3-64 (taken as 0
 *   in the checksum, as 80 is), else 0
 *   96  u64 LBA[block count], then u64 revoked LBA[revoke count]
 * Data: block count blocks, then padding to LOG_ALIGN.  A segment that
 * does not fit before the end of the region is preceded by a wrap
 * marker (a header of LOG_ALIGN bytes with the same sequence number,
 * the flag LOG_F_WRAP and no blocks) and written at the start.
 */
#ifndef HHC_LOG_FORMAT_H
#define HHC_LOG_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#define LOG_MAGIC "HHCLOG01"
#define LOG_VOID_MAGIC "HHCVOID1"
#define LOG_SEG_MAGIC "HHCSEG01"
/* The superblock's version: what this build writes, and the oldest it
 * reads.  2: segments may be checksummed with XXH3 (LOG_F_XXH3), which
 * a build that writes 1 cannot read (its scan would stop at the first
 * such segment, silently, and it would then write over the log), so it
 * refuses a superblock of 2 as corrupt instead.  A log of 1 is
 * rewritten as 2 by log_start before its first segment.  A format
 * change that an earlier build would misread bumps the version.
 */
#define LOG_VERSION 2
#define LOG_VERSION_MIN 1
#define LOG_SB_SIZE 4096     /* one superblock copy; B is at LOG_SB_SIZE */
#define LOG_VOID_OFF 8192    /* the void mark */
#define LOG_SB_AREA 12288    /* copies A, B and the void mark */
#define LOG_ALIGN 4096       /* segments and headers: multiples of this */
#define LOG_REGION_OFF 65536 /* where the circular region starts */
#define LOG_HDR_FIXED 96     /* segment header before the LBA table */
#define LOG_IDENTITY_MAX 2048
/* Sequence numbers start at 1 and stay below this. */
#define LOG_MAX_SEQ (UINT64_C (1) << 62)
/* The largest region used (the ring has a slot per LOG_ALIGN bytes of
 * it and counts them in 32 bits); a bigger device is used only up to
 * it.
 */
#define LOG_MAX_REGION (UINT64_C (1) << 43)

/* Segment header flags. */
#define LOG_F_BARRIER 1u
#define LOG_F_WRAP 2u
/* The segment's checksum (and so the next one's chain link) is the
 * 64-bit multiply-rotate sum segsum (log-format.c), folded to 32 bits;
 * without it or LOG_F_XXH3 crc32c, as segments of the first builds were
 * written.  Segments of earlier builds have it.
 */
#define LOG_F_SUM 4u
/* The segment's checksum is XXH3-64 (libxxhash), all 64 bits recorded
 * (80 and 88).  Every segment written now has it (and not LOG_F_SUM).
 */
#define LOG_F_XXH3 8u
/* Every flag this build knows: a header with another is not a segment
 * it can read (a newer format bumps LOG_VERSION as well).
 */
#define LOG_F_KNOWN (LOG_F_BARRIER | LOG_F_WRAP | LOG_F_SUM | LOG_F_XXH3)

/* ---- superblock ---- */

/* A superblock, decoded.  A void one has only version, the UUIDs and
 * the generation.
 */
struct log_sb {
  uint32_t version;    /* LOG_VERSION in a valid one; encoded as is */
  uint32_t block_size; /* of the volume */
  uint8_t log_uuid[16];
  uint8_t cache_uuid[16]; /* the cache the log is paired with */
  uint64_t volume_size;
  uint64_t region_size;  /* bytes of the region used */
  uint32_t segment_size; /* data bytes per segment of the run */
  uint64_t head_off;     /* head hint: offset in the region */
  uint64_t head_seq;     /* head hint: its sequence number */
  uint64_t generation;   /* the newer copy counts */
  uint32_t identity_len; /* as recorded (a corrupt one may exceed
                           * LOG_IDENTITY_MAX) */
  /* The backend identity: its first identity_len bytes (at most
   * LOG_IDENTITY_MAX), then a NUL.  It may hold NULs of its own.
   */
  char identity[LOG_IDENTITY_MAX + 1];
  uint32_t mirrors; /* of the run that wrote it (0: an earlier build) */
  /* A void's: the epoch its retirement reserved in the cache (0: none,
   * or an earlier build's): a copy of the cache older than the
   * retirement is told by it (log_survey).
   */
  uint64_t retire_epoch;
};

/* Encode sb into buf (LOG_SB_SIZE bytes), checksum included; at most
 * LOG_IDENTITY_MAX bytes of the identity are written.
 */
void log_sb_encode (const struct log_sb *sb, void *buf);

/* Encode the void superblock of the log log_uuid (paired with the cache
 * cache_uuid) into buf (LOG_SB_SIZE bytes); generation: the newest
 * superblock generation the mirror may hold.
 */
void log_sb_encode_void (const uint8_t log_uuid[16],
                         const uint8_t cache_uuid[16], uint64_t generation,
                         void *buf);
/* The count of mirrors the log had, into a void superblock encoded in
 * buf (resealed): a retirement given only void mirrors then knows
 * whether one is missing (check_retire).
 */
void log_sb_void_mirrors (void *buf, uint32_t mirrors);
/* The retirement's epoch, into a void superblock encoded in buf
 * (resealed).
 */
void log_sb_void_epoch (void *buf, uint64_t epoch);

/* Decode the superblock copy in buf (LOG_SB_SIZE bytes) into *sb.
 * Returns 0: a valid log superblock (magic, checksum and version
 * right); ESTALE: a valid void superblock (*sb has its version and
 * UUIDs); EILSEQ: the log's magic, but the checksum or the version is
 * wrong (*sb filled from the bytes all the same); ENOENT: neither
 * magic, or a void superblock whose checksum is wrong (a torn void
 * write: the other copy decides).  The fields are not checked against
 * each other: see log_sb_check.
 */
int log_sb_decode (const void *buf, struct log_sb *sb);

/* Store the checksum of the superblock copy in buf (LOG_SB_SIZE bytes)
 * over its bytes as they are: a copy edited in place becomes valid
 * (the fuzzers' fix-ups).
 */
void log_sb_seal (void *buf);

/* What log_sb_check found wrong in a valid superblock. */
enum log_sb_fault {
  LOG_SB_SOUND,        /* nothing */
  LOG_SB_BAD_HEAD_SEQ, /* head_seq 0 or beyond LOG_MAX_SEQ */
  LOG_SB_BAD_REGION,   /* region not aligned or beyond LOG_MAX_REGION,
                        * or the head outside it or not aligned */
};

/* Are the head and the region of a valid superblock possible?  No
 * build writes one that is not: such a superblock is corrupt (with a
 * head sequence 0 every barrier of the next run would count as
 * durable at once; a region near 2^64 wraps the sums made with it).
 */
enum log_sb_fault log_sb_check (const struct log_sb *sb);
const char *log_sb_fault_to_string (enum log_sb_fault f);

/* ---- segment header ---- */

struct log_seg_hdr {
  uint64_t seq;
  uint64_t base;  /* base sequence: where a replay through it starts */
  uint32_t flags; /* LOG_F_* */
  uint32_t nblocks, nrevokes;
  uint32_t hdr_len; /* bytes of header: a LOG_ALIGN multiple */
  uint64_t seg_id;  /* its offset in the region / LOG_ALIGN */
  uint8_t log_uuid[16];
  uint8_t cache_uuid[16];
  /* Of the segment (these fields taken as 0): 64 bits with LOG_F_XXH3
   * (80 and 88), else the 32 at 80.
   */
  uint64_t checksum;
  uint32_t prev_checksum; /* the chain link: the previous one's at 80 */
};

/* Bytes of the header of a segment with these counts (LOG_ALIGN
 * multiple).  64 bits: a header's counts are read from disk, and a
 * 32-bit length would wrap for ~2^29 revokes (fuzz-log).
 */
uint64_t log_seg_hdr_len (uint32_t nblocks, uint64_t nrevokes);

/* Bytes the data of nblocks blocks take on disk (LOG_ALIGN multiple). */
uint64_t log_seg_data_len (uint32_t nblocks, uint32_t block_size);

/* Encode h and its tables (lbas[h->nblocks], revokes[h->nrevokes]) into
 * buf, h->hdr_len bytes (the padding zero).  h->hdr_len must hold them.
 * The checksum field is written as h->checksum: log_seg_seal computes
 * it.
 */
void log_seg_encode (const struct log_seg_hdr *h, const uint64_t *lbas,
                     const uint64_t *revokes, void *buf);

/* Encode only the fixed part of h (LOG_HDR_FIXED bytes) over buf: to
 * change fields of a header in place (its tables stay).
 */
void log_seg_encode_fixed (const struct log_seg_hdr *h, void *buf);

/* Store prev as the chain link of the encoded header hdr, in place (its
 * checksum is not updated: log_seg_seal).
 */
void log_seg_set_prev (void *hdr, uint32_t prev);

/* Decode the header in buf (at least LOG_HDR_FIXED bytes) into *h.
 * Returns 0; ENOENT: not a segment header (magic); EILSEQ: the header
 * length is impossible for its counts, or a flag is not one of
 * LOG_F_KNOWN (*h filled all the same).  Where
 * the segment is and which log it is of is the caller's to check
 * (seq, seg_id, log_uuid), and whether it fits: log_seg_fits.
 */
int log_seg_decode (const void *buf, struct log_seg_hdr *h);

/* Does the segment of h, its header at phys in a region of
 * region_size bytes, lie within the region (header and data, blocks of
 * block_size bytes)?
 */
bool log_seg_fits (const struct log_seg_hdr *h, uint64_t phys,
                   uint64_t region_size, uint32_t block_size);

/* Entry i of the LBA table of the encoded header hdr (i < nblocks; the
 * caller has hdr_len bytes of it).
 */
uint64_t log_seg_lba (const void *hdr, uint32_t i);

/* Entry i of the revoke table of the encoded header hdr, whose block
 * count is nblocks (i < its revoke count).
 */
uint64_t log_seg_revoke (const void *hdr, uint32_t nblocks, uint32_t i);

/* ---- segment checksum ---- */

/* A segment's checksum, fed in pieces: the header first (LOG_ALIGN
 * bytes at least, or all of it), then the rest of the header and the
 * data.  Lengths are multiples of 8.  The fields are private.
 */
enum log_segck_kind { LOG_CK_CRC32C, LOG_CK_SUM, LOG_CK_XXH3 };
struct log_segck {
  enum log_segck_kind kind;
  uint64_t h; /* segsum state */
  uint32_t crc;
  XXH3_state_t xxh; /* XXH3's state (on the stack: no allocation) */
};

/* Start the checksum of a segment whose header has flags FLAGS: the
 * one place that picks the algorithm from them (LOG_F_XXH3: XXH3-64,
 * LOG_F_SUM: segsum, else crc32c).
 */
void log_segck_init (struct log_segck *c, uint32_t flags);
/* Add the start of the segment, len >= LOG_HDR_FIXED bytes of its
 * header, its checksum field taken as 0 (hdr is not changed).
 */
void log_segck_add_header (struct log_segck *c, const void *hdr, size_t len);
/* Add the next len bytes. */
void log_segck_add (struct log_segck *c, const void *p, size_t len);
/* The checksum: 64 bits with LOG_F_XXH3, else 32. */
uint64_t log_segck_final (const struct log_segck *c);

/* The chain link the next segment records for a segment whose checksum
 * is sum (the 32 bits at 80).
 */
static inline uint32_t
log_seg_link (uint64_t sum)
{
  return (uint32_t)sum;
}

/* The checksum of a segment (header with its checksum field 0, then
 * its data: LEN bytes, a multiple of 8) whose header flags are FLAGS.
 */
uint64_t log_segment_checksum (uint32_t flags, const void *seg, size_t len);

/* The checksum the segment seg (its header and data, len bytes) should
 * record: by the flags its header has, its checksum field taken as 0.
 */
uint64_t log_seg_checksum (const void *seg, size_t len);

/* Compute the checksum of the segment whose encoded header is hdr and
 * whose data is data (data_len bytes: its blocks, unpadded), store it
 * in the header's checksum field(s) and return it.
 */
uint64_t log_seg_seal (void *hdr, const void *data, size_t data_len);

/* ---- a mirror's superblock (both copies) ---- */

/* Parts of a mirror's superblock area that could not be read. */
#define LOG_SB_COPY_A 1u
#define LOG_SB_COPY_B 2u
#define LOG_SB_COPIES 3u
#define LOG_SB_MARK 4u

/* Decode the superblock a mirror holds, its superblock area in buf
 * (LOG_SB_AREA bytes: both copies and the void mark), the parts in
 * unreadable (LOG_SB_* bits) taken as unknown, as the log reads it:
 *   - a valid void copy wins (only voiding writes one, and a crash in
 *     the middle of it may have left the other copy valid);
 *   - a valid void mark wins over the newer valid copy of the same log
 *     whose generation is not above the mark's, or over no valid copy:
 *     a void writes its mark and syncs before it touches a copy, so a
 *     void that tore the copies (one unreadable, the other still the
 *     old log) is told from a torn update, which leaves no mark newer
 *     than the other copy;
 *   - else the newer valid copy counts.
 * Returns 0: a log (*sb the newer valid copy); ESTALE: void (*sb the
 * void copy or mark: version, UUIDs, generation); ENOENT: blank (no
 * readable copy has the log's magic, or only a torn void one; a copy
 * unreadable next to a blank one is a format's first write, torn);
 * EILSEQ: corrupt (a copy has the log's magic, none is valid); EIO:
 * neither copy readable and no mark.  *sb is zeroed for ENOENT, EILSEQ
 * and EIO.  A void or blank mirror is used as a blank device.
 */
int log_sb_decode_mirror (const void *buf, unsigned unreadable,
                          struct log_sb *sb);

#endif /* HHC_LOG_FORMAT_H */
