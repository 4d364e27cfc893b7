/* hhc-gateway.json: the gateway's own keys (listen, tls, the programs
 * and directories, metrics, restart); config.c lists their rules.
 */
#include <config.h>

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config-int.h"

/* "listen": {"socket"}, with a (the socket's value) in o. */
static int
listen_socket (struct ctx *c, const struct at *o, const struct at *a,
               struct gw_config *cfg)
{
  struct at b;

  if (cfg_member (c, o, "address", &b) || cfg_member (c, o, "port", &b))
    return cfg_fail (c, &b, true, "not with listen.socket");
  if (strlen (cfg->listen_socket) > SUN_PATH_MAX)
    return cfg_fail (c, a, false, "longer than %zu bytes", SUN_PATH_MAX);
  cfg->listen_port = 0;
  return 0;
}

/* "listen": {"address", "port"} or {"socket"}. */
static int
parse_listen (struct ctx *c, const struct at *root, struct gw_config *cfg)
{
  static const char *const keys[] = { "address", "port", "socket", NULL };
  struct at o, a;
  int r = cfg_get_object (c, root, "listen", false, &o);

  cfg->listen_port = 10809;
  if (r == -1)
    return -1;
  if (r == 1)
    {
      if (cfg_check_keys (c, &o, keys) == -1)
        return -1;
      r = cfg_get_string (c, &o, "socket", false, &cfg->listen_socket, &a);
      if (r == -1)
        return -1;
      if (r == 1)
        return listen_socket (c, &o, &a, cfg);
      if (cfg_get_string (c, &o, "address", false, &cfg->listen_address, NULL)
              == -1
          || cfg_get_uint (c, &o, "port", 1, 65535, &cfg->listen_port, NULL)
                 == -1)
        return -1;
    }
  if (cfg->listen_address == NULL)
    return cfg_copy (c, root, "127.0.0.1", &cfg->listen_address);
  return 0;
}

/* "tls": {"certificates"} or {"psk_file"}. */
static int
parse_tls (struct ctx *c, const struct at *root, struct gw_config *cfg)
{
  static const char *const keys[] = { "certificates", "psk_file", NULL };
  struct at o, a, b;
  int r = cfg_get_object (c, root, "tls", false, &o);
  int rc, rp;

  if (r <= 0)
    return r;
  if (cfg_check_keys (c, &o, keys) == -1)
    return -1;
  rc = cfg_get_string (c, &o, "certificates", false, &cfg->tls_certificates,
                       &a);
  if (rc == -1)
    return -1;
  rp = cfg_get_string (c, &o, "psk_file", false, &cfg->tls_psk_file, &b);
  if (rp == -1)
    return -1;
  if (rc == 1 && rp == 1)
    return cfg_fail (c, &b, true, "not with tls.certificates");
  if (rc == 0 && rp == 0)
    return cfg_fail (c, &o, false, "needs certificates or psk_file");
  if (rc == 1)
    return cfg_must_exist (c, &a, cfg->tls_certificates, true);
  return cfg_must_exist (c, &b, cfg->tls_psk_file, false);
}

/* s is a name of [A-Za-z0-9] and the characters of extra, 1..max. */
bool
cfg_is_name (const char *s, const char *extra, size_t max)
{
  size_t n = strlen (s);

  if (n == 0 || n > max)
    return false;
  for (; *s; s++)
    if (!isalnum ((unsigned char)*s) && strchr (extra, *s) == NULL)
      return false;
  return true;
}

/* "nbdkit", "filter", "plugin_dir", "run_dir". */
static int
parse_programs (struct ctx *c, const struct at *root, struct gw_config *cfg)
{
  struct at a;
  int r;

  if (cfg_get_string (c, root, "nbdkit", false, &cfg->nbdkit, NULL) == -1)
    return -1;
  r = cfg_get_string (c, root, "filter", false, &cfg->filter, &a);
  if (r == -1)
    return -1;
  if (r == 1 && cfg->filter[0] == '/'
      && cfg_must_exist (c, &a, cfg->filter, false) == -1)
    return -1;
  if (r == 1 && cfg->filter[0] != '/' && !cfg_is_name (cfg->filter, "_-", 64))
    return cfg_fail (c, &a, false, "must be a filter name or an absolute path");
  r = cfg_get_string (c, root, "plugin_dir", false, &cfg->plugin_dir, &a);
  if (r == -1
      || (r == 1 && cfg_must_exist (c, &a, cfg->plugin_dir, true) == -1))
    return -1;
  if (cfg_get_string (c, root, "run_dir", false, &cfg->run_dir, NULL) == -1)
    return -1;
  if ((cfg->nbdkit == NULL && cfg_copy (c, root, "nbdkit", &cfg->nbdkit) == -1)
      || (cfg->filter == NULL && cfg_copy (c, root, "hhc", &cfg->filter) == -1)
      || (cfg->run_dir == NULL
          && cfg_copy (c, root, "/run/hhc", &cfg->run_dir) == -1))
    return -1;
  return 0;
}

