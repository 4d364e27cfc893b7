/* Replay of the log after the loss of the SSD (docs/design.md §5
 * and §7): where a replay stops, and what it gives each LBA.
 *
 * Tests:
 *   torn_tail   a corrupt segment ends the replay: the backend holds
 *               exactly the state of the barrier before it (also when
 *               the torn blocks end with their own crc32c, and for
 *               segments as earlier builds wrote them, with crc32c).
 *   slot_reuse  slots written back, evicted and taken by other LBAs
 *               while their revoked entries are still in the buffer
 *               being filled; then the SSD is lost: every LBA gets
 *               back its own data, never another's.
 *   order       newest wins across segments, revoke then rewrite and
 *               rewrite then revoke, blocks adjacent in the log but
 *               not in LBA and the other way round; merged writes.
 *   write_error a backend write fails midway: the error comes back,
 *               the backend is not flushed, the next start replays.
 *   read_error  the same with a read of the log failing midway.
 *   max_request a backend's largest request (below a block, or not a
 *               multiple of one) cuts the replay's writes as the
 *               flusher's.
 *   dead_bad_sector  an unreadable sector in dead bytes a run reads
 *               through does not fail the replay.
 */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "log-helpers.h"

struct seg_desc {
  uint64_t off; /* on the device */
  uint64_t seq;
  uint32_t flags, nblocks, hdr_len;
  uint64_t len;
};

/* Follow the segment chain of a log that never wrapped. */
static size_t
parse_segments (struct hhc_dev *d, struct seg_desc *out, size_t max)
{
  unsigned char h[LOG_ALIGN];
  struct log_seg_hdr sh;
  uint64_t pos = 0, seq = 0;
  size_t n = 0;

  while (n < max && LOG_REGION_OFF + pos + sizeof h <= d->size)
    {
      assert_int_equal (dev_pread (d, h, sizeof h, LOG_REGION_OFF + pos), 0);
      if (log_seg_decode (h, &sh) == ENOENT || (n && sh.seq != seq + 1))
        break;
      struct seg_desc s = { LOG_REGION_OFF + pos, sh.seq,     sh.flags,
                            sh.nblocks,           sh.hdr_len, 0 };
      s.len = s.hdr_len + log_seg_data_len (s.nblocks, BS);
      out[n++] = s;
      seq = s.seq;
      pos += s.len;
    }
  return n;
}

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

#define SR_SLOTS 16
#define SR_ROUNDS 10
#define SR_BLOCKS (SR_SLOTS * SR_ROUNDS + 8)

/* Write back every dirty block (bounded: 10 s).  A batch that cleans
 * nothing while blocks are dirty found them in the flusher thread's
 * batch: poll until that one is done (1000 quick tries failed so under
 * load, once in ~18 runs).
 */
static void
write_back_all (struct env *e)
{
  for (int i = 0; i < 10000; i++)
    {
      long n = flusher_batch (e->vol, &e->be, 2);
      assert_true (n >= 0);
      if (n == 0 && counts (e).dirty == 0)
        return;
      if (n == 0)
        nanosleep (&(struct timespec){ 0, 1000000 }, NULL);
    }
  fail_msg ("slot reuse: write-back did not finish");
}

/* Every round writes SR_SLOTS new LBAs into a cache of SR_SLOTS slots,
 * so each round's writes take the slots of the last round's blocks
 * once they are written back and evicted; write-back runs halfway
 * through a round too, so revoked entries leave the current buffer
 * (the last block moved into their place) and their slots come back
 * under other LBAs before any barrier; only every third round ends in
 * a FLUSH.  The last round is not written back: the SSD is lost and
 * the replay must give every LBA its own last version
 * (docs/open-failures.md 1; log_append's in-place check).
 */
