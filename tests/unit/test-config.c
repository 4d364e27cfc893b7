/* appliance/config.c: hhc-gateway.json(5).  A full config parses to
 * the expected struct, the defaults apply, every error class gives its
 * one line with the position of the offending value (or key), the
 * check_paths rules on temporary files, and gw_config_load on a file
 * and on none.  Each error case is a test of its own.
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

/* A volume that passes, for texts about something else. */
#define VOL                                                                    \
  "{\"name\": \"a\", \"backend\": {\"type\": \"file\", \"path\": \"/x\"}, "    \
  "\"cache\": \"/c\"}"

struct error_case {
  const char *name;
  const char *text;
  const char *want; /* the whole message */
};

/* Parsed with check_paths false, as "t.json". */
static const struct error_case error_cases[] = {
  { "syntax",
    "{\n"
    "  \"volumes\": [\n"
    "    {\"name\": \"a\",}\n"
    "  ]\n"
    "}",
    "t.json:3:18: string or '}' expected near '}'" },
  { "empty", "", "t.json:1:1: '[' or '{' expected near end of file" },
  { "utf8_column",
    "{\"nbdkit\": \"\303\251t\303\251\", \"x\": 1, \"volumes\": [{\"name\": "
    "\"a\", \"backend\": {\"type\": \"file\", \"path\": \"/x\"}, \"cache\": "
    "\"/c\"}]}",
    "t.json:1:21: x: unknown key" },
  { "not_object", "[\"volumes\"]",
    "t.json:1:1: the configuration must be a JSON object" },
  { "dup_top",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\"}],\n"
    " \"volumes\": []}",
    "t.json:2:2: volumes: duplicate key" },
  { "dup_nested",
    "{\"volumes\": [\n"
    " {\"name\": \"a\", \"backend\": {\"type\": \"file\", \"path\": \"/x\",\n"
    "  \"path\": \"/y\"}, \"cache\": \"/c\"}]}",
    "t.json:3:3: volumes[0].backend.path: duplicate key" },
  { "unknown_top",
    "{\"volume\": 1, \"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": "
    "\"file\", \"path\": \"/x\"}, \"cache\": \"/c\"}], \"colour\": \"red\"}",
    "t.json:1:2: volume: unknown key" },
  { "unknown_volume",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"cache-size\": \"1G\"}]}",
    "t.json:1:86: volumes[0].cache-size: unknown key" },
  { "unknown_backend",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\", \"uri\": \"nbd://x\"}, \"cache\": \"/c\"}]}",
    "t.json:1:70: volumes[0].backend.uri: unknown key" },
  { "missing_volumes", "{\"nbdkit\": \"nbdkit\"}",
    "t.json:1:1: volumes: required key missing" },
  { "volumes_empty", "{\"volumes\": []}",
    "t.json:1:13: volumes: must hold at least one volume" },
  { "volumes_type", "{\"volumes\": {}}",
    "t.json:1:13: volumes: must be an array" },
  { "volume_type",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\"}, \"b\"]}",
    "t.json:1:87: volumes[1]: must be an object" },
  { "missing_name",
    "{\"volumes\": [{\"backend\": {\"type\": \"file\", \"path\": \"/x\"}, "
    "\"cache\": \"/c\"}]}",
    "t.json:1:14: volumes[0].name: required key missing" },
  { "bad_name",
    "{\"volumes\": [{\"name\": \"vm 1\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\"}]}",
    "t.json:1:23: volumes[0].name: must be 1 to 64 of A-Z a-z 0-9 . _ -" },
  { "long_name",
    "{\"volumes\": [{\"name\": "
    "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\", "
    "\"backend\": {\"type\": \"file\", \"path\": \"/x\"}, \"cache\": \"/c\"}]}",
    "t.json:1:23: volumes[0].name: must be 1 to 64 of A-Z a-z 0-9 . _ -" },
  { "name_type",
    "{\"volumes\": [{\"name\": 1, \"backend\": {\"type\": \"file\", \"path\": "
    "\"/x\"}, \"cache\": \"/c\"}]}",
    "t.json:1:23: volumes[0].name: must be a string" },
  { "dup_name",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\"},\n"
    "  {\"name\": \"a\", \"backend\": {\"type\": \"file\", \"path\": \"/y\"}, "
    "\"cache\": \"/d\"}]}",
    "t.json:2:12: volumes[1].name: \"a\" is also the name of volumes[0]" },
  { "missing_backend", "{\"volumes\": [{\"name\": \"a\", \"cache\": \"/c\"}]}",
    "t.json:1:14: volumes[0].backend: required key missing" },
  { "backend_type",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"ceph\"}, "
    "\"cache\": \"/c\"}]}",
    "t.json:1:48: volumes[0].backend.type: must be file, nbd, cos or iscsi" },
  { "missing_type",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"path\": \"/x\"}, "
    "\"cache\": \"/c\"}]}",
    "t.json:1:39: volumes[0].backend.type: required key missing" },
  { "missing_path",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\"}, "
    "\"cache\": \"/c\"}]}",
    "t.json:1:39: volumes[0].backend.path: required key missing" },
  { "empty_path",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"\"}, \"cache\": \"/c\"}]}",
    "t.json:1:64: volumes[0].backend.path: must not be empty" },
  { "control_char",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\\ny\"}, \"cache\": \"/c\"}]}",
    "t.json:1:64: volumes[0].backend.path: must not contain control "
    "characters" },
  { "nbd_uri",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"nbd\", "
    "\"uri\": \"unix:/x\"}, \"cache\": \"/c\"}]}",
    "t.json:1:62: volumes[0].backend.uri: must start with nbd://, nbd+unix://, "
    "nbds:// or nbds+unix://" },
  { "cos_endpoint",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"cos\", "
    "\"endpoint\": \"ftp://h\", \"bucket\": \"b\", \"credentials\": \"/k\"}, "
    "\"cache\": \"/c\"}]}",
    "t.json:1:67: volumes[0].backend.endpoint: must start with http:// or "
    "https://" },
  { "cos_bucket",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"cos\", "
    "\"endpoint\": \"http://h\", \"bucket\": \"a/b\", \"credentials\": "
    "\"/k\"}, \"cache\": \"/c\"}]}",
    "t.json:1:89: volumes[0].backend.bucket: not a bucket name (it holds a "
    "'/')" },
  { "cos_credentials",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"cos\", "
    "\"endpoint\": \"http://h\", \"bucket\": \"b\"}, \"cache\": \"/c\"}]}",
    "t.json:1:39: volumes[0].backend.credentials: required key missing" },
  { "cos_size",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"cos\", "
    "\"endpoint\": \"http://h\", \"bucket\": \"b\", \"credentials\": \"/k\", "
    "\"size\": 1000}, \"cache\": \"/c\"}]}",
    "t.json:1:123: volumes[0].backend.size: must be a positive multiple of "
    "512" },
  { "cos_tls_verify",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"cos\", "
    "\"endpoint\": \"http://h\", \"bucket\": \"b\", \"credentials\": \"/k\", "
    "\"tls_verify\": \"no\"}, \"cache\": \"/c\"}]}",
    "t.json:1:129: volumes[0].backend.tls_verify: must be true or false" },
  { "iscsi_scheme",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"iscsi\", "
    "\"url\": \"iscsl://h/iqn.x/1\"}, \"cache\": \"/c\"}]}",
    "t.json:1:64: volumes[0].backend.url: must start with iscsi://" },
  { "iscsi_password",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"iscsi\", "
    "\"url\": \"iscsi://u%p@h/iqn.x/1\"}, \"cache\": \"/c\"}]}",
    "t.json:1:64: volumes[0].backend.url: must not hold a user or password "
    "(put them in chap_file)" },
  { "iscsi_sessions",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"iscsi\", "
    "\"url\": \"iscsi://h/iqn.x/1\", \"sessions\": 0}, \"cache\": \"/c\"}]}",
    "t.json:1:97: volumes[0].backend.sessions: must be an integer from 1 to "
    "64" },
  { "iscsi_timeout",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"iscsi\", "
    "\"url\": \"iscsi://h/iqn.x/1\", \"timeout\": -1}, \"cache\": \"/c\"}]}",
    "t.json:1:96: volumes[0].backend.timeout: must be an integer from 0 to "
    "86400" },
  { "missing_cache",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}}]}",
    "t.json:1:14: volumes[0].cache: required key missing" },
  { "bad_size",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"cache_size\": \"10X\"}]}",
    "t.json:1:100: volumes[0].cache_size: must be a size: digits with an "
    "optional b, s, K, M, G, T, P or E (64M, 64MB and 64MiB are the same)" },
  { "small_size",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"cache_size\": \"63K\"}]}",
    "t.json:1:100: volumes[0].cache_size: must be at least 64K" },
  { "small_log_size",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"log\": \"/l\", \"log_size\": "
    "4194304}]}",
    "t.json:1:111: volumes[0].log_size: must be at least 8M" },
  { "log_type",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"log\": {\"path\": \"/l\"}}]}",
    "t.json:1:93: volumes[0].log: must be a string or an array of strings" },
  { "log_empty",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"log\": []}]}",
    "t.json:1:93: volumes[0].log: must hold 1 to 8 paths" },
  { "log_nine",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"log\": [\"/1\", \"/2\", \"/3\", "
    "\"/4\", \"/5\", \"/6\", \"/7\", \"/8\", \"/9\"]}]}",
    "t.json:1:93: volumes[0].log: must hold 1 to 8 paths" },
  { "log_element",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"log\": [\"/l1\", 2]}]}",
    "t.json:1:101: volumes[0].log[1]: must be a string" },
  { "bad_mode",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"mode\": \"writeback\"}]}",
    "t.json:1:94: volumes[0].mode: must be pt, wt, wb, wbflush or hhc" },
  { "hhc_no_log",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"mode\": \"hhc\"}]}",
    "t.json:1:94: volumes[0].mode: mode hhc needs a log" },
  { "log_size_with_wb",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"log\": \"/l\", "
    "\"log_size\": \"8M\", \"mode\": \"wb\"}]}",
    "t.json:1:125: volumes[0].mode: mode wb only retires the log its cache "
    "was used with in mode hhc, which must exist: remove log_size" },
  { "drain_type",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"drain_on_stop\": 1}]}",
    "t.json:1:103: volumes[0].drain_on_stop: must be true or false" },
  { "tuning_type",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"tuning\": [\"block-size\"]}]}",
    "t.json:1:96: volumes[0].tuning: must be an object" },
  { "tuning_key",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"tuning\": {\"block-size\": "
    "\"4K\", \"cache\": \"/c\"}}]}",
    "t.json:1:117: volumes[0].tuning.cache: unknown key (not a tuning "
    "parameter)" },
  { "tuning_size",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"tuning\": {\"block-size\": "
    "\"3000\"}}]}",
    "t.json:1:111: volumes[0].tuning.block-size: must be a power of two from "
    "512 to 1M" },
  { "tuning_uint",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"tuning\": {\"writeback-threads\": "
    "0}}]}",
    "t.json:1:118: volumes[0].tuning.writeback-threads: must be a whole number "
    "from 1 to 64" },
  { "tuning_seqcut",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"tuning\": {\"seq-cutoff\": "
    "\"4Q\"}}]}",
    "t.json:1:111: volumes[0].tuning.seq-cutoff: must be a size (0: off)" },
  { "tuning_format",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"tuning\": {\"format\": 1}}]}",
    "t.json:1:107: volumes[0].tuning.format: must be auto, force or never" },
  { "tuning_ratio",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"tuning\": {\"hot-ratio\": "
    "\"2:3\"}}]}",
    "t.json:1:110: volumes[0].tuning.hot-ratio: must be N or N:1, N from 1 to "
    "16" },
  { "tuning_dirty",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"tuning\": {\"dirty-high\": 30, "
    "\"dirty-low\": \"40%\"}}]}",
    "t.json:1:128: volumes[0].tuning.dirty-low: must not exceed dirty-high "
    "(30)" },
  { "tuning_dirty_max",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"tuning\": {\"dirty-max\": 50}}]}",
    "t.json:1:110: volumes[0].tuning.dirty-max: must be at least dirty-high "
    "(60)" },
  { "tuning_promote",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"tuning\": {\"promote\": "
    "\"sometimes\"}}]}",
    "t.json:1:108: volumes[0].tuning.promote: must be always or nhit" },
  { "tuning_promote_hits",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"tuning\": {\"promote\": "
    "\"nhit\", \"promote-hits\": 256}}]}",
    "t.json:1:132: volumes[0].tuning.promote-hits: must be a whole number from "
    "1 to 255" },
  { "port_string",
    "{\"listen\": {\"port\": \"10809\"}, \"volumes\": [{\"name\": \"a\", "
    "\"backend\": {\"type\": \"file\", \"path\": \"/x\"}, \"cache\": \"/c\"}]}",
    "t.json:1:21: listen.port: must be an integer from 1 to 65535" },
  { "port_range",
    "{\"listen\": {\"address\": \"::1\", \"port\": 65536}, \"volumes\": "
    "[{\"name\": \"a\", \"backend\": {\"type\": \"file\", \"path\": \"/x\"}, "
    "\"cache\": \"/c\"}]}",
    "t.json:1:39: listen.port: must be an integer from 1 to 65535" },
  { "port_zero",
    "{\"metrics\": {\"port\": 0}, \"volumes\": [{\"name\": \"a\", \"backend\": "
    "{\"type\": \"file\", \"path\": \"/x\"}, \"cache\": \"/c\"}]}",
    "t.json:1:22: metrics.port: must be an integer from 1 to 65535" },
  { "socket_and_port",
    "{\"listen\": {\"socket\": \"/run/s\", \"port\": 1}, \"volumes\": "
    "[{\"name\": \"a\", \"backend\": {\"type\": \"file\", \"path\": \"/x\"}, "
    "\"cache\": \"/c\"}]}",
    "t.json:1:33: listen.port: not with listen.socket" },
  { "listen_type",
    "{\"listen\": \"127.0.0.1:10809\", \"volumes\": [{\"name\": \"a\", "
    "\"backend\": {\"type\": \"file\", \"path\": \"/x\"}, \"cache\": \"/c\"}]}",
    "t.json:1:12: listen: must be an object" },
  { "tls_both",
    "{\"tls\": {\"certificates\": \"/p\", \"psk_file\": \"/k\"}, \"volumes\": "
    "[{\"name\": \"a\", \"backend\": {\"type\": \"file\", \"path\": \"/x\"}, "
    "\"cache\": \"/c\"}]}",
    "t.json:1:32: tls.psk_file: not with tls.certificates" },
  { "tls_none",
    "{\"tls\": {}, \"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": "
    "\"file\", \"path\": \"/x\"}, \"cache\": \"/c\"}]}",
    "t.json:1:9: tls: needs certificates or psk_file" },
  { "metrics_type",
    "{\"metrics\": \"on\", \"volumes\": [{\"name\": \"a\", \"backend\": "
    "{\"type\": \"file\", \"path\": \"/x\"}, \"cache\": \"/c\"}]}",
    "t.json:1:13: metrics: must be an object or false" },
  { "restart_min",
    "{\"restart\": {\"min_ms\": 5}, \"volumes\": [{\"name\": \"a\", "
    "\"backend\": {\"type\": \"file\", \"path\": \"/x\"}, \"cache\": \"/c\"}]}",
    "t.json:1:24: restart.min_ms: must be an integer from 10 to 3600000" },
  { "restart_order",
    "{\"restart\": {\"min_ms\": 1000, \"max_ms\": 900}, \"volumes\": "
    "[{\"name\": \"a\", \"backend\": {\"type\": \"file\", \"path\": \"/x\"}, "
    "\"cache\": \"/c\"}]}",
    "t.json:1:40: restart.max_ms: must be at least min_ms (1000)" },
  { "restart_default_max",
    "{\"restart\": {\"min_ms\": 60000}, \"volumes\": [{\"name\": \"a\", "
    "\"backend\": {\"type\": \"file\", \"path\": \"/x\"}, \"cache\": \"/c\"}]}",
    "t.json:1:24: restart.min_ms: must not exceed max_ms (30000)" },
  { "filter_name",
    "{\"filter\": \"hhc.so\", \"volumes\": [{\"name\": \"a\", \"backend\": "
    "{\"type\": \"file\", \"path\": \"/x\"}, \"cache\": \"/c\"}]}",
    "t.json:1:12: filter: must be a filter name or an absolute path" },
  { "nbdkit_type",
    "{\"nbdkit\": true, \"volumes\": [{\"name\": \"a\", \"backend\": "
    "{\"type\": \"file\", \"path\": \"/x\"}, \"cache\": \"/c\"}]}",
    "t.json:1:12: nbdkit: must be a string" },
  { "run_dir_long",
    "{\"run_dir\": "
    "\"/"
    "rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr"
    "rrrrrrrrrrrrrrrrrrrrrrrrrr\", \"volumes\": [{\"name\": \"a\", "
    "\"backend\": {\"type\": \"file\", \"path\": \"/x\"}, \"cache\": \"/c\"}]}",
    "t.json:1:139: volumes[0].name: the socket "
    "/rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr"
    "rrrrrrrrrrrrrrrrrrrrrrrrrrr/a.sock would be longer than 107 bytes" },
  { "shared_cache",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\"},\n"
    "  {\"name\": \"b\", \"backend\": {\"type\": \"file\", \"path\": \"/y\"}, "
    "\"cache\": \"/c\"}]}",
    "t.json:2:69: volumes[1].cache: \"/c\" is also the cache of volume \"a\"" },
  { "cache_is_log",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"log\": [\"/l\", \"/c\"]}]}",
    "t.json:1:100: volumes[0].log[1]: \"/c\" is also the cache of volume "
    "\"a\"" },
  { "shared_log",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"log\": \"/l\"},\n"
    "  {\"name\": \"b\", \"backend\": {\"type\": \"file\", \"path\": \"/y\"}, "
    "\"cache\": \"/d\", \"log\": \"/l\"}]}",
    "t.json:2:82: volumes[1].log: \"/l\" is also a log of volume \"a\"" },
  { "escapes_utf8",
    "{\"nbdkit\": \"a\\\"b\\\\\\u00e9\303\251\",\r\n"
    " \"metrics\": {\"address\": \"x\"},\r\n"
    " \"\303\251\": 1, \"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": "
    "\"file\", \"path\": \"/x\"}, \"cache\": \"/c\"}]}",
    "t.json:3:2: \303\251: unknown key" },
};

