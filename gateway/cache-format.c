/* The SSD cache's on-disk format: encode, decode and check of the
 * superblock, state page and metadata pages (cache-format.h has the
 * layouts).  No I/O and no state: every caller that reads a cache
 * device, the gateway, hhcctl and the fuzzers, decides validity here.
 */
#include <config.h>

#include "cache-format.h"
#include "common.h"
#include "crc32c.h"
#include "index.h"

#define CRC_AT 24 /* the crc of state and metadata pages */

/* crc32c of a page with its crc field taken as 0. */
static uint32_t
page_crc (const unsigned char *pg)
{
  static const unsigned char zero[4];
  uint32_t crc = crc32c (0, pg, CRC_AT);

  crc = crc32c (crc, zero, 4);
  return crc32c (crc, pg + CRC_AT + 4, CACHE_PAGE - CRC_AT - 4);
}

/* ---- geometry ---- */

uint64_t
cache_layout (uint32_t nslots, uint32_t block_size, uint32_t *npages,
              uint64_t *meta_off)
{
  uint32_t np = (nslots + CACHE_EPP - 1) / CACHE_EPP;
  uint64_t align = HHC_MAX (block_size, CACHE_PAGE);

  *npages = np;
  *meta_off = 3 * CACHE_PAGE;
  return HHC_ROUND_UP (*meta_off + 2 * (uint64_t)np * CACHE_PAGE, align);
}

int
cache_geometry (uint64_t dev_size, uint32_t block_size, uint64_t volume_size,
                uint32_t *nslots, uint32_t *npages, uint64_t *meta_off,
                uint64_t *data_off)
{
  uint64_t vblocks = (volume_size + block_size - 1) / block_size;
  uint64_t n;

  if (dev_size <= CACHE_PAGE)
    return ENOSPC;
  /* Each slot costs its block plus 16 bytes of metadata (two copies). */
  n = (dev_size - CACHE_PAGE) / (block_size + 16);
  n = HHC_MIN (n, (uint64_t)HHC_MAX_SLOTS);
  n = HHC_MIN (n, HHC_MAX (vblocks, (uint64_t)CACHE_MIN_SLOTS));
  while (n >= CACHE_MIN_SLOTS)
    {
      uint64_t d = cache_layout (n, block_size, npages, meta_off);
      if (d + n * block_size <= dev_size)
        {
          *nslots = n;
          *data_off = d;
          return 0;
        }
      n--;
    }
  return ENOSPC;
}

/* ---- superblock ---- */

void
cache_super_decode (const void *buf, struct cache_super *sb)
{
  const unsigned char *p = buf;
  uint32_t idl;

  sb->magic_ok = memcmp (p, CACHE_MAGIC, 8) == 0;
  sb->crc_ok = crc32c (0, p, 4092) == get32 (p + 4092);
  sb->version = get32 (p + 8);
  sb->block_size = get32 (p + 12);
  memcpy (sb->uuid, p + 16, 16);
  memcpy (sb->log_uuid, p + 32, 16);
  sb->volume_size = get64 (p + 48);
  sb->nslots = get32 (p + 56);
  sb->npages = get32 (p + 60);
  sb->meta_off = get64 (p + 64);
  sb->data_off = get64 (p + 72);
  sb->identity_len = get32 (p + 80);
  idl = HHC_MIN (sb->identity_len, (uint32_t)CACHE_IDENTITY_MAX);
  memcpy (sb->identity, p + 84, idl);
  sb->identity[idl] = '\0';
}

enum cache_super_fault
cache_super_check (const struct cache_super *sb, uint64_t dev_size)
{
  uint32_t np;
  uint64_t mo, dof;

  if (!sb->magic_ok)
    return CACHE_SUPER_NO_MAGIC;
  if (!sb->crc_ok)
    return CACHE_SUPER_BAD_CRC;
  if (sb->version != CACHE_VERSION)
    return CACHE_SUPER_VERSION;
  dof = cache_layout (sb->nslots, HHC_MAX (sb->block_size, 1), &np, &mo);
  if (!HHC_IS_POW2 (sb->block_size) || sb->block_size < 512
      || sb->block_size > 1048576 || sb->nslots < CACHE_MIN_SLOTS
      || sb->nslots > HHC_MAX_SLOTS || np != sb->npages || mo != sb->meta_off
      || dof != sb->data_off || sb->identity_len > CACHE_IDENTITY_MAX
      || sb->data_off + (uint64_t)sb->nslots * sb->block_size > dev_size)
    return CACHE_SUPER_GEOMETRY;
  return CACHE_SUPER_OK;
}

