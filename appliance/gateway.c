/* hhc-gateway: the appliance daemon.
 *
 *   hhc-gateway -c /etc/hhc/gateway.json [--check]
 *
 * Reads and validates the config (appliance/config.c), then runs one
 * nbdkit per volume (the hhc filter over the volume's backend plugin,
 * on the Unix socket RUN/NAME.sock, control socket RUN/NAME.ctl) and
 * one front nbdkit (nbdkit-hhcroute-plugin, appliance/route.c) on the
 * configured address, which serves every volume under its export name
 * through the map file RUN/exports.  It supervises them all:
 *
 *   a child that dies     is started again after a back-off (doubling
 *                         from restart.min_ms to restart.max_ms; reset
 *                         once a run lasted longer than max_ms); the
 *                         filter recovers on start;
 *   SIGTERM, SIGINT       drain the volumes that ask for it
 *                         (drain_on_stop), stop every child with
 *                         SIGTERM (a clean close of each cache), exit;
 *   SIGHUP                read the config again: volumes added are
 *                         started, removed ones stopped, changed ones
 *                         restarted, the rest left running; an invalid
 *                         config changes nothing.
 *
 * Secrets (S3 keys, CHAP password) are read from their files at each
 * start and passed to nbdkit through pipes (key=-FD), never on a
 * command line.  Status and metrics go out over HTTP (appliance/
 * httpd.c) when configured.
 *
 * Threads: the main thread does all process management (signals come
 * through a signalfd); the HTTP server's threads only read a snapshot
 * of the volumes taken under `lock`, which protects `vols`, `nvols`
 * and every struct vol's fields.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "common.h"
#include "gwconfig.h"
#include "control-client.h"
#ifdef HAVE_LIBMICROHTTPD
#include "httpd.h"
#endif

enum vstate {
  V_STARTING,   /* spawned, not yet serving */
  V_RUNNING,    /* its socket accepts connections */
  V_RESTARTING, /* died; started again at restart_at */
  V_FAILED,     /* died before it served; started again at restart_at */
  V_STOPPING,   /* SIGTERM sent */
};

static const char *
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

struct vol {
  const struct gw_volume *v; /* in cfg */
  pid_t pid;                 /* 0 when not running */
  enum vstate state;
  unsigned restarts;
  unsigned backoff_ms;
  uint64_t started_ms, restart_at_ms;
  bool removed; /* by a reload: not started again */
};

static struct gw_config cfg;
static const char *cfg_path;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct vol *vols;
static size_t nvols;
static pid_t front_pid;
static unsigned front_backoff_ms;
static uint64_t front_restart_at_ms, front_started_ms;
static uint64_t start_ms;
static bool stopping;

static void
msg (const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  fputs ("hhc-gateway: ", stderr);
  vfprintf (stderr, fmt, ap);
  fputc ('\n', stderr);
  va_end (ap);
}

static uint64_t
now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------ */
/* Paths in the run directory. */

static char *
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

/* ------------------------------------------------------------------ */
/* nbdkit command lines. */

struct argv {
  char **a;
  size_t n, cap;
  int fds[4]; /* pipes' read ends that the child inherits */
  unsigned nfds;
};

static void
arg (struct argv *v, const char *fmt, ...)
{
  va_list ap;
  char *s;

  if (v->n + 2 > v->cap)
    {
      v->cap = v->cap ? 2 * v->cap : 32;
      v->a = realloc (v->a, v->cap * sizeof *v->a);
      if (v->a == NULL)
        {
          msg ("out of memory");
          exit (EXIT_FAILURE);
        }
    }
  va_start (ap, fmt);
  if (vasprintf (&s, fmt, ap) == -1)
    {
      msg ("out of memory");
      exit (EXIT_FAILURE);
    }
  va_end (ap);
  v->a[v->n++] = s;
  v->a[v->n] = NULL;
}

static void
argv_free (struct argv *v)
{
  for (size_t i = 0; i < v->n; i++)
    free (v->a[i]);
  free (v->a);
  for (unsigned i = 0; i < v->nfds; i++)
    close (v->fds[i]);
  memset (v, 0, sizeof *v);
}

