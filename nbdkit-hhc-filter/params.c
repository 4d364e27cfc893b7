/* nbdkit-hhc-filter's parameters: each key's parser, in one table, and
 * the checks once the last one is read.  They fill params_conf, the
 * core's configuration, which filter.c hands to the core.  Messages
 * are one line naming the parameter (nbdkit_error).
 */
#include <config.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nbdkit-filter.h>

#include "control.h"
#include "hhccore.h"
#include "params.h"
#include "parse.h"

struct hhc_conf params_conf;
static char *cache_path, *stats_path, *backend_id;
static bool mode_set; /* mode= given */

void
params_init (hhc_msg_fn msgfn)
{
  hhc_conf_init (&params_conf);
  params_conf.msgfn = msgfn;
}

void
params_free (void)
{
  free (cache_path);
  free (stats_path);
  free (backend_id);
  for (unsigned i = 0; i < params_conf.nlogs; i++)
    free ((char *)params_conf.log_paths[i]);
}

/* Sizes, whole numbers ("60" or "60%") and booleans in common/'s
 * syntax (common/parse.h): our wrappers, so that the one error line
 * names the parameter.
 */
static int
parse_size (const char *key, const char *value, uint64_t *out)
{
  if (hhc_parse_size (value, out) == NULL)
    return 0;
  nbdkit_error ("hhc: %s=%s: not a size (digits with an optional b, s, K, M, "
                "G, T, P or E; 64M, 64MB and 64MiB are the same)",
                key, value);
  return -1;
}

static int
parse_uint (const char *key, const char *value, unsigned lo, unsigned hi,
            unsigned *out)
{
  unsigned v;

  if (hhc_parse_unsigned (value, "%", &v) != NULL || v < lo || v > hi)
    {
      nbdkit_error ("hhc: %s=%s: must be a whole number from %u to %u", key,
                    value, lo, hi);
      return -1;
    }
  *out = v;
  return 0;
}

static int
parse_bool (const char *key, const char *value, bool *out)
{
  if (hhc_parse_bool (value, out) == NULL)
    return 0;
  nbdkit_error ("hhc: %s=%s: must be true or false", key, value);
  return -1;
}

static int
set_string (char **dst, const char *value)
{
  free (*dst);
  *dst = strdup (value);
  if (*dst == NULL)
    {
      nbdkit_error ("hhc: strdup: %m");
      return -1;
    }
  return 0;
}

/* A file name, made absolute: nbdkit changes to / when it becomes a
 * daemon (no -f), after the configuration was read.  NBD URIs and
 * absolute names are kept as they are.
 */
static int
set_path (char **dst, const char *value)
{
  char cwd[4096];

  if (value[0] == '/' || hhc_is_nbd_uri (value) || value[0] == '\0')
    return set_string (dst, value);
  if (getcwd (cwd, sizeof cwd) == NULL)
    {
      nbdkit_error ("hhc: getcwd: %m");
      return -1;
    }
  free (*dst);
  if (asprintf (dst, "%s/%s", cwd, value) == -1)
    {
      *dst = NULL;
      nbdkit_error ("hhc: asprintf: %m");
      return -1;
    }
  return 0;
}

/* hot-ratio=N or N:1 */
static int
parse_hot_ratio (const char *value)
{
  char buf[32];
  size_t n = strlen (value);

  if (n >= 2 && n < sizeof buf && strcmp (value + n - 2, ":1") == 0)
    {
      memcpy (buf, value, n - 2);
      buf[n - 2] = '\0';
      value = buf;
    }
  return parse_uint ("hot-ratio", value, 1, 16, &params_conf.hot_ratio);
}

/* A size of at least min, and if pow2 a power of two up to max; err
 * says what it must be.
 */
static int
parse_size_in (const char *key, const char *value, uint64_t min, uint64_t max,
               bool pow2, const char *err, uint64_t *out)
{
  uint64_t u;

  if (parse_size (key, value, &u) == -1)
    return -1;
  if (u < min || u > max || (pow2 && (u & (u - 1)) != 0))
    {
      nbdkit_error ("hhc: %s=%s: must be %s", key, value, err);
      return -1;
    }
  *out = u;
  return 0;
}

