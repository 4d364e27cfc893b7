/* appliance/config-voldir.c: hhc-gateway.json's volumes_dir.  The
 * files are read in name order after the main file's volumes, hidden
 * and other files skipped; each error names the volume file and the
 * position in it; names and devices are unique across the main file
 * and the directory; a missing directory holds no volume;
 * gw_config_load_extra reads its volume last, in place of the file of
 * its name.  (tests/unit/test-config.c has the main file.)
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

/* A temporary directory with the main file t/gw.json and the volumes
 * directory t/vol.d.
 */
struct tmp {
  char dir[64];
  char main[96], vdir[96];
};

static void
write_file (const char *path, const char *text)
{
  FILE *f = fopen (path, "w");

  assert_non_null (f);
  fputs (text, f);
  assert_int_equal (fclose (f), 0);
}

/* t->vdir/name holds text. */
static void
put (const struct tmp *t, const char *name, const char *text)
{
  char path[160];

  snprintf (path, sizeof path, "%s/%s", t->vdir, name);
  write_file (path, text);
}

static int
setup (void **state)
{
  struct tmp *t = calloc (1, sizeof *t);
  char text[512];

  if (t == NULL)
    return -1;
  strcpy (t->dir, "/tmp/test-config-voldir-XXXXXX");
  if (mkdtemp (t->dir) == NULL)
    return -1;
  snprintf (t->main, sizeof t->main, "%s/gw.json", t->dir);
  snprintf (t->vdir, sizeof t->vdir, "%s/vol.d", t->dir);
  if (mkdir (t->vdir, 0750) == -1)
    return -1;
  snprintf (text, sizeof text,
            "{\"run_dir\": \"/run/x\", \"volumes_dir\": \"%s\",\n"
            " \"volumes\": [{\"name\": \"m\", \"backend\": {\"type\": "
            "\"file\", \"path\": \"/m.img\"}, \"cache\": \"/m.cache\"}]}\n",
            t->vdir);
  write_file (t->main, text);
  *state = t;
  return 0;
}

static int
teardown (void **state)
{
  struct tmp *t = *state;
  char cmd[200];

  snprintf (cmd, sizeof cmd, "rm -rf '%s'", t->dir);
  if (system (cmd) != 0)
    return -1;
  free (t);
  return 0;
}

/* Volume name with cache. */
static char *
vol (const char *name, const char *cache)
{
  static char buf[256];

  snprintf (buf, sizeof buf,
            "{\"name\": \"%s\",\n \"backend\": {\"type\": \"file\", "
            "\"path\": \"/%s.img\"},\n \"cache\": \"%s\"}\n",
            name, name, cache);
  return buf;
}

/* Loading t->main fails with "VDIR/file" followed by rest. */
static void
fails_with (const struct tmp *t, const char *file, const char *rest)
{
  struct gw_config cfg;
  char err[512], want[512];

  assert_int_equal (gw_config_load (t->main, false, &cfg, err, sizeof err), -1);
  snprintf (want, sizeof want, "%s/%s%s", t->vdir, file, rest);
  assert_string_equal (err, want);
  assert_int_equal (cfg.nvolumes, 0);
}

static void
test_order_and_skips (void **state)
{
  struct tmp *t = *state;
  struct gw_config cfg;
  char err[512] = "", src[160];

  put (t, "b.json", vol ("b", "/b.cache"));
  put (t, "a.json", vol ("a", "/a.cache"));
  put (t, ".c.json.tmp", "not json");
  put (t, ".d.json", "not json");
  put (t, "README", "not json");
  assert_int_equal (gw_config_load (t->main, false, &cfg, err, sizeof err), 0);
  assert_string_equal (cfg.volumes_dir, t->vdir);
  assert_int_equal (cfg.nvolumes, 3);
  assert_string_equal (cfg.volumes[0].name, "m");
  assert_null (cfg.volumes[0].source);
  assert_string_equal (cfg.volumes[1].name, "a");
  assert_string_equal (cfg.volumes[2].name, "b");
  snprintf (src, sizeof src, "%s/a.json", t->vdir);
  assert_string_equal (cfg.volumes[1].source, src);
  gw_config_free (&cfg);
}

