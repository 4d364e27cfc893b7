/* appliance/config.c: hhc-gateway.json(5).  A full config parses to
 * the expected struct, the defaults apply, the other forms of listen,
 * tls and metrics, volumes found by name and compared, values in the
 * filter's syntax, and gw_config_load on a file and on none.  (Every
 * error's message: test-config-errors.c; check_paths:
 * test-config-paths.c; volumes_dir: test-config-voldir.c; encryption:
 * test-config-encryption.c.)
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

/* By its path: on the include path, config.h is autoconf's. */
#include "gwconfig.h"

#include "configtmp.h"

/* A volume that passes, for texts about something else. */
#define VOL                                                                    \
  "{\"name\": \"a\", \"backend\": {\"type\": \"file\", \"path\": \"/x\"}, "    \
  "\"cache\": \"/c\"}"

/* Every field set. */
static const char full[]
    = "{\n"
      "  \"listen\": {\"address\": \"0.0.0.0\", \"port\": 10810},\n"
      "  \"tls\": {\"certificates\": \"/etc/hhc/pki\"},\n"
      "  \"nbdkit\": \"/usr/sbin/nbdkit\",\n"
      "  \"filter\": \"/opt/hhc/nbdkit-hhc-filter.so\",\n"
      "  \"plugin_dir\": \"/opt/hhc/plugins\",\n"
      "  \"run_dir\": \"/run/gw\",\n"
      "  \"metrics\": {\"address\": \"127.0.0.2\", \"port\": 9811},\n"
      "  \"restart\": {\"min_ms\": 100, \"max_ms\": 5000},\n"
      "  \"volumes\": [\n"
      "    {\n"
      "      \"name\": \"vm1\",\n"
      "      \"backend\": {\"type\": \"file\", \"path\": \"/srv/vm1.img\"},\n"
      "      \"cache\": \"/dev/nvme0n1p3\",\n"
      "      \"cache_size\": \"1G\",\n"
      "      \"log\": [\"/dev/sdb1\", \"/dev/sdc1\"],\n"
      "      \"log_size\": \"256M\",\n"
      "      \"mode\": \"hhc\",\n"
      "      \"backend_id\": \"vm1-backend\",\n"
      "      \"drain_on_stop\": true,\n"
      "      \"tuning\": {\"block-size\": \"4K\", \"dirty-high\": 60,\n"
      "                 \"direct\": true, \"hot-ratio\": \"4:1\"}\n"
      "    },\n"
      "    {\n"
      "      \"name\": \"Vol_2.b-c\",\n"
      "      \"backend\": {\"type\": \"nbd\",\n"
      "                  \"uri\": \"nbd+unix:///?socket=/x\"},\n"
      "      \"cache\": \"/var/lib/hhc/v2.cache\",\n"
      "      \"log\": \"/dev/sdd1\",\n"
      "      \"drain_on_stop\": false\n"
      "    },\n"
      "    {\n"
      "      \"name\": \"cos1\",\n"
      "      \"backend\": {\"type\": \"cos\",\n"
      "                  \"endpoint\": \"http://127.0.0.1:9000\",\n"
      "                  \"bucket\": \"b\", \"prefix\": \"vm1\",\n"
      "                  \"region\": \"us-east-1\",\n"
      "                  \"credentials\": \"/etc/hhc/vm1.cred\",\n"
      "                  \"size\": \"10G\", \"tls_verify\": false,\n"
      "                  \"ca_file\": \"/etc/ssl/x.pem\"},\n"
      "      \"cache\": \"/dev/nvme0n1p4\",\n"
      "      \"mode\": \"wt\"\n"
      "    },\n"
      "    {\n"
      "      \"name\": \"lun1\",\n"
      "      \"backend\": {\"type\": \"iscsi\",\n"
      "                  \"url\": "
      "\"iscsi://127.0.0.1:3260/iqn.2026-01.test:lun1/1\",\n"
      "                  \"chap_file\": \"/etc/hhc/chap\",\n"
      "                  \"initiator\": \"iqn.2026-01.test:gw\",\n"
      "                  \"sessions\": 8, \"timeout\": 0},\n"
      "      \"cache\": \"/dev/nvme0n1p5\",\n"
      "      \"cache_size\": 1048576\n"
      "    }\n"
      "  ]\n"
      "}\n";

