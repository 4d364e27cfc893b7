/* The log's on-disk codec (gateway/log-format.h), its segments: no
 * device, no log.  The superblock's: test-log-sb.c.
 *
 * Tests:
 *   seg_roundtrip      a segment header with its tables: layout,
 *                      decode, the table accessors, encode_fixed.
 *   seg_rejects        bad magic (ENOENT), header lengths impossible
 *                      for the counts (EILSEQ, fields still decoded),
 *                      segments that do not fit the region.
 *   seg_lengths        header and data lengths (no 32-bit wrap).
 *   checksum_known     XXH3-64, segsum and crc32c against known answers
 *                      (computed by scripts/campaign/logscan's Python).
 *   seg_xxh3           an XXH3 segment records all 64 bits (80, 88);
 *                      the high half counts and is taken as 0.
 *   checksum_seal      log_seg_seal, log_seg_checksum, the streaming
 *                      API and log_segment_checksum agree; a changed
 *                      byte anywhere changes the checksum, and so does
 *                      another last block that ends with its own crc32c
 *                      under XXH3 and segsum (not under crc32c).
 */
#include <config.h>

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common.h"
#include "crc32c.h"
#include "log-format.h"
#include "membackend.h"

static void
sample_seg (struct log_seg_hdr *h, uint32_t nblocks, uint32_t nrevokes)
{
  memset (h, 0, sizeof *h);
  h->seq = 1000;
  h->base = 990;
  h->flags = LOG_F_BARRIER | LOG_F_SUM;
  h->nblocks = nblocks;
  h->nrevokes = nrevokes;
  h->hdr_len = log_seg_hdr_len (nblocks, nrevokes);
  h->seg_id = 42;
  for (int i = 0; i < 16; i++)
    {
      h->log_uuid[i] = 0x20 + i;
      h->cache_uuid[i] = 0xc0 + i;
    }
  h->checksum = 0xdeadbeef;
  h->prev_checksum = 0x01020304;
}

static void
test_seg_roundtrip (void **state)
{
  uint64_t lbas[600], revs[10];
  struct log_seg_hdr h, d;
  unsigned char *buf;

  for (int i = 0; i < 600; i++)
    lbas[i] = UINT64_C (0x100000000) + 3 * i;
  for (int i = 0; i < 10; i++)
    revs[i] = 7 * i;
  sample_seg (&h, 600, 10);
  assert_int_equal (h.hdr_len, 8192);
  buf = malloc (h.hdr_len);
  assert_non_null (buf);
  memset (buf, 0x77, h.hdr_len);
  log_seg_encode (&h, lbas, revs, buf);
  assert_memory_equal (buf, "HHCSEG01", 8);
  assert_int_equal (get64 (buf + 8), 1000);
  assert_int_equal (get64 (buf + 16), 990);
  assert_int_equal (get32 (buf + 24), LOG_F_BARRIER | LOG_F_SUM);
  assert_int_equal (get32 (buf + 28), 600);
  assert_int_equal (get32 (buf + 32), 10);
  assert_int_equal (get32 (buf + 36), 8192);
  assert_int_equal (get64 (buf + 40), 42);
  assert_memory_equal (buf + 48, h.log_uuid, 16);
  assert_memory_equal (buf + 64, h.cache_uuid, 16);
  assert_int_equal (get32 (buf + 80), 0xdeadbeef);
  assert_int_equal (get32 (buf + 84), 0x01020304);
  assert_int_equal (get64 (buf + LOG_HDR_FIXED), lbas[0]);
  assert_int_equal (get64 (buf + LOG_HDR_FIXED + 8 * 600), revs[0]);
  for (size_t i = LOG_HDR_FIXED + 8 * 610; i < h.hdr_len; i++)
    assert_int_equal (buf[i], 0); /* padding */
  assert_int_equal (log_seg_decode (buf, &d), 0);
  assert_memory_equal (&h, &d, sizeof h);
  for (uint32_t i = 0; i < 600; i++)
    assert_int_equal (log_seg_lba (buf, i), lbas[i]);
  for (uint32_t i = 0; i < 10; i++)
    assert_int_equal (log_seg_revoke (buf, 600, i), revs[i]);
  /* encode_fixed changes the fixed part only. */
  d.prev_checksum = 5;
  d.flags &= ~LOG_F_BARRIER;
  log_seg_encode_fixed (&d, buf);
  assert_int_equal (log_seg_decode (buf, &h), 0);
  assert_int_equal (h.prev_checksum, 5);
  assert_int_equal (h.flags, LOG_F_SUM);
  assert_int_equal (log_seg_lba (buf, 599), lbas[599]);
  free (buf);
  (void)state;
}

