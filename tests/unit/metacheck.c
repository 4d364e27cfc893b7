/* Test support (membackend.h): metacheck, the check of every slot
 * write against the persisted metadata (cache invariant 1).  Its mutex
 * protects the durable shadow and the list of unsynced writes; checks
 * run under it.
 */
#include <config.h>

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "crc32c.h"
#include "devcrash.h"
#include "membackend.h"

/* ------------------------------------------------------------------ */
/* metacheck                                                           */
/* ------------------------------------------------------------------ */

/* The on-disk format, as cache.c documents it (re-derived here so a
 * change of format shows up as a test failure, not a silent pass).
 */
#define MC_PAGE 4096u
#define MC_PAGE_HDR 32u
#define MC_EPP ((MC_PAGE - MC_PAGE_HDR) / 8)
#define MC_PAGE_MAGIC 0x504d4848u

struct mc_geom {
  uint32_t bs, nslots, npages;
  uint64_t meta_off, data_off;
  unsigned char uuid[8];
};

struct mc_write {
  uint64_t off;
  size_t len;
  unsigned char *data;
};

struct metacheck {
  struct hhc_dev *hd;
  pthread_mutex_t lock;   /* protects everything below */
  unsigned char *durable; /* shadow of the medium after a power cut */
  uint64_t size;
  struct mc_write *pend; /* writes since the last sync, in order */
  size_t npend, cappend;
  uint64_t violations, checked;
  uint64_t crash_in;    /* writes and syncs until the crash; 0 = never */
  bool crash_sync_only; /* count only syncs */
  unsigned keep_seed;
  void (*on_crash) (void *);
  void *on_crash_opaque;
  bool crashed;
  bool geom_valid; /* geom parsed from the current superblock */
  struct mc_geom geom;
  /* A metadata page write in flight at the power cut, to be torn
   * (new header, old entries) when the power comes back.
   */
  bool tear;
  uint64_t tear_off;
  unsigned char tear_new[MC_PAGE], tear_old[MC_PAGE];
  uint64_t tears;
};

static uint32_t
mc_get32 (const unsigned char *p)
{
  uint32_t v;
  memcpy (&v, p, 4);
  return le32toh (v);
}

static uint64_t
mc_get64 (const unsigned char *p)
{
  uint64_t v;
  memcpy (&v, p, 8);
  return le64toh (v);
}

/* Geometry from a superblock image; false if it is not one. */
static bool
mc_parse_super (const unsigned char *sb, struct mc_geom *g)
{
  if (memcmp (sb, "HHCCACHE", 8) != 0
      || crc32c (0, sb, 4092) != mc_get32 (sb + 4092))
    return false;
  g->bs = mc_get32 (sb + 12);
  g->nslots = mc_get32 (sb + 56);
  g->npages = mc_get32 (sb + 60);
  g->meta_off = mc_get64 (sb + 64);
  g->data_off = mc_get64 (sb + 72);
  memcpy (g->uuid, sb + 16, 8);
  return g->bs >= 512 && g->npages > 0;
}

/* Sequence of a valid page image of page p, 0 if invalid. */
static uint64_t
mc_page_seq (const struct mc_geom *g, uint32_t p, const unsigned char *pg)
{
  unsigned char tmp[MC_PAGE];

  if (mc_get32 (pg) != MC_PAGE_MAGIC || mc_get32 (pg + 4) != p
      || memcmp (pg + 16, g->uuid, 8) != 0)
    return 0;
  memcpy (tmp, pg, MC_PAGE);
  memset (tmp + 24, 0, 4);
  if (crc32c (0, tmp, MC_PAGE) != mc_get32 (pg + 24))
    return 0;
  return mc_get64 (pg + 8);
}

static uint64_t
mc_copy_off (const struct mc_geom *g, uint32_t p, int copy)
{
  return g->meta_off + ((uint64_t)copy * g->npages + p) * MC_PAGE;
}

/* Is the entry for slot in page image pg free or lba? */
static bool
mc_entry_ok (const unsigned char *pg, uint32_t slot, uint64_t lba,
             uint64_t *found)
{
  uint64_t e = mc_get64 (pg + MC_PAGE_HDR + 8 * (slot % MC_EPP));

  *found = e >> 2;
  return (e & 3) == 0 || (e >> 2) == lba;
}

static void
mc_report (struct metacheck *m, uint32_t slot, uint64_t lba, uint64_t other,
           const char *where)
{
  m->violations++;
  if (m->violations <= 5)
    fprintf (stderr,
             "metacheck: slot %u written with block %llu's data while "
             "its %s metadata entry says block %llu\n",
             slot, (unsigned long long)lba, where, (unsigned long long)other);
}

