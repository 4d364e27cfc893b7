/* Write-back batches (gateway/flusher.c): what one batch takes and
 * what it costs.  The tests call flusher_batch themselves.
 */
#include <config.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common.h"
#include "devcrash.h"
#include "flusher.h"
#include "membackend.h"
#include "preopen.h"
#include "vol.h"
#include "volenv.h"

#define BS 4096u
#define SECTORS (BS / PAT_SECTOR)

static void
env_open (struct volenv *e, uint32_t nslots, uint64_t backend_size,
          uint32_t preferred)
{
  volenv_init (e, HHC_MODE_WB, nslots, backend_size);
  e->info = membackend_info (e->mb, preferred, "membackend:flusher-batch");
  e->conf.dirty_max = 99;
  assert_int_equal (volenv_try_open (e), 0);
}

static void
write_v (struct volenv *e, uint64_t lba, uint64_t version)
{
  unsigned char blk[BS];

  pattern_fill (blk, lba, 0, SECTORS, version);
  assert_int_equal (hhc_write (e->vol, e->mb, blk, BS, lba * BS, false), 0);
}

static bool
backend_has (struct volenv *e, uint64_t lba, uint64_t version)
{
  unsigned char blk[BS];

  pattern_fill (blk, lba, 0, SECTORS, version);
  return membackend_cmp (e->mb, true, blk, BS, lba * BS) == 0;
}

/* Scattered dirty blocks, several in each preferred-size chunk: the
 * chunk mates of the 256 oldest are single-block runs too, and a batch
 * stays at BATCH (256) runs, so that its time (and the wait of a
 * writer at dirty-max, of a trim on one of its blocks) stays bounded.
 * 128 chunks of 1 MiB, every 8th block dirty, written in an order that
 * spreads the oldest over every chunk.
 */
static void
test_scattered_chunk_mates_bounded (void **state)
{
  struct volenv e;
  long n;

  env_open (&e, 8192, 128 << 20, 1 << 20);
  for (uint64_t j = 0; j < 256; j += 8)
    for (uint64_t c = 0; c < 128; c++)
      write_v (&e, c * 256 + j, 1);
  membackend_reset_counts (e.mb);
  n = flusher_batch (e.vol, e.mb, 4);
  assert_true (n > 0);
  assert_true (membackend_count (e.mb, MB_WRITES) <= 256);
  while (flusher_batch (e.vol, e.mb, 4) > 0)
    ;
  for (uint64_t l = 0; l < 128 * 256; l += 8)
    assert_true (backend_has (&e, l, 1));
  volenv_free (&e);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_scattered_chunk_mates_bounded),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