static void
test_seg_rejects (void **state)
{
  unsigned char buf[LOG_ALIGN];
  uint64_t lbas[4] = { 1, 2, 3, 4 };
  struct log_seg_hdr h, d;

  memset (buf, 0, sizeof buf);
  assert_int_equal (log_seg_decode (buf, &d), ENOENT);
  sample_seg (&h, 4, 0);
  log_seg_encode (&h, lbas, NULL, buf);
  buf[7] ^= 1;
  assert_int_equal (log_seg_decode (buf, &d), ENOENT);
  /* A flag this build does not know: not a segment it can read. */
  sample_seg (&h, 4, 0);
  h.flags |= 16;
  log_seg_encode (&h, lbas, NULL, buf);
  assert_int_equal (log_seg_decode (buf, &d), EILSEQ);
  /* Header lengths no segment has. */
  static const uint32_t bad_len[]
      = { 0, 512, LOG_ALIGN + 8, 3 * LOG_ALIGN / 2 };
  for (size_t i = 0; i < sizeof bad_len / sizeof bad_len[0]; i++)
    {
      h.hdr_len = bad_len[i];
      log_seg_encode_fixed (&h, buf);
      assert_int_equal (log_seg_decode (buf, &d), EILSEQ);
      assert_int_equal (d.seq, h.seq); /* decoded all the same */
      assert_int_equal (d.hdr_len, bad_len[i]);
    }
  /* Too short for its tables: 501 LBAs need 8 KiB. */
  h.hdr_len = LOG_ALIGN;
  h.nblocks = 501;
  log_seg_encode_fixed (&h, buf);
  assert_int_equal (log_seg_decode (buf, &d), EILSEQ);
  /* Revoke counts that would wrap a 32-bit length (fuzz-log). */
  h.nblocks = 0;
  h.nrevokes = UINT32_C (1) << 29;
  log_seg_encode_fixed (&h, buf);
  assert_int_equal (log_seg_decode (buf, &d), EILSEQ);

  /* Within the region, or not. */
  sample_seg (&h, 16, 0); /* 4 KiB header, 64 KiB of data */
  assert_true (log_seg_fits (&h, 0, 1024 * 1024, 4096));
  assert_true (log_seg_fits (&h, 1024 * 1024 - 68 * 1024, 1024 * 1024, 4096));
  assert_false (log_seg_fits (&h, 1024 * 1024 - 64 * 1024, 1024 * 1024, 4096));
  h.nblocks = 1024 * 1024 / 512 + 1;
  assert_false (log_seg_fits (&h, 0, 1024 * 1024, 512));
  h.nblocks = UINT32_MAX;
  assert_false (log_seg_fits (&h, 0, UINT64_C (1) << 43, 4096));
  assert_false (log_seg_fits (&h, 0, 1024 * 1024, 0));
  (void)state;
}