static void
test_full (void **state)
{
  struct gw_config cfg;
  char err[512] = "";
  const struct gw_volume *v;

  assert_int_equal (
      gw_config_parse ("t.json", full, false, &cfg, err, sizeof err), 0);
  assert_string_equal (err, "");
  assert_string_equal (cfg.file, "t.json");
  assert_string_equal (cfg.listen_address, "0.0.0.0");
  assert_int_equal (cfg.listen_port, 10810);
  assert_null (cfg.listen_socket);
  assert_string_equal (cfg.tls_certificates, "/etc/hhc/pki");
  assert_null (cfg.tls_psk_file);
  assert_string_equal (cfg.nbdkit, "/usr/sbin/nbdkit");
  assert_string_equal (cfg.filter, "/opt/hhc/nbdkit-hhc-filter.so");
  assert_string_equal (cfg.plugin_dir, "/opt/hhc/plugins");
  assert_string_equal (cfg.run_dir, "/run/gw");
  assert_true (cfg.metrics);
  assert_string_equal (cfg.metrics_address, "127.0.0.2");
  assert_int_equal (cfg.metrics_port, 9811);
  assert_int_equal (cfg.restart_min_ms, 100);
  assert_int_equal (cfg.restart_max_ms, 5000);
  assert_int_equal (cfg.nvolumes, 4);

  v = &cfg.volumes[0];
  assert_string_equal (v->name, "vm1");
  assert_int_equal (v->type, GW_BACKEND_FILE);
  assert_string_equal (v->path, "/srv/vm1.img");
  assert_null (v->uri);
  assert_null (v->endpoint);
  assert_null (v->url);
  assert_string_equal (v->cache, "/dev/nvme0n1p3");
  assert_string_equal (v->cache_size, "1G");
  assert_int_equal (v->nlogs, 2);
  assert_string_equal (v->logs[0], "/dev/sdb1");
  assert_string_equal (v->logs[1], "/dev/sdc1");
  assert_null (v->logs[2]);
  assert_string_equal (v->log_size, "256M");
  assert_string_equal (v->mode, "hhc");
  assert_string_equal (v->backend_id, "vm1-backend");
  assert_true (v->drain_on_stop);
  assert_int_equal (v->ntuning, 4);
  assert_string_equal (v->tuning[0].key, "block-size");
  assert_string_equal (v->tuning[0].value, "4K");
  assert_string_equal (v->tuning[1].key, "dirty-high");
  assert_string_equal (v->tuning[1].value, "60");
  assert_string_equal (v->tuning[2].key, "direct");
  assert_string_equal (v->tuning[2].value, "true");
  assert_string_equal (v->tuning[3].key, "hot-ratio");
  assert_string_equal (v->tuning[3].value, "4:1");

  v = &cfg.volumes[1];
  assert_string_equal (v->name, "Vol_2.b-c");
  assert_int_equal (v->type, GW_BACKEND_NBD);
  assert_string_equal (v->uri, "nbd+unix:///?socket=/x");
  assert_null (v->path);
  assert_string_equal (v->cache, "/var/lib/hhc/v2.cache");
  assert_null (v->cache_size);
  assert_int_equal (v->nlogs, 1);
  assert_string_equal (v->logs[0], "/dev/sdd1");
  assert_null (v->log_size);
  assert_null (v->mode);
  assert_null (v->backend_id);
  assert_false (v->drain_on_stop);
  assert_int_equal (v->ntuning, 0);

  v = &cfg.volumes[2];
  assert_string_equal (v->name, "cos1");
  assert_int_equal (v->type, GW_BACKEND_COS);
  assert_string_equal (v->endpoint, "http://127.0.0.1:9000");
  assert_string_equal (v->bucket, "b");
  assert_string_equal (v->prefix, "vm1");
  assert_string_equal (v->region, "us-east-1");
  assert_string_equal (v->credentials, "/etc/hhc/vm1.cred");
  assert_string_equal (v->size, "10G");
  assert_false (v->tls_verify);
  assert_string_equal (v->ca_file, "/etc/ssl/x.pem");
  assert_string_equal (v->cache, "/dev/nvme0n1p4");
  assert_int_equal (v->nlogs, 0);
  assert_string_equal (v->mode, "wt");

  v = &cfg.volumes[3];
  assert_string_equal (v->name, "lun1");
  assert_int_equal (v->type, GW_BACKEND_ISCSI);
  assert_string_equal (v->url,
                       "iscsi://127.0.0.1:3260/iqn.2026-01.test:lun1/1");
  assert_string_equal (v->chap_file, "/etc/hhc/chap");
  assert_string_equal (v->initiator, "iqn.2026-01.test:gw");
  assert_int_equal (v->sessions, 8);
  assert_int_equal (v->timeout, 0);
  assert_string_equal (v->cache, "/dev/nvme0n1p5");
  assert_string_equal (v->cache_size, "1048576");

  gw_config_free (&cfg);
  assert_null (cfg.file);
  assert_null (cfg.volumes);
  assert_int_equal (cfg.nvolumes, 0);
}

