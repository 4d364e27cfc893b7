/* hhc-gateway.json: a volume's "backend" (file, nbd, cos, iscsi);
 * config.c lists the keys of each type.
 */
#include <config.h>

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config-int.h"

static int
parse_file_backend (struct ctx *c, const struct at *b, size_t i,
                    struct gw_volume *v)
{
  struct at a;

  if (cfg_get_string (c, b, "path", true, &v->path, &a) == -1
      || cfg_must_exist (c, &a, v->path, false) == -1)
    return -1;
  return cfg_claim (c, &a, v->path, i, "the backend");
}

/* s starts with one of prefixes (NULL-terminated). */
static bool
has_prefix (const char *s, const char *const *prefixes)
{
  for (; *prefixes; prefixes++)
    if (strncasecmp (s, *prefixes, strlen (*prefixes)) == 0)
      return true;
  return false;
}

static int
parse_nbd_backend (struct ctx *c, const struct at *b, struct gw_volume *v)
{
  static const char *const schemes[]
      = { "nbd://", "nbd+unix://", "nbds://", "nbds+unix://", NULL };
  struct at a;

  if (cfg_get_string (c, b, "uri", true, &v->uri, &a) == -1)
    return -1;
  if (!has_prefix (v->uri, schemes))
    return cfg_fail (c, &a, false,
                     "must start with nbd://, nbd+unix://, nbds:// or "
                     "nbds+unix://");
  return 0;
}

/* The cos backend's optional keys. */
static int
parse_cos_options (struct ctx *c, const struct at *b, struct gw_volume *v)
{
  struct at a;
  uint64_t n;
  int r;

  r = cfg_get_string (c, b, "prefix", false, &v->prefix, &a);
  if (r == 1 && strlen (v->prefix) > 1000)
    return cfg_fail (c, &a, false, "longer than 1000 bytes");
  if (r == -1 || cfg_get_string (c, b, "region", false, &v->region, NULL) == -1)
    return -1;
  if (cfg_member (c, b, "size", &a))
    {
      if (cfg_size_value (c, &a, &n, &v->size) == -1)
        return -1;
      if (n == 0 || n % 512)
        return cfg_fail (c, &a, false, "must be a positive multiple of 512");
    }
  v->tls_verify = true;
  if (cfg_get_bool (c, b, "tls_verify", &v->tls_verify) == -1)
    return -1;
  r = cfg_get_string (c, b, "ca_file", false, &v->ca_file, &a);
  if (r == -1 || (r == 1 && cfg_must_exist (c, &a, v->ca_file, false) == -1))
    return -1;
  return 0;
}

static int
parse_cos_backend (struct ctx *c, const struct at *b, struct gw_volume *v)
{
  static const char *const schemes[] = { "http://", "https://", NULL };
  struct at a;

  if (cfg_get_string (c, b, "endpoint", true, &v->endpoint, &a) == -1)
    return -1;
  if (!has_prefix (v->endpoint, schemes))
    return cfg_fail (c, &a, false, "must start with http:// or https://");
  if (cfg_get_string (c, b, "bucket", true, &v->bucket, &a) == -1)
    return -1;
  if (strchr (v->bucket, '/'))
    return cfg_fail (c, &a, false, "not a bucket name (it holds a '/')");
  if (cfg_get_string (c, b, "credentials", true, &v->credentials, &a) == -1
      || cfg_must_exist (c, &a, v->credentials, false) == -1)
    return -1;
  return parse_cos_options (c, b, v);
}

static int
parse_iscsi_backend (struct ctx *c, const struct at *b, struct gw_volume *v)
{
  static const char *const schemes[] = { "iscsi://", NULL };
  struct at a;
  int r;

  if (cfg_get_string (c, b, "url", true, &v->url, &a) == -1)
    return -1;
  if (!has_prefix (v->url, schemes))
    return cfg_fail (c, &a, false, "must start with iscsi://");
  if (strchr (v->url, '@'))
    return cfg_fail (
        c, &a, false,
        "must not hold a user or password (put them in chap_file)");
  r = cfg_get_string (c, b, "chap_file", false, &v->chap_file, &a);
  if (r == -1 || (r == 1 && cfg_must_exist (c, &a, v->chap_file, false) == -1))
    return -1;
  if (cfg_get_string (c, b, "initiator", false, &v->initiator, NULL) == -1
      || cfg_get_uint (c, b, "sessions", 1, 64, &v->sessions, NULL) == -1)
    return -1;
  unsigned t;
  r = cfg_get_uint (c, b, "timeout", 0, 86400, &t, NULL);
  if (r == -1)
    return -1;
  v->timeout = r == 1 ? (int)t : -1;
  return 0;
}

static const char *const backend_types[]
    = { "file", "nbd", "cos", "iscsi", NULL };

/* "backend": {"type": ..., the type's keys}. */
int
cfg_parse_backend (struct ctx *c, const struct at *vo, size_t i,
                   struct gw_volume *v)
{
  static const char *const file_keys[] = { "type", "path", NULL };
  static const char *const nbd_keys[] = { "type", "uri", NULL };
  static const char *const cos_keys[]
      = { "type",        "endpoint", "bucket",     "prefix",  "region",
          "credentials", "size",     "tls_verify", "ca_file", NULL };
  static const char *const iscsi_keys[] = {
    "type", "url", "chap_file", "initiator", "sessions", "timeout", NULL
  };
  static const char *const *const keys[]
      = { file_keys, nbd_keys, cos_keys, iscsi_keys };
  HHC_CLEANUP_FREE char *type = NULL;
  struct at b, a;
  unsigned t;

  if (cfg_get_object (c, vo, "backend", true, &b) == -1
      || cfg_get_string (c, &b, "type", true, &type, &a) == -1)
    return -1;
  for (t = 0; backend_types[t]; t++)
    if (strcmp (type, backend_types[t]) == 0)
      break;
  if (backend_types[t] == NULL)
    return cfg_fail (c, &a, false, "must be file, nbd, cos or iscsi");
  v->type = t;
  if (cfg_check_keys (c, &b, keys[t]) == -1)
    return -1;
  switch (v->type)
    {
    case GW_BACKEND_FILE:
      return parse_file_backend (c, &b, i, v);
    case GW_BACKEND_NBD:
      return parse_nbd_backend (c, &b, v);
    case GW_BACKEND_COS:
      return parse_cos_backend (c, &b, v);
    case GW_BACKEND_ISCSI:
      return parse_iscsi_backend (c, &b, v);
    }
  return -1;
}
