/* nbdkit-hhc-filter: a persistent SSD cache in front of any plugin.
 *
 * A thin layer: parameters and callbacks here, everything else in the
 * core (gateway/).  One volume serves every connection (multi-conn):
 * it is opened in .after_fork with a background context to the plugin
 * (used by the flusher) and closed in .cleanup.  Client requests pass
 * their own connection's next to the core for misses and pass-down.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nbdkit-filter.h>

#include "control.h"
#include "dev.h"
#include "hhc.h"
#include "next-backend.h"
#include "parse.h"

/* -D hhc.verbose=1: log the core's debug messages. */
NBDKIT_DLL_PUBLIC int hhc_debug_verbose = 0;

static struct hhc_conf conf;
static char *cache_path, *stats_path, *backend_id;
static bool mode_set; /* mode= given */

static struct hhc_preopened *preopened; /* hhc_preopen's, until hhc_open */
static struct hhc_volume *vol;
static nbdkit_next *bg_next; /* background context (flusher) */

static void
core_log (enum hhc_log_level level, const char *msg)
{
  switch (level)
    {
    case HHC_LOG_ERROR:
      nbdkit_error ("hhc: %s", msg);
      break;
    case HHC_LOG_WARNING:
      nbdkit_error ("hhc: warning: %s", msg);
      break;
    case HHC_LOG_INFO:
      nbdkit_debug ("hhc: %s", msg);
      break;
    case HHC_LOG_DEBUG:
      if (hhc_debug_verbose)
        nbdkit_debug ("hhc: %s", msg);
      break;
    }
}

static void
hhc_load (void)
{
  hhc_conf_init (&conf);
  conf.log = core_log;
}

