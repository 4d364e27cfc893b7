/* The log's on-disk format: superblock and segment header codecs and
 * the segment checksum (the layout is in log-format.h).  Pure: no I/O,
 * no locks, no state.
 */
#include <config.h>

#include <errno.h>
#include <string.h>

#include "common.h"
#include "crc32c.h"
#include "log-format.h"

/* Superblock fields. */
#define SB_VERSION 8
#define SB_BLOCK_SIZE 12
#define SB_LOG_UUID 16
#define SB_CACHE_UUID 32
#define SB_VOLUME_SIZE 48
#define SB_REGION_SIZE 56
#define SB_SEGMENT_SIZE 64
#define SB_IDENTITY_LEN 68
#define SB_HEAD_OFF 72
#define SB_HEAD_SEQ 80
#define SB_GENERATION 88
#define SB_IDENTITY 96
#define SB_RETIRE_EPOCH 96 /* a void's */
#define SB_MIRRORS 4088
#define SB_CRC 4092

/* Segment header fields. */
#define SEG_SEQ 8
#define SEG_BASE 16
#define SEG_FLAGS 24
#define SEG_NBLOCKS 28
#define SEG_NREVOKES 32
#define SEG_HDR_LEN 36
#define SEG_ID 40
#define SEG_LOG_UUID 48
#define SEG_CACHE_UUID 64
#define SEG_CHECKSUM 80
#define SEG_PREV 84
#define SEG_CHECKSUM_HI 88

/* ---- superblock ---- */

void
log_sb_encode (const struct log_sb *sb, void *buf)
{
  unsigned char *p = buf;
  uint32_t idl = HHC_MIN (sb->identity_len, (uint32_t)LOG_IDENTITY_MAX);

  memset (p, 0, LOG_SB_SIZE);
  memcpy (p, LOG_MAGIC, 8);
  put32 (p + SB_VERSION, sb->version);
  put32 (p + SB_BLOCK_SIZE, sb->block_size);
  memcpy (p + SB_LOG_UUID, sb->log_uuid, 16);
  memcpy (p + SB_CACHE_UUID, sb->cache_uuid, 16);
  put64 (p + SB_VOLUME_SIZE, sb->volume_size);
  put64 (p + SB_REGION_SIZE, sb->region_size);
  put32 (p + SB_SEGMENT_SIZE, sb->segment_size);
  put32 (p + SB_IDENTITY_LEN, idl);
  put64 (p + SB_HEAD_OFF, sb->head_off);
  put64 (p + SB_HEAD_SEQ, sb->head_seq);
  put64 (p + SB_GENERATION, sb->generation);
  memcpy (p + SB_IDENTITY, sb->identity, idl);
  put32 (p + SB_MIRRORS, sb->mirrors);
  log_sb_seal (p);
}

void
log_sb_seal (void *buf)
{
  unsigned char *p = buf;

  put32 (p + SB_CRC, crc32c (0, p, SB_CRC));
}

void
log_sb_encode_void (const uint8_t log_uuid[16], const uint8_t cache_uuid[16],
                    uint64_t generation, void *buf)
{
  unsigned char *p = buf;

  memset (p, 0, LOG_SB_SIZE);
  memcpy (p, LOG_VOID_MAGIC, 8);
  put32 (p + SB_VERSION, LOG_VERSION);
  memcpy (p + SB_LOG_UUID, log_uuid, 16);
  memcpy (p + SB_CACHE_UUID, cache_uuid, 16);
  put64 (p + SB_GENERATION, generation);
  log_sb_seal (p);
}

void
log_sb_void_mirrors (void *buf, uint32_t mirrors)
{
  put32 ((unsigned char *)buf + SB_MIRRORS, mirrors);
  log_sb_seal (buf);
}

void
log_sb_void_epoch (void *buf, uint64_t epoch)
{
  put64 ((unsigned char *)buf + SB_RETIRE_EPOCH, epoch);
  log_sb_seal (buf);
}

