/* hhc-csi: a local block device for an export of the node's gateway.
 *
 *   node.attach   device                 how
 *   nbd           /dev/nbdN              nbd-client -N EXPORT (kernel NBD)
 *   nbdfuse       /dev/loopN             nbdfuse DIR/disk URI, then
 *                                        losetup --direct-io=on DIR/disk
 *   auto          nbd when /dev/nbd0 exists and nbd-client is on PATH,
 *                 else nbdfuse
 *
 * A volume staged read-only gets a read-only device (-readonly,
 * --read-only): a read-only bind mount of a device node does not stop
 * writes to the device, a read-only device does.
 *
 * nbdfuse runs in a session of its own; its PID goes in the record so
 * a detach (even by a restarted hhc-csi, whose child it no longer is)
 * unmounts DIR, waits for it to end and only then kills it.  Before a
 * device is detached it is fsync'd, which reaches the gateway as an
 * NBD flush.  A loop device counts as ours only while its
 * backing_file is our DIR/disk, so a retried detach never frees a
 * device another volume got since.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "node.h"

#define FUSE_WAIT_S 30 /* nbdfuse's file appearing; its end */

int
attach_uri (const struct csi_node_conf *n, const char *export_name, char *buf,
            size_t size)
{
  int len;
  if (n->nbd_socket)
    len = snprintf (buf, size, "nbd+unix:///%s?socket=%s", export_name,
                    n->nbd_socket);
  else if (strchr (n->nbd_host, ':'))
    len = snprintf (buf, size, "nbd://[%s]:%u/%s", n->nbd_host, n->nbd_port,
                    export_name);
  else
    len = snprintf (buf, size, "nbd://%s:%u/%s", n->nbd_host, n->nbd_port,
                    export_name);
  return len < 0 || (size_t)len >= size ? -1 : 0;
}

static bool
have_prog (const char *prog)
{
  const char *path = getenv ("PATH");
  char buf[PATH_MAX];
  while (path && *path)
    {
      size_t len = strcspn (path, ":");
      snprintf (buf, sizeof buf, "%.*s/%s", (int)len, path, prog);
      if (access (buf, X_OK) == 0)
        return true;
      path += len + (path[len] == ':');
    }
  return false;
}

static void
pause_ms (long ms)
{
  struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
  nanosleep (&ts, NULL);
}

/* fsync the device: the gateway sees a flush.  Errors are ignored:
 * the drain that follows flushes again and reports.
 */
static void
dev_sync (const char *dev)
{
  int fd = open (dev, O_RDONLY | O_CLOEXEC);
  if (fd >= 0)
    {
      fsync (fd);
      close (fd);
    }
}

/* ---- kernel NBD ---- */

static int
nbd_attach (const struct csi_node_conf *n, const char *export_name,
            bool readonly, struct attach *a, struct csi_err *e)
{
  char port[16], sys[64];
  snprintf (port, sizeof port, "%u", n->nbd_port);
  for (int i = 0; i < 256; i++)
    {
      snprintf (a->dev, sizeof a->dev, "/dev/nbd%d", i);
      snprintf (sys, sizeof sys, "/sys/block/nbd%d/pid", i);
      if (access (a->dev, F_OK) < 0)
        break;
      if (access (sys, F_OK) == 0) /* connected: in use */
        continue;
      const char *tcp[] = { "nbd-client", "-N",   export_name, n->nbd_host,
                            port,         a->dev, NULL,        NULL };
      const char *unx[] = { "nbd-client",  "-N",   export_name, "-unix",
                            n->nbd_socket, a->dev, NULL,        NULL };
      const char **argv = n->nbd_socket ? unx : tcp;
      argv[6] = readonly ? "-readonly" : NULL;
      struct run_res r;
      if (run_prog (argv, NULL, 0, n->wait_s, &r) < 0)
        return csi_fail (e, CSI_INTERNAL, "nbd-client: %s", strerror (errno));
      if (r.status != 0)
        return csi_fail (e, CSI_INTERNAL, "nbd-client %s: %s", a->dev,
                         run_line (&r));
      a->kind = ATTACH_NBD;
      return 0;
    }
  return csi_fail (e, CSI_RESOURCE_EXHAUSTED, "no free /dev/nbd device");
}

static int
nbd_detach (struct attach *a, struct csi_err *e)
{
  const char *argv[] = { "nbd-client", "-d", a->dev, NULL };
  struct run_res r;
  dev_sync (a->dev);
  if (run_prog (argv, NULL, 0, 120, &r) < 0)
    return csi_fail (e, CSI_INTERNAL, "nbd-client: %s", strerror (errno));
  if (r.status != 0)
    return csi_fail (e, CSI_INTERNAL, "nbd-client -d %s: %s", a->dev,
                     run_line (&r));
  return 0;
}