/* Is address a wildcard (any address of the host)? */
static bool
wildcard (const char *address)
{
  return strcmp (address, "0.0.0.0") == 0 || strcmp (address, "::") == 0
         || address[0] == '\0';
}

/* The metrics server on the NBD port: one of them could not bind (and
 * an NBD client that reached the HTTP server would wait for ever).
 */
static int
metrics_clash (struct ctx *c, const struct at *root, struct gw_config *cfg)
{
  struct at o;

  if (!cfg->metrics || cfg->listen_address == NULL
      || cfg->metrics_port != cfg->listen_port
      || (strcmp (cfg->metrics_address, cfg->listen_address) != 0
          && !wildcard (cfg->metrics_address)
          && !wildcard (cfg->listen_address)))
    return 0;
  if (!cfg_member (c, root, "metrics", &o))
    o = *root;
  return cfg_fail (c, &o, false,
                   "port %u is the NBD listen port too: give the metrics or "
                   "the NBD listener another port",
                   cfg->metrics_port);
}

/* "metrics": {"address", "port"}, true or false. */
static int
parse_metrics (struct ctx *c, const struct at *root, struct gw_config *cfg)
{
  static const char *const keys[] = { "address", "port", NULL };
  struct at o;

  cfg->metrics = true;
  cfg->metrics_port = 9810;
  if (cfg_member (c, root, "metrics", &o))
    {
      if (json_is_false (o.v))
        {
          cfg->metrics = false;
          cfg->metrics_port = 0;
          return 0;
        }
      if (json_is_object (o.v)
          && (cfg_check_keys (c, &o, keys) == -1
              || cfg_get_string (c, &o, "address", false, &cfg->metrics_address,
                                 NULL)
                     == -1
              || cfg_get_uint (c, &o, "port", 1, 65535, &cfg->metrics_port,
                               NULL)
                     == -1))
        return -1;
      if (!json_is_object (o.v) && !json_is_true (o.v))
        return cfg_fail (c, &o, false, "must be an object or false");
    }
  if (cfg->metrics_address == NULL
      && cfg_copy (c, root, "127.0.0.1", &cfg->metrics_address) == -1)
    return -1;
  return metrics_clash (c, root, cfg);
}

/* "restart": {"min_ms", "max_ms"}. */
static int
parse_restart (struct ctx *c, const struct at *root, struct gw_config *cfg)
{
  static const char *const keys[] = { "min_ms", "max_ms", NULL };
  struct at o, amin, amax;
  int r, rmin, rmax;

  cfg->restart_min_ms = 500;
  cfg->restart_max_ms = 30000;
  r = cfg_get_object (c, root, "restart", false, &o);
  if (r <= 0)
    return r;
  if (cfg_check_keys (c, &o, keys) == -1)
    return -1;
  rmin = cfg_get_uint (c, &o, "min_ms", 10, 3600000, &cfg->restart_min_ms,
                       &amin);
  if (rmin == -1)
    return -1;
  rmax = cfg_get_uint (c, &o, "max_ms", 10, 3600000, &cfg->restart_max_ms,
                       &amax);
  if (rmax == -1)
    return -1;
  if (cfg->restart_max_ms >= cfg->restart_min_ms)
    return 0;
  if (rmax == 1)
    return cfg_fail (c, &amax, false, "must be at least min_ms (%u)",
                     cfg->restart_min_ms);
  return cfg_fail (c, &amin, false, "must not exceed max_ms (%u)",
                   cfg->restart_max_ms);
}

int
cfg_parse_globals (struct ctx *c, const struct at *root, struct gw_config *cfg)
{
  if (parse_listen (c, root, cfg) == -1 || parse_tls (c, root, cfg) == -1
      || parse_programs (c, root, cfg) == -1
      || parse_metrics (c, root, cfg) == -1
      || parse_restart (c, root, cfg) == -1)
    return -1;
  return 0;
}