int
log_sb_decode (const void *buf, struct log_sb *sb)
{
  const unsigned char *p = buf;
  bool crc_ok = crc32c (0, p, SB_CRC) == get32 (p + SB_CRC);

  memset (sb, 0, sizeof *sb);
  if (memcmp (p, LOG_VOID_MAGIC, 8) == 0)
    {
      if (!crc_ok)
        return ENOENT;
      sb->version = get32 (p + SB_VERSION);
      memcpy (sb->log_uuid, p + SB_LOG_UUID, 16);
      memcpy (sb->cache_uuid, p + SB_CACHE_UUID, 16);
      sb->generation = get64 (p + SB_GENERATION);
      sb->mirrors = get32 (p + SB_MIRRORS); /* 0: an earlier build's */
      sb->retire_epoch = get64 (p + SB_RETIRE_EPOCH);
      return ESTALE;
    }
  if (memcmp (p, LOG_MAGIC, 8) != 0)
    return ENOENT;
  sb->version = get32 (p + SB_VERSION);
  sb->block_size = get32 (p + SB_BLOCK_SIZE);
  memcpy (sb->log_uuid, p + SB_LOG_UUID, 16);
  memcpy (sb->cache_uuid, p + SB_CACHE_UUID, 16);
  sb->volume_size = get64 (p + SB_VOLUME_SIZE);
  sb->region_size = get64 (p + SB_REGION_SIZE);
  sb->segment_size = get32 (p + SB_SEGMENT_SIZE);
  sb->identity_len = get32 (p + SB_IDENTITY_LEN);
  sb->head_off = get64 (p + SB_HEAD_OFF);
  sb->head_seq = get64 (p + SB_HEAD_SEQ);
  sb->generation = get64 (p + SB_GENERATION);
  memcpy (sb->identity, p + SB_IDENTITY,
          HHC_MIN (sb->identity_len, (uint32_t)LOG_IDENTITY_MAX));
  sb->mirrors = get32 (p + SB_MIRRORS);
  if (!crc_ok || sb->version < LOG_VERSION_MIN || sb->version > LOG_VERSION)
    return EILSEQ;
  return 0;
}

enum log_sb_fault
log_sb_check (const struct log_sb *sb)
{
  if (sb->head_seq == 0 || sb->head_seq > LOG_MAX_SEQ)
    return LOG_SB_BAD_HEAD_SEQ;
  if (sb->region_size % LOG_ALIGN || sb->region_size > LOG_MAX_REGION
      || sb->head_off >= sb->region_size || sb->head_off % LOG_ALIGN)
    return LOG_SB_BAD_REGION;
  return LOG_SB_SOUND;
}

const char *
log_sb_fault_to_string (enum log_sb_fault f)
{
  switch (f)
    {
    case LOG_SB_SOUND:
      return "sound";
    case LOG_SB_BAD_HEAD_SEQ:
      return "bad head sequence";
    case LOG_SB_BAD_REGION:
      return "bad region or head";
    }
  return "?";
}

/* ---- segment header ---- */

uint64_t
log_seg_hdr_len (uint32_t nblocks, uint64_t nrevokes)
{
  return HHC_ROUND_UP (LOG_HDR_FIXED + 8 * ((uint64_t)nblocks + nrevokes),
                       LOG_ALIGN);
}

uint64_t
log_seg_data_len (uint32_t nblocks, uint32_t block_size)
{
  return HHC_ROUND_UP ((uint64_t)nblocks * block_size, LOG_ALIGN);
}

void
log_seg_encode_fixed (const struct log_seg_hdr *h, void *buf)
{
  unsigned char *p = buf;

  memset (p, 0, LOG_HDR_FIXED);
  memcpy (p, LOG_SEG_MAGIC, 8);
  put64 (p + SEG_SEQ, h->seq);
  put64 (p + SEG_BASE, h->base);
  put32 (p + SEG_FLAGS, h->flags);
  put32 (p + SEG_NBLOCKS, h->nblocks);
  put32 (p + SEG_NREVOKES, h->nrevokes);
  put32 (p + SEG_HDR_LEN, h->hdr_len);
  put64 (p + SEG_ID, h->seg_id);
  memcpy (p + SEG_LOG_UUID, h->log_uuid, 16);
  memcpy (p + SEG_CACHE_UUID, h->cache_uuid, 16);
  put32 (p + SEG_CHECKSUM, (uint32_t)h->checksum);
  put32 (p + SEG_PREV, h->prev_checksum);
  if (h->flags & LOG_F_XXH3)
    put32 (p + SEG_CHECKSUM_HI, (uint32_t)(h->checksum >> 32));
}