static void
test_seg_lengths (void **state)
{
  assert_int_equal (log_seg_hdr_len (0, 0), LOG_ALIGN);
  assert_int_equal (log_seg_hdr_len (500, 0), LOG_ALIGN); /* 96 + 4000 */
  assert_int_equal (log_seg_hdr_len (500, 1), 2 * LOG_ALIGN);
  assert_int_equal (
      log_seg_hdr_len (0, UINT64_C (1) << 29),
      HHC_ROUND_UP (LOG_HDR_FIXED + (UINT64_C (1) << 32), (uint64_t)LOG_ALIGN));
  assert_int_equal (log_seg_data_len (0, 4096), 0);
  assert_int_equal (log_seg_data_len (1, 512), LOG_ALIGN);
  assert_int_equal (log_seg_data_len (9, 512), 2 * LOG_ALIGN);
  assert_int_equal (log_seg_data_len (UINT32_MAX, 1024 * 1024),
                    (uint64_t)UINT32_MAX * 1024 * 1024);
  (void)state;
}

static void
test_checksum_known (void **state)
{
  unsigned char a[64], b[4096];

  for (int i = 0; i < 64; i++)
    a[i] = (i * 37 + 11) & 0xff;
  for (int i = 0; i < 4096; i++)
    b[i] = ((i * 131 + 7) >> 3) & 0xff;
  assert_int_equal (log_segment_checksum (LOG_F_SUM, a, sizeof a), 0x7e366c12);
  assert_int_equal (log_segment_checksum (0, a, sizeof a), 0x3d0f7d5d);
  assert_int_equal (
      log_segment_checksum (LOG_F_SUM | LOG_F_BARRIER, b, sizeof b),
      0xab89cf36);
  assert_int_equal (log_segment_checksum (LOG_F_WRAP, b, sizeof b), 0xfe985bc8);
  assert_true (log_segment_checksum (LOG_F_XXH3, a, sizeof a)
               == UINT64_C (0x8e7464ffdf82c775));
  assert_true (log_segment_checksum (LOG_F_XXH3 | LOG_F_SUM, b, sizeof b)
               == UINT64_C (0x0a81d03621410973));
  (void)state;
}

/* A block that ends with the crc32c of the rest (file systems' and
 * databases' pages often do).
 */
static void
codeword (unsigned char *blk, size_t len, uint64_t seed)
{
  for (size_t i = 0; i < len - 4; i++)
    blk[i] = (unsigned char)test_rand (&seed);
  put32 (blk + len - 4, crc32c (0, blk, len - 4));
}

static void
test_seg_xxh3 (void **state)
{
  uint64_t lbas[2] = { 5, 6 };
  unsigned char *seg = calloc (1, LOG_ALIGN + 2 * 512);
  struct log_seg_hdr h, d;
  uint64_t sum;

  assert_non_null (seg);
  sample_seg (&h, 2, 0);
  h.flags = LOG_F_XXH3;
  h.checksum = UINT64_C (0x1122334455667788);
  log_seg_encode (&h, lbas, NULL, seg);
  assert_int_equal (get32 (seg + 80), 0x55667788);
  assert_int_equal (get32 (seg + 88), 0x11223344);
  assert_int_equal (log_seg_decode (seg, &d), 0);
  assert_true (d.checksum == h.checksum);
  /* Without the flag the high half is neither written nor read. */
  h.flags = LOG_F_SUM;
  log_seg_encode (&h, lbas, NULL, seg);
  assert_int_equal (get32 (seg + 88), 0);
  put32 (seg + 88, 0xabcd);
  assert_int_equal (log_seg_decode (seg, &d), 0);
  assert_true (d.checksum == 0x55667788);
  /* Sealed: both halves; the stored high half does not feed the sum,
   * and a segment whose high half is wrong does not verify.
   */
  h.flags = LOG_F_XXH3;
  log_seg_encode (&h, lbas, NULL, seg);
  sum = log_seg_seal (seg, seg + LOG_ALIGN, 2 * 512);
  assert_true ((sum >> 32) != 0 || (uint32_t)sum != 0);
  assert_int_equal (get32 (seg + 80), (uint32_t)sum);
  assert_int_equal (get32 (seg + 88), (uint32_t)(sum >> 32));
  assert_true (log_seg_checksum (seg, LOG_ALIGN + 2 * 512) == sum);
  assert_int_equal (log_seg_link (sum), (uint32_t)sum);
  put32 (seg + 88, get32 (seg + 88) ^ 1);
  assert_int_equal (log_seg_decode (seg, &d), 0);
  assert_true (d.checksum != sum);
  assert_true (log_seg_checksum (seg, LOG_ALIGN + 2 * 512) == sum);
  free (seg);
  (void)state;
}