static void
test_slot_reuse (void **state)
{
  struct env e;
  uint64_t expect[SR_BLOCKS] = { 0 };

  env_init (&e, SR_BLOCKS, SR_SLOTS, 1, LOG_REGION_OFF + 1024 * KiB);
  env_open (&e);
  for (uint64_t k = 0; k < SR_ROUNDS; k++)
    {
      for (uint64_t i = 0; i < SR_SLOTS; i++)
        {
          uint64_t lba = k * SR_SLOTS + (i * 7) % SR_SLOTS;
          env_write (&e, lba, k + 1, false);
          expect[lba] = k + 1;
          if (i == 3)
            {
              /* A rewrite in place, in the buffer being filled. */
              env_write (&e, lba, 100 + k, false);
              expect[lba] = 100 + k;
            }
          if (i == SR_SLOTS / 2 && k + 1 < SR_ROUNDS)
            write_back_all (&e);
        }
      /* A trim revokes a block of the second half (written after the
       * write-back) while the others stay in the buffer (the last one
       * moves into its place); the moved one is then rewritten in
       * place, the trimmed one anew.
       */
      uint64_t first = k * SR_SLOTS + (9 * 7) % SR_SLOTS;
      uint64_t last = k * SR_SLOTS + (15 * 7) % SR_SLOTS;
      assert_int_equal (hhc_trim (e.vol, &e.be, BS, first * BS, false), 0);
      env_write (&e, last, 200 + k, false);
      expect[last] = 200 + k;
      env_write (&e, first, 300 + k, false);
      expect[first] = 300 + k;
      if (k % 3 == 2 || k + 1 == SR_ROUNDS)
        env_flush (&e);
      if (k + 1 < SR_ROUNDS)
        write_back_all (&e);
    }
  for (uint64_t l = 0; l < SR_BLOCKS; l++)
    assert_true (reads_v (&e, l, expect[l]));
  /* Nothing more reaches the backend but the replay. */
  membackend_fail_all (e.mb, MB_OP_WRITE, true);
  env_close (&e);
  membackend_fail_all (e.mb, MB_OP_WRITE, false);
  env_new_ssd (&e);
  env_open (&e);
  check_backend_state (&e, expect, "slot reuse, after the SSD is lost");
  env_close (&e);
  env_free (&e);
  (void)state;
}

/* An environment that writes nothing back: only the replay reaches
 * the backend.
 */
static void
quiet_env (struct env *e, uint64_t nblocks, uint32_t nslots, uint64_t log)
{
  env_init (e, nblocks, nslots, 1, LOG_REGION_OFF + log);
  e->conf.dirty_low = 90;
  e->conf.dirty_high = 95;
  e->conf.idle_ms = 0;
  env_open (e);
  membackend_fail_all (e->mb, MB_OP_WRITE, true);
}

static void
lose_ssd (struct env *e)
{
  env_close (e);
  membackend_fail_all (e->mb, MB_OP_WRITE, false);
  membackend_clear_write_log (e->mb);
  env_new_ssd (e);
}

static void
write_v (struct env *e, uint64_t *expect, uint64_t lba, uint64_t v)
{
  env_write (e, lba, v, false);
  expect[lba] = v;
}

/* A trim (it reaches the backend too: writes allowed meanwhile). */
static void
trim_one (struct env *e, uint64_t lba)
{
  membackend_fail_all (e->mb, MB_OP_WRITE, false);
  assert_int_equal (hhc_trim (e->vol, &e->be, BS, lba * BS, false), 0);
  membackend_fail_all (e->mb, MB_OP_WRITE, true);
}

#define OR_BLOCKS 512

/* The replay's order rules (log-stream.c: runs in log order, writes
 * in LBA order): an LBA rewritten in several segments gets its newest
 * version; revoked then rewritten, the rewrite; rewritten then revoked,
 * nothing of the log; blocks adjacent in the log but scattered in LBA
 * and adjacent in LBA but written out of order each get their own
 * data; and runs of LBAs go to the backend merged.
 */
