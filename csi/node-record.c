/* hhc-csi: the node's records of staged volumes (node.h "node-record.c").
 *
 * STATE/EXPORT.json holds what a stage has done so far; the step says
 * which of the later fields mean something:
 *
 *   step       fields that hold
 *   claimed    volume_id, export, staging_path, block, readonly, fs_type
 *   cred       + cred (a credentials file STATE/EXPORT.cred was written)
 *   added      (the gateway has the volume)
 *   attached   + attach, device, fuse_dir, fuse_pid, direct_io
 *   staged     (mounted on staging_path, or the device is the volume)
 *
 * The record names no secret and no mount flag.
 */
#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "node.h"

static const char *const kinds[] = { "none", "nbd", "loop" };

int
rec_file (const struct csi_node_conf *n, const char *export_name,
          const char *suffix, char *buf, size_t size)
{
  int len = snprintf (buf, size, "%s/%s%s", n->state_dir, export_name, suffix);
  return len < 0 || (size_t)len >= size ? -1 : 0;
}

static json_t *
rec_json (const struct rec *r)
{
  const struct attach *a = &r->att;
  return json_pack (
      "{s:i, s:s, s:s, s:s, s:b, s:b, s:b, s:s, s:s, s:s, s:s, s:I, s:b}",
      "step", (int)r->step, "volume_id", r->volume_id, "export", r->export_name,
      "staging_path", r->staging_path, "block", r->block, "readonly",
      r->readonly, "cred", r->cred, "fs_type", r->fs_type, "attach",
      kinds[a->kind], "device", a->dev, "fuse_dir", a->fuse_dir, "fuse_pid",
      (json_int_t)a->fuse_pid, "direct_io", a->direct_io);
}

int
rec_save (const struct csi_node_conf *n, const struct rec *r, struct csi_err *e)
{
  char path[4200], tmp[4200];
  if (rec_file (n, r->export_name, ".json", path, sizeof path) < 0
      || rec_file (n, r->export_name, ".json.tmp", tmp, sizeof tmp) < 0)
    return csi_fail (e, CSI_INTERNAL, "%s: state path too long",
                     r->export_name);
  json_t *j = rec_json (r);
  int fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  int ok = j && fd >= 0 && json_dumpfd (j, fd, JSON_INDENT (2)) == 0
           && write (fd, "\n", 1) == 1 && fsync (fd) == 0;
  int err = errno;
  json_decref (j);
  if (fd >= 0)
    close (fd);
  if (!ok || rename (tmp, path) < 0)
    {
      err = ok ? errno : err;
      unlink (tmp);
      return csi_fail (e, CSI_INTERNAL, "write %s: %s", path, strerror (err));
    }
  return 0;
}

/* Copy string member key of j into buf (size bytes); -1 when absent. */
static int
get_str (json_t *j, const char *key, char *buf, size_t size)
{
  const char *s = json_string_value (json_object_get (j, key));
  if (!s || strlen (s) >= size)
    return -1;
  strcpy (buf, s);
  return 0;
}

static int
rec_parse (json_t *j, struct rec *r)
{
  struct attach *a = &r->att;
  char kind[8];
  json_int_t step, pid;
  int block, ro, cred, dio;
  if (json_unpack (j, "{s:I, s:b, s:b, s:b, s:I, s:b}", "step", &step, "block",
                   &block, "readonly", &ro, "cred", &cred, "fuse_pid", &pid,
                   "direct_io", &dio)
          < 0
      || step < REC_CLAIMED || step > REC_STAGED)
    return -1;
  if (get_str (j, "volume_id", r->volume_id, sizeof r->volume_id) < 0
      || get_str (j, "export", r->export_name, sizeof r->export_name) < 0
      || get_str (j, "staging_path", r->staging_path, sizeof r->staging_path)
             < 0
      || get_str (j, "fs_type", r->fs_type, sizeof r->fs_type) < 0
      || get_str (j, "attach", kind, sizeof kind) < 0
      || get_str (j, "device", a->dev, sizeof a->dev) < 0
      || get_str (j, "fuse_dir", a->fuse_dir, sizeof a->fuse_dir) < 0)
    return -1;
  r->step = (enum rec_step)step;
  r->block = block, r->readonly = ro, r->cred = cred;
  a->fuse_pid = (pid_t)pid, a->direct_io = dio;
  a->kind = ATTACH_NONE;
  for (int k = 0; k < 3; k++)
    if (strcmp (kind, kinds[k]) == 0)
      a->kind = (enum attach_kind)k;
  return 0;
}

int
rec_load (const struct csi_node_conf *n, const char *export_name, struct rec *r,
          struct csi_err *e)
{
  char path[4200];
  json_error_t je;
  memset (r, 0, sizeof *r);
  if (rec_file (n, export_name, ".json", path, sizeof path) < 0)
    return csi_fail (e, CSI_INTERNAL, "%s: state path too long", export_name);
  if (access (path, F_OK) < 0 && errno == ENOENT)
    return 1;
  json_t *j = json_load_file (path, 0, &je);
  if (!j)
    return csi_fail (e, CSI_INTERNAL, "%s:%d: %s", path, je.line, je.text);
  int rc = rec_parse (j, r);
  json_decref (j);
  if (rc < 0)
    return csi_fail (e, CSI_INTERNAL, "%s: not a record of hhc-csi", path);
  return 0;
}

int
rec_delete (const struct csi_node_conf *n, const char *export_name,
            struct csi_err *e)
{
  char path[4200];
  if (rec_file (n, export_name, ".json", path, sizeof path) < 0)
    return csi_fail (e, CSI_INTERNAL, "%s: state path too long", export_name);
  if (unlink (path) < 0 && errno != ENOENT)
    return csi_fail (e, CSI_INTERNAL, "unlink %s: %s", path, strerror (errno));
  return 0;
}

int
rec_count (const struct csi_node_conf *n, struct csi_err *e)
{
  DIR *d = opendir (n->state_dir);
  if (!d)
    return csi_fail (e, CSI_INTERNAL, "%s: %s", n->state_dir, strerror (errno));
  int count = 0;
  struct dirent *de;
  while ((de = readdir (d)) != NULL)
    {
      size_t len = strlen (de->d_name);
      count += len > 5 && strcmp (de->d_name + len - 5, ".json") == 0;
    }
  closedir (d);
  return count;
}

int
node_volume (const struct csi_conf *c, const char *volume_id,
             struct csi_volid *v, struct csi_err *e)
{
  if (!volume_id || !*volume_id)
    return csi_fail (e, CSI_INVALID_ARGUMENT, "volume_id is missing");
  if (csi_volid_parse (c, volume_id, v, e) < 0)
    return -1;
  if (!c->have_node)
    return csi_fail (e, CSI_FAILED_PRECONDITION,
                     "hhc-csi has no node configuration (\"node\" in %s)",
                     c->file);
  return 0;
}
