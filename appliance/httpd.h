/* hhc-gateway's status and metrics HTTP server (libmicrohttpd):
 *
 *   GET /         text/html, a status page (appliance/status-html.c)
 *   GET /status   application/json, the status document as it is
 *   GET /metrics  text/plain; version=0.0.4, Prometheus metrics
 *
 * HEAD too; other methods get 405, other paths 404.  The status
 * function is called from the server's threads, once per request, with
 * no lock of ours held: it does its own locking.
 */
#ifndef HHC_APPLIANCE_HTTPD_H
#define HHC_APPLIANCE_HTTPD_H

#include <stddef.h>

/* Returns a malloc'd JSON text of the gateway's status (shape: appliance/metrics.c), or NULL on error. Called from the HTTP server's threads. */
typedef char *(*gw_status_fn) (void *opaque);

struct gw_httpd;

/* Listen on address:port (address a numeric IPv4 or IPv6 literal; port 0 = pick one, see gw_httpd_port). NULL + one line in err on failure. */
struct gw_httpd *gw_httpd_start (const char *address, unsigned port,
                                 gw_status_fn fn, void *opaque, char *err,
                                 size_t errlen);

/* The port the server listens on (the one picked when started with port 0). */
unsigned gw_httpd_port (const struct gw_httpd *h);

/* Stop serving (waits for requests in progress) and free h; h may be NULL. */
void gw_httpd_stop (struct gw_httpd *h);

#endif /* HHC_APPLIANCE_HTTPD_H */
