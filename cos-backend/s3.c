/* cos-backend: a small S3 client on libcurl (see s3.h).
 *
 * Handles: a fixed pool of curl easy handles.  A handle keeps its
 * connection alive between requests; all of them share one DNS cache
 * and one TLS session cache (a CURLSH with a lock per data kind), so a
 * new connection to the same endpoint skips the resolver and resumes
 * the TLS session.  Each attempt of a request takes a free handle,
 * resets its options (curl_easy_reset keeps the live connection and
 * the share), sets them for this request, signs, performs
 * (s3-attempt.c), and gives the handle back.
 *
 * Retries: only failures that another attempt can cure are retried
 * (s3-attempt.c tells which): 500/502/503/504, 429 and SlowDown,
 * curl's timeout, connect and transfer errors (a dropped connection
 * shows up as one of those), and a PUT whose ETag is not the MD5 we
 * sent.  Back-off doubles from backoff_ms up to backoff_max_ms; each
 * sleep is uniformly drawn in [d/2, d] (jitter, so that many threads
 * that failed together do not come back together).  Every retry is
 * counted by its reason.
 *
 * Secrets: the secret key is only used to derive the signing key.  It
 * is never put in a message, and curl's verbose output is never on.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "lock.h"
#include "s3-int.h"
#include "sigv4.h"

static void
share_lock (CURL *h, curl_lock_data data, curl_lock_access access, void *p)
{
  struct s3 *s3 = p;
  hhc_lock (&s3->share_locks[data]);
}

static void
share_unlock (CURL *h, curl_lock_data data, void *p)
{
  struct s3 *s3 = p;
  hhc_unlock (&s3->share_locks[data]);
}

static void
free_config (struct s3 *s3)
{
  free (s3->scheme);
  free (s3->authority);
  free (s3->bucket);
  free (s3->region);
  free (s3->access_key);
  if (s3->secret_key)
    {
      memset (s3->secret_key, 0, strlen (s3->secret_key));
      free (s3->secret_key);
    }
  free (s3->ca_file);
}

/* Split "scheme://authority[/]" (scheme defaults to https). */
static int
parse_endpoint (struct s3 *s3, const char *ep)
{
  const char *p = strstr (ep, "://");
  const char *auth = p ? p + 3 : ep;
  size_t n;

  if (p)
    {
      if ((size_t)(p - ep) == 4 && strncasecmp (ep, "http", 4) == 0)
        s3->scheme = strdup ("http");
      else if ((size_t)(p - ep) == 5 && strncasecmp (ep, "https", 5) == 0)
        s3->scheme = strdup ("https");
      else
        {
          nbdkit_error ("cos: endpoint=%s: the scheme must be http or https",
                        ep);
          return -1;
        }
    }
  else
    s3->scheme = strdup ("https");
  n = strcspn (auth, "/?#");
  if (n == 0 || (auth[n] != '\0' && strcmp (auth + n, "/") != 0))
    {
      nbdkit_error ("cos: endpoint=%s: expected [http[s]://]HOST[:PORT] "
                    "with no path",
                    ep);
      return -1;
    }
  if (strchr (auth, '@') && strchr (auth, '@') < auth + n)
    {
      nbdkit_error ("cos: endpoint=%s: no user information in the endpoint: "
                    "use access-key= and secret-key=",
                    ep);
      return -1;
    }
  s3->authority = strndup (auth, n);
  if (s3->scheme == NULL || s3->authority == NULL)
    {
      nbdkit_error ("cos: strdup: %m");
      return -1;
    }
  return 0;
}

/* The DNS and TLS session caches that every handle shares. */
static int
open_share (struct s3 *s3)
{
  s3->share = curl_share_init ();
  if (s3->share == NULL
      || curl_share_setopt (s3->share, CURLSHOPT_LOCKFUNC, share_lock)
      || curl_share_setopt (s3->share, CURLSHOPT_UNLOCKFUNC, share_unlock)
      || curl_share_setopt (s3->share, CURLSHOPT_USERDATA, s3)
      || curl_share_setopt (s3->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS)
      || curl_share_setopt (s3->share, CURLSHOPT_SHARE,
                            CURL_LOCK_DATA_SSL_SESSION))
    {
      nbdkit_error ("cos: cannot set up a curl share handle");
      return -1;
    }
  return 0;
}

