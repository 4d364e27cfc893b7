/* nbdkit-hddmodel-plugin: a file served as a one-head HDD (issue 32),
 * the benchmarks' honest log device (scripts/bench/run, policy
 * hhc-head).  Timing: hdd-model.c, on CLOCK_MONOTONIC.
 *
 *   nbdkit tests/bench/.libs/nbdkit-hddmodel-plugin.so file=PATH
 *     [rotation=4170us] [seek=8ms] [bandwidth=150000000] [cache=32M]
 *
 * Each request takes the model lock, is charged by the model (start,
 * finish on the one head's clock), drops the lock, does its real I/O on
 * the file and sleeps until its finish.  FLUSH and FUA do not sync the
 * file: the model's barrier is the cost, the local disk's is not added.
 * -D hddmodel.trace=1 prints every request's charge.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "hdd-model.h"

NBDKIT_DLL_PUBLIC int hddmodel_debug_trace = 0;

static char *path;
static int fd = -1;
static struct hdd_params params = {
  .rotation_ns = 4170000,
  .seek_ns = 8000000,
  .bandwidth = 150000000,
  .cache_bytes = 32 * 1024 * 1024,
};
/* model: the head's clock and the cache; lock held across a charge. */
static struct hdd_model model;
static pthread_mutex_t model_lock = PTHREAD_MUTEX_INITIALIZER;

/* "4170us", "8ms", "1s", "250000ns" -> ns; -1 on error. */
static int
parse_ns (const char *key, const char *v, uint64_t *ns)
{
  char *end;
  double d;

  errno = 0;
  d = strtod (v, &end);
  if (errno || end == v || d < 0)
    goto bad;
  if (strcmp (end, "ns") == 0)
    *ns = (uint64_t)d;
  else if (strcmp (end, "us") == 0)
    *ns = (uint64_t)(d * 1e3 + 0.5);
  else if (strcmp (end, "ms") == 0)
    *ns = (uint64_t)(d * 1e6 + 0.5);
  else if (strcmp (end, "s") == 0)
    *ns = (uint64_t)(d * 1e9 + 0.5);
  else
    goto bad;
  return 0;
bad:
  nbdkit_error ("%s: not a duration (NUMBER then ns, us, ms or s): %s", key, v);
  return -1;
}

static int
hddmodel_config (const char *key, const char *value)
{
  int64_t r;

  if (strcmp (key, "file") == 0)
    {
      free (path);
      path = nbdkit_realpath (value);
      return path ? 0 : -1;
    }
  if (strcmp (key, "rotation") == 0)
    return parse_ns (key, value, &params.rotation_ns);
  if (strcmp (key, "seek") == 0)
    return parse_ns (key, value, &params.seek_ns);
  if (strcmp (key, "bandwidth") == 0 || strcmp (key, "cache") == 0)
    {
      r = nbdkit_parse_size (value);
      if (r == -1)
        return -1;
      if (key[0] == 'b' && r == 0)
        {
          nbdkit_error ("bandwidth: must be > 0");
          return -1;
        }
      *(key[0] == 'b' ? &params.bandwidth : &params.cache_bytes) = r;
      return 0;
    }
  nbdkit_error ("unknown parameter: %s", key);
  return -1;
}

static int
hddmodel_config_complete (void)
{
  if (path == NULL)
    {
      nbdkit_error ("file= is required");
      return -1;
    }
  fd = open (path, O_RDWR | O_CLOEXEC);
  if (fd == -1)
    {
      nbdkit_error ("open: %s: %m", path);
      return -1;
    }
  hdd_model_init (&model, &params);
  return 0;
}

static void
hddmodel_unload (void)
{
  if (fd != -1)
    close (fd);
  free (path);
}

static void *
hddmodel_open (int readonly)
{
  (void)readonly;
  return &fd; /* one device for every connection */
}

static int64_t
hddmodel_get_size (void *h)
{
  struct stat st;

  (void)h;
  if (fstat (fd, &st) == -1)
    {
      nbdkit_error ("fstat: %s: %m", path);
      return -1;
    }
  return st.st_size;
}