void
log_seg_encode (const struct log_seg_hdr *h, const uint64_t *lbas,
                const uint64_t *revokes, void *buf)
{
  unsigned char *p = buf;
  unsigned char *t = p + LOG_HDR_FIXED;

  memset (p, 0, h->hdr_len);
  log_seg_encode_fixed (h, p);
  for (uint32_t i = 0; i < h->nblocks; i++)
    put64 (t + 8 * (size_t)i, lbas[i]);
  t += 8 * (size_t)h->nblocks;
  for (uint32_t i = 0; i < h->nrevokes; i++)
    put64 (t + 8 * (size_t)i, revokes[i]);
}

void
log_seg_set_prev (void *hdr, uint32_t prev)
{
  put32 ((unsigned char *)hdr + SEG_PREV, prev);
}

int
log_seg_decode (const void *buf, struct log_seg_hdr *h)
{
  const unsigned char *p = buf;
  uint32_t hl;

  memset (h, 0, sizeof *h);
  if (memcmp (p, LOG_SEG_MAGIC, 8) != 0)
    return ENOENT;
  h->seq = get64 (p + SEG_SEQ);
  h->base = get64 (p + SEG_BASE);
  h->flags = get32 (p + SEG_FLAGS);
  h->nblocks = get32 (p + SEG_NBLOCKS);
  h->nrevokes = get32 (p + SEG_NREVOKES);
  h->hdr_len = hl = get32 (p + SEG_HDR_LEN);
  h->seg_id = get64 (p + SEG_ID);
  memcpy (h->log_uuid, p + SEG_LOG_UUID, 16);
  memcpy (h->cache_uuid, p + SEG_CACHE_UUID, 16);
  h->checksum = get32 (p + SEG_CHECKSUM);
  if (h->flags & LOG_F_XXH3)
    h->checksum |= (uint64_t)get32 (p + SEG_CHECKSUM_HI) << 32;
  h->prev_checksum = get32 (p + SEG_PREV);
  if (hl < LOG_ALIGN || hl % LOG_ALIGN
      || hl < log_seg_hdr_len (h->nblocks, h->nrevokes)
      || (h->flags & ~LOG_F_KNOWN) != 0)
    return EILSEQ;
  return 0;
}

bool
log_seg_fits (const struct log_seg_hdr *h, uint64_t phys, uint64_t region_size,
              uint32_t block_size)
{
  if (block_size == 0 || h->nblocks > region_size / block_size)
    return false;
  return phys + h->hdr_len + log_seg_data_len (h->nblocks, block_size)
         <= region_size;
}

uint64_t
log_seg_lba (const void *hdr, uint32_t i)
{
  return get64 ((const unsigned char *)hdr + LOG_HDR_FIXED + 8 * (size_t)i);
}

uint64_t
log_seg_revoke (const void *hdr, uint32_t nblocks, uint32_t i)
{
  return get64 ((const unsigned char *)hdr + LOG_HDR_FIXED
                + 8 * ((size_t)nblocks + i));
}

/* ---- segment checksum ----
 *
 * A segment's checksum must change when any of its blocks does.  A CRC
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
 *
 * Segments written now use XXH3-64 from libxxhash instead (LOG_F_XXH3):
 * a maintained hash, not linear either, all 64 bits recorded, and
 * faster than segsum.  segsum and crc32c stay to read the segments of
 * earlier builds: a log written by one replays after an upgrade.
 */

static uint64_t
segsum_add (uint64_t h, const void *p, size_t len)
{
  const unsigned char *b = p;

  for (size_t i = 0; i + 8 <= len; i += 8)
    {
      h ^= get64 (b + i) * UINT64_C (0xC2B2AE3D27D4EB4F);
      h = (h << 29 | h >> 35) * UINT64_C (0x165667B19E3779F9);
    }
  return h;
}

static uint32_t
segsum_final (uint64_t h)
{
  h ^= h >> 32;
  h *= UINT64_C (0xD6E8FEB86659FD93);
  h ^= h >> 32;
  return (uint32_t)h;
}

void
log_segck_init (struct log_segck *c, uint32_t flags)
{
  c->kind = flags & LOG_F_XXH3  ? LOG_CK_XXH3
            : flags & LOG_F_SUM ? LOG_CK_SUM
                                : LOG_CK_CRC32C;
  c->h = UINT64_C (0x9E3779B97F4A7C15);
  c->crc = 0;
  if (c->kind == LOG_CK_XXH3)
    XXH3_64bits_reset (&c->xxh);
}

void
log_segck_add (struct log_segck *c, const void *p, size_t len)
{
  switch (c->kind)
    {
    case LOG_CK_XXH3:
      XXH3_64bits_update (&c->xxh, p, len);
      break;
    case LOG_CK_SUM:
      c->h = segsum_add (c->h, p, len);
      break;
    case LOG_CK_CRC32C:
      c->crc = crc32c (c->crc, p, len);
      break;
    }
}

