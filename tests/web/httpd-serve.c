/* httpd-serve: appliance/httpd.c serving a status document read from
 * a file, re-read on every request (tests/test-gateway-web.sh).
 *
 *   httpd-serve [-a ADDRESS] STATUS-FILE PORT-FILE
 *
 * Listens on ADDRESS (default 127.0.0.1) on a port the kernel picks,
 * writes that port to PORT-FILE (a temporary file renamed into place,
 * so a reader never sees half of it) once it serves, and runs until
 * SIGTERM or SIGINT, then exits 0.  While STATUS-FILE cannot be read
 * the status function fails (the server answers 503).  A server that
 * cannot start prints the reason and exits 1.
 */
#include <config.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "httpd.h"

/* The whole file, NUL-terminated and malloc'd, or NULL. */
static char *
read_file (void *opaque)
{
  const char *path = opaque;
  FILE *f = fopen (path, "r");
  char *buf = NULL, *n;
  size_t len = 0, cap = 0, got;

  if (f == NULL)
    return NULL;
  do
    {
      if (cap - len < 4096)
        {
          cap = cap ? 2 * cap : 8192;
          if ((n = realloc (buf, cap)) == NULL)
            {
              free (buf);
              fclose (f);
              return NULL;
            }
          buf = n;
        }
      got = fread (buf + len, 1, cap - len - 1, f);
      len += got;
    }
  while (got > 0);
  if (ferror (f))
    {
      free (buf);
      buf = NULL;
    }
  else
    buf[len] = '\0';
  fclose (f);
  return buf;
}

static int
write_port (const char *path, unsigned port)
{
  size_t n = strlen (path) + 5;
  char *tmp = malloc (n);
  FILE *f;
  int r = -1;

  if (tmp == NULL)
    return -1;
  snprintf (tmp, n, "%s.tmp", path);
  f = fopen (tmp, "w");
  if (f && fprintf (f, "%u\n", port) > 0 && fclose (f) == 0)
    r = rename (tmp, path);
  else if (f)
    fclose (f);
  if (r == -1)
    perror (path);
  free (tmp);
  return r;
}

int
main (int argc, char **argv)
{
  const char *address = "127.0.0.1";
  struct gw_httpd *h;
  char err[256];
  sigset_t set;
  int opt, sig;

  while ((opt = getopt (argc, argv, "a:")) != -1)
    if (opt == 'a')
      address = optarg;
    else
      return 2;
  if (argc - optind != 2)
    {
      fprintf (stderr, "usage: httpd-serve [-a ADDRESS] STATUS-FILE "
                       "PORT-FILE\n");
      return 2;
    }
  /* Blocked before the server's threads start, so they inherit it. */
  sigemptyset (&set);
  sigaddset (&set, SIGTERM);
  sigaddset (&set, SIGINT);
  sigprocmask (SIG_BLOCK, &set, NULL);
  signal (SIGPIPE, SIG_IGN);
  h = gw_httpd_start (address, 0, read_file, argv[optind], err, sizeof err);
  if (h == NULL)
    {
      fprintf (stderr, "httpd-serve: %s\n", err);
      return 1;
    }
  if (write_port (argv[optind + 1], gw_httpd_port (h)) == -1)
    {
      gw_httpd_stop (h);
      return 1;
    }
  sigwait (&set, &sig);
  gw_httpd_stop (h);
  return 0;
}