static void
hhc_unload (void)
{
  free (cache_path);
  free (stats_path);
  free (backend_id);
  control_free ();
  for (unsigned i = 0; i < conf.nlogs; i++)
    free ((char *)conf.log_paths[i]);
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
  nbdkit_error ("hhc: %s=%s: not a size (a number with optional k/M/G/T "
                "suffix)",
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

  if (value[0] == '/' || dev_is_nbd_uri (value) || value[0] == '\0')
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
  return parse_uint ("hot-ratio", value, 1, 16, &conf.hot_ratio);
}

static int
hhc_config (nbdkit_next_config *next, nbdkit_backend *nxdata, const char *key,
            const char *value)
{
  uint64_t u;

  if (strcmp (key, "cache") == 0)
    return set_path (&cache_path, value);
  if (strcmp (key, "cache-size") == 0)
    {
      if (parse_size (key, value, &u) == -1)
        return -1;
      if (u < 65536)
        {
          nbdkit_error ("hhc: cache-size=%s: must be at least 64K", value);
          return -1;
        }
      conf.cache_size = u;
      return 0;
    }
  if (strcmp (key, "mode") == 0)
    {
      if (hhc_mode_from_string (value, &conf.mode) != 0)
        {
          nbdkit_error ("hhc: mode=%s: must be pt, wt, wb, wbflush or hhc",
                        value);
          return -1;
        }
      mode_set = true;
      return 0;
    }
  if (strcmp (key, "log") == 0)
    {
      if (conf.nlogs == HHC_MAX_LOGS)
        {
          nbdkit_error ("hhc: log= may be given at most %d times",
                        HHC_MAX_LOGS);
          return -1;
        }
      return set_path ((char **)&conf.log_paths[conf.nlogs++], value);
    }
  if (strcmp (key, "log-size") == 0)
    {
      if (parse_size (key, value, &u) == -1)
        return -1;
      if (u < 8 * 1024 * 1024)
        {
          nbdkit_error ("hhc: log-size=%s: must be at least 8M", value);
          return -1;
        }
      conf.log_size = u;
      return 0;
    }
  if (strcmp (key, "segment-size") == 0)
    {
      if (parse_size (key, value, &u) == -1)
        return -1;
      if (u < 65536 || u > 64 * 1024 * 1024 || (u & (u - 1)) != 0)
        {
          nbdkit_error ("hhc: segment-size=%s: must be a power of two from "
                        "64K to 64M",
                        value);
          return -1;
        }
      conf.segment_size = u;
      return 0;
    }
  if (strcmp (key, "log-buffers") == 0)
    return parse_uint (key, value, 2, 64, &conf.log_buffers);
  if (strcmp (key, "ssd-sync") == 0)
    {
      if (strcmp (value, "flush") != 0 && strcmp (value, "checkpoint") != 0)
        {
          nbdkit_error ("hhc: ssd-sync=%s: must be flush or checkpoint", value);
          return -1;
        }
      conf.wal = strcmp (value, "checkpoint") == 0;
      return 0;
    }
  if (strcmp (key, "block-size") == 0)
    {
      if (parse_size (key, value, &u) == -1)
        return -1;
      if (u < 512 || u > 1048576 || (u & (u - 1)) != 0)
        {
          nbdkit_error ("hhc: block-size=%s: must be a power of two from "
                        "512 to 1M",
                        value);
          return -1;
        }
      conf.block_size = u;
      return 0;
    }
  if (strcmp (key, "dirty-low") == 0)
    return parse_uint (key, value, 0, 100, &conf.dirty_low);
  if (strcmp (key, "dirty-high") == 0)
    return parse_uint (key, value, 0, 100, &conf.dirty_high);
  if (strcmp (key, "dirty-max") == 0)
    return parse_uint (key, value, 1, 100, &conf.dirty_max);
  if (strcmp (key, "hot-ratio") == 0)
    return parse_hot_ratio (value);
  if (strcmp (key, "format") == 0)
    {
      if (hhc_format_from_string (value, &conf.format) != 0)
        {
          nbdkit_error ("hhc: format=%s: must be auto, force or never", value);
          return -1;
        }
      return 0;
    }
  if (strcmp (key, "backend-id") == 0)
    return set_string (&backend_id, value);
  if (strcmp (key, "require-backend-id") == 0)
    {
      bool require;
      if (parse_bool (key, value, &require) == -1)
        return -1;
      conf.allow_no_identity = !require;
      return 0;
    }
  if (strcmp (key, "direct") == 0)
    return parse_bool (key, value, &conf.direct);
  if (strcmp (key, "stats") == 0)
    return set_path (&stats_path, value);
  if (strcmp (key, "control") == 0)
    {
      char *path = NULL;
      int r = set_path (&path, value);
      if (r == 0)
        r = control_set_path (path);
      free (path);
      return r;
    }
  if (strcmp (key, "writeback-threads") == 0)
    return parse_uint (key, value, 1, 64, &conf.writeback_threads);
  if (strcmp (key, "idle-ms") == 0)
    return parse_uint (key, value, 0, 3600000, &conf.idle_ms);
  return next (nxdata, key, value);
}

static int
hhc_config_complete (nbdkit_next_config_complete *next, nbdkit_backend *nxdata)
{
  if (cache_path == NULL)
    {
      nbdkit_error ("hhc: the cache= parameter is required");
      return -1;
    }
  /* hhc is the default mode when there is a log to use. */
  if (!mode_set)
    conf.mode = conf.nlogs ? HHC_MODE_HHC : HHC_MODE_WB;
  if (conf.mode == HHC_MODE_HHC && conf.nlogs == 0)
    {
      nbdkit_error ("hhc: mode=hhc needs a log device: add log=PATH");
      return -1;
    }
  if (conf.dirty_low > conf.dirty_high)
    {
      nbdkit_error ("hhc: dirty-low=%u must not exceed dirty-high=%u",
                    conf.dirty_low, conf.dirty_high);
      return -1;
    }
  if (conf.dirty_high > conf.dirty_max)
    {
      nbdkit_error ("hhc: dirty-high=%u must not exceed dirty-max=%u",
                    conf.dirty_high, conf.dirty_max);
      return -1;
    }
  conf.cache_path = cache_path;
  conf.stats_path = stats_path;
  conf.backend_id = backend_id;
  return next (nxdata);
}

#define hhc_config_help                                                        \
  "cache=PATH              (required) SSD cache: file or block device.\n"      \
  "cache-size=SIZE         Create the cache file with this size.\n"            \
  "mode=pt|wt|wb|wbflush|hhc  Cache mode (default hhc with log=, else wb).\n"  \
  "log=PATH                HDD log device (file or block device); repeat\n"    \
  "                        for mirrors.\n"                                     \
  "log-size=SIZE           Create missing log files with this size.\n"         \
  "segment-size=SIZE       Largest log segment (default 1M).\n"                \
  "log-buffers=N           Segment buffers (default 4).\n"                     \
  "ssd-sync=flush|checkpoint  SSD commit on FLUSH, or at log checkpoints\n"    \
  "                        (write-ahead; default flush).\n"                    \
  "block-size=SIZE         Cache block size (default 4K).\n"                   \
  "dirty-low=PERCENT       Write-back starts here (default 20).\n"             \
  "dirty-high=PERCENT      Write-back at full speed (default 60).\n"           \
  "dirty-max=PERCENT       Writes wait above this (default 95).\n"             \
  "hot-ratio=N             Midpoint LRU hot:cold = N:1 (default 2).\n"         \
  "format=auto|force|never Format the cache device (default auto).\n"          \
  "backend-id=STRING       Identity the cache is tied to.\n"                   \
  "require-backend-id=BOOL Refuse to format for a plugin with no export\n"     \
  "                        description unless backend-id= (default true).\n"   \
  "direct=BOOL             O_DIRECT on the cache device.\n"                    \
  "stats=FILE              JSON statistics, rewritten once a second.\n"        \
  "control=SOCKET          Unix socket for hhcctl (stats, drain).\n"           \
  "writeback-threads=N     Backend writes in flight (default 4).\n"            \
  "idle-ms=N               Full-speed write-back after N ms without\n"         \
  "                        requests (default 1000; 0: never)."

/* Open and lock the cache device before nbdkit forks, so that a
 * missing or locked device fails the start with an error on stderr.
 */
static int
hhc_get_ready (int thread_model)
{
  /* A plugin that is not fully parallel must never see two requests at
   * once, also not from the flusher's background context (which nbdkit
   * does not serialise for us).
   */
  if (thread_model == NBDKIT_THREAD_MODEL_SERIALIZE_CONNECTIONS)
    {
      nbdkit_error ("hhc: the plugin allows only one connection at a time "
                    "(thread model serialize_connections), but the cache "
                    "needs a second one for write-back");
      return -1;
    }
  if (thread_model < NBDKIT_THREAD_MODEL_PARALLEL)
    {
      next_backend_serialize = true;
      conf.writeback_threads = 1;
    }
  return hhc_preopen (&conf, &preopened) == 0 ? 0 : -1;
}

static int
hhc_after_fork (nbdkit_backend *backend)
{
  struct hhc_backend_info info = { 0 };
  int r;

  bg_next = nbdkit_next_context_open (backend, 0, "", 1);
  if (bg_next == NULL)
    {
      nbdkit_error ("hhc: cannot open a background context to the plugin");
      return -1;
    }
  if (next_backend_probe (bg_next, &info) == -1)
    return -1;
  r = hhc_open (&conf, preopened, &next_backend_ops, &info, &vol);
  preopened = NULL; /* the volume owns it now (or closed it) */
  if (r)
    return -1; /* the core said why */
  r = hhc_start (vol, bg_next);
  if (r)
    {
      nbdkit_error ("hhc: starting the cache: %s", strerror (r));
      return -1;
    }
  return control_start (vol, bg_next);
}

static void
hhc_cleanup (nbdkit_backend *backend)
{
  control_stop ();
  if (vol)
    hhc_close (vol);
  vol = NULL;
  if (bg_next)
    {
      bg_next->finalize (bg_next);
      nbdkit_next_context_close (bg_next);
    }
  bg_next = NULL;
}

static void *
hhc_open_conn (nbdkit_next_open *next, nbdkit_context *nxdata, int readonly,
               const char *exportname, int is_tls)
{
  int r;

  next_backend_lock ();
  r = next (nxdata, readonly, exportname);
  next_backend_unlock ();
  if (r == -1)
    return NULL;
  return NBDKIT_HANDLE_NOT_NEEDED;
}

/* A connection's trims, zeros and pt/wt writes went to the plugin
 * through its own context: flush it before the connection goes, so
 * that a clean close of the cache can trust the plugin's data even
 * when the plugin has no multi-conn.  Not when nothing is owed: a
 * client that disconnects during a backend outage must not wait for
 * the backend (write-back flushes the backend on its own).
 */
static int
hhc_finalize (nbdkit_next *next, void *handle)
{
  int err = 0;

  if (next->can_write (next) != 1 || next->can_flush (next) != 1
      || (vol && !hhc_backend_unflushed (vol)))
    return 0;
  uint64_t ticket = vol ? hhc_backend_flush_begin (vol) : 0;
  next_backend_lock ();
  int r = next->flush (next, 0, &err);
  next_backend_unlock ();
  if (vol)
    hhc_backend_flush_end (vol, ticket, r == -1 ? (err ? err : EIO) : 0);
  if (r == -1)
    {
      nbdkit_error ("hhc: flushing the plugin at disconnect: %s",
                    strerror (err ? err : EIO));
      return -1;
    }
  return 0;
}

static int
hhc_thread_model (void)
{
  return NBDKIT_THREAD_MODEL_PARALLEL;
}

static int64_t
hhc_get_size (nbdkit_next *next, void *handle)
{
  return next->get_size (next);
}

static int
hhc_block_size (nbdkit_next *next, void *handle, uint32_t *minimum,
                uint32_t *preferred, uint32_t *maximum)
{
  uint32_t mn = 0, pr = 0, mx = 0;

  if (next->block_size (next, &mn, &pr, &mx) == -1)
    return -1;
  *minimum = 1;
  *preferred = pr > 4096 ? pr : 4096;
  if (*preferred > 32 * 1024 * 1024)
    *preferred = 32 * 1024 * 1024;
  *maximum = 0xffffffff;
  return 0;
}

/* One cache serves every connection, but pt/wt writes, trims and
 * zeros reach the plugin through the writing connection and a FLUSH
 * flushes the plugin through the flushing one: multi-conn only if the
 * plugin has it too.
 */
static int
hhc_can_multi_conn (nbdkit_next *next, void *handle)
{
  return next->can_multi_conn (next);
}

static int
hhc_can_flush (nbdkit_next *next, void *handle)
{
  /* Probe next too: nbdkit needs it before we send it requests. */
  if (next->can_flush (next) == -1)
    return -1;
  return 1;
}

static int
hhc_can_fua (nbdkit_next *next, void *handle)
{
  /* Probe next too: nbdkit needs it before we send it requests. */
  if (next->can_fua (next) == -1)
    return -1;
  return NBDKIT_FUA_NATIVE;
}

static int
hhc_can_trim (nbdkit_next *next, void *handle)
{
  /* Probe next too: nbdkit needs it before we send it requests. */
  if (next->can_trim (next) == -1)
    return -1;
  return 1;
}

static int
hhc_can_zero (nbdkit_next *next, void *handle)
{
  /* Probe next too: nbdkit needs it before we send it requests. */
  if (next->can_zero (next) == -1)
    return -1;
  return NBDKIT_ZERO_NATIVE;
}

static int
hhc_can_fast_zero (nbdkit_next *next, void *handle)
{
  return 0;
}

static int
hhc_can_extents (nbdkit_next *next, void *handle)
{
  return 0; /* cached data may sit where the plugin reports holes */
}

static int
hhc_can_cache (nbdkit_next *next, void *handle)
{
  /* Probe next too: nbdkit needs it before we send it requests. */
  if (next->can_cache (next) == -1)
    return -1;
  return NBDKIT_CACHE_NATIVE;
}

/* Turn a core result into nbdkit's convention. */
static int
result (int r, int *err)
{
  if (r == 0)
    return 0;
  *err = r;
  return -1;
}

static int
hhc_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
           uint64_t offset, uint32_t flags, int *err)
{
  return result (hhc_read (vol, next, buf, count, offset), err);
}

