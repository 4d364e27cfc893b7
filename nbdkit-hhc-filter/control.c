/* The filter's control socket (control=PATH): a Unix socket through
 * which the appliance (hhc-gateway, hhcctl) asks a running volume for
 * its statistics or to write back everything.
 *
 * Protocol: one request line per connection, answered, then the
 * server closes.
 *
 *   "stats\n"  -> the statistics JSON (as stats=FILE holds), then EOF
 *   "drain\n"  -> "dirty N\n" about five times a second while every
 *                 dirty block is written back and the backend flushed,
 *                 then "ok\n" or "error MESSAGE\n"
 *   other      -> "error unknown request\n"
 *
 * Threads: one accept thread; each connection gets a thread of its own
 * (a drain must not hold up a stats request).  control_stop closes the
 * listening socket, wakes the accept thread and waits until every
 * connection thread has ended, so the volume outlives them.  `lock`
 * protects `active` and a drain job's `done` and `r`; it is taken with
 * common/lock.h's checked scoped lock.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <nbdkit-filter.h>

#include "control.h"
#include "lock.h"

static struct hhc_volume *cvol;
static void *cbctx;
static char *sock_path;
static int listen_fd = -1;
static int wake[2] = { -1, -1 }; /* written to stop the accept thread */
static pthread_t accept_thread;
static bool accept_running;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cv = PTHREAD_COND_INITIALIZER; /* active fell to 0 */
static unsigned active; /* connection threads running: under lock */

struct drain_job {
  int r;
  bool done; /* under lock */
};

static void
send_all (int fd, const char *s, size_t n)
{
  while (n > 0)
    {
      ssize_t w = send (fd, s, n, MSG_NOSIGNAL);
      if (w <= 0)
        return; /* the client went away: nothing to tell */
      s += w;
      n -= w;
    }
}

static void
send_str (int fd, const char *s)
{
  send_all (fd, s, strlen (s));
}

/* Read the request line (at most 63 bytes, 5 s). */
static bool
read_request (int fd, char *buf, size_t len)
{
  size_t n = 0;
  struct pollfd p = { .fd = fd, .events = POLLIN };

  while (n < len - 1)
    {
      if (poll (&p, 1, 5000) != 1)
        return false;
      ssize_t r = recv (fd, buf + n, 1, 0);
      if (r <= 0)
        return false;
      if (buf[n] == '\n')
        break;
      n++;
    }
  buf[n] = '\0';
  return true;
}

static void *
drain_thread (void *p)
{
  struct drain_job *job = p;
  int r = hhc_drain (cvol, cbctx);

  HHC_SCOPED_LOCK (&lock);
  job->r = r;
  job->done = true;
  return NULL;
}

static void
do_drain (int fd)
{
  struct drain_job job = { 0 };
  pthread_t th;
  char line[64];
  bool done = false;
  int e;

  if ((e = pthread_create (&th, NULL, drain_thread, &job)) != 0)
    {
      snprintf (line, sizeof line, "error %s\n", strerror (e));
      send_str (fd, line);
      return;
    }
  nbdkit_debug ("hhc: control: drain");
  while (!done)
    {
      struct hhc_counts c;
      struct timespec ts = { 0, 200 * 1000 * 1000 };

      hhc_get_counts (cvol, &c);
      snprintf (line, sizeof line, "dirty %" PRIu64 "\n", c.dirty);
      send_str (fd, line);
      nanosleep (&ts, NULL); /* the progress rate, not a wait for state */
      HHC_SCOPED_LOCK (&lock);
      done = job.done;
    }
  pthread_join (th, NULL);
  if (job.r == 0)
    send_str (fd, "dirty 0\nok\n");
  else
    {
      snprintf (line, sizeof line, "error %s\n", strerror (job.r));
      send_str (fd, line);
    }
}