static void
test_order (void **state)
{
  struct env e;
  uint64_t expect[OR_BLOCKS] = { 0 };
  struct mb_extent ext[OR_BLOCKS];
  size_t n, merged = 0;

  quiet_env (&e, OR_BLOCKS, OR_BLOCKS, 4096 * KiB);
  for (uint64_t l = 0; l < 64; l++) /* adjacent in both */
    write_v (&e, expect, l, 1);
  env_flush (&e);
  for (uint64_t l = 64; l-- > 0;) /* adjacent in LBA, reversed in log */
    if (l % 2 == 0)
      write_v (&e, expect, l, 2);
  env_flush (&e);
  for (uint64_t i = 0; i < 150; i++) /* adjacent in log, not in LBA */
    write_v (&e, expect, 100 + (i * 97) % 300, 3);
  write_v (&e, expect, 10, 4); /* a third version, segments later */
  trim_one (&e, 5);
  env_flush (&e);
  write_v (&e, expect, 5, 5); /* revoked, then rewritten */
  write_v (&e, expect, 7, 5);
  env_flush (&e);
  trim_one (&e, 7);
  env_flush (&e);
  lose_ssd (&e);
  env_open (&e);
  expect[7] = UINT64_MAX; /* checked below */
  for (uint64_t l = 0; l < OR_BLOCKS; l++)
    if (l != 7 && !backend_has (&e, l, expect[l]))
      fail_msg ("block %llu: version %lld, expected %llu",
                (unsigned long long)l, (long long)backend_version (&e, l),
                (unsigned long long)expect[l]);
  assert_false (backend_has (&e, 7, 5));
  assert_false (backend_has (&e, 7, 1));
  /* LBAs 11-63 come from two segments in the log's first MiB, so from
   * one run: one write (10's newest version, 7's revoke and 5's may be
   * in the next run).
   */
  n = membackend_write_log (e.mb, ext, OR_BLOCKS);
  for (size_t i = 0; i < n; i++)
    merged = HHC_MAX (merged, (size_t)ext[i].count / BS);
  if (getenv ("HHC_TEST_VERBOSE"))
    fprintf (stderr, "%zu writes, the longest %zu blocks\n", n, merged);
  assert_true (n < 64 + 150);
  assert_true (merged >= 53);
  env_close (&e);
  env_free (&e);
  (void)state;
}

/* A backend whose largest request is smaller than a block (or not a
 * multiple of it) gets writes cut as the flusher cuts them
 * (make_extents): one block, or as many as fit, never a merged run.
 */
static void
max_request_cut (uint32_t max_request, uint32_t expect_max)
{
  struct env e;
  uint64_t expect[OR_BLOCKS] = { 0 };
  struct mb_extent ext[OR_BLOCKS];
  size_t n;

  quiet_env (&e, OR_BLOCKS, OR_BLOCKS, 4096 * KiB);
  for (uint64_t l = 0; l < 64; l++)
    write_v (&e, expect, l, 1);
  env_flush (&e);
  lose_ssd (&e);
  e.info.max_request = max_request;
  env_open (&e);
  for (uint64_t l = 0; l < 64; l++)
    assert_true (backend_has (&e, l, 1));
  n = membackend_write_log (e.mb, ext, OR_BLOCKS);
  assert_true (n > 0 && n <= OR_BLOCKS);
  for (size_t i = 0; i < n; i++)
    if (ext[i].count > expect_max)
      fail_msg ("a replay write of %u bytes, the backend takes %u",
                ext[i].count, max_request);
  env_close (&e);
  env_free (&e);
}

static void
test_max_request (void **state)
{
  max_request_cut (BS / 2, BS);
  max_request_cut (3 * BS + 100, 3 * BS);
  (void)state;
}

/* ---- errors: mid-replay, then a retry from the same log ---- */

#define ER_BLOCKS 4096
#define ER_LIVE 2048 /* 8 MiB: more runs than buffers */

struct fail_at {
  struct env *e;
  uint64_t writes; /* atomic */
  bool log_read;   /* fail the log's reads, else the backend's writes */
};

static void
fail_hook (void *opaque, uint64_t offset, uint32_t count)
{
  struct fail_at *f = opaque;

  if (__atomic_add_fetch (&f->writes, 1, __ATOMIC_ACQ_REL) != 3)
    return;
  if (f->log_read)
    __atomic_store_n (&to_pdev (f->e->logs[0].pd)->failing, true,
                      __ATOMIC_RELEASE);
  else
    membackend_fail_all (f->e->mb, MB_OP_WRITE, true);
  (void)offset;
  (void)count;
}

