/* hhc-gateway's supervision of its children (gateway-int.h): every
 * volume's nbdkit and the front, started, reaped, started again after
 * a back-off, and stopped.  All but stop_all run in the main thread
 * with `lock` held.
 */
#include <config.h>

#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/param.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "control-client.h"
#include "gateway-int.h"

static pid_t front_pid;
static unsigned front_backoff_ms;
static uint64_t front_restart_at_ms, front_started_ms;

/* Whether a Unix socket accepts a connection now. */
static bool
socket_serves (const char *path)
{
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  int fd;
  bool ok;

  if (strlen (path) >= sizeof sun.sun_path)
    return false;
  strcpy (sun.sun_path, path);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd == -1)
    return false;
  ok = connect (fd, (struct sockaddr *)&sun, sizeof sun) == 0;
  close (fd);
  return ok;
}

/* Whether the front accepts a connection now: its Unix socket, or a
 * TCP connect to listen.address:port (0.0.0.0 and :: reach the local
 * host).
 */
static bool
front_accepts (void)
{
  struct addrinfo hints
      = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
  struct addrinfo *res;
  char port[8];
  bool ok = false;

  if (cfg.listen_socket)
    return socket_serves (cfg.listen_socket);
  snprintf (port, sizeof port, "%u", cfg.listen_port);
  if (getaddrinfo (cfg.listen_address, port, &hints, &res) != 0)
    return false;
  for (struct addrinfo *a = res; a && !ok; a = a->ai_next)
    {
      int fd = socket (a->ai_family, a->ai_socktype | SOCK_CLOEXEC,
                       a->ai_protocol);
      if (fd == -1)
        continue;
      ok = connect (fd, a->ai_addr, a->ai_addrlen) == 0;
      close (fd);
    }
  freeaddrinfo (res);
  return ok;
}

/* ------------------------------------------------------------------ */
/* Volumes. */

void
start_volume (struct vol *vl)
{
  vl->pid = 0;
  {
    /* A killed nbdkit leaves its socket behind: bind would fail. */
    HHC_CLEANUP_FREE char *sock = run_path (vl->v->name, ".sock");
    unlink (sock);
  }
  vl->pid = spawn_volume (vl->v);
  vl->started_ms = now_ms ();
  if (vl->pid <= 0)
    {
      vl->pid = 0;
      vl->state = V_FAILED;
      vl->backoff_ms = vl->backoff_ms ? vl->backoff_ms : cfg.restart_min_ms;
      vl->restart_at_ms = vl->started_ms + vl->backoff_ms;
      return;
    }
  vl->state = V_STARTING;
  msg ("volume %s: started nbdkit (pid %d)", vl->v->name, (int)vl->pid);
}

static void
start_front (void)
{
  if (cfg.listen_socket)
    unlink (cfg.listen_socket);
  front_pid = spawn_front ();
  front_started_ms = now_ms ();
  if (front_pid > 0 && cfg.listen_socket)
    msg ("serving on unix:%s (pid %d)", cfg.listen_socket, (int)front_pid);
  else if (front_pid > 0)
    msg ("serving on %s:%u (pid %d)", cfg.listen_address, cfg.listen_port,
         (int)front_pid);
  else
    front_pid = 0;
}

void
write_map (void)
{
  HHC_CLEANUP_FREE char *map = run_path ("exports", "");
  HHC_CLEANUP_FREE char *tmp = run_path ("exports", ".tmp");
  FILE *f = fopen (tmp, "w");

  if (f == NULL)
    {
      msg ("%s: %m", tmp);
      return;
    }
  for (size_t i = 0; i < nvols; i++)
    if (!vols[i].removed)
      {
        HHC_CLEANUP_FREE char *sock = run_path (vols[i].v->name, ".sock");
        fprintf (f, "%s %s\n", vols[i].v->name, sock);
      }
  if (fclose (f) == EOF || rename (tmp, map) == -1)
    msg ("%s: %m", map);
}

