/* Offline access (offline.h): devices, and the census of a cache
 * device for hhcctl check and format.
 *
 * The census reads what cache_load would (cache.c reads the superblock
 * and the state page, with its messages), but never loads a slot: it
 * decides each metadata page's newer valid copy with the codec
 * (cache_page_check) and counts the entries, the duplicates of an LBA
 * resolved as cache_load resolves them.  A page the gateway rejects is
 * a bad page here too.
 */
#include <config.h>

#include "cache.h"
#include "common.h"
#include "dev.h"
#include "log.h"
#include "logpair_int.h"
#include "offline.h"

/* ---- devices ---- */

int
offline_open_readonly (const char *path, hhc_msg_fn msgfn,
                       struct hhc_dev **devp, bool *busy)
{
  return dev_open_readonly (path, msgfn, devp, busy);
}

int
offline_open (const char *path, hhc_msg_fn msgfn, struct hhc_dev **devp)
{
  return dev_open_path (path, 0, false, msgfn, devp);
}

uint64_t
offline_size (const struct hhc_dev *dev)
{
  return dev->size;
}

int
offline_write (struct hhc_dev *dev, const void *buf, size_t len, uint64_t off)
{
  return dev_pwrite (dev, buf, len, off);
}

int
offline_sync (struct hhc_dev *dev)
{
  return dev_sync (dev);
}

int
offline_blank (struct hhc_dev *dev, size_t len)
{
  HHC_CLEANUP_FREE void *z = hhc_alloc_aligned (len);
  int r;

  if (z == NULL)
    return ENOMEM;
  len = HHC_MIN ((uint64_t)len, dev->size);
  if ((r = dev_pwrite (dev, z, len, 0)) == 0)
    r = dev_sync (dev);
  return r;
}

void
offline_close (struct hhc_dev *dev)
{
  dev_close (dev);
}

void
offline_uuid_str (const uint8_t uuid[16], char out[37])
{
  hhc_uuid_str (uuid, out);
}

/* ---- the cache ---- */

struct entry {
  uint64_t lba;
  uint64_t key; /* commit seq << 2 | state: the larger one wins */
};

static int
cmp_entry (const void *a, const void *b)
{
  const struct entry *x = a, *y = b;

  if (x->lba != y->lba)
    return x->lba < y->lba ? -1 : 1;
  return x->key < y->key ? -1 : x->key > y->key;
}

/* The used entries of page p's newer valid copy (of pa and pb) into
 * ents; a page with no valid copy or an entry beyond the volume is
 * counted in cc.
 */
static void
page_entries (struct offline_cache *cc, uint32_t p, const unsigned char *pa,
              const unsigned char *pb, struct entry *ents, size_t *nents)
{
  const struct cache_super *sb = &cc->sb;
  uint64_t nblocks = (sb->volume_size + sb->block_size - 1) / sb->block_size;
  uint64_t sa = cache_page_check (pa, p, sb->uuid);
  uint64_t sq = cache_page_check (pb, p, sb->uuid);
  const unsigned char *pg = sq > sa ? pb : pa;
  uint64_t seq = HHC_MAX (sa, sq);

  if (seq == 0)
    {
      if (cc->bad_pages++ == 0)
        cc->first_bad = p;
      return;
    }
  if (seq >= CACHE_SEQ_LOAD_MAX && cc->late_pages++ == 0)
    cc->first_late = p;
  for (uint32_t e = 0; e < CACHE_EPP; e++)
    {
      uint64_t slot = (uint64_t)p * CACHE_EPP + e;
      uint64_t lba;
      unsigned st;
      if (slot >= sb->nslots)
        break;
      cache_page_get (pg, e, &lba, &st);
      if (st == SLOT_FREE)
        continue;
      if (lba >= nblocks)
        {
          if (cc->beyond++ == 0)
            cc->first_beyond = lba;
          continue;
        }
      ents[(*nents)++] = (struct entry){ lba, seq << 2 | st };
    }
}

