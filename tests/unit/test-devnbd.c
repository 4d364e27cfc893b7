/* NBD devices (gateway/dev-nbd.c) against a real nbdkit.
 *
 *   dead_server  the server dies: the next write fails, and so must
 *                every sync after it.  A sync on the dead handle asked
 *                nbd_can_flush, which fails there, and took the failure
 *                for "writes are durable when done": it returned 0, so
 *                a FLUSH was acknowledged with its data lost (the
 *                power-cut campaign, docs/open-failures.md).
 *
 * nbdkit must be on PATH; without it the test is skipped, except when
 * CI is set (then it is an error).
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "dev.h"

static pid_t server = -1;
static char dir[] = "/tmp/hhc-devnbd.XXXXXX";
static char sock[128], pidfile[128], uri[192];

static void
stop_server (void)
{
  if (server > 0)
    {
      kill (server, SIGKILL);
      waitpid (server, NULL, 0);
      server = -1;
    }
}

static void
cleanup (void)
{
  stop_server ();
  unlink (sock);
  unlink (pidfile);
  rmdir (dir);
}

/* nbdkit memory on a unix socket of our own; false if nbdkit is not
 * there.  Waits (bounded: 10 s) for its pid file, which nbdkit writes
 * once it accepts connections.
 */
static bool
start_server (void)
{
  struct stat st;

  if (mkdtemp (dir) == NULL)
    return false;
  snprintf (sock, sizeof sock, "%s/s.sock", dir);
  snprintf (pidfile, sizeof pidfile, "%s/s.pid", dir);
  snprintf (uri, sizeof uri, "nbd+unix:///?socket=%s", sock);
  server = fork ();
  if (server == 0)
    {
      int null = open ("/dev/null", O_RDWR);
      if (null >= 0)
        {
          dup2 (null, 0);
          dup2 (null, 1);
        }
      execlp ("nbdkit", "nbdkit", "-f", "-P", pidfile, "-U", sock, "memory",
              "1M", (char *)NULL);
      _exit (127);
    }
  if (server < 0)
    return false;
  for (int i = 0; i < 1000; i++)
    {
      int status;
      if (stat (pidfile, &st) == 0 && st.st_size > 0)
        return true;
      if (waitpid (server, &status, WNOHANG) == server)
        {
          server = -1;
          return false;
        }
      struct timespec ts = { 0, 10 * 1000000 };
      nanosleep (&ts, NULL);
    }
  return false;
}

static void
test_dead_server (void **state)
{
  struct hhc_dev *d = NULL;
  unsigned char buf[4096];

  memset (buf, 0x5a, sizeof buf);
  assert_int_equal (dev_open_nbd (uri, NULL, &d), 0);
  assert_int_equal (dev_pwrite (d, buf, sizeof buf, 0), 0);
  assert_int_equal (dev_sync (d), 0);
  stop_server ();
  /* The write finds the connection gone: the handle is dead now. */
  assert_int_not_equal (dev_pwrite (d, buf, sizeof buf, 4096), 0);
  assert_int_not_equal (dev_sync (d), 0);
  assert_int_not_equal (dev_sync (d), 0);
  dev_close (d);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_dead_server),
  };
  int r;

  signal (SIGPIPE, SIG_IGN);
  if (!start_server ())
    {
      cleanup ();
      if (getenv ("CI"))
        {
          fprintf (stderr, "test-devnbd: cannot start nbdkit (CI is set)\n");
          return 1;
        }
      fprintf (stderr, "test-devnbd: SKIP: cannot start nbdkit\n");
      return 77;
    }
  r = cmocka_run_group_tests (tests, NULL, NULL);
  cleanup ();
  return r;
}
