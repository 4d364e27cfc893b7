/* hhc-csi: file systems and mounts on the node.
 *
 * Mount state comes from /proc/self/mountinfo, whose fifth field is
 * the mount point with space, tab, newline and backslash written as
 * \ooo octal escapes.  A path is compared in its canonical form
 * (realpath) when it exists.
 *
 * mkfs is run only when blkid -p finds nothing on the device (a
 * partition table or an unknown signature counts as something, so
 * nothing there is ever overwritten) and never discards: a discard
 * would go through the gateway as a trim of the whole volume.
 *
 * Mounts are made with mount(2) in this process, never by mount(8):
 * mount flags may hold secrets, and a command line is world-readable
 * in /proc/PID/cmdline.  The CSI flags are split at commas (outside
 * double quotes, as mount(8) splits -o); the generic options (table
 * below) become MS_* flags, and every other one goes, comma-joined,
 * into mount(2)'s data string.  A message may name a generic option,
 * never another one (its text may be a secret):
 *
 *   generic option          effect on the MS_* flags
 *   ro / rw                 set / clear MS_RDONLY
 *   nosuid / suid           set / clear MS_NOSUID (nodev, noexec alike)
 *   sync / async            set / clear MS_SYNCHRONOUS
 *   noatime, relatime,      set that one atime mode, clear the others
 *   strictatime / atime     (atime clears MS_NOATIME only)
 *   remount, bind, ...      INVALID_ARGUMENT (the driver's, not the CO's)
 *   defaults, auto, nofail  nothing (mount(8) keeps them to itself)
 */
#include <config.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statvfs.h>

#include "cleanup.h"
#include "node.h"

#define TOOL_TIMEOUT 600 /* mkfs of a large volume through the cache */

/* Undo mountinfo's octal escapes in place. */
static void
unescape (char *s)
{
  char *d = s;
  while (*s)
    {
      if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0'
          && s[2] <= '7' && s[3] >= '0' && s[3] <= '7')
        {
          *d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
          s += 4;
        }
      else
        *d++ = *s++;
    }
  *d = '\0';
}

/* The fifth field of a mountinfo line, unescaped, in place. */
static char *
mount_point (char *line)
{
  char *save = NULL, *f = strtok_r (line, " ", &save);
  for (int i = 1; f && i < 5; i++)
    f = strtok_r (NULL, " ", &save);
  if (f)
    unescape (f);
  return f;
}

int
mnt_is_mounted (const char *path)
{
  char canon[PATH_MAX];
  if (!realpath (path, canon))
    snprintf (canon, sizeof canon, "%s", path);
  FILE *f = fopen ("/proc/self/mountinfo", "re");
  if (!f)
    return -1;
  HHC_CLEANUP_FREE char *line = NULL;
  size_t cap = 0;
  int found = 0;
  while (!found && getline (&line, &cap, f) > 0)
    {
      const char *mp = mount_point (line);
      found = mp && strcmp (mp, canon) == 0;
    }
  fclose (f);
  return found;
}

int
mnt_has_fs (const char *dev, struct csi_err *e)
{
  const char *argv[] = { "blkid", "-p", dev, NULL };
  struct run_res r;
  if (run_prog (argv, NULL, 0, 60, &r) < 0)
    return csi_fail (e, CSI_INTERNAL, "blkid: %s", strerror (errno));
  if (r.status == 0)
    return 1;
  if (r.status == 2) /* nothing found */
    return 0;
  return csi_fail (e, CSI_INTERNAL, "blkid -p %s: %s", dev, run_line (&r));
}

bool
mnt_fs_supported (const char *fs_type)
{
  return strcmp (fs_type, "ext4") == 0 || strcmp (fs_type, "xfs") == 0;
}

int
mnt_mkfs (const char *dev, const char *fs_type, struct csi_err *e)
{
  const char *ext4[]
      = { "mkfs.ext4", "-q", "-F", "-E", "nodiscard", dev, NULL };
  const char *xfs[] = { "mkfs.xfs", "-q", "-K", dev, NULL };
  const char *const *argv = strcmp (fs_type, "xfs") == 0 ? xfs : ext4;
  struct run_res r;
  if (!mnt_fs_supported (fs_type))
    return csi_fail (e, CSI_INVALID_ARGUMENT,
                     "fs_type %s: only ext4 and xfs are supported", fs_type);
  if (run_prog (argv, NULL, 0, TOOL_TIMEOUT, &r) < 0)
    return csi_fail (e, CSI_INTERNAL, "%s: %s", argv[0], strerror (errno));
  if (r.status != 0)
    return csi_fail (e, CSI_INTERNAL, "%s %s: %s", argv[0], dev, run_line (&r));
  return 0;
}

