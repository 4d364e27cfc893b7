/* hhc-csi: the cos backend.  A volume is the cos plugin's volume at
 * the prefix P = BACKEND_PREFIX/NAME (NAME when the backend's prefix is
 * empty): P/volume.json, made here exactly as the plugin makes it
 * (volume-json.c, PUT with If-None-Match: *), and the objects
 * P/%016x the plugin writes.  The claim is P/hhc-csi.claim, also made
 * with If-None-Match (a store that ignores the header narrows the race
 * to the GET before the PUT).
 *
 * Keys come from the CSI secrets access_key and secret_key; a missing
 * one is INVALID_ARGUMENT naming the key.  The S3 client is
 * cos-backend's (libhhcs3); its nbdkit_error text (nbdkit-shim.c) is
 * the message of a failed request.  Each call opens its own client.
 */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "backend-cos.h"
#include "backend-int.h"
#include "nbdkit-shim.h"
#include "s3.h"
#include "sigv4.h"
#include "uuid.h"
#include "volume-json.h"

void
cos_prefix (const struct csi_volid *v, char *out, size_t n)
{
  const char *p = v->backend->prefix ? v->backend->prefix : "";
  size_t len;

  while (*p == '/')
    p++;
  len = strlen (p);
  while (len > 0 && p[len - 1] == '/')
    len--;
  if (len == 0)
    snprintf (out, n, "%s", v->name);
  else
    snprintf (out, n, "%.*s/%s", (int)len, p, v->name);
}

void
cos_key (const struct csi_volid *v, const char *leaf, char *out, size_t n)
{
  char p[PREFIX_MAX];

  cos_prefix (v, p, sizeof p);
  snprintf (out, n, "%s/%s", p, leaf);
}

int
cos_s3_fail (struct csi_err *e)
{
  const char *msg = csi_shim_last_error ();
  enum csi_code code = CSI_UNAVAILABLE;

  if (errno == EPERM || errno == EACCES)
    code = CSI_INVALID_ARGUMENT; /* the keys in the secrets */
  else if (errno == ENOSPC)
    code = CSI_RESOURCE_EXHAUSTED;
  return csi_fail (e, code, "%s", msg[0] ? msg : "cos: request failed");
}

struct s3 *
cos_open (const struct csi_volid *v, const struct csi_map *secrets,
          struct csi_err *e)
{
  const struct csi_backend *b = v->backend;
  const char *ak = csi_map_get (secrets, "access_key");
  const char *sk = csi_map_get (secrets, "secret_key");
  struct s3 *s3;

  if (b->prefix && strlen (b->prefix) > PREFIX_MAX - CSI_NAME_MAX - 2)
    {
      csi_fail (e, CSI_FAILED_PRECONDITION,
                "backend %s: prefix longer than %d bytes", b->name,
                PREFIX_MAX - CSI_NAME_MAX - 2);
      return NULL;
    }
  if (ak == NULL || sk == NULL)
    {
      csi_fail (e, CSI_INVALID_ARGUMENT, "backend %s: the secret %s is missing",
                b->name, ak == NULL ? "access_key" : "secret_key");
      return NULL;
    }
  struct s3_config cfg = {
    .endpoint = b->endpoint,
    .bucket = b->bucket,
    .region = b->region ? b->region : "us-east-1",
    .access_key = ak,
    .secret_key = sk,
    .tls_verify = b->tls_verify,
    .check_etag = true,
    .ca_file = b->ca_file,
    .timeout_ms = 30000,
    .retries = 3,
    .connections = 1,
    .backoff_ms = 100,
    .backoff_max_ms = 2000,
  };
  csi_shim_clear_error ();
  s3 = s3_open (&cfg);
  if (s3 == NULL)
    csi_fail (e, CSI_INVALID_ARGUMENT, "backend %s: %s", b->name,
              csi_shim_last_error ());
  return s3;
}

/* GET KEY: 1 and *text (free it), 0 missing, -1 error (a missing
 * bucket is FAILED_PRECONDITION).
 */
