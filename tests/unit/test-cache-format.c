/* The SSD cache format (docs/design.md §4.1-4.3, §4.6), on a crash
 * device: format/load round trip, torn and corrupt metadata, sequence
 * numbers at their limits, ownership checks.  The invariants are in
 * test-cache.c and test-cache-reuse.c, power cuts and a failed cache
 * device in test-cache-crash.c.
 */
#include <config.h>

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cacheenv.h"
#include "common.h"
#include "crc32c.h"
#include "vol.h"

/* ---- format and load ---- */

static void
test_roundtrip (void **state)
{
  struct env e;
  struct hhc_counts c;

  env_init (&e, 64, 1 << 20, true);
  env_open_ok (&e);
  hhc_get_counts (e.vol, &c);
  assert_int_equal (c.slots, 64);
  assert_int_equal (c.free, 64);
  for (uint64_t l = 0; l < 20; l++)
    write_v (&e, l * 3, 1);
  assert_int_equal (hhc_flush (e.vol, e.mb), 0);
  assert_int_equal (env_close (&e), 0);
  assert_int_equal (membackend_count (e.mb, MB_WRITES), 0);

  /* Reopen: the same blocks, still dirty, read as hits. */
  env_open_ok (&e);
  hhc_get_counts (e.vol, &c);
  assert_int_equal (c.dirty, 20);
  assert_int_equal (c.free, 44);
  for (uint64_t l = 0; l < 20; l++)
    assert_int_equal (read_v (&e, l * 3), 1);
  hhc_get_counts (e.vol, &c);
  assert_int_equal (c.read_hits, 20);
  assert_int_equal (c.read_misses, 0);
  assert_int_equal (membackend_count (e.mb, MB_READS), 0);

  /* Write back, close, reopen: clean now, still cached (warm). */
  assert_int_equal (hhc_drain (e.vol, e.mb), 0);
  assert_int_equal (env_close (&e), 0);
  env_open_ok (&e);
  hhc_get_counts (e.vol, &c);
  assert_int_equal (c.dirty, 0);
  assert_int_equal (c.clean, 20);
  for (uint64_t l = 0; l < 20; l++)
    assert_int_equal (read_v (&e, l * 3), 1);
  hhc_get_counts (e.vol, &c);
  assert_int_equal (c.read_hits, 20);
  assert_int_equal (env_close (&e), 0);
  env_free (&e);
}

/* A torn write of the newer copy of a page: load falls back to the
 * older copy, i.e. the state of the commit before.
 */
static void
test_torn_page (void **state)
{
  struct env e;
  struct hhc_counts c;
  uint64_t off[2], seq[2];
  int newer;

  env_init (&e, 64, 1 << 20, false);
  env_open_ok (&e);
  for (uint64_t l = 0; l < 10; l++)
    write_v (&e, l, 1);
  assert_int_equal (hhc_flush (e.vol, e.mb), 0); /* commit S1 */
  for (uint64_t l = 10; l < 20; l++)
    write_v (&e, l, 1);
  for (uint64_t l = 0; l < 5; l++)
    write_v (&e, l, 2); /* in place: no metadata change */
  assert_int_equal (hhc_flush (e.vol, e.mb), 0); /* commit S2 */
  assert_int_equal (env_close (&e), 0);

  page_copies (e.cdev, 0, off, seq);
  assert_true (seq[0] != 0 && seq[1] != 0 && seq[0] != seq[1]);
  newer = seq[1] > seq[0];
  corrupt (e.cdev, off[newer], 4096, 99);

  env_open_ok (&e);
  hhc_get_counts (e.vol, &c);
  assert_int_equal (c.dirty, 10);
  /* Covered by S1: nothing lost (0..4 were rewritten in place). */
  for (uint64_t l = 0; l < 5; l++)
    assert_int_equal (read_v (&e, l), 2);
  for (uint64_t l = 5; l < 10; l++)
    assert_int_equal (read_v (&e, l), 1);
  /* Only S2 knew 10..19: the backend's (zero) data, nobody else's. */
  for (uint64_t l = 10; l < 20; l++)
    assert_int_equal (read_v (&e, l), -2);
  /* The next commit repairs the torn copy; a reopen still works. */
  write_v (&e, 30, 1);
  assert_int_equal (hhc_flush (e.vol, e.mb), 0);
  assert_int_equal (env_close (&e), 0);
  page_copies (e.cdev, 0, off, seq);
  assert_true (seq[0] != 0 && seq[1] != 0);
  env_open_ok (&e);
  assert_int_equal (read_v (&e, 30), 1);
  assert_int_equal (read_v (&e, 7), 1);
  assert_int_equal (env_close (&e), 0);
  env_free (&e);
}

