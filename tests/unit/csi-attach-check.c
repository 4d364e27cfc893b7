/* tests/test-csi-attach.sh's program: hhc-csi's node helpers (run.c,
 * mount.c, attach.c) on a real NBD server.
 *
 *   csi-attach-check SOCKET DIR
 *
 * attaches export "vol" of the server on SOCKET (node.attach from
 * $HHC_CSI_ATTACH, default auto), makes a file system because the disk
 * is blank, mounts it at a staging directory whose name needs
 * mountinfo's escapes, publishes it read-only by bind mounts (a
 * directory and, block access, the device on a file), unmounts and
 * detaches; then attaches again: the file system is found (no second
 * mkfs) with the file written the first time.  DIR/attached holds the
 * device and nbdfuse's PID while attached, for the script's cleanup.
 *
 * Mount flags: the generic ones become mount(2) flags, the others its
 * data (seen in mountinfo); an option the file system refuses is
 * INVALID_ARGUMENT without its text; a publish applies its generic
 * ones on top of the staging mount's.  The script runs this with
 * mount(8) and umount(8) replaced by traps: neither may run.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "node.h"

/* csi-util.c's two, as hhc-csi has them. */
int
csi_fail (struct csi_err *e, enum csi_code code, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  e->code = code;
  vsnprintf (e->msg, sizeof e->msg, fmt, ap);
  va_end (ap);
  return -1;
}

void
csi_log (const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  fputs ("hhc-csi: ", stderr);
  vfprintf (stderr, fmt, ap);
  fputc ('\n', stderr);
  va_end (ap);
}

static struct csi_err err;

