/* appliance/config.c: hhc-gateway.json(5)'s errors.  Every error
 * class gives its one line with the position of the offending value
 * (or key) and leaves the config empty; each error case is a test of
 * its own.  A short or missing err buffer is cut, not overrun.
 * (tests/unit/test-config.c has what a config that passes parses to.)
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
  { "tuning_log_lost",
    "{\"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", "
    "\"path\": \"/x\"}, \"cache\": \"/c\", \"tuning\": {\"log-lost\": "
    "\"maybe\"}}]}",
    "t.json:1:109: volumes[0].tuning.log-lost: must be refuse or accept" },
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
  { "metrics_on_nbd_port",
    "{\"listen\": {\"port\": 9000}, \"metrics\": {\"address\": \"0.0.0.0\", "
    "\"port\": 9000}, \"volumes\": [{\"name\": \"a\", \"backend\": "
    "{\"type\": \"file\", \"path\": \"/x\"}, \"cache\": \"/c\"}]}",
    "t.json:1:39: metrics: port 9000 is the NBD listen port too: give the "
    "metrics or the NBD listener another port" },
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

int
main (void)
{
  static const struct CMUnitTest fixed[] = {
    cmocka_unit_test (test_err_buffer),
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
  r = _cmocka_run_group_tests ("config-errors", tests, nfixed + ncases, NULL,
                               NULL);
  free (tests);
  return r;
}