static int
set_cache (const char *key, const char *value)
{
  (void)key;
  return set_path (&cache_path, value);
}

static int
set_cache_size (const char *key, const char *value)
{
  return parse_size_in (key, value, 65536, UINT64_MAX, false, "at least 64K",
                        &params_conf.cache_size);
}

static int
set_mode (const char *key, const char *value)
{
  (void)key;
  if (hhc_mode_from_string (value, &params_conf.mode) != 0)
    {
      nbdkit_error ("hhc: mode=%s: must be pt, wt, wb, wbflush or hhc", value);
      return -1;
    }
  mode_set = true;
  return 0;
}

static int
set_log (const char *key, const char *value)
{
  (void)key;
  if (params_conf.nlogs == HHC_MAX_LOGS)
    {
      nbdkit_error ("hhc: log= may be given at most %d times", HHC_MAX_LOGS);
      return -1;
    }
  return set_path ((char **)&params_conf.log_paths[params_conf.nlogs++], value);
}

static int
set_log_size (const char *key, const char *value)
{
  return parse_size_in (key, value, 8 * 1024 * 1024, UINT64_MAX, false,
                        "at least 8M", &params_conf.log_size);
}

static int
set_segment_size (const char *key, const char *value)
{
  uint64_t u;

  if (parse_size_in (key, value, 65536, 64 * 1024 * 1024, true,
                     "a power of two from 64K to 64M", &u)
      == -1)
    return -1;
  params_conf.segment_size = u;
  return 0;
}

static int
set_log_buffers (const char *key, const char *value)
{
  return parse_uint (key, value, 2, 64, &params_conf.log_buffers);
}

static int
set_log_inflight (const char *key, const char *value)
{
  return parse_uint (key, value, 1, 16, &params_conf.log_inflight);
}

static int
set_ssd_sync (const char *key, const char *value)
{
  (void)key;
  if (strcmp (value, "flush") != 0 && strcmp (value, "checkpoint") != 0)
    {
      nbdkit_error ("hhc: ssd-sync=%s: must be flush or checkpoint", value);
      return -1;
    }
  params_conf.wal = strcmp (value, "checkpoint") == 0;
  return 0;
}

static int
set_block_size (const char *key, const char *value)
{
  uint64_t u;

  if (parse_size_in (key, value, 512, 1048576, true,
                     "a power of two from 512 to 1M", &u)
      == -1)
    return -1;
  params_conf.block_size = u;
  return 0;
}

static int
set_dirty_low (const char *key, const char *value)
{
  return parse_uint (key, value, 0, 100, &params_conf.dirty_low);
}

static int
set_dirty_high (const char *key, const char *value)
{
  return parse_uint (key, value, 0, 100, &params_conf.dirty_high);
}

static int
set_dirty_max (const char *key, const char *value)
{
  return parse_uint (key, value, 1, 100, &params_conf.dirty_max);
}

static int
set_hot_ratio (const char *key, const char *value)
{
  (void)key;
  return parse_hot_ratio (value);
}

static int
set_format (const char *key, const char *value)
{
  (void)key;
  if (hhc_format_from_string (value, &params_conf.format) != 0)
    {
      nbdkit_error ("hhc: format=%s: must be auto, force or never", value);
      return -1;
    }
  return 0;
}

static int
set_backend_id (const char *key, const char *value)
{
  (void)key;
  return set_string (&backend_id, value);
}

static int
set_require_backend_id (const char *key, const char *value)
{
  bool require;

  if (parse_bool (key, value, &require) == -1)
    return -1;
  params_conf.allow_no_identity = !require;
  return 0;
}

static int
set_log_lost (const char *key, const char *value)
{
  (void)key;
  if (strcmp (value, "refuse") == 0)
    params_conf.accept_log_loss = false;
  else if (strcmp (value, "accept") == 0)
    params_conf.accept_log_loss = true;
  else
    {
      nbdkit_error ("hhc: log-lost=%s: must be refuse or accept", value);
      return -1;
    }
  return 0;
}

static int
set_direct (const char *key, const char *value)
{
  return parse_bool (key, value, &params_conf.direct);
}

