/* The log's superblock codec (gateway/log-format.h): no device, no log.
 *
 * Tests:
 *   sb_roundtrip       a superblock encodes to the documented layout
 *                      and decodes back field for field (also with the
 *                      longest identity; a longer one is cut).
 *   void_sb            the void superblock: layout (its generation
 *                      included), decode (ESTALE).
 *   sb_rejects         bad magic (ENOENT), bad checksum or version
 *                      (EILSEQ), a torn void superblock (ENOENT).
 *   sb_check           log_sb_check: heads and regions out of range.
 *   sb_mirror          log_sb_decode_mirror, both copies as the log
 *                      reads them: the newer valid copy; a void copy
 *                      wins over a valid one; blank (no magic, or a
 *                      torn void copy only); corrupt (EILSEQ).
 *   sb_void_mark       the void mark and unreadable parts: a void torn
 *                      after its mark (copies intact, or one unreadable
 *                      and the other the old log) reads void; a torn
 *                      update (no mark, or a mark older than the
 *                      copies: the mirror joined again since, or of
 *                      another log) reads the other copy; both copies
 *                      unreadable: void with a mark, else EIO; one
 *                      unreadable next to a blank one: blank.
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
#include "membackend.h" /* test_filter_from_env */

static void
sample_sb (struct log_sb *sb)
{
  memset (sb, 0, sizeof *sb);
  sb->version = LOG_VERSION;
  sb->block_size = 4096;
  for (int i = 0; i < 16; i++)
    {
      sb->log_uuid[i] = 0x10 + i;
      sb->cache_uuid[i] = 0xa0 + i;
    }
  sb->volume_size = UINT64_C (0x123456789000);
  sb->region_size = UINT64_C (0x40000000);
  sb->segment_size = 1024 * 1024;
  sb->head_off = 0x3000;
  sb->head_seq = 77;
  sb->generation = 0x0102030405060708;
  sb->identity_len = strlen ("file:/srv/backend.img");
  memcpy (sb->identity, "file:/srv/backend.img", sb->identity_len);
  sb->mirrors = 2;
}

static void
assert_sb_equal (const struct log_sb *a, const struct log_sb *b)
{
  assert_int_equal (a->version, b->version);
  assert_int_equal (a->block_size, b->block_size);
  assert_memory_equal (a->log_uuid, b->log_uuid, 16);
  assert_memory_equal (a->cache_uuid, b->cache_uuid, 16);
  assert_int_equal (a->volume_size, b->volume_size);
  assert_int_equal (a->region_size, b->region_size);
  assert_int_equal (a->segment_size, b->segment_size);
  assert_int_equal (a->head_off, b->head_off);
  assert_int_equal (a->head_seq, b->head_seq);
  assert_int_equal (a->generation, b->generation);
  assert_int_equal (a->identity_len, b->identity_len);
  assert_memory_equal (a->identity, b->identity, sizeof a->identity);
  assert_int_equal (a->mirrors, b->mirrors);
}

static void
test_sb_roundtrip (void **state)
{
  unsigned char buf[LOG_SB_SIZE];
  struct log_sb sb, d;

  sample_sb (&sb);
  log_sb_encode (&sb, buf);
  /* The layout of log-format.h, byte for byte where it matters. */
  assert_memory_equal (buf, "HHCLOG01", 8);
  assert_int_equal (get32 (buf + 8), LOG_VERSION);
  assert_int_equal (get32 (buf + 12), 4096);
  assert_memory_equal (buf + 16, sb.log_uuid, 16);
  assert_memory_equal (buf + 32, sb.cache_uuid, 16);
  assert_int_equal (get64 (buf + 48), sb.volume_size);
  assert_int_equal (get64 (buf + 56), sb.region_size);
  assert_int_equal (get32 (buf + 64), sb.segment_size);
  assert_int_equal (get32 (buf + 68), sb.identity_len);
  assert_int_equal (get64 (buf + 72), sb.head_off);
  assert_int_equal (get64 (buf + 80), sb.head_seq);
  assert_int_equal (get64 (buf + 88), sb.generation);
  assert_memory_equal (buf + 96, sb.identity, sb.identity_len);
  assert_int_equal (buf[96 + sb.identity_len], 0);
  assert_int_equal (get32 (buf + 4088), 2);
  assert_int_equal (get32 (buf + 4092), crc32c (0, buf, 4092));
  assert_int_equal (log_sb_decode (buf, &d), 0);
  assert_sb_equal (&sb, &d);

  /* The longest identity; a longer one is cut to it. */
  sb.identity_len = LOG_IDENTITY_MAX;
  memset (sb.identity, 'x', LOG_IDENTITY_MAX);
  log_sb_encode (&sb, buf);
  assert_int_equal (log_sb_decode (buf, &d), 0);
  assert_sb_equal (&sb, &d);
  sb.identity_len = LOG_IDENTITY_MAX + 5;
  log_sb_encode (&sb, buf);
  assert_int_equal (get32 (buf + 68), LOG_IDENTITY_MAX);
  assert_int_equal (log_sb_decode (buf, &d), 0);
  assert_int_equal (d.identity_len, LOG_IDENTITY_MAX);
  (void)state;
}

