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
 * The volumes are the main file's and those of volumes_dir (one file
 * each, config-voldir.c), read again on SIGHUP; hhcctl volume adds and
 * removes them, finding the gateway by RUN/hhc-gateway.pid.
 *
 * Under systemd (Type=notify) it says READY=1 once every volume and
 * the front serve, RELOADING=1 and READY=1 around a reload,
 * STOPPING=1, a STATUS= line and the watchdog pings
 * (appliance/gateway-notify.c).
 *
 * Secrets (S3 keys, CHAP password) are read from their files at each
 * start and passed to nbdkit through pipes (key=-FD), never on a
 * command line.  Status and metrics go out over HTTP (appliance/
 * httpd.c) when configured.
 *
 * Files: gateway-int.h lists them (supervision, command lines,
 * reload, status).
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
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "gateway-int.h"
#ifdef HAVE_LIBMICROHTTPD
#include "httpd.h"
#endif

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

/* RUN/hhc-gateway.pid, for tools that send SIGHUP (written whole
 * before it is renamed into place).
 */
/* RUN/hhc-gateway.pid, written through a hidden temporary file and
 * renamed.  The gateway holds an exclusive flock on it for its whole
 * life (the descriptor is close-on-exec, so no child inherits it):
 * hhcctl signals the PID only while the lock is held, so a PID file
 * left by a gateway that was killed never sends SIGHUP to another
 * process that got its PID.
 */
static int
write_pid_file (void)
{
  HHC_CLEANUP_FREE char *pid = run_path ("hhc-gateway", ".pid");
  HHC_CLEANUP_FREE char *tmp = run_path (".hhc-gateway", ".pid.tmp");
  static int fd = -1;
  char text[32];
  int n = snprintf (text, sizeof text, "%d\n", (int)getpid ());

  fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd == -1 || flock (fd, LOCK_EX | LOCK_NB) == -1
      || write (fd, text, n) != n || rename (tmp, pid) == -1)
    {
      msg ("%s: %m", pid);
      if (fd != -1)
        close (fd);
      fd = -1;
      return -1;
    }
  return 0;
}

static int
prepare_run_dir (void)
{
  if (mkdir (cfg.run_dir, 0700) == -1 && errno != EEXIST)
    {
      msg ("run_dir %s: %m", cfg.run_dir);
      return -1;
    }
  if (cfg.volumes_dir && mkdir (cfg.volumes_dir, 0750) == -1 && errno != EEXIST)
    {
      msg ("volumes_dir %s: %m", cfg.volumes_dir);
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
  return write_pid_file ();
}

/* The signals the gateway reads through a signalfd, blocked in *set. */
static void
block_signals_in (sigset_t *set)
{
  sigemptyset (set);
  sigaddset (set, SIGCHLD);
  sigaddset (set, SIGTERM);
  sigaddset (set, SIGINT);
  sigaddset (set, SIGHUP);
  sigprocmask (SIG_BLOCK, set, NULL);
}

static void
block_signals (void)
{
  sigset_t set;

  block_signals_in (&set);
}

/* SIGCHLD, SIGTERM, SIGINT and SIGHUP through a signalfd (-1: said
 * why); SIGPIPE ignored.
 */
static int
signals_fd (void)
{
  sigset_t set;
  int sfd;

  block_signals_in (&set);
  signal (SIGPIPE, SIG_IGN);
  sfd = signalfd (-1, &set, SFD_CLOEXEC);
  if (sfd == -1)
    msg ("signalfd: %m");
  return sfd;
}

#ifdef HAVE_LIBMICROHTTPD
/* The status and metrics server, if configured (NULL: none). */
static struct gw_httpd *
start_metrics (void)
{
  struct gw_httpd *httpd;
  char err[256];

  if (!cfg.metrics)
    return NULL;
  httpd = gw_httpd_start (cfg.metrics_address, cfg.metrics_port, status_json,
                          NULL, err, sizeof err);
  if (httpd == NULL)
    msg ("metrics: %s (serving without)", err);
  else
    msg ("status and metrics on http://%s:%u/", cfg.metrics_address,
         gw_httpd_port (httpd));
  return httpd;
}
#endif

/* Supervise until SIGTERM or SIGINT: start what is due, reap, reload
 * on SIGHUP.
 */
static void
supervise (int sfd)
{
  for (;;)
    {
      pthread_mutex_lock (&lock);
      int wait = tick ();
      pthread_mutex_unlock (&lock);
      wait = notify_tick (wait);
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
        {
          notify_reloading ();
          reload ();
          notify_reloaded ();
        }
      else
        break;
    }
}

static int
serve (void)
{
  int sfd, r;
#ifdef HAVE_LIBMICROHTTPD
  struct gw_httpd *httpd = NULL;
#endif

  if ((sfd = signals_fd ()) == -1)
    return -1;
  start_ms = now_ms ();
  notify_init ();
  pthread_mutex_lock (&lock);
  r = start_all ();
  pthread_mutex_unlock (&lock);
  if (r == -1)
    return -1;
#ifdef HAVE_LIBMICROHTTPD
  httpd = start_metrics ();
#else
  if (cfg.metrics)
    msg ("metrics: built without libmicrohttpd (serving without)");
#endif
  supervise (sfd);
  msg ("stopping");
  notify_stopping ();
#ifdef HAVE_LIBMICROHTTPD
  gw_httpd_stop (httpd);
#endif
  stop_all ();
  {
    HHC_CLEANUP_FREE char *map = run_path ("exports", "");
    HHC_CLEANUP_FREE char *pid = run_path ("hhc-gateway", ".pid");
    unlink (map);
    unlink (pid);
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
  block_signals (); /* before the PID file tells hhcctl where to send them */
  r = prepare_run_dir () == 0 && serve () == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
  gw_config_free (&cfg);
  return r;
}