/* Check the write of block lba's data into slot (lock held). */
static void
mc_check_slot (struct metacheck *m, const struct mc_geom *g, uint32_t slot,
               uint64_t lba)
{
  uint32_t p = slot / MC_EPP;
  const unsigned char *cp[2];
  uint64_t seq[2], other;
  int newest;
  bool touched[2] = { false, false };

  m->checked++;
  for (int c = 0; c < 2; c++)
    {
      cp[c] = m->durable + mc_copy_off (g, p, c);
      seq[c] = mc_page_seq (g, p, cp[c]);
    }
  newest = seq[1] > seq[0] ? 1 : 0;
  if (seq[newest] && !mc_entry_ok (cp[newest], slot, lba, &other))
    mc_report (m, slot, lba, other, "durable");
  for (size_t i = 0; i < m->npend; i++)
    {
      struct mc_write *w = &m->pend[i];
      for (int c = 0; c < 2; c++)
        {
          uint64_t o = mc_copy_off (g, p, c);
          if (w->off >= o + MC_PAGE || w->off + w->len <= o)
            continue;
          touched[c] = true;
          if (w->off <= o && w->off + w->len >= o + MC_PAGE)
            {
              const unsigned char *pg = w->data + (o - w->off);
              if (mc_page_seq (g, p, pg)
                  && !mc_entry_ok (pg, slot, lba, &other))
                mc_report (m, slot, lba, other, "unsynced");
            }
        }
    }
  /* A torn write over the newest copy would bring back the other. */
  if (touched[newest] && seq[!newest]
      && !mc_entry_ok (cp[!newest], slot, lba, &other))
    mc_report (m, slot, lba, other, "older");
}

/* Pick an unsynced metadata page write to tear (lock held). */
static void
mc_choose_tear (struct metacheck *m)
{
  uint64_t s = m->keep_seed + 1, n = 0, pick;
  const struct mc_geom *g = &m->geom;

  m->tear = false;
  if (!m->geom_valid)
    return;
  for (size_t i = 0; i < m->npend; i++)
    if (m->pend[i].off >= g->meta_off && m->pend[i].off < g->data_off
        && m->pend[i].len >= MC_PAGE)
      n++;
  if (n == 0)
    return;
  pick = test_rand_below (&s, n);
  for (size_t i = 0; i < m->npend; i++)
    {
      struct mc_write *w = &m->pend[i];
      if (w->off < g->meta_off || w->off >= g->data_off || w->len < MC_PAGE)
        continue;
      if (pick-- == 0)
        {
          m->tear = true;
          m->tear_off = w->off;
          memcpy (m->tear_new, w->data, MC_PAGE);
          memcpy (m->tear_old, m->durable + w->off, MC_PAGE);
          return;
        }
    }
}

/* Count one device write or sync; cut the power if it is the one. */
static void
mc_maybe_crash (struct metacheck *m, bool is_sync)
{
  bool crash = false;
  unsigned seed = 0;
  void (*on_crash) (void *) = NULL;
  void *on_crash_opaque = NULL;

  pthread_mutex_lock (&m->lock);
  if (m->crash_in && (is_sync || !m->crash_sync_only) && --m->crash_in == 0)
    {
      mc_choose_tear (m);
      crash = true;
      seed = m->keep_seed;
      on_crash = m->on_crash;
      on_crash_opaque = m->on_crash_opaque;
      m->crashed = true; /* from now on errors are expected */
    }
  pthread_mutex_unlock (&m->lock);
  if (crash)
    {
      if (on_crash)
        on_crash (on_crash_opaque);
      crashdev_crash (hookdev_inner (m->hd), seed, NULL, NULL);
    }
}

static int
mc_presync (void *opaque)
{
  mc_maybe_crash (opaque, true);
  return 0;
}

static int
mc_before (void *opaque, const void *buf, size_t len, uint64_t off)
{
  struct metacheck *m = opaque;
  unsigned char sb[4096];
  struct mc_geom g;

  mc_maybe_crash (m, false);

  pthread_mutex_lock (&m->lock);
  if (off < sizeof sb) /* (re)format: read the superblock again */
    m->geom_valid = false;
  if (!m->geom_valid)
    {
      pthread_mutex_unlock (&m->lock);
      if (dev_pread (hookdev_inner (m->hd), sb, sizeof sb, 0) != 0
          || !mc_parse_super (sb, &g))
        return 0;
      pthread_mutex_lock (&m->lock);
      m->geom = g;
      m->geom_valid = off >= sizeof sb;
    }
  g = m->geom;
  if (off >= g.data_off)
    {
      uint32_t last_slot = UINT32_MAX;
      uint64_t last_lba = UINT64_MAX;
      /* Every whole sector of the write that carries a pattern header;
       * each (slot, LBA) pair is checked once.
       */
      for (size_t i
           = (PAT_SECTOR - (off - g.data_off) % PAT_SECTOR) % PAT_SECTOR;
           i + PAT_SECTOR <= len; i += PAT_SECTOR)
        {
          uint64_t o = off + i, lba, ver;
          uint32_t sec, slot = (uint32_t)((o - g.data_off) / g.bs);
          if (pattern_decode ((const unsigned char *)buf + i, &lba, &sec, &ver)
                  == 1
              && (slot != last_slot || lba != last_lba))
            {
              mc_check_slot (m, &g, slot, lba);
              last_slot = slot;
              last_lba = lba;
            }
        }
    }
  pthread_mutex_unlock (&m->lock);
  return 0;
}