static int
hddmodel_can_fua (void *h)
{
  (void)h;
  return NBDKIT_FUA_NATIVE;
}

static int
hddmodel_can_one (void *h)
{
  (void)h;
  return 1;
}

/* Charges one request, returns its finish on CLOCK_MONOTONIC (ns). */
static uint64_t
charge (enum hdd_op op, uint64_t offset, uint64_t len, bool fua)
{
  struct timespec ts;
  struct hdd_service s;
  uint64_t now;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  now = (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec;
  pthread_mutex_lock (&model_lock);
  s = hdd_model_serve (&model, now, op, offset, len, fua);
  pthread_mutex_unlock (&model_lock);
  if (hddmodel_debug_trace)
    nbdkit_debug ("hddmodel: op=%d off=%" PRIu64 " len=%" PRIu64
                  " fua=%d wait=%" PRIu64 " seek=%" PRIu64 " transfer=%" PRIu64
                  " barrier=%" PRIu64 " dirty=%" PRIu64,
                  (int)op, offset, len, (int)fua, s.start - now, s.seek,
                  s.transfer, s.barrier, s.dirty);
  return s.finish;
}

/* Sleeps until FINISH on CLOCK_MONOTONIC. */
static void
wait_until (uint64_t finish)
{
  struct timespec ts
      = { .tv_sec = finish / 1000000000u, .tv_nsec = finish % 1000000000u };

  while (clock_nanosleep (CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
    ;
}

static int
hddmodel_pread (void *h, void *buf, uint32_t count, uint64_t offset,
                uint32_t flags)
{
  uint64_t finish = charge (HDD_READ, offset, count, false);
  ssize_t r;

  (void)h;
  (void)flags;
  for (char *p = buf; count > 0; p += r, count -= r, offset += r)
    {
      r = pread (fd, p, count, offset);
      if (r <= 0)
        {
          nbdkit_error ("pread: %s: %s", path, r ? strerror (errno) : "EOF");
          return -1;
        }
    }
  wait_until (finish);
  return 0;
}

static int
hddmodel_pwrite (void *h, const void *buf, uint32_t count, uint64_t offset,
                 uint32_t flags)
{
  uint64_t finish
      = charge (HDD_WRITE, offset, count, (flags & NBDKIT_FLAG_FUA) != 0);
  ssize_t r;

  (void)h;
  for (const char *p = buf; count > 0; p += r, count -= r, offset += r)
    {
      r = pwrite (fd, p, count, offset);
      if (r <= 0)
        {
          nbdkit_error ("pwrite: %s: %s", path, r ? strerror (errno) : "EOF");
          return -1;
        }
    }
  wait_until (finish);
  return 0;
}

static int
hddmodel_flush (void *h, uint32_t flags)
{
  (void)h;
  (void)flags;
  wait_until (charge (HDD_FLUSH, 0, 0, false));
  return 0;
}

static struct nbdkit_plugin plugin = {
  .name = "hddmodel",
  .longname = "one-head HDD model (benchmarks)",
  .config = hddmodel_config,
  .config_complete = hddmodel_config_complete,
  .config_help = "file=PATH           (required) the file served\n"
                 "rotation=DURATION   a barrier's rotational wait (4170us)\n"
                 "seek=DURATION       a non-sequential access (8ms)\n"
                 "bandwidth=BYTES     media bytes per second (150000000)\n"
                 "cache=SIZE          volatile write cache (32M)",
  .unload = hddmodel_unload,
  .open = hddmodel_open,
  .get_size = hddmodel_get_size,
  .can_flush = hddmodel_can_one,
  .can_fua = hddmodel_can_fua,
  .can_multi_conn = hddmodel_can_one,
  .pread = hddmodel_pread,
  .pwrite = hddmodel_pwrite,
  .flush = hddmodel_flush,
};

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL
NBDKIT_REGISTER_PLUGIN (plugin)
