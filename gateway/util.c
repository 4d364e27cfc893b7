/* Helpers of common.h. */
#include <config.h>

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <time.h>

#include "common.h"

void
hhc_pthread_fail (const char *what, int r)
{
  fprintf (stderr, "hhc: %s: %s\n", what, strerror (r));
  abort ();
}

void
hhc_logv (hhc_log_fn fn, enum hhc_log_level level, const char *fmt, va_list ap)
{
  char msg[1024];

  if (fn == NULL)
    return;
  vsnprintf (msg, sizeof msg, fmt, ap);
  fn (level, msg);
}

void
hhc_log (hhc_log_fn fn, enum hhc_log_level level, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  hhc_logv (fn, level, fmt, ap);
  va_end (ap);
}

uint64_t
hhc_now_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void
hhc_deadline (struct timespec *ts, unsigned ms)
{
  clock_gettime (CLOCK_REALTIME, ts);
  ts->tv_sec += ms / 1000;
  ts->tv_nsec += (long)(ms % 1000) * 1000000;
  if (ts->tv_nsec >= 1000000000)
    {
      ts->tv_sec++;
      ts->tv_nsec -= 1000000000;
    }
}

void *
hhc_alloc_aligned (size_t size)
{
  void *p;

  if (size == 0)
    size = 4096;
  if (posix_memalign (&p, 4096, HHC_ROUND_UP (size, 4096)) != 0)
    return NULL;
  memset (p, 0, HHC_ROUND_UP (size, 4096));
  return p;
}

/* A random (version 4) UUID. */
void
hhc_make_uuid (uint8_t uuid[16])
{
  int fd = open ("/dev/urandom", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read (fd, uuid, 16) : -1;

  if (fd >= 0)
    close (fd);
  if (n != 16) /* fall back to time and address: unique enough */
    {
      uint64_t t = hhc_now_ns (), a = (uintptr_t)uuid;
      memcpy (uuid, &t, 8);
      memcpy (uuid + 8, &a, 8);
    }
  uuid[6] = (uuid[6] & 0x0f) | 0x40;
  uuid[8] = (uuid[8] & 0x3f) | 0x80;
}

void
hhc_uuid_str (const uint8_t u[16], char out[37])
{
  snprintf (out, 37,
            "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x"
            "%02x",
            u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10],
            u[11], u[12], u[13], u[14], u[15]);
}
