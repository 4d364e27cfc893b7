/* cos-backend: AWS Signature Version 4 for S3 (header authorization).
 *
 * Pure functions of their inputs (no clock, no network), so that the
 * unit test can check them byte for byte against AWS's published
 * worked examples.  OpenSSL does the hashing.
 */
#ifndef HHC_COS_SIGV4_H
#define HHC_COS_SIGV4_H

#include <stddef.h>

/* One request header to sign.  Names may be in any case and order;
 * values are trimmed and inner runs of spaces collapsed as SigV4 asks.
 */
struct sigv4_header {
  const char *name;
  const char *value;
};

struct sigv4_request {
  const char *method; /* "GET", "PUT", ... */
  /* The absolute path exactly as sent on the wire, already
   * URI-encoded ("/bucket/dir/key", "/" for the bucket itself).  S3
   * signs it as it is (no second encoding, no normalisation).
   */
  const char *path;
  /* The query string as sent ("list-type=2&prefix=a%2Fb", or "" or
   * NULL).  Parameters are sorted by name for the canonical request; a
   * parameter without '=' signs as "name=".  Values must already be
   * URI-encoded as SigV4 wants (sigv4_uri_encode).
   */
  const char *query;
  const struct sigv4_header *headers; /* every header to sign */
  size_t nheaders;
  const char *payload_hash; /* hex SHA-256 of the body, or UNSIGNED-PAYLOAD */
};

struct sigv4_scope {
  const char *amz_date; /* "20130524T000000Z" (x-amz-date) */
  const char *region;   /* "us-east-1" */
  const char *service;  /* "s3" */
};

/* Hex SHA-256 and base64 MD5 of a buffer.  HEX has room for 65 bytes,
 * B64 for 25.
 */
extern void sigv4_sha256_hex (const void *data, size_t len, char *hex);
extern void sigv4_md5_base64 (const void *data, size_t len, char *b64);
/* Hex MD5 (an S3 ETag without its quotes): 33 bytes. */
extern void sigv4_md5_hex (const void *data, size_t len, char *hex);
/* Both of the MD5's encodings from one pass over the data. */
extern void sigv4_md5_hex_base64 (const void *data, size_t len, char *hex,
                                  char *b64);

/* URI-encode S for SigV4: unreserved characters (A-Z a-z 0-9 - . _ ~)
 * stay, every other byte becomes %XX (upper case hex); '/' stays when
 * KEEP_SLASH is set (paths), else becomes %2F (query values).  Returns
 * a malloc'd string, or NULL (errno set).
 */
extern char *sigv4_uri_encode (const char *s, int keep_slash);

/* The canonical request, and the signed header list ("host;range;...")
 * separately.  Both malloc'd; return 0, or -1 with errno set.
 */
extern int sigv4_canonical_request (const struct sigv4_request *req,
                                    char **canonical, char **signed_headers);

/* The string to sign for a canonical request.  Malloc'd; NULL on
 * error (errno set).
 */
extern char *sigv4_string_to_sign (const struct sigv4_scope *scope,
                                   const char *canonical);

/* The hex signature (65 bytes with the NUL) of STRING_TO_SIGN with the
 * key derived from SECRET_KEY and the scope.  Returns 0 or -1.
 */
extern int sigv4_signature (const char *secret_key,
                            const struct sigv4_scope *scope,
                            const char *string_to_sign, char *hex);

/* All of the above: the value of the Authorization header for REQ.
 * Malloc'd; NULL on error (errno set).  The result holds the access key
 * id but never the secret.
 */
extern char *sigv4_authorization (const char *access_key,
                                  const char *secret_key,
                                  const struct sigv4_scope *scope,
                                  const struct sigv4_request *req);

#endif /* HHC_COS_SIGV4_H */
