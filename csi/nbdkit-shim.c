/* hhc-csi: nbdkit_error and nbdkit_debug for the S3 client it shares
 * with the cos plugin (nbdkit-shim.h).  An error is kept, not printed:
 * the backend that called the client puts it in the CSI error, which
 * the gRPC layer reports once.
 */
#include <config.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include <nbdkit-plugin.h>

#include "nbdkit-shim.h"

bool csi_shim_debug;

/* This thread's last error text. */
static __thread char last_error[512];

const char *
csi_shim_last_error (void)
{
  return last_error;
}

void
csi_shim_clear_error (void)
{
  last_error[0] = '\0';
}

void
nbdkit_error (const char *fs, ...)
{
  int saved = errno; /* callers set errno after; keep theirs */
  va_list ap;

  va_start (ap, fs);
  vsnprintf (last_error, sizeof last_error, fs, ap);
  va_end (ap);
  if (csi_shim_debug)
    fprintf (stderr, "hhc-csi: debug: error: %s\n", last_error);
  errno = saved;
}

void
nbdkit_debug (const char *fs, ...)
{
  int saved = errno;
  va_list ap;

  if (!csi_shim_debug)
    return;
  va_start (ap, fs);
  fputs ("hhc-csi: debug: ", stderr);
  vfprintf (stderr, fs, ap);
  fputc ('\n', stderr);
  va_end (ap);
  errno = saved;
}
