/* The crash device itself (tests/unit/devcrash.c): pending writes and
 * syncs, a power cut keeping a chosen subset of the unsynced writes in
 * their order, a dead device until power comes back, a seeded cut
 * reproducible, unreadable bytes (healed by a write).  (The volume
 * under random power cuts on it: test-crashdev.c.)
 */
#include <config.h>

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "devcrash.h"
#include "membackend.h"

/* ---- the device itself ---- */

static void
fill (unsigned char *p, size_t n, int c)
{
  memset (p, c, n);
}

static bool
region_is (struct hhc_dev *d, uint64_t off, size_t n, int c)
{
  unsigned char buf[4096];

  assert_true (n <= sizeof buf);
  assert_int_equal (dev_pread (d, buf, n, off), 0);
  for (size_t i = 0; i < n; i++)
    if (buf[i] != (unsigned char)c)
      return false;
  return true;
}

static bool
keep_index_1 (size_t i, void *opaque)
{
  return i == 1;
}

static bool
keep_index_2 (size_t i, void *opaque)
{
  return i == 2;
}

static bool
keep_all (size_t i, void *opaque)
{
  return true;
}

static bool
keep_first (size_t i, void *opaque)
{
  return i == 0;
}

static void
test_pending_and_sync (void **state)
{
  struct hhc_dev *d;
  unsigned char buf[512];

  assert_int_equal (crashdev_create (65536, &d), 0);
  assert_int_equal (d->size, 65536);
  assert_int_equal (crashdev_pending (d), 0);
  assert_true (region_is (d, 0, 512, 0));
  fill (buf, sizeof buf, 'A');
  assert_int_equal (dev_pwrite (d, buf, 512, 0), 0);
  assert_int_equal (crashdev_pending (d), 1);
  assert_true (region_is (d, 0, 512, 'A')); /* reads see it at once */
  assert_int_equal (dev_sync (d), 0);
  assert_int_equal (crashdev_pending (d), 0);
  fill (buf, sizeof buf, 'B');
  assert_int_equal (dev_pwrite (d, buf, 512, 4096), 0);
  fill (buf, sizeof buf, 'C');
  assert_int_equal (dev_pwrite (d, buf, 512, 0), 0);
  assert_int_equal (crashdev_pending (d), 2);
  assert_true (region_is (d, 0, 512, 'C'));
  assert_true (region_is (d, 4096, 512, 'B'));
  /* Out of range. */
  assert_int_equal (dev_pwrite (d, buf, 512, 65536 - 100), EIO);
  assert_int_equal (dev_pread (d, buf, 512, 65536 - 100), EIO);
  assert_int_equal (crashdev_pending (d), 2);
  crashdev_destroy (d);
}

static void
test_crash_keeps_subset (void **state)
{
  struct hhc_dev *d;
  unsigned char buf[512];

  assert_int_equal (crashdev_create (65536, &d), 0);
  fill (buf, sizeof buf, 'A');
  assert_int_equal (dev_pwrite (d, buf, 512, 0), 0);
  assert_int_equal (dev_sync (d), 0);
  fill (buf, sizeof buf, 'B');
  assert_int_equal (dev_pwrite (d, buf, 512, 4096), 0); /* pending 0 */
  fill (buf, sizeof buf, 'C');
  assert_int_equal (dev_pwrite (d, buf, 512, 0), 0); /* pending 1 */
  crashdev_crash (d, 0, keep_index_1, NULL);
  /* Reads see the durable image: C kept, B dropped. */
  assert_true (region_is (d, 0, 512, 'C'));
  assert_true (region_is (d, 4096, 512, 0));
  assert_int_equal (crashdev_pending (d), 0);
  /* Dead: writes and syncs fail, nothing is queued. */
  assert_int_equal (dev_pwrite (d, buf, 512, 8192), EIO);
  assert_int_equal (dev_sync (d), EIO);
  assert_int_equal (crashdev_pending (d), 0);
  assert_true (region_is (d, 8192, 512, 0));
  /* Power back on. */
  crashdev_restart (d);
  assert_true (region_is (d, 0, 512, 'C'));
  fill (buf, sizeof buf, 'D');
  assert_int_equal (dev_pwrite (d, buf, 512, 8192), 0);
  assert_int_equal (dev_sync (d), 0);
  assert_true (region_is (d, 8192, 512, 'D'));
  crashdev_destroy (d);
}