/* Pass secret to the child as key=-FD (a pipe holding it). */
static int
arg_secret (struct argv *v, const char *key, const char *secret)
{
  int p[2];
  size_t len = strlen (secret);

  if (v->nfds == 4 || pipe (p) == -1)
    return -1;
  if (write (p[1], secret, len) != (ssize_t)len)
    {
      close (p[0]);
      close (p[1]);
      return -1;
    }
  close (p[1]);
  v->fds[v->nfds++] = p[0];
  arg (v, "%s=-%d", key, p[0]);
  return 0;
}

/* Read the first two lines of a secrets file (access key and secret,
 * or CHAP user and password).  Never logs the contents.
 */
static int
read_two_lines (const char *file, char **l1, char **l2)
{
  FILE *f = fopen (file, "r");
  size_t c1 = 0, c2 = 0;

  *l1 = *l2 = NULL;
  if (f == NULL)
    {
      msg ("%s: %m", file);
      return -1;
    }
  if (getline (l1, &c1, f) == -1 || getline (l2, &c2, f) == -1)
    {
      msg ("%s: expected two lines (key id or user, then the secret)", file);
      fclose (f);
      free (*l1);
      free (*l2);
      return -1;
    }
  fclose (f);
  (*l1)[strcspn (*l1, "\r\n")] = '\0';
  (*l2)[strcspn (*l2, "\r\n")] = '\0';
  return 0;
}

static void
arg_plugin (struct argv *v, const char *name)
{
  if (cfg.plugin_dir)
    arg (v, "%s/nbdkit-%s-plugin.so", cfg.plugin_dir, name);
  else
    arg (v, "%s", name);
}

static int
backend_args (struct argv *v, const struct gw_volume *vo)
{
  char *a = NULL, *b = NULL;
  int r = 0;

  switch (vo->type)
    {
    case GW_BACKEND_FILE:
      arg (v, "file");
      arg (v, "file=%s", vo->path);
      break;
    case GW_BACKEND_NBD:
      arg (v, "nbd");
      arg (v, "uri=%s", vo->uri);
      break;
    case GW_BACKEND_COS:
      arg_plugin (v, "cos");
      arg (v, "endpoint=%s", vo->endpoint);
      arg (v, "bucket=%s", vo->bucket);
      if (vo->prefix)
        arg (v, "prefix=%s", vo->prefix);
      if (vo->region)
        arg (v, "region=%s", vo->region);
      if (vo->size)
        {
          arg (v, "size=%s", vo->size);
          arg (v, "create=true");
        }
      if (!vo->tls_verify)
        arg (v, "tls-verify=false");
      if (vo->ca_file)
        arg (v, "ca-file=%s", vo->ca_file);
      if (read_two_lines (vo->credentials, &a, &b) == -1
          || arg_secret (v, "access-key", a) == -1
          || arg_secret (v, "secret-key", b) == -1)
        r = -1;
      break;
    case GW_BACKEND_ISCSI:
      arg_plugin (v, "hhciscsi");
      arg (v, "url=%s", vo->url);
      if (vo->initiator)
        arg (v, "initiator=%s", vo->initiator);
      if (vo->sessions)
        arg (v, "sessions=%u", vo->sessions);
      if (vo->timeout >= 0)
        arg (v, "timeout=%d", vo->timeout);
      if (vo->chap_file)
        {
          if (read_two_lines (vo->chap_file, &a, &b) == -1)
            r = -1;
          else
            {
              arg (v, "user=%s", a);
              r = arg_secret (v, "password", b);
            }
        }
      break;
    }
  if (a)
    explicit_bzero (a, strlen (a));
  if (b)
    explicit_bzero (b, strlen (b));
  free (a);
  free (b);
  return r;
}

static int
volume_args (struct argv *v, const struct gw_volume *vo)
{
  HHC_CLEANUP_FREE char *sock = run_path (vo->name, ".sock");
  HHC_CLEANUP_FREE char *ctl = run_path (vo->name, ".ctl");

  arg (v, "%s", cfg.nbdkit);
  arg (v, "-f");
  arg (v, "--exit-with-parent");
  arg (v, "-U");
  arg (v, "%s", sock);
  arg (v, "--filter=%s", cfg.filter);
  if (backend_args (v, vo) == -1)
    return -1;
  arg (v, "cache=%s", vo->cache);
  if (vo->cache_size)
    arg (v, "cache-size=%s", vo->cache_size);
  for (unsigned i = 0; i < vo->nlogs; i++)
    arg (v, "log=%s", vo->logs[i]);
  if (vo->log_size)
    arg (v, "log-size=%s", vo->log_size);
  if (vo->mode)
    arg (v, "mode=%s", vo->mode);
  if (vo->backend_id)
    arg (v, "backend-id=%s", vo->backend_id);
  for (unsigned i = 0; i < vo->ntuning; i++)
    arg (v, "%s=%s", vo->tuning[i].key, vo->tuning[i].value);
  arg (v, "control=%s", ctl);
  return 0;
}

