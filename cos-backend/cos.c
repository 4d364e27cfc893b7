/* nbdkit-cos-plugin: a block volume stored as objects in S3 / COS.
 *
 * Layout (man/nbdkit-cos-plugin.pod): the volume is cut into objects of
 * object-size bytes, object I named PREFIX/%016llx (I in hex), always
 * exactly object-size bytes long; a missing object reads as zeros.
 * PREFIX/volume.json records the geometry and the volume's UUID.
 *
 * Requests may have any offset and length.  A write that covers a whole
 * object is one PUT (or one DELETE when the data is all zeros); a
 * partial one reads the object, patches it and writes it back, under a
 * lock of that object so that two partial writes of one object do not
 * lose each other's bytes.  Locks are striped (a fixed array of
 * mutexes picked by object index), which is cheap and has no lifetime
 * to manage; requests to different objects run in parallel.  A request
 * that spans objects takes their locks one at a time, never two at
 * once, so there is no lock order to get wrong.
 *
 * Writes are write-back by default (wbuf.c): a write lands in the
 * object's dirty copy, threads PUT dirty objects in parallel, and a
 * FLUSH or a FUA waits for the objects it covers.  With writeback=0
 * every write is acknowledged after its PUT or DELETE, which is
 * durable then.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "lock.h"
#include "objcache.h"
#include "s3.h"
#include "uuid.h"
#include "volume.h" /* VOLUME_FORMAT, MIN/MAX_OBJECT_SIZE, the parse */
#include "wbuf.h"

#define NLOCKS 1024

/* Parameters. */
static char *endpoint;
static char *bucket;
static char *prefix; /* without a trailing '/'; may be empty */
static int64_t want_size = -1;
static int64_t want_object_size = -1;
static bool create;
static char *region;
static bool virtual_host;
static bool tls_verify = true;
static bool check_etag = true;
static char *ca_file;
static unsigned timeout_s = 30;
static unsigned retries = 5;
static unsigned connections = 16;
static unsigned backoff_ms = 100;
static char *access_key;
static char *secret_key;
static char *stats_file;
static int64_t object_cache_bytes = 64 * 1024 * 1024;
static unsigned max_parallel = 8;
static unsigned readahead = 4;
static int64_t writeback_bytes = 16 * 1024 * 1024;

/* The open volume. */
static struct s3 *s3;
static uint64_t size;
static uint32_t object_size;
static char uuid[37];
static char *description;
static pthread_mutex_t locks[NLOCKS];
static struct objcache *cache;
static struct wbuf *wb;            /* NULL: writeback=0 */
static struct wbuf_stats wb_final; /* wb's, once it is gone */
static unsigned ra_objects;        /* readahead in effect (0: off) */
static uint64_t seq_next;          /* atomic: where a sequential read goes on */
static uint64_t ra_fetched;        /* atomic: objects read ahead */

static void
cos_load (void)
{
  curl_global_init (CURL_GLOBAL_DEFAULT);
  for (int i = 0; i < NLOCKS; i++)
    pthread_mutex_init (&locks[i], NULL);
}

static void
write_stats (void)
{
  struct s3_stats st;
  struct wbuf_stats wst = { 0 };
  uint64_t hits, misses;
  char *tmp = NULL;
  FILE *f;

  if (s3 == NULL)
    return;
  s3_get_stats (s3, &st);
  objcache_stats (cache, &hits, &misses);
  if (wb)
    wbuf_get_stats (wb, &wst);
  else
    wst = wb_final;
  nbdkit_debug ("cos: %" PRIu64 " requests, %" PRIu64 " retries (http %" PRIu64
                ", slowdown %" PRIu64 ", network %" PRIu64 ", etag %" PRIu64
                "), %" PRIu64 " failures",
                st.requests, st.retries, st.retry_http, st.retry_slow,
                st.retry_net, st.retry_etag, st.failures);
  if (stats_file == NULL)
    return;
  if (asprintf (&tmp, "%s.tmp", stats_file) == -1)
    return;
  f = fopen (tmp, "w");
  if (f)
    {
      fprintf (
          f,
          "{\"requests\": %" PRIu64 ", \"retries\": %" PRIu64
          ", \"retry_http\": %" PRIu64 ", \"retry_slowdown\": %" PRIu64
          ", \"retry_network\": %" PRIu64 ", \"retry_etag\": %" PRIu64
          ", \"failures\": %" PRIu64 ", \"reconnects\": %" PRIu64
          ", \"bytes_read\": %" PRIu64 ", \"bytes_written\": %" PRIu64
          ", \"cache_hits\": %" PRIu64 ", \"cache_misses\": %" PRIu64
          ", \"readahead_objects\": %" PRIu64 ", \"writeback_stores\": %" PRIu64
          ", \"writeback_merged\": %" PRIu64
          ", \"writeback_failures\": %" PRIu64 ", \"writeback_waits\": %" PRIu64
          "}\n",
          st.requests, st.retries, st.retry_http, st.retry_slow, st.retry_net,
          st.retry_etag, st.failures, st.reconnects, st.bytes_in, st.bytes_out,
          hits, misses, __atomic_load_n (&ra_fetched, __ATOMIC_RELAXED),
          wst.stores, wst.merged, wst.failures, wst.waits);
      if (fclose (f) == 0)
        rename (tmp, stats_file);
      else
        unlink (tmp);
    }
  free (tmp);
}