static void
test_both_copies_corrupt (void **state)
{
  struct env e;
  uint64_t off[2], seq[2];
  unsigned char *before;

  env_init (&e, 64, 1 << 20, false);
  env_open_ok (&e);
  for (uint64_t l = 0; l < 10; l++)
    write_v (&e, l, 1);
  assert_int_equal (hhc_flush (e.vol, e.mb), 0);
  assert_int_equal (env_close (&e), 0);
  page_copies (e.cdev, 0, off, seq);
  corrupt (e.cdev, off[0], 4096, 1);
  corrupt (e.cdev, off[1], 4096, 2);
  before = dev_snapshot (e.cdev);
  assert_int_equal (env_open (&e), EINVAL);
  assert_null (e.vol);
  assert_dev_unchanged (&e, before);
  /* Nor does format=never or a second try change anything. */
  e.conf.format = HHC_FORMAT_NEVER;
  assert_int_equal (env_open (&e), EINVAL);
  assert_dev_unchanged (&e, before);
  free (before);
  env_free (&e);
}

/* A copy of a metadata page that claims the last commit sequence
 * (2^64 - 1, checksum right): corrupt, not "newest".  Otherwise the
 * next commit's sequence wrapped to 0, every commit after it lost to
 * that copy at load, and what they recorded was gone (fuzz-cache).
 */
static void
test_page_seq_wrap (void **state)
{
  struct env e;
  uint64_t off[2], seq[2];
  unsigned char pg[4096];
  int older;

  env_init (&e, 64, 1 << 20, false);
  env_open_ok (&e);
  for (uint64_t l = 0; l < 10; l++)
    write_v (&e, l, 1);
  assert_int_equal (hhc_flush (e.vol, e.mb), 0);
  write_v (&e, 10, 1);
  assert_int_equal (hhc_flush (e.vol, e.mb), 0);
  assert_int_equal (env_close (&e), 0);
  page_copies (e.cdev, 0, off, seq);
  older = seq[1] < seq[0];
  assert_int_equal (dev_pread (e.cdev, pg, sizeof pg, off[older]), 0);
  put64 (pg + 8, UINT64_MAX);
  put32 (pg + 24, 0);
  put32 (pg + 24, crc32c (0, pg, sizeof pg));
  assert_int_equal (dev_pwrite (e.cdev, pg, sizeof pg, off[older]), 0);

  env_open_ok (&e);
  assert_int_equal (read_v (&e, 10), 1); /* the valid copy, not that one */
  for (uint64_t l = 20; l < 30; l++)
    write_v (&e, l, 1);
  assert_int_equal (hhc_flush (e.vol, e.mb), 0);
  assert_int_equal (env_close (&e), 0);
  env_open_ok (&e);
  for (uint64_t l = 20; l < 30; l++)
    assert_int_equal (read_v (&e, l), 1);
  assert_int_equal (read_v (&e, 10), 1);
  assert_int_equal (env_close (&e), 0);
  env_free (&e);
}

/* Give copy c of state page or metadata page p (p < 0: the state
 * page) the sequence seq, checksum right, durably.
 */
static void
forge_seq (struct hhc_dev *d, int p, int c, uint64_t seq)
{
  unsigned char pg[4096];
  uint64_t off[2], sq[2];

  if (p < 0)
    off[c] = 4096 + (uint64_t)c * 4096;
  else
    page_copies (d, p, off, sq);
  assert_int_equal (dev_pread (d, pg, sizeof pg, off[c]), 0);
  put64 (pg + 8, seq);
  put32 (pg + 24, 0);
  put32 (pg + 24, crc32c (0, pg, sizeof pg));
  assert_int_equal (dev_pwrite (d, pg, sizeof pg, off[c]), 0);
  assert_int_equal (dev_sync (d), 0);
}

/* A newest page or state sequence at 2^61 (CACHE_SEQ_LOAD_MAX) or
 * more refuses the cache and changes nothing: the next write would
 * need CACHE_MAX_SEQ, which the codec rejects, so the older copy would
 * win.  fuzz-cache found it with a state page at 2^62 - 1: the write
 * of "in use" by a pt run was lost and its clean blocks trusted after
 * a crash.  Below the limit (100 commits of room for this test) the
 * cache loads and commits on.
 */