static void
front_args (struct argv *v)
{
  HHC_CLEANUP_FREE char *map = run_path ("exports", "");

  arg (v, "%s", cfg.nbdkit);
  arg (v, "-f");
  arg (v, "--exit-with-parent");
  if (cfg.listen_socket)
    {
      arg (v, "-U");
      arg (v, "%s", cfg.listen_socket);
    }
  else
    {
      arg (v, "-i");
      arg (v, "%s", cfg.listen_address);
      arg (v, "-p");
      arg (v, "%u", cfg.listen_port);
    }
  if (cfg.tls_certificates)
    {
      arg (v, "--tls=require");
      arg (v, "--tls-certificates=%s", cfg.tls_certificates);
    }
  else if (cfg.tls_psk_file)
    {
      arg (v, "--tls=require");
      arg (v, "--tls-psk=%s", cfg.tls_psk_file);
    }
  arg_plugin (v, "hhcroute");
  arg (v, "map=%s", map);
}

/* Fork and exec v; the child keeps only v's pipes of its own. */
static pid_t
spawn (struct argv *v, const char *what)
{
  sigset_t none;
  pid_t pid = fork ();

  if (pid == -1)
    {
      msg ("%s: fork: %m", what);
      return -1;
    }
  if (pid == 0)
    {
      sigemptyset (&none);
      sigprocmask (SIG_SETMASK, &none, NULL);
      execvp (v->a[0], v->a);
      fprintf (stderr, "hhc-gateway: %s: %s: %m\n", what, v->a[0]);
      _exit (127);
    }
  return pid;
}

/* ------------------------------------------------------------------ */
/* Volumes. */

/* Lock held. */
static void
start_volume (struct vol *vl)
{
  struct argv v = { 0 };

  vl->pid = 0;
  {
    /* A killed nbdkit leaves its socket behind: bind would fail. */
    HHC_CLEANUP_FREE char *sock = run_path (vl->v->name, ".sock");
    unlink (sock);
  }
  if (volume_args (&v, vl->v) == 0)
    vl->pid = spawn (&v, vl->v->name);
  argv_free (&v);
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
  struct argv v = { 0 };

  front_args (&v);
  if (cfg.listen_socket)
    unlink (cfg.listen_socket);
  front_pid = spawn (&v, "front");
  argv_free (&v);
  front_started_ms = now_ms ();
  if (front_pid > 0 && cfg.listen_socket)
    msg ("serving on unix:%s (pid %d)", cfg.listen_socket, (int)front_pid);
  else if (front_pid > 0)
    msg ("serving on %s:%u (pid %d)", cfg.listen_address, cfg.listen_port,
         (int)front_pid);
  else
    front_pid = 0;
}

/* Rewrite RUN/exports (lock held). */
static void
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

/* Child pid exited with status st (lock held). */
static void
reaped (pid_t pid, int st)
{
  uint64_t now = now_ms ();

  if (pid == front_pid)
    {
      front_pid = 0;
      if (stopping)
        return;
      front_backoff_ms
          = now - front_started_ms > cfg.restart_max_ms
                ? cfg.restart_min_ms
                : HHC_MIN (2 * front_backoff_ms + cfg.restart_min_ms,
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
                             ? HHC_MIN (2 * vl->backoff_ms, cfg.restart_max_ms)
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

/* Start what is due, notice what serves now; the time until the next
 * thing is due, in ms (lock held).
 */
static int
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
            wait = HHC_MIN (wait, (int)(vl->restart_at_ms - now));
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
            wait = HHC_MIN (wait, 100);
        }
    }
  if (front_pid == 0 && !stopping)
    {
      if (now >= front_restart_at_ms)
        start_front ();
      else
        wait = HHC_MIN (wait, (int)(front_restart_at_ms - now));
    }
  return wait;
}

