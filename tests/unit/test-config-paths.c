/* appliance/config.c: hhc-gateway.json(5) with check_paths, on
 * temporary files (configtmp.h).  The files a volume names must
 * exist: a missing one is refused with its position (cache, backend
 * path, cos credentials, a log without log_size); with cache_size
 * (log_size) a missing file is fine where its directory exists, and a
 * new cache of a file backend needs a backend_id; a directory is
 * refused; one file spelled two ways is still one file.
 */
#include <config.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

/* By its path: on the include path, config.h is autoconf's. */
#include "gwconfig.h"

#include "configtmp.h"

/* "LINE:COL" of what follows the first after in text. */
static void
pos_after (const char *text, const char *after, char *buf, size_t size)
{
  const char *p = strstr (text, after);
  int line = 1, col = 1;

  assert_non_null (p);
  p += strlen (after);
  for (const char *q = text; q < p; q++)
    {
      col++;
      if (*q == '\n')
        line++, col = 1;
    }
  snprintf (buf, size, "%d:%d", line, col);
}

/* A volume text with this backend, cache and extra keys. */
static char *
vol_text (const char *backend, const char *cache, const char *extra)
{
  char *s;

  if (asprintf (&s,
                "{\"volumes\": [{\"name\": \"a\",\n"
                " \"backend\": %s,\n"
                " \"cache\": \"%s\"%s}]}",
                backend, cache, extra)
      == -1)
    fail ();
  return s;
}

/* text parses with check_paths, or fails with "t.json:POS: want" where
 * POS is that of the value after the text after.
 */
static void
check_paths (const char *text, const char *after, const char *want)
{
  struct gw_config cfg;
  char err[512] = "", pos[32], full_want[600];
  int r = gw_config_parse ("t.json", text, true, &cfg, err, sizeof err);

  if (after == NULL)
    {
      if (r != 0)
        fail_msg ("%s", err);
      gw_config_free (&cfg);
      return;
    }
  pos_after (text, after, pos, sizeof pos);
  snprintf (full_want, sizeof full_want, "t.json:%s: %s", pos, want);
  assert_int_equal (r, -1);
  assert_string_equal (err, full_want);
  assert_null (cfg.volumes);
}

static void
test_paths_exist (void **state)
{
  struct tmp *t = *state;
  char backend[200], extra[300];
  char *text;

  snprintf (backend, sizeof backend, "{\"type\": \"file\", \"path\": \"%s\"}",
            t->file[0]);
  snprintf (extra, sizeof extra, ", \"log\": \"%s\", \"mode\": \"hhc\"",
            t->file[2]);
  text = vol_text (backend, t->file[1], extra);
  check_paths (text, NULL, NULL);
  free (text);
  /* The same without check_paths on names that do not exist. */
  text = vol_text ("{\"type\": \"file\", \"path\": \"/nonexistent/b\"}",
                   "/nonexistent/c", "");
  {
    struct gw_config cfg;
    char err[512] = "";
    assert_int_equal (
        gw_config_parse ("t.json", text, false, &cfg, err, sizeof err), 0);
    gw_config_free (&cfg);
  }
  free (text);
}

static void
test_paths_missing (void **state)
{
  struct tmp *t = *state;
  char backend[200], cache[200], want[400];
  char *text;

  snprintf (backend, sizeof backend, "{\"type\": \"file\", \"path\": \"%s\"}",
            t->file[0]);
  snprintf (cache, sizeof cache, "%s/none", t->dir);
  text = vol_text (backend, cache, "");
  snprintf (want, sizeof want,
            "volumes[0].cache: \"%s\": No such file or directory", cache);
  check_paths (text, "\"cache\": ", want);
  free (text);
}

static void
test_paths_missing_backend (void **state)
{
  struct tmp *t = *state;
  char want[400];
  char *text = vol_text ("{\"type\": \"file\", \"path\": \"/nonexistent/b\"}",
                         t->file[1], "");

  snprintf (want, sizeof want,
            "volumes[0].backend.path: \"/nonexistent/b\": "
            "No such file or directory");
  check_paths (text, "\"path\": ", want);
  free (text);
}

static void
test_paths_credentials (void **state)
{
  struct tmp *t = *state;
  char *text
      = vol_text ("{\"type\": \"cos\", \"endpoint\": \"http://h\", "
                  "\"bucket\": \"b\", \"credentials\": \"/nonexistent/k\"}",
                  t->file[1], "");

  check_paths (text, "\"credentials\": ",
               "volumes[0].backend.credentials: \"/nonexistent/k\": "
               "No such file or directory");
  free (text);
}

