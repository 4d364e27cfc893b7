/* cos-backend: PREFIX/volume.json, the metadata object of a volume
 * (see volume.c).
 */
#ifndef HHC_COS_VOLUME_H
#define HHC_COS_VOLUME_H

#include <stddef.h>
#include <stdint.h>

#define VOLUME_FORMAT "hhc-cos-volume"
#define VOLUME_VERSION 1
#define MIN_OBJECT_SIZE (4 * 1024)
#define MAX_OBJECT_SIZE (32 * 1024 * 1024)

/* What volume.json records. */
struct cos_volume {
  uint64_t size;        /* bytes, a positive multiple of 512 */
  uint32_t object_size; /* a power of two, MIN_ to MAX_OBJECT_SIZE */
  char uuid[37];        /* 36 characters */
};

/* Parse and check the metadata object TEXT[0..LEN) of
 * s3://BUCKET/KEY (both for messages only).  WANT_SIZE and
 * WANT_OBJECT_SIZE are what the parameters ask for (-1: anything).
 * Returns 0 and fills *VOL, or -1 with the whole error message
 * ("cos: ...") in MSG[0..MSGSZ).
 */
extern int cos_volume_parse (const char *text, size_t len, const char *bucket,
                             const char *key, int64_t want_size,
                             int64_t want_object_size, struct cos_volume *vol,
                             char *msg, size_t msgsz);

#endif /* HHC_COS_VOLUME_H */
