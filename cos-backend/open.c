/* cos-backend: opening the volume (object.h's vol) at .get_ready:
 * the store's client, PREFIX/volume.json (read, or made with
 * create=true), the object cache and the write-back buffer.
 */
#include <config.h>

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "config.h"
#include "objcache.h"
#include "object.h"
#include "open.h"
#include "s3.h"
#include "uuid.h"
#include "volume-json.h"

/* The store's client, as the parameters ask. */
static int
open_store (void)
{
  struct s3_config cfg = {
    .endpoint = conf.endpoint,
    .bucket = conf.bucket,
    .region = conf.region,
    .access_key = conf.access_key,
    .secret_key = conf.secret_key,
    .virtual_host = conf.virtual_host,
    .tls_verify = conf.tls_verify,
    .check_etag = conf.check_etag,
    .ca_file = conf.ca_file,
    .timeout_ms = conf.timeout_s * 1000L,
    .retries = conf.retries,
    .connections = conf.connections,
    .backoff_ms = conf.backoff_ms,
    .backoff_max_ms
    = conf.backoff_ms * 32 < 10000 ? conf.backoff_ms * 32 : 10000,
  };

  vol.s3 = s3_open (&cfg);
  return vol.s3 ? 0 : -1;
}

/* Make the volume: PUT KEY, its volume.json, unless it exists.
 * Returns 0 (made here: vol's geometry and uuid are set), 1 (made by
 * someone else meanwhile: open that one) or -1 after nbdkit_error.
 */
static int
create_volume (const char *key)
{
  struct volume_json v = { .size = conf.want_size };
  uint8_t u[16];
  char *text;
  int r;

  /* The default object size applies to new volumes only: an existing
   * one is opened with whatever it was made with.
   */
  v.object_size
      = conf.want_object_size == -1 ? 1024 * 1024 : conf.want_object_size;
  hhc_uuid_generate (u);
  hhc_uuid_format (u, v.uuid);
  text = volume_json_build (&v);
  if (text == NULL)
    {
      nbdkit_error ("cos: cannot build the volume metadata");
      return -1;
    }
  /* If-None-Match: two gateways creating the same volume at once do
   * not both believe they made it (stores that ignore the header just
   * store it).
   */
  struct s3_io io = { .method = "PUT",
                      .key = key,
                      .body = text,
                      .body_len = strlen (text),
                      .create_only = true };
  r = s3_do (vol.s3, &io);
  free (io.text);
  free (text);
  if (r != 0)
    return r;
  vol.size = v.size;
  vol.object_size = v.object_size;
  memcpy (vol.uuid, v.uuid, sizeof vol.uuid);
  nbdkit_debug ("cos: created volume %s: size %" PRIu64
                ", object size %" PRIu32,
                vol.uuid, vol.size, vol.object_size);
  return 0;
}

/* Parse and check the metadata object (volume-json.c); fills vol's
 * geometry and uuid.
 */
static int
parse_volume (const char *key, const char *text, size_t len)
{
  struct volume_json v;
  char msg[4096];

  if (volume_json_parse (text, len, conf.bucket, key, conf.want_size,
                         conf.want_object_size, &v, msg, sizeof msg)
      == -1)
    {
      nbdkit_error ("%s", msg);
      return -1;
    }
  vol.size = v.size;
  vol.object_size = v.object_size;
  memcpy (vol.uuid, v.uuid, sizeof vol.uuid);
  nbdkit_debug ("cos: opened volume %s: size %" PRIu64 ", object size %" PRIu32,
                vol.uuid, vol.size, vol.object_size);
  return 0;
}

/* volume.json is missing (the GET's answer in IO): make the volume
 * with create=true, or open the one someone else made meanwhile.
 */
static int
create_or_refuse (const char *key, const struct s3_io *io)
{
  int r;

  if (strcmp (io->code, "NoSuchBucket") == 0)
    {
      nbdkit_error ("cos: bucket '%s' does not exist at %s", conf.bucket,
                    conf.endpoint);
      return -1;
    }
  if (!conf.create)
    {
      nbdkit_error ("cos: no volume at s3://%s/%s (to make one, add "
                    "create=true size=SIZE)",
                    conf.bucket, key);
      return -1;
    }
  r = create_volume (key);
  if (r != 1)
    return r;
  /* Someone else made it meanwhile (the store honours If-None-Match,
   * as RGW does and s3rver does not): open theirs.
   */
  nbdkit_debug ("cos: s3://%s/%s was made by another gateway meanwhile "
                "(PUT If-None-Match: * answered 412): opening it",
                conf.bucket, key);
  struct s3_io again = { .method = "GET", .key = key };
  if (s3_do (vol.s3, &again) == -1)
    return -1;
  r = parse_volume (key, again.text, again.text_len);
  free (again.text);
  return r;
}

/* Read volume.json, or make it. */
static int
find_volume (void)
{
  char key[1024];
  int r;

  object_key (-1, key, sizeof key);
  struct s3_io io = { .method = "GET", .key = key, .missing_ok = true };
  r = s3_do (vol.s3, &io);
  if (r == -1)
    return -1;
  if (r == 1)
    return create_or_refuse (key, &io); /* no body of a 404 is kept */
  r = parse_volume (key, io.text, io.text_len);
  free (io.text);
  return r;
}

/* The object cache, and read-ahead into it. */
static int
setup_cache (void)
{
  uint64_t n = conf.object_cache_bytes / vol.object_size;

  if (n == 0)
    return 0;
  vol.cache = objcache_new (n, vol.object_size);
  if (vol.cache == NULL)
    {
      nbdkit_error ("cos: object-cache=%" PRIi64 ": %m",
                    conf.object_cache_bytes);
      return -1;
    }
  /* Read-ahead lands in the object cache: at most half of it, so that
   * the objects read ahead survive until they are asked for.
   */
  vol.ra_objects = conf.readahead;
  if (vol.ra_objects > n / 2)
    vol.ra_objects = n / 2;
  if (vol.ra_objects < conf.readahead)
    nbdkit_debug ("cos: readahead=%u: %u objects (half the object cache)",
                  conf.readahead, vol.ra_objects);
  return 0;
}

/* The write-back buffer (none with writeback=0). */
static int
setup_writeback (void)
{
  uint64_t n;

  if (conf.writeback_bytes <= 0)
    return 0;
  n = (conf.writeback_bytes + vol.object_size - 1) / vol.object_size;
  vol.wb = wbuf_new (&object_wbuf_ops, n, vol.object_size, conf.max_parallel);
  if (vol.wb == NULL)
    {
      nbdkit_error ("cos: writeback=%" PRIi64 ": %m", conf.writeback_bytes);
      return -1;
    }
  return 0;
}

int
open_volume (void)
{
  if (open_store () == -1 || find_volume () == -1 || setup_cache () == -1
      || setup_writeback () == -1)
    return -1;
  if (asprintf (&vol.description, "hhc-cos %s %s %s %s", conf.endpoint,
                conf.bucket, conf.prefix[0] ? conf.prefix : "/", vol.uuid)
      == -1)
    {
      vol.description = NULL;
      nbdkit_error ("cos: asprintf: %m");
      return -1;
    }
  return 0;
}

void
close_volume (void)
{
  objcache_free (vol.cache);
  vol.cache = NULL;
  s3_close (vol.s3);
  vol.s3 = NULL;
  free (vol.description);
  vol.description = NULL;
}
