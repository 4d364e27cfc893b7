/* CRC-32C: known vectors and chaining. */
#include <config.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "crc32c.h"
#include "membackend.h"

static void
test_check_value (void **state)
{
  assert_int_equal (crc32c (0, "123456789", 9), 0xE3069283u);
}

static void
test_zeros (void **state)
{
  unsigned char z[32] = { 0 };
  unsigned char ff[32];

  memset (ff, 0xff, sizeof ff);
  assert_int_equal (crc32c (0, z, sizeof z), 0x8A9136AAu);
  /* RFC 3720 B.4: 32 bytes of 0xff. */
  assert_int_equal (crc32c (0, ff, sizeof ff), 0x62A8AB43u);
  assert_int_equal (crc32c (0, z, 0), 0);
}

static void
test_ascending (void **state)
{
  unsigned char b[32];

  /* RFC 3720 B.4: 32 bytes ascending 0..31 and descending 31..0. */
  for (int i = 0; i < 32; i++)
    b[i] = i;
  assert_int_equal (crc32c (0, b, sizeof b), 0x46DD794Eu);
  for (int i = 0; i < 32; i++)
    b[i] = 31 - i;
  assert_int_equal (crc32c (0, b, sizeof b), 0x113FDB5Cu);
}

static void
test_chained (void **state)
{
  unsigned char buf[4099];
  uint64_t s = 42;
  uint32_t whole;

  for (size_t i = 0; i < sizeof buf; i++)
    buf[i] = test_rand (&s);
  whole = crc32c (0, buf, sizeof buf);
  /* Every split point, and odd alignments (the SSE path works on
   * 8-byte words).
   */
  for (size_t cut = 0; cut <= sizeof buf; cut += 7)
    {
      uint32_t c = crc32c (0, buf, cut);
      assert_int_equal (crc32c (c, buf + cut, sizeof buf - cut), whole);
    }
  {
    uint32_t c = 0;
    for (size_t i = 0; i < sizeof buf; i++)
      c = crc32c (c, buf + i, 1);
    assert_int_equal (c, whole);
  }
  assert_int_equal (crc32c (crc32c (0, "1234", 4), "56789", 5), 0xE3069283u);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_check_value),
    cmocka_unit_test (test_zeros),
    cmocka_unit_test (test_ascending),
    cmocka_unit_test (test_chained),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