static int
hhc_pwrite (nbdkit_next *next, void *handle, const void *buf, uint32_t count,
            uint64_t offset, uint32_t flags, int *err)
{
  return result (
      hhc_write (vol, next, buf, count, offset, flags & NBDKIT_FLAG_FUA), err);
}

static int
hhc_flush_cb (nbdkit_next *next, void *handle, uint32_t flags, int *err)
{
  return result (hhc_flush (vol, next), err);
}

static int
hhc_trim_cb (nbdkit_next *next, void *handle, uint32_t count, uint64_t offset,
             uint32_t flags, int *err)
{
  return result (hhc_trim (vol, next, count, offset, flags & NBDKIT_FLAG_FUA),
                 err);
}

static int
hhc_zero_cb (nbdkit_next *next, void *handle, uint32_t count, uint64_t offset,
             uint32_t flags, int *err)
{
  return result (hhc_zero (vol, next, count, offset, flags & NBDKIT_FLAG_FUA),
                 err);
}

static int
hhc_cache_cb (nbdkit_next *next, void *handle, uint32_t count, uint64_t offset,
              uint32_t flags, int *err)
{
  return result (hhc_prefetch (vol, next, count, offset), err);
}

static struct nbdkit_filter filter = {
  .name = "hhc",
  .longname = "nbdkit HHC cache filter",
  .description = "persistent SSD cache with write-back (HHC gateway)",
  .load = hhc_load,
  .unload = hhc_unload,
  .config = hhc_config,
  .config_complete = hhc_config_complete,
  .config_help = hhc_config_help,
  .thread_model = hhc_thread_model,
  .get_ready = hhc_get_ready,
  .after_fork = hhc_after_fork,
  .cleanup = hhc_cleanup,
  .open = hhc_open_conn,
  .finalize = hhc_finalize,
  .get_size = hhc_get_size,
  .block_size = hhc_block_size,
  .can_multi_conn = hhc_can_multi_conn,
  .can_flush = hhc_can_flush,
  .can_fua = hhc_can_fua,
  .can_trim = hhc_can_trim,
  .can_zero = hhc_can_zero,
  .can_fast_zero = hhc_can_fast_zero,
  .can_extents = hhc_can_extents,
  .can_cache = hhc_can_cache,
  .pread = hhc_pread,
  .pwrite = hhc_pwrite,
  .flush = hhc_flush_cb,
  .trim = hhc_trim_cb,
  .zero = hhc_zero_cb,
  .cache = hhc_cache_cb,
};

NBDKIT_REGISTER_FILTER (filter)