/* ---- nbdfuse + loop ---- */

/* Whether pid is still our nbdfuse on fuse_dir: a PID from a record
 * may have been reused since (a restarted container, a reboot), and
 * only that nbdfuse may be waited on or killed.
 */
static bool
is_our_fuse (pid_t pid, const char *fuse_dir)
{
  char path[64], cmd[PATH_MAX * 2 + 64];
  ssize_t n;
  int fd;

  snprintf (path, sizeof path, "/proc/%d/cmdline", (int)pid);
  if ((fd = open (path, O_RDONLY | O_CLOEXEC)) < 0)
    return false;
  n = read (fd, cmd, sizeof cmd - 1);
  close (fd);
  if (n <= 0)
    return false;
  cmd[n] = '\0';
  /* argv: nbdfuse FUSE_DIR/disk URI, NUL-separated */
  const char *arg1 = cmd + strlen (cmd) + 1;
  const char *base = strrchr (cmd, '/');
  size_t dl = strlen (fuse_dir);
  return strcmp (base ? base + 1 : cmd, "nbdfuse") == 0 && arg1 < cmd + n
         && strncmp (arg1, fuse_dir, dl) == 0 && arg1[dl] == '/';
}

/* Unmount nbdfuse's directory and wait for the process to end. */
static int
fuse_stop (struct attach *a, struct csi_err *e)
{
  if (mnt_umount (a->fuse_dir, e) < 0)
    return -1;
  /* Our own child is waited for as it is; a PID from a record of an
   * earlier hhc-csi only while it is still that nbdfuse.
   */
  if (a->fuse_pid > 0 && waitpid (a->fuse_pid, NULL, WNOHANG) == -1
      && errno == ECHILD && !is_our_fuse (a->fuse_pid, a->fuse_dir))
    a->fuse_pid = 0;
  for (int i = 0;
       a->fuse_pid > 0 && !run_ended (a->fuse_pid) && i < FUSE_WAIT_S * 30; i++)
    {
      if (i == FUSE_WAIT_S * 10)
        kill (a->fuse_pid, SIGTERM);
      if (i == FUSE_WAIT_S * 20)
        kill (a->fuse_pid, SIGKILL);
      pause_ms (100);
    }
  a->fuse_pid = 0;
  rmdir (a->fuse_dir);
  return 0;
}

/* Start nbdfuse on fuse_dir/disk, wait (bounded) for the file. */
static int
fuse_start (const char *uri, struct attach *a, struct csi_err *e)
{
  char file[PATH_MAX + 8], log[PATH_MAX + 8];
  snprintf (file, sizeof file, "%s/disk", a->fuse_dir);
  snprintf (log, sizeof log, "%s.log", a->fuse_dir);
  if (mkdir (a->fuse_dir, 0700) < 0 && errno != EEXIST)
    return csi_fail (e, CSI_INTERNAL, "mkdir %s: %s", a->fuse_dir,
                     strerror (errno));
  if (mnt_is_mounted (a->fuse_dir) == 1 && mnt_umount (a->fuse_dir, e) < 0)
    return -1; /* a stale one from a hhc-csi that died */
  const char *argv[] = { "nbdfuse", file, uri, NULL };
  a->fuse_pid = run_spawn (argv, log);
  if (a->fuse_pid < 0)
    return csi_fail (e, CSI_INTERNAL, "nbdfuse: %s", strerror (errno));
  struct stat st;
  for (int i = 0; i < FUSE_WAIT_S * 10; i++)
    {
      if (mnt_is_mounted (a->fuse_dir) == 1 && stat (file, &st) == 0)
        return 0;
      if (run_ended (a->fuse_pid))
        {
          a->fuse_pid = 0;
          rmdir (a->fuse_dir);
          return csi_fail (e, CSI_INTERNAL, "nbdfuse %s exited (see %s)", uri,
                           log);
        }
      pause_ms (100);
    }
  struct csi_err ignore;
  fuse_stop (a, &ignore);
  return csi_fail (e, CSI_INTERNAL, "nbdfuse %s: no device after %d s", uri,
                   FUSE_WAIT_S);
}

/* losetup on fuse_dir/disk: the device's name in a->dev. */
static int
losetup (struct attach *a, bool readonly, bool dio, struct run_res *r)
{
  char file[PATH_MAX + 8];
  const char *argv[8] = { "losetup", "--find", "--show" };
  size_t n = 3;
  snprintf (file, sizeof file, "%s/disk", a->fuse_dir);
  if (dio)
    argv[n++] = "--direct-io=on";
  if (readonly)
    argv[n++] = "--read-only";
  argv[n++] = file;
  if (run_prog (argv, NULL, 0, 60, r) < 0 || r->status != 0)
    return -1;
  r->out[strcspn (r->out, "\n")] = '\0';
  if (strncmp (r->out, "/dev/", 5) != 0 || strlen (r->out) >= sizeof a->dev)
    return -1;
  strcpy (a->dev, r->out);
  return 0;
}