/* With cache_size (log_size), a missing file is fine where its
 * directory exists.
 */
static void
test_paths_create (void **state)
{
  struct tmp *t = *state;
  char backend[200], cache[200], extra[300], want[400];
  char *text;

  snprintf (backend, sizeof backend, "{\"type\": \"file\", \"path\": \"%s\"}",
            t->file[0]);
  snprintf (cache, sizeof cache, "%s/new.cache", t->dir);
  snprintf (extra, sizeof extra,
            ", \"cache_size\": \"1M\", \"log\": \"%s/new.log\", "
            "\"log_size\": \"8M\", \"backend_id\": \"vol-a\"",
            t->dir);
  text = vol_text (backend, cache, extra);
  check_paths (text, NULL, NULL);
  free (text);

  /* A new cache of a file backend needs a backend_id (the filter
   * formats none without); an existing one does not (test_paths_exist).
   */
  text = vol_text (backend, cache, ", \"cache_size\": \"1M\"");
  snprintf (want, sizeof want,
            "volumes[0]: a file backend needs \"backend_id\" (a name unique "
            "to it) before its cache \"%s\" is made",
            cache);
  check_paths (text, "\"volumes\": [", want);
  free (text);

  snprintf (cache, sizeof cache, "%s/nodir/new.cache", t->dir);
  text = vol_text (backend, cache, ", \"cache_size\": \"1M\"");
  snprintf (want, sizeof want,
            "volumes[0].cache: \"%s\": directory \"%s/nodir\": No such file "
            "or directory",
            cache, t->dir);
  check_paths (text, "\"cache\": ", want);
  free (text);

  /* The log with no log_size must exist. */
  snprintf (extra, sizeof extra, ", \"log\": \"%s/new.log\"", t->dir);
  text = vol_text (backend, t->file[1], extra);
  snprintf (want, sizeof want,
            "volumes[0].log: \"%s/new.log\": No such file or directory",
            t->dir);
  check_paths (text, "\"log\": ", want);
  free (text);
}

static void
test_paths_directory (void **state)
{
  struct tmp *t = *state;
  char backend[200], want[400];
  char *text;

  snprintf (backend, sizeof backend, "{\"type\": \"file\", \"path\": \"%s\"}",
            t->file[0]);
  text = vol_text (backend, t->dir, "");
  snprintf (want, sizeof want, "volumes[0].cache: \"%s\": Is a directory",
            t->dir);
  check_paths (text, "\"cache\": ", want);
  free (text);
}

/* One file spelled two ways is still one file. */
static void
test_paths_realpath (void **state)
{
  struct tmp *t = *state;
  char backend[200], extra[300], other[200], want[400];
  char *text;

  snprintf (backend, sizeof backend, "{\"type\": \"file\", \"path\": \"%s\"}",
            t->file[0]);
  snprintf (other, sizeof other, "%s/./../%s", t->dir,
            t->file[1] + strlen ("/tmp/"));
  snprintf (extra, sizeof extra, ", \"log\": \"%s\", \"mode\": \"hhc\"", other);
  text = vol_text (backend, t->file[1], extra);
  snprintf (want, sizeof want,
            "volumes[0].log: \"%s\" is also the cache of volume \"a\"", other);
  check_paths (text, "\"log\": ", want);
  free (text);
}

int
main (void)
{
  static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown (test_paths_exist, setup_tmp, teardown_tmp),
    cmocka_unit_test_setup_teardown (test_paths_missing, setup_tmp,
                                     teardown_tmp),
    cmocka_unit_test_setup_teardown (test_paths_missing_backend, setup_tmp,
                                     teardown_tmp),
    cmocka_unit_test_setup_teardown (test_paths_credentials, setup_tmp,
                                     teardown_tmp),
    cmocka_unit_test_setup_teardown (test_paths_create, setup_tmp,
                                     teardown_tmp),
    cmocka_unit_test_setup_teardown (test_paths_directory, setup_tmp,
                                     teardown_tmp),
    cmocka_unit_test_setup_teardown (test_paths_realpath, setup_tmp,
                                     teardown_tmp),
  };
  return cmocka_run_group_tests_name ("config-paths", tests, NULL, NULL);
}