static void
test_void_sb (void **state)
{
  unsigned char buf[LOG_SB_SIZE];
  struct log_sb sb, d;

  sample_sb (&sb);
  memset (buf, 0x55, sizeof buf);
  log_sb_encode_void (sb.log_uuid, sb.cache_uuid, 0x0102030405060708, buf);
  assert_memory_equal (buf, "HHCVOID1", 8);
  assert_int_equal (get32 (buf + 8), LOG_VERSION);
  assert_memory_equal (buf + 16, sb.log_uuid, 16);
  assert_memory_equal (buf + 32, sb.cache_uuid, 16);
  assert_int_equal (get64 (buf + 88), 0x0102030405060708);
  for (size_t i = 48; i < 4092; i++)
    assert_int_equal (buf[i], i >= 88 && i < 96 ? buf[i] : 0);
  assert_int_equal (get32 (buf + 4092), crc32c (0, buf, 4092));
  assert_int_equal (log_sb_decode (buf, &d), ESTALE);
  assert_int_equal (d.generation, 0x0102030405060708);
  assert_int_equal (log_sb_decode (buf, &d), ESTALE);
  assert_int_equal (d.version, LOG_VERSION);
  assert_memory_equal (d.log_uuid, sb.log_uuid, 16);
  assert_memory_equal (d.cache_uuid, sb.cache_uuid, 16);
  assert_int_equal (d.region_size, 0);
  assert_int_equal (d.retire_epoch, 0);
  /* A retirement's: its epoch at 96, the count at 4088, resealed. */
  log_sb_void_mirrors (buf, 3);
  log_sb_void_epoch (buf, 0x1112131415161718);
  assert_int_equal (get64 (buf + 96), 0x1112131415161718);
  assert_int_equal (get32 (buf + 4088), 3);
  assert_int_equal (get32 (buf + 4092), crc32c (0, buf, 4092));
  assert_int_equal (log_sb_decode (buf, &d), ESTALE);
  assert_int_equal (d.retire_epoch, 0x1112131415161718);
  assert_int_equal (d.mirrors, 3);
  assert_int_equal (d.generation, 0x0102030405060708);
  (void)state;
}

static void
test_sb_rejects (void **state)
{
  unsigned char buf[LOG_SB_SIZE];
  struct log_sb sb, d;

  memset (buf, 0, sizeof buf);
  assert_int_equal (log_sb_decode (buf, &d), ENOENT); /* blank */
  sample_sb (&sb);
  log_sb_encode (&sb, buf);
  buf[3] ^= 1; /* magic */
  assert_int_equal (log_sb_decode (buf, &d), ENOENT);
  /* A flipped bit anywhere else: the checksum; decoded all the same. */
  for (size_t off = 8; off < LOG_SB_SIZE; off += 509)
    {
      log_sb_encode (&sb, buf);
      buf[off] ^= 0x10;
      assert_int_equal (log_sb_decode (buf, &d), EILSEQ);
    }
  log_sb_encode (&sb, buf);
  buf[4093] ^= 1; /* the checksum itself */
  assert_int_equal (log_sb_decode (buf, &d), EILSEQ);
  assert_int_equal (d.head_seq, sb.head_seq);
  /* Another version, checksum right. */
  sb.version = LOG_VERSION + 1;
  log_sb_encode (&sb, buf);
  assert_int_equal (log_sb_decode (buf, &d), EILSEQ);
  assert_int_equal (d.version, LOG_VERSION + 1);
  sb.version = LOG_VERSION_MIN - 1;
  log_sb_encode (&sb, buf);
  assert_int_equal (log_sb_decode (buf, &d), EILSEQ);
  /* Every version from LOG_VERSION_MIN is read (1: earlier builds'). */
  for (uint32_t v = LOG_VERSION_MIN; v <= LOG_VERSION; v++)
    {
      sb.version = v;
      log_sb_encode (&sb, buf);
      assert_int_equal (log_sb_decode (buf, &d), 0);
      assert_int_equal (d.version, v);
    }
  assert_int_equal (LOG_VERSION, 2);
  /* A void superblock torn: as if there were none. */
  log_sb_encode_void (sb.log_uuid, sb.cache_uuid, 1, buf);
  buf[20] ^= 1;
  assert_int_equal (log_sb_decode (buf, &d), ENOENT);
  (void)state;
}

