/* hhc-csi: NodePublishVolume, NodeUnpublishVolume, NodeGetVolumeStats.
 *
 * A publish is a bind mount of the staging path (mount access) or of
 * the staged device (block access: onto a file) at the target path,
 * remounted read-only when asked.  Nothing is recorded for it: the
 * mount table is the record.  A path counts as a publish of a volume
 * for NodeGetVolumeStats when it is a mount point and it shows the
 * staged file system (the same st_dev as the staging path) or the
 * staged device (the same st_rdev).
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "lock.h"
#include "node.h"

/* The volume's complete record, or FAILED_PRECONDITION (code). */
static int
staged_rec (const struct csi_conf *c, const char *volume_id, struct rec *rec,
            enum csi_code code, struct csi_err *e)
{
  struct csi_volid v;
  if (node_volume (c, volume_id, &v, e) < 0)
    return -1;
  int have = rec_load (&c->node, v.export_name, rec, e);
  if (have < 0)
    return -1;
  if (have == 1 || rec->step != REC_STAGED)
    return csi_fail (e, code, "volume %s is not staged on this node", v.id);
  return 0;
}

/* Make the target: a directory (mount) or a file (block). 1 when it
 * was made here, 0 when it was there.
 */
static int
make_target (const char *target, bool block, struct csi_err *e)
{
  struct stat st;
  if (stat (target, &st) == 0)
    {
      if (block ? S_ISDIR (st.st_mode) : !S_ISDIR (st.st_mode))
        return csi_fail (e, CSI_INVALID_ARGUMENT, "%s: not a %s", target,
                         block ? "file" : "directory");
      return 0;
    }
  if (!block && mkdir (target, 0750) < 0)
    return csi_fail (e, CSI_INTERNAL, "mkdir %s: %s", target, strerror (errno));
  if (block)
    {
      int fd = open (target, O_WRONLY | O_CREAT | O_CLOEXEC, 0640);
      if (fd < 0)
        return csi_fail (e, CSI_INTERNAL, "%s: %s", target, strerror (errno));
      close (fd);
    }
  return 1;
}

/* Whether path shows the staged volume of rec. */
static bool
is_publish_of (const struct rec *rec, const char *path)
{
  struct stat a, b;
  if (mnt_is_mounted (path) != 1 || stat (path, &a) < 0)
    return false;
  if (rec->block)
    return stat (rec->att.dev, &b) == 0 && S_ISBLK (a.st_mode)
           && a.st_rdev == b.st_rdev;
  return stat (rec->staging_path, &b) == 0 && a.st_dev == b.st_dev;
}

int
csi_node_publish (const struct csi_conf *c, const struct csi_publish_req *r,
                  struct csi_err *e)
{
  HHC_SCOPED_LOCK (&node_lock);
  struct rec rec;
  if (!r->target_path || !*r->target_path)
    return csi_fail (e, CSI_INVALID_ARGUMENT, "target_path is missing");
  if (!r->staging_path || !*r->staging_path)
    return csi_fail (e, CSI_INVALID_ARGUMENT, "staging_target_path is missing");
  if (staged_rec (c, r->volume_id, &rec, CSI_FAILED_PRECONDITION, e) < 0)
    return -1;
  if (!node_same_path (rec.staging_path, r->staging_path))
    return csi_fail (e, CSI_FAILED_PRECONDITION, "volume %s is staged at %s",
                     rec.volume_id, rec.staging_path);
  if (rec.block != r->block)
    return csi_fail (e, CSI_INVALID_ARGUMENT,
                     "volume %s is staged with another access type",
                     rec.volume_id);
  if (mnt_is_mounted (r->target_path) == 1)
    return is_publish_of (&rec, r->target_path)
               ? 0
               : csi_fail (e, CSI_ALREADY_EXISTS,
                           "%s holds another mount than volume %s",
                           r->target_path, rec.volume_id);
  int made = make_target (r->target_path, r->block, e);
  if (made < 0)
    return -1;
  const char *src = r->block ? rec.att.dev : rec.staging_path;
  if (mnt_bind (src, r->target_path, r->mount_flags, r->nflags,
                r->readonly || rec.readonly, e)
      == 0)
    return 0;
  if (made)
    remove (r->target_path);
  return -1;
}

int
csi_node_unpublish (const struct csi_conf *c, const char *volume_id,
                    const char *target_path, struct csi_err *e)
{
  HHC_SCOPED_LOCK (&node_lock);
  struct csi_volid v;
  if (!volume_id || !*volume_id)
    return csi_fail (e, CSI_INVALID_ARGUMENT, "volume_id is missing");
  if (!target_path || !*target_path)
    return csi_fail (e, CSI_INVALID_ARGUMENT, "target_path is missing");
  if (csi_volid_parse (c, volume_id, &v, e) < 0)
    return -1;
  /* Stacked mounts of one target (a publish repeated by hand) all go. */
  for (int i = 0; i < 16 && mnt_is_mounted (target_path) == 1; i++)
    if (mnt_umount (target_path, e) < 0)
      return -1;
  if (remove (target_path) < 0 && errno != ENOENT)
    return csi_fail (e, CSI_INTERNAL, "remove %s: %s", target_path,
                     strerror (errno));
  return 0;
}

int
csi_node_stats (const struct csi_conf *c, const char *volume_id,
                const char *volume_path, struct csi_stats *st,
                struct csi_err *e)
{
  HHC_SCOPED_LOCK (&node_lock);
  struct rec rec;
  struct statvfs sv;
  memset (st, 0, sizeof *st);
  if (!volume_path || !*volume_path)
    return csi_fail (e, CSI_INVALID_ARGUMENT, "volume_path is missing");
  if (staged_rec (c, volume_id, &rec, CSI_NOT_FOUND, e) < 0)
    return -1;
  if (!is_publish_of (&rec, volume_path)
      && !node_same_path (volume_path, rec.staging_path))
    return csi_fail (e, CSI_NOT_FOUND, "%s: not a path of volume %s",
                     volume_path, rec.volume_id);
  st->block = rec.block;
  if (rec.block)
    return attach_dev_size (rec.att.dev, &st->bytes_total, e);
  if (statvfs (volume_path, &sv) < 0)
    return csi_fail (e, CSI_INTERNAL, "statvfs %s: %s", volume_path,
                     strerror (errno));
  st->bytes_total = (uint64_t)sv.f_blocks * sv.f_frsize;
  st->bytes_avail = (uint64_t)sv.f_bavail * sv.f_frsize;
  st->bytes_used = (uint64_t)(sv.f_blocks - sv.f_bfree) * sv.f_frsize;
  st->inodes_total = sv.f_files;
  st->inodes_avail = sv.f_favail;
  st->inodes_used = sv.f_files - sv.f_ffree;
  return 0;
}
