/* cos-backend: a small S3 client on libcurl (see s3.h).
 *
 * Handles: a fixed pool of curl easy handles.  A handle keeps its
 * connection alive between requests; all of them share one DNS cache
 * and one TLS session cache (a CURLSH with a lock per data kind), so a
 * new connection to the same endpoint skips the resolver and resumes
 * the TLS session.  A request takes a free handle, resets its options
 * (curl_easy_reset keeps the live connection and the share), sets them
 * for this request, signs, performs, and gives the handle back.
 *
 * Retries: only failures that another attempt can cure are retried:
 * 500/502/503/504, 429 and SlowDown, curl's timeout, connect and
 * transfer errors (a dropped connection shows up as one of those), and
 * a PUT whose ETag is not the MD5 we sent.  Back-off doubles from
 * backoff_ms up to backoff_max_ms; each sleep is uniformly drawn in
 * [d/2, d] (jitter, so that many threads that failed together do not
 * come back together).  Every retry is counted by its reason.
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
#include "s3.h"
#include "sigv4.h"

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
      goto err;
    }
  s3->nconns = cfg->connections ? cfg->connections : 1;
  s3->conns = calloc (s3->nconns, sizeof *s3->conns);
  if (s3->conns == NULL)
    {
      nbdkit_error ("cos: calloc: %m");
      goto err;
    }
  for (unsigned i = 0; i < s3->nconns; i++)
    {
      s3->conns[i].h = curl_easy_init ();
      if (s3->conns[i].h == NULL)
        {
          nbdkit_error ("cos: curl_easy_init failed");
          goto err;
        }
    }
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

/* One attempt's state, seen by curl's callbacks. */
struct xfer {
  struct s3_io *io;
  CURL *h;
  const char *body; /* PUT: read position */
  size_t body_left;
  bool overflow; /* the answer was longer than io->buf */
  /* The body of an error answer or of a GET without buf. */
  char *text;
  size_t text_len, text_cap;
  char etag[80];
  char request_id[80];
};

static size_t
read_cb (char *ptr, size_t size, size_t nmemb, void *p)
{
  struct xfer *x = p;
  size_t n = size * nmemb;

  if (n > x->body_left)
    n = x->body_left;
  memcpy (ptr, x->body, n);
  x->body += n;
  x->body_left -= n;
  return n;
}

/* curl rewinds the body when it sends the request again by itself (a
 * kept-alive connection that turned out to be closed).
 */
static int
seek_cb (void *p, curl_off_t offset, int origin)
{
  struct xfer *x = p;

  if (origin != SEEK_SET || offset < 0 || (uint64_t)offset > x->io->body_len)
    return CURL_SEEKFUNC_CANTSEEK;
  x->body = (const char *)x->io->body + offset;
  x->body_left = x->io->body_len - offset;
  return CURL_SEEKFUNC_OK;
}

static int
text_add (struct xfer *x, const char *p, size_t n)
{
  /* Error bodies and listings are small; refuse silly sizes. */
  if (x->text_len + n > 16 * 1024 * 1024)
    return -1;
  if (x->text_len + n + 1 > x->text_cap)
    {
      size_t cap = x->text_cap ? x->text_cap * 2 : 4096;
      while (cap < x->text_len + n + 1)
        cap *= 2;
      char *t = realloc (x->text, cap);
      if (t == NULL)
        return -1;
      x->text = t;
      x->text_cap = cap;
    }
  memcpy (x->text + x->text_len, p, n);
  x->text_len += n;
  x->text[x->text_len] = '\0';
  return 0;
}

static size_t
write_cb (char *ptr, size_t size, size_t nmemb, void *p)
{
  struct xfer *x = p;
  size_t n = size * nmemb;
  long status = 0;

  curl_easy_getinfo (x->h, CURLINFO_RESPONSE_CODE, &status);
  if (status >= 200 && status < 300 && x->io->buf)
    {
      if (n > x->io->buf_len - x->io->got)
        {
          x->overflow = true;
          return 0; /* aborts the transfer */
        }
      memcpy ((char *)x->io->buf + x->io->got, ptr, n);
      x->io->got += n;
      return n;
    }
  return text_add (x, ptr, n) == 0 ? n : 0;
}

/* Copy the value of header NAME from a header line, trimmed. */
static void
header_value (const char *line, size_t n, const char *name, char *out,
              size_t outsz)
{
  size_t nl = strlen (name);

  if (n <= nl || strncasecmp (line, name, nl) != 0 || line[nl] != ':')
    return;
  line += nl + 1;
  n -= nl + 1;
  while (n && (*line == ' ' || *line == '\t'))
    line++, n--;
  while (n
         && (line[n - 1] == '\r' || line[n - 1] == '\n' || line[n - 1] == ' '))
    n--;
  if (n >= outsz)
    n = outsz - 1;
  memcpy (out, line, n);
  out[n] = '\0';
}