void
reaped (pid_t pid, int st)
{
  uint64_t now = now_ms ();

  if (pid == front_pid)
    {
      front_pid = 0;
      front_serving = false;
      if (stopping)
        return;
      front_backoff_ms = now - front_started_ms > cfg.restart_max_ms
                             ? cfg.restart_min_ms
                             : MIN (2 * front_backoff_ms + cfg.restart_min_ms,
                                    cfg.restart_max_ms);
      front_restart_at_ms = now + front_backoff_ms;
      msg ("front nbdkit (pid %d) died (status %d): restarting in %u ms",
           (int)pid, st, front_backoff_ms);
      return;
    }
  for (size_t i = 0; i < nvols; i++)
    {
      struct vol *vl = &vols[i];
      if (vl->pid != pid)
        continue;
      vl->pid = 0;
      if (stopping || vl->removed || vl->state == V_STOPPING)
        {
          vl->state = V_STOPPING;
          return;
        }
      bool served = vl->state == V_RUNNING;
      if (now - vl->started_ms > cfg.restart_max_ms)
        vl->backoff_ms = cfg.restart_min_ms;
      else
        vl->backoff_ms = vl->backoff_ms
                             ? MIN (2 * vl->backoff_ms, cfg.restart_max_ms)
                             : cfg.restart_min_ms;
      vl->state = served ? V_RESTARTING : V_FAILED;
      vl->restart_at_ms = now + vl->backoff_ms;
      if (WIFSIGNALED (st))
        msg ("volume %s: nbdkit (pid %d) killed by signal %d: restarting "
             "in %u ms",
             vl->v->name, (int)pid, WTERMSIG (st), vl->backoff_ms);
      else
        msg ("volume %s: nbdkit (pid %d) exited with status %d: "
             "restarting in %u ms",
             vl->v->name, (int)pid, WEXITSTATUS (st), vl->backoff_ms);
      return;
    }
}

/* The front's part of tick: started when due, noticed serving. */
static int
tick_front (uint64_t now, int wait)
{
  if (front_pid == 0 && !stopping)
    {
      if (now >= front_restart_at_ms)
        start_front ();
      else
        wait = MIN (wait, (int)(front_restart_at_ms - now));
    }
  if (front_pid > 0 && !front_serving)
    {
      if (front_accepts ())
        front_serving = true;
      else
        wait = MIN (wait, 100);
    }
  return wait;
}

int
tick (void)
{
  uint64_t now = now_ms ();
  int wait = 1000;

  for (size_t i = 0; i < nvols; i++)
    {
      struct vol *vl = &vols[i];
      if (vl->removed)
        continue;
      if ((vl->state == V_RESTARTING || vl->state == V_FAILED) && vl->pid == 0)
        {
          if (now >= vl->restart_at_ms)
            {
              vl->restarts++;
              start_volume (vl);
            }
          else
            wait = MIN (wait, (int)(vl->restart_at_ms - now));
        }
      if (vl->state == V_STARTING)
        {
          HHC_CLEANUP_FREE char *sock = run_path (vl->v->name, ".sock");
          if (socket_serves (sock))
            {
              vl->state = V_RUNNING;
              msg ("volume %s: serving", vl->v->name);
            }
          else
            wait = MIN (wait, 100);
        }
    }
  return tick_front (now, wait);
}

int
start_all (void)
{
  vols = calloc (cfg.nvolumes ? cfg.nvolumes : 1, sizeof *vols);
  if (vols == NULL)
    {
      msg ("out of memory");
      return -1;
    }
  nvols = cfg.nvolumes;
  for (size_t i = 0; i < nvols; i++)
    {
      vols[i].v = &cfg.volumes[i];
      start_volume (&vols[i]);
    }
  write_map ();
  start_front ();
  return 0;
}

/* ------------------------------------------------------------------ */
/* Stopping. */

/* A drain may outlast WatchdogSec: its progress lines (several a
 * second) ping the watchdog.
 */
static void
drain_progress (void *opaque, uint64_t dirty)
{
  (void)opaque;
  (void)dirty;
  notify_watchdog ();
}

void
drain_volume (const struct vol *vl)
{
  HHC_CLEANUP_FREE char *ctl = run_path (vl->v->name, ".ctl");
  char err[256];

  msg ("volume %s: draining", vl->v->name);
  if (control_drain (ctl, drain_progress, NULL, err, sizeof err) == 0)
    msg ("volume %s: drained", vl->v->name);
  else
    msg ("volume %s: drain: %s", vl->v->name, err);
}

void
stop_volume (struct vol *vl)
{
  if (vl->pid > 0)
    {
      kill (vl->pid, SIGTERM);
      vl->state = V_STOPPING;
    }
}

/* Wait for every child to exit (lock held; dropped while waiting). */
static void
wait_children (void)
{
  for (;;)
    {
      int st;
      pid_t pid = waitpid (-1, &st, 0);
      if (pid == -1)
        break; /* ECHILD: none left */
      reaped (pid, st);
    }
}

void
stop_all (void)
{
  stopping = true;
  for (size_t i = 0; i < nvols; i++)
    if (vols[i].v->drain_on_stop && vols[i].state == V_RUNNING)
      drain_volume (&vols[i]);
  pthread_mutex_lock (&lock);
  if (front_pid > 0)
    kill (front_pid, SIGTERM);
  for (size_t i = 0; i < nvols; i++)
    stop_volume (&vols[i]);
  pthread_mutex_unlock (&lock);
  wait_children ();
  msg ("stopped");
}
