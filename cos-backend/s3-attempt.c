/* cos-backend: one attempt of an S3 request (s3-int.h), in three
 * steps:
 *
 *   build_request     the URL and the headers, signed with SigV4
 *   setup_transfer    curl's options on a handle of the pool
 *   classify          the answer as an outcome: done, missing, worth a
 *                     retry (by reason) or failed for good
 *
 * Only failures that another attempt can cure are worth a retry:
 * 500/502/503/504, 429 and SlowDown, curl's timeout, connect and
 * transfer errors (a dropped connection shows up as one of those), a
 * short answer, and a PUT whose ETag is not the MD5 we sent (or that
 * the store found damaged: BadDigest).  s3.c does the retrying.
 */
#include <config.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

#include "s3-int.h"
#include "sigv4.h"

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

/* One attempt's request: its URL and headers, signed. */
struct request {
  char amz_date[20]; /* x-amz-date */
  char range[80];    /* "bytes=A-B" */
  char *host;        /* the Host header's value */
  char *url;
  struct curl_slist *hdrs;
  struct sigv4_header sh[6]; /* the headers to sign */
  size_t nsh;
  bool oom; /* a header could not be added */
};

static void
add_line (struct request *rq, const char *line)
{
  struct curl_slist *l = curl_slist_append (rq->hdrs, line);

  if (l == NULL)
    rq->oom = true;
  else
    rq->hdrs = l;
}

/* Header NAME: VALUE, signed if SIGN (VALUE must outlive the
 * signing).
 */
static void
add_header (struct request *rq, const char *name, const char *value, bool sign)
{
  char *line;

  if (asprintf (&line, "%s: %s", name, value) == -1)
    {
      rq->oom = true;
      return;
    }
  add_line (rq, line);
  free (line);
  if (sign)
    rq->sh[rq->nsh++] = (struct sigv4_header){ name, value };
}

/* The host (the bucket's with virtual-host addressing) and the URL. */
static int
make_url (struct s3 *s3, const struct s3_io *io, const char *path,
          struct request *rq)
{
  if (s3->virtual_host)
    {
      if (asprintf (&rq->host, "%s.%s", s3->bucket, s3->authority) == -1)
        rq->host = NULL;
    }
  else
    rq->host = strdup (s3->authority);
  if (rq->host == NULL
      || asprintf (&rq->url, "%s://%s%s%s%s", s3->scheme, rq->host, path,
                   io->query ? "?" : "", io->query ? io->query : "")
             == -1)
    {
      rq->url = NULL;
      return -1;
    }
  return 0;
}

/* Sign the headers in RQ and add the Authorization header. */
static int
sign_request (struct s3 *s3, const struct s3_io *io, const char *path,
              const struct digests *dg, struct request *rq)
{
  struct sigv4_scope scope = { rq->amz_date, s3->region, "s3" };
  struct sigv4_request req
      = { io->method, path, io->query, rq->sh, rq->nsh, dg->payload_hash };
  char *auth
      = sigv4_authorization (s3->access_key, s3->secret_key, &scope, &req);

  if (auth == NULL)
    return -1;
  add_header (rq, "Authorization", auth, false);
  free (auth);
  return rq->oom ? -1 : 0;
}

/* RQ for IO: the URL and the headers, signed.  Returns 0, or -1 with
 * MSG set.
 */