#define CHECK(cond)                                                            \
  do                                                                           \
    {                                                                          \
      if (!(cond))                                                             \
        {                                                                      \
          fprintf (stderr, "csi-attach-check:%d: %s failed (%s)\n", __LINE__,  \
                   #cond, err.msg);                                            \
          exit (1);                                                            \
        }                                                                      \
    }                                                                          \
  while (0)

static void
write_file (const char *path, const char *text)
{
  FILE *f = fopen (path, "w");
  CHECK (f != NULL);
  fprintf (f, "%s", text);
  fclose (f);
}

static void
test_run (void)
{
  struct run_res r;
  const char *cat[] = { "cat", NULL };
  CHECK (run_prog (cat, "in\nput", 8, 10, &r) == 0);
  CHECK (r.status == 0 && strcmp (r.out, "in\nput") == 0);
  const char *slow[] = { "sleep", "30", NULL };
  CHECK (run_prog (slow, NULL, 0, 1, &r) == 0);
  CHECK (r.timed_out && r.status == -1);
  const char *none[] = { "/nonexistent/prog", NULL };
  CHECK (run_prog (none, NULL, 0, 10, &r) == 0 && r.status == 127);
  CHECK (strstr (run_line (&r), "No such file") != NULL);
  CHECK (mnt_fs_supported ("xfs") && !mnt_fs_supported ("btrfs"));
}

/* Field n (1-based) of path's mountinfo line, or for n < 0 field -n
 * after the " - " separator, copied to out.
 */
static void
mountinfo_field (const char *path, int n, char *out, size_t size)
{
  char canon[PATH_MAX], esc[4 * PATH_MAX], *line = NULL, *d = esc;
  size_t cap = 0;
  CHECK (realpath (path, canon) != NULL);
  for (const char *c = canon; *c; c++)
    d += strchr (" \t\n\\", *c) ? sprintf (d, "\\%03o", *c)
                                : sprintf (d, "%c", *c);
  FILE *f = fopen ("/proc/self/mountinfo", "r");
  CHECK (f != NULL);
  *out = '\0';
  while (!*out && getline (&line, &cap, f) > 0)
    {
      char *save = NULL, *fld[64];
      int nf = 0, sep = -1;
      line[strcspn (line, "\n")] = '\0';
      for (char *t = strtok_r (line, " ", &save); t && nf < 64;
           t = strtok_r (NULL, " ", &save))
        {
          if (strcmp (t, "-") == 0 && sep < 0)
            sep = nf;
          fld[nf++] = t;
        }
      if (nf < 5 || sep < 0 || strcmp (fld[4], esc) != 0)
        continue;
      int i = n > 0 ? n - 1 : sep - n;
      CHECK (i < nf);
      snprintf (out, size, "%s", fld[i]);
    }
  free (line);
  fclose (f);
  CHECK (*out);
}

/* Whether the comma-separated list holds opt. */
static bool
has_opt (const char *list, const char *opt)
{
  char l[1024], o[128];
  snprintf (l, sizeof l, ",%s,", list);
  snprintf (o, sizeof o, ",%s,", opt);
  return strstr (l, o) != NULL;
}

/* The parse: generic options to MS_*, the rest (quoted commas kept)
 * to data, refusals and empty flags INVALID_ARGUMENT.
 */
static void
test_opts (void)
{
  struct mnt_opts o;
  const char *const f1[] = { "noexec,nosuid",
                             "errors=remount-ro",
                             "defaults",
                             "x-k8s",
                             "context=\"a,b\"",
                             "ro",
                             "rw",
                             "relatime",
                             "noatime" };
  CHECK (mnt_opts_parse (f1, 9, &o, &err) == 0);
  CHECK (o.flags == (MS_NOEXEC | MS_NOSUID | MS_NOATIME));
  CHECK (o.named & MS_RDONLY && o.named & MS_RELATIME);
  CHECK (strcmp (o.data, "errors=remount-ro,context=\"a,b\"") == 0);
  mnt_opts_free (&o);
  CHECK (mnt_opts_parse (NULL, 0, &o, &err) == 0 && !o.flags && !o.data);
  const char *const bad[][2] = {
    { "noexec", "" }, { "noexec,", "ro" }, { "ro", "remount" }, { "bind", "ro" }
  };
  for (size_t i = 0; i < 4; i++)
    {
      err.code = CSI_OK;
      CHECK (mnt_opts_parse (bad[i], 2, &o, &err) < 0);
      CHECK (err.code == CSI_INVALID_ARGUMENT);
    }
  CHECK (strstr (err.msg, "bind") != NULL);
}

/* Staging mount flags: a refused file-system option is
 * INVALID_ARGUMENT not naming it; the generic ones and an ext4 one show
 * in mountinfo.
 */
static void
test_stage_flags (const char *dev, const char *stage)
{
  const char *const secret[] = { "noexec", "hhc-secret=s3cr3t" };
  const char *const flags[]
      = { "noatime", "noexec,nosuid", "errors=remount-ro" };
  char opts[512];
  CHECK (mnt_mount (dev, stage, "ext4", secret, 2, false, &err) < 0);
  CHECK (err.code == CSI_INVALID_ARGUMENT && !strstr (err.msg, "s3cr3t"));
  CHECK (mnt_is_mounted (stage) == 0);
  err.code = CSI_OK;
  CHECK (mnt_mount (dev, stage, "ext4", flags, 3, false, &err) == 0);
  mountinfo_field (stage, 6, opts, sizeof opts);
  CHECK (has_opt (opts, "rw") && has_opt (opts, "noexec"));
  CHECK (has_opt (opts, "nosuid") && has_opt (opts, "noatime"));
  mountinfo_field (stage, -3, opts, sizeof opts);
  CHECK (has_opt (opts, "errors=remount-ro"));
}

/* Publish read-only: a directory (a write is EROFS; the staging
 * mount's flags kept, the publish's nodev added, its ext4 option left
 * to the staging mount) and the device on a file (its size; a
 * read-only device is tested in main).  Then a writable publish whose
 * "exec" clears the staging mount's noexec.
 */
static void
test_publish (const char *dir, const char *stage, const char *dev)
{
  char target[512], blk[512], path[600], opts[512];
  const char *const flags[] = { "nodev", "errors=remount-ro" };
  const char *const exec[] = { "exec" };
  snprintf (target, sizeof target, "%s/target", dir);
  snprintf (blk, sizeof blk, "%s/blk", dir);
  CHECK (mkdir (target, 0755) == 0);
  CHECK (mnt_bind (stage, target, flags, 2, true, &err) == 0);
  CHECK (mnt_is_mounted (target) == 1);
  mountinfo_field (target, 6, opts, sizeof opts);
  CHECK (has_opt (opts, "ro") && has_opt (opts, "nodev"));
  CHECK (has_opt (opts, "noexec") && has_opt (opts, "nosuid"));
  CHECK (has_opt (opts, "noatime"));
  snprintf (path, sizeof path, "%s/new", target);
  CHECK (open (path, O_WRONLY | O_CREAT, 0644) < 0 && errno == EROFS);
  write_file (blk, "");
  CHECK (mnt_bind (dev, blk, NULL, 0, true, &err) == 0);
  uint64_t size;
  CHECK (attach_dev_size (blk, &size, &err) == 0 && size == 64 << 20);
  CHECK (mnt_umount (blk, &err) == 0 && mnt_umount (target, &err) == 0);
  CHECK (mnt_is_mounted (target) == 0 && mnt_is_mounted (blk) == 0);
  CHECK (mnt_umount (target, &err) == 0); /* not mounted: success */
  CHECK (mnt_bind (stage, target, exec, 1, false, &err) == 0);
  mountinfo_field (target, 6, opts, sizeof opts);
  CHECK (has_opt (opts, "rw") && !has_opt (opts, "noexec"));
  CHECK (has_opt (opts, "nosuid"));
  CHECK (mnt_umount (target, &err) == 0);
}

/* A write to the read-only device fails (the kernel says EPERM). */
static void
check_ro_device (const char *dev)
{
  static char block[4096] __attribute__ ((aligned (4096)));
  int fd = open (dev, O_WRONLY | O_DIRECT);
  CHECK (fd < 0 || pwrite (fd, block, sizeof block, 0) < 0);
  if (fd >= 0)
    close (fd);
}

static void
note_attached (const char *dir, const struct attach *a)
{
  char path[512], text[128];
  snprintf (path, sizeof path, "%s/attached", dir);
  snprintf (text, sizeof text, "%s %d\n", a->dev, (int)a->fuse_pid);
  write_file (path, text);
}

/* Detach, then nothing may be left: no loop device on the file, no
 * FUSE mount, no nbdfuse.
 */
static void
detach_all (const struct csi_node_conf *n, struct attach *a)
{
  struct attach was = *a;
  char sys[sizeof was.dev + 64];
  CHECK (attach_detach (n, a, &err) == 0);
  if (was.kind == ATTACH_LOOP)
    {
      snprintf (sys, sizeof sys, "/sys/block/%.60s/loop/backing_file",
                was.dev + 5);
      CHECK (access (sys, F_OK) < 0);
      CHECK (mnt_is_mounted (was.fuse_dir) == 0);
      CHECK (run_ended (was.fuse_pid));
      CHECK (access (was.fuse_dir, F_OK) < 0);
    }
  CHECK (attach_detach (n, a, &err) == 0); /* again: nothing to do */
}

int
main (int argc, char **argv)
{
  if (argc != 3)
    {
      fprintf (stderr, "usage: csi-attach-check SOCKET DIR\n");
      return 2;
    }
  const char *dir = argv[2];
  struct csi_node_conf n = { .nbd_socket = argv[1], .wait_s = 30 };
  n.attach = getenv ("HHC_CSI_ATTACH") ? getenv ("HHC_CSI_ATTACH") : "auto";
  char fuse[512], stage[512], path[600], buf[64] = "";
  struct attach a;
  test_run ();
  test_opts ();
  snprintf (fuse, sizeof fuse, "%s/vol.fuse", dir);
  snprintf (stage, sizeof stage, "%s/st age\\x", dir);
  CHECK (mkdir (stage, 0755) == 0);

  CHECK (attach_device (&n, "vol", fuse, false, &a, &err) == 0);
  note_attached (dir, &a);
  printf ("attached %s (direct I/O %s)\n", a.dev, a.direct_io ? "on" : "off");
  CHECK (mnt_has_fs (a.dev, &err) == 0);
  CHECK (mnt_mkfs (a.dev, "ext4", &err) == 0);
  CHECK (mnt_has_fs (a.dev, &err) == 1);
  test_stage_flags (a.dev, stage);
  CHECK (mnt_is_mounted (stage) == 1);
  snprintf (path, sizeof path, "%s/hello", stage);
  write_file (path, "hello\n");
  test_publish (dir, stage, a.dev);
  CHECK (mnt_umount (stage, &err) == 0 && mnt_is_mounted (stage) == 0);
  detach_all (&n, &a);

  /* Staged read-only: a read-only device, so the file system is kept
   * and a write through a block publish fails too.
   */
  CHECK (attach_device (&n, "vol", fuse, true, &a, &err) == 0);
  note_attached (dir, &a);
  CHECK (mnt_has_fs (a.dev, &err) == 1); /* no second mkfs */
  CHECK (mnt_mount (a.dev, stage, "ext4", NULL, 0, true, &err) == 0);
  FILE *f = fopen (path, "r");
  CHECK (f && fgets (buf, sizeof buf, f) && strcmp (buf, "hello\n") == 0);
  fclose (f);
  check_ro_device (a.dev);
  CHECK (mnt_umount (stage, &err) == 0);
  detach_all (&n, &a);
  printf ("ok\n");
  return 0;
}