static void
test_seq_near_max (void **state)
{
  static const uint64_t seqs[]
      = { CACHE_SEQ_LOAD_MAX - 100, CACHE_SEQ_LOAD_MAX, CACHE_MAX_SEQ - 1 };
  struct env e;
  unsigned char *before;

  for (int page = -1; page <= 0; page++)
    for (size_t i = 0; i < sizeof seqs / sizeof seqs[0]; i++)
      {
        uint64_t off[2], sq[2];
        unsigned char a[8], b[8];
        env_init (&e, 64, 1 << 20, false);
        env_open_ok (&e);
        write_v (&e, 1, 1);
        assert_int_equal (hhc_flush (e.vol, e.mb), 0);
        assert_int_equal (env_close (&e), 0);
        if (page < 0) /* the state copies' sequences */
          {
            assert_int_equal (dev_pread (e.cdev, a, 8, 4096 + 8), 0);
            assert_int_equal (dev_pread (e.cdev, b, 8, 8192 + 8), 0);
            sq[0] = get64le (a);
            sq[1] = get64le (b);
          }
        else
          page_copies (e.cdev, 0, off, sq);
        forge_seq (e.cdev, page, sq[1] > sq[0], seqs[i]);
        before = dev_snapshot (e.cdev);
        if (seqs[i] >= CACHE_SEQ_LOAD_MAX)
          {
            assert_int_equal (env_open (&e), EINVAL);
            assert_null (e.vol);
            assert_dev_unchanged (&e, before);
          }
        else
          {
            env_open_ok (&e);
            assert_int_equal (read_v (&e, 1), 1);
            write_v (&e, 2, 1);
            assert_int_equal (hhc_flush (e.vol, e.mb), 0);
            assert_int_equal (env_close (&e), 0);
            env_open_ok (&e);
            assert_int_equal (read_v (&e, 2), 1);
            assert_int_equal (env_close (&e), 0);
          }
        free (before);
        env_free (&e);
      }
}

/* The codec (cache-format.c), which the gateway, hhcctl and the
 * fuzzers share: a state page or metadata page copy with a sequence of
 * CACHE_MAX_SEQ or more is invalid, one just below is valid, and what
 * is encoded decodes the same.
 */