/* A replay that fails midway (a backend write, or a read of the log)
 * returns the error and starts nothing: no flush of the backend, and
 * the next start replays again, to the full state.
 */
static void
replay_error (bool log_read)
{
  struct env e;
  static uint64_t expect[ER_BLOCKS];
  struct fail_at f = { &e, 0, log_read };
  uint64_t flushes;

  memset (expect, 0, sizeof expect);
  quiet_env (&e, ER_BLOCKS, ER_LIVE + 256, 16 * 1024 * KiB);
  for (uint64_t i = 0; i < ER_LIVE; i++)
    write_v (&e, expect, (i * 1237) % ER_BLOCKS, 1);
  env_flush (&e);
  lose_ssd (&e);
  membackend_set_hook (e.mb, MB_OP_WRITE, fail_hook, &f);
  flushes = membackend_count (e.mb, MB_FLUSHES);
  assert_int_not_equal (env_try_open (&e), 0);
  assert_int_equal (membackend_count (e.mb, MB_FLUSHES), flushes);
  assert_true (f.writes >= 3);
  membackend_set_hook (e.mb, MB_OP_WRITE, NULL, NULL);
  membackend_fail_all (e.mb, MB_OP_WRITE, false);
  pdev_heal (e.logs[0].pd);
  env_open (&e);
  check_backend_state (&e, expect, "replayed again after an error");
  env_close (&e);
  env_free (&e);
}

static void
test_write_error (void **state)
{
  replay_error (false);
  (void)state;
}

static void
test_read_error (void **state)
{
  replay_error (true);
  (void)state;
}

/* A run reads through dead bytes (a superseded block, or on a
 * wrapped log the free space past the tail, where a write torn by the
 * crash may have left an unreadable sector: the scan's read ahead falls
 * back to exact reads there, test-log-open scan_bad_tail).  An unreadable sector there holds nothing the replay needs:
 * the replay reads the run's live blocks on their own and goes on.
 */
static void
test_dead_bad_sector (void **state)
{
  struct env e;
  uint64_t expect[OR_BLOCKS] = { 0 };
  struct seg_desc segs[64];
  size_t nseg;
  struct pdev *pd;
  int r;

  quiet_env (&e, OR_BLOCKS, OR_BLOCKS, 4096 * KiB);
  for (uint64_t l = 0; l < 16; l++)
    write_v (&e, expect, l, 1);
  env_flush (&e);
  for (uint64_t l = 4; l < 8; l++) /* 4-7 of the first segment die */
    write_v (&e, expect, l, 2);
  env_flush (&e);
  lose_ssd (&e);
  nseg = parse_segments (e.logs[0].cd, segs, 64);
  size_t i = 0;
  while (i < nseg && segs[i].nblocks != 16)
    i++;
  assert_true (i < nseg);
  /* Opened (the scan read it all), then the sector of the dead LBA 5
   * goes bad before the replay reads it.
   */
  assert_int_equal (hhc_open (&e.conf, &e.pre, &pbe_ops, &e.info, &e.vol), 0);
  pd = to_pdev (e.logs[0].pd);
  pd->bad_off = segs[i].off + segs[i].hdr_len + 5 * BS;
  pd->bad_len = 512;
  r = hhc_start (e.vol, &e.be);
  pd->bad_len = 0;
  if (r)
    {
      hhc_close (e.vol);
      e.vol = NULL;
      env_free (&e);
      fail_msg ("replay failed (%s) on an unreadable dead block", strerror (r));
    }
  check_backend_state (&e, expect, "a bad sector in dead bytes");
  env_close (&e);
  env_free (&e);
  (void)state;
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_torn_tail),
    cmocka_unit_test (test_slot_reuse),
    cmocka_unit_test (test_order),
    cmocka_unit_test (test_write_error),
    cmocka_unit_test (test_read_error),
    cmocka_unit_test (test_max_request),
    cmocka_unit_test (test_dead_bad_sector),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
