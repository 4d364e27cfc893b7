/* hhc-gateway's shared state and the helpers every part of it uses
 * (gateway-int.h): the configuration, the volumes and their lock,
 * messages, the clock, paths in the run directory.  It calls nothing
 * of the rest, so the other gateway-*.c files form no loop through it.
 */
#include <config.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gateway-int.h"

struct gw_config cfg;
const char *cfg_path;
uint64_t start_ms;
pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
struct vol *vols;
size_t nvols;
bool stopping;
bool front_serving;

const char *
vstate_to_string (enum vstate s)
{
  switch (s)
    {
    case V_STARTING:
      return "starting";
    case V_RUNNING:
      return "running";
    case V_RESTARTING:
      return "restarting";
    case V_FAILED:
      return "failed";
    case V_STOPPING:
      return "stopped";
    }
  return "unknown";
}

void
msg (const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  fputs ("hhc-gateway: ", stderr);
  vfprintf (stderr, fmt, ap);
  fputc ('\n', stderr);
  va_end (ap);
}

uint64_t
now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------ */
/* Paths in the run directory. */

char *
run_path (const char *name, const char *suffix)
{
  char *p;

  if (asprintf (&p, "%s/%s%s", cfg.run_dir, name, suffix) == -1)
    {
      msg ("out of memory");
      exit (EXIT_FAILURE);
    }
  return p;
}
