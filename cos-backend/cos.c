/* nbdkit-cos-plugin: a block volume stored as objects in S3 / COS.
 *
 * Layout (man/nbdkit-cos-plugin.pod): the volume is cut into objects of
 * object-size bytes, object I named PREFIX/%016llx (I in hex), always
 * exactly object-size bytes long; a missing object reads as zeros.
 * PREFIX/volume.json records the geometry and the volume's UUID.
 *
 * Requests may have any offset and length.  A write that covers a whole
 * object is one PUT (or one DELETE when the data is all zeros); a
 * partial one reads the object, patches it and writes it back, under a
 * lock of that object (object.c).  A request is cut into its objects,
 * done in parallel (span.c).
 *
 * Writes are write-back by default (wbuf.c): a write lands in the
 * object's dirty copy, threads PUT dirty objects in parallel, and a
 * FLUSH or a FUA waits for the objects it covers.  With writeback=0
 * every write is acknowledged after its PUT or DELETE, which is
 * durable then.
 *
 * This file holds the nbdkit callbacks; the parameters are config.c's,
 * the open volume open.c's, extents extents.c's.
 */
#include <config.h>

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <curl/curl.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "config.h"
#include "extents.h"
#include "objcache.h"
#include "object.h"
#include "open.h"
#include "s3.h"
#include "span.h"
#include "wbuf.h"

static struct wbuf_stats wb_final; /* vol.wb's, once it is gone */

static void
cos_load (void)
{
  curl_global_init (CURL_GLOBAL_DEFAULT);
  object_init ();
}

/* Log the counters, and write them to cos-stats= if given. */
static void
write_stats (void)
{
  struct s3_stats st;
  struct wbuf_stats wst = { 0 };
  uint64_t hits, misses;
  char *tmp = NULL;
  FILE *f;

  if (vol.s3 == NULL)
    return;
  s3_get_stats (vol.s3, &st);
  objcache_stats (vol.cache, &hits, &misses);
  if (vol.wb)
    wbuf_get_stats (vol.wb, &wst);
  else
    wst = wb_final;
  nbdkit_debug ("cos: %" PRIu64 " requests, %" PRIu64 " retries (http %" PRIu64
                ", slowdown %" PRIu64 ", network %" PRIu64 ", etag %" PRIu64
                "), %" PRIu64 " failures",
                st.requests, st.retries, st.retry_http, st.retry_slow,
                st.retry_net, st.retry_etag, st.failures);
  if (conf.stats_file == NULL)
    return;
  if (asprintf (&tmp, "%s.tmp", conf.stats_file) == -1)
    return;
  f = fopen (tmp, "w");
  if (f)
    {
      fprintf (
          f,
          "{\"requests\": %" PRIu64 ", \"retries\": %" PRIu64
          ", \"retry_http\": %" PRIu64 ", \"retry_slowdown\": %" PRIu64
          ", \"retry_network\": %" PRIu64 ", \"retry_etag\": %" PRIu64
          ", \"failures\": %" PRIu64 ", \"reconnects\": %" PRIu64
          ", \"bytes_read\": %" PRIu64 ", \"bytes_written\": %" PRIu64
          ", \"cache_hits\": %" PRIu64 ", \"cache_misses\": %" PRIu64
          ", \"readahead_objects\": %" PRIu64 ", \"writeback_stores\": %" PRIu64
          ", \"writeback_merged\": %" PRIu64
          ", \"writeback_failures\": %" PRIu64 ", \"writeback_waits\": %" PRIu64
          "}\n",
          st.requests, st.retries, st.retry_http, st.retry_slow, st.retry_net,
          st.retry_etag, st.failures, st.reconnects, st.bytes_in, st.bytes_out,
          hits, misses, object_read_ahead_count (), wst.stores, wst.merged,
          wst.failures, wst.waits);
      if (fclose (f) == 0)
        rename (tmp, conf.stats_file);
      else
        unlink (tmp);
    }
  free (tmp);
}

/* Store what is still dirty before nbdkit exits (after the last
 * connection closed; a FLUSH may never have come).
 */