static void
test_error_case (void **state)
{
  const struct error_case *e = *state;
  struct gw_config cfg;
  char err[512] = "";
  int r = gw_config_parse ("t.json", e->text, false, &cfg, err, sizeof err);

  if (r != -1 || strcmp (err, e->want) != 0)
    print_error ("%s:\n  got  %s\n  want %s\n", e->name, err, e->want);
  assert_int_equal (r, -1);
  assert_string_equal (err, e->want);
  /* Left empty. */
  assert_null (cfg.file);
  assert_null (cfg.volumes);
  assert_int_equal (cfg.nvolumes, 0);
}

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

/* A short or missing err buffer is cut, not overrun. */
static void
test_err_buffer (void **state)
{
  struct gw_config cfg;
  char err[12];

  memset (err, 'x', sizeof err);
  assert_int_equal (gw_config_parse ("t.json", "{}", false, &cfg, err, 8), -1);
  assert_string_equal (err, "t.json:");
  assert_int_equal (err[8], 'x');
  assert_int_equal (gw_config_parse ("t.json", "{}", false, &cfg, NULL, 0), -1);
  assert_int_equal (
      gw_config_load ("/nonexistent/gw.json", false, &cfg, NULL, 0), -1);
}

/* ------------------------------------------------------------------ */
/* check_paths, on temporary files. */