static size_t
header_cb (char *ptr, size_t size, size_t nmemb, void *p)
{
  struct xfer *x = p;
  size_t n = size * nmemb;

  header_value (ptr, n, "ETag", x->etag, sizeof x->etag);
  header_value (ptr, n, "x-amz-request-id", x->request_id,
                sizeof x->request_id);
  return n;
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

enum outcome {
  DONE,
  MISSING,
  RETRY_HTTP,
  RETRY_SLOW,
  RETRY_NET,
  RETRY_ETAG,
  FAIL
};

/* Build the error message part after "cos: METHOD key: ". */
static void
describe (struct xfer *x, long status, char *msg, size_t msgsz)
{
  char code[64] = "", message[200] = "", reqid[100] = "";
  size_t pos;

  if (x->text)
    {
      pos = 0;
      if (s3_xml_next (x->text, x->text_len, &pos, "Code", code, sizeof code)
          != 1)
        code[0] = '\0';
      pos = 0;
      if (s3_xml_next (x->text, x->text_len, &pos, "Message", message,
                       sizeof message)
          != 1)
        message[0] = '\0';
      pos = 0;
      if (s3_xml_next (x->text, x->text_len, &pos, "RequestId", reqid,
                       sizeof reqid)
          != 1)
        reqid[0] = '\0';
    }
  if (reqid[0] == '\0')
    snprintf (reqid, sizeof reqid, "%s", x->request_id);
  /* Keep only printable ASCII of what the server sent. */
  for (char *p = message; *p; p++)
    if (*p < 0x20 || *p > 0x7e)
      *p = '?';
  for (char *p = reqid; *p; p++)
    if (*p < 0x20 || *p > 0x7e)
      *p = '?';
  snprintf (msg, msgsz, "HTTP %ld %s%s%s%s%s%s", status,
            code[0] ? code : "(no S3 error code)", message[0] ? ": " : "",
            message, reqid[0] ? " (request id " : "", reqid,
            reqid[0] ? ")" : "");
}

/* What every attempt of one request sends the same: the hashes of the
 * body, computed once per request (hashing a 1 MiB body costs more CPU
 * than the rest of the request).
 */
struct digests {
  char payload_hash[65]; /* hex SHA-256 */
  char md5b64[32];       /* Content-MD5 */
  char md5hex[33];       /* the ETag S3 answers */
};

static enum outcome
attempt (struct s3 *s3, struct s3_io *io, const char *path,
         const struct digests *dg, char *msg, size_t msgsz)
{
  struct conn *c = get_conn (s3);
  CURL *h = c->h;
  struct xfer x = { .io = io, .h = h };
  struct curl_slist *hdrs = NULL;
  char amz_date[20], date_hdr[40], sha_hdr[100], md5_hdr[60], range_hdr[80];
  char host_hdr[300];
  const char *payload_hash = dg->payload_hash, *md5hex = dg->md5hex;
  char errbuf[CURL_ERROR_SIZE] = "";
  char *url = NULL, *auth = NULL, *auth_hdr = NULL, *host = NULL;
  struct sigv4_header sh[6];
  size_t nsh = 0;
  time_t now = time (NULL);
  struct tm tm;
  CURLcode rc;
  long status = 0;
  enum outcome out = FAIL;
  bool is_put = strcmp (io->method, "PUT") == 0;

  io->got = 0;
  io->status = 0;
  io->code[0] = '\0';
  msg[0] = '\0';

  gmtime_r (&now, &tm);
  strftime (amz_date, sizeof amz_date, "%Y%m%dT%H%M%SZ", &tm);
  if (s3->virtual_host)
    {
      if (asprintf (&host, "%s.%s", s3->bucket, s3->authority) == -1)
        host = NULL;
    }
  else
    host = strdup (s3->authority);
  if (host == NULL
      || asprintf (&url, "%s://%s%s%s%s", s3->scheme, host, path,
                   io->query ? "?" : "", io->query ? io->query : "")
             == -1)
    {
      url = NULL;
      snprintf (msg, msgsz, "out of memory");
      goto out;
    }

  snprintf (host_hdr, sizeof host_hdr, "Host: %s", host);
  snprintf (date_hdr, sizeof date_hdr, "x-amz-date: %s", amz_date);
  snprintf (sha_hdr, sizeof sha_hdr, "x-amz-content-sha256: %s", payload_hash);
  sh[nsh++] = (struct sigv4_header){ "host", host };
  sh[nsh++] = (struct sigv4_header){ "x-amz-date", amz_date };
  sh[nsh++] = (struct sigv4_header){ "x-amz-content-sha256", payload_hash };
  hdrs = curl_slist_append (hdrs, host_hdr);
  hdrs = curl_slist_append (hdrs, date_hdr);
  hdrs = curl_slist_append (hdrs, sha_hdr);
  if (is_put)
    {
      snprintf (md5_hdr, sizeof md5_hdr, "Content-MD5: %s", dg->md5b64);
      sh[nsh++] = (struct sigv4_header){ "content-md5", dg->md5b64 };
      hdrs = curl_slist_append (hdrs, md5_hdr);
      /* No 100-continue round trip; S3 answers errors after the body. */
      hdrs = curl_slist_append (hdrs, "Expect:");
      if (io->create_only)
        {
          sh[nsh++] = (struct sigv4_header){ "if-none-match", "*" };
          hdrs = curl_slist_append (hdrs, "If-None-Match: *");
        }
    }
  if (io->range_len)
    {
      snprintf (range_hdr, sizeof range_hdr, "bytes=%" PRIu64 "-%" PRIu64,
                io->range_off, io->range_off + io->range_len - 1);
      sh[nsh++] = (struct sigv4_header){ "range", range_hdr };
    }
  {
    struct sigv4_scope scope = { amz_date, s3->region, "s3" };
    struct sigv4_request req
        = { io->method, path, io->query, sh, nsh, payload_hash };
    auth = sigv4_authorization (s3->access_key, s3->secret_key, &scope, &req);
  }
  if (auth == NULL || asprintf (&auth_hdr, "Authorization: %s", auth) == -1)
    {
      auth_hdr = NULL;
      snprintf (msg, msgsz, "cannot sign the request");
      goto out;
    }
  hdrs = curl_slist_append (hdrs, auth_hdr);
  if (io->range_len)
    {
      char rh[100];
      snprintf (rh, sizeof rh, "Range: %s", range_hdr);
      hdrs = curl_slist_append (hdrs, rh);
    }
  if (hdrs == NULL)
    {
      snprintf (msg, msgsz, "out of memory");
      goto out;
    }

  curl_easy_reset (h);
  curl_easy_setopt (h, CURLOPT_SHARE, s3->share);
  curl_easy_setopt (h, CURLOPT_URL, url);
  curl_easy_setopt (h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt (h, CURLOPT_HTTPHEADER, hdrs);
  curl_easy_setopt (h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt (h, CURLOPT_TIMEOUT_MS, s3->timeout_ms);
  curl_easy_setopt (h, CURLOPT_CONNECTTIMEOUT_MS,
                    s3->timeout_ms < 10000 ? s3->timeout_ms : 10000L);
  curl_easy_setopt (h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt (h, CURLOPT_SSL_VERIFYPEER, s3->tls_verify ? 1L : 0L);
  curl_easy_setopt (h, CURLOPT_SSL_VERIFYHOST, s3->tls_verify ? 2L : 0L);
  if (s3->ca_file)
    curl_easy_setopt (h, CURLOPT_CAINFO, s3->ca_file);
  curl_easy_setopt (h, CURLOPT_WRITEFUNCTION, write_cb);
  curl_easy_setopt (h, CURLOPT_WRITEDATA, &x);
  curl_easy_setopt (h, CURLOPT_HEADERFUNCTION, header_cb);
  curl_easy_setopt (h, CURLOPT_HEADERDATA, &x);
  if (is_put)
    {
      x.body = io->body;
      x.body_left = io->body_len;
      curl_easy_setopt (h, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt (h, CURLOPT_READFUNCTION, read_cb);
      curl_easy_setopt (h, CURLOPT_READDATA, &x);
      curl_easy_setopt (h, CURLOPT_SEEKFUNCTION, seek_cb);
      curl_easy_setopt (h, CURLOPT_SEEKDATA, &x);
      curl_easy_setopt (h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)io->body_len);
    }
  else if (strcmp (io->method, "HEAD") == 0)
    curl_easy_setopt (h, CURLOPT_NOBODY, 1L);
  else if (strcmp (io->method, "GET") != 0)
    curl_easy_setopt (h, CURLOPT_CUSTOMREQUEST, io->method);

  s3->requests++;
  rc = curl_easy_perform (h);
  curl_easy_getinfo (h, CURLINFO_RESPONSE_CODE, &status);
  {
    /* A handle that had a connection and needed a new one: the server
     * closed it, or it broke and curl sent the request again by itself
     * (which it does, once, when a reused connection dies before any
     * answer: such retries are invisible otherwise).
     */
    long nconn = 0;
    curl_easy_getinfo (h, CURLINFO_NUM_CONNECTS, &nconn);
    if (nconn > 0 && c->used)
      s3->reconnects++;
    c->used = true;
  }
  io->status = status;

  if (rc != CURLE_OK)
    {
      if (x.overflow)
        {
          snprintf (msg, msgsz, "the answer is longer than the %zu bytes asked",
                    io->buf_len);
          out = FAIL;
        }
      else
        {
          /* curl's detail ("SSL certificate problem: self-signed
           * certificate") when it has one.
           */
          snprintf (msg, msgsz, "%s",
                    errbuf[0] ? errbuf : curl_easy_strerror (rc));
          switch (rc)
            {
            case CURLE_OPERATION_TIMEDOUT:
            case CURLE_COULDNT_CONNECT:
            case CURLE_GOT_NOTHING:
            case CURLE_SEND_ERROR:
            case CURLE_RECV_ERROR:
            case CURLE_PARTIAL_FILE:
            case CURLE_SSL_CONNECT_ERROR:
            case CURLE_HTTP2:
            case CURLE_HTTP2_STREAM:
              out = RETRY_NET;
              break;
            default:
              out = FAIL;
            }
        }
      goto out;
    }

  if (status >= 200 && status < 300)
    {
      if (is_put && s3->check_etag)
        {
          /* S3 answers the hex MD5 as the ETag (not with SSE-KMS or SSE-C,
           * hence check-etag=false).
           */
          char *e = x.etag;
          size_t n = strlen (e);
          if (n >= 2 && e[0] == '"' && e[n - 1] == '"')
            {
              e[n - 1] = '\0';
              e++;
            }
          if (strcasecmp (e, md5hex) != 0)
            {
              snprintf (msg, msgsz,
                        "ETag %s is not the MD5 %s of what was sent",
                        x.etag[0] ? e : "(none)", md5hex);
              out = RETRY_ETAG;
              goto out;
            }
        }
      if (is_put)
        s3->bytes_out += io->body_len;
      if (io->buf && io->got != io->buf_len)
        {
          /* A server that is not read-after-write consistent (s3rver
           * answers a PUT before the object's file is fully written) can
           * serve a short object for a moment.  Ask again.
           */
          snprintf (msg, msgsz, "short answer: %zu of %zu bytes", io->got,
                    io->buf_len);
          out = RETRY_NET;
          goto out;
        }
      if (io->buf)
        s3->bytes_in += io->got;
      else if (x.text)
        {
          io->text = x.text;
          io->text_len = x.text_len;
          x.text = NULL;
        }
      else if (strcmp (io->method, "GET") == 0)
        {
          io->text = strdup ("");
          io->text_len = 0;
        }
      out = DONE;
      goto out;
    }

  describe (&x, status, msg, msgsz);
  if (x.text)
    {
      size_t pos = 0;
      if (s3_xml_next (x.text, x.text_len, &pos, "Code", io->code,
                       sizeof io->code)
          != 1)
        io->code[0] = '\0';
    }
  if ((status == 404 && io->missing_ok) || (status == 412 && io->create_only))
    out = MISSING;
  else if (status == 429 || strcmp (io->code, "SlowDown") == 0)
    out = RETRY_SLOW;
  else if (strcmp (io->code, "BadDigest") == 0
           || strcmp (io->code, "XAmzContentSHA256Mismatch") == 0)
    out = RETRY_ETAG; /* the body was damaged on the way: send it again */
  else if (status == 500 || status == 502 || status == 503 || status == 504)
    out = RETRY_HTTP;
  else
    out = FAIL;

out:
  put_conn (s3, c);
  curl_slist_free_all (hdrs);
  free (x.text);
  free (url);
  free (host);
  free (auth);
  free (auth_hdr);
  return out;
}

int
s3_do (struct s3 *s3, struct s3_io *io)
{
  char msg[512];
  char *path = make_path (s3, io->key);
  struct digests dg = { "", "", "" };
  bool is_put = strcmp (io->method, "PUT") == 0;

  sigv4_sha256_hex (is_put ? io->body : "", is_put ? io->body_len : 0,
                    dg.payload_hash);
  if (is_put)
    sigv4_md5_hex_base64 (io->body, io->body_len, dg.md5hex, dg.md5b64);
  enum outcome o = FAIL;

  io->text = NULL;
  io->text_len = 0;
  if (path == NULL)
    {
      nbdkit_error ("cos: out of memory");
      errno = ENOMEM;
      return -1;
    }
  for (unsigned n = 0;; n++)
    {
      if (n > 0)
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
          nbdkit_debug ("cos: %s %s: %s; retry %u of %u", io->method,
                        io->key ? io->key : "(bucket)", msg, n, s3->retries);
          backoff (s3, n);
        }
      free (io->text);
      io->text = NULL;
      o = attempt (s3, io, path, &dg, msg, sizeof msg);
      if (o == DONE || o == MISSING || o == FAIL || n >= s3->retries)
        break;
    }
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