static void
test_checksum_seal (void **state)
{
  const size_t nb = 4, bs = 512, dl = nb * bs;
  uint64_t lbas[4] = { 9, 8, 7, 6 };
  unsigned char *seg = calloc (1, LOG_ALIGN + dl);
  struct log_seg_hdr h, d;
  struct log_segck ck;
  uint64_t sum;
  const uint32_t kinds[] = { 0, LOG_F_SUM, LOG_F_XXH3 };

  assert_non_null (seg);
  for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++)
    {
      uint32_t flags = kinds[ki];
      sample_seg (&h, nb, 0);
      h.flags = flags;
      for (size_t i = 0; i < nb; i++)
        codeword (seg + LOG_ALIGN + i * bs, bs, 100 + i);
      log_seg_encode (&h, lbas, NULL, seg);
      sum = log_seg_seal (seg, seg + LOG_ALIGN, dl);
      assert_int_equal (log_seg_decode (seg, &d), 0);
      assert_int_equal (d.checksum, sum);
      /* Every way of computing it agrees. */
      assert_int_equal (log_seg_checksum (seg, LOG_ALIGN + dl), sum);
      log_segck_init (&ck, flags);
      log_segck_add_header (&ck, seg, LOG_ALIGN);
      for (size_t off = 0; off < dl; off += 64)
        log_segck_add (&ck, seg + LOG_ALIGN + off, 64);
      assert_true (log_segck_final (&ck) == sum);
      uint32_t hi = get32 (seg + 88);
      put32 (seg + 80, 0);
      put32 (seg + 88, 0);
      assert_true (log_segment_checksum (flags, seg, LOG_ALIGN + dl) == sum);
      if (flags == 0)
        assert_int_equal (crc32c (0, seg, LOG_ALIGN + dl), sum);
      if (flags & LOG_F_XXH3)
        assert_true (XXH3_64bits (seg, LOG_ALIGN + dl) == sum);
      put32 (seg + 80, (uint32_t)sum);
      put32 (seg + 88, hi);
      /* A changed byte in the header or the data changes it. */
      for (size_t off = 0; off < LOG_ALIGN + dl; off += 211)
        {
          if ((off >= 80 && off < 84) || (off >= 88 && off < 92))
            continue;
          seg[off] ^= 4;
          assert_int_not_equal (log_seg_checksum (seg, LOG_ALIGN + dl), sum);
          seg[off] ^= 4;
        }
      /* Another last block that ends with its own crc32c, as a torn
       * write leaves the last lap's behind: crc32c cannot tell (it is
       * linear: docs/open-failures.md 1), segsum can.
       */
      codeword (seg + LOG_ALIGN + dl - bs, bs, 999);
      if (flags != 0)
        assert_int_not_equal (log_seg_checksum (seg, LOG_ALIGN + dl), sum);
      else
        assert_int_equal (log_seg_checksum (seg, LOG_ALIGN + dl), sum);
    }
  free (seg);
  (void)state;
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_seg_roundtrip),
    cmocka_unit_test (test_seg_rejects),
    cmocka_unit_test (test_seg_lengths),
    cmocka_unit_test (test_checksum_known),
    cmocka_unit_test (test_seg_xxh3),
    cmocka_unit_test (test_checksum_seal),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
