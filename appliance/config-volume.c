/* hhc-gateway.json: the volumes, and each volume's name, cache, logs
 * and mode (its backend in config-backend.c, its tuning in
 * config-tuning.c).
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

/* "name": valid, unique, and its sockets fit in a sockaddr_un. */
static int
parse_name (struct ctx *c, const struct at *vo, size_t i, struct gw_volume *v)
{
  struct at a;

  if (cfg_get_string (c, vo, "name", true, &v->name, &a) == -1)
    return -1;
  if (!cfg_is_name (v->name, "._-", 64))
    return cfg_fail (c, &a, false, "must be 1 to 64 of A-Z a-z 0-9 . _ -");
  for (size_t j = 0; j < i; j++)
    if (strcmp (c->cfg->volumes[j].name, v->name) == 0)
      return c->cfg->volumes[j].source
                 ? cfg_fail (c, &a, false, "\"%s\" is also the name of %s",
                             v->name, c->cfg->volumes[j].source)
                 : cfg_fail (c, &a, false,
                             "\"%s\" is also the name of volumes[%zu]%s%s",
                             v->name, j, v->source ? " in " : "",
                             v->source ? c->cfg->file : "");
  if (strlen (c->cfg->run_dir) + strlen (v->name) + strlen ("/.sock")
      > SUN_PATH_MAX)
    return cfg_fail (c, &a, false,
                     "the socket %s/%s.sock would be longer than "
                     "%zu bytes",
                     c->cfg->run_dir, v->name, SUN_PATH_MAX);
  return 0;
}

/* "cache" and "cache_size". */
static int
parse_cache (struct ctx *c, const struct at *vo, size_t i, struct gw_volume *v)
{
  struct at a, s;
  int r;

  if (cfg_get_string (c, vo, "cache", true, &v->cache, &a) == -1)
    return -1;
  r = cfg_get_size (c, vo, "cache_size", 65536, "64K", &v->cache_size, &s);
  if (r == -1 || cfg_may_create (c, &a, v->cache, r == 1) == -1)
    return -1;
  return cfg_claim (c, &a, v->cache, i, "the cache");
}

/* One log path, value a. */
static int
add_log (struct ctx *c, const struct at *a, size_t i, struct gw_volume *v)
{
  char *path = NULL;

  if (cfg_check_string (c, a) == -1
      || cfg_copy (c, a, json_string_value (a->v), &path) == -1)
    return -1;
  v->logs[v->nlogs++] = path;
  if (cfg_may_create (c, a, path, v->log_size != NULL) == -1)
    return -1;
  return cfg_claim (c, a, path, i, "a log");
}

/* "log" (a string or an array of them) and "log_size". */
static int
parse_logs (struct ctx *c, const struct at *vo, size_t i, struct gw_volume *v)
{
  struct at a, e;
  size_t n;

  if (cfg_get_size (c, vo, "log_size", 8 << 20, "8M", &v->log_size, &a) == -1)
    return -1;
  if (!cfg_member (c, vo, "log", &a))
    return 0;
  if (json_is_string (a.v))
    return add_log (c, &a, i, v);
  if (!json_is_array (a.v))
    return cfg_fail (c, &a, false, "must be a string or an array of strings");
  n = json_array_size (a.v);
  if (n < 1 || n > GW_MAX_LOGS)
    return cfg_fail (c, &a, false, "must hold 1 to %d paths", GW_MAX_LOGS);
  for (size_t j = 0; j < n; j++)
    {
      cfg_element (c, &a, j, &e);
      if (add_log (c, &e, i, v) == -1)
        return -1;
    }
  return 0;
}

/* "mode", which must agree with the logs, as the filter wants. */
static int
parse_mode (struct ctx *c, const struct at *vo, struct gw_volume *v)
{
  static const char *const modes[]
      = { "pt", "wt", "wb", "wbflush", "hhc", NULL };
  struct at a;
  int r = cfg_get_string (c, vo, "mode", false, &v->mode, &a);

  if (r <= 0)
    return r;
  if (!cfg_in_list (v->mode, modes))
    return cfg_fail (c, &a, false, "must be pt, wt, wb, wbflush or hhc");
  if (strcmp (v->mode, "hhc") == 0 && v->nlogs == 0)
    return cfg_fail (c, &a, false, "mode hhc needs a log");
  /* Outside hhc a log is only retired (voided once the cache's dirty
   * blocks are written back): nbdkit-hhc-filter(1), "Using a cache
   * without its log".  Nothing is to be created for that.
   */
  if (strcmp (v->mode, "hhc") != 0 && v->nlogs > 0 && v->log_size)
    return cfg_fail (c, &a, false,
                     "mode %s only retires the log its cache was used with in "
                     "mode hhc, which must exist: remove log_size",
                     v->mode);
  return 0;
}

/* With check_paths: a file backend has no export description, so the
 * filter formats no cache for it without backend_id (a volume of the
 * same size could be given its cache); a cache that exists already
 * (formatted without one by an earlier version) still loads.
 */
static int
check_new_cache_id (struct ctx *c, const struct at *vo,
                    const struct gw_volume *v)
{
  struct stat st;

  if (!c->check_paths || v->type != GW_BACKEND_FILE || v->backend_id
      || stat (v->cache, &st) == 0)
    return 0;
  return cfg_fail (c, vo, false,
                   "a file backend needs \"backend_id\" (a name unique to it) "
                   "before its cache \"%s\" is made",
                   v->cache);
}

int
cfg_parse_volume (struct ctx *c, const struct at *vo, size_t i)
{
  static const char *const keys[]
      = { "name",          "backend",  "cache",      "cache_size",
          "log",           "log_size", "mode",       "backend_id",
          "drain_on_stop", "tuning",   "encryption", NULL };
  struct gw_volume *v = &c->cfg->volumes[i];

  if (!json_is_object (vo->v))
    return cfg_fail (c, vo, false, "must be an object");
  if (cfg_check_keys (c, vo, keys) == -1 || parse_name (c, vo, i, v) == -1
      || cfg_parse_backend (c, vo, i, v) == -1
      || parse_cache (c, vo, i, v) == -1 || parse_logs (c, vo, i, v) == -1
      || parse_mode (c, vo, v) == -1
      || cfg_get_string (c, vo, "backend_id", false, &v->backend_id, NULL) == -1
      || cfg_get_bool (c, vo, "drain_on_stop", &v->drain_on_stop) == -1
      || cfg_parse_tuning (c, vo, v) == -1
      || cfg_parse_encryption (c, vo, v) == -1
      || check_new_cache_id (c, vo, v) == -1)
    return -1;
  return 0;
}

/* "volumes": [ at least one ] (or none, with volumes_dir). */
int
cfg_parse_volumes (struct ctx *c, const struct at *root, struct gw_config *cfg)
{
  struct at a, e;
  size_t n;

  if (!cfg_member (c, root, "volumes", &a))
    return cfg->volumes_dir ? 0 : cfg_missing (c, root, "volumes");
  if (!json_is_array (a.v))
    return cfg_fail (c, &a, false, "must be an array");
  n = json_array_size (a.v);
  if (n == 0 && cfg->volumes_dir)
    return 0;
  if (n == 0)
    return cfg_fail (c, &a, false, "must hold at least one volume");
  cfg->volumes = calloc (n, sizeof *cfg->volumes);
  if (cfg->volumes == NULL)
    return cfg_oom (c, &a);
  cfg->nvolumes = n;
  for (size_t i = 0; i < n; i++)
    {
      cfg_element (c, &a, i, &e);
      if (cfg_parse_volume (c, &e, i) == -1)
        return -1;
    }
  return 0;
}
