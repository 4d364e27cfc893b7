/* hhc-gateway.json: a volume's "encryption": {"passphrase_file": FILE},
 * which stacks nbdkit's luks filter above hhc (gateway-spawn.c passes
 * passphrase=+FILE: the path, never the secret).
 *
 * With check_paths, the file must be a regular, non-empty file that
 * can be read and that other users can neither read nor write (mode
 * o-rwx), and nbdkit's filter directory must hold the luks filter
 * (asked once per parse: NBDKIT --dump-config, its "filterdir=" line).
 * Errors name the volume as well as the key's path.
 */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config-int.h"

/* Run nbdkit --dump-config (stdin and stderr /dev/null); its output,
 * at most len - 1 bytes, into buf.  0, or -1 if it could not be run or
 * did not exit 0.  (In hhc-gateway this runs in the main loop, which
 * reaps children only between events: waitpid (pid) gets this one.)
 */
static int
dump_config (const char *nbdkit, char *buf, size_t len)
{
  int p[2], st;
  size_t n = 0;
  ssize_t r;
  pid_t pid, w;

  if (pipe (p) == -1)
    return -1;
  pid = fork ();
  if (pid == -1)
    {
      close (p[0]);
      close (p[1]);
      return -1;
    }
  if (pid == 0)
    {
      int null = open ("/dev/null", O_RDWR);
      dup2 (p[1], 1);
      if (null >= 0)
        {
          dup2 (null, 0);
          dup2 (null, 2);
        }
      execlp (nbdkit, nbdkit, "--dump-config", (char *)NULL);
      _exit (127);
    }
  close (p[1]);
  while (n + 1 < len
         && ((r = read (p[0], buf + n, len - 1 - n)) > 0
             || (r == -1 && errno == EINTR)))
    n += r > 0 ? (size_t)r : 0;
  buf[n] = '\0';
  close (p[0]);
  while ((w = waitpid (pid, &st, 0)) == -1 && errno == EINTR)
    ;
  return w == pid && WIFEXITED (st) && WEXITSTATUS (st) == 0 ? 0 : -1;
}

/* Whether nbdkit's filterdir has the luks filter (asked once per
 * parse; c->luks_why says what is missing).
 */
static bool
luks_installed (struct ctx *c)
{
  char out[8192], so[4096], *dir, *end;
  struct stat st;

  if (c->luks_filter != 0)
    return c->luks_filter == 1;
  c->luks_filter = -1;
  if (dump_config (c->cfg->nbdkit, out, sizeof out) == -1)
    {
      snprintf (c->luks_why, sizeof c->luks_why, "\"%s --dump-config\" failed",
                c->cfg->nbdkit);
      return false;
    }
  dir = strncmp (out, "filterdir=", 10) == 0 ? out
                                             : strstr (out, "\nfilterdir=");
  if (dir == NULL)
    {
      snprintf (c->luks_why, sizeof c->luks_why,
                "\"%s --dump-config\" names no filterdir", c->cfg->nbdkit);
      return false;
    }
  dir = strchr (dir, '=') + 1;
  end = strchr (dir, '\n');
  if (end)
    *end = '\0';
  snprintf (so, sizeof so, "%s/nbdkit-luks-filter.so", dir);
  snprintf (c->luks_why, sizeof c->luks_why, "no %s", so);
  if (stat (so, &st) == 0)
    c->luks_filter = 1;
  return c->luks_filter == 1;
}

/* The passphrase file (value a) is fit to hold a key. */
static int
check_passphrase_file (struct ctx *c, const struct at *a,
                       const struct gw_volume *v)
{
  const char *f = v->passphrase_file;
  struct stat st;
  int fd;

  fd = open (f, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd == -1 || fstat (fd, &st) == -1)
    {
      int e = errno;
      if (fd >= 0)
        close (fd);
      return cfg_fail (c, a, false, "volume \"%s\": \"%s\": %s", v->name, f,
                       strerror (e));
    }
  close (fd);
  if (!S_ISREG (st.st_mode))
    return cfg_fail (c, a, false, "volume \"%s\": \"%s\": not a regular file",
                     v->name, f);
  if (st.st_size == 0)
    return cfg_fail (c, a, false, "volume \"%s\": \"%s\" is empty", v->name, f);
  if (st.st_mode & S_IRWXO)
    return cfg_fail (c, a, false,
                     "volume \"%s\": \"%s\" is open to every user (mode "
                     "%04o): chmod o-rwx it",
                     v->name, f, (unsigned)(st.st_mode & 07777));
  return 0;
}

int
cfg_parse_encryption (struct ctx *c, const struct at *vo, struct gw_volume *v)
{
  static const char *const keys[] = { "passphrase_file", NULL };
  struct at e, a;
  int r = cfg_get_object (c, vo, "encryption", false, &e);

  if (r <= 0)
    return r;
  if (cfg_check_keys (c, &e, keys) == -1
      || cfg_get_string (c, &e, "passphrase_file", true, &v->passphrase_file,
                         &a)
             == -1)
    return -1;
  if (v->passphrase_file[0] != '/')
    return cfg_fail (c, &a, false, "volume \"%s\": must be an absolute path",
                     v->name);
  if (!c->check_paths || check_passphrase_file (c, &a, v) == -1)
    return c->check_paths ? -1 : 0;
  if (!luks_installed (c))
    return cfg_fail (c, &e, false,
                     "volume \"%s\": nbdkit's luks filter is not installed "
                     "(%s; it comes with nbdkit 1.32 or later)",
                     v->name, c->luks_why);
  return 0;
}