static void
test_defaults (void **state)
{
  struct gw_config cfg;
  char err[512] = "";
  const struct gw_volume *v;

  assert_int_equal (
      gw_config_parse ("t.json",
                       "{\"volumes\": [{\"name\": \"c\", \"backend\": "
                       "{\"type\": \"cos\", \"endpoint\": \"https://h\", "
                       "\"bucket\": \"b\", \"credentials\": \"/k\"}, "
                       "\"cache\": \"/c\"}]}",
                       false, &cfg, err, sizeof err),
      0);
  assert_string_equal (cfg.listen_address, "127.0.0.1");
  assert_int_equal (cfg.listen_port, 10809);
  assert_null (cfg.listen_socket);
  assert_null (cfg.tls_certificates);
  assert_null (cfg.tls_psk_file);
  assert_string_equal (cfg.nbdkit, "nbdkit");
  assert_string_equal (cfg.filter, "hhc");
  assert_null (cfg.plugin_dir);
  assert_string_equal (cfg.run_dir, "/run/hhc");
  assert_true (cfg.metrics);
  assert_string_equal (cfg.metrics_address, "127.0.0.1");
  assert_int_equal (cfg.metrics_port, 9810);
  assert_int_equal (cfg.restart_min_ms, 500);
  assert_int_equal (cfg.restart_max_ms, 30000);
  assert_int_equal (cfg.nvolumes, 1);
  v = &cfg.volumes[0];
  assert_int_equal (v->type, GW_BACKEND_COS);
  assert_null (v->prefix);
  assert_null (v->region);
  assert_null (v->size);
  assert_true (v->tls_verify);
  assert_null (v->ca_file);
  assert_null (v->cache_size);
  assert_int_equal (v->nlogs, 0);
  assert_null (v->log_size);
  assert_null (v->mode);
  assert_null (v->backend_id);
  assert_false (v->drain_on_stop);
  assert_int_equal (v->ntuning, 0);
  gw_config_free (&cfg);

  /* Empty objects give the defaults too; "metrics": true as well. */
  assert_int_equal (
      gw_config_parse ("t.json",
                       "{\"listen\": {}, \"restart\": {}, \"metrics\": true, "
                       "\"volumes\": [" VOL "]}",
                       false, &cfg, err, sizeof err),
      0);
  assert_string_equal (cfg.listen_address, "127.0.0.1");
  assert_int_equal (cfg.listen_port, 10809);
  assert_true (cfg.metrics);
  assert_string_equal (cfg.metrics_address, "127.0.0.1");
  assert_int_equal (cfg.metrics_port, 9810);
  assert_int_equal (cfg.restart_min_ms, 500);
  assert_int_equal (cfg.restart_max_ms, 30000);
  gw_config_free (&cfg);
}

/* The other forms: a socket, a PSK, no metrics, only a port. */
static void
test_alternatives (void **state)
{
  struct gw_config cfg;
  char err[512] = "";

  assert_int_equal (
      gw_config_parse ("t.json",
                       "{\"listen\": {\"socket\": \"/run/hhc/nbd.sock\"}, "
                       "\"tls\": {\"psk_file\": \"/etc/hhc/psk\"}, "
                       "\"metrics\": false, \"volumes\": [" VOL "]}",
                       false, &cfg, err, sizeof err),
      0);
  assert_null (cfg.listen_address);
  assert_int_equal (cfg.listen_port, 0);
  assert_string_equal (cfg.listen_socket, "/run/hhc/nbd.sock");
  assert_null (cfg.tls_certificates);
  assert_string_equal (cfg.tls_psk_file, "/etc/hhc/psk");
  assert_false (cfg.metrics);
  assert_null (cfg.metrics_address);
  gw_config_free (&cfg);

  assert_int_equal (
      gw_config_parse ("t.json",
                       "{\"listen\": {\"port\": 1}, \"metrics\": "
                       "{\"address\": \"::\"}, \"restart\": {\"max_ms\": 10, "
                       "\"min_ms\": 10}, \"volumes\": [" VOL "]}",
                       false, &cfg, err, sizeof err),
      0);
  assert_string_equal (cfg.listen_address, "127.0.0.1");
  assert_int_equal (cfg.listen_port, 1);
  assert_string_equal (cfg.metrics_address, "::");
  assert_int_equal (cfg.metrics_port, 9810);
  assert_int_equal (cfg.restart_min_ms, 10);
  assert_int_equal (cfg.restart_max_ms, 10);
  gw_config_free (&cfg);
}

