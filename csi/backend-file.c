/* hhc-csi: the file backend.  A volume is the sparse image DIR/NAME.img;
 * its claim is DIR/NAME.claim holding the node id on line 1.
 *
 * Both are made whole by claim-file.c (which the iscsi backend's claims
 * share): written under a hidden name, fsync'd and link()ed to their
 * final name, so two concurrent CreateVolumes (or two nodes claiming)
 * cannot overwrite each other and a crash leaves no empty claim.
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
#include "claim-file.h"

/* DIR/NAME.SUFFIX */
static void
file_path (const struct csi_volid *v, const char *suffix, char *out, size_t n)
{
  snprintf (out, n, "%s/%s.%s", v->backend->dir, v->name, suffix);
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
      return cf_fail_errno (e, "stat", path, errno);
    }
  *size = (uint64_t)st.st_size;
  return 0;
}

int
file_create (const struct csi_volid *v, uint64_t size, uint64_t *actual,
             bool *existed, struct csi_err *e)
{
  int r = cf_make_whole (v->backend->dir, v->name, "img", NULL, size, e);

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

int
file_delete (const struct csi_volid *v, struct csi_err *e)
{
  const char *dir = v->backend->dir;
  char path[4096];

  if (cf_claim_check (dir, v->name, v->id, e) == -1)
    return -1;
  file_path (v, "img", path, sizeof path);
  if (unlink (path) == -1)
    return errno == ENOENT ? 0 : cf_fail_errno (e, "unlink", path, errno);
  return cf_sync_dir (dir, e);
}

/* Only an existing volume is claimed. */
int
file_claim (const struct csi_volid *v, const char *node_id, struct csi_err *e)
{
  uint64_t size;

  if (file_size (v, &size, e) == -1)
    return -1;
  return cf_claim (v->backend->dir, v->name, v->id, node_id, e);
}

int
file_release (const struct csi_volid *v, const char *node_id, struct csi_err *e)
{
  return cf_release (v->backend->dir, v->name, v->id, node_id, e);
}

char *
file_gateway_json (const struct csi_volid *v, struct csi_err *e)
{
  char path[4096];

  file_path (v, "img", path, sizeof path);
  return backend_json_dump (
      json_pack ("{s:s, s:s}", "type", "file", "path", path), e);
}
