/* cos-backend: the plugin's parameters (.config, .config_complete).
 *
 * One table row per key: its handler, where the value goes and, for
 * whole numbers, the range.  Sizes and whole numbers are parsed with
 * common/parse.h (so "64MiB" and "64M" are the same, and "010" is
 * ten), booleans with nbdkit_parse_bool (the same words).  Every
 * refusal is one error line that names the key.
 */
#include <config.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "config.h"
#include "parse.h"
#include "volume-json.h" /* MIN/MAX_OBJECT_SIZE */

struct cos_conf conf = {
  .want_size = -1,
  .want_object_size = -1,
  .tls_verify = true,
  .check_etag = true,
  .timeout_s = 30,
  .retries = 5,
  .connections = 16,
  .backoff_ms = 100,
  .object_cache_bytes = 64 * 1024 * 1024,
  .max_parallel = 8,
  .readahead = 4,
  .writeback_bytes = 16 * 1024 * 1024,
};

/* A key: SET stores VALUE at DST (whole numbers: from LO to HI). */
struct key {
  const char *name;
  int (*set) (const struct key *k, const char *value);
  void *dst;
  unsigned lo, hi;
};

int
config_set_string (char **p, const char *str)
{
  free (*p);
  *p = strdup (str);
  if (*p == NULL)
    {
      nbdkit_error ("cos: strdup: %m");
      return -1;
    }
  return 0;
}

static int
set_string (const struct key *k, const char *value)
{
  return config_set_string (k->dst, value);
}

/* A secret (nbdkit's -, +FILE, -FD or the text itself); the old one
 * is wiped.
 */
static int
set_password (const struct key *k, const char *value)
{
  char **p = k->dst;

  if (*p)
    memset (*p, 0, strlen (*p));
  free (*p);
  *p = NULL;
  return nbdkit_read_password (value, p);
}

static int
set_bool (const struct key *k, const char *value)
{
  int r = nbdkit_parse_bool (value);

  if (r == -1)
    return -1;
  *(bool *)k->dst = r;
  return 0;
}

static int
set_unsigned (const struct key *k, const char *value)
{
  unsigned v;
  const char *why = hhc_parse_unsigned (value, NULL, &v);

  if (why)
    {
      nbdkit_error ("cos: %s=%s: %s", k->name, value, why);
      return -1;
    }
  if (v < k->lo || v > k->hi)
    {
      nbdkit_error ("cos: %s=%s: must be between %u and %u", k->name, value,
                    k->lo, k->hi);
      return -1;
    }
  *(unsigned *)k->dst = v;
  return 0;
}

/* Any size (0 included). */
static int
set_size (const struct key *k, const char *value)
{
  uint64_t v;
  const char *why = hhc_parse_size (value, &v);

  if (why)
    {
      nbdkit_error ("cos: %s=%s: %s", k->name, value, why);
      return -1;
    }
  *(int64_t *)k->dst = v;
  return 0;
}

static int
set_volume_size (const struct key *k, const char *value)
{
  if (set_size (k, value) == -1)
    return -1;
  if (conf.want_size == 0 || conf.want_size % 512 != 0)
    {
      nbdkit_error ("cos: size=%s: must be a positive multiple of 512", value);
      return -1;
    }
  return 0;
}

static int
set_object_size (const struct key *k, const char *value)
{
  int64_t v;

  if (set_size (k, value) == -1)
    return -1;
  v = conf.want_object_size;
  if (v < MIN_OBJECT_SIZE || v > MAX_OBJECT_SIZE || (v & (v - 1)) != 0)
    {
      nbdkit_error ("cos: object-size=%s: must be a power of two from 4K "
                    "to 32M",
                    value);
      return -1;
    }
  return 0;
}

/* One spelling per endpoint, since it is part of the identity the hhc
 * filter ties its cache to: scheme in lower case (https when none is
 * given), no trailing '/'.
 */
static int
set_endpoint (const struct key *k, const char *value)
{
  const char *sep = strstr (value, "://");
  size_t n;
  char *scheme = sep ? strndup (value, sep - value) : strdup ("https");
  const char *rest = sep ? sep + 3 : value;

  if (scheme == NULL)
    {
      nbdkit_error ("cos: strdup: %m");
      return -1;
    }
  for (char *q = scheme; *q; q++)
    if (*q >= 'A' && *q <= 'Z')
      *q += 'a' - 'A';
  n = strlen (rest);
  while (n > 0 && rest[n - 1] == '/')
    n--;
  free (conf.endpoint);
  if (asprintf (&conf.endpoint, "%s://%.*s", scheme, (int)n, rest) == -1)
    {
      conf.endpoint = NULL;
      free (scheme);
      nbdkit_error ("cos: asprintf: %m");
      return -1;
    }
  free (scheme);
  return 0;
}

static int
set_bucket (const struct key *k, const char *value)
{
  if (*value == '\0' || strchr (value, '/'))
    {
      nbdkit_error ("cos: bucket=%s: not a bucket name", value);
      return -1;
    }
  return config_set_string (&conf.bucket, value);
}

