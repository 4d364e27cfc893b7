/* hhc-gateway's nbdkit command lines: a volume's (the hhc filter over
 * its backend plugin, under nbdkit's luks filter with "encryption")
 * and the front's (nbdkit-hhcroute-plugin), and starting them.
 * Secrets (S3 keys, CHAP password) are read from their files at each
 * start and passed through pipes (key=-FD), never on a command line;
 * the luks filter reads its passphrase file itself (passphrase=+FILE:
 * only the path is on the command line, and the gateway never holds
 * the key).
 */
#include <config.h>

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "gateway-int.h"

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

/* The cos plugin's parameters; the keys go through pipes.  a, b: the
 * credentials read (the caller wipes and frees them).
 */
static int
cos_args (struct argv *v, const struct gw_volume *vo, char **a, char **b)
{
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
  if (read_two_lines (vo->credentials, a, b) == -1
      || arg_secret (v, "access-key", *a) == -1
      || arg_secret (v, "secret-key", *b) == -1)
    return -1;
  return 0;
}

/* The hhciscsi plugin's parameters; the CHAP password through a pipe
 * (a, b as for cos_args).
 */
static int
iscsi_args (struct argv *v, const struct gw_volume *vo, char **a, char **b)
{
  arg_plugin (v, "hhciscsi");
  arg (v, "url=%s", vo->url);
  if (vo->initiator)
    arg (v, "initiator=%s", vo->initiator);
  if (vo->sessions)
    arg (v, "sessions=%u", vo->sessions);
  if (vo->timeout >= 0)
    arg (v, "timeout=%d", vo->timeout);
  if (vo->chap_file == NULL)
    return 0;
  if (read_two_lines (vo->chap_file, a, b) == -1)
    return -1;
  arg (v, "user=%s", *a);
  return arg_secret (v, "password", *b);
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
      r = cos_args (v, vo, &a, &b);
      break;
    case GW_BACKEND_ISCSI:
      r = iscsi_args (v, vo, &a, &b);
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
  if (vo->passphrase_file)
    arg (v, "--filter=luks");
  arg (v, "--filter=%s", cfg.filter);
  if (backend_args (v, vo) == -1)
    return -1;
  if (vo->passphrase_file)
    arg (v, "passphrase=+%s", vo->passphrase_file);
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

/* Fork and exec v; the child keeps only v's pipes of its own, and no
 * systemd notify or watchdog variables.
 */
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
      /* systemd's notify socket is the daemon's, not its children's. */
      unsetenv ("NOTIFY_SOCKET");
      unsetenv ("WATCHDOG_USEC");
      unsetenv ("WATCHDOG_PID");
      execvp (v->a[0], v->a);
      fprintf (stderr, "hhc-gateway: %s: %s: %m\n", what, v->a[0]);
      _exit (127);
    }
  return pid;
}

pid_t
spawn_volume (const struct gw_volume *vo)
{
  struct argv v = { 0 };
  pid_t pid = 0;

  if (volume_args (&v, vo) == 0)
    pid = spawn (&v, vo->name);
  argv_free (&v);
  return pid;
}

pid_t
spawn_front (void)
{
  struct argv v = { 0 };
  pid_t pid;

  front_args (&v);
  pid = spawn (&v, "front");
  argv_free (&v);
  return pid;
}