void
log_segck_add_header (struct log_segck *c, const void *hdr, size_t len)
{
  unsigned char fixed[LOG_HDR_FIXED];

  if (len < LOG_HDR_FIXED)
    {
      log_segck_add (c, hdr, len); /* not a header: as it is */
      return;
    }
  memcpy (fixed, hdr, LOG_HDR_FIXED);
  put32 (fixed + SEG_CHECKSUM, 0);
  if (c->kind == LOG_CK_XXH3)
    put32 (fixed + SEG_CHECKSUM_HI, 0);
  log_segck_add (c, fixed, LOG_HDR_FIXED);
  log_segck_add (c, (const unsigned char *)hdr + LOG_HDR_FIXED,
                 len - LOG_HDR_FIXED);
}

uint64_t
log_segck_final (const struct log_segck *c)
{
  switch (c->kind)
    {
    case LOG_CK_XXH3:
      return XXH3_64bits_digest (&c->xxh);
    case LOG_CK_SUM:
      return segsum_final (c->h);
    case LOG_CK_CRC32C:
      break;
    }
  return c->crc;
}

uint64_t
log_segment_checksum (uint32_t flags, const void *seg, size_t len)
{
  struct log_segck c;

  log_segck_init (&c, flags);
  log_segck_add (&c, seg, len);
  return log_segck_final (&c);
}

uint64_t
log_seg_checksum (const void *seg, size_t len)
{
  struct log_segck c;

  log_segck_init (&c, get32 ((const unsigned char *)seg + SEG_FLAGS));
  log_segck_add_header (&c, seg, len);
  return log_segck_final (&c);
}

uint64_t
log_seg_seal (void *hdr, const void *data, size_t data_len)
{
  unsigned char *p = hdr;
  struct log_segck c;
  uint64_t sum;

  log_segck_init (&c, get32 (p + SEG_FLAGS));
  log_segck_add_header (&c, p, get32 (p + SEG_HDR_LEN));
  log_segck_add (&c, data, data_len);
  sum = log_segck_final (&c);
  put32 (p + SEG_CHECKSUM, (uint32_t)sum);
  if (c.kind == LOG_CK_XXH3)
    put32 (p + SEG_CHECKSUM_HI, (uint32_t)(sum >> 32));
  return sum;
}

/* ---- a mirror's superblock (both copies and the void mark) ---- */

/* Does the void mark m (decoded: ESTALE) void the log copy best (-1:
 * no valid copy)?  Only a mark of the same log, written when that copy
 * or a newer one was current: a mark left by an earlier void is older
 * than the copies a mirror that joined again got since.
 */
static bool
mark_voids (const struct log_sb *m, const struct log_sb *best)
{
  return best == NULL
         || (memcmp (m->log_uuid, best->log_uuid, 16) == 0
             && m->generation >= best->generation);
}

int
log_sb_decode_mirror (const void *buf, unsigned unreadable, struct log_sb *sb)
{
  const unsigned char *p = buf;
  struct log_sb c[2], mark;
  bool magic = false, mark_ok = false;
  int best = -1;

  if (!(unreadable & LOG_SB_MARK))
    mark_ok = log_sb_decode (p + LOG_VOID_OFF, &mark) == ESTALE;
  for (int i = 0; i < 2; i++)
    {
      if (unreadable & (1u << i))
        continue;
      int r = log_sb_decode (p + i * LOG_SB_SIZE, &c[i]);
      if (r == ESTALE)
        {
          *sb = c[i];
          return ESTALE;
        }
      magic |= r != ENOENT;
      if (r == 0 && (best < 0 || c[i].generation > c[best].generation))
        best = i;
    }
  if (mark_ok && mark_voids (&mark, best < 0 ? NULL : &c[best]))
    {
      *sb = mark;
      return ESTALE;
    }
  if (best >= 0)
    {
      *sb = c[best];
      return 0;
    }
  memset (sb, 0, sizeof *sb);
  /* Neither copy readable: nothing to decide with.  One unreadable, the
   * other blank: the first superblock a format writes was torn (a
   * format writes both copies before the log is used).
   */
  if ((unreadable & LOG_SB_COPIES) == LOG_SB_COPIES)
    return EIO;
  return magic ? EILSEQ : ENOENT;
}
