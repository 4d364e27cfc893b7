/* hhc-csi: NodeStageVolume and NodeUnstageVolume (csi.h "Node").
 *
 * A stage is a chain of steps, each recorded in STATE/EXPORT.json
 * (node-record.c) as soon as it is done:
 *
 *   step      done by                      undone by
 *   claimed   backend_claim                backend_release
 *   cred      STATE/EXPORT.cred (0600)     unlink
 *   added     hhcctl volume add            hhcctl volume remove --drain,
 *                                          then the cache and logs unlinked
 *   attached  attach_device                attach_detach
 *   staged    mkfs when blank, mount       umount
 *
 * teardown undoes from the recorded step down, saving the record after
 * each step, so an unstage whose drain fails keeps the record at
 * "added" and a retry goes on from there; a stage that fails part-way
 * runs the same teardown.  A record that is not "staged" when a stage
 * comes (hhc-csi died part-way) is torn down first.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "cleanup.h"
#include "lock.h"
#include "node.h"

pthread_mutex_t node_lock = PTHREAD_MUTEX_INITIALIZER;

bool
node_same_path (const char *a, const char *b)
{
  size_t la = strlen (a), lb = strlen (b);
  while (la > 1 && a[la - 1] == '/')
    la--;
  while (lb > 1 && b[lb - 1] == '/')
    lb--;
  return la == lb && memcmp (a, b, la) == 0;
}

/* Read STATE/EXPORT.cred back as the secrets map backend_release
 * wants (the unstage request carries no secrets).
 */
static int
read_cred (const char *file, char *ak, char *sk, size_t size)
{
  FILE *f = fopen (file, "re");
  if (!f)
    return -1;
  bool ok = fgets (ak, size, f) && fgets (sk, size, f);
  fclose (f);
  ak[strcspn (ak, "\n")] = sk[strcspn (sk, "\n")] = '\0';
  return ok ? 0 : -1;
}

/* Release the claim (with the secrets the cred file holds), unlink
 * the cred file and the record.
 */
static int
unclaim (const struct csi_conf *c, const char *node_id,
         const struct csi_volid *v, struct csi_err *e)
{
  const struct csi_node_conf *n = &c->node;
  char cred[PATH_MAX], ak[1024] = "", sk[1024] = "";
  rec_file (n, v->export_name, ".cred", cred, sizeof cred);
  struct csi_kv kv[2] = { { "access_key", ak }, { "secret_key", sk } };
  struct csi_map secrets = { kv, read_cred (cred, ak, sk, 1024) == 0 ? 2 : 0 };
  int r = backend_release (v, node_id, &secrets, e);
  memset (ak, 0, sizeof ak), memset (sk, 0, sizeof sk);
  if (r < 0)
    return -1;
  if (unlink (cred) < 0 && errno != ENOENT)
    return csi_fail (e, CSI_INTERNAL, "unlink %s: %s", cred, strerror (errno));
  return rec_delete (n, v->export_name, e);
}

/* Unmount the staging path.  When the device no longer reaches the
 * gateway (it restarted after a crash: neither nbdfuse nor an NBD
 * connection reconnects), the unmount's own writes are lost, but the
 * file system's journal is in the volume with everything fsync'd:
 * the volume is attached afresh, mounted (the journal replayed) and
 * unmounted again, so that the drain leaves a clean file system in
 * the backend.
 */
static int
unmount_staged (const struct csi_conf *c, struct rec *rec, struct csi_err *e)
{
  const struct csi_node_conf *n = &c->node;
  char fuse[PATH_MAX];
  bool lost = !attach_reaches (rec->att.dev);
  if (mnt_umount (rec->staging_path, e) < 0)
    return -1; /* busy: nothing is detached under a live mount */
  if (!lost)
    return 0;
  csi_log ("volume %s: its device lost the gateway: attached again to "
           "replay the file system's journal",
           rec->volume_id);
  rec->step = REC_ATTACHED;
  if (attach_detach (n, &rec->att, e) < 0)
    return -1;
  rec->step = REC_ADDED;
  rec_file (n, rec->export_name, ".fuse", fuse, sizeof fuse);
  if (rec_save (n, rec, e) < 0
      || attach_device (n, rec->export_name, fuse, false, &rec->att, e) < 0)
    return -1;
  rec->step = REC_ATTACHED;
  if (rec_save (n, rec, e) < 0
      || mnt_mount (rec->att.dev, rec->staging_path, rec->fs_type, NULL, 0,
                    false, e)
             < 0)
    return -1;
  return mnt_umount (rec->staging_path, e);
}