/* ------------------------------------------------------------------ */
/* Stopping. */

static void
drain_volume (const struct vol *vl)
{
  HHC_CLEANUP_FREE char *ctl = run_path (vl->v->name, ".ctl");
  char err[256];

  msg ("volume %s: draining", vl->v->name);
  if (control_drain (ctl, NULL, NULL, err, sizeof err) == 0)
    msg ("volume %s: drained", vl->v->name);
  else
    msg ("volume %s: drain: %s", vl->v->name, err);
}

/* SIGTERM to vl (lock held). */
static void
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

static void
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

/* ------------------------------------------------------------------ */
/* Reload. */

/* Swap one of the settings that only a restart changes back into cfg
 * (the running value stays; the new one is freed with the old config).
 */
static void
keep (char **running, char **next, const char *what)
{
  char *t;

  if ((*running == NULL) != (*next == NULL)
      || (*running && strcmp (*running, *next) != 0))
    msg ("reload: %s changes only when hhc-gateway is restarted", what);
  t = *running;
  *running = *next;
  *next = t;
}

/* Stop the volumes that the new config drops or changes, wait for them
 * (a changed volume's new nbdkit needs its devices), start the new
 * ones.  Lock held.
 */
static void
apply (struct gw_config *next)
{
  size_t nn = 0;
  struct vol *nv = calloc (next->nvolumes ? next->nvolumes : 1, sizeof *nv);
  bool *fresh = calloc (next->nvolumes ? next->nvolumes : 1, sizeof *fresh);

  if (nv == NULL || fresh == NULL)
    {
      msg ("reload: out of memory");
      exit (EXIT_FAILURE);
    }
  for (size_t i = 0; i < next->nvolumes; i++, nn++)
    {
      const struct gw_volume *v = &next->volumes[i];
      struct vol *old = NULL;
      for (size_t j = 0; j < nvols; j++)
        if (!vols[j].removed && strcmp (vols[j].v->name, v->name) == 0)
          old = &vols[j];
      nv[nn].v = v;
      fresh[nn] = true;
      if (old && gw_volume_equal (old->v, v))
        {
          nv[nn] = *old; /* left running */
          nv[nn].v = v;
          fresh[nn] = false;
        }
      else
        msg ("reload: volume %s %s", v->name,
             old ? "changed: restarting it" : "added");
      if (old)
        old->removed = true;
      if (old && fresh[nn])
        stop_volume (old);
      else if (old)
        old->pid = 0; /* moved to nv */
    }
  for (size_t j = 0; j < nvols; j++)
    {
      if (!vols[j].removed)
        {
          msg ("reload: volume %s removed", vols[j].v->name);
          stop_volume (&vols[j]);
        }
      while (vols[j].pid > 0)
        {
          int st;
          pid_t pid = waitpid (vols[j].pid, &st, 0);
          if (pid == -1 && errno != EINTR)
            break;
          if (pid > 0)
            vols[j].pid = 0;
        }
    }
  free (vols);
  vols = nv;
  nvols = nn;
  for (size_t i = 0; i < nvols; i++)
    if (fresh[i])
      start_volume (&vols[i]);
  free (fresh);
}

static void
reload (void)
{
  struct gw_config next, old;
  char err[512];

  if (gw_config_load (cfg_path, true, &next, err, sizeof err) == -1)
    {
      msg ("reload: %s (the running configuration is kept)", err);
      return;
    }
  /* Volumes that stop or restart and ask for it are drained first,
   * without the lock (a drain takes as long as the backend needs; only
   * this thread changes vols).
   */
  for (size_t j = 0; j < nvols; j++)
    {
      const struct gw_volume *nv = gw_config_find (&next, vols[j].v->name);
      if (vols[j].v->drain_on_stop && vols[j].state == V_RUNNING
          && (nv == NULL || !gw_volume_equal (nv, vols[j].v)))
        drain_volume (&vols[j]);
    }
  pthread_mutex_lock (&lock);
  apply (&next); /* paths still from the running run_dir */
  old = cfg;
  cfg = next;
  keep (&cfg.run_dir, &old.run_dir, "run_dir");
  keep (&cfg.listen_address, &old.listen_address, "listen.address");
  keep (&cfg.listen_socket, &old.listen_socket, "listen.socket");
  keep (&cfg.tls_certificates, &old.tls_certificates, "tls");
  keep (&cfg.tls_psk_file, &old.tls_psk_file, "tls");
  if (cfg.listen_port != old.listen_port)
    msg ("reload: listen.port changes only when hhc-gateway is restarted");
  cfg.listen_port = old.listen_port;
  gw_config_free (&old);
  write_map ();
  pthread_mutex_unlock (&lock);
  msg ("reload: %zu volumes", nvols);
}

