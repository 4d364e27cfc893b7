/* The status and metrics HTTP server (libmicrohttpd).
 *
 * One MHD daemon, bound to the one address given, with an internal
 * polling thread and a thread per connection: a request that waits for
 * a slow volume's nbdkit (the status function asks each one) does not
 * hold up the others.  Connections are capped (CONN_LIMIT) and time out
 * after CONN_TIMEOUT_S idle seconds.
 *
 * Each GET calls the status function once and renders its document for
 * the route asked (routes[]): nothing is cached between requests.  A
 * status function that fails gives 503, a document that does not parse
 * 500.  HEAD is GET without the body (MHD drops it); any other method
 * gets 405 with Allow, any other path 404.
 *
 * MHD's own messages go through mhd_log.  While gw_httpd_start runs
 * the last one is kept in start_msg (it is the reason for a failure,
 * e.g. the bind error); after that they go to stderr.  lock protects
 * that switch: the server's threads may log while the start is still
 * returning.
 */
#include <config.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "httpd.h"
#include "metrics.h"

/* Before 0.9.71 the handler returned int. */
#if MHD_VERSION < 0x00097002
typedef int mhd_result;
#else
typedef enum MHD_Result mhd_result;
#endif

enum {
  CONN_LIMIT = 32,
  CONN_TIMEOUT_S = 30,
};

struct gw_httpd {
  struct MHD_Daemon *daemon;
  gw_status_fn fn;
  void *opaque;
  unsigned port;
  /* Protects starting and start_msg. */
  pthread_mutex_t lock;
  bool starting;       /* in gw_httpd_start: keep MHD's messages */
  char start_msg[256]; /* the last one, "" if none */
};

/* A route: its path, its content type, and how to render the status
 * document for it (NULL: as it is).
 */
struct route {
  const char *path;
  const char *type;
  char *(*render) (const char *status_json);
};

static const struct route routes[] = {
  { "/", "text/html; charset=utf-8", gw_status_html },
  { "/status", "application/json", NULL },
  { "/metrics", "text/plain; version=0.0.4; charset=utf-8", gw_metrics_render },
};

static void
mhd_log (void *cls, const char *fmt, va_list ap)
{
  struct gw_httpd *h = cls;
  char line[sizeof ((struct gw_httpd *)0)->start_msg];
  size_t n;

  vsnprintf (line, sizeof line, fmt, ap);
  n = strlen (line);
  while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
    line[--n] = '\0';
  pthread_mutex_lock (&h->lock);
  if (h->starting)
    memcpy (h->start_msg, line, n + 1);
  else
    fprintf (stderr, "httpd: %s\n", line);
  pthread_mutex_unlock (&h->lock);
}

static mhd_result
reply (struct MHD_Connection *c, unsigned status, const char *type,
       struct MHD_Response *r)
{
  mhd_result ret;

