/* cos-backend: a small S3 client on libcurl (see s3.c).
 *
 * One struct s3 holds a pool of keep-alive curl handles sharing a DNS
 * and TLS session cache.  s3_do sends one request, signed with SigV4,
 * and retries it with capped exponential back-off and jitter when the
 * failure is one that a retry can cure (5xx, 429/SlowDown, a timeout,
 * a dropped connection, a PUT whose ETag does not match its MD5).
 */
#ifndef HHC_COS_S3_H
#define HHC_COS_S3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct s3_config {
  const char *endpoint; /* "http://127.0.0.1:4568", "https://s3.example" */
  const char *bucket;
  const char *region;     /* "us-east-1" */
  const char *access_key; /* key id: may appear in messages */
  const char *secret_key; /* never appears anywhere */
  bool virtual_host;      /* bucket.host/key instead of host/bucket/key */
  bool tls_verify;
  bool check_etag;     /* a PUT's ETag must be the body's MD5 */
  const char *ca_file; /* or NULL */
  long timeout_ms;     /* of one attempt */
  unsigned retries;    /* attempts after the first */
  unsigned connections;
  unsigned backoff_ms;     /* first back-off; doubles each retry */
  unsigned backoff_max_ms; /* cap */
};

/* Counters, for stats and tests.  Updated atomically. */
struct s3_stats {
  uint64_t requests;   /* attempts sent */
  uint64_t retries;    /* attempts that were retries */
  uint64_t retry_http; /* ... after a 500/502/503/504 */
  uint64_t retry_slow; /* ... after 429 or SlowDown */
  uint64_t retry_net;  /* ... after a timeout or a dropped connection */
  uint64_t retry_etag; /* ... after a wrong ETag or BadDigest */
  uint64_t failures;   /* requests that failed for good */
  uint64_t reconnects; /* new connections of handles that had one */
  uint64_t bytes_in;   /* object bytes read */
  uint64_t bytes_out;  /* object bytes written */
};

struct s3_io {
  /* In. */
  const char *method; /* GET, PUT, HEAD, DELETE */
  const char *key;    /* object key (not encoded); NULL: the bucket */
  const char *query;  /* encoded query string, or NULL */
  uint64_t range_off; /* GET: bytes range_off..range_off+range_len-1 */
  uint64_t range_len; /* 0: no Range header */
  const void *body;   /* PUT */
  size_t body_len;
  void *buf; /* GET: exactly buf_len bytes land here (fewer: retried) */
  size_t buf_len;
  bool missing_ok;  /* 404 is an answer, not an error */
  bool create_only; /* PUT with If-None-Match: *; 412 is an answer */

  /* Out. */
  long status;
  size_t got; /* bytes stored in buf */
  char *text; /* GET without buf: the body (malloc'd, NUL ended) */
  size_t text_len;
  char code[64]; /* S3 error code of the last answer, if any */
};

struct s3;

/* Returns NULL after nbdkit_error on a bad configuration. */
extern struct s3 *s3_open (const struct s3_config *cfg);
extern void s3_close (struct s3 *s3);
extern void s3_get_stats (struct s3 *s3, struct s3_stats *out);

/* Send IO.  Returns 0 on a 2xx answer, 1 on 404 when missing_ok (the
 * S3 code, NoSuchKey or NoSuchBucket, is in io->code) and on 412 when
 * create_only (the object exists already), or -1 after
 * nbdkit_error with errno set.  Free io->text afterwards.
 */
extern int s3_do (struct s3 *s3, struct s3_io *io);

/* The S3 error code that a status maps to errno (EPERM, ENOSPC, EIO,
 * ...).  One place for the whole plugin.
 */
extern int s3_errno (long status, const char *code);

/* XML helpers for S3 answers (no DTDs, no namespaces needed).  Find the
 * first <TAG>text</TAG> at or after *POS in XML[0..LEN); copy its text,
 * entities decoded, into OUT (at most OUTSZ-1 bytes: longer text is an
 * error) and move *POS past it.  Returns 1 found, 0 not found, -1
 * malformed or too long.
 */
extern int s3_xml_next (const char *xml, size_t len, size_t *pos,
                        const char *tag, char *out, size_t outsz);

#endif /* HHC_COS_S3_H */