/* The first volume of text, parsed into *cfg. */
static const struct gw_volume *
parse_volume (const char *text, struct gw_config *cfg)
{
  char err[512] = "";

  if (gw_config_parse ("t.json", text, false, cfg, err, sizeof err) != 0)
    fail_msg ("%s", err);
  return &cfg->volumes[0];
}

static void
test_find_equal (void **state)
{
  static const char base[]
      = "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
        "\"path\": \"/x\"}, \"cache\": \"/c\", \"log\": \"/l\", "
        "\"tuning\": {\"dirty-low\": 10}},"
        " {\"name\": \"b\", \"backend\": {\"type\": \"nbd\", \"uri\": "
        "\"nbd://h\"}, \"cache\": \"/d\"}]}";
  static const char *const changed[] = {
    /* each differs from base's volume a in one field */
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/y\"}, \"cache\": \"/c\", \"log\": \"/l\", "
    "\"tuning\": {\"dirty-low\": 10}}]}",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"log\": [\"/l\", \"/m\"], "
    "\"tuning\": {\"dirty-low\": 10}}]}",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"log\": \"/l\", "
    "\"tuning\": {\"dirty-low\": 11}}]}",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"log\": \"/l\", "
    "\"tuning\": {\"dirty-low\": 10, \"format\": \"auto\"}}]}",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"log\": \"/l\", "
    "\"tuning\": {\"dirty-low\": 10}, \"drain_on_stop\": true}]}",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"log\": \"/l\", "
    "\"tuning\": {\"dirty-low\": 10}, \"mode\": \"hhc\"}]}",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"cache_size\": \"1G\", "
    "\"log\": \"/l\", \"tuning\": {\"dirty-low\": 10}}]}",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"nbd\", "
    "\"uri\": \"nbd://x\"}, \"cache\": \"/c\", \"log\": \"/l\", "
    "\"tuning\": {\"dirty-low\": 10}}]}",
  };
  struct gw_config c1, c2, c3;
  const struct gw_volume *a;

  a = parse_volume (base, &c1);
  parse_volume (base, &c2);
  assert_ptr_equal (gw_config_find (&c1, "a"), &c1.volumes[0]);
  assert_ptr_equal (gw_config_find (&c1, "b"), &c1.volumes[1]);
  assert_null (gw_config_find (&c1, "c"));
  assert_null (gw_config_find (&c1, "A"));
  assert_true (gw_volume_equal (a, &c2.volumes[0]));
  assert_true (gw_volume_equal (&c1.volumes[1], &c2.volumes[1]));
  assert_false (gw_volume_equal (a, &c2.volumes[1]));
  for (size_t i = 0; i < sizeof changed / sizeof changed[0]; i++)
    {
      const struct gw_volume *b = parse_volume (changed[i], &c3);
      if (gw_volume_equal (a, b))
        fail_msg ("changed[%zu] is equal", i);
      gw_config_free (&c3);
    }
  gw_config_free (&c1);
  gw_config_free (&c2);
  /* cos: tls_verify counts too. */
  a = parse_volume ("{\"volumes\": [{\"name\": \"c\", \"backend\": {\"type\": "
                    "\"cos\", \"endpoint\": \"https://h\", \"bucket\": \"b\", "
                    "\"credentials\": \"/k\"}, \"cache\": \"/c\"}]}",
                    &c1);
  parse_volume ("{\"volumes\": [{\"name\": \"c\", \"backend\": {\"type\": "
                "\"cos\", \"endpoint\": \"https://h\", \"bucket\": \"b\", "
                "\"credentials\": \"/k\", \"tls_verify\": false}, "
                "\"cache\": \"/c\"}]}",
                &c2);
  assert_false (gw_volume_equal (a, &c2.volumes[0]));
  gw_config_free (&c1);
  gw_config_free (&c2);
}

/* Sizes, numbers and booleans as strings take the filter's syntax
 * (common/parse.h), which the values are passed on in.
 */