static void
cos_cleanup (void)
{
  size_t n;

  if (vol.wb == NULL)
    return;
  n = wbuf_dirty (vol.wb);
  if (n > 0)
    nbdkit_debug ("cos: storing %zu dirty objects before exit", n);
  if (wbuf_sync (vol.wb, 0, UINT64_MAX) == -1)
    nbdkit_error ("cos: %zu dirty objects could not be stored at exit: "
                  "their writes since the last flush are lost",
                  wbuf_dirty (vol.wb));
  wbuf_get_stats (vol.wb, &wb_final);
  wbuf_free (vol.wb);
  vol.wb = NULL;
}

static void
cos_unload (void)
{
  cos_cleanup (); /* in case nbdkit did not call it */
  write_stats ();
  close_volume ();
  config_free ();
  curl_global_cleanup ();
}

static int
cos_config (const char *key, const char *value)
{
  return config_set (key, value);
}

static int
cos_config_complete (void)
{
  return config_complete ();
}

static int
cos_get_ready (void)
{
  return open_volume ();
}

static void *
cos_open (int readonly)
{
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static int64_t
cos_get_size (void *h)
{
  return vol.size;
}

static const char *
cos_export_description (void *h)
{
  return vol.description;
}

static int
cos_block_size (void *h, uint32_t *minimum, uint32_t *preferred,
                uint32_t *maximum)
{
  *minimum = 1;
  *preferred = vol.object_size;
  *maximum = 0xffffffff;
  return 0;
}

static int
cos_can_multi_conn (void *h)
{
  /* One object cache and one write-back buffer for the process: every
   * connection sees every write, and a flush covers them all.
   */
  return 1;
}

static int
cos_can_fua (void *h)
{
  return NBDKIT_FUA_NATIVE; /* an acknowledged PUT is durable: wait for it */
}

static int
cos_can_flush (void *h)
{
  return 1;
}

static int
cos_can_trim (void *h)
{
  return 1;
}

static int
cos_can_zero (void *h)
{
  return 1;
}

static int
cos_can_extents (void *h)
{
  return 1;
}

static int
cos_flush (void *h, uint32_t flags)
{
  return object_sync (0, UINT64_MAX, "flush");
}

static int
cos_pread (void *h, void *buf, uint32_t count, uint64_t offset, uint32_t flags)
{
  return span_read (buf, count, offset);
}

static int
cos_pwrite (void *h, const void *buf, uint32_t count, uint64_t offset,
            uint32_t flags)
{
  return span_write (buf, count, offset, (flags & NBDKIT_FLAG_FUA) != 0);
}

static int
cos_zero (void *h, uint32_t count, uint64_t offset, uint32_t flags)
{
  return span_write (NULL, count, offset, (flags & NBDKIT_FLAG_FUA) != 0);
}

static int
cos_trim (void *h, uint32_t count, uint64_t offset, uint32_t flags)
{
  return span_write (NULL, count, offset, (flags & NBDKIT_FLAG_FUA) != 0);
}

static int
cos_extents (void *h, uint32_t count, uint64_t offset, uint32_t flags,
             struct nbdkit_extents *extents)
{
  return extents_list (count, offset, extents);
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name = "cos",
  .longname = "hhc-gateway S3/COS object store plugin",
  .version = PACKAGE_VERSION,
  .description = "Serve a block volume stored as objects in S3 or COS",
  .load = cos_load,
  .unload = cos_unload,
  .cleanup = cos_cleanup,
  .config = cos_config,
  .config_complete = cos_config_complete,
  .config_help = COS_CONFIG_HELP,
  .magic_config_key = NULL,
  .get_ready = cos_get_ready,
  .open = cos_open,
  .get_size = cos_get_size,
  .export_description = cos_export_description,
  .block_size = cos_block_size,
  .can_multi_conn = cos_can_multi_conn,
  .can_fua = cos_can_fua,
  .can_flush = cos_can_flush,
  .can_trim = cos_can_trim,
  .can_zero = cos_can_zero,
  .can_extents = cos_can_extents,
  .pread = cos_pread,
  .pwrite = cos_pwrite,
  .flush = cos_flush,
  .trim = cos_trim,
  .zero = cos_zero,
  .extents = cos_extents,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
