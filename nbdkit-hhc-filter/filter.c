/* nbdkit-hhc-filter: a persistent SSD cache in front of any plugin.
 *
 * A thin layer: the callbacks here, the parameters in params.c,
 * everything else in the core (gateway/).  One volume serves every
 * connection (multi-conn): it is opened in .after_fork with a
 * background context to the plugin (used by the flusher) and closed in
 * .cleanup.  Client requests pass
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
#include "hhccore.h"
#include "next-backend.h"
#include "params.h"

/* -D hhc.verbose=1: log the core's debug messages. */
NBDKIT_DLL_PUBLIC int hhc_debug_verbose = 0;

static struct hhc_preopened *preopened; /* hhc_preopen's, until hhc_open */
static struct hhc_volume *vol;
static nbdkit_next *bg_next; /* background context (flusher) */

static void
core_msg (enum hhc_msg_level level, const char *msg)
{
  switch (level)
    {
    case HHC_MSG_ERROR:
      nbdkit_error ("hhc: %s", msg);
      break;
    case HHC_MSG_WARNING:
      nbdkit_error ("hhc: warning: %s", msg);
      break;
    case HHC_MSG_INFO:
      nbdkit_debug ("hhc: %s", msg);
      break;
    case HHC_MSG_DEBUG:
      if (hhc_debug_verbose)
        nbdkit_debug ("hhc: %s", msg);
      break;
    }
}

static void
filter_load (void)
{
  params_init (core_msg);
}

static void
filter_unload (void)
{
  params_free ();
  control_free ();
}

static int
filter_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
               const char *key, const char *value)
{
  int r = params_set (key, value);

  return r == 1 ? next (nxdata, key, value) : r;
}

static int
filter_config_complete (nbdkit_next_config_complete *next,
                        nbdkit_backend *nxdata)
{
  return params_check () == 0 ? next (nxdata) : -1;
}

/* Open and lock the cache device before nbdkit forks, so that a
 * missing or locked device fails the start with an error on stderr.
 */
static int
filter_get_ready (int thread_model)
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
      params_conf.writeback_threads = 1;
    }
  return hhc_preopen (&params_conf, &preopened) == 0 ? 0 : -1;
}

static int
filter_after_fork (nbdkit_backend *backend)
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
  r = hhc_open (&params_conf, preopened, &next_backend_ops, &info, &vol);
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
filter_cleanup (nbdkit_backend *backend)
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
filter_open (nbdkit_next_open *next, nbdkit_context *nxdata, int readonly,
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
filter_finalize (nbdkit_next *next, void *handle)
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
filter_thread_model (void)
{
  return NBDKIT_THREAD_MODEL_PARALLEL;
}

static int64_t
filter_get_size (nbdkit_next *next, void *handle)
{
  return next->get_size (next);
}

static int
filter_block_size (nbdkit_next *next, void *handle, uint32_t *minimum,
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
filter_can_multi_conn (nbdkit_next *next, void *handle)
{
  return next->can_multi_conn (next);
}

static int
filter_can_flush (nbdkit_next *next, void *handle)
{
  /* Probe next too: nbdkit needs it before we send it requests. */
  if (next->can_flush (next) == -1)
    return -1;
  return 1;
}

static int
filter_can_fua (nbdkit_next *next, void *handle)
{
  /* Probe next too: nbdkit needs it before we send it requests. */
  if (next->can_fua (next) == -1)
    return -1;
  return NBDKIT_FUA_NATIVE;
}

static int
filter_can_trim (nbdkit_next *next, void *handle)
{
  /* Probe next too: nbdkit needs it before we send it requests. */
  if (next->can_trim (next) == -1)
    return -1;
  return 1;
}

static int
filter_can_zero (nbdkit_next *next, void *handle)
{
  /* Probe next too: nbdkit needs it before we send it requests. */
  if (next->can_zero (next) == -1)
    return -1;
  return NBDKIT_ZERO_NATIVE;
}

static int
filter_can_fast_zero (nbdkit_next *next, void *handle)
{
  return 0;
}

static int
filter_can_extents (nbdkit_next *next, void *handle)
{
  return 0; /* cached data may sit where the plugin reports holes */
}

static int
filter_can_cache (nbdkit_next *next, void *handle)
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
filter_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
              uint64_t offset, uint32_t flags, int *err)
{
  return result (hhc_read (vol, next, buf, count, offset), err);
}

static int
filter_pwrite (nbdkit_next *next, void *handle, const void *buf, uint32_t count,
               uint64_t offset, uint32_t flags, int *err)
{
  return result (
      hhc_write (vol, next, buf, count, offset, flags & NBDKIT_FLAG_FUA), err);
}

static int
filter_flush (nbdkit_next *next, void *handle, uint32_t flags, int *err)
{
  return result (hhc_flush (vol, next), err);
}

static int
filter_trim (nbdkit_next *next, void *handle, uint32_t count, uint64_t offset,
             uint32_t flags, int *err)
{
  return result (hhc_trim (vol, next, count, offset, flags & NBDKIT_FLAG_FUA),
                 err);
}

static int
filter_zero (nbdkit_next *next, void *handle, uint32_t count, uint64_t offset,
             uint32_t flags, int *err)
{
  return result (hhc_zero (vol, next, count, offset, flags & NBDKIT_FLAG_FUA),
                 err);
}

static int
filter_cache (nbdkit_next *next, void *handle, uint32_t count, uint64_t offset,
              uint32_t flags, int *err)
{
  return result (hhc_prefetch (vol, next, count, offset), err);
}

static struct nbdkit_filter filter = {
  .name = "hhc",
  .longname = "nbdkit HHC cache filter",
  .description = "persistent SSD cache with write-back (HHC gateway)",
  .load = filter_load,
  .unload = filter_unload,
  .config = filter_config,
  .config_complete = filter_config_complete,
  .config_help = params_help,
  .thread_model = filter_thread_model,
  .get_ready = filter_get_ready,
  .after_fork = filter_after_fork,
  .cleanup = filter_cleanup,
  .open = filter_open,
  .finalize = filter_finalize,
  .get_size = filter_get_size,
  .block_size = filter_block_size,
  .can_multi_conn = filter_can_multi_conn,
  .can_flush = filter_can_flush,
  .can_fua = filter_can_fua,
  .can_trim = filter_can_trim,
  .can_zero = filter_can_zero,
  .can_fast_zero = filter_can_fast_zero,
  .can_extents = filter_can_extents,
  .can_cache = filter_can_cache,
  .pread = filter_pread,
  .pwrite = filter_pwrite,
  .flush = filter_flush,
  .trim = filter_trim,
  .zero = filter_zero,
  .cache = filter_cache,
};

NBDKIT_REGISTER_FILTER (filter)
