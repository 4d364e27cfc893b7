/* Histogram and the atomic stats file. */
#include <config.h>

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "common.h"
#include "stats.h"

static unsigned
bucket_of (uint64_t us)
{
  unsigned lg, sub;

  if (us < 4)
    return us;
  lg = 63 - __builtin_clzll (us); /* us in [2^lg, 2^(lg+1)) */
  sub = (us >> (lg - 2)) & 3;     /* next two bits */
  return HHC_MIN (4 * (lg - 1) + sub, (unsigned)HIST_BUCKETS - 1);
}

static uint64_t
bucket_upper (unsigned b)
{
  unsigned lg, sub;

  if (b < 4)
    return b;
  lg = b / 4 + 1;
  sub = b % 4;
  return ((UINT64_C (4) + sub + 1) << (lg - 2)) - 1;
}

void
hist_add (struct hhc_hist *h, uint64_t us)
{
  __atomic_fetch_add (&h->b[bucket_of (us)], 1, __ATOMIC_RELAXED);
}

uint64_t
hist_quantile (const struct hhc_hist *h, double q)
{
  uint64_t total = 0, seen = 0, want;

  for (unsigned i = 0; i < HIST_BUCKETS; i++)
    total += __atomic_load_n (&h->b[i], __ATOMIC_RELAXED);
  if (total == 0)
    return 0;
  want = (uint64_t)(q * total);
  if (want >= total)
    want = total - 1;
  for (unsigned i = 0; i < HIST_BUCKETS; i++)
    {
      seen += __atomic_load_n (&h->b[i], __ATOMIC_RELAXED);
      if (seen > want)
        return bucket_upper (i);
    }
  return bucket_upper (HIST_BUCKETS - 1);
}

void
hist_cumulative (const struct hhc_hist *h, unsigned n, uint64_t *edges,
                 uint64_t *counts)
{
  uint64_t seen = 0;

  for (unsigned b = 0, i = 0; b < HIST_BUCKETS && i < n; b++)
    {
      seen += __atomic_load_n (&h->b[b], __ATOMIC_RELAXED);
      if (b % 4 == 3)
        {
          edges[i] = bucket_upper (b);
          counts[i++] = seen;
        }
    }
}

int
stats_write_file (const char *path, const char *text)
{
  size_t n = strlen (path) + 16;
  HHC_CLEANUP_FREE char *tmp = malloc (n);
  size_t len = strlen (text);
  int fd, r = 0;

  if (tmp == NULL)
    return ENOMEM;
  snprintf (tmp, n, "%s.tmp", path);
  fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd == -1)
    return errno;
  if (write (fd, text, len) != (ssize_t)len)
    r = errno ? errno : EIO;
  if (close (fd) == -1 && r == 0)
    r = errno;
  if (r == 0 && rename (tmp, path) == -1)
    r = errno;
  if (r)
    unlink (tmp);
  return r;
}
