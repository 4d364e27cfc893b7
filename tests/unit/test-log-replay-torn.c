/* Replay of the log after the loss of the SSD (docs/design.md §5
 * and §7): where a replay stops.  (What it gives each LBA:
 * test-log-replay.c; the segments: logreplay.h.)
 *
 * Tests:
 *   torn_tail   a corrupt segment ends the replay: the backend holds
 *               exactly the state of the barrier before it (also when
 *               the torn blocks end with their own crc32c, and for
 *               segments as earlier builds wrote them, with crc32c).
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "logreplay.h"

static void
garble (struct hhc_dev *d, uint64_t off, uint64_t len, uint64_t seed)
{
  unsigned char *p = malloc (len);

  assert_non_null (p);
  for (uint64_t i = 0; i < len; i++)
    p[i] = (unsigned char)test_rand (&seed);
  assert_int_equal (dev_pwrite (d, p, len, off), 0);
  assert_int_equal (dev_sync (d), 0);
  free (p);
}

#define TT_ROUNDS 4
#define TT_BLOCKS 64

/* A block that ends with the crc32c of the rest, as file systems' and
 * databases' pages often do (and hhc-verify's blocks).
 */
static void
codeword_fill (unsigned char *blk, uint64_t *rng)
{
  for (uint32_t i = 0; i < BS - 4; i++)
    blk[i] = (unsigned char)test_rand (rng);
  put32 (blk + BS - 4, crc32c (0, blk, BS - 4));
}

/* variant 0: the last barrier segment is garbage from its header on;
 * 1: only its last data block is (a torn write); 2: the barrier before
 * it has one flipped byte, so the last (valid) one must be ignored;
 * 3: the last round writes blocks that end with their own crc32c, and
 * the last one of them on the log is another such block, as a torn
 * write leaves the last lap's blocks behind (a crc32c over the segment
 * does not change then: docs/open-failures.md 1); 4 and 5: nothing is
 * torn, but every segment is rewritten as earlier builds wrote it
 * (4: crc32c, no flag; 5: segsum, LOG_F_SUM; neither with LOG_F_XXH3):
 * the replay still takes all of them.
 */