static int
build_request (struct s3 *s3, const struct s3_io *io, const char *path,
               const struct digests *dg, struct request *rq, char *msg,
               size_t msgsz)
{
  time_t now = time (NULL);
  struct tm tm;

  gmtime_r (&now, &tm);
  strftime (rq->amz_date, sizeof rq->amz_date, "%Y%m%dT%H%M%SZ", &tm);
  if (make_url (s3, io, path, rq) == -1)
    {
      snprintf (msg, msgsz, "out of memory");
      return -1;
    }
  add_header (rq, "Host", rq->host, true);
  add_header (rq, "x-amz-date", rq->amz_date, true);
  add_header (rq, "x-amz-content-sha256", dg->payload_hash, true);
  if (strcmp (io->method, "PUT") == 0)
    {
      add_header (rq, "Content-MD5", dg->md5b64, true);
      /* No 100-continue round trip; S3 answers errors after the body. */
      add_line (rq, "Expect:");
      if (io->create_only)
        add_header (rq, "If-None-Match", "*", true);
    }
  if (io->range_len)
    {
      snprintf (rq->range, sizeof rq->range, "bytes=%" PRIu64 "-%" PRIu64,
                io->range_off, io->range_off + io->range_len - 1);
      add_header (rq, "Range", rq->range, true);
    }
  if (rq->oom)
    {
      snprintf (msg, msgsz, "out of memory");
      return -1;
    }
  if (sign_request (s3, io, path, dg, rq) == -1)
    {
      snprintf (msg, msgsz, "cannot sign the request");
      return -1;
    }
  return 0;
}

static void
request_free (struct request *rq)
{
  curl_slist_free_all (rq->hdrs);
  free (rq->url);
  free (rq->host);
}

/* Handle H's options for RQ, with X for the callbacks (curl_easy_reset
 * keeps the live connection and the share).
 */
static void
setup_transfer (struct s3 *s3, CURL *h, const struct request *rq,
                struct xfer *x, char *errbuf)
{
  const struct s3_io *io = x->io;

  curl_easy_reset (h);
  curl_easy_setopt (h, CURLOPT_SHARE, s3->share);
  curl_easy_setopt (h, CURLOPT_URL, rq->url);
  curl_easy_setopt (h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt (h, CURLOPT_HTTPHEADER, rq->hdrs);
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
  curl_easy_setopt (h, CURLOPT_WRITEDATA, x);
  curl_easy_setopt (h, CURLOPT_HEADERFUNCTION, header_cb);
  curl_easy_setopt (h, CURLOPT_HEADERDATA, x);
  if (strcmp (io->method, "PUT") == 0)
    {
      x->body = io->body;
      x->body_left = io->body_len;
      curl_easy_setopt (h, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt (h, CURLOPT_READFUNCTION, read_cb);
      curl_easy_setopt (h, CURLOPT_READDATA, x);
      curl_easy_setopt (h, CURLOPT_SEEKFUNCTION, seek_cb);
      curl_easy_setopt (h, CURLOPT_SEEKDATA, x);
      curl_easy_setopt (h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)io->body_len);
    }
  else if (strcmp (io->method, "HEAD") == 0)
    curl_easy_setopt (h, CURLOPT_NOBODY, 1L);
  else if (strcmp (io->method, "GET") != 0)
    curl_easy_setopt (h, CURLOPT_CUSTOMREQUEST, io->method);
}

/* A transfer that curl gave up (RC). */
static enum outcome
classify_curl_error (const struct xfer *x, CURLcode rc, const char *errbuf,
                     char *msg, size_t msgsz)
{
  if (x->overflow)
    {
      snprintf (msg, msgsz, "the answer is longer than the %zu bytes asked",
                x->io->buf_len);
      return FAIL;
    }
  /* curl's detail ("SSL certificate problem: self-signed certificate")
   * when it has one.
   */
  snprintf (msg, msgsz, "%s", errbuf[0] ? errbuf : curl_easy_strerror (rc));
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
      return RETRY_NET;
    default:
      return FAIL;
    }
}

/* A PUT's ETag is the MD5 of what was sent?  S3 answers the hex MD5 as
 * the ETag (not with SSE-KMS or SSE-C, hence check-etag=false).
 */