static void *
conn_thread (void *p)
{
  int fd = (int)(intptr_t)p;
  char req[64];

  if (read_request (fd, req, sizeof req))
    {
      if (strcmp (req, "stats") == 0)
        {
          char *json = hhc_stats_json (cvol);
          send_str (fd, json ? json : "{}");
          send_str (fd, "\n");
          free (json);
        }
      else if (strcmp (req, "drain") == 0)
        do_drain (fd);
      else
        send_str (fd, "error unknown request\n");
    }
  close (fd);
  HHC_SCOPED_LOCK (&lock);
  if (--active == 0)
    pthread_cond_broadcast (&idle_cv);
  return NULL;
}

static void *
accept_loop (void *unused)
{
  struct pollfd p[2] = { { .fd = listen_fd, .events = POLLIN },
                         { .fd = wake[0], .events = POLLIN } };

  (void)unused;
  for (;;)
    {
      if (poll (p, 2, -1) == -1)
        {
          if (errno == EINTR)
            continue;
          break;
        }
      if (p[1].revents)
        break;
      int fd = accept4 (listen_fd, NULL, NULL, SOCK_CLOEXEC);
      if (fd == -1)
        continue;
      pthread_t th;
      pthread_attr_t attr;
      pthread_attr_init (&attr);
      pthread_attr_setdetachstate (&attr, PTHREAD_CREATE_DETACHED);
      {
        HHC_SCOPED_LOCK (&lock);
        active++;
      }
      if (pthread_create (&th, &attr, conn_thread, (void *)(intptr_t)fd) != 0)
        {
          close (fd);
          HHC_SCOPED_LOCK (&lock);
          active--;
        }
      pthread_attr_destroy (&attr);
    }
  return NULL;
}

int
control_set_path (const char *path)
{
  struct sockaddr_un sun;

  if (strlen (path) >= sizeof sun.sun_path)
    {
      nbdkit_error ("hhc: control=%s: a socket path must be shorter than %zu "
                    "bytes",
                    path, sizeof sun.sun_path);
      return -1;
    }
  free (sock_path);
  sock_path = strdup (path);
  if (sock_path == NULL)
    {
      nbdkit_error ("hhc: strdup: %m");
      return -1;
    }
  return 0;
}

int
control_start (struct hhc_volume *vol, void *bctx)
{
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  int e;

  if (sock_path == NULL)
    return 0;
  cvol = vol;
  cbctx = bctx;
  strcpy (sun.sun_path, sock_path);
  listen_fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd == -1)
    {
      nbdkit_error ("hhc: control=%s: socket: %m", sock_path);
      return -1;
    }
  unlink (sock_path); /* a stale one of an earlier run */
  if (bind (listen_fd, (struct sockaddr *)&sun, sizeof sun) == -1
      || chmod (sock_path, 0600) == -1 || listen (listen_fd, 16) == -1)
    {
      nbdkit_error ("hhc: control=%s: %m", sock_path);
      control_stop ();
      return -1;
    }
  if (pipe2 (wake, O_CLOEXEC) == -1)
    {
      nbdkit_error ("hhc: control: pipe: %m");
      control_stop ();
      return -1;
    }
  if ((e = pthread_create (&accept_thread, NULL, accept_loop, NULL)) != 0)
    {
      nbdkit_error ("hhc: control: pthread_create: %s", strerror (e));
      control_stop ();
      return -1;
    }
  accept_running = true;
  return 0;
}

void
control_stop (void)
{
  if (accept_running)
    {
      ssize_t w = write (wake[1], "x", 1);
      (void)w;
      pthread_join (accept_thread, NULL);
      accept_running = false;
    }
  {
    HHC_SCOPED_LOCK (&lock);
    while (active > 0)
      hhc_cond_wait (&idle_cv, &lock);
  }
  if (listen_fd >= 0)
    {
      close (listen_fd);
      unlink (sock_path);
    }
  listen_fd = -1;
  for (int i = 0; i < 2; i++)
    if (wake[i] >= 0)
      close (wake[i]);
  wake[0] = wake[1] = -1;
}

void
control_free (void)
{
  free (sock_path);
  sock_path = NULL;
}