static void
test_empty_and_missing (void **state)
{
  struct tmp *t = *state;
  struct gw_config cfg;
  char err[512] = "", text[256];

  /* No volumes array: the directory's volumes only. */
  snprintf (text, sizeof text, "{\"volumes_dir\": \"%s/none\"}", t->dir);
  write_file (t->main, text);
  assert_int_equal (gw_config_load (t->main, true, &cfg, err, sizeof err), 0);
  assert_int_equal (cfg.nvolumes, 0);
  gw_config_free (&cfg);
  /* An empty array is fine too, with volumes_dir. */
  snprintf (text, sizeof text, "{\"volumes_dir\": \"%s\", \"volumes\": []}",
            t->vdir);
  write_file (t->main, text);
  assert_int_equal (gw_config_load (t->main, true, &cfg, err, sizeof err), 0);
  gw_config_free (&cfg);
  /* A missing parent, with check_paths. */
  snprintf (text, sizeof text, "{\"volumes_dir\": \"%s/no/vol.d\"}", t->dir);
  write_file (t->main, text);
  assert_int_equal (gw_config_load (t->main, true, &cfg, err, sizeof err), -1);
  assert_non_null (strstr (err, ":1:17: volumes_dir: "));
  /* A file, not a directory. */
  snprintf (text, sizeof text, "{\"volumes_dir\": \"%s\"}", t->main);
  write_file (t->main, text);
  assert_int_equal (gw_config_load (t->main, true, &cfg, err, sizeof err), -1);
  assert_non_null (strstr (err, "not a directory"));
}

static void
test_errors (void **state)
{
  struct tmp *t = *state;
  char want[300];

  put (t, "x.json", vol ("y", "/y.cache"));
  fails_with (t, "x.json", ":1:10: name: must be \"x\", as the file is named");
  put (t, "x.json", "{\"name\": \"x\",\n \"frob\": 1}");
  fails_with (t, "x.json", ":2:2: frob: unknown key");
  put (t, "x.json", "{\"name\": \"x\",\n}");
  fails_with (t, "x.json", ":2:1: string or '}' expected near '}'");
  put (t, "x.json", "[]");
  fails_with (t, "x.json", ":1:1: must be an object");
  put (t, "x.json", vol ("x", "/m.cache"));
  fails_with (t, "x.json",
              ":3:11: cache: \"/m.cache\" is also the cache of volume \"m\"");
  put (t, "m.json", vol ("m", "/m2.cache"));
  put (t, "x.json", vol ("x", "/x.cache"));
  snprintf (want, sizeof want,
            ":1:10: name: \"m\" is also the name of volumes[0] in %s", t->main);
  fails_with (t, "m.json", want);
}

static void
test_extra (void **state)
{
  struct tmp *t = *state;
  struct gw_config cfg;
  char err[512] = "";
  struct gw_extra_volume x = { .file = "in.json" };

  put (t, "a.json", vol ("a", "/a.cache"));
  put (t, "b.json", vol ("b", "/b.cache"));
  x.text = vol ("a", "/a2.cache");
  x.len = strlen (x.text);
  /* In place of a.json. */
  assert_int_equal (
      gw_config_load_extra (t->main, &x, false, &cfg, err, sizeof err), 0);
  assert_int_equal (cfg.nvolumes, 3);
  assert_string_equal (cfg.volumes[2].name, "a");
  assert_string_equal (cfg.volumes[2].cache, "/a2.cache");
  assert_string_equal (cfg.volumes[2].source, "in.json");
  gw_config_free (&cfg);
  /* A conflict, named in the extra's file. */
  x.text = vol ("c", "/b.cache");
  x.len = strlen (x.text);
  assert_int_equal (
      gw_config_load_extra (t->main, &x, false, &cfg, err, sizeof err), -1);
  assert_string_equal (
      err, "in.json:3:11: cache: \"/b.cache\" is also the cache of volume "
           "\"b\"");
  /* No volumes_dir. */
  write_file (t->main, "{\"volumes\": [{\"name\": \"m\", \"backend\": "
                       "{\"type\": \"file\", \"path\": \"/m\"}, \"cache\": "
                       "\"/c\"}]}");
  assert_int_equal (
      gw_config_load_extra (t->main, &x, false, &cfg, err, sizeof err), -1);
  assert_non_null (strstr (err, ": no volumes_dir"));
}

static void
test_names (void **state)
{
  (void)state;
  assert_true (gw_is_volume_name ("pvc-1.a_b"));
  assert_false (gw_is_volume_name ("../x"));
  assert_false (gw_is_volume_name (""));
}

int
main (void)
{
  static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown (test_order_and_skips, setup, teardown),
    cmocka_unit_test_setup_teardown (test_empty_and_missing, setup, teardown),
    cmocka_unit_test_setup_teardown (test_errors, setup, teardown),
    cmocka_unit_test_setup_teardown (test_extra, setup, teardown),
    cmocka_unit_test (test_names),
  };

  return cmocka_run_group_tests_name ("config-voldir", tests, NULL, NULL);
}