/* The pool of N handles (at least one). */
static int
open_conns (struct s3 *s3, unsigned n)
{
  s3->nconns = n ? n : 1;
  s3->conns = calloc (s3->nconns, sizeof *s3->conns);
  if (s3->conns == NULL)
    {
      nbdkit_error ("cos: calloc: %m");
      return -1;
    }
  for (unsigned i = 0; i < s3->nconns; i++)
    {
      s3->conns[i].h = curl_easy_init ();
      if (s3->conns[i].h == NULL)
        {
          nbdkit_error ("cos: curl_easy_init failed");
          return -1;
        }
    }
  return 0;
}

struct s3 *
s3_open (const struct s3_config *cfg)
{
  struct s3 *s3 = calloc (1, sizeof *s3);

  if (s3 == NULL)
    {
      nbdkit_error ("cos: calloc: %m");
      return NULL;
    }
  pthread_mutex_init (&s3->lock, NULL);
  pthread_cond_init (&s3->cond, NULL);
  pthread_mutex_init (&s3->rng_lock, NULL);
  for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
    pthread_mutex_init (&s3->share_locks[i], NULL);

  if (parse_endpoint (s3, cfg->endpoint) == -1)
    goto err;
  s3->bucket = strdup (cfg->bucket);
  s3->region = strdup (cfg->region);
  s3->access_key = strdup (cfg->access_key);
  s3->secret_key = strdup (cfg->secret_key);
  s3->ca_file = cfg->ca_file ? strdup (cfg->ca_file) : NULL;
  if (!s3->bucket || !s3->region || !s3->access_key || !s3->secret_key
      || (cfg->ca_file && !s3->ca_file))
    {
      nbdkit_error ("cos: strdup: %m");
      goto err;
    }
  if (cfg->virtual_host && s3->authority[0] == '[')
    {
      nbdkit_error ("cos: addressing=virtual needs a host name endpoint, not "
                    "an IP literal");
      goto err;
    }
  s3->virtual_host = cfg->virtual_host;
  s3->tls_verify = cfg->tls_verify;
  s3->check_etag = cfg->check_etag;
  s3->timeout_ms = cfg->timeout_ms;
  s3->retries = cfg->retries;
  s3->backoff_ms = cfg->backoff_ms ? cfg->backoff_ms : 1;
  s3->backoff_max_ms = cfg->backoff_max_ms;
  s3->rng = (unsigned)time (NULL) ^ (unsigned)(uintptr_t)s3;

  if (open_share (s3) == -1 || open_conns (s3, cfg->connections) == -1)
    goto err;
  return s3;

err:
  s3_close (s3);
  return NULL;
}

void
s3_close (struct s3 *s3)
{
  if (s3 == NULL)
    return;
  for (unsigned i = 0; s3->conns && i < s3->nconns; i++)
    if (s3->conns[i].h)
      curl_easy_cleanup (s3->conns[i].h);
  free (s3->conns);
  if (s3->share)
    curl_share_cleanup (s3->share);
  free_config (s3);
  pthread_mutex_destroy (&s3->lock);
  pthread_cond_destroy (&s3->cond);
  pthread_mutex_destroy (&s3->rng_lock);
  for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
    pthread_mutex_destroy (&s3->share_locks[i]);
  free (s3);
}

void
s3_get_stats (struct s3 *s3, struct s3_stats *o)
{
  o->requests = s3->requests;
  o->retries = s3->retries_n;
  o->retry_http = s3->retry_http;
  o->retry_slow = s3->retry_slow;
  o->retry_net = s3->retry_net;
  o->retry_etag = s3->retry_etag;
  o->failures = s3->failures;
  o->reconnects = s3->reconnects;
  o->bytes_in = s3->bytes_in;
  o->bytes_out = s3->bytes_out;
}

int
s3_errno (long status, const char *code)
{
  if (code
      && (strcmp (code, "QuotaExceeded") == 0
          || strcmp (code, "EntityTooLarge") == 0))
    return ENOSPC;
  switch (status)
    {
    case 401:
    case 403:
      return EPERM;
    case 400:
    case 416:
      return EINVAL;
    case 507:
      return ENOSPC;
    default:
      return EIO;
    }
}

static struct conn *
get_conn (struct s3 *s3)
{
  hhc_lock (&s3->lock);
  for (;;)
    {
      for (unsigned i = 0; i < s3->nconns; i++)
        if (!s3->conns[i].busy)
          {
            s3->conns[i].busy = true;
            hhc_unlock (&s3->lock);
            return &s3->conns[i];
          }
      hhc_cond_wait (&s3->cond, &s3->lock);
    }
}