static void
torn_tail_variant (int variant)
{
  struct env e;
  uint64_t state[TT_ROUNDS + 1][TT_BLOCKS];
  uint64_t rng = 1234 + variant;
  struct seg_desc segs[64], *data[TT_ROUNDS];
  size_t nseg, nd = 0;
  int keep;

  env_init (&e, TT_BLOCKS, 128, 1, LOG_REGION_OFF + 1024 * KiB);
  env_open (&e);
  /* Nothing reaches the backend but the replay. */
  membackend_fail_all (e.mb, MB_OP_WRITE, true);
  memset (state[0], 0, sizeof state[0]);
  for (int k = 1; k <= TT_ROUNDS; k++)
    {
      memcpy (state[k], state[k - 1], sizeof state[k]);
      for (int i = 0; i < 6; i++)
        {
          uint64_t lba = test_rand_below (&rng, 24);
          uint64_t v = k * 100 + i;
          if (variant == 3 && k == TT_ROUNDS)
            {
              unsigned char blk[BS];
              codeword_fill (blk, &rng);
              assert_int_equal (
                  hhc_write (e.vol, &e.be, blk, BS, lba * BS, false), 0);
              state[k][lba] = UINT64_MAX; /* no pattern version */
              continue;
            }
          env_write (&e, lba, v, false);
          state[k][lba] = v;
        }
      env_flush (&e);
    }
  env_close (&e);
  membackend_fail_all (e.mb, MB_OP_WRITE, false);

  nseg = parse_segments (e.logs[0].cd, segs, 64);
  for (size_t i = 0; i < nseg; i++)
    if (segs[i].nblocks)
      {
        assert_true (nd < TT_ROUNDS);
        assert_true (segs[i].flags & LOG_F_BARRIER);
        data[nd++] = &segs[i];
      }
  assert_int_equal (nd, TT_ROUNDS);
  switch (variant)
    {
    case 0:
      garble (e.logs[0].cd, data[3]->off, data[3]->len, rng);
      keep = 3;
      break;
    case 1:
      garble (e.logs[0].cd, data[3]->off + data[3]->len - BS, BS, rng);
      keep = 3;
      break;
    case 3:
      {
        unsigned char blk[BS];
        codeword_fill (blk, &rng);
        assert_int_equal (
            dev_pwrite (e.logs[0].cd, blk, BS,
                        data[3]->off + data[3]->hdr_len
                            + (uint64_t)(data[3]->nblocks - 1) * BS),
            0);
        assert_int_equal (dev_sync (e.logs[0].cd), 0);
        keep = 3;
      }
      break;
    case 4:
    case 5:
      {
        uint32_t prev = 0;
        for (size_t i = 0; i < nseg; i++)
          {
            size_t len = segs[i].hdr_len + (size_t)segs[i].nblocks * BS;
            unsigned char *p = malloc (len);
            assert_non_null (p);
            assert_int_equal (dev_pread (e.logs[0].cd, p, len, segs[i].off), 0);
            struct log_seg_hdr h;
            assert_int_equal (log_seg_decode (p, &h), 0);
            assert_true (h.flags & LOG_F_XXH3);
            assert_false (h.flags & LOG_F_SUM);
            h.flags &= ~LOG_F_XXH3;
            if (variant == 5)
              h.flags |= LOG_F_SUM;
            if (i > 0)
              h.prev_checksum = prev;
            h.checksum = 0;
            log_seg_encode_fixed (&h, p); /* 88 (XXH3's high half) 0 */
            /* As earlier builds summed it: crc32c or segsum over it. */
            h.checksum = prev = (uint32_t)log_segment_checksum (
                variant == 5 ? LOG_F_SUM : 0, p, len);
            if (variant == 4)
              assert_int_equal (h.checksum, crc32c (0, p, len));
            log_seg_encode_fixed (&h, p);
            assert_int_equal (dev_pwrite (e.logs[0].cd, p, len, segs[i].off),
                              0);
            free (p);
          }
        assert_int_equal (dev_sync (e.logs[0].cd), 0);
        keep = TT_ROUNDS;
      }
      break;
    default:
      {
        unsigned char b;
        uint64_t off = data[2]->off + LOG_HDR_FIXED; /* its LBA table */
        assert_int_equal (dev_pread (e.logs[0].cd, &b, 1, off), 0);
        b ^= 0x40;
        assert_int_equal (dev_pwrite (e.logs[0].cd, &b, 1, off), 0);
        assert_int_equal (dev_sync (e.logs[0].cd), 0);
        keep = 2;
      }
    }

  /* The SSD is lost: the replay stops at the corrupt segment. */
  env_new_ssd (&e);
  env_open (&e);
  check_backend_state (&e, state[keep], "after replaying a torn tail");

  /* The log goes on from there: new barriers, another SSD loss, and
   * the segments after the corrupt one stay ignored.
   */
  membackend_fail_all (e.mb, MB_OP_WRITE, true);
  for (int i = 0; i < 3; i++)
    {
      uint64_t lba = 30 + i;
      /* The first one over a block that the ignored barriers wrote. */
      for (uint64_t l = 0; i == 0 && l < TT_BLOCKS; l++)
        if (state[TT_ROUNDS][l] != state[keep][l])
          {
            lba = l;
            break;
          }
      env_write (&e, lba, 900 + i, false);
      state[keep][lba] = 900 + i;
    }
  env_flush (&e);
  env_close (&e);
  membackend_fail_all (e.mb, MB_OP_WRITE, false);
  env_new_ssd (&e);
  env_open (&e);
  check_backend_state (&e, state[keep], "after a second SSD loss");
  env_close (&e);
  env_free (&e);
}

static void
test_torn_tail (void **state)
{
  for (int v = 0; v < 6; v++)
    torn_tail_variant (v);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_torn_tail),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
