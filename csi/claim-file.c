/* hhc-csi: files made whole in a directory, and claims (claim-file.h).
 *
 * A file is made whole under a hidden name (DIR/.NAME.SUFFIX.XXXXXX:
 * written, fsync'd) and then link()ed to its final name, which fails
 * with EEXIST when the name is taken: two concurrent CreateVolumes (or
 * two nodes claiming) cannot overwrite each other, and a crash leaves
 * either no file or a whole one, never an empty claim.  DIR is fsync'd
 * after each name is made or removed.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "claim-file.h"

int
cf_fail_errno (struct csi_err *e, const char *what, const char *path, int err)
{
  enum csi_code code = CSI_INTERNAL;

  if (err == ENOSPC || err == EDQUOT)
    code = CSI_RESOURCE_EXHAUSTED;
  return csi_fail (e, code, "%s %s: %s", what, path, strerror (err));
}

int
cf_sync_dir (const char *dir, struct csi_err *e)
{
  int fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  if (fd == -1 || fsync (fd) == -1)
    {
      int err = errno;
      if (fd != -1)
        close (fd);
      return cf_fail_errno (e, "fsync", dir, err);
    }
  close (fd);
  return 0;
}

int
cf_make_whole (const char *dir, const char *name, const char *suffix,
               const char *text, uint64_t size, struct csi_err *e)
{
  char path[4096], tmp[4096];
  size_t len = text ? strlen (text) : 0;
  int fd, r = 0;

  snprintf (path, sizeof path, "%s/%s.%s", dir, name, suffix);
  snprintf (tmp, sizeof tmp, "%s/.%s.%s.XXXXXX", dir, name, suffix);
  fd = mkstemp (tmp);
  if (fd == -1)
    return cf_fail_errno (e, "create", tmp, errno);
  if ((text && write (fd, text, len) != (ssize_t)len)
      || (!text && ftruncate (fd, (off_t)size) == -1) || fsync (fd) == -1)
    r = cf_fail_errno (e, "write", tmp, errno ? errno : EIO);
  else if (link (tmp, path) == -1)
    r = errno == EEXIST ? 1 : cf_fail_errno (e, "link", path, errno);
  close (fd);
  unlink (tmp);
  if (r == 0 && cf_sync_dir (dir, e) == -1)
    return -1;
  return r;
}

int
cf_claim_read (const char *dir, const char *name, char *owner, size_t n,
               struct csi_err *e)
{
  char path[4096];
  FILE *f;

  snprintf (path, sizeof path, "%s/%s.claim", dir, name);
  f = fopen (path, "re");
  if (f == NULL)
    return errno == ENOENT ? 0 : cf_fail_errno (e, "open", path, errno);
  if (fgets (owner, (int)n, f) == NULL)
    owner[0] = '\0';
  fclose (f);
  owner[strcspn (owner, "\n")] = '\0';
  return 1;
}

static int
staged_on (struct csi_err *e, const char *volid, const char *owner)
{
  return csi_fail (e, CSI_FAILED_PRECONDITION, "volume %s is staged on node %s",
                   volid, owner);
}

int
cf_claim_check (const char *dir, const char *name, const char *volid,
                struct csi_err *e)
{
  char owner[256];
  int r = cf_claim_read (dir, name, owner, sizeof owner, e);

  return r == 1 ? staged_on (e, volid, owner) : r;
}

int
cf_claim (const char *dir, const char *name, const char *volid,
          const char *node_id, struct csi_err *e)
{
  char text[512], owner[256];
  int r;

  snprintf (text, sizeof text, "%s\n", node_id);
  r = cf_make_whole (dir, name, "claim", text, 0, e);
  if (r != 1)
    return r;
  r = cf_claim_read (dir, name, owner, sizeof owner, e);
  if (r == -1)
    return -1;
  if (r == 0) /* released meanwhile: try once more */
    return cf_make_whole (dir, name, "claim", text, 0, e) == 0
               ? 0
               : csi_fail (e, CSI_ABORTED, "volume %s: claim raced", volid);
  if (strcmp (owner, node_id) == 0)
    return 0;
  return staged_on (e, volid, owner);
}

int
cf_release (const char *dir, const char *name, const char *volid,
            const char *node_id, struct csi_err *e)
{
  char path[4096], owner[256];
  int r = cf_claim_read (dir, name, owner, sizeof owner, e);

  if (r <= 0)
    return r;
  if (strcmp (owner, node_id) != 0)
    return staged_on (e, volid, owner);
  snprintf (path, sizeof path, "%s/%s.claim", dir, name);
  if (unlink (path) == -1 && errno != ENOENT)
    return cf_fail_errno (e, "unlink", path, errno);
  return cf_sync_dir (dir, e);
}