/* The generic options.  refused: the driver's own business. */
struct generic_opt {
  const char *name;
  unsigned long set, clear;
  bool refused;
};

#define ATIME_MODES (MS_NOATIME | MS_RELATIME | MS_STRICTATIME)

static const struct generic_opt generic[] = {
  { "ro", MS_RDONLY, 0, false },
  { "rw", 0, MS_RDONLY, false },
  { "nosuid", MS_NOSUID, 0, false },
  { "suid", 0, MS_NOSUID, false },
  { "nodev", MS_NODEV, 0, false },
  { "dev", 0, MS_NODEV, false },
  { "noexec", MS_NOEXEC, 0, false },
  { "exec", 0, MS_NOEXEC, false },
  { "sync", MS_SYNCHRONOUS, 0, false },
  { "async", 0, MS_SYNCHRONOUS, false },
  { "dirsync", MS_DIRSYNC, 0, false },
  { "noatime", MS_NOATIME, MS_RELATIME | MS_STRICTATIME, false },
  { "atime", 0, MS_NOATIME, false },
  { "nodiratime", MS_NODIRATIME, 0, false },
  { "diratime", 0, MS_NODIRATIME, false },
  { "relatime", MS_RELATIME, MS_NOATIME | MS_STRICTATIME, false },
  { "norelatime", 0, MS_RELATIME, false },
  { "strictatime", MS_STRICTATIME, MS_NOATIME | MS_RELATIME, false },
  { "lazytime", MS_LAZYTIME, 0, false },
  { "nolazytime", 0, MS_LAZYTIME, false },
  { "silent", MS_SILENT, 0, false },
  { "loud", 0, MS_SILENT, false },
  { "defaults", 0, 0, false },
  { "auto", 0, 0, false },
  { "noauto", 0, 0, false },
  { "nofail", 0, 0, false },
  { "_netdev", 0, 0, false },
  { "remount", 0, 0, true },
  { "bind", 0, 0, true },
  { "rbind", 0, 0, true },
  { "move", 0, 0, true },
  { "loop", 0, 0, true },
  { "shared", 0, 0, true },
  { "rshared", 0, 0, true },
  { "slave", 0, 0, true },
  { "rslave", 0, 0, true },
  { "private", 0, 0, true },
  { "rprivate", 0, 0, true },
  { "unbindable", 0, 0, true },
  { "runbindable", 0, 0, true },
};

/* The generic option opt (len bytes long), or NULL. */
static const struct generic_opt *
generic_find (const char *opt, size_t len)
{
  for (size_t i = 0; i < sizeof generic / sizeof generic[0]; i++)
    if (strlen (generic[i].name) == len
        && memcmp (generic[i].name, opt, len) == 0)
      return &generic[i];
  return NULL;
}

/* One option of len bytes: into o's flags or data (sized for all). */
static int
add_option (struct mnt_opts *o, const char *opt, size_t len, struct csi_err *e)
{
  const struct generic_opt *g = generic_find (opt, len);
  if (len == 0)
    return csi_fail (e, CSI_INVALID_ARGUMENT, "a mount flag is empty");
  if (g && g->refused)
    return csi_fail (e, CSI_INVALID_ARGUMENT,
                     "mount flag %s is not allowed: the driver makes its "
                     "own mounts",
                     g->name);
  if (g)
    {
      o->flags = (o->flags | g->set) & ~g->clear;
      o->named |= g->set | g->clear;
      return 0;
    }
  if (len >= 2 && memcmp (opt, "x-", 2) == 0) /* mount(8)'s own */
    return 0;
  size_t at = strlen (o->data);
  if (at)
    o->data[at++] = ',';
  memcpy (o->data + at, opt, len);
  o->data[at + len] = '\0';
  return 0;
}

/* Split flag at commas outside double quotes, as mount(8) does. */
static int
add_flag (struct mnt_opts *o, const char *flag, struct csi_err *e)
{
  bool quoted = false;
  const char *start = flag;
  for (const char *p = flag;; p++)
    {
      if (*p == '"')
        quoted = !quoted;
      else if ((*p == ',' && !quoted) || *p == '\0')
        {
          if (add_option (o, start, p - start, e) < 0)
            return -1;
          if (*p == '\0')
            return 0;
          start = p + 1;
        }
    }
}