static void
test_sb_check (void **state)
{
  struct log_sb sb;

  sample_sb (&sb);
  assert_int_equal (log_sb_check (&sb), LOG_SB_SOUND);
  sb.head_seq = 0;
  assert_int_equal (log_sb_check (&sb), LOG_SB_BAD_HEAD_SEQ);
  sb.head_seq = LOG_MAX_SEQ + 1;
  assert_int_equal (log_sb_check (&sb), LOG_SB_BAD_HEAD_SEQ);
  sb.head_seq = LOG_MAX_SEQ;
  assert_int_equal (log_sb_check (&sb), LOG_SB_SOUND);
  sb.region_size = -(uint64_t)LOG_REGION_OFF; /* wraps the sums */
  assert_int_equal (log_sb_check (&sb), LOG_SB_BAD_REGION);
  sb.region_size = LOG_MAX_REGION + LOG_ALIGN;
  assert_int_equal (log_sb_check (&sb), LOG_SB_BAD_REGION);
  sb.region_size = LOG_MAX_REGION;
  assert_int_equal (log_sb_check (&sb), LOG_SB_SOUND);
  sb.region_size = 1024 * 1024 + 512;
  assert_int_equal (log_sb_check (&sb), LOG_SB_BAD_REGION);
  sb.region_size = 1024 * 1024;
  sb.head_off = 1024 * 1024;
  assert_int_equal (log_sb_check (&sb), LOG_SB_BAD_REGION);
  sb.head_off = 0x3032;
  assert_int_equal (log_sb_check (&sb), LOG_SB_BAD_REGION);
  sb.head_off = 0;
  assert_int_equal (log_sb_check (&sb), LOG_SB_SOUND);
  assert_string_equal (log_sb_fault_to_string (LOG_SB_BAD_REGION),
                       "bad region or head");
  (void)state;
}

/* Copy c (0 or 1) of a mirror's superblocks in buf: sb with generation
 * gen, or (gen 0) the void superblock.
 */
static void
put_copy (unsigned char *buf, int c, const struct log_sb *sb, uint64_t gen)
{
  struct log_sb g = *sb;

  g.generation = gen;
  if (gen)
    log_sb_encode (&g, buf + c * LOG_SB_SIZE);
  else
    log_sb_encode_void (sb->log_uuid, sb->cache_uuid, 0, buf + c * LOG_SB_SIZE);
}

static void
test_sb_mirror (void **state)
{
  unsigned char buf[LOG_SB_AREA];
  struct log_sb sb, d;

  sample_sb (&sb);
  memset (buf, 0, sizeof buf);
  assert_int_equal (log_sb_decode_mirror (buf, 0, &d), ENOENT);
  /* The newer valid copy counts, in either place. */
  put_copy (buf, 0, &sb, 7);
  assert_int_equal (log_sb_decode_mirror (buf, 0, &d), 0);
  assert_int_equal (d.generation, 7);
  put_copy (buf, 1, &sb, 8);
  assert_int_equal (log_sb_decode_mirror (buf, 0, &d), 0);
  assert_int_equal (d.generation, 8);
  put_copy (buf, 0, &sb, 9);
  assert_int_equal (log_sb_decode_mirror (buf, 0, &d), 0);
  assert_int_equal (d.generation, 9);
  /* A torn newer copy: the older one. */
  buf[100] ^= 1;
  assert_int_equal (log_sb_decode_mirror (buf, 0, &d), 0);
  assert_int_equal (d.generation, 8);
  /* Both torn, or one torn and one of another version: corrupt. */
  buf[LOG_SB_SIZE + 100] ^= 1;
  assert_int_equal (log_sb_decode_mirror (buf, 0, &d), EILSEQ);
  assert_int_equal (d.generation, 0);
  sb.version = LOG_VERSION + 1;
  put_copy (buf, 1, &sb, 10);
  sb.version = LOG_VERSION;
  assert_int_equal (log_sb_decode_mirror (buf, 0, &d), EILSEQ);
  /* Voiding crashed between the copies: the void one wins (either). */
  put_copy (buf, 0, &sb, 0);
  put_copy (buf, 1, &sb, 10);
  assert_int_equal (log_sb_decode_mirror (buf, 0, &d), ESTALE);
  assert_memory_equal (d.log_uuid, sb.log_uuid, 16);
  put_copy (buf, 0, &sb, 10);
  put_copy (buf, 1, &sb, 0);
  assert_int_equal (log_sb_decode_mirror (buf, 0, &d), ESTALE);
  /* A torn void copy is none: the other decides. */
  buf[LOG_SB_SIZE + 20] ^= 1;
  assert_int_equal (log_sb_decode_mirror (buf, 0, &d), 0);
  assert_int_equal (d.generation, 10);
  memset (buf, 0, LOG_SB_SIZE);
  assert_int_equal (log_sb_decode_mirror (buf, 0, &d), ENOENT);
  (void)state;
}