/* Store what is still dirty before nbdkit exits (after the last
 * connection closed; a FLUSH may never have come).
 */
static void
cos_cleanup (void)
{
  size_t n;

  if (wb == NULL)
    return;
  n = wbuf_dirty (wb);
  if (n > 0)
    nbdkit_debug ("cos: storing %zu dirty objects before exit", n);
  if (wbuf_sync (wb, 0, UINT64_MAX) == -1)
    nbdkit_error ("cos: %zu dirty objects could not be stored at exit: "
                  "their writes since the last flush are lost",
                  wbuf_dirty (wb));
  wbuf_get_stats (wb, &wb_final);
  wbuf_free (wb);
  wb = NULL;
}

static void
cos_unload (void)
{
  cos_cleanup (); /* in case nbdkit did not call it */
  write_stats ();
  objcache_free (cache);
  cache = NULL;
  s3_close (s3);
  s3 = NULL;
  free (endpoint);
  free (bucket);
  free (prefix);
  free (region);
  free (ca_file);
  free (access_key);
  if (secret_key)
    {
      memset (secret_key, 0, strlen (secret_key));
      free (secret_key);
    }
  free (stats_file);
  free (description);
  curl_global_cleanup ();
}

static int
parse_unsigned (const char *key, const char *value, unsigned min, unsigned max,
                unsigned *out)
{
  unsigned long v;
  char *end;

  errno = 0;
  v = strtoul (value, &end, 10);
  if (errno || end == value || *end != '\0' || value[0] == '-')
    {
      nbdkit_error ("cos: %s=%s: not a number", key, value);
      return -1;
    }
  if (v < min || v > max)
    {
      nbdkit_error ("cos: %s=%s: must be between %u and %u", key, value, min,
                    max);
      return -1;
    }
  *out = v;
  return 0;
}

static int
set_string (char **p, const char *value)
{
  free (*p);
  *p = strdup (value);
  if (*p == NULL)
    {
      nbdkit_error ("cos: strdup: %m");
      return -1;
    }
  return 0;
}

static int
cos_config (const char *key, const char *value)
{
  int r;

  if (strcmp (key, "endpoint") == 0)
    {
      /* One spelling per endpoint, since it is part of the identity the
       * hhc filter ties its cache to: scheme in lower case (https when
       * none is given), no trailing '/'.
       */
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
      free (endpoint);
      if (asprintf (&endpoint, "%s://%.*s", scheme, (int)n, rest) == -1)
        {
          endpoint = NULL;
          free (scheme);
          nbdkit_error ("cos: asprintf: %m");
          return -1;
        }
      free (scheme);
      return 0;
    }
  if (strcmp (key, "bucket") == 0)
    {
      if (*value == '\0' || strchr (value, '/'))
        {
          nbdkit_error ("cos: bucket=%s: not a bucket name", value);
          return -1;
        }
      return set_string (&bucket, value);
    }
  if (strcmp (key, "prefix") == 0)
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
      free (prefix);
      prefix = strndup (value, n);
      if (prefix == NULL)
        {
          nbdkit_error ("cos: strdup: %m");
          return -1;
        }
      return 0;
    }
  if (strcmp (key, "size") == 0)
    {
      want_size = nbdkit_parse_size (value);
      if (want_size == -1)
        return -1;
      if (want_size == 0 || want_size % 512 != 0)
        {
          nbdkit_error ("cos: size=%s: must be a positive multiple of 512",
                        value);
          return -1;
        }
      return 0;
    }
  if (strcmp (key, "object-size") == 0)
    {
      want_object_size = nbdkit_parse_size (value);
      if (want_object_size == -1)
        return -1;
      if (want_object_size < MIN_OBJECT_SIZE
          || want_object_size > MAX_OBJECT_SIZE
          || (want_object_size & (want_object_size - 1)) != 0)
        {
          nbdkit_error ("cos: object-size=%s: must be a power of two from 4K "
                        "to 32M",
                        value);
          return -1;
        }
      return 0;
    }
  if (strcmp (key, "create") == 0)
    {
      r = nbdkit_parse_bool (value);
      if (r == -1)
        return -1;
      create = r;
      return 0;
    }
  if (strcmp (key, "region") == 0)
    return set_string (&region, value);
  if (strcmp (key, "addressing") == 0)
    {
      if (strcmp (value, "path") == 0)
        virtual_host = false;
      else if (strcmp (value, "virtual") == 0)
        virtual_host = true;
      else
        {
          nbdkit_error ("cos: addressing=%s: use path or virtual", value);
          return -1;
        }
      return 0;
    }
  if (strcmp (key, "tls-verify") == 0)
    {
      r = nbdkit_parse_bool (value);
      if (r == -1)
        return -1;
      tls_verify = r;
      return 0;
    }
  if (strcmp (key, "check-etag") == 0)
    {
      r = nbdkit_parse_bool (value);
      if (r == -1)
        return -1;
      check_etag = r;
      return 0;
    }
  if (strcmp (key, "ca-file") == 0)
    {
      if (access (value, R_OK) == -1)
        {
          nbdkit_error ("cos: ca-file=%s: %m", value);
          return -1;
        }
      return set_string (&ca_file, value);
    }
  if (strcmp (key, "timeout") == 0)
    return parse_unsigned (key, value, 1, 3600, &timeout_s);
  if (strcmp (key, "retries") == 0)
    return parse_unsigned (key, value, 0, 100, &retries);
  if (strcmp (key, "connections") == 0)
    return parse_unsigned (key, value, 1, 1024, &connections);
  if (strcmp (key, "backoff") == 0)
    return parse_unsigned (key, value, 1, 60000, &backoff_ms);
  if (strcmp (key, "access-key") == 0)
    {
      free (access_key);
      access_key = NULL;
      return nbdkit_read_password (value, &access_key);
    }
  if (strcmp (key, "secret-key") == 0)
    {
      if (secret_key)
        memset (secret_key, 0, strlen (secret_key));
      free (secret_key);
      secret_key = NULL;
      return nbdkit_read_password (value, &secret_key);
    }
  if (strcmp (key, "object-cache") == 0)
    {
      object_cache_bytes = nbdkit_parse_size (value);
      return object_cache_bytes == -1 ? -1 : 0;
    }
  if (strcmp (key, "parallel") == 0)
    return parse_unsigned (key, value, 1, 64, &max_parallel);
  if (strcmp (key, "readahead") == 0)
    return parse_unsigned (key, value, 0, 63, &readahead);
  if (strcmp (key, "writeback") == 0)
    {
      writeback_bytes = nbdkit_parse_size (value);
      return writeback_bytes == -1 ? -1 : 0;
    }
  if (strcmp (key, "cos-stats") == 0)
    return set_string (&stats_file, value);

  nbdkit_error ("cos: unknown parameter '%s'", key);
  return -1;
}