int
mnt_opts_parse (const char *const *flags, size_t nflags, struct mnt_opts *o,
                struct csi_err *e)
{
  size_t len = 1;
  memset (o, 0, sizeof *o);
  for (size_t i = 0; i < nflags; i++)
    len += strlen (flags[i]) + 1;
  o->data = calloc (1, len);
  if (!o->data)
    return csi_fail (e, CSI_INTERNAL, "mount flags: %s", strerror (errno));
  for (size_t i = 0; i < nflags; i++)
    if (add_flag (o, flags[i], e) < 0)
      {
        mnt_opts_free (o);
        return -1;
      }
  if (!*o->data)
    {
      free (o->data);
      o->data = NULL;
    }
  return 0;
}

void
mnt_opts_free (struct mnt_opts *o)
{
  if (o->data)
    explicit_bzero (o->data, strlen (o->data));
  free (o->data);
  o->data = NULL;
}

int
mnt_flags_check (const char *const *flags, size_t nflags, struct csi_err *e)
{
  struct mnt_opts o;
  if (mnt_opts_parse (flags, nflags, &o, e) < 0)
    return -1;
  mnt_opts_free (&o);
  return 0;
}

int
mnt_mount (const char *dev, const char *path, const char *fs_type,
           const char *const *flags, size_t nflags, bool readonly,
           struct csi_err *e)
{
  struct mnt_opts o;
  if (mnt_opts_parse (flags, nflags, &o, e) < 0)
    return -1;
  /* A read-only access mode wins over a later "rw". */
  unsigned long ms = o.flags | (readonly ? MS_RDONLY : 0);
  bool fs_opts = o.data != NULL;
  int r = mount (dev, path, fs_type, ms, o.data);
  int err = errno;
  mnt_opts_free (&o);
  if (r == 0)
    return 0;
  if (err == EINVAL && fs_opts) /* the options are not named: secrets */
    return csi_fail (e, CSI_INVALID_ARGUMENT,
                     "mount %s on %s: %s refused the mount flags (or the "
                     "device holds no %s file system): %s",
                     dev, path, fs_type, fs_type, strerror (err));
  return csi_fail (e, CSI_INTERNAL, "mount %s on %s: %s", dev, path,
                   strerror (err));
}

/* The per-mount MS_* flags path has now (statvfs), or -1. */
static long
mount_flags_now (const char *path)
{
  static const struct {
    unsigned long st, ms;
  } map[] = {
    { ST_RDONLY, MS_RDONLY },     { ST_NOSUID, MS_NOSUID },
    { ST_NODEV, MS_NODEV },       { ST_NOEXEC, MS_NOEXEC },
    { ST_NOATIME, MS_NOATIME },   { ST_NODIRATIME, MS_NODIRATIME },
    { ST_RELATIME, MS_RELATIME },
  };
  struct statvfs sv;
  long ms = 0;
  if (statvfs (path, &sv) < 0)
    return -1;
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (sv.f_flag & map[i].st)
      ms |= map[i].ms;
  return ms;
}

#define PER_MOUNT                                                              \
  (MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NODIRATIME | ATIME_MODES)

/* Remount the bind mount target with the flags in named set as in
 * want, the others as they are (a bind mount starts with its source's).
 */
static int
bind_remount (const char *target, unsigned long want, unsigned long named,
              struct csi_err *e)
{
  long now = mount_flags_now (target);
  if (now < 0)
    return csi_fail (e, CSI_INTERNAL, "statvfs %s: %s", target,
                     strerror (errno));
  unsigned long ms = ((unsigned long)now & ~named) | (want & named);
  if (mount (NULL, target, NULL, MS_REMOUNT | MS_BIND | ms, NULL) < 0)
    return csi_fail (e, CSI_INTERNAL, "remount %s with its mount flags: %s",
                     target, strerror (errno));
  return 0;
}

int
mnt_bind (const char *src, const char *target, const char *const *flags,
          size_t nflags, bool readonly, struct csi_err *e)
{
  struct mnt_opts o;
  if (mnt_opts_parse (flags, nflags, &o, e) < 0)
    return -1;
  mnt_opts_free (&o); /* file-system options are the staging mount's */
  unsigned long want = (o.flags & PER_MOUNT) | (readonly ? MS_RDONLY : 0);
  unsigned long named = (o.named & PER_MOUNT) | (readonly ? MS_RDONLY : 0);
  if (mount (src, target, NULL, MS_BIND, NULL) < 0)
    return csi_fail (e, CSI_INTERNAL, "bind mount %s on %s: %s", src, target,
                     strerror (errno));
  if (named && bind_remount (target, want, named, e) < 0)
    {
      umount2 (target, 0);
      return -1;
    }
  return 0;
}

int
mnt_umount (const char *path, struct csi_err *e)
{
  if (umount2 (path, 0) == 0 || errno == EINVAL || errno == ENOENT)
    return 0;
  return csi_fail (e, CSI_INTERNAL, "umount %s: %s", path, strerror (errno));
}
