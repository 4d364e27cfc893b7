/* cos-backend: the plugin's parameters (see config.c). */
#ifndef HHC_COS_CONFIG_H
#define HHC_COS_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

/* What the parameters ask for; set by .config, read-only from
 * .get_ready on.
 */
struct cos_conf {
  char *endpoint;           /* scheme in lower case, no trailing '/' */
  char *bucket;             /* required */
  char *prefix;             /* without a trailing '/'; may be empty */
  int64_t want_size;        /* size=, -1: not given */
  int64_t want_object_size; /* object-size=, -1: not given */
  bool create;
  char *region; /* default us-east-1 */
  bool virtual_host;
  bool tls_verify;
  bool check_etag;
  char *ca_file;
  unsigned timeout_s;
  unsigned retries;
  unsigned connections;
  unsigned backoff_ms;
  char *access_key;
  char *secret_key; /* wiped before it is freed */
  char *stats_file; /* cos-stats= */
  int64_t object_cache_bytes;
  unsigned max_parallel; /* parallel= */
  unsigned readahead;    /* objects */
  int64_t writeback_bytes;
};

extern struct cos_conf conf;

/* .config: KEY=VALUE into conf.  Returns -1 after nbdkit_error. */
extern int config_set (const char *key, const char *value);

/* .config_complete: the defaults, the environment's credentials and
 * the checks between keys.  Returns -1 after nbdkit_error.
 */
extern int config_complete (void);

/* Free what conf holds (.unload). */
extern void config_free (void);

/* STR, copied into *P (whose old value is freed).  Returns -1 after
 * nbdkit_error.
 */
extern int config_set_string (char **p, const char *str);

#define COS_CONFIG_HELP                                                        \
  "endpoint=URL          S3 endpoint, e.g. http://127.0.0.1:4568 (required)\n" \
  "bucket=NAME           bucket (required)\n"                                  \
  "prefix=PATH           object name prefix\n"                                 \
  "size=SIZE             volume size (with create=true; checked otherwise)\n"  \
  "create=true           make the volume if it does not exist\n"               \
  "object-size=SIZE      object size, power of two (default 1M)\n"             \
  "access-key=KEY        access key id (or -, +FILE, -FD; or env)\n"           \
  "secret-key=KEY        secret key (or -, +FILE, -FD; or env)\n"              \
  "region=REGION         signing region (default us-east-1)\n"                 \
  "addressing=path|virtual  bucket in the path or in the host name\n"          \
  "tls-verify=BOOL       verify the server's certificate (default true)\n"     \
  "ca-file=FILE          CA certificates to verify it with\n"                  \
  "check-etag=BOOL       a PUT's ETag must be its MD5 (default true)\n"        \
  "timeout=SECS          per attempt (default 30)\n"                           \
  "retries=N             retries of a failed request (default 5)\n"            \
  "backoff=MS            first retry delay, doubling (default 100)\n"          \
  "connections=N         keep-alive connections (default 16)\n"                \
  "object-cache=SIZE     objects kept for read-modify-write (default 64M)\n"   \
  "parallel=N            objects of one request at once (default 8)\n"         \
  "readahead=N           objects read ahead of a sequential read (default "    \
  "4)\n"                                                                       \
  "writeback=SIZE        dirty objects held until stored (default 16M; "       \
  "0: off)\n"                                                                  \
  "cos-stats=FILE        write request and retry counts at exit"

#endif /* HHC_COS_CONFIG_H */