/* Kept writes apply in order: an overwrite wins only if kept. */
static void
test_crash_order (void **state)
{
  struct hhc_dev *d;
  unsigned char buf[512];

  for (int mode = 0; mode < 2; mode++)
    {
      assert_int_equal (crashdev_create (8192, &d), 0);
      fill (buf, sizeof buf, 'X');
      assert_int_equal (dev_pwrite (d, buf, 512, 0), 0);
      fill (buf, sizeof buf, 'Y');
      assert_int_equal (dev_pwrite (d, buf, 512, 0), 0);
      crashdev_crash (d, 0, mode ? keep_first : keep_all, NULL);
      assert_true (region_is (d, 0, 512, mode ? 'X' : 'Y'));
      crashdev_destroy (d);
    }
  /* A crash with nothing pending changes nothing but kills writes. */
  assert_int_equal (crashdev_create (8192, &d), 0);
  fill (buf, sizeof buf, 'Z');
  assert_int_equal (dev_pwrite (d, buf, 512, 512), 0);
  assert_int_equal (dev_sync (d), 0);
  crashdev_crash (d, 3, NULL, NULL);
  assert_true (region_is (d, 512, 512, 'Z'));
  assert_int_equal (dev_pwrite (d, buf, 512, 0), EIO);
  crashdev_restart (d);
  crashdev_restart (d); /* twice is harmless */
  assert_int_equal (dev_pwrite (d, buf, 512, 0), 0);
  crashdev_destroy (d);
}

/* Which of 32 pending one-byte writes survive a seeded crash. */
static uint32_t
seeded_survivors (unsigned seed)
{
  struct hhc_dev *d;
  unsigned char one = 1, b;
  uint32_t mask = 0;

  assert_int_equal (crashdev_create (4096, &d), 0);
  for (int i = 0; i < 32; i++)
    assert_int_equal (dev_pwrite (d, &one, 1, i), 0);
  crashdev_crash (d, seed, NULL, NULL);
  for (int i = 0; i < 32; i++)
    {
      assert_int_equal (dev_pread (d, &b, 1, i), 0);
      if (b)
        mask |= UINT32_C (1) << i;
    }
  crashdev_destroy (d);
  return mask;
}

static void
test_crash_seeded (void **state)
{
  uint32_t a = seeded_survivors (7), b = seeded_survivors (7);
  uint32_t c = seeded_survivors (8);
  bool differ = false;

  assert_int_equal (a, b);                 /* reproducible */
  assert_true (a != 0 && a != UINT32_MAX); /* a real subset */
  for (unsigned s = 8; s < 16 && !differ; s++)
    differ = seeded_survivors (s) != a;
  (void)c;
  assert_true (differ);
}

/* A seeded cut lands a dropped write of four 4 KiB pieces in part
 * for some seeds (some pieces new, some old, the write recorded as
 * lost), whole or not at all for others.
 */
static void
test_crash_partial (void **state)
{
  unsigned seen[3] = { 0 }; /* none, part, all */
  unsigned char buf[4 * CRASHDEV_PIECE];

  for (unsigned seed = 0; seed < 64; seed++)
    {
      struct hhc_dev *d;
      unsigned kept = 0;
      uint64_t off;
      size_t len;
      assert_int_equal (crashdev_create (65536, &d), 0);
      fill (buf, sizeof buf, 'P');
      assert_int_equal (dev_pwrite (d, buf, sizeof buf, 8192), 0);
      crashdev_crash (d, seed, NULL, NULL);
      crashdev_restart (d);
      for (unsigned k = 0; k < 4; k++)
        {
          bool n
              = region_is (d, 8192 + k * CRASHDEV_PIECE, CRASHDEV_PIECE, 'P');
          assert_true (
              n || region_is (d, 8192 + k * CRASHDEV_PIECE, CRASHDEV_PIECE, 0));
          kept += n;
        }
      assert_int_equal (crashdev_last_lost (d, &off, &len), kept < 4);
      seen[kept == 0 ? 0 : kept < 4 ? 1 : 2]++;
      crashdev_destroy (d);
    }
  assert_true (seen[0] > 0 && seen[1] > 0 && seen[2] > 0);
}