/* ------------------------------------------------------------------ */
/* Status (HTTP threads). */

static json_t *
volume_status (const char *name, const char *backend, enum vstate state,
               pid_t pid, unsigned restarts)
{
  json_t *o = json_pack ("{s:s,s:s,s:s,s:i,s:i}", "name", name, "state",
                         vstate_to_string (state), "backend", backend, "pid",
                         (int)pid, "restarts", (int)restarts);
  json_t *stats = NULL;

  if (o && state == V_RUNNING)
    {
      HHC_CLEANUP_FREE char *ctl = run_path (name, ".ctl");
      char *text = control_stats (ctl, NULL, 0);
      if (text)
        stats = json_loads (text, 0, NULL);
      free (text);
    }
  if (o)
    json_object_set_new (o, "stats", stats ? stats : json_null ());
  return o;
}

static char *
status_json (void *opaque)
{
  struct snap {
    char name[80], backend[8];
    enum vstate state;
    pid_t pid;
    unsigned restarts;
  } * s;
  size_t n;
  json_t *doc, *a = json_array ();
  char *text;

  (void)opaque;
  pthread_mutex_lock (&lock);
  n = nvols;
  s = calloc (n ? n : 1, sizeof *s);
  for (size_t i = 0; s && i < n; i++)
    {
      snprintf (s[i].name, sizeof s[i].name, "%s", vols[i].v->name);
      snprintf (s[i].backend, sizeof s[i].backend, "%s",
                gw_backend_type_to_string (vols[i].v->type));
      s[i].state = vols[i].state;
      s[i].pid = vols[i].pid;
      s[i].restarts = vols[i].restarts;
    }
  pthread_mutex_unlock (&lock);
  if (s == NULL || a == NULL)
    {
      free (s);
      json_decref (a);
      return NULL;
    }
  for (size_t i = 0; i < n; i++)
    json_array_append_new (a,
                           volume_status (s[i].name, s[i].backend, s[i].state,
                                          s[i].pid, s[i].restarts));
  free (s);
  doc = json_pack ("{s:{s:s,s:I,s:s},s:o}", "gateway", "version",
                   PACKAGE_VERSION, "uptime_s",
                   (json_int_t)((now_ms () - start_ms) / 1000), "config",
                   cfg_path, "volumes", a);
  if (doc == NULL)
    return NULL;
  text = json_dumps (doc, JSON_INDENT (2));
  json_decref (doc);
  return text;
}

/* ------------------------------------------------------------------ */

static void
usage (FILE *f)
{
  fprintf (f, "usage: hhc-gateway -c FILE [--check]\n"
              "  -c, --config FILE  the configuration "
              "(hhc-gateway.json(5))\n"
              "      --check        validate the configuration only\n"
              "  -h, --help         this text\n"
              "      --version      the version\n");
}

static int
prepare_run_dir (void)
{
  if (mkdir (cfg.run_dir, 0700) == -1 && errno != EEXIST)
    {
      msg ("run_dir %s: %m", cfg.run_dir);
      return -1;
    }
  for (size_t i = 0; i < cfg.nvolumes; i++)
    {
      HHC_CLEANUP_FREE char *sock = run_path (cfg.volumes[i].name, ".sock");
      if (strlen (sock) >= sizeof ((struct sockaddr_un *)0)->sun_path)
        {
          msg ("run_dir %s: too long for the socket %s", cfg.run_dir, sock);
          return -1;
        }
    }
  return 0;
}

