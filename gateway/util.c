/* Helpers of common.h. */
#include <config.h>

#include <stdio.h>
#include <time.h>

#include "common.h"

void
hhc_msgv (hhc_msg_fn fn, enum hhc_msg_level level, const char *fmt, va_list ap)
{
  char msg[1024];

  if (fn == NULL)
    return;
  vsnprintf (msg, sizeof msg, fmt, ap);
  fn (level, msg);
}

void
hhc_msg (hhc_msg_fn fn, enum hhc_msg_level level, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  hhc_msgv (fn, level, fmt, ap);
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