static void
test_codec_max_seq (void **state)
{
  static const uint8_t uuid[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
  unsigned char pg[CACHE_PAGE];
  struct cache_state_page sp = {
    .state = CACHE_IN_USE_HHC,
    .log_link = CACHE_LOG_PAIRED,
    .linked_log = { 0xab },
    .log_gen = UINT64_C (0x1122334455667788),
  }, out;
  uint64_t lba;
  unsigned st;

  memcpy (sp.uuid8, uuid, 8);
  for (int over = 0; over < 2; over++)
    {
      sp.seq = CACHE_MAX_SEQ - 1 + over;
      cache_state_encode (&sp, pg);
      assert_int_equal (cache_state_decode (pg, uuid, &out), !over);
      cache_page_init (pg, 7, CACHE_MAX_SEQ - 1 + over, uuid);
      cache_page_set (pg, 3, 12345, SLOT_DIRTY);
      cache_page_seal (pg);
      assert_int_equal (cache_page_check (pg, 7, uuid),
                        over ? 0 : CACHE_MAX_SEQ - 1);
    }
  sp.seq = 5;
  cache_state_encode (&sp, pg);
  assert_true (cache_state_decode (pg, uuid, &out));
  assert_int_equal (out.seq, 5);
  assert_int_equal (out.state, CACHE_IN_USE_HHC);
  assert_int_equal (out.log_link, CACHE_LOG_PAIRED);
  assert_memory_equal (out.linked_log, sp.linked_log, 16);
  assert_true (out.log_gen == sp.log_gen);
  assert_int_equal (pg[48], 0x88); /* at offset 48, little-endian */
  pg[100] ^= 1;                    /* the crc covers the whole page */
  assert_false (cache_state_decode (pg, uuid, &out));
  /* A replay not finished reads back; a link of a later build reads as
   * paired (the safe side).
   */
  for (uint32_t link = CACHE_LOG_REPLAYING; link <= CACHE_LOG_REPLAYING + 1;
       link++)
    {
      sp.log_link = link;
      cache_state_encode (&sp, pg);
      assert_true (cache_state_decode (pg, uuid, &out));
      assert_int_equal (out.log_link, link == CACHE_LOG_REPLAYING
                                          ? CACHE_LOG_REPLAYING
                                          : CACHE_LOG_PAIRED);
    }
  cache_page_init (pg, 7, 9, uuid);
  cache_page_set (pg, 3, 12345, SLOT_DIRTY);
  cache_page_seal (pg);
  assert_int_equal (cache_page_check (pg, 7, uuid), 9);
  assert_int_equal (cache_page_check (pg, 8, uuid), 0); /* another page */
  cache_page_get (pg, 3, &lba, &st);
  assert_int_equal (lba, 12345);
  assert_int_equal (st, SLOT_DIRTY);
}

static void
test_bad_super_crc (void **state)
{
  struct env e;
  unsigned char *before, b;

  env_init (&e, 64, 1 << 20, false);
  env_open_ok (&e);
  write_v (&e, 1, 1);
  assert_int_equal (hhc_flush (e.vol, e.mb), 0);
  assert_int_equal (env_close (&e), 0);
  /* Flip one byte of the identity. */
  assert_int_equal (dev_pread (e.cdev, &b, 1, 90), 0);
  b ^= 0x40;
  assert_int_equal (dev_pwrite (e.cdev, &b, 1, 90), 0);
  assert_int_equal (dev_sync (e.cdev), 0);
  before = dev_snapshot (e.cdev);
  assert_int_equal (env_open (&e), EINVAL);
  assert_dev_unchanged (&e, before);
  free (before);
  env_free (&e);
}

/* Open once, write a dirty block, close; return the device image. */
static unsigned char *
prepare_owned (struct env *e)
{
  env_init (e, 64, 1 << 20, false);
  env_open_ok (e);
  write_v (e, 5, 1);
  assert_int_equal (hhc_flush (e->vol, e->mb), 0);
  assert_int_equal (env_close (e), 0);
  return dev_snapshot (e->cdev);
}

static void
test_wrong_identity (void **state)
{
  struct env e;
  unsigned char *before = prepare_owned (&e);

  e.info.identity = "another-backend";
  assert_int_equal (env_open (&e), EINVAL);
  assert_dev_unchanged (&e, before);
  /* backend-id= overrides the identity: the right one opens it. */
  e.conf.backend_id = "membackend:test";
  env_open_ok (&e);
  assert_int_equal (read_v (&e, 5), 1);
  assert_int_equal (env_close (&e), 0);
  e.conf.backend_id = "yet-another";
  e.info.identity = "membackend:test";
  assert_int_equal (env_open (&e), EINVAL);
  free (before);
  env_free (&e);
}

static void
test_wrong_size (void **state)
{
  struct env e;
  unsigned char *before = prepare_owned (&e);

  e.info.size = membackend_size (e.mb) / 2;
  assert_int_equal (env_open (&e), EINVAL);
  assert_dev_unchanged (&e, before);
  free (before);
  env_free (&e);
}

static void
test_wrong_block_size (void **state)
{
  struct env e;
  unsigned char *before = prepare_owned (&e);

  e.conf.block_size = 8192;
  assert_int_equal (env_open (&e), EINVAL);
  assert_dev_unchanged (&e, before);
  /* block-size unset: the formatted size is used. */
  e.conf.block_size = 0;
  env_open_ok (&e);
  assert_int_equal (e.vol->bs, BS);
  assert_int_equal (env_close (&e), 0);
  free (before);
  env_free (&e);
}

static void
test_format_force (void **state)
{
  struct env e;
  struct hhc_counts c;
  unsigned char *before = prepare_owned (&e);

  e.info.identity = "another-backend";
  assert_int_equal (env_open (&e), EINVAL);
  e.conf.format = HHC_FORMAT_FORCE;
  env_open_ok (&e);
  hhc_get_counts (e.vol, &c);
  assert_int_equal (c.dirty, 0);
  assert_int_equal (c.free, c.slots);
  assert_int_equal (env_close (&e), 0);
  /* Now it belongs to the other backend. */
  e.conf.format = HHC_FORMAT_NEVER;
  env_open_ok (&e);
  assert_int_equal (env_close (&e), 0);
  e.info.identity = "membackend:test";
  assert_int_equal (env_open (&e), EINVAL);
  free (before);
  env_free (&e);
}

/* No identity (no export description, no backend-id): a blank device
 * is not formatted, nor is a cache under format=force, unless
 * allow_no_identity; a cache formatted so loads again without it.
 */
static void
test_no_identity (void **state)
{
  struct env e;
  unsigned char *before;

  env_init (&e, 64, 1 << 20, false);
  before = dev_snapshot (e.cdev);
  e.info.identity = NULL;
  assert_int_equal (env_open (&e), EINVAL);
  assert_null (e.vol);
  e.info.identity = "";
  assert_int_equal (env_open (&e), EINVAL);
  assert_dev_unchanged (&e, before);
  free (before);
  /* Allowed: tied to the size alone. */
  e.conf.allow_no_identity = true;
  env_open_ok (&e);
  write_v (&e, 7, 3);
  assert_int_equal (hhc_flush (e.vol, e.mb), 0);
  assert_int_equal (env_close (&e), 0);
  e.conf.allow_no_identity = false;
  env_open_ok (&e);
  assert_int_equal (read_v (&e, 7), 3);
  assert_int_equal (env_close (&e), 0);
  /* format=force without an identity: refused, the cache kept. */
  before = dev_snapshot (e.cdev);
  e.conf.format = HHC_FORMAT_FORCE;
  assert_int_equal (env_open (&e), EINVAL);
  assert_dev_unchanged (&e, before);
  /* backend-id= is an identity. */
  e.conf.backend_id = "membackend:named";
  env_open_ok (&e);
  assert_int_equal (env_close (&e), 0);
  e.conf.format = HHC_FORMAT_NEVER;
  env_open_ok (&e);
  assert_int_equal (env_close (&e), 0);
  free (before);
  env_free (&e);
}

static void
test_format_never_blank (void **state)
{
  struct env e;
  unsigned char *before;

  env_init (&e, 64, 1 << 20, false);
  before = dev_snapshot (e.cdev);
  e.conf.format = HHC_FORMAT_NEVER;
  assert_int_equal (env_open (&e), EINVAL);
  assert_dev_unchanged (&e, before);
  free (before);
  env_free (&e);
}

static void
test_too_small (void **state)
{
  struct hhc_dev *d;
  struct membackend *mb = membackend_new (1 << 20);
  struct hhc_backend_info info = membackend_info (mb, 0, "x");
  struct hhc_conf conf;
  struct hhc_preopened pre = { 0 };
  struct hhc_volume *vol = NULL;
  static const uint64_t sizes[] = { 4096, 8192, 64 * 1024 };

  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    {
      assert_int_equal (crashdev_create (sizes[i], &d), 0);
      hhc_conf_init (&conf);
      pre.cache = d;
      conf.msgfn = test_msg;
      assert_int_equal (hhc_open (&conf, &pre, &membackend_ops, &info, &vol),
                        ENOSPC);
      assert_null (vol);
      assert_int_equal (crashdev_pending (d), 0);
      crashdev_destroy (d);
    }
  /* The smallest device that fits: CACHE_MIN_SLOTS slots. */
  assert_int_equal (
      crashdev_create (test_cache_dev_size (CACHE_MIN_SLOTS, BS), &d), 0);
  hhc_conf_init (&conf);
  pre.cache = d;
  conf.msgfn = test_msg;
  assert_int_equal (hhc_open (&conf, &pre, &membackend_ops, &info, &vol), 0);
  assert_int_equal (vol->cache.nslots, CACHE_MIN_SLOTS);
  assert_int_equal (hhc_close (vol), 0);
  crashdev_destroy (d);
  membackend_free (mb);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_roundtrip),
    cmocka_unit_test (test_torn_page),
    cmocka_unit_test (test_both_copies_corrupt),
    cmocka_unit_test (test_page_seq_wrap),
    cmocka_unit_test (test_seq_near_max),
    cmocka_unit_test (test_codec_max_seq),
    cmocka_unit_test (test_bad_super_crc),
    cmocka_unit_test (test_wrong_identity),
    cmocka_unit_test (test_wrong_size),
    cmocka_unit_test (test_wrong_block_size),
    cmocka_unit_test (test_format_force),
    cmocka_unit_test (test_no_identity),
    cmocka_unit_test (test_format_never_blank),
    cmocka_unit_test (test_too_small),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
