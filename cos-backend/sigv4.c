/* cos-backend: AWS Signature Version 4 (see sigv4.h).
 *
 * The steps are AWS's: canonical request, string to sign, signing key
 * derived by HMAC chaining over date, region and service, signature.
 * Every intermediate string is built in a growable buffer so that the
 * unit test can compare it byte for byte with the published examples.
 */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "sigv4.h"

/* A growable string. */
struct sbuf {
  char *p;
  size_t len, cap;
  bool failed;
};

static void
sb_addn (struct sbuf *b, const char *s, size_t n)
{
  if (b->failed)
    return;
  if (b->len + n + 1 > b->cap)
    {
      size_t cap = b->cap ? b->cap : 256;
      while (b->len + n + 1 > cap)
        cap *= 2;
      char *p = realloc (b->p, cap);
      if (p == NULL)
        {
          b->failed = true;
          return;
        }
      b->p = p;
      b->cap = cap;
    }
  memcpy (b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}

static void
sb_add (struct sbuf *b, const char *s)
{
  sb_addn (b, s, strlen (s));
}

static void
sb_addc (struct sbuf *b, char c)
{
  sb_addn (b, &c, 1);
}

/* Hand over the string, or NULL (errno = ENOMEM) if anything failed. */
static char *
sb_take (struct sbuf *b)
{
  if (b->failed || b->p == NULL)
    {
      free (b->p);
      errno = ENOMEM;
      return NULL;
    }
  return b->p;
}

static const char hexdigits[] = "0123456789abcdef";

static void
to_hex (const unsigned char *d, size_t n, char *hex)
{
  for (size_t i = 0; i < n; i++)
    {
      hex[2 * i] = hexdigits[d[i] >> 4];
      hex[2 * i + 1] = hexdigits[d[i] & 15];
    }
  hex[2 * n] = '\0';
}

static void
digest (const EVP_MD *md, const void *data, size_t len, unsigned char *out,
        unsigned *outlen)
{
  /* EVP_Digest only fails on allocation failure inside OpenSSL; an
   * all-zero digest then makes the request fail verification, which
   * is the right outcome.
   */
  if (EVP_Digest (data, len, out, outlen, md, NULL) != 1)
    {
      memset (out, 0, EVP_MAX_MD_SIZE);
      *outlen = EVP_MD_size (md);
    }
}

void
sigv4_sha256_hex (const void *data, size_t len, char *hex)
{
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned n;

  digest (EVP_sha256 (), data, len, d, &n);
  to_hex (d, n, hex);
}

void
sigv4_md5_hex (const void *data, size_t len, char *hex)
{
  char b64[32];

  sigv4_md5_hex_base64 (data, len, hex, b64);
}

void
sigv4_md5_hex_base64 (const void *data, size_t len, char *hex, char *b64)
{
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned n;

  digest (EVP_md5 (), data, len, d, &n);
  to_hex (d, n, hex);
  EVP_EncodeBlock ((unsigned char *)b64, d, n);
}

void
sigv4_md5_base64 (const void *data, size_t len, char *b64)
{
  char hex[33];

  sigv4_md5_hex_base64 (data, len, hex, b64);
}

static bool
unreserved (unsigned char c)
{
  /* ASCII ranges, not isalnum: the locale must not change a signature. */
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')
         || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_'
         || c == '~';
}

static void
sb_add_encoded (struct sbuf *b, const char *s, size_t n, bool keep_slash)
{
  static const char upper[] = "0123456789ABCDEF";

  for (size_t i = 0; i < n; i++)
    {
      unsigned char c = s[i];
      if (unreserved (c) || (c == '/' && keep_slash))
        sb_addc (b, c);
      else
        {
          char esc[3] = { '%', upper[c >> 4], upper[c & 15] };
          sb_addn (b, esc, 3);
        }
    }
}

char *
sigv4_uri_encode (const char *s, int keep_slash)
{
  struct sbuf b = { 0 };

  sb_add (&b, "");
  sb_add_encoded (&b, s, strlen (s), keep_slash);
  return sb_take (&b);
}

/* Query parameters, split for sorting. */
struct param {
  const char *name;
  size_t name_len;
  const char *value; /* may be empty */
  size_t value_len;
};

static int
param_cmp (const void *av, const void *bv)
{
  const struct param *a = av, *b = bv;
  size_t n = a->name_len < b->name_len ? a->name_len : b->name_len;
  int r = memcmp (a->name, b->name, n);

  if (r == 0 && a->name_len != b->name_len)
    r = a->name_len < b->name_len ? -1 : 1;
  if (r == 0)
    {
      n = a->value_len < b->value_len ? a->value_len : b->value_len;
      r = memcmp (a->value, b->value, n);
      if (r == 0 && a->value_len != b->value_len)
        r = a->value_len < b->value_len ? -1 : 1;
    }
  return r;
}

static void
add_canonical_query (struct sbuf *b, const char *query)
{
  struct param *ps = NULL;
  size_t np = 0;
  const char *p = query;

  if (query == NULL || *query == '\0')
    return;
  for (const char *q = query; *q; q++)
    if (*q == '&')
      np++;
  ps = calloc (np + 1, sizeof *ps);
  if (ps == NULL)
    {
      b->failed = true;
      return;
    }
  np = 0;
  while (*p)
    {
      const char *end = strchr (p, '&');
      const char *eq;
      if (end == NULL)
        end = p + strlen (p);
      if (end > p)
        {
          eq = memchr (p, '=', end - p);
          ps[np].name = p;
          ps[np].name_len = (eq ? eq : end) - p;
          ps[np].value = eq ? eq + 1 : end;
          ps[np].value_len = eq ? (size_t)(end - eq - 1) : 0;
          np++;
        }
      p = *end ? end + 1 : end;
    }
  qsort (ps, np, sizeof *ps, param_cmp);
  for (size_t i = 0; i < np; i++)
    {
      if (i > 0)
        sb_addc (b, '&');
      sb_addn (b, ps[i].name, ps[i].name_len);
      sb_addc (b, '=');
      sb_addn (b, ps[i].value, ps[i].value_len);
    }
  free (ps);
}

/* Headers, lower-cased and sorted by name. */
struct hdr {
  char *name;
  const char *value;
};

static int
hdr_cmp (const void *av, const void *bv)
{
  const struct hdr *a = av, *b = bv;
  return strcmp (a->name, b->name);
}

/* Value with leading and trailing blanks removed and inner runs of
 * blanks collapsed to one space.
 */
static void
sb_add_trimmed (struct sbuf *b, const char *v)
{
  bool space = false, any = false;

  for (; *v; v++)
    {
      if (*v == ' ' || *v == '\t')
        {
          space = any;
          continue;
        }
      if (space)
        sb_addc (b, ' ');
      space = false;
      any = true;
      sb_addc (b, *v);
    }
}

int
sigv4_canonical_request (const struct sigv4_request *req, char **canonical,
                         char **signed_headers)
{
  struct sbuf c = { 0 }, s = { 0 };
  struct hdr *hs;

  *canonical = *signed_headers = NULL;
  hs = calloc (req->nheaders ? req->nheaders : 1, sizeof *hs);
  if (hs == NULL)
    return -1;
  for (size_t i = 0; i < req->nheaders; i++)
    {
      hs[i].name = strdup (req->headers[i].name);
      hs[i].value = req->headers[i].value;
      if (hs[i].name == NULL)
        {
          c.failed = true;
          continue;
        }
      for (char *q = hs[i].name; *q; q++)
        if (*q >= 'A' && *q <= 'Z')
          *q = *q - 'A' + 'a';
    }
  if (!c.failed)
    qsort (hs, req->nheaders, sizeof *hs, hdr_cmp);

  sb_add (&c, req->method);
  sb_addc (&c, '\n');
  sb_add (&c, req->path && *req->path ? req->path : "/");
  sb_addc (&c, '\n');
  add_canonical_query (&c, req->query);
  sb_addc (&c, '\n');
  for (size_t i = 0; i < req->nheaders && !c.failed; i++)
    {
      sb_add (&c, hs[i].name);
      sb_addc (&c, ':');
      sb_add_trimmed (&c, hs[i].value);
      sb_addc (&c, '\n');
      if (i > 0)
        sb_addc (&s, ';');
      sb_add (&s, hs[i].name);
    }
  sb_addc (&c, '\n');
  sb_add (&s, "");
  sb_add (&c, s.p ? s.p : "");
  sb_addc (&c, '\n');
  sb_add (&c, req->payload_hash);

  for (size_t i = 0; i < req->nheaders; i++)
    free (hs[i].name);
  free (hs);

  *canonical = sb_take (&c);
  *signed_headers = sb_take (&s);
  if (*canonical == NULL || *signed_headers == NULL)
    {
      free (*canonical);
      free (*signed_headers);
      *canonical = *signed_headers = NULL;
      errno = ENOMEM;
      return -1;
    }
  return 0;
}

/* "20130524/us-east-1/s3/aws4_request" */
static void
sb_add_scope (struct sbuf *b, const struct sigv4_scope *scope)
{
  sb_addn (b, scope->amz_date, 8);
  sb_addc (b, '/');
  sb_add (b, scope->region);
  sb_addc (b, '/');
  sb_add (b, scope->service);
  sb_add (b, "/aws4_request");
}

char *
sigv4_string_to_sign (const struct sigv4_scope *scope, const char *canonical)
{
  struct sbuf b = { 0 };
  char hash[65];

  if (strlen (scope->amz_date) < 8)
    {
      errno = EINVAL;
      return NULL;
    }
  sigv4_sha256_hex (canonical, strlen (canonical), hash);
  sb_add (&b, "AWS4-HMAC-SHA256\n");
  sb_add (&b, scope->amz_date);
  sb_addc (&b, '\n');
  sb_add_scope (&b, scope);
  sb_addc (&b, '\n');
  sb_add (&b, hash);
  return sb_take (&b);
}

static int
hmac (const void *key, size_t keylen, const char *msg, unsigned char *out)
{
  unsigned n = 0;

  if (HMAC (EVP_sha256 (), key, (int)keylen, (const unsigned char *)msg,
            strlen (msg), out, &n)
          == NULL
      || n != 32)
    {
      errno = EIO;
      return -1;
    }
  return 0;
}

int
sigv4_signature (const char *secret_key, const struct sigv4_scope *scope,
                 const char *string_to_sign, char *hex)
{
  unsigned char k[32], k2[32];
  char date[9];
  char *kSecret;
  size_t n = strlen (secret_key);
  int r;

  if (strlen (scope->amz_date) < 8)
    {
      errno = EINVAL;
      return -1;
    }
  memcpy (date, scope->amz_date, 8);
  date[8] = '\0';
  kSecret = malloc (n + 5);
  if (kSecret == NULL)
    return -1;
  memcpy (kSecret, "AWS4", 4);
  memcpy (kSecret + 4, secret_key, n + 1);
  r = hmac (kSecret, n + 4, date, k);
  /* Do not leave the secret in freed memory. */
  OPENSSL_cleanse (kSecret, n + 4);
  free (kSecret);
  if (r == -1 || hmac (k, 32, scope->region, k2) == -1
      || hmac (k2, 32, scope->service, k) == -1
      || hmac (k, 32, "aws4_request", k2) == -1
      || hmac (k2, 32, string_to_sign, k) == -1)
    r = -1;
  else
    to_hex (k, 32, hex);
  OPENSSL_cleanse (k2, sizeof k2);
  OPENSSL_cleanse (k, sizeof k);
  return r;
}

char *
sigv4_authorization (const char *access_key, const char *secret_key,
                     const struct sigv4_scope *scope,
                     const struct sigv4_request *req)
{
  char *canonical = NULL, *signed_headers = NULL, *sts = NULL;
  char sig[65];
  struct sbuf b = { 0 };

  if (sigv4_canonical_request (req, &canonical, &signed_headers) == -1)
    return NULL;
  sts = sigv4_string_to_sign (scope, canonical);
  if (sts == NULL || sigv4_signature (secret_key, scope, sts, sig) == -1)
    {
      free (canonical);
      free (signed_headers);
      free (sts);
      return NULL;
    }
  sb_add (&b, "AWS4-HMAC-SHA256 Credential=");
  sb_add (&b, access_key);
  sb_addc (&b, '/');
  sb_add_scope (&b, scope);
  sb_add (&b, ",SignedHeaders=");
  sb_add (&b, signed_headers);
  sb_add (&b, ",Signature=");
  sb_add (&b, sig);
  free (canonical);
  free (signed_headers);
  free (sts);
  return sb_take (&b);
}