/* Undo rec's steps from the last one down (the table above). */
static int
teardown (const struct csi_conf *c, const char *node_id,
          const struct csi_volid *v, struct rec *rec, struct csi_err *e)
{
  const struct csi_node_conf *n = &c->node;
  /* "attached" may be mounted too (hhc-csi died between the mount and
   * saving "staged").
   */
  if (!rec->block
      && (rec->step == REC_STAGED
          || (rec->step == REC_ATTACHED
              && mnt_is_mounted (rec->staging_path) == 1))
      && unmount_staged (c, rec, e) < 0)
    return -1;
  if (rec->step >= REC_ATTACHED && dev_mounted_elsewhere (rec->att.dev, e) < 0)
    return -1;
  if (rec->step >= REC_ATTACHED)
    {
      rec->step = REC_ATTACHED;
      if (attach_detach (n, &rec->att, e) < 0)
        return -1;
      rec->step = REC_ADDED;
      if (rec_save (n, rec, e) < 0)
        return -1;
    }
  if (rec->step == REC_ADDED)
    {
      if (gateway_remove (n, v->export_name, true, e) < 0
          || gateway_remove_files (n, v->export_name, e) < 0)
        return -1;
      rec->step = REC_CRED;
      if (rec_save (n, rec, e) < 0)
        return -1;
    }
  /* Never a claim dropped while this node keeps a cache of the volume:
   * another node may then write the backend, and the cache would serve
   * stale blocks here (the files of a stage that failed before its add
   * went through, say).
   */
  if (gateway_remove_files (n, v->export_name, e) < 0)
    return -1;
  return unclaim (c, node_id, v, e);
}

/* ---- Stage ---- */