static int
set_prefix (const struct key *k, const char *value)
{
  size_t n = strlen (value);

  while (n > 0 && value[n - 1] == '/')
    n--;
  while (n > 0 && *value == '/')
    value++, n--;
  /* An S3 key is at most 1024 bytes: PREFIX/volume.json and
   * PREFIX/%016llx must fit (object_key would truncate silently).
   */
  if (n > 1000)
    {
      nbdkit_error ("cos: prefix=: longer than 1000 bytes");
      return -1;
    }
  free (conf.prefix);
  conf.prefix = strndup (value, n);
  if (conf.prefix == NULL)
    {
      nbdkit_error ("cos: strdup: %m");
      return -1;
    }
  return 0;
}

static int
set_addressing (const struct key *k, const char *value)
{
  if (strcmp (value, "path") == 0)
    conf.virtual_host = false;
  else if (strcmp (value, "virtual") == 0)
    conf.virtual_host = true;
  else
    {
      nbdkit_error ("cos: addressing=%s: use path or virtual", value);
      return -1;
    }
  return 0;
}

static int
set_ca_file (const struct key *k, const char *value)
{
  if (access (value, R_OK) == -1)
    {
      nbdkit_error ("cos: ca-file=%s: %m", value);
      return -1;
    }
  return config_set_string (&conf.ca_file, value);
}

static const struct key keys[] = {
  { "endpoint", set_endpoint, NULL, 0, 0 },
  { "bucket", set_bucket, NULL, 0, 0 },
  { "prefix", set_prefix, NULL, 0, 0 },
  { "size", set_volume_size, &conf.want_size, 0, 0 },
  { "object-size", set_object_size, &conf.want_object_size, 0, 0 },
  { "create", set_bool, &conf.create, 0, 0 },
  { "region", set_string, &conf.region, 0, 0 },
  { "addressing", set_addressing, NULL, 0, 0 },
  { "tls-verify", set_bool, &conf.tls_verify, 0, 0 },
  { "check-etag", set_bool, &conf.check_etag, 0, 0 },
  { "ca-file", set_ca_file, NULL, 0, 0 },
  { "timeout", set_unsigned, &conf.timeout_s, 1, 3600 },
  { "retries", set_unsigned, &conf.retries, 0, 100 },
  { "connections", set_unsigned, &conf.connections, 1, 1024 },
  { "backoff", set_unsigned, &conf.backoff_ms, 1, 60000 },
  { "access-key", set_password, &conf.access_key, 0, 0 },
  { "secret-key", set_password, &conf.secret_key, 0, 0 },
  { "object-cache", set_size, &conf.object_cache_bytes, 0, 0 },
  { "parallel", set_unsigned, &conf.max_parallel, 1, 64 },
  { "readahead", set_unsigned, &conf.readahead, 0, 63 },
  { "writeback", set_size, &conf.writeback_bytes, 0, 0 },
  { "cos-stats", set_string, &conf.stats_file, 0, 0 },
};

int
config_set (const char *key, const char *value)
{
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    if (strcmp (key, keys[i].name) == 0)
      return keys[i].set (&keys[i], value);
  nbdkit_error ("cos: unknown parameter '%s'", key);
  return -1;
}

/* *P from environment variable NAME when it is unset and NAME is set. */
static int
default_from_env (char **p, const char *name)
{
  const char *v = getenv (name);

  return *p == NULL && v ? config_set_string (p, v) : 0;
}

int
config_complete (void)
{
  if (conf.endpoint == NULL || conf.bucket == NULL)
    {
      nbdkit_error ("cos: endpoint= and bucket= are required");
      return -1;
    }
  if ((conf.prefix == NULL && config_set_string (&conf.prefix, "") == -1)
      || (conf.region == NULL
          && config_set_string (&conf.region, "us-east-1") == -1)
      || default_from_env (&conf.access_key, "AWS_ACCESS_KEY_ID") == -1
      || default_from_env (&conf.secret_key, "AWS_SECRET_ACCESS_KEY") == -1)
    return -1;
  if (conf.access_key == NULL || conf.secret_key == NULL
      || *conf.access_key == '\0' || *conf.secret_key == '\0')
    {
      nbdkit_error ("cos: no credentials: give access-key= and secret-key=, "
                    "or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
      return -1;
    }
  if (conf.create && conf.want_size == -1)
    {
      nbdkit_error ("cos: create=true needs size=");
      return -1;
    }
  return 0;
}

void
config_free (void)
{
  free (conf.endpoint);
  free (conf.bucket);
  free (conf.prefix);
  free (conf.region);
  free (conf.ca_file);
  free (conf.access_key);
  if (conf.secret_key)
    {
      memset (conf.secret_key, 0, strlen (conf.secret_key));
      free (conf.secret_key);
    }
  free (conf.stats_file);
  conf.endpoint = conf.bucket = conf.prefix = conf.region = NULL;
  conf.ca_file = conf.access_key = conf.secret_key = conf.stats_file = NULL;
}