/* A loop device: direct I/O, or buffered when refused (said). */
static int
loop_setup (struct attach *a, bool readonly, struct csi_err *e)
{
  struct run_res r;
  a->direct_io = true;
  if (losetup (a, readonly, true, &r) < 0)
    {
      csi_log ("losetup %s/disk: direct I/O refused (%s); the loop device "
               "goes through the page cache",
               a->fuse_dir, run_line (&r));
      a->direct_io = false;
      if (losetup (a, readonly, false, &r) < 0)
        return csi_fail (e, CSI_INTERNAL, "losetup %s/disk: %s", a->fuse_dir,
                         run_line (&r));
    }
  a->kind = ATTACH_LOOP;
  return 0;
}

/* Whether loop device dev is still backed by our file. */
static bool
loop_is_ours (const struct attach *a)
{
  char sys[128], back[PATH_MAX + 8], want[PATH_MAX + 8];
  snprintf (sys, sizeof sys, "/sys/block/%.60s/loop/backing_file",
            a->dev + strlen ("/dev/"));
  FILE *f = fopen (sys, "re");
  if (!f)
    return false;
  bool ok = fgets (back, sizeof back, f) != NULL;
  fclose (f);
  back[strcspn (back, "\n")] = '\0';
  snprintf (want, sizeof want, "%s/disk", a->fuse_dir);
  return ok && strcmp (back, want) == 0;
}

static int
loop_detach (struct attach *a, struct csi_err *e)
{
  if (loop_is_ours (a))
    {
      const char *argv[] = { "losetup", "-d", a->dev, NULL };
      struct run_res r;
      dev_sync (a->dev);
      if (run_prog (argv, NULL, 0, 60, &r) < 0 || r.status != 0)
        return csi_fail (e, CSI_INTERNAL, "losetup -d %s: %s", a->dev,
                         run_line (&r));
    }
  return fuse_stop (a, e);
}

int
attach_device (const struct csi_node_conf *n, const char *export_name,
               const char *fuse_dir, bool readonly, struct attach *a,
               struct csi_err *e)
{
  const char *how = n->attach ? n->attach : "auto";
  char uri[PATH_MAX + 128];
  memset (a, 0, sizeof *a);
  if (attach_uri (n, export_name, uri, sizeof uri) < 0
      || strlen (fuse_dir) >= sizeof a->fuse_dir)
    return csi_fail (e, CSI_INTERNAL, "%s: NBD address too long", export_name);
  bool nbd = strcmp (how, "nbd") == 0
             || (strcmp (how, "auto") == 0 && access ("/dev/nbd0", F_OK) == 0
                 && have_prog ("nbd-client"));
  if (nbd)
    return nbd_attach (n, export_name, readonly, a, e);
  strcpy (a->fuse_dir, fuse_dir);
  if (fuse_start (uri, a, e) < 0)
    return -1;
  if (loop_setup (a, readonly, e) < 0)
    {
      struct csi_err ignore;
      fuse_stop (a, &ignore);
      return -1;
    }
  return 0;
}

int
attach_detach (const struct csi_node_conf *n, struct attach *a,
               struct csi_err *e)
{
  (void)n;
  int r = 0;
  if (a->kind == ATTACH_NBD)
    r = nbd_detach (a, e);
  else if (a->kind == ATTACH_LOOP || a->fuse_pid > 0)
    r = loop_detach (a, e);
  if (r == 0)
    a->kind = ATTACH_NONE;
  return r;
}

bool
attach_reaches (const char *dev)
{
  static __thread char block[4096] __attribute__ ((aligned (4096)));
  int fd = open (dev, O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (fd < 0)
    return false;
  bool ok = pread (fd, block, sizeof block, 0) == (ssize_t)sizeof block;
  close (fd);
  return ok;
}

int
attach_dev_size (const char *dev, uint64_t *size, struct csi_err *e)
{
  int fd = open (dev, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return csi_fail (e, CSI_INTERNAL, "open %s: %s", dev, strerror (errno));
  int r = ioctl (fd, BLKGETSIZE64, size);
  int err = errno;
  close (fd);
  if (r < 0)
    return csi_fail (e, CSI_INTERNAL, "%s: size: %s", dev, strerror (err));
  return 0;
}
