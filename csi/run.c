/* hhc-csi: run a helper program (mkfs, mount, losetup, nbd-client,
 * hhcctl).  Always argv through execvp, never a shell, so no path or
 * name is ever parsed as shell text.
 *
 * run_prog feeds stdin from a buffer and reads stdout and stderr
 * through pipes in one poll loop; output past RUN_OUT_MAX is read and
 * dropped so the child never blocks on a full pipe.  The deadline is
 * a CLOCK_MONOTONIC time: at it the child is killed by its PID
 * (SIGKILL) and reaped.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "node.h"

/* One output stream being captured. */
struct cap {
  int fd;
  char *buf;
  size_t len;
};

static int64_t
now_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
close_fd (int *fd)
{
  if (*fd >= 0)
    close (*fd);
  *fd = -1;
}

/* In the child: wire the pipes to 0, 1, 2 and exec. */
static void __attribute__ ((noreturn))
child_exec (const char *const *argv, int in, int out, int err)
{
  if (in < 0)
    in = open ("/dev/null", O_RDONLY);
  if (dup2 (in, 0) < 0 || dup2 (out, 1) < 0 || dup2 (err, 2) < 0)
    _exit (127);
  signal (SIGPIPE, SIG_DFL);
  execvp (argv[0], (char *const *)argv);
  dprintf (2, "%s: %s\n", argv[0], strerror (errno));
  _exit (127);
}

/* Read what fd has into c (bounded); close it at end of file. */
static void
cap_read (struct cap *c)
{
  char tmp[1024];
  ssize_t n = read (c->fd, tmp, sizeof tmp);
  if (n <= 0)
    {
      if (n == 0 || (errno != EINTR && errno != EAGAIN))
        close_fd (&c->fd);
      return;
    }
  size_t room = RUN_OUT_MAX - 1 - c->len;
  size_t k = (size_t)n < room ? (size_t)n : room;
  memcpy (c->buf + c->len, tmp, k);
  c->len += k;
  c->buf[c->len] = '\0';
}

/* Write what is left of the input; close stdin when done or refused. */
static void
feed (int *fd, const char **in, size_t *len)
{
  ssize_t n = write (*fd, *in, *len);
  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return;
  if (n < 0)
    *len = 0;
  else
    {
      *in += n;
      *len -= n;
    }
  if (*len == 0)
    close_fd (fd);
}

/* The poll loop: until both outputs close or the deadline passes. */
static bool
pump (int infd, const char *in, size_t len, struct cap *c, int64_t deadline)
{
  while (c[0].fd >= 0 || c[1].fd >= 0)
    {
      struct pollfd p[3] = { { c[0].fd, POLLIN, 0 },
                             { c[1].fd, POLLIN, 0 },
                             { infd, POLLOUT, 0 } };
      int64_t left = deadline - now_ms ();
      if (left <= 0)
        {
          close_fd (&infd);
          return false;
        }
      if (poll (p, 3, left > 1000 ? 1000 : (int)left) < 0 && errno != EINTR)
        break;
      for (int i = 0; i < 2; i++)
        if (p[i].revents)
          cap_read (&c[i]);
      if (infd >= 0 && p[2].revents)
        feed (&infd, &in, &len);
    }
  close_fd (&infd);
  return true;
}

/* Wait for pid until deadline (ms); SIGKILL it after. */
static int
reap (pid_t pid, int64_t deadline, bool *killed)
{
  int st;
  for (;;)
    {
      pid_t w = waitpid (pid, &st, WNOHANG);
      if (w == pid)
        break;
      if (w < 0 && errno != EINTR)
        return -1;
      if (now_ms () >= deadline && !*killed)
        {
          kill (pid, SIGKILL);
          *killed = true;
        }
      struct timespec ts = { 0, 10 * 1000 * 1000 };
      if (w == 0)
        nanosleep (&ts, NULL);
    }
  return WIFEXITED (st) ? WEXITSTATUS (st) : -1;
}

int
run_prog (const char *const *argv, const char *in, size_t len,
          unsigned timeout_s, struct run_res *r)
{
  int pin[2] = { -1, -1 }, pout[2] = { -1, -1 }, perr[2] = { -1, -1 };
  memset (r, 0, sizeof *r);
  if ((in && pipe2 (pin, O_CLOEXEC) < 0) || pipe2 (pout, O_CLOEXEC) < 0
      || pipe2 (perr, O_CLOEXEC) < 0)
    goto fail;
  pid_t pid = fork ();
  if (pid < 0)
    goto fail;
  if (pid == 0)
    child_exec (argv, pin[0], pout[1], perr[1]);
  close_fd (&pin[0]);
  close_fd (&pout[1]);
  close_fd (&perr[1]);
  if (pin[1] >= 0)
    fcntl (pin[1], F_SETFL, O_NONBLOCK);
  struct cap c[2] = { { pout[0], r->out, 0 }, { perr[0], r->err, 0 } };
  int64_t deadline = now_ms () + (int64_t)timeout_s * 1000;
  r->timed_out = !pump (pin[1], in, len, c, deadline);
  if (r->timed_out)
    deadline = now_ms ();
  close_fd (&c[0].fd);
  close_fd (&c[1].fd);
  bool killed = false;
  r->status = reap (pid, deadline, &killed);
  r->timed_out |= killed;
  return 0;

fail:;
  int saved = errno;
  int *fds[] = { &pin[0], &pin[1], &pout[0], &pout[1], &perr[0], &perr[1] };
  for (size_t i = 0; i < 6; i++)
    close_fd (fds[i]);
  errno = saved;
  return -1;
}

const char *
run_line (struct run_res *r)
{
  char *s = r->err[0] ? r->err : r->out;
  s[strcspn (s, "\n")] = '\0';
  if (!*s)
    {
      if (r->timed_out)
        snprintf (r->err, sizeof r->err, "timed out");
      else
        snprintf (r->err, sizeof r->err, "exit status %d", r->status);
      s = r->err;
    }
  return s;
}

pid_t
run_spawn (const char *const *argv, const char *logfile)
{
  int log = open (logfile, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log < 0)
    return -1;
  pid_t pid = fork ();
  if (pid == 0)
    {
      setsid ();
      child_exec (argv, -1, log, log);
    }
  int saved = errno;
  close (log);
  errno = saved;
  return pid;
}

bool
run_ended (pid_t pid)
{
  int st;
  pid_t w = waitpid (pid, &st, WNOHANG);
  if (w == pid)
    return true;
  if (w < 0 && errno == ECHILD) /* not ours (hhc-csi restarted) */
    return kill (pid, 0) < 0 && errno == ESRCH;
  return false;
}
