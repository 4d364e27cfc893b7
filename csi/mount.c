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
 * would go through the gateway as a trim of the whole volume.  Mount
 * flags go to mount(8) as its -o and are never part of a message.
 */
#include <config.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>

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

/* The flags joined by commas (plus "ro"), malloc'd; NULL for none. */
static char *
join_flags (const char *const *flags, size_t nflags, bool readonly)
{
  size_t len = readonly ? 3 : 1;
  for (size_t i = 0; i < nflags; i++)
    len += strlen (flags[i]) + 1;
  if (len == 1)
    return NULL;
  char *s = calloc (1, len);
  if (!s)
    return NULL;
  if (readonly)
    strcpy (s, "ro");
  for (size_t i = 0; i < nflags; i++)
    {
      if (*s)
        strcat (s, ",");
      strcat (s, flags[i]);
    }
  return s;
}

int
mnt_mount (const char *dev, const char *path, const char *fs_type,
           const char *const *flags, size_t nflags, bool readonly,
           struct csi_err *e)
{
  HHC_CLEANUP_FREE char *opts = join_flags (flags, nflags, readonly);
  const char *argv[9] = { "mount", "-t", fs_type };
  size_t n = 3;
  if (opts)
    {
      argv[n++] = "-o";
      argv[n++] = opts;
    }
  argv[n++] = dev;
  argv[n++] = path;
  struct run_res r;
  if (run_prog (argv, NULL, 0, TOOL_TIMEOUT, &r) < 0)
    return csi_fail (e, CSI_INTERNAL, "mount: %s", strerror (errno));
  if (r.status != 0) /* mount(8)'s message names no option */
    return csi_fail (e, CSI_INTERNAL, "mount %s on %s: %s", dev, path,
                     run_line (&r));
  return 0;
}

int
mnt_bind (const char *src, const char *target, bool readonly, struct csi_err *e)
{
  if (mount (src, target, NULL, MS_BIND, NULL) < 0)
    return csi_fail (e, CSI_INTERNAL, "bind mount %s on %s: %s", src, target,
                     strerror (errno));
  if (readonly
      && mount (NULL, target, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) < 0)
    {
      int err = errno;
      umount2 (target, 0);
      return csi_fail (e, CSI_INTERNAL, "remount %s read-only: %s", target,
                       strerror (err));
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