static void
test_filter_syntax (void **state)
{
  static const char *const good[] = {
    "\"cache_size\": \"64KiB\"",
    "\"cache_size\": \"128s\"",
    "\"cache_size\": \"1gB\"",
    "\"cache_size\": \"1P\"",
    "\"cache_size\": \"65536b\"",
    "\"tuning\": {\"block-size\": \"4KiB\"}",
    "\"tuning\": {\"segment-size\": \"2048s\"}",
    "\"tuning\": {\"dirty-high\": \"060%\"}",
    "\"tuning\": {\"direct\": \"Y\"}",
    "\"tuning\": {\"direct\": \"f\"}",
  };
  static const char *const bad[] = {
    "\"cache_size\": \"64Ki\"",
    "\"cache_size\": \"64KiBB\"",
    "\"cache_size\": \" 64K\"",
    "\"cache_size\": \"+64K\"",
    "\"cache_size\": \"0x10000\"",
    "\"tuning\": {\"dirty-high\": \"+60\"}",
    "\"tuning\": {\"dirty-high\": \" 60\"}",
    "\"tuning\": {\"direct\": \"ja\"}",
  };
  char text[512], err[512];
  struct gw_config cfg;

  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
    {
      snprintf (text, sizeof text,
                "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": "
                "\"file\", \"path\": \"/x\"}, \"cache\": \"/c\", %s}]}",
                good[i]);
      parse_volume (text, &cfg);
      gw_config_free (&cfg);
    }
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
      snprintf (text, sizeof text,
                "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": "
                "\"file\", \"path\": \"/x\"}, \"cache\": \"/c\", %s}]}",
                bad[i]);
      if (gw_config_parse ("t.json", text, false, &cfg, err, sizeof err) == 0)
        fail_msg ("bad[%zu] was accepted", i);
    }
}

static void
test_type_to_string (void **state)
{
  assert_string_equal (gw_backend_type_to_string (GW_BACKEND_FILE), "file");
  assert_string_equal (gw_backend_type_to_string (GW_BACKEND_NBD), "nbd");
  assert_string_equal (gw_backend_type_to_string (GW_BACKEND_COS), "cos");
  assert_string_equal (gw_backend_type_to_string (GW_BACKEND_ISCSI), "iscsi");
}

/* ------------------------------------------------------------------ */
/* gw_config_load. */

static void
test_load_missing (void **state)
{
  struct gw_config cfg;
  char err[512] = "";

  assert_int_equal (gw_config_load ("/nonexistent/hhc/gateway.json", false,
                                    &cfg, err, sizeof err),
                    -1);
  assert_string_equal (
      err, "/nonexistent/hhc/gateway.json: No such file or directory");
  assert_null (cfg.file);
  assert_null (cfg.volumes);
}

static void
test_load_file (void **state)
{
  struct tmp *t = *state;
  struct gw_config cfg;
  char err[512] = "", want[300];
  FILE *f = fopen (t->file[2], "w");

  assert_non_null (f);
  fputs (full, f);
  fclose (f);
  assert_int_equal (gw_config_load (t->file[2], false, &cfg, err, sizeof err),
                    0);
  assert_string_equal (cfg.file, t->file[2]);
  assert_int_equal (cfg.nvolumes, 4);
  gw_config_free (&cfg);

  f = fopen (t->file[2], "w");
  assert_non_null (f);
  fputs ("{\n  \"volumes\": [],\n}\n", f);
  fclose (f);
  assert_int_equal (gw_config_load (t->file[2], false, &cfg, err, sizeof err),
                    -1);
  snprintf (want, sizeof want, "%s:3:1: string or '}' expected near '}'",
            t->file[2]);
  assert_string_equal (err, want);

  /* A directory. */
  assert_int_equal (gw_config_load (t->dir, false, &cfg, err, sizeof err), -1);
  snprintf (want, sizeof want, "%s: Is a directory", t->dir);
  assert_string_equal (err, want);
}

int
main (void)
{
  static const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_full),
    cmocka_unit_test (test_defaults),
    cmocka_unit_test (test_alternatives),
    cmocka_unit_test (test_find_equal),
    cmocka_unit_test (test_filter_syntax),
    cmocka_unit_test (test_type_to_string),
    cmocka_unit_test (test_load_missing),
    cmocka_unit_test_setup_teardown (test_load_file, setup_tmp, teardown_tmp),
  };
  return cmocka_run_group_tests_name ("config", tests, NULL, NULL);
}
