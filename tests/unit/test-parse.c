/* Unit test of the parameter parser (common/parse.c): every size
 * suffix the filter, the plugins and the appliance accept, the
 * INT64_MAX and UINT_MAX limits, and the refusals: negative numbers,
 * junk before or after the number, an empty string, unknown suffixes.
 */
#include <config.h>

#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "parse.h"

#define KiB UINT64_C (1024)
#define MiB (KiB * 1024)
#define GiB (MiB * 1024)
#define TiB (GiB * 1024)
#define PiB (TiB * 1024)
#define EiB (PiB * 1024)

/* STR parses as the size WANT. */
static void
size_is (const char *str, uint64_t want)
{
  uint64_t v = 12345;
  const char *why = hhc_parse_size (str, &v);

  if (why)
    fail_msg ("size '%s' refused: %s", str, why);
  if (v != want)
    fail_msg ("size '%s' is %llu, not %llu", str, (unsigned long long)v,
              (unsigned long long)want);
}

/* STR is refused as a size, for reason WHY, and *out is left alone. */
static void
size_refused (const char *str, const char *why)
{
  uint64_t v = 12345;
  const char *got = hhc_parse_size (str, &v);

  if (got == NULL)
    fail_msg ("size '%s' accepted as %llu", str, (unsigned long long)v);
  assert_string_equal (got, why);
  assert_int_equal (v, 12345);
}

static void
test_size_plain (void **state)
{
  size_is ("0", 0);
  size_is ("1", 1);
  size_is ("512", 512);
  size_is ("010", 10); /* decimal, not octal */
  size_is ("9223372036854775807", INT64_MAX);
}

static void
test_size_suffixes (void **state)
{
  static const struct {
    const char *letters; /* lower and upper case */
    uint64_t scale;
  } powers[] = { { "kK", KiB }, { "mM", MiB }, { "gG", GiB },
                 { "tT", TiB }, { "pP", PiB }, { "eE", EiB } };
  char buf[16];

  for (size_t i = 0; i < sizeof powers / sizeof powers[0]; i++)
    for (int c = 0; c < 2; c++)
      {
        snprintf (buf, sizeof buf, "3%c", powers[i].letters[c]);
        size_is (buf, 3 * powers[i].scale);
        snprintf (buf, sizeof buf, "3%cB", powers[i].letters[c]);
        size_is (buf, 3 * powers[i].scale);
        snprintf (buf, sizeof buf, "3%ciB", powers[i].letters[c]);
        size_is (buf, 3 * powers[i].scale);
      }
  size_is ("7b", 7);
  size_is ("7B", 7);
  size_is ("2s", 1024);
  size_is ("2S", 1024);
  size_is ("64M", 64 * MiB);
  size_is ("10G", 10 * GiB);
  size_is ("7E", 7 * EiB);
}

static void
test_size_overflow (void **state)
{
  size_refused ("9223372036854775808", "too large");
  size_refused ("18446744073709551616", "too large");
  size_refused ("99999999999999999999999", "too large");
  size_refused ("8E", "too large");
  size_refused ("8192P", "too large");
  size_refused ("18014398509481984s", "too large");
  size_is ("8191P", 8191 * PiB);
  size_is ("18014398509481983s", UINT64_C (18014398509481983) * 512);
}

static void
test_size_junk (void **state)
{
  size_refused ("", "empty");
  size_refused ("-1", "negative");
  size_refused ("-1G", "negative");
  size_refused ("+1", "not a number");
  size_refused (" 1", "not a number");
  size_refused ("abc", "not a number");
  size_refused ("K", "not a number");
  size_refused ("0x10", "unknown suffix");
  size_refused ("1.5G", "unknown suffix");
  size_refused ("1 ", "unknown suffix");
  size_refused ("1Z", "unknown suffix");
  size_refused ("1GiBx", "unknown suffix");
  size_refused ("1Gb", "unknown suffix");
  size_refused ("1Gib", "unknown suffix");
  size_refused ("1GIB", "unknown suffix");
  size_refused ("1bB", "unknown suffix");
  size_refused ("1sB", "unknown suffix");
  size_refused ("1i", "unknown suffix");
  size_refused ("1iB", "unknown suffix");
  size_refused ("1GG", "unknown suffix");
}

/* STR (with UNIT) parses as WANT. */
static void
unsigned_is (const char *str, const char *unit, unsigned want)
{
  unsigned v = 12345;
  const char *why = hhc_parse_unsigned (str, unit, &v);

  if (why)
    fail_msg ("number '%s' refused: %s", str, why);
  assert_int_equal (v, want);
}

static void
unsigned_refused (const char *str, const char *unit, const char *why)
{
  unsigned v = 12345;
  const char *got = hhc_parse_unsigned (str, unit, &v);

  if (got == NULL)
    fail_msg ("number '%s' accepted as %u", str, v);
  assert_string_equal (got, why);
  assert_int_equal (v, 12345);
}

static void
test_unsigned (void **state)
{
  unsigned_is ("0", NULL, 0);
  unsigned_is ("60", NULL, 60);
  unsigned_is ("010", NULL, 10);
  unsigned_is ("4294967295", NULL, UINT_MAX);
  unsigned_is ("60%", "%", 60);
  unsigned_is ("60", "%", 60);
  unsigned_refused ("60%", NULL, "not a number");
  unsigned_refused ("60%%", "%", "not a number");
  unsigned_refused ("4294967296", NULL, "too large");
  unsigned_refused ("99999999999999999999999", NULL, "too large");
  unsigned_refused ("", NULL, "empty");
  unsigned_refused ("-1", NULL, "negative");
  unsigned_refused ("+1", NULL, "not a number");
  unsigned_refused (" 1", NULL, "not a number");
  unsigned_refused ("1 ", NULL, "not a number");
  unsigned_refused ("0x10", NULL, "not a number");
  unsigned_refused ("1k", NULL, "not a number");
  unsigned_refused ("x", NULL, "not a number");
  unsigned_refused ("%", "%", "not a number");
}

static void
test_bool (void **state)
{
  static const char *const yes[] = { "1",   "true", "TRUE", "True", "t", "T",
                                     "yes", "YES",  "y",    "on",   "ON" };
  static const char *const no[]
      = { "0", "false", "FALSE", "f", "F", "no", "No", "n", "off", "OFF" };
  static const char *const bad[]
      = { "", "2", "01", "tru", "truex", " true", "true ", "yess", "of", "-1" };
  bool b;

  for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
    {
      b = false;
      if (hhc_parse_bool (yes[i], &b) != NULL || !b)
        fail_msg ("'%s' is not true", yes[i]);
    }
  for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
    {
      b = true;
      if (hhc_parse_bool (no[i], &b) != NULL || b)
        fail_msg ("'%s' is not false", no[i]);
    }
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
      b = true;
      if (hhc_parse_bool (bad[i], &b) == NULL)
        fail_msg ("'%s' accepted as a boolean", bad[i]);
      assert_true (b);
    }
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_size_plain),
    cmocka_unit_test (test_size_suffixes),
    cmocka_unit_test (test_size_overflow),
    cmocka_unit_test (test_size_junk),
    cmocka_unit_test (test_unsigned),
    cmocka_unit_test (test_bool),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
