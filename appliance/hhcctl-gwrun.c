/* hhcctl volume's dealings with a running hhc-gateway and its
 * volumes directory: the volume files written atomically, SIGHUP to
 * the PID in RUN/hhc-gateway.pid, and the bounded waits until a volume
 * serves (listed in RUN/exports, its control socket RUN/NAME.ctl
 * answers a status request) or is gone (not listed, and its control
 * socket no longer answers: the gateway's reload waits for a removed
 * volume's nbdkit to exit before it rewrites the map).
 *
 * Two hhcctl at once take turns: each holds an exclusive flock on
 * DIR/.lock (hidden, so the gateway skips it) from reading the
 * directory to sending SIGHUP, so neither validates against a
 * directory the other is changing.  The waits are outside it.
 *
 * A tool may poll: the waits look every 50 ms.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "control-client.h"
#include "hhcctl-volume.h"

#define POLL_MS 50

bool
gwrun_listed (const char *run_dir, const char *name)
{
  HHC_CLEANUP_FREE char *path = NULL, *line = NULL;
  size_t cap = 0, n = strlen (name);
  bool found = false;
  FILE *f;

  if (asprintf (&path, "%s/exports", run_dir) == -1
      || (f = fopen (path, "r")) == NULL)
    return false;
  while (!found && getline (&line, &cap, f) != -1)
    found = strncmp (line, name, n) == 0 && line[n] == ' ';
  fclose (f);
  return found;
}

bool
gwrun_answers (const char *run_dir, const char *name)
{
  HHC_CLEANUP_FREE char *ctl = NULL, *st = NULL;

  if (asprintf (&ctl, "%s/%s.ctl", run_dir, name) == -1
      || access (ctl, F_OK) == -1)
    return false;
  st = control_stats (ctl, NULL, 0);
  return st != NULL;
}

/* SIGHUP to the gateway of RUN/hhc-gateway.pid, but only while the
 * gateway holds its lock on the file (gateway.c): a file left by a
 * gateway that was killed names a PID that may be another process's
 * now.
 */
int
gwrun_sighup (const char *run_dir, char *err, size_t errlen)
{
  HHC_CLEANUP_FREE char *path = NULL;
  char text[32] = "";
  int fd, pid = 0, r = 0;
  ssize_t n;

  if (asprintf (&path, "%s/hhc-gateway.pid", run_dir) == -1)
    return snprintf (err, errlen, "out of memory"), -1;
  fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd == -1)
    {
      int e = errno;
      snprintf (err, errlen, "%s: %m (is hhc-gateway running?)", path);
      return e == ENOENT ? -2 : -1;
    }
  if (flock (fd, LOCK_SH | LOCK_NB) == 0)
    r = -2; /* nobody holds it: stale */
  else if ((n = read (fd, text, sizeof text - 1)) <= 0
           || sscanf (text, "%d", &pid) != 1 || pid <= 1)
    r = -1;
  close (fd);
  if (r == -2)
    return snprintf (err, errlen,
                     "%s: stale (no hhc-gateway holds it): not running", path),
           -2;
  if (r == -1)
    return snprintf (err, errlen, "%s: no PID in it", path), -1;
  if (kill (pid, SIGHUP) == -1)
    {
      int e = errno;
      snprintf (err, errlen, "hhc-gateway (PID %d of %s): %m", pid, path);
      return e == ESRCH ? -2 : -1;
    }
  return 0;
}

static uint64_t
mono_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int
gwrun_wait (const char *run_dir, const char *name, bool served, unsigned wait_s)
{
  uint64_t end = mono_ms () + (uint64_t)wait_s * 1000;
  struct timespec pause = { 0, POLL_MS * 1000000L };

  for (;;)
    {
      bool listed = gwrun_listed (run_dir, name);
      if (served && listed && gwrun_answers (run_dir, name))
        return 0;
      if (!served && !listed && !gwrun_answers (run_dir, name))
        return 0;
      if (mono_ms () >= end)
        return -1;
      nanosleep (&pause, NULL);
    }
}

/* fsync the directory dir. */
static int
sync_dir (const char *dir)
{
  int fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int r = fd == -1 ? -1 : fsync (fd);

  if (fd != -1)
    close (fd);
  return r;
}

int
gwrun_write (const char *dir, const char *name, const char *text, size_t len,
             char *err, size_t errlen)
{
  HHC_CLEANUP_FREE char *tmp = NULL, *path = NULL;
  int fd, e;
  size_t off = 0;
  bool ok;

  if (asprintf (&tmp, "%s/.%s.json.XXXXXX", dir, name) == -1
      || asprintf (&path, "%s/%s.json", dir, name) == -1)
    return snprintf (err, errlen, "out of memory"), -1;
  if (mkdir (dir, 0750) == -1 && errno != EEXIST)
    return snprintf (err, errlen, "%s: %m", dir), -1;
  if ((fd = mkstemp (tmp)) == -1)
    return snprintf (err, errlen, "%s: %m", tmp), -1;
  errno = 0;
  while (off < len)
    {
      ssize_t n = write (fd, text + off, len - off);
      if (n == -1 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      off += n;
    }
  ok = off == len && fchmod (fd, 0640) == 0 && fsync (fd) == 0;
  e = ok ? 0 : errno ? errno : EIO;
  if (close (fd) == -1 && ok)
    ok = false, e = errno;
  if (ok && rename (tmp, path) == -1)
    ok = false, e = errno;
  if (!ok)
    {
      unlink (tmp);
      return snprintf (err, errlen, "%s: %s", tmp, strerror (e)), -1;
    }
  if (sync_dir (dir) == -1)
    return snprintf (err, errlen, "%s: %m", dir), -1;
  return 0;
}

int
gwrun_unlink (const char *dir, const char *name, char *err, size_t errlen)
{
  HHC_CLEANUP_FREE char *path = NULL;

  if (asprintf (&path, "%s/%s.json", dir, name) == -1)
    return snprintf (err, errlen, "out of memory"), -1;
  if (unlink (path) == -1 && errno != ENOENT)
    return snprintf (err, errlen, "%s: %m", path), -1;
  if (sync_dir (dir) == -1)
    return snprintf (err, errlen, "%s: %m", dir), -1;
  return 0;
}

int
gwrun_lock (const char *dir, char *err, size_t errlen)
{
  HHC_CLEANUP_FREE char *path = NULL;
  int fd;

  if (asprintf (&path, "%s/.lock", dir) == -1)
    return snprintf (err, errlen, "out of memory"), -1;
  if (mkdir (dir, 0750) == -1 && errno != EEXIST)
    return snprintf (err, errlen, "%s: %m", dir), -1;
  fd = open (path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd == -1)
    return snprintf (err, errlen, "%s: %m", path), -1;
  while (flock (fd, LOCK_EX) == -1)
    if (errno != EINTR)
      {
        snprintf (err, errlen, "%s: flock: %m", path);
        close (fd);
        return -1;
      }
  return fd;
}