static int
get_text (struct s3 *s3, const struct csi_volid *v, const char *key,
          char **text, size_t *len, struct csi_err *e)
{
  struct s3_io io = { .method = "GET", .key = key, .missing_ok = true };
  int r;

  csi_shim_clear_error ();
  r = s3_do (s3, &io);
  if (r == -1)
    return cos_s3_fail (e);
  if (r == 1)
    {
      free (io.text);
      if (strcmp (io.code, "NoSuchBucket") == 0)
        return csi_fail (e, CSI_FAILED_PRECONDITION,
                         "backend %s: bucket %s does not exist at %s",
                         v->backend->name, v->backend->bucket,
                         v->backend->endpoint);
      return 0;
    }
  *text = io.text;
  *len = io.text_len;
  return 1;
}

/* The volume's size from P/volume.json: 0, NOT_FOUND, or -1. */
static int
read_volume (struct s3 *s3, const struct csi_volid *v, uint64_t *size,
             struct csi_err *e)
{
  char key[KEY_MAX], msg[512], *text = NULL;
  struct volume_json vj;
  size_t len = 0;
  int r;

  cos_key (v, "volume.json", key, sizeof key);
  r = get_text (s3, v, key, &text, &len, e);
  if (r == 0)
    return csi_fail (e, CSI_NOT_FOUND, "volume %s does not exist", v->id);
  if (r == -1)
    return -1;
  r = volume_json_parse (text, len, v->backend->bucket, key, -1, -1, &vj, msg,
                         sizeof msg);
  free (text);
  if (r == -1)
    return csi_fail (e, CSI_INTERNAL, "%s", msg);
  *size = vj.size;
  return 0;
}

/* PUT KEY with If-None-Match: 0 made, 1 it exists, -1 error. */
static int
put_new (struct s3 *s3, const char *key, const char *text, struct csi_err *e)
{
  struct s3_io io = { .method = "PUT",
                      .key = key,
                      .body = text,
                      .body_len = strlen (text),
                      .create_only = true };
  int r;

  csi_shim_clear_error ();
  r = s3_do (s3, &io);
  free (io.text);
  return r == -1 ? cos_s3_fail (e) : r;
}

static int
create_in (struct s3 *s3, const struct csi_volid *v, uint64_t size,
           uint64_t *actual, bool *existed, struct csi_err *e)
{
  struct volume_json vj = { .size = size };
  char key[KEY_MAX], *text;
  uint8_t u[16];
  int r;

  r = read_volume (s3, v, actual, e);
  if (r == 0 || e->code != CSI_NOT_FOUND)
    {
      *existed = true;
      return r;
    }
  vj.object_size = v->backend->object_size ? (uint32_t)v->backend->object_size
                                           : 1024 * 1024;
  hhc_uuid_generate (u);
  hhc_uuid_format (u, vj.uuid);
  text = volume_json_build (&vj);
  if (text == NULL)
    return csi_fail (e, CSI_INTERNAL, "out of memory");
  cos_key (v, "volume.json", key, sizeof key);
  r = put_new (s3, key, text, e);
  free (text);
  if (r == -1)
    return -1;
  *existed = r == 1;
  *actual = size;
  /* Made by someone else meanwhile: theirs counts. */
  return r == 0 ? 0 : read_volume (s3, v, actual, e);
}

int
cos_create (const struct csi_volid *v, uint64_t size,
            const struct csi_map *secrets, uint64_t *actual, bool *existed,
            struct csi_err *e)
{
  struct s3 *s3 = cos_open (v, secrets, e);
  int r;

  if (s3 == NULL)
    return -1;
  r = create_in (s3, v, size, actual, existed, e);
  s3_close (s3);
  return r;
}

int
cos_size (const struct csi_volid *v, const struct csi_map *secrets,
          uint64_t *size, struct csi_err *e)
{
  struct s3 *s3 = cos_open (v, secrets, e);
  int r;

  if (s3 == NULL)
    return -1;
  r = read_volume (s3, v, size, e);
  s3_close (s3);
  return r;
}