struct tmp {
  char dir[64];     /* a directory of our own */
  char file[3][96]; /* three files in it */
};

static int
setup_tmp (void **state)
{
  struct tmp *t = calloc (1, sizeof *t);

  if (t == NULL)
    return -1;
  strcpy (t->dir, "/tmp/test-config-XXXXXX");
  if (mkdtemp (t->dir) == NULL)
    return -1;
  for (int i = 0; i < 3; i++)
    {
      int fd;
      snprintf (t->file[i], sizeof t->file[i], "%s/f%d-XXXXXX", t->dir, i);
      fd = mkstemp (t->file[i]);
      if (fd == -1)
        return -1;
      close (fd);
    }
  *state = t;
  return 0;
}

static int
teardown_tmp (void **state)
{
  struct tmp *t = *state;

  for (int i = 0; i < 3; i++)
    unlink (t->file[i]);
  rmdir (t->dir);
  free (t);
  return 0;
}

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
  static const struct CMUnitTest fixed[] = {
    cmocka_unit_test (test_full),
    cmocka_unit_test (test_defaults),
    cmocka_unit_test (test_alternatives),
    cmocka_unit_test (test_find_equal),
    cmocka_unit_test (test_filter_syntax),
    cmocka_unit_test (test_type_to_string),
    cmocka_unit_test (test_err_buffer),
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
    cmocka_unit_test (test_load_missing),
    cmocka_unit_test_setup_teardown (test_load_file, setup_tmp, teardown_tmp),
  };
  const size_t nfixed = sizeof fixed / sizeof fixed[0];
  const size_t ncases = sizeof error_cases / sizeof error_cases[0];
  struct CMUnitTest *tests = calloc (nfixed + ncases, sizeof *tests);
  int r;

  if (tests == NULL)
    return 1;
  memcpy (tests, fixed, sizeof fixed);
  for (size_t i = 0; i < ncases; i++)
    {
      tests[nfixed + i].name = error_cases[i].name;
      tests[nfixed + i].test_func = test_error_case;
      tests[nfixed + i].initial_state = (void *)&error_cases[i];
    }
  r = _cmocka_run_group_tests ("config", tests, nfixed + ncases, NULL, NULL);
  free (tests);
  return r;
}