static void
put_conn (struct s3 *s3, struct conn *c)
{
  hhc_lock (&s3->lock);
  c->busy = false;
  pthread_cond_signal (&s3->cond);
  hhc_unlock (&s3->lock);
}

/* "/bucket/key" (path style) or "/key" (virtual host), encoded. */
static char *
make_path (struct s3 *s3, const char *key)
{
  char *ekey = sigv4_uri_encode (key ? key : "", 1);
  char *path = NULL;
  int r;

  if (ekey == NULL)
    return NULL;
  if (s3->virtual_host)
    r = asprintf (&path, "/%s", ekey);
  else
    r = asprintf (&path, "/%s%s%s", s3->bucket, key ? "/" : "", ekey);
  free (ekey);
  return r == -1 ? NULL : path;
}

/* Sleep before retry number ATTEMPT (1, 2, ...). */
static void
backoff (struct s3 *s3, unsigned attempt)
{
  uint64_t d = s3->backoff_ms;
  unsigned r;
  struct timespec ts;

  for (unsigned i = 1; i < attempt && d < s3->backoff_max_ms; i++)
    d *= 2;
  if (d > s3->backoff_max_ms)
    d = s3->backoff_max_ms;
  hhc_lock (&s3->rng_lock);
  r = rand_r (&s3->rng);
  hhc_unlock (&s3->rng_lock);
  d = d / 2 + (d - d / 2) * (r % 1000) / 1000;
  ts.tv_sec = d / 1000;
  ts.tv_nsec = (d % 1000) * 1000000;
  nanosleep (&ts, NULL);
}

/* Count a retry after outcome O. */
static void
count_retry (struct s3 *s3, enum outcome o)
{
  s3->retries_n++;
  switch (o)
    {
    case RETRY_HTTP:
      s3->retry_http++;
      break;
    case RETRY_SLOW:
      s3->retry_slow++;
      break;
    case RETRY_NET:
      s3->retry_net++;
      break;
    case RETRY_ETAG:
      s3->retry_etag++;
      break;
    default:
      break;
    }
}

/* Attempts of IO until one is done, missing, failed for good, or the
 * retries are used up.  MSG: the last attempt's reason.
 */
static enum outcome
attempts (struct s3 *s3, struct s3_io *io, const char *path,
          const struct digests *dg, char *msg, size_t msgsz)
{
  enum outcome o = FAIL;
  struct conn *c;

  for (unsigned n = 0;; n++)
    {
      if (n > 0)
        {
          count_retry (s3, o);
          nbdkit_debug ("cos: %s %s: %s; retry %u of %u", io->method,
                        io->key ? io->key : "(bucket)", msg, n, s3->retries);
          backoff (s3, n);
        }
      free (io->text);
      io->text = NULL;
      c = get_conn (s3);
      o = s3_attempt (s3, c, io, path, dg, msg, msgsz);
      put_conn (s3, c);
      if (o == DONE || o == MISSING || o == FAIL || n >= s3->retries)
        return o;
    }
}

int
s3_do (struct s3 *s3, struct s3_io *io)
{
  char msg[512];
  char *path = make_path (s3, io->key);
  struct digests dg = { "", "", "" };
  bool is_put = strcmp (io->method, "PUT") == 0;
  enum outcome o;

  sigv4_sha256_hex (is_put ? io->body : "", is_put ? io->body_len : 0,
                    dg.payload_hash);
  if (is_put)
    sigv4_md5_hex_base64 (io->body, io->body_len, dg.md5hex, dg.md5b64);
  io->text = NULL;
  io->text_len = 0;
  if (path == NULL)
    {
      nbdkit_error ("cos: out of memory");
      errno = ENOMEM;
      return -1;
    }
  o = attempts (s3, io, path, &dg, msg, sizeof msg);
  free (path);
  if (o == DONE)
    return 0;
  if (o == MISSING)
    return 1;
  s3->failures++;
  if (o == FAIL)
    nbdkit_error ("cos: %s s3://%s/%s: %s", io->method, s3->bucket,
                  io->key ? io->key : "", msg);
  else
    nbdkit_error ("cos: %s s3://%s/%s: %s (gave up after %u retries)",
                  io->method, s3->bucket, io->key ? io->key : "", msg,
                  s3->retries);
  errno = io->status ? s3_errno (io->status, io->code) : EIO;
  return -1;
}