/* STATE/EXPORT.cred: access_key, secret_key, one a line, mode 0600. */
static int
write_cred (const struct csi_node_conf *n, const struct csi_volid *v,
            const struct csi_map *secrets, struct csi_err *e)
{
  static const char *const keys[] = { "access_key", "secret_key" };
  char path[PATH_MAX];
  for (int i = 0; i < 2; i++)
    if (!csi_map_get (secrets, keys[i]))
      return csi_fail (e, CSI_INVALID_ARGUMENT,
                       "volume %s: secret %s is missing", v->id, keys[i]);
  rec_file (n, v->export_name, ".cred", path, sizeof path);
  unlink (path); /* a stale one: rewritten, never followed */
  int fd
      = open (path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return csi_fail (e, CSI_INTERNAL, "%s: %s", path, strerror (errno));
  FILE *f = fdopen (fd, "w");
  int ok = f
           && fprintf (f, "%s\n%s\n", csi_map_get (secrets, keys[0]),
                       csi_map_get (secrets, keys[1]))
                  > 0
           && fflush (f) == 0 && fsync (fd) == 0;
  int err = errno;
  if (f ? fclose (f) != 0 : close (fd) != 0)
    ok = 0;
  if (!ok)
    {
      unlink (path);
      return csi_fail (e, CSI_INTERNAL, "write %s: %s", path, strerror (err));
    }
  return 0;
}

/* What a stage request means, checked before anything is done. */
struct stage {
  const struct csi_stage_req *r;
  struct csi_volid v;
  struct csi_params p;
  const char *fs_type;
  struct gw_vol g;
};

/* A size from the volume context, or the node's default. */
static int
ctx_size (const char *key, const char *s, uint64_t dflt, uint64_t *out,
          struct csi_err *e)
{
  *out = dflt;
  if (s && csi_parse_size (s, out) < 0)
    return csi_fail (e, CSI_INVALID_ARGUMENT, "%s %s: not a size", key, s);
  return 0;
}

static int
stage_check (const struct csi_conf *c, struct stage *s, struct csi_err *e)
{
  const struct csi_stage_req *r = s->r;
  struct stat st;
  if (!r->staging_path || !*r->staging_path)
    return csi_fail (e, CSI_INVALID_ARGUMENT, "staging_target_path is missing");
  if (node_volume (c, r->volume_id, &s->v, e) < 0)
    return -1;
  s->g.v = &s->v;
  if (stat (r->staging_path, &st) < 0 || !S_ISDIR (st.st_mode))
    return csi_fail (e, CSI_INVALID_ARGUMENT, "%s: not a directory",
                     r->staging_path);
  if (csi_params_parse (&r->context, &s->p, e) < 0)
    return -1;
  s->fs_type = r->fs_type && *r->fs_type ? r->fs_type : "ext4";
  if (!r->block && !mnt_fs_supported (s->fs_type))
    return csi_fail (e, CSI_INVALID_ARGUMENT,
                     "fs_type %s: only ext4 and xfs are supported", s->fs_type);
  if (!r->block && mnt_flags_check (r->mount_flags, r->nflags, e) < 0)
    return -1;
  s->g.mode = s->p.mode ? s->p.mode : c->node.mode ? c->node.mode : "hhc";
  if (ctx_size ("cacheSize", s->p.cache_size, c->node.cache_size,
                &s->g.cache_size, e)
          < 0
      || ctx_size ("logSize", s->p.log_size, c->node.log_size, &s->g.log_size,
                   e)
             < 0)
    return -1;
  return 0;
}

/* mkfs when blank, then mount on the staging path. */
static int
stage_mount (const struct stage *s, const char *dev, struct csi_err *e)
{
  int has = mnt_has_fs (dev, e);
  if (has < 0)
    return -1;
  if (!has)
    {
      /* blkid finds nothing on a device it cannot read, too: a file
       * system is made only on one that reads, and reads as zeros.
       */
      int blank = dev_reads_blank (dev, e);
      if (blank < 0)
        return -1;
      if (blank == 0)
        return csi_fail (e, CSI_FAILED_PRECONDITION,
                         "volume %s holds data but no file system blkid "
                         "recognises: not formatting it",
                         s->v.id);
      if (mnt_mkfs (dev, s->fs_type, e) < 0)
        return -1;
    }
  return mnt_mount (dev, s->r->staging_path, s->fs_type, s->r->mount_flags,
                    s->r->nflags, s->r->readonly, e);
}

/* The steps after the claim, the record saved after each. */
static int
stage_steps (const struct csi_conf *c, const struct stage *s, struct rec *rec,
             struct csi_err *e)
{
  const struct csi_node_conf *n = &c->node;
  char cred[PATH_MAX], fuse[PATH_MAX];
  rec_file (n, s->v.export_name, ".cred", cred, sizeof cred);
  rec_file (n, s->v.export_name, ".fuse", fuse, sizeof fuse);
  rec->cred = backend_needs_credentials (&s->v);
  if (rec->cred && write_cred (n, &s->v, &s->r->secrets, e) < 0)
    return -1;
  /* A fresh add: no cache or log of an earlier life may be picked up
   * (its clean blocks may be stale by now); format refuses if they hold
   * data the backend lacks.
   */
  if (rec->step < REC_ADDED
      && gateway_remove_files (n, s->v.export_name, e) < 0)
    return -1;
  rec->step = rec->step > REC_CRED ? rec->step : REC_CRED;
  if (rec_save (n, rec, e) < 0)
    return -1;
  if (gateway_add (n, &s->g, rec->cred ? cred : NULL, e) < 0)
    {
      /* It may be there (a wait that timed out).  Never attached in this
       * stage, so a plain remove, and the files go only if format agrees
       * they hold nothing; else the record says "added" and an unstage
       * drains it.
       */
      struct csi_err ignore;
      if (rec->step < REC_ADDED
          && (gateway_remove (n, s->v.export_name, false, &ignore) < 0
              || gateway_remove_files (n, s->v.export_name, &ignore) < 0))
        {
          rec->step = REC_ADDED;
          rec_save (n, rec, &ignore);
        }
      return -1;
    }
  rec->step = REC_ADDED;
  if (rec_save (n, rec, e) < 0
      || attach_device (n, s->v.export_name, fuse, s->r->readonly, &rec->att, e)
             < 0)
    return -1;
  rec->step = REC_ATTACHED;
  if (rec_save (n, rec, e) < 0
      || (!s->r->block && stage_mount (s, rec->att.dev, e) < 0))
    return -1;
  rec->step = REC_STAGED;
  return rec_save (n, rec, e);
}

/* Whether a complete stage is still in place. */
static bool
stage_intact (const struct rec *rec)
{
  if (rec->block)
    return access (rec->att.dev, F_OK) == 0;
  return mnt_is_mounted (rec->staging_path) == 1;
}

/* A record is there already: 1 when the stage is done, 0 to go on
 * with the steps (an earlier stage did not finish, or its device and
 * mount are gone, say after a reboot: detached, and done again; the
 * claim, the cred file and hhcctl volume add are idempotent).
 */
static int
stage_again (const struct csi_conf *c, const struct stage *s, struct rec *rec,
             struct csi_err *e)
{
  if (rec->step == REC_STAGED)
    {
      if (!node_same_path (rec->staging_path, s->r->staging_path))
        return csi_fail (e, CSI_FAILED_PRECONDITION,
                         "volume %s is staged at %s", s->v.id,
                         rec->staging_path);
      if (rec->block != s->r->block || rec->readonly != s->r->readonly
          || (!rec->block && strcmp (rec->fs_type, s->fs_type) != 0))
        return csi_fail (e, CSI_ALREADY_EXISTS,
                         "volume %s is staged with another access type, "
                         "access mode or file system",
                         s->v.id);
      if (stage_intact (rec))
        return 1;
      csi_log ("volume %s: staged, but no longer attached: again", s->v.id);
    }
  if (!rec->block && mnt_umount (rec->staging_path, e) < 0)
    return -1;
  if (rec->step >= REC_ATTACHED && attach_detach (&c->node, &rec->att, e) < 0)
    return -1;
  return 0;
}

int
csi_node_stage (const struct csi_conf *c, const struct csi_stage_req *r,
                struct csi_err *e)
{
  HHC_SCOPED_LOCK (&node_lock);
  struct stage s = { .r = r };
  struct rec rec;
  if (stage_check (c, &s, e) < 0)
    return -1;
  if (mkdir (c->node.state_dir, 0700) < 0 && errno != EEXIST)
    return csi_fail (e, CSI_INTERNAL, "mkdir %s: %s", c->node.state_dir,
                     strerror (errno));
  int have = rec_load (&c->node, s.v.export_name, &rec, e);
  if (have < 0)
    return -1;
  if (have == 0)
    {
      int done = stage_again (c, &s, &rec, e);
      if (done != 0)
        return done < 0 ? -1 : 0;
    }
  else
    {
      int count = rec_count (&c->node, e);
      if (count < 0)
        return -1;
      if (c->node.max_volumes && (unsigned)count >= c->node.max_volumes)
        return csi_fail (e, CSI_RESOURCE_EXHAUSTED,
                         "%d volumes are staged on this node (max_volumes)",
                         count);
    }
  uint64_t size;
  if (backend_size (&s.v, &r->secrets, &size, e) < 0
      || backend_claim (&s.v, r->node_id, &r->secrets, e) < 0)
    return -1;
  /* An earlier record keeps its step (detached by stage_again: at most
   * "added"), so a failure now never tears down less than was done.
   */
  if (have == 0)
    rec.step = rec.step < REC_ADDED ? rec.step : REC_ADDED;
  else
    {
      memset (&rec, 0, sizeof rec);
      rec.step = REC_CLAIMED;
    }
  snprintf (rec.volume_id, sizeof rec.volume_id, "%s", s.v.id);
  snprintf (rec.export_name, sizeof rec.export_name, "%s", s.v.export_name);
  snprintf (rec.staging_path, sizeof rec.staging_path, "%s", r->staging_path);
  snprintf (rec.fs_type, sizeof rec.fs_type, "%s", s.fs_type);
  rec.block = r->block, rec.readonly = r->readonly;
  if (stage_steps (c, &s, &rec, e) == 0)
    return 0;
  struct csi_err undo;
  if (teardown (c, r->node_id, &s.v, &rec, &undo) < 0)
    csi_log ("volume %s: undoing the stage: %s (NodeUnstageVolume goes on)",
             s.v.id, undo.msg);
  return -1;
}

/* ---- Unstage ---- */

int
csi_node_unstage (const struct csi_conf *c, const char *node_id,
                  const char *volume_id, const char *staging_path,
                  struct csi_err *e)
{
  HHC_SCOPED_LOCK (&node_lock);
  struct csi_volid v;
  struct rec rec;
  if (!staging_path || !*staging_path)
    return csi_fail (e, CSI_INVALID_ARGUMENT, "staging_target_path is missing");
  if (node_volume (c, volume_id, &v, e) < 0)
    return -1;
  int have = rec_load (&c->node, v.export_name, &rec, e);
  if (have < 0)
    return -1;
  if (have == 1) /* done already, or never staged */
    return mnt_umount (staging_path, e);
  if (!node_same_path (rec.staging_path, staging_path))
    return csi_fail (e, CSI_FAILED_PRECONDITION, "volume %s is staged at %s",
                     v.id, rec.staging_path);
  return teardown (c, node_id, &v, &rec, e);
}
