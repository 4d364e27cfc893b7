/* cos-backend: what s3.c (the client: handles, retries) and
 * s3-attempt.c (one attempt of a request) share.  Nothing else
 * includes it.
 */
#ifndef HHC_COS_S3_INT_H
#define HHC_COS_S3_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "s3.h"

struct conn {
  CURL *h;
  bool busy;
  bool used; /* has had a connection before */
};

struct s3 {
  /* Configuration, owned copies. */
  char *scheme;    /* "http" or "https" */
  char *authority; /* "host:port" as written in the endpoint */
  char *bucket;
  char *region;
  char *access_key;
  char *secret_key;
  bool virtual_host;
  bool tls_verify;
  bool check_etag;
  char *ca_file;
  long timeout_ms;
  unsigned retries;
  unsigned backoff_ms, backoff_max_ms;

  CURLSH *share;
  pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];

  pthread_mutex_t lock; /* protects conns[].busy */
  pthread_cond_t cond;  /* a handle became free */
  struct conn *conns;
  unsigned nconns;

  _Atomic uint64_t requests, retries_n, retry_http, retry_slow, retry_net,
      retry_etag, failures, bytes_in, bytes_out, reconnects;

  pthread_mutex_t rng_lock;
  unsigned rng; /* jitter only: no need for anything better */
};

/* What every attempt of one request sends the same: the hashes of the
 * body, computed once per request (hashing a 1 MiB body costs more CPU
 * than the rest of the request).
 */
struct digests {
  char payload_hash[65]; /* hex SHA-256 */
  char md5b64[32];       /* Content-MD5 */
  char md5hex[33];       /* the ETag S3 answers */
};

/* How an attempt ended: done, an answer that is not an error, worth
 * a retry (by reason, for the counters), or failed for good.
 */
enum outcome {
  DONE,
  MISSING,
  RETRY_HTTP,
  RETRY_SLOW,
  RETRY_NET,
  RETRY_ETAG,
  FAIL
};

/* One attempt of IO on handle C (taken from the pool by the caller),
 * to PATH ("/bucket/key", encoded).  Fills IO's out fields; the reason
 * of anything but DONE and MISSING goes into MSG[0..MSGSZ), after
 * "cos: METHOD key: ".
 */
extern enum outcome s3_attempt (struct s3 *s3, struct conn *c, struct s3_io *io,
                                const char *path, const struct digests *dg,
                                char *msg, size_t msgsz);

#endif /* HHC_COS_S3_INT_H */