static int
serve (void)
{
  sigset_t set;
  int sfd;
#ifdef HAVE_LIBMICROHTTPD
  struct gw_httpd *httpd = NULL;
#endif

  sigemptyset (&set);
  sigaddset (&set, SIGCHLD);
  sigaddset (&set, SIGTERM);
  sigaddset (&set, SIGINT);
  sigaddset (&set, SIGHUP);
  sigprocmask (SIG_BLOCK, &set, NULL);
  signal (SIGPIPE, SIG_IGN);
  sfd = signalfd (-1, &set, SFD_CLOEXEC);
  if (sfd == -1)
    {
      msg ("signalfd: %m");
      return -1;
    }
  start_ms = now_ms ();
  vols = calloc (cfg.nvolumes ? cfg.nvolumes : 1, sizeof *vols);
  if (vols == NULL)
    {
      msg ("out of memory");
      return -1;
    }
  pthread_mutex_lock (&lock);
  nvols = cfg.nvolumes;
  for (size_t i = 0; i < nvols; i++)
    {
      vols[i].v = &cfg.volumes[i];
      start_volume (&vols[i]);
    }
  write_map ();
  start_front ();
  pthread_mutex_unlock (&lock);
  if (cfg.metrics)
    {
#ifdef HAVE_LIBMICROHTTPD
      char err[256];
      httpd = gw_httpd_start (cfg.metrics_address, cfg.metrics_port,
                              status_json, NULL, err, sizeof err);
      if (httpd == NULL)
        msg ("metrics: %s (serving without)", err);
      else
        msg ("status and metrics on http://%s:%u/", cfg.metrics_address,
             gw_httpd_port (httpd));
#else
      msg ("metrics: built without libmicrohttpd (serving without)");
#endif
    }
  for (;;)
    {
      pthread_mutex_lock (&lock);
      int wait = tick ();
      pthread_mutex_unlock (&lock);
      struct pollfd p = { .fd = sfd, .events = POLLIN };
      if (poll (&p, 1, wait) <= 0)
        continue;
      struct signalfd_siginfo si;
      if (read (sfd, &si, sizeof si) != sizeof si)
        continue;
      if (si.ssi_signo == SIGCHLD)
        {
          int st;
          pid_t pid;
          pthread_mutex_lock (&lock);
          while ((pid = waitpid (-1, &st, WNOHANG)) > 0)
            reaped (pid, st);
          pthread_mutex_unlock (&lock);
        }
      else if (si.ssi_signo == SIGHUP)
        reload ();
      else
        break;
    }
  msg ("stopping");
#ifdef HAVE_LIBMICROHTTPD
  gw_httpd_stop (httpd);
#endif
  stop_all ();
  {
    HHC_CLEANUP_FREE char *map = run_path ("exports", "");
    unlink (map);
  }
  close (sfd);
  free (vols);
  return 0;
}

int
main (int argc, char **argv)
{
  static const struct option opts[] = {
    { "config", required_argument, NULL, 'c' },
    { "check", no_argument, NULL, 'C' },
    { "help", no_argument, NULL, 'h' },
    { "version", no_argument, NULL, 'V' },
    { NULL, 0, NULL, 0 },
  };
  bool check = false;
  char err[512];
  int c, r;

  while ((c = getopt_long (argc, argv, "c:h", opts, NULL)) != -1)
    switch (c)
      {
      case 'c':
        cfg_path = optarg;
        break;
      case 'C':
        check = true;
        break;
      case 'h':
        usage (stdout);
        return EXIT_SUCCESS;
      case 'V':
        printf ("hhc-gateway %s\n", PACKAGE_VERSION);
        return EXIT_SUCCESS;
      default:
        usage (stderr);
        return 2;
      }
  if (cfg_path == NULL || optind != argc)
    {
      if (cfg_path)
        msg ("unexpected argument: %s", argv[optind]);
      else
        msg ("the -c FILE option is required");
      usage (stderr);
      return 2;
    }
  if (gw_config_load (cfg_path, true, &cfg, err, sizeof err) == -1)
    {
      fprintf (stderr, "hhc-gateway: %s\n", err);
      return EXIT_FAILURE;
    }
  if (check)
    {
      printf ("%s: ok, %zu volume%s\n", cfg_path, cfg.nvolumes,
              cfg.nvolumes == 1 ? "" : "s");
      gw_config_free (&cfg);
      return EXIT_SUCCESS;
    }
  r = prepare_run_dir () == 0 && serve () == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
  gw_config_free (&cfg);
  return r;
}