int
cos_read_claim (struct s3 *s3, const struct csi_volid *v, char *owner, size_t n,
                struct csi_err *e)
{
  char key[KEY_MAX], *text = NULL;
  size_t len = 0;
  int r;

  cos_key (v, "hhc-csi.claim", key, sizeof key);
  r = get_text (s3, v, key, &text, &len, e);
  if (r != 1)
    return r;
  snprintf (owner, n, "%.*s", (int)strcspn (text, "\n"), text);
  free (text);
  return 1;
}

int
cos_claimed (const struct csi_volid *v, const char *owner, struct csi_err *e)
{
  return csi_fail (e, CSI_FAILED_PRECONDITION, "volume %s is staged on node %s",
                   v->id, owner);
}

static int
claim_in (struct s3 *s3, const struct csi_volid *v, const char *node_id,
          struct csi_err *e)
{
  char key[KEY_MAX], text[512], owner[256];
  uint64_t size;
  int r;

  if (read_volume (s3, v, &size, e) == -1)
    return -1;
  r = cos_read_claim (s3, v, owner, sizeof owner, e);
  if (r == 0)
    {
      cos_key (v, "hhc-csi.claim", key, sizeof key);
      snprintf (text, sizeof text, "%s\n", node_id);
      r = put_new (s3, key, text, e);
      if (r != 1)
        return r;
      r = cos_read_claim (s3, v, owner, sizeof owner, e);
      if (r == 0)
        return csi_fail (e, CSI_ABORTED, "volume %s: claim raced", v->id);
    }
  if (r == -1)
    return -1;
  return strcmp (owner, node_id) == 0 ? 0 : cos_claimed (v, owner, e);
}

int
cos_claim (const struct csi_volid *v, const char *node_id,
           const struct csi_map *secrets, struct csi_err *e)
{
  struct s3 *s3 = cos_open (v, secrets, e);
  int r;

  if (s3 == NULL)
    return -1;
  r = claim_in (s3, v, node_id, e);
  s3_close (s3);
  return r;
}

static int
release_in (struct s3 *s3, const struct csi_volid *v, const char *node_id,
            struct csi_err *e)
{
  char key[KEY_MAX], owner[256];
  int r = cos_read_claim (s3, v, owner, sizeof owner, e);

  if (r <= 0)
    return r;
  if (strcmp (owner, node_id) != 0)
    return cos_claimed (v, owner, e);
  cos_key (v, "hhc-csi.claim", key, sizeof key);
  struct s3_io io = { .method = "DELETE", .key = key, .missing_ok = true };
  csi_shim_clear_error ();
  r = s3_do (s3, &io);
  free (io.text);
  return r == -1 ? cos_s3_fail (e) : 0;
}

int
cos_release (const struct csi_volid *v, const char *node_id,
             const struct csi_map *secrets, struct csi_err *e)
{
  struct s3 *s3 = cos_open (v, secrets, e);
  int r;

  if (s3 == NULL)
    return -1;
  r = release_in (s3, v, node_id, e);
  s3_close (s3);
  return r;
}

/* hhc-gateway.json(5)'s cos backend: the keys are in CRED_FILE. */
char *
cos_gateway_json (const struct csi_volid *v, const char *cred_file,
                  struct csi_err *e)
{
  const struct csi_backend *b = v->backend;
  char p[PREFIX_MAX];
  json_t *o;

  if (cred_file == NULL)
    {
      csi_fail (e, CSI_INTERNAL, "backend %s: no credentials file", b->name);
      return NULL;
    }
  cos_prefix (v, p, sizeof p);
  o = json_pack ("{s:s, s:s, s:s, s:s, s:s, s:b}", "type", "cos", "endpoint",
                 b->endpoint, "bucket", b->bucket, "prefix", p, "credentials",
                 cred_file, "tls_verify", (int)b->tls_verify);
  if (o && b->region
      && json_object_set_new (o, "region", json_string (b->region)))
    json_decref (o), o = NULL;
  if (o && b->ca_file
      && json_object_set_new (o, "ca_file", json_string (b->ca_file)))
    json_decref (o), o = NULL;
  return backend_json_dump (o, e);
}
