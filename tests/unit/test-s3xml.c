/* Unit test of s3_xml_next (cos-backend/xml.c), the scanner that reads
 * S3 error bodies and listings: well-formed answers, entities, empty
 * elements, and malformed input (truncated, garbage, text too long,
 * bad entities), which must give -1 or 0 and never read outside the
 * buffer (each case is copied into a buffer of its exact length, so
 * ASan catches an overread).
 */
#include <config.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "s3.h"

/* s3_xml_next on a heap copy of S without its NUL. */
static int
next (const char *s, size_t *pos, const char *tag, char *out, size_t outsz)
{
  size_t n = strlen (s);
  char *copy = malloc (n ? n : 1);
  int r;

  assert_non_null (copy);
  memcpy (copy, s, n);
  r = s3_xml_next (copy, n, pos, tag, out, outsz);
  free (copy);
  return r;
}

static void
test_error_body (void **state)
{
  const char *xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                    "<Error><Code>SlowDown</Code><Message>Please reduce "
                    "your request rate &amp; retry.</Message>"
                    "<RequestId>4442587FB7D0A2F9</RequestId></Error>";
  char out[64];
  size_t pos = 0;

  assert_int_equal (next (xml, &pos, "Code", out, sizeof out), 1);
  assert_string_equal (out, "SlowDown");
  pos = 0;
  assert_int_equal (next (xml, &pos, "Message", out, sizeof out), 1);
  assert_string_equal (out, "Please reduce your request rate & retry.");
  pos = 0;
  assert_int_equal (next (xml, &pos, "RequestId", out, sizeof out), 1);
  assert_string_equal (out, "4442587FB7D0A2F9");
  pos = 0;
  assert_int_equal (next (xml, &pos, "HostId", out, sizeof out), 0);
}

static void
test_listing (void **state)
{
  const char *xml
      = "<ListBucketResult><Name>b</Name><KeyCount>3</KeyCount>"
        "<IsTruncated>false</IsTruncated>"
        "<Contents><Key>p/0000000000000001</Key><Size>4</Size></Contents>"
        "<Contents><Key>p/a&lt;b&gt;&quot;c&apos;&#38;&#x41;</Key></Contents>"
        "<Contents><Key/></Contents></ListBucketResult>";
  char out[64];
  size_t pos = 0;

  assert_int_equal (next (xml, &pos, "Key", out, sizeof out), 1);
  assert_string_equal (out, "p/0000000000000001");
  assert_int_equal (next (xml, &pos, "Key", out, sizeof out), 1);
  assert_string_equal (out, "p/a<b>\"c'&A");
  assert_int_equal (next (xml, &pos, "Key", out, sizeof out), 1);
  assert_string_equal (out, "");
  assert_int_equal (next (xml, &pos, "Key", out, sizeof out), 0);
  pos = 0;
  assert_int_equal (next (xml, &pos, "IsTruncated", out, sizeof out), 1);
  assert_string_equal (out, "false");
}

static void
test_malformed (void **state)
{
  static const char *bad[] = {
    "<Error><Code>Slow",             /* truncated */
    "<Error><Code>a<b>c</b></Code>", /* markup inside */
    "<Code>&bogus;</Code>",          /* unknown entity */
    "<Code>&#0;</Code>",             /* NUL */
    "<Code>&#x110000;</Code>",       /* out of range */
    "<Code>&#12</Code>",             /* no ';' */
    "<Code>&",                       /* truncated entity */
    "<Code>0123456789012345678901234567890123456789</Code>", /* too long */
  };
  char out[32];

  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
      size_t pos = 0;
      assert_int_equal (next (bad[i], &pos, "Code", out, sizeof out), -1);
    }
  /* Not XML at all, and empty: simply not found. */
  size_t pos = 0;
  assert_int_equal (next ("\xff\xfe garbage }{", &pos, "Code", out, sizeof out),
                    0);
  pos = 0;
  assert_int_equal (next ("", &pos, "Code", out, sizeof out), 0);
  /* A position past the end finds nothing. */
  pos = 1000;
  assert_int_equal (next ("<Code>x</Code>", &pos, "Code", out, sizeof out), 0);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_error_body),
    cmocka_unit_test (test_listing),
    cmocka_unit_test (test_malformed),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