  if (r == NULL)
    return MHD_NO;
  MHD_add_response_header (r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  MHD_add_response_header (r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
    MHD_add_response_header (r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
  ret = MHD_queue_response (c, status, r);
  MHD_destroy_response (r);
  return ret;
}

/* A short text/plain answer (a static string). */
static mhd_result
reply_text (struct MHD_Connection *c, unsigned status, const char *text)
{
  return reply (c, status, "text/plain; charset=utf-8",
                MHD_create_response_from_buffer (strlen (text), (void *)text,
                                                 MHD_RESPMEM_PERSISTENT));
}

/* body (malloc'd) as the answer; MHD frees it. */
static mhd_result
reply_body (struct MHD_Connection *c, const char *type, char *body)
{
  struct MHD_Response *r = MHD_create_response_from_buffer_with_free_callback (
      strlen (body), body, free);

  if (r == NULL)
    free (body);
  return reply (c, MHD_HTTP_OK, type, r);
}

static const struct route *
find_route (const char *url)
{
  for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
    if (strcmp (url, routes[i].path) == 0)
      return &routes[i];
  return NULL;
}

static mhd_result
serve_route (struct gw_httpd *h, struct MHD_Connection *c,
             const struct route *rt)
{
  char *doc = h->fn (h->opaque), *body;

  if (doc == NULL)
    return reply_text (c, MHD_HTTP_SERVICE_UNAVAILABLE,
                       "the gateway's status is unavailable\n");
  if (rt->render == NULL)
    return reply_body (c, rt->type, doc);
  body = rt->render (doc);
  free (doc);
  if (body == NULL)
    return reply_text (c, MHD_HTTP_INTERNAL_SERVER_ERROR,
                       "the gateway's status document is malformed\n");
  return reply_body (c, rt->type, body);
}

static mhd_result
handle (void *cls, struct MHD_Connection *c, const char *url,
        const char *method, const char *version, const char *upload,
        size_t *upload_size, void **req)
{
  struct gw_httpd *h = cls;
  const struct route *rt;

  (void)version;
  (void)upload;
  (void)upload_size;
  (void)req;
  if (strcmp (method, MHD_HTTP_METHOD_GET) != 0
      && strcmp (method, MHD_HTTP_METHOD_HEAD) != 0)
    return reply_text (c, MHD_HTTP_METHOD_NOT_ALLOWED,
                       "only GET and HEAD are allowed\n");
  rt = find_route (url);
  if (rt == NULL)
    return reply_text (c, MHD_HTTP_NOT_FOUND, "not found\n");
  return serve_route (h, c, rt);
}

union sockaddr_any {
  struct sockaddr sa;
  struct sockaddr_in in;
  struct sockaddr_in6 in6;
};

/* address:port into *a; -1 if address is not a numeric literal. */
static int
parse_address (const char *address, unsigned port, union sockaddr_any *a)
{
  memset (a, 0, sizeof *a);
  if (inet_pton (AF_INET, address, &a->in.sin_addr) == 1)
    {
      a->in.sin_family = AF_INET;
      a->in.sin_port = htons (port);
      return 0;
    }
  if (inet_pton (AF_INET6, address, &a->in6.sin6_addr) == 1)
    {
      a->in6.sin6_family = AF_INET6;
      a->in6.sin6_port = htons (port);
      return 0;
    }
  return -1;
}

static void
free_httpd (struct gw_httpd *h)
{
  pthread_mutex_destroy (&h->lock);
  free (h);
}

static struct MHD_Daemon *
start_daemon (struct gw_httpd *h, union sockaddr_any *a, unsigned port)
{
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD
                   | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL
                   | MHD_USE_ERROR_LOG;

  if (a->sa.sa_family == AF_INET6)
    flags |= MHD_USE_IPv6;
  /* The port is ignored beside SOCK_ADDR, but MHD's messages show it. */
  return MHD_start_daemon (
      flags, port, NULL, NULL, handle, h, MHD_OPTION_SOCK_ADDR, &a->sa,
      MHD_OPTION_CONNECTION_LIMIT, (unsigned)CONN_LIMIT,
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONN_TIMEOUT_S,
      MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h, MHD_OPTION_END);
}

struct gw_httpd *
gw_httpd_start (const char *address, unsigned port, gw_status_fn fn,
                void *opaque, char *err, size_t errlen)
{
  union sockaddr_any a;
  const union MHD_DaemonInfo *info;
  struct gw_httpd *h;

  if (port > 65535)
    {
      snprintf (err, errlen, "port %u: out of range", port);
      return NULL;
    }
  if (parse_address (address, port, &a) == -1)
    {
      snprintf (err, errlen, "%s: not a numeric IPv4 or IPv6 address", address);
      return NULL;
    }
  h = calloc (1, sizeof *h);
  if (h == NULL || pthread_mutex_init (&h->lock, NULL) != 0)
    {
      free (h);
      snprintf (err, errlen, "out of memory");
      return NULL;
    }
  h->fn = fn;
  h->opaque = opaque;
  h->starting = true;
  h->daemon = start_daemon (h, &a, port);
  pthread_mutex_lock (&h->lock);
  h->starting = false;
  pthread_mutex_unlock (&h->lock);
  if (h->daemon == NULL)
    {
      snprintf (err, errlen, "%s port %u: %s", address, port,
                h->start_msg[0] ? h->start_msg
                                : "cannot start the HTTP server");
      free_httpd (h);
      return NULL;
    }
  info = MHD_get_daemon_info (h->daemon, MHD_DAEMON_INFO_BIND_PORT);
  h->port = info ? info->port : port;
  return h;
}

unsigned
gw_httpd_port (const struct gw_httpd *h)
{
  return h->port;
}

void
gw_httpd_stop (struct gw_httpd *h)
{
  if (h == NULL)
    return;
  MHD_stop_daemon (h->daemon);
  free_httpd (h);
}