static bool
etag_matches (struct xfer *x, const struct digests *dg, char *msg, size_t msgsz)
{
  char *e = x->etag;
  size_t n = strlen (e);

  if (n >= 2 && e[0] == '"' && e[n - 1] == '"')
    {
      e[n - 1] = '\0';
      e++;
    }
  if (strcasecmp (e, dg->md5hex) == 0)
    return true;
  snprintf (msg, msgsz, "ETag %s is not the MD5 %s of what was sent",
            x->etag[0] ? e : "(none)", dg->md5hex);
  return false;
}

/* A 2xx answer. */
static enum outcome
classify_success (struct s3 *s3, struct xfer *x, const struct digests *dg,
                  char *msg, size_t msgsz)
{
  struct s3_io *io = x->io;
  bool is_put = strcmp (io->method, "PUT") == 0;

  if (is_put && s3->check_etag && !etag_matches (x, dg, msg, msgsz))
    return RETRY_ETAG;
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
      return RETRY_NET;
    }
  if (io->buf)
    s3->bytes_in += io->got;
  else if (x->text)
    {
      io->text = x->text;
      io->text_len = x->text_len;
      x->text = NULL;
    }
  else if (strcmp (io->method, "GET") == 0)
    {
      io->text = strdup ("");
      io->text_len = 0;
    }
  return DONE;
}

/* An error answer (STATUS): its S3 code into io->code. */
static enum outcome
classify_error (struct xfer *x, long status, char *msg, size_t msgsz)
{
  struct s3_io *io = x->io;

  describe (x, status, msg, msgsz);
  if (x->text)
    {
      size_t pos = 0;
      if (s3_xml_next (x->text, x->text_len, &pos, "Code", io->code,
                       sizeof io->code)
          != 1)
        io->code[0] = '\0';
    }
  if ((status == 404 && io->missing_ok) || (status == 412 && io->create_only))
    return MISSING;
  if (status == 429 || strcmp (io->code, "SlowDown") == 0)
    return RETRY_SLOW;
  if (strcmp (io->code, "BadDigest") == 0
      || strcmp (io->code, "XAmzContentSHA256Mismatch") == 0)
    return RETRY_ETAG; /* the body was damaged on the way: send it again */
  if (status == 500 || status == 502 || status == 503 || status == 504)
    return RETRY_HTTP;
  return FAIL;
}

/* A handle that had a connection and needed a new one: the server
 * closed it, or it broke and curl sent the request again by itself
 * (which it does, once, when a reused connection dies before any
 * answer: such retries are invisible otherwise).
 */
static void
count_reconnect (struct s3 *s3, struct conn *c)
{
  long nconn = 0;

  curl_easy_getinfo (c->h, CURLINFO_NUM_CONNECTS, &nconn);
  if (nconn > 0 && c->used)
    s3->reconnects++;
  c->used = true;
}

enum outcome
s3_attempt (struct s3 *s3, struct conn *c, struct s3_io *io, const char *path,
            const struct digests *dg, char *msg, size_t msgsz)
{
  struct xfer x = { .io = io, .h = c->h };
  struct request rq = { .hdrs = NULL };
  char errbuf[CURL_ERROR_SIZE] = "";
  enum outcome out = FAIL;
  long status = 0;
  CURLcode rc;

  io->got = 0;
  io->status = 0;
  io->code[0] = '\0';
  msg[0] = '\0';
  if (build_request (s3, io, path, dg, &rq, msg, msgsz) == 0)
    {
      setup_transfer (s3, c->h, &rq, &x, errbuf);
      s3->requests++;
      rc = curl_easy_perform (c->h);
      curl_easy_getinfo (c->h, CURLINFO_RESPONSE_CODE, &status);
      count_reconnect (s3, c);
      io->status = status;
      if (rc != CURLE_OK)
        out = classify_curl_error (&x, rc, errbuf, msg, msgsz);
      else if (status >= 200 && status < 300)
        out = classify_success (s3, &x, dg, msg, msgsz);
      else
        out = classify_error (&x, status, msg, msgsz);
    }
  request_free (&rq);
  free (x.text);
  return out;
}
