/* The client side of the hhc filter's control socket; the protocol is
 * described in nbdkit-hhc-filter/control.c.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "control-client.h"

static void
set_err (char *err, size_t errlen, const char *fmt, ...)
{
  va_list ap;

  if (err == NULL || errlen == 0)
    return;
  va_start (ap, fmt);
  vsnprintf (err, errlen, fmt, ap);
  va_end (ap);
}

/* Connect to sock and send the request line; the fd or -1. */
static int
request (const char *sock, const char *req, char *err, size_t errlen)
{
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  size_t len = strlen (req);
  int fd;

  if (strlen (sock) >= sizeof sun.sun_path)
    {
      set_err (err, errlen, "%s: socket path too long", sock);
      return -1;
    }
  strcpy (sun.sun_path, sock);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd == -1 || connect (fd, (struct sockaddr *)&sun, sizeof sun) == -1
      || send (fd, req, len, MSG_NOSIGNAL) != (ssize_t)len)
    {
      set_err (err, errlen, "%s: %s", sock, strerror (errno));
      if (fd != -1)
        close (fd);
      return -1;
    }
  return fd;
}

/* Append what fd sends within timeout_ms to *buf; bytes read, 0 at
 * EOF, -1 on error or time-out.
 */
static ssize_t
read_some (int fd, char **buf, size_t *len, size_t *cap, int timeout_ms)
{
  struct pollfd p = { .fd = fd, .events = POLLIN };
  ssize_t r;

  if (*len + 4097 > *cap)
    {
      size_t ncap = *cap ? 2 * *cap : 8192;
      char *n = realloc (*buf, ncap);
      if (n == NULL)
        return -1;
      *buf = n;
      *cap = ncap;
    }
  if (poll (&p, 1, timeout_ms) != 1)
    return errno = ETIMEDOUT, -1;
  r = recv (fd, *buf + *len, 4096, 0);
  if (r > 0)
    *len += r;
  (*buf)[*len] = '\0';
  return r;
}

char *
control_stats (const char *sock, char *err, size_t errlen)
{
  int fd = request (sock, "stats\n", err, errlen);
  char *buf = NULL;
  size_t len = 0, cap = 0;
  ssize_t r;

  if (fd == -1)
    return NULL;
  while ((r = read_some (fd, &buf, &len, &cap, 5000)) > 0)
    ;
  close (fd);
  if (r == -1 || len == 0)
    {
      set_err (err, errlen, "%s: %s", sock,
               r == -1 ? strerror (errno) : "no answer");
      free (buf);
      return NULL;
    }
  return buf;
}

int
control_drain (const char *sock, void (*progress) (void *, uint64_t),
               void *opaque, char *err, size_t errlen)
{
  int fd = request (sock, "drain\n", err, errlen);
  char *buf = NULL, *line;
  size_t len = 0, cap = 0, done = 0;
  int result = -1;

  if (fd == -1)
    return -1;
  set_err (err, errlen, "%s: the volume stopped before the drain ended", sock);
  /* No time limit: a drain takes as long as the backend needs. */
  while (read_some (fd, &buf, &len, &cap, -1) > 0)
    {
      char *nl;
      while ((nl = memchr (buf + done, '\n', len - done)) != NULL)
        {
          *nl = '\0';
          line = buf + done;
          done = nl + 1 - buf;
          if (strncmp (line, "dirty ", 6) == 0)
            {
              if (progress)
                progress (opaque, strtoull (line + 6, NULL, 10));
            }
          else if (strcmp (line, "ok") == 0)
            result = 0;
          else
            set_err (err, errlen, "%s",
                     strncmp (line, "error ", 6) == 0 ? line + 6 : line);
        }
    }
  close (fd);
  free (buf);
  return result;
}