/* Unreadable bytes (a torn write on an HDD): reads touching them
 * fail, a write heals what it covers (the larger rest stays), and
 * they outlast a crash and a restart; the newest dropped write is
 * recorded; several ranges heal apart, and a fifth drops the oldest.
 */
static void
test_unreadable (void **state)
{
  struct hhc_dev *d;
  unsigned char buf[4096];
  uint64_t off;
  size_t len;

  assert_int_equal (crashdev_create (65536, &d), 0);
  crashdev_set_bad (d, 8192, 8192); /* [8K, 16K) */
  assert_int_equal (dev_pread (d, buf, 512, 8192 - 512), 0);
  assert_int_equal (dev_pread (d, buf, 1024, 8192 - 512), EIO);
  assert_int_equal (dev_pread (d, buf, 512, 16384 - 512), EIO);
  assert_int_equal (dev_pread (d, buf, 512, 16384), 0);
  fill (buf, 4096, 'H');
  assert_int_equal (dev_pwrite (d, buf, 4096, 6144), 0); /* over [6K, 10K) */
  crashdev_get_bad (d, &off, &len);
  assert_int_equal (off, 10240);
  assert_int_equal (len, 6144);
  assert_true (region_is (d, 8192, 2048, 'H'));
  assert_int_equal (dev_pwrite (d, buf, 1024, 12288), 0); /* the middle */
  crashdev_get_bad (d, &off, &len);
  assert_int_equal (off, 13312); /* the rest after it is the larger */
  assert_int_equal (len, 3072);
  assert_int_equal (dev_pread (d, buf, 512, 12288), 0);
  /* Kept across a crash and a restart; the newest dropped write
   * recorded.
   */
  assert_false (crashdev_last_lost (d, &off, &len));
  fill (buf, 4096, 'I');
  assert_int_equal (dev_pwrite (d, buf, 512, 32768), 0);
  crashdev_crash (d, 0, keep_first, NULL); /* drops 12288 and 32768 */
  crashdev_restart (d);
  assert_int_equal (dev_pread (d, buf, 512, 14336), EIO);
  /* The dropped write's heal is undone: [10K, 16K) unreadable again. */
  assert_int_equal (dev_pread (d, buf, 512, 12288), EIO);
  crashdev_get_bad (d, &off, &len);
  assert_int_equal (off, 10240);
  assert_int_equal (len, 6144);
  struct crashdev_lost l;
  crashdev_get_lost (d, &l);
  assert_int_equal (l.n, 2);
  assert_int_equal (l.off[0], 12288);
  assert_true (crashdev_last_lost (d, &off, &len));
  assert_int_equal (off, 32768);
  assert_int_equal (len, 512);
  /* A synced write heals for good; a FUA write too. */
  assert_int_equal (dev_pwrite (d, buf, 4096, 12288), 0);
  assert_int_equal (dev_sync (d), 0);
  assert_int_equal (dev_pwrite_fua (d, buf, 2048, 10240), 0);
  crashdev_crash (d, 0, keep_first, NULL);
  crashdev_restart (d);
  crashdev_get_bad (d, &off, &len);
  assert_int_equal (len, 0);
  assert_int_equal (dev_pread (d, buf, 4096, 12288), 0);
  /* Several ranges: each heals alone; CRASHDEV_BAD_MAX fit. */
  struct crashdev_bad b;
  crashdev_set_bad (d, 0, 4096);
  crashdev_add_bad (d, 8192, 4096);
  assert_int_equal (dev_pread (d, buf, 512, 0), EIO);
  assert_int_equal (dev_pread (d, buf, 512, 8192), EIO);
  assert_int_equal (dev_pwrite (d, buf, 4096, 0), 0);
  assert_int_equal (dev_sync (d), 0); /* healed on the medium too */
  assert_int_equal (dev_pread (d, buf, 512, 0), 0);
  assert_int_equal (dev_pread (d, buf, 512, 8192), EIO);
  crashdev_get_bads (d, &b);
  assert_int_equal (b.n, 1);
  for (unsigned i = 1; i < CRASHDEV_BAD_MAX; i++)
    crashdev_add_bad (d, 16384 + 2048 * i, 512);
  crashdev_get_bads (d, &b);
  assert_int_equal (b.n, CRASHDEV_BAD_MAX);
  assert_int_equal (b.off[0], 8192);
  assert_int_equal (dev_pread (d, buf, 512, 8192), EIO);
  crashdev_destroy (d);
}