void
cache_super_encode (const struct cache_super *sb, void *buf)
{
  unsigned char *p = buf;
  uint32_t idl = HHC_MIN (sb->identity_len, (uint32_t)CACHE_IDENTITY_MAX);

  memset (p, 0, CACHE_PAGE);
  memcpy (p, CACHE_MAGIC, 8);
  put32 (p + 8, CACHE_VERSION);
  put32 (p + 12, sb->block_size);
  memcpy (p + 16, sb->uuid, 16);
  memcpy (p + 32, sb->log_uuid, 16);
  put64 (p + 48, sb->volume_size);
  put32 (p + 56, sb->nslots);
  put32 (p + 60, sb->npages);
  put64 (p + 64, sb->meta_off);
  put64 (p + 72, sb->data_off);
  put32 (p + 80, idl);
  memcpy (p + 84, sb->identity, idl);
  cache_super_seal (p);
}

void
cache_super_seal (void *buf)
{
  unsigned char *p = buf;

  put32 (p + 4092, crc32c (0, p, 4092));
}

/* ---- state page ---- */

void
cache_state_encode (const struct cache_state_page *sp, void *buf)
{
  unsigned char *pg = buf;

  memset (pg, 0, CACHE_PAGE);
  put32 (pg, CACHE_STATE_MAGIC);
  put32 (pg + 4, sp->state);
  put64 (pg + 8, sp->seq);
  memcpy (pg + 16, sp->uuid8, 8);
  put32 (pg + 28, sp->log_link);
  memcpy (pg + 32, sp->linked_log, 16);
  put64 (pg + 48, sp->log_gen);
  put64 (pg + 56, sp->log_epoch);
  put32 (pg + CRC_AT, page_crc (pg));
}

bool
cache_state_decode (const void *buf, const uint8_t uuid[16],
                    struct cache_state_page *sp)
{
  const unsigned char *pg = buf;

  if (get32 (pg) != CACHE_STATE_MAGIC || memcmp (pg + 16, uuid, 8) != 0
      || page_crc (pg) != get32 (pg + CRC_AT)
      || get64 (pg + 8) >= CACHE_MAX_SEQ)
    return false;
  sp->seq = get64 (pg + 8);
  sp->state = get32 (pg + 4);
  if (sp->state > CACHE_IN_USE_HHC)
    sp->state = CACHE_IN_USE; /* unknown: the safe side */
  memcpy (sp->uuid8, pg + 16, 8);
  sp->log_link = get32 (pg + 28);
  if (sp->log_link > CACHE_LOG_REPLAYING)
    sp->log_link = CACHE_LOG_PAIRED; /* unknown: the safe side */
  memcpy (sp->linked_log, pg + 32, 16);
  sp->log_gen = get64 (pg + 48);
  sp->log_epoch = get64 (pg + 56);
  if (sp->log_gen >= CACHE_MAX_SEQ || sp->log_epoch >= CACHE_MAX_SEQ)
    sp->log_gen = sp->log_epoch = 0; /* corrupt: no check */
  return true;
}

/* ---- metadata pages ---- */

void
cache_page_init (void *buf, uint32_t p, uint64_t seq, const uint8_t uuid[16])
{
  unsigned char *pg = buf;

  memset (pg, 0, CACHE_PAGE);
  put32 (pg, CACHE_PAGE_MAGIC);
  put32 (pg + 4, p);
  put64 (pg + 8, seq);
  memcpy (pg + 16, uuid, 8);
}

void
cache_page_seal (void *buf)
{
  unsigned char *pg = buf;

  put32 (pg + CRC_AT, page_crc (pg));
}

uint64_t
cache_page_check (const void *buf, uint32_t p, const uint8_t uuid[16])
{
  const unsigned char *pg = buf;
  uint64_t seq = get64 (pg + 8);

  if (get32 (pg) != CACHE_PAGE_MAGIC || get32 (pg + 4) != p
      || memcmp (pg + 16, uuid, 8) != 0)
    return 0;
  if (page_crc (pg) != get32 (pg + CRC_AT))
    return 0;
  return seq < CACHE_MAX_SEQ ? seq : 0;
}

void
cache_page_get (const void *buf, uint32_t i, uint64_t *lba, unsigned *state)
{
  uint64_t e = get64 ((const unsigned char *)buf + CACHE_PAGE_HDR + 8 * i);

  *state = e & 3;
  *lba = e >> 2;
}

void
cache_page_set (void *buf, uint32_t i, uint64_t lba, unsigned state)
{
  uint64_t e = state == SLOT_FREE ? 0 : (lba << 2 | state);

  put64 ((unsigned char *)buf + CACHE_PAGE_HDR + 8 * i, e);
}
