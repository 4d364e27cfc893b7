/* appliance/config-encryption.c: a volume's "encryption":
 * {"passphrase_file": FILE}.  The parsed field, gw_volume_equal, the
 * shape errors, and with check_paths the file's rules (a regular,
 * non-empty, readable file, mode o-rwx) and the luks filter's presence,
 * asked of a fake nbdkit whose --dump-config names a temporary filter
 * directory.
 */
#include <config.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "gwconfig.h"

/* The temporary directory: pass (0600), the filters dir, nbdkit. */
struct tmp {
  char dir[64];
  char path[256];
};

static struct tmp t;

/* dir/name into t.path, which is returned. */
static const char *
at (const char *name)
{
  snprintf (t.path, sizeof t.path, "%s/%s", t.dir, name);
  return t.path;
}

static void
write_file (const char *name, const char *text, mode_t mode)
{
  FILE *f = fopen (at (name), "w");

  assert_non_null (f);
  fputs (text, f);
  assert_int_equal (fclose (f), 0);
  assert_int_equal (chmod (at (name), mode), 0);
}

/* A fake nbdkit whose --dump-config names filterdir dir/sub. */
static void
fake_nbdkit (const char *name, const char *sub, int status)
{
  char text[400];

  snprintf (text, sizeof text,
            "#!/bin/sh\necho version=1.32.5\necho "
            "filterdir=%s/%s\necho plugindir=/x\nexit %d\n",
            t.dir, sub, status);
  write_file (name, text, 0755);
}

static int
setup (void **state)
{
  (void)state;
  strcpy (t.dir, "/tmp/hhc-test-config-enc.XXXXXX");
  if (mkdtemp (t.dir) == NULL)
    return -1;
  if (mkdir (at ("filters"), 0755) == -1 || mkdir (at ("empty"), 0755) == -1)
    return -1;
  write_file ("filters/nbdkit-luks-filter.so", "", 0644);
  write_file ("backend", "", 0600);
  write_file ("cache", "", 0600);
  write_file ("pass", "secret\n", 0600);
  write_file ("group.pass", "secret\n", 0640);
  write_file ("open.pass", "secret\n", 0644);
  write_file ("empty.pass", "", 0600);
  fake_nbdkit ("nbdkit", "filters", 0);
  fake_nbdkit ("nbdkit-noluks", "empty", 0);
  fake_nbdkit ("nbdkit-fails", "filters", 1);
  return 0;
}

static int
teardown (void **state)
{
  char cmd[128];

  (void)state;
  snprintf (cmd, sizeof cmd, "rm -rf '%s'", t.dir);
  return system (cmd) == 0 ? 0 : -1;
}

/* Parse a config of one volume with this "encryption" value, run by
 * dir/nbdkit; err gets the message (without "t.json:L:C: ").
 */
static int
parse (const char *enc, const char *nbdkit, bool check_paths,
       struct gw_config *cfg, char *err, size_t errlen)
{
  char text[1024], e[600] = "";
  char *colon;
  int r;

  snprintf (
      text, sizeof text,
      "{\"nbdkit\": \"%s/%s\", \"run_dir\": \"%s\", \"volumes\": "
      "[{\"name\": \"enc\", \"backend\": {\"type\": \"file\", "
      "\"path\": \"%s/backend\"}, \"cache\": \"%s/cache\", \"backend_id\": "
      "\"x\"%s%s}]}",
      t.dir, nbdkit, t.dir, t.dir, t.dir, enc ? ", \"encryption\": " : "",
      enc ? enc : "");
  r = gw_config_parse ("t.json", text, check_paths, cfg, e, sizeof e);
  colon = strstr (e, ": ");
  snprintf (err, errlen, "%s", colon ? colon + 2 : e);
  return r;
}

/* enc, checked as check_paths says, is refused with want. */
static void
refused (const char *enc, const char *nbdkit, bool check_paths,
         const char *want)
{
  struct gw_config cfg;
  char err[600];

  assert_int_equal (parse (enc, nbdkit, check_paths, &cfg, err, sizeof err),
                    -1);
  assert_string_equal (err, want);
  assert_null (cfg.volumes);
}