/* A tearing device (an HDD) tears a write the cut loses; a write that
 * lands after it, or a FUA write made after it, heals what it covers:
 * no acknowledged byte is left unreadable.
 */
static void
test_tear (void **state)
{
  unsigned older = 0;

  for (unsigned seed = 0; seed < 32; seed++)
    {
      struct hhc_dev *d;
      unsigned char buf[8192];
      struct crashdev_lost l;
      assert_int_equal (crashdev_create (65536, &d), 0);
      crashdev_set_tearing (d, true);
      fill (buf, sizeof buf, 'A');
      assert_int_equal (dev_pwrite (d, buf, 8192, 8192), 0); /* lost */
      fill (buf, sizeof buf, 'B');
      assert_int_equal (dev_pwrite_fua (d, buf, 4096, 8192), 0);
      fill (buf, sizeof buf, 'C');
      assert_int_equal (dev_pwrite (d, buf, 4096, 32768), 0); /* lost */
      assert_int_equal (dev_pwrite (d, buf, 4096, 12288), 0); /* lands */
      crashdev_crash (d, seed, keep_index_2, NULL);
      crashdev_restart (d);
      crashdev_get_lost (d, &l);
      assert_true (l.torn_len > 0);
      assert_true (region_is (d, 8192, 4096, 'B'));  /* the FUA write */
      assert_true (region_is (d, 12288, 4096, 'C')); /* landed later */
      assert_int_equal (dev_pread (d, buf, 8192, 8192), 0);
      assert_int_equal (l.torn_older, l.torn_off != 32768);
      if (l.torn_off == 32768)
        assert_int_equal (dev_pread (d, buf, 512, 32768), EIO);
      else
        older++;
      crashdev_destroy (d);
    }
  assert_true (older > 0); /* the older write was torn, and healed */
}

/* A write in flight at the cut lands whole, in part or not at all,
 * and is recorded lost unless it landed whole; torn on a tearing
 * device.
 */
static void
test_in_flight (void **state)
{
  unsigned seen[3] = { 0 }; /* none, part, all */
  unsigned char buf[4 * CRASHDEV_PIECE];

  fill (buf, sizeof buf, 'F');
  for (unsigned seed = 0; seed < 64; seed++)
    {
      struct hhc_dev *d;
      unsigned kept = 0;
      struct crashdev_lost l;
      assert_int_equal (crashdev_create (65536, &d), 0);
      crashdev_set_tearing (d, seed % 2);
      crashdev_set_in_flight (d, buf, 4096, sizeof buf);
      crashdev_crash (d, seed, NULL, NULL);
      crashdev_restart (d);
      crashdev_get_lost (d, &l);
      for (unsigned k = 0; k < 4; k++)
        {
          uint64_t o = 4096 + k * CRASHDEV_PIECE;
          unsigned char b[CRASHDEV_PIECE];
          if (dev_pread (d, b, CRASHDEV_PIECE, o) != 0)
            continue; /* torn */
          assert_true (region_is (d, o, CRASHDEV_PIECE, 'F')
                       || region_is (d, o, CRASHDEV_PIECE, 0));
          kept += region_is (d, o, CRASHDEV_PIECE, 'F');
        }
      assert_int_equal (l.n, kept < 4);
      assert_int_equal (l.torn_in_flight, seed % 2 && kept < 4);
      seen[kept == 0 ? 0 : kept < 4 ? 1 : 2]++;
      crashdev_destroy (d);
    }
  assert_true (seen[0] > 0 && seen[1] > 0 && seen[2] > 0);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_pending_and_sync),
    cmocka_unit_test (test_crash_keeps_subset),
    cmocka_unit_test (test_crash_order),
    cmocka_unit_test (test_crash_seeded),
    cmocka_unit_test (test_crash_partial),
    cmocka_unit_test (test_unreadable),
    cmocka_unit_test (test_tear),
    cmocka_unit_test (test_in_flight),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