/* The entries of every page's newer valid copy into *ents. */
static int
read_pages (struct hhc_dev *dev, struct offline_cache *cc, struct entry *ents,
            size_t *nents)
{
  const uint32_t chunk = 256;
  const struct cache_super *sb = &cc->sb;
  HHC_CLEANUP_FREE unsigned char *a
      = hhc_alloc_aligned ((size_t)chunk * CACHE_PAGE);
  HHC_CLEANUP_FREE unsigned char *b
      = hhc_alloc_aligned ((size_t)chunk * CACHE_PAGE);
  int r;

  if (a == NULL || b == NULL)
    return ENOMEM;
  *nents = 0;
  for (uint32_t p0 = 0; p0 < sb->npages; p0 += chunk)
    {
      uint32_t n = HHC_MIN (chunk, sb->npages - p0);
      size_t len = (size_t)n * CACHE_PAGE;
      if ((r = dev_pread (dev, a, len,
                          cache_page_offset (sb->meta_off, sb->npages, p0, 0)))
              != 0
          || (r
              = dev_pread (dev, b, len,
                           cache_page_offset (sb->meta_off, sb->npages, p0, 1)))
                 != 0)
        return r;
      for (uint32_t i = 0; i < n; i++)
        page_entries (cc, p0 + i, a + (size_t)i * CACHE_PAGE,
                      b + (size_t)i * CACHE_PAGE, ents, nents);
    }
  return 0;
}

/* Count the blocks of ents: sorted by LBA, the winner of each LBA (as
 * cache_load picks it: the newer commit, dirty over clean on a tie)
 * comes last.
 */
static void
count_blocks (struct offline_cache *cc, struct entry *ents, size_t n)
{
  qsort (ents, n, sizeof *ents, cmp_entry);
  for (size_t i = 0; i < n; i++)
    {
      if (i + 1 < n && ents[i + 1].lba == ents[i].lba)
        {
          if (i == 0 || ents[i - 1].lba != ents[i].lba)
            cc->dups++;
          continue;
        }
      if ((ents[i].key & 3) >= SLOT_DIRTY)
        cc->dirty++;
      else
        cc->clean++;
    }
}

/* The superblock as cache_read_super left it in c. */
static void
take_super (struct offline_cache *cc, const struct hhc_cache *c)
{
  struct cache_super *sb = &cc->sb;

  sb->magic_ok = sb->crc_ok = true;
  sb->version = CACHE_VERSION;
  sb->block_size = c->block_size;
  memcpy (sb->uuid, c->uuid, 16);
  memcpy (sb->log_uuid, c->log_uuid, 16);
  sb->volume_size = c->volume_size;
  sb->nslots = c->nslots;
  sb->npages = c->npages;
  sb->meta_off = c->meta_off;
  sb->data_off = c->data_off;
  sb->identity_len = strlen (sb->identity);
}

int
offline_cache_read (struct hhc_dev *dev, hhc_msg_fn msgfn,
                    struct offline_cache *cc)
{
  struct hhc_cache c = { .dev = dev, .msgfn = msgfn };
  struct entry *ents;
  size_t n;
  int r;

  memset (cc, 0, sizeof *cc);
  r = cache_read_super (&c, cc->sb.identity, sizeof cc->sb.identity);
  if (r == ENOENT)
    {
      cc->blank = true;
      return 0;
    }
  if (r || (r = cache_read_state (&c, &cc->state)) != 0)
    return r;
  if (HHC_MAX (c.state_seq[0], c.state_seq[1]) >= CACHE_SEQ_LOAD_MAX)
    cc->late_state = HHC_MAX (c.state_seq[0], c.state_seq[1]);
  take_super (cc, &c);
  memcpy (cc->linked_log, c.linked_log, 16);
  cc->known_epoch = known_epoch (&c);
  cc->record_epoch = c.log_gen >> LOG_EPOCH_SHIFT;
  ents = malloc (((size_t)c.nslots + 1) * sizeof *ents);
  if (ents == NULL)
    return ENOMEM;
  r = read_pages (dev, cc, ents, &n);
  if (r == 0)
    count_blocks (cc, ents, n);
  free (ents);
  return r;
}