static void
test_parsed (void **state)
{
  struct gw_config a, b;
  char err[600], enc[300];

  (void)state;
  snprintf (enc, sizeof enc, "{\"passphrase_file\": \"%s\"}", at ("pass"));
  assert_int_equal (parse (enc, "nbdkit", true, &a, err, sizeof err), 0);
  assert_string_equal (a.volumes[0].passphrase_file, at ("pass"));
  /* A group-readable file is fine. */
  snprintf (enc, sizeof enc, "{\"passphrase_file\": \"%s\"}",
            at ("group.pass"));
  assert_int_equal (parse (enc, "nbdkit", true, &b, err, sizeof err), 0);
  assert_false (gw_volume_equal (&a.volumes[0], &b.volumes[0]));
  gw_config_free (&b);
  /* No encryption: NULL, and a different volume. */
  assert_int_equal (parse (NULL, "nbdkit", true, &b, err, sizeof err), 0);
  assert_null (b.volumes[0].passphrase_file);
  assert_false (gw_volume_equal (&a.volumes[0], &b.volumes[0]));
  gw_config_free (&b);
  snprintf (enc, sizeof enc, "{\"passphrase_file\": \"%s\"}", at ("pass"));
  assert_int_equal (parse (enc, "nbdkit", true, &b, err, sizeof err), 0);
  assert_true (gw_volume_equal (&a.volumes[0], &b.volumes[0]));
  gw_config_free (&a);
  gw_config_free (&b);
}

static void
test_shape (void **state)
{
  (void)state;
  refused ("\"/p\"", "nbdkit", false,
           "volumes[0].encryption: must be an object");
  refused ("{}", "nbdkit", false,
           "volumes[0].encryption.passphrase_file: required key missing");
  refused ("{\"passphrase_file\": \"/p\", \"cipher\": \"aes\"}", "nbdkit",
           false, "volumes[0].encryption.cipher: unknown key");
  refused ("{\"passphrase_file\": 1}", "nbdkit", false,
           "volumes[0].encryption.passphrase_file: must be a string");
  refused ("{\"passphrase_file\": \"p.pass\"}", "nbdkit", false,
           "volumes[0].encryption.passphrase_file: volume \"enc\": must be "
           "an absolute path");
}

/* Without check_paths, a missing file and nbdkit are not looked at. */
static void
test_no_check (void **state)
{
  struct gw_config cfg;
  char err[600];

  (void)state;
  assert_int_equal (parse ("{\"passphrase_file\": \"/nonexistent/p\"}",
                           "nbdkit-noluks", false, &cfg, err, sizeof err),
                    0);
  gw_config_free (&cfg);
}

/* enc naming dir/name, with check_paths, is refused with want (%s:
 * the file's path).
 */
static void
refused_file (const char *name, const char *want_fmt)
{
  char enc[300], want[600], path[256];

  snprintf (path, sizeof path, "%s", at (name));
  snprintf (enc, sizeof enc, "{\"passphrase_file\": \"%s\"}", path);
  snprintf (want, sizeof want, want_fmt, path);
  refused (enc, "nbdkit", true, want);
}

#define PF "volumes[0].encryption.passphrase_file: volume \"enc\": "

static void
test_file_rules (void **state)
{
  (void)state;
  refused_file ("none.pass", PF "\"%s\": No such file or directory");
  refused_file ("open.pass",
                PF "\"%s\" is open to every user (mode 0644): chmod o-rwx it");
  refused_file ("empty.pass", PF "\"%s\" is empty");
  refused_file ("filters", PF "\"%s\": not a regular file");
  if (geteuid () != 0)
    {
      assert_int_equal (chmod (at ("group.pass"), 0), 0);
      refused_file ("group.pass", PF "\"%s\": Permission denied");
      assert_int_equal (chmod (at ("group.pass"), 0640), 0);
    }
}

static void
test_luks_missing (void **state)
{
  char enc[300], want[600];

  (void)state;
  snprintf (enc, sizeof enc, "{\"passphrase_file\": \"%s\"}", at ("pass"));
  snprintf (want, sizeof want,
            "volumes[0].encryption: volume \"enc\": nbdkit's luks filter is "
            "not installed (no %s/empty/nbdkit-luks-filter.so; it comes with "
            "nbdkit 1.32 or later)",
            t.dir);
  refused (enc, "nbdkit-noluks", true, want);
  snprintf (want, sizeof want,
            "volumes[0].encryption: volume \"enc\": nbdkit's luks filter is "
            "not installed (\"%s/nbdkit-fails --dump-config\" failed; it "
            "comes with nbdkit 1.32 or later)",
            t.dir);
  refused (enc, "nbdkit-fails", true, want);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_parsed),       cmocka_unit_test (test_shape),
    cmocka_unit_test (test_no_check),     cmocka_unit_test (test_file_rules),
    cmocka_unit_test (test_luks_missing),
  };

  return cmocka_run_group_tests (tests, setup, teardown);
}