static int
cos_config_complete (void)
{
  if (endpoint == NULL || bucket == NULL)
    {
      nbdkit_error ("cos: endpoint= and bucket= are required");
      return -1;
    }
  if (prefix == NULL && set_string (&prefix, "") == -1)
    return -1;
  if (region == NULL && set_string (&region, "us-east-1") == -1)
    return -1;
  if (access_key == NULL && getenv ("AWS_ACCESS_KEY_ID")
      && set_string (&access_key, getenv ("AWS_ACCESS_KEY_ID")) == -1)
    return -1;
  if (secret_key == NULL && getenv ("AWS_SECRET_ACCESS_KEY")
      && set_string (&secret_key, getenv ("AWS_SECRET_ACCESS_KEY")) == -1)
    return -1;
  if (access_key == NULL || secret_key == NULL || *access_key == '\0'
      || *secret_key == '\0')
    {
      nbdkit_error ("cos: no credentials: give access-key= and secret-key=, "
                    "or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
      return -1;
    }
  if (create && want_size == -1)
    {
      nbdkit_error ("cos: create=true needs size=");
      return -1;
    }
  return 0;
}

/* Object key of object IDX or, with IDX = -1, of the metadata. */
static void
object_key (int64_t idx, char *key, size_t n)
{
  const char *sep = prefix[0] ? "/" : "";

  if (idx < 0)
    snprintf (key, n, "%s%svolume.json", prefix, sep);
  else
    snprintf (key, n, "%s%s%016" PRIx64, prefix, sep, (uint64_t)idx);
}

static void
make_uuid (char *out)
{
  uint8_t u[16];

  hhc_uuid_generate (u);
  hhc_uuid_format (u, out);
}

static int
create_volume (const char *key)
{
  char created[32];
  time_t now = time (NULL);
  struct tm tm;
  json_t *j;
  char *text;
  int r;

  /* The default object size applies to new volumes only: an existing
   * one is opened with whatever it was made with.
   */
  if (want_object_size == -1)
    want_object_size = 1024 * 1024;
  make_uuid (uuid);
  gmtime_r (&now, &tm);
  strftime (created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tm);
  j = json_pack ("{s:s, s:i, s:I, s:I, s:s, s:s}", "format", VOLUME_FORMAT,
                 "version", VOLUME_VERSION, "size", (json_int_t)want_size,
                 "object_size", (json_int_t)want_object_size, "uuid", uuid,
                 "created", created);
  text = j ? json_dumps (j, JSON_INDENT (2)) : NULL;
  json_decref (j);
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
  r = s3_do (s3, &io);
  free (io.text);
  free (text);
  if (r == -1)
    return -1;
  if (r == 1)
    return 1; /* made by someone else meanwhile: open that one */
  size = want_size;
  object_size = want_object_size;
  nbdkit_debug ("cos: created volume %s: size %" PRIu64
                ", object size %" PRIu32,
                uuid, size, object_size);
  return 0;
}

/* Parse and check the metadata object (volume.c); fills size,
 * object_size, uuid.
 */
static int
parse_volume (const char *key, const char *text, size_t len)
{
  struct cos_volume v;
  char msg[4096];

  if (cos_volume_parse (text, len, bucket, key, want_size, want_object_size, &v,
                        msg, sizeof msg)
      == -1)
    {
      nbdkit_error ("%s", msg);
      return -1;
    }
  size = v.size;
  object_size = v.object_size;
  memcpy (uuid, v.uuid, 37);
  return 0;
}

static int put_object (uint64_t idx, const void *buf);
static pthread_mutex_t *object_lock (uint64_t idx);
static void stored (uint64_t idx, const void *data, bool ok);

static int
cos_get_ready (void)
{
  char key[1024];
  struct s3_config cfg = {
    .endpoint = endpoint,
    .bucket = bucket,
    .region = region,
    .access_key = access_key,
    .secret_key = secret_key,
    .virtual_host = virtual_host,
    .tls_verify = tls_verify,
    .check_etag = check_etag,
    .ca_file = ca_file,
    .timeout_ms = timeout_s * 1000L,
    .retries = retries,
    .connections = connections,
    .backoff_ms = backoff_ms,
    .backoff_max_ms = backoff_ms * 32 < 10000 ? backoff_ms * 32 : 10000,
  };
  int r;

  s3 = s3_open (&cfg);
  if (s3 == NULL)
    return -1;

  object_key (-1, key, sizeof key);
  struct s3_io io = { .method = "GET", .key = key, .missing_ok = true };
  r = s3_do (s3, &io);
  if (r == -1)
    return -1;
  if (r == 1)
    {
      io.text = NULL; /* s3_do keeps no body of a 404 for the caller */
      if (strcmp (io.code, "NoSuchBucket") == 0)
        {
          nbdkit_error ("cos: bucket '%s' does not exist at %s", bucket,
                        endpoint);
          return -1;
        }
      if (!create)
        {
          nbdkit_error ("cos: no volume at s3://%s/%s (to make one, add "
                        "create=true size=SIZE)",
                        bucket, key);
          return -1;
        }
      r = create_volume (key);
      if (r == -1)
        return -1;
      if (r == 1)
        {
          /* Someone else made it meanwhile: open theirs. */
          struct s3_io again = { .method = "GET", .key = key };
          if (s3_do (s3, &again) == -1)
            return -1;
          io = again;
          r = 0;
        }
      else
        r = 2; /* made here: size, object_size and uuid are set */
    }
  if (r == 0)
    {
      r = parse_volume (key, io.text, io.text_len);
      free (io.text);
      if (r == -1)
        return -1;
      nbdkit_debug ("cos: opened volume %s: size %" PRIu64
                    ", object size %" PRIu32,
                    uuid, size, object_size);
    }
  if (object_cache_bytes / object_size > 0)
    {
      cache = objcache_new (object_cache_bytes / object_size, object_size);
      if (cache == NULL)
        {
          nbdkit_error ("cos: object-cache=%" PRIi64 ": %m",
                        object_cache_bytes);
          return -1;
        }
      /* Read-ahead lands in the object cache: at most half of it, so
       * that the objects read ahead survive until they are asked for.
       */
      ra_objects = readahead;
      if (ra_objects > object_cache_bytes / object_size / 2)
        ra_objects = object_cache_bytes / object_size / 2;
      if (ra_objects < readahead)
        nbdkit_debug ("cos: readahead=%u: %u objects (half the object "
                      "cache)",
                      readahead, ra_objects);
    }
  if (writeback_bytes > 0)
    {
      static const struct wbuf_ops ops
          = { .store = put_object, .lock = object_lock, .stored = stored };
      uint64_t n = (writeback_bytes + object_size - 1) / object_size;
      wb = wbuf_new (&ops, n, object_size, max_parallel);
      if (wb == NULL)
        {
          nbdkit_error ("cos: writeback=%" PRIi64 ": %m", writeback_bytes);
          return -1;
        }
    }
  if (asprintf (&description, "hhc-cos %s %s %s %s", endpoint, bucket,
                prefix[0] ? prefix : "/", uuid)
      == -1)
    {
      description = NULL;
      nbdkit_error ("cos: asprintf: %m");
      return -1;
    }
  return 0;
}

static void *
cos_open (int readonly)
{
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static int64_t
cos_get_size (void *h)
{
  return size;
}

static const char *
cos_export_description (void *h)
{
  return description;
}

static int
cos_block_size (void *h, uint32_t *minimum, uint32_t *preferred,
                uint32_t *maximum)
{
  *minimum = 1;
  *preferred = object_size;
  *maximum = 0xffffffff;
  return 0;
}

static int
cos_can_multi_conn (void *h)
{
  /* One object cache and one write-back buffer for the process: every
   * connection sees every write, and a flush covers them all.
   */
  return 1;
}

static int
cos_can_fua (void *h)
{
  return NBDKIT_FUA_NATIVE; /* an acknowledged PUT is durable: wait for it */
}

static int
cos_can_flush (void *h)
{
  return 1;
}

static int
cos_can_trim (void *h)
{
  return 1;
}

static int
cos_can_zero (void *h)
{
  return 1;
}

static int
cos_can_extents (void *h)
{
  return 1;
}

/* Wait for the dirty objects in [LO, HI] (write-back). */
static int
sync_objects (uint64_t lo, uint64_t hi, const char *what)
{
  if (wb == NULL || wbuf_sync (wb, lo, hi) == 0)
    return 0;
  nbdkit_error ("cos: %s: dirty objects could not be stored (errors above); "
                "they stay dirty and the next flush tries again",
                what);
  errno = EIO;
  return -1;
}

static int
cos_flush (void *h, uint32_t flags)
{
  return sync_objects (0, UINT64_MAX, "flush");
}

static bool
is_zero (const void *buf, size_t n)
{
  const unsigned char *p = buf;

  return n == 0 || (p[0] == 0 && memcmp (p, p + 1, n - 1) == 0);
}

/* Read [off, off+n) of object IDX into BUF (missing: zeros). */
static int
read_object (uint64_t idx, uint32_t off, uint32_t n, void *buf)
{
  char key[1024];
  struct s3_io io = {
    .method = "GET", .key = key, .buf = buf, .buf_len = n, .missing_ok = true
  };
  int r;

  if ((wb && wbuf_read (wb, idx, off, n, buf))
      || objcache_read (cache, idx, off, n, buf))
    return 0;
  object_key (idx, key, sizeof key);
  if (n < object_size)
    {
      io.range_off = off;
      io.range_len = n;
    }
  r = s3_do (s3, &io);
  free (io.text);
  if (r == -1)
    return -1;
  if (r == 1)
    {
      /* Only a missing object reads as zeros; a missing bucket (deleted
       * under us, or a typo in a reconfiguration) is an error.
       */
      if (strcmp (io.code, "NoSuchKey") != 0)
        {
          nbdkit_error ("cos: GET s3://%s/%s: HTTP 404 %s", bucket, key,
                        io.code[0] ? io.code : "(no S3 error code)");
          errno = EIO;
          return -1;
        }
      memset (buf, 0, n);
      return 0;
    }
  return 0;
}

/* Object IDX whole, in a new buffer (free it), or NULL after an error. */
static char *
read_whole_object (uint64_t idx)
{
  char *obj = malloc (object_size);

  if (obj == NULL)
    {
      nbdkit_error ("cos: malloc: %m");
      return NULL;
    }
  if (read_object (idx, 0, object_size, obj) == -1)
    {
      free (obj);
      return NULL;
    }
  return obj;
}

/* Store a whole object: PUT, or DELETE when it is all zeros. */
static int
put_object (uint64_t idx, const void *buf)
{
  char key[1024];
  struct s3_io io = { .key = key };
  int r;

  object_key (idx, key, sizeof key);
  if (is_zero (buf, object_size))
    io.method = "DELETE";
  else
    {
      io.method = "PUT";
      io.body = buf;
      io.body_len = object_size;
    }
  r = s3_do (s3, &io);
  free (io.text);
  return r == 0 ? 0 : -1;
}

/* The caller holds the object's lock.  After a failure the store may
 * hold the old or the new content: forget it.
 */
static void
stored (uint64_t idx, const void *data, bool ok)
{
  if (ok)
    objcache_put (cache, idx, data);
  else
    objcache_drop (cache, idx);
}

static int
store_object (uint64_t idx, const void *buf)
{
  int r = put_object (idx, buf);

  stored (idx, buf, r == 0);
  return r;
}

static pthread_mutex_t *
object_lock (uint64_t idx)
{
  return &locks[(idx * 0x9E3779B97F4A7C15ULL) >> 54 & (NLOCKS - 1)];
}

/* Write-back: patch the object's dirty copy, or make one from its
 * content (wbuf.h); FUA then waits until it is stored.
 */
static int
buffer_object (uint64_t idx, uint32_t off, uint32_t n, const void *buf,
               bool fua)
{
  pthread_mutex_t *lock = object_lock (idx);
  char *obj = NULL;
  int r = -1;

  /* Into a dirty copy: no room needed.  Else wait for room with no
   * lock held, and look again.
   */
  hhc_lock (lock);
  if (wbuf_patch (wb, idx, off, n, buf))
    {
      r = 0;
      goto out;
    }
  /* Zeros over zeros change nothing and need no room: when the buffer
   * is full of objects whose stores fail, they must still succeed.  A
   * partial zero reads the object anyway (it stays in the object cache
   * for the read below); a whole one only when it would wait.
   */
  if (buf == NULL && (n < object_size || wbuf_full (wb)))
    {
      obj = read_whole_object (idx);
      if (obj == NULL)
        goto out;
      if (is_zero (obj + off, n))
        {
          r = 0;
          goto out;
        }
      objcache_put (cache, idx, obj);
      free (obj);
      obj = NULL;
    }
  hhc_unlock (lock);
  if (wbuf_reserve (wb) == -1)
    {
      nbdkit_error ("cos: write-back: no dirty object can be stored "
                    "(errors above)");
      return -1;
    }
  hhc_lock (lock);
  if (wbuf_patch (wb, idx, off, n, buf))
    {
      wbuf_unreserve (wb);
      r = 0;
      goto out;
    }
  obj = malloc (object_size);
  if (obj == NULL)
    {
      nbdkit_error ("cos: malloc: %m");
      wbuf_unreserve (wb);
      goto out;
    }
  if (n < object_size)
    {
      if (read_object (idx, 0, object_size, obj) == -1)
        {
          wbuf_unreserve (wb);
          goto out;
        }
      if (buf == NULL && is_zero (obj + off, n))
        {
          wbuf_unreserve (wb); /* zeros already */
          r = 0;
          goto out;
        }
    }
  if (buf)
    memcpy (obj + off, buf, n);
  else
    memset (obj + off, 0, n);
  if (wbuf_add (wb, idx, obj) == 0)
    {
      obj = NULL;
      r = 0;
    }
  else
    r = store_object (idx, obj); /* out of memory or threads: write through */
out:
  hhc_unlock (lock);
  free (obj);
  if (r == 0 && fua)
    r = sync_objects (idx, idx, "FUA write");
  return r;
}

/* Write BUF (or zeros when BUF is NULL) at [off, off+n) of object IDX. */
static int
write_object (uint64_t idx, uint32_t off, uint32_t n, const void *buf, bool fua)
{
  pthread_mutex_t *lock = object_lock (idx);
  char *obj = NULL;
  int r = -1;

  if (wb)
    return buffer_object (idx, off, n, buf, fua);
  hhc_lock (lock);
  if (off == 0 && n == object_size && buf)
    {
      r = store_object (idx, buf);
      goto out;
    }
  if (off == 0 && n == object_size)
    {
      char key[1024];
      struct s3_io io = { .method = "DELETE", .key = key };
      object_key (idx, key, sizeof key);
      r = s3_do (s3, &io) == 0 ? 0 : -1;
      free (io.text);
      objcache_drop (cache, idx); /* missing now (or unknown) */
      goto out;
    }
  obj = read_whole_object (idx);
  if (obj == NULL)
    goto out;
  if (buf)
    memcpy (obj + off, buf, n);
  else
    {
      /* Zeroing part of an object that is missing or already zero there
       * costs nothing.
       */
      if (is_zero (obj + off, n))
        {
          r = 0;
          goto out;
        }
      memset (obj + off, 0, n);
    }
  r = store_object (idx, obj);
out:
  hhc_unlock (lock);
  free (obj);
  return r;
}

/* Read object IDX into the object cache, under its lock as the cache
 * wants (objcache.c), unless it is there already.  A failure only
 * means no read-ahead: the read that wants the object tries again.
 */
static void
read_ahead (uint64_t idx)
{
  pthread_mutex_t *lock = object_lock (idx);
  char *obj;

  if (objcache_has (cache, idx) || (wb && wbuf_has (wb, idx))
      || (obj = malloc (object_size)) == NULL)
    return;
  hhc_lock (lock);
  if (!objcache_has (cache, idx) && !(wb && wbuf_has (wb, idx))
      && read_object (idx, 0, object_size, obj) == 0)
    {
      objcache_put (cache, idx, obj);
      __atomic_fetch_add (&ra_fetched, 1, __ATOMIC_RELAXED);
    }
  hhc_unlock (lock);
  free (obj);
}

/* One request's objects, done by up to max_parallel threads at once
 * (the first object by the calling thread): a 4 MiB read of 1 MiB
 * objects costs one round trip, not four.
 */
struct span {
  char *buf; /* NULL: zeros (writes only) */
  uint64_t offset;
  uint32_t count;
  bool write;
  bool fua;
  uint64_t first, last; /* object indexes */
  uint64_t ra_last;     /* reads: read ahead up to this object */
  pthread_mutex_t lock;
  uint64_t next; /* next object to take */
  int err;       /* first errno, 0 if none */
};

static void *
span_worker (void *p)
{
  struct span *sp = p;

  for (;;)
    {
      uint64_t idx, start, end;
      uint32_t off, n;
      char *b;
      int r;

      hhc_lock (&sp->lock);
      idx = sp->next++;
      r = sp->err;
      hhc_unlock (&sp->lock);
      if (idx > sp->last && idx <= sp->ra_last && r == 0)
        {
          read_ahead (idx);
          continue;
        }
      if (idx > sp->last || r != 0)
        return NULL;
      start = idx == sp->first ? sp->offset : idx * object_size;
      end = (idx + 1) * object_size;
      if (end > sp->offset + sp->count)
        end = sp->offset + sp->count;
      off = start % object_size;
      n = end - start;
      b = sp->buf ? sp->buf + (start - sp->offset) : NULL;
      r = sp->write ? write_object (idx, off, n, b, sp->fua)
                    : read_object (idx, off, n, b);
      if (r == -1)
        {
          hhc_lock (&sp->lock);
          if (sp->err == 0)
            sp->err = errno ? errno : EIO;
          hhc_unlock (&sp->lock);
        }
    }
}

static int
do_span (char *buf, uint32_t count, uint64_t offset, bool write, bool fua,
         unsigned ahead)
{
  struct span sp = { .buf = buf,
                     .offset = offset,
                     .count = count,
                     .write = write,
                     .fua = fua,
                     .first = offset / object_size,
                     .last = (offset + count - 1) / object_size };
  pthread_t tids[64];
  unsigned nthreads = 0;
  uint64_t nobj, nall = (size + object_size - 1) / object_size;

  sp.ra_last = sp.last + ahead < nall ? sp.last + ahead : nall - 1;
  if (sp.ra_last < sp.last)
    sp.ra_last = sp.last;
  nobj = sp.ra_last - sp.first + 1;

  sp.next = sp.first;
  pthread_mutex_init (&sp.lock, NULL);
  while (nthreads + 1 < max_parallel && nthreads + 1 < nobj
         && pthread_create (&tids[nthreads], NULL, span_worker, &sp) == 0)
    nthreads++;
  span_worker (&sp);
  for (unsigned i = 0; i < nthreads; i++)
    pthread_join (tids[i], NULL);
  pthread_mutex_destroy (&sp.lock);
  if (sp.err)
    {
      errno = sp.err;
      return -1;
    }
  return 0;
}

/* Read-ahead: a read that goes on where the last one ended, and whose
 * last object is not cached, also reads the next ra_objects objects into
 * the object cache, in parallel with its own: the reads after it are
 * served from memory until the next miss reads ahead again.  One GET's
 * time for ra_objects + 1 objects, where a sequential reader at queue
 * depth 1 would wait for each GET in turn.
 */
static int
cos_pread (void *h, void *buf, uint32_t count, uint64_t offset, uint32_t flags)
{
  uint64_t prev
      = __atomic_exchange_n (&seq_next, offset + count, __ATOMIC_RELAXED);
  uint64_t last = (offset + count - 1) / object_size;
  unsigned ahead = 0;

  if (ra_objects > 0 && prev == offset && offset > 0
      && !objcache_has (cache, last))
    ahead = ra_objects;
  return do_span (buf, count, offset, false, false, ahead);
}

static int
write_range (const char *buf, uint32_t count, uint64_t offset, uint32_t flags)
{
  return do_span ((char *)buf, count, offset, true,
                  (flags & NBDKIT_FLAG_FUA) != 0, 0);
}

static int
cos_pwrite (void *h, const void *buf, uint32_t count, uint64_t offset,
            uint32_t flags)
{
  return write_range (buf, count, offset, flags);
}

static int
cos_zero (void *h, uint32_t count, uint64_t offset, uint32_t flags)
{
  return write_range (NULL, count, offset, flags);
}

static int
cos_trim (void *h, uint32_t count, uint64_t offset, uint32_t flags)
{
  return write_range (NULL, count, offset, flags);
}

/* Objects [FROM, TO) that the listing does not have: holes, except
 * those dirty (DIRTY[i - FIRST]), which are data.
 */
static int
add_gap (struct nbdkit_extents *extents, uint64_t from, uint64_t to,
         const bool *dirty, uint64_t first)
{
  while (from < to)
    {
      bool d = dirty[from - first];
      uint64_t end = from + 1;
      while (end < to && dirty[end - first] == d)
        end++;
      if (nbdkit_add_extent (extents, from * object_size,
                             (end - from) * object_size,
                             d ? 0 : NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO)
          == -1)
        return -1;
      from = end;
    }
  return 0;
}

/* Which objects of [offset, offset+count) exist, by one listing (at
 * most 1000 keys); nbdkit accepts fewer extents than asked for.
 */
static int
cos_extents (void *h, uint32_t count, uint64_t offset, uint32_t flags,
             struct nbdkit_extents *extents)
{
  uint64_t first = offset / object_size;
  uint64_t last = (offset + count - 1) / object_size;
  char key[1024], after[1024], got[1024];
  char *eprefix = NULL, *eafter = NULL, *query = NULL;
  uint64_t next = first; /* first object not yet reported */
  bool dirty[1000] = { false };
  size_t pos = 0;
  int r = -1, found;

  if (last - first >= 1000)
    last = first + 999;
  /* Dirty objects may not be in the listing yet: they are data. */
  if (wb)
    wbuf_dirty_set (wb, first, last, dirty);
  if (prefix[0])
    {
      snprintf (key, sizeof key, "%s/", prefix);
      eprefix = curl_easy_escape (NULL, key, 0);
    }
  if (first > 0)
    {
      object_key (first - 1, after, sizeof after);
      eafter = curl_easy_escape (NULL, after, 0);
    }
  if ((prefix[0] && eprefix == NULL) || (first > 0 && eafter == NULL)
      || asprintf (&query, "list-type=2&max-keys=%" PRIu64 "%s%s%s%s",
                   last - first + 1, eprefix ? "&prefix=" : "",
                   eprefix ? eprefix : "", eafter ? "&start-after=" : "",
                   eafter ? eafter : "")
             == -1)
    {
      query = NULL;
      nbdkit_error ("cos: out of memory");
      goto out;
    }
  {
    struct s3_io io = { .method = "GET", .key = NULL, .query = query };
    char trunc[16] = "false";
    size_t tpos = 0;
    if (s3_do (s3, &io) == -1)
      goto out;
    while ((found
            = s3_xml_next (io.text, io.text_len, &pos, "Key", got, sizeof got))
           == 1)
      {
        size_t plen = prefix[0] ? strlen (prefix) + 1 : 0;
        const char *name = got + plen;
        char *end;
        uint64_t idx;
        /* Only PREFIX/ followed by 16 hex digits is an object. */
        if (strlen (got) != plen + 16
            || (plen
                && (strncmp (got, prefix, plen - 1) != 0
                    || got[plen - 1] != '/')))
          continue;
        idx = strtoull (name, &end, 16);
        if (*end != '\0' || idx < next)
          continue;
        if (idx > last)
          break;
        if (add_gap (extents, next, idx, dirty, first) == -1)
          goto out_text;
        if (nbdkit_add_extent (extents, idx * object_size, object_size, 0)
            == -1)
          goto out_text;
        next = idx + 1;
      }
    if (found == -1
        || s3_xml_next (io.text, io.text_len, &tpos, "IsTruncated", trunc,
                        sizeof trunc)
               == -1)
      {
        nbdkit_error ("cos: GET s3://%s?list-type=2: malformed listing",
                      bucket);
        errno = EIO;
        goto out_text;
      }
    /* A truncated listing (other keys under the prefix used up
     * max-keys) says nothing about the objects after its last key:
     * report only what it covered, or, if it covered nothing, the
     * first object as data (always a safe answer).
     */
    if (strcmp (trunc, "true") == 0 && next <= last)
      {
        if (next == first
            && nbdkit_add_extent (extents, first * object_size, object_size, 0)
                   == -1)
          goto out_text;
      }
    else if (next <= last
             && add_gap (extents, next, last + 1, dirty, first) == -1)
      goto out_text;
    r = 0;
out_text:
    free (io.text);
  }
out:
  curl_free (eprefix);
  curl_free (eafter);
  free (query);
  return r;
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name = "cos",
  .longname = "hhc-gateway S3/COS object store plugin",
  .version = PACKAGE_VERSION,
  .description = "Serve a block volume stored as objects in S3 or COS",
  .load = cos_load,
  .unload = cos_unload,
  .cleanup = cos_cleanup,
  .config = cos_config,
  .config_complete = cos_config_complete,
  .config_help
  = "endpoint=URL          S3 endpoint, e.g. http://127.0.0.1:4568 (required)\n"
    "bucket=NAME           bucket (required)\n"
    "prefix=PATH           object name prefix\n"
    "size=SIZE             volume size (with create=true; checked otherwise)\n"
    "create=true           make the volume if it does not exist\n"
    "object-size=SIZE      object size, power of two (default 1M)\n"
    "access-key=KEY        access key id (or -, +FILE, -FD; or env)\n"
    "secret-key=KEY        secret key (or -, +FILE, -FD; or env)\n"
    "region=REGION         signing region (default us-east-1)\n"
    "addressing=path|virtual  bucket in the path or in the host name\n"
    "tls-verify=BOOL       verify the server's certificate (default true)\n"
    "ca-file=FILE          CA certificates to verify it with\n"
    "check-etag=BOOL       a PUT's ETag must be its MD5 (default true)\n"
    "timeout=SECS          per attempt (default 30)\n"
    "retries=N             retries of a failed request (default 5)\n"
    "backoff=MS            first retry delay, doubling (default 100)\n"
    "connections=N         keep-alive connections (default 16)\n"
    "object-cache=SIZE     objects kept for read-modify-write (default 64M)\n"
    "parallel=N            objects of one request at once (default 8)\n"
    "readahead=N           objects read ahead of a sequential read (default "
    "4)\n"
    "writeback=SIZE        dirty objects held until stored (default 16M; "
    "0: off)\n"
    "cos-stats=FILE        write request and retry counts at exit",
  .magic_config_key = NULL,
  .get_ready = cos_get_ready,
  .open = cos_open,
  .get_size = cos_get_size,
  .export_description = cos_export_description,
  .block_size = cos_block_size,
  .can_multi_conn = cos_can_multi_conn,
  .can_fua = cos_can_fua,
  .can_flush = cos_can_flush,
  .can_trim = cos_can_trim,
  .can_zero = cos_can_zero,
  .can_extents = cos_can_extents,
  .pread = cos_pread,
  .pwrite = cos_pwrite,
  .flush = cos_flush,
  .trim = cos_trim,
  .zero = cos_zero,
  .extents = cos_extents,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