static void
mc_after (void *opaque, const void *buf, size_t len, uint64_t off, int r)
{
  struct metacheck *m = opaque;
  struct mc_write w = { off, len, NULL };

  if (r != 0)
    return;
  w.data = malloc (len);
  if (w.data == NULL)
    abort ();
  memcpy (w.data, buf, len);
  pthread_mutex_lock (&m->lock);
  if (m->npend == m->cappend)
    {
      m->cappend = m->cappend ? 2 * m->cappend : 64;
      m->pend = realloc (m->pend, m->cappend * sizeof *m->pend);
      if (m->pend == NULL)
        abort ();
    }
  m->pend[m->npend++] = w;
  pthread_mutex_unlock (&m->lock);
}

static void
mc_drop_pending (struct metacheck *m, bool apply)
{
  for (size_t i = 0; i < m->npend; i++)
    {
      if (apply)
        memcpy (m->durable + m->pend[i].off, m->pend[i].data, m->pend[i].len);
      free (m->pend[i].data);
    }
  m->npend = 0;
}

static void
mc_sync (void *opaque, int r)
{
  struct metacheck *m = opaque;

  if (r != 0)
    return;
  pthread_mutex_lock (&m->lock);
  mc_drop_pending (m, true);
  pthread_mutex_unlock (&m->lock);
}

void
metacheck_reload (struct metacheck *m)
{
  pthread_mutex_lock (&m->lock);
  if (m->tear)
    {
      unsigned char torn[MC_PAGE];
      struct hhc_dev *in = hookdev_inner (m->hd);
      /* The new header (sequence, checksum) over the old entries: a
       * page that fails its checksum unless nothing but the sequence
       * changed.
       */
      memcpy (torn, m->tear_old, MC_PAGE);
      memcpy (torn, m->tear_new, MC_PAGE_HDR);
      if (dev_pwrite (in, torn, MC_PAGE, m->tear_off) != 0
          || dev_sync (in) != 0)
        abort ();
      m->tear = false;
      m->tears++;
      if (getenv ("HHC_TEST_VERBOSE"))
        fprintf (stderr, "metacheck: tore the page write at %llu\n",
                 (unsigned long long)m->tear_off);
    }
  mc_drop_pending (m, false);
  m->geom_valid = false;
  if (dev_pread (hookdev_inner (m->hd), m->durable, m->size, 0) != 0)
    abort ();
  pthread_mutex_unlock (&m->lock);
}

struct metacheck *
metacheck_new (struct hhc_dev *hd)
{
  struct metacheck *m = calloc (1, sizeof *m);

  if (m == NULL)
    return NULL;
  m->hd = hd;
  m->size = hd->size;
  m->durable = malloc (m->size);
  if (m->durable == NULL)
    {
      free (m);
      return NULL;
    }
  pthread_mutex_init (&m->lock, NULL);
  metacheck_reload (m);
  hookdev_set_hooks (hd, mc_before, mc_after, mc_sync, m);
  hookdev_set_presync (hd, mc_presync, m);
  return m;
}

void
metacheck_free (struct metacheck *m)
{
  if (m == NULL)
    return;
  hookdev_set_hooks (m->hd, NULL, NULL, NULL, NULL);
  hookdev_set_presync (m->hd, NULL, NULL);
  mc_drop_pending (m, false);
  free (m->pend);
  free (m->durable);
  pthread_mutex_destroy (&m->lock);
  free (m);
}

/* A counter of m, read under its lock. */
static uint64_t
metacheck_get (struct metacheck *m, const uint64_t *counter)
{
  uint64_t v;

  pthread_mutex_lock (&m->lock);
  v = *counter;
  pthread_mutex_unlock (&m->lock);
  return v;
}

uint64_t
metacheck_violations (struct metacheck *m)
{
  return metacheck_get (m, &m->violations);
}

uint64_t
metacheck_checked (struct metacheck *m)
{
  return metacheck_get (m, &m->checked);
}

uint64_t
metacheck_tears (struct metacheck *m)
{
  return metacheck_get (m, &m->tears);
}

void
metacheck_crash_at (struct metacheck *m, uint64_t n, unsigned keep_seed,
                    void (*on_crash) (void *), void *opaque)
{
  pthread_mutex_lock (&m->lock);
  m->crash_in = n;
  m->keep_seed = keep_seed;
  m->on_crash = on_crash;
  m->on_crash_opaque = opaque;
  m->crash_sync_only = false;
  m->crashed = false;
  pthread_mutex_unlock (&m->lock);
}

void
metacheck_crash_at_sync (struct metacheck *m, uint64_t n, unsigned keep_seed,
                         void (*on_crash) (void *), void *opaque)
{
  metacheck_crash_at (m, n, keep_seed, on_crash, opaque);
  pthread_mutex_lock (&m->lock);
  m->crash_sync_only = true;
  pthread_mutex_unlock (&m->lock);
}

bool
metacheck_crashed (struct metacheck *m)
{
  bool c;

  pthread_mutex_lock (&m->lock);
  c = m->crashed;
  pthread_mutex_unlock (&m->lock);
  return c;
}
