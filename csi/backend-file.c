/* hhc-csi: the file backend.  A volume is the sparse image DIR/NAME.img;
 * its claim is DIR/NAME.claim holding the node id on line 1.
 *
 * Both are made whole under a hidden name (DIR/.NAME.img.XXXXXX:
 * written, fsync'd) and then link()ed to their final name, which fails
 * with EEXIST when the name is taken: two concurrent CreateVolumes (or
 * two nodes claiming) cannot overwrite each other, and a crash leaves
 * either no file or a whole one, never an empty claim.  DIR is fsync'd
 * after each name is made or removed.
 *
 * A delete checks the claim, then unlinks the image: a claim made in
 * between (a stage racing a delete) is left behind, and stage finds no
 * image.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "backend-int.h"

/* DIR/NAME.SUFFIX */
static void
file_path (const struct csi_volid *v, const char *suffix, char *out, size_t n)
{
  snprintf (out, n, "%s/%s.%s", v->backend->dir, v->name, suffix);
}

static int
fail_errno (struct csi_err *e, const char *what, const char *path, int err)
{
  enum csi_code code = CSI_INTERNAL;

  if (err == ENOSPC || err == EDQUOT)
    code = CSI_RESOURCE_EXHAUSTED;
  return csi_fail (e, code, "file: %s %s: %s", what, path, strerror (err));
}

static int
sync_dir (const struct csi_volid *v, struct csi_err *e)
{
  int fd = open (v->backend->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  if (fd == -1 || fsync (fd) == -1)
    {
      int err = errno;
      if (fd != -1)
        close (fd);
      return fail_errno (e, "fsync", v->backend->dir, err);
    }
  close (fd);
  return 0;
}

/* Make DIR/NAME.SUFFIX holding TEXT (or SIZE bytes of hole when TEXT
 * is NULL) unless it exists.  0 made, 1 it existed, -1 error.
 */
static int
make_whole (const struct csi_volid *v, const char *suffix, const char *text,
            uint64_t size, struct csi_err *e)
{
  char path[4096], tmp[4096];
  size_t len = text ? strlen (text) : 0;
  int fd, r = 0;

  file_path (v, suffix, path, sizeof path);
  snprintf (tmp, sizeof tmp, "%s/.%s.%s.XXXXXX", v->backend->dir, v->name,
            suffix);
  fd = mkstemp (tmp);
  if (fd == -1)
    return fail_errno (e, "create", tmp, errno);
  if ((text && write (fd, text, len) != (ssize_t)len)
      || (!text && ftruncate (fd, (off_t)size) == -1) || fsync (fd) == -1)
    r = fail_errno (e, "write", tmp, errno ? errno : EIO);
  else if (link (tmp, path) == -1)
    r = errno == EEXIST ? 1 : fail_errno (e, "link", path, errno);
  close (fd);
  unlink (tmp);
  if (r == 0 && sync_dir (v, e) == -1)
    return -1;
  return r;
}

int
file_size (const struct csi_volid *v, uint64_t *size, struct csi_err *e)
{
  char path[4096];
  struct stat st;

  file_path (v, "img", path, sizeof path);
  if (stat (path, &st) == -1)
    {
      if (errno == ENOENT)
        return csi_fail (e, CSI_NOT_FOUND, "volume %s does not exist", v->id);
      return fail_errno (e, "stat", path, errno);
    }
  *size = (uint64_t)st.st_size;
  return 0;
}

int
file_create (const struct csi_volid *v, uint64_t size, uint64_t *actual,
             bool *existed, struct csi_err *e)
{
  int r = make_whole (v, "img", NULL, size, e);

  if (r == -1)
    return -1;
  *existed = r == 1;
  if (r == 0)
    {
      *actual = size;
      return 0;
    }
  return file_size (v, actual, e);
}

/* The node id in the claim: 1 and OWNER, 0 no claim, -1 error. */
static int
read_claim (const struct csi_volid *v, char *owner, size_t n, struct csi_err *e)
{
  char path[4096];
  FILE *f;

  file_path (v, "claim", path, sizeof path);
  f = fopen (path, "re");
  if (f == NULL)
    return errno == ENOENT ? 0 : fail_errno (e, "open", path, errno);
  if (fgets (owner, (int)n, f) == NULL)
    owner[0] = '\0';
  fclose (f);
  owner[strcspn (owner, "\n")] = '\0';
  return 1;
}

int
file_delete (const struct csi_volid *v, struct csi_err *e)
{
  char path[4096], owner[256];
  int r = read_claim (v, owner, sizeof owner, e);

  if (r == -1)
    return -1;
  if (r == 1)
    return csi_fail (e, CSI_FAILED_PRECONDITION,
                     "volume %s is staged on node %s", v->id, owner);
  file_path (v, "img", path, sizeof path);
  if (unlink (path) == -1)
    return errno == ENOENT ? 0 : fail_errno (e, "unlink", path, errno);
  return sync_dir (v, e);
}

int
file_claim (const struct csi_volid *v, const char *node_id, struct csi_err *e)
{
  char text[512], owner[256];
  uint64_t size;
  int r;

  if (file_size (v, &size, e) == -1)
    return -1;
  snprintf (text, sizeof text, "%s\n", node_id);
  r = make_whole (v, "claim", text, 0, e);
  if (r != 1)
    return r;
  r = read_claim (v, owner, sizeof owner, e);
  if (r == -1)
    return -1;
  if (r == 0) /* released meanwhile: try once more */
    return make_whole (v, "claim", text, 0, e) == 0
               ? 0
               : csi_fail (e, CSI_ABORTED, "volume %s: claim raced", v->id);
  if (strcmp (owner, node_id) == 0)
    return 0;
  return csi_fail (e, CSI_FAILED_PRECONDITION, "volume %s is staged on node %s",
                   v->id, owner);
}

int
file_release (const struct csi_volid *v, const char *node_id, struct csi_err *e)
{
  char path[4096], owner[256];
  int r = read_claim (v, owner, sizeof owner, e);

  if (r <= 0)
    return r;
  if (strcmp (owner, node_id) != 0)
    return csi_fail (e, CSI_FAILED_PRECONDITION,
                     "volume %s is staged on node %s", v->id, owner);
  file_path (v, "claim", path, sizeof path);
  if (unlink (path) == -1 && errno != ENOENT)
    return fail_errno (e, "unlink", path, errno);
  return sync_dir (v, e);
}

char *
file_gateway_json (const struct csi_volid *v, struct csi_err *e)
{
  char path[4096];

  file_path (v, "img", path, sizeof path);
  return backend_json_dump (
      json_pack ("{s:s, s:s}", "type", "file", "path", path), e);
}
