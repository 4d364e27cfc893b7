/* cos-backend: PREFIX/volume.json, the metadata object of a volume:
 * its text for a new volume and the checked parse of what the store
 * holds (see volume-json.c).
 */
#ifndef HHC_COS_VOLUME_JSON_H
#define HHC_COS_VOLUME_JSON_H

#include <stddef.h>
#include <stdint.h>

#define VOLUME_FORMAT "hhc-cos-volume"
#define VOLUME_VERSION 1
#define MIN_OBJECT_SIZE (4 * 1024)
#define MAX_OBJECT_SIZE (32 * 1024 * 1024)

/* What volume.json records. */
struct volume_json {
  uint64_t size;        /* bytes, a positive multiple of 512 */
  uint32_t object_size; /* a power of two, MIN_ to MAX_OBJECT_SIZE */
  char uuid[37];        /* 36 characters */
};

/* The text of volume.json for VOL, created now (malloc'd: free it), or
 * NULL when out of memory.
 */
extern char *volume_json_build (const struct volume_json *vol);

/* Parse and check the metadata object TEXT[0..LEN) of
 * s3://BUCKET/KEY (both for messages only).  WANT_SIZE and
 * WANT_OBJECT_SIZE are what the parameters ask for (-1: anything).
 * Returns 0 and fills *VOL, or -1 with the whole error message
 * ("cos: ...") in MSG[0..MSGSZ).
 */
extern int volume_json_parse (const char *text, size_t len, const char *bucket,
                              const char *key, int64_t want_size,
                              int64_t want_object_size, struct volume_json *vol,
                              char *msg, size_t msgsz);

#endif /* HHC_COS_VOLUME_JSON_H */
