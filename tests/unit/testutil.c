/* Test support (membackend.h): versioned block patterns, messages,
 * deadlines and the other helpers every unit test shares.
 */
#include <config.h>

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <setjmp.h>
#include <stdarg.h>

#include <cmocka.h>

#include "cache.h"
#include "common.h"
#include "membackend.h"

/* ------------------------------------------------------------------ */
/* pattern                                                             */
/* ------------------------------------------------------------------ */

#define PAT_MAGIC 0x54544150u /* "PATT" */
#define PAT_HDR 32u

static uint64_t
pat_mix (uint64_t x)
{
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

static uint64_t
pat_seed (uint64_t lba, uint32_t sec, uint64_t version)
{
  return pat_mix (lba * 0x9E3779B97F4A7C15ull ^ pat_mix (version + sec + 1));
}

static void
pat_body (unsigned char *body, size_t n, uint64_t seed)
{
  uint64_t s = seed | 1;

  for (size_t i = 0; i < n; i += 8)
    {
      uint64_t v = test_rand (&s);
      memcpy (body + i, &v, n - i < 8 ? n - i : 8);
    }
}

static void
pat_sector (unsigned char *p, uint64_t lba, uint32_t sec, uint64_t version)
{
  uint64_t seed = pat_seed (lba, sec, version);
  uint32_t magic = htole32 (PAT_MAGIC), s = htole32 (sec);
  uint64_t l = htole64 (lba), v = htole64 (version), k = htole64 (seed);

  memcpy (p, &magic, 4);
  memcpy (p + 4, &s, 4);
  memcpy (p + 8, &l, 8);
  memcpy (p + 16, &v, 8);
  memcpy (p + 24, &k, 8);
  pat_body (p + PAT_HDR, PAT_SECTOR - PAT_HDR, seed);
}

void
pattern_fill (void *buf, uint64_t lba, uint32_t first_sector, uint32_t nsectors,
              uint64_t version)
{
  unsigned char *p = buf;

  for (uint32_t i = 0; i < nsectors; i++)
    pat_sector (p + (size_t)i * PAT_SECTOR, lba, first_sector + i, version);
}

int
pattern_decode (const void *sector, uint64_t *lba, uint32_t *sector_idx,
                uint64_t *version)
{
  const unsigned char *p = sector;
  unsigned char want[PAT_SECTOR];
  uint64_t l, v;
  uint32_t s;
  bool zero = true;

  for (size_t i = 0; i < PAT_SECTOR && zero; i++)
    zero = p[i] == 0;
  if (zero)
    return 0;
  if (get32 (p) != PAT_MAGIC)
    return -1;
  s = get32 (p + 4);
  l = get64 (p + 8);
  v = get64 (p + 16);
  pat_sector (want, l, s, v);
  if (memcmp (want, p, PAT_SECTOR) != 0)
    return -1;
  *lba = l;
  *sector_idx = s;
  *version = v;
  return 1;
}

/* ------------------------------------------------------------------ */
/* misc                                                                */
/* ------------------------------------------------------------------ */

static uint64_t log_errors;

void
test_msg (enum hhc_msg_level level, const char *msg)
{
  static int verbose = -1;

  if (level == HHC_MSG_ERROR)
    __atomic_fetch_add (&log_errors, 1, __ATOMIC_RELAXED);
  if (__atomic_load_n (&verbose, __ATOMIC_RELAXED) < 0)
    __atomic_store_n (&verbose, getenv ("HHC_TEST_VERBOSE") != NULL,
                      __ATOMIC_RELAXED);
  if (__atomic_load_n (&verbose, __ATOMIC_RELAXED))
    fprintf (stderr, "hhc[%s]: %s\n",
             level == HHC_MSG_ERROR  ? "error"
             : level == HHC_MSG_INFO ? "info"
                                     : "debug",
             msg);
}

uint64_t
test_log_errors (void)
{
  return __atomic_load_n (&log_errors, __ATOMIC_RELAXED);
}

/* Ask the core's own geometry (so a layout change cannot skew the
 * tests): the smallest size, in steps of 512 bytes, that gives nslots.
 */
uint64_t
test_cache_dev_size (uint32_t nslots, uint32_t bs)
{
  uint64_t size = (uint64_t)nslots * bs;

  for (;;)
    {
      uint32_t n = 0, np;
      uint64_t mo, dof;
      if (cache_geometry (size, bs, UINT64_C (1) << 50, &n, &np, &mo, &dof) == 0
          && n >= nslots)
        return size;
      size += 512;
    }
}

bool
test_join (pthread_t t, unsigned ms)
{
  struct timespec ts;

  test_deadline (&ts, ms);
  return pthread_timedjoin_np (t, NULL, &ts) == 0;
}

void
test_filter_from_env (void)
{
  const char *f = getenv ("HHC_TEST_FILTER");

  if (f && *f)
    cmocka_set_test_filter (f);
}

uint64_t
test_env_u64 (const char *name, uint64_t def)
{
  const char *v = getenv (name);

  return v && *v ? strtoull (v, NULL, 0) : def;
}