/* The void mark at LOG_VOID_OFF, and parts unreadable (torn writes). */
static void
test_sb_void_mark (void **state)
{
  unsigned char buf[LOG_SB_AREA];
  struct log_sb sb, other, d;

  sample_sb (&sb);
  other = sb;
  other.log_uuid[0] ^= 0xff;
  memset (buf, 0, sizeof buf);
  put_copy (buf, 0, &sb, 8);
  put_copy (buf, 1, &sb, 9);
  /* No mark; the mark unreadable: the newer copy. */
  assert_int_equal (log_sb_decode_mirror (buf, 0, &d), 0);
  assert_int_equal (d.generation, 9);
  assert_int_equal (log_sb_decode_mirror (buf, LOG_SB_MARK, &d), 0);
  assert_int_equal (d.generation, 9);
  /* A torn update of B (no mark): A counts. */
  assert_int_equal (log_sb_decode_mirror (buf, LOG_SB_COPY_B, &d), 0);
  assert_int_equal (d.generation, 8);
  /* An unreadable part is not read: a valid void copy there is none. */
  put_copy (buf, 1, &sb, 0);
  assert_int_equal (log_sb_decode_mirror (buf, LOG_SB_COPY_B, &d), 0);
  assert_int_equal (d.generation, 8);
  put_copy (buf, 1, &sb, 9);
  /* The void wrote its mark (generation 9), then the power failed:
   * with the copies intact, with either torn, with both torn.
   */
  log_sb_encode_void (sb.log_uuid, sb.cache_uuid, 9, buf + LOG_VOID_OFF);
  assert_int_equal (log_sb_decode_mirror (buf, 0, &d), ESTALE);
  assert_memory_equal (d.log_uuid, sb.log_uuid, 16);
  assert_int_equal (d.generation, 9);
  assert_int_equal (log_sb_decode_mirror (buf, LOG_SB_COPY_A, &d), ESTALE);
  assert_int_equal (log_sb_decode_mirror (buf, LOG_SB_COPY_B, &d), ESTALE);
  assert_int_equal (log_sb_decode_mirror (buf, LOG_SB_COPIES, &d), ESTALE);
  /* ... unless the mark is unreadable too: then the void did not begin
   * (the mark is synced before a copy is written), and neither copy
   * readable is an error.
   */
  assert_int_equal (log_sb_decode_mirror (buf, LOG_SB_COPY_A | LOG_SB_MARK, &d),
                    0);
  assert_int_equal (d.generation, 9);
  assert_int_equal (log_sb_decode_mirror (buf, LOG_SB_COPIES | LOG_SB_MARK, &d),
                    EIO);
  /* The mirror joined the log again since (copies 10 and 11, newer
   * than the mark): the mark is stale, and a torn update of either
   * copy reads the other.
   */
  put_copy (buf, 0, &sb, 10);
  put_copy (buf, 1, &sb, 11);
  assert_int_equal (log_sb_decode_mirror (buf, 0, &d), 0);
  assert_int_equal (d.generation, 11);
  assert_int_equal (log_sb_decode_mirror (buf, LOG_SB_COPY_B, &d), 0);
  assert_int_equal (d.generation, 10);
  /* A mark of another log (the device held one before this log was
   * made) does not count, but with no readable copy it is all there is.
   */
  log_sb_encode_void (other.log_uuid, other.cache_uuid, 99, buf + LOG_VOID_OFF);
  assert_int_equal (log_sb_decode_mirror (buf, LOG_SB_COPY_A, &d), 0);
  assert_int_equal (d.generation, 11);
  assert_int_equal (log_sb_decode_mirror (buf, LOG_SB_COPIES, &d), ESTALE);
  /* A format's first superblock write torn: one copy unreadable, the
   * other blank.  Blank, not corrupt, not an error.
   */
  memset (buf, 0, sizeof buf);
  put_copy (buf, 1, &sb, 1);
  assert_int_equal (log_sb_decode_mirror (buf, LOG_SB_COPY_B, &d), ENOENT);
  assert_int_equal (log_sb_decode_mirror (buf, 0, &d), 0);
  (void)state;
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_sb_roundtrip), cmocka_unit_test (test_void_sb),
    cmocka_unit_test (test_sb_rejects),   cmocka_unit_test (test_sb_check),
    cmocka_unit_test (test_sb_mirror),    cmocka_unit_test (test_sb_void_mark),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
