/* cos-backend: PREFIX/volume.json, the metadata object of a volume:
 * built for a new volume, parsed when one is opened.
 *
 * It is read from the store, so anything may be in it (another tool's
 * object, a newer format, a damaged or hostile store): the parse gives
 * a message instead of calling nbdkit_error, so that it can be tested
 * and fuzzed (tests/fuzz/fuzz-volume-json.c) without nbdkit.
 */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "volume-json.h"

char *
volume_json_build (const struct volume_json *vol)
{
  char created[32];
  time_t now = time (NULL);
  struct tm tm;
  json_t *j;
  char *text;

  gmtime_r (&now, &tm);
  strftime (created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tm);
  j = json_pack ("{s:s, s:i, s:I, s:I, s:s, s:s}", "format", VOLUME_FORMAT,
                 "version", VOLUME_VERSION, "size", (json_int_t)vol->size,
                 "object_size", (json_int_t)vol->object_size, "uuid", vol->uuid,
                 "created", created);
  text = j ? json_dumps (j, JSON_INDENT (2)) : NULL;
  json_decref (j);
  return text;
}

int
volume_json_parse (const char *text, size_t len, const char *bucket,
                   const char *key, int64_t want_size, int64_t want_object_size,
                   struct volume_json *vol, char *msg, size_t msgsz)
{
  json_error_t err;
  json_t *j = json_loadb (text, len, 0, &err);
  const char *format = NULL, *id = NULL;
  json_int_t version = 0, sz = 0, osz = 0;
  int r = -1;

  if (j == NULL)
    {
      snprintf (msg, msgsz,
                "cos: s3://%s/%s is not an hhc cos volume: not JSON "
                "(line %d: %s)",
                bucket, key, err.line, err.text);
      return -1;
    }
  if (json_unpack_ex (j, &err, 0, "{s:s, s:I, s:I, s:I, s:s}", "format",
                      &format, "version", &version, "size", &sz, "object_size",
                      &osz, "uuid", &id)
          == -1
      || strcmp (format, VOLUME_FORMAT) != 0)
    {
      snprintf (msg, msgsz, "cos: s3://%s/%s is not an hhc cos volume (%s)",
                bucket, key, format ? "wrong format" : err.text);
      goto out;
    }
  if (version != VOLUME_VERSION)
    {
      snprintf (msg, msgsz,
                "cos: s3://%s/%s: volume format version %lld is not "
                "supported (this plugin reads version %d)",
                bucket, key, (long long)version, VOLUME_VERSION);
      goto out;
    }
  if (sz <= 0 || sz % 512 != 0 || osz < MIN_OBJECT_SIZE || osz > MAX_OBJECT_SIZE
      || (osz & (osz - 1)) != 0 || strlen (id) != 36)
    {
      snprintf (msg, msgsz,
                "cos: s3://%s/%s: corrupt volume metadata (size %lld, "
                "object size %lld)",
                bucket, key, (long long)sz, (long long)osz);
      goto out;
    }
  if (want_size != -1 && want_size != sz)
    {
      snprintf (msg, msgsz,
                "cos: size=%" PRIi64 " conflicts with the volume's "
                "recorded size %lld (s3://%s/%s); leave size= out to open "
                "it",
                want_size, (long long)sz, bucket, key);
      goto out;
    }
  if (want_object_size != -1 && want_object_size != osz)
    {
      snprintf (msg, msgsz,
                "cos: object-size=%" PRIi64 " conflicts with the volume's "
                "recorded object size %lld (s3://%s/%s)",
                want_object_size, (long long)osz, bucket, key);
      goto out;
    }
  vol->size = sz;
  vol->object_size = osz;
  memcpy (vol->uuid, id, 37);
  r = 0;
out:
  json_decref (j);
  return r;
}