static int
set_stats (const char *key, const char *value)
{
  (void)key;
  return set_path (&stats_path, value);
}

static int
set_control (const char *key, const char *value)
{
  char *path = NULL;
  int r;

  (void)key;
  r = set_path (&path, value);
  if (r == 0)
    r = control_set_path (path);
  free (path);
  return r;
}

static int
set_writeback_threads (const char *key, const char *value)
{
  return parse_uint (key, value, 1, 64, &params_conf.writeback_threads);
}

static int
set_idle_ms (const char *key, const char *value)
{
  return parse_uint (key, value, 0, 3600000, &params_conf.idle_ms);
}

static int
set_seq_cutoff (const char *key, const char *value)
{
  return parse_size_in (key, value, 0, UINT64_MAX, false, "a size (0: off)",
                        &params_conf.seq_cutoff);
}

static int
set_promote (const char *key, const char *value)
{
  (void)key;
  if (hhc_promote_from_string (value, &params_conf.promote) != 0)
    {
      nbdkit_error ("hhc: promote=%s: must be always or nhit", value);
      return -1;
    }
  return 0;
}

static int
set_promote_hits (const char *key, const char *value)
{
  return parse_uint (key, value, 1, HHC_PROMOTE_MAX_HITS,
                     &params_conf.promote_hits);
}

static int
set_promote_window (const char *key, const char *value)
{
  unsigned w;

  if (parse_uint (key, value, 0, HHC_PROMOTE_MAX_WINDOW, &w) == -1)
    return -1;
  params_conf.promote_window = w;
  return 0;
}

static const struct param {
  const char *key;
  int (*set) (const char *key, const char *value);
} params[] = {
  { "cache", set_cache },
  { "cache-size", set_cache_size },
  { "mode", set_mode },
  { "log", set_log },
  { "log-size", set_log_size },
  { "segment-size", set_segment_size },
  { "log-buffers", set_log_buffers },
  { "log-inflight", set_log_inflight },
  { "ssd-sync", set_ssd_sync },
  { "block-size", set_block_size },
  { "dirty-low", set_dirty_low },
  { "dirty-high", set_dirty_high },
  { "dirty-max", set_dirty_max },
  { "hot-ratio", set_hot_ratio },
  { "format", set_format },
  { "backend-id", set_backend_id },
  { "require-backend-id", set_require_backend_id },
  { "log-lost", set_log_lost },
  { "direct", set_direct },
  { "stats", set_stats },
  { "control", set_control },
  { "writeback-threads", set_writeback_threads },
  { "idle-ms", set_idle_ms },
  { "seq-cutoff", set_seq_cutoff },
  { "promote", set_promote },
  { "promote-hits", set_promote_hits },
  { "promote-window", set_promote_window },
};

int
params_set (const char *key, const char *value)
{
  for (size_t i = 0; i < sizeof params / sizeof params[0]; i++)
    if (strcmp (key, params[i].key) == 0)
      return params[i].set (key, value);
  return 1;
}

int
params_check (void)
{
  if (cache_path == NULL)
    {
      nbdkit_error ("hhc: the cache= parameter is required");
      return -1;
    }
  /* hhc is the default mode when there is a log to use. */
  if (!mode_set)
    params_conf.mode = params_conf.nlogs ? HHC_MODE_HHC : HHC_MODE_WB;
  if (params_conf.mode == HHC_MODE_HHC && params_conf.nlogs == 0)
    {
      nbdkit_error ("hhc: mode=hhc needs a log device: add log=PATH");
      return -1;
    }
  if (params_conf.dirty_low > params_conf.dirty_high)
    {
      nbdkit_error ("hhc: dirty-low=%u must not exceed dirty-high=%u",
                    params_conf.dirty_low, params_conf.dirty_high);
      return -1;
    }
  if (params_conf.dirty_high > params_conf.dirty_max)
    {
      nbdkit_error ("hhc: dirty-high=%u must not exceed dirty-max=%u",
                    params_conf.dirty_high, params_conf.dirty_max);
      return -1;
    }
  params_conf.cache_path = cache_path;
  params_conf.stats_path = stats_path;
  params_conf.backend_id = backend_id;
  return 0;
}
